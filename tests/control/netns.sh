# tests/control/netns.sh — multi-node control-plane clusters in network
# namespaces, for the test_*.sh files beside it (source it after tap.sh).
#
#   nn_setup TAG SUBNET N    namespaces zbctl-TAG-n0.. joined by a bridge that
#                            lives in zbctl-TAG-br (10.77.SUBNET.(i+1)/24)
#   nn_conf I [PSK]          write node I's config (PSK: key file name)
#   nn_start I / nn_kill I   run `zbmd control` in node I's namespace / kill -9
#   nn_form SECS I...        conf + start nodes I..., wait until they agree
#   nn_field I KEY           one field of node I's `zbmd status`
#   nn_link I up|down        the bridge port of node I (partition)
# Everything is torn down by the EXIT trap, whatever happens.
ZBMD=${ZBMD_BUILD:?}/bin/zbmd
NN_PIDS=()
NN_DIR=   # made by nn_setup, with the trap that removes it

nn_require() {
	[ "$(id -u)" -eq 0 ] || skip_all "needs root for network namespaces"
	command -v ip >/dev/null || skip_all "iproute2 missing"
	ip netns add zbctl-probe-$$ 2>/dev/null || skip_all "cannot create network namespaces here"
	ip netns del zbctl-probe-$$
}

nn_cleanup() {
	for p in "${NN_PIDS[@]}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null; done
	wait 2>/dev/null
	for ns in $(ip netns list | awk '{print $1}' | grep "^zbctl-$NN_TAG-"); do
		ip netns del "$ns" 2>/dev/null
	done
	[ -n "$NN_DIR" ] || return 0
	if [ -n "${KEEP_LOGS:-}" ]; then echo "# logs kept in $NN_DIR"; else rm -rf "$NN_DIR"; fi
}

nn_setup() {
	NN_TAG=$1; NN_SUB=$2; NN_N=$3
	NN_DIR=$(mktemp -d /tmp/zbctl-XXXXXX)
	trap nn_cleanup EXIT
	trap 'exit 1' INT TERM
	nn_cleanup_stale
	ip netns add "zbctl-$NN_TAG-br"
	ip -n "zbctl-$NN_TAG-br" link add br0 type bridge
	ip -n "zbctl-$NN_TAG-br" link set br0 up
	ip -n "zbctl-$NN_TAG-br" link set lo up
	for ((i = 0; i < NN_N; i++)); do
		local ns="zbctl-$NN_TAG-n$i"
		ip netns add "$ns"
		ip -n "$ns" link set lo up
		ip link add "zbc$NN_TAG$i" type veth peer name "zbp$NN_TAG$i"
		ip link set "zbc$NN_TAG$i" netns "$ns"
		ip link set "zbp$NN_TAG$i" netns "zbctl-$NN_TAG-br"
		ip -n "$ns" link set "zbc$NN_TAG$i" name eth0
		ip -n "$ns" addr add "10.77.$NN_SUB.$((i + 1))/24" dev eth0
		ip -n "$ns" link set eth0 up
		ip -n "zbctl-$NN_TAG-br" link set "zbp$NN_TAG$i" master br0
		ip -n "zbctl-$NN_TAG-br" link set "zbp$NN_TAG$i" up
	done
	head -c 32 /dev/urandom | base64 > "$NN_DIR/psk"
	head -c 32 /dev/urandom | base64 > "$NN_DIR/psk-wrong"
	chmod 600 "$NN_DIR/psk" "$NN_DIR/psk-wrong"
}

# Namespaces left by an earlier run that was killed hard.
nn_cleanup_stale() {
	for ns in $(ip netns list | awk '{print $1}' | grep "^zbctl-$NN_TAG-"); do
		ip netns del "$ns" 2>/dev/null
	done
}

nn_ip() { echo "10.77.$NN_SUB.$(($1 + 1))"; }

nn_conf() {
	local i=$1 psk=${2:-psk} seeds="" j
	for ((j = 0; j < NN_N; j++)); do seeds+="${seeds:+, }$(nn_ip $j):7400"; done
	cat > "$NN_DIR/n$i.ini" <<EOT
[node]
id = $i
[cluster]
id = 77
seeds = $seeds
psk_file = $NN_DIR/$psk
[control]
listen = $(nn_ip "$i"):7400
raft_dir = $NN_DIR/raft$i
admin_listen = 127.0.0.1:7401
election_timeout_ms = ${NN_ELECTION_MS:-500}
[metrics]
listen = $(nn_ip "$i"):9464
EOT
}

nn_start() {
	local i=$1
	ip netns exec "zbctl-$NN_TAG-n$i" "$ZBMD" control -c "$NN_DIR/n$i.ini" \
		>>"$NN_DIR/log$i" 2>&1 &
	NN_PIDS[$i]=$!
}

nn_kill() { kill -9 "${NN_PIDS[$1]}" 2>/dev/null; wait "${NN_PIDS[$1]}" 2>/dev/null; NN_PIDS[$1]=""; }

nn_status() { ip netns exec "zbctl-$NN_TAG-n$1" "$ZBMD" status --admin 127.0.0.1:7401 2>/dev/null; }

# nn_field I KEY: the value(s) after KEY in node I's status ("" if down)
nn_field() { nn_status "$1" | awk -v k="$2" '$1 == k { $1 = ""; sub(/^ /, ""); print; exit }'; }

nn_link() { ip -n "zbctl-$NN_TAG-br" link set "zbp$NN_TAG$1" "$2"; }

# nn_wait SECONDS CMD...: poll CMD every 100 ms until it succeeds.
nn_wait() {
	local end=$(( $(date +%s%N) + $1 * 1000000000 ))
	shift
	while [ "$(date +%s%N)" -lt "$end" ]; do
		"$@" && return 0
		sleep 0.1
	done
	return 1
}

# nn_agree MEMBERS NODES...: every listed node reports MEMBERS members, a
# leader, and all the same epoch.
nn_agree() {
	local want=$1 e="" i m ep; shift
	for i in "$@"; do
		m=$(nn_field "$i" members); ep=$(nn_field "$i" epoch)
		[ "$(echo $m | wc -w)" -eq "$want" ] || return 1
		[ "$(nn_field "$i" leader)" != "-1" ] || return 1
		[ -z "$e" ] || [ "$e" = "$ep" ] || return 1
		e=$ep
	done
}

# nn_form SECONDS I...: write each node's config, start it, and wait until
# all of them agree on one cluster of that many members.
nn_form() {
	local secs=$1 i; shift
	for i in "$@"; do nn_conf "$i"; nn_start "$i"; done
	nn_wait "$secs" nn_agree $# "$@"
}

# nn_finish: SIGTERM every node still running (graceful leave, clean exit,
# sanitizer leak checks), then fail if any node log holds a sanitizer report
# or the control thread did not stop.
nn_finish() {
	local p i bad=0
	for i in "${!NN_PIDS[@]}"; do
		p=${NN_PIDS[$i]}; [ -n "$p" ] && kill -TERM "$p" 2>/dev/null
	done
	for i in "${!NN_PIDS[@]}"; do
		p=${NN_PIDS[$i]}; [ -n "$p" ] || continue
		wait "$p"; local st=$?
		[ $st -eq 0 ] || { diag "node $i exited with status $st"; bad=1; }
		NN_PIDS[$i]=""
	done
	if grep -l "Sanitizer\|runtime error:" "$NN_DIR"/log* 2>/dev/null; then
		grep -h -A5 "Sanitizer\|runtime error:" "$NN_DIR"/log* | head -20 | sed 's/^/# /'
		bad=1
	fi
	return $bad
}

nn_now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
