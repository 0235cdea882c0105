/* Data movement: irecv posts a clear-to-send (CTS) into the sender's FIFO
 * with RDMA WRITE WITH IMM; isend consumes the CTS and either SENDs the
 * message into the receiver's posted-receive pool (eager, inline when tiny)
 * or RDMA-WRITEs it WITH IMM straight into the receiver's registered buffer.
 * The immediate carries the message sequence, so each side checks order.
 *
 * Fast path: no allocation, no locks, no syscalls besides the verbs doorbell
 * (ibv_post_send / ibv_post_recv / ibv_poll_cq are user-space on real
 * providers). Owner thread of the comm's channel only. */
#include "internal.h"

#include <arpa/inet.h>
#include <string.h>

#define MASK40 ((1ull << 40) - 1)

static const char *side_name(const struct rdma_comm *c)
{
	return c->side == RDMA_SIDE_SEND ? "send" : "recv";
}

static const char *op_name(enum rdma_op op)
{
	switch (op) {
	case RDMA_OP_DATA: return "data transfer";
	case RDMA_OP_FLUSH: return "completion flush";
	case RDMA_OP_CTS: return "clear-to-send write";
	case RDMA_OP_RECV: return "receive";
	case RDMA_OP_ABORT: return "abort message";
	default: return "work request";
	}
}

/* 0, or the comm's error once it failed (acting on an async failure). */
static inline int comm_check(struct rdma_comm *c)
{
	int fe;

	if (ZB_UNLIKELY(atomic_load_explicit(&c->state, memory_order_acquire) ==
			RDMA_COMM_FAILED))
		return c->err;
	fe = atomic_load_explicit(&c->fail_err, memory_order_relaxed);
	if (ZB_UNLIKELY(fe != 0)) {
		rdma__comm_fail(c, 0, fe, -1, 0, "node %u ch %u %s: out of service after an async event (%s)",
				c->peer, c->channel, side_name(c), zb_strerror(fe));
		return c->err;
	}
	return 0;
}

int rdma__post_recv_pool(struct rdma_comm *c, uint32_t slot)
{
	struct ibv_recv_wr wr, *bad = NULL;
	struct ibv_sge sge;
	int rc;

	ZB_DASSERT(c != NULL && slot < c->slots);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = rdma__wrid(c->index, RDMA_OP_RECV, slot);
	if (c->side == RDMA_SIDE_RECV) {
		/* eager payloads land here; WRITE_WITH_IMM uses no buffer */
		sge.addr = (uintptr_t)(c->pool + (size_t)slot * RDMA_EAGER_MAX);
		sge.length = RDMA_EAGER_MAX;
		sge.lkey = c->pool_mr->lkey;
		wr.sg_list = &sge;
		wr.num_sge = 1;
	}
	rc = ibv_post_recv(c->qp, &wr, &bad);
	if (ZB_UNLIKELY(rc)) {
		rdma__set_error("node %u ch %u %s: ibv_post_recv: %s", c->peer, c->channel,
				side_name(c), strerror(rc > 0 ? rc : errno));
		return ZB_ERR_DEVICE;
	}
	return 0;
}

struct wr_desc {
	enum rdma_op op;
	enum ibv_wr_opcode opcode;
	uint64_t laddr, raddr;
	uint32_t len, lkey, rkey, imm;
	bool force_signal, inline_ok;
};

static int post_wr(struct rdma_comm *c, const struct wr_desc *d, uint64_t *sq_seq)
{
	uint64_t prev_last = c->sq.last_signaled, seq;
	uint32_t prev_run = c->sq.run;
	struct ibv_send_wr wr, *bad = NULL;
	struct ibv_sge sge = {.addr = d->laddr, .length = d->len, .lkey = d->lkey};
	bool sig;
	int rc;

	rc = rdma__sq_post(&c->sq, d->force_signal, &seq, &sig);
	if (rc)
		return rc;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = rdma__wrid(c->index, d->op, seq);
	wr.sg_list = d->len ? &sge : NULL;
	wr.num_sge = d->len ? 1 : 0;
	wr.opcode = d->opcode;
	wr.send_flags = sig ? IBV_SEND_SIGNALED : 0;
	if (d->inline_ok && d->len && d->len <= c->inline_max)
		wr.send_flags |= IBV_SEND_INLINE;
	wr.imm_data = htonl(d->imm);
	if (d->opcode == IBV_WR_RDMA_WRITE || d->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
		wr.wr.rdma.remote_addr = d->raddr;
		wr.wr.rdma.rkey = d->rkey;
	}
	rc = ibv_post_send(c->qp, &wr, &bad);
	if (ZB_UNLIKELY(rc)) {
		rdma__sq_unpost(&c->sq, seq, sig, prev_last, prev_run);
		rdma__comm_fail(c, RDMA_EV_WC_ERROR, ZB_ERR_DEVICE, -1, 0,
				"node %u ch %u %s: ibv_post_send(%s): %s", c->peer, c->channel,
				side_name(c), op_name(d->op), strerror(rc > 0 ? rc : errno));
		return c->err;
	}
	*sq_seq = seq;
	return 0;
}

/* Best effort: tell the receiver why this comm is going away. */
static void send_abort(struct rdma_comm *c, int err)
{
	struct wr_desc d = {.op = RDMA_OP_ABORT, .opcode = IBV_WR_SEND_WITH_IMM,
			    .imm = RDMA_IMM_ABORT | ((uint32_t)-err & RDMA_IMM_SEQMASK),
			    .force_signal = true};
	uint64_t s;

	if (atomic_load(&c->state) == RDMA_COMM_READY && post_wr(c, &d, &s) == 0)
		c->abort_posted = true;
}

static void protocol_fail(struct rdma_comm *c, int err, const char *what, uint64_t a, uint64_t b)
{
	rdma__comm_fail(c, RDMA_EV_PROTOCOL, err, -1, 0, "node %u ch %u %s: protocol error: %s (%llu vs %llu)",
			c->peer, c->channel, side_name(c), what, (unsigned long long)a,
			(unsigned long long)b);
}

static uint64_t mr_addr(const struct rdma_mr *mh, const void *data)
{
	if (mh->path == RDMA_REG_STAGING)
		return (uintptr_t)mh->staging + ((uintptr_t)data - (uintptr_t)mh->addr);
	return (uintptr_t)data;
}

/* Whether the CPU can read what the NIC reads for mh: host memory, or the
 * staging copy of GPU memory. Not GPU memory the NIC reads itself (DMA-BUF,
 * peer memory): the CPU must never copy from it, so such a send is never
 * inline (ibv_post_send would copy it into the WQE: a fault on a device
 * pointer). */
static bool cpu_reads(const struct rdma_mr *mh)
{
	return !mh || mh->path == RDMA_REG_HOST || mh->path == RDMA_REG_STAGING;
}

static bool in_mr(const struct rdma_mr *mh, const void *data, size_t size)
{
	uintptr_t a = (uintptr_t)data, b = (uintptr_t)mh->addr;
	return a >= b && a + size <= b + mh->len;
}

/* Make room: one CQ poll when the comm is short of SQ slots, requests or
 * (sender) a CTS. Returns 0 when there is room, -EAGAIN or the error. */
static int need_room(struct rdma_comm *c, bool cts)
{
	for (int pass = 0; pass < 2; pass++) {
		bool room = rdma__sq_inflight(&c->sq) + 2 <= c->sq.depth &&
			    rdma__reqtab_outstanding(&c->reqs) < c->eff &&
			    (!cts || c->cts_seen > c->next_send);
		if (room)
			return 0;
		if (pass == 0) {
			int rc = rdma__poll_channel(&c->ctx->cqs[c->channel]);
			if (rc < 0)
				return rc;
			rc = comm_check(c);
			if (rc)
				return rc;
		}
	}
	return -EAGAIN;
}

int rdma__irecv(void *vc, void *data, size_t size, uint32_t tag, void *vmh, void **request)
{
	struct rdma_comm *c = vc;
	struct rdma_mr *mh = vmh;
	struct rdma_cts *cts;
	struct rdma_req *r;
	struct wr_desc d;
	uint64_t sqs;
	int rc;

	ZB_DASSERT(c != NULL && request != NULL);
	ZB_DASSERT(c->side == RDMA_SIDE_RECV);
	if ((rc = comm_check(c)) != 0)
		return rc;
	if (size > RDMA_MSG_MAX || (size && !data) || (mh && !in_mr(mh, data, size)))
		return -EINVAL;
	if (!mh && size > RDMA_EAGER_MAX) {
		rdma__set_error("irecv of %zu bytes needs a registered buffer (eager limit %u)",
				size, RDMA_EAGER_MAX);
		return -EINVAL;
	}
	if ((rc = need_room(c, false)) != 0)
		return rc;
	r = rdma__reqtab_alloc(&c->reqs);
	ZB_DASSERT(r != NULL);
	cts = &c->cts_src[r->seq & c->reqs.mask];
	cts->addr = mh ? mr_addr(mh, data) : 0;
	cts->size = size;
	cts->rkey = mh ? mh->mr->rkey : 0;
	cts->tag = tag;
	cts->flags = (!mh || mh->type == NET_MEM_HOST ? RDMA_CTS_EAGER : 0) |
		     (mh ? RDMA_CTS_RKEY : 0);
	cts->seq31 = (uint32_t)(r->seq & RDMA_IMM_SEQMASK);
	r->comm = c;
	r->data = data;
	r->size = size;
	r->tag = tag;
	r->mh = mh;
	d = (struct wr_desc){.op = RDMA_OP_CTS, .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
			     .laddr = (uintptr_t)cts, .len = sizeof(*cts), .lkey = c->cts_mr->lkey,
			     .raddr = c->remote.addr + (r->seq % c->eff) * sizeof(*cts),
			     .rkey = c->remote.rkey, .imm = cts->seq31, .inline_ok = true};
	rc = post_wr(c, &d, &sqs);
	if (rc)
		return rc;
	*request = r;
	return 0;
}

/* The CTS for the next message: it must carry that sequence number, a
 * buffer at least this large and the same tag (net.h: the collectives use
 * tags as a check). A mismatch fails the comm; the sender aborts so that
 * the receiver's irecv fails the same way. */
static int cts_check(struct rdma_comm *c, size_t size, uint32_t tag,
		     const struct rdma_cts **out)
{
	const struct rdma_cts *cts = &c->fifo[c->next_send % c->eff];
	uint32_t seq31 = (uint32_t)(c->next_send & RDMA_IMM_SEQMASK);

	ZB_DASSERT(c->cts_seen > c->next_send);
	if (ZB_UNLIKELY(cts->seq31 != seq31)) {
		protocol_fail(c, ZB_ERR_BAD_FRAME, "CTS slot out of sequence", cts->seq31, seq31);
		return c->err;
	}
	if (ZB_UNLIKELY(tag != cts->tag)) {   /* first: a desync, whatever the size */
		send_abort(c, ZB_ERR_BAD_FRAME);
		protocol_fail(c, ZB_ERR_BAD_FRAME, "tag differs from the receive's", tag, cts->tag);
		return c->err;
	}
	if (ZB_UNLIKELY(size > cts->size)) {
		send_abort(c, -EMSGSIZE);
		protocol_fail(c, -EMSGSIZE, "message larger than the receive buffer", size, cts->size);
		return c->err;
	}
	*out = cts;
	return 0;
}

/* Eager: SEND WITH IMM into the receiver's pool (inline when tiny, from
 * the bounce buffer when the source is not registered). Otherwise RDMA
 * WRITE WITH IMM into the buffer the CTS names. */
static void data_wr(struct rdma_comm *c, uint64_t seq, const struct rdma_cts *cts,
		    const void *data, size_t size, const struct rdma_mr *mh, bool eager,
		    struct wr_desc *d)
{
	/* The send that uses the last credit is signalled: the caller will
	 * test for it before it can post again, so no flush is needed. */
	*d = (struct wr_desc){.op = RDMA_OP_DATA, .len = (uint32_t)size,
			      .imm = (uint32_t)(seq & RDMA_IMM_SEQMASK), .inline_ok = cpu_reads(mh),
			      .force_signal = rdma__reqtab_outstanding(&c->reqs) >= c->eff};
	if (mh) {                       /* registered: its memory (or staging copy) */
		d->laddr = mr_addr(mh, data);
		d->lkey = mh->mr->lkey;
	} else if (size <= c->inline_max) {   /* eager only: inline */
		d->laddr = (uintptr_t)data;
	} else {                        /* eager only: through the bounce buffer */
		uint8_t *b = c->bounce + (size_t)(seq & c->reqs.mask) * RDMA_EAGER_MAX;
		memcpy(b, data, size);
		d->laddr = (uintptr_t)b;
		d->lkey = c->bounce_mr->lkey;
	}
	if (eager) {
		d->opcode = IBV_WR_SEND_WITH_IMM;
	} else {
		ZB_DASSERT(mh != NULL);
		d->opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
		d->raddr = cts->addr;
		d->rkey = cts->rkey;
	}
}

int rdma__isend(void *vc, const void *data, size_t size, uint32_t tag, void *vmh, void **request)
{
	struct rdma_comm *c = vc;
	struct rdma_mr *mh = vmh;
	const struct rdma_cts *cts = NULL;
	struct rdma_req *r;
	struct wr_desc d;
	bool eager;
	int rc;

	ZB_DASSERT(c != NULL && request != NULL);
	ZB_DASSERT(c->side == RDMA_SIDE_SEND);
	if ((rc = comm_check(c)) != 0)
		return rc;
	if (size > RDMA_MSG_MAX || (size && !data) || (mh && !in_mr(mh, data, size)))
		return -EINVAL;
	if ((rc = need_room(c, true)) != 0 || (rc = cts_check(c, size, tag, &cts)) != 0)
		return rc;
	/* eager into the receiver's posted-receive pool whenever it takes one
	 * (a host buffer) and the size fits; from GPU memory too, which the NIC
	 * reads itself or which goes through its staging copy (until
	 * 2026-11-27 a GPU buffer could not send eager: a small message from
	 * one to an unregistered host buffer was refused) */
	eager = size <= c->peer_eager && (cts->flags & RDMA_CTS_EAGER);
	if (!eager && (!mh || !(cts->flags & RDMA_CTS_RKEY))) {
		rdma__set_error("isend of %zu bytes: %s", size,
				!mh ? "register the send buffer (reg_mr) for this size"
				    : "the receiver's buffer is not registered");
		return -EINVAL;
	}
	if (mh && mh->path == RDMA_REG_STAGING) {
		rc = rdma__gpu_copy(&c->ctx->gpu, true, (void *)(uintptr_t)mr_addr(mh, data),
				    data, size);
		if (rc) {
			rdma__set_error("node %u ch %u send: staging copy from the GPU: %s",
					c->peer, c->channel, zb_strerror(rc));
			return rc;   /* nothing posted; the comm stays usable */
		}
	}
	r = rdma__reqtab_alloc(&c->reqs);
	ZB_DASSERT(r != NULL && r->seq == c->next_send);
	data_wr(c, r->seq, cts, data, size, mh, eager, &d);
	r->comm = c;
	r->data = (void *)data;
	r->size = size;
	r->tag = tag;
	r->mh = mh;
	r->is_send = 1;
	rc = post_wr(c, &d, &r->sq_seq);
	if (rc)
		return rc;
	c->next_send++;
	*request = r;
	return 0;
}

static void post_flush(struct rdma_comm *c)
{
	/* Zero-length RDMA WRITE, signalled, into the receiver's CTS area
	 * (registered for remote write for this purpose): its completion
	 * retires every unsignalled WR before it (RC completes in order). */
	struct wr_desc d = {.op = RDMA_OP_FLUSH, .opcode = IBV_WR_RDMA_WRITE,
			    .raddr = c->remote.addr, .rkey = c->remote.rkey,
			    .force_signal = true};
	uint64_t s;

	(void)post_wr(c, &d, &s);
}

int rdma__test(void *vr, int *done, size_t *size)
{
	struct rdma_req *r = vr;
	struct rdma_comm *c;
	int rc;

	ZB_DASSERT(r != NULL && done != NULL);
	ZB_DASSERT(r->comm != NULL && r->state != RDMA_REQ_FREE);
	c = r->comm;
	*done = 0;
	(void)comm_check(c);
	if (r->state == RDMA_REQ_POSTED) {
		if (!(r->is_send && rdma__sq_done(&c->sq, r->sq_seq))) {
			rc = rdma__poll_channel(&c->ctx->cqs[c->channel]);
			if (rc < 0)
				rdma__comm_fail(c, RDMA_EV_WC_ERROR, rc, -1, 0,
						"channel %u: ibv_poll_cq failed", c->channel);
		}
		if (r->state == RDMA_REQ_POSTED && r->is_send) {
			if (rdma__sq_done(&c->sq, r->sq_seq))
				rdma__reqtab_complete(r, r->size);
			else if (rdma__sq_needs_flush(&c->sq, r->sq_seq))
				post_flush(c);
		}
	}
	if (r->state == RDMA_REQ_DONE && !r->is_send && r->mh &&
	    r->mh->path == RDMA_REG_STAGING && r->done_size) {
		rc = rdma__gpu_copy(&c->ctx->gpu, false, r->data,
				    (void *)(uintptr_t)mr_addr(r->mh, r->data), r->done_size);
		if (rc) {
			r->state = RDMA_REQ_ERROR;
			r->err = rc;
		}
	}
	if (r->state == RDMA_REQ_DONE) {
		*done = 1;
		if (size)
			*size = r->done_size;
		rdma__reqtab_release(&c->reqs, r);
		return 0;
	}
	if (r->state == RDMA_REQ_ERROR) {
		rc = r->err;
		*done = 1;
		rdma__reqtab_release(&c->reqs, r);
		return rc;
	}
	return 0;
}

static void wc_error(struct rdma_comm *c, const struct ibv_wc *wc, enum rdma_op op)
{
	struct rdma_wc_class k;

	if (atomic_load(&c->state) == RDMA_COMM_FAILED)
		return;     /* flushed behind the first error */
	k = rdma__wc_classify(wc->status);
	rdma__comm_fail(c, RDMA_EV_WC_ERROR, k.err, (int)wc->status, wc->vendor_err,
			"node %u ch %u %s: %s failed: %s (status %d, vendor_err 0x%x)",
			c->peer, c->channel, side_name(c), op_name(op),
			ibv_wc_status_str(wc->status), (int)wc->status, wc->vendor_err);
}

static void recv_done(struct rdma_comm *c, const struct ibv_wc *wc, uint32_t slot)
{
	uint32_t imm;
	struct rdma_req *r;
	int rc;

	if (ZB_UNLIKELY(!(wc->wc_flags & IBV_WC_WITH_IMM))) {
		protocol_fail(c, ZB_ERR_BAD_FRAME, "message without immediate data", wc->opcode, 0);
		return;
	}
	imm = ntohl(wc->imm_data);
	if (ZB_UNLIKELY(imm & RDMA_IMM_ABORT)) {
		int why = (int)(imm & RDMA_IMM_SEQMASK);
		rdma__comm_fail(c, -why == ZB_ERR_PEER_DOWN ? RDMA_EV_PEER_CLOSED : RDMA_EV_PROTOCOL,
				why ? -why : -ECONNABORTED, -1, 0,
				"node %u ch %u %s: peer aborted the connection: %s", c->peer,
				c->channel, side_name(c), zb_strerror(why ? -why : -ECONNABORTED));
		return;
	}
	if (c->side == RDMA_SIDE_SEND) {
		/* A CTS landed in fifo[seq % eff]. */
		if (ZB_UNLIKELY(wc->opcode != IBV_WC_RECV_RDMA_WITH_IMM ||
				imm != (uint32_t)(c->cts_seen & RDMA_IMM_SEQMASK))) {
			protocol_fail(c, ZB_ERR_BAD_FRAME, "CTS out of sequence", imm, c->cts_seen);
			return;
		}
		c->cts_seen++;
	} else {
		r = rdma__reqtab_get(&c->reqs, c->next_recv);
		if (ZB_UNLIKELY(imm != (uint32_t)(c->next_recv & RDMA_IMM_SEQMASK) || !r ||
				r->state != RDMA_REQ_POSTED)) {
			protocol_fail(c, ZB_ERR_BAD_FRAME, "data out of sequence", imm, c->next_recv);
			return;
		}
		if (ZB_UNLIKELY(wc->byte_len > r->size)) {
			protocol_fail(c, -EMSGSIZE, "message larger than the posted buffer",
				      wc->byte_len, r->size);
			return;
		}
		if (wc->opcode == IBV_WC_RECV) {
			if (wc->byte_len)
				memcpy(r->data, c->pool + (size_t)slot * RDMA_EAGER_MAX, wc->byte_len);
		} else if (ZB_UNLIKELY(wc->opcode != IBV_WC_RECV_RDMA_WITH_IMM)) {
			protocol_fail(c, ZB_ERR_BAD_FRAME, "unexpected receive opcode", wc->opcode, 0);
			return;
		}
		rdma__reqtab_complete(r, wc->byte_len);
		c->next_recv++;
	}
	rc = rdma__post_recv_pool(c, slot);
	if (ZB_UNLIKELY(rc))
		rdma__comm_fail(c, RDMA_EV_WC_ERROR, rc, -1, 0, "%s", rdma_last_error());
}

static void handle_wc(struct rdma_ctx *ctx, const struct ibv_wc *wc)
{
	uint32_t idx = rdma__wrid_comm(wc->wr_id);
	enum rdma_op op = rdma__wrid_op(wc->wr_id);
	uint64_t v = rdma__wrid_val(wc->wr_id);
	struct rdma_comm *c;

	c = idx < ctx->ncomms ? atomic_load_explicit(&ctx->comms[idx], memory_order_acquire) : NULL;
	if (!c || !c->qp || wc->qp_num != c->qp->qp_num)
		return;     /* a closed comm's leftovers */
	if (ZB_UNLIKELY(wc->status != IBV_WC_SUCCESS)) {
		wc_error(c, wc, op);
		return;
	}
	if (op == RDMA_OP_RECV) {
		if (atomic_load_explicit(&c->state, memory_order_relaxed) != RDMA_COMM_FAILED)
			recv_done(c, wc, (uint32_t)v);
		return;
	}
	/* Send-queue completion: retire through this WR (40-bit wr_id value). */
	v = c->sq.retired + ((v - c->sq.retired) & MASK40);
	if (ZB_LIKELY(v < c->sq.posted))
		rdma__sq_retire(&c->sq, v);
}

int rdma__poll_channel(struct rdma_cq *q)
{
	struct ibv_wc wc[RDMA_CQ_BURST];
	int n;

	ZB_DASSERT(q != NULL && q->cq != NULL);
	n = ibv_poll_cq(q->cq, RDMA_CQ_BURST, wc);
	if (ZB_UNLIKELY(n < 0)) {
		rdma__set_error("channel %u: ibv_poll_cq returned %d", q->channel, n);
		return ZB_ERR_DEVICE;
	}
	for (int i = 0; i < n; i++)
		handle_wc(q->ctx, &wc[i]);
	return n;
}

int rdma_poll_cq(void *arg)
{
	ZB_DASSERT(arg != NULL);
	return rdma__poll_channel(arg);
}

unsigned rdma_dp_poll(void *arg, uint64_t now_tsc)
{
	int n;

	(void)now_tsc;
	ZB_DASSERT(arg != NULL);
	n = rdma__poll_channel(arg);
	return n > 0 ? (unsigned)n : 0;
}

/* Before a live comm is destroyed: tell the peer (abort with PEER_DOWN, so
 * its pending requests fail at once, as net.h asks) and give the abort up
 * to ~50 ms to leave. Control path of the owner thread. */
void rdma__comm_close_notify(struct rdma_comm *c)
{
	uint64_t end;

	ZB_ASSERT(c != NULL);
	if (atomic_load(&c->state) != RDMA_COMM_READY || c->qp_error)
		return;
	send_abort(c, ZB_ERR_PEER_DOWN);
	if (!c->abort_posted)
		return;
	end = zb_now_ns() + 50 * 1000000ull;
	while (rdma__sq_inflight(&c->sq) && zb_now_ns() < end &&
	       atomic_load(&c->state) != RDMA_COMM_FAILED)
		if (rdma__poll_channel(&c->ctx->cqs[c->channel]) < 0)
			break;
}
