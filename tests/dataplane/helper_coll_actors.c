/* helper_coll_actors — collectives used by actors (zbmd/coll.h, "actors"),
 * started on every node by test_coll_actors.sh through
 *   zbmd local [--link memif] -- helper_coll_actors [--rounds R] [--count N]
 * (which appends --config FILE).
 *
 * Each node runs the actor runtime (2 worker threads) and one training
 * actor. Every round the trainer fills two gradient buckets — float32
 * (out of place, sum or avg) and int64 (in place, max) — hands both to the
 * collective service (coll_svc_submit) and returns to its mailbox; the
 * completion messages come back, one per bucket, in order, and it checks
 * every element against the exact expected value before the next round.
 * Round 1 also hands over a collective with a bad dtype first: its message
 * must say -EINVAL and the ones after it must still work. The owner thread
 * (the collective host's thread over dpdk, main over tcp) polls the
 * service. A collective that fails (a node killed) reaches the trainer as
 * a completion message with the error; the trainer stops there.
 *
 * Output (rank 0's is what zbmd local prints): "ok - ..." / "not ok - ..."
 * lines agreed by every rank, or "trainer: round R bucket B failed: ERR"
 * on a failure. Exit 0 when every check passed. */
#include "zbmd/actors.h"
#include "zbmd/coll.h"
#include "zbmd/config.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { T_GO = 1, T_DONE = 2 };

static struct coll_actor_node nd;   /* actors, communicator, service */
static uint32_t N, RK;
static unsigned rounds = 6;
static size_t count = 100003;

static struct {
	float *gs, *gr;         /* float bucket: send, receive */
	int64_t *gi;            /* int64 bucket, in place */
	unsigned round;         /* 1-based */
	unsigned got;           /* completion messages this round */
	uint64_t next_cookie;   /* the cookie the next message must carry */
	bool bad_seen;
	int wrong;              /* elements off, all rounds */
	int order_bad;          /* messages out of order or unexpected */
	int failed_rc;          /* a collective's error, or 0 */
	unsigned rounds_done;
	atomic_bool finished;
} tr;

static int64_t ival(uint32_t r, size_t i, unsigned rd) { return (int64_t)r * 1000 + (int64_t)((i * 7 + rd) % 977); }
static float fval(uint32_t r, size_t i) { return (float)((r + 1) * (i % 251 + 1)); }

static bool avg_round(unsigned rd) { return rd % 2 == 0; }

static int submit(struct act_ctx *ctx, const struct coll_args *a, uint64_t cookie)
{
	int rc = coll_svc_submit(nd.svc, a, act_self(ctx), T_DONE, cookie);
	if (rc < 0) {
		printf("trainer: round %u: submit: %s\n", tr.round, zb_strerror(rc));
		tr.failed_rc = rc;
		atomic_store(&tr.finished, true);
	}
	return rc;
}

static void start_round(struct act_ctx *ctx)
{
	unsigned rd = tr.round;
	for (size_t i = 0; i < count; i++) {
		tr.gs[i] = fval(RK, i);
		tr.gr[i] = -1.0f;
		tr.gi[i] = ival(RK, i, rd);
	}
	tr.got = 0;
	if (rd == 1) {   /* a bad dtype: refused by every rank alike */
		struct coll_args bad = {.kind = COLL_ALLREDUCE, .sendbuf = tr.gs,
					.recvbuf = tr.gr, .count = count,
					.dtype = (enum zb_dtype)99, .op = ZB_SUM};
		if (submit(ctx, &bad, 1000000) < 0)
			return;
	}
	struct coll_args f = {.kind = COLL_ALLREDUCE, .sendbuf = tr.gs, .recvbuf = tr.gr,
			      .count = count, .dtype = ZB_F32,
			      .op = avg_round(rd) ? ZB_AVG : ZB_SUM};
	struct coll_args g = {.kind = COLL_ALLREDUCE, .sendbuf = tr.gi, .recvbuf = tr.gi,
			      .count = count - rd, .dtype = ZB_I64, .op = ZB_MAX};
	if (submit(ctx, &f, 2ull * rd) < 0 || submit(ctx, &g, 2ull * rd + 1) < 0)
		return;
}

static void check_round(void)
{
	unsigned rd = tr.round;
	double sumr = (double)N * (N + 1) / 2;
	for (size_t i = 0; i < count; i++) {
		double want = sumr * (double)(i % 251 + 1);
		if (avg_round(rd))
			want /= N;
		if ((double)tr.gr[i] != (double)(float)want)
			tr.wrong++;
	}
	for (size_t i = 0; i < count - rd; i++)
		if (tr.gi[i] != ival(N - 1, i, rd))
			tr.wrong++;
	/* the element past the int64 bucket's count is untouched */
	if (tr.gi[count - rd] != ival(RK, count - rd, rd))
		tr.wrong++;
}

static int trainer_handle(struct act_ctx *ctx, struct act_msg *m)
{
	if (m->tag == T_GO) {
		tr.round = 1;
		tr.next_cookie = 1000000;
		start_round(ctx);
		return 0;
	}
	if (m->tag != T_DONE || m->kind != ACT_PL_INLINE ||
	    m->len != sizeof(struct coll_done_msg)) {
		tr.order_bad++;
		return 0;
	}
	struct coll_done_msg d;
	memcpy(&d, m->u.bytes, sizeof(d));
	if (d.cookie == 1000000) {   /* the bad dtype */
		tr.bad_seen = d.status == -EINVAL && d.kind == COLL_ALLREDUCE &&
			      tr.next_cookie == 1000000;
		tr.next_cookie = 2;
		return 0;
	}
	if (d.cookie != tr.next_cookie || d.kind != COLL_ALLREDUCE)
		tr.order_bad++;
	tr.next_cookie = d.cookie + 1;
	if (d.status < 0) {
		printf("trainer: round %u bucket %u failed: %s\n", tr.round,
		       (unsigned)(d.cookie & 1), zb_strerror(d.status));
		fflush(stdout);
		tr.failed_rc = d.status;
		atomic_store(&tr.finished, true);
		return 0;
	}
	if (++tr.got < 2)
		return 0;
	check_round();
	tr.rounds_done++;
	if (tr.round == rounds) {
		atomic_store(&tr.finished, true);
		return 0;
	}
	tr.round++;
	tr.next_cookie = 2ull * tr.round;
	start_round(ctx);
	return 0;
}

static const struct act_behaviour trainer_beh = {
	.name = "trainer", .handle = trainer_handle,
};

static int failed;

static void report(int bad, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void report(int bad, const char *fmt, ...)
{
	int32_t any = bad ? 1 : 0;
	if (coll_allreduce(nd.comm, &any, &any, 1, ZB_I32, ZB_MAX) < 0) {
		printf("helper: agreeing on a result: %s\n", coll_error(nd.comm));
		exit(1);
	}
	if (any)
		failed = 1;
	if (RK == 0) {
		va_list ap;
		va_start(ap, fmt);
		printf("%s - ", any ? "not ok" : "ok");
		vprintf(fmt, ap);
		printf(" (%u nodes)\n", N);
		va_end(ap);
		fflush(stdout);
	}
}

/* The owner thread: poll the service until the trainer is done and every
 * completion message went out. */
static int owner(void *arg)
{
	(void)arg;
	act_id trainer;
	int rc = act_spawn(nd.rt, &trainer_beh, NULL, &trainer);
	if (rc < 0 || (rc = act_tell(nd.rt, trainer, T_GO, NULL, 0)) < 0) {
		printf("helper: the trainer: %s\n", zb_strerror(rc));
		return 1;
	}
	if (coll_actor_node_serve(&nd, &tr.finished, 120ull * 1000000000ull) < 0) {
		printf("helper: no end after 120 s (round %u, %u pending)\n",
		       tr.round, coll_svc_pending(nd.svc));
		return 1;
	}
	struct coll_svc_stats st;
	coll_svc_stats_get(nd.svc, &st);
	if (tr.failed_rc) {
		printf("helper: rank %u: the trainer stopped at round %u: %s "
		       "(%llu completion messages: %llu done, %llu failed; %s)\n",
		       RK, tr.round, zb_strerror(tr.failed_rc),
		       (unsigned long long)st.told, (unsigned long long)st.completed,
		       (unsigned long long)st.failed, coll_error(nd.comm));
		return 1;
	}
	report(tr.rounds_done != rounds || tr.order_bad,
	       "a trainer actor per node: %u rounds of two gradient buckets handed "
	       "over by message, one completion message each, in order",
	       rounds);
	report(tr.wrong, "every element of every bucket right (float32 sum/avg "
	       "out of place, int64 max in place, count %zu)", count);
	report(!tr.bad_seen, "a bad dtype: its completion message says -EINVAL, "
	       "and the collectives after it work");
	report(st.told != 2ull * rounds + 1 || st.started != 2ull * rounds ||
	       st.orphaned || coll_svc_pending(nd.svc),
	       "the service's counters: %llu started, %llu messages, %llu orphaned",
	       (unsigned long long)st.started, (unsigned long long)st.told,
	       (unsigned long long)st.orphaned);
	/* over dpdk lane 0's loop owns the communicator while the trainer
	 * runs (no owner thread); over tcp this thread polls */
	bool on_lane = nd.h.host && nd.h.host->own;
	report(on_lane ? st.lcore_polls == 0 : st.lcore_polls != 0,
	       "the service was polled by %s (%llu polls on a dataplane lcore)",
	       on_lane ? "lane 0's loop" : "the owner thread",
	       (unsigned long long)st.lcore_polls);
	return failed;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"rounds", required_argument, NULL, 'r'},
		{"count", required_argument, NULL, 'n'},
		{"config", required_argument, NULL, 'c'},
		{NULL, 0, NULL, 0},
	};
	const char *path = NULL;
	int c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		char *end = NULL;
		switch (c) {
		case 'r': rounds = (unsigned)strtoul(optarg, &end, 10); break;
		case 'n': count = strtoul(optarg, &end, 10); break;
		case 'c': path = optarg; break;
		default: return 2;
		}
		if (end && *end)
			rounds = 0;   /* the usage below */
	}
	if (!path || rounds < 1 || count < 1000) {
		fprintf(stderr, "usage: helper_coll_actors [--rounds R>=1] "
			"[--count N>=1000] --config FILE\n");
		return 2;
	}
	struct zb_config *cfg = calloc(1, sizeof(*cfg));
	struct cfg_error cerr;
	char err[512];
	if (!cfg || cfg_load_file(cfg, path, &cerr) < 0) {
		fprintf(stderr, "helper: %s\n", cfg ? cerr.msg : "out of memory");
		return 2;
	}
	tr.gs = calloc(count, sizeof(float));
	tr.gr = calloc(count, sizeof(float));
	tr.gi = calloc(count, sizeof(int64_t));
	if (!tr.gs || !tr.gr || !tr.gi ||
	    coll_actor_node_open(cfg, 2, &nd, err, sizeof(err)) < 0) {
		fprintf(stderr, "helper: %s\n", tr.gs && tr.gr && tr.gi ? err : "out of memory");
		return 1;
	}
	N = coll_nranks(nd.comm);
	RK = coll_rank(nd.comm);
	int rc = coll_actor_node_run(&nd, owner, NULL);
	coll_actor_node_close(&nd);
	free(tr.gs);
	free(tr.gr);
	free(tr.gi);
	free(cfg);
	return rc;
}
