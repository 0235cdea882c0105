# tests/common/local.sh — for scripts that run `zbmd local`. Source it.
# drop_kept FILE...: a failed zbmd local run keeps its configs and logs and
# says where ("configs and logs kept in DIR"); remove every DIR the FILEs
# (its captured stderr) name. Files that do not exist are skipped.
drop_kept() {
	sed -nE 's/.*configs and logs kept in (\/tmp\/zbmd-local-[A-Za-z0-9]+).*/\1/p' "$@" 2>/dev/null |
		xargs -r rm -rf
}

# After a --kill or --linkdown, zbmd local says of every node that ends
# "node I exited with status S after T ms (M ms after the fault)" (or "killed
# by signal N after ..."; memif and veth nodes are "node I (id I+1)"). From
# FILE, its captured stderr:
# fault_survivors FILE: how many nodes exited with status 1 after the fault;
fault_survivors() { grep -c "exited with status 1 .*after the fault" "$1"; }
# fault_slowest FILE: the largest M of the nodes not killed by a signal
# (empty when there is none).
fault_slowest() {
	grep -v "killed by signal" "$1" | sed -n 's/.*(\([0-9]*\) ms after the fault).*/\1/p' |
		sort -n | tail -1
}
# fault_exit_after FILE I: node I's M when it exited with status 1 (empty
# when it did not).
fault_exit_after() {
	sed -n "s/^zbmd local: node $2\( (id [0-9]*)\)\{0,1\} exited with status 1 .*(\([0-9]*\) ms after the fault).*/\2/p" "$1"
}
