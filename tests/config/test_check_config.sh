#!/bin/bash
# tests/config/test_check_config.sh — `zbmd check-config` end to end:
#  - every tests/config/data/bad/X.ini exits 2, prints nothing on stdout and
#    exactly X.err on stderr (every message, its FILE:LINE, in order);
#  - every tests/config/data/good/X.ini and every config/examples/**.ini
#    exits 0 with nothing on stderr, and its output holds the lines of X.expect;
#  - the printed configuration reads back to the same configuration;
#  - missing files, directories and usage errors.
source "$ZBMD_ROOT/tests/common/tap.sh"
ZBMD="$ZBMD_BUILD/bin/zbmd"
DATA="$ZBMD_ROOT/tests/config/data"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/zbmd-config-test.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
# one check per bad file, two per good file or example, 19 more: a loop or
# section that stops early shows as a short count
nbad=$(ls "$DATA"/bad/*.ini | wc -l)
ngood=$( (ls "$DATA"/good/*.ini; find "$ZBMD_ROOT/config/examples" -name '*.ini') | wc -l)
plan $((nbad + 2 * ngood + 19))

# Each bad file: exact stderr, exit status 2, empty stdout.
cd "$DATA/bad" || exit 1
for ini in *.ini; do
	name=${ini%.ini}
	"$ZBMD" check-config "$ini" >"$TMP/out" 2>"$TMP/err"
	rc=$?
	if [ $rc -eq 2 ] && [ ! -s "$TMP/out" ] && cmp -s "$TMP/err" "$name.err"; then
		ok 0 "bad/$ini: exit 2 and the expected messages"
	else
		ok 1 "bad/$ini: exit 2 and the expected messages"
		diag "exit status $rc; diff of stderr (expected, got):"
		diff "$name.err" "$TMP/err" | sed 's/^/#   /'
	fi
done

# Every message has the shape FILE:LINE: what (expected ...).
bad_shape=$(cat *.err | grep -Ev '^[a-z0-9-]+\.ini:[0-9]+: .+ \(.+\)$' | head -3)
[ -z "$bad_shape" ]; ok $? "every message reads FILE:LINE: what is wrong (what was expected)"
[ -n "$bad_shape" ] && diag "$bad_shape"

# Good files and the shipped examples: exit 0, nothing on stderr.
cd "$ZBMD_ROOT" || exit 1
goods=$(ls tests/config/data/good/*.ini; find config/examples -name '*.ini' | sort)
for ini in $goods; do
	"$ZBMD" check-config "$ini" >"$TMP/out" 2>"$TMP/err"
	rc=$?
	missing=""
	if [ -f "${ini%.ini}.expect" ]; then
		while IFS= read -r line; do
			grep -qxF -- "$line" "$TMP/out" || missing="$missing [$line]"
		done <"${ini%.ini}.expect"
	fi
	[ $rc -eq 0 ] && [ ! -s "$TMP/err" ] && [ -z "$missing" ]
	ok $? "$ini: valid, effective configuration printed"
	[ $rc -ne 0 ] && sed 's/^/#   /' "$TMP/err"
	[ -n "$missing" ] && diag "missing from the output:$missing"

	# Round trip: the printed configuration is itself valid and prints
	# the same configuration again (all but the header line, which names
	# the file).
	tail -n +2 "$TMP/out" >"$TMP/dump.ini"
	"$ZBMD" check-config "$TMP/dump.ini" >"$TMP/out2" 2>&1
	rc=$?
	tail -n +2 "$TMP/out2" >"$TMP/dump2.ini"
	[ $rc -eq 0 ] && cmp -s "$TMP/dump.ini" "$TMP/dump2.ini"
	ok $? "$ini: the printed configuration reads back the same"
done

# The 4-node example: one file per node, distinct ids, prefixes, addresses.
ids=$(for n in 1 2 3 4; do "$ZBMD" check-config config/examples/local-4node/node$n.ini |
	awk -F' = ' '/^\[/{s=$0} s=="[node]"&&$1=="id"{i=$2} s=="[eal]"&&$1=="file_prefix"{p=$2}
		s=="[port.0]"&&$1=="ip"{a=$2} END{print i, p, a}'; done | sort -u | wc -l)
[ "$ids" -eq 4 ]; ok $? "local-4node: four distinct node ids, file prefixes and port addresses"

# A file that cannot be read.
"$ZBMD" check-config "$TMP/nonexistent.ini" >"$TMP/out" 2>"$TMP/err"
rc=$?
[ $rc -eq 2 ] && [ "$(cat "$TMP/err")" = "$TMP/nonexistent.ini: cannot open: No such file or directory (expected a readable INI file)" ]
ok $? "missing file: exit 2 and 'cannot open'"
bad=0
for c in "check-config" "run -c" "train -c" "control -c"; do
	timeout 10 "$ZBMD" $c '' >"$TMP/out" 2>"$TMP/err"; rc=$?
	[ $rc -eq 2 ] && grep -q "the config path is empty (expected a readable INI file)" "$TMP/err" ||
		{ bad=1; diag "zbmd $c '': exit $rc: $(head -1 "$TMP/err")"; }
done
ok $bad "an empty config path: said so, exit 2 (it printed ': cannot open')"
"$ZBMD" check-config "$TMP" >"$TMP/out" 2>"$TMP/err"
rc=$?
[ $rc -eq 2 ] && grep -q "^$TMP:0: cannot read: Is a directory" "$TMP/err"
ok $? "a directory: exit 2 and 'cannot read'"

# A FIFO: refused at once, not read (opening it waited for a writer)
mkfifo "$TMP/fifo"
timeout 10 "$ZBMD" check-config "$TMP/fifo" >"$TMP/out" 2>"$TMP/err"
rc=$?
[ $rc -eq 2 ] && [ "$(cat "$TMP/err")" = "$TMP/fifo: not a regular file (expected a readable INI file)" ]
ok $? "a FIFO: exit 2 and 'not a regular file', without waiting for a writer"
[ $rc -eq 2 ] || diag "exit $rc: $(cat "$TMP/err")"
"$ZBMD" check-config -q /dev/null 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] && grep -q "^/dev/null:0: missing section \[node\]" "$TMP/err"
ok $? "/dev/null: read as an empty file (the missing required keys)"

# -q: exit status only; "-": the config from stdin, named <stdin>.
out=$("$ZBMD" check-config -q config/examples/baremetal.ini 2>&1); rc=$?
[ $rc -eq 0 ] && [ -z "$out" ]
ok $? "check-config -q: a good file prints nothing, exit 0"
"$ZBMD" check-config --quiet tests/config/data/bad/pow2.ini >"$TMP/out" 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] && [ ! -s "$TMP/out" ] && grep -q '^tests/config/data/bad/pow2.ini:6: ' "$TMP/err"
ok $? "check-config -q: a bad file still prints its errors, exit 2"
"$ZBMD" check-config - <config/examples/single-node.ini >"$TMP/out" 2>&1; rc=$?
[ $rc -eq 0 ] && grep -qx "vdev = net_ring0" "$TMP/out" &&
	head -1 "$TMP/out" | grep -q "of <stdin>"
ok $? "check-config -: reads stdin"
(cd tests/config/data/bad && "$ZBMD" check-config - <typo.ini 2>&1 >/dev/null | sed 's/^<stdin>:/typo.ini:/' | cmp -s - typo.err)
ok $? "check-config -: errors name <stdin> with the same lines"

printf '[node]\nid = 0\n[cluster]\nid = 1\n\0[gpu]\nbackend = bogus\n' |
	"$ZBMD" check-config -q - >/dev/null 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] && grep -q '^<stdin>:5: line contains a NUL byte' "$TMP/err"
ok $? "check-config -: a NUL byte on stdin is an error, not the end of the text"

# Inputs without end or too large: a bounded read and one clear message
# (this reading used to grow with the longest line: /dev/zero took the
# machine's memory).
# (a sanitizer build reserves terabytes of shadow memory and cannot start
# under a limit on its address space: there only the message is checked)
vlim=400000
( ulimit -v $vlim; "$ZBMD" --version ) >/dev/null 2>&1 || vlim=unlimited
for src in /dev/zero "-"; do
	( ulimit -v $vlim; head -c 80M /dev/zero | timeout 60 "$ZBMD" check-config -q "$src" ) \
		>/dev/null 2>"$TMP/err"; rc=$?
	name=$([ "$src" = - ] && echo "<stdin>" || echo "$src")
	[ $rc -eq 2 ] && [ "$(cat "$TMP/err")" = "$name:0: the input goes on past 64 MiB (expected an INI file)" ]
	ok $? "check-config $src: 80 MiB without a newline, $vlim KiB of address space: exit 2, one message"
	[ $rc -eq 2 ] || diag "exit $rc: $(head -c 300 "$TMP/err")"
done
long="$TMP/$(printf 'd%.0s' $(seq 200))/$(printf 'e%.0s' $(seq 200))/$(printf 'f%.0s' $(seq 200)).ini"
"$ZBMD" check-config "$long" >/dev/null 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] && grep -q '^\.\.\.[de/]*f*\.ini: cannot open: No such file or directory' "$TMP/err"
ok $? "a 600-character path that is not there: its end and the reason"

# Usage.
"$ZBMD" check-config >/dev/null 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] && grep -q '^usage: zbmd check-config \[-q\] \[--files\] FILE.ini|-' "$TMP/err"
ok $? "no argument: usage, exit 2"
"$ZBMD" check-config a.ini b.ini >/dev/null 2>&1; [ $? -eq 2 ]
ok $? "two arguments: exit 2"
# --files (the unit's ExecStartPre): the key file read as zbmd run reads it;
# without --files the config alone is checked (an example names a key file
# this machine does not have)
printf '[node]\nid = 0\n[cluster]\nid = 5\nseeds = 127.0.0.1:7400\npsk_file = %s/psk\n' "$TMP" >"$TMP/k.ini"
bad=0
"$ZBMD" check-config -q "$TMP/k.ini" || { bad=1; diag "without --files: exit $?"; }
"$ZBMD" check-config -q --files "$TMP/k.ini" 2>"$TMP/err"
[ $? -eq 2 ] && grep -q "^$TMP/k.ini: \[cluster\] psk_file $TMP/psk: No such file or directory" "$TMP/err" ||
	{ bad=1; diag "missing key: $(cat "$TMP/err")"; }
head -c 32 /dev/urandom | base64 >"$TMP/psk"; chmod 644 "$TMP/psk"
"$ZBMD" check-config -q --files "$TMP/k.ini" 2>"$TMP/err"
[ $? -eq 2 ] && grep -q "mode 0644 lets group/others access the key" "$TMP/err" || { bad=1; diag "0644: $(cat "$TMP/err")"; }
chmod 600 "$TMP/psk"
"$ZBMD" check-config -q --files "$TMP/k.ini" || { bad=1; diag "a good key: exit $?"; }
ok $bad "--files: a missing or world-readable key file is exit 2 naming it; a good one passes; without --files the file is not read"
"$ZBMD" check-config --help >"$TMP/out" 2>&1; rc=$?
[ $rc -eq 0 ] && grep -q 'FILE:LINE' "$TMP/out"
ok $? "--help: exit 0, describes the error format"

done_testing
