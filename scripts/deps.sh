#!/usr/bin/env bash
# scripts/deps.sh — install every Debian package zbmd needs (make deps).
# Non-interactive and idempotent: when everything is present it only checks.
set -euo pipefail

PROG=${0##*/}
usage() {
	cat <<EOF
usage: $PROG [-h|--help]

Install every Debian package zbmd needs to build and test (make deps): the
toolchain, inih, DPDK 22.11, rdma-core, OpenBLAS/libnuma/Vulkan/hipcc for
gpu/, raft/libuv/libsodium/libmicrohttpd for the control plane, the network
tools of the multi-node tests, gnuplot/erlang/Open MPI for the benchmarks
and clang for make fuzz (the list: PKGS in this script).

Non-interactive (apt-get -y, DEBIAN_FRONTEND=noninteractive) and idempotent:
when every package is installed it only checks, and changes nothing.
Installing needs root, or sudo for a user allowed to use it. Exit status:
0 done (or nothing to do), 1 failed, 2 bad usage.
EOF
}
while [ $# -gt 0 ]; do
	case "$1" in
	-h | --help) usage; exit 0 ;;
	*) echo "$PROG: unknown argument '$1'" >&2; echo "try: $PROG --help" >&2; exit 2 ;;
	esac
done

PKGS=(
	# toolchain and test runner
	build-essential pkg-config perl make gcc
	# config
	libinih-dev
	# dataplane: DPDK 22.11 (libraries, testpmd, dpdk-devbind.py)
	dpdk dpdk-dev libdpdk-dev libpcap-dev
	# rdma: rdma-core verbs
	libibverbs-dev ibverbs-utils rdma-core
	# gpu: CPU backend, Vulkan on lavapipe, HIP compile checks
	libopenblas-dev libnuma-dev mesa-vulkan-drivers libvulkan-dev glslc vulkan-tools hipcc vulkan-validationlayers
	# control plane
	libraft-dev libuv1-dev libsodium-dev libmicrohttpd-dev
	# multi-node tests, fault injection, tools
	iproute2 iputils-ping tcpdump curl procps psmisc util-linux kmod ethtool
	# benchmarks and their peers
	gnuplot-nox erlang-nox libopenmpi-dev openmpi-bin
	# make fuzz (libFuzzer)
	clang libclang-rt-14-dev
)

missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "deps: all ${#PKGS[@]} packages installed"
	exit 0
fi
echo "deps: installing ${missing[*]}"
SUDO=
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null 2>&1 ||
		{ echo "deps: installing needs root (or sudo, which this machine lacks): run it as root" >&2; exit 1; }
	SUDO=sudo
	$SUDO true || { echo "deps: installing needs root, and sudo refused: run it as root" >&2; exit 1; }
fi
# sudo resets the environment: pass the frontend on the command line. Wait
# for the dpkg lock (a fresh machine may be running apt-daily) rather than
# fail at once.
APT=($SUDO env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300)
if ! "${APT[@]}" update -qq; then
	echo "deps: apt-get update failed: check the network and /etc/apt/sources.list" >&2
	exit 1
fi
if ! "${APT[@]}" install -y -qq --no-install-recommends "${missing[@]}"; then
	for p in "${missing[@]}"; do
		apt-cache policy "$p" 2>/dev/null | grep -q 'Candidate: [0-9]' ||
			echo "deps: package '$p' is not available from the configured archives" >&2
	done
	echo "deps: apt-get install failed (packages: ${missing[*]})" >&2
	exit 1
fi
echo "deps: done"
