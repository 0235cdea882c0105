/* test_pool_avg.c — collectives of n communicators in one process over the
 * real tcp provider on loopback: the handle pool, and integer avg on every
 * path of the plain (non-reducing) provider that finishes an avg.
 *
 * coll_comm_create blocks until both ring neighbours are connected, so the
 * n communicators are created by n threads at once; after the joins one
 * thread progresses them all (the tcp provider is non-blocking). The
 * receive that reduces as it lands (net_ops.irecv_reduce, the dpdk
 * provider) finishes avg on its own path: tests/dataplane/test_allreduce.sh
 * checks integer avg there (helper_allreduce --avg). */
#include "int_avg.h"
#include "tap.h"
#include "zbmd/coll.h"
#include "zbmd/common.h"
#include "zbmd/config.h"
#include "zbmd/gpu.h"
#include "zbmd/net.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TR_NET 80
#define TR_TIMEOUT_MS 5000
#include "tcp_ranks.h"

/* Progress every rank until every op in o[] is done (10 s at most); 0 or
 * the first error. */
static int run_all(int n, struct coll_op **o)
{
	int done[MAXN] = {0}, left = n, err = 0;
	uint64_t end = zb_now_ns() + 10000000000ull;
	while (left && zb_now_ns() < end)
		for (int r = 0; r < n; r++) {
			(void)coll_progress(cc[r]);
			if (done[r])
				continue;
			int d = 0, rc = coll_test(o[r], &d);
			if (d) {
				done[r] = 1;
				left--;
				err = err ? err : rc;
			}
		}
	return left ? -ETIMEDOUT : err;
}

/* ---- the handle pool ------------------------------------------------------ */

static void test_pool(void)
{
	static float b[2][COLL_MAX_OPS + 1][64];
	struct coll_op *o[2][COLL_MAX_OPS + 1];
	int rc = 0;

	if (make(2, 1, 0)) {
		ok(0, "two tcp communicators");
		return;
	}
	for (int k = 0; k < COLL_MAX_OPS && !rc; k++)
		for (int r = 0; r < 2 && !rc; r++) {
			struct coll_args a = {.kind = COLL_ALLREDUCE, .dtype = ZB_F32,
					      .op = ZB_SUM, .count = 64,
					      .sendbuf = b[r][k], .recvbuf = b[r][k]};
			rc = coll_start(cc[r], &a, &o[r][k]);
		}
	is_int(rc, 0, "%d collectives started without a callback", COLL_MAX_OPS);
	/* every one finishes; only rank 1 reaps its handles */
	for (int k = 0; k < COLL_MAX_OPS; k++) {
		int d = 0;
		for (uint64_t end = zb_now_ns() + 10000000000ull; !d && zb_now_ns() < end;) {
			coll_progress(cc[0]);
			coll_progress(cc[1]);
			coll_test(o[1][k], &d);
		}
	}
	for (int it = 0; it < 100; it++)
		coll_progress(cc[0]);
	struct coll_args a = {.kind = COLL_ALLREDUCE, .dtype = ZB_F32, .op = ZB_SUM,
			      .count = 64, .sendbuf = b[0][COLL_MAX_OPS],
			      .recvbuf = b[0][COLL_MAX_OPS]};
	is_int(coll_start(cc[0], &a, &o[0][COLL_MAX_OPS]), -EAGAIN,
	       "queue empty but %d finished handles not reaped: -EAGAIN, no abort",
	       COLL_MAX_OPS);
	int d = 0;
	rc = coll_test(o[0][0], &d);
	ok(rc == 0 && d, "reaping one handle (coll_test)");
	rc = coll_start(cc[0], &a, &o[0][COLL_MAX_OPS]);
	a.sendbuf = a.recvbuf = b[1][COLL_MAX_OPS];
	rc = rc ? rc : coll_start(cc[1], &a, &o[1][COLL_MAX_OPS]);
	is_int(rc, 0, "... frees its slot for the next coll_start");
	struct coll_op *last[2] = {o[0][COLL_MAX_OPS], o[1][COLL_MAX_OPS]};
	is_int(run_all(2, last), 0, "... which completes");
	for (int k = 1; k < COLL_MAX_OPS; k++)
		coll_test(o[0][k], &d);
	destroy(2);
}

/* ---- integer avg ------------------------------------------------------------ */

/* One avg collective of kind on n ranks; count elements per rank (per
 * block for reduce-scatter). Returns the number of wrong elements, or -1
 * if it did not complete. */
static long avg_case(int n, enum coll_kind kind, int dt, size_t count, bool inplace)
{
	size_t es = zb_dtype_size(dt), total = kind == COLL_REDUCE_SCATTER ? count * n : count;
	char *sb[MAXN], *rb[MAXN];
	struct coll_op *o[MAXN];
	long bad = 0;

	for (int r = 0; r < n; r++) {
		sb[r] = malloc(total * es);
		rb[r] = malloc(total * es);
		for (size_t i = 0; i < total; i++)
			int_avg_put(sb[r], dt, i, int_avg_val(dt, r, i));
		memset(rb[r], 0x5a, total * es);
		char *dst = inplace ? sb[r] + (kind == COLL_REDUCE_SCATTER ? (size_t)r * count * es : 0)
				    : rb[r];
		struct coll_args a = {.kind = kind, .dtype = dt, .op = ZB_AVG,
				      .count = count, .sendbuf = sb[r], .recvbuf = dst};
		if (coll_start(cc[r], &a, &o[r]) < 0)
			bad = -1;
	}
	if (bad == 0 && run_all(n, o) != 0)
		bad = -1;
	for (int r = 0; r < n && bad >= 0; r++) {
		size_t first = kind == COLL_REDUCE_SCATTER ? (size_t)r * count : 0;
		const char *dst = inplace ? sb[r] + first * es : rb[r];
		for (size_t i = 0; i < count; i++) {
			int64_t want = int_avg_want(dt, n, first + i), got = int_avg_get(dst, dt, i);
			if (got != want && bad++ < 3)
				tap_diag("rank %d elem %zu: got %lld want %lld", r, i,
					 (long long)got, (long long)want);
		}
	}
	for (int r = 0; r < n; r++) {
		free(sb[r]);
		free(rb[r]);
	}
	return bad;
}

static void test_avg(void)
{
	static const int dts[2] = {ZB_I64, ZB_I32};

	for (int n = 2; n <= 3; n++)
		for (int small = 0; small < 2; small++) {
			if (make(n, 2, small ? 4 : 0)) {
				ok(0, "%d tcp communicators", n);
				continue;
			}
			for (int d = 0; d < 2; d++) {
				size_t cnt = small ? 37 : 301;
				for (int ip = 0; ip < 2; ip++) {
					is_int(avg_case(n, COLL_ALLREDUCE, dts[d], cnt, ip), 0,
					       "n=%d %s all-reduce avg %s, %s",
					       n, dts[d] == ZB_I64 ? "i64" : "i32",
					       ip ? "in place" : "out of place",
					       small ? "small (gathered)" : "ring");
					if (small)
						continue;
					is_int(avg_case(n, COLL_REDUCE_SCATTER, dts[d], cnt, ip), 0,
					       "n=%d %s reduce-scatter avg %s",
					       n, dts[d] == ZB_I64 ? "i64" : "i32",
					       ip ? "in place" : "out of place");
				}
			}
			destroy(n);
		}
}

int main(void)
{
	tap_plan(5 + 2 * (8 + 4));
	tr_port = 20000 + (int)(getpid() % 20000);
	tr_sub = (int)(getpid() % 250);
	test_pool();
	test_avg();
	return tap_done();
}
