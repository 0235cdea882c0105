/* bench/actors/bench_actors.c — Savina workloads on the zbmd actor runtime.
 *
 *   bench_actors WHAT [N ...]     WHAT: pingpong threadring counting forkjoin
 *                                       big chameneos spawn all
 * Prints one line per benchmark:  RESULT <name> <rate> <unit> <seconds>
 * (bench/actors/run.sh runs the Erlang counterparts beside it). Workers:
 * ACT_WORKERS (default 2) pinned pthreads (ACT_PIN=0 to unpin). */
#include "zbmd/actors.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct act_runtime *rt;
static _Atomic int done;

static uint64_t envu(const char *name, uint64_t def)
{
	const char *s = getenv(name);
	return s && *s ? strtoull(s, NULL, 0) : def;
}

static void start_rt(uint32_t max_actors, uint32_t pool)
{
	struct act_params p;
	act_params_default(&p);
	p.workers = (uint32_t)envu("ACT_WORKERS", 2);
	p.pin = envu("ACT_PIN", 1) != 0;
	p.max_actors = max_actors;
	p.message_pool = pool;
	if (act_runtime_create(&p, &rt)) {
		fprintf(stderr, "bench: runtime create failed\n");
		exit(1);
	}
	atomic_store(&done, 0);
	act_start_threads(rt);
}

static double wait_done(uint64_t t0)
{
	while (!atomic_load_explicit(&done, memory_order_acquire))
		usleep(100);
	return (zb_now_ns() - t0) / 1e9;
}

static void finish(void)
{
	act_runtime_destroy(rt);
	rt = NULL;
}

static void result(const char *name, double rate, const char *unit, double secs)
{
	printf("RESULT %s %.4g %s %.3f\n", name, rate, unit, secs);
	fflush(stdout);
}

/* Sends, waiting out backpressure by yielding the worker (rare here). */
static void must_send(struct act_msg *m, act_id to)
{
	while (act_send(rt, to, m) == ZB_ERR_MAILBOX_FULL)
		sched_yield();
}

static void tell(act_id to, uint32_t tag, const void *p, size_t n)
{
	struct act_msg *m;
	while (!(m = act_msg_alloc(rt)))
		sched_yield();
	m->tag = tag;
	act_msg_set_bytes(m, p, n);
	must_send(m, to);
}

/* ---- pingpong: N round trips between two actors --------------------------- */
struct pp {
	act_id peer;
	uint64_t left;
};
static int pp_handle(struct act_ctx *ctx, struct act_msg *m)
{
	struct pp *s = act_state(ctx);
	if (m->tag == 1) {
		memcpy(s, m->u.bytes, sizeof(*s));
		return 0;
	}
	if (m->tag == 2) { /* ping: answer with a fresh pong */
		tell(m->from, 3, NULL, 0);
		return 0;
	}
	/* pong (or start) at the pinger */
	if (s->left-- == 0) {
		atomic_store_explicit(&done, 1, memory_order_release);
		return 0;
	}
	tell(s->peer, 2, NULL, 0);
	return 0;
}
static const struct act_behaviour pp_beh = {"pp", sizeof(struct pp), NULL, pp_handle, NULL};

static void bench_pingpong(uint64_t n)
{
	start_rt(1024, 4096);
	act_id a, b;
	act_spawn(rt, &pp_beh, NULL, &a);
	act_spawn(rt, &pp_beh, NULL, &b);
	struct pp s = {b, n};
	tell(a, 1, &s, sizeof(s));
	usleep(1000);
	uint64_t t0 = zb_now_ns();
	tell(a, 3, NULL, 0);
	double t = wait_done(t0);
	result("pingpong", n / t, "roundtrips/s", t);
	finish();
}

/* ---- threadring: R actors in a ring pass a token H hops ------------------- */
struct tr {
	act_id next;
};
static int tr_handle(struct act_ctx *ctx, struct act_msg *m)
{
	struct tr *s = act_state(ctx);
	uint64_t hops;
	if (m->tag == 1) {
		memcpy(&s->next, m->u.bytes, sizeof(act_id));
		return 0;
	}
	memcpy(&hops, m->u.bytes, 8);
	if (hops == 0) {
		atomic_store_explicit(&done, 1, memory_order_release);
		return 0;
	}
	hops--;
	tell(s->next, 2, &hops, 8);
	return 0;
}
static const struct act_behaviour tr_beh = {"tr", sizeof(struct tr), NULL, tr_handle, NULL};

static void bench_threadring(uint64_t ring, uint64_t hops)
{
	start_rt((uint32_t)ring + 16, 4096);
	act_id *ids = calloc(ring, sizeof(*ids));
	for (uint64_t i = 0; i < ring; i++)
		act_spawn(rt, &tr_beh, NULL, &ids[i]);
	for (uint64_t i = 0; i < ring; i++)
		tell(ids[i], 1, &ids[(i + 1) % ring], sizeof(act_id));
	usleep(5000);
	uint64_t t0 = zb_now_ns();
	tell(ids[0], 2, &hops, 8);
	double t = wait_done(t0);
	result("threadring", hops / t, "hops/s", t);
	free(ids);
	finish();
}

/* ---- counting: a producer sends N increments, then asks for the sum ------- */
static act_id counter_id;
struct prod {
	uint64_t left;
};
static uint64_t count_total;
static int counter_handle(struct act_ctx *ctx, struct act_msg *m)
{
	uint64_t *c = act_state(ctx);
	if (m->tag == 1)
		(*c)++;
	else {
		count_total = *c;
		atomic_store_explicit(&done, 1, memory_order_release);
	}
	return 0;
}
static const struct act_behaviour counter_beh = {"counter", 8, NULL, counter_handle, NULL};
static int prod_handle(struct act_ctx *ctx, struct act_msg *m)
{
	struct prod *s = act_state(ctx);
	if (m->tag == 1) {
		memcpy(&s->left, m->u.bytes, 8);
		return 0;
	}
	/* send a burst; on backpressure come back later (self message) */
	for (int k = 0; k < 1024 && s->left; k++) {
		struct act_msg *q = act_msg_alloc(rt);
		if (!q)
			break;
		q->tag = 1;
		if (act_send(rt, counter_id, q)) {
			act_msg_free(rt, q);
			break;
		}
		s->left--;
	}
	/* the final "get" may meet a full mailbox as well */
	if (s->left || act_tell(rt, counter_id, 3, NULL, 0) == ZB_ERR_MAILBOX_FULL) {
		act_yield(ctx); /* backpressure: let the counter run, retry */
		return act_tell(rt, act_self(ctx), 2, NULL, 0);
	}
	return 0;
}
static const struct act_behaviour prod_beh = {"prod", sizeof(struct prod), NULL, prod_handle, NULL};

static void bench_counting(uint64_t n)
{
	start_rt(1024, 65536);
	act_id p;
	act_spawn(rt, &counter_beh, NULL, &counter_id);
	act_spawn(rt, &prod_beh, NULL, &p);
	tell(p, 1, &n, 8);
	usleep(1000);
	uint64_t t0 = zb_now_ns();
	tell(p, 2, NULL, 0);
	double t = wait_done(t0);
	if (count_total != n)
		fprintf(stderr, "counting: got %llu of %llu\n",
			(unsigned long long)count_total, (unsigned long long)n);
	result("counting", n / t, "msgs/s", t);
	finish();
}

/* ---- fork-join throughput: A actors each get N messages, small work each -- */
static _Atomic uint64_t fj_left;
static act_id *fj_ids;
static uint64_t fj_n, fj_a;
static int fj_handle(struct act_ctx *ctx, struct act_msg *m)
{
	(void)ctx;
	(void)m;
	volatile double x = 37.2; /* Savina's tiny computation */
	for (int i = 0; i < 8; i++)
		x = x * 1.0001 + 0.5;
	if (atomic_fetch_sub_explicit(&fj_left, 1, memory_order_relaxed) == 1)
		atomic_store_explicit(&done, 1, memory_order_release);
	return 0;
}
static const struct act_behaviour fj_beh = {"fj", 0, NULL, fj_handle, NULL};
static int fjsrc_handle(struct act_ctx *ctx, struct act_msg *m)
{
	uint64_t *sent = act_state(ctx);
	(void)m;
	uint64_t total = fj_n * fj_a;
	while (*sent < total) {
		struct act_msg *q = act_msg_alloc(rt);
		if (!q)
			break;
		q->tag = 1;
		if (act_send(rt, fj_ids[*sent % fj_a], q)) {
			act_msg_free(rt, q);
			break;
		}
		(*sent)++;
		if (*sent % 4096 == 0)
			break; /* let the workers run */
	}
	if (*sent < total) {
		act_yield(ctx);
		return act_tell(rt, act_self(ctx), 2, NULL, 0);
	}
	return 0;
}
static const struct act_behaviour fjsrc_beh = {"fjsrc", 8, NULL, fjsrc_handle, NULL};

static void bench_forkjoin(uint64_t actors, uint64_t n)
{
	start_rt((uint32_t)actors + 16, 65536);
	fj_ids = calloc(actors, sizeof(*fj_ids));
	fj_n = n;
	fj_a = actors;
	atomic_store(&fj_left, actors * n);
	for (uint64_t i = 0; i < actors; i++)
		act_spawn(rt, &fj_beh, NULL, &fj_ids[i]);
	act_id src;
	act_spawn(rt, &fjsrc_beh, NULL, &src);
	usleep(1000);
	uint64_t t0 = zb_now_ns();
	tell(src, 2, NULL, 0);
	double t = wait_done(t0);
	result("forkjoin", actors * n / t, "msgs/s", t);
	free(fj_ids);
	finish();
}

/* ---- big: W workers ping random peers P times each (each ping answered) --- */
static act_id *big_ids;
static uint64_t big_w;
static _Atomic uint64_t big_left;
struct bigs {
	uint64_t rng;
	uint64_t left;
};
static int big_handle(struct act_ctx *ctx, struct act_msg *m)
{
	struct bigs *s = act_state(ctx);
	if (m->tag == 1) { /* ping: pong back */
		tell(m->from, 2, NULL, 0);
		return 0;
	}
	if (m->tag == 3) /* init */
		memcpy(s, m->u.bytes, sizeof(*s));
	if (s->left == 0) {
		if (atomic_fetch_sub_explicit(&big_left, 1, memory_order_acq_rel) == 1)
			atomic_store_explicit(&done, 1, memory_order_release);
		return 0;
	}
	s->left--;
	s->rng = s->rng * 6364136223846793005ull + 1442695040888963407ull;
	tell(big_ids[(s->rng >> 33) % big_w], 1, NULL, 0);
	return 0;
}
static const struct act_behaviour big_beh = {"big", sizeof(struct bigs), NULL, big_handle, NULL};

static void bench_big(uint64_t w, uint64_t pings)
{
	start_rt((uint32_t)w + 16, 65536);
	big_ids = calloc(w, sizeof(*big_ids));
	big_w = w;
	atomic_store(&big_left, w);
	for (uint64_t i = 0; i < w; i++)
		act_spawn(rt, &big_beh, NULL, &big_ids[i]);
	usleep(1000);
	uint64_t t0 = zb_now_ns();
	for (uint64_t i = 0; i < w; i++) {
		struct bigs s = {i * 7919 + 1, pings};
		tell(big_ids[i], 3, &s, sizeof(s));
	}
	double t = wait_done(t0);
	result("big", 2.0 * w * pings / t, "msgs/s", t);
	free(big_ids);
	finish();
}

/* ---- chameneos: C creatures meet pairwise at a mall, M meetings ------------ */
static act_id mall_id;
struct mall {
	uint64_t left;
	act_id waiting;
	uint32_t wcolor;
	uint32_t stopped;
	uint32_t ncham;
};
static uint32_t complement(uint32_t a, uint32_t b)
{
	return a == b ? a : 3 - a - b;
}
static int mall_handle(struct act_ctx *ctx, struct act_msg *m)
{
	struct mall *s = act_state(ctx);
	uint32_t color;
	if (m->tag == 9) {
		memcpy(s, m->u.bytes, sizeof(*s));
		return 0;
	}
	memcpy(&color, m->u.bytes, 4);
	if (s->left == 0) { /* tell it to stop */
		tell(m->from, 5, NULL, 0);
		if (++s->stopped == s->ncham)
			atomic_store_explicit(&done, 1, memory_order_release);
		return 0;
	}
	if (!s->waiting) {
		s->waiting = m->from;
		s->wcolor = color;
		return 0;
	}
	uint32_t nc = complement(color, s->wcolor);
	tell(s->waiting, 4, &nc, 4);   /* both change colour and come back */
	tell(m->from, 4, &nc, 4);
	s->waiting = 0;
	s->left--;
	return 0;
}
static const struct act_behaviour mall_beh = {"mall", sizeof(struct mall), NULL, mall_handle, NULL};
static int cham_handle(struct act_ctx *ctx, struct act_msg *m)
{
	uint32_t *color = act_state(ctx);
	if (m->tag == 5)
		return 0;
	memcpy(color, m->u.bytes, 4); /* start (tag 3) or new colour (tag 4) */
	tell(mall_id, 1, color, 4);
	return 0;
}
static const struct act_behaviour cham_beh = {"cham", 4, NULL, cham_handle, NULL};

static void bench_chameneos(uint64_t c, uint64_t meetings)
{
	start_rt((uint32_t)c + 16, 4096);
	act_spawn(rt, &mall_beh, NULL, &mall_id);
	struct mall ms = {meetings, 0, 0, 0, (uint32_t)c};
	tell(mall_id, 9, &ms, sizeof(ms));
	act_id *ids = calloc(c, sizeof(*ids));
	for (uint64_t i = 0; i < c; i++)
		act_spawn(rt, &cham_beh, NULL, &ids[i]);
	usleep(1000);
	uint64_t t0 = zb_now_ns();
	for (uint64_t i = 0; i < c; i++) {
		uint32_t col = (uint32_t)(i % 3);
		tell(ids[i], 3, &col, 4);
	}
	double t = wait_done(t0);
	result("chameneos", meetings / t, "meetings/s", t);
	free(ids);
	finish();
}

/* ---- spawn: N idle actors: time and resident memory per actor -------------- */
static long rss_kb(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	long pages = 0, res = 0;
	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &res) != 2)
			res = 0;
		fclose(f);
	}
	return res * (sysconf(_SC_PAGESIZE) / 1024);
}
static int idle_handle(struct act_ctx *ctx, struct act_msg *m)
{
	(void)ctx;
	(void)m;
	return 0;
}
static const struct act_behaviour idle_beh = {"idle", 0, NULL, idle_handle, NULL};

static void bench_spawn(uint64_t n)
{
	start_rt((uint32_t)n + 16, 4096);
	long r0 = rss_kb();
	uint64_t t0 = zb_now_ns();
	for (uint64_t i = 0; i < n; i++) {
		act_id id;
		if (act_spawn(rt, &idle_beh, NULL, &id)) {
			fprintf(stderr, "spawn failed at %llu\n", (unsigned long long)i);
			break;
		}
	}
	double t = (zb_now_ns() - t0) / 1e9;
	long r1 = rss_kb();
	result("spawn", n / t, "actors/s", t);
	printf("RESULT spawn_mem %.4g bytes/actor %.3f\n",
	       (double)(r1 - r0) * 1024.0 / (double)n, t);
	printf("RESULT spawn_total_mib %.4g MiB %.3f\n",
	       (double)r1 / 1024.0, t);
	fflush(stdout);
	finish();
}

int main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "all";
	bool all = strcmp(what, "all") == 0;
	uint64_t scale = envu("BENCH_SCALE", 1);
	if (all || !strcmp(what, "pingpong"))
		bench_pingpong(envu("PINGPONG_N", 2000000) / scale);
	if (all || !strcmp(what, "threadring"))
		bench_threadring(envu("THREADRING_ACTORS", 1000),
				 envu("THREADRING_HOPS", 10000000) / scale);
	if (all || !strcmp(what, "counting"))
		bench_counting(envu("COUNTING_N", 2000000) / scale);
	if (all || !strcmp(what, "forkjoin"))
		bench_forkjoin(envu("FORKJOIN_ACTORS", 60), envu("FORKJOIN_N", 20000) / scale);
	if (all || !strcmp(what, "big"))
		bench_big(envu("BIG_ACTORS", 120), envu("BIG_PINGS", 10000) / scale);
	if (all || !strcmp(what, "chameneos"))
		bench_chameneos(envu("CHAMENEOS_N", 10), envu("CHAMENEOS_MEETINGS", 400000) / scale);
	if (all || !strcmp(what, "spawn"))
		bench_spawn(envu("SPAWN_N", 1000000));
	return 0;
}
