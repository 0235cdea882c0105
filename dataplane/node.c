/* dataplane/node.c — the node's life cycle: init, launch, stop, fini.
 *
 * Order of acquisition (released in reverse by dp_node_fini):
 *   node lock (file_prefix) -> EAL -> ports (configured, mempools, started)
 *   -> lcore state (TX buffers) -> control thread + loops (dp_node_launch).
 */
#include "internal.h"

#include <signal.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_malloc.h>
#include <rte_timer.h>

#include "zbmd/net.h"

struct dp_node dp__node = {
	.lock_fd = -1,
	.reg_lock = PTHREAD_MUTEX_INITIALIZER,
};

static void node_params(struct dp_node *n, const struct zb_config *cfg)
{
	uint64_t us = rte_get_tsc_hz() / 1000000;
	n->burst = cfg->dp.burst ? cfg->dp.burst : 32;
	if (n->burst > DP_BURST_MAX)
		n->burst = DP_BURST_MAX;
	n->udp_port = cfg->dp.udp_port;
	n->adaptive = cfg->dp.idle == CFG_IDLE_ADAPTIVE;
	n->idle_spin_tsc = us * cfg->dp.idle_spin_us;
	n->idle_sleep_us_max = cfg->dp.idle_sleep_us_max ? cfg->dp.idle_sleep_us_max : 1;
	/* dp_set_timer_hook may have run before the EAL (TSC rate unknown) */
	n->timer_tsc = us * (n->timer_us ? n->timer_us : DP_TIMER_US_DEFAULT);
}

static void node_lcores(struct dp_node *n)
{
	unsigned id;
	n->main_lcore = rte_get_main_lcore();
	n->nb_lcores = 0;
	RTE_LCORE_FOREACH_WORKER(id) {
		if (n->nb_lcores < CFG_MAX_LCORES)
			n->lcore_ids[n->nb_lcores++] = id;
	}
	n->main_is_dp = n->nb_lcores == 0;
	if (n->main_is_dp)
		n->lcore_ids[n->nb_lcores++] = n->main_lcore;
}

int dp_node_init(const struct zb_config *cfg, struct dp_err *err)
{
	struct dp_node *n = &dp__node;
	ZB_ASSERT(cfg != NULL);
	ZB_ASSERT(!n->launched);
	if (n->eal_up || n->fini_done)
		return dp__err(err, -EALREADY,
			       "a node ran in this process before (the EAL cannot restart)");
	n->cfg = cfg;
	int rc = dp__lock_prefix(cfg->eal.file_prefix, err);
	if (rc)
		return rc;
	rc = dp__eal_start(cfg, err);
	if (rc) {
		dp__unlock_prefix();
		n->fini_done = true;
		return rc;
	}
	node_params(n, cfg);
	node_lcores(n);
	rc = rte_timer_subsystem_init();   /* rte_timer on the lcores */
	if (rc && rc != -EALREADY) {
		dp_node_fini();
		return dp__err(err, ZB_ERR_DEVICE, "rte_timer: %s", strerror(-rc));
	}
	n->timers_up = true;
	rc = dp__ports_init(n, err);
	if (rc == 0)
		rc = dp__lcores_init(n, err);
	if (rc == 0)
		dp__neigh_init(n);
	if (rc == 0)
		rc = dp__link_init(n, err);
	if (rc == 0 && n->has_link) {
		/* the "dpdk" net provider for collectives; -EEXIST: already */
		int r = net_register(&dp_net_dpdk_ops);
		ZB_ASSERT(r == 0 || r == -EEXIST);
	}
	if (rc) {
		dp_node_fini();
		return rc;
	}
	return 0;
}

static void *control_main(void *arg)
{
	struct dp_node *n = arg;
	n->ctl_status = n->ctl_ops->run(n->ctl_arg);
	return NULL;
}

static int start_control(struct dp_node *n, struct dp_err *err)
{
	sigset_t all, old;
	sigfillset(&all);
	/* the control thread never takes the node's signals */
	pthread_sigmask(SIG_BLOCK, &all, &old);
	int rc = pthread_create(&n->ctl_thread, NULL, control_main, n);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc)
		return dp__err(err, -rc, "control thread: %s", strerror(rc));
	pthread_setname_np(n->ctl_thread, "zbmd-control");
	n->ctl_running = true;
	return 0;
}

int dp_node_launch(struct dp_err *err)
{
	struct dp_node *n = &dp__node;
	if (!n->eal_up || !n->lcores || n->launched)
		return dp__err(err, -EINVAL, "node not initialised, or launched twice");
	ZB_ASSERT(n->nb_lcores > 0);
	n->launched = true;
	if (n->ctl_ops) {
		int rc = start_control(n, err);
		if (rc)
			return rc;
	}
	for (unsigned i = 0; i < n->nb_lcores; i++) {
		if (n->lcore_ids[i] == n->main_lcore)
			continue;
		int rc = rte_eal_remote_launch(dp__lcore_main, &n->lcores[i],
					       n->lcore_ids[i]);
		if (rc)
			return dp__err(err, ZB_ERR_DEVICE,
				       "launch lcore %u: %s", n->lcore_ids[i],
				       strerror(-rc));
	}
	return 0;
}

bool dp_main_polls(void)
{
	return dp__node.main_is_dp;
}

void dp_node_wait(void)
{
	struct dp_node *n = &dp__node;
	ZB_ASSERT(n->launched);
	if (n->main_is_dp)
		dp__lcore_main(&n->lcores[0]);
}

void dp_node_request_stop(void)
{
	__atomic_store_n(&dp__node.quit, 1, __ATOMIC_RELAXED);
	for (unsigned i = 0; dp__node.lcores && i < dp__node.nb_lcores; i++)
		dp_lcore_kick(i);   /* a sleeping loop sees quit now */
}

void dp_node_leaving(void)
{
	atomic_store_explicit(&dp__node.leaving, 1, memory_order_relaxed);
}

bool dp_node_stop_requested(void)
{
	return __atomic_load_n(&dp__node.quit, __ATOMIC_RELAXED) != 0;
}

void dp_node_stop(void)
{
	struct dp_node *n = &dp__node;
	if (n->ctl_running) {
		n->ctl_ops->stop(n->ctl_arg);
		pthread_join(n->ctl_thread, NULL);
		n->ctl_running = false;
	}
	dp_node_request_stop();
	if (n->launched && n->eal_up)
		rte_eal_mp_wait_lcore();
}

void dp_node_fini(void)
{
	struct dp_node *n = &dp__node;
	if (n->fini_done)
		return;
	dp_node_stop();
	dp__ports_watch_stop(n);   /* its reconnects read the lcores' state */
	dp__link_fini(n);   /* before the pools: it frees frames it holds */
	dp__lcores_fini(n);
	bool memif = dp__ports_fini(n);
	/* Zero-copy frames still held by the loops' TX buffers or the ports'
	 * rings were freed just above: each chains a carrier mbuf from a
	 * link's pool, which is released only now. */
	dp__link_pools_fini();
	if (n->timers_up) {
		rte_timer_subsystem_finalize();
		n->timers_up = false;
	}
	/* rte_eal_cleanup() unmaps DPDK memory while the EAL interrupt thread
	 * keeps running (22.11 has no way to stop it); after memif ports that
	 * thread may still be walking interrupt sources whose handles live in
	 * that memory, and faults (seen ~1 run in 60 with both ends stopping
	 * together). With memif ports the ports and pools are released above
	 * and the memory mappings go with the process, which is exiting. */
	if (n->eal_up && !memif)
		rte_eal_cleanup();
	n->eal_up = false;
	dp__unlock_prefix();
	n->fini_done = true;
}

static void fmt_ip(uint32_t ip_be, char *out, size_t len)
{
	const uint8_t *b = (const uint8_t *)&ip_be;
	snprintf(out, len, "%u.%u.%u.%u", b[0], b[1], b[2], b[3]);
}

void dp_node_describe(FILE *out)
{
	struct dp_node *n = &dp__node;
	ZB_ASSERT(out != NULL);
	fprintf(out, "lcores: main=%u dataplane=%u (%s), idle=%s burst=%u udp_port=%u\n",
		n->main_lcore, n->nb_lcores,
		n->main_is_dp ? "the main lcore polls" : "workers poll",
		n->adaptive ? "adaptive" : "poll", n->burst,
		n->udp_port);
	for (unsigned i = 0; i < n->nb_lcores; i++)
		fprintf(out, "lcore %u: index=%u rx_queues=%u socket=%u\n",
			n->lcore_ids[i], i, n->lcores ? n->lcores[i].nb_rxq : 0,
			rte_lcore_to_socket_id(n->lcore_ids[i]));
	for (uint16_t k = 0; k < n->nb_ports; k++) {
		const struct dp_port *p = &n->ports[k];
		const uint8_t *m = p->mac.addr_bytes;
		char ip[20];
		fmt_ip(p->ip, ip, sizeof(ip));
		fprintf(out,
			"port.%u: ethdev=%u name=%s driver=%s mac=%02x:%02x:%02x:%02x:%02x:%02x%s ip=%s rx_queues=%u tx_queues=%u mtu=%u socket=%d\n",
			p->cfg_index, p->port_id, p->name, p->driver, m[0], m[1],
			m[2], m[3], m[4], m[5], p->mac_soft ? "(software)" : "",
			p->ip ? ip : "none", p->nb_rxq,
			p->nb_txq, p->mtu, p->socket);
		if (p->nb_txq < n->nb_lcores)
			fprintf(out, "port.%u: note: %u tx queue(s) for %u lcores: lcore index %u and up cannot send on it (their transport lanes neither; af_packet: qpairs=%u)\n",
				p->cfg_index, p->nb_txq, n->nb_lcores, p->nb_txq,
				n->nb_lcores);
		if (p->pool)
			fprintf(out, "mempool %s: mbufs=%u data_room=%u cache=%u socket=%d\n",
				p->pool->name, p->pool_size, p->data_room,
				p->pool->cache_size, p->pool->socket_id);
	}
	dp__link_describe(out);
	fprintf(out, "control thread: %s\n",
		n->ctl_running ? "running" : "none (no control hook set)");
	fflush(out);
}
