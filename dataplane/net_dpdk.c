/* dataplane/net_dpdk.c — the "dpdk" net provider (zbmd/net.h) on the
 * reliable transport of one lane.
 *
 * A provider instance (ctx) belongs to one lane: the dataplane lcore that
 * calls init() (lane 0 when called before the loops run, e.g. from main).
 * Every later call on it — and on its comms and requests — must come from
 * that lcore (a poller), because the lane's transport instance is
 * single-threaded; the transport's callbacks reach the ctx on that lcore too.
 *
 * Mapping. Channel c of a peer = transport stream c (c < DP_NET_CHANNELS).
 * One isend = two transport messages on that stream: an 8-byte header
 * {tag, size} (copied), then the payload (sent zero-copy: the request's
 * tp_ref keeps it pinned until the transport and the NIC are done). The
 * receiver alternates header / payload per (peer, stream); a payload goes
 * into the oldest posted irecv of that comm (matching in posting order,
 * net.h): straight from the frames when that irecv was posted before the
 * payload's first fragment came and fits the header's size and tag (the
 * transport's rx_place: one copy, frame -> user buffer), else through the
 * transport's reassembly arena (a second copy) — or, with no irecv posted (or no comm accepted yet), left
 * with the transport (deliver returns -EAGAIN), which holds back the stream:
 * that is the backpressure. test() reports the size, or -EMSGSIZE (message
 * larger than the irecv), ZB_ERR_BAD_FRAME (tag mismatch), or the
 * transport's send error (ZB_ERR_PEER_DOWN, ZB_ERR_EPOCH, ...).
 *
 * Memory: requests and comms come from fixed tables in the ctx, allocated
 * by init(); isend/irecv/test allocate nothing.
 *
 * Lifetime (fini). A send's payload reference (nd_req.ref) lives in the
 * ctx and is held by the transport until the message completes and by the
 * link for every attached frame until the NIC frees it. fini() therefore
 * (1) resets the session (tp_peer_reset) with every peer that still has a
 * send of ours in the transport: the transport fails those messages at once
 * and drops its references synchronously (the peer resets its side too,
 * which a failed communicator's half-sent stream needs anyway); and (2)
 * frees the ctx only when the last payload reference is gone: `pins` counts
 * the ctx itself plus every payload reference not yet dropped, and whoever
 * drops it to zero frees the ctx (frames still queued in a NIC may drop
 * theirs later, e.g. when dp_node_fini closes the ports).
 */
#include "internal.h"
#include "zbmd/gpu.h"
#include "zbmd/net.h"

#include <string.h>

#include <rte_cycles.h>
#include <rte_malloc.h>

#define DP_NET_CHANNELS DP_NET_STREAMS /* streams 0..7 of the lane (link.c
				 * gives 16; 8..15 are the remote actors',
				 * docs/remote.md) */
#define DP_NET_REQS 1024

enum { REQ_FREE = 0, REQ_SEND, REQ_RECV };

struct nd_ctx;

struct nd_req {
	struct tp_ref ref;       /* payload pinned while > 0 (sends) */
	uint8_t kind;
	uint8_t done;            /* recv matched / send acked */
	uint8_t payload_posted;  /* send: payload accepted by the transport */
	uint8_t ref_dropped;     /* send: transport + NIC released the payload */
	uint8_t acks;            /* send: send_done calls seen (2 = both) */
	uint8_t placed;          /* recv: the transport writes into buf */
	uint8_t reduce;          /* recv: irecv_reduce (combine with src) */
	uint8_t cold;            /* recv: NET_RECV_COLD (streaming stores) */
	uint8_t dtype, rop;      /* recv, reduce: enum zb_dtype, zb_redop */
	const void *src;         /* recv, reduce: the other operand */
	uint32_t msg_id;         /* recv, placed: the payload's message */
	int status;
	size_t size;
	void *buf;               /* recv: destination; send: source */
	uint32_t tag;
	struct nd_req *next;     /* recv: posted queue; free list */
	struct nd_comm *comm;
};

struct nd_comm {
	struct nd_ctx *ctx;
	uint16_t peer, channel;
	bool used, is_send;
	/* send: a request whose header went out but whose payload waits */
	struct nd_req *stalled;
	/* recv: posted irecvs, oldest first; the header seen, if any */
	struct nd_req *head, *tail;
	bool have_hdr;
	uint32_t hdr_tag, hdr_size, hdr_msg_id;
};

struct nd_ctx {
	uint32_t pins;           /* 1 (the ctx) + payload refs not dropped */
	unsigned lane;
	struct tp *tp;
	uint16_t self;
	struct nd_comm send[CFG_MAX_NODES][DP_NET_CHANNELS];
	struct nd_comm recv[CFG_MAX_NODES][DP_NET_CHANNELS];
	struct nd_req reqs[DP_NET_REQS];
	struct nd_req *free_reqs;
	/* TSC cycles spent writing payloads into posted receives: plain
	 * copies and fused reductions (read on this lane: dp__net_cycles) */
	uint64_t copy_cyc, reduce_cyc;
};

static struct nd_ctx *lanes[CFG_MAX_LCORES];   /* ctx per lane, or NULL */
static uint64_t tsc_now_ns(void)
{
	return dp_now_ns(rte_rdtsc());
}

static struct nd_req *req_get(struct nd_ctx *c, uint8_t kind)
{
	struct nd_req *r = c->free_reqs;
	if (!r)
		return NULL;
	c->free_reqs = r->next;
	memset(r, 0, sizeof(*r));
	r->kind = kind;
	return r;
}

static void req_put(struct nd_ctx *c, struct nd_req *r)
{
	r->kind = REQ_FREE;
	r->next = c->free_reqs;
	c->free_reqs = r;
}

/* ---- transport callbacks (link.c calls these on the lane's lcore) -------- */

/* Bytes [off, off+len) of a receive's message arrive in data: copy them
 * into the receive's buffer, or combine them (irecv_reduce, net.h):
 * in place buf = buf OP R, else buf = R OP src — one pass over the bytes
 * while the fragment is in the cache, instead of a copy now and a
 * reduction over the whole chunk later. */
static void recv_write(struct nd_req *r, size_t off, const uint8_t *data,
		       size_t len)
{
	uint8_t *to = (uint8_t *)r->buf + off;
	uint64_t t0 = rte_rdtsc();
	int rc;

	if (!r->reduce) {
		if (r->cold)
			zb_copy_stream(to, data, len);
		else
			memcpy(to, data, len);
		r->comm->ctx->copy_cyc += rte_rdtsc() - t0;
		return;
	}
	size_t es = zb_dtype_size((enum zb_dtype)r->dtype);
	ZB_DASSERT(es && off % es == 0 && len % es == 0);
	if (r->src == r->buf) {
		rc = gpu_host_reduce(to, data, len / es, (enum zb_dtype)r->dtype,
				     (enum zb_redop)r->rop);
	} else {
		rc = gpu_host_reduce_into(to, data, (const uint8_t *)r->src + off,
					  len / es, (enum zb_dtype)r->dtype,
					  (enum zb_redop)r->rop);
	}
	r->comm->ctx->reduce_cyc += rte_rdtsc() - t0;
	if (rc && !r->status)
		r->status = rc;
}

void dp__net_cycles(unsigned lane, uint64_t *copy_cyc, uint64_t *reduce_cyc)
{
	const struct nd_ctx *c = lane < CFG_MAX_LCORES ? lanes[lane] : NULL;
	*copy_cyc = c ? c->copy_cyc : 0;
	*reduce_cyc = c ? c->reduce_cyc : 0;
}

static void complete_recv(struct nd_comm *cm, struct tp_msg *m)
{
	struct nd_req *r = cm->head;
	cm->head = r->next;
	if (!cm->head)
		cm->tail = NULL;
	if (cm->hdr_tag != r->tag)     /* another collective: a desync */
		r->status = ZB_ERR_BAD_FRAME;
	else if (m->len > r->size)
		r->status = -EMSGSIZE;
	else if (r->reduce && m->len % zb_dtype_size((enum zb_dtype)r->dtype))
		r->status = ZB_ERR_BAD_FRAME;   /* not whole elements: nothing
						 * combined (recv_write's rule) */
	else if (m->len && !r->placed)
		recv_write(r, 0, m->data, m->len);
	ZB_DASSERT(!r->placed || (r->msg_id == m->msg_id && m->data == r->buf));
	r->size = m->len;
	if (r->cold)   /* the streaming stores before anyone sees it done */
		zb_copy_stream_fence();
	r->done = 1;
}

/* 1: taken (the caller releases m), -EAGAIN: hold it, 0: not ours */
int dp__net_deliver(unsigned lane, struct tp_msg *m)
{
	struct nd_ctx *c = lane < CFG_MAX_LCORES ? lanes[lane] : NULL;
	if (!c)
		return 0;
	if (m->peer >= CFG_MAX_NODES || m->stream >= DP_NET_CHANNELS)
		return 0;
	struct nd_comm *cm = &c->recv[m->peer][m->stream];
	if (!cm->used)
		return -EAGAIN;            /* not accepted yet: hold it */
	if (!cm->have_hdr) {
		uint32_t h[2];
		if (m->len != sizeof(h))
			return 1;          /* not a header: a broken peer; drop */
		memcpy(h, m->data, sizeof(h));
		cm->hdr_tag = h[0];
		cm->hdr_size = h[1];
		cm->hdr_msg_id = m->msg_id;
		cm->have_hdr = true;
		return 1;
	}
	if (!cm->head)
		return -EAGAIN;            /* no irecv posted: backpressure */
	complete_recv(cm, m);
	cm->have_hdr = false;
	return 1;
}

/* The payload msg_id of (peer, stream) begins to arrive: the head irecv's
 * buffer when it is the payload's (the header came, sizes and tags agree). */
void *dp__net_rx_place(unsigned lane, uint16_t peer, uint16_t stream,
		       uint32_t msg_id, size_t len)
{
	struct nd_ctx *c = lane < CFG_MAX_LCORES ? lanes[lane] : NULL;
	if (!c || peer >= CFG_MAX_NODES || stream >= DP_NET_CHANNELS)
		return NULL;
	struct nd_comm *cm = &c->recv[peer][stream];
	struct nd_req *r = cm->head;
	if (!cm->used || !cm->have_hdr || msg_id != cm->hdr_msg_id + 1 || !r ||
	    r->placed || len != cm->hdr_size || len > r->size ||
	    r->tag != cm->hdr_tag ||
	    (r->reduce && len % zb_dtype_size((enum zb_dtype)r->dtype)))
		return NULL;   /* the arena takes it; complete_recv judges it */
	r->placed = 1;
	r->msg_id = msg_id;
	return r->buf;
}

/* A fragment of a placed payload: straight into (or combined with) the
 * head irecv's buffer, the one dp__net_rx_place gave. */
void dp__net_rx_write(unsigned lane, uint16_t peer, uint16_t stream,
		      uint32_t msg_id, uint8_t *buf, size_t off,
		      const uint8_t *data, size_t len)
{
	struct nd_ctx *c = lanes[lane];
	struct nd_req *r = c->recv[peer][stream].head;
	ZB_ASSERT(r && r->placed && r->msg_id == msg_id && r->buf == buf &&
		  off + len <= r->size);
	recv_write(r, off, data, len);
}

/* A placed payload will not come (session reset): buf is ours again. */
void dp__net_rx_unplace(unsigned lane, uint16_t peer, uint16_t stream,
			uint32_t msg_id)
{
	struct nd_ctx *c = lane < CFG_MAX_LCORES ? lanes[lane] : NULL;
	if (!c || peer >= CFG_MAX_NODES || stream >= DP_NET_CHANNELS)
		return;
	for (struct nd_req *r = c->recv[peer][stream].head; r; r = r->next)
		if (r->placed && r->msg_id == msg_id)
			r->placed = 0;
}

/* Take the buffer of a placed receive back from the transport. */
static void req_unplace(struct nd_ctx *c, struct nd_req *r)
{
	if (!r->placed)
		return;
	tp_rx_detach(c->tp, r->comm->peer, r->comm->channel, r->msg_id,
		     tsc_now_ns());
	r->placed = 0;
}

/* 1: the cookie was ours */
int dp__net_send_done(unsigned lane, uint64_t cookie, int status)
{
	struct nd_ctx *c = lane < CFG_MAX_LCORES ? lanes[lane] : NULL;
	if (!c)
		return 0;
	struct nd_req *r = (struct nd_req *)(uintptr_t)cookie;
	if (r < c->reqs || r >= c->reqs + DP_NET_REQS || r->kind != REQ_SEND)
		return 0;
	ZB_DASSERT(r->acks < 2);   /* header + payload: two per request */
	if (status && !r->status)
		r->status = status;
	r->acks++;
	return 1;
}

static void ctx_unpin(struct nd_ctx *c)
{
	if (__atomic_sub_fetch(&c->pins, 1, __ATOMIC_ACQ_REL) == 0)
		rte_free(c);   /* fini ran and this was the last reference */
}

/* The payload's last reference is gone (transport and NIC done). May run
 * after fini(), from ext_free when a port frees a queued frame. */
static void ref_free(struct tp_ref *ref)
{
	struct nd_req *r = (struct nd_req *)ref;
	struct nd_ctx *c = r->comm->ctx;
	r->ref_dropped = 1;
	ctx_unpin(c);
}

/* ---- sends ------------------------------------------------------------------ */

static int post_payload(struct nd_ctx *c, struct nd_req *r)
{
	struct nd_comm *cm = r->comm;
	tp_ref_init(&r->ref, ref_free);
	__atomic_add_fetch(&c->pins, 1, __ATOMIC_RELAXED);  /* ref_free unpins */
	int rc = tp_send(c->tp, cm->peer, cm->channel, r->buf, r->size, &r->ref,
			 (uint64_t)(uintptr_t)r, tsc_now_ns());
	if (rc)
		__atomic_sub_fetch(&c->pins, 1, __ATOMIC_RELAXED); /* no ref out */
	if (rc == -EAGAIN)
		return rc;
	if (rc) {
		/* the payload's send_done will never come: count it; the
		 * header's (same cookie) still will, so r stays ours until
		 * then (nd_test waits for acks == 2) */
		r->status = rc;
		r->acks++;
		r->ref_dropped = 1;
	} else {
		tp_ref_put(&r->ref);   /* ours; the transport/NIC hold theirs */
	}
	r->payload_posted = 1;
	cm->stalled = NULL;
	return 0;
}

static int nd_isend(void *comm, const void *data, size_t size, uint32_t tag,
		    void *mh, void **request)
{
	(void)mh;
	struct nd_comm *cm = comm;
	struct nd_ctx *c = cm->ctx;
	ZB_DASSERT(cm->is_send && dp_lcore_index() == (int)c->lane);
	if (cm->stalled && post_payload(c, cm->stalled) == -EAGAIN)
		return -EAGAIN;    /* keep the order: the earlier payload first */
	if (size > UINT32_MAX)
		return -EMSGSIZE;
	struct nd_req *r = req_get(c, REQ_SEND);
	if (!r)
		return -EAGAIN;
	r->comm = cm;
	r->buf = (void *)(uintptr_t)data;
	r->size = size;
	r->tag = tag;
	uint32_t h[2] = {tag, (uint32_t)size};
	int rc = tp_send(c->tp, cm->peer, cm->channel, h, sizeof(h), NULL,
			 (uint64_t)(uintptr_t)r, tsc_now_ns());
	if (rc) {
		req_put(c, r);
		return rc;   /* tp_send's: -EAGAIN (no free message slot), ZB_ERR_PEER_DOWN, ... */
	}
	if (post_payload(c, r) == -EAGAIN)
		cm->stalled = r;   /* header out: the payload follows first thing */
	*request = r;
	return 0;
}

/* ---- receives and completion ------------------------------------------------ */

static struct nd_req *recv_post(struct nd_comm *cm, void *data, size_t size,
				 uint32_t tag)
{
	struct nd_ctx *c = cm->ctx;
	ZB_DASSERT(!cm->is_send && dp_lcore_index() == (int)c->lane);
	struct nd_req *r = req_get(c, REQ_RECV);
	if (!r)
		return NULL;
	r->comm = cm;
	r->buf = data;
	r->size = size;
	r->tag = tag;
	if (cm->tail)
		cm->tail->next = r;
	else
		cm->head = r;
	cm->tail = r;
	return r;
}

static int nd_irecv(void *comm, void *data, size_t size, uint32_t tag,
		    void *mh, void **request)
{
	(void)mh;
	struct nd_req *r = recv_post(comm, data, size, tag);
	if (!r)
		return -EAGAIN;
	*request = r;
	return 0;
}

static void nd_recv_hint(void *request, unsigned hints)
{
	struct nd_req *r = request;
	ZB_DASSERT(r != NULL && r->kind == REQ_RECV && !r->done);
	if ((hints & NET_RECV_COLD) && !r->reduce)
		r->cold = 1;
}

static int nd_irecv_reduce(void *comm, void *data, const void *src,
			   size_t size, uint32_t tag, enum zb_dtype dtype,
			   enum zb_redop op, void *mh, void **request)
{
	(void)mh;
	if ((unsigned)dtype >= ZB_DTYPE_COUNT || (unsigned)op >= ZB_AVG ||
	    size % zb_dtype_size(dtype) || (size && (!data || !src)))
		return -EINVAL;
	struct nd_req *r = recv_post(comm, data, size, tag);
	if (!r)
		return -EAGAIN;
	r->reduce = 1;
	r->dtype = (uint8_t)dtype;
	r->rop = (uint8_t)op;
	r->src = src;
	*request = r;
	return 0;
}

static int nd_test(void *request, int *done, size_t *size)
{
	struct nd_req *r = request;
	struct nd_ctx *c = r->comm->ctx;
	ZB_ASSERT(r->kind == REQ_SEND || r->kind == REQ_RECV);
	*done = 0;
	if (r->kind == REQ_SEND) {
		if (!r->payload_posted)
			post_payload(c, r);
		if (!r->payload_posted || r->acks < 2 || !r->ref_dropped)
			return 0;
	} else if (!r->done) {
		return 0;
	}
	int st = r->status;
	if (size)
		*size = r->size;
	*done = 1;
	req_put(c, r);
	return st;
}

/* ---- comms, ctx --------------------------------------------------------------- */

static struct nd_comm *comm_open(struct nd_ctx *c, uint16_t peer,
				 uint16_t channel, bool is_send, int *rc)
{
	const struct zb_config *cfg = dp__node.cfg;
	if (peer >= CFG_MAX_NODES || channel >= DP_NET_CHANNELS ||
	    peer == c->self || !cfg->peers[peer].present) {
		*rc = -EINVAL;
		return NULL;
	}
	struct nd_comm *cm = is_send ? &c->send[peer][channel]
				     : &c->recv[peer][channel];
	if (cm->used) {
		*rc = -EBUSY;
		return NULL;
	}
	memset(cm, 0, sizeof(*cm));
	cm->ctx = c;
	cm->peer = peer;
	cm->channel = channel;
	cm->is_send = is_send;
	cm->used = true;
	*rc = 0;
	return cm;
}

static int nd_connect(void *ctx, uint16_t peer, uint16_t channel, void **comm)
{
	int rc;
	*comm = comm_open(ctx, peer, channel, true, &rc);
	return rc;
}

static int nd_accept(void *ctx, uint16_t peer, uint16_t channel, void **comm)
{
	int rc;
	*comm = comm_open(ctx, peer, channel, false, &rc);
	return rc;
}

/* A send comm closes with requests not finished (a failed collective: the
 * caller is told its buffers are its own again once close returns). A
 * header or payload still in the transport would be retransmitted from
 * the caller's buffer until acked, and a stalled payload posted later by
 * nd_progress: reset the session with the peer (tp_peer_reset fails every
 * send to it through send_done and drops the transport's references before
 * it returns; the peer sees the new epoch and resets its side, as fini
 * does) and never post the stalled payload. The reset also fails this
 * lane's other sends to that peer (other channels of the same, failing
 * communicator; the remote actors' streams 8..15). Frames a NIC already
 * holds by zero-copy attachment keep their reference until the NIC
 * completes them: the lcore no longer reads the buffer, the NIC's DMA may
 * for that long (docs/collectives.md). Not on the fast path: one scan of
 * the request table per close. */
static void send_cancel(struct nd_ctx *c, struct nd_comm *cm)
{
	bool pending = false;

	for (unsigned i = 0; i < DP_NET_REQS; i++) {
		struct nd_req *r = &c->reqs[i];
		if (r->kind != REQ_SEND || r->comm != cm)
			continue;
		if (!r->payload_posted) {  /* stalled: its payload never goes */
			r->payload_posted = 1;
			r->ref_dropped = 1;
			r->acks++;         /* the payload's send_done never comes */
			if (!r->status)
				r->status = ZB_ERR_EPOCH;
		}
		if (r->acks < 2)
			pending = true;
	}
	cm->stalled = NULL;
	if (pending)   /* send_done for each, now: acks reach 2 */
		(void)tp_peer_reset(c->tp, cm->peer, tsc_now_ns());
}

static void nd_close(void *comm)
{
	struct nd_comm *cm = comm;
	if (!cm)
		return;
	/* the buffers of its requests stop being read (sends) or written
	 * (receives) now: the caller may free them on return */
	if (cm->is_send)
		send_cancel(cm->ctx, cm);
	for (struct nd_req *r = cm->is_send ? NULL : cm->head; r; r = r->next)
		req_unplace(cm->ctx, r);
	cm->used = false;
}

static int nd_reg_mr(void *comm, void *data, size_t size,
		     enum net_mem_type type, void **mh)
{
	(void)data;
	(void)size;
	if (type != NET_MEM_HOST)
		return ZB_ERR_UNSUPPORTED;
	*mh = comm;   /* host memory needs no registration here */
	return 0;
}

static int nd_dereg_mr(void *comm, void *mh)
{
	(void)comm;
	(void)mh;
	return 0;
}

static int nd_progress(void *ctx)
{
	struct nd_ctx *c = ctx;
	int n = 0;
	for (unsigned p = 0; p < CFG_MAX_NODES; p++)
		for (unsigned ch = 0; ch < DP_NET_CHANNELS; ch++)
			if (c->send[p][ch].stalled &&
			    post_payload(c, c->send[p][ch].stalled) == 0)
				n++;
	return n;
}

/* The last init failure's words on this thread (net_ops.last_error), for
 * the caller's message: "init: Invalid argument" alone named no limit. */
static _Thread_local char nd_err[160];

static const char *nd_last_error(void) { return nd_err; }

_Static_assert(DP_NET_CHANNELS == NET_DPDK_MAX_CHANNELS,
	       "zbmd/net.h's NET_DPDK_MAX_CHANNELS is the provider's channels");

static int nd_init(const struct net_init_args *args, void **out)
{
	ZB_ASSERT(args != NULL && out != NULL);
	int idx = dp_lcore_index();
	unsigned lane = idx < 0 ? 0 : (unsigned)idx;
	struct tp *tp = dp_transport(lane);
	if (!tp)
		return ZB_ERR_UNAVAILABLE;   /* no node, or no port with an IP */
	nd_err[0] = '\0';
	if (args->channels > DP_NET_CHANNELS) {
		snprintf(nd_err, sizeof(nd_err), "%u channels: the dpdk provider "
			 "takes at most %d, one per transport stream of the lane",
			 (unsigned)args->channels, DP_NET_CHANNELS);
		return -EINVAL;
	}
	if (lanes[lane])
		return -EBUSY;
	struct nd_ctx *c = rte_zmalloc("zbmd_net_dpdk", sizeof(*c),
				       RTE_CACHE_LINE_SIZE);
	if (!c)
		return -ENOMEM;
	c->pins = 1;
	c->lane = lane;
	c->tp = tp;
	c->self = dp__node.cfg->node.id;
	for (int i = DP_NET_REQS - 1; i >= 0; i--)
		req_put(c, &c->reqs[i]);
	__atomic_store_n(&lanes[lane], c, __ATOMIC_RELEASE);
	*out = c;
	return 0;
}

/* On the lane's lcore, or after the loops stopped (coll_dpdk's close). */
static void nd_fini(void *ctx)
{
	struct nd_ctx *c = ctx;
	if (!c)
		return;
	/* peers that still hold a send of ours: a header or payload not
	 * completed (acks < 2), or a payload not yet handed over (stalled) */
	bool reset[CFG_MAX_NODES] = {false};
	for (unsigned i = 0; i < DP_NET_REQS; i++)
		if (c->reqs[i].kind == REQ_RECV)
			req_unplace(c, &c->reqs[i]);
	for (unsigned i = 0; i < DP_NET_REQS; i++) {
		const struct nd_req *r = &c->reqs[i];
		if (r->kind == REQ_SEND && r->acks < 2)
			reset[r->comm->peer] = true;
	}
	uint64_t now = tsc_now_ns();
	for (unsigned p = 0; p < CFG_MAX_NODES; p++)
		if (reset[p])   /* fails them (send_done) and drops the refs now */
			tp_peer_reset(c->tp, (uint16_t)p, now);
	__atomic_store_n(&lanes[c->lane], NULL, __ATOMIC_RELEASE);
	ctx_unpin(c);   /* frees c now, or when the NIC frees its last frame */
}

const struct net_ops dp_net_dpdk_ops = {
	.version = NET_OPS_VERSION,
	.name = "dpdk",
	.init = nd_init,
	.fini = nd_fini,
	.progress = nd_progress,
	.connect = nd_connect,
	.accept = nd_accept,
	.reg_mr = nd_reg_mr,
	.dereg_mr = nd_dereg_mr,
	.isend = nd_isend,
	.irecv = nd_irecv,
	.recv_hint = nd_recv_hint,
	.irecv_reduce = nd_irecv_reduce,
	.test = nd_test,
	.close_send = nd_close,
	.close_recv = nd_close,
	.last_error = nd_last_error,
};
