#!/usr/bin/env bash
# Remote actors (zbmd/remote.h) between two nodes joined by net_memif
# (scripts/cluster-memif.sh), each hosting the actor runtime on its dataplane
# lcore as `zbmd run` does (tests/dataplane/helper_remote.c):
#   remote sends from several actors: per-pair FIFO, exactly once, intact
#   (content compared and checksummed), inline and buffer payloads (one- and
#   two-message, zero-copy); remote calls from a thread and from an actor
#   (inline and buffer payloads); a call timing out and its late reply
#   discarded; a slow remote actor whose full mailbox holds the transport
#   stream (backpressure, nothing lost); an unknown node refused at once;
#   then the serving node is stopped: a call and an actor's plain send come
#   back as ZB_ERR_PEER_DOWN, and later sends fail at once.
# ZBRA_BENCH=S also prints figures (round trips/s, one-way messages/s).
. "$ZBMD_ROOT/tests/common/tap.sh"
. "$ZBMD_ROOT/tests/dataplane/lib.sh"
TAG=zbra$$
CL="$ZBMD_ROOT/scripts/cluster-memif.sh --tag $TAG --dir $T/cl"
H=$ZBMD_BUILD/tests/dataplane/helper_remote
trap '$CL down >/dev/null 2>&1; cleanup_lib' EXIT
plan 24

# small mailboxes so that the slow actor's fills quickly; a peer that stops
# answering is declared down after 1 s
ZBN_EXTRA_INI=$'[actors]\nmailbox_capacity = 64' $CL up 2 >/dev/null
ok $? "memif cluster configs written"
sed -i '/^\[transport\]/a peer_timeout_ms = 1000' "$T/cl/node1.ini" "$T/cl/node2.ini"

# node 1 (the memif server) drives, node 2 (its client) serves the actors
"$H" -c "$T/cl/node1.ini" --drive "$T/ids" --down-flag "$T/down" \
	--senders 4 --count 5000 --bench "${ZBRA_BENCH:-0}" >"$T/drive.log" 2>&1 &
D=$!; PIDS+=($D)
wait_for "$T/drive.log" '^READY' 30
"$H" -c "$T/cl/node2.ini" --serve "$T/ids" >"$T/serve.log" 2>&1 &
S=$!; PIDS+=($S)
wait_for "$T/serve.log" '^READY' 30
ok $? "both nodes up (actors hosted, remote routing attached)" ||
	{ diag "$(tail -5 "$T/drive.log")"; diag "$(tail -5 "$T/serve.log")"; }

wait_for "$T/drive.log" '^(PHASE down|DONE)' 150 ||
	diag "driver did not reach the down phase: $(tail -3 "$T/drive.log")"
kill -TERM $S 2>/dev/null; wait_exit $S 30; wait $S; rs=$?
ok $([ $rs -eq 0 ]; echo $?) "serving node stopped cleanly (exit $rs)"
touch "$T/down"
wait_exit $D 60 || kill -KILL $D 2>/dev/null
wait $D; rd=$?

# every CHECK line of the driver is one test (20 expected)
n=0
while IFS= read -r line; do
	n=$((n + 1))
	case $line in
	"CHECK ok "*) ok 0 "${line#CHECK ok }" ;;
	*) ok 1 "${line#CHECK fail }" ;;
	esac
done < <(grep '^CHECK ' "$T/drive.log")
while [ $n -lt 20 ]; do n=$((n + 1)); ok 1 "driver check $n missing"; done
grep '^FIGURE' "$T/drive.log" | while IFS= read -r l; do diag "$l"; done
[ $rd -eq 0 ] || diag "$(grep -v "^CHECK" "$T/drive.log" | grep -v "^EAL\|^memif" | tail -12)"
ok $([ $rd -eq 0 ]; echo $?) "driver exits 0 (exit $rd)"
done_testing
