#!/bin/bash
# bench/coll/compare.sh — zbmd's ring all-reduce next to Open MPI's, in the
# same run, on this machine: `zbmd local --nodes N --link tcp -- bench
# allreduce` vs `mpirun -np N` with the shared-memory BTL (self,vader) and the
# TCP BTL (self,tcp). Prints busbw per size and the ratios.
#
#   bench/coll/compare.sh [-N nodes] [-b min] [-e max] [-f factor] [-n iters]
#                         [-w warmup] [-r rounds] [-d float|double|int32|int64]
#
# Each round runs the three back to back; the best busbw of the rounds is
# kept per size and system (the machine is shared; the best is the least
# disturbed). Needs: $ZBMD_BUILD/bin/zbmd, $ZBMD_BUILD/bin/mpi_allreduce.
set -u
B=${ZBMD_BUILD:-$(cd "$(dirname "$0")/../.." && pwd)/build}
NODES=4 MINB=1M MAXB=64M F=4 ITERS=10 WARM=2 ROUNDS=2 DT=float
while getopts "N:b:e:f:n:w:r:d:" o; do
	case $o in
	N) NODES=$OPTARG ;; b) MINB=$OPTARG ;; e) MAXB=$OPTARG ;; f) F=$OPTARG ;;
	n) ITERS=$OPTARG ;; w) WARM=$OPTARG ;; r) ROUNDS=$OPTARG ;; d) DT=$OPTARG ;;
	*) echo "usage: $0 [-N nodes] [-b min] [-e max] [-f factor] [-n iters] [-w warmup] [-r rounds] [-d type]" >&2; exit 2 ;;
	esac
done
for x in "$B/bin/zbmd" "$B/bin/mpi_allreduce"; do
	[ -x "$x" ] || { echo "compare.sh: $x missing (make bench-allreduce-compare builds it)" >&2; exit 2; }
done
T=$(mktemp -d /tmp/zbcoll-compare-XXXXXX)
trap 'rm -rf "$T"' EXIT
trap 'exit 130' INT TERM
ARGS="-b $MINB -e $MAXB -f $F -n $ITERS -w $WARM -d $DT -o sum"
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -np $NODES"
# rows "size busbw_oop busbw_ip" of a table
rows() { awk '!/^#/ && NF >= 12 { print $1, $7, $11 }' "$1"; }
for r in $(seq 1 "$ROUNDS"); do
	echo "# round $r/$ROUNDS: zbmd (tcp), Open MPI (vader), Open MPI (tcp)" >&2
	"$B/bin/zbmd" local --nodes "$NODES" --link tcp -- bench allreduce $ARGS > "$T/zbmd.$r" ||
		{ echo "compare.sh: zbmd run failed" >&2; cat "$T/zbmd.$r" >&2; exit 1; }
	$MPI --mca btl self,vader "$B/bin/mpi_allreduce" $ARGS > "$T/shm.$r" 2>"$T/shm.err" ||
		{ echo "compare.sh: mpirun (vader) failed" >&2; cat "$T/shm.err" >&2; exit 1; }
	$MPI --mca btl self,tcp --mca btl_tcp_if_include lo "$B/bin/mpi_allreduce" $ARGS > "$T/tcp.$r" 2>"$T/tcp.err" ||
		{ echo "compare.sh: mpirun (tcp) failed" >&2; cat "$T/tcp.err" >&2; exit 1; }
	for s in zbmd shm tcp; do rows "$T/$s.$r" >> "$T/$s.all"; done
done
head -1 "$T/zbmd.1"
head -1 "$T/shm.1" | sed 's/^# mpi_allreduce:/# peer: mpi_allreduce:/'
echo "# all-reduce $DT sum, $NODES ranks on this machine, busbw in GB/s (best of $ROUNDS rounds; out-of-place / in-place)"
printf "# %10s  %15s  %15s  %15s  %10s  %10s\n" "size (B)" "zbmd tcp" "ompi shm" "ompi tcp" "zbmd/shm" "zbmd/tcp"
# best per size: key size, max of oop and ip separately
best() { awk '{ if (!($1 in o) || $2 > o[$1]) o[$1] = $2; if (!($1 in i) || $3 > i[$1]) i[$1] = $3 }
	END { for (s in o) print s, o[s], i[s] }' "$1" | sort -n; }
best "$T/zbmd.all" > "$T/z"; best "$T/shm.all" > "$T/s"; best "$T/tcp.all" > "$T/t"
join "$T/z" "$T/s" | join - "$T/t" | awk '{
	r1 = ($4 > 0) ? $2 / $4 : 0; r2 = ($6 > 0) ? $2 / $6 : 0
	printf "%12d  %7.2f/%-7.2f  %7.2f/%-7.2f  %7.2f/%-7.2f  %9.2fx  %9.2fx\n", $1, $2, $3, $4, $5, $6, $7, r1, r2 }'
grep -h "Out of bounds" "$T"/zbmd.* "$T"/shm.* "$T"/tcp.* | sort | uniq -c | sed 's/^/# /'
