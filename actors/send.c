/* actors/send.c — delivery, signals (exits, links, monitors), calls, exit.
 *
 * Signals travel as messages in the same mailbox, so a signal and the messages
 * from one sender keep their order (as Erlang's signal ordering guarantee).
 * Signals ignore mailbox capacity; every message a signal may need later
 * (the EXIT notice a link sends when its actor dies, the DOWN of a monitor)
 * is allocated when the link/monitor is made, so an exit never needs memory
 * and never loses a notification. */
#include "internal.h"

#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

uint64_t act__new_ref(struct act_runtime *rt)
{
	return atomic_fetch_add_explicit(&rt->ref_seq, 1, RLX) + 1;
}

static inline void count_stat(struct act_runtime *rt, int rc)
{
	struct act_worker *w = act__my_worker(rt);
	if (ZB_LIKELY(rc == 0))
		act__stat(rt, w ? &w->st_sends : NULL, &rt->ext_sends);
	else if (rc == ZB_ERR_MAILBOX_FULL)
		act__stat(rt, w ? &w->st_full : NULL, &rt->ext_full);
	else if (rc == ZB_ERR_STALE_ID)
		act__stat(rt, w ? &w->st_stale : NULL, &rt->ext_stale);
}

int act__deliver(struct act_runtime *rt, act_id to, struct act_msg *m, bool sys)
{
	struct act_actor *a = act__slot(rt, to);
	if (ZB_UNLIKELY(!a || act_id_node(to) != rt->p.node))
		return ZB_ERR_STALE_ID;
	uint64_t w = atomic_load_explicit(&a->word, ACQ);
	uint64_t gen = act_id_gen(to);
	for (;;) {
		if (ZB_UNLIKELY((w >> W_GEN_SHIFT) != gen || (w & W_CLOSED)))
			return ZB_ERR_STALE_ID;
		if (ZB_UNLIKELY(w_count(w) >= rt->p.mailbox_capacity) && !sys)
			return ZB_ERR_MAILBOX_FULL;
		if (ZB_LIKELY(atomic_compare_exchange_weak_explicit(&a->word, &w, w + 1,
								    ACR, ACQ)))
			break;
	}
	/* Our claim pins the slot until the push: the owner cannot release it
	 * while the count holds our message. Once pushed, an act_call port's
	 * caller may take the reply, close the port and release (or reuse)
	 * the slot at once, so a is not read after the push; a port is only
	 * woken through its futex address (the slot memory stays mapped; a
	 * wake-up there is at worst spurious). */
	/* Only the first message into an empty mailbox wakes anyone, so kind
	 * is read only then: a busy receiver's slot is not touched beyond its
	 * word and its queue (reading kind on every send cost the counting
	 * benchmark ~23 %). */
	bool first = w_count(w) == 0;
	bool port = first && a->kind == AK_PORT;
	uint32_t port_before = 0;
	if (ZB_UNLIKELY(port))
		port_before = atomic_fetch_add_explicit(&a->port_seq, ACT_PORT_SEQ_STEP, ACR);
	m->to = to;
	m->_priv.state = MS_QUEUED;
	act__msg_moved(m); /* before the push: from there on m is the receiver's */
	act__mpsc_push(&a->mb, act__qn(m));
	if (ZB_UNLIKELY(port))
		act__port_wake(&a->port_seq, port_before);
	else if (first)
		act__make_runnable(rt, a);
	return 0;
}

int act_send(struct act_runtime *rt, act_id to, struct act_msg *m)
{
	int rc;
	ZB_DASSERT(rt != NULL && m != NULL);
	ZB_DASSERT(m->_priv.state == MS_OWNED || m->_priv.state == MS_HANDLING);
	if (ZB_UNLIKELY(!act__tag_sendable(m->tag)))
		return -EINVAL;
	if (ZB_UNLIKELY(rt->p.timestamps || (m->flags & ACT_MF_STAMP)))
		m->ts_ns = zb_now_ns();
	if (ZB_UNLIKELY(act_id_node(to) != rt->p.node)) {
		if (!rt->router)
			return ZB_ERR_PEER_DOWN;
		uint8_t st = m->_priv.state;
		m->_sys = SYS_NONE;
		m->to = to;
		m->_priv.state = MS_QUEUED;
		rc = rt->router(rt->router_ctx, m);
		if (rc)
			m->_priv.state = st;
		else
			act__msg_moved(m); /* pointer only: the router may have freed it */
		return rc;
	}
	m->_sys = SYS_NONE;
	rc = act__deliver(rt, to, m, false);
	count_stat(rt, rc);
	return rc;
}

int act_tell(struct act_runtime *rt, act_id to, uint32_t tag,
	     const void *data, size_t len)
{
	if (len > ACT_INLINE_MAX)
		return -EINVAL;
	struct act_msg *m = act_msg_alloc(rt);
	if (ZB_UNLIKELY(!m))
		return -ENOBUFS;
	m->tag = tag;
	if (len) {
		memcpy(m->u.bytes, data, len);
		m->kind = ACT_PL_INLINE;
		m->len = (uint16_t)len;
	}
	int rc = act_send(rt, to, m);
	if (ZB_UNLIKELY(rc))
		act_msg_free(rt, m);
	return rc;
}

void act_set_remote_router(struct act_runtime *rt, act_router_fn fn, void *ctx)
{
	ZB_ASSERT(rt != NULL);
	ZB_ASSERT(fn != NULL || ctx == NULL);
	rt->router = fn;
	rt->router_ctx = ctx;
}

int act_deliver_remote(struct act_runtime *rt, struct act_msg *m)
{
	ZB_ASSERT(rt != NULL && m != NULL);
	ZB_ASSERT(m->_priv.state == MS_OWNED);
	if (act_id_node(m->to) != rt->p.node)
		return ZB_ERR_STALE_ID;
	/* application tags, and a call's error reply from the callee's node
	 * (its actor was gone: remote.c) */
	if (m->tag > ACT_TAG_USER_MAX &&
	    !(m->tag == ACT_TAG_UNDELIVERED && (m->flags & ACT_MF_REPLY) && m->ref))
		return -EINVAL;
	m->_sys = SYS_NONE;
	int rc = act__deliver(rt, m->to, m, false);
	count_stat(rt, rc);
	return rc;
}

/* Signal m (m->_sys set, m->from the local sender) to `to`: into its
 * mailbox when local, else to the remote router (zbmd/actors.h "Remote links
 * and monitors"). 0, or the error with m still the caller's. */
static int signal_to(struct act_runtime *rt, act_id to, struct act_msg *m)
{
	ZB_DASSERT(rt != NULL && m != NULL);
	ZB_DASSERT(m->_sys != SYS_NONE);
	if (ZB_LIKELY(act_id_node(to) == rt->p.node))
		return act__deliver(rt, to, m, true);
	if (!rt->router)
		return ZB_ERR_PEER_DOWN;
	uint8_t st = m->_priv.state;
	m->to = to;
	m->kind = ACT_PL_NONE;
	m->_priv.state = MS_QUEUED;
	int rc = rt->router(rt->router_ctx, m);
	if (rc)
		m->_priv.state = st;
	else
		act__msg_moved(m);
	return rc;
}

int act_exit_signal(struct act_runtime *rt, act_id to, int reason)
{
	ZB_ASSERT(rt != NULL);
	struct act_msg *m = act_msg_alloc(rt);
	if (!m)
		return -ENOBUFS;
	m->_sys = SYS_EXIT_SIGNAL;
	m->_reason = reason;
	if (m->from == ACT_ID_NONE && act_id_node(to) != rt->p.node)
		m->from = act_id_make(rt->p.node, 0, 0);   /* not an actor */
	int rc = signal_to(rt, to, m);
	if (rc)
		act_msg_free(rt, m);
	return rc;
}

/* Signal to `to`; freed when it has nobody to go to. */
static void signal_or_free(struct act_runtime *rt, act_id to, struct act_msg *m)
{
	if (signal_to(rt, to, m))
		act_msg_free(rt, m);
}

int act_deliver_remote_signal(struct act_runtime *rt, struct act_msg *m, int sig,
			      int reason)
{
	ZB_ASSERT(rt != NULL && m != NULL);
	ZB_ASSERT(m->_priv.state == MS_OWNED);
	if (act_id_node(m->to) != rt->p.node ||
	    (sig != SYS_EXIT_LINK && sig != SYS_EXIT_SIGNAL && sig != SYS_LINK &&
	     sig != SYS_UNLINK && sig != SYS_MONITOR && sig != SYS_DEMONITOR &&
	     sig != SYS_DOWN)) {
		act_msg_free(rt, m);
		return -EINVAL;
	}
	m->_sys = (uint8_t)sig;
	m->_reason = reason;
	m->kind = ACT_PL_NONE;
	act_id to = m->to;
	if (act__deliver(rt, to, m, true) == 0)
		return 0;
	if (sig == SYS_LINK || sig == SYS_MONITOR) {
		/* as drain_one: answer noproc to the remote asker */
		m->_sys = sig == SYS_LINK ? SYS_EXIT_LINK : SYS_DOWN;
		m->_reason = ACT_NOPROC;
		act_id back = m->from;
		m->from = to;
		signal_or_free(rt, back, m);
	} else {
		act_msg_free(rt, m);
	}
	return ZB_ERR_STALE_ID;
}

/* ---- owner-only lists ------------------------------------------------------ */

static struct act_msg *list_take(struct act_msg **head, int by_ref, uint64_t key,
				 uint8_t sys)
{
	for (struct act_msg **pp = head; *pp;
	     pp = (struct act_msg **)&(*pp)->_priv.next) {
		struct act_msg *m = *pp;
		if ((by_ref ? m->ref : m->to) == key && (!sys || m->_sys == sys)) {
			*pp = lnext(m);
			lset(m, NULL);
			return m;
		}
	}
	return NULL;
}

/* The dormant DOWN of monitor `ref` held for `watcher` (its `to`). */
static struct act_msg *monitor_take(struct act_msg **head, uint64_t ref,
				    act_id watcher)
{
	for (struct act_msg **pp = head; *pp;
	     pp = (struct act_msg **)&(*pp)->_priv.next) {
		struct act_msg *m = *pp;
		if (m->ref == ref && m->to == watcher) {
			*pp = lnext(m);
			lset(m, NULL);
			return m;
		}
	}
	return NULL;
}

static void list_push(struct act_msg **head, struct act_msg *m)
{
	lset(m, *head);
	*head = m;
}

/* ---- dispatch ----------------------------------------------------------------- */

static void die(struct act_actor *a, int reason)
{
	if (!(a->flags & AF_EXITING)) {
		a->flags |= AF_EXITING;
		a->exit_reason = reason;
	}
}

/* Runs the handler on m and frees m afterwards unless the handler moved it
 * (act__tls.handling cleared). m itself is not read after the handler: a
 * message forwarded to an actor on another worker may be handled (or freed)
 * there already, and its state would read MS_HANDLING again. */
static void handle_user(struct act_runtime *rt, struct act_actor *a,
			struct act_msg *m)
{
	struct act_msg *outer = act__tls.handling;
	m->_priv.state = MS_HANDLING;
	act__tls.handling = m;
	int rc = a->beh->handle((struct act_ctx *)a, m);
	bool ours = act__tls.handling == m;
	act__tls.handling = outer;
	if (ours)
		act_msg_free(rt, m);
	if (ZB_UNLIKELY(rc < 0))
		die(a, rc);
}

static void exit_rules(struct act_runtime *rt, struct act_actor *a,
		       struct act_msg *m, bool explicit_signal)
{
	int reason = m->_reason;
	if (reason == ACT_KILL && explicit_signal) {
		act_msg_free(rt, m);
		die(a, ACT_KILLED);
	} else if (a->flags & AF_TRAP) {
		m->_sys = SYS_NONE;
		m->tag = ACT_TAG_EXIT;
		m->kind = ACT_PL_NONE;
		m->flags = explicit_signal ? ACT_MF_SIGNAL : 0;
		handle_user(rt, a, m);
	} else if (reason == ACT_NORMAL) {
		act_msg_free(rt, m);
	} else {
		act_msg_free(rt, m);
		die(a, reason == ACT_KILL ? ACT_KILLED : reason);
	}
}

static void pending_cancel(struct act_runtime *rt, struct act_msg *rec)
{
	if (rec->_sys == SYS_REC_CALL)
		act_cancel_timer(rt, rec->_priv.aux);
	act_msg_free(rt, rec);
}

static void dispatch_sys(struct act_runtime *rt, struct act_actor *a,
			 struct act_msg *m)
{
	struct act_msg *r;
	switch (m->_sys) {
	case SYS_EXIT_LINK:
		r = list_take(&a->links, 0, m->from, 0);
		if (!r) { /* unlinked meanwhile */
			act_msg_free(rt, m);
			return;
		}
		act_msg_free(rt, r);
		exit_rules(rt, a, m, false);
		return;
	case SYS_EXIT_SIGNAL:
		exit_rules(rt, a, m, true);
		return;
	case SYS_LINK:
		for (r = a->links; r; r = lnext(r))
			if (r->to == m->from)
				break;
		if (r) {
			act_msg_free(rt, m);
			return;
		}
		m->_sys = SYS_EXIT_LINK;
		m->to = m->from;
		m->from = a->id;
		m->_priv.state = MS_OWNED;
		list_push(&a->links, m);
		return;
	case SYS_UNLINK:
		r = list_take(&a->links, 0, m->from, 0);
		if (r)
			act_msg_free(rt, r);
		act_msg_free(rt, m);
		return;
	case SYS_MONITOR:
		m->_sys = SYS_DOWN;
		m->to = m->from;
		m->from = a->id;
		m->_priv.state = MS_OWNED;
		list_push(&a->monitors, m);
		return;
	case SYS_DEMONITOR:
		/* ref and watcher: refs are per-node counters, so a remote
		 * watcher's ref can equal a local one's */
		r = monitor_take(&a->monitors, m->ref, m->from);
		if (r)
			act_msg_free(rt, r);
		act_msg_free(rt, m);
		return;
	case SYS_DOWN:
	case SYS_CALL_TIMEOUT:
		r = list_take(&a->pending, 1, m->ref,
			      m->_sys == SYS_DOWN ? SYS_REC_MON : SYS_REC_CALL);
		if (!r) { /* demonitored, or the reply came first */
			act_msg_free(rt, m);
			return;
		}
		act_msg_free(rt, r);
		m->tag = m->_sys == SYS_DOWN ? ACT_TAG_DOWN : ACT_TAG_TIMEOUT;
		m->_sys = SYS_NONE;
		m->kind = ACT_PL_NONE;
		handle_user(rt, a, m);
		return;
	case SYS_SUP:
		handle_user(rt, a, m);
		return;
	default:
		ZB_ASSERT(!"unknown signal");
	}
}

void act__dispatch(struct act_runtime *rt, struct act_actor *a, struct act_msg *m)
{
	if (ZB_LIKELY(m->_sys == SYS_NONE)) {
		if (ZB_UNLIKELY((m->flags & ACT_MF_REPLY) && m->ref)) {
			struct act_msg *r = list_take(&a->pending, 1, m->ref,
						      SYS_REC_CALL);
			if (!r) { /* late: its call timed out already */
				struct act_worker *w = act__my_worker(rt);
				if (w)
					atomic_store_explicit(&w->st_late,
						atomic_load_explicit(&w->st_late, RLX) + 1, RLX);
				act_msg_free(rt, m);
				return;
			}
			pending_cancel(rt, r);
		}
		handle_user(rt, a, m);
		return;
	}
	dispatch_sys(rt, a, m);
}

/* ---- exit ------------------------------------------------------------------------ */

static void drain_one(struct act_runtime *rt, struct act_actor *a,
		      struct act_msg *m)
{
	if (m->_sys == SYS_LINK || m->_sys == SYS_MONITOR) {
		/* It asked a dead actor: answer noproc with the message it sent. */
		m->_sys = m->_sys == SYS_LINK ? SYS_EXIT_LINK : SYS_DOWN;
		m->_reason = ACT_NOPROC;
		act_id to = m->from;
		m->from = a->id;
		signal_or_free(rt, to, m);
		return;
	}
	act_msg_free(rt, m);
}

void act__terminate(struct act_runtime *rt, struct act_actor *a, uint32_t consumed)
{
	uint64_t w = atomic_load_explicit(&a->word, ACQ);
	/* seq_cst: pairs with act_register's `named` store and liveness load */
	while (!atomic_compare_exchange_weak_explicit(&a->word, &w, w | W_CLOSED,
						      SEQ, ACQ))
		;
	ZB_ASSERT(w_count(w) >= consumed);
	uint32_t inflight = w_count(w) - consumed;
	int reason = a->exit_reason;
	if (a->beh && a->beh->terminate && !(a->flags & AF_NOTERM)) {
		struct act__tls saved = act__tls;
		act__tls.rt = rt;
		act__tls.cur = a;
		a->beh->terminate((struct act_ctx *)a, reason);
		act__tls = saved;
	}
	if (atomic_load_explicit(&a->named, SEQ))
		act__unregister_id(rt, a->id);
	struct act_msg *m, *n;
	for (m = a->links; m; m = n) {
		n = lnext(m);
		m->_sys = SYS_EXIT_LINK;
		m->_reason = reason;
		m->from = a->id;
		signal_or_free(rt, m->to, m);
	}
	for (m = a->monitors; m; m = n) {
		n = lnext(m);
		m->_sys = SYS_DOWN;
		m->_reason = reason;
		m->from = a->id;
		signal_or_free(rt, m->to, m);
	}
	for (m = a->pending; m; m = n) {
		n = lnext(m);
		if (m->_sys == SYS_REC_MON) {
			m->_sys = SYS_DEMONITOR;
			m->from = a->id;
			signal_or_free(rt, m->to, m);
		} else {
			pending_cancel(rt, m);
		}
	}
	a->links = a->monitors = a->pending = NULL;
	while (inflight > 0) {
		struct act__qnode *q = act__mpsc_pop(&a->mb);
		if (!q)
			continue; /* a sender is between claim and link */
		inflight--;
		drain_one(rt, a, act__msg_of(q));
	}
	act__slot_release(rt, a);
}

/* ---- links and monitors ---------------------------------------------------------- */

static struct act_actor *ctx_actor(struct act_ctx *ctx)
{
	struct act_actor *a = (struct act_actor *)ctx;
	ZB_ASSERT(a != NULL);
	ZB_ASSERT(a == act__tls.cur);
	return a;
}

int act_link(struct act_ctx *ctx, act_id other)
{
	struct act_actor *a = ctx_actor(ctx);
	struct act_runtime *rt = act__tls.rt;
	if (other == a->id)
		return -EINVAL;
	for (struct act_msg *r = a->links; r; r = lnext(r))
		if (r->to == other)
			return 0;
	struct act_msg *mine = act_msg_alloc(rt), *theirs = act_msg_alloc(rt);
	if (!mine || !theirs) {
		if (mine)
			act_msg_free(rt, mine);
		if (theirs)
			act_msg_free(rt, theirs);
		return -ENOBUFS;
	}
	theirs->_sys = SYS_LINK;
	theirs->from = a->id;
	int rc = signal_to(rt, other, theirs);
	if (rc) {
		act_msg_free(rt, mine);
		act_msg_free(rt, theirs);
		return rc;
	}
	mine->_sys = SYS_EXIT_LINK;
	mine->from = a->id;
	mine->to = other;
	list_push(&a->links, mine);
	return 0;
}

int act_unlink(struct act_ctx *ctx, act_id other)
{
	struct act_actor *a = ctx_actor(ctx);
	struct act_runtime *rt = act__tls.rt;
	struct act_msg *r = list_take(&a->links, 0, other, 0);
	if (!r)
		return 0;
	r->_sys = SYS_UNLINK;
	r->from = a->id;
	signal_or_free(rt, other, r);
	return 0;
}

int act_monitor(struct act_ctx *ctx, act_id target, uint64_t *ref)
{
	struct act_actor *a = ctx_actor(ctx);
	struct act_runtime *rt = act__tls.rt;
	ZB_ASSERT(ref != NULL);
	struct act_msg *rec = act_msg_alloc(rt), *down = act_msg_alloc(rt);
	if (!rec || !down) {
		if (rec)
			act_msg_free(rt, rec);
		if (down)
			act_msg_free(rt, down);
		return -ENOBUFS;
	}
	*ref = act__new_ref(rt);
	rec->_sys = SYS_REC_MON;
	rec->ref = *ref;
	rec->to = target;
	list_push(&a->pending, rec);
	down->_sys = SYS_MONITOR;
	down->ref = *ref;
	down->from = a->id;
	int rc = signal_to(rt, target, down);
	if (rc) {
		bool remote = act_id_node(target) != rt->p.node;
		if (remote && rc != ZB_ERR_PEER_DOWN && rc != -EHOSTUNREACH &&
		    rc != ZB_ERR_STALE_ID) {
			/* the router could not take it (table or ring full) */
			act_msg_free(rt, list_take(&a->pending, 1, *ref, SYS_REC_MON));
			act_msg_free(rt, down);
			*ref = 0;
			return rc;
		}
		down->_sys = SYS_DOWN;
		down->_reason = remote && rc != ZB_ERR_STALE_ID ? rc : ACT_NOPROC;
		down->from = target;
		signal_or_free(rt, a->id, down);
	}
	return 0;
}

int act_demonitor(struct act_ctx *ctx, uint64_t ref)
{
	struct act_actor *a = ctx_actor(ctx);
	struct act_runtime *rt = act__tls.rt;
	struct act_msg *r = list_take(&a->pending, 1, ref, SYS_REC_MON);
	if (!r)
		return -ENOENT;
	r->_sys = SYS_DEMONITOR;
	r->from = a->id;
	signal_or_free(rt, r->to, r);
	return 0;
}

void act_consume(struct act_ctx *ctx, uint32_t reductions)
{
	ZB_ASSERT(ctx_actor(ctx) != NULL);
	struct act_worker *w = act__tls.w;
	if (w)
		w->extra += reductions;
}

void act_yield(struct act_ctx *ctx)
{
	ZB_ASSERT(ctx_actor(ctx) != NULL);
	struct act_worker *w = act__tls.w;
	if (w)
		w->extra = act__tls.rt->p.reductions;
}

/* ---- request / reply ------------------------------------------------------------- */

int act_reply(struct act_runtime *rt, const struct act_msg *req,
	      struct act_msg *reply)
{
	ZB_ASSERT(rt != NULL && req != NULL && reply != NULL);
	if (!req->ref)
		return -EINVAL;
	reply->ref = req->ref;
	reply->flags |= ACT_MF_REPLY;
	return act_send(rt, req->from, reply);
}

int act_call_async(struct act_ctx *ctx, act_id to, struct act_msg *req,
		   uint64_t timeout_ns, uint64_t *ref)
{
	struct act_actor *a = ctx_actor(ctx);
	struct act_runtime *rt = act__tls.rt;
	struct act_msg *rec = act_msg_alloc(rt), *tmo = act_msg_alloc(rt);
	int rc = -ENOBUFS;
	ZB_ASSERT(req != NULL && ref != NULL);
	if (!rec || !tmo)
		goto fail;
	uint64_t r = act__new_ref(rt), tref;
	tmo->_sys = SYS_CALL_TIMEOUT;
	tmo->ref = r;
	if ((rc = act_send_after(rt, a->id, timeout_ns, tmo, &tref)))
		goto fail; /* both still ours */
	req->ref = r;
	req->from = a->id;
	req->flags &= ~ACT_MF_REPLY;
	if ((rc = act_send(rt, to, req))) {
		act_cancel_timer(rt, tref);
		act_msg_free(rt, rec);
		return rc;
	}
	rec->_sys = SYS_REC_CALL;
	rec->ref = r;
	rec->to = to;
	__atomic_store_n(&rec->_priv.aux, tref, __ATOMIC_RELAXED);
	list_push(&a->pending, rec);
	*ref = r;
	return 0;
fail:
	if (rec)
		act_msg_free(rt, rec);
	if (tmo)
		act_msg_free(rt, tmo);
	return rc;
}

static long futex_wait(_Atomic uint32_t *addr, uint32_t val, uint64_t ns)
{
	struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
	return syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, val, &ts,
		       NULL, 0);
}

static void port_close(struct act_runtime *rt, struct act_actor *p)
{
	uint64_t w = atomic_load_explicit(&p->word, ACQ);
	while (!atomic_compare_exchange_weak_explicit(&p->word, &w, w | W_CLOSED,
						      ACR, ACQ))
		;
	uint32_t inflight = w_count(w);
	while (inflight > 0) {
		struct act__qnode *q = act__mpsc_pop(&p->mb);
		if (!q)
			continue;
		inflight--;
		drain_one(rt, p, act__msg_of(q));
	}
	act__slot_release(rt, p);
}

int act_call(struct act_runtime *rt, act_id to, struct act_msg *req,
	     uint64_t timeout_ns, struct act_msg **reply)
{
	struct act_actor *p;
	int rc;
	ZB_ASSERT(rt != NULL && req != NULL && reply != NULL);
	ZB_ASSERT(req->_priv.state == MS_OWNED);
	*reply = NULL;
	if (act__my_worker(rt)) { /* would block a worker: use act_call_async */
		act_msg_free(rt, req);
		return -EDEADLK;
	}
	if ((rc = act__slot_acquire(rt, AK_PORT, &p))) {
		act_msg_free(rt, req);
		return rc;
	}
	atomic_store_explicit(&p->port_seq, 0, RLX);
	atomic_store_explicit(&p->word, (uint64_t)act_id_gen(p->id) << W_GEN_SHIFT, REL);
	uint64_t ref = act__new_ref(rt);
	req->ref = ref;
	req->from = p->id;
	req->flags &= ~ACT_MF_REPLY;
	if ((rc = act_send(rt, to, req))) {
		act_msg_free(rt, req);
		port_close(rt, p);
		return rc;
	}
	/* Saturated: now + UINT64_MAX (infinity) wrapped into the past. */
	uint64_t start = zb_now_ns();
	uint64_t deadline = timeout_ns < UINT64_MAX - start ? start + timeout_ns : UINT64_MAX;
	uint64_t spin_end = start + rt->p.call_spin_ns;
	rc = ZB_ERR_TIMEOUT;
	for (;;) {
		uint32_t seq = atomic_load_explicit(&p->port_seq, ACQ);
		struct act__qnode *q = act__mpsc_pop(&p->mb);
		if (q) {
			struct act_msg *m = act__msg_of(q);
			atomic_fetch_sub_explicit(&p->word, 1, ACR);
			if ((m->flags & ACT_MF_REPLY) && m->ref == ref) {
				m->_priv.state = MS_OWNED;
				if (ZB_UNLIKELY(m->tag == ACT_TAG_UNDELIVERED)) {
					rc = m->_reason < 0 ? m->_reason : ZB_ERR_PEER_DOWN;
					act_msg_free(rt, m);
					break;
				}
				*reply = m;
				rc = 0;
				break;
			}
			drain_one(rt, p, m); /* strays to a port are dropped */
			continue;
		}
		if (w_count(atomic_load_explicit(&p->word, ACQ)) > 0)
			continue; /* sender mid-push */
		uint64_t now = zb_now_ns();
		if (now >= deadline)
			break;
		if (now < spin_end) { /* a quick reply: neither side enters the kernel */
			act__cpu_relax();
			continue;
		}
		if (!(seq & ACT_PORT_SLEEPING)) {
			/* Announce the sleep. A sender's add ordered before this
			 * one changed the word (look again); one ordered after it
			 * sees the flag and wakes us (act__port_wake). */
			uint32_t was = atomic_fetch_or_explicit(&p->port_seq, ACT_PORT_SLEEPING, ACR);
			if (was != seq)
				continue;
			seq |= ACT_PORT_SLEEPING;
		}
		futex_wait(&p->port_seq, seq, deadline - now);
	}
	port_close(rt, p);
	return rc;
}
