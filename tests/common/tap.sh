# tests/common/tap.sh — TAP helpers for shell integration tests. Source it.
#   plan N; ok COND_EXIT "name"; skip_all "reason"; done_testing
TAP_RUN=0; TAP_FAILED=0; TAP_PLANNED=-1
# After a failed check, diagnostics also go to stderr, which prove shows
# without -v (as Test::More does): a failure in CI explains itself.
TAP_LAST_FAILED=0
plan() { TAP_PLANNED=$1; echo "1..$1"; }
skip_all() { echo "1..0 # SKIP $*"; exit 0; }
diag() { echo "# $*"; [ "$TAP_LAST_FAILED" = 1 ] && echo "# $*" >&2; return 0; }
# ok STATUS NAME: STATUS is an exit status (0 = pass); returns 1 on a
# failure, so `ok $? NAME || diag ...` explains it
ok() {
	TAP_RUN=$((TAP_RUN + 1))
	if [ "$1" -eq 0 ]; then echo "ok $TAP_RUN - $2"; TAP_LAST_FAILED=0
	else echo "not ok $TAP_RUN - $2"; TAP_FAILED=$((TAP_FAILED + 1)); TAP_LAST_FAILED=1
		echo "#   Failed test $TAP_RUN - $2 (${BASH_SOURCE[1]##*/}:${BASH_LINENO[0]})" >&2
		return 1; fi
}
# check NAME CMD...: runs CMD, passes when it exits 0
check() { local n=$1; shift; "$@"; ok $? "$n"; }
done_testing() {
	[ "$TAP_PLANNED" -lt 0 ] && echo "1..$TAP_RUN"
	if [ "$TAP_PLANNED" -ge 0 ] && [ "$TAP_RUN" -ne "$TAP_PLANNED" ]; then
		echo "# planned $TAP_PLANNED but ran $TAP_RUN"; exit 1; fi
	[ "$TAP_FAILED" -eq 0 ]
}
