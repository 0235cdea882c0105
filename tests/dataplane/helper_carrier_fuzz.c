/* helper_carrier_fuzz — malformed messages for a node's remote actor carrier
 * over tcp ([actors] carrier = tcp, docs/remote.md "Carriers").
 *
 *   helper_carrier_fuzz -c NODE.ini --peer N
 *
 * Poses as the node of NODE.ini towards node N: an instance of the tcp net
 * provider at [transport] tcp_port + ZBRA_NET_PORT_OFFSET (where N's carrier
 * listens and connects), one send and one recv comm, as N's carrier
 * expects. Once both are up it sends BAD_COUNT malformed carrier messages
 * (each of a different kind of wrong), a well-formed first fragment
 * whose reassembly the next one breaks and a first fragment of a message
 * larger than N takes (refused: skipped, not bad) whose skip the last one
 * breaks, waits for them to be written,
 * prints "SENT bad=K" and exits 0 (1 when it could not connect within 20 s).
 * Node N must count BAD_COUNT bad carrier messages, drop them, and live. */
#include "zbmd/common.h"
#include "zbmd/config.h"
#include "zbmd/net.h"
#include "../../dataplane/remote_car.h"

#include <endian.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MSG 4096u        /* the carrier's message size (remote_net.c NC_MSG) */
#define HDR 8u
#define FRAG (MSG - HDR)
#define MAGIC 0xa7u
#define TAG 0x7a6e6321u  /* the carrier's net tag */
#define BAD_COUNT 12
#define NMSG 14          /* the bad ones, a well-formed FIRST, a refused FIRST */

static size_t put(uint8_t *p, uint8_t magic, uint8_t kind, uint16_t stream,
		  uint32_t len, size_t body)
{
	uint16_t s = htole16(stream);
	uint32_t l = htole32(len);
	p[0] = magic;
	p[1] = kind;
	memcpy(p + 2, &s, 2);
	memcpy(p + 4, &l, 4);
	memset(p + HDR, 0x5a, body);
	return HDR + body;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"peer", required_argument, NULL, 'p'}, {NULL, 0, NULL, 0}};
	const char *path = NULL;
	long peer = -1;
	int c;
	while ((c = getopt_long(argc, argv, "c:", opts, NULL)) != -1) {
		if (c == 'c')
			path = optarg;
		else if (c == 'p')
			peer = strtol(optarg, NULL, 0);
		else
			return 2;
	}
	static struct zb_config cfg;
	struct cfg_error cerr;
	if (!path || peer < 0 || peer >= CFG_MAX_NODES || cfg_load_file(&cfg, path, &cerr)) {
		fprintf(stderr, "usage: helper_carrier_fuzz -c NODE.ini --peer N%s%s\n",
			path ? ": " : "", path ? cerr.msg : "");
		return 2;
	}
	cfg.transport.tcp_port = (uint16_t)(cfg.transport.tcp_port + ZBRA_NET_PORT_OFFSET);
	const struct net_ops *o = &net_tcp_ops;
	void *ctx = NULL, *sc = NULL, *rc_ = NULL;
	struct net_init_args a = {.cfg = &cfg, .channels = 1};
	int rc = o->init(&a, &ctx);
	if (rc) {
		fprintf(stderr, "helper_carrier_fuzz: tcp init: %s\n", zb_strerror(rc));
		return 1;
	}
	uint64_t end = zb_now_ns() + 20000000000ull;
	while ((!sc || !rc_) && zb_now_ns() < end) {
		if (!sc && o->connect(ctx, (uint16_t)peer, 0, &sc) != 0)
			sc = NULL;
		if (!rc_ && o->accept(ctx, (uint16_t)peer, 0, &rc_) != 0)
			rc_ = NULL;
		o->progress(ctx);
		usleep(2000);
	}
	if (!sc || !rc_) {
		fprintf(stderr, "helper_carrier_fuzz: node %ld did not connect\n", peer);
		o->fini(ctx);
		return 1;
	}
	static uint8_t m[NMSG][MSG];
	size_t n[NMSG];
	n[0] = 3;                                            /* shorter than a header */
	memset(m[0], MAGIC, 3);
	n[1] = put(m[1], 0x00, 1, 0, 0, 0);                  /* bad magic */
	n[2] = put(m[2], MAGIC, 9, 0, 0, 0);                 /* unknown kind */
	n[3] = put(m[3], MAGIC, 1, 0, 10, 4);                /* WHOLE: len != body */
	n[4] = put(m[4], MAGIC, 3, 0, 10000, 100);           /* MORE without a FIRST */
	n[5] = put(m[5], MAGIC, 2, 0, 10000, 100);           /* FIRST: not a full fragment */
	n[6] = put(m[6], MAGIC, 4, 0, 5, 0);                 /* CREDIT for nothing sent */
	n[7] = put(m[7], MAGIC, 4, 0, 1, 4);                 /* CREDIT with a body */
	n[8] = put(m[8], MAGIC, 2, 1, 10000, FRAG);          /* FIRST, well formed ... */
	n[9] = put(m[9], MAGIC, 1, 1, 4, 4);                 /* ... broken by a WHOLE */
	n[10] = put(m[10], MAGIC, 5, 0, 1, 0);               /* REFUSE without its limit */
	n[11] = put(m[11], MAGIC, 5, 0, 1, 8);               /* REFUSE for nothing sent */
	n[12] = put(m[12], MAGIC, 2, 1, 0xfff00000u, FRAG);  /* FIRST over max_message ... */
	n[13] = put(m[13], MAGIC, 1, 1, 4, 4);               /* ... its skip broken by a WHOLE */
	static_assert(NMSG == BAD_COUNT + 2, "two of the messages are well formed");
	void *req[NMSG];
	for (int i = 0; i < NMSG; i++)
		if ((rc = o->isend(sc, m[i], n[i], TAG, NULL, &req[i])) != 0) {
			fprintf(stderr, "helper_carrier_fuzz: isend %d: %s\n", i, zb_strerror(rc));
			o->fini(ctx);
			return 1;
		}
	int left = NMSG;
	end = zb_now_ns() + 10000000000ull;
	while (left && zb_now_ns() < end) {
		for (int i = 0; i < NMSG; i++) {
			int done = 0;
			if (req[i] && o->test(req[i], &done, NULL) == 0 && !done)
				continue;
			if (req[i])
				left--;
			req[i] = NULL;
		}
		usleep(1000);
	}
	usleep(300000);   /* the node reads them before the connection goes */
	printf("SENT bad=%d written=%d\n", BAD_COUNT, NMSG - left);
	o->close_send(sc);
	o->close_recv(rc_);
	o->fini(ctx);
	return left ? 1 : 0;
}
