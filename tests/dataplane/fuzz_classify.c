/* libFuzzer entry point for what an lcore does with one received frame
 * before the transport sees it (dataplane/arp.c dp__rx_classify: Ethernet,
 * ARP requests and replies with the neighbour learning, IPv4 header checks,
 * ICMP echo, the UDP lane). `make fuzz-classify` (clang
 * -fsanitize=fuzzer,address,undefined; FUZZ_SECS=30 by default).
 *
 * No EAL runs: arp.c is compiled into this file with rte_pktmbuf_free and
 * dp_tx replaced by fakes, the frame in a hand-made one-segment rte_mbuf
 * whose data ends where its allocation ends (ASan sees any read past the
 * frame), a node of one port and two lanes. Input byte 0 picks the port's
 * MTU and what the harness fixes up in the frame (destination MAC, the IPv4
 * destination and header checksum, the ICMP checksum) so that the fuzzer
 * gets past the checksums; the rest is the frame. Oracles besides the
 * sanitizers: each frame is either dropped (freed once, rx_drops + 1),
 * answered (dp_tx once with a well-formed ARP reply or echo reply no longer
 * than the MTU), or handed to a lane < nb_lcores as UDP to this port. */
#include "../../dataplane/internal.h"

#include <rte_arp.h>
#include <rte_icmp.h>
#include <rte_ip.h>
#include <rte_udp.h>

#include <stdlib.h>
#include <string.h>

static struct rte_mbuf *fz_cur;
static int fz_freed, fz_sent;

static void fz_pktmbuf_free(struct rte_mbuf *m)
{
	ZB_ASSERT(m == fz_cur && fz_freed == 0 && fz_sent == 0);
	fz_freed++;
}

int dp_tx(uint16_t port, struct rte_mbuf *m);

struct dp_node dp__node;

#define rte_pktmbuf_free fz_pktmbuf_free
#include "../../dataplane/arp.c"
#undef rte_pktmbuf_free

#define PORT_IP RTE_BE32(RTE_IPV4(10, 0, 0, 1))
static const uint8_t port_mac[6] = {2, 0, 0, 0, 0, 1};

static void check_reply(const struct rte_mbuf *m)
{
	const struct dp_port *p = &dp__node.ports[0];
	const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);
	const struct rte_ether_hdr *eth = (const void *)f;
	ZB_ASSERT(m->nb_segs == 1 && m->pkt_len == m->data_len);
	ZB_ASSERT(m->data_len <= (uint32_t)p->mtu + RTE_ETHER_HDR_LEN);
	ZB_ASSERT(memcmp(&eth->src_addr, port_mac, 6) == 0);
	ZB_ASSERT(rte_is_unicast_ether_addr(&eth->dst_addr) &&
		  !rte_is_zero_ether_addr(&eth->dst_addr));
	if (eth->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP)) {
		const struct rte_arp_hdr *a = (const void *)(eth + 1);
		ZB_ASSERT(a->arp_opcode == rte_cpu_to_be_16(RTE_ARP_OP_REPLY));
		ZB_ASSERT(a->arp_data.arp_sip == PORT_IP);
		ZB_ASSERT(memcmp(&a->arp_data.arp_sha, port_mac, 6) == 0);
		ZB_ASSERT(memcmp(&a->arp_data.arp_tha, &eth->dst_addr, 6) == 0);
		return;
	}
	ZB_ASSERT(eth->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4));
	const struct rte_ipv4_hdr *ip = (const void *)(eth + 1);
	uint16_t ihl = (uint16_t)((ip->version_ihl & 0xf) * 4);
	uint16_t ip_len = rte_be_to_cpu_16(ip->total_length);
	ZB_ASSERT(ihl == sizeof(*ip) && ip->next_proto_id == IPPROTO_ICMP);
	ZB_ASSERT(m->data_len == RTE_ETHER_HDR_LEN + ip_len);
	ZB_ASSERT(ip->src_addr == PORT_IP && ip->dst_addr != PORT_IP);
	ZB_ASSERT(rte_raw_cksum(ip, ihl) == 0xffff);
	const struct rte_icmp_hdr *ic = (const void *)((const uint8_t *)ip + ihl);
	ZB_ASSERT(ic->icmp_type == RTE_IP_ICMP_ECHO_REPLY);
	ZB_ASSERT(rte_raw_cksum(ic, ip_len - ihl) == 0xffff);
}

int dp_tx(uint16_t port, struct rte_mbuf *m)
{
	ZB_ASSERT(port == 0 && m == fz_cur && fz_freed == 0 && fz_sent == 0);
	check_reply(m);
	fz_sent++;
	return 1;
}

static struct zb_config cfg;
static struct dp_lcore lc;

static void setup(void)
{
	struct dp_node *n = &dp__node;
	cfg.node.id = 1;
	for (unsigned i = 1; i <= 3; i++) {
		cfg.peers[i].present = true;
		cfg.peers[i].ip = RTE_BE32(RTE_IPV4(10, 0, 0, i));
	}
	memcpy(cfg.peers[3].mac, (uint8_t[6]){2, 0, 0, 0, 0, 3}, 6);
	n->cfg = &cfg;
	n->nb_ports = 1;
	n->nb_lcores = 2;
	n->udp_port = 7471;
	n->ports[0].ip = PORT_IP;
	memcpy(&n->ports[0].mac, port_mac, 6);
}

/* ones' complement sum of len bytes, for fix-ups */
static uint16_t csum(const void *p, size_t len)
{
	return (uint16_t)~rte_raw_cksum(p, len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint16_t mtus[] = {1500, 9000, 68, 576};
	if (!dp__node.cfg)
		setup();
	if (size < 1)
		return 0;
	uint8_t mode = data[0];
	data++;
	size--;
	if (size > 0xffff - RTE_PKTMBUF_HEADROOM)
		return 0;
	struct dp_node *n = &dp__node;
	struct dp_port *p = &n->ports[0];
	p->mtu = mtus[mode & 3];
	/* the frame ends where its allocation ends */
	uint8_t *buf = malloc(RTE_PKTMBUF_HEADROOM + size);
	ZB_ASSERT(buf != NULL);
	uint8_t *f = buf + RTE_PKTMBUF_HEADROOM;
	memcpy(f, data, size);
	if ((mode & 4) && size >= 6)
		memcpy(f, port_mac, 6);
	if ((mode & 8) && size >= 14 + 20 && (f[14] & 0xf) >= 5 &&
	    14u + (f[14] & 0xfu) * 4 <= size) {
		struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(f + 14);
		size_t ihl = (f[14] & 0xfu) * 4;
		f[12] = 0x08;
		f[13] = 0x00;
		ip->version_ihl = (uint8_t)(0x40 | (f[14] & 0xf));
		ip->dst_addr = PORT_IP;
		if (mode & 0x40)
			ip->total_length = rte_cpu_to_be_16((uint16_t)(size - 14));
		if (mode & 0x80)
			ip->fragment_offset = 0;
		ip->hdr_checksum = 0;
		ip->hdr_checksum = csum(ip, ihl);
		uint16_t ip_len = rte_be_to_cpu_16(ip->total_length);
		if ((mode & 16) && ip_len >= ihl + 8 && 14u + ip_len <= size) {
			struct rte_icmp_hdr *ic = (struct rte_icmp_hdr *)(f + 14 + ihl);
			ic->icmp_cksum = 0;
			ic->icmp_cksum = csum(ic, ip_len - ihl);
		}
	}
	struct rte_mbuf *m = calloc(1, sizeof(*m));
	ZB_ASSERT(m != NULL);
	m->buf_addr = buf;
	m->buf_len = (uint16_t)(RTE_PKTMBUF_HEADROOM + size);
	m->data_off = RTE_PKTMBUF_HEADROOM;
	m->data_len = (uint16_t)size;
	m->pkt_len = (uint32_t)size;
	m->nb_segs = (mode & 0x20) && (mode & 3) == 3 ? 2 : 1;
	m->next = NULL;
	rte_mbuf_refcnt_set(m, 1);
	fz_cur = m;
	fz_freed = fz_sent = 0;
	uint64_t drops = lc.stats.rx_drops;
	uint64_t answered = lc.stats.arp_replies + lc.stats.icmp_replies;
	int lane = dp__rx_classify(&lc, p, m);
	if (lane < 0) {
		ZB_ASSERT(lane == -1 && fz_freed + fz_sent == 1);
		ZB_ASSERT(lc.stats.rx_drops == drops + (uint64_t)fz_freed);
		ZB_ASSERT(lc.stats.arp_replies + lc.stats.icmp_replies ==
			  answered + (uint64_t)fz_sent);
	} else {
		/* UDP to this port's address, to lane `lane` */
		ZB_ASSERT((unsigned)lane < n->nb_lcores && fz_freed == 0 && fz_sent == 0);
		ZB_ASSERT(lc.stats.rx_drops == drops && m->nb_segs == 1);
		const struct rte_ipv4_hdr *ip = (const void *)(f + 14);
		ZB_ASSERT(size >= 14 + 20 + 8 && f[12] == 0x08 && f[13] == 0);
		ZB_ASSERT(ip->dst_addr == PORT_IP && ip->next_proto_id == IPPROTO_UDP);
		ZB_ASSERT(size <= (size_t)p->mtu + 14);
	}
	free(m);
	free(buf);
	return 0;
}
