/* DEMONITOR matches the monitor by ref and watcher. Refs are per-node
 * counters (both start at 1) and dataplane/remote.c passes a remote
 * watcher's ref unchanged, so a remote node's DEMONITOR used to remove a
 * local watcher's monitor that had the same ref, and its DOWN never came
 * (found in review). Poll mode, 1 worker, a router standing in for node 2. */
#include "util.h"

static struct act_runtime *rt;
static act_id target;
static uint64_t wref;
static int downs, remote_downs;

static int w_handle(struct act_ctx *c, struct act_msg *m)
{
	if (m->tag == 10)
		act_monitor(c, target, &wref);
	else if (m->tag == ACT_TAG_DOWN)
		downs++;
	return 0;
}
static int t_handle(struct act_ctx *c, struct act_msg *m)
{
	(void)c;
	(void)m;
	return 0;
}
static int router(void *ctx, struct act_msg *m)
{
	(void)ctx;
	if (act_msg_signal(m) == ACT_SIG_DOWN && act_id_node(m->to) == 2)
		remote_downs++;
	act_msg_free(rt, m);
	return 0;
}
static const struct act_behaviour w_beh = {.name = "w", .handle = w_handle};
static const struct act_behaviour t_beh = {.name = "t", .handle = t_handle};

static int remote_signal(act_id from, int sig, uint64_t ref)
{
	struct act_msg *d = act_msg_alloc(rt);
	d->from = from;
	d->to = target;
	d->ref = ref;
	return act_deliver_remote_signal(rt, d, sig, 0);
}

int main(void)
{
	tap_plan(6);
	rt = mk_rt(1, 0);
	act_set_remote_router(rt, router, NULL);
	act_id w;
	act_spawn(rt, &t_beh, NULL, &target);
	act_spawn(rt, &w_beh, NULL, &w);
	/* node 2's actors monitor the target first, with refs from node 2's
	 * counter (r1 took its first, 1), then the local watcher (this node's
	 * first ref: 1 too) */
	act_id r1 = act_id_make(2, 7, 1), r2 = act_id_make(2, 8, 1);
	is_int(remote_signal(r1, ACT_SIG_MONITOR, 1), 0, "remote monitor, ref 1");
	is_int(remote_signal(r2, ACT_SIG_MONITOR, 2), 0, "another remote monitor, ref 2");
	drain(rt, 1);
	act_tell(rt, w, 10, NULL, 0);
	drain(rt, 1);
	is_int((int)wref, 1, "local watcher's monitor has the same ref as r1's");
	/* r1 demonitors: only its own monitor goes */
	is_int(remote_signal(r1, ACT_SIG_DEMONITOR, 1), 0, "remote demonitor delivered");
	drain(rt, 1);

	act_exit_signal(rt, target, ACT_KILL);
	drain(rt, 1);
	is_int(downs, 1, "the local watcher still gets its DOWN");
	is_int(remote_downs, 1, "only the monitor left on node 2 gets a DOWN");
	act_runtime_destroy(rt);
	return tap_done();
}
