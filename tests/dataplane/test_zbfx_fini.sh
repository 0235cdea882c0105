#!/usr/bin/env bash
# The dpdk net provider's fini() while the transport still holds sends of a
# failed communicator (tests/dataplane/helper_zbfx_fini.c): one memif node
# whose peer never starts. After fini the transport holds none of the
# provider's messages, nothing writes into the provider's freed memory when
# the node shuts down (pattern check on the reused block), and the process
# exits cleanly (no "EAL: Error: Invalid memory", no signal). ~2 s.
. "$ZBMD_ROOT/tests/common/tap.sh"
. "$ZBMD_ROOT/tests/dataplane/lib.sh"
TAG=zbfx$$
H=$ZBMD_BUILD/tests/dataplane/helper_zbfx_fini
CL="$ZBMD_ROOT/scripts/cluster-memif.sh --tag $TAG --dir $T/cl"
trap '$CL down >/dev/null 2>&1; cleanup_lib' EXIT
plan 6

$CL up 2 >/dev/null; ok $? "memif cluster configs written (only node 1 runs)"
timeout -s KILL 60 "$H" -c "$T/cl/node1.ini" >"$T/out" 2>&1
rc=$?
grep -q '^POSTED n=8 failed_early=0' "$T/out"
ok $? "8 zero-copy isends of 64 KB pending to the absent peer when the loops stop"
grep -q '^AFTER_FINI queued=0$' "$T/out"
ok $? "after fini the transport holds no message of the provider ($(grep -o 'queued=[0-9]*' "$T/out"))"
grep -q '^PATTERN intact=1' "$T/out"
ok $? "nothing wrote into the provider's freed memory at shutdown ($(grep '^REUSED\|^PATTERN' "$T/out" | tr '\n' ' '))"
! grep -q 'Invalid memory' "$T/out"
ok $? "no 'EAL: Error: Invalid memory'"
ok $([ $rc -eq 0 ]; echo $?) "helper exits 0 (exit $rc)" || diag "$(grep -v '^EAL\|^memif' "$T/out" | tail -8)"
done_testing
