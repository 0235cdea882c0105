/* coll.c — the collective engine: communicators, the per-channel progress
 * state machine that runs the schedules of coll_sched.c over net_ops, and
 * failure detection. See zbmd/coll.h for the contracts and
 * docs/collectives.md for the design.
 */
#include "zbmd/coll.h"
#include "zbmd/config.h"
#include "zbmd/gpu.h"
#include "zbmd/metrics.h"
#include "zbmd/net.h"

#include <pthread.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include <linux/futex.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define COLL_WINDOW 8           /* sends / receives in flight per channel */
#define COLL_SLOTS 4            /* scratch chunks per channel */
#ifndef COLL_IDLE_SPINS
#define COLL_IDLE_SPINS 4       /* empty progress rounds before sleeping */
#endif
#define COLL_WAIT_MS 5
#define COLL_OWNER_SLEEP_US 1000 /* owner's futex wait: a bound, not a poll */
#define COLL_OWNER_YIELD_NS (200ull * 1000) /* owner yields this long, then sleeps */
/* The same before a provider's wait (tcp: poll). 4 tcp nodes on 2 vCPUs
 * (2026-11-28), busbw out of place / in place, GB/s, 3 alternated runs at
 * 1 and 4 MiB: sleeping at once 1.27 - 1.51 / 1.29 - 1.37 and 1.39 - 1.47 /
 * 1.43 - 1.54; yielding 50 us first 1.42 - 1.54 / 1.90 - 1.99 and 1.80 -
 * 1.91 / 1.83 - 1.98; 200 us 1.32 - 1.56 / 0.90 - 1.52 and 1.67 - 1.84 /
 * 1.61 - 1.97 (a yield can hand the CPU to a busy neighbour for its slice).
 * 16 / 64 MiB, 2 pairs: 1.21 - 1.46 / 1.25 - 1.34 against 1.12 - 1.23 /
 * 1.14 - 1.15. */
#define COLL_PROVIDER_YIELD_NS (50ull * 1000)
#define COLL_CHANNEL_MIN_BYTES (64u << 10) /* per channel, before adding one */

static_assert(COLL_SLOTS >= 2, "chunk-major schedules need two slots");
static_assert(COLL_WINDOW >= COLL_SLOTS, "window covers the slots");

/* Timestamps for the per-call statistics (post_ns, test_ns, reduce_ns),
 * taken several times per poll: the TSC where the CPU has a constant one
 * (~12 ns here, against ~30 ns for clock_gettime), converted to ns when the
 * statistics are read (coll_stats_get) at the rate measured since the
 * communicator was made. Elsewhere, nanoseconds directly. */
static inline uint64_t coll_ticks(void)
{
#if defined(__x86_64__)
	return __rdtsc();
#else
	return zb_now_ns();
#endif
}

enum { OP_FREE = 0, OP_QUEUED, OP_RUNNING, OP_DONE };

struct coll_op {
	struct coll_comm *comm;
	struct coll_args a;
	/* a small all-reduce run as an all-gather into comm->gather (a holds
	 * that all-gather): the caller's arguments, reduced at coll_finish */
	struct coll_args user;
	bool gathered;
	int state;
	int status;
	uint32_t tag;
	uint32_t seq;                   /* activation order (coll_activate) */
	uint64_t t0_ns;                 /* coll_start: for the latency metric */
};

/* One collective's part on one channel: filled by the owner when it
 * activates the op (coll_activate), loaded by the channel when it starts
 * the op (chan_load). With lanes, the owner may prepare the ops queued
 * behind the running one, so that a lane goes from one to the next without
 * waiting for the owner (coll_progress_owner). */
struct coll_job {
	struct coll_op *op;
	struct coll_plan plan;
	uint64_t npos;
	void *send_smh, *recv_smh, *recv_rmh;
};

struct coll_chan {
	uint16_t id;
	void *scomm, *rcomm;            /* to next rank / from previous rank */
	char *slots;                    /* COLL_SLOTS * chunk bytes */
	void *slot_smh, *slot_rmh;
	void *send_smh, *recv_smh, *recv_rmh;   /* the running op's buffers */
	struct coll_plan plan;
	uint64_t npos, send_post, send_done, recv_post, recv_done;
	void *sreq[COLL_WINDOW];
	void *rreq[COLL_WINDOW];
	uint64_t last_ns;               /* last event: the no-progress deadline */
	struct coll_stats st;           /* messages, bytes; reduce/post/test_ns
					 * in coll_ticks() units */
	/* Threaded channels (coll_progress_channel): the owner publishes the
	 * ops it activated, in order, by run_seq (release) after writing their
	 * jobs; the lane runs them one after the other and sets done_seq
	 * (release) to each one it finished, or to the one it failed
	 * (lane_err, after which it runs no more). */
	_Atomic uint32_t run_seq, done_seq;
	_Atomic uint32_t ack_abort;     /* lane -> owner: comms closed */
	_Atomic int lane_err;
	struct coll_op *run_op;
	uint32_t cur_seq, seen_abort;
	char lane_msg[200];
	struct coll_job job[COLL_MAX_OPS];      /* by op seq % COLL_MAX_OPS */
};

struct coll_comm {
	const struct net_ops *ops;
	void *ctx;
	const struct zb_config *cfg;
	uint32_t rank, n;
	uint16_t nodes[CFG_MAX_NODES];  /* rank -> node id */
	uint16_t next, prev;            /* node ids */
	uint16_t nch;
	uint32_t chunk_bytes;
	uint32_t small_max;             /* bytes per rank; 0: never gathered */
	uint64_t stream_min;            /* [coll] stream_min_kb in bytes; 0: never */
	char *gather;                   /* n * small_max: the gathered vectors */
	uint64_t timeout_ns;
	uint64_t ticks0, ns0;           /* coll_ticks() rate reference */
	struct coll_chan *ch;
	struct coll_op ops_pool[COLL_MAX_OPS];
	uint32_t q[COLL_MAX_OPS];       /* FIFO of op indices */
	uint32_t q_head, q_len;
	uint32_t seq;
	uint64_t ctx_progress_ns;
	struct coll_stats st;
	bool threaded;                  /* channels progressed by their lanes */
	/* The owner sleeps on a channel's done_seq (futex) after setting this;
	 * a lane that publishes done_seq wakes it (chan_publish). */
	_Atomic uint32_t owner_sleeping;
	void (*kick)(void *);           /* coll_comm_args.kick */
	void *kick_arg;
	uint32_t op_seq;
	_Atomic uint32_t abort_seq;     /* owner -> lanes: close your comms */
	bool failing;                   /* waiting for the lanes' acks */
	/* coll_abort_async(): claimed by one CAS, err published (release)
	 * after async_why is written; the owner applies it */
	_Atomic uint32_t async_claim;
	_Atomic int async_err;
	char async_why[200];
	int err;
	char errmsg[256];
	uint8_t bar_send, bar_recv[CFG_MAX_NODES];
};

/* ---- metrics (Prometheus, via the process registry) ------------------------
 * Per kind: completed collectives, their payload bytes (count x dtype size,
 * per rank), the time from coll_start to completion; failures. Registered
 * once per process. Communicators are progressed by whichever thread owns
 * them (several at once, none an lcore's metrics row), so they add to the
 * shared row with atomic adds: once per collective, not per fragment. */
static struct {
	int ops[COLL_KIND_COUNT], bytes[COLL_KIND_COUNT], lat[COLL_KIND_COUNT];
	int failures;
	bool ok;
} cm;
static pthread_once_t cm_once = PTHREAD_ONCE_INIT;

static void cm_register(void)
{
	static const double bounds[] = {1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2,
					3e-2, 0.1, 0.3, 1, 3, 10};
	char lab[64];
	bool ok = true;
	for (int k = 0; k < COLL_KIND_COUNT; k++) {
		snprintf(lab, sizeof(lab), "kind=\"%s\"", coll_kind_name((enum coll_kind)k));
		cm.ops[k] = zb_metrics_counter("zbmd_coll_ops_total",
					       "collectives completed", lab);
		cm.bytes[k] = zb_metrics_counter("zbmd_coll_bytes_total",
						 "payload bytes of completed collectives (per rank)", lab);
		cm.lat[k] = zb_metrics_histogram("zbmd_coll_latency_seconds",
						 "collective latency, start to completion", lab,
						 bounds, ZB_ARRAY_LEN(bounds));
		ok = ok && cm.ops[k] >= 0 && cm.bytes[k] >= 0 && cm.lat[k] >= 0;
	}
	cm.failures = zb_metrics_counter("zbmd_coll_failures_total",
					 "collectives that failed (timeout, peer down, epoch, abort)", NULL);
	cm.ok = ok && cm.failures >= 0;
}

static void cm_record(const struct coll_op *op, int status)
{
	if (!cm.ok)
		return;
	if (status != 0) {
		zb_metrics_add_shared(cm.failures, 1);
		return;
	}
	enum coll_kind k = op->a.kind;
	zb_metrics_add_shared(cm.ops[k], 1);
	if (k != COLL_BARRIER)
		zb_metrics_add_shared(cm.bytes[k],
			       (uint64_t)op->a.count * zb_dtype_size(op->a.dtype));
	zb_metrics_observe_shared(cm.lat[k], (double)(zb_now_ns() - op->t0_ns) / 1e9);
}

/* ---- small accessors ------------------------------------------------------- */

uint32_t coll_rank(const struct coll_comm *c) { return c->rank; }
uint32_t coll_nranks(const struct coll_comm *c) { return c->n; }
uint16_t coll_channels(const struct coll_comm *c) { return c->nch; }
uint32_t coll_chunk_bytes(const struct coll_comm *c) { return c->chunk_bytes; }
const char *coll_provider(const struct coll_comm *c) { return c->ops->name; }
const char *coll_error(const struct coll_comm *c) { return c->errmsg; }

void coll_stats_get(const struct coll_comm *c, struct coll_stats *out)
{
	ZB_ASSERT(c != NULL && out != NULL);
	*out = c->st;
	uint64_t reduce = 0, post = 0, test = 0;   /* coll_ticks() units */
	for (uint16_t i = 0; i < c->nch; i++) {
		out->messages += c->ch[i].st.messages;
		out->bytes_sent += c->ch[i].st.bytes_sent;
		out->bytes_received += c->ch[i].st.bytes_received;
		out->recvs_direct += c->ch[i].st.recvs_direct;
		out->recvs_cold += c->ch[i].st.recvs_cold;
		reduce += c->ch[i].st.reduce_ns;
		post += c->ch[i].st.post_ns;
		test += c->ch[i].st.test_ns;
	}
	uint64_t dt = coll_ticks() - c->ticks0, dn = zb_now_ns() - c->ns0;
	double ns_per_tick = dt && dn ? (double)dn / (double)dt : 1.0;
	out->reduce_ns += (uint64_t)((double)reduce * ns_per_tick);
	out->post_ns += (uint64_t)((double)post * ns_per_tick);
	out->test_ns += (uint64_t)((double)test * ns_per_tick);
}

void coll_stats_reset(struct coll_comm *c)
{
	ZB_ASSERT(c != NULL);
	memset(&c->st, 0, sizeof(c->st));
	for (uint16_t i = 0; i < c->nch; i++)
		memset(&c->ch[i].st, 0, sizeof(c->ch[i].st));
}

int coll_set_timeout(struct coll_comm *c, uint32_t timeout_ms)
{
	ZB_ASSERT(c != NULL);
	if (timeout_ms == 0)
		return -EINVAL;
	if (c->q_len)           /* between collectives only: a lane reads it */
		return -EBUSY;
	c->timeout_ns = (uint64_t)timeout_ms * 1000000ull;
	return 0;
}

uint16_t coll_node_of_rank(const struct coll_comm *c, uint32_t rank)
{
	ZB_ASSERT(rank < c->n);
	return c->nodes[rank];
}

/* Close one channel's comms (its owner thread: the lane when threaded). */
static void chan_close(struct coll_comm *c, struct coll_chan *ch)
{
	{
		if (ch->scomm) {
			if (ch->slot_smh && c->ops->dereg_mr)
				c->ops->dereg_mr(ch->scomm, ch->slot_smh);
			c->ops->close_send(ch->scomm);
		}
		if (ch->rcomm) {
			if (ch->slot_rmh && c->ops->dereg_mr)
				c->ops->dereg_mr(ch->rcomm, ch->slot_rmh);
			c->ops->close_recv(ch->rcomm);
		}
		ch->scomm = ch->rcomm = NULL;
		ch->slot_smh = ch->slot_rmh = NULL;
		memset(ch->sreq, 0, sizeof(ch->sreq));
		memset(ch->rreq, 0, sizeof(ch->rreq));
	}
}

static void coll_close_comms(struct coll_comm *c)
{
	for (uint16_t i = 0; c->ch && i < c->nch; i++)
		chan_close(c, &c->ch[i]);
}

static void coll_deregister(struct coll_comm *c);
static void chan_load(struct coll_chan *ch, uint32_t seq);
static void coll_fail_ops(struct coll_comm *c, int err);

/* Record the communicator's failure (first one wins), close every comm so
 * that the neighbours notice at once, and fail every queued op. */
static int coll_fail(struct coll_comm *c, int err, const char *fmt, ...)
{
	va_list ap;
	int off;

	ZB_ASSERT(err < 0);
	if (c->err)
		return c->err;
	c->err = err;
	off = snprintf(c->errmsg, sizeof(c->errmsg), "rank %u (node %u): ",
		       c->rank, c->nodes[c->rank]);
	va_start(ap, fmt);
	off += vsnprintf(c->errmsg + off, sizeof(c->errmsg) - (size_t)off, fmt, ap);
	va_end(ap);
	if (off > 0 && (size_t)off < sizeof(c->errmsg))
		snprintf(c->errmsg + off, sizeof(c->errmsg) - (size_t)off,
			 ": %s", zb_strerror(err));
	if (c->threaded) {
		/* The lanes own the comms and may still be inside the running
		 * op's buffers: they close and acknowledge, then (in
		 * coll_progress) the ops complete with the error. */
		atomic_store_explicit(&c->abort_seq, 1, memory_order_release);
		c->failing = true;
		if (c->kick)
			c->kick(c->kick_arg);
		return err;
	}
	coll_deregister(c);
	coll_close_comms(c);
	coll_fail_ops(c, err);
	return err;
}

/* Complete every queued op with err (their callbacks run now). */
static void coll_fail_ops(struct coll_comm *c, int err)
{
	for (uint32_t i = 0; i < c->q_len; i++) {
		struct coll_op *op = &c->ops_pool[c->q[(c->q_head + i) % COLL_MAX_OPS]];
		op->status = err;
		op->state = OP_DONE;
		cm_record(op, err);
		if (op->a.done) {
			op->a.done(op->a.done_arg, err);
			op->state = OP_FREE;
		}
	}
	c->q_len = 0;
}

int coll_abort(struct coll_comm *c, int err, const char *why)
{
	ZB_ASSERT(c != NULL && err < 0);
	ZB_ASSERT(why != NULL);
	return coll_fail(c, err, "aborted: %s", why);
}

int coll_abort_async(struct coll_comm *c, int err, const char *why)
{
	uint32_t free_ = 0;

	ZB_ASSERT(c != NULL && err < 0);
	ZB_ASSERT(why != NULL);
	if (!atomic_compare_exchange_strong_explicit(&c->async_claim, &free_, 1,
						     memory_order_acq_rel,
						     memory_order_relaxed))
		return -EALREADY;
	snprintf(c->async_why, sizeof(c->async_why), "%s", why);
	atomic_store_explicit(&c->async_err, err, memory_order_release);
	return 0;
}

/* Owner thread: apply a coll_abort_async() request, if any. */
static inline int coll_async_check(struct coll_comm *c)
{
	int err = atomic_load_explicit(&c->async_err, memory_order_acquire);

	if (ZB_LIKELY(!err) || c->err)
		return c->err;
	return coll_fail(c, err, "%s", c->async_why);
}

/* ---- communicator -------------------------------------------------------- */

const char *coll_default_provider(const struct zb_config *cfg)
{
	switch (cfg->transport.kind) {
	case CFG_TRANSPORT_TCP: return "tcp";
	case CFG_TRANSPORT_RDMA: return "rdma";
	default: return "dpdk";
	}
}

static int coll_connect_all(struct coll_comm *c, uint32_t timeout_ms,
			    char *err, size_t errlen)
{
	uint64_t deadline = zb_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	int rc;

	for (;;) {
		bool all = true;
		for (uint16_t i = 0; i < c->nch; i++) {
			struct coll_chan *ch = &c->ch[i];
			if (!ch->scomm) {
				rc = c->ops->connect(c->ctx, c->next, i, &ch->scomm);
				if (rc < 0 && rc != -EAGAIN)
					goto fail;
			}
			if (!ch->rcomm) {
				rc = c->ops->accept(c->ctx, c->prev, i, &ch->rcomm);
				if (rc < 0 && rc != -EAGAIN)
					goto fail;
			}
			all = all && ch->scomm && ch->rcomm;
		}
		if (all)
			return 0;
		if (zb_now_ns() > deadline) {
			snprintf(err, errlen, "ring neighbours did not connect "
				 "within %u ms (next node %u: %s, previous node "
				 "%u: %s)", timeout_ms, c->next,
				 c->ch[0].scomm ? "ok" : "no", c->prev,
				 c->ch[0].rcomm ? "ok" : "no");
			return ZB_ERR_TIMEOUT;
		}
		if (c->ops->progress)
			(void)c->ops->progress(c->ctx);
		if (c->ops->wait)
			(void)c->ops->wait(c->ctx, 10);
		else
			usleep(1000);
	}
fail:
	snprintf(err, errlen, "connecting the ring (next node %u, previous "
		 "node %u): %s", c->next, c->prev, zb_strerror(rc));
	return rc;
}

/* Rank order: the node ids of the config's [peer.N] sections and this node,
 * ascending. */
static int coll_rank_table(struct coll_comm *c, const struct zb_config *cfg)
{
	uint16_t self = cfg->node.id;

	c->n = 0;
	for (uint16_t id = 0; id < CFG_MAX_NODES; id++)
		if (cfg->peers[id].present || id == self) {
			if (id == self)
				c->rank = c->n;
			c->nodes[c->n++] = id;
		}
	ZB_ASSERT(c->n >= 1 && c->nodes[c->rank] == self);
	c->next = c->nodes[(c->rank + 1) % c->n];
	c->prev = c->nodes[(c->rank + c->n - 1) % c->n];
	return 0;
}

int coll_comm_create(const struct coll_comm_args *a, struct coll_comm **out,
		     char *err, size_t errlen)
{
	struct coll_comm *c;
	int rc;

	ZB_ASSERT(a != NULL && out != NULL && err != NULL);
	err[0] = '\0';
	if (!a->cfg || a->cfg->node.id >= CFG_MAX_NODES) {
		snprintf(err, errlen, "no config / bad node id");
		return -EINVAL;
	}
	const struct zb_config *cfg = a->cfg;
	const char *pname = a->provider ? a->provider : coll_default_provider(cfg);
	const struct net_ops *ops = net_find(pname);
	if (!ops) {
		snprintf(err, errlen, "no net provider '%s' in this build", pname);
		return -ENOENT;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	pthread_once(&cm_once, cm_register);
	c->ops = ops;
	c->cfg = cfg;
	c->threaded = a->threaded_channels;
	c->kick = a->kick;
	c->kick_arg = a->kick_arg;
	c->nch = a->channels ? a->channels : (cfg->coll.channels ? cfg->coll.channels : 1);
	c->chunk_bytes = a->chunk_bytes ? a->chunk_bytes
			 : (cfg->coll.chunk_kb ? cfg->coll.chunk_kb : 256) * 1024u;
	if (c->chunk_bytes < 64)
		c->chunk_bytes = 64;
	c->chunk_bytes &= ~63u;   /* a multiple of every element size */
	c->small_max = cfg->coll.small_max_kb * 1024u;
	c->stream_min = cfg_stream_min_bytes(cfg->coll.stream_min_kb);
	uint32_t tmo = a->timeout_ms ? a->timeout_ms
		       : (cfg->coll.timeout_ms ? cfg->coll.timeout_ms : 5000);
	c->timeout_ns = (uint64_t)tmo * 1000000ull;
	c->ticks0 = coll_ticks();
	c->ns0 = zb_now_ns();
	coll_rank_table(c, cfg);
	rc = -ENOMEM;
	c->ch = calloc(c->nch, sizeof(*c->ch));
	if (!c->ch)
		goto fail;
	if (c->n > 1 && c->small_max &&
	    !(c->gather = aligned_alloc(64, (size_t)c->n * c->small_max)))
		goto fail;
	for (uint16_t i = 0; i < c->nch; i++) {
		c->ch[i].id = i;
		c->ch[i].slots = aligned_alloc(64, (size_t)COLL_SLOTS * c->chunk_bytes);
		if (!c->ch[i].slots)
			goto fail;
	}
	struct net_init_args ia = {.cfg = cfg, .channels = c->nch,
				   .provider_arg = a->provider_arg};
	rc = ops->init(&ia, &c->ctx);
	if (rc < 0) {
		snprintf(err, errlen, "net provider '%s' init: %s", pname,
			 zb_strerror(rc));
		net_add_reason(ops, err, errlen);   /* which device, why */
		c->ctx = NULL;
		goto fail;
	}
	if (c->n > 1) {
		rc = coll_connect_all(c, a->connect_timeout_ms ? a->connect_timeout_ms
				      : COLL_CONNECT_TIMEOUT_MS, err, errlen);
		if (rc < 0) {
			net_add_reason(ops, err, errlen);
			goto fail;
		}
		for (uint16_t i = 0; i < c->nch && ops->reg_mr; i++) {
			struct coll_chan *ch = &c->ch[i];
			size_t sz = (size_t)COLL_SLOTS * c->chunk_bytes;
			rc = ops->reg_mr(ch->scomm, ch->slots, sz, NET_MEM_HOST, &ch->slot_smh);
			if (rc == 0)
				rc = ops->reg_mr(ch->rcomm, ch->slots, sz, NET_MEM_HOST,
						 &ch->slot_rmh);
			if (rc < 0) {
				snprintf(err, errlen, "registering scratch: %s",
					 zb_strerror(rc));
				goto fail;
			}
		}
	}
	*out = c;
	return 0;
fail:
	coll_comm_destroy(c);
	return rc;
}

void coll_comm_destroy(struct coll_comm *c)
{
	if (!c)
		return;
	/* Collectives still queued complete now, with -ECANCELED (or the
	 * communicator's earlier error), their callbacks run, after the comms
	 * closed (coll.h). The lanes have stopped calling (coll_progress_
	 * channel): the owner closes their comms itself, no acks to wait for. */
	c->threaded = false;
	if (c->q_len)
		(void)coll_fail(c, -ECANCELED, "destroyed with %u collective%s in "
				"flight", c->q_len, c->q_len == 1 ? "" : "s");
	coll_deregister(c);
	coll_close_comms(c);
	coll_fail_ops(c, c->err);       /* those of an earlier failure's wait */
	if (c->ctx)
		c->ops->fini(c->ctx);
	for (uint16_t i = 0; c->ch && i < c->nch; i++)
		free(c->ch[i].slots);
	free(c->ch);
	free(c->gather);
	free(c);
}

/* ---- starting a collective ----------------------------------------------- */

static size_t coll_esize(const struct coll_op *op)
{
	return op->a.kind == COLL_BARRIER ? 1 : zb_dtype_size(op->a.dtype);
}

static size_t coll_bytes(const struct coll_comm *c, const struct coll_op *op,
			 bool send)
{
	const struct coll_args *a = &op->a;
	size_t b = a->count * coll_esize(op);

	if ((a->kind == COLL_REDUCE_SCATTER && send) ||
	    (a->kind == COLL_ALLGATHER && !send))
		return b * c->n;
	return b;
}

/* May a's buffers share these bytes? Only in the in-place layouts of
 * coll.h: the schedules read sendbuf after writing recvbuf (a ring step
 * receives into a block whose own contribution a later step sends), so any
 * other overlap mixes partial results into the inputs — the communicator
 * failed in a reduction, or completed with wrong data. A broadcast's
 * sendbuf is read on the root only. Bounds checked by the caller. */
static bool coll_overlap_ok(const struct coll_comm *c, const struct coll_args *a)
{
	if (!a->count || (a->kind == COLL_BROADCAST && c->rank != a->root))
		return true;
	uintptr_t s = (uintptr_t)a->sendbuf, r = (uintptr_t)a->recvbuf;
	size_t cb = a->count * zb_dtype_size(a->dtype), sl = cb, rl = cb;
	bool inplace;

	switch (a->kind) {
	case COLL_REDUCE_SCATTER:
		sl = cb * c->n;
		inplace = r == s + (size_t)c->rank * cb;
		break;
	case COLL_ALLGATHER:
		rl = cb * c->n;
		inplace = s == r + (size_t)c->rank * cb;
		break;
	default:
		inplace = s == r;
		break;
	}
	return inplace || s + sl <= r || r + rl <= s;
}

static int coll_check_args(const struct coll_comm *c, const struct coll_args *a)
{
	if ((unsigned)a->kind >= COLL_KIND_COUNT)
		return -EINVAL;
	if (a->kind == COLL_BARRIER)
		return 0;
	if ((unsigned)a->dtype >= ZB_DTYPE_COUNT || (unsigned)a->op >= ZB_REDOP_COUNT)
		return -EINVAL;
	if (a->kind == COLL_BROADCAST && a->root >= c->n)
		return -EINVAL;
	if (a->count && (!a->recvbuf ||
			 (!a->sendbuf && !(a->kind == COLL_BROADCAST &&
					   c->rank != a->root))))
		return -EINVAL;
	if (a->count > (SIZE_MAX / 8) / CFG_MAX_NODES)
		return -EINVAL;
	return coll_overlap_ok(c, a) ? 0 : -EINVAL;
}

static uint64_t coll_mix64(uint64_t x)   /* splitmix64's finalizer */
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* The tag of a collective's messages. net.h fails a receive whose message
 * carries another tag with -ZB_ERR_BAD_FRAME, so the tag holds what every
 * rank must agree on (coll.h): the start sequence number, the kind as the
 * caller asked (a gathered all-reduce runs as an all-gather but says
 * all-reduce), count, dtype, the op where one reduces, the root of a
 * broadcast. Fields the kind does not use are left out (a broadcast's op,
 * an all-gather's root, everything of a barrier), so ranks may differ
 * there. The providers carry 32 bits (tcp and dpdk headers, the rdma CTS):
 * hashed, two ranks that disagree share a tag with probability 2^-32, and
 * since the seq is in the hash, not again at the next collective. Once per
 * coll_start. */
static uint32_t coll_tag(uint32_t seq, const struct coll_args *a)
{
	bool bar = a->kind == COLL_BARRIER;
	bool red = a->kind == COLL_ALLREDUCE || a->kind == COLL_REDUCE_SCATTER;
	uint64_t w = (uint64_t)a->kind |
		     (uint64_t)(bar ? 0 : a->dtype + 1u) << 8 |
		     (uint64_t)(red ? a->op + 1u : 0) << 16 |
		     (uint64_t)(a->kind == COLL_BROADCAST ? a->root : 0) << 32;
	uint64_t h = coll_mix64(coll_mix64(coll_mix64(bar ? 0 : a->count) ^ w) ^ seq);

	return (uint32_t)(h ^ (h >> 32));
}

int coll_start(struct coll_comm *c, const struct coll_args *a,
	       struct coll_op **opp)
{
	ZB_ASSERT(c != NULL && a != NULL);
	int rc = coll_check_args(c, a);
	if (rc < 0)
		return rc;
	if (!opp && !a->done)
		return -EINVAL;
	if (coll_async_check(c))
		return c->err;
	/* A slot is taken from coll_start until coll_test() reaps it (or the
	 * callback ran): finished, untested handles hold theirs although they
	 * left the queue, so q_len < max does not imply a free slot. */
	uint32_t i;
	for (i = 0; i < COLL_MAX_OPS && c->ops_pool[i].state != OP_FREE; i++)
		;
	if (i == COLL_MAX_OPS)
		return -EAGAIN;
	ZB_ASSERT(c->q_len < COLL_MAX_OPS);   /* every queued op holds a slot */
	struct coll_op *op = &c->ops_pool[i];
	*op = (struct coll_op){.comm = c, .a = *a, .state = OP_QUEUED,
			       .t0_ns = zb_now_ns()};
	if (a->kind == COLL_BARRIER) {
		op->a.sendbuf = &c->bar_send;
		op->a.recvbuf = c->bar_recv;
		op->a.count = 1;
		op->a.dtype = ZB_F32;   /* unused: esize forced to 1 below */
	} else if (!a->count) {
		/* the empty exchange (COLL_PLAN_EMPTY) moves no byte; the
		 * caller's buffers may be NULL */
		op->a.sendbuf = &c->bar_send;
		op->a.recvbuf = c->bar_recv;
	}
	if (a->kind == COLL_ALLREDUCE && c->n > 1 && c->gather && a->count &&
	    a->count * coll_esize(op) <= c->small_max) {
		/* latency-bound: every rank gathers all n vectors (n-1 ring
		 * steps) and reduces them in rank order itself (coll_finish),
		 * so all ranks compute the same result bit for bit */
		op->user = op->a;
		op->gathered = true;
		op->a.kind = COLL_ALLGATHER;
		op->a.recvbuf = c->gather;
	}
	op->tag = coll_tag(c->seq++, a);   /* the caller's arguments */
	c->q[(c->q_head + c->q_len++) % COLL_MAX_OPS] = i;
	if (opp)
		*opp = op;
	return 0;
}

/* Whether op's buffers are "in place" for its plan, and whether its
 * activation copies locally first (out-of-place on one rank, a broadcast's
 * root, an all-gather's own block; barriers and gathered all-reduces are
 * all-gathers into the communicator's buffers): *copy_bytes, 0 if none,
 * from sendbuf to recvbuf + *copy_off. */
static bool coll_in_place(const struct coll_comm *c, const struct coll_op *op,
			  size_t *copy_bytes, size_t *copy_off)
{
	const struct coll_args *a = &op->a;
	size_t cb = a->count * coll_esize(op);
	const char *sb = a->sendbuf, *rb = a->recvbuf;
	bool inplace, copy;

	switch (a->kind) {
	case COLL_ALLREDUCE:
	case COLL_BROADCAST:
		inplace = sb == rb;
		copy = !inplace && (c->n == 1 ||
				    (a->kind == COLL_BROADCAST && c->rank == a->root));
		break;
	case COLL_REDUCE_SCATTER:
		inplace = sb + (size_t)c->rank * cb == rb;
		copy = c->n == 1 && !inplace;
		break;
	default:        /* all-gather, barrier: our own block */
		inplace = sb == rb + (size_t)c->rank * cb;
		copy = !inplace;
		break;
	}
	*copy_bytes = copy ? cb : 0;
	*copy_off = a->kind == COLL_ALLGATHER || a->kind == COLL_BARRIER
		    ? (size_t)c->rank * cb : 0;
	return inplace;
}

/* With lanes, may op be activated while the ops ahead of it still run
 * (coll_progress_owner)? Only if it needs nothing of the owner before its
 * ring starts (no local copy): the lanes then start it right after the
 * op ahead finished on every channel, as a stream would. */
static bool coll_chainable(const struct coll_comm *c, const struct coll_op *op)
{
	size_t copy, off;

	(void)coll_in_place(c, op, &copy, &off);
	return copy == 0 && !op->gathered;
}

/* Local part that precedes the ring: out-of-place copies, the single-rank
 * case, plans and buffer registration, into each channel's job for the
 * op's seq. Without lanes the channels load the job at once; with lanes
 * the caller publishes it. */
static int coll_activate(struct coll_comm *c, struct coll_op *op)
{
	const struct coll_args *a = &op->a;
	size_t es = coll_esize(op), cb, off;
	const char *sb = a->sendbuf;
	char *rb = a->recvbuf;
	int rc;

	uint64_t t0 = zb_now_ns();

	ZB_ASSERT(op->state == OP_QUEUED);
	bool inplace = coll_in_place(c, op, &cb, &off);
	if (cb)
		memcpy(rb + off, sb, cb);
	c->st.copy_ns += zb_now_ns() - t0;
	op->seq = ++c->op_seq;
	size_t chunk_elems = c->chunk_bytes / es;
	/* Small collectives are latency-bound: fewer channels, fewer messages.
	 * Every rank computes the same number from the same arguments. */
	size_t nact = a->count * es / COLL_CHANNEL_MIN_BYTES;
	nact = nact < 1 ? 1 : nact > c->nch ? c->nch : nact;
	for (uint16_t i = 0; i < c->nch; i++) {
		struct coll_chan *ch = &c->ch[i];
		struct coll_job *j = &ch->job[op->seq % COLL_MAX_OPS];
		ZB_ASSERT(!j->send_smh && !j->recv_smh && !j->recv_rmh);
		j->op = op;
		if (i < nact) {
			coll_plan_init(&j->plan, a->kind, c->n, c->rank, a->root,
				       a->count, es, i, (uint16_t)nact, chunk_elems,
				       a->kind != COLL_BARRIER && a->op == ZB_AVG,
				       inplace);
		} else {        /* idle for this op (count 0: channel 0 only) */
			j->plan = (struct coll_plan){.kind = a->kind, .n = c->n,
						     .rank = c->rank, .esize = es};
		}
		j->npos = coll_plan_positions(&j->plan);
		if (j->npos && a->count && c->ops->reg_mr) {
			if (sb) {
				rc = c->ops->reg_mr(ch->scomm, (void *)sb,
						    coll_bytes(c, op, true),
						    NET_MEM_HOST, &j->send_smh);
				if (rc < 0)
					return coll_fail(c, rc, "registering the send buffer");
			}
			rc = c->ops->reg_mr(ch->scomm, rb, coll_bytes(c, op, false),
					    NET_MEM_HOST, &j->recv_smh);
			if (rc == 0)
				rc = c->ops->reg_mr(ch->rcomm, rb, coll_bytes(c, op, false),
						    NET_MEM_HOST, &j->recv_rmh);
			if (rc < 0)
				return coll_fail(c, rc, "registering the receive buffer");
		}
		if (!c->threaded)
			chan_load(ch, op->seq);
	}
	op->state = OP_RUNNING;
	return 0;
}

static void job_deregister(struct coll_comm *c, struct coll_chan *ch,
			   struct coll_job *j)
{
	if (c->ops->dereg_mr) {
		if (j->send_smh && ch->scomm)
			c->ops->dereg_mr(ch->scomm, j->send_smh);
		if (j->recv_smh && ch->scomm)
			c->ops->dereg_mr(ch->scomm, j->recv_smh);
		if (j->recv_rmh && ch->rcomm)
			c->ops->dereg_mr(ch->rcomm, j->recv_rmh);
	}
	j->send_smh = j->recv_smh = j->recv_rmh = NULL;
}

/* Every job's registrations (a failure without lanes, destroy). */
static void coll_deregister(struct coll_comm *c)
{
	for (uint16_t i = 0; c->ch && i < c->nch; i++)
		for (unsigned k = 0; k < COLL_MAX_OPS; k++)
			job_deregister(c, &c->ch[i], &c->ch[i].job[k]);
}

/* Load job seq into the channel's running state. */
static void chan_load(struct coll_chan *ch, uint32_t seq)
{
	const struct coll_job *j = &ch->job[seq % COLL_MAX_OPS];

	ZB_DASSERT(j->op != NULL && j->op->seq == seq);
	ch->run_op = j->op;
	ch->plan = j->plan;
	ch->npos = j->npos;
	ch->send_smh = j->send_smh;
	ch->recv_smh = j->recv_smh;
	ch->recv_rmh = j->recv_rmh;
	ch->send_post = ch->send_done = ch->recv_post = ch->recv_done = 0;
	ch->last_ns = zb_now_ns();
	ch->cur_seq = seq;
}

/* ---- the per-channel state machine --------------------------------------- */

/* Lane: publish the channel's end (done or failed) to the owner. The owner
 * either sees done_seq before it sleeps or is sleeping on it and gets a
 * wake: both sides store, then load the other's word, all seq_cst, so one
 * of them sees the other's store (no fences: TSan does not model them).
 * The futex wake is the one syscall a lane makes outside its idle sleep:
 * once per collective and channel, and only while the owner is asleep. */
static void chan_publish(struct coll_comm *c, struct coll_chan *ch, uint32_t seq)
{
	atomic_store(&ch->done_seq, seq);   /* seq_cst store, then load */
	if (atomic_load(&c->owner_sleeping))
		(void)syscall(SYS_futex, (uint32_t *)&ch->done_seq,
			      FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* Owner: sleep until a lane publishes an op's end on the first channel
 * that has not finished the head op, at most us microseconds. Without such a channel (a
 * failure waiting for the lanes' acks): a plain sleep. */
static void owner_sleep(struct coll_comm *c, uint32_t us)
{
	struct coll_chan *w = NULL;
	uint32_t v = 0;

	const struct coll_op *head = c->q_len ? &c->ops_pool[c->q[c->q_head]] : NULL;
	for (uint16_t i = 0; head && head->state == OP_RUNNING && i < c->nch &&
	     !c->failing; i++) {
		struct coll_chan *ch = &c->ch[i];
		v = atomic_load_explicit(&ch->done_seq, memory_order_acquire);
		if ((int32_t)(v - head->seq) < 0) {
			w = ch;
			break;
		}
	}
	if (!w) {
		usleep(us);
		return;
	}
	atomic_store(&c->owner_sleeping, 1);  /* seq_cst store, then load */
	if (atomic_load(&w->done_seq) == v) {
		struct timespec ts = {.tv_sec = us / 1000000,
				      .tv_nsec = (long)(us % 1000000) * 1000};
		(void)syscall(SYS_futex, (uint32_t *)&w->done_seq,
			      FUTEX_WAIT_PRIVATE, v, &ts, NULL, 0);
	}
	atomic_store_explicit(&c->owner_sleeping, 0, memory_order_relaxed);
}

/* A channel failed. Single-threaded: the communicator fails at once. With
 * lanes: the lane closes its own comms (the neighbours see it at once),
 * publishes the error to the owner (done_seq), and the owner fails the
 * communicator from coll_progress(). */
static int chan_fail(struct coll_comm *c, struct coll_chan *ch, int err,
		     const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int chan_fail(struct coll_comm *c, struct coll_chan *ch, int err,
		     const char *fmt, ...)
{
	va_list ap;

	ZB_ASSERT(err < 0 && ch != NULL);
	va_start(ap, fmt);
	vsnprintf(ch->lane_msg, sizeof(ch->lane_msg), fmt, ap);
	va_end(ap);
	if (!c->threaded)
		return coll_fail(c, err, "%s", ch->lane_msg);
	chan_close(c, ch);
	atomic_store_explicit(&ch->lane_err, err, memory_order_relaxed);
	chan_publish(c, ch, ch->cur_seq);
	return err;
}

static char *slot_of(const struct coll_comm *c, struct coll_chan *ch, uint64_t pos)
{
	return ch->slots + (size_t)(pos % COLL_SLOTS) * c->chunk_bytes;
}

/* May position pos receive into its slot? Its previous user, pos - SLOTS,
 * must be processed and, if it forwarded out of the slot, that send done. */
static bool slot_free(const struct coll_chan *ch, uint64_t pos)
{
	struct coll_xfer px;

	if (pos < COLL_SLOTS)
		return true;
	uint64_t q = pos - COLL_SLOTS;
	if (ch->recv_done <= q)
		return false;
	coll_plan_xfer(&ch->plan, q, &px);
	return px.recv_kind != COLL_RECV_REDUCE_FWD || ch->send_done > q + 1;
}

static int coll_process(struct coll_comm *c, struct coll_op *op,
			struct coll_chan *ch, uint64_t pos,
			const struct coll_xfer *x)
{
	const struct coll_args *a = &op->a;
	enum zb_redop rop = a->op == ZB_AVG ? ZB_SUM : a->op;
	size_t es = coll_esize(op), elems = x->recv_bytes / es;
	char *dst = (char *)a->recvbuf + x->recv_off;
	char *slot = slot_of(c, ch, pos);
	int rc = 0;

	ZB_DASSERT(x->recv_bytes % es == 0 && x->recv_bytes <= c->chunk_bytes);
	ZB_DASSERT(x->recv_kind == COLL_RECV_DIRECT || x->recv_kind == COLL_RECV_REDUCE ||
		   x->mine_off >= 0);

	uint64_t t0 = coll_ticks();

	if (c->ops->irecv_reduce) {
		/* the provider combined the message as it arrived (chan_post);
		 * what is left is avg's final scaling */
		if (x->scale_after && x->recv_kind != COLL_RECV_REDUCE_FWD)
			rc = gpu_host_avg(dst, elems, a->dtype, c->n);
		ch->st.reduce_ns += coll_ticks() - t0;
		return rc;
	}
	switch (x->recv_kind) {
	case COLL_RECV_REDUCE:
		rc = gpu_host_reduce(dst, slot, elems, a->dtype, rop);
		if (rc == 0 && x->scale_after)
			rc = gpu_host_avg(dst, elems, a->dtype, c->n);
		break;
	case COLL_RECV_REDUCE_FWD:
		rc = gpu_host_reduce(slot, (const char *)a->sendbuf + x->mine_off,
				     elems, a->dtype, rop);
		break;
	case COLL_RECV_DIRECT_REDUCE:
		rc = gpu_host_reduce(dst, (const char *)a->sendbuf + x->mine_off,
				     elems, a->dtype, rop);
		if (rc == 0 && x->scale_after)
			rc = gpu_host_avg(dst, elems, a->dtype, c->n);
		break;
	default:
		return 0;
	}
	ch->st.reduce_ns += coll_ticks() - t0;   /* ticks until coll_stats_get */
	return rc;
}

static int chan_complete(struct coll_comm *c, struct coll_op *op,
			 struct coll_chan *ch)
{
	const struct net_ops *o = c->ops;
	struct coll_xfer x;
	int ev = 0, rc, done;
	size_t got;

	ZB_DASSERT(ch->send_done <= ch->send_post && ch->send_post <= ch->npos);
	ZB_DASSERT(ch->recv_done <= ch->recv_post && ch->recv_post <= ch->npos);
	while (ch->send_done < ch->send_post) {
		void **rq = &ch->sreq[ch->send_done % COLL_WINDOW];
		if (*rq) {
			uint64_t t0 = coll_ticks();
			rc = o->test(*rq, &done, NULL);
			ch->st.test_ns += coll_ticks() - t0;
			if (rc < 0) {
				*rq = NULL;
				return chan_fail(c, ch, rc, "send to node %u on "
						 "channel %u", c->next, ch->id);
			}
			if (!done)
				break;
			*rq = NULL;
			coll_plan_xfer(&ch->plan, ch->send_done, &x);
			ch->st.bytes_sent += x.send_bytes;
			ch->st.messages++;
		}
		ch->send_done++;
		ev++;
	}
	while (ch->recv_done < ch->recv_post) {
		void **rq = &ch->rreq[ch->recv_done % COLL_WINDOW];
		if (*rq) {
			got = 0;
			uint64_t t0 = coll_ticks();
			rc = o->test(*rq, &done, &got);
			ch->st.test_ns += coll_ticks() - t0;
			if (rc < 0) {
				*rq = NULL;
				return chan_fail(c, ch, rc, "receive from node %u on "
						 "channel %u%s", c->prev, ch->id,
						 rc == ZB_ERR_BAD_FRAME
						 ? " (a message of another collective: do "
						   "all nodes start the same ones, with the "
						   "same kind, count, dtype, op and root?)"
						 : "");
			}
			if (!done)
				break;
			*rq = NULL;
			coll_plan_xfer(&ch->plan, ch->recv_done, &x);
			if (got != x.recv_bytes)
				return chan_fail(c, ch, ZB_ERR_BAD_FRAME, "node %u sent "
						 "%zu bytes, expected %zu (do all "
						 "nodes run the same collective?)",
						 c->prev, got, x.recv_bytes);
			ch->st.bytes_received += got;
			ch->st.messages++;
			rc = coll_process(c, op, ch, ch->recv_done, &x);
			if (rc < 0)
				return chan_fail(c, ch, rc, "reduction");
		}
		ch->recv_done++;
		ev++;
	}
	return ev;
}

/* A reduce-kind receive on a provider that combines as data arrives
 * (net_ops.irecv_reduce): the same result coll_process would compute after
 * a plain irecv — recvbuf op= message in place; message op mine into the
 * destination otherwise — in one pass over the bytes. */
static int post_recv_reduce(struct coll_comm *c, struct coll_op *op,
			    struct coll_chan *ch, const struct coll_xfer *x,
			    void *buf, void *mh, void **req)
{
	const struct coll_args *a = &op->a;
	enum zb_redop rop = a->op == ZB_AVG ? ZB_SUM : a->op;
	const void *src;

	if (x->recv_kind == COLL_RECV_REDUCE) {
		src = buf;      /* in place: buf = buf OP message */
	} else {
		ZB_DASSERT(x->mine_off >= 0);
		src = (const char *)a->sendbuf + x->mine_off;
	}
	return c->ops->irecv_reduce(ch->rcomm, buf, src, x->recv_bytes, op->tag,
				    a->dtype, rop, mh, req);
}

/* Whether op's receives into dst go past the caches (net_ops.recv_hint):
 * its receive buffer is at least [coll] stream_min. An all-gather step's
 * block is read again only by the next step's send, right after; a buffer
 * that large does not stay in the caches between collectives anyway, and
 * streaming stores spare each line's read for ownership from memory and
 * leave the caches to the rest of the collective (docs/collectives.md). */
static bool recv_cold(const struct coll_comm *c, const struct coll_op *op)
{
	const struct coll_args *a = &op->a;
	uint64_t bytes = (uint64_t)a->count * zb_dtype_size(a->dtype);
	if (a->kind == COLL_ALLGATHER)
		bytes *= c->n;
	return c->stream_min && c->ops->recv_hint && bytes >= c->stream_min;
}

static int chan_post(struct coll_comm *c, struct coll_op *op,
		     struct coll_chan *ch)
{
	const struct net_ops *o = c->ops;
	const struct coll_args *a = &op->a;
	struct coll_xfer x;
	int ev = 0, rc;

	ZB_DASSERT(op->state == OP_RUNNING && ch->rcomm && ch->scomm);
	while (ch->recv_post < ch->npos && ch->recv_post - ch->recv_done < COLL_WINDOW) {
		uint64_t p = ch->recv_post;
		void *req = NULL;
		coll_plan_xfer(&ch->plan, p, &x);
		if (x.recv_kind != COLL_RECV_NONE) {
			void *buf, *mh;
			if ((x.recv_guard_send >= 0 && ch->send_done <= (uint64_t)x.recv_guard_send) ||
			    (x.recv_guard_recv >= 0 && ch->recv_done <= (uint64_t)x.recv_guard_recv))
				break;
			if (x.recv_kind == COLL_RECV_DIRECT ||
			    x.recv_kind == COLL_RECV_DIRECT_REDUCE) {
				buf = (char *)a->recvbuf + x.recv_off;
				mh = ch->recv_rmh;
			} else if (x.recv_kind == COLL_RECV_REDUCE && o->irecv_reduce) {
				/* in place, combined as it arrives: no slot */
				buf = (char *)a->recvbuf + x.recv_off;
				mh = ch->recv_rmh;
			} else {
				if (!slot_free(ch, p))
					break;
				buf = slot_of(c, ch, p);
				mh = ch->slot_rmh;
			}
			if (o->irecv_reduce && x.recv_kind != COLL_RECV_DIRECT) {
				rc = post_recv_reduce(c, op, ch, &x, buf, mh, &req);
			} else {
				rc = o->irecv(ch->rcomm, buf, x.recv_bytes, op->tag,
					      mh, &req);
			}
			if (rc == -EAGAIN)
				break;
			if (rc < 0)
				return chan_fail(c, ch, rc, "posting a receive from node %u",
						 c->prev);
			if (x.recv_kind == COLL_RECV_DIRECT) {
				ch->st.recvs_direct++;
				if (recv_cold(c, op)) {
					o->recv_hint(req, NET_RECV_COLD);
					ch->st.recvs_cold++;
				}
			}
		}
		ch->rreq[p % COLL_WINDOW] = req;
		ch->recv_post++;
		ev++;
	}
	while (ch->send_post < ch->npos && ch->send_post - ch->send_done < COLL_WINDOW) {
		uint64_t p = ch->send_post;
		void *req = NULL;
		coll_plan_xfer(&ch->plan, p, &x);
		if (x.has_send) {
			const char *buf;
			void *mh;
			if (x.send_dep >= 0 && ch->recv_done <= (uint64_t)x.send_dep)
				break;
			if (x.send_from_slot) {
				buf = slot_of(c, ch, p - 1);
				mh = ch->slot_smh;
			} else if (x.send_src == COLL_BUF_SEND) {
				buf = (const char *)a->sendbuf + x.send_off;
				mh = ch->send_smh;
			} else {
				buf = (const char *)a->recvbuf + x.send_off;
				mh = ch->recv_smh;
			}
			uint64_t t0 = coll_ticks();
			rc = o->isend(ch->scomm, buf, x.send_bytes, op->tag, mh, &req);
			ch->st.post_ns += coll_ticks() - t0;
			if (rc == -EAGAIN)
				break;
			if (rc < 0)
				return chan_fail(c, ch, rc, "posting a send to node %u",
						 c->next);
		}
		ch->sreq[p % COLL_WINDOW] = req;
		ch->send_post++;
		ev++;
	}
	return ev;
}

static int chan_progress(struct coll_comm *c, struct coll_op *op,
			 struct coll_chan *ch, uint64_t now)
{
	int ev = 0, rc;

	if (ch->send_done == ch->npos && ch->recv_done == ch->npos)
		return 0;
	/* Complete, post, and complete again: a post often completes at once
	 * (eager providers), and its completion unblocks the next post. */
	for (int round = 0; round < 2; round++) {
		if ((rc = chan_complete(c, op, ch)) < 0)
			return rc;
		ev += rc;
		if ((rc = chan_post(c, op, ch)) < 0)
			return rc;
		ev += rc;
	}
	if ((rc = chan_complete(c, op, ch)) < 0)
		return rc;
	ev += rc;
	if (ev)
		ch->last_ns = now;
	else if (now - ch->last_ns > c->timeout_ns)
		return chan_fail(c, ch, ZB_ERR_TIMEOUT, "channel %u made no progress "
				 "for %llu ms (waiting on node %u / node %u)",
				 ch->id, (unsigned long long)(c->timeout_ns / 1000000),
				 c->prev, c->next);
	return ev;
}

/* A gathered all-reduce (coll_start): the n vectors in c->gather, rank
 * order, reduced into the caller's buffer in that order on every rank. */
static int coll_gather_reduce(struct coll_comm *c, struct coll_op *op)
{
	const struct coll_args *u = &op->user;
	size_t es = coll_esize(op), cb = u->count * es;
	enum zb_redop rop = u->op == ZB_AVG ? ZB_SUM : u->op;
	uint64_t t0 = zb_now_ns();
	int rc = 0;

	ZB_DASSERT(op->gathered && cb <= c->small_max);
	memcpy(u->recvbuf, c->gather, cb);   /* sendbuf is read: in place is fine */
	for (uint32_t j = 1; j < c->n && rc == 0; j++)
		rc = gpu_host_reduce(u->recvbuf, c->gather + (size_t)j * cb, u->count,
				     u->dtype, rop);
	if (rc == 0 && u->op == ZB_AVG)
		rc = gpu_host_avg(u->recvbuf, u->count, u->dtype, c->n);
	c->st.reduce_ns += zb_now_ns() - t0;   /* the owner's, as copy_ns */
	return rc;
}

static void coll_finish(struct coll_comm *c, struct coll_op *op, int status)
{
	ZB_ASSERT(c->q_len > 0 && &c->ops_pool[c->q[c->q_head]] == op);
	if (op->gathered) {
		if (status == 0)
			status = coll_gather_reduce(c, op);
		op->a = op->user;   /* the caller's collective, for the metrics */
	}
	for (uint16_t i = 0; i < c->nch; i++)
		job_deregister(c, &c->ch[i], &c->ch[i].job[op->seq % COLL_MAX_OPS]);
	c->q_head = (c->q_head + 1) % COLL_MAX_OPS;
	c->q_len--;
	op->status = status;
	op->state = OP_DONE;
	c->st.collectives++;
	cm_record(op, status);
	if (op->a.done) {
		op->a.done(op->a.done_arg, status);
		op->state = OP_FREE;
	}
}

/* Owner side with lanes: activate the head op and, behind it, every op
 * that needs nothing of the owner before it starts (coll_chainable), and
 * publish them to the channels; collect the lanes' results in order and
 * finish the ops. Never touches a channel's running state. An op behind a
 * gathered one waits for that one's finish (its reduction is the
 * owner's). */
static int coll_progress_owner(struct coll_comm *c)
{
	int ev = 0, rc;

	for (;;) {
		bool started = false;
		for (uint32_t k = 0; k < c->q_len; k++) {
			struct coll_op *op = &c->ops_pool[c->q[(c->q_head + k) % COLL_MAX_OPS]];
			if (op->state == OP_QUEUED) {
				if (k > 0 && !coll_chainable(c, op))
					break;
				if ((rc = coll_activate(c, op)) < 0)
					return rc;
				/* Publish; even an empty channel is completed by
				 * its lane (done_seq is the lane's to write). */
				for (uint16_t i = 0; i < c->nch; i++)
					atomic_store_explicit(&c->ch[i].run_seq, op->seq,
							      memory_order_release);
				started = true;
				ev++;
			}
			if (op->gathered)
				break;
		}
		if (started && c->kick)         /* a sleeping lane starts now */
			c->kick(c->kick_arg);
		if (!c->q_len)
			return ev;
		struct coll_op *op = &c->ops_pool[c->q[c->q_head]];
		bool done = true;
		ZB_ASSERT(op->state == OP_RUNNING);
		/* Every channel, also past one still running: a later one may
		 * have failed the op (it closed its comms; the running ones
		 * would learn it only when the failure came round the ring). */
		for (uint16_t i = 0; i < c->nch; i++) {
			struct coll_chan *ch = &c->ch[i];
			uint32_t d = atomic_load_explicit(&ch->done_seq, memory_order_acquire);
			if ((int32_t)(d - op->seq) < 0) {
				done = false;
				continue;
			}
			/* the lane failed this op (a later one: this one is done) */
			int err = atomic_load_explicit(&ch->lane_err, memory_order_relaxed);
			if (err && d == op->seq)
				return coll_fail(c, err, "%s", ch->lane_msg);
		}
		if (!done)
			return ev;
		coll_finish(c, op, 0);
		ev++;
	}
}

int coll_progress_channel(struct coll_comm *c, uint16_t i)
{
	ZB_ASSERT(c != NULL && c->threaded && i < c->nch);
	struct coll_chan *ch = &c->ch[i];
	uint32_t ab = atomic_load_explicit(&c->abort_seq, memory_order_acquire);
	int ev = 0, rc;

	if (ZB_UNLIKELY(ab)) {
		if (!ch->seen_abort) {  /* the communicator failed: close ours */
			ch->seen_abort = 1;
			chan_close(c, ch);
			atomic_store_explicit(&ch->ack_abort, 1, memory_order_release);
		}
		return ZB_ERR_SHUTDOWN;
	}
	if (ZB_UNLIKELY(atomic_load_explicit(&ch->lane_err, memory_order_relaxed)))
		return 0;       /* failed: the owner aborts the communicator */
	for (;;) {
		uint32_t done = atomic_load_explicit(&ch->done_seq, memory_order_relaxed);
		if (ch->cur_seq == done) {
			/* between ops: the next one, once published and once the
			 * one before it finished on every channel (its results may
			 * be this one's input) */
			if (atomic_load_explicit(&ch->run_seq, memory_order_acquire) == done)
				return ev;
			for (uint16_t j = 0; j < c->nch; j++)
				if (j != i &&
				    (int32_t)(atomic_load_explicit(&c->ch[j].done_seq,
								   memory_order_acquire) - done) < 0)
					return ev;
			chan_load(ch, done + 1);
		}
		rc = chan_progress(c, ch->run_op, ch, zb_now_ns());
		if (rc < 0)
			return rc;      /* published by chan_fail */
		ev += rc;
		if (ch->send_done != ch->npos || ch->recv_done != ch->npos)
			return ev;
		chan_publish(c, ch, ch->cur_seq);
		ev++;
	}
}

int coll_progress(struct coll_comm *c)
{
	int ev = 0, rc;

	ZB_ASSERT(c != NULL);
	(void)coll_async_check(c);
	if (ZB_UNLIKELY(c->failing)) {
		bool all = true;
		for (uint16_t i = 0; i < c->nch; i++)
			all = all && atomic_load_explicit(&c->ch[i].ack_abort,
							  memory_order_acquire);
		if (all) {      /* no lane touches a buffer any more */
			c->failing = false;
			coll_fail_ops(c, c->err);
		}
	}
	if (c->err)
		return c->err;
	if (c->threaded)
		return coll_progress_owner(c);
	while (c->q_len) {
		struct coll_op *op = &c->ops_pool[c->q[c->q_head]];
		if (op->state == OP_QUEUED && (rc = coll_activate(c, op)) < 0)
			return rc;
		uint64_t now = zb_now_ns();
		bool done = true;
		for (uint16_t i = 0; i < c->nch; i++) {
			struct coll_chan *ch = &c->ch[i];
			if ((rc = chan_progress(c, op, ch, now)) < 0)
				return rc;
			ev += rc;
			done = done && ch->send_done == ch->npos &&
			       ch->recv_done == ch->npos;
		}
		if (!done)
			break;
		coll_finish(c, op, 0);
		ev++;
	}
	/* The provider's own progress (connection housekeeping for tcp; the
	 * requests themselves move in test()) only when idle, once per ms. */
	uint64_t now = zb_now_ns();
	if (!ev && c->ops->progress && now - c->ctx_progress_ns > 1000000ull) {
		c->ctx_progress_ns = now;
		rc = c->ops->progress(c->ctx);
		if (rc < 0)
			return coll_fail(c, rc, "net provider");
	}
	return ev;
}

int coll_test(struct coll_op *op, int *done)
{
	ZB_ASSERT(op != NULL && done != NULL);
	ZB_ASSERT(op->state != OP_FREE && !op->a.done);
	if (op->state != OP_DONE) {
		*done = 0;
		return 0;
	}
	*done = 1;
	op->state = OP_FREE;
	return op->status;
}

int coll_wait(struct coll_comm *c, struct coll_op *op)
{
	int idle = 0, done = 0, rc;
	uint64_t yield_since = 0;

	uint64_t t0 = zb_now_ns();

	ZB_ASSERT(c != NULL && op != NULL);
	const uint64_t yield_ns = c->threaded ? COLL_OWNER_YIELD_NS
				  : c->ops->wait ? COLL_PROVIDER_YIELD_NS : 0;
	for (;;) {
		rc = coll_progress(c);
		int st = coll_test(op, &done);
		if (done) {
			c->st.blocking_ns += zb_now_ns() - t0;
			return st;
		}
		if (rc < 0 && !c->failing)
			return rc;   /* unreachable: a failure completes op */
		if (rc > 0) {
			idle = 0;
			yield_since = 0;
			continue;
		}
		if (++idle < COLL_IDLE_SPINS)
			continue;
		/* Yield for a while before sleeping: waking a sleeper costs
		 * tens of us on a virtual machine, more than a small
		 * collective itself. The threaded owner's lanes do the work
		 * (or ack a failure) and wake it with a futex; a provider that
		 * sleeps in its own wait (tcp: poll()) is woken by the peer's
		 * data, and a long yield there hands the CPU to a busy
		 * neighbour for its whole slice (COLL_PROVIDER_YIELD_NS). */
		if (yield_ns) {
			uint64_t now = zb_now_ns();
			if (!yield_since)
				yield_since = now;
			if (now - yield_since < yield_ns) {
				sched_yield();
				if (!c->threaded)   /* the provider's wait: waiting too */
					c->st.wait_ns += zb_now_ns() - now;
				continue;
			}
		}
		if (c->threaded) {
			/* then sleep until a lane publishes, leaving the
			 * (shared) cores to them */
			owner_sleep(c, COLL_OWNER_SLEEP_US);
		} else if (c->ops->wait) {
			uint64_t w0 = zb_now_ns();
			(void)c->ops->wait(c->ctx, COLL_WAIT_MS);
			c->st.wait_ns += zb_now_ns() - w0;
		} else
			sched_yield();
	}
}

static int coll_run(struct coll_comm *c, const struct coll_args *a)
{
	struct coll_op *op;
	int rc = coll_start(c, a, &op);

	return rc < 0 ? rc : coll_wait(c, op);
}

int coll_allreduce(struct coll_comm *c, const void *sendbuf, void *recvbuf,
		   size_t count, enum zb_dtype dt, enum zb_redop op)
{
	struct coll_args a = {.kind = COLL_ALLREDUCE, .sendbuf = sendbuf,
			      .recvbuf = recvbuf, .count = count, .dtype = dt,
			      .op = op};
	return coll_run(c, &a);
}

int coll_reduce_scatter(struct coll_comm *c, const void *sendbuf,
			void *recvbuf, size_t count, enum zb_dtype dt,
			enum zb_redop op)
{
	struct coll_args a = {.kind = COLL_REDUCE_SCATTER, .sendbuf = sendbuf,
			      .recvbuf = recvbuf, .count = count, .dtype = dt,
			      .op = op};
	return coll_run(c, &a);
}

int coll_allgather(struct coll_comm *c, const void *sendbuf, void *recvbuf,
		   size_t count, enum zb_dtype dt)
{
	struct coll_args a = {.kind = COLL_ALLGATHER, .sendbuf = sendbuf,
			      .recvbuf = recvbuf, .count = count, .dtype = dt};
	return coll_run(c, &a);
}

int coll_broadcast(struct coll_comm *c, const void *sendbuf, void *recvbuf,
		   size_t count, enum zb_dtype dt, uint32_t root)
{
	struct coll_args a = {.kind = COLL_BROADCAST, .sendbuf = sendbuf,
			      .recvbuf = recvbuf, .count = count, .dtype = dt,
			      .root = root};
	return coll_run(c, &a);
}

int coll_barrier(struct coll_comm *c)
{
	struct coll_args a = {.kind = COLL_BARRIER};
	return coll_run(c, &a);
}
