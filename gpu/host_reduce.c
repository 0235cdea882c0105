/* Host reductions: plain C loops that gcc vectorises (this file is built
 * with -O3, see gpu/module.mk).  The same code is the cpu backend's reduce
 * and the reference semantics every other backend is checked against. */
#include "zbmd/gpu.h"
#include "internal.h"

#include <math.h>
#include <string.h>

/* Element-wise loops, one per (type, op).  No restrict: dst == src is
 * allowed, and gcc versions the loop with a run-time alias check. */
#define ZB_LOOP(T, EXPR)                                                       \
	do {                                                                   \
		T *d_ = (T *)dst;                                              \
		const T *s_ = (const T *)src;                                  \
		for (size_t i = 0; i < count; i++) {                           \
			T a = d_[i], b = s_[i];                                \
			d_[i] = (EXPR);                                        \
		}                                                              \
	} while (0)

/* Float min/max written as selects so they map to minps/maxps. */
#define ZB_MIN_EXPR (b < a ? b : a)
#define ZB_MAX_EXPR (b > a ? b : a)

static void reduce_f32(void *dst, const void *src, size_t count,
		       enum zb_redop op)
{
	switch (op) {
	case ZB_SUM: case ZB_AVG: ZB_LOOP(float, a + b); break;
	case ZB_PROD: ZB_LOOP(float, a * b); break;
	case ZB_MIN: ZB_LOOP(float, ZB_MIN_EXPR); break;
	case ZB_MAX: ZB_LOOP(float, ZB_MAX_EXPR); break;
	default: ZB_ASSERT(0);
	}
}

static void reduce_f64(void *dst, const void *src, size_t count,
		       enum zb_redop op)
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
static void reduce_i32(void *dst, const void *src, size_t count,
		       enum zb_redop op)
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

static void reduce_i64(void *dst, const void *src, size_t count,
		       enum zb_redop op)
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

/* 16-bit floats: widen a block to f32, reduce it with the vectorised f32
 * loop, narrow it back.  The conversions are gpu__ inline copies of the
 * common.h helpers (bit-identical: tests/gpu/test_host_reduce.c checks every
 * f16/bf16 input and a sweep of f32 inputs against zb_f32_to_f16 & co). */
#define ZB_HALF_BLOCK 256

static void reduce_half(uint16_t *dst, const uint16_t *src, size_t count,
			enum zb_redop op, bool bf16)
{
	float a[ZB_HALF_BLOCK], b[ZB_HALF_BLOCK];

	for (size_t base = 0; base < count; base += ZB_HALF_BLOCK) {
		size_t n = count - base < ZB_HALF_BLOCK ? count - base
							: ZB_HALF_BLOCK;
		if (bf16) {
			for (size_t i = 0; i < n; i++) {
				a[i] = gpu__bf16_to_f32(dst[base + i]);
				b[i] = gpu__bf16_to_f32(src[base + i]);
			}
		} else {
			for (size_t i = 0; i < n; i++) {
				a[i] = gpu__f16_to_f32(dst[base + i]);
				b[i] = gpu__f16_to_f32(src[base + i]);
			}
		}
		reduce_f32(a, b, n, op);
		if (bf16)
			for (size_t i = 0; i < n; i++)
				dst[base + i] = gpu__f32_to_bf16(a[i]);
		else
			for (size_t i = 0; i < n; i++)
				dst[base + i] = gpu__f32_to_f16(a[i]);
	}
}

int gpu_host_reduce(void *dst, const void *src, size_t count,
		    enum zb_dtype dtype, enum zb_redop op)
{
	if ((unsigned)dtype >= ZB_DTYPE_COUNT || (unsigned)op >= ZB_REDOP_COUNT)
		return -EINVAL;
	if (count == 0)
		return 0;
	if (!dst || !src)
		return -EINVAL;
	size_t bytes = count * zb_dtype_size(dtype);
	if (bytes / zb_dtype_size(dtype) != count)
		return -EINVAL;
	uintptr_t d = (uintptr_t)dst, s = (uintptr_t)src;
	if (d != s && d < s + bytes && s < d + bytes)
		return -EINVAL; /* partial overlap */

	switch (dtype) {
	case ZB_F32: reduce_f32(dst, src, count, op); break;
	case ZB_F64: reduce_f64(dst, src, count, op); break;
	case ZB_I32: reduce_i32(dst, src, count, op); break;
	case ZB_I64: reduce_i64(dst, src, count, op); break;
	case ZB_F16: reduce_half(dst, src, count, op, false); break;
	case ZB_BF16: reduce_half(dst, src, count, op, true); break;
	default: return -EINVAL;
	}
	return 0;
}

/* Round to nearest, ties away from zero, saturated to [lo, hi]. */
static inline double scale_int(double v, double lo, double hi)
{
	v = round(v);
	return v < lo ? lo : v > hi ? hi : v;
}

int gpu_host_scale(void *buf, size_t count, enum zb_dtype dtype, double factor)
{
	if ((unsigned)dtype >= ZB_DTYPE_COUNT || !isfinite(factor))
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
		/* 2^63 is exact in double; anything >= it saturates. */
		for (size_t i = 0; i < count; i++) {
			double v = round((double)p[i] * factor);
			p[i] = v >= 9223372036854775808.0 ? INT64_MAX
			       : v < -9223372036854775808.0 ? INT64_MIN
							    : (int64_t)v;
		}
		break;
	}
	default:
		return -EINVAL;
	}
	return 0;
}
