/* actors/runtime.c — runtime creation, actor slots, spawn, actor context. */
#include "internal.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

__thread struct act__tls act__tls;
#if defined(__SANITIZE_THREAD__)
__thread _Atomic uint32_t act__fence_word;
#endif

void act_params_default(struct act_params *p)
{
	ZB_ASSERT(p != NULL);
	memset(p, 0, sizeof(*p));
	p->node = 1;
	p->max_actors = 65536;
	p->mailbox_capacity = 256;
	p->reductions = 2000;
	p->workers = 2;
	p->message_pool = 65536;
	p->timers = 4096;
	p->max_names = 1024;
	p->pin = true;
	p->timestamps = false;
	p->call_spin_ns = 20000;
}

static int params_check(const struct act_params *p)
{
	if (!p->max_actors || p->max_actors > (1u << ACT_ID_SLOT_BITS) || !p->mailbox_capacity ||
	    p->mailbox_capacity > (1u << 30) || !p->reductions || !p->workers ||
	    p->workers > 256 || !p->message_pool || p->message_pool > (1u << 30) ||
	    !p->timers || !p->max_names)
		return -EINVAL;
	return 0;
}

static uint32_t slot_ring_cap(uint32_t max_actors)
{
	uint32_t c = 1;
	while (c < max_actors)
		c <<= 1;
	return c;
}

static void *big_alloc(size_t bytes)
{
	/* Zeroed pages on demand: untouched slots cost no memory. */
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

/* The seed of the slots' first generations: a new one for every runtime,
 * so that a restarted node's ids differ from its previous incarnation's
 * (see slot_gen0). getrandom at init only; the clock and the pid if it
 * fails (no entropy yet at early boot, a seccomp filter). */
static uint64_t gen_seed_new(const void *salt)
{
	uint64_t s = 0;
	if (getrandom(&s, sizeof(s), GRND_NONBLOCK) != (ssize_t)sizeof(s))
		s = zb_now_ns() ^ (uint64_t)getpid() << 40 ^ (uint64_t)(uintptr_t)salt;
	return s;
}

int act_runtime_create(const struct act_params *p, struct act_runtime **out)
{
	struct act_runtime *rt;
	int rc;
	ZB_ASSERT(p != NULL && out != NULL);
	*out = NULL;
	if ((rc = params_check(p)))
		return rc;
	rt = calloc(1, sizeof(*rt));
	if (!rt)
		return -ENOMEM;
	rt->p = *p;
	rt->nworkers = p->workers;
	rt->gen_seed = gen_seed_new(rt);
	rc = -ENOMEM;
	rt->slots_bytes = (size_t)p->max_actors * sizeof(struct act_actor);
	rt->slots = big_alloc(rt->slots_bytes);
	if (!rt->slots)
		goto fail_rt;
	rt->slot_cap = slot_ring_cap(p->max_actors);
	rt->slot_ring = big_alloc((size_t)rt->slot_cap * sizeof(uint64_t));
	if (!rt->slot_ring)
		goto fail_slots;
	rt->msgs = big_alloc((size_t)p->message_pool * sizeof(struct act_msg));
	if (!rt->msgs)
		goto fail_next;
	rt->names = calloc(p->max_names, sizeof(*rt->names));
	if (!rt->names)
		goto fail_msgs;
	if ((rc = act__pool_init(rt)))
		goto fail_names;
	if ((rc = act__sched_init(rt)))
		goto fail_names;
	pthread_mutex_init(&rt->names_lock, NULL);
	rt->footprint = rt->slots_bytes + (size_t)rt->slot_cap * 8 +
			(size_t)p->message_pool * sizeof(struct act_msg) +
			(size_t)p->max_names * sizeof(struct act_name) +
			(size_t)p->workers * (sizeof(struct act_worker) +
					      p->timers * sizeof(struct act_timer_ent));
	*out = rt;
	return 0;
fail_names:
	free(rt->names);
fail_msgs:
	munmap(rt->msgs, (size_t)p->message_pool * sizeof(struct act_msg));
fail_next:
	munmap(rt->slot_ring, (size_t)rt->slot_cap * sizeof(uint64_t));
fail_slots:
	munmap(rt->slots, rt->slots_bytes);
fail_rt:
	free(rt);
	return rc;
}

void act_runtime_destroy(struct act_runtime *rt)
{
	if (!rt)
		return;
	act_stop_threads(rt);
	/* Release buffer references still held by messages anywhere. */
	for (uint32_t i = 0; i < rt->p.message_pool; i++) {
		struct act_msg *m = &rt->msgs[i];
		if (m->_priv.state != MS_FREE && m->kind == ACT_PL_BUF &&
		    m->u.buf.buf) {
			act_buf_unref(m->u.buf.buf);
			m->u.buf.buf = NULL;
		}
	}
	uint32_t used = atomic_load(&rt->slot_bump);
	for (uint32_t i = 0; i < used && i < rt->p.max_actors; i++) {
		struct act_actor *a = &rt->slots[i];
		if (a->kind != AK_ACTOR)
			continue;
		if (a->beh == &act_sup_behaviour)
			act__sup_destroy(rt, a); /* its own allocations */
		if (a->flags & AF_BIGSTATE)
			free(a->state);
	}
	act__sched_fini(rt);
	pthread_mutex_destroy(&rt->names_lock);
	free(rt->names);
	munmap(rt->msgs, (size_t)rt->p.message_pool * sizeof(struct act_msg));
	munmap(rt->slot_ring, (size_t)rt->slot_cap * sizeof(uint64_t));
	munmap(rt->slots, rt->slots_bytes);
	free(rt);
}

size_t act_runtime_footprint(const struct act_runtime *rt)
{
	ZB_ASSERT(rt != NULL);
	return rt->footprint;
}

/* ---- slots: bump allocation, then a FIFO of released slots -----------------
 *
 * A slot's generation advances on each reuse and has ACT_ID_GEN_BITS bits,
 * so an old id could name a new actor once its slot has been reused 2^18 - 1
 * times. A LIFO free list reused the same slot on every spawn/exit cycle
 * (a wrap within milliseconds); here never-used slots go first, then
 * released ones in release order, so a slot comes back only after every
 * other free slot has.
 *
 * The FIFO is Vyukov's bounded MPMC queue over slot_cap cells (a power of
 * two >= max_actors, so it never fills). A cell holds (seq - cell index) in
 * its upper half, so the zero pages of a fresh mapping read seq = index,
 * and the slot index in its lower half. A taker that finds the next cell
 * not yet published (its releaser between the position CAS and the store)
 * sees it empty; only when every slot is in use does that turn into a
 * spurious -ENOBUFS. */

static uint32_t cell_seq(uint64_t v, uint32_t i) { return (uint32_t)(v >> 32) + i; }
static uint64_t cell_make(uint32_t seq, uint32_t i, uint32_t idx)
{
	return (uint64_t)(uint32_t)(seq - i) << 32 | idx;
}

static void slot_ring_put(struct act_runtime *rt, uint32_t idx)
{
	uint32_t mask = rt->slot_cap - 1;
	uint32_t pos = atomic_load_explicit(&rt->slot_enq, RLX);
	for (;;) {
		_Atomic uint64_t *c = &rt->slot_ring[pos & mask];
		uint64_t v = atomic_load_explicit(c, ACQ);
		int32_t dif = (int32_t)(cell_seq(v, pos & mask) - pos);
		ZB_ASSERT(dif >= 0); /* never full: at most max_actors free */
		if (dif == 0) {
			if (atomic_compare_exchange_weak_explicit(&rt->slot_enq, &pos,
								  pos + 1, RLX, RLX)) {
				atomic_store_explicit(c, cell_make(pos + 1, pos & mask, idx),
						      REL);
				return;
			}
		} else {
			pos = atomic_load_explicit(&rt->slot_enq, RLX);
		}
	}
}

/* A released slot's index, or -1 when there is none (yet). */
static int64_t slot_ring_take(struct act_runtime *rt)
{
	uint32_t mask = rt->slot_cap - 1;
	uint32_t pos = atomic_load_explicit(&rt->slot_deq, RLX);
	for (;;) {
		_Atomic uint64_t *c = &rt->slot_ring[pos & mask];
		uint64_t v = atomic_load_explicit(c, ACQ);
		int32_t dif = (int32_t)(cell_seq(v, pos & mask) - (pos + 1));
		if (dif < 0)
			return -1;
		if (dif == 0) {
			if (atomic_compare_exchange_weak_explicit(&rt->slot_deq, &pos,
								  pos + 1, RLX, RLX)) {
				atomic_store_explicit(c, cell_make(pos + rt->slot_cap,
								   pos & mask, 0), REL);
				return (uint32_t)v;
			}
		} else {
			pos = atomic_load_explicit(&rt->slot_deq, RLX);
		}
	}
}

/* The generation a never-used slot starts at: a hash of the runtime's seed
 * and the slot, in 1 .. 2^18 - 1 (0 names no actor). An id carries no
 * incarnation of its node, and a fresh process hands out slots in the same
 * order: with every slot starting at generation 1, a restarted node's
 * actors got exactly the ids of the previous incarnation's, and a message,
 * call, link or monitor meant for a gone actor reached the new one. Now an
 * old id names a new incarnation's actor only if that slot's generations
 * meet (probability about (uses of the slot) / (2^18 - 1); Erlang's pids
 * carry the node's creation instead). */
static uint32_t slot_gen0(const struct act_runtime *rt, uint32_t idx)
{
	uint64_t x = rt->gen_seed ^ (uint64_t)idx * 0x9e3779b97f4a7c15ull;
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return (uint32_t)(x % ACT_ID_GEN_MASK) + 1;
}

int act__slot_acquire(struct act_runtime *rt, uint8_t kind, struct act_actor **out)
{
	int64_t got = -1;
	if (atomic_load_explicit(&rt->slot_bump, RLX) < rt->p.max_actors) {
		uint32_t b = atomic_fetch_add_explicit(&rt->slot_bump, 1, RLX);
		if (b < rt->p.max_actors)
			got = b;
		else
			atomic_fetch_sub_explicit(&rt->slot_bump, 1, RLX);
	}
	if (got < 0)
		got = slot_ring_take(rt);
	if (got < 0)
		return -ENOBUFS;
	uint32_t idx = (uint32_t)got;
	ZB_ASSERT(idx < rt->p.max_actors);
	struct act_actor *a = &rt->slots[idx];
	uint64_t w = atomic_load_explicit(&a->word, ACQ);
	uint32_t gen = w_gen(w) ? w_gen(w) : slot_gen0(rt, idx);
	ZB_DASSERT(gen != 0 && gen <= ACT_ID_GEN_MASK);
	ZB_DASSERT(w_count(w) == 0);
	act__mpsc_init(&a->mb);
	a->beh = NULL;
	a->state = a->inline_state;
	memset(a->inline_state, 0, sizeof(a->inline_state));
	a->links = a->monitors = a->pending = NULL;
	a->id = act_id_make(rt->p.node, idx, gen);
	a->kind = kind;
	a->flags = 0;
	atomic_store_explicit(&a->named, 0, RLX);
	a->exit_reason = 0;
	/* Opened later by the spawner (count held at 1 while init runs). */
	atomic_store_explicit(&a->word, (uint64_t)gen << W_GEN_SHIFT | W_CLOSED, REL);
	atomic_fetch_add_explicit(&rt->live, 1, RLX);
	*out = a;
	return 0;
}

/* Slot back to the FIFO with the next generation. The mailbox must be
 * closed and drained. */
void act__slot_release(struct act_runtime *rt, struct act_actor *a)
{
	uint32_t idx = (uint32_t)(a - rt->slots);
	uint32_t gen = (act_id_gen(a->id) + 1) & ACT_ID_GEN_MASK;
	if (!gen)
		gen = 1;
	ZB_ASSERT(idx < rt->p.max_actors);
	if (a->flags & AF_BIGSTATE)
		free(a->state);
	a->flags = 0;
	a->kind = AK_FREE;
	atomic_store_explicit(&a->word, (uint64_t)gen << W_GEN_SHIFT | W_CLOSED, REL);
	slot_ring_put(rt, idx);
	atomic_fetch_sub_explicit(&rt->live, 1, RLX);
}

bool act_alive(struct act_runtime *rt, act_id id)
{
	struct act_actor *a = act__slot(rt, id);
	if (!a || act_id_node(id) != rt->p.node)
		return false;
	uint64_t w = atomic_load_explicit(&a->word, ACQ);
	return w_gen(w) == act_id_gen(id) && !(w & W_CLOSED);
}

/* ---- spawn ------------------------------------------------------------------ */

int act_spawn(struct act_runtime *rt, const struct act_behaviour *beh,
	      void *arg, act_id *out)
{
	return act_spawn_opt(rt, beh, arg, NULL, out);
}

static void link_pair_direct(struct act_actor *a, struct act_actor *b,
			     struct act_msg *ma, struct act_msg *mb)
{
	/* Neither side runs concurrently (b is not published yet), so both link
	 * lists can be written here. ma: a's notice to b; mb: b's notice to a. */
	ma->_sys = SYS_EXIT_LINK; ma->from = a->id; ma->to = b->id;
	mb->_sys = SYS_EXIT_LINK; mb->from = b->id; mb->to = a->id;
	lset(ma, a->links); a->links = ma;
	lset(mb, b->links); b->links = mb;
}

/* Takes link notice m out of a link list (owner only; init may have pushed
 * others in front of it). False when it is not there: the child's init
 * unlinked itself, and m went to the parent as the UNLINK signal. */
static bool unlink_direct(struct act_msg **head, struct act_msg *m)
{
	struct act_msg **pp = head;
	while (*pp && *pp != m)
		pp = (struct act_msg **)&(*pp)->_priv.next;
	if (!*pp)
		return false;
	*pp = lnext(m);
	lset(m, NULL);
	return true;
}

int act_spawn_opt(struct act_runtime *rt, const struct act_behaviour *beh,
		  void *arg, const struct act_spawn_opts *o, act_id *out)
{
	struct act_actor *a, *parent = NULL;
	struct act_msg *ma = NULL, *mb = NULL;
	int rc;
	ZB_ASSERT(rt != NULL && beh != NULL && beh->handle != NULL);
	if (o && o->link) {
		if (act__tls.rt != rt || !act__tls.cur)
			return -EPERM;
		parent = act__tls.cur;
		ma = act_msg_alloc(rt);
		mb = act_msg_alloc(rt);
		if (!ma || !mb) {
			rc = -ENOBUFS;
			goto fail_msgs;
		}
	}
	if ((rc = act__slot_acquire(rt, AK_ACTOR, &a)))
		goto fail_msgs;
	a->beh = beh;
	if (beh->state_size > ACT_STATE_INLINE) {
		a->state = calloc(1, beh->state_size);
		if (!a->state) {
			a->state = a->inline_state;
			rc = -ENOMEM;
			goto fail_slot;
		}
		a->flags |= AF_BIGSTATE;
	}
	if (o && o->trap_exit)
		a->flags |= AF_TRAP;
	struct act_worker *mw = act__my_worker(rt);
	uint32_t home;
	if (o && o->home > 0 && (uint32_t)o->home <= rt->nworkers)
		home = (uint32_t)o->home - 1;
	else if (mw)
		home = mw->index;
	else
		home = atomic_fetch_add_explicit(&rt->rr, 1, RLX) % rt->nworkers;
	atomic_store_explicit(&a->home, (uint8_t)home, RLX);
	if (parent)
		link_pair_direct(parent, a, ma, mb);
	/* Open the mailbox holding one phantom count: senders reached from init
	 * queue messages but do not schedule the actor until init is done. */
	uint64_t gen = act_id_gen(a->id);
	atomic_store_explicit(&a->word, gen << W_GEN_SHIFT | 1, REL);
	if (beh->init) {
		struct act__tls saved = act__tls;
		act__tls.rt = rt;
		act__tls.cur = a;
		if (saved.rt != rt)
			act__tls.w = NULL;
		rc = beh->init((struct act_ctx *)a, arg);
		act__tls = saved;
		if (rc) {
			/* Did not start: links are undone silently, as OTP's
			 * start_link returning {error, R} to the caller. */
			if (rc > 0)
				rc = -EINVAL;
			bool own_mb = false;
			if (parent) {
				/* Both halves: the child's (mb) left in place sent
				 * the parent an EXIT for a child it never had. */
				unlink_direct(&parent->links, ma);
				own_mb = unlink_direct(&a->links, mb);
			}
			a->flags |= AF_EXITING | AF_NOTERM;
			a->exit_reason = rc;
			act__terminate(rt, a, 1);
			if (parent)
				act_msg_free(rt, ma);
			if (own_mb)
				act_msg_free(rt, mb);
			return rc;
		}
	}
	act_id id = a->id;
	uint64_t left = atomic_fetch_sub_explicit(&a->word, 1, ACR) - 1;
	if (w_count(left) > 0)
		act__make_runnable(rt, a);
	if (out)
		*out = id;
	return 0;
fail_slot:
	act__slot_release(rt, a);
fail_msgs:
	if (ma)
		act_msg_free(rt, ma);
	if (mb)
		act_msg_free(rt, mb);
	return rc;
}

/* ---- actor context ------------------------------------------------------------ */

act_id act_self(const struct act_ctx *ctx)
{
	ZB_DASSERT(ctx != NULL);
	return ((const struct act_actor *)ctx)->id;
}

void *act_state(struct act_ctx *ctx)
{
	ZB_DASSERT(ctx != NULL);
	return ((struct act_actor *)ctx)->state;
}

struct act_runtime *act_ctx_runtime(const struct act_ctx *ctx)
{
	ZB_ASSERT(ctx != NULL);
	ZB_ASSERT((const struct act_actor *)ctx == act__tls.cur);
	return act__tls.rt;
}

void act_exit(struct act_ctx *ctx, int reason)
{
	struct act_actor *a = (struct act_actor *)ctx;
	ZB_ASSERT(a != NULL && a == act__tls.cur);
	if (!(a->flags & AF_EXITING)) {
		a->flags |= AF_EXITING;
		a->exit_reason = reason == ACT_KILL ? ACT_KILLED : reason;
	}
}

void act_trap_exit(struct act_ctx *ctx, bool on)
{
	struct act_actor *a = (struct act_actor *)ctx;
	ZB_ASSERT(a != NULL && a == act__tls.cur);
	if (on)
		a->flags |= AF_TRAP;
	else
		a->flags &= (uint8_t)~AF_TRAP;
}

void act_msg_take(struct act_ctx *ctx, struct act_msg *m)
{
	ZB_ASSERT(ctx != NULL && m != NULL);
	ZB_ASSERT(m->_priv.state == MS_HANDLING);
	m->_priv.state = MS_OWNED;
	act__msg_moved(m);
}

const char *act_reason_name(int reason)
{
	switch (reason) {
	case ACT_NORMAL: return "normal";
	case ACT_SHUTDOWN: return "shutdown";
	case ACT_KILLED: return "killed";
	case ACT_NOPROC: return "noproc";
	case ACT_KILL: return "kill";
	default: return reason < 0 ? zb_strerror(reason) : "unknown";
	}
}

void act_get_stats(struct act_runtime *rt, struct act_stats *out)
{
	ZB_ASSERT(rt != NULL && out != NULL);
	memset(out, 0, sizeof(*out));
	out->sends = atomic_load_explicit(&rt->ext_sends, RLX);
	out->send_full = atomic_load_explicit(&rt->ext_full, RLX);
	out->send_stale = atomic_load_explicit(&rt->ext_stale, RLX);
	uint32_t cached = 0;
	for (uint32_t i = 0; i < rt->nworkers; i++) {
		struct act_worker *w = &rt->workers[i];
		out->messages += atomic_load_explicit(&w->st_msgs, RLX);
		out->preemptions += atomic_load_explicit(&w->st_preempt, RLX);
		out->steals += atomic_load_explicit(&w->st_steals, RLX);
		out->parks += atomic_load_explicit(&w->st_parks, RLX);
		out->late_replies += atomic_load_explicit(&w->st_late, RLX);
		out->timers_fired += atomic_load_explicit(&w->st_fired, RLX);
		out->timers_dropped += atomic_load_explicit(&w->st_tdrop, RLX);
		out->sends += atomic_load_explicit(&w->st_sends, RLX);
		out->send_full += atomic_load_explicit(&w->st_full, RLX);
		out->send_stale += atomic_load_explicit(&w->st_stale, RLX);
		cached += atomic_load_explicit(&w->ncache, RLX);
	}
	out->actors_live = atomic_load_explicit(&rt->live, RLX);
	out->msgs_free = atomic_load_explicit(&rt->msg_free_n, RLX) + cached;
	out->msgs_in_use = out->msgs_free < rt->p.message_pool
			   ? rt->p.message_pool - out->msgs_free : 0;
	out->restarts = atomic_load_explicit(&rt->restarts, RLX);
}
