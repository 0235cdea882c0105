#!/usr/bin/env bash
# `zbmd control` / `zbmd status` / `zbmd bench phi` on bad input: clear
# errors and exit statuses, never a crash or a hang.
source "$ZBMD_ROOT/tests/common/tap.sh"
plan 12
Z=$ZBMD_BUILD/bin/zbmd
D=$(mktemp -d /tmp/zbctl-cli-XXXXXX)
trap 'rm -rf "$D"' EXIT
$Z control >/dev/null 2>&1; [ $? -eq 2 ]; ok $? "control without -c: usage (2)"
$Z control -c "$D/none.ini" 2>"$D/err"; [ $? -eq 1 ] && grep -q "none.ini" "$D/err"
ok $? "control with a missing file: names it, exit 1"
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
EOT
timeout 10 $Z control -c "$D/n.ini" 2>"$D/err"; [ $? -eq 1 ] && grep -q "chmod 600" "$D/err"
ok $? "PSK file readable by others: refused to start ($(head -c 90 "$D/err"))"
$Z status --admin 127.0.0.1:1 2>"$D/err"; [ $? -eq 1 ] && grep -q "cannot reach" "$D/err"
ok $? "status with nothing listening: clear error, exit 1"
$Z status --admin nonsense 2>/dev/null; [ $? -eq 1 ]; ok $? "status with a bad address: exit 1"
$Z status --bogus 2>/dev/null; [ $? -eq 2 ]; ok $? "status with an unknown flag: usage (2)"
$Z bench phi -t 0 2>/dev/null; [ $? -eq 2 ]; ok $? "bench phi with 0 trials: usage (2)"
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
	 "version x:unexpected argument 'x'"; do
	$Z ${a%%:*} >/dev/null 2>"$D/err"; rc=$?
	[ $rc -eq 2 ] && grep -q "${a#*:}" "$D/err" || { bad=1; diag "zbmd ${a%%:*}: exit $rc"; }
done
ok $bad "an unknown command, benchmark or argument: named, exit 2"
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
	 "phi -m:missing value for -m" "gpu --backend:missing value for --backend" \
	 "gpu -x:unknown option '-x'" "gpu extra:unexpected argument 'extra'"; do
	timeout 20 $Z bench ${a%%:*} >"$D/out" 2>"$D/err"; rc=$?
	[ $rc -eq 2 ] && grep -qF "${a#*:}" "$D/err" && [ ! -s "$D/out" ] ||
		{ bad=1; diag "zbmd bench ${a%%:*}: exit $rc: $(head -1 "$D/err")"; }
done
ok $bad "zbmd bench phi / gpu with a bad flag or value: named, exit 2, nothing run"
chmod 600 "$D/psk"
$Z control -c "$D/n.ini" 2>"$D/log" & pid=$!
# Poll for readiness (sanitizer builds on a loaded machine start slowly).
out=
for _ in $(seq 1 100); do
	out=$($Z status -c "$D/n.ini" 2>/dev/null) && echo "$out" | grep -q "^state leader" && break
	sleep 0.2
done
kill -TERM $pid
# Bounded wait for the clean exit: a node that hangs on SIGTERM fails the test.
for _ in $(seq 1 100); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
kill -0 $pid 2>/dev/null && { diag "no exit 10 s after SIGTERM"; kill -9 $pid; }
wait $pid; st=$?
echo "$out" | grep -q "^state leader" && [ $st -eq 0 ] || { diag "exit status $st; status said: $(echo "$out" | head -3 | tr "\n" " ")"; tail -5 "$D/log" | sed "s/^/# /"; false; }
ok $? "control runs, answers status, exits 0 on SIGTERM"
done_testing
