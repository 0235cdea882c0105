#!/bin/bash
# Faults on local clusters over tcp: kill -9 of one node, a link taken down
# (namespaces), loss + reordering with tc netem on veth links between
# namespaces, and Ctrl-C of `zbmd local` (everything torn down).
. "$ZBMD_ROOT/tests/common/tap.sh"
. "$ZBMD_ROOT/tests/common/local.sh"   # fault_survivors, fault_slowest
Z=$ZBMD_BUILD/bin/zbmd
plan 20
E=/tmp/zbcoll-faults.$$
P=/tmp/zbcoll-faults-pids.$$
: >$P
B=/tmp/zbcoll-faults-bin.$$
trap 'rm -f $E $P; rm -rf $B' EXIT
# `zbmd local` names its namespaces zbcoll-PID-* after its own pid. Run it as
# (zlocal ARGS) or $(zlocal ARGS): the subshell records its pid, then becomes
# zbmd, so test 12 can look for this run's namespaces only (other jobs may
# have theirs up meanwhile).
zlocal() { echo $BASHPID >>$P; exec "$Z" local "$@"; }

# 1. kill -9 of node 2 of 4 mid-run: the others fail fast, with a clear message.
(zlocal --nodes 4 --kill 2@up+800 -- bench allreduce -b 4M -e 4M -n 1000000 -w 0) >/dev/null 2>$E
rc=$?
ok $([ $rc -ne 0 ]; echo $?) "kill -9: zbmd local exits non-zero ($rc)"
n=$(fault_survivors $E)
ok $([ "$n" -eq 3 ]; echo $?) "kill -9: all 3 survivors exit with status 1 ($n)"
s=$(fault_slowest $E)
ok $([ -n "$s" ] && [ "$s" -le 5500 ]; echo $?) "kill -9: survivors out within the 5000 ms bound (slowest ${s:-?} ms)"
grep -q "peer down" $E
ok $? "kill -9: the error names the cause (peer down)"

if [ "$(id -u)" != 0 ] || ! ip netns list >/dev/null 2>&1; then
	for i in 1 2 3 4 5 6 7 8 9 10; do ok 0 "# SKIP needs root and network namespaces"; done
	done_testing; exit
fi

# 2. Link of node 1 down (no RST, no FIN): the no-progress deadline fires.
(zlocal --nodes 3 --set coll.timeout_ms=1500 --linkdown 1@up+800 -- \
	bench allreduce -b 4M -e 4M -n 1000000 -w 0) >/dev/null 2>$E
rc=$?
n=$(fault_survivors $E)
s=$(fault_slowest $E)
ok $([ $rc -ne 0 ] && [ "$n" -eq 3 ]; echo $?) "link down: every node exits with status 1 ($n)"
ok $([ -n "$s" ] && [ "$s" -le 2500 ]; echo $?) "link down: within coll.timeout_ms=1500 (+1 s) (slowest ${s:-?} ms)"
grep -q "made no progress for 1500 ms" $E
ok $? "link down: the error says what timed out"

# 3. tcp between namespaces over veth + bridge: still exact.
out=$(zlocal --nodes 3 --ns --set coll.chunk_kb=4 -- bench allreduce -N 1,2,1001,65536 -d all -o all -n 1 -w 0 2>$E)
rc=$?
bad=$(echo "$out" | awk '!/^#/ && NF == 12 && ($8 != 0 || $12 != 0)' | wc -l)
rows=$(echo "$out" | awk '!/^#/ && NF == 12' | wc -l)
ok $([ $rc -eq 0 ] && [ "$bad" -eq 0 ] && [ "$rows" -eq 120 ]; echo $?) "namespaces + veth: all dtypes x ops, #wrong = 0 ($rows rows)"

# 4a. Real packet loss without netem: a token bucket with a tiny queue on every
# node's link drops what overflows it (tail drop); TCP retransmits.
out=$(zlocal --nodes 3 --set coll.timeout_ms=20000 --qdisc "tbf rate 1gbit burst 64kb limit 64kb" -- \
	bench allreduce -N 1,1001,262144 -d float -o all -n 2 -w 0 2>$E)
rc=$?
bad=$(echo "$out" | awk '!/^#/ && NF == 12 && ($8 != 0 || $12 != 0)' | wc -l)
ok $([ $rc -eq 0 ] && [ "$bad" -eq 0 ]; echo $?) "tail-drop loss on every link (tbf, tiny queue): #wrong = 0"
drops=$(sed -n 's/.* \([0-9]*\) dropped on the nodes.*/\1/p' $E)
ok $([ "${drops:-0}" -gt 0 ]; echo $?) "... and packets really were dropped (${drops:-none})"

# 4b. netem loss 2 % + reordering on every veth.
if ip netns add zbcoll-probe-$$ 2>/dev/null && ip -n zbcoll-probe-$$ link add d0 type veth peer name d1 &&
	ip netns exec zbcoll-probe-$$ tc qdisc add dev d0 root netem loss 1% 2>/dev/null; then
	ip netns del zbcoll-probe-$$
	out=$(zlocal --nodes 3 --netem "loss 2% delay 1ms reorder 25% 50%" -- \
		bench allreduce -N 1,1001,262144 -d float -o all -n 2 -w 0 2>$E)
	rc=$?
	bad=$(echo "$out" | awk '!/^#/ && NF == 12 && ($8 != 0 || $12 != 0)' | wc -l)
	ok $([ $rc -eq 0 ] && [ "$bad" -eq 0 ]; echo $?) "netem loss 2% + reorder: #wrong = 0"
else
	ip netns del zbcoll-probe-$$ 2>/dev/null
	ok 0 "# SKIP this kernel has no sch_netem (tc qdisc netem: unknown qdisc kind)"
fi
# Ours only: the probe's and those of the runs above (zbcoll-PID-*).
mine="^zbcoll-(probe-$$|$(paste -sd '|' $P))(-| |\$)"
left=$(ip netns list | grep -E "$mine" | awk '{print $1}' | tr '\n' ' ')
ok $([ -z "$left" ]; echo $?) "no namespaces of this test's runs left behind (${left:-none}; pids $(paste -sd ' ' $P))"

# 5. Ctrl-C (SIGINT) of zbmd local mid-run: nodes and namespaces gone.
"$Z" local --nodes 3 --ns -- bench allreduce -b 4M -e 4M -n 1000000 -w 0 >/dev/null 2>$E &
lp=$!
sleep 1.5
kids=$(pgrep -P $lp | tr '\n' ' ')
kill -INT $lp
wait $lp
rc=$?
sleep 0.2
ok $([ $rc -eq 130 ]; echo $?) "SIGINT: zbmd local exits 130"
alive=0
for k in $kids; do kill -0 $k 2>/dev/null && alive=$((alive + 1)); done
nsleft=$(ip netns list | grep -c "^zbcoll-$lp-")
ok $([ -n "$kids" ] && [ $alive -eq 0 ] && [ "$nsleft" -eq 0 ]; echo $?) "SIGINT: node processes ($kids) and namespaces gone ($alive alive, $nsleft namespaces)"

# 5b. Ctrl-C while zbmd local sets the namespaces up. A tc first in PATH that
# takes a second for `qdisc add` on the device SLOW_DEV holds zbmd local in
# the step at hand: a node's qdisc (eth0), or the probe of the spec (lo, in
# the namespace zbcoll-PID-probe, before anything else is made).
mkdir -p $B
cat >$B/tc <<EOF
#!/bin/sh
case " \$* " in *" qdisc add dev \$SLOW_DEV "*) sleep 1 ;; esac
exec $(command -v tc) "\$@"
EOF
chmod +x $B/tc
# waitns PID NAME: until namespace zbcoll-PID-NAME is there (10 s at most)
waitns() { for _ in $(seq 200); do ip netns list | grep -q "^zbcoll-$1-$2\( \|$\)" && return; sleep 0.05; done; }
# SIGINT to zbmd local alone (kill -INT, a supervisor) while node 0's tc runs:
# it ran the set-up's commands with system(), which ignores SIGINT in the
# caller, so the signal was lost and the run went on to its end (exit 0)
SLOW_DEV=eth0 PATH=$B:$PATH "$Z" local --nodes 3 --qdisc "tbf rate 1gbit burst 64kb limit 64kb" -- \
	bench allreduce -b 1M -e 1M -n 2 -w 0 >/dev/null 2>$E &
lp=$!
waitns $lp 0; sleep 0.3
kill -INT $lp
wait $lp; rc=$?
ok $([ $rc -eq 130 ] && grep -q "caught signal 2 while setting up" $E; echo $?) \
	"SIGINT to zbmd local during the namespaces' set-up: exit 130, said ($rc: $(grep 'zbmd local' $E | head -2 | tr '\n' ' '))"
nsleft=$(ip netns list | grep -c "^zbcoll-$lp-")
ok $([ "$nsleft" -eq 0 ]; echo $?) "... and no namespace of it left ($nsleft)"
# ^C from the terminal (SIGINT to the whole process group) during the probe:
# the probe's shell died between its `ip netns add` and its `ip netns del`
# and zbcoll-PID-probe stayed (until a later run took it back)
SLOW_DEV=lo PATH=$B:$PATH setsid "$Z" local --nodes 3 --qdisc "tbf rate 1gbit burst 64kb limit 64kb" -- \
	bench allreduce -b 1M -e 1M -n 2 -w 0 >/dev/null 2>$E &
lp=$!
waitns $lp probe; sleep 0.3
kill -INT -- -$lp
wait $lp; rc=$?
sleep 0.2
nsleft=$(ip netns list | grep "^zbcoll-$lp-" | awk '{print $1}' | tr '\n' ' ')
ok $([ $rc -eq 130 ]; echo $?) "Ctrl-C during the qdisc probe: exit 130 ($rc)"
ok $([ -z "$nsleft" ]; echo $?) "... and no namespace left, the probe's included (${nsleft:-none})"

# 5c. ^C held down (SIGINT to the whole process group every ms) from mid-run
# through the teardown: every namespace removed, nothing of the run left. The
# teardown's shells ignored ^C only from their first command on (a trap); one
# killed before it left its namespace (16 nodes: most runs left some)
setsid "$Z" local --nodes 16 --ns -- bench allreduce -b 1M -e 1M -n 1000000 -w 0 >/dev/null 2>$E &
lp=$!
waitns $lp 15; sleep 1
while kill -INT -- -$lp 2>/dev/null; do sleep 0.001; done
wait $lp; rc=$?
sleep 0.2
nsleft=$(ip netns list | grep -c "^zbcoll-$lp-")
ok $([ $rc -eq 130 ] && [ "$nsleft" -eq 0 ]; echo $?) "^C held down through the teardown: exit 130 ($rc), no namespace left ($nsleft)"

# 6. zbmd local killed outright (SIGKILL: no teardown) mid-run: its nodes die
# with it (parent-death signal); its directory and namespaces stay until the
# next run takes them back.
"$Z" local --nodes 3 --ns -- bench allreduce -b 4M -e 4M -n 1000000 -w 0 >/dev/null 2>$E &
lp=$!
sleep 1.5
kids=$(pgrep -P $lp | tr '\n' ' ')
kill -KILL $lp
wait $lp 2>/dev/null
sleep 0.5
alive=0   # a zombie not yet reaped by its new parent does not count
for k in $kids; do ps -o stat= -p $k 2>/dev/null | grep -qv '^Z' && alive=$((alive + 1)); done
d=$(grep -lx "$lp" /tmp/zbmd-local-*/owner 2>/dev/null | head -1); d=${d%/owner}
ns=$(ip netns list | grep -c "^zbcoll-$lp-")
"$Z" local --nodes 2 -- bench allreduce -N 1 -n 1 -w 0 >/dev/null 2>$E; rc=$?
ns2=$(ip netns list | grep -c "^zbcoll-$lp-")
ok $([ -n "$kids" ] && [ $alive -eq 0 ] && [ -n "$d" ] && [ "$ns" -gt 0 ] && [ $rc -eq 0 ] &&
	[ ! -e "$d" ] && [ "$ns2" -eq 0 ] && grep -q "took back" $E; echo $?) \
	"SIGKILL: nodes gone ($alive alive), the next run took back ${d:-no dir} and $ns namespace(s) ($ns2 left, exit $rc)"
done_testing
