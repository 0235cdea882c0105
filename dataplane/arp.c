/* dataplane/arp.c — what an lcore does with one received frame.
 *
 * A well-behaved host on the port's subnet: ARP requests for the port's IP
 * are answered (RFC 826), ICMP echo requests to it are answered (RFC 792),
 * UDP to [dataplane] udp_port + L (lane L, L < the lcore count) is handed
 * back to the caller (the transport of lane L).
 * Everything else — frames for other MACs, other protocols, malformed or
 * truncated headers, fragments, frames longer than the port's MTU, ARP not
 * answered, echoes with IP options or from a source no host may have — is
 * freed and counted in rx_drops. Replies
 * are built in place in the received mbuf and queued on the same lcore's TX
 * buffer, so answering allocates nothing.
 */
#include "internal.h"

#include <string.h>

#include <rte_arp.h>
#include <rte_icmp.h>
#include <rte_ip.h>
#include <rte_udp.h>

static inline int drop(struct dp_lcore *lc, struct rte_mbuf *m)
{
	rte_pktmbuf_free(m);
	DP_STAT_ADD(lc, rx_drops, 1);
	return -1;
}

static inline uint16_t port_index(const struct dp_port *p)
{
	return (uint16_t)(p - dp__node.ports);
}

#define NEIGH_KNOWN (1ull << 63)
#define ARP_RETRY_MS 200

/* Wire headers may sit at any byte offset in an mbuf (some virtual devices
 * deliver frames 2-byte misaligned), so MACs in them are read and written
 * as bytes (memcpy), never through struct rte_ether_addr lvalues. */
static bool mac_is_zero(const void *mac)
{
	static const uint8_t zero[RTE_ETHER_ADDR_LEN];
	return memcmp(mac, zero, RTE_ETHER_ADDR_LEN) == 0;
}

static uint64_t mac_word(const void *mac)
{
	const uint8_t *b = mac;
	uint64_t w = 0;
	for (int i = 0; i < RTE_ETHER_ADDR_LEN; i++)
		w = (w << 8) | b[i];
	return w;
}

/* Learn the MAC of a peer whose MAC the config left to ARP ([peer.N] mac =
 * 00:00:00:00:00:00) from an ARP frame it sent us: a request for this
 * port's IP (the peer resolving us: also after it restarted with another
 * MAC), or a reply to this port's IP while the peer is unresolved (ours,
 * sent every ARP_RETRY_MS). The frame's Ethernet source must be the MAC it
 * claims. Until 2026-11-29 any well-formed ARP frame naming a peer's IP
 * taught its MAC — a gratuitous one, a reply nobody asked for, a request
 * for another host — so any station on the link could take a resolved
 * peer's traffic for good (entries never expire). ARP has no
 * authentication: on a link with hostile stations, give [peer.N] mac. */
static void arp_learn(struct dp_lcore *lc, const struct dp_port *p,
		      const struct rte_ether_hdr *eth, const struct rte_arp_hdr *arp)
{
	const struct zb_config *cfg = dp__node.cfg;
	const struct rte_arp_ipv4 *d = &arp->arp_data;
	bool reply = arp->arp_opcode == rte_cpu_to_be_16(RTE_ARP_OP_REPLY);
	struct rte_ether_addr sha;
	memcpy(&sha, &d->arp_sha, RTE_ETHER_ADDR_LEN);
	if (d->arp_sip == 0 || p->ip == 0 || d->arp_tip != p->ip ||
	    d->arp_sip == d->arp_tip || rte_is_zero_ether_addr(&sha) ||
	    !rte_is_unicast_ether_addr(&sha) ||
	    memcmp(&eth->src_addr, &sha, RTE_ETHER_ADDR_LEN) != 0 ||
	    (!reply && arp->arp_opcode != rte_cpu_to_be_16(RTE_ARP_OP_REQUEST)))
		return;
	for (unsigned i = 0; i < CFG_MAX_NODES; i++) {
		const struct cfg_peer *pe = &cfg->peers[i];
		if (!pe->present || pe->ip != d->arp_sip ||
		    !mac_is_zero(pe->mac))
			continue;
		uint64_t w = NEIGH_KNOWN | mac_word(&sha);
		uint64_t cur = __atomic_load_n(&dp__node.neigh[i], __ATOMIC_RELAXED);
		if (reply && (cur & NEIGH_KNOWN))
			continue;   /* resolved: a reply nobody asked for */
		if (cur != w) {
			__atomic_store_n(&dp__node.neigh[i], w, __ATOMIC_RELEASE);
			DP_STAT_ADD(lc, arp_learned, 1);
		}
	}
}

static int arp_input(struct dp_lcore *lc, const struct dp_port *p,
		     struct rte_mbuf *m, struct rte_ether_hdr *eth)
{
	if (unlikely(m->data_len < sizeof(*eth) + sizeof(struct rte_arp_hdr)))
		return drop(lc, m);
	struct rte_arp_hdr *arp = (struct rte_arp_hdr *)(eth + 1);
	if (arp->arp_hardware != rte_cpu_to_be_16(RTE_ARP_HRD_ETHER) ||
	    arp->arp_protocol != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4) ||
	    arp->arp_hlen != RTE_ETHER_ADDR_LEN || arp->arp_plen != 4)
		return drop(lc, m);
	arp_learn(lc, p, eth, arp);
	if (arp->arp_opcode != rte_cpu_to_be_16(RTE_ARP_OP_REQUEST) ||
	    p->ip == 0 || arp->arp_data.arp_tip != p->ip)
		return drop(lc, m);   /* a reply (learnt above), or not for us */

	struct rte_arp_ipv4 *d = &arp->arp_data;
	/* answer only a unicast asker: a request naming a broadcast or
	 * multicast sender would turn one frame into one to every host */
	if (unlikely(!rte_is_unicast_ether_addr(&d->arp_sha) ||
		     rte_is_zero_ether_addr(&d->arp_sha)))
		return drop(lc, m);
	memcpy(&eth->dst_addr, &d->arp_sha, RTE_ETHER_ADDR_LEN);
	memcpy(&eth->src_addr, &p->mac, RTE_ETHER_ADDR_LEN);
	arp->arp_opcode = rte_cpu_to_be_16(RTE_ARP_OP_REPLY);
	memcpy(&d->arp_tha, &d->arp_sha, RTE_ETHER_ADDR_LEN);
	d->arp_tip = d->arp_sip;
	memcpy(&d->arp_sha, &p->mac, RTE_ETHER_ADDR_LEN);
	d->arp_sip = p->ip;
	DP_STAT_ADD(lc, arp_replies, 1);
	dp_tx(port_index(p), m);
	return -1;
}

static int icmp_input(struct dp_lcore *lc, const struct dp_port *p,
		      struct rte_mbuf *m, struct rte_ether_hdr *eth,
		      struct rte_ipv4_hdr *ip, uint16_t ihl, uint16_t ip_len)
{
	if (unlikely(ip_len < ihl + sizeof(struct rte_icmp_hdr)))
		return drop(lc, m);
	struct rte_icmp_hdr *icmp = (struct rte_icmp_hdr *)((char *)ip + ihl);
	uint16_t icmp_len = (uint16_t)(ip_len - ihl);
	if (icmp->icmp_type != RTE_IP_ICMP_ECHO_REQUEST || icmp->icmp_code != 0 ||
	    rte_raw_cksum(icmp, icmp_len) != 0xffff)
		return drop(lc, m);

	/* no echo to a broadcast or multicast source (a smurf amplifier), nor
	 * to one no host may have (RFC 1122 3.2.1.3: this network 0/8,
	 * loopback 127/8, class E 240/4, this port's own address); no IP
	 * options (the reply would carry a source route or record route back
	 * unchanged: RFC 1122 3.2.2.6 wants them reversed or updated) */
	uint32_t src = rte_be_to_cpu_32(ip->src_addr);
	if (unlikely(!rte_is_unicast_ether_addr(&eth->src_addr) ||
		     rte_is_zero_ether_addr(&eth->src_addr) || (src >> 24) == 0 ||
		     (src >> 24) == 127 || (src >> 28) >= 0xe ||
		     ip->src_addr == p->ip || ihl != sizeof(*ip)))
		return drop(lc, m);
	struct rte_ether_addr tmp;
	memcpy(&tmp, &eth->src_addr, RTE_ETHER_ADDR_LEN);
	memcpy(&eth->src_addr, &p->mac, RTE_ETHER_ADDR_LEN);
	memcpy(&eth->dst_addr, &tmp, RTE_ETHER_ADDR_LEN);
	ip->dst_addr = ip->src_addr;
	ip->src_addr = p->ip;
	ip->time_to_live = 64;
	ip->hdr_checksum = 0;
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	icmp->icmp_type = RTE_IP_ICMP_ECHO_REPLY;
	icmp->icmp_cksum = 0;
	icmp->icmp_cksum = (uint16_t)~rte_raw_cksum(icmp, icmp_len);
	/* trim Ethernet padding so the reply is exactly the echo */
	if (m->pkt_len > sizeof(*eth) + ip_len)
		rte_pktmbuf_trim(m, (uint16_t)(m->pkt_len - sizeof(*eth) - ip_len));
	DP_STAT_ADD(lc, icmp_replies, 1);
	dp_tx(port_index(p), m);
	return -1;
}

int dp__rx_classify(struct dp_lcore *lc, const struct dp_port *p,
		    struct rte_mbuf *m)
{
	ZB_DASSERT(lc != NULL && p != NULL && m != NULL);
	/* longer than the port's MTU: never sent by a well-behaved host, and
	 * an answer to it could not leave (an af_packet port hands over what
	 * the kernel reassembled from fragments: a 1642-byte echo at MTU
	 * 1500 was answered with a frame the link dropped, uncounted) */
	if (unlikely(m->nb_segs != 1 || m->data_len < sizeof(struct rte_ether_hdr) ||
		     m->data_len > (uint32_t)p->mtu + RTE_ETHER_HDR_LEN))
		return drop(lc, m);
	struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	static const uint8_t bcast[RTE_ETHER_ADDR_LEN] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
	if (memcmp(&eth->dst_addr, &p->mac, RTE_ETHER_ADDR_LEN) != 0 &&
	    memcmp(&eth->dst_addr, bcast, RTE_ETHER_ADDR_LEN) != 0)
		return drop(lc, m);
	if (eth->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP))
		return arp_input(lc, p, m, eth);
	if (eth->ether_type != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4))
		return drop(lc, m);

	/* IPv4: version, header length, total length within the frame, our
	 * address, header checksum, no fragment. */
	if (unlikely(m->data_len < sizeof(*eth) + sizeof(struct rte_ipv4_hdr)))
		return drop(lc, m);
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(eth + 1);
	uint16_t ihl = (uint16_t)((ip->version_ihl & 0xf) * 4);
	uint16_t ip_len = rte_be_to_cpu_16(ip->total_length);
	if ((ip->version_ihl >> 4) != 4 || ihl < sizeof(*ip) || ip_len < ihl ||
	    ip_len > m->data_len - sizeof(*eth) || p->ip == 0 ||
	    ip->dst_addr != p->ip ||
	    (ip->fragment_offset & rte_cpu_to_be_16(RTE_IPV4_HDR_MF_FLAG |
						    RTE_IPV4_HDR_OFFSET_MASK)) ||
	    rte_raw_cksum(ip, ihl) != 0xffff)
		return drop(lc, m);
	if (ip->next_proto_id == IPPROTO_ICMP)
		return icmp_input(lc, p, m, eth, ip, ihl, ip_len);
	if (ip->next_proto_id != IPPROTO_UDP ||
	    ip_len < ihl + sizeof(struct rte_udp_hdr))
		return drop(lc, m);
	struct rte_udp_hdr *udp = (struct rte_udp_hdr *)((char *)ip + ihl);
	/* lane L listens on udp_port + L (one transport instance per lcore) */
	uint16_t lane = (uint16_t)(rte_be_to_cpu_16(udp->dst_port) - dp__node.udp_port);
	if (lane >= dp__node.nb_lcores)
		return drop(lc, m);
	return lane;
}

/* ---- neighbours ------------------------------------------------------------ */

void dp__neigh_init(struct dp_node *n)
{
	ZB_ASSERT(n != NULL && n->cfg != NULL);
	ZB_ASSERT(!n->launched);
	for (unsigned i = 0; i < CFG_MAX_NODES; i++) {
		const struct cfg_peer *pe = &n->cfg->peers[i];
		n->neigh[i] = 0;
		if (pe->present &&
		    !mac_is_zero(pe->mac))
			n->neigh[i] = NEIGH_KNOWN |
				      mac_word(pe->mac);
	}
	n->neigh_next_tsc = 0;
}

static struct rte_mbuf *arp_request(const struct dp_port *p, uint32_t tip)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(p->pool);
	if (unlikely(m == NULL))
		return NULL;
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)rte_pktmbuf_append(
		m, sizeof(*eth) + sizeof(struct rte_arp_hdr));
	if (unlikely(eth == NULL)) {   /* data room smaller than an ARP frame */
		rte_pktmbuf_free(m);
		return NULL;
	}
	struct rte_arp_hdr *arp = (struct rte_arp_hdr *)(eth + 1);
	memset(&eth->dst_addr, 0xff, RTE_ETHER_ADDR_LEN);
	memcpy(&eth->src_addr, &p->mac, RTE_ETHER_ADDR_LEN);
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP);
	arp->arp_hardware = rte_cpu_to_be_16(RTE_ARP_HRD_ETHER);
	arp->arp_protocol = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	arp->arp_hlen = RTE_ETHER_ADDR_LEN;
	arp->arp_plen = 4;
	arp->arp_opcode = rte_cpu_to_be_16(RTE_ARP_OP_REQUEST);
	memcpy(&arp->arp_data.arp_sha, &p->mac, RTE_ETHER_ADDR_LEN);
	arp->arp_data.arp_sip = p->ip;
	memset(&arp->arp_data.arp_tha, 0, RTE_ETHER_ADDR_LEN);
	arp->arp_data.arp_tip = tip;
	return m;
}

unsigned dp__arp_tick(struct dp_lcore *lc, uint64_t now)
{
	struct dp_node *n = &dp__node;
	ZB_DASSERT(lc != NULL && lc->index == 0);
	if (now < n->neigh_next_tsc)
		return 0;
	n->neigh_next_tsc = now + rte_get_tsc_hz() / 1000 * ARP_RETRY_MS;
	unsigned sent = 0;
	for (unsigned i = 0; i < CFG_MAX_NODES; i++) {
		const struct cfg_peer *pe = &n->cfg->peers[i];
		if (!pe->present || i == n->cfg->node.id || pe->ip == 0 ||
		    __atomic_load_n(&n->neigh[i], __ATOMIC_RELAXED) & NEIGH_KNOWN)
			continue;
		int k = pe->port < CFG_MAX_PORTS ? n->port_of_cfg[pe->port] : -1;
		if (k < 0 || n->ports[k].ip == 0)
			continue;
		struct rte_mbuf *m = arp_request(&n->ports[k], pe->ip);
		if (m && dp_tx((uint16_t)k, m)) {
			DP_STAT_ADD(lc, arp_requests, 1);
			sent++;
		}
	}
	return sent;
}

int dp_peer_mac(uint16_t node, uint8_t mac[6])
{
	const struct dp_node *n = &dp__node;
	if (node >= CFG_MAX_NODES || !n->cfg || !n->cfg->peers[node].present)
		return -EINVAL;
	uint64_t w = __atomic_load_n(&n->neigh[node], __ATOMIC_ACQUIRE);
	if (!(w & NEIGH_KNOWN))
		return -EAGAIN;
	for (int i = 5; i >= 0; i--, w >>= 8)
		mac[i] = (uint8_t)w;
	return 0;
}
