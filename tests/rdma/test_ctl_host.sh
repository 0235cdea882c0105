#!/usr/bin/env bash
# `zbmd bench allreduce` with transport = rdma through the "rdma" collective
# host (dataplane/run_rdma.c): with a control plane the node starts its
# dataplane lcore and its control thread, and the provider's connection
# blobs go over the control plane; without one the provider runs on the
# calling thread with its TCP bootstrap. Where no RDMA device exists (here)
# both must fail cleanly, at once, naming the missing device; where one
# exists a one-node run must succeed through the host, and a two-node run
# exchanges its blobs over the control plane (ctl_blob_send).
. "$ZBMD_ROOT/tests/common/tap.sh"
ZBMD=$ZBMD_BUILD/bin/zbmd
T=$(mktemp -d /tmp/zbrdmactl-host.XXXXXX)
PFX=zbrdmactl-$$
cleanup() {
	for p in $(jobs -p); do kill -KILL "$p" 2>/dev/null; done
	rm -rf "$T" /var/run/dpdk/$PFX-* "${XDG_RUNTIME_DIR:-/tmp}"/dpdk/$PFX-* 2>/dev/null
}
trap cleanup EXIT
# no zbmd binary is a broken build (make test builds it), not a reason to skip
[ -x "$ZBMD" ] || { echo "1..1"; echo "not ok 1 - $ZBMD is built"; exit 1; }
[ "$(id -u)" -eq 0 ] || skip_all "needs root for the DPDK EAL (no hugepages, but /var/run/dpdk)"
HAVE_DEV=0
ibv_devices 2>/dev/null | awk 'NR > 2 && NF' | grep -q . && HAVE_DEV=1
plan 9

BASE=$((24000 + ($$ % 1500) * 4))
# cfg FILE ID CONTROL_EXTRA: a node of a two-node cluster on loopback
cfg() {
	cat >"$1" <<EOF
[node]
id = $2
[eal]
lcores = 0
memory_mb = 256
hugepages = false
file_prefix = $PFX-$2
log_level = 4
[cluster]
id = 7
$4
[transport]
kind = rdma
tcp_port = $((BASE + 2))
[rdma]
enabled = true
[peer.0]
ip = 127.0.0.1
control = 127.0.0.1:$BASE
[peer.1]
ip = 127.0.0.1
control = 127.0.0.1:$((BASE + 1))
[control]
listen = 127.0.0.1:$((BASE + $2))
admin_listen = 127.0.0.1:$((BASE + 3))
raft_dir = $T/raft$2
$3
EOF
}

# ---- one node, control on ----------------------------------------------------
cfg "$T/one.ini" 0 "enabled = on"
sed -i '/^\[peer.1\]/,/^control = .*/d' "$T/one.ini"
"$ZBMD" check-config "$T/one.ini" >/dev/null
ok $? "the one-node rdma config with a control plane passes check-config"
start=$SECONDS
timeout 60 "$ZBMD" bench allreduce -c "$T/one.ini" -b 1K -e 4K -n 2 -w 1 >"$T/one.out" 2>&1
rc=$?
grep -q "control: on (\[control\] enabled = on)" "$T/one.out"
ok $? "control plane started by the rdma host"
if [ $HAVE_DEV = 0 ]; then
	[ $rc -eq 1 ]; ok $? "no RDMA device: exit 1 (rc $rc)"
	grep -q "net provider 'rdma' init: .*no RDMA devices" "$T/one.out"
	ok $? "... naming the missing device: $(grep -o "net provider 'rdma'.*" "$T/one.out" | head -c 160)"
else
	[ $rc -eq 0 ]; ok $? "RDMA device present: the one-node run through the host succeeds (rc $rc)"
	grep -q "rdma on dataplane lane 0" "$T/one.out"; ok $? "... on the dataplane lane (host description)"
fi
[ $((SECONDS - start)) -lt 20 ]; ok $? "... within $((SECONDS - start)) s, no hang"
! pgrep -f -- "-c $T/one.ini" >/dev/null
ok $? "nothing left running"

# ---- control off: the provider's own bootstrap --------------------------------
cfg "$T/off.ini" 0 "enabled = off"
sed -i '/^\[peer.1\]/,/^control = .*/d' "$T/off.ini"
timeout 60 "$ZBMD" bench allreduce -c "$T/off.ini" -b 1K -e 4K -n 2 -w 1 >"$T/off.out" 2>&1
rc=$?
! grep -q "control: on" "$T/off.out"
ok $? "control off: no control plane, the caller's thread runs the provider"
if [ $HAVE_DEV = 0 ]; then
	[ $rc -eq 1 ] && grep -q "net provider 'rdma' init: .*(no RDMA devices" "$T/off.out"
	ok $? "... and fails cleanly without a device, naming why (rc $rc: $(grep -o "net provider 'rdma'.*" "$T/off.out" | head -1 | head -c 160))"
else
	[ $rc -eq 0 ]; ok $? "... and runs with the TCP bootstrap (rc $rc)"
fi

# ---- two nodes, blobs over the control plane (device needed) ------------------
if [ $HAVE_DEV = 0 ]; then
	TAP_RUN=$((TAP_RUN + 1))
	echo "ok $TAP_RUN # SKIP no RDMA device (ibv_devices lists none): two-node run with blobs over the control plane"
else
	head -c 32 /dev/urandom | base64 >"$T/psk"; chmod 600 "$T/psk"
	for i in 0 1; do
		cfg "$T/n$i.ini" $i "enabled = on" \
			"seeds = 127.0.0.1:$BASE, 127.0.0.1:$((BASE + 1))
psk_file = $T/psk"
		sed -i "s/^admin_listen = .*/admin_listen = \"\"/" "$T/n$i.ini"
	done
	timeout 90 "$ZBMD" bench allreduce -c "$T/n1.ini" -b 1K -e 1M -n 5 -w 1 >"$T/n1.out" 2>&1 &
	p1=$!
	timeout 90 "$ZBMD" bench allreduce -c "$T/n0.ini" -b 1K -e 1M -n 5 -w 1 >"$T/n0.out" 2>&1
	rc0=$?; wait $p1; rc1=$?
	[ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] && grep -q "connection blobs over the control plane" "$T/n0.out"
	ok $? "two nodes: all-reduce over rdma, blobs over the control plane (rc $rc0/$rc1)"
fi
done_testing
