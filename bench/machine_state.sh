# bench/machine_state.sh — sourced by the benchmark scripts: the machine's
# state as the CPU 0 <-> CPU 1 cache-line round trip (`kbench cpu-rtt`), and
# a wait until it is back near the lowest seen. On the 2-vCPU VMs this is
# measured on, a busy stretch can leave that round trip ~6x higher for
# minutes, and whatever runs then runs slow (docs/perf-transport.md).
#
# Needs: KBENCH (path of kbench; a missing one reads as no reading) and
# SETTLE (whole seconds, the longest wait). Sets RTT_MIN (lowest seen) and,
# in ms_settle, RB (the last reading).
RTT_MIN=
# ms_rtt: one reading in ns, empty without kbench
ms_rtt() { [ -x "$KBENCH" ] && "$KBENCH" cpu-rtt 2>/dev/null | sed -n 's/.*cpu_rtt_ns=\([0-9]*\).*/\1/p'; }
# ms_seen NS: keep the lowest reading
ms_seen() { [ -n "$1" ] && { [ -z "$RTT_MIN" ] || [ "$1" -lt "$RTT_MIN" ]; } && RTT_MIN=$1; true; }
# ms_settle: wait (at most SETTLE s) until the round trip is within 1.5x of
# the lowest seen
ms_settle() {
	local end=$((SECONDS + SETTLE))
	while :; do
		RB=$(ms_rtt); ms_seen "$RB"
		[ -z "$RB" ] && return
		[ "$RB" -le $((RTT_MIN * 3 / 2)) ] && return
		[ $SECONDS -ge $end ] && return
		sleep 2
	done
}
