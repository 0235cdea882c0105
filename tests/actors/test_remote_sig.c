/* Remote links and monitors: the runtime's hooks (zbmd/actors.h "Remote
 * links and monitors") between two runtimes of different nodes in one
 * process, joined by a router that hands every message straight to the
 * other runtime (act_deliver_remote / act_deliver_remote_signal), as
 * dataplane/remote.c does over the transport. Poll mode: deterministic.
 * The two-node version over DPDK: tests/dataplane/test_remote_mon.sh. */
#include "util.h"

enum { T_MON = 1, T_LINK, T_EXIT, T_DEMON, T_TRAP, T_UNLINK };

static struct act_runtime *ra, *rb;
static int refuse;          /* router: refuse signals with this error */
static unsigned routed_sigs;

struct ev {
	act_id self, from;
	uint32_t tag;
	int reason;
	uint64_t ref;
};
static struct ev evs[64];
static unsigned nev;
static uint64_t last_ref;
static int last_rc;

static int route(void *ctx, struct act_msg *m)
{
	struct act_runtime *src = ctx, *dst = src == ra ? rb : ra;
	int sig = act_msg_signal(m), reason = act_msg_reason(m);
	if (sig && refuse)
		return refuse;
	struct act_msg *n = act_msg_alloc(dst);
	if (!n)
		return -ENOBUFS;
	n->from = m->from;
	n->to = m->to;
	n->ref = m->ref;
	n->tag = m->tag;
	n->flags = m->flags;
	if (m->kind == ACT_PL_INLINE)
		act_msg_set_bytes(n, m->u.bytes, m->len);
	act_msg_free(src, m);
	if (sig) {
		routed_sigs++;
		act_deliver_remote_signal(dst, n, sig, reason);
	} else if (act_deliver_remote(dst, n)) {
		act_msg_free(dst, n);
	}
	return 0;
}

static int agent(struct act_ctx *ctx, struct act_msg *m)
{
	uint64_t a = 0;
	if (m->kind == ACT_PL_INLINE && m->len == sizeof(a))
		memcpy(&a, m->u.bytes, sizeof(a));
	switch (m->tag) {
	case ACT_TAG_DOWN:
	case ACT_TAG_EXIT:
		if (nev < 64)
			evs[nev++] = (struct ev){act_self(ctx), m->from, m->tag,
						 act_msg_reason(m), m->ref};
		return 0;
	case T_MON:
		last_rc = act_monitor(ctx, a, &last_ref);
		return 0;
	case T_DEMON:
		last_rc = act_demonitor(ctx, a);
		return 0;
	case T_LINK:
		last_rc = act_link(ctx, a);
		return 0;
	case T_UNLINK:
		last_rc = act_unlink(ctx, a);
		return 0;
	case T_TRAP:
		act_trap_exit(ctx, true);
		return 0;
	case T_EXIT:
		if ((int64_t)a < 0)
			return (int)(int64_t)a;
		act_exit(ctx, (int)a);
		return 0;
	}
	return 0;
}

static const struct act_behaviour beh = {.name = "agent", .handle = agent};

static struct act_runtime *mk(uint16_t node)
{
	struct act_params p;
	struct act_runtime *rt = NULL;
	act_params_default(&p);
	p.node = node;
	p.workers = 1;
	p.max_actors = 256;
	p.message_pool = 4096;
	p.pin = false;
	if (act_runtime_create(&p, &rt)) {
		printf("Bail out! act_runtime_create failed\n");
		exit(1);
	}
	act_set_remote_router(rt, route, rt);
	return rt;
}

static act_id spawn(struct act_runtime *rt)
{
	act_id id = ACT_ID_NONE;
	if (act_spawn(rt, &beh, NULL, &id)) {
		printf("Bail out! act_spawn failed\n");
		exit(1);
	}
	return id;
}

static void settle(void)
{
	for (int i = 0; i < 100; i++)
		if (!drain(ra, 1) && !drain(rb, 1))
			break;
}

static void cmd(act_id to, uint32_t tag, uint64_t arg)
{
	struct act_runtime *rt = act_id_node(to) == 1 ? ra : rb;
	act_tell(rt, to, tag, &arg, sizeof(arg));
	settle();
}

static const struct ev *find(act_id self, act_id from, uint32_t tag)
{
	for (unsigned i = 0; i < nev; i++)
		if (evs[i].self == self && evs[i].from == from && evs[i].tag == tag)
			return &evs[i];
	return NULL;
}

int main(void)
{
	tap_plan(16);
	ra = mk(1);
	rb = mk(2);
	const struct ev *e;

	act_id w = spawn(ra), t = spawn(rb);
	cmd(w, T_MON, t);
	uint64_t ref = last_ref;
	cmd(t, T_EXIT, (uint64_t)(int64_t)-EIO);
	e = find(w, t, ACT_TAG_DOWN);
	ok(last_rc == 0 && e && e->reason == -EIO && e->ref == ref,
	   "monitor of a remote actor: DOWN with its crash reason");

	act_id ghost = act_id_make(2, 200, 1);
	cmd(w, T_MON, ghost);
	e = find(w, ghost, ACT_TAG_DOWN);
	ok(e && e->reason == ACT_NOPROC, "monitor of a missing remote actor: DOWN noproc");

	act_id t2 = spawn(rb);
	cmd(w, T_MON, t2);
	cmd(w, T_DEMON, last_ref);
	is_int(last_rc, 0, "demonitor of a remote monitor");
	cmd(t2, T_EXIT, ACT_SHUTDOWN);
	ok(!find(w, t2, ACT_TAG_DOWN), "no DOWN after demonitor");

	act_id l = spawn(ra), t3 = spawn(rb);
	cmd(w, T_MON, l);
	cmd(l, T_LINK, t3);
	is_int(last_rc, 0, "link to a remote actor");
	cmd(t3, T_EXIT, (uint64_t)(int64_t)-EPIPE);
	e = find(w, l, ACT_TAG_DOWN);
	ok(e && e->reason == -EPIPE, "remote linked actor crashes: local peer dies with its reason");

	act_id l2 = spawn(ra), t4 = spawn(rb);
	cmd(l2, T_TRAP, 0);
	cmd(t4, T_LINK, l2);
	cmd(t4, T_EXIT, ACT_NORMAL);
	e = find(l2, t4, ACT_TAG_EXIT);
	ok(e && e->reason == ACT_NORMAL, "trapping local peer gets EXIT normal from the remote link");

	act_id t5 = spawn(rb), w5 = spawn(rb), l5 = spawn(ra);
	cmd(w5, T_MON, t5);
	cmd(l5, T_LINK, t5);
	cmd(l5, T_UNLINK, t5);
	cmd(l5, T_EXIT, (uint64_t)(int64_t)-EIO);
	ok(act_alive(rb, t5), "unlinked: the remote peer survives its crash");
	is_int(act_exit_signal(ra, t5, ACT_KILL), 0, "exit signal to a remote actor");
	settle();
	e = find(w5, t5, ACT_TAG_DOWN);
	ok(e && e->reason == ACT_KILLED, "remote kill: DOWN killed");

	act_id l6 = spawn(ra);
	cmd(l6, T_TRAP, 0);
	cmd(l6, T_LINK, t);   /* t is dead */
	e = find(l6, t, ACT_TAG_EXIT);
	ok(last_rc == 0 && e && e->reason == ACT_NOPROC, "link to a dead remote actor: EXIT noproc");

	act_id t7 = spawn(rb);
	refuse = ZB_ERR_PEER_DOWN;
	cmd(w, T_MON, t7);
	e = find(w, t7, ACT_TAG_DOWN);
	ok(last_rc == 0 && e && e->reason == ZB_ERR_PEER_DOWN,
	   "router refuses (node down): DOWN peer down at once");
	refuse = -ENOSPC;
	unsigned before = nev;
	cmd(w, T_MON, t7 + 0);
	ok(last_rc == -ENOSPC && last_ref == 0 && nev == before,
	   "router refuses (table full): act_monitor returns -ENOSPC, no DOWN");
	cmd(w, T_LINK, t7);
	is_int(last_rc, -ENOSPC, "router refuses a link: act_link returns its error");
	refuse = 0;
	ok(routed_sigs > 0, "signals went through the router (%u)", routed_sigs);

	struct act_stats sa, sb;
	act_get_stats(ra, &sa);
	act_get_stats(rb, &sb);
	act_runtime_destroy(ra);
	act_runtime_destroy(rb);
	ok(sa.actors_live >= 1 && sb.actors_live >= 1, "runtimes destroyed with live actors");
	return tap_done();
}
