/* int_avg.h — inputs and the reference for integer avg checks, shared by
 * tests/coll/test_pool_avg.c (the tcp provider) and
 * tests/dataplane/helper_allreduce.c (the dpdk provider, whose receive
 * reduces as it lands). coll.h's rule: the sum divided by n, rounded to
 * nearest, ties away from zero, in integer arithmetic. */
#ifndef ZBMD_TESTS_INT_AVG_H
#define ZBMD_TESTS_INT_AVG_H

#include "zbmd/common.h"

#include <stddef.h>
#include <stdint.h>

/* sum / n, round to nearest, ties away from zero, in 128 bits */
static inline __int128 int_avg_ref_div(__int128 s, int n)
{
	__int128 a = s < 0 ? -s : s, q = (2 * a + n) / (2 * n);
	return s < 0 ? -q : q;
}

/* Rank r's element i: large values whose sums need more than 53 bits
 * (i64), plus ties (for even n) and negative sums; i32 sums stay clear
 * of wrapping for up to 64 ranks (|v| < 4.1e6). */
static inline int64_t int_avg_val(int dt, int r, size_t i)
{
	int64_t base = dt == ZB_I64 ? ((int64_t)1 << 59) + (int64_t)(i * 7919)
				    : 1000 * (int64_t)(i % 4096);
	int64_t v = base + (int64_t)(((size_t)r * 13 + i) % 5);
	return (i % 3 == 1) ? -v : v;
}

/* The expected avg of element i over n ranks. */
static inline int64_t int_avg_want(int dt, int n, size_t i)
{
	__int128 s = 0;
	for (int k = 0; k < n; k++)
		s += int_avg_val(dt, k, i);
	return (int64_t)int_avg_ref_div(s, n);
}

static inline void int_avg_put(void *b, int dt, size_t i, int64_t v)
{
	if (dt == ZB_I64)
		((int64_t *)b)[i] = v;
	else
		((int32_t *)b)[i] = (int32_t)v;
}

static inline int64_t int_avg_get(const void *b, int dt, size_t i)
{
	return dt == ZB_I64 ? ((const int64_t *)b)[i] : ((const int32_t *)b)[i];
}

#endif
