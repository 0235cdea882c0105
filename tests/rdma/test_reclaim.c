/* test_reclaim.c — a comm whose establishment fails before connect() ever
 * handed it out is dropped: a later connect() starts anew instead of
 * answering with the stored error for good (the caller never got a handle
 * to close). Over the simulated fabric, whose modify_qp seam fails
 * INIT -> RTR once. And what the host's exchange reports of our blob
 * (rdma_conn_blob_result): refused by the peer, the comm is dropped with a
 * clear error; given up on, the next connect() sends it again. */
#include "sim_fabric.h"
#include "tap.h"

/* A send comm to peer 0 on channel 0 with the peer's blob applied
 * (RDMA_COMM_REMOTE), on the heap as comm.c makes them (the drop frees
 * it); no buffers: establishment does not touch them. It stands for what
 * rdma__comm_get creates (comm_create needs a device). */
static struct rdma_comm *remote_comm(void)
{
	struct rdma_comm *c = calloc(1, sizeof(*c));

	ZB_ASSERT(c != NULL);
	c->ctx = &ctx;
	c->side = RDMA_SIDE_SEND;
	c->index = rdma__comm_index(&ctx, 0, 0, RDMA_SIDE_SEND);
	c->slots = SLOTS;
	c->qp = &sqp[0].qp;
	c->req_mem = calloc(SLOTS, sizeof(*c->req_mem));
	ZB_ASSERT(c->req_mem != NULL);
	rdma__reqtab_init(&c->reqs, c->req_mem, SLOTS);
	c->sq_depth = SLOTS + 2;
	rdma__sq_init(&c->sq, c->sq_depth, ctx.signal_every);
	c->local = cs.local;
	c->remote = cr.local;
	c->eff = SLOTS;
	c->peer_eager = RDMA_EAGER_MAX;
	atomic_store(&c->state, RDMA_COMM_REMOTE);
	return c;
}

static int nsend;
static uint8_t last_blob[RDMA_CONN_BLOB_LEN];

static int capture(void *arg, uint16_t peer, const void *blob, size_t len)
{
	(void)arg;
	ZB_ASSERT(peer == 0 && len == RDMA_CONN_BLOB_LEN);
	memcpy(last_blob, blob, len);
	nsend++;
	return 0;
}

/* The host reports status for the blob comm c sent (as the control
 * plane's result hook does). The fixture is a loopback pair whose blobs
 * name node 0 as their source: this node is node 1 while its blobs leave
 * (so they go to send_blob, not the self path), node 0 when verdicts on
 * them come back. */
static int report(struct rdma_comm *c, int status)
{
	uint8_t b[RDMA_CONN_BLOB_LEN];

	ZB_ASSERT(rdma__conn_encode(&c->local, b, sizeof(b)) == RDMA_CONN_BLOB_LEN);
	ctx.self = 0;
	int rc = rdma_conn_blob_result(&ctx, b, sizeof(b), status);
	ctx.self = 1;
	return rc;
}

int main(void)
{
	void *sc = NULL;

	tap_plan(15);
	setup_local(4);
	uint32_t idx = cs.index;
	struct rdma_comm *c = remote_comm();
	atomic_store(&ctx.comms[idx], c);

	sim_modify_fail = 1;
	is_int(rdma_net_ops.connect(&ctx, 0, 0, &sc), ZB_ERR_DEVICE,
	       "INIT -> RTR fails: connect returns the error");
	ok(sc == NULL && atomic_load(&ctx.comms[idx]) == NULL,
	   "... and drops the comm it never handed out (it used to stay, failed, for good)");

	c = remote_comm();   /* what the next rdma__comm_get creates */
	atomic_store(&ctx.comms[idx], c);
	is_int(rdma_net_ops.connect(&ctx, 0, 0, &sc), 0, "the next connect establishes a fresh comm");
	ok(sc == c && atomic_load(&c->state) == RDMA_COMM_READY, "... and hands it out");

	atomic_store(&ctx.comms[idx], NULL);
	free(c->req_mem);
	free(c);

	/* The exchange's verdicts on our blob (the fixture's blobs name node
	 * 0, this node, as their source). */
	ctx.pargs.external_exchange = true;
	ctx.pargs.send_blob = capture;
	ctx.pargs.blob_acks = true;
	ctx.self = 1;
	sc = NULL;
	c = remote_comm();
	atomic_store(&ctx.comms[idx], c);
	is_int(rdma_net_ops.connect(&ctx, 0, 0, &sc), -EAGAIN,
	       "blob handed to the exchange: connect waits for the peer to take it");
	is_int(nsend, 1, "... the blob went once");
	is_int(report(c, -ETIMEDOUT), 0, "the exchange gave it up: reported");
	is_int(rdma_net_ops.connect(&ctx, 0, 0, &sc), -EAGAIN, "connect still waits ...");
	is_int(nsend, 2, "... and sent the blob again instead of waiting for its deadline");
	uint8_t want[RDMA_CONN_BLOB_LEN];
	rdma__conn_encode(&c->local, want, sizeof(want));
	ok(!memcmp(last_blob, want, sizeof(want)), "... the same blob (the same QP)");
	is_int(report(c, -EBADMSG), 0, "the peer refused it: reported");
	is_int(rdma_net_ops.connect(&ctx, 0, 0, &sc), -ECONNREFUSED,
	       "connect fails at once with -ECONNREFUSED");
	ok(strstr(rdma_last_error(), "refused our connection blob") != NULL &&
	   atomic_load(&ctx.comms[idx]) == NULL && sc == NULL,
	   "... saying so (%s) and drops the comm", rdma_last_error());
	c = remote_comm();   /* what the next rdma__comm_get creates */
	atomic_store(&ctx.comms[idx], c);
	is_int(rdma_net_ops.connect(&ctx, 0, 0, &sc), -EAGAIN, "the next connect sends a new blob");
	ok(nsend == 3 && report(c, 0) == 0 && rdma_net_ops.connect(&ctx, 0, 0, &sc) == 0 &&
	   sc == c, "taken: connect hands the comm out");
	atomic_store(&ctx.comms[idx], NULL);
	free(c->req_mem);
	free(c);
	teardown();
	return tap_done();
}
