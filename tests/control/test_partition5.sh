#!/usr/bin/env bash
# 5-node control cluster in network namespaces: cut two followers off (their
# bridge ports down) -> the minority cannot commit (no epoch change, commit
# index frozen, no leader), the majority can (it removes them under a new
# epoch); heal -> they rejoin and catch up to the same epoch.
source "$ZBMD_ROOT/tests/common/tap.sh"
source "$ZBMD_ROOT/tests/control/netns.sh"
nn_require
plan 8
nn_setup p 2 5
nn_form 15 0 1 2 3 4
ok $? "5 nodes formed a cluster (epoch $(nn_field 0 epoch))"

L=$(nn_field 0 leader)
E1=$(nn_field 0 epoch)
minority=(); majority=()
for i in 0 1 2 3 4; do
	if [ "$i" != "$L" ] && [ ${#minority[@]} -lt 2 ]; then minority+=("$i"); else majority+=("$i"); fi
done
C_MIN=$(nn_field "${minority[0]}" commit)
for i in "${minority[@]}"; do nn_link "$i" down; done
diag "leader $L; partitioned ${minority[*]} from ${majority[*]}"

majority_moved() { nn_agree 3 "${majority[@]}" && [ "$(nn_field "$L" epoch)" -gt "$E1" ]; }
nn_wait 8 majority_moved
ok $? "majority commits: minority removed, 3 members, epoch $(nn_field "$L" epoch) > $E1"
sleep 1.5
frozen=0
for i in "${minority[@]}"; do
	[ "$(nn_field "$i" epoch)" = "$E1" ] || frozen=1
	[ "$(nn_field "$i" commit)" = "$C_MIN" ] || frozen=1
done
ok $frozen "minority cannot commit: epoch still $E1, commit index still $C_MIN"
noleader=0
for i in "${minority[@]}"; do [ "$(nn_field "$i" leader)" = "-1" ] || noleader=1; done
ok $noleader "minority has no leader (state $(nn_field "${minority[0]}" state))"
E2=$(nn_field "$L" epoch)

for i in "${minority[@]}"; do nn_link "$i" up; done
healed() { nn_agree 5 0 1 2 3 4 && [ "$(nn_field "${minority[0]}" epoch)" -gt "$E2" ]; }
nn_wait 15 healed
ok $? "healed: all 5 members again, epoch $(nn_field 0 epoch) > $E2 on every node"
C_L=$(nn_field "$L" commit)
caught=0
for i in "${minority[@]}"; do
	c=$(nn_field "$i" commit); [ "${c:-0}" -ge $((C_L - 2)) ] || caught=1
done
ok $caught "minority caught up with the leader's log (commit $C_L)"
ip netns exec "zbctl-p-n$L" curl -sf "http://$(nn_ip "$L"):9464/metrics" |
	"$ZBMD_BUILD/tests/control/helper_promcheck" >/dev/null
ok $? "metrics still parse"
t0=$(nn_now_ms); nn_finish; st=$?; diag "finish took $(( $(nn_now_ms) - t0 )) ms"; (exit $st)
ok $? "every node stopped cleanly on SIGTERM, no sanitizer reports"
done_testing
