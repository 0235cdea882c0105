/* act_register racing with the actor's own exit: the actor dies on its first
 * message while a plain thread registers a name for it. act_register used to
 * check liveness before taking the lock and set the slot's `named` flag
 * after the insert, while act__terminate read `named` relaxed: an exit in
 * between skipped the unregistering and left the name bound to a dead id
 * (found in review: ~650 of 100,000 registrations). Threads mode, 2
 * workers, ~1.5 s stress. */
#include "util.h"

#include <stdlib.h>

static int die_handle(struct act_ctx *c, struct act_msg *m)
{
	(void)m;
	act_exit(c, ACT_NORMAL);
	return 0;
}
static const struct act_behaviour die_beh = {.name = "die", .handle = die_handle};

int main(void)
{
	tap_plan(3);
	struct act_runtime *rt = mk_rt(2, 0);
	act_start_threads(rt);
	long tries = 0, registered = 0, stuck = 0;
	unsigned seed = 1;
	uint64_t end = zb_now_ns() + 1500000000ull;
	while (zb_now_ns() < end) {
		act_id x;
		if (act_spawn(rt, &die_beh, NULL, &x))
			continue;
		act_tell(rt, x, 1, NULL, 0);
		uint64_t d = (uint64_t)(rand_r(&seed) % 4000), t = zb_now_ns();
		while (zb_now_ns() - t < d)
			;
		int rc = act_register(rt, "svc", x);
		tries++;
		if (rc != 0)
			continue;
		registered++;
		uint64_t t1 = zb_now_ns();
		while (act_alive(rt, x) && zb_now_ns() - t1 < 100000000ull)
			;
		/* the mailbox is closed; give the exit 20 us to finish its cleanup
		 * (it unregisters right after the terminate callback) */
		t1 = zb_now_ns();
		while (zb_now_ns() - t1 < 20000)
			;
		act_id now = act_whereis(rt, "svc");
		for (int k = 0; k < 100 && now == x; k++) { /* slow machine: wait more */
			usleep(100);
			now = act_whereis(rt, "svc");
		}
		if (now == x) {
			stuck++;
			act_unregister(rt, "svc");
		}
	}
	tap_diag("%ld registrations tried, %ld made", tries, registered);
	ok(tries > 100, "enough attempts");
	ok(registered > 0, "some registrations won the race");
	is_int((int)stuck, 0, "no name left bound to a dead actor");
	act_stop_threads(rt);
	act_runtime_destroy(rt);
	return tap_done();
}
