/* Shared by the rdma tests: a config for the provider without a file. */
#ifndef ZBMD_RDMA_TEST_H
#define ZBMD_RDMA_TEST_H

#include <stdlib.h>
#include <string.h>

#include "zbmd/config.h"

/* The [rdma] keys the provider reads, as a loopback test wants them;
 * ZBMD_RDMA_DEVICE picks a device (default: the first). */
static inline void rdma_test_config(struct zb_config *cfg)
{
	const char *dev = getenv("ZBMD_RDMA_DEVICE");

	cfg_set_defaults(cfg);          /* the schema's defaults, then: */
	cfg->node.id = 0;
	cfg->cluster.id = 7;
	cfg->rdma.enabled = true;
	cfg->rdma.gid_index = 255;      /* auto */
	cfg->rdma.signal_every = 4;     /* exercise batching and flushes */
	cfg->rdma.recv_pool = 16;
	if (dev)
		snprintf(cfg->rdma.device, sizeof(cfg->rdma.device), "%s", dev);
}

#endif
