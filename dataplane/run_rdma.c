/* dataplane/run_rdma.c — the "rdma" collective host (zbmd/coll.h, "hosts"):
 * a communicator over the rdma net provider driven by the dataplane's lcore
 * loop, with the connection blobs carried by the control plane.
 *
 * open() needs a control plane ([control] enabled, dp__run_ctl_wanted);
 * without one it returns -EOPNOTSUPP and the caller runs the provider on its
 * own thread, the provider's TCP bootstrap exchanging the blobs
 * (`zbmd bench allreduce --provider rdma` without control). With one:
 *   1. dp_node_init (EAL, lcores; ports as configured: rdma does not use
 *      them), then the control node as `zbmd run` starts it
 *      (dp__run_control_host), no graceful leave at the end;
 *   2. the handler of CTL_BLOB_RDMA_CONN blobs: rdma_conn_deliver on the
 *      provider context (-EAGAIN, so the peer retries, until there is one);
 *   3. dp_node_launch: the lcores and the control thread run;
 *   4. the communicator (threaded channels) is created on the calling
 *      thread with rdma_provider_args{external_exchange, send_blob =
 *      ctl_blob_send, on_ctx}: connect/accept queue this side's blobs to
 *      the control thread and wait (up to the connect timeout) for the
 *      peers'; the provider's init failing (no device) fails open() with
 *      its reason;
 *   5. channel c belongs to lane c mod L (L dataplane lcores): that
 *      lane's lcore polls the channel's CQ (dp_register_poller with
 *      rdma_dp_poll on rdma_cq_source: the completion sources) and
 *      progresses it (coll_progress_channel), so the channels' copies,
 *      posts and completions run on all lcores in parallel.
 * One provider context: its CQs and QPs are per channel, and a channel is
 * only ever touched by its own lcore (the provider's threading rule).
 * Work completions that say the peer is gone (retries exhausted) go to the
 * control thread as CTL_REQ_PEER_DOWN (from the lcore: a ring, no lock); a
 * slow-path thread reads the device's async events (rdma_poll_async).
 *
 * Linked into the zbmd binary only: run_ctl.c references rdma_host_anchor
 * (so test programs that link the dataplane library need neither rdma/ nor
 * control/).
 */
#include "internal.h"
#include "run_ctl.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "zbmd/coll.h"
#include "zbmd/control.h"
#include "zbmd/rdma.h"
#include "zbmd/remote.h"

const int rdma_host_anchor = 1;

enum { RH_IDLE = 0, RH_READY };

struct rh_host {
	const struct zb_config *cfg;
	struct ctl_node *ctl;
	struct coll_comm *comm;
	_Atomic(void *) rctx;           /* the provider context, NULL when none */
	_Atomic int state;
	uint16_t channels;
	unsigned nlanes;                /* dataplane lcores; channel c on lane c % nlanes */
	struct rh_lane {
		struct rh_host *H;
		unsigned index;
	} lanes[CFG_MAX_LCORES];
	bool launched, handler, async_thread;
	pthread_t async_tid;
	_Atomic bool async_stop;
	uint32_t timeout_ms, connect_timeout_ms;
	struct rdma_provider_args pargs;
	_Atomic uint64_t events, peer_down, blobs_queued, blobs_refused;
	struct dp_ring_watch *watch;    /* the ring watched (owner: run, close) */
};

/* coll_comm_args.kick: a collective started; every lane with a channel
 * runs its part */
static void rh_kick(void *arg)
{
	const struct rh_host *H = arg;
	for (unsigned i = 0; i < H->nlanes; i++)
		dp_lcore_kick(i);
}

/* ---- the control plane side ------------------------------------------- */

/* Control thread (under the blob handler lock): a peer's connection blob. */
static int rh_on_blob(void *arg, uint16_t from, uint8_t kind, const void *blob,
		      size_t len)
{
	struct rh_host *H = arg;
	void *ctx = atomic_load_explicit(&H->rctx, memory_order_acquire);

	ZB_ASSERT(H != NULL && kind == CTL_BLOB_RDMA_CONN);
	if (!ctx)
		return -EAGAIN;         /* not up yet: the peer retries */
	/* the control plane authenticated `from`: the blob must be its own */
	return rdma_conn_deliver_from(ctx, from, blob, len);
}

/* Control thread (under the blob handler lock): what became of our blob.
 * Taken: the peer's QP takes packets, the comm may be handed out; refused
 * or given up: the comm's next connect/accept fails or sends it again. */
static void rh_on_result(void *arg, uint16_t peer, uint8_t kind, int status,
			 const void *blob, size_t len)
{
	struct rh_host *H = arg;
	void *ctx = atomic_load_explicit(&H->rctx, memory_order_acquire);

	(void)peer;
	ZB_ASSERT(H != NULL && kind == CTL_BLOB_RDMA_CONN);
	if (ctx)
		/* -ENOENT: re-created since */
		(void)rdma_conn_blob_result(ctx, blob, len, status);
}

/* connect()/accept(), on the thread creating the communicator: queue it. */
static int rh_send_blob(void *arg, uint16_t peer, const void *blob, size_t len)
{
	struct rh_host *H = arg;
	int rc = ctl_blob_send(H->ctl, peer, CTL_BLOB_RDMA_CONN, blob, len);

	ZB_ASSERT(H->ctl != NULL);
	atomic_fetch_add_explicit(rc == 0 ? &H->blobs_queued : &H->blobs_refused, 1,
				  memory_order_relaxed);
	return rc;
}

/* The provider context's life (provider init / fini). */
static void rh_on_ctx(void *arg, void *ctx)
{
	struct rh_host *H = arg;

	atomic_store_explicit(&H->rctx, ctx, memory_order_release);
	/* Going away: re-installing the handler waits for one that is
	 * running (it holds the handler lock), so none uses the old ctx. */
	if (!ctx && H->handler)
		(void)ctl_blob_handle(H->ctl, CTL_BLOB_RDMA_CONN, rh_on_blob, H);
}

/* Any thread that saw the failure (an lcore polling a CQ): must not block. */
static void rh_on_event(void *arg, const struct rdma_event *ev)
{
	struct rh_host *H = arg;
	struct ctl_ring *cmds = H->ctl ? ctl_node_commands(H->ctl) : NULL;

	atomic_fetch_add_explicit(&H->events, 1, memory_order_relaxed);
	if (ev->kind == RDMA_EV_WC_ERROR && ev->err == ZB_ERR_PEER_DOWN && ev->peer >= 0 &&
	    ev->peer < CFG_MAX_NODES && cmds) {
		struct ctl_command c = {.type = CTL_REQ_PEER_DOWN, .node = (uint16_t)ev->peer};
		if (ctl_ring_enqueue(cmds, &c) == 0)
			atomic_fetch_add_explicit(&H->peer_down, 1, memory_order_relaxed);
	}
}

/* A slow-path thread reads the device's async events (port down, QP fatal)
 * every ASYNC_MS: rdma_poll_async fails the affected comms (their lcore sees
 * it at its next call) and reports them through rh_on_event. */
#define ASYNC_MS 50
static void *rh_async_main(void *arg)
{
	struct rh_host *H = arg;
	void *ctx = atomic_load_explicit(&H->rctx, memory_order_acquire);

	ZB_ASSERT(ctx != NULL);
	while (!atomic_load_explicit(&H->async_stop, memory_order_acquire)) {
		(void)rdma_poll_async(ctx);
		usleep(ASYNC_MS * 1000);
	}
	return NULL;
}

/* ---- the lcore side ------------------------------------------------------ */

static unsigned rh_poll(void *arg, uint64_t now_tsc)
{
	const struct rh_lane *ln = arg;
	struct rh_host *H = ln->H;
	unsigned ev = 0;
	(void)now_tsc;

	if (atomic_load_explicit(&H->state, memory_order_acquire) != RH_READY)
		return 0;
	for (uint16_t ch = (uint16_t)ln->index; ch < H->channels;
	     ch = (uint16_t)(ch + H->nlanes)) {
		int rc = coll_progress_channel(H->comm, ch);
		if (rc > 0)
			ev += (unsigned)rc;
	}
	return ev;
}

/* ---- host ops ------------------------------------------------------------ */

static void rh_close(void *h)
{
	struct rh_host *H = h;

	if (!H)
		return;
	dp__ring_watch_stop(H->watch);
	H->watch = NULL;
	if (H->launched) {
		dp_node_request_stop();
		dp_node_stop();         /* no lcore polls the CQs any more */
	}
	if (H->async_thread) {
		atomic_store_explicit(&H->async_stop, true, memory_order_release);
		pthread_join(H->async_tid, NULL);
	}
	/* The provider's fini tells rh_on_ctx (NULL): no delivery after it. */
	coll_comm_destroy(H->comm);
	if (H->handler) {
		(void)ctl_blob_handle(H->ctl, CTL_BLOB_RDMA_CONN, NULL, NULL);
		(void)ctl_blob_on_result(H->ctl, CTL_BLOB_RDMA_CONN, NULL, NULL);
	}
	dp_node_stop();                 /* a control thread a failed launch started */
	dp__run_ctl_fini();
	dp_node_fini();
	free(H);
}

static int rh_open(const struct coll_comm_args *a, void **out, char *err,
		   size_t errlen)
{
	struct rh_host *H;
	struct dp_err derr;
	char why[256], what[1024];
	bool started = false;
	int rc;

	ZB_ASSERT(a != NULL && a->cfg != NULL);
	ZB_ASSERT(out != NULL && err != NULL);
	if (!dp__run_ctl_wanted(a->cfg, why, sizeof(why))) {
		snprintf(err, errlen, "no control plane (%s): the rdma provider runs on "
			 "the calling thread with its TCP bootstrap", why);
		return -EOPNOTSUPP;
	}
	H = calloc(1, sizeof(*H));
	if (!H)
		return -ENOMEM;
	H->cfg = a->cfg;
	rc = dp_node_init(a->cfg, &derr);
	if (rc < 0) {
		snprintf(err, errlen, "starting the dataplane: %s", derr.msg);
		free(H);
		return rc;
	}
	dp__run_ctl_log_level(CTL_LOG_WARN);   /* keep the benchmark table clean */
	rc = dp__run_control_host(a->cfg, NULL, stderr, &started, what, sizeof(what),
				  err, errlen);
	if (rc < 0)
		goto fail;
	if (!started || !(H->ctl = dp__run_ctl_node())) {
		snprintf(err, errlen, "the control plane did not start: %s", what);
		rc = ZB_ERR_CONFIG;
		goto fail;
	}
	fprintf(stderr, "zbmd: node %u: control: %s\n", a->cfg->node.id, what);
	dp__run_ctl_leave_on_stop(false);
	if ((rc = ctl_blob_handle(H->ctl, CTL_BLOB_RDMA_CONN, rh_on_blob, H)) < 0 ||
	    (rc = ctl_blob_on_result(H->ctl, CTL_BLOB_RDMA_CONN, rh_on_result, H)) < 0) {
		snprintf(err, errlen, "blob handler: %s", zb_strerror(rc));
		goto fail;
	}
	H->handler = true;
	H->pargs = (struct rdma_provider_args){
		.on_event = rh_on_event, .arg = H, .external_exchange = true,
		.send_blob = rh_send_blob, .blob_acks = true, .exchange_arg = H,
		.on_ctx = rh_on_ctx};
	H->timeout_ms = a->timeout_ms ? a->timeout_ms
			: (a->cfg->coll.timeout_ms ? a->cfg->coll.timeout_ms : 5000);
	H->connect_timeout_ms = a->connect_timeout_ms ? a->connect_timeout_ms
				: COLL_CONNECT_TIMEOUT_MS;
	H->nlanes = dp_lcore_count();
	ZB_ASSERT(H->nlanes >= 1 && H->nlanes <= CFG_MAX_LCORES);
	for (unsigned i = 0; i < H->nlanes; i++) {
		H->lanes[i] = (struct rh_lane){.H = H, .index = i};
		if ((rc = dp_register_poller(i, rh_poll, &H->lanes[i])) < 0) {
			snprintf(err, errlen, "registering the lane %u poller: %s", i,
				 zb_strerror(rc));
			goto fail;
		}
	}
	if ((rc = dp_node_launch(&derr)) < 0) {
		snprintf(err, errlen, "launching the lcores: %s", derr.msg);
		goto fail;
	}
	H->launched = true;
	/* Connects here while the control thread carries the blobs. */
	struct coll_comm_args ca = *a;
	ca.provider = "rdma";
	ca.provider_arg = &H->pargs;
	ca.threaded_channels = true;
	ca.kick = rh_kick;           /* channel c progresses on lane c % nlanes */
	ca.kick_arg = H;
	ca.timeout_ms = H->connect_timeout_ms;
	rc = coll_comm_create(&ca, &H->comm, err, errlen);
	if (rc < 0)   /* with the provider's own words (net_add_reason) */
		goto fail;
	void *ctx = atomic_load_explicit(&H->rctx, memory_order_acquire);
	H->channels = coll_channels(H->comm);
	for (uint16_t ch = 0; ctx && ch < H->channels; ch++)
		if ((rc = dp_register_poller(ch % H->nlanes, rdma_dp_poll,
					     rdma_cq_source(ctx, ch))) < 0) {
			snprintf(err, errlen, "registering the CQ poller of channel %u: %s",
				 ch, zb_strerror(rc));
			goto fail;
		}
	if (ctx && (rc = -pthread_create(&H->async_tid, NULL, rh_async_main, H)) < 0) {
		snprintf(err, errlen, "async event thread: %s", strerror(-rc));
		goto fail;
	}
	H->async_thread = ctx != NULL;
	atomic_store_explicit(&H->state, RH_READY, memory_order_release);
	*out = H;
	return 0;
fail:
	rh_close(H);
	return rc;
}

static unsigned rh_comms(void *h, struct coll_comm **out, unsigned max)
{
	struct rh_host *H = h;

	ZB_ASSERT(out != NULL && H != NULL);
	if (max == 0)
		return 0;
	out[0] = H->comm;
	return 1;
}

struct rh_thread {
	struct rh_host *H;
	int (*fn)(void *);
	void *arg;
	int rc;
};

/* A barrier under the connect timeout (every node is up), then the
 * configured bound, then fn. The ring is watched from the control plane
 * (ring_watch.c) from before the barrier until rh_close. */
static int rh_call(struct rh_thread *t)
{
	struct rh_host *H = t->H;

	if (!H->watch)
		H->watch = dp__ring_watch_start(H->ctl, &H->comm, 1, H->cfg->node.id);
	int rc = coll_barrier(H->comm);

	if (rc < 0) {
		dp__ring_watch_stop(H->watch);
		H->watch = NULL;
		dp__join_failed(H->cfg->node.id, H->connect_timeout_ms, rc,
				coll_error(H->comm));
		return 1;
	}
	dp__ring_watch_joined(H->watch);
	coll_set_timeout(H->comm, H->timeout_ms);
	return t->fn(t->arg);
}

static void *rh_thread_main(void *p)
{
	struct rh_thread *t = p;

	t->rc = rh_call(t);
	dp_node_request_stop();
	return NULL;
}

static int rh_run(void *h, int (*fn)(void *), void *arg)
{
	struct rh_thread t = {.H = h, .fn = fn, .arg = arg, .rc = 1};

	ZB_ASSERT(h != NULL && fn != NULL);
	if (!dp_main_polls())
		return rh_call(&t);
	pthread_t tid;
	if (pthread_create(&tid, NULL, rh_thread_main, &t) != 0)
		return 1;
	dp_node_wait();
	pthread_join(tid, NULL);
	return t.rc;
}

static void rh_describe(void *h, char *buf, size_t len)
{
	struct rh_host *H = h;

	ZB_ASSERT(buf != NULL && len > 0);
	snprintf(buf, len, "rdma on %u dataplane lane(s) (%u channel(s), channel c "
		 "and its CQ on lane c mod %u), connection blobs over the control "
		 "plane: %llu sent, %llu provider event(s)", H->nlanes, H->channels,
		 H->nlanes,
		 (unsigned long long)atomic_load(&H->blobs_queued),
		 (unsigned long long)atomic_load(&H->events));
}

static const struct coll_host_ops rh_host_ops = {
	.provider = "rdma",
	.open = rh_open,
	.comms = rh_comms,
	.run = rh_run,
	.describe = rh_describe,
	.close = rh_close,
};

__attribute__((constructor)) static void rh_register(void)
{
	(void)coll_host_register(&rh_host_ops);
}

/* ---- the actor carrier's connection blobs (zbmd run, [actors] carrier = rdma)
 * The remote actor carrier (dataplane/remote_net.c) runs an rdma provider
 * instance of its own. Under `zbmd run` with a control plane its connection
 * blobs travel like the collectives' (authenticated, retried until
 * acknowledged), under a kind of their own (CTL_BLOB_RDMA_ACT), so that each
 * instance gets its own peers' blobs:
 *   dp__rdma_act_provider_arg   before zbra_host: the provider args
 *                               (external exchange) when the carrier is rdma
 *                               and the config asks for a control plane;
 *   dp__rdma_act_start          after the control node started: the handler,
 *                               and send_blob may queue from now on;
 *   dp__rdma_act_stop           before the control node goes: no handler, no
 *                               more sends (the lcores have stopped). */
static struct ra_host {
	_Atomic(struct ctl_node *) ctl;
	_Atomic(void *) rctx;
	bool used, handler;
	struct rdma_provider_args pargs;
} RA;

static int ra_on_blob(void *arg, uint16_t from, uint8_t kind, const void *blob,
		      size_t len)
{
	(void)arg;
	ZB_ASSERT(kind == CTL_BLOB_RDMA_ACT);
	void *ctx = atomic_load_explicit(&RA.rctx, memory_order_acquire);
	if (!ctx)
		return -EAGAIN;         /* not up yet: the peer retries */
	/* the control plane authenticated `from`: the blob must be its own */
	return rdma_conn_deliver_from(ctx, from, blob, len);
}

static void ra_on_result(void *arg, uint16_t peer, uint8_t kind, int status,
			 const void *blob, size_t len)
{
	(void)arg;
	(void)peer;
	ZB_ASSERT(kind == CTL_BLOB_RDMA_ACT);
	void *ctx = atomic_load_explicit(&RA.rctx, memory_order_acquire);
	if (ctx)
		/* -ENOENT: re-created since */
		(void)rdma_conn_blob_result(ctx, blob, len, status);
}

/* The carrier's connect()/accept() on its lcore: queue it (never blocks). */
static int ra_send_blob(void *arg, uint16_t peer, const void *blob, size_t len)
{
	(void)arg;
	struct ctl_node *ctl = atomic_load_explicit(&RA.ctl, memory_order_acquire);
	if (!ctl)
		return -EAGAIN;         /* the control node is not up (yet / any more) */
	return ctl_blob_send(ctl, peer, CTL_BLOB_RDMA_ACT, blob, len);
}

static void ra_on_ctx(void *arg, void *ctx)
{
	(void)arg;
	atomic_store_explicit(&RA.rctx, ctx, memory_order_release);
	struct ctl_node *ctl = atomic_load_explicit(&RA.ctl, memory_order_acquire);
	/* going away: re-installing waits for a handler that is running */
	if (!ctx && RA.handler && ctl)
		(void)ctl_blob_handle(ctl, CTL_BLOB_RDMA_ACT, ra_on_blob, NULL);
}

void *dp__rdma_act_provider_arg(const struct zb_config *cfg)
{
	char why[256];
	ZB_ASSERT(cfg != NULL);
	if (zbra_carrier_kind(cfg) != CFG_CARRIER_RDMA ||
	    !dp__run_ctl_wanted(cfg, why, sizeof(why)))
		return NULL;
	RA.used = true;
	RA.pargs = (struct rdma_provider_args){
		.external_exchange = true, .send_blob = ra_send_blob, .blob_acks = true,
		.exchange_arg = &RA, .on_ctx = ra_on_ctx};
	return &RA.pargs;
}

int dp__rdma_act_start(void)
{
	struct ctl_node *ctl = dp__run_ctl_node();
	if (!RA.used || !ctl)
		return 0;
	int rc = ctl_blob_handle(ctl, CTL_BLOB_RDMA_ACT, ra_on_blob, NULL);
	if (rc == 0)
		rc = ctl_blob_on_result(ctl, CTL_BLOB_RDMA_ACT, ra_on_result, NULL);
	if (rc < 0)
		return rc;
	RA.handler = true;
	atomic_store_explicit(&RA.ctl, ctl, memory_order_release);
	return 0;
}

void dp__rdma_act_stop(void)
{
	struct ctl_node *ctl = atomic_load_explicit(&RA.ctl, memory_order_acquire);
	if (!ctl)
		return;
	atomic_store_explicit(&RA.ctl, NULL, memory_order_release);
	if (RA.handler) {
		(void)ctl_blob_handle(ctl, CTL_BLOB_RDMA_ACT, NULL, NULL);
		(void)ctl_blob_on_result(ctl, CTL_BLOB_RDMA_ACT, NULL, NULL);
	}
	RA.handler = false;
}
