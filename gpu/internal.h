/* gpu/internal.h — shared-internal declarations of the gpu module (gpu__*).
 * Not a public header: only gpu/ sources and tests/gpu include it. */
#ifndef ZBMD_GPU_INTERNAL_H
#define ZBMD_GPU_INTERNAL_H

#include "zbmd/common.h"
#include "zbmd/gpu.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* Threads a reduce/scale kernel of gpu/kernels/zb_kernels.cu needs: one per
 * element, but for the 16-bit types with dst and src equally aligned modulo
 * 16 bytes one per 8 elements (their 16-byte vector loop), plus a few for
 * the head and tail it does element by element. */
static inline size_t gpu__kernel_threads(size_t count, enum zb_dtype dt,
					 uint64_t dst, uint64_t src)
{
	if ((dt == ZB_F16 || dt == ZB_BF16) && ((dst ^ src) & 15) == 0)
		return count / 8 + 8;
	return count;
}

/* Whether gpu_host_scale / gpu_scale take factor for dtype: finite in the
 * type it multiplies in, float for f32/f16/bf16 (a finite double such as
 * 1e300 becomes inf there: 1 gave inf and 0 gave NaN), double otherwise. */
static inline bool gpu__scale_factor_ok(enum zb_dtype dt, double factor)
{
	if ((unsigned)dt >= ZB_DTYPE_COUNT || !__builtin_isfinite(factor))
		return false;
	if (dt == ZB_F32 || dt == ZB_F16 || dt == ZB_BF16)
		return __builtin_isfinite((float)factor);
	return true;
}

/* ---- branch-free half-precision conversions ------------------------------
 * The algorithms of zb_f16_to_f32 & co in common/common.c, inline and
 * written as selects so that gcc vectorises the loops that use them, with
 * one fix: f32 -> f16 of a value just below 2^-14 that rounds up to the
 * smallest normal (|x| in [0x387fe000, 0x38800000) as f32 bits) gives
 * 0x0400; common.c masks the carry away and returns 0 there.  The tests
 * check these against an exact double-based reference on every 16-bit
 * input and a sweep of f32 inputs. */
static inline uint32_t gpu__f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float gpu__u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline float gpu__bf16_to_f32(uint16_t h)
{
	return gpu__u2f((uint32_t)h << 16);
}

/* Select by mask (all ones / all zeros): gcc if-converts and vectorises
 * these where it would keep a branch for a nested ?: chain. */
static inline uint32_t gpu__mask(bool c) { return (uint32_t)0 - (uint32_t)c; }

static inline uint16_t gpu__f32_to_bf16(float f)
{
	uint32_t u = gpu__f2u(f);
	uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
	uint32_t quiet = (u >> 16) | 0x40u;
	uint32_t nan = gpu__mask((u & 0x7fffffffu) > 0x7f800000u);
	return (uint16_t)((quiet & nan) | (rounded & ~nan));
}

static inline float gpu__f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
	uint32_t norm = sign | ((exp + 112u) << 23) | (man << 13);
	uint32_t infnan = sign | 0x7f800000u | (man << 13);
	/* subnormal (and zero): man * 2^-24, exact in f32 */
	uint32_t sub = sign | gpu__f2u((float)man * (1.0f / 16777216.0f));
	uint32_t m_sub = gpu__mask(exp == 0), m_inf = gpu__mask(exp == 31);
	return gpu__u2f((sub & m_sub) | (infnan & m_inf) | (norm & ~(m_sub | m_inf)));
}

static inline uint16_t gpu__f32_to_f16(float f)
{
	uint32_t u = gpu__f2u(f);
	uint32_t sign = (u >> 16) & 0x8000u;
	uint32_t a = u & 0x7fffffffu;
	/* subnormal/zero: adding 0.5 lets the FPU round the mantissa; a carry
	 * into bit 10 is the correct smallest-normal encoding 0x0400 */
	uint32_t sub = gpu__f2u(gpu__u2f(a) + 0.5f) - 0x3f000000u;
	/* normal: rebias exponent (-112 << 23) and round to nearest even */
	uint32_t norm = (a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13;
	uint32_t m_nan = gpu__mask(a > 0x7f800000u);
	uint32_t m_inf = gpu__mask(a >= 0x477ff000u) & ~m_nan; /* overflow: inf */
	uint32_t m_sub = gpu__mask(a < 0x38800000u);
	uint32_t r = (0x7e00u & m_nan) | (0x7c00u & m_inf) | (sub & m_sub) |
		     (norm & ~(m_nan | m_inf | m_sub));
	return (uint16_t)(sign | r);
}

/* Block conversions used by the host reduction: hw = true allows the x86
 * F16C path (same bits as the portable one; the test forces each path). */
void gpu__f16_widen(float *out, const uint16_t *in, size_t n, bool hw);
void gpu__f16_narrow(uint16_t *out, const float *in, size_t n, bool hw);

/* ---- the backend interface ---------------------------------------------- */

#define GPU_OPS_VERSION 1
#define GPU_WHY_LEN 256

struct gpu_ctx;
struct gpu_stream;

/* A backend: a const, versioned, named table.  NULL = unsupported (the
 * generic layer returns ZB_ERR_UNSUPPORTED).  Device ranges reach the
 * backend already validated against the pool (in one chunk, in bounds). */
struct gpu_ops {
	uint32_t version; /* GPU_OPS_VERSION */
	const char *name;
	enum gpu_backend id;

	/* 0 or ZB_ERR_UNAVAILABLE with the reason; called once (cached). */
	int (*probe)(char *why, size_t why_len);
	int (*device_count)(void);
	int (*device_info)(int index, struct gpu_device_info *out);

	/* open fills ctx->be and ctx->max_chunk; close frees what open made. */
	int (*open)(struct gpu_ctx *ctx, int index);
	void (*close)(struct gpu_ctx *ctx);

	/* Pool chunks: device memory the pool carves up.  *base must be
	 * 256-byte aligned and non-zero; handle is the backend's. */
	int (*chunk_alloc)(struct gpu_ctx *ctx, size_t bytes, gpu_ptr_t *base,
			   void **handle);
	void (*chunk_free)(struct gpu_ctx *ctx, gpu_ptr_t base, void *handle);

	int (*host_alloc)(struct gpu_ctx *ctx, size_t bytes, void **out);
	void (*host_free)(struct gpu_ctx *ctx, void *p);

	int (*stream_create)(struct gpu_ctx *ctx, struct gpu_stream *s);
	void (*stream_destroy)(struct gpu_ctx *ctx, struct gpu_stream *s);
	int (*stream_sync)(struct gpu_ctx *ctx, struct gpu_stream *s);

	int (*h2d)(struct gpu_ctx *ctx, struct gpu_stream *s, gpu_ptr_t dst,
		   const void *src, size_t bytes);
	int (*d2h)(struct gpu_ctx *ctx, struct gpu_stream *s, void *dst,
		   gpu_ptr_t src, size_t bytes);
	int (*d2d)(struct gpu_ctx *ctx, struct gpu_stream *s, gpu_ptr_t dst,
		   gpu_ptr_t src, size_t bytes);
	int (*memset)(struct gpu_ctx *ctx, struct gpu_stream *s, gpu_ptr_t dst,
		      int byte, size_t bytes);
	int (*reduce)(struct gpu_ctx *ctx, struct gpu_stream *s, gpu_ptr_t dst,
		      gpu_ptr_t src, size_t count, enum zb_dtype dtype,
		      enum zb_redop op);
	int (*scale)(struct gpu_ctx *ctx, struct gpu_stream *s, gpu_ptr_t buf,
		     size_t count, enum zb_dtype dtype, double factor);
	int (*sgemm)(struct gpu_ctx *ctx, struct gpu_stream *s, bool ta, bool tb,
		     int m, int n, int k, float alpha, gpu_ptr_t a, int lda,
		     gpu_ptr_t b, int ldb, float beta, gpu_ptr_t c, int ldc);

	int (*kernel_compile)(struct gpu_ctx *ctx, const char *src,
			      const char *entry, void **out, char *log,
			      size_t log_len);
	int (*kernel_launch)(struct gpu_ctx *ctx, struct gpu_stream *s, void *k,
			     const unsigned grid[3], const unsigned block[3],
			     void **args);
	void (*kernel_free)(struct gpu_ctx *ctx, void *k);

	int (*dmabuf_export)(struct gpu_ctx *ctx, gpu_ptr_t p, size_t len,
			     int *fd, uint64_t *offset);
};

extern const struct gpu_ops gpu__cpu_ops;
extern const struct gpu_ops gpu__vulkan_ops;
extern const struct gpu_ops gpu__cuda_ops;
extern const struct gpu_ops gpu__hip_ops;

/* ---- the pool ---------------------------------------------------------------
 * Host-side bookkeeping over device address ranges (device memory is never
 * dereferenced by the pool, so it serves Vulkan's synthetic addresses too).
 * All bookkeeping arrays are fixed-size members: no malloc after open. */
#define GPU_POOL_MAX_CHUNKS 64
#define GPU_POOL_MAX_RANGES 4096      /* large-allocator nodes */
#define GPU_POOL_MAX_SLABS 256
#define GPU_POOL_ALIGN 256u
#define GPU_POOL_MIN_CLASS_SHIFT 8    /* 256 B */
#define GPU_POOL_MAX_CLASS_SHIFT 16   /* 64 KiB */
#define GPU_POOL_CLASSES (GPU_POOL_MAX_CLASS_SHIFT - GPU_POOL_MIN_CLASS_SHIFT + 1)
#define GPU_POOL_SLAB_BYTES (1u << 20)
#define GPU_POOL_SLAB_BLOCKS_MAX (GPU_POOL_SLAB_BYTES >> GPU_POOL_MIN_CLASS_SHIFT)
static_assert(GPU_POOL_SLAB_BYTES % (1u << GPU_POOL_MAX_CLASS_SHIFT) == 0,
	      "a slab holds a whole number of the largest class");

struct gpu_chunk {
	gpu_ptr_t base;
	size_t bytes;
	void *handle;
	bool live;
};

struct gpu_range {              /* a large-allocator node */
	gpu_ptr_t addr;
	size_t bytes;
	int32_t prev, next;     /* address order within its chunk; -1 ends */
	int32_t next_unused;    /* free-node list */
	uint16_t chunk;
	uint8_t state;          /* 0 unused node, 1 free range, 2 allocated, 3 slab */
	int16_t slab;           /* slab index when state == 3 */
};

struct gpu_slab {
	int32_t range;          /* its node in the large allocator, -1 = unused */
	uint8_t cls;
	uint32_t nblocks, nfree;
	int32_t next;           /* next slab of the same class with free blocks */
	uint64_t bitmap[GPU_POOL_SLAB_BLOCKS_MAX / 64]; /* 1 = allocated */
};

struct gpu_pool {
	struct gpu_chunk chunks[GPU_POOL_MAX_CHUNKS];
	struct gpu_range ranges[GPU_POOL_MAX_RANGES];
	struct gpu_slab slabs[GPU_POOL_MAX_SLABS];
	int32_t unused_head;                  /* free node list */
	int32_t class_head[GPU_POOL_CLASSES]; /* slabs with free blocks */
	size_t max_bytes, chunk_bytes;
	struct gpu_pool_stats st;
};

struct gpu_stream {
	struct gpu_ctx *ctx;
	void *be;               /* backend state */
	bool is_default;
};

struct gpu_kernel {
	void *be;
};

struct gpu_ctx {
	const struct gpu_ops *ops;
	struct gpu_device_info dev;
	struct gpu_options opt;
	void *be;               /* backend state */
	size_t max_chunk;       /* largest chunk the backend can make (0: any) */
	struct gpu_stream default_stream;
	char why[GPU_WHY_LEN];  /* a backend's open() explains a failure here */
	struct gpu_pool pool;
};

int gpu__pool_init(struct gpu_ctx *ctx, size_t reserve, size_t max_bytes);
void gpu__pool_fini(struct gpu_ctx *ctx);
int gpu__pool_alloc(struct gpu_ctx *ctx, size_t bytes, gpu_ptr_t *out);
int gpu__pool_free(struct gpu_ctx *ctx, gpu_ptr_t p);
/* The chunk holding [p, p+len), its handle and p's offset in it: 0 or -EINVAL. */
int gpu__pool_resolve(const struct gpu_ctx *ctx, gpu_ptr_t p, size_t len,
		      void **handle, size_t *offset);

/* snprintf into a why buffer (NULL-safe); returns err for chaining. */
int gpu__why(char *why, size_t len, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* SPIR-V embedded at build time (gpu/shaders/embed.sh); NULL-terminated. */
struct gpu_spirv { const char *name; const uint32_t *words; size_t count; };
extern const struct gpu_spirv gpu__vk_spirv[];

/* The device-side kernel source (CUDA C / HIP C) shared by cuda and hip,
 * generated from gpu/kernels/zb_kernels.cu. */
extern const char gpu__rtc_source[];

/* Compile gpu__rtc_source with NVRTC for arch ("sm_80" -> CUBIN,
 * "compute_75" -> PTX); needs libnvrtc, not a GPU.  *image is malloc'd. */
int gpu__nvrtc_compile(const char *arch, void **image, size_t *len, char *log,
		       size_t log_len);

/* gpu_sgemm's block of C rows / columns per backend call (core.c). */
extern int gpu__sgemm_block;

#endif /* ZBMD_GPU_INTERNAL_H */
