/* dataplane/remote.c — remote actors over the reliable transport (zbra_).
 * Contract and wire layout: zbmd/remote.h; docs/remote.md.
 *
 * Per lane (= dataplane lcore = transport instance):
 *   txq    MPSC rte_ring of act_msg *: the router (any thread) enqueues,
 *          the lane's poller dequeues into a small backlog and tp_sends.
 *   slots  send records (serialised header + what a failure report needs),
 *          free list = an rte_ring (a zero-copy payload's last reference may
 *          be dropped on another thread); cookie = slot index | part << 32.
 *   wraps  act_buf wrappers around received tp_msgs (BUF payloads handed to
 *          actors by reference); the last act_buf_unref on the lane's lcore
 *          releases at once, elsewhere it goes through relq (MPSC ring).
 *   rxpend per (peer, stream): the header of a two-part message whose
 *          payload is the next message of that stream.
 *   rtab   per peer node: the remote links and monitors of local actors
 *          (a bounded table sized at attach, under a spinlock: control
 *          signals only, never the message path), each entry with the
 *          message preallocated that tells its local actor when the node is
 *          lost (EXIT / DOWN / DEMONITOR with ZB_ERR_PEER_DOWN).
 * Nothing here allocates after zbra_attach; nothing on the message path
 * locks or makes a syscall (the actor runtime may wake a parked port).
 */
#include "zbmd/remote.h"

#include "zbmd/common.h"
#include "zbmd/config.h"
#include "zbmd/dataplane.h"
#include "zbmd/transport.h"
#include "zbmd/net.h"
#include "remote_car.h"

#include <endian.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_ring.h>
#include <rte_spinlock.h>

#define ZBRA_MAGIC 0x5a425241u   /* "ZBRA", version 1 in the low bits below */
#define ZBRA_VERSION 1u
#define ZBRA_TXQ 1024u           /* router ring per lane (power of two) */
#define ZBRA_SLOTS 2048u         /* send records per lane */
#define ZBRA_WRAPS 1024u         /* received BUF payloads held by actors */
#define ZBRA_BURST 32u
/* send records one poll takes from the lane's queue at most (ZBRA_SLOTS:
 * with a carrier that refuses at once, a peer down, producers on other
 * threads could otherwise keep one loop iteration draining, away from RX,
 * timers and the TX flush; the rest waits for the next iteration) */
#define ZBRA_POLL_TX_MAX ZBRA_SLOTS
#define ZBRA_STREAMS_MAX 8u
#define ZBRA_BATCH_BYTES 1024u   /* records coalesced into one transport message */
#define ZBRA_BATCH_RECS 16u
/* send_done cookies: magic << 40 | part << 32 | slot index. Others on the
 * lane (a raw tp_send by a test, say) are not ours and are ignored. */
#define ZBRA_COOKIE_MAGIC 0x7a6272ull
#define ZBRA_COOKIE(slot, part) \
	(ZBRA_COOKIE_MAGIC << 40 | (uint64_t)(part) << 32 | (uint32_t)(slot))

enum { PS_UNKNOWN = 0, PS_DOWN = 1 };

/* Signal records (link / monitor control, docs/remote.md): payload kind
 * ZBRA_KIND_SIG, tag = enum act_signal or ZBRA_SIG_TICK, d0 = the reason
 * (int32, sign-extended). A tick keeps data pending towards a node we hold
 * links or monitors with, so that the transport notices its loss within
 * peer_timeout even when no application traffic flows. */
#define ZBRA_KIND_SIG 8u
#define ZBRA_SIG_TICK 15u
#define ZBRA_MF_SIG 0x80000000u    /* zbra_meta.flags only: a signal record */


enum { RE_LINK = 1, RE_WATCH, RE_TARGET };

/* One remote link or monitor of a local actor. */
struct zbra_rent {
	act_id local, remote;
	uint64_t ref;                  /* monitors */
	struct act_msg *pre;           /* the node-loss notice, preallocated */
	uint8_t kind;                  /* RE_* */
};

struct zbra_rtab {
	rte_spinlock_t lock;
	_Atomic uint32_t n;            /* entries in use (e[0..n)) */
	struct zbra_rent *e;           /* cap entries, NULL: not a peer */
	uint32_t cap;                  /* [actors] remote_links */
	uint8_t tick[ZBRA_HDR_LEN];    /* the serialised tick record */
};

/* The serialised header (little-endian on the wire). */
struct zbra_hdr {
	uint32_t magic;
	uint8_t version;
	uint8_t kind;     /* enum act_payload */
	uint8_t split;    /* 1: the payload is the next message of this stream */
	uint8_t ilen;     /* inline bytes following */
	uint32_t tag, flags;
	uint64_t from, to, ref, ts_ns;
	uint64_t d0, d1, d2;  /* BUF: len in d1; GPU: ptr, len, backend<<32|dev;
			       * RDMA: addr, len, node<<32|rkey */
};
_Static_assert(sizeof(struct zbra_hdr) == ZBRA_HDR_LEN, "wire header size");
_Static_assert(offsetof(struct zbra_hdr, tag) == 8 &&
	       offsetof(struct zbra_hdr, from) == 16 &&
	       offsetof(struct zbra_hdr, to) == 24 &&
	       offsetof(struct zbra_hdr, d0) == 48, "wire layout (docs/remote.md)");

/* What a failure report needs of one record. */
struct zbra_meta {
	act_id from, to;
	uint64_t ref;
	uint32_t flags;
};

struct zbra_slot {
	struct tp_ref ref;          /* first: the payload's reference */
	struct zbra_lane *lane;
	struct act_msg *msg;        /* two-part only: holds the buffer ref */
	uint16_t peer, stream;
	uint16_t len;               /* serialised bytes in buf */
	uint8_t split, notified;
	uint8_t nrec;               /* records in buf (1 for two-part) */
	uint8_t pl_pending;         /* two-part: the payload accepted, not done */
	int hdr_status;             /* two-part: the header's failure, held
				     * while the payload may still say why */
	_Atomic uint32_t left;      /* completions before the slot is free */
	struct zbra_meta rec[ZBRA_BATCH_RECS];
	uint8_t buf[ZBRA_BATCH_BYTES] __attribute__((aligned(64)));
};

/* Receive side of a batch the transport is retrying (deliver -EAGAIN after
 * some of its records went into mailboxes): those are skipped next time. */
struct zbra_resume {
	uint32_t msg_id, epoch, done;
	uint8_t valid;
};

struct zbra_wrap {
	struct act_buf b;
	struct tp_msg *tm;
	struct zbra_lane *lane;
	struct zbra_wrap *next;     /* free list (lane-local) */
	uint8_t in_use;
};

struct zbra_ctr {              /* router-side: any thread, atomics */
	_Atomic uint64_t routed, ring_full, refused;
} ZB_ALIGNED_CL;

struct zbra_lane {
	unsigned index;
	const struct zbra_car_ops *cops;   /* the carrier (remote_car.h) */
	void *car;
	struct rte_ring *txq, *slotq, *relq;
	struct zbra_slot *slots;
	struct zbra_wrap *wraps, *wfree;
	/* backlog: dequeued from txq, not sent yet (in order) */
	struct act_msg *bk[ZBRA_BURST];
	unsigned bk_i, bk_n;
	struct zbra_slot *cur;      /* head message half sent (split, payload next) */
	struct zbra_slot *ready;    /* head batch serialised, refused (-EAGAIN) */
	struct act_msg *rxpend[CFG_MAX_NODES][ZBRA_STREAMS_MAX];
	struct zbra_resume resume[CFG_MAX_NODES][ZBRA_STREAMS_MAX];
	_Atomic uint8_t peer_state[CFG_MAX_NODES];
	struct zbra_ctr rc;
	/* lane-side counters: written by the lane only */
	uint64_t sent, batches, zc_sent, failed, notified, notify_lost, received,
		zc_received, deferred, stale, stale_answered, bad;
	uint64_t signals, lost_notices, refused_in;
	_Atomic uint64_t rtab_full;    /* any thread */
	uint64_t tick_at;              /* lane 0: next tick round */
	uint64_t members;              /* bitmap of the last applied view */
} ZB_ALIGNED_CL;

static struct zbra {
	struct act_runtime *rt;
	uint16_t self;
	unsigned nlanes;
	uint16_t first_stream, nstreams;
	uint64_t max_message;
	bool known[CFG_MAX_NODES];
	/* lanes whose transport has reported the node down and heard nothing
	 * since: > 0 makes the node down for every sender (a lane that had no
	 * traffic for it would only find out after peer_timeout) */
	_Atomic uint32_t down_lanes[CFG_MAX_NODES];
	/* the incarnation (session epoch) of each peer whose restart ended
	 * its links and monitors last (zbra_peer_event) */
	_Atomic uint32_t peer_epoch[CFG_MAX_NODES];
	struct zbra_lane *lanes;
	struct zbra_rtab rtab[CFG_MAX_NODES];
	uint64_t tick_ns;
	_Atomic int detached;
	struct zbra_netcar *netcar;   /* carrier = tcp / rdma: lane 0's */
	const char *carrier;          /* "dpdk", "tcp", "rdma" */
} Z;

/* The reliable transport on the ports as a carrier (remote_car.h). */
static int car_tp_send(void *car, uint16_t peer, uint16_t stream, const void *data,
		       size_t len, struct tp_ref *ref, uint64_t cookie, uint64_t now_ns)
{
	return tp_send(car, peer, stream, data, len, ref, cookie, now_ns);
}

static void car_tp_release(void *car, struct tp_msg *m)
{
	tp_msg_release(car, m);
}

static size_t car_tp_max_to(void *car, uint16_t peer)
{
	return tp_peer_max_message(car, peer);
}

static void car_tp_reset(void *car, uint16_t peer, uint64_t now_ns)
{
	(void)tp_peer_reset(car, peer, now_ns);
}

static const struct zbra_car_ops car_tp_ops = {
	.send = car_tp_send, .release = car_tp_release,
	.max_to = car_tp_max_to, .reset = car_tp_reset,
};

static inline int car_send(struct zbra_lane *l, uint16_t peer, uint16_t stream,
			   const void *data, size_t len, struct tp_ref *ref,
			   uint64_t cookie, uint64_t now)
{
	return l->cops->send(l->car, peer, stream, data, len, ref, cookie, now);
}

static inline void car_release(struct zbra_lane *l, struct tp_msg *m)
{
	l->cops->release(l->car, m);
}

static inline uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

static inline uint64_t pair_hash(act_id from, act_id to)
{
	return mix64(from * 0x9e3779b97f4a7c15ull ^ to);
}

unsigned zbra_lane_of(act_id from, act_id to)
{
	return Z.nlanes ? (unsigned)(pair_hash(from, to) % Z.nlanes) : 0;
}

/* ---- remote links and monitors: the per-node table (any thread) ---------------- */

/* Index of the entry, or -1. LINK: (local, remote); WATCH: (local, ref);
 * TARGET: (remote, ref). Lock held. */
static int rt_find(const struct zbra_rtab *t, uint8_t kind, act_id local,
		   act_id remote, uint64_t ref)
{
	uint32_t n = atomic_load_explicit(&t->n, memory_order_relaxed);
	ZB_DASSERT(t->e != NULL && n <= t->cap);
	ZB_DASSERT(kind >= RE_LINK && kind <= RE_TARGET);
	for (uint32_t i = 0; i < n; i++) {
		const struct zbra_rent *e = &t->e[i];
		if (e->kind != kind)
			continue;
		if (kind == RE_LINK ? e->local == local && e->remote == remote
		    : kind == RE_WATCH ? e->local == local && e->ref == ref
				       : e->remote == remote && e->ref == ref)
			return (int)i;
	}
	return -1;
}

/* Records a remote link / monitor. 0 (added), 1 (that link exists
 * already), -ENOSPC (table full), -ENOBUFS (no message for its node-loss
 * notice). */
static int rt_add(struct zbra_rtab *t, uint8_t kind, act_id local, act_id remote,
		  uint64_t ref)
{
	ZB_DASSERT(t->e != NULL);
	ZB_DASSERT(kind >= RE_LINK && kind <= RE_TARGET);
	struct act_msg *pre = act_msg_alloc(Z.rt);
	if (!pre)
		return -ENOBUFS;
	int rc = 0;
	rte_spinlock_lock(&t->lock);
	uint32_t n = atomic_load_explicit(&t->n, memory_order_relaxed);
	if (kind == RE_LINK && rt_find(t, kind, local, remote, ref) >= 0) {
		rc = 1;
	} else if (n == t->cap) {
		rc = -ENOSPC;
	} else {
		t->e[n] = (struct zbra_rent){local, remote, ref, pre, kind};
		atomic_store_explicit(&t->n, n + 1, memory_order_relaxed);
		pre = NULL;
	}
	rte_spinlock_unlock(&t->lock);
	if (pre)
		act_msg_free(Z.rt, pre);
	return rc;
}

/* Forgets a remote link / monitor (no-op when absent). */
static void rt_del(struct zbra_rtab *t, uint8_t kind, act_id local, act_id remote,
		   uint64_t ref)
{
	ZB_DASSERT(t->e != NULL);
	ZB_DASSERT(kind >= RE_LINK && kind <= RE_TARGET);
	struct act_msg *pre = NULL;
	rte_spinlock_lock(&t->lock);
	int i = rt_find(t, kind, local, remote, ref);
	if (i >= 0) {
		uint32_t n = atomic_load_explicit(&t->n, memory_order_relaxed) - 1;
		pre = t->e[i].pre;
		t->e[i] = t->e[n];
		atomic_store_explicit(&t->n, n, memory_order_relaxed);
	}
	rte_spinlock_unlock(&t->lock);
	if (pre)
		act_msg_free(Z.rt, pre);
}

/* The node is lost (transport PEER_DOWN, or a new epoch: its actors are
 * gone): every local actor linked to or monitoring one of its actors gets
 * its EXIT / DOWN with ZB_ERR_PEER_DOWN (noconnection); a local actor it
 * monitored forgets that monitor. Returns the notices delivered. */
static unsigned node_lost(uint16_t node)
{
	struct zbra_rtab *t = &Z.rtab[node];
	unsigned k = 0;
	ZB_ASSERT(node < CFG_MAX_NODES);
	ZB_ASSERT(Z.rt != NULL);
	if (!t->e || atomic_load_explicit(&t->n, memory_order_relaxed) == 0)
		return 0;
	rte_spinlock_lock(&t->lock);
	uint32_t n = atomic_load_explicit(&t->n, memory_order_relaxed);
	for (uint32_t i = 0; i < n; i++) {
		struct zbra_rent *e = &t->e[i];
		struct act_msg *m = e->pre;
		m->from = e->remote;
		m->to = e->local;
		m->ref = e->ref;
		/* EXIT_LINK / DOWN / DEMONITOR never call back into the router */
		int sig = e->kind == RE_LINK ? ACT_SIG_EXIT_LINK
			: e->kind == RE_WATCH ? ACT_SIG_DOWN : ACT_SIG_DEMONITOR;
		k += act_deliver_remote_signal(Z.rt, m, sig, ZB_ERR_PEER_DOWN) == 0;
	}
	atomic_store_explicit(&t->n, 0, memory_order_relaxed);
	rte_spinlock_unlock(&t->lock);
	return k;
}

/* ---- router (any thread) ------------------------------------------------------ */

static int lane_enqueue(struct zbra *z, struct act_msg *m, uint16_t node);

/* A link / monitor signal from local m->from to remote m->to: the table
 * first (an entry exists before its signal leaves), then the lane. */
static int route_signal(struct zbra *z, struct act_msg *m, uint16_t node)
{
	struct zbra_rtab *t = &z->rtab[node];
	int sig = act_msg_signal(m), rc = 0;
	uint8_t added = 0;
	ZB_ASSERT(t->e != NULL);
	ZB_DASSERT(m->kind == ACT_PL_NONE);
	m->flags = 0;
	m->ts_ns = 0;
	if (act_id_gen(m->to) == 0)
		return ZB_ERR_STALE_ID;   /* names no actor (generation 0) */
	switch (sig) {
	case ACT_SIG_LINK:
		/* an entry already there (the peer's LINK made it, its signal
		 * still queued for m->from) is not ours to take back below */
		rc = rt_add(t, RE_LINK, m->from, m->to, 0);
		added = rc == 0 ? RE_LINK : 0;
		rc = rc > 0 ? 0 : rc;
		break;
	case ACT_SIG_MONITOR:
		rc = rt_add(t, RE_WATCH, m->from, m->to, m->ref);
		added = rc == 0 ? RE_WATCH : 0;
		break;
	case ACT_SIG_UNLINK:
	case ACT_SIG_EXIT_LINK:
		rt_del(t, RE_LINK, m->from, m->to, 0);
		break;
	case ACT_SIG_DEMONITOR:
		rt_del(t, RE_WATCH, m->from, m->to, m->ref);
		break;
	case ACT_SIG_DOWN:
		rt_del(t, RE_TARGET, m->from, m->to, m->ref);
		break;
	case ACT_SIG_EXIT:
		break;   /* act_exit_signal: nothing to record */
	default:
		return -EINVAL;
	}
	if (rc) {
		atomic_fetch_add_explicit(&z->lanes[0].rtab_full, 1, memory_order_relaxed);
		return rc;
	}
	rc = lane_enqueue(z, m, node);
	if (rc && added)
		rt_del(t, added, m->from, m->to, m->ref);
	return rc;
}

/* A message every receiver takes (rx_record): an application tag, or the
 * error reply to a call whose actor was gone (answer_stale_call; act_send
 * lets ACT_TAG_UNDELIVERED through for it), with a payload kind it knows.
 * Anything else the receiver refuses; the lane coalesces the records of
 * every pair on a stream, so it must not leave this node. */
static inline bool routable(const struct act_msg *m)
{
	if (ZB_UNLIKELY(m->kind > ACT_PL_RDMA ||
			(m->kind == ACT_PL_INLINE && m->len > ACT_INLINE_MAX)))
		return false;
	return m->tag <= ACT_TAG_USER_MAX ||
	       (m->tag == ACT_TAG_UNDELIVERED && m->kind == ACT_PL_NONE &&
		(m->flags & ACT_MF_REPLY) && m->ref != 0 && m->_reason < 0);
}

static int zbra_route(void *ctx, struct act_msg *m)
{
	struct zbra *z = ctx;
	uint16_t node = act_id_node(m->to);
	ZB_DASSERT(z == &Z && m != NULL);
	if (ZB_UNLIKELY(node >= CFG_MAX_NODES || !z->known[node])) {
		atomic_fetch_add_explicit(&z->lanes[0].rc.refused, 1, memory_order_relaxed);
		return -EHOSTUNREACH;
	}
	if (ZB_UNLIKELY(act_msg_signal(m) != ACT_SIG_NONE))
		return route_signal(z, m, node);
	if (ZB_UNLIKELY(!routable(m))) {
		atomic_fetch_add_explicit(&z->lanes[0].rc.refused, 1, memory_order_relaxed);
		return -EINVAL;
	}
	return lane_enqueue(z, m, node);
}

static int lane_enqueue(struct zbra *z, struct act_msg *m, uint16_t node)
{
	struct zbra_lane *l = &z->lanes[pair_hash(m->from, m->to) % z->nlanes];
	if (ZB_UNLIKELY(atomic_load_explicit(&z->down_lanes[node],
					     memory_order_relaxed) != 0)) {
		atomic_fetch_add_explicit(&l->rc.refused, 1, memory_order_relaxed);
		return ZB_ERR_PEER_DOWN;
	}
	if (ZB_UNLIKELY(m->kind == ACT_PL_BUF && m->u.buf.len > z->max_message)) {
		atomic_fetch_add_explicit(&l->rc.refused, 1, memory_order_relaxed);
		return -EMSGSIZE;
	}
	if (ZB_UNLIKELY(rte_ring_mp_enqueue(l->txq, m) != 0)) {
		atomic_fetch_add_explicit(&l->rc.ring_full, 1, memory_order_relaxed);
		return ZB_ERR_MAILBOX_FULL;
	}
	atomic_fetch_add_explicit(&l->rc.routed, 1, memory_order_relaxed);
	return 0;
}

/* ---- failure reports (lane) --------------------------------------------------- */

/* An ACT_TAG_UNDELIVERED message about `about` (a call's error reply when
 * ref is set), or NULL (counted: no actor can be told). */
static struct act_msg *undelivered_new(struct zbra_lane *l, act_id about,
				       uint64_t ref, int status)
{
	struct act_msg *n = act_msg_alloc(Z.rt);
	if (!n) {
		l->notify_lost++;
		return NULL;
	}
	n->kind = ACT_PL_NONE;
	n->tag = ACT_TAG_UNDELIVERED;
	n->from = about;
	n->_reason = status;
	if (ref) {   /* a call request: this is its (error) reply */
		n->ref = ref;
		n->flags = ACT_MF_REPLY;
	}
	return n;
}

/* A message accepted by the router was not delivered: tell its sender. */
static void report_failure(struct zbra_lane *l, act_id from, act_id to,
			   uint64_t ref, uint32_t flags, int status)
{
	ZB_DASSERT(l != NULL);
	ZB_DASSERT(status < 0);
	l->failed++;
	if (atomic_load_explicit(&Z.detached, memory_order_acquire))
		return;
	if (flags & ZBRA_MF_SIG)
		return;   /* a link/monitor signal: node_lost tells its actor */
	if ((flags & ACT_MF_REPLY) || from == ACT_ID_NONE ||
	    act_id_node(from) != Z.self) {
		l->notify_lost++;   /* a reply (the caller times out) or no actor */
		return;
	}
	struct act_msg *n = undelivered_new(l, to, ref, status);
	if (!n)
		return;
	if (act_send(Z.rt, from, n) != 0) {
		act_msg_free(Z.rt, n);
		l->notify_lost++;
		return;
	}
	l->notified++;
}

/* ---- send records ------------------------------------------------------------- */

static void slot_put(struct zbra_slot *s)
{
	struct zbra_lane *l = s->lane;
	s->msg = NULL;
	/* the ring holds every slot: never full */
	int rc = rte_ring_mp_enqueue(l->slotq, s);
	ZB_ASSERT(rc == 0);
}

static void slot_done(struct zbra_slot *s)
{
	if (atomic_fetch_sub_explicit(&s->left, 1, memory_order_acq_rel) != 1)
		return;
	if (s->msg && !atomic_load_explicit(&Z.detached, memory_order_acquire))
		act_msg_free(Z.rt, s->msg);   /* drops the act_buf reference */
	slot_put(s);
}

/* The payload's last reference (transport + NIC done): any thread. */
static void payload_free(struct tp_ref *ref)
{
	slot_done((struct zbra_slot *)ref);
}

static void fail_slot(struct zbra_lane *l, struct zbra_slot *s, int status)
{
	if (s->notified)
		return;
	s->notified = 1;
	for (unsigned i = 0; i < s->nrec; i++)
		report_failure(l, s->rec[i].from, s->rec[i].to, s->rec[i].ref,
			       s->rec[i].flags, status);
}

static void zbra_send_done(void *arg, unsigned index, uint64_t cookie, int status)
{
	(void)arg;
	ZB_ASSERT(Z.lanes != NULL && index < Z.nlanes);
	struct zbra_lane *l = &Z.lanes[index];
	uint32_t i = (uint32_t)cookie;
	if ((cookie >> 40) != ZBRA_COOKIE_MAGIC || i >= ZBRA_SLOTS)
		return;   /* not one of ours */
	struct zbra_slot *s = &l->slots[i];
	unsigned part = (unsigned)(cookie >> 32) & 0xff;
	if (status != 0) {
		if (part == 0 && s->pl_pending)
			s->hdr_status = status;   /* the payload's own reason first
						   * (-EMSGSIZE over an epoch) */
		else
			fail_slot(l, s, status);
	} else if (part == 0) {
		l->sent += s->nrec;
	} else if (s->hdr_status) {
		fail_slot(l, s, s->hdr_status);
	}
	if (part == 1)
		s->pl_pending = 0;
	slot_done(s);
}

/* True when m goes as two transport messages (header, then payload). */
static inline bool is_split(const struct act_msg *m)
{
	return m->kind == ACT_PL_BUF &&
	       ZBRA_HDR_LEN + m->u.buf.len > ZBRA_SMALL_MAX;
}

/* Serialised size of a one-message record. */
static inline size_t rec_len(const struct act_msg *m)
{
	if (m->kind == ACT_PL_INLINE)
		return ZBRA_HDR_LEN + m->len;
	if (m->kind == ACT_PL_BUF && !is_split(m))
		return ZBRA_HDR_LEN + m->u.buf.len;
	return ZBRA_HDR_LEN;
}

/* Serialise m at dst (room for rec_len(m)); returns the byte count and
 * whether it is the header of a two-part message. */
static uint16_t serialise(uint8_t *dst, const struct act_msg *m, uint8_t *split)
{
	struct zbra_hdr h;
	memset(&h, 0, sizeof(h));
	h.magic = htole32(ZBRA_MAGIC);
	h.version = ZBRA_VERSION;
	h.kind = m->kind;
	h.tag = htole32(m->tag);
	h.flags = htole32(m->flags);
	h.from = htole64(m->from);
	h.to = htole64(m->to);
	h.ref = htole64(m->ref);
	h.ts_ns = htole64(m->ts_ns);
	size_t extra = 0;
	const void *src = NULL;
	if (ZB_UNLIKELY(act_msg_signal(m) != ACT_SIG_NONE)) {
		h.kind = ZBRA_KIND_SIG;
		h.tag = htole32((uint32_t)act_msg_signal(m));
		h.flags = 0;
		h.ts_ns = 0;
		h.d0 = htole64((uint64_t)(int64_t)act_msg_reason(m));
		memcpy(dst, &h, sizeof(h));
		*split = 0;
		return (uint16_t)sizeof(h);
	}
	if (ZB_UNLIKELY(m->tag == ACT_TAG_UNDELIVERED))
		h.d0 = htole64((uint64_t)(int64_t)m->_reason);   /* a call's error reply */
	switch (m->kind) {
	case ACT_PL_INLINE:
		h.ilen = (uint8_t)m->len;
		extra = m->len;
		src = m->u.bytes;
		break;
	case ACT_PL_BUF:
		h.d1 = htole64(m->u.buf.len);
		if (ZBRA_HDR_LEN + m->u.buf.len <= ZBRA_SMALL_MAX) {
			extra = m->u.buf.len;
			src = (const uint8_t *)m->u.buf.buf->data + m->u.buf.off;
		} else {
			h.split = 1;
		}
		break;
	case ACT_PL_GPU:
		h.d0 = htole64((uint64_t)(uintptr_t)m->u.gpu.ptr);
		h.d1 = htole64(m->u.gpu.len);
		h.d2 = htole64((uint64_t)m->u.gpu.backend << 32 | m->u.gpu.device);
		break;
	case ACT_PL_RDMA:
		h.d0 = htole64(m->u.rdma.addr);
		h.d1 = htole64(m->u.rdma.len);
		h.d2 = htole64((uint64_t)m->u.rdma.node << 32 | m->u.rdma.rkey);
		break;
	default:
		break;
	}
	memcpy(dst, &h, sizeof(h));
	if (extra)
		memcpy(dst + sizeof(h), src, extra);
	*split = h.split;
	return (uint16_t)(sizeof(h) + extra);
}

static inline uint32_t meta_flags(const struct act_msg *m)
{
	return act_msg_signal(m) != ACT_SIG_NONE ? ZBRA_MF_SIG : m->flags;
}

static inline uint16_t stream_of(act_id from, act_id to)
{
	return (uint16_t)(Z.first_stream + (pair_hash(from, to) >> 32) % Z.nstreams);
}

/* Sends the backlog's head message, coalescing the messages after it that go
 * to the same (peer, stream) as one-message records (no buffer payloads)
 * into the same transport message, up to ZBRA_BATCH_BYTES. Returns the
 * backlog entries consumed (sent, or failed and reported), 0 when the
 * transport is full (the head waits). */
static unsigned tx_head(struct zbra_lane *l, uint64_t now)
{
	struct act_msg *m = l->bk[l->bk_i];
	struct zbra_slot *s = l->cur;
	int rc;
	if (!s && l->ready) {
		/* serialised already: the same records, sent as they are */
		s = l->ready;
		l->ready = NULL;
		goto send;
	}
	if (!s) {
		void *p;
		if (rte_ring_sc_dequeue(l->slotq, &p) != 0)
			return 0;
		s = p;
		s->peer = act_id_node(m->to);
		s->stream = stream_of(m->from, m->to);
		s->notified = 0;
		s->pl_pending = 0;
		s->hdr_status = 0;
		s->msg = NULL;
		s->rec[0] = (struct zbra_meta){m->from, m->to, m->ref, meta_flags(m)};
		s->nrec = 1;
		s->len = serialise(s->buf, m, &s->split);
		if (!s->split && m->kind != ACT_PL_BUF) {
			for (unsigned j = l->bk_i + 1; j < l->bk_n &&
						       s->nrec < ZBRA_BATCH_RECS; j++) {
				const struct act_msg *n = l->bk[j];
				uint8_t sp;
				if (n->kind == ACT_PL_BUF || act_id_node(n->to) != s->peer ||
				    stream_of(n->from, n->to) != s->stream ||
				    s->len + rec_len(n) > ZBRA_BATCH_BYTES)
					break;
				s->rec[s->nrec++] = (struct zbra_meta){n->from, n->to,
								       n->ref, meta_flags(n)};
				s->len += serialise(s->buf + s->len, n, &sp);
			}
		}
		/* a payload the peer would refuse: its header must not go (the
		 * peer would wait for the payload and take the next message
		 * for it) */
		if (s->split && l->cops->max_to &&
		    m->u.buf.len > l->cops->max_to(l->car, s->peer)) {
			rc = -EMSGSIZE;
			goto refused;
		}
send:
		atomic_store_explicit(&s->left, s->split ? 3 : 1, memory_order_relaxed);
		rc = car_send(l, s->peer, s->stream, s->buf, s->len, NULL,
			     ZBRA_COOKIE(s - l->slots, 0), now);
refused:
		if (rc == -EAGAIN) {
			l->ready = s;   /* the carrier is full: the head waits */
			return 0;
		}
		unsigned n = s->nrec;
		if (rc != 0) {
			for (unsigned i = 0; i < n; i++)
				report_failure(l, s->rec[i].from, s->rec[i].to,
					       s->rec[i].ref, s->rec[i].flags, rc);
			slot_put(s);
		} else if (!s->split) {
			l->batches += n > 1;
		} else {
			s->msg = m;              /* keeps the payload's buffer ref */
			l->cur = s;
		}
		if (!l->cur) {
			/* serialised (or failed): the messages are the runtime's again */
			for (unsigned i = 0; i < n; i++)
				act_msg_free(Z.rt, l->bk[l->bk_i + i]);
			return n;
		}
	}
	/* the payload of a two-part message, by reference */
	ZB_DASSERT(s->msg == m && m->kind == ACT_PL_BUF);
	tp_ref_init(&s->ref, payload_free);
	rc = car_send(l, s->peer, s->stream,
		     (const uint8_t *)m->u.buf.buf->data + m->u.buf.off,
		     m->u.buf.len, &s->ref, ZBRA_COOKIE(s - l->slots, 1), now);
	if (rc == -EAGAIN)
		return 0;
	l->cur = NULL;
	if (rc != 0) {
		/* never accepted: no send_done for it. Its header was: the
		 * peer takes the next message of the stream for this payload
		 * unless the session starts over (it then drops the header;
		 * what else was in flight fails, with an error to its sender,
		 * and the header's completion comes now, failed or not) */
		fail_slot(l, s, rc);
		if (l->cops->reset)
			l->cops->reset(l->car, s->peer, now);
		slot_done(s);                /* the payload's send_done */
	} else {
		s->pl_pending = 1;
		l->zc_sent++;
	}
	tp_ref_put(&s->ref);                 /* the owner's reference */
	return 1;
}

/* ---- receive (lane) ----------------------------------------------------------- */

static void wrap_release_now(struct zbra_wrap *w)
{
	struct zbra_lane *l = w->lane;
	car_release(l, w->tm);
	w->tm = NULL;
	w->in_use = 0;
	w->next = l->wfree;
	l->wfree = w;
}

/* act_buf release: any thread. */
static void wrap_release(struct act_buf *b, void *ctx)
{
	struct zbra_wrap *w = ctx;
	(void)b;
	if (atomic_load_explicit(&Z.detached, memory_order_acquire))
		return;   /* zbra_detach gives everything back */
	if (dp_lcore_index() == (int)w->lane->index) {
		wrap_release_now(w);
		return;
	}
	int rc = rte_ring_mp_enqueue(w->lane->relq, w);
	ZB_ASSERT(rc == 0);   /* relq holds every wrapper */
}

static struct zbra_wrap *wrap_get(struct zbra_lane *l, struct tp_msg *tm)
{
	struct zbra_wrap *w = l->wfree;
	if (!w)
		return NULL;
	l->wfree = w->next;
	w->in_use = 1;
	w->tm = tm;
	atomic_store_explicit(&w->b.refs, 1, memory_order_relaxed);
	w->b.data = tm->data;
	w->b.len = tm->len;
	w->b.release = wrap_release;
	w->b.ctx = w;
	return w;
}

/* Undo wrap_get for a message the transport keeps (deferred). */
static void wrap_unget(struct zbra_lane *l, struct zbra_wrap *w)
{
	w->tm = NULL;
	w->in_use = 0;
	w->next = l->wfree;
	l->wfree = w;
}

/* A call request m reached an actor that is gone: its caller hears it now
 * (ACT_TAG_UNDELIVERED, ZB_ERR_STALE_ID, as a local call would return at
 * once), not when its timeout expires. If it cannot be sent, the caller
 * times out as before. */
static void answer_stale_call(struct zbra_lane *l, const struct act_msg *m)
{
	struct act_msg *n = undelivered_new(l, m->to, m->ref, ZB_ERR_STALE_ID);
	if (!n)
		return;
	n->to = m->from;
	if (zbra_route(&Z, n) != 0) {
		act_msg_free(Z.rt, n);
		l->notify_lost++;
		return;
	}
	l->stale_answered++;
}

/* Deliver m (whose BUF payload, if any, is w) into its mailbox. Returns the
 * transport's answer: 0 taken, -EAGAIN hold. m is consumed unless -EAGAIN
 * (then m stays with the caller, without w). */
static int deliver_local(struct zbra_lane *l, struct act_msg *m,
			 struct zbra_wrap *w)
{
	int rc = act_deliver_remote(Z.rt, m);
	if (rc == 0) {
		l->received++;
		l->zc_received += w != NULL;
		return 0;
	}
	if (rc == ZB_ERR_MAILBOX_FULL || rc == -ENOBUFS) {
		if (w) {
			m->kind = ACT_PL_NONE;
			m->u.buf.buf = NULL;
			wrap_unget(l, w);
		}
		l->deferred++;
		return -EAGAIN;
	}
	if (rc == ZB_ERR_STALE_ID) {
		l->stale++;       /* gone: dead actor, or a late reply */
		if (m->ref && !(m->flags & ACT_MF_REPLY) && act_id_gen(m->from) != 0)
			answer_stale_call(l, m);
	} else {
		l->bad++;
	}
	act_msg_free(Z.rt, m);    /* drops w's reference: released at once */
	return 0;
}

static void rxpend_clear(struct zbra_lane *l, uint16_t peer)
{
	for (unsigned s = 0; s < ZBRA_STREAMS_MAX; s++) {
		l->resume[peer][s].valid = 0;
		if (l->rxpend[peer][s]) {
			act_msg_free(Z.rt, l->rxpend[peer][s]);
			l->rxpend[peer][s] = NULL;
			l->failed++;
		}
	}
}

/* A signal record from `peer` (header validated as a record already):
 * checks its fields, updates the table and hands it to the runtime. 0 done,
 * -EAGAIN no message free (nothing done), 1 malformed. */
static int rx_signal(struct zbra_lane *l, uint16_t peer, const struct zbra_hdr *h)
{
	uint32_t sig = le32toh(h->tag);
	act_id from = le64toh(h->from), to = le64toh(h->to);
	uint64_t ref = le64toh(h->ref);
	int64_t reason = (int64_t)le64toh(h->d0);
	ZB_DASSERT(l != NULL && h != NULL);
	ZB_DASSERT(h->kind == ZBRA_KIND_SIG);
	bool ok = h->flags == 0 && h->ts_ns == 0 && h->d1 == 0 && h->d2 == 0 &&
		  h->ilen == 0 && act_id_node(from) == peer &&
		  reason >= INT32_MIN && reason <= INT32_MAX;
	if (sig == ZBRA_SIG_TICK)
		return ok && from == act_id_make(peer, 0, 0) &&
		       to == act_id_make(Z.self, 0, 0) && ref == 0 && reason == 0 ? 0 : 1;
	bool has_ref = sig == ACT_SIG_MONITOR || sig == ACT_SIG_DEMONITOR ||
		       sig == ACT_SIG_DOWN;
	/* an exit signal may come from a thread that is not an actor: from
	 * is then the node-only id act_id_make(peer, 0, 0) */
	bool from_ok = act_id_gen(from) != 0 ||
		       (sig == ACT_SIG_EXIT && from == act_id_make(peer, 0, 0));
	ok = ok && (sig == ACT_SIG_EXIT_LINK || sig == ACT_SIG_EXIT ||
		    sig == ACT_SIG_LINK || sig == ACT_SIG_UNLINK || has_ref) &&
	     from_ok && act_id_gen(to) != 0 &&
	     (has_ref ? ref != 0 : ref == 0) &&
	     (sig == ACT_SIG_EXIT_LINK || sig == ACT_SIG_EXIT ||
	      sig == ACT_SIG_DOWN || reason == 0);
	if (!ok || !Z.rtab[peer].e)
		return 1;
	struct act_msg *m = act_msg_alloc(Z.rt);
	if (ZB_UNLIKELY(!m)) {
		l->deferred++;
		return -EAGAIN;
	}
	m->from = from;
	m->to = to;
	m->ref = ref;
	struct zbra_rtab *t = &Z.rtab[peer];
	int rc = 0;
	switch (sig) {
	case ACT_SIG_LINK:
		rc = rt_add(t, RE_LINK, to, from, 0);
		rc = rc > 0 ? 0 : rc;   /* that link exists already */
		break;
	case ACT_SIG_MONITOR:
		rc = rt_add(t, RE_TARGET, to, from, ref);
		break;
	case ACT_SIG_UNLINK:
	case ACT_SIG_EXIT_LINK:
		rt_del(t, RE_LINK, to, from, 0);
		break;
	case ACT_SIG_DEMONITOR:
		rt_del(t, RE_TARGET, to, from, ref);
		break;
	case ACT_SIG_EXIT:
		break;
	default: /* DOWN */
		rt_del(t, RE_WATCH, to, from, ref);
		break;
	}
	if (rc) {
		/* cannot record it: the link breaks / the monitor fires at once,
		 * with the reason (-ENOSPC, -ENOBUFS) */
		atomic_fetch_add_explicit(&l->rtab_full, 1, memory_order_relaxed);
		act_msg_set_signal(m, sig == ACT_SIG_LINK ? ACT_SIG_EXIT_LINK
							: ACT_SIG_DOWN, rc);
		m->from = to;
		m->to = from;
		if (zbra_route(&Z, m))
			act_msg_free(Z.rt, m);
		return 0;
	}
	l->signals++;
	/* a dead target answers LINK / MONITOR with noproc through the router,
	 * which also forgets the entry made above */
	act_deliver_remote_signal(Z.rt, m, (int)sig, (int)reason);
	return 0;
}

/* Parses the record at *off of tm and delivers it (or only steps over it:
 * skip). 0: done, *off moved past it; -EAGAIN: hold tm (nothing of this
 * record was delivered); 2: refused (a reserved tag, another node's actor,
 * a broken signal), *off moved past it: its length is known, and the
 * records after it are delivered; 1: malformed framing (bad magic, version
 * or kind, a length beyond the message: where the next record starts is
 * not known, stop). A buffer payload (its bytes, or the header of a
 * two-part message) is only valid as the sole record; its wrapper then
 * owns tm (*wrapped) or the header waits in *pend. */
static int rx_record(struct zbra_lane *l, struct tp_msg *tm, size_t at,
		     bool skip, size_t *off, struct act_msg **pend, bool *wrapped)
{
	struct zbra_hdr h;
	if (ZB_UNLIKELY(tm->len - at < sizeof(h)))
		return 1;
	memcpy(&h, tm->data + at, sizeof(h));
	size_t room = tm->len - at - sizeof(h), extra = 0;
	uint64_t d1 = le64toh(h.d1);
	bool ok = le32toh(h.magic) == ZBRA_MAGIC && h.version == ZBRA_VERSION &&
		  !(h.split && h.kind != ACT_PL_BUF);
	switch (h.kind) {
	case ACT_PL_NONE:
	case ACT_PL_GPU:
	case ACT_PL_RDMA:
		break;
	case ACT_PL_INLINE:
		ok = ok && h.ilen <= ACT_INLINE_MAX;
		extra = h.ilen;
		break;
	case ZBRA_KIND_SIG:
		ok = ok && h.ilen == 0;
		break;
	case ACT_PL_BUF:
		ok = ok && at == 0 &&
		     (h.split ? room == 0 && d1 > ZBRA_SMALL_MAX - ZBRA_HDR_LEN
			      : room == d1);
		extra = h.split ? 0 : d1;
		break;
	default:
		ok = false;
	}
	if (ZB_UNLIKELY(!ok || extra > room))
		return 1;
	act_id to = le64toh(h.to);
	/* application tags; and the error reply to a call of ours whose
	 * actor was gone (answer_stale_call): no payload, reason in d0 */
	int64_t reason = (int64_t)le64toh(h.d0);
	bool undeliv = le32toh(h.tag) == ACT_TAG_UNDELIVERED && h.kind == ACT_PL_NONE &&
		       (le32toh(h.flags) & ACT_MF_REPLY) && h.ref != 0 &&
		       reason < 0 && reason >= INT32_MIN;
	/* framed: whatever its fields say, the next record starts here. A
	 * refused one used to stop the parse, and the valid records after it
	 * (other senders' too: the sending lane coalesces every pair of the
	 * stream) were dropped with it */
	size_t next = at + sizeof(h) + extra;
	if (skip) {
		*off = next;
		return 0;
	}
	if (ZB_UNLIKELY(act_id_node(to) != Z.self ||
			(le32toh(h.tag) > ACT_TAG_USER_MAX && !undeliv))) {
		if (h.kind == ACT_PL_BUF && h.split) {
			/* its payload is the next message of this stream: a
			 * header that names no actor waits for it and drops it
			 * (zbra_deliver), or the payload's bytes would be
			 * parsed as records */
			struct act_msg *dm = act_msg_alloc(Z.rt);
			if (ZB_UNLIKELY(!dm)) {
				l->deferred++;
				return -EAGAIN;
			}
			dm->to = ACT_ID_NONE;
			dm->kind = ACT_PL_NONE;
			dm->u.buf.buf = NULL;
			dm->u.buf.off = 0;
			dm->u.buf.len = d1;
			*pend = dm;
		}
		*off = next;
		return 2;
	}
	if (h.kind == ZBRA_KIND_SIG) {
		int rc = rx_signal(l, tm->peer, &h);
		if (rc >= 0)
			*off = next;
		return rc == 1 ? 2 : rc;
	}
	struct act_msg *m = act_msg_alloc(Z.rt);
	if (ZB_UNLIKELY(!m)) {
		l->deferred++;
		return -EAGAIN;
	}
	m->from = le64toh(h.from);
	m->to = to;
	m->tag = le32toh(h.tag);
	m->flags = le32toh(h.flags);
	m->ref = le64toh(h.ref);
	m->ts_ns = le64toh(h.ts_ns);
	if (undeliv)
		m->_reason = (int)reason;
	struct zbra_wrap *w = NULL;
	switch (h.kind) {
	case ACT_PL_INLINE:
		act_msg_set_bytes(m, tm->data + at + sizeof(h), h.ilen);
		break;
	case ACT_PL_BUF:
		if (h.split) {
			/* header now, payload next on this stream */
			m->kind = ACT_PL_NONE;   /* no buffer yet: free is safe */
			m->u.buf.buf = NULL;
			m->u.buf.off = 0;
			m->u.buf.len = d1;
			*pend = m;
			*off = tm->len;
			return 0;
		}
		if (!(w = wrap_get(l, tm))) {
			act_msg_free(Z.rt, m);
			l->deferred++;
			return -EAGAIN;
		}
		act_msg_set_buf(m, &w->b, sizeof(h), d1);
		break;
	case ACT_PL_GPU: {
		uint64_t d2 = le64toh(h.d2);
		act_msg_set_gpu(m, (uint32_t)(d2 >> 32), (uint32_t)d2,
				(void *)(uintptr_t)le64toh(h.d0), d1);
		break;
	}
	case ACT_PL_RDMA: {
		uint64_t d2 = le64toh(h.d2);
		act_msg_set_rdma(m, (uint16_t)(d2 >> 32), le64toh(h.d0),
				 (uint32_t)d2, d1);
		break;
	}
	default:
		break;
	}
	int rc = deliver_local(l, m, w);
	if (rc == -EAGAIN) {
		act_msg_free(Z.rt, m);
		return -EAGAIN;
	}
	*wrapped = w != NULL;
	*off = at + sizeof(h) + extra;
	return 0;
}

static int zbra_deliver(void *arg, unsigned index, struct tp_msg *tm)
{
	(void)arg;
	ZB_ASSERT(Z.lanes != NULL && index < Z.nlanes);
	struct zbra_lane *l = &Z.lanes[index];
	if (atomic_load_explicit(&Z.detached, memory_order_acquire)) {
		car_release(l, tm);
		return 0;
	}
	unsigned s = (unsigned)tm->stream - Z.first_stream;
	if (ZB_UNLIKELY(tm->stream < Z.first_stream || s >= Z.nstreams ||
			tm->peer >= CFG_MAX_NODES)) {
		l->bad++;
		car_release(l, tm);
		return 0;
	}
	struct act_msg **pend = &l->rxpend[tm->peer][s];
	struct zbra_wrap *w;
	int rc;
	if (*pend && tm->len != (*pend)->u.buf.len) {
		/* not its payload: the header's payload never came (its
		 * sender was refused it and reported that). The header is
		 * dropped; this message is one of its own. */
		l->bad++;
		act_msg_free(Z.rt, *pend);
		*pend = NULL;
	}
	if (*pend && (*pend)->to == ACT_ID_NONE) {
		/* the payload of a refused header (rx_record): dropped */
		act_msg_free(Z.rt, *pend);
		*pend = NULL;
		car_release(l, tm);
		return 0;
	}
	if (*pend) {   /* the payload of a two-part message */
		struct act_msg *m = *pend;
		if (!(w = wrap_get(l, tm))) {
			l->deferred++;
			return -EAGAIN;
		}
		act_msg_set_buf(m, &w->b, 0, tm->len);
		rc = deliver_local(l, m, w);
		if (rc == 0)
			*pend = NULL;
		return rc;
	}
	/* one or more records; a batch the transport retries after a full
	 * mailbox skips the records already delivered */
	struct zbra_resume *rs = &l->resume[tm->peer][s];
	uint32_t skip = rs->valid && rs->msg_id == tm->msg_id &&
				rs->epoch == tm->epoch ? rs->done : 0;
	size_t off = 0;
	uint32_t idx = 0;
	bool wrapped = false;
	rs->valid = 0;
	do {
		rc = rx_record(l, tm, off, idx < skip, &off, pend, &wrapped);
		if (rc == -EAGAIN) {
			*rs = (struct zbra_resume){tm->msg_id, tm->epoch, idx, 1};
			return -EAGAIN;
		}
		l->bad += rc == 2;   /* that record only: the next one follows */
		idx++;
	} while ((rc == 0 || rc == 2) && off < tm->len);
	if (rc == 1)
		l->bad++;   /* framing broken: the rest of the message is dropped */
	if (!wrapped)
		car_release(l, tm);
	return 0;
}

/* The carrier skips a message of (peer, stream) too large for this node;
 * its sender is told (-EMSGSIZE). A header waiting for it is dropped. */
void zbra__refused(unsigned lane, uint16_t peer, uint16_t stream)
{
	ZB_ASSERT(Z.lanes != NULL && lane < Z.nlanes);
	struct zbra_lane *l = &Z.lanes[lane];
	unsigned s = (unsigned)stream - Z.first_stream;
	if (peer >= CFG_MAX_NODES || stream < Z.first_stream || s >= Z.nstreams)
		return;
	struct act_msg **pend = &l->rxpend[peer][s];
	l->refused_in++;
	if (*pend && !atomic_load_explicit(&Z.detached, memory_order_acquire)) {
		act_msg_free(Z.rt, *pend);
		*pend = NULL;
	}
}

static void zbra_peer_event(void *arg, unsigned index, uint16_t peer,
			    enum tp_peer_event ev, uint32_t remote_epoch)
{
	(void)arg;
	ZB_ASSERT(Z.lanes != NULL && index < Z.nlanes);
	struct zbra_lane *l = &Z.lanes[index];
	if (peer >= CFG_MAX_NODES)
		return;
	uint8_t now = ev == TP_PEER_DOWN ? PS_DOWN : PS_UNKNOWN;
	uint8_t was = atomic_exchange_explicit(&l->peer_state[peer], now,
					       memory_order_relaxed);
	if (was != PS_DOWN && now == PS_DOWN)
		atomic_fetch_add_explicit(&Z.down_lanes[peer], 1, memory_order_relaxed);
	else if (was == PS_DOWN && now != PS_DOWN)
		atomic_fetch_sub_explicit(&Z.down_lanes[peer], 1, memory_order_relaxed);
	if (ev != TP_PEER_UP && !atomic_load_explicit(&Z.detached, memory_order_acquire)) {
		rxpend_clear(l, peer);   /* a half-received message is gone */
		/* The links and monitors are the node's, the sessions the
		 * lanes': a restart is seen by each lane, at its own time. The
		 * first lane to see an incarnation (remote_epoch) ends the
		 * links of the one before; the others must not end the links
		 * made with the new one since. */
		if (ev == TP_PEER_RESTARTED &&
		    atomic_exchange_explicit(&Z.peer_epoch[peer], remote_epoch,
					     memory_order_relaxed) == remote_epoch)
			return;
		l->lost_notices += node_lost(peer);   /* its links and monitors */
	}
}

/* A committed membership view (dp_on_epoch, on lane `index`): nodes that the
 * previous view held and this one drops are lost for links and monitors
 * (their sessions are reset: dp_cluster_apply). */
static void zbra_epoch(void *arg, unsigned index, uint64_t old_epoch,
		       const struct dp_cluster_view *v)
{
	(void)arg;
	ZB_ASSERT(v != NULL);
	ZB_ASSERT(v->n_members <= DP_CLUSTER_MAX);
	if (!Z.lanes || index >= Z.nlanes)
		return;   /* attach failed after registering (the hook stays) */
	struct zbra_lane *l = &Z.lanes[index];
	uint64_t now = 0;
	for (unsigned i = 0; i < v->n_members && i < DP_CLUSTER_MAX; i++)
		if (v->ring[i] < 64)
			now |= 1ull << v->ring[i];
	uint64_t gone = old_epoch ? l->members & ~now : 0;
	l->members = now;
	if (atomic_load_explicit(&Z.detached, memory_order_acquire))
		return;
	for (unsigned n = 0; gone && n < CFG_MAX_NODES; n++)
		if (gone & (1ull << n))
			l->lost_notices += node_lost((uint16_t)n);
}

static const struct dp_msg_ops zbra_msg_ops = {
	.deliver = zbra_deliver,
	.send_done = zbra_send_done,
	.peer_event = zbra_peer_event,
};

/* The same for a carrier that is not the dataplane's transport. */
int zbra__deliver(unsigned lane, struct tp_msg *m)
{
	return zbra_deliver(&Z, lane, m);
}

void zbra__send_done(unsigned lane, uint64_t cookie, int status)
{
	zbra_send_done(&Z, lane, cookie, status);
}

void zbra__peer_event(unsigned lane, uint16_t peer, enum tp_peer_event ev)
{
	zbra_peer_event(&Z, lane, peer, ev, 0);
}

/* ---- the lane's poller ---------------------------------------------------------- */

static unsigned zbra_poll(void *arg, uint64_t now_tsc)
{
	struct zbra_lane *l = arg;
	unsigned work = 0;
	void *p[ZBRA_BURST];
	ZB_DASSERT(l != NULL && l->car != NULL);
	uint64_t now = dp_now_ns(now_tsc);
	if (l->cops->poll)
		work += l->cops->poll(l->car, now);
	unsigned n = rte_ring_sc_dequeue_burst(l->relq, p, ZBRA_BURST, NULL);
	for (unsigned i = 0; i < n; i++)
		wrap_release_now(p[i]);
	work += n;
	if (l->index == 0 && ZB_UNLIKELY(now >= l->tick_at)) {
		/* ticks towards nodes we hold links / monitors with. Not on a
		 * stream whose two-part message waits for its payload: the
		 * receiver takes whatever follows the header there as the
		 * payload (zbra_deliver), so a tick in between would cost both
		 * the message and the tick. That peer's tick comes next time. */
		const struct zbra_slot *cur = l->cur;
		l->tick_at = now + Z.tick_ns;
		for (unsigned i = 0; i < CFG_MAX_NODES; i++) {
			struct zbra_rtab *t = &Z.rtab[i];
			if (cur && cur->peer == i && cur->stream == Z.first_stream)
				continue;
			if (t->e && atomic_load_explicit(&t->n, memory_order_relaxed) &&
			    !atomic_load_explicit(&Z.down_lanes[i], memory_order_relaxed))
				(void)car_send(l, (uint16_t)i, Z.first_stream, t->tick,
					       ZBRA_HDR_LEN, NULL, 0, now);
		}
	}
	for (unsigned taken = 0;;) {
		if (l->bk_i == l->bk_n) {
			if (taken >= ZBRA_POLL_TX_MAX)
				break;
			l->bk_i = 0;
			l->bk_n = rte_ring_sc_dequeue_burst(l->txq, (void **)l->bk,
							    ZBRA_BURST, NULL);
			if (l->bk_n == 0)
				break;
			taken += l->bk_n;
		}
		unsigned used = tx_head(l, now);
		if (used == 0)
			break;   /* the transport is full: the head waits */
		l->bk_i += used;
		work += used;
	}
	return work;
}

/* ---- attach / detach --------------------------------------------------------- */

static uint32_t host_budget;   /* zbra_host: [actors] reductions */

static unsigned host_poll(void *arg, unsigned index, uint64_t now_tsc)
{
	(void)now_tsc;
	return (unsigned)act_worker_poll(arg, index, host_budget);
}

int zbra_host(const struct zb_config *cfg, struct act_runtime **rt)
{
	ZB_ASSERT(cfg != NULL && rt != NULL);
	struct act_params p;
	act_params_default(&p);
	p.node = cfg->node.id;
	p.max_actors = cfg->actors.max_actors;
	p.mailbox_capacity = cfg->actors.mailbox_capacity;
	p.reductions = cfg->actors.reductions;
	p.message_pool = cfg->actors.message_pool;
	p.timers = cfg->actors.timers;
	p.workers = dp_lcore_count();
	p.pin = false;   /* the lcores are pinned already */
	host_budget = p.reductions;
	*rt = NULL;
	int rc = act_runtime_create(&p, rt);
	if (rc == 0)
		rc = dp_set_actor_hook(host_poll, *rt);
	if (rc == 0)
		rc = zbra_attach(*rt, cfg);
	return rc;
}

static struct rte_ring *ring(const char *what, unsigned lane, unsigned count,
			     unsigned flags)
{
	char name[RTE_RING_NAMESIZE];
	snprintf(name, sizeof(name), "zbra_%s%u", what, lane);
	return rte_ring_create(name, count, SOCKET_ID_ANY, flags);
}

static void *carrier_arg;   /* zbra_set_provider_arg */

void zbra_set_provider_arg(void *provider_arg)
{
	carrier_arg = provider_arg;
}

enum cfg_carrier zbra_carrier_kind(const struct zb_config *cfg)
{
	ZB_ASSERT(cfg != NULL);
	if (cfg->actors.carrier != CFG_CARRIER_AUTO)
		return cfg->actors.carrier;
	return dp_transport(0) ? CFG_CARRIER_DPDK
	     : cfg->transport.kind == CFG_TRANSPORT_TCP ? CFG_CARRIER_TCP
	     : cfg->transport.kind == CFG_TRANSPORT_RDMA ? CFG_CARRIER_RDMA
							 : CFG_CARRIER_DPDK;
}

int zbra_attach(struct act_runtime *rt, const struct zb_config *cfg)
{
	ZB_ASSERT(rt != NULL && cfg != NULL);
	if (Z.lanes)
		return -EALREADY;
	unsigned nl = dp_lcore_count();
	enum cfg_carrier kind = zbra_carrier_kind(cfg);
	const struct net_ops *nops = NULL;
	if (kind != CFG_CARRIER_DPDK) {
		const char *pn = kind == CFG_CARRIER_TCP ? "tcp" : "rdma";
		nops = net_find(pn);
		if (!nops) {
			fprintf(stderr, "remote actors: [actors] carrier = %s: no net "
				"provider of that name in this build\n", pn);
			return -ENOENT;
		}
		if (nl == 0)
			return 0;
		nl = 1;   /* the provider instance is one lcore's */
	} else if (nl == 0 || !dp_transport(0)) {
		return 0;   /* a bare node: no transport */
	}
	memset(&Z, 0, sizeof(Z));
	Z.rt = rt;
	Z.carrier = nops ? nops->name : "dpdk";
	Z.self = cfg->node.id;
	Z.max_message = cfg->transport.max_message_mb
				? (uint64_t)cfg->transport.max_message_mb << 20
				: 256ull << 20;
	if (Z.max_message > UINT32_MAX)
		Z.max_message = UINT32_MAX;
	for (unsigned i = 0; i < CFG_MAX_NODES; i++)
		Z.known[i] = cfg->peers[i].present && i != Z.self;
	/* every lane has the same parameters (link.c fill_params); a net
	 * carrier's streams are a field of its header */
	unsigned ns = nops ? ZBRA_STREAMS_MAX : tp_streams(dp_transport(0));
	Z.first_stream = ns > ZBRA_STREAMS_MAX ? ZBRA_STREAMS_MAX : 0;
	Z.nstreams = (uint16_t)(ns - Z.first_stream);
	if (Z.nstreams > ZBRA_STREAMS_MAX)
		Z.nstreams = ZBRA_STREAMS_MAX;
	if (Z.nstreams == 0)
		Z.nstreams = 1;
	Z.nlanes = nl;
	int rc = -ENOMEM;
	Z.lanes = zb_aligned_alloc(64, sizeof(*Z.lanes) * nl);
	if (!Z.lanes)
		return -ENOMEM;
	memset(Z.lanes, 0, sizeof(*Z.lanes) * nl);
	if (nops) {   /* its one lane's provider instance */
		char why[256];
		rc = zbra__netcar_create(cfg, nops, carrier_arg, 0, Z.max_message,
					 &Z.netcar, why, sizeof(why));
		if (rc) {
			fprintf(stderr, "remote actors: [actors] carrier = %s: %s\n",
				nops->name, why);
			goto fail;
		}
		rc = -ENOMEM;
	}
	for (unsigned i = 0; i < nl; i++) {
		struct zbra_lane *l = &Z.lanes[i];
		l->index = i;
		l->cops = nops ? &zbra__net_car_ops : &car_tp_ops;
		l->car = nops ? (void *)Z.netcar : (void *)dp_transport(i);
		l->txq = ring("tx", i, ZBRA_TXQ, RING_F_SC_DEQ);
		l->slotq = ring("slot", i, ZBRA_SLOTS * 2, RING_F_SC_DEQ);
		l->relq = ring("rel", i, ZBRA_WRAPS * 2, RING_F_SC_DEQ);
		l->slots = zb_aligned_alloc(64, sizeof(*l->slots) * ZBRA_SLOTS);
		l->wraps = calloc(ZBRA_WRAPS, sizeof(*l->wraps));
		if (!l->car || !l->txq || !l->slotq || !l->relq || !l->slots || !l->wraps)
			goto fail;
		memset(l->slots, 0, sizeof(*l->slots) * ZBRA_SLOTS);
		for (unsigned k = 0; k < ZBRA_SLOTS; k++) {
			l->slots[k].lane = l;
			slot_put(&l->slots[k]);
		}
		for (unsigned k = ZBRA_WRAPS; k-- > 0;) {
			l->wraps[k].lane = l;
			l->wraps[k].next = l->wfree;
			l->wfree = &l->wraps[k];
		}
	}
	uint32_t pto = cfg->transport.peer_timeout_ms ? cfg->transport.peer_timeout_ms
						      : 1000;
	Z.tick_ns = (uint64_t)(pto / 8 ? pto / 8 : 1) * 1000000ull;
	for (unsigned i = 0; i < CFG_MAX_NODES; i++) {
		struct zbra_rtab *t = &Z.rtab[i];
		if (!Z.known[i])
			continue;
		rte_spinlock_init(&t->lock);
		t->cap = cfg->actors.remote_links ? cfg->actors.remote_links : 1024;
		t->e = calloc(t->cap, sizeof(*t->e));
		if (!t->e)
			goto fail;
		struct zbra_hdr h;
		memset(&h, 0, sizeof(h));
		h.magic = htole32(ZBRA_MAGIC);
		h.version = ZBRA_VERSION;
		h.kind = ZBRA_KIND_SIG;
		h.tag = htole32(ZBRA_SIG_TICK);
		h.from = htole64(act_id_make(Z.self, 0, 0));
		h.to = htole64(act_id_make((uint16_t)i, 0, 0));
		memcpy(t->tick, &h, sizeof(h));
	}
	if (!nops && (rc = dp_set_msg_ops(&zbra_msg_ops, &Z)))
		goto fail;
	if ((rc = dp_on_epoch(zbra_epoch, &Z)))
		goto fail;
	for (unsigned i = 0; i < nl; i++)
		if ((rc = dp_register_poller(i, zbra_poll, &Z.lanes[i])))
			goto fail;   /* cannot happen before launch with room */
	act_set_remote_router(rt, zbra_route, &Z);
	return 0;
fail:
	if (!nops)
		dp_set_msg_ops(NULL, NULL);
	zbra__netcar_destroy(Z.netcar);
	Z.netcar = NULL;
	for (unsigned i = 0; i < nl; i++) {
		struct zbra_lane *l = &Z.lanes[i];
		rte_ring_free(l->txq);
		rte_ring_free(l->slotq);
		rte_ring_free(l->relq);
		free(l->slots);
		free(l->wraps);
	}
	free(Z.lanes);
	Z.lanes = NULL;
	for (unsigned i = 0; i < CFG_MAX_NODES; i++) {
		free(Z.rtab[i].e);
		Z.rtab[i].e = NULL;
	}
	return rc;
}

void zbra_detach(void)
{
	if (!Z.lanes || atomic_load_explicit(&Z.detached, memory_order_acquire))
		return;
	/* the runtime is gone: its messages (backlog, rings, rxpend) with it */
	atomic_store_explicit(&Z.detached, 1, memory_order_release);
	for (unsigned i = 0; i < Z.nlanes; i++) {
		struct zbra_lane *l = &Z.lanes[i];
		bool held = false;
		for (unsigned k = 0; k < ZBRA_WRAPS; k++)
			held |= l->wraps[k].in_use;
		if (!held)
			continue;   /* touches no ring: may run after dp_node_fini */
		void *p;
		while (rte_ring_sc_dequeue(l->relq, &p) == 0)
			;
		for (unsigned k = 0; k < ZBRA_WRAPS; k++)
			if (l->wraps[k].in_use)
				wrap_release_now(&l->wraps[k]);
	}
	/* a net carrier goes now (the lcores are stopped); with the transport
	 * the lanes stay allocated: dp_node_fini's tp_destroy still calls
	 * send_done (now no-ops) and the NIC may drop payload references. */
	zbra__netcar_destroy(Z.netcar);
	Z.netcar = NULL;
}

void zbra_get_stats(struct zbra_stats *out)
{
	ZB_ASSERT(out != NULL);
	memset(out, 0, sizeof(*out));
	for (unsigned i = 0; Z.lanes && i < Z.nlanes; i++) {
		const struct zbra_lane *l = &Z.lanes[i];
		out->routed += atomic_load_explicit(&l->rc.routed, memory_order_relaxed);
		out->ring_full += atomic_load_explicit(&l->rc.ring_full, memory_order_relaxed);
		out->refused += atomic_load_explicit(&l->rc.refused, memory_order_relaxed);
		out->sent += l->sent;
		out->batches += l->batches;
		out->zc_sent += l->zc_sent;
		out->failed += l->failed;
		out->notified += l->notified;
		out->notify_lost += l->notify_lost;
		out->received += l->received;
		out->zc_received += l->zc_received;
		out->deferred += l->deferred;
		out->stale += l->stale;
		out->stale_answered += l->stale_answered;
		out->bad += l->bad;
		out->signals += l->signals;
		out->lost_notices += l->lost_notices;
		out->refused_in += l->refused_in;
		out->rtab_full += atomic_load_explicit(&l->rtab_full, memory_order_relaxed);
	}
	for (unsigned i = 0; Z.lanes && i < CFG_MAX_NODES; i++)
		out->rtab_live += atomic_load_explicit(&Z.rtab[i].n, memory_order_relaxed);
	if (Z.lanes && Z.netcar) {   /* lane 0's counters: racy reads, diagnostics */
		struct zbra_netcar_stats ns;
		zbra__netcar_stats(Z.netcar, &ns);
		out->carrier_bad = ns.bad;
		out->carrier_refused = ns.refused;
		out->carrier_downs = ns.peer_downs;
		out->carrier_silent = ns.silent;
		out->carrier_half_open = ns.half_open;
	}
}

const char *zbra_carrier(void)
{
	return Z.lanes ? Z.carrier : NULL;
}

int zbra_raw_send(uint16_t peer, uint16_t stream, const void *data, size_t len,
		  uint64_t now_ns)
{
	if (!Z.lanes)
		return -ENODEV;
	ZB_ASSERT(dp_lcore_index() == 0);
	return car_send(&Z.lanes[0], peer, stream, data, len, NULL, 0, now_ns);
}

unsigned zbra_streams(unsigned *first)
{
	if (first)
		*first = Z.lanes ? Z.first_stream : 0;
	return Z.lanes ? Z.nstreams : 0;
}
