/* Request/reply: act_call from a plain thread (reply, timeout, late reply
 * discarded), act_call_async inside an actor (reply, timeout, late reply
 * never delivered as a stray). Threads mode, 2 workers.
 * act_call with timeout_ns = UINT64_MAX (infinity) computed its deadline as
 * now + timeout_ns, which wrapped to the past: it timed out at once (review). */
#include "util.h"

/* server: tag 1 echo now; tag 2 reply after 60 ms (via a timer to itself) */
static _Atomic int late_reply_rc = 1;
static int srv_handle(struct act_ctx *ctx, struct act_msg *m)
{
	struct act_runtime *rt = act_ctx_runtime(ctx);
	if (m->tag == 1 || m->tag == 3) {
		struct act_msg *r = act_msg_alloc(rt);
		r->tag = m->tag == 3 ? 3 : 100;
		memcpy(r->u.bytes, m->u.bytes, 8);
		r->kind = ACT_PL_INLINE;
		r->len = 8;
		int rc = act_reply(rt, m, r);
		if (rc)
			act_msg_free(rt, r);
		if (m->tag == 3)
			atomic_store(&late_reply_rc, rc);
		return 0;
	}
	if (m->tag == 5) { /* a blocking call inside an actor is refused */
		struct act_msg *q = act_msg_alloc(rt), *r = NULL;
		atomic_store(&late_reply_rc, act_call(rt, act_self(ctx), q, 1000, &r));
		return 0;
	}
	if (m->tag == 2) { /* delay: forward the request to ourselves later */
		act_msg_take(ctx, m);
		m->tag = 3;
		return act_send_after(rt, act_self(ctx), 60000000, m, NULL);
	}
	return 0;
}
static const struct act_behaviour srv = {.name = "srv", .handle = srv_handle};

/* client actor: on tag 10 calls srv (tag in payload), records outcome */
static _Atomic int c_replies, c_timeouts, c_strays;
static act_id server;
static int cli_handle(struct act_ctx *ctx, struct act_msg *m)
{
	struct act_runtime *rt = act_ctx_runtime(ctx);
	uint64_t ref;
	if (m->tag == 10 || m->tag == 11) {
		struct act_msg *q = act_msg_alloc(rt);
		q->tag = m->tag == 10 ? 1 : 2;
		uint64_t v = 77;
		act_msg_set_bytes(q, &v, 8);
		int rc = act_call_async(ctx, server, q, 20000000, &ref);
		if (rc)
			act_msg_free(rt, q);
		return rc;
	}
	if (m->tag == ACT_TAG_TIMEOUT)
		atomic_fetch_add(&c_timeouts, 1);
	else if ((m->flags & ACT_MF_REPLY) && m->tag == 100)
		atomic_fetch_add(&c_replies, 1);
	else
		atomic_fetch_add(&c_strays, 1);
	return 0;
}
static const struct act_behaviour cli = {.name = "cli", .handle = cli_handle};

int main(void)
{
	tap_plan(14);
	struct act_runtime *rt = mk_rt(2, 0);
	act_spawn(rt, &srv, NULL, &server);
	act_start_threads(rt);

	struct act_msg *q = act_msg_alloc(rt), *r = NULL;
	uint64_t v = 4242;
	q->tag = 1;
	act_msg_set_bytes(q, &v, 8);
	is_int(act_call(rt, server, q, 2000000000ull, &r), 0, "call: reply");
	uint64_t got = 0;
	if (r) {
		memcpy(&got, r->u.bytes, 8);
		act_msg_free(rt, r);
	}
	ok(got == 4242 && r, "call: reply carries the answer");

	q = act_msg_alloc(rt);
	q->tag = 2;
	act_msg_set_bytes(q, &v, 8);
	uint64_t t0 = zb_now_ns();
	is_int(act_call(rt, server, q, 15000000, &r), ZB_ERR_TIMEOUT, "call: timeout");
	double el = (zb_now_ns() - t0) / 1e6;
	ok(el >= 15 && el < 1000, "after its timeout (%.1f ms)", el);
	WAIT_UNTIL(atomic_load(&late_reply_rc) != 1, 2000);
	is_int(atomic_load(&late_reply_rc), ZB_ERR_STALE_ID, "late reply finds the caller's port gone");

	/* no deadline: the 60 ms reply is waited for */
	q = act_msg_alloc(rt);
	q->tag = 2;
	act_msg_set_bytes(q, &v, 8);
	atomic_store(&late_reply_rc, 1);
	t0 = zb_now_ns();
	is_int(act_call(rt, server, q, UINT64_MAX, &r), 0, "call with timeout UINT64_MAX: reply");
	el = (zb_now_ns() - t0) / 1e6;
	ok(r && r->tag == 3 && el >= 50, "it waited for the 60 ms reply (%.1f ms)", el);
	if (r)
		act_msg_free(rt, r);

	q = act_msg_alloc(rt);
	is_int(act_call(rt, act_id_make(1, 4000, 3), q, 1000000, &r), ZB_ERR_STALE_ID, "call to a dead id: stale");

	atomic_store(&late_reply_rc, 1);
	act_tell(rt, server, 5, NULL, 0);
	WAIT_UNTIL(atomic_load(&late_reply_rc) != 1, 2000);
	is_int(atomic_load(&late_reply_rc), -EDEADLK, "act_call inside an actor: EDEADLK");

	act_id c;
	act_spawn(rt, &cli, NULL, &c);
	act_tell(rt, c, 10, NULL, 0);
	WAIT_UNTIL(atomic_load(&c_replies) == 1, 2000);
	is_int(atomic_load(&c_replies), 1, "call_async: reply delivered");
	atomic_store(&late_reply_rc, 1);
	act_tell(rt, c, 11, NULL, 0);
	WAIT_UNTIL(atomic_load(&late_reply_rc) != 1, 2000);
	usleep(20000);
	is_int(atomic_load(&c_timeouts), 1, "call_async: timeout delivered");
	is_int(atomic_load(&c_strays), 0, "late reply not delivered as a stray");
	struct act_stats st;
	act_get_stats(rt, &st);
	is_int(st.late_replies, 1, "late reply counted as discarded");

	/* Timers cancelled from a plain thread while the workers move them from
	 * their inboxes into their heaps: each message comes back on the
	 * owner's next timer pass (parks are at most 100 ms), none waits for
	 * its 10 s deadline. */
	uint32_t base = st.msgs_in_use;
	int bad = 0;
	for (int k = 0; k < 2000; k++) {
		struct act_msg *t = act_msg_alloc(rt);
		uint64_t tref;
		if (!t || act_send_after(rt, k & 1 ? c : server, 10000000000ull, t, &tref) ||
		    act_cancel_timer(rt, tref))
			bad++;
		if (k % 16 == 0)
			usleep(50); /* the woken workers drain meanwhile */
	}
	WAIT_UNTIL((act_get_stats(rt, &st), st.msgs_in_use == base), 1000);
	ok(!bad && st.msgs_in_use == base,
	   "2000 timers cancelled from a thread: all freed within 1 s (%u in use, %u before)",
	   st.msgs_in_use, base);
	act_runtime_destroy(rt);
	return tap_done();
}
