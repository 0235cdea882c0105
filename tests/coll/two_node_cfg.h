/* tests/coll/two_node_cfg.h — the set-up of the in-process two-node tests
 * (test_lanes, test_abort_async): node `id` of a two-node cluster (cluster
 * id 8) over real tcp on `port`, peers at 127.<net>.<sub>.1 and .2, `nch`
 * channels of 16 KiB chunks, 5 s no-progress bound, channels progressed by
 * the caller's lane threads. */
#ifndef ZBMD_TESTS_COLL_TWO_NODE_CFG_H
#define ZBMD_TESTS_COLL_TWO_NODE_CFG_H

#include "zbmd/coll.h"
#include "zbmd/config.h"

#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

/* Where this run's two nodes meet: tcp port 20000 + (pid + salt) % 20000,
 * subnet pid % 200 (a test's own `salt` and `net` keep tests that run at
 * once apart). */
static inline void two_node_place(int salt, int *port, int *sub)
{
	*port = 20000 + (int)((getpid() + salt) % 20000);
	*sub = (int)(getpid() % 200);
}

/* Runs node_main(n0) and node_main(n1) on threads of their own and returns
 * when both have returned. */
static inline void two_node_run(void *(*node_main)(void *), void *n0, void *n1)
{
	pthread_t th[2];
	pthread_create(&th[0], NULL, node_main, n0);
	pthread_create(&th[1], NULL, node_main, n1);
	pthread_join(th[0], NULL);
	pthread_join(th[1], NULL);
}

/* Loads node `id`'s config into *cfg and creates its communicator. Returns
 * cfg_load_string's error (err untouched) or coll_comm_create's result
 * (err says why on failure). */
static inline int two_node_comm(int id, int net, int sub, int port, int nch,
				struct zb_config *cfg, struct coll_comm **c,
				char *err, size_t errlen)
{
	struct cfg_error ce;
	char text[512];
	int rc;

	snprintf(text, sizeof(text),
		 "[node]\nid = %d\n[cluster]\nid = 8\n[transport]\nkind = tcp\ntcp_port = %d\n"
		 "[coll]\nchannels = %d\nchunk_kb = 16\ntimeout_ms = 5000\n"
		 "[peer.0]\nip = 127.%d.%d.1\n[peer.1]\nip = 127.%d.%d.2\n",
		 id, port, nch, net, sub, net, sub);
	if ((rc = cfg_load_string(cfg, text, "test", &ce)) < 0)
		return rc;
	struct coll_comm_args a = {.cfg = cfg, .threaded_channels = true,
				   .connect_timeout_ms = 10000};
	return coll_comm_create(&a, c, err, errlen);
}

#endif
