#!/usr/bin/env bash
# zbmd run on virtual devices (net_null, net_ring): lcores run, counters on
# SIGUSR1, clean exit on SIGTERM/SIGINT, the node lock, bad configs.
. "$ZBMD_ROOT/tests/common/tap.sh"
. "$ZBMD_ROOT/tests/dataplane/lib.sh"
trap cleanup_lib EXIT
plan 27

PFX=zbmd-node-t$$
PREFIXES+=("$PFX")
PORTS='[port.0]
vdev = net_null0,no-rx=1
ip = 10.9.0.1/24
[port.1]
vdev = net_ring0
mtu = 9000'
node_config "$T/good.ini" "$PFX" 0-1 "$PORTS"

"$ZBMD" run -c "$T/good.ini" >"$T/out" 2>"$T/err" & P=$!; PIDS+=($P)
wait_for "$T/out" '^zbmd: ready' 60; ok $? "node starts and says ready"
grep -q 'driver=net_null .*ip=10.9.0.1 rx_queues=1 tx_queues=1 mtu=1500' "$T/out"
ok $? "log names port.0 with driver, IP, queues, MTU"
grep -q 'name=net_ring0 driver=net_ring.* mtu=9000' "$T/out" &&
	grep -qE 'mempool zbmd_port1: mbufs=8191 data_room=(9[0-9]{3}|[1-9][0-9]{4})' "$T/out"
ok $? "jumbo port: mempool data room sized for mtu 9000"
grep -q '^lcore 1: index=0' "$T/out"; ok $? "one worker lcore polls (lcore 1)"
# without hugepages the pools' pages are mapped in at start-up (port.c,
# prefault_pool), not by the loops' first use: DPDK's memory (one memfd
# mapping) is resident for at least every mbuf's data room
need=$(sed -n 's/.*mempool zbmd_port[0-9]*: mbufs=\([0-9]*\) data_room=\([0-9]*\).*/\1 \2/p' "$T/out" |
	awk '{ s += $1 * $2 } END { print int(s / 1024) }')
rss=$(awk '/^[0-9a-f]+-[0-9a-f]+ / { m = ($0 ~ /memfd:nohuge/) } /^Rss:/ { if (m) s += $2 } END { print s + 0 }' /proc/$P/smaps)
[ "${need:-0}" -gt 0 ] && [ "$rss" -ge "$need" ]
ok $? "the mbuf pools are mapped in before any traffic: DPDK memory resident $rss KiB, the pools' data rooms $need KiB"

# the loop runs: two SIGUSR1 dumps, the iteration count grows
kill -USR1 $P; wait_for "$T/out" '^stats lcore=1' 20
it1=$(grep '^stats lcore=1' "$T/out" | tail -1 | sed 's/.*iterations=\([0-9]*\).*/\1/')
sleep 0.5; kill -USR1 $P
deadline=$((SECONDS + 20))
while [ "$(grep -c '^stats lcore=1' "$T/out")" -lt 2 ] && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
it2=$(grep '^stats lcore=1' "$T/out" | tail -1 | sed 's/.*iterations=\([0-9]*\).*/\1/')
[ -n "$it1" ] && [ -n "$it2" ] && [ "$it2" -gt "$it1" ]
ok $? "lcore loop iterates (iterations $it1 -> $it2)"
grep '^stats lcore=1' "$T/out" | tail -1 | grep -qE 'sleeps=[1-9]'
ok $? "adaptive idle policy sleeps when idle"

# a second node with the same file-prefix is refused, clearly, no crash
"$ZBMD" run -c "$T/good.ini" >"$T/out2" 2>"$T/err2"; rc=$?
[ $rc -eq 1 ]; ok $? "second node with the same file-prefix exits 1 (got $rc)"
grep -q "another zbmd node is running with file-prefix $PFX (pid $P)" "$T/err2"
ok $? "second node names the prefix and the running pid"
kill -0 $P; ok $? "first node still running"

t0=$SECONDS; kill -TERM $P; wait $P; rc=$?
[ $rc -eq 0 ] && [ $((SECONDS - t0)) -le 15 ]; ok $? "SIGTERM: exit 0 within 15 s (rc $rc, $((SECONDS - t0)) s)"
grep -q '^zbmd: stopped cleanly' "$T/out"; ok $? "log says stopped cleanly"
RT0=/var/run/dpdk/$PFX; [ "$(id -u)" -eq 0 ] || RT0=${XDG_RUNTIME_DIR:-/tmp}/dpdk/$PFX
[ ! -e "$RT0" ]; ok $? "and left no DPDK runtime directory ($RT0: $(ls "$RT0" 2>/dev/null | tr '\n' ' '))"

# a DPDK primary that is not zbmd (holds DPDK's own fcntl lock) is named too
RT=/var/run/dpdk/$PFX; [ "$(id -u)" -eq 0 ] || RT=${XDG_RUNTIME_DIR:-/tmp}/dpdk/$PFX
mkdir -p "$RT"
python3 -c "import fcntl,sys,time; f=open(sys.argv[1],'a'); fcntl.lockf(f, fcntl.LOCK_EX); print('locked', flush=True); time.sleep(60)" "$RT/config" >"$T/lk" &
L=$!; PIDS+=($L); wait_for "$T/lk" locked 20
"$ZBMD" run -c "$T/good.ini" >/dev/null 2>"$T/err3"; rc=$?
kill $L 2>/dev/null; wait $L 2>/dev/null
[ $rc -eq 1 ] && grep -q "another DPDK primary process (pid $L) is running with file-prefix $PFX" "$T/err3"
ok $? "a foreign DPDK primary on the prefix is refused with its pid"

# one lcore: the main lcore polls; SIGINT stops it
node_config "$T/one.ini" "$PFX" 0 "$PORTS"
"$ZBMD" run -c "$T/one.ini" >"$T/out4" 2>&1 & P=$!; PIDS+=($P)
wait_for "$T/out4" '^zbmd: ready' 60 && grep -q 'the main lcore polls' "$T/out4"
ok $? "single lcore: the main lcore runs the loop"
kill -INT $P; wait $P; rc=$?
[ $rc -eq 0 ] && grep -qE '^stats lcore=0 index=0 iterations=[1-9]' "$T/out4"
ok $? "single lcore: SIGINT exits 0 after iterating (rc $rc)"

# [transport] arena_prefault: the lane's reassembly arena mapped in before
# the loop runs (every page resident); off by default
! grep -q 'mapped in (\[transport\] arena_prefault)' "$T/err"
ok $? "by default the arena is not mapped in ahead (no such line in the log)"
node_config "$T/pf.ini" "$PFX" 0-1 "$PORTS
[transport]
arena_prefault = true
max_message_mb = 16"
"$ZBMD" run -c "$T/pf.ini" >"$T/out6" 2>"$T/err6" & P=$!; PIDS+=($P)
wait_for "$T/out6" '^zbmd: ready' 60
mib=$(sed -n 's/.*1 reassembly arena(s), \([0-9]*\) MiB, mapped in (\[transport\] arena_prefault) in [0-9]* ms.*/\1/p' "$T/err6")
[ -n "$mib" ] && [ "$mib" -ge 16 ] && [ "$mib" -lt 64 ]
ok $? "arena_prefault = true: the log says the lane's arena ($mib MiB) was mapped in"
# its mapping in smaps: Size within that MiB, and all of it resident
[ -n "$mib" ] && awk -v lo=$((mib * 1024)) -v hi=$(((mib + 1) * 1024)) '
	/^[0-9a-f]+-[0-9a-f]+ / { sz = 0 }
	/^Size:/ { sz = $2 }
	/^Rss:/ { if (sz >= lo && sz <= hi && $2 >= sz) found = 1 }
	END { exit !found }' /proc/$P/smaps
ok $? "... and a mapping of that size is wholly resident in the running node"
kill -TERM $P; wait $P

# SIGHUP (the terminal gone) stops the node cleanly: it killed it before,
# skipping the teardown (a memif socket file stayed)
"$ZBMD" run -c "$T/one.ini" >"$T/out7" 2>&1 & P=$!; PIDS+=($P)
wait_for "$T/out7" '^zbmd: ready' 60
kill -HUP $P; wait $P; rc=$?
[ $rc -eq 0 ] && grep -q '^zbmd: stopping (SIGHUP)' "$T/out7" && grep -q 'stopped cleanly' "$T/out7"
ok $? "SIGHUP: a clean stop, exit 0 (rc $rc)"

# what the machine cannot give, said with the key at fault, exit 2
bad=0
hp=$(awk '/^HugePages_Total:/ {print $2}' /proc/meminfo)
for c in "memory_mb = 1048576:is more than this machine's memory" \
	 "extra_args = --bogus-flag:extra_args = '--bogus-flag' holds a flag the EAL does not take" \
	 "hugepages = true:hugepages = true but this machine has no hugepages reserved"; do
	[ "${c%%:*}" = "hugepages = true" ] && [ "${hp:-0}" != 0 ] && continue
	k=${c%% *}
	awk -v k="$k" -v l="${c%%:*}" '$1 == k { print l; next } { print } /^\[eal\]/ && k == "extra_args" { print l }' \
		"$T/one.ini" >"$T/m.ini"
	timeout 60 "$ZBMD" run -c "$T/m.ini" >"$T/m.out" 2>&1; rc=$?
	[ $rc -eq 2 ] && grep -qF "${c#*:}" "$T/m.out" || { bad=1; diag "${c%%:*}: exit $rc: $(grep 'zbmd run' "$T/m.out" | head -1)"; }
done
ok $bad "memory_mb past the machine's memory, a flag the EAL refuses in extra_args, hugepages without any reserved: exit 2 naming the key (a SIGSEGV in rte_eal_init, and exit 1 with 'Permission denied' before)"

# a [gpu] backend this machine lacks: the node runs, and says so at start
# (it said nothing until something opened the backend)
awk '/^\[cluster\]/ { print "[gpu]"; print "backend = cuda" } { print }' "$T/one.ini" >"$T/g.ini"
"$ZBMD" run -c "$T/g.ini" >"$T/g.out" 2>&1 & P=$!; PIDS+=($P)
wait_for "$T/g.out" '^zbmd: ready' 60; kill -TERM $P; wait $P; rc=$?
if "$ZBMD" gpu-info 2>/dev/null | grep -q '^cuda *usable'; then
	[ $rc -eq 0 ] && grep -q '^zbmd: ready' "$T/g.out" && ! grep -q 'warning: \[gpu\] backend = cuda' "$T/g.out"
	ok $? "[gpu] backend = cuda where CUDA is usable: the node runs, no warning (rc $rc)"
else
	[ $rc -eq 0 ] && grep -q 'warning: \[gpu\] backend = cuda is not usable on this machine' "$T/g.out"
	ok $? "[gpu] backend = cuda without CUDA: the node runs and warns at start (rc $rc)"
fi

# systemd's Type=notify: READY=1 once ready, STOPPING=1 on the way out, to
# the datagram socket $NOTIFY_SOCKET names (an abstract one here, as
# systemd's own are not); the unit waits for it (it had Type=simple: started
# reported before the EAL, the ports or the control plane were up)
cat >"$T/notify.py" <<'PY'
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("\0" + sys.argv[1]); s.settimeout(1.0)
open(sys.argv[2] + ".bound", "w").close()
got, t0 = [], time.time()
while time.time() - t0 < 60 and "STOPPING=1" not in got:
    try: got += s.recv(4096).decode().split("\n")
    except socket.timeout: pass
open(sys.argv[2], "w").write("\n".join(got) + "\n")
PY
NS=zbmd-notify-$$
python3 "$T/notify.py" "$NS" "$T/notify.got" & NP=$!; PIDS+=($NP)
wait_for_file() { for _ in $(seq 100); do [ -e "$1" ] && return 0; sleep 0.1; done; return 1; }
wait_for_file "$T/notify.got.bound"
NOTIFY_SOCKET="@$NS" "$ZBMD" run -c "$T/one.ini" >"$T/nt.out" 2>&1 & P=$!; PIDS+=($P)
wait_for "$T/nt.out" '^zbmd: ready' 60; sleep 0.3; kill -TERM $P; wait $P; rc=$?
wait $NP
[ $rc -eq 0 ] && grep -qx 'READY=1' "$T/notify.got" && grep -qx 'STOPPING=1' "$T/notify.got" &&
	[ "$(grep -n -x 'READY=1' "$T/notify.got" | cut -d: -f1)" -lt "$(grep -n -x 'STOPPING=1' "$T/notify.got" | cut -d: -f1)" ]
ok $? "NOTIFY_SOCKET: READY=1 once ready, then STOPPING=1 ($(tr '\n' ' ' <"$T/notify.got"))"

# [rdma] enabled: the device opens at start or the node does not start,
# naming why (it started, and the first use over rdma failed with "backend
# or device unavailable"); with a device, the node starts
awk '/^\[cluster\]/ { print "[rdma]"; print "enabled = true" } { print }' "$T/one.ini" >"$T/r.ini"
if ls /sys/class/infiniband/* >/dev/null 2>&1; then
	# a device: it opens and the node starts, or (its port down, say) the
	# node exits 1 naming why
	"$ZBMD" run -c "$T/r.ini" >"$T/r.out" 2>&1 & P=$!; PIDS+=($P)
	wait_for "$T/r.out" '^zbmd: ready|does not open' 60; kill -TERM $P 2>/dev/null; wait $P; rc=$?
	{ grep -q '^zbmd: ready' "$T/r.out" && [ $rc -eq 0 ]; } ||
		{ [ $rc -eq 1 ] && grep -q 'the RDMA device does not open: ' "$T/r.out"; }
	ok $? "[rdma] enabled = true with an RDMA device: the node starts, or says why not (rc $rc)"
else
	start=$SECONDS
	timeout 60 "$ZBMD" run -c "$T/r.ini" >"$T/r.out" 2>&1; rc=$?
	[ $rc -eq 1 ] && grep -q 'zbmd run: \[rdma\] enabled = true, but the RDMA device does not open: no RDMA devices' "$T/r.out" &&
		! grep -q '^zbmd: ready' "$T/r.out" && [ $((SECONDS - start)) -lt 20 ]
	ok $? "[rdma] enabled = true without an RDMA device: exit 1 at once, naming why (rc $rc: $(grep 'zbmd run' "$T/r.out" | head -1 | cut -c1-150))"
fi

# bad configs: FILE:LINE, exit 2, nothing started
node_config "$T/bad.ini" "$PFX" 0-1 "[port.0]
vdev = net_null0
bogus_key = 1"
"$ZBMD" run -c "$T/bad.ini" >/dev/null 2>"$T/err5"; rc=$?
[ $rc -eq 2 ] && grep -q "$T/bad.ini:17:" "$T/err5"
ok $? "bad config: exit 2 with FILE:LINE (rc $rc: $(head -1 "$T/err5"))"
"$ZBMD" run -c "$T/missing.ini" >/dev/null 2>&1; rc=$?
[ $rc -eq 2 ]; ok $? "missing config file: exit 2"
"$ZBMD" run >/dev/null 2>&1; rc=$?
[ $rc -eq 2 ]; ok $? "no -c: usage, exit 2"

done_testing
