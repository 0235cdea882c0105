/* actors/internal.h — shared between the actor runtime's sources only. */
#ifndef ZBMD_ACTORS_INTERNAL_H
#define ZBMD_ACTORS_INTERNAL_H

#include "zbmd/actors.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#define RLX memory_order_relaxed
#define ACQ memory_order_acquire
#define REL memory_order_release
#define ACR memory_order_acq_rel
#define SEQ memory_order_seq_cst

static_assert(sizeof(struct act_msg) == 192, "act_msg is three cache lines");
static_assert(offsetof(struct act_msg, u) + 40 <= 128,
	      "40 inline bytes (and every descriptor) in the first two lines");

/* Full fence (Dekker-style handshakes with parked workers). ThreadSanitizer
 * does not model atomic_thread_fence, so it gets a seq_cst RMW instead. */
#if defined(__SANITIZE_THREAD__)
extern __thread _Atomic uint32_t act__fence_word;
#define act__fence() atomic_fetch_add_explicit(&act__fence_word, 0, memory_order_seq_cst)
#else
#define act__fence() atomic_thread_fence(memory_order_seq_cst)
#endif

/* ---- intrusive MPSC queue (Vyukov) -------------------------------------------
 * Producers: one atomic exchange. The consumer may see a transiently empty
 * queue while a producer is between its exchange and its link store; callers
 * keep an exact count elsewhere and retry. */
struct act__qnode {
	_Atomic(struct act__qnode *) next;
};
struct act__mpsc {
	_Atomic(struct act__qnode *) head; /* producers */
	struct act__qnode *tail;           /* consumer */
	struct act__qnode stub;
};
static inline void act__mpsc_init(struct act__mpsc *q)
{
	atomic_store_explicit(&q->stub.next, NULL, RLX);
	atomic_store_explicit(&q->head, &q->stub, RLX);
	q->tail = &q->stub;
}
static inline void act__mpsc_push(struct act__mpsc *q, struct act__qnode *n)
{
	atomic_store_explicit(&n->next, NULL, RLX);
	struct act__qnode *prev = atomic_exchange_explicit(&q->head, n, ACR);
	atomic_store_explicit(&prev->next, n, REL);
}
static inline struct act__qnode *act__mpsc_pop(struct act__mpsc *q)
{
	struct act__qnode *tail = q->tail;
	struct act__qnode *next = atomic_load_explicit(&tail->next, ACQ);
	if (tail == &q->stub) {
		if (!next)
			return NULL;
		q->tail = next;
		tail = next;
		next = atomic_load_explicit(&tail->next, ACQ);
	}
	if (next) {
		q->tail = next;
		return tail;
	}
	if (tail != atomic_load_explicit(&q->head, ACQ))
		return NULL; /* producer mid-push */
	act__mpsc_push(q, &q->stub);
	next = atomic_load_explicit(&tail->next, ACQ);
	if (next) {
		q->tail = next;
		return tail;
	}
	return NULL;
}
static inline bool act__mpsc_empty(struct act__mpsc *q)
{
	struct act__qnode *h = atomic_load_explicit(&q->head, ACQ);
	return h == &q->stub && q->tail == &q->stub;
}

/* ---- actors -------------------------------------------------------------------
 * word: gen (18, bits 46..63) | closed (bit 32) | count (bits 0..31).
 * count = messages claimed by senders and not yet consumed; its 0 -> 1
 * transition makes the actor runnable (the sender schedules it), the
 * consumer's return to 0 makes it idle. One atomic word, so a sender can
 * never slip a message into a slot reused by a newer generation. */
#define W_COUNT_MASK 0xffffffffull
#define W_CLOSED (1ull << 32)
#define W_GEN_SHIFT (64 - ACT_ID_GEN_BITS)
static_assert(W_GEN_SHIFT > 32, "generation above the closed bit");
static inline uint32_t w_gen(uint64_t w) { return (uint32_t)(w >> W_GEN_SHIFT); }
static inline uint32_t w_count(uint64_t w) { return (uint32_t)(w & W_COUNT_MASK); }

enum { AK_FREE = 0, AK_ACTOR, AK_PORT };
enum { AF_TRAP = 1, AF_EXITING = 2, AF_BIGSTATE = 8, AF_NOTERM = 16 };

struct act_actor {
	_Atomic uint64_t word;
	struct act__mpsc mb;              /* mailbox (messages' _priv.next) */
	struct act__qnode rq_node;        /* inject-queue link */
	const struct act_behaviour *beh;
	void *state;
	struct act_msg *links;            /* dormant EXIT_LINK msgs to peers */
	struct act_msg *monitors;         /* dormant DOWN msgs to watchers */
	struct act_msg *pending;          /* monitor + call records (ours) */
	act_id id;
	_Atomic uint8_t home;             /* worker that ran it last */
	_Atomic uint8_t named;            /* registry entry exists */
	uint8_t kind;
	uint8_t flags;
	int32_t exit_reason;
	union {
		uint64_t inline_state[ACT_STATE_INLINE / 8];
		_Atomic uint32_t port_seq;
	};
} __attribute__((aligned(64)));
static_assert(sizeof(struct act_actor) <= 160, "actor slot stays small");

/* Signal types (act_msg._sys). */
enum {
	SYS_NONE = 0,
	SYS_EXIT_LINK,   /* a linked actor exited (from, _reason) */
	SYS_EXIT_SIGNAL, /* act_exit_signal */
	SYS_LINK,        /* peer asks to link: msg becomes our dormant EXIT_LINK */
	SYS_UNLINK,
	SYS_MONITOR,     /* msg becomes our dormant DOWN to the watcher */
	SYS_DEMONITOR,   /* ref */
	SYS_DOWN,        /* monitored actor exited (ref, _reason) */
	SYS_CALL_TIMEOUT,/* ref */
	SYS_REC_MON,     /* record in pending: we monitor `to` with `ref` */
	SYS_REC_CALL,    /* record in pending: call `ref`, timer in aux */
	SYS_SUP,         /* supervisor control message (sup.c) */
};

static_assert((int)SYS_EXIT_LINK == (int)ACT_SIG_EXIT_LINK &&
	      (int)SYS_EXIT_SIGNAL == (int)ACT_SIG_EXIT &&
	      (int)SYS_LINK == (int)ACT_SIG_LINK &&
	      (int)SYS_UNLINK == (int)ACT_SIG_UNLINK &&
	      (int)SYS_MONITOR == (int)ACT_SIG_MONITOR &&
	      (int)SYS_DEMONITOR == (int)ACT_SIG_DEMONITOR &&
	      (int)SYS_DOWN == (int)ACT_SIG_DOWN,
	      "public remote signal values (zbmd/actors.h)");

/* Message private state. */
enum { MS_FREE = 0, MS_OWNED, MS_QUEUED, MS_HANDLING, MS_TIMER };

/* ---- workers ------------------------------------------------------------------ */
#define RQ_CAP 256u
struct act_timer_ent {
	uint64_t deadline;
	struct act_msg *m;
};

struct act_worker {
	/* run queue: SPMC ring, owner pushes at tail, owner+thieves take at head */
	_Atomic uint32_t rq_head ZB_ALIGNED_CL;
	_Atomic uint32_t rq_tail;
	_Atomic(struct act_actor *) rq[RQ_CAP];
	struct act__mpsc inject ZB_ALIGNED_CL; /* actors made runnable elsewhere */
	struct act__mpsc timer_inbox;          /* send_after from other threads */
	_Atomic uint32_t tcancel;              /* timers of our heap cancelled elsewhere */
	_Atomic uint32_t parked ZB_ALIGNED_CL; /* futex word */
	/* owner-only below */
	struct act_actor *lifo ZB_ALIGNED_CL;
	uint32_t lifo_spent;
	uint32_t extra;                     /* act_consume in this run */
	struct act_runtime *rt;
	uint32_t ticks;
	uint32_t index;
	uint64_t rng;
	struct act_msg *cache[128];         /* message cache (pool.c) */
	_Atomic uint32_t ncache;            /* owner writes; stats read */
	struct act_timer_ent *heap;
	uint32_t nheap, heap_cap;
	pthread_t thread;
	bool has_thread;
	/* statistics (owner writes, readers relaxed) */
	_Atomic uint64_t st_msgs, st_preempt, st_steals, st_parks, st_late,
		st_fired, st_tdrop, st_sends, st_full, st_stale;
};

struct act_name {
	char name[ACT_NAME_MAX + 1];
	act_id id;
};

struct act_runtime {
	struct act_params p;
	struct act_actor *slots;
	size_t slots_bytes;
	_Atomic uint32_t slot_bump;          /* never-used slots start here */
	/* Released slots: a bounded MPMC FIFO (Vyukov) of slot_cap cells; see
	 * runtime.c. FIFO, not LIFO: reuse goes round every free slot. */
	_Atomic uint64_t *slot_ring;
	uint32_t slot_cap;                   /* power of two >= max_actors */
	_Atomic uint32_t slot_enq;
	_Atomic uint32_t slot_deq;
	_Atomic uint32_t live;
	uint64_t gen_seed;                   /* first generations (runtime.c) */
	struct act_msg *msgs;
	_Atomic uint64_t msg_free;           /* Treiber head of chains */
	_Atomic uint32_t msg_free_n;
	struct act_worker *workers;
	uint32_t nworkers;
	_Atomic uint32_t rr;                 /* round-robin home */
	_Atomic uint32_t nparked;
	_Atomic bool stop;
	bool threads;
	_Atomic uint64_t ref_seq;
	act_router_fn router;
	void *router_ctx;
	pthread_mutex_t names_lock;
	struct act_name *names;
	_Atomic uint64_t ext_sends, ext_full, ext_stale; /* non-worker senders */
	_Atomic uint64_t restarts;          /* supervisor child restarts */
	size_t footprint;
};

/* Thread-local view: which runtime/worker/actor this thread is running.
 * `handling`: the message the running handler was given, while the runtime
 * still owns the freeing of it. Whatever moves it (a send, a timer, the
 * router, act_msg_take, act_msg_free) clears it here, on the handler's own
 * thread, so handle_user never has to read the message again once the
 * handler returns: after a forward another worker may already be handling
 * it, or have freed it. */
struct act__tls {
	struct act_runtime *rt;
	struct act_worker *w;
	struct act_actor *cur;
	struct act_msg *handling;
};
extern __thread struct act__tls act__tls;

/* m left the running handler's hands (see act__tls.handling). Compares
 * pointers only: never reads m. */
static inline void act__msg_moved(struct act_msg *m)
{
	if (ZB_UNLIKELY(act__tls.handling == m))
		act__tls.handling = NULL;
}

static inline void act__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

static inline struct act_worker *act__my_worker(struct act_runtime *rt)
{
	return act__tls.rt == rt ? act__tls.w : NULL;
}
/* The slot `id` may name, or NULL. Generation 0 names no actor (zbmd/
 * actors.h): a never-used slot's word is 0 (generation 0, not closed), so
 * without this check such an id passed every liveness test and reached an
 * uninitialised mailbox. */
static inline struct act_actor *act__slot(struct act_runtime *rt, act_id id)
{
	uint32_t s = act_id_slot(id);
	if (ZB_UNLIKELY(act_id_gen(id) == 0))
		return NULL;
	return s < rt->p.max_actors ? &rt->slots[s] : NULL;
}
static inline uint32_t act__msg_index(struct act_runtime *rt, struct act_msg *m)
{
	return (uint32_t)(m - rt->msgs);
}
static inline struct act_msg *act__msg_of(struct act__qnode *n)
{
	return (struct act_msg *)((char *)n - offsetof(struct act_msg, _priv.next));
}
static inline struct act__qnode *act__qn(struct act_msg *m)
{
	return (struct act__qnode *)&m->_priv.next;
}
/* owner-only singly linked lists through _priv.next */
static inline struct act_msg *lnext(struct act_msg *m)
{
	return atomic_load_explicit(&m->_priv.next, RLX);
}
static inline void lset(struct act_msg *m, struct act_msg *n)
{
	atomic_store_explicit(&m->_priv.next, n, RLX);
}

/* A tag an application may send: its own (<= ACT_TAG_USER_MAX), or
 * ACT_TAG_UNDELIVERED, which the remote router posts through act_send. The
 * other reserved tags are the runtime's (EXIT, DOWN, TIMEOUT, the
 * supervisor's): a forged ACT_TAG_EXIT stopped a supervisor. */
static inline bool act__tag_sendable(uint32_t tag)
{
	return tag <= ACT_TAG_USER_MAX || tag == ACT_TAG_UNDELIVERED;
}

/* pool.c */
int act__pool_init(struct act_runtime *rt);
struct act_msg *act__msg_get(struct act_runtime *rt);
void act__msg_put(struct act_runtime *rt, struct act_msg *m);
void act__cache_flush(struct act_runtime *rt, struct act_worker *w);

/* sched.c */
void act__make_runnable(struct act_runtime *rt, struct act_actor *a);
int act__sched_init(struct act_runtime *rt);
void act__sched_fini(struct act_runtime *rt);
void act__wake_worker(struct act_worker *w);

/* send.c */
/* Claims a mailbox place and enqueues. sys: ignore capacity. */
int act__deliver(struct act_runtime *rt, act_id to, struct act_msg *m, bool sys);
void act__dispatch(struct act_runtime *rt, struct act_actor *a, struct act_msg *m);
void act__terminate(struct act_runtime *rt, struct act_actor *a, uint32_t consumed);
/* Wakes an act_call caller sleeping on its port's sequence word; touches
 * only the futex address (the port may be released already). */
/* An act_call port's futex word: senders add ACT_PORT_SEQ_STEP before their
 * push; the caller sets ACT_PORT_SLEEPING before it sleeps. `before` is the
 * word as the sender's add found it: the futex is woken (a syscall) only when
 * the caller had gone to sleep, so a reply that finds its caller still
 * polling costs the sender (an lcore) no syscall. */
#define ACT_PORT_SLEEPING 1u
#define ACT_PORT_SEQ_STEP 2u
void act__port_wake(_Atomic uint32_t *seq, uint32_t before);
uint64_t act__new_ref(struct act_runtime *rt);

/* timer.c */
void act__timers_run(struct act_runtime *rt, struct act_worker *w, uint64_t now);
uint64_t act__timers_next(struct act_worker *w);

/* registry.c */
void act__unregister_id(struct act_runtime *rt, act_id id);

/* sup.c */
void act__sup_destroy(struct act_runtime *rt, struct act_actor *a);

/* runtime.c */
void act__slot_release(struct act_runtime *rt, struct act_actor *a);
int act__slot_acquire(struct act_runtime *rt, uint8_t kind, struct act_actor **out);

static inline void act__stat(struct act_runtime *rt, _Atomic uint64_t *wf,
			     _Atomic uint64_t *ext)
{
	(void)rt;
	if (wf)
		atomic_store_explicit(wf, atomic_load_explicit(wf, RLX) + 1, RLX);
	else
		atomic_fetch_add_explicit(ext, 1, RLX);
}

#endif
