#!/usr/bin/env bash
# scripts/bind-nic.sh — hand NICs to vfio-pci for DPDK (or back to a kernel
# driver) with DPDK's dpdk-devbind.py.
#
# Every change goes through do_run/do_write, which only print in --dry-run:
# a dry run reads the system (sysfs, routes) and changes nothing.
set -euo pipefail

PROG=${0##*/}
SYSFS=${ZBMD_SYSFS:-/sys}   # tests point it at a fake tree
DRIVER=vfio-pci
DRIVER_GIVEN=
DRY_RUN=0
FORCE=0
FORCE_DEFROUTE=0
NOIOMMU=0
ACTION=bind
DEVS=()

usage() {
	cat <<EOF
usage: $PROG [--driver DRV] [--noiommu] [--force] [--force-default-route]
                   [--dry-run] PCI...
       $PROG --status
       $PROG --restore DRV [--force] [--force-default-route] [--dry-run] PCI...

Bind network devices to vfio-pci (default) so that zbmd can drive them with
DPDK: [port.N] pci = 0000:3b:00.0 in the config. PCI addresses are
DDDD:BB:DD.F or BB:DD.F, as in \`lspci -D\` or \`$PROG --status\`.

  --driver DRV    bind to DRV instead of vfio-pci (e.g. uio_pci_generic)
  --noiommu       no IOMMU on this machine: turn on vfio's unsafe no-IOMMU
                  mode (no DMA isolation; test machines and VMs only)
  --force         also bind a device that is not a network device, or whose
                  kernel interface is up or carries routes (it is brought
                  down first; a remote session over it will be cut); not
                  the interface of a default route (next option)
  --force-default-route
                  --force, and also bind a device whose kernel interface
                  carries a default route (IPv4 or IPv6, any table): the
                  machine loses that network, and most likely the session
                  you run this from
  --restore DRV   give the devices back to kernel network driver DRV (e.g.
                  ixgbe, mlx5_core, virtio-pci); not a DPDK driver (that is
                  --driver), and with the same checks as a bind (--force)
  --status        print dpdk-devbind.py --status for network devices
  --dry-run       print what would be done and change nothing
  -h, --help      this text

Needs root unless --dry-run or --status. Uses dpdk-devbind.py from the dpdk
package (found on PATH, in /usr/bin, /usr/sbin, /usr/local/bin or
/usr/share/dpdk/usertools; or set DPDK_DEVBIND). Exit status: 0 done,
1 failed or refused, 2 bad usage.
EOF
}

. "$(dirname "$(readlink -f "$0")")/setup-lib.sh"

find_devbind() {
	local c
	# the one the user named, or none: never another in its place
	if [ -n "${DPDK_DEVBIND:-}" ]; then
		[ -f "$DPDK_DEVBIND" ] && [ -x "$DPDK_DEVBIND" ] || return 1
		echo "$DPDK_DEVBIND"
		return 0
	fi
	for c in "$(command -v dpdk-devbind.py 2>/dev/null || true)" \
		/usr/bin/dpdk-devbind.py /usr/sbin/dpdk-devbind.py \
		/usr/local/bin/dpdk-devbind.py /usr/share/dpdk/usertools/dpdk-devbind.py; do
		if [ -n "$c" ] && [ -x "$c" ]; then
			echo "$c"
			return 0
		fi
	done
	return 1
}

# Kernel interfaces of a PCI device (directly under it, or under a child
# device as with virtio: .../0000:00:03.0/virtio1/net/eth0).
netdevs_of() {
	local n
	for n in "$SYSFS"/class/net/*; do
		case "$(readlink -f "$n")" in
		*/"$1"/*) echo "${n##*/}" ;;
		esac
	done
}

# Whether kernel interface $1 carries a default route, IPv4 or IPv6, in any
# routing table (a multipath route counts when one of its hops is on $1).
has_default_route() {
	{
		ip -o -4 route show table all default 2>/dev/null || true
		ip -o -6 route show table all default 2>/dev/null || true
	} | awk -v i="$1" '{ for (k = 1; k < NF; k++) if ($k == "dev" && $(k + 1) == i) f = 1 }
		END { exit !f }'
}

# Canonical "dddd:bb:dd.f" (lower case) or exit 2.
canon_pci() {
	local a=${1,,}
	[[ "$a" =~ ^[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$ ]] && a="0000:$a"
	[[ "$a" =~ ^[0-9a-f]{4}:[0-9a-f]{2}:[01][0-9a-f]\.[0-7]$ ]] ||
		usage_error "'$1' is not a PCI address (expected DDDD:BB:DD.F or BB:DD.F)"
	echo "$a"
}

while [ $# -gt 0 ]; do
	case "$1" in
	-h | --help) usage; exit 0 ;;
	--dry-run) DRY_RUN=1 ;;
	--force) FORCE=1 ;;
	--force-default-route) FORCE=1; FORCE_DEFROUTE=1 ;;
	--noiommu) NOIOMMU=1 ;;
	--status) ACTION=status ;;
	--driver | --restore)
		[ $# -ge 2 ] || usage_error "$1 needs a driver"
		[ -z "$DRIVER_GIVEN" ] || [ "$DRIVER_GIVEN" = "$1" ] ||
			usage_error "$DRIVER_GIVEN and $1 do not go together (--driver binds for DPDK, --restore gives back to the kernel)"
		DRIVER_GIVEN=$1; DRIVER=$2
		[ "$1" = --driver ] || ACTION=restore
		shift ;;
	-*) usage_error "unknown option '$1'" ;;
	*) DEVS+=("$(canon_pci "$1")") ;;
	esac
	shift
done
[[ "$DRIVER" =~ ^[A-Za-z0-9_-]+$ ]] || usage_error "'$DRIVER' is not a driver name"
if [ "$ACTION" = restore ]; then
	case "$DRIVER" in
	vfio-pci | vfio_pci | uio_pci_generic | uio-pci-generic | igb_uio | igb-uio)
		usage_error "--restore gives devices back to a kernel network driver, not $DRIVER: use --driver for DPDK drivers" ;;
	esac
	# a driver this kernel has: loaded (sysfs), a module, or built in
	kdrv=${DRIVER//-/_}
	if [ ! -e "$SYSFS/bus/pci/drivers/$DRIVER" ] && [ ! -e "$SYSFS/bus/pci/drivers/$kdrv" ] &&
		! modinfo "$DRIVER" >/dev/null 2>&1 &&
		! grep -qE "/$kdrv\.ko" "/lib/modules/$(uname -r)/modules.builtin" 2>/dev/null; then
		die "--restore $DRIVER: this kernel has no driver or module '$DRIVER' (see ls /sys/bus/pci/drivers, modinfo)"
	fi
fi

if [ -n "${DPDK_DEVBIND:-}" ] && ! { [ -f "$DPDK_DEVBIND" ] && [ -x "$DPDK_DEVBIND" ]; }; then
	die "DPDK_DEVBIND=$DPDK_DEVBIND is not an executable file (unset it to look for dpdk-devbind.py)"
fi
DEVBIND=$(find_devbind) || die "dpdk-devbind.py not found: install the dpdk package (apt-get install dpdk) or set DPDK_DEVBIND"

if [ "$ACTION" = status ]; then
	exec "$DEVBIND" --status-dev net
fi
[ ${#DEVS[@]} -gt 0 ] || usage_error "give at least one PCI address"
if [ "$DRY_RUN" -eq 0 ] && [ "$(id -u)" -ne 0 ]; then
	die "needs root (or --dry-run to see what it would do)"
fi

# Check every device before changing anything: a bind and a restore alike
# (either moves the device to another driver) take network devices only,
# and none whose kernel interface is up or carries routes, unless --force;
# none whose interface carries a default route (the way off this machine,
# a remote session's too) unless --force-default-route. A device already
# on DRIVER is left as it is.
for dev in "${DEVS[@]}"; do
	d="$SYSFS/bus/pci/devices/$dev"
	[ -e "$d" ] || die "no PCI device $dev ($d is missing; lspci -D lists the devices)"
	class=$(cat "$d/class")
	cur=$(basename "$(readlink "$d/driver" 2>/dev/null)" 2>/dev/null || true)
	echo "$dev: class $class, driver ${cur:-(none)}"
	[ "$cur" != "$DRIVER" ] || continue
	if [[ "$class" != 0x02* ]] && [ "$FORCE" -eq 0 ]; then
		die "$dev is not a network device (class $class); --force binds it anyway"
	fi
	for ifc in $(netdevs_of "$dev"); do
		if [ "$FORCE_DEFROUTE" -eq 0 ] && has_default_route "$ifc"; then
			die "$dev is kernel interface $ifc, which carries the default route: binding it to $DRIVER takes this machine off that network (a remote session over it too); --force-default-route binds it anyway (--force alone does not)"
		fi
		routes=$(ip -o route show dev "$ifc" 2>/dev/null | wc -l)
		up=$(ip -o link show dev "$ifc" 2>/dev/null | grep -c '[<,]UP[,>]' || true)
		if { [ "$routes" -gt 0 ] || [ "$up" -gt 0 ]; } && [ "$FORCE" -eq 0 ]; then
			die "$dev is kernel interface $ifc, which is up with $routes route(s): binding it to $DRIVER cuts its traffic; --force brings it down and binds it"
		fi
	done
done

if [ "$ACTION" = bind ] && [ "$DRIVER" = vfio-pci ]; then
	do_run modprobe vfio-pci
	if [ -z "$(ls -A "$SYSFS/kernel/iommu_groups" 2>/dev/null)" ]; then
		if [ "$NOIOMMU" -eq 1 ]; then
			do_write Y "$SYSFS/module/vfio/parameters/enable_unsafe_noiommu_mode"
		else
			die "no IOMMU groups: enable the IOMMU (kernel command line intel_iommu=on iommu=pt or amd_iommu=on) or pass --noiommu"
		fi
	fi
fi

# All or nothing: if a device fails, those changed before it (and it) go
# back to the driver they had, their interfaces up again.
CHANGED=() ORIG=() DOWNED=()
rollback() {
	local k
	for ((k = ${#CHANGED[@]} - 1; k >= 0; k--)); do
		if [ -n "${ORIG[k]}" ]; then
			"$DEVBIND" --bind="${ORIG[k]}" "${CHANGED[k]}" >/dev/null 2>&1 &&
				echo "${CHANGED[k]}: back to ${ORIG[k]}" >&2 ||
				echo "${CHANGED[k]}: could not go back to ${ORIG[k]}" >&2
		fi
	done
	for ifc in "${DOWNED[@]}"; do
		ip link set dev "$ifc" up >/dev/null 2>&1 || true
	done
}
if [ "$DRY_RUN" -eq 0 ]; then
	trap 'rc=$?; [ $rc -eq 0 ] || [ ${#CHANGED[@]} -eq 0 ] || rollback; exit $rc' EXIT
fi

for dev in "${DEVS[@]}"; do
	d="$SYSFS/bus/pci/devices/$dev"
	cur=$(basename "$(readlink "$d/driver" 2>/dev/null)" 2>/dev/null || true)
	if [ "$cur" = "$DRIVER" ]; then
		echo "$dev: already bound to $DRIVER"
		continue
	fi
	CHANGED+=("$dev"); ORIG+=("$cur")
	for ifc in $(netdevs_of "$dev"); do
		do_run ip link set dev "$ifc" down
		DOWNED+=("$ifc")
	done
	if [ "$FORCE" -eq 1 ]; then
		do_run "$DEVBIND" --force --bind="$DRIVER" "$dev"
	else
		do_run "$DEVBIND" --bind="$DRIVER" "$dev"
	fi
	if [ "$DRY_RUN" -eq 0 ]; then
		now=$(basename "$(readlink "$d/driver" 2>/dev/null)" 2>/dev/null || true)
		[ "$now" = "$DRIVER" ] || die "$dev: still bound to ${now:-(none)}, not $DRIVER"
		echo "$dev: bound to $DRIVER"
	fi
done
if [ "$DRY_RUN" -eq 1 ]; then
	echo "dry run: nothing was changed"
fi
exit 0
