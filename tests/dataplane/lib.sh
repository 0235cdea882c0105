# tests/dataplane/lib.sh — helpers for the dataplane shell tests. Source it
# after tests/common/tap.sh. ZBDT_KEEP=DIR: copy the test's work directory
# (configs, node outputs) to DIR before it is removed, for a post-mortem.
ZBMD=${ZBMD_BUILD:?}/bin/zbmd
T=$(mktemp -d /tmp/zbmd-node-test.XXXXXX)
PIDS=()
PREFIXES=()   # DPDK file-prefixes whose runtime dirs we remove at the end
cleanup_lib() {
	for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
	for x in "${PREFIXES[@]}"; do
		[ -n "$x" ] && rm -rf "/var/run/dpdk/$x" "${XDG_RUNTIME_DIR:-/tmp}/dpdk/$x"
	done
	[ -n "${ZBDT_KEEP:-}" ] && cp -r "$T" "$ZBDT_KEEP" 2>/dev/null
	rm -rf "$T"
}
# root with network namespaces, or skip
need_netns() {
	# a skip comes before the test sets its trap: remove T here
	[ "$(id -u)" -eq 0 ] || { rm -rf "$T"; skip_all "needs root for network namespaces"; }
	ip netns list >/dev/null 2>&1 || { rm -rf "$T"; skip_all "ip netns unavailable"; }
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

# have_netem: 0 when this kernel has sch_netem (tc qdisc ... netem works)
have_netem() {
	local ns=zbdt-nt$$ r=1
	ip netns add "$ns" 2>/dev/null || return 1
	ip -n "$ns" link add d0 type dummy 2>/dev/null &&
		tc -n "$ns" qdisc add dev d0 root netem loss 1% 2>/dev/null && r=0
	ip netns del "$ns" 2>/dev/null
	return $r
}

# lossy_cluster N LOSS DUP REORDER SEED: `$CL up N` with every node's link
# impaired (LOSS/DUP/REORDER in %): tc netem on the hub-side veths where the
# kernel has sch_netem, else tests/dataplane/helper_impair as the hub
# (--no-bridge; its output in $T/impair, its pid in IMPAIR_PID). Sets
# LOSSY_HOW to a sentence saying which one. Needs CL and T.
IMPAIR_PID=
LOSSY_HOW=
lossy_cluster() {
	local n=$1 loss=$2 dup=$3 reo=$4 seed=$5 i ifs=()
	if have_netem; then
		$CL up "$n" >/dev/null || return 1
		$CL netem "delay 1ms loss $loss% duplicate $dup% reorder $reo% 50%" || return 1
		LOSSY_HOW="tc netem (loss $loss% duplicate $dup% reorder $reo%) on every node link"
		return 0
	fi
	$CL up "$n" --no-bridge >/dev/null || return 1
	for ((i = 1; i <= n; i++)); do ifs+=("h$i"); done
	$CL exec hub "$ZBMD_BUILD/tests/dataplane/helper_impair" --loss "$loss" \
		--dup "$dup" --reorder "$reo" --seed "$seed" "${ifs[@]}" >"$T/impair" 2>&1 &
	IMPAIR_PID=$!; PIDS+=($!)
	LOSSY_HOW="no sch_netem in this kernel: helper_impair hub (loss $loss% dup $dup% reorder $reo%) between all $n nodes"
	wait_for "$T/impair" 'ready' 20
}

# impair_stop: stop the hub (if any) and wait for its counters line; call
# it in the test's own shell (not in $(...): a subshell cannot wait for it).
# impair_line: that line, or "netem".
impair_stop() {
	[ -n "$IMPAIR_PID" ] || return 0
	kill -TERM "$IMPAIR_PID" 2>/dev/null; wait "$IMPAIR_PID" 2>/dev/null
	wait_for "$T/impair" 'impair: forwarded' 5
}
impair_line() {
	[ -n "$IMPAIR_PID" ] || { echo "netem"; return 0; }
	grep 'impair: forwarded' "$T/impair" | tail -1
}

# netem_drops: the packets the tc netem qdiscs of the hub (on the node
# links h1..) dropped, summed; empty when the hub has no netem qdisc. Needs CL.
netem_drops() {
	$CL exec hub tc -s qdisc show 2>/dev/null | awk '
		/^qdisc / { n = $2 == "netem"; if (n) f = 1; next }
		n && match($0, /dropped [0-9]+/) { d += substr($0, RSTART + 8) }
		END { if (f) print d + 0 }'
}

# field FILE PREFIX KEY: the value of KEY=... on FILE's last line starting
# with PREFIX (e.g. field "$T/x1" RESULT retransmits)
field() {
	grep "^$2" "$1" | tail -1 | tr ' ' '\n' | sed -n "s/^$3=//p" | head -1
}

# remote_pair LABEL DIR HELPER INI1 INI2 READY_RE NCHECKS [restart]: the remote actor
# scenarios of tests/dataplane/helper_remote.c between two nodes: HELPER
# --drive on INI1, --serve on INI2 (both must print READY, and the driver's
# output must match READY_RE), the serving node stopped once the driver
# reaches its down phase, then every "CHECK ok|fail" line of the driver is a
# test (NCHECKS expected; missing ones fail). 3 + NCHECKS tests, each named
# with "[LABEL] ". With `restart`, the serving node is started again (a new
# process) when the driver asks for it, and stopped at the end (one more
# test). REMOTE_DOWN_SIG=STOP: the serving node is made silent (SIGSTOP)
# instead of stopped; it is continued and stopped later (same count).
# REMOTE_GHOST=NODE: the driver first calls that configured, never
# started node (2 more checks). ZBRA_BENCH=S: the driver also prints its
# figures.
remote_pair() {
	local label=$1 dir=$2 h=$3 ini1=$4 ini2=$5 ready=$6 nchecks=$7 restart=${8:-}
	local d s rs rd xa=""
	[ "$restart" = restart ] && xa="--restart-flag $dir/restarted"
	[ -n "${REMOTE_GHOST:-}" ] && xa="$xa --ghost $REMOTE_GHOST"
	"$h" -c "$ini1" --drive "$dir/ids" --down-flag "$dir/down" $xa \
		--senders 4 --count 5000 --bench "${ZBRA_BENCH:-0}" >"$dir/drive.log" 2>&1 &
	d=$!; PIDS+=($d)
	wait_for "$dir/drive.log" '^READY' 30
	"$h" -c "$ini2" --serve "$dir/ids" >"$dir/serve.log" 2>&1 &
	s=$!; PIDS+=($s)
	wait_for "$dir/serve.log" '^READY' 30 && grep -qE "$ready" "$dir/drive.log"
	ok $? "[$label] both nodes up ($ready)" ||
		{ diag "$(tail -5 "$dir/drive.log")"; diag "$(tail -5 "$dir/serve.log")"; }
	wait_for "$dir/drive.log" '^(PHASE down|DONE)' 150 ||
		diag "driver did not reach the down phase: $(tail -3 "$dir/drive.log")"
	if [ "${REMOTE_DOWN_SIG:-TERM}" = STOP ]; then
		# the node goes silent (SIGSTOP: no reset, no reply): its peer
		# must find out by itself; it is let go (and checked) later
		kill -STOP $s
	else
		kill -TERM $s 2>/dev/null; wait_exit $s 30; wait $s; rs=$?
		ok $([ $rs -eq 0 ]; echo $?) "[$label] serving node stopped cleanly (exit $rs)"
	fi
	touch "$dir/down"
	stopped_end() {   # a SIGSTOPped server: continued, then stopped
		kill -CONT $s 2>/dev/null; kill -TERM $s 2>/dev/null; wait_exit $s 30; wait $s; rs=$?
		ok $([ $rs -eq 0 ]; echo $?) "[$label] the silent node, continued, stopped cleanly (exit $rs)"
	}
	if [ "$restart" = restart ]; then
		wait_for "$dir/drive.log" '^(PHASE restart|DONE)' 60 ||
			diag "driver did not reach the restart phase: $(tail -3 "$dir/drive.log")"
		# the silent node stays stopped a little longer: the driver's
		# carrier, connecting again every 100 ms, then has a connection
		# waiting in its kernel, which the node acks when it is
		# continued, just before it ends; the driver holds a comm that
		# dies with it. Before 2026-11-27 that left the pair half open
		# for good after the restart, now and then (whether a retry
		# came before the exit was chance)
		[ "${REMOTE_DOWN_SIG:-TERM}" = STOP ] && { sleep 0.5; stopped_end; }
		rm -f "$dir/ids"
		"$h" -c "$ini2" --serve "$dir/ids" >"$dir/serve2.log" 2>&1 &
		s=$!; PIDS+=($s)
		wait_for "$dir/serve2.log" '^READY' 30 || diag "restarted node: $(tail -3 "$dir/serve2.log")"
		touch "$dir/restarted"
	fi
	wait_exit $d 60 || kill -KILL $d 2>/dev/null
	wait $d; rd=$?
	[ "${REMOTE_DOWN_SIG:-TERM}" = STOP ] && [ "$restart" != restart ] && stopped_end
	if [ "$restart" = restart ]; then
		kill -TERM $s 2>/dev/null; wait_exit $s 30; wait $s; rs=$?
		ok $([ $rs -eq 0 ]; echo $?) "[$label] restarted serving node stopped cleanly (exit $rs)"
	fi
	driver_checks "$label" "$dir/drive.log" "$nchecks" $rd
}

# driver_checks LABEL LOG NCHECKS STATUS: every "CHECK ok|fail" line of a
# driver's LOG is a test (NCHECKS expected; missing ones fail), its FIGURE
# lines are diagnostics, and its exit STATUS must be 0: NCHECKS + 1 tests.
driver_checks() {
	local label=$1 log=$2 nchecks=$3 rd=$4 n=0 line
	while IFS= read -r line; do
		n=$((n + 1))
		case $line in
		"CHECK ok "*) ok 0 "[$label] ${line#CHECK ok }" ;;
		*) ok 1 "[$label] ${line#CHECK fail }" ;;
		esac
	done < <(grep '^CHECK ' "$log")
	while [ $n -lt "$nchecks" ]; do n=$((n + 1)); ok 1 "[$label] driver check $n missing"; done
	grep '^FIGURE' "$log" | while IFS= read -r l; do diag "[$label] $l"; done
	[ "$rd" -eq 0 ] || diag "$(grep -v "^CHECK" "$log" | grep -v "^EAL\|^memif" | tail -12)"
	ok $([ "$rd" -eq 0 ]; echo $?) "[$label] driver exits 0 (exit $rd)"
}
