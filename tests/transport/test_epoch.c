/* Sessions and epochs: a restarted peer is detected, its stale frames are
 * refused and messages in flight to the old incarnation fail with
 * ZB_ERR_EPOCH; a silent peer is declared down within peer_timeout and its
 * messages fail with ZB_ERR_PEER_DOWN; a session reset by one side never
 * makes the other deliver a message twice; a restart whose epoch compares
 * older (2^31 epochs on) is still taken. */
#include "tap.h"
#include "sim.h"

#define MAXID 4096

struct app {
	uint8_t seen[SIM_MAX_NODES][MAXID];     /* deliveries per (src, id) */
	uint32_t last[SIM_MAX_NODES];           /* last id delivered from src */
	int status[SIM_MAX_NODES][MAXID];       /* send_done per (src node, id) */
	uint8_t done[SIM_MAX_NODES][MAXID];
	uint64_t done_at[SIM_MAX_NODES][MAXID];
	int dups, backwards, events[SIM_MAX_NODES][TP_PEER_RESET + 1];
	uint32_t last_epoch[SIM_MAX_NODES];
	uint8_t *tap_frame;
	size_t tap_len;
	int tap_src;
};
static struct app A;
static struct sim S;
static uint8_t big[64 * 1024];
static struct sim_link LINK = {.delay_ns = 5000};
static uint64_t SEED;

static int deliver(struct sim_node *n, struct tp_msg *m)
{
	uint32_t id;
	ZB_ASSERT(m->len >= 4);
	memcpy(&id, m->data, 4);
	ZB_ASSERT(id < MAXID);
	if (A.seen[m->peer][id]++)
		A.dups++;
	if (A.last[m->peer] && id < A.last[m->peer] && id != 0)
		A.backwards++;
	A.last[m->peer] = id;
	tp_msg_release(n->tp, m);
	return 0;
}

static void send_done(struct sim_node *n, uint64_t cookie, int status)
{
	A.status[n->id][cookie] = status;
	A.done[n->id][cookie]++;
	A.done_at[n->id][cookie] = S.now;
}

static void peer_event(struct sim_node *n, uint16_t peer, enum tp_peer_event ev,
		       uint32_t epoch)
{
	(void)peer;
	A.events[n->id][ev]++;
	A.last_epoch[n->id] = epoch;
}

/* remember the latest frame node tap_src sent */
static void tap(struct sim *s, uint16_t src, const uint8_t *f, size_t len)
{
	(void)s;
	if (src == A.tap_src && len <= SIM_FRAME_MAX) {
		memcpy(A.tap_frame, f, len);
		A.tap_len = len;
	}
}

/* One buffer per (sender, id): the payload must stay unmodified until
 * send_done (retransmissions read it again). Freed by free_bufs(). */
static uint8_t *bufs[SIM_MAX_NODES][MAXID];

static int send_id(uint16_t from, uint16_t to, uint32_t id, size_t len)
{
	uint8_t *b;

	ZB_ASSERT(len >= 4 && len <= sizeof(big) && id < MAXID);
	b = bufs[from][id] = realloc(bufs[from][id], len);
	ZB_ASSERT(b != NULL);
	memset(b, (int)id, len);
	memcpy(b, &id, 4);
	return tp_send(S.nodes[from].tp, to, 0, b, len, NULL, id, S.now);
}

static void free_bufs(void)
{
	for (int n = 0; n < SIM_MAX_NODES; n++)
		for (int i = 0; i < MAXID; i++) {
			free(bufs[n][i]);
			bufs[n][i] = NULL;
		}
}

static void run_for(uint64_t ns)
{
	uint64_t end = S.now + ns;
	while (S.now < end)
		sim_step(&S, 100000);
}

static int count_done(uint16_t node, uint32_t from, uint32_t to, int status)
{
	int c = 0;
	for (uint32_t i = from; i < to; i++)
		c += A.done[node][i] == 1 && A.status[node][i] == status;
	return c;
}

/* Nodes 0 and 1 send each other the ids from .. to - 1 (len bytes each),
 * order checked afresh; true when every one completed with status 0, both
 * ways, within 5 ms. */
static bool exchange(uint32_t from, uint32_t to, size_t len)
{
	int rc = 0, n = (int)(to - from);

	memset(A.last, 0, sizeof(A.last));
	for (uint32_t i = from; i < to; i++) {
		rc |= send_id(0, 1, i, len);
		rc |= send_id(1, 0, i, len);
	}
	run_for(5000000);
	return rc == 0 && count_done(0, from, to, 0) == n && count_done(1, from, to, 0) == n;
}

static void start(uint16_t id, uint32_t epoch, uint32_t timeout_ms)
{
	struct tp_params p;
	sim_params(&p, id, epoch);
	p.peer_timeout_ms = timeout_ms;
	ZB_ASSERT(sim_node_start(&S, id, &p) == 0);
}

static void test_restart(void)
{
	const struct tp_stats *st;
	int rc = 0;

	memset(&A, 0, sizeof(A));
	A.tap_frame = malloc(SIM_FRAME_MAX);
	A.tap_src = 1;
	ZB_ASSERT(sim_init(&S, 2, &LINK, 7 + SEED, 4096) == 0);
	S.deliver = deliver;
	S.send_done = send_done;
	S.peer_event = peer_event;
	S.tap = tap;
	start(0, 100, 1000);
	start(1, 200, 1000);
	for (uint32_t i = 1; i <= 20; i++) {
		rc |= send_id(0, 1, i, 100);
		rc |= send_id(1, 0, i, 100);
	}
	run_for(2000000);
	ok(rc == 0 && count_done(0, 1, 21, 0) == 20 && count_done(1, 1, 21, 0) == 20,
	   "restart: first incarnation exchanges 20 + 20 messages");

	/* node 1 crashes (its link goes dark) while node 0 has data in flight */
	S.nodes[1].down = true;
	A.tap_src = -1;           /* keep the old incarnation's last frame */
	for (uint32_t i = 100; i < 110; i++)
		rc |= send_id(0, 1, i, 20000);   /* 14 frames each */
	run_for(300000);
	ok(rc == 0 && count_done(0, 100, 110, 0) == 0, "restart: 10 messages in flight to the crashed node");
	sim_flush(&S);
	sim_node_stop(&S, 1);
	start(1, 201, 1000);   /* restarted: a newer epoch */
	S.nodes[1].down = false;
	run_for(5000000);
	is_int(count_done(0, 100, 110, ZB_ERR_EPOCH), 10,
	       "restart: every message to the old incarnation fails with ZB_ERR_EPOCH");
	is_int(A.events[0][TP_PEER_RESTARTED], 1, "restart: node 0 saw TP_PEER_RESTARTED once");
	is_int(A.last_epoch[0], 201, "restart: ... with the new epoch");
	st = tp_stats(S.nodes[1].tp);
	ok(st->bad[WIRE_E_STALE_EPOCH] > 0,
	   "restart: new incarnation refused frames addressed to the old one (%" PRIu64 ")",
	   st->bad[WIRE_E_STALE_EPOCH]);
	is_int(A.seen[0][100] + A.seen[0][105], 0, "restart: the new incarnation delivered none of them");

	/* a frame from the old incarnation turns up late: refused, counted */
	{
		uint64_t before = tp_stats(S.nodes[0].tp)->bad[WIRE_E_STALE_EPOCH];
		ok(A.tap_len > 0, "restart: captured a frame of the old incarnation");
		is_int(tp_rx(S.nodes[0].tp, A.tap_frame, A.tap_len, 0, S.now),
		       ZB_ERR_BAD_FRAME, "restart: late frame of the old incarnation refused");
		is_int(tp_stats(S.nodes[0].tp)->bad[WIRE_E_STALE_EPOCH], before + 1,
		       "restart: ... and counted as stale_epoch");
	}
	/* the new session works both ways */
	ok(rc == 0 && exchange(200, 230, 3000), "restart: new session delivers 30 + 30 messages");
	is_int(A.dups + A.backwards, 0, "restart: nothing delivered twice or out of order");
	sim_fini(&S);
	free_bufs();
	free(A.tap_frame);
}

/* Node 1, marked down by node 0, is reachable again: node 0's probe finds
 * it, and the new session carries traffic both ways, exactly once and in
 * order. Ends the scenario (sim_fini). */
static void recovery(const char *name)
{
	struct tp_peer_info pi;

	S.nodes[1].down = false;
	run_for(1000000000);   /* probes go every rto_us_max (200 ms) */
	tp_peer_info(S.nodes[0].tp, 1, &pi);
	is_int(pi.state, 1, "%s: peer is up again after it answers a probe", name);
	ok(exchange(40, 60, 4000), "%s: traffic flows both ways after recovery", name);
	is_int(A.dups + A.backwards, 0, "%s: nothing delivered twice or out of order", name);
	sim_fini(&S);
	free_bufs();
}

/* Two nodes (epochs e, e + 100; peer_timeout_ms timeout_ms) exchange 10
 * messages; then node 1 is cut off and node 0 sends it 10 more (ids 20 -
 * 29), which stay pending. Returns the sends' errors, or'ed. */
static int cut_off(const char *name, uint64_t seed, uint32_t e, uint32_t timeout_ms)
{
	int rc = 0;

	memset(&A, 0, sizeof(A));
	ZB_ASSERT(sim_init(&S, 2, &LINK, seed + SEED, 4096) == 0);
	S.deliver = deliver;
	S.send_done = send_done;
	S.peer_event = peer_event;
	start(0, e, timeout_ms);
	start(1, e + 100, timeout_ms);
	for (uint32_t i = 1; i <= 10; i++)
		rc |= send_id(0, 1, i, 5000);
	run_for(2000000);
	ok(rc == 0 && count_done(0, 1, 11, 0) == 10, "%s: 10 messages delivered while up", name);
	S.nodes[1].down = true;
	for (uint32_t i = 20; i < 30; i++)
		rc |= send_id(0, 1, i, 5000);
	return rc;
}

static void test_down(void)
{
	uint64_t t0, worst = 0;

	(void)cut_off("down", 8, 300, 50);
	t0 = S.now;
	run_for(100000000);   /* 100 ms, twice the timeout */
	is_int(count_done(0, 20, 30, ZB_ERR_PEER_DOWN), 10,
	       "down: every pending message fails with ZB_ERR_PEER_DOWN");
	for (uint32_t i = 20; i < 30; i++)
		if (A.done_at[0][i] - t0 > worst)
			worst = A.done_at[0][i] - t0;
	ok(worst <= 51000000ull, "down: reported within peer_timeout (50 ms): %.3f ms",
	   worst / 1e6);
	is_int(A.events[0][TP_PEER_DOWN], 1, "down: TP_PEER_DOWN event");
	is_int(send_id(0, 1, 31, 100), ZB_ERR_PEER_DOWN,
	       "down: tp_send to a down peer fails at once");

	/* it comes back: the probe finds it, the new session works */
	recovery("down");
}

/* The link says node 1 is gone (tp_peer_down, as a port whose link went
 * down does in the dataplane): node 0 fails what it had for node 1 at once,
 * long before peer_timeout (5 s here), and takes node 1 back when it answers
 * a probe — the same incarnation, in a new session. */
static void test_link_down(void)
{
	const struct tp_stats *st;
	int rc = cut_off("link down", 9, 500, 5000);

	run_for(1000000);   /* 1 ms: in flight, unacknowledged */
	ok(rc == 0 && count_done(0, 20, 30, 0) + count_done(0, 20, 30, ZB_ERR_PEER_DOWN) == 0,
	   "link down: 10 messages pending for the unreachable node");
	is_int(tp_peer_down(S.nodes[0].tp, 1, S.now), 0, "link down: tp_peer_down accepted");
	is_int(count_done(0, 20, 30, ZB_ERR_PEER_DOWN), 10,
	       "link down: every pending message failed with ZB_ERR_PEER_DOWN at once");
	is_int(A.events[0][TP_PEER_DOWN], 1, "link down: TP_PEER_DOWN event");
	st = tp_stats(S.nodes[0].tp);
	ok(st->peer_downs == 1 && st->link_downs == 1,
	   "link down: counted (peer_downs %" PRIu64 ", link_downs %" PRIu64 ")",
	   st->peer_downs, st->link_downs);
	ok(tp_peer_down(S.nodes[0].tp, 1, S.now) == -EALREADY &&
	   tp_peer_down(S.nodes[0].tp, 3, S.now) == -ENOENT &&
	   tp_peer_down(S.nodes[0].tp, 0, S.now) == -ENOENT,
	   "link down: down already -EALREADY, no such peer (or self) -ENOENT");
	is_int(send_id(0, 1, 31, 100), ZB_ERR_PEER_DOWN,
	       "link down: tp_send to the down peer fails at once");

	/* the link is back: a probe finds the same incarnation, new session */
	is_int(A.seen[1][25], 0, "link down: no failed message was delivered");
	recovery("link down");
}

/* Node 1 restarts with an epoch 2160000000 above its last one: realtime
 * milliseconds (dataplane/link.c) 25 days after its previous start, which
 * compares older over 32 bits. talker says which side speaks first after
 * the restart: node 1 (node 0 refuses its frames as stale until its last
 * incarnation has been silent for peer_timeout), or node 0 (node 1 refuses
 * its frames, addressed to an epoch of node 1 that compares newer than its
 * own, and must answer them or node 0 never learns its epoch). Either way
 * the new incarnation is taken within a peer_timeout and traffic flows. */
static void test_epoch_wrap(uint16_t talker)
{
	const char *who = talker ? "wrap, node 1 speaks" : "wrap, node 0 speaks";
	uint32_t e1 = 200;
	uint16_t other = (uint16_t)(1 - talker);
	int rc = 0;

	memset(&A, 0, sizeof(A));
	ZB_ASSERT(sim_init(&S, 2, &LINK, 10 + talker + SEED, 4096) == 0);
	S.deliver = deliver;
	S.send_done = send_done;
	S.peer_event = peer_event;
	start(0, 100, 1000);
	start(1, e1, 1000);
	ok(exchange(1, 11, 3000), "%s: first incarnation exchanges 10 + 10 messages", who);
	sim_flush(&S);
	sim_node_stop(&S, 1);
	start(1, e1 + 2160000000u, 1000);
	for (uint32_t i = 20; i < 25; i++)
		rc |= send_id(talker, other, i, 3000);
	run_for(3000000000ull);   /* 3 s: 3 peer timeouts */
	is_int(A.events[0][TP_PEER_RESTARTED], 1, "%s: node 0 saw TP_PEER_RESTARTED", who);
	is_int(A.last_epoch[0], e1 + 2160000000u, "%s: ... with the new epoch", who);
	ok(rc == 0 && A.done[talker][20] && A.done[talker][24],
	   "%s: the messages sent meanwhile completed (status %d)", who, A.status[talker][24]);
	ok(exchange(30, 60, 3000), "%s: the new session delivers 30 + 30 messages", who);
	is_int(A.dups, 0, "%s: nothing delivered twice", who);
	sim_fini(&S);
	free_bufs();
}

/* Node 0 hears node 1 but node 1 never hears node 0 (one-way link); node 0
 * then resets the session. Node 1's unacknowledged messages must not be
 * delivered a second time by node 0's new session. */
static void test_oneway_reset(void)
{
	struct sim_node *n0;
	int rc = 0, delivered_before;

	memset(&A, 0, sizeof(A));
	ZB_ASSERT(sim_init(&S, 2, &LINK, 9 + SEED, 4096) == 0);
	S.deliver = deliver;
	S.send_done = send_done;
	S.peer_event = peer_event;
	start(0, 500, 1000);
	start(1, 600, 1000);
	n0 = &S.nodes[0];
	S.block[0][1] = true;   /* node 0's frames to node 1 are lost */
	for (uint32_t i = 1; i <= 10; i++)
		rc |= send_id(1, 0, i, 3000);
	run_for(60000000);   /* node 1 retransmits with backoff (1+2+...+32 ms) */
	S.block[0][1] = false;
	delivered_before = 0;
	for (uint32_t i = 1; i <= 10; i++)
		delivered_before += A.seen[1][i];
	ok(delivered_before == 10, "one-way: node 0 delivered node 1's 10 messages (%d)",
	   delivered_before);
	is_int(count_done(1, 1, 11, 0), 0, "one-way: node 1 never got an ack");
	is_int(tp_peer_reset(n0->tp, 1, S.now), 0, "one-way: node 0 resets the session");
	run_for(20000000);
	{
		int twice = 0;
		for (uint32_t i = 1; i <= 10; i++)
			twice += A.seen[1][i] > 1;
		is_int(twice, 0, "one-way: no message delivered twice after the reset");
	}
	is_int(count_done(1, 1, 11, ZB_ERR_EPOCH), 10,
	       "one-way: node 1's unacknowledged messages fail with ZB_ERR_EPOCH");
	memset(A.last, 0, sizeof(A.last));
	for (uint32_t i = 20; i < 30; i++) {
		rc |= send_id(1, 0, i, 3000);
		rc |= send_id(0, 1, i, 3000);
	}
	run_for(5000000);
	ok(rc == 0 && count_done(1, 20, 30, 0) == 10 && count_done(0, 20, 30, 0) == 10,
	   "one-way: the new session carries traffic both ways");
	sim_fini(&S);
	free_bufs();
}

static void lossy(double loss, uint64_t seed)
{
	LINK.loss = loss;
	LINK.dup = loss / 5;
	LINK.reorder = loss * 5;
	LINK.reorder_ns = 20000;
	SEED = seed;
}

int main(int argc, char **argv)
{
	/* test_epoch.t LOSS SEED: only the scenarios over that lossy,
	 * duplicating, reordering link; no arguments: a perfect link, then
	 * 5 % loss with seed 3 */
	if (argc > 1) {
		lossy(strtod(argv[1], NULL), argc > 2 ? strtoull(argv[2], NULL, 0) : 0);
		tap_plan(38 + 12);
	} else {
		tap_plan(76 + 24);
	}
	test_restart();
	test_down();
	test_link_down();
	test_oneway_reset();
	test_epoch_wrap(1);
	test_epoch_wrap(0);
	if (argc == 1) {
		lossy(0.05, 3);
		tap_diag("again over a link with 5%% loss, 1%% dup, 25%% reorder");
		test_restart();
		test_down();
		test_link_down();
		test_oneway_reset();
		test_epoch_wrap(1);
		test_epoch_wrap(0);
	}
	return tap_done();
}
