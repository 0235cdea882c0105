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
 * Poll mode, 1 worker. */
#include "util.h"

static struct act_runtime *rt;
static int starts[8];

static int c_init(struct act_ctx *c, void *arg)
{
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
	tap_plan(13);
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
	act_runtime_destroy(rt);
	return tap_done();
}
