/* zbmd/common.h — definitions every zbmd module shares.
 *
 * Error convention (see STYLE.md): int functions return 0 or a negative
 * errno (-EINVAL, -ENOMEM, ...) or a negative project code from the table
 * below; zb_strerror() names either. Burst APIs return counts.
 */
#ifndef ZBMD_COMMON_H
#define ZBMD_COMMON_H

#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define ZB_LIKELY(x)   __builtin_expect(!!(x), 1)
#define ZB_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define ZB_CACHE_LINE  64
#define ZB_ALIGNED_CL  __attribute__((aligned(ZB_CACHE_LINE)))
#define ZB_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define ZB_UNUSED      __attribute__((unused))

/* Always-on assertion: init and control paths. Prints and aborts; it marks
 * a programming error, never bad input (bad input returns an error). */
#define ZB_ASSERT(cond)                                                        \
	do {                                                                   \
		if (ZB_UNLIKELY(!(cond)))                                      \
			zb__assert_fail(#cond, __FILE__, __LINE__, __func__);  \
	} while (0)

/* Debug-only assertion: the per-packet / per-message path. */
#ifdef ZB_DEBUG
#define ZB_DASSERT(cond) ZB_ASSERT(cond)
#else
#define ZB_DASSERT(cond) ((void)0)
#endif

void zb__assert_fail(const char *expr, const char *file, int line,
		     const char *func) __attribute__((noreturn, cold));

/* Report fatal signals (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT: failed
 * assertions too) on stderr — "WHO: fatal SIGSEGV (11) at address ... in
 * thread '...' (pid N); stack:" and the frames — then die of the signal as
 * before. Call once, early, from the main thread; the threads started
 * later inherit it. Does nothing under ASan/TSan (they report these). */
void zb_crash_report_install(const char *who);

/* Project error codes, below -ZB_ERR_BASE so they never collide with errno. */
#define ZB_ERR_BASE 10000
enum zb_err {
	ZB_ERR_STALE_ID = -(ZB_ERR_BASE + 1),   /* ActorId generation mismatch */
	ZB_ERR_MAILBOX_FULL = -(ZB_ERR_BASE + 2), /* backpressure */
	ZB_ERR_PEER_DOWN = -(ZB_ERR_BASE + 3),  /* destination node unreachable */
	ZB_ERR_EPOCH = -(ZB_ERR_BASE + 4),      /* membership epoch changed */
	ZB_ERR_TIMEOUT = -(ZB_ERR_BASE + 5),    /* call/collective deadline passed */
	ZB_ERR_BAD_FRAME = -(ZB_ERR_BASE + 6),  /* malformed wire input */
	ZB_ERR_AUTH = -(ZB_ERR_BASE + 7),       /* authentication failed */
	ZB_ERR_UNSUPPORTED = -(ZB_ERR_BASE + 8), /* backend/provider lacks it */
	ZB_ERR_UNAVAILABLE = -(ZB_ERR_BASE + 9), /* backend/device not present */
	ZB_ERR_CONFIG = -(ZB_ERR_BASE + 10),    /* invalid configuration */
	ZB_ERR_SHUTDOWN = -(ZB_ERR_BASE + 11),  /* runtime is stopping */
	ZB_ERR_DEVICE = -(ZB_ERR_BASE + 12),    /* device/driver reported an error */
	ZB_ERR_LAST = -(ZB_ERR_BASE + 13),
};

/* Name of a negative errno or project code. Never NULL. Thread-safe. */
const char *zb_strerror(int err);

/* Element types and reduction operators shared by gpu/ and collectives. */
enum zb_dtype {
	ZB_F32 = 0, ZB_F16, ZB_BF16, ZB_F64, ZB_I32, ZB_I64,
	ZB_DTYPE_COUNT
};
enum zb_redop { ZB_SUM = 0, ZB_PROD, ZB_MIN, ZB_MAX, ZB_AVG, ZB_REDOP_COUNT };

size_t zb_dtype_size(enum zb_dtype t);
const char *zb_dtype_name(enum zb_dtype t);   /* "float", "half", ... (nccl-tests names) */
const char *zb_redop_name(enum zb_redop op);  /* "sum", "prod", ... */
int zb_dtype_parse(const char *s, enum zb_dtype *out); /* 0 or -EINVAL */
int zb_redop_parse(const char *s, enum zb_redop *out); /* 0 or -EINVAL */

/* What getopt_long refused (c: its ':' or '?'; the optstring begins with
 * ':' or opterr is 0), said on stderr as "CMD: ..." with the option as it
 * was typed: "-x needs a value", "unknown option '-x'", "--name takes no
 * value (got '--name=v')", "ambiguous option '--s' (could be --a, --b)",
 * "unknown option '--bogus'". Call it before optind moves on. */
struct option;
void zb_opt_error(const char *cmd, int c, int argc, char *const argv[],
		  const struct option *opts);

/* Monotonic clock in nanoseconds (CLOCK_MONOTONIC). Not for the lcore hot
 * path inside DPDK (use the TSC there). */
/* aligned_alloc with the size rounded up to a multiple of align, as C11
 * requires (glibc tolerates other sizes; ASan rejects them). align: a power
 * of two. Free with free(). */
static inline void *zb_aligned_alloc(size_t align, size_t size)
{
	return aligned_alloc(align, (size + align - 1) & ~(align - 1));
}

static inline uint64_t zb_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Streaming copy for large payloads that will not be read again soon:
 * whole 64-byte lines of dst are written with non-temporal stores (they
 * bypass the caches, so a big message does not evict the working set and
 * costs no read-for-ownership of its destination); any head before the
 * first line boundary of dst and the tail after the last whole line are
 * copied normally. Best when dst lines are written whole, in one call each:
 * a line written partly by two calls is slow. Stores are weakly ordered:
 * zb_copy_stream_fence() before another thread may read dst. Falls back to
 * memcpy where SSE2 is missing. */
void zb_copy_stream(void *dst, const void *src, size_t n);
void zb_copy_stream_fence(void);

/* The last-level cache: the largest cache that CPU 0 reports (sysfs
 * /sys/devices/system/cpu/cpu0/cache, else sysconf), in bytes; 0 when the
 * machine does not say. Read from files on the first call (then kept): call
 * it at start-up, not on a fast path. */
size_t zb_llc_bytes(void);

/* The machine's physical memory in bytes (sysconf), 0 when it does not say. */
uint64_t zb_phys_mem_bytes(void);

/* Where "large, cold" messages start for a last-level cache of llc bytes
 * (the `auto` of [transport] and [coll] stream_min_kb): an eighth of it,
 * at least 1 MiB, in whole KiB; 4 MiB where llc is 0 (unknown). Below
 * that, a message and its neighbours' (the other ranks on the machine, the
 * sender's source) stay in the cache, and streaming stores or copying
 * frames out of the mbufs would only send them to memory and back. */
uint64_t zb_stream_min_for_llc(size_t llc);

/* Half-precision helpers (IEEE binary16 and bfloat16), round-to-nearest-even. */
float zb_f16_to_f32(uint16_t h);
uint16_t zb_f32_to_f16(float f);
float zb_bf16_to_f32(uint16_t h);
uint16_t zb_f32_to_bf16(float f);

#endif /* ZBMD_COMMON_H */
