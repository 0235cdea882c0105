/* act_call from a thread that is not an actor: the replier (a worker, on a
 * node an lcore) enters the kernel to wake the caller only when the caller
 * has gone to sleep on its port. The replier used to issue FUTEX_WAKE for
 * every reply, also to a caller that was still polling: a syscall inside
 * the loop that ran the actor. The link wraps syscall() to count the
 * FUTEX_WAKE calls made by the thread that drives the worker.
 *   1. call_spin_ns 1 s: 300 calls answered while their callers poll, each
 *      reply checked, and the worker made no FUTEX_WAKE.
 *   2. call_spin_ns 0 (sleep at once), the replier delayed 2 ms so that
 *      the caller is asleep: every call is answered, none waits near its
 *      timeout (a lost wake-up sleeps until the deadline), and the worker
 *      did wake sleeping callers. */
#include "util.h"

#include <linux/futex.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <sys/syscall.h>

long __real_syscall(long nr, ...);
long __wrap_syscall(long nr, ...);

static __thread int on_worker;
static _Atomic long worker_wakes;

long __wrap_syscall(long nr, ...)
{
	va_list ap;
	long a[6];
	va_start(ap, nr);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	if (nr == SYS_futex && on_worker && (a[1] & FUTEX_CMD_MASK) == FUTEX_WAKE)
		atomic_fetch_add(&worker_wakes, 1);
	return __real_syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

static struct act_runtime *rt;
static _Atomic int stop;
static _Atomic uint64_t reply_delay_ns;

static int echo_handle(struct act_ctx *c, struct act_msg *m)
{
	(void)c;
	uint64_t d = atomic_load(&reply_delay_ns);
	if (d) {
		uint64_t t = zb_now_ns();
		while (zb_now_ns() - t < d)
			;
	}
	struct act_msg *r = act_msg_alloc(rt);
	uint64_t v;
	memcpy(&v, m->u.bytes, sizeof(v));
	v = ~v;
	act_msg_set_bytes(r, &v, sizeof(v));
	if (act_reply(rt, m, r))
		act_msg_free(rt, r);
	return 0;
}

static const struct act_behaviour echo_beh = {.name = "echo", .handle = echo_handle};

static void *drive(void *arg)
{
	(void)arg;
	on_worker = 1;
	while (!atomic_load(&stop))
		act_worker_poll(rt, 0, 1000);
	return NULL;
}

/* n calls; returns how many were answered correctly; *slow counts those
 * that took over 1 s (timeout 3 s). */
static int calls(act_id echo, int n, int *slow)
{
	int good = 0;
	*slow = 0;
	for (int i = 0; i < n; i++) {
		struct act_msg *req = act_msg_alloc(rt), *rep = NULL;
		uint64_t v = 0x5a5a0000u + (uint64_t)i, back = 0;
		act_msg_set_bytes(req, &v, sizeof(v));
		uint64_t t = zb_now_ns();
		int rc = act_call(rt, echo, req, 3000000000ull, &rep);
		if (zb_now_ns() - t > 1000000000ull)
			(*slow)++;
		if (rc == 0 && rep) {
			memcpy(&back, rep->u.bytes, sizeof(back));
			if (back == ~v)
				good++;
		}
		if (rep)
			act_msg_free(rt, rep);
	}
	return good;
}

static act_id start(uint32_t spin_ns, pthread_t *t)
{
	struct act_params p;
	act_id echo = 0;
	act_params_default(&p);
	p.workers = 1;
	p.pin = false;
	p.max_actors = 64;
	p.message_pool = 1024;
	p.call_spin_ns = spin_ns;
	if (act_runtime_create(&p, &rt) || act_spawn(rt, &echo_beh, NULL, &echo)) {
		printf("Bail out! runtime\n");
		exit(1);
	}
	atomic_store(&stop, 0);
	atomic_store(&worker_wakes, 0);
	pthread_create(t, NULL, drive, NULL);
	return echo;
}

static void finish(pthread_t t)
{
	atomic_store(&stop, 1);
	pthread_join(t, NULL);
	act_runtime_destroy(rt);
}

int main(void)
{
	tap_plan(6);
	pthread_t t;
	int slow;

	act_id echo = start(1000000000u, &t);
	is_int(calls(echo, 300, &slow), 300, "polling caller: 300 calls answered");
	is_int(slow, 0, "polling caller: none took over 1 s");
	is_int((int)atomic_load(&worker_wakes), 0,
	       "polling caller: the worker made no FUTEX_WAKE for 300 replies");
	finish(t);

	atomic_store(&reply_delay_ns, 2000000);
	echo = start(0, &t);
	is_int(calls(echo, 100, &slow), 100, "sleeping caller: 100 calls answered");
	is_int(slow, 0, "sleeping caller: none waited for its timeout (no lost wake-up)");
	long w = atomic_load(&worker_wakes);
	ok(w >= 50, "sleeping caller: the worker woke the callers (%ld FUTEX_WAKE for 100 replies)", w);
	finish(t);
	return tap_done();
}
