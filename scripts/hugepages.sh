#!/usr/bin/env bash
# scripts/hugepages.sh — reserve hugepages for DPDK and mount hugetlbfs.
#
# Every change goes through do_run/do_write, which only print in --dry-run:
# a dry run reads the system and changes nothing.
set -euo pipefail

PROG=${0##*/}
SYSFS=/sys
SIZE=2M
PAGES=
MEMORY_MB=
NODE=
MOUNT=
DRY_RUN=0
ACTION=reserve
PERSIST=0
FORCE=0
MEMINFO=/proc/meminfo
MOUNTS=${ZBMD_PROC_MOUNTS:-/proc/mounts}   # tests point it at a fake table
ACTIONS=()    # --status / --clear as given: one at most
RESERVE_OPTS=()   # options only a reservation takes
SYSCTL_CONF=/etc/sysctl.d/80-zbmd-hugepages.conf

usage() {
	cat <<EOF
usage: $PROG [--size 2M|1G] (--pages N | --memory-mb MB) [--node N]
             [--mount DIR] [--persist] [--force] [--dry-run]
       $PROG --status
       $PROG --clear [--size 2M|1G] [--node N] [--dry-run]

Reserve hugepages for DPDK (zbmd's [eal] hugepages = true, memory_mb) and
make sure a hugetlbfs of that page size is mounted.

  --size S        page size, 2M (default) or 1G
  --pages N       reserve N pages in total (or on --node)
  --memory-mb MB  reserve enough pages for MB MiB (rounded up)
  --node N        reserve on NUMA node N only (the NIC's node is best:
                  cat /sys/bus/pci/devices/ADDR/numa_node)
  --mount DIR     hugetlbfs mount point, an absolute path (default
                  /dev/hugepages for 2M, /dev/hugepages1G for 1G); a
                  hugetlbfs of another page size there is refused
  --persist       also write $SYSCTL_CONF
                  (2M pages on all nodes only; 1G pages need the kernel
                  command line default_hugepagesz=1G hugepagesz=1G hugepages=N)
  --force         reserve even what would leave the system less than an
                  eighth of its memory (refused otherwise)
  --status        print the reservations per size and node, change nothing
  --clear         release the pages of --size (on --node)
  --dry-run       print what would be done and change nothing
  -h, --help      this text

Needs root unless --dry-run or --status. A reservation the kernel cannot
complete is undone (the count goes back to what it was). Exit status: 0
done, 1 failed (e.g. the kernel reserved fewer pages than asked), 2 bad
usage.
EOF
}

. "$(dirname "$(readlink -f "$0")")/setup-lib.sh"

while [ $# -gt 0 ]; do
	case "$1" in
	-h | --help) usage; exit 0 ;;
	--dry-run) DRY_RUN=1 ;;
	--status) ACTION=status; ACTIONS+=("$1") ;;
	--clear) ACTION=clear; ACTIONS+=("$1") ;;
	--persist) PERSIST=1; RESERVE_OPTS+=("$1") ;;
	--force) FORCE=1 ;;
	--size) [ $# -ge 2 ] || usage_error "--size needs a value"; SIZE=$2; shift ;;
	--pages) [ $# -ge 2 ] || usage_error "--pages needs a value"; PAGES=$2; RESERVE_OPTS+=("$1"); shift ;;
	--memory-mb) [ $# -ge 2 ] || usage_error "--memory-mb needs a value"; MEMORY_MB=$2; RESERVE_OPTS+=("$1"); shift ;;
	--node) [ $# -ge 2 ] || usage_error "--node needs a value"; NODE=$2; shift ;;
	--mount) [ $# -ge 2 ] || usage_error "--mount needs a value"; MOUNT=$2; RESERVE_OPTS+=("$1"); shift ;;
	*) usage_error "unknown argument '$1'" ;;
	esac
	shift
done
# One action: a conflict is the user's to resolve, not "the last one wins".
if [ ${#ACTIONS[@]} -gt 1 ] && [ "${ACTIONS[0]}" != "${ACTIONS[1]}" ]; then
	usage_error "${ACTIONS[0]} and ${ACTIONS[1]} do not go together: give one"
fi
if [ "$ACTION" != reserve ] && [ ${#RESERVE_OPTS[@]} -gt 0 ]; then
	usage_error "--$ACTION does not take ${RESERVE_OPTS[0]} (an option of a reservation)"
fi
if [ -n "$MOUNT" ]; then
	case "$MOUNT" in
	/*) ;;
	*) usage_error "--mount must be an absolute path, not '$MOUNT'" ;;
	esac
fi

case "$SIZE" in
2M | 2m | 2048k | 2048kB) SIZE=2M; KB=2048 ;;
1G | 1g | 1048576k | 1048576kB) SIZE=1G; KB=1048576 ;;
*) usage_error "--size must be 2M or 1G, not '$SIZE'" ;;
esac
if [ -z "$MOUNT" ]; then
	if [ "$SIZE" = 2M ]; then MOUNT=/dev/hugepages; else MOUNT=/dev/hugepages1G; fi
fi
if [ -n "$NODE" ] && ! [[ "$NODE" =~ ^[0-9]+$ ]]; then
	usage_error "--node must be a NUMA node number, not '$NODE'"
fi

status() {
	local d n name
	for d in "$SYSFS"/kernel/mm/hugepages/hugepages-*; do
		[ -d "$d" ] || continue
		name=${d##*/}
		echo "$name: total $(cat "$d/nr_hugepages"), free $(cat "$d/free_hugepages")"
		for n in "$SYSFS"/devices/system/node/node*; do
			[ -e "$n/hugepages/$name/nr_hugepages" ] || continue
			echo "  ${n##*/}: $(cat "$n/hugepages/$name/nr_hugepages")"
		done
	done
	echo "hugetlbfs mounts:"
	grep -w hugetlbfs "$MOUNTS" | sed 's/^/  /' || echo "  (none)"
}

# The page size, in kB, of the hugetlbfs mounted on $1 (its pagesize=
# option; without one, the default size); nothing when none is mounted there.
mount_page_kb() {
	local opts sz n u def
	opts=$(awk -v m="$1" '$2 == m && $3 == "hugetlbfs" { o = $4 } END { print o }' "$MOUNTS")
	[ -n "$opts" ] || return 0
	sz=$(tr ',' '\n' <<<"$opts" | sed -n 's/^pagesize=//p' | tail -n 1)
	if [ -z "$sz" ]; then
		def=$(awk '$1 == "Hugepagesize:" { print $2 }' "$MEMINFO" 2>/dev/null)
		echo "${def:-0}"
		return 0
	fi
	[[ "$sz" =~ ^([0-9]+)([KkMmGg]?) ]] || { echo 0; return 0; }
	n=${BASH_REMATCH[1]}; u=${BASH_REMATCH[2],,}
	case "$u" in
	g) echo $((10#$n * 1048576)) ;;
	m) echo $((10#$n * 1024)) ;;
	k) echo $((10#$n)) ;;
	*) echo $((10#$n / 1024)) ;;
	esac
}

if [ "$ACTION" = status ]; then
	status
	exit 0
fi

if [ "$ACTION" = reserve ]; then
	if [ -n "$PAGES" ] && [ -n "$MEMORY_MB" ]; then
		usage_error "give --pages or --memory-mb, not both"
	fi
	if [ -n "$MEMORY_MB" ]; then
		[[ "$MEMORY_MB" =~ ^[0-9]{1,9}$ ]] ||
			usage_error "--memory-mb must be a number of MiB (at most 9 digits), not '$MEMORY_MB'"
		PAGES=$(( (10#$MEMORY_MB * 1024 + KB - 1) / KB ))
	fi
	[ -n "$PAGES" ] || usage_error "give --pages N or --memory-mb MB"
	[[ "$PAGES" =~ ^[0-9]{1,9}$ ]] ||
		usage_error "--pages must be a number (at most 9 digits), not '$PAGES'"
	PAGES=$((10#$PAGES))
	[ "$PAGES" -gt 0 ] || usage_error "0 pages: use --clear to release them"
else
	PAGES=0
fi

DIR="$SYSFS/kernel/mm/hugepages/hugepages-${KB}kB"
[ -d "$DIR" ] || die "this kernel has no $SIZE hugepages ($DIR is missing)"
TARGET="$DIR/nr_hugepages"
if [ -n "$NODE" ]; then
	TARGET="$SYSFS/devices/system/node/node$NODE/hugepages/hugepages-${KB}kB/nr_hugepages"
	[ -e "$TARGET" ] || die "no NUMA node $NODE with $SIZE pages ($TARGET is missing)"
fi
if [ "$DRY_RUN" -eq 0 ] && [ "$(id -u)" -ne 0 ]; then
	die "needs root (or --dry-run to see what it would do)"
fi

# A hugetlbfs of another page size on the mount point does not serve these
# pages: refused before anything is written.
MOUNT_KB=
if [ "$ACTION" = reserve ]; then
	MOUNT_KB=$(mount_page_kb "$MOUNT")
	if [ -n "$MOUNT_KB" ] && [ "$MOUNT_KB" != "$KB" ]; then
		die "$MOUNT is a hugetlbfs of $((MOUNT_KB / 1024))M pages, not $SIZE: give --mount another directory for the $SIZE pages"
	fi
fi

before=$(cat "$TARGET")
echo "$SIZE pages${NODE:+ on node $NODE}: $before reserved now, $PAGES wanted"
# More pages than memory can spare would starve everything else (the kernel
# takes every page it can get): refuse what leaves under an eighth free.
if [ "$ACTION" = reserve ] && [ "$PAGES" -gt "$before" ] && [ -r "$MEMINFO" ]; then
	avail=$(awk '$1 == "MemAvailable:" { print $2 }' "$MEMINFO")
	total=$(awk '$1 == "MemTotal:" { print $2 }' "$MEMINFO")
	more=$(( (PAGES - before) * KB ))
	if [ -n "$avail" ] && [ -n "$total" ] && [ "$more" -gt $((avail - total / 8)) ]; then
		msg="$PAGES $SIZE pages need $((more / 1024)) MiB more; $((avail / 1024)) MiB are available of $((total / 1024)) MiB"
		[ "$FORCE" -eq 1 ] || die "$msg: that would leave the system under an eighth of its memory (--force to do it anyway)"
		echo "$msg: reserving anyway (--force)"
	fi
fi
do_write "$PAGES" "$TARGET"
if [ "$DRY_RUN" -eq 0 ]; then
	got=$(cat "$TARGET")
	if [ "$got" -lt "$PAGES" ]; then
		echo "$before" >"$TARGET" || true   # undo: the pages it did get are released
		die "the kernel reserved only $got of $PAGES $SIZE pages (memory is fragmented: reserve at boot, or free memory); the count is back to $(cat "$TARGET")"
	fi
	echo "$got $SIZE pages reserved"
fi

if [ "$ACTION" = reserve ]; then
	if [ -n "$MOUNT_KB" ]; then
		echo "hugetlbfs already mounted on $MOUNT ($SIZE pages)"
	else
		do_run mkdir -p "$MOUNT"
		do_run mount -t hugetlbfs -o "pagesize=$SIZE" nodev "$MOUNT"
	fi
	if [ "$PERSIST" -eq 1 ]; then
		if [ "$SIZE" = 2M ] && [ -z "$NODE" ]; then
			do_write "vm.nr_hugepages = $PAGES" "$SYSCTL_CONF"
		elif [ "$SIZE" = 2M ]; then
			echo "note: --persist covers 2M pages on all nodes only; for 2M pages on node $NODE" \
				"add 'hugepagesz=2M hugepages=$NODE:$PAGES' to the kernel command line"
		else
			echo "note: --persist covers 2M pages on all nodes only; for 1G pages add" \
				"'default_hugepagesz=1G hugepagesz=1G hugepages=${NODE:+$NODE:}$PAGES' to the kernel command line"
		fi
	fi
fi
if [ "$DRY_RUN" -eq 1 ]; then
	echo "dry run: nothing was changed"
fi
exit 0
