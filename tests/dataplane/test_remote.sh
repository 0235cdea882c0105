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
#   with two (~12 s in all). Then the figures mode make bench-transport
#   uses (--bench-only): 64-byte messages from 2 actors, each one checked by
#   the receiving actor, and actor call round trips with their percentiles.
# Then the defect scenarios (--defects; node 2 with [transport]
# max_message_mb = 1, one lane): a call to an exited remote actor fails at
# once with ZB_ERR_STALE_ID (thread and actor); a 2 MiB buffer to node 2,
# whose limit node 1 has learnt, comes back as one UNDELIVERED -EMSGSIZE and
# the 3 small messages after it on the same pair are each received or
# reported undelivered; ACT_TAG_DOWN and an ACT_TAG_UNDELIVERED that is not
# a call's reply to a node 2 actor are refused by the sender (-EINVAL), and
# one transport message to node 2 with a reserved-tag record and one for
# another node among 3 valid ones delivers those 3, in order, the 2 counted
# as malformed; the same buffer as the first data to node 2 (limit
# not learnt) comes back as -EMSGSIZE and a remote link across the pair is
# then held by both sides or by neither (~12 s in all today, ~5 s once fixed).
# ZBRA_BENCH=S also prints figures (round trips/s, one-way messages/s).
. "$ZBMD_ROOT/tests/common/tap.sh"
. "$ZBMD_ROOT/tests/dataplane/lib.sh"
TAG=zbra$$
H=$ZBMD_BUILD/tests/dataplane/helper_remote
CLS="$ZBMD_ROOT/scripts/cluster-memif.sh --tag ${TAG}"
trap '$CLS''1 --dir $T/r1/cl down >/dev/null 2>&1; $CLS''2 --dir $T/r2/cl down >/dev/null 2>&1; $CLS''b --dir $T/rb/cl down >/dev/null 2>&1; $CLS''size --dir $T/dsize/cl down >/dev/null 2>&1; $CLS''first --dir $T/dfirst/cl down >/dev/null 2>&1; $CLS''rs --dir $T/rs/cl down >/dev/null 2>&1; cleanup_lib' EXIT
plan 100

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
	# node 1 (the memif server) drives, node 2 (its client) serves the
	# actors; 26 driver checks
	remote_pair "$lanes lane(s)" "$dir" "$H" "$dir/cl/node1.ini" "$dir/cl/node2.ini" \
		"^READY node=1 lanes=$lanes streams=8\.\.15\$" 26
	$cl down >/dev/null 2>&1
}
round 0-1 1
round 0-2 2

# --bench-only: 2 actors x 20000 messages of 64 bytes (ACT_INLINE_MAX),
# 500 round trips; the driver's 3 start-up checks and its 2 figure checks
B=$T/rb; mkdir -p "$B"
CLB="$CLS""b --dir $B/cl"
$CLB up 2 >/dev/null
# node 1, the memif server, first (as remote_pair): its socket must exist
# before node 2's client port starts
timeout -k 5 120 $CLB exec 1 "$H" -c "$B/cl/node1.ini" --drive "$B/ids" \
	--bench-only 500 --senders 2 --count 20000 >"$B/drive.log" 2>&1 &
dp=$!; PIDS+=($dp)
wait_for "$B/drive.log" '^READY' 30
$CLB exec 2 "$H" -c "$B/cl/node2.ini" --serve "$B/ids" >"$B/serve.log" 2>&1 &
sp=$!; PIDS+=($sp)
wait $dp; rd=$?
kill -TERM $sp 2>/dev/null; wait $sp
$CLB down >/dev/null 2>&1
[ $rd = 0 ] && [ "$(grep -c '^CHECK ok' "$B/drive.log")" = 5 ] && ! grep -q '^CHECK fail' "$B/drive.log"
ok $? "--bench-only: exit 0, 5 checks passed (40000 messages of 64 bytes in order and intact, 500 round trips)" ||
	diag "$(grep -v '^EAL' "$B/drive.log" | tail -5)"
rate=$(sed -nE 's/^RESULT actor_rate_Mmsgs=([0-9.]+) msgs=40000 .*bytes=64 .*/\1/p' "$B/drive.log")
awk -v r="$rate" 'BEGIN { exit !(r + 0 > 0) }'
ok $? "it reports the rate of 64-byte messages delivered to the actor (${rate:-none} M msg/s)"
rtt=$(sed -nE 's/^RESULT actor_rtt_p50_us=([0-9.]+) actor_rtt_p99_us=([0-9.]+) actor_rtt_min_us=([0-9.]+) trips=500$/\3 \1 \2/p' "$B/drive.log")
set -- $rtt
awk -v a="${1:-0}" -v b="${2:-0}" -v c="${3:-0}" 'BEGIN { exit !(a > 0 && a <= b && b <= c) }'
ok $? "and the round trips' min <= p50 <= p99 (${rtt:-none} us)"

# defect_round MODE PEER_TIMEOUT_MS NCHECKS: helper_remote --defects MODE
# between two fresh memif nodes (one lane), node 2 (serving) with
# [transport] max_message_mb = 1: configs, both up, the serving node
# stopped cleanly, then the driver's checks (NCHECKS + 1): NCHECKS + 4 tests
defect_round() {
	local mode=$1 pto=$2 nchecks=$3 dir=$T/d$1 d s rd rs xa=""
	local cl="$ZBMD_ROOT/scripts/cluster-memif.sh --tag $TAG$1 --dir $T/d$1/cl"
	mkdir -p "$dir"
	ZBN_LCORES=0-1 $cl up 2 >/dev/null
	ok $? "[defects $mode] memif cluster configs written"
	sed -i "/^\[transport\]/a peer_timeout_ms = $pto" "$dir/cl/node1.ini" "$dir/cl/node2.ini"
	sed -i '/^\[transport\]/a max_message_mb = 1' "$dir/cl/node2.ini"
	[ "$mode" = first ] && xa="--link-file $dir/link"
	"$H" -c "$dir/cl/node1.ini" --drive "$dir/ids" --defects "$mode" $xa >"$dir/drive.log" 2>&1 &
	d=$!; PIDS+=($d)
	wait_for "$dir/drive.log" '^READY' 30
	"$H" -c "$dir/cl/node2.ini" --serve "$dir/ids" --defects "$mode" $xa >"$dir/serve.log" 2>&1 &
	s=$!; PIDS+=($s)
	wait_for "$dir/serve.log" '^READY' 30 && wait_for "$dir/drive.log" '^READY' 1
	ok $? "[defects $mode] both nodes up" ||
		{ diag "$(tail -5 "$dir/drive.log")"; diag "$(tail -5 "$dir/serve.log")"; }
	wait_exit $d 90 || kill -KILL $d 2>/dev/null
	wait $d; rd=$?
	kill -TERM $s 2>/dev/null; wait_exit $s 30; wait $s; rs=$?
	ok $([ $rs -eq 0 ]; echo $?) "[defects $mode] serving node stopped cleanly (exit $rs)" ||
		diag "$(grep -v '^EAL\|^memif' "$dir/serve.log" | tail -5)"
	grep -h '^# ' "$dir/drive.log" "$dir/serve.log" | while IFS= read -r l; do diag "[defects $mode] $l"; done
	driver_checks "defects $mode" "$dir/drive.log" "$nchecks" $rd
	$cl down >/dev/null 2>&1
}
# ids read, echo elsewhere, first call, 2 dead-actor calls, -EMSGSIZE, the 3
# after it, their order, a second -EMSGSIZE and seq 4, reserved tags refused
# by the sender, valid records around 2 refused ones in one message delivered
defect_round size 2000 11
# ids read, echo elsewhere, linked, -EMSGSIZE, the two sides agree
defect_round first 60000 5

# a restart seen by two lanes at different times (helper_remote --defects
# restart): two memif nodes with two lanes each, no lane calls node 2 down
# (link_down_ms = 0, peer_timeout_ms 60 s); node 2 is killed (-9) and
# started again; node 1's lane 0 sees the new incarnation, a link to it is
# made over lane 0, then lane 1 sees it: the link survives (9 driver checks)
R=$T/rs; CLR="$CLS""rs --dir $R/cl"
mkdir -p "$R"
ZBN_LCORES=0-2 $CLR up 2 >/dev/null
ok $? "[restart, 2 lanes] memif cluster configs written"
sed -i '/^\[transport\]/a peer_timeout_ms = 60000\nlink_down_ms = 0' "$R/cl/node1.ini" "$R/cl/node2.ini"
"$H" -c "$R/cl/node1.ini" --drive "$R/ids" --defects restart --restart-flag "$R/restarted" >"$R/drive.log" 2>&1 &
d=$!; PIDS+=($d)
wait_for "$R/drive.log" '^READY' 30
"$H" -c "$R/cl/node2.ini" --serve "$R/ids" --defects restart >"$R/serve.log" 2>&1 &
s=$!; PIDS+=($s)
wait_for "$R/serve.log" '^READY' 30 && grep -q '^READY node=1 lanes=2 ' "$R/drive.log"
ok $? "[restart, 2 lanes] both nodes up, node 1 with two lanes" ||
	{ diag "$(tail -5 "$R/drive.log")"; diag "$(tail -5 "$R/serve.log")"; }
wait_for "$R/drive.log" '^(PHASE restart|DONE)' 60 || diag "driver did not reach the restart: $(tail -3 "$R/drive.log")"
kill -KILL $s 2>/dev/null; wait $s 2>/dev/null
rm -f "$R/ids"
"$H" -c "$R/cl/node2.ini" --serve "$R/ids" --defects restart >"$R/serve2.log" 2>&1 &
s=$!; PIDS+=($s)
wait_for "$R/serve2.log" '^READY' 30 || diag "restarted node: $(tail -3 "$R/serve2.log")"
touch "$R/restarted"
wait_exit $d 120 || kill -KILL $d 2>/dev/null
wait $d; rd=$?
kill -TERM $s 2>/dev/null; wait_exit $s 30; wait $s; rs=$?
ok $([ $rs -eq 0 ]; echo $?) "[restart, 2 lanes] restarted node stopped cleanly (exit $rs)" ||
	diag "$(grep -v '^EAL\|^memif' "$R/serve2.log" | tail -5)"
driver_checks "restart, 2 lanes" "$R/drive.log" 9 $rd
$CLR down >/dev/null 2>&1
done_testing
