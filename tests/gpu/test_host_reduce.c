/* gpu_host_reduce / gpu_host_scale against a plain scalar reference built on
 * the common.h helpers; the inline half conversions against common.h. */
#include "zbmd/gpu.h"
#include "../../gpu/internal.h"
#include "tap.h"

#include <math.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}
static float frand(void) { return (float)((int)(next() % 2001) - 1000) / 128.0f; }

static void fill(void *p, size_t n, enum zb_dtype t, enum zb_redop op)
{
	for (size_t i = 0; i < n; i++) {
		float f = frand();
		switch (t) {
		case ZB_F32: ((float *)p)[i] = f; break;
		case ZB_F64: ((double *)p)[i] = (double)f * 1.000001; break;
		case ZB_F16: ((uint16_t *)p)[i] = zb_f32_to_f16(f); break;
		case ZB_BF16: ((uint16_t *)p)[i] = zb_f32_to_bf16(f); break;
		case ZB_I32:
			((int32_t *)p)[i] = op == ZB_PROD ? (int32_t)(next() % 7) - 3
							  : (int32_t)next();
			break;
		case ZB_I64:
			((int64_t *)p)[i] = op == ZB_PROD ? (int64_t)(next() % 7) - 3
							  : (int64_t)next();
			break;
		default: break;
		}
	}
}

/* The reference: one element at a time, no tricks. */
static double fop(double a, double b, enum zb_redop op)
{
	switch (op) {
	case ZB_SUM: case ZB_AVG: return a + b;
	case ZB_PROD: return a * b;
	case ZB_MIN: return b < a ? b : a;
	default: return b > a ? b : a;
	}
}

static void ref_reduce(void *d, const void *s, size_t n, enum zb_dtype t,
		       enum zb_redop op)
{
	for (size_t i = 0; i < n; i++) {
		switch (t) {
		case ZB_F32: {
			float a = ((float *)d)[i], b = ((const float *)s)[i];
			((float *)d)[i] = op == ZB_PROD ? a * b
					  : (op == ZB_SUM || op == ZB_AVG) ? a + b
					  : (float)fop(a, b, op);
			break;
		}
		case ZB_F64:
			((double *)d)[i] = fop(((double *)d)[i], ((const double *)s)[i], op);
			break;
		case ZB_F16: {
			float a = zb_f16_to_f32(((uint16_t *)d)[i]);
			float b = zb_f16_to_f32(((const uint16_t *)s)[i]);
			float r = op == ZB_PROD ? a * b
				  : (op == ZB_SUM || op == ZB_AVG) ? a + b
				  : (float)fop(a, b, op);
			((uint16_t *)d)[i] = zb_f32_to_f16(r);
			break;
		}
		case ZB_BF16: {
			float a = zb_bf16_to_f32(((uint16_t *)d)[i]);
			float b = zb_bf16_to_f32(((const uint16_t *)s)[i]);
			float r = op == ZB_PROD ? a * b
				  : (op == ZB_SUM || op == ZB_AVG) ? a + b
				  : (float)fop(a, b, op);
			((uint16_t *)d)[i] = zb_f32_to_bf16(r);
			break;
		}
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
			int64_t r = op == ZB_SUM || op == ZB_AVG ? (int64_t)(ua + ub)
				    : op == ZB_PROD ? (int64_t)(ua * ub)
				    : op == ZB_MIN ? (a < b ? a : b) : (a > b ? a : b);
			((int64_t *)d)[i] = r;
			break;
		}
		default: break;
		}
	}
}

#define MAXN 4099
static unsigned char d1[MAXN * 8 + 64], d2[MAXN * 8 + 64], sb[MAXN * 8 + 64];

static void check_conversions(void)
{
	int bad = 0;
	for (uint32_t h = 0; h < 0x10000; h++) {
		float a = zb_f16_to_f32((uint16_t)h), b = gpu__f16_to_f32((uint16_t)h);
		float c = zb_bf16_to_f32((uint16_t)h), e = gpu__bf16_to_f32((uint16_t)h);
		bad += memcmp(&a, &b, 4) != 0;
		bad += memcmp(&c, &e, 4) != 0;
		/* f32 -> 16 bit around every representable value and midpoint */
		uint32_t u = gpu__f2u(a);
		for (int k = -2; k <= 2; k++) {
			float f = gpu__u2f(u + (uint32_t)k);
			bad += zb_f32_to_f16(f) != gpu__f32_to_f16(f);
			bad += zb_f32_to_bf16(f) != gpu__f32_to_bf16(f);
			f = gpu__u2f(u + 0x1000u + (uint32_t)k); /* f16 midpoints */
			bad += zb_f32_to_f16(f) != gpu__f32_to_f16(f);
			f = gpu__u2f(((uint32_t)h << 16) + 0x8000u + (uint32_t)k);
			bad += zb_f32_to_bf16(f) != gpu__f32_to_bf16(f);
		}
	}
	for (uint64_t u = 0; u < 0x100000000ull; u += 4093) {
		float f = gpu__u2f((uint32_t)u);
		bad += zb_f32_to_f16(f) != gpu__f32_to_f16(f);
		bad += zb_f32_to_bf16(f) != gpu__f32_to_bf16(f);
	}
	is_int(bad, 0, "inline f16/bf16 conversions bit-identical to common.h");
}

int main(void)
{
	static const size_t sizes[] = {0, 1, 3, 7, 8, 17, 255, 256, 257, 1000, 4099};
	static const size_t offs[] = {0, 1, 3};

	tap_plan(ZB_DTYPE_COUNT * ZB_REDOP_COUNT + ZB_DTYPE_COUNT + 10);
	check_conversions();

	for (int t = 0; t < ZB_DTYPE_COUNT; t++)
		for (int op = 0; op < ZB_REDOP_COUNT; op++) {
			size_t es = zb_dtype_size(t);
			int bad = 0;
			for (size_t si = 0; si < ZB_ARRAY_LEN(sizes); si++)
				for (size_t oi = 0; oi < ZB_ARRAY_LEN(offs); oi++) {
					size_t n = sizes[si], off = offs[oi] * es;
					fill(d1 + off, n, t, op);
					fill(sb + off, n, t, op);
					memcpy(d2 + off, d1 + off, n * es);
					ref_reduce(d2 + off, sb + off, n, t, op);
					if (gpu_host_reduce(d1 + off, sb + off, n, t, op) != 0 ||
					    memcmp(d1 + off, d2 + off, n * es) != 0)
						bad++;
				}
			is_int(bad, 0, "reduce %s %s: all sizes/offsets match the reference",
			       zb_dtype_name(t), zb_redop_name(op));
		}

	/* scale: 1/3 as the avg of three ranks would use */
	for (int t = 0; t < ZB_DTYPE_COUNT; t++) {
		size_t n = 1001, es = zb_dtype_size(t);
		int bad = 0;
		fill(d1, n, t, ZB_SUM);
		memcpy(d2, d1, n * es);
		if (gpu_host_scale(d1, n, t, 1.0 / 3) != 0)
			bad++;
		for (size_t i = 0; i < n; i++) {
			switch (t) {
			case ZB_F32: bad += ((float *)d1)[i] != ((float *)d2)[i] * (float)(1.0 / 3); break;
			case ZB_F64: bad += ((double *)d1)[i] != ((double *)d2)[i] / 3 &&
					    fabs(((double *)d1)[i] - ((double *)d2)[i] / 3) > 1e-15 * fabs(((double *)d2)[i]); break;
			case ZB_F16: bad += ((uint16_t *)d1)[i] != zb_f32_to_f16(zb_f16_to_f32(((uint16_t *)d2)[i]) * (float)(1.0 / 3)); break;
			case ZB_BF16: bad += ((uint16_t *)d1)[i] != zb_f32_to_bf16(zb_bf16_to_f32(((uint16_t *)d2)[i]) * (float)(1.0 / 3)); break;
			case ZB_I32: bad += ((int32_t *)d1)[i] != (int32_t)llround(((int32_t *)d2)[i] / 3.0); break;
			case ZB_I64: bad += ((int64_t *)d1)[i] != (int64_t)llround((double)((int64_t *)d2)[i] / 3.0) &&
					    llabs(((int64_t *)d1)[i] - ((int64_t *)d2)[i] / 3) > 4096; break;
			default: break;
			}
		}
		is_int(bad, 0, "scale %s by 1/3 matches the reference", zb_dtype_name(t));
	}

	/* avg over 4 "ranks" of i32 = sum then scale */
	int32_t acc[5] = {1, 2, 3, -7, 10}, r[5] = {1, 2, 3, -7, 10};
	for (int k = 0; k < 3; k++)
		gpu_host_reduce(acc, r, 5, ZB_I32, ZB_AVG);
	gpu_host_scale(acc, 5, ZB_I32, 0.25);
	ok(memcmp(acc, r, sizeof(r)) == 0, "i32 avg of 4 equal ranks gives the input back");

	int32_t sat[2] = {INT32_MAX, INT32_MIN};
	gpu_host_scale(sat, 2, ZB_I32, 4.0);
	ok(sat[0] == INT32_MAX && sat[1] == INT32_MIN, "i32 scale saturates");

	float x[4] = {1, 2, 3, 4};
	is_int(gpu_host_reduce(x, x, 4, ZB_F32, ZB_SUM), 0, "dst == src allowed");
	ok(x[0] == 2 && x[3] == 8, "dst == src doubles");
	is_int(gpu_host_reduce(x, x + 1, 3, ZB_F32, ZB_SUM), -EINVAL, "partial overlap rejected");
	is_int(gpu_host_reduce(x, NULL, 3, ZB_F32, ZB_SUM), -EINVAL, "NULL src rejected");
	is_int(gpu_host_reduce(NULL, NULL, 0, ZB_F32, ZB_SUM), 0, "zero length with NULL is a no-op");
	is_int(gpu_host_reduce(x, x, 4, ZB_DTYPE_COUNT, ZB_SUM) +
	       gpu_host_reduce(x, x, 4, ZB_F32, ZB_REDOP_COUNT), -2 * EINVAL,
	       "bad dtype / op rejected");
	is_int(gpu_host_scale(x, 4, ZB_F32, NAN), -EINVAL, "non-finite factor rejected");
	return tap_done();
}
