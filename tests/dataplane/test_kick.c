/* dp_lcore_kick: an lcore deep in its adaptive back-off (sleeps of up to
 * idle_sleep_us_max = 1 s here) wakes when another thread kicks it, its
 * `kicked` counter counts the early wake-ups, a kick while it polls costs
 * nothing (no wake-up counted), and a kick to a missing lcore is ignored.
 * The node runs in-process on net_ring. */
#include "tap.h"
#include "zbmd/common.h"
#include "zbmd/config.h"
#include "zbmd/dataplane.h"

#include <string.h>
#include <time.h>
#include <unistd.h>

static struct zb_config cfg;
static uint64_t polls;
static int busy;        /* the poller reports work: the loop never sleeps */

static unsigned poller(void *arg, uint64_t now)
{
	(void)arg;
	(void)now;
	__atomic_add_fetch(&polls, 1, __ATOMIC_RELAXED);
	return __atomic_load_n(&busy, __ATOMIC_RELAXED) ? 1 : 0;
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t npolls(void)
{
	return __atomic_load_n(&polls, __ATOMIC_RELAXED);
}

/* Wait (up to ms) until the loop has slept at least `sleeps` times and then
 * made no poll for 50 ms: it is inside a long sleep. */
static int wait_asleep(uint64_t sleeps, unsigned ms)
{
	uint64_t end = now_ms() + ms;
	while (now_ms() < end) {
		struct dp_lcore_stats s;
		dp_lcore_stats(0, &s);
		uint64_t p = npolls();
		usleep(50000);
		if (s.sleeps >= sleeps && npolls() == p)
			return 1;
	}
	return 0;
}

int main(void)
{
	char ini[1024];
	struct cfg_error cerr;
	snprintf(ini, sizeof(ini),
		 "[node]\nid = 1\n[cluster]\nid = 5\n"
		 "[eal]\nlcores = 0-1\nmemory_mb = 256\nhugepages = false\n"
		 "file_prefix = zbmd-node-kick%d\nlog_level = 3\n"
		 "[dataplane]\nidle = adaptive\nidle_spin_us = 0\n"
		 "idle_sleep_us_max = 1000000\nmbufs = 2047\n"
		 "[port.0]\nvdev = net_ring0\nip = 10.9.0.1/24\nrx_desc = 256\ntx_desc = 256\n",
		 (int)getpid());
	/* the test's own config: one that does not load is a failure, not
	 * a missing device */
	tap_plan(10);
	if (!ok(cfg_load_string(&cfg, ini, "kick.ini", &cerr) == 0, "the node config loads")) {
		tap_diag("config: %s", cerr.msg);
		return tap_done();
	}

	struct dp_err err;
	int rc = dp_node_init(&cfg, &err);
	if (rc)
		tap_diag("init: %s", err.msg);
	is_int(rc, 0, "node init on net_ring");
	dp_lcore_kick(7);   /* no such lcore: ignored */
	is_int(dp_register_poller(0, poller, NULL), 0, "poller on lcore 0");
	rc = dp_node_launch(&err);
	is_int(rc, 0, "loops launched");

	/* the back-off doubles 1, 2, 4 ... us: from the 21st sleep on it sleeps
	 * 1 s (idle_sleep_us_max) */
	int asleep = wait_asleep(21, 5000);
	ok(asleep, "the lcore backs off into long sleeps");
	struct dp_lcore_stats s0, s1;
	dp_lcore_stats(0, &s0);
	uint64_t p0 = npolls(), t0 = now_ms(), t1 = t0;
	dp_lcore_kick(0);
	while (npolls() == p0 && now_ms() - t0 < 3000)
		usleep(200);
	t1 = now_ms();
	dp_lcore_stats(0, &s1);
	ok(npolls() > p0 && t1 - t0 < 300,
	   "a kick wakes it: next poll %lu ms after the kick (sleeps of 1 s)",
	   (unsigned long)(t1 - t0));
	ok(s1.kicked == s0.kicked + 1, "kicked counts the early wake-up (%lu -> %lu)",
	   (unsigned long)s0.kicked, (unsigned long)s1.kicked);

	/* busy: the loop polls without sleeping; kicks change no counter */
	__atomic_store_n(&busy, 1, __ATOMIC_RELAXED);
	dp_lcore_kick(0);   /* ends the current sleep */
	usleep(100000);
	dp_lcore_stats(0, &s0);
	for (int i = 0; i < 1000; i++)
		dp_lcore_kick(0);
	usleep(100000);
	dp_lcore_stats(0, &s1);
	ok(s1.sleeps == s0.sleeps && s1.kicked == s0.kicked,
	   "a polling lcore neither sleeps nor counts kicks (sleeps %lu -> %lu, "
	   "kicked %lu -> %lu)", (unsigned long)s0.sleeps, (unsigned long)s1.sleeps,
	   (unsigned long)s0.kicked, (unsigned long)s1.kicked);

	/* asleep again: a stop request wakes it too */
	__atomic_store_n(&busy, 0, __ATOMIC_RELAXED);
	ok(wait_asleep(s1.sleeps + 21, 5000), "back in long sleeps");
	t0 = now_ms();
	dp_node_request_stop();
	dp_node_stop();
	t1 = now_ms();
	ok(t1 - t0 < 300, "a stop request ends the sleep: stopped in %lu ms",
	   (unsigned long)(t1 - t0));
	dp_node_fini();
	char dir[512], cmd[600];
	if (dp_runtime_dir(cfg.eal.file_prefix, dir, sizeof(dir)) == 0 &&
	    strstr(dir, "zbmd-node-kick")) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			tap_diag("could not remove %s", dir);
	}
	return tap_done();
}
