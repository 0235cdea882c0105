#!/usr/bin/env bash
# Two nodes joined by net_memif (scripts/cluster-memif.sh): the link comes
# up, they resolve each other by ARP over it, and stopping either side first
# is clean (exit 0, no crash) — in both orders, and the survivor keeps running.
. "$ZBMD_ROOT/tests/common/tap.sh"
. "$ZBMD_ROOT/tests/dataplane/lib.sh"
TAG=nodem$$
CL="$ZBMD_ROOT/scripts/cluster-memif.sh --tag $TAG --dir $T/cl"
trap '$CL down >/dev/null 2>&1; cleanup_lib' EXIT
plan 19

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
# (DPDK 22.11's memif client connects only at start: a restarted server is
#  not rejoined by a running client, so each round starts both afresh)
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
	grep -h '^RESULT' "$T/m1" "$T/m2" | grep -qE 'received=2000 bad=0 order=0'
	ok $? "exactly once, in order, intact"
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
done_testing
