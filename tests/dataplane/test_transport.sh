#!/usr/bin/env bash
# Two nodes in namespaces on net_af_packet exchange 3000 messages each way
# (16 B .. 256 KiB, 4 streams) over the reliable transport through a lossy
# link: 5 % loss, 1 % duplication, 25 % reordering. Every message must arrive
# exactly once, in order per stream, byte-identical (tests/dataplane/
# helper_xfer). The link is tc netem where the kernel has sch_netem; else
# tests/dataplane/helper_impair, a lossy hub on the wire (AF_PACKET) between
# the two veths, with the same rates.
. "$ZBMD_ROOT/tests/common/tap.sh"
. "$ZBMD_ROOT/tests/dataplane/lib.sh"
need_netns
TAG=nodetp$$
COUNT=${ZBMD_XFER_COUNT:-3000}
CL="$ZBMD_ROOT/scripts/cluster.sh --tag $TAG --dir $T/cl"
XFER=$ZBMD_BUILD/tests/dataplane/helper_xfer
IMPAIR=$ZBMD_BUILD/tests/dataplane/helper_impair
trap '$CL down >/dev/null 2>&1; cleanup_lib' EXIT
plan 12

# does this kernel have netem?
NT=zbn-$TAG-nt
netem=0
if ip netns add "$NT" 2>/dev/null; then
	ip -n "$NT" link add d0 type dummy 2>/dev/null &&
		tc -n "$NT" qdisc add dev d0 root netem loss 1% 2>/dev/null && netem=1
	ip netns del "$NT"
fi
if [ $netem -eq 1 ]; then
	$CL up 2 >/dev/null && $CL netem "delay 1ms loss 5% duplicate 1% reorder 25% 50%"
	ok $? "2 namespaces; tc netem loss 5% duplicate 1% reorder 25% on both links"
else
	diag "no sch_netem in this kernel: the lossy link is helper_impair"
	$CL up 2 --no-bridge >/dev/null &&
		{ $CL exec hub "$IMPAIR" --loss 5 --dup 1 --reorder 25 --seed 11 h1 h2 >"$T/impair" 2>&1 & }
	IP=$!; PIDS+=($IP)
	wait_for "$T/impair" 'ready' 20
	ok $? "2 namespaces joined by a lossy hub: loss 5% dup 1% reorder 25%"
fi

t0=$SECONDS
for i in 1 2; do
	$CL exec $i "$XFER" -c "$T/cl/node$i.ini" --count "$COUNT" --seed 5 >"$T/x$i" 2>&1 &
	eval X$i=$!; PIDS+=($!)
done
wait_for "$T/x1" '^READY' 60 && wait_for "$T/x2" '^READY' 60
ok $? "both transfer nodes ready"
# while it runs: 1000 forged frames at node 1's zbmd port (spoofed from
# node 2; random or truncated zbmd headers), sent into node 1's link
cat >"$T/forge.py" <<'PY'
import os, random, socket, struct, sys, time
random.seed(int(sys.argv[2]))
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((sys.argv[1], 0))
def csum(b):
    if len(b) % 2: b += b"\0"
    t = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while t >> 16: t = (t & 0xffff) + (t >> 16)
    return ~t & 0xffff
for i in range(1000):
    zb = bytearray(os.urandom(random.randint(0, 200)))
    if zb and i % 2: zb[0] = 1          # plausible version: fails later checks
    udp = struct.pack("!HHHH", 7403, 7403, 8 + len(zb), 0) + bytes(zb)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), i & 0xffff, 0, 64, 17, 0,
                     bytes([10, 77, 0, 2]), bytes([10, 77, 0, 1]))
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    f = bytes.fromhex("027a62000001027a62000002") + b"\x08\x00" + ip + udp
    if i % 5 == 0: f = f[:random.randint(14, len(f))]   # truncated
    s.send(f)
    if i % 50 == 49: time.sleep(0.005)
PY
$CL exec hub python3 "$T/forge.py" h1 7 &
FG=$!
wait_for "$T/x1" '^DONE' 90 && wait_for "$T/x2" '^DONE' 90
ok $? "both directions complete ($COUNT messages each, $((SECONDS - t0)) s)"
wait $FG; ok $? "1000 forged frames injected during the transfer"
kill -TERM $X1 $X2; wait $X1; r1=$?; wait $X2; r2=$?
[ $r1 -eq 0 ] && [ $r2 -eq 0 ]; ok $? "both exit 0 after SIGTERM (transfer verified: $r1 $r2)"
grep '^FAIL' "$T/x1" "$T/x2" | head -5 | while read -r l; do diag "$l"; done
for i in 1 2; do
	grep -qE "^RESULT node=$i sent=$COUNT acked=$COUNT failed=0 received=$COUNT bad=0 order=0 " "$T/x$i"
	ok $? "node $i: $COUNT sent and acked, $COUNT received exactly once, in order, intact"
done
r() { grep '^RESULT' "$T/x$1" | sed "s/.* $2=\([0-9]*\).*/\1/"; }
diag "node 1: $(grep '^RESULT' "$T/x1" | cut -d' ' -f9-)"
diag "node 2: $(grep '^RESULT' "$T/x2" | cut -d' ' -f9-)"
[ "$(r 1 retransmits)" -gt 0 ] && [ "$(r 2 retransmits)" -gt 0 ]
ok $? "losses were repaired by retransmission"
[ $(( $(r 1 dup_frames) + $(r 2 dup_frames) )) -gt 0 ] &&
	[ $(( $(r 1 ooo_frames) + $(r 2 ooo_frames) )) -gt 0 ]
ok $? "duplicates and reordering were seen and hidden"
[ "$(r 1 bad_frames)" -gt 0 ]
ok $? "node 1 refused and counted the forged frames (bad_frames=$(r 1 bad_frames)); transfer unaffected"
grep '^stats' "$T/x1" | grep -qE 'zc_frames=[1-9]'
ok $? "large payloads went out zero-copy (attached mbufs)"
if [ $netem -eq 0 ]; then
	kill -TERM $IP; wait $IP
	diag "$(grep 'impair:' "$T/impair" | tail -1)"
	grep -qE 'impair: forwarded=[1-9][0-9]* dropped=[1-9][0-9]* duplicated=[1-9][0-9]* reordered=[1-9]' "$T/impair"
	ok $? "the link did drop, duplicate and reorder"
else
	d=$(netem_drops)
	[ "${d:-0}" -gt 0 ]; ok $? "tc netem dropped frames on the node links (${d:-no netem qdisc})"
fi
done_testing
