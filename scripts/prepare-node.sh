#!/usr/bin/env bash
# scripts/prepare-node.sh — prepare this machine for the zbmd node of one
# config: hugepages for [eal] memory_mb (hugepages.sh) and every [port.N]
# pci NIC bound to vfio-pci (bind-nic.sh). zbmd-prepare.service runs it at
# boot, before zbmd.service; running it again is safe (what is already in
# place is left as it is).
#
# It changes nothing itself: the changes are hugepages.sh's and
# bind-nic.sh's, and under --dry-run both get --dry-run too (they read the
# system and print their plans).
set -euo pipefail

PROG=${0##*/}
HERE=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
SYSFS=${ZBMD_SYSFS:-/sys}   # the PCI devices, as bind-nic.sh reads them (tests fake it)
HUGE_SYSFS=/sys             # hugepage counts and NUMA nodes, as hugepages.sh reads them
MOUNTS=${ZBMD_PROC_MOUNTS:-/proc/mounts}
MEMINFO=/proc/meminfo
CONFIG=
CONFIG_GIVEN=0
BINARY=
DRY_RUN=0
BIND_OPTS=()   # passed on to bind-nic.sh
FAILED=()

usage() {
	cat <<EOF
usage: $PROG --config FILE [--binary PATH] [--force-down]
                       [--force-default-route] [--noiommu] [--dry-run]

Prepare this machine for the zbmd node that FILE configures (what
zbmd-prepare.service does at boot, before zbmd.service starts):

  hugepages  with [eal] hugepages = true, pages for exactly [eal] memory_mb
             (rounded up to whole pages; zbmd passes -m memory_mb to DPDK,
             which takes its own structures out of that) and a hugetlbfs
             mounted for them, by hugepages.sh. 1G pages when those already
             reserved (kernel command line) cover memory_mb, else 2M pages;
             on one NUMA node when the NICs and the lcores all sit on that
             node of several (sysfs), else on all nodes. A larger
             reservation in place is kept, never shrunk.
  NICs       every [port.N] pci bound to vfio-pci by bind-nic.sh; a NIC
             already on vfio-pci is left as it is; vdev ports need nothing.

  --config FILE   the node's config (required), read with \`zbmd check-config\`:
                  an invalid one is refused with its FILE:LINE messages
  --binary PATH   the zbmd that reads it; default: build/bin/zbmd of the
                  source tree this script is in, else PREFIX/bin/zbmd when
                  it is installed as PREFIX/share/zbmd/$PROG, else
                  /usr/local/bin/zbmd, else zbmd on PATH
  --force-down    also bind a NIC whose kernel interface is up or carries
                  routes (it is brought down first), or a PCI device that
                  is not a network device (bind-nic.sh --force)
  --force-default-route
                  --force-down, and also the NIC whose interface carries
                  the default route (bind-nic.sh --force-default-route):
                  this machine leaves that network, remote sessions too
  --noiommu       no IOMMU here (VMs, test machines): vfio's unsafe no-IOMMU
                  mode (bind-nic.sh --noiommu)
  --dry-run       print what would be done (the plans of hugepages.sh and
                  bind-nic.sh) and change nothing
  -h, --help      this text

A config with [eal] hugepages = false and no [port.N] pci is nothing to do
(said so, exit 0). Needs root unless --dry-run. Exit status: 0 done or
nothing to do, 1 failed (each step that failed says why; the other step is
still done), 2 bad usage or an invalid config.
EOF
}

. "$HERE/setup-lib.sh"

while [ $# -gt 0 ]; do
	case "$1" in
	-h | --help) usage; exit 0 ;;
	--dry-run) DRY_RUN=1 ;;
	--force-down) BIND_OPTS+=(--force) ;;
	--force-default-route) BIND_OPTS+=(--force-default-route) ;;
	--noiommu) BIND_OPTS+=(--noiommu) ;;
	--config) [ $# -ge 2 ] || usage_error "--config needs a value"; CONFIG=$2; CONFIG_GIVEN=1; shift ;;
	--binary) [ $# -ge 2 ] || usage_error "--binary needs a value"; BINARY=$2; shift ;;
	*) usage_error "unknown argument '$1'" ;;
	esac
	shift
done
[ "$CONFIG_GIVEN" -eq 1 ] || usage_error "give --config FILE (the node's config)"
[ -n "$CONFIG" ] || usage_error "--config must not be empty"

for s in hugepages.sh bind-nic.sh; do
	[ -x "$HERE/$s" ] || die "$HERE/$s is missing or not executable (install-service.sh installs it next to $PROG)"
done

if [ -z "$BINARY" ]; then
	for c in "$HERE/../build/bin/zbmd" "$HERE/../../bin/zbmd" /usr/local/bin/zbmd \
		"$(command -v zbmd 2>/dev/null || true)"; do
		if [ -n "$c" ] && [ -f "$c" ] && [ -x "$c" ]; then BINARY=$(readlink -f "$c"); break; fi
	done
	[ -n "$BINARY" ] || die "no zbmd binary found (build/bin/zbmd next to $HERE, /usr/local/bin/zbmd, PATH): give --binary"
fi
if ! [ -f "$BINARY" ] || ! [ -x "$BINARY" ]; then die "--binary $BINARY is not an executable file"; fi

# The effective config (defaults included): what zbmd run will use.
rc=0
EFFECTIVE=$("$BINARY" check-config "$CONFIG") || rc=$?
case $rc in
0) ;;
2)
	echo "$PROG: $CONFIG is not a valid config (messages above): nothing was done" >&2
	exit 2 ;;
126 | 127) die "$BINARY does not run here (exit $rc; messages above): nothing was done" ;;
*) die "$BINARY check-config $CONFIG failed (exit $rc): nothing was done" ;;
esac

MEMORY_MB='' HUGEPAGES='' LCORES=''
PCIS=()
sec=
while IFS= read -r line; do
	case "$line" in
	\[*\]) sec=${line#[}; sec=${sec%]} ;;
	*' = '*)
		key=${line%% = *} val=${line#* = }
		[ "$val" != '""' ] || val=
		case "$sec.$key" in
		eal.memory_mb) MEMORY_MB=$val ;;
		eal.hugepages) HUGEPAGES=$val ;;
		eal.lcores) LCORES=$val ;;
		port.*.pci) [ -z "$val" ] || PCIS+=("$val") ;;
		esac ;;
	esac
done <<<"$EFFECTIVE"
# What check-config printed is checked again before it reaches a command.
[[ "$MEMORY_MB" =~ ^[0-9]{1,9}$ ]] || die "$BINARY check-config printed [eal] memory_mb = '$MEMORY_MB', not a number"
case "$HUGEPAGES" in
true | false) ;;
*) die "$BINARY check-config printed [eal] hugepages = '$HUGEPAGES', not true or false" ;;
esac
for p in ${PCIS[@]+"${PCIS[@]}"}; do
	[[ "$p" =~ ^[0-9a-f]{4}:[0-9a-f]{2}:[01][0-9a-f]\.[0-7]$ ]] ||
		die "$BINARY check-config printed [port.N] pci = '$p', not a PCI address"
done

echo "config: $CONFIG (read by $BINARY check-config)"
if [ "$HUGEPAGES" = false ] && [ ${#PCIS[@]} -eq 0 ]; then
	echo "nothing to do: [eal] hugepages = false and no [port.N] pci (vdev ports only)"
	[ "$DRY_RUN" -eq 0 ] || echo "dry run: nothing was changed"
	exit 0
fi
if [ "$DRY_RUN" -eq 0 ] && [ "$(id -u)" -ne 0 ]; then
	die "needs root (or --dry-run to see what it would do)"
fi
DRY=()
[ "$DRY_RUN" -eq 0 ] || DRY=(--dry-run)

# step NAME CMD...: run CMD, printed first; a failure is said and recorded,
# and the next step still runs
step() {
	local name=$1 rc=0
	shift
	echo "+ $(quote_args "$@")"
	"$@" || rc=$?
	if [ $rc -ne 0 ]; then
		echo "$PROG: $name failed (exit $rc; its messages above)" >&2
		FAILED+=("$name")
	fi
}

# lcore list "0-3,6" as one id a line
expand_list() {
	local part a b
	local IFS=,
	for part in $1; do
		if [[ "$part" =~ ^([0-9]+)-([0-9]+)$ ]]; then
			for ((a = 10#${BASH_REMATCH[1]}, b = 10#${BASH_REMATCH[2]}; a <= b; a++)); do echo "$a"; done
		elif [[ "$part" =~ ^[0-9]+$ ]]; then
			echo $((10#$part))
		fi
	done
}

# The NUMA node every NIC and lcore of the config is on, when this machine
# has several nodes and they all share one (nothing otherwise, or when a
# node is not known: a NIC's numa_node of -1, a CPU sysfs does not show).
one_numa_node() {
	local nodes=() n p c d want=
	for n in "$HUGE_SYSFS"/devices/system/node/node[0-9]*; do
		[ -d "$n" ] && nodes+=("$n")
	done
	[ ${#nodes[@]} -ge 2 ] || return 0
	for p in ${PCIS[@]+"${PCIS[@]}"}; do
		n=$(cat "$SYSFS/bus/pci/devices/$p/numa_node" 2>/dev/null || true)
		[[ "$n" =~ ^[0-9]+$ ]] || return 0
		[ -z "$want" ] || [ "$want" = "$n" ] || return 0
		want=$n
	done
	for c in $(expand_list "$LCORES"); do
		n=
		for d in "$HUGE_SYSFS/devices/system/cpu/cpu$c"/node[0-9]*; do
			[ -e "$d" ] && n=${d##*/node} && break
		done
		[[ "$n" =~ ^[0-9]+$ ]] || return 0
		[ -z "$want" ] || [ "$want" = "$n" ] || return 0
		want=$n
	done
	echo "$want"
}

# The page size in kB of the hugetlbfs mounted on each mount point, as
# "KB DIR" lines (no pagesize= option: the default size).
hugetlbfs_mounts() {
	local def
	def=$(awk '$1 == "Hugepagesize:" { print $2 }' "$MEMINFO" 2>/dev/null || true)
	awk -v def="${def:-0}" '$3 == "hugetlbfs" {
		kb = def; n = split($4, o, ",")
		for (i = 1; i <= n; i++) if (o[i] ~ /^pagesize=/) {
			s = substr(o[i], 10); u = tolower(substr(s, length(s))); v = s + 0
			kb = u == "g" ? v * 1048576 : u == "m" ? v * 1024 : u == "k" ? v : int(v / 1024)
		}
		print kb, $2
	}' "$MOUNTS" 2>/dev/null || true
}

# ---- hugepages ----
if [ "$HUGEPAGES" = false ]; then
	echo "hugepages: none needed ([eal] hugepages = false)"
else
	count_of() { cat "$1" 2>/dev/null || echo 0; }
	g1=$(count_of "$HUGE_SYSFS/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages")
	node=
	if [ "$g1" -gt 0 ] && [ $((g1 * 1024)) -ge "$MEMORY_MB" ]; then
		size=1G kb=1048576 pages=$g1
		echo "hugepages: [eal] memory_mb = $MEMORY_MB: the $g1 1G pages reserved already cover it, kept"
	else
		size=2M kb=2048
		want=$(( (10#$MEMORY_MB * 1024 + kb - 1) / kb ))
		node=$(one_numa_node)
		if [ -n "$node" ] &&
			[ -e "$HUGE_SYSFS/devices/system/node/node$node/hugepages/hugepages-${kb}kB/nr_hugepages" ]; then
			now=$(count_of "$HUGE_SYSFS/devices/system/node/node$node/hugepages/hugepages-${kb}kB/nr_hugepages")
			where=" on NUMA node $node (all its NICs and lcores are)"
		else
			node=
			now=$(count_of "$HUGE_SYSFS/kernel/mm/hugepages/hugepages-${kb}kB/nr_hugepages")
			where=
		fi
		if [ "$now" -ge "$want" ]; then
			pages=$now
			echo "hugepages: [eal] memory_mb = $MEMORY_MB needs $want 2M pages$where; $now reserved already, kept"
		else
			pages=$want
			echo "hugepages: [eal] memory_mb = $MEMORY_MB needs $want 2M pages$where; $now reserved now"
		fi
	fi
	# A hugetlbfs of this size already mounted serves the pages; else the
	# default directory, unless it holds one of another size (2M pages on a
	# machine whose default size is 1G: /dev/hugepages is a 1G one).
	mnt=$(hugetlbfs_mounts | awk -v kb="$kb" '$1 == kb { print $2; exit }')
	if [ -z "$mnt" ] && [ "$size" = 2M ] &&
		[ -n "$(hugetlbfs_mounts | awk '$2 == "/dev/hugepages" { print }')" ]; then
		mnt=/dev/hugepages2M
	fi
	args=(--size "$size" --pages "$pages")
	[ -z "$node" ] || args+=(--node "$node")
	[ -z "$mnt" ] || args+=(--mount "$mnt")
	step hugepages.sh "$HERE/hugepages.sh" ${DRY[@]+"${DRY[@]}"} "${args[@]}"
fi

# ---- NICs ----
if [ ${#PCIS[@]} -eq 0 ]; then
	echo "NICs: no [port.N] pci (vdev ports only): nothing to bind"
else
	todo=()
	for p in "${PCIS[@]}"; do
		drv=$(basename "$(readlink "$SYSFS/bus/pci/devices/$p/driver" 2>/dev/null)" 2>/dev/null || true)
		if [ "$drv" = vfio-pci ]; then
			echo "NICs: $p already bound to vfio-pci"
		else
			todo+=("$p")
		fi
	done
	if [ ${#todo[@]} -eq 0 ]; then
		echo "NICs: all ${#PCIS[@]} already on vfio-pci: nothing to bind"
	else
		step bind-nic.sh "$HERE/bind-nic.sh" ${DRY[@]+"${DRY[@]}"} \
			${BIND_OPTS[@]+"${BIND_OPTS[@]}"} "${todo[@]}"
	fi
fi

if [ ${#FAILED[@]} -gt 0 ]; then
	failed=$(IFS=,; echo "${FAILED[*]}")
	die "not ready for zbmd: ${failed//,/ and } failed (messages above)"
fi
if [ "$DRY_RUN" -eq 1 ]; then
	echo "dry run: nothing was changed"
else
	echo "ready for zbmd: $CONFIG"
fi
exit 0
