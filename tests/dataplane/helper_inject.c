/* helper_inject — forge bad frames onto a link with a raw (AF_PACKET)
 * socket, modelled on a real zbmd frame captured from that link.
 *
 *   helper_inject --capture IFACE --out IFACE --dst-node N [--each N] [--seed S]
 *
 * Waits (up to 20 s) for one zbmd DATA frame received on --capture (a real
 * frame between two nodes: IPv4/UDP, zbmd version 1, type DATA, some
 * payload) whose zbmd destination is node --dst-node (the node behind
 * --out: on a bridge, --capture also carries frames going the other way,
 * which tc netem's duplication can hand to the capture socket as received
 * — a template addressed to the wrong node, dropped by the node's link
 * layer, was seen twice in 20 runs), then sends N frames (default 200) of each kind below out of
 * --out, towards that frame's destination (same Ethernet destination), in
 * this order, paced (20 frames per ms):
 *
 *   random        random bytes (after the destination MAC), 14..1514 long
 *   random_zbmd   valid Ethernet/IPv4/UDP headers to the zbmd port, then
 *                 random bytes (zbmd version byte 1), 114..1514 long
 *   truncated     the captured frame cut at a random length 14..len-1
 *   cluster       the captured frame, cluster id + 1
 *   version       ... zbmd version 2
 *   unknown_peer  ... source node 63 (no such peer)
 *   seq           ... sequence number + 2^30
 *   ack           ... cumulative ack + 2^30
 *   stale_epoch   ... source epoch - 1000 (an older incarnation)
 *
 * Mutated frames get their zbmd header checksum recomputed (RFC 1071 over
 * the 72 zbmd header bytes, docs/wire.md) and a zero UDP checksum, so each
 * fails exactly the check it names. Prints one "INJECT kind=K sent=N
 * to_transport=M" line per kind (M: frames whose IPv4 header is intact,
 * total length within the frame, to the zbmd UDP port: what the node's link
 * layer passes to its transport; it drops the others) and "INJECTED
 * sent=... to_transport=... link_drops=...".
 * Exit 0, 1 (no frame captured / socket errors), 2 (usage). Plain sockets:
 * no DPDK, no zbmd code (the format is rebuilt from the spec). */
#include "det_rand.h"
#include "raw_link.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FRAME_MAX 1514
#define ZB_OFF 42          /* zbmd header: after Ethernet 14 + IPv4 20 + UDP 8 */
#define ZB_LEN 72
#define HDRS_LEN (ZB_OFF + ZB_LEN)

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	return dr_xorshift64(&rng);
}

static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static void put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)(v >> 16));
	put16(p + 2, (uint16_t)v);
}

/* RFC 1071 Internet checksum of n bytes */
static uint16_t csum(const uint8_t *b, size_t n)
{
	uint32_t s = 0;
	for (size_t i = 0; i + 1 < n; i += 2)
		s += get16(b + i);
	if (n & 1)
		s += (uint32_t)b[n - 1] << 8;
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

/* a zbmd DATA frame received (not sent) on fd, within 20 s: its length */
static ssize_t capture(int fd, uint8_t *f, unsigned dst_node)
{
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 20)
			return -1;
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, 100) <= 0)
			continue;
		struct sockaddr_ll from;
		socklen_t fl = sizeof(from);
		ssize_t n = recvfrom(fd, f, FRAME_MAX, MSG_DONTWAIT,
				     (struct sockaddr *)&from, &fl);
		if (n < HDRS_LEN + 16 || from.sll_pkttype == PACKET_OUTGOING)
			continue;
		if (get16(f + 12) == 0x0800 && f[14] == 0x45 && f[23] == 17 &&
		    f[ZB_OFF] == 1 && f[ZB_OFF + 1] == 1 &&
		    (size_t)n >= (size_t)get16(f + 16) + 14 &&
		    get16(f + 52) == dst_node)
			return n;
	}
}

/* fix a mutated copy of the captured frame: zbmd header checksum, no UDP
 * checksum */
static void reseal(uint8_t *f)
{
	put16(f + 40, 0);
	put16(f + 56, 0);
	put16(f + 56, csum(f + ZB_OFF, ZB_LEN));
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"capture", required_argument, NULL, 'c'},
		{"out", required_argument, NULL, 'o'},
		{"each", required_argument, NULL, 'n'},
		{"seed", required_argument, NULL, 's'},
		{"dst-node", required_argument, NULL, 'd'},
		{NULL, 0, NULL, 0},
	};
	const char *cap_if = NULL, *out_if = NULL;
	int each = 200, c, dst_node = -1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'c')
			cap_if = optarg;
		else if (c == 'o')
			out_if = optarg;
		else if (c == 'n')
			each = atoi(optarg);
		else if (c == 's')
			rng ^= strtoull(optarg, NULL, 0) * 0xbf58476d1ce4e5b9ull;
		else if (c == 'd')
			dst_node = atoi(optarg);
		else
			return 2;
	}
	if (!cap_if || !out_if || each < 1 || each > 100000 || dst_node < 0 ||
	    dst_node > 0xffff) {
		fprintf(stderr, "usage: helper_inject --capture IFACE --out IFACE --dst-node N [--each N] [--seed S]\n");
		return 2;
	}
	int cfd = rl_open(cap_if), ofd = rl_open(out_if);
	/* past any qdisc (tc netem) on --out: every forged frame arrives */
	int one = 1;
	if (ofd >= 0)
		setsockopt(ofd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof(one));
	if (cfd < 0 || ofd < 0) {
		fprintf(stderr, "helper_inject: %s: %s\n", cfd < 0 ? cap_if : out_if,
			strerror(errno));
		return 1;
	}
	static uint8_t tmpl[FRAME_MAX], f[FRAME_MAX];
	ssize_t tn = capture(cfd, tmpl, (unsigned)dst_node);
	if (tn < 0) {
		fprintf(stderr, "helper_inject: no zbmd DATA frame to node %d seen on %s in 20 s\n",
			dst_node, cap_if);
		return 1;
	}
	size_t tlen = (size_t)tn;
	uint16_t zport = get16(tmpl + 36);
	printf("captured len=%zu src_node=%u dst_node=%u seq=%u ack=%u epoch=%u port=%u\n",
	       tlen, get16(tmpl + 50), get16(tmpl + 52), get32(tmpl + 66),
	       get32(tmpl + 70), get32(tmpl + 58), zport);

	static const char *kinds[] = {"random", "random_zbmd", "truncated", "cluster",
				      "version", "unknown_peer", "seq", "ack",
				      "stale_epoch"};
	const int nkinds = (int)(sizeof(kinds) / sizeof(kinds[0]));
	long sent_all = 0, to_tp_all = 0, errors = 0;
	for (int k = 0; k < nkinds; k++) {
		int to_tp = 0, sent = 0;
		for (int i = 0; i < each; i++) {
			size_t len = tlen;
			memcpy(f, tmpl, tlen);
			switch (k) {
			case 0:   /* random */
				len = 14 + rnd() % (FRAME_MAX - 14 + 1);
				for (size_t o = 6; o < len; o++)
					f[o] = (uint8_t)rnd();
				break;
			case 1:   /* random zbmd */
				len = HDRS_LEN + rnd() % (FRAME_MAX - HDRS_LEN + 1);
				for (size_t o = ZB_OFF; o < len; o++)
					f[o] = (uint8_t)rnd();
				f[ZB_OFF] = 1;
				put16(f + 16, (uint16_t)(len - 14));
				put16(f + 24, 0);
				put16(f + 24, csum(f + 14, 20));
				put16(f + 38, (uint16_t)(len - 34));
				put16(f + 40, 0);
				break;
			case 2:   /* truncated */
				len = 14 + rnd() % (tlen - 14);
				break;
			case 3:
				put32(f + 46, get32(f + 46) + 1);
				reseal(f);
				break;
			case 4:
				f[ZB_OFF] = 2;
				reseal(f);
				break;
			case 5:
				put16(f + 50, 63);
				reseal(f);
				break;
			case 6:
				put32(f + 66, get32(f + 66) + 0x40000000u);
				reseal(f);
				break;
			case 7:
				put32(f + 70, get32(f + 70) + 0x40000000u);
				reseal(f);
				break;
			case 8:
				put32(f + 58, get32(f + 58) - 1000);
				reseal(f);
				break;
			}
			/* what a zbmd link layer hands its transport (dataplane/arp.c):
			 * IPv4 without options, total length within the frame, header
			 * checksum good, UDP to the zbmd port (lane 0) */
			int reaches = len >= ZB_OFF && get16(f + 12) == 0x0800 &&
				      f[14] == 0x45 && get16(f + 16) >= 28 &&
				      get16(f + 16) <= len - 14 && csum(f + 14, 20) == 0 &&
				      f[23] == 17 && get16(f + 36) == zport;
			if (send(ofd, f, len, 0) < 0) {
				errors++;
				continue;
			}
			to_tp += reaches;
			sent++;
			if (i % 20 == 19)
				usleep(1000);
		}
		printf("INJECT kind=%s sent=%d to_transport=%d\n", kinds[k], sent, to_tp);
		sent_all += sent;
		to_tp_all += to_tp;
	}
	printf("INJECTED sent=%ld to_transport=%ld link_drops=%ld send_errors=%ld\n",
	       sent_all, to_tp_all, sent_all - to_tp_all, errors);
	fflush(stdout);
	return errors ? 1 : 0;
}
