#!/usr/bin/env bash
# The cuda/hip kernel source (gpu/kernels/zb_kernels.cu) compiles offline:
# with nvcc to a CUBIN, and with hipcc to an AMD code object (the HIP
# compile check; no AMD GPU is needed).  Each is skipped when its compiler
# is absent.
source "$ZBMD_ROOT/tests/common/tap.sh"
plan 2
src="$ZBMD_ROOT/gpu/kernels/zb_kernels.cu"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# the compilers' own scratch directories (hipcc leaves an empty
# zb_kernels-XXXXXX behind per compile) go under $tmp and with it
export TMPDIR=$tmp
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
if [ -x "$NVCC" ]; then
	check "nvcc compiles the kernels (sm_80 cubin)" "$NVCC" -cubin -arch=sm_80 -o "$tmp/k.cubin" "$src"
else
	ok 0 "nvcc compile check # SKIP no nvcc at $NVCC"
fi
if command -v hipcc >/dev/null; then
	check "hipcc compiles the kernels (gfx90a)" hipcc -x hip --offload-arch=gfx90a -c -o "$tmp/k.o" "$src"
else
	ok 0 "hipcc compile check # SKIP no hipcc"
fi
done_testing
