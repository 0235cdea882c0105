#!/bin/bash
# `zbmd train` (dataplane/train.c): data-parallel training of a linear model
# on local clusters — each node's trainer actor computes its shard's gradient
# on the GPU backend and all-reduces it through the collective service.
#  - 3 nodes over tcp and over memif: exit 0, the replicas bit-identical, the
#    loss down by more than 10^4, the weights within 1 % of the true model;
#  - a memif node killed mid-training: the survivors exit 1 within 6 s, saying
#    their gradient's all-reduce failed and why;
#  - the Vulkan backend (lavapipe here) on 2 nodes, where it is usable;
#  - bad flags: exit 2 with the flag named; --help: exit 0, usage on stdout;
#  - a backend that is not there: exit 1 saying why (or a real run on a
#    machine that has it).
. "$ZBMD_ROOT/tests/common/tap.sh"
Z=$ZBMD_BUILD/bin/zbmd
T=$(mktemp -d /tmp/zbtrain.XXXXXX)
. "$ZBMD_ROOT/tests/common/local.sh"
trap 'drop_kept "$T"/*.out; rm -rf "$T"' EXIT
plan 14

# trained NAME NODES ARGS...: zbmd local --nodes NODES ARGS -- train ...
trained() {
	local name=$1 n=$2; shift 2
	"$Z" local --nodes "$n" "$@" -- train --steps 30 --every 10 >"$T/$name.out" 2>&1
	local rc=$?
	local ratio err
	ratio=$(sed -nE 's/^# loss .* \(([0-9.e+]+)x lower\).*/\1/p' "$T/$name.out")
	err=$(sed -nE 's/.*\|w - w\*\| \/ \|w\*\| = ([0-9.e+-]+).*/\1/p' "$T/$name.out")
	[ $rc = 0 ] && grep -q "^# replicas: bit-identical on all $n nodes" "$T/$name.out" &&
		awk -v r="${ratio:-0}" -v e="${err:-1}" 'BEGIN { exit !(r > 1e4 && e < 0.01) }'
	ok $? "$name: exit $rc, replicas bit-identical, loss ${ratio:-?}x lower, |w - w*|/|w*| ${err:-?}" ||
		diag "$(grep -v 'control: on' "$T/$name.out" | tail -6)"
}

trained "tcp, 3 nodes" 3
if [ "$(id -u)" = 0 ]; then
	trained "memif, 3 nodes" 3 --link memif
	# a node killed mid-training: the survivors' trainers are told by their
	# all-reduce's completion message and exit 1, within the bound
	"$Z" local --nodes 3 --link memif --kill 2@up+1500 -- train --steps 1000000 \
		--every 1000000 >"$T/k.out" 2>&1
	rc=$?
	n=$(fault_survivors "$T/k.out")
	s=$(fault_slowest "$T/k.out")
	[ $rc = 1 ] && [ "$n" = 2 ] && [ -n "$s" ] && [ "$s" -le 6000 ] &&
		[ "$(grep -c "zbmd train: node rank [01]: step [0-9]*: the gradient's all-reduce: " "$T/k.out")" = 2 ]
	ok $? "a node killed mid-training: both survivors out with status 1 within 6 s (slowest ${s:-?} ms), each saying why: $(grep -m1 -o "the gradient's all-reduce: [^—]*" "$T/k.out")" ||
		diag "$(grep -v 'control: on' "$T/k.out" | tail -6)"
else
	for _ in 1 2; do TAP_RUN=$((TAP_RUN + 1)); echo "ok $TAP_RUN # SKIP memif nodes need root"; done
fi
if "$Z" gpu-info 2>/dev/null | grep -qE '^vulkan +usable'; then
	"$Z" local --nodes 2 -- train --steps 20 --backend vulkan >"$T/vk.out" 2>&1
	rc=$?
	[ $rc = 0 ] && grep -q '^# replicas: bit-identical on all 2 nodes' "$T/vk.out" &&
		grep -q 'GPU backend vulkan' "$T/vk.out"
	ok $? "vulkan backend, 2 nodes over tcp: exit $rc, replicas bit-identical" ||
		diag "$(tail -4 "$T/vk.out")"
else
	TAP_RUN=$((TAP_RUN + 1)); echo "ok $TAP_RUN # SKIP no usable Vulkan device here"
fi

bad=0
for a in "--steps 0" "--steps 5x" "--lr -1" "--lr 0" "--features 0" "--backend nosuch" "--bogus" "--every"; do
	"$Z" train -c /nonexistent.ini $a >/dev/null 2>"$T/e"; rc=$?
	flag=${a%% *}
	{ [ $rc = 2 ] && grep -q -- "$flag" "$T/e"; } || { bad=1; diag "'$a': exit $rc: $(head -1 "$T/e")"; }
done
ok $bad "bad flags: exit 2, the flag named"
# what was expected, and the right word: -x of -xq was said as 'train', --s
# (three options start so) as unknown
bad=0
for a in "--steps 0:bad value '0' for --steps (expected 1..1000000)" \
	 "--seed -1:bad value '-1' for --seed (expected 0..4294967295)" \
	 "--backend foo:(expected auto, cpu, cuda, hip or vulkan)" \
	 "--lr nan:(expected a number, 0 < LR <= 100)" \
	 "-xq:unknown option '-x'" "--s 3:ambiguous option '--s' (could be --samples, --steps, --seed)" \
	 "--help=1:--help takes no value (got '--help=1')"; do
	"$Z" train -c /nonexistent.ini ${a%%:*} >/dev/null 2>"$T/e"; rc=$?
	{ [ $rc = 2 ] && grep -qF -- "${a#*:}" "$T/e"; } || { bad=1; diag "'${a%%:*}': exit $rc: $(head -1 "$T/e")"; }
done
ok $bad "bad values name what was expected; an unknown short option and an ambiguous long one are named as typed"
# sizes in range that the pool once could not hold (its slack was 1 MiB:
# two size classes of small buffers overflowed it), and an lr that diverges
# (it exited 0 with a loss of -nan)
"$Z" local --nodes 2 -- train --samples 66000 --features 1024 --steps 1 --backend cpu >"$T/p.out" 2>&1; rc=$?
"$Z" local --nodes 2 -- train --lr 50 --steps 30 --features 64 --samples 256 --backend cpu >"$T/nan.out" 2>&1; rc2=$?
[ $rc = 0 ] && grep -q '^# replicas: bit-identical' "$T/p.out" && [ $rc2 = 1 ] &&
	grep -q 'the training diverged (the loss is -\{0,1\}nan after 30 steps): take a smaller --lr' "$T/nan.out"
ok $? "66000 x 1024 floats a node train (exit $rc; the pool refused them), --lr 50 diverges: exit $rc2, said" ||
	diag "$(grep -E 'zbmd train' "$T/p.out" "$T/nan.out" | head -3)"
"$Z" train -c /nonexistent.ini --features 1048576 --samples 1048576 >/dev/null 2>"$T/e"; rc=$?
[ $rc = 2 ] && grep -q 'is 4096.0 GiB of data per node, 8192.0 GiB with the backend.s copy of it: more than half of this machine' "$T/e"
ok $? "--features and --samples each in range, their product past the memory: exit 2 before any node starts ($rc; it ran and failed to allocate)"
# the nodes of zbmd local share the machine's memory (ZBMD_LOCAL_NODES):
# a shard that fits one node (an eighth of the memory with its copy) is
# refused for 64 of them (it passed each node's check: 4 nodes of 8 GiB
# each ran into the OOM killer on this 23 GiB machine)
s=$(awk '/^MemTotal:/ {printf "%d", $2 * 1024 / 16 / 4096}' /proc/meminfo)
ZBMD_LOCAL_NODES=64 "$Z" train -c /nonexistent.ini --features 1024 --samples $s >/dev/null 2>"$T/e"; rc=$?
"$Z" train -c /nonexistent.ini --features 1024 --samples $s >/dev/null 2>"$T/e1"; rc1=$?
"$Z" local --nodes 3 -- /bin/sh -c 'echo ZBMD_LOCAL_NODES=$ZBMD_LOCAL_NODES' >"$T/env" 2>&1
[ $rc = 2 ] && grep -q 'GiB for the 64 nodes on this machine: more than half' "$T/e" &&
	[ $rc1 = 2 ] && ! grep -q 'more than half' "$T/e1" && grep -qx 'ZBMD_LOCAL_NODES=3' "$T/env"
ok $? "--samples $s x --features 1024 fits one node, not the 64 of zbmd local (exit $rc: $(head -c 160 "$T/e")); zbmd local tells its nodes how many share the machine"
"$Z" train --steps 3 >/dev/null 2>"$T/e"; rc=$?
[ $rc = 2 ] && grep -q 'config FILE is required' "$T/e"
ok $? "no -c: exit 2 saying so ($rc)"
out=$("$Z" train --help 2>/dev/null); rc=$?
[ $rc = 0 ] && echo "$out" | grep -q '^usage: zbmd train'
ok $? "--help: exit 0, usage on stdout"
"$Z" train -c /nonexistent.ini >/dev/null 2>"$T/e"; rc=$?
[ $rc = 2 ] && grep -q 'nonexistent.ini' "$T/e"
ok $? "a config that does not load: exit 2, the file named ($rc)"
printf '[node]\nid = 0\n[cluster]\nid = 1\n[eal]\nmemory_mb = 1\n[coll]\nchannels = 0\n' >"$T/two.ini"
"$Z" train -c "$T/two.ini" >/dev/null 2>"$T/e"; rc=$?
[ $rc = 2 ] && grep -q "^zbmd train: $T/two.ini:6: eal.memory_mb: " "$T/e" && grep -q "^zbmd train: $T/two.ini:8: coll.channels: " "$T/e"
ok $? "a config with two errors: exit 2 and both, each at its line, as zbmd run prints them ($rc)"

# CUDA: a clear failure where there is none, a real run where there is
"$Z" local --nodes 2 -- train --steps 10 --backend cuda >"$T/cu.out" 2>&1
rc=$?
{ [ $rc = 1 ] && grep -q 'zbmd train: GPU backend: ' "$T/cu.out"; } ||
	{ [ $rc = 0 ] && grep -q '^# replicas: bit-identical on all 2 nodes' "$T/cu.out"; }
ok $? "--backend cuda: $( [ $rc = 0 ] && echo 'trained on it' || grep -m1 -o 'GPU backend: .*' "$T/cu.out" | cut -c1-90) (exit $rc)"
done_testing
