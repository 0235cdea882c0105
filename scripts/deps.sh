#!/usr/bin/env bash
# scripts/deps.sh — install every Debian package zbmd needs (make deps).
# Non-interactive and idempotent: when everything is present it only checks.
set -euo pipefail

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
	libopenblas-dev libnuma-dev mesa-vulkan-drivers libvulkan-dev glslc vulkan-tools hipcc
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
[ "$(id -u)" -eq 0 ] || SUDO=sudo
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
