#version 450
// buf[off + i] *= factor: the semantics of gpu_host_scale.  i32 is scaled
// in double, rounded half away from zero and saturated; i64 exactly, with
// the integer steps of gpu/host_reduce.c (i64_scale_one).
#include "common.glsl"

layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) buffer Dst { STORE_T d[]; };
layout(push_constant) uniform PC {
	uint off, pad0, count, pad1;
	float ff;
	uint flo, fhi;
} pc;

#if DT == 5
// x * m * 2^e, exact: |x| * m in 128 bits from 32-bit halves, shifted with
// round half up on the magnitude, saturated.
int64_t scale_i64(int64_t x, uint64_t m, int e, bool fneg)
{
	bool neg = (x < 0L) != fneg;
	uint64_t ax = x < 0L ? 0UL - uint64_t(x) : uint64_t(x);
	uint64_t lim = neg ? (1UL << 63) : (1UL << 63) - 1UL, q;
	uint64_t a0 = ax & 0xffffffffUL, a1 = ax >> 32;
	uint64_t b0 = m & 0xffffffffUL, b1 = m >> 32;
	uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0;
	uint64_t mid = (p00 >> 32) + (p01 & 0xffffffffUL) + (p10 & 0xffffffffUL);
	uint64_t lo = (p00 & 0xffffffffUL) | (mid << 32);
	uint64_t hi = a1 * b1 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);

	if (e >= 0) {
		if (hi == 0UL && lo == 0UL)
			return 0L;
		if (e > 63 || hi != 0UL || lo > (lim >> e))
			q = lim;
		else
			q = lo << e;
	} else {
		int s = -e;
		uint64_t qlo, qhi, hbit;
		if (s >= 128) {
			qlo = 0UL;
			qhi = 0UL;
		} else if (s >= 64) {
			qlo = hi >> (s - 64);
			qhi = 0UL;
		} else {
			qlo = (lo >> s) | (hi << (64 - s));
			qhi = hi >> s;
		}
		hbit = s - 1 >= 128 ? 0UL : s - 1 >= 64 ? (hi >> (s - 65)) & 1UL
						      : (lo >> (s - 1)) & 1UL;
		q = qhi != 0UL || qlo > lim ? lim : qlo;
		if (q < lim)
			q += hbit;
	}
	return neg ? int64_t(0UL - q) : int64_t(q);
}
#endif

void main()
{
	uint stride = gl_NumWorkGroups.x * 256u;
#if DT == 3 || DT == 4
	double fd = packDouble2x32(uvec2(pc.flo, pc.fhi));
#elif DT == 5
	// the factor's bits: m * 2^e (as i64_factor_of)
	uint be = (pc.fhi >> 20) & 0x7ffu;
	uint64_t fm = (uint64_t(pc.fhi & 0xfffffu) << 32) | uint64_t(pc.flo) |
		      (be != 0u ? (1UL << 52) : 0UL);
	int fe = int(be != 0u ? be : 1u) - 1075;
	bool fneg = (pc.fhi >> 31) != 0u;
#endif
	for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += stride) {
#if DT == 0 || DT == 1 || DT == 2
		d[pc.off + i] = STORE(LOAD(d[pc.off + i]) * pc.ff);
#elif DT == 3
		d[pc.off + i] = d[pc.off + i] * fd;
#elif DT == 4
		double v = double(d[pc.off + i]) * fd;
		// round half away from zero (as C round()); abs(v) + 0.5 would
		// itself round for |v| >= 2^52 and just below 0.5
		double a = abs(v), r = floor(a);
		v = sign(v) * (a - r >= 0.5LF ? r + 1.0LF : r);
		v = clamp(v, -2147483648.0LF, 2147483647.0LF);
		d[pc.off + i] = int(v);
#else
		d[pc.off + i] = scale_i64(d[pc.off + i], fm, fe, fneg);
#endif
	}
}
