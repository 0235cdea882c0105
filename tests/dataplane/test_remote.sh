#!/usr/bin/env bash
# Remote actors (zbmd/remote.h) between two nodes joined by net_memif
# (scripts/cluster-memif.sh), each hosting the actor runtime on its dataplane
# lcore as `zbmd run` does (tests/dataplane/helper_remote.c):
#   remote sends from several actors: per-pair FIFO, exactly once, intact
#   (content compared and checksummed), inline and buffer payloads (one- and
#   two-message, zero-copy), inline runs coalesced; remote calls from a
#   thread and from an actor (inline, buffer, RDMA and GPU descriptor
#   payloads); a call timing out and its late reply discarded (thread and
#   actor); a slow remote actor whose full mailbox holds the transport stream
#   (backpressure, nothing lost); an unknown node refused at once; malformed
#   messages counted and dropped; everything routed acknowledged; then the
#   serving node is stopped: a call and an actor's plain send come back as
#   ZB_ERR_PEER_DOWN, and later sends fail at once. Once with one lane, once
#   with two (~12 s in all).
# ZBRA_BENCH=S also prints figures (round trips/s, one-way messages/s).
. "$ZBMD_ROOT/tests/common/tap.sh"
. "$ZBMD_ROOT/tests/dataplane/lib.sh"
TAG=zbra$$
H=$ZBMD_BUILD/tests/dataplane/helper_remote
CLS="$ZBMD_ROOT/scripts/cluster-memif.sh --tag ${TAG}"
trap '$CLS''1 --dir $T/r1/cl down >/dev/null 2>&1; $CLS''2 --dir $T/r2/cl down >/dev/null 2>&1; cleanup_lib' EXIT
plan 60

# one round: ZBN_LCORES=$1 (0-1: one lane; 0-2: two lanes, actors spread and
# stolen across two workers, pairs hashed to two transport instances)
round() {
	local lc=$1 lanes=$2 dir=$T/r$2 cl="$ZBMD_ROOT/scripts/cluster-memif.sh --tag $TAG$2 --dir $T/r$2/cl"
	mkdir -p "$dir"
	# small mailboxes so that the slow actor's fills quickly; a peer that
	# stops answering is declared down after 2 s (1 s is too short when other
	# jobs load this machine: a starved lcore looks like a dead peer)
	ZBN_LCORES=$lc ZBN_EXTRA_INI=$'[actors]\nmailbox_capacity = 64' $cl up 2 >/dev/null
	ok $? "[$lanes lane(s)] memif cluster configs written"
	sed -i '/^\[transport\]/a peer_timeout_ms = 2000\nwindow = 64' "$dir/cl/node1.ini" "$dir/cl/node2.ini"
	[ -n "${ZBRA_SPIN_US:-}" ] && sed -i "/^\\[dataplane\\]/a idle_spin_us = $ZBRA_SPIN_US" "$dir/cl/node1.ini" "$dir/cl/node2.ini"
	# node 1 (the memif server) drives, node 2 (its client) serves the
	# actors; 26 driver checks
	remote_pair "$lanes lane(s)" "$dir" "$H" "$dir/cl/node1.ini" "$dir/cl/node2.ini" \
		"^READY node=1 lanes=$lanes streams=8\.\.15\$" 26
	$cl down >/dev/null 2>&1
}
round 0-1 1
round 0-2 2
done_testing
