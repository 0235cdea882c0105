/* helper_net — a node that exercises the "dpdk" net provider (zbmd/net.h)
 * against its one peer, from a poller on lcore 0, the way the collectives
 * drive a provider: ROUNDS rounds of isend + irecv on 2 channels (sizes 0 ..
 * 100 KB, tag = round), every received byte checked; then a message larger
 * than its irecv (-EMSGSIZE) and a tag mismatch (ZB_ERR_BAD_FRAME); then
 * RROUNDS rounds of irecv_reduce (the collectives' receive that combines
 * as it arrives): int32 vectors of 0 .. 25,000 elements, channel 0 out of
 * place (buffer = message OP mine), channel 1 in place (buffer OP=
 * message), sum on even rounds and max on odd ones, every element checked
 * against the values both sides generate — a fragment combined twice
 * (duplicates, retransmissions from the [fault] section) or not at all
 * shows up as a wrong element.
 *
 *   helper_net -c NODE.ini [--rounds N]
 *
 * Prints "DONE ..." when finished (and keeps serving until SIGTERM), then
 * "RESULT ..."; exits 0 when every check passed. */
#include "zbmd/common.h"
#include "zbmd/config.h"
#include "zbmd/dataplane.h"
#include "zbmd/net.h"
#include "zbmd/transport.h"
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
static int phase;            /* 0 rounds, 1 emsgsize, 2 badtag, 3 reduce,
				 * 5 extra(), 4 done */
static uint64_t ok_msgs, bad_msgs, errors, red_ok, red_bad;
#define RROUNDS 100
#define RMAX 25000u          /* int32 elements */
static int32_t mine[CH][RMAX], rsend[CH][RMAX];
static uint32_t rround;
static int st_s[CH], st_r[CH];
static size_t got[CH];
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

static uint32_t relems(uint32_t k, unsigned ch)
{
	return k % 9 == 0 ? 0 : (k * 7919u + ch * 3301u) % RMAX + 1;
}

static int32_t rval(uint16_t node, uint32_t k, unsigned ch, uint32_t i)
{
	uint32_t x = (i * 2654435761u) ^ (k << 8) ^ (ch << 4) ^ node;
	return (int32_t)(x % 200001u) - 100000;
}

static enum zb_redop rop_of(uint32_t k)
{
	return k % 2 ? ZB_MAX : ZB_SUM;
}

/* reduce round rround: ch 0 out of place into rbuf, ch 1 in place */
static int post_reduce(void)
{
	if (!ops->irecv_reduce)
		return -1;
	for (unsigned ch = 0; ch < CH; ch++) {
		uint32_t n = relems(rround, ch);
		int32_t *dst = (int32_t *)(void *)rbuf[ch];
		for (uint32_t i = 0; i < n; i++) {
			rsend[ch][i] = rval(self, rround, ch, i);
			mine[ch][i] = rsend[ch][i] / 2 + 7;
			dst[i] = ch == 1 ? mine[ch][i] : 0x5a5a5a5a;
		}
		const void *src = ch == 1 ? (const void *)dst : (const void *)mine[ch];
		if (ops->irecv_reduce(rc_[ch], dst, src, n * 4u, 5000 + rround,
				      ZB_I32, rop_of(rround), NULL, &rreq[ch]) ||
		    ops->isend(sc[ch], rsend[ch], n * 4u, 5000 + rround, NULL,
			       &sreq[ch]))
			return -1;
	}
	return 0;
}

static void check_reduce(void)
{
	for (unsigned ch = 0; ch < CH; ch++) {
		uint32_t n = relems(rround, ch), bad = 0;
		const int32_t *got_v = (const int32_t *)(const void *)rbuf[ch];
		for (uint32_t i = 0; i < n; i++) {
			int32_t r = rval(peer, rround, ch, i), m = mine[ch][i];
			int32_t w = rop_of(rround) == ZB_SUM
				    ? (int32_t)((uint32_t)r + (uint32_t)m)
				    : (r > m ? r : m);
			bad += got_v[i] != w;
		}
		if (st_s[ch] + st_r[ch] || bad || got[ch] != n * 4u) {
			red_bad++;
			if (red_bad < 5)
				printf("FAIL reduce round %u ch %u: send %d recv %d "
				       "size %zu/%u, %u wrong elements\n", rround,
				       ch, st_s[ch], st_r[ch], got[ch],
				       n * 4u, bad);
		} else {
			red_ok++;
		}
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

static int posted;

/* After the rounds (phase 5): (a) an isend whose header the transport
 * accepts and whose payload it refuses (longer than max_message): the
 * request must stay pending until the header's own send_done (it was
 * released at once, and that send_done then landed on a free or reused
 * request); (b) a send closed before it could be acknowledged: close_send
 * must take it out of the transport (session reset, ZB_ERR_EPOCH) instead
 * of leaving it to be retransmitted from the caller's buffer. */
static int xstep, oversize_ok, closed_ok;
static void *xreq;
static uint64_t xt0;

static void extra(void)
{
	int done = 0, st;

	switch (xstep) {
	case 0:
		if (ops->isend(sc[0], sbuf[0], UINT32_MAX, 77, NULL, &xreq) != 0)
			break;
		(void)ops->test(xreq, &done, NULL);
		if (done)        /* the header cannot have been acked yet */
			printf("FAIL oversize isend released before its header's send_done\n");
		xstep = done ? 2 : 1;
		xt0 = zb_now_ns();
		return;
	case 1:
		st = ops->test(xreq, &done, NULL);
		if (!done)
			return;
		oversize_ok = st == -EMSGSIZE;
		xstep = 2;
		return;
	case 2:   /* the last acks of the rounds settle before a reset */
		if (zb_now_ns() - xt0 < 200000000ull)
			return;
		if (ops->isend(sc[1], sbuf[1], 100000, 78, NULL, &xreq) != 0)
			break;
		ops->close_send(sc[1]);
		sc[1] = NULL;
		xstep = 3;
		return;
	case 3:
		st = ops->test(xreq, &done, NULL);
		if (!done)
			return;
		closed_ok = st == ZB_ERR_EPOCH;
		if (!closed_ok)
			printf("FAIL closed send: %d\n", st);
		phase = 4;
		return;
	}
	errors++;
	phase = 4;
}

static unsigned driver(void *arg, uint64_t now)
{
	(void)arg;
	(void)now;
	if (phase == 5) {
		extra();
		return 1;
	}
	if (phase == 4) {
		if (!printed) {
			printed = 1;
			printf("DONE node=%u\n", self);
			fflush(stdout);
		}
		return 0;
	}
	if (!posted) {
		if ((phase == 0 && post_round() != 0) ||
		    (phase == 3 && post_reduce() != 0)) {
			errors++;
			phase = 4;
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
	} else if (phase == 2) {
		badtag_ok = st_r[0] == ZB_ERR_BAD_FRAME && st_s[0] == 0;
		phase = 3;
	} else {
		check_reduce();
		if (++rround == RROUNDS)
			phase = 5;
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
	const struct tp_stats *ts = dp_transport(0) ? tp_stats(dp_transport(0)) : NULL;
	printf("RESULT node=%u rounds=%u ok=%lu bad=%lu errors=%lu emsgsize=%d "
	       "badtag=%d reduced=%lu reduce_bad=%lu fault_dups=%lu "
	       "fault_drops=%lu placed=%lu oversize=%d closed=%d\n",
	       self, round_no, (unsigned long)ok_msgs, (unsigned long)bad_msgs,
	       (unsigned long)errors, emsgsize_ok, badtag_ok,
	       (unsigned long)red_ok, (unsigned long)red_bad,
	       (unsigned long)(ts ? ts->fault_dups : 0),
	       (unsigned long)(ts ? ts->fault_drops : 0),
	       (unsigned long)(ts ? ts->msgs_placed : 0), oversize_ok, closed_ok);
	fflush(stdout);
	int good = phase == 4 && bad_msgs == 0 && errors == 0 &&
		   ok_msgs == (uint64_t)rounds * CH && emsgsize_ok && badtag_ok &&
		   red_bad == 0 && red_ok == (uint64_t)RROUNDS * CH &&
		   oversize_ok && closed_ok;
	for (unsigned ch = 0; ch < CH; ch++) {
		ops->close_send(sc[ch]);
		ops->close_recv(rc_[ch]);
	}
	ops->fini(ctx);
	dp_node_fini();
	return good ? 0 : 1;
}
