/* control/elect.c — Raft's randomized election timeout, spread by rank.
 *
 * libraft draws each node's election timeout uniformly from [T, 2T) through
 * raft_io.random (Raft thesis §3.4, §9.3: randomized timeouts make split
 * votes rare, not impossible). A follower that still has a leader refuses
 * (pre-)votes until its own timeout fires (§4.2.3, §9.6), so after a leader
 * dies the election ends when the second survivor's timer fires, unless the
 * two fire within a message's flight of each other: then each grants the
 * other's pre-vote, both stand in the same term, the vote splits and a whole
 * new timeout passes (3-node namespace cluster, 500 ms: 2 of 25 leader kills
 * took 600 - 730 ms more).
 * Here each voter draws from its own slot of [T, 2T): slot `rank` of
 * `voters` equal slots (the voters in id order), less a guard at the slot's
 * top, so that no two voters' timeouts are within the guard of each other
 * and a vote splits only when a message is slower than the guard. */
#include "internal.h"
#include "zbmd/common.h"

int ctl__voter_rank(const struct raft_configuration *c, raft_id self, unsigned *voters)
{
	unsigned n = 0, below = 0;
	bool found = false;

	ZB_ASSERT(c && voters);
	for (unsigned i = 0; i < c->n; i++) {
		if (c->servers[i].role != RAFT_VOTER)
			continue;
		n++;
		found |= c->servers[i].id == self;
		below += c->servers[i].id < self;
	}
	*voters = n;
	ZB_ASSERT(!found || below < n);
	return found ? (int)below : -1;
}

int ctl__election_timeout(int rank, unsigned voters, int min, int max, unsigned draw)
{
	ZB_ASSERT(min >= 0 && max > min);
	int span = max - min;
	int w = voters ? span / (int)voters : span;
	int g = w / 2 < CTL_ELECT_GUARD_MS ? w / 2 : CTL_ELECT_GUARD_MS;
	int t;

	if (rank < 0 || voters < 2 || (unsigned)rank >= voters || w - g < 1)
		t = min + (int)(draw % (unsigned)span);
	else
		t = min + rank * w + (int)(draw % (unsigned)(w - g));
	ZB_ASSERT(t >= min && t < max);
	return t;
}
