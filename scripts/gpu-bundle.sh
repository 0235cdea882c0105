#!/usr/bin/env bash
# scripts/gpu-bundle.sh — build gpu/ and its tests into a folder that runs on
# a GPU machine without OpenBLAS/libnuma development packages or DPDK (a
# machine with only the NVIDIA driver and a compiler, say): gpu/'s test
# binaries, the stand-alone gpu-info/bench helper, the rdma provider's GPU
# registration test, the zbmd binary, the shared libraries they need from
# this machine (Vulkan's loader and libglvnd's dispatch libraries among
# them, for a driver's Vulkan ICD), and run.sh, which runs those tests, the
# bench of every usable GPU backend and a 2-node `zbmd train` on each.
#
#   scripts/gpu-bundle.sh DIR          # here (Debian, `make deps` done)
#   DIR/run.sh [--bench-only]          # there; exit status: tests failed or not
#
# The cuda backend is dlopen'ed (libcuda.so.1, cuBLAS, NVRTC of the machine
# it runs on), so the same binaries skip cuda here and run it there. Vulkan
# is compiled in where this machine has its headers and glslc; run.sh
# points the loader at NVIDIA's ICD where the driver installed one under
# /usr/local/nvidia and VK_DRIVER_FILES is unset. Debug info is stripped,
# objects and static libraries left out: ~40 MB, ~9 MB as tar.xz.
set -euo pipefail

PROG=${0##*/}
usage() {
	cat <<EOF
usage: $PROG DIR
       $PROG -h|--help

Build gpu/'s tests, the gpu-info/bench helper, tests/rdma/test_gpu_reg and
zbmd into DIR (a new or existing folder) with the shared libraries they
need and DIR/run.sh, which runs them on a GPU machine without DPDK or -dev
packages. DIR gets build/, lib/, tests/, gpu/ and run.sh (build/obj,
build/lib and build/gen in it are removed): not the source tree, not a
top-level or system directory (/etc, /usr, /var, /boot, ...). Its path
takes letters, digits and / . _ - + @ only (it goes to make). Exit
status: 0 built, 1 failed, 2 bad usage.
EOF
}
refuse() { echo "$PROG: $*" >&2; exit 2; }
case "${1:-}" in -h | --help) [ $# -eq 1 ] && { usage; exit 0; } ;; esac
if [ $# -ne 1 ]; then
	echo "$PROG: give one argument, DIR (got $#)" >&2; usage >&2; exit 2
fi
[ -n "$1" ] || { echo "$PROG: DIR must not be empty" >&2; usage >&2; exit 2; }
[ "${1#-}" = "$1" ] || { echo "$PROG: unknown option '$1'" >&2; usage >&2; exit 2; }
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# DIR goes to make (BUILD=DIR/build, DIR/... as goals), where $(...) runs
# commands and #, :, = and % mean something, and into globs here: plain
# characters only, checked (with its resolved path) before anything is made.
[[ "$1" =~ ^[A-Za-z0-9._/+@-]+$ ]] ||
	refuse "'$1': DIR takes letters, digits and / . _ - + @ only"' (not spaces, quotes, $ ( ) ` ; & | \ * # : = %)'
DIR=$(realpath -m -- "$1")
[[ "$DIR" =~ ^[A-Za-z0-9._/+@-]+$ ]] || refuse "'$1' resolves to '$DIR', which has characters make would interpret"
# The bundle writes build/, lib/, tests/, gpu/, run.sh into DIR and removes
# build/obj, build/lib, build/gen there: never the source tree, a system
# directory or a top-level one (/tmp, /home, /root themselves).
case "$DIR/" in
"$ROOT"/) refuse "refusing to use $DIR: the source tree" ;;
/var/tmp/?*) ;;
/etc/* | /usr/* | /bin/* | /sbin/* | /lib/* | /lib32/* | /lib64/* | /libx32/* | \
	/boot/* | /proc/* | /sys/* | /dev/* | /run/* | /var/*)
	refuse "refusing to use $DIR: a system directory" ;;
/*/*/*) ;;
*) refuse "refusing to use $DIR: a top-level directory (a folder inside it, say $DIR/zbmd-bundle)" ;;
esac
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)

make -C "$ROOT" --no-print-directory BUILD="$DIR/build" gpu-only >&2
# and the rdma provider's binding to gpu/ (registration path, DMA-BUF export,
# staging copies through device memory): needs libibverbs, not a device;
# and zbmd itself (zbmd local -- train on the GPU backends)
make -C "$ROOT" --no-print-directory BUILD="$DIR/build" \
	"$DIR/build/tests/rdma/test_gpu_reg.t" "$DIR/build/bin/zbmd" >&2
rm -rf "$DIR/build/obj" "$DIR/build/lib" "$DIR/build/gen"
find "$DIR/build" -name '*.d' -delete
strip --strip-debug "$DIR"/build/bin/zbmd "$DIR"/build/tests/*/test_*.t \
	"$DIR"/build/tests/gpu/helper_gpucli
mkdir -p "$DIR/lib" "$DIR/tests"
# the libraries the binaries need beyond glibc, resolved through ldd
for lib in $(ldd "$DIR"/build/tests/gpu/helper_gpucli "$DIR"/build/tests/*/test_*.t \
		 "$DIR"/build/bin/zbmd | awk '$3 ~ /^\// {print $3}' | sort -u |
	     grep -Ev '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*)\.so'); do
	cp -L "$lib" "$DIR/lib/"
done
# what a vendor's Vulkan ICD (libGLX_nvidia) loads through libglvnd
for lib in libGLdispatch.so.0 libGLX.so.0 libEGL.so.1 libOpenGL.so.0; do
	for d in /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu /usr/lib64; do
		[ -e "$d/$lib" ] && { cp -L "$d/$lib" "$DIR/lib/"; break; }
	done
done
for t in "$ROOT"/tests/gpu/test_*.sh; do
	[ "${t##*/}" = test_bundle.sh ] || cp "$t" "$DIR/tests/"
done
mkdir -p "$DIR/tests/common" "$DIR/gpu/kernels"
cp "$ROOT/tests/common/tap.sh" "$DIR/tests/common/"
cp "$ROOT/gpu/kernels/zb_kernels.cu" "$DIR/gpu/kernels/"

cat >"$DIR/run.sh" <<'EOF'
#!/usr/bin/env bash
# Runs the gpu tests (TAP; a summary line per file), the bench of every
# usable GPU backend and `zbmd local --nodes 2 -- train` on each backend.
# OUT (optional): a folder for the logs. Exit status 1 if any test or
# training run failed.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export ZBMD_ROOT=$PWD ZBMD_BUILD=$PWD/build
export ZBMD_GPU_CLI=$PWD/build/tests/gpu/helper_gpucli
nv=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -z "${VK_DRIVER_FILES:-}" ] && [ -f $nv ] && export VK_DRIVER_FILES=$nv
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
usable=$($ZBMD_GPU_CLI gpu-info 2>/dev/null | awk '$2 == "usable" {print $1}')
for b in $usable; do
	[ "$b" = cpu ] && continue
	for d in f32 bf16 f16; do
		timeout 120 $ZBMD_GPU_CLI bench gpu --backend $b --dtype $d
	done
done
# data-parallel training on each usable backend: 2 nodes over kernel TCP
for b in $usable; do
	timeout -k 5 120 build/bin/zbmd local --nodes 2 -- train --steps 30 --every 10 \
		--features 2048 --samples 4096 --backend $b >"$O/train_$b.log" 2>&1
	rc=$?
	echo "train --backend $b: rc=$rc"
	grep -E '^# (replicas|loss|per step)|zbmd (train|local):' "$O/train_$b.log"
	[ $rc -eq 0 ] || fail=1
done
exit $fail
EOF
chmod +x "$DIR/run.sh"
echo "$PROG: bundle in $DIR ($(du -sh "$DIR" | cut -f1)); run $DIR/run.sh on the GPU machine"
