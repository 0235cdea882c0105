/* Receive in place (tp_ops.rx_place): a message whose consumer offers a
 * buffer is reassembled straight into it — once per message, across loss,
 * duplication and reordering — and the others go through the arena as
 * before. tp_rx_detach takes a buffer back mid-message (the rest lands in
 * the arena, the content stays intact, the buffer is never written again);
 * without arena room it resets the session instead. A session reset hands a
 * partial message's buffer back through rx_unplace. */
#include "tap.h"
#include "sim.h"

#define NMSG 200
#define POISON 0xA5

static struct sim S;
static uint8_t *src[NMSG], *dst[NMSG];
static size_t len_of[NMSG];
static int place_calls[NMSG], delivered[NMSG], in_place[NMSG], intact[NMSG];
static int order_bad, unplaced, unplace_id = -1, send_status[NMSG + 8];
static uint32_t next_id;
static bool offer = true;          /* rx_place offers buffers */
static bool hold_stream1;          /* deliver: keep stream 1's message */
static struct tp_msg *held;

static size_t size_of(uint32_t i)
{
	return 1 + (size_t)(i * 7919u) % (192u << 10);
}

static void *place(struct sim_node *n, uint16_t peer, uint16_t stream,
		   uint32_t id, size_t len)
{
	(void)n;
	ZB_ASSERT(peer == 0);
	if (stream != 0 || id >= NMSG || !offer)
		return NULL;
	place_calls[id]++;
	ZB_ASSERT(len == len_of[id]);
	return id % 2 == 0 ? dst[id] : NULL;   /* odd ones: the arena */
}

static void unplace(struct sim_node *n, uint16_t peer, uint16_t stream,
		    uint32_t id)
{
	(void)n;
	(void)peer;
	(void)stream;
	unplaced++;
	unplace_id = (int)id;
}

static int deliver(struct sim_node *n, struct tp_msg *m)
{
	if (m->stream == 1 && hold_stream1) {
		held = m;
		return 0;
	}
	if (m->stream == 0 && m->msg_id < NMSG) {
		uint32_t i = m->msg_id;
		if (i != next_id)
			order_bad++;
		next_id = i + 1;
		delivered[i]++;
		in_place[i] = m->data == dst[i];
		intact[i] = m->len == len_of[i] && !memcmp(m->data, src[i], m->len);
	}
	tp_msg_release(n->tp, m);
	return 0;
}

static void send_done(struct sim_node *n, uint64_t cookie, int status)
{
	(void)n;
	if (cookie < NMSG + 8)
		send_status[cookie] = status;
}

static bool all_poison(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != POISON)
			return false;
	return true;
}

static void start(const struct sim_link *l, uint64_t seed, size_t arena)
{
	struct tp_params p;

	ZB_ASSERT(sim_init(&S, 2, l, seed, 1 << 14) == 0);
	S.deliver = deliver;
	S.send_done = send_done;
	S.rx_place = place;
	S.rx_unplace = unplace;
	for (uint16_t i = 0; i < 2; i++) {
		sim_params(&p, i, 10 + i);
		p.window = 256;
		p.streams = 2;
		if (i == 1 && arena)
			p.rx_arena_bytes = arena;
		ZB_ASSERT(sim_node_start(&S, i, &p) == 0);
	}
}

static void reset_state(void)
{
	memset(place_calls, 0, sizeof(place_calls));
	memset(delivered, 0, sizeof(delivered));
	memset(in_place, 0, sizeof(in_place));
	memset(intact, 0, sizeof(intact));
	memset(send_status, 0x7f, sizeof(send_status));
	order_bad = unplaced = 0;
	unplace_id = -1;
	next_id = 0;
	offer = true;
	hold_stream1 = false;
	held = NULL;
}

static uint32_t want_done;
static bool sends_done(void)
{
	for (uint32_t i = 0; i < want_done; i++)
		if (send_status[i] == 0x7f7f7f7f)
			return false;
	return true;
}

static uint64_t rx_bytes_target;
static bool got_some(void)
{
	return tp_stats(S.nodes[1].tp)->payload_bytes_rx >= rx_bytes_target;
}

/* 1. many messages over a lossy link, every other one in place */
static void lossy_many(void)
{
	struct sim_link l = {.loss = 0.05, .dup = 0.02, .reorder = 0.2,
			     .delay_ns = 5000, .reorder_ns = 30000};
	int placed = 0, ok_place = 0, ok_arena = 0, once = 0, all = 0, good = 0;

	reset_state();
	start(&l, 7, 0);
	for (uint32_t i = 0; i < NMSG; i++) {
		len_of[i] = size_of(i);
		sim_fill_bytes(src[i], len_of[i], i + 1);
		memset(dst[i], 0, len_of[i]);
		ZB_ASSERT(tp_send(S.nodes[0].tp, 1, 0, src[i], len_of[i], NULL, i,
				  S.now) == 0);
	}
	want_done = NMSG;
	sim_run_until(&S, sends_done, 120ull * 1000000000ull);
	for (uint32_t i = 0; i < NMSG; i++) {
		all += delivered[i] == 1;
		good += intact[i];
		once += place_calls[i] == 1;
		if (i % 2 == 0)
			ok_place += in_place[i];
		else
			ok_arena += !in_place[i];
	}
	const struct tp_stats *st = tp_stats(S.nodes[1].tp);
	placed = (int)st->msgs_placed;
	tap_diag("lossy: %" PRIu64 " frames lost, %" PRIu64 " duplicated, %" PRIu64
		 " reordered; %" PRIu64 " retransmits", S.dropped, S.duplicated,
		 S.reordered, tp_stats(S.nodes[0].tp)->retransmits);
	ok(S.dropped > 0 && S.duplicated > 0 && S.reordered > 0,
	   "the link lost, duplicated and reordered frames");
	is_int(all, NMSG, "every message delivered exactly once");
	is_int(order_bad, 0, "in order");
	is_int(good, NMSG, "every content intact");
	is_int(once, NMSG, "rx_place asked once per message (not per fragment or duplicate)");
	is_int(ok_place, NMSG / 2, "offered buffers: delivered in place (m->data is the buffer)");
	is_int(ok_arena, NMSG / 2, "declined: delivered from the arena");
	is_int(placed, NMSG / 2, "stats: msgs_placed counts the placed ones");
	is_int((int)st->placed_detached, 0, "nothing detached");
	sim_fini(&S);
}

/* 2. detach mid-message: the rest goes to the arena, the buffer stays untouched */
static void detach_mid(void)
{
	struct sim_link l = {.loss = 0.02, .reorder = 0.1, .delay_ns = 5000,
			     .reorder_ns = 20000};
	const uint32_t id = 0;

	reset_state();
	start(&l, 11, 0);
	len_of[id] = 4u << 20;
	sim_fill_bytes(src[id], len_of[id], 99);
	memset(dst[id], 0, len_of[id]);
	ZB_ASSERT(tp_send(S.nodes[0].tp, 1, 0, src[id], len_of[id], NULL, id,
			  S.now) == 0);
	rx_bytes_target = 1u << 20;
	sim_run_until(&S, got_some, 10ull * 1000000000ull);
	ok(got_some() && delivered[id] == 0, "part of a placed 4 MiB message arrived");
	is_int(tp_rx_detach(S.nodes[1].tp, 0, 0, id, S.now), 0,
	       "tp_rx_detach takes the buffer back (arena has room)");
	memset(dst[id], POISON, len_of[id]);
	want_done = 1;
	sim_run_until(&S, sends_done, 30ull * 1000000000ull);
	is_int(send_status[id], 0, "the sender sees success");
	is_int(delivered[id], 1, "delivered once");
	ok(!in_place[id] && intact[id], "from the arena, content intact (also the part "
	   "received before the detach)");
	ok(all_poison(dst[id], len_of[id]), "the detached buffer was never written again");
	is_int((int)tp_stats(S.nodes[1].tp)->placed_detached, 1, "stats: placed_detached");
	is_int(tp_rx_detach(S.nodes[1].tp, 0, 0, id, S.now), 0,
	       "detaching a delivered message: nothing to do");
	sim_fini(&S);
}

/* 3. detach without arena room: the session is reset, the sender told */
static void detach_noroom(void)
{
	struct sim_link l = {.delay_ns = 5000};
	const uint32_t id = 0;
	static uint8_t other[200u << 10];

	reset_state();
	start(&l, 13, 256u << 10);   /* receiver's arena: 256 KiB */
	/* stream 1: a 200 KiB message the consumer holds (arena nearly full) */
	hold_stream1 = true;
	ZB_ASSERT(tp_send(S.nodes[0].tp, 1, 1, other, sizeof(other), NULL, NMSG,
			  S.now) == 0);
	want_done = 0;
	for (int k = 0; k < 20000 && !held; k++)
		sim_step(&S, 100000);
	ok(held != NULL, "a 200 KiB message held by its consumer fills the arena");
	len_of[id] = 1u << 20;   /* larger than the arena: only in place */
	sim_fill_bytes(src[id], len_of[id], 5);
	ZB_ASSERT(tp_send(S.nodes[0].tp, 1, 0, src[id], len_of[id], NULL, id,
			  S.now) == 0);
	rx_bytes_target = sizeof(other) + (256u << 10);
	sim_run_until(&S, got_some, 10ull * 1000000000ull);
	ok(got_some() && delivered[id] == 0,
	   "a 1 MiB message (4x the arena) is being received in place");
	is_int(tp_rx_detach(S.nodes[1].tp, 0, 0, id, S.now), 1,
	       "tp_rx_detach without arena room: dropped with a session reset");
	memset(dst[id], POISON, len_of[id]);
	uint64_t t0 = S.now;
	while (send_status[id] == 0x7f7f7f7f && S.now - t0 < 10ull * 1000000000ull)
		sim_step(&S, 100000);
	is_int(send_status[id], ZB_ERR_EPOCH, "the sender's message fails with ZB_ERR_EPOCH");
	is_int(delivered[id], 0, "the dropped message is never delivered");
	is_int(unplaced, 0, "no rx_unplace for a buffer the consumer took back");
	ok(all_poison(dst[id], len_of[id]), "the buffer was never written again");
	tp_msg_release(S.nodes[1].tp, held);
	sim_fini(&S);
}

/* 4. a session reset with a partial placed message: rx_unplace */
static void reset_unplace(void)
{
	struct sim_link l = {.delay_ns = 5000};
	const uint32_t id = 0;

	reset_state();
	start(&l, 17, 0);
	len_of[id] = 2u << 20;
	sim_fill_bytes(src[id], len_of[id], 3);
	ZB_ASSERT(tp_send(S.nodes[0].tp, 1, 0, src[id], len_of[id], NULL, id,
			  S.now) == 0);
	rx_bytes_target = 512u << 10;
	sim_run_until(&S, got_some, 10ull * 1000000000ull);
	ok(got_some() && delivered[id] == 0, "a 2 MiB message is being received in place");
	is_int(tp_peer_reset(S.nodes[1].tp, 0, S.now), 0, "the receiver resets the session");
	is_int(unplaced, 1, "rx_unplace called once");
	is_int(unplace_id, (int)id, "... for that message");
	memset(dst[id], POISON, len_of[id]);
	uint64_t t0 = S.now;
	while (send_status[id] == 0x7f7f7f7f && S.now - t0 < 10ull * 1000000000ull)
		sim_step(&S, 100000);
	is_int(send_status[id], ZB_ERR_EPOCH, "the sender's message fails with ZB_ERR_EPOCH");
	for (int k = 0; k < 1000; k++)
		sim_step(&S, 100000);
	ok(all_poison(dst[id], len_of[id]), "the buffer was not written after the reset");
	is_int(delivered[id], 0, "not delivered");
	sim_fini(&S);
}

int main(void)
{
	tap_plan(31);
	for (uint32_t i = 0; i < NMSG; i++) {
		size_t cap = i < 2 ? (4u << 20) : (192u << 10) + 64;
		src[i] = aligned_alloc(64, cap);
		dst[i] = aligned_alloc(64, cap);
		ZB_ASSERT(src[i] && dst[i]);
	}
	lossy_many();
	detach_mid();
	detach_noroom();
	reset_unplace();
	for (uint32_t i = 0; i < NMSG; i++) {
		free(src[i]);
		free(dst[i]);
	}
	return tap_done();
}
