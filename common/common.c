/* Shared helpers: error strings, dtype/op tables, half-precision conversion. */
#include "zbmd/common.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void zb__assert_fail(const char *expr, const char *file, int line,
		     const char *func)
{
	fprintf(stderr, "zbmd: assertion failed: %s (%s:%d %s)\n", expr, file,
		line, func);
	fflush(stderr);
	abort();
}

static const char *const zb_err_names[] = {
	[1] = "stale actor id (generation mismatch)",
	[2] = "mailbox full (backpressure)",
	[3] = "peer down",
	[4] = "membership epoch changed",
	[5] = "timed out",
	[6] = "malformed frame",
	[7] = "authentication failed",
	[8] = "not supported by this backend",
	[9] = "backend or device unavailable",
	[10] = "invalid configuration",
	[11] = "shutting down",
	[12] = "device error",
};

const char *zb_strerror(int err)
{
	static __thread char buf[64];
	int code = -err - ZB_ERR_BASE;

	if (err <= -ZB_ERR_BASE && code > 0 &&
	    code < (int)ZB_ARRAY_LEN(zb_err_names) && zb_err_names[code])
		return zb_err_names[code];
	if (err < 0 && err > -ZB_ERR_BASE) {
		/* strerror_r (GNU) may return a static string or fill buf. */
		return strerror_r(-err, buf, sizeof(buf));
	}
	snprintf(buf, sizeof(buf), "unknown error %d", err);
	return buf;
}

static const struct {
	const char *name;
	size_t size;
} zb_dtypes[ZB_DTYPE_COUNT] = {
	[ZB_F32] = {"float", 4}, [ZB_F16] = {"half", 2},
	[ZB_BF16] = {"bfloat16", 2}, [ZB_F64] = {"double", 8},
	[ZB_I32] = {"int32", 4}, [ZB_I64] = {"int64", 8},
};
static const char *const zb_redops[ZB_REDOP_COUNT] = {
	[ZB_SUM] = "sum", [ZB_PROD] = "prod", [ZB_MIN] = "min",
	[ZB_MAX] = "max", [ZB_AVG] = "avg",
};

size_t zb_dtype_size(enum zb_dtype t)
{
	ZB_ASSERT((unsigned)t < ZB_DTYPE_COUNT);
	return zb_dtypes[t].size;
}

const char *zb_dtype_name(enum zb_dtype t)
{
	return (unsigned)t < ZB_DTYPE_COUNT ? zb_dtypes[t].name : "?";
}

const char *zb_redop_name(enum zb_redop op)
{
	return (unsigned)op < ZB_REDOP_COUNT ? zb_redops[op] : "?";
}

int zb_dtype_parse(const char *s, enum zb_dtype *out)
{
	static const struct { const char *alias; enum zb_dtype t; } aliases[] = {
		{"float", ZB_F32}, {"f32", ZB_F32}, {"float32", ZB_F32},
		{"half", ZB_F16}, {"f16", ZB_F16}, {"float16", ZB_F16},
		{"bfloat16", ZB_BF16}, {"bf16", ZB_BF16},
		{"double", ZB_F64}, {"f64", ZB_F64}, {"float64", ZB_F64},
		{"int32", ZB_I32}, {"i32", ZB_I32}, {"int", ZB_I32},
		{"int64", ZB_I64}, {"i64", ZB_I64},
	};
	for (size_t i = 0; i < ZB_ARRAY_LEN(aliases); i++)
		if (strcmp(s, aliases[i].alias) == 0) {
			*out = aliases[i].t;
			return 0;
		}
	return -EINVAL;
}

int zb_redop_parse(const char *s, enum zb_redop *out)
{
	for (int i = 0; i < ZB_REDOP_COUNT; i++)
		if (strcmp(s, zb_redops[i]) == 0) {
			*out = (enum zb_redop)i;
			return 0;
		}
	return -EINVAL;
}

static inline uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

float zb_bf16_to_f32(uint16_t h) { return u2f((uint32_t)h << 16); }

uint16_t zb_f32_to_bf16(float f)
{
	uint32_t u = f2u(f);
	if ((u & 0x7fffffffu) > 0x7f800000u)     /* NaN: keep it quiet NaN */
		return (uint16_t)((u >> 16) | 0x40);
	u += 0x7fffu + ((u >> 16) & 1u);          /* round to nearest even */
	return (uint16_t)(u >> 16);
}

float zb_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;

	if (exp == 0) {
		if (man == 0)
			return u2f(sign);
		/* subnormal: value = man * 2^-24 */
		float v = (float)man * (1.0f / 16777216.0f);
		return sign ? -v : v;
	}
	if (exp == 31)
		return u2f(sign | 0x7f800000u | (man << 13));
	return u2f(sign | ((exp + 112u) << 23) | (man << 13));
}

uint16_t zb_f32_to_f16(float f)
{
	uint32_t u = f2u(f);
	uint32_t sign = (u >> 16) & 0x8000u;
	uint32_t a = u & 0x7fffffffu;

	if (a > 0x7f800000u)
		return (uint16_t)(sign | 0x7e00u);           /* NaN */
	if (a >= 0x477ff000u)                                 /* >= 65520: inf */
		return (uint16_t)(sign | 0x7c00u);
	if (a < 0x38800000u) {                                /* subnormal/zero */
		/* Add 0.5 (as float) so the FPU rounds the mantissa for us. */
		float v = u2f(a) + 0.5f;
		/* No mask: a carry out of the mantissa is the smallest normal (0x0400). */
		return (uint16_t)(sign | (f2u(v) - 0x3f000000u));
	}
	uint32_t mant_odd = (a >> 13) & 1u;
	a += 0xc8000fffu + mant_odd;      /* rebias exponent (-112<<23) + round */
	return (uint16_t)(sign | (a >> 13));
}

/* ---- streaming copy ------------------------------------------------------- */

#if defined(__SSE2__)
#include <emmintrin.h>

void zb_copy_stream(void *dst, const void *src, size_t n)
{
	uint8_t *d = dst;
	const uint8_t *s = src;
	size_t head = (64 - ((uintptr_t)d & 63)) & 63;

	if (head >= n) {
		memcpy(d, s, n);
		return;
	}
	memcpy(d, s, head);
	d += head;
	s += head;
	n -= head;
	for (; n >= 64; n -= 64, d += 64, s += 64) {
		__m128i a = _mm_loadu_si128((const __m128i *)s);
		__m128i b = _mm_loadu_si128((const __m128i *)(s + 16));
		__m128i c = _mm_loadu_si128((const __m128i *)(s + 32));
		__m128i e = _mm_loadu_si128((const __m128i *)(s + 48));
		_mm_stream_si128((__m128i *)d, a);
		_mm_stream_si128((__m128i *)(d + 16), b);
		_mm_stream_si128((__m128i *)(d + 32), c);
		_mm_stream_si128((__m128i *)(d + 48), e);
	}
	memcpy(d, s, n);
}

void zb_copy_stream_fence(void)
{
	_mm_sfence();
}
#else
void zb_copy_stream(void *dst, const void *src, size_t n)
{
	memcpy(dst, src, n);
}

void zb_copy_stream_fence(void)
{
	atomic_thread_fence(memory_order_release);
}
#endif

/* ---- the last-level cache ------------------------------------------------ */

/* One sysfs cache attribute of cpu0's cache index i: its first line. */
static int cache_attr(unsigned i, const char *name, char *out, size_t len)
{
	char path[96];
	snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu0/cache/index%u/%s",
		 i, name);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	char *r = fgets(out, (int)len, f);
	fclose(f);
	if (!r)
		return -1;
	out[strcspn(out, "\n")] = '\0';
	return 0;
}

static size_t llc_read(void)
{
	size_t best = 0;
	unsigned best_level = 0;
	char v[64];

	for (unsigned i = 0; i < 16; i++) {
		if (cache_attr(i, "level", v, sizeof(v)) != 0)
			break;
		unsigned level = (unsigned)strtoul(v, NULL, 10);
		if (cache_attr(i, "type", v, sizeof(v)) != 0 ||
		    strcmp(v, "Instruction") == 0)
			continue;
		if (cache_attr(i, "size", v, sizeof(v)) != 0)
			continue;
		char *end;
		unsigned long long sz = strtoull(v, &end, 10);
		if (*end == 'K')
			sz <<= 10;
		else if (*end == 'M')
			sz <<= 20;
		else if (*end == 'G')
			sz <<= 30;
		if (level > best_level || (level == best_level && sz > best)) {
			best_level = level;
			best = (size_t)sz;
		}
	}
#ifdef _SC_LEVEL3_CACHE_SIZE
	if (best == 0) {
		long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
		long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
		best = l3 > 0 ? (size_t)l3 : l2 > 0 ? (size_t)l2 : 0;
	}
#endif
	return best;
}

size_t zb_llc_bytes(void)
{
	/* read once: every lane and communicator asks at start-up (a race
	 * only reads the same files twice) */
	static _Atomic size_t cached;   /* the size + 1; 0: not read yet */
	size_t v = atomic_load_explicit(&cached, memory_order_relaxed);
	if (v == 0) {
		v = llc_read() + 1;
		atomic_store_explicit(&cached, v, memory_order_relaxed);
	}
	return v - 1;
}

uint64_t zb_phys_mem_bytes(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);

	return pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 0;
}

uint64_t zb_stream_min_for_llc(size_t llc)
{
	if (llc == 0)
		return 4u << 20;
	uint64_t m = ((uint64_t)llc / 8) & ~(uint64_t)1023;
	return m < (1u << 20) ? 1u << 20 : m;
}
