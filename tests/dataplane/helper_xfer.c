/* helper_xfer — a node that sends COUNT messages of mixed sizes to its one
 * peer over the reliable transport (lane 0) and verifies what the peer sends
 * back: every message exactly once, in order per stream, content intact
 * (regenerated from a seed and compared byte for byte, plus a checksum).
 *
 *   helper_xfer -c NODE.ini [--count N] [--seed S] [--streams K] [--size B]
 *
 * Prints "DONE ..." once everything it sent was acknowledged and everything
 * the peer sends was received, then keeps serving (acks for the peer) until
 * SIGTERM/SIGINT; prints "RESULT ..." with the counters and exits 0 when the
 * transfer was complete and clean, 1 otherwise. "FAIL ..." lines name the
 * first problems. */
#include "zbmd/common.h"
#include "zbmd/config.h"
#include "zbmd/dataplane.h"
#include "zbmd/transport.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SLOTS 64
#define SLOT_BYTES (256u << 10)
#define MAGIC 0x7a626d64u
#define MAX_STREAMS 8

struct slot {
	struct tp_ref ref;     /* first: container_of by cast */
	int busy;
	uint8_t *buf;
};

static struct zb_config cfg;
static uint16_t self, peer;
static uint32_t count = 2000, streams = 4;
static uint64_t seed = 1;
static uint32_t fixed_size;   /* --size: every message this long (>= 16) */
static struct slot slots[SLOTS];
static uint32_t next_send;
static uint64_t acked, failed, received, bad, order_err, bytes_rx, csum_rx;
static uint32_t expect[MAX_STREAMS];
static int done_printed, fails_printed;
static volatile sig_atomic_t stop;
static uint64_t t0_ns;   /* first send */

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

/* Size of message i from node src: mostly small, some beyond the MTU, a few
 * large (up to 256 KiB: ~180 fragments). */
static uint32_t msg_size(uint16_t src, uint32_t i)
{
	if (fixed_size)
		return fixed_size;
	uint64_t r = mix(seed * 1000003u + src * 7919u + i);
	uint32_t k = (uint32_t)(r % 100);
	if (k < 1)
		return 65536 + (uint32_t)((r >> 8) % (SLOT_BYTES - 65536));
	if (k < 11)
		return 1500 + (uint32_t)((r >> 8) % 20000);
	return 16 + (uint32_t)((r >> 8) % 1400);
}

static void fill(uint8_t *b, uint16_t src, uint32_t i, uint32_t len)
{
	uint32_t hdr[4] = {MAGIC, src, i, len};
	uint64_t x = mix(seed ^ ((uint64_t)src << 48) ^ i) | 1;
	memcpy(b, hdr, sizeof(hdr));
	for (uint32_t o = sizeof(hdr); o < len; o++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		b[o] = (uint8_t)x;
	}
}

static void fail(const char *what, uint32_t i)
{
	if (fails_printed++ < 10)
		printf("FAIL %s (message %u)\n", what, i);
}

static void slot_free(struct tp_ref *ref)
{
	((struct slot *)ref)->busy = 0;
}

static unsigned sender(void *arg, uint64_t now_tsc)
{
	(void)arg;
	struct tp *tp = dp_transport(0);
	unsigned work = 0;
	if (!t0_ns)
		t0_ns = zb_now_ns();
	for (int s = 0; s < SLOTS && next_send < count; s++) {
		struct slot *sl = &slots[s];
		if (sl->busy)
			continue;
		uint32_t i = next_send;
		uint32_t len = msg_size(self, i);
		fill(sl->buf, self, i, len);
		sl->busy = 1;
		tp_ref_init(&sl->ref, slot_free);
		int rc = tp_send(tp, peer, (uint16_t)(i % streams), sl->buf, len,
				 &sl->ref, i, dp_now_ns(now_tsc));
		if (rc == -EAGAIN || rc == ZB_ERR_PEER_DOWN) {
			sl->busy = 0;   /* nothing accepted: retry later */
			break;
		}
		if (rc != 0) {
			sl->busy = 0;
			fail("tp_send refused", i);
			next_send = count;
			break;
		}
		tp_ref_put(&sl->ref);  /* the transport and the link hold theirs */
		next_send++;
		work++;
	}
	if (!done_printed && acked + failed == count && received == count) {
		done_printed = 1;   /* printing once, from the lcore, at the end */
		printf("DONE node=%u acked=%lu received=%lu elapsed_us=%lu\n", self,
		       (unsigned long)acked, (unsigned long)received,
		       (unsigned long)((zb_now_ns() - t0_ns) / 1000));
		fflush(stdout);
	}
	return work;
}

static int on_deliver(void *arg, unsigned index, struct tp_msg *m)
{
	(void)arg;
	static uint8_t want[SLOT_BYTES];
	uint32_t hdr[4] = {0};
	if (m->len >= sizeof(hdr))
		memcpy(hdr, m->data, sizeof(hdr));
	uint32_t i = hdr[2];
	if (m->peer != peer || m->stream >= streams || hdr[0] != MAGIC ||
	    hdr[1] != peer || hdr[3] != m->len || i >= count) {
		bad++;
		fail("malformed message", i);
	} else if (i % streams != m->stream || i / streams != expect[m->stream]) {
		order_err++;
		fail(i / streams < expect[m->stream] ? "duplicate" : "out of order", i);
	} else if (m->len != msg_size(peer, i)) {
		bad++;
		fail("wrong length", i);
	} else {
		fill(want, peer, i, (uint32_t)m->len);
		if (memcmp(want, m->data, m->len) != 0) {
			bad++;
			fail("content differs", i);
		}
		expect[m->stream]++;
		received++;
		bytes_rx += m->len;
		for (size_t o = 0; o < m->len; o += 64)
			csum_rx = mix(csum_rx ^ m->data[o]);
	}
	tp_msg_release(dp_transport(index), m);
	return 0;
}

static void on_send_done(void *arg, unsigned index, uint64_t cookie, int status)
{
	(void)arg;
	(void)index;
	if (status == 0) {
		acked++;
	} else {
		failed++;
		fail(zb_strerror(status), (uint32_t)cookie);
	}
}

static const struct dp_msg_ops msg_ops = {
	.deliver = on_deliver,
	.send_done = on_send_done,
};

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
	dp_node_request_stop();
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"count", required_argument, NULL, 'n'},
		{"seed", required_argument, NULL, 's'},
		{"streams", required_argument, NULL, 'k'},
		{"size", required_argument, NULL, 'z'},
		{NULL, 0, NULL, 0},
	};
	const char *path = NULL;
	int c;
	while ((c = getopt_long(argc, argv, "c:", opts, NULL)) != -1) {
		if (c == 'c')
			path = optarg;
		else if (c == 'n')
			count = (uint32_t)strtoul(optarg, NULL, 0);
		else if (c == 's')
			seed = strtoull(optarg, NULL, 0);
		else if (c == 'k')
			streams = (uint32_t)strtoul(optarg, NULL, 0);
		else if (c == 'z')
			fixed_size = (uint32_t)strtoul(optarg, NULL, 0);
		else
			return 2;
	}
	struct cfg_error cerr;
	if (fixed_size && (fixed_size < 16 || fixed_size > SLOT_BYTES))
		path = NULL;
	if (!path || streams == 0 || streams > MAX_STREAMS ||
	    cfg_load_file(&cfg, path, &cerr) != 0) {
		fprintf(stderr, "usage: helper_xfer -c NODE.ini [--count N] [--seed S] [--streams K<=8] (%s)\n",
			path ? cerr.msg : "no config");
		return 2;
	}
	self = cfg.node.id;
	for (unsigned i = 0; i < CFG_MAX_NODES; i++)
		if (cfg.peers[i].present && i != self)
			peer = (uint16_t)i;
	for (int s = 0; s < SLOTS; s++)
		slots[s].buf = aligned_alloc(64, SLOT_BYTES);

	sigset_t block, old;
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	pthread_sigmask(SIG_BLOCK, &block, &old);

	struct dp_err err;
	if (dp_node_init(&cfg, &err) != 0) {
		fprintf(stderr, "helper_xfer: %s\n", err.msg);
		return 1;
	}
	if (!dp_transport(0)) {
		fprintf(stderr, "helper_xfer: no transport (no port with an IP?)\n");
		dp_node_fini();
		return 1;
	}
	dp_set_msg_ops(&msg_ops, NULL);
	dp_register_poller(0, sender, NULL);
	if (dp_node_launch(&err) != 0) {
		fprintf(stderr, "helper_xfer: %s\n", err.msg);
		dp_node_fini();
		return 1;
	}
	printf("READY node=%u peer=%u count=%u\n", self, peer, count);
	fflush(stdout);
	if (dp_main_polls()) {
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		dp_node_wait();
	} else {
		sigset_t wait_mask = old;
		sigdelset(&wait_mask, SIGINT);
		sigdelset(&wait_mask, SIGTERM);
		while (!stop)
			sigsuspend(&wait_mask);
	}
	dp_node_stop();
	const struct tp_stats *ts = tp_stats(dp_transport(0));
	printf("RESULT node=%u sent=%u acked=%lu failed=%lu received=%lu bad=%lu order=%lu bytes=%lu csum=%016lx retransmits=%lu dup_frames=%lu ooo_frames=%lu bad_frames=%lu\n",
	       self, next_send, (unsigned long)acked, (unsigned long)failed,
	       (unsigned long)received, (unsigned long)bad,
	       (unsigned long)order_err, (unsigned long)bytes_rx,
	       (unsigned long)csum_rx, (unsigned long)ts->retransmits,
	       (unsigned long)ts->dup_frames, (unsigned long)ts->ooo_frames,
	       (unsigned long)ts->bad_frames);
	dp_stats_dump(stdout);
	fflush(stdout);
	int ok = acked == count && failed == 0 && received == count && bad == 0 &&
		 order_err == 0;
	dp_node_fini();
	for (int s = 0; s < SLOTS; s++)
		free(slots[s].buf);
	return ok ? 0 : 1;
}
