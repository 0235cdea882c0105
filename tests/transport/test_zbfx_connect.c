/* Peer-down rule for peers never heard from (docs/wire.md "Peer down"):
 * a peer not yet up (it starts later) is not declared down after
 * peer_timeout; sends to it wait and are delivered once it starts; it is
 * declared down only after connect_timeout (never with 0); a peer that was
 * up and went silent is still declared down after peer_timeout, also after
 * a session reset. Also tp_streams(). Simulated clock (sim.h). */
#include "tap.h"
#include "sim.h"

#define NMSG 16

static struct sim S;
static struct {
	int done[NMSG], status[NMSG];
	uint64_t done_at[NMSG];
	int delivered, downs;
} A;
static uint8_t payload[NMSG][3000];

static int deliver(struct sim_node *n, struct tp_msg *m)
{
	A.delivered++;
	tp_msg_release(n->tp, m);
	return 0;
}
static void send_done(struct sim_node *n, uint64_t cookie, int status)
{
	(void)n;
	ZB_ASSERT(cookie < NMSG);
	A.done[cookie]++;
	A.status[cookie] = status;
	A.done_at[cookie] = S.now;
}
static void peer_event(struct sim_node *n, uint16_t peer, enum tp_peer_event ev,
		       uint32_t epoch)
{
	(void)n;
	(void)peer;
	(void)epoch;
	if (ev == TP_PEER_DOWN)
		A.downs++;
}

static void run_for(uint64_t ns)
{
	uint64_t end = S.now + ns;
	while (S.now < end)
		sim_step(&S, end - S.now);
}

static void setup(uint32_t peer_ms, uint32_t connect_ms, bool start_peer)
{
	static const struct sim_link link = {.delay_ns = 5000};
	struct tp_params p;
	memset(&A, 0, sizeof(A));
	ZB_ASSERT(sim_init(&S, 2, &link, 11, 4096) == 0);
	S.deliver = deliver;
	S.send_done = send_done;
	S.peer_event = peer_event;
	for (uint16_t id = 0; id < (start_peer ? 2 : 1); id++) {
		sim_params(&p, id, 100 + id);
		p.peer_timeout_ms = peer_ms;
		p.connect_timeout_ms = connect_ms;
		ZB_ASSERT(sim_node_start(&S, id, &p) == 0);
	}
}

static void start_peer(uint32_t peer_ms, uint32_t connect_ms)
{
	struct tp_params p;
	sim_params(&p, 1, 101);
	p.peer_timeout_ms = peer_ms;
	p.connect_timeout_ms = connect_ms;
	ZB_ASSERT(sim_node_start(&S, 1, &p) == 0);
}

static int send_n(int from, int to)
{
	int rc = 0;
	for (int i = from; i < to; i++)
		rc |= tp_send(S.nodes[0].tp, 1, (uint16_t)(i % 4), payload[i],
			      sizeof(payload[i]), NULL, (uint64_t)i, S.now);
	return rc;
}

static int count(int from, int to, int status)
{
	int c = 0;
	for (int i = from; i < to; i++)
		c += A.done[i] == 1 && A.status[i] == status;
	return c;
}

static int peer_state(void)
{
	struct tp_peer_info pi;
	ZB_ASSERT(tp_peer_info(S.nodes[0].tp, 1, &pi) == 0);
	return pi.state;
}

int main(void)
{
	tap_plan(17);

	/* tp_streams reports params.streams */
	{
		struct tp_params p;
		struct tp *tp = NULL;
		static const struct tp_ops ops = {.tx = sim_tx, .deliver = sim_cb_deliver,
						  .send_done = sim_cb_send_done};
		sim_params(&p, 0, 1);
		is_int(p.streams, 8, "default params: 8 streams");
		p.streams = 16;
		ZB_ASSERT(tp_create(&p, &ops, NULL, &tp) == 0);
		is_int(tp_streams(tp), 16, "tp_streams() reports params.streams (16)");
		tp_destroy(tp);
	}

	/* 1. a late starter: peer_timeout 50 ms, connect_timeout 2 s; node 1
	 * starts 500 ms after node 0 began sending to it */
	setup(50, 2000, false);
	is_int(send_n(0, 8), 0, "late peer: 8 sends accepted before it starts");
	run_for(500000000ull);
	is_int(A.done[0] + A.done[7] + A.downs, 0,
	       "late peer: after 500 ms (10x peer_timeout) nothing failed, no PEER_DOWN");
	is_int(peer_state(), 0, "late peer: still 'not yet up' (state 0)");
	is_int(send_n(8, 10), 0, "late peer: tp_send still accepts");
	start_peer(50, 2000);
	run_for(1000000000ull);   /* retransmissions back off to rto_max 200 ms */
	is_int(count(0, 10, 0), 10, "late peer: all 10 delivered once it started");
	is_int(A.delivered, 10, "late peer: ... exactly once");
	is_int(peer_state(), 1, "late peer: up");

	/* 2. it was up, then goes silent: down after peer_timeout as before */
	S.nodes[1].down = true;
	uint64_t t0 = S.now;
	is_int(send_n(10, 14), 0, "silent peer: 4 sends accepted");
	run_for(200000000ull);
	is_int(count(10, 14, ZB_ERR_PEER_DOWN), 4,
	       "silent peer (was up): sends fail with ZB_ERR_PEER_DOWN");
	ok(A.done_at[10] - t0 <= 51000000ull && A.downs == 1,
	   "silent peer: declared down within peer_timeout (%.1f ms), not connect_timeout",
	   (A.done_at[10] - t0) / 1e6);
	sim_fini(&S);

	/* 3. never starts: down after connect_timeout (300 ms), not before */
	setup(50, 300, false);
	t0 = S.now;
	is_int(send_n(0, 4), 0, "absent peer: sends accepted");
	run_for(1000000000ull);
	is_int(count(0, 4, ZB_ERR_PEER_DOWN), 4,
	       "absent peer: sends fail with ZB_ERR_PEER_DOWN after connect_timeout");
	ok(A.done_at[0] - t0 >= 299000000ull && A.done_at[0] - t0 <= 301000000ull,
	   "absent peer: at connect_timeout (%.1f ms)", (A.done_at[0] - t0) / 1e6);
	sim_fini(&S);

	/* 4. connect_timeout 0: waits for ever; tp_destroy fails them */
	setup(50, 0, false);
	send_n(0, 2);
	run_for(5000000000ull);
	is_int(A.done[0] + A.done[1] + A.downs, 0,
	       "connect_timeout 0: still pending after 5 s, no PEER_DOWN");
	sim_fini(&S);
	is_int(count(0, 2, ZB_ERR_SHUTDOWN), 2, "connect_timeout 0: tp_destroy fails them");
	return tap_done();
}
