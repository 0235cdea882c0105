#!/usr/bin/env bash
# bench/transport/run.sh — `make bench-transport`: the zbmd transport between
# two local nodes over memif and over veth/af_packet, side by side with the
# kernel (UDP sendmmsg/recvmmsg rate, TCP ping-pong) on the same paths and
# with dpdk-testpmd's raw memif packet rate as the ceiling. One run, one
# table; ratios against each peer and against the goals of issue 4. The
# small-message rate and round trip are measured between actors (64-byte
# messages from 4 actors to an actor on the other node, actor call round
# trips: tests/dataplane/helper_remote.c) and, below them, at the transport
# alone (its delivery callback: helper_bench_tp.c).
#
# Environment: ZBMD_BUILD (build dir), BENCH_RATE_S (1; 3 runs), BENCH_BULK_S (3,
# after BENCH_BULK_WARM_S (0.5) of warm-up, as nccl-tests' -w: not counted;
# reported as the whole span's goodput and its best BENCH_BEST_S (1) seconds),
# BENCH_PINGS (20000), BENCH_MEMIF_MTU (9000), BENCH_TESTPMD_S (4),
# BENCH_ACTOR_MSGS (3000000 per sender actor over memif),
# BENCH_ACTOR_MSGS_VETH (100000 over veth),
# BENCH_SETTLE_S (60: before each measurement, wait at most this long for the
# machine's cross-CPU round trip to come back near the lowest seen; 0: no wait).
# Needs root (network namespaces). Cleans up on exit, also on failure.
set -uo pipefail
# no arguments: the environment above sets it up (-h / --help: this header;
# anything else was taken as a run until 2026-11-28)
case "${1-}" in
-h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
'') ;;
*) echo "bench-transport: no arguments (got '$1'); the environment sets it up (-h: how)" >&2; exit 2 ;;
esac
[ $# -le 1 ] || { echo "bench-transport: no arguments (got $#)" >&2; exit 2; }
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
B=${ZBMD_BUILD:-$ROOT/build}
H=$B/tests/dataplane/helper_bench_tp
HR=$B/tests/dataplane/helper_remote
K=$B/bin/kbench
RATE_S=${BENCH_RATE_S:-1}; BULK_S=${BENCH_BULK_S:-3}; PINGS=${BENCH_PINGS:-20000}
BEST_S=${BENCH_BEST_S:-1}
BULK_W=${BENCH_BULK_WARM_S:-0.5}
MMTU=${BENCH_MEMIF_MTU:-9000}; TPMD_S=${BENCH_TESTPMD_S:-4}
# messages per sender actor (4 of them) on memif and on veth
ACT_N=${BENCH_ACTOR_MSGS:-3000000}; ACT_NV=${BENCH_ACTOR_MSGS_VETH:-100000}
SETTLE=${BENCH_SETTLE_S:-60}
case $SETTLE in ''|*[!0-9]*) echo "bench-transport: BENCH_SETTLE_S wants whole seconds, got '$SETTLE'" >&2; exit 2 ;; esac
W=$(mktemp -d /tmp/zbperf-bench.XXXXXX)
TAGM=zbperfm$$; TAGV=zbperfv$$
CLM="$ROOT/scripts/cluster-memif.sh --tag $TAGM --dir $W/m"
CLV="$ROOT/scripts/cluster.sh --tag $TAGV --dir $W/v"
PIDS=()
cleanup() {
	# PIDS are timeout(1) wrappers: their commands run in a process group
	# of their own, out of reach of the terminal's ^C and orphaned (still
	# polling) if the wrapper is KILLed. TERM the wrapper, which passes it
	# on; then KILL what is left of each command, then the wrapper.
	local p alive=0
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null && alive=1; done
	[ $alive -eq 0 ] || sleep 1
	for p in "${PIDS[@]}"; do
		pkill -KILL -P "$p" 2>/dev/null
		kill -KILL "$p" 2>/dev/null
	done
	$CLM down >/dev/null 2>&1; $CLV down >/dev/null 2>&1
	rm -rf /var/run/dpdk/zbperf-tp$$A /var/run/dpdk/zbperf-tp$$B "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
[ "$(id -u)" -eq 0 ] || { echo "bench-transport: needs root (network namespaces)" >&2; exit 1; }
for x in "$H" "$HR" "$K"; do [ -x "$x" ] || { echo "bench-transport: missing $x (make first)" >&2; exit 1; }; done
export ZBMD_BUILD=$B

declare -A R   # results: R[path.key]
log() { echo "bench-transport: $*" >&2; }
wait_for() {  # FILE REGEX SECONDS
	local deadline=$((SECONDS + $3))
	until grep -qE "$2" "$1" 2>/dev/null; do
		[ $SECONDS -ge "$deadline" ] && return 1
		sleep 0.1
	done
}
val() { grep -h "$1" "$2" | head -1 | tr ' ' '\n' | sed -n "s/^$3=//p"; }

# zbmd pair: run_zbmd PATH CL DIR [copy] -- with `copy`, only the goodput
# (short rate and ping phases) with the receiver copying every bulk message
# into its arena (helper_bench_tp --copy), stored as PATH.bulk1c/bulk16c
run_zbmd() {
	local path=$1 cl=$2 d=$3 copy=${4:-} args=(--rate-s "$RATE_S" --pings "$PINGS")
	[ -n "$copy" ] && args=(--copy --rate-s 0.2 --rate-reps 1 --pings 100)
	$cl exec 1 "$H" -c "$d/node1.ini" "${args[@]}" --bulk-s "$BULK_S" --bulk-warm-s "$BULK_W" --best-window-s "$BEST_S" >"$d/b1" 2>&1 &
	local p1=$!; PIDS+=($p1)
	wait_for "$d/b1" '^READY' 60 || { log "$path: node 1 did not start"; tail -3 "$d/b1" >&2; return 1; }
	$cl exec 2 "$H" -c "$d/node2.ini" ${copy:+--copy} >"$d/b2" 2>&1 &
	local p2=$!; PIDS+=($p2)
	wait_for "$d/b1" '^BENCH DONE' 90 || { log "$path: no result"; tail -3 "$d/b1" "$d/b2" >&2; }
	kill -TERM $p1 $p2 2>/dev/null; wait $p1 $p2 2>/dev/null
	if [ -n "$copy" ]; then
		R[$path.bulk1c]=$(val 'bulk_size=1048576 ' "$d/b1" goodput_Gbps)
		R[$path.bulk16c]=$(val 'bulk_size=16777216 ' "$d/b1" goodput_Gbps)
		grep -q 'BENCH DONE failures=0' "$d/b1" || log "$path --copy: checks failed"
		return
	fi
	R[$path.rate]=$(val 'rate_Mmsgs' "$d/b1" rate_Mmsgs)
	R[$path.p50]=$(val 'rtt_p50' "$d/b1" rtt_p50_us)
	R[$path.p99]=$(val 'rtt_p99' "$d/b1" rtt_p99_us)
	R[$path.bulk1]=$(val 'bulk_size=1048576 ' "$d/b1" goodput_Gbps)
	R[$path.bulk16]=$(val 'bulk_size=16777216 ' "$d/b1" goodput_Gbps)
	R[$path.best1]=$(val 'bulk_size=1048576 ' "$d/b1" best_Gbps)
	R[$path.best16]=$(val 'bulk_size=16777216 ' "$d/b1" best_Gbps)
	R[$path.rtx]="$(val '^STATS node=1' "$d/b1" retransmits)/$(val '^STATS node=2' "$d/b2" dup_frames)"
	R[$path.kept]="$(val '^STATS node=2' "$d/b2" bulk_kept)/$(val '^STATS node=2' "$d/b2" bulk_msgs)"
	R[smin]=$(val '^STATS node=2' "$d/b2" stream_min_kb)
	grep -q 'BENCH DONE failures=0' "$d/b1" || log "$path: checks failed: $(grep -h FAIL "$d/b1" "$d/b2" | head -3)"
}

# actors: run_actor PATH CL DIR COUNT -- 4 sender actors on node 1 send COUNT
# messages of 64 bytes each to one actor on node 2 (remote actor messaging
# on the same transport, every message checked by the receiving actor),
# then a pinger actor makes PINGS act_call_async round trips of 64 bytes to
# an echo actor (tests/dataplane/helper_remote.c --bench-only)
run_actor() {
	local path=$1 cl=$2 d=$3 n=$4
	rm -f "$d/ids"
	# node 1 first (the memif server), as run_zbmd
	timeout -k 5 150 $cl exec 1 "$HR" -c "$d/node1.ini" --drive "$d/ids" \
		--bench-only "$PINGS" --senders 4 --count "$n" >"$d/ad" 2>&1 &
	local pd=$!; PIDS+=($pd)
	wait_for "$d/ad" '^READY' 60 || log "$path actors: node 1 did not start"
	$cl exec 2 "$HR" -c "$d/node2.ini" --serve "$d/ids" >"$d/as" 2>&1 &
	local ps=$!; PIDS+=($ps)
	wait $pd
	kill -TERM $ps 2>/dev/null; wait $ps 2>/dev/null
	R[$path.arate]=$(val 'actor_rate_Mmsgs' "$d/ad" actor_rate_Mmsgs)
	R[$path.ap50]=$(val 'actor_rtt_p50' "$d/ad" actor_rtt_p50_us)
	R[$path.ap99]=$(val 'actor_rtt_p99' "$d/ad" actor_rtt_p99_us)
	grep -q '^DONE failures=0' "$d/ad" ||
		log "$path actors: checks failed: $(grep -h 'CHECK fail' "$d/ad" | head -3)$(tail -2 "$d/ad")"
}

# kernel peers in namespace pair (NS1 -> NS2 at IP2): run_kernel PATH NS1 NS2 IP2
run_kernel() {
	local path=$1 n1=$2 n2=$3 ip=$4 e1=() e2=()
	[ -n "$n1" ] && e1=(ip netns exec "$n1"); [ -n "$n2" ] && e2=(ip netns exec "$n2")
	"${e2[@]}" "$K" udp-sink 47471 >"$W/ku.$path" 2>&1 &
	local ps=$!; PIDS+=($ps)
	wait_for "$W/ku.$path" READY 10
	"${e1[@]}" "$K" udp-blast "$ip" 47471 "$RATE_S" >/dev/null 2>&1
	wait $ps 2>/dev/null
	R[$path.krate]=$(val RESULT "$W/ku.$path" rate_Mmsgs)
	"${e2[@]}" "$K" tcp-echo 47472 >"$W/kt.$path" 2>&1 &
	ps=$!; PIDS+=($ps)
	wait_for "$W/kt.$path" READY 10
	"${e1[@]}" "$K" tcp-ping "$ip" 47472 "$PINGS" >"$W/kp.$path" 2>&1
	wait $ps 2>/dev/null
	R[$path.kp50]=$(val RESULT "$W/kp.$path" rtt_p50_us)
	R[$path.kp99]=$(val RESULT "$W/kp.$path" rtt_p99_us)
}

# testpmd: raw memif rate at SIZE bytes, rxonly on one CPU, txonly on the other
run_testpmd() {
	local sz=$1 s=$W/tp.sock extra=() bs=2048
	# jumbo frames: one ring buffer and one mbuf per frame, as zbmd's memif
	# ports at that MTU (cluster scripts: bsize rounded up to 1 KiB)
	[ "$sz" -gt 2000 ] && bs=$(( (sz + 64 + 1023) / 1024 * 1024 )) &&
		extra=(--mbuf-size=$((bs + 128)))
	local common=(--no-huge -m 512 --no-pci --log-level=3)
	timeout -k 2 $((TPMD_S + 20)) dpdk-testpmd -l 0-1 "${common[@]}" --file-prefix zbperf-tp$$A \
		--vdev "net_memif0,role=server,socket=$s,bsize=$bs" -- --total-num-mbufs=16384 "${extra[@]}" \
		--burst=64 --forward-mode=rxonly --stats-period 1 --auto-start --nb-cores=1 \
		>"$W/tpA.$sz" 2>&1 </dev/null &
	local pa=$!; PIDS+=($pa)
	sleep 1.5
	timeout -k 2 $((TPMD_S + 20)) dpdk-testpmd -l 0-1 --main-lcore 1 "${common[@]}" --file-prefix zbperf-tp$$B \
		--vdev "net_memif0,role=client,socket=$s,bsize=$bs" -- --total-num-mbufs=16384 "${extra[@]}" \
		--burst=64 --forward-mode=txonly --txpkts="$sz" --stats-period 1 --auto-start --nb-cores=1 \
		>"$W/tpB.$sz" 2>&1 </dev/null &
	local pb=$!; PIDS+=($pb)
	# the receiver stops first (DPDK 22.11's memif may crash on the side
	# whose peer leaves; only the receiver's figures are read)
	wait_for "$W/tpA.$sz" 'Rx-pps: +[1-9]' 15
	sleep "$TPMD_S"
	kill -INT $pa 2>/dev/null; wait $pa 2>/dev/null
	kill -INT $pb 2>/dev/null; wait $pb 2>/dev/null
	# a ceiling: the best of the receiver's per-second rates (the machine
	# is shared; the median swings with other processes' load)
	local v
	v=$(grep -h 'Rx-pps:' "$W/tpA.$sz" | awk '$2 > 0 {print $2}' | sort -n |
		awk '{a[NR]=$1} END {if (NR) printf "%.3f", a[NR]/1e6}')
	R[tp.$sz.$2]=$v
	# the ceiling is the better of the runs before and after zbmd's
	[ -n "$v" ] && R[tp.$sz]=$(awk -v a="${R[tp.$sz]:-0}" -v b="$v" 'BEGIN { printf "%.3f", (b > a ? b : a) }')
}
TP_SIZES="64 1500"; [ "$MMTU" != 1500 ] && TP_SIZES="$TP_SIZES $MMTU"
# This machine changes speed for minutes at a time (docs/perf-transport.md):
# the raw ceilings are measured before and after zbmd's runs, and a ratio is
# trusted only when the two agree.
raw_ceilings() {  # PASS
	for sz in $TP_SIZES; do
		log "dpdk-testpmd raw memif, $sz-byte frames ($1 zbmd's runs)"
		[ "$1" = after ] && ms_settle
		run_testpmd "$sz" "$1"
	done
}
# The machine's state (docs/perf-transport.md): a busy stretch -- testpmd's
# two spinning processes, say -- can leave the CPUs' round trip at ~6x for a
# while, and a measurement started then runs slow. As bench/coll/compare.sh:
# before each measurement wait (at most SETTLE s) until the round trip is
# within 1.5x of the lowest seen, and keep each one's readings before/after.
KBENCH=$K
# shellcheck source=../machine_state.sh
. "$ROOT/bench/machine_state.sh"
STATES=()
state() {  # NAME: the measurement's readings before (RB) and after
	local v; v=$(ms_rtt); ms_seen "$v"
	STATES+=("$1 ${RB:-?}/${v:-?}")
	R[state.$1]=${v:-}
}
# zbmd_pair NAME CL DIR: run_zbmd, and once more (after the machine settles)
# when the round trip after it reads more than 3x the lowest seen -- the
# slow state (docs/perf-transport.md) took the run, its figures measure the
# machine; the second run's figures replace the first's
zbmd_pair() {
	run_zbmd "$2" "$3" "$4"
	state "$1"
	local v=${R[state.$1]:-}
	if [ -n "$v" ] && [ -n "$RTT_MIN" ] && [ "$v" -gt $((RTT_MIN * 3)) ]; then
		log "$1: the machine read slow after the run ($v ns): once more"
		ms_settle
		run_zbmd "$2" "$3" "$4"
		state "$1-again"
	fi
}
R[rtt.before]=$(ms_rtt); ms_seen "${R[rtt.before]}"
raw_ceilings before

log "memif: 2 nodes, mtu $MMTU"
ms_settle
if ZBN_MTU=$MMTU $CLM up 2 >/dev/null; then
	zbmd_pair memif memif "$CLM" "$W/m"
	log "memif: goodput with the receiver copying, mtu $MMTU"
	ms_settle
	run_zbmd memif "$CLM" "$W/m" copy
	state memif-copy
	log "memif: actors, mtu $MMTU"
	ms_settle
	run_actor memif "$CLM" "$W/m" "$ACT_N"
	state memif-actors
fi
$CLM down >/dev/null 2>&1
if [ "$MMTU" != 1500 ]; then  # the same frame size as testpmd's 1500-byte ceiling
	log "memif: 2 nodes, mtu 1500"
	ms_settle
	if ZBN_MTU=1500 $CLM up 2 >/dev/null; then
		zbmd_pair memif1500 memif1500 "$CLM" "$W/m"
		log "memif: actors, mtu 1500"
		ms_settle
		run_actor memif1500 "$CLM" "$W/m" "$ACT_N"
		state memif1500-actors
	fi
	$CLM down >/dev/null 2>&1
fi

log "veth/af_packet: 2 namespaces on a bridge"
if $CLV up 2 >/dev/null; then
	# the kernel on the very same veth/bridge path first (addresses
	# lent to the kernel for the measurement, removed before zbmd starts)
	ns1=zbn-$TAGV-1; ns2=zbn-$TAGV-2
	ip -n $ns1 addr add 10.77.0.1/24 dev dp0; ip -n $ns2 addr add 10.77.0.2/24 dev dp0
	# the kernel's runs wait for the machine to settle as zbmd's do, and
	# their readings count in the SLOW STATE check (until 2026-11-29 they
	# ran straight after the memif actor runs, with no wait: a slow state
	# there made the kernel look slower and the ratios larger)
	log "kernel UDP/TCP over the veth path"
	ms_settle
	run_kernel veth $ns1 $ns2 10.77.0.2
	state kernel-veth
	ip -n $ns1 addr flush dev dp0; ip -n $ns2 addr flush dev dp0
	log "kernel UDP/TCP over loopback (the memif comparison)"
	ms_settle
	run_kernel lo $ns1 $ns1 127.0.0.1
	state kernel-lo
	ms_settle
	run_zbmd veth "$CLV" "$W/v"
	state veth
	log "veth: actors"
	run_actor veth "$CLV" "$W/v" "$ACT_NV"
	state veth-actors
fi
$CLV down >/dev/null 2>&1

raw_ceilings after
R[rtt.after]=$(ms_rtt)

log "one core's copy rate over the bulk test's data (kbench copy)"
for pl in 1400 $((MMTU - 100)); do
	R[copy.$pl]=$(val RESULT <("$K" copy "$pl" 1 2>&1) copy_Gbps)
done
log "a memif hop's two copies between the CPUs (kbench ring-copy)"
for sz in $(printf '%s\n' 1500 "$MMTU" | sort -un); do
	"$K" ring-copy "$sz" 2 >"$W/rc.$sz" 2>&1
	R[rc.$sz.n]=$(val RESULT "$W/rc.$sz" narrow_Gbps)
	R[rc.$sz.w]=$(val RESULT "$W/rc.$sz" wide_Gbps)
	R[rc.wb]=$(val RESULT "$W/rc.$sz" wide_bytes)
done

# ---- the table --------------------------------------------------------------
g() { local v=${R[$1]:-}; echo "${v:-n/a}"; }
ratio() {  # a / b, or n/a
	awk -v a="$1" -v b="$2" 'BEGIN { if (a == "n/a" || b == "n/a" || b + 0 == 0) print "n/a"; else printf "%.2fx", a / b }'
}
mark() {  # value goal higher|lower
	awk -v v="$1" -v g="$2" -v d="$3" 'BEGIN { if (v == "n/a" || g == "n/a") print "n/a";
		else if ((d == "higher" && v + 0 >= g + 0) || (d == "lower" && v + 0 <= g + 0)) print "MET";
		else print "not met" }'
}
# raw memif payload ceiling at 1500-byte frames: pps x zbmd payload bytes
# per frame (1500 IP MTU - 20 IP - 8 UDP - 72 zbmd = 1400)
raw_gbps=$(awk -v p="$(g tp.1500)" 'BEGIN { if (p == "n/a") print "n/a"; else printf "%.2f", p * 1e6 * 1400 * 8 / 1e9 }')
# ... and at the memif MTU (MMTU - 100 payload bytes per frame)
raw_mgbps=$(awk -v p="$(g tp.$MMTU)" -v b=$((MMTU - 100)) 'BEGIN { if (p == "n/a") print "n/a"; else printf "%.2f", p * 1e6 * b * 8 / 1e9 }')
echo
echo "== zbmd transport benchmark: 2 nodes, one lane each, $(date -u +%FT%TZ) =="
echo "   machine state: CPU 0 <-> CPU 1 cache-line round trip $(g rtt.before) ns before, $(g rtt.after) ns after (kbench cpu-rtt);"
echo "   zbmd's runs, before/after each (ns): ${STATES[*]:-n/a}; lowest seen ${RTT_MIN:-n/a}"
slow=""
for st in memif memif-copy memif1500 memif-actors memif1500-actors kernel-veth kernel-lo; do
	v=${R[state.$st-again]:-${R[state.$st]:-}}   # a run done again counts by its second reading
	[ -n "$v" ] && [ -n "$RTT_MIN" ] && [ "$v" -gt $((RTT_MIN * 2)) ] && slow="$slow $st"
done
[ -n "$slow" ] && echo "   SLOW STATE: the round trip read over 2x the lowest right after the$slow run(s): their figures may be the machine's (run again)"
echo "   (memif: mtu $MMTU unless marked; medians of 3 rate runs; goodput over ${BULK_S} s after ${BULK_W} s of warm-up, and its best ${BEST_S} s; 1 polling lcore per node)"
printf '%-30s %11s %11s %11s %11s %11s\n' "" "zbmd memif" "memif 1500" "zbmd veth" "kernel lo" "kernel veth"
row() { printf '%-30s %11s %11s %11s %11s %11s\n' "$@"; }
row "64 B to an actor (M msg/s)" "$(g memif.arate)" "$(g memif1500.arate)" "$(g veth.arate)" "$(g lo.krate)" "$(g veth.krate)"
row "actor call RTT p50 (us)" "$(g memif.ap50)" "$(g memif1500.ap50)" "$(g veth.ap50)" "$(g lo.kp50)" "$(g veth.kp50)"
row "actor call RTT p99 (us)" "$(g memif.ap99)" "$(g memif1500.ap99)" "$(g veth.ap99)" "$(g lo.kp99)" "$(g veth.kp99)"
row "64 B transport msgs (M msg/s)" "$(g memif.rate)" "$(g memif1500.rate)" "$(g veth.rate)" "" ""
row "transport RTT p50 (us)" "$(g memif.p50)" "$(g memif1500.p50)" "$(g veth.p50)" "" ""
row "transport RTT p99 (us)" "$(g memif.p99)" "$(g memif1500.p99)" "$(g veth.p99)" "" ""
row "goodput 1 MiB msgs (Gbit/s)" "$(g memif.bulk1)" "$(g memif1500.bulk1)" "$(g veth.bulk1)" "" ""
row "goodput 16 MiB msgs (Gbit/s)" "$(g memif.bulk16)" "$(g memif1500.bulk16)" "$(g veth.bulk16)" "" ""
row "  1 MiB, best ${BEST_S} s" "$(g memif.best1)" "$(g memif1500.best1)" "$(g veth.best1)" "" ""
row "  16 MiB, best ${BEST_S} s" "$(g memif.best16)" "$(g memif1500.best16)" "$(g veth.best16)" "" ""
row "retransmitted / duplicates rcvd" "$(g memif.rtx)" "$(g memif1500.rtx)" "$(g veth.rtx)" "" ""
row "bulk msgs kept as frames" "$(g memif.kept)" "$(g memif1500.kept)" "$(g veth.kept)" "" ""
row "  1 MiB, copied (--copy)" "$(g memif.bulk1c)" "" "" "" ""
row "  16 MiB, copied (--copy)" "$(g memif.bulk16c)" "" "" "" ""
echo "   (the receiver takes bulk messages under [transport] stream_min_kb ($(g smin) KiB here) as their frames, not copied, while its"
echo "    mbuf pool has room (stack pools: any MTU; ring pools: MTU >= 4000); others are copied once into its reassembly arena:"
echo "    docs/wire.md, \"Receive without copying\")"
echo
echo "dpdk-testpmd raw memif (rxonly receiver, best second, M pkt/s; the better of before / after zbmd's runs):"
unsteady=""
for sz in $TP_SIZES; do
	sp=$(awk -v a="$(g tp.$sz.before)" -v b="$(g tp.$sz.after)" 'BEGIN { if (a == "n/a" || b == "n/a" || a + 0 == 0 || b + 0 == 0) print "n/a";
		else printf "%.2f", (a > b ? a / b : b / a) }')
	echo "  $sz B: $(g tp.$sz) ($(g tp.$sz.before) / $(g tp.$sz.after))"
	awk -v x="$sp" 'BEGIN { exit !(x == "n/a" || x + 0 > 1.3) }' && unsteady="$unsteady $sz B (${sp}x)"
done
[ -n "$unsteady" ] && echo "  UNSTEADY: the ceilings before and after differ by more than 1.3x at$unsteady: the machine changed speed during the run; the goodput goals below compare figures taken in different states (run again)"
echo "  = raw payload ceiling at 1500-byte frames: $raw_gbps Gbit/s (1400 zbmd payload bytes per frame)"
[ "$MMTU" != 1500 ] && echo "  at $MMTU-byte frames: $(g tp.$MMTU) M pkt/s = $raw_mgbps Gbit/s ($((MMTU - 100)) payload bytes per frame)"
echo "one core copying the bulk test's 2 x 16 MiB messages piece by piece into a 1024-slot ring"
echo "  (what a copying memif sender must do at least once per byte): $(g copy.1400) Gbit/s in"
echo "  1400-byte pieces, $(g copy.$((MMTU - 100))) Gbit/s in $((MMTU - 100))-byte pieces"
echo "a memif hop's two copies between the CPUs (kbench ring-copy: CPU 0 copies frames into a 256-slot ring, as"
echo "  zbmd's memif ports have (testpmd's runs above keep DPDK's 1024), in bursts of 32; CPU 1 copies them out),"
echo "  Gbit/s of frames: with 16-byte moves (the memif PMD's rte_memcpy in Debian's DPDK 22.11) / $(g rc.wb)-byte moves:"
for sz in $(printf '%s\n' 1500 "$MMTU" | sort -un); do
	echo "  $sz B: $(g rc.$sz.n) / $(g rc.$sz.w); raw memif (testpmd) / 16-byte ring: $(ratio "$(awk -v p="$(g tp.$sz)" -v z="$sz" 'BEGIN { if (p == "n/a") print "n/a"; else printf "%.2f", p * z * 8 / 1000 }')" "$(g rc.$sz.n)")"
done
echo
echo "ratios"
echo "  memif actor rate / kernel UDP lo:     $(ratio "$(g memif.arate)" "$(g lo.krate)")    veth actor rate / kernel UDP veth: $(ratio "$(g veth.arate)" "$(g veth.krate)")"
echo "    (not per packet: zbmd's router packs ~7 actor messages into a transport message, from 4 sender actors; kernel UDP"
echo "    sends one 64-byte datagram per message from one thread; the transport row below is one message per transport message)"
echo "  kernel TCP lo p50 / memif actor p50:  $(ratio "$(g lo.kp50)" "$(g memif.ap50)")    kernel TCP veth p50 / veth actor p50: $(ratio "$(g veth.kp50)" "$(g veth.ap50)")"
echo "  transport: memif rate / kernel UDP lo $(ratio "$(g memif.rate)" "$(g lo.krate)"), / raw memif 64 B $(ratio "$(g memif.rate)" "$(g tp.64)"); kernel TCP lo p50 / memif p50 $(ratio "$(g lo.kp50)" "$(g memif.p50)")"
echo "  memif-1500 16 MiB goodput / raw 1500: $(ratio "$(g memif1500.bulk16)" "$raw_gbps")   memif-$MMTU 16 MiB / raw 1500: $(ratio "$(g memif.bulk16)" "$raw_gbps")"
[ "$MMTU" != 1500 ] && echo "  memif-$MMTU 16 MiB goodput / raw $MMTU: $(ratio "$(g memif.bulk16)" "$raw_mgbps")"
echo "  memif-1500 16 MiB goodput / one core's copy rate (1400 B): $(ratio "$(g memif1500.bulk16)" "$(g copy.1400)")"
echo
half=$(awk -v r="$raw_gbps" 'BEGIN { if (r == "n/a") print "n/a"; else printf "%.2f", r / 2 }')
echo "goals (issue 4, over memif)"
echo "  >= 5 M msg/s of 64 B delivered to an actor: $(g memif.arate)  $(mark "$(g memif.arate)" 5 higher)"
echo "  p50 RTT <= 5 us (actor call round trip):    $(g memif.ap50)  $(mark "$(g memif.ap50)" 5 lower)"
[ -n "$unsteady" ] && echo "  (ceilings unsteady, see above: the goodput marks are not to be trusted)"
[ -n "$slow" ] && echo "  (zbmd's$slow run may have run in the slow state, see above: its marks are not to be trusted)"
# the goodput goals: the whole span, and its best stretch (the ceiling's statistic)
goal() {  # PATH LABEL HALF
	echo "  goodput >= half raw at $2 ($3 Gbit/s): 1 MiB $(g $1.bulk1) $(mark "$(g $1.bulk1)" "$3" higher), 16 MiB $(g $1.bulk16) $(mark "$(g $1.bulk16)" "$3" higher);" \
		"best ${BEST_S} s: 1 MiB $(g $1.best1) $(mark "$(g $1.best1)" "$3" higher), 16 MiB $(g $1.best16) $(mark "$(g $1.best16)" "$3" higher)"
}
goal "$([ "$MMTU" = 1500 ] && echo memif || echo memif1500)" "1500 B" "$half"
if [ "$MMTU" != 1500 ]; then
	mhalf=$(awk -v r="$raw_mgbps" 'BEGIN { if (r == "n/a") print "n/a"; else printf "%.2f", r / 2 }')
	goal memif "$MMTU B" "$mhalf"
fi
