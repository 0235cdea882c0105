/* dataplane/join_watch.c — the nodes' join, watched (dp__join_watch_*).
 *
 * A collective host's first barrier (every node joined) waits up to the
 * connect timeout: a node may still be starting. One that had started —
 * the control plane heard its heartbeats — and then went silent long
 * enough for phi to suspect it is not starting but gone. It may never have
 * reached the Raft membership (no epoch removes it) nor acknowledged a
 * frame (the transport waits the connect timeout for such a peer too). A
 * thread on the owner's side polls the control plane's status while the
 * barrier runs and fails the communicators (coll_abort_async) once a node
 * of theirs has been heard and suspected for DP_JOIN_SUSPECT_MS in a row,
 * instead of 30 s later (docs/collectives.md, "Failures"), or at once when
 * a node heard before said it stopped (its control plane's GONE or LEAVE:
 * a node that failed the join itself and exits).
 *
 * ctl_node_status is a weak reference: programs that link the dataplane
 * without control/ have no control node, and then nothing is watched.
 */
#include "internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "zbmd/coll.h"
#include "zbmd/control.h"

static_assert(CFG_MAX_NODES <= 64, "the ring is a 64-bit mask");

#define DP_JOIN_POLL_MS 50u
#define DP_JOIN_SUSPECT_MS 1000u

extern __typeof__(ctl_node_status) ctl_node_status __attribute__((weak));

struct dp_join_watch {
	struct ctl_node *cn;
	struct coll_comm *comms[COLL_HOST_MAX_LANES];
	unsigned ncomms;
	uint64_t ring;                  /* the communicators' nodes but this one */
	atomic_bool stop;
	pthread_t tid;
	struct ctl_status st;
};

/* Abort every communicator when a node of the ring went silent. */
static bool check(struct dp_join_watch *w, uint64_t since[CFG_MAX_NODES])
{
	uint64_t now = zb_now_ns();

	for (uint32_t k = 0; k < w->st.n_peers && k < CFG_MAX_NODES; k++) {
		const struct ctl_peer_status *ps = &w->st.peers[k];
		if (ps->id >= CFG_MAX_NODES || !(w->ring >> ps->id & 1))
			continue;
		char why[200];
		if (ps->heard && ps->gone) {
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
			if (now - since[ps->id] < DP_JOIN_SUSPECT_MS * 1000000ull)
				continue;
			snprintf(why, sizeof(why), "node %u went silent while the nodes "
				 "were joining (%llu heartbeat(s) heard, the last %.0f ms "
				 "ago; phi %.1f)", ps->id, (unsigned long long)ps->heartbeats,
				 ps->last_heard_ms, ps->phi);
		}
		for (unsigned i = 0; i < w->ncomms; i++)
			(void)coll_abort_async(w->comms[i], ZB_ERR_PEER_DOWN, why);
		return true;
	}
	return false;
}

static void *watch_main(void *arg)
{
	struct dp_join_watch *w = arg;
	uint64_t since[CFG_MAX_NODES] = {0};

	while (!atomic_load(&w->stop)) {
		usleep(DP_JOIN_POLL_MS * 1000u);
		if (ctl_node_status(w->cn, &w->st) == 0 && check(w, since))
			break;
	}
	return NULL;
}

struct dp_join_watch *dp__join_watch_start(struct ctl_node *cn,
					   struct coll_comm *const *comms,
					   unsigned ncomms, uint16_t self)
{
	struct dp_join_watch *w;

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
	if (pthread_create(&w->tid, NULL, watch_main, w) != 0) {
		free(w);
		return NULL;
	}
	return w;
}

void dp__join_watch_stop(struct dp_join_watch *w)
{
	if (!w)
		return;
	atomic_store(&w->stop, true);
	pthread_join(w->tid, NULL);
	free(w);
}
