/* cuda backend: the CUDA driver API, cuBLAS and NVRTC, all loaded at run
 * time with dlopen so that one binary runs on nodes with and without CUDA.
 * Compiled when the CUDA headers are present (they give the types; nothing
 * is linked).  Reduction/scale kernels (gpu/kernels/zb_kernels.cu) are
 * compiled by NVRTC for the device's own architecture at open.
 *
 * Memory: pool chunks come from cuMemAlloc; device addresses are real
 * CUdeviceptr values (so the rdma provider can register them).  Host
 * memory from gpu_host_alloc is pinned (cuMemHostAlloc).  Streams are
 * CUstreams; every call makes the context's CUcontext current first. */
#include "internal.h"

#include <dlfcn.h>
#include <unistd.h>

#ifndef ZB_CUDA_LIBDIR
#define ZB_CUDA_LIBDIR "/usr/local/cuda/lib64"
#endif

/* The kernel source, shared with hip (generated from zb_kernels.cu). */
extern const char gpu__rtc_source[];

/* NVRTC needs no GPU: gpu__nvrtc_compile is also used by the tests to
 * compile the kernels on a machine without one. */
#ifdef ZB_GPU_HAVE_CUDA
#include <cublas_v2.h>
#include <cuda.h>
#include <nvrtc.h>

/* One table of every entry point: name as exported, type from the header. */
#define CU_FUNCS(X)                                                            \
	X(cuInit) X(cuDriverGetVersion) X(cuDeviceGetCount) X(cuDeviceGet)     \
	X(cuDeviceGetName) X(cuDeviceTotalMem_v2) X(cuDeviceGetAttribute)      \
	X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease_v2)            \
	X(cuCtxSetCurrent) X(cuMemAlloc_v2) X(cuMemFree_v2)                    \
	X(cuMemHostAlloc) X(cuMemFreeHost) X(cuMemcpyHtoDAsync_v2)             \
	X(cuMemcpyDtoHAsync_v2) X(cuMemcpyDtoDAsync_v2) X(cuMemsetD8Async)     \
	X(cuStreamCreate) X(cuStreamDestroy_v2) X(cuStreamSynchronize)         \
	X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction)           \
	X(cuLaunchKernel) X(cuGetErrorName)
#define CU_OPT_FUNCS(X) X(cuMemGetHandleForAddressRange)
#define NVRTC_FUNCS(X)                                                         \
	X(nvrtcCreateProgram) X(nvrtcCompileProgram) X(nvrtcDestroyProgram)    \
	X(nvrtcGetProgramLogSize) X(nvrtcGetProgramLog) X(nvrtcGetCUBINSize)   \
	X(nvrtcGetCUBIN) X(nvrtcGetPTXSize) X(nvrtcGetPTX) X(nvrtcVersion)
#define CUBLAS_FUNCS(X)                                                        \
	X(cublasCreate_v2) X(cublasDestroy_v2) X(cublasSetStream_v2)           \
	X(cublasSgemm_v2)

#define DECL(f) static __typeof__(f) *p_##f;
CU_FUNCS(DECL) CU_OPT_FUNCS(DECL) NVRTC_FUNCS(DECL) CUBLAS_FUNCS(DECL)
#undef DECL

static void *h_cuda, *h_nvrtc, *h_cublas;
static char nvrtc_why[160], cublas_why[160];

static void *open_first(const char *const *names, char *why, size_t len)
{
	void *h = NULL;
	for (int i = 0; names[i] && !h; i++) {
		h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
		if (!h && i == 0) /* report the preferred name's failure */
			snprintf(why, len, "%s", dlerror());
	}
	return h;
}

/* dlsym every entry of a table from the handle `lib` in scope; the first
 * missing name is left in `missing`. */
#define LOAD(f)                                                                \
	do {                                                                   \
		p_##f = (__typeof__(p_##f))dlsym(lib, #f);                     \
		if (!p_##f && !missing)                                        \
			missing = #f;                                          \
	} while (0);

/* Load NVRTC alone (no driver needed).  0 or ZB_ERR_UNAVAILABLE. */
static int load_nvrtc(void)
{
	static const char *const names[] = {
		"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so",
		ZB_CUDA_LIBDIR "/libnvrtc.so", NULL};
	const char *missing = NULL;

	if (p_nvrtcCompileProgram)
		return 0;
	if (!h_nvrtc && !(h_nvrtc = open_first(names, nvrtc_why, sizeof(nvrtc_why))))
		return ZB_ERR_UNAVAILABLE;
	void *lib = h_nvrtc;
	NVRTC_FUNCS(LOAD)
	if (missing) {
		snprintf(nvrtc_why, sizeof(nvrtc_why), "libnvrtc lacks %s", missing);
		p_nvrtcCompileProgram = NULL;
		return ZB_ERR_UNAVAILABLE;
	}
	return 0;
}

static void load_cublas(void)
{
	static const char *const names[] = {
		"libcublas.so.13", "libcublas.so.12", "libcublas.so",
		ZB_CUDA_LIBDIR "/libcublas.so", NULL};
	const char *missing = NULL;

	if (!h_cublas && !(h_cublas = open_first(names, cublas_why, sizeof(cublas_why))))
		return;
	void *lib = h_cublas;
	CUBLAS_FUNCS(LOAD)
	if (missing) {
		snprintf(cublas_why, sizeof(cublas_why), "libcublas lacks %s", missing);
		p_cublasSgemm_v2 = NULL;
	}
}

/* Compile the kernels for arch ("sm_80"; "compute_75" gives PTX).  On
 * success *image is a malloc'd CUBIN (sm_) or PTX (compute_) image. */
int gpu__nvrtc_compile(const char *arch, void **image, size_t *len, char *log,
		       size_t log_len)
{
	nvrtcProgram prog;
	char opt_arch[48];
	int rc = load_nvrtc();

	if (rc < 0)
		return gpu__why(log, log_len, rc, "NVRTC unavailable: %s", nvrtc_why);
	snprintf(opt_arch, sizeof(opt_arch), "--gpu-architecture=%s", arch);
	const char *opts[] = {opt_arch, "--fmad=false", "-default-device"};
	if (p_nvrtcCreateProgram(&prog, gpu__rtc_source, "zb_kernels.cu", 0,
				 NULL, NULL) != NVRTC_SUCCESS)
		return gpu__why(log, log_len, -ENOMEM, "nvrtcCreateProgram failed");
	nvrtcResult r = p_nvrtcCompileProgram(prog, 3, opts);
	if (r != NVRTC_SUCCESS) {
		size_t n = 0;
		p_nvrtcGetProgramLogSize(prog, &n);
		char *buf = malloc(n + 1);
		if (buf && p_nvrtcGetProgramLog(prog, buf) == NVRTC_SUCCESS)
			gpu__why(log, log_len, 0, "%s", buf);
		free(buf);
		p_nvrtcDestroyProgram(&prog);
		return -EINVAL;
	}
	bool cubin = strncmp(arch, "sm_", 3) == 0;
	size_t n = 0;
	r = cubin ? p_nvrtcGetCUBINSize(prog, &n) : p_nvrtcGetPTXSize(prog, &n);
	*image = r == NVRTC_SUCCESS ? malloc(n) : NULL;
	if (*image)
		r = cubin ? p_nvrtcGetCUBIN(prog, *image) : p_nvrtcGetPTX(prog, *image);
	p_nvrtcDestroyProgram(&prog);
	if (!*image || r != NVRTC_SUCCESS) {
		free(*image);
		*image = NULL;
		return gpu__why(log, log_len, ZB_ERR_DEVICE, "fetching the image failed");
	}
	*len = n;
	return 0;
}

static int cu_probe(char *why, size_t len)
{
	static const char *const names[] = {"libcuda.so.1", "libcuda.so", NULL};
	char err[200];
	const char *missing = NULL;
	int n = 0;

	if (!h_cuda && !(h_cuda = open_first(names, err, sizeof(err))))
		return gpu__why(why, len, ZB_ERR_UNAVAILABLE,
				"no NVIDIA driver: %s", err);
	void *lib = h_cuda;
	CU_FUNCS(LOAD)
	if (missing)
		return gpu__why(why, len, ZB_ERR_UNAVAILABLE,
				"libcuda.so.1 lacks %s (driver too old)", missing);
	p_cuMemGetHandleForAddressRange = (__typeof__(p_cuMemGetHandleForAddressRange))
		dlsym(h_cuda, "cuMemGetHandleForAddressRange");
	CUresult r = p_cuInit(0);
	if (r != CUDA_SUCCESS) {
		const char *name = "?";
		p_cuGetErrorName(r, &name);
		return gpu__why(why, len, ZB_ERR_UNAVAILABLE, "cuInit: %s", name);
	}
	if (p_cuDeviceGetCount(&n) != CUDA_SUCCESS || n == 0)
		return gpu__why(why, len, ZB_ERR_UNAVAILABLE, "no CUDA device");
	load_nvrtc();
	load_cublas();
	int ver = 0;
	p_cuDriverGetVersion(&ver);
	return gpu__why(why, len, 0, "usable: %d device(s), driver %d; nvrtc %s; cublas %s",
			n, ver, p_nvrtcCompileProgram ? "ok" : nvrtc_why,
			p_cublasSgemm_v2 ? "ok" : cublas_why);
}

static int cu_device_count(void)
{
	int n = 0;
	return p_cuDeviceGetCount(&n) == CUDA_SUCCESS ? n : 0;
}

static int attr(CUdevice d, CUdevice_attribute a)
{
	int v = 0;
	return p_cuDeviceGetAttribute(&v, a, d) == CUDA_SUCCESS ? v : 0;
}

static int cu_device_info(int index, struct gpu_device_info *out)
{
	CUdevice d;
	size_t mem = 0;
	int ver = 0;

	if (p_cuDeviceGet(&d, index) != CUDA_SUCCESS)
		return ZB_ERR_DEVICE;
	out->index = index;
	p_cuDeviceGetName(out->name, sizeof(out->name), d);
	p_cuDeviceTotalMem_v2(&mem, d);
	p_cuDriverGetVersion(&ver);
	snprintf(out->driver, sizeof(out->driver), "CUDA driver %d, sm_%d%d", ver,
		 attr(d, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
		 attr(d, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR));
	out->mem_bytes = mem;
	out->compute_units = (uint32_t)attr(d, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
	out->fp64 = out->int64 = out->fp16 = true;
	out->dmabuf = p_cuMemGetHandleForAddressRange &&
		      attr(d, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED);
	return 0;
}

struct cu_be {
	CUdevice dev;
	CUcontext cuctx;
	CUmodule mod;
	CUfunction reduce[ZB_DTYPE_COUNT], scale[ZB_DTYPE_COUNT], sgemm;
	cublasHandle_t blas;
	unsigned max_blocks;
};

static int cu_err(CUresult r)
{
	return r == CUDA_SUCCESS ? 0
	       : r == CUDA_ERROR_OUT_OF_MEMORY ? -ENOMEM
	       : r == CUDA_ERROR_INVALID_VALUE ? -EINVAL : ZB_ERR_DEVICE;
}

#define BE(ctx) ((struct cu_be *)(ctx)->be)
#define CUR(ctx) p_cuCtxSetCurrent(BE(ctx)->cuctx)
#define CS(s) ((CUstream)(s)->be)

static void cu_close(struct gpu_ctx *ctx)
{
	struct cu_be *be = ctx->be;
	if (!be)
		return;
	CUR(ctx);
	if (be->blas)
		p_cublasDestroy_v2(be->blas);
	if (be->mod)
		p_cuModuleUnload(be->mod);
	if (be->cuctx)
		p_cuDevicePrimaryCtxRelease_v2(be->dev);
	free(be);
	ctx->be = NULL;
}

static int load_kernels(struct gpu_ctx *ctx, struct cu_be *be)
{
	char arch[16], log[GPU_WHY_LEN - 64];
	void *img = NULL;
	size_t len = 0;

	snprintf(arch, sizeof(arch), "sm_%d%d",
		 attr(be->dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
		 attr(be->dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR));
	int rc = gpu__nvrtc_compile(arch, &img, &len, log, sizeof(log));
	if (rc < 0)
		return gpu__why(ctx->why, sizeof(ctx->why), rc,
				"NVRTC for %s: %s", arch, log);
	CUresult r = p_cuModuleLoadData(&be->mod, img);
	free(img);
	if (r != CUDA_SUCCESS) {
		const char *name = "?";
		p_cuGetErrorName(r, &name);
		return gpu__why(ctx->why, sizeof(ctx->why), ZB_ERR_DEVICE,
				"cuModuleLoadData(%s cubin): %s", arch, name);
	}
	for (int t = 0; rc == 0 && t < ZB_DTYPE_COUNT; t++) {
		char name[32];
		snprintf(name, sizeof(name), "zb_reduce_%d", t);
		rc = cu_err(p_cuModuleGetFunction(&be->reduce[t], be->mod, name));
		snprintf(name, sizeof(name), "zb_scale_%d", t);
		if (rc == 0)
			rc = cu_err(p_cuModuleGetFunction(&be->scale[t], be->mod, name));
	}
	return rc ? rc : cu_err(p_cuModuleGetFunction(&be->sgemm, be->mod, "zb_sgemm"));
}

static int cu_open(struct gpu_ctx *ctx, int index)
{
	struct cu_be *be = calloc(1, sizeof(*be));
	int rc;

	if (!be)
		return -ENOMEM;
	ctx->be = be;
	ctx->max_chunk = 0;
	rc = cu_err(p_cuDeviceGet(&be->dev, index));
	if (!rc)
		rc = cu_err(p_cuDevicePrimaryCtxRetain(&be->cuctx, be->dev));
	if (!rc)
		rc = cu_err(p_cuCtxSetCurrent(be->cuctx));
	if (rc)
		goto fail;
	/* without NVRTC, reduce/scale report ZB_ERR_UNSUPPORTED */
	if (p_nvrtcCompileProgram && (rc = load_kernels(ctx, be)) < 0)
		goto fail;
	if (p_cublasSgemm_v2 && p_cublasCreate_v2(&be->blas) != CUBLAS_STATUS_SUCCESS)
		be->blas = NULL;
	be->max_blocks = 32u * (unsigned)(ctx->dev.compute_units ? ctx->dev.compute_units : 1);
	return 0;
fail:
	cu_close(ctx);
	return rc;
}

static int cu_chunk_alloc(struct gpu_ctx *ctx, size_t bytes, gpu_ptr_t *base,
			  void **handle)
{
	CUdeviceptr p = 0;
	CUR(ctx);
	int rc = cu_err(p_cuMemAlloc_v2(&p, bytes));
	if (rc)
		return rc == ZB_ERR_DEVICE ? -ENOMEM : rc;
	*base = (gpu_ptr_t)p;
	*handle = NULL;
	return 0;
}

static void cu_chunk_free(struct gpu_ctx *ctx, gpu_ptr_t base, void *handle)
{
	(void)handle;
	CUR(ctx);
	p_cuMemFree_v2((CUdeviceptr)base);
}

static int cu_host_alloc(struct gpu_ctx *ctx, size_t bytes, void **out)
{
	CUR(ctx);
	int rc = cu_err(p_cuMemHostAlloc(out, bytes, CU_MEMHOSTALLOC_PORTABLE));
	return rc ? -ENOMEM : 0;
}

static void cu_host_free(struct gpu_ctx *ctx, void *p)
{
	CUR(ctx);
	p_cuMemFreeHost(p);
}

static int cu_stream_create(struct gpu_ctx *ctx, struct gpu_stream *s)
{
	CUstream cs = NULL;
	CUR(ctx);
	int rc = cu_err(p_cuStreamCreate(&cs, CU_STREAM_NON_BLOCKING));
	s->be = cs;
	return rc;
}

static void cu_stream_destroy(struct gpu_ctx *ctx, struct gpu_stream *s)
{
	CUR(ctx);
	if (s->be)
		p_cuStreamDestroy_v2(CS(s));
	s->be = NULL;
}

static int cu_stream_sync(struct gpu_ctx *ctx, struct gpu_stream *s)
{
	CUR(ctx);
	return cu_err(p_cuStreamSynchronize(CS(s)));
}

static int cu_h2d(struct gpu_ctx *ctx, struct gpu_stream *s, gpu_ptr_t dst,
		  const void *src, size_t bytes)
{
	CUR(ctx);
	return cu_err(p_cuMemcpyHtoDAsync_v2((CUdeviceptr)dst, src, bytes, CS(s)));
}

static int cu_d2h(struct gpu_ctx *ctx, struct gpu_stream *s, void *dst,
		  gpu_ptr_t src, size_t bytes)
{
	CUR(ctx);
	return cu_err(p_cuMemcpyDtoHAsync_v2(dst, (CUdeviceptr)src, bytes, CS(s)));
}

static int cu_d2d(struct gpu_ctx *ctx, struct gpu_stream *s, gpu_ptr_t dst,
		  gpu_ptr_t src, size_t bytes)
{
	CUR(ctx);
	return cu_err(p_cuMemcpyDtoDAsync_v2((CUdeviceptr)dst, (CUdeviceptr)src,
					     bytes, CS(s)));
}

static int cu_memset(struct gpu_ctx *ctx, struct gpu_stream *s, gpu_ptr_t dst,
		     int byte, size_t bytes)
{
	CUR(ctx);
	return cu_err(p_cuMemsetD8Async((CUdeviceptr)dst, (unsigned char)byte,
					bytes, CS(s)));
}

static unsigned blocks_for(const struct cu_be *be, size_t count)
{
	size_t b = (count + 255) / 256;
	return b > be->max_blocks ? be->max_blocks : (unsigned)b;
}

static int cu_reduce(struct gpu_ctx *ctx, struct gpu_stream *s, gpu_ptr_t dst,
		     gpu_ptr_t src, size_t count, enum zb_dtype dtype,
		     enum zb_redop op)
{
	struct cu_be *be = BE(ctx);
	if (!be->reduce[dtype])
		return ZB_ERR_UNSUPPORTED;
	CUdeviceptr d = (CUdeviceptr)dst, sp = (CUdeviceptr)src;
	unsigned long long n = count;
	int o = (int)op;
	void *args[] = {&d, &sp, &n, &o};
	CUR(ctx);
	return cu_err(p_cuLaunchKernel(be->reduce[dtype],
				       blocks_for(be, gpu__kernel_threads(count, dtype, dst, src)),
				       1, 1, 256, 1, 1, 0, CS(s), args, NULL));
}

static int cu_scale(struct gpu_ctx *ctx, struct gpu_stream *s, gpu_ptr_t buf,
		    size_t count, enum zb_dtype dtype, double factor)
{
	struct cu_be *be = BE(ctx);
	if (!be->scale[dtype])
		return ZB_ERR_UNSUPPORTED;
	CUdeviceptr d = (CUdeviceptr)buf;
	unsigned long long n = count;
	float ff = (float)factor;
	void *args[] = {&d, &n, &ff, &factor};
	CUR(ctx);
	return cu_err(p_cuLaunchKernel(be->scale[dtype],
				       blocks_for(be, gpu__kernel_threads(count, dtype, buf, buf)),
				       1, 1, 256, 1, 1, 0, CS(s), args, NULL));
}

static int cu_sgemm(struct gpu_ctx *ctx, struct gpu_stream *s, bool ta,
		    bool tb, int m, int n, int k, float alpha, gpu_ptr_t a,
		    int lda, gpu_ptr_t b, int ldb, float beta, gpu_ptr_t c,
		    int ldc)
{
	struct cu_be *be = BE(ctx);
	CUR(ctx);
	if (!be->blas && be->sgemm) { /* no cuBLAS: the NVRTC-compiled kernel */
		int ta_ = ta, tb_ = tb;
		void *args[] = {&ta_, &tb_, &m, &n, &k, &alpha, &a, &lda, &b, &ldb,
				&beta, &c, &ldc};
		return cu_err(p_cuLaunchKernel(be->sgemm, (unsigned)(m + 15) / 16,
					       (unsigned)(n + 15) / 16, 1, 16, 16, 1,
					       0, CS(s), args, NULL));
	}
	if (!be->blas)
		return ZB_ERR_UNSUPPORTED;
	if (p_cublasSetStream_v2(be->blas, (cudaStream_t)CS(s)) != CUBLAS_STATUS_SUCCESS)
		return ZB_ERR_DEVICE;
	cublasStatus_t st = p_cublasSgemm_v2(
		be->blas, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
		m, n, k, &alpha, (const float *)(uintptr_t)a, lda,
		(const float *)(uintptr_t)b, ldb, &beta, (float *)(uintptr_t)c, ldc);
	return st == CUBLAS_STATUS_SUCCESS ? 0 : ZB_ERR_DEVICE;
}

struct cu_kernel {
	CUmodule mod;
	CUfunction fn;
};

static int cu_kernel_compile(struct gpu_ctx *ctx, const char *src,
			     const char *entry, void **out, char *log,
			     size_t log_len)
{
	struct cu_be *be = BE(ctx);
	nvrtcProgram prog;
	char arch[48];

	if (!p_nvrtcCompileProgram)
		return gpu__why(log, log_len, ZB_ERR_UNSUPPORTED, "NVRTC unavailable: %s", nvrtc_why);
	snprintf(arch, sizeof(arch), "--gpu-architecture=sm_%d%d",
		 attr(be->dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
		 attr(be->dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR));
	const char *opts[] = {arch};
	if (p_nvrtcCreateProgram(&prog, src, "user.cu", 0, NULL, NULL) != NVRTC_SUCCESS)
		return -ENOMEM;
	int rc = 0;
	size_t n = 0;
	void *img = NULL;
	if (p_nvrtcCompileProgram(prog, 1, opts) != NVRTC_SUCCESS) {
		p_nvrtcGetProgramLogSize(prog, &n);
		char *buf = malloc(n + 1);
		if (buf && p_nvrtcGetProgramLog(prog, buf) == NVRTC_SUCCESS)
			gpu__why(log, log_len, 0, "%s", buf);
		free(buf);
		rc = -EINVAL;
	} else if (p_nvrtcGetCUBINSize(prog, &n) != NVRTC_SUCCESS || !(img = malloc(n)) ||
		   p_nvrtcGetCUBIN(prog, img) != NVRTC_SUCCESS) {
		rc = ZB_ERR_DEVICE;
	}
	p_nvrtcDestroyProgram(&prog);
	struct cu_kernel *k = rc ? NULL : calloc(1, sizeof(*k));
	if (!rc && !k)
		rc = -ENOMEM;
	CUR(ctx);
	if (!rc)
		rc = cu_err(p_cuModuleLoadData(&k->mod, img));
	if (!rc && (rc = cu_err(p_cuModuleGetFunction(&k->fn, k->mod, entry))) < 0) {
		gpu__why(log, log_len, 0, "no entry point '%s'", entry);
		p_cuModuleUnload(k->mod);
	}
	free(img);
	if (rc) {
		free(k);
		return rc;
	}
	*out = k;
	return 0;
}

static int cu_kernel_launch(struct gpu_ctx *ctx, struct gpu_stream *s, void *kp,
			    const unsigned grid[3], const unsigned block[3],
			    void **args)
{
	struct cu_kernel *k = kp;
	CUR(ctx);
	return cu_err(p_cuLaunchKernel(k->fn, grid[0], grid[1], grid[2], block[0],
				       block[1], block[2], 0, CS(s), args, NULL));
}

static void cu_kernel_free(struct gpu_ctx *ctx, void *kp)
{
	struct cu_kernel *k = kp;
	CUR(ctx);
	p_cuModuleUnload(k->mod);
	free(k);
}

/* DMA-BUF of the page-aligned span around [p, p+len) (the driver requires
 * host-page alignment; NCCL's net_ib does the same). */
static int cu_dmabuf_export(struct gpu_ctx *ctx, gpu_ptr_t p, size_t len,
			    int *fd, uint64_t *offset)
{
	if (!ctx->dev.dmabuf)
		return ZB_ERR_UNSUPPORTED;
	uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
	uint64_t start = p & ~(pg - 1), end = (p + len + pg - 1) & ~(pg - 1);
	int f = -1;
	CUR(ctx);
	CUresult r = p_cuMemGetHandleForAddressRange(&f, (CUdeviceptr)start, end - start,
						     CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
	if (r != CUDA_SUCCESS)
		return ZB_ERR_UNSUPPORTED;
	*fd = f;
	*offset = p - start;
	return 0;
}

const struct gpu_ops gpu__cuda_ops = {
	.version = GPU_OPS_VERSION,
	.name = "cuda",
	.id = GPU_CUDA,
	.probe = cu_probe,
	.device_count = cu_device_count,
	.device_info = cu_device_info,
	.open = cu_open,
	.close = cu_close,
	.chunk_alloc = cu_chunk_alloc,
	.chunk_free = cu_chunk_free,
	.host_alloc = cu_host_alloc,
	.host_free = cu_host_free,
	.stream_create = cu_stream_create,
	.stream_destroy = cu_stream_destroy,
	.stream_sync = cu_stream_sync,
	.h2d = cu_h2d,
	.d2h = cu_d2h,
	.d2d = cu_d2d,
	.memset = cu_memset,
	.reduce = cu_reduce,
	.scale = cu_scale,
	.sgemm = cu_sgemm,
	.kernel_compile = cu_kernel_compile,
	.kernel_launch = cu_kernel_launch,
	.kernel_free = cu_kernel_free,
	.dmabuf_export = cu_dmabuf_export,
};

#else /* !ZB_GPU_HAVE_CUDA */

int gpu__nvrtc_compile(const char *arch, void **image, size_t *len, char *log,
		       size_t log_len)
{
	(void)arch; (void)image; (void)len;
	return gpu__why(log, log_len, ZB_ERR_UNAVAILABLE,
			"cuda backend not compiled in (no CUDA headers at build time)");
}

static int cu_probe(char *why, size_t len)
{
	return gpu__why(why, len, ZB_ERR_UNAVAILABLE,
			"not compiled in (no CUDA headers at build time)");
}

const struct gpu_ops gpu__cuda_ops = {
	.version = GPU_OPS_VERSION,
	.name = "cuda",
	.id = GPU_CUDA,
	.probe = cu_probe,
};
#endif
