/* Connection blob: round trip, strict validation of every field, and
 * fuzzing: corrupted blobs (CRC kept or recomputed) and random garbage are
 * rejected or decode to something valid that re-encodes identically. */
#include "../../rdma/internal.h"
#include "tap.h"

static struct rdma_conn good(void)
{
	struct rdma_conn c = {
		.side = RDMA_SIDE_SEND, .flags = RDMA_CONN_F_GLOBAL, .mtu = IBV_MTU_4096,
		.cluster = 0xC0FFEE, .src_node = 3, .dst_node = 5, .channel = 2, .lid = 0,
		.qpn = 0x1234, .psn = 0xABCDEF, .slots = 128, .eager_max = 4096,
		.rkey = 0xdeadbeef, .addr = 0x00007f1234567000ull,
		.gid = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 2, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55},
	};
	return c;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)rng;
}

static void fix_crc(uint8_t *b)
{
	uint32_t crc = rdma__crc32(b, 68);
	b[68] = (uint8_t)crc; b[69] = (uint8_t)(crc >> 8);
	b[70] = (uint8_t)(crc >> 16); b[71] = (uint8_t)(crc >> 24);
}

/* Encode, then poke one field's bytes and re-CRC: must be rejected. */
static int reject_with(size_t off, const uint8_t *val, size_t n, char *why, size_t cap)
{
	struct rdma_conn c = good(), out;
	uint8_t b[RDMA_CONN_BLOB_LEN];

	rdma__conn_encode(&c, b, sizeof(b));
	memcpy(b + off, val, n);
	fix_crc(b);
	return rdma__conn_decode(b, sizeof(b), &out, why, cap);
}

int main(void)
{
	struct rdma_conn c = good(), d;
	uint8_t b[RDMA_CONN_BLOB_LEN], m[RDMA_CONN_BLOB_LEN + 8], e[RDMA_CONN_BLOB_LEN];
	char why[160];
	int rc, accepted, bad_accept, crashes = 0;

	tap_plan(32);
	is_int(rdma__crc32("123456789", 9), 0xCBF43926, "CRC-32 check value");
	is_int(rdma__conn_encode(&c, b, sizeof(b)), RDMA_CONN_BLOB_LEN, "encode: 72 bytes");
	is_int(rdma__conn_encode(&c, b, 10), -EINVAL, "encode into a short buffer refused");
	rc = rdma__conn_decode(b, sizeof(b), &d, why, sizeof(why));
	is_int(rc, 0, "decode of a good blob");
	d.version = 0;
	ok(memcmp(&c, &d, sizeof(c)) == 0, "round trip preserves every field");
	ok(b[0] == 0x51 && b[1] == 0x52 && b[2] == 0x42 && b[3] == 0x5A && b[4] == 1,
	   "magic and version at the head, little-endian");

	is_int(rdma__conn_decode(b, 71, &d, why, sizeof(why)), ZB_ERR_BAD_FRAME, "short blob rejected");
	ok(strstr(why, "71 bytes") != NULL, "  why: %s", why);
	is_int(rdma__conn_decode(NULL, 72, &d, why, sizeof(why)), ZB_ERR_BAD_FRAME, "NULL blob rejected");
	memcpy(m, b, 72);
	m[4] = 2;
	fix_crc(m);
	is_int(rdma__conn_decode(m, 72, &d, why, sizeof(why)), -EPROTONOSUPPORT, "version 2 -> EPROTONOSUPPORT");
	ok(strstr(why, "version 2") != NULL, "  why: %s", why);
	memcpy(m, b, 72);
	m[30] ^= 1;
	is_int(rdma__conn_decode(m, 72, &d, why, sizeof(why)), ZB_ERR_BAD_FRAME, "bit flip -> CRC mismatch");
	ok(strstr(why, "CRC") != NULL, "  why: %s", why);

	/* Each field's range, with a valid CRC so the field check is what fires. */
	struct { size_t off; uint8_t v[4]; size_t n; const char *what, *needle; } f[] = {
		{5, {3}, 1, "side 3", "side"},
		{6, {0x02}, 1, "unknown flag bit", "flags"},
		{7, {0}, 1, "MTU code 0", "MTU"},
		{7, {6}, 1, "MTU code 6", "MTU"},
		{12, {64, 0}, 2, "source node 64", "node"},
		{20, {1, 0, 0, 0}, 4, "QPN 1", "QPN"},
		{20, {0, 0, 0, 1}, 4, "QPN wider than 24 bits", "QPN"},
		{24, {0, 0, 0, 1}, 4, "PSN wider than 24 bits", "PSN"},
		{28, {96, 0, 0, 0}, 4, "slots 96 (not a power of two)", "slots"},
		{28, {0, 8, 0, 0}, 4, "slots 2048 (too many)", "slots"},
		{64, {1, 0, 0, 0}, 4, "reserved field non-zero", "reserved"},
	};
	for (size_t i = 0; i < ZB_ARRAY_LEN(f); i++) {
		rc = reject_with(f[i].off, f[i].v, f[i].n, why, sizeof(why));
		ok(rc == ZB_ERR_BAD_FRAME && strstr(why, f[i].needle), "%s rejected (%s)", f[i].what, why);
	}
	{
		static const uint8_t zero16[16];
		rc = reject_with(48, zero16, 16, why, sizeof(why));
		ok(rc == ZB_ERR_BAD_FRAME && strstr(why, "GID"), "RoCE blob with zero GID rejected (%s)", why);
		static const uint8_t zero8[8];
		rc = reject_with(40, zero8, 8, why, sizeof(why));
		ok(rc == ZB_ERR_BAD_FRAME && strstr(why, "address"), "null address rejected (%s)", why);
		uint8_t noglobal = 0;   /* IB without a LID */
		rc = reject_with(6, &noglobal, 1, why, sizeof(why));
		ok(rc == ZB_ERR_BAD_FRAME && strstr(why, "LID"), "IB blob with LID 0 rejected (%s)", why);
	}

	/* Fuzz 1: random corruption, CRC left alone: always rejected. */
	bad_accept = 0;
	for (int i = 0; i < 20000; i++) {
		memcpy(m, b, 72);
		int k = 1 + (int)(rnd() % 4);
		for (int j = 0; j < k; j++)
			m[rnd() % 72] ^= (uint8_t)(1 + rnd() % 255);
		if (memcmp(m, b, 72) && rdma__conn_decode(m, 72, &d, why, sizeof(why)) == 0)
			bad_accept++;
	}
	is_int(bad_accept, 0, "20000 corrupted blobs (CRC not fixed): none accepted");

	/* Fuzz 2: corruption with CRC recomputed: field checks decide; whatever
	 * is accepted is valid and re-encodes byte for byte. */
	accepted = 0;
	bad_accept = 0;
	for (int i = 0; i < 20000; i++) {
		memcpy(m, b, 72);
		int k = 1 + (int)(rnd() % 3);
		for (int j = 0; j < k; j++)
			m[rnd() % 68] = (uint8_t)rnd();
		fix_crc(m);
		rc = rdma__conn_decode(m, 72, &d, why, sizeof(why));
		if (rc == 0) {
			accepted++;
			if (rdma__conn_check(&d, NULL, 0) != 0 ||
			    rdma__conn_encode(&d, e, sizeof(e)) != 72 || memcmp(e, m, 72) != 0)
				bad_accept++;
		} else if (rc != ZB_ERR_BAD_FRAME && rc != -EPROTONOSUPPORT) {
			crashes++;
		}
	}
	is_int(bad_accept, 0, "re-CRC'd mutants: accepted ones are valid and canonical");
	ok(accepted > 0 && accepted < 20000, "re-CRC'd mutants: some accepted (%d), most rejected", accepted);
	is_int(crashes, 0, "only BAD_FRAME / EPROTONOSUPPORT as errors");

	/* Fuzz 3: random garbage of random length. */
	bad_accept = 0;
	for (int i = 0; i < 20000; i++) {
		size_t len = rnd() % (sizeof(m) + 1);
		for (size_t j = 0; j < len; j++)
			m[j] = (uint8_t)rnd();
		if (rdma__conn_decode(m, len, &d, why, sizeof(why)) == 0)
			bad_accept++;
	}
	is_int(bad_accept, 0, "20000 random buffers: none accepted");
	return tap_done();
}
