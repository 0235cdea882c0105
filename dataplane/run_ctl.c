/* dataplane/run_ctl.c — the node process's glue between the dataplane and
 * the control plane (see run_ctl.h). Linked only into the zbmd binary.
 *
 * Threads:
 *  - each dataplane lcore runs lane_poll() (a dp poller): it applies the
 *    views the control thread queued on its SPSC ring (dp_cluster_apply) and
 *    every SNAP_US copies its transport lane's counters into its snapshot
 *    (relaxed atomic stores; no lock, no syscall, no allocation) and
 *    reports peers its transport declared down (CTL_REQ_PEER_DOWN on the
 *    control node's MPSC command ring);
 *  - the control thread (the dataplane's control hook) runs the control
 *    node's loop;
 *  - a scrape (the metrics HTTP thread) runs collect(): it reads the lcore
 *    counters, the snapshots, the applied views (all lock-free) and the
 *    ports' ethdev counters, and sums the per-lcore rows.
 */
#include "internal.h"
#include "run_ctl.h"

#include <inttypes.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include <rte_cycles.h>

#include "zbmd/metrics.h"
#include "zbmd/transport.h"
#include "zbmd/wire.h"

#if __has_include("zbmd/actors.h")
#include "zbmd/actors.h"
#define RUN_HAS_ACTORS 1
#endif

/* The "rdma" collective host (run_rdma.c) comes with the control glue:
 * this reference pulls it into every binary that links run_ctl.o. */
extern const int rdma_host_anchor;
__attribute__((used)) static const int *const pull_rdma_host = &rdma_host_anchor;

#define SNAP_US 5000    /* transport counter snapshot period per lane */

static_assert(sizeof(struct tp_stats) % sizeof(uint64_t) == 0,
	      "tp_stats is all 64-bit counters");
#define TP_WORDS (sizeof(struct tp_stats) / sizeof(uint64_t))

struct lane {
	unsigned index;
	struct ctl_ring *events;      /* set before launch; NULL: no control */
	struct ctl_ring *commands;    /* to the control thread (MPSC) */
	bool down[CFG_MAX_NODES];     /* transport said peer down (reported) */
	uint64_t next_snap_tsc;
	uint64_t snap_tsc;
	uint64_t snap[TP_WORDS];      /* struct tp_stats, relaxed atomics */
} ZB_ALIGNED_CL;

static struct {
	const struct zb_config *cfg;
	struct act_runtime *actors;
	struct lane lanes[CFG_MAX_LCORES];
	unsigned n_lanes;
	int collector;
	struct ctl_node *ctl;
	struct dp_control_ops ops;
	bool no_leave;                /* stop without leaving the cluster */
} g = {.collector = -1};

/* ---- the lcore side --------------------------------------------------------- */

static void view_of_event(const struct ctl_event *ev, struct dp_cluster_view *v)
{
	memset(v, 0, sizeof(*v));
	v->epoch = ev->epoch;
	v->leader = ev->leader;
	v->n_members = ev->n_members <= DP_CLUSTER_MAX ? ev->n_members : DP_CLUSTER_MAX;
	memcpy(v->ring, ev->ring, sizeof(uint16_t) * v->n_members);
}

/* A peer the transport declared down (unacked for peer_timeout_ms) is
 * reported to the control thread once per down period: it convicts the
 * peer unless a heartbeat arrives within two heartbeat intervals. */
static void report_down(struct lane *l, struct tp *tp)
{
	const struct zb_config *cfg = g.cfg;
	struct tp_peer_info pi;

	for (uint16_t id = 0; id < CFG_MAX_NODES; id++) {
		if (!cfg->peers[id].present || id == cfg->node.id ||
		    tp_peer_info(tp, id, &pi) != 0)
			continue;
		bool down = pi.state == 2;
		if (down && !l->down[id]) {
			struct ctl_command c = {.type = CTL_REQ_PEER_DOWN, .node = id};
			if (ctl_ring_enqueue(l->commands, &c) != 0)
				continue;   /* full: try again next period */
		}
		l->down[id] = down;
	}
}

static unsigned lane_poll(void *arg, uint64_t now_tsc)
{
	struct lane *l = arg;
	struct ctl_event ev;
	unsigned work = 0;

	ZB_DASSERT(l != NULL && l->index < dp_lcore_count());
	while (l->events && ctl_ring_dequeue(l->events, &ev) == 0) {
		struct dp_cluster_view v;
		view_of_event(&ev, &v);
		dp_cluster_apply(l->index, &v, now_tsc);
		work++;
	}
	if (now_tsc >= l->next_snap_tsc) {
		struct tp *tp = dp_transport(l->index);
		if (tp) {
			const uint64_t *src = (const uint64_t *)tp_stats(tp);
			for (size_t i = 0; i < TP_WORDS; i++)
				__atomic_store_n(&l->snap[i], src[i], __ATOMIC_RELAXED);
			if (l->commands)
				report_down(l, tp);
		}
		__atomic_store_n(&l->snap_tsc, now_tsc, __ATOMIC_RELAXED);
		l->next_snap_tsc = now_tsc + rte_get_tsc_hz() / 1000000 * SNAP_US;
	}
	return work;   /* snapshots are not work: they must not defeat idling */
}

/* ---- the scrape side ---------------------------------------------------------- */

static const struct {
	const char *name, *help;
	size_t off;
} lcore_fields[] = {
#define F(f, h) {"zbmd_dp_" #f "_total", h, offsetof(struct dp_lcore_stats, f)}
	F(iterations, "Polling loop iterations (all lcores)"),
	F(idle_iterations, "Loop iterations that found no work"),
	F(sleeps, "Adaptive idle policy sleeps"),
	F(kicked, "Adaptive sleeps ended early by work from another thread"),
	F(rx_packets, "Frames received by the loops"),
	F(rx_bytes, "Bytes received by the loops"),
	F(tx_packets, "Frames queued for transmission"),
	F(tx_bytes, "Bytes queued for transmission"),
	F(tx_drops, "Frames dropped on TX: no TX queue for them"),
	F(tx_full, "Frames refused because the TX ring was full (the sender retries)"),
	F(rx_drops, "Frames dropped: not ours, malformed or no handler"),
	F(arp_replies, "ARP requests for our addresses answered"),
	F(icmp_replies, "ICMP echo requests answered"),
	F(arp_requests, "ARP requests sent for peers"),
	F(arp_learned, "Peer MACs learnt from ARP"),
	F(udp_rx, "zbmd UDP frames handed to the rx hook"),
	F(lane_fwd, "zbmd frames passed to another lane's lcore"),
	F(lane_drops, "zbmd frames dropped: the lane's inbox was full"),
	F(zc_frames, "Transport frames sent with the payload attached"),
	F(poll_events, "Work done by pollers, the actor worker and timers"),
#undef F
};

static void emit(struct zb_metrics_out *out, const char *name,
		 enum zb_metric_type type, const char *help, const char *labels,
		 double v)
{
	zb_metrics_family(out, name, type, help);
	zb_metrics_sample(out, name, labels, v);
}

static void collect_lcores(struct zb_metrics_out *out, const char *node)
{
	struct dp_lcore_stats sum, s;
	char l[ZB_METRICS_LABELS_MAX];
	unsigned n = dp_lcore_count();

	memset(&sum, 0, sizeof(sum));
	for (unsigned i = 0; i < n; i++) {
		if (dp_lcore_stats(i, &s) != 0)
			continue;
		const uint64_t *a = (const uint64_t *)&s;
		uint64_t *b = (uint64_t *)&sum;
		for (size_t k = 0; k < sizeof(s) / sizeof(uint64_t); k++)
			b[k] += a[k];
	}
	emit(out, "zbmd_dp_lcores", ZB_METRIC_GAUGE, "Dataplane lcores polling",
	     node, n);
	for (size_t f = 0; f < ZB_ARRAY_LEN(lcore_fields); f++) {
		uint64_t v;
		memcpy(&v, (const char *)&sum + lcore_fields[f].off, sizeof(v));
		emit(out, lcore_fields[f].name, ZB_METRIC_COUNTER,
		     lcore_fields[f].help, node, (double)v);
	}
	/* time inside the port drivers' bursts (memif: the PMD's copies) */
	emit(out, "zbmd_dp_rx_burst_seconds_total", ZB_METRIC_COUNTER,
	     "Seconds the loops spent in driver RX bursts that returned frames",
	     node, (double)sum.rx_burst_cyc / (double)rte_get_tsc_hz());
	emit(out, "zbmd_dp_tx_burst_seconds_total", ZB_METRIC_COUNTER,
	     "Seconds the loops spent in driver TX bursts", node,
	     (double)sum.tx_burst_cyc / (double)rte_get_tsc_hz());
	/* per-lcore rows where the lcore matters: loop health, epoch applied */
	zb_metrics_family(out, "zbmd_dp_lcore_iterations_total", ZB_METRIC_COUNTER,
			  "Polling loop iterations per lcore");
	for (unsigned i = 0; i < n; i++) {
		if (dp_lcore_stats(i, &s) != 0)
			continue;
		snprintf(l, sizeof(l), "%s,lcore=\"%u\"", node, dp_lcore_id_of(i));
		zb_metrics_sample(out, "zbmd_dp_lcore_iterations_total", l,
				  (double)s.iterations);
	}
	zb_metrics_family(out, "zbmd_dp_epoch", ZB_METRIC_GAUGE,
			  "Membership epoch the lcore has applied (0: none)");
	for (unsigned i = 0; i < n; i++) {
		snprintf(l, sizeof(l), "%s,lcore=\"%u\"", node, dp_lcore_id_of(i));
		zb_metrics_sample(out, "zbmd_dp_epoch", l, (double)dp_cluster_epoch(i));
	}
	zb_metrics_family(out, "zbmd_dp_views_applied_total", ZB_METRIC_COUNTER,
			  "Cluster views (epoch, leader, ring) the lcore applied");
	for (unsigned i = 0; i < n; i++) {
		snprintf(l, sizeof(l), "%s,lcore=\"%u\"", node, dp_lcore_id_of(i));
		zb_metrics_sample(out, "zbmd_dp_views_applied_total", l,
				  (double)dp_cluster_changes(i));
	}
	struct dp_cluster_view v;
	if (n > 0 && dp_cluster_view(0, &v) == 0) {
		zb_metrics_family(out, "zbmd_dp_ring_position", ZB_METRIC_GAUGE,
				  "Position of each node in the ring order lcore 0 applied");
		for (unsigned r = 0; r < v.n_members; r++) {
			snprintf(l, sizeof(l), "%s,member=\"%u\"", node, v.ring[r]);
			zb_metrics_sample(out, "zbmd_dp_ring_position", l, r);
		}
	}
}

static void collect_ports(struct zb_metrics_out *out, const char *node)
{
	static const char *const names[] = {
		"zbmd_port_rx_packets_total", "zbmd_port_tx_packets_total",
		"zbmd_port_rx_bytes_total", "zbmd_port_tx_bytes_total",
		"zbmd_port_rx_missed_total", "zbmd_port_rx_errors_total",
		"zbmd_port_tx_errors_total", "zbmd_port_rx_nombuf_total",
	};
	static const char *const helps[] = {
		"Frames the port received (ethdev ipackets)",
		"Frames the port sent (ethdev opackets)",
		"Bytes the port received", "Bytes the port sent",
		"Frames the port dropped: RX queue full (imissed)",
		"Erroneous received frames (ierrors)",
		"Failed transmissions (oerrors)",
		"RX mbuf allocation failures",
	};
	struct rte_eth_stats st[CFG_MAX_PORTS];
	char l[ZB_METRICS_LABELS_MAX];
	const struct dp_node *n = &dp__node;

	for (uint16_t k = 0; k < n->nb_ports; k++) {
		memset(&st[k], 0, sizeof(st[k]));
		if (n->ports[k].started)
			rte_eth_stats_get(n->ports[k].port_id, &st[k]);
	}
	for (size_t f = 0; f < ZB_ARRAY_LEN(names); f++) {
		zb_metrics_family(out, names[f], ZB_METRIC_COUNTER, helps[f]);
		for (uint16_t k = 0; k < n->nb_ports; k++) {
			const uint64_t v[] = {st[k].ipackets, st[k].opackets,
					      st[k].ibytes, st[k].obytes,
					      st[k].imissed, st[k].ierrors,
					      st[k].oerrors, st[k].rx_nombuf};
			snprintf(l, sizeof(l), "%s,port=\"%u\"", node, n->ports[k].cfg_index);
			zb_metrics_sample(out, names[f], l, (double)v[f]);
		}
	}
}

struct tp_emit {
	struct zb_metrics_out *out;
	const char *node;
};

static void tp_one(void *arg, const char *name, uint64_t value)
{
	struct tp_emit *e = arg;
	char fam[96], help[128];

	if (strncmp(name, "bad_", 4) == 0 && strcmp(name, "bad_frames") != 0)
		return;   /* per reason below */
	snprintf(fam, sizeof(fam), "zbmd_transport_%s_total", name);
	snprintf(help, sizeof(help), "Reliable transport: %s (sum over lanes)", name);
	emit(e->out, fam, ZB_METRIC_COUNTER, help, e->node, (double)value);
}

static void collect_transport(struct zb_metrics_out *out, const char *node)
{
	struct tp_stats sum;
	uint64_t *b = (uint64_t *)&sum;
	char l[ZB_METRICS_LABELS_MAX];
	unsigned lanes = 0;

	memset(&sum, 0, sizeof(sum));
	for (unsigned i = 0; i < g.n_lanes; i++) {
		if (!dp_transport(i))
			continue;
		lanes++;
		for (size_t k = 0; k < TP_WORDS; k++)
			b[k] += __atomic_load_n(&g.lanes[i].snap[k], __ATOMIC_RELAXED);
	}
	emit(out, "zbmd_transport_lanes", ZB_METRIC_GAUGE,
	     "Reliable transport instances (one per lcore)", node, lanes);
	if (!lanes)
		return;
	struct tp_emit e = {out, node};
	tp_stats_foreach(&sum, tp_one, &e);
	zb_metrics_family(out, "zbmd_transport_bad_frames_by_reason_total",
			  ZB_METRIC_COUNTER, "Frames the transport refused, by reason");
	for (int r = 1; r < WIRE_REASON_COUNT; r++) {
		snprintf(l, sizeof(l), "%s,reason=\"%s\"", node,
			 wire_reason_name((enum wire_reason)r));
		zb_metrics_sample(out, "zbmd_transport_bad_frames_by_reason_total", l,
				  (double)sum.bad[r]);
	}
}

static void collect_actors(struct zb_metrics_out *out, const char *node)
{
#ifdef RUN_HAS_ACTORS
	struct act_stats s;
	if (!g.actors)
		return;
	act_get_stats(g.actors, &s);
	emit(out, "zbmd_actors_live", ZB_METRIC_GAUGE, "Actors alive", node,
	     s.actors_live);
	emit(out, "zbmd_actors_messages_total", ZB_METRIC_COUNTER,
	     "Messages handled by actors", node, (double)s.messages);
	emit(out, "zbmd_actors_messages_in_use", ZB_METRIC_GAUGE,
	     "Messages queued in mailboxes, in flight or held (all mailboxes' depth, approx)",
	     node, (double)s.msgs_in_use);
	emit(out, "zbmd_actors_restarts_total", ZB_METRIC_COUNTER,
	     "Children restarted by supervisors", node, (double)s.restarts);
	emit(out, "zbmd_actors_sends_total", ZB_METRIC_COUNTER,
	     "Messages sent to actors", node, (double)s.sends);
	emit(out, "zbmd_actors_mailbox_full_total", ZB_METRIC_COUNTER,
	     "Sends refused: the mailbox was full", node, (double)s.send_full);
	emit(out, "zbmd_actors_send_stale_total", ZB_METRIC_COUNTER,
	     "Sends to actors that no longer exist", node, (double)s.send_stale);
	emit(out, "zbmd_actors_preemptions_total", ZB_METRIC_COUNTER,
	     "Actor runs ended by the reductions budget", node, (double)s.preemptions);
	emit(out, "zbmd_actors_steals_total", ZB_METRIC_COUNTER,
	     "Actors moved between workers by stealing", node, (double)s.steals);
	emit(out, "zbmd_actors_timers_fired_total", ZB_METRIC_COUNTER,
	     "Actor timers fired", node, (double)s.timers_fired);
	emit(out, "zbmd_actors_timers_dropped_total", ZB_METRIC_COUNTER,
	     "Actor timers dropped (no slot)", node, (double)s.timers_dropped);
	emit(out, "zbmd_actors_messages_free", ZB_METRIC_GAUGE,
	     "Messages free in the pools", node, s.msgs_free);
#else
	(void)out;
	(void)node;
#endif
}

static void collect(void *arg, struct zb_metrics_out *out)
{
	char node[32];
	(void)arg;

	ZB_ASSERT(out != NULL && g.cfg != NULL);
	snprintf(node, sizeof(node), "node=\"%u\"", g.cfg->node.id);
	collect_lcores(out, node);
	collect_ports(out, node);
	collect_transport(out, node);
	collect_actors(out, node);
}

/* ---- set-up ------------------------------------------------------------------- */

bool dp__run_ctl_wanted(const struct zb_config *cfg, char *why, size_t len)
{
	ZB_ASSERT(cfg != NULL && why != NULL);
	const char *listen = cfg->control.listen;
	bool wildcard = strncmp(listen, "0.0.0.0:", 8) == 0;
	const struct cfg_peer *self = cfg->node.id < CFG_MAX_NODES ?
				      &cfg->peers[cfg->node.id] : NULL;
	bool peer_ctl = self && self->present && self->control[0];

	switch (cfg->control.enabled) {
	case CFG_CONTROL_OFF:
		snprintf(why, len, "[control] enabled = off");
		return false;
	case CFG_CONTROL_ON:
		snprintf(why, len, "[control] enabled = on");
		return true;
	default:
		break;
	}
	if (!wildcard) {
		snprintf(why, len, "[control] listen = %s", listen);
		return true;
	}
	if (peer_ctl) {
		snprintf(why, len, "[peer.%u] control = %s", cfg->node.id, self->control);
		return true;
	}
	snprintf(why, len, "no control address for this node ([control] listen is "
		 "the wildcard %s and there is no [peer.%u] control; set one, or "
		 "[control] enabled = on)", listen, cfg->node.id);
	return false;
}

int dp__run_metrics_init(const struct zb_config *cfg, struct act_runtime *actors)
{
	ZB_ASSERT(cfg != NULL);
	ZB_ASSERT(g.collector < 0);
	g.cfg = cfg;
	g.actors = actors;
	g.n_lanes = dp_lcore_count();
	for (unsigned i = 0; i < g.n_lanes; i++) {
		g.lanes[i].index = i;
		int rc = dp_register_poller(i, lane_poll, &g.lanes[i]);
		if (rc)
			return rc;
	}
	int h = zb_metrics_add_collector(collect, NULL);
	if (h < 0)
		return h;
	g.collector = h;
	return 0;
}

static int ops_run(void *arg)
{
	return ctl_node_run(arg);
}

static void ops_stop(void *arg)
{
	ctl_node_request_stop(arg, !g.no_leave);
}

void dp__run_ctl_leave_on_stop(bool leave)
{
	g.no_leave = !leave;
}

int dp__run_ctl_init(const struct zb_config *cfg, const struct ctl_opts *opts,
		     char *err, size_t errlen)
{
	struct ctl_opts o = *opts;
	ZB_ASSERT(cfg != NULL && opts != NULL);
	ZB_ASSERT(g.ctl == NULL);
	o.event_consumers = dp_lcore_count();
	int rc = ctl_node_create(cfg, &o, &g.ctl, err, errlen);
	if (rc)
		return rc;
	for (unsigned i = 0; i < g.n_lanes && i < o.event_consumers; i++) {
		g.lanes[i].events = ctl_node_events(g.ctl, i);
		g.lanes[i].commands = ctl_node_commands(g.ctl);
	}
	g.ops.run = ops_run;
	g.ops.stop = ops_stop;
	rc = dp_set_control_hook(&g.ops, g.ctl);
	if (rc) {
		snprintf(err, errlen, "control hook: %s", zb_strerror(rc));
		for (unsigned i = 0; i < g.n_lanes; i++)
			g.lanes[i].events = g.lanes[i].commands = NULL;
		ctl_node_destroy(g.ctl);
		g.ctl = NULL;
	}
	return rc;
}

/* The control thread's log lines (any thread): one line each, with time. */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static int ctl_log_max = CTL_LOG_INFO;

void dp__run_ctl_log_level(int max_level)
{
	ctl_log_max = max_level;
}

static void ctl_log(void *arg, int level, const char *msg)
{
	FILE *out = arg;
	struct timespec ts;

	ZB_ASSERT(out != NULL && msg != NULL);
	if (level > ctl_log_max)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	pthread_mutex_lock(&log_lock);
	fprintf(out, "%ld.%03ld %s %s\n", (long)ts.tv_sec, ts.tv_nsec / 1000000,
		level <= CTL_LOG_ERR ? "error" : level <= CTL_LOG_WARN ? "warn" : "info",
		msg);
	fflush(out);
	pthread_mutex_unlock(&log_lock);
}

int dp__run_control_host(const struct zb_config *cfg, struct act_runtime *actors,
			 FILE *log, bool *started, char *what, size_t whatlen,
			 char *err, size_t errlen)
{
	char why[384], cerr[512] = "";

	ZB_ASSERT(cfg != NULL && started != NULL);
	ZB_ASSERT(what != NULL && err != NULL);
	*started = false;
	bool want = dp__run_ctl_wanted(cfg, why, sizeof(why));
	int rc = dp__run_metrics_init(cfg, actors);
	if (rc) {
		snprintf(err, errlen, "dataplane metrics: %s", zb_strerror(rc));
		return rc;
	}
	if (!want) {
		snprintf(what, whatlen, "off: %s", why);
		return 0;
	}
	struct ctl_opts opts = {.log = log ? ctl_log : NULL, .log_arg = log};
	rc = dp__run_ctl_init(cfg, &opts, cerr, sizeof(cerr));
	if (rc) {
		snprintf(err, errlen, "control plane (%s): %s", why,
			 cerr[0] ? cerr : zb_strerror(rc));
		return rc;
	}
	*started = true;
	snprintf(what, whatlen, "on (%s): cluster %u, listen %s, admin %s, "
		 "metrics %s, raft_dir %s, %u member seed(s), %s", why,
		 cfg->cluster.id, cfg->control.listen,
		 cfg->control.admin_listen[0] ? cfg->control.admin_listen : "off",
		 cfg->metrics.listen[0] ? cfg->metrics.listen : "off",
		 cfg->control.raft_dir, cfg->cluster.seed_count,
		 cfg->cluster.psk_file[0] ? "PSK-authenticated" :
		 "no psk_file: a single-node cluster with a random key");
	return 0;
}

struct ctl_node *dp__run_ctl_node(void)
{
	return g.ctl;
}

void dp__run_ctl_fini(void)
{
	if (g.collector >= 0)
		zb_metrics_remove_collector(g.collector);
	g.collector = -1;
	for (unsigned i = 0; i < g.n_lanes; i++)
		g.lanes[i].events = g.lanes[i].commands = NULL;
	ctl_node_destroy(g.ctl);
	g.ctl = NULL;
}
