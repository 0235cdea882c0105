#!/usr/bin/env bash
# scripts/cluster-memif.sh — a local cluster joined by net_memif links
# (processes on the host, no namespaces): `cluster-memif.sh up N` is
# `cluster.sh up N --memif`; every other command is cluster.sh's.
set -euo pipefail
here=$(dirname "${BASH_SOURCE[0]}")
args=()
while [ $# -gt 0 ]; do
	case $1 in
	--tag|--dir) args+=("$1" "$2"); shift 2 ;;
	*) break ;;
	esac
done
if [ "${1:-}" = up ]; then exec "$here/cluster.sh" "${args[@]}" up "${2:-}" --memif; fi
exec "$here/cluster.sh" "${args[@]}" "$@"
