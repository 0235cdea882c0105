#!/usr/bin/env bash
# zbmd gpu-info and zbmd bench gpu (quick sizes) through the real binary.
source "$ZBMD_ROOT/tests/common/tap.sh"
plan 9
# ZBMD_GPU_CLI: the stand-alone helper when zbmd itself is not built
# (make test-gpu-only on a machine without DPDK).
Z="${ZBMD_GPU_CLI:-$ZBMD_BUILD/bin/zbmd}"
out=$("$Z" gpu-info 2>&1); rc=$?
ok $rc "gpu-info exits 0"
echo "$out" | sed 's/^/# /'
echo "$out" | grep -q '^compiled in: cpu'; ok $? "lists the backends compiled in"
echo "$out" | grep -Eq '^cpu +usable'; ok $? "cpu is usable"
echo "$out" | grep -Eq '^cuda +(usable|unavailable .+)'; ok $? "cuda is usable or says why not"
echo "$out" | grep -Eq '^rdma registration path: [a-z]+ \(.+\)'; ok $? "reports the rdma registration path and why"
# the vulkan line and the device lines under it
vk=$(echo "$out" | awk '/^[a-z]/ { f = /^vulkan / } f')
if ! echo "$out" | grep -q "^compiled in:.*vulkan"; then
	ok 0 "vulkan listed # SKIP vulkan not compiled in"
elif XDG_RUNTIME_DIR=/tmp vulkaninfo --summary 2>/dev/null | grep -q deviceName; then
	echo "$vk" | grep -Eq '^vulkan +usable' && echo "$vk" | grep -q '^  device 0: '
	ok $? "vulkan usable with its device listed (vulkaninfo sees one)"
else
	# no vulkaninfo here (a GPU machine with only the driver) or it sees
	# no device: nothing to cross-check, but the line must still hold
	{ echo "$vk" | grep -Eq '^vulkan +usable' && echo "$vk" | grep -q '^  device 0: '; } ||
		echo "$vk" | grep -Eq '^vulkan +unavailable .+'
	ok $? "vulkan usable with a device, or unavailable saying why (no vulkaninfo device to cross-check)"
fi
b=$("$Z" bench gpu --quick --backend cpu 2>&1); rc=$?
echo "$b" | sed 's/^/# /'
[ $rc -eq 0 ] && [ "$(echo "$b" | grep -c checked)" -eq 2 ]
ok $? "bench gpu --quick --backend cpu: sgemm and reduce checked"
"$Z" bench gpu --backend nope >/dev/null 2>&1; [ $? -eq 2 ]
ok $? "bench gpu with a bad backend is a usage error (2)"
"$Z" gpu-info extra >/dev/null 2>&1; [ $? -eq 2 ]
ok $? "gpu-info with an argument is a usage error (2)"
done_testing
