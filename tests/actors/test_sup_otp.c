/* Supervisor restart rules that OTP fixes and the supervisor got wrong
 * (found in review):
 *  - one_for_all / rest_for_one restarted temporary children (OTP never
 *    restarts one: stopped by the strategy, it is removed);
 *  - a transient child's normal exit while the supervisor was stopping
 *    children or waiting out a backoff was handled afterwards as a failure
 *    (-ECHILD): restarted, and counted toward the intensity.
 *  - act_tell(sup, ACT_TAG_EXIT) from a plain thread (from = NONE, which is
 *    a top-level supervisor's parent) shut the whole tree down: act_send,
 *    act_tell and act_send_after accepted the runtime's reserved tags
 *    (act_deliver_remote already refused them).
 *  - a linked spawn whose init failed undid only the parent's half of the
 *    link: the parent got an EXIT for a child it never had. A supervisor
 *    retrying a child whose init keeps failing piled these up until the
 *    message pool was empty (max_restarts 20000), and handled each failed
 *    retry by recursion with an O(max_restarts) intensity scan: one crash
 *    held the worker 3.6 s with max_restarts 100000.
 *  - act_sup_start whose second child's init failed left the first child
 *    running when it trapped exits (only the link's EXIT went to it).
 *  - the backoff base*k (linear) or base << (k-1) (exponential) wrapped for
 *    a large base: the k-th delay came out small (0) instead of the cap.
 * Poll mode, 1 worker. */
#include "util.h"

static struct act_runtime *rt;
static int starts[8];

static act_id last_started;
static int c_init(struct act_ctx *c, void *arg)
{
	last_started = act_self(c);
	if ((long)arg == 7)
		act_trap_exit(c, true); /* ignores `shutdown`: killed after its grace */
	starts[(long)arg]++;
	return 0;
}
static int c_handle(struct act_ctx *c, struct act_msg *m)
{
	if (m->tag == 99)
		act_exit(c, ACT_NORMAL);
	return m->tag == 98 ? -EIO : 0; /* 98: crash */
}
static const struct act_behaviour cb = {.name = "c", .init = c_init, .handle = c_handle};

/* init fails: every start after the first (arg 0), or always (arg 1) */
static int flaky_starts;
static uint32_t min_free = UINT32_MAX;
static int flaky_init(struct act_ctx *c, void *arg)
{
	struct act_stats st;
	(void)c;
	act_get_stats(rt, &st);
	if (st.msgs_free < min_free)
		min_free = st.msgs_free;
	return arg || flaky_starts++ ? -EAGAIN : 0;
}
static const struct act_behaviour flaky = {.name = "flaky", .init = flaky_init,
					   .handle = c_handle};

/* traps exits; tag 1: spawns a linked flaky child (init fails) */
static int exits_seen, spawn_rc = 1;
static long spawn_msgs = -1; /* messages in use after the spawn - before */
static int parent_handle(struct act_ctx *c, struct act_msg *m)
{
	if (m->tag == ACT_TAG_EXIT)
		exits_seen++;
	if (m->tag == 1) {
		struct act_spawn_opts o = {.link = true};
		struct act_stats a, b;
		act_id id;
		act_get_stats(rt, &a);
		spawn_rc = act_spawn_opt(act_ctx_runtime(c), &flaky, (void *)1L, &o, &id);
		act_get_stats(rt, &b);
		spawn_msgs = (long)b.msgs_in_use - (long)a.msgs_in_use;
	}
	return 0;
}
static const struct act_behaviour parent = {.name = "parent", .handle = parent_handle};

static void pump(uint64_t ms)
{
	pump_worker0(rt, ms);
}

static uint64_t restarts(void)
{
	struct act_stats st;
	act_get_stats(rt, &st);
	return st.restarts;
}

int main(void)
{
	tap_plan(25);
	rt = mk_rt(1, 0);
	act_id sup;

	/* one_for_all: c1 (temporary) exits normally, later c0 crashes */
	struct act_child_spec ch1[2] = {
		{"c0", &cb, (void *)0L, ACT_PERMANENT, 0},
		{"c1", &cb, (void *)1L, ACT_TEMPORARY, 0},
	};
	struct act_sup_spec s1 = {.strategy = ACT_ONE_FOR_ALL, .max_restarts = 5,
				  .window_ns = 5000000000ull, .children = ch1, .n_children = 2};
	act_sup_start(rt, &s1, &sup);
	pump(1);
	act_tell(rt, act_sup_child(rt, sup, 1), 99, NULL, 0);
	pump(2);
	act_tell(rt, act_sup_child(rt, sup, 0), 98, NULL, 0);
	pump(5);
	ok(starts[0] == 2 && act_sup_child(rt, sup, 0), "one_for_all: the permanent child restarted");
	ok(starts[1] == 1 && !act_sup_child(rt, sup, 1),
	   "one_for_all: the temporary child that had exited is not restarted (starts %d)", starts[1]);
	act_exit_signal(rt, sup, ACT_SHUTDOWN);
	pump(2);

	/* rest_for_one: c2 crashes; c3 (temporary, running) is stopped and
	 * stays down; c4 (permanent) comes back */
	struct act_child_spec ch2[3] = {
		{"c2", &cb, (void *)2L, ACT_PERMANENT, 0},
		{"c3", &cb, (void *)3L, ACT_TEMPORARY, 0},
		{"c4", &cb, (void *)4L, ACT_PERMANENT, 0},
	};
	struct act_sup_spec s2 = {.strategy = ACT_REST_FOR_ONE, .max_restarts = 5,
				  .window_ns = 5000000000ull, .children = ch2, .n_children = 3};
	act_sup_start(rt, &s2, &sup);
	pump(1);
	act_tell(rt, act_sup_child(rt, sup, 0), 98, NULL, 0);
	pump(5);
	ok(starts[2] == 2 && starts[4] == 2 && act_sup_child(rt, sup, 0) &&
	   act_sup_child(rt, sup, 2), "rest_for_one: the permanent children restarted");
	ok(starts[3] == 1 && !act_sup_child(rt, sup, 1),
	   "rest_for_one: the temporary child stopped by the strategy is not restarted (starts %d)",
	   starts[3]);
	act_exit_signal(rt, sup, ACT_SHUTDOWN);
	pump(2);

	/* one_for_one with a 100 ms backoff: c6 (transient) exits normally
	 * while c5's restart waits */
	uint64_t r0 = restarts();
	struct act_child_spec ch3[2] = {
		{"c5", &cb, (void *)5L, ACT_PERMANENT, 0},
		{"c6", &cb, (void *)6L, ACT_TRANSIENT, 0},
	};
	struct act_sup_spec s3 = {.strategy = ACT_ONE_FOR_ONE, .max_restarts = 5,
				  .window_ns = 5000000000ull, .backoff = ACT_BACKOFF_LINEAR,
				  .backoff_base_ns = 100000000ull, .children = ch3, .n_children = 2};
	act_sup_start(rt, &s3, &sup);
	pump(1);
	act_tell(rt, act_sup_child(rt, sup, 0), 98, NULL, 0);
	pump(5);
	act_tell(rt, act_sup_child(rt, sup, 1), 99, NULL, 0);
	pump(300);
	ok(starts[5] == 2 && act_sup_child(rt, sup, 0), "backoff: the crashed child restarted");
	ok(starts[6] == 1 && !act_sup_child(rt, sup, 1),
	   "backoff: the transient child's normal exit is not restarted (starts %d)", starts[6]);
	is_int((int)(restarts() - r0), 1, "only the crash counts as a restart");

	/* the same while stopping: rest_for_one, c5 crashes and c7 (trapping
	 * exits, 50 ms shutdown) holds the supervisor in its stop phase; c6
	 * (transient, outside the restart set) exits normally meanwhile */
	act_exit_signal(rt, sup, ACT_SHUTDOWN);
	pump(2);
	memset(starts, 0, sizeof(starts));
	r0 = restarts();
	struct act_child_spec ch4[3] = {
		{"c6", &cb, (void *)6L, ACT_TRANSIENT, 0},
		{"c5", &cb, (void *)5L, ACT_PERMANENT, 0},
		{"c7", &cb, (void *)7L, ACT_PERMANENT, 50000000ull},
	};
	struct act_sup_spec s4 = {.strategy = ACT_REST_FOR_ONE, .max_restarts = 5,
				  .window_ns = 5000000000ull, .children = ch4, .n_children = 3};
	act_sup_start(rt, &s4, &sup);
	pump(1);
	act_tell(rt, act_sup_child(rt, sup, 1), 98, NULL, 0);
	pump(5); /* c5's EXIT handled: c7 asked to stop, kill in 50 ms */
	act_tell(rt, act_sup_child(rt, sup, 0), 99, NULL, 0);
	pump(200);
	ok(starts[5] == 2 && starts[7] == 2 && act_sup_child(rt, sup, 1) &&
	   act_sup_child(rt, sup, 2), "stop phase: the restart set came back");
	ok(starts[6] == 1 && !act_sup_child(rt, sup, 0),
	   "stop phase: the transient child's normal exit is not restarted (starts %d)", starts[6]);
	is_int((int)(restarts() - r0), 1, "only the crash counts as a restart");
	act_exit_signal(rt, sup, ACT_SHUTDOWN);
	pump(60);

	/* reserved tags: refused at the public entry points */
	act_sup_start(rt, &s1, &sup);
	pump(1);
	act_id kid = act_sup_child(rt, sup, 0);
	int rc1 = act_tell(rt, sup, ACT_TAG_EXIT, NULL, 0);
	struct act_msg *m = act_msg_alloc(rt);
	m->tag = ACT_TAG_DOWN;
	int rc2 = act_send(rt, sup, m);
	if (rc2)
		act_msg_free(rt, m);
	m = act_msg_alloc(rt);
	m->tag = ACT_TAG_EXIT;
	int rc3 = act_send_after(rt, sup, 0, m, NULL);
	if (rc3)
		act_msg_free(rt, m);
	pump(5);
	ok(rc1 == -EINVAL && rc2 == -EINVAL && rc3 == -EINVAL,
	   "act_tell, act_send, act_send_after refuse reserved tags (%d %d %d)", rc1, rc2, rc3);
	ok(act_alive(rt, sup) && act_sup_child(rt, sup, 0) == kid && act_alive(rt, kid),
	   "a forged EXIT from a thread does not shut a top-level supervisor down");
	is_int(act_tell(rt, kid, ACT_TAG_USER_MAX, NULL, 0), 0, "ACT_TAG_USER_MAX is a user tag");
	act_exit_signal(rt, sup, ACT_SHUTDOWN);
	pump(5);

	/* a linked spawn whose init fails: no EXIT, no message kept */
	struct act_stats st;
	act_get_stats(rt, &st);
	uint32_t base = st.msgs_in_use;
	act_id par;
	struct act_spawn_opts trap = {.trap_exit = true};
	act_spawn_opt(rt, &parent, NULL, &trap, &par);
	act_tell(rt, par, 1, NULL, 0);
	pump(5);
	act_get_stats(rt, &st);
	ok(spawn_rc == -EAGAIN && spawn_msgs == 0 && exits_seen == 0 && st.msgs_in_use == base,
	   "linked spawn, init fails: no EXIT signal sent to the parent (spawn %d, "
	   "messages queued by it %ld, exits %d, in use %u, %u before)",
	   spawn_rc, spawn_msgs, exits_seen, st.msgs_in_use, base);
	act_exit_signal(rt, par, ACT_KILL);
	pump(1);

	/* a child whose restarts all fail, max_restarts 20000: each failed
	 * restart is one more restart until the supervisor gives up; the pool
	 * (16384) must not drain meanwhile */
	struct act_child_spec chf[1] = {{"f", &flaky, NULL, ACT_PERMANENT, 0}};
	struct act_sup_spec sf = {.strategy = ACT_ONE_FOR_ONE, .max_restarts = 20000,
				  .window_ns = 3600000000000ull, .children = chf, .n_children = 1};
	act_get_stats(rt, &st);
	base = st.msgs_in_use;
	is_int(act_sup_start(rt, &sf, &sup), 0, "flaky child: supervisor started");
	pump(1);
	act_tell(rt, act_sup_child(rt, sup, 0), 98, NULL, 0);
	uint64_t t0 = zb_now_ns();
	for (int i = 0; i < 20000 && act_alive(rt, sup); i++)
		if (!act_worker_poll(rt, 0, 1000))
			usleep(100);
	double secs = (zb_now_ns() - t0) / 1e9;
	act_get_stats(rt, &st);
	ok(!act_alive(rt, sup) && flaky_starts == 20001,
	   "20000 failed restarts, then the supervisor gives up (starts %d, %.2f s)",
	   flaky_starts, secs);
	ok(min_free > 16000, "the message pool never drained (lowest free %u of 16384)", min_free);
	is_int(st.msgs_in_use, base, "every message back in the pool");

	/* max_restarts 100000: each restart O(1), not a scan of 100001 stamps */
	flaky_starts = 0;
	sf.max_restarts = 100000;
	act_sup_start(rt, &sf, &sup);
	pump(1);
	act_tell(rt, act_sup_child(rt, sup, 0), 98, NULL, 0);
	t0 = zb_now_ns();
	for (int i = 0; i < 100000 && act_alive(rt, sup); i++)
		if (!act_worker_poll(rt, 0, 1000))
			usleep(100);
	secs = (zb_now_ns() - t0) / 1e9;
	ok(!act_alive(rt, sup) && flaky_starts == 100001 && secs < 1.5,
	   "100000 failed restarts handled in %.2f s (starts %d; was 3.6 s)", secs, flaky_starts);

	/* a child's init fails at start: the trapping child before it goes too */
	act_get_stats(rt, &st);
	uint32_t live0 = st.actors_live;
	struct act_child_spec chi[2] = {
		{"trapper", &cb, (void *)7L, ACT_PERMANENT, 0},
		{"f", &flaky, (void *)1L, ACT_PERMANENT, 0},
	};
	struct act_sup_spec si = {.strategy = ACT_ONE_FOR_ONE, .max_restarts = 5,
				  .window_ns = 5000000000ull, .children = chi, .n_children = 2};
	last_started = ACT_ID_NONE;
	int rc = act_sup_start(rt, &si, &sup);
	act_id trapper = last_started;
	pump(20);
	act_get_stats(rt, &st);
	is_int(rc, -EAGAIN, "act_sup_start returns the failed init's error");
	ok(trapper != ACT_ID_NONE && !act_alive(rt, trapper) && st.actors_live == live0,
	   "the started child that traps exits is stopped too (alive %d, actors %u, %u before)",
	   act_alive(rt, trapper), st.actors_live, live0);

	/* backoff with a base of 2^63 ns, capped at 50 ms: the second restart
	 * (base * 2 and base << 1 wrap to 0) waits the cap too */
	for (int b = ACT_BACKOFF_LINEAR; b <= ACT_BACKOFF_EXP; b++) {
		struct act_child_spec cbk[1] = {{"c5", &cb, (void *)5L, ACT_PERMANENT, 0}};
		struct act_sup_spec sb = {.strategy = ACT_ONE_FOR_ONE, .max_restarts = 5,
					  .window_ns = 5000000000ull, .backoff = (enum act_backoff)b,
					  .backoff_base_ns = 1ull << 63, .backoff_max_ns = 50000000ull,
					  .children = cbk, .n_children = 1};
		memset(starts, 0, sizeof(starts));
		act_sup_start(rt, &sb, &sup);
		pump(1);
		act_tell(rt, act_sup_child(rt, sup, 0), 98, NULL, 0);
		pump(80);
		int s1 = starts[5];
		act_tell(rt, act_sup_child(rt, sup, 0), 98, NULL, 0);
		pump(20);
		int s2 = starts[5];
		pump(60);
		ok(s1 == 2 && s2 == 2, "%s backoff, huge base: the second restart waits the cap (starts %d, %d within 20 ms)",
		   b == ACT_BACKOFF_LINEAR ? "linear" : "exponential", s1, s2);
		is_int(starts[5], 3, "and then happens");
		act_exit_signal(rt, sup, ACT_SHUTDOWN);
		pump(2);
	}
	act_runtime_destroy(rt);
	return tap_done();
}
