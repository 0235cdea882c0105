/* gpu/internal.h — shared-internal declarations of the gpu module (gpu__*).
 * Not a public header: only gpu/ sources and tests/gpu include it. */
#ifndef ZBMD_GPU_INTERNAL_H
#define ZBMD_GPU_INTERNAL_H

#include "zbmd/common.h"
#include "zbmd/gpu.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* ---- branch-free half-precision conversions ------------------------------
 * Bit-identical to zb_f16_to_f32 & co in common/common.c (the test checks
 * every 16-bit input and a sweep of f32 inputs), but inline and written as
 * selects so that gcc vectorises the loops that use them. */
static inline uint32_t gpu__f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float gpu__u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline float gpu__bf16_to_f32(uint16_t h)
{
	return gpu__u2f((uint32_t)h << 16);
}

static inline uint16_t gpu__f32_to_bf16(float f)
{
	uint32_t u = gpu__f2u(f);
	uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
	uint32_t quiet = (u >> 16) | 0x40u;
	return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
}

static inline float gpu__f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
	uint32_t norm = sign | ((exp + 112u) << 23) | (man << 13);
	uint32_t infnan = sign | 0x7f800000u | (man << 13);
	/* subnormal (and zero): man * 2^-24, exact in f32 */
	uint32_t sub = sign | gpu__f2u((float)man * (1.0f / 16777216.0f));
	return gpu__u2f(exp == 0 ? sub : exp == 31 ? infnan : norm);
}

static inline uint16_t gpu__f32_to_f16(float f)
{
	uint32_t u = gpu__f2u(f);
	uint32_t sign = (u >> 16) & 0x8000u;
	uint32_t a = u & 0x7fffffffu;
	/* subnormal/zero: adding 0.5 lets the FPU round the mantissa */
	uint32_t sub = (gpu__f2u(gpu__u2f(a) + 0.5f) - 0x3f000000u) & 0x3ffu;
	/* normal: rebias exponent (-112 << 23) and round to nearest even */
	uint32_t norm = (a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13;
	uint32_t r = a > 0x7f800000u ? 0x7e00u
		     : a >= 0x477ff000u ? 0x7c00u
		     : a < 0x38800000u ? sub : norm;
	return (uint16_t)(sign | r);
}

#endif /* ZBMD_GPU_INTERNAL_H */
