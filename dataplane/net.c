/* net.c — the net provider registry (see zbmd/net.h, "Provider registry").
 *
 * Built-in providers (compiled into the coll module) are listed statically;
 * providers of modules above coll (rdma/, the dpdk provider) add themselves
 * with net_register() so that coll never links them.
 */
#include "zbmd/net.h"
#include "zbmd/common.h"

#include <stdio.h>
#include <string.h>

static const struct net_ops *const net_builtin[] = {
	&net_tcp_ops,
};

static const struct net_ops *net_registered[NET_MAX_PROVIDERS];
static unsigned net_registered_count;

static_assert(ZB_ARRAY_LEN(net_builtin) < NET_MAX_PROVIDERS,
	      "room for registered providers");

const struct net_ops *net_provider(unsigned i)
{
	if (i < ZB_ARRAY_LEN(net_builtin))
		return net_builtin[i];
	i -= (unsigned)ZB_ARRAY_LEN(net_builtin);
	return i < net_registered_count ? net_registered[i] : NULL;
}

const struct net_ops *net_find(const char *name)
{
	const struct net_ops *ops;

	ZB_ASSERT(name != NULL);
	for (unsigned i = 0; (ops = net_provider(i)) != NULL; i++)
		if (strcmp(ops->name, name) == 0)
			return ops;
	return NULL;
}

int net_register(const struct net_ops *ops)
{
	if (!ops || !ops->name || ops->version != NET_OPS_VERSION ||
	    !ops->init || !ops->fini || !ops->connect || !ops->accept ||
	    !ops->isend || !ops->irecv || !ops->test || !ops->close_send ||
	    !ops->close_recv)
		return -EINVAL;
	if (net_find(ops->name))
		return -EEXIST;
	if (net_registered_count >= NET_MAX_PROVIDERS - ZB_ARRAY_LEN(net_builtin))
		return -ENOSPC;
	net_registered[net_registered_count++] = ops;
	ZB_ASSERT(net_find(ops->name) == ops);
	return 0;
}

void net_add_reason(const struct net_ops *ops, char *err, size_t errlen)
{
	ZB_ASSERT(ops != NULL && err != NULL);
	const char *why = ops->last_error ? ops->last_error() : "";
	size_t k = strnlen(err, errlen);
	if (why[0] && k + 3 < errlen)
		snprintf(err + k, errlen - k, " (%s)", why);
}
