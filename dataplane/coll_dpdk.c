/* coll_dpdk.c — the "dpdk" collective host (zbmd/coll.h, "hosts"): runs
 * communicators over the dpdk net provider inside this process's dataplane.
 *
 * open() starts the node (dp_node_init: EAL, ports, one transport lane per
 * dataplane lcore), creates one communicator per lane with
 * threaded_channels — lane 0's from the calling thread before the loops
 * run, every other lane's from its own lcore (the provider's ctx belongs to
 * the lcore that creates it) — registers a poller per lane that calls
 * coll_progress_channel() for that communicator's channels, and launches the
 * loops. With one lane the communicator has [coll] channels channels; with
 * several, the channels are spread over the lanes (at least one each): one
 * channel per lcore by default.
 *
 * When the config asks for a control thread ([control] enabled, as for
 * `zbmd run`: dp__run_control_host), open() starts it too, and each lane
 * fails its communicator with ZB_ERR_EPOCH when a committed view removes
 * one of its nodes (cd_on_epoch, a dp_on_epoch callback on the lane's
 * lcore): a killed node's survivors fail once it is convicted, well before
 * [coll] timeout_ms when that is long.
 *
 * run() calls fn on a thread that may own the communicators: the caller's,
 * or — when the main lcore is itself the dataplane lcore and must run the
 * loop (dp_node_wait) — a plain pthread, the main thread polling meanwhile.
 *
 * close() stops the loops, then destroys the communicators (no lane touches
 * them any more), then stops the node (ports, EAL, runtime files).
 *
 * Registered from a constructor; this object is pulled into the zbmd binary
 * by the -u coll_dpdk_anchor link flag in dataplane/coll.mk (nothing else
 * references it, and static archives only supply referenced objects).
 */
#include "zbmd/coll.h"
#include "zbmd/config.h"
#include "zbmd/dataplane.h"
#include "internal.h"
#include "run_ctl.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include <rte_cycles.h>

enum { LANE_IDLE = 0, LANE_CREATE, LANE_READY, LANE_FAILED };

struct cd_lane {
	struct coll_comm *comm;         /* published by state = LANE_READY */
	_Atomic int state;
	int create_rc;
	uint16_t channels;
	unsigned index;
	struct coll_comm_args args;
	char err[256];
	/* Lane-written timing, published once per loop iteration under
	 * stats_seq (a seqlock: odd while the lane writes; cd_stats retries
	 * until it reads one whole publication). Every field covers the same
	 * window, from the lane's first poll to its latest poll's entry, so
	 * that the parts (coll, idle, bursts, receive writes) are disjoint
	 * and never add up to more than loop_cyc. */
	_Atomic uint32_t stats_seq;
	_Atomic uint64_t coll_cyc, idle_cyc, loop_cyc;
	/* copies of the lcore's driver-burst cycles and the provider's
	 * receive-write cycles (both counted on the lane) */
	_Atomic uint64_t rxb_cyc, txb_cyc, copy_cyc, reduce_cyc;
	/* lane-only: the collectives' cycles in the poll still running
	 * (published at the next poll's entry, with that window's loop time),
	 * and the burst and receive-write totals at the last publication */
	uint64_t coll_pending, w_bursts;
	/* copies of the lane transport's counters (tp_stats is lane-only) */
#define CD_TP_SUMMED(X) X(retransmits) X(fault_drops) X(fault_dups)        \
	X(fault_reorders) X(rto_timeouts) X(fast_retransmits) X(dup_frames)  \
	X(no_buffer_drops) X(msgs_delivered) X(msgs_placed)
#define CD_TP_FIELD(f) _Atomic uint64_t f;
	CD_TP_SUMMED(CD_TP_FIELD)       /* each summed into coll_host_stats */
#undef CD_TP_FIELD
	_Atomic uint64_t frames_rx;     /* valid frames from peers (cd_linger) */
	uint64_t last_tsc, last_idle;
	uint64_t seen;                  /* nodes in any view applied (lane-only) */
	struct cd_host *host;
	uint64_t downs_seen;            /* tp_stats peer_downs looked at */
	bool downs_armed;               /* downs_seen set (lane-only) */
	/* own(): the communicator's owner polled by this lane's loop, and
	 * whether the loop is inside that poll (cd_own's hand-back waits) */
	_Atomic(const struct coll_lane_owner *) owner;
	_Atomic int owner_busy;
} __attribute__((aligned(64)));

struct cd_host {
	struct zb_config *cfg;
	uint32_t timeout_ms, connect_timeout_ms;
	uint16_t cfg_node;
	unsigned nlanes;
	bool launched;
	bool ctl;                       /* a control thread runs */
	uint32_t raft_hb_ms;            /* its [control] raft_heartbeat_ms */
	_Atomic int closing;            /* cd_close began: peers leave now */
	_Atomic int link_failed;        /* a lane failed on a link gone down */
	struct dp_ring_watch *watch;    /* the ring watched (owner: run, close) */
	struct cd_lane lane[COLL_HOST_MAX_LANES];
};

/* The control thread, as `zbmd run` starts it (run_ctl.c). Weak: run_ctl.o
 * (and control/) is in the zbmd binary only; in test programs that link
 * the dataplane without them these are NULL and no control thread runs. */
extern __typeof__(dp__run_control_host) dp__run_control_host __attribute__((weak));
extern __typeof__(dp__run_ctl_fini) dp__run_ctl_fini __attribute__((weak));
extern __typeof__(dp__run_ctl_log_level) dp__run_ctl_log_level __attribute__((weak));
extern __typeof__(dp__run_ctl_leave_on_stop) dp__run_ctl_leave_on_stop
	__attribute__((weak));
extern __typeof__(dp__run_ctl_node) dp__run_ctl_node __attribute__((weak));

/* Keeps this object in the binary (see the header comment). */
const int coll_dpdk_anchor = 1;

/* coll_comm_args.kick: the owner started a collective on this lane */
static void cd_kick(void *arg)
{
	const struct cd_lane *ln = arg;
	dp_lcore_kick(ln->index);
}

/* The lane's transport declared a peer down (its link went down: link.c;
 * or it acknowledged nothing for peer_timeout_ms): when that node is one of
 * the communicator's ranks, the ring is broken, and the communicator fails
 * now with ZB_ERR_PEER_DOWN on this rank — every survivor whose transport
 * sees it, without waiting for the membership to remove it (cd_on_epoch).
 * Not once the owner closes the host: nodes that finished leave then, and
 * their links go down with them. On the lane's lcore. */
static void cd_peer_down_check(struct cd_lane *ln, const struct tp_stats *ts)
{
	struct tp *tp = dp_transport(ln->index);
	struct tp_peer_info pi;
	char why[200];

	ln->downs_seen = ts->peer_downs;
	if (!ln->downs_armed) {   /* downs before the communicator: not ours */
		ln->downs_armed = true;
		return;
	}
	if (atomic_load_explicit(&ln->host->closing, memory_order_relaxed))
		return;
	for (uint32_t r = 0; r < coll_nranks(ln->comm); r++) {
		uint16_t node = coll_node_of_rank(ln->comm, r);
		if (r == coll_rank(ln->comm) || tp_peer_info(tp, node, &pi) != 0 ||
		    pi.state != 2)
			continue;
		int port = dp__peer_link_down(node);
		if (port >= 0)
			snprintf(why, sizeof(why), "node %u (rank %u) is down: the link of "
				 "port.%d, which reaches it, went down", node, r, port);
		else
			snprintf(why, sizeof(why), "node %u (rank %u) is down: it acknowledged "
				 "nothing for [transport] peer_timeout_ms", node, r);
		if (coll_abort_async(ln->comm, ZB_ERR_PEER_DOWN, why) == 0 && port >= 0)
			atomic_store_explicit(&ln->host->link_failed, 1,
					      memory_order_relaxed);
		return;
	}
}

/* The bursts' and receive writes' cycles on lane `index` so far. */
static uint64_t cd_bursts(unsigned index, const struct dp_lcore_stats *ls,
			  uint64_t *cp, uint64_t *rd)
{
	dp__net_cycles(index, cp, rd);
	return ls->rx_burst_cyc + ls->tx_burst_cyc + *cp + *rd;
}

static unsigned cd_poll(void *arg, uint64_t now_tsc)
{
	struct cd_lane *ln = arg;
	struct dp_lcore_stats ls;
	unsigned ev = 0;
	/* this poll's entry ends the window: the bursts so far (this
	 * iteration's RX included) lie inside it */
	const uint64_t t_in = rte_rdtsc();

	(void)now_tsc;
	/* The window last_tsc .. t_in holds the previous iteration's polls,
	 * TX flush, timers and sleep, and this iteration's RX. If the loop
	 * counted the previous iteration idle, that window's time less its
	 * bursts and receive writes is waiting. */
	if (dp_lcore_stats(ln->index, &ls) == 0) {
		uint64_t cp, rd, b = cd_bursts(ln->index, &ls, &cp, &rd);
		const bool was_idle = ls.idle_iterations != ln->last_idle;
		const uint64_t d = t_in - ln->last_tsc, db = b - ln->w_bursts;
		uint32_t q = atomic_load_explicit(&ln->stats_seq, memory_order_relaxed);

		ZB_ASSERT((q & 1) == 0);
		atomic_store_explicit(&ln->stats_seq, q + 1, memory_order_relaxed);
		atomic_thread_fence(memory_order_release);
		/* the lane is the only writer: plain adds, no locked ones */
#define CD_ADD(f, v) atomic_store_explicit(&ln->f, atomic_load_explicit(&ln->f,   \
			memory_order_relaxed) + (v), memory_order_relaxed)
		if (ln->last_tsc) {
			CD_ADD(loop_cyc, d);
			if (was_idle && d > db + ln->coll_pending)
				CD_ADD(idle_cyc, d - db - ln->coll_pending);
			if (ln->coll_pending)
				CD_ADD(coll_cyc, ln->coll_pending);
		}
#undef CD_ADD
		atomic_store_explicit(&ln->rxb_cyc, ls.rx_burst_cyc, memory_order_relaxed);
		atomic_store_explicit(&ln->txb_cyc, ls.tx_burst_cyc, memory_order_relaxed);
		atomic_store_explicit(&ln->copy_cyc, cp, memory_order_relaxed);
		atomic_store_explicit(&ln->reduce_cyc, rd, memory_order_relaxed);
		atomic_store_explicit(&ln->stats_seq, q + 2, memory_order_release);
		ln->last_idle = ls.idle_iterations;
		ln->w_bursts = b;
		ln->coll_pending = 0;
		ln->last_tsc = t_in;
	}
	const struct tp_stats *ts = dp_transport(ln->index) ?
				    tp_stats(dp_transport(ln->index)) : NULL;
	if (ts) {
#define CD_TP_STORE(f) atomic_store_explicit(&ln->f, ts->f, memory_order_relaxed);
		CD_TP_SUMMED(CD_TP_STORE)
#undef CD_TP_STORE
		atomic_store_explicit(&ln->frames_rx, ts->frames_rx, memory_order_relaxed);
	}

	int st = atomic_load_explicit(&ln->state, memory_order_acquire);
	if (ZB_UNLIKELY(st == LANE_CREATE)) {
		/* the provider's ctx for this lane must be created on it */
		ln->create_rc = coll_comm_create(&ln->args, &ln->comm, ln->err,
						 sizeof(ln->err));
		atomic_store_explicit(&ln->state, ln->create_rc ? LANE_FAILED
				      : LANE_READY, memory_order_release);
		return 1;
	}
	if (st != LANE_READY)
		return 0;
	if (ts && ZB_UNLIKELY(ts->peer_downs != ln->downs_seen || !ln->downs_armed))
		cd_peer_down_check(ln, ts);
	const uint64_t t0 = rte_rdtsc(), b0 = ln->w_bursts;
	if (atomic_load_explicit(&ln->owner, memory_order_relaxed)) {
		/* store busy, then load owner (both seq_cst): cd_own's
		 * hand-back either sees busy or this sees NULL */
		atomic_store(&ln->owner_busy, 1);
		const struct coll_lane_owner *o = atomic_load(&ln->owner);
		if (o) {
			int rc = o->poll(o->arg);
			if (rc > 0)
				ev += (unsigned)rc;
		}
		atomic_store_explicit(&ln->owner_busy, 0, memory_order_release);
	}
	for (uint16_t ch = 0; ch < ln->channels; ch++) {
		int rc = coll_progress_channel(ln->comm, ch);
		if (rc > 0)
			ev += (unsigned)rc;
	}
	if (ev && dp_lcore_stats(ln->index, &ls) == 0) {
		/* without the driver bursts (a full TX buffer flushes inside
		 * tp_send) and receive writes that ran inside: those are
		 * counted as such (coll_host_stats parts are disjoint) */
		uint64_t d = rte_rdtsc() - t0, cp1, rd1;
		uint64_t in = cd_bursts(ln->index, &ls, &cp1, &rd1) - b0;
		ln->coll_pending += d > in ? d - in : 0;
	}
	return ev;
}

/* dp_on_epoch callback, on lane `index`'s lcore right after it applied a
 * view with a new epoch (lock-free, no allocation). The lane's communicator
 * was built on the ring of the config's nodes: when the new view no longer
 * holds one of them that an earlier view held (a node convicted and
 * removed, or one that left), the ring it runs on is gone, and its running
 * and later collectives fail with ZB_ERR_EPOCH on every surviving rank —
 * each survivor applies the same committed view. Views that only add nodes
 * (the cluster forming) leave it alone. */
static void cd_on_epoch(void *arg, unsigned index, uint64_t old_epoch,
			const struct dp_cluster_view *v)
{
	struct cd_host *H = arg;
	uint64_t now = 0, gone, mine = 0;
	char why[200], members[3 * DP_CLUSTER_MAX + 1] = "";
	int off = 0;

	ZB_ASSERT(H != NULL && v != NULL);
	if (index >= H->nlanes)
		return;
	struct cd_lane *ln = &H->lane[index];
	for (uint16_t r = 0; r < v->n_members && r < DP_CLUSTER_MAX; r++)
		if (v->ring[r] < 64) {
			now |= 1ull << v->ring[r];
			if (off >= 0 && (size_t)off < sizeof(members))
				off += snprintf(members + off, sizeof(members) - (size_t)off,
						"%s%u", r ? " " : "", v->ring[r]);
		}
	gone = ln->seen & ~now;
	ln->seen |= now;
	if (atomic_load_explicit(&ln->state, memory_order_acquire) != LANE_READY)
		return;
	for (uint32_t r = 0; r < coll_nranks(ln->comm); r++) {
		uint16_t node = coll_node_of_rank(ln->comm, r);
		if (node < 64)
			mine |= 1ull << node;
	}
	gone &= mine;
	if (!gone)
		return;
	unsigned first = (unsigned)__builtin_ctzll(gone);
	snprintf(why, sizeof(why), "membership epoch changed from %llu to %llu: "
		 "node %u removed%s (members now: %s)", (unsigned long long)old_epoch,
		 (unsigned long long)v->epoch, first,
		 (gone & (gone - 1)) ? " (and others)" : "", members);
	(void)coll_abort_async(ln->comm, ZB_ERR_EPOCH, why);
}

/* Did a lane's communicator fail (as its owner saw it)? Owner thread. */
static bool cd_failed(const struct cd_host *H)
{
	for (unsigned i = 0; i < H->nlanes; i++)
		if (H->lane[i].comm && coll_error(H->lane[i].comm)[0])
			return true;
	return false;
}

static uint64_t cd_frames_rx(const struct cd_host *H)
{
	uint64_t n = 0;
	for (unsigned i = 0; i < H->nlanes; i++)
		n += atomic_load_explicit(&H->lane[i].frames_rx, memory_order_relaxed);
	return n;
}

/* The last ack problem (TCP's TIME_WAIT): this node's collectives are
 * complete, so it has every byte its peers sent it, but the ack of the last
 * of them may have been lost; the peer then retransmits, and a node that
 * has already stopped its loops never answers — the peer's collective
 * times out (seen: 2 runs in 79 of 3 memif nodes with 2 % injected loss,
 * rank 2 timed out on its send to rank 0, which had exited). So the loops
 * keep running (duplicates are re-acknowledged) until no frame has come
 * for CD_LINGER_QUIET_MS, at most CD_LINGER_MAX_MS. */
#define CD_LINGER_QUIET_MS 100u
#define CD_LINGER_MAX_MS 2000u
static void cd_linger(const struct cd_host *H)
{
	uint64_t seen = cd_frames_rx(H);
	uint32_t quiet = 0;

	for (uint32_t t = 0; t < CD_LINGER_MAX_MS && quiet < CD_LINGER_QUIET_MS;
	     t += 5) {
		usleep(5000);
		uint64_t now = cd_frames_rx(H);
		quiet = now == seen ? quiet + 5 : 0;
		seen = now;
	}
}

static int cd_own(void *h, unsigned lane, const struct coll_lane_owner *o);

static void cd_close(void *h)
{
	struct cd_host *H = h;

	if (!H)
		return;
	atomic_store(&H->closing, 1);
	dp__ring_watch_stop(H->watch);   /* nodes that finished leave now */
	H->watch = NULL;
	if (H->launched)
		dp_node_leaving();   /* the others leave too: not a failure */
	for (unsigned i = 0; H->launched && i < H->nlanes; i++)
		(void)cd_own(H, i, NULL);   /* this thread owns them all again */
	if (H->launched && H->lane[0].comm && !coll_error(H->lane[0].comm)[0] &&
	    coll_nranks(H->lane[0].comm) > 1) {
		/* Nodes that finished together would close their memif links at
		 * the same moment, and DPDK 22.11's memif driver can crash in the
		 * interrupt thread when the peer's disconnect arrives while its
		 * own ports are being closed (seen here: SIGSEGV in
		 * eal-intr-thread during dp_node_fini). Leave in rank order,
		 * the loops still running (so acks still flow), once no peer
		 * needs an ack from this node any more. */
		cd_linger(H);
		usleep(250000u * coll_rank(H->lane[0].comm));
	}
	if (H->launched && H->ctl && cd_failed(H) &&
	    !atomic_load_explicit(&H->link_failed, memory_order_relaxed)) {
		/* No graceful leave (see cd_open): if this node is the Raft
		 * leader that just committed the epoch which failed the run,
		 * the followers learn the commit from its next heartbeats —
		 * stay that long, loops and control thread running. Not
		 * when a link went down: the nodes on the other links of
		 * that node see theirs go down too. */
		uint32_t hb = H->raft_hb_ms;
		usleep(1000u * (hb * 3 < 50 ? 50 : hb * 3 > 1000 ? 1000 : hb * 3));
	}
	if (H->launched) {
		dp_node_request_stop();
		dp_node_stop();
		if (dp__run_ctl_fini)
			dp__run_ctl_fini();   /* the control thread has ended */
	}
	/* Failed communicators too: the provider's fini makes the transport
	 * drop its payload references first (net_dpdk.c, "Lifetime"). */
	for (unsigned i = 0; i < H->nlanes; i++)
		if (H->lane[i].comm)
			coll_comm_destroy(H->lane[i].comm);
	dp_node_fini();
	free(H);
}

static int cd_open(const struct coll_comm_args *a, void **out, char *err,
		   size_t errlen)
{
	struct cd_host *H;
	struct dp_err derr;
	int rc;

	ZB_ASSERT(a != NULL && a->cfg != NULL);
	ZB_ASSERT(out != NULL && err != NULL);
	H = calloc(1, sizeof(*H));
	if (!H)
		return -ENOMEM;
	rc = dp_node_init(a->cfg, &derr);
	if (rc < 0) {
		snprintf(err, errlen, "starting the dataplane: %s", derr.msg);
		free(H);
		return rc;
	}
	H->nlanes = dp_lcore_count();
	if (H->nlanes > COLL_HOST_MAX_LANES)
		H->nlanes = COLL_HOST_MAX_LANES;
	if (!dp_transport(0)) {
		snprintf(err, errlen, "the dataplane has no transport (port 0 needs "
			 "an ip)");
		rc = ZB_ERR_UNAVAILABLE;
		goto fail;
	}
	/* The control thread (Raft membership) when the config has one, as
	 * `zbmd run` starts it; each lane then fails its communicator on an
	 * epoch that removes one of its nodes (cd_on_epoch). */
	if (dp__run_control_host) {
		char what[1024];
		if (dp__run_ctl_log_level)   /* warnings only: keep the table clean */
			dp__run_ctl_log_level(CTL_LOG_WARN);
		rc = dp__run_control_host(a->cfg, NULL, stderr, &H->ctl, what,
					  sizeof(what), err, errlen);
		if (rc < 0)
			goto fail;
		if (H->ctl) {
			fprintf(stderr, "zbmd: node %u: control: %s\n", a->cfg->node.id, what);
			/* the benchmark's nodes end together: no graceful leave
			 * (it would change the epoch under peers still finishing
			 * their last collective, and delay every exit) */
			dp__run_ctl_leave_on_stop(false);
			H->raft_hb_ms = a->cfg->control.raft_heartbeat_ms;
			if ((rc = dp_on_epoch(cd_on_epoch, H)) < 0) {
				snprintf(err, errlen, "dp_on_epoch: %s", zb_strerror(rc));
				goto fail;
			}
		}
	}
	/* The dpdk provider connects at once: nothing waits for the other nodes
	 * to start. The communicators begin with the connect timeout as their
	 * no-progress bound, run() starts with a barrier (the rendezvous), and
	 * then the bound drops to [coll] timeout_ms. */
	H->cfg_node = a->cfg->node.id;
	H->timeout_ms = a->timeout_ms ? a->timeout_ms
			: (a->cfg->coll.timeout_ms ? a->cfg->coll.timeout_ms : 5000);
	H->connect_timeout_ms = a->connect_timeout_ms ? a->connect_timeout_ms
				: COLL_CONNECT_TIMEOUT_MS;
	unsigned total = a->channels ? a->channels
			 : (a->cfg->coll.channels ? a->cfg->coll.channels : 1);
	for (unsigned i = 0; i < H->nlanes; i++) {
		struct cd_lane *ln = &H->lane[i];
		ln->index = i;
		ln->host = H;
		ln->args = *a;
		ln->args.threaded_channels = true;
		ln->args.kick = cd_kick;
		ln->args.kick_arg = ln;
		ln->args.timeout_ms = H->connect_timeout_ms;
		ln->channels = (uint16_t)(H->nlanes == 1 ? total
					  : (total / H->nlanes ? total / H->nlanes : 1));
		ln->args.channels = ln->channels;
		if ((rc = dp_register_poller(i, cd_poll, ln)) < 0) {
			snprintf(err, errlen, "registering the lane %u poller: %s", i,
				 zb_strerror(rc));
			goto fail;
		}
	}
	/* lane 0: here, before the loops run (the provider takes lane 0) */
	rc = coll_comm_create(&H->lane[0].args, &H->lane[0].comm, err, errlen);
	if (rc < 0)
		goto fail;
	atomic_store_explicit(&H->lane[0].state, LANE_READY, memory_order_release);
	if ((rc = dp_node_launch(&derr)) < 0) {
		snprintf(err, errlen, "launching the lcores: %s", derr.msg);
		goto fail;
	}
	H->launched = true;
	for (unsigned i = 1; i < H->nlanes; i++)
		atomic_store_explicit(&H->lane[i].state, LANE_CREATE,
				      memory_order_release);
	for (unsigned i = 1; i < H->nlanes; i++) {
		struct cd_lane *ln = &H->lane[i];
		int st;
		while ((st = atomic_load_explicit(&ln->state, memory_order_acquire)) ==
		       LANE_CREATE)
			usleep(200);
		if (st == LANE_FAILED) {
			snprintf(err, errlen, "lane %u: %s", i, ln->err);
			rc = ln->create_rc;
			goto fail;
		}
	}
	*out = H;
	return 0;
fail:
	if (!H->launched && dp__run_ctl_fini) {
		dp_node_stop();       /* a control thread a failed launch started */
		dp__run_ctl_fini();   /* metrics collector, control node */
	}
	cd_close(H);
	return rc;
}

static unsigned cd_comms(void *h, struct coll_comm **out, unsigned max)
{
	struct cd_host *H = h;
	unsigned n = H->nlanes < max ? H->nlanes : max;

	ZB_ASSERT(out != NULL);
	for (unsigned i = 0; i < n; i++)
		out[i] = H->lane[i].comm;
	return n;
}

struct cd_thread {
	struct cd_host *H;
	int (*fn)(void *);
	void *arg;
	int rc;
};

/* Every node's lanes are up: a barrier on each lane's communicator under the
 * connect timeout, then the configured bound. The ring is watched from the
 * control plane (ring_watch.c) from before the barrier until cd_close. 0 or
 * the barrier's error. */
static int cd_rendezvous(struct cd_host *H)
{
	struct coll_comm *comms[COLL_HOST_MAX_LANES];
	int rc = 0;

	for (unsigned i = 0; i < H->nlanes; i++)
		comms[i] = H->lane[i].comm;
	if (H->ctl && dp__run_ctl_node && !H->watch)
		H->watch = dp__ring_watch_start(dp__run_ctl_node(), comms, H->nlanes,
						H->cfg_node);
	for (unsigned i = 0; i < H->nlanes && rc == 0; i++) {
		rc = coll_barrier(H->lane[i].comm);
		if (rc == 0)
			coll_set_timeout(H->lane[i].comm, H->timeout_ms);
	}
	if (rc == 0) {
		dp__ring_watch_joined(H->watch);
	} else {
		dp__ring_watch_stop(H->watch);
		H->watch = NULL;
	}
	return rc;
}

static int cd_call(struct cd_thread *t)
{
	int rc = cd_rendezvous(t->H);

	if (rc < 0) {
		dp__join_failed(t->H->cfg_node, t->H->connect_timeout_ms, rc,
				coll_error(t->H->lane[0].comm));
		return 1;
	}
	return t->fn(t->arg);
}

static void *cd_thread_main(void *p)
{
	struct cd_thread *t = p;

	t->rc = cd_call(t);
	dp_node_request_stop();   /* dp_node_wait() on the main thread returns */
	return NULL;
}

static int cd_run(void *h, int (*fn)(void *), void *arg)
{
	struct cd_thread t = {.H = h, .fn = fn, .arg = arg, .rc = 1};

	ZB_ASSERT(h != NULL && fn != NULL);
	if (!dp_main_polls())
		return cd_call(&t);
	/* The main lcore runs the loop: fn gets a thread of its own. */
	pthread_t tid;
	if (pthread_create(&tid, NULL, cd_thread_main, &t) != 0)
		return 1;
	dp_node_wait();
	pthread_join(tid, NULL);
	return t.rc;
}

/* coll_host_ops.own: lane `lane`'s loop owns its communicator while o is
 * set (it polls o first on every iteration); NULL takes it back, returning
 * once the loop is out of o->poll and will not call it again. */
static int cd_own(void *h, unsigned lane, const struct coll_lane_owner *o)
{
	struct cd_host *H = h;

	if (!H || lane >= H->nlanes || !H->launched)
		return -EINVAL;
	struct cd_lane *ln = &H->lane[lane];
	if (o) {
		if (!o->poll)
			return -EINVAL;
		const struct coll_lane_owner *none = NULL;
		if (!atomic_compare_exchange_strong(&ln->owner, &none, o))
			return -EBUSY;
		dp_lcore_kick(ln->index);
		return 0;
	}
	atomic_store(&ln->owner, NULL);   /* seq_cst, then load busy */
	while (atomic_load(&ln->owner_busy))
		sched_yield();
	return 0;
}

static void cd_wake(void *h, unsigned lane)
{
	struct cd_host *H = h;

	if (H && lane < H->nlanes)
		dp_lcore_kick(H->lane[lane].index);
}

static void cd_stats(void *h, struct coll_host_stats *out)
{
	struct cd_host *H = h;
	double ns_per_cyc = 1e9 / (double)rte_get_tsc_hz();

	memset(out, 0, sizeof(*out));
	out->lanes = H->nlanes;
	for (unsigned i = 0; i < H->nlanes; i++) {
		struct cd_lane *ln = &H->lane[i];
		struct dp_lcore_stats ls;
		uint64_t c[7];
		uint32_t q0, q1;
		/* one whole publication (the lane writes for a few ns) */
		do {
			while ((q0 = atomic_load_explicit(&ln->stats_seq,
							  memory_order_acquire)) & 1)
				sched_yield();
			c[0] = atomic_load_explicit(&ln->coll_cyc, memory_order_relaxed);
			c[1] = atomic_load_explicit(&ln->idle_cyc, memory_order_relaxed);
			c[2] = atomic_load_explicit(&ln->loop_cyc, memory_order_relaxed);
			c[3] = atomic_load_explicit(&ln->rxb_cyc, memory_order_relaxed);
			c[4] = atomic_load_explicit(&ln->txb_cyc, memory_order_relaxed);
			c[5] = atomic_load_explicit(&ln->copy_cyc, memory_order_relaxed);
			c[6] = atomic_load_explicit(&ln->reduce_cyc, memory_order_relaxed);
			atomic_thread_fence(memory_order_acquire);
			q1 = atomic_load_explicit(&ln->stats_seq, memory_order_relaxed);
		} while (q0 != q1);
#define CD_NS(field, i) out->field += (uint64_t)(ns_per_cyc * (double)c[i])
		CD_NS(coll_ns, 0);
		CD_NS(idle_ns, 1);
		CD_NS(loop_ns, 2);
		CD_NS(rx_burst_ns, 3);
		CD_NS(tx_burst_ns, 4);
		CD_NS(recv_copy_ns, 5);
		CD_NS(recv_reduce_ns, 6);
#undef CD_NS
#define CD_TP_SUM(f) out->f += atomic_load_explicit(&ln->f, memory_order_relaxed);
		CD_TP_SUMMED(CD_TP_SUM)
#undef CD_TP_SUM
		if (dp_lcore_stats(ln->index, &ls) == 0) {
			out->rx_packets += ls.rx_packets;
			out->tx_packets += ls.tx_packets;
		}
	}
}

static void cd_describe(void *h, char *buf, size_t len)
{
	struct cd_host *H = h;
	uint8_t mac[6];
	uint32_t ip;

	ZB_ASSERT(buf != NULL && len > 0);
	int n = snprintf(buf, len, "dataplane lanes %u (one per lcore), ports %u",
			 H->nlanes, (unsigned)dp_port_count());
	if (n > 0 && (size_t)n < len && dp_port_addr(0, mac, &ip) == 0)
		snprintf(buf + n, len - (size_t)n, " (port 0 %u.%u.%u.%u)",
			 ((uint8_t *)&ip)[0], ((uint8_t *)&ip)[1],
			 ((uint8_t *)&ip)[2], ((uint8_t *)&ip)[3]);
}

static const struct coll_host_ops cd_host_ops = {
	.provider = "dpdk",
	.open = cd_open,
	.comms = cd_comms,
	.run = cd_run,
	.stats = cd_stats,
	.describe = cd_describe,
	.close = cd_close,
	.own = cd_own,
	.wake = cd_wake,
};

__attribute__((constructor)) static void cd_register(void)
{
	(void)coll_host_register(&cd_host_ops);
}
