/* tests/gpu/ref.h — the plain C reference every backend is checked against:
 * one element at a time on the common.h conversion helpers, no tricks. */
#ifndef ZBMD_TESTS_GPU_REF_H
#define ZBMD_TESTS_GPU_REF_H

#include "zbmd/common.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

static uint64_t ref_rng = 0x9e3779b97f4a7c15ull;
static inline uint64_t ref_next(void)
{
	ref_rng ^= ref_rng << 13;
	ref_rng ^= ref_rng >> 7;
	ref_rng ^= ref_rng << 17;
	return ref_rng;
}
static inline float ref_frand(void)
{
	return (float)((int)(ref_next() % 2001) - 1000) / 128.0f;
}

/* f32 -> f16, round to nearest even, computed exactly in double: an
 * independent reference (common.c's zb_f32_to_f16 returns 0 instead of
 * 0x0400 for values just below 2^-14 that round up to the smallest normal). */
static inline uint16_t ref_f32_to_f16(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
	double x = fabs((double)f);
	if (isnan(f))
		return sign | 0x7e00u;
	if (isinf(f))
		return sign | 0x7c00u;
	if (x < 0x1p-14) /* subnormal step 2^-24; 1024 steps = smallest normal */
		return (uint16_t)(sign | (uint16_t)nearbyint(x * 0x1p24));
	int e;
	double m = frexp(x, &e) * 2; /* x = m * 2^(e-1), m in [1, 2) */
	e -= 1;
	double q = nearbyint((m - 1.0) * 1024.0);
	if (q == 1024.0) {
		q = 0;
		e++;
	}
	if (e + 15 >= 31)
		return sign | 0x7c00u;
	return (uint16_t)(sign | ((e + 15) << 10) | (int)q);
}

/* Random values; small integers for prod so products stay meaningful. */
static inline void ref_fill(void *p, size_t n, enum zb_dtype t, enum zb_redop op)
{
	for (size_t i = 0; i < n; i++) {
		float f = ref_frand();
		switch (t) {
		case ZB_F32: ((float *)p)[i] = f; break;
		case ZB_F64: ((double *)p)[i] = (double)f * 1.000001; break;
		case ZB_F16: ((uint16_t *)p)[i] = zb_f32_to_f16(f); break;
		case ZB_BF16: ((uint16_t *)p)[i] = zb_f32_to_bf16(f); break;
		case ZB_I32:
			((int32_t *)p)[i] = op == ZB_PROD ? (int32_t)(ref_next() % 7) - 3
							  : (int32_t)ref_next();
			break;
		case ZB_I64:
			((int64_t *)p)[i] = op == ZB_PROD ? (int64_t)(ref_next() % 7) - 3
							  : (int64_t)ref_next();
			break;
		default: break;
		}
	}
}

static inline float ref_fop(float a, float b, enum zb_redop op)
{
	switch (op) {
	case ZB_SUM: case ZB_AVG: return a + b;
	case ZB_PROD: return a * b;
	case ZB_MIN: return b < a ? b : a;
	default: return b > a ? b : a;
	}
}

static inline double ref_dop(double a, double b, enum zb_redop op)
{
	switch (op) {
	case ZB_SUM: case ZB_AVG: return a + b;
	case ZB_PROD: return a * b;
	case ZB_MIN: return b < a ? b : a;
	default: return b > a ? b : a;
	}
}

static inline void ref_reduce(void *d, const void *s, size_t n, enum zb_dtype t,
			      enum zb_redop op)
{
	for (size_t i = 0; i < n; i++) {
		switch (t) {
		case ZB_F32:
			((float *)d)[i] = ref_fop(((float *)d)[i], ((const float *)s)[i], op);
			break;
		case ZB_F64:
			((double *)d)[i] = ref_dop(((double *)d)[i], ((const double *)s)[i], op);
			break;
		case ZB_F16:
			((uint16_t *)d)[i] = ref_f32_to_f16(ref_fop(
				zb_f16_to_f32(((uint16_t *)d)[i]),
				zb_f16_to_f32(((const uint16_t *)s)[i]), op));
			break;
		case ZB_BF16:
			((uint16_t *)d)[i] = zb_f32_to_bf16(ref_fop(
				zb_bf16_to_f32(((uint16_t *)d)[i]),
				zb_bf16_to_f32(((const uint16_t *)s)[i]), op));
			break;
		case ZB_I32: {
			int64_t a = ((int32_t *)d)[i], b = ((const int32_t *)s)[i];
			int64_t r = op == ZB_SUM || op == ZB_AVG ? a + b
				    : op == ZB_PROD ? a * b
				    : op == ZB_MIN ? (a < b ? a : b) : (a > b ? a : b);
			((int32_t *)d)[i] = (int32_t)(uint32_t)(uint64_t)r;
			break;
		}
		case ZB_I64: {
			uint64_t ua = (uint64_t)((int64_t *)d)[i];
			uint64_t ub = (uint64_t)((const int64_t *)s)[i];
			int64_t a = (int64_t)ua, b = (int64_t)ub;
			((int64_t *)d)[i] = op == ZB_SUM || op == ZB_AVG ? (int64_t)(ua + ub)
					    : op == ZB_PROD ? (int64_t)(ua * ub)
					    : op == ZB_MIN ? (a < b ? a : b) : (a > b ? a : b);
			break;
		}
		default: break;
		}
	}
}

/* i64 * f exactly (__int128, frexp), rounded half away from zero and
 * saturated: the i64 scale contract. */
static inline int64_t ref_scale_i64(int64_t x, double f)
{
	int ex;
	double fr = frexp(f, &ex);                      /* f = fr * 2^ex */
	__int128 m = (__int128)(int64_t)ldexp(fr, 53);  /* exact: 53 bits */
	int e = ex - 53;
	__int128 p = (__int128)x * m, a = p < 0 ? -p : p, q;
	const __int128 lim = p < 0 ? (__int128)1 << 63 : ((__int128)1 << 63) - 1;
	if (a == 0)
		return 0;
	if (e >= 0) {
		q = e > 63 || a > (lim >> e) ? lim : a << e;
	} else if (-e >= 120) {
		q = 0;                                  /* a < 2^117: below 1/2 */
	} else {
		__int128 one = (__int128)1 << -e;
		q = a >> -e;
		if (2 * (a & (one - 1)) >= one)
			q++;
		if (q > lim)
			q = lim;
	}
	return (int64_t)(p < 0 ? -q : q);
}

static inline void ref_scale(void *p, size_t n, enum zb_dtype t, double f)
{
	for (size_t i = 0; i < n; i++) {
		switch (t) {
		case ZB_F32: ((float *)p)[i] *= (float)f; break;
		case ZB_F64: ((double *)p)[i] *= f; break;
		case ZB_F16: ((uint16_t *)p)[i] = ref_f32_to_f16(zb_f16_to_f32(((uint16_t *)p)[i]) * (float)f); break;
		case ZB_BF16: ((uint16_t *)p)[i] = zb_f32_to_bf16(zb_bf16_to_f32(((uint16_t *)p)[i]) * (float)f); break;
		case ZB_I32: {
			double v = round((double)((int32_t *)p)[i] * f);
			((int32_t *)p)[i] = v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : (int32_t)v;
			break;
		}
		case ZB_I64: ((int64_t *)p)[i] = ref_scale_i64(((int64_t *)p)[i], f); break;
		default: break;
		}
	}
}

/* NaN pairs for 16-bit sum/prod, compared bit for bit: every pairing of a
 * few NaNs (both signs, quiet and signalling, with payloads) and numbers, in
 * dst and src.  The rule: dst's NaN if it is one, else src's, quieted
 * (bf16: | 0x0040; f16: sign | 0x7e00, the common.h narrowing).  Fills d, s
 * and want with n = REF_NAN_PAIRS elements. */
#define REF_NAN_VALS 8
#define REF_NAN_PAIRS (REF_NAN_VALS * REF_NAN_VALS)
static inline void ref_nan_pairs(uint16_t *d, uint16_t *s, uint16_t *want,
				 enum zb_dtype t)
{
	static const uint16_t bf[REF_NAN_VALS] = {0x7fc0, 0xffc1, 0x7f81, 0xff85,
						  0x7fff, 0x3f80, 0xbf80, 0x7f80};
	static const uint16_t hf[REF_NAN_VALS] = {0x7e00, 0xfe01, 0x7c01, 0xfc05,
						  0x7fff, 0x3c00, 0xbc00, 0x7c00};
	const uint16_t *v = t == ZB_BF16 ? bf : hf;
	uint16_t exp = t == ZB_BF16 ? 0x7f80 : 0x7c00;
	for (int i = 0; i < REF_NAN_VALS; i++)
		for (int j = 0; j < REF_NAN_VALS; j++) {
			int k = i * REF_NAN_VALS + j;
			uint16_t x = v[i], y = v[j];
			bool xn = (x & 0x7fff) > exp, yn = (y & 0x7fff) > exp;
			uint16_t nan = xn ? x : y;
			d[k] = x;
			s[k] = y;
			want[k] = !xn && !yn ? 0 /* not a NaN pair: skipped */
				  : t == ZB_BF16 ? (uint16_t)(nan | 0x0040)
						 : (uint16_t)((nan & 0x8000) | 0x7e00);
		}
}

/* Elements of got that differ from a NaN want of ref_nan_pairs. */
static inline int ref_nan_mismatches(const uint16_t *got, const uint16_t *want,
				     const uint16_t *d, const uint16_t *s)
{
	int bad = 0;
	for (int k = 0; k < REF_NAN_PAIRS; k++)
		if (want[k] && got[k] != want[k]) {
			if (bad++ < 3)
				fprintf(stderr, "# dst %04x src %04x: got %04x, want %04x\n",
					d[k], s[k], got[k], want[k]);
		}
	return bad;
}

/* Per-dtype tolerance: integers exact; floats within a relative bound
 * (f32 1e-6, f64 1e-12, f16 one ulp 2^-10, bf16 one ulp 2^-7). */
static inline double ref_value(const void *p, size_t i, enum zb_dtype t)
{
	switch (t) {
	case ZB_F32: return ((const float *)p)[i];
	case ZB_F64: return ((const double *)p)[i];
	case ZB_F16: return zb_f16_to_f32(((const uint16_t *)p)[i]);
	case ZB_BF16: return zb_bf16_to_f32(((const uint16_t *)p)[i]);
	case ZB_I32: return ((const int32_t *)p)[i];
	default: return (double)((const int64_t *)p)[i];
	}
}

/* Number of elements of got that differ from want beyond the tolerance. */
static inline size_t ref_mismatches(const void *got, const void *want, size_t n,
				    enum zb_dtype t)
{
	static const double rel[ZB_DTYPE_COUNT] = {
		[ZB_F32] = 1e-6, [ZB_F64] = 1e-12, [ZB_F16] = 1.0 / 1024,
		[ZB_BF16] = 1.0 / 128,
	};
	size_t bad = 0, es = zb_dtype_size(t);
	for (size_t i = 0; i < n; i++) {
		if (t == ZB_I32 || t == ZB_I64) {
			bad += memcmp((const char *)got + i * es,
				      (const char *)want + i * es, es) != 0;
			continue;
		}
		double g = ref_value(got, i, t), w = ref_value(want, i, t);
		if (isnan(w) || isinf(w)) {
			bad += !(isnan(w) ? isnan(g) : g == w);
			continue;
		}
		bad += fabs(g - w) > rel[t] * fabs(w) + 1e-30;
	}
	return bad;
}

#endif
