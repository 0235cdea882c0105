/* dataplane/actor_coll.c — collectives by message (zbmd/coll.h, "Actors").
 *
 * An actor on any worker hands a collective (its gradient buffer, count,
 * dtype, op) to the communicator's owner through a bounded lock-free queue
 * and goes on with its mailbox; the owner's poll starts it, progresses the
 * communicator, and when the collective completes — done or failed — sends
 * the actor a completion message (struct coll_done_msg, inline bytes).
 *
 * Bounds: at most COLL_SVC_DEPTH collectives between submit and completion
 * message (`inflight`); the queue has as many cells and the owner as many
 * op records, so neither can overflow, and coll_start() (COLL_MAX_OPS) never
 * refuses for space. Nothing is allocated after coll_svc_create().
 *
 * The queue: a bounded multi-producer ring in Vyukov's style (each cell's
 * sequence number says whether it is free for position pos — seq == pos —
 * or holds the request of position pos — seq == pos + 1); one consumer, the
 * owner, so its side needs no atomic read-modify-write.
 *
 * Completion messages are never dropped for want of a message or mailbox
 * space: a completion that act_tell() cannot deliver yet stays first in
 * line and is retried on the next poll (so they leave in completion order).
 * Only a destination that no longer exists (ZB_ERR_STALE_ID) loses its
 * message; that is counted (orphaned).
 */
#include "zbmd/actors.h"
#include "zbmd/coll.h"
#include "zbmd/config.h"
#include "zbmd/dataplane.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static_assert(COLL_SVC_DEPTH <= COLL_MAX_OPS, "the owner must never see -EAGAIN");
static_assert((COLL_SVC_DEPTH & (COLL_SVC_DEPTH - 1)) == 0, "ring mask");
static_assert(sizeof(struct coll_done_msg) <= ACT_INLINE_MAX, "inline payload");

struct svc_req {
	struct coll_args a;
	act_id to;
	uint32_t tag;
	uint64_t cookie;
};

struct svc_cell {
	_Atomic uint64_t seq;
	struct svc_req r;
};

/* A collective between its start and its completion message (owner only). */
struct svc_op {
	struct coll_svc *s;
	struct svc_op *next;            /* free list, or the notify FIFO */
	act_id to;
	uint32_t tag, kind;
	uint64_t cookie;
	int32_t status;
};

struct coll_svc {
	struct coll_comm *c;
	struct act_runtime *rt;
	_Atomic uint64_t head ZB_ALIGNED_CL;    /* producers: next position */
	_Atomic uint32_t inflight;              /* submitted, not yet told */
	_Atomic int failed;                     /* the communicator's error, once seen */
	uint64_t tail ZB_ALIGNED_CL;            /* owner: next position to take */
	struct svc_op *free_ops;
	struct svc_op *notify_head, *notify_tail;
	struct coll_svc_stats st;
	/* set before any submitter exists: the owner's loop may sleep */
	void (*wake)(void *arg);
	void *wake_arg;
	struct svc_cell cells[COLL_SVC_DEPTH];
	struct svc_op ops[COLL_SVC_DEPTH];
};

int coll_svc_create(struct coll_comm *c, struct act_runtime *rt,
		    struct coll_svc **out)
{
	if (!c || !rt || !out)
		return -EINVAL;
	struct coll_svc *s = zb_aligned_alloc(ZB_CACHE_LINE, sizeof(*s));
	if (!s)
		return -ENOMEM;
	memset(s, 0, sizeof(*s));
	s->c = c;
	s->rt = rt;
	for (uint32_t i = 0; i < COLL_SVC_DEPTH; i++) {
		atomic_init(&s->cells[i].seq, i);
		s->ops[i].s = s;
		s->ops[i].next = i + 1 < COLL_SVC_DEPTH ? &s->ops[i + 1] : NULL;
	}
	s->free_ops = &s->ops[0];
	*out = s;
	return 0;
}

int coll_svc_submit(struct coll_svc *s, const struct coll_args *a,
		    act_id reply_to, uint32_t tag, uint64_t cookie)
{
	if (!s || !a || reply_to == ACT_ID_NONE || a->done)
		return -EINVAL;
	int f = atomic_load_explicit(&s->failed, memory_order_acquire);
	if (f)
		return f;
	/* a place among the COLL_SVC_DEPTH in flight */
	uint32_t n = atomic_load_explicit(&s->inflight, memory_order_relaxed);
	do {
		if (n >= COLL_SVC_DEPTH)
			return -EAGAIN;
	} while (!atomic_compare_exchange_weak_explicit(&s->inflight, &n, n + 1,
							memory_order_acq_rel,
							memory_order_relaxed));
	/* a cell: with inflight bounded, the one at our position is free
	 * or about to be (the owner has taken its request but not yet
	 * stored the cell's next sequence number) */
	uint64_t pos = atomic_fetch_add_explicit(&s->head, 1, memory_order_relaxed);
	struct svc_cell *cell = &s->cells[pos & (COLL_SVC_DEPTH - 1)];
	while (atomic_load_explicit(&cell->seq, memory_order_acquire) != pos)
		sched_yield();   /* not reached: see the bound above */
	cell->r = (struct svc_req){.a = *a, .to = reply_to, .tag = tag,
				   .cookie = cookie};
	atomic_store_explicit(&cell->seq, pos + 1, memory_order_release);
	if (s->wake)
		s->wake(s->wake_arg);
	return 0;
}

/* The completion of op o (coll_progress's callback, or a refused start). */
static void svc_done(void *arg, int status)
{
	struct svc_op *o = arg;
	struct coll_svc *s = o->s;

	o->status = status;
	o->next = NULL;
	if (s->notify_tail)
		s->notify_tail->next = o;
	else
		s->notify_head = o;
	s->notify_tail = o;
	if (status == 0)
		s->st.completed++;
	else
		s->st.failed++;
}

/* Tell the actors, in completion order, as far as messages go. */
static int svc_notify(struct coll_svc *s)
{
	int told = 0;

	while (s->notify_head) {
		struct svc_op *o = s->notify_head;
		struct coll_done_msg d = {.status = o->status, .kind = o->kind,
					  .cookie = o->cookie};
		int rc = act_tell(s->rt, o->to, o->tag, &d, sizeof(d));
		if (rc == ZB_ERR_STALE_ID || rc == -EINVAL)
			s->st.orphaned++;
		else if (rc < 0) {
			s->st.deferred++;       /* no message or mailbox space yet */
			break;
		} else {
			s->st.told++;
		}
		s->notify_head = o->next;
		if (!s->notify_head)
			s->notify_tail = NULL;
		o->next = s->free_ops;
		s->free_ops = o;
		atomic_fetch_sub_explicit(&s->inflight, 1, memory_order_release);
		told++;
	}
	return told;
}

int coll_svc_poll(struct coll_svc *s)
{
	int ev = 0;

	ZB_ASSERT(s != NULL);
	if (dp_lcore_index() >= 0)
		s->st.lcore_polls++;
	for (;;) {
		struct svc_cell *cell = &s->cells[s->tail & (COLL_SVC_DEPTH - 1)];
		if (atomic_load_explicit(&cell->seq, memory_order_acquire) != s->tail + 1)
			break;
		struct svc_req r = cell->r;
		atomic_store_explicit(&cell->seq, s->tail + COLL_SVC_DEPTH,
				      memory_order_release);
		s->tail++;
		struct svc_op *o = s->free_ops;
		ZB_ASSERT(o != NULL);   /* inflight <= COLL_SVC_DEPTH op records */
		s->free_ops = o->next;
		o->to = r.to;
		o->tag = r.tag;
		o->kind = (uint32_t)r.a.kind;
		o->cookie = r.cookie;
		r.a.done = svc_done;
		r.a.done_arg = o;
		int rc = coll_start(s->c, &r.a, NULL);
		ZB_ASSERT(rc != -EAGAIN);
		if (rc < 0)
			svc_done(o, rc);        /* bad arguments, or the comm failed */
		else
			s->st.started++;
		ev++;
	}
	int rc = coll_progress(s->c);
	if (rc < 0) {
		int none = 0;
		atomic_compare_exchange_strong(&s->failed, &none, rc);
	} else {
		ev += rc;
	}
	ev += svc_notify(s);
	return rc < 0 ? rc : ev;
}

unsigned coll_svc_pending(const struct coll_svc *s)
{
	return atomic_load_explicit(&s->inflight, memory_order_acquire);
}

/* Until *done is set and every completion message has gone: 0, or
 * -ETIMEDOUT after limit_ns (0: none). poll: this thread owns the service
 * and polls it, yielding when idle (nodes may share the cores); else
 * another (a lane's loop) polls it and this thread only watches for the
 * end — not often: a sleeper that wakes every 200 us gets the CPU ahead of
 * the actors' compute (the scheduler favours it on each wake-up), and
 * zbmd train on 4 local nodes took 50 % longer per gradient that way. */
static int svc_until(struct coll_svc *s, const _Atomic bool *done,
		     uint64_t limit_ns, bool poll)
{
	const struct timespec nap = {.tv_sec = 0, .tv_nsec = 2 * 1000 * 1000};
	uint64_t t0 = zb_now_ns();

	while (!atomic_load(done) || coll_svc_pending(s) > 0) {
		if (!poll)
			nanosleep(&nap, NULL);
		else if (coll_svc_poll(s) <= 0)
			sched_yield();
		if (limit_ns && zb_now_ns() - t0 > limit_ns)
			return -ETIMEDOUT;
	}
	return 0;
}

int coll_svc_poll_until(struct coll_svc *s, const _Atomic bool *done,
			uint64_t limit_ns)
{
	return svc_until(s, done, limit_ns, true);
}

void coll_svc_stats_get(const struct coll_svc *s, struct coll_svc_stats *out)
{
	*out = s->st;
}

int coll_svc_stop(struct coll_svc *s, const char *why)
{
	ZB_ASSERT(s != NULL && why != NULL);
	int none = 0;
	atomic_compare_exchange_strong(&s->failed, &none, ZB_ERR_SHUTDOWN);
	if (coll_svc_pending(s) == 0)
		return 0;
	(void)coll_abort(s->c, ZB_ERR_SHUTDOWN, why);
	/* the queued requests start and fail at once, the running ones fail
	 * in coll_abort: every completion is now owed; tell them */
	for (int i = 0; i < 1000 && coll_svc_pending(s) > 0; i++) {
		(void)coll_svc_poll(s);
		if (coll_svc_pending(s) > 0)
			usleep(1000);
	}
	return coll_svc_pending(s) ? -EBUSY : 0;
}

void coll_svc_destroy(struct coll_svc *s)
{
	free(s);
}

/* ---- a node's collectives for actors, in one call ------------------------- */

static void svc_lane_wake(void *arg)
{
	struct coll_actor_node *n = arg;
	n->h.host->wake(n->h.hh, 0);
}

int coll_actor_node_open(const struct zb_config *cfg, unsigned workers,
			 struct coll_actor_node *n, char *err, size_t errlen)
{
	int rc;

	ZB_ASSERT(cfg != NULL && n != NULL && err != NULL);
	memset(n, 0, sizeof(*n));
	struct act_params ap;
	act_params_default(&ap);
	ap.node = cfg->node.id;
	ap.workers = workers ? workers : 2;
	ap.max_actors = 256;
	ap.message_pool = 1024;
	ap.timers = 64;
	ap.max_names = 16;
	ap.pin = false;   /* the nodes of a local cluster share the CPUs */
	struct coll_comm_args ca = {.cfg = cfg};
	if ((rc = coll_hosted_open(&ca, &n->h, err, errlen)) < 0)
		goto fail;
	/* On a dataplane, the workers stay off the CPUs its polling lcores
	 * own where others remain: a trainer that its lane wakes would
	 * otherwise be put on the lane's CPU by the scheduler. */
	cpu_set_t cpus;
	CPU_ZERO(&cpus);
	if (n->h.host) {
		cpu_set_t lc;
		long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
		(void)dp_lcores_cpus(&lc);
		for (long i = 0; i < ncpu && i < CPU_SETSIZE; i++)
			if (!CPU_ISSET((int)i, &lc))
				CPU_SET((int)i, &cpus);
	}
	ap.cpus = CPU_COUNT(&cpus) ? &cpus : NULL;
	if ((rc = act_runtime_create(&ap, &n->rt)) < 0 ||
	    (rc = act_start_threads(n->rt)) < 0) {
		snprintf(err, errlen, "the actor runtime: %s", zb_strerror(rc));
		goto fail;
	}
	n->comm = n->h.comms[0];
	if ((rc = coll_svc_create(n->comm, n->rt, &n->svc)) < 0) {
		snprintf(err, errlen, "the collective service: %s", zb_strerror(rc));
		goto fail;
	}
	if (n->h.host && n->h.host->own && n->h.host->wake) {
		/* serve() may hand the service to lane 0's loop: a submit
		 * wakes it (before any actor can submit) */
		n->svc->wake = svc_lane_wake;
		n->svc->wake_arg = n;
	}
	return 0;
fail:
	coll_actor_node_close(n);
	return rc < 0 ? rc : -EIO;
}

int coll_actor_node_run(struct coll_actor_node *n, int (*fn)(void *), void *arg)
{
	ZB_ASSERT(n != NULL && n->comm != NULL && fn != NULL);
	return coll_hosted_run(&n->h, fn, arg);
}

static int svc_lane_poll(void *arg)
{
	int rc = coll_svc_poll(arg);
	return rc > 0 ? rc : 0;   /* a failure is told through the messages */
}

int coll_actor_node_serve(struct coll_actor_node *n, const _Atomic bool *done,
			  uint64_t limit_ns)
{
	ZB_ASSERT(n != NULL && n->svc != NULL && done != NULL);
	/* open() set the service's wake where the host lets a lane own it */
	const struct coll_host_ops *H = n->h.host;
	struct coll_lane_owner o = {.poll = svc_lane_poll, .arg = n->svc};
	if (!n->svc->wake || H->own(n->h.hh, 0, &o) < 0)
		return coll_svc_poll_until(n->svc, done, limit_ns);
	/* lane 0's loop owns the communicator and polls the service: submits
	 * wake it, and its adaptive idle sleeps when nothing is in flight */
	int rc = svc_until(n->svc, done, limit_ns, false);
	(void)H->own(n->h.hh, 0, NULL);   /* this thread owns it again */
	return rc;
}

void coll_actor_node_close(struct coll_actor_node *n)
{
	if (n->svc)
		(void)coll_svc_stop(n->svc, "the node's collectives are closing");
	if (n->rt)
		act_stop_threads(n->rt);   /* no trainer submits any more */
	coll_hosted_close(&n->h);
	coll_svc_destroy(n->svc);
	if (n->rt)
		act_runtime_destroy(n->rt);
	memset(n, 0, sizeof(*n));
}
