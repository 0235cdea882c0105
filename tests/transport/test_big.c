/* A 256 MiB message over a lossy simulated link arrives intact, sent
 * zero-copy from the caller's buffer (kept alive by its reference until the
 * last frame is gone) and delivered as one buffer from the reassembly arena.
 * Small messages on another stream overtake it (no head-of-line blocking
 * across streams). It is at least stream_min: its fragments are whole
 * 64-byte lines (the small ones use the full fragment size), reassembled
 * with streaming stores. */
#include "tap.h"
#include "sim.h"

#define BIG (256u << 20)

static struct sim S;
static int big_done = 99, big_got, small_got, small_before_big, freed;
static uint64_t *big_buf;

static void fill(uint64_t *p, size_t n, uint64_t x)
{
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = x;
	}
}

static size_t check(const uint64_t *p, size_t n, uint64_t x)
{
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		if (p[i] != x)
			return i;
	}
	return n;
}

static int deliver(struct sim_node *n, struct tp_msg *m)
{
	if (m->stream == 0) {
		big_got++;
		ok(m->len == BIG, "256 MiB message delivered whole (%zu bytes)", m->len);
		ok(((uintptr_t)m->data & 63) == 0, "delivered buffer is 64-byte aligned");
		is_int(check((const uint64_t *)m->data, BIG / 8, 0x9e3779b97f4a7c15ull),
		       BIG / 8, "content intact (every 64-bit word checked)");
	} else {
		small_got++;
		if (!big_got)
			small_before_big++;
	}
	tp_msg_release(n->tp, m);
	return 0;
}

static void send_done(struct sim_node *n, uint64_t cookie, int status)
{
	(void)n;
	if (cookie == 1)
		big_done = status;
}

/* fragment sizes seen in node 0's data frames, per stream */
static uint32_t frag_min[2] = {UINT32_MAX, UINT32_MAX}, frag_max_seen[2];
static struct wire_rx_cfg rx1;

static void tap(struct sim *s, uint16_t src, const uint8_t *f, size_t len)
{
	struct wire_hdr h;

	(void)s;
	if (src != 0 || !sim_data_hdr(&rx1, f, len, &h) || h.stream > 1)
		return;
	if (h.frag_size < frag_min[h.stream])
		frag_min[h.stream] = h.frag_size;
	if (h.frag_size > frag_max_seen[h.stream])
		frag_max_seen[h.stream] = h.frag_size;
}

static void big_free(struct tp_ref *r)
{
	(void)r;
	freed++;
}

int main(void)
{
	struct sim_link lossy = {.loss = 0.02, .dup = 0.01, .reorder = 0.10,
				 .delay_ns = 5000, .reorder_ns = 20000};
	struct tp_params p;
	struct tp_ref ref;
	uint64_t t0;
	int rc;

	tap_plan(12);
	big_buf = aligned_alloc(64, BIG);
	ZB_ASSERT(big_buf != NULL);
	fill(big_buf, BIG / 8, 0x9e3779b97f4a7c15ull);
	ZB_ASSERT(sim_init(&S, 2, &lossy, 5, 1 << 14) == 0);
	S.deliver = deliver;
	S.tap = tap;
	S.send_done = send_done;
	for (uint16_t i = 0; i < 2; i++) {
		sim_params(&p, i, 10 + i);
		p.window = 1024;
		ZB_ASSERT(sim_node_start(&S, i, &p) == 0);
		if (i == 1)
			rx1 = sim_rx_cfg(&p);
	}
	ZB_ASSERT(BIG >= p.stream_min && p.stream_min > 0);
	tp_ref_init(&ref, big_free);
	rc = tp_send(S.nodes[0].tp, 1, 0, big_buf, BIG, &ref, 1, S.now);
	tp_ref_put(&ref);   /* ours; the transport and the link hold theirs */
	is_int(rc, 0, "tp_send accepts a 256 MiB message");
	for (uint32_t i = 0; i < 100; i++) {
		char msg[64];
		snprintf(msg, sizeof(msg), "small %u", i);
		ZB_ASSERT(tp_send(S.nodes[0].tp, 1, 1, msg, sizeof(msg), NULL, 100 + i,
				  S.now) == 0);
	}
	t0 = S.now;
	while (big_done == 99 && S.now - t0 < 60ull * 1000000000ull)
		sim_step(&S, 100000);
	is_int(big_done, 0, "send_done reports success");
	is_int(big_got, 1, "delivered exactly once");
	is_int(small_got, 100, "100 small messages on stream 1 delivered");
	ok(small_before_big == 100, "... all before the big one completed (no head-of-line blocking)");
	{
		const struct tp_stats *a = tp_stats(S.nodes[0].tp);
		tap_diag("%" PRIu64 " data frames, %" PRIu64 " retransmits, link lost %" PRIu64
			 ", sim time %.3f s", a->data_frames_tx, a->retransmits,
			 S.dropped, (S.now - t0) / 1e9);
		ok(a->retransmits > 0 && S.dropped > 0, "losses happened and were repaired");
	}
	ok(frag_min[0] == frag_max_seen[0] &&
	   frag_min[0] == (WIRE_FRAG_MAX(p.mtu) & ~63u),
	   "the big message's fragments are whole cache lines: %u .. %u bytes (mtu %u)",
	   frag_min[0], frag_max_seen[0], p.mtu);
	ok(frag_min[1] == frag_max_seen[1] &&
	   frag_min[1] == (WIRE_FRAG_MAX(p.mtu) & ~7u),
	   "small messages keep the full fragment size: %u .. %u bytes",
	   frag_min[1], frag_max_seen[1]);
	sim_fini(&S);
	is_int(freed, 1, "payload reference released once, after the last frame");
	free(big_buf);
	return tap_done();
}
