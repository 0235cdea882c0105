#!/usr/bin/env bash
# Remote monitors and links (zbmd/remote.h, docs/remote.md) between two
# nodes joined by net_memif (scripts/cluster-memif.sh), each hosting the
# actor runtime on its dataplane lcores (tests/dataplane/helper_remote_mon.c):
#   monitor of a remote actor: DOWN with its exit reason (normal, a crash),
#   noproc for a dead id and a never-used slot; demonitor (no DOWN after);
#   links both ways: a crash kills the linked peer on the other node, or
#   reaches it as an EXIT message when it traps exits; unlink and a normal
#   exit leave the peer alive; remote exit signals (kill included); link to
#   a dead remote actor: EXIT noproc; malformed signal records counted and
#   dropped; no table entries left; a membership view that drops the node:
#   noconnection at once, and the node drops its side; then the serving
#   node is killed with SIGKILL: the monitor gets DOWN and the linked actors
#   EXIT with ZB_ERR_PEER_DOWN (noconnection) within the peer timeout (2 s)
#   plus a tick (peer_timeout / 8), and new monitors/links to that node fail at once. Once with
#   one lane, once with two (~10 s).
. "$ZBMD_ROOT/tests/common/tap.sh"
. "$ZBMD_ROOT/tests/dataplane/lib.sh"
TAG=rmon$$
export ZBN_PREFIX=zbn-remote-mon
H=$ZBMD_BUILD/tests/dataplane/helper_remote_mon
trap '$ZBMD_ROOT/scripts/cluster-memif.sh --tag ${TAG}1 --dir $T/r1/cl down >/dev/null 2>&1; $ZBMD_ROOT/scripts/cluster-memif.sh --tag ${TAG}2 --dir $T/r2/cl down >/dev/null 2>&1; cleanup_lib' EXIT
NCHECKS=36
plan $((2 * (NCHECKS + 4)))

round() {
	local lc=$1 lanes=$2 dir=$T/r$2 cl="$ZBMD_ROOT/scripts/cluster-memif.sh --tag $TAG$2 --dir $T/r$2/cl"
	local d s rs rd n=0 line
	mkdir -p "$dir"
	# the 2-lane run sizes the link/monitor tables itself ([actors] remote_links)
	local xi=""; [ "$lanes" = 2 ] && xi=$'[actors]\nremote_links = 300'
	ZBN_EXTRA_INI="$xi" ZBN_LCORES=$lc $cl up 2 >/dev/null
	ok $? "[$lanes lane(s)] memif cluster configs written"
	sed -i '/^\[transport\]/a peer_timeout_ms = 2000' "$dir/cl/node1.ini" "$dir/cl/node2.ini"
	"$H" -c "$dir/cl/node1.ini" --drive "$dir/ids" --kill-flag "$dir/killed" >"$dir/drive.log" 2>&1 &
	d=$!; PIDS+=($d)
	wait_for "$dir/drive.log" '^READY' 30
	"$H" -c "$dir/cl/node2.ini" --serve "$dir/ids" >"$dir/serve.log" 2>&1 &
	s=$!; PIDS+=($s)
	wait_for "$dir/serve.log" '^READY' 30 && grep -q "^READY node=1 lanes=$lanes\$" "$dir/drive.log"
	ok $? "[$lanes lane(s)] both nodes up" ||
		{ diag "$(tail -5 "$dir/drive.log")"; diag "$(tail -5 "$dir/serve.log")"; }
	wait_for "$dir/drive.log" '^(PHASE kill|DONE)' 90 || diag "driver stuck: $(tail -3 "$dir/drive.log")"
	kill -KILL $s 2>/dev/null; touch "$dir/killed"
	wait $s 2>/dev/null; rs=$?
	ok $([ $rs -eq 137 ]; echo $?) "[$lanes lane(s)] serving node killed with SIGKILL (status $rs)"
	wait_exit $d 60 || kill -KILL $d 2>/dev/null
	wait $d; rd=$?
	driver_checks "$lanes lane(s)" "$dir/drive.log" $NCHECKS $rd
	$cl down >/dev/null 2>&1
}
round 0-1 1
round 0-2 2
done_testing
