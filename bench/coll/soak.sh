#!/bin/bash
# bench/coll/soak.sh — the main job, over and over: `zbmd local` all-reduce
# sweeps over every link, with transport faults, and with a node killed
# mid-run, round after round. TAP on stdout (prove can run it), one line per
# run; exits non-zero if any run went wrong. `make soak-allreduce` (part of
# `make soak`) runs it with its defaults.
#
#   bench/coll/soak.sh [-r rounds] [-m minutes] [-L "memif veth tcp"] [-N nodes]
#
# Each round, for every link L:
#   - a sweep 256 KiB .. 4 MiB (x4) of every dtype with the round's op (sum,
#     prod, min, max, avg in turn): exit 0, 18 rows, every row #wrong 0;
#   - on dpdk links (memif, veth), the same sweep at 64 KiB .. 1 MiB under the
#     transport's own fault injection (2% drop, 5% reorder, 1% duplicate,
#     the round's seed): exit 0, every row #wrong 0, retransmissions seen;
#   - rank 2 killed with SIGKILL once a sweep printed its first row: every
#     survivor out within the 5 s bound (+1 s), zbmd local non-zero, no crash;
#   - rank 2 killed while the nodes join (memif: 300 ms after the last node
#     was launched; veth, tcp: 1.5 s after the start): every survivor exits with status 1 within ~5 s when the
#     control planes had heard it; when they had not, zbmd local says so and
#     stops them [coll] timeout_ms + 5 s after the kill (instead of the
#     join's 30 s); none crashed (docs/collectives.md, "Failures").
# After each round: no leftover zbmd process of ours, no new segfault line in
# the kernel's log (where it can be read). With -m the rounds go on until that
# many minutes have passed (at least one round).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
Z=${ZBMD_BUILD:-$ROOT/build}/bin/zbmd
ROUNDS=3 MINUTES=0 NODES=4 LINKS=
while getopts "r:m:L:N:" o; do
	case $o in
	r) ROUNDS=$OPTARG ;; m) MINUTES=$OPTARG ;; L) LINKS=$OPTARG ;; N) NODES=$OPTARG ;;
	*) echo "usage: $0 [-r rounds] [-m minutes] [-L links] [-N nodes]" >&2; exit 2 ;;
	esac
done
for v in "$ROUNDS" "$MINUTES" "$NODES"; do
	[[ $v =~ ^[0-9]+$ ]] || { echo "soak.sh: not a number: '$v'" >&2; exit 2; }
done
[ "$NODES" -ge 3 ] || { echo "soak.sh: -N needs at least 3 nodes (one is killed)" >&2; exit 2; }
if [ -z "$LINKS" ]; then
	if [ "$(id -u)" = 0 ]; then LINKS="memif veth tcp"; else LINKS=tcp; fi
fi
for l in $LINKS; do
	case $l in memif|veth|tcp) ;; *) echo "soak.sh: unknown link '$l' (memif veth tcp)" >&2; exit 2 ;; esac
done
[ -x "$Z" ] || { echo "soak.sh: $Z not built (make)" >&2; exit 2; }
export ZBMD_ROOT=$ROOT

T=$(mktemp -d /tmp/zbsoak-XXXXXX)
trap 'rm -rf "$T"' EXIT
n=0 failed=0
# a failed zbmd local run (a node killed) keeps its configs and logs and
# says where: dropped when the check passed (drop_kept), kept for one that failed
. "$ROOT/tests/common/local.sh"
ok() {   # ok STATUS NAME [DETAIL FILE]
	n=$((n + 1))
	if [ "$1" = 0 ]; then echo "ok $n - $2"; [ -n "${3:-}" ] && [ -f "$3" ] && drop_kept "$3"
	else
		echo "not ok $n - $2"; failed=$((failed + 1))
		[ -n "${3:-}" ] && [ -f "$3" ] && tail -8 "$3" | sed 's/^/#   /'
	fi
}
rows() { grep -cE '^ +[0-9]+ +[0-9]+ +[a-z0-9]+ +[a-z]+ ' "$1"; }
wrong_rows() { awk '/^ +[0-9]+ +[0-9]+ +[a-z0-9]+ +[a-z]+ / && ($8 != 0 || $12 != 0)' "$1" | wc -l; }
# segfaults the kernel logged after uptime $1 (s); 0 where dmesg is not readable
segv_since() {
	dmesg 2>/dev/null | awk -v t="$1" '/segfault|general protection/ {
		if (match($0, /^\[ *[0-9]+\.[0-9]+\]/)) {
			v = substr($0, RSTART + 1, RLENGTH - 2) + 0; if (v > t) n++ } }
		END { print n + 0 }'
}

OPS=(sum prod min max avg)
start=$SECONDS
round=0
echo "# soak: rounds ${ROUNDS}, minutes ${MINUTES}, links '$LINKS', $NODES nodes ($Z)"
while :; do
	round=$((round + 1))
	op=${OPS[$(((round - 1) % 5))]}
	up0=$(cut -d' ' -f1 /proc/uptime)
	for l in $LINKS; do
		t0=$SECONDS
		timeout -k 10 600 "$Z" local --nodes "$NODES" --link "$l" -- bench allreduce \
			-b 256K -e 4M -f 4 -n 5 -w 1 -d all -o "$op" >"$T/s.out" 2>"$T/s.err"
		rc=$?
		r=$(rows "$T/s.out") w=$(wrong_rows "$T/s.out")
		[ $rc = 0 ] && [ "$r" = 18 ] && [ "$w" = 0 ]
		ok $? "round $round, $l: all dtypes, $op, 256K..4M: exit $rc, $r rows, $w wrong ($((SECONDS - t0)) s)" "$T/s.err"

		if [ "$l" != tcp ]; then
			t0=$SECONDS
			timeout -k 10 600 "$Z" local --nodes "$NODES" --link "$l" \
				--fault "drop=0.02,reorder=0.05,dup=0.01,seed=$round" -- bench allreduce \
				-b 64K -e 1M -f 4 -n 3 -w 1 -d all -o "$op" >"$T/f.out" 2>"$T/f.err"
			rc=$?
			r=$(rows "$T/f.out") w=$(wrong_rows "$T/f.out")
			retr=$(sed -nE 's/.*whole run\): ([0-9]+) retransmits.*/\1/p' "$T/f.out")
			[ $rc = 0 ] && [ "$r" = 18 ] && [ "$w" = 0 ] && [ "${retr:-0}" -gt 0 ]
			ok $? "round $round, $l under 2% drop, 5% reorder, 1% dup (seed $round): exit $rc, $r rows, $w wrong, ${retr:-0} retransmits ($((SECONDS - t0)) s)" "$T/f.err"
		fi

		# a node killed mid-run, once the sweep has printed its first row
		"$Z" local --nodes "$NODES" --link "$l" -- bench allreduce -b 64K -e 64M -f 2 \
			-n 50 -w 1 >"$T/m.out" 2>"$T/m.err" &
		lp=$!
		for _ in $(seq 600); do rows "$T/m.out" | grep -qv '^0$' && break
			kill -0 $lp 2>/dev/null || break; sleep 0.1; done
		# rank 2: node2.ini over tcp (configs count from 0), node3.ini over memif/veth
		[ "$l" = tcp ] && pat='node2\.ini' || pat='node3\.ini'
		victim=$(pgrep -P $lp -f "$pat" | head -1)
		surv=$(pgrep -P $lp | grep -vx "${victim:-none}" | tr '\n' ' ')
		t0=$(date +%s%N)
		[ -n "$victim" ] && kill -KILL "$victim"
		alive=1
		for _ in $(seq 400); do
			alive=0
			for p in $surv; do kill -0 "$p" 2>/dev/null &&
				[ "$(ps -o stat= -p "$p")" != Z ] && alive=1; done
			[ $alive = 0 ] && break
			sleep 0.05
		done
		ms=$((($(date +%s%N) - t0) / 1000000))
		[ $alive = 1 ] && kill -TERM $lp 2>/dev/null
		wait $lp; rc=$?
		crash=$(grep -cE 'killed by signal (11|6|7)\b' "$T/m.err")
		[ -n "$victim" ] && [ $alive = 0 ] && [ $ms -le 6000 ] && [ $rc != 0 ] && [ "$crash" = 0 ]
		ok $? "round $round, $l, rank 2 killed mid-sweep: survivors out ${ms} ms after (bound 5000 + 1000), exit $rc, $crash crashed" "$T/m.err"

		# a node killed while the nodes join: over memif 300 ms after the
		# last node was launched (the others, up and in the join, have
		# heard it), over veth and tcp 1.5 s after the start
		# (docs/collectives.md, "Failures")
		[ "$l" = memif ] && at=2@started+300 || at=2@1500
		t0=$SECONDS
		timeout -k 10 120 "$Z" local --nodes "$NODES" --link "$l" --kill $at -- bench allreduce \
			-b 4M -e 4M -n 1000000 -w 0 >/dev/null 2>"$T/k.err"
		rc=$?
		nsurv=$(fault_survivors "$T/k.err")
		slow=$(fault_slowest "$T/k.err")
		crash=$(grep -cE 'killed by signal (11|6|7)\b' "$T/k.err")
		# survivors that never heard from it: stopped by zbmd local past
		# [coll] timeout_ms (4 s) + 5 s, before the join's 30 s ran out
		cut=$(grep -c 'node 2\( (id 3)\)\{0,1\} was killed by signal 9 .* still run (the run cannot finish' "$T/k.err")
		timedout=$(grep -c 'did not join within' "$T/k.err")
		[ $rc != 0 ] && [ $rc != 124 ] && [ "$crash" = 0 ] && [ "$timedout" = 0 ] &&
			[ $((SECONDS - t0)) -le 25 ] &&
			{ { [ "$nsurv" = $((NODES - 1)) ] && [ -n "$slow" ] && [ "$slow" -le 6000 ]; } || [ "$cut" = 1 ]; }
		ok $? "round $round, $l, rank 2 killed at ${at#2@}: exit $rc, $nsurv of $((NODES - 1)) survivors out with status 1, slowest ${slow:-?} ms after (bound 5000 + 1000), $cut stopped by zbmd local, $crash crashed, $timedout said 'did not join within' ($((SECONDS - t0)) s)" "$T/k.err"
	done
	left=$(pgrep -f 'zbmd bench allreduce --config' | wc -l)
	segv=$(segv_since "$up0")
	[ "$left" = 0 ] && [ "$segv" = 0 ]
	ok $? "round $round: no zbmd local node left running ($left), no segfault in the kernel log during the round ($segv)"
	if [ "$MINUTES" -gt 0 ]; then
		[ $((SECONDS - start)) -ge $((MINUTES * 60)) ] && break
	else
		[ $round -ge "$ROUNDS" ] && break
	fi
done
echo "1..$n"
echo "# soak: $round rounds in $((SECONDS - start)) s, $failed of $n checks failed"
[ $failed = 0 ]
