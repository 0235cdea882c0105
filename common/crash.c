/* Fatal-signal report: a process that dies of SIGSEGV, SIGBUS, SIGFPE,
 * SIGILL or SIGABRT first writes one line naming the signal, the faulting
 * address and the thread, then its stack (glibc backtrace_symbols_fd), to
 * stderr — the node's log, the journal under systemd — and then dies of the
 * same signal as it would have (exit status 128 + signal, core dump per the
 * system's settings). Only write(2)-based output in the handler: it may run
 * with the heap or any lock in a broken state. */
#include "zbmd/common.h"

#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
void zb_crash_report_install(const char *who)
{
	(void)who;   /* the sanitizers report these themselves, better */
}
#else
static char crash_who[32] = "zbmd";
static int crash_installed;

static void put(const char *s)
{
	size_t n = strlen(s);
	while (n) {
		ssize_t w = write(STDERR_FILENO, s, n);
		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

/* v in base 10 or 16 (with 0x) into buf; returns buf */
static char *num(char *buf, size_t len, unsigned long v, unsigned base)
{
	char *p = buf + len - 1;
	*p = '\0';
	do {
		*--p = "0123456789abcdef"[v % base];
		v /= base;
	} while (v && p > buf + 2);
	if (base == 16) {
		*--p = 'x';
		*--p = '0';
	}
	return p;
}

static const char *sig_name(int sig)
{
	switch (sig) {
	case SIGSEGV: return "SIGSEGV";
	case SIGBUS: return "SIGBUS";
	case SIGFPE: return "SIGFPE";
	case SIGILL: return "SIGILL";
	case SIGABRT: return "SIGABRT";
	default: return "signal";
	}
}

static void on_fatal(int sig, siginfo_t *si, void *uctx)
{
	(void)uctx;
	char b[32], tname[17] = {0};
	void *frames[64];

	(void)prctl(PR_GET_NAME, tname, 0, 0, 0);
	put(crash_who);
	put(": fatal ");
	put(sig_name(sig));
	put(" (");
	put(num(b, sizeof(b), (unsigned long)sig, 10));
	put(")");
	if (sig != SIGABRT) {
		put(" at address ");
		put(num(b, sizeof(b), (unsigned long)(uintptr_t)si->si_addr, 16));
	}
	put(" in thread '");
	put(tname);
	put("' (pid ");
	put(num(b, sizeof(b), (unsigned long)getpid(), 10));
	put("); stack:\n");
	int k = backtrace(frames, (int)ZB_ARRAY_LEN(frames));
	backtrace_symbols_fd(frames, k, STDERR_FILENO);
	put(crash_who);
	put(": (addresses as binary(+offset): `addr2line -f -e BINARY OFFSET`)\n");
	/* SA_RESETHAND put the default action back: a fault re-executes and
	 * kills; a raised signal (abort) must be sent again */
	if (si->si_code <= 0 || sig == SIGABRT)
		raise(sig);
}

void zb_crash_report_install(const char *who)
{
	static const int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
	struct sigaction sa;
	static char altstack[64 * 1024];
	stack_t ss = {.ss_sp = altstack, .ss_size = sizeof(altstack)};

	if (who && who[0]) {
		strncpy(crash_who, who, sizeof(crash_who) - 1);
		crash_who[sizeof(crash_who) - 1] = '\0';
	}
	if (crash_installed)
		return;
	crash_installed = 1;
	/* backtrace() loads libgcc on its first call (malloc, dlopen):
	 * do that now, not in the handler */
	void *warm[2];
	(void)backtrace(warm, 2);
	/* this thread's stack overflowing still gets a report */
	(void)sigaltstack(&ss, NULL);
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_fatal;
	sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < ZB_ARRAY_LEN(sigs); i++)
		(void)sigaction(sigs[i], &sa, NULL);
}
#endif
