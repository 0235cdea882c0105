#!/bin/bash
# All-gather, broadcast (every root), reduce-scatter, barrier and the
# non-blocking API (queued collectives, completion callbacks) on 2, 3, 4
# local nodes over tcp. The helper checks exact values on every node.
. "$ZBMD_ROOT/tests/common/tap.sh"
Z=$ZBMD_BUILD/bin/zbmd
H=$ZBMD_BUILD/tests/coll/helper_colls
plan 6
for n in 2 3 4; do
	out=$("$Z" local --nodes $n -- "$H" 2>&1)
	rc=$?
	echo "$out" | grep '^not ok' | sed 's/^/# /'
	ok $rc "$n nodes: helper exits 0 on every node"
	good=$(echo "$out" | grep -c '^ok - ')
	want=$((10 + 2 * n + 1 + 12 + 2 + 2))
	[ "$good" -eq "$want" ]
	ok $? "$n nodes: $good of $want collective checks passed"
done
done_testing
