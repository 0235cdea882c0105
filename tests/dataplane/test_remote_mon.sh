#!/usr/bin/env bash
# Remote monitors and links (zbmd/remote.h, docs/remote.md) between two
# nodes joined by net_memif (scripts/cluster-memif.sh), each hosting the
# actor runtime on its dataplane lcores (tests/dataplane/helper_remote_mon.c):
#   monitor of a remote actor: DOWN with its exit reason (normal, a crash),
#   noproc for a dead id and a never-used slot; demonitor (no DOWN after);
#   links both ways: a crash kills the linked peer on the other node, or
#   reaches it as an EXIT message when it traps exits; unlink and a normal
#   exit leave the peer alive; link to a dead remote actor: EXIT noproc;
#   malformed signal records counted and dropped; no table entries left;
#   then the serving node is killed with SIGKILL: the monitor gets DOWN and
#   the linked actors EXIT with ZB_ERR_PEER_DOWN (noconnection) within the
#   peer timeout (2 s) plus a tick, and new monitors/links to that node fail
#   at once. ~15 s.
. "$ZBMD_ROOT/tests/common/tap.sh"
. "$ZBMD_ROOT/tests/dataplane/lib.sh"
TAG=rmon$$
export ZBN_PREFIX=zbn-remote-mon
H=$ZBMD_BUILD/tests/dataplane/helper_remote_mon
CL="$ZBMD_ROOT/scripts/cluster-memif.sh --tag $TAG --dir $T/cl"
trap '$CL down >/dev/null 2>&1; cleanup_lib' EXIT
NCHECKS=33
plan $((NCHECKS + 4))

ZBN_LCORES=0-1 $CL up 2 >/dev/null
ok $? "memif cluster configs written"
sed -i '/^\[transport\]/a peer_timeout_ms = 2000' "$T/cl/node1.ini" "$T/cl/node2.ini"
"$H" -c "$T/cl/node1.ini" --drive "$T/ids" --kill-flag "$T/killed" >"$T/drive.log" 2>&1 &
d=$!; PIDS+=($d)
wait_for "$T/drive.log" '^READY' 30
"$H" -c "$T/cl/node2.ini" --serve "$T/ids" >"$T/serve.log" 2>&1 &
s=$!; PIDS+=($s)
wait_for "$T/serve.log" '^READY' 30 && grep -q '^READY node=1' "$T/drive.log"
ok $? "both nodes up" || { diag "$(tail -5 "$T/drive.log")"; diag "$(tail -5 "$T/serve.log")"; }
wait_for "$T/drive.log" '^(PHASE kill|DONE)' 90 || diag "driver stuck: $(tail -3 "$T/drive.log")"
kill -KILL $s 2>/dev/null; touch "$T/killed"
wait $s 2>/dev/null; rs=$?
ok $([ $rs -eq 137 ]; echo $?) "serving node killed with SIGKILL (status $rs)"
wait_exit $d 60 || kill -KILL $d 2>/dev/null
wait $d; rd=$?
n=0
while IFS= read -r line; do
	n=$((n + 1))
	case $line in
	"CHECK ok "*) ok 0 "${line#CHECK ok }" ;;
	*) ok 1 "${line#CHECK fail }" ;;
	esac
done < <(grep '^CHECK ' "$T/drive.log")
while [ $n -lt $NCHECKS ]; do n=$((n + 1)); ok 1 "driver check $n missing"; done
grep '^FIGURE' "$T/drive.log" | while IFS= read -r l; do diag "$l"; done
[ $rd -eq 0 ] || diag "$(grep -v "^CHECK" "$T/drive.log" | grep -v "^EAL\|^memif" | tail -12)"
ok $([ $rd -eq 0 ]; echo $?) "driver exits 0 (exit $rd)"
done_testing
