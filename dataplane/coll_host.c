/* coll_host.c — the registry of collective hosts (zbmd/coll.h, "hosts"):
 * providers whose comms must be progressed by their own threads (the dpdk
 * provider: the dataplane lcores) register how to start and drive them. */
#include "zbmd/coll.h"

#include <string.h>

#define COLL_HOSTS_MAX 4

static const struct coll_host_ops *coll_hosts[COLL_HOSTS_MAX];
static unsigned coll_nhosts;

const struct coll_host_ops *coll_host_find(const char *name)
{
	ZB_ASSERT(name != NULL);
	ZB_ASSERT(coll_nhosts <= COLL_HOSTS_MAX);
	for (unsigned i = 0; i < coll_nhosts; i++)
		if (strcmp(coll_hosts[i]->provider, name) == 0)
			return coll_hosts[i];
	return NULL;
}

int coll_host_register(const struct coll_host_ops *ops)
{
	if (!ops || !ops->provider || !ops->open || !ops->comms || !ops->run ||
	    !ops->close)
		return -EINVAL;
	if (coll_host_find(ops->provider))
		return -EEXIST;
	if (coll_nhosts == COLL_HOSTS_MAX)
		return -ENOSPC;
	coll_hosts[coll_nhosts++] = ops;
	ZB_ASSERT(coll_host_find(ops->provider) == ops);
	return 0;
}
