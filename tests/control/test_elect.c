/* Election timeouts spread by rank (control/elect.c): the slots themselves,
 * then leader kills under real libraft in raft_fixture (simulated time and
 * network, pre-vote on as in control/node.c). Each server's io draws its
 * timeout through ctl__election_timeout, either from its rank's slot (what
 * zbmd does) or uniformly over [T, 2T) (what raft_uv does by itself); the
 * uniform draw must show split votes here, so that their absence under the
 * ranked one means something. */
#include "../../control/internal.h"
#include "zbmd/common.h"
#include "tap.h"

#include <raft/fixture.h>
#include <string.h>

#define T_MS 500          /* election_timeout_ms, as in the namespace tests */
#define HB_MS 100         /* raft_heartbeat_ms, the default */
#define LAT_MS 10         /* one-way network latency */
#define KILLS 200

static struct raft_fixture f;
static struct raft_fsm fsms[5];
static struct ctl_state st[5];
static bool ranked;
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static unsigned draw(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (unsigned)(rng >> 33);
}

static void on_change(void *arg, const struct ctl_state *s)
{
	(void)arg;
	(void)s;
}

static int io_random(struct raft_io *io, int min, int max)
{
	for (unsigned i = 0; i < f.n; i++) {
		struct raft *r = raft_fixture_get(&f, i);
		if (r->io != io)
			continue;
		unsigned voters;
		int rank = ctl__voter_rank(&r->configuration, r->id, &voters);
		return ctl__election_timeout(ranked ? rank : -1, voters, min, max, draw());
	}
	ZB_ASSERT(!"io of no server");
	return min;
}

/* zbmd ticks libraft every 10 ms (control/node.c), whatever the heartbeat */
static int (*fixture_start)(struct raft_io *, unsigned, raft_io_tick_cb, raft_io_recv_cb);

static int io_start(struct raft_io *io, unsigned msecs, raft_io_tick_cb tick,
		    raft_io_recv_cb recv)
{
	return fixture_start(io, msecs < 10 ? msecs : 10, tick, recv);
}

static void test_slots(void)
{
	int bad_range = 0, bad_sep = 0, min_sep = 1 << 30;

	for (unsigned v = 2; v <= 9; v++) {
		int w = T_MS / (int)v, g = w / 2 < CTL_ELECT_GUARD_MS ? w / 2 : CTL_ELECT_GUARD_MS;
		int lo[9], hi[9];
		for (int r = 0; r < (int)v; r++) {
			lo[r] = 1 << 30;
			hi[r] = -1;
			for (unsigned d = 0; d < 4000; d++) {
				int t = ctl__election_timeout(r, v, T_MS, 2 * T_MS, d * 2654435761u);
				bad_range += t < T_MS + r * w || t >= T_MS + r * w + w - g ||
					     t >= 2 * T_MS;
				lo[r] = t < lo[r] ? t : lo[r];
				hi[r] = t > hi[r] ? t : hi[r];
			}
		}
		/* any two voters' draws: at least the guard apart */
		for (int r = 1; r < (int)v; r++) {
			bad_sep += lo[r] - hi[r - 1] < g;
			min_sep = lo[r] - hi[r - 1] < min_sep ? lo[r] - hi[r - 1] : min_sep;
		}
	}
	is_int(bad_range, 0, "2 - 9 voters: every draw inside its rank's slot, below 2T");
	is_int(bad_sep, 0, "neighbouring slots' draws are the guard apart at least (closest %d ms)",
	       min_sep);

	int lo = 1 << 30, hi = -1;
	for (unsigned d = 0; d < 20000; d++) {
		int a = ctl__election_timeout(-1, 3, T_MS, 2 * T_MS, d * 2654435761u);
		int b = ctl__election_timeout(0, 1, T_MS, 2 * T_MS, d * 2654435761u);
		int c = ctl__election_timeout(5, 3, T_MS, 2 * T_MS, d * 2654435761u);
		int m = a < b ? (a < c ? a : c) : (b < c ? b : c);
		int x = a > b ? (a > c ? a : c) : (b > c ? b : c);
		lo = m < lo ? m : lo;
		hi = x > hi ? x : hi;
	}
	ok(lo == T_MS && hi == 2 * T_MS - 1,
	   "not a voter, alone, or a rank past the voters: the whole of [T, 2T) (%d .. %d)", lo, hi);
	/* 60 voters: slots of 8 ms, a guard of 4, still inside [T, 2T) */
	int t = ctl__election_timeout(59, 60, T_MS, 2 * T_MS, 12345);
	ok(t >= T_MS + 59 * 8 && t < T_MS + 59 * 8 + 4, "60 voters: the last slot (%d ms)", t);

	struct raft_configuration c;
	raft_configuration_init(&c);
	ZB_ASSERT(raft_configuration_add(&c, 7, "a", RAFT_VOTER) == 0);
	ZB_ASSERT(raft_configuration_add(&c, 3, "b", RAFT_SPARE) == 0);
	ZB_ASSERT(raft_configuration_add(&c, 5, "c", RAFT_VOTER) == 0);
	ZB_ASSERT(raft_configuration_add(&c, 1, "d", RAFT_STANDBY) == 0);
	ZB_ASSERT(raft_configuration_add(&c, 9, "e", RAFT_VOTER) == 0);
	unsigned v = 0;
	int r5 = ctl__voter_rank(&c, 5, &v), r7 = ctl__voter_rank(&c, 7, &v),
	    r9 = ctl__voter_rank(&c, 9, &v), r3 = ctl__voter_rank(&c, 3, &v),
	    r4 = ctl__voter_rank(&c, 4, &v);
	ok(r5 == 0 && r7 == 1 && r9 == 2 && v == 3,
	   "rank: voters in id order, whatever the configuration's order (%d %d %d of %u)",
	   r5, r7, r9, v);
	ok(r3 == -1 && r4 == -1, "a spare or a server not in the configuration has no rank");
	raft_configuration_close(&c);
}

static bool new_leader(struct raft_fixture *fx, void *arg)
{
	raft_term t0 = *(raft_term *)arg;
	for (unsigned i = 0; i < fx->n; i++) {
		struct raft *r = raft_fixture_get(fx, i);
		if (raft_fixture_alive(fx, i) && raft_state(r) == RAFT_LEADER &&
		    r->current_term > t0)
			return true;
	}
	return false;
}

static unsigned leader_index(void)
{
	for (unsigned i = 0; i < f.n; i++)
		if (raft_fixture_alive(&f, i) && raft_state(raft_fixture_get(&f, i)) == RAFT_LEADER)
			return i;
	return f.n;
}

struct kills {
	unsigned done, splits, slow;
	raft_time worst, sum;
};

/* n servers; KILLS times: kill the leader, time the next one, revive */
static struct kills kill_leaders(unsigned n, bool rank)
{
	struct raft_configuration conf;
	struct kills k = {0};

	ranked = rank;
	memset(&f, 0, sizeof(f));
	ZB_ASSERT(raft_fixture_initialize(&f) == 0);
	for (unsigned i = 0; i < n; i++) {
		ctl_fsm_init(&fsms[i], &st[i], on_change, NULL);
		ZB_ASSERT(raft_fixture_grow(&f, &fsms[i]) == 0);
	}
	ZB_ASSERT(raft_fixture_configuration(&f, n, &conf) == 0);
	ZB_ASSERT(raft_fixture_bootstrap(&f, &conf) == 0);
	raft_configuration_close(&conf);
	for (unsigned i = 0; i < n; i++) {
		struct raft *r = raft_fixture_get(&f, i);
		r->io->random = io_random;
		fixture_start = r->io->start;
		r->io->start = io_start;
		raft_set_election_timeout(r, T_MS);
		raft_set_heartbeat_timeout(r, HB_MS);
		raft_set_pre_vote(r, true);
		raft_fixture_set_network_latency(&f, i, LAT_MS);
	}
	ZB_ASSERT(raft_fixture_start(&f) == 0);
	for (unsigned i = 0; i < n; i++)   /* drawn again, now as voters */
		raft_set_election_timeout(raft_fixture_get(&f, i), T_MS);
	raft_fixture_step_until_elapsed(&f, 5000);
	for (unsigned j = 0; j < KILLS; j++) {
		unsigned l = leader_index();
		if (l == f.n)
			break;
		raft_term t0 = raft_fixture_get(&f, l)->current_term;
		/* a random moment between two heartbeats */
		raft_fixture_step_until_elapsed(&f, draw() % HB_MS);
		raft_time at = raft_fixture_time(&f);
		raft_fixture_kill(&f, l);
		if (!raft_fixture_step_until(&f, new_leader, &t0, 20000))
			break;
		raft_time dt = raft_fixture_time(&f) - at;
		raft_term t1 = raft_fixture_get(&f, leader_index())->current_term;
		k.done++;
		k.splits += t1 - t0 > 1;
		k.slow += dt > 2 * T_MS + 4 * LAT_MS;
		k.sum += dt;
		k.worst = dt > k.worst ? dt : k.worst;
		raft_fixture_revive(&f, l);
		raft_fixture_step_until_elapsed(&f, 2000);
	}
	raft_fixture_close(&f);
	for (unsigned i = 0; i < n; i++)
		ctl_fsm_close(&fsms[i]);
	return k;
}

int main(void)
{
	tap_plan(14);
	test_slots();

	for (unsigned n = 3; n <= 5; n += 2) {
		struct kills u = kill_leaders(n, false), r = kill_leaders(n, true);
		tap_diag("%u servers, %d leader kills, T %d ms, latency %d ms: uniform draw "
			 "%u split votes, mean %llu ms, worst %llu; ranked %u, mean %llu, worst %llu",
			 n, KILLS, T_MS, LAT_MS, u.splits,
			 (unsigned long long)(u.done ? u.sum / u.done : 0),
			 (unsigned long long)u.worst, r.splits,
			 (unsigned long long)(r.done ? r.sum / r.done : 0),
			 (unsigned long long)r.worst);
		ok(u.done == KILLS && r.done == KILLS, "%u servers: a new leader after each of "
		   "%d kills, both draws (%u, %u)", n, KILLS, u.done, r.done);
		ok(u.splits > 0, "%u servers, uniform draw: split votes happen (%u): the harness "
		   "can show them", n, u.splits);
		is_int(r.splits, 0, "%u servers, ranked draw: no split vote", n);
		ok(r.slow == 0, "%u servers, ranked draw: every new leader within 2T + 4 "
		   "latencies of the kill (worst %llu ms)", n, (unsigned long long)r.worst);
	}
	return tap_done();
}
