/* Receive without copying (tp_ops.rx_keep, tp_rx_keep): a message whose
 * consumer takes it as frames is delivered as its received frames, in
 * fragment order, never copied — across loss, duplication and reordering;
 * the frames stay valid while the consumer holds the message and each goes
 * back to the link exactly once (rx_free) when it is released, when a
 * session reset drops the partial message, or at tp_destroy. Messages the
 * consumer declines, small ones, and ones the segment table has no room
 * for go through the arena as before. Frames that reach the transport
 * without a handle (here: fault injection holding frames back) are not
 * kept; their fragments are sent again. */
#include "tap.h"
#include "sim.h"

#define NMSG 160
#define KEEP_MIN (16u << 10)

static struct sim S;
static uint8_t *src[NMSG];
static size_t len_of[NMSG];
static int delivered[NMSG], intact[NMSG], kept_as[NMSG], layout_ok[NMSG];
static int order_bad[2], send_status[NMSG];
static uint32_t next_id[2];
static bool keep_stream1;                /* rx_keep: stream 1 too */
static int keep_asks;
static struct tp_msg *held[8];           /* delivered, released later */
static int nheld, hold_want;

static size_t size_of(uint32_t i)
{
	/* 1 B .. 300 KiB: below and above KEEP_MIN, odd lengths */
	return 1 + (size_t)(i * 104729u) % (300u << 10);
}

static uint32_t index_of(uint16_t stream, uint32_t msg_id)
{
	/* message i goes on stream i % 2 */
	return msg_id * 2 + stream;
}

static bool rx_keep(struct sim_node *n, uint16_t peer, uint16_t stream,
		    size_t len)
{
	(void)n;
	(void)peer;
	ZB_ASSERT(len >= KEEP_MIN);
	keep_asks++;
	return stream == 0 || keep_stream1;
}

/* the kept layout: nsegs fragments of seg_size bytes, the last the rest */
static bool layout(const struct tp_msg *m)
{
	size_t sum = 0;
	if (m->data != NULL || m->nsegs == 0 || m->seg_size == 0 ||
	    m->nsegs != (m->len + m->seg_size - 1) / m->seg_size)
		return false;
	for (uint32_t i = 0; i < m->nsegs; i++) {
		if (!m->segs[i].data || !m->segs[i].frame)
			return false;
		sum += tp_seg_len(m, i);
	}
	return sum == m->len;
}

static bool same(const struct tp_msg *m, const uint8_t *want)
{
	uint8_t *got = malloc(m->len ? m->len : 1);
	ZB_ASSERT(got != NULL);
	/* in pieces across segment boundaries, then whole */
	size_t step = 1000;
	for (size_t o = 0; o < m->len; o += step)
		tp_msg_read(m, o, got + o, m->len - o < step ? m->len - o : step);
	bool eq = !memcmp(got, want, m->len);
	memset(got, 0, m->len);
	tp_msg_read(m, 0, got, m->len);
	eq = eq && !memcmp(got, want, m->len);
	free(got);
	return eq;
}

static int deliver(struct sim_node *n, struct tp_msg *m)
{
	if (m->stream < 2) {
		uint32_t i = index_of(m->stream, m->msg_id);
		if (i < NMSG) {
			if (m->msg_id != next_id[m->stream])
				order_bad[m->stream]++;
			next_id[m->stream] = m->msg_id + 1;
			delivered[i]++;
			kept_as[i] = m->segs != NULL;
			layout_ok[i] = m->segs ? layout(m) : m->data != NULL || !m->len;
			intact[i] = m->len == len_of[i] && same(m, src[i]);
			if (m->segs && nheld < hold_want) {
				held[nheld++] = m;   /* checked again later */
				return 0;
			}
		}
	}
	tp_msg_release(n->tp, m);
	return 0;
}

static void send_done(struct sim_node *n, uint64_t cookie, int status)
{
	(void)n;
	if (cookie < NMSG)
		send_status[cookie] = status;
}

static void start(const struct sim_link *l, uint64_t seed, uint32_t frames,
		  const struct tp_fault *fault, bool bulk)
{
	struct tp_params p;

	ZB_ASSERT(sim_init(&S, 2, l, seed, 1 << 14) == 0);
	S.free_bulk = bulk;
	S.deliver = deliver;
	S.send_done = send_done;
	S.rx_keep = rx_keep;
	S.keep = true;
	for (uint16_t i = 0; i < 2; i++) {
		sim_params(&p, i, 10 + i);
		p.window = 256;
		p.streams = 2;
		p.rx_keep_min = KEEP_MIN;
		p.rx_keep_frames = frames;
		if (i == 1 && fault)
			p.fault = *fault;
		ZB_ASSERT(sim_node_start(&S, i, &p) == 0);
	}
	memset(delivered, 0, sizeof(delivered));
	memset(intact, 0, sizeof(intact));
	memset(kept_as, 0, sizeof(kept_as));
	memset(layout_ok, 0, sizeof(layout_ok));
	memset(send_status, 0x7f, sizeof(send_status));
	memset(order_bad, 0, sizeof(order_bad));
	memset(next_id, 0, sizeof(next_id));
	keep_stream1 = false;
	keep_asks = nheld = hold_want = 0;
}

static bool sends_done(void)
{
	for (uint32_t i = 0; i < NMSG; i++)
		if (send_status[i] == 0x7f7f7f7f)
			return false;
	return true;
}

static void send_all(uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		len_of[i] = size_of(i);
		sim_fill_bytes(src[i], len_of[i], i + 1);
		ZB_ASSERT(tp_send(S.nodes[0].tp, 1, (uint16_t)(i % 2), src[i],
				  len_of[i], NULL, i, S.now) == 0);
	}
}

/* what should have been kept: stream 0 (and 1 when asked), at least
 * KEEP_MIN bytes */
static int want_kept(uint32_t n, bool s1)
{
	int k = 0;
	for (uint32_t i = 0; i < n; i++)
		k += len_of[i] >= KEEP_MIN && (i % 2 == 0 || s1);
	return k;
}

/* 1. a lossy link; stream 0 kept, stream 1 declined; some held a while */
/* bulk: the frames go back through rx_free_bulk, as the dataplane's */
static void lossy(bool bulk)
{
	struct sim_link l = {.loss = 0.05, .dup = 0.02, .reorder = 0.2,
			     .delay_ns = 5000, .reorder_ns = 30000};
	int all = 0, good = 0, lay = 0, kept = 0, kept_right = 0;

	start(&l, 11, 4096, NULL, bulk);
	hold_want = 4;
	send_all(NMSG);
	sim_run_until(&S, sends_done, 120ull * 1000000000ull);
	for (uint32_t i = 0; i < NMSG; i++) {
		all += delivered[i] == 1;
		good += intact[i];
		lay += layout_ok[i];
		kept += kept_as[i];
		kept_right += kept_as[i] == (len_of[i] >= KEEP_MIN && i % 2 == 0);
	}
	const struct tp_stats *st = tp_stats(S.nodes[1].tp);
	tap_diag("lossy%s: %" PRIu64 " lost, %" PRIu64 " duplicated, %" PRIu64
		 " reordered; %d of %d kept, %" PRIu64 " frames kept",
		 bulk ? " (rx_free_bulk)" : "", S.dropped, S.duplicated,
		 S.reordered, kept, NMSG, st->frames_kept);
	ok(S.dropped > 0 && S.duplicated > 0 && S.reordered > 0,
	   "the link lost, duplicated and reordered frames");
	is_int(all, NMSG, "every message delivered exactly once");
	is_int(order_bad[0] + order_bad[1], 0, "in order on both streams");
	is_int(good, NMSG, "every content intact (read across segment boundaries)");
	is_int(lay, NMSG, "kept ones: nsegs fragments in order, seg_size each but the last");
	ok(kept > 20, "messages were kept (%d)", kept);
	is_int(kept_right, NMSG, "kept exactly the large ones of the stream whose consumer said yes");
	is_int((int)st->msgs_kept, kept, "stats: msgs_kept");
	is_int(keep_asks, want_kept(NMSG, true), "rx_keep asked once per large message");
	uint32_t frames_held = 0;
	for (int h = 0; h < nheld; h++)
		frames_held += held[h]->nsegs;
	ok(st->dup_frames > 0 && S.kept_out == (int64_t)frames_held,
	   "duplicates seen; only the %d held messages' frames are still out", nheld);
	/* the held ones: still intact after all the later traffic */
	int still = 0;
	int64_t out_before = S.kept_out;
	for (int h = 0; h < nheld; h++) {
		uint32_t i = index_of(held[h]->stream, held[h]->msg_id);
		still += same(held[h], src[i]);
		tp_msg_release(S.nodes[1].tp, held[h]);
	}
	is_int(still, nheld, "held messages' frames unchanged while held (%d)", nheld);
	ok(out_before == (int64_t)frames_held && S.kept_out == 0,
	   "releasing them gave back exactly their frames (%" PRId64 ")", out_before);
	is_int((int)S.kept_frees, (int)st->frames_kept, "every kept frame freed once");
	if (bulk)
		ok(S.bulk_calls > 0 && S.bulk_calls < S.kept_frees && S.bulk_over == 0,
		   "given back in batches of 1..%d (%" PRIu64 " calls for %" PRIu64 " frames)",
		   TP_RX_FREE_BULK, S.bulk_calls, S.kept_frees);
	sim_fini(&S);
	ok(S.kept_out == 0, "nothing left after tp_destroy");
}

/* 2. a segment table too small for the large messages: the arena instead */
static void no_room(void)
{
	struct sim_link l = {.loss = 0.01, .delay_ns = 5000};
	int good = 0, kept = 0, arena_large = 0;

	start(&l, 12, 64, NULL, false);   /* 64 frames: ~90 KiB at MTU 1500 */
	send_all(NMSG);
	sim_run_until(&S, sends_done, 120ull * 1000000000ull);
	for (uint32_t i = 0; i < NMSG; i++) {
		good += delivered[i] == 1 && intact[i] && layout_ok[i];
		kept += kept_as[i];
		arena_large += !kept_as[i] && len_of[i] > (100u << 10) && i % 2 == 0;
	}
	const struct tp_stats *st = tp_stats(S.nodes[1].tp);
	is_int(good, NMSG, "every message once, intact");
	ok(kept > 0 && arena_large > 0 && st->keep_no_room > 0,
	   "small kept ones kept (%d); larger ones copied (%d, keep_no_room %" PRIu64 ")",
	   kept, arena_large, st->keep_no_room);
	ok(S.kept_out == 0, "no frame left held");
	sim_fini(&S);
}

/* 3. a session reset with a partial kept message: its frames go back */
static void reset_partial(void)
{
	/* frames spread over 2 ms: the test can cut the link mid-message */
	struct sim_link l = {.delay_ns = 5000, .jitter_ns = 2000000};

	start(&l, 13, 4096, NULL, true);   /* the dropped frames: rx_free_bulk */
	len_of[0] = 280u << 10;
	sim_fill_bytes(src[0], len_of[0], 99);
	S.link.loss = 0;
	ZB_ASSERT(tp_send(S.nodes[0].tp, 1, 0, src[0], len_of[0], NULL, 0, S.now) == 0);
	/* let part of it through, then cut the link */
	uint64_t t0 = S.now;
	while (tp_stats(S.nodes[1].tp)->frames_kept < 50 && S.now - t0 < 1000000000ull)
		sim_step(&S, 1000);
	S.block[0][1] = true;
	int64_t out = S.kept_out;
	ok(out >= 50 && delivered[0] == 0, "a partial kept message holds %" PRId64 " frames", out);
	tp_peer_reset(S.nodes[1].tp, 0, S.now);
	ok(S.kept_out == 0, "session reset: its frames given back (%" PRId64 " left)", S.kept_out);
	S.block[0][1] = false;
	sim_run_until(&S, sends_done, 30ull * 1000000000ull);
	ok(send_status[0] != 0 && delivered[0] == 0,
	   "its sender got an error (%d), nothing delivered", send_status[0]);
	/* a partial one at tp_destroy */
	len_of[1] = 200u << 10;
	sim_fill_bytes(src[1], len_of[1], 7);
	ZB_ASSERT(tp_send(S.nodes[0].tp, 1, 0, src[1], len_of[1], NULL, 1, S.now) == 0);
	t0 = S.now;
	while (tp_stats(S.nodes[1].tp)->frames_kept < 80 && S.now - t0 < 1000000000ull)
		sim_step(&S, 1000);
	S.block[0][1] = true;
	ok(S.kept_out > 0, "another partial kept message (%" PRId64 " frames)", S.kept_out);
	sim_flush(&S);
	sim_node_stop(&S, 1);
	ok(S.kept_out == 0, "tp_destroy gave its frames back");
	sim_fini(&S);
}

/* 4. fault injection in the receiving transport: frames it holds back come
 * without a handle; kept messages' fragments among them are sent again */
static void faults(void)
{
	struct sim_link l = {.delay_ns = 5000};
	struct tp_fault f = {.drop_rate = 0.02, .dup_rate = 0.02,
			     .reorder_rate = 0.1, .seed = 5};
	int good = 0, kept = 0;

	start(&l, 14, 4096, &f, false);
	keep_stream1 = true;
	send_all(NMSG);
	sim_run_until(&S, sends_done, 120ull * 1000000000ull);
	for (uint32_t i = 0; i < NMSG; i++) {
		good += delivered[i] == 1 && intact[i] && layout_ok[i];
		kept += kept_as[i];
	}
	const struct tp_stats *st = tp_stats(S.nodes[1].tp);
	is_int(good, NMSG, "every message once, intact, in its layout");
	is_int(order_bad[0] + order_bad[1], 0, "in order");
	/* a message whose first fragment seen was held back goes to the
	 * arena (nothing to keep); the rest are kept */
	int want = want_kept(NMSG, true);
	ok(kept <= want && kept >= want * 3 / 4 && (int)st->msgs_kept == kept,
	   "large messages kept: %d of %d", kept, want);
	ok(st->keep_unkept > 0 && st->fault_reorders > 0,
	   "held-back frames of kept messages were refused and resent (%" PRIu64 ")",
	   st->keep_unkept);
	ok(S.kept_out == 0, "no frame left held");
	sim_fini(&S);
}

int main(void)
{
	for (uint32_t i = 0; i < NMSG; i++) {
		src[i] = malloc(300u << 10);
		ZB_ASSERT(src[i] != NULL);
	}
	tap_plan(42);
	lossy(false);
	lossy(true);
	no_room();
	reset_partial();
	faults();
	for (uint32_t i = 0; i < NMSG; i++)
		free(src[i]);
	return tap_done();
}
