/* tests/coll/tcp_ranks.h — n communicators in one process over the real
 * tcp provider on loopback (test_pool_avg.c, test_misuse.c).
 * coll_comm_create blocks until both ring neighbours are connected, so the
 * n communicators are created by n threads at once; after the joins one
 * thread progresses them all (the tcp provider is non-blocking).
 *
 * The including test defines TR_NET (the second byte of its 127.NET.SUB.x
 * addresses: tests running at once stay apart) and TR_TIMEOUT_MS ([coll]
 * timeout_ms), and sets tr_port and tr_sub once (from its pid). Static
 * functions: include it once. */
#ifndef ZBMD_TESTS_TCP_RANKS_H
#define ZBMD_TESTS_TCP_RANKS_H

#include "tap.h"
#include "zbmd/coll.h"
#include "zbmd/common.h"
#include "zbmd/config.h"

#include <pthread.h>
#include <stdio.h>

#define MAXN 3

static struct zb_config cfgs[MAXN];
static struct coll_comm *cc[MAXN];
static int tr_port, tr_sub;
static bool tr_threaded0;  /* rank 0's channels progressed by "lanes" */

struct tr_maker {
	int i, nch, rc;
	char err[256];
};

static void *tr_make_one(void *arg)
{
	struct tr_maker *m = arg;
	struct coll_comm_args a = {.cfg = &cfgs[m->i], .provider = "tcp",
				   .chunk_bytes = 256, .channels = (uint16_t)m->nch,
				   .connect_timeout_ms = 10000,
				   .threaded_channels = tr_threaded0 && m->i == 0};
	m->rc = coll_comm_create(&a, &cc[m->i], m->err, sizeof(m->err));
	return NULL;
}

/* n communicators on 127.TR_NET.SUB.1..n (a fresh SUB each time, so that
 * no connection of the last set is mistaken for one of this), nch
 * channels, 256-byte chunks, TR_TIMEOUT_MS without progress; small_kb > 0:
 * all-reduces up to that size take the gathered path. */
static int make(int n, int nch, int small_kb)
{
	pthread_t t[MAXN];
	struct tr_maker m[MAXN];
	int err = 0;

	ZB_ASSERT(n >= 2 && n <= MAXN);
	tr_sub = (tr_sub + 1) % 250;
	for (int i = 0; i < n; i++) {
		char text[2048];
		struct cfg_error ce;
		int o = snprintf(text, sizeof(text),
				 "[node]\nid = %d\n[cluster]\nid = 8\n[transport]\n"
				 "kind = tcp\ntcp_port = %d\n[coll]\nchannels = %d\n"
				 "timeout_ms = %d\nsmall_max_kb = %d\n"
				 "stream_min_kb = 0\n", i, tr_port, nch, TR_TIMEOUT_MS,
				 small_kb);
		for (int j = 0; j < n; j++)
			o += snprintf(text + o, sizeof(text) - (size_t)o,
				      "[peer.%d]\nip = 127.%d.%d.%d\n", j, TR_NET, tr_sub,
				      j + 1);
		if (cfg_load_string(&cfgs[i], text, "t", &ce) < 0) {
			tap_diag("config: %s", ce.msg);
			return -EINVAL;
		}
	}
	for (int i = 0; i < n; i++) {
		m[i] = (struct tr_maker){.i = i, .nch = nch};
		cc[i] = NULL;
		if (pthread_create(&t[i], NULL, tr_make_one, &m[i]) != 0) {
			n = i;
			err = -EAGAIN;
			break;
		}
	}
	for (int i = 0; i < n; i++) {
		pthread_join(t[i], NULL);
		if (m[i].rc) {
			tap_diag("create %d: %s (%s)", i, zb_strerror(m[i].rc), m[i].err);
			err = err ? err : m[i].rc;
		}
	}
	if (err)
		for (int i = 0; i < n; i++)
			if (cc[i]) {
				coll_comm_destroy(cc[i]);
				cc[i] = NULL;
			}
	return err;
}

static void destroy(int n)
{
	for (int i = 0; i < n; i++) {
		coll_comm_destroy(cc[i]);
		cc[i] = NULL;
	}
}

#endif
