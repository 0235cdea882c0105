/* zb_crash_report_install: a child that faults (NULL store, in a thread of
 * its own name) or fails an assertion reports the signal, the thread and its
 * stack on stderr and still dies of that signal; without the report
 * installed the same fault prints nothing. */
#include "zbmd/common.h"
#include "tap.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
int main(void)
{
	tap_skip_all("sanitizer build: ASan/TSan report fatal signals themselves "
		     "(zb_crash_report_install does nothing there)");
}
#else

enum what { FAULT_THREAD, ASSERT_MAIN, FAULT_BARE };

static void *faulting_thread(void *arg)
{
	(void)arg;
	(void)prctl(PR_SET_NAME, "crash-worker", 0, 0, 0);
	volatile int *p = NULL;
	*p = 42;
	return NULL;
}

static void child(enum what w)
{
	if (w != FAULT_BARE)
		zb_crash_report_install("crashtest");
	if (w == ASSERT_MAIN) {
		volatile int zero = 0;
		ZB_ASSERT(zero == 1);
	}
	pthread_t t;
	pthread_create(&t, NULL, faulting_thread, NULL);
	pthread_join(t, NULL);
	_exit(0);
}

/* run child w: its stderr into out, its wait status */
static int run(enum what w, char *out, size_t len)
{
	int fd[2];
	if (pipe(fd) != 0)
		return -1;
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		close(fd[0]);
		dup2(fd[1], STDERR_FILENO);
		struct rlimit rl = {0, 0};   /* no core files from this test */
		(void)setrlimit(RLIMIT_CORE, &rl);
		child(w);
	}
	close(fd[1]);
	size_t got = 0;
	ssize_t n;
	while (got < len - 1 && (n = read(fd[0], out + got, len - 1 - got)) > 0)
		got += (size_t)n;
	out[got] = '\0';
	close(fd[0]);
	int st = 0;
	waitpid(pid, &st, 0);
	return st;
}

int main(void)
{
	static char out[65536];
	int st;

	tap_plan(9);
	st = run(FAULT_THREAD, out, sizeof(out));
	ok(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV, "a fault still kills with SIGSEGV (status %d)", st);
	ok(strstr(out, "crashtest: fatal SIGSEGV (11) at address 0x0 in thread 'crash-worker'") != NULL,
	   "the report names signal, address and thread");
	ok(strstr(out, "; stack:\n") && strstr(out, "test_crash.t("), "and prints the stack (frames of this binary)");
	ok(strstr(out, "addr2line") != NULL, "and says how to resolve the frames");
	if (tap__last_failed)
		tap_diag("stderr: %s", out);

	st = run(ASSERT_MAIN, out, sizeof(out));
	ok(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "a failed assertion dies of SIGABRT (status %d)", st);
	ok(strstr(out, "zero == 1") != NULL, "after the assertion's own message");
	ok(strstr(out, "crashtest: fatal SIGABRT (6) in thread") && strstr(out, "stack:"),
	   "with the report and the stack");
	if (tap__last_failed)
		tap_diag("stderr: %s", out);

	st = run(FAULT_BARE, out, sizeof(out));
	ok(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV, "without the report: SIGSEGV too");
	ok(strstr(out, "fatal") == NULL, "and nothing printed (the report above is ours)");
	return tap_done();
}
#endif
