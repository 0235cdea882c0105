/* Basic semantics: spawn, send, stale ids, backpressure, payload ownership,
 * registry, remote routing, timers, links, monitors, trap_exit. Poll mode:
 * the test thread drives the worker, so everything is deterministic. */
#include "util.h"

/* ---- a recorder actor --------------------------------------------------- */
#define REC_MAX 64
struct rec_log {
	int n;
	uint32_t tags[REC_MAX];
	act_id from[REC_MAX];
	int reason[REC_MAX];
	uint64_t ref[REC_MAX];
	int kinds[REC_MAX];
	uint32_t val[REC_MAX];
	int terminated, term_reason;
};
struct rec_state {
	struct rec_log *log;
};

static int rec_init(struct act_ctx *ctx, void *arg)
{
	((struct rec_state *)act_state(ctx))->log = arg;
	return 0;
}

static int rec_handle(struct act_ctx *ctx, struct act_msg *m)
{
	struct rec_log *l = ((struct rec_state *)act_state(ctx))->log;
	if (l->n < REC_MAX) {
		l->tags[l->n] = m->tag;
		l->from[l->n] = m->from;
		l->reason[l->n] = act_msg_reason(m);
		l->ref[l->n] = m->ref;
		l->kinds[l->n] = m->kind;
		l->val[l->n] = 0;
		if (m->kind == ACT_PL_INLINE && m->len >= 4)
			memcpy(&l->val[l->n], m->u.bytes, 4);
		l->n++;
	}
	if (m->tag == 99) /* "die with error" */
		return -EIO;
	if (m->tag == 98)
		act_exit(ctx, ACT_NORMAL);
	return 0;
}

static void rec_term(struct act_ctx *ctx, int reason)
{
	struct rec_log *l = ((struct rec_state *)act_state(ctx))->log;
	l->terminated++;
	l->term_reason = reason;
}

static const struct act_behaviour rec_beh = {
	.name = "recorder", .state_size = sizeof(struct rec_state),
	.init = rec_init, .handle = rec_handle, .terminate = rec_term,
};

static int tell_u32(struct act_runtime *rt, act_id to, uint32_t tag, uint32_t v)
{
	return act_tell(rt, to, tag, &v, sizeof(v));
}

static void buf_release(struct act_buf *b, void *ctx)
{
	(void)b;
	(*(int *)ctx)++;
}

/* ---- an actor that links/monitors on command ------------------------------ */
struct ctl_state {
	struct rec_log *log;
	uint64_t mref;
};
enum { C_LINK = 1, C_MON, C_DEMON, C_TRAP, C_UNLINK, C_SPAWNLINK };

static int ctl_init(struct act_ctx *ctx, void *arg)
{
	((struct ctl_state *)act_state(ctx))->log = arg;
	return 0;
}

static int ctl_handle(struct act_ctx *ctx, struct act_msg *m)
{
	struct ctl_state *s = act_state(ctx);
	act_id target = 0;
	if (m->kind == ACT_PL_INLINE && m->len == sizeof(act_id))
		memcpy(&target, m->u.bytes, sizeof(target));
	switch (m->tag) {
	case C_LINK: return act_link(ctx, target) == 0 ? 0 : -EPROTO;
	case C_UNLINK: return act_unlink(ctx, target);
	case C_MON: return act_monitor(ctx, target, &s->mref);
	case C_DEMON: return act_demonitor(ctx, s->mref);
	case C_TRAP: act_trap_exit(ctx, true); return 0;
	default: break;
	}
	struct rec_log *l = s->log;
	if (l->n < REC_MAX) {
		l->tags[l->n] = m->tag;
		l->from[l->n] = m->from;
		l->reason[l->n] = act_msg_reason(m);
		l->ref[l->n] = m->ref;
		l->n++;
	}
	return 0;
}
static const struct act_behaviour ctl_beh = {
	.name = "ctl", .state_size = sizeof(struct ctl_state),
	.init = ctl_init, .handle = ctl_handle,
};

static void cmd(struct act_runtime *rt, act_id to, uint32_t tag, act_id target)
{
	act_tell(rt, to, tag, &target, sizeof(target));
	drain(rt, 1);
}

/* ---- remote routing --------------------------------------------------------- */
struct router_ctx {
	int calls;
	act_id last_to;
	struct act_runtime *rt;
};
static int router(void *ctx, struct act_msg *m)
{
	struct router_ctx *r = ctx;
	r->calls++;
	r->last_to = m->to;
	act_msg_free(r->rt, m); /* "serialised" */
	return 0;
}

int main(void)
{
	tap_plan(62);
	struct act_runtime *rt = mk_rt(1, 8);
	struct rec_log log = {0};
	act_id a, b;

	/* spawn + send + receive, payload kinds */
	is_int(act_spawn(rt, &rec_beh, &log, &a), 0, "spawn");
	ok(act_id_node(a) == 1 && act_id_gen(a) >= 1, "id has node and generation");
	ok(act_alive(rt, a), "alive");
	is_int(tell_u32(rt, a, 7, 1234), 0, "tell");
	drain(rt, 1);
	ok(log.n == 1 && log.tags[0] == 7 && log.val[0] == 1234, "message delivered");
	ok(log.kinds[0] == ACT_PL_INLINE, "inline payload");

	int released = 0;
	struct act_buf buf = {.data = "zero-copy", .len = 9, .release = buf_release,
			      .ctx = &released};
	atomic_store(&buf.refs, 1);
	struct act_msg *m = act_msg_alloc(rt);
	act_msg_set_buf(m, &buf, 0, 9);
	m->tag = 8;
	is_int(act_send(rt, a, m), 0, "send buffer ref");
	m = act_msg_alloc(rt);
	act_msg_set_gpu(m, 1, 0, (void *)0x1000, 4096);
	act_send(rt, a, m);
	m = act_msg_alloc(rt);
	act_msg_set_rdma(m, 3, 0xabc000, 77, 1 << 20);
	act_send(rt, a, m);
	drain(rt, 1);
	is_int(released, 1, "receiver side released the buffer reference once");
	ok(log.kinds[1] == ACT_PL_BUF && log.kinds[2] == ACT_PL_GPU &&
	   log.kinds[3] == ACT_PL_RDMA, "buf, gpu and rdma payloads arrive");
	m = act_msg_alloc(rt);
	ok(act_msg_set_bytes(m, "x", ACT_INLINE_MAX + 1) == -EINVAL,
	   "oversized inline payload refused");
	act_msg_free(rt, m);

	/* backpressure: capacity 8, nobody polls */
	int rc = 0, sent = 0;
	for (int i = 0; i < 20 && rc == 0; i++)
		if (!(rc = tell_u32(rt, a, 10, (uint32_t)i)))
			sent++;
	is_int(sent, 8, "capacity 8 accepted exactly 8");
	is_int(rc, ZB_ERR_MAILBOX_FULL, "then ZB_ERR_MAILBOX_FULL");
	m = act_msg_alloc(rt);
	is_int(act_send(rt, a, m), ZB_ERR_MAILBOX_FULL, "failed send leaves the message with the caller");
	act_msg_free(rt, m);
	log.n = 0;
	drain(rt, 1);
	is_int(log.n, 8, "all 8 delivered, none dropped");
	is_int(tell_u32(rt, a, 11, 0), 0, "room again after draining");
	drain(rt, 1);

	/* exit and stale ids */
	log.n = 0;
	tell_u32(rt, a, 99, 0);
	drain(rt, 1);
	ok(!act_alive(rt, a), "actor exited after returning an error");
	is_int(log.terminated, 1, "terminate ran once");
	is_int(log.term_reason, -EIO, "with the handler's error as reason");
	is_int(tell_u32(rt, a, 1, 0), ZB_ERR_STALE_ID, "send to dead actor: stale");
	struct rec_log log2 = {0};
	is_int(act_spawn(rt, &rec_beh, &log2, &b), 0, "spawn after the exit");
	/* slots are reused FIFO after all have been used (test_generation.c) */
	ok(act_id_slot(b) != act_id_slot(a) || act_id_gen(b) != act_id_gen(a),
	   "a new id: another slot, or the same slot's next generation");
	is_int(tell_u32(rt, a, 1, 0), ZB_ERR_STALE_ID, "old id still refused");
	drain(rt, 1);
	is_int(log2.n, 0, "nothing delivered to the newer actor");
	is_int(tell_u32(rt, act_id_make(1, 4000000, 1), 1, 0), ZB_ERR_STALE_ID, "slot out of range: stale");

	/* remote routing */
	is_int(tell_u32(rt, act_id_make(2, 5, 1), 1, 0), ZB_ERR_PEER_DOWN, "remote without router: peer down");
	struct router_ctx rc_ = {.rt = rt};
	act_set_remote_router(rt, router, &rc_);
	is_int(tell_u32(rt, act_id_make(2, 5, 1), 1, 0), 0, "remote send goes to router");
	ok(rc_.calls == 1 && rc_.last_to == act_id_make(2, 5, 1), "router saw it");
	m = act_msg_alloc(rt);
	m->to = b;
	m->tag = 42;
	is_int(act_deliver_remote(rt, m), 0, "incoming remote message delivered");
	drain(rt, 1);
	ok(log2.n == 1 && log2.tags[0] == 42, "into the local mailbox");

	/* registry */
	is_int(act_register(rt, "svc", b), 0, "register");
	is_int(act_register(rt, "svc", b), -EEXIST, "duplicate name");
	ok(act_whereis(rt, "svc") == b, "whereis");
	is_int(act_register(rt, "dead", a), ZB_ERR_STALE_ID, "cannot register a dead id");
	/* one name per actor, as Erlang's register/2 (badarg): a second name
	 * used to be accepted */
	is_int(act_register(rt, "svc2", b), -EALREADY, "an actor with a name gets no second one");
	ok(act_whereis(rt, "svc2") == ACT_ID_NONE, "the second name was not made");
	ok(act_unregister(rt, "svc") == 0 && act_register(rt, "svc2", b) == 0 &&
	   act_whereis(rt, "svc2") == b && act_register(rt, "svc", b) == -EALREADY,
	   "unregistered, it can take another name");
	ok(act_unregister(rt, "svc2") == 0 && act_register(rt, "svc", b) == 0, "and its first again");
	tell_u32(rt, b, 98, 0);
	drain(rt, 1);
	ok(act_whereis(rt, "svc") == ACT_ID_NONE, "name gone with its actor");

	/* timers */
	struct rec_log log3 = {0};
	act_id c;
	act_spawn(rt, &rec_beh, &log3, &c);
	uint64_t t1, t2;
	m = act_msg_alloc(rt);
	m->tag = 61;
	uint64_t t0 = zb_now_ns();
	is_int(act_send_after(rt, c, 20000000, m, &t1), 0, "send_after 20 ms");
	m = act_msg_alloc(rt);
	m->tag = 62;
	act_send_after(rt, c, 10000000, m, &t2);
	is_int(act_cancel_timer(rt, t2), 0, "cancel before expiry");
	is_int(act_cancel_timer(rt, t2), -ENOENT, "second cancel: ENOENT");
	DRAIN_UNTIL(rt, 1, log3.n >= 1, 2000);
	uint64_t el = zb_now_ns() - t0;
	ok(log3.n == 1 && log3.tags[0] == 61, "only the uncancelled timer fired");
	ok(el >= 20000000, "not before its delay (%.1f ms)", el / 1e6);
	is_int(act_cancel_timer(rt, t1), -ENOENT, "cancel after firing: ENOENT");
	/* A cancelled timer gives its message back now, not at its deadline:
	 * cancelled here (not a worker) while in the worker's heap, and while
	 * still in its inbox. */
	struct act_stats ts0, ts1;
	uint64_t t3;
	act_get_stats(rt, &ts0);
	m = act_msg_alloc(rt);
	act_send_after(rt, c, 10000000000ull, m, &t1);
	m = act_msg_alloc(rt);
	act_send_after(rt, c, 10000000000ull, m, &t2);
	drain(rt, 1); /* both into the heap */
	m = act_msg_alloc(rt);
	act_send_after(rt, c, 10000000000ull, m, &t3);
	int crc = act_cancel_timer(rt, t2) | act_cancel_timer(rt, t3) | act_cancel_timer(rt, t1);
	drain(rt, 1);
	act_get_stats(rt, &ts1);
	ok(crc == 0 && ts1.msgs_in_use == ts0.msgs_in_use,
	   "cancelled 10 s timers freed on the next poll (%u in use, %u before)",
	   ts1.msgs_in_use, ts0.msgs_in_use);

	/* links, monitors, trap_exit */
	struct rec_log lx = {0}, ly = {0}, lz = {0};
	act_id x, y, z;
	act_spawn(rt, &ctl_beh, &lx, &x);
	act_spawn(rt, &ctl_beh, &ly, &y);
	act_spawn(rt, &ctl_beh, &lz, &z);
	cmd(rt, x, C_TRAP, 0);
	cmd(rt, x, C_LINK, y);    /* x <-> y, x traps */
	cmd(rt, z, C_MON, y);     /* z monitors y */
	act_exit_signal(rt, y, -ETIMEDOUT);
	drain(rt, 1);
	ok(!act_alive(rt, y), "exit signal killed y");
	ok(lx.n == 1 && lx.tags[0] == ACT_TAG_EXIT && lx.from[0] == y &&
	   lx.reason[0] == -ETIMEDOUT, "trapping linked x got EXIT with y's reason");
	ok(lz.n == 1 && lz.tags[0] == ACT_TAG_DOWN && lz.from[0] == y &&
	   lz.reason[0] == -ETIMEDOUT, "monitor z got DOWN with the reason");
	cmd(rt, z, C_MON, y);
	ok(lz.n == 2 && lz.tags[1] == ACT_TAG_DOWN && lz.reason[1] == ACT_NOPROC,
	   "monitoring a dead actor: DOWN noproc");
	/* non-trapping linked actor dies with the same reason; killed is untrappable */
	act_id p, q;
	struct rec_log lp = {0}, lq = {0};
	act_spawn(rt, &ctl_beh, &lp, &p);
	act_spawn(rt, &ctl_beh, &lq, &q);
	cmd(rt, p, C_LINK, q);
	cmd(rt, x, C_LINK, p);
	act_exit_signal(rt, q, ACT_SHUTDOWN);
	drain(rt, 1);
	ok(!act_alive(rt, p), "non-trapping linked actor died too");
	ok(lx.n == 2 && lx.from[1] == p && lx.reason[1] == ACT_SHUTDOWN,
	   "and its exit propagated with the same reason");
	act_exit_signal(rt, x, ACT_KILL);
	drain(rt, 1);
	ok(!act_alive(rt, x), "kill is not trappable");
	/* demonitor: no DOWN afterwards */
	act_id u;
	struct rec_log lu = {0};
	act_spawn(rt, &ctl_beh, &lu, &u);
	int before = lz.n;
	cmd(rt, z, C_MON, u);
	cmd(rt, z, C_DEMON, 0);
	act_exit_signal(rt, u, ACT_SHUTDOWN);
	drain(rt, 1);
	is_int(lz.n, before, "no DOWN after demonitor");
	act_exit_signal(rt, z, ACT_SHUTDOWN);
	act_exit_signal(rt, c, ACT_SHUTDOWN);
	drain(rt, 1);

	struct act_stats st;
	act_get_stats(rt, &st);
	is_int(st.actors_live, 0, "no actors left");
	is_int(st.msgs_free, 16384, "every message back in the pool");
	act_runtime_destroy(rt);

	/* bad parameters, pool exhaustion, slot exhaustion */
	struct act_params pp;
	struct act_runtime *r2 = NULL;
	act_params_default(&pp);
	pp.workers = 0;
	is_int(act_runtime_create(&pp, &r2), -EINVAL, "0 workers: EINVAL");
	act_params_default(&pp);
	pp.mailbox_capacity = 0;
	is_int(act_runtime_create(&pp, &r2), -EINVAL, "0 mailbox capacity: EINVAL");
	act_params_default(&pp);
	pp.workers = 1;
	pp.message_pool = 4;
	pp.max_actors = 2;
	pp.pin = false;
	is_int(act_runtime_create(&pp, &r2), 0, "tiny runtime");
	act_id s1, s2, s3;
	act_spawn(r2, &rec_beh, &log, &s1);
	act_spawn(r2, &rec_beh, &log, &s2);
	is_int(act_spawn(r2, &rec_beh, &log, &s3), -ENOBUFS, "no slot left: ENOBUFS");
	struct act_msg *hold[4];
	for (int i = 0; i < 4; i++)
		hold[i] = act_msg_alloc(r2);
	ok(hold[3] != NULL && act_msg_alloc(r2) == NULL, "pool of 4: the 5th alloc fails");
	is_int(tell_u32(r2, s1, 1, 0), -ENOBUFS, "send with an empty pool: ENOBUFS");
	for (int i = 0; i < 4; i++)
		act_msg_free(r2, hold[i]);
	is_int(tell_u32(r2, s1, 1, 0), 0, "works again once messages are back");
	act_runtime_destroy(r2);
	return tap_done();
}
