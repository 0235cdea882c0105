/* The gpu commands of the zbmd CLI: `zbmd gpu-info` and `zbmd bench gpu`.
 * The only place in gpu/ that prints. */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void dtypes_line(const struct gpu_device_info *d, char *buf, size_t len)
{
	snprintf(buf, len, "f32 i32%s%s%s", d->fp16 ? " f16 bf16" : "",
		 d->fp64 ? " f64" : "", d->int64 ? " i64" : "");
}

int gpu_cmd_info(int argc, char **argv)
{
	if (argc > 1) {
		/* --help alone; anything after it is still an error */
		bool help = strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0;
		if (help && argc > 2) {
			help = false;
			argv++;
		}
		if (!help)
			fprintf(stderr, "zbmd gpu-info: unexpected argument '%s'\n", argv[1]);
		fprintf(help ? stdout : stderr, "usage: zbmd gpu-info\n"
				"  lists the GPU backends compiled in, which are usable here\n"
				"  (and why not, for the others) and their devices\n");
		return help ? 0 : 2;
	}
	printf("compiled in:");
	for (int b = GPU_CPU; b < GPU_BACKEND_COUNT; b++)
		if (gpu_backend_compiled(b))
			printf(" %s", gpu_backend_name(b));
	printf("\n");
	for (int b = GPU_CPU; b < GPU_BACKEND_COUNT; b++) {
		char why[GPU_WHY_LEN];
		int rc = gpu_backend_probe(b, why, sizeof(why));
		printf("%-7s %-11s %s\n", gpu_backend_name(b),
		       rc == 0 ? "usable" : "unavailable", why);
		for (int i = 0; rc == 0 && i < gpu_device_count(b); i++) {
			struct gpu_device_info d;
			char dt[64];
			if (gpu_device_info(b, i, &d) < 0)
				continue;
			dtypes_line(&d, dt, sizeof(dt));
			printf("  device %d: %s%s | %s | %.1f GiB | numa %d | "
			       "units %u | reduce dtypes: %s | dmabuf %s\n",
			       i, d.name, d.software ? " (software)" : "", d.driver,
			       (double)d.mem_bytes / (1 << 30), d.numa_node,
			       d.compute_units, dt, d.dmabuf ? "yes" : "no");
		}
	}
	struct gpu_ctx *ctx;
	struct gpu_options o;
	char why[GPU_WHY_LEN];
	gpu_options_default(&o);
	o.pool_bytes = 1 << 20;
	if (gpu_open(&o, &ctx, why, sizeof(why)) == 0) {
		gpu_ptr_t p;
		enum gpu_reg_path path = GPU_REG_STAGING;
		if (gpu_alloc(ctx, 4096, &p) == 0) {
			path = gpu_reg_path_for(ctx, p, 4096, why, sizeof(why));
			gpu_free(ctx, p);
		}
		printf("auto selects: %s\nrdma registration path: %s (%s)\n",
		       gpu_backend_name(gpu_ctx_backend(ctx)),
		       gpu_reg_path_name(path), why);
		gpu_close(ctx);
	} else {
		printf("auto selects: nothing (%s)\n", why);
	}
	printf("peer-memory module (nvidia_peermem/nv_peer_mem): %s\n",
	       gpu_peermem_available(NULL) ? "loaded" : "not loaded");
	return 0;
}

/* ---- bench ---- */

static double secs(uint64_t t0) { return (double)(zb_now_ns() - t0) / 1e9; }

static int bench_sgemm(struct gpu_ctx *ctx, int n, double *gflops, bool *checked)
{
	size_t bytes = (size_t)n * n * 4;
	float *a = malloc(bytes), *b = malloc(bytes), *c = malloc(bytes);
	gpu_ptr_t da = 0, db = 0, dc = 0;
	int rc = -ENOMEM, iters = 0;

	if (!a || !b || !c)
		goto out;
	for (size_t i = 0; i < (size_t)n * n; i++) {
		a[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
		b[i] = (float)((i * 5) % 11) / 11.0f - 0.5f;
	}
	rc = gpu_alloc(ctx, bytes, &da);
	if (!rc) rc = gpu_alloc(ctx, bytes, &db);
	if (!rc) rc = gpu_alloc(ctx, bytes, &dc);
	if (!rc) rc = gpu_memcpy_h2d(ctx, NULL, da, a, bytes);
	if (!rc) rc = gpu_memcpy_h2d(ctx, NULL, db, b, bytes);
	/* warm-up + correctness: spot-check 64 entries against a dot product */
	if (!rc) rc = gpu_sgemm(ctx, NULL, false, false, n, n, n, 1, da, n, db, n, 0, dc, n);
	if (!rc) rc = gpu_memcpy_d2h(ctx, NULL, c, dc, bytes);
	if (!rc) rc = gpu_stream_sync(ctx, NULL);
	*checked = rc == 0;
	for (int s = 0; rc == 0 && s < 64; s++) {
		int i = (s * 37) % n, j = (s * 91) % n;
		double acc = 0, mag = 0;
		for (int p = 0; p < n; p++) {
			acc += (double)a[i + p * n] * b[p + j * n];
			mag += fabs((double)a[i + p * n] * b[p + j * n]);
		}
		if (fabs(acc - c[i + j * n]) > 1e-4 * mag + 1e-5)
			*checked = false;
	}
	uint64_t t0 = zb_now_ns();
	while (rc == 0 && (iters < 2 || secs(t0) < 0.3)) {
		rc = gpu_sgemm(ctx, NULL, false, false, n, n, n, 1, da, n, db, n, 0, dc, n);
		if (!rc) rc = gpu_stream_sync(ctx, NULL);
		iters++;
	}
	*gflops = 2.0 * n * n * (double)n * iters / secs(t0) / 1e9;
out:
	if (da) gpu_free(ctx, da);
	if (db) gpu_free(ctx, db);
	if (dc) gpu_free(ctx, dc);
	free(a); free(b); free(c);
	return rc;
}

/* Values that stay finite and exact-ish under repeated sums, per dtype. */
static void fill_dtype(void *p, size_t n, enum zb_dtype t, unsigned seed)
{
	for (size_t i = 0; i < n; i++) {
		float v = (float)((i * 2654435761u + seed) % 1000) * 0.25f;
		switch (t) {
		case ZB_F32: ((float *)p)[i] = v; break;
		case ZB_F16: ((uint16_t *)p)[i] = gpu__f32_to_f16(v); break;
		case ZB_BF16: ((uint16_t *)p)[i] = gpu__f32_to_bf16(v); break;
		case ZB_F64: ((double *)p)[i] = v; break;
		case ZB_I32: ((int32_t *)p)[i] = (int32_t)(v * 4); break;
		default: ((int64_t *)p)[i] = (int64_t)(v * 4); break;
		}
	}
}

/* sum-reduce of `bytes` of dtype t; bandwidth counts memory traffic (read
 * dst, read src, write dst = 3 x bytes) against the copy's (2 x bytes). */
static int bench_reduce(struct gpu_ctx *ctx, size_t bytes, enum zb_dtype t,
			double *red_gbs, double *copy_gbs, bool *checked)
{
	size_t n = bytes / zb_dtype_size(t);
	void *h0 = malloc(bytes), *h1 = malloc(bytes), *out = malloc(bytes);
	gpu_ptr_t d0 = 0, d1 = 0, d2 = 0;
	int rc = -ENOMEM, iters;

	if (!h0 || !h1 || !out)
		goto out;
	fill_dtype(h0, n, t, 1);
	fill_dtype(h1, n, t, 7);
	rc = gpu_alloc(ctx, bytes, &d0);
	if (!rc) rc = gpu_alloc(ctx, bytes, &d1);
	if (!rc) rc = gpu_alloc(ctx, bytes, &d2);
	if (!rc) rc = gpu_memcpy_h2d(ctx, NULL, d0, h0, bytes);
	if (!rc) rc = gpu_memcpy_h2d(ctx, NULL, d1, h1, bytes);
	if (!rc) rc = gpu_reduce(ctx, NULL, d0, d1, n, t, ZB_SUM);
	if (!rc) rc = gpu_memcpy_d2h(ctx, NULL, out, d0, bytes);
	if (!rc) rc = gpu_stream_sync(ctx, NULL);
	if (!rc) rc = gpu_host_reduce(h0, h1, n, t, ZB_SUM);
	/* every backend computes the host reduction's exact bits */
	*checked = rc == 0 && memcmp(out, h0, bytes) == 0;
	uint64_t t0 = zb_now_ns();
	for (iters = 0; rc == 0 && (iters < 3 || secs(t0) < 0.3); iters++) {
		rc = gpu_reduce(ctx, NULL, d0, d1, n, t, ZB_SUM);
		if (!rc) rc = gpu_stream_sync(ctx, NULL);
	}
	*red_gbs = 3.0 * (double)bytes * iters / secs(t0) / 1e9;
	t0 = zb_now_ns();
	for (iters = 0; rc == 0 && (iters < 3 || secs(t0) < 0.3); iters++) {
		rc = gpu_memcpy_d2d(ctx, NULL, d2, d1, bytes);
		if (!rc) rc = gpu_stream_sync(ctx, NULL);
	}
	*copy_gbs = 2.0 * (double)bytes * iters / secs(t0) / 1e9;
out:
	if (d0) gpu_free(ctx, d0);
	if (d1) gpu_free(ctx, d1);
	if (d2) gpu_free(ctx, d2);
	free(h0); free(h1); free(out);
	return rc;
}

static int bench_one(enum gpu_backend b, bool quick, enum zb_dtype dt)
{
	static const int gemm_full[] = {256, 512, 1024}, gemm_quick[] = {64},
			 gemm_soft[] = {64, 128};
	static const size_t red_full[] = {256 << 10, 1 << 20, 8 << 20, 32 << 20},
			    red_quick[] = {1 << 16};
	struct gpu_options o;
	struct gpu_ctx *ctx;
	char why[GPU_WHY_LEN];
	int fails = 0;

	gpu_options_default(&o);
	o.backend = b;
	o.pool_bytes = quick ? (4u << 20) : (112u << 20);
	if (gpu_open(&o, &ctx, why, sizeof(why)) < 0) {
		/* it probed usable: a failure, not a backend this machine lacks
		 * (exit 0 with nothing measured before) */
		fprintf(stderr, "zbmd bench gpu: %s: not benchmarked: %s\n",
			gpu_backend_name(b), why);
		return 1;
	}
	printf("%s: %s (%s)\n", gpu_backend_name(b), gpu_ctx_device(ctx)->name,
	       gpu_ctx_device(ctx)->driver);
	/* a software device (lavapipe) is orders of magnitude slower */
	bool soft = gpu_ctx_device(ctx)->software;
	const int *gs = quick ? gemm_quick : soft ? gemm_soft : gemm_full;
	size_t ng = quick ? 1 : soft ? ZB_ARRAY_LEN(gemm_soft) : ZB_ARRAY_LEN(gemm_full);
	for (size_t i = 0; i < ng; i++) {
		double gf = 0;
		bool chk = false;
		int rc = bench_sgemm(ctx, gs[i], &gf, &chk);
		printf("  sgemm  n=%-5d %9.2f GFLOP/s   %s\n", gs[i], gf,
		       rc ? zb_strerror(rc) : chk ? "checked" : "WRONG RESULT");
		fails += rc || !chk;
	}
	const size_t *rs = quick ? red_quick : red_full;
	size_t nr = quick ? 1 : soft ? 2 : ZB_ARRAY_LEN(red_full);
	for (size_t i = 0; i < nr; i++) {
		double rg = 0, cg = 0;
		bool chk = false;
		int rc = bench_reduce(ctx, rs[i], dt, &rg, &cg, &chk);
		printf("  reduce %-8s sum %6zu KiB %8.2f GB/s   d2d copy %8.2f GB/s   "
		       "ratio %5.1f%%   %s\n", zb_dtype_name(dt), rs[i] >> 10, rg, cg,
		       cg > 0 ? 100 * rg / cg : 0,
		       rc ? zb_strerror(rc) : chk ? "checked" : "WRONG RESULT");
		fails += rc || !chk;
	}
	gpu_close(ctx);
	return fails;
}

static const char gpu_bench_usage[] =
	"usage: zbmd bench gpu [--backend auto|cpu|cuda|hip|vulkan] [--dtype f32|f16|bf16|f64|i32|i64] [--quick]\n"
	"  per usable backend: sgemm GFLOP/s and sum-reduce GB/s\n"
	"  (memory traffic, 3 bytes moved per byte reduced) next to the\n"
	"  device-to-device copy (2 per byte), results checked.\n";

int gpu_cmd_bench(int argc, char **argv)
{
	enum gpu_backend only = GPU_AUTO;
	enum zb_dtype dt = ZB_F32;
	bool quick = false;

	for (int i = 1; i < argc; i++) {
		/* --backend B or --backend=B (as getopt_long takes it elsewhere) */
		char opt[32];
		const char *a = argv[i], *eq = strchr(a, '='), *val = NULL;
		if (eq && strncmp(a, "--", 2) == 0 && (size_t)(eq - a) < sizeof(opt)) {
			snprintf(opt, sizeof(opt), "%.*s", (int)(eq - a), a);
			a = opt;
			val = eq + 1;
		}
		bool valued = strcmp(a, "--backend") == 0 || strcmp(a, "--dtype") == 0;
		if (valued && !val && i + 1 >= argc) {
			fprintf(stderr, "zbmd bench gpu: %s needs a value\n%s", a,
				gpu_bench_usage);
			return 2;
		}
		if (val && !valued) {
			bool known = strcmp(a, "--quick") == 0 || strcmp(a, "--help") == 0;
			fprintf(stderr, known ? "zbmd bench gpu: %s takes no value (got '%s')\n%s"
					      : "zbmd bench gpu: unknown option '%.0s%s'\n%s",
				a, argv[i], gpu_bench_usage);
			return 2;
		}
		if (valued && !val)
			val = argv[++i];
		if (strcmp(a, "--backend") == 0) {
			if (gpu_backend_parse(val, &only) < 0) {
				fprintf(stderr, "zbmd bench gpu: unknown backend '%s' "
						"(auto|cpu|cuda|hip|vulkan)\n", val);
				return 2;
			}
		} else if (strcmp(a, "--dtype") == 0) {
			if (zb_dtype_parse(val, &dt) < 0) {
				fprintf(stderr, "zbmd bench gpu: unknown dtype '%s' "
						"(f32|f16|bf16|f64|i32|i64)\n", val);
				return 2;
			}
		} else if (strcmp(a, "--quick") == 0) {
			quick = true;
		} else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			fputs(gpu_bench_usage, stdout);
			return 0;
		} else {
			fprintf(stderr, "zbmd bench gpu: %s '%s'\n%s", a[0] == '-' ?
				"unknown option" : "unexpected argument", a, gpu_bench_usage);
			return 2;
		}
	}
	int fails = 0, ran = 0;
	/* a row a line, also into a file or a pipe: an interrupted run keeps
	 * the rows it finished (they were lost in the stdio buffer) */
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int b = GPU_CPU; b < GPU_BACKEND_COUNT; b++) {
		if (only != GPU_AUTO && b != (int)only)
			continue;
		char why[GPU_WHY_LEN];
		if (gpu_backend_probe(b, why, sizeof(why)) < 0) {
			/* asked for: an error (stderr); else what this machine lacks */
			fprintf(only != GPU_AUTO ? stderr : stdout, "%s%s: not benchmarked: %s\n",
				only != GPU_AUTO ? "zbmd bench gpu: " : "",
				gpu_backend_name(b), why);
			continue;
		}
		ran++;
		fails += bench_one(b, quick, dt);
	}
	if (only != GPU_AUTO && !ran)
		return 1;
	return fails ? 1 : 0;
}
