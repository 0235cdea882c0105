/* dataplane/train.c — `zbmd train`: data-parallel training across the
 * cluster, the way the appliance's users run it.
 *
 *   zbmd local --nodes 4 --link memif -- train --steps 50
 *
 * The model is linear least squares (loss = mean((Xw - y)^2) / 2) on
 * synthetic data: every node holds its own shard of M samples with D
 * features, drawn (seed + rank) around one fixed model w* with a little
 * noise. Each step, a trainer actor (the actor runtime on its own worker
 * threads) computes its shard's gradient X^T (Xw - y) / M and loss on the
 * GPU backend of the config or --backend (three sgemm per step: cuBLAS,
 * hipBLAS, Vulkan or OpenBLAS), hands the gradient bucket (D + 1 floats, the
 * loss last) to the collective service (coll_svc_submit: an all-reduce avg
 * over the cluster) and returns to its mailbox; on the completion message
 * it applies w -= lr * g. Every replica applies the same averaged gradient,
 * so the weights stay bit-identical across nodes; the end checks that
 * (a checksum all-reduced with min and max) and how far w is from w*.
 *
 * Rank 0 prints the loss every --every steps and a summary; exit 0 when
 * the replicas agree, 1 when a collective failed or they diverged, 2 for
 * bad usage. The collective runs over the config's transport (dpdk: the
 * node's dataplane lcores progress it; tcp).
 */
#include "zbmd/actors.h"
#include "zbmd/coll.h"
#include "zbmd/config.h"
#include "zbmd/gpu.h"
#include "../cli/cli.h"

#include <getopt.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TR_GO = 1, TR_DONE = 2 };

struct tr_opts {
	unsigned d, m, steps, every;
	double lr;
	uint64_t seed;
	bool backend_set;
	enum gpu_backend backend;
	const char *cfg;
};

static struct trainer {
	struct tr_opts o;
	struct gpu_ctx *g;
	struct gpu_stream *st;
	gpu_ptr_t X, y, w, r, grad;
	float *hw, *hg;                 /* weights, gradient bucket (d + 1) */
	uint32_t n, rank;
	unsigned step;                  /* steps done */
	double loss_first, loss_last;
	uint64_t compute_ns, coll_ns, t_submit;
	uint64_t compute_first_ns, coll_first_ns;   /* step 1: the backend warming up */
	int err;                        /* the first failure, or 0 */
	char why[160];
	atomic_bool finished;
} T;

/* the actor runtime, the communicator and its collective service */
static struct coll_actor_node tr_node;

static void tr_usage(FILE *f)
{
	fprintf(f,
"usage: zbmd train -c node.ini [--features D] [--samples M] [--steps S]\n"
"                  [--lr LR] [--every K] [--seed N] [--backend B]\n"
"Data-parallel training of a linear model (least squares) on synthetic data\n"
"across the cluster: each node's trainer actor computes its shard's gradient\n"
"on the GPU backend and all-reduces it (avg) through the collective service;\n"
"the replicas stay bit-identical. Run it on every node, e.g.\n"
"  zbmd local --nodes 4 --link memif -- train --steps 50\n"
"  -c, --config FILE  node config (cluster, transport, [gpu])\n"
"  --features D       model size, 1..1048576 (default 1024)\n"
"  --samples M        samples per node, 1..1048576 (default 4096)\n"
"  --steps S          training steps, 1..1000000 (default 50)\n"
"  --lr LR            learning rate, 0 < LR <= 100 (default 1.0)\n"
"  --every K          print the loss every K steps, 1..1000000 (default 10)\n"
"  --seed N           data seed, 0..4294967295 (default 1)\n"
"  --backend B        auto|cpu|cuda|hip|vulkan (default: the config's [gpu])\n"
"Exit status: 0 the replicas agree, 1 a collective failed, they differ or the\n"
"training diverged (the loss is not a number), 2 bad usage.\n");
}

static bool tr_uint(const char *s, unsigned lo, unsigned hi, unsigned *out)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v < lo || v > hi)
		return false;
	*out = (unsigned)v;
	return true;
}

static int tr_parse(int argc, char **argv, struct tr_opts *o)
{
	static const struct option opts[] = {
		{"config", required_argument, NULL, 'c'},
		{"features", required_argument, NULL, 'D'},
		{"samples", required_argument, NULL, 'M'},
		{"steps", required_argument, NULL, 'S'},
		{"lr", required_argument, NULL, 'l'},
		{"every", required_argument, NULL, 'k'},
		{"seed", required_argument, NULL, 's'},
		{"backend", required_argument, NULL, 'b'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	*o = (struct tr_opts){.d = 1024, .m = 4096, .steps = 50, .every = 10,
			      .lr = 1.0, .seed = 1};
	optind = 1;
	opterr = 0;
	int c, li = -1;
	while ((c = getopt_long(argc, argv, ":c:h", opts, &li)) != -1) {
		bool good = true;
		const char *name = li >= 0 ? opts[li].name : "config", *want = "";
		unsigned u;
		char *end;
		switch (c) {
		case 'c': o->cfg = optarg; break;
		case 'D': good = tr_uint(optarg, 1, 1u << 20, &o->d); want = "1..1048576"; break;
		case 'M': good = tr_uint(optarg, 1, 1u << 20, &o->m); want = "1..1048576"; break;
		case 'S': good = tr_uint(optarg, 1, 1000000, &o->steps); want = "1..1000000"; break;
		case 'k': good = tr_uint(optarg, 1, 1000000, &o->every); want = "1..1000000"; break;
		case 's':
			good = tr_uint(optarg, 0, 4294967295u, &u);
			if (good)
				o->seed = u;
			want = "0..4294967295";
			break;
		case 'l':
			errno = 0;
			o->lr = strtod(optarg, &end);
			good = !errno && end != optarg && !*end && o->lr > 0 && o->lr <= 100;
			want = "a number, 0 < LR <= 100";
			break;
		case 'b':
			good = gpu_backend_parse(optarg, &o->backend) == 0;
			o->backend_set = true;
			want = "auto, cpu, cuda, hip or vulkan";
			break;
		case 'h': tr_usage(stdout); return 1;
		default:   /* ':' or '?' */
			zb_opt_error("zbmd train", c, argc, argv, opts);
			return -1;
		}
		if (!good) {
			fprintf(stderr, "zbmd train: bad value '%s' for --%s (expected %s)\n",
				optarg, name, want);
			return -1;
		}
		li = -1;
	}
	if (optind < argc) {
		fprintf(stderr, "zbmd train: unexpected argument '%s'\n", argv[optind]);
		return -1;
	}
	if (!o->cfg) {
		fprintf(stderr, "zbmd train: -c/--config FILE is required\n");
		return -1;
	}
	/* each in range, the product maybe not: the shard is M x D floats,
	 * made in host memory and copied to the backend's (host memory again
	 * on the cpu backend): twice the shard at the peak */
	double shard = (double)o->m * o->d * sizeof(float);
	double mem = (double)zb_phys_mem_bytes();
	/* under zbmd local every node of the machine makes its shard */
	const char *ln = getenv("ZBMD_LOCAL_NODES");
	long nodes = ln ? strtol(ln, NULL, 10) : 1;
	if (nodes < 1 || nodes > 64)
		nodes = 1;
	if (mem > 0 && 2 * shard * (double)nodes > mem / 2) {
		char all[96] = "";
		if (nodes > 1)
			snprintf(all, sizeof(all), ", %.1f GiB for the %ld nodes on this "
				 "machine", 2 * shard * (double)nodes / (1 << 30), nodes);
		fprintf(stderr, "zbmd train: --samples %u x --features %u is %.1f GiB of data "
			"per node, %.1f GiB with the backend's copy of it%s: more than half of "
			"this machine's %.1f GiB (take fewer)\n",
			o->m, o->d, shard / (1 << 30), 2 * shard / (1 << 30), all,
			mem / (1 << 30));
		return -1;
	}
	return 0;
}

/* xorshift64*: the data of rank r, reproducible from (seed, r). */
static uint64_t tr_next(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ull;
}
static float tr_unit(uint64_t *s) { return (float)((tr_next(s) >> 40) * 0x1p-24) * 2.0f - 1.0f; }
static float tr_wstar(unsigned j) { return sinf(0.37f * (float)(j + 1)); }

/* The shard (X column-major M x D, y) and w = 0, onto the device. */
static int tr_data(void)
{
	size_t m = T.o.m, d = T.o.d;
	float *X = malloc(m * d * sizeof(float)), *y = calloc(m, sizeof(float));
	int rc = -ENOMEM;
	if (!X || !y)
		goto out;
	uint64_t s = (T.o.seed + 1) * 0x9E3779B97F4A7C15ull ^ ((uint64_t)T.rank + 1) << 32;
	for (size_t j = 0; j < d; j++)
		for (size_t i = 0; i < m; i++)
			X[i + j * m] = tr_unit(&s);
	for (size_t j = 0; j < d; j++) {
		float wj = tr_wstar((unsigned)j);
		for (size_t i = 0; i < m; i++)
			y[i] += X[i + j * m] * wj;
	}
	for (size_t i = 0; i < m; i++)
		y[i] += 0.01f * tr_unit(&s);
	memset(T.hw, 0, d * sizeof(float));
	if ((rc = gpu_memcpy_h2d(T.g, T.st, T.X, X, m * d * sizeof(float))) ||
	    (rc = gpu_memcpy_h2d(T.g, T.st, T.y, y, m * sizeof(float))) ||
	    (rc = gpu_memcpy_h2d(T.g, T.st, T.w, T.hw, d * sizeof(float))))
		goto out;
	rc = gpu_stream_sync(T.g, T.st);
out:
	free(X);
	free(y);
	return rc;
}

/* This shard's gradient X^T (Xw - y) / M into hg[0..D), its loss into hg[D]. */
static int tr_gradient(void)
{
	int m = (int)T.o.m, d = (int)T.o.d, rc;
	if ((rc = gpu_memcpy_d2d(T.g, T.st, T.r, T.y, (size_t)m * sizeof(float))) ||
	    (rc = gpu_sgemm(T.g, T.st, false, false, m, 1, d, 1.0f, T.X, m, T.w, d,
			    -1.0f, T.r, m)) ||
	    (rc = gpu_sgemm(T.g, T.st, true, false, d, 1, m, 1.0f / (float)m, T.X, m,
			    T.r, m, 0.0f, T.grad, d)) ||
	    (rc = gpu_sgemm(T.g, T.st, true, false, 1, 1, m, 0.5f / (float)m, T.r, m,
			    T.r, m, 0.0f, T.grad + (gpu_ptr_t)d * sizeof(float), 1)) ||
	    (rc = gpu_memcpy_d2h(T.g, T.st, T.hg, T.grad, ((size_t)d + 1) * sizeof(float))))
		return rc;
	return gpu_stream_sync(T.g, T.st);
}

static void tr_stop(int err, const char *what)
{
	if (!T.err) {
		T.err = err;
		snprintf(T.why, sizeof(T.why), "%s: %s", what, zb_strerror(err));
	}
	atomic_store(&T.finished, true);
}

/* ms per step after the first (which carries the backend's first-use
 * costs: cuBLAS handles, NVRTC, pipelines), or the first alone. */
static double tr_ms_per_step(uint64_t total_ns, uint64_t first_ns)
{
	if (T.step <= 1)
		return (double)first_ns / 1e6;
	return (double)(total_ns - first_ns) / (T.step - 1) / 1e6;
}

/* Compute this step's gradient and hand it to the collective service. */
static void tr_step(struct act_ctx *ctx)
{
	uint64_t t0 = zb_now_ns();
	int rc = tr_gradient();
	T.compute_ns += zb_now_ns() - t0;
	if (rc) {
		tr_stop(rc, "the gradient on the GPU backend");
		return;
	}
	struct coll_args a = {.kind = COLL_ALLREDUCE, .sendbuf = T.hg, .recvbuf = T.hg,
			      .count = T.o.d + 1, .dtype = ZB_F32, .op = ZB_AVG};
	T.t_submit = zb_now_ns();
	if ((rc = coll_svc_submit(tr_node.svc, &a, act_self(ctx), TR_DONE, T.step)) < 0)
		tr_stop(rc, "handing the gradient to the collective service");
}

static int tr_handle(struct act_ctx *ctx, struct act_msg *m)
{
	if (m->tag == TR_GO) {
		tr_step(ctx);
		return 0;
	}
	struct coll_done_msg d;
	if (m->tag != TR_DONE || m->kind != ACT_PL_INLINE || m->len != sizeof(d))
		return 0;
	memcpy(&d, m->u.bytes, sizeof(d));
	T.coll_ns += zb_now_ns() - T.t_submit;
	if (d.status < 0 || d.cookie != T.step) {
		tr_stop(d.status < 0 ? d.status : -EPROTO, "the gradient's all-reduce");
		return 0;
	}
	double loss = T.hg[T.o.d];   /* the mean of the shards' losses, before the update */
	if (T.step == 0)
		T.loss_first = loss;
	T.loss_last = loss;
	T.step++;
	if (T.step == 1) {
		T.compute_first_ns = T.compute_ns;
		T.coll_first_ns = T.coll_ns;
	}
	if (T.rank == 0 && (T.step == 1 || T.step % T.o.every == 0 || T.step == T.o.steps)) {
		printf("%7u  %12.5e  %11.3f  %13.3f\n", T.step, loss,
		       tr_ms_per_step(T.compute_ns, T.compute_first_ns),
		       tr_ms_per_step(T.coll_ns, T.coll_first_ns));
		fflush(stdout);
	}
	float lr = (float)T.o.lr;
	for (unsigned j = 0; j < T.o.d; j++)
		T.hw[j] -= lr * T.hg[j];
	int rc = gpu_memcpy_h2d(T.g, T.st, T.w, T.hw, T.o.d * sizeof(float));
	if (!rc)
		rc = gpu_stream_sync(T.g, T.st);
	if (rc) {
		tr_stop(rc, "the weights onto the GPU backend");
		return 0;
	}
	if (T.step == T.o.steps)
		atomic_store(&T.finished, true);
	else
		tr_step(ctx);
	return 0;
}

static const struct act_behaviour tr_beh = {.name = "trainer", .handle = tr_handle};

static uint64_t tr_checksum(void)
{
	uint64_t h = 1469598103934665603ull;
	const unsigned char *p = (const unsigned char *)T.hw;
	for (size_t i = 0; i < (size_t)T.o.d * sizeof(float); i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h >> 1;   /* an int64 >= 0 */
}

/* The owner of the communicator: poll the service until the trainer ends,
 * then compare the replicas. */
static int tr_owner(void *arg)
{
	(void)arg;
	act_id id;
	int rc = act_spawn(tr_node.rt, &tr_beh, NULL, &id);
	if (rc < 0 || (rc = act_tell(tr_node.rt, id, TR_GO, NULL, 0)) < 0) {
		fprintf(stderr, "zbmd train: the trainer actor: %s\n", zb_strerror(rc));
		return ZB_EXIT_FAIL;
	}
	uint64_t t0 = zb_now_ns();
	(void)coll_actor_node_serve(&tr_node, &T.finished, 0);
	double secs = (double)(zb_now_ns() - t0) / 1e9;
	if (T.err) {
		fprintf(stderr, "zbmd train: node rank %u: step %u: %s%s%s\n", T.rank,
			T.step + 1, T.why, coll_error(tr_node.comm)[0] ? " — " : "",
			coll_error(tr_node.comm));
		return ZB_EXIT_FAIL;
	}
	int64_t lo = (int64_t)tr_checksum(), hi = lo;
	if ((rc = coll_allreduce(tr_node.comm, &lo, &lo, 1, ZB_I64, ZB_MIN)) < 0 ||
	    (rc = coll_allreduce(tr_node.comm, &hi, &hi, 1, ZB_I64, ZB_MAX)) < 0) {
		fprintf(stderr, "zbmd train: comparing the replicas: %s\n",
			coll_error(tr_node.comm));
		return ZB_EXIT_FAIL;
	}
	double e2 = 0, s2 = 0;
	for (unsigned j = 0; j < T.o.d; j++) {
		double ws = tr_wstar(j), dw = T.hw[j] - ws;
		e2 += dw * dw;
		s2 += ws * ws;
	}
	if (T.rank == 0) {
		printf("# replicas: %s on all %u nodes (weights checksum %016llx)\n",
		       lo == hi ? "bit-identical" : "DIFFERENT", T.n, (unsigned long long)hi);
		printf("# loss %.5e -> %.5e (%.3gx lower) in %u steps, %.2f s; |w - w*| / |w*| = %.3e\n",
		       T.loss_first, T.loss_last, T.loss_first / T.loss_last, T.step, secs,
		       sqrt(e2 / s2));
		printf("# per step: gradient %.3f ms on %s, all-reduce of %u floats %.3f ms "
		       "(hand-over to completion message, waiting for the slowest node included)%s\n",
		       tr_ms_per_step(T.compute_ns, T.compute_first_ns),
		       gpu_backend_name(gpu_ctx_backend(T.g)), T.o.d + 1,
		       tr_ms_per_step(T.coll_ns, T.coll_first_ns),
		       T.step > 1 ? ", after the first step" : "");
		if (T.step > 1)
			printf("# the first step: gradient %.3f ms, all-reduce %.3f ms (the backend's "
			       "and the ring's first use)\n", (double)T.compute_first_ns / 1e6,
			       (double)T.coll_first_ns / 1e6);
	}
	/* a loss that is not a number any more: the model diverged (an lr
	 * too large for the data); the replicas may agree on it, but the run
	 * trained nothing (it exited 0 with "loss ... -> -nan") */
	if (!isfinite(T.loss_last) || !isfinite(e2)) {
		fprintf(stderr, "zbmd train: node rank %u: the training diverged (the loss is "
			"%g after %u steps): take a smaller --lr (this one: %g)\n", T.rank,
			T.loss_last, T.step, T.o.lr);
		return ZB_EXIT_FAIL;
	}
	return lo == hi ? ZB_EXIT_OK : ZB_EXIT_FAIL;
}

int dp_cmd_train(int argc, char **argv)
{
	struct zb_config *cfg = NULL;
	struct cfg_error cerr;
	char err[512];
	int rc, status = ZB_EXIT_FAIL;

	memset(&T, 0, sizeof(T));
	rc = tr_parse(argc, argv, &T.o);
	if (rc)
		return rc > 0 ? ZB_EXIT_OK : ZB_EXIT_USAGE;
	cfg = calloc(1, sizeof(*cfg));
	if (!cfg)
		return ZB_EXIT_FAIL;
	rc = cfg_load_file(cfg, T.o.cfg, &cerr);
	if (rc < 0) {
		/* every diagnostic, one "FILE:LINE: ..." line each, as zbmd
		 * run and check-config print them (only the first was) */
		cfg_error_print(stderr, "zbmd train", &cerr);
		free(cfg);
		return ZB_EXIT_USAGE;
	}
	/* the GPU backend and the buffers */
	struct gpu_options go;
	gpu_options_from_config(cfg, &go);
	if (T.o.backend_set)
		go.backend = T.o.backend;
	/* the five buffers below, each rounded up to the pool's 1 MiB slabs
	 * and chunks and given a slab more (a small one takes a slab of its
	 * size class; a large one may open a chunk of its own, leaving the
	 * end of the one before unused), and the first chunk: with the data
	 * plus 1 MiB, 66000 x 1024 did not fit (two size classes) */
	const size_t mib = (size_t)1 << 20;
	const size_t bufs[] = {(size_t)T.o.m * T.o.d, T.o.m, T.o.m, T.o.d, (size_t)T.o.d + 1};
	size_t need = 4 * mib;
	for (size_t i = 0; i < ZB_ARRAY_LEN(bufs); i++)
		need += (bufs[i] * sizeof(float) + mib - 1) / mib * mib + mib;
	if (go.pool_bytes < need)
		go.pool_bytes = need;
	if ((rc = gpu_open(&go, &T.g, err, sizeof(err))) < 0) {
		fprintf(stderr, "zbmd train: GPU backend: %s\n", err);
		goto out;
	}
	T.hw = calloc((size_t)T.o.d + 1, sizeof(float));
	T.hg = calloc((size_t)T.o.d + 1, sizeof(float));
	if (!T.hw || !T.hg || gpu_stream_create(T.g, &T.st) < 0 ||
	    gpu_alloc(T.g, (size_t)T.o.m * T.o.d * sizeof(float), &T.X) < 0 ||
	    gpu_alloc(T.g, (size_t)T.o.m * sizeof(float), &T.y) < 0 ||
	    gpu_alloc(T.g, (size_t)T.o.m * sizeof(float), &T.r) < 0 ||
	    gpu_alloc(T.g, (size_t)T.o.d * sizeof(float), &T.w) < 0 ||
	    gpu_alloc(T.g, ((size_t)T.o.d + 1) * sizeof(float), &T.grad) < 0) {
		fprintf(stderr, "zbmd train: %u x %u floats do not fit the GPU backend's pool\n",
			T.o.m, T.o.d);
		goto out;
	}
	/* the actor runtime (its own worker threads), the communicator (on the
	 * node's dataplane for dpdk), the collective service */
	if ((rc = coll_actor_node_open(cfg, 2, &tr_node, err, sizeof(err))) < 0) {
		fprintf(stderr, "zbmd train: node %u: %s\n", cfg->node.id, err);
		goto out;
	}
	T.n = coll_nranks(tr_node.comm);
	T.rank = coll_rank(tr_node.comm);
	if ((rc = tr_data()) < 0) {
		fprintf(stderr, "zbmd train: setting up: %s\n", zb_strerror(rc));
		goto out;
	}
	if (T.rank == 0) {
		const struct gpu_device_info *di = gpu_ctx_device(T.g);
		printf("# zbmd train: cluster %u, nodes %u, transport %s, GPU backend %s (%s)\n",
		       cfg->cluster.id, T.n, coll_provider(tr_node.comm), gpu_backend_name(gpu_ctx_backend(T.g)),
		       di ? di->name : "?");
		printf("# linear model, least squares: %u features, %u samples per node (%llu "
		       "in all), lr %g, %u steps; gradient all-reduce (avg) by message\n",
		       T.o.d, T.o.m, (unsigned long long)T.o.m * T.n, T.o.lr, T.o.steps);
		printf("#  step          loss  gradient(ms)  allreduce(ms)\n");
		fflush(stdout);
	}
	status = coll_actor_node_run(&tr_node, tr_owner, NULL);
out:
	coll_actor_node_close(&tr_node);
	if (T.st)
		gpu_stream_destroy(T.g, T.st);
	if (T.g)
		gpu_close(T.g);
	free(T.hw);
	free(T.hg);
	free(cfg);
	return status;
}
