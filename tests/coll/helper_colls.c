/* helper_colls.c — started on every node by test_collectives.sh through
 * `zbmd local -- $ZBMD_BUILD/tests/coll/helper_colls` (which appends
 * --config FILE). Runs all-gather, broadcast, reduce-scatter, barrier and
 * the non-blocking API against exact expected values. Every check is agreed
 * by all ranks (an all-reduce of the failure flags); rank 0 prints
 * "ok - ..." / "not ok - ..." lines; the exit status is 1 when any failed. */
#include "zbmd/coll.h"
#include "zbmd/config.h"

#include <string.h>
#include <unistd.h>

static struct coll_comm *C;
static uint32_t N, RK;
static int failed;

static void report(int bad, const char *fmt, const char *what, size_t count)
{
	int32_t any = bad ? 1 : 0;
	int rc = coll_allreduce(C, &any, &any, 1, ZB_I32, ZB_MAX);
	if (rc < 0) {
		fprintf(stderr, "helper: agreeing on a result: %s\n", coll_error(C));
		exit(1);
	}
	if (any)
		failed = 1;
	if (RK == 0) {
		printf("%s - ", any ? "not ok" : "ok");
		printf(fmt, what, count);
		printf(" (%u nodes)\n", N);
		fflush(stdout);
	}
}

static int64_t val(uint32_t r, uint32_t b, size_t i) { return (int64_t)(r * 1000003u + b * 7919u + i % 9973u); }

static void t_allgather(size_t count, bool inplace)
{
	int64_t *s = calloc(count + 1, 8), *d = calloc(N * count + 1, 8);
	int bad = 0;
	for (size_t i = 0; i < N * count; i++)
		d[i] = -1;
	int64_t *src = inplace ? d + RK * count : s;
	for (size_t i = 0; i < count; i++)
		src[i] = val(RK, 0, i);
	int rc = coll_allgather(C, src, d, count, ZB_I64);
	for (uint32_t b = 0; b < N && rc == 0; b++)
		for (size_t i = 0; i < count; i++)
			bad += d[b * count + i] != val(b, 0, i);
	report(rc || bad, inplace ? "%s all-gather in place, count %zu"
				  : "%s all-gather, count %zu", "int64", count);
	free(s);
	free(d);
}

static void t_broadcast(size_t count, uint32_t root)
{
	float *s = calloc(count + 1, 4), *d = calloc(count + 1, 4);
	int bad = 0;
	for (size_t i = 0; i < count; i++) {
		s[i] = RK == root ? (float)(i % 1000) : -1.0f;
		d[i] = -2.0f;
	}
	int rc = coll_broadcast(C, RK == root ? s : NULL, d, count, ZB_F32, root);
	for (size_t i = 0; i < count && rc == 0; i++)
		bad += d[i] != (float)(i % 1000);
	char what[32];
	snprintf(what, sizeof(what), "float from root %u", root);
	report(rc || bad, "%s broadcast, count %zu", what, count);
	free(s);
	free(d);
}

static void t_reduce_scatter(size_t count, enum zb_redop op, bool inplace)
{
	int64_t *s = calloc(N * count + 1, 8), *d = calloc(count + 1, 8);
	int bad = 0;
	for (uint32_t b = 0; b < N; b++)
		for (size_t i = 0; i < count; i++)
			s[b * count + i] = val(RK, b, i);
	int64_t *dst = inplace ? s + RK * count : d;
	int rc = coll_reduce_scatter(C, s, dst, count, ZB_I64, op);
	for (size_t i = 0; i < count && rc == 0; i++) {
		int64_t want = 0;
		for (uint32_t r = 0; r < N; r++) {
			int64_t v = val(r, RK, i);
			want = r == 0 ? v : op == ZB_MAX ? (v > want ? v : want) : want + v;
		}
		if (op == ZB_AVG)
			want = (want + (int64_t)N / 2) / (int64_t)N;  /* positive: half up */
		bad += dst[i] != want;
	}
	char what[48];
	snprintf(what, sizeof(what), "int64 %s%s", zb_redop_name(op),
		 inplace ? " in place" : "");
	report(rc || bad, "%s reduce-scatter, count %zu", what, count);
	free(s);
	free(d);
}

static void t_barrier(void)
{
	/* The last rank arrives 300 ms late: nobody may leave before it. */
	if (RK == N - 1)
		usleep(300000);
	uint64_t t0 = zb_now_ns();
	int rc = coll_barrier(C);
	uint64_t waited = zb_now_ns() - t0;
	int bad = RK != N - 1 && waited < 200000000ull;
	report(rc || bad, "%s barrier holds every rank until the last arrives%.0zu",
	       "", 0);
	int rc2 = 0;
	for (int i = 0; i < 20 && !rc2; i++)
		rc2 = coll_barrier(C);
	report(rc2, "%s20 barriers in a row%.0zu", "", 0);
}

struct cb_state { int calls, status; };
static void on_done(void *arg, int status)
{
	struct cb_state *s = arg;
	s->calls++;
	if (status)
		s->status = status;
}

static void t_nonblocking(void)
{
	enum { K = 4, CNT = 50001 };
	static float buf[K][CNT];
	struct cb_state st = {0};
	struct coll_op *last = NULL;
	int rc = 0, bad = 0, done = 0;

	for (int k = 0; k < K; k++)
		for (int i = 0; i < CNT; i++)
			buf[k][i] = (float)(RK + k + i % 3);
	for (int k = 0; k < K && rc == 0; k++) {
		struct coll_args a = {.kind = COLL_ALLREDUCE, .sendbuf = buf[k],
				      .recvbuf = buf[k], .count = CNT, .dtype = ZB_F32,
				      .op = ZB_SUM, .done = k < K - 1 ? on_done : NULL,
				      .done_arg = &st};
		rc = coll_start(C, &a, k < K - 1 ? NULL : &last);
	}
	for (uint64_t end = zb_now_ns() + 20000000000ull; rc == 0 && !done &&
	     zb_now_ns() < end;) {
		int ev = coll_progress(C);
		if (ev < 0)
			rc = ev;
		else if ((rc = coll_test(last, &done)) == 0 && !done && ev == 0)
			usleep(100);
	}
	for (int k = 0; k < K; k++)
		for (int i = 0; i < CNT && rc == 0; i++)
			bad += buf[k][i] != (float)(N * (N - 1) / 2 + N * (k + i % 3));
	report(rc || !done || bad || st.calls != K - 1 || st.status,
	       "%s%zu all-reduces queued at once, completion callbacks, coll_progress/coll_test",
	       "", (size_t)K);
	struct coll_args badroot = {.kind = COLL_BROADCAST, .recvbuf = buf[0],
				    .sendbuf = buf[0], .count = 1, .root = N};
	report(coll_start(C, &badroot, &last) != -EINVAL,
	       "%sbroadcast from a root outside the ring: -EINVAL%.0zu", "", 0);
}

int main(int argc, char **argv)
{
	struct zb_config cfg;
	struct cfg_error cerr;
	char err[256];

	if (argc != 3 || strcmp(argv[1], "--config") != 0) {
		fprintf(stderr, "usage: helper_colls --config FILE\n");
		return 2;
	}
	if (cfg_load_file(&cfg, argv[2], &cerr) < 0) {
		fprintf(stderr, "helper: %s\n", cerr.msg);
		return 2;
	}
	struct coll_comm_args a = {.cfg = &cfg, .chunk_bytes = 4096};
	if (coll_comm_create(&a, &C, err, sizeof(err)) < 0) {
		fprintf(stderr, "helper: %s\n", err);
		return 1;
	}
	N = coll_nranks(C);
	RK = coll_rank(C);
	static const size_t counts[] = {0, 1, 3, 1000, 4097};
	for (size_t i = 0; i < ZB_ARRAY_LEN(counts); i++) {
		t_allgather(counts[i], false);
		t_allgather(counts[i], true);
	}
	for (uint32_t root = 0; root < N; root++) {
		t_broadcast(1, root);
		t_broadcast(100003, root);
	}
	t_broadcast(0, 0);
	for (size_t i = 1; i < ZB_ARRAY_LEN(counts); i++) {
		t_reduce_scatter(counts[i], ZB_SUM, false);
		t_reduce_scatter(counts[i], ZB_MAX, true);
		t_reduce_scatter(counts[i], ZB_AVG, false);
	}
	t_barrier();
	t_nonblocking();
	coll_comm_destroy(C);
	return failed;
}
