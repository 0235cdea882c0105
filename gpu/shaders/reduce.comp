#version 450
// dst[dst_off + i] = dst[dst_off + i] OP src[src_off + i], i < count:
// the semantics of gpu_host_reduce (ZB_AVG accumulates a sum).
#include "common.glsl"

layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) buffer Dst { STORE_T d[]; };
layout(std430, set = 0, binding = 1) readonly buffer Src { STORE_T s[]; };
layout(push_constant) uniform PC {
	uint dst_off, src_off, count, op;
} pc;

#define LOOP(EXPR)                                                             \
	for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += stride) {   \
		CALC_T a = LOAD(d[pc.dst_off + i]);                            \
		CALC_T b = LOAD(s[pc.src_off + i]);                            \
		d[pc.dst_off + i] = STORE(EXPR);                               \
	}

// Sum and prod of 16-bit floats: a NaN operand wins explicitly, dst's
// before src's (the host rule, gpu/host_reduce.c), not whichever one the
// driver's compiler puts first or the device's canonical NaN.
#if DT == 1 || DT == 2
#define NAN_FIRST(E) (isnan(a) ? a : isnan(b) ? b : (E))
#else
#define NAN_FIRST(E) (E)
#endif

void main()
{
	uint stride = gl_NumWorkGroups.x * 256u;
	if (pc.op == 0u || pc.op == 4u) {
		LOOP(NAN_FIRST(a + b))
	} else if (pc.op == 1u) {
		LOOP(NAN_FIRST(a * b))
	} else if (pc.op == 2u) {
		LOOP(b < a ? b : a)
	} else {
		LOOP(b > a ? b : a)
	}
}
