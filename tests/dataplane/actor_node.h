/* tests/dataplane/actor_node.h — the actor runtime of a dataplane test
 * node: sized from the node's [actors] config, polled by every lcore loop
 * (dp_set_actor_hook) and attached to the remote-actor router
 * (zbra_attach). Shared by the remote-actor helper programs. */
#ifndef ZBMD_TESTS_ACTOR_NODE_H
#define ZBMD_TESTS_ACTOR_NODE_H

#include "zbmd/actors.h"
#include "zbmd/config.h"
#include "zbmd/dataplane.h"
#include "zbmd/remote.h"

static uint32_t an_reductions;

static unsigned an_actors_poll(void *arg, unsigned index, uint64_t now_tsc)
{
	(void)now_tsc;
	return (unsigned)act_worker_poll(arg, index, an_reductions);
}

/* After dp_node_init, before dp_node_launch. 0 or a negative errno
 * (*rt may be set even then: the node's fini owns the cleanup). */
static inline int an_actors_start(const struct zb_config *cfg,
				  struct act_runtime **rt)
{
	struct act_params p;
	act_params_default(&p);
	p.node = cfg->node.id;
	p.max_actors = cfg->actors.max_actors;
	p.mailbox_capacity = cfg->actors.mailbox_capacity;
	p.reductions = cfg->actors.reductions;
	p.message_pool = cfg->actors.message_pool;
	p.timers = cfg->actors.timers;
	p.workers = dp_lcore_count();
	p.pin = false;
	an_reductions = cfg->actors.reductions;
	int rc = act_runtime_create(&p, rt);
	if (rc == 0)
		rc = dp_set_actor_hook(an_actors_poll, *rt);
	if (rc == 0)
		rc = zbra_attach(*rt, cfg);
	return rc;
}

#endif
