/* Receive side: validation beyond the wire (peer, epoch, sequence window),
 * duplicate suppression, reassembly into the arena, in-order delivery per
 * stream, delayed acks, credit.
 *
 * Exactly-once: a DATA frame is accepted at most once per session — its
 * sequence number is marked in a window-sized bitmap only after its payload
 * is placed; sequences below rcv_next or already marked are duplicates.
 * In order: a message is delivered only when its msg_id is the stream's
 * next_deliver, which then advances. */
#include "transport_internal.h"

/* ---- (peer, stream, msg_id) -> message: linear probing ------------------ */
static inline uint64_t msg_key(uint16_t peer, uint16_t stream, uint32_t id)
{
	return ((uint64_t)peer << 48) | ((uint64_t)stream << 32) | id;
}
static inline uint64_t m_key(const struct tp_msg *m)
{
	return msg_key(m->peer, m->stream, m->msg_id);
}
static inline uint32_t hslot(uint64_t key)
{
	return (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 32);
}

static struct tp_msg *hfind(const struct tp *tp, uint64_t key, uint32_t *at)
{
	for (uint32_t i = hslot(key) & tp->hmask, n = 0; n <= tp->hmask;
	     i = (i + 1) & tp->hmask, n++) {
		struct tp_msg *m = tp->htab[i];
		if (!m)
			return NULL;
		if (m_key(m) == key) {
			if (at)
				*at = i;
			return m;
		}
	}
	return NULL;
}

static void hinsert(struct tp *tp, struct tp_msg *m)
{
	uint32_t i = hslot(m_key(m)) & tp->hmask;

	while (tp->htab[i])
		i = (i + 1) & tp->hmask;
	tp->htab[i] = m;
}

/* Backward-shift deletion keeps probe chains intact without tombstones. */
static void hremove(struct tp *tp, struct tp_msg *m)
{
	uint32_t i = 0, j;
	struct tp_msg *found = hfind(tp, m_key(m), &i);

	ZB_ASSERT(found == m);
	if (tp->rx_last == m)
		tp->rx_last = NULL;
	tp->htab[i] = NULL;
	for (j = (i + 1) & tp->hmask; tp->htab[j]; j = (j + 1) & tp->hmask) {
		uint32_t k = hslot(m_key(tp->htab[j])) & tp->hmask;
		bool move = (i <= j) ? (k <= i || k > j) : (k <= i && k > j);
		if (move) {
			tp->htab[i] = tp->htab[j];
			tp->htab[j] = NULL;
			i = j;
		}
	}
}

/* ---- receive bitmap ------------------------------------------------------ */
static inline bool rbit(const struct tp *tp, const struct tp_peer *pe,
			uint32_t seq)
{
	uint32_t i = seq & tp->wmask;
	return (pe->rcv_bits[i >> 6] >> (i & 63)) & 1;
}
static inline void rbit_set(const struct tp *tp, struct tp_peer *pe,
			    uint32_t seq, bool v)
{
	uint32_t i = seq & tp->wmask;
	if (v)
		pe->rcv_bits[i >> 6] |= 1ull << (i & 63);
	else
		pe->rcv_bits[i >> 6] &= ~(1ull << (i & 63));
}

/* Bits for rcv_next+1 .. rcv_next+64 (window >= 64, so no aliasing with
 * unreceived sequences: the bit of rcv_next itself is always clear). */
uint64_t tp__sack(const struct tp *tp, const struct tp_peer *pe)
{
	uint32_t start = (pe->rcv_next + 1) & tp->wmask;
	uint32_t w = start >> 6, sh = start & 63, nw = (tp->wmask + 1) / 64;
	uint64_t lo = pe->rcv_bits[w] >> sh;

	if (sh)
		lo |= pe->rcv_bits[(w + 1) % nw] << (64 - sh);
	return lo;
}

/* Frames we can take beyond rcv_next, from free descriptors and arena.
 * Never below TP_CREDIT_FLOOR: frames of messages already being reassembled
 * need no new resources, and a closed window would stall them (a frame that
 * does need resources is dropped and resent later). Descriptors are one
 * peer's share: its reserve (place()) and an equal part of the rest, so one
 * peer's backlog does not invite every peer to send more than fits. */
uint32_t tp__credit(const struct tp *tp)
{
	uint64_t mem = (uint64_t)tp->arena.free_blk * TP_BLK / tp->frag_size;
	uint64_t c = tp->p.window, desc = tp->p.streams;

	if (tp->npeers && tp->rx_free_count > tp->rx_rsv)
		desc += (tp->rx_free_count - tp->rx_rsv) / tp->npeers;
	if (mem < c)
		c = mem;
	if (desc < c)
		c = desc;
	if (c < TP_CREDIT_FLOOR)
		c = TP_CREDIT_FLOOR;
	return (uint32_t)c;
}

/* ---- delivery ------------------------------------------------------------ */
static void mark_deferred(struct tp *tp, struct tp_peer *pe, uint32_t s)
{
	pe->srx[s].deferred = 1;
	tp->st.deliver_deferred++;
	if (!pe->has_deferred) {
		pe->has_deferred = 1;
		tp->deferred_peers++;
	}
	tp__arm(tp, 0);
}

/* Hand m to the consumer. true: taken. */
static bool hand_over(struct tp *tp, struct tp_msg *m)
{
	m->state__ = TP_MS_DELIVERED;
	tp->rx_outstanding++;
	if (tp->ops.deliver(tp->user, m) == 0) {
		tp->st.msgs_delivered++;
		tp->st.bytes_delivered += m->len;
		return true;
	}
	/* refused (the consumer kept nothing): back to complete */
	ZB_ASSERT(m->state__ == TP_MS_DELIVERED);
	m->state__ = TP_MS_COMPLETE;
	tp->rx_outstanding--;
	return false;
}

/* Whether an orphan of peer waits, before `end` in the orphan list (NULL:
 * anywhere). Rare path (after a reset), short lists. */
static bool orphan_waits(const struct tp *tp, uint16_t peer,
			 const struct tp_msg *end)
{
	for (const struct tp_msg *o = tp->orphans; o != end; o = o->next__)
		if (o->peer == peer)
			return true;
	return false;
}

/* Deliver complete messages of (pe, s) in msg_id order. */
static void deliver_stream(struct tp *tp, struct tp_peer *pe, uint32_t s)
{
	struct tp_stream_rx *sr = &pe->srx[s];

	/* Messages of a reset session (orphans) are older than any of the
	 * new one, on every stream of that peer (a consumer may rely on the
	 * session boundary across streams: tests/dataplane/test_restart.sh
	 * checks that no old-session message follows a new one): while some
	 * of this peer wait, defer; tp__deliver_pending (tp_poll) delivers the
	 * orphans, then the deferred streams. Without this the frame that
	 * revealed a peer's restart, and the rest of its RX burst, delivered
	 * new-session messages before the old session's. Other peers go on. */
	if (ZB_UNLIKELY(tp->orphans != NULL) &&
	    orphan_waits(tp, pe->node, NULL)) {
		if (!sr->deferred)
			mark_deferred(tp, pe, s);
		return;
	}
	while (!sr->deferred) {
		struct tp_msg *m = hfind(tp, msg_key(pe->node, (uint16_t)s,
						     sr->next_deliver), NULL);
		if (!m || m->state__ != TP_MS_COMPLETE)
			return;
		hremove(tp, m);
		sr->next_deliver++;
		if (!hand_over(tp, m)) {
			sr->next_deliver--;
			hinsert(tp, m);
			mark_deferred(tp, pe, s);
		}
	}
}

/* From tp_poll: orphans first (they are older), then deferred streams. An
 * orphan the consumer refuses holds back the later ones of its own peer
 * only (the list is in msg_id order per (peer, stream)); other peers'
 * orphans and streams go on. */
void tp__deliver_pending(struct tp *tp, uint64_t now)
{
	struct tp_msg **at = &tp->orphans;

	(void)now;
	while (*at) {
		struct tp_msg *m = *at;
		uint32_t cut = tp->orphans_cut;

		if (orphan_waits(tp, m->peer, m)) {
			at = &m->next__;   /* an earlier one was refused */
			continue;
		}
		*at = m->next__;
		m->next__ = NULL;
		if (!hand_over(tp, m)) {
			m->next__ = *at;
			*at = m;
			tp->st.deliver_deferred++;
			at = &m->next__;
		} else if (ZB_UNLIKELY(tp->orphans_cut != cut)) {
			/* the consumer dropped an orphan (tp_rx_detach):
			 * perhaps the one at points into */
			at = &tp->orphans;
		}
	}
	for (uint32_t i = 0; i < tp->p.max_peers && tp->deferred_peers; i++) {
		struct tp_peer *pe = &tp->peers[i];

		if (!pe->has_deferred)
			continue;
		pe->has_deferred = 0;
		tp->deferred_peers--;
		for (uint32_t s = 0; s < tp->p.streams; s++) {
			if (!pe->srx[s].deferred)
				continue;
			pe->srx[s].deferred = 0;
			deliver_stream(tp, pe, s);
		}
	}
}

/* m's kept frames back to the link: in batches through ops->rx_free_bulk
 * where the link has it, else one by one (rx_free). */
static void give_back_frames(struct tp *tp, const struct tp_msg *m)
{
	void *batch[TP_RX_FREE_BULK];
	unsigned nb = 0;

	for (uint32_t i = 0; i < m->nsegs; i++) {
		void *f = m->segs[i].frame;
		if (!f)
			continue;
		if (!tp->ops.rx_free_bulk) {
			tp->ops.rx_free(tp->user, f);
			continue;
		}
		batch[nb++] = f;
		if (nb == TP_RX_FREE_BULK) {
			tp->ops.rx_free_bulk(tp->user, batch, nb);
			nb = 0;
		}
	}
	if (nb)
		tp->ops.rx_free_bulk(tp->user, batch, nb);
}

/* What m holds: arena blocks, or kept frames (back to the link) and their
 * segment table. */
void tp__msg_free_mem(struct tp *tp, struct tp_msg *m)
{
	tp__arena_free(&tp->arena, m->blk__, m->nblk__);
	tp__arena_free(&tp->arena, m->fblk__, m->nfblk__);
	m->blk__ = m->nblk__ = m->fblk__ = m->nfblk__ = 0;
	m->fmap__ = NULL;
	if (m->segs) {
		give_back_frames(tp, m);
		tp__arena_free(&tp->segarena, m->sblk__, m->nsblk__);
		m->segs = NULL;
		m->nsegs = m->sblk__ = m->nsblk__ = 0;
	}
}

void tp_msg_read(const struct tp_msg *m, size_t off, void *dst, size_t n)
{
	uint8_t *d = dst;

	ZB_ASSERT(m != NULL && off <= m->len && n <= m->len - off);
	if (!m->segs) {
		if (n)
			memcpy(d, m->data + off, n);
		return;
	}
	for (uint32_t i = (uint32_t)(off / m->seg_size); n; i++) {
		size_t at = off - (size_t)i * m->seg_size;
		size_t take = tp_seg_len(m, i) - at;

		if (take > n)
			take = n;
		memcpy(d, m->segs[i].data + at, take);
		d += take;
		off += take;
		n -= take;
	}
}

/* A receive descriptor back to the free list, what it holds with it. */
static void rxd_put(struct tp *tp, struct tp_msg *m)
{
	tp__msg_free_mem(tp, m);
	m->state__ = TP_MS_FREE;
	m->placed__ = 0;
	m->data = NULL;
	m->next__ = tp->rxfree;
	tp->rxfree = m;
	tp->rx_free_count++;
}

void tp_msg_release(struct tp *tp, struct tp_msg *m)
{
	uint32_t before;

	ZB_ASSERT(tp != NULL && m != NULL);
	ZB_ASSERT(m->state__ == TP_MS_DELIVERED);
	ZB_ASSERT(tp->rx_outstanding > 0);
	before = tp__credit(tp);
	rxd_put(tp, m);
	tp->rx_outstanding--;
	/* window update: credit was nearly closed and opens now; tell the
	 * peers from tp_poll (their probes would find out later anyway) */
	if (before <= tp->p.window / 4 && tp__credit(tp) > tp->p.window / 4) {
		for (uint32_t i = 0; i < tp->p.max_peers; i++) {
			struct tp_peer *pe = &tp->peers[i];
			if (pe->present && pe->state == TP_PS_UP && !pe->ack_due)
				pe->ack_due = 1;
		}
		tp__arm(tp, 1);
	}
}

/* ---- data frames ---------------------------------------------------------- */
enum place_rc { PLACE_OK = 0, PLACE_NOBUF = -1, PLACE_DELIVER = -2 };

/* Whether m's fragments go into the arena with streaming stores: a large
 * message (p.stream_min) cut into whole cache lines, so each fragment
 * writes whole lines of the (64-aligned) arena. */
static inline bool stream_frag(const struct tp *tp, const struct tp_msg *m,
			       const struct wire_hdr *h)
{
	return tp__large(tp, m->len) && !m->placed__ &&
	       h->frag_size % 64 == 0 && ((uintptr_t)m->data & 63) == 0;
}

/* How far ahead, in fragments, a plain copy into the arena announces its
 * stores: the lines of fragment index + RX_PREFETCH_FRAGS are prefetched for
 * writing before this one is copied, so their fetches from the last-level
 * cache overlap the copies in between instead of stalling each store.
 * Measured on the Intel VM of 2026-11-28 (16 MiB messages at MTU 1500,
 * copied into the arena: 2 memif nodes, alternated runs): at 16 fragments
 * 47.1 - 50.7 Gbit/s against 45.7 - 49.6 (won 6 of 7 pairs; 4 - 24
 * fragments won 21 of 23); skipping the copy altogether read 49.5 - 52.4
 * (docs/perf-transport.md, "the arena copy's destination prefetched"). */
#define RX_PREFETCH_FRAGS 16u

static inline void prefetch_frag(const struct tp_msg *m, const struct wire_hdr *h)
{
	if (h->frag_index + RX_PREFETCH_FRAGS >= m->frag_count__)
		return;
	size_t at = (size_t)(h->frag_index + RX_PREFETCH_FRAGS) * h->frag_size;
	size_t end = at + h->frag_size;

	ZB_DASSERT(at < m->len);
	if (end > m->len)
		end = m->len;
	for (; at < end; at += 64)
		__builtin_prefetch(m->data + at, 1, 3);
}

/* Copy one fragment into its message (allocated on the first fragment seen,
 * whichever it is). Returns PLACE_OK, PLACE_DELIVER (it completed the
 * stream's next message), PLACE_NOBUF, or a wire_reason. */
static int place(struct tp *tp, struct tp_peer *pe, const struct wire_hdr *h,
		 const uint8_t *payload, bool in_order, uint64_t now)
{
	uint64_t key = msg_key(pe->node, h->stream, h->msg_id);
	/* a message's fragments come in runs: the last one found first */
	struct tp_msg *m = tp->rx_last && tp->rx_last_key == key
		? tp->rx_last : hfind(tp, key, NULL);

	ZB_DASSERT(m == hfind(tp, key, NULL));
	if (!m) {
		int32_t d = tp__sdiff(h->msg_id, pe->srx[h->stream].next_deliver);
		uint32_t blk, nblk;

		if (d < 0 || (uint32_t)d >= TP_MSG_WINDOW)
			return WIRE_E_MSG_WINDOW;
		/* A message started out of order may wait (complete, on an
		 * earlier message of its stream) for a frame at rcv_next; if
		 * it took the last descriptor, that frame would be dropped
		 * for good and nothing behind it delivered. So it leaves
		 * streams descriptors per peer: enough for one straddling
		 * message per stream of each peer, whose frames need nothing
		 * new and which are delivered as soon as complete. */
		if (!tp->rxfree ||
		    (!in_order && tp->rx_free_count <= tp->rx_rsv))
			return PLACE_NOBUF;
		/* the consumer's buffer, when it has one ready for this message */
		uint8_t *buf = NULL;
		if (tp->ops.rx_place && h->msg_len &&
		    (!tp->ops.rx_write || h->frag_size % 8 == 0))
			buf = tp->ops.rx_place(tp->user, pe->node, h->stream,
					       h->msg_id, h->msg_len);
		struct tp_seg *segs = NULL;
		uint32_t sblk = 0, nsblk = 0, fblk = 0, nfblk = 0;
		/* the fragment map: on the descriptor up to 64 fragments */
		size_t fmap_bytes = tp__fmap_bytes(h->frag_count);
		uint64_t *fmap = NULL;
		blk = nblk = 0;
		if (buf && fmap_bytes &&
		    ((!in_order && tp->arena.free_blk < tp->arena_rsv +
		      (fmap_bytes + TP_BLK - 1) / TP_BLK) ||
		     tp__arena_alloc(&tp->arena, fmap_bytes, &fblk, &nfblk))) {
			tp->ops.rx_unplace(tp->user, pe->node, h->stream, h->msg_id);
			return PLACE_NOBUF;
		}
		if (buf) {
			tp->st.msgs_placed++;
			if (fmap_bytes)
				fmap = (uint64_t *)(void *)(tp->arena.base +
							    (size_t)fblk * TP_BLK);
		} else if (tp->rx_ref && tp->segarena.base &&   /* keeping on */
			   h->msg_len >= tp->p.rx_keep_min &&
			   !tp__large(tp, h->msg_len) &&
			   tp->ops.rx_keep(tp->user, pe->node, h->stream, h->msg_len)) {
			size_t tb = (size_t)h->frag_count * sizeof(*segs);
			if (tp__arena_alloc(&tp->segarena, tb, &sblk, &nsblk) == 0) {
				segs = (struct tp_seg *)(void *)(tp->segarena.base +
								 (size_t)sblk * TP_BLK);
				memset(segs, 0, tb);
				tp->st.msgs_kept++;
			} else {
				tp->st.keep_no_room++;
			}
		}
		/* ... and leaves the arena a message of max_message for the
		 * frame at rcv_next (the default arena is max_message plus
		 * what four windows carry: that much may start out of order) */
		if (!buf && !segs) {
			if ((!in_order && tp->arena.free_blk < tp->arena_rsv +
			     tp__rx_blocks(h->msg_len, h->frag_count)) ||
			    tp__arena_alloc(&tp->arena, tp__rx_need(h->msg_len, h->frag_count),
					    &blk, &nblk))
				return PLACE_NOBUF;
			if (fmap_bytes)
				fmap = (uint64_t *)(void *)(tp->arena.base +
					(size_t)blk * TP_BLK + tp__fmap_off(h->msg_len));
		}
		if (fmap)
			memset(fmap, 0, fmap_bytes);
		m = tp->rxfree;
		tp->rxfree = m->next__;
		tp->rx_free_count--;
		m->next__ = NULL;
		m->peer = pe->node;
		m->stream = h->stream;
		m->msg_id = h->msg_id;
		m->epoch = pe->remote_epoch;
		m->len = h->msg_len;
		m->data = buf ? buf : nblk ? tp->arena.base + (size_t)blk * TP_BLK : NULL;
		m->placed__ = buf != NULL;
		m->blk__ = blk;
		m->nblk__ = nblk;
		m->segs = segs;
		m->nsegs = segs ? h->frag_count : 0;
		m->seg_size = segs ? h->frag_size : 0;
		m->sblk__ = sblk;
		m->nsblk__ = nsblk;
		m->frags_got__ = 0;
		m->frag_count__ = h->frag_count;
		m->fmap1__ = 0;
		m->fmap__ = segs ? NULL : fmap ? fmap : &m->fmap1__;
		m->fblk__ = fblk;
		m->nfblk__ = nfblk;
		m->frag_size__ = h->frag_size;
		m->state__ = TP_MS_PARTIAL;
		hinsert(tp, m);
		if (h->frag_count > 1) {
			/* its sender may die before the rest comes: the
			 * peer-down check frees it then (check_down) */
			pe->rx_partial++;
			tp__arm(tp, now + (uint64_t)tp->p.peer_timeout_ms * 1000000ull);
		}
	} else if (m->len != h->msg_len || m->frag_count__ != h->frag_count ||
		   m->frag_size__ != h->frag_size ||
		   m->state__ != TP_MS_PARTIAL) {
		return WIRE_E_MSG_MISMATCH;
	}
	tp->rx_last = m;
	tp->rx_last_key = key;
	if (m->segs) {
		/* kept: the frame itself is the fragment. on_data refused
		 * duplicates by sequence number; a fragment sent again under
		 * another one (a broken or hostile sender) is not kept twice */
		ZB_DASSERT(h->frag_index < m->nsegs);
		if (m->segs[h->frag_index].frame) {
			tp->st.dup_frames++;
			return PLACE_OK;
		}
		if (!tp->rx_ref) {
			tp->st.keep_unkept++;
			return PLACE_NOBUF;    /* resent; kept next time */
		}
		m->segs[h->frag_index] = (struct tp_seg){payload, tp->rx_ref};
		tp->rx_kept = 1;
		tp->st.frames_kept++;
	} else {
		/* the same fragment under another sequence number (a broken
		 * or hostile sender): counted once, so a message never
		 * completes with a hole, and never written (reduced) twice */
		uint64_t *w = &m->fmap__[h->frag_index >> 6];
		uint64_t bit = 1ull << (h->frag_index & 63);

		if (ZB_UNLIKELY(*w & bit)) {
			tp->st.dup_frames++;
			return PLACE_OK;
		}
		*w |= bit;
		if (h->payload_len) {
			size_t off = (size_t)h->frag_index * h->frag_size;
			if (m->placed__ && tp->ops.rx_write)
				tp->ops.rx_write(tp->user, m->peer, m->stream,
						 m->msg_id, m->data, off, payload,
						 h->payload_len);
			else if (stream_frag(tp, m, h))
				zb_copy_stream(m->data + off, payload,
					       h->payload_len);
			else {
				prefetch_frag(m, h);
				memcpy(m->data + off, payload, h->payload_len);
			}
		}
	}
	if (++m->frags_got__ == m->frag_count__) {
		m->state__ = TP_MS_COMPLETE;
		if (m->frag_count__ > 1)
			pe->rx_partial--;
		if (stream_frag(tp, m, h))
			zb_copy_stream_fence();   /* before anyone reads it */
		if (m->msg_id == pe->srx[m->stream].next_deliver)
			return PLACE_DELIVER;
	}
	return PLACE_OK;
}

static enum wire_reason on_data(struct tp *tp, struct tp_peer *pe,
				const struct wire_hdr *h,
				const uint8_t *payload, uint64_t now)
{
	int32_t d = tp__sdiff(h->seq, pe->rcv_next);
	uint32_t before = pe->rcv_next;
	int rc;

	/* stream and window: check_frame, before anything was used */
	ZB_DASSERT(h->stream < tp->p.streams && d < (int32_t)tp->p.window);
	pe->ts_recent = h->tsval;
	/* rcv_next's own bit is always clear (it would have advanced): the
	 * in-order frame (d == 0) needs no look at the bitmap */
	ZB_DASSERT(!rbit(tp, pe, pe->rcv_next));
	if (d < 0 || (d > 0 && d < (int32_t)tp->p.window && rbit(tp, pe, h->seq))) {
		tp->st.dup_frames++;
		pe->ack_now = 1;           /* the sender lacks our ack */
		return WIRE_OK;
	}
	rc = place(tp, pe, h, payload, d == 0, now);
	if (rc == PLACE_NOBUF) {
		tp->st.no_buffer_drops++;
		return WIRE_OK;            /* not bad: resent when we have room */
	}
	if (rc > 0)
		return (enum wire_reason)rc;
	tp->st.payload_bytes_rx += h->payload_len;
	if (d == 0)
		pe->rcv_next++;   /* no set-then-clear of its bit */
	else
		rbit_set(tp, pe, h->seq, true);
	while (rbit(tp, pe, pe->rcv_next)) {
		rbit_set(tp, pe, pe->rcv_next, false);
		pe->rcv_next++;
	}
	if (d > 0) {
		tp->st.ooo_frames++;
		pe->ack_now = 1;           /* a hole: SACK it at once */
	} else if (pe->rcv_next - before > 1) {
		pe->ack_now = 1;           /* a hole filled */
	}
	if (++pe->ack_pending >= tp->p.ack_every)
		pe->ack_now = 1;
	else if (!pe->ack_due) {
		pe->ack_due = now + (uint64_t)tp->p.ack_delay_us * TP_NS_PER_US;
		tp__arm(tp, pe->ack_due);
	}
	/* deliver last: the consumer may send (and piggyback our ack) */
	if (rc == PLACE_DELIVER)
		deliver_stream(tp, pe, h->stream);
	return WIRE_OK;
}

/* Answer pe with an ACK (it states our epoch and our max_message, and our
 * stream count when streams != 0), at most once per rto_us_min whatever the
 * cause; counted in *count when sent. */
static void ack_reply(struct tp *tp, struct tp_peer *pe, uint64_t *count,
		      uint16_t streams, uint64_t now)
{
	if (now < pe->stale_reply_ns)
		return;
	(*count)++;
	tp__send_reply(tp, pe, streams, now);
	pe->stale_reply_ns = now + (uint64_t)tp->p.rto_us_min * TP_NS_PER_US;
}

/* The peer started a new session (it restarted, or reset its session
 * with us) with epoch e: ours with it starts over. Its epoch first:
 * send_done callbacks of the reset may send, and their frames go to the new
 * session. */
static void peer_restarted(struct tp *tp, struct tp_peer *pe, uint32_t e,
			   uint64_t now)
{
	ZB_ASSERT(e != 0 && e != pe->remote_epoch);
	tp->st.peer_restarts++;
	pe->remote_epoch = e;
	pe->reset_done_for = e;
	pe->peer_max = 0;          /* its ACKs will say (config may differ) */
	pe->peer_streams = 0;
	pe->await_epoch_ack = 0;   /* it knows nothing older of us */
	pe->dst0_stale = 0;        /* ... and may not know us */
	tp__session_reset(tp, pe, ZB_ERR_EPOCH, false, now);
	if (pe->state == TP_PS_DOWN)
		pe->state = TP_PS_UNKNOWN;
	if (tp->ops.peer_event)
		tp->ops.peer_event(tp->user, pe->node, TP_PEER_RESTARTED, e);
}

/* Whether the incarnation of the peer we know (epoch R) has been silent for
 * peer_timeout: then a frame with another epoch cannot be an older
 * incarnation's, however the epochs compare. An older incarnation's frames
 * were all sent before R's first frame reached us, and no frame outlives
 * peer_timeout in the network (seconds at most, where peer_timeout is
 * seconds too); R's are newer than all of them, so silence for that long
 * since R was last heard (at or after it was adopted) leaves none in
 * flight. Serial comparison alone told a restart more than 2^31 epochs
 * (24.9 days of realtime milliseconds) after the previous start from a
 * stale frame, and refused the new incarnation for good. */
static inline bool incarnation_gone(const struct tp *tp, const struct tp_peer *pe,
				    uint64_t now)
{
	return now - pe->last_rx_ns >= (uint64_t)tp->p.peer_timeout_ms * 1000000ull;
}

/* Session epochs (docs/wire.md, "Sessions and epochs"). A session is the
 * pair (our local epoch L, the peer's epoch R); any change of either resets
 * both sides' state, so sequence numbers always restart together. Returns
 * WIRE_OK when the frame belongs to the current session, or to a new one of
 * the peer (*fresh: the caller resets the session once the frame passed
 * every check, check_frame). Changes nothing on WIRE_OK; a frame refused
 * for its destination epoch still gives the peer's epoch. */
static enum wire_reason check_epoch(struct tp *tp, struct tp_peer *pe,
				    const struct wire_hdr *h, bool *fresh,
				    uint64_t now)
{
	*fresh = false;
	if (ZB_UNLIKELY(h->src_epoch == 0))
		return WIRE_E_BAD_EPOCH;
	if (ZB_UNLIKELY(h->src_epoch != pe->remote_epoch)) {
		if (pe->remote_epoch != 0) {   /* R = 0: adopt (apply_epoch) */
			if (tp__slt(h->src_epoch, pe->remote_epoch) &&
			    !incarnation_gone(tp, pe, now))
				return WIRE_E_STALE_EPOCH;   /* an older incarnation */
			*fresh = true;   /* new incarnation, or it reset its session */
		}
	}
	if (h->dst_epoch == pe->local_epoch)
		return WIRE_OK;
	/* dst_epoch 0: it has not heard from us yet. Not after a reset of
	 * ours in this incarnation of the peer: it learnt our new epoch from
	 * it (await_epoch_ack until it says so), so such a frame is of the
	 * session we abandoned, and taken into the new one it would be
	 * delivered as one of its messages. A new incarnation knows nothing
	 * of that reset. */
	if (h->dst_epoch == 0 &&
	    (*fresh || (!pe->await_epoch_ack && !pe->dst0_stale)))
		return WIRE_OK;
	/* Refused. The peer's epoch is learnt all the same (our reply then
	 * addresses it: two sides that both reset, or both never heard of
	 * each other, would otherwise refuse each other's replies for good) */
	if (*fresh)
		peer_restarted(tp, pe, h->src_epoch, now);
	else if (pe->remote_epoch == 0)
		pe->remote_epoch = h->src_epoch;
	/* Addressed to a session of ours that we abandoned (or, after we
	 * reset, from a peer that never heard of us and may still send its
	 * old stream), or to an epoch of ours that compares newer than ours
	 * (a previous incarnation of this node, 2^31 epochs or more ago):
	 * refuse, and tell the peer our epoch (rate-limited) either way, or
	 * it never learns it. While we await the peer's acknowledgement of
	 * our epoch, our frames carry WIRE_F_RESET, so a peer that never
	 * heard of us starts over. */
	ack_reply(tp, pe, &tp->st.stale_replies, 0, now);
	return h->dst_epoch != 0 && !tp__slt(h->dst_epoch, pe->local_epoch)
		? WIRE_E_BAD_EPOCH : WIRE_E_STALE_EPOCH;
}

/* What check_epoch found, applied once the frame passed every check: a new
 * epoch of the peer (adopted, or a new session of it), the peer's request
 * to start over (WIRE_F_RESET), its acknowledgement of our epoch. */
static void apply_epoch(struct tp *tp, struct tp_peer *pe,
			const struct wire_hdr *h, bool fresh, uint64_t now)
{
	if (fresh)
		peer_restarted(tp, pe, h->src_epoch, now);
	else if (ZB_UNLIKELY(pe->remote_epoch == 0))
		pe->remote_epoch = h->src_epoch;
	if (ZB_UNLIKELY((h->flags & WIRE_F_RESET) &&
			pe->reset_done_for != h->src_epoch)) {
		/* the peer reset its session (new epoch) and we may not have
		 * known its old one: drop our state for it too, once per epoch */
		pe->reset_done_for = h->src_epoch;
		tp->st.peer_restarts++;
		tp__session_reset(tp, pe, ZB_ERR_EPOCH, false, now);
		if (pe->state == TP_PS_DOWN)
			pe->state = TP_PS_UNKNOWN;
	}
	if (ZB_UNLIKELY(pe->await_epoch_ack) && h->dst_epoch == pe->local_epoch)
		pe->await_epoch_ack = 0;
}

/* The header checks that need the session but change nothing, made before
 * anything of the frame is used (docs/wire.md, "Validation"): a refused
 * frame's ack, timestamps, epoch and flags must not act on the session
 * either. restart: the frame starts a new session of the peer
 * (apply_epoch will reset ours: sequences from 0). */
static inline enum wire_reason check_frame(const struct tp *tp,
					   const struct tp_peer *pe,
					   const struct wire_hdr *h,
					   bool restart)
{
	uint32_t snd_next = ZB_UNLIKELY(restart) ? 0 : pe->snd_next;
	uint32_t rcv_next = ZB_UNLIKELY(restart) ? 0 : pe->rcv_next;

	if (ZB_UNLIKELY(tp__sdiff(h->ack, snd_next) > 0))
		return WIRE_E_ACK_RANGE;
	if (h->type != WIRE_T_DATA)
		return WIRE_OK;
	if (ZB_UNLIKELY(h->stream >= tp->p.streams))
		return WIRE_E_STREAM;
	if (ZB_UNLIKELY(tp__sdiff(h->seq, rcv_next) >= (int32_t)tp->p.window))
		return WIRE_E_SEQ_WINDOW;
	return WIRE_OK;
}

/* A DATA frame of a message larger than our max_message (refused as
 * msg_size; wire_decode had read the header, checksum and all, when it
 * did): from a configured peer at its address, tell it our limit, which
 * our ACKs carry, rate-limited as stale-epoch replies are. Its messages
 * would otherwise be retransmitted for good (docs/wire.md, "Larger than
 * the peer takes"). */
static void size_reply(struct tp *tp, const struct wire_hdr *h, const struct wire_addr *a,
		       uint64_t now)
{
	if (h->src_node >= tp->p.max_peers || !tp->peers[h->src_node].present)
		return;
	struct tp_peer *pe = &tp->peers[h->src_node];
	if (a->src_ip == pe->addr.dst_ip)
		ack_reply(tp, pe, &tp->st.size_replies, 0, now);
}

int tp__rx_frame(struct tp *tp, const uint8_t *frame, size_t len,
		 unsigned flags, void *ref, uint64_t now)
{
	struct wire_hdr h;
	struct wire_addr a;
	const uint8_t *payload = NULL;
	struct tp_peer *pe = NULL;
	enum wire_reason r;
	bool fresh;

	tp->rx_ref = ref;
	tp->rx_kept = 0;

	r = wire_decode(frame, len, &tp->rxcfg, flags, &h, &a, &payload);
	if (ZB_UNLIKELY(r != WIRE_OK))
		goto bad;
	if (ZB_UNLIKELY(h.src_node >= tp->p.max_peers ||
			!tp->peers[h.src_node].present)) {
		r = WIRE_E_UNKNOWN_PEER;
		goto bad;
	}
	pe = &tp->peers[h.src_node];
	if (ZB_UNLIKELY(a.src_ip != pe->addr.dst_ip)) {
		r = WIRE_E_SRC_ADDR;
		goto bad;
	}
	r = check_epoch(tp, pe, &h, &fresh, now);
	if (ZB_UNLIKELY(r != WIRE_OK))
		goto bad;
	r = check_frame(tp, pe, &h, fresh || ((h.flags & WIRE_F_RESET) &&
					      pe->reset_done_for != h.src_epoch));
	if (ZB_UNLIKELY(r != WIRE_OK))
		goto bad;
	tp->st.frames_rx++;
	apply_epoch(tp, pe, &h, fresh, now);
	tp__peer_heard(tp, pe, now);
	uint32_t share = (uint32_t)h.share * TP_SHARE_BLK;
	if (ZB_UNLIKELY(share != pe->peer_share))
		pe->peer_share = share;
	if (ZB_UNLIKELY(h.type == WIRE_T_ACK && h.msg_len && h.msg_len != pe->peer_max) &&
	    tp__peer_max(tp, pe, h.msg_len, now)) {
		/* our session was reset: this ack is of the one before */
		tp->rx_ref = NULL;
		return 0;
	}
	if (ZB_UNLIKELY(h.type == WIRE_T_ACK && h.stream != 0) &&
	    tp__peer_streams(tp, pe, h.stream, now)) {
		/* our session was reset: this ack is of the one before */
		tp->rx_ref = NULL;
		return 0;
	}
	r = tp__on_ack(tp, pe, &h, now);
	if (ZB_UNLIKELY(r != WIRE_OK))
		goto bad;
	if (h.flags & WIRE_F_ACKREQ)
		pe->ack_now = 1;
	if (h.type == WIRE_T_DATA) {
		r = on_data(tp, pe, &h, payload, now);
		if (ZB_UNLIKELY(r != WIRE_OK))
			goto bad;
	}
	tp__pump(tp, pe, now);            /* the ack may have opened the window */
	if (pe->ack_now) {
		if (!tp->p.rx_batch)
			tp__send_ack(tp, pe, 0, now);
		else if (!pe->ack_held) {  /* one ack for the burst: tp_rx_flush */
			pe->ack_held = 1;
			tp->ackq[tp->ackq_len++] = pe->node;
		}
	}
	tp->rx_ref = NULL;
	return tp->rx_kept ? TP_RX_KEPT : 0;
bad:
	tp->rx_ref = NULL;
	ZB_DASSERT(!tp->rx_kept);   /* every refusal comes before place() */
	tp__bad(tp, r);
	if (ZB_UNLIKELY(r == WIRE_E_MSG_SIZE))
		size_reply(tp, &h, &a, now);
	else if (ZB_UNLIKELY(r == WIRE_E_STREAM))
		/* a stream we lack: the peer has more (docs/wire.md, "More
		 * streams than the peer has"); our reply says how many we
		 * have, or its message would be resent for good */
		ack_reply(tp, pe, &tp->st.stream_replies, tp->p.streams, now);
	return ZB_ERR_BAD_FRAME;
}

void tp_rx_flush(struct tp *tp, uint64_t now_ns)
{
	ZB_DASSERT(tp != NULL && tp->ackq_len <= tp->p.max_peers);
	for (uint32_t i = 0; i < tp->ackq_len; i++) {
		struct tp_peer *pe = &tp->peers[tp->ackq[i]];

		pe->ack_held = 0;
		/* a data frame sent since may have carried the ack already */
		if (pe->ack_now && pe->present)
			tp__send_ack(tp, pe, 0, now_ns);
	}
	tp->ackq_len = 0;
}

/* tp_rx, tp_rx_keep: through the fault injection when it is on */
static inline int rx_in(struct tp *tp, const void *frame, size_t len,
			unsigned flags, void *ref, uint64_t now_ns)
{
	ZB_DASSERT(tp != NULL);
	if (ZB_UNLIKELY(tp->fault_on))
		return tp__fault_rx(tp, frame, len, flags, ref, now_ns);
	return tp__rx_frame(tp, frame, len, flags, ref, now_ns);
}

int tp_rx(struct tp *tp, const void *frame, size_t len, unsigned flags,
	  uint64_t now_ns)
{
	return rx_in(tp, frame, len, flags, NULL, now_ns);
}

int tp_rx_keep(struct tp *tp, const void *frame, size_t len, unsigned flags,
	       void *frame_ref, uint64_t now_ns)
{
	ZB_DASSERT(frame_ref != NULL);
	return rx_in(tp, frame, len, flags, frame_ref, now_ns);
}

/* Move a placed message into the arena (the consumer takes its buffer
 * back). 0, or -ENOMEM (no arena space). */
static int unplace_one(struct tp *tp, struct tp_msg *m)
{
	uint32_t blk, nblk;

	ZB_DASSERT(m->placed__ && m->nblk__ == 0);
	if (tp__arena_alloc(&tp->arena, m->len, &blk, &nblk))
		return -ENOMEM;
	uint8_t *to = tp->arena.base + (size_t)blk * TP_BLK;
	memcpy(to, m->data, m->len);   /* holes included: they are rewritten */
	m->data = to;
	m->blk__ = blk;
	m->nblk__ = nblk;
	m->placed__ = 0;
	tp->st.placed_detached++;
	return 0;
}

int tp_rx_detach(struct tp *tp, uint16_t peer, uint16_t stream,
		 uint32_t msg_id, uint64_t now_ns)
{
	uint64_t key = msg_key(peer, stream, msg_id);
	struct tp_msg *m = hfind(tp, key, NULL), **at;

	ZB_ASSERT(tp != NULL);
	if (!m) {   /* a complete one from a reset session waits as an orphan */
		for (at = &tp->orphans; *at && m_key(*at) != key; at = &(*at)->next__)
			;
		if (!*at || !(*at)->placed__)
			return 0;
		if (unplace_one(tp, *at) == 0)
			return 0;
		m = *at;               /* no room: its consumer is gone; drop it */
		*at = m->next__;
		tp->orphans_cut++;
		rxd_put(tp, m);
		return 1;
	}
	if (!m->placed__ || m->state__ == TP_MS_DELIVERED)
		return 0;
	if (unplace_one(tp, m) == 0)
		return 0;
	/* No room. Fragments of it were acknowledged and will not come again:
	 * without them the stream cannot go on, so the message is dropped and
	 * the session starts over (the caller holds the buffer already: no
	 * rx_unplace for it). */
	hremove(tp, m);
	rxd_put(tp, m);
	return tp_peer_reset(tp, peer, now_ns) == 0 ? 1 : 0;
}

/* Drop pe's receive state. Complete messages that wait for an earlier one
 * of their stream are not lost: their sender saw them acknowledged, so they
 * go to the orphan list and are delivered (in msg_id order per stream) from
 * tp_poll. Partial ones are freed: their sender gets an error. */
void tp__rx_reset(struct tp *tp, struct tp_peer *pe)
{
	struct tp_msg *found = NULL;

	for (uint32_t i = 0; i <= tp->hmask; i++) {
		struct tp_msg *m = tp->htab[i];
		if (m && m->peer == pe->node) {
			m->next__ = found;
			found = m;
		}
	}
	while (found) {
		struct tp_msg *m = found, **at;
		found = m->next__;
		hremove(tp, m);
		if (m->state__ != TP_MS_COMPLETE) {
			if (m->placed__)   /* the consumer's buffer is its own again */
				tp->ops.rx_unplace(tp->user, m->peer, m->stream,
						   m->msg_id);
			rxd_put(tp, m);
			continue;
		}
		/* insertion into the orphan list after older ones of this
		 * (peer, stream): rare path, short lists */
		at = &tp->orphans;
		while (*at && !((*at)->peer == m->peer &&
				(*at)->stream == m->stream &&
				tp__slt(m->msg_id, (*at)->msg_id)))
			at = &(*at)->next__;
		m->next__ = *at;
		*at = m;
		tp__arm(tp, 0);
	}
	memset(pe->rcv_bits, 0, (tp->wmask + 1) / 8);
	if (pe->has_deferred) {
		pe->has_deferred = 0;
		tp->deferred_peers--;
	}
	memset(pe->srx, 0, (size_t)tp->p.streams * sizeof(*pe->srx));
	pe->rcv_next = 0;
	pe->rx_partial = 0;        /* every partial message was freed */
	pe->ack_pending = 0;
	pe->ack_due = 0;
	pe->ack_now = 0;
	ZB_ASSERT(!pe->has_deferred);
}
