#!/usr/bin/env bash
# Remote actors over the net carrier ([actors] carrier = tcp, docs/remote.md
# "Carriers"): a call to a third node that is configured but never starts
# fails after connect_timeout_ms while calls to the live one go on; two nodes without DPDK ports (EAL lcores only) whose remote
# actor messages travel over their own instance of the tcp net provider on
# loopback addresses. The same driver and serving actors as test_remote.sh
# (tests/dataplane/helper_remote.c): per-pair FIFO, exactly once, intact
# (content compared and checksummed) across inline runs, buffer payloads of
# one and of many carrier messages (64 KiB .. 8 MiB, reassembled), calls
# from threads and actors, timeouts and late replies, a slow actor's full
# mailbox holding the carrier (backpressure, nothing lost), malformed
# records counted and dropped; then the serving node goes silent (SIGSTOP:
# no connection reset, so the carrier must notice the silence within
# peer_timeout_ms): calls and sends to it come back as ZB_ERR_PEER_DOWN; it is started again (a new
# process): the carrier reconnects, calls and 4000 messages reach its new
# actors, and a call to the old incarnation's echo id fails with
# ZB_ERR_STALE_ID (the new echo, in the same slot, answered it when every
# slot started at generation 1). The provider under it is the
# interface the rdma provider implements too (no RDMA device here).
. "$ZBMD_ROOT/tests/common/tap.sh"
. "$ZBMD_ROOT/tests/dataplane/lib.sh"
H=$ZBMD_BUILD/tests/dataplane/helper_remote
trap 'cleanup_lib' EXIT
plan 54

# a loopback pair of addresses and a port of our own (parallel test runs)
A=$(( ($$ >> 8) % 200 + 20 )); B=$(( $$ % 250 + 1 ))
PORT=$(( 20000 + ($$ % 4000) * 4 ))
for n in 1 2; do
	PREFIXES+=("zbrn$$-$n")
	# node 2 polls on CPU 0 (its main lcore on CPU 1), node 1 on CPU 1: the
	# two loops never share a CPU (scripts/cluster.sh does the same)
	xa=""; [ $n -eq 2 ] && xa="extra_args = --main-lcore 1"
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
$xa
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
connect_timeout_ms = 1500
[peer.1]
ip = 127.$A.$B.1
[peer.2]
ip = 127.$A.$B.2
[peer.3]
ip = 127.$A.$B.3
EOC
done

mkdir -p "$T/run"
REMOTE_DOWN_SIG=STOP REMOTE_GHOST=3 remote_pair tcp "$T/run" "$H" "$T/node1.ini" "$T/node2.ini" \
	'^READY node=1 lanes=1 streams=0\.\.7$' 31 restart
grep -q '^CARRIER tcp$' "$T/run/drive.log" && grep -q '^CARRIER tcp$' "$T/run/serve.log"
ok $? "both nodes carried remote messages over tcp (CARRIER tcp)"
grep '^# stats' "$T/run/drive.log" | while IFS= read -r l; do diag "$l"; done

# malformed carrier messages from the wire: a fresh node 2 serves; a fuzzer
# posing as node 1 connects to its carrier and sends 12 kinds of wrong
# (short, bad magic, unknown kind, length mismatch, fragment out of
# sequence, short first fragment, credits for nothing and with a body, a
# reassembly broken by a whole message, a refusal without its limit and
# one for nothing, the skip of a refused message broken by a whole one):
# each counted, dropped, node alive
mkdir -p "$T/fz"
"$H" -c "$T/node2.ini" --serve "$T/fz/ids" >"$T/fz/serve.log" 2>&1 &
s=$!; PIDS+=($s)
wait_for "$T/fz/serve.log" '^READY' 30 || diag "fuzz target: $(tail -3 "$T/fz/serve.log")"
"$ZBMD_BUILD/tests/dataplane/helper_carrier_fuzz" -c "$T/node1.ini" --peer 2 >"$T/fz/fuzz.log" 2>&1
ok $? "fuzzer (as node 1) reached node 2's carrier and wrote its messages ($(tail -1 "$T/fz/fuzz.log"))"
kill -0 $s 2>/dev/null; alive=$?
kill -TERM $s 2>/dev/null; wait_exit $s 30; wait $s; rs=$?
[ $alive -eq 0 ] && [ $rs -eq 0 ]
ok $? "node 2 survived them and stopped cleanly (exit $rs)"
grep -q '^EXIT node=2 .* carrier_bad=12 .* carrier_refused=1 ' "$T/fz/serve.log"
ok $? "node 2 counted the 12 malformed carrier messages and the one refused ($(grep -o 'carrier_bad=[0-9]*\|carrier_refused=[0-9]*' "$T/fz/serve.log" | tr '\n' ' '))"

# a message larger than the receiver takes (node 2: max_message_mb = 1):
# node 2's carrier skips the 2 MiB payload and answers REFUSE, so node 1's
# sender hears -EMSGSIZE (it was told "sent" before) and node 2 drops the
# header it held; node 1 learns the limit, so a second one is refused
# before its header goes; the small messages around them arrive in order;
# reserved tags to a node 2 actor are refused by the sender, and a raw
# message to node 2 with 2 records it refuses among 3 valid ones delivers
# those 3 (the same driver checks as test_remote.sh [defects size])
mkdir -p "$T/big"
sed '/^\[transport\]/a max_message_mb = 1' "$T/node2.ini" >"$T/big/node2.ini"
"$H" -c "$T/node1.ini" --drive "$T/big/ids" --defects size >"$T/big/drive.log" 2>&1 &
d=$!; PIDS+=($d)
wait_for "$T/big/drive.log" '^READY' 30
"$H" -c "$T/big/node2.ini" --serve "$T/big/ids" --defects size >"$T/big/serve.log" 2>&1 &
s=$!; PIDS+=($s)
wait_for "$T/big/serve.log" '^READY' 30 && wait_for "$T/big/drive.log" '^READY' 1
ok $? "[defects size, tcp] both nodes up" ||
	{ diag "$(tail -5 "$T/big/drive.log")"; diag "$(tail -5 "$T/big/serve.log")"; }
wait_exit $d 90 || kill -KILL $d 2>/dev/null
wait $d; rd=$?
kill -TERM $s 2>/dev/null; wait_exit $s 30; wait $s; rs=$?
ok $([ $rs -eq 0 ]; echo $?) "[defects size, tcp] serving node stopped cleanly (exit $rs)"
grep -h '^# ' "$T/big/drive.log" "$T/big/serve.log" | while IFS= read -r l; do diag "[defects size, tcp] $l"; done
driver_checks "defects size, tcp" "$T/big/drive.log" 11 $rd
grep -q '^EXIT node=2 .* carrier_refused=1 refused_in=1$' "$T/big/serve.log"
ok $? "[defects size, tcp] node 2's carrier refused the one 2 MiB message that reached it ($(grep -o 'carrier_refused=[0-9]* refused_in=[0-9]*' "$T/big/serve.log"))"
done_testing
