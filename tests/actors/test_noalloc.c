/* No allocation after init on the message path: this program replaces
 * malloc & co. (the executable's definitions win over libc's for every
 * caller, the runtime included) and counts calls while armed. Armed: sends,
 * receives, ping-pong, timers, cancel, links, monitors, exits, call_async and
 * act_call, in poll mode and with worker threads. Skipped under sanitizers,
 * which own malloc. */
#include "util.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
int main(void)
{
	tap_skip_all("sanitizers replace malloc themselves");
}
#else

#include <stdatomic.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static _Atomic int armed;
static _Atomic long allocs;

static void note(void)
{
	if (atomic_load_explicit(&armed, memory_order_relaxed))
		atomic_fetch_add(&allocs, 1);
}
void *malloc(size_t n) { note(); return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { note(); return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { note(); return __libc_realloc(p, n); }
void free(void *p) { __libc_free(p); }
void *aligned_alloc(size_t al, size_t n) { note(); return __libc_memalign(al, n); }
int posix_memalign(void **p, size_t al, size_t n)
{
	note();
	*p = __libc_memalign(al, n);
	return *p ? 0 : ENOMEM;
}

/* ping-pong + one of everything */
struct st {
	act_id peer;
	uint64_t left;
};
static _Atomic uint64_t done_rounds;
static act_id echo_id;

static int pp(struct act_ctx *ctx, struct act_msg *m)
{
	struct st *s = act_state(ctx);
	struct act_runtime *rt = act_ctx_runtime(ctx);
	uint64_t ref;
	switch (m->tag) {
	case 1: /* setup: peer, rounds */
		memcpy(&s->peer, m->u.bytes, 8);
		memcpy(&s->left, m->u.bytes + 8, 8);
		return 0;
	case 2: /* ball */
		if (s->left == 0) {
			atomic_fetch_add(&done_rounds, 1);
			return 0;
		}
		s->left--;
		return act_send(rt, s->peer, (act_msg_take(ctx, m), m));
	case 3: { /* control-path bits: monitor, link, timers, call */
		act_id peer = s->peer;
		int rc = act_monitor(ctx, peer, &ref);
		rc |= act_demonitor(ctx, ref);
		rc |= act_link(ctx, peer);
		rc |= act_unlink(ctx, peer);
		struct act_msg *t = act_msg_alloc(rt);
		uint64_t tref;
		rc |= act_send_after(rt, act_self(ctx), 1000000000ull, t, &tref);
		rc |= act_cancel_timer(rt, tref);
		struct act_msg *q = act_msg_alloc(rt);
		q->tag = 9;
		rc |= act_call_async(ctx, echo_id, q, 1000000000ull, &ref);
		return rc;
	}
	default:
		if (m->flags & ACT_MF_REPLY)
			atomic_fetch_add(&done_rounds, 1);
		return 0;
	}
}
static const struct act_behaviour ppb = {.name = "pp", .state_size = sizeof(struct st),
					 .handle = pp};

static int echo(struct act_ctx *ctx, struct act_msg *m)
{
	struct act_runtime *rt = act_ctx_runtime(ctx);
	if (m->tag == 9) {
		act_msg_take(ctx, m);
		if (act_reply(rt, m, m)) /* the request travels back as the reply */
			act_msg_free(rt, m);
	}
	return 0;
}
static const struct act_behaviour echob = {.name = "echo", .handle = echo};

static void setup(struct act_runtime *rt, act_id a, act_id peer, uint64_t n)
{
	uint8_t b[16];
	memcpy(b, &peer, 8);
	memcpy(b + 8, &n, 8);
	act_tell(rt, a, 1, b, 16);
}

static void workload(struct act_runtime *rt, act_id a, act_id b, bool poll)
{
	atomic_store(&done_rounds, 0);
	setup(rt, a, b, 20000);
	setup(rt, b, a, 20000);
	act_tell(rt, a, 3, NULL, 0);
	act_tell(rt, b, 3, NULL, 0);
	act_tell(rt, a, 2, NULL, 0);
	if (poll)
		drain(rt, 2);
	else
		WAIT_UNTIL(atomic_load(&done_rounds) >= 3, 5000);
	/* a short-lived actor: spawn (small state), link, exit */
	act_id t;
	act_spawn(rt, &echob, NULL, &t);
	act_exit_signal(rt, t, ACT_SHUTDOWN);
	struct act_msg *q = act_msg_alloc(rt), *r = NULL;
	q->tag = 9;
	if (!poll && act_call(rt, echo_id, q, 1000000000ull, &r) == 0)
		act_msg_free(rt, r);
	else if (poll)
		act_msg_free(rt, q);
	if (poll)
		drain(rt, 2);
	else
		usleep(20000);
}

int main(void)
{
	tap_plan(5);
	/* the counter itself works (the runtime's allocations are seen too) */
	atomic_store(&armed, 1);
	struct act_runtime *probe = mk_rt(1, 0);
	atomic_store(&armed, 0);
	ok(atomic_load(&allocs) > 0, "interposed malloc sees the runtime's init allocations (%ld)",
	   atomic_load(&allocs));
	act_runtime_destroy(probe);
	atomic_store(&allocs, 0);
	struct act_runtime *rt = mk_rt(2, 0);
	act_id a, b;
	act_spawn(rt, &echob, NULL, &echo_id);
	act_spawn(rt, &ppb, NULL, &a);
	act_spawn(rt, &ppb, NULL, &b);
	drain(rt, 2);
	printf("# warming up\n");
	fflush(stdout);

	atomic_store(&armed, 1);
	workload(rt, a, b, true);
	atomic_store(&armed, 0);
	is_int(atomic_load(&allocs), 0, "poll mode: no allocation on the message path");
	ok(atomic_load(&done_rounds) >= 3, "poll mode: the workload ran (%llu)",
	   (unsigned long long)atomic_load(&done_rounds));

	act_start_threads(rt);
	usleep(10000);
	atomic_store(&allocs, 0);
	atomic_store(&armed, 1);
	workload(rt, a, b, false);
	atomic_store(&armed, 0);
	is_int(atomic_load(&allocs), 0, "threads: no allocation on the message path");
	ok(atomic_load(&done_rounds) >= 3, "threads: the workload ran (%llu)",
	   (unsigned long long)atomic_load(&done_rounds));
	act_runtime_destroy(rt);
	return tap_done();
}
#endif
