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
trap 'rm -rf "$TMP"' EXIT

# --help and bad usage, for every script.
for s in hugepages.sh bind-nic.sh install-service.sh; do
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
	if grep -qw hugetlbfs /proc/mounts; then
		ok 0 "hugepages.sh --dry-run: (hugetlbfs already mounted, no mount planned)"
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
	out=$("$S/bind-nic.sh" --dry-run --force --noiommu "$nic" 2>&1); rc=$?
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

# ---- install-service.sh ----
mkdir -p "$TMP/root"
out=$("$S/install-service.sh" --dry-run --root "$TMP/root" --binary "$ZBMD" 2>&1); rc=$?
[ $rc -eq 0 ] &&
	grep -qx "would run: install -D -m 0755 $ZBMD $TMP/root/usr/local/bin/zbmd" <<<"$out" &&
	grep -qx "would write $TMP/root/etc/systemd/system/zbmd.service with:" <<<"$out" &&
	grep -qx "    ExecStart=/usr/local/bin/zbmd run -c /etc/zbmd/zbmd.ini" <<<"$out" &&
	grep -qx "dry run: nothing was changed" <<<"$out"
ok $? "install-service.sh --dry-run: plans binary, config and unit"
[ -z "$(ls -A "$TMP/root")" ]
ok $? "install-service.sh --dry-run: the staging root is still empty"

"$S/install-service.sh" --root "$TMP/root" --binary "$ZBMD" --prefix /opt/zbmd \
	--config /etc/zbmd/node.ini >"$TMP/out" 2>&1; rc=$?
unit="$TMP/root/etc/systemd/system/zbmd.service"
[ $rc -eq 0 ] && [ -x "$TMP/root/opt/zbmd/bin/zbmd" ] &&
	[ -f "$TMP/root/opt/zbmd/share/doc/zbmd/config.md" ] &&
	grep -qx "ExecStart=/opt/zbmd/bin/zbmd run -c /etc/zbmd/node.ini" "$unit" &&
	grep -qx "ExecStartPre=/opt/zbmd/bin/zbmd check-config -q /etc/zbmd/node.ini" "$unit"
ok $? "install-service.sh --root: binary, doc and unit with the given paths"
[ $rc -eq 0 ] || sed 's/^/#   /' "$TMP/out"
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
else
	echo "ok $((TAP_RUN + 1)) # SKIP no systemd-analyze"; TAP_RUN=$((TAP_RUN + 1))
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
"$S/install-service.sh" --root relative/dir >/dev/null 2>&1; [ $? -eq 2 ]
ok $? "install-service.sh: a relative --root is exit 2"

done_testing
