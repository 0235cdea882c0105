/* The membership state machine under real libraft, driven deterministically
 * by raft_fixture (simulated time, network and disk): elections, joins via
 * add/promote/apply, conviction -> removal with an epoch bump on every
 * survivor, the leader's reconciliation steps (member.c), and snapshot +
 * restore of the FSM onto a lagging server. Plus the pure encode/apply. */
#include "../../control/internal.h"
#include "zbmd/common.h"
#include "tap.h"

#include <raft/fixture.h>

#define N_MAX 5

static struct raft_fixture f;
static struct raft_fsm fsms[N_MAX];
static struct ctl_state st[N_MAX];
static unsigned changes[N_MAX];
static int last_status = 99;

static void on_change(void *arg, const struct ctl_state *s)
{
	(void)s;
	changes[(uintptr_t)arg]++;
}

static void apply_cb(struct raft_apply *req, int status, void *result)
{
	(void)result;
	last_status = status;
	free(req);
}

static void change_cb(struct raft_change *req, int status)
{
	last_status = status;
	free(req);
}

static bool status_set(struct raft_fixture *fx, void *arg)
{
	(void)fx;
	(void)arg;
	return last_status != 99;
}

/* The fixture's stable leader, or else the alive server in leader state
 * (the fixture only reports leaders acknowledged by every connected peer). */
static unsigned leader(void)
{
	unsigned l = raft_fixture_leader_index(&f);
	for (unsigned i = 0; l == f.n && i < f.n; i++)
		if (raft_fixture_alive(&f, i) &&
		    raft_state(raft_fixture_get(&f, i)) == RAFT_LEADER)
			l = i;
	return l;
}

/* Apply a command on the leader and step until it completes. */
static int apply(enum ctl_cmd_type t, uint16_t id, const char *addr, uint8_t reason)
{
	struct raft_buffer buf;
	struct raft_apply *req = calloc(1, sizeof(*req));
	ZB_ASSERT(ctl_fsm_encode(&buf, t, id, addr, reason) == 0);
	last_status = 99;
	int rc = raft_apply(raft_fixture_get(&f, leader()), req, &buf, 1, apply_cb);
	if (rc != 0) {
		raft_free(buf.base);
		free(req);
		return rc;
	}
	raft_fixture_step_until(&f, status_set, NULL, 5000);
	return last_status;
}

/* Run one reconciliation action (as the node's leader_step does). */
static int act(const struct ctl_action *a)
{
	struct raft *r = raft_fixture_get(&f, leader());
	struct raft_change *req;
	int rc;

	switch (a->type) {
	case CTL_ACT_JOIN:
		return apply(CTL_CMD_JOIN, a->id, a->addr, 0);
	case CTL_ACT_LEAVE:
		return apply(CTL_CMD_LEAVE, a->id, NULL, a->reason);
	default:
		break;
	}
	req = calloc(1, sizeof(*req));
	last_status = 99;
	if (a->type == CTL_ACT_RAFT_ADD)
		rc = raft_add(r, req, a->id + 1, a->addr, change_cb);
	else if (a->type == CTL_ACT_RAFT_ASSIGN)
		rc = raft_assign(r, req, a->id + 1, RAFT_VOTER, change_cb);
	else if (a->type == CTL_ACT_RAFT_REMOVE)
		rc = raft_remove(r, req, a->id + 1, change_cb);
	else
		rc = -1;
	if (rc != 0) {
		free(req);
		return rc;
	}
	raft_fixture_step_until(&f, status_set, NULL, 10000);
	return last_status;
}

static void reconcile(const struct ctl_liveness *lv, struct ctl_action *a)
{
	unsigned l = leader();
	char addr[16];
	snprintf(addr, sizeof(addr), "n%u", l);
	ctl__reconcile(raft_fixture_get(&f, l), &st[l], (uint16_t)l, addr, lv, a);
}

/* Step until every alive server applied the leader's last index. */
static bool converge(unsigned ms)
{
	raft_index idx = raft_last_index(raft_fixture_get(&f, leader()));
	for (unsigned i = 0; i < f.n; i++)
		if (raft_fixture_alive(&f, i) &&
		    !raft_fixture_step_until_applied(&f, i, idx, ms))
			return false;
	return true;
}

static void test_pure(void)
{
	struct ctl_state s;
	struct raft_buffer b;
	uint8_t enc[8192];

	memset(&s, 0, sizeof(s));
	ZB_ASSERT(ctl_fsm_encode(&b, CTL_CMD_JOIN, 5, "10.0.0.5:7400", 0) == 0);
	ok(b.len % 8 == 0, "commands are padded to 8 bytes");
	is_int(ctl_state_apply(&s, b.base, b.len), 1, "join applies");
	is_int(ctl_state_apply(&s, b.base, b.len), 0, "same join again is a no-op");
	raft_free(b.base);
	ZB_ASSERT(ctl_fsm_encode(&b, CTL_CMD_JOIN, 2, "10.0.0.2:7400", 0) == 0);
	ctl_state_apply(&s, b.base, b.len);
	((uint8_t *)b.base)[1] = 9;
	is_int(ctl_state_apply(&s, b.base, b.len), -EINVAL, "unknown command refused");
	is_int(ctl_state_apply(&s, b.base, 7), -EINVAL, "short command refused");
	raft_free(b.base);
	ok(s.epoch == 2 && s.n == 2 && s.ring[0] == 2 && s.ring[1] == 5 &&
	   s.placement[0] == 2 && s.placement[1] == 5 && s.placement[2] == 2,
	   "epoch 2, ring sorted by id, placement round-robin over the ring");
	is_int(ctl_fsm_encode(&b, CTL_CMD_JOIN, CFG_MAX_NODES, "x", 0), -EINVAL, "id out of range refused");
	size_t n = ctl_state_encode(&s, enc, sizeof(enc));
	struct ctl_state t;
	ok(ctl_state_decode(&t, enc, n) == 0 && t.epoch == 2 && t.n == 2 &&
	   strcmp(t.m[1].addr, "10.0.0.5:7400") == 0 && t.ring[1] == 5, "snapshot encoding round-trips");
	enc[0] ^= 0xff;
	is_int(ctl_state_decode(&t, enc, n), -EINVAL, "corrupt snapshot refused");
	is_int(ctl_state_decode(&t, enc, n - 1), -EINVAL, "truncated snapshot refused");
}

int main(void)
{
	struct raft_configuration conf;
	struct ctl_liveness lv;
	struct ctl_action a;

	tap_plan(43);
	test_pure();

	ZB_ASSERT(raft_fixture_initialize(&f) == 0);
	for (uintptr_t i = 0; i < 3; i++) {
		ctl_fsm_init(&fsms[i], &st[i], on_change, (void *)i);
		ZB_ASSERT(raft_fixture_grow(&f, &fsms[i]) == 0);
	}
	ZB_ASSERT(raft_fixture_configuration(&f, 3, &conf) == 0);
	ZB_ASSERT(raft_fixture_bootstrap(&f, &conf) == 0);
	raft_configuration_close(&conf);
	ZB_ASSERT(raft_fixture_start(&f) == 0);
	for (unsigned i = 0; i < 3; i++) {
		raft_set_snapshot_threshold(raft_fixture_get(&f, i), 16);
		raft_set_snapshot_trailing(raft_fixture_get(&f, i), 4);
	}
	ok(raft_fixture_step_until_has_leader(&f, 10000), "3 servers elect a leader");
	unsigned l0 = leader();

	/* The leader first puts itself in the member set (bootstrap case). */
	memset(&lv, 0, sizeof(lv));
	for (unsigned i = 0; i < 3; i++) {
		lv.alive[i] = i != l0;
		snprintf(lv.addr[i], CTL_ADDR_MAX, "n%u", i);
	}
	reconcile(&lv, &a);
	ok(a.type == CTL_ACT_JOIN && a.id == l0, "reconcile: leader joins itself first");
	is_int(act(&a), 0, "applied");
	/* Voters already in the raft configuration are joined to the FSM. */
	int steps = 0;
	for (reconcile(&lv, &a); a.type != CTL_ACT_NONE && steps < 10; reconcile(&lv, &a), steps++)
		if (act(&a) != 0)
			break;
	ok(converge(5000), "all servers applied");
	ok(st[0].n == 3 && st[1].n == 3 && st[2].n == 3 && st[0].epoch == 3 &&
	   st[1].epoch == 3 && st[2].epoch == 3, "3 members, epoch 3 on every server");
	ok(changes[0] == 3 && changes[1] == 3 && changes[2] == 3, "change callback per epoch on each");

	/* Kill the leader: a new one is elected. */
	raft_fixture_kill(&f, l0);
	raft_fixture_step_until_has_no_leader(&f, 10000);
	ok(raft_fixture_step_until_has_leader(&f, 10000) && leader() != l0,
	   "leader killed: a new leader is elected (%u -> %u)", l0, leader());
	unsigned l1 = leader();
	/* It is convicted: removal from the FSM first (new epoch), then raft. */
	lv.alive[l0] = false;
	lv.convicted[l0] = true;
	lv.alive[l1] = false;
	for (unsigned i = 0; i < 3; i++)
		if (i != l0 && i != l1)
			lv.alive[i] = true;
	reconcile(&lv, &a);
	ok(a.type == CTL_ACT_LEAVE && a.id == l0 && a.reason == CTL_LEAVE_CONVICTED,
	   "reconcile: convicted member leaves the FSM first");
	is_int(act(&a), 0, "removal committed by the survivors");
	ok(converge(5000), "survivors applied");
	bool all = true;
	for (unsigned i = 0; i < 3; i++)
		if (i != l0)
			all = all && st[i].epoch == 4 && st[i].n == 2 && !ctl_state_has(&st[i], (uint16_t)l0);
	ok(all, "every survivor: epoch 4, 2 members, ring without the dead node");
	ok(st[l0].epoch == 3, "the dead node stays on the old epoch");
	reconcile(&lv, &a);
	ok(a.type == CTL_ACT_RAFT_REMOVE && a.id == l0, "reconcile: then remove from raft");
	is_int(act(&a), 0, "raft_remove committed");
	ok(raft_fixture_get(&f, l1)->configuration.n == 2, "raft configuration has 2 voters");
	reconcile(&lv, &a);
	is_int(a.type, CTL_ACT_NONE, "reconcile: nothing left to do");

	/* A new server joins: add as spare, promote, then the FSM. */
	ctl_fsm_init(&fsms[3], &st[3], on_change, (void *)3);
	ZB_ASSERT(raft_fixture_grow(&f, &fsms[3]) == 0);
	raft_set_snapshot_threshold(raft_fixture_get(&f, 3), 16);
	raft_set_snapshot_trailing(raft_fixture_get(&f, 3), 4);
	ZB_ASSERT(raft_start(raft_fixture_get(&f, 3)) == 0);
	lv.alive[3] = true;
	snprintf(lv.addr[3], CTL_ADDR_MAX, "n3");
	reconcile(&lv, &a);
	ok(a.type == CTL_ACT_RAFT_ADD && a.id == 3, "reconcile: live non-member is added to raft");
	is_int(act(&a), 0, "raft_add committed");
	reconcile(&lv, &a);
	ok(a.type == CTL_ACT_RAFT_ASSIGN && a.id == 3, "reconcile: then promoted to voter");
	is_int(act(&a), 0, "promotion committed");
	reconcile(&lv, &a);
	ok(a.type == CTL_ACT_JOIN && a.id == 3, "reconcile: then joined to the FSM");
	is_int(act(&a), 0, "join committed");
	ok(converge(5000) && st[3].epoch == 5 && st[3].n == 3 && st[l1].epoch == 5,
	   "new server caught up: epoch 5, 3 members");

	/* Snapshots: cut a server off, churn past the threshold, reconnect. */
	unsigned lag = 3 == l1 ? (l1 == 1 ? 2 : 1) : 3;
	for (unsigned j = 0; j < f.n; j++)
		if (j != lag) {
			raft_fixture_saturate(&f, lag, j);
			raft_fixture_saturate(&f, j, lag);
		}
	/* Churn with an id that is not a raft server: 40 entries. */
	int bad = 0, committed = 0;
	for (int i = 0; i < 20 && leader() < f.n; i++) {
		int r1 = apply(CTL_CMD_JOIN, 42, "churn", 0);
		int r2 = apply(CTL_CMD_LEAVE, 42, NULL, 0);
		if (r1 || r2)
			tap_diag("churn %d: %d %d leader %u lag %u", i, r1, r2, leader(), lag);
		bad |= r1 | r2;
		committed += (r1 == 0) + (r2 == 0);
	}
	/* (the loop ends early when there is no leader: count, not only errors) */
	ok(bad == 0 && committed == 40, "40 more commands committed without the lagging server (%d)",
	   committed);
	ok(raft_fixture_get(&f, leader())->log.snapshot.last_index > 0,
	   "leader took a snapshot (log bounded)");
	uint64_t want = st[leader()].epoch;
	for (unsigned j = 0; j < f.n; j++)
		if (j != lag && j != l0) {
			raft_fixture_desaturate(&f, lag, j);
			raft_fixture_desaturate(&f, j, lag);
		}
	ok(converge(20000), "lagging server caught up");
	ok(raft_fixture_n_recv(&f, lag, RAFT_IO_INSTALL_SNAPSHOT) > 0,
	   "it was sent a snapshot (InstallSnapshot received)");
	ok(st[lag].epoch == want && st[lag].n == 3 && !ctl_state_has(&st[lag], 42) &&
	   memcmp(st[lag].ring, st[leader()].ring, sizeof(st[0].ring)) == 0,
	   "restored FSM equals the leader's (epoch %llu)", (unsigned long long)want);

	/* A committed command no node understands (a newer version's): a
	 * no-op everywhere, counted; the cluster keeps its leader and applies
	 * what follows. Refused (RAFT_MALFORMED) it stopped every FSM at that
	 * index and no leader was ever elected again. */
	struct raft_buffer nb;
	struct raft_apply *nreq = calloc(1, sizeof(*nreq));
	ZB_ASSERT(ctl_fsm_encode(&nb, CTL_CMD_JOIN, 7, "newer", 0) == 0);
	((uint8_t *)nb.base)[0] = 2;   /* the command's version */
	uint64_t ep = st[leader()].epoch;
	last_status = 99;
	ZB_ASSERT(raft_apply(raft_fixture_get(&f, leader()), nreq, &nb, 1, apply_cb) == 0);
	raft_fixture_step_until(&f, status_set, NULL, 5000);
	is_int(last_status, 0, "a command of a newer version is committed and applied");
	is_int(apply(CTL_CMD_JOIN, 43, "after", 0), 0, "the next command is committed too");
	ok(converge(5000), "every server applied both");
	all = true;
	for (unsigned i = 0; i < f.n; i++)
		if (i != l0)
			all = all && st[i].skipped == 1 && st[i].epoch == ep + 1 &&
			      !ctl_state_has(&st[i], 7) && ctl_state_has(&st[i], 43);
	ok(all, "on every server: one command skipped, node 7 not joined, node 43 joined (epoch %llu)",
	   (unsigned long long)ep + 1);
	unsigned lb = leader();
	raft_fixture_step_until_elapsed(&f, 3000);
	ok(leader() == lb && raft_state(raft_fixture_get(&f, lb)) == RAFT_LEADER,
	   "the leader stays in office");

	raft_fixture_close(&f);
	for (unsigned i = 0; i < 4; i++)
		ctl_fsm_close(&fsms[i]);
	return tap_done();
}
