/* hip backend: the HIP runtime and hipRTC, loaded at run time with dlopen
 * (libamdhip64), the same shape as the cuda backend.  Compiled when the HIP
 * headers are present (types only; nothing linked).  The kernels are
 * gpu/kernels/zb_kernels.cu compiled by hipRTC for the device at open
 * (no rocBLAS dependency: sgemm is the zb_sgemm kernel).
 *
 * Device addresses are real hipDeviceptr_t values; gpu_host_alloc is
 * pinned (hipHostMalloc).  No DMA-BUF export is wired up: registration
 * falls back to staging. */
#include "internal.h"

#include <dlfcn.h>

extern const char gpu__rtc_source[];

#ifdef ZB_GPU_HAVE_HIP
#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__
#endif
#include <hip/hip_runtime_api.h>
#include <hip/hiprtc.h>

#define HIP_FUNCS(X)                                                           \
	X(hipInit) X(hipDriverGetVersion) X(hipGetDeviceCount)                 \
	X(hipDeviceGetName) X(hipDeviceTotalMem) X(hipDeviceGetAttribute)      \
	X(hipSetDevice) X(hipMalloc) X(hipFree) X(hipHostMalloc) X(hipHostFree)\
	X(hipMemcpyHtoDAsync) X(hipMemcpyDtoHAsync) X(hipMemcpyDtoDAsync)      \
	X(hipMemsetD8Async) X(hipStreamCreateWithFlags) X(hipStreamDestroy)    \
	X(hipStreamSynchronize) X(hipModuleLoadData) X(hipModuleUnload)        \
	X(hipModuleGetFunction) X(hipModuleLaunchKernel) X(hipGetErrorName)
#define HIPRTC_FUNCS(X)                                                        \
	X(hiprtcCreateProgram) X(hiprtcCompileProgram) X(hiprtcDestroyProgram) \
	X(hiprtcGetProgramLogSize) X(hiprtcGetProgramLog) X(hiprtcGetCodeSize) \
	X(hiprtcGetCode)

#define DECL(f) static __typeof__(f) *p_##f;
HIP_FUNCS(DECL) HIPRTC_FUNCS(DECL)
#undef DECL

#define LOAD(f)                                                                \
	do {                                                                   \
		p_##f = (__typeof__(p_##f))dlsym(lib, #f);                     \
		if (!p_##f && !missing)                                        \
			missing = #f;                                          \
	} while (0);

static void *h_hip, *h_rtc;

static int hip_probe(char *why, size_t len)
{
	static const char *const names[] = {"libamdhip64.so.6", "libamdhip64.so.5",
					    "libamdhip64.so", NULL};
	char err[200] = "";
	const char *missing = NULL;

	for (int i = 0; names[i] && !h_hip; i++) {
		h_hip = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
		if (!h_hip && i == 0)
			snprintf(err, sizeof(err), "%s", dlerror());
	}
	if (!h_hip)
		return gpu__why(why, len, ZB_ERR_UNAVAILABLE, "no HIP runtime: %s", err);
	void *lib = h_hip;
	HIP_FUNCS(LOAD)
	if (missing)
		return gpu__why(why, len, ZB_ERR_UNAVAILABLE, "libamdhip64 lacks %s", missing);
	/* hipRTC: inside libamdhip64 up to ROCm 5, libhiprtc from ROCm 6 */
	lib = h_hip;
	HIPRTC_FUNCS(LOAD)
	if (missing && (h_rtc = dlopen("libhiprtc.so", RTLD_NOW | RTLD_LOCAL))) {
		missing = NULL;
		lib = h_rtc;
		HIPRTC_FUNCS(LOAD)
	}
	if (missing)
		p_hiprtcCompileProgram = NULL;
	hipError_t r = p_hipInit(0);
	int n = 0;
	if (r != hipSuccess)
		return gpu__why(why, len, ZB_ERR_UNAVAILABLE, "hipInit: %s",
				p_hipGetErrorName(r));
	if (p_hipGetDeviceCount(&n) != hipSuccess || n == 0)
		return gpu__why(why, len, ZB_ERR_UNAVAILABLE, "no HIP device");
	return gpu__why(why, len, 0, "usable: %d device(s); hipRTC %s", n,
			p_hiprtcCompileProgram ? "ok" : "missing");
}

static int hip_device_count(void)
{
	int n = 0;
	return p_hipGetDeviceCount(&n) == hipSuccess ? n : 0;
}

static int hattr(int dev, hipDeviceAttribute_t a)
{
	int v = 0;
	return p_hipDeviceGetAttribute(&v, a, dev) == hipSuccess ? v : 0;
}

static int hip_device_info(int index, struct gpu_device_info *out)
{
	size_t mem = 0;
	int ver = 0;

	out->index = index;
	if (p_hipDeviceGetName(out->name, sizeof(out->name), index) != hipSuccess)
		return ZB_ERR_DEVICE;
	p_hipDeviceTotalMem(&mem, index);
	p_hipDriverGetVersion(&ver);
	snprintf(out->driver, sizeof(out->driver), "HIP driver %d", ver);
	out->mem_bytes = mem;
	out->compute_units = (uint32_t)hattr(index, hipDeviceAttributeMultiprocessorCount);
	out->fp64 = out->int64 = out->fp16 = true;
	return 0;
}

struct hip_be {
	int dev;
	hipModule_t mod;
	hipFunction_t reduce[ZB_DTYPE_COUNT], scale[ZB_DTYPE_COUNT], sgemm;
	unsigned max_blocks;
};

static int hip_err(hipError_t r)
{
	return r == hipSuccess ? 0
	       : r == hipErrorOutOfMemory ? -ENOMEM
	       : r == hipErrorInvalidValue ? -EINVAL : ZB_ERR_DEVICE;
}

#define BE(ctx) ((struct hip_be *)(ctx)->be)
#define CUR(ctx) p_hipSetDevice(BE(ctx)->dev)
#define HS(s) ((hipStream_t)(s)->be)

/* Compile src with hipRTC for the current device; *image malloc'd. */
static int rtc(const char *src, void **image, char *log, size_t log_len)
{
	hiprtcProgram prog;
	size_t n = 0;

	if (!p_hiprtcCompileProgram)
		return gpu__why(log, log_len, ZB_ERR_UNSUPPORTED, "hipRTC unavailable");
	if (p_hiprtcCreateProgram(&prog, src, "zb.hip", 0, NULL, NULL) != HIPRTC_SUCCESS)
		return -ENOMEM;
	int rc = 0;
	if (p_hiprtcCompileProgram(prog, 0, NULL) != HIPRTC_SUCCESS) {
		p_hiprtcGetProgramLogSize(prog, &n);
		char *buf = malloc(n + 1);
		if (buf && p_hiprtcGetProgramLog(prog, buf) == HIPRTC_SUCCESS)
			gpu__why(log, log_len, 0, "%s", buf);
		free(buf);
		rc = -EINVAL;
	} else if (p_hiprtcGetCodeSize(prog, &n) != HIPRTC_SUCCESS ||
		   !(*image = malloc(n)) || p_hiprtcGetCode(prog, *image) != HIPRTC_SUCCESS) {
		rc = ZB_ERR_DEVICE;
	}
	p_hiprtcDestroyProgram(&prog);
	return rc;
}

static void hip_close(struct gpu_ctx *ctx)
{
	struct hip_be *be = ctx->be;
	if (!be)
		return;
	CUR(ctx);
	if (be->mod)
		p_hipModuleUnload(be->mod);
	free(be);
	ctx->be = NULL;
}

static int hip_open(struct gpu_ctx *ctx, int index)
{
	struct hip_be *be = calloc(1, sizeof(*be));
	void *img = NULL;
	int rc;

	if (!be)
		return -ENOMEM;
	ctx->be = be;
	be->dev = index;
	rc = hip_err(p_hipSetDevice(index));
	if (!rc && p_hiprtcCompileProgram) {
		rc = rtc(gpu__rtc_source, &img, ctx->why, sizeof(ctx->why));
		if (!rc)
			rc = hip_err(p_hipModuleLoadData(&be->mod, img));
		free(img);
		for (int t = 0; rc == 0 && t < ZB_DTYPE_COUNT; t++) {
			char name[32];
			snprintf(name, sizeof(name), "zb_reduce_%d", t);
			rc = hip_err(p_hipModuleGetFunction(&be->reduce[t], be->mod, name));
			snprintf(name, sizeof(name), "zb_scale_%d", t);
			if (!rc)
				rc = hip_err(p_hipModuleGetFunction(&be->scale[t], be->mod, name));
		}
		if (!rc)
			rc = hip_err(p_hipModuleGetFunction(&be->sgemm, be->mod, "zb_sgemm"));
	}
	if (rc) {
		hip_close(ctx);
		return rc;
	}
	be->max_blocks = 32u * (ctx->dev.compute_units ? ctx->dev.compute_units : 1);
	ctx->max_chunk = 0;
	return 0;
}

static int hip_chunk_alloc(struct gpu_ctx *ctx, size_t bytes, gpu_ptr_t *base,
			   void **handle)
{
	void *p = NULL;
	CUR(ctx);
	if (p_hipMalloc(&p, bytes) != hipSuccess)
		return -ENOMEM;
	*base = (gpu_ptr_t)(uintptr_t)p;
	*handle = NULL;
	return 0;
}

static void hip_chunk_free(struct gpu_ctx *ctx, gpu_ptr_t base, void *handle)
{
	(void)handle;
	CUR(ctx);
	p_hipFree((void *)(uintptr_t)base);
}

static int hip_host_alloc(struct gpu_ctx *ctx, size_t bytes, void **out)
{
	CUR(ctx);
	return p_hipHostMalloc(out, bytes, hipHostMallocPortable) == hipSuccess ? 0 : -ENOMEM;
}

static void hip_host_free(struct gpu_ctx *ctx, void *p)
{
	CUR(ctx);
	p_hipHostFree(p);
}

static int hip_stream_create(struct gpu_ctx *ctx, struct gpu_stream *s)
{
	hipStream_t hs = NULL;
	CUR(ctx);
	int rc = hip_err(p_hipStreamCreateWithFlags(&hs, hipStreamNonBlocking));
	s->be = hs;
	return rc;
}

static void hip_stream_destroy(struct gpu_ctx *ctx, struct gpu_stream *s)
{
	CUR(ctx);
	if (s->be)
		p_hipStreamDestroy(HS(s));
	s->be = NULL;
}

static int hip_stream_sync(struct gpu_ctx *ctx, struct gpu_stream *s)
{
	CUR(ctx);
	return hip_err(p_hipStreamSynchronize(HS(s)));
}

#define DP(p) ((hipDeviceptr_t)(uintptr_t)(p))

static int hip_h2d(struct gpu_ctx *ctx, struct gpu_stream *s, gpu_ptr_t dst,
		   const void *src, size_t bytes)
{
	CUR(ctx);
	return hip_err(p_hipMemcpyHtoDAsync(DP(dst), (void *)(uintptr_t)src, bytes, HS(s)));
}

static int hip_d2h(struct gpu_ctx *ctx, struct gpu_stream *s, void *dst,
		   gpu_ptr_t src, size_t bytes)
{
	CUR(ctx);
	return hip_err(p_hipMemcpyDtoHAsync(dst, DP(src), bytes, HS(s)));
}

static int hip_d2d(struct gpu_ctx *ctx, struct gpu_stream *s, gpu_ptr_t dst,
		   gpu_ptr_t src, size_t bytes)
{
	CUR(ctx);
	return hip_err(p_hipMemcpyDtoDAsync(DP(dst), DP(src), bytes, HS(s)));
}

static int hip_memset(struct gpu_ctx *ctx, struct gpu_stream *s, gpu_ptr_t dst,
		      int byte, size_t bytes)
{
	CUR(ctx);
	return hip_err(p_hipMemsetD8Async(DP(dst), (unsigned char)byte, bytes, HS(s)));
}

static int launch(struct gpu_ctx *ctx, struct gpu_stream *s, hipFunction_t f,
		  unsigned gx, unsigned gy, unsigned bx, unsigned by, void **args)
{
	if (!f)
		return ZB_ERR_UNSUPPORTED; /* hipRTC missing */
	CUR(ctx);
	return hip_err(p_hipModuleLaunchKernel(f, gx, gy, 1, bx, by, 1, 0, HS(s),
					       args, NULL));
}

static unsigned blocks_for(const struct hip_be *be, size_t count)
{
	size_t b = (count + 255) / 256;
	return b > be->max_blocks ? be->max_blocks : (unsigned)b;
}

static int hip_reduce(struct gpu_ctx *ctx, struct gpu_stream *s, gpu_ptr_t dst,
		      gpu_ptr_t src, size_t count, enum zb_dtype dtype,
		      enum zb_redop op)
{
	void *d = (void *)(uintptr_t)dst, *sp = (void *)(uintptr_t)src;
	unsigned long long n = count;
	int o = (int)op;
	void *args[] = {&d, &sp, &n, &o};
	return launch(ctx, s, BE(ctx)->reduce[dtype],
		      blocks_for(BE(ctx), gpu__kernel_threads(count, dtype, dst, src)),
		      1, 256, 1, args);
}

static int hip_scale(struct gpu_ctx *ctx, struct gpu_stream *s, gpu_ptr_t buf,
		     size_t count, enum zb_dtype dtype, double factor)
{
	void *d = (void *)(uintptr_t)buf;
	unsigned long long n = count;
	float ff = (float)factor;
	void *args[] = {&d, &n, &ff, &factor};
	return launch(ctx, s, BE(ctx)->scale[dtype],
		      blocks_for(BE(ctx), gpu__kernel_threads(count, dtype, buf, buf)),
		      1, 256, 1, args);
}

static int hip_sgemm(struct gpu_ctx *ctx, struct gpu_stream *s, bool ta,
		     bool tb, int m, int n, int k, float alpha, gpu_ptr_t a,
		     int lda, gpu_ptr_t b, int ldb, float beta, gpu_ptr_t c,
		     int ldc)
{
	int ta_ = ta, tb_ = tb;
	void *pa = (void *)(uintptr_t)a, *pb = (void *)(uintptr_t)b;
	void *pc = (void *)(uintptr_t)c;
	void *args[] = {&ta_, &tb_, &m, &n, &k, &alpha, &pa, &lda, &pb, &ldb,
			&beta, &pc, &ldc};
	return launch(ctx, s, BE(ctx)->sgemm, (unsigned)(m + 15) / 16,
		      (unsigned)(n + 15) / 16, 16, 16, args);
}

struct hip_kernel {
	hipModule_t mod;
	hipFunction_t fn;
};

static int hip_kernel_compile(struct gpu_ctx *ctx, const char *src,
			      const char *entry, void **out, char *log,
			      size_t log_len)
{
	void *img = NULL;
	CUR(ctx);
	int rc = rtc(src, &img, log, log_len);
	struct hip_kernel *k = rc ? NULL : calloc(1, sizeof(*k));
	if (!rc && !k)
		rc = -ENOMEM;
	if (!rc)
		rc = hip_err(p_hipModuleLoadData(&k->mod, img));
	if (!rc && (rc = hip_err(p_hipModuleGetFunction(&k->fn, k->mod, entry))) < 0) {
		gpu__why(log, log_len, 0, "no entry point '%s'", entry);
		p_hipModuleUnload(k->mod);
	}
	free(img);
	if (rc) {
		free(k);
		return rc;
	}
	*out = k;
	return 0;
}

static int hip_kernel_launch(struct gpu_ctx *ctx, struct gpu_stream *s, void *kp,
			     const unsigned grid[3], const unsigned block[3],
			     void **args)
{
	struct hip_kernel *k = kp;
	CUR(ctx);
	return hip_err(p_hipModuleLaunchKernel(k->fn, grid[0], grid[1], grid[2],
					       block[0], block[1], block[2], 0,
					       HS(s), args, NULL));
}

static void hip_kernel_free(struct gpu_ctx *ctx, void *kp)
{
	struct hip_kernel *k = kp;
	CUR(ctx);
	p_hipModuleUnload(k->mod);
	free(k);
}

const struct gpu_ops gpu__hip_ops = {
	.version = GPU_OPS_VERSION,
	.name = "hip",
	.id = GPU_HIP,
	.probe = hip_probe,
	.device_count = hip_device_count,
	.device_info = hip_device_info,
	.open = hip_open,
	.close = hip_close,
	.chunk_alloc = hip_chunk_alloc,
	.chunk_free = hip_chunk_free,
	.host_alloc = hip_host_alloc,
	.host_free = hip_host_free,
	.stream_create = hip_stream_create,
	.stream_destroy = hip_stream_destroy,
	.stream_sync = hip_stream_sync,
	.h2d = hip_h2d,
	.d2h = hip_d2h,
	.d2d = hip_d2d,
	.memset = hip_memset,
	.reduce = hip_reduce,
	.scale = hip_scale,
	.sgemm = hip_sgemm,
	.kernel_compile = hip_kernel_compile,
	.kernel_launch = hip_kernel_launch,
	.kernel_free = hip_kernel_free,
};

#else /* !ZB_GPU_HAVE_HIP */

static int hip_probe(char *why, size_t len)
{
	return gpu__why(why, len, ZB_ERR_UNAVAILABLE,
			"not compiled in (no HIP headers at build time)");
}

const struct gpu_ops gpu__hip_ops = {
	.version = GPU_OPS_VERSION,
	.name = "hip",
	.id = GPU_HIP,
	.probe = hip_probe,
};
#endif
