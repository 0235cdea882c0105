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

int main(void)
{
	tap_plan(3);
	test_backlog_gap();
	return tap_done();
}
