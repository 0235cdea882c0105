/* Async events (IBA 11.6.3): read from the context's async fd, set
 * non-blocking at init, so this never waits. Affected comms get an error
 * code stored atomically; their owner lcore fails the requests on its next
 * call (comm_check in xfer.c). Any thread; takes ctx->lock. */
#include "internal.h"

#include <stdio.h>
#include <string.h>

static void fail_comm_async(struct rdma_comm *c, int err)
{
	int zero = 0;

	atomic_compare_exchange_strong(&c->fail_err, &zero, err);
}

static void fail_all_async(struct rdma_ctx *ctx, int err)
{
	for (uint32_t i = 0; i < ctx->ncomms; i++) {
		struct rdma_comm *c = atomic_load(&ctx->comms[i]);
		if (c)
			fail_comm_async(c, err);
	}
}

static void handle(struct rdma_ctx *ctx, const struct ibv_async_event *e)
{
	struct rdma_event ev;
	struct rdma_comm *c = NULL;

	memset(&ev, 0, sizeof(ev));
	ev.peer = ev.channel = -1;
	ev.wc_status = -1;
	switch (e->event_type) {
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_PATH_MIG_ERR:
		c = e->element.qp ? e->element.qp->qp_context : NULL;
		if (!c || c->index >= ctx->ncomms || atomic_load(&ctx->comms[c->index]) != c)
			return;
		ev.kind = RDMA_EV_QP_FATAL;
		ev.err = e->event_type == IBV_EVENT_QP_ACCESS_ERR ? -EACCES : ZB_ERR_DEVICE;
		ev.peer = c->peer;
		ev.channel = c->channel;
		ev.side = c->side;
		fail_comm_async(c, ev.err);
		snprintf(ev.msg, sizeof(ev.msg), "node %u ch %u %s: %s: QP out of service",
			 c->peer, c->channel, c->side == RDMA_SIDE_SEND ? "send" : "recv",
			 ibv_event_type_str(e->event_type));
		break;
	case IBV_EVENT_PORT_ERR:
		if (e->element.port_num != ctx->qpl.port)
			return;
		ev.kind = RDMA_EV_PORT_DOWN;
		ev.err = ZB_ERR_PEER_DOWN;
		fail_all_async(ctx, ev.err);
		snprintf(ev.msg, sizeof(ev.msg), "%s port %d: %s: every connection fails",
			 ctx->dev_name, e->element.port_num, ibv_event_type_str(e->event_type));
		break;
	case IBV_EVENT_PORT_ACTIVE:
		if (e->element.port_num != ctx->qpl.port)
			return;
		ev.kind = RDMA_EV_PORT_UP;
		snprintf(ev.msg, sizeof(ev.msg), "%s port %d: %s", ctx->dev_name,
			 e->element.port_num, ibv_event_type_str(e->event_type));
		break;
	case IBV_EVENT_DEVICE_FATAL:
		ev.kind = RDMA_EV_DEVICE_FATAL;
		ev.err = ZB_ERR_DEVICE;
		fail_all_async(ctx, ev.err);
		snprintf(ev.msg, sizeof(ev.msg), "%s: %s: every connection fails",
			 ctx->dev_name, ibv_event_type_str(e->event_type));
		break;
	case IBV_EVENT_LID_CHANGE:
	case IBV_EVENT_PKEY_CHANGE:
	case IBV_EVENT_SM_CHANGE:
	case IBV_EVENT_CLIENT_REREGISTER:
		/* ibv_get_async_event(3): the port's attributes changed; read
		 * them again, so the next connection advertises the LID the
		 * subnet manager gave it (connections made already keep
		 * theirs). Until 2026-11-29 the LID read at start was
		 * advertised for ever: after a reassignment every new
		 * connection failed (RETRY_EXC_ERR) until a restart. Under
		 * ctx->lock, as comm_create, which reads port_attr. */
		if (e->element.port_num == ctx->qpl.port) {
			struct ibv_port_attr pa;
			if (ibv_query_port(ctx->dev, ctx->qpl.port, &pa) == 0)
				ctx->port_attr.lid = pa.lid;
		}
		return;
	default:
		return;     /* COMM_EST, SQ_DRAINED, ...: informational */
	}
	rdma__emit(ctx, &ev);
}

/* Read and acknowledge every pending event; ctx->lock held. An event is
 * read and acked under the lock, so a destroyer holding it never meets an
 * event read but not acked, which would make ibv_destroy_qp/cq wait
 * (ibv_get_async_event(3)); destroyers also drain first, so events about
 * the object are reported before it goes. */
int rdma__async_drain(struct rdma_ctx *ctx)
{
	struct ibv_async_event e;
	int n = 0;

	ZB_ASSERT(ctx != NULL && ctx->dev != NULL);
	for (; n < 1024; n++) {
		if (ibv_get_async_event(ctx->dev, &e) != 0)
			break;   /* EAGAIN: nothing pending (fd is non-blocking) */
		handle(ctx, &e);
		ibv_ack_async_event(&e);
	}
	return n;
}

int rdma_poll_async(void *vctx)
{
	struct rdma_ctx *ctx = vctx;
	int n;

	if (!ctx || !ctx->dev)
		return -EINVAL;
	pthread_mutex_lock(&ctx->lock);
	n = rdma__async_drain(ctx);
	pthread_mutex_unlock(&ctx->lock);
	return n;
}
