/* coll_host.c — the registry of collective hosts (zbmd/coll.h, "hosts"):
 * providers whose comms must be progressed by their own threads (the dpdk
 * provider: the dataplane lcores) register how to start and drive them. */
#include "zbmd/coll.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* zbmd local names a file to create once this node's collectives are open
 * (ZBMD_READY_FILE): it starts memif nodes one after the other, each once the
 * previous one's ports run, and counts `--kill N@up+MS` from every node up. */
static void coll_ready_file(void)
{
	const char *ready = getenv("ZBMD_READY_FILE");

	if (ready && *ready) {
		int fd = open(ready, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		if (fd >= 0)
			close(fd);
	}
}

int coll_hosted_open(const struct coll_comm_args *a, struct coll_hosted *h,
		     char *err, size_t errlen)
{
	int rc = 0;

	ZB_ASSERT(a != NULL && a->cfg != NULL && h != NULL && err != NULL);
	memset(h, 0, sizeof(*h));
	struct coll_comm_args ca = *a;
	if (!ca.provider)
		ca.provider = coll_default_provider(a->cfg);
	a = &ca;
	h->host = coll_host_find(ca.provider);
	/* e.g. dpdk: start this node's dataplane, comms on its lcores; a host
	 * may decline (-EOPNOTSUPP: rdma without a control plane), and the
	 * provider then runs on this thread */
	if (h->host && (rc = h->host->open(a, &h->hh, err, errlen)) == -EOPNOTSUPP)
		h->host = NULL;
	if (h->host) {
		if (rc < 0) {
			h->host = NULL;
			return rc;
		}
		h->ncomm = h->host->comms(h->hh, h->comms, COLL_HOST_MAX_LANES);
		ZB_ASSERT(h->ncomm >= 1);
		coll_ready_file();
		return 0;
	}
	if ((rc = coll_comm_create(a, &h->comms[0], err, errlen)) < 0)
		return rc;
	h->ncomm = 1;
	coll_ready_file();
	return 0;
}

int coll_hosted_run(struct coll_hosted *h, int (*fn)(void *), void *arg)
{
	ZB_ASSERT(h != NULL && h->ncomm >= 1 && fn != NULL);
	return h->host ? h->host->run(h->hh, fn, arg) : fn(arg);
}

void coll_hosted_close(struct coll_hosted *h)
{
	if (h->host)
		h->host->close(h->hh);
	else if (h->comms[0])
		coll_comm_destroy(h->comms[0]);
	memset(h, 0, sizeof(*h));
}
