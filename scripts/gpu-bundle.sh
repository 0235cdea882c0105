#!/usr/bin/env bash
# scripts/gpu-bundle.sh — build gpu/ and its tests into a folder that runs on
# a GPU machine without OpenBLAS/libnuma development packages or DPDK (a
# machine with only the NVIDIA driver and a compiler, say): gpu/'s test
# binaries, the stand-alone gpu-info/bench helper, the rdma provider's GPU
# registration test, the shared libraries they need from this machine, and
# run.sh, which runs those tests and the cuda bench there.
#
#   scripts/gpu-bundle.sh DIR          # here (Debian, `make deps` done)
#   DIR/run.sh [--bench-only]          # there; exit status: tests failed or not
#
# The cuda backend is dlopen'ed (libcuda.so.1, cuBLAS, NVRTC of the machine
# it runs on), so the same binaries skip cuda here and run it there. Vulkan
# is left out (the target may lack the loader).
set -euo pipefail

PROG=${0##*/}
usage() {
	echo "usage: $PROG DIR   (DIR: a new or existing folder for the bundle)" >&2
	exit 2
}
[ $# -eq 1 ] && [ -n "$1" ] && [ "${1#-}" = "$1" ] || usage
ROOT=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$1"
DIR=$(cd "$1" && pwd)
case "$DIR" in "$ROOT"|/) echo "$PROG: refusing to use $DIR" >&2; exit 2 ;; esac

make -C "$ROOT" --no-print-directory BUILD="$DIR/build" GPU_HAVE_VK= gpu-only >&2
# and the rdma provider's binding to gpu/ (registration path, DMA-BUF export,
# staging copies through device memory): needs libibverbs, not a device
make -C "$ROOT" --no-print-directory BUILD="$DIR/build" GPU_HAVE_VK= \
	"$DIR/build/tests/rdma/test_gpu_reg.t" >&2
mkdir -p "$DIR/lib" "$DIR/tests"
# the libraries the binaries need beyond glibc, resolved through ldd
for lib in $(ldd "$DIR"/build/tests/gpu/helper_gpucli "$DIR"/build/tests/*/test_*.t |
	     awk '$3 ~ /^\// {print $3}' | sort -u |
	     grep -Ev '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*)\.so'); do
	cp -L "$lib" "$DIR/lib/"
done
for t in "$ROOT"/tests/gpu/test_*.sh; do
	[ "${t##*/}" = test_bundle.sh ] || cp "$t" "$DIR/tests/"
done
mkdir -p "$DIR/tests/common" "$DIR/gpu/kernels"
cp "$ROOT/tests/common/tap.sh" "$DIR/tests/common/"
cp "$ROOT/gpu/kernels/zb_kernels.cu" "$DIR/gpu/kernels/"

cat >"$DIR/run.sh" <<'EOF'
#!/usr/bin/env bash
# Runs the gpu tests (TAP; a summary line per file) and the cuda bench.
# OUT (optional): a folder for the logs. Exit status 1 if any test failed.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export ZBMD_ROOT=$PWD ZBMD_BUILD=$PWD/build
export ZBMD_GPU_CLI=$PWD/build/tests/gpu/helper_gpucli
O=${OUT:-$PWD/logs}
mkdir -p "$O"
nvidia-smi -L 2>/dev/null
$ZBMD_GPU_CLI gpu-info
fail=0
if [ "${1:-}" != --bench-only ]; then
	for t in build/tests/*/test_*.t tests/test_*.sh; do
		n=${t##*/}
		timeout -k 5 300 "$t" >"$O/$n.log" 2>&1
		rc=$?
		printf '%-26s rc=%d ok=%d not_ok=%d skipped=%d\n' "$n" $rc \
			"$(grep -c '^ok' "$O/$n.log")" "$(grep -c '^not ok' "$O/$n.log")" \
			"$(grep -ci '^ok .*# skip' "$O/$n.log")"
		grep '^not ok' "$O/$n.log"
		[ $rc -eq 0 ] || fail=1
	done
fi
for d in f32 bf16 f16; do
	timeout 120 $ZBMD_GPU_CLI bench gpu --backend cuda --dtype $d
done
exit $fail
EOF
chmod +x "$DIR/run.sh"
echo "$PROG: bundle in $DIR ($(du -sh "$DIR" | cut -f1)); run $DIR/run.sh on the GPU machine"
