/* test_reclaim.c — a comm whose establishment fails before connect() ever
 * handed it out is dropped: a later connect() starts anew instead of
 * answering with the stored error for good (the caller never got a handle
 * to close). Over the simulated fabric, whose modify_qp seam fails
 * INIT -> RTR once. */
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

int main(void)
{
	void *sc = NULL;

	tap_plan(4);
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
	teardown();
	return tap_done();
}
