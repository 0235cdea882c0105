/* dataplane/memif_guard.c: a fault inside a registered memif range that was
 * unmapped under us (the driver's disconnect race) is absorbed — the access
 * completes on zero pages and the process lives on, counted; a NULL-pointer
 * fault inside a guarded burst (the race's other face: the driver's region
 * descriptor already NULL) ends the burst with the caller's fallback count;
 * any other fault still reaches the handler installed before, or kills. */
#include "tap.h"
#include "zbmd/common.h"
#include "../../dataplane/internal.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define LEN (64 * 1024)

/* where the bursts below load from: NULL-ish, or an unmapped page; volatile
 * so that the compiler cannot see a NULL dereference (and trap instead) */
static volatile uintptr_t load_at = 8;

static uint16_t faulting_burst(uint16_t port_id, uint16_t q, struct rte_mbuf **pkts,
			       uint16_t n)
{
	(void)port_id; (void)q; (void)pkts;
	return (uint16_t)(*(volatile uint16_t *)load_at + n);
}

static uint16_t good_burst(uint16_t port_id, uint16_t q, struct rte_mbuf **pkts,
			   uint16_t n)
{
	(void)pkts;
	return (uint16_t)(port_id + q + n);
}

static void prev_handler(int sig)
{
	(void)sig;
	_exit(3);
}

/* Fork a child whose death is expected: no core file, and no sanitizer
 * report in the test log. Returns fork's value. */
static pid_t fork_doomed(void)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		struct rlimit rl = {0, 0};
		(void)setrlimit(RLIMIT_CORE, &rl);
		int devnull = open("/dev/null", O_WRONLY);
		if (devnull >= 0)
			dup2(devnull, STDERR_FILENO);
	}
	return pid;
}

static int wait_status(pid_t pid)
{
	int st = 0;
	waitpid(pid, &st, 0);
	return st;
}

/* child: a fault outside every guarded range; with_prev: a handler of its
 * own installed before the guard. Returns the wait status. */
static int fault_elsewhere(bool with_prev)
{
	pid_t pid = fork_doomed();
	if (pid == 0) {
		if (with_prev)
			signal(SIGSEGV, prev_handler);
		dp__memif_guard_install();
		volatile char *p = mmap(NULL, LEN, PROT_READ | PROT_WRITE,
					MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		munmap((void *)p, LEN);          /* unmapped, never guarded */
		p[10] = 1;
		_exit(0);
	}
	return wait_status(pid);
}

/* child: a load at `at` — inside a guarded burst or not. Wait status. */
static int fault_child(uintptr_t at, bool in_burst)
{
	pid_t pid = fork_doomed();
	if (pid == 0) {
		dp__memif_guard_install();
		load_at = at;
		if (in_burst)
			(void)dp__memif_guard_burst(faulting_burst, 0, 0, NULL, 1, 1);
		else
			(void)faulting_burst(0, 0, NULL, 1);
		_exit(0);
	}
	return wait_status(pid);
}

int main(void)
{
	tap_plan(15);

	dp__memif_guard_install();
	char *r = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ok(r != MAP_FAILED, "a shared region mapped");
	memset(r, 0x5a, LEN);
	dp__memif_guard_add((uintptr_t)r, (uintptr_t)r + LEN);
	dp__memif_guard_add((uintptr_t)r, (uintptr_t)r + LEN);
	is_int(dp__memif_guard_ranges(), 1, "registered once (the same range twice)");
	uint64_t before = dp__memif_guard_absorbed();

	munmap(r, LEN);                          /* the driver's disconnect */
	volatile char *v = r;
	v[LEN / 2] = 7;                          /* a burst still in flight */
	/* (had the write killed the process, no check below would run) */
	is_int(v[LEN / 2], 7, "it landed on a private zero page (read back)");
	is_int(v[100], 0, "the rest of the range reads zeros, not the old bytes");
	is_int(dp__memif_guard_absorbed() - before, 1, "the write into the unmapped range was absorbed: one fault counted");

	int st = fault_elsewhere(true);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 3,
	   "a fault outside the ranges reaches the handler installed before (status %d)", st);
	st = fault_elsewhere(false);
	ok(WIFSIGNALED(st) || (WIFEXITED(st) && WEXITSTATUS(st) != 0),
	   "and without one it still kills (status %d)", st);

	/* NULL descriptors inside a burst */
	before = dp__memif_guard_absorbed();
	is_int(dp__memif_guard_burst(good_burst, 3, 4, NULL, 5, 99), 12,
	       "a burst that does not fault returns what the driver returned");
	load_at = 8;
	is_int(dp__memif_guard_burst(faulting_burst, 0, 0, NULL, 32, 32), 32,
	       "a NULL load inside a TX burst: the burst ends, the caller's count (all sent)");
	is_int(dp__memif_guard_burst(faulting_burst, 0, 0, NULL, 32, 0), 0,
	       "again at once, an RX burst: 0 frames (SIGSEGV was unblocked after the jump)");
	is_int(dp__memif_guard_absorbed() - before, 2, "both counted");
	is_int(dp__memif_guard_burst(good_burst, 1, 1, NULL, 1, 99), 3,
	       "the next burst runs normally");

	/* dies: of SIGSEGV, or under a sanitizer by its report's exit(1) */
	st = fault_child(8, false);
	ok((WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV) || (WIFEXITED(st) && WEXITSTATUS(st) != 0),
	   "a NULL load outside a burst still kills (status %d)", st);
	void *u = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	munmap(u, LEN);
	st = fault_child((uintptr_t)u + 64, true);
	ok((WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV) || (WIFEXITED(st) && WEXITSTATUS(st) != 0),
	   "a fault inside a burst at an address neither NULL nor guarded kills (status %d)", st);
	st = fault_child(8, true);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	   "the same burst with a NULL load returns in a fresh process (status %d)", st);
	return tap_done();
}
