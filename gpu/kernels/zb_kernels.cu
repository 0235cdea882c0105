// zbmd device kernels for the cuda and hip backends: reduce and scale with
// the semantics of gpu_host_reduce / gpu_host_scale (gpu/host_reduce.c).
// Compiled at run time by NVRTC / hipRTC (embedded into the binary as a
// string by gpu/shaders/embed_text.sh); tests/gpu/test_kernels_compile.sh
// also compile-checks this file with nvcc and hipcc.
//
// 16-bit floats travel as raw 16-bit words and are converted with integer
// code bit-identical to zb_f16_to_f32 & co in common/common.c, so results
// match the host reference exactly, whatever the device's own half support.
#if defined(__HIPCC__) && !defined(__HIPCC_RTC__)
#include <hip/hip_runtime.h>
#endif

typedef unsigned short zb_u16;
typedef unsigned int zb_u32;
typedef long long zb_i64;
typedef unsigned long long zb_u64;

__device__ __forceinline__ float zb_f16_to_f32(zb_u32 h)
{
	zb_u32 sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
	if (e == 0u)
		return __uint_as_float(sign | __float_as_uint((float)m * (1.0f / 16777216.0f)));
	if (e == 31u)
		return __uint_as_float(sign | 0x7f800000u | (m << 13));
	return __uint_as_float(sign | ((e + 112u) << 23) | (m << 13));
}

__device__ __forceinline__ zb_u16 zb_f32_to_f16(float f)
{
	zb_u32 u = __float_as_uint(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
	if (a > 0x7f800000u)
		return (zb_u16)(sign | 0x7e00u);
	if (a >= 0x477ff000u)
		return (zb_u16)(sign | 0x7c00u);
	if (a < 0x38800000u) {
		float v = __fadd_rn(__uint_as_float(a), 0.5f);
		return (zb_u16)(sign | ((__float_as_uint(v) - 0x3f000000u) & 0x3ffu));
	}
	return (zb_u16)(sign | ((a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13));
}

__device__ __forceinline__ float zb_bf16_to_f32(zb_u32 h) { return __uint_as_float(h << 16); }

__device__ __forceinline__ zb_u16 zb_f32_to_bf16(float f)
{
	zb_u32 u = __float_as_uint(f);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (zb_u16)((u >> 16) | 0x40u);
	return (zb_u16)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

#define ZB_ID(x) (x)

// One grid-stride loop per op (the branch on op is outside the loop).
#define ZB_LOOP(C, LOAD, STORE, EXPR)                                          \
	for (zb_u64 i = blockIdx.x * (zb_u64)blockDim.x + threadIdx.x; i < n; \
	     i += (zb_u64)gridDim.x * blockDim.x) {                            \
		C a = LOAD(d[i]);                                              \
		C b = LOAD(s[i]);                                              \
		d[i] = STORE(EXPR);                                            \
	}

#define ZB_REDUCE(NAME, T, C, LOAD, STORE, ADD, MUL)                           \
	extern "C" __global__ void NAME(T *d, const T *s, zb_u64 n, int op)    \
	{                                                                      \
		if (op == 0 || op == 4) {                                      \
			ZB_LOOP(C, LOAD, STORE, ADD)                           \
		} else if (op == 1) {                                          \
			ZB_LOOP(C, LOAD, STORE, MUL)                           \
		} else if (op == 2) {                                          \
			ZB_LOOP(C, LOAD, STORE, (b < a ? b : a))               \
		} else {                                                       \
			ZB_LOOP(C, LOAD, STORE, (b > a ? b : a))               \
		}                                                              \
	}

// Float add/mul spelled with the _rn intrinsics: no contraction into FMA.
ZB_REDUCE(zb_reduce_0, float, float, ZB_ID, ZB_ID, __fadd_rn(a, b), __fmul_rn(a, b))
ZB_REDUCE(zb_reduce_1, zb_u16, float, zb_f16_to_f32, zb_f32_to_f16, __fadd_rn(a, b), __fmul_rn(a, b))
ZB_REDUCE(zb_reduce_2, zb_u16, float, zb_bf16_to_f32, zb_f32_to_bf16, __fadd_rn(a, b), __fmul_rn(a, b))
ZB_REDUCE(zb_reduce_3, double, double, ZB_ID, ZB_ID, __dadd_rn(a, b), __dmul_rn(a, b))
ZB_REDUCE(zb_reduce_4, int, int, ZB_ID, ZB_ID, (int)((zb_u32)a + (zb_u32)b), (int)((zb_u32)a * (zb_u32)b))
ZB_REDUCE(zb_reduce_5, zb_i64, zb_i64, ZB_ID, ZB_ID, (zb_i64)((zb_u64)a + (zb_u64)b), (zb_i64)((zb_u64)a * (zb_u64)b))

#define ZB_SCALE_LOOP(T, BODY)                                                 \
	for (zb_u64 i = blockIdx.x * (zb_u64)blockDim.x + threadIdx.x; i < n; \
	     i += (zb_u64)gridDim.x * blockDim.x) {                            \
		T x = d[i];                                                    \
		BODY;                                                          \
	}

// scale kernels all take (d, n, float ff, double fd) and use one of them.
extern "C" __global__ void zb_scale_0(float *d, zb_u64 n, float ff, double fd)
{ (void)fd; ZB_SCALE_LOOP(float, d[i] = __fmul_rn(x, ff)) }
extern "C" __global__ void zb_scale_1(zb_u16 *d, zb_u64 n, float ff, double fd)
{ (void)fd; ZB_SCALE_LOOP(zb_u16, d[i] = zb_f32_to_f16(__fmul_rn(zb_f16_to_f32(x), ff))) }
extern "C" __global__ void zb_scale_2(zb_u16 *d, zb_u64 n, float ff, double fd)
{ (void)fd; ZB_SCALE_LOOP(zb_u16, d[i] = zb_f32_to_bf16(__fmul_rn(zb_bf16_to_f32(x), ff))) }
extern "C" __global__ void zb_scale_3(double *d, zb_u64 n, float ff, double fd)
{ (void)ff; ZB_SCALE_LOOP(double, d[i] = __dmul_rn(x, fd)) }
// integers: in double, rounded half away from zero (round()), saturated
extern "C" __global__ void zb_scale_4(int *d, zb_u64 n, float ff, double fd)
{
	(void)ff;
	ZB_SCALE_LOOP(int, double v = round(__dmul_rn((double)x, fd));
		      d[i] = v > 2147483647.0 ? 2147483647 : v < -2147483648.0 ? (-2147483647 - 1) : (int)v)
}
extern "C" __global__ void zb_scale_5(zb_i64 *d, zb_u64 n, float ff, double fd)
{
	(void)ff;
	ZB_SCALE_LOOP(zb_i64, double v = round(__dmul_rn((double)x, fd));
		      d[i] = v >= 9223372036854775808.0 ? 9223372036854775807LL
			     : v < -9223372036854775808.0 ? (-9223372036854775807LL - 1) : (zb_i64)v)
}

// C = alpha op(A) op(B) + beta C, column-major, 16x16 shared-memory tiles;
// launch with block (16, 16) and grid (ceil(m/16), ceil(n/16)).  Used by
// hip (no BLAS dependency) and by cuda when cuBLAS is missing.  beta == 0
// means C is not read (BLAS rule).
extern "C" __global__ void zb_sgemm(int ta, int tb, int m, int n, int k,
				    float alpha, const float *a, int lda,
				    const float *b, int ldb, float beta,
				    float *c, int ldc)
{
	__shared__ float As[16][17];
	__shared__ float Bs[16][17];
	int lx = threadIdx.x, ly = threadIdx.y;
	int i = blockIdx.x * 16 + lx, j = blockIdx.y * 16 + ly;
	float acc = 0.0f;
	for (int t = 0; t < k; t += 16) {
		int p = t + ly, q = t + lx;
		As[lx][ly] = (i < m && p < k)
			? (ta ? a[p + (zb_u64)i * lda] : a[i + (zb_u64)p * lda]) : 0.0f;
		Bs[lx][ly] = (q < k && j < n)
			? (tb ? b[j + (zb_u64)q * ldb] : b[q + (zb_u64)j * ldb]) : 0.0f;
		__syncthreads();
		for (int r = 0; r < 16; r++)
			acc = __fadd_rn(acc, __fmul_rn(As[lx][r], Bs[r][ly]));
		__syncthreads();
	}
	if (i < m && j < n) {
		zb_u64 ci = i + (zb_u64)j * ldc;
		float v = alpha * acc;
		if (beta != 0.0f)
			v += beta * c[ci];
		c[ci] = v;
	}
}
