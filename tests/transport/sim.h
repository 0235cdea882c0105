/* tests/transport/sim.h — a deterministic in-process network for transport
 * tests: N tp instances joined by a simulated link with loss, duplication,
 * reordering (extra delay) and delay, driven by a simulated clock.
 *
 * Zero-copy frames (tp_frame.ref != NULL) are kept as (headers copy, pointer
 * into the sender's buffer, a reference) until delivered, exactly as a DPDK
 * external mbuf would be; the payload is read at delivery time, so a buffer
 * freed or overwritten too early shows up as corrupted content (or an ASAN
 * report). Other frames are copied at tx time.
 */
#ifndef ZBMD_TEST_SIM_H
#define ZBMD_TEST_SIM_H

#include "zbmd/common.h"
#include "zbmd/transport.h"
#include "zbmd/wire.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SIM_MAX_NODES 8
#define SIM_FRAME_MAX (WIRE_ETH_LEN + WIRE_MTU_MAX)

struct sim_pkt {
	uint64_t t, order;
	uint16_t src, dst;
	uint32_t len;                 /* whole frame */
	uint32_t hdr_len;
	const uint8_t *zc;            /* zero-copy payload or NULL */
	struct tp_ref *ref;
	uint8_t *buf;                 /* hdr (+ payload when copied) */
};

struct sim;

struct sim_node {
	struct sim *sim;
	uint16_t id;
	struct tp *tp;
	bool down;                    /* drops everything to and from it */
	void *app;                    /* test's own state */
};

struct sim_link {
	double loss, dup, reorder;    /* probabilities */
	uint64_t delay_ns;            /* one-way base delay */
	uint64_t reorder_ns;          /* extra delay (uniform 0..) when reordered */
	uint64_t jitter_ns;           /* extra delay (uniform 0..) on every frame */
	double busy;                  /* tx refuses the frame (-EAGAIN: ring full) */
};

struct sim {
	uint64_t now, order, rng;
	struct sim_link link;
	struct sim_node nodes[SIM_MAX_NODES];
	int n;
	bool block[SIM_MAX_NODES][SIM_MAX_NODES];   /* drop src -> dst */
	/* event heap */
	struct sim_pkt **heap;
	uint32_t heap_n, heap_cap;
	/* packet pool */
	struct sim_pkt *pkts, *free_list_dummy;
	struct sim_pkt **free_pkts;
	uint32_t free_n, pool_n;
	uint8_t *scratch;             /* assembles zero-copy frames for rx */
	uint8_t *tap_buf;             /* assembles frames for the tap (tx may
				       * run inside rx: never share scratch) */
	uint64_t delivered, dropped, duplicated, reordered, pool_drops, tx_calls;
	/* callbacks the test sets */
	int (*deliver)(struct sim_node *n, struct tp_msg *m);
	void (*send_done)(struct sim_node *n, uint64_t cookie, int status);
	void (*peer_event)(struct sim_node *n, uint16_t peer, enum tp_peer_event ev,
			   uint32_t epoch);
	/* optional receive in place (NULL: the arena, as without rx_place) */
	void *(*rx_place)(struct sim_node *n, uint16_t peer, uint16_t stream,
			  uint32_t msg_id, size_t len);
	void (*rx_unplace)(struct sim_node *n, uint16_t peer, uint16_t stream,
			   uint32_t msg_id);
	/* optional: write placed fragments (tp_ops.rx_write); set before
	 * sim_node_start, NULL: the transport copies them */
	void (*rx_write)(struct sim_node *n, uint16_t peer, uint16_t stream,
			 uint32_t msg_id, uint8_t *buf, size_t off,
			 const uint8_t *data, size_t len);
	/* optional: receive without copying (tp_ops.rx_keep). With `keep`
	 * set every frame reaches tp_rx_keep() as a malloc'ed copy whose
	 * handle is itself (freed when not kept, or by rx_free); kept_out
	 * counts the frames the nodes hold, kept_frees the ones given back. */
	bool keep;
	bool (*rx_keep)(struct sim_node *n, uint16_t peer, uint16_t stream,
			size_t len);
	int64_t kept_out;
	uint64_t kept_frees;
	/* with `free_bulk`, tp_ops.rx_free_bulk too (set before
	 * sim_node_start): bulk_calls counts its calls, bulk_over the ones
	 * with no frame or more than TP_RX_FREE_BULK */
	bool free_bulk;
	uint64_t bulk_calls, bulk_over;
	/* optional tx tap (e.g. to record frames for replay) */
	void (*tap)(struct sim *s, uint16_t src, const uint8_t *frame, size_t len);
};

static inline uint64_t sim_rand(struct sim *s)
{
	uint64_t z = (s->rng += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}
static inline double sim_rand01(struct sim *s)
{
	return (double)(sim_rand(s) >> 11) * (1.0 / 9007199254740992.0);
}

static inline bool pkt_less(const struct sim_pkt *a, const struct sim_pkt *b)
{
	return a->t < b->t || (a->t == b->t && a->order < b->order);
}

static void heap_push(struct sim *s, struct sim_pkt *p)
{
	uint32_t i = s->heap_n++;
	ZB_ASSERT(s->heap_n <= s->heap_cap);
	while (i) {
		uint32_t up = (i - 1) / 2;
		if (!pkt_less(p, s->heap[up]))
			break;
		s->heap[i] = s->heap[up];
		i = up;
	}
	s->heap[i] = p;
}

static struct sim_pkt *heap_pop(struct sim *s)
{
	struct sim_pkt *top = s->heap[0], *last = s->heap[--s->heap_n];
	uint32_t i = 0;

	for (;;) {
		uint32_t c = 2 * i + 1;
		if (c >= s->heap_n)
			break;
		if (c + 1 < s->heap_n && pkt_less(s->heap[c + 1], s->heap[c]))
			c++;
		if (!pkt_less(s->heap[c], last))
			break;
		s->heap[i] = s->heap[c];
		i = c;
	}
	if (s->heap_n)
		s->heap[i] = last;
	return top;
}

static void sim_pkt_free(struct sim *s, struct sim_pkt *p)
{
	if (p->ref)
		tp_ref_put(p->ref);
	p->ref = NULL;
	s->free_pkts[s->free_n++] = p;
}

static void sim_enqueue(struct sim *s, uint16_t src, const struct tp_frame *f,
			uint64_t extra)
{
	struct sim_pkt *p;

	if (!s->free_n) {
		s->pool_drops++;
		return;
	}
	p = s->free_pkts[--s->free_n];
	p->t = s->now + s->link.delay_ns + extra +
	       (s->link.jitter_ns ? sim_rand(s) % s->link.jitter_ns : 0);
	p->order = s->order++;
	p->src = src;
	p->dst = f->peer;
	p->hdr_len = f->hdr_len;
	p->len = f->hdr_len + f->payload_len;
	memcpy(p->buf, f->hdr, f->hdr_len);
	if (f->ref && f->payload_len) {
		p->zc = f->payload;
		p->ref = f->ref;
		tp_ref_get(f->ref);
	} else {
		p->zc = NULL;
		p->ref = NULL;
		if (f->payload_len)
			memcpy(p->buf + f->hdr_len, f->payload, f->payload_len);
	}
	heap_push(s, p);
}

static int sim_tx(void *user, const struct tp_frame *f)
{
	struct sim_node *n = user;
	struct sim *s = n->sim;
	double u;

	s->tx_calls++;
	ZB_ASSERT(f->hdr_len == WIRE_HDRS_LEN);
	ZB_ASSERT(f->hdr_len + f->payload_len <= SIM_FRAME_MAX);
	if (s->tap) {
		memcpy(s->tap_buf, f->hdr, f->hdr_len);
		if (f->payload_len)
			memcpy(s->tap_buf + f->hdr_len, f->payload, f->payload_len);
		s->tap(s, n->id, s->tap_buf, f->hdr_len + f->payload_len);
	}
	if (n->down || f->peer >= s->n || s->nodes[f->peer].down ||
	    s->block[n->id][f->peer]) {
		s->dropped++;
		return 0;
	}
	if (s->link.busy > 0 && sim_rand01(s) < s->link.busy)
		return -EAGAIN;            /* not taken: the sender keeps it */
	u = sim_rand01(s);
	if (u < s->link.loss) {
		s->dropped++;
		return 0;
	}
	u -= s->link.loss;
	if (u < s->link.dup) {
		s->duplicated++;
		sim_enqueue(s, n->id, f, sim_rand(s) % (s->link.delay_ns + 1));
	}
	if (sim_rand01(s) < s->link.reorder) {
		s->reordered++;
		sim_enqueue(s, n->id, f, 1 + sim_rand(s) % (s->link.reorder_ns + 1));
	} else {
		sim_enqueue(s, n->id, f, 0);
	}
	return 0;
}

static int sim_cb_deliver(void *user, struct tp_msg *m)
{
	struct sim_node *n = user;
	return n->sim->deliver(n, m);
}
static void sim_cb_send_done(void *user, uint64_t cookie, int status)
{
	struct sim_node *n = user;
	n->sim->send_done(n, cookie, status);
}
static void sim_cb_peer_event(void *user, uint16_t peer, enum tp_peer_event ev,
			      uint32_t epoch)
{
	struct sim_node *n = user;
	if (n->sim->peer_event)
		n->sim->peer_event(n, peer, ev, epoch);
}

static void *sim_cb_rx_place(void *user, uint16_t peer, uint16_t stream,
			     uint32_t msg_id, size_t len)
{
	struct sim_node *n = user;
	return n->sim->rx_place ? n->sim->rx_place(n, peer, stream, msg_id, len)
				: NULL;
}
static void sim_cb_rx_unplace(void *user, uint16_t peer, uint16_t stream,
			      uint32_t msg_id)
{
	struct sim_node *n = user;
	ZB_ASSERT(n->sim->rx_unplace != NULL);  /* only placed messages */
	n->sim->rx_unplace(n, peer, stream, msg_id);
}

static void sim_cb_rx_write(void *user, uint16_t peer, uint16_t stream,
			    uint32_t msg_id, uint8_t *buf, size_t off,
			    const uint8_t *data, size_t len)
{
	struct sim_node *n = user;
	n->sim->rx_write(n, peer, stream, msg_id, buf, off, data, len);
}

static bool sim_cb_rx_keep(void *user, uint16_t peer, uint16_t stream,
			   size_t len)
{
	struct sim_node *n = user;
	return n->sim->rx_keep ? n->sim->rx_keep(n, peer, stream, len) : false;
}
static void sim_cb_rx_free(void *user, void *frame)
{
	struct sim_node *n = user;
	ZB_ASSERT(frame != NULL && n->sim->kept_out > 0);
	n->sim->kept_out--;
	n->sim->kept_frees++;
	free(frame);
}

static void sim_cb_rx_free_bulk(void *user, void *const *frames, unsigned n)
{
	struct sim_node *nd = user;
	nd->sim->bulk_calls++;
	if (n == 0 || n > TP_RX_FREE_BULK)
		nd->sim->bulk_over++;
	for (unsigned i = 0; i < n; i++)
		sim_cb_rx_free(user, frames[i]);
}

static const struct tp_ops sim_ops = {
	.tx = sim_tx,
	.deliver = sim_cb_deliver,
	.send_done = sim_cb_send_done,
	.rx_place = sim_cb_rx_place,
	.rx_unplace = sim_cb_rx_unplace,
	.rx_keep = sim_cb_rx_keep,
	.rx_free = sim_cb_rx_free,
	.peer_event = sim_cb_peer_event,
};


static inline void sim_mac(uint16_t id, uint8_t mac[6])
{
	uint8_t m[6] = {0x02, 0x5a, 0x42, 0, (uint8_t)(id >> 8), (uint8_t)id};
	memcpy(mac, m, 6);
}
static inline uint32_t sim_ip(uint16_t id)
{
	uint8_t b[4] = {10, 9, (uint8_t)(id >> 8), (uint8_t)(id + 1)};
	uint32_t ip;
	memcpy(&ip, b, 4);
	return ip;
}

/* Parameters for node `id` of the sim: defaults + addresses. */
static inline void sim_params(struct tp_params *p, uint16_t id, uint32_t epoch)
{
	tp_params_default(p);
	p->node = id;
	p->cluster = 0xC0FFEE;
	p->epoch = epoch;
	sim_mac(id, p->mac);
	p->ip = sim_ip(id);
	p->max_peers = SIM_MAX_NODES;
}

/* What a node started with p checks frames against (lane 0): for taps
 * that decode the frames sent to it. */
static inline struct wire_rx_cfg sim_rx_cfg(const struct tp_params *p)
{
	return (struct wire_rx_cfg){.cluster = p->cluster, .node = p->node,
				    .ip = p->ip, .udp_port = p->udp_port,
				    .frag_max = WIRE_FRAG_MAX(WIRE_MTU_MAX),
				    .msg_max = p->max_message};
}

/* A DATA frame's header decoded against cfg; false for anything else. */
static inline bool sim_data_hdr(const struct wire_rx_cfg *cfg, const uint8_t *f,
				size_t len, struct wire_hdr *h)
{
	struct wire_addr a;
	const uint8_t *pl;
	return wire_decode(f, len, cfg, 0, h, &a, &pl) == WIRE_OK &&
	       h->type == WIRE_T_DATA;
}

/* (Re)create node id with params p and declare all other nodes as peers. */
static inline int sim_node_start(struct sim *s, uint16_t id,
				 const struct tp_params *p)
{
	struct sim_node *n = &s->nodes[id];
	int rc;

	n->sim = s;
	n->id = id;
	struct tp_ops ops = sim_ops;   /* tp_create copies it */
	if (s->rx_write)
		ops.rx_write = sim_cb_rx_write;
	if (s->free_bulk)
		ops.rx_free_bulk = sim_cb_rx_free_bulk;
	rc = tp_create(p, &ops, n, &n->tp);
	if (rc)
		return rc;
	for (uint16_t j = 0; j < s->n; j++) {
		uint8_t mac[6];
		if (j == id)
			continue;
		sim_mac(j, mac);
		rc = tp_peer_add(n->tp, j, mac, sim_ip(j));
		if (rc)
			return rc;
	}
	return 0;
}

static inline void sim_node_stop(struct sim *s, uint16_t id)
{
	tp_destroy(s->nodes[id].tp);
	s->nodes[id].tp = NULL;
}

static inline int sim_init(struct sim *s, int n, const struct sim_link *l,
			   uint64_t seed, uint32_t pool)
{
	memset(s, 0, sizeof(*s));
	s->n = n;
	s->link = *l;
	s->rng = seed;
	s->now = 1000000;  /* t = 1 ms: time 0 means "never" in places */
	s->pool_n = pool;
	s->heap_cap = pool;
	s->heap = calloc(pool, sizeof(*s->heap));
	s->pkts = calloc(pool, sizeof(*s->pkts));
	s->free_pkts = calloc(pool, sizeof(*s->free_pkts));
	s->scratch = malloc(SIM_FRAME_MAX);
	s->tap_buf = malloc(SIM_FRAME_MAX);
	if (!s->heap || !s->pkts || !s->free_pkts || !s->scratch || !s->tap_buf)
		return -ENOMEM;
	for (uint32_t i = 0; i < pool; i++) {
		s->pkts[i].buf = malloc(SIM_FRAME_MAX);
		if (!s->pkts[i].buf)
			return -ENOMEM;
		s->free_pkts[s->free_n++] = &s->pkts[i];
	}
	return 0;
}

/* Drop every packet in flight (e.g. before destroying nodes). */
static inline void sim_flush(struct sim *s)
{
	while (s->heap_n)
		sim_pkt_free(s, heap_pop(s));
}

static inline void sim_fini(struct sim *s)
{
	sim_flush(s);
	for (int i = 0; i < s->n; i++)
		if (s->nodes[i].tp)
			sim_node_stop(s, (uint16_t)i);
	for (uint32_t i = 0; i < s->pool_n; i++)
		free(s->pkts[i].buf);
	free(s->heap);
	free(s->pkts);
	free(s->free_pkts);
	free(s->scratch);
	free(s->tap_buf);
}

/* Give a frame to tp: tp_rx, or with s->keep tp_rx_keep on a malloc'ed
 * copy whose handle is itself (freed here when not kept, else by rx_free).
 * Returns what the transport returned. */
static inline int sim_rx(struct sim *s, struct tp *tp, const uint8_t *frame,
			 size_t len)
{
	if (!s->keep)
		return tp_rx(tp, frame, len, 0, s->now);
	uint8_t *copy = malloc(len ? len : 1);
	ZB_ASSERT(copy != NULL);
	memcpy(copy, frame, len);
	s->kept_out++;   /* until rx_free, or not kept: */
	int rc = tp_rx_keep(tp, copy, len, 0, copy, s->now);
	if (rc != TP_RX_KEPT) {
		s->kept_out--;
		free(copy);
	}
	return rc;
}

/* Deliver one packet to its node (assembling a zero-copy frame). */
static inline void sim_deliver_pkt(struct sim *s, struct sim_pkt *p)
{
	struct sim_node *n = &s->nodes[p->dst];
	const uint8_t *frame = p->buf;

	if (n->tp && !n->down) {
		if (p->zc) {
			memcpy(s->scratch, p->buf, p->hdr_len);
			memcpy(s->scratch + p->hdr_len, p->zc, p->len - p->hdr_len);
			frame = s->scratch;
		}
		s->delivered++;
		sim_rx(s, n->tp, frame, p->len);
	}
	sim_pkt_free(s, p);
}

/* One step: deliver everything due, poll every node, then advance the clock
 * to the next event (at most max_step_ns, at least 1 ns). Returns the new
 * time. */
static inline uint64_t sim_step(struct sim *s, uint64_t max_step_ns)
{
	uint64_t next = s->now + max_step_ns;

	while (s->heap_n && s->heap[0]->t <= s->now)
		sim_deliver_pkt(s, heap_pop(s));
	for (int i = 0; i < s->n; i++) {
		struct sim_node *n = &s->nodes[i];
		uint64_t d;
		if (!n->tp)
			continue;
		d = tp_poll(n->tp, s->now);
		if (d < next)
			next = d;
		d = tp_next_deadline(n->tp);
		if (d < next)
			next = d;
	}
	if (s->heap_n && s->heap[0]->t < next)
		next = s->heap[0]->t;
	if (next <= s->now)
		next = s->now + 1;
	s->now = next;
	return next;
}

/* Run the sim until done() (at most limit_ns of simulated time). */
static inline void sim_run_until(struct sim *s, bool (*done)(void),
				 uint64_t limit_ns)
{
	uint64_t t0 = s->now;
	while (!done() && s->now - t0 < limit_ns)
		sim_step(s, 100000);
}

/* n pseudo-random bytes from seed x (xorshift64, one byte per step). */
static inline void sim_fill_bytes(uint8_t *p, size_t n, uint64_t x)
{
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (uint8_t)x;
	}
}

/* Payload generator and checker shared by tests: 24-byte header
 * {magic, src, dst, stream, index, len, fnv} then PRNG bytes. */
struct sim_msg_hdr {
	uint32_t magic;
	uint16_t src, dst, stream, pad;
	uint32_t index, len, sum;
};
#define SIM_MAGIC 0x5a424d44u

static inline uint32_t sim_fnv(const uint8_t *p, size_t n)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

static inline void sim_fill(uint8_t *buf, size_t len, uint16_t src,
			    uint16_t dst, uint16_t stream, uint32_t index)
{
	uint64_t x = ((uint64_t)src << 48) ^ ((uint64_t)dst << 32) ^
		     ((uint64_t)stream << 16) ^ index ^ 0x1234567890abcdefull;
	size_t off = sizeof(struct sim_msg_hdr);
	struct sim_msg_hdr h = {SIM_MAGIC, src, dst, stream, 0, index,
				(uint32_t)len, 0};

	if (len < off) {   /* tiny messages: a byte pattern only */
		for (size_t i = 0; i < len; i++)
			buf[i] = (uint8_t)(index * 7 + i + stream);
		return;
	}
	for (size_t i = off; i < len; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(buf + i, &x, len - i < 8 ? len - i : 8);
	}
	h.sum = sim_fnv(buf + off, len - off);
	memcpy(buf, &h, sizeof(h));
}

/* 1 when buf is exactly what sim_fill(src, dst, stream, index) makes. */
static inline int sim_check(const uint8_t *buf, size_t len, size_t want_len,
			    uint16_t src, uint16_t dst, uint16_t stream,
			    uint32_t index)
{
	struct sim_msg_hdr h;
	size_t off = sizeof(h);

	if (len != want_len)
		return 0;
	if (len < off) {
		for (size_t i = 0; i < len; i++)
			if (buf[i] != (uint8_t)(index * 7 + i + stream))
				return 0;
		return 1;
	}
	memcpy(&h, buf, sizeof(h));
	return h.magic == SIM_MAGIC && h.src == src && h.dst == dst &&
	       h.stream == stream && h.index == index && h.len == len &&
	       h.sum == sim_fnv(buf + off, len - off);
}

#endif /* ZBMD_TEST_SIM_H */
