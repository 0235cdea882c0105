#!/usr/bin/env bash
# zbmd gpu-info and zbmd bench gpu (quick sizes) through the real binary.
source "$ZBMD_ROOT/tests/common/tap.sh"
plan 13
# ZBMD_GPU_CLI: the stand-alone helper when zbmd itself is not built
# (make test-gpu-only on a machine without DPDK).
Z="${ZBMD_GPU_CLI:-$ZBMD_BUILD/bin/zbmd}"
T_OUT=$(mktemp /tmp/zbgpu-out.XXXXXX); T_ERR=$(mktemp /tmp/zbgpu-err.XXXXXX)
trap 'rm -f "$T_OUT" "$T_ERR"' EXIT
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
# a backend asked for and not there: the reason on stderr, exit 1
"$Z" bench gpu --backend cuda >"$T_OUT" 2>"$T_ERR"; rc=$?
if grep -Eq '^cuda +usable' <<<"$out"; then
	ok 0 "# SKIP bench gpu --backend cuda: this machine has a CUDA device"
else
	[ $rc -eq 1 ] && grep -q "^zbmd bench gpu: cuda: not benchmarked: " "$T_ERR" && ! grep -q "not benchmarked" "$T_OUT"
	ok $? "bench gpu --backend cuda without a device: exit $rc, the reason on stderr (it was on stdout)"
fi
# rows reach a file as they are made (a run interrupted after its first
# rows kept none: stdio's buffer went with it)
"$Z" bench gpu --backend cpu >"$T_OUT" 2>/dev/null & gp=$!
seen=1
for _ in $(seq 300); do
	kill -0 $gp 2>/dev/null || break
	grep -q "sgemm" "$T_OUT" && { kill -0 $gp 2>/dev/null && seen=0; break; }
	sleep 0.05
done
kill -INT $gp 2>/dev/null; wait $gp 2>/dev/null
[ $seen -eq 0 ] && grep -q "sgemm" "$T_OUT"
ok $? "bench gpu into a file: the first row is there while the run goes on, and after an interrupt"
"$Z" gpu-info extra >/dev/null 2>&1; [ $? -eq 2 ]
ok $? "gpu-info with an argument is a usage error (2)"
"$Z" gpu-info --help extra >"$T_OUT" 2>"$T_ERR"; rc=$?
[ $rc -eq 2 ] && grep -q "^zbmd gpu-info: unexpected argument 'extra'$" "$T_ERR" && [ ! -s "$T_OUT" ]
ok $? "gpu-info --help with an extra argument is the same usage error (exit $rc; it was 0)"
"$Z" gpu-info --help >"$T_OUT" 2>/dev/null; rc=$?
[ $rc -eq 0 ] && grep -q "^usage: zbmd gpu-info" "$T_OUT"
ok $? "gpu-info --help alone: usage on stdout, exit 0"
done_testing
