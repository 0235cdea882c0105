/* The device memory pool on the cpu backend (real memory): size-class
 * slabs, best fit, coalescing, growth limits, bookkeeping exhaustion, bad
 * frees, and a random stress run that checks blocks never overlap. Also the
 * cpu backend's BLAS threads (gpu_options.cpu_threads). */
#include "zbmd/gpu.h"
#include "tap.h"

int openblas_get_num_threads(void);

static struct gpu_ctx *open_cpu(size_t reserve, size_t max)
{
	struct gpu_options o;
	struct gpu_ctx *ctx = NULL;
	char why[256];
	gpu_options_default(&o);
	o.backend = GPU_CPU;
	o.pool_bytes = reserve;
	o.pool_max_bytes = max;
	if (gpu_open(&o, &ctx, why, sizeof(why)) < 0)
		tap_diag("open: %s", why);
	return ctx;
}

static struct gpu_pool_stats stats(struct gpu_ctx *ctx)
{
	struct gpu_pool_stats st;
	gpu_pool_stats(ctx, &st);
	return st;
}

#define MIB ((size_t)1 << 20)
#define NSTRESS 512

int main(void)
{
	tap_plan(22);
	struct gpu_ctx *ctx = open_cpu(8 * MIB, 0);
	ok(ctx != NULL, "cpu context with an 8 MiB pool");
	if (!ctx)
		return tap_done();

	/* slabs */
	gpu_ptr_t s1, s2, s3, s4;
	ok(gpu_alloc(ctx, 100, &s1) == 0 && gpu_alloc(ctx, 200, &s2) == 0 &&
	   s2 == s1 + 256 && stats(ctx).slabs == 1,
	   "100 B and 200 B come from one 256 B-class slab, adjacent");
	ok(gpu_alloc(ctx, 300, &s3) == 0 && gpu_alloc(ctx, 512, &s4) == 0 &&
	   s4 == s3 + 512 && stats(ctx).slabs == 2,
	   "300 B rounds to the 512 B class in a second slab");
	ok(s1 % 256 == 0 && s3 % 256 == 0, "small blocks are 256-byte aligned");
	is_int(gpu_free(ctx, s1 + 16), -EINVAL, "interior pointer of a small block rejected");
	ok(gpu_free(ctx, s1) == 0 && gpu_free(ctx, s1) == -EINVAL, "double free rejected");
	gpu_free(ctx, s2);
	gpu_free(ctx, s3);
	gpu_free(ctx, s4);
	ok(stats(ctx).slabs == 0 && stats(ctx).free_ranges == 1,
	   "empty slabs return to the large allocator and coalesce");

	/* best fit */
	gpu_ptr_t x1, sep1, x2, sep2, y1, y2;
	gpu_alloc(ctx, 2 * MIB, &x1);
	gpu_alloc(ctx, 128 << 10, &sep1);
	gpu_alloc(ctx, 1 * MIB, &x2);
	gpu_alloc(ctx, 128 << 10, &sep2);
	gpu_free(ctx, x1);
	gpu_free(ctx, x2);
	ok(gpu_alloc(ctx, 1 * MIB, &y1) == 0 && y1 == x2,
	   "1 MiB goes to the 1 MiB hole, not the 2 MiB one (best fit)");
	ok(gpu_alloc(ctx, MIB + MIB / 2, &y2) == 0 && y2 == x1,
	   "1.5 MiB goes to the 2 MiB hole");
	is_int(gpu_free(ctx, y2 + 256), -EINVAL, "interior pointer of a large block rejected");
	gpu_free(ctx, y1);
	gpu_free(ctx, y2);
	gpu_free(ctx, sep1);
	gpu_free(ctx, sep2);
	struct gpu_pool_stats st = stats(ctx);
	ok(st.free_ranges == 1 && st.largest_free == 8 * MIB && st.used_bytes == 0 &&
	   st.live_allocs == 0, "everything freed: one 8 MiB range again");

	gpu_ptr_t big;
	is_int(gpu_alloc(ctx, 8 * MIB + 1, &big), -ENOMEM, "more than the pool is -ENOMEM");
	is_int(gpu_alloc(ctx, 0, &big), -EINVAL, "zero bytes is -EINVAL");
	gpu_close(ctx);

	/* growth up to pool_max_bytes */
	ctx = open_cpu(4 * MIB, 12 * MIB);
	gpu_ptr_t g1, g2, g3;
	ok(ctx && gpu_alloc(ctx, 3 * MIB, &g1) == 0 && gpu_alloc(ctx, 3 * MIB, &g2) == 0 &&
	   stats(ctx).chunks == 2, "the pool grows by a chunk when allowed");
	ok(ctx && gpu_alloc(ctx, 9 * MIB, &g3) == -ENOMEM && stats(ctx).failed == 1,
	   "growth stops at pool_max_bytes (-ENOMEM)");
	if (ctx) {
		gpu_free(ctx, g1);
		gpu_free(ctx, g2);
		st = stats(ctx);
		ok(st.free_ranges == st.chunks && st.live_allocs == 0,
		   "chunks coalesce back independently");
		gpu_close(ctx);
	} else {
		ok(0, "chunks coalesce back independently (no context)");
	}

	/* bookkeeping exhaustion is -ENOMEM, never an abort (virtual memory
	 * only: the cpu backend's pages are not touched) */
	ctx = open_cpu(320 * MIB, 0);
	static gpu_ptr_t many[8192];
	int n = 0, rc = 0;
	while (ctx && n < 8192 && (rc = gpu_alloc(ctx, 72 << 10, &many[n])) == 0)
		n++;
	ok(ctx && rc == -ENOMEM && n > 4000 && n < 4096,
	   "range table full after %d blocks: -ENOMEM", n);
	while (n > 0)
		gpu_free(ctx, many[--n]);
	gpu_close(ctx);

	/* random stress: blocks never overlap, always aligned */
	ctx = open_cpu(64 * MIB, 0);
	static gpu_ptr_t ptr[NSTRESS];
	static size_t len[NSTRESS];
	uint64_t r = 12345;
	int bad = 0;
	for (int it = 0; ctx && it < 20000; it++) {
		r = r * 6364136223846793005ull + 1442695040888963407ull;
		int i = (int)((r >> 33) % NSTRESS);
		if (ptr[i]) {
			bad += gpu_free(ctx, ptr[i]) != 0;
			ptr[i] = 0;
			continue;
		}
		size_t sz = (r >> 40) % 4 ? (size_t)((r >> 20) % 70000) + 1
					  : (size_t)((r >> 20) % (600 << 10)) + 1;
		if (gpu_alloc(ctx, sz, &ptr[i]) != 0) {
			ptr[i] = 0;
			continue;
		}
		len[i] = sz;
		bad += ptr[i] % 256 != 0;
		for (int j = 0; j < NSTRESS; j++)
			if (j != i && ptr[j] && ptr[i] < ptr[j] + len[j] && ptr[j] < ptr[i] + sz)
				bad++;
		memset((void *)(uintptr_t)ptr[i], 0x5a, sz); /* real memory: ASan checks it */
	}
	ok(ctx && bad == 0, "20000 random alloc/free: no overlap, aligned, frees succeed (%d bad)", bad);
	for (int i = 0; ctx && i < NSTRESS; i++)
		if (ptr[i])
			gpu_free(ctx, ptr[i]);
	if (ctx) {
		st = stats(ctx);
		ok(st.live_allocs == 0 && st.used_bytes == 0 && st.slabs == 0 &&
		   st.free_ranges == 1 && st.largest_free == 64 * MIB,
		   "after the stress run the pool is whole again (no leaks)");
	} else {
		ok(0, "after the stress run the pool is whole again (no context)");
	}
	gpu_close(ctx);

	/* [gpu] cpu_threads: OpenBLAS's threads for the process (two opens,
	 * so that a default equal to one of them cannot pass both) */
	int got[2] = {0, 0};
	for (int t = 1; t <= 2; t++) {
		struct gpu_options o;
		char why[256];
		gpu_options_default(&o);
		o.backend = GPU_CPU;
		o.pool_bytes = MIB;
		o.cpu_threads = t;
		if (gpu_open(&o, &ctx, why, sizeof(why)) == 0) {
			got[t - 1] = openblas_get_num_threads();
			gpu_close(ctx);
		}
	}
	ok(got[0] == 1 && got[1] == 2, "cpu_threads 1 then 2: OpenBLAS runs %d, then %d thread(s)",
	   got[0], got[1]);
	struct gpu_options o;
	char why[256];
	gpu_options_default(&o);
	o.backend = GPU_CPU;
	o.cpu_threads = -1;
	ctx = NULL;
	is_int(gpu_open(&o, &ctx, why, sizeof(why)), -EINVAL, "cpu_threads -1 refused");

	/* a reservation near SIZE_MAX: rounding it up to 256 bytes wrapped to
	 * 0, and the open succeeded with an empty pool */
	static const size_t huge[] = {SIZE_MAX, SIZE_MAX - 100, SIZE_MAX - 255,
				      ((size_t)1 << 62) + 1};
	int huge_bad = 0;
	o.cpu_threads = 0;
	for (size_t i = 0; i < ZB_ARRAY_LEN(huge); i++) {
		o.pool_bytes = huge[i];
		ctx = NULL;
		int rc = gpu_open(&o, &ctx, why, sizeof(why));
		if (rc != -ENOMEM || ctx) {
			tap_diag("pool_bytes %zu: rc %d", huge[i], rc);
			huge_bad++;
			if (ctx)
				gpu_close(ctx);
		}
	}
	is_int(huge_bad, 0, "pool_bytes near SIZE_MAX: -ENOMEM, no context");
	return tap_done();
}
