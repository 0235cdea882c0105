/* Streams share a peer's window round robin: a stream with a large message
 * queued does not hold back the others, several bulk streams advance
 * together (one fragment each in turn), and a stream left alone (the
 * others drained) goes on at full pace. */
#include "tap.h"
#include "sim.h"

#define BIG (4u << 20)
#define MID (1u << 20)
#define NS 16                       /* streams per peer */
#define WIN 64                      /* window: the first WIN frames go before
				     * later sends are queued */
#define RR_FRAMES 400               /* data frames checked for turns */

static struct sim S;
static struct wire_rx_cfg rx1;
static uint8_t *bufs[4];
static const uint16_t bulk_stream[4] = {0, 3, 9, 15};

/* node 0's data frames in send order, the stream of each (the sim's link
 * loses nothing: no retransmissions among them) */
static uint16_t order[200000];
static uint32_t norder;
static int done_ok, done_err, bad;

static void tap(struct sim *s, uint16_t src, const uint8_t *f, size_t len)
{
	struct wire_hdr h;

	(void)s;
	if (src != 0 || !sim_data_hdr(&rx1, f, len, &h))
		return;
	if (norder < sizeof(order) / sizeof(order[0]))
		order[norder++] = h.stream;
}

static int deliver(struct sim_node *n, struct tp_msg *m)
{
	int k = -1;
	for (int i = 0; i < 4; i++)
		if (bulk_stream[i] == m->stream)
			k = i;
	if (m->stream == 5) {
		if (m->len != 1000 || memcmp(m->data, bufs[1], 1000))
			bad++;
	} else if (k < 0 || m->len != (k ? MID : BIG) ||
		   memcmp(m->data, bufs[k], m->len)) {
		bad++;
	}
	tp_msg_release(n->tp, m);
	return 0;
}

static void send_done(struct sim_node *n, uint64_t cookie, int status)
{
	(void)n;
	(void)cookie;
	if (status != 0)
		done_err++;
	else
		done_ok++;
}

/* Among recorded frames from..from+n-1, the largest difference between
 * two counts of the streams in `set`. */
static uint32_t spread(uint32_t from, uint32_t n, const uint16_t *set, int nset)
{
	uint32_t cnt[NS] = {0}, lo = UINT32_MAX, hi = 0;
	for (uint32_t i = from; i < from + n && i < norder; i++)
		cnt[order[i]]++;
	for (int k = 0; k < nset; k++) {
		if (cnt[set[k]] < lo)
			lo = cnt[set[k]];
		if (cnt[set[k]] > hi)
			hi = cnt[set[k]];
	}
	return hi - lo;
}

static uint32_t first_of(uint16_t stream)
{
	for (uint32_t i = 0; i < norder; i++)
		if (order[i] == stream)
			return i;
	return UINT32_MAX;
}

static uint32_t last_of(uint16_t stream)
{
	for (uint32_t i = norder; i-- > 0;)
		if (order[i] == stream)
			return i;
	return UINT32_MAX;
}

int main(void)
{
	struct sim_link l = {.delay_ns = 5000};
	struct tp_params p;

	tap_plan(8);
	ZB_ASSERT(sim_init(&S, 2, &l, 7, 1 << 14) == 0);
	S.deliver = deliver;
	S.send_done = send_done;
	S.tap = tap;
	for (uint16_t i = 0; i < 2; i++) {
		sim_params(&p, i, 20 + i);
		p.window = WIN;
		p.streams = NS;
		ZB_ASSERT(sim_node_start(&S, i, &p) == 0);
		if (i == 1)
			rx1 = sim_rx_cfg(&p);
	}
	for (int k = 0; k < 4; k++) {
		size_t len = k == 0 ? BIG : MID;
		bufs[k] = malloc(len);
		ZB_ASSERT(bufs[k] != NULL);
		for (size_t i = 0; i < len; i++)
			bufs[k][i] = (uint8_t)(i * 7 + k);
	}

	/* 1. a 4 MiB message on stream 0, then 1000 bytes on stream 5 */
	struct tp *t0 = S.nodes[0].tp;
	is_int(tp_send(t0, 1, bulk_stream[0], bufs[0], BIG, NULL, bulk_stream[0], S.now) +
		       tp_send(t0, 1, 5, bufs[1], 1000, NULL, 5, S.now), 0,
	       "a 4 MiB message on stream 0 and a small one on stream 5 accepted");
	uint64_t start = S.now;
	while (done_ok + done_err < 2 && S.now - start < 10ull * 1000000000ull)
		sim_step(&S, 100000);
	uint32_t at = first_of(5);
	tap_diag("the small message's frame went out as data frame %u of %u", at, norder);
	ok(done_ok == 2 && at <= WIN + 2,
	   "the small message did not wait for the large one (frame %u)", at);

	/* 2. four bulk streams at once: they take turns, one frame each */
	norder = 0;
	done_ok = done_err = 0;
	int accepted = 0;
	for (int k = 0; k < 4; k++)
		accepted += tp_send(t0, 1, bulk_stream[k], bufs[k], k == 0 ? BIG : MID,
				    NULL, bulk_stream[k], S.now) == 0;
	is_int(accepted, 4, "a 4 MiB and three 1 MiB messages on 4 streams accepted");
	start = S.now;
	while (done_ok + done_err < 4 && S.now - start < 20ull * 1000000000ull)
		sim_step(&S, 100000);
	is_int(done_ok, 4, "all four completed");
	is_int(bad, 0, "each delivered whole on its stream");
	uint32_t sp = spread(WIN, RR_FRAMES, bulk_stream, 4);
	tap_diag("data frames %u..%u: per-stream counts differ by %u", WIN,
		 WIN + RR_FRAMES - 1, sp);
	ok(norder >= WIN + RR_FRAMES && sp <= 1, "round robin: the four streams "
	   "take turns once the first window is out (spread %u)", sp);
	/* the three 1 MiB messages end within one round of each other; the
	 * 4 MiB one then runs alone */
	uint32_t lo = UINT32_MAX, hi = 0;
	for (int k = 1; k < 4; k++) {
		uint32_t e = last_of(bulk_stream[k]);
		if (e < lo)
			lo = e;
		if (e != UINT32_MAX && e > hi)
			hi = e;
	}
	ok(lo != UINT32_MAX && hi - lo <= 3,
	   "the three 1 MiB messages' last frames went out together (frames %u..%u)",
	   lo, hi);
	uint32_t alone = 0, others = 0;
	for (uint32_t i = hi + 1; i < norder; i++) {
		alone += order[i] == bulk_stream[0];
		others += order[i] != bulk_stream[0];
	}
	ok(hi != 0 && alone > 1000 && others == 0,
	   "then stream 0 alone to its end (%u frames, %u of other streams)",
	   alone, others);

	sim_fini(&S);
	for (int k = 0; k < 4; k++)
		free(bufs[k]);
	return tap_done();
}
