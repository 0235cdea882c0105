#!/bin/bash
# tests/config/test_scripts.sh — the node-setup scripts: each has --help and
# rejects bad usage with exit 2; --dry-run prints the plan and changes
# nothing (hugepage counts, mounts, the NIC's driver and link state, the
# files of a staging root); install-service.sh really installs into a
# staging root (--root) and the unit it writes is valid for systemd.
source "$ZBMD_ROOT/tests/common/tap.sh"
S="$ZBMD_ROOT/scripts"
ZBMD="$ZBMD_BUILD/bin/zbmd"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/zbmd-config-scripts.XXXXXX")
# the cluster.sh checks below build memif clusters (files only) of tags
# zbts<pid>*: down whatever one of them left
CT=zbts$$
cleanup() {
	local t
	for t in a b c d e f g h; do
		"$S/cluster.sh" --tag "$CT$t" --dir "$TMP/cl$t" down >/dev/null 2>&1
	done
	rm -rf "$TMP"
}
trap cleanup EXIT
# (every branch that does not apply here prints its checks as skipped: the
# count is the same on every machine, and a section that stops early shows)
plan 95
# as_nobody CMD...: CMD as user nobody (checks of what a non-root user is told)
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
can_drop() { [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; }

# --help and bad usage, for every script.
for s in hugepages.sh bind-nic.sh install-service.sh prepare-node.sh; do
	out=$("$S/$s" --help 2>&1); rc=$?
	[ $rc -eq 0 ] && grep -q "^usage: $s" <<<"$out" && grep -q -- "--dry-run" <<<"$out"
	ok $? "$s --help: usage with --dry-run, exit 0"
	"$S/$s" --no-such-option >/dev/null 2>"$TMP/err"; rc=$?
	[ $rc -eq 2 ] && grep -q "unknown" "$TMP/err"
	ok $? "$s: unknown option is exit 2"
done
grep -q '^ExecStart=/usr/local/bin/zbmd run -c /etc/zbmd/zbmd.ini$' "$S/zbmd.service"
ok $? "zbmd.service runs zbmd run -c /etc/zbmd/zbmd.ini"

# ---- hugepages.sh ----
snapshot_huge() {
	cat /sys/kernel/mm/hugepages/*/nr_hugepages 2>/dev/null
	grep -w hugetlbfs /proc/mounts
	ls -d /dev/hugepages* /etc/sysctl.d/80-zbmd-hugepages.conf 2>/dev/null
}
if [ -d /sys/kernel/mm/hugepages/hugepages-2048kB ]; then
	snapshot_huge >"$TMP/before"
	now=$(cat /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages)
	out=$("$S/hugepages.sh" --dry-run --memory-mb 1000 --persist 2>&1); rc=$?
	[ $rc -eq 0 ] &&
		grep -qx "2M pages: $now reserved now, 500 wanted" <<<"$out" &&
		grep -qx "would write '500' to /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages" <<<"$out" &&
		grep -qx "would write 'vm.nr_hugepages = 500' to /etc/sysctl.d/80-zbmd-hugepages.conf" <<<"$out" &&
		grep -qx "dry run: nothing was changed" <<<"$out"
	ok $? "hugepages.sh --dry-run --memory-mb 1000: plans 500 pages of 2M"
	[ $rc -eq 0 ] || diag "$out"
	# the default mount point, /dev/hugepages: mounted there already (any
	# hugetlbfs elsewhere does not count), or the mount is planned
	if awk '$2 == "/dev/hugepages" && $3 == "hugetlbfs" { f = 1 } END { exit !f }' /proc/mounts; then
		grep -qx "hugetlbfs already mounted on /dev/hugepages (2M pages)" <<<"$out" &&
			! grep -q "would run: mount" <<<"$out"
		ok $? "hugepages.sh --dry-run: hugetlbfs already mounted on /dev/hugepages, no mount planned"
	else
		grep -qx "would run: mount -t hugetlbfs -o pagesize=2M nodev /dev/hugepages" <<<"$out"
		ok $? "hugepages.sh --dry-run: plans the hugetlbfs mount"
	fi
	snapshot_huge >"$TMP/after"
	cmp -s "$TMP/before" "$TMP/after"
	ok $? "hugepages.sh --dry-run changed no page count, mount or file"
else
	tap_skip_reason="kernel has no 2M hugepages"
	for i in 1 2 3; do echo "ok $((TAP_RUN + 1)) # SKIP $tap_skip_reason"; TAP_RUN=$((TAP_RUN + 1)); done
fi
if [ -d /sys/kernel/mm/hugepages/hugepages-1048576kB ] && [ -d /sys/devices/system/node/node0 ]; then
	out=$("$S/hugepages.sh" --dry-run --size 1G --pages 2 --node 0 2>&1)
	grep -qx "would write '2' to /sys/devices/system/node/node0/hugepages/hugepages-1048576kB/nr_hugepages" <<<"$out"
	ok $? "hugepages.sh --dry-run --size 1G --node 0: per-node sysfs file"
else
	echo "ok $((TAP_RUN + 1)) # SKIP no 1G pages or NUMA node 0"; TAP_RUN=$((TAP_RUN + 1))
fi
"$S/hugepages.sh" --dry-run --size 4M --pages 1 >/dev/null 2>&1; [ $? -eq 2 ]
ok $? "hugepages.sh: --size 4M is exit 2"
"$S/hugepages.sh" --dry-run >/dev/null 2>&1; [ $? -eq 2 ]
ok $? "hugepages.sh: no --pages/--memory-mb is exit 2"
"$S/hugepages.sh" --dry-run --pages 0 >/dev/null 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] && grep -q -- "--clear" "$TMP/err"
ok $? "hugepages.sh: --pages 0 is exit 2 (releasing is --clear)"
if [ -d /sys/kernel/mm/hugepages/hugepages-2048kB ]; then
	# far more than this machine has: refused before anything is written
	# (a dry run checks it too), unless --force
	"$S/hugepages.sh" --dry-run --memory-mb 999999999 >"$TMP/out" 2>"$TMP/err"; rc=$?
	[ $rc -eq 1 ] && grep -q "under an eighth of its memory" "$TMP/err" && ! grep -q "would write" "$TMP/out"
	ok $? "hugepages.sh: a reservation beyond the memory available is refused"
	out=$("$S/hugepages.sh" --dry-run --memory-mb 08 2>&1); rc=$?
	[ $rc -eq 0 ] && grep -qx "would write '4' to /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages" <<<"$out"
	ok $? "hugepages.sh: --memory-mb 08 is 8 MiB (4 pages), not an arithmetic error"
else
	for i in 1 2; do echo "ok $((TAP_RUN + 1)) # SKIP kernel has no 2M hugepages"; TAP_RUN=$((TAP_RUN + 1)); done
fi
"$S/hugepages.sh" --status >"$TMP/out" 2>&1
[ $? -eq 0 ] && grep -q "hugetlbfs mounts:" "$TMP/out"
ok $? "hugepages.sh --status"

# One action at a time; --mount absolute; a hugetlbfs mounted with another
# page size does not count as mounted for these pages (a fake mount table,
# ZBMD_PROC_MOUNTS); the --persist note names the right page size; the plan
# quotes its arguments, ready to paste.
"$S/hugepages.sh" --dry-run --clear --pages 5 >/dev/null 2>"$TMP/err"; r1=$?
"$S/hugepages.sh" --dry-run --status --clear >/dev/null 2>"$TMP/err2"; r2=$?
[ $r1 -eq 2 ] && grep -q -- "--clear does not take --pages" "$TMP/err" &&
	[ $r2 -eq 2 ] && grep -q -- "--status and --clear do not go together" "$TMP/err2"
ok $? "hugepages.sh: --clear --pages 5 and --status --clear are exit 2 (rc $r1, $r2)"
"$S/hugepages.sh" --dry-run --pages 1 --mount rel/dir >"$TMP/out" 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] && grep -q "must be an absolute path" "$TMP/err" && ! grep -q "would" "$TMP/out"
ok $? "hugepages.sh: a relative --mount is exit 2"
if [ -d /sys/kernel/mm/hugepages/hugepages-2048kB ]; then
	echo "nodev $TMP/huge2m hugetlbfs rw,relatime,pagesize=2M 0 0" >"$TMP/mounts"
	ZBMD_PROC_MOUNTS=$TMP/mounts "$S/hugepages.sh" --dry-run --pages 1 --mount "$TMP/huge2m" \
		>"$TMP/out" 2>&1; rc=$?
	[ $rc -eq 0 ] && grep -qx "hugetlbfs already mounted on $TMP/huge2m (2M pages)" "$TMP/out" &&
		! grep -q "would run: mount" "$TMP/out"
	ok $? "hugepages.sh: a 2M hugetlbfs on --mount serves 2M pages" || diag "$(cat "$TMP/out")"
	if [ -d /sys/kernel/mm/hugepages/hugepages-1048576kB ]; then
		ZBMD_PROC_MOUNTS=$TMP/mounts "$S/hugepages.sh" --dry-run --force --size 1G --pages 1 \
			--mount "$TMP/huge2m" >"$TMP/out" 2>&1; rc=$?
		[ $rc -eq 1 ] && grep -q "is a hugetlbfs of 2M pages, not 1G" "$TMP/out" &&
			! grep -q "would write\|already mounted" "$TMP/out"
		ok $? "hugepages.sh --size 1G: a 2M hugetlbfs on --mount is refused, not taken as mounted" ||
			diag "$(cat "$TMP/out")"
	else
		echo "ok $((TAP_RUN + 1)) # SKIP kernel has no 1G hugepages"; TAP_RUN=$((TAP_RUN + 1))
	fi
	out=$("$S/hugepages.sh" --dry-run --pages 1 --mount "$TMP/huge mnt'x" 2>&1); rc=$?
	line=$(grep '^would run: mkdir ' <<<"$out")
	# read back as the shell would (in a subshell: a bad quote is an error)
	[ $rc -eq 0 ] && (eval "set -- ${line#would run: }" && [ $# -eq 3 ] &&
		[ "$3" = "$TMP/huge mnt'x" ]) 2>/dev/null
	ok $? "hugepages.sh --dry-run: the plan quotes a path with a space and a quote" || diag "$line"
else
	for i in 1 2 3; do echo "ok $((TAP_RUN + 1)) # SKIP kernel has no 2M hugepages"; TAP_RUN=$((TAP_RUN + 1)); done
fi
if [ -e /sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages ]; then
	out=$("$S/hugepages.sh" --dry-run --pages 3 --node 0 --persist 2>&1); rc=$?
	[ $rc -eq 0 ] && grep -q "^note: .*'hugepagesz=2M hugepages=0:3'" <<<"$out" && ! grep -q 1G <<<"$out"
	ok $? "hugepages.sh --persist --node 0: the note is about 2M pages, not 1G" || diag "$out"
else
	echo "ok $((TAP_RUN + 1)) # SKIP no NUMA node 0 with 2M pages"; TAP_RUN=$((TAP_RUN + 1))
fi

# ---- bind-nic.sh ----
"$S/bind-nic.sh" --dry-run 3b:00 >/dev/null 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] && grep -q "'3b:00' is not a PCI address" "$TMP/err"
ok $? "bind-nic.sh: a bad PCI address is exit 2"
"$S/bind-nic.sh" --dry-run ffff:ff:1f.7 >/dev/null 2>"$TMP/err"; rc=$?
[ $rc -eq 1 ] && grep -q "no PCI device ffff:ff:1f.7" "$TMP/err"
ok $? "bind-nic.sh: a missing device is exit 1"
"$S/bind-nic.sh" --dry-run >/dev/null 2>&1; [ $? -eq 2 ]
ok $? "bind-nic.sh: no device is exit 2"

# A real network device of this machine, if any: the dry run must plan the
# bind and leave its driver and its interfaces exactly as they were.
nic=
for d in /sys/bus/pci/devices/*; do
	if [[ "$(cat "$d/class" 2>/dev/null)" == 0x02* ]]; then nic=${d##*/}; break; fi
done
if [ -n "$nic" ] && command -v dpdk-devbind.py >/dev/null; then
	# Only this device's own interfaces: other tests may add links meanwhile.
	nic_ifs=$(for n in /sys/class/net/*; do
		case "$(readlink -f "$n")" in */"$nic"/*) echo "${n##*/}" ;; esac; done)
	snapshot_nic() {
		readlink "/sys/bus/pci/devices/$nic/driver"
		for i in $nic_ifs; do ip -o link show dev "$i" | sed 's/ qlen.*//'; done
		cat /sys/module/vfio/parameters/enable_unsafe_noiommu_mode 2>/dev/null
		lsmod 2>/dev/null | grep -c '^vfio' || true
	}
	snapshot_nic >"$TMP/before"
	# --force-default-route: this NIC may well carry the default route
	out=$("$S/bind-nic.sh" --dry-run --force-default-route --noiommu "$nic" 2>&1); rc=$?
	[ $rc -eq 0 ] &&
		grep -q "^would run: .*dpdk-devbind.py --force --bind=vfio-pci $nic$" <<<"$out" &&
		grep -qx "would run: modprobe vfio-pci" <<<"$out" &&
		grep -qx "dry run: nothing was changed" <<<"$out"
	ok $? "bind-nic.sh --dry-run $nic: plans modprobe and dpdk-devbind.py --bind=vfio-pci"
	[ $rc -eq 0 ] || diag "$out"
	"$S/bind-nic.sh" --dry-run --restore "$(basename "$(readlink "/sys/bus/pci/devices/$nic/driver")")" "$nic" >"$TMP/out" 2>&1
	grep -q "already bound to" "$TMP/out"
	ok $? "bind-nic.sh --dry-run --restore to its current driver: nothing to do"
	snapshot_nic >"$TMP/after"
	cmp -s "$TMP/before" "$TMP/after"
	ok $? "bind-nic.sh --dry-run changed no driver, link or module"
else
	for i in 1 2 3; do echo "ok $((TAP_RUN + 1)) # SKIP no PCI network device or no dpdk-devbind.py"; TAP_RUN=$((TAP_RUN + 1)); done
fi

# All or nothing, on a fake sysfs (ZBMD_SYSFS) with a fake dpdk-devbind.py
# that binds by rewriting the driver link and fails for the second device:
# the first goes back to its driver, exit 1.
F="$TMP/fsys"
mkdir -p "$F/bus/pci/drivers/e1000" "$F/bus/pci/drivers/zbfake" "$F/class/net"
for dev in 0000:00:0a.0 0000:00:0b.0; do
	mkdir -p "$F/bus/pci/devices/$dev"
	echo 0x020000 >"$F/bus/pci/devices/$dev/class"
	ln -s ../../drivers/e1000 "$F/bus/pci/devices/$dev/driver"
done
{
	echo '#!/bin/bash'
	echo 'drv=${1#--bind=}; dev=$2'
	echo '[ "$drv" = zbfake ] && [ "$dev" = 0000:00:0b.0 ] && { echo "fake: $dev refuses" >&2; exit 1; }'
	echo "ln -sfn ../../drivers/\$drv \"$F/bus/pci/devices/\$dev/driver\""
} >"$TMP/devbind"
chmod +x "$TMP/devbind"
ZBMD_SYSFS=$F DPDK_DEVBIND=$TMP/devbind "$S/bind-nic.sh" --driver zbfake 0000:00:0a.0 0000:00:0b.0 \
	>"$TMP/out" 2>&1; rc=$?
a=$(basename "$(readlink "$F/bus/pci/devices/0000:00:0a.0/driver")")
b=$(basename "$(readlink "$F/bus/pci/devices/0000:00:0b.0/driver")")
[ $rc -eq 1 ] && [ "$a" = e1000 ] && [ "$b" = e1000 ] && grep -q "0000:00:0a.0: back to e1000" "$TMP/out"
ok $? "bind-nic.sh: a device that fails to bind puts the ones bound before it back (exit $rc, $a, $b)"
[ $rc -eq 1 ] || diag "$(cat "$TMP/out")"

# --restore: a kernel driver only, the checks of a bind (class, interface up
# or routed) unless --force, not with --driver, a driver the kernel has. On
# the fake sysfs: 0c.0 is a NIC whose interface is lo (always up), 0d.0 a
# host bridge.
mkdir -p "$F/bus/pci/devices/0000:00:0c.0/net/lo" "$F/bus/pci/devices/0000:00:0d.0"
echo 0x020000 >"$F/bus/pci/devices/0000:00:0c.0/class"
echo 0x060000 >"$F/bus/pci/devices/0000:00:0d.0/class"
ln -s ../../drivers/e1000 "$F/bus/pci/devices/0000:00:0c.0/driver"
ln -s ../../bus/pci/devices/0000:00:0c.0/net/lo "$F/class/net/lo"
bn() { ZBMD_SYSFS=$F DPDK_DEVBIND=$TMP/devbind "$S/bind-nic.sh" --dry-run "$@" >"$TMP/out" 2>&1; }
bn --restore zbfake 0000:00:0c.0; r1=$?; cp "$TMP/out" "$TMP/out1"
bn --restore zbfake --force 0000:00:0c.0; r2=$?
[ $r1 -eq 1 ] && grep -q "is kernel interface lo, which is up" "$TMP/out1" &&
	! grep -q "would run" "$TMP/out1" && [ $r2 -eq 0 ] &&
	grep -q "would run: .*devbind --force --bind=zbfake 0000:00:0c.0" "$TMP/out"
ok $? "bind-nic.sh --restore: a device whose interface is up is refused unless --force (rc $r1, $r2)" ||
	diag "$(cat "$TMP/out1" "$TMP/out")"
bn --restore zbfake 0000:00:0d.0; rc=$?
[ $rc -eq 1 ] && grep -q "is not a network device" "$TMP/out" && ! grep -q "would run" "$TMP/out"
ok $? "bind-nic.sh --restore: a host bridge (class 0x0600) is refused"
r=
for drv in vfio-pci uio_pci_generic igb_uio; do
	bn --restore $drv 0000:00:0a.0; rc=$?; r="$r $rc"
	[ $rc -eq 2 ] && grep -q "use --driver for DPDK drivers" "$TMP/out" || break
done
[ "$r" = " 2 2 2" ]
ok $? "bind-nic.sh --restore vfio-pci/uio_pci_generic/igb_uio: exit 2, use --driver (rc$r)"
bn --restore zbfake --driver vfio-pci 0000:00:0a.0; r1=$?
bn --driver zbfake --restore e1000 0000:00:0a.0; r2=$?
[ $r1 -eq 2 ] && [ $r2 -eq 2 ] && grep -q "do not go together" "$TMP/out"
ok $? "bind-nic.sh: --restore with --driver is exit 2, whichever comes last (rc $r1, $r2)"
bn --restore nosuchdrv 0000:00:0a.0; rc=$?
[ $rc -eq 1 ] && grep -q "no driver or module 'nosuchdrv'" "$TMP/out" && ! grep -q "would run" "$TMP/out"
ok $? "bind-nic.sh --dry-run --restore nosuchdrv: refused (exit $rc)"
ZBMD_SYSFS=$F DPDK_DEVBIND=$TMP/no-such-devbind "$S/bind-nic.sh" --dry-run --driver zbfake \
	0000:00:0a.0 >"$TMP/out" 2>&1; rc=$?
[ $rc -eq 1 ] && grep -q "DPDK_DEVBIND=$TMP/no-such-devbind is not an executable" "$TMP/out" &&
	! grep -q "would run" "$TMP/out"
ok $? "bind-nic.sh: a DPDK_DEVBIND that is not there is an error, not replaced (exit $rc)"

# The NIC of the default route: --force (up, routed) is not enough for it,
# --force-default-route is. A fake ip on PATH says interface zbdef0 (of
# fake device 0e.0) is up and carries the default route.
mkdir -p "$F/bus/pci/devices/0000:00:0e.0/net/zbdef0" "$TMP/fakeip"
echo 0x020000 >"$F/bus/pci/devices/0000:00:0e.0/class"
ln -s ../../drivers/e1000 "$F/bus/pci/devices/0000:00:0e.0/driver"
ln -s ../../bus/pci/devices/0000:00:0e.0/net/zbdef0 "$F/class/net/zbdef0"
cat >"$TMP/fakeip/ip" <<'EOF2'
#!/bin/sh
# fake ip: zbdef0 is up and has the default route (v4 and v6); others: none
case "$*" in
*"route show table all default"*) echo "default via 192.0.2.1 dev zbdef0 proto static metric 100" ;;
*"route show dev zbdef0"*) echo "default via 192.0.2.1 dev zbdef0 proto static metric 100" ;;
*"link show dev zbdef0"*) echo "7: zbdef0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc mq state UP" ;;
esac
exit 0
EOF2
chmod +x "$TMP/fakeip/ip"
bnr() { PATH="$TMP/fakeip:$PATH" bn "$@"; }
bnr --driver zbfake 0000:00:0e.0; r1=$?; cp "$TMP/out" "$TMP/out1"
bnr --driver zbfake --force 0000:00:0e.0; r2=$?
[ $r1 -eq 1 ] && [ $r2 -eq 1 ] &&
	grep -q "is kernel interface zbdef0, which carries the default route" "$TMP/out" &&
	grep -q -- "--force-default-route binds it anyway (--force alone does not)" "$TMP/out" &&
	! grep -q "would run" "$TMP/out1" "$TMP/out"
ok $? "bind-nic.sh: the default route's NIC is refused without and with --force alone (rc $r1, $r2)" ||
	diag "$(cat "$TMP/out1" "$TMP/out")"
bnr --driver zbfake --force-default-route 0000:00:0e.0; r1=$?; cp "$TMP/out" "$TMP/out1"
bnr --driver zbfake --force --force-default-route 0000:00:0e.0; r2=$?
[ $r1 -eq 0 ] && [ $r2 -eq 0 ] && cmp -s "$TMP/out1" "$TMP/out" &&
	grep -qx "would run: ip link set dev zbdef0 down" "$TMP/out" &&
	grep -qx "would run: $TMP/devbind --force --bind=zbfake 0000:00:0e.0" "$TMP/out" &&
	[ "$(basename "$(readlink "$F/bus/pci/devices/0000:00:0e.0/driver")")" = e1000 ]
ok $? "bind-nic.sh --dry-run --force-default-route: plans it down and bound (with or without --force; rc $r1, $r2)" ||
	diag "$(cat "$TMP/out1" "$TMP/out")"

# ---- prepare-node.sh ---- (on a fake sysfs: NICs 3b:00.0 and 3b:00.1 on
# a driver "ixgbe", an IOMMU group; the hugepages are this machine's, in a
# dry run)
P="$TMP/psys"
mkdir -p "$P/bus/pci/drivers/ixgbe" "$P/bus/pci/drivers/vfio-pci" "$P/class/net" "$P/kernel/iommu_groups/5"
for dev in 0000:3b:00.0 0000:3b:00.1; do
	mkdir -p "$P/bus/pci/devices/$dev"
	echo 0x020000 >"$P/bus/pci/devices/$dev/class"
	echo -1 >"$P/bus/pci/devices/$dev/numa_node"   # unknown: all nodes' pages
	ln -s ../../drivers/ixgbe "$P/bus/pci/devices/$dev/driver"
done
# two pci ports (one in the short form) and a vdev port, 1000 MiB of hugepages
cat >"$TMP/prep.ini" <<'EOF2'
[node]
id = 0
[cluster]
id = 1
[eal]
memory_mb = 1000
hugepages = true
[port.0]
pci = 3b:00.0
[port.1]
pci = 0000:3b:00.1
[port.2]
vdev = net_null0
EOF2
# Run as user nobody where that can be done: a dry run that was not one
# (a --dry-run lost on the way to hugepages.sh) then fails for want of root
# instead of reserving this machine's hugepages.
chmod 755 "$TMP"
pn() {
	local as=()
	! can_drop || as=(setpriv --reuid=65534 --regid=65534 --clear-groups)
	${as[@]+"${as[@]}"} env ZBMD_SYSFS="$P" DPDK_DEVBIND="$TMP/devbind" \
		"$S/prepare-node.sh" --binary "$ZBMD" "$@" >"$TMP/out" 2>&1
}
snapshot_prep() {
	cat /sys/kernel/mm/hugepages/*/nr_hugepages 2>/dev/null
	grep -w hugetlbfs /proc/mounts
	for dev in 0000:3b:00.0 0000:3b:00.1; do readlink "$P/bus/pci/devices/$dev/driver"; done
}
if [ -d /sys/kernel/mm/hugepages/hugepages-2048kB ]; then
	# the plan: 500 2M pages, or more when more are reserved already (never
	# shrunk), or the 1G pages reserved already when they cover 1000 MiB
	g1=$(cat /sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages 2>/dev/null || echo 0)
	now=$(cat /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages)
	if [ "$g1" -gt 0 ]; then size=1G want=$g1; elif [ "$now" -gt 500 ]; then size=2M want=$now; else size=2M want=500; fi
	snapshot_prep >"$TMP/before"
	pn --config "$TMP/prep.ini" --dry-run; rc=$?
	snapshot_prep >"$TMP/after"
	[ $rc -eq 0 ] &&
		grep -q "^+ $S/hugepages.sh --dry-run --size $size --pages $want\( \|$\)" "$TMP/out" &&
		grep -q "^would write '$want' to /sys/" "$TMP/out" &&
		grep -qx "+ $S/bind-nic.sh --dry-run 0000:3b:00.0 0000:3b:00.1" "$TMP/out" &&
		grep -qx "would run: $TMP/devbind --bind=vfio-pci 0000:3b:00.0" "$TMP/out" &&
		grep -qx "would run: $TMP/devbind --bind=vfio-pci 0000:3b:00.1" "$TMP/out" &&
		[ "$(tail -n 1 "$TMP/out")" = "dry run: nothing was changed" ] &&
		cmp -s "$TMP/before" "$TMP/after"
	ok $? "prepare-node.sh --dry-run: plans hugepages.sh ($want $size pages) and bind-nic.sh for both pci ports, changes nothing" ||
		diag "$(cat "$TMP/out")"
else
	echo "ok $((TAP_RUN + 1)) # SKIP kernel has no 2M hugepages"; TAP_RUN=$((TAP_RUN + 1))
fi
# a NIC already on vfio-pci is left alone; --force-down is bind-nic.sh
# --force; with hugepages = false no hugepages.sh
ln -sfn ../../drivers/vfio-pci "$P/bus/pci/devices/0000:3b:00.0/driver"
sed 's/^hugepages = true/hugepages = false/' "$TMP/prep.ini" >"$TMP/prep2.ini"
pn --config "$TMP/prep2.ini" --dry-run --force-down; rc=$?
[ $rc -eq 0 ] && grep -qx "NICs: 0000:3b:00.0 already bound to vfio-pci" "$TMP/out" &&
	grep -qx "+ $S/bind-nic.sh --dry-run --force 0000:3b:00.1" "$TMP/out" &&
	grep -qx "hugepages: none needed (\[eal\] hugepages = false)" "$TMP/out" &&
	! grep -q "hugepages.sh" "$TMP/out"
ok $? "prepare-node.sh: a NIC already on vfio-pci is left alone, hugepages = false reserves none (rc $rc)" ||
	diag "$(cat "$TMP/out")"
ln -sfn ../../drivers/ixgbe "$P/bus/pci/devices/0000:3b:00.0/driver"
# an invalid config: exit 2 with its FILE:LINE messages, nothing run
printf '[node]\nid = 99\n[cluster]\nid = 1\n' >"$TMP/prep-bad.ini"
pn --config "$TMP/prep-bad.ini" --dry-run; rc=$?
[ $rc -eq 2 ] && grep -q "^$TMP/prep-bad.ini:2: node.id: 99 is out of range" "$TMP/out" &&
	grep -q "prep-bad.ini is not a valid config" "$TMP/out" && ! grep -q "^+ \|would" "$TMP/out"
ok $? "prepare-node.sh: an invalid config is exit 2 with FILE:LINE, nothing run (rc $rc)" || diag "$(cat "$TMP/out")"
# no pci port and hugepages = false: nothing to do, said so
printf '[node]\nid = 0\n[cluster]\nid = 1\n[eal]\nhugepages = false\n[port.0]\nvdev = net_null0\n' >"$TMP/prep-noop.ini"
pn --config "$TMP/prep-noop.ini" --dry-run; rc=$?
[ $rc -eq 0 ] && grep -qx "nothing to do: \[eal\] hugepages = false and no \[port.N\] pci (vdev ports only)" "$TMP/out" &&
	! grep -q "^+ \|would\|NICs\|hugepages:" "$TMP/out"
ok $? "prepare-node.sh: no pci port and hugepages = false is a no-op that says so (rc $rc)" || diag "$(cat "$TMP/out")"

# ---- install-service.sh ----
mkdir -p "$TMP/root"
out=$("$S/install-service.sh" --dry-run --root "$TMP/root" --binary "$ZBMD" 2>&1); rc=$?
[ $rc -eq 0 ] &&
	grep -qx "would run: install -D -m 0755 $ZBMD $TMP/root/usr/local/bin/zbmd" <<<"$out" &&
	grep -qx "would write $TMP/root/etc/systemd/system/zbmd.service with:" <<<"$out" &&
	grep -qx "    ExecStart=/usr/local/bin/zbmd run -c /etc/zbmd/zbmd.ini" <<<"$out" &&
	grep -qx "would write $TMP/root/etc/systemd/system/zbmd-prepare.service with:" <<<"$out" &&
	grep -qx "    ExecStart=/usr/local/share/zbmd/prepare-node.sh --config /etc/zbmd/zbmd.ini --binary /usr/local/bin/zbmd" <<<"$out" &&
	grep -qx "would run: install -D -m 0755 $S/prepare-node.sh $TMP/root/usr/local/share/zbmd/prepare-node.sh" <<<"$out" &&
	grep -qx "dry run: nothing was changed" <<<"$out"
ok $? "install-service.sh --dry-run: plans binary, config, scripts and both units"
[ -z "$(ls -A "$TMP/root")" ]
ok $? "install-service.sh --dry-run: the staging root is still empty"

"$S/install-service.sh" --root "$TMP/root" --binary "$ZBMD" --prefix /opt/zbmd \
	--config /etc/zbmd/node.ini >"$TMP/out" 2>&1; rc=$?
unit="$TMP/root/etc/systemd/system/zbmd.service"
[ $rc -eq 0 ] && [ -x "$TMP/root/opt/zbmd/bin/zbmd" ] &&
	[ -f "$TMP/root/opt/zbmd/share/doc/zbmd/config.md" ] &&
	grep -qx "ExecStart=/opt/zbmd/bin/zbmd run -c /etc/zbmd/node.ini" "$unit" &&
	grep -qx "ExecStartPre=/opt/zbmd/bin/zbmd check-config -q --files /etc/zbmd/node.ini" "$unit"
ok $? "install-service.sh --root: binary, doc and unit with the given paths"
[ $rc -eq 0 ] || sed 's/^/#   /' "$TMP/out"
punit="$TMP/root/etc/systemd/system/zbmd-prepare.service"
sd="$TMP/root/opt/zbmd/share/zbmd"
r=0
for f in prepare-node.sh hugepages.sh bind-nic.sh setup-lib.sh; do cmp -s "$S/$f" "$sd/$f" || r=1; done
[ $rc -eq 0 ] && [ $r -eq 0 ] && [ -x "$sd/prepare-node.sh" ] && [ -x "$sd/hugepages.sh" ] &&
	[ -x "$sd/bind-nic.sh" ] && [ ! -x "$sd/setup-lib.sh" ] &&
	grep -qx "ExecStart=/opt/zbmd/share/zbmd/prepare-node.sh --config /etc/zbmd/node.ini --binary /opt/zbmd/bin/zbmd" "$punit" &&
	grep -qx "Documentation=file:///opt/zbmd/share/doc/zbmd/config.md" "$punit" &&
	grep -qx "Type=oneshot" "$punit" && grep -qx "RemainAfterExit=yes" "$punit" &&
	grep -q "^Before=.* zbmd.service" "$punit" &&
	grep -qx "Wants=zbmd-prepare.service" "$unit" && grep -qx "After=zbmd-prepare.service" "$unit" &&
	! grep -q "/usr/local\|/etc/zbmd/zbmd.ini" "$punit" "$unit"
ok $? "install-service.sh --root: the scripts in share/zbmd and zbmd-prepare.service with the given paths, wanted by zbmd.service" ||
	diag "$(grep -H '^Exec\|/usr/local\|zbmd-prepare' "$punit" "$unit" 2>&1; ls -l "$sd" 2>&1)"
# installed, prepare-node.sh finds the zbmd installed with it (PREFIX/bin)
printf '[node]\nid = 0\n[cluster]\nid = 1\n[eal]\nhugepages = false\n[port.0]\nvdev = net_null0\n' >"$TMP/noop.ini"
out=$("$sd/prepare-node.sh" --config "$TMP/noop.ini" --dry-run 2>&1); rc=$?
[ $rc -eq 0 ] && grep -qx "config: $TMP/noop.ini (read by $TMP/root/opt/zbmd/bin/zbmd check-config)" <<<"$out"
ok $? "install-service.sh --root: the installed prepare-node.sh runs the installed zbmd by default" || diag "$out"
"$ZBMD" check-config "$TMP/root/etc/zbmd/node.ini" >/dev/null 2>&1
ok $? "install-service.sh --root: the example config installed is valid"
if command -v systemd-analyze >/dev/null; then
	# The unit as installed, its paths pointed into the staging root.
	sed -e "s|/opt/zbmd|$TMP/root/opt/zbmd|g" -e "s|/etc/zbmd|$TMP/root/etc/zbmd|g" \
		"$unit" >"$TMP/zbmd.service"
	systemd-analyze verify "$TMP/zbmd.service" >"$TMP/out" 2>&1
	rc=$?
	[ $rc -eq 0 ]
	ok $? "systemd-analyze verify accepts the installed unit"
	[ $rc -eq 0 ] || sed 's/^/#   /' "$TMP/out"
	# both units together (the ordering between them too); an unknown key
	# is only a warning to systemd, not here
	sed -e "s|/opt/zbmd|$TMP/root/opt/zbmd|g" -e "s|/etc/zbmd|$TMP/root/etc/zbmd|g" \
		"$punit" >"$TMP/zbmd-prepare.service"
	(cd "$TMP" && systemd-analyze verify zbmd-prepare.service zbmd.service) >"$TMP/out" 2>&1
	rc=$?
	[ $rc -eq 0 ] && ! grep -qi "unknown\|ignoring\|cycle" "$TMP/out"
	ok $? "systemd-analyze verify accepts the installed zbmd-prepare.service with zbmd.service (rc $rc)" ||
		sed 's/^/#   /' "$TMP/out"
else
	for i in 1 2; do echo "ok $((TAP_RUN + 1)) # SKIP no systemd-analyze"; TAP_RUN=$((TAP_RUN + 1)); done
fi

# An invalid config in place is refused, and nothing is overwritten.
printf '[node]\nid = 99\n' >"$TMP/root/etc/zbmd/node.ini"
cp "$unit" "$TMP/unit.before"
"$S/install-service.sh" --root "$TMP/root" --binary "$ZBMD" --prefix /opt/zbmd \
	--config /etc/zbmd/node.ini >"$TMP/out" 2>&1; rc=$?
[ $rc -eq 1 ] && grep -q "node.ini:2: node.id: 99 is out of range" "$TMP/out" &&
	grep -q "is not a valid config" "$TMP/out" && cmp -s "$unit" "$TMP/unit.before"
ok $? "install-service.sh: an invalid existing config is refused with its messages"

"$S/install-service.sh" --uninstall --root "$TMP/root" --prefix /opt/zbmd >"$TMP/out" 2>&1; rc=$?
[ $rc -eq 0 ] && [ ! -e "$unit" ] && [ ! -e "$TMP/root/opt/zbmd/bin/zbmd" ] &&
	[ -f "$TMP/root/etc/zbmd/node.ini" ]
ok $? "install-service.sh --uninstall --root: unit and binary gone, config kept"
[ $rc -eq 0 ] && [ ! -e "$punit" ] && [ ! -e "$sd" ] && [ ! -e "$TMP/root/opt/zbmd/share/doc/zbmd" ]
ok $? "install-service.sh --uninstall --root: zbmd-prepare.service and the scripts gone" ||
	diag "$(ls -lR "$TMP/root/opt" "$TMP/root/etc/systemd" 2>&1)"
"$S/install-service.sh" --root relative/dir >/dev/null 2>&1; [ $? -eq 2 ]
ok $? "install-service.sh: a relative --root is exit 2"
"$S/install-service.sh" --dry-run --root '' --binary "$ZBMD" >"$TMP/out" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q -- "--root must not be empty" "$TMP/out" && ! grep -q "would" "$TMP/out"
ok $? "install-service.sh: an empty --root (the live system) is exit 2"
mkdir -p "$TMP/root3"
"$S/install-service.sh" --root "$TMP/root3" --binary "$ZBMD" --prefix '/opt/a&b' \
	--config /etc/zbmd/n.ini >"$TMP/out" 2>&1; rc=$?
unit="$TMP/root3/etc/systemd/system/zbmd.service"
[ $rc -eq 0 ] && grep -qx 'ExecStart=/opt/a&b/bin/zbmd run -c /etc/zbmd/n.ini' "$unit" &&
	grep -qx 'ExecStartPre=/opt/a&b/bin/zbmd check-config -q --files /etc/zbmd/n.ini' "$unit" &&
	[ -x "$TMP/root3/opt/a&b/bin/zbmd" ]
ok $? "install-service.sh --prefix '/opt/a&b': the unit has the path as given" ||
	diag "$(grep ^Exec "$unit" 2>&1)"
r=
for a in "--prefix /opt/a\\b" "--prefix /opt/%n" "--config /etc/zbmd/%n.ini" "--prefix /opt/\$HOME"; do
	rm -rf "$TMP/root4"; mkdir -p "$TMP/root4"
	"$S/install-service.sh" --root "$TMP/root4" --binary "$ZBMD" ${a%% *} "${a#* }" >"$TMP/out" 2>&1
	rc=$?; r="$r $rc"
	[ $rc -eq 2 ] && [ -z "$(ls -A "$TMP/root4")" ] || { diag "$a: $(cat "$TMP/out")"; break; }
done
[ "$r" = " 2 2 2 2" ]
ok $? "install-service.sh: \\, % or \$ in --prefix/--config is exit 2, nothing written (rc$r)"

# ---- deps.sh ----
out=$("$S/deps.sh" --help 2>"$TMP/err"); rc=$?
[ $rc -eq 0 ] && grep -q "^usage: deps.sh" <<<"$out" && grep -q "root" <<<"$out" &&
	grep -q "sudo" <<<"$out" && grep -qi "idempotent" <<<"$out" && [ ! -s "$TMP/err" ]
ok $? "deps.sh --help: usage (root or sudo, idempotent) on stdout, exit 0, nothing installed"
"$S/deps.sh" --no-such-option >"$TMP/out" 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] && grep -q "unknown" "$TMP/err"
ok $? "deps.sh: unknown argument is exit 2"
if can_drop; then
	# a user without root or sudo, every package "missing" (a fake dpkg-query)
	mkdir -p "$TMP/fakebin"; chmod 755 "$TMP" "$TMP/fakebin"
	printf '#!/bin/sh\nexit 1\n' >"$TMP/fakebin/dpkg-query"; chmod 755 "$TMP/fakebin/dpkg-query"
	for c in bash id grep; do ln -sf "$(command -v $c)" "$TMP/fakebin/$c"; done
	as_nobody env PATH="$TMP/fakebin" "$S/deps.sh" >"$TMP/out" 2>"$TMP/err"; rc=$?
	[ $rc -eq 1 ] && grep -q "needs root" "$TMP/err" && ! grep -qi "network\|not found" "$TMP/err"
	ok $? "deps.sh as a user without sudo: says it needs root (exit $rc)" || diag "$(cat "$TMP/err")"
else
	echo "ok $((TAP_RUN + 1)) # SKIP not root or no setpriv"; TAP_RUN=$((TAP_RUN + 1))
fi

# ---- gpu-bundle.sh ---- (a fake make: nothing is built)
mkdir -p "$TMP/fakemake"
printf '#!/bin/sh\necho "$*" >>"%s"\nexit 1\n' "$TMP/make.log" >"$TMP/fakemake/make"
chmod +x "$TMP/fakemake/make"
gb() { rm -f "$TMP/make.log"; PATH="$TMP/fakemake:$PATH" "$S/gpu-bundle.sh" "$@" >"$TMP/out" 2>"$TMP/err"; }
gb --help; rc=$?
[ $rc -eq 0 ] && grep -q "^usage: gpu-bundle.sh DIR" "$TMP/out" && [ ! -s "$TMP/err" ] && [ ! -e "$TMP/make.log" ]
ok $? "gpu-bundle.sh --help: usage on stdout, exit 0"
gb "$TMP/gb/\$(shell touch $TMP/INJECTED)"; rc=$?
[ $rc -eq 2 ] && [ ! -e "$TMP/make.log" ] && [ ! -e "$TMP/gb" ] && [ ! -e "$TMP/INJECTED" ] &&
	grep -q "DIR takes letters, digits" "$TMP/err"
ok $? "gpu-bundle.sh: a DIR with \$(...) is exit 2, before make and mkdir"
r=
for d in /etc /usr /usr/lib /var /boot /proc /tmp; do
	[ -d "$d" ] || continue
	gb "$d"; rc=$?; r="$r $d:$rc"
	[ $rc -eq 2 ] && [ ! -e "$TMP/make.log" ] || break
done
gb "$TMP/gb-ok"; rc=$?
[ "$r" = "$(for d in /etc /usr /usr/lib /var /boot /proc /tmp; do [ -d $d ] && printf ' %s:2' $d; done)" ] &&
	[ $rc -eq 1 ] && grep -q "BUILD=$TMP/gb-ok/build gpu-only" "$TMP/make.log"
ok $? "gpu-bundle.sh: system and top-level dirs are exit 2 (not built into), a folder under TMP is built ($r)"

# ---- cluster.sh, cluster-memif.sh ---- (memif clusters: files only)
C="$S/cluster.sh"; CM="$S/cluster-memif.sh"
r=
for s in "$C" "$CM"; do
	for o in --tag --dir; do
		"$s" $o >/dev/null 2>"$TMP/err"; rc=$?; r="$r $rc"
		[ $rc -eq 2 ] && grep -q -- "$o needs a value" "$TMP/err" || break 2
	done
done
[ "$r" = " 2 2 2 2" ]
ok $? "cluster.sh, cluster-memif.sh: --tag/--dir without a value is exit 2, said (rc$r)"
"$C" --tag "${CT}a" --dir "$TMP/cla" netem >/dev/null 2>"$TMP/err"; r1=$?
"$C" --tag "${CT}a" --dir "$TMP/cla" bogus >/dev/null 2>"$TMP/err2"; r2=$?
[ $r1 -eq 2 ] && grep -q "netem: give one argument" "$TMP/err" &&
	[ $r2 -eq 2 ] && grep -q "unknown command 'bogus'" "$TMP/err2"
ok $? "cluster.sh: netem without an argument, an unknown command: exit 2, named (rc $r1, $r2)"
# cluster a, for the checks that need one
"$C" --tag "${CT}a" --dir "$TMP/cla" up 2 --memif >"$TMP/out" 2>&1 ||
	echo "# cluster.sh up 2 --memif failed: $(cat "$TMP/out")"
ZBN_TAG=${CT}a "$C" --dir "$TMP/cla" down --tag "${CT}x" --dir "$TMP/clx" >/dev/null 2>"$TMP/err"; r1=$?
"$C" --tag "${CT}b" --dir "$TMP/clb" up 2 --memfi >/dev/null 2>"$TMP/err2"; r2=$?
[ $r1 -eq 2 ] && grep -q "down does not take '--tag'" "$TMP/err" && [ -e "$TMP/cla/count" ] &&
	[ $r2 -eq 2 ] && grep -q "up does not take '--memfi'" "$TMP/err2" && [ ! -e "$TMP/clb" ]
ok $? "cluster.sh: options after the command are exit 2 before anything is done (rc $r1, $r2)"
"$C" --tag "${CT}a" --dir "$TMP/cla" stop 99 >/dev/null 2>"$TMP/err"; r1=$?
"$C" --tag "${CT}a" --dir "$TMP/cla" stop abc >/dev/null 2>&1; r2=$?
[ $r1 -eq 2 ] && [ $r2 -eq 2 ] && grep -q "'99' is not a node" "$TMP/err"
ok $? "cluster.sh: stop 99 / stop abc are exit 2 (rc $r1, $r2)"
ZBMD=/bin/false ZBN_READY_S="PPID[\$(touch $TMP/inj1)]" "$C" --tag "${CT}a" --dir "$TMP/cla" \
	start 1 >/dev/null 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] && grep -q "ZBN_READY_S=" "$TMP/err" && [ ! -e "$TMP/inj1" ] && [ ! -e "$TMP/cla/node1.log" ]
ok $? "cluster.sh start: ZBN_READY_S with code in it is exit 2, not run (rc $rc)"
r=
for e in "ZBN_LCORES=0-1[\$(touch $TMP/inj2)]" ZBN_LCORES=0,x ZBN_MTU=abc ZBN_MTU=99999 \
	 ZBN_MEMORY_MB=12x ZBN_MEMIF_RSIZE=1+1 ZBN_AF_FRAMES=-5 ZBN_RTO_US_MIN=1e3 ZBN_ELECTION_MS=' 9'; do
	env "$e" "$C" --tag "${CT}c" --dir "$TMP/clc" up 2 --memif >/dev/null 2>"$TMP/err"; rc=$?
	r="$r $rc"
	[ $rc -eq 2 ] && grep -q "${e%%=*}=" "$TMP/err" && [ ! -e "$TMP/clc" ] && [ ! -e "$TMP/inj2" ] ||
		{ diag "$e: $(cat "$TMP/err")"; "$C" --tag "${CT}c" --dir "$TMP/clc" down >/dev/null 2>&1; break; }
done
[ "$r" = " 2 2 2 2 2 2 2 2 2" ]
ok $? "cluster.sh up: bad ZBN_LCORES/MTU/MEMORY_MB/... are exit 2, named, nothing built (rc$r)"
"$C" --tag "${CT}d" --dir "$TMP/cld" up 08 --memif >"$TMP/out" 2>&1; rc=$?
[ $rc -eq 0 ] && [ "$(cat "$TMP/cld/count")" = 8 ] && [ -f "$TMP/cld/node8.ini" ] &&
	[ ! -e "$TMP/cld/node9.ini" ] && ! grep -q "value too great" "$TMP/out"
ok $? "cluster.sh up 08 --memif: 8 nodes (not octal)" || diag "$(cat "$TMP/out")"
"$C" --tag "${CT}d" --dir "$TMP/cld" down >/dev/null 2>&1
ZBN_PREFIX=../../x "$C" --tag "${CT}a" --dir "$TMP/cla" down >/dev/null 2>"$TMP/err"; r1=$?
ZBN_PREFIX='z.n' "$C" --tag "${CT}a" --dir "$TMP/cla" status >/dev/null 2>&1; r2=$?
[ $r1 -eq 2 ] && [ $r2 -eq 2 ] && grep -q "bad ZBN_PREFIX" "$TMP/err" && [ -e "$TMP/cla/count" ]
ok $? "cluster.sh: a ZBN_PREFIX with / or . is exit 2, nothing removed (rc $r1, $r2)"
"$C" --tag "${CT}a" --dir "$TMP/cla" down >/dev/null 2>&1
if can_drop; then
	chmod 755 "$TMP"
	as_nobody "$C" --tag "${CT}e" --dir "$TMP/cle" up 2 >/dev/null 2>"$TMP/err"; rc=$?
	[ $rc -eq 1 ] && grep -q "needs root" "$TMP/err" && [ ! -e "$TMP/cle" ]
	ok $? "cluster.sh up (veth) as a user: says it needs root (rc $rc)" || diag "$(cat "$TMP/err")"
else
	echo "ok $((TAP_RUN + 1)) # SKIP not root or no setpriv"; TAP_RUN=$((TAP_RUN + 1))
fi
out=$("$CM" --help 2>&1); rc=$?
[ $rc -eq 0 ] && grep -q "^usage: cluster-memif.sh" <<<"$out"
ok $? "cluster-memif.sh --help: its own usage, exit 0"
"$CM" --tag "${CT}b" --dir "$TMP/clb" up 2 --no-bridge >/dev/null 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] && grep -q "'--no-bridge'" "$TMP/err" && [ ! -e "$TMP/clb" ]
ok $? "cluster-memif.sh up 2 --no-bridge: exit 2, nothing built (rc $rc)"
# cluster.sh start with a stand-in zbmd (ready at once, then sleeps; node 2
# of cluster g fails): a node listed twice is started once (its second
# spawn hid the first from stop and down), and a failed start names the
# nodes it left running
mkdir -p "$TMP/fakezbmd"
cat >"$TMP/fakezbmd/zbmd" <<FAKE
#!/bin/sh
[ "\$1" = run ] || exit 1
case \$3 in *clg/node2.ini) echo "boom"; exit 1 ;; esac
echo "\$\$" >>"$TMP/spawned"
echo "zbmd: ready"
exec sleep 20
FAKE
chmod +x "$TMP/fakezbmd/zbmd"
FZ=$TMP/fakezbmd/zbmd
"$C" --tag "${CT}a" --dir "$TMP/cla" up 2 --memif >/dev/null 2>&1
rm -f "$TMP/spawned"
ZBMD=$FZ "$C" --tag "${CT}a" --dir "$TMP/cla" start 1 1 >"$TMP/out" 2>&1; rc=$?
p=$(cat "$TMP/cla/node1.pid" 2>/dev/null)
[ $rc -eq 0 ] && [ "$(wc -l <"$TMP/spawned")" = 1 ] && [ "$(cat "$TMP/spawned")" = "$p" ]
ok $? "cluster.sh start 1 1: node 1 started once, its pid file names it (rc $rc)" ||
	diag "$(cat "$TMP/out"; cat "$TMP/spawned")"
ZBMD=$FZ "$C" --tag "${CT}a" --dir "$TMP/cla" down >/dev/null 2>&1
r=0; for q in $(cat "$TMP/spawned"); do kill -0 "$q" 2>/dev/null && { r=1; kill "$q"; }; done
ok $r "cluster.sh down after start 1 1: no node left running"
# status of running nodes that do not answer `zbmd status` (control off, a
# node starting or stopping; the stand-in answers nothing): every node listed
# as running, exit 0 (the failed `zbmd status` ended status under set -e:
# the header only, exit 1)
"$C" --tag "${CT}a" --dir "$TMP/cla" up 2 --memif >/dev/null 2>&1
ZBMD=$FZ "$C" --tag "${CT}a" --dir "$TMP/cla" start >/dev/null 2>&1
ZBMD=$FZ "$C" --tag "${CT}a" --dir "$TMP/cla" status >"$TMP/out" 2>&1; rc=$?
[ $rc -eq 0 ] && grep -q "^node 1: running (pid [0-9]*)$" "$TMP/out" &&
	grep -q "^node 2: running (pid [0-9]*)$" "$TMP/out"
ok $? "cluster.sh status: running nodes that do not answer are listed, exit 0 (rc $rc)" || diag "$(cat "$TMP/out")"
ZBMD=$FZ "$C" --tag "${CT}a" --dir "$TMP/cla" down >/dev/null 2>&1
"$C" --tag "${CT}g" --dir "$TMP/clg" up 2 --memif >/dev/null 2>&1
ZBMD=$FZ ZBN_READY_S=5 "$C" --tag "${CT}g" --dir "$TMP/clg" start >"$TMP/out" 2>&1; rc=$?
[ $rc -eq 1 ] && grep -q "node 2 did not start" "$TMP/out" &&
	grep -q "node 1 of this start is running: cluster.sh --tag ${CT}g --dir '$TMP/clg' stop 1" "$TMP/out"
ok $? "cluster.sh start: a failed start names the nodes it left running, and how to stop them (rc $rc)" ||
	diag "$(cat "$TMP/out")"
ZBMD=$FZ "$C" --tag "${CT}g" --dir "$TMP/clg" down >/dev/null 2>&1

# a tag live under another --dir (its node holds its file-prefix's
# zbmd.lock): up refuses it, and down of a cluster of that tag leaves the
# live node's runtime dir alone
if [ "$(id -u)" -eq 0 ]; then RD=/var/run/dpdk; else RD=${XDG_RUNTIME_DIR:-/tmp}/dpdk; fi
RD=$RD/zbn-${CT}f-1
mkdir -p "$RD"
flock "$RD/zbmd.lock" sleep 30 & holder=$!
for _ in $(seq 50); do flock -n "$RD/zbmd.lock" true 2>/dev/null || break; sleep 0.1; done
"$C" --tag "${CT}f" --dir "$TMP/clf" up 2 --memif >/dev/null 2>"$TMP/err"; r1=$?
mkdir -p "$TMP/clf2"; echo 2 >"$TMP/clf2/count"; echo memif >"$TMP/clf2/mode"; touch "$TMP/clf2/.zbn"
"$C" --tag "${CT}f" --dir "$TMP/clf2" down >/dev/null 2>"$TMP/err2"; r2=$?
[ $r1 -eq 1 ] && grep -q "a node of tag '${CT}f' is running" "$TMP/err" && [ ! -e "$TMP/clf" ] &&
	[ $r2 -eq 0 ] && [ -e "$RD/zbmd.lock" ] && grep -q "zbmd.lock is held" "$TMP/err2"
ok $? "cluster.sh: up refuses a tag whose node runs under another --dir; down leaves that node's runtime dir (rc $r1, $r2)" ||
	diag "$(cat "$TMP/err" "$TMP/err2")"
kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null; rm -rf "$RD"
"$C" --tag "${CT}f" --dir "$TMP/clf" down >/dev/null 2>&1

# up interrupted (SIGTERM while it writes the key): torn down, so that the
# next up is not refused
mkdir -p "$TMP/slowb64"
printf '#!/bin/sh\nsleep 2\nexec %s "$@"\n' "$(command -v base64)" >"$TMP/slowb64/base64"
chmod +x "$TMP/slowb64/base64"
PATH="$TMP/slowb64:$PATH" "$C" --tag "${CT}h" --dir "$TMP/clh" up 2 --memif >/dev/null 2>"$TMP/err" & pid=$!
# TERM once count is written (up is in the slow base64 then, for 2 s)
for _ in $(seq 50); do [ -e "$TMP/clh/count" ] && break; sleep 0.1; done
kill -TERM "$pid"; wait "$pid"; rc=$?
"$C" --tag "${CT}h" --dir "$TMP/clh" up 2 --memif >/dev/null 2>"$TMP/err2"; rc2=$?
[ $rc -ne 0 ] && [ $rc2 -eq 0 ]
ok $? "cluster.sh up: interrupted, it tears down; the next up works (rc $rc, $rc2)" ||
	diag "$(cat "$TMP/err" "$TMP/err2")"
"$C" --tag "${CT}h" --dir "$TMP/clh" down >/dev/null 2>&1
# the same with SIGHUP (the terminal or ssh session gone): up had no trap for
# it and left the half-built cluster, which the next up refused
PATH="$TMP/slowb64:$PATH" "$C" --tag "${CT}h" --dir "$TMP/clh" up 2 --memif >/dev/null 2>"$TMP/err" & pid=$!
for _ in $(seq 50); do [ -e "$TMP/clh/count" ] && break; sleep 0.1; done
kill -HUP "$pid"; wait "$pid"; rc=$?
"$C" --tag "${CT}h" --dir "$TMP/clh" up 2 --memif >/dev/null 2>"$TMP/err2"; rc2=$?
[ $rc -eq 129 ] && grep -q "up interrupted, tearing down" "$TMP/err" && [ $rc2 -eq 0 ]
ok $? "cluster.sh up: a SIGHUP tears down too (exit 129); the next up works (rc $rc, $rc2)" ||
	diag "$(cat "$TMP/err" "$TMP/err2")"
"$C" --tag "${CT}h" --dir "$TMP/clh" down >/dev/null 2>&1

# memif: --dir goes into DPDK vdev strings
"$C" --tag "${CT}b" --dir "$TMP/c l,b" up 2 --memif >/dev/null 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] && grep -q "has a space, which cannot go into a DPDK vdev string" "$TMP/err" && [ ! -e "$TMP/c l,b" ]
ok $? "cluster.sh up --memif: a --dir with a space is exit 2, said, nothing built (rc $rc)" || diag "$(cat "$TMP/err")"
"$C" --tag "${CT}b" --dir "$TMP/clb" up 2 --memif >/dev/null 2>&1
"$C" --tag "${CT}b" --dir "$TMP/clb=x" up 2 --memif >/dev/null 2>&1; rc=$?
"$C" --tag "${CT}b" --dir "$TMP/clb" down >/dev/null 2>&1
[ $rc -eq 2 ] && [ ! -e "$TMP/clb=x" ]
ok $? "cluster.sh up --memif: a --dir with '=' is exit 2 (rc $rc)"

# a cluster that does not exist: said, exit 1 (down: nothing to do, exit 0)
r=
for a in "netem:delay 1ms" netem:off stop: status: "exec:1 true"; do
	set -- "${a%%:*}"
	case $a in netem:*) set -- netem "${a#*:}" ;; exec:*) set -- exec 1 true ;; esac
	"$C" --tag "${CT}n" --dir "$TMP/cln" "$@" >/dev/null 2>"$TMP/err"; rc=$?; r="$r $rc"
	[ $rc -eq 1 ] && grep -q "no cluster '${CT}n' ($TMP/cln): run up first" "$TMP/err" || { diag "$a: $(cat "$TMP/err")"; break; }
done
"$C" --tag "${CT}n" --dir "$TMP/cln" down >/dev/null 2>&1; rc=$?
[ "$r" = " 1 1 1 1 1" ] && [ $rc -eq 0 ] && [ ! -e "$TMP/cln" ]
ok $? "cluster.sh: netem, stop, status, exec on no cluster: said, exit 1; down: exit 0 (rc$r, $rc)"

# environment values up used to ignore
r=
for e in ZBN_CONTROL=maybe ZBN_MEMIF_ZC=yes ZBN_PEER_MAC=bogus ZBN_IDLE=busy; do
	env "$e" "$C" --tag "${CT}c" --dir "$TMP/clc" up 2 --memif >/dev/null 2>"$TMP/err"; rc=$?; r="$r $rc"
	[ $rc -eq 2 ] && grep -q "${e%%=*}=" "$TMP/err" && [ ! -e "$TMP/clc" ] ||
		{ diag "$e: $(cat "$TMP/err")"; "$C" --tag "${CT}c" --dir "$TMP/clc" down >/dev/null 2>&1; break; }
done
ZBN_PSK=$TMP/nokey "$C" --tag "${CT}c" --dir "$TMP/clc" up 2 --memif >/dev/null 2>"$TMP/err"; rc=$?; r="$r $rc"
[ $rc -eq 1 ] && grep -q "ZBN_PSK=" "$TMP/err" && [ ! -e "$TMP/clc" ] ||
	"$C" --tag "${CT}c" --dir "$TMP/clc" down >/dev/null 2>&1
"$C" --tag "${CT}c" --dir "" up 2 --memif >/dev/null 2>"$TMP/err"; rc=$?; r="$r $rc"
[ "$r" = " 2 2 2 2 1 2" ] && grep -q -- "--dir must not be empty" "$TMP/err"
ok $? "cluster.sh up: bad ZBN_CONTROL/MEMIF_ZC/PEER_MAC/IDLE exit 2, a missing ZBN_PSK exit 1, --dir '' exit 2 (rc$r)"
ZBN_CONTROL=no ZBN_MEMIF_ZC=1 "$C" --tag "${CT}c" --dir "$TMP/clc" up 2 --memif >/dev/null 2>&1; rc=$?
[ $rc -eq 0 ] && grep -q "^enabled = off" "$TMP/clc/node1.ini" && grep -q "zero-copy=yes" "$TMP/clc/node2.ini"
ok $? "cluster.sh up: ZBN_CONTROL=no turns the control plane off (ZBN_MEMIF_ZC=1 zero-copy) (rc $rc)"

# messages: the memif limit; cluster-memif.sh names itself; gpu-bundle.sh
# names the bad argument; exec probe on a memif cluster; netem without
# sch_netem (a stand-in tc, on a made-up veth cluster)
"$C" --tag "${CT}b" --dir "$TMP/clb" up 0 --memif >/dev/null 2>"$TMP/err3"; r1=$?
"$CM" >"$TMP/out4" 2>&1; r2=$?
"$CM" --bogus >/dev/null 2>"$TMP/err2"; r3=$?
gb --bogus; r4=$?
[ $r1 -eq 2 ] && grep -q "N must be 1..9" "$TMP/err3" && [ $r2 -eq 2 ] && grep -q "^usage: cluster-memif.sh" "$TMP/out4" &&
	[ $r3 -eq 2 ] && grep -q "^cluster-memif.sh: unknown option '--bogus'" "$TMP/err2" &&
	[ $r4 -eq 2 ] && grep -q "unknown option '--bogus'" "$TMP/err"
ok $? "cluster.sh up 0 --memif says 1..9; cluster-memif.sh and gpu-bundle.sh name themselves and the bad option (rc $r1 $r2 $r3 $r4)"
"$C" --tag "${CT}c" --dir "$TMP/clc" exec probe true >/dev/null 2>"$TMP/err"; rc=$?
[ $rc -eq 1 ] && grep -q "a memif cluster: no namespaces" "$TMP/err"
ok $? "cluster.sh exec probe on a memif cluster: says it has no namespaces, exit 1 (rc $rc)" || diag "$(cat "$TMP/err")"
"$C" --tag "${CT}c" --dir "$TMP/clc" down >/dev/null 2>&1
mkdir -p "$TMP/faketc" "$TMP/cli"
printf '#!/bin/sh\necho "Error: Specified qdisc kind is unknown." >&2\nexit 2\n' >"$TMP/faketc/tc"
chmod +x "$TMP/faketc/tc"
echo 1 >"$TMP/cli/count"; echo veth >"$TMP/cli/mode"; touch "$TMP/cli/.zbn"
PATH="$TMP/faketc:$PATH" "$C" --tag "${CT}i" --dir "$TMP/cli" netem "delay 1ms" >/dev/null 2>"$TMP/err"; rc=$?
[ $rc -eq 1 ] && grep -q "the kernel has no sch_netem module (modprobe sch_netem; tc: .*qdisc kind is unknown" "$TMP/err"
ok $? "cluster.sh netem without sch_netem: said, exit 1 (rc $rc)" || diag "$(cat "$TMP/err")"
rm -rf "$TMP/cli"

# install-service.sh: a target folder that is a file is refused before
# anything is installed
mkdir -p "$TMP/isf"; touch "$TMP/isf/etc"
bash "$S/install-service.sh" --root "$TMP/isf" --binary "$ZBMD" >/dev/null 2>"$TMP/err"; rc=$?
[ $rc -eq 1 ] && grep -q "$TMP/isf/etc is not a directory" "$TMP/err" && [ ! -e "$TMP/isf/usr" ]
ok $? "install-service.sh --root R, R/etc a file: refused before anything is installed (rc $rc)" || diag "$(cat "$TMP/err")"
rm -rf "$TMP/isf"
# install-service.sh: --enable/--start with no config yet would run the
# example as this node's (refused); --config naming a directory (refused
# before anything is written); a binary that does not run here is said so
# (it was "example ... is not valid")
IS=$ZBMD_ROOT/scripts/install-service.sh
bad=0
bash "$IS" --dry-run --config "$TMP/none/zbmd.ini" --enable --start >/dev/null 2>"$TMP/err"
[ $? -eq 1 ] && grep -q "would run the example config as it is" "$TMP/err" || { bad=1; diag "--enable --start: $(cat "$TMP/err")"; }
bash "$IS" --root "$TMP/isr" --config /etc/zbmd/zbmd.ini/ >/dev/null 2>"$TMP/err"
[ $? -eq 2 ] && grep -q "names a directory" "$TMP/err" && [ ! -e "$TMP/isr" ] || { bad=1; diag "--config DIR/: $(cat "$TMP/err")"; }
printf '#!/bin/sh\necho "error while loading shared libraries: librte_eal.so.23" >&2\nexit 127\n' >"$TMP/stub"; chmod +x "$TMP/stub"
bash "$IS" --root "$TMP/isr" --binary "$TMP/stub" >/dev/null 2>"$TMP/err"
[ $? -eq 1 ] && grep -q "does not run here (exit 127" "$TMP/err" || { bad=1; diag "stub binary: $(cat "$TMP/err")"; }
rm -rf "$TMP/isr"
ok $bad "install-service.sh: --enable/--start without a config refused, --config DIR/ refused, a binary that does not run said so"

# baremetal.ini's set-up commands (its header; they "paste as they are")
# run here with --dry-run: each script takes the options it is given (the
# installed prepare-node.sh is the repository's, the config the example)
EX=$ZBMD_ROOT/config/examples/baremetal.ini
bad=0 n=0
while read -r cmd; do
	n=$((n + 1))
	cmd=${cmd//\/usr\/local\/share\/zbmd\//scripts/}
	cmd=${cmd//\/etc\/zbmd\/zbmd.ini/$TMP/paste.ini}
	cp "$EX" "$TMP/paste.ini"
	# shellcheck disable=SC2086
	(cd "$ZBMD_ROOT" && bash ${cmd%% *} --dry-run ${cmd#* }) >"$TMP/out" 2>&1; rc=$?
	# prepare-node.sh binds the example's NIC, which this machine lacks
	case $cmd in
	*prepare-node.sh*) [ $rc -eq 1 ] && grep -q "would write '4096'" "$TMP/out" &&
		grep -q "no PCI device 0000:3b:00.0" "$TMP/out" ;;
	*) [ $rc -eq 0 ] ;;
	esac || { bad=1; diag "$cmd: exit $rc: $(tail -2 "$TMP/out")"; }
done < <(sed -nE 's/^;   (scripts\/[^ ]+\.sh.*|\/usr\/local\/share\/zbmd\/.*)$/\1/p' "$EX")
[ $bad -eq 0 ] && [ $n -eq 2 ]
ok $? "baremetal.ini's set-up commands take their options (--dry-run; $n of 2 found)"

# bench/transport/run.sh takes no arguments: -h was taken as a run (a
# two-minute benchmark with namespaces) until 2026-11-28
BT=$ZBMD_ROOT/bench/transport/run.sh
before=$(ls -d /tmp/zbperf-bench.* 2>/dev/null | wc -l)
out=$(bash "$BT" -h 2>&1); rc=$?
bash "$BT" now >/dev/null 2>"$TMP/err"; rc2=$?
after=$(ls -d /tmp/zbperf-bench.* 2>/dev/null | wc -l)
[ $rc -eq 0 ] && grep -q "^Environment: ZBMD_BUILD" <<<"$out" && [ $rc2 -eq 2 ] &&
	grep -q "no arguments (got 'now')" "$TMP/err" && [ "$after" -le "$before" ]
ok $? "bench/transport/run.sh -h: its header, exit 0; an argument: exit 2, nothing run (rc $rc / $rc2)"

done_testing
