#!/bin/bash
# Ring all-reduce over tcp on 2, 3 and 4 local nodes: #wrong = 0 for every
# dtype x op x (out-of-place, in-place) x odd and even counts (incl. 0, 1,
# counts below the node count), with tiny chunks (many pipelined chunks per
# block) and 2-3 channels. The bench checks every element against the exact
# expected value and sums the errors over all nodes.
. "$ZBMD_ROOT/tests/common/tap.sh"
Z=$ZBMD_BUILD/bin/zbmd
. "$ZBMD_ROOT/tests/common/local.sh"   # drop_kept
plan 37
COUNTS=0,1,2,3,5,17,256,1001,4097,30000
# up to [coll] small_max_kb (default 4) an all-reduce is an all-gather and a
# local reduction; "3r" runs 3 nodes with it off, so small counts take the
# ring too
for n in 2 3 4 3r; do
	xs=""; [ $n = 3r ] && { n=3; xs="--set coll.small_max_kb=0"; }
	out=$("$Z" local --nodes $n --set coll.chunk_kb=1 --set coll.channels=$((n - 1 > 1 ? 3 : 2)) $xs \
		-- bench allreduce -N $COUNTS -d all -o all -n 1 -w 1 2>/tmp/zbcoll-err.$$)
	rc=$?
	[ $rc -eq 0 ] || { diag "exit $rc"; sed 's/^/# /' /tmp/zbcoll-err.$$; }
	ok $rc "$n nodes${xs:+ ($xs)}: bench exits 0"
	rows=$(echo "$out" | awk '!/^#/ && NF == 12' | wc -l)
	bad=$(echo "$out" | awk '!/^#/ && NF == 12 && ($8 != 0 || $12 != 0)' | wc -l)
	[ "$rows" -eq 300 ] && [ "$bad" -eq 0 ] && echo "$out" | grep -q "Out of bounds values : 0 OK"
	ok $? "$n nodes${xs:+ ($xs)}: 6 dtypes x 5 ops x 10 counts, out-of-place and in-place: all #wrong = 0 ($rows rows, $bad bad)"
done
# Larger buffers, several chunks per block, default chunk size.
out=$("$Z" local --nodes 4 -- bench allreduce -b 1M -e 4M -f 4 -d float -o sum -n 2 -w 1 --json /tmp/zbcoll-$$.json --plot /tmp/zbcoll-$$.png 2>/dev/null)
ok $? "4 nodes, 1-4 MiB float sum"
echo "$out" | grep -q "nodes 4, rank 0 (node 0), transport tcp" && echo "$out" | grep -q "Avg bus bandwidth"
ok $? "header names the cluster; avg bus bandwidth printed"
python3 -c "import json,sys; d=json.load(open('/tmp/zbcoll-$$.json')); r=d['results']; sys.exit(0 if len(r)==2 and r[0]['size']==1048576 and r[0]['out_of_place']['wrong']==0 and d['cluster']['nodes']==4 else 1)"
ok $? "--json writes the same figures"
[ "$(head -c 4 /tmp/zbcoll-$$.png 2>/dev/null | od -An -c | tr -d ' ')" = "211PNG" ]
ok $? "--plot draws a PNG with gnuplot"
rm -f /tmp/zbcoll-$$.json /tmp/zbcoll-$$.png /tmp/zbcoll-err.$$
# --json on a file system that fills up: the old results stay whole, the
# error says why (the file was truncated first, and half written)
if [ "$(id -u)" = 0 ] && mkdir -p /tmp/zbcoll-full.$$ && mount -t tmpfs -o size=64k tmpfs /tmp/zbcoll-full.$$; then
	echo OLD >/tmp/zbcoll-full.$$/r.json
	dd if=/dev/zero of=/tmp/zbcoll-full.$$/fill bs=4k count=64 2>/dev/null
	"$Z" local --nodes 2 -- bench allreduce -N 1000 -n 1 -w 1 -d all -o all \
		--json /tmp/zbcoll-full.$$/r.json >/dev/null 2>/tmp/zbcoll-err.$$; rc=$?
	[ $rc -ne 0 ] && [ "$(cat /tmp/zbcoll-full.$$/r.json)" = OLD ] &&
		grep -q "writing /tmp/zbcoll-full.$$/r.json: No space left on device" /tmp/zbcoll-err.$$ &&
		[ "$(ls /tmp/zbcoll-full.$$)" = "$(printf 'fill\nr.json')" ]
	ok $? "--json to a full file system: exit $rc saying why, the old file whole, no temporary left" ||
		diag "$(head -3 /tmp/zbcoll-err.$$; ls /tmp/zbcoll-full.$$)"
	drop_kept /tmp/zbcoll-err.$$
	umount /tmp/zbcoll-full.$$; rmdir /tmp/zbcoll-full.$$
else
	ok 0 "# SKIP --json to a full file system: needs root (a small tmpfs)"
fi
"$Z" bench allreduce -c x.ini -b 1 -e 1M -f 1 -i 1 >/dev/null 2>/tmp/zbcoll-err.$$; rc=$?
[ $rc -eq 2 ] && grep -q "more than 256 sizes: take a larger step" /tmp/zbcoll-err.$$
ok $? "a sweep of more than 256 sizes: exit 2 (it was cut at 256 without a word)"
# -f 1 steps by -i bytes (nccl-tests' default 1M); -i 0 is refused (it
# doubled the size)
"$Z" bench allreduce -c x.ini -b 1M -e 3M -f 1 -i 0 >/dev/null 2>/tmp/zbcoll-err.$$; rc=$?
[ $rc -eq 2 ] && grep -q "bad value '0' for -i/--stepbytes (expected a whole number of bytes from 1" /tmp/zbcoll-err.$$
ok $? "-i 0: exit 2 naming what it takes ($rc)"
out=$("$Z" local --nodes 2 -- bench allreduce -b 1M -e 3M -f 1 -n 1 -w 0 2>/dev/null)
[ "$(echo "$out" | awk '!/^#/ && NF == 12 { printf "%s ", $1 }')" = "1048576 2097152 3145728 " ] &&
	echo "$out" | grep -q "step: 1048576(bytes)"
ok $? "-f 1 without -i: 1, 2, 3 MiB (steps of 1 MiB)"
# The check finds what it is there for (ZBMD_BENCH_FAULT puts one defect
# into the checked all-reduce of one node): a rank whose data counted
# twice (another's left out: for sum and avg, ranks 1..n-1 once sent the
# same values), a result moved by 12 elements (the values once repeated
# every 12), a byte written after or before the result, a send buffer
# changed. Every op, out of place and in place; exit 1, #wrong in each row.
bad=0
for f in 2:same-data 1:shift=12 1:overrun 2:underrun 1:src; do
	out=$(ZBMD_BENCH_FAULT=$f "$Z" local --nodes 3 -- bench allreduce -N 1001 -d float -o all \
		-n 1 -w 0 2>/tmp/zbcoll-err.$$); rc=$?
	# src: only out of place has a send buffer of its own
	rows=$(echo "$out" | awk -v f=$f '!/^#/ && NF == 12 && $8 > 0 && ($12 > 0 || f ~ /src/)' | wc -l)
	[ $rc -eq 1 ] && [ "$rows" -eq 5 ] && ! echo "$out" | grep -q "Out of bounds values : 0 OK" ||
		{ bad=1; diag "$f: exit $rc, $rows of 5 rows with #wrong > 0: $(echo "$out" | awk '!/^#/ && NF == 12 {print $4, $8, $12}' | tr '\n' ' ')"; }
	drop_kept /tmp/zbcoll-err.$$   # a failed run keeps its configs and logs
done
ok $bad "a defect put into one node's checked all-reduce shows in #wrong in every row, exit 1 (same data, result shifted 12, overrun, underrun, send buffer changed)"
ZBMD_BENCH_FAULT=2:nonsense "$Z" local --nodes 2 -- bench allreduce -N 1 >/dev/null 2>/tmp/zbcoll-err.$$; rc=$?
[ $rc -eq 2 ] && grep -q "bad ZBMD_BENCH_FAULT '2:nonsense'" /tmp/zbcoll-err.$$
ok $? "ZBMD_BENCH_FAULT it does not know: exit 2 saying so ($rc)"
# Bad input: clear errors, exit 2.
"$Z" bench allreduce -c /nonexistent.ini >/dev/null 2>/tmp/zbcoll-err.$$; rc=$?
[ $rc -eq 2 ] && grep -q "nonexistent" /tmp/zbcoll-err.$$
ok $? "missing config: exit 2 naming the file"
"$Z" local --nodes 2 --link carrier-pigeon -- bench allreduce >/dev/null 2>/tmp/zbcoll-err.$$; rc=$?
[ $rc -eq 2 ] && grep -q "unknown --link 'carrier-pigeon' (tcp, veth, memif)" /tmp/zbcoll-err.$$
ok $? "--link of no such kind: exit 2 naming the links (memif/veth: tests/dataplane/test_local_dpdk.sh)"
bad=0
for a in "-d nosuch" "-o nosuch" "-b 1X" "-n 0" "-b 2M -e 1M" "-N 1,x" "--bogus"; do
	"$Z" bench allreduce -c x.ini $a >/dev/null 2>/tmp/zbcoll-err.$$
	rc=$?; [ $rc -eq 2 ] && [ -s /tmp/zbcoll-err.$$ ] || { bad=1; diag "bench $a: exit $rc"; }
done
ok $bad "bad bench flags: exit 2 with a message, nothing run"
bad=0
for a in "--channels 0:--channels (expected an integer 1..64)" "--chunk-kb 0:--chunk-kb (expected" \
	 "-b 0.5:-b/--minbytes (expected a whole number of bytes" "-f 0:-f/--stepfactor (expected an integer 1..1024)" \
	 "--check 2:--check (expected 0 or 1)" "-c :-c/--config (expected a node config file"; do
	"$Z" bench allreduce -c x.ini ${a%%:*} "" >/dev/null 2>/tmp/zbcoll-err.$$
	rc=$?; [ $rc -eq 2 ] && grep -qF -- "${a#*:}" /tmp/zbcoll-err.$$ || { bad=1; diag "bench ${a%%:*}: exit $rc: $(head -c 150 /tmp/zbcoll-err.$$)"; }
done
ok $bad "bad bench values name their option (long ones too: it read 'for --') and what is expected; -b 0.5 (a part of a byte) and -c '' refused"
bad=0
for a in "--nodes 0 -- bench allreduce" "--nodes 2 --set nodot -- x" "--nodes 2 --kill 5@1 -- x" "--nodes 2"; do
	"$Z" local $a >/dev/null 2>/tmp/zbcoll-err.$$
	rc=$?; [ $rc -eq 2 ] && [ -s /tmp/zbcoll-err.$$ ] || { bad=1; diag "local $a: exit $rc"; }
done
ok $bad "bad zbmd local flags: exit 2 with a message"
# a --set the config does not take: said once by zbmd local, exit 2, no node run
"$Z" local --nodes 2 --set coll.nosuch=1 -- bench allreduce -N 1 >/dev/null 2>/tmp/zbcoll-err.$$; rc=$?
[ $rc -eq 2 ] && grep -q "unknown key 'nosuch' in \[coll\]" /tmp/zbcoll-err.$$ &&
	[ "$(grep -c "does not load" /tmp/zbcoll-err.$$)" = 1 ] && ! grep -q "exited with status" /tmp/zbcoll-err.$$
ok $? "zbmd local --set coll.nosuch=1: the config error once, exit 2 ($rc), no node started"
# --set values reach the nodes' files as given: quoted where a bare value
# would read back otherwise (a leading '#' made an empty value before);
# values the syntax cannot hold are refused up front
show=/tmp/zbcoll-show.$$
printf '#!/bin/sh\nwhile [ $# -gt 1 ]; do [ "$1" = --config ] && exec "%s" check-config "$2"; shift; done\nexit 1\n' "$Z" >$show
chmod +x $show
out=$("$Z" local --nodes 2 --set 'control.raft_dir=#zb-raft' --set 'eal.extra_args= --no-telemetry' \
	-- $show 2>/tmp/zbcoll-err.$$); rc=$?
[ $rc -eq 0 ] && echo "$out" | grep -qx 'raft_dir = "#zb-raft"' &&
	echo "$out" | grep -qx 'extra_args = " --no-telemetry"'
ok $? "--set values with a leading '#' or blank reach the nodes intact (exit $rc)"
bad=0
for a in 'eal.extra_args=--a" ;b' "eal.extra_args=$(printf 'a\nb')" "$(printf 'eal\n.x=1')" 'eal.extra args=1'; do
	"$Z" local --nodes 2 --set "$a" -- $show >/dev/null 2>/tmp/zbcoll-err.$$
	rc=$?; [ $rc -eq 2 ] && grep -q "bad --set" /tmp/zbcoll-err.$$ || { bad=1; diag "--set '$a': exit $rc"; }
done
ok $bad "--set values a config file cannot hold ('\" ;', a line break) and names with blanks: exit 2, said why"
bad=0
for a in 'node.id=5:writes \[node\] for each node' 'node.name=x:writes \[node\]' \
	 "gpu.backend=$(printf 'x%.0s' $(seq 200)):longer than zbmd local takes"; do
	"$Z" local --nodes 2 --set "${a%%:*}" -- $show >/dev/null 2>/tmp/zbcoll-err.$$
	rc=$?; [ $rc -eq 2 ] && grep -q "bad --set .*${a#*:}" /tmp/zbcoll-err.$$ || { bad=1; diag "--set '${a:0:40}': exit $rc"; }
done
for a in seed=-1 drop=nan reorder=-0.1 dup=1.5; do
	"$Z" local --nodes 2 --link memif --fault "$a" -- $show >/dev/null 2>/tmp/zbcoll-err.$$
	rc=$?; [ $rc -eq 2 ] && grep -q "bad --fault '$a'" /tmp/zbcoll-err.$$ || { bad=1; diag "--fault '$a': exit $rc"; }
done
rm -f $show
ok $bad "--set node.* (written per node), an over-long value, --fault seed=-1 and rates outside 0..1 or NaN: exit 2, said why (node.* was dropped in silence, seed=-1 and NaN taken)"
# a command every node refuses is the user's error: exit 2, nothing kept,
# also where the memif nodes start one after the other (the first refuses
# before the second starts) and where the program cannot be run
bad=0
for a in "--link memif -- bench allreduce -b 1X" "-- bench allreduce --provider bogus -n 1" \
	 "--link memif -- nosuchcmd" "-- /nonexistent-$$/prog"; do
	timeout 120 "$Z" local --nodes 2 $a >/dev/null 2>/tmp/zbcoll-err.$$; rc=$?
	[ $rc -eq 2 ] && ! grep -q 'kept in' /tmp/zbcoll-err.$$ || { bad=1; diag "local $a: exit $rc"; }
	drop_kept /tmp/zbcoll-err.$$
done
ok $bad "a command the nodes refuse (a bad flag over memif, an unknown provider or command, no such program): exit 2, nothing kept"
# the node's config goes right after the subcommand's words: a trailing flag
# without its value is the parser's error, not "--config" taken as the value
"$Z" local --nodes 2 -- bench allreduce --json >/dev/null 2>/tmp/zbcoll-err.$$; rc=$?
[ $rc -eq 2 ] && grep -q "zbmd bench allreduce: --json needs a value" /tmp/zbcoll-err.$$ &&
	! grep -q "unexpected argument" /tmp/zbcoll-err.$$
ok $? "zbmd local -- bench allreduce --json (no file): the flag's own error, exit $rc"
drop_kept /tmp/zbcoll-err.$$
# outputs that could not be written at the end are refused before the sweep
bad=0
for a in "--json /nonexistent-$$/x.json" "--plot /nonexistent-$$/x.png" "--json /tmp"; do
	out=$("$Z" local --nodes 2 -- bench allreduce $a -N 1 -n 1 -w 1 2>/tmp/zbcoll-err.$$); rc=$?
	{ [ $rc -eq 2 ] && grep -q "zbmd bench allreduce: ${a%% *} ${a#* }: " /tmp/zbcoll-err.$$ &&
		! echo "$out" | grep -q 'float' && ! grep -q 'kept in' /tmp/zbcoll-err.$$; } ||
		{ bad=1; diag "$a: exit $rc"; sed 's/^/# /' /tmp/zbcoll-err.$$; }
done
ok $bad "--json/--plot where nothing can be written: exit 2 before any row, the path named, nothing kept"
mkdir -p /tmp/zbcoll-path.$$
PATH=/tmp/zbcoll-path.$$ "$Z" bench allreduce -c /nonexistent.ini --plot /tmp/zbcoll-$$.png >/dev/null 2>/tmp/zbcoll-err.$$; rc=$?
[ $rc -eq 2 ] && grep -q -- "--plot needs gnuplot" /tmp/zbcoll-err.$$
ok $? "--plot without gnuplot on PATH: exit 2 saying so ($rc)"
# a plot that fails at the end (a gnuplot that exits 1): the table is
# printed, the failure said, exit non-zero
printf '#!/bin/sh\ncat >/dev/null\nexit 1\n' >/tmp/zbcoll-path.$$/gnuplot
chmod +x /tmp/zbcoll-path.$$/gnuplot
out=$(PATH=/tmp/zbcoll-path.$$:$PATH "$Z" local --nodes 2 -- bench allreduce -N 1 -n 1 -w 1 --plot /tmp/zbcoll-$$.png 2>/tmp/zbcoll-err.$$); rc=$?
[ $rc -ne 0 ] && echo "$out" | grep -q 'Avg bus bandwidth' &&
	grep -q "plotting /tmp/zbcoll-$$.png with gnuplot failed" /tmp/zbcoll-err.$$
ok $? "--plot failing at the end: the table printed, the failure said, exit $rc"
drop_kept /tmp/zbcoll-err.$$
# a node that does not end after the others finished (here rank 0 in a
# gnuplot that never returns) is stopped within the bound: zbmd local
# waited for it for ever
printf '#!/bin/sh\nexec sleep 60\n' >/tmp/zbcoll-path.$$/gnuplot
t0=$(date +%s%N)
PATH=/tmp/zbcoll-path.$$:$PATH timeout 50 "$Z" local --nodes 2 -- bench allreduce -N 1 -n 1 -w 1 \
	--plot /tmp/zbcoll-$$.png >/dev/null 2>/tmp/zbcoll-err.$$; rc=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
[ $rc -eq 1 ] && [ $ms -lt 30000 ] &&
	grep -q "node 1 finished [0-9]* ms ago and 1 node(s) (0) still run (stuck" /tmp/zbcoll-err.$$
ok $? "a node still running well after the others finished is stopped: exit $rc after $ms ms, said which"
left=$(ls -d /tmp/zbmd-plot-* 2>/dev/null | wc -l)
[ "$left" -eq 0 ]; ok $? "the node stopped mid-plot left no plot data behind ($left file(s); the data goes inline to gnuplot)"
[ $rc -eq 1 ] || diag "$(tail -3 /tmp/zbcoll-err.$$)"
drop_kept /tmp/zbcoll-err.$$
rm -rf /tmp/zbcoll-path.$$ /tmp/zbcoll-$$.png
# odd but legal output paths: a quote goes through to gnuplot; a control
# character is refused up front
q="/tmp/zbcoll-it's-$$.png"
"$Z" local --nodes 2 -- bench allreduce -N 1000 -n 1 -w 1 --plot "$q" >/dev/null 2>/tmp/zbcoll-err.$$; rc=$?
[ $rc -eq 0 ] && file "$q" | grep -q 'PNG image' &&
	{ "$Z" bench allreduce -c x.ini --json "$(printf '/tmp/a\nb')" 2>/tmp/zbcoll-err.$$; [ $? -eq 2 ]; } &&
	grep -q 'control character' /tmp/zbcoll-err.$$
ok $? "--plot to a path with a quote draws it (exit $rc); a path with a newline: exit 2"
rm -f "$q"
# a plot of one size (the default -b 32M -e 32M is one) or of one bus
# bandwidth (0 on one node): gnuplot said "Warning: empty x range" / "empty
# y range" on stderr, under the table; the ranges are given now
bad=0
for a in "--nodes 2 -- bench allreduce -N 1000" "--nodes 1 -- bench allreduce -b 4K -e 8K"; do
	"$Z" local $a -n 1 -w 0 --plot /tmp/zbcoll-$$.png >/dev/null 2>/tmp/zbcoll-err.$$; rc=$?
	{ [ $rc -eq 0 ] && file /tmp/zbcoll-$$.png | grep -q 'PNG image' &&
	  ! grep -qi "warning\|gnuplot" /tmp/zbcoll-err.$$; } || { bad=1; diag "$a: exit $rc: $(head -2 /tmp/zbcoll-err.$$)"; }
	rm -f /tmp/zbcoll-$$.png
done
ok $bad "--plot of one size, and on one node (busbw 0): drawn, no gnuplot warning on stderr (empty x / y range)"
# a qdisc tc does not take, or with shell words in it: said before any
# namespace is built, exit 2, nothing left behind
if [ "$(id -u)" = 0 ]; then
	bad=0
	for a in "--netem:garbage:tc does not take it: What is" "--qdisc:nosuchq 1:tc does not take it" \
		 "--netem:loss 1%; true:only tc's words go there" "--qdisc:tbf \$(true):only tc's words go there" \
		 "--qdisc: :--qdisc is empty" "--netem: :--netem is empty" "--qdisc:nosuchqdisc:has no qdisc 'nosuchqdisc' (no sch_nosuchqdisc module, or no qdisc of that name"; do
		IFS=: read -r f spec want <<<"$a"
		"$Z" local --nodes 2 "$f" "$spec" -- bench allreduce -N 1 >/dev/null 2>/tmp/zbcoll-err.$$; rc=$?
		[ $rc -eq 2 ] && grep -qF -- "$want" /tmp/zbcoll-err.$$ && ! grep -q 'setting up namespaces' /tmp/zbcoll-err.$$ ||
			{ bad=1; diag "$f '$spec': exit $rc: $(head -1 /tmp/zbcoll-err.$$)"; }
	done
	left=$(ip netns list | grep -c '^zbcoll-.*-probe' || true)
	ok $([ $bad -eq 0 ] && [ "$left" -eq 0 ]; echo $?) "--netem/--qdisc that tc refuses or with shell words: exit 2 before any set-up, the reason said, no namespace left ($left)"
else
	ok 0 "# SKIP --netem/--qdisc probes need root (namespaces)"
fi
drop_kept /tmp/zbcoll-err.$$
rm -f /tmp/zbcoll-err.$$
done_testing
