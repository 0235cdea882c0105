#!/usr/bin/env bash
# Two nodes in network namespaces (net_af_packet on veths) move 1,000,000
# messages over a lossy link: 500,000 each way (so 1,000,000 in total cross
# the link), 4 streams, mixed sizes (helper_xfer --mix small: 80 % 16..256 B,
# 15 % up to one 1428-byte frame, 4.9 % 1.4..16 KiB, 0.1 % 64..256 KiB).
# Link: loss 5 %, duplication 1 %, reordering 25 % — tc netem where the
# kernel has sch_netem, else tests/dataplane/helper_impair as the hub (the
# TAP output says which). Every message must arrive exactly once, in order
# per stream, byte-identical (regenerated and compared), and the content
# checksum of each direction must agree between sender and receiver.
# About 45 s on the loaded 2-core machine; ZBDT_COUNT overrides the count
# per direction.
. "$ZBMD_ROOT/tests/common/tap.sh"
. "$ZBMD_ROOT/tests/dataplane/lib.sh"
need_netns
TAG=zbdtl2$$
COUNT=${ZBDT_COUNT:-500000}
export ZBN_PREFIX=zbdt
CL="$ZBMD_ROOT/scripts/cluster.sh --tag $TAG --dir $T/cl"
XFER=$ZBMD_BUILD/tests/dataplane/helper_xfer
trap '$CL down >/dev/null 2>&1; cleanup_lib' EXIT
plan 10

lossy_cluster 2 5 1 25 21
ok $? "2 namespaces, lossy link: $LOSSY_HOW"
diag "impairment: $LOSSY_HOW"

t0=$SECONDS
for i in 1 2; do
	$CL exec $i "$XFER" -c "$T/cl/node$i.ini" --count "$COUNT" --mix small \
		--seed 17 >"$T/x$i" 2>&1 &
	PIDS+=($!); eval X$i=$!
done
wait_for "$T/x1" '^READY' 60 && wait_for "$T/x2" '^READY' 60
ok $? "both transfer nodes ready"
wait_for "$T/x1" '^DONE' 240 && wait_for "$T/x2" '^DONE' 240
ok $? "both directions complete: $((2 * COUNT)) messages in $((SECONDS - t0)) s"
kill -TERM $X1 $X2; wait $X1; r1=$?; wait $X2; r2=$?
[ $r1 -eq 0 ] && [ $r2 -eq 0 ]; ok $? "both exit 0 after SIGTERM (transfer verified: $r1 $r2)"
grep -h '^FAIL' "$T/x1" "$T/x2" | head -5 | while read -r l; do diag "$l"; done
for i in 1 2; do
	grep -qE "^RESULT node=$i sent=$COUNT acked=$COUNT failed=0 received=$COUNT bad=0 order=0 " "$T/x$i"
	ok $? "node $i: $COUNT sent and acked; $COUNT received exactly once, in order, intact"
done
# end-to-end checksums: what 1 sent is what 2 received, and back
[ "$(field "$T/x1" TX csum)" = "$(field "$T/x2" RX csum)" ] &&
	[ "$(field "$T/x2" TX csum)" = "$(field "$T/x1" RX csum)" ] &&
	[ -n "$(field "$T/x1" TX csum)" ] && [ -n "$(field "$T/x2" TX csum)" ]
ok $? "content checksums agree end to end ($(field "$T/x1" TX csum), $(field "$T/x2" TX csum))"
rt=$(( $(field "$T/x1" RESULT retransmits) + $(field "$T/x2" RESULT retransmits) ))
dup=$(( $(field "$T/x1" RESULT dup_frames) + $(field "$T/x2" RESULT dup_frames) ))
ooo=$(( $(field "$T/x1" RESULT ooo_frames) + $(field "$T/x2" RESULT ooo_frames) ))
data=$(( $(field "$T/x1" TPSTATS data_frames_tx) + $(field "$T/x2" TPSTATS data_frames_tx) ))
mb=$(( ($(field "$T/x1" RESULT bytes) + $(field "$T/x2" RESULT bytes)) >> 20 ))
diag "data frames $data, retransmits $rt, duplicates seen $dup, out-of-order $ooo, $mb MiB delivered"
[ "$rt" -gt $((data / 50)) ]; ok $? "losses were repaired by retransmission ($rt of $data data frames)"
[ "$dup" -gt 0 ] && [ "$ooo" -gt 0 ]; ok $? "duplicates and reordering were seen and hidden"
if [ -n "$IMPAIR_PID" ]; then
	impair_stop; s=$(impair_line); diag "$s"
	echo "$s" | grep -qE 'forwarded=[1-9][0-9]* dropped=[1-9][0-9]* duplicated=[1-9][0-9]* reordered=[1-9]'
	ok $? "the hub did drop, duplicate and reorder"
else
	d=$(netem_drops)
	[ "${d:-0}" -gt 0 ]; ok $? "tc netem dropped frames on the node links (${d:-no netem qdisc})"
fi
done_testing
