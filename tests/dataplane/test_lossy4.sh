#!/usr/bin/env bash
# Four nodes in network namespaces (net_af_packet on veths), every node
# sending to every other (12 flows) over lossy links: 83,334 messages per
# flow, 1,000,008 in total, 4 streams, mixed sizes (helper_xfer --mix small:
# 80 % 16..256 B, 15 % up to one 1428-byte frame, 4.9 % 1.4..16 KiB, 0.1 %
# 64..256 KiB). Links: loss 5 %, duplication 1 %, reordering 25 % — tc netem
# where the kernel has sch_netem, else tests/dataplane/helper_impair as the
# hub joining the four (the TAP output says which). Every message arrives
# exactly once, in order per (peer, stream), byte-identical, and each flow's
# content checksum agrees between its sender and its receiver.
# About 60 s on the loaded 2-core machine; ZBDT_COUNT overrides the count
# per flow.
. "$ZBMD_ROOT/tests/common/tap.sh"
. "$ZBMD_ROOT/tests/dataplane/lib.sh"
need_netns
TAG=zbdtl4$$
N=4
COUNT=${ZBDT_COUNT:-83334}
export ZBN_PREFIX=zbdt
CL="$ZBMD_ROOT/scripts/cluster.sh --tag $TAG --dir $T/cl"
XFER=$ZBMD_BUILD/tests/dataplane/helper_xfer
trap '$CL down >/dev/null 2>&1; cleanup_lib' EXIT
plan 11

lossy_cluster $N 5 1 25 41
ok $? "$N namespaces, lossy links: $LOSSY_HOW"
diag "impairment: $LOSSY_HOW"

t0=$SECONDS
XP=()
for ((i = 1; i <= N; i++)); do
	$CL exec $i "$XFER" -c "$T/cl/node$i.ini" --count "$COUNT" --mix small \
		--to all --seed 23 >"$T/x$i" 2>&1 &
	PIDS+=($!); XP+=($!)
done
r=0
for ((i = 1; i <= N; i++)); do wait_for "$T/x$i" '^READY' 60 || r=1; done
ok $r "$N transfer nodes ready, each sending to the other $((N - 1))"
r=0
for ((i = 1; i <= N; i++)); do wait_for "$T/x$i" '^DONE' 240 || r=1; done
total=$((N * (N - 1) * COUNT))
ok $r "all $((N * (N - 1))) flows complete: $total messages in $((SECONDS - t0)) s"
kill -TERM "${XP[@]}"
r=0; codes=
for p in "${XP[@]}"; do wait "$p"; c=$?; codes="$codes $c"; [ $c -eq 0 ] || r=1; done
ok $r "all exit 0 after SIGTERM (transfer verified:$codes)"
grep -h '^FAIL' "$T"/x* | head -5 | while read -r l; do diag "$l"; done
r=0
for ((i = 1; i <= N; i++)); do
	per=$(((N - 1) * COUNT))
	grep -qE "^RESULT node=$i sent=$per acked=$per failed=0 received=$per bad=0 order=0 " "$T/x$i" || r=1
done
ok $r "every node: $(((N - 1) * COUNT)) sent and acked, $(((N - 1) * COUNT)) received exactly once, in order, intact"
r=0; flows=0
for ((i = 1; i <= N; i++)); do
	for ((j = 1; j <= N; j++)); do
		[ $i -eq $j ] && continue
		tx=$(grep "^TX node=$i to=$j " "$T/x$i" | sed 's/.*csum=//')
		rx=$(grep "^RX node=$j from=$i " "$T/x$j" | sed 's/.*csum=//')
		sent=$(grep "^TX node=$i to=$j " "$T/x$i" | sed 's/.* acked=\([0-9]*\).*/\1/')
		got=$(grep "^RX node=$j from=$i " "$T/x$j" | sed 's/.* received=\([0-9]*\).*/\1/')
		if [ -n "$tx" ] && [ "$tx" = "$rx" ] && [ "$sent" = "$COUNT" ] && [ "$got" = "$COUNT" ]; then
			flows=$((flows + 1))
		else
			diag "flow $i->$j: acked $sent received $got csum $tx / $rx"; r=1
		fi
	done
done
ok $r "per flow: acked = received = $COUNT and content checksums agree ($flows of $((N * (N - 1))) flows)"
sum() { local s=0 i; for ((i = 1; i <= N; i++)); do s=$((s + $(field "$T/x$i" "$1" "$2"))); done; echo $s; }
rt=$(sum RESULT retransmits); dup=$(sum RESULT dup_frames); ooo=$(sum RESULT ooo_frames)
data=$(sum TPSTATS data_frames_tx); mb=$(( $(sum RESULT bytes) >> 20 ))
diag "data frames $data, retransmits $rt, duplicates seen $dup, out-of-order $ooo, $mb MiB delivered"
[ "$rt" -gt $((data / 50)) ]; ok $? "losses were repaired by retransmission ($rt of $data data frames)"
[ "$dup" -gt 0 ] && [ "$ooo" -gt 0 ]; ok $? "duplicates and reordering were seen and hidden"
[ "$(sum RESULT bad_frames)" -eq 0 ]; ok $? "no frame of the real traffic was refused as bad"
ev=$(grep -h '^EVENT' "$T"/x* | grep -vc ' up ')
[ "$ev" -eq 0 ]; ok $? "no peer was ever declared down or restarted ($ev such events)"
if [ -n "$IMPAIR_PID" ]; then
	impair_stop; s=$(impair_line); diag "$s"
	echo "$s" | grep -qE 'forwarded=[1-9][0-9]* dropped=[1-9][0-9]* duplicated=[1-9][0-9]* reordered=[1-9]'
	ok $? "the hub did drop, duplicate and reorder"
else
	d=$(netem_drops)
	[ "${d:-0}" -gt 0 ]; ok $? "tc netem dropped frames on the node links (${d:-no netem qdisc})"
fi
done_testing
