/* gpu_host_reduce / gpu_host_scale against a plain scalar reference built on
 * the common.h helpers; the inline half conversions against common.h. */
#include "zbmd/gpu.h"
#include "../../gpu/internal.h"
#include "tap.h"
#include "ref.h"

#include <float.h>
#include <math.h>

#define MAXN 4099
static unsigned char d1[MAXN * 8 + 64], d2[MAXN * 8 + 64], d3[MAXN * 8 + 64],
	sb[MAXN * 8 + 64];

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
			bad += ref_f32_to_f16(f) != gpu__f32_to_f16(f);
			bad += zb_f32_to_bf16(f) != gpu__f32_to_bf16(f);
			f = gpu__u2f(u + 0x1000u + (uint32_t)k); /* f16 midpoints */
			bad += ref_f32_to_f16(f) != gpu__f32_to_f16(f);
			f = gpu__u2f(((uint32_t)h << 16) + 0x8000u + (uint32_t)k);
			bad += zb_f32_to_bf16(f) != gpu__f32_to_bf16(f);
		}
	}
	for (uint64_t u = 0; u < 0x100000000ull; u += 4093) {
		float f = gpu__u2f((uint32_t)u);
		bad += ref_f32_to_f16(f) != gpu__f32_to_f16(f);
		bad += zb_f32_to_bf16(f) != gpu__f32_to_bf16(f);
	}
	is_int(bad, 0, "inline f16/bf16 conversions match common.h / the exact reference");

	/* common.c's zb_f32_to_f16 may differ from the exact reference only in
	 * the window just below 2^-14 (see ref.h); passes once it is fixed */
	int outside = 0, inside = 0;
	for (uint64_t u = 0; u < 0x100000000ull; u += 97) {
		float f = gpu__u2f((uint32_t)u);
		if (zb_f32_to_f16(f) != ref_f32_to_f16(f)) {
			uint32_t a = (uint32_t)u & 0x7fffffffu;
			if (a >= 0x387fe000u && a < 0x38800000u)
				inside++;
			else
				outside++;
		}
	}
	if (inside)
		tap_diag("common.c zb_f32_to_f16 rounds %d sampled values just below 2^-14 to 0 "
			 "instead of 0x0400 (fix: drop '& 0x3ffu' in its subnormal branch)", inside);
	is_int(outside, 0, "common.h f16 narrowing agrees with the exact reference outside that window");

	/* the block paths (portable and, where the CPU has it, F16C) */
	static uint16_t h16[0x10000], back[0x10000];
	static float f32[0x10000], f32b[0x10000];
	for (int hw = 0; hw < 2; hw++) {
		bad = 0;
		for (uint32_t h = 0; h < 0x10000; h++)
			h16[h] = (uint16_t)h;
		gpu__f16_widen(f32, h16, 0x10000, hw);
		for (uint32_t h = 0; h < 0x10000; h++) {
			float w = zb_f16_to_f32((uint16_t)h);
			bad += memcmp(&w, &f32[h], 4) != 0;
		}
		/* narrowing: every f16 value, the midpoints around it, and a
		 * sweep over all f32 bit patterns (NaN, inf, subnormal...) */
		for (int pass = 0; pass < 4; pass++) {
			for (uint32_t h = 0; h < 0x10000; h++) {
				uint32_t u = gpu__f2u(zb_f16_to_f32((uint16_t)h));
				f32b[h] = pass == 0 ? gpu__u2f(u)
					  : pass == 1 ? gpu__u2f(u + 0x1000u)
					  : pass == 2 ? gpu__u2f(u + 0x0fffu)
						      : gpu__u2f(h * 65537u + 12345u);
			}
			gpu__f16_narrow(back, f32b, 0x10000, hw);
			for (uint32_t h = 0; h < 0x10000; h++)
				bad += back[h] != ref_f32_to_f16(f32b[h]);
		}
		is_int(bad, 0, "f16 block conversions (%s path) match the exact reference",
		       hw ? "F16C if the CPU has it" : "portable");
	}
}

int main(void)
{
	static const size_t sizes[] = {0, 1, 3, 7, 8, 17, 255, 256, 257, 1000, 4099};
	static const size_t offs[] = {0, 1, 3};

	tap_plan(2 * ZB_DTYPE_COUNT * ZB_REDOP_COUNT + ZB_DTYPE_COUNT + 23);
	check_conversions();

	/* reduce (dst OP= src) and reduce_into (a third buffer gets x OP src,
	 * x and src untouched; also with dst == src) against the reference */
	for (int t = 0; t < ZB_DTYPE_COUNT; t++)
		for (int op = 0; op < ZB_REDOP_COUNT; op++) {
			size_t es = zb_dtype_size(t);
			int bad = 0, bad_into = 0;
			for (size_t si = 0; si < ZB_ARRAY_LEN(sizes); si++)
				for (size_t oi = 0; oi < ZB_ARRAY_LEN(offs); oi++) {
					size_t n = sizes[si], off = offs[oi] * es;
					uint8_t *a = d1 + off, *b = sb + off;
					uint8_t *want = d2 + off, *x = d3 + off;
					ref_fill(a, n, t, op);
					ref_fill(b, n, t, op);
					memcpy(want, a, n * es);
					ref_reduce(want, b, n, t, op);
					memcpy(x, a, n * es);                 /* x, kept */
					if (gpu_host_reduce(a, b, n, t, op) != 0 ||
					    memcmp(a, want, n * es) != 0)
						bad++;
					memset(a, 0xEE, n * es);              /* dst apart */
					if (gpu_host_reduce_into(a, x, b, n, t, op) != 0 ||
					    memcmp(a, want, n * es) != 0)
						bad_into++;
					memcpy(a, b, n * es);                 /* dst == src */
					if (gpu_host_reduce_into(a, x, a, n, t, op) != 0 ||
					    memcmp(a, want, n * es) != 0)
						bad_into++;
				}
			is_int(bad, 0, "reduce %s %s: all sizes/offsets match the reference",
			       zb_dtype_name(t), zb_redop_name(op));
			is_int(bad_into, 0, "reduce_into %s %s (dst apart, dst == src): all "
			       "sizes/offsets match the reference", zb_dtype_name(t),
			       zb_redop_name(op));
		}

	/* 16-bit sum/prod of NaN pairs: dst's NaN, bit for bit, in every lane
	 * of the vector loop and the tail (gcc swapped the bf16 add's operands:
	 * x86 then kept src's NaN, the sign too) */
	for (int t = ZB_F16; t <= ZB_BF16; t++) {
		static const enum zb_redop nops[] = {ZB_SUM, ZB_AVG, ZB_PROD};
		uint16_t nd[REF_NAN_PAIRS], ns[REF_NAN_PAIRS], want[REF_NAN_PAIRS],
			got[REF_NAN_PAIRS];
		int bad = 0;
		ref_nan_pairs(nd, ns, want, t);
		for (size_t i = 0; i < ZB_ARRAY_LEN(nops); i++) {
			memcpy(got, nd, sizeof(got));
			bad += gpu_host_reduce(got, ns, REF_NAN_PAIRS, t, nops[i]) != 0;
			bad += ref_nan_mismatches(got, want, nd, ns);
			bad += gpu_host_reduce_into(got, nd, ns, REF_NAN_PAIRS, t, nops[i]) != 0;
			bad += ref_nan_mismatches(got, want, nd, ns);
		}
		is_int(bad, 0, "%s sum/avg/prod of NaN pairs keeps dst's NaN (quieted), "
		       "else src's", zb_dtype_name(t));
	}

	/* scale: 1/3 as the avg of three ranks would use */
	for (int t = 0; t < ZB_DTYPE_COUNT; t++) {
		size_t n = 1001, es = zb_dtype_size(t);
		int bad = 0;
		ref_fill(d1, n, t, ZB_SUM);
		memcpy(d2, d1, n * es);
		if (gpu_host_scale(d1, n, t, 1.0 / 3) != 0)
			bad++;
		for (size_t i = 0; i < n; i++) {
			switch (t) {
			case ZB_F32: bad += ((float *)d1)[i] != ((float *)d2)[i] * (float)(1.0 / 3); break;
			case ZB_F64: bad += ((double *)d1)[i] != ((double *)d2)[i] / 3 &&
					    fabs(((double *)d1)[i] - ((double *)d2)[i] / 3) > 1e-15 * fabs(((double *)d2)[i]); break;
			case ZB_F16: bad += ((uint16_t *)d1)[i] != ref_f32_to_f16(zb_f16_to_f32(((uint16_t *)d2)[i]) * (float)(1.0 / 3)); break;
			case ZB_BF16: bad += ((uint16_t *)d1)[i] != zb_f32_to_bf16(zb_bf16_to_f32(((uint16_t *)d2)[i]) * (float)(1.0 / 3)); break;
			case ZB_I32: bad += ((int32_t *)d1)[i] != (int32_t)llround(((int32_t *)d2)[i] / 3.0); break;
			case ZB_I64: bad += ((int64_t *)d1)[i] != (int64_t)llround((double)((int64_t *)d2)[i] / 3.0) &&
					    llabs(((int64_t *)d1)[i] - ((int64_t *)d2)[i] / 3) > 4096; break;
			default: break;
			}
		}
		is_int(bad, 0, "scale %s by 1/3 matches the reference", zb_dtype_name(t));
	}

	/* i64 scale is exact (it was computed in double: bits above 2^53
	 * lost, INT64_MAX - 1 scaled by 1.0 became INT64_MAX) */
	{
		static const int64_t xs[] = {
			(1ll << 53) + 1, (1ll << 60) + 2, INT64_MAX - 1, INT64_MAX,
			INT64_MIN, INT64_MIN + 1, -((1ll << 60) + 3), 3, -3, 5, 1, 0,
			-1, 0x123456789abcdefll, -0x7edcba9876543210ll};
		static const double fs[] = {
			1.0, 0.5, -1.0, 0.25, 1.0 / 3, 0.1, -0.75, 2.0, 0x1p62, 0x1p-62,
			1e300, -1e300, 1e-300, 4.9e-324, 0.0, -0.0, 1.0 + 0x1p-52,
			0.5 - 0x1p-54, 0.5 + 0x1p-53, 3.0, 1e-10, 123456789.123};
		int64_t v[ZB_ARRAY_LEN(xs)];
		int bad = 0;
		for (size_t k = 0; k < ZB_ARRAY_LEN(fs); k++) {
			memcpy(v, xs, sizeof(v));
			bad += gpu_host_scale(v, ZB_ARRAY_LEN(xs), ZB_I64, fs[k]) != 0;
			for (size_t i = 0; i < ZB_ARRAY_LEN(xs); i++)
				if (v[i] != ref_scale_i64(xs[i], fs[k]) && bad++ < 4)
					tap_diag("%lld * %a: got %lld, want %lld", (long long)xs[i],
						 fs[k], (long long)v[i],
						 (long long)ref_scale_i64(xs[i], fs[k]));
		}
		/* random values and factors of every magnitude */
		for (int k = 0; k < 20000; k++) {
			int64_t x = (int64_t)ref_next() >> (ref_next() % 64);
			uint64_t fb = (ref_next() & 0x800fffffffffffffull) |
				      ((uint64_t)(1023 - 70 + ref_next() % 140) << 52);
			double f;
			memcpy(&f, &fb, 8);
			int64_t y = x;
			gpu_host_scale(&y, 1, ZB_I64, f);
			if (y != ref_scale_i64(x, f) && bad++ < 4)
				tap_diag("%lld * %a: got %lld, want %lld", (long long)x, f,
					 (long long)y, (long long)ref_scale_i64(x, f));
		}
		int64_t id[3] = {(1ll << 53) + 1, INT64_MAX - 1, INT64_MIN};
		gpu_host_scale(id, 3, ZB_I64, 1.0);
		int64_t half[1] = {(1ll << 60) + 2};
		gpu_host_scale(half, 1, ZB_I64, 0.5);
		ok(bad == 0 && id[0] == (1ll << 53) + 1 && id[1] == INT64_MAX - 1 &&
		   id[2] == INT64_MIN && half[0] == (1ll << 59) + 1,
		   "i64 scale is the exact product, rounded half away from zero, "
		   "saturated (%d wrong)", bad);
	}

	/* gpu_host_avg: integers are the exact quotient rounded half away from
	 * zero (gpu.h recommended gpu_host_scale(1.0 / n): -1605583 over 98
	 * = -16383.5 gave -16383; 50,102 misses for n in 2..256) */
	{
		static int32_t v32[4001];
		int bad = 0;
		for (uint32_t n = 1; n <= 256; n++) {
			for (int i = 0; i < 4001; i++)
				v32[i] = (int32_t)(i - 2000) * (int32_t)n / 2 + (i % 7) - 3;
			bad += gpu_host_avg(v32, 4001, ZB_I32, n) != 0;
			for (int i = 0; i < 4001; i++) {
				int32_t x = (int32_t)(i - 2000) * (int32_t)n / 2 + (i % 7) - 3;
				bad += v32[i] != (int32_t)round((double)x / n);
			}
		}
		int32_t t[1] = {-1605583};
		gpu_host_avg(t, 1, ZB_I32, 98);
		int32_t e32[4] = {INT32_MIN, INT32_MAX, INT32_MIN, -3};
		gpu_host_avg(e32, 4, ZB_I32, 2);
		int32_t big[2] = {INT32_MIN, INT32_MAX};
		gpu_host_avg(big, 2, ZB_I32, INT32_MAX);
		bad += e32[0] != INT32_MIN / 2 || e32[1] != 1073741824 || e32[3] != -2;
		bad += big[0] != -1 || big[1] != 1;
		/* i64 against (2x + sgn(x) n) / 2n in __int128 */
		for (int k = 0; k < 20000; k++) {
			int64_t x = (int64_t)ref_next() >> (ref_next() % 64);
			uint32_t n = 1 + (uint32_t)(ref_next() % (k & 1 ? 300 : INT32_MAX));
			int64_t y = x;
			__int128 w = ((__int128)2 * x + (x < 0 ? -(__int128)n : (__int128)n)) /
				     ((__int128)2 * n);
			bad += gpu_host_avg(&y, 1, ZB_I64, n) != 0 || y != (int64_t)w;
		}
		int64_t h[2] = {(1ll << 60) + 2, INT64_MIN};
		gpu_host_avg(h, 2, ZB_I64, 2);
		/* floats: exactly gpu_host_scale(1.0 / n) */
		float fa[5] = {1, 2, 3, -7, 1e-3f}, fb[5];
		memcpy(fb, fa, sizeof(fa));
		gpu_host_avg(fa, 5, ZB_F32, 3);
		gpu_host_scale(fb, 5, ZB_F32, 1.0 / 3);
		bad += memcmp(fa, fb, sizeof(fa)) != 0;
		ok(bad == 0 && t[0] == -16384 && h[0] == (1ll << 59) + 1 && h[1] == INT64_MIN / 2,
		   "gpu_host_avg: integer quotient rounded half away from zero (i32 n 1..256, "
		   "i64 random), floats = scale by 1/n (%d wrong, -1605583/98 = %d)", bad, t[0]);
		int32_t one[1] = {5};
		is_int(gpu_host_avg(one, 1, ZB_I32, 0) + gpu_host_avg(one, 1, ZB_I32, 1u << 31) +
		       gpu_host_avg(NULL, 1, ZB_I32, 2) + gpu_host_avg(one, 1, ZB_DTYPE_COUNT, 2),
		       -4 * EINVAL, "gpu_host_avg: n 0 or > INT32_MAX, NULL, bad dtype rejected");
		ok(one[0] == 5 && gpu_host_avg(NULL, 0, ZB_I64, 2) == 0,
		   "gpu_host_avg: buffer unaltered on error; count 0 is a no-op");
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
	{
		/* a finite double that overflows float (the f32/f16/bf16 compute
		 * type): 1 became inf, 0 NaN */
		float f[2] = {1, 0};
		uint16_t h[2] = {0x3c00, 0}, b[2] = {0x3f80, 0};
		double dv[2] = {1, 0};
		int rc = gpu_host_scale(f, 2, ZB_F32, 1e300) + gpu_host_scale(f, 2, ZB_F32, 3.5e38) +
			 gpu_host_scale(h, 2, ZB_F16, 1e300) + gpu_host_scale(b, 2, ZB_BF16, -1e39);
		ok(rc == -4 * EINVAL && f[0] == 1 && f[1] == 0 && h[0] == 0x3c00 && h[1] == 0 &&
		   b[0] == 0x3f80 && b[1] == 0 &&
		   gpu_host_scale(f, 2, ZB_F32, FLT_MAX) == 0 && f[0] == FLT_MAX &&
		   gpu_host_scale(dv, 2, ZB_F64, 1e300) == 0 && dv[0] == 1e300,
		   "factor beyond float refused for f32/f16/bf16, buffer unaltered (rc %d)", rc);
	}
	float y[8] = {1, 2, 3, 4, 5, 6, 7, 8}, z[4] = {10, 20, 30, 40};
	is_int(gpu_host_reduce_into(y + 1, y, z, 4, ZB_F32, ZB_SUM), -EINVAL,
	       "reduce_into: dst partially over x rejected");
	is_int(gpu_host_reduce_into(y, z, y + 2, 4, ZB_F32, ZB_SUM), -EINVAL,
	       "reduce_into: dst partially over src rejected");
	int rc = gpu_host_reduce_into(y + 4, y, y + 1, 3, ZB_F32, ZB_MAX);
	ok(rc == 0 && y[4] == 2 && y[5] == 3 && y[6] == 4 && y[7] == 8,
	   "reduce_into: x and src may overlap each other (rc %d: %g %g %g %g)",
	   rc, y[4], y[5], y[6], y[7]);
	return tap_done();
}
