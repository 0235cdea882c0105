#!/usr/bin/env bash
# A node killed (SIGKILL) and restarted. Three nodes in namespaces stream
# messages to each other (helper_xfer --survive --to all: 6 flows, 3000
# messages/s each, mixed sizes) over lossy links (loss 5 %, dup 1 %,
# reorder 25 %: netem or helper_impair, as the TAP output says). Node 2 is
# killed with kill -9 mid-stream and started again (new process, new
# epoch), in two rounds:
#  slow: peer_timeout_ms = 2000, restarted 1 s after its peers declared it
#        down. Each survivor (1 and 3) must declare it down, fail every
#        message pending for it with ZB_ERR_PEER_DOWN (send_done) and refuse
#        new sends with ZB_ERR_PEER_DOWN while it is down.
#  fast: peer_timeout_ms = 8000, restarted 0.2 s after the kill: the
#        survivors learn of the restart from the new epoch alone (no down)
#        and fail what was pending with ZB_ERR_EPOCH.
# Either way every message accepted is acknowledged or reported failed, none
# silently lost; the new sessions are exact both ways (what one side had
# acknowledged is what the other received since the restart, once, in
# order, intact, from the new process's first message); the flows between
# the survivors never notice. About 25 s.
. "$ZBMD_ROOT/tests/common/tap.sh"
. "$ZBMD_ROOT/tests/dataplane/lib.sh"
need_netns
TAG=zbdtrs$$
export ZBN_PREFIX=zbdt
CL="$ZBMD_ROOT/scripts/cluster.sh --tag $TAG --dir $T/cl"
XFER=$ZBMD_BUILD/tests/dataplane/helper_xfer
trap '$CL down >/dev/null 2>&1; cleanup_lib' EXIT
plan 37
COUNT=24000      # per destination, old processes
COUNT2=12000     # per destination, the restarted node 2

lossy_cluster 3 5 1 25 71
ok $? "3 namespaces, lossy links: $LOSSY_HOW"
diag "impairment: $LOSSY_HOW"

# round slow|fast
round() {
R=$1
if [ $R = slow ]; then PT=2000; else PT=8000; fi
sed -i '/^peer_timeout_ms/d; /^\[transport\]/a peer_timeout_ms = '$PT "$T"/cl/node[123].ini
X="--survive --to all --mix small --rate 3000 --seed 73"
for i in 1 2 3; do
	$CL exec $i "$XFER" -c "$T/cl/node$i.ini" $X --count $COUNT >"$T/$R.x$i" 2>&1 &
	PIDS+=($!); eval X$i=$!
done
r=0
for i in 1 3; do wait_for "$T/$R.x$i" "EVENT node=$i peer=2 up" 60 || r=1; done
ok $r "$R: 3 nodes up and streaming to each other"
sleep 1.5
kill -KILL $X2; wait $X2 2>/dev/null; kst=$?   # 137: it was running, SIGKILL ended it
t0=$(date +%s%N)
if [ $R = slow ]; then
	[ $kst -eq 137 ] &&
		wait_for "$T/$R.x1" 'EVENT node=1 peer=2 down' 15 && wait_for "$T/$R.x3" 'EVENT node=3 peer=2 down' 15
	ok $? "$R: node 2 killed (SIGKILL, wait status $kst): nodes 1 and 3 declare it down within $((($(date +%s%N) - t0) / 1000000)) ms"
	sleep 1
else
	sleep 0.2
	[ $kst -eq 137 ]
	ok $? "$R: node 2 killed (SIGKILL, wait status $kst), restarted 0.2 s later"
fi
$CL exec 2 "$XFER" -c "$T/cl/node2.ini" $X --count $COUNT2 >"$T/$R.x2b" 2>&1 &
X2=$!; PIDS+=($X2)
# back S: survivor S's first up/restarted event about node 2 after its
# initial up
back() { grep "^EVENT node=$1 peer=2 " "$T/$R.x$1" | sed 1d | grep -m1 -E " (up|restarted) "; }
deadline=$((SECONDS + 30))
until { [ -n "$(back 1)" ] && [ -n "$(back 3)" ]; } || [ $SECONDS -ge $deadline ]; do sleep 0.1; done
for s in 1 3; do
	old_ep=$(grep -m1 "EVENT node=$s peer=2 up" "$T/$R.x$s" | sed 's/.*epoch=\([0-9]*\).*/\1/')
	new_ep=$(back $s | sed 's/.*epoch=\([0-9]*\).*/\1/')
	[ -n "$new_ep" ] && [ -n "$old_ep" ] && [ "$new_ep" != "$old_ep" ]
	ok $? "$R: node 2 restarted: node $s sees its new incarnation (epoch $old_ep -> $new_ep: $(back $s | cut -d' ' -f4))"
done
r=0
for f in x1 x2b x3; do wait_for "$T/$R.$f" '^DONE' 90 || r=1; done
ok $r "$R: all finished sending; every message settled (acked or failed)"
kill -TERM $X1 $X2 $X3; r=0; codes=
for p in $X1 $X2 $X3; do wait $p; c=$?; codes="$codes $c"; [ $c -eq 0 ] || r=1; done
ok $r "$R: all exit 0 after SIGTERM: no duplicate, reordered or corrupt message ($codes)"
grep -h '^FAIL' "$T/$R.x1" "$T/$R.x2b" "$T/$R.x3" | head -5 | while read -r l; do diag "$l"; done
grep -h '^EVENT' "$T/$R.x1" "$T/$R.x3" "$T/$R.x2b" | while read -r l; do diag "$l"; done

# tx NODE TO KEY FILE / rx NODE FROM KEY FILE: a field of a TX / RX line
tx() { grep "^TX node=$1 to=$2 " "$4" | tr ' ' '\n' | sed -n "s/^$3=//p"; }
rx() { grep "^RX node=$1 from=$2 " "$4" | tr ' ' '\n' | sed -n "s/^$3=//p"; }
evf() { echo "$1" | sed "s/.* $2=\([0-9]*\).*/\1/"; }
# exact_or_bounded LABEL ACKED FAILED RECEIVED: should the loaded machine
# starve a node past peer_timeout (another down, a session reset), the
# messages failed then may or may not have arrived: acked <= received <=
# acked + failed, said in a diag; otherwise received = acked exactly.
exact_or_bounded() {
	if [ "$3" -eq 0 ]; then
		[ "$2" -gt 0 ] && [ "$4" -eq "$2" ]
	else
		diag "$1: $3 failed after the restart (a node was starved past peer_timeout)"
		[ "$2" -gt 0 ] && [ "$4" -ge "$2" ] && [ "$4" -le $(($2 + $3)) ]
	fi
	ok $? "$1: acked $2 (failed $3), received $4, each once, in order, intact"
}
for s in 1 3; do
	x=$T/$R.x$s
	sent=$(tx $s 2 sent "$x"); a=$(tx $s 2 acked "$x"); f=$(tx $s 2 failed "$x")
	fd=$(tx $s 2 failed_down "$x"); rf=$(tx $s 2 refused "$x")
	diag "$R: node $s -> 2: accepted $sent, acked $a, failed $f (peer down $fd, epoch $(tx $s 2 failed_epoch "$x")), refused at send $rf"
	fe=$(tx $s 2 failed_epoch "$x")
	if [ $R = slow ]; then
		[ -n "$sent" ] && [ "$sent" -eq $((a + f)) ] && [ "${fd:-0}" -gt 0 ]
		ok $? "$R: node $s: every message accepted for node 2 was acked or failed ($sent = $a + $f), those pending at its death with ZB_ERR_PEER_DOWN ($fd): none silently lost"
		[ "${rf:-0}" -gt 0 ]; ok $? "$R: node $s: sends while node 2 was down were refused with ZB_ERR_PEER_DOWN ($rf attempts)"
	else
		[ -n "$sent" ] && [ "$sent" -eq $((a + f)) ] && [ "${fe:-0}" -gt 0 ]
		ok $? "$R: node $s: every message accepted for node 2 was acked or failed ($sent = $a + $f), those pending at the restart with ZB_ERR_EPOCH ($fe): none silently lost"
		! grep -q "^EVENT node=$s peer=2 down" "$x"
		ok $? "$R: node $s learnt of the restart from the new epoch alone (no down event)"
	fi
	ev=$(back $s)
	exact_or_bounded "$R: new session $s -> 2" $((a - $(evf "$ev" acked))) $((f - $(evf "$ev" failed))) "$(rx 2 $s received "$T/$R.x2b")"
	a2=$(tx 2 $s acked "$T/$R.x2b"); f2=$(tx 2 $s failed "$T/$R.x2b")
	# (the old incarnation's last messages may be delivered after the
	# event: count by sender epoch)
	exact_or_bounded "$R: new session 2 -> $s" "$a2" "$f2" $(($(rx $s 2 received "$x") - $(rx $s 2 received_first "$x")))
	[ "$(rx $s 2 resyncs "$x")" = 2 ] && [ "$(rx $s 2 first_session "$x")" = 0 ]
	ok $? "$R: node $s received the new node 2's stream from its first message ($(rx $s 2 resyncs "$x") sender epochs, first index $(rx $s 2 first_session "$x"))"
	diag "$R: node $s from the old node 2 after the reset: $(rx $s 2 gaps "$x") messages skipped (failed to their sender), none repeated"
done
# the survivors' own flows
r=0
for s in 1 3; do
	o=$((4 - s))
	[ "$(tx $s $o acked "$T/$R.x$s")" = $COUNT ] && [ "$(tx $s $o failed "$T/$R.x$s")" = 0 ] &&
		[ "$(rx $o $s received "$T/$R.x$o")" = $COUNT ] && [ "$(rx $o $s resyncs "$T/$R.x$o")" = 1 ] &&
		[ "$(rx $o $s gaps "$T/$R.x$o")" = 0 ] || r=1
done
! grep -qE 'EVENT node=(1 peer=3|3 peer=1) (down|restarted)' "$T/$R.x1" "$T/$R.x3" && [ $r -eq 0 ]
ok $? "$R: flows 1 <-> 3: $COUNT messages each way, all acked, received once in order, one session throughout"
grep -q '^RESULT node=1 .* bad=0 order=0 ' "$T/$R.x1" && grep -q '^RESULT node=3 .* bad=0 order=0 ' "$T/$R.x3" &&
	grep -q '^RESULT node=2 .* bad=0 order=0 ' "$T/$R.x2b"
ok $? "$R: no malformed, duplicate or out-of-order delivery anywhere"
}
round slow
round fast
impair_stop; diag "$(impair_line)"
done_testing
