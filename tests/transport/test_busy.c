/* A full link (tp_ops.tx returns -EAGAIN, as a TX ring the NIC has not
 * drained) is backpressure, not loss: the refused frame goes out again
 * within TP_BUSY_RETRY_NS instead of waiting for the retransmission timer,
 * and everything still arrives exactly once, in order. */
#include "tap.h"
#include "sim.h"

#define NMSG 3000

static struct sim S;
static int got[NMSG], bad_order, done_ok, done_err;
static uint32_t next;
static uint8_t payload[NMSG][600];

static int deliver(struct sim_node *n, struct tp_msg *m)
{
	uint32_t id;
	ZB_ASSERT(m->len >= 4);
	memcpy(&id, m->data, 4);
	if (id < NMSG) {
		got[id]++;
		if (id != next)
			bad_order++;
		next = id + 1;
		if (memcmp(m->data, payload[id], m->len))
			bad_order += 1000;
	}
	tp_msg_release(n->tp, m);
	return 0;
}

static void send_done(struct sim_node *n, uint64_t cookie, int status)
{
	(void)n;
	(void)cookie;
	if (status == 0)
		done_ok++;
	else
		done_err++;
}

int main(void)
{
	struct sim_link l = {.busy = 0.2, .delay_ns = 5000};
	struct tp_params p;
	int once = 0;

	tap_plan(7);
	ZB_ASSERT(sim_init(&S, 2, &l, 3, 1 << 14) == 0);
	S.deliver = deliver;
	S.send_done = send_done;
	for (uint16_t i = 0; i < 2; i++) {
		sim_params(&p, i, 1 + i);
		p.window = 256;
		p.rto_us_min = p.rto_us_init = 5000;   /* a local cluster's floor */
		ZB_ASSERT(sim_node_start(&S, i, &p) == 0);
	}
	uint64_t t0 = S.now;
	for (uint32_t i = 0; i < NMSG; i++) {
		size_t len = 4 + (i * 37) % (sizeof(payload[0]) - 4);
		memcpy(payload[i], &i, 4);
		for (size_t k = 4; k < len; k++)
			payload[i][k] = (uint8_t)(i + k);
		while (tp_send(S.nodes[0].tp, 1, 0, payload[i], len, NULL, i, S.now) == -EAGAIN)
			sim_step(&S, 100000);
	}
	while (done_ok + done_err < NMSG && S.now - t0 < 60ull * 1000000000ull)
		sim_step(&S, 100000);
	for (uint32_t i = 0; i < NMSG; i++)
		once += got[i] == 1;
	const struct tp_stats *a = tp_stats(S.nodes[0].tp);
	tap_diag("%" PRIu64 " frames refused by the link, %" PRIu64 " RTO expiries, "
		 "%" PRIu64 " retransmits, sim time %.1f ms", a->tx_busy,
		 a->rto_timeouts, a->retransmits, (S.now - t0) / 1e6);
	ok(a->tx_busy > 100, "the link refused frames (%" PRIu64 ")", a->tx_busy);
	is_int(done_ok, NMSG, "every send completed successfully");
	is_int(once, NMSG, "every message delivered exactly once");
	is_int(bad_order, 0, "in order, content intact");
	is_int((int)a->rto_timeouts, 0, "no retransmission timer fired (refused frames are not losses)");
	ok(S.now - t0 < 50ull * 1000000, "done in %.1f ms of sim time (RTO stalls: ~240 ms "
	   "here before the fix)", (S.now - t0) / 1e6);
	is_int((int)S.dropped, 0, "the link itself lost nothing");
	sim_fini(&S);
	return tap_done();
}
