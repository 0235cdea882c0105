/* test_lanes.c — channels progressed by their own threads (one "lcore" per
 * channel, coll_progress_channel) while an owner thread starts and completes
 * the collectives. Two nodes in one process over real tcp; then a failure:
 * node 0 aborts, every lane of both nodes stops and the ops complete with
 * the error only after the lanes let go of the buffers. In between, a
 * chain of collectives queued back to back (each lane starts the next one
 * without the owner, once the one before finished on every channel) over
 * counts that split the buffers differently among the channels: a channel
 * that started early would read elements another had not finished. Run
 * under TSan too. */
#include "tap.h"
#include "two_node_cfg.h"
#include "zbmd/metrics.h"

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#define NCH 3
#define CNT 300007

static int port, sub;
static pthread_barrier_t bar;

struct node;
struct lane {
	struct node *nd;
	uint16_t ch;
	pthread_t th;
	long calls_after_abort;
};

struct node {
	int id;
	struct zb_config cfg;
	struct coll_comm *c;
	atomic_int stop;
	struct lane lanes[NCH];
	int rc, bad, runs, abort_rc, after_rc, cb_status, cb_calls;
	int chain_rc, chain_bad, chain_started;
	char err[256];
	float *s, *r;
};

static void *lane_main(void *arg)
{
	struct lane *l = arg;
	while (!atomic_load(&l->nd->stop)) {
		int rc = coll_progress_channel(l->nd->c, l->ch);
		if (rc == 0)    /* channels at different paces: in a chain
				 * the fast one would run ahead */
			usleep(10 + 300 * (unsigned)l->ch);
		else if (rc < 0)
			l->calls_after_abort++;
	}
	return NULL;
}

/* The chain: all-reduces in place on r unless oop (r -> s) or on_s (in
 * place on s); a barrier (kind) in the middle waits for the ops ahead. */
static const struct {
	size_t count;
	enum zb_redop op;
	int oop, on_s, barrier;
} chain[] = {
	{200000, ZB_SUM, 0, 0, 0}, {CNT, ZB_SUM, 0, 0, 0},
	{150001, ZB_SUM, 1, 0, 0}, {150001, ZB_SUM, 0, 1, 0},
	{0, ZB_SUM, 0, 0, 1}, {70001, ZB_SUM, 0, 0, 0},
	{CNT, ZB_MAX, 0, 0, 0}, {CNT, ZB_SUM, 0, 1, 0}, {99, ZB_MIN, 1, 0, 0},
};
#define CHAIN_LEN (int)(sizeof(chain) / sizeof(chain[0]))

static float chain_init(int rank, int buf, size_t i)
{
	return (float)(rank + 1 + (int)(i % 3) + 4 * buf);
}

/* Queue the whole chain, wait for it, and check both buffers against the
 * same chain run on the two ranks' values here. */
static void chain_run(struct node *nd)
{
	struct coll_op *ops[CHAIN_LEN];
	float *sim[2][2];       /* [rank][r, s] */
	int n = 0;

	for (int k = 0; k < 2; k++)
		for (int b = 0; b < 2; b++) {
			sim[k][b] = malloc(CNT * sizeof(float));
			for (size_t i = 0; sim[k][b] && i < CNT; i++)
				sim[k][b][i] = chain_init(k, b, i);
		}
	for (size_t i = 0; i < CNT; i++) {
		nd->r[i] = chain_init(nd->id, 0, i);
		nd->s[i] = chain_init(nd->id, 1, i);
	}
	for (; n < CHAIN_LEN; n++) {
		float *src = chain[n].on_s ? nd->s : nd->r;
		struct coll_args ca = {.kind = chain[n].barrier ? COLL_BARRIER : COLL_ALLREDUCE,
				       .sendbuf = src, .count = chain[n].count,
				       .recvbuf = chain[n].oop ? nd->s : src,
				       .dtype = ZB_F32, .op = chain[n].op};
		if ((nd->chain_rc = coll_start(nd->c, &ca, &ops[n])) < 0)
			break;
	}
	nd->chain_started = n;
	for (int k = 0; k < n; k++) {
		int st = coll_wait(nd->c, ops[k]);
		if (st < 0 && nd->chain_rc == 0)
			nd->chain_rc = st;
	}
	for (int k = 0; k < CHAIN_LEN; k++) {
		if (chain[k].barrier)
			continue;
		int sb = chain[k].on_s, db = chain[k].oop ? 1 : sb;
		for (size_t i = 0; sim[0][0] && sim[0][1] && sim[1][0] && sim[1][1] &&
		     i < chain[k].count; i++) {
			float a = sim[0][sb][i], b = sim[1][sb][i];
			float v = chain[k].op == ZB_SUM ? a + b : chain[k].op == ZB_MAX
				  ? (a > b ? a : b) : (a < b ? a : b);
			sim[0][db][i] = sim[1][db][i] = v;
		}
	}
	for (size_t i = 0; i < CNT; i++)
		nd->chain_bad += !sim[nd->id][0] || !sim[nd->id][1] ||
				 nd->r[i] != sim[nd->id][0][i] ||
				 nd->s[i] != sim[nd->id][1][i];
	for (int k = 0; k < 2; k++)
		for (int b = 0; b < 2; b++)
			free(sim[k][b]);
}

static void on_done(void *arg, int status)
{
	struct node *nd = arg;
	nd->cb_calls++;
	nd->cb_status = status;
}

static void *node_main(void *arg)
{
	struct node *nd = arg;

	if ((nd->rc = two_node_comm(nd->id, 80, sub, port, NCH, &nd->cfg, &nd->c, nd->err,
				    sizeof(nd->err))) < 0)
		return NULL;
	for (uint16_t i = 0; i < NCH; i++) {
		nd->lanes[i] = (struct lane){.nd = nd, .ch = i};
		pthread_create(&nd->lanes[i].th, NULL, lane_main, &nd->lanes[i]);
	}
	for (int k = 0; k < 12 && nd->rc == 0; k++, nd->runs++) {
		size_t count = (size_t)(k * 25013) % CNT + (size_t)k;
		enum zb_redop op = (enum zb_redop)(k % ZB_REDOP_COUNT);
		for (size_t i = 0; i < count; i++)
			nd->s[i] = (float)(nd->id + 1 + i % 3);
		nd->rc = coll_allreduce(nd->c, nd->s, nd->r, count, ZB_F32, op);
		for (size_t i = 0; i < count && nd->rc == 0; i++) {
			float a0 = (float)(1 + i % 3), a1 = (float)(2 + i % 3), want;
			want = op == ZB_SUM ? a0 + a1 : op == ZB_PROD ? a0 * a1
			       : op == ZB_MIN ? a0 : op == ZB_MAX ? a1 : (a0 + a1) / 2;
			nd->bad += nd->r[i] != want;
		}
	}
	if (nd->rc == 0)
		chain_run(nd);
	if (nd->rc)
		snprintf(nd->err, sizeof(nd->err), "%s", coll_error(nd->c));
	/* Failure: node 0 aborts while node 1 has a collective running. */
	pthread_barrier_wait(&bar);
	if (nd->id == 1) {
		struct coll_args ca = {.kind = COLL_ALLREDUCE, .sendbuf = nd->s,
				       .recvbuf = nd->r, .count = CNT, .dtype = ZB_F32,
				       .op = ZB_SUM, .done = on_done, .done_arg = nd};
		nd->after_rc = coll_start(nd->c, &ca, NULL);
		for (uint64_t end = zb_now_ns() + 10000000000ull;
		     !nd->cb_calls && zb_now_ns() < end;)
			if (coll_progress(nd->c) == 0)
				usleep(50);
	} else {
		usleep(20000);
		nd->abort_rc = coll_abort(nd->c, ZB_ERR_EPOCH, "epoch 3");
		nd->after_rc = coll_allreduce(nd->c, nd->s, nd->r, 10, ZB_F32, ZB_SUM);
	}
	/* Lanes keep running until both nodes are through: a lane that stops
	 * early cannot close its connections for the failure. */
	pthread_barrier_wait(&bar);
	atomic_store(&nd->stop, 1);
	for (uint16_t i = 0; i < NCH; i++)
		pthread_join(nd->lanes[i].th, NULL);
	return NULL;
}

/* The value of the first sample line starting with `series ` in text. */
static double sample(const char *text, const char *series)
{
	size_t n = strlen(series);
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, series, n) == 0 && p[n] == ' ')
			return strtod(p + n + 1, NULL);
	return -1;
}

int main(void)
{
	static struct node nd[2] = {{.id = 0}, {.id = 1}};
	tap_plan(11);
	two_node_place(0, &port, &sub);
	pthread_barrier_init(&bar, NULL, 2);
	for (int i = 0; i < 2; i++) {
		nd[i].s = calloc(CNT, sizeof(float));
		nd[i].r = calloc(CNT, sizeof(float));
	}
	two_node_run(node_main, &nd[0], &nd[1]);
	for (int i = 0; i < 2; i++)
		if (nd[i].rc)
			tap_diag("node %d: %s (%s)", i, nd[i].err, zb_strerror(nd[i].rc));
	ok(nd[0].rc == 0 && nd[1].rc == 0 && nd[0].runs == 12 && nd[1].runs == 12,
	   "12 all-reduces, %d channels each progressed by its own thread", NCH);
	ok(nd[0].bad == 0 && nd[1].bad == 0, "every element right (%d, %d wrong)",
	   nd[0].bad, nd[1].bad);
	ok(nd[0].chain_rc == 0 && nd[1].chain_rc == 0 && nd[0].chain_started == CHAIN_LEN &&
	   nd[1].chain_started == CHAIN_LEN, "%d collectives queued back to back and "
	   "completed (%s, %s)", CHAIN_LEN, nd[0].chain_rc ? zb_strerror(nd[0].chain_rc) : "ok",
	   nd[1].chain_rc ? zb_strerror(nd[1].chain_rc) : "ok");
	ok(nd[0].chain_bad == 0 && nd[1].chain_bad == 0, "... each one started after "
	   "the one before it on every channel: both buffers right (%d, %d wrong)",
	   nd[0].chain_bad, nd[1].chain_bad);
	is_int(nd[0].abort_rc, ZB_ERR_EPOCH, "coll_abort on the owner thread");
	is_int(nd[0].after_rc, ZB_ERR_EPOCH, "the aborting node refuses new collectives");
	ok(nd[1].cb_calls == 1 && nd[1].cb_status == ZB_ERR_PEER_DOWN,
	   "the other node's running collective completes with peer down, once "
	   "(%d calls, %s)", nd[1].cb_calls, zb_strerror(nd[1].cb_status));
	ok(strstr(coll_error(nd[1].c), "node 0") != NULL, "... naming the peer: %s",
	   coll_error(nd[1].c));
	/* The collectives' Prometheus series (scraped as /metrics would be). */
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	ok(f && zb_metrics_write(f) == 0 && fclose(f) == 0 && text,
	   "metrics registry writes Prometheus text");
	double ops = sample(text, "zbmd_coll_ops_total{kind=\"allreduce\"}");
	double cnt = sample(text, "zbmd_coll_latency_seconds_count{kind=\"allreduce\"}");
	double bytes = sample(text, "zbmd_coll_bytes_total{kind=\"allreduce\"}");
	double want = 0;   /* node_main's 12 counts, on both nodes */
	int nar = 12;
	for (int k = 0; k < 12; k++)
		want += 2.0 * (double)(((size_t)(k * 25013) % CNT + (size_t)k) * sizeof(float));
	for (int k = 0; k < CHAIN_LEN; k++)
		if (!chain[k].barrier) {
			want += 2.0 * (double)(chain[k].count * sizeof(float));
			nar++;
		}
	ok(ops == 2 * nar && cnt == 2 * nar && bytes == want,
	   "%d all-reduces counted: ops %.0f, latency observations %.0f, bytes %.0f",
	   2 * nar, ops, cnt, bytes);
	double fails = sample(text, "zbmd_coll_failures_total");
	ok(fails >= 1, "the failed collective is counted (%.0f)", fails);
	free(text);
	for (int i = 0; i < 2; i++) {
		coll_comm_destroy(nd[i].c);
		free(nd[i].s);
		free(nd[i].r);
	}
	return tap_done();
}
