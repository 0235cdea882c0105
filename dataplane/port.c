/* dataplane/port.c — configure, start, stop and close the configured ports.
 *
 * Every [port.N] becomes one ethdev port: found by its PCI address or vdev
 * name after the EAL probed it; one RX/TX queue pair per dataplane lcore
 * where the device allows (clamped to the device's queue counts); RSS on IP/UDP when there are
 * several RX queues and the device hashes; the MTU (jumbo included) checked
 * against the device; a mempool per port on the port's NUMA socket, its data
 * room sized for the MTU so that no frame needs scatter; the MAC from the
 * config (set on the device) or the device's own.
 */
#include "internal.h"

#include <inttypes.h>
#include <linux/membarrier.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <rte_alarm.h>
#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_ether.h>

#define DP_MEMIF_FINI_WAIT_MS 5000  /* see dp__ports_fini */
#define DP_WATCH_US 20000           /* port_watch_alarm period */
#define AF_PACKET_FRAME_HDR 128     /* TPACKET_V2 header + sockaddr_ll + pad */
#define DP_MEMIF_RECONNECT_MS 500   /* a client link down this long: restart */
#define DP_MEMIF_QUIESCE_MS 200     /* longest wait for the loops' iterations */

/* ethdev id of a configured port, or -ENODEV. */
static int find_port(const struct cfg_port *cp, uint16_t *port_id)
{
	char name[CFG_STR];
	if (cp->pci[0]) {
		snprintf(name, sizeof(name), "%s", cp->pci);
		if (rte_eth_dev_get_port_by_name(name, port_id) == 0)
			return 0;
		/* "3b:00.0" is probed as "0000:3b:00.0" */
		snprintf(name, sizeof(name), "0000:%s", cp->pci);
		return rte_eth_dev_get_port_by_name(name, port_id) == 0 ? 0
									: -ENODEV;
	}
	snprintf(name, sizeof(name), "%s", cp->vdev);
	name[strcspn(name, ",")] = 0;
	return rte_eth_dev_get_port_by_name(name, port_id) == 0 ? 0 : -ENODEV;
}

/* One queue per dataplane lcore, as many as the device has. (An RX queue
 * that no lcore polls would lose the frames RSS steers to it, so a larger
 * [port.N] rx_queues cannot help; see docs/dataplane.md.) */
static uint16_t clamp_queues(uint16_t dev_max, unsigned lcores)
{
	uint16_t n = (uint16_t)lcores;
	if (n > dev_max)
		n = dev_max;
	return n ? n : 1;
}

/* Smallest mempool that can fill every ring and every lcore's burst and
 * cache without starving RX. */
static uint32_t pool_need(const struct dp_node *n, const struct dp_port *p,
			  uint16_t rx_desc, uint16_t tx_desc, uint32_t cache)
{
	return (uint32_t)p->nb_rxq * rx_desc + (uint32_t)p->nb_txq * tx_desc +
	       n->nb_lcores * (2u * n->burst + cache) + 64;
}


#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23   /* Linux 5.14 */
#endif

/* Without hugepages ([eal] hugepages = false: local clusters, CI) DPDK's
 * memory is ordinary pages that the kernel maps on first touch — inside the
 * lcore loops, one fault per 4 KiB the first time each mbuf's data room is
 * used (the pool's init wrote only the mbuf headers). Map every page of the
 * pool in here, at start-up, so the loops never fault on it: one
 * MADV_POPULATE_WRITE per chunk (no byte changed, and no fault per page,
 * which on a VM whose faults exit to the hypervisor made a third of a
 * memif node's start-up), else — before Linux 5.14 — a write of each
 * page's first byte with the byte read. */
static void prefault_chunk(struct rte_mempool *mp, void *opaque,
			   struct rte_mempool_memhdr *memhdr, unsigned idx)
{
	(void)mp;
	(void)opaque;
	(void)idx;
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	uintptr_t lo = (uintptr_t)memhdr->addr & ~(uintptr_t)(pg - 1);
	uintptr_t hi = (uintptr_t)memhdr->addr + memhdr->len;
	if (madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE) == 0)
		return;
	volatile uint8_t *b = memhdr->addr;
	for (size_t off = 0; off < memhdr->len; off += pg)
		b[off] = b[off];
}

static void prefault_pool(struct rte_mempool *mp)
{
	if (!dp__node.cfg->eal.hugepages)
		rte_mempool_mem_iter(mp, prefault_chunk, NULL);
}

static int port_configure(struct dp_node *n, uint16_t idx, struct dp_port *p,
			  const struct cfg_port *cp, struct dp_err *err)
{
	const struct zb_config *cfg = n->cfg;
	struct rte_eth_dev_info info;
	struct rte_eth_conf conf;
	int rc;

	ZB_ASSERT(p != NULL && cp != NULL);
	ZB_ASSERT(n->nb_lcores > 0);
	rc = rte_eth_dev_info_get(p->port_id, &info);
	if (rc)
		return dp__err(err, ZB_ERR_DEVICE, "port.%u: dev_info: %s", idx,
			       rte_strerror(-rc));
	snprintf(p->driver, sizeof(p->driver), "%s", info.driver_name);
	rte_eth_dev_get_name_by_port(p->port_id, p->name);
	p->memif = strstr(p->driver, "memif") != NULL;
	/* A memif zero-copy client hands the peer offsets into DPDK's own
	 * memory (its first memseg list): payloads attached from user memory
	 * would be garbage there, so they are copied into the mbuf. */
	p->no_attach = strstr(cp->vdev, "zero-copy=yes") != NULL;
	/* DPDK 22.11's memif client connects when its port starts, and only
	 * then: port_watch_alarm restarts a client port whose link stays down
	 * (its server not there yet, or restarted). Zero-copy clients are left
	 * alone (the driver closes the EAL's memory file when one connects). */
	p->memif_client = p->memif && strstr(cp->vdev, "role=client") != NULL &&
			  !p->no_attach;
	p->nb_rxq = clamp_queues(info.max_rx_queues, n->nb_lcores);
	p->nb_txq = clamp_queues(info.max_tx_queues, n->nb_lcores);
	p->mtu = cp->mtu ? cp->mtu : RTE_ETHER_MTU;
	/* memif (DPDK 22.11) advertises 1518-byte frames but moves frames of
	 * any length (chained ring buffers, copied into one mbuf as long as
	 * its data room allows): take jumbo frames on it with the device
	 * configured at its advertised MTU and mbufs sized for ours. */
	bool memif_jumbo = strcmp(info.driver_name, "net_memif") == 0 &&
			   p->mtu > RTE_ETHER_MTU;
	uint32_t frame = (uint32_t)p->mtu + RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN;
	/* af_packet (DPDK 22.11) advertises 1518-byte frames whatever its
	 * ring frames hold (vdev framesz=, 2048 by default): it moves any
	 * frame that fits one ring frame after the kernel's TPACKET_V2
	 * header, and leaves the interface's MTU to whoever set it up. So
	 * the same: the device at its advertised MTU, when framesz holds
	 * ours. */
	unsigned long framesz = 0;
	const char *fz = strstr(cp->vdev, "framesz=");
	if (fz)
		framesz = strtoul(fz + 8, NULL, 0);
	bool af = strcmp(info.driver_name, "net_af_packet") == 0;
	bool af_jumbo = af && p->mtu > RTE_ETHER_MTU && framesz >= frame + AF_PACKET_FRAME_HDR;
	bool as_1500 = memif_jumbo || af_jumbo;
	uint16_t dev_mtu = as_1500 ? RTE_ETHER_MTU : p->mtu;
	if (p->mtu < info.min_mtu || dev_mtu > info.max_mtu)
		return dp__err(err, ZB_ERR_CONFIG,
			       "port.%u (%s): mtu %u is outside what the device allows (%u..%u)",
			       idx, p->name, p->mtu, info.min_mtu, info.max_mtu);
	if (info.max_rx_pktlen && frame > info.max_rx_pktlen && !as_1500) {
		char hint[64] = "";
		if (af)
			snprintf(hint, sizeof(hint), " (af_packet: a vdev framesz= of at least %u)",
				 frame + AF_PACKET_FRAME_HDR);
		return dp__err(err, ZB_ERR_CONFIG,
			       "port.%u (%s): mtu %u needs %u-byte frames; the device takes %u%s",
			       idx, p->name, p->mtu, frame, info.max_rx_pktlen, hint);
	}
	uint32_t room = frame + 8 /* VLAN tags */ + RTE_PKTMBUF_HEADROOM;
	if (room < RTE_MBUF_DEFAULT_BUF_SIZE)
		room = RTE_MBUF_DEFAULT_BUF_SIZE;
	if (af_jumbo && room < framesz + RTE_PKTMBUF_HEADROOM) {
		/* its RX queue asks for mbufs that hold a whole ring frame */
		if (framesz > UINT16_MAX - RTE_PKTMBUF_HEADROOM)
			return dp__err(err, ZB_ERR_CONFIG, "port.%u (%s): framesz=%lu: "
				       "mbufs cannot hold such frames (at most %u)", idx,
				       p->name, framesz, UINT16_MAX - RTE_PKTMBUF_HEADROOM);
		room = (uint32_t)framesz + RTE_PKTMBUF_HEADROOM;
	}
	p->data_room = (uint16_t)room;

	memset(&conf, 0, sizeof(conf));
	conf.rxmode.mtu = dev_mtu;
	if (p->nb_rxq > 1 && (info.flow_type_rss_offloads &
			      (RTE_ETH_RSS_IP | RTE_ETH_RSS_UDP))) {
		conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
		conf.rx_adv_conf.rss_conf.rss_hf = info.flow_type_rss_offloads &
			(RTE_ETH_RSS_IP | RTE_ETH_RSS_UDP);
	}
	if (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE)
		conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE;
	if (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS)
		conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
	/* fast-free forbids multi-segment / refcounted mbufs: the transport
	 * sends attached (zero-copy) mbufs, so keep the general path. */
	conf.txmode.offloads &= ~RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE;
	rc = rte_eth_dev_configure(p->port_id, p->nb_rxq, p->nb_txq, &conf);
	if (rc)
		return dp__err(err, ZB_ERR_DEVICE,
			       "port.%u (%s): configure %u rx / %u tx queues, mtu %u: %s",
			       idx, p->name, p->nb_rxq, p->nb_txq, p->mtu,
			       rte_strerror(-rc));
	p->configured = true;

	uint16_t rx_desc = cp->rx_desc ? cp->rx_desc : 1024;
	uint16_t tx_desc = cp->tx_desc ? cp->tx_desc : 1024;
	rc = rte_eth_dev_adjust_nb_rx_tx_desc(p->port_id, &rx_desc, &tx_desc);
	if (rc)
		return dp__err(err, ZB_ERR_DEVICE, "port.%u: descriptors: %s",
			       idx, rte_strerror(-rc));
	uint32_t cache = cfg->dp.mbuf_cache;
	if (cache > RTE_MEMPOOL_CACHE_MAX_SIZE)
		cache = RTE_MEMPOOL_CACHE_MAX_SIZE;
	p->pool_size = cfg->dp.mbufs;
	uint32_t need = pool_need(n, p, rx_desc, tx_desc, cache);
	p->pool_need = need;
	if (p->pool_size < need)
		return dp__err(err, ZB_ERR_CONFIG,
			       "port.%u (%s): [dataplane] mbufs = %u is too small for %u rx x %u + %u tx x %u descriptors and %u lcores (need at least %u)",
			       idx, p->name, p->pool_size, p->nb_rxq, rx_desc,
			       p->nb_txq, tx_desc, n->nb_lcores, need);
	if (cache > p->pool_size / 2)
		cache = p->pool_size / 2;

	p->socket = rte_eth_dev_socket_id(p->port_id);
	int sock = p->socket < 0 ? (int)rte_socket_id() : p->socket;
	char pname[RTE_MEMPOOL_NAMESIZE];
	snprintf(pname, sizeof(pname), "zbmd_port%u", idx);
	/* [dataplane] mbuf_pool: DPDK's "stack" handler (LIFO) by default.
	 * With the ring (FIFO) a freed mbuf comes back only after every other
	 * free one, so anything that holds mbufs for a while (kept frames, a
	 * deep TX queue) makes the lcores cycle through the whole pool, ~20
	 * MB at MTU 1500, and every RX burst writes into lines long gone from
	 * the caches (docs/dataplane.md, "The mbuf pool"). The handler is
	 * reached only when an lcore's cache (mbuf_cache) runs empty or full. */
	const char *ops = cfg->dp.mbuf_pool == CFG_MBUF_POOL_RING ? "ring_mp_mc" : "stack";
	p->pool = rte_pktmbuf_pool_create_by_ops(pname, p->pool_size, cache, 0,
						 p->data_room, sock, ops);
	if (!p->pool) {
		/* ENOMEM: too little EAL memory; otherwise the handler's
		 * driver (librte_mempool_stack / _ring) was not loaded */
		bool nomem = rte_errno == ENOMEM;
		const char *hint = nomem ? "[eal] memory too small?"
				   : cfg->dp.mbuf_pool == CFG_MBUF_POOL_RING
					   ? "DPDK's mempool drivers not loaded?"
					   : "[dataplane] mbuf_pool = ring uses DPDK's default handler";
		return dp__err(err, nomem ? -ENOMEM : ZB_ERR_DEVICE,
			       "port.%u (%s): mempool of %u mbufs x %u bytes on socket %d, handler \"%s\": %s (%s)",
			       idx, p->name, p->pool_size, p->data_room, sock, ops,
			       rte_strerror(rte_errno), hint);
	}

	prefault_pool(p->pool);

	for (uint16_t q = 0; q < p->nb_rxq; q++) {
		rc = rte_eth_rx_queue_setup(p->port_id, q, rx_desc, (unsigned)sock,
					    NULL, p->pool);
		if (rc)
			return dp__err(err, ZB_ERR_DEVICE,
				       "port.%u (%s): rx queue %u: %s", idx,
				       p->name, q, rte_strerror(-rc));
	}
	for (uint16_t q = 0; q < p->nb_txq; q++) {
		rc = rte_eth_tx_queue_setup(p->port_id, q, tx_desc, (unsigned)sock,
					    NULL);
		if (rc)
			return dp__err(err, ZB_ERR_DEVICE,
				       "port.%u (%s): tx queue %u: %s", idx,
				       p->name, q, rte_strerror(-rc));
	}
	return 0;
}

static int port_mac(uint16_t idx, struct dp_port *p, const struct cfg_port *cp,
		    struct dp_err *err)
{
	int rc = rte_eth_macaddr_get(p->port_id, &p->mac);
	if (rc)
		return dp__err(err, ZB_ERR_DEVICE, "port.%u (%s): read MAC: %s",
			       idx, p->name, rte_strerror(-rc));
	if (!cp->mac_set || memcmp(cp->mac, p->mac.addr_bytes, 6) == 0)
		return 0;
	struct rte_ether_addr want;
	memcpy(want.addr_bytes, cp->mac, 6);
	rc = rte_eth_dev_default_mac_addr_set(p->port_id, &want);
	if (rc == -ENOTSUP) {
		/* memif, ring, ...: the device has no MAC filter to set. We
		 * filter in software (arp.c), so the address is ours anyway;
		 * promiscuous mode lets a real NIC deliver frames for it. */
		rte_eth_promiscuous_enable(p->port_id);
		p->mac_soft = true;
		rc = 0;
	}
	if (rc)
		return dp__err(err, ZB_ERR_DEVICE,
			       "port.%u (%s): set MAC %02x:%02x:%02x:%02x:%02x:%02x: %s",
			       idx, p->name, cp->mac[0], cp->mac[1], cp->mac[2],
			       cp->mac[3], cp->mac[4], cp->mac[5], rte_strerror(-rc));
	p->mac = want;
	return 0;
}

/* Map in, writable, every page of this process's memif shared memory (the
 * driver's memfd regions: rings, descriptors, packet buffers). The kernel
 * maps a shared page into a process on its first touch; each process of a
 * link touches a ring buffer first when the ring wraps onto it, so without
 * this the first several megabytes through every link fault a page per
 * 4 KiB inside the lcore loops (a 4-node all-reduce of 1 MiB took 4.5 ms
 * instead of 1.8 for its first 5 runs, until the 1024-slot rings had
 * cycled). MADV_POPULATE_WRITE changes no byte; a failure only costs
 * those faults later. */
static void populate_memif_shm(void)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];

	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		if (!strstr(line, "memif_region") ||
		    sscanf(line, "%lx-%lx", &lo, &hi) != 2 || hi <= lo)
			continue;
		(void)madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE);
		dp__memif_guard_add(lo, hi);
	}
	fclose(f);
}

/* membarrier(2) registered for this process: memif_reconnect can run. */
static bool memif_barrier_ok;

static void memif_barrier_register(void)
{
	static bool tried;
	if (tried)
		return;
	tried = true;
	memif_barrier_ok = syscall(SYS_membarrier,
				   MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
	if (!memif_barrier_ok)
		fprintf(stderr, "zbmd: memif: membarrier unavailable (%s): a client "
			"link whose server restarts will not reconnect\n", strerror(errno));
}

/* 1 when every running loop finished the iteration it was in (kicked out
 * of an adaptive sleep first), 0 after DP_MEMIF_QUIESCE_MS. */
static int lcores_pass_iteration(struct dp_node *n)
{
	uint64_t seen[CFG_MAX_LCORES];
	unsigned nl = n->nb_lcores < CFG_MAX_LCORES ? n->nb_lcores : CFG_MAX_LCORES;
	uint64_t end = rte_get_tsc_cycles() + rte_get_tsc_hz() / 1000 * DP_MEMIF_QUIESCE_MS;

	if (!n->launched)
		return 1;   /* no loop runs yet */
	for (unsigned i = 0; i < nl; i++) {
		seen[i] = __atomic_load_n(&n->lcores[i].stats.iterations, __ATOMIC_ACQUIRE);
		dp_lcore_kick(i);
	}
	for (unsigned i = 0; i < nl; i++)
		while (__atomic_load_n(&n->lcores[i].stats.iterations, __ATOMIC_ACQUIRE) == seen[i]) {
			if (rte_get_tsc_cycles() > end)
				return 0;
			rte_pause();
		}
	return 1;
}

/* Restart memif client port p so that it connects again: close its gate,
 * make every thread pass a full barrier (the lcores load the gate plainly),
 * wait until every loop finished the iteration it was in, stop and start
 * the port (the driver unmaps the old link's memory and connects anew),
 * open the gate. Interrupt thread only (the driver's own context: no
 * connect or unmap races with us). */
static void memif_reconnect(struct dp_node *n, struct dp_port *p)
{
	/* a closed gate: the port is stopped (its last start failed), and
	 * the lcores have left it already */
	if (!atomic_load(&p->gate)) {
		atomic_store(&p->gate, 1);
		/* every thread passes a full barrier: a burst that starts from
		 * now on sees the gate closed; one that loaded it open runs in
		 * its loop's current iteration, whose end we wait for */
		if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0 ||
		    !lcores_pass_iteration(n)) {
			atomic_store(&p->gate, 0);
			return;
		}
		(void)rte_eth_dev_stop(p->port_id);
	}
	int rc = rte_eth_dev_start(p->port_id);
	p->reconnects++;
	if (p->reconnects == 1 || p->reconnects % 60 == 0)
		fprintf(stderr, "zbmd: port.%u (%s): memif client link down for %u ms: "
			"restarted to reconnect (attempt %u%s)\n", p->cfg_index, p->name,
			DP_MEMIF_RECONNECT_MS, p->reconnects,
			rc ? ": no server yet, retrying" : "");
	/* a port that did not start keeps its gate closed: the driver's
	 * burst functions are ethdev's not-ready stubs until it starts */
	if (rc == 0)
		atomic_store_explicit(&p->gate, 0, memory_order_release);
}

/* A port whose link was up and has been down for [transport] link_down_ms
 * (0: never): its peers are unreachable. The lanes see down_gen move and
 * declare every peer that [peer.N] port maps to it down (link.c). The
 * interrupt thread; now in ms. */
static void link_down_check(struct dp_node *n, uint16_t k, bool up, uint64_t now)
{
	struct dp_port *p = &n->ports[k];
	uint32_t after = n->cfg->transport.link_down_ms;

	if (up) {
		p->link_was_up = true;
		p->link_declared = false;
		p->link_down_at_ms = 0;
		return;
	}
	if (!p->link_was_up || p->link_declared || !after ||
	    __atomic_load_n(&n->quit, __ATOMIC_RELAXED) ||
	    atomic_load_explicit(&n->leaving, memory_order_relaxed))
		return;
	if (!p->link_down_at_ms) {
		p->link_down_at_ms = now;
		return;
	}
	if (now - p->link_down_at_ms < after)
		return;
	p->link_declared = true;
	atomic_fetch_add_explicit(&p->down_gen, 1, memory_order_release);
	atomic_fetch_add_explicit(&n->link_down_gen, 1, memory_order_release);
	char peers[6 * 16 + 8] = "";
	int off = 0;
	unsigned np = 0;
	for (uint16_t id = 0; id < CFG_MAX_NODES; id++) {
		if (dp__peer_port(n, id) != k)
			continue;
		if (np++ < 16 && off >= 0 && (size_t)off < sizeof(peers))
			off += snprintf(peers + off, sizeof(peers) - (size_t)off, " %u", id);
	}
	fprintf(stderr, "zbmd: port.%u (%s): link down for %" PRIu64 " ms after it was up "
		"([transport] link_down_ms %u): node(s)%s%s reached through it declared down\n",
		p->cfg_index, p->name, now - p->link_down_at_ms, after,
		np ? peers : " (none)", np > 16 ? " ..." : "");
}

/* EAL alarm (the interrupt thread, where the memif driver connects and maps
 * its regions, so no mapping changes under us), every DP_WATCH_US until
 * dp__ports_fini cancels it: each port's link state (link_down_check); for
 * memif ports, when one has come up since the last look, populate the shared
 * memory; a memif client port whose link has been down for
 * DP_MEMIF_RECONNECT_MS is restarted (and again every DP_MEMIF_RECONNECT_MS
 * while it stays down). */
static void port_watch_alarm(void *arg)
{
	struct dp_node *n = arg;
	bool newly_up = false;
	uint64_t now = rte_get_tsc_cycles() / (rte_get_tsc_hz() / 1000);   /* ms */

	for (uint16_t k = 0; k < n->nb_ports; k++) {
		struct dp_port *p = &n->ports[k];
		struct rte_eth_link link;
		if (!p->started || rte_eth_link_get_nowait(p->port_id, &link) != 0)
			continue;
		link_down_check(n, k, link.link_status != 0, now);
		if (!p->memif)
			continue;
		if (link.link_status && !p->shm_populated)
			newly_up = true;
		p->shm_populated = link.link_status != 0;
		if (link.link_status || !p->memif_client || !memif_barrier_ok ||
		    __atomic_load_n(&n->quit, __ATOMIC_RELAXED) ||
		    atomic_load_explicit(&n->leaving, memory_order_relaxed)) {
			p->down_since_ms = 0;
			continue;
		}
		if (!p->down_since_ms)
			p->down_since_ms = now;
		else if (now - p->down_since_ms >= DP_MEMIF_RECONNECT_MS) {
			memif_reconnect(n, p);
			p->down_since_ms = now;
		}
	}
	if (newly_up)
		populate_memif_shm();
	uint64_t ab = dp__memif_guard_absorbed();
	if (ab != n->memif_absorbed_seen) {
		fprintf(stderr, "zbmd: memif: %" PRIu64 " fault(s) of an RX/TX burst in flight "
			"when a peer hung up, absorbed (DPDK 22.11 unmaps the link's memory "
			"under the lcore; dataplane/memif_guard.c)\n",
			ab - n->memif_absorbed_seen);
		n->memif_absorbed_seen = ab;
	}
	(void)rte_eal_alarm_set(DP_WATCH_US, port_watch_alarm, n);
}

int dp__ports_init(struct dp_node *n, struct dp_err *err)
{
	ZB_ASSERT(n != NULL && n->cfg != NULL);
	ZB_ASSERT(n->nb_ports == 0);
	const struct zb_config *cfg = n->cfg;

	for (uint16_t i = 0; i < CFG_MAX_PORTS; i++)
		n->port_of_cfg[i] = -1;
	for (uint16_t i = 0; i < CFG_MAX_PORTS; i++) {
		const struct cfg_port *cp = &cfg->ports[i];
		if (!cp->present)
			continue;
		n->port_of_cfg[i] = (int8_t)n->nb_ports;
		struct dp_port *p = &n->ports[n->nb_ports];
		memset(p, 0, sizeof(*p));
		p->cfg_index = i;
		p->ip = cp->ip;
		if (find_port(cp, &p->port_id))
			return dp__err(err, -ENODEV,
				       "port.%u: no DPDK port for %s '%s' (driver missing, or the device/interface does not exist?)",
				       i, cp->pci[0] ? "pci" : "vdev",
				       cp->pci[0] ? cp->pci : cp->vdev);
		n->nb_ports++;
		int rc = port_configure(n, i, p, cp, err);
		if (rc)
			return rc;
		rc = port_mac(i, p, cp, err);
		if (rc)
			return rc;
	}
	for (uint16_t k = 0; k < n->nb_ports; k++)
		if (n->ports[k].memif_client)
			memif_barrier_register();
	for (uint16_t k = 0; k < n->nb_ports; k++) {
		struct dp_port *p = &n->ports[k];
		int rc = rte_eth_dev_start(p->port_id);
		if (rc && p->memif_client && memif_barrier_ok) {
			/* its server is not there yet: port_watch_alarm starts
			 * it again until it connects; the lcores leave it alone
			 * meanwhile (gate closed) */
			fprintf(stderr, "zbmd: port.%u (%s): memif client: no server at "
				"start (%s): retrying every %u ms\n", p->cfg_index, p->name,
				rte_strerror(-rc), DP_MEMIF_RECONNECT_MS);
			atomic_store(&p->gate, 1);
			rc = 0;
		}
		if (rc)
			return dp__err(err, ZB_ERR_DEVICE, "port.%u (%s): start: %s",
				       p->cfg_index, p->name, rte_strerror(-rc));
		p->started = true;
	}
	for (uint16_t k = 0; k < n->nb_ports; k++)
		if (n->ports[k].memif) {
			dp__memif_guard_install();
			break;
		}
	if (n->nb_ports)
		(void)rte_eal_alarm_set(DP_WATCH_US, port_watch_alarm, n);
	return 0;
}

/* Stop, then close, the ports whose memif-ness equals `memif`. */
static void ports_stop_close(struct dp_node *n, bool memif)
{
	for (uint16_t k = 0; k < n->nb_ports; k++) {
		struct dp_port *p = &n->ports[k];
		if (p->memif != memif)
			continue;
		if (p->started)
			rte_eth_dev_stop(p->port_id);
		p->started = false;
	}
	for (uint16_t k = 0; k < n->nb_ports; k++)
		if (n->ports[k].memif == memif)
			rte_eth_dev_close(n->ports[k].port_id);
}

struct memif_fini_job {
	struct dp_node *n;
	int done;   /* set (release) by the interrupt thread */
};

static void memif_fini_alarm(void *arg)
{
	struct memif_fini_job *job = arg;
	ports_stop_close(job->n, true);
	__atomic_store_n(&job->done, 1, __ATOMIC_RELEASE);
}

/*
 * DPDK 22.11's memif driver runs its control channel (the peer's messages,
 * its hang-up) in the EAL interrupt thread, and its disconnect path has no
 * lock: when the peer hangs up while this thread stops or closes the port,
 * both threads free the same shared-memory regions and the process faults
 * (seen when both ends of a link stop together). EAL alarms run in that same
 * interrupt thread, so memif ports are stopped and closed from an alarm:
 * serialised with the driver's own callbacks. Other ports stop here.
 */
void dp__ports_watch_stop(struct dp_node *n)
{
	ZB_ASSERT(n != NULL);
	/* the watch re-arms itself: cancel (waits while it runs, so a
	 * reconnect that began before the stop is over when this returns) */
	if (n->nb_ports && n->eal_up)
		(void)rte_eal_alarm_cancel(port_watch_alarm, (void *)-1);
}

bool dp__ports_fini(struct dp_node *n)
{
	ZB_ASSERT(n != NULL);
	ZB_ASSERT(n->nb_ports <= CFG_MAX_PORTS);
	bool any_memif = false;
	for (uint16_t k = 0; k < n->nb_ports; k++)
		any_memif |= n->ports[k].memif;
	/* the watch re-arms itself: cancel (waits while it runs) */
	if (n->nb_ports)
		(void)rte_eal_alarm_cancel(port_watch_alarm, (void *)-1);
	if (any_memif) {
		struct memif_fini_job job = {.n = n, .done = 0};
		bool ran = false;
		if (rte_eal_alarm_set(1, memif_fini_alarm, &job) == 0) {
			for (unsigned ms = 0; ms < DP_MEMIF_FINI_WAIT_MS; ms++) {
				if (__atomic_load_n(&job.done, __ATOMIC_ACQUIRE)) {
					ran = true;
					break;
				}
				rte_delay_us_sleep(1000);
			}
			/* Not run in time (interrupt thread stuck): take it back and
			 * close here; if it cannot be taken back it is running now. */
			if (!ran && rte_eal_alarm_cancel(memif_fini_alarm, &job) <= 0) {
				while (!__atomic_load_n(&job.done, __ATOMIC_ACQUIRE))
					rte_delay_us_sleep(1000);
				ran = true;
			}
		}
		if (!ran)
			ports_stop_close(n, true);
	}
	ports_stop_close(n, false);
	/* The pools are not freed: the EAL cannot restart in this process
	 * (dp_node_init refuses a second node), and its memory goes with the
	 * process or with rte_eal_cleanup. Freeing them cost more than the rest
	 * of the stop: DPDK 22.11 zeroes the memory it frees, ~100 MB per
	 * memif port's pool, 120 - 160 ms each on the AMD VM of 2026-11-27 (a
	 * 4-node memif run, 3 pools per node, took 6.0 - 6.8 s against 7.0 -
	 * 8.3 with them freed). */
	for (uint16_t k = 0; k < n->nb_ports; k++)
		n->ports[k].pool = NULL;
	n->nb_ports = 0;
	return any_memif;
}

int dp__peer_link_down(uint16_t node)
{
	const struct dp_node *n = &dp__node;
	int k = n->cfg ? dp__peer_port(n, node) : -1;

	return k >= 0 && atomic_load_explicit(&n->ports[k].link_declared,
					      memory_order_relaxed) ? n->ports[k].cfg_index : -1;
}

/* ---- public accessors ----------------------------------------------------- */

uint16_t dp_port_count(void)
{
	return dp__node.nb_ports;
}

struct rte_mempool *dp_port_pool(uint16_t port)
{
	return port < dp__node.nb_ports ? dp__node.ports[port].pool : NULL;
}

int dp_port_of_cfg(uint16_t cfg_index)
{
	if (cfg_index >= CFG_MAX_PORTS || !dp__node.eal_up ||
	    dp__node.port_of_cfg[cfg_index] < 0)
		return -EINVAL;
	return dp__node.port_of_cfg[cfg_index];
}

int dp_port_addr(uint16_t port, uint8_t mac[6], uint32_t *ip_be)
{
	if (port >= dp__node.nb_ports)
		return -EINVAL;
	if (mac)
		memcpy(mac, dp__node.ports[port].mac.addr_bytes, 6);
	if (ip_be)
		*ip_be = dp__node.ports[port].ip;
	return 0;
}
