/* helper_net — a node that exercises the "dpdk" net provider (zbmd/net.h)
 * against its one peer, from a poller on lcore 0, the way the collectives
 * drive a provider: ROUNDS rounds of isend + irecv on 2 channels (sizes 0 ..
 * 100 KB, tag = round), every received byte checked; then a message larger
 * than its irecv (-EMSGSIZE) and a tag mismatch (ZB_ERR_BAD_FRAME).
 *
 *   helper_net -c NODE.ini [--rounds N]
 *
 * Prints "DONE ..." when finished (and keeps serving until SIGTERM), then
 * "RESULT ..."; exits 0 when every check passed. */
#include "zbmd/common.h"
#include "zbmd/config.h"
#include "zbmd/dataplane.h"
#include "zbmd/net.h"
#include "node_helper.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CH 2
#define MAXSZ (128u << 10)

static struct zb_config cfg;
static const struct net_ops *ops;
static void *ctx, *sc[CH], *rc_[CH];
static uint16_t self, peer;
static uint32_t rounds = 200, round_no;
static uint8_t sbuf[CH][MAXSZ], rbuf[CH][MAXSZ], want[MAXSZ];
static void *sreq[CH], *rreq[CH];
static int phase;            /* 0 rounds, 1 emsgsize, 2 badtag, 3 done */
static uint64_t ok_msgs, bad_msgs, errors;
static int emsgsize_ok, badtag_ok, printed;
static volatile sig_atomic_t stop;

static uint32_t size_of(uint16_t src, uint32_t k, unsigned ch)
{
	uint32_t x = (k * 7919u + ch * 104729u + src * 31u) % 100000u;
	return k % 7 == 0 ? 0 : x;
}

static void gen(uint8_t *b, uint16_t src, uint32_t k, unsigned ch, uint32_t n)
{
	uint32_t x = k * 2654435761u ^ (src << 20) ^ (ch << 28);
	for (uint32_t i = 0; i < n; i++) {
		x = x * 1103515245u + 12345u;
		b[i] = (uint8_t)(x >> 16);
	}
}

static int post_round(void)
{
	for (unsigned ch = 0; ch < CH; ch++) {
		uint32_t n = size_of(self, round_no, ch);
		gen(sbuf[ch], self, round_no, ch, n);
		if (ops->irecv(rc_[ch], rbuf[ch], MAXSZ, round_no, NULL, &rreq[ch]) ||
		    ops->isend(sc[ch], sbuf[ch], n, round_no, NULL, &sreq[ch]))
			return -1;
	}
	return 0;
}

/* poll every posted request; 1 when all finished */
static int poll_round(int *st_send, int *st_recv, size_t *got)
{
	int all = 1;
	for (unsigned ch = 0; ch < CH; ch++) {
		int done;
		size_t sz;
		if (sreq[ch]) {
			int st = ops->test(sreq[ch], &done, &sz);
			if (done || st) {
				st_send[ch] = st;
				sreq[ch] = NULL;
			}
		}
		if (rreq[ch]) {
			sz = 0;
			int st = ops->test(rreq[ch], &done, &sz);
			if (done || st) {
				st_recv[ch] = st;
				got[ch] = sz;
				rreq[ch] = NULL;
			}
		}
		if (sreq[ch] || rreq[ch])
			all = 0;
	}
	return all;
}

static int st_s[CH], st_r[CH];
static size_t got[CH];
static int posted;

static unsigned driver(void *arg, uint64_t now)
{
	(void)arg;
	(void)now;
	if (phase == 3) {
		if (!printed) {
			printed = 1;
			printf("DONE node=%u\n", self);
			fflush(stdout);
		}
		return 0;
	}
	if (!posted) {
		if (phase == 0 && post_round() != 0) {
			errors++;
			phase = 3;
			return 1;
		}
		if (phase == 1) {   /* 3000 bytes into a 1000-byte irecv on ch 1 */
			gen(sbuf[1], self, 999999, 1, 3000);
			ops->irecv(rc_[1], rbuf[1], 1000, 7, NULL, &rreq[1]);
			ops->isend(sc[1], sbuf[1], 3000, 7, NULL, &sreq[1]);
		}
		if (phase == 2) {   /* tag 5 sent, tag 6 expected, ch 0 */
			ops->irecv(rc_[0], rbuf[0], MAXSZ, 6, NULL, &rreq[0]);
			ops->isend(sc[0], sbuf[0], 10, 5, NULL, &sreq[0]);
		}
		posted = 1;
		memset(st_s, 0, sizeof(st_s));
		memset(st_r, 0, sizeof(st_r));
		return 1;
	}
	if (!poll_round(st_s, st_r, got))
		return 0;
	posted = 0;
	if (phase == 0) {
		for (unsigned ch = 0; ch < CH; ch++) {
			uint32_t n = size_of(peer, round_no, ch);
			gen(want, peer, round_no, ch, n);
			if (st_s[ch] || st_r[ch] || got[ch] != n ||
			    memcmp(want, rbuf[ch], n) != 0) {
				bad_msgs++;
				if (bad_msgs < 5)
					printf("FAIL round %u ch %u: send %d recv %d size %zu/%u\n",
					       round_no, ch, st_s[ch], st_r[ch], got[ch], n);
			} else {
				ok_msgs++;
			}
		}
		if (++round_no == rounds)
			phase = 1;
	} else if (phase == 1) {
		emsgsize_ok = st_r[1] == -EMSGSIZE && st_s[1] == 0;
		phase = 2;
	} else {
		badtag_ok = st_r[0] == ZB_ERR_BAD_FRAME && st_s[0] == 0;
		phase = 3;
	}
	return 1;
}

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
	dp_node_request_stop();
}

int main(int argc, char **argv)
{
	const char *path = NULL;
	int c;
	static const struct option opts[] = {
		{"rounds", required_argument, NULL, 'r'}, {NULL, 0, NULL, 0}};
	while ((c = getopt_long(argc, argv, "c:", opts, NULL)) != -1) {
		if (c == 'c')
			path = optarg;
		else if (c == 'r')
			rounds = (uint32_t)strtoul(optarg, NULL, 0);
		else
			return 2;
	}
	struct cfg_error cerr;
	if (!path || cfg_load_file(&cfg, path, &cerr) != 0) {
		fprintf(stderr, "usage: helper_net -c NODE.ini [--rounds N]\n");
		return 2;
	}
	self = cfg.node.id;
	for (unsigned i = 0; i < CFG_MAX_NODES; i++)
		if (cfg.peers[i].present && i != self)
			peer = (uint16_t)i;
	sigset_t old;
	nh_signals_block(on_signal, &old);

	struct dp_err err;
	if (dp_node_init(&cfg, &err) != 0) {
		fprintf(stderr, "helper_net: %s\n", err.msg);
		return 1;
	}
	ops = net_find("dpdk");
	struct net_init_args ia = {.cfg = &cfg, .channels = CH};
	int rc = ops ? ops->init(&ia, &ctx) : -ENOENT;
	for (unsigned ch = 0; rc == 0 && ch < CH; ch++) {
		rc = ops->connect(ctx, peer, (uint16_t)ch, &sc[ch]);
		if (rc == 0)
			rc = ops->accept(ctx, peer, (uint16_t)ch, &rc_[ch]);
	}
	void *dummy;
	int bad_peer = ops ? ops->connect(ctx, self, 0, &dummy) : 0;
	if (rc || bad_peer != -EINVAL) {
		fprintf(stderr, "helper_net: provider setup: %s (self-connect %d)\n",
			zb_strerror(rc), bad_peer);
		dp_node_fini();
		return 1;
	}
	dp_register_poller(0, driver, NULL);
	if (dp_node_launch(&err) != 0) {
		fprintf(stderr, "helper_net: %s\n", err.msg);
		dp_node_fini();
		return 1;
	}
	printf("READY node=%u peer=%u rounds=%u\n", self, peer, rounds);
	fflush(stdout);
	nh_run_until(&stop, &old);
	printf("RESULT node=%u rounds=%u ok=%lu bad=%lu errors=%lu emsgsize=%d badtag=%d\n",
	       self, round_no, (unsigned long)ok_msgs, (unsigned long)bad_msgs,
	       (unsigned long)errors, emsgsize_ok, badtag_ok);
	fflush(stdout);
	int good = phase == 3 && bad_msgs == 0 && errors == 0 &&
		   ok_msgs == (uint64_t)rounds * CH && emsgsize_ok && badtag_ok;
	for (unsigned ch = 0; ch < CH; ch++) {
		ops->close_send(sc[ch]);
		ops->close_recv(rc_[ch]);
	}
	ops->fini(ctx);
	dp_node_fini();
	return good ? 0 : 1;
}
