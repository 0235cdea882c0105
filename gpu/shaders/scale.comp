#version 450
// buf[off + i] *= factor: the semantics of gpu_host_scale.  Integers are
// scaled in double, rounded half away from zero and saturated.
#include "common.glsl"

layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) buffer Dst { STORE_T d[]; };
layout(push_constant) uniform PC {
	uint off, pad0, count, pad1;
	float ff;
	uint flo, fhi;
} pc;

void main()
{
	uint stride = gl_NumWorkGroups.x * 256u;
#if DT == 3 || DT == 4 || DT == 5
	double fd = packDouble2x32(uvec2(pc.flo, pc.fhi));
#endif
	for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += stride) {
#if DT == 0 || DT == 1 || DT == 2
		d[pc.off + i] = STORE(LOAD(d[pc.off + i]) * pc.ff);
#elif DT == 3
		d[pc.off + i] = d[pc.off + i] * fd;
#else
		double v = double(d[pc.off + i]) * fd;
		// round half away from zero (as C round()); abs(v) + 0.5 would
		// itself round for |v| >= 2^52 and just below 0.5
		double a = abs(v), r = floor(a);
		v = sign(v) * (a - r >= 0.5LF ? r + 1.0LF : r);
#if DT == 4
		v = clamp(v, -2147483648.0LF, 2147483647.0LF);
		d[pc.off + i] = int(v);
#else
		// 2^63 itself is not an int64: saturate at and above it.
		if (v >= 9223372036854775808.0LF)
			d[pc.off + i] = 0x7fffffffffffffffL;
		else if (v < -9223372036854775808.0LF)
			d[pc.off + i] = -0x7fffffffffffffffL - 1L;
		else
			d[pc.off + i] = int64_t(v);
#endif
#endif
	}
}
