/* actors/sup.c — supervisors (OTP supervisor semantics).
 *
 * A supervisor is an actor that traps exits and links to its children.
 * When a child it must restart dies:
 *   1. intensity: the restart is recorded; more than max_restarts within
 *      window_ns escalates: every child is stopped (reverse start order) and
 *      the supervisor exits `shutdown`, so its own parent decides;
 *   2. the strategy picks the restart set: one_for_one / simple_one_for_one
 *      the child alone; one_for_all every child; rest_for_one the child and
 *      those started after it;
 *   3. the other members of the set still running are stopped one at a time
 *      in reverse start order (`shutdown`, then `kill` after shutdown_ns),
 *      each stop waiting for that child's EXIT;
 *   4. after the backoff delay (k-th restart in the window: none 0, linear
 *      base*k, exponential base*2^(k-1), capped) the set starts again in
 *      start order.
 * Nothing here blocks: every wait is a state of this actor, ended by an EXIT
 * message or a timer. Supervisor memory is allocated at start (control path). */
#include "internal.h"

#include <stdlib.h>

enum { SUP_RESTART = 0xFFFF1001u, SUP_KILL, SUP_START_CHILD, SUP_RETRY };
enum { PH_IDLE, PH_STOPPING, PH_BACKOFF, PH_SHUTTING };

struct sup_child {
	_Atomic act_id id;       /* NONE when not running */
	void *arg;
	uint64_t kill_tref;
	int dead_reason;         /* exit reason while `dead` (handled later) */
	uint8_t used, stopping, want, dead;
};

struct sup {
	const struct act_sup_spec *spec;
	struct sup_child *ch;
	uint32_t n, cap;
	uint64_t *stamps;        /* restart times, ring of max_restarts + 1 */
	uint32_t nstamps, stamp_pos;
	uint32_t nwin;           /* the newest nwin stamps are in the window */
	uint32_t *stopq;
	uint32_t nstop, stop_pos;
	int phase;
	int shut_reason;
	act_id parent;           /* linked starter, if any */
	uint64_t delay_ns;
	/* Allocated at start so that a full message pool cannot wedge us: the
	 * backoff's SUP_RESTART (reused: at most one is in flight, NULL then)
	 * and two spares for the stop signals (shutdown, kill), refilled
	 * whenever the pool allows. */
	struct act_msg *restart_msg;
	struct act_msg *spare[2];
};

/* The supervisor actor's (inline) state. `strategy` is a copy that
 * act_sup_start_child reads from the slot to refuse a supervisor that is
 * not simple_one_for_one without touching memory the supervisor frees. */
struct sup_state {
	struct sup *s;
	uint32_t strategy;
};
static_assert(sizeof(struct sup_state) <= ACT_STATE_INLINE, "inline state");

static struct sup *sup_of(struct act_ctx *ctx)
{
	return ((struct sup_state *)act_state(ctx))->s;
}

static const struct act_child_spec *cspec(struct sup *s, uint32_t i)
{
	return s->spec->strategy == ACT_SIMPLE_ONE_FOR_ONE ? &s->spec->children[0]
							   : &s->spec->children[i];
}

static int start_child(struct act_ctx *ctx, struct sup *s, uint32_t i)
{
	struct act_spawn_opts o = {.link = true};
	act_id id;
	struct act_runtime *rt = act_ctx_runtime(ctx);
	const struct act_child_spec *c = cspec(s, i);
	ZB_ASSERT(i < s->n);
	int rc = act_spawn_opt(rt, c->beh, s->ch[i].arg, &o, &id);
	atomic_store_explicit(&s->ch[i].id, rc ? ACT_ID_NONE : id, RLX);
	s->ch[i].dead = rc != 0;
	s->ch[i].dead_reason = rc;
	return rc;
}

static bool running(struct sup *s, uint32_t i)
{
	return atomic_load_explicit(&s->ch[i].id, RLX) != ACT_ID_NONE;
}

/* A message for the supervisor's own use: the pool's, else a spare. */
static struct act_msg *sup_alloc(struct act_runtime *rt, struct sup *s)
{
	struct act_msg *m = act_msg_alloc(rt);
	for (int k = 0; !m && k < 2; k++) {
		m = s->spare[k];
		s->spare[k] = NULL;
	}
	return m;
}

/* A message back into a free spare place, else to the pool. */
static void sup_keep(struct act_runtime *rt, struct sup *s, struct act_msg *m)
{
	for (int k = 0; k < 2; k++)
		if (!s->spare[k]) {
			s->spare[k] = m;
			return;
		}
	act_msg_free(rt, m);
}

/* Exit signal to child `id` (always local: we spawned it), with a spare
 * message when the pool is empty. 0 or the error (ZB_ERR_STALE_ID: gone). */
static int sup_signal(struct act_ctx *ctx, struct sup *s, act_id id, int reason)
{
	struct act_runtime *rt = act_ctx_runtime(ctx);
	struct act_msg *m = sup_alloc(rt, s);
	if (!m)
		return -ENOBUFS;
	m->_sys = SYS_EXIT_SIGNAL;
	m->_reason = reason;
	m->kind = ACT_PL_NONE;
	m->from = act_self(ctx);
	int rc = act__deliver(rt, id, m, true);
	if (rc)
		sup_keep(rt, s, m);
	return rc;
}

/* Arms a SUP_KILL / SUP_RESTART timer to ourselves. 0, or -ENOBUFS (no
 * message, or this worker's timer heap is full): the caller acts at once. */
static int sup_timer(struct act_ctx *ctx, struct sup *s, uint32_t tag, uint64_t ref,
		     uint64_t delay_ns, uint64_t *tref)
{
	struct act_runtime *rt = act_ctx_runtime(ctx);
	struct act_msg *m;
	if (tag == SUP_RESTART && s->restart_msg) {
		m = s->restart_msg;
		s->restart_msg = NULL;
	} else {
		m = sup_alloc(rt, s);
	}
	if (!m)
		return -ENOBUFS;
	m->_sys = SYS_SUP;
	m->tag = tag;
	m->ref = ref;
	m->kind = ACT_PL_NONE;
	m->from = act_self(ctx);
	int rc = act_send_after(rt, act_self(ctx), delay_ns, m, tref);
	if (rc) {
		if (tag == SUP_RESTART && !s->restart_msg)
			s->restart_msg = m;
		else
			sup_keep(rt, s, m);
	}
	return rc;
}

static void do_restart(struct act_ctx *ctx, struct sup *s);
static void on_failure(struct act_ctx *ctx, struct sup *s, uint32_t i, int reason);

/* Stops the next child of the stop queue, or finishes the phase. */
static void advance(struct act_ctx *ctx, struct sup *s)
{
	while (s->stop_pos < s->nstop) {
		uint32_t j = s->stopq[s->stop_pos];
		if (!running(s, j)) {
			s->stop_pos++;
			continue;
		}
		if (!s->ch[j].stopping) {
			act_id id = atomic_load_explicit(&s->ch[j].id, RLX);
			uint64_t grace = cspec(s, j)->shutdown_ns ? cspec(s, j)->shutdown_ns
								  : 1000000000ull;
			s->ch[j].stopping = 1;
			s->ch[j].kill_tref = 0;
			/* Without a kill timer (heap full, no message) we would wait
			 * for an EXIT that may never come: kill at once instead. */
			if (sup_signal(ctx, s, id, ACT_SHUTDOWN) ||
			    sup_timer(ctx, s, SUP_KILL, id, grace, &s->ch[j].kill_tref))
				sup_signal(ctx, s, id, ACT_KILL);
		}
		return; /* wait for its EXIT */
	}
	if (s->phase == PH_SHUTTING) {
		act_exit(ctx, s->shut_reason);
		return;
	}
	if (s->delay_ns) {
		s->phase = PH_BACKOFF;
		if (sup_timer(ctx, s, SUP_RESTART, 0, s->delay_ns, NULL) == 0)
			return;
		/* timer heap full: restart now rather than never */
	}
	do_restart(ctx, s);
}

static void begin_shutdown(struct act_ctx *ctx, struct sup *s, int reason)
{
	s->phase = PH_SHUTTING;
	s->shut_reason = reason;
	s->nstop = 0;
	s->stop_pos = 0;
	for (uint32_t j = s->n; j-- > 0;)
		if (running(s, j))
			s->stopq[s->nstop++] = j;
	advance(ctx, s);
}

/* Saturating: base * k and base << (k - 1) wrapped for a large base (a
 * base of 2^63 ns gave 0 at k = 2), a short delay instead of the cap. */
static uint64_t backoff(const struct act_sup_spec *sp, uint32_t k)
{
	uint64_t d = 0, base = sp->backoff_base_ns;
	ZB_ASSERT(k >= 1);
	if (sp->backoff == ACT_BACKOFF_LINEAR) {
		d = base > UINT64_MAX / k ? UINT64_MAX : base * k;
	} else if (sp->backoff == ACT_BACKOFF_EXP) {
		uint32_t sh = k - 1 > 30 ? 30 : k - 1;
		d = base > UINT64_MAX >> sh ? UINT64_MAX : base << sh;
	}
	if (sp->backoff_max_ns && d > sp->backoff_max_ns)
		d = sp->backoff_max_ns;
	return d;
}

/* Records a restart; returns the restarts within the window (this one
 * included). The ring holds stamps in time order, so the window is its
 * newest nwin entries: drop the oldest ones that left it. Amortised O(1);
 * scanning the whole ring made each restart O(max_restarts). */
static uint32_t intensity(struct sup *s, uint64_t now)
{
	s->stamps[s->stamp_pos] = now;
	s->stamp_pos = (s->stamp_pos + 1) % s->nstamps;
	if (s->nwin < s->nstamps)
		s->nwin++;
	while (s->nwin > 0) {
		uint32_t oldest = (s->stamp_pos + s->nstamps - s->nwin) % s->nstamps;
		if (now - s->stamps[oldest] <= s->spec->window_ns)
			break;
		s->nwin--;
	}
	ZB_ASSERT(s->nwin >= 1 && s->nwin <= s->nstamps);
	return s->nwin;
}

static void on_failure(struct act_ctx *ctx, struct sup *s, uint32_t i, int reason)
{
	const struct act_child_spec *c = cspec(s, i);
	s->ch[i].dead = 0;
	if (c->restart == ACT_TEMPORARY ||
	    (c->restart == ACT_TRANSIENT &&
	     (reason == ACT_NORMAL || reason == ACT_SHUTDOWN))) {
		if (s->spec->strategy == ACT_SIMPLE_ONE_FOR_ONE)
			s->ch[i].used = 0;
		return;
	}
	uint32_t k = intensity(s, zb_now_ns());
	if (k > s->spec->max_restarts) {
		begin_shutdown(ctx, s, ACT_SHUTDOWN); /* escalate */
		return;
	}
	if (act__tls.rt)
		atomic_fetch_add_explicit(&act__tls.rt->restarts, 1, memory_order_relaxed);
	uint32_t first = i, last = i;
	if (s->spec->strategy == ACT_ONE_FOR_ALL) {
		first = 0;
		last = s->n - 1;
	} else if (s->spec->strategy == ACT_REST_FOR_ONE) {
		last = s->n - 1;
	}
	s->nstop = 0;
	s->stop_pos = 0;
	for (uint32_t j = last + 1; j-- > first;) {
		if (!s->ch[j].used)
			continue;
		/* OTP: a temporary child is never restarted; one the strategy
		 * stops is gone for good (one stopped earlier stays down). */
		s->ch[j].want = j == i || cspec(s, j)->restart != ACT_TEMPORARY;
		if (j != i && running(s, j))
			s->stopq[s->nstop++] = j;
	}
	s->phase = PH_STOPPING;
	s->delay_ns = backoff(s->spec, k);
	advance(ctx, s);
}

/* A restart failed (a child's init returned an error): its failure is
 * handled on a message to ourselves, as OTP's try_again_restart, not by
 * recursion (on_failure -> advance -> do_restart -> on_failure ...: one
 * stack level per restart max_restarts allowed, the worker held for all of
 * them). True when posted; false (no message at all): handle it now. */
static bool retry_later(struct act_ctx *ctx, struct sup *s)
{
	struct act_runtime *rt = act_ctx_runtime(ctx);
	struct act_msg *m = s->restart_msg ? s->restart_msg : sup_alloc(rt, s);
	if (!m)
		return false;
	if (m == s->restart_msg)
		s->restart_msg = NULL;
	m->_sys = SYS_SUP;
	m->tag = SUP_RETRY;
	m->ref = 0;
	m->kind = ACT_PL_NONE;
	m->from = act_self(ctx);
	if (act__deliver(rt, act_self(ctx), m, true) == 0)
		return true;
	if (!s->restart_msg)
		s->restart_msg = m;
	else
		sup_keep(rt, s, m);
	return false;
}

static void handle_dead(struct act_ctx *ctx, struct sup *s);

static void do_restart(struct act_ctx *ctx, struct sup *s)
{
	int failed = -1, frc = 0;
	s->phase = PH_IDLE;
	for (uint32_t j = 0; j < s->n; j++) {
		if (!s->ch[j].want)
			continue;
		s->ch[j].want = 0;
		if (running(s, j))
			continue;
		int rc = start_child(ctx, s, j);
		if (rc && failed < 0) {
			failed = (int)j;
			frc = rc;
		}
	}
	if (failed >= 0 && retry_later(ctx, s))
		return;
	if (failed >= 0) {
		on_failure(ctx, s, (uint32_t)failed, frc);
		return;
	}
	handle_dead(ctx, s);
}

/* Children that died on their own while we were busy, or whose restart
 * failed (start_child marked them dead). */
static void handle_dead(struct act_ctx *ctx, struct sup *s)
{
	for (uint32_t j = 0; j < s->n && s->phase == PH_IDLE; j++)
		if (s->ch[j].used && s->ch[j].dead)
			on_failure(ctx, s, j, s->ch[j].dead_reason);
}

static int find_child(struct sup *s, act_id id)
{
	for (uint32_t j = 0; j < s->n; j++)
		if (s->ch[j].used && id != ACT_ID_NONE &&
		    atomic_load_explicit(&s->ch[j].id, RLX) == id)
			return (int)j;
	return -1;
}

static void on_exit_msg(struct act_ctx *ctx, struct sup *s, act_id from, int reason,
			bool explicit_signal)
{
	struct act_runtime *rt = act_ctx_runtime(ctx);
	int i = find_child(s, from);
	if (i < 0) {
		/* The parent's exit ends us (OTP), and so does an explicit
		 * act_exit_signal (a stop request); other links' exits do not. */
		if ((from == s->parent || explicit_signal) && s->phase != PH_SHUTTING)
			begin_shutdown(ctx, s, reason);
		return;
	}
	struct sup_child *c = &s->ch[i];
	atomic_store_explicit(&c->id, ACT_ID_NONE, RLX);
	if (c->stopping) {
		c->stopping = 0;
		if (c->kill_tref)
			act_cancel_timer(rt, c->kill_tref);
		advance(ctx, s);
		return;
	}
	if (s->phase == PH_SHUTTING)
		return;
	if (s->phase != PH_IDLE) { /* handled when the current cycle ends */
		c->dead = 1;
		c->dead_reason = reason; /* a transient child's normal exit stays one */
		if (c->want == 0 && s->phase == PH_STOPPING)
			advance(ctx, s);
		return;
	}
	on_failure(ctx, s, (uint32_t)i, reason);
}

/* act_sup_start_child's request m: start a child of the template and
 * answer the requesting actor (m->from) with m itself as
 * ACT_TAG_SUP_STARTED: reason 0 and the child's id, or the error. */
static void start_child_req(struct act_ctx *ctx, struct sup *s, struct act_msg *m)
{
	struct act_runtime *rt = act_ctx_runtime(ctx);
	void *arg;
	act_id child = ACT_ID_NONE;
	int rc;
	memcpy(&arg, m->u.bytes, sizeof(arg));
	uint32_t j;
	for (j = 0; j < s->n && s->ch[j].used; j++)
		;
	if (s->spec->strategy != ACT_SIMPLE_ONE_FOR_ONE) {
		rc = -EINVAL;
	} else if (s->phase == PH_SHUTTING) {
		rc = -ESHUTDOWN;
	} else if (j == s->n && s->n == s->cap) {
		rc = -ENOSPC; /* max_children running */
	} else {
		if (j == s->n)
			s->n++;
		s->ch[j].used = 1;
		s->ch[j].arg = arg;
		rc = start_child(ctx, s, j);
		if (rc)
			s->ch[j].used = 0;
		else
			child = atomic_load_explicit(&s->ch[j].id, RLX);
	}
	act_id to = m->from;
	if (to == ACT_ID_NONE || act_id_node(to) != rt->p.node)
		return; /* asked from a thread that is not an actor */
	act_msg_take(ctx, m);
	m->_sys = SYS_NONE;
	m->tag = ACT_TAG_SUP_STARTED;
	m->flags = 0;
	m->ref = 0;
	m->_reason = rc;
	m->from = act_self(ctx);
	m->kind = ACT_PL_INLINE;
	m->len = sizeof(child);
	memcpy(m->u.bytes, &child, sizeof(child));
	if (act__deliver(rt, to, m, false))
		act_msg_free(rt, m); /* the asker is gone or its mailbox full */
}

static int sup_handle(struct act_ctx *ctx, struct act_msg *m)
{
	struct sup *s = sup_of(ctx);
	struct act_runtime *rt = act_ctx_runtime(ctx);
	for (int k = 0; k < 2; k++) /* spares used up while the pool was empty */
		if (!s->spare[k])
			s->spare[k] = act_msg_alloc(rt);
	if (m->tag == ACT_TAG_EXIT) {
		on_exit_msg(ctx, s, m->from, act_msg_reason(m),
			    (m->flags & ACT_MF_SIGNAL) != 0);
		return 0;
	}
	if (m->_sys != SYS_SUP)
		return 0; /* supervisors take no application messages */
	if (m->tag == SUP_RESTART || m->tag == SUP_RETRY) {
		if (!s->restart_msg) { /* ours again, for the next backoff */
			act_msg_take(ctx, m);
			s->restart_msg = m;
		}
		if (m->tag == SUP_RESTART && s->phase == PH_BACKOFF)
			do_restart(ctx, s);
		else if (m->tag == SUP_RETRY && s->phase == PH_IDLE)
			handle_dead(ctx, s); /* else when the current cycle ends */
	} else if (m->tag == SUP_KILL) {
		int i = find_child(s, (act_id)m->ref);
		if (i >= 0 && s->ch[i].stopping)
			sup_signal(ctx, s, (act_id)m->ref, ACT_KILL);
	} else if (m->tag == SUP_START_CHILD) {
		start_child_req(ctx, s, m);
	}
	return 0;
}

static void sup_free(struct act_runtime *rt, struct sup *s)
{
	if (s->restart_msg)
		act_msg_free(rt, s->restart_msg);
	for (int k = 0; k < 2; k++)
		if (s->spare[k])
			act_msg_free(rt, s->spare[k]);
	free(s->ch);
	free(s->stamps);
	free(s->stopq);
	free(s);
}

static int sup_init(struct act_ctx *ctx, void *arg)
{
	const struct act_sup_spec *sp = arg;
	if (!sp || !sp->children || !sp->n_children || sp->max_restarts > 100000 ||
	    (sp->strategy == ACT_SIMPLE_ONE_FOR_ONE && sp->n_children != 1))
		return -EINVAL;
	bool simple = sp->strategy == ACT_SIMPLE_ONE_FOR_ONE;
	struct sup *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->spec = sp;
	s->cap = simple ? (sp->max_children ? sp->max_children : 64) : sp->n_children;
	s->n = simple ? 0 : sp->n_children;
	s->nstamps = sp->max_restarts + 1;
	s->ch = calloc(s->cap, sizeof(*s->ch));
	s->stamps = calloc(s->nstamps, sizeof(*s->stamps));
	s->stopq = calloc(s->cap, sizeof(*s->stopq));
	struct act_runtime *rt = act_ctx_runtime(ctx);
	s->restart_msg = act_msg_alloc(rt);
	s->spare[0] = act_msg_alloc(rt);
	s->spare[1] = act_msg_alloc(rt);
	if (!s->restart_msg || !s->spare[0] || !s->spare[1]) {
		sup_free(rt, s);
		return -ENOBUFS;
	}
	if (!s->ch || !s->stamps || !s->stopq) {
		sup_free(act_ctx_runtime(ctx), s);
		return -ENOMEM;
	}
	struct sup_state *st = act_state(ctx);
	st->s = s;
	st->strategy = (uint32_t)sp->strategy;
	act_trap_exit(ctx, true);
	/* Before any child: the only link now is the one to our starter. */
	struct act_actor *self = (struct act_actor *)ctx;
	s->parent = self->links ? self->links->to : ACT_ID_NONE;
	for (uint32_t i = 0; i < s->n; i++) {
		s->ch[i].used = 1;
		s->ch[i].arg = sp->children[i].arg;
		int rc = start_child(ctx, s, i);
		if (rc) {
			/* Our failed init ends us, and nothing may remain: the
			 * links take the started children down with reason rc,
			 * except those that trap exits, so each is killed too
			 * (reverse start order). OTP's terminate_children
			 * waits shutdown_ns before its kill; an init cannot
			 * wait. The spares make sure of the messages. */
			for (uint32_t j = i; j-- > 0;)
				sup_signal(ctx, s, atomic_load_explicit(&s->ch[j].id, RLX),
					   ACT_KILL);
			sup_free(act_ctx_runtime(ctx), s);
			return rc;
		}
	}
	return 0;
}

static void sup_terminate(struct act_ctx *ctx, int reason)
{
	struct sup *s = sup_of(ctx);
	struct act_runtime *rt = act_ctx_runtime(ctx);
	(void)reason;
	/* Killed (or exiting abnormally) with children left: they go with us
	 * through the links; make sure even trapping ones stop. */
	for (uint32_t j = s->n; j-- > 0;)
		if (running(s, j))
			act_exit_signal(rt, atomic_load_explicit(&s->ch[j].id, RLX),
					ACT_KILL);
	sup_free(act_ctx_runtime(ctx), s);
	((struct sup_state *)act_state(ctx))->s = NULL;
}

/* act_runtime_destroy: a supervisor still alive ends without callbacks;
 * its memory goes here (it leaked: struct sup and its three arrays). */
void act__sup_destroy(struct act_runtime *rt, struct act_actor *a)
{
	ZB_ASSERT(a->beh == &act_sup_behaviour);
	struct sup_state *st = a->state;
	if (st->s)
		sup_free(rt, st->s);
	st->s = NULL;
}

const struct act_behaviour act_sup_behaviour = {
	.name = "supervisor", .state_size = sizeof(struct sup_state),
	.init = sup_init, .handle = sup_handle, .terminate = sup_terminate,
};

int act_sup_start(struct act_runtime *rt, const struct act_sup_spec *spec,
		  act_id *out)
{
	ZB_ASSERT(rt != NULL && spec != NULL);
	if (!spec->children || !spec->n_children ||
	    (spec->strategy == ACT_SIMPLE_ONE_FOR_ONE && spec->n_children != 1) ||
	    spec->strategy > ACT_SIMPLE_ONE_FOR_ONE || spec->max_restarts > 100000)
		return -EINVAL;
	for (uint32_t i = 0; i < spec->n_children; i++)
		if (!spec->children[i].beh)
			return -EINVAL;
	struct act_spawn_opts o = {
		.link = act__tls.rt == rt && act__tls.cur != NULL,
		.trap_exit = true,
	};
	return act_spawn_opt(rt, &act_sup_behaviour, (void *)spec, &o, out);
}

int act_sup_start_child(struct act_runtime *rt, act_id sup, void *arg)
{
	ZB_ASSERT(rt != NULL);
	if (!act_alive(rt, sup))
		return ZB_ERR_STALE_ID;
	/* Slot fields, set before the supervisor became visible: if the slot
	 * is reused meanwhile, the delivery below finds a newer generation. */
	struct act_actor *a = act__slot(rt, sup);
	if (a->beh != &act_sup_behaviour ||
	    ((struct sup_state *)a->inline_state)->strategy != ACT_SIMPLE_ONE_FOR_ONE)
		return -EINVAL;
	struct act_msg *m = act_msg_alloc(rt);
	if (!m)
		return -ENOBUFS;
	m->_sys = SYS_SUP;
	m->tag = SUP_START_CHILD;
	memcpy(m->u.bytes, &arg, sizeof(arg));
	int rc = act__deliver(rt, sup, m, false);
	if (rc)
		act_msg_free(rt, m);
	return rc;
}

act_id act_sup_child(struct act_runtime *rt, act_id sup, uint32_t i)
{
	if (!act_alive(rt, sup))
		return ACT_ID_NONE;
	struct act_actor *a = act__slot(rt, sup);
	if (a->beh != &act_sup_behaviour)
		return ACT_ID_NONE;
	struct sup *s = ((struct sup_state *)a->state)->s;
	return s && i < s->n ? atomic_load_explicit(&s->ch[i].id, RLX) : ACT_ID_NONE;
}
