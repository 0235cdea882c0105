#!/usr/bin/env bash
# `zbmd run` with the control thread: three nodes in namespaces
# (scripts/cluster.sh) elect a leader and agree on 3 members and one epoch,
# which every node's lcores apply; /metrics parses as Prometheus text and its
# dataplane counters rise with traffic; a node with the wrong PSK cannot
# join; kill -9 of a node -> the others convict it and move to a new epoch
# (lcores included); SIGTERM -> exit 0. Also: a config without a control
# address runs without a control thread and says so; `enabled = on` without
# one, and a PSK readable by others, are refused clearly.
. "$ZBMD_ROOT/tests/common/tap.sh"
. "$ZBMD_ROOT/tests/dataplane/lib.sh"
need_netns
TAG=zbcirc$$
D=$T/cl
CL="$ZBMD_ROOT/scripts/cluster.sh --tag $TAG --dir $D"
trap '$CL down >/dev/null 2>&1; cleanup_lib' EXIT
plan 28

# ---- single node, no cluster: the rules of [control] enabled (root ns) -----
PFX=zbci-rc$$
PREFIXES+=("$PFX")
node_config "$T/solo.ini" "$PFX" 0 "[port.0]
vdev = net_ring0"
"$ZBMD" run -c "$T/solo.ini" >"$T/solo.out" 2>&1 & P=$!; PIDS+=($P)
wait_for "$T/solo.out" '^zbmd: ready' 60 &&
	grep -q '^control: off: no control address for this node' "$T/solo.out" &&
	grep -q '^control thread: none' "$T/solo.out"
ok $? "no control address: the node runs without a control thread and says why"
kill -TERM $P; wait $P; ok $? "... and exits 0 on SIGTERM"

# auto + a concrete listen address: a one-member cluster with a random key
# (a loopback address of its own: nothing else on this machine binds it)
LO=127.$((RANDOM % 200 + 20)).$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1))
cp "$T/solo.ini" "$T/auto.ini"
printf '[control]\nlisten = %s:7400\nadmin_listen = %s:7401\nraft_dir = %s/raft-solo\n[metrics]\nlisten = %s:9464\n' \
	"$LO" "$LO" "$T" "$LO" >>"$T/auto.ini"
"$ZBMD" run -c "$T/auto.ini" >"$T/auto.out" 2>&1 & P=$!; PIDS+=($P)
solo_ok() { "$ZBMD" status --admin "$LO:7401" 2>/dev/null >"$T/auto.st" &&
	grep -q '^members 1$' "$T/auto.st" && grep -q '^epoch 1$' "$T/auto.st" &&
	grep -q '^dataplane_epoch 1$' "$T/auto.st"; }
wait_for "$T/auto.out" '^zbmd: ready' 60 && grep -q "^control: on (\[control\] listen = $LO:7400)" "$T/auto.out" &&
	for _ in $(seq 50); do solo_ok && break; sleep 0.2; done && solo_ok
ok $? "enabled = auto with a concrete listen: control runs, one member, epoch 1 applied by the lcore"
# the JSON form carries what the text form says: the dataplane's epoch,
# lcores and counters, the convictions, the rejections' total (it had none)
"$ZBMD" status --admin "$LO:7401" --json >"$T/auto.json" 2>&1
python3 - "$T/auto.json" "$T/auto.st" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
text = dict(l.split(" ", 1) for l in open(sys.argv[2]).read().splitlines() if " " in l)
dp = d["dataplane"]
assert dp["epoch"] == 1 and dp["lcores"] == int(text["dataplane_lcores"]), dp
assert any(k.startswith("zbmd_port_") for k in dp["samples"]), "no port sample"
assert any(k.startswith("zbmd_dp_iterations_total") for k in dp["samples"]), "no loop sample"
assert d["convictions"] == int(text["convictions"]) and d["auth"]["rejected"] == int(text["auth_rejected"])
assert all("last_heard_ms" in p for p in d["peers"])
PY
ok $? "zbmd status --json: the dataplane's epoch, lcores and samples, convictions, auth rejected, as the text form ($(head -c 120 "$T/auto.json"))"
kill -TERM $P; wait $P; ok $? "... and exits 0 on SIGTERM"

printf '[control]\nenabled = on\n' >>"$T/solo.ini"
"$ZBMD" run -c "$T/solo.ini" >"$T/on.out" 2>&1; rc=$?
# (the config loader says it now, at the line of enabled, as check-config does)
[ $rc -eq 2 ] && grep -q "solo.ini:[0-9]*: control.enabled = on but \[control\] listen 0.0.0.0:7400 is the wildcard and there is no \[peer.1\] control" "$T/on.out"
ok $? "enabled = on without a control address: exit 2, clear reason (rc $rc)"

# ---- three nodes -----------------------------------------------------------
$CL up 4 >/dev/null; ok $? "cluster up: 4 namespaces, control network, PSK"
[ "$(stat -c %a "$D/psk")" = 600 ]; ok $? "PSK file is mode 0600"
"$ZBMD" check-config "$D/node1.ini" >/dev/null; ok $? "generated config passes check-config"

st() { $CL exec "$1" "$ZBMD" status -c "$D/node$1.ini" 2>/dev/null; }
field() { st "$1" | awk -v k="$2" '$1 == k { $1 = ""; sub(/^ /, ""); print; exit }'; }
# agree MEMBERS NODES...: the same members, a leader, one epoch, and every
# node's lcores applied that epoch
agree() {
	local want=$1 e="" i s; shift
	for i in "$@"; do
		s=$(st "$i") || return 1
		[ "$(awk '$1 == "members" { $1 = ""; print }' <<<"$s" | xargs)" = "$want" ] || return 1
		[ "$(awk '$1 == "leader" { print $2 }' <<<"$s")" != -1 ] || return 1
		local ep dp; ep=$(awk '$1 == "epoch" { print $2 }' <<<"$s")
		dp=$(awk '$1 == "dataplane_epoch" { print $2 }' <<<"$s")
		[ -n "$ep" ] && [ "$ep" = "$dp" ] || return 1
		[ -z "$e" ] || [ "$e" = "$ep" ] || return 1
		e=$ep
	done
}
wait_until() {  # wait_until SECONDS CMD...
	local deadline=$((SECONDS + $1)); shift
	until "$@"; do [ $SECONDS -ge $deadline ] && return 1; sleep 0.2; done
}

$CL start 1 2 3 >/dev/null; ok $? "zbmd run on nodes 1..3: ready"
grep -q '^control: on (\[control\] enabled = on): cluster 77' "$D/node1.log" &&
	grep -q '^control thread: running' "$D/node1.log"
ok $? "node log says the control thread runs, and with what"
wait_until 15 agree "1 2 3" 1 2 3
ok $? "leader $(field 1 leader) elected; 3 members, epoch $(field 1 epoch) everywhere, applied by the lcores"
E1=$(field 1 epoch)

metrics() { $CL exec 2 curl -sf "http://10.76.0.2:9464/metrics"; }
metric() { awk -v k="$1" '$1 == k { print $2 }' "$2"; }
metrics >"$T/m1.txt" && "$ZBMD_BUILD/tests/control/helper_promcheck" <"$T/m1.txt" >/dev/null
ok $? "curl /metrics: strict Prometheus text parse"
grep -q '^zbmd_dp_iterations_total{node="2"} [1-9]' "$T/m1.txt" &&
	grep -q '^zbmd_transport_retransmits_total{node="2"} ' "$T/m1.txt" &&
	grep -q '^zbmd_port_rx_packets_total{node="2",port="0"} ' "$T/m1.txt" &&
	grep -qE "^zbmd_dp_epoch\{node=\"2\",lcore=\"[0-9]+\"\} $E1\$" "$T/m1.txt" &&
	grep -q '^zbmd_control_epoch{node="2"} ' "$T/m1.txt"
ok $? "dataplane (loop, port, transport, applied epoch) and control series present"
$CL exec probe ping -c 3 -i 0.2 -W 5 10.77.0.2 >/dev/null; ok $? "probe pings node 2's dataplane address"
metrics >"$T/m2.txt"
k='zbmd_dp_icmp_replies_total{node="2"}'; p='zbmd_port_rx_packets_total{node="2",port="0"}'
i1=$(metric "$k" "$T/m1.txt"); i2=$(metric "$k" "$T/m2.txt")
r1=$(metric "$p" "$T/m1.txt"); r2=$(metric "$p" "$T/m2.txt")
[ -n "$i1" ] && [ $((i2 - i1)) -ge 3 ] && [ $((r2 - r1)) -ge 3 ]
ok $? "ICMP replies $i1 -> $i2, port rx $r1 -> $r2 on /metrics"
b1=$(metric 'zbmd_dp_rx_burst_seconds_total{node="2"}' "$T/m1.txt")
b2=$(metric 'zbmd_dp_rx_burst_seconds_total{node="2"}' "$T/m2.txt")
t2=$(metric 'zbmd_dp_tx_burst_seconds_total{node="2"}' "$T/m2.txt")
awk -v a="$b1" -v b="$b2" -v t="$t2" 'BEGIN { exit !(a != "" && b > a && t > 0 && b < 3600) }'
ok $? "time in the driver's RX bursts grew with the pings ($b1 -> $b2 s), TX bursts ${t2:-none} s"
st 2 | grep -qE '^port zbmd_port_rx_packets_total\{node="2",port="0"\} [1-9]' &&
	st 2 | grep -qE '^dataplane zbmd_dp_icmp_replies_total\{node="2"\} [1-9]'
ok $? "zbmd status shows the port and dataplane counters"

# ---- a node with the wrong key ---------------------------------------------
(umask 077; head -c 32 /dev/urandom | base64 >"$T/wrong.psk")
sed -i "s|^psk_file = .*|psk_file = $T/wrong.psk|" "$D/node4.ini"
$CL start 4 >/dev/null; ok $? "node 4 (wrong PSK) starts"
sleep 3
L=$(field 1 leader)
[ "$(field 1 members)" = "1 2 3" ] && [ "$(field 4 epoch)" = 0 ]
ok $? "node 4 is not a member and never applied an epoch (members: $(field 1 members))"
rej=$(field "$L" auth_rejected_mac)
[ "${rej:-0}" -gt 0 ]; ok $? "leader $L rejected and counted its messages (mac: $rej)"
$CL stop 4 >/dev/null; ok $? "node 4 exits 0 on SIGTERM"

# ---- kill -9 a node: convicted, new epoch ---------------------------------
K=3; [ "$L" = 3 ] && K=2   # a follower
alive=(); for i in 1 2 3; do [ "$i" != "$K" ] && alive+=("$i"); done
t0=$(date +%s%N)
kill -9 "$(cat "$D/node$K.pid")"
moved() { agree "${alive[*]}" "${alive[@]}" && [ "$(field "${alive[0]}" epoch)" -gt "$E1" ]; }
wait_until 10 moved
ok $? "node $K killed: convicted in $((($(date +%s%N) - t0) / 1000000)) ms; members ${alive[*]}, epoch $(field "${alive[0]}" epoch) > $E1, applied by the lcores"
$CL exec "${alive[0]}" curl -sf "http://10.76.0.${alive[0]}:9464/metrics" >"$T/m3.txt"
grep -qE "^zbmd_dp_views_applied_total\{node=\"${alive[0]}\",lcore=\"1\"\} [1-9]" "$T/m3.txt"
ok $? "the survivors' lcores counted the views they applied"

# ---- SIGTERM: exit 0 ---------------------------------------------------------
$CL stop "${alive[@]}" >/dev/null; ok $? "SIGTERM: the survivors exit 0"
grep -q '^zbmd: stopped cleanly' "$D/node${alive[0]}.log" &&
	grep -q '^zbmd: stopped cleanly' "$D/node${alive[1]}.log" &&
	grep -q 'control\[.*\]: left the cluster' "$D/node${alive[0]}.log"
ok $? "logs: left the cluster, stopped cleanly"

# a PSK readable by others: refused before anything starts
chmod 644 "$T/wrong.psk"
$CL exec 4 "$ZBMD" run -c "$D/node4.ini" >"$T/perm.out" 2>&1; rc=$?
[ $rc -eq 1 ] && grep -q "lets group/others access the key" "$T/perm.out"
ok $? "a PSK file readable by others is refused: exit 1 (rc $rc)"
# (sanitizer builds; arp.c's misaligned MAC reads are known and not ours)
san=$(cat "$D"/node*.log "$T"/*.out 2>/dev/null | grep -E "ERROR: [A-Za-z]*Sanitizer|runtime error:" |
	grep -vE "^(dataplane/arp\.c|/usr/include/dpdk/rte_ether\.h):" | head -3)
[ -z "$san" ]; ok $? "no sanitizer report in any node's output ${san:+($san)}"
done_testing
