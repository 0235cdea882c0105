#!/usr/bin/env bash
# `zbmd control` / `zbmd status` / `zbmd bench phi` on bad input: clear
# errors and exit statuses, never a crash or a hang.
source "$ZBMD_ROOT/tests/common/tap.sh"
plan 30
Z=$ZBMD_BUILD/bin/zbmd
D=$(mktemp -d /tmp/zbctl-cli-XXXXXX)
trap 'rm -rf "$D"' EXIT
$Z control >/dev/null 2>&1; [ $? -eq 2 ]; ok $? "control without -c: usage (2)"
$Z control -c "$D/none.ini" 2>"$D/err"; [ $? -eq 2 ] && grep -q "none.ini" "$D/err"
ok $? "control with a missing file: names it, exit 2 (as zbmd run and status; it was 1)"
echo "secret key of enough length" > "$D/psk"; chmod 644 "$D/psk"
cat > "$D/n.ini" <<EOT
[node]
id = 0
[cluster]
id = 5
seeds = 127.0.0.1:17600
psk_file = $D/psk
[control]
listen = 127.0.0.1:17600
raft_dir = $D/raft
admin_listen = 127.0.0.1:17601
[metrics]
listen = 127.0.0.1:17602
EOT
timeout 10 $Z control -c "$D/n.ini" 2>"$D/err"; [ $? -eq 1 ] && grep -q "chmod 600" "$D/err"
ok $? "PSK file readable by others: refused to start ($(head -c 90 "$D/err"))"
$Z status --admin 127.0.0.1:1 2>"$D/err"; [ $? -eq 1 ] && grep -q "cannot reach" "$D/err"
ok $? "status with nothing listening: clear error, exit 1"
$Z status --admin nonsense 2>/dev/null; [ $? -eq 1 ]; ok $? "status with a bad address: exit 1"
$Z status --bogus 2>/dev/null; [ $? -eq 2 ]; ok $? "status with an unknown flag: usage (2)"
$Z status --admin 127.0.0.1:1junk 2>"$D/err"; [ $? -eq 1 ] && grep -q "is not ip:port" "$D/err"
ok $? "status with junk after the port: not ip:port, exit 1 (it used to connect to port 1)"
# A node whose replies are cut short: an error and exit 1, not half a status
# printed with exit 0. A one-shot HTTP server per case.
fake() {  # PORT STATUS_BODY ITS_LENGTH METRICS_BODY ITS_LENGTH READY_FILE
	python3 - "$@" <<'PY' &
import socket, sys
port, sbody, slen, mbody, mlen = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port)); s.listen(4); s.settimeout(20)
open(sys.argv[6], "w").close()   # listening
for _ in range(2):
    try:
        c, _ = s.accept()
    except OSError:
        break
    req = c.recv(4096).decode()
    body, n = (mbody, mlen) if "/metrics" in req else (sbody, slen)
    c.sendall(("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (n, body)).encode())
    c.close()
PY
	FAKE=$!
	for _ in $(seq 100); do [ -e "$6" ] && break; sleep 0.1; done
}
fake 17611 '{"a":[1,2' 10 x 1 "$D/ready1"
$Z status --json --admin 127.0.0.1:17611 >"$D/out" 2>"$D/err"; rc=$?
kill $FAKE 2>/dev/null; wait $FAKE 2>/dev/null
[ $rc -eq 1 ] && grep -q "bad reply from 127.0.0.1:17611: 9 bytes of a body of 10" "$D/err" && [ ! -s "$D/out" ]
ok $? "status: a reply cut short is an error (exit $rc: $(head -c 100 "$D/err"))"
fake 17612 'state leader' 12 'zbmd_dp' 500 "$D/ready2"
$Z status --admin 127.0.0.1:17612 >"$D/out" 2>"$D/err"; rc=$?
kill $FAKE 2>/dev/null; wait $FAKE 2>/dev/null
[ $rc -eq 1 ] && grep -q "7 bytes of a body of 500" "$D/err"
ok $? "status: /metrics cut short after a good /status is an error too (exit $rc)"
# servers that answer wrongly: a reply trickled a byte every 0.4 s (each
# read came within the 3 s a read had, so status waited for ever), a 404
# (it said "bad reply" and no more), a 200 with no body (exit 0, nothing)
cat >"$D/odd.py" <<'PY'
import socket, sys, time
port, mode, ready = int(sys.argv[1]), sys.argv[2], sys.argv[3]
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port)); s.listen(4); s.settimeout(20)
open(ready, "w").close()
c, _ = s.accept(); c.recv(4096)
if mode == "trickle":
    r = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + b"x" * 100
    try:
        for b in r:
            c.send(bytes([b])); time.sleep(0.4)
    except OSError: pass
elif mode == "404":
    c.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 31\r\n\r\nthe status is on the admin port")
else:
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
c.close()
PY
bad=0
for m in "trickle:17613:no whole reply from 127.0.0.1:17613 within 3 s" \
	 "404:17614:127.0.0.1:17614 answered 404 to GET /status (\"the status is on the admin port\")" \
	 "empty:17615:127.0.0.1:17615 answered GET /status with an empty body"; do
	mode=${m%%:*}; rest=${m#*:}; port=${rest%%:*}; want=${rest#*:}
	timeout 30 python3 "$D/odd.py" "$port" "$mode" "$D/odd-$mode" & op=$!
	for _ in $(seq 100); do [ -e "$D/odd-$mode" ] && break; sleep 0.1; done
	t0=$(date +%s%N)
	timeout 20 $Z status --admin "127.0.0.1:$port" >"$D/out" 2>"$D/err"; rc=$?
	ms=$(( ($(date +%s%N) - t0) / 1000000 ))
	kill $op 2>/dev/null; wait $op 2>/dev/null
	[ $rc -eq 1 ] && grep -qF -- "$want" "$D/err" && [ $ms -lt 6000 ] ||
		{ bad=1; diag "$mode: exit $rc after $ms ms: $(head -1 "$D/err")"; }
done
ok $bad "status against a trickling server (out within 3 s), a 404 (the code and its words) and an empty 200: exit 1, said why"
sed 's/^admin_listen = .*/admin_listen = ""/' "$D/n.ini" >"$D/noadmin.ini"
$Z status -c "$D/noadmin.ini" 2>"$D/err"; [ $? -eq 1 ] && grep -q "admin API is off" "$D/err"
ok $? "status -c on a config without an admin endpoint: says so, exit 1"
$Z bench phi -t 0 2>/dev/null; [ $? -eq 2 ]; ok $? "bench phi with 0 trials: usage (2)"
# a config that does not load: every diagnostic with its FILE:LINE, exit 2,
# as zbmd run and check-config (control exited 1; both said the first only)
printf '[node]\nid = x\nbogus = 1\n' >"$D/bad.ini"
bad=0
for c in control status; do
	timeout 10 $Z $c -c "$D/bad.ini" >/dev/null 2>"$D/err"; rc=$?
	[ $rc -eq 2 ] && grep -q "bad.ini:2: node.id: 'x'" "$D/err" && grep -q "bad.ini:3: unknown key 'bogus'" "$D/err" ||
		{ bad=1; diag "zbmd $c -c bad.ini: exit $rc: $(tr '\n' '|' <"$D/err")"; }
done
ok $bad "control and status on a bad config: every FILE:LINE diagnostic, exit 2"
# the top level: what users type first, and what they mistype
bad=0
for a in "--help" "-h" "help" "bench --help"; do
	$Z $a >"$D/out" 2>"$D/err"; rc=$?
	[ $rc -eq 0 ] && grep -q "^usage: zbmd" "$D/out" && [ ! -s "$D/err" ] ||
		{ bad=1; diag "zbmd $a: exit $rc"; }
done
$Z --version >"$D/out" 2>&1 && grep -q "^zbmd [0-9]" "$D/out" || { bad=1; diag "--version"; }
ok $bad "zbmd --help / -h / help / bench --help / --version: exit 0, on stdout"
bad=0
for a in "nosuch:unknown command 'nosuch'" "bench nosuch:unknown benchmark 'nosuch'" \
	 "version x:unexpected argument 'x'" "help nosuch:unknown command 'nosuch'" \
	 "status extra:unexpected argument 'extra'" "status -c X --admin Y:give one" \
	 "control -c f extra:unexpected argument 'extra'" "control:-c FILE is required" \
	 "run -c f extra:unexpected argument 'extra'" "check-config a b:'b' is a second" \
	 "check-config -x:unknown option '-x'" "config-doc extra:unexpected argument 'extra'"; do
	$Z ${a%%:*} >/dev/null 2>"$D/err"; rc=$?
	[ $rc -eq 2 ] && grep -qF -- "${a#*:}" "$D/err" || { bad=1; diag "zbmd ${a%%:*}: exit $rc"; }
done
ok $bad "an unknown command, benchmark or argument, extra words, clashing flags: named, exit 2 (the usage line alone said nothing)"
$Z help status >"$D/out" 2>"$D/err"; rc=$?
[ $rc -eq 0 ] && grep -q "^usage: zbmd status" "$D/out" && [ ! -s "$D/err" ]
ok $? "zbmd help COMMAND: that command's --help (it listed every command and ignored the word)"
# every command's --help: exit 0, the usage on stdout, nothing on stderr
bad=0
for c in gpu-info rdma-info status check-config run control local "bench allreduce" \
	 "bench phi" "bench gpu" config-doc version; do
	$Z $c --help >"$D/out" 2>"$D/err"; rc=$?
	[ $rc -eq 0 ] && grep -q "^usage: zbmd ${c%% *}" "$D/out" && [ ! -s "$D/err" ] ||
		{ bad=1; diag "zbmd $c --help: exit $rc, $(wc -l <"$D/err") line(s) on stderr"; }
done
ok $bad "zbmd COMMAND --help for all 12: exit 0, usage on stdout"
# benchmarks' flags: the bad one named, exit 2, nothing run
bad=0
for a in "phi -t 5x:bad value '5x' for -t" "phi --bogus:unknown option '--bogus'" \
	 "phi -j 91:bad value '91' for -j" "phi extra:unexpected argument 'extra'" \
	 "phi -m:-m needs a value" "gpu --backend:--backend needs a value" \
	 "gpu -x:unknown option '-x'" "gpu extra:unexpected argument 'extra'"; do
	timeout 20 $Z bench ${a%%:*} >"$D/out" 2>"$D/err"; rc=$?
	[ $rc -eq 2 ] && grep -qF -- "${a#*:}" "$D/err" && [ ! -s "$D/out" ] ||
		{ bad=1; diag "zbmd bench ${a%%:*}: exit $rc: $(head -1 "$D/err")"; }
done
ok $bad "zbmd bench phi / gpu with a bad flag or value: named, exit 2, nothing run"
# bench gpu takes --opt=value as the other commands do (it was an unknown
# option); phi's -m has a floor that still measures something; phi's rows
# are written as they come (stopped in the real UDP run, a file kept none)
bad=0
timeout 60 $Z bench gpu --quick --backend=cpu --dtype=f32 >"$D/out" 2>"$D/err" &&
	grep -q "reduce float" "$D/out" || { bad=1; diag "bench gpu --backend=cpu: $(head -1 "$D/err")"; }
for a in "gpu --quick=1:--quick takes no value" "gpu --bogus=3:unknown option '--bogus=3'" \
	 "phi -m 0.01:bad value '0.01' for -m (expected 0.1..1000)"; do
	timeout 20 $Z bench ${a%%:*} >/dev/null 2>"$D/err"; rc=$?
	[ $rc -eq 2 ] && grep -qF -- "${a#*:}" "$D/err" || { bad=1; diag "zbmd bench ${a%%:*}: exit $rc: $(head -1 "$D/err")"; }
done
timeout 6 $Z bench phi -m 0.5 -t 2 -r 60 -j 2.5 >"$D/phi" 2>/dev/null
[ "$(grep -c 'min$' "$D/phi")" = 4 ] && grep -q 'U\[0,2.5) ms' "$D/phi" ||
	{ bad=1; diag "bench phi stopped: $(wc -l <"$D/phi") line(s) kept: $(tr '\n' '|' <"$D/phi")"; }
ok $bad "bench gpu --backend=cpu runs, --quick=1 / --bogus=3 named; phi -m 0.01 refused, its rows kept when stopped, -j 2.5 said as given"
# output that cannot be written is a failure (config-doc > a full disk: exit 0, half a file)
bad=0
for c in config-doc version "help status" gpu-info; do
	$Z $c >/dev/full 2>"$D/err"; rc=$?
	[ $rc -eq 1 ] && grep -q "zbmd: writing the output: No space left on device" "$D/err" ||
		{ bad=1; diag "zbmd $c >/dev/full: exit $rc: $(head -1 "$D/err")"; }
done
ok $bad "stdout on a full device: exit 1 and the reason (config-doc, version, help, gpu-info)"
# bench phi stops at its first row that cannot be written (it ran on, the
# real-time phase included: -r 86400 would have been a day)
t0=$(date +%s%N)
timeout 60 $Z bench phi -m 5 -t 20 -r 5 >/dev/full 2>"$D/err"; rc=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
[ $rc -eq 1 ] && [ $ms -lt 3000 ] && [ "$(grep -c "writing the output: No space left on device" "$D/err")" -eq 1 ]
ok $? "bench phi >/dev/full: exit $rc after $ms ms, the reason said once"
chmod 600 "$D/psk"
# an admin address in use: the key and the reason named
python3 -c 'import socket,time; s=socket.socket(); s.bind(("127.0.0.1",17605)); s.listen(1); open("'"$D"'/held","w").close(); time.sleep(20)' & hp=$!
for _ in $(seq 100); do [ -e "$D/held" ] && break; sleep 0.1; done
sed 's/^admin_listen = .*/admin_listen = 127.0.0.1:17605/' "$D/n.ini" >"$D/inuse.ini"
timeout 20 $Z control -c "$D/inuse.ini" 2>"$D/err"; rc=$?
kill $hp 2>/dev/null; wait $hp 2>/dev/null
[ $rc -eq 1 ] && grep -q "\[control\] admin_listen: cannot listen on 127.0.0.1:17605 (http): Address already in use" "$D/err"
ok $? "admin_listen in use: exit $rc, the key and the reason named ($(grep -o 'cannot listen.*' "$D/err" | head -1))"
$Z control -c "$D/n.ini" 2>"$D/log" & pid=$!
# Poll for readiness (sanitizer builds on a loaded machine start slowly).
out=
for _ in $(seq 1 100); do
	out=$($Z status -c "$D/n.ini" 2>/dev/null) && echo "$out" | grep -q "^state leader" && break
	sleep 0.2
done
# 40 clients holding connections open with a byte a second (more than the
# 16 connections that used to be all there was): the status still answers,
# and the slow ones are shut down and counted
cat >"$D/slow.py" <<'PY'
import socket, sys, time
port, n, secs = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
ss = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
req = b"GET /status HTTP/1.1\r\nX-A: " + b"a" * 1000
t0, k = time.time(), 0
while time.time() - t0 < secs:
    for s in ss:
        try: s.send(req[k:k + 1])
        except OSError: pass
    k += 1; time.sleep(1)
PY
slow_ok=0 slow_bad=0
if echo "$out" | grep -q "^state leader"; then
	timeout 30 python3 "$D/slow.py" 17601 40 9 & sp=$!
	sleep 2
	for _ in $(seq 1 10); do
		timeout 5 $Z status -c "$D/n.ini" 2>/dev/null | grep -q "^state leader" &&
			slow_ok=$((slow_ok + 1)) || slow_bad=$((slow_bad + 1))
		sleep 0.5
	done
	wait $sp
fi
cut=$(timeout 10 python3 -c 'import urllib.request as u; print(u.urlopen("http://127.0.0.1:17601/metrics").read().decode())' |
	awk '/^zbmd_control_http_dropped_total\{node="0",why="slow"\}/ {print $2}')
[ $slow_bad -eq 0 ] && [ $slow_ok -eq 10 ] && [ "${cut:-0}" -ge 40 ]
ok $? "40 clients trickling a byte a second: status answered $slow_ok of 10 times during it, $cut slow connections shut down"
# 300 connections held open from loopback: the 44 past the 256 are refused
# and counted (libmicrohttpd refused them itself, before the accept policy
# counted anything: dropped{why="limit"} stayed 0)
lim0=$(timeout 10 python3 -c 'import urllib.request as u; print(u.urlopen("http://127.0.0.1:17601/metrics").read().decode())' |
	awk '/^zbmd_control_http_dropped_total\{node="0",why="limit"\}/ {print $2}')
timeout 20 python3 -c '
import socket, time
ss = []
for _ in range(300):
    try: ss.append(socket.create_connection(("127.0.0.1", 17601), timeout=2))
    except OSError: pass
time.sleep(1.5)' 2>/dev/null
lim=$(timeout 10 python3 -c 'import urllib.request as u; print(u.urlopen("http://127.0.0.1:17601/metrics").read().decode())' |
	awk '/^zbmd_control_http_dropped_total\{node="0",why="limit"\}/ {print $2}')
[ -n "$lim" ] && [ "$(( ${lim%.*} - ${lim0%.*} ))" -ge 30 ]
ok $? "300 connections held from loopback: those past the limit counted as dropped (limit ${lim0:-none} -> ${lim:-none})"
# a node holding the key that heartbeats with a new incarnation every
# message (2000 in 2.5 s): its restarts are logged once a second,
# not once each (460 lines a second before)
cat >"$D/hb.py" <<'PY'
import hashlib, hmac, socket, struct, sys, time
psk = open(sys.argv[1], "rb").read().rstrip(b"\n\r \t")
key = hashlib.blake2b(psk, digest_size=32, key=b"zbmd-cluster-psk").digest()
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
ctr = time.time_ns()
for inc in range(1, 2001):
    ctr += 1
    addr = b"127.0.0.1:17699"
    hb = struct.pack("<QQQH", inc, 0, 0, 0xffff) + bytes([len(addr)]) + addr + bytes([0])
    h = struct.pack("<IBBHIQ", 0x3143425a, 1, 1, 7, 5, ctr) + hb
    s.sendto(h + hmac.new(key, h, hashlib.sha512).digest()[:32], ("127.0.0.1", 17600))
    if inc % 200 == 0:
        time.sleep(0.25)
PY
timeout 20 python3 "$D/hb.py" "$D/psk"
sleep 0.5
nr=$(grep -c "node 7 restarted" "$D/log")
[ "$nr" -ge 1 ] && [ "$nr" -le 4 ] && grep -q "node 7 restarted (and [0-9]* times more in the last second, not logged)" "$D/log"
ok $? "2000 heartbeats from node 7, each a new incarnation: $nr 'restarted' lines, the rest counted in them"
codes=$(timeout 10 python3 -c '
import urllib.request as u, urllib.error as e
for p in ("/metrics", "/status", "/status.json"):
    try: print(u.urlopen("http://127.0.0.1:17602" + p).status, end=" ")
    except e.HTTPError as x: print(x.code, end=" ")')
[ "$codes" = "200 404 404 " ]
ok $? "the [metrics] listener serves /metrics only, not the membership's status ($codes)"
# HTTP as RFC 9110/9112 want it: HEAD served (it was 405), a 405 says what
# is allowed (no Allow header), an HTTP/1.1 request without Host is 400 (it
# was 200), %00 in the path is no path of ours (decoded, it cut the path to
# /status: 200)
cat >"$D/raw.py" <<'PY'
import socket, sys
out = []
for req in sys.argv[2:]:
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
    s.sendall(req.encode().decode("unicode_escape").encode("latin1"))
    data = b""
    try:
        while True:
            d = s.recv(65536)
            if not d: break
            data += d
    except socket.timeout:
        pass
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin1").split("\r\n")
    code = lines[0].split(" ")[1] if lines[0] else "none"
    allow = [l.split(":", 1)[1].strip() for l in lines[1:] if l.lower().startswith("allow:")]
    out.append(code + ("[" + allow[0] + "]" if allow else "") + ("+body" if body else ""))
print(" ".join(out))
PY
got=$(timeout 20 python3 "$D/raw.py" 17601 \
	'HEAD /status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n' \
	'POST /status HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n' \
	'GET /status HTTP/1.1\r\nConnection: close\r\n\r\n' \
	'GET /status%00junk HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n' \
	'GET /st%61tus HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
[ "$got" = "200 405[GET, HEAD]+body 400+body 404+body 200+body" ]
ok $? "HTTP: HEAD 200 without a body, POST 405 with Allow, HTTP/1.1 without Host 400, /status%00junk 404, %61 decoded ($got)"
# the absolute-form of the request target (RFC 9112 3.2.2: a server MUST
# accept it) names the same resources (it was 404: the whole URL was
# compared as the path)
got=$(timeout 20 python3 "$D/raw.py" 17601 \
	'GET http://127.0.0.1:17601/status HTTP/1.1\r\nHost: 127.0.0.1:17601\r\nConnection: close\r\n\r\n' \
	'GET HTTP://x/metrics?a=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n' \
	'GET http://x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
[ "$got" = "200+body 200+body 404+body" ]
ok $? "HTTP: absolute-form targets served as their path: http://H/status 200, HTTP://H/metrics?a=1 200, http://H (path /) 404 ($got)"
# garbage on the Raft port: rejected, and the log says from where
(exec 3<>/dev/tcp/127.0.0.1/17600 && printf 'GET / HTTP/1.0\r\n\r\n%.0s' $(seq 10) >&3 && sleep 0.3) 2>/dev/null
sleep 0.3
grep -qE "rejected raft connection from 127\.0\.0\.1:[0-9]+ \(" "$D/log"
ok $? "a Raft connection with garbage: the log names its address ($(grep -m1 -o 'rejected raft connection from [^)]*)' "$D/log"))"
kill -TERM $pid
# Bounded wait for the clean exit: a node that hangs on SIGTERM fails the test.
for _ in $(seq 1 100); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
kill -0 $pid 2>/dev/null && { diag "no exit 10 s after SIGTERM"; kill -9 $pid; }
wait $pid; st=$?
echo "$out" | grep -q "^state leader" && [ $st -eq 0 ] || { diag "exit status $st; status said: $(echo "$out" | head -3 | tr "\n" " ")"; tail -5 "$D/log" | sed "s/^/# /"; false; }
ok $? "control runs, answers status, exits 0 on SIGTERM"
done_testing
