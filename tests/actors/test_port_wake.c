/* A reply to an act_call port, with its sender stalled between the mailbox
 * push and the wake-up that follows (fault injection: the link wraps the
 * runtime's internal wake calls, see actors/module.mk). The caller takes
 * the reply meanwhile (its futex wait times out first), closes the port and
 * releases the slot; a new actor gets that slot. The sender used to read
 * the slot's kind after the push (act__make_runnable) and then queued the
 * new actor as runnable with an empty mailbox, so it later ran on two
 * workers at once (found in review). Now the kind is read before the push
 * and a port gets only a futex wake after it. Poll mode, 2 workers driven
 * by test threads, so the stale wake lands deterministically. */
#include "util.h"

#include <stdatomic.h>

struct act_runtime;
struct act_actor;
void __real_act__make_runnable(struct act_runtime *rt, struct act_actor *a);
void __real_act__port_wake(_Atomic uint32_t *seq, uint32_t before) __attribute__((weak));
static _Atomic int stall_next;

void __wrap_act__make_runnable(struct act_runtime *rt, struct act_actor *a);
void __wrap_act__make_runnable(struct act_runtime *rt, struct act_actor *a)
{
	if (atomic_exchange(&stall_next, 0))
		usleep(60000); /* preempted right after the push */
	__real_act__make_runnable(rt, a);
}

void __wrap_act__port_wake(_Atomic uint32_t *seq, uint32_t before);
void __wrap_act__port_wake(_Atomic uint32_t *seq, uint32_t before)
{
	if (atomic_exchange(&stall_next, 0))
		usleep(60000);
	if (__real_act__port_wake)
		__real_act__port_wake(seq, before);
}

static struct act_runtime *rt;
static _Atomic long inside, concurrent, handled;
static _Atomic int srv_done, stop_polling;

static int y_handle(struct act_ctx *c, struct act_msg *m)
{
	(void)c;
	(void)m;
	if (atomic_fetch_add(&inside, 1) != 0)
		atomic_fetch_add(&concurrent, 1);
	uint64_t t = zb_now_ns();
	while (zb_now_ns() - t < 20000000ull) /* 20 ms: a second runner overlaps */
		;
	atomic_fetch_sub(&inside, 1);
	atomic_fetch_add(&handled, 1);
	return 0;
}

static int srv_handle(struct act_ctx *c, struct act_msg *m)
{
	(void)c;
	struct act_msg *r = act_msg_alloc(rt);
	atomic_store(&stall_next, 1);
	if (act_reply(rt, m, r))
		act_msg_free(rt, r);
	atomic_store(&srv_done, 1);
	return 0;
}

static const struct act_behaviour y_beh = {.name = "y", .handle = y_handle};
static const struct act_behaviour srv_beh = {.name = "srv", .handle = srv_handle};

/* Poll-mode worker 0 until the server has replied (stall included), one
 * reduction at a time: whatever the late wake queued on worker 0 stays
 * there, not run, until both workers are polled together below. */
static void *poll_srv(void *arg)
{
	(void)arg;
	while (!atomic_load(&srv_done))
		act_worker_poll(rt, 0, 1);
	return NULL;
}

static void *poll_worker(void *arg)
{
	uint32_t w = (uint32_t)(uintptr_t)arg;
	while (!atomic_load(&stop_polling))
		if (!act_worker_poll(rt, w, 1000))
			usleep(100);
	return NULL;
}

int main(void)
{
	tap_plan(4);
	struct act_params p;
	act_params_default(&p);
	p.workers = 2;
	p.pin = false;
	p.max_actors = 2; /* the server and one more: y must get the port's slot */
	p.message_pool = 4096;
	if (act_runtime_create(&p, &rt)) {
		printf("Bail out! runtime\n");
		return 1;
	}
	act_id s, y;
	struct act_spawn_opts os = {.home = 1}, oy = {.home = 2};
	act_spawn_opt(rt, &srv_beh, NULL, &os, &s);
	pthread_t t, t0, t1;
	pthread_create(&t, NULL, poll_srv, NULL);
	struct act_msg *req = act_msg_alloc(rt), *rep = NULL;
	int rc = act_call(rt, s, req, 20000000ull, &rep); /* wake stalled 60 ms */
	is_int(rc, 0, "reply taken while the replier is stalled after its push");
	if (rep)
		act_msg_free(rt, rep);
	/* worker 1's actor, in the port's slot, while worker 0 is still stalled */
	is_int(act_spawn_opt(rt, &y_beh, NULL, &oy, &y), 0, "new actor in the released port slot");
	pthread_join(t, NULL); /* the stalled wake has landed */
	act_tell(rt, y, 1, NULL, 0);
	act_tell(rt, y, 1, NULL, 0);
	pthread_create(&t0, NULL, poll_worker, (void *)(uintptr_t)0);
	pthread_create(&t1, NULL, poll_worker, (void *)(uintptr_t)1);
	WAIT_UNTIL(atomic_load(&handled) >= 2, 2000);
	usleep(50000);
	atomic_store(&stop_polling, 1);
	pthread_join(t0, NULL);
	pthread_join(t1, NULL);
	is_int((int)atomic_load(&concurrent), 0, "the new actor never runs on two workers at once");
	is_int((int)atomic_load(&handled), 2, "each message handled once");
	act_runtime_destroy(rt);
	return tap_done();
}
