/* tests/dataplane/node_helper.h — what the dataplane test programs share
 * around a node's life: SIGINT/SIGTERM stop it. Header-only: each helper is
 * a program of its own. */
#ifndef ZBMD_TESTS_NODE_HELPER_H
#define ZBMD_TESTS_NODE_HELPER_H

#include "zbmd/dataplane.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>

/* Install handler for SIGINT and SIGTERM and block both in this thread (and
 * the threads it starts: the lcores, the control thread); *old receives the
 * previous mask for nh_run_until(). */
static inline void nh_signals_block(void (*handler)(int), sigset_t *old)
{
	sigset_t block;
	struct sigaction sa;

	zb_crash_report_install(program_invocation_short_name);
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = handler;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	pthread_sigmask(SIG_BLOCK, &block, old);
}

/* After dp_node_launch(): run the loop here when the main lcore polls (the
 * handler must call dp_node_request_stop()), else sleep until *stop is set
 * by the handler. Then stop the node's loops (dp_node_stop). */
static inline void nh_run_until(volatile sig_atomic_t *stop, const sigset_t *old)
{
	if (dp_main_polls()) {
		pthread_sigmask(SIG_SETMASK, old, NULL);
		dp_node_wait();
	} else {
		sigset_t wm = *old;
		sigdelset(&wm, SIGINT);
		sigdelset(&wm, SIGTERM);
		while (!*stop)
			sigsuspend(&wm);
	}
	dp_node_stop();
}

#endif
