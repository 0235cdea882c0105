/* tests/transport/traffic.h — an application for sim.h: every node sends
 * numbered, checksummed messages of mixed sizes to every other node on every
 * stream and checks what it receives: exactly once, in order per
 * (source, stream), content intact. */
#ifndef ZBMD_TEST_TRAFFIC_H
#define ZBMD_TEST_TRAFFIC_H

#include "sim.h"

#include <inttypes.h>
#include <stdio.h>

#define TR_STREAMS 4

struct zbuf {
	struct tp_ref ref;
	size_t len;
	uint8_t data[];
};

static uint64_t tr_live_bufs;

static void zbuf_free(struct tp_ref *r)
{
	struct zbuf *b = (struct zbuf *)r;
	memset(b->data, 0xdd, b->len);   /* poison: early frees corrupt content */
	tr_live_bufs--;
	free(b);
}

struct tr_node {
	uint32_t next_send[SIM_MAX_NODES][TR_STREAMS];
	uint32_t next_recv[SIM_MAX_NODES][TR_STREAMS];
	uint64_t done_ok, done_err, delivered, bad_order, bad_content, bytes;
	uint64_t kept;             /* delivered as kept frames (tp_msg.segs) */
	int last_err;
};

struct traffic {
	struct sim *sim;
	struct tr_node nodes[SIM_MAX_NODES];
	uint64_t per_pair;         /* messages per (src, dst, stream) ... */
	uint32_t extra_flows;      /* ... plus one for the first extra_flows flows */
	uint32_t max_size;         /* size profile upper bound */
	uint32_t big_every;        /* 1 in big_every messages may be large */
	uint64_t sent_total, target_total;
	int hold_release;          /* deliver: keep messages, release later */
	struct tp_msg *held[4096];
	uint32_t held_n;
	uint64_t quota[SIM_MAX_NODES][SIM_MAX_NODES][TR_STREAMS];
	struct tr_stage {
		int valid;
		uint16_t dst, stream;
		struct zbuf *buf;
	} stage[SIM_MAX_NODES];
};

static struct traffic *tr_g;

/* Messages to send on flow (src, dst, stream). */
static inline uint64_t tr_quota(const struct traffic *t, uint16_t src,
				uint16_t dst, uint16_t stream)
{
	uint32_t f = ((uint32_t)src * SIM_MAX_NODES + dst) * TR_STREAMS + stream;
	uint32_t rank = 0;
	/* rank of this flow among existing flows, in (src, dst, stream) order */
	for (uint32_t i = 0; i < f; i++) {
		uint32_t s_ = i / (SIM_MAX_NODES * TR_STREAMS);
		uint32_t d_ = (i / TR_STREAMS) % SIM_MAX_NODES;
		if (s_ < (uint32_t)t->sim->n && d_ < (uint32_t)t->sim->n && s_ != d_)
			rank++;
	}
	return t->per_pair + (rank < t->extra_flows);
}

static inline uint64_t tr_hash(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

/* Size of message `index` of (src, dst, stream): mostly small, some single
 * frames, some multi-fragment, a few up to max_size. */
static inline size_t tr_size(const struct traffic *t, uint16_t src,
			     uint16_t dst, uint16_t stream, uint32_t index)
{
	uint64_t h = tr_hash(((uint64_t)src << 48) | ((uint64_t)dst << 40) |
			     ((uint64_t)stream << 32) | index);
	uint32_t k = (uint32_t)(h % 100);

	if (t->big_every && (h >> 32) % t->big_every == 0)
		return 8000 + (h >> 8) % (t->max_size - 8000 + 1);
	if (k < 55)
		return (h >> 16) % 200;           /* inline copy */
	if (k < 90)
		return 200 + (h >> 16) % 1200;    /* one frame, zero copy */
	return 1400 + (h >> 16) % 5000;           /* a few fragments */
}

static int tr_deliver(struct sim_node *n, struct tp_msg *m)
{
	struct traffic *t = tr_g;
	struct tr_node *me = &t->nodes[n->id];
	uint32_t want = me->next_recv[m->peer][m->stream];
	size_t len = tr_size(t, m->peer, n->id, m->stream, want);

	if (m->msg_id != want && me->bad_order++ < 5)
		printf("# node %u: from %u stream %u got msg_id %u, want %u\n",
		       n->id, m->peer, m->stream, m->msg_id, want);
	const uint8_t *data = m->data;
	if (m->segs) {   /* kept frames (tp_ops.rx_keep): read them out */
		static uint8_t flat[1 << 16];
		ZB_ASSERT(m->len <= sizeof(flat));
		tp_msg_read(m, 0, flat, m->len);
		data = flat;
		me->kept++;
	}
	if (!sim_check(data, m->len, len, m->peer, n->id, m->stream, want) &&
	    me->bad_content++ < 5)
		printf("# node %u: from %u stream %u msg %u: content/length "
		       "mismatch (len %zu want %zu)\n", n->id, m->peer,
		       m->stream, want, m->len, len);
	me->next_recv[m->peer][m->stream] = want + 1;
	me->delivered++;
	me->bytes += m->len;
	if (t->hold_release && t->held_n < ZB_ARRAY_LEN(t->held)) {
		t->held[t->held_n++] = m;
		return 0;
	}
	tp_msg_release(n->tp, m);
	return 0;
}

static void tr_send_done(struct sim_node *n, uint64_t cookie, int status)
{
	struct tr_node *me = &tr_g->nodes[n->id];
	(void)cookie;
	if (status == 0)
		me->done_ok++;
	else {
		me->done_err++;
		me->last_err = status;
	}
}

static inline void tr_init(struct traffic *t, struct sim *s, uint64_t per_pair)
{
	memset(t, 0, sizeof(*t));
	t->sim = s;
	t->per_pair = per_pair;
	t->max_size = 65536;
	t->big_every = 0;
	t->target_total = per_pair * (uint64_t)s->n * (s->n - 1) * TR_STREAMS;
	s->deliver = tr_deliver;
	s->send_done = tr_send_done;
	tr_g = t;
	for (uint16_t a = 0; a < s->n; a++)
		for (uint16_t b = 0; b < s->n; b++)
			for (uint16_t c = 0; c < TR_STREAMS; c++)
				t->quota[a][b][c] = a == b ? 0 : t->per_pair;
}

/* Exactly `total` messages spread over all flows. */
static inline void tr_init_total(struct traffic *t, struct sim *s, uint64_t total)
{
	uint64_t flows = (uint64_t)s->n * (s->n - 1) * TR_STREAMS;

	tr_init(t, s, total / flows);
	t->extra_flows = (uint32_t)(total % flows);
	t->target_total = total;
	for (uint16_t a = 0; a < s->n; a++)
		for (uint16_t b = 0; b < s->n; b++)
			for (uint16_t c = 0; c < TR_STREAMS; c++)
				t->quota[a][b][c] = a == b ? 0 : tr_quota(t, a, b, c);
}

/* Offer one message on one (src, dst, stream). 0 sent, -EAGAIN full. A
 * message refused with -EAGAIN stays staged and is offered again first, so
 * it is generated only once. */
static inline int tr_send_one(struct traffic *t, uint16_t src, uint16_t dst,
			      uint16_t stream)
{
	struct sim_node *n = &t->sim->nodes[src];
	struct tr_node *me = &t->nodes[src];
	struct tr_stage *sg = &t->stage[src];
	uint32_t idx = me->next_send[dst][stream];
	size_t len = tr_size(t, src, dst, stream, idx);
	int rc;

	if (sg->valid && (sg->dst != dst || sg->stream != stream))
		return -EAGAIN;   /* finish the staged one first */
	if (len <= 256) {
		uint8_t buf[256];
		sim_fill(buf, len, src, dst, stream, idx);
		rc = tp_send(n->tp, dst, stream, buf, len, NULL, idx, t->sim->now);
		memset(buf, 0xee, sizeof(buf));   /* the copy must be taken */
	} else {
		struct zbuf *b = sg->valid ? sg->buf : NULL;
		if (!b) {
			b = malloc(sizeof(*b) + len);
			ZB_ASSERT(b != NULL);
			tp_ref_init(&b->ref, zbuf_free);
			b->len = len;
			tr_live_bufs++;
			sim_fill(b->data, len, src, dst, stream, idx);
		}
		rc = tp_send(n->tp, dst, stream, b->data, len, &b->ref, idx,
			     t->sim->now);
		if (rc == -EAGAIN) {
			sg->valid = 1;
			sg->dst = dst;
			sg->stream = stream;
			sg->buf = b;
		} else {
			sg->valid = 0;
			sg->buf = NULL;
			tp_ref_put(&b->ref);   /* the transport holds its own */
		}
	}
	if (rc == 0) {
		me->next_send[dst][stream] = idx + 1;
		t->sent_total++;
	}
	return rc;
}

/* Offer up to `budget` messages per node, round robin over (dst, stream). */
static inline void tr_pump(struct traffic *t, int budget)
{
	struct sim *s = t->sim;

	for (uint16_t src = 0; src < s->n; src++) {
		int sent = 0, blocked = 0;
		struct tr_stage *sg = &t->stage[src];
		if (!s->nodes[src].tp || s->nodes[src].down)
			continue;
		if (sg->valid && tr_send_one(t, src, sg->dst, sg->stream) != 0)
			continue;
		while (sent < budget && blocked == 0) {
			int progress = 0;
			for (uint16_t dst = 0; dst < s->n; dst++) {
				if (dst == src)
					continue;
				for (uint16_t st = 0; st < TR_STREAMS; st++) {
					if (t->nodes[src].next_send[dst][st] >= t->quota[src][dst][st])
						continue;
					int rc = tr_send_one(t, src, dst, st);
					if (rc == -EAGAIN) {
						blocked = 1;
						break;
					}
					if (rc == 0) {
						sent++;
						progress = 1;
					}
				}
				if (blocked)
					break;
			}
			if (!progress)
				break;
		}
	}
}

static uint64_t tr_sum(const struct traffic *t, size_t off)
{
	uint64_t s = 0;
	for (int i = 0; i < t->sim->n; i++)
		s += *(const uint64_t *)((const char *)&t->nodes[i] + off);
	return s;
}
#define TR_SUM(t, field) tr_sum((t), offsetof(struct tr_node, field))

static inline void tr_dump(const struct traffic *t)
{
	const struct sim *s = t->sim;
	printf("# STUCK at sim %.6f s: sent %" PRIu64 "/%" PRIu64 "\n",
	       s->now / 1e9, t->sent_total, t->target_total);
	for (uint16_t i = 0; i < s->n; i++) {
		const struct tr_node *me = &t->nodes[i];
		if (!s->nodes[i].tp)
			continue;
		printf("#  node %u: delivered %" PRIu64 " ok %" PRIu64 " err %" PRIu64
		       " nobuf %" PRIu64 " stalls %" PRIu64 "\n", i, me->delivered,
		       me->done_ok, me->done_err,
		       tp_stats(s->nodes[i].tp)->no_buffer_drops,
		       tp_stats(s->nodes[i].tp)->window_stalls);
		for (uint16_t j = 0; j < s->n; j++) {
			struct tp_peer_info pi;
			if (j == i || tp_peer_info(s->nodes[i].tp, j, &pi))
				continue;
			printf("#   -> %u: state %d inflight %u credit %u queued %u "
			       "rto %u us srtt %u us\n", j, pi.state, pi.in_flight,
			       pi.credit, pi.queued_msgs, pi.rto_us, pi.srtt_us);
		}
	}
}

/* Run until everything is delivered and acknowledged, or sim time passes
 * limit_ns. Returns 1 when complete. */
static inline int tr_run(struct traffic *t, uint64_t limit_ns, int budget)
{
	struct sim *s = t->sim;
	uint64_t end = s->now + limit_ns, last_progress = s->now, last_count = 0;

	while (s->now < end) {
		uint64_t c;
		tr_pump(t, budget);
		sim_step(s, 50000);
		c = TR_SUM(t, delivered) + TR_SUM(t, done_ok);
		if (c != last_count) {
			last_count = c;
			last_progress = s->now;
		} else if (s->now - last_progress > 2000000000ull) {
			tr_dump(t);
			return 0;   /* stuck for 2 s of simulated time */
		}
		if (t->sent_total == t->target_total &&
		    TR_SUM(t, delivered) == t->target_total &&
		    TR_SUM(t, done_ok) + TR_SUM(t, done_err) == t->target_total)
			return 1;
	}
	return 0;
}

#endif /* ZBMD_TEST_TRAFFIC_H */
