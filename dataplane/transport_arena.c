/* Reassembly arena: reserved once at tp_create, carved into TP_BLK blocks.
 * A message takes one contiguous run of blocks (so it is delivered as one
 * buffer). Address-ordered first fit over a bitmap, from a low-water mark
 * (every block below `hint` is in use); word-at-a-time scanning keeps a
 * 256 MiB request within a few thousand word reads.
 *
 * Why lowest address first: most messages live for microseconds (the
 * provider's 8-byte headers, payloads that wait for an irecv), so the same
 * few low blocks are reused while they are still in the cache and mapped.
 * A next-fit cursor instead walked the whole arena, touching a fresh page
 * every few messages: on a 4-node memif all-reduce a quarter of all CPU
 * time went to the kernel zeroing new arena pages (page faults in the
 * reassembly copy), and every message was copied into cold memory.
 *
 * Two ends: runs of up to TP_ARENA_SMALL blocks (single-frame messages,
 * fragment maps) by first fit from the bottom, longer runs by last fit from
 * the top, each end reusing its own few hot blocks the same way. With one
 * end, a small message that a consumer held (an actor keeping a buffer)
 * landed beside or between the large ones and split the free space: with
 * most of the arena free, a large message found no run and its frames were
 * dropped until that small one was released, for good if it never was.
 * Now small ones pack below, large ones above, and a held small message
 * costs a large one only the blocks it holds.
 *
 * Pages: the arena is reserved without being mapped in (a mapping of
 * max_message and more). A page mapped on first use faults inside the
 * lane's loop: on a VM whose host backs guest memory lazily that cost
 * ~2.4 ms per MiB here, so the first 16 MiB messages stalled a receiver for
 * tens of ms and its sender's retransmission timers fired. With
 * [transport] arena_prefault the dataplane maps the arenas in at start-up,
 * before its loops run (tp_prefault_step). */
#include "transport_internal.h"

#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

static size_t page_bytes(void)
{
	long pg = sysconf(_SC_PAGESIZE);
	return pg > 0 ? (size_t)pg : 4096;
}

static inline bool blk_used(const struct tp_arena *a, uint32_t i)
{
	return (a->used[i >> 6] >> (i & 63)) & 1;
}

/* First index in [i, end) whose bit equals `want`, or end. */
static uint32_t scan(const struct tp_arena *a, uint32_t i, uint32_t end,
		     bool want)
{
	while (i < end) {
		uint64_t w = a->used[i >> 6];
		if (!want)
			w = ~w;
		w &= ~0ull << (i & 63);
		if (w) {
			uint32_t j = (i & ~63u) + (uint32_t)__builtin_ctzll(w);
			return j < end ? j : end;
		}
		i = (i & ~63u) + 64;
	}
	return end;
}

/* Last index in [lo, hi) whose bit equals `want`, or UINT32_MAX. */
static uint32_t rscan(const struct tp_arena *a, uint32_t lo, uint32_t hi,
		      bool want)
{
	uint32_t i = hi;

	while (i > lo) {
		uint32_t w_at = (i - 1) >> 6, bits = ((i - 1) & 63) + 1;
		uint64_t w = a->used[w_at];
		if (!want)
			w = ~w;
		if (bits < 64)
			w &= (1ull << bits) - 1;
		if (w) {
			uint32_t j = w_at * 64 + 63 - (uint32_t)__builtin_clzll(w);
			return j >= lo ? j : UINT32_MAX;
		}
		i = w_at * 64;
	}
	return UINT32_MAX;
}

static void set_range(struct tp_arena *a, uint32_t i, uint32_t n, bool used)
{
	for (uint32_t end = i + n; i < end;) {
		uint32_t bit = i & 63, take = 64 - bit;
		uint64_t mask;

		if (take > end - i)
			take = end - i;
		mask = (take == 64 ? ~0ull : ((1ull << take) - 1)) << bit;
		if (used)
			a->used[i >> 6] |= mask;
		else
			a->used[i >> 6] &= ~mask;
		i += take;
	}
}

int tp__arena_init(struct tp_arena *a, void *mem, size_t bytes)
{
	size_t words;

	ZB_ASSERT(a != NULL);
	ZB_ASSERT(bytes >= TP_BLK && bytes / TP_BLK < UINT32_MAX);
	memset(a, 0, sizeof(*a));
	a->nblk = (uint32_t)(bytes / TP_BLK);
	a->bytes = (size_t)a->nblk * TP_BLK;
	words = (a->nblk + 63) / 64;
	a->used = calloc(words, sizeof(uint64_t));
	if (!a->used)
		return -ENOMEM;
	/* bits past nblk in the last word are permanently "used" */
	if (a->nblk & 63)
		a->used[words - 1] = ~0ull << (a->nblk & 63);
	if (mem) {
		if ((uintptr_t)mem & 63)
			goto fail_align;
		a->base = mem;
	} else {
		/* NORESERVE: pages cost nothing until a message touches them */
		void *m = mmap(NULL, a->bytes, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (m == MAP_FAILED)
			goto fail_map;
		/* large messages reassemble into 2 MiB pages where the kernel
		 * has them (THP "madvise" mode): fewer faults and TLB misses;
		 * advice only, so its failure changes nothing */
		(void)madvise(m, a->bytes, MADV_HUGEPAGE);
		a->base = m;
		a->mapped = true;
		/* the mapping covers whole pages */
		size_t ps = page_bytes();
		a->pop_left = (a->bytes + ps - 1) / ps * ps;
	}
	a->free_blk = a->nblk;
	a->top = a->nblk;
	return 0;

fail_align:
	free(a->used);
	a->used = NULL;
	return -EINVAL;
fail_map:
	free(a->used);
	a->used = NULL;
	return -ENOMEM;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23   /* Linux 5.14 */
#endif

/* Map in, writable, up to max_bytes more of an arena we mapped ourselves,
 * from its top down: long messages take their runs from the top, so the
 * pages they need first come first. MADV_POPULATE_WRITE changes no byte,
 * so it may run on another thread while the lane's loop uses the arena;
 * a page the loop touches first is simply not faulted twice. Returns the
 * bytes still to map in (0: done or nothing to do; max_bytes 0 maps
 * nothing and only says so), or a negative errno
 * when the kernel cannot (older than 5.14: pages then come on first use,
 * inside the loop, as without this). Never called from an lcore loop. */
long tp__arena_populate_step(struct tp_arena *a, size_t max_bytes)
{
	ZB_ASSERT(a != NULL);
	if (!a->mapped || a->pop_left == 0 || max_bytes == 0)
		return a->mapped ? (long)a->pop_left : 0;
	size_t ps = page_bytes();
	size_t n = max_bytes / ps * ps;
	if (n == 0)
		n = ps;
	if (n > a->pop_left)
		n = a->pop_left;
	if (madvise(a->base + (a->pop_left - n), n, MADV_POPULATE_WRITE) != 0) {
		int e = errno;
		if (e == EINTR || e == EAGAIN)
			return (long)a->pop_left;   /* try again */
		a->pop_left = 0;
		return -e;
	}
	a->pop_left -= n;
	return (long)a->pop_left;
}

void tp__arena_fini(struct tp_arena *a)
{
	if (a->mapped && a->base)
		munmap(a->base, a->bytes);
	free(a->used);
	memset(a, 0, sizeof(*a));
}

static bool find_run(struct tp_arena *a, uint32_t from, uint32_t end,
		     uint32_t n, uint32_t *out)
{
	uint32_t i = from;

	while (i + n <= end) {
		uint32_t j;

		i = scan(a, i, end, false);      /* first free */
		if (i + n > end)
			return false;
		j = scan(a, i, i + n, true);     /* first used inside the run */
		if (j == i + n) {
			*out = i;
			return true;
		}
		i = j + 1;
	}
	return false;
}

/* The highest run of n free blocks in [lo, hi). */
static bool find_run_down(struct tp_arena *a, uint32_t lo, uint32_t hi,
			  uint32_t n, uint32_t *out)
{
	uint32_t end = hi;

	while (end >= lo + n) {
		uint32_t j = rscan(a, lo, end, false);   /* last free */
		if (j == UINT32_MAX || j + 1 < lo + n)
			return false;
		end = j + 1;
		j = rscan(a, end - n, end, true);        /* last used inside */
		if (j == UINT32_MAX) {
			*out = end - n;
			return true;
		}
		end = j;
	}
	return false;
}

int tp__arena_alloc(struct tp_arena *a, size_t bytes, uint32_t *blk,
		    uint32_t *nblk)
{
	uint64_t n64 = (bytes + TP_BLK - 1) / TP_BLK;
	uint32_t n, at;

	ZB_DASSERT(a->used != NULL);
	*blk = 0;
	*nblk = 0;
	if (n64 == 0)
		return 0;
	if (n64 > a->free_blk)
		return -ENOMEM;
	n = (uint32_t)n64;
	ZB_DASSERT(a->hint <= a->nblk && (a->hint == a->nblk || a->hint == 0 ||
					  blk_used(a, a->hint - 1)));
	ZB_DASSERT(a->top <= a->nblk && (a->top == a->nblk || blk_used(a, a->top)));
	if (n <= TP_ARENA_SMALL) {
		if (!find_run(a, a->hint, a->nblk, n, &at))
			return -ENOMEM;
	} else if (!find_run_down(a, a->hint, a->top, n, &at)) {
		return -ENOMEM;
	}
	set_range(a, at, n, true);
	a->free_blk -= n;
	if (at == a->hint)   /* the lowest free block moved up */
		a->hint = scan(a, at + n, a->nblk, false);
	if (at + n == a->top) {   /* the highest free block moved down */
		uint32_t j = rscan(a, 0, at, false);
		a->top = j == UINT32_MAX ? 0 : j + 1;
	}
	*blk = at;
	*nblk = n;
	ZB_DASSERT(blk_used(a, at) && blk_used(a, at + n - 1));
	return 0;
}

void tp__arena_free(struct tp_arena *a, uint32_t blk, uint32_t nblk)
{
	if (nblk == 0)
		return;
	ZB_ASSERT(blk + nblk <= a->nblk);
	ZB_DASSERT(blk_used(a, blk) && blk_used(a, blk + nblk - 1));
	set_range(a, blk, nblk, false);
	a->free_blk += nblk;
	if (blk < a->hint)
		a->hint = blk;
	if (blk + nblk > a->top)
		a->top = blk + nblk;
}
