#!/bin/bash
# Bad command-line input to zbmd bench allreduce (and the other commands'
# option errors): exit 2 before anything runs, the message naming the flag
# and what it takes. None of these starts a node, but for --help under zbmd
# local (two tcp nodes that print the usage and exit).
. "$ZBMD_ROOT/tests/common/tap.sh"
Z=$ZBMD_BUILD/bin/zbmd
T=$(mktemp -d /tmp/zbcli.XXXXXX)
trap 'rm -rf "$T"' EXIT
plan 14

err() {  # ARGS...: zbmd ARGS, exit status in $rc, stderr in $T/err
	"$Z" "$@" >/dev/null 2>"$T/err"; rc=$?
}

# nccl-tests' -c N is a check count; ours is 0/1 or the node config
err bench allreduce -c 2
[ $rc -eq 2 ] && grep -qF "zbmd bench allreduce: -c/--config 2: no such config file (-c takes 0 or 1 for the check, or a node config file)" "$T/err"
ok $? "-c 2: exit 2, says -c takes 0 or 1 or a config file (it said '2: No such file or directory')" ||
	diag "$(head -3 "$T/err")"

# outputs that cannot be written are refused before the sweep (root's
# access(W_OK) said yes to /proc; the whole sweep ran and the output was lost)
err bench allreduce -c "$T/none.ini" --json /proc/zbcli.json
[ $rc -eq 2 ] && grep -qF -- "--json /proc/zbcli.json: cannot create a file in /proc" "$T/err"
ok $? "--json /proc/x.json: exit 2 before anything runs" || diag "$(head -3 "$T/err")"
err bench allreduce -c "$T/none.ini" --plot /proc/zbcli.png
[ $rc -eq 2 ] && grep -qF -- "--plot /proc/zbcli.png: cannot create a file in /proc" "$T/err"
ok $? "--plot /proc/x.png: exit 2 before anything runs" || diag "$(head -3 "$T/err")"
err bench allreduce -c "$T/none.ini" --json ''
[ $rc -eq 2 ] && grep -qF -- "--json is empty (expected a file name)" "$T/err"
ok $? "--json '': exit 2, the flag named" || diag "$(head -3 "$T/err")"
long=$T/$(printf 'a%.0s' $(seq 300)).json
err bench allreduce -c "$T/none.ini" --json "$long"
[ $rc -eq 2 ] && grep -qF "the file name is 305 characters, at most" "$T/err"
ok $? "--json with a 305-character file name: exit 2 saying the limit" || diag "$(head -3 "$T/err")"
err bench allreduce -c "$T/none.ini" --json "$T/r.out" --plot "$T/./r.out"
[ $rc -eq 2 ] && grep -qF "name one file" "$T/err" &&
	[ -z "$(ls -A "$T" | grep -v '^err$')" ]
ok $? "--json X --plot X: exit 2 (the plot overwrote the figures), no file left by the checks" ||
	diag "$(head -3 "$T/err"; ls -A "$T")"

# --plot of a sweep whose sizes are all under one element (0 bytes): the
# plot's size axis is logarithmic, so gnuplot failed ("x range is invalid")
# after the whole sweep, exit 1 and an empty PNG left; now exit 2 up front,
# also under zbmd local (before any node starts)
bad=0
for a in "bench allreduce -c $T/none.ini -b 0 -e 0" "bench allreduce -c $T/none.ini -b 1 -e 3" \
	 "local --nodes 2 -- bench allreduce -N 0"; do
	err $a --plot "$T/p.png"
	{ [ $rc -eq 2 ] && grep -qF -- "--plot $T/p.png: every size of the sweep is 0 bytes" "$T/err" &&
	  [ ! -e "$T/p.png" ]; } || { bad=1; diag "$a: exit $rc: $(head -1 "$T/err")"; }
done
ok $bad "--plot with every size 0 bytes (-b 0 -e 0; -b 1 -e 3 of float; -N 0): exit 2 before the sweep, no PNG"

# buffers that cannot fit: refused up front (they were written at start-up:
# the OOM killer, or "cannot allocate" with exit 1)
avail_kb=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)
if [ "${avail_kb:-0}" -lt $((100 * 1024 * 1024)) ]; then
	err bench allreduce -c "$T/none.ini" -b 64G -e 64G
	[ $rc -eq 2 ] && grep -qE "the sizes need 131072.0 MiB per node .* but this machine has [0-9.]+ MiB available" "$T/err"
	ok $? "-b 64G -e 64G: exit 2 naming the sizes and what is available" || diag "$(head -3 "$T/err")"
else
	ok 0 "# SKIP -b 64G -e 64G: this machine has over 100 GiB available"
fi

# every config error, as zbmd run prints them (it printed the first)
printf '[node]\nid = x\n' >"$T/bad.ini"
err bench allreduce -c "$T/bad.ini"
[ $rc -eq 2 ] && [ "$(grep -c "zbmd bench allreduce: $T/bad.ini:2:" "$T/err")" -ge 2 ]
ok $? "a config with two errors: both printed" || diag "$(head -3 "$T/err")"
rm -f "$T/bad.ini"

# getopt's errors name the command, not a bare "allreduce:" or "status:"
bad=0
for c in "bench allreduce" run status control local; do
	err $c --bogus
	{ [ $rc -eq 2 ] && grep -q "^zbmd $c: .*--bogus" "$T/err"; } ||
		{ bad=1; diag "$c --bogus: exit $rc: $(head -1 "$T/err")"; }
done
ok $bad "an unknown option: exit 2, the message begins with 'zbmd COMMAND:'"
err bench allreduce -c x.ini --json
[ $rc -eq 2 ] && grep -q "^zbmd bench allreduce: --json needs a value" "$T/err"
ok $? "--json without its value: exit 2, named" || diag "$(head -3 "$T/err")"
err run -c "$T"
[ $rc -eq 2 ] && grep -q "^zbmd run: $T:0: cannot read: Is a directory" "$T/err"
ok $? "zbmd run -c DIR: the message begins with 'zbmd run:'" || diag "$(head -3 "$T/err")"
err local --nodes abc -- bench allreduce
[ $rc -eq 2 ] && grep -qF "zbmd local: bad --nodes 'abc' (expected 1..16)" "$T/err"
ok $? "--nodes abc: exit 2, the value echoed" || diag "$(head -3 "$T/err")"
# zbmd local -- bench allreduce --help: the usage once (zbmd local's own
# check of the flags printed it, and then node 0 again)
n=$(timeout 60 "$Z" local --nodes 2 -- bench allreduce --help 2>"$T/err" | grep -c '^usage: zbmd bench allreduce'); rc=${PIPESTATUS[0]}
[ $rc -eq 0 ] && [ "$n" -eq 1 ]
ok $? "zbmd local -- bench allreduce --help: exit $rc, the usage printed $n time(s)" || diag "$(head -3 "$T/err")"
rm -f "$T/err"
done_testing
