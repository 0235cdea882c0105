/* Scheduling: reductions preemption (a flooding actor does not starve a
 * second actor on the same worker), the LIFO chain is bounded too, stealing
 * moves work to an idle worker (poll mode, deterministic; then threads),
 * idle worker threads park instead of spinning, and unpinned workers keep to
 * the CPUs act_params.cpus names. */
#include "util.h"

#include <sys/resource.h>

static int flood_stop;
static uint64_t flood_count, flood_at_b;
static int b_ran;

static int flood_handle(struct act_ctx *ctx, struct act_msg *m)
{
	(void)m;
	flood_count++;
	if (!flood_stop)
		return act_tell(act_ctx_runtime(ctx), act_self(ctx), 1, NULL, 0);
	return 0;
}
static const struct act_behaviour flood = {.name = "flood", .handle = flood_handle};

static int b_handle(struct act_ctx *ctx, struct act_msg *m)
{
	(void)ctx;
	(void)m;
	b_ran++;
	flood_at_b = flood_count;
	flood_stop = 1;
	return 0;
}
static const struct act_behaviour bbeh = {.name = "b", .handle = b_handle};

/* ping-pong pair that never stops until told */
static int pp_stop;
static uint64_t pp_count;
struct pp_state {
	act_id peer;
};
static int pp_handle(struct act_ctx *ctx, struct act_msg *m)
{
	struct pp_state *s = act_state(ctx);
	if (m->tag == 7) {
		memcpy(&s->peer, m->u.bytes, sizeof(act_id));
		return 0;
	}
	pp_count++;
	if (!pp_stop)
		return act_tell(act_ctx_runtime(ctx), s->peer, 1, NULL, 0);
	return 0;
}
static const struct act_behaviour ppb = {.name = "pp", .state_size = sizeof(struct pp_state),
					 .handle = pp_handle};

/* work actors record where they ran */
static _Atomic int ran_on[2];
static int work_handle(struct act_ctx *ctx, struct act_msg *m)
{
	(void)m;
	int w = act_current_worker(act_ctx_runtime(ctx));
	if (w >= 0 && w < 2)
		atomic_fetch_add(&ran_on[w], 1);
	if (m->tag == 2) { /* burn ~4 ms */
		uint64_t t = zb_now_ns();
		while (zb_now_ns() - t < 4000000)
			;
	}
	return 0;
}
static const struct act_behaviour work = {.name = "work", .handle = work_handle};

/* where a worker thread may run: its affinity, seen from an actor */
static _Atomic int aff_runs, aff_other;
static int aff_cpu;
static int aff_handle(struct act_ctx *ctx, struct act_msg *m)
{
	(void)ctx;
	(void)m;
	cpu_set_t set;
	if (pthread_getaffinity_np(pthread_self(), sizeof(set), &set) != 0 ||
	    CPU_COUNT(&set) != 1 || !CPU_ISSET(aff_cpu, &set))
		atomic_fetch_add(&aff_other, 1);
	atomic_fetch_add(&aff_runs, 1);
	return 0;
}
static const struct act_behaviour affb = {.name = "aff", .handle = aff_handle};

#define NWORK 16
static act_id workers_ids[NWORK];
static int fan_handle(struct act_ctx *ctx, struct act_msg *m)
{
	for (int i = 0; i < NWORK; i++)
		act_tell(act_ctx_runtime(ctx), workers_ids[i], m->tag, NULL, 0);
	return 0;
}
static const struct act_behaviour fan = {.name = "fan", .handle = fan_handle};

int main(void)
{
	tap_plan(11);
	struct act_runtime *rt = mk_rt(1, 0);
	act_id f, b;
	/* 1. preemption */
	act_spawn(rt, &flood, NULL, &f);
	act_spawn(rt, &bbeh, NULL, &b);
	act_tell(rt, f, 1, NULL, 0);
	act_tell(rt, b, 1, NULL, 0);
	act_worker_poll(rt, 0, 3 * 2000);
	is_int(b_ran, 1, "second actor ran while the first floods");
	is_int(flood_at_b, 2000, "after exactly one reductions budget of the flooder");
	struct act_stats st;
	act_get_stats(rt, &st);
	ok(st.preemptions >= 1, "preemption counted (%llu)", (unsigned long long)st.preemptions);
	drain(rt, 1);

	/* 2. LIFO chain bounded: a ping-pong pair does not starve a third actor */
	act_id p1, p2, c;
	act_spawn(rt, &ppb, NULL, &p1);
	act_spawn(rt, &ppb, NULL, &p2);
	act_tell(rt, p1, 7, &p2, sizeof(p2));
	act_tell(rt, p2, 7, &p1, sizeof(p1));
	drain(rt, 1);
	b_ran = 0;
	act_tell(rt, p1, 1, NULL, 0);
	act_worker_poll(rt, 0, 10); /* the pair is running */
	act_tell(rt, b, 1, NULL, 0);
	act_worker_poll(rt, 0, 3 * 2000);
	ok(b_ran == 1, "third actor ran within two budgets of a ping-pong chain (pair did %llu)",
	   (unsigned long long)pp_count);
	pp_stop = 1;
	drain(rt, 1);
	(void)c;
	act_runtime_destroy(rt);

	/* 3. stealing, poll mode: worker 0 gets 16 runnable actors, worker 1
	 * has none and takes some */
	rt = mk_rt(2, 0);
	struct act_spawn_opts on0 = {.home = 1};
	for (int i = 0; i < NWORK; i++)
		act_spawn_opt(rt, &work, NULL, &on0, &workers_ids[i]);
	act_id fa;
	act_spawn_opt(rt, &fan, NULL, &on0, &fa);
	act_tell(rt, fa, 1, NULL, 0);
	act_worker_poll(rt, 0, 1); /* runs only the fan-out */
	act_worker_poll(rt, 1, 100000);
	act_get_stats(rt, &st);
	ok(st.steals >= 1 && atomic_load(&ran_on[1]) >= 1,
	   "idle worker 1 stole work from worker 0 (steals %llu, ran %d there)",
	   (unsigned long long)st.steals, atomic_load(&ran_on[1]));
	drain(rt, 2);
	is_int(atomic_load(&ran_on[0]) + atomic_load(&ran_on[1]), NWORK, "every work item ran once");

	/* 4. threads: CPU-bound work made runnable on one worker spreads */
	atomic_store(&ran_on[0], 0);
	atomic_store(&ran_on[1], 0);
	act_start_threads(rt);
	usleep(20000);
	act_tell(rt, fa, 2, NULL, 0);
	WAIT_UNTIL(atomic_load(&ran_on[0]) + atomic_load(&ran_on[1]) == NWORK, 10000);
	/* (all of it: the wait above gives up after 10 s without a word) */
	ok(atomic_load(&ran_on[0]) > 0 && atomic_load(&ran_on[1]) > 0 &&
		   atomic_load(&ran_on[0]) + atomic_load(&ran_on[1]) == NWORK,
	   "threads: both workers ran the burst, all %d items (%d / %d)", NWORK,
	   atomic_load(&ran_on[0]), atomic_load(&ran_on[1]));

	/* 5. idle threads park: little CPU while nothing runs */
	usleep(50000);
	struct rusage r0, r1;
	getrusage(RUSAGE_SELF, &r0);
	uint64_t t0 = zb_now_ns();
	usleep(300000);
	getrusage(RUSAGE_SELF, &r1);
	double cpu = (r1.ru_utime.tv_sec - r0.ru_utime.tv_sec) * 1e3 +
		     (r1.ru_utime.tv_usec - r0.ru_utime.tv_usec) / 1e3 +
		     (r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) * 1e3 +
		     (r1.ru_stime.tv_usec - r0.ru_stime.tv_usec) / 1e3;
	double wall = (zb_now_ns() - t0) / 1e6;
	act_get_stats(rt, &st);
	ok(cpu < wall * 0.2, "idle workers use %.1f ms CPU in %.0f ms", cpu, wall);
	ok(st.parks > 0, "workers parked (%llu)", (unsigned long long)st.parks);
	/* and a parked worker wakes up for a message */
	int before = atomic_load(&ran_on[0]) + atomic_load(&ran_on[1]);
	act_tell(rt, workers_ids[0], 1, NULL, 0);
	WAIT_UNTIL(atomic_load(&ran_on[0]) + atomic_load(&ran_on[1]) > before, 2000);
	ok(atomic_load(&ran_on[0]) + atomic_load(&ran_on[1]) == before + 1,
	   "a sender wakes a parked worker");
	act_runtime_destroy(rt);

	/* 6. act_params.cpus: both (unpinned) workers run on the one CPU named */
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	if (ncpu < 2) {
		tap_skip(1, "one CPU online: a set of one CPU is every CPU");
	} else {
		struct act_params p;
		cpu_set_t one;
		act_params_default(&p);
		p.workers = 2;
		p.max_actors = 64;
		p.message_pool = 256;
		p.pin = false;
		aff_cpu = (int)ncpu - 1;
		CPU_ZERO(&one);
		CPU_SET(aff_cpu, &one);
		p.cpus = &one;
		if (act_runtime_create(&p, &rt) || act_start_threads(rt)) {
			printf("Bail out! a runtime on CPU %d\n", aff_cpu);
			return 1;
		}
		act_id a[4];
		for (int i = 0; i < 4; i++) {
			struct act_spawn_opts on = {.home = 1 + (uint32_t)i % 2};
			act_spawn_opt(rt, &affb, NULL, &on, &a[i]);
			act_tell(rt, a[i], 1, NULL, 0);
		}
		WAIT_UNTIL(atomic_load(&aff_runs) == 4, 5000);
		ok(atomic_load(&aff_runs) == 4 && atomic_load(&aff_other) == 0,
		   "cpus = {%d}: %d actor runs on 2 workers, %d on a thread allowed elsewhere",
		   aff_cpu, atomic_load(&aff_runs), atomic_load(&aff_other));
		act_runtime_destroy(rt);
	}
	return tap_done();
}
