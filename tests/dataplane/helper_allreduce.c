/* helper_allreduce — a node that runs ITERS ring all-reduces (float sum,
 * COUNT elements) with the collectives engine (zbmd/coll.h) over the "dpdk"
 * net provider, progressed by a poller on lcore 0, and checks every result
 * element: rank r contributes (r + 1) * (1 + i % 13). With --avg i32|i64 the
 * all-reduces are integer avg instead, on inputs with ties, negative sums
 * and (i64) sums past 53 bits (tests/common/int_avg.h): the provider's
 * receive reduces each fragment as it lands and coll finishes avg on that
 * path, which the tcp provider's tests do not reach.
 *
 *   helper_allreduce -c NODE.ini [--count N] [--iters K] [--channels C]
 *                    [--avg i32|i64]
 *
 * Prints "DONE ..." (time per all-reduce, bus bandwidth) when finished and
 * keeps serving until SIGTERM; exits 0 when every element of every
 * iteration was right. */
#include "zbmd/coll.h"
#include "zbmd/common.h"
#include "zbmd/config.h"
#include "zbmd/dataplane.h"
#include "int_avg.h"
#include "node_helper.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct zb_config cfg;
static struct coll_comm *comm;
static float *sendbuf, *recvbuf;   /* float sum; else avg_dt's elements */
static int avg_dt = -1;             /* ZB_I32 / ZB_I64 with --avg */
static size_t count = 1u << 18;
static uint32_t iters = 5, iter, nranks, rank;
static struct coll_op *op;
static int failed_status, finished, printed;
static uint64_t wrong, t_start_ns, t_end_ns;
static volatile sig_atomic_t stop;

static size_t esize(void)
{
	return avg_dt < 0 ? sizeof(float) : zb_dtype_size(avg_dt);
}

static void fill(void)
{
	for (size_t i = 0; i < count; i++)
		if (avg_dt < 0)
			sendbuf[i] = (float)((rank + 1) * (1 + i % 13));
		else
			int_avg_put(sendbuf, avg_dt, i, int_avg_val(avg_dt, (int)rank, i));
}

static void check(void)
{
	if (avg_dt >= 0) {
		for (size_t i = 0; i < count; i++)
			if (int_avg_get(recvbuf, avg_dt, i) != int_avg_want(avg_dt, (int)nranks, i))
				wrong++;
		return;
	}
	float s = (float)nranks * (float)(nranks + 1) / 2.0f;
	for (size_t i = 0; i < count; i++)
		if (recvbuf[i] != s * (float)(1 + i % 13))
			wrong++;
}

static unsigned driver(void *arg, uint64_t now)
{
	(void)arg;
	(void)now;
	if (finished) {
		if (!printed) {
			printed = 1;
			double us = (double)(t_end_ns - t_start_ns) / 1e3 / iters;
			double bytes = (double)count * (double)esize();
			printf("DONE rank=%u nranks=%u iters=%u count=%zu us_per_op=%.0f busbw_MBps=%.1f wrong=%lu status=%d\n",
			       rank, nranks, iters, count, us,
			       bytes * 2 * (nranks - 1) / nranks / us, (unsigned long)wrong,
			       failed_status);
			fflush(stdout);
		}
		return 0;
	}
	if (!op) {
		if (iter == 0)
			t_start_ns = zb_now_ns();
		memset(recvbuf, 0, count * esize());
		struct coll_args a = {.kind = COLL_ALLREDUCE, .sendbuf = sendbuf,
				      .recvbuf = recvbuf, .count = count,
				      .dtype = avg_dt < 0 ? ZB_F32 : (enum zb_dtype)avg_dt,
				      .op = avg_dt < 0 ? ZB_SUM : ZB_AVG};
		int rc = coll_start(comm, &a, &op);
		if (rc) {
			failed_status = rc;
			finished = 1;
		}
		return 1;
	}
	int ev = coll_progress(comm);
	int done = 0;
	int st = coll_test(op, &done);
	if (!done && ev >= 0)
		return ev > 0;
	op = NULL;
	if (ev < 0 || st) {
		failed_status = ev < 0 ? ev : st;
		finished = 1;
		t_end_ns = zb_now_ns();
		return 1;
	}
	check();
	if (++iter == iters) {
		finished = 1;
		t_end_ns = zb_now_ns();
	}
	return 1;
}

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
	dp_node_request_stop();
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"count", required_argument, NULL, 'n'},
		{"iters", required_argument, NULL, 'k'},
		{"channels", required_argument, NULL, 'h'},
		{"avg", required_argument, NULL, 'a'},
		{NULL, 0, NULL, 0}};
	const char *path = NULL;
	uint16_t channels = 2;
	int c;
	while ((c = getopt_long(argc, argv, "c:", opts, NULL)) != -1) {
		if (c == 'c')
			path = optarg;
		else if (c == 'n')
			count = strtoull(optarg, NULL, 0);
		else if (c == 'k')
			iters = (uint32_t)strtoul(optarg, NULL, 0);
		else if (c == 'h')
			channels = (uint16_t)strtoul(optarg, NULL, 0);
		else if (c == 'a' && !strcmp(optarg, "i32"))
			avg_dt = ZB_I32;
		else if (c == 'a' && !strcmp(optarg, "i64"))
			avg_dt = ZB_I64;
		else {
			if (c == 'a')
				fprintf(stderr, "helper_allreduce: --avg takes i32 or i64, not '%s'\n",
					optarg);
			return 2;
		}
	}
	struct cfg_error cerr;
	if (!path || !count || !iters || cfg_load_file(&cfg, path, &cerr) != 0) {
		fprintf(stderr, "usage: helper_allreduce -c NODE.ini [--count N] [--iters K] [--channels C] "
			"[--avg i32|i64]\n");
		return 2;
	}
	sigset_t old;
	nh_signals_block(on_signal, &old);

	struct dp_err err;
	if (dp_node_init(&cfg, &err) != 0) {
		fprintf(stderr, "helper_allreduce: %s\n", err.msg);
		return 1;
	}
	/* created here (lane 0, before the loops run), used from lcore 0 */
	char cerrbuf[256] = "";
	struct coll_comm_args ca = {.cfg = &cfg, .provider = "dpdk",
				    .channels = channels};
	int rc = coll_comm_create(&ca, &comm, cerrbuf, sizeof(cerrbuf));
	if (rc) {
		fprintf(stderr, "helper_allreduce: communicator: %s (%s)\n",
			zb_strerror(rc), cerrbuf);
		dp_node_fini();
		return 1;
	}
	rank = coll_rank(comm);
	nranks = coll_nranks(comm);
	sendbuf = aligned_alloc(64, (count * esize() + 63) & ~(size_t)63);
	recvbuf = aligned_alloc(64, (count * esize() + 63) & ~(size_t)63);
	fill();
	dp_register_poller(0, driver, NULL);
	if (dp_node_launch(&err) != 0) {
		fprintf(stderr, "helper_allreduce: %s\n", err.msg);
		dp_node_fini();
		return 1;
	}
	printf("READY rank=%u nranks=%u channels=%u\n", rank, nranks, channels);
	fflush(stdout);
	nh_run_until(&stop, &old);
	int good = finished && !failed_status && wrong == 0 && iter == iters;
	printf("RESULT rank=%u iters=%u wrong=%lu status=%d (%s) %s\n", rank, iter,
	       (unsigned long)wrong, failed_status, zb_strerror(failed_status),
	       coll_error(comm));
	fflush(stdout);
	coll_comm_destroy(comm);
	dp_node_fini();
	free(sendbuf);
	free(recvbuf);
	return good ? 0 : 1;
}
