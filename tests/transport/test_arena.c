/* The reassembly arena's allocation policy: address-ordered first fit for
 * small runs from the bottom, last fit for large runs from the top.
 * Short-lived messages (the dpdk provider's 8-byte headers, payloads that
 * wait for an irecv) must reuse the lowest free blocks — still cached and
 * mapped — instead of walking the whole arena (a next-fit cursor touched a
 * fresh page every few messages: page faults in the reassembly copy).
 * Also: runs stay contiguous and disjoint, exhaustion is -ENOMEM, a freed
 * hole below the low-water mark is found again, and a small message held
 * while large ones come and go does not split the free space.
 * And tp__arena_populate_step ([transport] arena_prefault): pages mapped
 * in from the top down, a chunk at a time, no byte changed (mincore). */
#include "tap.h"
#include "../../dataplane/transport_internal.h"

#include <sys/mman.h>
#include <unistd.h>

#define NB 256u              /* blocks in the test arena */

static struct tp_arena A;
static uint8_t owner[NB];    /* 0 free, else allocation tag */

static int alloc(size_t bytes, uint32_t *blk, uint32_t *n, uint8_t tag)
{
	int rc = tp__arena_alloc(&A, bytes, blk, n);
	if (rc == 0)
		for (uint32_t i = *blk; i < *blk + *n; i++) {
			if (owner[i])
				return -1000;   /* overlap: a policy bug */
			owner[i] = tag;
		}
	return rc;
}

static void release(uint32_t blk, uint32_t n)
{
	tp__arena_free(&A, blk, n);
	memset(owner + blk, 0, n);
}

/* Pages [from, to) of base (page size ps) that are mapped in (mincore). */
static size_t resident(const uint8_t *base, size_t ps, size_t from, size_t to)
{
	static unsigned char vec[(16u << 20) / 4096];
	size_t n = 0;

	ZB_ASSERT(to - from <= sizeof(vec) &&
		  mincore((void *)(base + from * ps), (to - from) * ps, vec) == 0);
	for (size_t i = 0; i < to - from; i++)
		n += vec[i] & 1;
	return n;
}

int main(void)
{
	uint32_t b, n, b2, n2, hdr[8], nh[8];
	int rc;

	tap_plan(23);
	ZB_ASSERT(tp__arena_init(&A, NULL, (size_t)NB * TP_BLK) == 0);

	/* a header-sized message, released, then another: same block */
	ok(alloc(8, &b, &n, 1) == 0 && b == 0 && n == 1, "first message at block 0");
	release(b, n);
	int same = 1;
	for (int i = 0; i < 1000; i++) {
		if (alloc(8, &b2, &n2, 1) != 0 || b2 != 0)
			same = 0;
		release(b2, n2);
	}
	ok(same, "1000 short-lived messages in a row all reuse block 0 "
	       "(a next-fit cursor would have walked the arena)");

	/* interleaved lifetimes: a long-lived message stays, short ones
	 * come and go right above it */
	ZB_ASSERT(alloc(3 * TP_BLK, &b, &n, 2) == 0);
	ok(b == 0 && n == 3, "3-block message at 0 (got %u+%u)", b, n);
	int low = 1;
	for (int i = 0; i < 500; i++) {
		for (int k = 0; k < 8; k++)
			if (alloc(100, &hdr[k], &nh[k], 3) != 0 || hdr[k] != 3u + (uint32_t)k)
				low = 0;
		for (int k = 7; k >= 0; k--)
			release(hdr[k], nh[k]);
	}
	ok(low, "8 concurrent short messages always take blocks 3..10");

	/* a hole below the low-water mark is found again */
	uint32_t c, nc;
	ZB_ASSERT(alloc(2 * TP_BLK, &c, &nc, 4) == 0);        /* 3, 4 */
	ZB_ASSERT(alloc(TP_BLK, &b2, &n2, 5) == 0);           /* 5 */
	release(b, n);                                        /* hole 0..2 */
	ok(alloc(2 * TP_BLK, &b, &n, 6) == 0 && b == 0 && n == 2,
	       "2 blocks go into the freed hole at 0 (got %u)", b);
	uint32_t d, nd;
	ok(alloc(TP_BLK, &d, &nd, 7) == 0 && d == 2, "the hole's last block "
	       "next (got %u)", d);
	uint32_t e, ne;
	ok(alloc(4 * TP_BLK, &e, &ne, 8) == 0 && e == 6 && ne == 4,
	       "a 4-block run goes past the used blocks to 6 (got %u)", e);

	/* fill everything, then exhaustion */
	uint32_t used = 10, f, nf;
	int fill_ok = 1;
	while (used < NB) {
		if (alloc(TP_BLK, &f, &nf, 9) != 0 || f != used)
			fill_ok = 0;
		used++;
	}
	ok(fill_ok && A.free_blk == 0, "the arena fills in address order");
	ok(tp__arena_alloc(&A, 1, &f, &nf) == -ENOMEM, "full: -ENOMEM");

	/* free a 2-block hole in the middle: a 3-block request fails (no run),
	 * a 2-block one lands exactly there */
	release(100, 1);
	release(101, 1);
	ok(tp__arena_alloc(&A, 3 * TP_BLK, &f, &nf) == -ENOMEM,
	       "no 3-block run anywhere: -ENOMEM (free blocks %u)", A.free_blk);
	ok(alloc(2 * TP_BLK, &f, &nf, 10) == 0 && f == 100,
	       "a 2-block run fills the hole at 100 (got %u)", f);

	/* every block accounted for: bitmap and our map agree */
	int agree = 1;
	for (uint32_t i = 0; i < NB; i++)
		if (!!((A.used[i >> 6] >> (i & 63)) & 1) != !!owner[i])
			agree = 0;
	ok(agree && A.free_blk == 0, "bitmap matches the allocations");
	tp__arena_fini(&A);

	/* large runs from the top, reusing the same blocks */
	memset(owner, 0, sizeof(owner));
	ZB_ASSERT(tp__arena_init(&A, NULL, (size_t)NB * TP_BLK) == 0);
	rc = alloc(100 * TP_BLK, &b, &n, 1);
	ok(rc == 0 && b == NB - 100 && n == 100,
	   "a 100-block message goes at the top (got %u+%u)", b, n);
	release(b, n);
	same = 1;
	for (int i = 0; i < 1000; i++) {
		if (alloc(64 * TP_BLK, &b2, &n2, 1) != 0 || b2 != NB - 64)
			same = 0;
		release(b2, n2);
	}
	ok(same, "1000 short-lived 64-block messages in a row all reuse blocks %u.. "
	   "(the top's hot blocks)", NB - 64);

	/* a small message held while a large one was in the arena: the
	 * free space stays in one piece. One-ended first fit put the small
	 * one at 100, right above the large one, and the 200-block message
	 * after found no run with 255 blocks free. */
	ZB_ASSERT(alloc(100 * TP_BLK, &b, &n, 2) == 0);
	ZB_ASSERT(alloc(TP_BLK, &c, &nc, 3) == 0);
	release(b, n);
	uint32_t free_before = A.free_blk;
	rc = alloc(200 * TP_BLK, &b, &n, 4);
	ok(c == 0 && rc == 0 && b == NB - 200,
	   "a small message held (at %u) beside a released large one: a 200-block "
	   "message still fits (at %u; %u blocks were free)", c, b, free_before);
	release(b, n);
	release(c, nc);
	ok(A.free_blk == NB && A.hint == 0 && A.top == NB, "all free again: marks reset");

	/* churn: random sizes and lifetimes at both ends. No overlap (alloc()
	 * checks), and a request is refused only when no run of its length
	 * is free anywhere (checked by brute force over our own map). */
	struct { uint32_t b, n; } live[64];
	unsigned nlive = 0, refusals = 0, wrong_refusals = 0, bad = 0;
	uint64_t x = 12345;
	for (int i = 0; i < 20000; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		unsigned r = (unsigned)(x >> 33);
		if (nlive == ZB_ARRAY_LEN(live) || (nlive && r % 5 < 2)) {
			unsigned k = (r >> 3) % nlive;
			release(live[k].b, live[k].n);
			live[k] = live[--nlive];
			continue;
		}
		uint32_t want = (r >> 3) % 4 ? 1 + (r >> 6) % TP_ARENA_SMALL
					     : TP_ARENA_SMALL + 1 + (r >> 6) % 80;
		rc = alloc((size_t)want * TP_BLK - (r & 7), &b, &n, 5);
		if (rc == 0 && n == want) {
			live[nlive].b = b;
			live[nlive++].n = n;
		} else if (rc == -ENOMEM) {
			refusals++;
			for (uint32_t s0 = 0, run = 0; s0 < NB; s0++) {
				run = owner[s0] ? 0 : run + 1;
				if (run >= want) {
					wrong_refusals++;
					break;
				}
			}
		} else {
			bad++;
		}
	}
	agree = 1;
	for (uint32_t i = 0; i < NB; i++)
		if (!!((A.used[i >> 6] >> (i & 63)) & 1) != !!owner[i])
			agree = 0;
	ok(bad == 0 && wrong_refusals == 0 && agree,
	   "20000 random allocations and releases at both ends: disjoint, refused only "
	   "with no run free (%u refusals, %u wrong, %u bad), bitmap agrees",
	   refusals, wrong_refusals, bad);
	tp__arena_fini(&A);

	/* mapping the pages in ahead */
	const size_t PB = 16u << 20, ps = (size_t)sysconf(_SC_PAGESIZE);
	const size_t npg = PB / ps, step_pg = (4u << 20) / ps;
	struct tp_arena P;
	ZB_ASSERT(tp__arena_init(&P, NULL, PB) == 0);
	/* no transparent huge pages here: one page faulted in per touch,
	 * so that residency shows exactly what was mapped */
	(void)madvise(P.base, PB, MADV_NOHUGEPAGE);
	size_t res = resident(P.base, ps, 0, npg);
	ok(res == 0 && P.pop_left == PB, "a fresh arena: no page mapped in (%zu of %zu)", res, npg);
	/* the loop wrote a message at the bottom before the mapping began */
	memset(P.base, 0xa5, 3 * ps);
	long left = tp__arena_populate_step(&P, 4u << 20);
	size_t top = resident(P.base, ps, npg - step_pg, npg);
	size_t mid = resident(P.base, ps, 3, npg - step_pg);
	ok(left == (long)(PB - (4u << 20)) && top == step_pg && mid == 0,
	   "one step of 4 MiB: the top 4 MiB mapped in, nothing between it and the "
	   "bottom's 3 pages (left %ld, top %zu, between %zu)", left, top, mid);
	int steps = 1;
	while (left > 0 && steps < 100) {
		left = tp__arena_populate_step(&P, 4u << 20);
		steps++;
	}
	res = resident(P.base, ps, 0, npg);
	ok(left == 0 && steps == 4 && res == npg,
	   "3 more steps: every page mapped in (%zu of %zu, %d steps)", res, npg, steps);
	int kept = 1;
	for (size_t i = 0; i < 3 * ps; i++)
		if (P.base[i] != 0xa5)
			kept = 0;
	for (size_t i = 3 * ps; i < PB; i += 997)
		if (P.base[i] != 0)
			kept = 0;
	ok(kept, "no byte changed: the message at the bottom intact, the rest zero");
	is_int((int)tp__arena_populate_step(&P, 4u << 20), 0, "done: a further step does nothing");
	tp__arena_fini(&P);
	/* an arena in the caller's memory is the caller's affair */
	static _Alignas(64) uint8_t mem[64 * TP_BLK];
	ZB_ASSERT(tp__arena_init(&P, mem, sizeof(mem)) == 0);
	is_int((int)tp__arena_populate_step(&P, 4u << 20), 0,
	       "an arena in the caller's memory: nothing to map");
	tp__arena_fini(&P);
	return tap_done();
}
