/* Flow control and backpressure: a consumer that holds its messages closes
 * the receiver's credit (the sender stalls, nothing is lost); a consumer that
 * refuses (-EAGAIN) gets the message again later, in order; a full send
 * descriptor pool is -EAGAIN to the caller. And the transport's own
 * deterministic fault injection ([fault]): same seed, same run. */
#include "tap.h"
#include "traffic.h"

static int refuse_left;
static int (*inner_deliver)(struct sim_node *, struct tp_msg *);

static int refusing_deliver(struct sim_node *n, struct tp_msg *m)
{
	if (refuse_left > 0) {
		refuse_left--;
		return -EAGAIN;
	}
	return inner_deliver(n, m);
}

static void setup(struct sim *s, struct traffic *t, int nodes, uint64_t seed,
		  uint32_t rx_msgs, const struct tp_fault *f, uint64_t per_pair)
{
	struct sim_link l = {.delay_ns = 5000};
	struct tp_params p;

	ZB_ASSERT(sim_init(s, nodes, &l, seed, 1 << 14) == 0);
	for (uint16_t i = 0; i < nodes; i++) {
		sim_params(&p, i, 70 + i);
		p.rx_msgs = rx_msgs;
		if (f)
			p.fault = *f, p.fault.seed = f->seed + i;
		ZB_ASSERT(sim_node_start(s, i, &p) == 0);
	}
	tr_init(t, s, per_pair);
}

static void test_hold(void)
{
	struct sim s;
	struct traffic t;
	const struct tp_stats *rx, *tx;
	int done;

	setup(&s, &t, 2, 21, 64, NULL, 2000);
	t.hold_release = 1;
	for (int i = 0; i < 20000; i++) {
		tr_pump(&t, 64);
		sim_step(&s, 50000);
	}
	rx = tp_stats(s.nodes[1].tp);
	tx = tp_stats(s.nodes[0].tp);
	ok(t.held_n > 0 && t.held_n <= 64 * 2, "hold: consumer holds %u messages, transport stops at its 64 descriptors per node", t.held_n);
	ok(tx->window_stalls > 0, "hold: senders stalled on credit (%" PRIu64 " stalls)", tx->window_stalls);
	ok(TR_SUM(&t, delivered) < t.target_total, "hold: delivery paused (%" PRIu64 " of %" PRIu64 ")",
	   TR_SUM(&t, delivered), t.target_total);
	tap_diag("hold: no_buffer drops %" PRIu64 ", probes %" PRIu64, rx->no_buffer_drops, tx->probes_tx);
	/* let go: release and stop holding */
	t.hold_release = 0;
	for (uint32_t i = 0; i < t.held_n; i++)
		tp_msg_release(s.nodes[t.held[i]->peer == 0 ? 1 : 0].tp, t.held[i]);
	t.held_n = 0;
	done = tr_run(&t, 10ull * 1000000000ull, 64);
	ok(done, "hold: after release everything completes");
	is_int(TR_SUM(&t, delivered), t.target_total, "hold: exactly once");
	is_int(TR_SUM(&t, bad_order) + TR_SUM(&t, bad_content) + TR_SUM(&t, done_err), 0,
	       "hold: in order, intact, no send failed");
	sim_fini(&s);
}

static void test_refuse(void)
{
	struct sim s;
	struct traffic t;
	int done;

	setup(&s, &t, 2, 22, 0, NULL, 500);
	inner_deliver = s.deliver;
	s.deliver = refusing_deliver;
	refuse_left = 300;
	done = tr_run(&t, 10ull * 1000000000ull, 64);
	ok(done && refuse_left == 0, "refuse: 300 refusals, then everything delivered");
	ok(tp_stats(s.nodes[0].tp)->deliver_deferred + tp_stats(s.nodes[1].tp)->deliver_deferred >= 1,
	   "refuse: deferrals counted");
	is_int(TR_SUM(&t, bad_order) + TR_SUM(&t, bad_content), 0, "refuse: still exactly once, in order");
	sim_fini(&s);
}

static void ignore_done(struct sim_node *n, uint64_t c, int st)
{
	(void)n;
	(void)c;
	(void)st;
}

static void test_tx_full(void)
{
	struct sim s;
	struct sim_link l = {.delay_ns = 5000};
	struct tp_params p;
	int rc = 0, n = 0;

	ZB_ASSERT(sim_init(&s, 2, &l, 23, 1024) == 0);
	sim_params(&p, 0, 1);
	p.tx_msgs = 16;
	ZB_ASSERT(sim_node_start(&s, 0, &p) == 0);
	s.send_done = ignore_done;
	while ((rc = tp_send(s.nodes[0].tp, 1, 0, "hello", 5, NULL, 0, s.now)) == 0)
		n++;
	is_int(n, 16, "tx full: 16 descriptors accepted");
	is_int(rc, -EAGAIN, "tx full: then -EAGAIN");
	sim_fini(&s);   /* tp_destroy fails the 16 with ZB_ERR_SHUTDOWN */
}

static int shutdown_count;
static void count_done(struct sim_node *n, uint64_t c, int st)
{
	(void)n;
	(void)c;
	if (st == ZB_ERR_SHUTDOWN)
		shutdown_count++;
}

static void test_shutdown(void)
{
	struct sim s;
	struct sim_link l = {.delay_ns = 5000};
	struct tp_params p;

	ZB_ASSERT(sim_init(&s, 2, &l, 24, 1024) == 0);
	s.send_done = count_done;
	sim_params(&p, 0, 1);
	ZB_ASSERT(sim_node_start(&s, 0, &p) == 0);
	for (int i = 0; i < 10; i++)
		ZB_ASSERT(tp_send(s.nodes[0].tp, 1, 0, "x", 1, NULL, 0, s.now) == 0);
	sim_fini(&s);
	is_int(shutdown_count, 10, "shutdown: tp_destroy fails pending sends with ZB_ERR_SHUTDOWN");
}

static void fault_run(uint64_t seed, struct tp_stats *out, int *ok_out)
{
	struct sim s;
	struct traffic t;
	struct tp_fault f = {.drop_rate = 0.05, .dup_rate = 0.01, .reorder_rate = 0.25, .seed = seed};
	int done;

	setup(&s, &t, 2, 25, 0, &f, 2000);
	done = tr_run(&t, 30ull * 1000000000ull, 64);
	*ok_out = done && TR_SUM(&t, delivered) == t.target_total &&
		  TR_SUM(&t, bad_order) + TR_SUM(&t, bad_content) == 0;
	*out = *tp_stats(s.nodes[1].tp);
	sim_fini(&s);
}

static void test_fault(void)
{
	struct tp_stats a, b;
	int ok_a, ok_b;

	fault_run(99, &a, &ok_a);
	fault_run(99, &b, &ok_b);
	ok(ok_a && ok_b, "fault: 5%% drop, 1%% dup, 25%% reorder injected in the transport: exactly once, in order, intact");
	ok(a.fault_drops > 0 && a.fault_dups > 0 && a.fault_reorders > 0,
	   "fault: injected %" PRIu64 " drops, %" PRIu64 " dups, %" PRIu64 " reorders",
	   a.fault_drops, a.fault_dups, a.fault_reorders);
	ok(a.fault_drops == b.fault_drops && a.frames_tx == b.frames_tx &&
	   a.retransmits == b.retransmits && a.msgs_delivered == b.msgs_delivered,
	   "fault: same seed, same run (%" PRIu64 " frames both times)", a.frames_tx);
}

int main(void)
{
	tap_plan(6 + 3 + 2 + 1 + 3);
	test_hold();
	test_refuse();
	test_tx_full();
	test_shutdown();
	test_fault();
	return tap_done();
}
