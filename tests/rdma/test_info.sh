#!/usr/bin/env bash
# zbmd rdma-info: prints what the verbs stack sees; exit 0 even with no device.
. "$ZBMD_ROOT/tests/common/tap.sh"
plan 5
out=$("$ZBMD_BUILD/bin/zbmd" rdma-info 2>&1); rc=$?
check "rdma-info exits 0" [ "$rc" -eq 0 ]
check "names the rdma-core version" grep -q "rdma-core" <<<"$out"
if ls /sys/class/infiniband/* >/dev/null 2>&1; then
	check "lists a device with its ports" grep -qE "^device |port [0-9]+:" <<<"$out"
else
	check "says why there is no device" grep -q "no RDMA devices found (" <<<"$out"
fi
check "reports GPUDirect availability" grep -q "peer memory:" <<<"$out"
"$ZBMD_BUILD/bin/zbmd" rdma-info --bogus >/dev/null 2>&1; rc=$?
check "unknown argument: exit 2" [ "$rc" -eq 2 ]
done_testing
