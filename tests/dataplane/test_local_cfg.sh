#!/usr/bin/env bash
# What `zbmd local --link memif` gives its nodes (the cluster script's
# configs with zbmd local's defaults merged in), read back by a program run as
# the node command: 9000-byte frames, 768 MB, 256-slot rings for frames over
# 2 KB; the environment overrides each; 1500-byte frames keep the PMD's ring.
# Where the CPUs are, each node its own two (--cpus-per-node) polling, else
# all on CPUs 0-1; --keep keeps the nodes' configs; bad flags are refused.
. "$ZBMD_ROOT/tests/common/tap.sh"
. "$ZBMD_ROOT/tests/dataplane/lib.sh"
trap cleanup_lib EXIT
[ "$(id -u)" -eq 0 ] || skip_all "zbmd local --link memif needs root"
plan 47

# the node command: say ready (zbmd local starts node i once node i-1 is),
# then print the config keys of interest
cat >"$T/show.sh" <<'EOF'
#!/bin/sh
[ -n "$ZBMD_READY_FILE" ] && touch "$ZBMD_READY_FILE"
grep -E '^(mtu|memory_mb|vdev|lcores|idle|extra_args) =' "$2"
EOF
chmod +x "$T/show.sh"

show() {  # ENV... : node 0's keys into $T/out (NODES nodes, default 2; FLAGS)
	env "$@" "$ZBMD" local --nodes "${NODES:-2}" --link memif ${FLAGS:-} -- "$T/show.sh" \
		>"$T/out" 2>"$T/err"
}

show; ok $? "zbmd local runs the node command on 2 memif nodes" ||
	diag "$(tail -3 "$T/err")"
grep -qx 'mtu = 9000' "$T/out"; ok $? "memif default: mtu 9000"
grep -qx 'memory_mb = 768' "$T/out"; ok $? "memif default: 768 MB per node"
grep -q '^vdev = net_memif0,.*,bsize=9216,rsize=8$' "$T/out"
ok $? "jumbo frames: one 9 KB buffer per slot, 256-slot rings" || diag "$(grep vdev "$T/out")"

show ZBN_MTU=1500
grep -qx 'mtu = 1500' "$T/out" && grep -qx 'memory_mb = 256' "$T/out"
ok $? "ZBN_MTU=1500: 1500-byte frames, the scripts' 256 MB"
grep -q '^vdev = net_memif0,.*,bsize=2048,rsize=8$' "$T/out"
ok $? "1500-byte frames: 2 KB buffers, 256-slot rings" || diag "$(grep vdev "$T/out")"

show ZBN_MEMIF_RSIZE=9 ZBN_MEMORY_MB=900
grep -q '^vdev = net_memif0,.*,rsize=9$' "$T/out"; ok $? "ZBN_MEMIF_RSIZE overrides the ring size"
grep -qx 'memory_mb = 900' "$T/out"; ok $? "ZBN_MEMORY_MB overrides the memory"

show ZBN_MTU=4000
grep -qx 'mtu = 4000' "$T/out" && grep -qx 'memory_mb = 768' "$T/out" &&
	grep -q '^vdev = net_memif0,.*,bsize=4096,rsize=8$' "$T/out"
ok $? "ZBN_MTU=4000: 4 KB buffers, 256 slots, 768 MB" || diag "$(cat "$T/out")"

rm_kept() {  # the logs directory a failed zbmd local kept, named in $T/err
	sed -n 's|.*kept in \(/tmp/zbmd-local-[A-Za-z0-9]*\).*|\1|p' "$T/err" | xargs -r rm -rf
}

# CPU placement: a node alone has 2 CPUs to itself on any machine here
NODES=1 show
grep -Eqx 'lcores = [0-9]+,[0-9]+' "$T/out" && grep -qx 'idle = poll' "$T/out" &&
	grep -Eqx 'extra_args = ?' "$T/out"
ok $? "a node with 2 CPUs to itself: its own lcores, pure polling, no --main-lcore" ||
	diag "$(cat "$T/out" "$T/err")"
NODES=1 FLAGS="--cpus-per-node 0" show
grep -qx 'lcores = 0-1' "$T/out" && grep -qx 'idle = adaptive' "$T/out"
ok $? "--cpus-per-node 0: CPUs 0-1 shared, adaptive idle" || diag "$(cat "$T/out" "$T/err")"
show   # 2 nodes: their own CPUs only where there are 4
if [ "$(nproc)" -ge 4 ]; then
	grep -Eqx 'lcores = [0-9]+,[0-9]+' "$T/out" && grep -qx 'idle = poll' "$T/out"
else
	grep -qx 'lcores = 0-1' "$T/out" && grep -qx 'idle = adaptive' "$T/out"
fi
ok $? "2 nodes on $(nproc) CPUs: auto placement" || diag "$(cat "$T/out" "$T/err")"
NODES=1 FLAGS="--keep" show
d=$(sed -n 's|.*kept in \(/tmp/zbmd-local-[A-Za-z0-9]*\).*|\1|p' "$T/err")
[ -n "$d" ] && [ -s "$d/node1.ini" ]
ok $? "--keep keeps a memif node's config (cluster.sh down removed it)"; rm_kept
for a in "--cpus-per-node 1" "--cpus-per-node 2x" "--cpus-per-node 64 --nodes 9" \
	 "--cpus-per-node 2 --link tcp"; do
	"$ZBMD" local --link memif --nodes 2 $a -- /bin/true >/dev/null 2>"$T/err"
	[ $? -eq 2 ] && grep -q "cpus-per-node" "$T/err"
	ok $? "$a: exit 2 saying why" || diag "$(cat "$T/err")"
done
ZBN_LCORES=0-1 "$ZBMD" local --nodes 1 --link memif --cpus-per-node 2 -- /bin/true \
	>/dev/null 2>"$T/err"
[ $? -eq 2 ] && grep -q "both place the nodes" "$T/err"
ok $? "--cpus-per-node with ZBN_LCORES: exit 2 (two placements)" || diag "$(cat "$T/err")"

# a node config too long to merge our keys into: refused, not cut short
ZBN_EXTRA_INI="$(for i in $(seq 600); do echo "; c$i"; done)" \
	"$ZBMD" local --nodes 2 --link memif -- /bin/true >/dev/null 2>"$T/err"
[ $? -ne 0 ] && grep -q "more than 512 lines" "$T/err"
ok $? "a 600-line node config: refused saying why (it was cut at 512 lines)" ||
	diag "$(cat "$T/err")"; rm_kept
"$ZBMD" local --nodes 2 -- /bin/echo $(seq 130) >/dev/null 2>"$T/err"
[ $? -eq 2 ] && grep -q "the command has 131 words, at most 120" "$T/err"
ok $? "a node command of 131 words: exit 2 (words past 124 were dropped)"

# bad input to zbmd local and the benchmark: refused, nothing run
(cd "$T" && "$ZBMD" local --nodes 2 --link tcp -- bench allreduce -b 1K -e 1K -n 1 -w 0 \
	--plot '|touch INJECTED' >/dev/null 2>"$T/err")
[ ! -e "$T/INJECTED" ] && grep -q "would run a command" "$T/err"
ok $? "--plot '|cmd' is refused, not handed to gnuplot as a pipe"; rm_kept
"$ZBMD" local --nodes 2 --link tcp -- bench allreduce -b nan -e nan >/dev/null 2>"$T/err"
grep -q "bad value 'nan' for -b" "$T/err"; ok $? "-b nan is a bad value"; rm_kept
"$ZBMD" local --nodes 2 --kill 1@18446744073710 -- bench allreduce >/dev/null 2>"$T/err"
[ $? -eq 2 ] && grep -q "bad --kill" "$T/err"
ok $? "--kill NODE@MS past a day is exit 2 (it wrapped and killed at once)"
bad=0
for a in "1@up+" "1@up+-5" "1@up-5" "1@ up+5" "1@up+ 5" "1@+5" "1@started+" \
	"1@started-5" "1@started+-5" "1@started5" "1@start+5" "1@up+started+5"; do
	"$ZBMD" local --nodes 2 --kill "$a" -- /bin/true >/dev/null 2>"$T/err"
	{ [ $? -eq 2 ] && grep -qF "bad --kill '$a' (want NODE@MS, NODE@started+MS or NODE@up+MS)" "$T/err"; } ||
		{ bad=1; diag "--kill '$a': $(head -1 "$T/err")"; }
done
ok $bad "--kill with a malformed up+MS or started+MS is exit 2, the flag named"
# --kill N@up+MS counts from every node up (its ready file there): a node
# command that says it is up and then runs 3 s is killed; one that never
# says so is not, and zbmd local tells
cat >"$T/up.sh" <<'EOF'
#!/bin/sh
[ "$SAY_UP" = 1 ] && [ -n "$ZBMD_READY_FILE" ] && touch "$ZBMD_READY_FILE"
sleep 3
EOF
chmod +x "$T/up.sh"
SAY_UP=1 "$ZBMD" local --nodes 2 --kill 1@up+300 -- "$T/up.sh" >/dev/null 2>"$T/err"
rc=$?
[ $rc -eq 1 ] && grep -q "every node up [0-9]* ms after the start" "$T/err" &&
	grep -qE "killed node 1 with kill -9 [0-9]+ ms after the start, (3[0-9][0-9]|4[0-4][0-9]) ms after every node was up" "$T/err"
ok $? "--kill 1@up+300: node 1 killed 300 ms after every node said it was up (exit $rc)" ||
	diag "$(grep 'zbmd local' "$T/err" | head -4)"
rm_kept
SAY_UP=0 "$ZBMD" local --nodes 2 --kill 1@up+300 -- "$T/up.sh" >/dev/null 2>"$T/err"
rc=$?
[ $rc -eq 0 ] && grep -q "node 1 was not killed: not every node came up" "$T/err" &&
	! grep -q "killed node" "$T/err"
ok $? "--kill 1@up+300 where no node says it is up: not killed, and zbmd local says so (exit $rc)" ||
	diag "$(grep 'zbmd local' "$T/err" | head -4)"
rm_kept
# --kill N@started+MS counts from the last node's launch, up or not
SAY_UP=0 "$ZBMD" local --nodes 2 --kill 0@started+300 -- "$T/up.sh" >/dev/null 2>"$T/err"
rc=$?
[ $rc -eq 1 ] && ! grep -q "every node up" "$T/err" &&
	grep -qE "killed node 0 with kill -9 [0-9]+ ms after the start, (3[0-9][0-9]|4[0-4][0-9]) ms after the last node was launched" "$T/err" &&
	grep -q "node 0 killed by signal 9" "$T/err"
ok $? "--kill 0@started+300: node 0 killed 300 ms after the last node was launched, none up (exit $rc)" ||
	diag "$(grep 'zbmd local' "$T/err" | head -4)"
perl -e '$SIG{CHLD}="IGNORE"; exec @ARGV' "$ZBMD" local --nodes 2 --link tcp -- /bin/sh -c "exit 3" \
	>/dev/null 2>"$T/err"
[ $? -ne 0 ]; ok $? "nodes that fail fail zbmd local, with SIGCHLD inherited ignored"; rm_kept

# the last -d / -o wins, `all` or not (a later one could not undo `all`: 30
# rows); -c 1 (the check) still passes through to the nodes
"$ZBMD" local --nodes 2 -- bench allreduce -b 1K -e 1K -n 1 -w 0 -c 1 -d all -d int32 \
	-o all -o max >"$T/out" 2>"$T/err"; rc=$?
rows=$(awk '!/^#/ && NF == 12 {print $3, $4}' "$T/out")
[ $rc -eq 0 ] && [ "$rows" = "int32 max" ]
ok $? "-d all -d int32 -o all -o max: one row, int32 max (exit $rc)" ||
	diag "$(echo "$rows" | head -3 | tr '\n' ' '; head -2 "$T/err")"; rm_kept

# refused up front by zbmd local (exit 2, nothing started, no logs kept):
# each case its own flags, the words expected on stderr
refused() {  # WHAT EXPECT ARGS...
	local what=$1 want=$2; shift 2
	"$ZBMD" local "$@" >/dev/null 2>"$T/err"; local rc=$?
	if [ $rc -eq 2 ] && grep -qF -- "$want" "$T/err" && ! grep -q "kept in" "$T/err"; then
		ok 0 "$what: exit 2"
	else
		ok 1 "$what: exit 2"; diag "exit $rc: $(grep -v '^ ' "$T/err" | head -3)"
	fi
	rm_kept
}
# zbmd run is a DPDK node: the tcp link's configs have no [eal], so every node
# took file-prefix zbmd and hugepages (exit 1 at once: "another zbmd node is
# running with file-prefix zbmd", or no hugepages reserved)
refused "run over --link tcp" "'run' starts a DPDK dataplane node: it needs --link memif or veth" \
	--nodes 2 -- run
refused "a second --kill (the first was dropped)" "one --kill per run ('0@500' is a second)" \
	--nodes 2 --kill 1@500 --kill 0@500 -- /bin/true
refused "a second --linkdown" "one --linkdown per run" \
	--nodes 2 --linkdown 1@500 --linkdown 0@500 -- /bin/true
refused "--fault '' (it ran with no faults)" "--fault is empty" \
	--nodes 2 --link memif --fault '' -- /bin/true
refused "--nodes 1 --link memif -- bench allreduce (no transport)" "--link memif needs at least 2 nodes" \
	--nodes 1 --link memif -- bench allreduce -b 1K -e 1K -n 1
refused "-- version (it said: unexpected argument '--config')" "'version' takes no --config" \
	--nodes 2 -- version
refused "-- -- bench allreduce (unknown command '--config')" "a second '--'" \
	--nodes 2 -- -- bench allreduce
refused "-- bench allreduce -c FILE (every node's config replaced)" "-c/--config $T/x.ini in the command" \
	--nodes 2 -- bench allreduce -c "$T/x.ini"
refused "--link memif with --provider tcp (30 s, then 'not up')" "--provider tcp: the nodes of --link memif run the dpdk provider" \
	--nodes 2 --link memif -- bench allreduce --provider tcp -b 1K -e 1K -n 1
refused "--link tcp with --provider dpdk (left /var/run/dpdk behind)" "--provider dpdk: the nodes of --link tcp run the tcp provider" \
	--nodes 2 --link tcp -- bench allreduce --provider dpdk -b 1K -e 1K -n 1
refused "--channels 9 on memif (net provider 'dpdk' init: Invalid argument)" "bad value '9' for --channels: the dpdk provider takes 1..8" \
	--nodes 2 --link memif -- bench allreduce --channels 9 -b 1K -e 1K -n 1
refused "--set coll.channels=16 on memif" "--set coll.channels=16: the dpdk provider (--link memif) takes 1..8 channels" \
	--nodes 2 --link memif --set coll.channels=16 -- bench allreduce -b 1K -e 1K -n 1
# two lanes a node carry 8 channels each: --channels 16 runs (channels /
# lanes per lane, coll_dpdk.c), 18 is refused by the nodes (9 a lane)
ZBN_LCORES=0-2 "$ZBMD" local --nodes 2 --link memif -- bench allreduce --channels 16 \
	-b 1K -e 1K -n 1 >/dev/null 2>"$T/err"
ok $? "--channels 16 on nodes of two lanes runs (8 a lane)" || diag "$(grep -v '^ ' "$T/err" | head -3)"
rm_kept
ZBN_LCORES=0-2 "$ZBMD" local --nodes 2 --link memif -- bench allreduce --channels 18 \
	-b 1K -e 1K -n 1 >/dev/null 2>"$T/err"
[ $? -eq 2 ] && grep -qF "takes 1..17 here (at most 8 per dataplane lane, 2 lanes)" "$T/err"
ok $? "--channels 18 on nodes of two lanes: exit 2, the limit named" || diag "$(grep -v '^ ' "$T/err" | head -3)"
rm_kept
refused "--json /proc/x.json (the sweep ran, the figures were lost)" "--json /proc/zbl.json: cannot create a file in /proc" \
	--nodes 2 -- bench allreduce -b 1K -e 1K -n 1 --json /proc/zbl.json
if [ "$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)" -lt $((250 * 1024 * 1024)) ]; then
	refused "-b 64G -e 64G on 2 nodes (each allocates its buffers)" "2 nodes on this machine: 262144.0 MiB" \
		--nodes 2 -- bench allreduce -b 64G -e 64G -n 1
else
	ok 0 "# SKIP -b 64G -e 64G on 2 nodes: this machine has over 250 GiB available"
fi

# `run` on memif nodes: a node of zbmd run says it is up (ZBMD_READY_FILE)
# once it is, so zbmd local starts the next one; `run` created no such file,
# and node 1 never started (30 s, "its dataplane was not up", exit 1)
"$ZBMD" local --nodes 3 --link memif -- run >"$T/run0" 2>"$T/err" &
lp=$!; PIDS+=($lp)
d=
for _ in $(seq 200); do
	[ -n "$d" ] || { d=$(grep -lx "$lp" /tmp/zbmd-local-*/owner 2>/dev/null | head -1); d=${d%/owner}; }
	[ -n "$d" ] && grep -q '^zbmd: ready' "$d/node2.log" 2>/dev/null && break
	kill -0 $lp 2>/dev/null || break
	sleep 0.1
done
[ -n "$d" ] && grep -q '^zbmd: ready' "$T/run0" && grep -q '^zbmd: ready' "$d/node1.log" &&
	grep -q '^zbmd: ready' "$d/node2.log"
ok $? "zbmd local --link memif -- run: all 3 nodes up within 20 s" || diag "$(grep 'zbmd local' "$T/err")"
kill -INT $lp; wait_exit $lp 20; wait $lp; rc=$?
[ $rc -eq 130 ] && [ -z "$(ls -d /var/run/dpdk/zbloc$lp-* 2>/dev/null)" ] && [ ! -e "$d" ]
ok $? "... and SIGINT stops them (exit $rc), nothing of the run left"
rm_kept
