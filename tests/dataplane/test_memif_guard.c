/* dataplane/memif_guard.c: a fault inside a registered memif range that was
 * unmapped under us (the driver's disconnect race) is absorbed — the access
 * completes on zero pages and the process lives on, counted; any other fault
 * still reaches the handler installed before, or kills. */
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

static void prev_handler(int sig)
{
	(void)sig;
	_exit(3);
}

/* child: a fault outside every guarded range; with_prev: a handler of its
 * own installed before the guard. Returns the wait status. */
static int fault_elsewhere(bool with_prev)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		struct rlimit rl = {0, 0};
		(void)setrlimit(RLIMIT_CORE, &rl);
		/* its death is expected: no sanitizer report in the test log */
		int devnull = open("/dev/null", O_WRONLY);
		if (devnull >= 0)
			dup2(devnull, STDERR_FILENO);
		if (with_prev)
			signal(SIGSEGV, prev_handler);
		dp__memif_guard_install();
		volatile char *p = mmap(NULL, LEN, PROT_READ | PROT_WRITE,
					MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		munmap((void *)p, LEN);          /* unmapped, never guarded */
		p[10] = 1;
		_exit(0);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	return st;
}

int main(void)
{
	tap_plan(8);

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
	ok(1, "a write into the unmapped range did not kill the process");
	is_int(v[LEN / 2], 7, "it landed on a private zero page (read back)");
	is_int(v[100], 0, "the rest of the range reads zeros, not the old bytes");
	is_int(dp__memif_guard_absorbed() - before, 1, "one fault absorbed (counted)");

	int st = fault_elsewhere(true);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 3,
	   "a fault outside the ranges reaches the handler installed before (status %d)", st);
	st = fault_elsewhere(false);
	ok(WIFSIGNALED(st) || (WIFEXITED(st) && WEXITSTATUS(st) != 0),
	   "and without one it still kills (status %d)", st);
	return tap_done();
}
