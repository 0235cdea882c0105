#!/bin/bash
# The tcp provider's congestion control ([transport] tcp_congestion): the
# sockets of a running 2-node all-reduce over tcp use the configured
# algorithm (cubic by default), reno when asked, the system's default for "",
# and reno with a clear message for one the kernel does not have. Read from
# the kernel's own view of the sockets (ss -i).
. "$ZBMD_ROOT/tests/common/tap.sh"
Z=$ZBMD_BUILD/bin/zbmd
plan 4
E=$(mktemp /tmp/zbcc.XXXXXX)
LP=
trap '[ -n "$LP" ] && kill -INT $LP 2>/dev/null; rm -f $E $E.cc' EXIT

if ! command -v ss >/dev/null; then
	for i in 1 2 3 4; do ok 0 "# SKIP no ss (iproute2)"; done
	done_testing; exit
fi
avail=/proc/sys/net/ipv4/tcp_available_congestion_control
allowed=/proc/sys/net/ipv4/tcp_allowed_congestion_control
# what "cubic" gives here: cubic where the kernel has it and may give it
# to this process, else the fallback
want_cubic=reno
grep -qw cubic $avail && { [ "$(id -u)" = 0 ] || grep -qw cubic $allowed; } && want_cubic=cubic

# ccs ARGS...: start a 2-node tcp all-reduce loop (bounded: it ends on its
# own within ~30 s), write the congestion control of each of its
# established sockets to $C (one name per line), stop it. In this shell, not
# a subshell, so that the EXIT trap stops a run the test leaves early.
C=$E.cc
ccs() {
	"$Z" local --nodes 2 "$@" -- bench allreduce -b 64K -e 64K -n 300000 -w 0 \
		>/dev/null 2>$E &
	LP=$!
	local i k
	: >$C
	for i in $(seq 100); do
		sleep 0.2
		for k in $(pgrep -P $LP); do
			ss -tnpiH state established | grep -A1 "pid=$k," |
				awk '!/users:/ && NF && $1 != "--" { print $1 }'
		done >$C
		[ "$(grep -c . $C)" -ge 8 ] && break
	done
	kill -INT $LP 2>/dev/null; wait $LP 2>/dev/null; LP=
}
# all NAME LIST: every line of LIST is NAME (and there are 8: 2 nodes x
# 2 channels x a send and a receive connection)
all() { [ "$(echo "$2" | grep -c .)" -ge 8 ] && ! echo "$2" | grep -qvx "$1"; }
summary() { echo "$1" | sort | uniq -c | awk '{ printf "%s%s x%s", s, $2, $1; s = ", " }'; }

ccs; l=$(cat $C); all $want_cubic "$l"
ok $? "default: every socket uses $want_cubic ($(summary "$l"))"
ccs --set transport.tcp_congestion=reno; l=$(cat $C); all reno "$l"
ok $? "tcp_congestion = reno: every socket uses reno ($(summary "$l"))"
sys=$(cat /proc/sys/net/ipv4/tcp_congestion_control)
ccs --set transport.tcp_congestion=; l=$(cat $C); all "$sys" "$l"
ok $? "tcp_congestion = \"\": the system's default, $sys ($(summary "$l"))"
ccs --set transport.tcp_congestion=nosuchcc; l=$(cat $C); all reno "$l" &&
	grep -q "congestion control 'nosuchcc' refused (No such file or directory); using reno" $E
ok $? "an algorithm the kernel lacks: reno, and it says so ($(summary "$l"))"
