/* One conformance suite, run against every backend: each result checked
 * against the plain C reference (ref.h) with per-dtype tolerances.  A
 * backend that is not usable here is a TAP skip carrying the reason. */
#include "zbmd/gpu.h"
#include "tap.h"
#include "ref.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PER_BACKEND (2 + ZB_DTYPE_COUNT * ZB_REDOP_COUNT + ZB_DTYPE_COUNT + 21)
#define MAXN 70001
#define MAXB (MAXN * 8 + 64)

static unsigned char *h_dst, *h_src, *h_ref, *h_out;

/* reduce of every size/offset for one (dtype, op); returns mismatches or
 * the (negative) error of the first failing call. */
static long run_reduce(struct gpu_ctx *ctx, gpu_ptr_t dd, gpu_ptr_t ds,
		       enum zb_dtype t, enum zb_redop op)
{
	static const size_t sizes[] = {1, 2, 3, 17, 255, 256, 257, 1000, 4099, MAXN - 3};
	static const size_t offs[] = {0, 1, 3};
	size_t es = zb_dtype_size(t);
	long bad = 0;

	for (size_t si = 0; si < ZB_ARRAY_LEN(sizes); si++) {
		size_t n = sizes[si], off = offs[si % 3] * es;
		/* even rows: dst and src equally aligned (the cuda/hip 16-bit
		 * kernels' vector path: head, 16-byte vectors, tail); odd rows:
		 * differently aligned (element by element) */
		size_t soff = si % 2 ? 3 * es - off : off;
		ref_fill(h_dst, n, t, op);
		ref_fill(h_src, n, t, op);
		memcpy(h_ref, h_dst, n * es);
		ref_reduce(h_ref, h_src, n, t, op);
		int rc = gpu_memcpy_h2d(ctx, NULL, dd + off, h_dst, n * es);
		if (!rc)
			rc = gpu_memcpy_h2d(ctx, NULL, ds + soff, h_src, n * es);
		if (!rc)
			rc = gpu_reduce(ctx, NULL, dd + off, ds + soff, n, t, op);
		if (!rc)
			rc = gpu_memcpy_d2h(ctx, NULL, h_out, dd + off, n * es);
		if (!rc)
			rc = gpu_stream_sync(ctx, NULL);
		if (rc)
			return rc;
		size_t m = ref_mismatches(h_out, h_ref, n, t);
		if (m)
			tap_diag("  n=%zu off=%zu/%zu: %zu mismatches", n,
				 off / es, soff / es, m);
		bad += (long)m;
	}
	return bad;
}

static long run_scale(struct gpu_ctx *ctx, gpu_ptr_t d, enum zb_dtype t)
{
	size_t n = 4099, es = zb_dtype_size(t);
	ref_fill(h_ref, n, t, ZB_SUM);
	int rc = gpu_memcpy_h2d(ctx, NULL, d + es, h_ref, n * es);
	if (!rc)
		rc = gpu_scale(ctx, NULL, d + es, n, t, 1.0 / 3);
	if (!rc)
		rc = gpu_memcpy_d2h(ctx, NULL, h_out, d + es, n * es);
	if (!rc)
		rc = gpu_stream_sync(ctx, NULL);
	if (rc)
		return rc;
	ref_scale(h_ref, n, t, 1.0 / 3);
	return (long)ref_mismatches(h_out, h_ref, n, t);
}

/* Column-major reference sgemm in double. */
static void ref_sgemm(bool ta, bool tb, int m, int n, int k, float alpha,
		      const float *a, int lda, const float *b, int ldb,
		      float beta, float *c, int ldc, double *bound)
{
	for (int j = 0; j < n; j++)
		for (int i = 0; i < m; i++) {
			double acc = 0, mag = 0;
			for (int p = 0; p < k; p++) {
				double x = ta ? a[p + i * lda] : a[i + p * lda];
				double y = tb ? b[j + p * ldb] : b[p + j * ldb];
				acc += x * y;
				mag += fabs(x * y);
			}
			double r = alpha * acc + (beta != 0 ? beta * c[i + j * ldc] : 0);
			c[i + j * ldc] = (float)r;
			bound[i + j * ldc] = 1e-5 * (fabs(alpha) * mag + fabs(beta * c[i + j * ldc])) + 1e-6;
		}
}

static long run_sgemm(struct gpu_ctx *ctx, bool ta, bool tb, int m, int n, int k)
{
	int lda = (ta ? k : m) + 3, ldb = (tb ? n : k) + 1, ldc = m + 2;
	size_t na = (size_t)lda * (ta ? m : k), nb = (size_t)ldb * (tb ? k : n);
	size_t nc = (size_t)ldc * n;
	float *a = malloc(na * 4), *b = malloc(nb * 4), *c = malloc(nc * 4);
	float *out = malloc(nc * 4);
	double *bound = malloc(nc * sizeof(double));
	gpu_ptr_t da = 0, db = 0, dc = 0;
	long bad = -ENOMEM;

	if (!a || !b || !c || !out || !bound)
		goto out;
	for (size_t i = 0; i < na; i++) a[i] = ref_frand() / 8;
	for (size_t i = 0; i < nb; i++) b[i] = ref_frand() / 8;
	for (size_t i = 0; i < nc; i++) c[i] = ref_frand();
	int rc = gpu_alloc(ctx, na * 4, &da);
	if (!rc) rc = gpu_alloc(ctx, nb * 4, &db);
	if (!rc) rc = gpu_alloc(ctx, nc * 4, &dc);
	if (!rc) rc = gpu_memcpy_h2d(ctx, NULL, da, a, na * 4);
	if (!rc) rc = gpu_memcpy_h2d(ctx, NULL, db, b, nb * 4);
	if (!rc) rc = gpu_memcpy_h2d(ctx, NULL, dc, c, nc * 4);
	if (!rc) rc = gpu_sgemm(ctx, NULL, ta, tb, m, n, k, 1.5f, da, lda, db, ldb, 0.5f, dc, ldc);
	if (!rc) rc = gpu_memcpy_d2h(ctx, NULL, out, dc, nc * 4);
	if (!rc) rc = gpu_stream_sync(ctx, NULL);
	bad = rc;
	if (rc)
		goto out;
	ref_sgemm(ta, tb, m, n, k, 1.5f, a, lda, b, ldb, 0.5f, c, ldc, bound);
	for (int j = 0; j < n; j++)
		for (int i = 0; i < m; i++)
			bad += fabs((double)out[i + j * ldc] - c[i + j * ldc]) > bound[i + j * ldc];
	for (int j = 0; j < n; j++) /* padding rows untouched */
		for (int i = m; i < ldc; i++)
			bad += out[i + j * ldc] != c[i + j * ldc];
out:
	if (da) gpu_free(ctx, da);
	if (db) gpu_free(ctx, db);
	if (dc) gpu_free(ctx, dc);
	free(a); free(b); free(c); free(out); free(bound);
	return bad;
}

static void suite(enum gpu_backend be)
{
	char why[256];
	const char *bn = gpu_backend_name(be);
	struct gpu_options o;
	struct gpu_ctx *ctx = NULL;

	if (gpu_backend_probe(be, why, sizeof(why)) < 0) {
		char msg[300];
		snprintf(msg, sizeof(msg), "%s unavailable: %s", bn, why);
		tap_skip(PER_BACKEND, msg);
		return;
	}
	gpu_options_default(&o);
	o.backend = be;
	o.pool_bytes = 16u << 20;
	int rc = gpu_open(&o, &ctx, why, sizeof(why));
	if (!ok(rc == 0, "%s: open (%s)", bn, rc ? why : gpu_ctx_device(ctx)->name)) {
		tap_skip(PER_BACKEND - 1, "open failed");
		return;
	}
	const struct gpu_device_info *di = gpu_ctx_device(ctx);
	gpu_ptr_t dd, ds;
	ok(gpu_alloc(ctx, MAXB, &dd) == 0 && gpu_alloc(ctx, MAXB, &ds) == 0,
	   "%s: alloc two %d-byte buffers", bn, MAXB);

	for (int t = 0; t < ZB_DTYPE_COUNT; t++)
		for (int op = 0; op < ZB_REDOP_COUNT; op++) {
			long r = run_reduce(ctx, dd, ds, t, op);
			/* (the cpu backend reduces every dtype: there it is a failure) */
			if (r == ZB_ERR_UNSUPPORTED && be != GPU_CPU) {
				char msg[300];
				snprintf(msg, sizeof(msg), "%s: reduce %s unsupported by %s (error code returned)",
					 bn, zb_dtype_name(t), di->name);
				tap_skip(1, msg);
				continue;
			}
			ok(r == 0, "%s: reduce %s %s matches the reference (%ld)", bn,
			   zb_dtype_name(t), zb_redop_name(op), r);
		}
	for (int t = 0; t < ZB_DTYPE_COUNT; t++) {
		long r = run_scale(ctx, dd, t);
		if (r == ZB_ERR_UNSUPPORTED && be != GPU_CPU) {
			tap_skip(1, "scale: dtype unsupported by the device (error code returned)");
			continue;
		}
		ok(r == 0, "%s: scale %s by 1/3 matches the reference (%ld)", bn,
		   zb_dtype_name(t), r);
	}

	{
		/* 16-bit sum/prod of NaN pairs: the host's bits (dst's NaN,
		 * else src's), not the driver's or the device's choice */
		static uint16_t nd[REF_NAN_PAIRS], ns[REF_NAN_PAIRS],
			want[REF_NAN_PAIRS], got[REF_NAN_PAIRS];
		const size_t nb = sizeof(nd);
		long bad = 0;
		for (int t = ZB_F16; t <= ZB_BF16; t++)
			for (int op = ZB_SUM; op <= ZB_PROD; op++) {
				ref_nan_pairs(nd, ns, want, t);
				rc = gpu_memcpy_h2d(ctx, NULL, dd, nd, nb);
				if (!rc) rc = gpu_memcpy_h2d(ctx, NULL, ds, ns, nb);
				if (!rc) rc = gpu_reduce(ctx, NULL, dd, ds, REF_NAN_PAIRS, t, op);
				if (!rc) rc = gpu_memcpy_d2h(ctx, NULL, got, dd, nb);
				if (!rc) rc = gpu_stream_sync(ctx, NULL);
				if (rc == ZB_ERR_UNSUPPORTED)
					continue;
				bad += rc ? 1 : ref_nan_mismatches(got, want, nd, ns);
			}
		ok(bad == 0, "%s: f16/bf16 sum/prod of NaN pairs keep dst's NaN, else src's (%ld)",
		   bn, bad);
	}

	ok(run_sgemm(ctx, false, false, 1, 1, 1) == 0 &&
	   run_sgemm(ctx, false, false, 33, 17, 9) == 0, "%s: sgemm NN small/odd", bn);
	ok(run_sgemm(ctx, true, false, 40, 31, 70) == 0 &&
	   run_sgemm(ctx, false, true, 31, 40, 70) == 0 &&
	   run_sgemm(ctx, true, true, 64, 64, 64) == 0, "%s: sgemm TN/NT/TT", bn);

	/* avg: three ranks summed, then scaled by 1/3 */
	{
		float in[3][101], want[101], got[101];
		for (int r = 0; r < 3; r++)
			for (int i = 0; i < 101; i++)
				in[r][i] = ref_frand();
		for (int i = 0; i < 101; i++)
			want[i] = ((in[0][i] + in[1][i]) + in[2][i]) * (float)(1.0 / 3);
		rc = gpu_memcpy_h2d(ctx, NULL, dd, in[0], sizeof(in[0]));
		for (int r = 1; r < 3 && !rc; r++) {
			rc = gpu_memcpy_h2d(ctx, NULL, ds, in[r], sizeof(in[r]));
			if (!rc) rc = gpu_reduce(ctx, NULL, dd, ds, 101, ZB_F32, ZB_AVG);
		}
		if (!rc) rc = gpu_scale(ctx, NULL, dd, 101, ZB_F32, 1.0 / 3);
		if (!rc) rc = gpu_memcpy_d2h(ctx, NULL, got, dd, sizeof(got));
		if (!rc) rc = gpu_stream_sync(ctx, NULL);
		ok(rc == 0 && ref_mismatches(got, want, 101, ZB_F32) == 0,
		   "%s: avg over 3 ranks = sum then scale", bn);
	}

	/* f16 rounding edges: a product that ties between the largest
	 * subnormal and the smallest normal (-> 0x0400, even), overflow to
	 * inf, a subnormal sum, NaN canonicalised */
	{
		uint16_t a[4] = {0x3bff, 0x7bff, 0x03ff, 0x7e01};
		uint16_t b[4] = {0x0400, 0x4000, 0x0001, 0x3c00};
		uint16_t want_prod[4] = {0x0400, 0x7c00, 0x0000, 0x7e00};
		uint16_t got[4];
		rc = ZB_ERR_UNSUPPORTED;
		if (di->fp16) {
			rc = gpu_memcpy_h2d(ctx, NULL, dd, a, sizeof(a));
			if (!rc) rc = gpu_memcpy_h2d(ctx, NULL, ds, b, sizeof(b));
			if (!rc) rc = gpu_reduce(ctx, NULL, dd, ds, 4, ZB_F16, ZB_PROD);
			if (!rc) rc = gpu_memcpy_d2h(ctx, NULL, got, dd, sizeof(got));
			if (!rc) rc = gpu_stream_sync(ctx, NULL);
		}
		if (rc == ZB_ERR_UNSUPPORTED && be != GPU_CPU)
			tap_skip(1, "f16 unsupported by the device");
		else if (!ok(rc == 0 && memcmp(got, want_prod, 6) == 0 &&
			     (got[3] & 0x7fff) > 0x7c00,
			     "%s: f16 rounding edges (tie to smallest normal, overflow, NaN)", bn))
			tap_diag("  got %04x %04x %04x %04x", got[0], got[1], got[2], got[3]);
	}

	/* memset / d2d at odd byte offsets and lengths */
	{
		unsigned char pat[1000], got[1000];
		for (int i = 0; i < 1000; i++)
			pat[i] = (unsigned char)(i * 7 + 1);
		rc = gpu_memcpy_h2d(ctx, NULL, dd, pat, 1000);
		if (!rc) rc = gpu_memset(ctx, NULL, dd + 3, 0xab, 5);
		if (!rc) rc = gpu_memset(ctx, NULL, dd + 100, 0x5c, 400);
		if (!rc) rc = gpu_memcpy_d2d(ctx, NULL, ds + 1, dd, 999);
		if (!rc) rc = gpu_memcpy_d2h(ctx, NULL, got, ds + 1, 999);
		if (!rc) rc = gpu_stream_sync(ctx, NULL);
		memset(pat + 3, 0xab, 5);
		memset(pat + 100, 0x5c, 400);
		ok(rc == 0 && memcmp(got, pat, 999) == 0,
		   "%s: memset + d2d at odd offsets/lengths", bn);
		/* onto itself: a no-op (a Vulkan copy's regions must not
		 * overlap: test_vk_validation.sh runs this under the layer) */
		rc = gpu_memcpy_d2d(ctx, NULL, ds + 1, ds + 1, 999);
		if (!rc) rc = gpu_memcpy_d2h(ctx, NULL, got, ds + 1, 999);
		if (!rc) rc = gpu_stream_sync(ctx, NULL);
		ok(rc == 0 && memcmp(got, pat, 999) == 0, "%s: d2d onto itself keeps the data", bn);
	}

	/* a second stream orders its own work */
	{
		struct gpu_stream *s2 = NULL;
		int32_t a[64], b[64], got[64];
		for (int i = 0; i < 64; i++)
			a[i] = i, b[i] = 1000 * i;
		rc = gpu_stream_create(ctx, &s2);
		if (!rc) rc = gpu_memcpy_h2d(ctx, s2, dd, a, sizeof(a));
		if (!rc) rc = gpu_memcpy_h2d(ctx, s2, ds, b, sizeof(b));
		for (int r = 0; r < 4 && !rc; r++)
			rc = gpu_reduce(ctx, s2, dd, ds, 64, ZB_I32, ZB_SUM);
		if (!rc) rc = gpu_memcpy_d2h(ctx, s2, got, dd, sizeof(got));
		if (!rc) rc = gpu_stream_sync(ctx, s2);
		int bad = rc != 0;
		for (int i = 0; i < 64 && !rc; i++)
			bad += got[i] != i + 4000 * i;
		gpu_stream_destroy(ctx, s2);
		ok(bad == 0, "%s: four reductions in order on a second stream", bn);
	}

	/* edge cases: zero length, bad ranges, misalignment, OOM */
	ok(gpu_reduce(ctx, NULL, dd, ds, 0, ZB_F32, ZB_SUM) == 0 &&
	   gpu_scale(ctx, NULL, dd, 0, ZB_F64, 2.0) == 0 &&
	   gpu_memcpy_h2d(ctx, NULL, dd, NULL, 0) == 0 &&
	   gpu_memcpy_d2d(ctx, NULL, dd, ds, 0) == 0 &&
	   gpu_memset(ctx, NULL, dd, 0, 0) == 0 &&
	   gpu_sgemm(ctx, NULL, false, false, 0, 5, 5, 1, dd, 1, ds, 5, 0, dd, 1) == 0,
	   "%s: zero-length operations are no-ops", bn);
	{
		/* k = 0: C = beta * C and A, B are not read (BLAS), so a caller
		 * may pass any pointer there, 0 included */
		float c0[6] = {1, 2, 3, 4, 5, 6}, got[6] = {0};
		int bad = 0;
		rc = gpu_memcpy_h2d(ctx, NULL, dd, c0, sizeof(c0));
		if (!rc) rc = gpu_sgemm(ctx, NULL, false, false, 2, 3, 0, 1.0f, 0, 2,
					0, 1, 0.5f, dd, 2);
		if (!rc) rc = gpu_memcpy_d2h(ctx, NULL, got, dd, sizeof(got));
		if (!rc) rc = gpu_stream_sync(ctx, NULL);
		for (int i = 0; i < 6 && !rc; i++)
			bad += got[i] != 0.5f * c0[i];
		ok(rc == 0 && bad == 0, "%s: sgemm with k = 0 scales C by beta, A and B "
		   "unused (rc %d, %d wrong)", bn, rc, bad);
	}
	ok(gpu_reduce(ctx, NULL, dd + 2, ds, 8, ZB_F32, ZB_SUM) == -EINVAL &&
	   gpu_reduce(ctx, NULL, dd, ds + 4, 8, ZB_F64, ZB_SUM) == -EINVAL,
	   "%s: misaligned reduce rejected", bn);
	ok(gpu_memcpy_h2d(ctx, NULL, 0x10, h_src, 16) == -EINVAL &&
	   gpu_reduce(ctx, NULL, dd, ds, (size_t)1 << 40, ZB_F32, ZB_SUM) == -EINVAL &&
	   gpu_memcpy_d2h(ctx, NULL, h_out, dd + (16u << 20), 8) == -EINVAL,
	   "%s: ranges outside the pool rejected", bn);
	ok(gpu_reduce(ctx, NULL, dd, dd + 4, 8, ZB_F32, ZB_SUM) == -EINVAL &&
	   gpu_reduce(ctx, NULL, dd, ds, 8, ZB_DTYPE_COUNT, ZB_SUM) == -EINVAL &&
	   gpu_reduce(ctx, NULL, dd, ds, 8, ZB_F32, ZB_REDOP_COUNT) == -EINVAL &&
	   gpu_scale(ctx, NULL, dd, 8, ZB_F32, INFINITY) == -EINVAL,
	   "%s: overlap, bad dtype/op, non-finite factor rejected", bn);
	ok(gpu_scale(ctx, NULL, dd, 8, ZB_F32, 1e300) == -EINVAL &&
	   gpu_scale(ctx, NULL, dd, 8, ZB_F16, 3.5e38) == -EINVAL &&
	   gpu_scale(ctx, NULL, dd, 8, ZB_BF16, -1e39) == -EINVAL,
	   "%s: a finite factor beyond float refused for f32/f16/bf16", bn);
	{
		gpu_ptr_t big;
		struct gpu_pool_stats st;
		rc = gpu_alloc(ctx, (size_t)1 << 40, &big);
		gpu_pool_stats(ctx, &st);
		ok(rc == -ENOMEM && st.failed >= 1, "%s: 1 TiB alloc is -ENOMEM, not an abort", bn);
	}
	{
		gpu_ptr_t blocks[64];
		int n = 0;
		while (n < 64 && gpu_alloc(ctx, 1u << 20, &blocks[n]) == 0)
			n++;
		int fail = n < 64 ? 1 : 0;
		while (n > 0)
			gpu_free(ctx, blocks[--n]);
		ok(fail, "%s: allocating past the pool returns -ENOMEM", bn);
	}
	ok(gpu_free(ctx, dd + 8) == -EINVAL && gpu_free(ctx, 12345) == -EINVAL,
	   "%s: freeing a non-allocation is -EINVAL", bn);
	{
		/* run-time compilation: compile, launch, read the effect back */
		struct gpu_kernel *k = NULL;
		char log[512] = "";
		int32_t one = 0;
		rc = gpu_kernel_compile(ctx, "extern \"C\" __global__ void k(int *p, int v) { *p = v + 1; }",
					"k", &k, log, sizeof(log));
		if (rc == 0) {
			unsigned g[3] = {1, 1, 1}, b[3] = {1, 1, 1};
			gpu_ptr_t p = dd;
			int v = 41;
			void *args[] = {&p, &v};
			rc = gpu_kernel_launch(ctx, NULL, k, g, b, args);
			if (!rc) rc = gpu_memcpy_d2h(ctx, NULL, &one, dd, sizeof(one));
			if (!rc) rc = gpu_stream_sync(ctx, NULL);
			ok(rc == 0 && one == 42, "%s: run-time compiled kernel runs (%d)", bn, one);
		} else {
			ok(rc == ZB_ERR_UNSUPPORTED, "%s: run-time compile reports unsupported (%s)",
			   bn, log);
		}
		gpu_kernel_free(ctx, k);
		char log2[512] = "";
		rc = gpu_kernel_compile(ctx, "this is not CUDA", "k", &k, log2, sizeof(log2));
		ok(rc == ZB_ERR_UNSUPPORTED || (rc == -EINVAL && log2[0] && !k),
		   "%s: a compile error is -EINVAL with the compiler log", bn);
	}
	{
		/* DMA-BUF export of an interior range (the GPUDirect RDMA
		 * registration path, rdma/mr.c): where the device offers it, a
		 * dma-buf fd for the page span and the range's offset in it;
		 * elsewhere "unsupported" and no fd */
		int fd = -1;
		uint64_t off = 1;
		gpu_ptr_t p = dd + 100;
		uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
		char link[64], target[128] = "";
		rc = gpu_dmabuf_export(ctx, p, 4096, &fd, &off);
		if (fd >= 0) {
			snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
			ssize_t n = readlink(link, target, sizeof(target) - 1);
			target[n > 0 ? n : 0] = 0;
		}
		if (di->dmabuf)
			ok(rc == 0 && fd >= 0 && off == (p & (pg - 1)) && strstr(target, "dmabuf"),
			   "%s: DMA-BUF export: fd %d (%s), offset %llu", bn, fd, target,
			   (unsigned long long)off);
		else
			ok(rc == ZB_ERR_UNSUPPORTED && fd == -1 && off == 0,
			   "%s: no DMA-BUF export: unsupported, no fd (%d)", bn, rc);
		if (fd >= 0)
			close(fd);
	}
	{
		struct gpu_pool_stats st;
		gpu_free(ctx, dd);
		gpu_free(ctx, ds);
		gpu_pool_stats(ctx, &st);
		ok(st.live_allocs == 0 && st.used_bytes == 0 && st.slabs == 0 &&
		   st.free_ranges == st.chunks, "%s: no leaks: pool back to one free range per chunk", bn);
	}
	gpu_close(ctx);
}

int main(void)
{
	static const enum gpu_backend order[] = {GPU_CPU, GPU_VULKAN, GPU_CUDA, GPU_HIP};

	h_dst = malloc(MAXB);
	h_src = malloc(MAXB);
	h_ref = malloc(MAXB);
	h_out = malloc(MAXB);
	ZB_ASSERT(h_dst && h_src && h_ref && h_out);
	tap_plan((int)ZB_ARRAY_LEN(order) * PER_BACKEND);
	for (size_t i = 0; i < ZB_ARRAY_LEN(order); i++)
		suite(order[i]);
	free(h_dst);
	free(h_src);
	free(h_ref);
	free(h_out);
	return tap_done();
}
