/* Wire format: round trip, checksums, and one refusal per reason. */
#include "tap.h"
#include "zbmd/wire.h"

#include <arpa/inet.h>
#include <stdbool.h>

static const struct wire_rx_cfg cfg = {
	.cluster = 77, .node = 2, .lane = 1, .ip = 0, /* set in main */
	.udp_port = 7000, .frag_max = 1500, .msg_max = 1 << 20,
};

static struct wire_addr addr(void)
{
	struct wire_addr a = {
		.src_mac = {2, 0, 0, 0, 0, 1}, .dst_mac = {2, 0, 0, 0, 0, 2},
		.src_port = 7001, .dst_port = 7001,
	};
	a.src_ip = htonl(0x0a000001);
	a.dst_ip = htonl(0x0a000002);
	return a;
}

static struct wire_hdr data_hdr(void)
{
	struct wire_hdr h = {
		.type = WIRE_T_DATA, .flags = WIRE_F_ACKREQ, .lane = 1,
		.cluster = 77, .src_node = 1, .dst_node = 2, .stream = 3,
		.src_epoch = 0x11111111, .dst_epoch = 0x22222222,
		.seq = 0xfffffff0, .ack = 5, .sack = 0x8000000000000001ull,
		.credit = 200, .payload_len = 100, .msg_id = 9,
		.msg_len = 3000, .frag_index = 2, .frag_count = 3,
		.frag_size = 1450, .tsval = 0xdeadbeef, .tsecr = 7,
	};
	return h;
}

static uint8_t frame[2048], payload[1500];

static int same(const struct wire_hdr *a, const struct wire_hdr *b)
{
	return a->type == b->type && a->flags == b->flags && a->lane == b->lane &&
	       a->cluster == b->cluster && a->src_node == b->src_node &&
	       a->dst_node == b->dst_node && a->stream == b->stream &&
	       a->src_epoch == b->src_epoch && a->dst_epoch == b->dst_epoch &&
	       a->seq == b->seq && a->ack == b->ack && a->sack == b->sack &&
	       a->credit == b->credit && a->payload_len == b->payload_len &&
	       a->msg_id == b->msg_id && a->msg_len == b->msg_len &&
	       a->frag_index == b->frag_index && a->frag_count == b->frag_count &&
	       a->frag_size == b->frag_size && a->tsval == b->tsval &&
	       a->tsecr == b->tsecr;
}

static size_t build(const struct wire_hdr *h, unsigned flags)
{
	struct wire_addr a = addr();
	size_t n = wire_encode(frame, &a, h, payload, 0x1234, flags);
	memcpy(frame + n, payload, h->payload_len);
	return n + h->payload_len;
}

static enum wire_reason dec(size_t len, struct wire_hdr *h)
{
	struct wire_rx_cfg c = cfg;
	struct wire_addr a;
	const uint8_t *pl;
	c.ip = htonl(0x0a000002);
	return wire_decode(frame, len, &c, 0, h, &a, &pl);
}

/* Recompute the IPv4 checksum after editing the IP header in a test. */
static void fix_ip(void)
{
	uint8_t *ip = frame + WIRE_ETH_LEN;
	ip[10] = ip[11] = 0;
	uint16_t c = wire_csum_fold(wire_csum_add(0, ip, WIRE_IP_LEN));
	ip[10] = (uint8_t)(c >> 8);
	ip[11] = (uint8_t)c;
}
/* ... and the zbmd header checksum after editing the zbmd header. */
static void fix_zb(void)
{
	uint8_t *z = frame + WIRE_ETH_LEN + WIRE_IP_LEN + WIRE_UDP_LEN;
	z[14] = z[15] = 0;
	uint16_t c = wire_csum_fold(wire_csum_add(0, z, WIRE_ZB_LEN));
	z[14] = (uint8_t)(c >> 8);
	z[15] = (uint8_t)c;
}

static uint8_t *zb(void) { return frame + WIRE_ETH_LEN + WIRE_IP_LEN + WIRE_UDP_LEN; }

/* straightforward RFC 1071, one 16-bit word at a time, big-endian */
static uint16_t ref_csum(const uint8_t *p, size_t n)
{
	uint32_t s = 0;
	for (size_t i = 0; i + 1 < n; i += 2)
		s += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (n & 1)
		s += (uint32_t)p[n - 1] << 8;
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

static void test_csum(void)
{
	/* the classic IPv4 header example: checksum 0xb861 */
	static const uint8_t ip[20] = {0x45, 0, 0, 0x73, 0, 0, 0x40, 0, 0x40, 0x11,
				       0, 0, 0xc0, 0xa8, 0, 1, 0xc0, 0xa8, 0, 0xc7};
	uint8_t buf[3000];
	uint64_t x = 88172645463325252ull;
	int bad = 0;

	is_int(wire_csum_fold(wire_csum_add(0, ip, 20)), 0xb861,
	       "IPv4 header checksum of the RFC 1071 example is 0xb861");
	for (int t = 0; t < 2000; t++) {
		size_t n, cut;
		for (size_t i = 0; i < sizeof(buf); i++) {
			x ^= x << 13; x ^= x >> 7; x ^= x << 17;
			buf[i] = (uint8_t)x;
		}
		n = x % sizeof(buf);
		cut = (x >> 20) % (n + 1) & ~(size_t)1;   /* even split point */
		if (wire_csum_fold(wire_csum_add(0, buf, n)) != ref_csum(buf, n) ||
		    wire_csum_fold(wire_csum_add(wire_csum_add(0, buf, cut),
						 buf + cut, n - cut)) != ref_csum(buf, n))
			bad++;
	}
	is_int(bad, 0, "checksum equals a reference RFC 1071 sum on 2000 random buffers, whole and split");
}

static uint64_t xs(uint64_t *x)
{
	*x ^= *x << 13; *x ^= *x >> 7; *x ^= *x << 17;
	return *x;
}

/* wire_tmpl: the same bytes as wire_encode for any values, fields at their
 * extremes included, over many frames from one template. */
static void test_tmpl(void)
{
	static const uint32_t edge[] = {0, 1, 0xffff, 0x10000, 0x7fffffff,
					0xfffffffe, 0xffffffff};
	uint64_t x = 0x9e3779b97f4a7c15ull;
	uint8_t ref[WIRE_HDRS_LEN];
	int bad = 0, undecoded = 0, frames = 0;

	for (int t = 0; t < 300; t++) {
		struct wire_addr a = addr();
		struct wire_hdr c = data_hdr();
		struct wire_tmpl tm;
		a.src_ip = (uint32_t)xs(&x);
		a.dst_ip = t % 7 == 0 ? 0xffffffffu : (uint32_t)xs(&x);
		a.src_port = a.dst_port = (uint16_t)xs(&x);
		c.lane = (uint8_t)xs(&x);
		c.cluster = t % 5 == 0 ? 0xffffffffu : (uint32_t)xs(&x);
		c.src_node = (uint16_t)xs(&x);
		c.dst_node = (uint16_t)xs(&x);
		c.stream = (uint16_t)xs(&x);
		c.src_epoch = edge[t % 7] ^ (t % 2 ? 0 : (uint32_t)xs(&x));
		c.dst_epoch = (uint32_t)xs(&x);
		c.msg_id = (uint32_t)xs(&x);
		c.msg_len = (uint32_t)xs(&x);
		c.frag_count = (uint32_t)xs(&x);
		c.frag_size = (uint16_t)xs(&x);
		wire_tmpl_init(&tm, &a, &c);
		for (int f = 0; f < 40; f++) {
			struct wire_hdr h = c;
			uint16_t id = (uint16_t)xs(&x);
			bool ext = (f + t) % 3 == 0;   /* extremes */
			h.flags = (uint8_t)(xs(&x) & (WIRE_F_ACKREQ | WIRE_F_RESET));
			h.seq = ext ? edge[f % 7] : (uint32_t)xs(&x);
			h.ack = ext ? edge[(f + 3) % 7] : (uint32_t)xs(&x);
			h.sack = ext ? ~0ull : xs(&x);
			h.credit = ext ? 0xffff : (uint16_t)xs(&x);
			h.payload_len = (uint16_t)(xs(&x) % (0xffff - WIRE_HDRS_LEN + 15));
			h.frag_index = ext ? 0xffffffffu : (uint32_t)xs(&x);
			h.tsval = ext ? 0xffffffffu : (uint32_t)xs(&x);
			h.tsecr = (uint32_t)xs(&x);
			wire_tmpl_fill(&tm, &h, id);
			wire_encode(ref, &a, &h, NULL, id, 0);
			bad += memcmp(ref, tm.buf, WIRE_HDRS_LEN) != 0;
			frames++;
		}
	}
	/* and one the receiver takes back */
	{
		struct wire_addr a = addr(), ra;
		struct wire_hdr c = data_hdr(), g;
		struct wire_rx_cfg rc = cfg;
		struct wire_tmpl tm;
		const uint8_t *pl;
		rc.ip = a.dst_ip;
		wire_tmpl_init(&tm, &a, &c);
		for (uint32_t i = 0; i < 3; i++) {
			c.seq = 0xfffffffe + i;
			c.frag_index = i;
			c.payload_len = i == 2 ? 100 : 1450;
			wire_tmpl_fill(&tm, &c, (uint16_t)i);
			memcpy(frame, tm.buf, WIRE_HDRS_LEN);
			memcpy(frame + WIRE_HDRS_LEN, payload, c.payload_len);
			if (wire_decode(frame, WIRE_HDRS_LEN + c.payload_len, &rc, 0,
					&g, &ra, &pl) != WIRE_OK || !same(&g, &c))
				undecoded++;
		}
	}
	is_int(bad, 0, "wire_tmpl_fill writes wire_encode's bytes (%d frames of 300 templates)",
	       frames);
	is_int(undecoded, 0, "frames from a template decode to their header");
}

/* The fragment count must be ceil(msg_len / frag_size) (1 for an empty
 * message): wire_decode's division-free test against the division, at the
 * edges of every boundary. */
static void test_frag_count(void)
{
	static const uint32_t sizes[] = {1, 7, 64, 1344, 1450, 1500};
	int wrong = 0, cases = 0;

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint64_t fs = sizes[i];
		uint64_t lens[] = {0, 1, fs - 1, fs, fs + 1, 2 * fs - 1, 2 * fs,
				   2 * fs + 1, 1000 * fs - 1, 1000 * fs, 1000 * fs + 1,
				   cfg.msg_max - 1, cfg.msg_max};
		for (size_t j = 0; j < sizeof(lens) / sizeof(lens[0]); j++) {
			uint64_t len = lens[j];
			if (len > cfg.msg_max)
				continue;
			uint64_t ref = len ? (len + fs - 1) / fs : 1;
			uint64_t counts[] = {0, 1, ref - 1, ref, ref + 1, 0xffffffffu};
			for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
				struct wire_hdr h = data_hdr(), g;
				h.msg_len = (uint32_t)len;
				h.frag_size = (uint16_t)fs;
				h.frag_count = (uint32_t)counts[k];
				h.frag_index = 0;
				h.payload_len = (uint16_t)(ref == 1 ? len : fs);
				enum wire_reason r = dec(build(&h, 0), &g);
				enum wire_reason want = counts[k] == ref ? WIRE_OK : WIRE_E_FRAG;
				if (r != want) {
					wrong++;
					tap_diag("fs %lu len %lu count %lu: %s", (unsigned long)fs,
					     (unsigned long)len, (unsigned long)counts[k],
					     wire_reason_name(r));
				}
				cases++;
			}
		}
	}
	is_int(wrong, 0, "fragment count accepted exactly when it is ceil(msg_len / frag_size) (%d cases)",
	       cases);
}

int main(void)
{
	struct wire_hdr h = data_hdr(), g;
	size_t len;
	enum wire_reason r;

	tap_plan(45);
	test_csum();
	test_tmpl();
	test_frag_count();
	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)(i * 13 + 1);

	/* round trip */
	len = build(&h, 0);
	is_int(len, 114 + 100, "frame length = 114 + payload");
	r = dec(len, &g);
	is_int(r, WIRE_OK, "valid frame decodes");
	ok(same(&g, &h), "every header field round-trips");
	ok(frame[12] == 0x08 && frame[13] == 0x00, "ethertype IPv4 at bytes 12-13");
	ok(zb()[0] == WIRE_VERSION && zb()[1] == WIRE_T_DATA, "version, type at zbmd bytes 0-1");

	/* with UDP checksum */
	len = build(&h, WIRE_TX_UDP_CSUM);
	is_int(dec(len, &g), WIRE_OK, "software UDP checksum verifies");
	frame[len - 1] ^= 0x40;
	is_int(dec(len, &g), WIRE_E_UDP_CSUM, "payload bit flip caught by UDP checksum");
	{
		struct wire_rx_cfg c = cfg;
		struct wire_addr a;
		const uint8_t *pl;
		c.ip = htonl(0x0a000002);
		is_int(wire_decode(frame, len, &c, WIRE_RX_CSUM_OK, &g, &a, &pl),
		       WIRE_OK, "WIRE_RX_CSUM_OK trusts the NIC's verdict");
	}

	/* ack frame */
	{
		struct wire_hdr ak = {.type = WIRE_T_ACK, .lane = 1, .cluster = 77,
				      .src_node = 1, .dst_node = 2, .src_epoch = 1,
				      .ack = 10, .sack = 6, .credit = 64};
		len = build(&ak, 0);
		is_int(dec(len, &g), WIRE_OK, "ack frame decodes");
		ak.msg_len = 8u << 20;   /* its sender's max_message */
		len = build(&ak, 0);
		ok(dec(len, &g) == WIRE_OK && g.msg_len == 8u << 20,
		   "an ack states its sender's max_message in msg_len");
		ak.msg_len = 0;
		ak.frag_count = 1;
		len = build(&ak, 0);
		is_int(dec(len, &g), WIRE_E_RESERVED, "ack with a fragment count is refused");
		ak.frag_count = 0;
		ak.stream = 8;   /* its sender's stream count */
		len = build(&ak, 0);
		ok(dec(len, &g) == WIRE_OK && g.stream == 8,
		   "an ack may state its sender's stream count in stream");
	}

	/* truncation at every length */
	len = build(&h, 0);
	{
		int bad = 0;
		for (size_t l = 0; l < len; l++)
			if (dec(l, &g) == WIRE_OK)
				bad++;
		is_int(bad, 0, "every truncated frame is refused");
	}
	{
		struct wire_addr a;
		const uint8_t *pl;
		is_int(wire_decode(NULL, 0, &cfg, 0, &g, &a, &pl), WIRE_E_SHORT,
		       "no frame at all is refused as short");
	}
	/* Ethernet padding after the IP packet is fine */
	is_int(dec(len + 20, &g), WIRE_OK, "trailing Ethernet padding accepted");

#define MUT(desc, expect, stmt)                                                \
	do {                                                                   \
		len = build(&h, 0);                                            \
		stmt;                                                          \
		is_int(dec(len, &g), expect, desc);                            \
	} while (0)
	MUT("ethertype", WIRE_E_ETHERTYPE, frame[12] = 0x86);
	MUT("IP options", WIRE_E_IP_HDR, (frame[14] = 0x46, fix_ip()));
	MUT("IP total length beyond frame", WIRE_E_IP_LEN, (frame[16] = 0x7f, fix_ip()));
	MUT("IP fragment", WIRE_E_IP_FRAG, (frame[20] = 0x20, fix_ip()));
	MUT("IP protocol", WIRE_E_IP_PROTO, (frame[23] = 6, fix_ip()));
	MUT("IP checksum", WIRE_E_IP_CSUM, frame[24] ^= 1);
	MUT("IP destination", WIRE_E_IP_DST, (frame[33] = 9, fix_ip()));
	MUT("UDP port", WIRE_E_UDP_PORT, frame[37] ^= 2);
	MUT("UDP length", WIRE_E_UDP_LEN, frame[39] ^= 1);
	MUT("zbmd version", WIRE_E_VERSION, zb()[0] = 2);
	MUT("zbmd header checksum", WIRE_E_HDR_CSUM, zb()[30] ^= 0x10);
	MUT("cluster", WIRE_E_CLUSTER, (zb()[7] = 78, fix_zb()));
	MUT("destination node", WIRE_E_DST_NODE, (zb()[11] = 3, fix_zb()));
	MUT("lane", WIRE_E_LANE, (zb()[3] = 0, fix_zb()));
	MUT("type", WIRE_E_TYPE, (zb()[1] = 9, fix_zb()));
	MUT("unknown flag", WIRE_E_RESERVED, (zb()[2] = 0x80, fix_zb()));
	{
		struct wire_hdr hs = h;
		hs.share = 0x1234;   /* the sender's arena share: carried, not checked */
		len = build(&hs, 0);
		int drc = dec(len, &g);
		ok(drc == WIRE_OK && g.share == 0x1234,
		   "the arena share field round-trips (%#x)", g.share);
	}
	MUT("payload length", WIRE_E_PAYLOAD_LEN, (zb()[43] = 99, fix_zb()));
	MUT("fragment index >= count", WIRE_E_FRAG, (zb()[55] = 3, fix_zb()));
	MUT("fragment count wrong", WIRE_E_FRAG, (zb()[59] = 4, fix_zb()));
	MUT("middle fragment short", WIRE_E_FRAG, (zb()[55] = 1, fix_zb()));
	MUT("message too big", WIRE_E_MSG_SIZE, (zb()[48] = 1, fix_zb()));

	is_int(wire_is_zbmd(frame, len, 7000), 1, "wire_is_zbmd: port 7001 is lane 1 of base 7000");
	is_int(wire_is_zbmd(frame, len, 7500), -1, "wire_is_zbmd: another port range is -1");
	for (int i = 0; i < WIRE_REASON_COUNT; i++)
		if (strcmp(wire_reason_name((enum wire_reason)i), "unknown") == 0)
			tap_diag("reason %d has no name", i);
	is_str(wire_reason_name(WIRE_E_STALE_EPOCH), "stale_epoch", "reason names");
	return tap_done();
}
