// zbmd device kernels for the cuda and hip backends: reduce and scale with
// the semantics of gpu_host_reduce / gpu_host_scale (gpu/host_reduce.c).
// Compiled at run time by NVRTC / hipRTC (embedded into the binary as a
// string by gpu/shaders/embed_text.sh); tests/gpu/test_kernels_compile.sh
// also compile-checks this file with nvcc and hipcc.
//
// 16-bit floats travel as raw 16-bit words and are converted with integer
// code bit-identical to gpu__f16_to_f32 & co in gpu/internal.h, so results
// match the host reduction exactly, whatever the device's own half support.
#if defined(__HIPCC__) && !defined(__HIPCC_RTC__)
#include <hip/hip_runtime.h>
#endif

typedef unsigned short zb_u16;
typedef unsigned int zb_u32;
typedef long long zb_i64;
typedef unsigned long long zb_u64;

// NVIDIA (nvcc, NVRTC): the conversion instructions, whose results equal
// the integer code's for every input but NaNs (IEEE round to nearest even
// both ways, subnormals exact); NaNs are patched to the host's encoding.
// With the integer code an f16 sum over 32 MiB ran at 2.1 TB/s on an H200,
// the bf16 one (whose conversions are shifts) at 3.1; with these, 3.0.
#if defined(__CUDACC__) && !defined(__HIP__) && !defined(__HIPCC__) && \
	!defined(__HIP_PLATFORM_AMD__)
#define ZB_F16_CVT 1
#endif

__device__ __forceinline__ float zb_f16_to_f32(zb_u32 h)
{
#ifdef ZB_F16_CVT
	float f;
	asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"((zb_u16)h));
	if ((h & 0x7fffu) > 0x7c00u) /* NaN: keep sign and payload */
		f = __uint_as_float(((h & 0x8000u) << 16) | 0x7f800000u | ((h & 0x3ffu) << 13));
	return f;
#else
	zb_u32 sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
	if (e == 0u)
		return __uint_as_float(sign | __float_as_uint((float)m * (1.0f / 16777216.0f)));
	if (e == 31u)
		return __uint_as_float(sign | 0x7f800000u | (m << 13));
	return __uint_as_float(sign | ((e + 112u) << 23) | (m << 13));
#endif
}

__device__ __forceinline__ zb_u16 zb_f32_to_f16(float f)
{
	zb_u32 u = __float_as_uint(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
	if (a > 0x7f800000u)
		return (zb_u16)(sign | 0x7e00u);
#ifdef ZB_F16_CVT
	zb_u16 r;
	asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(f));
	return r;
#else
	if (a >= 0x477ff000u)
		return (zb_u16)(sign | 0x7c00u);
	if (a < 0x38800000u) {
		float v = __fadd_rn(__uint_as_float(a), 0.5f);
		return (zb_u16)(sign | (__float_as_uint(v) - 0x3f000000u)); // carry = 0x0400
	}
	return (zb_u16)(sign | ((a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13));
#endif
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

// d[I] = d[I] OP s[I], one element.
#define ZB_ELEM(C, LOAD, STORE, EXPR, I)                                       \
	{                                                                      \
		C a = LOAD(d[I]);                                              \
		C b = LOAD(s[I]);                                              \
		d[I] = STORE(EXPR);                                            \
	}

// One grid-stride loop per op (the branch on op is outside the loop).
#define ZB_LOOP(C, LOAD, STORE, EXPR)                                          \
	for (zb_u64 i = blockIdx.x * (zb_u64)blockDim.x + threadIdx.x; i < n; \
	     i += (zb_u64)gridDim.x * blockDim.x)                              \
		ZB_ELEM(C, LOAD, STORE, EXPR, i)

#define ZB_REDUCE_OPS(LOOP, C, LOAD, STORE, ADD, MUL)                          \
	if (op == 0 || op == 4) {                                              \
		LOOP(C, LOAD, STORE, ADD)                                      \
	} else if (op == 1) {                                                  \
		LOOP(C, LOAD, STORE, MUL)                                      \
	} else if (op == 2) {                                                  \
		LOOP(C, LOAD, STORE, (b < a ? b : a))                          \
	} else {                                                               \
		LOOP(C, LOAD, STORE, (b > a ? b : a))                          \
	}

#define ZB_REDUCE(NAME, T, C, LOAD, STORE, ADD, MUL)                           \
	extern "C" __global__ void NAME(T *d, const T *s, zb_u64 n, int op)    \
	{                                                                      \
		ZB_REDUCE_OPS(ZB_LOOP, C, LOAD, STORE, ADD, MUL)               \
	}

// 16-bit types: one thread per 2-byte element issues 2-byte loads, and HBM
// wants wider ones (H200, 32 MiB sum: f16 1.2 and bf16 1.7 TB/s that way,
// f32 2.6, counting 3 bytes moved per byte reduced).  Where d and s share their
// alignment modulo 16 bytes, the elements before the first 16-byte boundary
// go one by one, then each thread takes 8 elements in one 16-byte load of
// each operand, then the tail one by one; otherwise all go one by one.
struct __align__(16) zb_v4 {
	zb_u32 x, y, z, w;
};

// Combine the two 16-bit elements of the words X (d) and Y (s) into X.
#define ZB_PAIR(C, LOAD, STORE, EXPR, X, Y)                                    \
	{                                                                      \
		C a = LOAD((X) & 0xffffu), b = LOAD((Y) & 0xffffu);            \
		zb_u32 lo = (zb_u32)STORE(EXPR);                               \
		a = LOAD((X) >> 16);                                           \
		b = LOAD((Y) >> 16);                                           \
		(X) = lo | ((zb_u32)STORE(EXPR) << 16);                        \
	}

// Head, 16-byte vectors, tail (d 2-byte aligned; reduce and scale).
#define ZB_LOOP16(C, LOAD, STORE, EXPR)                                        \
	{                                                                      \
		zb_u64 t0 = blockIdx.x * (zb_u64)blockDim.x + threadIdx.x;     \
		zb_u64 st = (zb_u64)gridDim.x * blockDim.x;                    \
		zb_u64 h = ((((zb_u64)d ^ (zb_u64)s) & 15u) != 0u)            \
			? n : ((16u - ((zb_u64)d & 15u)) & 15u) / 2u;          \
		if (h > n)                                                     \
			h = n;                                                 \
		zb_u64 nv = (n - h) / 8u;                                      \
		zb_v4 *dv = (zb_v4 *)(d + h);                                  \
		const zb_v4 *sv = (const zb_v4 *)(s + h);                      \
		for (zb_u64 i = t0; i < h; i += st)                            \
			ZB_ELEM(C, LOAD, STORE, EXPR, i)                       \
		for (zb_u64 i = t0; i < nv; i += st) {                         \
			zb_v4 x = dv[i];                                       \
			const zb_v4 y = sv[i];                                 \
			ZB_PAIR(C, LOAD, STORE, EXPR, x.x, y.x)                \
			ZB_PAIR(C, LOAD, STORE, EXPR, x.y, y.y)                \
			ZB_PAIR(C, LOAD, STORE, EXPR, x.z, y.z)                \
			ZB_PAIR(C, LOAD, STORE, EXPR, x.w, y.w)                \
			dv[i] = x;                                             \
		}                                                              \
		for (zb_u64 i = h + nv * 8u + t0; i < n; i += st)              \
			ZB_ELEM(C, LOAD, STORE, EXPR, i)                       \
	}

// Sum and prod of 16-bit floats: a NaN operand wins explicitly, d's before
// s's (the host rule, gpu/host_reduce.c); the device's add would return its
// canonical NaN instead.
#define ZB_NAN_FIRST(E) (isnan(a) ? a : isnan(b) ? b : (E))
#define ZB_REDUCE16(NAME, LOAD, STORE)                                         \
	extern "C" __global__ void NAME(zb_u16 *d, const zb_u16 *s, zb_u64 n,  \
					int op)                                \
	{                                                                      \
		ZB_REDUCE_OPS(ZB_LOOP16, float, LOAD, STORE,                   \
			      ZB_NAN_FIRST(__fadd_rn(a, b)),                   \
			      ZB_NAN_FIRST(__fmul_rn(a, b)))                   \
	}

// Float add/mul spelled with the _rn intrinsics: no contraction into FMA.
ZB_REDUCE(zb_reduce_0, float, float, ZB_ID, ZB_ID, __fadd_rn(a, b), __fmul_rn(a, b))
ZB_REDUCE16(zb_reduce_1, zb_f16_to_f32, zb_f32_to_f16)
ZB_REDUCE16(zb_reduce_2, zb_bf16_to_f32, zb_f32_to_bf16)
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
// 16-bit scale: ZB_LOOP16's split with s = d (b unused).
#define ZB_SCALE16(NAME, LOAD, STORE)                                          \
	extern "C" __global__ void NAME(zb_u16 *d, zb_u64 n, float ff, double fd) \
	{                                                                      \
		(void)fd;                                                      \
		const zb_u16 *s = d;                                           \
		ZB_LOOP16(float, LOAD, STORE, ((void)b, __fmul_rn(a, ff)))     \
	}
ZB_SCALE16(zb_scale_1, zb_f16_to_f32, zb_f32_to_f16)
ZB_SCALE16(zb_scale_2, zb_bf16_to_f32, zb_f32_to_bf16)
extern "C" __global__ void zb_scale_3(double *d, zb_u64 n, float ff, double fd)
{ (void)ff; ZB_SCALE_LOOP(double, d[i] = __dmul_rn(x, fd)) }
// i32: in double, rounded half away from zero (round()), saturated
extern "C" __global__ void zb_scale_4(int *d, zb_u64 n, float ff, double fd)
{
	(void)ff;
	ZB_SCALE_LOOP(int, double v = round(__dmul_rn((double)x, fd));
		      d[i] = v > 2147483647.0 ? 2147483647 : v < -2147483648.0 ? (-2147483647 - 1) : (int)v)
}
// i64: exact, x * m * 2^e with the integer steps of gpu/host_reduce.c
// (i64_scale_one): |x| * m in 128 bits from 32-bit halves, shifted with
// round half up on the magnitude, saturated.
__device__ __forceinline__ zb_i64 zb_scale_i64(zb_i64 x, zb_u64 m, int e, bool fneg)
{
	bool neg = (x < 0) != fneg;
	zb_u64 ax = x < 0 ? 0ull - (zb_u64)x : (zb_u64)x;
	zb_u64 lim = neg ? 1ull << 63 : (1ull << 63) - 1, q;
	zb_u64 a0 = ax & 0xffffffffull, a1 = ax >> 32;
	zb_u64 b0 = m & 0xffffffffull, b1 = m >> 32;
	zb_u64 p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0;
	zb_u64 mid = (p00 >> 32) + (p01 & 0xffffffffull) + (p10 & 0xffffffffull);
	zb_u64 lo = (p00 & 0xffffffffull) | (mid << 32);
	zb_u64 hi = a1 * b1 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);

	if (e >= 0) {
		if (hi == 0 && lo == 0)
			return 0;
		q = e > 63 || hi != 0 || lo > lim >> e ? lim : lo << e;
	} else {
		int s = -e;
		zb_u64 qlo, qhi, half;
		if (s >= 128) {
			qlo = qhi = 0;
		} else if (s >= 64) {
			qlo = hi >> (s - 64);
			qhi = 0;
		} else {
			qlo = (lo >> s) | (hi << (64 - s));
			qhi = hi >> s;
		}
		half = s - 1 >= 128 ? 0 : s - 1 >= 64 ? (hi >> (s - 65)) & 1
						      : (lo >> (s - 1)) & 1;
		q = qhi != 0 || qlo > lim ? lim : qlo;
		if (q < lim)
			q += half;
	}
	return neg ? (zb_i64)(0ull - q) : (zb_i64)q;
}

extern "C" __global__ void zb_scale_5(zb_i64 *d, zb_u64 n, float ff, double fd)
{
	(void)ff;
	zb_u64 b = (zb_u64)__double_as_longlong(fd);
	int be = (int)((b >> 52) & 0x7ff);
	zb_u64 fm = (b & 0xfffffffffffffull) | (be ? 1ull << 52 : 0);
	int fe = (be ? be : 1) - 1075;
	bool fneg = (b >> 63) != 0;
	ZB_SCALE_LOOP(zb_i64, d[i] = zb_scale_i64(x, fm, fe, fneg))
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
