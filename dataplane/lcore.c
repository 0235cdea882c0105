/* dataplane/lcore.c — the polling loop, its hooks and counters.
 *
 * Shaped like DPDK's l2fwd: per-lcore state in a cache-aligned array, looked
 * up once; while (!quit) { tsc; rx burst -> handler; pollers; actors; tx
 * flush; timers (rare); idle policy }. Everything an iteration touches was
 * allocated by dp__lcores_init(); nothing in an iteration allocates, locks,
 * makes a syscall or logs — except the adaptive idle sleep, taken only after
 * idle_spin_us without any work.
 */
#include "internal.h"

#include <linux/futex.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_malloc.h>
#include <rte_errno.h>
#include <rte_pause.h>
#include <rte_ring.h>
#include <rte_timer.h>

static RTE_DEFINE_PER_LCORE(int, dp_index) = -1;

/* A flush left `unsent` frames: keep them (in order) for the next flush. */
static void tx_unsent_cb(struct rte_mbuf **pkts, uint16_t unsent, void *arg)
{
	struct dp_txhold *h = arg;
	uint16_t room = (uint16_t)(DP_BURST_MAX - h->n);
	uint16_t keep = unsent < room ? unsent : room;
	memcpy(h->m + h->n, pkts, keep * sizeof(*pkts));
	h->n = (uint16_t)(h->n + keep);
	if (keep < unsent) {   /* cannot happen while dp_tx refuses when held */
		rte_pktmbuf_free_bulk(pkts + keep, (unsigned)(unsent - keep));
		DP_STAT_ADD(h->lc, tx_drops, unsent - keep);
	}
}

/* Bursts of a port: memif ports through the disconnect-race guard
 * (memif_guard.c), the others straight to the driver. */
static uint16_t rx_burst_fn(uint16_t port_id, uint16_t q, struct rte_mbuf **pkts,
			    uint16_t n)
{
	return rte_eth_rx_burst(port_id, q, pkts, n);
}

static uint16_t tx_burst_fn(uint16_t port_id, uint16_t q, struct rte_mbuf **pkts,
			    uint16_t n)
{
	return rte_eth_tx_burst(port_id, q, pkts, n);
}

/* No memif burst starts while the port's gate is closed (a client port
 * being restarted to reconnect, port.c memif_reconnect: it closes the gate,
 * makes every thread pass a barrier with membarrier(2), then waits for each
 * loop to finish the iteration it was in; so a plain load here). */
static inline bool memif_gate_open(const struct dp_port *p)
{
	return likely(!atomic_load_explicit(&p->gate, memory_order_relaxed));
}

static inline uint16_t port_rx(const struct dp_port *p, uint16_t q,
			       struct rte_mbuf **pkts, uint16_t n)
{
	if (p->memif)
		return memif_gate_open(p) ?
		       dp__memif_guard_burst(rx_burst_fn, p->port_id, q, pkts, n, 0) : 0;
	return rte_eth_rx_burst(p->port_id, q, pkts, n);
}

/* A TX burst, its time counted in tx_burst_cyc. */
static inline uint16_t port_tx(struct dp_lcore *lc, const struct dp_port *p,
			       uint16_t q, struct rte_mbuf **pkts, uint16_t n)
{
	uint64_t t0 = rte_rdtsc();
	uint16_t sent;
	if (!p->memif)
		sent = rte_eth_tx_burst(p->port_id, q, pkts, n);
	else if (memif_gate_open(p))
		sent = dp__memif_guard_burst(tx_burst_fn, p->port_id, q, pkts, n,
					     n);   /* cut: all taken */
	else
		sent = 0;   /* a closed gate: as a full ring, the frames are kept */
	DP_STAT_ADD(lc, tx_burst_cyc, rte_rdtsc() - t0);
	return sent;
}

/* rte_eth_tx_buffer_flush's contract (unsent frames to the buffer's error
 * callback), through port_tx. */
static inline uint16_t tx_buffer_flush(struct dp_lcore *lc,
				       const struct dp_port *p, uint16_t q,
				       struct rte_eth_dev_tx_buffer *b)
{
	uint16_t len = b->length;
	if (!len)
		return 0;
	uint16_t sent = port_tx(lc, p, q, b->pkts, len);
	b->length = 0;
	if (unlikely(sent < len))
		b->error_callback(&b->pkts[sent], (uint16_t)(len - sent),
				  b->error_userdata);
	return sent;
}

/* Send what the last flush kept. Returns the number still held. */
static inline uint16_t tx_hold_drain(struct dp_lcore *lc, uint16_t k)
{
	struct dp_txhold *h = lc->hold[k];
	if (!h->n)
		return 0;
	uint16_t sent = port_tx(lc, &dp__node.ports[k], lc->txq[k], h->m, h->n);
	if (sent) {
		h->n = (uint16_t)(h->n - sent);
		memmove(h->m, h->m + sent, h->n * sizeof(h->m[0]));
		h->fails = 0;
	} else if (++h->fails >= DP_TXHOLD_TRIES) {
		/* the queue takes nothing (link down, peer gone): drop them
		 * rather than refuse this port's frames for good */
		rte_pktmbuf_free_bulk(h->m, h->n);
		DP_STAT_ADD(lc, tx_drops, h->n);
		h->n = 0;
		h->fails = 0;
	}
	return h->n;
}

int dp__lcores_init(struct dp_node *n, struct dp_err *err)
{
	ZB_ASSERT(n != NULL && n->nb_lcores > 0);
	ZB_ASSERT(n->lcores == NULL);
	n->lcores = rte_zmalloc("zbmd_lcores",
				sizeof(struct dp_lcore) * n->nb_lcores,
				RTE_CACHE_LINE_SIZE);
	if (!n->lcores)
		return dp__err(err, -ENOMEM, "lcore state: out of memory");
	for (unsigned i = 0; i < n->nb_lcores; i++) {
		struct dp_lcore *lc = &n->lcores[i];
		lc->index = i;
		lc->lcore_id = n->lcore_ids[i];
		if (n->nb_lcores > 1) {
			char name[RTE_RING_NAMESIZE];
			snprintf(name, sizeof(name), "zbmd_inbox%u", i);
			lc->inbox = rte_ring_create(name, DP_INBOX_SIZE,
				(int)rte_lcore_to_socket_id(lc->lcore_id),
				RING_F_SC_DEQ);
			if (!lc->inbox)
				return dp__err(err, -ENOMEM, "lane inbox %u: %s", i,
					       rte_strerror(rte_errno));
		}
		for (uint16_t k = 0; k < n->nb_ports; k++) {
			struct dp_port *p = &n->ports[k];
			if (i < p->nb_rxq)
				lc->rxq[lc->nb_rxq++] = (struct dp_rxq){
					.port = k, .port_id = p->port_id,
					.queue = (uint16_t)i};
			if (i >= p->nb_txq)
				continue;
			int sock = p->socket < 0 ? SOCKET_ID_ANY : p->socket;
			lc->tx[k] = rte_zmalloc_socket("zbmd_txbuf",
				RTE_ETH_TX_BUFFER_SIZE(n->burst), 0, sock);
			if (!lc->tx[k])
				return dp__err(err, -ENOMEM,
					       "tx buffer: out of memory");
			lc->hold[k] = rte_zmalloc_socket("zbmd_txhold",
				sizeof(struct dp_txhold), 0, sock);
			if (!lc->hold[k])
				return dp__err(err, -ENOMEM,
					       "tx buffer: out of memory");
			lc->hold[k]->lc = lc;
			rte_eth_tx_buffer_init(lc->tx[k], n->burst);
			rte_eth_tx_buffer_set_err_callback(lc->tx[k], tx_unsent_cb,
							   lc->hold[k]);
			lc->txq[k] = (uint16_t)i;
		}
	}
	return 0;
}

void dp__lcores_fini(struct dp_node *n)
{
	ZB_ASSERT(n != NULL);
	if (!n->lcores)
		return;
	for (unsigned i = 0; i < n->nb_lcores; i++) {
		struct rte_ring *r = n->lcores[i].inbox;
		struct rte_mbuf *m;
		while (r && rte_ring_dequeue(r, (void **)&m) == 0)
			rte_pktmbuf_free(m);
		rte_ring_free(r);
	}
	for (unsigned i = 0; i < n->nb_lcores; i++)
		for (unsigned k = 0; k < CFG_MAX_PORTS; k++) {
			struct rte_eth_dev_tx_buffer *b = n->lcores[i].tx[k];
			struct dp_txhold *h = n->lcores[i].hold[k];
			if (b && b->length)  /* loops flush on exit; belt and braces */
				rte_pktmbuf_free_bulk(b->pkts, b->length);
			if (h && h->n)
				rte_pktmbuf_free_bulk(h->m, h->n);
			rte_free(b);
			rte_free(h);
		}
	rte_free(n->lcores);
	n->lcores = NULL;
}

/* ---- the loop --------------------------------------------------------------- */

static inline void deliver(struct dp_lcore *lc, uint16_t port,
			   struct rte_mbuf **pkts, uint16_t n, uint64_t now)
{
	struct dp_node *nd = &dp__node;
	if (nd->rx_fn != NULL) {
		DP_STAT_ADD(lc, udp_rx, n);
		nd->rx_fn(nd->rx_arg, lc->index, port, pkts, n, now);
	} else if (likely(nd->has_link)) {
		DP_STAT_ADD(lc, udp_rx, n);
		dp__link_rx(lc->index, pkts, n, now);
	} else {
		rte_pktmbuf_free_bulk(pkts, n);
		DP_STAT_ADD(lc, rx_drops, n);
	}
}

/* Frames were put in the inboxes of the lanes in mask `fwd`: wake those
 * of them that sleep in their adaptive back-off (they would find the
 * frames only when the sleep ends, up to idle_sleep_us_max later). The
 * fence pairs with bell_sleep's: either the lane sees the enqueued frames
 * before it sleeps, or this sees `sleeping` and kicks it. A lane that
 * polls costs a fence and a load, no write to its line. */
static void inbox_wake(struct dp_node *n, const uint64_t *fwd)
{
	atomic_thread_fence(memory_order_seq_cst);
	for (unsigned w = 0; w < (CFG_MAX_LCORES + 63) / 64; w++)
		for (uint64_t b = fwd[w]; b; b &= b - 1) {
			unsigned lane = w * 64 + (unsigned)__builtin_ctzll(b);
			if (atomic_load_explicit(&n->lcores[lane].bell.sleeping,
						 memory_order_relaxed))
				dp_lcore_kick(lane);
		}
}

static inline unsigned rx_queue(struct dp_lcore *lc, const struct dp_rxq *q,
				struct rte_mbuf **pkts, uint16_t burst,
				uint64_t now)
{
	struct dp_node *n = &dp__node;
	const struct dp_port *p = &n->ports[q->port];
	uint64_t t0 = rte_rdtsc();
	uint16_t nb = port_rx(p, q->queue, pkts, burst);
	if (nb == 0)
		return 0;
	DP_STAT_ADD(lc, rx_burst_cyc, rte_rdtsc() - t0);
	uint64_t bytes = 0;
	uint16_t keep = 0;
	uint64_t fwd[(CFG_MAX_LCORES + 63) / 64];   /* lanes passed a frame */
	bool any_fwd = false;
	for (uint16_t i = 0; i < nb; i++) {
		struct rte_mbuf *m = pkts[i];
		bytes += rte_pktmbuf_pkt_len(m);
		int lane = dp__rx_classify(lc, p, m);
		if (lane < 0)
			continue;
		if (likely((unsigned)lane == lc->index)) {
			pkts[keep++] = m;
			continue;
		}
		/* another lane's frame: hand it to that lcore */
		m->port = q->port;
		if (rte_ring_mp_enqueue(n->lcores[lane].inbox, m) == 0) {
			DP_STAT_ADD(lc, lane_fwd, 1);
			if (!any_fwd)
				memset(fwd, 0, sizeof(fwd));
			any_fwd = true;
			fwd[(unsigned)lane / 64] |= 1ull << ((unsigned)lane % 64);
		} else {
			rte_pktmbuf_free(m);
			DP_STAT_ADD(lc, lane_drops, 1);
		}
	}
	DP_STAT_ADD(lc, rx_packets, nb);
	DP_STAT_ADD(lc, rx_bytes, bytes);
	if (unlikely(any_fwd) && n->adaptive)
		inbox_wake(n, fwd);
	if (keep)
		deliver(lc, q->port, pkts, keep, now);
	return nb;
}

/* Frames other lcores passed to our lane (m->port = the port index). */
static inline unsigned rx_inbox(struct dp_lcore *lc, struct rte_mbuf **pkts,
				uint16_t burst, uint64_t now)
{
	unsigned nb = rte_ring_sc_dequeue_burst(lc->inbox, (void **)pkts, burst,
						NULL);
	/* deliver in runs of one port (the hook takes one port per call) */
	for (unsigned i = 0; i < nb;) {
		unsigned j = i + 1;
		while (j < nb && pkts[j]->port == pkts[i]->port)
			j++;
		deliver(lc, pkts[i]->port, pkts + i, (uint16_t)(j - i), now);
		i = j;
	}
	return nb;
}

static inline void tx_flush(struct dp_lcore *lc, uint16_t nb_ports)
{
	for (uint16_t k = 0; k < nb_ports; k++) {
		struct rte_eth_dev_tx_buffer *b = lc->tx[k];
		if (!b || tx_hold_drain(lc, k))
			continue;   /* kept frames go first (dp_tx refused meanwhile) */
		if (b->length)   /* what does not fit is kept (tx_unsent_cb) */
			tx_buffer_flush(lc, &dp__node.ports[k], lc->txq[k], b);
	}
}

/* The adaptive sleep: a futex wait on the doorbell, so that dp_lcore_kick()
 * ends it. v is the doorbell as the loop read it before this iteration's
 * polls: a kick after that (after the polls that found nothing, say) must
 * not be slept through. Both sides store, then load the other's word
 * (seq_cst): the loop either sees the new doorbell before it sleeps, or the
 * kicker sees `sleeping` and wakes it (the futex re-checks the word).
 * Returns whether a kick ended (or prevented) the sleep. */
static bool bell_sleep(struct dp_lcore *lc, uint32_t us, uint32_t v)
{
	bool kicked;

	atomic_store(&lc->bell.sleeping, 1);   /* seq_cst store, then load */
	/* ... and then the inbox: frames other lcores enqueued before they
	 * looked at `sleeping` (inbox_wake) are seen here */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load(&lc->bell.doorbell) == v &&
	    (!lc->inbox || rte_ring_empty(lc->inbox))) {
		struct timespec ts = {.tv_sec = us / 1000000,
				      .tv_nsec = (long)(us % 1000000) * 1000};
		(void)syscall(SYS_futex, (uint32_t *)&lc->bell.doorbell,
			      FUTEX_WAIT_PRIVATE, v, &ts, NULL, 0);
	}
	atomic_store_explicit(&lc->bell.sleeping, 0, memory_order_relaxed);
	kicked = atomic_load_explicit(&lc->bell.doorbell, memory_order_acquire) != v;
	return kicked;
}

void dp_lcore_kick(unsigned index)
{
	struct dp_node *n = &dp__node;

	if (!n->lcores || index >= n->nb_lcores)
		return;
	struct dp_lcore *lc = &n->lcores[index];
	atomic_fetch_add(&lc->bell.doorbell, 1);   /* seq_cst, then load */
	if (atomic_load(&lc->bell.sleeping))
		(void)syscall(SYS_futex, (uint32_t *)&lc->bell.doorbell,
			      FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* Adaptive idle, three stages after the last work (any work resets it):
 *  1. spin (rte_pause) for DP_IDLE_PAUSE_US (or idle_spin_us if shorter);
 *  2. keep polling but yield the CPU (sched_yield) on every idle iteration
 *     until idle_spin_us + DP_IDLE_YIELD_US: another loop sharing this CPU
 *     (local clusters put several nodes on 2 cores) runs at once, while a
 *     loop alone on its CPU keeps polling at ~1 us. Spinning 100 us before
 *     yielding made a ping-pong between two nodes on one CPU take ~300 us;
 *     sleeping instead costs up to a sleep's length per hop (DPDK 22.11's
 *     memif has no RX interrupt API to wake us; doorbells in shared memory
 *     that the peers ring after a TX burst were tried, and a futex wake-up
 *     cost more than the yields it saved: docs/collectives.md);
 *  3. sleep 1, 2, 4 ... us up to idle_sleep_us_max, never past the
 *     transport's next timer (timer slack is 1 us on adaptive loops, so a
 *     short sleep is short); dp_lcore_kick() ends it, and so does another
 *     lcore that passes this lane frames through its inbox (inbox_wake). */
static inline void idle(struct dp_lcore *lc, uint64_t now, uint32_t bell,
			uint64_t *idle_since, uint32_t *sleep_us, uint64_t pause_tsc,
			uint64_t yield_tsc)
{
	struct dp_node *n = &dp__node;
	if (*idle_since == 0)
		*idle_since = now;
	uint64_t idle_tsc = now - *idle_since;
	if (!n->adaptive || (idle_tsc < pause_tsc && idle_tsc < n->idle_spin_tsc)) {
		rte_pause();
		return;
	}
	if (idle_tsc < n->idle_spin_tsc + yield_tsc) {
		sched_yield();
		return;
	}
	*sleep_us = *sleep_us ? *sleep_us * 2 : 1;
	if (*sleep_us > n->idle_sleep_us_max)
		*sleep_us = n->idle_sleep_us_max;
	uint32_t us = *sleep_us;
	if (n->has_link) {   /* wake for the transport's next timer */
		uint32_t cap = dp__link_sleep_cap_us(lc->index, now);
		if (cap < us)
			us = cap;
	}
	if (us == 0) {
		rte_pause();
		return;
	}
	DP_STAT_ADD(lc, sleeps, 1);
	if (bell_sleep(lc, us, bell))
		DP_STAT_ADD(lc, kicked, 1);
}

int dp__lcore_main(void *arg)
{
	struct dp_lcore *lc = arg;
	struct dp_node *n = &dp__node;
	struct rte_mbuf *pkts[DP_BURST_MAX];
	const uint16_t burst = n->burst;
	const uint16_t nb_ports = n->nb_ports;
	uint64_t idle_since = 0, next_timer = 0;
	uint32_t sleep_us = 0, backlog_skips = 0;
	const uint64_t yield_tsc = rte_get_tsc_hz() / 1000000 * DP_IDLE_YIELD_US;
	const uint64_t pause_tsc = rte_get_tsc_hz() / 1000000 * DP_IDLE_PAUSE_US;

	ZB_ASSERT(lc != NULL && lc->lcore_id == rte_lcore_id());
	ZB_ASSERT(burst > 0 && burst <= DP_BURST_MAX);
	RTE_PER_LCORE(dp_index) = (int)lc->index;
	if (n->adaptive)   /* short sleeps stay short (default slack: 50 us) */
		prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);

	for (;;) {
		/* before the polls: a kick from here on ends the idle sleep.
		 * Read before quit: dp_node_stop sets quit and then kicks, so a
		 * doorbell read after the kick also sees quit (the kick's
		 * release); quit read first could miss a stop landing between
		 * the two reads, and the loop slept through it (up to
		 * idle_sleep_us_max) on the doorbell it read after the kick */
		const uint32_t bell = atomic_load_explicit(&lc->bell.doorbell,
							   memory_order_acquire);
		if (__atomic_load_n(&n->quit, __ATOMIC_ACQUIRE))
			break;
		const uint64_t now = rte_rdtsc();
		unsigned work = 0, events = 0;

		bool backlog = false;
		for (uint16_t q = 0; q < lc->nb_rxq; q++) {
			unsigned nb = rx_queue(lc, &lc->rxq[q], pkts, burst, now);
			backlog |= nb == burst;
			work += nb;
		}
		if (lc->inbox) {
			unsigned nb = rx_inbox(lc, pkts, burst, now);
			backlog |= nb == burst;
			work += nb;
		}

		uint32_t np = __atomic_load_n(&lc->nb_pollers, __ATOMIC_ACQUIRE);
		for (uint32_t i = 0; i < np; i++)
			events += lc->pollers[i].fn(lc->pollers[i].arg, now);
		if (n->actor_fn)
			events += n->actor_fn(n->actor_arg, lc->index, now);
		/* Transport timers wait while a queue still holds frames (a full
		 * burst came in), for up to DP_RX_BACKLOG_SKIPS iterations: after
		 * the loop was descheduled for longer than an RTO, the acks that
		 * answer our frames are in that backlog, and firing the RTO first
		 * retransmits a whole window for nothing. */
		if (n->has_link) {
			if (backlog && backlog_skips < DP_RX_BACKLOG_SKIPS) {
				backlog_skips++;
			} else {
				backlog_skips = 0;
				events += dp__link_poll(lc->index, now);
			}
		}

		tx_flush(lc, nb_ports);

		if (unlikely(now >= next_timer)) {
			rte_timer_manage();   /* rte_timers armed on this lcore */
			if (n->timer_fn)
				events += n->timer_fn(n->timer_arg, lc->index, now);
			if (lc->index == 0)
				events += dp__arp_tick(lc, now);
			next_timer = now + n->timer_tsc;
		}

		/* release: the iteration's bursts are over when this shows
		 * (port.c lcores_pass_iteration waits for it) */
		__atomic_store_n(&lc->stats.iterations, lc->stats.iterations + 1,
				 __ATOMIC_RELEASE);
		if (events)
			DP_STAT_ADD(lc, poll_events, events);
		if (work + events) {
			idle_since = 0;
			sleep_us = 0;
		} else {
			DP_STAT_ADD(lc, idle_iterations, 1);
			idle(lc, now, bell, &idle_since, &sleep_us, pause_tsc,
			     yield_tsc);
		}
	}
	tx_flush(lc, nb_ports);
	RTE_PER_LCORE(dp_index) = -1;
	return 0;
}

/* ---- API -------------------------------------------------------------------- */

int dp_tx(uint16_t port, struct rte_mbuf *m)
{
	struct dp_node *n = &dp__node;
	int idx = RTE_PER_LCORE(dp_index);
	ZB_DASSERT(m != NULL);
	if (unlikely(idx < 0)) {   /* not a running loop (e.g. at shutdown) */
		rte_pktmbuf_free(m);
		return 0;
	}
	struct dp_lcore *lc = &n->lcores[idx];
	/* no such port (lc->tx and lc->hold have CFG_MAX_PORTS entries):
	 * dropped as on a port without a queue for this lcore */
	struct rte_eth_dev_tx_buffer *b = likely(port < n->nb_ports) ? lc->tx[port] : NULL;
	if (unlikely(b == NULL)) {
		rte_pktmbuf_free(m);
		DP_STAT_ADD(lc, tx_drops, 1);
		return 0;
	}
	if (unlikely(lc->hold[port]->n) && tx_hold_drain(lc, port)) {
		/* the queue is still full: refuse (the transport retries) */
		rte_pktmbuf_free(m);
		DP_STAT_ADD(lc, tx_full, 1);
		return 0;
	}
	DP_STAT_ADD(lc, tx_packets, 1);
	DP_STAT_ADD(lc, tx_bytes, rte_pktmbuf_pkt_len(m));
	b->pkts[b->length++] = m;   /* rte_eth_tx_buffer, through port_tx */
	if (b->length >= b->size)
		tx_buffer_flush(lc, &n->ports[port], lc->txq[port], b);
	return 1;
}

unsigned dp_lcore_count(void)
{
	return dp__node.lcores ? dp__node.nb_lcores : 0;
}

int dp_lcore_index(void)
{
	return RTE_PER_LCORE(dp_index);
}

unsigned dp_lcore_id_of(unsigned index)
{
	ZB_ASSERT(index < dp__node.nb_lcores);
	return dp__node.lcore_ids[index];
}

int dp_lcores_cpus(cpu_set_t *out)
{
	ZB_ASSERT(out != NULL);
	CPU_ZERO(out);
	for (unsigned i = 0; i < dp__node.nb_lcores; i++) {
		rte_cpuset_t c = rte_lcore_cpuset(dp__node.lcore_ids[i]);
		CPU_OR(out, out, &c);
	}
	return CPU_COUNT(out);
}

int dp_register_poller(unsigned index, dp_poll_fn fn, void *arg)
{
	struct dp_node *n = &dp__node;
	if (!fn || !n->lcores || index >= n->nb_lcores)
		return -EINVAL;
	struct dp_lcore *lc = &n->lcores[index];
	int rc = 0;
	pthread_mutex_lock(&n->reg_lock);
	uint32_t np = lc->nb_pollers;
	if (np >= DP_POLLERS_MAX) {
		rc = -ENOSPC;
	} else {
		lc->pollers[np] = (struct dp_poller){.fn = fn, .arg = arg};
		/* publish the entry before the count the loop reads */
		__atomic_store_n(&lc->nb_pollers, np + 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&n->reg_lock);
	return rc;
}

int dp_set_rx_hook(dp_rx_fn fn, void *arg)
{
	if (dp__node.launched)
		return -EBUSY;
	dp__node.rx_fn = fn;
	dp__node.rx_arg = arg;
	return 0;
}

int dp_set_actor_hook(dp_actor_fn fn, void *arg)
{
	if (dp__node.launched)
		return -EBUSY;
	dp__node.actor_fn = fn;
	dp__node.actor_arg = arg;
	return 0;
}

int dp_set_timer_hook(dp_timer_fn fn, void *arg, uint32_t period_us)
{
	if (dp__node.launched)
		return -EBUSY;
	dp__node.timer_fn = fn;
	dp__node.timer_arg = arg;
	dp__node.timer_us = period_us ? period_us : DP_TIMER_US_DEFAULT;
	/* before dp_node_init the TSC rate is not known yet (0): node_params
	 * converts timer_us then */
	if (dp__node.eal_up)
		dp__node.timer_tsc = rte_get_tsc_hz() / 1000000 * dp__node.timer_us;
	return 0;
}

int dp_set_control_hook(const struct dp_control_ops *ops, void *arg)
{
	if (dp__node.launched)
		return -EBUSY;
	if (ops && (!ops->run || !ops->stop))
		return -EINVAL;
	dp__node.ctl_ops = ops;
	dp__node.ctl_arg = arg;
	return 0;
}

int dp_lcore_stats(unsigned index, struct dp_lcore_stats *out)
{
	struct dp_node *n = &dp__node;
	if (!out || !n->lcores || index >= n->nb_lcores)
		return -EINVAL;
	const struct dp_lcore_stats *s = &n->lcores[index].stats;
	const uint64_t *src = (const uint64_t *)s;
	uint64_t *dst = (uint64_t *)out;
	static_assert(sizeof(*s) % sizeof(uint64_t) == 0, "stats are u64s");
	for (size_t i = 0; i < sizeof(*s) / sizeof(uint64_t); i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
	return 0;
}

void dp_stats_dump(FILE *out)
{
	for (uint16_t k = 0; k < dp__node.nb_ports; k++) {
		const struct dp_port *p = &dp__node.ports[k];
		struct rte_eth_link link;
		struct rte_eth_stats st;
		memset(&link, 0, sizeof(link));
		memset(&st, 0, sizeof(st));
		if (p->started) {
			rte_eth_link_get_nowait(p->port_id, &link);
			rte_eth_stats_get(p->port_id, &st);
		}
		fprintf(out,
			"port.%u link=%s ipackets=%" PRIu64 " opackets=%" PRIu64
			" imissed=%" PRIu64 " ierrors=%" PRIu64 " oerrors=%" PRIu64
			" rx_nombuf=%" PRIu64 " memif_reconnects=%u\n",
			p->cfg_index, link.link_status ? "up" : "down", st.ipackets,
			st.opackets, st.imissed, st.ierrors, st.oerrors, st.rx_nombuf,
			p->reconnects);
	}
	for (unsigned i = 0; i < dp_lcore_count(); i++) {
		struct dp_lcore_stats s;
		if (dp_lcore_stats(i, &s))
			continue;
		fprintf(out,
			"stats lcore=%u index=%u iterations=%" PRIu64 " idle=%" PRIu64
			" sleeps=%" PRIu64 " rx_packets=%" PRIu64 " rx_bytes=%" PRIu64
			" tx_packets=%" PRIu64 " tx_bytes=%" PRIu64 " tx_drops=%" PRIu64 " tx_full=%" PRIu64
			" rx_drops=%" PRIu64 " arp_replies=%" PRIu64 " icmp_replies=%" PRIu64
			" arp_requests=%" PRIu64 " arp_learned=%" PRIu64
			" lane_fwd=%" PRIu64 " lane_drops=%" PRIu64 " zc_frames=%" PRIu64
			" udp_rx=%" PRIu64 " poll_events=%" PRIu64 "\n",
			dp__node.lcore_ids[i], i, s.iterations, s.idle_iterations,
			s.sleeps, s.rx_packets, s.rx_bytes, s.tx_packets, s.tx_bytes,
			s.tx_drops, s.tx_full, s.rx_drops, s.arp_replies, s.icmp_replies,
			s.arp_requests, s.arp_learned, s.lane_fwd, s.lane_drops, s.zc_frames, s.udp_rx,
			s.poll_events);
	}
	if (dp__memif_guard_ranges())
		fprintf(out, "memif_guard ranges=%u absorbed=%" PRIu64 "\n",
			dp__memif_guard_ranges(), dp__memif_guard_absorbed());
	dp__link_stats_dump(out);
	fflush(out);
}
