/* zbmd/dataplane.h — the node process: DPDK EAL, ports, the lcore loop.
 *
 * One node per process (the EAL is process-global). Life cycle, all from the
 * main thread:
 *
 *   dp_node_init(cfg)     EAL, ports, queues, mempools (nothing polls yet)
 *   dp_register_poller()  completion sources (RDMA CQs, ...) — any time
 *   dp_set_*_hook()       rx handler, actor worker, control thread
 *   dp_node_launch()      one polling loop per dataplane lcore + control thread
 *   dp_node_wait()        (only when the main lcore is itself a dataplane lcore)
 *   dp_node_stop()        loops quit, control thread joined
 *   dp_node_fini()        ports stopped + closed, mempools freed, EAL cleanup
 *
 * Dataplane lcores are indexed 0..dp_lcore_count()-1 ("lcore index"). With
 * two or more EAL lcores the first is the main lcore (signals, control, logs)
 * and every other one runs a loop; with exactly one EAL lcore the main lcore
 * runs the loop itself (dp_node_wait()).
 *
 * Errors: 0 or a negative errno / ZB_ERR_* code; where a struct dp_err is
 * given it receives a one-line explanation naming what failed.
 */
#ifndef ZBMD_DATAPLANE_H
#define ZBMD_DATAPLANE_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "zbmd/transport.h"

struct zb_config;
struct rte_mbuf;

#define DP_POLLERS_MAX 16       /* completion sources per lcore */
#define DP_EAL_ARGS_MAX 64      /* EAL argv entries dp_eal_args() can build */

struct dp_err {
	char msg[512];
};

/* ---- EAL arguments ---------------------------------------------------------
 * Build the EAL argv for cfg into argv[0..*argc-1] (argv[0] = prog), strings
 * stored in buf. [eal] lcores -> -l (or --lcores a@b when an lcore id has no
 * CPU of that number online: local clusters share 2 cores), memory_mb -> -m,
 * hugepages=off -> --no-huge, file_prefix -> --file-prefix, log_level ->
 * --log-level, no pci port -> --no-pci, one -a per pci port, one --vdev per
 * vdev port, extra_args split on blanks (no quoting).
 * Returns 0, -ENOSPC (buf or argv too small), -EINVAL (cfg has no lcores). */
int dp_eal_args(const struct zb_config *cfg, const char *prog, char *buf,
		size_t buflen, char **argv, int argv_max, int *argc);

/* Runtime directory DPDK uses for file_prefix (/var/run/dpdk/PREFIX for root,
 * $XDG_RUNTIME_DIR/dpdk/PREFIX or /tmp/dpdk/PREFIX otherwise). 0 or -ENOSPC. */
int dp_runtime_dir(const char *file_prefix, char *out, size_t outlen);

/* ---- node life cycle (main thread only) ---------------------------------- */

/* Take the node lock for cfg->eal.file_prefix, start the EAL, configure and
 * start every port. cfg must outlive the node. Errors: -EBUSY another node
 * (or DPDK primary) holds file_prefix (err names its pid when known);
 * -EALREADY the node was initialised before in this process (EAL cannot be
 * restarted); -ENODEV a configured port was not probed; ZB_ERR_CONFIG the
 * config asks what a port cannot do (queues, mtu); -ENOMEM mempools;
 * ZB_ERR_DEVICE a driver call failed. On error everything taken is released
 * (the EAL, once initialised, stays initialised but is cleaned up). */
int dp_node_init(const struct zb_config *cfg, struct dp_err *err);

/* Start the control thread hook (if set) and one loop per dataplane lcore
 * other than the main lcore. 0, -EINVAL (not initialised / launched twice),
 * or the control hook's start error. */
int dp_node_launch(struct dp_err *err);

/* True when the main lcore is the (only) dataplane lcore: the caller must
 * run dp_node_wait() on the main thread for anything to be polled. */
bool dp_main_polls(void);

/* Run the loop on the calling (main) lcore when it is a dataplane lcore;
 * returns when dp_node_request_stop() is called. Returns at once otherwise. */
void dp_node_wait(void);

/* Async-signal-safe: ask every loop to quit. */
void dp_node_request_stop(void);
/* This node is on its way out (its work done; the loops still run, e.g. to
 * acknowledge the last frames): links that go down from now on, as the
 * other nodes leave too, no longer declare their peers down
 * ([transport] link_down_ms). Any thread. */
void dp_node_leaving(void);
bool dp_node_stop_requested(void);

/* Wait for the loops to quit and the control thread to end. Idempotent. */
void dp_node_stop(void);

/* Stop and close ports, free mempools and TX buffers, rte_eal_cleanup(),
 * release the node lock. Idempotent. */
void dp_node_fini(void);

/* Describe what the node started (lcores, ports with MAC/IP/driver/queues,
 * mempools) on out, one item per line. */
void dp_node_describe(FILE *out);

/* ---- the lcore loop --------------------------------------------------------
 * Every loop iteration: read the TSC; RX burst from its queues -> the packet
 * handler (ARP and ICMP echo for the port's IP answered in place; UDP to
 * [dataplane] udp_port -> the rx hook, or counted as dropped when none); every
 * registered poller; the actor hook; flush TX buffers; due timers; then the
 * idle policy. No allocation, lock, syscall or log inside an iteration; the
 * adaptive policy sleeps only after idle_spin_us without work. */

unsigned dp_lcore_count(void);           /* dataplane lcores (0 before init) */
int dp_lcore_index(void);                /* calling thread's index, or -1 */
unsigned dp_lcore_id_of(unsigned index); /* EAL lcore id of an index */
/* The CPUs the dataplane lcores run on (their EAL cpusets); how many. */
int dp_lcores_cpus(cpu_set_t *out);

/* A completion source polled every iteration on lcore `index`. Returns the
 * number of events it handled (0 = nothing to do; drives the idle policy).
 * now_tsc: the iteration's TSC. Runs on that lcore only. */
typedef unsigned (*dp_poll_fn)(void *arg, uint64_t now_tsc);

/* Register fn on lcore `index` (any thread, any time after dp_node_init; it
 * is polled from the next iteration on, until the node stops). Returns 0,
 * -EINVAL (bad index or fn NULL), -ENOSPC (DP_POLLERS_MAX reached). */
int dp_register_poller(unsigned index, dp_poll_fn fn, void *arg);

/* Work for lcore `index` arrived from another thread (a collective started,
 * a message posted): if its adaptive idle policy has it asleep, wake it now
 * instead of at the end of its back-off sleep (up to idle_sleep_us_max).
 * Any thread; a syscall (futex wake) only when that lcore sleeps, nothing
 * but two atomics otherwise. Ignores a bad index. */
void dp_lcore_kick(unsigned index);

/* Packet hook: receives UDP frames addressed to this node's IP and
 * udp_port + index ("lane" index: one transport instance per lcore), n >= 1,
 * and owns the mbufs (must free or keep them). pkts[i] data starts at the
 * Ethernet header. Runs on lcore `index` only: a frame for lane L that
 * arrives on another lcore's queue is passed to lcore L through its inbox (a
 * lock-free ring). Frames for lanes >= dp_lcore_count() are dropped. */
typedef void (*dp_rx_fn)(void *arg, unsigned index, uint16_t port,
			 struct rte_mbuf **pkts, uint16_t n, uint64_t now_tsc);

/* Actor worker: run up to the reductions budget on lcore `index`. Returns
 * the work done (0 = idle). */
typedef unsigned (*dp_actor_fn)(void *arg, unsigned index, uint64_t now_tsc);

/* rte_timer (DPDK's timer library) is initialised by dp_node_init and
 * managed on every dataplane lcore every timer period (100 us by default):
 * arm a timer with rte_timer_reset(..., dp_lcore_id_of(index), ...) and its
 * callback runs on that lcore's loop.
 *
 * Timer hook: called every ~timer period (and never more than once per
 * iteration) on each lcore; returns work done. */
typedef unsigned (*dp_timer_fn)(void *arg, unsigned index, uint64_t now_tsc);

/* Hooks are set before dp_node_launch(); -EBUSY once launched. */
int dp_set_rx_hook(dp_rx_fn fn, void *arg);
int dp_set_actor_hook(dp_actor_fn fn, void *arg);
int dp_set_timer_hook(dp_timer_fn fn, void *arg, uint32_t period_us);

/* Control thread slot: a plain pthread started by dp_node_launch() running
 * run(arg) until stop(arg) (called from dp_node_stop) makes it return.
 * Signals are blocked in it. Without a hook no control thread runs. */
struct dp_control_ops {
	int (*run)(void *arg);
	void (*stop)(void *arg);
};
int dp_set_control_hook(const struct dp_control_ops *ops, void *arg);

/* Queue a frame for TX on `port` from the calling dataplane lcore (buffered;
 * flushed at the end of the iteration or when the buffer fills). Takes the
 * mbuf in every case: when the port has no TX queue for this lcore, or
 * there is no such port, it is freed and counted as a drop (tx_drops).
 * Returns 1 queued, 0 dropped. */
int dp_tx(uint16_t port, struct rte_mbuf *m);

/* The mempool of `port` (for building frames), NULL when no such port. */
struct rte_mempool *dp_port_pool(uint16_t port);
uint16_t dp_port_count(void);
/* Port's MAC (6 bytes) and IPv4 (network byte order). 0 or -EINVAL. */
int dp_port_addr(uint16_t port, uint8_t mac[6], uint32_t *ip_be);

/* MAC of peer `node` ([peer.N] mac, or learnt by ARP when that is
 * 00:00:00:00:00:00). Any thread. 0, -EAGAIN (not resolved yet: the node
 * keeps asking every 200 ms), -EINVAL (no such peer). */
int dp_peer_mac(uint16_t node, uint8_t mac[6]);
/* Index into the node's ports of [port.N] N, or -EINVAL. */
int dp_port_of_cfg(uint16_t cfg_index);

/* Per-lcore counters: written only by the lcore with relaxed atomics, read by
 * anyone without locks. Each is monotonic. */
struct dp_lcore_stats {
	uint64_t iterations;
	uint64_t idle_iterations;
	uint64_t sleeps;          /* adaptive back-off sleeps */
	uint64_t kicked;          /* sleeps ended early by dp_lcore_kick() */
	uint64_t rx_packets, rx_bytes;
	uint64_t tx_packets, tx_bytes;  /* queued for TX */
	uint64_t tx_drops;        /* no TX queue, or a kept frame had no room */
	uint64_t tx_full;         /* refused by dp_tx: the queue's ring was full */
	uint64_t rx_drops;        /* not ours / malformed / no handler */
	uint64_t arp_replies, icmp_replies;
	uint64_t arp_requests, arp_learned;  /* sent for peers / MACs learnt */
	uint64_t udp_rx;          /* handed to the rx hook */
	uint64_t lane_fwd;        /* zbmd frames passed to another lane's lcore */
	uint64_t lane_drops;      /* ... dropped: that lcore's inbox was full */
	uint64_t zc_frames;       /* transport frames sent with the payload attached */
	uint64_t poll_events;     /* pollers + actor + timer work */
	/* TSC cycles inside the drivers' bursts: RX bursts that returned
	 * frames and TX bursts (for memif, the PMD's copy out of / into the
	 * shared ring; rte_get_tsc_hz() converts) */
	uint64_t rx_burst_cyc, tx_burst_cyc;
};
int dp_lcore_stats(unsigned index, struct dp_lcore_stats *out);

/* Print every lcore's counters, one line each. */
void dp_stats_dump(FILE *out);

/* ---- the reliable transport on the ports ------------------------------------
 * When port 0 has an IP, dp_node_init() creates one transport instance per
 * dataplane lcore (lane L = lcore index L, UDP udp_port + L), declares every
 * [peer.N], and the loop feeds it the lane's frames (unless an rx hook is
 * set, which takes them instead) and runs its timers. Frames leave on the
 * port of [peer.N] port, to the MAC the neighbour table has for the peer.
 *
 * dp_transport(L) is lane L's instance: call tp_send / tp_msg_release /
 * tp_stats on it only from lcore L (a poller or the actor hook), or from the
 * main thread before launch / after dp_node_stop(). NULL when none. */
struct tp *dp_transport(unsigned index);

/* Consumers of the transport (actors' remote sends, the dpdk net provider):
 * called on lane `index`'s lcore, with that lane's semantics of struct
 * tp_ops (deliver may return -EAGAIN for backpressure; release messages with
 * tp_msg_release(dp_transport(index), m)). Set before launch; without
 * deliver, messages are released at once and counted. 0 or -EBUSY. */
struct dp_msg_ops {
	int (*deliver)(void *arg, unsigned index, struct tp_msg *m);
	/* Optional: true to receive this message (of at least DP_KEEP_MIN
	 * bytes, on a stream of dp_msg_ops) as its frames, not copied
	 * (tp_msg.segs; tp_ops.rx_keep). The frames are the port's mbufs,
	 * held until tp_msg_release: a lane keeps at most a quarter of its
	 * share of the pools' spare mbufs, larger messages are copied. */
	bool (*rx_keep)(void *arg, unsigned index, uint16_t peer,
			uint16_t stream, size_t len);
	void (*send_done)(void *arg, unsigned index, uint64_t cookie, int status);
	void (*peer_event)(void *arg, unsigned index, uint16_t peer,
			   enum tp_peer_event ev, uint32_t remote_epoch);
};
int dp_set_msg_ops(const struct dp_msg_ops *ops, void *arg);

/* The "dpdk" net provider (zbmd/net.h) is registered by dp_node_init()
 * when the transport exists: net_find("dpdk"). Its ctx belongs to the lane
 * of the lcore that calls init() (lane 0 from the main thread before
 * launch); every call on it must then come from that lcore. It owns streams
 * 0..7 of that lane (channel c = stream c); dp_msg_ops get the rest. */

/* The transport's clock for a loop TSC value (ns since the node started):
 * what pollers pass as now_ns to tp_send. */
uint64_t dp_now_ns(uint64_t tsc);

/* ---- the cluster view: epoch and ring order from the control plane ---------
 * `zbmd run` starts the control thread (Raft membership, control/) and hands
 * every committed membership change to every dataplane lcore through one
 * lock-free SPSC ring per lcore; a poller on each lcore applies the views in
 * commit order with dp_cluster_apply(). Each lcore's applied view is
 * readable from any thread without locks. Without a control thread the
 * epoch stays 0 and nothing is ever applied.
 *
 * What old-epoch work does (ZB_ERR_EPOCH, "membership epoch changed"):
 *  - transport: when a view removes a node, every lane resets its session
 *    with that node (tp_peer_reset): pending sends to it fail with
 *    ZB_ERR_EPOCH at once instead of after peer_timeout_ms;
 *  - collectives: dataplane/coll_dpdk.c registers a dp_on_epoch callback
 *    per lane (before launch); when a committed view drops a node that an
 *    earlier view held, it calls
 *        coll_abort_async(comm, ZB_ERR_EPOCH, "membership epoch changed ...")
 *    which any thread may call (the communicator's owner applies it at its
 *    next progress call). Views that only add nodes abort nothing. */
#define DP_CLUSTER_MAX 64        /* = CFG_MAX_NODES */
#define DP_EPOCH_HOOKS 8

struct dp_cluster_view {
	uint64_t epoch;              /* 0: no control plane / nothing committed */
	uint16_t leader;             /* node id; UINT16_MAX = none known */
	uint16_t n_members;
	uint16_t ring[DP_CLUSTER_MAX];  /* ring order (node ids), n_members used */
	uint16_t pad[2];
};

/* Lcore `index`'s applied view (a sequence lock: the reader retries while
 * the lcore writes it; never blocks the lcore). Any thread. 0 or -EINVAL. */
int dp_cluster_view(unsigned index, struct dp_cluster_view *out);
/* Lcore `index`'s applied epoch: one acquire load, any thread; 0 when none
 * or index out of range. */
uint64_t dp_cluster_epoch(unsigned index);
/* Views applied by lcore `index` so far (tests, metrics). */
uint64_t dp_cluster_changes(unsigned index);

/* Called on lcore `index` right after it applied a view whose epoch differs
 * from the previous one (old_epoch: that previous epoch, 0 at the first). */
typedef void (*dp_epoch_fn)(void *arg, unsigned index, uint64_t old_epoch,
			    const struct dp_cluster_view *v);
/* Register one (before dp_node_launch). 0, -EINVAL (fn NULL), -ENOSPC
 * (DP_EPOCH_HOOKS reached), -EBUSY (launched). */
int dp_on_epoch(dp_epoch_fn fn, void *arg);

/* Apply v on the calling dataplane lcore `index` (the control glue's
 * poller): publish it as the lcore's view, reset transport sessions with the
 * nodes it removed, run the epoch callbacks when the epoch changed. Lcore
 * `index` only (or the main thread before launch). Views with an older
 * epoch than the applied one are ignored (returns 0; 1 when applied). */
int dp_cluster_apply(unsigned index, const struct dp_cluster_view *v,
		     uint64_t now_tsc);

/* ---- CLI ------------------------------------------------------------------ */

/* `zbmd run -c FILE.ini`: start a node until SIGINT/SIGTERM. Exit 0 after a
 * clean stop, 1 on a runtime failure, 2 on bad usage or config. SIGUSR1
 * prints the counters (when the main lcore is not a dataplane lcore). */
int dp_cmd_run(int argc, char **argv);
/* `zbmd train`: data-parallel training across the cluster (dataplane/train.c). */
int dp_cmd_train(int argc, char **argv);

#endif /* ZBMD_DATAPLANE_H */
