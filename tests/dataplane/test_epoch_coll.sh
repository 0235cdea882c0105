#!/usr/bin/env bash
# Collectives and the membership epoch: three nodes in namespaces
# (scripts/cluster.sh, control plane on) each run `zbmd bench allreduce
# --provider dpdk` — which starts the control thread as `zbmd run` does — in
# a long all-reduce loop; kill -9 of one node -> the survivors convict it,
# commit a new epoch without it, and their running collectives fail with
# ZB_ERR_EPOCH ("membership epoch changed from E1 to E2: node K removed"):
# both exit 1 within a bound.
#
# What this proves is the epoch path, not a timeout: [coll] timeout_ms and
# [transport] peer_timeout_ms are set to 30 s, far above the conviction time
# (phi-accrual, 100 ms heartbeats: about 1-2 s), and the test requires the
# survivors out well before either could fire (and the epoch message, not
# "timed out" / "peer down", in their errors).
. "$ZBMD_ROOT/tests/common/tap.sh"
. "$ZBMD_ROOT/tests/dataplane/lib.sh"
need_netns
TAG=zbep$$
D=$T/cl
export ZBN_PREFIX=zbep
CL="$ZBMD_ROOT/scripts/cluster.sh --tag $TAG --dir $D"
BOUND_S=${ZBEP_BOUND_S:-10}   # kill -> survivors out (conviction + commit + apply)
SLOW_MS=30000                 # the coll / transport timeouts the epoch must beat
trap '$CL down >/dev/null 2>&1; cleanup_lib' EXIT
plan 10

$CL up 3 >/dev/null &&
	for i in 1 2 3; do
		! grep -q '^\[coll\]' "$D/node$i.ini" &&
			sed -i "s/^\[transport\]\$/[transport]\npeer_timeout_ms = $SLOW_MS/" "$D/node$i.ini" &&
			printf '[coll]\ntimeout_ms = %s\n' $SLOW_MS >>"$D/node$i.ini" &&
			"$ZBMD" check-config "$D/node$i.ini" >/dev/null || exit 1
	done
ok $? "cluster up: 3 namespaces, control network, PSK; coll and transport timeouts ${SLOW_MS} ms"

# the benches: one per node, in its namespace; a 1 MiB all-reduce, forever
BPID=()
for i in 1 2 3; do
	$CL exec "$i" "$ZBMD" bench allreduce --provider dpdk -c "$D/node$i.ini" \
		-b 1M -e 1M -d float -o sum -n 10000000 -w 0 \
		>"$T/b$i.out" 2>"$T/b$i.err" &
	BPID[i]=$!; PIDS+=($!)
done

st() { $CL exec "$1" "$ZBMD" status -c "$D/node$1.ini" 2>/dev/null; }
field() { st "$1" | awk -v k="$2" '$1 == k { $1 = ""; sub(/^ /, ""); print; exit }'; }
formed() {  # every node: members 1 2 3, one epoch, applied by its lcores
	local e="" i s ep dp
	for i in 1 2 3; do
		s=$(st "$i") || return 1
		[ "$(awk '$1 == "members" { $1 = ""; print }' <<<"$s" | xargs)" = "1 2 3" ] || return 1
		ep=$(awk '$1 == "epoch" { print $2 }' <<<"$s")
		dp=$(awk '$1 == "dataplane_epoch" { print $2 }' <<<"$s")
		[ -n "$ep" ] && [ "$ep" = "$dp" ] && { [ -z "$e" ] || [ "$e" = "$ep" ]; } || return 1
		e=$ep
	done
}
wait_until() {  # wait_until SECONDS CMD...
	local deadline=$((SECONDS + $1)); shift
	until "$@"; do [ $SECONDS -ge $deadline ] && return 1; sleep 0.2; done
}
wait_until 30 formed
ok $? "benches started the control thread: 3 members, epoch $(field 1 epoch) on every node and its lcores"
grep -q "control: on (\[control\] enabled = on): cluster 77" "$T/b1.err"
ok $? "the bench says the control thread runs"
E1=$(field 1 epoch)
L=$(field 1 leader)

# collectives are running: the dataplane's frame counters rise
txp() { $CL exec "$1" curl -sf "http://10.76.0.$1:9464/metrics" |
	awk -F'[ }]' '/^zbmd_dp_tx_packets_total\{/ { print $NF }'; }
a1=$(txp 1); sleep 1; a2=$(txp 1)
[ -n "$a1" ] && [ -n "$a2" ] && [ $((a2 - a1)) -gt 100 ] &&
	kill -0 "${BPID[1]}" "${BPID[2]}" "${BPID[3]}"
ok $? "all-reduce loop running on every node (node 1 sent $((a2 - a1)) frames in 1 s)"

# ---- kill -9 a follower (ZBEP_KILL_LEADER=1: the leader) -------------------
K=3; [ "$L" = 3 ] && K=2
[ -n "${ZBEP_KILL_LEADER:-}" ] && K=$L   # by hand: an election comes first
alive=(); for i in 1 2 3; do [ "$i" != "$K" ] && alive+=("$i"); done
running=0; kill -0 "${BPID[1]}" "${BPID[2]}" "${BPID[3]}" 2>/dev/null && running=1
a=${alive[0]}; b=${alive[1]}
re="membership epoch changed from $E1 to [0-9]+: node $K removed"
reported() { grep -qE "^zbmd bench allreduce: node $a: .*$re" "$T/b$a.err" &&
	grep -qE "^zbmd bench allreduce: node $b: .*$re" "$T/b$b.err"; }
t0=$(date +%s%N)
kill -9 "${BPID[K]}"; wait "${BPID[K]}" 2>/dev/null
# kill -> both survivors printed the epoch error (polled every 20 ms)
deadline=$((SECONDS + BOUND_S + 2))
until reported || [ $SECONDS -ge $deadline ]; do sleep 0.02; done
err_ms=$((($(date +%s%N) - t0) / 1000000))
# ... -> both exited (they leave the cluster on the way out: bounded too)
out=$running
for i in "${alive[@]}"; do wait_exit "${BPID[i]}" $((BOUND_S + 2)) || out=0; done
ms=$((($(date +%s%N) - t0) / 1000000))
for i in "${alive[@]}"; do wait "${BPID[i]}"; eval "rc$i=$?"; done
# the leader's log: when it committed the epoch without node K
ce=$(awk -v e="$E1" 'match($0, /: epoch [0-9]+: /) && substr($0, RSTART + 8) + 0 > e { print $1; exit }' "$T/b${alive[0]}.err")
commit_ms=$([ -n "$ce" ] && awk -v c="$ce" -v t="$t0" 'BEGIN { printf "%d", c * 1000 - t / 1000000 }')
reported && [ $err_ms -le $((BOUND_S * 1000)) ]
ok $? "node $K killed: epoch ${commit_ms:-?} ms later; both survivors report ZB_ERR_EPOCH by $err_ms ms (bound ${BOUND_S} s)"
[ $out = 1 ] && [ $ms -le $(((BOUND_S + 5) * 1000)) ]
ok $? "... and exit by $ms ms (no graceful leave; a Raft leader lingers 3 heartbeats so the followers learn the commit)"
[ "$(eval echo \$rc$a)" = 1 ] && [ "$(eval echo \$rc$b)" = 1 ]
ok $? "both survivors exit 1 (node $a: $(eval echo \$rc$a), node $b: $(eval echo \$rc$b))"
reported
ok $? "both report the epoch change: $(grep -hE "$re" "$T/b$a.err" | head -1)"
! grep -qiE "timed out|no progress|peer down" "$T/b$a.err" "$T/b$b.err"
ok $? "... and not a timeout or a peer-down"
[ $err_ms -lt $SLOW_MS ]
ok $? "the epoch path beat the ${SLOW_MS} ms timeouts by $((SLOW_MS - err_ms)) ms"
done_testing
