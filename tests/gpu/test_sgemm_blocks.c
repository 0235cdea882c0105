/* sgemm past one launch's grid: C with more than 65,535 x 16 rows or
 * columns goes in blocks (gpu/core.c), each block's A, B and C found from
 * the leading dimensions and the transposes. Checked element by element
 * against alpha * A * B + beta * C on every usable backend (cpu, Vulkan on
 * lavapipe; CUDA / HIP where present), both ways round. */
#include "zbmd/gpu.h"
#include "tap.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define BIG 1100000   /* > 65535 * 16 = 1,048,560: two blocks */
#define PER_BACKEND 4

extern int gpu__sgemm_block;   /* gpu/core.c */

/* m x n = BIG x 2 (op(A) = A^T stored k x m) or 2 x BIG (op(B) = B^T
 * stored n x k); k = 1. Returns mismatches or a negative error. */
static long run(struct gpu_ctx *ctx, bool tall)
{
	int m = tall ? BIG : 2, n = tall ? 2 : BIG, k = 1;
	bool ta = tall, tb = !tall;
	int lda = ta ? k : m, ldb = tb ? n : k, ldc = m;
	size_t na = (size_t)m, nb = (size_t)n, nc = (size_t)m * (size_t)n;
	float *ha = malloc(na * 4), *hb = malloc(nb * 4), *hc = malloc(nc * 4);
	float *got = malloc(nc * 4);
	gpu_ptr_t da = 0, db = 0, dc = 0;
	long bad = -ENOMEM;

	if (!ha || !hb || !hc || !got)
		goto out;
	for (size_t i = 0; i < na; i++)
		ha[i] = (float)(i % 1000) * 0.25f;
	for (size_t j = 0; j < nb; j++)
		hb[j] = (float)(j % 7) + 1.0f;
	for (size_t i = 0; i < nc; i++)
		hc[i] = (float)(i % 13);
	int rc = gpu_alloc(ctx, na * 4, &da);
	if (!rc) rc = gpu_alloc(ctx, nb * 4, &db);
	if (!rc) rc = gpu_alloc(ctx, nc * 4, &dc);
	if (!rc) rc = gpu_memcpy_h2d(ctx, NULL, da, ha, na * 4);
	if (!rc) rc = gpu_memcpy_h2d(ctx, NULL, db, hb, nb * 4);
	if (!rc) rc = gpu_memcpy_h2d(ctx, NULL, dc, hc, nc * 4);
	if (!rc) rc = gpu_sgemm(ctx, NULL, ta, tb, m, n, k, 2.0f, da, lda, db, ldb,
				0.5f, dc, ldc);
	if (!rc) rc = gpu_memcpy_d2h(ctx, NULL, got, dc, nc * 4);
	if (!rc) rc = gpu_stream_sync(ctx, NULL);
	if (rc) {
		bad = rc;
		goto out;
	}
	bad = 0;
	for (int j = 0; j < n; j++)
		for (int i = 0; i < m; i++) {
			/* k = 1: A's element i (either layout: one row / column),
			 * B's element j */
			size_t ci = (size_t)i + (size_t)j * (size_t)ldc;
			float want = 2.0f * ha[i] * hb[j] + 0.5f * hc[ci];
			if (fabsf(got[ci] - want) > 1e-3f * (1.0f + fabsf(want)))
				bad++;
		}
out:
	if (dc) gpu_free(ctx, dc);
	if (db) gpu_free(ctx, db);
	if (da) gpu_free(ctx, da);
	free(ha);
	free(hb);
	free(hc);
	free(got);
	return bad;
}

/* m = 23, n = 19, k = 5 with blocks of 7: against a plain triple loop. */
static int small_blocks(struct gpu_ctx *ctx, bool ta, bool tb, int *rc_out)
{
	enum { M = 23, N = 19, K = 5, LDA = 31, LDB = 29, LDC = 27 };
	static float a[LDA * 31], b[LDB * 29], c[LDC * N], want[LDC * N], got[LDC * N];
	gpu_ptr_t da = 0, db = 0, dc = 0;
	int bad = 0;

	for (int i = 0; i < LDA * 31; i++)
		a[i] = (float)((i * 7) % 11) - 5.0f;
	for (int i = 0; i < LDB * 29; i++)
		b[i] = (float)((i * 5) % 9) - 4.0f;
	for (int i = 0; i < LDC * N; i++)
		c[i] = want[i] = (float)(i % 17);
	for (int j = 0; j < N; j++)
		for (int i = 0; i < M; i++) {
			float acc = 0;
			for (int p = 0; p < K; p++)
				acc += (ta ? a[p + i * LDA] : a[i + p * LDA]) *
				       (tb ? b[j + p * LDB] : b[p + j * LDB]);
			want[i + j * LDC] = 1.5f * acc + 0.25f * c[i + j * LDC];
		}
	int rc = gpu_alloc(ctx, sizeof(a), &da);
	if (!rc) rc = gpu_alloc(ctx, sizeof(b), &db);
	if (!rc) rc = gpu_alloc(ctx, sizeof(c), &dc);
	if (!rc) rc = gpu_memcpy_h2d(ctx, NULL, da, a, sizeof(a));
	if (!rc) rc = gpu_memcpy_h2d(ctx, NULL, db, b, sizeof(b));
	if (!rc) rc = gpu_memcpy_h2d(ctx, NULL, dc, c, sizeof(c));
	int saved = gpu__sgemm_block;
	gpu__sgemm_block = 7;
	if (!rc) rc = gpu_sgemm(ctx, NULL, ta, tb, M, N, K, 1.5f, da, LDA, db, LDB,
				0.25f, dc, LDC);
	gpu__sgemm_block = saved;
	if (!rc) rc = gpu_memcpy_d2h(ctx, NULL, got, dc, sizeof(got));
	if (!rc) rc = gpu_stream_sync(ctx, NULL);
	for (int i = 0; i < LDC * N && !rc; i++)   /* padding rows untouched too */
		bad += fabsf(got[i] - want[i]) > 1e-3f * (1.0f + fabsf(want[i]));
	gpu_free(ctx, dc);
	gpu_free(ctx, db);
	gpu_free(ctx, da);
	*rc_out = rc;
	return bad;
}

int main(void)
{
	static const enum gpu_backend order[] = {GPU_CPU, GPU_VULKAN, GPU_CUDA, GPU_HIP};

	tap_plan((int)(ZB_ARRAY_LEN(order) * PER_BACKEND));
	for (size_t b = 0; b < ZB_ARRAY_LEN(order); b++) {
		const char *bn = gpu_backend_name(order[b]);
		char why[256];
		struct gpu_options o;
		struct gpu_ctx *ctx = NULL;
		if (gpu_backend_probe(order[b], why, sizeof(why)) < 0) {
			char msg[300];
			snprintf(msg, sizeof(msg), "%s unavailable: %s", bn, why);
			tap_skip(PER_BACKEND, msg);
			continue;
		}
		gpu_options_default(&o);
		o.backend = order[b];
		o.pool_bytes = 64u << 20;
		int rc = gpu_open(&o, &ctx, why, sizeof(why));
		if (!ok(rc == 0, "%s: open", bn)) {
			tap_skip(PER_BACKEND - 1, "open failed");
			continue;
		}
		long r = run(ctx, true);
		ok(r == 0, "%s: sgemm %d x 2 (A transposed) in row blocks (%ld)", bn, BIG, r);
		r = run(ctx, false);
		ok(r == 0, "%s: sgemm 2 x %d (B transposed) in column blocks (%ld)", bn, BIG, r);
		/* small blocks (7): every transpose, odd sizes, leading
		 * dimensions larger than the matrices */
		{
			int bad = 0, rc2 = 0;
			for (int t = 0; t < 4 && !rc2; t++)
				bad += small_blocks(ctx, t & 1, t & 2, &rc2);
			ok(rc2 == 0 && bad == 0, "%s: sgemm in blocks of 7, every transpose "
			   "(rc %d, %d wrong)", bn, rc2, bad);
		}
		gpu_close(ctx);
	}
	return tap_done();
}
