/* Send side: fragmenting queued messages into the window, acks (cumulative
 * + selective), RTT estimation and retransmission.
 *
 * Retransmission timer: RFC 6298 (SRTT/RTTVAR, RTO = SRTT + 4 RTTVAR,
 * bounded by rto_us_min/max, doubled on every timeout, Karn's rule: no
 * samples from retransmitted frames). Fast retransmit: a frame with at least
 * TP_DUPTHRESH selectively-acked frames above it is resent once (the SACK
 * loss rule of RFC 6675, section 4, without congestion control: the window
 * is the receiver's credit). */
#include "transport_internal.h"

uint64_t tp__rto(const struct tp *tp, const struct tp_peer *pe)
{
	uint64_t max = (uint64_t)tp->p.rto_us_max * TP_NS_PER_US;
	uint64_t r = pe->rto_ns << pe->backoff;

	return r > max || (r >> pe->backoff) != pe->rto_ns ? max : r;
}

/* Fill the fields every frame to pe carries, including the piggybacked ack
 * (which then counts as sent: the delayed ack is cancelled). */
static void hdr_common(struct tp *tp, struct tp_peer *pe, struct wire_hdr *h,
		       uint8_t type, uint8_t flags, uint64_t now)
{
	memset(h, 0, sizeof(*h));
	h->type = type;
	/* until the peer addresses our current epoch, ask it to reset (once) */
	h->flags = flags | (pe->await_epoch_ack ? WIRE_F_RESET : 0);
	h->lane = tp->p.lane;
	h->cluster = tp->p.cluster;
	h->src_node = tp->p.node;
	h->dst_node = pe->node;
	h->src_epoch = pe->local_epoch;
	h->dst_epoch = pe->remote_epoch;
	h->ack = pe->rcv_next;
	h->sack = tp__sack(tp, pe);
	h->credit = (uint16_t)tp__credit(tp);
	h->tsval = (uint32_t)(now / TP_NS_PER_US);
	h->tsecr = pe->ts_recent;
	h->share = tp->rx_share;
	if (type == WIRE_T_ACK)   /* the largest message we take */
		h->msg_len = tp->p.max_message;
	pe->ack_pending = 0;
	pe->ack_due = 0;
	pe->ack_now = 0;
}

/* The headers of a DATA frame of m, a message of several frames, from the
 * template (made on the message's first frame sent, or again when the
 * epochs changed). Single frames are encoded whole (xmit): a template for
 * one frame costs more than it saves. */
static const uint8_t *tmpl_encode(struct tp *tp, struct tp_peer *pe,
				  const struct wire_hdr *h,
				  const struct tp_txmsg *m)
{
	/* a message goes to one peer all its life: m names pe too */
	if (ZB_UNLIKELY(tp->tmpl_msg != m ||
			tp->tmpl_src_epoch != h->src_epoch ||
			tp->tmpl_dst_epoch != h->dst_epoch)) {
		wire_tmpl_init(&tp->tmpl, &pe->addr, h);
		tp->tmpl_msg = m;
		tp->tmpl_src_epoch = h->src_epoch;
		tp->tmpl_dst_epoch = h->dst_epoch;
	}
	wire_tmpl_fill(&tp->tmpl, h, tp->ip_id++);
	return tp->tmpl.buf;
}

/* Hand a frame (headers in hdr) to the link. */
static int xmit_hdr(struct tp *tp, struct tp_peer *pe, const uint8_t *hdr,
		    const struct wire_hdr *h, const void *payload,
		    struct tp_ref *ref)
{
	struct tp_frame f;
	int rc;

	f.peer = pe->node;
	f.hdr_len = WIRE_HDRS_LEN;
	f.hdr = hdr;
	f.payload = payload;
	f.payload_len = h->payload_len;
	f.ref = ref;
	rc = tp->ops.tx(tp->user, &f);
	if (ZB_UNLIKELY(rc)) {
		tp->st.tx_busy++;
		return rc;
	}
	tp->st.frames_tx++;
	return 0;
}

static int xmit(struct tp *tp, struct tp_peer *pe, const struct wire_hdr *h,
		const void *payload, struct tp_ref *ref)
{
	wire_encode(tp->hdr, &pe->addr, h, payload, tp->ip_id++, tp->p.tx_flags);
	return xmit_hdr(tp, pe, tp->hdr, h, payload, ref);
}

/* streams != 0: the ACK states our stream count (only in replies to a
 * frame on a stream we lack: docs/wire.md, "More streams than the peer
 * has") */
static void send_ack(struct tp *tp, struct tp_peer *pe, uint8_t flags,
		     uint16_t streams, uint64_t now)
{
	struct wire_hdr h;

	ZB_DASSERT(pe->present);
	hdr_common(tp, pe, &h, WIRE_T_ACK, flags, now);
	h.stream = streams;
	if (xmit(tp, pe, &h, NULL, NULL) == 0) {
		tp->st.acks_tx++;
		if (flags & WIRE_F_ACKREQ)
			tp->st.probes_tx++;
	}
}

void tp__send_ack(struct tp *tp, struct tp_peer *pe, uint8_t flags, uint64_t now)
{
	send_ack(tp, pe, flags, 0, now);
}

void tp__send_reply(struct tp *tp, struct tp_peer *pe, uint16_t streams, uint64_t now)
{
	send_ack(tp, pe, 0, streams, now);
}

/* A message of at least stream_min bytes is taken to be cold (written long
 * before, or by another core, and larger than the caches want): touch the
 * fragment TP_PREFETCH_FRAGS ahead of the one being sent, so that the
 * link's copy of it (the memif PMD's) finds it in the cache instead of
 * waiting for DRAM line by line. Only for fragments shorter than
 * TP_PREFETCH_MAX_FRAG: the hardware prefetcher follows a long copy (a
 * jumbo frame's) by itself, and prefetching it as well cost 5 - 10 %. Two
 * memif nodes, 16 MiB messages: MTU 1500 42.5 - 44.7 -> 49 - 56 Gbit/s;
 * MTU 9000 90 - 94 -> 84 - 89 (docs/perf-transport.md). */
static inline void prefetch_ahead(const struct tp *tp, const struct tp_txmsg *m,
				  uint32_t frag_index)
{
	if (!tp__large(tp, m->len) || m->frag_size >= TP_PREFETCH_MAX_FRAG)
		return;
	uint64_t lo = ((uint64_t)frag_index + TP_PREFETCH_FRAGS) * m->frag_size;
	uint64_t hi = lo + m->frag_size;
	if (lo >= m->len)
		return;
	if (hi > m->len)
		hi = m->len;
	for (uint64_t q = lo & ~63ull; q < hi; q += 64)
		__builtin_prefetch(m->data + q, 0, 2);
}

static int send_slot(struct tp *tp, struct tp_peer *pe, uint32_t seq,
		     struct tp_slot *sl, uint8_t flags, uint64_t now)
{
	const struct tp_txmsg *m = sl->msg;
	struct wire_hdr h;
	uint64_t off = (uint64_t)sl->frag_index * m->frag_size;
	int rc;

	ZB_DASSERT(m != NULL && sl->frag_index < m->frag_count);
	hdr_common(tp, pe, &h, WIRE_T_DATA, flags, now);
	h.stream = m->stream;
	h.seq = seq;
	h.msg_id = m->msg_id;
	h.msg_len = m->len;
	h.frag_index = sl->frag_index;
	h.frag_count = m->frag_count;
	h.frag_size = m->frag_size;
	h.payload_len = (uint16_t)(m->len - off < m->frag_size ? m->len - off
							       : m->frag_size);
	sl->sent_ns = now;
	prefetch_ahead(tp, m, sl->frag_index);
	if (m->frag_count > 1 && !(tp->p.tx_flags & WIRE_TX_UDP_CSUM))
		rc = xmit_hdr(tp, pe, tmpl_encode(tp, pe, &h, m), &h,
			      m->data + off, m->ref);
	else
		rc = xmit(tp, pe, &h, m->data + off, m->ref);
	if (rc == 0) {
		tp->st.data_frames_tx++;
		tp->st.payload_bytes_tx += h.payload_len;
	}
	return rc;
}

/* May m's first fragment go now? Every message of pe that is started but
 * not fully assigned may still need frames after m's first one; if the
 * receiver could not hold m beside them, m's first fragment would wait at
 * its rcv_next while they wait for frames the window cannot reach: the
 * session would stall for good. So m starts alone, or where it fits beside
 * them in this sender's share of the receiver's arena: its arena over the
 * peers that may send to it, which its frames state (pe->peer_share); until
 * the first one came, alone. Were each sender to budget the whole arena,
 * two could each start two messages that fit it alone, and the four not:
 * both second ones would wait for room that neither first could free.
 * Within shares, the senders' side-by-side messages together leave room
 * for each one's next (docs/wire.md, "Large messages on several
 * streams"). Taking the peer's arena to be ours (until 2026-11-27) stalled
 * a sender whose peer had a smaller max_message. */
static inline bool may_start(const struct tp_peer *pe, const struct tp_txmsg *m)
{
	return m->next_frag != 0 || m->frag_count == 1 || pe->tx_partial_blk == 0 ||
	       (uint64_t)pe->tx_partial_blk + tp__rx_blocks(m->len, m->frag_count) <=
		       pe->peer_share;
}

/* Next stream with unassigned fragments that may go (may_start), round
 * robin (pe->rr: the stream after the one picked last). With one stream
 * pending — a bulk transfer — that is the one picked last: no scan over
 * the empty ones, which cost ~7 % of a sender's time per frame at 16
 * streams (the loop's store to rr on every step). Never NULL while a
 * stream is pending: a started message is always at its stream's head. */
static struct tp_stream_tx *pick_stream(struct tp *tp, struct tp_peer *pe)
{
	uint32_t n = tp->p.streams, s = pe->rr;

	if (pe->tx_pending_streams == 1) {
		struct tp_stream_tx *last = &pe->stx[(s == 0 ? n : s) - 1];
		if (last->head && may_start(pe, last->head))
			return last;
	}
	for (uint32_t i = 0; i < n; i++) {
		struct tp_stream_tx *st = &pe->stx[s];
		s = s + 1 == n ? 0 : s + 1;
		if (st->head && may_start(pe, st->head)) {
			pe->rr = s;
			return st;
		}
	}
	ZB_ASSERT(0 && "tx_pending_streams out of sync, or no started message");
	return NULL;
}

/* Assign sequence numbers to queued fragments and send them while the
 * local window and the peer's credit allow. */
void tp__pump(struct tp *tp, struct tp_peer *pe, uint64_t now)
{
	bool sent = false, was_idle = pe->snd_una == pe->snd_next;

	if (pe->tx_blocked) {   /* the frame the full link refused goes first */
		struct tp_slot *sl = &pe->win[pe->blocked_seq & tp->wmask];
		if (sl->msg && tp__sdiff(pe->blocked_seq, pe->snd_una) >= 0 &&
		    send_slot(tp, pe, pe->blocked_seq, sl, 0, now) == -EAGAIN) {
			pe->busy_due = now + TP_BUSY_RETRY_NS;
			tp__arm(tp, pe->busy_due);
			return;
		}
		pe->tx_blocked = 0;
	}
	while (pe->tx_pending_streams) {
		struct tp_stream_tx *s;
		struct tp_txmsg *m;
		struct tp_slot *sl;
		uint32_t seq = pe->snd_next;
		uint8_t flags = 0;

		if (seq - pe->snd_una >= tp->p.window)
			break;
		if (!tp__slt(seq, pe->snd_limit)) {
			if (!pe->stalled) {
				pe->stalled = 1;
				tp->st.window_stalls++;
				pe->probe_due = now + tp__rto(tp, pe);
				tp__arm(tp, pe->probe_due);
			}
			break;
		}
		s = pick_stream(tp, pe);
		m = s->head;
		sl = &pe->win[seq & tp->wmask];
		ZB_DASSERT(sl->msg == NULL);
		sl->msg = m;
		if (m->next_frag == 0 && m->frag_count > 1)
			pe->tx_partial_blk += tp__rx_blocks(m->len, m->frag_count);
		sl->frag_index = m->next_frag++;
		sl->rtx = 0;
		sl->sacked = 0;
		sl->fast = 0;
		if (m->next_frag == m->frag_count) {   /* fully assigned: pop */
			if (m->frag_count > 1) {
				uint32_t b = tp__rx_blocks(m->len, m->frag_count);
				ZB_DASSERT(pe->tx_partial_blk >= b);
				pe->tx_partial_blk -= b;
			}
			s->head = m->next;
			m->next = NULL;
			if (!s->head) {
				s->tail = NULL;
				pe->tx_pending_streams--;
			}
		}
		pe->snd_next = seq + 1;
		/* ask for an ack at once when this frame fills the window or
		 * empties the queue: nothing else would prompt one soon */
		if (pe->tx_pending_streams == 0 ||
		    pe->snd_next - pe->snd_una >= tp->p.window ||
		    pe->snd_next == pe->snd_limit)
			flags = WIRE_F_ACKREQ;
		sent = true;
		if (send_slot(tp, pe, seq, sl, flags, now) == -EAGAIN) {
			/* link full (a TX ring the NIC has not drained yet): not a
			 * loss, so not the RTO's business; try again shortly */
			pe->tx_blocked = 1;
			pe->blocked_seq = seq;
			pe->busy_due = now + TP_BUSY_RETRY_NS;
			tp__arm(tp, pe->busy_due);
			break;
		}
	}
	if (sent && was_idle) {
		pe->rto_due = now + tp__rto(tp, pe);
		tp__arm(tp, pe->rto_due);
	}
}

/* Return a finished message's descriptor and report it. */
void tp__txmsg_finish(struct tp *tp, struct tp_txmsg *m, int status)
{
	uint64_t cookie = m->cookie;
	struct tp_ref *ref = m->ref;

	ZB_DASSERT(tp->tx_free_count < tp->p.tx_msgs);
	if (tp->tmpl_msg == m)   /* the descriptor will be reused */
		tp->tmpl_msg = NULL;
	m->ref = NULL;
	m->data = NULL;
	m->next = tp->txfree;
	tp->txfree = m;
	tp->tx_free_count++;
	if (status == 0)
		tp->st.msgs_sent++;
	else
		tp->st.msgs_failed++;
	tp->ops.send_done(tp->user, cookie, status);
	if (ref)
		tp_ref_put(ref);
}

static void frag_acked(struct tp *tp, struct tp_peer *pe, struct tp_txmsg *m)
{
	ZB_DASSERT(m->frags_acked < m->next_frag);
	if (++m->frags_acked == m->frag_count) {
		ZB_DASSERT(pe->queued_msgs > 0);
		pe->queued_msgs--;
		tp__txmsg_finish(tp, m, 0);
	}
}

/* RFC 6298 section 2. */
static void rtt_sample(struct tp *tp, struct tp_peer *pe, uint64_t r)
{
	uint64_t min = (uint64_t)tp->p.rto_us_min * TP_NS_PER_US;
	uint64_t max = (uint64_t)tp->p.rto_us_max * TP_NS_PER_US;
	uint64_t rto;

	if (!pe->has_rtt) {
		pe->srtt_ns = r;
		pe->rttvar_ns = r / 2;
		pe->has_rtt = 1;
	} else {
		uint64_t err = pe->srtt_ns > r ? pe->srtt_ns - r : r - pe->srtt_ns;
		pe->rttvar_ns = (3 * pe->rttvar_ns + err) / 4;
		pe->srtt_ns = (7 * pe->srtt_ns + r) / 8;
	}
	rto = pe->srtt_ns + 4 * pe->rttvar_ns;
	pe->rto_ns = rto < min ? min : rto > max ? max : rto;
}

static void retransmit(struct tp *tp, struct tp_peer *pe, uint32_t seq,
		       struct tp_slot *sl, uint64_t now)
{
	if (sl->rtx < UINT16_MAX)
		sl->rtx++;
	tp->st.retransmits++;
	send_slot(tp, pe, seq, sl, WIRE_F_ACKREQ, now);
}

/* Holes with TP_DUPTHRESH or more SACKed frames above them are resent once
 * per transmission. Scans the SACK range only (64 frames). */
static void fast_retransmit(struct tp *tp, struct tp_peer *pe, uint64_t now)
{
	uint32_t top = pe->snd_una + 1 + WIRE_SACK_BITS, above = 0;

	if (tp__sdiff(top, pe->snd_next) > 0)
		top = pe->snd_next;
	for (uint32_t seq = top; seq-- != pe->snd_una;) {
		struct tp_slot *sl = &pe->win[seq & tp->wmask];

		if (sl->sacked) {
			above++;
			continue;
		}
		if (sl->msg && above >= TP_DUPTHRESH && !sl->fast) {
			sl->fast = 1;
			tp->st.fast_retransmits++;
			retransmit(tp, pe, seq, sl, now);
		}
	}
}

/* The ack fields of a valid frame from pe. Acks older than snd_una are
 * reordered leftovers and ignored; an ack beyond snd_next is refused. */
enum wire_reason tp__on_ack(struct tp *tp, struct tp_peer *pe,
			    const struct wire_hdr *h, uint64_t now)
{
	uint32_t a = h->ack, snd_next = pe->snd_next;
	bool progress, sacked_any = false, newly = false;

	if (tp__sdiff(a, pe->snd_next) > 0)
		return WIRE_E_ACK_RANGE;
	if (tp__slt(a, pe->snd_una))
		return WIRE_OK;
	tp->st.acks_rx++;
	progress = a != pe->snd_una;
	for (uint32_t seq = pe->snd_una; seq != a; seq++) {
		struct tp_slot *sl = &pe->win[seq & tp->wmask];
		struct tp_txmsg *m = sl->msg;

		sl->msg = NULL;
		sl->sacked = 0;
		if (!m)
			continue;          /* SACKed before */
		newly = true;
		pe->snd_una = seq + 1;     /* callbacks see a consistent window */
		frag_acked(tp, pe, m);
	}
	pe->snd_una = a;
	pe->credit = h->credit;
	pe->snd_limit = a + h->credit;
	for (uint64_t s = h->sack; s; s &= s - 1) {
		uint32_t seq = a + 1 + (uint32_t)__builtin_ctzll(s);
		struct tp_slot *sl = &pe->win[seq & tp->wmask];
		struct tp_txmsg *m = sl->msg;

		if (!tp__slt(seq, snd_next))   /* never sent: ignore */
			break;
		if (!m)
			continue;
		sl->msg = NULL;
		sl->sacked = 1;
		sacked_any = newly = true;
		frag_acked(tp, pe, m);
	}
	/* RTT from the echoed timestamp of the frame that prompted this ack:
	 * exact for retransmitted frames too (RFC 7323, section 4) */
	if (newly && h->tsecr) {
		uint32_t us = (uint32_t)(now / TP_NS_PER_US) - h->tsecr;
		if (us < 60u * 1000000u)
			rtt_sample(tp, pe, (uint64_t)us * TP_NS_PER_US);
	}
	if (progress) {
		pe->backoff = 0;
		pe->rto_due = now + tp__rto(tp, pe);  /* RFC 6298 5.3 */
		tp__arm(tp, pe->rto_due);
	}
	if (sacked_any)
		fast_retransmit(tp, pe, now);
	if (pe->stalled && tp__slt(pe->snd_next, pe->snd_limit))
		pe->stalled = 0;
	if (pe->stalled && pe->snd_una == pe->snd_next) {
		/* window closed and nothing left in flight: probe it */
		pe->probe_due = now + tp__rto(tp, pe);
		tp__arm(tp, pe->probe_due);
	}
	return WIRE_OK;
}

/* Per-frame retransmission timers and window probes; from tp_poll. */
void tp__tx_timers(struct tp *tp, struct tp_peer *pe, uint64_t now)
{
	if (pe->tx_blocked && now >= pe->busy_due)
		tp__pump(tp, pe, now);
	if (pe->snd_una != pe->snd_next && now >= pe->rto_due) {
		uint64_t rto = tp__rto(tp, pe), next = UINT64_MAX;
		bool first = true, oldest_fired = false;
		uint32_t end = pe->snd_una + 1 + WIRE_SACK_BITS;

		/* Only frames the peer's acks can describe (the cumulative ack
		 * and its SACK range): later ones may well have arrived; they
		 * are timed once the window slides over them. */
		if (tp__sdiff(end, pe->snd_next) > 0)
			end = pe->snd_next;
		for (uint32_t seq = pe->snd_una; seq != end; seq++) {
			struct tp_slot *sl = &pe->win[seq & tp->wmask];
			uint64_t due;

			if (!sl->msg)
				continue;
			due = sl->sent_ns + rto;
			if (now >= due) {
				sl->fast = 0;
				retransmit(tp, pe, seq, sl, now);
				oldest_fired |= first;
				due = now + 2 * rto;
			}
			first = false;
			if (due < next)
				next = due;
		}
		/* back off once per expiry of the oldest frame's timer (RFC
		 * 6298 5.5), not once per frame: frames sent microseconds apart
		 * expire in separate scans */
		if (oldest_fired) {
			tp->st.rto_timeouts++;
			if (pe->backoff < 16)
				pe->backoff++;
		}
		pe->rto_due = next;
		tp__arm(tp, next);
	}
	if (now >= pe->probe_due &&
	    ((pe->stalled && pe->snd_una == pe->snd_next) ||
	     pe->state == TP_PS_DOWN)) {
		/* zero-window probe, or "are you back?" to a peer marked down */
		tp__send_ack(tp, pe, WIRE_F_ACKREQ, now);
		pe->probe_due = now + (pe->state == TP_PS_DOWN
			? (uint64_t)tp->p.rto_us_max * TP_NS_PER_US
			: tp__rto(tp, pe));
		tp__arm(tp, pe->probe_due);
	}
}

/* Empty the send side of pe; messages to fail are appended to *fail in
 * per-stream send order (in flight first, then queued). */
void tp__tx_reset(struct tp *tp, struct tp_peer *pe, struct tp_txmsg **fail)
{
	struct tp_txmsg **tail = fail;

	while (*tail)
		tail = &(*tail)->next;
	/* fully assigned (popped) messages are reachable only from slots */
	for (uint32_t seq = pe->snd_una; seq != pe->snd_next; seq++) {
		struct tp_slot *sl = &pe->win[seq & tp->wmask];
		struct tp_txmsg *m = sl->msg;

		if (m && !m->failed && m->next_frag == m->frag_count) {
			m->failed = 1;
			m->next = NULL;
			*tail = m;
			tail = &m->next;
		}
	}
	/* Fully-SACKed popped messages with no unsacked slot cannot exist:
	 * they completed. Now the queues, in order. */
	for (uint32_t s = 0; s < tp->p.streams; s++) {
		struct tp_txmsg *m = pe->stx[s].head;

		while (m) {
			struct tp_txmsg *nx = m->next;
			m->failed = 1;
			m->next = NULL;
			*tail = m;
			tail = &m->next;
			m = nx;
		}
		pe->stx[s].head = pe->stx[s].tail = NULL;
		pe->stx[s].next_msg_id = 0;
	}
	memset(pe->win, 0, (size_t)tp->p.window * sizeof(*pe->win));
	pe->tx_pending_streams = 0;
	pe->tx_partial_blk = 0;
	pe->snd_una = pe->snd_next = 0;
	pe->snd_limit = pe->credit = tp->p.window;
	pe->queued_msgs = 0;
	pe->stalled = 0;
	pe->tx_blocked = 0;
	pe->backoff = 0;
	pe->rto_due = 0;
	pe->busy_since_ns = 0;
	ZB_ASSERT(pe->snd_una == pe->snd_next);
}
