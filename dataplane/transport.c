/* Reliable transport core: instance life cycle, peers, sessions, tp_send,
 * tp_poll. The send machinery is in transport_tx.c, the receive machinery in
 * transport_rx.c. Design notes: docs/wire.md ("Transport"). */
#include "transport_internal.h"

#include <stdlib.h>

void tp_params_default(struct tp_params *p)
{
	ZB_ASSERT(p != NULL);
	memset(p, 0, sizeof(*p));
	p->epoch = 1;
	p->udp_port = 7471;
	p->mtu = 1500;
	p->max_peers = 64;
	p->streams = 8;
	p->window = 256;
	p->rto_us_init = 1000;
	p->rto_us_min = 200;
	p->rto_us_max = 200000;
	p->ack_delay_us = 20;
	p->ack_every = 16;
	p->peer_timeout_ms = 2000;
	p->connect_timeout_ms = 60000;
	p->max_message = 256u << 20;
	p->inline_max = 256;
	p->stream_min = 4u << 20;
}

static int check_params(const struct tp_params *p)
{
	if (p->epoch == 0 || p->max_peers == 0 || p->max_peers > 4096 ||
	    p->node >= p->max_peers)
		return -EINVAL;
	if (p->mtu < WIRE_MTU_MIN || p->mtu > WIRE_MTU_MAX)
		return -EINVAL;
	if (p->streams == 0 || p->streams > 1024)
		return -EINVAL;
	if (p->window < 64 || p->window > 16384 ||
	    (p->window & (p->window - 1)))
		return -EINVAL;
	if (p->rto_us_min == 0 || p->rto_us_min > p->rto_us_max ||
	    p->rto_us_init < p->rto_us_min || p->rto_us_init > p->rto_us_max)
		return -EINVAL;
	if (p->ack_every == 0 || p->peer_timeout_ms == 0)
		return -EINVAL;
	if ((uint32_t)p->udp_port + p->lane > 65535)
		return -EINVAL;
	if (p->fault.drop_rate < 0 || p->fault.drop_rate > 1 ||
	    p->fault.dup_rate < 0 || p->fault.dup_rate > 1 ||
	    p->fault.reorder_rate < 0 || p->fault.reorder_rate > 1)
		return -EINVAL;
	return 0;
}

static uint32_t pow2_at_least(uint32_t v)
{
	uint32_t r = 1;
	while (r < v)
		r <<= 1;
	return r;
}

static int alloc_peers(struct tp *tp)
{
	const struct tp_params *p = &tp->p;

	tp->peers = calloc(p->max_peers, sizeof(*tp->peers));
	if (!tp->peers)
		return -ENOMEM;
	for (uint32_t i = 0; i < p->max_peers; i++)
		tp->peers[i].node = (uint16_t)i;
	tp->ackq = calloc(p->max_peers, sizeof(*tp->ackq));
	if (!tp->ackq)
		return -ENOMEM;
	return 0;
}

static void free_peer(struct tp_peer *pe)
{
	free(pe->win);
	free(pe->stx);
	free(pe->rcv_bits);
	free(pe->srx);
	pe->win = NULL;
	pe->stx = NULL;
	pe->rcv_bits = NULL;
	pe->srx = NULL;
}

/* What alloc_peers and alloc_pools made (NULL where they did not get that
 * far), and the instance itself. */
static void free_tables(struct tp *tp)
{
	free(tp->htab);
	free(tp->rxpool);
	free(tp->inline_slab);
	free(tp->txpool);
	free(tp->ackq);
	free(tp->peers);
	free(tp);
}

static int alloc_pools(struct tp *tp)
{
	const struct tp_params *p = &tp->p;
	uint32_t ntx = p->tx_msgs ? p->tx_msgs : 2 * p->window;
	uint32_t nrx = p->rx_msgs ? p->rx_msgs : 2 * p->window;

	tp->txpool = calloc(ntx, sizeof(*tp->txpool));
	tp->inline_slab = p->inline_max ? aligned_alloc(64, ((size_t)ntx *
				  p->inline_max + 63) & ~(size_t)63) : NULL;
	tp->rxpool = calloc(nrx, sizeof(*tp->rxpool));
	tp->hmask = pow2_at_least(2 * nrx) - 1;
	tp->htab = calloc(tp->hmask + 1, sizeof(*tp->htab));
	if (!tp->txpool || (p->inline_max && !tp->inline_slab) ||
	    !tp->rxpool || !tp->htab)
		return -ENOMEM;
	for (uint32_t i = ntx; i-- > 0;) {
		tp->txpool[i].next = tp->txfree;
		tp->txpool[i].inline_buf =
			p->inline_max ? tp->inline_slab + (size_t)i * p->inline_max
				      : NULL;
		tp->txfree = &tp->txpool[i];
	}
	tp->tx_free_count = ntx;
	for (uint32_t i = nrx; i-- > 0;) {
		tp->rxpool[i].next__ = tp->rxfree;
		tp->rxfree = &tp->rxpool[i];
	}
	tp->rx_free_count = nrx;
	tp->p.tx_msgs = ntx;
	tp->p.rx_msgs = nrx;
	return 0;
}

int tp_create(const struct tp_params *p, const struct tp_ops *ops, void *user,
	      struct tp **out)
{
	struct tp *tp;
	size_t arena;
	int rc;

	ZB_ASSERT(p != NULL && ops != NULL && out != NULL);
	if (!ops->tx || !ops->deliver || !ops->send_done ||
	    (ops->rx_place && !ops->rx_unplace) ||
	    (ops->rx_keep && !ops->rx_free))
		return -EINVAL;
	rc = check_params(p);
	if (rc)
		return rc;
	tp = calloc(1, sizeof(*tp));
	if (!tp)
		return -ENOMEM;
	tp->p = *p;
	tp->ops = *ops;
	tp->user = user;
	tp->wmask = p->window - 1;
	/* a multiple of 8: fragments split no element of up to 8 bytes, so a
	 * receiver can reduce each one as it lands (tp_ops.rx_write) */
	tp->frag_size = (uint16_t)(WIRE_FRAG_MAX(p->mtu) & ~7u);
	/* large messages (stream_min): whole cache lines per fragment */
	tp->frag_size_stream = (uint16_t)(WIRE_FRAG_MAX(p->mtu) & ~63u);
	tp->deadline = UINT64_MAX;
	tp->rxcfg = (struct wire_rx_cfg){
		.cluster = p->cluster, .node = p->node, .lane = p->lane,
		.ip = p->ip, .udp_port = p->udp_port,
		/* accept any fragment size a valid peer may use (its MTU) */
		.frag_max = (uint16_t)WIRE_FRAG_MAX(WIRE_MTU_MAX),
		.msg_max = p->max_message,
	};
	rc = alloc_peers(tp);
	if (rc)
		goto fail;
	rc = alloc_pools(tp);
	if (rc)
		goto fail;
	arena = p->rx_arena_bytes ? p->rx_arena_bytes
				  : (size_t)p->max_message +
					    4ull * p->window * p->mtu;
	if (arena < TP_BLK)
		arena = TP_BLK;
	rc = tp__arena_init(&tp->arena, p->rx_arena, arena);
	if (rc)
		goto fail;
	/* a message of max_message, its fragment map (fragments of 64 bytes
	 * or more) after it */
	tp->arena_rsv = (uint32_t)((tp__fmap_off(p->max_message) +
				    p->max_message / 512 + 8 + TP_BLK - 1) / TP_BLK);
	if (tp->arena_rsv > tp->arena.nblk)
		tp->arena_rsv = tp->arena.nblk;
	if (ops->rx_keep && p->rx_keep_min && p->rx_keep_frames) {
		/* one segment per kept frame, 64 per block: a message's table
		 * rounds up to whole blocks, so add one block per message
		 * that could hold a fraction of one */
		size_t segs = (size_t)p->rx_keep_frames * sizeof(struct tp_seg);
		rc = tp__arena_init(&tp->segarena, NULL, segs + (size_t)TP_BLK *
				    (1 + p->rx_keep_frames / 64));
		if (rc)
			goto fail_arena;
		/* small: touch it now, not inside an lcore loop */
		memset(tp->segarena.base, 0, tp->segarena.bytes);
	}
	rc = tp__fault_init(tp);
	if (rc)
		goto fail_segs;
	*out = tp;
	ZB_ASSERT(tp->tx_free_count > 0 && tp->rx_free_count > 0);
	return 0;

fail_segs:
	if (tp->segarena.base)
		tp__arena_fini(&tp->segarena);
fail_arena:
	tp__arena_fini(&tp->arena);
fail:
	free_tables(tp);
	return rc;
}

long tp_prefault_step(struct tp *tp, size_t max_bytes)
{
	ZB_ASSERT(tp != NULL);
	return tp__arena_populate_step(&tp->arena, max_bytes);
}

void tp_destroy(struct tp *tp)
{
	if (!tp)
		return;
	/* send_done callbacks below may tp_send: a message accepted for a
	 * peer already emptied would never complete (its ref never put).
	 * Every peer down first, so tp_send refuses (ZB_ERR_SHUTDOWN) at no
	 * cost to its fast path. */
	tp->closing = 1;
	for (uint32_t i = 0; i < tp->p.max_peers; i++)
		if (tp->peers[i].present)
			tp->peers[i].state = TP_PS_DOWN;
	for (uint32_t i = 0; i < tp->p.max_peers; i++) {
		struct tp_peer *pe = &tp->peers[i];
		if (!pe->present)
			continue;
		tp__session_reset(tp, pe, ZB_ERR_SHUTDOWN, false, 0);
	}
	/* orphans never delivered: return them to the pool */
	while (tp->orphans) {
		struct tp_msg *m = tp->orphans;
		tp->orphans = m->next__;
		tp__msg_free_mem(tp, m);
	}
	ZB_ASSERT(tp->rx_outstanding == 0); /* consumers released everything */
	for (uint32_t i = 0; i < tp->p.max_peers; i++)
		free_peer(&tp->peers[i]);
	tp__fault_fini(tp);
	if (tp->segarena.base)
		tp__arena_fini(&tp->segarena);
	tp__arena_fini(&tp->arena);
	free_tables(tp);
}

int tp_peer_add(struct tp *tp, uint16_t node, const uint8_t mac[6], uint32_t ip)
{
	struct tp_peer *pe;
	const struct tp_params *p = &tp->p;

	ZB_ASSERT(tp != NULL && mac != NULL);
	if (node >= p->max_peers || node == p->node)
		return -EINVAL;
	pe = &tp->peers[node];
	if (pe->present)
		return -EEXIST;
	pe->win = calloc(p->window, sizeof(*pe->win));
	pe->stx = calloc(p->streams, sizeof(*pe->stx));
	pe->rcv_bits = calloc(p->window / 64, sizeof(uint64_t));
	pe->srx = calloc(p->streams, sizeof(*pe->srx));
	if (!pe->win || !pe->stx || !pe->rcv_bits || !pe->srx) {
		free_peer(pe);
		return -ENOMEM;
	}
	memcpy(pe->addr.src_mac, p->mac, 6);
	memcpy(pe->addr.dst_mac, mac, 6);
	pe->addr.src_ip = p->ip;
	pe->addr.dst_ip = ip;
	pe->addr.src_port = pe->addr.dst_port = (uint16_t)(p->udp_port + p->lane);
	pe->local_epoch = p->epoch;
	pe->rto_ns = (uint64_t)p->rto_us_init * TP_NS_PER_US;
	pe->credit = p->window;
	pe->snd_limit = p->window;
	pe->state = TP_PS_UNKNOWN;
	pe->present = 1;
	tp->npeers++;
	tp->rx_rsv = tp->npeers * p->streams;
	uint32_t share = tp->arena.nblk / tp->npeers / TP_SHARE_BLK;   /* rounded down */
	tp->rx_share = (uint16_t)(share > UINT16_MAX ? UINT16_MAX : share);
	ZB_ASSERT(pe->node == node);
	return 0;
}

/* Any valid frame from the peer: it is alive. */
void tp__peer_heard(struct tp *tp, struct tp_peer *pe, uint64_t now)
{
	pe->last_rx_ns = now;
	pe->heard = 1;   /* never cleared: from now on peer_timeout applies */
	if (ZB_UNLIKELY(pe->state != TP_PS_UP)) {
		pe->state = TP_PS_UP;
		tp->st.peer_up++;
		if (tp->ops.peer_event)
			tp->ops.peer_event(tp->user, pe->node, TP_PEER_UP,
					   pe->remote_epoch);
	}
}

/* Reset the session with pe: fail every message accepted for it with err,
 * drop its partial reassemblies (complete ones still reach the consumer),
 * start sequence numbers again from 0. bump_local starts a new local session
 * epoch so the peer notices and resets its side. send_done runs last, when
 * the state is consistent again (callbacks may call tp_send). */
void tp__session_reset(struct tp *tp, struct tp_peer *pe, int err,
		       bool bump_local, uint64_t now)
{
	struct tp_txmsg *fail = NULL;

	ZB_ASSERT(pe->present);
	ZB_ASSERT(err < 0);
	tp__tx_reset(tp, pe, &fail);
	tp__rx_reset(tp, pe);
	if (bump_local) {
		pe->local_epoch++;
		if (pe->local_epoch == 0)
			pe->local_epoch = 1;
		pe->await_epoch_ack = 1;
		pe->dst0_stale = 1;
	}
	pe->probe_due = now + (uint64_t)tp->p.rto_us_max * TP_NS_PER_US;
	while (fail) {
		struct tp_txmsg *m = fail;
		fail = m->next;
		/* one the peer would never take says so, whatever the reset */
		tp__txmsg_finish(tp, m, pe->peer_max && m->len > pe->peer_max ? -EMSGSIZE
				 : pe->peer_streams && m->stream >= pe->peer_streams ? -EINVAL
				 : err);
	}
}

/* After this side reset the session with pe (a new local epoch): tell the
 * peer now, which resets its side when it sees the new epoch, and this
 * side's consumers (TP_PEER_RESET), which reset theirs. */
static void reset_told(struct tp *tp, struct tp_peer *pe, uint64_t now)
{
	tp__send_ack(tp, pe, WIRE_F_ACKREQ, now);
	if (tp->ops.peer_event)
		tp->ops.peer_event(tp->user, pe->node, TP_PEER_RESET, pe->remote_epoch);
}

/* The peer's ACKs say the largest message it takes is max (its [transport]
 * max_message; docs/wire.md, "Larger than the peer takes"). tp_send
 * refuses larger ones with -EMSGSIZE from now on. One already queued or in
 * flight would never be delivered: the peer drops its frames (msg_size)
 * and its cumulative ack stays below the first of them for good. So then
 * the session is reset: such messages fail with -EMSGSIZE, the others with
 * ZB_ERR_EPOCH. Returns true if it reset the session. */
bool tp__peer_max(struct tp *tp, struct tp_peer *pe, uint32_t max, uint64_t now)
{
	ZB_ASSERT(pe->present && max != 0);
	pe->peer_max = max;
	if (max >= tp->p.max_message)
		return false;   /* it takes whatever we may send */
	bool over = false;
	for (uint32_t seq = pe->snd_una; seq != pe->snd_next && !over; seq++) {
		const struct tp_txmsg *m = pe->win[seq & tp->wmask].msg;
		over = m && m->len > max;
	}
	for (uint32_t s = 0; s < tp->p.streams && !over; s++)
		for (const struct tp_txmsg *m = pe->stx[s].head; m && !over; m = m->next)
			over = m->len > max;
	if (!over)
		return false;
	tp->st.size_resets++;
	tp__session_reset(tp, pe, ZB_ERR_EPOCH, true, now);
	reset_told(tp, pe, now);
	return true;
}

/* The peer's reply to a frame on a stream it lacks says it has n streams
 * (docs/wire.md, "More streams than the peer has"): tp_send refuses
 * streams n and up with -EINVAL from now on. A message on one of them
 * already queued or in flight would never be delivered (the peer refuses
 * its frames, and its cumulative ack stays below the first of them: every
 * later message to it stalls too), so then the session is reset: such
 * messages fail with -EINVAL, the others with ZB_ERR_EPOCH. Returns true
 * if it reset the session. */
bool tp__peer_streams(struct tp *tp, struct tp_peer *pe, uint16_t n, uint64_t now)
{
	bool over = false;

	ZB_ASSERT(pe->present && n != 0);
	pe->peer_streams = n;
	if (n >= tp->p.streams)
		return false;   /* it has every stream we may send on */
	for (uint32_t seq = pe->snd_una; seq != pe->snd_next && !over; seq++) {
		const struct tp_txmsg *m = pe->win[seq & tp->wmask].msg;
		over = m && m->stream >= n;
	}
	for (uint32_t s = n; s < tp->p.streams && !over; s++)
		over = pe->stx[s].head != NULL;
	if (!over)
		return false;
	tp->st.stream_resets++;
	tp__session_reset(tp, pe, ZB_ERR_EPOCH, true, now);
	reset_told(tp, pe, now);
	return true;
}

int tp_peer_reset(struct tp *tp, uint16_t node, uint64_t now_ns)
{
	struct tp_peer *pe;

	ZB_ASSERT(tp != NULL);
	if (node >= tp->p.max_peers || !tp->peers[node].present)
		return -ENOENT;
	pe = &tp->peers[node];
	tp__session_reset(tp, pe, ZB_ERR_EPOCH, true, now_ns);
	if (pe->state == TP_PS_DOWN)
		pe->state = TP_PS_UNKNOWN;
	reset_told(tp, pe, now_ns);
	return 0;
}

size_t tp_peer_max_message(const struct tp *tp, uint16_t node)
{
	ZB_ASSERT(tp != NULL);
	if (node >= tp->p.max_peers || !tp->peers[node].present)
		return 0;
	const struct tp_peer *pe = &tp->peers[node];
	return pe->peer_max && pe->peer_max < tp->p.max_message ? pe->peer_max
								: tp->p.max_message;
}

int tp_send(struct tp *tp, uint16_t peer, uint16_t stream, const void *data,
	    size_t len, struct tp_ref *ref, uint64_t cookie, uint64_t now_ns)
{
	struct tp_peer *pe;
	struct tp_txmsg *m;
	struct tp_stream_tx *s;

	ZB_DASSERT(tp != NULL);
	if (ZB_UNLIKELY(peer >= tp->p.max_peers || !tp->peers[peer].present))
		return -ENOENT;
	if (ZB_UNLIKELY(stream >= tp->p.streams || (len && !data)))
		return -EINVAL;
	if (ZB_UNLIKELY(len > tp->p.max_message))
		return -EMSGSIZE;
	pe = &tp->peers[peer];
	if (ZB_UNLIKELY(pe->peer_max && len > pe->peer_max))
		return -EMSGSIZE;   /* more than the peer takes (its ACKs say) */
	if (ZB_UNLIKELY(pe->peer_streams && stream >= pe->peer_streams))
		return -EINVAL;     /* a stream the peer lacks (its reply said) */
	if (ZB_UNLIKELY(pe->state == TP_PS_DOWN))
		return tp->closing ? ZB_ERR_SHUTDOWN : ZB_ERR_PEER_DOWN;
	m = tp->txfree;
	if (ZB_UNLIKELY(!m))
		return -EAGAIN;
	tp->txfree = m->next;
	tp->tx_free_count--;

	m->next = NULL;
	m->len = (uint32_t)len;
	m->cookie = cookie;
	m->frag_size = tp__large(tp, len) ? tp->frag_size_stream : tp->frag_size;
	m->frag_count = len ? (uint32_t)((len + m->frag_size - 1) / m->frag_size) : 1;
	m->next_frag = m->frags_acked = 0;
	m->failed = 0;
	m->stream = stream;
	if (len <= tp->p.inline_max) {
		if (len)
			memcpy(m->inline_buf, data, len);
		m->data = m->inline_buf;
		m->ref = NULL;
	} else {
		m->data = data;
		m->ref = ref;
		if (ref)
			tp_ref_get(ref);
	}
	s = &pe->stx[stream];
	m->msg_id = s->next_msg_id++;
	if (s->tail)
		s->tail->next = m;
	else {
		s->head = m;
		pe->tx_pending_streams++;
	}
	s->tail = m;
	if (pe->queued_msgs++ == 0) {
		pe->busy_since_ns = now_ns;
		tp__arm(tp, now_ns + (uint64_t)tp->p.peer_timeout_ms * 1000000ull);
	}
	tp__pump(tp, pe, now_ns);
	return 0;
}

/* pe is down: fail what it was given, reset the session (a new local epoch:
 * the peer resets its side if it comes back), tell the consumer. A valid
 * frame from it brings it up again (tp__peer_heard). */
static void declare_down(struct tp *tp, struct tp_peer *pe, uint64_t now)
{
	ZB_ASSERT(pe->present && pe->state != TP_PS_DOWN);
	pe->state = TP_PS_DOWN;
	tp->st.peer_downs++;
	tp__session_reset(tp, pe, ZB_ERR_PEER_DOWN, true, now);
	if (tp->ops.peer_event)
		tp->ops.peer_event(tp->user, pe->node, TP_PEER_DOWN,
				   pe->remote_epoch);
}

int tp_peer_down(struct tp *tp, uint16_t node, uint64_t now_ns)
{
	ZB_ASSERT(tp != NULL);
	if (node >= tp->p.max_peers || !tp->peers[node].present)
		return -ENOENT;
	if (tp->peers[node].state == TP_PS_DOWN)
		return -EALREADY;
	tp->st.link_downs++;
	declare_down(tp, &tp->peers[node], now_ns);
	/* probes to a down peer are due from now: re-arm the timer pass */
	tp__arm(tp, now_ns);
	return 0;
}

/* Peer-down rule (docs/wire.md "Peer down"): messages pending, or partial
 * messages from the peer in reassembly, and nothing heard from the peer for
 * a timeout measured from the later of the last frame heard and the moment
 * the queue became non-empty. A sender that died mid-message would
 * otherwise hold its partial message's descriptor and arena for good (a
 * 6 MiB one in a 9.5 MiB arena stalled every other peer's large messages,
 * with no error); declared down, its session is reset and they are freed.
 * The timeout is
 * peer_timeout for a peer that was ever heard from (it was up and went
 * silent); for one never heard from ("not yet up": it may still be
 * starting) it is connect_timeout, and with connect_timeout 0 such a peer
 * is never declared down (its sends stay pending, window-bounded, until
 * it answers or the consumer gives up). */
static void check_down(struct tp *tp, struct tp_peer *pe, uint64_t now,
		       uint64_t *next)
{
	uint64_t ref, due, tmo_ms;

	if ((pe->queued_msgs == 0 && pe->rx_partial == 0) ||
	    pe->state == TP_PS_DOWN)
		return;
	tmo_ms = pe->heard ? tp->p.peer_timeout_ms : tp->p.connect_timeout_ms;
	if (tmo_ms == 0)
		return;
	ref = pe->queued_msgs && pe->busy_since_ns > pe->last_rx_ns
		? pe->busy_since_ns : pe->last_rx_ns;
	due = ref + tmo_ms * 1000000ull;
	if (now < due) {
		if (due < *next)
			*next = due;
		return;
	}
	declare_down(tp, pe, now);
}

uint64_t tp_poll(struct tp *tp, uint64_t now_ns)
{
	uint64_t next = UINT64_MAX;

	ZB_DASSERT(tp != NULL);
	if (tp->ackq_len)
		tp_rx_flush(tp, now_ns);
	if (tp->fault_held)
		tp__fault_flush(tp, now_ns);
	if (tp->orphans || tp->deferred_peers)
		tp__deliver_pending(tp, now_ns);
	if (now_ns < tp->deadline && !tp->orphans && !tp->deferred_peers)
		return tp->deadline;
	/* The loop recomputes every peer's next event into next; callbacks
	 * it runs (send_done from check_down, which may tp_send to a peer
	 * already passed) arm theirs through tp__arm: keep the earlier. */
	tp->deadline = UINT64_MAX;
	for (uint32_t i = 0; i < tp->p.max_peers; i++) {
		struct tp_peer *pe = &tp->peers[i];

		if (!pe->present)
			continue;
		tp__tx_timers(tp, pe, now_ns);
		if (pe->ack_due && now_ns >= pe->ack_due)
			tp__send_ack(tp, pe, 0, now_ns);
		check_down(tp, pe, now_ns, &next);
		if (pe->ack_due && pe->ack_due < next)
			next = pe->ack_due;
		if (pe->snd_una != pe->snd_next && pe->rto_due < next)
			next = pe->rto_due;
		if (pe->tx_blocked && pe->busy_due < next)
			next = pe->busy_due;
		if (((pe->stalled && pe->snd_una == pe->snd_next) ||
		     pe->state == TP_PS_DOWN) && pe->probe_due < next)
			next = pe->probe_due;
	}
	if (tp->orphans || tp->deferred_peers || tp->fault_held)
		next = now_ns + 1000;  /* retry consumers / release held frames */
	if (next < tp->deadline)
		tp->deadline = next;
	return tp->deadline;
}

uint64_t tp_next_deadline(const struct tp *tp)
{
	ZB_DASSERT(tp != NULL);
	if (tp->fault_held || tp->orphans || tp->deferred_peers || tp->ackq_len)
		return 0;
	return tp->deadline;
}

uint16_t tp_streams(const struct tp *tp)
{
	ZB_ASSERT(tp != NULL);
	return tp->p.streams;
}

uint32_t tp_stream_min(const struct tp *tp)
{
	ZB_ASSERT(tp != NULL);
	return tp->p.stream_min;
}

const struct tp_stats *tp_stats(const struct tp *tp)
{
	ZB_ASSERT(tp != NULL);
	return &tp->st;
}

int tp_peer_info(const struct tp *tp, uint16_t node, struct tp_peer_info *out)
{
	const struct tp_peer *pe;

	ZB_ASSERT(tp != NULL && out != NULL);
	if (node >= tp->p.max_peers || !tp->peers[node].present)
		return -ENOENT;
	pe = &tp->peers[node];
	out->state = pe->state;
	out->local_epoch = pe->local_epoch;
	out->remote_epoch = pe->remote_epoch;
	out->srtt_us = (uint32_t)(pe->srtt_ns / 1000);
	out->rto_us = (uint32_t)(tp__rto(tp, pe) / 1000);
	out->in_flight = pe->snd_next - pe->snd_una;
	out->credit = pe->credit;
	out->queued_msgs = pe->queued_msgs;
	return 0;
}

void tp_stats_foreach(const struct tp_stats *s,
		      void (*fn)(void *arg, const char *name, uint64_t value),
		      void *arg)
{
#define C(f) fn(arg, #f, s->f)
	ZB_ASSERT(s != NULL && fn != NULL);
	C(frames_tx); C(frames_rx); C(data_frames_tx); C(acks_tx); C(probes_tx);
	C(payload_bytes_tx); C(payload_bytes_rx); C(retransmits);
	C(rto_timeouts); C(fast_retransmits); C(tx_busy); C(acks_rx);
	C(dup_frames); C(ooo_frames); C(no_buffer_drops); C(window_stalls);
	C(msgs_placed); C(placed_detached); C(msgs_kept); C(frames_kept);
	C(keep_no_room); C(keep_unkept);
	C(msgs_sent); C(msgs_failed); C(msgs_delivered); C(bytes_delivered);
	C(deliver_deferred); C(peer_up); C(peer_restarts); C(peer_downs);
	C(link_downs);
	C(stale_replies); C(size_replies); C(size_resets);
	C(stream_replies); C(stream_resets);
	C(fault_drops); C(fault_dups); C(fault_reorders);
	C(bad_frames);
#undef C
	for (int r = 1; r < WIRE_REASON_COUNT; r++) {
		char name[48];
		snprintf(name, sizeof(name), "bad_%s", wire_reason_name(r));
		fn(arg, name, s->bad[r]);
	}
}
