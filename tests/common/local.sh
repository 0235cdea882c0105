# tests/common/local.sh — for scripts that run `zbmd local`. Source it.
# drop_kept FILE...: a failed zbmd local run keeps its configs and logs and
# says where ("configs and logs kept in DIR"); remove every DIR the FILEs
# (its captured stderr) name. Files that do not exist are skipped.
drop_kept() {
	sed -nE 's/.*configs and logs kept in (\/tmp\/zbmd-local-[A-Za-z0-9]+).*/\1/p' "$@" 2>/dev/null |
		xargs -r rm -rf
}
