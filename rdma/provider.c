/* The net_ops table of the verbs provider: init/fini/progress, connect and
 * accept, and the thin wrappers that route to xfer.c and mr.c. */
#include "internal.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

static int check_config(const struct zb_config *cfg)
{
	const typeof(cfg->rdma) *r = &cfg->rdma;

	if (rdma__mtu_enum(r->mtu) == 0) {
		rdma__set_error("[rdma] mtu = %u: must be 256, 512, 1024, 2048 or 4096", r->mtu);
		return ZB_ERR_CONFIG;
	}
	if (r->signal_every == 0) {
		rdma__set_error("[rdma] signal_every = 0: must be >= 1");
		return ZB_ERR_CONFIG;
	}
	if (r->recv_pool < RDMA_SLOTS_MIN) {
		rdma__set_error("[rdma] recv_pool = %u: must be >= %u", r->recv_pool, RDMA_SLOTS_MIN);
		return ZB_ERR_CONFIG;
	}
	if (r->inline_max > 1024) {
		rdma__set_error("[rdma] inline_max = %u: must be <= 1024", r->inline_max);
		return ZB_ERR_CONFIG;
	}
	if (cfg->node.id >= CFG_MAX_NODES) {
		rdma__set_error("[node] id = %u: must be < %d", cfg->node.id, CFG_MAX_NODES);
		return ZB_ERR_CONFIG;
	}
	return 0;
}

static void rdma_fini(void *vctx);

static int boot_deliver(void *ctx, const void *blob, size_t len)
{
	return rdma_conn_deliver(ctx, blob, len);
}

static void boot_result(void *ctx, const void *blob, size_t len, int status)
{
	(void)rdma_conn_blob_result(ctx, blob, len, status);   /* -ENOENT: re-created since */
}

static int boot_start(struct rdma_ctx *ctx, const struct zb_config *cfg)
{
	const struct cfg_peer *me = &cfg->peers[ctx->self];
	int rc;

	ZB_ASSERT(ctx->boot == NULL);
	if (cfg->transport.tcp_port == 65535) {
		rdma__set_error("rdma bootstrap: [transport] tcp_port 65535 leaves no port + 1");
		return ZB_ERR_CONFIG;
	}
	ctx->boot_port = (uint16_t)(cfg->transport.tcp_port + 1);
	rc = rdma__boot_start(&ctx->boot, me->present ? me->ip : htonl(INADDR_ANY),
			      ctx->boot_port, boot_deliver, boot_result, ctx);
	return rc;
}

/* Bootstrap: queue blob for comm c's peer. */
static int boot_push(struct rdma_ctx *ctx, const struct rdma_comm *c, const uint8_t *blob)
{
	const struct cfg_peer *p = &ctx->cfg_copy.peers[c->peer];

	if (!p->present) {
		rdma__set_error("rdma bootstrap: no [peer.%u] ip to send the connection blob to",
				c->peer);
		return ZB_ERR_CONFIG;
	}
	return rdma__boot_send(ctx->boot, p->ip, ctx->boot_port, blob, RDMA_CONN_BLOB_LEN);
}

/* External exchange: hand blob for comm c to the host's send_blob (the
 * control plane). */
static int ext_push(struct rdma_ctx *ctx, const struct rdma_comm *c, const uint8_t *blob)
{
	ZB_ASSERT(ctx->pargs.send_blob != NULL);
	int rc = ctx->pargs.send_blob(ctx->pargs.exchange_arg, c->peer, blob, RDMA_CONN_BLOB_LEN);
	if (rc == -ENOBUFS)
		rc = -EAGAIN;
	if (rc < 0 && rc != -EAGAIN)
		rdma__set_error("node %u ch %u: the control plane refused the connection "
				"blob: %s", c->peer, c->channel, zb_strerror(rc));
	return rc;
}

/* Send this side's blob for comm c: delivered here when it is for us (and
 * so taken at once), else by the bootstrap or the host's exchange. */
static int push_blob(struct rdma_ctx *ctx, struct rdma_comm *c)
{
	uint8_t blob[RDMA_CONN_BLOB_LEN];
	int rc = rdma__conn_encode(&c->local, blob, sizeof(blob));

	ZB_ASSERT(rc == RDMA_CONN_BLOB_LEN);
	if (c->peer == ctx->self) {
		rc = rdma_conn_deliver(ctx, blob, sizeof(blob));
		if (rc == 0)
			atomic_store(&c->blob_acked, true);
	} else {
		rc = ctx->boot ? boot_push(ctx, c, blob) : ext_push(ctx, c, blob);
	}
	if (rc == 0)
		c->blob_sent = true;
	return rc;
}

static int make_cqs(struct rdma_ctx *ctx, uint32_t peers)
{
	struct ibv_device_attr da;
	uint32_t want = (peers + 1) * 2 * (3 * ctx->slots + 2);

	ZB_ASSERT(ctx->channels > 0 && ctx->dev != NULL);
	if (ibv_query_device(ctx->dev, &da)) {
		rdma__set_error("%s: ibv_query_device: %s", ctx->dev_name, strerror(errno));
		return ZB_ERR_DEVICE;
	}
	if (want > (uint32_t)da.max_cqe)
		want = (uint32_t)da.max_cqe;
	ctx->cqs = calloc(ctx->channels, sizeof(*ctx->cqs));
	if (!ctx->cqs)
		return -ENOMEM;
	ctx->comp_ch = ibv_create_comp_channel(ctx->dev);
	if (!ctx->comp_ch) {
		rdma__set_error("%s: ibv_create_comp_channel: %s", ctx->dev_name, strerror(errno));
		return ZB_ERR_DEVICE;
	}
	int fl = fcntl(ctx->comp_ch->fd, F_GETFL);
	if (fl < 0 || fcntl(ctx->comp_ch->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		rdma__set_error("%s: completion channel non-blocking: %s", ctx->dev_name, strerror(errno));
		return ZB_ERR_DEVICE;
	}
	for (uint16_t ch = 0; ch < ctx->channels; ch++) {
		struct rdma_cq *q = &ctx->cqs[ch];
		q->ctx = ctx;
		q->channel = ch;
		q->cq = ibv_create_cq(ctx->dev, (int)want, q, ctx->comp_ch, 0);
		if (!q->cq) {
			rdma__set_error("%s: ibv_create_cq(%u): %s", ctx->dev_name, want, strerror(errno));
			return ZB_ERR_DEVICE;
		}
		q->cqe = (uint32_t)q->cq->cqe < want ? (uint32_t)q->cq->cqe : want;
	}
	return 0;
}

static int rdma_init(const struct net_init_args *args, void **out)
{
	const struct zb_config *cfg;
	struct rdma_ctx *ctx;
	uint32_t peers = 0;
	int rc;

	if (!args || !args->cfg || !out)
		return -EINVAL;
	rdma__set_error("%s", "");   /* callers append it: none from before */
	cfg = args->cfg;
	rc = check_config(cfg);
	if (rc)
		return rc;
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return -ENOMEM;
	pthread_mutex_init(&ctx->lock, NULL);
	ctx->cfg_copy = *cfg;
	ctx->self = cfg->node.id;
	ctx->cluster = cfg->cluster.id;
	ctx->channels = args->channels ? args->channels : (cfg->coll.channels ? cfg->coll.channels : 1);
	if (ctx->channels > RDMA_CHANNELS_MAX) {
		rdma__set_error("%u channels: the rdma provider supports %u", ctx->channels,
				RDMA_CHANNELS_MAX);
		rc = -EINVAL;
		goto fail;
	}
	if (args->provider_arg)
		ctx->pargs = *(const struct rdma_provider_args *)args->provider_arg;
	rdma__gpu_iface_init(&ctx->gpu, ctx->pargs.gpu);
	ctx->slots = rdma__slots_from_pool(cfg->rdma.recv_pool);
	ctx->signal_every = cfg->rdma.signal_every;
	ctx->inline_max = cfg->rdma.inline_max;
	atomic_store(&ctx->psn_seed, (uint32_t)zb_now_ns() ^ ((uint32_t)ctx->self << 20));
	for (int i = 0; i < CFG_MAX_NODES; i++)
		peers += cfg->peers[i].present;
	rc = rdma__dev_open(ctx, cfg);
	if (rc)
		goto fail;
	rc = make_cqs(ctx, peers ? peers : 1);
	if (rc)
		goto fail;
	if (!args->provider_arg || !ctx->pargs.external_exchange) {
		rc = boot_start(ctx, cfg);
		if (rc)
			goto fail;
	}
	ctx->ncomms = (uint32_t)CFG_MAX_NODES * ctx->channels * 2;
	ctx->comms = calloc(ctx->ncomms, sizeof(*ctx->comms));
	ctx->stash = calloc(ctx->ncomms, sizeof(*ctx->stash));
	if (!ctx->comms || !ctx->stash) {
		rc = -ENOMEM;
		goto fail;
	}
	ctx->announced = ctx->pargs.on_ctx != NULL;
	if (ctx->announced)
		ctx->pargs.on_ctx(ctx->pargs.exchange_arg, ctx);
	*out = ctx;
	return 0;
fail:
	rdma_fini(ctx);
	return rc;
}

static void rdma_fini(void *vctx)
{
	struct rdma_ctx *ctx = vctx;

	if (!ctx)
		return;
	if (ctx->announced)   /* the host stops delivering to us */
		ctx->pargs.on_ctx(ctx->pargs.exchange_arg, NULL);
	rdma__boot_stop(ctx->boot);   /* no more deliveries */
	ctx->boot = NULL;
	if (ctx->dev && ctx->comms) {
		pthread_mutex_lock(&ctx->lock);
		(void)rdma__async_drain(ctx);   /* before destroying QPs and CQs */
		pthread_mutex_unlock(&ctx->lock);
	}
	for (uint32_t i = 0; ctx->comms && i < ctx->ncomms; i++) {
		struct rdma_comm *c = atomic_load(&ctx->comms[i]);
		atomic_store(&ctx->comms[i], NULL);
		rdma__comm_destroy(c);
	}
	for (uint16_t ch = 0; ctx->cqs && ch < ctx->channels; ch++)
		if (ctx->cqs[ch].cq)
			ibv_destroy_cq(ctx->cqs[ch].cq);
	if (ctx->comp_ch)
		ibv_destroy_comp_channel(ctx->comp_ch);
	free(ctx->cqs);
	free(ctx->comms);
	free(ctx->stash);
	rdma__dev_close(ctx);
	pthread_mutex_destroy(&ctx->lock);
	free(ctx);
}

static int rdma_progress(void *vctx)
{
	struct rdma_ctx *ctx = vctx;
	int n = 0, rc;

	ZB_DASSERT(ctx != NULL);
	for (uint16_t ch = 0; ch < ctx->channels; ch++) {
		rc = rdma__poll_channel(&ctx->cqs[ch]);
		if (rc < 0)
			return rc;
		n += rc;
	}
	rc = rdma_poll_async(ctx);
	return rc < 0 ? rc : n + rc;
}

int rdma_wait(void *vctx, int timeout_ms)
{
	struct rdma_ctx *ctx = vctx;
	struct pollfd pf[2];
	struct ibv_cq *cq;
	void *cq_ctx;
	int n = 0, rc;

	if (!ctx || !ctx->comp_ch)
		return -EINVAL;
	ZB_ASSERT(ctx->cqs != NULL);
	for (uint16_t ch = 0; ch < ctx->channels; ch++) {
		struct rdma_cq *q = &ctx->cqs[ch];
		if (!q->armed) {
			if (ibv_req_notify_cq(q->cq, 0)) {
				rdma__set_error("channel %u: ibv_req_notify_cq failed", ch);
				return ZB_ERR_DEVICE;
			}
			q->armed = true;
		}
		/* Completions queued before the arm raise no event: take them now. */
		rc = rdma__poll_channel(q);
		if (rc < 0)
			return rc;
		n += rc;
	}
	if (n)
		return n;
	pf[0] = (struct pollfd){.fd = ctx->comp_ch->fd, .events = POLLIN};
	pf[1] = (struct pollfd){.fd = ctx->dev->async_fd, .events = POLLIN};
	if (poll(pf, 2, timeout_ms < 0 ? 0 : timeout_ms) < 0 && errno != EINTR)
		return -errno;
	if (pf[0].revents & POLLIN) {
		while (ibv_get_cq_event(ctx->comp_ch, &cq, &cq_ctx) == 0) {
			ibv_ack_cq_events(cq, 1);
			((struct rdma_cq *)cq_ctx)->armed = false;
			n++;
		}
	}
	if (pf[1].revents & POLLIN) {
		rc = rdma_poll_async(ctx);
		n += rc > 0 ? rc : 0;
	}
	return n;
}

/* Take comm c out of the context and destroy it (owner thread, control
 * path): a closed comm, or a failed one never handed out. */
static void comm_drop(struct rdma_ctx *ctx, struct rdma_comm *c)
{
	pthread_mutex_lock(&ctx->lock);
	if (ctx->dev)   /* report its events before it goes */
		(void)rdma__async_drain(ctx);
	atomic_store(&ctx->comms[c->index], NULL);
	rdma__comm_destroy(c);
	pthread_mutex_unlock(&ctx->lock);
}

static int open_comm(void *vctx, uint16_t peer, uint16_t ch, enum rdma_side side, void **out)
{
	struct rdma_ctx *ctx = vctx;
	struct rdma_comm *c;
	int rc, st;

	if (!ctx || !out)
		return -EINVAL;
	rc = rdma__comm_get(ctx, peer, ch, side, &c);
	if (rc)
		return rc;
	st = atomic_load(&c->state);
	if (st == RDMA_COMM_FAILED && !c->user_open) {
		/* failed before it was handed out (e.g. the peer re-created
		 * its end first): nobody holds it to close it, so it would
		 * answer every later call with this error. Report it once and
		 * drop it: the next call creates a new comm (new QP, new blob;
		 * a blob the peer sent meanwhile waits in the stash). */
		rc = c->err;
		comm_drop(ctx, c);
		return rc;
	}
	if (st == RDMA_COMM_FAILED)
		return c->err;
	if (c->user_open)
		return -EBUSY;
	int bf = atomic_exchange(&c->blob_fail, 0);
	if (bf == -EBADMSG) {
		/* the peer's provider could not apply our blob (its log says
		 * why): fail this call and drop the comm, as above; the next
		 * call creates a new one with a new blob */
		rdma__set_error("node %u ch %u: the peer refused our connection blob "
				"(its log says why)", peer, ch);
		comm_drop(ctx, c);
		return -ECONNREFUSED;
	}
	if (bf)   /* given up on by the exchange, or "unknown" to the peer */
		c->blob_sent = false;
	if (!c->blob_sent && (ctx->boot || ctx->pargs.send_blob)) {
		rc = push_blob(ctx, c);
		if (rc)
			return rc;
		st = atomic_load(&c->state);
	}
	if (st == RDMA_COMM_LOCAL)
		return -EAGAIN;      /* waiting for the peer's blob */
	if (st == RDMA_COMM_REMOTE) {
		rc = rdma__comm_establish(c);
		if (rc) {
			/* never handed out: drop it (as above), or every later
			 * connect/accept of this (peer, channel, side) would
			 * return this error for good */
			rdma__comm_fail(c, RDMA_EV_QP_FATAL, rc, -1, 0, "%s", rdma_last_error());
			comm_drop(ctx, c);
			return rc;
		}
	}
	/* handed out only once the peer took our blob, where we hear of
	 * that (its QP is in RTR then: our first packets are not dropped) */
	if ((ctx->boot || ctx->pargs.blob_acks) && !atomic_load(&c->blob_acked))
		return -EAGAIN;
	c->user_open = true;
	*out = c;
	return 0;
}

static int rdma_connect(void *ctx, uint16_t peer, uint16_t ch, void **send_comm)
{
	return open_comm(ctx, peer, ch, RDMA_SIDE_SEND, send_comm);
}

static int rdma_accept(void *ctx, uint16_t peer, uint16_t ch, void **recv_comm)
{
	return open_comm(ctx, peer, ch, RDMA_SIDE_RECV, recv_comm);
}

static void close_comm(void *vc)
{
	struct rdma_comm *c = vc;
	struct rdma_ctx *ctx;

	if (!c)
		return;
	ctx = c->ctx;
	ZB_ASSERT(atomic_load(&ctx->comms[c->index]) == c);
	rdma__comm_close_notify(c);
	comm_drop(ctx, c);
}

void *rdma_cq_source(void *vctx, uint16_t channel)
{
	struct rdma_ctx *ctx = vctx;

	if (!ctx || channel >= ctx->channels)
		return NULL;
	return &ctx->cqs[channel];
}

const struct net_ops rdma_net_ops = {
	.version = NET_OPS_VERSION,
	.name = "rdma",
	.init = rdma_init,
	.fini = rdma_fini,
	.progress = rdma_progress,
	.connect = rdma_connect,
	.accept = rdma_accept,
	.reg_mr = rdma__reg_mr,
	.dereg_mr = rdma__dereg_mr,
	.isend = rdma__isend,
	.irecv = rdma__irecv,
	.test = rdma__test,
	.close_send = close_comm,
	.close_recv = close_comm,
#ifdef NET_MAX_PROVIDERS
	.wait = rdma_wait,
	.last_error = rdma_last_error,
#endif
};

#ifdef NET_MAX_PROVIDERS
/* The coll registry (net_register) is in this tree: add "rdma" to it before
 * main, so net_find("rdma") works wherever this object is linked (the zbmd
 * binary links it through rdma-info). Registration fails only when another
 * provider took the name; nothing to do about it here. */
__attribute__((constructor)) static void rdma_register_provider(void)
{
	(void)net_register(&rdma_net_ops);
}
#endif
