/* dataplane/ring_watch.c — a collective host's ring nodes, watched from the
 * control plane (dp__ring_watch_*).
 *
 * The join. A collective host's first barrier (every node joined) waits up
 * to the connect timeout: a node may still be starting. One that had
 * started — the control plane heard its heartbeats — and then went silent
 * long enough for phi to suspect it is not starting but gone. It may never
 * have reached the Raft membership (no epoch removes it) nor acknowledged a
 * frame (the transport waits the connect timeout for such a peer too). So
 * while the barrier runs the communicators fail (coll_abort_async) once a
 * node of theirs has been heard and suspected for DP_WATCH_SUSPECT_MS in a
 * row, instead of 30 s later (docs/collectives.md, "Failures"), or at once
 * when a node heard before said it stopped (its control plane's GONE or
 * LEAVE: a node that failed the join itself and exits).
 *
 * The run. After the barrier a lost node is normally removed by the
 * membership (phi convicts it, the leader commits an epoch without it, and
 * the lanes fail on that epoch: coll_dpdk.c, cd_on_epoch), or seen by the
 * transport (its link went down, or it acknowledged nothing for
 * peer_timeout_ms). Neither comes when Raft cannot commit (two nodes, one
 * of them lost) or the node never joined the membership (lost while the
 * leader was still adding it), and then only [coll] timeout_ms ended the
 * collective. So the watch goes on (dp__ring_watch_joined) and fails the
 * communicators on a ring node suspected for DP_WATCH_SUSPECT_MS in a row
 * where no epoch can remove it: it is not a member, or the members phi does
 * not suspect are no majority of them. Where one can, the membership acts on
 * the same suspicion at once (a Raft leader lost too: after an election),
 * and the watch waits DP_WATCH_MEMBER_SUSPECT_MS, a backstop that lets the
 * epoch come first (2026-11-28: the leader killed, 3 nodes, the epoch
 * 1.67 s after the kill). A node that said it stopped is not a
 * failure here: nodes that finished leave while others finish theirs.
 * The owner stops the watch (dp__ring_watch_stop) before it closes.
 *
 * One thread on the owner's side polls the control plane's status every
 * DP_WATCH_POLL_MS (DP_WATCH_RUN_POLL_MS after the join); nothing of it
 * runs on the lcores. ctl_node_status is a
 * weak reference: programs that link the dataplane without control/ have
 * no control node, and then nothing is watched.
 */
#include "internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "zbmd/coll.h"
#include "zbmd/control.h"

static_assert(CFG_MAX_NODES <= 64, "the ring is a 64-bit mask");

#define DP_WATCH_POLL_MS 50u       /* while joining */
#define DP_WATCH_RUN_POLL_MS 100u  /* after: the run's CPUs are busy */
#define DP_WATCH_SUSPECT_MS 1000u
#define DP_WATCH_MEMBER_SUSPECT_MS 3000u   /* after the join, where an epoch can come */

extern __typeof__(ctl_node_status) ctl_node_status __attribute__((weak));

struct dp_ring_watch {
	struct ctl_node *cn;
	struct coll_comm *comms[COLL_HOST_MAX_LANES];
	unsigned ncomms;
	uint64_t ring;                  /* the communicators' nodes but this one */
	atomic_bool stop;
	atomic_bool joined;             /* the first barrier passed */
	pthread_t tid;
	struct ctl_status st;
};

/* Can the membership commit an epoch without the suspected? Its members
 * that phi does not suspect (this node among them) are a majority. */
static bool quorum_left(const struct ctl_status *st)
{
	uint32_t down = 0;

	for (uint32_t k = 0; k < st->n_peers && k < CFG_MAX_NODES; k++)
		down += st->peers[k].member && st->peers[k].convicted;
	return 2 * (st->st.n - down) > st->st.n;
}

/* Abort every communicator when a node of the ring went silent (or, while
 * joining, said it stopped). true once it did. */
static bool check(struct dp_ring_watch *w, uint64_t since[CFG_MAX_NODES])
{
	uint64_t now = zb_now_ns();
	bool joined = atomic_load(&w->joined);
	bool quorum = joined && quorum_left(&w->st);

	for (uint32_t k = 0; k < w->st.n_peers && k < CFG_MAX_NODES; k++) {
		const struct ctl_peer_status *ps = &w->st.peers[k];
		if (ps->id >= CFG_MAX_NODES || !(w->ring >> ps->id & 1))
			continue;
		char why[240];
		if (ps->heard && ps->gone) {
			since[ps->id] = 0;
			if (joined)   /* finished: its peers may still finish theirs */
				continue;
			/* it said it stopped: no need to wait for phi */
			snprintf(why, sizeof(why), "node %u stopped while the nodes "
				 "were joining (it said so; the last heartbeat %.0f ms ago)",
				 ps->id, ps->last_heard_ms);
		} else if (!ps->heard || !ps->convicted) {
			since[ps->id] = 0;
			continue;
		} else {
			if (!since[ps->id])
				since[ps->id] = now;
			uint32_t dwell = joined && ps->member && quorum
						 ? DP_WATCH_MEMBER_SUSPECT_MS : DP_WATCH_SUSPECT_MS;
			if (now - since[ps->id] < dwell * 1000000ull)
				continue;
			if (joined) {
				char reason[48] = "it was not a member yet";
				if (ps->member && quorum)
					snprintf(reason, sizeof(reason), "no epoch without "
						 "it within %u ms", dwell);
				else if (ps->member)
					snprintf(reason, sizeof(reason), "the members "
						 "left are no majority");
				snprintf(why, sizeof(why), "node %u went silent (%llu "
					 "heartbeat(s) heard, the last %.0f ms ago; phi %.1f) "
					 "and the membership has not removed it (%s)", ps->id,
					 (unsigned long long)ps->heartbeats, ps->last_heard_ms,
					 ps->phi, reason);
			} else
				snprintf(why, sizeof(why), "node %u went silent while the "
					 "nodes were joining (%llu heartbeat(s) heard, the last "
					 "%.0f ms ago; phi %.1f)", ps->id,
					 (unsigned long long)ps->heartbeats, ps->last_heard_ms,
					 ps->phi);
		}
		for (unsigned i = 0; i < w->ncomms; i++)
			(void)coll_abort_async(w->comms[i], ZB_ERR_PEER_DOWN, why);
		return true;
	}
	return false;
}

static void *watch_main(void *arg)
{
	struct dp_ring_watch *w = arg;
	uint64_t since[CFG_MAX_NODES] = {0};

	while (!atomic_load(&w->stop)) {
		usleep((atomic_load(&w->joined) ? DP_WATCH_RUN_POLL_MS :
			DP_WATCH_POLL_MS) * 1000u);
		if (!atomic_load(&w->stop) && ctl_node_status(w->cn, &w->st) == 0 &&
		    check(w, since))
			break;
	}
	return NULL;
}

struct dp_ring_watch *dp__ring_watch_start(struct ctl_node *cn,
					   struct coll_comm *const *comms,
					   unsigned ncomms, uint16_t self)
{
	struct dp_ring_watch *w;

	ZB_ASSERT(comms != NULL && ncomms <= COLL_HOST_MAX_LANES);
	if (!cn || !ctl_node_status || ncomms == 0 ||
	    (w = calloc(1, sizeof(*w))) == NULL)
		return NULL;
	w->cn = cn;
	w->ncomms = ncomms;
	for (unsigned i = 0; i < ncomms; i++)
		w->comms[i] = comms[i];
	for (uint32_t r = 0; r < coll_nranks(comms[0]); r++) {
		uint16_t node = coll_node_of_rank(comms[0], r);
		if (node < CFG_MAX_NODES && node != self)
			w->ring |= 1ull << node;
	}
	atomic_init(&w->stop, false);
	atomic_init(&w->joined, false);
	if (pthread_create(&w->tid, NULL, watch_main, w) != 0) {
		free(w);
		return NULL;
	}
	return w;
}

void dp__ring_watch_joined(struct dp_ring_watch *w)
{
	if (w)
		atomic_store(&w->joined, true);
}

void dp__ring_watch_stop(struct dp_ring_watch *w)
{
	if (!w)
		return;
	atomic_store(&w->stop, true);
	pthread_join(w->tid, NULL);
	free(w);
}
