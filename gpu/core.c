/* The generic layer: backend registry and selection, argument checking,
 * and the public API that forwards to the chosen backend's ops table. */
#include "internal.h"

#include <pthread.h>
#include <stdarg.h>

static const struct gpu_ops *const backends[GPU_BACKEND_COUNT] = {
	[GPU_CPU] = &gpu__cpu_ops,
	[GPU_CUDA] = &gpu__cuda_ops,
	[GPU_HIP] = &gpu__hip_ops,
	[GPU_VULKAN] = &gpu__vulkan_ops,
};
static const char *const backend_names[GPU_BACKEND_COUNT] = {
	[GPU_AUTO] = "auto", [GPU_CPU] = "cpu", [GPU_CUDA] = "cuda",
	[GPU_HIP] = "hip", [GPU_VULKAN] = "vulkan",
};

int gpu__why(char *why, size_t len, int err, const char *fmt, ...)
{
	if (why && len) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(why, len, fmt, ap);
		va_end(ap);
	}
	return err;
}

const char *gpu_backend_name(enum gpu_backend b)
{
	return (unsigned)b < GPU_BACKEND_COUNT ? backend_names[b] : "?";
}

int gpu_backend_parse(const char *s, enum gpu_backend *out)
{
	ZB_ASSERT(out);
	for (int i = 0; s && i < GPU_BACKEND_COUNT; i++)
		if (strcmp(s, backend_names[i]) == 0) {
			*out = (enum gpu_backend)i;
			return 0;
		}
	return -EINVAL;
}

/* Backends that are compiled out still have an ops table (name + probe
 * that explains why); "compiled" means the probe can ever succeed. */
bool gpu_backend_compiled(enum gpu_backend b)
{
	if ((unsigned)b >= GPU_BACKEND_COUNT || b == GPU_AUTO)
		return false;
	return backends[b]->open != NULL;
}

/* Probe results are cached: probing loads libraries and is not cheap. */
static pthread_mutex_t probe_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	bool done;
	int rc;
	char why[GPU_WHY_LEN];
} probes[GPU_BACKEND_COUNT];

int gpu_backend_probe(enum gpu_backend b, char *why, size_t why_len)
{
	if ((unsigned)b >= GPU_BACKEND_COUNT || b == GPU_AUTO)
		return gpu__why(why, why_len, -EINVAL, "not a backend");
	const struct gpu_ops *ops = backends[b];
	ZB_ASSERT(ops->version == GPU_OPS_VERSION && ops->id == b);
	pthread_mutex_lock(&probe_lock);
	if (!probes[b].done) {
		probes[b].why[0] = 0;
		probes[b].rc = ops->probe(probes[b].why, sizeof(probes[b].why));
		if (probes[b].rc == 0 && !probes[b].why[0])
			snprintf(probes[b].why, sizeof(probes[b].why), "usable");
		probes[b].done = true;
	}
	int rc = probes[b].rc;
	gpu__why(why, why_len, rc, "%s", probes[b].why);
	pthread_mutex_unlock(&probe_lock);
	return rc;
}

int gpu_device_count(enum gpu_backend b)
{
	int rc = gpu_backend_probe(b, NULL, 0);
	return rc < 0 ? rc : backends[b]->device_count();
}

int gpu_device_info(enum gpu_backend b, int index, struct gpu_device_info *out)
{
	ZB_ASSERT(out);
	int n = gpu_device_count(b);
	if (n < 0)
		return n;
	if (index < 0 || index >= n)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->numa_node = -1;
	return backends[b]->device_info(index, out);
}

void gpu_options_default(struct gpu_options *o)
{
	ZB_ASSERT(o);
	memset(o, 0, sizeof(*o));
	o->backend = GPU_AUTO;
	o->pool_bytes = (size_t)64 << 20;
	o->numa_node = -1;
}

/* auto: CUDA -> HIP -> Vulkan -> CPU.  A software Vulkan device (lavapipe)
 * is skipped: it runs on the same CPU cores, slower than the cpu backend. */
static enum gpu_backend pick_auto(int device)
{
	static const enum gpu_backend order[] = {GPU_CUDA, GPU_HIP, GPU_VULKAN};
	for (size_t i = 0; i < ZB_ARRAY_LEN(order); i++) {
		struct gpu_device_info di;
		if (gpu_device_info(order[i], device, &di) == 0 && !di.software)
			return order[i];
	}
	return GPU_CPU;
}

int gpu_open(const struct gpu_options *o, struct gpu_ctx **out, char *why,
	     size_t why_len)
{
	struct gpu_options opt;
	int rc;

	ZB_ASSERT(out);
	*out = NULL;
	if (o)
		opt = *o;
	else
		gpu_options_default(&opt);
	if ((unsigned)opt.backend >= GPU_BACKEND_COUNT || opt.device < 0)
		return gpu__why(why, why_len, -EINVAL, "bad backend or device");
	if (opt.backend == GPU_AUTO)
		opt.backend = pick_auto(opt.device);
	if (!opt.pool_bytes)
		opt.pool_bytes = (size_t)64 << 20;
	const struct gpu_ops *ops = backends[opt.backend];
	char pwhy[GPU_WHY_LEN];
	rc = gpu_backend_probe(opt.backend, pwhy, sizeof(pwhy));
	if (rc < 0)
		return gpu__why(why, why_len, rc, "%s: %s", ops->name, pwhy);
	struct gpu_ctx *ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return gpu__why(why, why_len, -ENOMEM, "out of host memory");
	ctx->ops = ops;
	ctx->opt = opt;
	rc = gpu_device_info(opt.backend, opt.device, &ctx->dev);
	if (rc < 0) {
		gpu__why(why, why_len, rc, "%s: no device %d", ops->name,
			 opt.device);
		goto err_free;
	}
	rc = ops->open(ctx, opt.device);
	if (rc < 0) {
		gpu__why(why, why_len, rc, "%s: opening device %d: %s%s%s",
			 ops->name, opt.device, zb_strerror(rc),
			 ctx->why[0] ? ": " : "", ctx->why);
		goto err_free;
	}
	ctx->default_stream.ctx = ctx;
	ctx->default_stream.is_default = true;
	rc = ops->stream_create(ctx, &ctx->default_stream);
	if (rc < 0) {
		gpu__why(why, why_len, rc, "%s: default stream: %s", ops->name,
			 zb_strerror(rc));
		goto err_close;
	}
	rc = gpu__pool_init(ctx, opt.pool_bytes, opt.pool_max_bytes);
	if (rc < 0) {
		gpu__why(why, why_len, rc, "%s: reserving %zu bytes: %s",
			 ops->name, opt.pool_bytes, zb_strerror(rc));
		goto err_stream;
	}
	*out = ctx;
	return 0;

err_stream:
	ops->stream_destroy(ctx, &ctx->default_stream);
err_close:
	ops->close(ctx);
err_free:
	free(ctx);
	return rc;
}

void gpu_close(struct gpu_ctx *ctx)
{
	if (!ctx)
		return;
	ZB_ASSERT(ctx->ops);
	ctx->ops->stream_sync(ctx, &ctx->default_stream);
	ctx->ops->stream_destroy(ctx, &ctx->default_stream);
	gpu__pool_fini(ctx);
	ctx->ops->close(ctx);
	free(ctx);
}

enum gpu_backend gpu_ctx_backend(const struct gpu_ctx *ctx)
{
	ZB_ASSERT(ctx);
	return ctx->ops->id;
}

const struct gpu_device_info *gpu_ctx_device(const struct gpu_ctx *ctx)
{
	ZB_ASSERT(ctx);
	return &ctx->dev;
}

int gpu_alloc(struct gpu_ctx *ctx, size_t bytes, gpu_ptr_t *out)
{
	ZB_ASSERT(ctx && out);
	return gpu__pool_alloc(ctx, bytes, out);
}

int gpu_free(struct gpu_ctx *ctx, gpu_ptr_t p)
{
	ZB_ASSERT(ctx);
	return gpu__pool_free(ctx, p);
}

int gpu_host_alloc(struct gpu_ctx *ctx, size_t bytes, void **out)
{
	ZB_ASSERT(ctx && out);
	if (!bytes)
		return -EINVAL;
	if (ctx->ops->host_alloc)
		return ctx->ops->host_alloc(ctx, bytes, out);
	*out = aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
	return *out ? 0 : -ENOMEM;
}

void gpu_host_free(struct gpu_ctx *ctx, void *p)
{
	ZB_ASSERT(ctx);
	if (!p)
		return;
	if (ctx->ops->host_free)
		ctx->ops->host_free(ctx, p);
	else
		free(p);
}

/* ---- streams ---- */

int gpu_stream_create(struct gpu_ctx *ctx, struct gpu_stream **out)
{
	ZB_ASSERT(ctx && out);
	struct gpu_stream *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->ctx = ctx;
	int rc = ctx->ops->stream_create(ctx, s);
	if (rc < 0) {
		free(s);
		return rc;
	}
	*out = s;
	return 0;
}

void gpu_stream_destroy(struct gpu_ctx *ctx, struct gpu_stream *s)
{
	ZB_ASSERT(ctx);
	if (!s || s->is_default)
		return;
	ZB_ASSERT(s->ctx == ctx);
	ctx->ops->stream_sync(ctx, s);
	ctx->ops->stream_destroy(ctx, s);
	free(s);
}

static struct gpu_stream *stream_of(struct gpu_ctx *ctx, struct gpu_stream *s)
{
	ZB_ASSERT(ctx);
	if (!s)
		return &ctx->default_stream;
	ZB_ASSERT(s->ctx == ctx);
	return s;
}

int gpu_stream_sync(struct gpu_ctx *ctx, struct gpu_stream *s)
{
	return ctx->ops->stream_sync(ctx, stream_of(ctx, s));
}

/* ---- copies and kernels ---- */

#define RANGE_OK(ctx, p, len) (gpu__pool_resolve((ctx), (p), (len), NULL, NULL) == 0)

int gpu_memcpy_h2d(struct gpu_ctx *ctx, struct gpu_stream *s, gpu_ptr_t dst,
		   const void *src, size_t bytes)
{
	s = stream_of(ctx, s);
	if (!bytes)
		return 0;
	if (!src || !RANGE_OK(ctx, dst, bytes))
		return -EINVAL;
	return ctx->ops->h2d(ctx, s, dst, src, bytes);
}

int gpu_memcpy_d2h(struct gpu_ctx *ctx, struct gpu_stream *s, void *dst,
		   gpu_ptr_t src, size_t bytes)
{
	s = stream_of(ctx, s);
	if (!bytes)
		return 0;
	if (!dst || !RANGE_OK(ctx, src, bytes))
		return -EINVAL;
	return ctx->ops->d2h(ctx, s, dst, src, bytes);
}

int gpu_memcpy_d2d(struct gpu_ctx *ctx, struct gpu_stream *s, gpu_ptr_t dst,
		   gpu_ptr_t src, size_t bytes)
{
	s = stream_of(ctx, s);
	if (!bytes)
		return 0;
	if (!RANGE_OK(ctx, dst, bytes) || !RANGE_OK(ctx, src, bytes))
		return -EINVAL;
	if (dst != src && dst < src + bytes && src < dst + bytes)
		return -EINVAL; /* overlapping copy: not supported */
	return ctx->ops->d2d(ctx, s, dst, src, bytes);
}

int gpu_memset(struct gpu_ctx *ctx, struct gpu_stream *s, gpu_ptr_t dst,
	       int byte, size_t bytes)
{
	s = stream_of(ctx, s);
	if (!bytes)
		return 0;
	if (!RANGE_OK(ctx, dst, bytes))
		return -EINVAL;
	return ctx->ops->memset(ctx, s, dst, byte & 0xff, bytes);
}

/* Shared checks of reduce/scale: dtype, size overflow, alignment, range. */
static int check_vec(struct gpu_ctx *ctx, gpu_ptr_t p, size_t count,
		     enum zb_dtype dtype)
{
	if ((unsigned)dtype >= ZB_DTYPE_COUNT)
		return -EINVAL;
	size_t es = zb_dtype_size(dtype);
	if (count > SIZE_MAX / es || p % es)
		return -EINVAL;
	return RANGE_OK(ctx, p, count * es) ? 0 : -EINVAL;
}

int gpu_reduce(struct gpu_ctx *ctx, struct gpu_stream *s, gpu_ptr_t dst,
	       gpu_ptr_t src, size_t count, enum zb_dtype dtype,
	       enum zb_redop op)
{
	s = stream_of(ctx, s);
	if ((unsigned)dtype >= ZB_DTYPE_COUNT || (unsigned)op >= ZB_REDOP_COUNT)
		return -EINVAL;
	if (!count)
		return 0;
	if (check_vec(ctx, dst, count, dtype) || check_vec(ctx, src, count, dtype))
		return -EINVAL;
	size_t bytes = count * zb_dtype_size(dtype);
	if (dst != src && dst < src + bytes && src < dst + bytes)
		return -EINVAL;
	if (!ctx->ops->reduce)
		return ZB_ERR_UNSUPPORTED;
	return ctx->ops->reduce(ctx, s, dst, src, count, dtype, op);
}

int gpu_scale(struct gpu_ctx *ctx, struct gpu_stream *s, gpu_ptr_t buf,
	      size_t count, enum zb_dtype dtype, double factor)
{
	s = stream_of(ctx, s);
	if (!gpu__scale_factor_ok(dtype, factor))
		return -EINVAL;
	if (!count)
		return 0;
	if (check_vec(ctx, buf, count, dtype))
		return -EINVAL;
	if (!ctx->ops->scale)
		return ZB_ERR_UNSUPPORTED;
	return ctx->ops->scale(ctx, s, buf, count, dtype, factor);
}

/* Rows / columns of C per backend call (65,535 workgroups of 16); a
 * variable so that a test can make blocks small. */
int gpu__sgemm_block = 65535 * 16;

/* Bytes a column-major rows x cols matrix with leading dimension ld spans. */
static bool mat_ok(struct gpu_ctx *ctx, gpu_ptr_t p, int rows, int cols, int ld)
{
	if (ld < (rows > 1 ? rows : 1) || p % 4)
		return false;
	if (rows == 0 || cols == 0)
		return true;
	size_t span = ((size_t)ld * (size_t)(cols - 1) + (size_t)rows) * 4;
	return RANGE_OK(ctx, p, span);
}

int gpu_sgemm(struct gpu_ctx *ctx, struct gpu_stream *s, bool trans_a,
	      bool trans_b, int m, int n, int k, float alpha, gpu_ptr_t a,
	      int lda, gpu_ptr_t b, int ldb, float beta, gpu_ptr_t c, int ldc)
{
	s = stream_of(ctx, s);
	if (m < 0 || n < 0 || k < 0)
		return -EINVAL;
	if (!mat_ok(ctx, a, trans_a ? k : m, trans_a ? m : k, lda) ||
	    !mat_ok(ctx, b, trans_b ? n : k, trans_b ? k : n, ldb) ||
	    !mat_ok(ctx, c, m, n, ldc))
		return -EINVAL;
	if (m == 0 || n == 0)
		return 0;
	if (!ctx->ops->sgemm)
		return ZB_ERR_UNSUPPORTED;
	if (k == 0) {
		/* C = beta * C: BLAS reads neither A nor B, so callers may pass
		 * any pointer there, and the checks above did not look at them.
		 * The backends resolve every operand (Vulkan: its buffer), so
		 * they get C, which was checked, in their place. */
		a = b = c;
	}
	/* The kernels launch one 16 x 16 workgroup per tile of C; a grid
	 * dimension may hold 65,535 of them (Vulkan's guaranteed
	 * maxComputeWorkGroupCount, CUDA's gridDim.y). Larger C goes in row
	 * and column blocks, each an sgemm of its own on the same stream. */
	const int blk = gpu__sgemm_block;
	ZB_ASSERT(blk > 0);
	for (int i0 = 0; i0 < m; i0 += blk)
		for (int j0 = 0; j0 < n; j0 += blk) {
			int mb = m - i0 < blk ? m - i0 : blk, nb = n - j0 < blk ? n - j0 : blk;
			gpu_ptr_t ab = k ? a + 4 * (size_t)i0 * (trans_a ? (size_t)lda : 1) : a;
			gpu_ptr_t bb = k ? b + 4 * (size_t)j0 * (trans_b ? 1 : (size_t)ldb) : b;
			gpu_ptr_t cb = c + 4 * ((size_t)i0 + (size_t)j0 * (size_t)ldc);
			int rc = ctx->ops->sgemm(ctx, s, trans_a, trans_b, mb, nb, k, alpha,
						 ab, lda, bb, ldb, beta, cb, ldc);
			if (rc)
				return rc;
		}
	return 0;
}

int gpu_kernel_compile(struct gpu_ctx *ctx, const char *src, const char *entry,
		       struct gpu_kernel **out, char *log, size_t log_len)
{
	ZB_ASSERT(ctx && out);
	*out = NULL;
	if (!src || !entry)
		return -EINVAL;
	if (!ctx->ops->kernel_compile)
		return gpu__why(log, log_len, ZB_ERR_UNSUPPORTED,
				"%s has no run-time compiler", ctx->ops->name);
	struct gpu_kernel *k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	int rc = ctx->ops->kernel_compile(ctx, src, entry, &k->be, log, log_len);
	if (rc < 0) {
		free(k);
		return rc;
	}
	*out = k;
	return 0;
}

int gpu_kernel_launch(struct gpu_ctx *ctx, struct gpu_stream *s,
		      struct gpu_kernel *k, const unsigned grid[3],
		      const unsigned block[3], void **args)
{
	s = stream_of(ctx, s);
	if (!k || !grid || !block)
		return -EINVAL;
	if (!ctx->ops->kernel_launch)
		return ZB_ERR_UNSUPPORTED;
	return ctx->ops->kernel_launch(ctx, s, k->be, grid, block, args);
}

void gpu_kernel_free(struct gpu_ctx *ctx, struct gpu_kernel *k)
{
	ZB_ASSERT(ctx);
	if (!k)
		return;
	if (ctx->ops->kernel_free)
		ctx->ops->kernel_free(ctx, k->be);
	free(k);
}
