/* actors/timer.c — send_after / cancel.
 *
 * Each worker owns a binary min-heap of {deadline, message} (capacity
 * params.timers), touched only by that worker. send_after from a worker
 * inserts into its own heap; from any other thread it goes through the
 * worker's MPSC timer inbox. Cancellation is a CAS on the message's timer
 * word (generation << 2 | state) from any thread; the winner of that CAS
 * owns the freeing, which must happen now, not at the old deadline (a
 * cancelled timer holds a pool message and a heap slot until then):
 *   - on the worker whose heap holds it: taken out of the heap by its index
 *     (kept in _priv.aux while it is there) and freed at once;
 *   - from any other thread: that worker's tcancel counter is raised, and
 *     the worker drops every cancelled entry on its next timer pass;
 *   - still in a timer inbox: freed when the owner drains the inbox. */
#include "internal.h"

enum { T_ARMED = 1, T_CANCELLED = 2, T_FIRED = 3 };
#define T_RETRY_NS 1000000ull
/* _priv.aux of a message in a heap: AUX_IN_HEAP | worker << 32 | index.
 * Deadlines stay below AUX_IN_HEAP (send_after saturates at T_MAX_DEADLINE),
 * so an inbox message's aux (its deadline) is never read as a position. */
#define AUX_IN_HEAP (1ull << 63)
#define T_MAX_DEADLINE (1ull << 62)

/* Every store into the heap goes through here: it keeps the position. */
static inline void heap_put(struct act_worker *w, uint32_t i, struct act_timer_ent e)
{
	w->heap[i] = e;
	__atomic_store_n(&e.m->_priv.aux,
			 AUX_IN_HEAP | (uint64_t)w->index << 32 | i, __ATOMIC_RELAXED);
}

static void heap_up(struct act_worker *w, uint32_t i)
{
	struct act_timer_ent e = w->heap[i];
	while (i > 0) {
		uint32_t p = (i - 1) / 2;
		if (w->heap[p].deadline <= e.deadline)
			break;
		heap_put(w, i, w->heap[p]);
		i = p;
	}
	heap_put(w, i, e);
}

static void heap_down(struct act_worker *w, uint32_t i)
{
	struct act_timer_ent *h = w->heap;
	uint32_t n = w->nheap;
	struct act_timer_ent e = h[i];
	for (;;) {
		uint32_t c = 2 * i + 1;
		if (c >= n)
			break;
		if (c + 1 < n && h[c + 1].deadline < h[c].deadline)
			c++;
		if (e.deadline <= h[c].deadline)
			break;
		heap_put(w, i, h[c]);
		i = c;
	}
	heap_put(w, i, e);
}

static void heap_push(struct act_worker *w, uint64_t deadline, struct act_msg *m)
{
	ZB_DASSERT(w->nheap < w->heap_cap);
	w->heap[w->nheap].deadline = deadline;
	w->heap[w->nheap].m = m;
	heap_up(w, w->nheap++);
}

static struct act_msg *heap_pop(struct act_worker *w)
{
	struct act_msg *m = w->heap[0].m;
	ZB_DASSERT(w->nheap > 0);
	w->heap[0] = w->heap[--w->nheap];
	if (w->nheap)
		heap_down(w, 0);
	__atomic_store_n(&m->_priv.aux, 0, __ATOMIC_RELAXED); /* out of the heap */
	return m;
}

/* Takes entry i out (owner only); O(log n). */
static void heap_remove(struct act_worker *w, uint32_t i)
{
	ZB_DASSERT(i < w->nheap);
	struct act_timer_ent last = w->heap[--w->nheap];
	if (i == w->nheap)
		return;
	heap_put(w, i, last);
	if (i > 0 && w->heap[(i - 1) / 2].deadline > last.deadline)
		heap_up(w, i);
	else
		heap_down(w, i);
}

static bool is_cancelled(struct act_msg *m)
{
	return (atomic_load_explicit(&m->_priv.tword, ACQ) & 3) == T_CANCELLED;
}

/* Frees every cancelled entry; O(n): when the heap is full, or after other
 * threads cancelled timers of this heap. */
static void heap_compact(struct act_runtime *rt, struct act_worker *w)
{
	uint32_t k = 0;
	for (uint32_t i = 0; i < w->nheap; i++) {
		struct act_msg *m = w->heap[i].m;
		if (is_cancelled(m))
			act_msg_free(rt, m);
		else
			heap_put(w, k++, w->heap[i]);
	}
	w->nheap = k;
	for (uint32_t i = k / 2; i-- > 0;)
		heap_down(w, i);
}

static bool heap_room(struct act_runtime *rt, struct act_worker *w)
{
	if (w->nheap < w->heap_cap)
		return true;
	heap_compact(rt, w);
	return w->nheap < w->heap_cap;
}

int act_send_after(struct act_runtime *rt, act_id to, uint64_t delay_ns,
		   struct act_msg *m, uint64_t *tref)
{
	ZB_ASSERT(rt != NULL && m != NULL);
	ZB_ASSERT(m->_priv.state == MS_OWNED || m->_priv.state == MS_HANDLING);
	/* The runtime's own timers are signals (_sys set: call timeouts, the
	 * supervisor's); an application message must carry a sendable tag. */
	if (m->_sys == SYS_NONE && !act__tag_sendable(m->tag))
		return -EINVAL;
	uint64_t now = zb_now_ns();
	uint64_t deadline = delay_ns < T_MAX_DEADLINE - now ? now + delay_ns : T_MAX_DEADLINE;
	uint64_t gen = m->_priv.gen;
	struct act_worker *w = act__my_worker(rt);
	if (w && !heap_room(rt, w))
		return -ENOBUFS;
	m->to = to;
	__atomic_store_n(&m->_priv.aux, deadline, __ATOMIC_RELAXED);
	m->_priv.state = MS_TIMER;
	act__msg_moved(m);
	atomic_store_explicit(&m->_priv.tword, gen << 2 | T_ARMED, REL);
	if (tref)
		*tref = (uint64_t)act__msg_index(rt, m) << 32 | (uint32_t)gen;
	if (w) {
		heap_push(w, deadline, m);
		return 0;
	}
	struct act_actor *a = act__slot(rt, to);
	struct act_worker *v = &rt->workers[a ? atomic_load_explicit(&a->home, RLX) % rt->nworkers : 0];
	act__mpsc_push(&v->timer_inbox, act__qn(m));
	act__fence();
	act__wake_worker(v);
	return 0;
}

int act_cancel_timer(struct act_runtime *rt, uint64_t tref)
{
	ZB_ASSERT(rt != NULL);
	uint32_t idx = (uint32_t)(tref >> 32);
	uint64_t gen = (uint32_t)tref;
	if (idx >= rt->p.message_pool)
		return -ENOENT;
	struct act_msg *m = &rt->msgs[idx];
	uint64_t expect = gen << 2 | T_ARMED;
	if (!atomic_compare_exchange_strong_explicit(&m->_priv.tword, &expect,
						     gen << 2 | T_CANCELLED, ACR, RLX))
		return -ENOENT;
	/* Ours to free; only the heap's owner may take it out. */
	struct act_worker *w = act__my_worker(rt);
	uint64_t aux = __atomic_load_n(&m->_priv.aux, __ATOMIC_RELAXED);
	uint32_t i = (uint32_t)aux;
	if (w && aux == (AUX_IN_HEAP | (uint64_t)w->index << 32 | i) && i < w->nheap &&
	    w->heap[i].m == m) {
		/* In our own heap: nobody else frees it, so this is the timer
		 * we just cancelled. */
		heap_remove(w, i);
		act_msg_free(rt, m);
		return 0;
	}
	/* Elsewhere. Dekker with the inbox drain (act__timers_run): either the
	 * owner sees our CAS after placing it, or we see its position here.
	 * The owner may free (and the pool reuse) the message at any moment
	 * now, so aux is a hint: a wrong one costs one needless compaction. */
	act__fence();
	aux = __atomic_load_n(&m->_priv.aux, __ATOMIC_RELAXED);
	uint32_t wi = (uint32_t)(aux >> 32) & 0x7fffffffu;
	if ((aux & AUX_IN_HEAP) && wi < rt->nworkers)
		atomic_fetch_add_explicit(&rt->workers[wi].tcancel, 1, REL);
	return 0;
}

uint64_t act__timers_next(struct act_worker *w)
{
	return w->nheap ? w->heap[0].deadline : 0;
}

static void fire(struct act_runtime *rt, struct act_worker *w,
		 struct act_msg *m, uint64_t now)
{
	uint64_t t = atomic_load_explicit(&m->_priv.tword, ACQ);
	if ((t & 3) != T_ARMED ||
	    !atomic_compare_exchange_strong_explicit(&m->_priv.tword, &t,
						     (t & ~3ull) | T_FIRED, ACR, RLX)) {
		act_msg_free(rt, m); /* cancelled */
		return;
	}
	m->_priv.state = MS_OWNED;
	int rc = act__deliver(rt, m->to, m, m->_sys != SYS_NONE);
	if (rc == ZB_ERR_MAILBOX_FULL) {
		/* Backpressure: keep it armed (still cancellable), retry later. */
		m->_priv.state = MS_TIMER;
		heap_push(w, now + T_RETRY_NS, m); /* position first: see cancel */
		atomic_store_explicit(&m->_priv.tword, (t & ~3ull) | T_ARMED, REL);
	} else if (rc) {
		act_msg_free(rt, m);
		atomic_store_explicit(&w->st_tdrop,
				      atomic_load_explicit(&w->st_tdrop, RLX) + 1, RLX);
	} else {
		atomic_store_explicit(&w->st_fired,
				      atomic_load_explicit(&w->st_fired, RLX) + 1, RLX);
	}
}

void act__timers_run(struct act_runtime *rt, struct act_worker *w, uint64_t now)
{
	struct act__qnode *q;
	ZB_DASSERT(act__tls.w == w);
	if (atomic_load_explicit(&w->tcancel, RLX) &&
	    atomic_exchange_explicit(&w->tcancel, 0, ACQ))
		heap_compact(rt, w);
	while (heap_room(rt, w) && (q = act__mpsc_pop(&w->timer_inbox))) {
		struct act_msg *m = act__msg_of(q);
		heap_push(w, __atomic_load_n(&m->_priv.aux, __ATOMIC_RELAXED), m);
		/* Dekker with act_cancel_timer: position stored, then its CAS read. */
		act__fence();
		if (is_cancelled(m)) {
			heap_remove(w, (uint32_t)__atomic_load_n(&m->_priv.aux,
								   __ATOMIC_RELAXED));
			act_msg_free(rt, m);
		}
	}
	/* Bounded: entries re-armed for a full mailbox land in the future. */
	while (w->nheap && w->heap[0].deadline <= now)
		fire(rt, w, heap_pop(w), now);
}
