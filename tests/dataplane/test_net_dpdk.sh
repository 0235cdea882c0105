#!/usr/bin/env bash
# The "dpdk" net provider (dataplane/net_dpdk.c) between two namespaced
# af_packet nodes: 200 rounds x 2 channels of isend/irecv (0 .. 100 KB, tag =
# round) checked byte for byte, then -EMSGSIZE and a tag mismatch
# (tests/dataplane/helper_net).
. "$ZBMD_ROOT/tests/common/tap.sh"
. "$ZBMD_ROOT/tests/dataplane/lib.sh"
need_netns
TAG=nodenet$$
CL="$ZBMD_ROOT/scripts/cluster.sh --tag $TAG --dir $T/cl"
NET=$ZBMD_BUILD/tests/dataplane/helper_net
trap '$CL down >/dev/null 2>&1; cleanup_lib' EXIT
plan 5

$CL up 2 >/dev/null; ok $? "2 namespaces on a bridge"
for i in 1 2; do
	$CL exec $i "$NET" -c "$T/cl/node$i.ini" --rounds 200 >"$T/n$i" 2>&1 &
	eval N$i=$!; PIDS+=($!)
done
wait_for "$T/n1" '^DONE' 60 && wait_for "$T/n2" '^DONE' 60
ok $? "both nodes finished their rounds"
kill -TERM $N1 $N2; wait $N1; r1=$?; wait $N2; r2=$?
[ $r1 -eq 0 ] && [ $r2 -eq 0 ]; ok $? "both exit 0 (every check passed: $r1 $r2)"
grep -h '^FAIL' "$T/n1" "$T/n2" | head -5 | while read -r l; do diag "$l"; done
for i in 1 2; do
	grep -q "^RESULT node=$i rounds=200 ok=400 bad=0 errors=0 emsgsize=1 badtag=1" "$T/n$i"
	ok $? "node $i: 400 messages intact, oversize -> EMSGSIZE, wrong tag -> bad frame"
done
done_testing
