#!/usr/bin/env bash
# Two nodes in network namespaces on net_af_packet (scripts/cluster.sh):
# they answer ARP and ping from a kernel namespace, resolve each other by ARP,
# survive random and truncated frames, and stop cleanly.
. "$ZBMD_ROOT/tests/common/tap.sh"
. "$ZBMD_ROOT/tests/dataplane/lib.sh"
need_netns
TAG=node$$
CL="$ZBMD_ROOT/scripts/cluster.sh --tag $TAG --dir $T/cl"
trap '$CL down >/dev/null 2>&1; cleanup_lib' EXIT
plan 17

ZBN_PEER_MAC=arp $CL up 2 >/dev/null; ok $? "cluster up: 2 namespaces on a bridge"
# (node 1's config has the peer, without a mac line: a missing file or
# section is no proof)
grep -A3 '^\[peer.2\]' "$T/cl/node1.ini" >"$T/peer2" && grep -q '^ip' "$T/peer2" &&
	! grep -q '^mac' "$T/peer2"
ok $? "peers' MACs left to ARP"
$CL start >/dev/null; ok $? "both nodes ready"

$CL exec probe ping -c 3 -i 0.2 -W 5 10.77.0.1 >"$T/ping1"; ok $? "ping node 1 from the probe namespace"
$CL exec probe ping -c 3 -i 0.2 -W 5 -s 1400 10.77.0.2 >"$T/ping2"; ok $? "ping node 2 with 1400-byte payloads"
$CL exec probe ip neigh show 10.77.0.1 | grep -q '02:7a:62:00:00:01'
ok $? "probe learnt node 1's MAC by ARP"

# nodes ARP for each other (200 ms retry): each learns the other's MAC
deadline=$((SECONDS + 20)); learnt=0
while [ $SECONDS -lt $deadline ]; do
	for i in 1 2; do kill -USR1 "$(cat "$T/cl/node$i.pid")"; done
	sleep 0.5
	n=0; for i in 1 2; do grep '^stats' "$T/cl/node$i.log" | tail -1 | grep -q 'arp_learned=1' && n=$((n + 1)); done
	[ $n -eq 2 ] && { learnt=1; break; }
done
[ $learnt -eq 1 ]; ok $? "each node resolved its peer by ARP"

# garbage: random lengths 0..100 and random bytes, to the broadcast and to node 1
cat >"$T/junk.py" <<'PY'
import os, random, socket, struct, time
random.seed(7)
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("eth0", 0))
src = open("/sys/class/net/eth0/address").read().strip().replace(":", "")
for i in range(2000):
    dst = bytes.fromhex("027a62000001") if i % 2 else b"\xff" * 6
    et = random.choice([0x0806, 0x0800, 0x86dd, 0x1234])
    body = os.urandom(random.randint(0, 100))
    if et == 0x0800 and i % 3 == 0:   # plausible IPv4/UDP header, bad lengths
        body = struct.pack("!BBHHHBBH4s4s", 0x45, 0, random.randint(0, 3000), 0, 0, 64, 17, 0,
                           bytes([10, 77, 0, 254]), bytes([10, 77, 0, 1])) + os.urandom(8)
    f = dst + bytes.fromhex(src) + struct.pack("!H", et) + body
    s.send(f[:max(14, len(f))])
    if i % 50 == 49:
        time.sleep(0.01)   # the af_packet ring holds 512 frames: pace
PY
stat() { grep '^stats' "$T/cl/node1.log" | tail -1 | sed "s/.* $1=\([0-9]*\).*/\1/"; }
kill -USR1 "$(cat "$T/cl/node1.pid")"; sleep 0.5
rx0=$(stat rx_packets); dr0=$(stat rx_drops)
$CL exec probe python3 "$T/junk.py"; ok $? "2000 random/truncated frames sent"
sleep 0.5; kill -USR1 "$(cat "$T/cl/node1.pid")"; sleep 0.5
rx1=$(stat rx_packets); dr1=$(stat rx_drops)
# (the kernel bridge itself filters some malformed frames: count what came)
[ $((rx1 - rx0)) -ge 800 ] && [ $((dr1 - dr0)) -ge $((rx1 - rx0 - 3)) ]
ok $? "node 1 dropped and counted every junk frame it got ($((rx1 - rx0)) received, $((dr1 - dr0)) dropped)"
$CL exec probe ping -c 2 -i 0.2 -W 5 10.77.0.1 >/dev/null; ok $? "node 1 still answers ping after the junk"

# requests naming a broadcast asker (ARP sha, or an echo's Ethernet
# source) are not answered: no frame to every host for one frame in;
# the same requests from the probe's own MAC are (the check can fail)
cat >"$T/bcast.py" <<'PY'
import socket, struct, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("eth0", 0))
me = bytes.fromhex(open("/sys/class/net/eth0/address").read().strip().replace(":", ""))
ask = b"\xff" * 6 if sys.argv[1] == "bcast" else me
node = bytes.fromhex("027a62000001")
def csum(b):
    if len(b) % 2: b += b"\0"
    t = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while t >> 16: t = (t & 0xffff) + (t >> 16)
    return ~t & 0xffff
for i in range(5):
    arp = struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1, ask, bytes([10, 77, 0, 254]),
                      b"\0" * 6, bytes([10, 77, 0, 1]))
    s.send(b"\xff" * 6 + me + struct.pack("!H", 0x0806) + arp)
    icmp = struct.pack("!BBHHH", 8, 0, 0, 77, i) + b"x" * 32
    icmp = icmp[:2] + struct.pack("!H", csum(icmp)) + icmp[4:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(icmp), 0, 0, 64, 1, 0,
                     bytes([10, 77, 0, 254]), bytes([10, 77, 0, 1]))
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    s.send(node + ask + struct.pack("!H", 0x0800) + ip + icmp)
    time.sleep(0.02)
PY
kill -USR1 "$(cat "$T/cl/node1.pid")"; sleep 0.5
a0=$(stat arp_replies); i0=$(stat icmp_replies)
$CL exec probe python3 "$T/bcast.py" bcast
sleep 0.3; kill -USR1 "$(cat "$T/cl/node1.pid")"; sleep 0.5
a1=$(stat arp_replies); i1=$(stat icmp_replies)
$CL exec probe python3 "$T/bcast.py" unicast
sleep 0.3; kill -USR1 "$(cat "$T/cl/node1.pid")"; sleep 0.5
a2=$(stat arp_replies); i2=$(stat icmp_replies)
[ "$a1" = "$a0" ] && [ "$i1" = "$i0" ]
ok $? "no reply to 5 ARP requests and 5 echoes from a broadcast asker (ARP $a0 -> $a1, ICMP $i0 -> $i1)"
[ $((a2 - a1)) -eq 5 ] && [ $((i2 - i1)) -eq 5 ]
ok $? "the same from the probe's MAC answered (ARP +$((a2 - a1)), ICMP +$((i2 - i1)))"

# host rules, frames sent from the hub into node 1's veth (h1: past the
# bridge, whose netfilter would drop some of them): node 2's MAC is not
# taken from a gratuitous ARP, an unsolicited reply or a request for
# another host, nor from a request whose Ethernet source is not the MAC it
# claims; a request for node 1's IP from 10.77.0.2 is (a peer resolving
# us), and the real MAC is taught back the same way; ARP not answered is
# counted in rx_drops; no echo reply to a source no host may have
# (127.0.0.1, node 1's own address), nor to an echo with IP options; a
# plain echo is answered (each check can fail)
cat >"$T/rules.py" <<'PY'
import socket, struct, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("h1", 0))
node, peer = bytes.fromhex("027a62000001"), bytes.fromhex(sys.argv[2])
nip, pip, me = bytes([10, 77, 0, 1]), bytes([10, 77, 0, 2]), bytes([10, 77, 0, 254])
bc, x = b"\xff" * 6, bytes.fromhex("0200deadbeef")
def csum(b):
    if len(b) % 2: b += b"\0"
    t = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while t >> 16: t = (t & 0xffff) + (t >> 16)
    return ~t & 0xffff
def arp(src, op, sha, sip, tip, dst=bc):
    return dst + src + b"\x08\x06" + struct.pack("!HHBBH", 1, 0x0800, 6, 4, op) + sha + sip + b"\0" * 6 + tip
def echo(src, opts=b""):
    icmp = struct.pack("!BBHHH", 8, 0, 0, 99, 1) + b"y" * 24
    icmp = icmp[:2] + struct.pack("!H", csum(icmp)) + icmp[4:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45 + len(opts) // 4, 0, 20 + len(opts) + len(icmp), 0, 0, 64,
                     1, 0, src, nip) + opts
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    return node + x + b"\x08\x00" + ip + icmp
frames = {
    "poison": [arp(x, 1, x, pip, pip), arp(x, 2, x, pip, nip, node), arp(x, 1, x, pip, bytes([10, 77, 0, 99])),
               arp(peer, 1, x, pip, nip)],
    "learn": [arp(x, 1, x, pip, nip)],
    "restore": [arp(peer, 1, peer, pip, nip)],
    "other": [arp(x, 1, x, me, bytes([10, 77, 0, 99]))],
    "martian": [echo(bytes([127, 0, 0, 1])), echo(nip), echo(me, bytes([7, 7, 4, 0, 0, 0, 0, 0]))],
    "plain": [echo(me)],
}[sys.argv[1]]
for f in frames:
    s.send(f)
    time.sleep(0.02)
PY
P2MAC=$(grep -m1 '^mac' "$T/cl/node2.ini" | tr -d ' ' | cut -d= -f2 | tr -d :)
rules() {  # KIND: send, then node 1's counters as "learned drops icmp"
	kill -USR1 "$(cat "$T/cl/node1.pid")"; sleep 0.4
	local b="$(stat arp_learned) $(stat rx_drops) $(stat icmp_replies)"
	$CL exec hub python3 "$T/rules.py" "$1" "$P2MAC"
	sleep 0.3; kill -USR1 "$(cat "$T/cl/node1.pid")"; sleep 0.4
	set -- $b "$(stat arp_learned)" "$(stat rx_drops)" "$(stat icmp_replies)"
	echo "$(($4 - $1)) $(($5 - $2)) $(($6 - $3))"
}
r1=$(rules poison); r2=$(rules learn); r3=$(rules restore); r4=$(rules other)
# (the 4th forged frame asks for node 1's IP: answered, not dropped)
[ -n "$P2MAC" ] && [ "$r1" = "0 3 0" ] && [ "$r2" = "1 0 0" ] && [ "$r3" = "1 0 0" ] && [ "$r4" = "0 1 0" ]
ok $? "ARP: 4 forged frames teach nothing, the 3 unanswered counted (learned drops icmp: $r1), a request from 10.77.0.2 for node 1 teaches ($r2, back: $r3), one for another host is counted ($r4)"
r5=$(rules martian); r6=$(rules plain)
[ "$r5" = "0 3 0" ] && [ "$r6" = "0 0 1" ]
ok $? "no echo reply to 127.0.0.1, to node 1's own address or with IP options ($r5); a plain echo answered ($r6)"
# 1600 bytes of ping: the probe's kernel fragments it, the af_packet port
# gets what node 1's kernel reassembled, 1642 bytes on an MTU of 1500:
# dropped and counted (it was answered with a frame the link dropped)
kill -USR1 "$(cat "$T/cl/node1.pid")"; sleep 0.4
i0=$(stat icmp_replies); d0=$(stat rx_drops)
$CL exec probe ping -c 2 -i 0.2 -W 1 -s 1600 10.77.0.1 >/dev/null 2>&1
sleep 0.3; kill -USR1 "$(cat "$T/cl/node1.pid")"; sleep 0.4
i1=$(stat icmp_replies); d1=$(stat rx_drops)
[ "$i1" = "$i0" ] && [ $((d1 - d0)) -ge 2 ]
ok $? "an echo longer than the MTU (reassembled by the kernel) is dropped and counted, not answered (icmp +$((i1 - i0)), drops +$((d1 - d0)))"

$CL stop; ok $? "both nodes exit 0 on SIGTERM"
grep -q '^zbmd: stopped cleanly' "$T/cl/node1.log" && grep -q '^zbmd: stopped cleanly' "$T/cl/node2.log"
ok $? "both logs say stopped cleanly"
done_testing
