#!/usr/bin/env bash
# 3-node control cluster in network namespaces: formation, leader kill ->
# new leader within 2 s, conviction + removal with a new epoch, rejoin under a
# new epoch, follower kill, a wrong-PSK node refused and counted, /metrics
# parsed as Prometheus text, `zbmd status -c`.
source "$ZBMD_ROOT/tests/common/tap.sh"
source "$ZBMD_ROOT/tests/control/netns.sh"
nn_require
plan 15
nn_setup c 1 4
nn_form 10 0 1 2
ok $? "3 nodes formed a cluster (members: $(nn_field 0 members), epoch $(nn_field 0 epoch))"

L=$(nn_field 0 leader)
E1=$(nn_field 0 epoch)
survivors=(); for i in 0 1 2; do [ "$i" != "$L" ] && survivors+=("$i"); done
t0=$(nn_now_ms)
nn_kill "$L"
new_leader() { local l; l=$(nn_field "${survivors[0]}" leader); [ -n "$l" ] && [ "$l" != "-1" ] && [ "$l" != "$L" ]; }
nn_wait 5 new_leader
rc=$?   # (taken before the assignment below, whose status is always 0)
dt=$(( $(nn_now_ms) - t0 ))
ok $rc "leader $L killed: new leader $(nn_field "${survivors[0]}" leader) elected"
# ZBMD_TIME_SCALE: make asan / tsan run the nodes 2 / 3 times slower
bound=$((2000 * ${ZBMD_TIME_SCALE:-1}))
[ $rc -eq 0 ] && [ "$dt" -le "$bound" ]; ok $? "... within 2 s (${dt} ms; bound $bound ms)"

removed() { nn_agree 2 "${survivors[@]}" && [ "$(nn_field "${survivors[0]}" epoch)" -gt "$E1" ]; }
nn_wait 6 removed
ok $? "dead leader convicted and removed: 2 members, epoch $(nn_field "${survivors[0]}" epoch) > $E1 on both survivors"
E2=$(nn_field "${survivors[0]}" epoch)

nn_start "$L"
rejoined() { nn_agree 3 0 1 2 && [ "$(nn_field "$L" epoch)" -gt "$E2" ]; }
nn_wait 10 rejoined
ok $? "restarted node $L rejoined under a new epoch $(nn_field "$L" epoch) > $E2"
E3=$(nn_field 0 epoch)

L2=$(nn_field 0 leader)
F=""; for i in 0 1 2; do [ "$i" != "$L2" ] && F=$i && break; done
rest=(); for i in 0 1 2; do [ "$i" != "$F" ] && rest+=("$i"); done
t0=$(nn_now_ms)
nn_kill "$F"
removed2() { nn_agree 2 "${rest[@]}" && [ "$(nn_field "${rest[0]}" epoch)" -gt "$E3" ]; }
nn_wait 6 removed2
ok $? "follower $F killed: convicted and removed in $(( $(nn_now_ms) - t0 )) ms, epoch $(nn_field "${rest[0]}" epoch) on all survivors"
conv=$(nn_field "$L2" convictions)
[ "${conv:-0}" -ge 1 ]; ok $? "leader $L2 counted the conviction ($conv)"

# A node with the wrong key cannot join and is counted.
nn_conf 3 psk-wrong; nn_start 3
sleep 3
m=$(nn_field "$L2" members)
! echo " $m " | grep -q " 3 "; ok $? "wrong-PSK node 3 is not a member (members: $m)"
rej=$(nn_field "$L2" auth_rejected_mac)
[ "${rej:-0}" -gt 0 ]; ok $? "its heartbeats rejected and counted (mac: $rej)"
hs=$(nn_field 3 auth_rejected_mac)
[ "${hs:-0}" -gt 0 ] && [ "$(nn_field 3 epoch)" = "0" ]; ok $? "it rejects the cluster too and never applied an epoch"
grep -q "rejected control message (mac)" "$NN_DIR/log$L2"; ok $? "rejection logged"
n_log=$(grep -c "rejected control message (mac)" "$NN_DIR/log$L2")
[ "$n_log" -le 5 ]; ok $? "... rate-limited ($n_log lines for $rej rejections)"

ip netns exec "zbctl-c-n$L2" curl -sf "http://$(nn_ip "$L2"):9464/metrics" > "$NN_DIR/metrics.txt" &&
	"$ZBMD_BUILD/tests/control/helper_promcheck" < "$NN_DIR/metrics.txt" &&
	grep -q "^zbmd_control_auth_failures_total{node=\"$L2\",reason=\"mac\"} [1-9]" "$NN_DIR/metrics.txt" &&
	grep -q "^zbmd_control_phi{node=\"$L2\",peer=" "$NN_DIR/metrics.txt"
ok $? "curl /metrics: strict Prometheus parse, auth failures and phi per peer present"

ip netns exec "zbctl-c-n$L2" "$ZBMD" status -c "$NN_DIR/n$L2.ini" | grep -q "^state leader"
ok $? "zbmd status -c FILE reads the admin address from the config"
nn_finish
ok $? "every node stopped cleanly on SIGTERM, no sanitizer reports"
done_testing
