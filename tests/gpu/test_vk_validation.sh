#!/usr/bin/env bash
# The Vulkan backend under the Khronos validation layer (with synchronization
# validation): the gpu tests that drive it (conformance, tensors, blocked
# sgemm) make no validation error. The layer is Debian's
# vulkan-validationlayers (make deps); without it, or without a Vulkan
# device, the test skips and says why.
source "$ZBMD_ROOT/tests/common/tap.sh"
B=$ZBMD_BUILD/tests/gpu
if ! ls /usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json >/dev/null 2>&1; then
	echo "1..0 # SKIP the Khronos validation layer is not installed (vulkan-validationlayers)"; exit 0
fi
if ! "$ZBMD_BUILD/bin/zbmd" gpu-info 2>/dev/null | grep -q '^vulkan  *usable'; then
	echo "1..0 # SKIP no usable Vulkan device"; exit 0
fi
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
# an ASan build's LeakSanitizer reports the layer's own allocations at exit
# (its synchronization validation keeps them): ours are still checked
echo 'leak:libVkLayer_khronos_validation.so' >"$T/lsan.supp"
export LSAN_OPTIONS="suppressions=$T/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
# (test_pool is not among them: it runs the cpu backend only, and no
# Vulkan instance means no layer and nothing to validate)
tests=(test_conformance test_tensor test_sgemm_blocks)
plan $((2 * ${#tests[@]}))
for t in "${tests[@]}"; do
	# the loader says when it puts the layer in: no message from a layer
	# that was never loaded proves nothing
	VK_LOADER_DEBUG=layer VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation \
	VK_LAYER_ENABLES=VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT \
		"$B/$t.t" >"$T/$t" 2>&1
	rc=$?
	ok $rc "$t passes under the validation layer"
	n=$(grep -c 'Validation Error\|Validation Warning' "$T/$t")
	grep -q 'Insert instance layer.*VK_LAYER_KHRONOS_validation' "$T/$t" && [ "$n" -eq 0 ]
	ok $? "$t: the layer was loaded, and no validation message ($n)" ||
		grep -m3 'Validation\|Insert instance layer' "$T/$t" | cut -c1-300 | sed 's/^/# /'
done
