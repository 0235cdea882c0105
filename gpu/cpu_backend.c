/* cpu backend: host memory (NUMA-placed with libnuma), OpenBLAS sgemm, the
 * vectorised host reductions.  Device addresses are host pointers; streams
 * are synchronous (work runs inline, sync is a no-op). */
#include "internal.h"

#include <cblas.h>
#include <numa.h>
#include <unistd.h>

/* OpenBLAS extension (declared in its cblas.h on Debian, but not in every
 * cblas.h): the build configuration string. */
char *openblas_get_config(void);
void openblas_set_num_threads(int n);

struct cpu_chunk {
	void *p;
	size_t bytes;
	bool numa;
};

/* Filled once by the probe (which the generic layer serialises): libnuma's
 * node/cpu maps initialise lazily and are not thread-safe. */
static struct gpu_device_info cpu_dev;
static void cpu_fill_info(struct gpu_device_info *out);
static int cpu_device_count(void) { return 1; }

static int cpu_probe(char *why, size_t len)
{
	cpu_fill_info(&cpu_dev);
	return gpu__why(why, len, 0, "usable (OpenBLAS, %s)",
			numa_available() < 0 ? "no NUMA" : "libnuma");
}



static void cpu_model(char *out, size_t len)
{
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[256];

	snprintf(out, len, "host CPU");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *c = strchr(line, ':');
		if (strncmp(line, "model name", 10) == 0 && c) {
			c += 2;
			c[strcspn(c, "\n")] = 0;
			snprintf(out, len, "%s", c);
			break;
		}
	}
	fclose(f);
}

static int cpu_device_info(int index, struct gpu_device_info *out)
{
	ZB_ASSERT(index == 0 && out);
	*out = cpu_dev;
	return 0;
}

static void cpu_fill_info(struct gpu_device_info *out)
{
	memset(out, 0, sizeof(*out));
	out->index = 0;
	cpu_model(out->name, sizeof(out->name));
	snprintf(out->driver, sizeof(out->driver), "%.63s", openblas_get_config());
	out->mem_bytes = zb_phys_mem_bytes();
	out->numa_node = numa_available() < 0 ? -1 : numa_node_of_cpu(sched_getcpu());
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	out->compute_units = n > 0 ? (uint32_t)n : 1;
	out->fp64 = out->int64 = out->fp16 = true;
}

static int cpu_open(struct gpu_ctx *ctx, int index)
{
	ZB_ASSERT(ctx && index == 0);
	ctx->be = NULL;
	ctx->max_chunk = 0;
	if (ctx->opt.numa_node >= 0 &&
	    (numa_available() < 0 || ctx->opt.numa_node > numa_max_node()))
		return -EINVAL;
	if (ctx->opt.cpu_threads < 0)
		return -EINVAL;
	if (ctx->opt.cpu_threads > 0)   /* process-wide in OpenBLAS */
		openblas_set_num_threads(ctx->opt.cpu_threads);
	return 0;
}

static void cpu_close(struct gpu_ctx *ctx) { (void)ctx; }

static int cpu_chunk_alloc(struct gpu_ctx *ctx, size_t bytes, gpu_ptr_t *base,
			   void **handle)
{
	struct cpu_chunk *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->bytes = bytes;
	if (numa_available() >= 0) {
		c->numa = true;
		c->p = ctx->opt.numa_node >= 0
			       ? numa_alloc_onnode(bytes, ctx->opt.numa_node)
			       : numa_alloc_local(bytes);
	} else {
		c->p = aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
	}
	if (!c->p) {
		free(c);
		return -ENOMEM;
	}
	*base = (gpu_ptr_t)(uintptr_t)c->p;
	*handle = c;
	return 0;
}

static void cpu_chunk_free(struct gpu_ctx *ctx, gpu_ptr_t base, void *handle)
{
	struct cpu_chunk *c = handle;
	(void)ctx;
	ZB_ASSERT(c && (gpu_ptr_t)(uintptr_t)c->p == base);
	if (c->numa)
		numa_free(c->p, c->bytes);
	else
		free(c->p);
	free(c);
}

static int cpu_stream_create(struct gpu_ctx *ctx, struct gpu_stream *s)
{
	(void)ctx;
	s->be = NULL;
	return 0;
}
static void cpu_stream_destroy(struct gpu_ctx *ctx, struct gpu_stream *s) { (void)ctx; (void)s; }
static int cpu_stream_sync(struct gpu_ctx *ctx, struct gpu_stream *s) { (void)ctx; (void)s; return 0; }

#define HP(p) ((void *)(uintptr_t)(p))

static int cpu_h2d(struct gpu_ctx *ctx, struct gpu_stream *s, gpu_ptr_t dst,
		   const void *src, size_t bytes)
{
	(void)ctx; (void)s;
	memcpy(HP(dst), src, bytes);
	return 0;
}

static int cpu_d2h(struct gpu_ctx *ctx, struct gpu_stream *s, void *dst,
		   gpu_ptr_t src, size_t bytes)
{
	(void)ctx; (void)s;
	memcpy(dst, HP(src), bytes);
	return 0;
}

static int cpu_d2d(struct gpu_ctx *ctx, struct gpu_stream *s, gpu_ptr_t dst,
		   gpu_ptr_t src, size_t bytes)
{
	(void)ctx; (void)s;
	memcpy(HP(dst), HP(src), bytes);
	return 0;
}

static int cpu_memset(struct gpu_ctx *ctx, struct gpu_stream *s, gpu_ptr_t dst,
		      int byte, size_t bytes)
{
	(void)ctx; (void)s;
	memset(HP(dst), byte, bytes);
	return 0;
}

static int cpu_reduce(struct gpu_ctx *ctx, struct gpu_stream *s, gpu_ptr_t dst,
		      gpu_ptr_t src, size_t count, enum zb_dtype dtype,
		      enum zb_redop op)
{
	(void)ctx; (void)s;
	return gpu_host_reduce(HP(dst), HP(src), count, dtype, op);
}

static int cpu_scale(struct gpu_ctx *ctx, struct gpu_stream *s, gpu_ptr_t buf,
		     size_t count, enum zb_dtype dtype, double factor)
{
	(void)ctx; (void)s;
	return gpu_host_scale(HP(buf), count, dtype, factor);
}

static int cpu_sgemm(struct gpu_ctx *ctx, struct gpu_stream *s, bool ta,
		     bool tb, int m, int n, int k, float alpha, gpu_ptr_t a,
		     int lda, gpu_ptr_t b, int ldb, float beta, gpu_ptr_t c,
		     int ldc)
{
	(void)ctx; (void)s;
	cblas_sgemm(CblasColMajor, ta ? CblasTrans : CblasNoTrans,
		    tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, HP(a), lda,
		    HP(b), ldb, beta, HP(c), ldc);
	return 0;
}

const struct gpu_ops gpu__cpu_ops = {
	.version = GPU_OPS_VERSION,
	.name = "cpu",
	.id = GPU_CPU,
	.probe = cpu_probe,
	.device_count = cpu_device_count,
	.device_info = cpu_device_info,
	.open = cpu_open,
	.close = cpu_close,
	.chunk_alloc = cpu_chunk_alloc,
	.chunk_free = cpu_chunk_free,
	.stream_create = cpu_stream_create,
	.stream_destroy = cpu_stream_destroy,
	.stream_sync = cpu_stream_sync,
	.h2d = cpu_h2d,
	.d2h = cpu_d2h,
	.d2d = cpu_d2d,
	.memset = cpu_memset,
	.reduce = cpu_reduce,
	.scale = cpu_scale,
	.sgemm = cpu_sgemm,
	/* no run-time compiler, no DMA-BUF: host memory registers directly */
};
