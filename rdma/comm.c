/* Comms: one RC QP per (peer, channel, side), its buffers, the connection
 * blob exchange and the INIT -> RTR -> RTS walk. Control path: allocates. */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The one verbs control call the fast path's failure handling makes; a seam
 * so that the protocol test can run the data path over a simulated RC
 * fabric (tests/rdma/test_protocol.c). Everything else calls verbs. */
int (*rdma__modify_qp)(struct ibv_qp *, struct ibv_qp_attr *, int) = ibv_modify_qp;
int (*rdma__destroy_qp)(struct ibv_qp *) = ibv_destroy_qp;

static void *zalloc_pages(size_t len)
{
	size_t l = (len + 4095) & ~(size_t)4095;
	void *p = aligned_alloc(4096, l ? l : 4096);

	if (p)
		memset(p, 0, l ? l : 4096);
	return p;
}

void rdma__emit(struct rdma_ctx *ctx, const struct rdma_event *ev)
{
	ZB_ASSERT(ctx != NULL && ev != NULL);
	if (ctx->pargs.on_event)
		ctx->pargs.on_event(ctx->pargs.arg, ev);
}

static const char *side_name(enum rdma_side s)
{
	return s == RDMA_SIDE_SEND ? "send" : "recv";
}

static int modify(struct rdma_comm *c, enum ibv_qp_state from, enum ibv_qp_state to)
{
	struct ibv_qp_attr a;
	int mask, rc;

	rc = rdma__qp_attr(from, to, &c->ctx->qpl, &c->remote, &a, &mask);
	if (rc) {
		rdma__set_error("node %u ch %u %s: bad QP attributes for state %d -> %d",
				c->peer, c->channel, side_name(c->side), from, to);
		return rc;
	}
	rc = rdma__modify_qp(c->qp, &a, mask);
	if (rc) {
		rdma__set_error("node %u ch %u %s: ibv_modify_qp(%d -> %d): %s",
				c->peer, c->channel, side_name(c->side), from, to,
				strerror(rc > 0 ? rc : errno));
		return ZB_ERR_DEVICE;
	}
	return 0;
}

static int post_initial_recvs(struct rdma_comm *c)
{
	for (uint32_t i = 0; i < c->slots; i++) {
		int rc = rdma__post_recv_pool(c, i);
		if (rc)
			return rc;
	}
	return 0;
}

static int make_buffers(struct rdma_comm *c)
{
	struct ibv_pd *pd = c->ctx->pd;
	int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	size_t ring = (size_t)c->slots * sizeof(struct rdma_cts);

	if (c->side == RDMA_SIDE_SEND) {
		c->fifo = zalloc_pages(ring);
		c->bounce = zalloc_pages((size_t)c->slots * RDMA_EAGER_MAX);
		if (!c->fifo || !c->bounce)
			return -ENOMEM;
		c->fifo_mr = ibv_reg_mr(pd, c->fifo, ring, acc);
		c->bounce_mr = ibv_reg_mr(pd, c->bounce, (size_t)c->slots * RDMA_EAGER_MAX,
					  IBV_ACCESS_LOCAL_WRITE);
		if (!c->fifo_mr || !c->bounce_mr)
			goto reg_fail;
		c->local.addr = (uintptr_t)c->fifo;
		c->local.rkey = c->fifo_mr->rkey;
	} else {
		c->cts_src = zalloc_pages(ring);
		c->pool = zalloc_pages((size_t)c->slots * RDMA_EAGER_MAX);
		if (!c->cts_src || !c->pool)
			return -ENOMEM;
		/* cts_src doubles as the target of the sender's zero-length
		 * flush writes, hence REMOTE_WRITE. */
		c->cts_mr = ibv_reg_mr(pd, c->cts_src, ring, acc);
		c->pool_mr = ibv_reg_mr(pd, c->pool, (size_t)c->slots * RDMA_EAGER_MAX,
					IBV_ACCESS_LOCAL_WRITE);
		if (!c->cts_mr || !c->pool_mr)
			goto reg_fail;
		c->local.addr = (uintptr_t)c->cts_src;
		c->local.rkey = c->cts_mr->rkey;
	}
	return 0;
reg_fail:
	rdma__set_error("%s: ibv_reg_mr of comm buffers: %s", c->ctx->dev_name, strerror(errno));
	return ZB_ERR_DEVICE;
}

static int create_qp(struct rdma_comm *c)
{
	struct rdma_ctx *ctx = c->ctx;
	struct rdma_cq *q = &ctx->cqs[c->channel];
	struct ibv_qp_init_attr ia;

	c->sq_depth = c->slots + 2;     /* + flush + abort */
	c->cq_claim = c->sq_depth + c->slots;
	if (q->reserved + c->cq_claim > q->cqe) {
		rdma__set_error("channel %u CQ full (%u of %u entries claimed)", c->channel,
				q->reserved, q->cqe);
		c->cq_claim = 0;
		return -ENOSPC;
	}
	q->reserved += c->cq_claim;
	memset(&ia, 0, sizeof(ia));
	ia.qp_context = c;
	ia.send_cq = q->cq;
	ia.recv_cq = q->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.sq_sig_all = 0;
	ia.cap.max_send_wr = c->sq_depth;
	ia.cap.max_recv_wr = c->slots;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	ia.cap.max_inline_data = ctx->inline_max;
	c->qp = ibv_create_qp(ctx->pd, &ia);
	if (!c->qp && ctx->inline_max) {
		ia.cap.max_inline_data = 0;  /* device cannot inline: do without */
		c->qp = ibv_create_qp(ctx->pd, &ia);
	}
	if (!c->qp) {
		rdma__set_error("%s: ibv_create_qp(RC, %u/%u WRs): %s", ctx->dev_name,
				c->sq_depth, c->slots, strerror(errno));
		return ZB_ERR_DEVICE;
	}
	c->inline_max = ia.cap.max_inline_data;
	return 0;
}

static uint32_t new_psn(struct rdma_ctx *ctx)
{
	/* Distinct, unpredictable-enough start PSNs (IBA 9.7.1: any 24-bit). */
	uint32_t x = atomic_fetch_add(&ctx->psn_seed, 0x9E3779B9u);
	x ^= x >> 16;
	x *= 0x85EBCA6Bu;
	x ^= x >> 13;
	return x & 0xFFFFFFu;
}

static int comm_create(struct rdma_ctx *ctx, uint16_t peer, uint16_t ch,
		       enum rdma_side side, struct rdma_comm **out)
{
	struct rdma_comm *c;
	int rc;

	ZB_ASSERT(ctx != NULL && out != NULL);
	ZB_ASSERT(peer < CFG_MAX_NODES && ch < ctx->channels);
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->ctx = ctx;
	c->peer = peer;
	c->channel = ch;
	c->side = side;
	c->index = rdma__comm_index(ctx, peer, ch, side);
	c->slots = ctx->slots;
	c->req_mem = calloc(c->slots, sizeof(*c->req_mem));
	if (!c->req_mem) {
		rc = -ENOMEM;
		goto fail;
	}
	rdma__reqtab_init(&c->reqs, c->req_mem, c->slots);
	rc = create_qp(c);
	if (rc)
		goto fail;
	rdma__sq_init(&c->sq, c->sq_depth, ctx->signal_every);
	rc = modify(c, IBV_QPS_RESET, IBV_QPS_INIT);
	if (rc)
		goto fail;
	rc = make_buffers(c);
	if (rc)
		goto fail;
	rc = post_initial_recvs(c);
	if (rc)
		goto fail;
	c->local.side = (uint8_t)side;
	c->local.flags = ctx->qpl.ethernet ? RDMA_CONN_F_GLOBAL : 0;
	c->local.mtu = (uint8_t)ctx->qpl.active_mtu;
	c->local.cluster = ctx->cluster;
	c->local.src_node = ctx->self;
	c->local.dst_node = peer;
	c->local.channel = ch;
	c->local.lid = ctx->port_attr.lid;
	c->local.qpn = c->qp->qp_num;
	c->local.psn = new_psn(ctx);
	c->local.slots = c->slots;
	c->local.eager_max = RDMA_EAGER_MAX;
	memcpy(c->local.gid, ctx->gid, 16);
	if (!ctx->qpl.ethernet && (c->local.lid == 0 || c->local.lid >= 0xC000)) {
		rdma__set_error("%s port %u has no unicast LID (0x%x): subnet manager running?",
				ctx->dev_name, ctx->qpl.port, c->local.lid);
		rc = ZB_ERR_UNAVAILABLE;
		goto fail;
	}
	atomic_store(&c->state, RDMA_COMM_LOCAL);
	*out = c;
	return 0;
fail:
	rdma__comm_destroy(c);
	return rc;
}

/* The peer's blob: its QP's parameters, published to the owner thread.
 * The QP goes to RTR at once, on the delivering thread: from then on it
 * takes the peer's packets. The peer's comm may be handed out as soon as
 * it has our blob, and its first packet (a CTS write, an eager send) may
 * come before our owner calls connect/accept; a QP still in INIT drops it
 * silently, and the peer's retries (about 0.5 s) would run out if our
 * owner came later. A failure here leaves the QP in INIT: establish tries
 * again and reports it. */
static void apply_remote(struct rdma_comm *c, const struct rdma_conn *r)
{
	ZB_ASSERT(atomic_load(&c->state) == RDMA_COMM_LOCAL);
	ZB_ASSERT(r->slots >= RDMA_SLOTS_MIN);
	c->remote = *r;
	c->eff = r->slots < c->slots ? r->slots : c->slots;
	c->peer_eager = r->eager_max < RDMA_EAGER_MAX ? r->eager_max : RDMA_EAGER_MAX;
	c->rtr = modify(c, IBV_QPS_INIT, IBV_QPS_RTR) == 0;
	atomic_store(&c->state, RDMA_COMM_REMOTE);   /* publishes remote and rtr */
}

/* Look up or create. Creation takes ctx->lock; an lcore calling connect
 * must not block, so it only tries the lock (-EAGAIN when busy). */
static int comm_get_locked(struct rdma_ctx *ctx, uint16_t peer, uint16_t ch,
			   enum rdma_side side, struct rdma_comm **out)
{
	uint32_t idx = rdma__comm_index(ctx, peer, ch, side);
	struct rdma_comm *c = atomic_load(&ctx->comms[idx]);
	int rc;

	if (c) {
		*out = c;
		return 0;
	}
	rc = comm_create(ctx, peer, ch, side, &c);
	if (rc)
		return rc;
	if (ctx->stash[idx].valid) {
		/* the peer's new end arrived while the old comm was still here */
		apply_remote(c, &ctx->stash[idx].conn);
		ctx->stash[idx].valid = false;
	}
	atomic_store(&ctx->comms[idx], c);
	*out = c;
	return 0;
}

int rdma__comm_get(struct rdma_ctx *ctx, uint16_t peer, uint16_t ch,
		   enum rdma_side side, struct rdma_comm **out)
{
	struct rdma_comm *c;
	int rc;

	ZB_ASSERT(ctx != NULL && out != NULL);
	if (peer >= CFG_MAX_NODES || ch >= ctx->channels ||
	    (side != RDMA_SIDE_SEND && side != RDMA_SIDE_RECV))
		return -EINVAL;
	c = atomic_load(&ctx->comms[rdma__comm_index(ctx, peer, ch, side)]);
	if (c) {
		*out = c;
		return 0;
	}
	if (pthread_mutex_trylock(&ctx->lock) != 0)
		return -EAGAIN;
	rc = comm_get_locked(ctx, peer, ch, side, out);
	pthread_mutex_unlock(&ctx->lock);
	return rc;
}

int rdma_conn_local(void *vctx, uint16_t peer, uint16_t channel,
		    enum rdma_side side, void *blob, size_t cap)
{
	struct rdma_ctx *ctx = vctx;
	struct rdma_comm *c;
	int rc;

	if (!ctx || !blob || cap < RDMA_CONN_BLOB_LEN || peer >= CFG_MAX_NODES ||
	    channel >= ctx->channels || (side != RDMA_SIDE_SEND && side != RDMA_SIDE_RECV))
		return -EINVAL;
	pthread_mutex_lock(&ctx->lock);
	rc = comm_get_locked(ctx, peer, channel, side, &c);
	pthread_mutex_unlock(&ctx->lock);
	if (rc)
		return rc;
	ZB_ASSERT(atomic_load(&c->state) >= RDMA_COMM_LOCAL);
	return rdma__conn_encode(&c->local, blob, cap);
}

static bool same_conn(const struct rdma_conn *a, const struct rdma_conn *b)
{
	uint8_t x[RDMA_CONN_BLOB_LEN], y[RDMA_CONN_BLOB_LEN];

	if (rdma__conn_check(a, NULL, 0) != 0)
		return false;   /* no remote yet (a comm that failed early) */
	rdma__conn_encode(a, x, sizeof(x));
	rdma__conn_encode(b, y, sizeof(y));
	return memcmp(x, y, sizeof(x)) == 0;
}

static void peer_recreated(struct rdma_comm *c, const struct rdma_conn *r)
{
	struct rdma_event ev = {.kind = RDMA_EV_PEER_CLOSED, .peer = c->peer,
				.channel = c->channel, .side = c->side,
				.err = ZB_ERR_PEER_DOWN, .wc_status = -1};
	int zero = 0;

	atomic_compare_exchange_strong(&c->fail_err, &zero, ZB_ERR_PEER_DOWN);
	snprintf(ev.msg, sizeof(ev.msg), "node %u ch %u %s: the peer re-created its end (QPN 0x%x -> 0x%x)",
		 c->peer, c->channel, side_name(c->side), c->remote.qpn, r->qpn);
	rdma__emit(c->ctx, &ev);
}

/* from: the node the blob is known to come from (the control plane
 * authenticated it), or -1 when nothing vouches for the sender (the
 * bootstrap, our own blob): the blob's src_node is then taken as it is. */
static int conn_deliver(struct rdma_ctx *ctx, int from, const void *blob,
			size_t len)
{
	struct rdma_conn r;
	struct rdma_comm *c;
	enum rdma_side mine;
	char why[160];
	int rc, st;

	if (!ctx)
		return -EINVAL;
	rc = rdma__conn_decode(blob, len, &r, why, sizeof(why));
	if (rc) {
		rdma__set_error("connection blob rejected: %s", why);
		return rc;
	}
	if (from >= 0 && r.src_node != from) {
		/* a member speaking for another: it would replace (or fail)
		 * that node's comm with its own QP */
		atomic_fetch_add(&ctx->blobs_spoofed, 1);
		rdma__set_error("connection blob from node %d claims to be node %u's: refused",
				from, r.src_node);
		return -EPERM;
	}
	if (r.dst_node != ctx->self || r.cluster != ctx->cluster || r.channel >= ctx->channels) {
		rdma__set_error("connection blob for node %u cluster %u channel %u; this is node %u cluster %u with %u channels",
				r.dst_node, r.cluster, r.channel, ctx->self, ctx->cluster, ctx->channels);
		return -EINVAL;
	}
	if (ctx->qpl.ethernet != !!(r.flags & RDMA_CONN_F_GLOBAL) && ctx->qpl.ethernet) {
		rdma__set_error("connection blob from node %u lacks a GID but this port is RoCE",
				r.src_node);
		return -EINVAL;
	}
	mine = r.side == RDMA_SIDE_SEND ? RDMA_SIDE_RECV : RDMA_SIDE_SEND;
	pthread_mutex_lock(&ctx->lock);
	rc = comm_get_locked(ctx, r.src_node, r.channel, mine, &c);
	if (rc)
		goto out;
	st = atomic_load(&c->state);
	if (st < RDMA_COMM_REMOTE) {
		apply_remote(c, &r);
	} else if (!same_conn(&c->remote, &r)) {
		/* The peer re-created its end (restart, reconnect): this comm
		 * can never work again. Fail it (the owner acts on its next
		 * call) and keep the blob for the comm that replaces it. */
		ctx->stash[c->index] = (struct rdma_stash){.valid = true, .conn = r};
		if (st != RDMA_COMM_FAILED)
			peer_recreated(c, &r);
	}
out:
	pthread_mutex_unlock(&ctx->lock);
	return rc;
}

int rdma_conn_deliver(void *vctx, const void *blob, size_t len)
{
	return conn_deliver(vctx, -1, blob, len);
}

int rdma_conn_deliver_from(void *vctx, uint16_t from, const void *blob, size_t len)
{
	return conn_deliver(vctx, from, blob, len);
}

int rdma_conn_blob_result(void *vctx, const void *blob, size_t len, int status)
{
	struct rdma_ctx *ctx = vctx;
	struct rdma_conn r;
	char why[160];
	int rc;

	if (!ctx || status > 0)
		return -EINVAL;
	rc = rdma__conn_decode(blob, len, &r, why, sizeof(why));
	if (rc)
		return rc;
	if (r.src_node != ctx->self || r.dst_node >= CFG_MAX_NODES || r.channel >= ctx->channels)
		return -ENOENT;
	pthread_mutex_lock(&ctx->lock);   /* the comm is not destroyed meanwhile */
	struct rdma_comm *c =
		atomic_load(&ctx->comms[rdma__comm_index(ctx, r.dst_node, r.channel, r.side)]);
	rc = -ENOENT;
	if (c && c->local.qpn == r.qpn && c->local.psn == r.psn) {
		if (status == 0)
			atomic_store(&c->blob_acked, true);
		else   /* the owner's next connect/accept acts on it */
			atomic_store(&c->blob_fail, status);
		rc = 0;
	}
	pthread_mutex_unlock(&ctx->lock);
	return rc;
}

/* RTR (unless apply_remote got it there) -> RTS with the peer's
 * parameters (owner thread). */
int rdma__comm_establish(struct rdma_comm *c)
{
	int rc;

	ZB_ASSERT(c != NULL);
	ZB_ASSERT(atomic_load(&c->state) == RDMA_COMM_REMOTE);
	if (!c->rtr) {
		rc = modify(c, IBV_QPS_INIT, IBV_QPS_RTR);
		if (rc)
			return rc;
		c->rtr = true;
	}
	{
		struct ibv_qp_attr a;
		int mask;
		struct rdma_qp_local l = c->ctx->qpl;
		l.psn = c->local.psn;
		rc = rdma__qp_attr(IBV_QPS_RTR, IBV_QPS_RTS, &l, NULL, &a, &mask);
		ZB_ASSERT(rc == 0);
		rc = rdma__modify_qp(c->qp, &a, mask);
		if (rc) {
			rdma__set_error("node %u ch %u %s: ibv_modify_qp(RTR -> RTS): %s",
					c->peer, c->channel, side_name(c->side),
					strerror(rc > 0 ? rc : errno));
			return ZB_ERR_DEVICE;
		}
	}
	atomic_store(&c->state, RDMA_COMM_READY);
	return 0;
}

void rdma__comm_fail(struct rdma_comm *c, enum rdma_event_kind kind, int err,
		     int wc_status, uint32_t vendor_err, const char *fmt, ...)
{
	struct rdma_event ev;
	struct ibv_qp_attr a;
	int mask;
	va_list ap;

	ZB_ASSERT(c != NULL && err < 0);
	memset(&ev, 0, sizeof(ev));
	va_start(ap, fmt);
	vsnprintf(ev.msg, sizeof(ev.msg), fmt, ap);
	va_end(ap);
	rdma__set_error("%s", ev.msg);
	if (atomic_load(&c->state) != RDMA_COMM_FAILED) {
		c->err = err;
		atomic_store(&c->state, RDMA_COMM_FAILED);
	}
	/* Sends whose WR already retired did complete; the others are failed
	 * below, and their callers may then reuse the buffers (net.h). */
	bool unretired = false;
	for (uint64_t s = c->reqs.tail; s < c->reqs.head; s++) {
		struct rdma_req *r = rdma__reqtab_get(&c->reqs, s);
		if (!r || !r->is_send || r->state != RDMA_REQ_POSTED)
			continue;
		if (rdma__sq_done(&c->sq, r->sq_seq))
			rdma__reqtab_complete(r, r->size);
		else
			unretired = true;
	}
	/* A sender that just posted an abort leaves the QP running so the
	 * abort reaches the peer, unless a failed send's WR is still queued:
	 * the NIC reads a WR's buffer when it runs it (a retry, an RNR wait),
	 * after its caller was told it may reuse it, and the receiver would
	 * take those bytes as the message. ERR flushes the queue first
	 * (until 2026-11-29 the abort won: the peer completed a message with
	 * bytes written after the send was reported failed). Nothing more
	 * is posted on a failed comm. */
	if (!c->qp_error && c->qp && (!c->abort_posted || unretired)) {
		/* Out of service: ERR flushes whatever is still queued. */
		if (rdma__qp_attr(IBV_QPS_RTS, IBV_QPS_ERR, &c->ctx->qpl, NULL, &a, &mask) == 0)
			(void)rdma__modify_qp(c->qp, &a, mask);
		c->qp_error = true;
	}
	rdma__reqtab_fail_all(&c->reqs, c->err);
	if (kind) {
		ev.kind = kind;
		ev.peer = c->peer;
		ev.channel = c->channel;
		ev.side = c->side;
		ev.err = c->err;
		ev.wc_status = wc_status;
		ev.vendor_err = vendor_err;
		rdma__emit(c->ctx, &ev);
	}
}

void rdma__comm_destroy(struct rdma_comm *c)
{
	if (!c)
		return;
	ZB_ASSERT(c->ctx != NULL);
	if (c->qp)
		rdma__destroy_qp(c->qp);
	if (c->fifo_mr)
		ibv_dereg_mr(c->fifo_mr);
	if (c->bounce_mr)
		ibv_dereg_mr(c->bounce_mr);
	if (c->cts_mr)
		ibv_dereg_mr(c->cts_mr);
	if (c->pool_mr)
		ibv_dereg_mr(c->pool_mr);
	if (c->cq_claim)
		c->ctx->cqs[c->channel].reserved -= c->cq_claim;
	free(c->fifo);
	free(c->bounce);
	free(c->cts_src);
	free(c->pool);
	free(c->req_mem);
	free(c);
}
