/* Wire format: encode and validate Ethernet / IPv4 / UDP / zbmd frames.
 * Layout: docs/wire.md. IPv4: RFC 791; UDP: RFC 768; checksums: RFC 1071. */
#include "zbmd/wire.h"
#include "zbmd/common.h"

#include <endian.h>
#include <string.h>

_Static_assert(WIRE_HDRS_LEN == 114, "header bytes documented in docs/wire.md");
_Static_assert(WIRE_REASON_COUNT < 64, "reason fits the counter array");

static const char *const wire_reason_names[WIRE_REASON_COUNT] = {
	[WIRE_OK] = "ok",
	[WIRE_E_SHORT] = "short",
	[WIRE_E_ETHERTYPE] = "ethertype",
	[WIRE_E_IP_HDR] = "ip_hdr",
	[WIRE_E_IP_LEN] = "ip_len",
	[WIRE_E_IP_FRAG] = "ip_frag",
	[WIRE_E_IP_PROTO] = "ip_proto",
	[WIRE_E_IP_CSUM] = "ip_csum",
	[WIRE_E_IP_DST] = "ip_dst",
	[WIRE_E_UDP_PORT] = "udp_port",
	[WIRE_E_UDP_LEN] = "udp_len",
	[WIRE_E_UDP_CSUM] = "udp_csum",
	[WIRE_E_VERSION] = "version",
	[WIRE_E_HDR_CSUM] = "hdr_csum",
	[WIRE_E_CLUSTER] = "cluster",
	[WIRE_E_DST_NODE] = "dst_node",
	[WIRE_E_LANE] = "lane",
	[WIRE_E_TYPE] = "type",
	[WIRE_E_RESERVED] = "reserved",
	[WIRE_E_PAYLOAD_LEN] = "payload_len",
	[WIRE_E_FRAG] = "frag",
	[WIRE_E_MSG_SIZE] = "msg_size",
	[WIRE_E_UNKNOWN_PEER] = "unknown_peer",
	[WIRE_E_SRC_ADDR] = "src_addr",
	[WIRE_E_STALE_EPOCH] = "stale_epoch",
	[WIRE_E_BAD_EPOCH] = "bad_epoch",
	[WIRE_E_SEQ_WINDOW] = "seq_window",
	[WIRE_E_ACK_RANGE] = "ack_range",
	[WIRE_E_MSG_WINDOW] = "msg_window",
	[WIRE_E_MSG_MISMATCH] = "msg_mismatch",
	[WIRE_E_STREAM] = "stream",
};

const char *wire_reason_name(enum wire_reason r)
{
	if ((unsigned)r >= WIRE_REASON_COUNT || !wire_reason_names[r])
		return "unknown";
	return wire_reason_names[r];
}

/* ---- byte order helpers (unaligned-safe) --------------------------------- */
static inline void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}
static inline void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}
static inline void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)(v >> 32));
	put32(p + 4, (uint32_t)v);
}
static inline uint16_t get16(const uint8_t *p)
{
	return (uint16_t)((p[0] << 8) | p[1]);
}
static inline uint32_t get32(const uint8_t *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
	       ((uint32_t)p[2] << 8) | p[3];
}
static inline uint64_t get64(const uint8_t *p)
{
	return ((uint64_t)get32(p) << 32) | get32(p + 4);
}

/* ---- RFC 1071 checksum ---------------------------------------------------- */
/* Inline so that a constant len (the headers') unrolls. */
static inline uint32_t csum_add(uint32_t sum, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint64_t acc = 0;
	uint32_t s16;

	/* Sum 32-bit words in native byte order into 64 bits; the
	 * ones'-complement sum does not depend on the grouping or on byte
	 * order up to a final swap (RFC 1071 section 2(B)). */
	while (len >= 32) {
		/* four 64-bit loads split into 32-bit halves: no stack copy
		 * (a 32-byte array made the compiler store vectors and reload
		 * words: store-forwarding stalls on every frame header) */
		uint64_t a, b, c, d;
		memcpy(&a, p, 8);
		memcpy(&b, p + 8, 8);
		memcpy(&c, p + 16, 8);
		memcpy(&d, p + 24, 8);
		acc += (a & 0xffffffffu) + (a >> 32) + (b & 0xffffffffu) + (b >> 32) +
		       (c & 0xffffffffu) + (c >> 32) + (d & 0xffffffffu) + (d >> 32);
		p += 32;
		len -= 32;
	}
	while (len >= 4) {
		uint32_t w;
		memcpy(&w, p, 4);
		acc += w;
		p += 4;
		len -= 4;
	}
	if (len >= 2) {
		uint16_t w;
		memcpy(&w, p, 2);
		acc += w;
		p += 2;
		len -= 2;
	}
	while (acc >> 16)
		acc = (acc & 0xffff) + (acc >> 16);
	s16 = (uint32_t)acc;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	s16 = (uint32_t)__builtin_bswap16((uint16_t)s16);
#endif
	if (len)   /* odd tail: the high byte of a final word */
		s16 += (uint32_t)p[0] << 8;
	sum += s16;
	return (sum & 0xffff) + (sum >> 16);
}

uint32_t wire_csum_add(uint32_t sum, const void *buf, size_t len)
{
	return csum_add(sum, buf, len);
}

uint16_t wire_csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/* UDP checksum over the IPv4 pseudo header, UDP header and payload. The
 * UDP header's checksum field must be zero or hold the value to verify. */
static uint16_t udp_csum(uint32_t src_ip_be, uint32_t dst_ip_be,
			 const uint8_t *udp_and_zb, size_t hdr_len,
			 const void *payload, size_t payload_len)
{
	uint8_t pseudo[12];
	uint32_t s;

	memcpy(pseudo, &src_ip_be, 4);
	memcpy(pseudo + 4, &dst_ip_be, 4);
	pseudo[8] = 0;
	pseudo[9] = WIRE_IPPROTO_UDP;
	put16(pseudo + 10, (uint16_t)(hdr_len + payload_len));
	s = wire_csum_add(0, pseudo, sizeof(pseudo));
	s = wire_csum_add(s, udp_and_zb, hdr_len);
	if (payload_len)
		s = wire_csum_add(s, payload, payload_len);
	return wire_csum_fold(s);
}

/* ---- zbmd header ---------------------------------------------------------- */

/* The ones'-complement sum of a 32-bit field's two big-endian 16-bit words.
 * TX checksums are summed from the field values as they are written: reading
 * back a header just stored in 1-, 2- and 4-byte pieces with wider loads
 * stalls on store forwarding (it was ~14 % of a memif sender's time at
 * 1500-byte frames). */
static inline uint32_t w32(uint32_t v)
{
	return (v >> 16) + (v & 0xffffu);
}

/* A header's 16-bit words summed, in two parts: the fields a template
 * keeps for every frame of a message (zb_sum_const) and those
 * wire_tmpl_fill writes per frame (zb_sum_var). 24 terms of at most
 * 0x1fffe in all: no overflow of 32 bits. */
static inline uint32_t zb_sum_const(const struct wire_hdr *h)
{
	return ((uint32_t)WIRE_VERSION << 8 | h->type) + h->lane +
	       w32(h->cluster) + h->src_node + h->dst_node + h->stream +
	       w32(h->src_epoch) + w32(h->dst_epoch) + w32(h->msg_id) +
	       w32(h->msg_len) + w32(h->frag_count) + (uint16_t)h->frag_size +
	       (uint16_t)h->share;
}

static inline uint32_t zb_sum_var(const struct wire_hdr *h)
{
	return ((uint32_t)h->flags << 8) + w32(h->seq) + w32(h->ack) +
	       w32((uint32_t)(h->sack >> 32)) + w32((uint32_t)h->sack) +
	       (uint16_t)h->credit + (uint16_t)h->payload_len +
	       w32(h->frag_index) + w32(h->tsval) + w32(h->tsecr);
}

static uint16_t zb_csum(const struct wire_hdr *h)
{
	return wire_csum_fold(zb_sum_const(h) + zb_sum_var(h));
}

/* The IPv4 header's words but total length and id (and the checksum). */
static inline uint32_t ip_sum_const(const struct wire_addr *a)
{
	return 0x4500u + 0x4000u + (64u << 8 | WIRE_IPPROTO_UDP) +
	       w32(be32toh(a->src_ip)) + w32(be32toh(a->dst_ip));
}

static void zb_put(uint8_t *z, const struct wire_hdr *h)
{
	z[0] = WIRE_VERSION;
	z[1] = h->type;
	z[2] = h->flags;
	z[3] = h->lane;
	put32(z + 4, h->cluster);
	put16(z + 8, h->src_node);
	put16(z + 10, h->dst_node);
	put16(z + 12, h->stream);
	put16(z + 14, 0); /* checksum, filled below */
	put32(z + 16, h->src_epoch);
	put32(z + 20, h->dst_epoch);
	put32(z + 24, h->seq);
	put32(z + 28, h->ack);
	put64(z + 32, h->sack);
	put16(z + 40, h->credit);
	put16(z + 42, h->payload_len);
	put32(z + 44, h->msg_id);
	put32(z + 48, h->msg_len);
	put32(z + 52, h->frag_index);
	put32(z + 56, h->frag_count);
	put16(z + 60, h->frag_size);
	put16(z + 62, h->share);
	put32(z + 64, h->tsval);
	put32(z + 68, h->tsecr);
	put16(z + 14, zb_csum(h));
	ZB_DASSERT(wire_csum_fold(wire_csum_add(0, z, WIRE_ZB_LEN)) == 0);
}

static void zb_get(const uint8_t *z, struct wire_hdr *h)
{
	h->type = z[1];
	h->flags = z[2];
	h->lane = z[3];
	h->cluster = get32(z + 4);
	h->src_node = get16(z + 8);
	h->dst_node = get16(z + 10);
	h->stream = get16(z + 12);
	h->src_epoch = get32(z + 16);
	h->dst_epoch = get32(z + 20);
	h->seq = get32(z + 24);
	h->ack = get32(z + 28);
	h->sack = get64(z + 32);
	h->credit = get16(z + 40);
	h->payload_len = get16(z + 42);
	h->msg_id = get32(z + 44);
	h->msg_len = get32(z + 48);
	h->frag_index = get32(z + 52);
	h->frag_count = get32(z + 56);
	h->frag_size = get16(z + 60);
	h->share = get16(z + 62);
	h->tsval = get32(z + 64);
	h->tsecr = get32(z + 68);
}

size_t wire_encode(uint8_t *buf, const struct wire_addr *a,
		   const struct wire_hdr *h, const void *payload,
		   uint16_t ip_id, unsigned flags)
{
	uint8_t *ip = buf + WIRE_ETH_LEN;
	uint8_t *udp = ip + WIRE_IP_LEN;
	uint8_t *z = udp + WIRE_UDP_LEN;
	size_t udp_len = WIRE_UDP_LEN + WIRE_ZB_LEN + (size_t)h->payload_len;

	ZB_ASSERT(h->type == WIRE_T_DATA || h->type == WIRE_T_ACK);
	ZB_ASSERT(udp_len + WIRE_IP_LEN <= 0xffff);
	ZB_DASSERT(h->payload_len == 0 || payload != NULL ||
		   !(flags & WIRE_TX_UDP_CSUM));

	memcpy(buf, a->dst_mac, 6);
	memcpy(buf + 6, a->src_mac, 6);
	put16(buf + 12, WIRE_ETHERTYPE_IPV4);

	ip[0] = 0x45;   /* version 4, IHL 5 */
	ip[1] = 0;      /* DSCP/ECN */
	put16(ip + 2, (uint16_t)(WIRE_IP_LEN + udp_len));
	put16(ip + 4, ip_id);
	put16(ip + 6, 0x4000); /* DF, offset 0 */
	ip[8] = 64;     /* TTL */
	ip[9] = WIRE_IPPROTO_UDP;
	put16(ip + 10, 0);
	memcpy(ip + 12, &a->src_ip, 4);
	memcpy(ip + 16, &a->dst_ip, 4);
	/* summed from the values, not read back (see w32) */
	uint32_t ipsum = ip_sum_const(a) + (uint32_t)(WIRE_IP_LEN + udp_len) + ip_id;
	put16(ip + 10, wire_csum_fold(ipsum));
	ZB_DASSERT(wire_csum_fold(wire_csum_add(0, ip, WIRE_IP_LEN)) == 0);

	put16(udp, a->src_port);
	put16(udp + 2, a->dst_port);
	put16(udp + 4, (uint16_t)udp_len);
	put16(udp + 6, 0);
	zb_put(z, h);
	if (flags & WIRE_TX_UDP_CSUM) {
		uint16_t c = udp_csum(a->src_ip, a->dst_ip, udp,
				      WIRE_UDP_LEN + WIRE_ZB_LEN, payload,
				      h->payload_len);
		put16(udp + 6, c ? c : 0xffff); /* 0 means "none" (RFC 768) */
	}
	return WIRE_HDRS_LEN;
}

/* ---- templates ------------------------------------------------------------ */

void wire_tmpl_init(struct wire_tmpl *t, const struct wire_addr *a,
		    const struct wire_hdr *h)
{
	ZB_ASSERT(h->type == WIRE_T_DATA);
	wire_encode(t->buf, a, h, NULL, 0, 0);
	t->zb_sum = zb_sum_const(h);
	t->ip_sum = ip_sum_const(a);
}

void wire_tmpl_fill(struct wire_tmpl *t, const struct wire_hdr *h,
		    uint16_t ip_id)
{
	uint8_t *ip = t->buf + WIRE_ETH_LEN;
	uint8_t *udp = ip + WIRE_IP_LEN;
	uint8_t *z = udp + WIRE_UDP_LEN;
	uint32_t udp_len = WIRE_UDP_LEN + WIRE_ZB_LEN + (uint32_t)h->payload_len;
	uint32_t ip_len = WIRE_IP_LEN + udp_len;

	ZB_DASSERT(ip_len <= 0xffff);
	ZB_DASSERT(z[1] == WIRE_T_DATA && z[3] == h->lane &&
		   get32(z + 44) == h->msg_id && get16(z + 12) == h->stream &&
		   get32(z + 16) == h->src_epoch && get32(z + 20) == h->dst_epoch &&
		   get32(z + 56) == h->frag_count && get16(z + 60) == h->frag_size);
	put16(ip + 2, (uint16_t)ip_len);
	put16(ip + 4, ip_id);
	put16(ip + 10, wire_csum_fold(t->ip_sum + ip_len + ip_id));
	put16(udp + 4, (uint16_t)udp_len);
	z[2] = h->flags;
	put32(z + 24, h->seq);
	put32(z + 28, h->ack);
	put64(z + 32, h->sack);
	put16(z + 40, h->credit);
	put16(z + 42, h->payload_len);
	put32(z + 52, h->frag_index);
	put32(z + 64, h->tsval);
	put32(z + 68, h->tsecr);
	put16(z + 14, wire_csum_fold(t->zb_sum + zb_sum_var(h)));
	ZB_DASSERT(wire_csum_fold(wire_csum_add(0, z, WIRE_ZB_LEN)) == 0);
	ZB_DASSERT(wire_csum_fold(wire_csum_add(0, ip, WIRE_IP_LEN)) == 0);
}

int wire_is_zbmd(const uint8_t *frame, size_t len, uint16_t udp_port)
{
	uint16_t dport;

	if (len < WIRE_ETH_LEN + WIRE_IP_LEN + WIRE_UDP_LEN)
		return -1;
	if (get16(frame + 12) != WIRE_ETHERTYPE_IPV4 ||
	    frame[WIRE_ETH_LEN + 9] != WIRE_IPPROTO_UDP ||
	    (frame[WIRE_ETH_LEN] & 0xf0) != 0x40)
		return -1;
	dport = get16(frame + WIRE_ETH_LEN + WIRE_IP_LEN + 2);
	return (uint16_t)(dport - udp_port) < 256 ? (int)(uint16_t)(dport - udp_port)
						  : -1;
}

/* Layers 2-4. On WIRE_OK *udp_len_out is the UDP length. */
static enum wire_reason decode_l234(const uint8_t *f, size_t len,
				    const struct wire_rx_cfg *cfg,
				    unsigned flags, struct wire_addr *a,
				    size_t *udp_len_out)
{
	const uint8_t *ip = f + WIRE_ETH_LEN;
	const uint8_t *udp = ip + WIRE_IP_LEN;
	size_t ip_len, udp_len;

	if (len < WIRE_HDRS_LEN)
		return WIRE_E_SHORT;
	if (get16(f + 12) != WIRE_ETHERTYPE_IPV4)
		return WIRE_E_ETHERTYPE;
	if (ip[0] != 0x45)
		return WIRE_E_IP_HDR;
	ip_len = get16(ip + 2);
	/* the frame may carry Ethernet padding after the IP packet */
	if (ip_len < WIRE_IP_LEN + WIRE_UDP_LEN + WIRE_ZB_LEN ||
	    ip_len > len - WIRE_ETH_LEN)
		return WIRE_E_IP_LEN;
	if (get16(ip + 6) & 0x3fff) /* MF or a fragment offset */
		return WIRE_E_IP_FRAG;
	if (ip[9] != WIRE_IPPROTO_UDP)
		return WIRE_E_IP_PROTO;
	if (!(flags & (WIRE_RX_CSUM_OK | WIRE_RX_IP_CSUM_OK)) &&
	    wire_csum_fold(csum_add(0, ip, WIRE_IP_LEN)) != 0)
		return WIRE_E_IP_CSUM;
	memcpy(&a->src_ip, ip + 12, 4);
	memcpy(&a->dst_ip, ip + 16, 4);
	if (cfg->ip && a->dst_ip != cfg->ip)
		return WIRE_E_IP_DST;
	a->src_port = get16(udp);
	a->dst_port = get16(udp + 2);
	if (a->dst_port != (uint16_t)(cfg->udp_port + cfg->lane))
		return WIRE_E_UDP_PORT;
	udp_len = get16(udp + 4);
	if (udp_len != ip_len - WIRE_IP_LEN)
		return WIRE_E_UDP_LEN;
	if (!(flags & WIRE_RX_CSUM_OK) && get16(udp + 6) != 0 &&
	    udp_csum(a->src_ip, a->dst_ip, udp, udp_len, NULL, 0) != 0)
		return WIRE_E_UDP_CSUM;
	memcpy(a->dst_mac, f, 6);
	memcpy(a->src_mac, f + 6, 6);
	*udp_len_out = udp_len;
	return WIRE_OK;
}

/* Fragment fields: index < count, count == ceil(len / size), every fragment
 * but the last carries exactly frag_size bytes, the last the remainder. */
static enum wire_reason check_frag(const struct wire_hdr *h,
				   const struct wire_rx_cfg *cfg)
{
	uint64_t off, fs = h->frag_size, c = h->frag_count, len = h->msg_len;

	if (h->msg_len > cfg->msg_max)
		return WIRE_E_MSG_SIZE;
	if (h->frag_size == 0 || h->frag_size > cfg->frag_max)
		return WIRE_E_FRAG;
	/* frag_count == ceil(msg_len / frag_size), 1 for an empty message:
	 * (c - 1) fs < len <= c fs, without a division on every frame
	 * (products < 2^48) */
	if (len == 0 ? c != 1 : c == 0 || (c - 1) * fs >= len || c * fs < len)
		return WIRE_E_FRAG;
	if (h->frag_index >= h->frag_count)
		return WIRE_E_FRAG;
	off = (uint64_t)h->frag_index * h->frag_size;
	if (h->frag_index + 1 < h->frag_count)
		return h->payload_len == h->frag_size ? WIRE_OK : WIRE_E_FRAG;
	return off + h->payload_len == h->msg_len ? WIRE_OK : WIRE_E_FRAG;
}

enum wire_reason wire_decode(const uint8_t *frame, size_t len,
			     const struct wire_rx_cfg *cfg, unsigned flags,
			     struct wire_hdr *h, struct wire_addr *a,
			     const uint8_t **payload)
{
	size_t udp_len = 0;
	enum wire_reason r;

	ZB_DASSERT(cfg != NULL && h != NULL && a != NULL && payload != NULL);
	if (frame == NULL)
		return WIRE_E_SHORT;
	const uint8_t *z = frame + WIRE_ETH_LEN + WIRE_IP_LEN + WIRE_UDP_LEN;
	r = decode_l234(frame, len, cfg, flags, a, &udp_len);
	if (r != WIRE_OK)
		return r;
	if (z[0] != WIRE_VERSION)
		return WIRE_E_VERSION;
	if (wire_csum_fold(csum_add(0, z, WIRE_ZB_LEN)) != 0)
		return WIRE_E_HDR_CSUM;
	zb_get(z, h);
	if (h->cluster != cfg->cluster)
		return WIRE_E_CLUSTER;
	if (h->dst_node != cfg->node)
		return WIRE_E_DST_NODE;
	if (h->lane != cfg->lane)
		return WIRE_E_LANE;
	if (h->flags & ~WIRE_F_KNOWN)
		return WIRE_E_RESERVED;
	if (h->payload_len != udp_len - WIRE_UDP_LEN - WIRE_ZB_LEN)
		return WIRE_E_PAYLOAD_LEN;
	if (h->type == WIRE_T_DATA) {
		r = check_frag(h, cfg);
		if (r != WIRE_OK)
			return r;
	} else if (h->type == WIRE_T_ACK) {
		/* msg_len: the largest message the ACK's sender takes;
		 * stream: its stream count (docs/wire.md) */
		if (h->payload_len || h->seq || h->msg_id ||
		    h->frag_index || h->frag_count || h->frag_size)
			return WIRE_E_RESERVED;
	} else {
		return WIRE_E_TYPE;
	}
	*payload = z + WIRE_ZB_LEN;
	return WIRE_OK;
}
