/* External blob exchange (rdma_provider_args.send_blob, the control-plane
 * path) over the simulated RC fabric: connect()/accept() hand this side's
 * blob to send_blob once per comm (errors, "not now" and the retry
 * included), wait for the peer's blob, which rdma_conn_deliver applies
 * (twice: no effect), then establish; the pair then carries data, and the
 * lcore poller (rdma_dp_poll on rdma_cq_source) handles its completions.
 * The fixture is a loopback pair (peer 0): the test plays "node 1" while
 * the blobs leave (so they go to send_blob, not the self path) and
 * "node 0" when they come back. */
#include "sim_fabric.h"
#include "tap.h"

static uint8_t sent[4][RDMA_CONN_BLOB_LEN];
static uint16_t sent_to[4];
static int nsent, calls, answer;

static int capture(void *arg, uint16_t peer, const void *blob, size_t len)
{
	ZB_ASSERT(arg == &calls && len == RDMA_CONN_BLOB_LEN);
	calls++;
	if (answer)
		return answer;
	if (nsent < 4) {
		sent_to[nsent] = peer;
		memcpy(sent[nsent++], blob, len);
	}
	return 0;
}

int main(void)
{
	struct rdma_conn c;
	void *sc = NULL, *rc_ = NULL, *rq, *sq;
	char small[64], why[128];
	size_t n = 0;

	tap_plan(21);
	setup_local(4);
	ctx.self = 1;
	ctx.pargs.external_exchange = true;
	ctx.pargs.send_blob = capture;
	ctx.pargs.exchange_arg = &calls;
	ctx.pargs.blob_acks = true;   /* the host reports the peer's acknowledgements */

	answer = -EPERM;
	is_int(rdma_net_ops.connect(&ctx, 0, 0, &sc), -EPERM,
	       "send_blob fails: connect fails with its error");
	ok(strstr(rdma_last_error(), "control plane refused") != NULL, "... saying so: %s",
	   rdma_last_error());
	answer = -ENOBUFS;
	is_int(rdma_net_ops.connect(&ctx, 0, 0, &sc), -EAGAIN,
	       "send_blob queue full: connect says EAGAIN");
	answer = 0;
	is_int(rdma_net_ops.connect(&ctx, 0, 0, &sc), -EAGAIN,
	       "blob handed over: connect waits for the peer's (EAGAIN)");
	is_int(rdma_net_ops.connect(&ctx, 0, 0, &sc), -EAGAIN, "still waiting");
	is_int(calls, 3, "send_blob called once per attempt until it took the blob, then no more");
	is_int(rdma_net_ops.accept(&ctx, 0, 0, &rc_), -EAGAIN, "accept hands its blob over too");
	is_int(nsent, 2, "two blobs handed over (send side, recv side)");
	ok(sent_to[0] == 0 && sent_to[1] == 0, "both addressed to node 0");
	ok(rdma__conn_decode(sent[0], RDMA_CONN_BLOB_LEN, &c, why, sizeof(why)) == 0 &&
	   c.side == RDMA_SIDE_SEND && c.qpn == cs.local.qpn && c.psn == cs.local.psn,
	   "the send side's blob decodes: its QPN and PSN");

	/* The peer (here: ourselves as node 0) delivers them back. */
	ctx.self = 0;
	is_int(rdma_conn_deliver(&ctx, sent[1], RDMA_CONN_BLOB_LEN), 0,
	       "the recv side's blob completes the send comm");
	/* the peer may hand out its recv comm and write a CTS as soon as it
	 * has our blob: a QP still in INIT would drop it */
	ok(nstate[0] == 1 && states[0][0] == IBV_QPS_RTR && nstate[1] == 0,
	   "the send comm's QP is in RTR once the peer's blob is delivered, before its "
	   "owner calls connect (%d transition(s))", nstate[0]);
	is_int(rdma_conn_deliver(&ctx, sent[1], RDMA_CONN_BLOB_LEN), 0,
	       "delivered twice (a control-plane duplicate): no effect");
	is_int(rdma_conn_deliver(&ctx, sent[0], RDMA_CONN_BLOB_LEN), 0,
	       "the send side's blob completes the recv comm");
	ctx.self = 1;
	ok(rdma_net_ops.connect(&ctx, 0, 0, &sc) == -EAGAIN &&
	   rdma_net_ops.accept(&ctx, 0, 0, &rc_) == -EAGAIN,
	   "not handed out before the peer acknowledged our blobs");
	struct rdma_conn stale;
	uint8_t sb[RDMA_CONN_BLOB_LEN];
	rdma__conn_decode(sent[0], RDMA_CONN_BLOB_LEN, &stale, why, sizeof(why));
	stale.qpn ^= 0x10;   /* a blob of an earlier QP of that comm */
	rdma__conn_encode(&stale, sb, sizeof(sb));
	/* the fixture's blobs name node 0 as their source (a loopback pair) */
	ctx.self = 0;
	int stale_rc = rdma_conn_blob_result(&ctx, sb, sizeof(sb), 0);
	ctx.self = 1;
	ok(stale_rc == -ENOENT && rdma_net_ops.connect(&ctx, 0, 0, &sc) == -EAGAIN,
	   "an acknowledgement of another QP's blob does not count (%d)", stale_rc);
	ctx.self = 0;
	int a0 = rdma_conn_blob_result(&ctx, sent[0], RDMA_CONN_BLOB_LEN, 0);
	int a1 = rdma_conn_blob_result(&ctx, sent[1], RDMA_CONN_BLOB_LEN, 0);
	ctx.self = 1;
	ok(a0 == 0 && a1 == 0, "the peer's acknowledgements of both blobs are taken (%d %d)", a0, a1);
	ok(rdma_net_ops.connect(&ctx, 0, 0, &sc) == 0 && sc == &cs &&
	   rdma_net_ops.accept(&ctx, 0, 0, &rc_) == 0 && rc_ == &cr,
	   "connect and accept return the comms");
	is_int(calls, 4, "no blob sent again");
	ok(nstate[0] == 2 && states[0][0] == IBV_QPS_RTR && states[0][1] == IBV_QPS_RTS &&
	   nstate[1] == 2 && states[1][0] == IBV_QPS_RTR && states[1][1] == IBV_QPS_RTS,
	   "both QPs went INIT -> RTR -> RTS, each state once");

	rdma__irecv(&cr, small, sizeof(small), 0, NULL, &rq);
	unsigned polled = rdma_dp_poll(rdma_cq_source(&ctx, 0), 0);
	int rcs = post_send("ping", 5, NULL, &sq);
	ok(polled == 1 && rcs == 0 && wait_req(sq, &n) == 0 && wait_req(rq, &n) == 0 &&
	   n == 5 && !strcmp(small, "ping"),
	   "the lcore poller took the CTS; 'ping' went through");
	teardown();
	return tap_done();
}
