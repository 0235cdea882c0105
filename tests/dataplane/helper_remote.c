/* helper_remote — a node hosting the actor runtime on its dataplane lcores
 * with remote routing (zbmd/remote.h), as `zbmd run` does, in one of two
 * roles:
 *
 *   helper_remote -c NODE.ini --serve IDS_FILE
 *       spawns the actors below, registers them by name, writes
 *       "name=0xACTORID" lines to IDS_FILE (then "end"), serves until
 *       SIGTERM/SIGINT, prints its counters and exits 0.
 *         sink  checks per-sender FIFO and content of T_DATA messages
 *         slow  the same, ~20 us per message (its mailbox fills up)
 *         echo  replies to every call with the request's payload
 *         hole  keeps call requests unanswered until T_FLUSH: late replies
 *
 *   helper_remote -c NODE.ini --drive IDS_FILE [--down-flag FILE]
 *         [--restart-flag FILE2] [--ghost NODE] [--senders K] [--count N]
 *         [--bench SECONDS]
 *       reads the ids (waiting for the file), then runs the scenarios and
 *       prints "CHECK ok|fail DESCRIPTION" lines, "FIGURE ..." lines and
 *       "DONE"; with --down-flag it then waits for FILE (the test stops
 *       the serving node meanwhile) and checks that messages to the stopped
 *       node come back as errors; with --restart-flag it then waits for
 *       FILE2 (the test has started the serving node again, which wrote a
 *       new IDS_FILE) and checks that calls and messages reach the new
 *       actors and that a call to the old echo's id fails (stale); with --ghost, first a call to node NODE (configured, never
 *       started) must fail after [transport] connect_timeout_ms while calls
 *       to the live node go on. Exit 0 when every check passed.
 *
 *   helper_remote -c NODE.ini --drive IDS_FILE --bench-only PINGS
 *         [--senders K<=6] [--count N]
 *       no scenarios: K sender actors send N messages of ACT_INLINE_MAX (64)
 *       bytes each to sink (every one checked: sender, sequence, content),
 *       then a pinger actor makes PINGS call_async round trips of 64 bytes
 *       to echo; prints "RESULT actor_rate_Mmsgs=..." and "RESULT
 *       actor_rtt_p50_us=... actor_rtt_p99_us=..." (make bench-transport).
 *
 *   helper_remote -c NODE.ini --serve IDS_FILE --defects size|first|restart
 *         [--link-file FILE]
 *       also spawns tally (tells every T_DATA's sender what it got), linker
 *       (traps exits) and an actor that exits at once (its id: "dead"), and
 *       writes their ids too; with --link-file, once FILE names an actor
 *       (written by the driver below), linker links to it.
 *   helper_remote -c NODE.ini --drive IDS_FILE --defects size
 *       no scenarios above but the remote-actor defect checks of a serving
 *       node with [transport] max_message_mb = 1 whose limit this node has
 *       learnt: calls to the exited actor fail promptly with
 *       ZB_ERR_STALE_ID; a 2 MiB buffer comes back as one UNDELIVERED
 *       -EMSGSIZE and the 3 small messages after it on the same pair are
 *       each received or reported undelivered (exactly one of the two);
 *       reserved tags to a remote actor are refused by the sender, and a
 *       transport message with two records node 2 refuses among three
 *       valid ones delivers those three (defects_tags).
 *   helper_remote -c NODE.ini --drive IDS_FILE --defects first --link-file F
 *       the same limit not learnt yet (nothing is sent to the serving node
 *       first): its linker links to a probe actor here (id written to F),
 *       whose first data to it is a 2 MiB buffer: UNDELIVERED -EMSGSIZE,
 *       and both sides agree about the link afterwards.
 *   helper_remote -c NODE.ini --drive IDS_FILE --defects restart
 *         --restart-flag F
 *       two lanes: a message on each to the serving node, "PHASE restart",
 *       then (F exists: the serving node was killed and started again) a
 *       link to its new tally made over lane 0 after lane 0 and before
 *       lane 1 saw the restart survives lane 1's report (defects_restart).
 */
#include "zbmd/actors.h"
#include "zbmd/common.h"
#include "zbmd/config.h"
#include "zbmd/dataplane.h"
#include "zbmd/remote.h"
#include "zbmd/transport.h"
#include "det_rand.h"
#include "node_helper.h"

#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
	T_DATA = 1, T_REPORT, T_ECHO, T_FLUSH, T_HOLD, T_GO, T_CONT, T_PING,
};

#define MAX_SENDERS 64
#define INLINE_ONLY_FROM 48   /* senders 48..63 send inline payloads only */
#define FIXED_FROM 58         /* senders 58..63: ACT_INLINE_MAX bytes each */
#define RTT_MAX 1000000       /* round trips sampled by --bench-only */
#define BUF_MAGIC 0x7a627261u
#define NBUFS 32
#define BUF_BYTES 4096

static struct zb_config cfg;
static struct act_runtime *rt;
static volatile sig_atomic_t stop;
static int failures;

/* Message seq of sender s: every 5th is a buffer (sizes across the
 * one-message / two-message boundary), the rest inline of 16..40 bytes. */
static uint32_t data_len(uint32_t s, uint32_t seq, bool *is_buf)
{
	uint64_t r = dr_mix64((uint64_t)s << 32 | seq);
	*is_buf = s < INLINE_ONLY_FROM && seq % 5 == 4;
	if (s >= FIXED_FROM)
		return ACT_INLINE_MAX;
	if (*is_buf)
		return 16 + (uint32_t)(r % (BUF_BYTES - 16));
	return 16 + (uint32_t)(r % (ACT_INLINE_MAX - 16 + 1));
}

static void fill(uint8_t *b, uint32_t s, uint32_t seq, uint32_t len)
{
	uint32_t h[4] = {BUF_MAGIC, s, seq, len};
	memcpy(b, h, sizeof(h));
	if (s >= FIXED_FROM && len == ACT_INLINE_MAX) {
		/* the rate benchmark's messages: a per-sender pattern and the
		 * sequence number again at the end (cheap to make and check,
		 * so that the figure is the messaging's, not this helper's) */
		static const char pat[] = "zbmd remote actor benchmark message body....";
		_Static_assert(sizeof(pat) - 1 >= ACT_INLINE_MAX - 20, "pattern size");
		memcpy(b + sizeof(h), pat, ACT_INLINE_MAX - sizeof(h) - 4);
		b[sizeof(h)] = (uint8_t)s;
		uint32_t t = seq ^ 0x5a5aa5a5u;
		memcpy(b + ACT_INLINE_MAX - 4, &t, 4);
		return;
	}
	uint64_t x = dr_mix64((uint64_t)s << 32 | seq) | 1;
	for (uint32_t i = sizeof(h); i < len; i++)
		b[i] = (uint8_t)dr_xorshift64(&x);
}

/* content checksum (order-independent sum over messages) */
static uint64_t csum(const uint8_t *b, uint32_t len)
{
	uint64_t c = len;
	for (uint32_t i = 0; i < len; i++)
		c = c * 1099511628211ull + b[i];
	return dr_mix64(c);
}

/* ---- serving actors ------------------------------------------------------- */

struct sink {
	uint32_t expect[MAX_SENDERS];
	uint64_t received, sum;
	uint32_t order, bad, bufs;
	uint32_t delay_us;
	uint8_t want[BUF_BYTES];
};
static struct sink sink_st, slow_st;

struct report {
	uint64_t received, sum;
	uint32_t order, bad, bufs, deferred;
	uint32_t malformed;   /* the serving node's zbra_stats.bad */
};

static int sink_init(struct act_ctx *ctx, void *arg)
{
	*(struct sink **)act_state(ctx) = arg;
	return 0;
}

static int sink_handle(struct act_ctx *ctx, struct act_msg *m)
{
	struct sink *k = *(struct sink **)act_state(ctx);
	struct act_runtime *r = act_ctx_runtime(ctx);
	if (m->tag == T_REPORT) {
		struct zbra_stats zs;
		zbra_get_stats(&zs);
		struct report rep = {k->received, k->sum, k->order, k->bad,
				     k->bufs, (uint32_t)zs.deferred, (uint32_t)zs.bad};
		struct act_msg *re = act_msg_alloc(r);
		if (re) {
			act_msg_set_bytes(re, &rep, sizeof(rep));
			if (act_reply(r, m, re))
				act_msg_free(r, re);
		}
		return 0;
	}
	if (m->tag != T_DATA)
		return 0;
	const uint8_t *p = NULL;
	uint32_t len = 0;
	if (m->kind == ACT_PL_INLINE) {
		p = m->u.bytes;
		len = m->len;
	} else if (m->kind == ACT_PL_BUF) {
		p = (const uint8_t *)m->u.buf.buf->data + m->u.buf.off;
		len = (uint32_t)m->u.buf.len;
		k->bufs++;
	}
	uint32_t h[4] = {0};
	if (len >= sizeof(h))
		memcpy(h, p, sizeof(h));
	bool isbuf;
	if (!p || h[0] != BUF_MAGIC || h[1] >= MAX_SENDERS || h[3] != len ||
	    len != data_len(h[1], h[2], &isbuf) ||
	    isbuf != (m->kind == ACT_PL_BUF)) {
		k->bad++;
		return 0;
	}
	fill(k->want, h[1], h[2], len);
	if (memcmp(k->want, p, len) != 0) {
		k->bad++;
		return 0;
	}
	if (h[2] != k->expect[h[1]])
		k->order++;   /* duplicate, lost or reordered */
	k->expect[h[1]] = h[2] + 1;
	k->received++;
	if (h[1] < FIXED_FROM)   /* fixed ones: the memcmp above checked them */
		k->sum += csum(p, len);
	if (k->delay_us) {
		uint64_t until = zb_now_ns() + k->delay_us * 1000ull;
		while (zb_now_ns() < until)
			;
		/* one message per loop iteration: the lcore goes back to the
		 * transport, which delivers faster than this: the mailbox fills */
		act_consume(ctx, 1u << 30);
	}
	return 0;
}

static const struct act_behaviour sink_beh = {
	.name = "sink", .state_size = sizeof(void *),
	.init = sink_init, .handle = sink_handle,
};

static int echo_handle(struct act_ctx *ctx, struct act_msg *m)
{
	struct act_runtime *r = act_ctx_runtime(ctx);
	if (!m->ref)
		return 0;
	struct act_msg *re = act_msg_alloc(r);
	if (!re)
		return 0;
	re->tag = m->tag;
	if (m->kind == ACT_PL_INLINE) {
		act_msg_set_bytes(re, m->u.bytes, m->len);
	} else if (m->kind == ACT_PL_BUF) {
		act_buf_ref(m->u.buf.buf);   /* zero-copy echo of the buffer */
		act_msg_set_buf(re, m->u.buf.buf, m->u.buf.off, m->u.buf.len);
	} else if (m->kind == ACT_PL_RDMA) {
		act_msg_set_rdma(re, m->u.rdma.node, m->u.rdma.addr,
				 m->u.rdma.rkey, m->u.rdma.len);
	} else if (m->kind == ACT_PL_GPU) {
		act_msg_set_gpu(re, m->u.gpu.backend, m->u.gpu.device,
				m->u.gpu.ptr, m->u.gpu.len);
	}
	if (act_reply(r, m, re))
		act_msg_free(r, re);
	return 0;
}

static const struct act_behaviour echo_beh = {
	.name = "echo", .handle = echo_handle,
};

#define HOLD_MAX 64
struct hole { struct act_msg *held[HOLD_MAX]; uint32_t n; };
static struct hole hole_st;

static int hole_handle(struct act_ctx *ctx, struct act_msg *m)
{
	struct act_runtime *r = act_ctx_runtime(ctx);
	struct hole *h = &hole_st;
	if (m->tag == T_HOLD && m->ref && h->n < HOLD_MAX) {
		act_msg_take(ctx, m);
		h->held[h->n++] = m;
		return 0;
	}
	if (m->tag == T_FLUSH) {
		for (uint32_t i = 0; i < h->n; i++) {
			struct act_msg *re = act_msg_alloc(r);
			if (re && act_reply(r, h->held[i], re))
				act_msg_free(r, re);
			act_msg_free(r, h->held[i]);
		}
		h->n = 0;
	}
	return 0;
}

static const struct act_behaviour hole_beh = {
	.name = "hole", .handle = hole_handle,
};

/* ---- serving actors of the defect scenarios (--defects) --------------------- */

#define PROBE_MAGIC 0x7a627073u   /* a probe message: {PROBE_MAGIC, seq} */

/* tally: every T_DATA it receives is told back to its sender (a message
 * from node 2 to node 1, so nothing more travels on the sender's stream
 * towards node 2) as T_REPORT {seq, kind, len}: seq of an inline probe
 * message, UINT32_MAX for anything else. */
static int tally_handle(struct act_ctx *ctx, struct act_msg *m)
{
	struct act_runtime *r = act_ctx_runtime(ctx);
	if (m->tag != T_DATA)
		return 0;
	uint32_t v[3] = {UINT32_MAX, m->kind, 0};
	if (m->kind == ACT_PL_INLINE && m->len == 8) {
		uint32_t h[2];
		memcpy(h, m->u.bytes, sizeof(h));
		if (h[0] == PROBE_MAGIC)
			v[0] = h[1];
		v[2] = m->len;
	} else if (m->kind == ACT_PL_BUF) {
		v[2] = (uint32_t)m->u.buf.len;
	}
	if (m->from != ACT_ID_NONE)
		act_tell(r, m->from, T_REPORT, v, sizeof(v));
	return 0;
}

static const struct act_behaviour tally_beh = {
	.name = "tally", .handle = tally_handle,
};

/* linker (traps exits): T_GO {act_id}: links to that (remote) actor and
 * tells it T_ECHO {rc}; a refused link (the session may not be up yet) is
 * left to serve() to ask again (linker_rc). An EXIT it traps is told to the
 * linked actor as T_FLUSH {reason} (it may not arrive: informational; the
 * driver's actor learns it that way). */
static _Atomic int linker_rc = 1;   /* 1: not tried yet */
static act_id linker_peer;

static int linker_handle(struct act_ctx *ctx, struct act_msg *m)
{
	struct act_runtime *r = act_ctx_runtime(ctx);
	if (m->tag == T_GO && m->kind == ACT_PL_INLINE && m->len == sizeof(act_id)) {
		act_id to;
		memcpy(&to, m->u.bytes, sizeof(to));
		int rc = act_link(ctx, to);
		if (rc == 0) {
			linker_peer = to;
			act_tell(r, to, T_ECHO, &rc, sizeof(rc));
		}
		atomic_store(&linker_rc, rc);
		return 0;
	}
	if (m->tag == ACT_TAG_EXIT) {
		int32_t why = act_msg_reason(m);
		printf("# linker: EXIT from 0x%016llx reason %d (%s)\n",
		       (unsigned long long)m->from, why, act_reason_name(why));
		fflush(stdout);
		if (linker_peer)
			act_tell(r, linker_peer, T_FLUSH, &why, sizeof(why));
	}
	return 0;
}

static const struct act_behaviour linker_beh = {
	.name = "linker", .handle = linker_handle,
};

/* ---- driving actors ------------------------------------------------------- */

struct sbuf {
	struct act_buf b;
	_Atomic int busy;
	uint8_t data[BUF_BYTES];
};

struct sender {
	uint32_t idx, count, next;
	act_id to;
	uint64_t full;       /* backpressure seen */
	int err;
	struct sbuf bufs[NBUFS];
};
static struct sender *senders;
static _Atomic uint32_t senders_done;

static void sbuf_release(struct act_buf *b, void *ctx)
{
	(void)b;
	atomic_store_explicit(&((struct sbuf *)ctx)->busy, 0, memory_order_release);
}

static struct sbuf *sbuf_get(struct sender *s)
{
	for (int i = 0; i < NBUFS; i++) {
		struct sbuf *b = &s->bufs[i];
		if (!atomic_load_explicit(&b->busy, memory_order_acquire)) {
			atomic_store_explicit(&b->busy, 1, memory_order_relaxed);
			atomic_store_explicit(&b->b.refs, 1, memory_order_relaxed);
			b->b.data = b->data;
			b->b.release = sbuf_release;
			b->b.ctx = b;
			return b;
		}
	}
	return NULL;
}

static int sender_init(struct act_ctx *ctx, void *arg)
{
	*(struct sender **)act_state(ctx) = arg;
	return 0;
}

static void self_cont(struct act_ctx *ctx)
{
	act_tell(act_ctx_runtime(ctx), act_self(ctx), T_CONT, NULL, 0);
	act_yield(ctx);
}

static int sender_handle(struct act_ctx *ctx, struct act_msg *m)
{
	struct sender *s = *(struct sender **)act_state(ctx);
	struct act_runtime *r = act_ctx_runtime(ctx);
	if (m->tag != T_GO && m->tag != T_CONT)
		return 0;
	for (int burst = 0; burst < 64 && s->next < s->count; burst++) {
		bool isbuf;
		uint32_t len = data_len(s->idx, s->next, &isbuf);
		struct act_msg *d = act_msg_alloc(r);
		if (!d) {
			self_cont(ctx);
			return 0;
		}
		d->tag = T_DATA;
		struct sbuf *b = NULL;
		if (isbuf) {
			if (!(b = sbuf_get(s))) {
				act_msg_free(r, d);
				self_cont(ctx);
				return 0;
			}
			fill(b->data, s->idx, s->next, len);
			b->b.len = len;
			act_msg_set_buf(d, &b->b, 0, len);
		} else {
			uint8_t tmp[ACT_INLINE_MAX];
			fill(tmp, s->idx, s->next, len);
			act_msg_set_bytes(d, tmp, len);
		}
		int rc = act_send(r, s->to, d);
		if (rc) {
			act_msg_free(r, d);   /* drops the buffer ref too */
			if (rc == ZB_ERR_MAILBOX_FULL) {
				s->full++;
				self_cont(ctx);
				return 0;
			}
			s->err = rc;
			s->next = s->count;
			break;
		}
		s->next++;
	}
	if (s->next < s->count) {
		self_cont(ctx);
		return 0;
	}
	atomic_fetch_add(&senders_done, 1);
	return 0;
}

static const struct act_behaviour sender_beh = {
	.name = "sender", .state_size = sizeof(void *),
	.init = sender_init, .handle = sender_handle,
};

/* pinger: call_async round trips to echo until `until_ns`; or one call to
 * hole (timeout expected, then the late reply must be dropped); or a plain
 * send to a stopped node (ACT_TAG_UNDELIVERED expected). */
struct pinger {
	act_id to;
	uint64_t until_ns, timeout_ns;
	uint32_t tag;
	uint32_t len;        /* request bytes (>= 8; 0: 8) */
	uint32_t *rtt_ns;    /* when set: each round trip, up to max_trips */
	uint64_t max_trips, sent_ns;
	_Atomic uint64_t trips, timeouts, replies, undelivered, other;
	_Atomic int finished;
	int reason;
	int refused;         /* act_call_async itself failed */
};

/* request (and reply) bytes: the trip number, padded to p->len */
static uint32_t ping_len(const struct pinger *p)
{
	return p->len > sizeof(uint64_t) ? p->len : sizeof(uint64_t);
}

static int pinger_init(struct act_ctx *ctx, void *arg)
{
	*(struct pinger **)act_state(ctx) = arg;
	return 0;
}

static void ping_once(struct act_ctx *ctx, struct pinger *p)
{
	struct act_runtime *r = act_ctx_runtime(ctx);
	struct act_msg *q = act_msg_alloc(r);
	uint64_t ref;
	if (!q) {
		atomic_store(&p->finished, -ENOBUFS);
		return;
	}
	uint64_t n = atomic_load(&p->trips);
	uint8_t req[ACT_INLINE_MAX] = {0};
	memcpy(req, &n, sizeof(n));
	act_msg_set_bytes(q, req, ping_len(p));
	q->tag = p->tag;
	p->sent_ns = zb_now_ns();
	int rc = act_call_async(ctx, p->to, q, p->timeout_ns, &ref);
	if (rc) {
		act_msg_free(r, q);
		p->reason = rc;
		p->refused = 1;
		atomic_store(&p->finished, 1);
	}
}

static int pinger_handle(struct act_ctx *ctx, struct act_msg *m)
{
	struct pinger *p = *(struct pinger **)act_state(ctx);
	struct act_runtime *r = act_ctx_runtime(ctx);
	switch (m->tag) {
	case T_GO:
		if (p->tag == T_DATA) {   /* a plain send */
			struct act_msg *d = act_msg_alloc(r);
			int rc = d ? act_send(r, p->to, d) : -ENOBUFS;
			if (rc) {
				if (d)
					act_msg_free(r, d);
				p->reason = rc;
				p->refused = 1;
				atomic_store(&p->finished, 1);
			}
			return 0;
		}
		ping_once(ctx, p);
		return 0;
	case ACT_TAG_TIMEOUT:
		atomic_fetch_add(&p->timeouts, 1);
		atomic_store(&p->finished, 1);
		return 0;
	case ACT_TAG_UNDELIVERED:
		atomic_fetch_add(&p->undelivered, 1);
		p->reason = act_msg_reason(m);
		atomic_store(&p->finished, 1);
		return 0;
	default:
		break;
	}
	if (!(m->flags & ACT_MF_REPLY)) {
		atomic_fetch_add(&p->other, 1);
		return 0;
	}
	atomic_fetch_add(&p->replies, 1);
	uint64_t n = 0, now = zb_now_ns();
	if (m->kind == ACT_PL_INLINE && m->len == ping_len(p))
		memcpy(&n, m->u.bytes, sizeof(n));
	if (n != atomic_load(&p->trips)) {
		atomic_fetch_add(&p->other, 1);
		atomic_store(&p->finished, 1);
		return 0;
	}
	if (p->rtt_ns && n < p->max_trips)
		p->rtt_ns[n] = (uint32_t)(now - p->sent_ns);
	atomic_fetch_add(&p->trips, 1);
	if (p->max_trips ? n + 1 < p->max_trips : now < p->until_ns)
		ping_once(ctx, p);
	else
		atomic_store(&p->finished, 1);
	return 0;
}

static const struct act_behaviour pinger_beh = {
	.name = "pinger", .state_size = sizeof(void *),
	.init = pinger_init, .handle = pinger_handle,
};

/* ---- malformed input: raw transport messages on the remote streams ---------- */

static _Atomic int inject_go, inject_done;
static uint16_t inject_peer;

/* --defects size: when asked (inject_batch_go), lane 0's poller sends one
 * transport message of five records from inject_from to inject_to (the
 * tally): probe messages seq 5, 6 and 7 with a record of a reserved tag
 * (ACT_TAG_DOWN) and one to another node's actor between them, as a peer's
 * lane coalesces the records of several pairs (static: the carrier may
 * still read it after zbra_raw_send returns). */
static _Atomic int inject_batch_go, inject_batch_done;
static act_id inject_from, inject_to;

static size_t rec_put(uint8_t *p, uint32_t tag, act_id from, act_id to, uint32_t seq)
{
	uint32_t magic = 0x5a425241u, v[2] = {PROBE_MAGIC, seq};
	memset(p, 0, ZBRA_HDR_LEN);
	memcpy(p, &magic, 4);
	p[4] = 1;                          /* version */
	p[5] = ACT_PL_INLINE;
	p[7] = sizeof(v);                  /* inline length */
	memcpy(p + 8, &tag, 4);
	memcpy(p + 16, &from, 8);          /* struct zbra_hdr: from at 16 */
	memcpy(p + 24, &to, 8);
	memcpy(p + ZBRA_HDR_LEN, v, sizeof(v));
	return ZBRA_HDR_LEN + sizeof(v);
}

static unsigned batch_injector(uint64_t now_tsc)
{
	static uint8_t msg[5 * (ZBRA_HDR_LEN + 8)];
	size_t n = 0;
	act_id elsewhere = act_id_make((uint16_t)(act_id_node(inject_to) + 1),
				       act_id_slot(inject_to), act_id_gen(inject_to));
	n += rec_put(msg + n, T_DATA, inject_from, inject_to, 5);
	n += rec_put(msg + n, ACT_TAG_DOWN, inject_from, inject_to, 100);
	n += rec_put(msg + n, T_DATA, inject_from, inject_to, 6);
	n += rec_put(msg + n, T_DATA, inject_from, elsewhere, 101);
	n += rec_put(msg + n, T_DATA, inject_from, inject_to, 7);
	unsigned first;
	zbra_streams(&first);
	if (zbra_raw_send(act_id_node(inject_to), (uint16_t)first, msg, n,
			  dp_now_ns(now_tsc)) != 0)
		return 0;   /* again next time */
	atomic_store(&inject_batch_done, 1);
	return 1;
}

/* Lane 0's poller: when asked, sends one of each malformed message to the
 * peer through lane 0's carrier (only from its lcore), or the batch above. */
static unsigned injector(void *arg, uint64_t now_tsc)
{
	(void)arg;
	if (atomic_load_explicit(&inject_batch_go, memory_order_acquire) &&
	    !atomic_load(&inject_batch_done))
		return batch_injector(now_tsc);
	if (!atomic_load_explicit(&inject_go, memory_order_acquire) ||
	    atomic_load(&inject_done))
		return 0;
	static uint8_t msgs[8][ZBRA_HDR_LEN + 8];
	static const uint32_t lens[8] = {10, ZBRA_HDR_LEN, ZBRA_HDR_LEN,
					 ZBRA_HDR_LEN + 4, ZBRA_HDR_LEN,
					 ZBRA_HDR_LEN, ZBRA_HDR_LEN, ZBRA_HDR_LEN + 8};
	/* a valid header to node 2's slot 1 (kind NONE), then broken copies */
	uint8_t good[ZBRA_HDR_LEN] = {0};
	uint32_t magic = 0x5a425241u, tag = 1;
	uint64_t to = act_id_make(inject_peer, 1, 1);
	memcpy(good, &magic, 4);
	good[4] = 1;                       /* version */
	memcpy(good + 8, &tag, 4);
	memcpy(good + 24, &to, 8);     /* struct zbra_hdr: to at 24 */
	for (int i = 0; i < 8; i++)
		memcpy(msgs[i], good, sizeof(good));
	msgs[1][0] ^= 0xff;                /* bad magic */
	msgs[2][5] = 9;                    /* unknown payload kind */
	msgs[3][5] = ACT_PL_INLINE;        /* inline length 0, 4 bytes follow */
	msgs[4][4] = 7;                    /* unknown version */
	uint64_t other = act_id_make((uint16_t)(inject_peer + 1), 1, 1);
	memcpy(msgs[5] + 24, &other, 8);   /* not for this node */
	uint32_t sys = ACT_TAG_EXIT;
	memcpy(msgs[6] + 8, &sys, 4);      /* a reserved tag */
	msgs[7][5] = ACT_PL_NONE;          /* NONE with 8 trailing bytes */
	unsigned first, ns = zbra_streams(&first);
	(void)ns;
	for (int i = 0; i < 8; i++)
		if (zbra_raw_send(inject_peer, (uint16_t)first, msgs[i], lens[i],
				  dp_now_ns(now_tsc)) != 0)
			return 0;   /* retried whole next time: not reached in tests */
	atomic_store(&inject_done, 1);
	return 8;
}

/* ---- driver ------------------------------------------------------------------ */

static void check(bool cond, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void check(bool cond, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	printf("CHECK %s ", cond ? "ok" : "fail");
	vprintf(fmt, ap);
	printf("\n");
	fflush(stdout);
	va_end(ap);
	failures += !cond;
}

static void msleep(unsigned ms) { usleep(ms * 1000u); }

/* Polls flag (an atomic int) until nonzero or timeout; true when set. */
static bool wait_flag(_Atomic int *flag, uint64_t timeout_ms)
{
	uint64_t end = zb_now_ns() + timeout_ms * 1000000ull;
	while (!atomic_load(flag) && zb_now_ns() < end)
		msleep(1);
	return atomic_load(flag) != 0;
}

static int call_report(act_id to, struct report *rep)
{
	struct act_msg *q = act_msg_alloc(rt), *re = NULL;
	if (!q)
		return -ENOBUFS;
	q->tag = T_REPORT;
	int rc = act_call(rt, to, q, 2000000000ull, &re);
	if (rc)
		return rc;
	if (re->kind != ACT_PL_INLINE || re->len != sizeof(*rep))
		rc = -EPROTO;
	else
		memcpy(rep, re->u.bytes, sizeof(*rep));
	act_msg_free(rt, re);
	return rc;
}

/* Sends K*N messages to `to` from K actors; waits until `to` reports all.
 * Returns elapsed ns (0 on failure) and fills *rep. */
static uint64_t run_senders(act_id to, uint32_t first, uint32_t k, uint32_t n,
			    struct report *rep, uint64_t *full, uint64_t *sum)
{
	struct report base;
	if (call_report(to, &base) != 0)
		return 0;
	/* sender indices are never reused (the sinks' per-sender
	 * expectations go on): callers give disjoint ranges */
	uint32_t next_idx = first;
	if (next_idx + k > MAX_SENDERS)
		return 0;
	atomic_store(&senders_done, 0);
	act_id ids[MAX_SENDERS];
	*sum = 0;
	for (uint32_t i = 0; i < k; i++) {
		struct sender *s = &senders[next_idx + i];
		memset(s, 0, sizeof(*s));
		s->idx = next_idx + i;
		s->count = n;
		s->to = to;
		for (uint32_t q = 0; q < n && s->idx < FIXED_FROM; q++) {
			bool isbuf;
			uint32_t len = data_len(s->idx, q, &isbuf);
			uint8_t b[BUF_BYTES];
			fill(b, s->idx, q, len);
			*sum += csum(b, len);
		}
		struct act_spawn_opts o = {.home = i % dp_lcore_count() + 1};
		if (act_spawn_opt(rt, &sender_beh, s, &o, &ids[i]) != 0)
			return 0;
	}
	struct sender *round = &senders[next_idx];
	next_idx += k;
	uint64_t t0 = zb_now_ns();
	for (uint32_t i = 0; i < k; i++)
		act_tell(rt, ids[i], T_GO, NULL, 0);
	uint64_t end = t0 + 60000000000ull;
	while (zb_now_ns() < end) {
		if (call_report(to, rep) == 0 &&
		    rep->received - base.received + rep->bad - base.bad +
				    rep->order - base.order >= (uint64_t)k * n &&
		    atomic_load(&senders_done) == k)
			break;
		msleep(2);
	}
	uint64_t dt = zb_now_ns() - t0;
	*full = 0;
	for (uint32_t i = 0; i < k; i++) {
		*full += round[i].full;
		if (round[i].err)
			printf("# sender %u: %s\n", i, zb_strerror(round[i].err));
		act_exit_signal(rt, ids[i], ACT_KILL);
	}
	rep->received -= base.received;
	rep->sum -= base.sum;
	rep->order -= base.order;
	rep->bad -= base.bad;
	rep->bufs -= base.bufs;
	return dt;
}

struct ids { act_id sink, slow, echo, hole, tally, linker, dead; };

static int read_ids(const char *path, struct ids *ids, unsigned wait_s)
{
	uint64_t end = zb_now_ns() + wait_s * 1000000000ull;
	for (;;) {
		FILE *f = fopen(path, "r");
		char line[128], name[32];
		unsigned long long v;
		bool end_seen = false;
		memset(ids, 0, sizeof(*ids));
		while (f && fgets(line, sizeof(line), f)) {
			if (strncmp(line, "end", 3) == 0)
				end_seen = true;
			else if (sscanf(line, "%31[a-z]=%llx", name, &v) == 2) {
				if (!strcmp(name, "sink")) ids->sink = v;
				if (!strcmp(name, "slow")) ids->slow = v;
				if (!strcmp(name, "echo")) ids->echo = v;
				if (!strcmp(name, "hole")) ids->hole = v;
				/* --serve --defects only */
				if (!strcmp(name, "tally")) ids->tally = v;
				if (!strcmp(name, "linker")) ids->linker = v;
				if (!strcmp(name, "dead")) ids->dead = v;
			}
		}
		if (f)
			fclose(f);
		if (end_seen && ids->sink && ids->slow && ids->echo && ids->hole)
			return 0;
		if (zb_now_ns() > end)
			return -ETIMEDOUT;
		msleep(50);
	}
}

static int echo_call(act_id echo, uint64_t v, uint64_t timeout_ns, uint64_t *back)
{
	struct act_msg *q = act_msg_alloc(rt), *re = NULL;
	if (!q)
		return -ENOBUFS;
	q->tag = T_ECHO;
	act_msg_set_bytes(q, &v, sizeof(v));
	int rc = act_call(rt, echo, q, timeout_ns, &re);
	if (rc)
		return rc;
	*back = ~v;
	if (re->kind == ACT_PL_INLINE && re->len == sizeof(v))
		memcpy(back, re->u.bytes, sizeof(v));
	act_msg_free(rt, re);
	return 0;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* --bench-only: the figures make bench-transport reports for actors (64-byte
 * messages delivered to an actor on the other node; actor call round
 * trips), every message checked. */
static void bench_only(const struct ids *id, uint32_t k, uint32_t n, uint32_t pings)
{
	struct report rep;
	uint64_t full = 0, sum = 0;
	uint64_t dt = run_senders(id->sink, FIXED_FROM, k, n, &rep, &full, &sum);
	check(dt && rep.received == (uint64_t)k * n && rep.order == 0 && rep.bad == 0,
	      "%u x %u messages of %u bytes reached an actor on node %u in order, intact (received=%lu order=%u bad=%u)",
	      k, n, ACT_INLINE_MAX, act_id_node(id->sink), (unsigned long)rep.received,
	      rep.order, rep.bad);
	if (dt)
		printf("RESULT actor_rate_Mmsgs=%.3f msgs=%lu seconds=%.3f bytes=%u senders=%u mailbox_full=%lu\n",
		       (double)rep.received / ((double)dt / 1e9) / 1e6,
		       (unsigned long)rep.received, (double)dt / 1e9, ACT_INLINE_MAX, k,
		       (unsigned long)full);
	static struct pinger pg;
	act_id pid;
	memset(&pg, 0, sizeof(pg));
	pg.to = id->echo;
	pg.tag = T_PING;
	pg.timeout_ns = 1000000000ull;
	pg.len = ACT_INLINE_MAX;
	pg.max_trips = pings;
	pg.rtt_ns = calloc(pings, sizeof(*pg.rtt_ns));
	if (!pg.rtt_ns || act_spawn(rt, &pinger_beh, &pg, &pid) != 0) {
		check(false, "pinger started");
		return;
	}
	act_tell(rt, pid, T_GO, NULL, 0);
	wait_flag(&pg.finished, 120000);
	uint64_t trips = atomic_load(&pg.trips);
	check(trips == pings && !pg.refused && atomic_load(&pg.timeouts) == 0,
	      "%lu of %u call_async round trips of %u bytes to an actor on node %u answered",
	      (unsigned long)trips, pings, ACT_INLINE_MAX, act_id_node(id->echo));
	if (trips == pings) {
		qsort(pg.rtt_ns, pings, sizeof(*pg.rtt_ns), cmp_u32);
		printf("RESULT actor_rtt_p50_us=%.2f actor_rtt_p99_us=%.2f actor_rtt_min_us=%.2f trips=%u\n",
		       pg.rtt_ns[pings / 2] / 1e3, pg.rtt_ns[(uint64_t)pings * 99 / 100] / 1e3,
		       pg.rtt_ns[0] / 1e3, pings);
	}
	act_exit_signal(rt, pid, ACT_KILL);
	free(pg.rtt_ns);
}

/* ---- the defect scenarios (--defects size|first) ------------------------------- */

/* probe (node 1, traps exits): on T_GO {op}: op 0 sends its 2 MiB buffer
 * (big) to `to`, op k > 0 the inline probe message {PROBE_MAGIC, k}; counts
 * what comes back: ACT_TAG_UNDELIVERED (reason of each), tally's T_REPORTs
 * (the seqs received there, in order), trapped EXITs, and the linker's
 * T_ECHO (linked) and T_FLUSH (it got an EXIT) messages. */
#define BIG_BYTES (2u << 20)
struct probe {
	act_id to;
	struct sbuf *big;
	uint8_t *big_data;
	_Atomic uint32_t und, nrecv, exits, linked, peer_exits, sent;
	int und_reason[8];
	uint32_t recv[16];
	int exit_reason, peer_exit_reason, send_rc, link_rc;
};
#define PROBE_LINK UINT32_MAX   /* T_GO op: link to `to` (link_rc) */

static int probe_init(struct act_ctx *ctx, void *arg)
{
	*(struct probe **)act_state(ctx) = arg;
	return 0;
}

static int probe_handle(struct act_ctx *ctx, struct act_msg *m)
{
	struct probe *p = *(struct probe **)act_state(ctx);
	struct act_runtime *r = act_ctx_runtime(ctx);
	switch (m->tag) {
	case T_GO: {
		uint32_t op = 0;
		if (m->kind == ACT_PL_INLINE && m->len == sizeof(op))
			memcpy(&op, m->u.bytes, sizeof(op));
		if (op == PROBE_LINK) {
			p->link_rc = act_link(ctx, p->to);
			return 0;
		}
		struct act_msg *d = act_msg_alloc(r);
		if (!d) {
			p->send_rc = -ENOBUFS;
			return 0;
		}
		d->tag = T_DATA;
		if (op == 0) {
			struct sbuf *h = p->big;
			atomic_store(&h->busy, 1);
			atomic_store(&h->b.refs, 1);
			h->b.data = p->big_data;
			h->b.len = BIG_BYTES;
			h->b.release = sbuf_release;
			h->b.ctx = h;
			act_msg_set_buf(d, &h->b, 0, BIG_BYTES);
		} else {
			uint32_t v[2] = {PROBE_MAGIC, op};
			act_msg_set_bytes(d, v, sizeof(v));
		}
		int rc = act_send(r, p->to, d);
		if (rc)
			act_msg_free(r, d);
		p->send_rc = rc;
		atomic_fetch_add(&p->sent, 1);
		return 0;
	}
	case ACT_TAG_UNDELIVERED: {
		uint32_t i = atomic_load(&p->und);
		if (i < 8)
			p->und_reason[i] = act_msg_reason(m);
		atomic_store(&p->und, i + 1);
		return 0;
	}
	case ACT_TAG_EXIT:
		p->exit_reason = act_msg_reason(m);
		atomic_fetch_add(&p->exits, 1);
		return 0;
	case T_REPORT:
		if (m->kind == ACT_PL_INLINE && m->len == 3 * sizeof(uint32_t)) {
			uint32_t v[3], i = atomic_load(&p->nrecv);
			memcpy(v, m->u.bytes, sizeof(v));
			if (i < 16)
				p->recv[i] = v[0];
			atomic_store(&p->nrecv, i + 1);
		}
		return 0;
	case T_ECHO:
		atomic_store(&p->linked, 1);
		return 0;
	case T_FLUSH:
		if (m->kind == ACT_PL_INLINE && m->len == sizeof(int32_t))
			memcpy(&p->peer_exit_reason, m->u.bytes, sizeof(int32_t));
		atomic_fetch_add(&p->peer_exits, 1);
		return 0;
	default:
		return 0;
	}
}

static const struct act_behaviour probe_beh = {
	.name = "probe", .state_size = sizeof(void *),
	.init = probe_init, .handle = probe_handle,
};

/* The probes of this run: their actors hold them until the runtime is gone
 * (main frees them then, probe_free). */
#define PROBES_MAX 256
static struct probe *probes_live[PROBES_MAX];
static unsigned nprobes;

static void probe_free(void)
{
	for (unsigned i = 0; i < nprobes; i++) {
		free(probes_live[i]->big_data);
		free(probes_live[i]->big);
		free(probes_live[i]);
	}
	nprobes = 0;
}

/* A probe towards `to` (trapping exits), with its 2 MiB buffer; NULL on failure. */
static struct probe *probe_start(act_id to, act_id *pid, bool big)
{
	struct probe *p = nprobes < PROBES_MAX ? calloc(1, sizeof(*p)) : NULL;
	if (!p)
		return NULL;
	probes_live[nprobes++] = p;
	if (!(p->big = calloc(1, sizeof(*p->big))) ||
	    (big && !(p->big_data = malloc(BIG_BYTES))))
		return NULL;
	if (big)
		memset(p->big_data, 0xa5, BIG_BYTES);
	p->to = to;
	struct act_spawn_opts o = {.trap_exit = true};
	if (act_spawn_opt(rt, &probe_beh, p, &o, pid) != 0)
		return NULL;
	return p;
}

static void probe_go(act_id pid, uint32_t op)
{
	act_tell(rt, pid, T_GO, &op, sizeof(op));
}

/* Waits until cond() or timeout_ms; true when cond() held. */
#define WAIT_UNTIL(cond, timeout_ms) ({ \
	uint64_t wu_end_ = zb_now_ns() + (uint64_t)(timeout_ms) * 1000000ull; \
	while (!(cond) && zb_now_ns() < wu_end_) \
		msleep(1); \
	(bool)(cond); })

/* lane 0's transport size_resets (racy: diagnostics only) */
static uint64_t size_resets(void)
{
	return dp_transport(0) ? tp_stats(dp_transport(0))->size_resets : 0;
}

/* --defects size, d: a message no receiver would take (a reserved tag) is
 * refused by its sender, for a remote destination too: act_tell with
 * ACT_TAG_DOWN (act_send's own check) and an ACT_TAG_UNDELIVERED that is
 * not a call's error reply (the router's: it took it, and node 2 dropped
 * it with every record after it in its transport message). Then node 2
 * gets one transport message whose second and fourth records it refuses
 * (batch_injector): the three probe messages around them reach the tally,
 * in order, and the two refused ones are counted (zbra_stats.bad +2); it
 * used to drop everything after the first refused one. */
static void defects_tags(const struct ids *id, struct probe *p, act_id pid)
{
	uint32_t v[2] = {PROBE_MAGIC, 90};
	int rc1 = act_tell(rt, id->tally, ACT_TAG_DOWN, v, sizeof(v));
	struct act_msg *u = act_msg_alloc(rt);
	int rc2 = -ENOBUFS;
	if (u) {
		u->tag = ACT_TAG_UNDELIVERED;
		act_msg_set_bytes(u, v, sizeof(v));
		if ((rc2 = act_send(rt, id->tally, u)))
			act_msg_free(rt, u);
	}
	check(rc1 == -EINVAL && rc2 == -EINVAL,
	      "reserved tags to a remote actor are refused by the sender: ACT_TAG_DOWN %d (%s), ACT_TAG_UNDELIVERED not a call's reply %d (%s)",
	      rc1, zb_strerror(rc1), rc2, zb_strerror(rc2));
	msleep(300);   /* what was accepted (the old code) has arrived */
	struct report r0, r1;
	memset(&r0, 0, sizeof(r0));
	memset(&r1, 0, sizeof(r1));
	call_report(id->sink, &r0);
	uint32_t n0 = atomic_load(&p->nrecv);
	inject_from = pid;
	inject_to = id->tally;
	atomic_store_explicit(&inject_batch_go, 1, memory_order_release);
	WAIT_UNTIL(atomic_load(&p->nrecv) >= n0 + 3, 3000);
	msleep(300);
	call_report(id->sink, &r1);
	uint32_t n = atomic_load(&p->nrecv);
	char list[64] = "";
	size_t ll = 0;
	for (uint32_t i = n0; i < n && i < 16; i++)
		ll += (size_t)snprintf(list + ll, ll < sizeof(list) ? sizeof(list) - ll : 0,
				       "%s%d", i > n0 ? "," : "", (int)p->recv[i]);
	check(atomic_load(&inject_batch_done) && n == n0 + 3 && n <= 16 &&
		      p->recv[n0] == 5 && p->recv[n0 + 1] == 6 && p->recv[n0 + 2] == 7 &&
		      r1.malformed - r0.malformed == 2,
	      "one transport message with a reserved-tag record and one for another node between 3 valid ones: those 3 arrive in order ([%s]), the 2 refused ones counted (malformed +%u)",
	      list, r1.malformed - r0.malformed);
}

/* --defects size: node 2 runs with [transport] max_message_mb = 1 and node 1
 * has learnt it (from node 2's ACKs of the calls before).
 *  a. a call (thread, and actor call_async) to an actor of node 2 that has
 *     exited fails promptly with ZB_ERR_STALE_ID, not after its timeout;
 *  b. a 2 MiB buffer message comes back as one UNDELIVERED -EMSGSIZE, and 3
 *     small messages after it on the same (from, to) pair each either
 *     arrive (in order) or come back UNDELIVERED: exactly one of the two. */
static void defects_size(const struct ids *id)
{
	uint64_t back = 0;
	/* a. the dead actor: a call_async from an actor (watched for 1 s while
	 * its own timeout is 3 s), then a call from a thread */
	static struct pinger dp;
	memset(&dp, 0, sizeof(dp));
	dp.to = id->dead;
	dp.tag = T_ECHO;
	dp.timeout_ns = 3000000000ull;
	act_id dpid = ACT_ID_NONE;
	act_spawn(rt, &pinger_beh, &dp, &dpid);
	uint64_t t0 = zb_now_ns();
	act_tell(rt, dpid, T_GO, NULL, 0);
	bool fin = wait_flag(&dp.finished, 1000);
	uint64_t await = zb_now_ns() - t0;
	check(id->dead && fin && !dp.refused && atomic_load(&dp.undelivered) == 1 &&
		      atomic_load(&dp.timeouts) == 0 && dp.reason == ZB_ERR_STALE_ID,
	      "an actor's call_async to an exited actor on node %u gets ACT_TAG_UNDELIVERED with ZB_ERR_STALE_ID promptly (%s after %lu ms, timeout 3000 ms: undelivered=%lu reason %d %s)",
	      act_id_node(id->dead), fin ? "finished" : "nothing",
	      (unsigned long)(await / 1000000), (unsigned long)atomic_load(&dp.undelivered),
	      dp.reason, zb_strerror(dp.reason));
	t0 = zb_now_ns();
	int rc = echo_call(id->dead, 5, 3000000000ull, &back);
	uint64_t waited = zb_now_ns() - t0;
	check(id->dead && rc == ZB_ERR_STALE_ID && waited < 1000000000ull,
	      "a call from a thread to it fails promptly with ZB_ERR_STALE_ID (%d %s after %lu ms, timeout 3000 ms)",
	      rc, zb_strerror(rc), (unsigned long)(waited / 1000000));
	if (dpid)
		act_exit_signal(rt, dpid, ACT_KILL);

	/* b. node 1 knows node 2's limit: a few more calls (their ACKs say it) */
	for (int i = 0; i < 5; i++)
		echo_call(id->echo, 100 + i, 2000000000ull, &back);
	msleep(100);
	struct report r0, r1;
	memset(&r0, 0, sizeof(r0));
	memset(&r1, 0, sizeof(r1));
	call_report(id->sink, &r0);   /* node 2's malformed count before */
	uint64_t sr0 = size_resets();
	act_id pid;
	struct probe *p = probe_start(id->tally, &pid, true);
	if (!p || !id->tally) {
		check(false, "probe actor started (tally 0x%016llx)", (unsigned long long)id->tally);
		return;
	}
	probe_go(pid, 0);
	WAIT_UNTIL(atomic_load(&p->und) >= 1, 5000);
	msleep(300);   /* a second report would come now */
	uint32_t und = atomic_load(&p->und);
	check(p->send_rc == 0 && und == 1 && p->und_reason[0] == -EMSGSIZE,
	      "a 2 MiB buffer to node 2 (max_message_mb = 1) comes back as exactly one ACT_TAG_UNDELIVERED -EMSGSIZE (send %d, undelivered=%u, reason %d %s)",
	      p->send_rc, und, und ? p->und_reason[0] : 0,
	      und ? zb_strerror(p->und_reason[0]) : "none");
	/* then seq 1..3 on the same pair, one at a time: each is resolved
	 * (received there, or reported undelivered) before the next goes, so
	 * that a report names its message */
	uint32_t rep[4] = {0};
	for (uint32_t k = 1; k <= 3; k++) {
		uint32_t u0 = atomic_load(&p->und), n0 = atomic_load(&p->nrecv);
		probe_go(pid, k);
		WAIT_UNTIL(atomic_load(&p->und) > u0 || atomic_load(&p->nrecv) > n0, 4000);
		msleep(100);
		rep[k] = atomic_load(&p->und) - u0;
	}
	msleep(300);
	uint32_t nrecv = atomic_load(&p->nrecv), got[4] = {0}, last = 0;
	bool in_order = true;
	char list[128] = "";
	size_t ll = 0;
	for (uint32_t i = 0; i < nrecv && i < 16; i++) {
		uint32_t q = p->recv[i];
		if (q >= 1 && q <= 3)
			got[q]++;
		in_order = in_order && q != UINT32_MAX && q > last;
		last = q;
		ll += (size_t)snprintf(list + ll, ll < sizeof(list) ? sizeof(list) - ll : 0,
				       "%s%d", i ? "," : "", (int)q);
	}
	call_report(id->sink, &r1);
	bool each = true;
	for (uint32_t k = 1; k <= 3; k++)
		each = each && got[k] + rep[k] == 1;
	check(each,
	      "after it, 3 small messages on the same pair: each one received or reported undelivered, exactly one of the two (seq1 received=%u undelivered=%u, seq2 %u/%u, seq3 %u/%u; node 2 malformed +%u)",
	      got[1], rep[1], got[2], rep[2], got[3], rep[3], r1.malformed - r0.malformed);
	check(in_order && nrecv <= 3,
	      "and those received arrived once each, in order (received: [%s])", list);
	/* c. node 1 knows the limit now: a second 2 MiB buffer is refused too
	 * (by node 1, its header never sent), then seq 4 arrives */
	uint32_t u0 = atomic_load(&p->und), n0 = atomic_load(&p->nrecv);
	WAIT_UNTIL(!atomic_load(&p->big->busy), 2000);
	probe_go(pid, 0);
	WAIT_UNTIL(atomic_load(&p->und) > u0, 5000);
	probe_go(pid, 4);
	WAIT_UNTIL(atomic_load(&p->nrecv) > n0, 4000);
	msleep(200);
	uint32_t und2 = atomic_load(&p->und) - u0, n2 = atomic_load(&p->nrecv);
	int why = und2 && u0 < 8 ? p->und_reason[u0] : 0;
	check(p->send_rc == 0 && und2 == 1 && why == -EMSGSIZE && n2 == n0 + 1 &&
		      n2 <= 16 && p->recv[n2 - 1] == 4,
	      "a second 2 MiB buffer comes back as one ACT_TAG_UNDELIVERED -EMSGSIZE too, and seq 4 after it arrives (undelivered=%u reason %d %s, received +%u: last %d)",
	      und2, why, zb_strerror(why), n2 - n0,
	      n2 && n2 <= 16 ? (int)p->recv[n2 - 1] : -1);
	printf("# node 1 lane 0 size_resets +%lu\n", (unsigned long)(size_resets() - sr0));
	defects_tags(id, p, pid);
	act_exit_signal(rt, pid, ACT_KILL);
}

/* --defects first: node 2 runs with max_message_mb = 1, node 1 has sent it
 * nothing yet (has not learnt its limit). Node 2's linker (traps exits)
 * links to a probe here (trapping exits too; its id goes through
 * LINK_FILE), then the probe's first data to node 2 is a 2 MiB buffer: it
 * comes back as UNDELIVERED -EMSGSIZE, and afterwards both sides agree
 * about the link: both got an EXIT (and node 1 holds no entry for it), or
 * neither did (and node 1 still holds it). */
static void defects_first(const struct ids *id, const char *link_file)
{
	act_id pid;
	struct probe *p = probe_start(id->sink, &pid, true);
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s.tmp", link_file ? link_file : "");
	FILE *f = link_file ? fopen(tmp, "w") : NULL;
	if (!p || !f) {
		check(false, "probe actor started, its id written (%s)", link_file ? link_file : "no --link-file");
		if (f)
			fclose(f);
		return;
	}
	fprintf(f, "0x%016llx\n", (unsigned long long)pid);
	fclose(f);
	rename(tmp, link_file);
	struct zbra_stats zs;
	bool linked = WAIT_UNTIL(atomic_load(&p->linked) &&
				 (zbra_get_stats(&zs), zs.rtab_live >= 1), 30000);
	zbra_get_stats(&zs);
	check(linked, "node 2's linker linked to this node's probe actor (rtab_live=%lu)",
	      (unsigned long)zs.rtab_live);
	if (!linked)
		return;
	uint64_t sr0 = size_resets();
	probe_go(pid, 0);
	WAIT_UNTIL(atomic_load(&p->und) >= 1, 10000);
	/* then both sides' EXITs, if any: once both came, or 2 s */
	WAIT_UNTIL(atomic_load(&p->exits) && atomic_load(&p->peer_exits), 2000);
	msleep(100);
	uint32_t und = atomic_load(&p->und), ex = atomic_load(&p->exits),
		 pex = atomic_load(&p->peer_exits);
	zbra_get_stats(&zs);
	check(p->send_rc == 0 && und == 1 && p->und_reason[0] == -EMSGSIZE,
	      "a 2 MiB buffer as the first data to node 2 (max_message_mb = 1, not learnt yet) comes back as ACT_TAG_UNDELIVERED -EMSGSIZE (send %d, undelivered=%u, reason %d %s)",
	      p->send_rc, und, und ? p->und_reason[0] : 0,
	      und ? zb_strerror(p->und_reason[0]) : "none");
	check((ex > 0) == (pex > 0) && (ex > 0) == (zs.rtab_live == 0),
	      "and both sides agree about the link afterwards (node 2's linker got EXIT: %u%s%s; this node's probe got EXIT: %u%s%s; this node's rtab_live=%lu)",
	      pex, pex ? " reason " : "", pex ? act_reason_name(p->peer_exit_reason) : "",
	      ex, ex ? " reason " : "", ex ? act_reason_name(p->exit_reason) : "",
	      (unsigned long)zs.rtab_live);
	printf("# node 1 lane 0 size_resets +%lu (0: it had learnt node 2's limit before)\n",
	       (unsigned long)(size_resets() - sr0));
	act_exit_signal(rt, pid, ACT_KILL);
}

/* A probe towards `to` whose messages to it go on lane `fwd` and, with
 * back >= 0, whose replies from it come back on lane `back`; NULL when 64
 * spawns found none (those that did not fit are killed). */
static struct probe *probe_on_lane(act_id to, unsigned fwd, int back, act_id *pid)
{
	for (int t = 0; t < 64; t++) {
		struct probe *p = probe_start(to, pid, false);
		if (!p)
			return NULL;
		if (zbra_lane_of(*pid, to) == fwd &&
		    (back < 0 || zbra_lane_of(to, *pid) == (unsigned)back))
			return p;
		act_exit_signal(rt, *pid, ACT_KILL);
	}
	return NULL;
}

/* The probe sends inline seq k to its tally until the tally reports it
 * (a message failed by a restart's session reset, or refused, is sent
 * again); true when reported within ms. */
static bool probe_until_reported(struct probe *p, act_id pid, uint32_t k,
				 unsigned ms, unsigned *tries)
{
	uint64_t end = zb_now_ns() + ms * 1000000ull;
	*tries = 0;
	while (zb_now_ns() < end && !stop) {
		uint32_t u0 = atomic_load(&p->und), n0 = atomic_load(&p->nrecv);
		probe_go(pid, k);
		++*tries;
		WAIT_UNTIL(atomic_load(&p->und) > u0 || atomic_load(&p->nrecv) > n0, 2000);
		if (atomic_load(&p->nrecv) > n0)
			return true;
		msleep(50);
	}
	return false;
}

static uint64_t lane_restarts(unsigned lane)
{
	struct tp *t = dp_transport(lane);
	return t ? tp_stats(t)->peer_restarts : 0;   /* racy: a counter */
}

/* --defects restart (two lanes; node 2 with link_down_ms = 0 and a long
 * peer_timeout, so that no lane calls it down): node 2 is killed and
 * started again. A lane's transport sees the new incarnation when
 * something first travels on it, and the node's links with that peer are
 * ended by the first lane's report only (zbra_peer_event). Here lane 0 sees
 * the restart first, a probe links to the new tally over lane 0, and only
 * then lane 1 sees the restart: the link must survive it (before 2026-11-28
 * each lane's report ended the node's links, the new one too), and killing
 * the tally must reach the probe as that link's EXIT. */
static void defects_restart(const char *ids_path, const struct ids *id,
			    const char *restart_flag)
{
	unsigned tries = 0;
	act_id w0 = 0, w1 = 0;
	check(dp_transport(1) != NULL && restart_flag,
	      "two lanes, a restart flag (%s)", restart_flag ? restart_flag : "none");
	if (!dp_transport(1) || !restart_flag)
		return;
	/* the old incarnation: a session on each lane */
	struct probe *a = probe_on_lane(id->tally, 0, -1, &w0);
	struct probe *b = probe_on_lane(id->tally, 1, -1, &w1);
	bool warm = a && b && probe_until_reported(a, w0, 1, 10000, &tries) &&
		    probe_until_reported(b, w1, 1, 10000, &tries);
	check(warm, "both lanes carried a message to node 2 before its restart");
	if (!warm)
		return;
	act_exit_signal(rt, w0, ACT_KILL);
	act_exit_signal(rt, w1, ACT_KILL);
	msleep(300);   /* acknowledged: nothing left to retransmit */
	printf("PHASE restart\n");
	fflush(stdout);
	while (access(restart_flag, F_OK) != 0 && !stop)
		msleep(20);
	struct ids id2;
	int rc = read_ids(ids_path, &id2, 60);
	check(rc == 0 && id2.tally,
	      "the restarted node's ids read (%s)", zb_strerror(rc));
	if (rc || !id2.tally)
		return;
	uint64_t r0 = lane_restarts(0), r1 = lane_restarts(1);
	act_id pa = 0, pb = 0;
	struct probe *pl = probe_on_lane(id2.tally, 0, 0, &pa);
	bool reached = pl && probe_until_reported(pl, pa, 1, 20000, &tries);
	uint64_t d0 = lane_restarts(0) - r0, d1 = lane_restarts(1) - r1;
	check(reached && d0 >= 1 && d1 == 0,
	      "lane 0 reached the new incarnation (%u sends) and saw its restart (peer_restarts +%lu), lane 1 not yet (+%lu)",
	      tries, (unsigned long)d0, (unsigned long)d1);
	if (!reached)
		return;
	probe_go(pa, PROBE_LINK);
	struct zbra_stats zs;
	bool linked = probe_until_reported(pl, pa, 2, 5000, &tries) && pl->link_rc == 0;
	zbra_get_stats(&zs);
	check(linked && zs.rtab_live >= 1,
	      "a probe linked to the new tally over lane 0 (act_link %d, rtab_live=%lu)",
	      pl->link_rc, (unsigned long)zs.rtab_live);
	struct probe *ql = probe_on_lane(id2.tally, 1, -1, &pb);
	bool l1 = ql && probe_until_reported(ql, pb, 3, 20000, &tries);
	d1 = lane_restarts(1) - r1;
	msleep(500);
	zbra_get_stats(&zs);
	uint32_t ex = atomic_load(&pl->exits);
	check(l1 && d1 >= 1 && ex == 0 && zs.rtab_live >= 1,
	      "then lane 1 saw the same restart (%u sends, peer_restarts +%lu) and the link made since survived it (probe EXITs %u%s%s, rtab_live=%lu)",
	      tries, (unsigned long)d1, ex, ex ? " reason " : "",
	      ex ? act_reason_name(pl->exit_reason) : "", (unsigned long)zs.rtab_live);
	act_exit_signal(rt, id2.tally, ACT_KILL);
	WAIT_UNTIL(atomic_load(&pl->exits) > ex, 5000);
	uint32_t ex2 = atomic_load(&pl->exits) - ex;
	check(ex2 == 1 && pl->exit_reason == ACT_KILLED,
	      "and the tally, killed, sent the probe that link's EXIT (EXITs %u, reason %s)",
	      ex2, ex2 ? act_reason_name(pl->exit_reason) : "none");
}

static void drive(const char *ids_path, const char *down_flag,
		  const char *restart_flag, uint16_t ghost, uint32_t k, uint32_t n,
		  unsigned bench_s, uint32_t bench_pings, const char *defects,
		  const char *link_file)
{
	struct ids id;
	int rc = read_ids(ids_path, &id, 120);
	check(rc == 0, "server actor ids read (%s)", zb_strerror(rc));
	if (rc)
		return;
	check(act_id_node(id.echo) != cfg.node.id, "echo is on another node (%u)",
	      act_id_node(id.echo));
	if (defects && !strcmp(defects, "first")) {
		/* nothing may go to node 2 before the scenario's message */
		defects_first(&id, link_file);
		return;
	}
	if (defects && !strcmp(defects, "restart")) {
		defects_restart(ids_path, &id, restart_flag);
		return;
	}
	/* wait for the session: the first calls may find the link not up yet */
	uint64_t back = 0, end = zb_now_ns() + 60000000000ull;
	do {
		rc = echo_call(id.echo, 42, 1000000000ull, &back);
		if (rc)
			msleep(100);
	} while (rc && zb_now_ns() < end);
	check(rc == 0 && back == 42, "first remote call answered (%s)", zb_strerror(rc));
	if (rc)
		return;
	senders = calloc(MAX_SENDERS, sizeof(*senders));
	if (defects) {
		defects_size(&id);
		return;
	}
	if (bench_pings) {
		bench_only(&id, k, n, bench_pings);
		return;
	}

	if (ghost) {
		/* 0. a configured node that never starts: a call to it waits
		 * (queued) and comes back as an error after connect_timeout,
		 * while calls to the live node go on meanwhile */
		static struct pinger gp;
		act_id gpid;
		memset(&gp, 0, sizeof(gp));
		gp.to = act_id_make(ghost, 1, 1);
		gp.tag = T_ECHO;
		gp.timeout_ns = 60000000000ull;
		uint64_t g0 = zb_now_ns(), worst = 0;
		act_spawn(rt, &pinger_beh, &gp, &gpid);
		act_tell(rt, gpid, T_GO, NULL, 0);
		uint32_t calls_ok = 0;
		while (!atomic_load(&gp.finished) && zb_now_ns() - g0 < 30000000000ull) {
			uint64_t c0 = zb_now_ns();
			if (echo_call(id.echo, calls_ok, 2000000000ull, &back) == 0 &&
			    back == calls_ok)
				calls_ok++;
			worst = zb_now_ns() - c0 > worst ? zb_now_ns() - c0 : worst;
			msleep(5);
		}
		uint64_t gwait = zb_now_ns() - g0;
		check(atomic_load(&gp.finished) && gp.reason == ZB_ERR_PEER_DOWN &&
			      (gp.refused || atomic_load(&gp.undelivered) == 1),
		      "a call to node %u, configured but never started, comes back as an error after %lu ms (%s)",
		      ghost, (unsigned long)(gwait / 1000000), zb_strerror(gp.reason));
		check(calls_ok > 10 && worst < 1000000000ull,
		      "meanwhile %u calls to the live node were answered (slowest %lu ms)",
		      calls_ok, (unsigned long)(worst / 1000000));
		act_exit_signal(rt, gpid, ACT_KILL);
	}

	/* 1. FIFO, exactly once, intact: K senders x N mixed messages */
	struct report rep;
	uint64_t full, sum;
	uint64_t dt = run_senders(id.sink, 0, k, n, &rep, &full, &sum);
	check(dt && rep.received == (uint64_t)k * n,
	      "remote send: %u senders x %u messages all received (%lu)", k, n,
	      (unsigned long)rep.received);
	check(dt && rep.order == 0 && rep.bad == 0,
	      "per-pair FIFO, none lost/duplicated, content intact (order=%u bad=%u)",
	      rep.order, rep.bad);
	check(dt && rep.sum == sum, "checksum over all messages matches");
	check(rep.bufs == (uint64_t)k * (n / 5),
	      "buffer payloads delivered as buffers (%u)", rep.bufs);
	/* inline only: long runs of records coalesced into transport messages,
	 * split and resumed across a full mailbox (capacity 64 in the test) */
	struct zbra_stats zb0, zb1;
	zbra_get_stats(&zb0);
	dt = run_senders(id.sink, INLINE_ONLY_FROM, 4, 4 * n, &rep, &full, &sum);
	zbra_get_stats(&zb1);
	check(dt && rep.received == 16ull * n && rep.order == 0 && rep.bad == 0 &&
		      rep.sum == sum && zb1.batches > zb0.batches,
	      "inline messages, coalesced (%lu batches): all %u received in order, intact (order=%u bad=%u)",
	      (unsigned long)(zb1.batches - zb0.batches), 16 * n, rep.order, rep.bad);

	/* 2. calls from a thread: inline and buffer payloads */
	uint32_t bad = 0, calls = 2000;
	uint64_t t0 = zb_now_ns();
	for (uint32_t i = 0; i < calls; i++)
		if (echo_call(id.echo, i * 7919u, 2000000000ull, &back) || back != i * 7919u)
			bad++;
	uint64_t dcall = zb_now_ns() - t0;
	check(bad == 0, "%u remote calls from a thread, replies match (bad=%u)", calls, bad);
	static struct sbuf big;
	uint32_t bad_buf = 0;
	for (uint32_t i = 0; i < 50; i++) {
		uint32_t len = 100 + i * 397;   /* 100 .. 19553: both paths */
		len = len > BUF_BYTES ? BUF_BYTES - i : len;
		atomic_store(&big.busy, 1);
		atomic_store(&big.b.refs, 1);
		big.b.data = big.data;
		big.b.len = len;
		big.b.release = sbuf_release;
		big.b.ctx = &big;
		fill(big.data, 60, i, len);
		struct act_msg *q = act_msg_alloc(rt), *re = NULL;
		act_msg_set_buf(q, &big.b, 0, len);
		q->tag = T_ECHO;
		if (act_call(rt, id.echo, q, 2000000000ull, &re) != 0) {
			bad_buf++;
			continue;
		}
		uint8_t want[BUF_BYTES];
		fill(want, 60, i, len);
		if (re->kind != ACT_PL_BUF || re->u.buf.len != len ||
		    memcmp((uint8_t *)re->u.buf.buf->data + re->u.buf.off, want, len))
			bad_buf++;
		act_msg_free(rt, re);
		for (int w = 0; w < 2000 && atomic_load(&big.busy); w++)
			msleep(1);   /* the transport dropped its reference */
		if (atomic_load(&big.busy))
			bad_buf++;
	}
	check(bad_buf == 0, "50 calls with buffer payloads (100 B .. 4 KiB) echoed intact, sender buffers released (bad=%u)",
	      bad_buf);
	/* long messages: many transport fragments (or carrier fragments) each way */
	static const uint32_t big_lens[3] = {65536 + 5, 1u << 20, (8u << 20) + 64};
	uint32_t bad_big = 0;
	for (int i = 0; i < 3; i++) {
		uint32_t len = big_lens[i];
		struct sbuf *h = calloc(1, sizeof(*h));
		uint8_t *data = malloc(len), *want = malloc(len);
		if (!h || !data || !want) {
			bad_big++;
			free(h);
			free(data);
			free(want);
			continue;
		}
		fill(data, 61, (uint32_t)i, len);
		memcpy(want, data, len);
		atomic_store(&h->busy, 1);
		atomic_store(&h->b.refs, 1);
		h->b.data = data;
		h->b.len = len;
		h->b.release = sbuf_release;
		h->b.ctx = h;
		struct act_msg *q = act_msg_alloc(rt), *re = NULL;
		act_msg_set_buf(q, &h->b, 0, len);
		q->tag = T_ECHO;
		if (act_call(rt, id.echo, q, 20000000000ull, &re) != 0) {
			bad_big++;
		} else {
			if (re->kind != ACT_PL_BUF || re->u.buf.len != len ||
			    memcmp((uint8_t *)re->u.buf.buf->data + re->u.buf.off, want, len))
				bad_big++;
			act_msg_free(rt, re);
		}
		for (int w = 0; w < 5000 && atomic_load(&h->busy); w++)
			msleep(1);
		if (atomic_load(&h->busy))
			bad_big++;   /* leaked on purpose: someone may still read it */
		else {
			free(data);
			free(h);
		}
		free(want);
	}
	check(bad_big == 0, "3 calls with 64 KiB, 1 MiB and 8 MiB buffer payloads echoed intact, sender buffers released (bad=%u)",
	      bad_big);

	/* descriptors: an RDMA region and a GPU buffer travel as descriptions */
	uint32_t bad_desc = 0;
	for (int kind = 0; kind < 2; kind++) {
		struct act_msg *q = act_msg_alloc(rt), *re = NULL;
		q->tag = T_ECHO;
		if (kind == 0)
			act_msg_set_rdma(q, 3, 0x7f0012345000ull, 0xabcdef12u, 1ull << 33);
		else
			act_msg_set_gpu(q, 2, 5, (void *)(uintptr_t)0x7e00deadbe00ull, 12345678);
		if (act_call(rt, id.echo, q, 2000000000ull, &re) != 0) {
			bad_desc++;
			continue;
		}
		if (kind == 0 && (re->kind != ACT_PL_RDMA || re->u.rdma.node != 3 ||
				  re->u.rdma.addr != 0x7f0012345000ull ||
				  re->u.rdma.rkey != 0xabcdef12u || re->u.rdma.len != 1ull << 33))
			bad_desc++;
		if (kind == 1 && (re->kind != ACT_PL_GPU || re->u.gpu.backend != 2 ||
				  re->u.gpu.device != 5 || re->u.gpu.len != 12345678 ||
				  re->u.gpu.ptr != (void *)(uintptr_t)0x7e00deadbe00ull))
			bad_desc++;
		act_msg_free(rt, re);
	}
	check(bad_desc == 0, "RDMA and GPU descriptors carried there and back intact (bad=%u)",
	      bad_desc);

	/* 3. timeouts: a thread's call, then an actor's call_async; the late
	 * replies are discarded */
	struct zbra_stats zs0, zs1;
	struct act_stats as0, as1;
	zbra_get_stats(&zs0);
	act_get_stats(rt, &as0);
	struct act_msg *q = act_msg_alloc(rt), *re = NULL;
	q->tag = T_HOLD;
	t0 = zb_now_ns();
	rc = act_call(rt, id.hole, q, 200000000ull, &re);
	uint64_t waited = zb_now_ns() - t0;
	check(rc == ZB_ERR_TIMEOUT && waited >= 200000000ull,
	      "call to an actor that never replies times out (%s after %lu ms)",
	      zb_strerror(rc), (unsigned long)(waited / 1000000));
	if (re)
		act_msg_free(rt, re);
	static struct pinger pg;
	memset(&pg, 0, sizeof(pg));
	pg.to = id.hole;
	pg.tag = T_HOLD;
	pg.timeout_ns = 200000000ull;
	act_id pid;
	act_spawn(rt, &pinger_beh, &pg, &pid);
	act_tell(rt, pid, T_GO, NULL, 0);
	check(wait_flag(&pg.finished, 5000) && atomic_load(&pg.timeouts) == 1,
	      "call_async from an actor gets ACT_TAG_TIMEOUT");
	act_tell(rt, id.hole, T_FLUSH, NULL, 0);   /* now both late replies come */
	end = zb_now_ns() + 5000000000ull;
	do {
		msleep(5);
		zbra_get_stats(&zs1);
		act_get_stats(rt, &as1);
	} while ((zs1.stale == zs0.stale || as1.late_replies == as0.late_replies) &&
		 zb_now_ns() < end);
	msleep(50);
	zbra_get_stats(&zs1);
	act_get_stats(rt, &as1);
	check(zs1.stale - zs0.stale == 1,
	      "the thread call's late reply found its port gone: discarded (stale +%lu)",
	      (unsigned long)(zs1.stale - zs0.stale));
	check(as1.late_replies - as0.late_replies == 1 && atomic_load(&pg.replies) == 0 &&
		      atomic_load(&pg.other) == 0,
	      "the actor's late reply was discarded, not delivered (late +%lu, seen %lu)",
	      (unsigned long)(as1.late_replies - as0.late_replies),
	      (unsigned long)atomic_load(&pg.replies));
	act_exit_signal(rt, pid, ACT_KILL);

	/* 4. remote mailbox full: backpressure, not loss */
	/* more than the transports of both sides and the lane's ring can
	 * hold (the test runs with [transport] window = 64: 128 messages of up
	 * to 16 records each way, plus 1023 in the ring) */
	uint32_t n2 = 6000;
	dt = run_senders(id.slow, INLINE_ONLY_FROM + 8, 2, n2, &rep, &full, &sum);
	check(dt && rep.received == 2ull * n2 && rep.order == 0 && rep.bad == 0 &&
		      rep.sum == sum,
	      "slow remote actor: all %u messages, in order, intact (received=%lu order=%u bad=%u)",
	      2 * n2, (unsigned long)rep.received, rep.order, rep.bad);
	printf("# slow round: %.3f s\n", dt / 1e9);
	check(rep.deferred > 0 && full > 0,
	      "its full mailbox held the stream (deferred deliveries %u) and pushed back on the senders (%lu full)",
	      rep.deferred, (unsigned long)full);

	/* 5. unknown node */
	uint16_t unknown = 0;
	while (unknown < CFG_MAX_NODES && (cfg.peers[unknown].present || unknown == cfg.node.id))
		unknown++;
	rc = act_tell(rt, act_id_make(unknown, 1, 1), T_DATA, NULL, 0);
	check(rc == -EHOSTUNREACH, "send to a node not in the config fails at once (%s)",
	      zb_strerror(rc));

	/* 6. malformed messages on the remote streams: counted, dropped */
	struct report r0, r1;
	rc = call_report(id.sink, &r0);
	inject_peer = act_id_node(id.sink);
	atomic_store_explicit(&inject_go, 1, memory_order_release);
	end = zb_now_ns() + 5000000000ull;
	do {
		msleep(5);
		rc = call_report(id.sink, &r1);
	} while (rc == 0 && r1.malformed - r0.malformed < 8 && zb_now_ns() < end);
	check(rc == 0 && r1.malformed - r0.malformed == 8,
	      "8 malformed remote messages counted and dropped by the receiver (+%u)",
	      r1.malformed - r0.malformed);
	back = 0;
	rc = echo_call(id.echo, 99, 2000000000ull, &back);
	check(rc == 0 && back == 99, "calls still work after them (%s)", zb_strerror(rc));

	/* figures */
	if (bench_s) {
		memset(&pg, 0, sizeof(pg));
		pg.to = id.echo;
		pg.tag = T_PING;
		pg.timeout_ns = 1000000000ull;
		pg.until_ns = zb_now_ns() + bench_s * 1000000000ull;
		act_spawn(rt, &pinger_beh, &pg, &pid);
		t0 = zb_now_ns();
		act_tell(rt, pid, T_GO, NULL, 0);
		wait_flag(&pg.finished, bench_s * 1000 + 5000);
		uint64_t d = zb_now_ns() - t0;
		printf("FIGURE actor call_async round trips: %lu in %.2f s = %.0f/s (%.1f us each)\n",
		       (unsigned long)pg.trips, d / 1e9, pg.trips / (d / 1e9),
		       d / 1e3 / (pg.trips ? pg.trips : 1));
		act_exit_signal(rt, pid, ACT_KILL);
		printf("FIGURE thread act_call round trips: %u in %.2f s = %.0f/s\n", calls,
		       dcall / 1e9, calls / (dcall / 1e9));
		uint32_t nb = 20000;
		dt = run_senders(id.sink, 24, k, nb, &rep, &full, &sum);
		printf("FIGURE one-way messages (mixed, 1/5 buffers up to 4 KiB): %u in %.2f s = %.0f/s (ok=%d)\n",
		       k * nb, dt / 1e9, k * nb / (dt / 1e9),
		       rep.received == (uint64_t)k * nb && rep.order == 0);
		uint32_t ki = k > 4 ? 4 : k;
		nb = 250000;
		dt = run_senders(id.sink, INLINE_ONLY_FROM + 4, ki, nb, &rep, &full, &sum);
		printf("FIGURE one-way messages (inline 16..40 B): %u in %.2f s = %.0f/s (ok=%d)\n",
		       ki * nb, dt / 1e9, ki * nb / (dt / 1e9),
		       rep.received == (uint64_t)ki * nb && rep.order == 0);
		printf("# inline round: received=%lu order=%u bad=%u sum_ok=%d\n",
		       (unsigned long)rep.received, rep.order, rep.bad, rep.sum == sum);
	}
	struct zbra_stats zs;
	zbra_get_stats(&zs);
	printf("# stats batches=%lu routed=%lu sent=%lu zc_sent=%lu received=%lu zc_received=%lu failed=%lu deferred=%lu stale=%lu bad=%lu ring_full=%lu\n",
	       (unsigned long)zs.batches, (unsigned long)zs.routed, (unsigned long)zs.sent, (unsigned long)zs.zc_sent,
	       (unsigned long)zs.received, (unsigned long)zs.zc_received,
	       (unsigned long)zs.failed, (unsigned long)zs.deferred,
	       (unsigned long)zs.stale, (unsigned long)zs.bad, (unsigned long)zs.ring_full);
	for (unsigned i = 0; i < dp_lcore_count(); i++) {
		if (!dp_transport(i))
			continue;   /* a node without ports (net carrier) */
		const struct tp_stats *ts = tp_stats(dp_transport(i));   /* racy: diagnostics */
		struct dp_lcore_stats ls;
		dp_lcore_stats(i, &ls);
		printf("# lane%u retransmits=%lu window_stalls=%lu no_buffer_drops=%lu msgs_sent=%lu peer_downs=%lu lane_fwd=%lu lane_drops=%lu sleeps=%lu\n",
		       i, (unsigned long)ts->retransmits, (unsigned long)ts->window_stalls,
		       (unsigned long)ts->no_buffer_drops, (unsigned long)ts->msgs_sent,
		       (unsigned long)ts->peer_downs, (unsigned long)ls.lane_fwd,
		       (unsigned long)ls.lane_drops, (unsigned long)ls.sleeps);
	}
	end = zb_now_ns() + 3000000000ull;
	while (zs.sent + zs.failed != zs.routed && zb_now_ns() < end) {
		msleep(10);
		zbra_get_stats(&zs);
	}
	/* the call to the node that never started is the one failure */
	check(zs.sent + zs.failed == zs.routed && zs.failed == (ghost ? 1u : 0u),
	      "every message routed was acknowledged%s (routed=%lu sent=%lu failed=%lu)",
	      ghost ? " but the one to the node that never started" : "",
	      (unsigned long)zs.routed, (unsigned long)zs.sent, (unsigned long)zs.failed);
	check(zs.zc_sent > 0 && zs.zc_received > 0,
	      "buffers sent by reference (%lu) and received as arena references (%lu)",
	      (unsigned long)zs.zc_sent, (unsigned long)zs.zc_received);

	if (!down_flag)
		return;
	/* 6. the serving node stops */
	printf("PHASE down\n");
	fflush(stdout);
	while (access(down_flag, F_OK) != 0 && !stop)
		msleep(20);
	memset(&pg, 0, sizeof(pg));
	pg.to = id.sink;
	pg.tag = T_DATA;
	act_spawn(rt, &pinger_beh, &pg, &pid);
	act_tell(rt, pid, T_GO, NULL, 0);   /* a plain send from an actor */
	t0 = zb_now_ns();
	rc = echo_call(id.echo, 7, 30000000000ull, &back);
	waited = zb_now_ns() - t0;
	check(rc == ZB_ERR_PEER_DOWN, "call to the stopped node returns an error (%s after %lu ms)",
	      zb_strerror(rc), (unsigned long)(waited / 1000000));
	/* the carrier may know already (a tcp connection reset at once): the
	 * send is refused; else it is accepted and comes back undelivered
	 * (the transport notices within peer_timeout) */
	bool came_back = wait_flag(&pg.finished, 10000);
	check(came_back && pg.reason == ZB_ERR_PEER_DOWN &&
		      (pg.refused || atomic_load(&pg.undelivered) == 1),
	      "an actor's plain send to it comes back as an error: %s (%s)",
	      pg.refused ? "refused at once" : "ACT_TAG_UNDELIVERED", zb_strerror(pg.reason));
	rc = act_tell(rt, id.echo, T_DATA, NULL, 0);
	check(rc == ZB_ERR_PEER_DOWN, "then sends to it fail at once (%s)", zb_strerror(rc));
	act_exit_signal(rt, pid, ACT_KILL);

	if (!restart_flag)
		return;
	/* 7. the node comes back (a new process: new actor ids) */
	printf("PHASE restart\n");
	fflush(stdout);
	while (access(restart_flag, F_OK) != 0 && !stop)
		msleep(20);
	struct ids id2;
	rc = read_ids(ids_path, &id2, 60);
	t0 = zb_now_ns();
	back = 0;
	while (rc == 0 && zb_now_ns() - t0 < 30000000000ull) {
		rc = echo_call(id2.echo, 11, 1000000000ull, &back);
		if (rc == 0 || (rc != ZB_ERR_PEER_DOWN && rc != ZB_ERR_TIMEOUT))
			break;
		rc = 0;
		back = 0;
		msleep(20);
	}
	waited = zb_now_ns() - t0;
	check(rc == 0 && back == 11,
	      "the node restarted: calls reach its new actors again (%s after %lu ms)",
	      zb_strerror(rc), (unsigned long)(waited / 1000000));
	dt = run_senders(id2.sink, 40, 2, 2000, &rep, &full, &sum);
	check(dt && rep.received == 4000 && rep.order == 0 && rep.bad == 0 && rep.sum == sum,
	      "and 2 x 2000 messages after the restart arrive in order, intact (received=%lu order=%u bad=%u)",
	      (unsigned long)rep.received, rep.order, rep.bad);
	/* the old incarnation's echo is gone: its id names no actor of the
	 * new process (the same spawns in the same order gave the same ids,
	 * and the new echo answered the old id) */
	back = 0;
	rc = echo_call(id.echo, 13, 5000000000ull, &back);
	check(id.echo != id2.echo && rc == ZB_ERR_STALE_ID,
	      "a call to the old incarnation's echo id fails with ZB_ERR_STALE_ID (%s%s; old 0x%016llx, new 0x%016llx)",
	      zb_strerror(rc), rc == 0 && back == 13 ? ": the new echo answered it" : "",
	      (unsigned long long)id.echo, (unsigned long long)id2.echo);
}

/* ---- main ---------------------------------------------------------------------- */

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
	dp_node_request_stop();
}

static act_id linker_id;

/* --link-file: once FILE names an actor (0x...), node 2's linker links to
 * it (asked again every 100 ms while the link is refused). Until SIGTERM. */
static void serve_link(const char *link_file, const sigset_t *old)
{
	pthread_sigmask(SIG_SETMASK, old, NULL);
	act_id to = 0;
	uint64_t asked = 0;
	while (!stop) {
		if (!to) {
			FILE *f = fopen(link_file, "r");
			unsigned long long v = 0;
			if (f && fscanf(f, "%llx", &v) == 1)
				to = v;
			if (f)
				fclose(f);
		}
		int lrc = atomic_load(&linker_rc);
		if (to && lrc != 0 && zb_now_ns() - asked > 100000000ull) {
			if (lrc != 1)
				printf("# linker: link refused (%s), again\n", zb_strerror(lrc));
			asked = zb_now_ns();
			act_tell(rt, linker_id, T_GO, &to, sizeof(to));
		}
		usleep(20000);
	}
}

static int serve(const char *ids_path, bool defects)
{
	act_id sink, slow, echo, hole, tally = 0, linker = 0, dead = 0;
	slow_st.delay_us = 20;
	if (act_spawn(rt, &sink_beh, &sink_st, &sink) ||
	    act_spawn(rt, &sink_beh, &slow_st, &slow) ||
	    act_spawn(rt, &echo_beh, NULL, &echo) ||
	    act_spawn(rt, &hole_beh, NULL, &hole))
		return -ENOBUFS;
	act_register(rt, "sink", sink);
	act_register(rt, "slow", slow);
	act_register(rt, "echo", echo);
	act_register(rt, "hole", hole);
	if (defects) {
		/* tally and linker (trapping exits), and the id of an actor that
		 * has exited (dead) */
		struct act_spawn_opts o = {.trap_exit = true};
		if (act_spawn(rt, &tally_beh, NULL, &tally) ||
		    act_spawn_opt(rt, &linker_beh, NULL, &o, &linker) ||
		    act_spawn(rt, &echo_beh, NULL, &dead))
			return -ENOBUFS;
		act_exit_signal(rt, dead, ACT_KILL);
		uint64_t end = zb_now_ns() + 5000000000ull;
		while (act_alive(rt, dead) && zb_now_ns() < end)
			usleep(1000);
		if (act_alive(rt, dead))
			return -EBUSY;
	}
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s.tmp", ids_path);
	FILE *f = fopen(tmp, "w");
	if (!f)
		return -errno;
	static const char *const names[] = {"sink", "slow", "echo", "hole"};
	for (int i = 0; i < 4; i++)
		fprintf(f, "%s=0x%016llx\n", names[i],
			(unsigned long long)act_whereis(rt, names[i]));
	if (defects)
		fprintf(f, "tally=0x%016llx\nlinker=0x%016llx\ndead=0x%016llx\n",
			(unsigned long long)tally, (unsigned long long)linker,
			(unsigned long long)dead);
	fprintf(f, "end\n");
	fclose(f);
	linker_id = linker;
	return rename(tmp, ids_path) ? -errno : 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"serve", required_argument, NULL, 's'},
		{"drive", required_argument, NULL, 'd'},
		{"down-flag", required_argument, NULL, 'f'},
		{"restart-flag", required_argument, NULL, 'r'},
		{"ghost", required_argument, NULL, 'g'},
		{"senders", required_argument, NULL, 'k'},
		{"count", required_argument, NULL, 'n'},
		{"bench", required_argument, NULL, 'b'},
		{"bench-only", required_argument, NULL, 'B'},
		{"defects", required_argument, NULL, 'D'},
		{"link-file", required_argument, NULL, 'L'},
		{NULL, 0, NULL, 0},
	};
	const char *path = NULL, *serve_ids = NULL, *drive_ids = NULL, *down = NULL,
		   *restart = NULL, *defects = NULL, *link_file = NULL;
	uint32_t k = 4, n = 5000;
	uint16_t ghost = 0;
	unsigned bench_s = 0;
	uint32_t bench_pings = 0;
	int c;
	while ((c = getopt_long(argc, argv, "c:", opts, NULL)) != -1) {
		switch (c) {
		case 'c': path = optarg; break;
		case 's': serve_ids = optarg; break;
		case 'd': drive_ids = optarg; break;
		case 'f': down = optarg; break;
		case 'r': restart = optarg; break;
		case 'g': ghost = (uint16_t)strtoul(optarg, NULL, 0); break;
		case 'k': k = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'n': n = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'b': bench_s = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'B': bench_pings = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'D': defects = optarg; break;
		case 'L': link_file = optarg; break;
		default: return 2;
		}
	}
	struct cfg_error cerr;
	if (!path || !serve_ids == !drive_ids || k == 0 || k > 24 || n == 0 ||
	    (bench_pings && (k > MAX_SENDERS - FIXED_FROM || bench_pings > RTT_MAX)) ||
	    (defects && strcmp(defects, "size") && strcmp(defects, "first") &&
	     strcmp(defects, "restart")) ||
	    cfg_load_file(&cfg, path, &cerr) != 0) {
		fprintf(stderr, "usage: helper_remote -c NODE.ini --serve IDS | --drive IDS [--down-flag F] [--senders K<=24] [--count N] [--bench S] [--bench-only PINGS] [--defects size|first|restart [--link-file F]]%s%s\n",
			path ? ": " : "", path ? cerr.msg : "");
		return 2;
	}
	sigset_t old;
	nh_signals_block(on_signal, &old);
	struct dp_err err;
	if (dp_node_init(&cfg, &err) != 0) {
		fprintf(stderr, "helper_remote: %s\n", err.msg);
		return 1;
	}
	int rc = zbra_host(&cfg, &rt);
	if (rc == 0 && drive_ids)
		rc = dp_register_poller(0, injector, NULL);
	if (rc == 0 && dp_node_launch(&err) != 0)
		rc = -EIO;
	if (rc) {
		fprintf(stderr, "helper_remote: start: %s %s\n", zb_strerror(rc), err.msg);
		dp_node_fini();
		return 1;
	}
	unsigned first, ns = zbra_streams(&first);
	printf("CARRIER %s\n", zbra_carrier() ? zbra_carrier() : "none");
	printf("READY node=%u lanes=%u streams=%u..%u\n", cfg.node.id, dp_lcore_count(),
	       first, first + ns - 1);
	fflush(stdout);
	if (serve_ids) {
		rc = serve(serve_ids, defects != NULL);
		if (rc)
			fprintf(stderr, "helper_remote: serve: %s\n", zb_strerror(rc));
		if (rc == 0 && link_file)
			serve_link(link_file, &old);
		sigset_t wait_mask = old;
		sigdelset(&wait_mask, SIGINT);
		sigdelset(&wait_mask, SIGTERM);
		while (!stop && rc == 0)
			sigsuspend(&wait_mask);
	} else {
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		drive(drive_ids, down, restart, ghost, k, n, bench_s, bench_pings, defects,
		      link_file);
		printf("DONE failures=%d\n", failures);
		fflush(stdout);
	}
	dp_node_request_stop();
	dp_node_stop();
	struct zbra_stats zs;
	zbra_get_stats(&zs);
	act_runtime_destroy(rt);
	zbra_detach();
	dp_node_fini();
	probe_free();
	printf("EXIT node=%u received=%lu deferred=%lu stale=%lu bad=%lu carrier_bad=%lu carrier_downs=%lu carrier_half_open=%lu carrier_refused=%lu refused_in=%lu\n",
	       cfg.node.id, (unsigned long)zs.received, (unsigned long)zs.deferred,
	       (unsigned long)zs.stale, (unsigned long)zs.bad,
	       (unsigned long)zs.carrier_bad, (unsigned long)zs.carrier_downs,
	       (unsigned long)zs.carrier_half_open, (unsigned long)zs.carrier_refused,
	       (unsigned long)zs.refused_in);
	return rc || failures ? 1 : 0;
}
