#!/usr/bin/env bash
# bench/actors/run.sh — runs each Savina workload on zbmd's actor runtime and
# on Erlang/OTP (erl +S 2: two schedulers, like our two workers), one after
# the other in the same run, and prints them side by side with the ratio
# zbmd / Erlang (rates: higher is better; bytes/actor: lower is better).
#
#   bench/actors/run.sh [WHAT...]      default: all workloads
# Sizes: env PINGPONG_N THREADRING_ACTORS THREADRING_HOPS COUNTING_N
# FORKJOIN_ACTORS FORKJOIN_N BIG_ACTORS BIG_PINGS CHAMENEOS_N
# CHAMENEOS_MEETINGS SPAWN_N, or BENCH_SCALE=k to divide the message counts
# (e.g. THREADRING_HOPS=1000000 for a quick run). ACT_WORKERS, ACT_PIN.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${ZBMD_BUILD:-$ROOT/build}
BIN=$BUILD/bench/actors/bench_actors
OUT=$BUILD/bench/actors
if [ ! -x "$BIN" ]; then
	echo "run.sh: $BIN missing: run make bench-actors" >&2
	exit 2
fi
if ! command -v erlc >/dev/null || ! command -v erl >/dev/null; then
	echo "run.sh: erl/erlc missing (Debian: erlang-nox)" >&2
	exit 2
fi
mkdir -p "$OUT"
erlc -o "$OUT" "$ROOT/bench/actors/bench_actors.erl"

WHAT=${*:-pingpong threadring counting forkjoin big chameneos spawn}
OTP=$(erl -noshell -eval 'io:format("~s",[erlang:system_info(otp_release)]),halt().')
echo "zbmd actor runtime vs Erlang/OTP $OTP (erl +S 2), $(nproc) CPUs, $(date -u +%FT%TZ)"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
TMP=$(mktemp)
trap 'rm -f "$TMP"' EXIT
for w in $WHAT; do
	"$BIN" "$w" | grep '^RESULT' | sed 's/^RESULT/C/' >>"$TMP" || true
	erl +S 2 +P 2000000 -noshell -pa "$OUT" -run bench_actors main "$w" |
		grep '^RESULT' | sed 's/^RESULT/E/' >>"$TMP" || true
done
awk '
	$1 == "C" { c[$2] = $3; unit[$2] = $4; if (!($2 in seen)) { order[n++] = $2; seen[$2] = 1 } }
	$1 == "E" { e[$2] = $3; if (!($2 in seen)) { order[n++] = $2; seen[$2] = 1 } }
	END {
		printf "%-16s %14s %14s  %-14s %8s\n", "benchmark", "zbmd", "erlang", "unit", "ratio"
		for (i = 0; i < n; i++) {
			k = order[i]
			r = (k in c && k in e && e[k] > 0) ? sprintf("%.2fx", c[k] / e[k]) : "n/a"
			printf "%-16s %14s %14s  %-14s %8s\n", k, (k in c ? c[k] : "-"), (k in e ? e[k] : "-"), unit[k], r
		}
		if ("pingpong" in c && "pingpong" in e)
			printf "goal pingpong   >= 2x Erlang: %s\n", ((c["pingpong"] >= 2 * e["pingpong"]) ? "met" : "NOT met")
		if ("threadring" in c && "threadring" in e)
			printf "goal threadring >= 2x Erlang: %s\n", ((c["threadring"] >= 2 * e["threadring"]) ? "met" : "NOT met")
		if ("spawn" in c)
			printf "goal 1M spawn < 1 s within 256 MiB: rate %s actors/s, total %s MiB\n", c["spawn"], c["spawn_total_mib"]
	}' "$TMP"
