/* A supervisor whose backoff or kill timer cannot be armed. sup_msg used to
 * drop SUP_RESTART / SUP_KILL silently when the message pool was empty or
 * the worker's timer heap was full: the supervisor then waited in its
 * backoff (or for a child that ignores `shutdown`) forever (found in
 * review). Now the restart message and two spares for the stop signals are
 * allocated at start, and without a timer slot the supervisor acts at once.
 * Poll mode, 1 worker, 16 timer slots. */
#include "util.h"

static struct act_runtime *rt;
static int starts[4];
static struct act_msg *hoard[4096];
static int nhoard;

static int c_init(struct act_ctx *c, void *arg)
{
	if ((long)arg == 3)
		act_trap_exit(c, true); /* ignores `shutdown` */
	starts[(long)arg]++;
	return 0;
}
static int c_handle(struct act_ctx *c, struct act_msg *m)
{
	if (m->tag == 97) { /* take every message there is, then crash */
		struct act_runtime *r = act_ctx_runtime(c);
		act_msg_take(c, m);
		hoard[nhoard++] = m;
		while (nhoard < 4096 && (hoard[nhoard] = act_msg_alloc(r)))
			nhoard++;
		return -EIO;
	}
	return m->tag == 98 ? -EIO : 0;
}
static const struct act_behaviour cb = {.name = "c", .init = c_init, .handle = c_handle};
static int nop(struct act_ctx *c, struct act_msg *m)
{
	(void)c;
	(void)m;
	return 0;
}
static const struct act_behaviour nb = {.name = "n", .handle = nop};

static void pump(uint64_t ms)
{
	pump_worker0(rt, ms);
}

static uint64_t tr[16];
static act_id other;
static void fill_timers(void)
{
	act_spawn(rt, &nb, NULL, &other);
	for (int i = 0; i < 16; i++) {
		struct act_msg *m = act_msg_alloc(rt);
		act_send_after(rt, other, 3600000000000ull, m, &tr[i]);
	}
	pump(1); /* into the worker's heap: full */
}
static void free_timers(void)
{
	for (int i = 0; i < 16; i++)
		act_cancel_timer(rt, tr[i]);
	act_exit_signal(rt, other, ACT_KILL);
}

/* Starts a supervisor, fills the worker's timer heap, crashes child 0,
 * frees the heap again and lets the supervisor act: what it does must not
 * have needed a timer while the heap was full. */
static act_id crash_with_timers_full(const struct act_sup_spec *spec)
{
	act_id sup = ACT_ID_NONE;
	act_sup_start(rt, spec, &sup);
	pump(1);
	fill_timers();
	act_tell(rt, act_sup_child(rt, sup, 0), 98, NULL, 0);
	pump(5);
	free_timers();
	pump(100);
	return sup;
}

int main(void)
{
	tap_plan(5);
	struct act_params p;
	act_params_default(&p);
	p.workers = 1;
	p.pin = false;
	p.timers = 16;
	p.message_pool = 1024;
	if (act_runtime_create(&p, &rt)) {
		printf("Bail out! runtime\n");
		return 1;
	}
	act_id sup;

	/* 1: timer heap full when the backoff starts */
	struct act_child_spec ch[2] = {
		{"c0", &cb, (void *)0L, ACT_PERMANENT, 0},
		{"c3", &cb, (void *)3L, ACT_PERMANENT, 20000000ull},
	};
	struct act_sup_spec s1 = {.strategy = ACT_ONE_FOR_ONE, .max_restarts = 5,
				  .window_ns = 5000000000ull, .backoff = ACT_BACKOFF_LINEAR,
				  .backoff_base_ns = 10000000ull, .children = ch, .n_children = 1};
	sup = crash_with_timers_full(&s1);
	ok(starts[0] == 2 && act_sup_child(rt, sup, 0),
	   "heap full at the backoff: the child is restarted anyway (starts %d)", starts[0]);
	act_exit_signal(rt, sup, ACT_SHUTDOWN);
	pump(5);

	/* 2: the message pool is empty when the backoff ends: the restart
	 * fails (-ENOBUFS) and a second backoff must be armed with no message
	 * to be had; messages come back during it */
	memset(starts, 0, sizeof(starts));
	act_id eater;
	act_spawn(rt, &cb, (void *)2L, &eater);
	act_sup_start(rt, &s1, &sup);
	pump(1);
	act_tell(rt, act_sup_child(rt, sup, 0), 98, NULL, 0); /* backoff 10 ms */
	act_tell(rt, eater, 97, NULL, 0);
	pump(40); /* the restart fails; the next backoff (20 ms) starts */
	ok(nhoard > 100 && starts[0] == 1, "pool emptied (%d messages held), restart failed", nhoard);
	for (int i = 0; i < nhoard; i++)
		act_msg_free(rt, hoard[i]);
	nhoard = 0;
	pump(100);
	ok(starts[0] == 2 && act_sup_child(rt, sup, 0),
	   "pool empty at the backoff: the child is restarted after the next one (starts %d)",
	   starts[0]);
	act_exit_signal(rt, sup, ACT_SHUTDOWN);
	pump(5);

	/* 3: one_for_all, heap full when a child that ignores `shutdown` must
	 * be stopped: killed at once instead of waited for */
	memset(starts, 0, sizeof(starts));
	struct act_sup_spec s3 = {.strategy = ACT_ONE_FOR_ALL, .max_restarts = 5,
				  .window_ns = 5000000000ull, .children = ch, .n_children = 2};
	sup = crash_with_timers_full(&s3);
	ok(starts[0] == 2 && starts[3] == 2 && act_sup_child(rt, sup, 0) && act_sup_child(rt, sup, 1),
	   "heap full at a stop: both children restarted (starts %d, %d)", starts[0], starts[3]);
	act_exit_signal(rt, sup, ACT_SHUTDOWN);
	pump(50);
	struct act_stats st;
	act_get_stats(rt, &st);
	is_int((int)st.actors_live, 0, "everything stopped");
	act_runtime_destroy(rt);
	return tap_done();
}
