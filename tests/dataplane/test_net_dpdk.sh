#!/usr/bin/env bash
# The "dpdk" net provider (dataplane/net_dpdk.c) between two namespaced
# af_packet nodes: 200 rounds x 2 channels of isend/irecv (0 .. 100 KB, tag =
# round) checked byte for byte, then -EMSGSIZE and a tag mismatch, then 100
# rounds x 2 channels of irecv_reduce (int32 sum/max, out of place and in
# place, combined fragment by fragment as the frames land) checked element
# by element (tests/dataplane/helper_net); all of it again with the
# transport's [fault] injection dropping, duplicating and reordering frames
# (a duplicate combined twice would be a wrong element); then an isend whose
# payload the transport refuses (kept until its header's send_done) and a
# send closed before its ack (close_send resets it out of the transport).
. "$ZBMD_ROOT/tests/common/tap.sh"
. "$ZBMD_ROOT/tests/dataplane/lib.sh"
need_netns
TAG=nodenet$$
CL="$ZBMD_ROOT/scripts/cluster.sh --tag $TAG --dir $T/cl"
NET=$ZBMD_BUILD/tests/dataplane/helper_net
trap '$CL down >/dev/null 2>&1; cleanup_lib' EXIT
plan 9

$CL up 2 >/dev/null; ok $? "2 namespaces on a bridge"
run_pair() {  # label rounds
	local lbl=$1 rounds=$2
	for i in 1 2; do
		$CL exec $i "$NET" -c "$T/cl/node$i.ini" --rounds "$rounds" >"$T/$lbl$i" 2>&1 &
		eval N$i=$!; PIDS+=($!)
	done
	wait_for "$T/${lbl}1" '^DONE' 90 && wait_for "$T/${lbl}2" '^DONE' 90
	ok $? "$lbl: both nodes finished their rounds"
	kill -TERM $N1 $N2; wait $N1; r1=$?; wait $N2; r2=$?
	[ $r1 -eq 0 ] && [ $r2 -eq 0 ]; ok $? "$lbl: both exit 0 (every check passed: $r1 $r2)"
	grep -h '^FAIL' "$T/${lbl}1" "$T/${lbl}2" | head -5 | while read -r l; do diag "$l"; done
}
run_pair clean 200
for i in 1 2; do
	grep -qE "^RESULT node=$i rounds=200 ok=400 bad=0 errors=0 emsgsize=1 badtag=1 reduced=200 reduce_bad=0 fault_dups=[0-9]* fault_drops=[0-9]* placed=[0-9]* oversize=1 closed=1" "$T/clean$i"
	ok $? "node $i: 400 messages intact, oversize -> EMSGSIZE, wrong tag -> bad frame, 200 reductions exact, a refused payload's request kept until its header's send_done, a send closed before its ack reset out of the transport"
done
for i in 1 2; do
	printf '\n[fault]\ndrop_rate = 0.03\ndup_rate = 0.03\nreorder_rate = 0.1\nseed = %d\n' $((40 + i)) >> "$T/cl/node$i.ini"
done
run_pair faulty 50
for i in 1 2; do
	grep -qE "^RESULT node=$i rounds=50 ok=100 bad=0 errors=0 emsgsize=1 badtag=1 reduced=200 reduce_bad=0 fault_dups=[1-9][0-9]* fault_drops=[1-9][0-9]* placed=[1-9][0-9]* oversize=1 closed=1" "$T/faulty$i"
	ok $? "node $i, 3% loss + 3% duplicates + 10% reordering (injected: $(grep -o 'fault_dups=[0-9]* fault_drops=[0-9]* placed=[0-9]*' "$T/faulty$i")): every message and reduction exact"
done
done_testing
