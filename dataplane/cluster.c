/* dataplane/cluster.c — each lcore's view of the cluster (epoch, leader,
 * ring order) as committed by the control plane, and what an lcore does
 * when it applies a new one (zbmd/dataplane.h, "the cluster view").
 *
 * Each lcore owns one slot: it is the only writer (dp_cluster_apply on that
 * lcore), anyone reads. The slot is a sequence lock (seq odd while being
 * written) over 64-bit words stored with release and loaded with acquire
 * atomics (plain moves on x86), so a reader never sees a torn view and the
 * writer never waits.
 */
#include "internal.h"

#include <string.h>

#include "zbmd/transport.h"

static_assert(DP_CLUSTER_MAX == CFG_MAX_NODES, "one ring slot per node id");
static_assert(sizeof(struct dp_cluster_view) % sizeof(uint64_t) == 0,
	      "the view is copied as 64-bit words");

#define VIEW_WORDS (sizeof(struct dp_cluster_view) / sizeof(uint64_t))

struct cluster_slot {
	uint64_t seq;                /* odd while the lcore writes */
	uint64_t epoch;              /* mirror of view.epoch (acquire loads) */
	uint64_t changes;            /* views applied */
	uint64_t words[VIEW_WORDS];  /* struct dp_cluster_view */
} ZB_ALIGNED_CL;

static struct cluster_slot slots[CFG_MAX_LCORES];

static struct {
	dp_epoch_fn fn;
	void *arg;
} hooks[DP_EPOCH_HOOKS];
static unsigned n_hooks;

int dp_on_epoch(dp_epoch_fn fn, void *arg)
{
	ZB_ASSERT(n_hooks <= DP_EPOCH_HOOKS);
	if (!fn)
		return -EINVAL;
	if (dp__node.launched)
		return -EBUSY;
	if (n_hooks == DP_EPOCH_HOOKS)
		return -ENOSPC;
	hooks[n_hooks].fn = fn;
	hooks[n_hooks].arg = arg;
	n_hooks++;
	return 0;
}

int dp_cluster_view(unsigned index, struct dp_cluster_view *out)
{
	ZB_ASSERT(out != NULL);
	if (index >= CFG_MAX_LCORES)
		return -EINVAL;
	const struct cluster_slot *s = &slots[index];
	uint64_t w[VIEW_WORDS];
	for (;;) {
		uint64_t a = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
		if (a & 1)
			continue;   /* the lcore is writing: a few stores */
		/* acquire loads: the seq re-read below cannot move above them,
		 * and a word of a write in progress makes it see that write's
		 * odd seq (no fences: ThreadSanitizer does not model them) */
		for (size_t i = 0; i < VIEW_WORDS; i++)
			w[i] = __atomic_load_n(&s->words[i], __ATOMIC_ACQUIRE);
		if (__atomic_load_n(&s->seq, __ATOMIC_RELAXED) == a)
			break;
	}
	memcpy(out, w, sizeof(*out));
	ZB_DASSERT(out->n_members <= DP_CLUSTER_MAX);
	return 0;
}

uint64_t dp_cluster_epoch(unsigned index)
{
	if (index >= CFG_MAX_LCORES)
		return 0;
	return __atomic_load_n(&slots[index].epoch, __ATOMIC_ACQUIRE);
}

uint64_t dp_cluster_changes(unsigned index)
{
	if (index >= CFG_MAX_LCORES)
		return 0;
	return __atomic_load_n(&slots[index].changes, __ATOMIC_RELAXED);
}

static bool in_ring(const struct dp_cluster_view *v, uint16_t node)
{
	for (unsigned i = 0; i < v->n_members && i < DP_CLUSTER_MAX; i++)
		if (v->ring[i] == node)
			return true;
	return false;
}

static void publish(struct cluster_slot *s, const struct dp_cluster_view *v)
{
	uint64_t w[VIEW_WORDS];
	uint64_t seq = s->seq;   /* only this lcore writes it */

	memcpy(w, v, sizeof(w));
	__atomic_store_n(&s->seq, seq + 1, __ATOMIC_RELAXED);
	for (size_t i = 0; i < VIEW_WORDS; i++)   /* release: after the odd seq */
		__atomic_store_n(&s->words[i], w[i], __ATOMIC_RELEASE);
	__atomic_store_n(&s->seq, seq + 2, __ATOMIC_RELEASE);
	__atomic_store_n(&s->epoch, v->epoch, __ATOMIC_RELEASE);
	__atomic_store_n(&s->changes, s->changes + 1, __ATOMIC_RELAXED);
}

int dp_cluster_apply(unsigned index, const struct dp_cluster_view *v,
		     uint64_t now_tsc)
{
	ZB_ASSERT(v != NULL);
	ZB_ASSERT(index < CFG_MAX_LCORES && v->n_members <= DP_CLUSTER_MAX);
	struct cluster_slot *s = &slots[index];
	struct dp_cluster_view old;
	memcpy(&old, s->words, sizeof(old));   /* our own slot: no race */
	if (v->epoch < old.epoch)
		return 0;
	publish(s, v);
	if (v->epoch == old.epoch)
		return 1;   /* leader change only */
	/* Sessions with nodes that left: whatever is pending for them fails
	 * now with ZB_ERR_EPOCH (tp_peer_reset), not after peer_timeout_ms. */
	struct tp *tp = dp_transport(index);
	if (tp && old.epoch) {
		for (unsigned i = 0; i < old.n_members; i++)
			if (!in_ring(v, old.ring[i]))
				(void)tp_peer_reset(tp, old.ring[i], dp_now_ns(now_tsc));
	}
	for (unsigned h = 0; h < n_hooks; h++)
		hooks[h].fn(hooks[h].arg, index, old.epoch, v);
	return 1;
}
