#!/usr/bin/env bash
# Two nodes joined by net_memif (scripts/cluster-memif.sh): the link comes
# up, they resolve each other by ARP over it, and stopping either side first
# is clean (exit 0, no crash) — in both orders, and the survivor keeps running.
# A client that starts before its server, and a server killed (-9) and
# started again while its client runs: the client's port is restarted until
# it connects (dataplane/port.c memif_reconnect) and the transfers complete.
. "$ZBMD_ROOT/tests/common/tap.sh"
. "$ZBMD_ROOT/tests/dataplane/lib.sh"
TAG=nodem$$
CL="$ZBMD_ROOT/scripts/cluster-memif.sh --tag $TAG --dir $T/cl"
trap '$CL down >/dev/null 2>&1; cleanup_lib' EXIT
plan 30

last() { grep "^$2" "$T/cl/node$1.log" | tail -1; }
# linked_and_learnt I: node I's port is up and it learnt its peer by ARP
linked_and_learnt() {
	local deadline=$((SECONDS + 30))
	while [ $SECONDS -lt $deadline ]; do
		kill -USR1 "$(cat "$T/cl/node$1.pid")" 2>/dev/null
		sleep 0.3
		last "$1" 'port.0 link' | grep -q 'link=up' &&
			last "$1" stats | grep -q 'arp_learned=1' && return 0
	done
	return 1
}

ZBN_PEER_MAC=arp $CL up 2 >/dev/null; ok $? "memif cluster configs written"
# (each round starts both afresh; reconnection is checked at the end)
for first in 1 2; do
	second=$((3 - first))
	$CL start >/dev/null; ok $? "both nodes ready (round: node $first stops first)"
	linked_and_learnt 1 && linked_and_learnt 2
	ok $? "memif link up both sides, peers resolved by ARP over it"
	$CL stop $first; ok $? "node $first ($([ $first = 1 ] && echo server || echo client)) stopped first: exits 0"
	sleep 1; kill -0 "$(cat "$T/cl/node$second.pid")"; ok $? "node $second survives its peer leaving"
	$CL stop $second; ok $? "node $second exits 0 after its peer left"
done

# Under load: the transport streams messages both ways over memif and one
# side is stopped mid-transfer (the case where testpmd's memif receiver used
# to crash when its peer left first). Neither may crash: the stopped one
# exits 1 (transfer incomplete), the survivor keeps running, then exits 0/1.
XFER=$ZBMD_BUILD/tests/dataplane/helper_xfer
for first in 1 2; do
	second=$((3 - first))
	"$XFER" -c "$T/cl/node1.ini" --count 2000 >"$T/m1" 2>&1 & M1=$!; PIDS+=($M1)
	wait_for "$T/m1" '^READY' 30   # the memif server, before its client
	"$XFER" -c "$T/cl/node2.ini" --count 2000 >"$T/m2" 2>&1 & M2=$!; PIDS+=($M2)
	wait_for "$T/m2" '^READY' 30; ok $? "transfer nodes up (round: node $first leaves first)" ||
		{ diag "$(tail -3 "$T/m1")"; diag "$(tail -3 "$T/m2")"; } ||
		{ diag "$(tail -3 "$T/m1")"; diag "$(tail -3 "$T/m2")"; }
	# a short transfer both ways first: the link carries the transport
	wait_for "$T/m1" '^DONE' 60 && wait_for "$T/m2" '^DONE' 60
	kill -TERM $M1 $M2 2>/dev/null
	wait $M1; r1=$?; wait $M2; r2=$?
	[ $r1 -eq 0 ] && [ $r2 -eq 0 ]; ok $? "2000 messages each way over memif, verified ($r1 $r2)"
	[ "$(grep -h '^RESULT' "$T/m1" "$T/m2" | grep -cE 'received=2000 bad=0 order=0')" = 2 ]
	ok $? "exactly once, in order, intact (both nodes)"
	"$XFER" -c "$T/cl/node1.ini" --count 1000000 >"$T/m1" 2>&1 & M1=$!; PIDS+=($M1)
	wait_for "$T/m1" '^READY' 30
	"$XFER" -c "$T/cl/node2.ini" --count 1000000 >"$T/m2" 2>&1 & M2=$!; PIDS+=($M2)
	wait_for "$T/m2" '^READY' 30
	sleep 1
	eval "F=\$M$first S=\$M$second"
	kill -TERM $F; wait $F; rf=$?
	sleep 1; kill -0 $S 2>/dev/null; alive=$?
	kill -TERM $S 2>/dev/null; wait $S; rs=$?
	[ $rf -le 1 ] && [ $alive -eq 0 ] && [ $rs -le 1 ]
	ok $? "node $first stopped mid-transfer: no crash on either side (exit $rf, survivor alive, exit $rs)" ||
		{ diag "node $first: $(tail -15 "$T/m$first")"; diag "node $second: $(tail -15 "$T/m$second")"; }
done

# Receiving without copying (helper_xfer --keep): every 200 kB message is
# taken as its frames (the memif PMD's mbufs: ~23 at MTU 9000, ~143 at MTU
# 1500) and checked through tp_msg_read. Both transports drop 2 %, duplicate
# 1 % and reorder 5 % of what they receive ([fault]): kept messages are
# repaired by retransmission and the frames held back for reordering
# (copies: nothing to keep) are resent. 3000 each way are 65,000 - 430,000
# kept frames per receiver against a pool of 8191 mbufs, so frames must go
# back to it as messages are released.
CL9="$ZBMD_ROOT/scripts/cluster-memif.sh --tag ${TAG}j --dir $T/cl9"
trap '$CL down >/dev/null 2>&1; $CL9 down >/dev/null 2>&1; cleanup_lib' EXIT
FAULT=$'[fault]\ndrop_rate = 0.02\ndup_rate = 0.01\nreorder_rate = 0.05\nseed = 3'
kept() { grep -h "^$3" "$T/p$1" | grep -oE " $2=[0-9]+" | cut -d= -f2; }
# keep_run MTU POOL: 3000 x 200 kB each way over a lossy memif pair whose
# ports use [dataplane] mbuf_pool = POOL; sets r1 r2
keep_run() {
	ZBN_MTU=$1 ZBN_EXTRA_INI=$FAULT $CL9 up 2 >/dev/null
	sed -i "/^\[dataplane\]/a mbuf_pool = $2" "$T"/cl9/node*.ini
	"$XFER" -c "$T/cl9/node1.ini" --count 3000 --size 200000 --keep >"$T/p1" 2>&1 & P1=$!; PIDS+=($P1)
	wait_for "$T/p1" '^READY' 30
	"$XFER" -c "$T/cl9/node2.ini" --count 3000 --size 200000 --keep >"$T/p2" 2>&1 & P2=$!; PIDS+=($P2)
	wait_for "$T/p1" '^DONE' 120 && wait_for "$T/p2" '^DONE' 120
	kill -TERM $P1 $P2 2>/dev/null; wait $P1; r1=$?; wait $P2; r2=$?
	$CL9 down >/dev/null 2>&1
	[ "$(grep -h '^RESULT' "$T/p1" "$T/p2" | grep -cE 'received=3000 bad=0 order=0 ')" = 2 ]
}
# a message whose first fragment was held back goes to the arena (no frame
# to keep): ~5 % here; the rest must be kept
kept_most() {
	[ "$(kept 1 kept RESULT)" -ge 2700 ] && [ "$(kept 2 kept RESULT)" -ge 2700 ] &&
		[ "$(kept 2 fault_drops TPSTATS)" -gt 0 ] && [ "$(kept 2 keep_unkept TPSTATS)" -gt 0 ]
}
kept_note() { echo "$(kept 1 kept RESULT) and $(kept 2 kept RESULT) of 3000 delivered as frames (frames_kept=$(kept 2 frames_kept TPSTATS), fault_drops=$(kept 2 fault_drops TPSTATS), keep_unkept=$(kept 2 keep_unkept TPSTATS))"; }
for mtu in 9000 1500; do
	keep_run $mtu stack; v=$?
	[ $r1 -eq 0 ] && [ $r2 -eq 0 ] && [ $v -eq 0 ]
	ok $? "kept frames, MTU $mtu, stack pools, lossy transports: 3000 x 200 kB each way, exactly once, in order, intact ($r1 $r2)" ||
		{ diag "$(tail -3 "$T/p1")"; diag "$(tail -3 "$T/p2")"; }
	kept_most; ok $? "MTU $mtu: $(kept_note)"
done
# a FIFO ring pool: frames are not kept below MTU 4000 (dataplane/link.c),
# the same messages are copied
keep_run 1500 ring; v=$?
[ $r1 -eq 0 ] && [ $r2 -eq 0 ] && [ $v -eq 0 ] && [ "$(kept 1 kept RESULT)" = 0 ] && [ "$(kept 2 kept RESULT)" = 0 ]
ok $? "MTU 1500, ring pools: the same transfer copied, none kept ($r1 $r2; $(kept_note))" ||
	{ diag "$(tail -3 "$T/p1")"; diag "$(tail -3 "$T/p2")"; }

# DPDK 22.11's memif client connects only when its port starts: the
# dataplane starts a client port again every 0.5 s while its link is down.
# The client first, its server 1.5 s later:
"$XFER" -c "$T/cl/node2.ini" --count 2000 >"$T/k2" 2>&1 & K2=$!; PIDS+=($K2)
wait_for "$T/k2" '^READY' 30; ok $? "the client starts with no server there (READY)" ||
	diag "$(tail -3 "$T/k2")"
sleep 1.5
"$XFER" -c "$T/cl/node1.ini" --count 2000 >"$T/k1" 2>&1 & K1=$!; PIDS+=($K1)
wait_for "$T/k1" '^DONE' 60 && wait_for "$T/k2" '^DONE' 60
kill -TERM $K1 $K2 2>/dev/null; wait $K1; r1=$?; wait $K2; r2=$?
[ $r1 -eq 0 ] && [ $r2 -eq 0 ] &&
	[ "$(grep -h '^RESULT' "$T/k1" "$T/k2" | grep -cE 'received=2000 bad=0 order=0')" = 2 ]
ok $? "its server starts 1.5 s later: 2000 messages each way, exactly once, in order, intact ($r1 $r2)" ||
	{ diag "$(tail -4 "$T/k1")"; diag "$(tail -4 "$T/k2")"; }
grep -q 'restarted to reconnect' "$T/k2" && grep -qE 'memif_reconnects=[1-9]' "$T/k2"
ok $? "the client's port was started again until it connected ($(grep -oE 'memif_reconnects=[0-9]+' "$T/k2"))"
# The server killed (-9) while its client streams, then started again:
"$XFER" -c "$T/cl/node1.ini" --count 2000 --survive >"$T/v1" 2>&1 & V1=$!; PIDS+=($V1)
wait_for "$T/v1" '^READY' 30
"$XFER" -c "$T/cl/node2.ini" --count 1000000 --survive --rate 1000 >"$T/v2" 2>&1 & V2=$!; PIDS+=($V2)
wait_for "$T/v1" '^DONE' 60; ok $? "server and client stream both ways (the server's 2000 acknowledged)"
kill -KILL $V1; wait $V1 2>/dev/null
sleep 1
"$XFER" -c "$T/cl/node1.ini" --count 2000 --survive >"$T/v1b" 2>&1 & V1B=$!; PIDS+=($V1B)
wait_for "$T/v1b" '^DONE' 60
ok $? "the server started again: its 2000 messages reach the running client and are acknowledged" ||
	diag "$(grep -h 'reconnect\|EVENT\|FAIL' "$T/v2" | tail -4)"
kill -TERM $V1B $V2 2>/dev/null; wait $V1B; rb=$?; wait $V2
grep -q 'EVENT node=2 peer=1 restarted' "$T/v2" && grep -qE 'memif_reconnects=[1-9]' "$T/v2" &&
	[ $rb -eq 0 ]
ok $? "the client reconnected and saw the new incarnation (restarted event); the new server exits 0 ($rb)"
done_testing
