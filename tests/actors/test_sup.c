/* Supervisors: each strategy restarts exactly the right children in the
 * right order (table-driven), stops in reverse order, intensity escalates to
 * the parent, backoff delays are observed. Poll mode, one worker.
 * act_sup_start_child: its answer (ACT_TAG_SUP_STARTED) reaches the asking
 * actor; it used to send none and return 0 for a full simple_one_for_one,
 * a one_for_one supervisor and a plain actor (which got the supervisor's
 * private tag). */
#include "util.h"

/* start_child client: tag 1 {sup, arg} asks; answers are recorded */
#define SC_MAX 8
static int sc_sync[SC_MAX], sc_nsync;
static int sc_reason[SC_MAX], sc_nans;
static act_id sc_child[SC_MAX];
static uint32_t sc_stray;
static int sc_handle(struct act_ctx *ctx, struct act_msg *m)
{
	if (m->tag == 1 && sc_nsync < SC_MAX) {
		act_id sup;
		void *arg;
		memcpy(&sup, m->u.bytes, 8);
		memcpy(&arg, m->u.bytes + 8, 8);
		sc_sync[sc_nsync++] = act_sup_start_child(act_ctx_runtime(ctx), sup, arg);
	} else if (m->tag == ACT_TAG_SUP_STARTED && sc_nans < SC_MAX) {
		sc_reason[sc_nans] = act_msg_reason(m);
		memcpy(&sc_child[sc_nans++], m->u.bytes, 8);
	} else {
		sc_stray = m->tag;
	}
	return 0;
}
static const struct act_behaviour sc_beh = {.name = "sc", .handle = sc_handle};
static void sc_ask(struct act_runtime *rt, act_id client, act_id sup, long arg)
{
	uint8_t b[16];
	memcpy(b, &sup, 8);
	memcpy(b + 8, &arg, 8);
	act_tell(rt, client, 1, b, sizeof(b));
	drain(rt, 1);
}
static int tmpl_init(struct act_ctx *ctx, void *arg)
{
	(void)ctx;
	return (long)arg < 0 ? -EIO : 0;
}
static int tmpl_handle(struct act_ctx *ctx, struct act_msg *m)
{
	(void)ctx;
	sc_stray = m->tag;
	return 0;
}
static const struct act_behaviour tmpl_beh = {.name = "tmpl", .init = tmpl_init,
					      .handle = tmpl_handle};

static char logbuf[4096];
static uint64_t start_ns[8];
static int starts[8];

static void logw(const char *s)
{
	if (logbuf[0])
		strcat(logbuf, " ");
	strcat(logbuf, s);
}

struct kid_state {
	const char *name;
};

static int kid_init(struct act_ctx *ctx, void *arg)
{
	const char *name = arg;
	char b[8];
	((struct kid_state *)act_state(ctx))->name = name;
	snprintf(b, sizeof(b), "S%s", name);
	logw(b);
	int k = name[0] - 'A';
	if (k >= 0 && k < 8) {
		start_ns[k] = zb_now_ns();
		starts[k]++;
	}
	return 0;
}

static int kid_handle(struct act_ctx *ctx, struct act_msg *m)
{
	(void)ctx;
	(void)m;
	return 0;
}

static void kid_term(struct act_ctx *ctx, int reason)
{
	char b[8];
	(void)reason;
	snprintf(b, sizeof(b), "T%s", ((struct kid_state *)act_state(ctx))->name);
	logw(b);
}

static const struct act_behaviour kid = {
	.name = "kid", .state_size = sizeof(struct kid_state),
	.init = kid_init, .handle = kid_handle, .terminate = kid_term,
};

static int stub_init(struct act_ctx *ctx, void *arg)
{
	act_trap_exit(ctx, true);
	return kid_init(ctx, arg);
}
static const struct act_behaviour stubborn = {
	.name = "stubborn", .state_size = sizeof(struct kid_state),
	.init = stub_init, .handle = kid_handle, .terminate = kid_term,
};

static const struct act_child_spec four[] = {
	{"A", &kid, "A", ACT_PERMANENT, 0},
	{"B", &kid, "B", ACT_PERMANENT, 0},
	{"C", &kid, "C", ACT_PERMANENT, 0},
	{"D", &kid, "D", ACT_PERMANENT, 0},
};

/* a watcher that monitors a target and records the DOWN reason */
static int down_reason = 99, downs;
static int watch_init(struct act_ctx *ctx, void *arg)
{
	uint64_t ref;
	return act_monitor(ctx, *(act_id *)arg, &ref);
}
static int watch_handle(struct act_ctx *ctx, struct act_msg *m)
{
	(void)ctx;
	if (m->tag == ACT_TAG_DOWN) {
		down_reason = act_msg_reason(m);
		downs++;
	}
	return 0;
}
static const struct act_behaviour watcher = {
	.name = "watch", .init = watch_init, .handle = watch_handle,
};

struct row {
	const char *name;
	enum act_strategy st;
	const char *expect;
};

static void kill_child(struct act_runtime *rt, act_id sup, uint32_t i)
{
	act_exit_signal(rt, act_sup_child(rt, sup, i), -EIO);
	drain(rt, 1);
}

int main(void)
{
	static const struct row rows[] = {
		{"one_for_one", ACT_ONE_FOR_ONE, "TB SB"},
		{"one_for_all", ACT_ONE_FOR_ALL, "TB TD TC TA SA SB SC SD"},
		{"rest_for_one", ACT_REST_FOR_ONE, "TB TD TC SB SC SD"},
		{"simple_one_for_one", ACT_SIMPLE_ONE_FOR_ONE, "TB SB"},
	};
	tap_plan(4 * 3 + 20);
	struct act_runtime *rt = mk_rt(1, 0);
	act_id sup;
	struct act_stats st;
	act_get_stats(rt, &st);
	uint32_t base_in_use = st.msgs_in_use;

	for (size_t r = 0; r < ZB_ARRAY_LEN(rows); r++) {
		struct act_sup_spec spec = {
			.strategy = rows[r].st, .max_restarts = 5,
			.window_ns = 5000000000ull, .children = four,
			.n_children = rows[r].st == ACT_SIMPLE_ONE_FOR_ONE ? 1 : 4,
		};
		logbuf[0] = 0;
		is_int(act_sup_start(rt, &spec, &sup), 0, "%s: start", rows[r].name);
		if (rows[r].st == ACT_SIMPLE_ONE_FOR_ONE)
			for (int i = 0; i < 4; i++)
				act_sup_start_child(rt, sup, (void *)four[i].arg);
		drain(rt, 1);
		is_str(logbuf, "SA SB SC SD", "%s: children start in order", rows[r].name);
		logbuf[0] = 0;
		kill_child(rt, sup, 1);
		is_str(logbuf, rows[r].expect, "%s: restart set and order", rows[r].name);
		act_exit_signal(rt, sup, ACT_SHUTDOWN);
		drain(rt, 1);
	}

	/* shutdown stops in reverse order */
	struct act_sup_spec spec = {
		.strategy = ACT_ONE_FOR_ONE, .max_restarts = 2,
		.window_ns = 5000000000ull, .children = four, .n_children = 4,
	};
	act_sup_start(rt, &spec, &sup);
	drain(rt, 1);
	logbuf[0] = 0;
	act_exit_signal(rt, sup, ACT_SHUTDOWN);
	drain(rt, 1);
	is_str(logbuf, "TD TC TB TA", "supervisor shutdown stops children in reverse order");

	/* intensity: 2 restarts allowed, the 3rd escalates */
	act_id w;
	act_sup_start(rt, &spec, &sup);
	act_spawn(rt, &watcher, &sup, &w);
	drain(rt, 1);
	logbuf[0] = 0;
	kill_child(rt, sup, 0);
	kill_child(rt, sup, 0);
	ok(act_alive(rt, sup), "2 restarts within the window: still alive");
	kill_child(rt, sup, 0);
	ok(!act_alive(rt, sup), "3rd restart exceeds intensity: supervisor exited");
	is_int(down_reason, ACT_SHUTDOWN, "exit reason seen by its monitor: shutdown");
	is_str(logbuf, "TA SA TA SA TA TD TC TB", "children stopped in reverse order before escalating");

	/* nested: the parent restarts an escalating child supervisor */
	static const struct act_sup_spec inner = {
		.strategy = ACT_ONE_FOR_ONE, .max_restarts = 0,
		.window_ns = 5000000000ull, .children = four, .n_children = 2,
	};
	const struct act_child_spec inner_child[] = {
		{"inner", &act_sup_behaviour, (void *)&inner, ACT_PERMANENT, 0},
	};
	struct act_sup_spec outer = {
		.strategy = ACT_ONE_FOR_ONE, .max_restarts = 3,
		.window_ns = 5000000000ull, .children = inner_child, .n_children = 1,
	};
	act_id top;
	logbuf[0] = 0;
	is_int(act_sup_start(rt, &outer, &top), 0, "nested supervisors start");
	drain(rt, 1);
	act_id in1 = act_sup_child(rt, top, 0);
	act_exit_signal(rt, act_sup_child(rt, in1, 0), -EIO);
	drain(rt, 1);
	act_id in2 = act_sup_child(rt, top, 0);
	ok(act_alive(rt, top) && in2 != ACT_ID_NONE && in2 != in1 && act_alive(rt, in2),
	   "parent restarted the escalating child supervisor");
	is_str(logbuf, "SA SB TA TB SA SB", "whose children stopped and started again");
	act_exit_signal(rt, top, ACT_SHUTDOWN);
	drain(rt, 1);

	/* backoff: exponential, base 15 ms: waits 15, 30, 60 ms */
	static const struct act_child_spec one[] = {{"A", &kid, "A", ACT_PERMANENT, 0}};
	struct act_sup_spec bo = {
		.strategy = ACT_ONE_FOR_ONE, .max_restarts = 10, .window_ns = 10000000000ull,
		.backoff = ACT_BACKOFF_EXP, .backoff_base_ns = 15000000,
		.children = one, .n_children = 1,
	};
	act_sup_start(rt, &bo, &sup);
	drain(rt, 1);
	double d[3];
	for (int k = 0; k < 3; k++) {
		int before = starts[0];
		uint64_t t0 = zb_now_ns();
		act_exit_signal(rt, act_sup_child(rt, sup, 0), -EIO);
		DRAIN_UNTIL(rt, 1, starts[0] > before, 3000);
		d[k] = (start_ns[0] - t0) / 1e6;
	}
	ok(d[0] >= 15 && d[1] >= 30 && d[2] >= 60 && d[2] > d[1] && d[1] > d[0],
	   "exponential backoff observed: %.1f %.1f %.1f ms", d[0], d[1], d[2]);
	act_exit_signal(rt, sup, ACT_SHUTDOWN);
	drain(rt, 1);

	/* linear backoff, base 10 ms: 10, 20, 30 ms */
	bo.backoff = ACT_BACKOFF_LINEAR;
	bo.backoff_base_ns = 10000000;
	act_sup_start(rt, &bo, &sup);
	drain(rt, 1);
	for (int k = 0; k < 3; k++) {
		int before = starts[0];
		uint64_t t0 = zb_now_ns();
		act_exit_signal(rt, act_sup_child(rt, sup, 0), -EIO);
		DRAIN_UNTIL(rt, 1, starts[0] > before, 3000);
		d[k] = (start_ns[0] - t0) / 1e6;
	}
	ok(d[0] >= 10 && d[1] >= 20 && d[2] >= 30 && d[2] < 200,
	   "linear backoff observed: %.1f %.1f %.1f ms", d[0], d[1], d[2]);
	act_exit_signal(rt, sup, ACT_SHUTDOWN);
	drain(rt, 1);

	/* restart types: transient exiting normally and temporary: not restarted */
	static const struct act_child_spec types[] = {
		{"A", &kid, "A", ACT_TRANSIENT, 0},
		{"B", &kid, "B", ACT_TEMPORARY, 0},
		{"C", &kid, "C", ACT_TRANSIENT, 0},
	};
	struct act_sup_spec ty = {
		.strategy = ACT_ONE_FOR_ONE, .max_restarts = 5, .window_ns = 5000000000ull,
		.children = types, .n_children = 3,
	};
	act_sup_start(rt, &ty, &sup);
	drain(rt, 1);
	logbuf[0] = 0;
	act_exit_signal(rt, act_sup_child(rt, sup, 0), ACT_SHUTDOWN); /* A: normal-ish */
	act_exit_signal(rt, act_sup_child(rt, sup, 1), -EIO);         /* B: temporary */
	act_exit_signal(rt, act_sup_child(rt, sup, 2), -EIO);         /* C: error */
	drain(rt, 1);
	is_str(logbuf, "TA TB TC SC", "transient restarts only on error, temporary never");
	act_exit_signal(rt, sup, ACT_SHUTDOWN);
	drain(rt, 1);

	/* a child that traps exits and ignores shutdown is killed after shutdown_ns */
	static const struct act_child_spec stub[] = {
		{"A", &kid, "A", ACT_PERMANENT, 0},
		{"S", &stubborn, "S", ACT_PERMANENT, 20000000},
	};
	struct act_sup_spec sb = {
		.strategy = ACT_ONE_FOR_ALL, .max_restarts = 5, .window_ns = 5000000000ull,
		.children = stub, .n_children = 2,
	};
	act_sup_start(rt, &sb, &sup);
	drain(rt, 1);
	logbuf[0] = 0;
	uint64_t k0 = zb_now_ns();
	act_exit_signal(rt, act_sup_child(rt, sup, 0), -EIO);
	DRAIN_UNTIL(rt, 1, strstr(logbuf, "SS") != NULL, 3000);
	double kd = (zb_now_ns() - k0) / 1e6;
	ok(strcmp(logbuf, "TA TS SA SS") == 0 && kd >= 20,
	   "stubborn child killed after its shutdown grace (%.1f ms): %s", kd, logbuf);
	act_exit_signal(rt, sup, ACT_KILL);
	drain(rt, 1);

	act_exit_signal(rt, w, ACT_SHUTDOWN);
	drain(rt, 1);
	act_get_stats(rt, &st);
	is_int(st.actors_live, 0, "no actors left");
	ok(st.restarts >= 4, "stats: %llu supervisor restarts counted",
	   (unsigned long long)st.restarts);
	/* Every stop armed a kill timer (1 s grace) that the child's EXIT
	 * cancelled: none may hold a message once everyone is gone. */
	is_int(st.msgs_in_use, base_in_use,
	       "messages in use back to the baseline once every actor exited");

	/* act_sup_start_child: simple_one_for_one, max_children 1 */
	struct act_child_spec tc[1] = {{"t", &tmpl_beh, NULL, ACT_TEMPORARY, 0}};
	struct act_sup_spec ss = {.strategy = ACT_SIMPLE_ONE_FOR_ONE, .max_restarts = 3,
				  .window_ns = 1000000000ull, .children = tc, .n_children = 1,
				  .max_children = 1};
	act_id client, plain;
	act_spawn(rt, &sc_beh, NULL, &client);
	act_sup_start(rt, &ss, &sup);
	sc_ask(rt, client, sup, -1); /* init fails */
	sc_ask(rt, client, sup, 1);  /* started */
	sc_ask(rt, client, sup, 2);  /* max_children running */
	ok(sc_nsync == 3 && !sc_sync[0] && !sc_sync[1] && !sc_sync[2] && sc_nans == 3,
	   "start_child: three requests queued, three answers (%d answers)", sc_nans);
	ok(sc_reason[0] == -EIO && sc_child[0] == ACT_ID_NONE,
	   "start_child: the init's error comes back (%d)", sc_reason[0]);
	ok(sc_reason[1] == 0 && sc_child[1] == act_sup_child(rt, sup, 0) &&
	   act_alive(rt, sc_child[1]), "start_child: 0 and the child's id");
	ok(sc_reason[2] == -ENOSPC && sc_child[2] == ACT_ID_NONE,
	   "start_child over max_children: -ENOSPC (%d)", sc_reason[2]);
	act_exit_signal(rt, sup, ACT_SHUTDOWN);
	drain(rt, 1);

	/* targets that are no simple_one_for_one supervisor are refused */
	struct act_child_spec oc[1] = {{"t", &tmpl_beh, NULL, ACT_PERMANENT, 0}};
	struct act_sup_spec so = {.strategy = ACT_ONE_FOR_ONE, .max_restarts = 3,
				  .window_ns = 1000000000ull, .children = oc, .n_children = 1};
	act_sup_start(rt, &so, &sup);
	act_spawn(rt, &tmpl_beh, NULL, &plain);
	drain(rt, 1);
	sc_stray = 0;
	int r1 = act_sup_start_child(rt, sup, NULL);
	int r2 = act_sup_start_child(rt, plain, NULL);
	int r3 = act_sup_start_child(rt, act_id_make(1, 4000, 3), NULL);
	drain(rt, 1);
	ok(r1 == -EINVAL && r2 == -EINVAL && r3 == ZB_ERR_STALE_ID && sc_stray == 0 &&
	   act_sup_child(rt, sup, 1) == ACT_ID_NONE,
	   "start_child refused: one_for_one %d, plain actor %d, dead id %d (stray tag 0x%x)",
	   r1, r2, r3, sc_stray);
	act_exit_signal(rt, sup, ACT_SHUTDOWN);
	act_exit_signal(rt, plain, ACT_SHUTDOWN);
	act_exit_signal(rt, client, ACT_SHUTDOWN);
	drain(rt, 1);
	act_runtime_destroy(rt);
	return tap_done();
}
