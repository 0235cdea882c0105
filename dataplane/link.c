/* dataplane/link.c — the reliable transport (zbmd/transport.h) bound to the
 * node's ports: one transport instance per lcore ("lane"), its link ops on
 * mbufs, RX fed from the loop, timers driven from the loop.
 *
 * TX (link_tx): the transport hands over the frame's 106 header bytes and a
 * payload pointer. The headers are copied into an mbuf of the peer's port
 * pool (Ethernet addresses rewritten: source = that port's MAC, destination
 * = the neighbour table's MAC for the peer, which ARP may have learnt).
 * Payloads of at least DP_ZC_MIN bytes with a reference (tp_ref) are attached
 * without copying: a second mbuf from the lane's attach pool points at the
 * caller's buffer as an external buffer whose shared-info lives in that
 * mbuf's private area; the transport's reference is taken per frame and
 * dropped when the driver frees the mbuf. Smaller payloads, or where IOVA is
 * not VA (the caller's memory would need rte_extmem_register + DMA mapping
 * for a PCI NIC), are copied into the header mbuf.
 *
 * RX: frames of our lane are given to tp_rx_keep() and freed, unless the
 * transport kept one: a fragment of a message that a dp_msg_ops consumer
 * takes as its frames (rx_keep; see DP_KEEP_MTU_MIN), given
 * back through link_rx_free when the consumer releases the message. Every
 * other fragment is copied once: into the transport's reassembly arena, or
 * into a posted receive (rx_place, the net provider).
 *
 * Time: the transport takes nanoseconds; the loop's TSC is converted with a
 * fixed-point multiplier computed at init.
 *
 * Pages: the transport reserves its reassembly arena without mapping it in;
 * a page is mapped on first use, inside the loop. With [transport]
 * arena_prefault the arenas are mapped in at start-up, before the loops
 * run (prefault_arenas).
 */
#include "internal.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include <rte_errno.h>
#include <rte_malloc.h>

#define DP_LINK_STREAMS 16       /* per peer, every lane */
#define DP_ZC_MIN 512            /* attach payloads this large, copy smaller */
#define DP_KEEP_MIN (64u << 10)  /* messages a consumer may take as frames */
/* ... over any port while the pools hand out the last freed mbuf first
 * ([dataplane] mbuf_pool = stack); with the FIFO ring only over ports of at
 * least this MTU. A kept frame is an mbuf that does not go back to the
 * lcore's mempool cache at once; a ring pool then hands out the mbufs of
 * the whole pool in turn, and every RX burst writes into cold lines: that
 * costs less than the 8.8 KB copy a jumbo frame saves (2 memif nodes, MTU
 * 9000, 1 MiB messages: 203 against 96 - 133 Gbit/s copied), more than a
 * 1.4 KB one (MTU 1500: 51 against 72). From a stack pool the next RX
 * burst takes the frames a released message just gave back: at MTU 1500
 * 76.5 - 77.2 Gbit/s kept against 71.8 - 72.8 copied. */
#define DP_KEEP_MTU_MIN 4000

struct dp_link {
	struct tp *tp;
	unsigned index;
	struct rte_mempool *attach_pool;  /* ext-buffer carriers, shinfo in priv */
	uint64_t deadline_ns;
	uint64_t no_consumer;             /* delivered with no msg hook: released */
	uint32_t link_gen_seen;           /* dp__node.link_down_gen acted on */
	uint32_t port_gen_seen[CFG_MAX_PORTS];  /* each port's down_gen */
} ZB_ALIGNED_CL;

static struct dp_link *links;          /* [nb_lcores] */
static unsigned nb_links;
static uint64_t tsc_mult;              /* ns = tsc * mult >> 32 */
static uint64_t tsc0;
static const struct dp_msg_ops *msg_ops;
static void *msg_arg;

static inline uint64_t tsc_to_ns(uint64_t tsc)
{
	return (uint64_t)(((unsigned __int128)(tsc - tsc0) * tsc_mult) >> 32);
}

uint64_t dp_now_ns(uint64_t tsc)
{
	return tsc_to_ns(tsc);
}

/* ---- link ops ------------------------------------------------------------- */

static void ext_free(void *addr, void *opaque)
{
	(void)addr;
	tp_ref_put(opaque);
}

static int attach_payload(struct dp_link *l, struct rte_mbuf *m,
			  const struct tp_frame *f)
{
	struct rte_mbuf *c = rte_pktmbuf_alloc(l->attach_pool);
	if (unlikely(c == NULL))
		return -EAGAIN;
	struct rte_mbuf_ext_shared_info *sh = rte_mbuf_to_priv(c);
	sh->free_cb = ext_free;
	sh->fcb_opaque = f->ref;
	rte_mbuf_ext_refcnt_set(sh, 1);
	tp_ref_get(f->ref);
	void *va = (void *)(uintptr_t)f->payload;
	rte_pktmbuf_attach_extbuf(c, va, (rte_iova_t)(uintptr_t)va,
				  (uint16_t)f->payload_len, sh);
	c->data_len = (uint16_t)f->payload_len;
	c->pkt_len = f->payload_len;
	if (unlikely(rte_pktmbuf_chain(m, c) != 0)) {
		rte_pktmbuf_free(c);   /* drops the reference through ext_free */
		return -EAGAIN;
	}
	return 0;
}

static int link_tx(void *user, const struct tp_frame *f)
{
	struct dp_link *l = user;
	struct dp_node *n = &dp__node;
	const struct cfg_peer *pe = &n->cfg->peers[f->peer];
	ZB_DASSERT(f->hdr_len == WIRE_HDRS_LEN && f->peer < CFG_MAX_NODES);
	int k = n->port_of_cfg[pe->port];
	uint8_t dmac[6];
	if (unlikely(k < 0 || dp_peer_mac(f->peer, dmac) != 0))
		return 0;  /* no route / MAC not resolved yet: "lost", retransmitted */
	const struct dp_port *p = &n->ports[k];
	struct rte_mbuf *m = rte_pktmbuf_alloc(p->pool);
	if (unlikely(m == NULL))
		return -EAGAIN;
	bool zc = f->ref && f->payload_len >= DP_ZC_MIN && n->iova_va && !p->no_attach;
	size_t copy = f->hdr_len + (zc ? 0 : f->payload_len);
	uint8_t *d = (uint8_t *)rte_pktmbuf_append(m, (uint16_t)copy);
	if (unlikely(d == NULL || copy > UINT16_MAX)) {
		rte_pktmbuf_free(m);
		return 0;   /* larger than the mbuf: cannot happen with mtu-sized pools */
	}
	memcpy(d, f->hdr, f->hdr_len);
	memcpy(d, dmac, 6);
	memcpy(d + 6, p->mac.addr_bytes, 6);
	if (!zc) {
		if (f->payload_len)
			memcpy(d + f->hdr_len, f->payload, f->payload_len);
	} else if (attach_payload(l, m, f) != 0) {
		rte_pktmbuf_free(m);
		return -EAGAIN;
	} else {
		DP_STAT_ADD(&n->lcores[l->index], zc_frames, 1);
	}
	return dp_tx((uint16_t)k, m) ? 0 : -EAGAIN;
}

static int link_deliver(void *user, struct tp_msg *m)
{
	struct dp_link *l = user;
	int rc = dp__net_deliver(l->index, m);   /* the dpdk net provider's? */
	if (rc == 1) {
		tp_msg_release(l->tp, m);
		return 0;
	}
	if (rc < 0)
		return rc;
	if (msg_ops && msg_ops->deliver)
		return msg_ops->deliver(msg_arg, l->index, m);
	l->no_consumer++;
	tp_msg_release(l->tp, m);
	return 0;
}

static void *link_rx_place(void *user, uint16_t peer, uint16_t stream,
			   uint32_t msg_id, size_t len)
{
	struct dp_link *l = user;
	return dp__net_rx_place(l->index, peer, stream, msg_id, len);
}

static void link_rx_unplace(void *user, uint16_t peer, uint16_t stream,
			    uint32_t msg_id)
{
	struct dp_link *l = user;
	dp__net_rx_unplace(l->index, peer, stream, msg_id);
}

static void link_rx_write(void *user, uint16_t peer, uint16_t stream,
			  uint32_t msg_id, uint8_t *buf, size_t off,
			  const uint8_t *data, size_t len)
{
	struct dp_link *l = user;
	dp__net_rx_write(l->index, peer, stream, msg_id, buf, off, data, len);
}

static bool link_rx_keep(void *user, uint16_t peer, uint16_t stream,
			 size_t len)
{
	struct dp_link *l = user;
	/* the net provider's streams take their data through rx_place (or
	 * the arena), whether or not it runs on this lane yet */
	if (stream < DP_NET_STREAMS || !msg_ops || !msg_ops->rx_keep)
		return false;
	return msg_ops->rx_keep(msg_arg, l->index, peer, stream, len);
}

static void link_rx_free(void *user, void *frame)
{
	(void)user;
	rte_pktmbuf_free(frame);
}

static void link_rx_free_bulk(void *user, void *const *frames, unsigned n)
{
	(void)user;
	ZB_DASSERT(n <= TP_RX_FREE_BULK);
	/* the frames' mbufs were last touched when they came in, a message
	 * ago: fetch both lines of each (refcnt, next, pool) before freeing */
	for (unsigned i = 0; i < n; i++) {
		rte_prefetch0(frames[i]);
		rte_prefetch0((const char *)frames[i] + RTE_CACHE_LINE_SIZE);
	}
	rte_pktmbuf_free_bulk((struct rte_mbuf **)(uintptr_t)frames, n);
}

static void link_send_done(void *user, uint64_t cookie, int status)
{
	struct dp_link *l = user;
	if (dp__net_send_done(l->index, cookie, status))
		return;
	if (msg_ops && msg_ops->send_done)
		msg_ops->send_done(msg_arg, l->index, cookie, status);
}

static void link_peer_event(void *user, uint16_t peer, enum tp_peer_event ev,
			    uint32_t remote_epoch)
{
	struct dp_link *l = user;
	if (msg_ops && msg_ops->peer_event)
		msg_ops->peer_event(msg_arg, l->index, peer, ev, remote_epoch);
}

static const struct tp_ops link_ops = {
	.tx = link_tx,
	.deliver = link_deliver,
	.send_done = link_send_done,
	.rx_place = link_rx_place,
	.rx_unplace = link_rx_unplace,
	.rx_write = link_rx_write,
	.rx_keep = link_rx_keep,
	.rx_free = link_rx_free,
	.rx_free_bulk = link_rx_free_bulk,
	.peer_event = link_peer_event,
};

/* ---- loop hooks ------------------------------------------------------------ */

void dp__link_rx(unsigned index, struct rte_mbuf **pkts, uint16_t nb,
		 uint64_t now_tsc)
{
	struct dp_link *l = &links[index];
	uint64_t now = tsc_to_ns(now_tsc);
	for (uint16_t i = 0; i < nb; i++) {
		struct rte_mbuf *m = pkts[i];
		/* dp__rx_classify verified the IPv4 header's checksum */
		unsigned flags = WIRE_RX_IP_CSUM_OK;
		if ((m->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK) ==
			    RTE_MBUF_F_RX_IP_CKSUM_GOOD &&
		    (m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK) ==
			    RTE_MBUF_F_RX_L4_CKSUM_GOOD)
			flags |= WIRE_RX_CSUM_OK;
		const void *f = rte_pktmbuf_mtod(m, const void *);
		uint16_t len = rte_pktmbuf_data_len(m);
		/* one-segment frames may stay with the transport (kept
		 * fragments of a message a consumer takes as frames) */
		if (m->nb_segs != 1)
			tp_rx(l->tp, f, len, flags, now);
		else if (tp_rx_keep(l->tp, f, len, flags, m, now) == TP_RX_KEPT)
			pkts[i] = NULL;   /* rte_pktmbuf_free_bulk skips it */
	}
	tp_rx_flush(l->tp, now);   /* one ack per peer for the burst */
	rte_pktmbuf_free_bulk(pkts, nb);
	l->deadline_ns = tp_next_deadline(l->tp);
}

/* The link watch (port.c) saw a port's link down for link_down_ms: every
 * peer that [peer.N] port maps to it is down for this lane's transport now
 * (its pending messages fail, consumers hear TP_PEER_DOWN), instead of
 * after peer_timeout_ms. A peer it hears from again is up again. */
static void link_downs_apply(struct dp_link *l, uint64_t now)
{
	const struct dp_node *n = &dp__node;

	for (uint16_t k = 0; k < n->nb_ports; k++) {
		uint32_t gen = atomic_load_explicit(&n->ports[k].down_gen,
						    memory_order_acquire);
		if (gen == l->port_gen_seen[k])
			continue;
		l->port_gen_seen[k] = gen;
		for (uint16_t id = 0; id < CFG_MAX_NODES; id++)
			if (dp__peer_port(n, id) == k)
				(void)tp_peer_down(l->tp, id, now);
	}
}

unsigned dp__link_poll(unsigned index, uint64_t now_tsc)
{
	struct dp_link *l = &links[index];
	uint64_t now = tsc_to_ns(now_tsc);
	uint32_t gen = atomic_load_explicit(&dp__node.link_down_gen,
					    memory_order_relaxed);
	if (ZB_UNLIKELY(gen != l->link_gen_seen)) {
		l->link_gen_seen = gen;
		link_downs_apply(l, now);
	}
	/* tp_poll returns at once when nothing is due; tp_send (from pollers
	 * and actors) may have armed an earlier deadline, so ask every time. */
	if (now < tp_next_deadline(l->tp))
		return 0;
	l->deadline_ns = tp_poll(l->tp, now);
	return 1;
}

uint32_t dp__link_sleep_cap_us(unsigned index, uint64_t now_tsc)
{
	uint64_t d = tp_next_deadline(links[index].tp);
	uint64_t now = tsc_to_ns(now_tsc);
	if (d == UINT64_MAX)
		return UINT32_MAX;
	if (d <= now)
		return 0;
	uint64_t us = (d - now) / 1000;
	return us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

/* ---- init / fini ----------------------------------------------------------- */

static uint32_t epoch_now(void)
{
	/* larger after every restart (RFC 1982 comparison): realtime, ms.
	 * The comparison wraps every 24.9 days; a peer's transport takes a
	 * restart whose epoch compares older once the previous incarnation
	 * has been silent for peer_timeout_ms (docs/wire.md, rule 1) */
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint32_t e = (uint32_t)((uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
	return e ? e : 1;
}

/* [transport] stream_min_kb in bytes (tp_params.stream_min), `auto`
 * worked out from this machine's last-level cache */
static uint32_t stream_min(const struct zb_config *cfg)
{
	uint64_t b = cfg_stream_min_bytes(cfg->transport.stream_min_kb);
	return b > UINT32_MAX ? UINT32_MAX : (uint32_t)b;
}

static void fill_params(struct tp_params *tpp, const struct dp_node *n,
			unsigned lane, uint32_t epoch)
{
	const struct zb_config *cfg = n->cfg;
	const struct dp_port *p0 = &n->ports[0];
	tp_params_default(tpp);
	tpp->node = cfg->node.id;
	tpp->lane = (uint8_t)lane;
	tpp->cluster = cfg->cluster.id;
	tpp->epoch = epoch;
	memcpy(tpp->mac, p0->mac.addr_bytes, 6);
	tpp->ip = p0->ip;
	tpp->udp_port = cfg->dp.udp_port;
	uint16_t mtu = p0->mtu;
	for (uint16_t k = 1; k < n->nb_ports; k++)
		if (n->ports[k].mtu < mtu)
			mtu = n->ports[k].mtu;
	tpp->mtu = mtu;
	tpp->max_peers = CFG_MAX_NODES;
	/* 0..7: the dpdk net provider's channels; 8..15: remote actors
	 * (docs/remote.md), so both can share a lane */
	tpp->streams = DP_LINK_STREAMS;
	tpp->rx_batch = 1;   /* dp__link_rx flushes acks after each burst */
	if (cfg->transport.window)
		tpp->window = cfg->transport.window;
	if (cfg->transport.rto_us_min)
		tpp->rto_us_min = cfg->transport.rto_us_min;
	if (cfg->transport.rto_us_max)
		tpp->rto_us_max = cfg->transport.rto_us_max;
	if (tpp->rto_us_init < tpp->rto_us_min)
		tpp->rto_us_init = tpp->rto_us_min;
	if (tpp->rto_us_init > tpp->rto_us_max)
		tpp->rto_us_init = tpp->rto_us_max;
	tpp->ack_delay_us = cfg->transport.ack_delay_us;
	if (cfg->transport.peer_timeout_ms)
		tpp->peer_timeout_ms = cfg->transport.peer_timeout_ms;
	if (cfg->transport.connect_timeout_ms)
		tpp->connect_timeout_ms = cfg->transport.connect_timeout_ms;
	if (cfg->transport.max_message_mb)
		tpp->max_message = cfg->transport.max_message_mb > 4095
					   ? UINT32_MAX
					   : cfg->transport.max_message_mb << 20;
	tpp->stream_min = stream_min(cfg);
	/* frames a consumer may keep (dp_msg_ops.rx_keep): a quarter of
	 * this lane's share of the smallest pool's spare mbufs, so RX rings
	 * still refill while messages are held */
	uint32_t spare = UINT32_MAX;
	for (uint16_t k = 0; k < n->nb_ports; k++) {
		const struct dp_port *p = &n->ports[k];
		uint32_t s = p->pool_size > p->pool_need ? p->pool_size - p->pool_need : 0;
		if (s < spare)
			spare = s;
	}
	tpp->rx_keep_min = DP_KEEP_MIN;
	tpp->rx_keep_frames = mtu < DP_KEEP_MTU_MIN && cfg->dp.mbuf_pool == CFG_MBUF_POOL_RING
				      ? 0 : spare / 4 / (n->nb_lcores ? n->nb_lcores : 1);
	tpp->fault.drop_rate = cfg->fault.drop_rate;
	tpp->fault.dup_rate = cfg->fault.dup_rate;
	tpp->fault.reorder_rate = cfg->fault.reorder_rate;
	tpp->fault.seed = cfg->fault.seed + lane;
}

/* [transport] arena_prefault: map every lane's reassembly arena in now,
 * before the loops run, so that none of them takes a page fault in it when
 * large messages first arrive (tp_prefault_step). */
static void prefault_arenas(void)
{
	uint64_t t0 = zb_now_ns();
	size_t mib = 0;

	for (unsigned i = 0; i < nb_links; i++) {
		long left = tp_prefault_step(links[i].tp, 0);
		mib += left > 0 ? (size_t)left >> 20 : 0;
		do
			left = tp_prefault_step(links[i].tp, (size_t)64 << 20);
		while (left > 0);
		if (left < 0) {
			fprintf(stderr, "zbmd: transport lane %u: its reassembly arena cannot be "
				"mapped in ahead (%s): its pages come on first use, in the loop\n",
				i, strerror((int)-left));
			return;
		}
	}
	fprintf(stderr, "zbmd: transport: %u reassembly arena(s), %zu MiB, mapped in "
		"([transport] arena_prefault) in %.0f ms\n", nb_links, mib,
		(double)(zb_now_ns() - t0) / 1e6);
}

int dp__link_init(struct dp_node *n, struct dp_err *err)
{
	ZB_ASSERT(n != NULL && n->cfg != NULL);
	ZB_ASSERT(links == NULL);
	/* the clock first: dp_now_ns serves the pollers of a bare node too
	 * (a net carrier's timers) */
	uint64_t hz = rte_get_tsc_hz();
	tsc_mult = (uint64_t)(((unsigned __int128)1000000000u << 32) / hz);
	tsc0 = rte_rdtsc();
	if (n->nb_ports == 0 || n->ports[0].ip == 0)
		return 0;   /* no addressed port: no transport (a bare node) */
	n->iova_va = rte_eal_iova_mode() == RTE_IOVA_VA;
	links = rte_zmalloc("zbmd_links", sizeof(*links) * n->nb_lcores,
			    RTE_CACHE_LINE_SIZE);
	if (!links)
		return dp__err(err, -ENOMEM, "transport lanes: out of memory");
	nb_links = n->nb_lcores;
	n->has_link = true;
	uint32_t epoch = epoch_now();
	for (unsigned i = 0; i < nb_links; i++) {
		struct dp_link *l = &links[i];
		struct tp_params tpp;
		l->index = i;
		fill_params(&tpp, n, i, epoch);
		int rc = tp_create(&tpp, &link_ops, l, &l->tp);
		if (rc)
			return dp__err(err, rc == -EINVAL ? ZB_ERR_CONFIG : rc,
				       "transport lane %u: %s (check [transport] and the port mtu)",
				       i, zb_strerror(rc));
		char name[RTE_MEMPOOL_NAMESIZE];
		snprintf(name, sizeof(name), "zbmd_attach%u", i);
		/* carriers: enough for every frame a full window can hold */
		uint32_t count = 2 * tpp.window * 2 + 1024;
		l->attach_pool = rte_pktmbuf_pool_create(name, count, 64,
			RTE_ALIGN(sizeof(struct rte_mbuf_ext_shared_info), 8), 0,
			(int)rte_lcore_to_socket_id(n->lcore_ids[i]));
		if (!l->attach_pool)
			return dp__err(err, -ENOMEM, "attach pool %u: %s", i,
				       rte_strerror(rte_errno));
		for (unsigned id = 0; id < CFG_MAX_NODES; id++) {
			const struct cfg_peer *pe = &n->cfg->peers[id];
			if (!pe->present || id == n->cfg->node.id)
				continue;
			rc = tp_peer_add(l->tp, (uint16_t)id, pe->mac, pe->ip);
			if (rc)
				return dp__err(err, ZB_ERR_CONFIG,
					       "transport: peer.%u: %s", id,
					       zb_strerror(rc));
		}
	}
	if (n->cfg->transport.arena_prefault)
		prefault_arenas();
	return 0;
}

void dp__link_fini(struct dp_node *n)
{
	ZB_ASSERT(n != NULL);
	if (!links)
		return;
	for (unsigned i = 0; i < nb_links; i++)
		if (links[i].tp) {
			tp_destroy(links[i].tp);
			links[i].tp = NULL;
		}
	n->has_link = false;
}

void dp__link_pools_fini(void)
{
	if (!links)
		return;
	for (unsigned i = 0; i < nb_links; i++) {
		ZB_ASSERT(links[i].tp == NULL);   /* dp__link_fini came first */
		rte_mempool_free(links[i].attach_pool);
	}
	rte_free(links);
	links = NULL;
	nb_links = 0;
}

void dp__link_describe(FILE *out)
{
	if (!links)
		return;
	const struct dp_node *n = &dp__node;
	unsigned peers = 0;
	for (unsigned id = 0; id < CFG_MAX_NODES; id++)
		peers += n->cfg->peers[id].present && id != n->cfg->node.id;
	uint32_t smin = stream_min(n->cfg);
	fprintf(out, "transport: lanes=%u udp_ports=%u..%u peers=%u zero-copy=%s "
		"stream_min_kb=%u%s\n",
		nb_links, n->cfg->dp.udp_port, n->cfg->dp.udp_port + nb_links - 1,
		peers, n->iova_va ? "attached mbufs" : "off (IOVA is PA: copies)",
		smin >> 10, n->cfg->transport.stream_min_kb == CFG_AUTO ? " (auto)" : "");
}

/* Racy snapshot of each lane's counters (torn values possible; tp_stats'
 * contract allows a metrics reader that accepts that). */
void dp__link_stats_dump(FILE *out)
{
	for (unsigned i = 0; links && i < nb_links; i++) {
		const struct tp_stats *t = tp_stats(links[i].tp);
		fprintf(out,
			"transport lane=%u frames_tx=%" PRIu64 " frames_rx=%" PRIu64
			" retransmits=%" PRIu64 " msgs_sent=%" PRIu64 " msgs_delivered=%" PRIu64
			" msgs_failed=%" PRIu64 " dup_frames=%" PRIu64 " ooo_frames=%" PRIu64
			" bad_frames=%" PRIu64 " peer_up=%" PRIu64 " peer_downs=%" PRIu64
			" peer_restarts=%" PRIu64 " no_consumer=%" PRIu64 "\n",
			i, t->frames_tx, t->frames_rx, t->retransmits, t->msgs_sent,
			t->msgs_delivered, t->msgs_failed, t->dup_frames, t->ooo_frames,
			t->bad_frames, t->peer_up, t->peer_downs, t->peer_restarts,
			links[i].no_consumer);
	}
}

/* ---- public ----------------------------------------------------------------- */

struct tp *dp_transport(unsigned index)
{
	return links && index < nb_links ? links[index].tp : NULL;
}

int dp_set_msg_ops(const struct dp_msg_ops *ops, void *arg)
{
	if (dp__node.launched)
		return -EBUSY;
	msg_ops = ops;
	msg_arg = arg;
	return 0;
}
