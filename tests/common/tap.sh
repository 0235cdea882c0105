# tests/common/tap.sh — TAP helpers for shell integration tests. Source it.
#   plan N; ok COND_EXIT "name"; skip_all "reason"; done_testing
TAP_RUN=0; TAP_FAILED=0; TAP_PLANNED=-1
plan() { TAP_PLANNED=$1; echo "1..$1"; }
skip_all() { echo "1..0 # SKIP $*"; exit 0; }
diag() { echo "# $*"; }
# ok STATUS NAME: STATUS is an exit status (0 = pass)
ok() {
	TAP_RUN=$((TAP_RUN + 1))
	if [ "$1" -eq 0 ]; then echo "ok $TAP_RUN - $2"
	else echo "not ok $TAP_RUN - $2"; TAP_FAILED=$((TAP_FAILED + 1)); fi
}
# check NAME CMD...: runs CMD, passes when it exits 0
check() { local n=$1; shift; "$@"; ok $? "$n"; }
done_testing() {
	[ "$TAP_PLANNED" -lt 0 ] && echo "1..$TAP_RUN"
	if [ "$TAP_PLANNED" -ge 0 ] && [ "$TAP_RUN" -ne "$TAP_PLANNED" ]; then
		echo "# planned $TAP_PLANNED but ran $TAP_RUN"; exit 1; fi
	[ "$TAP_FAILED" -eq 0 ]
}
