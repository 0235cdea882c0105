#!/usr/bin/env bash
# Four nodes (two lcores each, adaptive idle) in namespaces on this 2-core
# machine: all start, all answer ping, they share the cores (idle CPU well
# below one core in total), all stop cleanly.
. "$ZBMD_ROOT/tests/common/tap.sh"
. "$ZBMD_ROOT/tests/dataplane/lib.sh"
need_netns
TAG=node4c$$
CL="$ZBMD_ROOT/scripts/cluster.sh --tag $TAG --dir $T/cl"
trap '$CL down >/dev/null 2>&1; cleanup_lib' EXIT
plan 5

$CL up 4 >/dev/null && $CL start >/dev/null; ok $? "4 nodes up and ready"
bad=0
for i in 1 2 3 4; do
	$CL exec probe ping -c 2 -i 0.2 -W 5 10.77.0.$i >/dev/null || bad=1
done
ok $bad "each node answers ping"

# CPU time (user+sys clock ticks) of the four processes over 2 s of idling
ticks() {
	local t=0
	for i in 1 2 3 4; do
		t=$((t + $(awk '{print $14 + $15}' "/proc/$(cat "$T/cl/node$i.pid")/stat")))
	done
	echo $t
}
hz=$(getconf CLK_TCK); t0=$(ticks); s0=$(date +%s%N)
sleep 2
t1=$(ticks); s1=$(date +%s%N)
pct=$(( (t1 - t0) * 100 * 1000000000 / hz / (s1 - s0) ))
[ $pct -lt 60 ]; ok $? "4 idle nodes use ${pct}% of one core together (< 60%)"
$CL stop; ok $? "all 4 exit 0 on SIGTERM"
n=$(grep -l '^zbmd: stopped cleanly' "$T"/cl/node*.log | wc -l)
[ "$n" -eq 4 ]; ok $? "4 logs say stopped cleanly"
done_testing
