#!/usr/bin/env bash
# Remote actors (zbmd/remote.h) between two nodes joined by net_memif
# (scripts/cluster-memif.sh), each hosting the actor runtime on its dataplane
# lcore as `zbmd run` does (tests/dataplane/helper_remote.c):
#   remote sends from several actors: per-pair FIFO, exactly once, intact
#   (content compared and checksummed), inline and buffer payloads (one- and
#   two-message, zero-copy), inline runs coalesced; remote calls from a
#   thread and from an actor (inline, buffer, RDMA and GPU descriptor
#   payloads); a call timing out and its late reply discarded (thread and
#   actor); a slow remote actor whose full mailbox holds the transport stream
#   (backpressure, nothing lost); an unknown node refused at once; malformed
#   messages counted and dropped; everything routed acknowledged; then the
#   serving node is stopped: a call and an actor's plain send come back as
#   ZB_ERR_PEER_DOWN, and later sends fail at once. Once with one lane, once
#   with two (~12 s in all).
# ZBRA_BENCH=S also prints figures (round trips/s, one-way messages/s).
. "$ZBMD_ROOT/tests/common/tap.sh"
. "$ZBMD_ROOT/tests/dataplane/lib.sh"
TAG=zbra$$
H=$ZBMD_BUILD/tests/dataplane/helper_remote
CLS="$ZBMD_ROOT/scripts/cluster-memif.sh --tag ${TAG}"
trap '$CLS''1 --dir $T/r1/cl down >/dev/null 2>&1; $CLS''2 --dir $T/r2/cl down >/dev/null 2>&1; cleanup_lib' EXIT
plan 60

# one round: ZBN_LCORES=$1 (0-1: one lane; 0-2: two lanes, actors spread and
# stolen across two workers, pairs hashed to two transport instances)
round() {
	local lc=$1 lanes=$2 dir=$T/r$2 cl="$ZBMD_ROOT/scripts/cluster-memif.sh --tag $TAG$2 --dir $T/r$2/cl"
	mkdir -p "$dir"
	# small mailboxes so that the slow actor's fills quickly; a peer that
	# stops answering is declared down after 2 s (1 s is too short when other
	# jobs load this machine: a starved lcore looks like a dead peer)
	ZBN_LCORES=$lc ZBN_EXTRA_INI=$'[actors]\nmailbox_capacity = 64' $cl up 2 >/dev/null
	ok $? "[$lanes lane(s)] memif cluster configs written"
	sed -i '/^\[transport\]/a peer_timeout_ms = 2000\nwindow = 64' "$dir/cl/node1.ini" "$dir/cl/node2.ini"
	[ -n "${ZBRA_SPIN_US:-}" ] && sed -i "/^\\[dataplane\\]/a idle_spin_us = $ZBRA_SPIN_US" "$dir/cl/node1.ini" "$dir/cl/node2.ini"
	# node 1 (the memif server) drives, node 2 (its client) serves the actors
	"$H" -c "$dir/cl/node1.ini" --drive "$dir/ids" --down-flag "$dir/down" \
		--senders 4 --count 5000 --bench "${ZBRA_BENCH:-0}" >"$dir/drive.log" 2>&1 &
	local d=$! s rs rd n=0 line
	PIDS+=($d)
	wait_for "$dir/drive.log" '^READY' 30
	"$H" -c "$dir/cl/node2.ini" --serve "$dir/ids" >"$dir/serve.log" 2>&1 &
	s=$!; PIDS+=($s)
	wait_for "$dir/serve.log" '^READY' 30 && grep -q "^READY node=1 lanes=$lanes streams=8\.\.15$" "$dir/drive.log"
	ok $? "[$lanes lane(s)] both nodes up (actors hosted, remote routing attached on streams 8..15)" ||
		{ diag "$(tail -5 "$dir/drive.log")"; diag "$(tail -5 "$dir/serve.log")"; }
	wait_for "$dir/drive.log" '^(PHASE down|DONE)' 150 ||
		diag "driver did not reach the down phase: $(tail -3 "$dir/drive.log")"
	kill -TERM $s 2>/dev/null; wait_exit $s 30; wait $s; rs=$?
	ok $([ $rs -eq 0 ]; echo $?) "[$lanes lane(s)] serving node stopped cleanly (exit $rs)"
	touch "$dir/down"
	wait_exit $d 60 || kill -KILL $d 2>/dev/null
	wait $d; rd=$?
	# every CHECK line of the driver is one test (26 expected)
	while IFS= read -r line; do
		n=$((n + 1))
		case $line in
		"CHECK ok "*) ok 0 "[$lanes lane(s)] ${line#CHECK ok }" ;;
		*) ok 1 "[$lanes lane(s)] ${line#CHECK fail }" ;;
		esac
	done < <(grep '^CHECK ' "$dir/drive.log")
	while [ $n -lt 26 ]; do n=$((n + 1)); ok 1 "[$lanes lane(s)] driver check $n missing"; done
	grep '^FIGURE' "$dir/drive.log" | while IFS= read -r l; do diag "[$lanes lane(s)] $l"; done
	[ $rd -eq 0 ] || diag "$(grep -v "^CHECK" "$dir/drive.log" | grep -v "^EAL\|^memif" | tail -12)"
	ok $([ $rd -eq 0 ]; echo $?) "[$lanes lane(s)] driver exits 0 (exit $rd)"
	$cl down >/dev/null 2>&1
}
round 0-1 1
round 0-2 2
done_testing
