/* A handler that forwards the message it is handling (act_send, allowed by
 * docs/actors.md) and keeps working afterwards. The runtime used to read the
 * message once the handler returned to decide whether to free it; by then the
 * receiver on the other worker could be handling it (state MS_HANDLING
 * again), so the forwarder's worker freed it under the receiver (found in
 * review: about 1 in 20 forwards). Threads mode, 2 workers, ~1.5 s. */
#include "util.h"
#include "../../actors/internal.h"

static struct act_runtime *rt;
static act_id fwd_to;
static _Atomic long bad, handled, sent;

static void spin_ns(uint64_t ns)
{
	uint64_t t = zb_now_ns();
	while (zb_now_ns() - t < ns)
		;
}

static int recv_handle(struct act_ctx *c, struct act_msg *m)
{
	(void)c;
	if (m->tag == 1) {
		uint64_t id = m->id;
		spin_ns(40000); /* the forwarder's handler returns meanwhile */
		if (m->_priv.state != MS_HANDLING || m->id != id)
			atomic_fetch_add(&bad, 1);
		atomic_fetch_add(&handled, 1);
	}
	return 0;
}

static int fwd_handle(struct act_ctx *c, struct act_msg *m)
{
	(void)c;
	if (act_send(rt, fwd_to, m) == 0) {
		atomic_fetch_add(&sent, 1);
		spin_ns(15000); /* more work after forwarding */
	}
	return 0;
}

static const struct act_behaviour fwd_beh = {.name = "fwd", .handle = fwd_handle};
static const struct act_behaviour recv_beh = {.name = "recv", .handle = recv_handle};

int main(void)
{
	tap_plan(3);
	rt = mk_rt(2, 0);
	act_id f;
	struct act_spawn_opts of = {.home = 1}, orc = {.home = 2};
	if (act_spawn_opt(rt, &fwd_beh, NULL, &of, &f) ||
	    act_spawn_opt(rt, &recv_beh, NULL, &orc, &fwd_to)) {
		printf("Bail out! spawn\n");
		return 1;
	}
	act_start_threads(rt);
	uint64_t end = zb_now_ns() + 1500000000ull;
	while (zb_now_ns() < end && atomic_load(&bad) == 0) {
		act_tell(rt, fwd_to, 2, NULL, 0); /* keeps the receiver busy */
		act_tell(rt, f, 1, NULL, 0);
		usleep(30);
	}
	WAIT_UNTIL(atomic_load(&handled) == atomic_load(&sent), 2000);
	act_stop_threads(rt);
	tap_diag("forwarded %ld, handled %ld", (long)sent, (long)handled);
	is_int((int)atomic_load(&bad), 0, "a forwarded message is never freed under its receiver");
	ok(atomic_load(&sent) > 100 && atomic_load(&handled) == atomic_load(&sent),
	   "every forwarded message handled once");
	struct act_stats st;
	act_get_stats(rt, &st);
	is_int((int)st.msgs_in_use, 0, "no message lost or freed twice");
	act_runtime_destroy(rt);
	return tap_done();
}
