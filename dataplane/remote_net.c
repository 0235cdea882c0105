/* dataplane/remote_net.c — the net carrier of remote actor messages: the
 * lane's records over a net provider (zbmd/net.h: "tcp", "rdma") instead of
 * the reliable transport on the ports. Contract: remote_car.h; protocol:
 * docs/remote.md "Carriers".
 *
 * One provider instance of its own (so that it never shares comms with the
 * collectives), driven by one lane's poller. Per peer: a send comm and a
 * recv comm on channel 0, and
 *   rs[]  NC_RSLOTS receive slots of NC_MSG bytes with an irecv posted on
 *         each free one (the posted-receive pool: with rdma these are SENDs
 *         into pre-posted buffers, eager, no registration); the queue `rq`
 *         keeps them in posting order, the order messages match in;
 *   ss[]  NC_SSLOTS send slots (each message is copied into one: the
 *         provider may read it until its request completes), in flight in
 *         order in `sq`;
 * and one carrier message = an 8-byte header {magic, kind, stream, len}
 * (little-endian) + up to NC_FRAG bytes. A remote message that fits is one
 * WHOLE carrier message, delivered in place from its receive slot (the slot
 * is posted again when the lane releases the message). A longer one (a
 * buffer payload) goes as FIRST + MORE... fragments, consecutive on the
 * comm, reassembled into an arena of max_message bytes (the transport's
 * allocator) and delivered from there.
 *
 * Peer life: connecting until both comms exist (then TP_PEER_UP); a request
 * that fails (the provider says the peer is gone), or messages not credited
 * while nothing at all is heard from the peer for [transport]
 * peer_timeout_ms (a stopped process, a partition; a receiver holding a
 * delivery back sends keepalives), closes both comms, fails
 * what was accepted and not completed (send_done ZB_ERR_PEER_DOWN), drops
 * what was half received, reports TP_PEER_DOWN, and connects again after
 * NC_RETRY_NS. Messages for a peer never connected yet are queued in its
 * send slots (the lane waits only when they are full) and posted when it
 * connects; if it has not within [transport] connect_timeout_ms they fail
 * (ZB_ERR_PEER_DOWN) and it is down until it connects.
 *
 * Fast-path rules: everything is allocated by zbra__netcar_create; the
 * poller and send never allocate or lock. The provider itself may make
 * syscalls (tcp is kernel sockets; verbs post and poll without).
 */
#include "remote_car.h"
#include "transport_internal.h"

#include "zbmd/common.h"
#include "zbmd/config.h"
#include "zbmd/net.h"

#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NC_MAGIC 0xa7u
#define NC_MSG 4096u                    /* carrier message: the rdma eager size */
#define NC_HDR 8u
#define NC_FRAG (NC_MSG - NC_HDR)
#define NC_RX_OFF (64u - NC_HDR)        /* payloads land 64-byte aligned */
#define NC_RSLOTS 32u                   /* posted receives per peer (pow2) */
#define NC_SSLOTS 32u                   /* sends in flight per peer (pow2) */
#define NC_BIGS 16u                     /* reassembled messages held per peer */
#define NC_WIN 64u                      /* data messages unconsumed per peer */
#define NC_TAG 0x7a6e6321u
#define NC_RETRY_NS (100ull * 1000 * 1000)
#define NC_CONNECT_POLL_NS (1000ull * 1000)   /* connection work while one is down */

static_assert((NC_RSLOTS & (NC_RSLOTS - 1)) == 0 && (NC_SSLOTS & (NC_SSLOTS - 1)) == 0,
	      "ring masks");
static_assert((NC_WIN & (NC_WIN - 1)) == 0, "ring mask");
static_assert(NC_RSLOTS <= 64 && NC_SSLOTS <= 64, "the tcp provider's request slots");

enum { NCK_WHOLE = 1, NCK_FIRST = 2, NCK_MORE = 3, NCK_CREDIT = 4, NCK_REFUSE = 5 };
#define NC_REFUSE_BODY 8u               /* REFUSE: the refusing side's max_message */
enum { NP_CONNECTING = 0, NP_UP, NP_DOWN };
enum { RS_FREE = 0, RS_POSTED, RS_DONE, RS_HELD };

struct nc_rslot {
	uint8_t *buf;                   /* NC_RX_OFF + NC_MSG bytes, 64-aligned */
	void *req;
	size_t size;                    /* RS_DONE: bytes received */
	uint8_t state;
	struct tp_msg tm;               /* RS_HELD: the delivered message */
};

struct nc_sslot {
	uint8_t *buf;                   /* NC_MSG bytes */
	void *req;                      /* NULL: queued, not posted yet */
	uint32_t n;                     /* bytes of the carrier message */
};

struct nc_unacked {                     /* a data message not credited yet */
	uint64_t cookie;
	uint8_t last;                   /* credited: its message is done */
};

struct nc_big {                         /* a reassembled message */
	struct tp_msg tm;
	uint32_t blk, nblk;
	struct nc_big *next;            /* free list */
	uint8_t in_use;
};

struct nc_peer {
	uint16_t id;
	uint8_t state, ever_up;
	void *scomm, *rcomm;
	uint32_t epoch;                 /* connections made (tm.epoch) */
	uint32_t rx_id;                 /* tm.msg_id */
	uint64_t retry_at, wait_since;  /* reconnect; a send waiting for the first */
	uint64_t half_since;            /* one comm held, not the other, since */
	struct nc_rslot rs[NC_RSLOTS];
	uint16_t rq[NC_RSLOTS];         /* posted slots, oldest first */
	uint32_t rq_head, rq_tail;
	struct tp_msg *pending;         /* delivered -EAGAIN: offered again */
	struct nc_big *asm_big;         /* reassembly in progress */
	uint16_t asm_stream;
	size_t asm_got;
	struct nc_big bigs[NC_BIGS], *bfree;
	struct nc_sslot ss[NC_SSLOTS];
	uint32_t sq_head, sq_tail;      /* in flight, oldest first */
	uint32_t credits;               /* data messages we may still send */
	uint64_t heard;                 /* last message of any kind from the peer */
	uint64_t ua_since;              /* ua[] became non-empty */
	uint64_t ka_sent;               /* last keepalive (credit 0) we sent */
	uint8_t rx_stuck;               /* the head message waits (arena full) */
	struct nc_unacked ua[NC_WIN];   /* sent, not credited, oldest first */
	uint32_t ua_head, ua_tail;
	uint32_t consumed;              /* taken from the peer, not credited yet */
	uint64_t peer_max;              /* the peer's max_message (0: not heard) */
	/* a message over our max_message being skipped (refused) */
	uint32_t skip_len, skip_got;
	uint16_t skip_stream;
	/* a fragmented send in progress (one at a time per peer) */
	const uint8_t *ls_data;
	size_t ls_len, ls_off;
	struct tp_ref *ls_ref;
	uint64_t ls_cookie;
	uint16_t ls_stream;
};

struct zbra_netcar {
	const struct net_ops *ops;
	void *ctx;
	struct zb_config cfg;           /* the copy the provider was given */
	unsigned lane;
	uint16_t self;
	uint64_t max_message, connect_timeout_ns, peer_timeout_ns;
	struct tp_arena arena;
	uint8_t *mem;                   /* every slot buffer */
	struct nc_peer *peers[CFG_MAX_NODES];
	bool closing;
	uint64_t now;                   /* the poll's or send's clock */
	unsigned connecting;            /* peers not connected at the last poll */
	uint64_t conn_due;              /* next connection work (nc_poll) */
	struct zbra_netcar_stats st;
};

/* ---- wire header ------------------------------------------------------------ */

static inline void hdr_put(uint8_t *p, uint8_t kind, uint16_t stream, uint32_t len)
{
	p[0] = NC_MAGIC;
	p[1] = kind;
	uint16_t s = htole16(stream);
	uint32_t l = htole32(len);
	memcpy(p + 2, &s, 2);
	memcpy(p + 4, &l, 4);
}

static inline void hdr_get(const uint8_t *p, uint8_t *magic, uint8_t *kind,
			   uint16_t *stream, uint32_t *len)
{
	uint16_t s;
	uint32_t l;
	*magic = p[0];
	*kind = p[1];
	memcpy(&s, p + 2, 2);
	memcpy(&l, p + 4, 4);
	*stream = le16toh(s);
	*len = le32toh(l);
}

/* ---- receive ------------------------------------------------------------------ */

static int post_recv(struct zbra_netcar *c, struct nc_peer *p, unsigned i)
{
	struct nc_rslot *r = &p->rs[i];
	ZB_DASSERT(r->state == RS_FREE && p->rcomm != NULL);
	ZB_DASSERT(p->rq_tail - p->rq_head < NC_RSLOTS);
	int rc = c->ops->irecv(p->rcomm, r->buf + NC_RX_OFF, NC_MSG, NC_TAG, NULL, &r->req);
	if (rc)
		return rc;
	if (p->rq_tail == p->rq_head)
		p->heard = c->now;   /* could not hear it until now (liveness) */
	r->state = RS_POSTED;
	p->rq[p->rq_tail++ & (NC_RSLOTS - 1)] = (uint16_t)i;
	return 0;
}

static void big_put(struct zbra_netcar *c, struct nc_peer *p, struct nc_big *b)
{
	ZB_DASSERT(b->in_use);
	tp__arena_free(&c->arena, b->blk, b->nblk);
	b->in_use = 0;
	b->next = p->bfree;
	p->bfree = b;
}

static void peer_fail(struct zbra_netcar *c, struct nc_peer *p, uint64_t now);
static int tx_post(struct zbra_netcar *c, struct nc_peer *p, uint8_t kind,
		   uint16_t stream, uint32_t len, const void *body, size_t n,
		   uint64_t cookie, bool last);

/* The message at the head of the receive queue is complete (r->size
 * bytes): deliver it, or take its fragment. 0 consumed, -EAGAIN not now
 * (the slot stays at the head, RS_DONE), another error: the peer failed. */
static int rx_take(struct zbra_netcar *c, struct nc_peer *p, unsigned i)
{
	struct nc_rslot *r = &p->rs[i];
	const uint8_t *h = r->buf + NC_RX_OFF;
	uint8_t magic = 0, kind = 0;
	uint16_t stream;
	uint32_t len;
	size_t body = r->size >= NC_HDR ? r->size - NC_HDR : 0;
	if (r->size < NC_HDR)
		goto bad;
	hdr_get(h, &magic, &kind, &stream, &len);
	if (magic != NC_MAGIC)
		goto bad;
	if (p->skip_len && kind != NCK_CREDIT && kind != NCK_REFUSE) {
		/* the next fragment of the message we refuse */
		if (kind != NCK_MORE || stream != p->skip_stream || len != p->skip_len ||
		    body == 0 || p->skip_got + body > len ||
		    (p->skip_got + body < len && body != NC_FRAG))
			goto bad;
		if (p->skip_got + body == len) {
			/* its last: REFUSE credits it with what came before */
			uint64_t mx = htole64(c->max_message);
			int rc = tx_post(c, p, NCK_REFUSE, 0, p->consumed + 1, &mx,
					 sizeof(mx), 0, false);
			if (rc)
				return rc;   /* -EAGAIN: no send slot, taken again */
			p->consumed = 0;
			p->skip_len = 0;
		} else {
			p->skip_got += body;
			p->consumed++;
		}
		r->state = RS_FREE;
		return post_recv(c, p, i);
	}
	if (kind == NCK_WHOLE) {
		if (len != body || p->asm_big)
			goto bad;
		r->tm = (struct tp_msg){.peer = p->id, .stream = stream,
					.msg_id = p->rx_id, .epoch = p->epoch,
					.data = body ? r->buf + 64 : NULL, .len = body};
		r->state = RS_HELD;
		int rc = zbra__deliver(c->lane, &r->tm);
		p->rx_id++;
		c->st.msgs_in++;
		if (rc == -EAGAIN)
			p->pending = &r->tm;   /* consumed once the lane takes it */
		else
			p->consumed++;
		return 0;   /* off the queue either way: held until released */
	}
	if (kind == NCK_CREDIT || kind == NCK_REFUSE) {
		/* CREDIT len 0: a keepalive (the peer is there). REFUSE: the
		 * last message these credits complete was too large for the
		 * peer, whose max_message is the body */
		uint64_t max = 0;
		if (kind == NCK_REFUSE) {
			if (body != NC_REFUSE_BODY || len == 0)
				goto bad;
			memcpy(&max, h + NC_HDR, sizeof(max));
			max = le64toh(max);
			if (max == 0)
				goto bad;
		} else if (body) {
			goto bad;
		}
		if (len > NC_WIN || p->credits + len > NC_WIN ||
		    p->ua_tail - p->ua_head < len)
			goto bad;
		if (kind == NCK_REFUSE &&
		    !p->ua[(p->ua_head + len - 1) & (NC_WIN - 1)].last)
			goto bad;
		p->credits += len;
		for (uint32_t k = 0; k < len; k++) {
			const struct nc_unacked *u = &p->ua[p->ua_head++ & (NC_WIN - 1)];
			if (u->last)   /* consumed by the peer's lane: delivered */
				zbra__send_done(c->lane, u->cookie,
						kind == NCK_REFUSE && k == len - 1 ? -EMSGSIZE : 0);
		}
		if (kind == NCK_REFUSE)
			p->peer_max = max;
		r->state = RS_FREE;
		return post_recv(c, p, i);
	}
	if (kind == NCK_FIRST && len > c->max_message && !p->asm_big &&
	    len > NC_FRAG && body == NC_FRAG) {
		/* larger than we take: its fragments are skipped, then the
		 * sender hears REFUSE (its send fails with -EMSGSIZE and it
		 * learns our limit); the lane drops the header it holds */
		p->skip_len = len;
		p->skip_got = NC_FRAG;
		p->skip_stream = stream;
		p->consumed++;
		c->st.refused++;
		zbra__refused(c->lane, p->id, stream);
		r->state = RS_FREE;
		return post_recv(c, p, i);
	}
	if (kind == NCK_FIRST) {
		if (p->asm_big || len <= NC_FRAG || len > c->max_message ||
		    body != NC_FRAG)
			goto bad;
		struct nc_big *b = p->bfree;
		uint32_t blk, nblk;
		if (!b || tp__arena_alloc(&c->arena, len, &blk, &nblk) != 0)
			return -EAGAIN;   /* the lane still holds earlier ones */
		p->bfree = b->next;
		b->in_use = 1;
		b->blk = blk;
		b->nblk = nblk;
		b->tm = (struct tp_msg){.peer = p->id, .stream = stream,
					.epoch = p->epoch,
					.data = c->arena.base + (size_t)blk * TP_BLK,
					.len = len};
		p->asm_big = b;
		p->asm_stream = stream;
		p->asm_got = 0;
	} else if (kind != NCK_MORE || !p->asm_big || stream != p->asm_stream ||
		   len != p->asm_big->tm.len || body == 0 ||
		   p->asm_got + body > len || (p->asm_got + body < len && body != NC_FRAG)) {
		goto bad;
	}
	struct nc_big *b = p->asm_big;
	memcpy(b->tm.data + p->asm_got, h + NC_HDR, body);
	p->asm_got += body;
	c->st.frags_in++;
	p->consumed++;
	r->state = RS_FREE;
	if (p->asm_got == b->tm.len) {
		p->asm_big = NULL;
		b->tm.msg_id = p->rx_id++;
		c->st.msgs_in++;
		if (zbra__deliver(c->lane, &b->tm) == -EAGAIN)
			p->pending = &b->tm;
	}
	return post_recv(c, p, i);
bad:
	/* a malformed carrier message: counted, dropped, and so is a
	 * reassembly it breaks into */
	c->st.bad++;
	if (p->asm_big) {
		big_put(c, p, p->asm_big);
		p->asm_big = NULL;
	}
	p->skip_len = 0;
	if (kind != NCK_CREDIT && kind != NCK_REFUSE)
		p->consumed++;   /* it took one of the sender's credits */
	r->state = RS_FREE;
	return post_recv(c, p, i);
}

static unsigned rx_poll(struct zbra_netcar *c, struct nc_peer *p, uint64_t now)
{
	unsigned work = 0;
	if (p->pending) {
		if (zbra__deliver(c->lane, p->pending) == -EAGAIN)
			return 0;   /* the stream waits (backpressure) */
		/* a reassembled message's fragments were consumed already */
		p->consumed += p->pending->len <= NC_FRAG;
		p->pending = NULL;
		work++;
	}
	for (unsigned k = 0; k < NC_RSLOTS && p->rq_head != p->rq_tail &&
			     p->state == NP_UP && !p->pending; k++) {
		unsigned i = p->rq[p->rq_head & (NC_RSLOTS - 1)];
		struct nc_rslot *r = &p->rs[i];
		if (r->state == RS_POSTED) {
			int done = 0, rc = c->ops->test(r->req, &done, &r->size);
			if (rc < 0) {
				r->state = RS_FREE;
				p->rq_head++;
				peer_fail(c, p, now);
				return work + 1;
			}
			if (!done)
				break;
			r->state = RS_DONE;
			p->heard = now;
		}
		/* off the queue first: rx_take may post it again (a message
		 * the lane releases at once) */
		p->rq_head++;
		int rc = rx_take(c, p, i);
		if (rc == -EAGAIN) {
			p->rq_head--;   /* stays first, RS_DONE: taken next time */
			p->rx_stuck = 1;
			break;
		}
		p->rx_stuck = 0;
		work++;
		if (rc < 0) {
			peer_fail(c, p, now);
			break;
		}
	}
	return work;
}

/* ---- send ------------------------------------------------------------------- */

/* Posts one carrier message from the next send slot. 0, -EAGAIN (no slot
 * or no credit: nothing posted), or the provider's error. */
static int tx_post(struct zbra_netcar *c, struct nc_peer *p, uint8_t kind,
		   uint16_t stream, uint32_t len, const void *body, size_t n,
		   uint64_t cookie, bool last)
{
	bool ctl = kind == NCK_CREDIT || kind == NCK_REFUSE;
	if (p->sq_tail - p->sq_head == NC_SSLOTS || (!ctl && p->credits == 0))
		return -EAGAIN;
	struct nc_sslot *s = &p->ss[p->sq_tail & (NC_SSLOTS - 1)];
	ZB_DASSERT(n <= NC_FRAG);
	hdr_put(s->buf, kind, stream, len);
	if (n)
		memcpy(s->buf + NC_HDR, body, n);
	s->n = (uint32_t)(NC_HDR + n);
	s->req = NULL;   /* not connected yet: posted when the comms are up */
	if (p->state == NP_UP) {
		int rc = c->ops->isend(p->scomm, s->buf, s->n, NC_TAG, NULL, &s->req);
		if (rc)
			return rc;
	}
	p->sq_tail++;
	if (ctl) {
		c->st.credits_out++;
	} else {
		ZB_DASSERT(p->ua_tail - p->ua_head < NC_WIN);
		if (p->ua_tail == p->ua_head)
			p->ua_since = c->now;
		p->ua[p->ua_tail++ & (NC_WIN - 1)] = (struct nc_unacked){cookie, last};
		p->credits--;
	}
	if (kind == NCK_FIRST || kind == NCK_MORE)
		c->st.frags_out++;
	return 0;
}

/* Pushes the fragments of the send in progress while slots and credits
 * last. 0 or the provider's error. */
static int tx_pump(struct zbra_netcar *c, struct nc_peer *p)
{
	while (p->ls_data) {
		size_t n = p->ls_len - p->ls_off < NC_FRAG ? p->ls_len - p->ls_off : NC_FRAG;
		bool last = p->ls_off + n == p->ls_len;
		int rc = tx_post(c, p, p->ls_off ? NCK_MORE : NCK_FIRST, p->ls_stream,
				 (uint32_t)p->ls_len, p->ls_data + p->ls_off, n,
				 p->ls_cookie, last);
		if (rc == -EAGAIN)
			return 0;
		if (rc)
			return rc;
		p->ls_off += n;
		if (last) {
			p->ls_data = NULL;
			c->st.msgs_out++;
			if (p->ls_ref)
				tp_ref_put(p->ls_ref);   /* every byte is copied */
			p->ls_ref = NULL;
		}
	}
	return 0;
}

static unsigned tx_poll(struct zbra_netcar *c, struct nc_peer *p, uint64_t now)
{
	unsigned work = 0;
	while (p->sq_head != p->sq_tail) {
		struct nc_sslot *s = &p->ss[p->sq_head & (NC_SSLOTS - 1)];
		if (!s->req)
			break;   /* queued before the connection: conn_poll posts it */
		int done = 0;
		size_t sz;
		int rc = c->ops->test(s->req, &done, &sz);
		if (rc < 0) {
			p->sq_head++;   /* freed by test */
			peer_fail(c, p, now);
			return work + 1;
		}
		if (!done)
			break;
		p->sq_head++;   /* the slot is free; the message is done when credited */
		work++;
	}
	int rc = tx_pump(c, p);
	if (rc) {
		peer_fail(c, p, now);
		work++;
	}
	return work;
}

static int nc_send(void *car, uint16_t peer, uint16_t stream, const void *data,
		   size_t len, struct tp_ref *ref, uint64_t cookie, uint64_t now)
{
	struct zbra_netcar *c = car;
	struct nc_peer *p = peer < CFG_MAX_NODES ? c->peers[peer] : NULL;
	ZB_DASSERT(c != NULL);
	c->now = now;
	if (!p)
		return -EHOSTUNREACH;
	if (len > c->max_message)
		return -EMSGSIZE;
	if (p->state == NP_DOWN)
		return ZB_ERR_PEER_DOWN;
	if (p->state == NP_CONNECTING && !p->wait_since)
		p->wait_since = now | 1;   /* queued until connected, or connect_timeout */
	if (p->ls_data)
		return -EAGAIN;   /* a long message is going out: order */
	if (len <= NC_FRAG) {
		int rc = tx_post(c, p, NCK_WHOLE, stream, (uint32_t)len, data, len,
				 cookie, true);
		if (rc && rc != -EAGAIN) {
			peer_fail(c, p, now);
			return ZB_ERR_PEER_DOWN;
		}
		c->st.msgs_out += rc == 0;
		return rc;
	}
	if (ref)
		tp_ref_get(ref);
	p->ls_data = data;
	p->ls_len = len;
	p->ls_off = 0;
	p->ls_ref = ref;
	p->ls_cookie = cookie;
	p->ls_stream = stream;
	int rc = tx_pump(c, p);
	if (rc)
		peer_fail(c, p, now);   /* fails the accepted message too */
	return 0;
}

/* ---- release (the lane is done with a delivered message) ------------------------ */

static void nc_release(void *car, struct tp_msg *m)
{
	struct zbra_netcar *c = car;
	struct nc_peer *p = m->peer < CFG_MAX_NODES ? c->peers[m->peer] : NULL;
	ZB_ASSERT(p != NULL);
	if (m >= &p->bigs[0].tm && m <= &p->bigs[NC_BIGS - 1].tm) {
		struct nc_big *b = (struct nc_big *)((uint8_t *)m - offsetof(struct nc_big, tm));
		big_put(c, p, b);
		return;
	}
	struct nc_rslot *r = (struct nc_rslot *)((uint8_t *)m - offsetof(struct nc_rslot, tm));
	ZB_ASSERT(r >= p->rs && r < p->rs + NC_RSLOTS && r->state == RS_HELD);
	r->state = RS_FREE;
	if (c->closing || p->state != NP_UP || m->epoch != p->epoch)
		return;   /* posted again when the peer is connected again */
	if (post_recv(c, p, (unsigned)(r - p->rs)) != 0)
		c->st.bad++;   /* cannot happen: a request slot per receive slot */
}

/* ---- peer life ----------------------------------------------------------------- */

/* Close whichever of p's comms it holds. */
static void comms_close(struct zbra_netcar *c, struct nc_peer *p)
{
	if (p->scomm)
		c->ops->close_send(p->scomm);
	if (p->rcomm)
		c->ops->close_recv(p->rcomm);
	p->scomm = p->rcomm = NULL;
}

static void peer_close(struct zbra_netcar *c, struct nc_peer *p)
{
	comms_close(c, p);
	/* the requests went with the comms */
	p->sq_head = p->sq_tail = 0;
	p->rq_head = p->rq_tail = 0;
	for (unsigned i = 0; i < NC_RSLOTS; i++)
		if (p->rs[i].state == RS_POSTED || p->rs[i].state == RS_DONE)
			p->rs[i].state = RS_FREE;
}

/* The peer is lost (or never came): everything accepted and not credited
 * fails, what was half received is dropped, the comms close, the lane
 * hears TP_PEER_DOWN; connecting again from retry_at. */
static void fail_all(struct zbra_netcar *c, struct nc_peer *p, uint64_t retry_at)
{
	/* not credited: maybe delivered, maybe not (as with any RPC) */
	for (uint32_t k = p->ua_head; k != p->ua_tail; k++) {
		const struct nc_unacked *u = &p->ua[k & (NC_WIN - 1)];
		if (u->last)
			zbra__send_done(c->lane, u->cookie, ZB_ERR_PEER_DOWN);
	}
	p->ua_head = p->ua_tail = 0;
	if (p->ls_data) {
		zbra__send_done(c->lane, p->ls_cookie, ZB_ERR_PEER_DOWN);
		if (p->ls_ref)
			tp_ref_put(p->ls_ref);
		p->ls_data = NULL;
		p->ls_ref = NULL;
	}
	peer_close(c, p);
	p->state = NP_DOWN;
	if (p->pending) {   /* never taken: the lane forgets its half too */
		struct tp_msg *m = p->pending;
		p->pending = NULL;
		nc_release(c, m);
	}
	if (p->asm_big) {
		big_put(c, p, p->asm_big);
		p->asm_big = NULL;
	}
	p->retry_at = retry_at;
	p->wait_since = 0;
	c->st.peer_downs++;
	zbra__peer_event(c->lane, p->id, TP_PEER_DOWN);
}

/* A request failed (the provider saw the peer go), or silence: see fail_all. */
static void peer_fail(struct zbra_netcar *c, struct nc_peer *p, uint64_t now)
{
	if (p->state == NP_UP)
		fail_all(c, p, now + NC_RETRY_NS);
}

/* Connecting, with one comm of the pair and not the other. For a moment
 * that is normal: the peer calls connect and accept in its own time. Held
 * for peer_timeout it is a deadlock to break: our comm may lead to a
 * process that is gone (a connect to a stopped process completes in its
 * kernel), or the peer holds as up a send comm whose other end we closed
 * and, with nothing to send, never finds out, so it never connects again
 * (test_remote_net.sh, the restart: every call failed for 30 s). Closing
 * ours (no request is posted on it before the pair is up) makes such a
 * peer fail and connect again; ours is made again at once. */
static unsigned half_open(struct zbra_netcar *c, struct nc_peer *p, uint64_t now)
{
	if (!p->scomm && !p->rcomm) {
		p->half_since = 0;
		return 0;
	}
	if (!p->half_since) {
		p->half_since = now;
		return 0;
	}
	if (now - p->half_since < c->peer_timeout_ns)
		return 0;
	comms_close(c, p);
	p->half_since = 0;
	c->st.half_open++;
	return 1;
}

static unsigned conn_poll(struct zbra_netcar *c, struct nc_peer *p, uint64_t now)
{
	if (p->state == NP_DOWN && now < p->retry_at)
		return 0;
	int rc;
	if (!p->scomm && (rc = c->ops->connect(c->ctx, p->id, 0, &p->scomm)) != 0) {
		p->scomm = NULL;
		if (rc != -EAGAIN)
			p->retry_at = now + NC_RETRY_NS;
	}
	if (!p->rcomm && (rc = c->ops->accept(c->ctx, p->id, 0, &p->rcomm)) != 0) {
		p->rcomm = NULL;
		if (rc != -EAGAIN)
			p->retry_at = now + NC_RETRY_NS;
	}
	if (!p->scomm || !p->rcomm)
		return half_open(c, p, now);
	p->half_since = 0;
	p->state = NP_UP;
	p->ever_up = 1;
	p->epoch++;
	/* messages queued while connecting hold their credits already */
	p->credits = NC_WIN - (p->ua_tail - p->ua_head);
	p->consumed = 0;
	p->peer_max = 0;   /* learnt again (its config may have changed) */
	p->skip_len = 0;
	p->wait_since = 0;
	p->heard = p->ua_since = p->ka_sent = now;
	c->st.connects++;
	for (unsigned i = 0; i < NC_RSLOTS; i++)
		if (p->rs[i].state == RS_FREE && (rc = post_recv(c, p, i)) != 0) {
			peer_fail(c, p, now);
			return 1;
		}
	zbra__peer_event(c->lane, p->id, TP_PEER_UP);
	for (uint32_t k = p->sq_head; k != p->sq_tail; k++) {
		struct nc_sslot *s = &p->ss[k & (NC_SSLOTS - 1)];
		ZB_DASSERT(s->req == NULL);
		if ((rc = c->ops->isend(p->scomm, s->buf, s->n, NC_TAG, NULL, &s->req)) != 0) {
			s->req = NULL;
			peer_fail(c, p, now);
			return 1;
		}
	}
	return 1;
}

/* Silence: messages not credited and nothing at all heard from the peer
 * for peer_timeout (a peer that stopped, or a partition that keeps the
 * connection open) means it is lost, as with the transport. A receiver
 * that holds a delivery back (a full mailbox: no credits) says it is there
 * with a keepalive (credit 0) every peer_timeout / 4. */
static unsigned liveness(struct zbra_netcar *c, struct nc_peer *p, uint64_t now)
{
	uint64_t quiet = c->peer_timeout_ns;
	if ((p->pending || p->rx_stuck) && now - p->ka_sent >= quiet / 4) {
		int rc = tx_post(c, p, NCK_CREDIT, 0, 0, NULL, 0, 0, false);
		if (rc == 0)
			p->ka_sent = now;
		else if (rc != -EAGAIN) {
			peer_fail(c, p, now);
			return 1;
		}
	}
	/* judged only while a receive is posted: with every slot held by
	 * the lane's actors nothing from the peer can be read at all */
	if (p->ua_tail != p->ua_head && p->rq_tail != p->rq_head) {
		uint64_t since = p->heard > p->ua_since ? p->heard : p->ua_since;
		if (now - since >= quiet) {
			c->st.silent++;
			peer_fail(c, p, now);
			return 1;
		}
	}
	return 0;
}

/* Credits what the lane took from the peer since the last credit: the
 * peer's flow control and its acknowledgement (send_done 0) at once. */
static unsigned credit_flush(struct zbra_netcar *c, struct nc_peer *p, uint64_t now)
{
	int rc = tx_post(c, p, NCK_CREDIT, 0, p->consumed, NULL, 0, 0, false);
	if (rc == -EAGAIN)
		return 0;   /* no send slot: next time */
	if (rc) {
		peer_fail(c, p, now);
		return 1;
	}
	p->consumed = 0;
	return 1;
}

static unsigned nc_poll(void *car, uint64_t now)
{
	struct zbra_netcar *c = car;
	unsigned work = 0;
	c->now = now;
	/* Connection work (the provider's own progress — for tcp: accept and
	 * I/O on every comm, syscalls — and connect/accept of the peers not
	 * up) only while a peer is not connected, and then once per
	 * NC_CONNECT_POLL_NS: a configured node that never comes must not
	 * tax every poll. A connected comm progresses in its requests' test(). */
	bool conn_due = c->connecting && now >= c->conn_due;
	if (conn_due) {
		c->conn_due = now + NC_CONNECT_POLL_NS;
		if (c->ops->progress) {
			int n = c->ops->progress(c->ctx);
			work += n > 0 ? (unsigned)n : 0;
		}
	}
	unsigned connecting = 0;
	for (unsigned i = 0; i < CFG_MAX_NODES; i++) {
		struct nc_peer *p = c->peers[i];
		if (!p)
			continue;
		if (p->state != NP_UP) {
			if (conn_due || !c->connecting)
				work += conn_poll(c, p, now);
			if (p->state == NP_CONNECTING && p->wait_since &&
			    now - p->wait_since >= c->connect_timeout_ns) {
				/* never came within connect_timeout: what waits for
				 * it fails; later sends fail at once until it
				 * connects (as the transport's "down") */
				fail_all(c, p, now);
				work++;
			}
			if (p->state != NP_UP) {
				connecting++;
				continue;
			}
		}
		work += tx_poll(c, p, now);
		if (p->state == NP_UP)
			work += rx_poll(c, p, now);
		if (p->state == NP_UP)
			work += liveness(c, p, now);
		if (p->state == NP_UP && p->consumed)
			work += credit_flush(c, p, now);
		connecting += p->state != NP_UP;
	}
	c->connecting = connecting;
	return work;
}

/* The largest message the peer takes: ours until it refused one (REFUSE
 * says its max_message), then the smaller of the two. */
static size_t nc_max_to(void *car, uint16_t peer)
{
	struct zbra_netcar *c = car;
	const struct nc_peer *p = peer < CFG_MAX_NODES ? c->peers[peer] : NULL;
	if (!p)
		return 0;
	return p->peer_max && p->peer_max < c->max_message ? p->peer_max : c->max_message;
}

const struct zbra_car_ops zbra__net_car_ops = {
	.send = nc_send, .release = nc_release, .poll = nc_poll, .max_to = nc_max_to,
};

/* ---- create / destroy ----------------------------------------------------------- */

int zbra__netcar_create(const struct zb_config *cfg, const struct net_ops *ops,
			void *provider_arg, unsigned lane, uint64_t max_message,
			struct zbra_netcar **out, char *err, size_t errlen)
{
	ZB_ASSERT(cfg != NULL && ops != NULL && out != NULL);
	*out = NULL;
	if ((unsigned)cfg->transport.tcp_port + ZBRA_NET_PORT_OFFSET > 65535u) {
		snprintf(err, errlen, "[transport] tcp_port %u + %u is past 65535",
			 cfg->transport.tcp_port, ZBRA_NET_PORT_OFFSET);
		return -EINVAL;
	}
	struct zbra_netcar *c = calloc(1, sizeof(*c));
	if (!c) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	c->ops = ops;
	c->cfg = *cfg;
	c->cfg.transport.tcp_port = (uint16_t)(cfg->transport.tcp_port + ZBRA_NET_PORT_OFFSET);
	c->lane = lane;
	c->self = cfg->node.id;
	c->max_message = max_message;
	uint32_t cto = cfg->transport.connect_timeout_ms ? cfg->transport.connect_timeout_ms
							  : 60000;
	c->connect_timeout_ns = (uint64_t)cto * 1000000ull;
	uint32_t pto = cfg->transport.peer_timeout_ms ? cfg->transport.peer_timeout_ms : 5000;
	c->peer_timeout_ns = (uint64_t)pto * 1000000ull;
	c->connecting = 1;
	unsigned npeers = 0;
	for (unsigned i = 0; i < CFG_MAX_NODES; i++)
		npeers += cfg->peers[i].present && i != c->self;
	int rc = -ENOMEM;
	size_t per = (size_t)NC_RSLOTS * (NC_RX_OFF + NC_MSG + 8) + (size_t)NC_SSLOTS * NC_MSG;
	if (npeers && !(c->mem = zb_aligned_alloc(64, per * npeers + 64))) {
		snprintf(err, errlen, "out of memory for %u peers' slots", npeers);
		goto fail;
	}
	if (tp__arena_init(&c->arena, NULL, max_message + 64 * (size_t)TP_BLK) != 0) {
		snprintf(err, errlen, "cannot reserve a %llu-byte reassembly arena",
			 (unsigned long long)max_message);
		goto fail;
	}
	/* receive buffers: NC_RX_OFF + NC_MSG rounded up to 64 */
	size_t rstride = (NC_RX_OFF + NC_MSG + 63) & ~(size_t)63;
	uint8_t *m = c->mem;
	for (unsigned i = 0; i < CFG_MAX_NODES; i++) {
		if (!cfg->peers[i].present || i == c->self)
			continue;
		struct nc_peer *p = calloc(1, sizeof(*p));
		if (!p) {
			snprintf(err, errlen, "out of memory");
			goto fail;
		}
		c->peers[i] = p;
		p->id = (uint16_t)i;
		p->credits = NC_WIN;   /* messages may queue before the connection */
		for (unsigned k = 0; k < NC_RSLOTS; k++, m += rstride)
			p->rs[k].buf = m;
		for (unsigned k = 0; k < NC_SSLOTS; k++, m += NC_MSG)
			p->ss[k].buf = m;
		for (unsigned k = NC_BIGS; k-- > 0;) {
			p->bigs[k].next = p->bfree;
			p->bfree = &p->bigs[k];
		}
	}
	ZB_ASSERT(!c->mem || m <= c->mem + per * npeers + 64);
	struct net_init_args a = {.cfg = &c->cfg, .channels = 1, .provider_arg = provider_arg};
	if ((rc = ops->init(&a, &c->ctx)) != 0) {
		snprintf(err, errlen, "the %s provider did not start: %s", ops->name,
			 zb_strerror(rc));
		net_add_reason(ops, err, errlen);   /* which device, why */
		c->ctx = NULL;
		goto fail;
	}
	*out = c;
	return 0;
fail:
	zbra__netcar_destroy(c);
	return rc;
}

void zbra__netcar_destroy(struct zbra_netcar *c)
{
	if (!c)
		return;
	c->closing = true;
	for (unsigned i = 0; i < CFG_MAX_NODES; i++) {
		struct nc_peer *p = c->peers[i];
		if (!p)
			continue;
		if (c->ctx)
			peer_close(c, p);
		if (p->ls_ref)
			tp_ref_put(p->ls_ref);   /* the sender's buffer is its own again */
		free(p);
	}
	if (c->ctx)
		c->ops->fini(c->ctx);
	tp__arena_fini(&c->arena);
	free(c->mem);
	free(c);
}

void zbra__netcar_stats(const struct zbra_netcar *c, struct zbra_netcar_stats *out)
{
	ZB_ASSERT(out != NULL);
	if (c)
		*out = c->st;
	else
		memset(out, 0, sizeof(*out));
}
