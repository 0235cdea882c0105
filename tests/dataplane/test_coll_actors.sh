#!/bin/bash
# Collectives used by actors (zbmd/coll.h, "actors"; dataplane/actor_coll.c):
# on every node of a local cluster a training actor hands its gradient
# buckets to the collective service and gets one completion message per
# bucket (helper_coll_actors checks order, status and every element).
#  - 3 nodes over tcp, and over memif (the dpdk host: the lanes' lcores
#    progress the channels, the host's thread polls the service);
#  - memif under the transport's injected loss, duplication and reordering;
#  - a node killed mid-run: the survivors' trainers get completion
#    messages carrying the error, within the collectives' bound, and exit 1.
. "$ZBMD_ROOT/tests/common/tap.sh"
Z=$ZBMD_BUILD/bin/zbmd
H=$ZBMD_BUILD/tests/dataplane/helper_coll_actors
T=$(mktemp -d /tmp/zbcoll-actors.XXXXXX)
# a failed zbmd local run keeps its configs and logs (says where): drop them
. "$ZBMD_ROOT/tests/common/local.sh"
trap 'drop_kept "$T"/*.out; rm -rf "$T"' EXIT
plan 8

# run NAME ARGS...: zbmd local ARGS -- helper; 5 agreed "ok" lines, exit 0
run() {
	local name=$1; shift
	"$Z" local "$@" -- "$H" --rounds 4 >"$T/$name.out" 2>&1
	local rc=$?
	grep '^not ok' "$T/$name.out" | sed 's/^/# /'
	local good
	good=$(grep -c '^ok - ' "$T/$name.out")
	[ $rc = 0 ] && [ "$good" = 5 ]
	ok $? "$name: exit $rc, $good of 5 checks agreed by every node" ||
		diag "$(grep -v 'control: on' "$T/$name.out" | tail -5)"
}

run "tcp, 3 nodes" --nodes 3
if [ "$(id -u)" != 0 ]; then
	for _ in 1 2 3 4 5 6 7; do
		TAP_RUN=$((TAP_RUN + 1)); echo "ok $TAP_RUN # SKIP memif nodes need root"
	done
	done_testing; exit
fi
run "memif, 3 nodes" --nodes 3 --link memif
run "memif, 2 nodes, 2% drop + 5% reorder + 1% dup" --nodes 2 --link memif \
	--fault drop=0.02,reorder=0.05,dup=0.01,seed=5

# a node killed while the trainers run: every survivor's trainer is told
# (a completion message with the error), the helper exits 1
t0=$(date +%s%N)
"$Z" local --nodes 3 --link memif --kill 2@up+1500 -- "$H" --rounds 1000000 >"$T/k.out" 2>&1
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
[ $rc = 1 ]; ok $? "kill -9 of node 2: zbmd local exits 1 ($rc, after $ms ms)"
told=$(grep -c 'trainer: round [0-9]* bucket [01] failed: ' "$T/k.out")
[ "$told" -ge 2 ]
ok $? "the survivors' trainers got completion messages with the error ($told lines: $(grep -m1 -o 'bucket [01] failed: .*' "$T/k.out"))"
n=$(fault_survivors "$T/k.out")
s=$(fault_slowest "$T/k.out")
[ "$n" = 2 ] && [ -n "$s" ] && [ "$s" -le 6000 ]
ok $? "both survivors out with status 1 within 6 s of the kill (slowest ${s:-?} ms)"
stopped=$(grep -c 'helper: rank [01]: the trainer stopped at round [0-9]*: ' "$T/k.out")
[ "$stopped" = 2 ]
ok $? "each survivor's trainer saw the failure and stopped there ($stopped of 2 said so)"
! grep -qE 'killed by signal (11|6|7)\b|no end after' "$T/k.out"
ok $? "no survivor crashed or hung"
done_testing
