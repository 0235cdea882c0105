/* helper_remote_mon — remote monitors and links (zbmd/remote.h) between two
 * nodes hosting the actor runtime on their dataplane lcores, as `zbmd run`
 * does. Two roles:
 *
 *   helper_remote_mon -c NODE.ini --serve IDS_FILE
 *       spawns a factory agent, writes "factory=0xID" and "end" to IDS_FILE,
 *       serves until SIGTERM (or until it is killed: the node-loss case).
 *
 *   helper_remote_mon -c NODE.ini --drive IDS_FILE --kill-flag FILE
 *       runs the scenarios against the serving node, printing
 *       "CHECK ok|fail DESCRIPTION" lines; then prints "PHASE kill", waits
 *       for FILE (the test kills the serving node with SIGKILL and creates
 *       FILE at once) and checks the noconnection notices and their delay.
 *       Exit 0 when every check passed.
 *
 * Agents: an actor that does what an inline request (act_call) says inside
 * its own context: monitor / demonitor / link / unlink / trap exits / exit
 * with a reason / spawn another agent / report counters. Every DOWN or EXIT
 * it receives goes as a T_EVENT message to its `report` actor, the driver's
 * collector, which appends it to an event log the driver thread reads.
 */
#include "zbmd/actors.h"
#include "zbmd/common.h"
#include "zbmd/config.h"
#include "zbmd/dataplane.h"
#include "zbmd/remote.h"
#include "zbmd/transport.h"
#include "node_helper.h"

#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { T_REQ = 1, T_EVENT };
enum { OP_PING = 1, OP_MONITOR, OP_DEMONITOR, OP_LINK, OP_UNLINK, OP_TRAP,
       OP_EXIT, OP_SPAWN, OP_STATS, OP_MONMANY, OP_DEMONMANY };

/* OP_MONMANY's refs (one agent of the driver node uses them) */
#define MAX_REFS 2048
static uint64_t many_refs[MAX_REFS];
static unsigned n_many;

struct req {
	uint32_t op;
	int32_t arg;
	act_id target;
	uint64_t ref;
};
struct rep {
	int32_t rc;
	uint32_t pad;
	uint64_t v0, v1, v2;
};
struct event {
	uint32_t tag;      /* ACT_TAG_DOWN / ACT_TAG_EXIT */
	int32_t reason;
	act_id self, from;
	uint64_t ref;
};

static struct zb_config cfg;
static struct act_runtime *rt;
static volatile sig_atomic_t stop;
static int failures;

/* ---- the agent --------------------------------------------------------------- */

static const struct act_behaviour agent_beh;

static int agent_init(struct act_ctx *ctx, void *arg)
{
	*(act_id *)act_state(ctx) = (act_id)(uintptr_t)arg;
	return 0;
}

static void answer(struct act_runtime *r, const struct act_msg *m, int rc,
		   uint64_t v0, uint64_t v1, uint64_t v2)
{
	struct rep p = {rc, 0, v0, v1, v2};
	struct act_msg *re = act_msg_alloc(r);
	if (!re)
		return;
	act_msg_set_bytes(re, &p, sizeof(p));
	if (act_reply(r, m, re))
		act_msg_free(r, re);
}

static int agent_handle(struct act_ctx *ctx, struct act_msg *m)
{
	struct act_runtime *r = act_ctx_runtime(ctx);
	act_id report = *(act_id *)act_state(ctx);
	if (m->tag == ACT_TAG_DOWN || m->tag == ACT_TAG_EXIT) {
		struct event e = {m->tag, act_msg_reason(m), act_self(ctx), m->from, m->ref};
		if (report != ACT_ID_NONE)
			act_tell(r, report, T_EVENT, &e, sizeof(e));
		return 0;
	}
	if (m->tag != T_REQ || m->kind != ACT_PL_INLINE || m->len != sizeof(struct req))
		return 0;
	struct req q;
	memcpy(&q, m->u.bytes, sizeof(q));
	uint64_t ref = 0;
	int rc = 0;
	switch (q.op) {
	case OP_PING:
		break;
	case OP_MONITOR:
		rc = act_monitor(ctx, q.target, &ref);
		break;
	case OP_DEMONITOR:
		rc = act_demonitor(ctx, q.ref);
		break;
	case OP_LINK:
		rc = act_link(ctx, q.target);
		break;
	case OP_UNLINK:
		rc = act_unlink(ctx, q.target);
		break;
	case OP_TRAP:
		act_trap_exit(ctx, q.arg != 0);
		break;
	case OP_EXIT:
		answer(r, m, 0, 0, 0, 0);
		if (q.arg < 0)
			return q.arg;     /* a crash: the handler fails */
		act_exit(ctx, q.arg);
		return 0;
	case OP_SPAWN: {
		act_id id = ACT_ID_NONE;
		rc = act_spawn(r, &agent_beh, (void *)(uintptr_t)q.target, &id);
		ref = id;
		break;
	}
	case OP_MONMANY:   /* arg monitors of target; stops at the first error */
		while (n_many < MAX_REFS && ref < (uint64_t)q.arg) {
			rc = act_monitor(ctx, q.target, &many_refs[n_many]);
			if (rc)
				break;
			n_many++;
			ref++;
		}
		break;
	case OP_DEMONMANY: /* the last arg of them */
		while (n_many > 0 && ref < (uint64_t)q.arg) {
			rc = act_demonitor(ctx, many_refs[--n_many]);
			if (rc)
				break;
			ref++;
		}
		break;
	case OP_STATS: {
		struct zbra_stats zs;
		zbra_get_stats(&zs);
		answer(r, m, 0, zs.bad, zs.signals, zs.rtab_live);
		return 0;
	}
	default:
		rc = -EINVAL;
	}
	answer(r, m, rc, ref, 0, 0);
	return 0;
}

static const struct act_behaviour agent_beh = {
	.name = "agent", .state_size = sizeof(act_id),
	.init = agent_init, .handle = agent_handle,
};

/* ---- the collector (driver node) --------------------------------------------- */

#define MAX_EVENTS 256
static pthread_mutex_t ev_lock = PTHREAD_MUTEX_INITIALIZER;
static struct event events[MAX_EVENTS];
static uint64_t ev_at[MAX_EVENTS];
static unsigned nevents;

static int coll_handle(struct act_ctx *ctx, struct act_msg *m)
{
	(void)ctx;
	if (m->tag != T_EVENT || m->kind != ACT_PL_INLINE ||
	    m->len != sizeof(struct event))
		return 0;
	pthread_mutex_lock(&ev_lock);
	if (nevents < MAX_EVENTS) {
		memcpy(&events[nevents], m->u.bytes, sizeof(struct event));
		ev_at[nevents++] = zb_now_ns();
	}
	pthread_mutex_unlock(&ev_lock);
	return 0;
}

static const struct act_behaviour coll_beh = {
	.name = "collector", .handle = coll_handle,
};

/* Waits up to ms for an event (tag, self, from; ref when nonzero); true and
 * *out (and *at, its arrival time) when found. */
static bool wait_event(uint32_t tag, act_id self, act_id from, uint64_t ref,
		       unsigned ms, struct event *out, uint64_t *at)
{
	uint64_t end = zb_now_ns() + ms * 1000000ull;
	do {
		pthread_mutex_lock(&ev_lock);
		for (unsigned i = 0; i < nevents; i++) {
			const struct event *e = &events[i];
			if (e->tag == tag && e->self == self && e->from == from &&
			    (!ref || e->ref == ref)) {
				if (out)
					*out = *e;
				if (at)
					*at = ev_at[i];
				pthread_mutex_unlock(&ev_lock);
				return true;
			}
		}
		pthread_mutex_unlock(&ev_lock);
		usleep(1000);
	} while (zb_now_ns() < end);
	return false;
}

/* ---- driver -------------------------------------------------------------------- */

static void check(bool cond, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void check(bool cond, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	printf("CHECK %s ", cond ? "ok" : "fail");
	vprintf(fmt, ap);
	printf("\n");
	fflush(stdout);
	va_end(ap);
	failures += !cond;
}

/* Calls agent `to` with op; the reply's rc (or the call's error), *r. */
static int op(act_id to, uint32_t o, act_id target, int32_t arg, uint64_t ref,
	      struct rep *r)
{
	struct req q = {o, arg, target, ref};
	struct rep dummy;
	struct act_msg *m = act_msg_alloc(rt), *re = NULL;
	if (!r)
		r = &dummy;
	memset(r, 0, sizeof(*r));
	if (!m)
		return -ENOBUFS;
	m->tag = T_REQ;
	act_msg_set_bytes(m, &q, sizeof(q));
	int rc = act_call(rt, to, m, 3000000000ull, &re);
	if (rc)
		return rc;
	if (re->kind == ACT_PL_INLINE && re->len == sizeof(*r))
		memcpy(r, re->u.bytes, sizeof(*r));
	else
		rc = -EPROTO;
	act_msg_free(rt, re);
	return rc ? rc : r->rc;
}

static act_id collector, factory;

static act_id local_agent(void)
{
	act_id id = ACT_ID_NONE;
	if (act_spawn(rt, &agent_beh, (void *)(uintptr_t)collector, &id))
		return ACT_ID_NONE;
	return id;
}

static act_id remote_agent(void)
{
	struct rep r;
	if (op(factory, OP_SPAWN, collector, 0, 0, &r))
		return ACT_ID_NONE;
	return (act_id)r.v0;
}

static uint64_t monitor(act_id w, act_id target)
{
	struct rep r;
	int rc = op(w, OP_MONITOR, target, 0, 0, &r);
	return rc ? 0 : r.v0;
}

/* Signal records the serving node / this node has applied so far. With
 * several lanes a monitor made by W and a request sent by the driver travel
 * on different lanes (per-pair order only): the driver waits until the
 * monitor or link has arrived before it makes the target exit. */
static uint64_t remote_signals(void)
{
	struct rep r;
	return op(factory, OP_STATS, ACT_ID_NONE, 0, 0, &r) ? 0 : r.v1;
}

static uint64_t local_signals(void)
{
	struct zbra_stats zs;
	zbra_get_stats(&zs);
	return zs.signals;
}

static bool wait_signals(uint64_t (*count)(void), uint64_t want)
{
	uint64_t end = zb_now_ns() + 3000000000ull;
	while (count() < want)
		if (zb_now_ns() > end)
			return false;
		else
			usleep(1000);
	return true;
}

static bool alive_remote(act_id v)
{
	return op(v, OP_PING, ACT_ID_NONE, 0, 0, NULL) == 0;
}

/* DOWN at w for ref from v with reason want. */
static void expect_down(const char *what, act_id w, act_id v, uint64_t ref, int want)
{
	struct event e;
	bool got = wait_event(ACT_TAG_DOWN, w, v, ref, 5000, &e, NULL);
	check(got && e.reason == want, "%s: DOWN with reason %s (got %s)", what,
	      act_reason_name(want), got ? act_reason_name(e.reason) : "none");
}

static void expect_exit(const char *what, act_id l, act_id from, int want)
{
	struct event e;
	bool got = wait_event(ACT_TAG_EXIT, l, from, 0, 5000, &e, NULL);
	check(got && e.reason == want, "%s: EXIT message with reason %s (got %s)",
	      what, act_reason_name(want), got ? act_reason_name(e.reason) : "none");
}

static int read_ids(const char *path, unsigned wait_s)
{
	uint64_t end = zb_now_ns() + wait_s * 1000000000ull;
	for (;;) {
		FILE *f = fopen(path, "r");
		char line[128];
		unsigned long long v;
		bool end_seen = false;
		while (f && fgets(line, sizeof(line), f)) {
			if (strncmp(line, "end", 3) == 0)
				end_seen = true;
			else if (sscanf(line, "factory=%llx", &v) == 1)
				factory = v;
		}
		if (f)
			fclose(f);
		if (end_seen && factory)
			return 0;
		if (zb_now_ns() > end)
			return -ETIMEDOUT;
		usleep(50000);
	}
}

/* Lane 0's poller: when asked, sends malformed signal records to the
 * serving node (only from lane 0's lcore: it owns lane 0's transport). */
#define NBAD 7
static _Atomic int inject_go, inject_done;
static uint16_t inject_peer;
static act_id inject_to;

static unsigned injector(void *arg, uint64_t now_tsc)
{
	(void)arg;
	if (!atomic_load_explicit(&inject_go, memory_order_acquire) ||
	    atomic_load(&inject_done))
		return 0;
	static uint8_t msgs[NBAD][ZBRA_HDR_LEN];
	/* a well-formed UNLINK from our slot 1 to the agent, then broken ones */
	uint8_t good[ZBRA_HDR_LEN] = {0};
	uint32_t magic = 0x5a425241u, sig = ACT_SIG_UNLINK;
	uint64_t from = act_id_make(cfg.node.id, 1, 1), to = inject_to;
	memcpy(good, &magic, 4);
	good[4] = 1;                     /* version */
	good[5] = 8;                     /* signal record */
	memcpy(good + 8, &sig, 4);
	memcpy(good + 16, &from, 8);
	memcpy(good + 24, &to, 8);
	for (int i = 0; i < NBAD; i++)
		memcpy(msgs[i], good, sizeof(good));
	msgs[0][8] = 9;                  /* an unknown signal */
	uint64_t other = act_id_make((uint16_t)(cfg.node.id + 7), 1, 1);
	memcpy(msgs[1] + 16, &other, 8); /* from a node that is not the sender */
	msgs[2][8] = ACT_SIG_MONITOR;    /* a monitor without a ref */
	uint64_t big = 1ull << 40;
	msgs[3][8] = ACT_SIG_EXIT_LINK;
	memcpy(msgs[3] + 48, &big, 8);   /* reason out of int32 range */
	msgs[4][56] = 1;                 /* d1 must be 0 */
	msgs[5][7] = 4;                  /* inline bytes on a signal (none follow) */
	msgs[6][8] = 15;                 /* a tick with actor ids */
	unsigned first;
	zbra_streams(&first);
	for (int i = 0; i < NBAD; i++)
		if (tp_send(dp_transport(0), inject_peer, (uint16_t)first, msgs[i],
			    sizeof(msgs[i]), NULL, 0, dp_now_ns(now_tsc)) != 0)
			return 0;
	atomic_store(&inject_done, 1);
	return NBAD;
}

/* Membership views applied on every lane by its own poller, as the control
 * glue of `zbmd run` does (dp_cluster_apply). */
#define MAX_LANES 16
static struct dp_cluster_view views[4];
static _Atomic int view_req;
static _Atomic int view_done[MAX_LANES];

static unsigned applier(void *arg, uint64_t now_tsc)
{
	unsigned idx = (unsigned)(uintptr_t)arg;
	int e = atomic_load_explicit(&view_req, memory_order_acquire);
	if (!e || atomic_load(&view_done[idx]) == e)
		return 0;
	dp_cluster_apply(idx, &views[e], now_tsc);
	atomic_store_explicit(&view_done[idx], e, memory_order_release);
	return 1;
}

static bool apply_view(int epoch, uint16_t a, uint16_t b)
{
	struct dp_cluster_view *v = &views[epoch];
	memset(v, 0, sizeof(*v));
	v->epoch = (uint64_t)epoch;
	v->leader = a;
	v->ring[v->n_members++] = a;
	if (b != UINT16_MAX)
		v->ring[v->n_members++] = b;
	atomic_store_explicit(&view_req, epoch, memory_order_release);
	uint64_t end = zb_now_ns() + 3000000000ull;
	for (unsigned i = 0; i < dp_lcore_count() && i < MAX_LANES; i++)
		while (atomic_load_explicit(&view_done[i], memory_order_acquire) != epoch)
			if (zb_now_ns() > end)
				return false;
			else
				usleep(1000);
	return true;
}

static void drive(const char *ids_path, const char *kill_flag)
{
	if (act_spawn(rt, &coll_beh, NULL, &collector) || read_ids(ids_path, 120)) {
		check(false, "collector spawned and serving node's ids read");
		return;
	}
	uint16_t peer = act_id_node(factory);
	check(alive_remote(factory), "remote factory agent answers a call");

	/* 1-2: monitor, remote exits normally / crashes */
	act_id w = local_agent(), v = remote_agent();
	uint64_t sb = remote_signals();
	uint64_t ref = monitor(w, v);
	wait_signals(remote_signals, sb + 1);
	check(w && v && act_id_node(v) == peer && ref, "local agent monitors a remote agent (ref %llu)",
	      (unsigned long long)ref);
	op(v, OP_EXIT, ACT_ID_NONE, ACT_NORMAL, 0, NULL);
	expect_down("remote actor exits normally", w, v, ref, ACT_NORMAL);
	act_id v2 = remote_agent();
	sb = remote_signals();
	uint64_t ref2 = monitor(w, v2);
	wait_signals(remote_signals, sb + 1);
	op(v2, OP_EXIT, ACT_ID_NONE, -EIO, 0, NULL);
	expect_down("remote actor crashes (handler returns -EIO)", w, v2, ref2, -EIO);

	/* 3: noproc: a dead id, and a slot never used */
	uint64_t ref3 = monitor(w, v);
	expect_down("monitor of a dead remote actor", w, v, ref3, ACT_NOPROC);
	act_id ghost = act_id_make(peer, 60000, 3);
	uint64_t ref4 = monitor(w, ghost);
	expect_down("monitor of a never-used remote slot", w, ghost, ref4, ACT_NOPROC);
	act_id gen0 = act_id_make(peer, 7, 0);
	uint64_t ref4b = monitor(w, gen0);
	expect_down("monitor of a remote id with generation 0", w, gen0, ref4b, ACT_NOPROC);

	/* 4: demonitor: no DOWN for it afterwards */
	act_id w2 = local_agent(), v3 = remote_agent();
	sb = remote_signals();
	uint64_t r5 = monitor(w, v3), r6 = monitor(w2, v3);
	wait_signals(remote_signals, sb + 2);
	int rc = op(w, OP_DEMONITOR, ACT_ID_NONE, 0, r5, NULL);
	op(v3, OP_EXIT, ACT_ID_NONE, -EIO, 0, NULL);
	expect_down("second watcher of a demonitored actor still told", w2, v3, r6, -EIO);
	usleep(200000);
	check(rc == 0 && !wait_event(ACT_TAG_DOWN, w, v3, r5, 1, NULL, NULL),
	      "demonitor: no DOWN for the cancelled monitor (rc %d)", rc);

	/* 5: link local -> remote, local crashes: the remote peer dies with it */
	act_id l = local_agent(), v4 = remote_agent();
	sb = remote_signals();
	uint64_t r7 = monitor(w2, v4);
	wait_signals(remote_signals, sb + 1);
	rc = op(l, OP_LINK, v4, 0, 0, NULL);
	check(rc == 0, "local agent links to a remote agent (rc %d)", rc);
	op(l, OP_EXIT, ACT_ID_NONE, -EPIPE, 0, NULL);
	expect_down("local linked actor crashes: remote peer killed", w2, v4, r7, -EPIPE);

	/* 6: the same with the remote peer trapping exits: EXIT message */
	act_id l2 = local_agent(), v5 = remote_agent();
	op(v5, OP_TRAP, ACT_ID_NONE, 1, 0, NULL);
	op(l2, OP_LINK, v5, 0, 0, NULL);
	op(l2, OP_EXIT, ACT_ID_NONE, -EPIPE, 0, NULL);
	expect_exit("remote trapping peer of a crashed local actor", v5, l2, -EPIPE);
	check(alive_remote(v5), "remote trapping peer still alive");

	/* 7: link remote -> local, remote crashes: the local peer dies */
	act_id l3 = local_agent(), v6 = remote_agent();
	uint64_t r8 = monitor(w2, l3);
	uint64_t lb = local_signals();
	rc = op(v6, OP_LINK, l3, 0, 0, NULL);
	check(rc == 0 && wait_signals(local_signals, lb + 1),
	      "remote agent links to a local agent (rc %d)", rc);
	op(v6, OP_EXIT, ACT_ID_NONE, -ECONNRESET, 0, NULL);
	expect_down("remote linked actor crashes: local peer killed", w2, l3, r8, -ECONNRESET);

	/* 8: the local peer trapping exits */
	act_id l4 = local_agent(), v7 = remote_agent();
	op(l4, OP_TRAP, ACT_ID_NONE, 1, 0, NULL);
	lb = local_signals();
	op(v7, OP_LINK, l4, 0, 0, NULL);
	wait_signals(local_signals, lb + 1);
	op(v7, OP_EXIT, ACT_ID_NONE, -EIO, 0, NULL);
	expect_exit("local trapping peer of a crashed remote actor", l4, v7, -EIO);
	check(op(l4, OP_PING, ACT_ID_NONE, 0, 0, NULL) == 0, "local trapping peer still alive");

	/* 9: unlink, and a normal exit: the remote peer lives on */
	act_id l5 = local_agent(), l6 = local_agent(), v8 = remote_agent();
	op(l5, OP_LINK, v8, 0, 0, NULL);
	rc = op(l5, OP_UNLINK, v8, 0, 0, NULL);
	op(l5, OP_EXIT, ACT_ID_NONE, -EIO, 0, NULL);
	op(l6, OP_LINK, v8, 0, 0, NULL);
	op(l6, OP_EXIT, ACT_ID_NONE, ACT_NORMAL, 0, NULL);
	usleep(300000);
	check(rc == 0 && alive_remote(v8),
	      "unlinked (then crashed) and normally exiting linked actors leave the remote peer alive");

	/* 9b: act_exit_signal to a remote actor from this (non-actor) thread:
	 * an error reason kills it, ACT_KILL kills a trapping one `killed` */
	act_id v9 = remote_agent(), v10 = remote_agent();
	sb = remote_signals();
	uint64_t r9 = monitor(w2, v9), r10 = monitor(w2, v10);
	wait_signals(remote_signals, sb + 2);
	op(v10, OP_TRAP, ACT_ID_NONE, 1, 0, NULL);
	rc = act_exit_signal(rt, v9, -ETIMEDOUT);
	check(rc == 0, "act_exit_signal to a remote actor accepted (rc %d)", rc);
	expect_down("remote exit signal", w2, v9, r9, -ETIMEDOUT);
	act_exit_signal(rt, v10, ACT_KILL);
	expect_down("remote kill signal to a trapping actor", w2, v10, r10, ACT_KILLED);

	/* 10: link to a dead remote actor: EXIT noproc (trapping) */
	act_id l7 = local_agent();
	op(l7, OP_TRAP, ACT_ID_NONE, 1, 0, NULL);
	rc = op(l7, OP_LINK, v, 0, 0, NULL);
	expect_exit("link to a dead remote actor", l7, v, ACT_NOPROC);

	/* 11: malformed signal records are counted and dropped */
	struct rep st0, st1;
	op(factory, OP_STATS, ACT_ID_NONE, 0, 0, &st0);
	inject_peer = peer;
	inject_to = v8;
	atomic_store_explicit(&inject_go, 1, memory_order_release);
	uint64_t end = zb_now_ns() + 5000000000ull;
	do {
		usleep(20000);
		op(factory, OP_STATS, ACT_ID_NONE, 0, 0, &st1);
	} while (st1.v0 < st0.v0 + NBAD && zb_now_ns() < end);
	check(st1.v0 == st0.v0 + NBAD && alive_remote(v8),
	      "%d malformed signal records counted as bad (%llu) and dropped, node serving",
	      NBAD, (unsigned long long)(st1.v0 - st0.v0));

	/* 11a: the table is bounded: [actors] remote_links (both nodes run
	 * the same value) links and monitors per peer node; one more is
	 * refused with -ENOSPC, and demonitoring frees the room (in chunks:
	 * the lane's ring holds 1024 signals) */
	struct zbra_stats zs;
	act_id wm = local_agent(), vm = remote_agent();
	const unsigned cap = cfg.actors.remote_links;
	unsigned made = 0;
	int mrc = 0;
	while (made < cap && mrc == 0) {
		struct rep r;
		unsigned k = cap - made < 256 ? cap - made : 256;
		sb = remote_signals();
		mrc = op(wm, OP_MONMANY, vm, k, 0, &r);
		made += (unsigned)r.v0;
		wait_signals(remote_signals, sb + r.v0);
	}
	struct rep rf;
	int frc = op(wm, OP_MONMANY, vm, 1, 0, &rf);
	op(factory, OP_STATS, ACT_ID_NONE, 0, 0, &st1);
	zbra_get_stats(&zs);
	check(mrc == 0 && made == cap && frc == -ENOSPC && zs.rtab_live == cap &&
	      zs.rtab_full >= 1 && st1.v2 == cap,
	      "%u remote monitors of one node recorded ([actors] remote_links), the next refused: %s (here %llu, there %llu)",
	      cap, zb_strerror(frc), (unsigned long long)zs.rtab_live, (unsigned long long)st1.v2);
	for (unsigned left = made; left > 0;) {
		unsigned k = left < 256 ? left : 256;
		sb = remote_signals();
		struct rep r;
		op(wm, OP_DEMONMANY, ACT_ID_NONE, k, 0, &r);
		wait_signals(remote_signals, sb + r.v0);
		left -= k;
	}
	frc = op(wm, OP_MONMANY, vm, 1, 0, &rf);
	op(wm, OP_DEMONMANY, ACT_ID_NONE, 1, 0, NULL);
	op(vm, OP_EXIT, ACT_ID_NONE, ACT_NORMAL, 0, NULL);
	usleep(100000);
	check(frc == 0 && rf.v0 == 1 && !wait_event(ACT_TAG_DOWN, wm, vm, 0, 1, NULL, NULL),
	      "after demonitoring them, monitors are accepted again (rc %d), no DOWN for any",
	      frc);

	/* tables hold nothing for finished links and monitors: 0 entries on
	 * either side now */
	zbra_get_stats(&zs);
	op(factory, OP_STATS, ACT_ID_NONE, 0, 0, &st1);
	check(zs.rtab_live == 0 && st1.v2 == 0,
	      "no remote link/monitor entries left (here %llu, there %llu)",
	      (unsigned long long)zs.rtab_live, (unsigned long long)st1.v2);

	/* 11b: a committed membership view drops the node: noconnection at
	 * once (session reset), not after the peer timeout; the node, reset
	 * by the new session epoch, drops its side too; then it rejoins */
	act_id we = local_agent(), le = local_agent(), ve = remote_agent();
	sb = remote_signals();
	uint64_t re = monitor(we, ve);
	op(le, OP_TRAP, ACT_ID_NONE, 1, 0, NULL);
	rc = op(le, OP_LINK, ve, 0, 0, NULL);
	wait_signals(remote_signals, sb + 2);
	bool ok1 = apply_view(1, cfg.node.id, peer);
	uint64_t te = zb_now_ns(), ate = 0;
	bool ok2 = apply_view(2, cfg.node.id, UINT16_MAX);
	struct event ee = {0}, el = {0};
	bool ge = wait_event(ACT_TAG_DOWN, we, ve, re, 3000, &ee, &ate);
	bool gl = wait_event(ACT_TAG_EXIT, le, ve, 0, 1000, &el, NULL);
	double mse = (double)(ate - te) / 1e6;
	check(ok1 && ok2 && rc == 0 && ge && gl && ee.reason == ZB_ERR_PEER_DOWN &&
	      el.reason == ZB_ERR_PEER_DOWN && mse < 1000,
	      "view drops the node: DOWN and EXIT %s after %.0f ms (got %s, %s)",
	      act_reason_name(ZB_ERR_PEER_DOWN), mse,
	      ge ? act_reason_name(ee.reason) : "none", gl ? act_reason_name(el.reason) : "none");
	bool ok3 = apply_view(3, cfg.node.id, peer);
	end = zb_now_ns() + 5000000000ull;
	do {
		usleep(20000);
		rc = op(factory, OP_STATS, ACT_ID_NONE, 0, 0, &st1);
	} while ((rc || st1.v2) && zb_now_ns() < end);
	zbra_get_stats(&zs);
	check(ok3 && rc == 0 && zs.rtab_live == 0 && st1.v2 == 0,
	      "node rejoins: calls work, no entries left on either side (here %llu, there %llu)",
	      (unsigned long long)zs.rtab_live, (unsigned long long)st1.v2);

	/* 12: node loss: kill -9 of the serving node */
	act_id wk = local_agent(), lt = local_agent(), ln = local_agent(),
	       wn = local_agent(), vk = remote_agent(), vk2 = remote_agent();
	uint64_t rk = monitor(wk, vk), rn = monitor(wn, ln);
	op(lt, OP_TRAP, ACT_ID_NONE, 1, 0, NULL);
	int rc1 = op(lt, OP_LINK, vk, 0, 0, NULL);
	int rc2 = op(vk2, OP_LINK, ln, 0, 0, NULL);
	end = zb_now_ns() + 3000000000ull;
	do {
		usleep(1000);
		zbra_get_stats(&zs);
		op(factory, OP_STATS, ACT_ID_NONE, 0, 0, &st1);
	} while ((zs.rtab_live != 3 || st1.v2 != 3) && zb_now_ns() < end);
	check(rk && rn && rc1 == 0 && rc2 == 0 && zs.rtab_live == 3 && st1.v2 == 3,
	      "before the kill: 3 remote entries on each side (here %llu, there %llu)",
	      (unsigned long long)zs.rtab_live, (unsigned long long)st1.v2);
	printf("PHASE kill\n");
	fflush(stdout);
	while (access(kill_flag, F_OK) != 0)
		usleep(1000);
	uint64_t t0 = zb_now_ns(), at1 = 0, at2 = 0, at3 = 0;
	unsigned pto = cfg.transport.peer_timeout_ms ? cfg.transport.peer_timeout_ms : 1000;
	unsigned lim = pto + pto / 2 + 1000;
	struct event e1 = {0}, e2 = {0};
	bool g1 = wait_event(ACT_TAG_DOWN, wk, vk, rk, lim + 3000, &e1, &at1);
	bool g2 = wait_event(ACT_TAG_EXIT, lt, vk, 0, 1000, &e2, &at2);
	bool g3 = wait_event(ACT_TAG_DOWN, wn, ln, rn, 1000, NULL, &at3);
	struct event e3 = {0};
	wait_event(ACT_TAG_DOWN, wn, ln, rn, 1, &e3, NULL);
	double ms1 = g1 ? (double)(at1 - t0) / 1e6 : -1;
	check(g1 && e1.reason == ZB_ERR_PEER_DOWN,
	      "node killed: monitor DOWN with reason %s (got %s)",
	      act_reason_name(ZB_ERR_PEER_DOWN), g1 ? act_reason_name(e1.reason) : "none");
	check(g2 && e2.reason == ZB_ERR_PEER_DOWN,
	      "node killed: trapping linked actor gets EXIT %s (got %s)",
	      act_reason_name(ZB_ERR_PEER_DOWN), g2 ? act_reason_name(e2.reason) : "none");
	check(g3 && e3.reason == ZB_ERR_PEER_DOWN,
	      "node killed: non-trapping linked actor dies with %s (got %s)",
	      act_reason_name(ZB_ERR_PEER_DOWN), g3 ? act_reason_name(e3.reason) : "none");
	check(g1 && ms1 < lim,
	      "node loss noticed within the peer timeout (%u ms) plus a tick: %.0f ms (limit %u ms)",
	      pto, ms1, lim);
	printf("FIGURE node_loss_ms=%.0f peer_timeout_ms=%u\n", ms1, pto);
	uint64_t rz = monitor(wk, vk2);
	expect_down("monitor of an actor on the lost node", wk, vk2, rz, ZB_ERR_PEER_DOWN);
	rc = op(lt, OP_LINK, vk2, 0, 0, NULL);
	check(rc == ZB_ERR_PEER_DOWN, "link to an actor on the lost node: %s", zb_strerror(rc));
	zbra_get_stats(&zs);
	check(zs.rtab_live == 0 && zs.lost_notices >= 3,
	      "node loss emptied the table (%llu left, %llu notices)",
	      (unsigned long long)zs.rtab_live, (unsigned long long)zs.lost_notices);
	(void)at2;
	(void)at3;
}

/* ---- main ---------------------------------------------------------------------- */

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
	dp_node_request_stop();
}

static int serve(const char *ids_path)
{
	act_id f;
	if (act_spawn(rt, &agent_beh, NULL, &f))
		return -ENOBUFS;
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s.tmp", ids_path);
	FILE *fp = fopen(tmp, "w");
	if (!fp)
		return -errno;
	fprintf(fp, "factory=0x%016llx\nend\n", (unsigned long long)f);
	fclose(fp);
	return rename(tmp, ids_path) ? -errno : 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"serve", required_argument, NULL, 's'},
		{"drive", required_argument, NULL, 'd'},
		{"kill-flag", required_argument, NULL, 'k'},
		{NULL, 0, NULL, 0},
	};
	const char *path = NULL, *serve_ids = NULL, *drive_ids = NULL, *kflag = NULL;
	int c;
	while ((c = getopt_long(argc, argv, "c:", opts, NULL)) != -1) {
		switch (c) {
		case 'c': path = optarg; break;
		case 's': serve_ids = optarg; break;
		case 'd': drive_ids = optarg; break;
		case 'k': kflag = optarg; break;
		default: return 2;
		}
	}
	struct cfg_error cerr;
	if (!path || !serve_ids == !drive_ids || (drive_ids && !kflag) ||
	    cfg_load_file(&cfg, path, &cerr) != 0) {
		fprintf(stderr, "usage: helper_remote_mon -c NODE.ini --serve IDS | --drive IDS --kill-flag F%s%s\n",
			path ? ": " : "", path ? cerr.msg : "");
		return 2;
	}
	sigset_t old;
	nh_signals_block(on_signal, &old);
	struct dp_err err;
	if (dp_node_init(&cfg, &err) != 0) {
		fprintf(stderr, "helper_remote_mon: %s\n", err.msg);
		return 1;
	}
	int rc = zbra_host(&cfg, &rt);
	if (rc == 0 && drive_ids)
		rc = dp_register_poller(0, injector, NULL);
	for (unsigned i = 0; rc == 0 && drive_ids && i < dp_lcore_count() && i < MAX_LANES; i++)
		rc = dp_register_poller(i, applier, (void *)(uintptr_t)i);
	if (rc == 0 && dp_node_launch(&err) != 0)
		rc = -EIO;
	if (rc) {
		fprintf(stderr, "helper_remote_mon: start: %s %s\n", zb_strerror(rc), err.msg);
		dp_node_fini();
		return 1;
	}
	printf("READY node=%u lanes=%u\n", cfg.node.id, dp_lcore_count());
	fflush(stdout);
	if (serve_ids) {
		rc = serve(serve_ids);
		if (rc)
			fprintf(stderr, "helper_remote_mon: serve: %s\n", zb_strerror(rc));
		sigset_t wait_mask = old;
		sigdelset(&wait_mask, SIGINT);
		sigdelset(&wait_mask, SIGTERM);
		while (!stop && rc == 0)
			sigsuspend(&wait_mask);
	} else {
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		drive(drive_ids, kflag);
		printf("DONE failures=%d\n", failures);
		fflush(stdout);
	}
	dp_node_request_stop();
	dp_node_stop();
	act_runtime_destroy(rt);
	zbra_detach();
	dp_node_fini();
	return rc || failures ? 1 : 0;
}
