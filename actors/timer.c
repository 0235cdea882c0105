/* actors/timer.c — send_after / cancel.
 *
 * Each worker owns a binary min-heap of {deadline, message} (capacity
 * params.timers), touched only by that worker. send_after from a worker
 * inserts into its own heap; from any other thread it goes through the
 * worker's MPSC timer inbox. Cancellation is a CAS on the message's timer
 * word (generation << 2 | state) from any thread; the owner frees cancelled
 * entries when they surface (or when it compacts a full heap). */
#include "internal.h"

enum { T_ARMED = 1, T_CANCELLED = 2, T_FIRED = 3 };
#define T_RETRY_NS 1000000ull

static void heap_up(struct act_timer_ent *h, uint32_t i)
{
	struct act_timer_ent e = h[i];
	while (i > 0) {
		uint32_t p = (i - 1) / 2;
		if (h[p].deadline <= e.deadline)
			break;
		h[i] = h[p];
		i = p;
	}
	h[i] = e;
}

static void heap_down(struct act_timer_ent *h, uint32_t n, uint32_t i)
{
	struct act_timer_ent e = h[i];
	for (;;) {
		uint32_t c = 2 * i + 1;
		if (c >= n)
			break;
		if (c + 1 < n && h[c + 1].deadline < h[c].deadline)
			c++;
		if (e.deadline <= h[c].deadline)
			break;
		h[i] = h[c];
		i = c;
	}
	h[i] = e;
}

static void heap_push(struct act_worker *w, uint64_t deadline, struct act_msg *m)
{
	ZB_DASSERT(w->nheap < w->heap_cap);
	w->heap[w->nheap].deadline = deadline;
	w->heap[w->nheap].m = m;
	heap_up(w->heap, w->nheap++);
}

static struct act_msg *heap_pop(struct act_worker *w)
{
	struct act_msg *m = w->heap[0].m;
	w->heap[0] = w->heap[--w->nheap];
	if (w->nheap)
		heap_down(w->heap, w->nheap, 0);
	return m;
}

/* Drops cancelled entries; O(n), only when the heap is full. */
static void heap_compact(struct act_runtime *rt, struct act_worker *w)
{
	uint32_t k = 0;
	for (uint32_t i = 0; i < w->nheap; i++) {
		struct act_msg *m = w->heap[i].m;
		if ((atomic_load_explicit(&m->_priv.tword, ACQ) & 3) == T_CANCELLED)
			act_msg_free(rt, m);
		else
			w->heap[k++] = w->heap[i];
	}
	w->nheap = k;
	for (uint32_t i = k / 2; i-- > 0;)
		heap_down(w->heap, k, i);
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
	uint64_t deadline = zb_now_ns() + delay_ns;
	uint64_t gen = m->_priv.gen;
	struct act_worker *w = act__my_worker(rt);
	if (w && !heap_room(rt, w))
		return -ENOBUFS;
	m->to = to;
	__atomic_store_n(&m->_priv.aux, deadline, __ATOMIC_RELAXED);
	m->_priv.state = MS_TIMER;
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
	if (atomic_compare_exchange_strong_explicit(&m->_priv.tword, &expect,
						    gen << 2 | T_CANCELLED, ACR, RLX))
		return 0;
	return -ENOENT;
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
		atomic_store_explicit(&m->_priv.tword, (t & ~3ull) | T_ARMED, REL);
		heap_push(w, now + T_RETRY_NS, m);
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
	while (heap_room(rt, w) && (q = act__mpsc_pop(&w->timer_inbox))) {
		struct act_msg *m = act__msg_of(q);
		heap_push(w, m->_priv.aux, m);
	}
	/* Bounded: entries re-armed for a full mailbox land in the future. */
	while (w->nheap && w->heap[0].deadline <= now)
		fire(rt, w, heap_pop(w), now);
}
