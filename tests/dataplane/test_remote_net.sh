#!/usr/bin/env bash
# Remote actors over the net carrier ([actors] carrier = tcp, docs/remote.md
# "Carriers"): two nodes without DPDK ports (EAL lcores only) whose remote
# actor messages travel over their own instance of the tcp net provider on
# loopback addresses. The same driver and serving actors as test_remote.sh
# (tests/dataplane/helper_remote.c): per-pair FIFO, exactly once, intact
# (content compared and checksummed) across inline runs, buffer payloads of
# one and of many carrier messages (64 KiB .. 8 MiB, reassembled), calls
# from threads and actors, timeouts and late replies, a slow actor's full
# mailbox holding the carrier (backpressure, nothing lost), malformed
# records counted and dropped; then the serving node is stopped: calls and
# sends to it come back as ZB_ERR_PEER_DOWN. The provider under it is the
# interface the rdma provider implements too (no RDMA device here).
. "$ZBMD_ROOT/tests/common/tap.sh"
. "$ZBMD_ROOT/tests/dataplane/lib.sh"
H=$ZBMD_BUILD/tests/dataplane/helper_remote
trap 'cleanup_lib' EXIT
plan 29

# a loopback pair of addresses and a port of our own (parallel test runs)
A=$(( ($$ >> 8) % 200 + 20 )); B=$(( $$ % 250 + 1 ))
PORT=$(( 20000 + ($$ % 4000) * 4 ))
for n in 1 2; do
	PREFIXES+=("zbrn$$-$n")
	cat >"$T/node$n.ini" <<EOC
[node]
id = $n
name = node$n
[eal]
lcores = 0-1
memory_mb = 256
hugepages = false
file_prefix = zbrn$$-$n
log_level = 4
[dataplane]
idle = adaptive
[cluster]
id = 91
[control]
enabled = off
[actors]
mailbox_capacity = 64
carrier = tcp
[transport]
tcp_port = $PORT
peer_timeout_ms = 2000
[peer.1]
ip = 127.$A.$B.1
[peer.2]
ip = 127.$A.$B.2
EOC
done

"$H" -c "$T/node1.ini" --drive "$T/ids" --down-flag "$T/down" --senders 4 \
	--count 5000 --bench "${ZBRA_BENCH:-0}" >"$T/drive.log" 2>&1 &
d=$!; PIDS+=($d)
wait_for "$T/drive.log" '^READY' 30
"$H" -c "$T/node2.ini" --serve "$T/ids" >"$T/serve.log" 2>&1 &
s=$!; PIDS+=($s)
wait_for "$T/serve.log" '^READY' 30 && grep -q '^CARRIER tcp$' "$T/drive.log" &&
	grep -q '^CARRIER tcp$' "$T/serve.log" && grep -q '^READY node=1 lanes=1 streams=0\.\.7$' "$T/drive.log"
ok $? "both nodes up, remote routing attached over the tcp carrier (one lane, streams 0..7)" ||
	{ diag "$(tail -5 "$T/drive.log")"; diag "$(tail -5 "$T/serve.log")"; }
wait_for "$T/drive.log" '^(PHASE down|DONE)' 150 ||
	diag "driver did not reach the down phase: $(tail -3 "$T/drive.log")"
kill -TERM $s 2>/dev/null; wait_exit $s 30; wait $s; rs=$?
ok $([ $rs -eq 0 ]; echo $?) "serving node stopped cleanly (exit $rs)"
touch "$T/down"
wait_exit $d 60 || kill -KILL $d 2>/dev/null
wait $d; rd=$?
n=0
while IFS= read -r line; do
	n=$((n + 1))
	case $line in
	"CHECK ok "*) ok 0 "${line#CHECK ok }" ;;
	*) ok 1 "${line#CHECK fail }" ;;
	esac
done < <(grep '^CHECK ' "$T/drive.log")
while [ $n -lt 26 ]; do n=$((n + 1)); ok 1 "driver check $n missing"; done
grep '^FIGURE\|^# stats' "$T/drive.log" | while IFS= read -r l; do diag "$l"; done
[ $rd -eq 0 ] || diag "$(grep -v "^CHECK" "$T/drive.log" | grep -v "^EAL" | tail -12)"
ok $([ $rd -eq 0 ]; echo $?) "driver exits 0 (exit $rd)"
done_testing
