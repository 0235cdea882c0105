/* Receive-side corner cases, each once a bug:
 * - progress: out-of-order messages never take the descriptors a frame at
 *   rcv_next needs (a lost frame under a backlog deadlocked the receiver);
 * - a fragment sent under two sequence numbers is taken once (it completed
 *   a message with a hole);
 * - a frame of a session abandoned by a reset (dst_epoch 0) is refused in
 *   the new one (it was delivered as the new session's message);
 * - tp_poll keeps a deadline armed by a callback it ran (a retransmission
 *   waited for the next unrelated timer).
 * Crafted frames come "from" node 1 to the instance under test (node 0). */
#include "tap.h"
#include "sim.h"

/* ---- a lost frame under a backlog of small messages from three peers ---- */
static struct sim S;
static uint64_t delivered[SIM_MAX_NODES], s_ok, s_err;

static int s_deliver(struct sim_node *n, struct tp_msg *m)
{
	delivered[m->peer]++;
	tp_msg_release(n->tp, m);
	return 0;
}

static void s_done(struct sim_node *n, uint64_t c, int st)
{
	(void)n;
	(void)c;
	if (st)
		s_err++;
	else
		s_ok++;
}

static void test_backlog_gap(void)
{
	struct sim_link l = {.delay_ns = 10000};
	static uint8_t buf[64];
	const int nsend = 3, per = 400;
	uint64_t t0, total = 0;

	ZB_ASSERT(sim_init(&S, 1 + nsend, &l, 1, 1 << 15) == 0);
	S.deliver = s_deliver;
	S.send_done = s_done;
	for (int i = 0; i <= nsend; i++) {
		struct tp_params p;
		sim_params(&p, (uint16_t)i, 100 + i);   /* rx_msgs 512 */
		p.tx_msgs = 1024;
		ZB_ASSERT(sim_node_start(&S, (uint16_t)i, &p) == 0);
	}
	/* each sender's first message is lost once; the rest (3 x 399, more
	 * than the receiver's descriptors) arrive behind the gap */
	for (int i = 1; i <= nsend; i++)
		S.block[i][0] = true;
	for (int i = 1; i <= nsend; i++)
		ZB_ASSERT(tp_send(S.nodes[i].tp, 0, 0, buf, sizeof(buf), NULL, 0, S.now) == 0);
	for (int i = 1; i <= nsend; i++)
		S.block[i][0] = false;
	for (int k = 1; k < per; k++)
		for (int i = 1; i <= nsend; i++)
			ZB_ASSERT(tp_send(S.nodes[i].tp, 0, 0, buf, sizeof(buf), NULL,
					  (uint64_t)k, S.now) == 0);
	t0 = S.now;
	while (S.now - t0 < 5000000000ull && s_ok < (uint64_t)nsend * per)
		sim_step(&S, 100000);
	for (int i = 1; i <= nsend; i++)
		total += delivered[i];
	is_int(total, nsend * per, "backlog behind a lost frame: all %d messages delivered",
	       nsend * per);
	is_int(s_ok, nsend * per, "backlog: every send done");
	is_int(s_err, 0, "backlog: no send failed");
	tap_diag("backlog: no_buffer_drops %" PRIu64,
		 tp_stats(S.nodes[0].tp)->no_buffer_drops);
	sim_fini(&S);
}

/* ---- a deadline armed from a callback tp_poll ran ------------------------ */
static struct tp *T;
static uint64_t NOW;
static int ntx;
static uint8_t pbuf[64];

static int d_tx(void *u, const struct tp_frame *f)
{
	(void)u;
	(void)f;
	ntx++;
	return 0;
}

static int d_deliver(void *u, struct tp_msg *m)
{
	(void)u;
	(void)m;
	return 0;
}

/* peer 2 was declared down: send to peer 1 instead (a lower index than
 * the peer tp_poll's loop is at) */
static void d_done(void *u, uint64_t c, int st)
{
	(void)u;
	(void)st;
	if (c == 2)
		ZB_ASSERT(tp_send(T, 1, 0, pbuf, sizeof(pbuf), NULL, 1, NOW) == 0);
}

static void test_poll_keeps_armed(void)
{
	struct tp_ops ops = {.tx = d_tx, .deliver = d_deliver, .send_done = d_done};
	struct tp_params p;
	struct tp_peer_info pi;
	uint8_t mac[6];
	uint64_t t, sent_at = 0, rtx_at = 0;

	sim_params(&p, 0, 1000);
	p.connect_timeout_ms = 10;
	ZB_ASSERT(tp_create(&p, &ops, NULL, &T) == 0);
	sim_mac(1, mac);
	ZB_ASSERT(tp_peer_add(T, 1, mac, sim_ip(1)) == 0);
	sim_mac(2, mac);
	ZB_ASSERT(tp_peer_add(T, 2, mac, sim_ip(2)) == 0);
	NOW = 1000000;
	ZB_ASSERT(tp_send(T, 2, 0, pbuf, sizeof(pbuf), NULL, 2, NOW) == 0);
	/* poll only when tp_next_deadline() says so, as dataplane/link.c */
	for (t = NOW; t < NOW + 400000000ull; t++) {
		uint64_t d = tp_next_deadline(T);
		int before = ntx;

		if (d > t)
			t = d;
		NOW = t;
		tp_poll(T, t);
		ZB_ASSERT(tp_peer_info(T, 1, &pi) == 0);
		if (pi.in_flight && !sent_at) {
			sent_at = t;
			continue;
		}
		if (sent_at && ntx > before) {
			rtx_at = t;
			break;
		}
	}
	ok(sent_at != 0, "deadline: a send_done from tp_poll sent to another peer");
	ok(rtx_at && rtx_at - sent_at <= 2000000ull,
	   "deadline: its retransmission ran after %.3f ms (rto 1 ms), not at the next unrelated timer",
	   (rtx_at - sent_at) / 1e6);
	tp_destroy(T);
}

int main(void)
{
	tap_plan(5);
	test_backlog_gap();
	test_poll_keeps_armed();
	return tap_done();
}
