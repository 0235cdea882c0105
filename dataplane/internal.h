/* dataplane/internal.h — shared between the node's files (eal, port, lcore,
 * arp, node). Not a public interface. */
#ifndef ZBMD_DATAPLANE_INTERNAL_H
#define ZBMD_DATAPLANE_INTERNAL_H

#include "zbmd/common.h"
#include "zbmd/config.h"
#include "zbmd/dataplane.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>

#include <rte_config.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#define DP_BURST_MAX 64          /* rx burst array size; cfg burst clamped */
#define DP_RXQ_MAX CFG_MAX_PORTS /* one queue per port per lcore */
#define DP_TIMER_US_DEFAULT 100
#define DP_INBOX_SIZE 4096       /* frames in flight between lcores, per lane */
#define DP_RX_BACKLOG_SKIPS 16   /* iterations transport timers wait for RX backlog */
#define DP_IDLE_PAUSE_US 10      /* adaptive: pure spin before yielding */
#define DP_IDLE_YIELD_US 2000    /* adaptive: sched_yield stage after the spin */

static_assert(CFG_MAX_LCORES <= RTE_MAX_LCORE, "lcore tables");

/* One configured port, set up by port.c at init, read-only afterwards. */
struct dp_port {
	uint16_t port_id;            /* ethdev id */
	uint16_t cfg_index;          /* N of [port.N] */
	uint16_t nb_rxq, nb_txq;
	uint16_t mtu;
	int socket;                  /* NUMA socket */
	uint32_t ip;                 /* network byte order, 0 = none */
	struct rte_ether_addr mac;
	struct rte_mempool *pool;
	uint32_t pool_size;
	uint32_t pool_need;          /* what rings, bursts and caches can hold */
	uint16_t data_room;
	char name[RTE_ETH_NAME_MAX_LEN];
	char driver[64];
	bool started;
	bool mac_soft;               /* config MAC kept in software only */
	bool no_attach;              /* TX: copy payloads (memif zero-copy client) */
	bool configured;
	bool shm_populated;          /* memif: link up, shared memory prefaulted */
	bool memif;                  /* net_memif: bursts through memif_guard */
	bool memif_client;           /* role=client (not zero-copy): reconnects */
	/* memif client reconnect (port.c, interrupt thread): while the gate is
	 * closed the lcores start no burst on the port (lcore.c memif_gate_open) */
	_Atomic uint32_t gate;
	uint64_t down_since_ms;      /* link seen down since (0: up) */
	uint32_t reconnects;         /* restarts of the port to reconnect */
	/* the link watch (port.c, interrupt thread): a link that was up and
	 * stays down [transport] link_down_ms declares the peers it reaches
	 * down; down_gen counts those declarations (the lanes act on each) */
	bool link_was_up;            /* seen up since the port started */
	_Atomic bool link_declared;  /* this down period declared */
	uint64_t link_down_at_ms;    /* seen down since (0: up) */
	_Atomic uint32_t down_gen;
};

struct dp_rxq {
	uint16_t port;               /* index into g_dp.ports */
	uint16_t port_id;            /* ethdev id */
	uint16_t queue;
};

struct dp_poller {
	dp_poll_fn fn;
	void *arg;
};

/* Per-lcore state: cache-aligned, touched only by its lcore on the fast path
 * (stats are read by others with relaxed atomic loads). */
/* Frames a TX burst could not place (the queue's ring was full), kept in
 * order for the next flush instead of dropped; while any wait, dp_tx
 * refuses new frames (the transport sees a full link: backpressure).
 * A queue that takes nothing for DP_TXHOLD_TRIES drains in a row (link
 * down) has its kept frames dropped. */
#define DP_TXHOLD_TRIES 4096        /* drains that sent nothing: then drop */
struct dp_txhold {
	struct dp_lcore *lc;
	uint16_t n;
	uint32_t fails;                 /* drains in a row that sent nothing */
	struct rte_mbuf *m[DP_BURST_MAX];
};

struct dp_lcore {
	unsigned index, lcore_id;
	uint16_t nb_rxq;
	struct dp_rxq rxq[DP_RXQ_MAX];
	/* tx[p]: TX buffer for port index p, NULL when no queue for us. */
	struct rte_eth_dev_tx_buffer *tx[CFG_MAX_PORTS];
	struct dp_txhold *hold[CFG_MAX_PORTS];   /* with tx[p] */
	uint16_t txq[CFG_MAX_PORTS];
	struct rte_ring *inbox;      /* zbmd frames for our lane from other lcores */
	uint32_t nb_pollers;         /* published with release */
	struct dp_poller pollers[DP_POLLERS_MAX];
	struct dp_lcore_stats stats ZB_ALIGNED_CL;
	/* dp_lcore_kick(): other threads bump doorbell; the loop sets sleeping
	 * around its adaptive sleep, a futex wait on doorbell (own line: both
	 * are written by other threads) */
	struct {
		_Atomic uint32_t doorbell, sleeping;
	} bell ZB_ALIGNED_CL;
} ZB_ALIGNED_CL;

struct dp_node {
	const struct zb_config *cfg;
	bool eal_up, launched, fini_done, timers_up;
	volatile int quit;           /* set by dp_node_request_stop */
	_Atomic int leaving;         /* set by dp_node_leaving */
	int lock_fd;
	char lock_dir[512];          /* the runtime dir it is in (removed at the end) */
	uint64_t memif_absorbed_seen; /* memif_guard faults reported (interrupt thread) */
	unsigned main_lcore;
	bool main_is_dp;             /* one EAL lcore: main runs the loop */
	unsigned nb_lcores;
	unsigned lcore_ids[CFG_MAX_LCORES];
	struct dp_lcore *lcores;     /* [nb_lcores], rte_zmalloc'd */
	struct dp_port ports[CFG_MAX_PORTS];
	uint16_t nb_ports;
	uint16_t burst;
	uint16_t udp_port;           /* lane L: udp_port + L */
	int8_t port_of_cfg[CFG_MAX_PORTS];  /* [port.N] -> index in ports, -1 */
	/* Neighbours, by node id: bit 63 = known, low 48 bits = MAC. Written
	 * by whichever lcore hears an ARP, read by any: single atomic words. */
	uint64_t neigh[CFG_MAX_NODES];
	uint64_t neigh_next_tsc;     /* lcore 0: next ARP request round */
	/* idle policy in TSC cycles */
	bool adaptive;
	uint64_t idle_spin_tsc;
	uint32_t idle_sleep_us_max;
	uint64_t timer_tsc;          /* timer_us in TSC cycles, once the EAL is up */
	uint32_t timer_us;           /* timer hook period (0: DP_TIMER_US_DEFAULT) */
	/* hooks (set before launch) */
	dp_rx_fn rx_fn;
	void *rx_arg;
	dp_actor_fn actor_fn;
	void *actor_arg;
	dp_timer_fn timer_fn;
	void *timer_arg;
	const struct dp_control_ops *ctl_ops;
	void *ctl_arg;
	pthread_t ctl_thread;
	bool ctl_running;
	int ctl_status;
	pthread_mutex_t reg_lock;    /* serialises dp_register_poller */
	bool iova_va;                /* user memory can be attached as-is */
	bool has_link;               /* transport lanes exist (link.c) */
	_Atomic uint32_t link_down_gen; /* sum of the ports' down_gen */
};

extern struct dp_node dp__node;

/* Format err->msg (never fails; truncates). Returns rc for `return` chains. */
int dp__err(struct dp_err *err, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* eal.c */
int dp__lock_prefix(const char *prefix, struct dp_err *err);
void dp__unlock_prefix(void);
int dp__eal_start(const struct zb_config *cfg, struct dp_err *err);

/* The index in n->ports of the port that reaches peer `id` ([peer.N]
 * port), or -1: not a peer of this node, or its port is not configured. */
static inline int dp__peer_port(const struct dp_node *n, uint16_t id)
{
	if (id >= CFG_MAX_NODES || id == n->cfg->node.id)
		return -1;
	const struct cfg_peer *pe = &n->cfg->peers[id];
	return pe->present && pe->port < CFG_MAX_PORTS ? n->port_of_cfg[pe->port] : -1;
}

/* port.c */
int dp__ports_init(struct dp_node *n, struct dp_err *err);
/* The [port.N] index of the port that reaches `node` ([peer.N] port) when
 * its link watch declared that link down (link_down_ms), else -1. Any
 * thread. */
int dp__peer_link_down(uint16_t node);
/* Stop and close every port, free the pools. Returns true when memif ports
 * were among them (see dp_node_fini). */
/* Cancels the memif watch (the link watcher and its reconnects), waiting
 * for a run in progress; the first step of a stop. */
void dp__ports_watch_stop(struct dp_node *n);
bool dp__ports_fini(struct dp_node *n);

/* memif_guard.c: absorb the faults of a burst in flight when a memif peer
 * hangs up (DPDK 22.11 unmaps the link's memory under the lcore). Install
 * once (memif ports exist); add every memif shared-memory range mapped. */
void dp__memif_guard_install(void);
void dp__memif_guard_add(uintptr_t lo, uintptr_t hi);
unsigned dp__memif_guard_ranges(void);
uint64_t dp__memif_guard_absorbed(void);
/* Run one RX or TX burst of a memif port so that a NULL-descriptor fault of
 * the disconnect race ends the burst instead of the process: returns what
 * fn returned, or on_fault when the burst was cut (memif_guard.c). */
typedef uint16_t (*dp__burst_fn)(uint16_t port_id, uint16_t queue,
				 struct rte_mbuf **pkts, uint16_t n);
uint16_t dp__memif_guard_burst(dp__burst_fn fn, uint16_t port_id, uint16_t queue,
			       struct rte_mbuf **pkts, uint16_t n, uint16_t on_fault);

/* lcore.c */
int dp__lcores_init(struct dp_node *n, struct dp_err *err);
void dp__lcores_fini(struct dp_node *n);
int dp__lcore_main(void *arg);

/* link.c: the transport on the ports */
int dp__link_init(struct dp_node *n, struct dp_err *err);
/* Stop: destroys the transports (frees the frames they hold). The
 * zero-copy carriers' pools stay until dp__link_pools_fini, after the
 * lcores and the ports have freed the frames still chained to them. */
void dp__link_fini(struct dp_node *n);
void dp__link_pools_fini(void);
void dp__link_rx(unsigned index, struct rte_mbuf **pkts, uint16_t nb,
		 uint64_t now_tsc);
unsigned dp__link_poll(unsigned index, uint64_t now_tsc);
void dp__link_describe(FILE *out);
void dp__link_stats_dump(FILE *out);
/* Longest sleep (us) that does not overrun lane index's next timer. */
uint32_t dp__link_sleep_cap_us(unsigned index, uint64_t now_tsc);

/* net_dpdk.c: the "dpdk" net provider's share of a lane's messages.
 * deliver: 1 taken (caller releases m), -EAGAIN hold, 0 not the provider's.
 * send_done: 1 when the cookie was the provider's. */
/* Streams 0..DP_NET_STREAMS-1 of every lane are the dpdk net provider's
 * (net_dpdk.c): never kept as frames (link.c), whoever consumes them. */
#define DP_NET_STREAMS 8
int dp__net_deliver(unsigned lane, struct tp_msg *m);
int dp__net_send_done(unsigned lane, uint64_t cookie, int status);
void *dp__net_rx_place(unsigned lane, uint16_t peer, uint16_t stream,
		       uint32_t msg_id, size_t len);
void dp__net_rx_write(unsigned lane, uint16_t peer, uint16_t stream,
		      uint32_t msg_id, uint8_t *buf, size_t off,
		      const uint8_t *data, size_t len);
/* Cycles this lane's provider spent writing payloads into posted receives
 * (copies, fused reductions); 0 without a provider ctx. Call on the lane. */
void dp__net_cycles(unsigned lane, uint64_t *copy_cyc, uint64_t *reduce_cyc);
void dp__net_rx_unplace(unsigned lane, uint16_t peer, uint16_t stream,
			uint32_t msg_id);
struct net_ops;
extern const struct net_ops dp_net_dpdk_ops;

/* arp.c: handle one frame on port p. Returns -1 when it consumed the mbuf
 * (answered, or freed and counted), else the lane L (0 <= L < nb_lcores) of
 * a UDP frame to this node's udp_port + L, left to the caller. */
int dp__rx_classify(struct dp_lcore *lc, const struct dp_port *p,
		    struct rte_mbuf *m);
/* Neighbour table from [peer.N] (before launch); ARP requests for peers
 * whose MAC is unknown (lcore index 0, from the timer branch; allocates from
 * the port's mempool only). Returns work done. */
void dp__neigh_init(struct dp_node *n);
unsigned dp__arp_tick(struct dp_lcore *lc, uint64_t now);

/* The first barrier of a collective host (every node joined) failed: say
 * which way. Only a timeout means "did not join"; anything else (a peer
 * lost, the membership changed while the nodes were starting) is named as
 * it is. */
static inline void dp__join_failed(unsigned node, unsigned connect_ms, int rc,
				   const char *why)
{
	if (rc == ZB_ERR_TIMEOUT)
		fprintf(stderr, "zbmd: node %u: the other nodes did not join within "
			"%u ms: %s\n", node, connect_ms, why);
	else
		fprintf(stderr, "zbmd: node %u: the join of the nodes (the first "
			"barrier) failed: %s\n", node, why);
}

/* A collective host's ring nodes watched from the control plane
 * (ring_watch.c): from before the host's first barrier until its owner
 * closes it, comms fail with ZB_ERR_PEER_DOWN once a node of theirs that
 * the control plane had heard has been suspected by phi for a second — or,
 * until dp__ring_watch_joined (the barrier passed), said it stopped. NULL
 * (nothing watched) without a control node; NULL is a no-op below. */
struct ctl_node;
struct coll_comm;
struct dp_ring_watch;
struct dp_ring_watch *dp__ring_watch_start(struct ctl_node *cn,
					   struct coll_comm *const *comms,
					   unsigned ncomms, uint16_t self);
void dp__ring_watch_joined(struct dp_ring_watch *w);
void dp__ring_watch_stop(struct dp_ring_watch *w);

#define DP_STAT_ADD(lc, field, n)                                              \
	__atomic_store_n(&(lc)->stats.field, (lc)->stats.field + (n),          \
			 __ATOMIC_RELAXED)

#endif /* ZBMD_DATAPLANE_INTERNAL_H */
