#!/usr/bin/env bash
# Ring all-reduce (the collectives engine, zbmd/coll.h) over the dpdk net
# provider and the reliable transport: 4 nodes in namespaces on
# net_af_packet, then 3 nodes joined by net_memif, then 3 nodes on a lossy
# link (loss 2 %, reordering 25 %: tc netem where the kernel has sch_netem,
# else the helper_impair hub between real veths); 3 all-reduces of 256 Ki
# floats each, every element checked (tests/dataplane/helper_allreduce);
# and integer avg (i64 on the 4 af_packet nodes, where sums have ties; i32
# on the 3 memif nodes), which finishes on the path of the receive that
# reduces as it lands: only the dpdk provider has it.
# The lossy run matters for the receive that reduces each fragment as it
# lands: a retransmitted or late fragment must be added exactly once.
. "$ZBMD_ROOT/tests/common/tap.sh"
. "$ZBMD_ROOT/tests/dataplane/lib.sh"
need_netns
AR=$ZBMD_BUILD/tests/dataplane/helper_allreduce
TAGV=nodear$$; TAGM=nodeam$$
CLV="$ZBMD_ROOT/scripts/cluster.sh --tag $TAGV --dir $T/v"
CLM="$ZBMD_ROOT/scripts/cluster-memif.sh --tag $TAGM --dir $T/m"
TAGL=nodeal$$
CL="$ZBMD_ROOT/scripts/cluster.sh --tag $TAGL --dir $T/l"   # lossy_cluster's
trap '$CLV down >/dev/null 2>&1; $CLM down >/dev/null 2>&1; $CL down >/dev/null 2>&1; cleanup_lib' EXIT
plan 14

# run_ring CL DIR N [ARGS...]: start helper_allreduce (with ARGS) on nodes
# 1..N in index order (memif servers first), wait for all DONE, stop them;
# sets RCS (emptied first: a run that gives up early must not leave the
# statuses of the one before it for the next check to read)
run_ring() {
	local cl=$1 dir=$2 n=$3 i pids=()
	shift 3
	RCS=
	for ((i = 1; i <= n; i++)); do
		$cl exec $i "$AR" -c "$dir/node$i.ini" --iters 3 "$@" >"$dir/a$i" 2>&1 &
		pids+=($!); PIDS+=($!)
		wait_for "$dir/a$i" '^READY' 60 || return 1
	done
	for ((i = 1; i <= n; i++)); do wait_for "$dir/a$i" '^DONE' 90 || return 1; done
	kill -TERM "${pids[@]}"
	for p in "${pids[@]}"; do wait "$p"; RCS="$RCS $?"; done
}

$CLV up 4 >/dev/null; ok $? "4 namespaces on af_packet"
run_ring "$CLV" "$T/v" 4; ok $? "4-node ring: 3 all-reduces finished on every rank"
[ "$RCS" = " 0 0 0 0" ]; ok $? "every element right on every rank (exit statuses:$RCS)"
diag "$(grep -h '^DONE' "$T"/v/a1)"
run_ring "$CLV" "$T/v" 4 --avg i64 --count 100003
ok $? "4-node ring: 3 i64 avg all-reduces (100003 elements) finished on every rank"
[ "$RCS" = " 0 0 0 0" ]; ok $? "i64 avg: every element right on every rank, ties away from zero, sums past 53 bits (exit statuses:$RCS)"

$CLM up 3 >/dev/null; ok $? "3 processes joined by memif links"
run_ring "$CLM" "$T/m" 3; ok $? "3-node memif ring: 3 all-reduces finished on every rank"
[ "$RCS" = " 0 0 0" ]; ok $? "every element right on every rank (exit statuses:$RCS)"
diag "$(grep -h '^DONE' "$T"/m/a3)"
run_ring "$CLM" "$T/m" 3 --avg i32 --count 100003
ok $? "3-node memif ring: 3 i32 avg all-reduces (100003 elements) finished on every rank"
[ "$RCS" = " 0 0 0" ]; ok $? "i32 avg: every element right on every rank (exit statuses:$RCS)"
$CLM down >/dev/null 2>&1

lossy_cluster 3 2 0 25 33; ok $? "3 namespaces, lossy link: $LOSSY_HOW"
run_ring "$CL" "$T/l" 3; ok $? "3-node ring over the lossy link: 3 all-reduces finished on every rank"
[ "$RCS" = " 0 0 0" ]; ok $? "every element right on every rank (exit statuses:$RCS)"
diag "$(grep -h '^DONE' "$T"/l/a1)"
impair_stop; s=$(impair_line); diag "$s"
if [ "$s" = netem ]; then
	d=$(netem_drops)
	[ "${d:-0}" -gt 0 ]; ok $? "tc netem dropped frames on the node links during the run (${d:-no netem qdisc})"
else
	[ "$(echo "$s" | sed -n 's/.*dropped=\([0-9]*\).*/\1/p')" -gt 0 ] &&
		[ "$(echo "$s" | sed -n 's/.*reordered=\([0-9]*\).*/\1/p')" -gt 0 ]
	ok $? "the hub dropped and reordered frames during the run ($s)"
fi
done_testing
