/* Connection blob: the parameters one side of an RC connection gives the
 * other over the control plane, in a fixed, versioned, CRC-checked layout.
 *
 *   off size field
 *    0   4   magic "ZBRQ" (0x5A425251)
 *    4   1   version (1)
 *    5   1   side of the producer (1 send, 2 recv)
 *    6   1   flags (bit 0: GRH required); other bits 0
 *    7   1   path MTU, enum ibv_mtu 1..5 (256..4096 bytes)
 *    8   4   cluster id
 *   12   2   source node       14  2  destination node
 *   16   2   channel           18  2  LID (IB; 0 on RoCE)
 *   20   4   QPN (24 bits, >= 2: 0 and 1 are the special QPs)
 *   24   4   initial PSN (24 bits)
 *   28   4   slots (messages in flight, power of two 2..1024)
 *   32   4   eager_max (<= 65536)
 *   36   4   rkey              40  8  address (non-zero)
 *   48  16   GID (non-zero when GRH is required)
 *   64   4   reserved (0)
 *   68   4   CRC-32 (IEEE) of bytes 0..67
 * All integers little-endian.
 */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

uint32_t rdma__crc32(const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint32_t crc = 0xFFFFFFFFu;

	ZB_ASSERT(buf != NULL || len == 0);
	for (size_t i = 0; i < len; i++) {
		crc ^= p[i];
		for (int b = 0; b < 8; b++)
			crc = (crc >> 1) ^ (0xEDB88320u & (uint32_t)-(int32_t)(crc & 1));
	}
	return ~crc;
}

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void put32(uint8_t *p, uint32_t v) { put16(p, (uint16_t)v); put16(p + 2, (uint16_t)(v >> 16)); }
static void put64(uint8_t *p, uint64_t v) { put32(p, (uint32_t)v); put32(p + 4, (uint32_t)(v >> 32)); }
static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t get32(const uint8_t *p) { return get16(p) | ((uint32_t)get16(p + 2) << 16); }
static uint64_t get64(const uint8_t *p) { return get32(p) | ((uint64_t)get32(p + 4) << 32); }

static int bad(char *why, size_t cap, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int bad(char *why, size_t cap, const char *fmt, ...)
{
	va_list ap;

	if (why && cap) {
		va_start(ap, fmt);
		vsnprintf(why, cap, fmt, ap);
		va_end(ap);
	}
	return ZB_ERR_BAD_FRAME;
}

bool rdma__gid_is_zero(const uint8_t gid[16])
{
	for (int i = 0; i < 16; i++)
		if (gid[i])
			return false;
	return true;
}

int rdma__conn_check(const struct rdma_conn *c, char *why, size_t cap)
{
	ZB_ASSERT(c != NULL);
	if (c->side != RDMA_SIDE_SEND && c->side != RDMA_SIDE_RECV)
		return bad(why, cap, "side %u is neither send (1) nor recv (2)", c->side);
	if (c->flags & ~RDMA_CONN_F_GLOBAL)
		return bad(why, cap, "unknown flags 0x%02x", c->flags);
	if (c->mtu < IBV_MTU_256 || c->mtu > IBV_MTU_4096)
		return bad(why, cap, "path MTU code %u outside 1..5 (256..4096 bytes)", c->mtu);
	if (c->src_node >= CFG_MAX_NODES || c->dst_node >= CFG_MAX_NODES)
		return bad(why, cap, "node id %u -> %u outside 0..%d", c->src_node,
			   c->dst_node, CFG_MAX_NODES - 1);
	if (c->channel >= RDMA_CHANNELS_MAX)
		return bad(why, cap, "channel %u >= %u", c->channel, RDMA_CHANNELS_MAX);
	if (c->qpn < 2 || c->qpn > 0xFFFFFFu)
		return bad(why, cap, "QPN 0x%x not a 24-bit RC QP number (>= 2)", c->qpn);
	if (c->psn > 0xFFFFFFu)
		return bad(why, cap, "PSN 0x%x wider than 24 bits", c->psn);
	if (c->slots < RDMA_SLOTS_MIN || c->slots > RDMA_SLOTS_MAX ||
	    (c->slots & (c->slots - 1)))
		return bad(why, cap, "slots %u not a power of two in %u..%u", c->slots,
			   RDMA_SLOTS_MIN, RDMA_SLOTS_MAX);
	if (c->eager_max > RDMA_EAGER_LIMIT)
		return bad(why, cap, "eager_max %u > %u", c->eager_max, RDMA_EAGER_LIMIT);
	if (c->addr == 0)
		return bad(why, cap, "null remote address");
	if ((c->flags & RDMA_CONN_F_GLOBAL) && rdma__gid_is_zero(c->gid))
		return bad(why, cap, "GRH required but GID is zero");
	if (!(c->flags & RDMA_CONN_F_GLOBAL) && (c->lid == 0 || c->lid >= 0xC000))
		return bad(why, cap, "LID 0x%x is not a unicast LID (0x0001..0xbfff)", c->lid);
	return 0;
}

int rdma__conn_encode(const struct rdma_conn *c, void *buf, size_t cap)
{
	uint8_t *p = buf;

	ZB_ASSERT(c != NULL && buf != NULL);
	ZB_ASSERT(rdma__conn_check(c, NULL, 0) == 0);
	if (cap < RDMA_CONN_BLOB_LEN)
		return -EINVAL;
	memset(p, 0, RDMA_CONN_BLOB_LEN);
	put32(p + 0, RDMA_BLOB_MAGIC);
	p[4] = RDMA_BLOB_VERSION;
	p[5] = c->side;
	p[6] = c->flags;
	p[7] = c->mtu;
	put32(p + 8, c->cluster);
	put16(p + 12, c->src_node);
	put16(p + 14, c->dst_node);
	put16(p + 16, c->channel);
	put16(p + 18, c->lid);
	put32(p + 20, c->qpn);
	put32(p + 24, c->psn);
	put32(p + 28, c->slots);
	put32(p + 32, c->eager_max);
	put32(p + 36, c->rkey);
	put64(p + 40, c->addr);
	memcpy(p + 48, c->gid, 16);
	put32(p + 68, rdma__crc32(p, 68));
	return RDMA_CONN_BLOB_LEN;
}

int rdma__conn_decode(const void *buf, size_t len, struct rdma_conn *out,
		      char *why, size_t cap)
{
	const uint8_t *p = buf;
	struct rdma_conn c;
	int rc;

	ZB_ASSERT(out != NULL);
	if (buf == NULL || len != RDMA_CONN_BLOB_LEN)
		return bad(why, cap, "blob is %zu bytes, expected %d", buf ? len : 0,
			   RDMA_CONN_BLOB_LEN);
	if (get32(p) != RDMA_BLOB_MAGIC)
		return bad(why, cap, "bad magic 0x%08x", get32(p));
	if (p[4] != RDMA_BLOB_VERSION) {
		if (why && cap)
			snprintf(why, cap, "blob version %u, this build speaks %u", p[4],
				 RDMA_BLOB_VERSION);
		return -EPROTONOSUPPORT;
	}
	if (get32(p + 68) != rdma__crc32(p, 68))
		return bad(why, cap, "CRC mismatch (0x%08x, computed 0x%08x)",
			   get32(p + 68), rdma__crc32(p, 68));
	if (get32(p + 64) != 0)
		return bad(why, cap, "reserved field is 0x%08x, expected 0", get32(p + 64));
	memset(&c, 0, sizeof(c));
	c.version = p[4];
	c.side = p[5];
	c.flags = p[6];
	c.mtu = p[7];
	c.cluster = get32(p + 8);
	c.src_node = get16(p + 12);
	c.dst_node = get16(p + 14);
	c.channel = get16(p + 16);
	c.lid = get16(p + 18);
	c.qpn = get32(p + 20);
	c.psn = get32(p + 24);
	c.slots = get32(p + 28);
	c.eager_max = get32(p + 32);
	c.rkey = get32(p + 36);
	c.addr = get64(p + 40);
	memcpy(c.gid, p + 48, 16);
	rc = rdma__conn_check(&c, why, cap);
	if (rc)
		return rc;
	*out = c;
	return 0;
}
