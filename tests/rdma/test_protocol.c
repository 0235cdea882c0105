/* The data protocol (xfer.c) end to end over a simulated RC fabric.
 *
 * No RDMA device exists on most build machines, so this test plugs a small
 * software RC "device" into libibverbs' data-path entry points
 * (ibv_post_send / ibv_post_recv / ibv_poll_cq dispatch through
 * context->ops, exactly where a real provider plugs in) and the
 * rdma__modify_qp seam. It implements the RC semantics the provider relies
 * on: in-order execution and completion, completions only for signalled
 * send WRs (errors always), a completion retiring the WRs before it, SQ
 * depth enforced by what has been retired, R_Key checks on RDMA WRITE,
 * receive WQEs consumed by SEND and WRITE WITH IMM, the QP entering ERR on
 * an error and flushing its queues. The real device test is
 * test_loopback.c; this one proves the protocol logic runs everywhere. */
#include "../../rdma/internal.h"
#include "rdma_test.h"
#include "tap.h"

#include <arpa/inet.h>

#define SLOTS 8
#define MAXQ 4096

struct sim_wqe { uint64_t wr_id, addr; uint32_t len; };
struct sim_cq { struct ibv_cq cq; struct ibv_wc q[MAXQ]; unsigned head, tail; };
struct sim_qp {
	struct ibv_qp qp;
	struct sim_qp *peer;
	struct sim_wqe rq[64];
	unsigned rq_head, rq_tail;
	uint64_t posted, retired;   /* send WRs, for the depth check */
	uint32_t depth;
	int overflow;
	bool error;
};
struct sim_mr { uint64_t addr; size_t len; uint32_t key; bool live; };

static struct ibv_context sim_ctx;
static struct sim_cq scq;
static struct sim_qp sqp[2];           /* [0] send comm, [1] recv comm */
static struct sim_mr regs[64];
static int nregs;
static struct rdma_mr *mrs[8];
static int nmrs;
static uint32_t next_key = 0x100;
static int states[2][8], nstate[2];

static struct ibv_mr *sim_reg(void *addr, size_t len)
{
	struct ibv_mr *mr = calloc(1, sizeof(*mr));
	mr->addr = addr;
	mr->length = len;
	mr->lkey = mr->rkey = next_key++;
	regs[nregs++] = (struct sim_mr){(uintptr_t)addr, len, mr->rkey, true};
	return mr;
}

static void sim_dereg(uint32_t key)
{
	for (int i = 0; i < nregs; i++)
		if (regs[i].key == key)
			regs[i].live = false;
}

static bool sim_key_ok(uint32_t key, uint64_t addr, size_t len)
{
	for (int i = 0; i < nregs; i++)
		if (regs[i].live && regs[i].key == key && addr >= regs[i].addr &&
		    addr + len <= regs[i].addr + regs[i].len)
			return true;
	return false;
}

static void push(struct ibv_wc wc)
{
	ZB_ASSERT(scq.tail - scq.head < MAXQ);
	scq.q[scq.tail++ % MAXQ] = wc;
}

/* Bit 63 of the hidden position marker: which send WR (posted count) a
 * completion retires, kept beside the queue. */
static uint64_t retire_pos[MAXQ];

static void flush_rq(struct sim_qp *q)
{
	while (q->rq_head != q->rq_tail) {
		struct sim_wqe *w = &q->rq[q->rq_head++ % 64];
		push((struct ibv_wc){.wr_id = w->wr_id, .status = IBV_WC_WR_FLUSH_ERR,
				     .qp_num = q->qp.qp_num});
	}
}

static void to_error(struct sim_qp *q)
{
	if (q->error)
		return;
	q->error = true;
	flush_rq(q);
}

static int sim_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct sim_qp *q = (struct sim_qp *)qp;

	for (; wr; wr = wr->next) {
		if (q->rq_tail - q->rq_head >= SLOTS) {
			*bad = wr;
			return ENOMEM;
		}
		q->rq[q->rq_tail++ % 64] = (struct sim_wqe){
			wr->wr_id, wr->num_sge ? wr->sg_list[0].addr : 0,
			wr->num_sge ? wr->sg_list[0].length : 0};
		if (q->error)
			flush_rq(q);
	}
	return 0;
}

static int sim_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct sim_qp *q = (struct sim_qp *)qp, *p;
	uint8_t data[1u << 16], *src;

	for (; wr; wr = wr->next) {
		uint32_t len = wr->num_sge ? wr->sg_list[0].length : 0;
		struct ibv_wc me = {.wr_id = wr->wr_id, .qp_num = qp->qp_num};
		enum ibv_wc_status st = IBV_WC_SUCCESS;

		if (q->posted - q->retired >= q->depth) {
			q->overflow++;
			*bad = wr;
			return ENOMEM;
		}
		q->posted++;
		p = q->peer;
		src = len ? (uint8_t *)(uintptr_t)wr->sg_list[0].addr : NULL;
		if (len && (wr->send_flags & IBV_SEND_INLINE)) {
			ZB_ASSERT(len <= sizeof(data));
			memcpy(data, src, len);      /* inline: copied at post time */
			src = data;
		} else if (len && !sim_key_ok(wr->sg_list[0].lkey, wr->sg_list[0].addr, len)) {
			st = IBV_WC_LOC_PROT_ERR;
		}
		if (q->error) {
			st = IBV_WC_WR_FLUSH_ERR;
		} else if (st == IBV_WC_SUCCESS) {
			bool imm = wr->opcode != IBV_WR_RDMA_WRITE;
			if (wr->opcode != IBV_WR_SEND_WITH_IMM && len &&
			    !sim_key_ok(wr->wr.rdma.rkey, wr->wr.rdma.remote_addr, len)) {
				st = IBV_WC_REM_ACCESS_ERR;
				to_error(p);            /* responder: invalid R_Key */
			} else if (imm && p->rq_head == p->rq_tail) {
				st = IBV_WC_RNR_RETRY_EXC_ERR;
			} else {
				struct sim_wqe w = {0};
				if (imm)
					w = p->rq[p->rq_head++ % 64];
				if (wr->opcode == IBV_WR_SEND_WITH_IMM) {
					if (len > w.len) {
						st = IBV_WC_REM_INV_REQ_ERR;
						push((struct ibv_wc){.wr_id = w.wr_id, .status = IBV_WC_LOC_LEN_ERR,
								     .qp_num = p->qp.qp_num});
						to_error(p);
					} else if (len) {
						memcpy((void *)(uintptr_t)w.addr, src, len);
					}
				} else if (len) {
					memcpy((void *)(uintptr_t)wr->wr.rdma.remote_addr, src, len);
				}
				if (st == IBV_WC_SUCCESS && imm)
					push((struct ibv_wc){
						.wr_id = w.wr_id, .status = IBV_WC_SUCCESS,
						.opcode = wr->opcode == IBV_WR_SEND_WITH_IMM ? IBV_WC_RECV
							: IBV_WC_RECV_RDMA_WITH_IMM,
						.byte_len = len, .imm_data = wr->imm_data,
						.wc_flags = IBV_WC_WITH_IMM, .qp_num = p->qp.qp_num});
			}
		}
		if (st != IBV_WC_SUCCESS || (wr->send_flags & IBV_SEND_SIGNALED)) {
			me.status = st;
			retire_pos[scq.tail % MAXQ] = ((uint64_t)(q - sqp) << 62) | q->posted;
			push(me);
			if (st != IBV_WC_SUCCESS && st != IBV_WC_WR_FLUSH_ERR)
				to_error(q);
		} else {
			retire_pos[scq.tail % MAXQ] = 0;
		}
	}
	return 0;
}

static int sim_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	int k = 0;

	(void)cq;
	while (k < n && scq.head != scq.tail) {
		uint64_t pos = retire_pos[scq.head % MAXQ];
		/* a send completion frees its WR and every one before it */
		for (int i = 0; i < 2; i++)
			if (pos && (pos >> 62) == (uint64_t)i && scq.q[scq.head % MAXQ].qp_num == sqp[i].qp.qp_num)
				sqp[i].retired = pos & ((1ull << 62) - 1);
		wc[k++] = scq.q[scq.head++ % MAXQ];
	}
	return k;
}

static int sim_modify(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	int i = (struct sim_qp *)qp == &sqp[0] ? 0 : 1;

	ZB_ASSERT(mask & IBV_QP_STATE);
	states[i][nstate[i]++ & 7] = a->qp_state;
	qp->state = a->qp_state;
	if (a->qp_state == IBV_QPS_ERR)
		to_error((struct sim_qp *)qp);
	return 0;
}

/* ---- fixture: a loopback pair built as comm.c would, over the sim ------ */
static struct rdma_ctx ctx;
static struct rdma_cq cqs[1];
static struct rdma_comm *comms[2 * CFG_MAX_NODES];
static struct rdma_comm cs, cr;
static struct rdma_req reqs_s[SLOTS], reqs_r[SLOTS];
static struct rdma_event evs[32];
static int nev;

static void on_event(void *arg, const struct rdma_event *ev)
{
	(void)arg;
	if (nev < 32)
		evs[nev++] = *ev;
}

static bool had_event(enum rdma_event_kind k, int st)
{
	for (int i = 0; i < nev; i++)
		if (evs[i].kind == k && (st < 0 || evs[i].wc_status == st))
			return true;
	return false;
}

static void build_comm(struct rdma_comm *c, enum rdma_side side, struct sim_qp *q)
{
	size_t ring = SLOTS * sizeof(struct rdma_cts);

	memset(c, 0, sizeof(*c));
	c->ctx = &ctx;
	c->side = side;
	c->index = rdma__comm_index(&ctx, 0, 0, side);
	c->slots = SLOTS;
	c->qp = &q->qp;
	c->inline_max = 64;
	c->req_mem = side == RDMA_SIDE_SEND ? reqs_s : reqs_r;
	rdma__reqtab_init(&c->reqs, c->req_mem, SLOTS);
	c->sq_depth = SLOTS + 2;
	q->depth = c->sq_depth;
	rdma__sq_init(&c->sq, c->sq_depth, ctx.signal_every);
	if (side == RDMA_SIDE_SEND) {
		c->fifo = calloc(1, ring);
		c->bounce = calloc(SLOTS, RDMA_EAGER_MAX);
		c->fifo_mr = sim_reg(c->fifo, ring);
		c->bounce_mr = sim_reg(c->bounce, SLOTS * RDMA_EAGER_MAX);
		c->local.addr = (uintptr_t)c->fifo;
		c->local.rkey = c->fifo_mr->rkey;
	} else {
		c->cts_src = calloc(1, ring);
		c->pool = calloc(SLOTS, RDMA_EAGER_MAX);
		c->cts_mr = sim_reg(c->cts_src, ring);
		c->pool_mr = sim_reg(c->pool, SLOTS * RDMA_EAGER_MAX);
		c->local.addr = (uintptr_t)c->cts_src;
		c->local.rkey = c->cts_mr->rkey;
	}
	c->local = (struct rdma_conn){.side = side, .flags = RDMA_CONN_F_GLOBAL, .mtu = IBV_MTU_1024,
				      .cluster = 7, .qpn = q->qp.qp_num, .psn = 0x100 + side, .slots = SLOTS,
				      .eager_max = RDMA_EAGER_MAX, .rkey = c->local.rkey,
				      .addr = c->local.addr, .gid = {0xfe, 0x80, [15] = 1}};
	atomic_store(&c->state, RDMA_COMM_LOCAL);
	comms[c->index] = c;
	for (uint32_t i = 0; i < SLOTS; i++)
		ZB_ASSERT(rdma__post_recv_pool(c, i) == 0);
}

static void setup(uint16_t signal_every)
{
	static struct rdma_comm *_Atomic acomms[2 * CFG_MAX_NODES];

	memset(&scq, 0, sizeof(scq));
	memset(sqp, 0, sizeof(sqp));
	memset(&ctx, 0, sizeof(ctx));
	nregs = 0;
	nev = 0;
	nstate[0] = nstate[1] = 0;
	sim_ctx.ops.post_send = sim_post_send;
	sim_ctx.ops.post_recv = sim_post_recv;
	sim_ctx.ops.poll_cq = sim_poll_cq;
	rdma__modify_qp = sim_modify;
	scq.cq.context = &sim_ctx;
	for (int i = 0; i < 2; i++) {
		sqp[i].qp.context = &sim_ctx;
		sqp[i].qp.qp_num = 0x40 + (uint32_t)i;
		sqp[i].peer = &sqp[1 - i];
	}
	ctx.channels = 1;
	ctx.signal_every = signal_every;
	ctx.qpl = (struct rdma_qp_local){.port = 1, .ethernet = true, .active_mtu = IBV_MTU_1024,
					 .timeout = 14, .retry_cnt = 7, .rnr_retry = 7,
					 .min_rnr_timer = 12, .max_rd_atomic = 1};
	ctx.pargs.on_event = on_event;
	cqs[0] = (struct rdma_cq){.ctx = &ctx, .cq = &scq.cq, .channel = 0};
	ctx.cqs = cqs;
	ctx.ncomms = 2 * CFG_MAX_NODES;
	for (unsigned i = 0; i < ctx.ncomms; i++)
		atomic_store(&acomms[i], NULL);
	ctx.comms = acomms;
	build_comm(&cs, RDMA_SIDE_SEND, &sqp[0]);
	build_comm(&cr, RDMA_SIDE_RECV, &sqp[1]);
	atomic_store(&ctx.comms[cs.index], &cs);
	atomic_store(&ctx.comms[cr.index], &cr);
	/* blob exchange, as rdma_conn_deliver does, then RTR/RTS */
	cs.remote = cr.local;
	cr.remote = cs.local;
	cs.eff = cr.eff = SLOTS;
	cs.peer_eager = cr.peer_eager = RDMA_EAGER_MAX;
	atomic_store(&cs.state, RDMA_COMM_REMOTE);
	atomic_store(&cr.state, RDMA_COMM_REMOTE);
	ZB_ASSERT(rdma__comm_establish(&cs) == 0 && rdma__comm_establish(&cr) == 0);
}

static void teardown(void)
{
	free(cs.fifo); free(cs.bounce); free(cr.cts_src); free(cr.pool);
	free(cs.fifo_mr); free(cs.bounce_mr); free(cr.cts_mr); free(cr.pool_mr);
	for (int i = 0; i < nmrs; i++) {
		free(mrs[i]->mr);
		free(mrs[i]);
	}
	nmrs = 0;
}

/* Bounded wait. 0 and *n, an error, or -ETIMEDOUT after many polls. */
static int wait_req(void *req, size_t *n)
{
	int done = 0, rc = 0;

	for (int i = 0; i < 10000 && !done; i++)
		rc = rdma__test(req, &done, n);
	return done ? rc : -ETIMEDOUT;
}

static int post_send(const void *buf, size_t len, void *mh, void **req)
{
	int rc;
	for (int i = 0; i < 1000; i++)
		if ((rc = rdma__isend(&cs, buf, len, 0, mh, req)) != -EAGAIN)
			return rc;
	return -ETIMEDOUT;
}

static struct rdma_mr *host_mr(void *addr, size_t len)
{
	struct rdma_mr *m = calloc(1, sizeof(*m));
	mrs[nmrs++] = m;
	m->mr = sim_reg(addr, len);
	m->addr = addr;
	m->len = len;
	m->path = RDMA_REG_HOST;
	m->type = NET_MEM_HOST;
	m->dmabuf_fd = -1;
	return m;
}

int main(void)
{
	static uint8_t sbuf[1u << 20], rbuf[1u << 20];
	uint8_t small[4096];
	void *rq, *sq;
	size_t n = 0;
	int rc;

	tap_plan(35);
	setup(4);
	ok(nstate[0] == 2 && states[0][0] == IBV_QPS_RTR && states[0][1] == IBV_QPS_RTS,
	   "establish walks INIT -> RTR -> RTS");

	/* 1. tiny eager inline */
	is_int(rdma__irecv(&cr, small, sizeof(small), 0, NULL, &rq), 0, "irecv unregistered 4 KiB");
	is_int(post_send("ping", 5, NULL, &sq), 0, "isend 5 bytes once the CTS arrives");
	ok(wait_req(sq, &n) == 0 && n == 5, "send completes (via a flush: signal_every 4)");
	ok(wait_req(rq, &n) == 0 && n == 5 && !strcmp((char *)small, "ping"), "received 'ping'");
	rdma__irecv(&cr, small, 8, 0, NULL, &rq);
	ok(rdma_dp_poll(rdma_cq_source(&ctx, 0), 0) == 1 && cs.cts_seen == 2,
	   "rdma_dp_poll (the lcore poller) handles the CTS completion");
	post_send("x", 2, NULL, &sq);
	ok(wait_req(sq, &n) == 0 && wait_req(rq, &n) == 0 && n == 2, "and the message goes through");

	/* 2. eager from unregistered memory above inline_max: bounce buffer */
	for (int i = 0; i < 3000; i++)
		sbuf[i] = (uint8_t)(i * 13);
	rdma__irecv(&cr, small, sizeof(small), 0, NULL, &rq);
	rc = post_send(sbuf, 3000, NULL, &sq);
	ok(rc == 0 && wait_req(sq, &n) == 0 && wait_req(rq, &n) == 0 && n == 3000 &&
	   !memcmp(small, sbuf, 3000), "3000-byte eager send through the bounce buffer");
	is_int(rdma__isend(&cs, sbuf, 5000, 0, NULL, &sq), -EAGAIN, "no CTS posted: isend says EAGAIN");

	/* 3. large registered: write with imm straight into the buffer */
	struct rdma_mr *smh = host_mr(sbuf, sizeof(sbuf)), *rmh = host_mr(rbuf, sizeof(rbuf));
	for (size_t i = 0; i < sizeof(sbuf); i++)
		sbuf[i] = (uint8_t)(i * 7 + 3);
	is_int(rdma__irecv(&cr, rbuf, 65536, 0, rmh, &rq), 0, "irecv 64 KiB registered");
	is_int(post_send(sbuf, 65536, smh, &sq), 0, "isend 64 KiB registered");
	ok(wait_req(sq, &n) == 0 && wait_req(rq, &n) == 0 && n == 65536 && !memcmp(rbuf, sbuf, 65536),
	   "64 KiB written with immediate, intact");
	is_int(rdma__irecv(&cr, rbuf, 100, 0, NULL, &rq), 0, "short unregistered irecv");
	rc = post_send(sbuf, 50, smh, &sq);
	ok(rc == 0 && wait_req(sq, &n) == 0 && wait_req(rq, &n) == 0 && n == 50,
	   "registered sender, unregistered receiver: eager");

	/* 4. pipeline: 500 messages of varied sizes through 8 slots */
	{
		void *rr[500], *ss[500];
		int pr = 0, ps = 0, dr = 0, ds = 0, bad = 0, spins = 0;
		size_t sz[500];
		memset(rbuf, 0, sizeof(rbuf));
		for (int i = 0; i < 500; i++)
			sz[i] = (size_t)((i * 2654435761u) % 2000) + (i % 3 == 0 ? 0 : 1);
		while ((dr < 500 || ds < 500) && spins++ < 100000) {
			if (pr < 500 && rdma__irecv(&cr, rbuf + pr * 2000u, 2000, 0, rmh, &rr[pr]) == 0)
				pr++;
			if (ps < 500 && rdma__isend(&cs, sbuf + ps * 2000u, sz[ps], 0,
						    ps % 2 ? smh : NULL, &ss[ps]) == 0)
				ps++;
			int d = 0;
			if (ds < ps && rdma__test(ss[ds], &d, &n) == 0 && d)
				ds++;
			d = 0;
			if (dr < pr && rdma__test(rr[dr], &d, &n) == 0 && d) {
				if (n != sz[dr] || memcmp(rbuf + dr * 2000u, sbuf + dr * 2000u, n))
					bad++;
				dr++;
			}
		}
		ok(ds == 500 && dr == 500, "500 messages through an 8-slot window (%d sent, %d received)", ds, dr);
		is_int(bad, 0, "every message has its size and bytes (0-byte ones too)");
		is_int(sqp[0].overflow + sqp[1].overflow, 0, "the send queues never overflowed");
		ok(cs.sq.posted > 500 && cs.sq.retired == cs.sq.posted, "every send WR retired (%llu posted)",
		   (unsigned long long)cs.sq.posted);
	}

	/* 5. protocol guard: receive data out of sequence */
	{
		struct ibv_send_wr wr = {.opcode = IBV_WR_SEND_WITH_IMM, .imm_data = htonl(12345),
					 .send_flags = IBV_SEND_SIGNALED}, *bad;
		rdma__irecv(&cr, small, sizeof(small), 0, NULL, &rq);
		sim_post_send(&sqp[0].qp, &wr, &bad);
		is_int(wait_req(rq, &n), ZB_ERR_BAD_FRAME, "data with a wrong sequence: bad frame");
		ok(had_event(RDMA_EV_PROTOCOL, -1) && atomic_load(&cr.state) == RDMA_COMM_FAILED,
		   "protocol event; the comm is out of service");
		is_int(rdma__irecv(&cr, small, 10, 0, NULL, &rq), ZB_ERR_BAD_FRAME, "a failed comm refuses new work");
		ok(sqp[1].error && states[1][nstate[1] - 1] == IBV_QPS_ERR, "its QP was moved to ERR");
	}
	teardown();

	/* 6. oversize: sender refuses and aborts, receiver fails the same way */
	setup(1);
	rdma__irecv(&cr, small, 100, 0, NULL, &rq);
	is_int(post_send(sbuf, 200, NULL, &sq), -EMSGSIZE, "200 bytes into a 100-byte receive: EMSGSIZE");
	is_int(wait_req(rq, &n), -EMSGSIZE, "receiver hears the abort: EMSGSIZE, no hang");
	ok(!sqp[0].error, "the aborting sender kept its QP up so the abort could leave");
	teardown();

	/* 7. bad rkey: the receiver's buffer is deregistered before the write */
	setup(4);
	smh = host_mr(sbuf, sizeof(sbuf));
	rmh = host_mr(rbuf, sizeof(rbuf));
	rdma__irecv(&cr, rbuf, 65536, 0, rmh, &rq);
	sim_dereg(rmh->mr->rkey);
	rc = post_send(sbuf, 65536, smh, &sq);
	is_int(rc == 0 ? wait_req(sq, &n) : rc, -EACCES, "write to a dead rkey: EACCES");
	ok(had_event(RDMA_EV_WC_ERROR, IBV_WC_REM_ACCESS_ERR), "event carries REM_ACCESS_ERR");
	{
		const char *msg = "";
		for (int i = 0; i < nev; i++)
			if (evs[i].wc_status == IBV_WC_REM_ACCESS_ERR)
				msg = evs[i].msg;
		ok(strstr(msg, ibv_wc_status_str(IBV_WC_REM_ACCESS_ERR)) != NULL && evs[0].side,
		   "event text from ibv_wc_status_str: %s", msg);
	}
	is_int(wait_req(rq, &n), -ECANCELED, "the receiver's request is flushed: ECANCELED, no hang");
	teardown();

	/* 8. tag mismatch: both sides fail with BAD_FRAME (net.h) */
	setup(4);
	rdma__irecv(&cr, small, 100, 5, NULL, &rq);
	is_int(post_send(sbuf, 10, NULL, &sq), ZB_ERR_BAD_FRAME, "isend tag 0 against irecv tag 5: bad frame");
	is_int(wait_req(rq, &n), ZB_ERR_BAD_FRAME, "the irecv fails with bad frame too");
	teardown();

	/* 9. close: the peer's pending receive fails with PEER_DOWN at once */
	setup(4);
	rdma__irecv(&cr, small, 100, 0, NULL, &rq);
	rdma__comm_close_notify(&cs);
	is_int(wait_req(rq, &n), ZB_ERR_PEER_DOWN, "sender closed: pending irecv fails with PEER_DOWN");
	ok(had_event(RDMA_EV_PEER_CLOSED, -1) && cs.sq.retired == cs.sq.posted,
	   "peer-closed event; the abort left before close returned");
	teardown();

	/* 10. async failure (what rdma_poll_async stores) reaches the owner */
	setup(4);
	rdma__irecv(&cr, small, 100, 0, NULL, &rq);
	atomic_store(&cr.fail_err, ZB_ERR_PEER_DOWN);
	is_int(wait_req(rq, &n), ZB_ERR_PEER_DOWN, "port-down error fails the pending receive");
	ok(sqp[1].error, "and takes the QP out of service");
	teardown();
	return tap_done();
}
