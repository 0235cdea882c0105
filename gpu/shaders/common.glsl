// Shared by the zbmd compute shaders.  DT selects the element type with the
// numbering of enum zb_dtype: 0 f32, 1 f16, 2 bf16, 3 f64, 4 i32, 5 i64.
// 16-bit floats are stored as raw 16-bit words and converted with integer
// code that is bit-identical to zb_f16_to_f32 & co in common/common.c.
#if DT == 1 || DT == 2
#extension GL_EXT_shader_16bit_storage : require
#define STORE_T uint16_t
#define CALC_T float
#elif DT == 3
#define STORE_T double
#define CALC_T double
#elif DT == 4
#define STORE_T int
#define CALC_T int
#elif DT == 5
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#define STORE_T int64_t
#define CALC_T int64_t
#else
#define STORE_T float
#define CALC_T float
#endif

float zb_f16_to_f32(uint h)
{
	uint sign = (h & 0x8000u) << 16;
	uint e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
	if (e == 0u)
		return uintBitsToFloat(sign | floatBitsToUint(float(m) * (1.0 / 16777216.0)));
	if (e == 31u)
		return uintBitsToFloat(sign | 0x7f800000u | (m << 13));
	return uintBitsToFloat(sign | ((e + 112u) << 23) | (m << 13));
}

uint zb_f32_to_f16(float f)
{
	uint u = floatBitsToUint(f);
	uint sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
	if (a > 0x7f800000u)
		return sign | 0x7e00u;
	if (a >= 0x477ff000u)
		return sign | 0x7c00u;
	if (a < 0x38800000u) {
		float v = uintBitsToFloat(a) + 0.5;
		return sign | ((floatBitsToUint(v) - 0x3f000000u) & 0x3ffu);
	}
	return sign | ((a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13);
}

float zb_bf16_to_f32(uint h) { return uintBitsToFloat(h << 16); }

uint zb_f32_to_bf16(float f)
{
	uint u = floatBitsToUint(f);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (u >> 16) | 0x40u;
	return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

#if DT == 1
#define LOAD(x) zb_f16_to_f32(uint(x))
#define STORE(v) uint16_t(zb_f32_to_f16(v))
#elif DT == 2
#define LOAD(x) zb_bf16_to_f32(uint(x))
#define STORE(v) uint16_t(zb_f32_to_bf16(v))
#else
#define LOAD(x) (x)
#define STORE(v) (v)
#endif
