#!/usr/bin/env bash
# A member lost while the leader promotes another node. 3 control nodes form a
# cluster; a fourth starts and is stopped (SIGSTOP) as soon as the leader
# begins its promotion (raft-assign: libraft catches the node up first, and
# a node that does not answer keeps that change pending until libraft gives
# it up, ~5 s later: "no connection"); a member is killed at once. The
# leader must remove the member (leave: a new epoch) while the promotion is
# still pending — an FSM command goes beside a pending configuration change
# (control/node.c, leader_step); until 2026-11-28 it waited for the change
# to end (~3.3 s after the kill instead of ~0.9). Then the stopped node
# continues and joins, and every node stops cleanly.
source "$ZBMD_ROOT/tests/common/tap.sh"
source "$ZBMD_ROOT/tests/control/netns.sh"
nn_require
plan 5
nn_setup q 3 4
nn_form 15 0 1 2
ok $? "3 nodes formed a cluster (epoch $(nn_field 0 epoch))"

L=$(nn_field 0 leader)
V=0; [ "$L" = 0 ] && V=1
E1=$(nn_field "$L" epoch)
nn_conf 3; nn_start 3
# stop node 3 as soon as the leader starts promoting it, and kill member V
assigning() { grep -q "leader: raft-assign node 3" "$NN_DIR/log$L"; }
nn_wait 20 assigning; rc=$?
kill -STOP "${NN_PIDS[3]}"
t0=$(nn_now_ms)
nn_kill "$V"
ok $rc "the leader (node $L) began promoting node 3; node 3 stopped, member $V killed"

removed() { ! nn_field "$L" members | grep -qw "$V"; }
nn_wait 15 removed; rc=$?
ms=$(( $(nn_now_ms) - t0 ))
failed_first=$(grep -c "raft-assign node 3 failed" "$NN_DIR/log$L")
[ $rc = 0 ] && [ "$failed_first" = 0 ] && [ "$(nn_field "$L" epoch)" -gt "$E1" ]
ok $? "member $V removed ${ms} ms after its kill (epoch $(nn_field "$L" epoch) > $E1), node 3's promotion still pending" ||
	diag "$(grep -E "node (3|$V)" "$NN_DIR/log$L" | tail -8)"

kill -CONT "${NN_PIDS[3]}"
others=(); for i in 0 1 2; do [ "$i" != "$V" ] && others+=("$i"); done
nn_wait 20 nn_agree 3 "${others[@]}" 3
ok $? "node 3 continued and joined: members $(nn_field "$L" members) on every live node"

t0=$(nn_now_ms); nn_finish; st=$?; diag "finish took $(( $(nn_now_ms) - t0 )) ms"; (exit $st)
ok $? "every node stopped cleanly on SIGTERM, no sanitizer reports"
done_testing
