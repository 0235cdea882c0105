/* tests/common/tap.h — a minimal TAP producer for zbmd tests (run under prove).
 *
 *   tap_plan(n);  ok(cond, "name %d", x);  is_int(got, want, "name");
 *   tap_skip_all("no RDMA device: ibv_devices lists none");
 *   return tap_done();   // exit status: 0 if every test passed, else 1
 *
 * Every test file must be able to fail: tap_done() fails when a check failed
 * or when fewer checks ran than planned.
 */
#ifndef ZBMD_TAP_H
#define ZBMD_TAP_H

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap__planned = -1, tap__run, tap__failed;
/* After a failed check, diagnostics also go to stderr, which prove shows
 * without -v (as Test::More does): a failure in CI explains itself. */
static int tap__last_failed;

static inline void tap_plan(int n)
{
	tap__planned = n;
	printf("1..%d\n", n);
	fflush(stdout);
}

/* Whole file skipped (machine lacks a device): TAP "1..0 # SKIP", exit 0. */
static inline __attribute__((noreturn)) void tap_skip_all(const char *fmt, ...)
{
	va_list ap;
	printf("1..0 # SKIP ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	exit(0);
}

static inline void tap_diag(const char *fmt, ...)
{
	va_list ap;
	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	if (tap__last_failed) {
		fprintf(stderr, "# ");
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
		fprintf(stderr, "\n");
	}
}

static inline int tap__ok(int cond, const char *file, int line,
			  const char *fmt, ...)
{
	va_list ap;
	tap__run++;
	if (!cond)
		tap__failed++;
	printf("%sok %d - ", cond ? "" : "not ", tap__run);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	if (!cond)
		printf("#   Failed at %s:%d\n", file, line);
	fflush(stdout);
	tap__last_failed = !cond;
	if (!cond) {
		fprintf(stderr, "#   Failed test %d at %s:%d: ", tap__run, file, line);
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
		fprintf(stderr, "\n");
	}
	return cond;
}
#define ok(cond, ...) tap__ok(!!(cond), __FILE__, __LINE__, __VA_ARGS__)

#define is_int(got, want, ...)                                                 \
	do {                                                                   \
		long long g__ = (long long)(got), w__ = (long long)(want);     \
		if (!ok(g__ == w__, __VA_ARGS__))                              \
			tap_diag("  got: %lld  expected: %lld", g__, w__);     \
	} while (0)

#define is_str(got, want, ...)                                                 \
	do {                                                                   \
		const char *g__ = (got), *w__ = (want);                        \
		if (!ok(g__ && w__ && strcmp(g__, w__) == 0, __VA_ARGS__))     \
			tap_diag("  got: '%s'  expected: '%s'",                \
				 g__ ? g__ : "(null)", w__ ? w__ : "(null)");  \
	} while (0)

static inline void tap_skip(int n, const char *why)
{
	for (int i = 0; i < n; i++) {
		tap__run++;
		printf("ok %d # SKIP %s\n", tap__run, why);
	}
	fflush(stdout);
}

static inline int tap_done(void)
{
	if (tap__planned < 0)
		printf("1..%d\n", tap__run);
	else if (tap__run != tap__planned)
		printf("# planned %d tests but ran %d\n", tap__planned, tap__run);
	fflush(stdout);
	return (tap__failed || (tap__planned >= 0 && tap__run != tap__planned))
		       ? 1 : 0;
}

#endif /* ZBMD_TAP_H */
