#!/usr/bin/env bash
# A node on net_tap inside a network namespace: the kernel side of the tap
# gets an address and pings the node (ARP + ICMP through a tap PMD).
. "$ZBMD_ROOT/tests/common/tap.sh"
. "$ZBMD_ROOT/tests/dataplane/lib.sh"
need_netns
[ -c /dev/net/tun ] || skip_all "no /dev/net/tun"
NS=zbn-nodetap$$
PFX=zbmd-node-tap$$
PREFIXES+=("$PFX")
trap 'ip netns del $NS 2>/dev/null; cleanup_lib' EXIT
plan 4

ip netns add "$NS" && ip -n "$NS" link set lo up
node_config "$T/tap.ini" "$PFX" 0-1 "[port.0]
vdev = net_tap0,iface=zbtap0
ip = 10.66.0.1/24
mac = 02:66:00:00:00:01"
ip netns exec "$NS" "$ZBMD" run -c "$T/tap.ini" >"$T/out" 2>&1 & P=$!; PIDS+=($P)
wait_for "$T/out" '^zbmd: ready' 60 && grep -q 'driver=net_tap mac=02:66:00:00:00:01' "$T/out"
ok $? "node on net_tap ready, configured MAC set on the tap"
ip -n "$NS" addr add 10.66.0.2/24 dev zbtap0 && ip -n "$NS" link set zbtap0 up &&
	ip netns exec "$NS" ping -c 3 -i 0.2 -W 5 10.66.0.1 >/dev/null
ok $? "the kernel side pings the node through the tap"
ip -n "$NS" neigh show 10.66.0.1 | grep -q '02:66:00:00:00:01'
ok $? "the kernel learnt the node's MAC by ARP"
kill -TERM $P; wait $P; ok $? "SIGTERM: exit 0"
done_testing
