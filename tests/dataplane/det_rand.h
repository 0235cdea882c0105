/* tests/dataplane/det_rand.h — the deterministic generators the dataplane
 * helpers derive their traffic from (helper_inject's forged frames,
 * helper_impair's drop/dup/reorder draws, helper_remote's and helper_xfer's
 * message sizes and contents): the same seed gives the same run, and a
 * receiver regenerates what its sender must have sent. Header-only. */
#ifndef ZBMD_TESTS_DET_RAND_H
#define ZBMD_TESTS_DET_RAND_H

#include <stdint.h>

/* Marsaglia's xorshift64 (shifts 13, 7, 17): advances *x (never 0) and
 * returns the new value. */
static inline uint64_t dr_xorshift64(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* MurmurHash3's 64-bit finaliser: spreads every input bit over the output
 * (seeds and sizes from small, structured inputs). */
static inline uint64_t dr_mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

#endif
