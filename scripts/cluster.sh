#!/usr/bin/env bash
# scripts/cluster.sh — a local zbmd cluster on one machine.
#
#   cluster.sh [--tag T] [--dir D] up N [--memif|--no-bridge]
#                                                   create N nodes + their configs
#   cluster.sh [--tag T] start [I...]               start `zbmd run` on nodes (all;
#                                                   each once; a failed start leaves
#                                                   running the nodes it started, named)
#   cluster.sh [--tag T] stop [I...]                SIGTERM them, check exit 0
#   cluster.sh [--tag T] exec I CMD...              run CMD in node I's namespace
#                                                   (I = probe / hub: those namespaces)
#   cluster.sh [--tag T] netem "ARGS"|off           tc netem on every node link
#   cluster.sh [--tag T] status                     nodes: pid, Raft state, leader, epoch, members
#   cluster.sh [--tag T] down                       stop nodes, delete everything
#
# veth mode (default): a hub namespace zbn-T-hub holds bridge br0; node I
# lives in namespace zbn-T-I with interface dp0 (MAC 02:7a:62:00:00:I) that
# `zbmd run` drives through net_af_packet; its dataplane IP is 10.77.0.I/24,
# owned by zbmd (the kernel has no address on dp0). A probe namespace
# zbn-T-probe has a kernel interface eth0 = 10.77.0.254/24 on the same bridge
# (ping, tcpdump, raw-socket injection). netem applies to the hub-side veth of
# every node, which every frame crosses on its way to that node.
#
# --no-bridge: the hub-side veths h1..hN (and p0) stay off br0, for a program
# in the hub namespace to join them (tests/dataplane/helper_impair: a lossy
# hub where sch_netem is missing).
#
# memif mode (--memif): no namespaces; every pair of nodes (I<J) is joined by
# one net_memif link, I the server, J the client, socket D/memif-I-J.sock.
# Node I has one port per peer, all with IP 10.78.0.I and MAC 02:7a:63:00:00:I.
#
# Control plane: every node runs the control thread (Raft membership,
# heartbeats, /metrics, admin API), authenticated with one pre-shared key
# D/psk (mode 0600). veth mode: a second bridge br1 in the hub joins
# interface ctl0 of every node namespace (10.76.0.I/24, kernel-owned), so
# control traffic never crosses the dataplane port; node I listens on
# 10.76.0.I:7400 (heartbeats, Raft), metrics on 10.76.0.I:9464, admin on
# 127.0.0.1:7401 of its namespace. memif mode (one namespace): node I uses
# the loopback address 127.A.B.I (A.B derived from the tag, so parallel
# clusters do not collide) with the same ports. `zbmd status -c D/nodeI.ini`
# (in the node's namespace) asks node I.
#
# Every name carries the tag (default: $ZBN_TAG or "default") so parallel
# clusters never collide; names start with $ZBN_PREFIX (default "zbn").
# Configs, logs, pid files: D (default /tmp/zbn-T).
# Environment: ZBMD (binary; default build/bin/zbmd beside this script),
# ZBN_LCORES (default 0-1: node I polls on CPU I mod 2), ZBN_MEMORY_MB (256), ZBN_IDLE (adaptive),
# ZBN_MTU (1500), ZBN_AF_FRAMES (af_packet ring frames per queue, 4096), ZBN_MEMIF_RSIZE
# (log2 of memif ring slots; default 8: 256 slots), ZBN_MEMIF_ZC=1 (node I's client port to
# node I-1 in zero-copy mode: the server copies straight into the client's mbufs; EAL
# --single-file-segments; one such port per node: DPDK 22.11's memif closes the EAL's memory file
# when a zero-copy client connects, and a second one would send the dead descriptor),
# ZBN_RTO_US_MIN (5000), ZBN_EXTRA_INI (text appended to every node's config),
# ZBN_READY_S (seconds to wait for `zbmd: ready`, default 60), ZBN_PEER_MAC=arp
# (leave peers' MACs out of the configs, to be resolved by ARP; no other value),
# ZBN_CONTROL=off (no control thread: [control] enabled = off; on/off, yes/no,
# true/false, 1/0), ZBN_IDLE poll or adaptive,
# ZBN_ELECTION_MS (Raft election timeout, default 1000), ZBN_PSK (key file to
# use instead of a fresh D/psk). The numbers among them are checked before
# use (whole decimal numbers in range, ZBN_LCORES an lcore list like 0-1,3),
# as are the tag and ZBN_PREFIX (letters, digits, _ and -): a bad one is
# exit 2, named, as is ZBN_MEMIF_ZC other than 1 or 0 (zbmd local reads it
# too, as 1 only). Options go before the command; an option after it that the
# command does not take is exit 2 too, before anything is done. --dir must
# not be empty, and in memif mode has no space, ',' or '=' (it goes into
# DPDK vdev strings). `up` refuses a tag that is up under another --dir
# (its namespaces, or a node holding its file-prefix's zbmd.lock), and
# `down` leaves a DPDK runtime dir whose zbmd.lock another live process
# holds. Every command but up and down on a cluster that does not exist:
# exit 1, said (down: nothing to do, exit 0).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TAG=${ZBN_TAG:-default}
DIR=
ZBMD=${ZBMD:-${ZBMD_BUILD:-$ROOT/build}/bin/zbmd}

die() { echo "cluster.sh: $*" >&2; exit 1; }
usage() { sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
usage_err() { echo "cluster.sh: $*" >&2; echo "try: cluster.sh --help" >&2; exit 2; }

while [ $# -gt 0 ]; do
	case $1 in
	--tag|--dir)
		[ $# -ge 2 ] || usage_err "$1 needs a value"
		if [ "$1" = --tag ]; then TAG=$2
		else [ -n "$2" ] || usage_err "--dir must not be empty (leave it out for /tmp/zbn-TAG)"; DIR=$2; fi
		shift 2 ;;
	-h|--help) usage; exit 0 ;;
	-*) usage_err "unknown option '$1'" ;;
	*) break ;;
	esac
done
[[ $TAG =~ ^[A-Za-z0-9_]{1,24}$ ]] || usage_err "bad tag '$TAG' (letters, digits, _; 1..24)"
# the prefix goes into namespace names, DPDK file prefixes and the paths
# removed by down: plain characters only
[[ ${ZBN_PREFIX:-zbn} =~ ^[A-Za-z0-9_-]{1,32}$ ]] ||
	usage_err "bad ZBN_PREFIX '${ZBN_PREFIX:-}' (letters, digits, _ and -; 1..32)"
DIR=${DIR:-/tmp/zbn-$TAG}
PFX=${ZBN_PREFIX:-zbn}-$TAG
HUB=$PFX-hub
PROBE=$PFX-probe

ns() { echo "$PFX-$1"; }
# control address of node I (no port): veth 10.76.0.I, memif 127.A.B.I (A.B
# from the tag's checksum, taken once: ctl_ip runs N + N*N times in `up`, and
# each process it started cost ~10 ms on the 2-CPU VMs)
TAG_SUM=$(printf '%s' "$TAG" | cksum | cut -d' ' -f1)
ctl_ip() {  # ctl_ip I [MODE]: MODE, else the cluster's
	local m=${2:-}
	[ -n "$m" ] || m=$(mode)
	if [ "$m" = memif ]; then
		echo "127.$((TAG_SUM % 250 + 1)).$((TAG_SUM / 250 % 250 + 1)).$1"
	else
		echo "10.76.0.$1"
	fi
}
mac_of() { printf '02:7a:%s:00:00:%02x' "$1" "$2"; }
# this cluster's namespaces: $PFX-hub, $PFX-probe, $PFX-N (names compared
# as text: the prefix is no pattern)
our_ns() {
	ip netns list 2>/dev/null | awk -v p="$PFX-" '{ n = $1 }
		index(n, p) == 1 && substr(n, length(p) + 1) ~ /^(hub|probe|[0-9]+)$/ { print n }'
}

# env_int NAME MIN MAX: NAME, where set, is a whole decimal number in
# MIN..MAX (leading zeros dropped: bash would read 08 as octal); else exit 2.
# Checked before any use: bash arithmetic evaluates a value as code.
env_int() {
	local v=${!1:-}
	[ -n "$v" ] || return 0
	if ! [[ $v =~ ^[0-9]{1,9}$ ]] || [ $((10#$v)) -lt "$2" ] || [ $((10#$v)) -gt "$3" ]; then
		usage_err "$1='$v': must be a whole number $2..$3"
	fi
	printf -v "$1" '%d' "$((10#$v))"
}
# the environment `up` writes into the configs
check_env_up() {
	env_int ZBN_MTU 68 9600
	env_int ZBN_MEMORY_MB 64 1048576
	env_int ZBN_MEMIF_RSIZE 1 14
	env_int ZBN_AF_FRAMES 1 1048576
	env_int ZBN_RTO_US_MIN 10 60000000
	env_int ZBN_ELECTION_MS 10 600000
	env_bool ZBN_CONTROL on off
	# only 1 or 0: zbmd local (dataplane/coll_local.c) adds the EAL's
	# --single-file-segments for ZBN_MEMIF_ZC=1 only, so a yes taken here
	# would give it zero-copy ports without that
	case ${ZBN_MEMIF_ZC:-0} in
	0|1) ;;
	*) usage_err "ZBN_MEMIF_ZC='$ZBN_MEMIF_ZC': must be 1 (zero-copy) or 0" ;;
	esac
	case ${ZBN_PEER_MAC:-} in
	""|arp) ;;
	*) usage_err "ZBN_PEER_MAC='$ZBN_PEER_MAC': only 'arp' (peers' MACs left to ARP) or unset (written in the configs)" ;;
	esac
	case ${ZBN_IDLE:-adaptive} in
	poll|adaptive) ;;
	*) usage_err "ZBN_IDLE='$ZBN_IDLE': must be poll or adaptive" ;;
	esac
	if [ -n "${ZBN_PSK:-}" ] && [ "${ZBN_CONTROL:-on}" = on ]; then
		[ -f "$ZBN_PSK" ] && [ -r "$ZBN_PSK" ] || die "ZBN_PSK='$ZBN_PSK': no readable key file there"
	fi
	local lc=${ZBN_LCORES:-0-1} part a b
	[[ $lc =~ ^[0-9]{1,3}(-[0-9]{1,3})?(,[0-9]{1,3}(-[0-9]{1,3})?)*$ ]] ||
		usage_err "ZBN_LCORES='$lc': must be an lcore list like 0-1 or 0,2-3"
	IFS=, read -ra parts <<<"$lc"
	for part in "${parts[@]}"; do
		a=$((10#${part%-*})); b=$((10#${part#*-}))
		[ "$a" -le "$b" ] && [ "$b" -le 127 ] ||
			usage_err "ZBN_LCORES='$lc': '$part' is not a range of lcore ids 0..127"
	done
}
# node_list CMD I...: NODES=(the node indices I, each 1..count, normalised,
# each once: `start 1 1` spawned node 1 twice, the second's pid file hiding
# the first); exit 2 naming the first that is not one
node_list() {
	local c=$1 n i j dup; shift
	n=$(count); NODES=()
	for i in "$@"; do
		[[ $i =~ ^[0-9]{1,3}$ ]] && [ $((10#$i)) -ge 1 ] && [ $((10#$i)) -le "$n" ] ||
			usage_err "$c: '$i' is not a node of cluster '$TAG' (1..$n; options go before the command)"
		dup=0
		for j in ${NODES[@]+"${NODES[@]}"}; do [ "$j" -eq $((10#$i)) ] && dup=1; done
		[ $dup -eq 1 ] || NODES+=($((10#$i)))
	done
}
# need_cluster: exit 1 unless `up` made this cluster
need_cluster() {
	[ -e "$DIR/count" ] || die "no cluster '$TAG' ($DIR): run up first"
}
# runtime_dirs I: the DPDK runtime dirs of node I's file-prefix
runtime_dirs() { echo "/var/run/dpdk/$PFX-$1" "${XDG_RUNTIME_DIR:-/tmp}/dpdk/$PFX-$1"; }
# lock_holder D: exit 0 when D/zbmd.lock is held (a live zbmd node with that
# file-prefix, dataplane/eal.c), printing the pid written in it
lock_holder() {
	[ -f "$1/zbmd.lock" ] || return 1
	local rc=0
	flock -n -E 75 "$1/zbmd.lock" true 2>/dev/null || rc=$?
	[ $rc -eq 75 ] || return 1
	head -c 20 "$1/zbmd.lock" 2>/dev/null | head -n 1; echo
}
# env_bool NAME ON OFF: NAME, where set, is on/off/yes/no/true/false/1/0;
# set to ON or OFF; else exit 2
env_bool() {
	local v=${!1:-}
	[ -n "$v" ] || return 0
	case ${v,,} in
	on|yes|true|1) printf -v "$1" '%s' "$2" ;;
	off|no|false|0) printf -v "$1" '%s' "$3" ;;
	*) usage_err "$1='$v': must be on or off (yes/no, true/false, 1/0)" ;;
	esac
}
count() { cat "$DIR/count" 2>/dev/null || echo 0; }
mode() { cat "$DIR/mode" 2>/dev/null || echo veth; }

quiet_ns() {  # no IPv6 chatter (router solicitations, MLD) on test links
	ip netns exec "$1" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 \
		net.ipv6.conf.default.disable_ipv6=1 >/dev/null 2>&1 || true
}

write_config() {  # write_config I N MODE
	local i=$1 n=$2 m=$3 f="$DIR/node$1.ini" j k
	{
		echo "# generated by scripts/cluster.sh ($m mode, tag $TAG)"
		echo "[node]"; echo "id = $i"; echo "name = node$i"
		echo "[eal]"; echo "lcores = ${ZBN_LCORES:-0-1}"
		echo "memory_mb = ${ZBN_MEMORY_MB:-256}"; echo "hugepages = false"
		echo "file_prefix = $PFX-$i"; echo "log_level = 4"
		# 2 lcores on 2 CPUs: node I polls on CPU (I mod 2) (main lcore on
		# the other), so two nodes' loops do not share one CPU
		local xa=""
		[ "${ZBN_LCORES:-0-1}" = 0-1 ] && [ $((i % 2)) -eq 0 ] && xa="--main-lcore 1"
		# memif zero-copy clients export DPDK's memory as one file
		[ "${ZBN_MEMIF_ZC:-0}" = 1 ] && [ "$m" = memif ] && xa="$xa --single-file-segments"
		[ -n "$xa" ] && echo "extra_args = ${xa# }"
		echo "[dataplane]"; echo "idle = ${ZBN_IDLE:-adaptive}"
		control_ini "$i" "$n" "$m"
		# shared cores: a node can be descheduled for milliseconds, so a
		# 1 ms minimum RTO retransmits spuriously
		echo "[transport]"; echo "rto_us_min = ${ZBN_RTO_US_MIN:-5000}"
		if [ "$m" = veth ]; then
			echo "[port.0]"
			# past 1500 bytes, ring frames that hold a whole frame after
			# the kernel's TPACKET_V2 header (dataplane/port.c), four to
			# a block of whole pages
			local af="framecnt=${ZBN_AF_FRAMES:-4096}" fz
			if [ "${ZBN_MTU:-1500}" -gt 1500 ]; then
				fz=$(( (ZBN_MTU + 18 + 128 + 1023) / 1024 * 1024 ))
				af="framesz=$fz,blocksz=$((4 * fz)),framecnt=${ZBN_AF_FRAMES:-1024}"
			fi
			echo "vdev = net_af_packet0,iface=dp0,qpairs=$(dp_lcores),$af"
			echo "ip = 10.77.0.$i/24"; echo "mac = $(mac_of 62 "$i")"
			echo "mtu = ${ZBN_MTU:-1500}"
			for ((j = 1; j <= n; j++)); do
				[ "$j" -eq "$i" ] && continue
				echo "[peer.$j]"; echo "ip = 10.77.0.$j"
				[ "${ZBN_PEER_MAC:-}" = arp ] || echo "mac = $(mac_of 62 "$j")"
				echo "port = 0"
			done
		else
			k=0
			for ((j = 1; j <= n; j++)); do
				[ "$j" -eq "$i" ] && continue
				local a=$((i < j ? i : j)) b=$((i < j ? j : i)) role=client
				[ "$i" -lt "$j" ] && role=server
				echo "[port.$k]"
				# ring buffers that hold a whole frame (one per frame)
				local bs=2048; [ "${ZBN_MTU:-1500}" -gt 2000 ] && bs=$(( (ZBN_MTU + 64 + 1023) / 1024 * 1024 ))
				# every slot has its own buffer and a ring cycles through all
				# of them: 256 slots (rsize 8), not DPDK's 1024, else 4 nodes'
				# rings of jumbo frames outgrow the L3 (4 memif nodes, 4-64
				# MiB all-reduce: 256 slots 1.3-1.4x the busbw of 1024); at
				# 2 KB buffers too (2 nodes, MTU 1500, 1 MiB messages: 54.3 -
				# 55.0 Gbit/s against 51.7 - 53.7, 16 MiB the same; testpmd's
				# raw rate is higher with 1024, so the benchmark's ceiling
				# keeps 1024; docs/perf-transport.md)
				local rs=${ZBN_MEMIF_RSIZE:-8}
				echo "vdev = net_memif$k,role=$role,id=0,socket=$DIR/memif-$a-$b.sock,bsize=$bs${rs:+,rsize=$rs}$([ "${ZBN_MEMIF_ZC:-0}" = 1 ] && [ $role = client ] && [ "$j" -eq $((i - 1)) ] && echo ,zero-copy=yes)"
				echo "ip = 10.78.0.$i/24"; echo "mac = $(mac_of 63 "$i")"
				echo "mtu = ${ZBN_MTU:-1500}"
				echo "[peer.$j]"; echo "ip = 10.78.0.$j"
				[ "${ZBN_PEER_MAC:-}" = arp ] || echo "mac = $(mac_of 63 "$j")"
				echo "port = $k"
				k=$((k + 1))
			done
		fi
		[ -n "${ZBN_EXTRA_INI:-}" ] && printf '%s\n' "$ZBN_EXTRA_INI"
		true
	} >"$f"
}

control_ini() {  # control_ini I N MODE: [cluster], [control], [metrics]
	local i=$1 n=$2 m=$3 j seeds="" ip
	ip=$(ctl_ip "$i" "$m")
	echo "[cluster]"; echo "id = 77"
	if [ "${ZBN_CONTROL:-on}" = off ]; then
		echo "[control]"; echo "enabled = off"
		return
	fi
	for ((j = 1; j <= n; j++)); do seeds+="${seeds:+, }$(ctl_ip "$j" "$m"):7400"; done
	echo "seeds = $seeds"
	echo "psk_file = ${ZBN_PSK:-$DIR/psk}"
	echo "[control]"; echo "enabled = on"
	echo "listen = $ip:7400"
	echo "raft_dir = $DIR/raft$i"
	echo "election_timeout_ms = ${ZBN_ELECTION_MS:-1000}"
	if [ "$m" = memif ]; then echo "admin_listen = $ip:7401"
	else echo "admin_listen = 127.0.0.1:7401"; fi
	echo "[metrics]"; echo "listen = $ip:9464"
}

# dataplane lcores of ZBN_LCORES: all but the main one (at least 1)
dp_lcores() {
	local n=0 part a b
	IFS=, read -ra parts <<<"${ZBN_LCORES:-0-1}"
	for part in "${parts[@]}"; do   # checked by check_env_up
		a=$((10#${part%-*})); b=$((10#${part#*-})); n=$((n + b - a + 1))
	done
	echo $((n > 1 ? n - 1 : 1))
}

# up_interrupted STATUS: a signal during up: tear down what it made, exit STATUS
up_interrupted() {
	trap '' PIPE HUP INT TERM
	trap - ERR
	echo "cluster.sh: up interrupted, tearing down" >&2 || true
	cmd_down >/dev/null 2>&1 || true
	exit "$1"
}

cmd_up() {
	local n=${1:-} m=veth master=(master br0) a
	[ $# -ge 1 ] || usage_err "up: give N, the number of nodes"
	shift
	[ $# -le 1 ] || usage_err "up: $* : give at most one of --memif and --no-bridge (options such as --tag go before the command)"
	for a in "$@"; do
		case $a in
		--memif) m=memif ;;
		--no-bridge) master=() ;;
		*) usage_err "up does not take '$a' (up N [--memif|--no-bridge]; options such as --tag go before the command)" ;;
		esac
	done
	# 08 is 8 (bash arithmetic would read it as octal)
	local max=60; [ "$m" = memif ] && max=9
	if ! { [[ $n =~ ^[0-9]{1,3}$ ]] && n=$((10#$n)) && [ "$n" -ge 1 ] && [ "$n" -le $max ]; }; then
		[ "$m" = memif ] && usage_err "up --memif: N must be 1..9 (8 memif ports a node), not '$n'"
		usage_err "up: N must be 1..60, not '$n'"
	fi
	check_env_up
	# memif: D goes into every port's vdev string (socket=D/memif-I-J.sock),
	# where DPDK splits at ',' and '=' and the config at spaces
	if [ "$m" = memif ]; then
		local c
		for c in ' ' ',' '=' $'\t' $'\n' ';' '#'; do
			[[ $DIR == *"$c"* ]] || continue
			[ "$c" = ' ' ] && c=space; [ "$c" = $'\t' ] && c=tab; [ "$c" = $'\n' ] && c=newline
			usage_err "up --memif: --dir '$DIR' has a $c, which cannot go into a DPDK vdev string (socket=DIR/memif-I-J.sock): use another --dir"
		done
	fi
	[ "$m" = memif ] || [ "$(id -u)" -eq 0 ] ||
		die "up: veth mode needs root (network namespaces, bridges); --memif does not"
	[ -e "$DIR/count" ] && die "cluster '$TAG' exists ($DIR): run down first"
	# the same tag live under another --dir: its namespaces are ours by name,
	# and a failed up would tear them down
	[ -z "$(our_ns)" ] ||
		die "namespaces of tag '$TAG' exist ($PFX-*): another cluster with this tag is up (down it, or use another --tag)"
	# memif (or veth) nodes of this tag running under another --dir: they
	# hold their file-prefix's zbmd.lock, whose runtime dir down removes
	local i d h
	for ((i = 1; i <= 60; i++)); do
		for d in $(runtime_dirs "$i"); do
			h=$(lock_holder "$d") || continue
			die "a node of tag '$TAG' is running (file-prefix $PFX-$i, pid ${h:-?}, $d): another cluster with this tag is up (down it, or use another --tag)"
		done
	done
	# from here on every write is undone on a failure or an interrupt
	set -E   # the teardown below also for failures inside functions
	# SIGHUP too (the terminal or ssh session gone): the half-built cluster
	# stayed, and the next up refused it. Its stderr may be gone with it:
	# the message may fail, the teardown must not
	trap 'up_interrupted 130' INT
	trap 'up_interrupted 143' TERM
	trap 'up_interrupted 129' HUP
	# The directory (by default a fixed name in /tmp) holds the configs and
	# the key, and root writes into it: it must be a real directory of ours
	# that nobody else can write, else a planted link or file would be
	# written through.
	[ -L "$DIR" ] && die "--dir $DIR is a symbolic link: refused"
	(umask 077; mkdir -p "$DIR")
	[ -d "$DIR" ] && [ "$(stat -c %u "$DIR")" = "$(id -u)" ] ||
		die "--dir $DIR is not a directory of this user: refused"
	chmod go-w "$DIR"
	trap 'echo "cluster.sh: up failed, tearing down" >&2; cmd_down >/dev/null 2>&1' ERR
	touch "$DIR/.zbn"
	echo "$n" >"$DIR/count"; echo "$m" >"$DIR/mode"
	# the control plane's pre-shared key: never readable by others
	rm -f "$DIR/psk"; (umask 077; head -c 32 /dev/urandom | base64 >"$DIR/psk")
	if [ "$m" = veth ]; then
		ip netns add "$HUB"; quiet_ns "$HUB"
		ip -n "$HUB" link add br0 type bridge mcast_snooping 0  # a dumb hub
		ip -n "$HUB" link set br0 up
		ip -n "$HUB" link add br1 type bridge  # the control network
		ip -n "$HUB" link set br1 up
		for ((i = 1; i <= n; i++)); do
			ip netns add "$(ns "$i")"; quiet_ns "$(ns "$i")"
			ip -n "$HUB" link add "h$i" type veth peer name dp0 netns "$(ns "$i")"
			ip -n "$HUB" link set "h$i" mtu "${ZBN_MTU:-1500}" "${master[@]}" up
			ip -n "$(ns "$i")" link set dp0 address "$(mac_of 62 "$i")" mtu "${ZBN_MTU:-1500}" up
			ip -n "$(ns "$i")" link set lo up
			ip -n "$HUB" link add "c$i" type veth peer name ctl0 netns "$(ns "$i")"
			ip -n "$HUB" link set "c$i" master br1 up
			ip -n "$(ns "$i")" addr add "$(ctl_ip "$i" veth)/24" dev ctl0
			ip -n "$(ns "$i")" link set ctl0 up
		done
		ip netns add "$PROBE"; quiet_ns "$PROBE"
		ip -n "$HUB" link add p0 type veth peer name eth0 netns "$PROBE"
		ip -n "$HUB" link set p0 mtu "${ZBN_MTU:-1500}" "${master[@]}" up
		ip -n "$PROBE" addr add 10.77.0.254/24 dev eth0
		ip -n "$PROBE" link set eth0 mtu "${ZBN_MTU:-1500}" up
		ip -n "$PROBE" link set lo up
		# full checksums on frames the probe's kernel sends to zbmd
		ip netns exec "$PROBE" ethtool -K eth0 tx off >/dev/null 2>&1 || true
	fi
	for ((i = 1; i <= n; i++)); do write_config "$i" "$n" "$m"; done
	trap - ERR INT TERM HUP
	set +E
	echo "cluster $TAG: $n nodes ($m), configs in $DIR"
}

node_pid() { cat "$DIR/node$1.pid" 2>/dev/null || true; }

cmd_start() {
	env_int ZBN_READY_S 1 86400
	need_cluster
	local n; n=$(count)
	node_list start "$@"; local list=(${NODES[@]+"${NODES[@]}"})
	[ -x "$ZBMD" ] || die "no zbmd binary at $ZBMD (make first)"
	[ ${#list[@]} -eq 0 ] && list=($(seq 1 "$n"))
	for i in "${list[@]}"; do
		local p; p=$(node_pid "$i")
		[ -n "$p" ] && kill -0 "$p" 2>/dev/null && die "node $i already running (pid $p)"
	done
	local deadline=$((SECONDS + ${ZBN_READY_S:-60}))
	STARTED=()
	for i in "${list[@]}"; do
		spawn "$i"; STARTED+=("$i")
		# memif: a client connects once, at start (DPDK 22.11 does not
		# retry), so start in index order: the server of every pair (the
		# lower index) is up before its client starts.
		[ "$(mode)" = memif ] && { wait_ready "$i" "$deadline" || { start_failed; return 1; }; }
	done
	for i in "${list[@]}"; do wait_ready "$i" "$deadline" || { start_failed; return 1; }; done
	echo "cluster $TAG: started ${list[*]}"
}
# after a failed start: the nodes this start spawned that still run are
# left running (a user looks at them, or at their logs) and named, with
# the command that stops them
start_failed() {
	local i p run=() opt="--tag $TAG"
	[ "$DIR" = "/tmp/zbn-$TAG" ] || opt="$opt --dir '$DIR'"
	for i in "${STARTED[@]}"; do
		p=$(node_pid "$i")
		[ -n "$p" ] && kill -0 "$p" 2>/dev/null && run+=("$i")
	done
	[ ${#run[@]} -gt 0 ] || return 0
	echo "cluster.sh: start failed; node${run[1]+s} ${run[*]} of this start ${run[1]+are}${run[1]-is} running: cluster.sh $opt stop ${run[*]}" >&2
}

spawn() {
	local i=$1 pre=() p
	# never hide a running node: its pid file is how stop and down find it
	p=$(node_pid "$i")
	[ -n "$p" ] && kill -0 "$p" 2>/dev/null && die "node $i already running (pid $p)"
	rm -f "$DIR/node$i.rc" "$DIR/node$i.rc.tmp" "$DIR/node$i.pid" "$DIR/node$i.log"
	[ "$(mode)" = veth ] && pre=(ip netns exec "$(ns "$i")")
	( "${pre[@]}" "$ZBMD" run -c "$DIR/node$i.ini" >"$DIR/node$i.log" 2>&1 &
	  echo $! >"$DIR/node$i.pid.tmp"; mv "$DIR/node$i.pid.tmp" "$DIR/node$i.pid"
	  wait $! && rc=0 || rc=$?
	  # written whole, then renamed: a reader that sees node.rc sees its value
	  echo "$rc" >"$DIR/node$i.rc.tmp"; mv "$DIR/node$i.rc.tmp" "$DIR/node$i.rc" ) >/dev/null 2>&1 &
}

wait_ready() {  # wait_ready I DEADLINE: the node logged `zbmd: ready`
	local i=$1
	until [ -e "$DIR/node$i.pid" ] && grep -q '^zbmd: ready' "$DIR/node$i.log" 2>/dev/null; do
		if [ -e "$DIR/node$i.rc" ] || [ $SECONDS -ge "$2" ]; then
			echo "cluster.sh: node $i did not start:" >&2
			tail -n 20 "$DIR/node$i.log" >&2 || true
			return 1
		fi
		sleep 0.1
	done
}

cmd_stop() {
	need_cluster
	local n; n=$(count); local bad=0
	node_list stop "$@"; local list=(${NODES[@]+"${NODES[@]}"})
	[ ${#list[@]} -eq 0 ] && list=($(seq 1 "$n"))
	for i in "${list[@]}"; do
		local p; p=$(node_pid "$i")
		[ -n "$p" ] && kill -TERM "$p" 2>/dev/null || true
	done
	for i in "${list[@]}"; do
		local p; p=$(node_pid "$i"); [ -n "$p" ] || continue
		local deadline=$((SECONDS + 30))
		while [ ! -e "$DIR/node$i.rc" ] && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
		if [ ! -e "$DIR/node$i.rc" ]; then
			echo "cluster.sh: node $i (pid $p) ignored SIGTERM for 30 s: killed" >&2
			kill -KILL "$p" 2>/dev/null || true; bad=1
			sleep 0.5
		fi
		local rc; rc=$(cat "$DIR/node$i.rc" 2>/dev/null || echo killed)
		[ "$rc" = 0 ] || { echo "cluster.sh: node $i exited $rc" >&2; bad=1; }
		rm -f "$DIR/node$i.pid"
	done
	return $bad
}

cmd_exec() {
	local i=${1:-}; shift || true
	[ $# -ge 1 ] || usage_err "exec: give I CMD..."
	need_cluster
	case $i in
	probe|hub) ;;
	*) node_list exec "$i"; i=${NODES[0]} ;;
	esac
	[ "$(mode)" = veth ] || case $i in probe|hub)
		die "exec $i: cluster '$TAG' is a memif cluster: no namespaces (probe, hub) to run in (exec I runs on the host)" ;;
	esac
	if [ "$i" = probe ]; then exec ip netns exec "$PROBE" "$@"; fi
	if [ "$i" = hub ]; then exec ip netns exec "$HUB" "$@"; fi
	[ "$(mode)" = veth ] || exec "$@"
	exec ip netns exec "$(ns "$i")" "$@"
}

cmd_netem() {
	[ $# -eq 1 ] && [ -n "$1" ] || usage_err "netem: give one argument, \"ARGS\" (quoted) or off"
	# split into tc's words below: no characters the shell would expand
	[[ $1 =~ ^[A-Za-z0-9\ .%_:/+-]+$ ]] ||
		usage_err "netem '$1': only tc's words go there (letters, digits, spaces and . % _ : / + -)"
	need_cluster
	local n; n=$(count); [ "$(mode)" = veth ] || die "netem: veth mode only"
	local out rc
	for ((i = 1; i <= n; i++)); do
		if [ "${1:-}" = off ]; then
			tc -n "$HUB" qdisc del dev "h$i" root 2>/dev/null || true
		else
			# shellcheck disable=SC2086
			rc=0; out=$(tc -n "$HUB" qdisc replace dev "h$i" root netem $1 2>&1) || rc=$?
			# tc's own words kept in the line: zbmd local (coll_local.c)
			# looks for them in what cluster.sh netem printed
			if [ $rc -ne 0 ] && grep -q "qdisc kind is unknown" <<<"$out"; then
				die "netem: the kernel has no sch_netem module (modprobe sch_netem; tc: $(grep -m1 'qdisc kind is unknown' <<<"$out"))"
			fi
			[ -z "$out" ] || printf '%s\n' "$out" >&2
			[ $rc -eq 0 ] && continue
			die "netem '$1' on h$i: tc failed (exit $rc)"
		fi
	done
}

cmd_status() {
	need_cluster
	local n; n=$(count)
	echo "cluster $TAG: $n nodes ($(mode)), dir $DIR"
	for ((i = 1; i <= n; i++)); do
		local p; p=$(node_pid "$i")
		if [ -n "$p" ] && kill -0 "$p" 2>/dev/null; then
			local pre=() c=""
			[ "$(mode)" = veth ] && pre=(ip netns exec "$(ns "$i")")
			c=$("${pre[@]}" "$ZBMD" status -c "$DIR/node$i.ini" 2>/dev/null |
				awk '$1 ~ /^(state|leader|epoch|members|dataplane_epoch)$/ { k = $1; $1 = ""; printf "%s%s=%s", sep, k, substr($0, 2); sep = " " }') ||
				true   # no answer (control off, starting, stopping): the node is still listed
			echo "node $i: running (pid $p)${c:+ $c}"
		else echo "node $i: stopped (exit $(cat "$DIR/node$i.rc" 2>/dev/null || echo -))"; fi
	done
}

cmd_down() {
	local n; n=$(count)
	for ((i = 1; i <= n; i++)); do
		local p; p=$(node_pid "$i")
		[ -n "$p" ] && kill -TERM "$p" 2>/dev/null || true
	done
	for ((i = 1; i <= n; i++)); do
		local p; p=$(node_pid "$i"); [ -n "$p" ] || continue
		for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$p" 2>/dev/null || true
		for _ in $(seq 20); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
	done
	for x in $(our_ns); do
		ip netns del "$x" 2>/dev/null || true
	done
	[ -e "$DIR/.zbn" ] && rm -rf "$DIR"
	# DPDK runtime dirs of our file-prefixes, but not one whose lock a live
	# node holds: ours are gone, so that is another cluster's with this tag
	local d h
	for ((i = 1; i <= n; i++)); do
		for d in $(runtime_dirs "$i"); do
			if h=$(lock_holder "$d"); then
				echo "cluster.sh: $d left: its zbmd.lock is held by pid ${h:-?}, not a node of this cluster (another cluster with tag '$TAG'?)" >&2
				continue
			fi
			rm -rf "$d"
		done
	done
	true
}

cmd=${1:-}; shift || true
case $cmd in
status|down) [ $# -eq 0 ] || usage_err "$cmd does not take '$1' (options such as --tag go before the command)" ;;
esac
case $cmd in
up) cmd_up "$@" ;;
start) cmd_start "$@" ;;
stop) cmd_stop "$@" ;;
exec) cmd_exec "$@" ;;
netem) cmd_netem "$@" ;;
status) cmd_status ;;
down) cmd_down ;;
"") usage >&2; exit 2 ;;
*) usage_err "unknown command '$cmd'" ;;
esac
