# tests/dataplane/lib.sh — helpers for the dataplane shell tests. Source it
# after tests/common/tap.sh.
ZBMD=${ZBMD_BUILD:?}/bin/zbmd
T=$(mktemp -d /tmp/zbmd-node-test.XXXXXX)
PIDS=()
PREFIXES=()   # DPDK file-prefixes whose runtime dirs we remove at the end
cleanup_lib() {
	for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
	for x in "${PREFIXES[@]}"; do
		[ -n "$x" ] && rm -rf "/var/run/dpdk/$x" "${XDG_RUNTIME_DIR:-/tmp}/dpdk/$x"
	done
	rm -rf "$T"
}
# root with network namespaces, or skip
need_netns() {
	[ "$(id -u)" -eq 0 ] || skip_all "needs root for network namespaces"
	ip netns list >/dev/null 2>&1 || skip_all "ip netns unavailable"
}

# wait_for FILE REGEX SECONDS: poll until FILE has a line matching REGEX
wait_for() {
	local deadline=$((SECONDS + $3))
	until grep -qE "$2" "$1" 2>/dev/null; do
		[ $SECONDS -ge $deadline ] && return 1
		sleep 0.1
	done
}

# wait_exit PID SECONDS: 0 once PID is gone, 1 on timeout
wait_exit() {
	local deadline=$((SECONDS + $2))
	while kill -0 "$1" 2>/dev/null; do
		[ $SECONDS -ge $deadline ] && return 1
		sleep 0.1
	done
}

# node_config FILE PREFIX LCORES PORTS_INI: a node with --no-huge -m 256
node_config() {
	cat >"$1" <<EOC
[node]
id = 1
name = t1
[eal]
lcores = $3
memory_mb = 256
hugepages = false
file_prefix = $2
log_level = 4
[dataplane]
idle = adaptive
idle_spin_us = 50
[cluster]
id = 7
$4
EOC
}
