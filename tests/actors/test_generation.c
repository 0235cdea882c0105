/* Stale ids and slot reuse. The generation in an id was 16 bits and freed
 * slots were reused LIFO, so one spawn/exit cycle after another reused the
 * same slot and its generation wrapped after 65535 cycles (8 ms in review):
 * a dead actor's id then named a new actor and a message sent to it was
 * delivered to that one. Now the generation has 18 bits and released slots
 * are reused FIFO after every slot has been used once. Poll mode, 1 worker.
 *
 * Generation 0 names no actor, yet an id with generation 0 naming a slot
 * never used (ACT_ID_NONE among them) passed the liveness checks: a
 * never-used slot's word is 0, generation 0 and not closed. act_alive said
 * yes, act_register took it, and act_send, act_tell, act_exit_signal and
 * act_deliver_remote (one message from a peer) pushed into an uninitialised
 * mailbox and crashed (review).
 *
 * A restarted node's ids were its previous incarnation's: an id carries no
 * incarnation, a fresh runtime hands out slots in the same order and every
 * slot started at generation 1, so an id of a gone actor named the new
 * runtime's actor in that slot (a remote call to a killed and restarted
 * node's old id was answered by the new actor, a monitor of it watched the
 * new one: review). Now each runtime starts its slots at generations drawn
 * from a seed of its own. Part 5. */
#include "util.h"

static int got;
static int h(struct act_ctx *c, struct act_msg *m)
{
	(void)c;
	if (m->tag == 7)
		got++;
	return 0;
}
static const struct act_behaviour beh = {.name = "b", .handle = h};

static struct act_runtime *mk(uint32_t max_actors)
{
	struct act_params p;
	struct act_runtime *rt = NULL;
	act_params_default(&p);
	p.workers = 1;
	p.pin = false;
	p.max_actors = max_actors;
	p.message_pool = 1024;
	if (act_runtime_create(&p, &rt)) {
		printf("Bail out! act_runtime_create\n");
		exit(1);
	}
	return rt;
}

/* Spawns and kills actors until one gets `x` again (or `cycles` pass);
 * returns the cycles done. */
static long churn(struct act_runtime *rt, act_id x, long cycles)
{
	long i;
	for (i = 1; i <= cycles; i++) {
		act_id y;
		if (act_spawn(rt, &beh, NULL, &y))
			return -1;
		if (y == x)
			break;
		act_exit_signal(rt, y, ACT_KILL);
		drain(rt, 1);
	}
	return i;
}

int main(void)
{
	tap_plan(17);

	/* id layout: the node field (remote routing) stays in bits 48..63 */
	act_id id = act_id_make(0xabcd, (1u << 30) - 1, (1u << 18) - 1);
	is_int(act_id_node(id), 0xabcd, "node field");
	ok(act_id_slot(id) == (1u << 30) - 1 && act_id_gen(id) == (1u << 18) - 1,
	   "30-bit slot and 18-bit generation round-trip");
	ok(act_id_make(3, 0, 0) == (act_id)3 << 48, "node-only id unchanged");

	/* 1: a held stale id, many spawn/exit cycles (LIFO reused its slot
	 * every time: the id came back after 65535 cycles) */
	struct act_runtime *rt = mk(16);
	act_id x;
	act_spawn(rt, &beh, NULL, &x);
	act_exit_signal(rt, x, ACT_KILL);
	drain(rt, 1);
	long n = churn(rt, x, 70000);
	ok(n > 70000, "no new actor got the dead id in 70,000 spawn/exit cycles (%ld)", n);
	struct act_msg *m = act_msg_alloc(rt);
	m->tag = 7;
	int rc = act_send(rt, x, m);
	if (rc)
		act_msg_free(rt, m);
	drain(rt, 1);
	is_int(rc, ZB_ERR_STALE_ID, "the stale id is still refused");
	is_int(got, 0, "nothing delivered to a newer actor");
	act_runtime_destroy(rt);

	/* 2: FIFO: with every other slot free, the next spawns go round them
	 * all before the dead actor's slot comes back */
	rt = mk(8);
	act_id ids[8];
	for (int i = 0; i < 8; i++)
		act_spawn(rt, &beh, NULL, &ids[i]);
	for (int i = 0; i < 8; i++)
		act_exit_signal(rt, ids[i], ACT_KILL);
	drain(rt, 1);
	bool fifo = true;
	for (int i = 0; i < 8; i++) {
		act_id y;
		act_spawn(rt, &beh, NULL, &y);
		fifo &= act_id_slot(y) == act_id_slot(ids[i]) &&
			act_id_gen(y) == act_id_gen(ids[i]) + 1;
		act_exit_signal(rt, y, ACT_KILL);
		drain(rt, 1);
	}
	ok(fifo, "released slots are reused in release order, next generation");

	/* 3: the generation wraps only after 2^18 - 1 reuses of one slot, and
	 * skips 0 (max_actors 1: every spawn reuses slot 0) */
	act_runtime_destroy(rt);
	rt = mk(1);
	act_spawn(rt, &beh, NULL, &x);
	act_exit_signal(rt, x, ACT_KILL);
	drain(rt, 1);
	n = churn(rt, x, 300000);
	is_int((int)n, (1 << 18) - 1, "one slot: the id comes back after 2^18 - 1 cycles");
	ok(act_id_gen(x) != 0 && act_alive(rt, x), "generation 0 skipped");
	act_exit_signal(rt, x, ACT_KILL);
	drain(rt, 1);
	act_runtime_destroy(rt);

	/* 4: generation 0 on a slot never used, and ACT_ID_NONE on node 0 */
	rt = mk(16);
	act_spawn(rt, &beh, NULL, &x);
	act_id g0 = act_id_make(1, 5, 0);
	ok(!act_alive(rt, g0) && act_register(rt, "g0", g0) == ZB_ERR_STALE_ID &&
	   act_whereis(rt, "g0") == ACT_ID_NONE,
	   "generation 0: not alive, not registered");
	m = act_msg_alloc(rt);
	m->tag = 7;
	rc = act_send(rt, g0, m);
	if (rc)
		act_msg_free(rt, m);
	int rc2 = act_tell(rt, g0, 7, NULL, 0);
	int rc3 = act_exit_signal(rt, g0, ACT_KILL);
	ok(rc == ZB_ERR_STALE_ID && rc2 == ZB_ERR_STALE_ID && rc3 == ZB_ERR_STALE_ID,
	   "generation 0: act_send, act_tell, act_exit_signal refused (%d %d %d)", rc, rc2, rc3);
	m = act_msg_alloc(rt);
	m->from = act_id_make(2, 1, 1);
	m->to = act_id_make(1, 6, 0);
	m->tag = 7;
	rc = act_deliver_remote(rt, m);
	if (rc)
		act_msg_free(rt, m);
	drain(rt, 1);
	is_int(rc, ZB_ERR_STALE_ID, "generation 0 from a peer (act_deliver_remote) refused");
	act_runtime_destroy(rt);
	struct act_params p;
	act_params_default(&p);
	p.node = 0;
	p.workers = 1;
	p.pin = false;
	p.max_actors = 16;
	p.message_pool = 1024;
	if (act_runtime_create(&p, &rt)) {
		printf("Bail out! act_runtime_create\n");
		exit(1);
	}
	ok(!act_alive(rt, ACT_ID_NONE) &&
	   act_register(rt, "none", ACT_ID_NONE) == ZB_ERR_STALE_ID &&
	   act_tell(rt, ACT_ID_NONE, 7, NULL, 0) == ZB_ERR_STALE_ID,
	   "node 0: ACT_ID_NONE is no actor (alive, register, tell)");
	drain(rt, 1);
	is_int(got, 0, "nothing delivered anywhere");
	act_runtime_destroy(rt);

	/* 5: a restart (a new runtime, same parameters, the same spawns):
	 * the old incarnation's ids name none of the new one's actors. An id
	 * may meet one by chance (2^-18 each): at most one of 64 */
	enum { NRS = 64 };
	act_id old[NRS], neu[NRS];
	rt = mk(NRS);
	for (int i = 0; i < NRS; i++)
		act_spawn(rt, &beh, NULL, &old[i]);
	act_runtime_destroy(rt);
	rt = mk(NRS);
	int same = 0, alive = 0, gen1 = 0;
	bool nonzero = true;
	for (int i = 0; i < NRS; i++) {
		act_spawn(rt, &beh, NULL, &neu[i]);
		same += neu[i] == old[i];
		gen1 += act_id_gen(neu[i]) == 1;
		nonzero &= act_id_gen(neu[i]) != 0 && act_id_slot(neu[i]) == act_id_slot(old[i]);
	}
	for (int i = 0; i < NRS; i++)
		alive += act_alive(rt, old[i]);
	ok(nonzero && same <= 1 && alive <= 1,
	   "a new runtime's first %d actors take the same slots with other generations: %d of the old ids name one of them",
	   NRS, alive);
	ok(gen1 <= 1, "slots do not all start at generation 1 (%d of %d do)", gen1, NRS);
	int stale = 0;
	for (int i = 0; i < NRS; i++) {
		if (old[i] == neu[i])
			continue;
		m = act_msg_alloc(rt);
		m->tag = 7;
		rc = act_send(rt, old[i], m);
		if (rc)
			act_msg_free(rt, m);
		stale += rc == ZB_ERR_STALE_ID;
	}
	drain(rt, 1);
	ok(stale == NRS - same && got == 0,
	   "a message to an old id is refused (ZB_ERR_STALE_ID: %d of %d), none delivered (%d)",
	   stale, NRS - same, got);
	act_runtime_destroy(rt);
	return tap_done();
}
