/* actors/sched.c — workers: run queues, the run loop, stealing, parking.
 *
 * Each worker has (all sized at create):
 *   lifo     the actor made runnable most recently by this worker; runs next
 *            (message ping-pong stays on one core, as the LIFO slot of Go and
 *            Tokio); its run chain is bounded by one reductions budget so the
 *            run queue cannot starve;
 *   ring     SPMC ring of RQ_CAP actors: the owner pushes at the tail and takes
 *            FIFO at the head; idle workers steal half from the head (CAS);
 *   inject   intrusive MPSC queue: actors made runnable by threads that are not
 *            this runtime's workers, and ring overflow.
 * An actor is in at most one of these at a time: its mailbox count's 0 -> 1
 * transition (send.c) is the single token that schedules it. */
#include "internal.h"

#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SPIN_POLLS 400u   /* empty polls before parking (~tens of µs) */
#define PARK_MAX_NS 100000000ull


static long futex(_Atomic uint32_t *addr, int op, uint32_t val,
		  const struct timespec *ts)
{
	return syscall(SYS_futex, (uint32_t *)addr, op, val, ts, NULL, 0);
}

void act__wake_worker(struct act_worker *w)
{
	if (atomic_load_explicit(&w->parked, SEQ) &&
	    atomic_exchange_explicit(&w->parked, 0, SEQ))
		futex(&w->parked, FUTEX_WAKE_PRIVATE, 1, NULL);
}

static void wake_one(struct act_runtime *rt, struct act_worker *self)
{
	for (uint32_t i = 0; i < rt->nworkers; i++) {
		struct act_worker *v = &rt->workers[i];
		if (v != self && atomic_load_explicit(&v->parked, RLX)) {
			act__wake_worker(v);
			return;
		}
	}
}

/* Owner only. */
static void rq_push(struct act_runtime *rt, struct act_worker *w,
		    struct act_actor *a)
{
	uint32_t t = atomic_load_explicit(&w->rq_tail, RLX);
	uint32_t h = atomic_load_explicit(&w->rq_head, ACQ);
	if (ZB_LIKELY(t - h < RQ_CAP)) {
		atomic_store_explicit(&w->rq[t % RQ_CAP], a, RLX);
		atomic_store_explicit(&w->rq_tail, t + 1, REL);
	} else {
		act__mpsc_push(&w->inject, &a->rq_node);
	}
	/* Dekker with park(): our push before their check of the queues. */
	act__fence();
	if (ZB_UNLIKELY(atomic_load_explicit(&rt->nparked, RLX) > 0))
		wake_one(rt, w);
}

static struct act_actor *rq_pop(struct act_worker *w)
{
	for (;;) {
		uint32_t h = atomic_load_explicit(&w->rq_head, ACQ);
		uint32_t t = atomic_load_explicit(&w->rq_tail, RLX);
		if (h == t)
			return NULL;
		struct act_actor *a = atomic_load_explicit(&w->rq[h % RQ_CAP], RLX);
		if (atomic_compare_exchange_weak_explicit(&w->rq_head, &h, h + 1,
							  ACR, RLX))
			return a;
	}
}

static bool rq_nonempty(struct act_worker *w)
{
	return atomic_load_explicit(&w->rq_tail, ACQ) !=
	       atomic_load_explicit(&w->rq_head, ACQ);
}

/* Thief w takes half of v's ring; returns one actor to run, the rest go to
 * w's (empty) ring. */
static struct act_actor *steal_from(struct act_worker *w, struct act_worker *v)
{
	for (int tries = 0; tries < 8; tries++) {
		uint32_t h = atomic_load_explicit(&v->rq_head, ACQ);
		uint32_t t = atomic_load_explicit(&v->rq_tail, ACQ);
		uint32_t n = t - h;
		if (n == 0 || n > RQ_CAP)
			return NULL;
		n -= n / 2;
		uint32_t wt = atomic_load_explicit(&w->rq_tail, RLX);
		for (uint32_t i = 0; i < n; i++)
			atomic_store_explicit(&w->rq[(wt + i) % RQ_CAP],
					      atomic_load_explicit(&v->rq[(h + i) % RQ_CAP], RLX),
					      RLX);
		if (atomic_compare_exchange_strong_explicit(&v->rq_head, &h, h + n,
							    ACR, RLX)) {
			struct act_actor *a =
				atomic_load_explicit(&w->rq[(wt + n - 1) % RQ_CAP], RLX);
			if (n > 1)
				atomic_store_explicit(&w->rq_tail, wt + n - 1, REL);
			atomic_store_explicit(&w->st_steals,
					      atomic_load_explicit(&w->st_steals, RLX) + n, RLX);
			return a;
		}
	}
	return NULL;
}

static struct act_actor *steal(struct act_runtime *rt, struct act_worker *w)
{
	uint32_t n = rt->nworkers;
	if (n < 2)
		return NULL;
	w->rng = w->rng * 6364136223846793005ull + 1442695040888963407ull;
	uint32_t start = (uint32_t)(w->rng >> 33) % n;
	for (uint32_t k = 0; k < n; k++) {
		struct act_worker *v = &rt->workers[(start + k) % n];
		if (v == w)
			continue;
		struct act_actor *a = steal_from(w, v);
		if (a)
			return a;
	}
	return NULL;
}

static struct act_actor *inject_pop(struct act_worker *w)
{
	struct act__qnode *q = act__mpsc_pop(&w->inject);
	return q ? (struct act_actor *)((char *)q - offsetof(struct act_actor, rq_node))
		 : NULL;
}

void act__port_wake(_Atomic uint32_t *seq, uint32_t before)
{
	if (before & ACT_PORT_SLEEPING)
		futex(seq, FUTEX_WAKE_PRIVATE, INT_MAX, NULL);
}

/* Actors only: act_call ports are woken by act__deliver itself, before and
 * after its push (a port may be released the moment its reply is queued). */
void act__make_runnable(struct act_runtime *rt, struct act_actor *a)
{
	ZB_DASSERT(a->kind == AK_ACTOR);
	struct act_worker *w = act__my_worker(rt);
	if (ZB_LIKELY(w != NULL)) {
		struct act_actor *old = w->lifo;
		w->lifo = a;
		if (old)
			rq_push(rt, w, old);
		return;
	}
	struct act_worker *v = &rt->workers[atomic_load_explicit(&a->home, RLX) % rt->nworkers];
	act__mpsc_push(&v->inject, &a->rq_node);
	act__fence();
	act__wake_worker(v);
}

/* Runs one actor: until its mailbox is empty or the budget is spent. Returns
 * the messages handled. The count drops after each message, so capacity
 * counts exactly the unconsumed messages; the drop to 0 ends our ownership
 * (the next sender schedules it), so `a` is not touched after that. */
static uint32_t run_actor(struct act_runtime *rt, struct act_worker *w,
			  struct act_actor *a, uint32_t *spent)
{
	uint32_t budget = rt->p.reductions, n = 0;
	ZB_DASSERT(a->kind == AK_ACTOR);
	act__tls.cur = a;
	atomic_store_explicit(&a->home, (uint8_t)w->index, RLX);
	w->extra = 0;
	for (;;) {
		struct act__qnode *q = act__mpsc_pop(&a->mb);
		if (ZB_UNLIKELY(!q))
			break; /* a sender is between claim and link: requeue */
		n++;
		act__dispatch(rt, a, act__msg_of(q));
		if (ZB_UNLIKELY(a->flags & AF_EXITING)) {
			act__tls.cur = NULL;
			act__terminate(rt, a, 1);
			goto out;
		}
		uint64_t left = atomic_fetch_sub_explicit(&a->word, 1, ACR) - 1;
		if (w_count(left) == 0) {
			act__tls.cur = NULL;
			goto out; /* idle */
		}
		if (n + w->extra >= budget) {
			atomic_store_explicit(&w->st_preempt,
					      atomic_load_explicit(&w->st_preempt, RLX) + 1, RLX);
			break;
		}
	}
	act__tls.cur = NULL;
	rq_push(rt, w, a); /* preempted: to the back of the queue */
out:
	*spent = n + w->extra;
	atomic_store_explicit(&w->st_msgs, atomic_load_explicit(&w->st_msgs, RLX) + n, RLX);
	return n;
}

/* Moves up to 32 injected actors into the ring, where thieves see them and
 * where they queue behind nothing local. */
static void inject_to_ring(struct act_runtime *rt, struct act_worker *w)
{
	struct act_actor *b;
	for (int k = 0; k < 32 && (b = inject_pop(w)); k++)
		rq_push(rt, w, b);
}

static struct act_actor *pick(struct act_runtime *rt, struct act_worker *w,
			      bool *from_lifo)
{
	struct act_actor *a;
	*from_lifo = false;
	w->ticks++;
	if (w->lifo) {
		a = w->lifo;
		w->lifo = NULL;
		if (w->lifo_spent < rt->p.reductions) {
			*from_lifo = true;
			return a;
		}
		/* The chain used a whole budget: everyone queued (injected
		 * actors too) goes first. */
		inject_to_ring(rt, w);
		rq_push(rt, w, a);
	}
	w->lifo_spent = 0;
	if (w->ticks % 61 == 0)
		inject_to_ring(rt, w);
	if ((a = rq_pop(w)))
		return a;
	if ((a = inject_pop(w))) {
		inject_to_ring(rt, w);
		return a;
	}
	return steal(rt, w);
}

size_t act_worker_poll(struct act_runtime *rt, unsigned worker, uint32_t budget)
{
	ZB_ASSERT(rt != NULL && worker < rt->nworkers);
	struct act_worker *w = &rt->workers[worker];
	struct act__tls saved = act__tls;
	size_t done = 0;
	uint64_t used = 0;   /* reductions: messages + act_consume's extra */
	uint32_t iters = 0, spent;
	act__tls.rt = rt;
	act__tls.w = w;
	act__tls.cur = NULL;
	if (w->nheap || !act__mpsc_empty(&w->timer_inbox))
		act__timers_run(rt, w, zb_now_ns());
	while (used < budget && iters++ < budget) {
		bool lifo;
		struct act_actor *a = pick(rt, w, &lifo);
		if (!a)
			break;
		done += run_actor(rt, w, a, &spent);
		used += spent;
		if (lifo)
			w->lifo_spent += spent;
	}
	act__tls = saved;
	return done;
}

int act_current_worker(const struct act_runtime *rt)
{
	return act__tls.rt == rt && act__tls.w ? (int)act__tls.w->index : -1;
}

/* ---- built-in threads ---------------------------------------------------------- */

static bool has_work(struct act_runtime *rt, struct act_worker *w)
{
	if (w->lifo || rq_nonempty(w) || !act__mpsc_empty(&w->inject) ||
	    !act__mpsc_empty(&w->timer_inbox))
		return true;
	for (uint32_t i = 0; i < rt->nworkers; i++)
		if (rq_nonempty(&rt->workers[i]))
			return true;
	return false;
}

static void park(struct act_runtime *rt, struct act_worker *w)
{
	atomic_store_explicit(&w->parked, 1, SEQ);
	atomic_fetch_add_explicit(&rt->nparked, 1, SEQ);
	act__fence();
	uint64_t next = act__timers_next(w), now = zb_now_ns();
	if (!has_work(rt, w) && !atomic_load_explicit(&rt->stop, ACQ) &&
	    (next == 0 || next > now)) {
		uint64_t ns = next ? next - now : PARK_MAX_NS;
		if (ns > PARK_MAX_NS)
			ns = PARK_MAX_NS;
		struct timespec ts = {(time_t)(ns / 1000000000ull),
				      (long)(ns % 1000000000ull)};
		futex(&w->parked, FUTEX_WAIT_PRIVATE, 1, &ts);
		atomic_store_explicit(&w->st_parks,
				      atomic_load_explicit(&w->st_parks, RLX) + 1, RLX);
	}
	atomic_store_explicit(&w->parked, 0, SEQ);
	atomic_fetch_sub_explicit(&rt->nparked, 1, SEQ);
}

struct worker_arg {
	struct act_runtime *rt;
	struct act_worker *w;
};

static void *worker_main(void *arg)
{
	struct act_worker *w = arg;
	struct act_runtime *rt = w->rt;
	uint32_t idle = 0;
	while (!atomic_load_explicit(&rt->stop, ACQ)) {
		if (act_worker_poll(rt, w->index, rt->p.reductions * 4)) {
			idle = 0;
			continue;
		}
		if (++idle < SPIN_POLLS) {
			act__cpu_relax();
			if (idle % 64 == 0)
				sched_yield();
			continue;
		}
		idle = 0;
		park(rt, w);
	}
	/* Leave the cached messages where others can find them. */
	act__tls.rt = rt;
	act__tls.w = w;
	act__cache_flush(rt, w);
	act__tls.rt = NULL;
	act__tls.w = NULL;
	return NULL;
}

int act_start_threads(struct act_runtime *rt)
{
	ZB_ASSERT(rt != NULL);
	ZB_ASSERT(!rt->threads);
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	atomic_store(&rt->stop, false);
	for (uint32_t i = 0; i < rt->nworkers; i++) {
		struct act_worker *w = &rt->workers[i];
		pthread_attr_t attr;
		bool cpus = !rt->p.pin && rt->p.cpus && CPU_COUNT(rt->p.cpus) > 0 &&
			    pthread_attr_init(&attr) == 0;
		if (cpus && pthread_attr_setaffinity_np(&attr, sizeof(cpu_set_t),
							rt->p.cpus) != 0) {
			pthread_attr_destroy(&attr);
			cpus = false;   /* then the creator's CPUs */
		}
		int rc = pthread_create(&w->thread, cpus ? &attr : NULL, worker_main, w);
		if (cpus)
			pthread_attr_destroy(&attr);
		if (rc) {
			act_stop_threads(rt);
			return -rc;
		}
		w->has_thread = true;
		rt->threads = true;
		if (rt->p.pin && ncpu > 0) {
			cpu_set_t set;
			CPU_ZERO(&set);
			CPU_SET((int)(i % (uint32_t)ncpu), &set);
			pthread_setaffinity_np(w->thread, sizeof(set), &set);
		}
	}
	return 0;
}

int act_stop_threads(struct act_runtime *rt)
{
	ZB_ASSERT(rt != NULL);
	if (!rt->threads)
		return 0;
	atomic_store(&rt->stop, true);
	for (uint32_t i = 0; i < rt->nworkers; i++) {
		struct act_worker *w = &rt->workers[i];
		if (!w->has_thread)
			continue;
		atomic_store_explicit(&w->parked, 0, SEQ);
		futex(&w->parked, FUTEX_WAKE_PRIVATE, 1, NULL);
		pthread_join(w->thread, NULL);
		w->has_thread = false;
	}
	rt->threads = false;
	atomic_store(&rt->stop, false);
	return 0;
}

int act__sched_init(struct act_runtime *rt)
{
	ZB_ASSERT(rt->nworkers > 0);
	rt->workers = aligned_alloc(ZB_CACHE_LINE,
				    rt->nworkers * sizeof(struct act_worker));
	if (!rt->workers)
		return -ENOMEM;
	memset(rt->workers, 0, rt->nworkers * sizeof(struct act_worker));
	for (uint32_t i = 0; i < rt->nworkers; i++) {
		struct act_worker *w = &rt->workers[i];
		w->index = i;
		w->rt = rt;
		w->rng = 0x9e3779b97f4a7c15ull * (i + 1);
		act__mpsc_init(&w->inject);
		act__mpsc_init(&w->timer_inbox);
		w->heap_cap = rt->p.timers;
		w->heap = calloc(w->heap_cap, sizeof(*w->heap));
		if (!w->heap) {
			act__sched_fini(rt);
			return -ENOMEM;
		}
	}
	ZB_ASSERT(rt->workers[0].index == 0);
	return 0;
}

void act__sched_fini(struct act_runtime *rt)
{
	if (!rt->workers)
		return;
	for (uint32_t i = 0; i < rt->nworkers; i++)
		free(rt->workers[i].heap);
	free(rt->workers);
	rt->workers = NULL;
}
