#!/usr/bin/env bash
# A 256 MiB message each way between two nodes over lossy links, twice:
#  1. namespaces, net_af_packet on veths, loss 5 %, dup 1 %, reorder 25 % on
#     the wire (tc netem where the kernel has it, else helper_impair as the
#     hub; the TAP output says which);
#  2. net_memif (scripts/cluster-memif.sh), the same rates applied by the
#     transport's own [fault] injection on each receiver.
# Each message (188,000 fragments of 1428 B) must arrive once, intact (the
# receiver regenerates and compares all 268,435,456 bytes) and its content
# checksum must equal the sender's. About 15 s.
. "$ZBMD_ROOT/tests/common/tap.sh"
. "$ZBMD_ROOT/tests/dataplane/lib.sh"
need_netns
TAG=zbdtbg$$
SIZE=$((256 << 20))
export ZBN_PREFIX=zbdt
CL="$ZBMD_ROOT/scripts/cluster.sh --tag $TAG --dir $T/cl"
CLM="$ZBMD_ROOT/scripts/cluster-memif.sh --tag ${TAG}m --dir $T/clm"
XFER=$ZBMD_BUILD/tests/dataplane/helper_xfer
trap '$CL down >/dev/null 2>&1; $CLM down >/dev/null 2>&1; cleanup_lib' EXIT
plan 12

# run_pair LABEL DIR EXEC...: both nodes send one SIZE message to the other
run_pair() {
	local label=$1 dir=$2 i r1 r2; shift 2
	local t0=$SECONDS
	for i in 1 2; do
		"$@" $i "$XFER" -c "$dir/node$i.ini" --count 1 --size $SIZE \
			--seed 61 >"$T/$label$i" 2>&1 &
		PIDS+=($!); eval P$i=$!
		# memif: the server (node 1) before its client
		wait_for "$T/${label}1" '^READY' 60
	done
	wait_for "$T/${label}2" '^READY' 60 &&
		wait_for "$T/${label}1" '^DONE' 120 && wait_for "$T/${label}2" '^DONE' 120
	ok $? "$label: 256 MiB each way delivered and acknowledged ($((SECONDS - t0)) s)"
	kill -TERM $P1 $P2; wait $P1; r1=$?; wait $P2; r2=$?
	[ $r1 -eq 0 ] && [ $r2 -eq 0 ]; ok $? "$label: both verified every byte, exit 0 ($r1 $r2)"
	grep -h '^FAIL' "$T/${label}1" "$T/${label}2" | head -3 | while read -r l; do diag "$l"; done
	for i in 1 2; do
		j=$((3 - i))
		grep -qE "^RX node=$j from=$i received=1 .* bytes=$SIZE csum=$(field "$T/$label$i" TX csum)\$" "$T/$label$j"
		ok $? "$label: node $i -> node $j: one message of $SIZE bytes, checksum $(field "$T/$label$i" TX csum) at both ends"
	done
	local rt=$(( $(field "$T/${label}1" RESULT retransmits) + $(field "$T/${label}2" RESULT retransmits) ))
	local data=$(( $(field "$T/${label}1" TPSTATS data_frames_tx) + $(field "$T/${label}2" TPSTATS data_frames_tx) ))
	diag "$label: $data data frames, $rt retransmitted; fault drops $(( $(field "$T/${label}1" TPSTATS fault_drops) + $(field "$T/${label}2" TPSTATS fault_drops) )) dups $(( $(field "$T/${label}1" TPSTATS fault_dups) + $(field "$T/${label}2" TPSTATS fault_dups) )) reorders $(( $(field "$T/${label}1" TPSTATS fault_reorders) + $(field "$T/${label}2" TPSTATS fault_reorders) ))"
	[ "$rt" -gt $((data / 50)) ]; ok $? "$label: losses repaired by retransmission ($rt of $data data frames)"
}

lossy_cluster 2 5 1 25 51
ok $? "veth: 2 namespaces, lossy link: $LOSSY_HOW"
diag "impairment: $LOSSY_HOW"
run_pair veth "$T/cl" $CL exec
impair_stop; [ -n "$IMPAIR_PID" ] && diag "$(impair_line)"
$CL down >/dev/null 2>&1

ZBN_EXTRA_INI=$'[fault]\ndrop_rate = 0.05\ndup_rate = 0.01\nreorder_rate = 0.25\nseed = 9' \
	$CLM up 2 >/dev/null
ok $? "memif: 2 nodes, [fault] drop 5% dup 1% reorder 25% in each transport"
run_pair memif "$T/clm" $CLM exec
done_testing
