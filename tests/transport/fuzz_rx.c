/* libFuzzer entry point for the receive path: `make fuzz-transport`
 * (clang -fsanitize=fuzzer,address,undefined; FUZZ_SECS=30 by default).
 * Input byte 0 picks the mode: even = the rest is a raw Ethernet frame;
 * odd = the rest fills a struct wire_hdr + payload that is encoded with
 * valid checksums, so the fuzzer reaches the session state machine (epochs,
 * acks, SACK, reassembly, delivery) instead of stopping at checksums. */
#include "zbmd/common.h"
#include "zbmd/transport.h"
#include "zbmd/wire.h"

#include <string.h>

static struct tp *T;
static uint64_t now = 1000000;

static int fz_tx(void *u, const struct tp_frame *f)
{
	(void)u;
	(void)f;
	return 0;
}
static int fz_deliver(void *u, struct tp_msg *m)
{
	(void)u;
	tp_msg_release(T, m);
	return 0;
}
static void fz_done(void *u, uint64_t c, int st)
{
	(void)u;
	(void)c;
	(void)st;
}
static const struct tp_ops fz_ops = {fz_tx, fz_deliver, fz_done, NULL};

static void setup(void)
{
	struct tp_params p;
	uint8_t mac[6] = {2, 0, 0, 0, 0, 0};

	tp_params_default(&p);
	p.node = 1;
	p.cluster = 7;
	p.epoch = 100;
	p.max_peers = 4;
	p.max_message = 1 << 20;
	p.rx_arena_bytes = 4 << 20;
	p.ip = 0x0200000a;
	ZB_ASSERT(tp_create(&p, &fz_ops, NULL, &T) == 0);
	for (uint16_t n = 0; n < 4; n++)
		if (n != 1) {
			mac[5] = (uint8_t)n;
			ZB_ASSERT(tp_peer_add(T, n, mac, 0x0100000a + ((uint32_t)n << 24)) == 0);
		}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t frame[WIRE_HDRS_LEN + 9000];

	if (!T)
		setup();
	if (size < 1)
		return 0;
	now += 1000 + data[0] * 100;
	if (!(data[0] & 1)) {
		tp_rx(T, data + 1, size - 1, 0, now);
	} else {
		struct wire_hdr h;
		struct wire_addr a = {.src_mac = {2}, .dst_mac = {2, 0, 0, 0, 0, 1},
				      .src_port = 7471, .dst_port = 7471};
		size_t plen;

		memset(&h, 0, sizeof(h));
		memcpy(&h, data + 1, size - 1 < sizeof(h) ? size - 1 : sizeof(h));
		h.type = (uint8_t)(1 + (h.type & 1));
		h.cluster = 7;
		h.dst_node = 1;
		h.lane = 0;
		h.src_node &= 3;
		plen = size - 1 > sizeof(h) ? size - 1 - sizeof(h) : 0;
		if (plen > 9000)
			plen = 9000;
		h.payload_len = (uint16_t)plen;
		a.src_ip = 0x0100000a + ((uint32_t)h.src_node << 24);
		a.dst_ip = 0x0200000a;
		wire_encode(frame, &a, &h, NULL, 1, 0);
		if (plen)
			memcpy(frame + WIRE_HDRS_LEN, data + 1 + sizeof(h), plen);
		tp_rx(T, frame, WIRE_HDRS_LEN + plen, 0, now);
	}
	tp_poll(T, now);
	return 0;
}
