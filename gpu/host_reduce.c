/* Host reductions: plain C loops that gcc vectorises (this file is built
 * with -O3, see gpu/module.mk).  The same code is the cpu backend's reduce
 * and the reference semantics every other backend is checked against. */
#include "zbmd/gpu.h"
#include "internal.h"

#include <math.h>
#include <string.h>

/* Element-wise loops, one per (type, op): dst[i] = x[i] OP src[i] (x is
 * dst for gpu_host_reduce).  No restrict: dst == x or dst == src is
 * allowed, and gcc versions the loop with a run-time alias check. */
#define ZB_LOOP(T, EXPR)                                                       \
	do {                                                                   \
		T *d_ = (T *)dst;                                              \
		const T *x_ = (const T *)x;                                    \
		const T *s_ = (const T *)src;                                  \
		for (size_t i = 0; i < count; i++) {                           \
			T a = x_[i], b = s_[i];                                \
			d_[i] = (EXPR);                                        \
		}                                                              \
	} while (0)

/* x86-64: each loop is also built for AVX2 and picked at load time
 * (gcc function multiversioning); other targets get the default build.
 * Not under the sanitizers: the ifunc resolver runs before the TSan
 * runtime is initialised and crashes it. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
	!defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
#define ZB_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define ZB_CLONES
#endif

/* Float min/max written as selects so they map to minps/maxps. */
#define ZB_MIN_EXPR (b < a ? b : a)
#define ZB_MAX_EXPR (b > a ? b : a)

ZB_CLONES static void reduce_f32(void *dst, const void *x, const void *src,
				 size_t count, enum zb_redop op)
{
	switch (op) {
	case ZB_SUM: case ZB_AVG: ZB_LOOP(float, a + b); break;
	case ZB_PROD: ZB_LOOP(float, a * b); break;
	case ZB_MIN: ZB_LOOP(float, ZB_MIN_EXPR); break;
	case ZB_MAX: ZB_LOOP(float, ZB_MAX_EXPR); break;
	default: ZB_ASSERT(0);
	}
}

ZB_CLONES static void reduce_f64(void *dst, const void *x, const void *src,
				 size_t count, enum zb_redop op)
{
	switch (op) {
	case ZB_SUM: case ZB_AVG: ZB_LOOP(double, a + b); break;
	case ZB_PROD: ZB_LOOP(double, a * b); break;
	case ZB_MIN: ZB_LOOP(double, ZB_MIN_EXPR); break;
	case ZB_MAX: ZB_LOOP(double, ZB_MAX_EXPR); break;
	default: ZB_ASSERT(0);
	}
}

/* Integer sum/prod wrap: computed in the unsigned type (defined overflow). */
ZB_CLONES static void reduce_i32(void *dst, const void *x, const void *src,
				 size_t count, enum zb_redop op)
{
	switch (op) {
	case ZB_SUM: case ZB_AVG:
		ZB_LOOP(int32_t, (int32_t)((uint32_t)a + (uint32_t)b)); break;
	case ZB_PROD:
		ZB_LOOP(int32_t, (int32_t)((uint32_t)a * (uint32_t)b)); break;
	case ZB_MIN: ZB_LOOP(int32_t, ZB_MIN_EXPR); break;
	case ZB_MAX: ZB_LOOP(int32_t, ZB_MAX_EXPR); break;
	default: ZB_ASSERT(0);
	}
}

ZB_CLONES static void reduce_i64(void *dst, const void *x, const void *src,
				 size_t count, enum zb_redop op)
{
	switch (op) {
	case ZB_SUM: case ZB_AVG:
		ZB_LOOP(int64_t, (int64_t)((uint64_t)a + (uint64_t)b)); break;
	case ZB_PROD:
		ZB_LOOP(int64_t, (int64_t)((uint64_t)a * (uint64_t)b)); break;
	case ZB_MIN: ZB_LOOP(int64_t, ZB_MIN_EXPR); break;
	case ZB_MAX: ZB_LOOP(int64_t, ZB_MAX_EXPR); break;
	default: ZB_ASSERT(0);
	}
}

/* ---- 16-bit floats ------------------------------------------------------
 * Widen a block to f32, reduce it with the vectorised f32 loop, narrow it
 * back.  The portable path uses the gpu__ inline conversions (internal.h:
 * the common.h algorithms, IEEE round-to-nearest-even); on x86 CPUs with
 * AVX2 + F16C, f16 uses vcvtph2ps / vcvtps2ph (8 at a time), which agree on
 * every non-NaN value, and NaN lanes are patched to the portable encoding
 * (hardware sets the quiet bit on widening and keeps payload bits on
 * narrowing; common.h does neither).  tests/gpu/test_host_reduce.c checks
 * both paths against an exact reference on every 16-bit input and a sweep
 * of f32 inputs. */
#define ZB_HALF_BLOCK 256

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define ZB_HAVE_F16C_PATH 1

__attribute__((target("avx2,f16c")))
static size_t widen_f16c(float *out, const uint16_t *in, size_t n)
{
	const __m256i quiet = _mm256_set1_epi32(0x00400000);
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m128i h = _mm_loadu_si128((const __m128i *)(in + i));
		__m256i f = _mm256_castps_si256(_mm256_cvtph_ps(h));
		__m256i hi = _mm256_cvtepu16_epi32(h);
		__m256i nan = _mm256_cmpgt_epi32(
			_mm256_and_si256(hi, _mm256_set1_epi32(0x7fff)),
			_mm256_set1_epi32(0x7c00));
		/* common.h: sign | 0x7f800000 | man << 13 (bit 22 = man bit 9) */
		__m256i fixed = _mm256_or_si256(
			_mm256_andnot_si256(quiet, f),
			_mm256_slli_epi32(_mm256_and_si256(hi, _mm256_set1_epi32(0x200)), 13));
		f = _mm256_blendv_epi8(f, fixed, nan);
		_mm256_storeu_ps(out + i, _mm256_castsi256_ps(f));
	}
	return i;
}

__attribute__((target("avx2,f16c")))
static size_t narrow_f16c(uint16_t *out, const float *in, size_t n)
{
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 x = _mm256_loadu_ps(in + i);
		__m128i h = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
		__m256i nan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
		/* common.h: sign | 0x7e00 for every NaN */
		__m256i canon = _mm256_or_si256(
			_mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(x), 16),
					 _mm256_set1_epi32(0x8000)),
			_mm256_set1_epi32(0x7e00));
		__m128i nan16 = _mm_packs_epi32(_mm256_castsi256_si128(nan),
						_mm256_extracti128_si256(nan, 1));
		__m128i canon16 = _mm_packus_epi32(_mm256_castsi256_si128(canon),
						   _mm256_extracti128_si256(canon, 1));
		_mm_storeu_si128((__m128i *)(out + i), _mm_blendv_epi8(h, canon16, nan16));
	}
	return i;
}

static bool have_f16c(void)
{
	return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
}
#endif

void gpu__f16_widen(float *out, const uint16_t *in, size_t n, bool hw)
{
	size_t i = 0;
#ifdef ZB_HAVE_F16C_PATH
	if (hw && have_f16c())
		i = widen_f16c(out, in, n);
#else
	(void)hw;
#endif
	for (; i < n; i++)
		out[i] = gpu__f16_to_f32(in[i]);
}

void gpu__f16_narrow(uint16_t *out, const float *in, size_t n, bool hw)
{
	size_t i = 0;
#ifdef ZB_HAVE_F16C_PATH
	if (hw && have_f16c())
		i = narrow_f16c(out, in, n);
#else
	(void)hw;
#endif
	for (; i < n; i++)
		out[i] = gpu__f32_to_f16(in[i]);
}

/* bf16: one fused loop per op (widening is a shift, narrowing integer
 * selects: gcc vectorises the whole body). */
#define ZB_BF16_LOOP(EXPR)                                                     \
	for (size_t i = 0; i < count; i++) {                                   \
		float a = gpu__bf16_to_f32(x[i]), b = gpu__bf16_to_f32(src[i]);   \
		dst[i] = gpu__f32_to_bf16(EXPR);                               \
	}

/* Sum and prod: x's NaN wins, explicitly, as in the Vulkan shader and the
 * cuda/hip kernels.  a + b alone leaves it to the instruction, and gcc may
 * swap the operands of a commutative add: x86 then returns src's NaN (its
 * sign too).  With x not a NaN, the result is src's NaN quieted or the
 * default NaN (x86 0xffc00000, Arm 0x7fc00000): both have the low 16 bits
 * clear (the inputs are widened bf16), so the plain rounding gives the
 * quiet bf16 NaN and the narrowing's own NaN select is not needed.  One
 * 16-bit select instead: no slower than gpu__f32_to_bf16 (measured). */
#define ZB_BF16_ARITH_LOOP(EXPR)                                               \
	for (size_t i = 0; i < count; i++) {                                   \
		uint16_t xi = x[i];                                            \
		float a = gpu__bf16_to_f32(xi), b = gpu__bf16_to_f32(src[i]);  \
		uint32_t u = gpu__f2u(EXPR);                                   \
		uint16_t r = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16); \
		uint16_t m = (uint16_t)-(uint16_t)((xi & 0x7fffu) > 0x7f80u);  \
		dst[i] = (uint16_t)(((xi | 0x40u) & m) | (r & ~m));            \
	}

ZB_CLONES static void reduce_bf16(uint16_t *dst, const uint16_t *x,
				  const uint16_t *src, size_t count,
				  enum zb_redop op)
{
	switch (op) {
	case ZB_SUM: case ZB_AVG: ZB_BF16_ARITH_LOOP(a + b); break;
	case ZB_PROD: ZB_BF16_ARITH_LOOP(a * b); break;
	case ZB_MIN: ZB_BF16_LOOP(ZB_MIN_EXPR); break;
	case ZB_MAX: ZB_BF16_LOOP(ZB_MAX_EXPR); break;
	default: ZB_ASSERT(0);
	}
}

static void reduce_half(uint16_t *dst, const uint16_t *x, const uint16_t *src,
			size_t count, enum zb_redop op, bool bf16)
{
	if (bf16) {
		reduce_bf16(dst, x, src, count, op);
		return;
	}
	float a[ZB_HALF_BLOCK], b[ZB_HALF_BLOCK];

	for (size_t base = 0; base < count; base += ZB_HALF_BLOCK) {
		size_t n = count - base < ZB_HALF_BLOCK ? count - base
							: ZB_HALF_BLOCK;
		if (bf16) {
			for (size_t i = 0; i < n; i++) {
				a[i] = gpu__bf16_to_f32(x[base + i]);
				b[i] = gpu__bf16_to_f32(src[base + i]);
			}
		} else {
			gpu__f16_widen(a, x + base, n, true);
			gpu__f16_widen(b, src + base, n, true);
		}
		reduce_f32(a, a, b, n, op);
		if (bf16)
			for (size_t i = 0; i < n; i++)
				dst[base + i] = gpu__f32_to_bf16(a[i]);
		else
			gpu__f16_narrow(dst + base, a, n, true);
	}
}

/* partial overlap of two count-byte ranges (equal starts are fine) */
static bool overlaps(const void *p, const void *q, size_t bytes)
{
	uintptr_t a = (uintptr_t)p, b = (uintptr_t)q;
	return a != b && a < b + bytes && b < a + bytes;
}

int gpu_host_reduce_into(void *dst, const void *x, const void *src,
			 size_t count, enum zb_dtype dtype, enum zb_redop op)
{
	if ((unsigned)dtype >= ZB_DTYPE_COUNT || (unsigned)op >= ZB_REDOP_COUNT)
		return -EINVAL;
	if (count == 0)
		return 0;
	if (!dst || !x || !src)
		return -EINVAL;
	size_t bytes = count * zb_dtype_size(dtype);
	if (bytes / zb_dtype_size(dtype) != count)
		return -EINVAL;
	if (overlaps(dst, src, bytes) || overlaps(dst, x, bytes))
		return -EINVAL;

	switch (dtype) {
	case ZB_F32: reduce_f32(dst, x, src, count, op); break;
	case ZB_F64: reduce_f64(dst, x, src, count, op); break;
	case ZB_I32: reduce_i32(dst, x, src, count, op); break;
	case ZB_I64: reduce_i64(dst, x, src, count, op); break;
	case ZB_F16: reduce_half(dst, x, src, count, op, false); break;
	case ZB_BF16: reduce_half(dst, x, src, count, op, true); break;
	default: return -EINVAL;
	}
	return 0;
}

int gpu_host_reduce(void *dst, const void *src, size_t count,
		    enum zb_dtype dtype, enum zb_redop op)
{
	return gpu_host_reduce_into(dst, dst, src, count, dtype, op);
}

/* Round to nearest, ties away from zero, saturated to [lo, hi]. */
static inline double scale_int(double v, double lo, double hi)
{
	v = round(v);
	return v < lo ? lo : v > hi ? hi : v;
}

/* i64 scale, exact: the factor is m * 2^e (m < 2^53, from its bits), the
 * product |x| * m is formed in 128 bits from 32-bit halves and shifted by e
 * with round half up on the magnitude (= half away from zero), then
 * saturated.  Written with 64-bit integers only, so that the Vulkan shader
 * (scale.comp) and the cuda/hip kernel (zb_scale_5) run the same steps. */
struct i64_factor {
	uint64_t m;
	int e;
	bool neg;
};

static struct i64_factor i64_factor_of(double f)
{
	uint64_t b;
	memcpy(&b, &f, 8);
	int be = (int)((b >> 52) & 0x7ff);
	struct i64_factor r = {
		.m = (b & 0xfffffffffffffull) | (be ? 1ull << 52 : 0),
		.e = (be ? be : 1) - 1075,
		.neg = b >> 63,
	};
	return r;
}

static int64_t i64_scale_one(int64_t x, struct i64_factor f)
{
	bool neg = (x < 0) != f.neg;
	uint64_t ax = x < 0 ? 0 - (uint64_t)x : (uint64_t)x;
	uint64_t lim = neg ? 1ull << 63 : (1ull << 63) - 1, q;

	uint64_t a0 = ax & 0xffffffffu, a1 = ax >> 32;
	uint64_t b0 = f.m & 0xffffffffu, b1 = f.m >> 32;
	uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0;
	uint64_t mid = (p00 >> 32) + (p01 & 0xffffffffu) + (p10 & 0xffffffffu);
	uint64_t lo = (p00 & 0xffffffffu) | (mid << 32);
	uint64_t hi = a1 * b1 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);

	if (f.e >= 0) {
		if (hi == 0 && lo == 0)
			return 0;
		if (f.e > 63 || hi != 0 || lo > lim >> f.e)
			q = lim;
		else
			q = lo << f.e;
	} else {
		int s = -f.e;                   /* 1 .. 1074 */
		uint64_t qlo, qhi, half;
		if (s >= 128) {
			qlo = qhi = 0;
		} else if (s >= 64) {
			qlo = hi >> (s - 64);
			qhi = 0;
		} else {
			qlo = (lo >> s) | (hi << (64 - s));
			qhi = hi >> s;
		}
		half = s - 1 >= 128 ? 0 : s - 1 >= 64 ? (hi >> (s - 65)) & 1
						      : (lo >> (s - 1)) & 1;
		q = qhi != 0 || qlo > lim ? lim : qlo;
		if (q < lim)
			q += half;
	}
	return neg ? (int64_t)(0 - q) : (int64_t)q;
}

int gpu_host_scale(void *buf, size_t count, enum zb_dtype dtype, double factor)
{
	if (!gpu__scale_factor_ok(dtype, factor))
		return -EINVAL;
	if (count == 0)
		return 0;
	if (!buf)
		return -EINVAL;

	float ff = (float)factor;
	switch (dtype) {
	case ZB_F32: {
		float *p = buf;
		for (size_t i = 0; i < count; i++)
			p[i] *= ff;
		break;
	}
	case ZB_F64: {
		double *p = buf;
		for (size_t i = 0; i < count; i++)
			p[i] *= factor;
		break;
	}
	case ZB_F16: {
		uint16_t *p = buf;
		for (size_t i = 0; i < count; i++)
			p[i] = gpu__f32_to_f16(gpu__f16_to_f32(p[i]) * ff);
		break;
	}
	case ZB_BF16: {
		uint16_t *p = buf;
		for (size_t i = 0; i < count; i++)
			p[i] = gpu__f32_to_bf16(gpu__bf16_to_f32(p[i]) * ff);
		break;
	}
	case ZB_I32: {
		int32_t *p = buf;
		for (size_t i = 0; i < count; i++)
			p[i] = (int32_t)scale_int((double)p[i] * factor,
						  (double)INT32_MIN,
						  (double)INT32_MAX);
		break;
	}
	case ZB_I64: {
		int64_t *p = buf;
		struct i64_factor f = i64_factor_of(factor);
		for (size_t i = 0; i < count; i++)
			p[i] = i64_scale_one(p[i], f);
		break;
	}
	default:
		return -EINVAL;
	}
	return 0;
}

#define ZB_INT_AVG_LOOP(T, UT)                                                 \
	do {                                                                   \
		T *p = buf, d = (T)n;                                          \
		for (size_t i = 0; i < count; i++) {                           \
			T q = p[i] / d, r = p[i] % d;                          \
			UT ar = r < 0 ? 0 - (UT)r : (UT)r;                     \
			if (2 * ar >= n)                                       \
				q += p[i] < 0 ? -1 : 1;                        \
			p[i] = q;                                              \
		}                                                              \
	} while (0)

/* Round to nearest, ties away from zero, of x / n on the exact quotient
 * (C division truncates; |r| < n, and 2|r| is compared unsigned, so
 * nothing overflows, INT_MIN included). */
int gpu_host_avg(void *buf, size_t count, enum zb_dtype dtype, uint32_t n)
{
	if ((unsigned)dtype >= ZB_DTYPE_COUNT || n == 0 || n > INT32_MAX)
		return -EINVAL;
	if (count == 0)
		return 0;
	if (!buf)
		return -EINVAL;

	switch (dtype) {
	case ZB_I32: ZB_INT_AVG_LOOP(int32_t, uint32_t); return 0;
	case ZB_I64: ZB_INT_AVG_LOOP(int64_t, uint64_t); return 0;
	default:
		return gpu_host_scale(buf, count, dtype, 1.0 / n);
	}
}
