#!/usr/bin/env bash
# scripts/cluster-memif.sh — a local cluster joined by net_memif links
# (processes on the host, no namespaces): `cluster-memif.sh up N` is
# `cluster.sh up N --memif`; every other command is cluster.sh's.
set -euo pipefail
here=$(dirname "${BASH_SOURCE[0]}")
usage() {
	cat <<'EOF'
usage: cluster-memif.sh [--tag T] [--dir D] up N      N nodes (1..9) joined pairwise by net_memif
       cluster-memif.sh [--tag T] [--dir D] CMD ...   start, stop, exec, status, down

cluster.sh with --memif: no namespaces; every pair of nodes I<J is joined by
one net_memif link (I the server, J the client, socket D/memif-I-J.sock).
The commands other than up, the options and the environment (ZBN_*) are
cluster.sh's (scripts/cluster.sh --help); netem and --no-bridge are veth
mode's only. Exit status: 0 done, 1 failed, 2 bad usage.
EOF
}
usage_err() {
	echo "cluster-memif.sh: $*" >&2; echo "try: cluster-memif.sh --help" >&2; exit 2
}
args=()
while [ $# -gt 0 ]; do
	case $1 in
	--tag|--dir)
		[ $# -ge 2 ] || usage_err "$1 needs a value"
		args+=("$1" "$2"); shift 2 ;;
	-h|--help) usage; exit 0 ;;
	-*) usage_err "unknown option '$1'" ;;
	*) break ;;
	esac
done
[ $# -ge 1 ] || { usage >&2; exit 2; }
if [ "${1:-}" = up ]; then
	[ $# -ge 2 ] || usage_err "up: give N, the number of nodes"
	# up N, or up N --memif (what it means anyway); nothing else
	if [ $# -gt 3 ] || { [ $# -eq 3 ] && [ "$3" != --memif ]; }; then
		usage_err "up takes N only, not '${*:3}' (memif links; --no-bridge is cluster.sh's veth mode; options such as --tag go before the command)"
	fi
	exec "$here/cluster.sh" "${args[@]}" up "$2" --memif
fi
exec "$here/cluster.sh" "${args[@]}" "$@"
