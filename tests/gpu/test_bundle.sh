#!/usr/bin/env bash
# scripts/gpu-bundle.sh: the gpu tests and bench in a folder that runs on its
# own (a GPU machine without OpenBLAS/libnuma development packages or DPDK).
source "$ZBMD_ROOT/tests/common/tap.sh"
plan 9
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
B=$tmp/b

"$ZBMD_ROOT/scripts/gpu-bundle.sh" "$B" >"$tmp/build.log" 2>&1
ok $? "builds a bundle" || sed 's/^/# /' "$tmp/build.log" | tail -20
[ -x "$B/run.sh" ] && [ -f "$B/lib/libopenblas.so.0" ] && [ -f "$B/lib/libnuma.so.1" ] &&
	[ -x "$B/build/tests/gpu/helper_gpucli" ] && [ ! -e "$B/tests/test_bundle.sh" ]
ok $? "holds run.sh, the test binaries and the shared libraries (not this test)"
LD_LIBRARY_PATH=$B/lib ldd "$B/build/tests/gpu/test_conformance.t" >"$tmp/ldd" 2>&1
grep -q "libopenblas.so.0 => $B/lib/" "$tmp/ldd" && ! grep -q 'not found' "$tmp/ldd"
ok $? "its binaries take OpenBLAS from the bundle, nothing missing" || sed 's/^/# /' "$tmp/ldd"

# run from elsewhere with a bare environment: the bundle needs nothing else
(cd / && env -i PATH="$PATH" HOME="$tmp" OUT="$tmp/logs" "$B/run.sh") >"$tmp/run.log" 2>&1
ok $? "run.sh passes" || sed 's/^/# /' "$tmp/run.log" | tail -30
files=$(ls "$B"/build/tests/*/test_*.t "$B"/tests/test_*.sh | wc -l)
passed=$(grep -Ec '^test_[a-z_]+\.(t|sh) +rc=0 ok=[1-9][0-9]* not_ok=0 ' "$tmp/run.log")
[ "$files" -ge 9 ] && [ -x "$B/build/tests/rdma/test_gpu_reg.t" ] && [ "$passed" -eq "$files" ]
ok $? "every test file of the bundle ran and passed ($passed of $files)"
grep -q '^ok [0-9]* - cpu: reduce float sum matches the reference' "$tmp/logs/test_conformance.t.log"
ok $? "the logs land in OUT"
# zbmd travels too: a 2-node training run on every usable backend (cpu at least)
grep -q '^train --backend cpu: rc=0$' "$tmp/run.log" &&
	[ "$(grep -c '^# replicas: bit-identical on all 2 nodes' "$tmp/run.log")" -eq \
	  "$(grep -c '^train --backend ' "$tmp/run.log")" ] && [ ! -e "$B/build/obj" ]
ok $? "zbmd train on each usable backend ($(grep -o '^train --backend [a-z]*' "$tmp/run.log" | cut -d' ' -f3 | tr '\n' ' ')): bit-identical replicas; no objects carried" ||
	grep -E '^train|zbmd' "$tmp/run.log" | sed 's/^/# /'

# a failing test file fails the run and is named
printf '#!/bin/sh\necho 1..1\necho "not ok 1 - planted"\nexit 1\n' >"$B/tests/test_planted.sh"
chmod +x "$B/tests/test_planted.sh"
OUT="$tmp/logs2" "$B/run.sh" >"$tmp/run2.log" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q '^test_planted.sh .*rc=1 .*not_ok=1' "$tmp/run2.log" &&
	grep -q '^not ok 1 - planted' "$tmp/run2.log"
ok $? "a failing test file fails run.sh (rc $rc) and is reported"

"$ZBMD_ROOT/scripts/gpu-bundle.sh" >/dev/null 2>&1
r1=$?
"$ZBMD_ROOT/scripts/gpu-bundle.sh" "$ZBMD_ROOT" >/dev/null 2>&1
r2=$?
[ $r1 -eq 2 ] && [ $r2 -eq 2 ]
ok $? "no folder, or the source tree itself: usage error (2), nothing built"
done_testing
