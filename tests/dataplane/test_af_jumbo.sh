#!/usr/bin/env bash
# Jumbo frames on net_af_packet (DPDK 22.11 advertises 1518-byte frames for
# it whatever its ring frames hold): with a vdev framesz= that holds the
# frame, a port of MTU 9000 runs and moves 9000-byte frames both ways (a
# ping of 8972 bytes that may not be fragmented, from a kernel namespace);
# without it, the node refuses to start and says what to set.
. "$ZBMD_ROOT/tests/common/tap.sh"
. "$ZBMD_ROOT/tests/dataplane/lib.sh"
need_netns
TAG=afj$$
CL="$ZBMD_ROOT/scripts/cluster.sh --tag $TAG --dir $T/cl"
trap '$CL down >/dev/null 2>&1; cleanup_lib' EXIT
plan 6

ZBN_MTU=9000 $CL up 2 >/dev/null; ok $? "cluster up: 2 namespaces, MTU 9000"
grep -qE '^vdev = net_af_packet0,.*framesz=[0-9]+,blocksz=' "$T/cl/node1.ini" &&
	grep -q '^mtu = 9000' "$T/cl/node1.ini"
ok $? "the af_packet port has ring frames for it: $(grep -o 'framesz=[0-9]*' "$T/cl/node1.ini")"

# the same node without framesz: a clear refusal, nothing started
sed -E 's/framesz=[0-9]+,blocksz=[0-9]+,//' "$T/cl/node1.ini" >"$T/small.ini"
$CL exec 1 timeout 60 "$ZBMD" run -c "$T/small.ini" >"$T/small.out" 2>&1
rc=$?
[ $rc != 0 ] && [ $rc != 124 ] &&
	grep -q "mtu 9000 needs 9018-byte frames; the device takes 1518 (af_packet: a vdev framesz= of at least 9146)" "$T/small.out"
ok $? "without framesz: exit $rc, $(grep -o 'mtu 9000 needs.*' "$T/small.out" | head -1)"

$CL start >/dev/null; ok $? "both nodes ready at MTU 9000"
$CL exec probe ping -c 3 -i 0.2 -W 5 -M do -s 8972 10.77.0.1 >"$T/ping" 2>&1
ok $? "an unfragmented 9000-byte ping answered by node 1 ($(grep -o '[0-9]* received' "$T/ping"))" ||
	diag "$(tail -3 "$T/ping")"
$CL exec probe ping -c 3 -i 0.2 -W 5 -M do -s 8973 10.77.0.1 >"$T/ping2" 2>&1
# (refused by the probe's own stack; a ping that merely went unanswered
# would say nothing about the MTU)
[ $? != 0 ] && grep -q "message too long, mtu=9000" "$T/ping2"
ok $? "the ping above was at the full MTU: one byte more does not leave the probe" ||
	diag "$(tail -3 "$T/ping2")"
