/* zbmd/gpu.h — GPU backends (cpu, cuda, hip, vulkan), device memory pools,
 * tensors, and the host-side reduction used by the collectives.
 *
 * gpu/ builds and tests with no DPDK and no config module: callers pass a
 * small options struct (the CLI maps the [gpu] section onto it).
 *
 * Errors: every int function returns 0 or a negative errno / ZB_ERR_* code
 * (see common.h); nothing here prints or exits.
 */
#ifndef ZBMD_GPU_H
#define ZBMD_GPU_H

#include "zbmd/common.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- backends ------------------------------------------------------------ */

enum gpu_backend {
	GPU_AUTO = 0, /* CUDA -> HIP -> Vulkan -> CPU, first usable one */
	GPU_CPU,
	GPU_CUDA,
	GPU_HIP,
	GPU_VULKAN,
	GPU_BACKEND_COUNT
};

const char *gpu_backend_name(enum gpu_backend b);           /* "cpu", ... */
int gpu_backend_parse(const char *s, enum gpu_backend *out); /* 0 / -EINVAL */

/* Whether the backend was compiled into this binary. */
bool gpu_backend_compiled(enum gpu_backend b);

/* Whether it can be used on this machine: 0, or ZB_ERR_UNAVAILABLE with the
 * reason written to why ("libcuda.so.1 not found: ...", "no Vulkan device").
 * Loads the backend's libraries on first call (dlopen); thread-safe. */
int gpu_backend_probe(enum gpu_backend b, char *why, size_t why_len);

struct gpu_device_info {
	int index;
	char name[128];
	char driver[64];          /* "OpenBLAS 0.3.21", "CUDA driver 12040", ... */
	uint64_t mem_bytes;       /* device memory (cpu: NUMA node memory) */
	int numa_node;            /* -1 unknown */
	uint32_t compute_units;
	bool fp64, int64, fp16;   /* dtype support of the reduction kernels */
	bool dmabuf;              /* device memory exportable as DMA-BUF */
	bool software;            /* a CPU implementation (Vulkan lavapipe): auto skips it */
};

/* Number of devices of a usable backend (>= 0), or ZB_ERR_UNAVAILABLE. */
int gpu_device_count(enum gpu_backend b);
/* 0, -EINVAL (index out of range), ZB_ERR_UNAVAILABLE. */
int gpu_device_info(enum gpu_backend b, int index, struct gpu_device_info *out);

/* ---- contexts -------------------------------------------------------------
 * A context is one device of one backend with its memory pool and default
 * stream.  Calls on one context must be serialised by the caller (one owner
 * thread, as the lcore or actor that owns it); distinct contexts are
 * independent. */

struct gpu_options {
	enum gpu_backend backend; /* GPU_AUTO by default */
	int device;               /* index within the backend, default 0 */
	size_t pool_bytes;        /* device memory reserved at open (default 64 MiB;
				   * at most 2^62, as one gpu_alloc) */
	size_t pool_max_bytes;    /* the pool may grow up to this; 0 = no growth */
	int numa_node;            /* cpu backend: node to allocate on; -1 = local */
	int cpu_threads;          /* cpu backend: BLAS threads of the process
				   * (OpenBLAS: process-wide); 0 = its default */
};
void gpu_options_default(struct gpu_options *o);

/* The [gpu] section of the config onto the options, for callers that have
 * the config (gpu/ itself does not depend on it): defined only when
 * zbmd/config.h is included before this header. */
#ifdef ZBMD_CONFIG_H
static_assert((int)CFG_GPU_AUTO == (int)GPU_AUTO && (int)CFG_GPU_CPU == (int)GPU_CPU &&
	      (int)CFG_GPU_CUDA == (int)GPU_CUDA && (int)CFG_GPU_HIP == (int)GPU_HIP &&
	      (int)CFG_GPU_VULKAN == (int)GPU_VULKAN, "cfg and gpu backend enums agree");
static inline void gpu_options_from_config(const struct zb_config *c,
					   struct gpu_options *o)
{
	gpu_options_default(o);
	o->backend = (enum gpu_backend)c->gpu.backend;
	o->device = c->gpu.device;
	if (c->gpu.pool_mb)
		o->pool_bytes = (size_t)c->gpu.pool_mb << 20;
	o->cpu_threads = (int)c->gpu.cpu_threads;
}
#endif

struct gpu_ctx;
struct gpu_stream;

/* Device addresses.  cpu, cuda and hip: the real address (a host pointer
 * for cpu, a CUdeviceptr / hipDeviceptr_t otherwise).  vulkan: a synthetic
 * address (pool chunk tag | offset) that only this context understands.
 * 0 is never a valid allocation. */
typedef uint64_t gpu_ptr_t;

/* Open the backend and device of *o.  GPU_AUTO takes the first usable one.
 * Returns 0, ZB_ERR_UNAVAILABLE (reason in why), -EINVAL (bad options),
 * -ENOMEM (the pool reservation failed, or pool_bytes above 2^62),
 * ZB_ERR_DEVICE. */
int gpu_open(const struct gpu_options *o, struct gpu_ctx **out, char *why,
	     size_t why_len);
/* Releases the pool (every allocation, tensors included) and the device.
 * Streams and kernels made on it must be destroyed before. */
void gpu_close(struct gpu_ctx *ctx);
enum gpu_backend gpu_ctx_backend(const struct gpu_ctx *ctx);
const struct gpu_device_info *gpu_ctx_device(const struct gpu_ctx *ctx);

/* ---- memory ---------------------------------------------------------------
 * Device memory comes from the context's pool: blocks up to 64 KiB from
 * size-class slabs (256 B .. 64 KiB), larger ones best-fit from a free list
 * that coalesces on free.  Every block is 256-byte aligned.
 * gpu_alloc: 0, -EINVAL (size 0), -ENOMEM (pool exhausted / device out of
 * memory / bookkeeping full) — never an abort.
 * gpu_free: 0, -EINVAL (not an allocation of this context; nothing freed).
 *   It does not wait for queued work: sync the streams that use the block
 *   first (the block may be handed out again at once). */
int gpu_alloc(struct gpu_ctx *ctx, size_t bytes, gpu_ptr_t *out);
int gpu_free(struct gpu_ctx *ctx, gpu_ptr_t p);

struct gpu_pool_stats {
	uint64_t reserved_bytes;  /* taken from the device */
	uint64_t used_bytes;      /* handed out (rounded to class / 256 B) */
	uint64_t largest_free;    /* largest block the large allocator can give */
	uint32_t chunks, slabs, free_ranges, live_allocs;
	uint64_t allocs, frees, failed;
};
void gpu_pool_stats(const struct gpu_ctx *ctx, struct gpu_pool_stats *st);

/* Pinned (page-locked) host memory where the backend has it (cuda, hip),
 * plain aligned memory otherwise.  0, -EINVAL, -ENOMEM. */
int gpu_host_alloc(struct gpu_ctx *ctx, size_t bytes, void **out);
void gpu_host_free(struct gpu_ctx *ctx, void *p);

/* ---- streams --------------------------------------------------------------
 * Work on a stream runs in order; gpu_stream_sync waits for all of it.
 * stream == NULL means the context's default stream.  Copies, memset,
 * reduce, scale and sgemm are asynchronous: host buffers given to them must
 * stay valid until the next sync of that stream (cpu runs them inline). */
int gpu_stream_create(struct gpu_ctx *ctx, struct gpu_stream **out);
void gpu_stream_destroy(struct gpu_ctx *ctx, struct gpu_stream *s);
int gpu_stream_sync(struct gpu_ctx *ctx, struct gpu_stream *s);

/* Every device range is checked against the pool: a range that is not
 * inside one live chunk is -EINVAL, never a fault.  Zero length is a no-op. */
int gpu_memcpy_h2d(struct gpu_ctx *ctx, struct gpu_stream *s, gpu_ptr_t dst,
		   const void *src, size_t bytes);
int gpu_memcpy_d2h(struct gpu_ctx *ctx, struct gpu_stream *s, void *dst,
		   gpu_ptr_t src, size_t bytes);
int gpu_memcpy_d2d(struct gpu_ctx *ctx, struct gpu_stream *s, gpu_ptr_t dst,
		   gpu_ptr_t src, size_t bytes);
int gpu_memset(struct gpu_ctx *ctx, struct gpu_stream *s, gpu_ptr_t dst,
	       int byte, size_t bytes);

/* Device reduce / scale: the semantics of gpu_host_reduce / gpu_host_scale
 * (the reference).  Buffers must be aligned to the element size (-EINVAL
 * otherwise).  ZB_ERR_UNSUPPORTED where the device lacks the dtype (e.g. a
 * Vulkan device without shaderFloat64 for f64). */
int gpu_reduce(struct gpu_ctx *ctx, struct gpu_stream *s, gpu_ptr_t dst,
	       gpu_ptr_t src, size_t count, enum zb_dtype dtype,
	       enum zb_redop op);
int gpu_scale(struct gpu_ctx *ctx, struct gpu_stream *s, gpu_ptr_t buf,
	      size_t count, enum zb_dtype dtype, double factor);

/* C = alpha * op(A) * op(B) + beta * C, column-major (BLAS convention),
 * op(A) m x k, op(B) k x n, C m x n.  0, -EINVAL (bad dims/leading dims). */
int gpu_sgemm(struct gpu_ctx *ctx, struct gpu_stream *s, bool trans_a,
	      bool trans_b, int m, int n, int k, float alpha, gpu_ptr_t a,
	      int lda, gpu_ptr_t b, int ldb, float beta, gpu_ptr_t c, int ldc);

/* ---- run-time kernel compilation (NVRTC / hipRTC) -------------------------
 * Compile CUDA/HIP C source and fetch one extern "C" __global__ entry.
 * ZB_ERR_UNSUPPORTED on cpu and vulkan (SPIR-V is compiled at build time);
 * -EINVAL with the compiler log in log on a compile error. */
struct gpu_kernel;
int gpu_kernel_compile(struct gpu_ctx *ctx, const char *src, const char *entry,
		       struct gpu_kernel **out, char *log, size_t log_len);
/* args: array of pointers to each argument, as cuLaunchKernel takes them. */
int gpu_kernel_launch(struct gpu_ctx *ctx, struct gpu_stream *s,
		      struct gpu_kernel *k, const unsigned grid[3],
		      const unsigned block[3], void **args);
void gpu_kernel_free(struct gpu_ctx *ctx, struct gpu_kernel *k);

/* ---- tensors ---------------------------------------------------------------
 * A dense row-major tensor on one context.  Migration copies it to another
 * context (another device or backend) through a host staging buffer, or
 * device-to-device when both are the same context. */
#define GPU_TENSOR_MAX_DIMS 8
struct gpu_tensor {
	struct gpu_ctx *ctx;
	gpu_ptr_t data;
	enum zb_dtype dtype;
	int ndim;
	int64_t shape[GPU_TENSOR_MAX_DIMS];
	size_t count, bytes;
};
/* 0, -EINVAL (ndim/shape), -ENOMEM. */
int gpu_tensor_create(struct gpu_ctx *ctx, enum zb_dtype dtype, int ndim,
		      const int64_t *shape, struct gpu_tensor *out);
void gpu_tensor_destroy(struct gpu_tensor *t);
int gpu_tensor_upload(struct gpu_tensor *t, const void *host, size_t bytes);
int gpu_tensor_download(const struct gpu_tensor *t, void *host, size_t bytes);
/* Creates *out on dst with the same shape/dtype/contents; t is untouched. */
int gpu_tensor_migrate(const struct gpu_tensor *t, struct gpu_ctx *dst,
		       struct gpu_tensor *out);

/* ---- GPU memory on the wire (for the rdma provider) ------------------------
 * The rdma provider registers device memory for GPUDirect RDMA on top of
 * this; gpu/ never calls libibverbs itself. */
enum gpu_reg_path {
	GPU_REG_DMABUF = 0, /* export a DMA-BUF fd, then ibv_reg_dmabuf_mr */
	GPU_REG_PEERMEM,    /* ibv_reg_mr on the device pointer (nvidia_peermem) */
	GPU_REG_STAGING,    /* copy through pinned host buffers */
	GPU_REG_HOST,       /* the memory is host memory (cpu backend): ibv_reg_mr */
};
const char *gpu_reg_path_name(enum gpu_reg_path p);

/* Export [p, p+len) as a DMA-BUF: *fd (caller closes it) and *offset of p
 * inside it.  0, ZB_ERR_UNSUPPORTED (backend/driver cannot), -EINVAL. */
int gpu_dmabuf_export(struct gpu_ctx *ctx, gpu_ptr_t p, size_t len, int *fd,
		      uint64_t *offset);
/* Whether a peer-memory kernel module (nvidia_peermem / nv_peer_mem) is
 * loaded (reads /proc/modules; proc_modules NULL = the real one). */
bool gpu_peermem_available(const char *proc_modules);
/* Which path registering [p, p+len) would take, and why (human text). */
enum gpu_reg_path gpu_reg_path_for(struct gpu_ctx *ctx, gpu_ptr_t p,
				   size_t len, char *why, size_t why_len);

/* ---- host reduction (used by the collectives on host buffers) ----------
 *
 * gpu_host_reduce: dst[i] = dst[i] OP src[i] for i in [0, count).
 *   ZB_AVG accumulates a sum; the caller divides by n at the end with
 *   gpu_host_avg (not gpu_host_scale(1.0 / n): for integers that is not
 *   x / n, see gpu_host_avg).  f16/bf16 are computed in f32 and rounded back to
 *   nearest-even (the algorithms of zb_f32_to_f16 / zb_f32_to_bf16; for f16
 *   values that round up to the smallest normal, 0x0400 where common.c
 *   currently gives 0).  Integer sum and prod wrap
 *   modulo 2^bits (no undefined behaviour).  min/max on floats: a NaN in dst
 *   is kept, a NaN in src is ignored (the SIMD minps/maxps rule).  f16/bf16
 *   sum/prod with a NaN operand: dst's NaN if it is one, else src's, quieted
 *   (bf16 | 0x0040, f16 sign | 0x7e00), on every backend.
 *   dst and src may be the same buffer; a partial overlap is -EINVAL.
 *   count == 0 is a no-op (the pointers may then be NULL).
 * Returns 0, or -EINVAL (NULL buffer with count > 0, bad dtype/op, partial
 * overlap); dst is unaltered on error.  Thread-safe (no shared state).
 */
int gpu_host_reduce(void *dst, const void *src, size_t count,
		    enum zb_dtype dtype, enum zb_redop op);

/* gpu_host_reduce_into: dst[i] = x[i] OP src[i] — gpu_host_reduce with the
 * first operand read from x (x == dst is gpu_host_reduce), so that a
 * combination into a third buffer takes one pass instead of a copy and a
 * reduction (the collectives' receives). Same rules: the first operand is
 * x (NaN kept from it in float min/max); dst may equal x or src, but not
 * partially overlap either; x and src may overlap freely. Returns 0 or
 * -EINVAL; dst unaltered on error. */
int gpu_host_reduce_into(void *dst, const void *x, const void *src,
			 size_t count, enum zb_dtype dtype, enum zb_redop op);

/* gpu_host_scale: buf[i] = buf[i] * factor.
 *   f32: multiplied by (float)factor; f64: by factor; f16/bf16: in f32, then
 *   rounded back; i32: computed in double, i64: exactly (no double rounding:
 *   factor 1.0 is the identity for every int64), both rounded to nearest
 *   (ties away from zero) and saturated to the type's range.
 * Returns 0 or -EINVAL (NULL with count > 0, bad dtype, factor not finite
 * in the type it multiplies in: (float)factor for f32/f16/bf16, so 1e300
 * is refused there; buf unaltered). */
int gpu_host_scale(void *buf, size_t count, enum zb_dtype dtype, double factor);

/* gpu_host_avg: buf[i] = buf[i] / n, the last step of ZB_AVG over n ranks
 * (buf holds the sum, as gpu_host_reduce accumulates it).
 *   Floats: gpu_host_scale(buf, count, dtype, 1.0 / n) (one rounding).
 *   i32/i64: the exact quotient rounded to nearest, ties away from zero, in
 *   integer arithmetic (-1605583 / 98 = -16383.5 gives -16384; rounding
 *   x * (1.0 / n) gave -16383, and an i64 sum lost its bits above 2^53).
 *   The collectives' avg (dataplane/coll.c) calls this function.
 *   On device buffers: gpu_scale(1.0 / n) is the same for floats; there is
 *   no device integer avg (copy back and use this).
 * Returns 0 or -EINVAL (NULL with count > 0, bad dtype, n not in
 * [1, INT32_MAX]); buf unaltered on error.  Thread-safe. */
int gpu_host_avg(void *buf, size_t count, enum zb_dtype dtype, uint32_t n);

/* ---- commands (cli/main.c rows) ------------------------------------------- */
int gpu_cmd_info(int argc, char **argv);  /* zbmd gpu-info */
int gpu_cmd_bench(int argc, char **argv); /* zbmd bench gpu [--backend B] */

#endif /* ZBMD_GPU_H */
