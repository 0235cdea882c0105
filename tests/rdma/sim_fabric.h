/* tests/rdma/sim_fabric.h — a simulated RC fabric for the protocol tests
 * (test_protocol.c, test_protocol_fuzz.c); see test_protocol.c's header.
 * Plugs into libibverbs' data-path dispatch (context->ops: post_send,
 * post_recv, poll_cq) and the rdma__modify_qp seam; builds a loopback pair
 * of comms the way comm.c does. Static functions: include it once. */
#ifndef ZBMD_SIM_FABRIC_H
#define ZBMD_SIM_FABRIC_H

#include "../../rdma/internal.h"
#include "rdma_test.h"

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

static ZB_UNUSED void sim_dereg(uint32_t key)
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

/* Which send WR (QP index << 62 | posted count) a completion retires; 0
 * for receive completions. Kept beside the queue. */
static uint64_t retire_pos[MAXQ];

static void push(struct ibv_wc wc)
{
	ZB_ASSERT(scq.tail - scq.head < MAXQ);
	retire_pos[scq.tail % MAXQ] = 0;
	scq.q[scq.tail++ % MAXQ] = wc;
}



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

/* A send WR as the fabric keeps it until it executes: RC with rnr_retry 7
 * (what the provider configures) retries forever when the responder has no
 * receive posted, so such WRs wait here, in order, until one is posted. */
struct sim_wr {
	struct sim_qp *q;
	enum ibv_wr_opcode opcode;
	uint64_t wr_id, raddr, posn;
	uint32_t len, rkey, imm;
	bool signaled;
	const uint8_t *src;        /* the buffer stays valid until completion */
	uint8_t inl[64];           /* inline data is copied at post time */
	enum ibv_wc_status local;  /* a local error found at post time */
};
static struct sim_wr waitq[2][256];   /* per QP: RC orders WRs per send queue */
static unsigned wq_head[2], wq_tail[2];

static void sim_complete(struct sim_wr *w, enum ibv_wc_status st)
{
	struct sim_qp *q = w->q;

	if (st != IBV_WC_SUCCESS || w->signaled) {
		push((struct ibv_wc){.wr_id = w->wr_id, .status = st, .qp_num = q->qp.qp_num});
		retire_pos[(scq.tail - 1) % MAXQ] = ((uint64_t)(q - sqp) << 62) | w->posn;
		if (st != IBV_WC_SUCCESS && st != IBV_WC_WR_FLUSH_ERR)
			to_error(q);
	}
}

/* Execute one WR; false when it must wait for a receive (RNR). */
static bool sim_exec(struct sim_wr *w)
{
	struct sim_qp *q = w->q, *p = q->peer;
	bool imm = w->opcode != IBV_WR_RDMA_WRITE;
	enum ibv_wc_status st = w->local;
	struct sim_wqe r = {0};

	if (q->error) {
		sim_complete(w, IBV_WC_WR_FLUSH_ERR);
		return true;
	}
	if (st == IBV_WC_SUCCESS && p->error) {
		st = IBV_WC_RETRY_EXC_ERR;           /* the responder is gone */
	} else if (st == IBV_WC_SUCCESS && w->opcode != IBV_WR_SEND_WITH_IMM && w->len &&
		   !sim_key_ok(w->rkey, w->raddr, w->len)) {
		st = IBV_WC_REM_ACCESS_ERR;
		to_error(p);                          /* responder: invalid R_Key */
	} else if (st == IBV_WC_SUCCESS && imm && p->rq_head == p->rq_tail) {
		return false;                         /* RNR: wait for a receive */
	} else if (st == IBV_WC_SUCCESS) {
		if (imm)
			r = p->rq[p->rq_head++ % 64];
		if (w->opcode == IBV_WR_SEND_WITH_IMM && w->len > r.len) {
			st = IBV_WC_REM_INV_REQ_ERR;
			push((struct ibv_wc){.wr_id = r.wr_id, .status = IBV_WC_LOC_LEN_ERR,
					     .qp_num = p->qp.qp_num});
			to_error(p);
		} else {
			if (w->len)
				memcpy((void *)(uintptr_t)(w->opcode == IBV_WR_SEND_WITH_IMM ? r.addr : w->raddr),
				       w->src, w->len);
			if (imm)
				push((struct ibv_wc){
					.wr_id = r.wr_id, .status = IBV_WC_SUCCESS,
					.opcode = w->opcode == IBV_WR_SEND_WITH_IMM ? IBV_WC_RECV
						: IBV_WC_RECV_RDMA_WITH_IMM,
					.byte_len = w->len, .imm_data = w->imm,
					.wc_flags = IBV_WC_WITH_IMM, .qp_num = p->qp.qp_num});
		}
	}
	sim_complete(w, st);
	return true;
}

/* Run each QP's waiting WRs in order while they can run. */
static void sim_run(void)
{
	bool moved = true;

	while (moved) {
		moved = false;
		for (int i = 0; i < 2; i++)
			while (wq_head[i] != wq_tail[i] && sim_exec(&waitq[i][wq_head[i] % 256])) {
				wq_head[i]++;
				moved = true;
			}
	}
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
	sim_run();
	return 0;
}

/* "Device memory" (a test's GPU buffer the NIC reads itself): the CPU
 * must never copy from it, so an inline send from it is counted. */
static uintptr_t sim_dev_lo, sim_dev_hi;
static int sim_inline_dev;

static int sim_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct sim_qp *q = (struct sim_qp *)qp;

	for (; wr; wr = wr->next) {
		uint32_t len = wr->num_sge ? wr->sg_list[0].length : 0;
		struct sim_wr *w;

		int qi = (int)(q - sqp);
		if (q->posted - q->retired >= q->depth || wq_tail[qi] - wq_head[qi] >= 256) {
			q->overflow++;
			*bad = wr;
			return ENOMEM;
		}
		w = &waitq[qi][wq_tail[qi] % 256];
		*w = (struct sim_wr){.q = q, .opcode = wr->opcode, .wr_id = wr->wr_id,
				     .posn = ++q->posted, .len = len, .imm = wr->imm_data,
				     .signaled = !!(wr->send_flags & IBV_SEND_SIGNALED),
				     .raddr = wr->wr.rdma.remote_addr, .rkey = wr->wr.rdma.rkey};
		w->src = len ? (const uint8_t *)(uintptr_t)wr->sg_list[0].addr : NULL;
		if (len && (wr->send_flags & IBV_SEND_INLINE)) {
			ZB_ASSERT(len <= sizeof(w->inl));
			if ((uintptr_t)w->src < sim_dev_hi && (uintptr_t)w->src + len > sim_dev_lo)
				sim_inline_dev++;
			memcpy(w->inl, w->src, len);
			w->src = w->inl;
		} else if (len && !sim_key_ok(wr->sg_list[0].lkey, wr->sg_list[0].addr, len)) {
			w->local = IBV_WC_LOC_PROT_ERR;
		}
		wq_tail[qi]++;
		sim_run();
	}
	return 0;
}

/* A message arriving from nowhere the provider knows (a misbehaving peer):
 * consumes a posted receive like any arrival. */
static ZB_UNUSED void sim_inject_recv(struct sim_qp *q, uint32_t imm_host)
{
	if (q->rq_head == q->rq_tail)
		return;
	struct sim_wqe r = q->rq[q->rq_head++ % 64];
	push((struct ibv_wc){.wr_id = r.wr_id, .status = IBV_WC_SUCCESS, .opcode = IBV_WC_RECV,
			     .byte_len = 0, .imm_data = htonl(imm_host), .wc_flags = IBV_WC_WITH_IMM,
			     .qp_num = q->qp.qp_num});
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

static int sim_modify_fail;   /* > 0: that many modify_qp calls fail (EIO) */

static int sim_modify(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	int i = (struct sim_qp *)qp == &sqp[0] ? 0 : 1;

	ZB_ASSERT(mask & IBV_QP_STATE);
	if (sim_modify_fail > 0) {
		sim_modify_fail--;
		return EIO;
	}
	states[i][nstate[i]++ & 7] = a->qp_state;
	qp->state = a->qp_state;
	if (a->qp_state == IBV_QPS_ERR)
		to_error((struct sim_qp *)qp);
	return 0;
}

/* the sim's QPs are not the library's to destroy */
static int sim_destroy_qp(struct ibv_qp *qp)
{
	(void)qp;
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

static ZB_UNUSED bool had_event(enum rdma_event_kind k, int st)
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

/* The pair built, each comm in RDMA_COMM_LOCAL (no blob exchanged yet). */
static void setup_local(uint16_t signal_every)
{
	static struct rdma_comm *_Atomic acomms[2 * CFG_MAX_NODES];

	memset(&scq, 0, sizeof(scq));
	memset(wq_head, 0, sizeof(wq_head));
	memset(wq_tail, 0, sizeof(wq_tail));
	memset(sqp, 0, sizeof(sqp));
	memset(&ctx, 0, sizeof(ctx));
	nregs = 0;
	nev = 0;
	nstate[0] = nstate[1] = 0;
	sim_ctx.ops.post_send = sim_post_send;
	sim_ctx.ops.post_recv = sim_post_recv;
	sim_ctx.ops.poll_cq = sim_poll_cq;
	rdma__modify_qp = sim_modify;
	rdma__destroy_qp = sim_destroy_qp;
	sim_modify_fail = 0;
	scq.cq.context = &sim_ctx;
	for (int i = 0; i < 2; i++) {
		sqp[i].qp.context = &sim_ctx;
		sqp[i].qp.qp_num = 0x40 + (uint32_t)i;
		sqp[i].peer = &sqp[1 - i];
	}
	static struct rdma_stash stash[2 * CFG_MAX_NODES];
	memset(stash, 0, sizeof(stash));
	ctx.stash = stash;
	pthread_mutex_init(&ctx.lock, NULL);
	ctx.self = 0;
	ctx.cluster = 7;
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
}

static ZB_UNUSED void setup(uint16_t signal_every)
{
	setup_local(signal_every);
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
static ZB_UNUSED int wait_req(void *req, size_t *n)
{
	int done = 0, rc = 0;

	for (int i = 0; i < 10000 && !done; i++)
		rc = rdma__test(req, &done, n);
	return done ? rc : -ETIMEDOUT;
}

static ZB_UNUSED int post_send(const void *buf, size_t len, void *mh, void **req)
{
	int rc;
	for (int i = 0; i < 1000; i++)
		if ((rc = rdma__isend(&cs, buf, len, 0, mh, req)) != -EAGAIN)
			return rc;
	return -ETIMEDOUT;
}

static ZB_UNUSED struct rdma_mr *host_mr(void *addr, size_t len)
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


#endif
