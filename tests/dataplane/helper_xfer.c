/* helper_xfer — a node that sends COUNT messages of mixed sizes to each of
 * its peers over the reliable transport (lane 0) and verifies what they send
 * back: every message exactly once, in order per (peer, stream), content
 * intact (regenerated from the seed and compared byte for byte; plus a
 * content checksum per flow that the test compares across the two ends).
 *
 *   helper_xfer -c NODE.ini [--count N] [--seed S] [--streams K] [--size B]
 *               [--mix wide|small] [--to all|ring] [--rate R] [--survive]
 *
 * --count N    messages to each destination (default 2000)
 * --size B     every message B bytes (16 .. 256 MiB) instead of a mix
 * --mix        wide: 89 % 16 B..1.4 KiB, 10 % 1.5..21 KiB, 1 % 64..256 KiB
 *              small: 80 % 16..256 B, 15 % ..1428 B (one frame), 4.9 %
 *              1.4..16 KiB, 0.1 % 64..256 KiB
 * --to         all: send to every configured peer (default); ring: to the
 *              next node id only (nodes 1..n), receive from the previous one
 * --rate R     at most R messages per second to each destination
 * --keep       receive messages of 64 KiB and more as their frames, not
 *              copied (dp_msg_ops.rx_keep, tp_msg.segs): the flows use
 *              streams 8.. (0..7 are the net provider's, never kept), and
 *              every message is checked and hashed through tp_msg_read
 * --survive    peers may die and restart: a send refused with
 *              ZB_ERR_PEER_DOWN is counted ("refused") and retried 1 ms
 *              later; failed sends are counted by status, and a peer's
 *              DOWN or RESTARTED event restarts its "acked_session" count.
 *              Received messages: the first message with a new sender epoch
 *              (tp_msg.epoch: a new incarnation or session) resynchronises
 *              that peer's streams (the next message of each stream sets the
 *              expected index; then strictly consecutive) and restarts its
 *              "received_session" count. After a DOWN or RESTARTED event,
 *              messages of the old epoch may still come (docs/wire.md: a
 *              reset delivers the complete messages that waited for an
 *              earlier one, whose sender got an error): those may skip
 *              forward ("gaps"), never go back. Done when COUNT messages
 *              per destination were accepted and all of them settled.
 *
 * Prints "READY", "EVENT ..." per peer event, "DONE ..." once the transfer
 * is complete, then keeps serving (acks for the peers) until SIGTERM/SIGINT;
 * then "RESULT ..." (totals), one "TX ..." per destination, one "RX ..." per
 * source, "TPSTATS ..." (every transport counter, bad_<reason> included) and
 * the node's stats, and exits 0 when the transfer was complete and clean, 1
 * otherwise. "FAIL ..." lines name the first problems. */
#include "zbmd/common.h"
#include "zbmd/config.h"
#include "zbmd/dataplane.h"
#include "zbmd/transport.h"
#include "det_rand.h"
#include "node_helper.h"

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
#define UNKNOWN UINT32_MAX
#define MAX_SIZE (256u << 20)

struct slot {
	struct tp_ref ref;     /* first: container_of by cast */
	int busy;
	uint8_t *buf;
};

struct out_flow {              /* to one destination */
	uint16_t node;
	uint32_t next;         /* next message index to hand to tp_send */
	uint64_t acked, failed, failed_down, failed_epoch, refused;
	uint64_t acked_session;
	uint64_t csum;         /* sum of content hashes of accepted messages */
	uint64_t hold_until;   /* survive: refused, retry after this (ns) */
};

struct in_flow {               /* from one source */
	uint16_t node;
	uint32_t expect[MAX_STREAMS];
	uint64_t received, received_session, bytes, csum, resyncs;
	uint64_t gaps;          /* survive: indices skipped after a reset */
	uint32_t first_session; /* smallest index seen in the current epoch */
	uint32_t epoch;         /* survive: sender epoch of the latest message */
	uint32_t epoch0;        /* survive: the first sender epoch seen */
	uint64_t received_first; /* ... messages received of that epoch */
	int after_reset;        /* survive: DOWN/RESTARTED seen in this epoch */
};

static struct zb_config cfg;
static uint16_t self;
static uint32_t count = 2000, streams = 4, rate;
static uint16_t stream_base;     /* --keep: 8 */
static uint64_t kept;            /* messages delivered as frames */
static uint64_t seed = 1;
static uint32_t fixed_size;   /* --size: every message this long (>= 16) */
static int mix_small, ring, survive;
static struct out_flow outs[CFG_MAX_NODES];
static struct in_flow ins[CFG_MAX_NODES];
static int nouts, nins;
static int16_t in_of[CFG_MAX_NODES], out_of[CFG_MAX_NODES];
static struct slot slots[SLOTS];
static int nslots;
static uint32_t slot_bytes = SLOT_BYTES;
static int rr;                 /* next destination, round robin */
static uint64_t bad, order_err;
static int done_printed, fails_printed;
static volatile sig_atomic_t stop;
static uint64_t t0_ns;         /* first send (transport clock) */
static uint64_t t0_wall;       /* first send (zb_now_ns) */

/* Size of message i from node src to node dst. */
static uint32_t msg_size(uint16_t src, uint16_t dst, uint32_t i)
{
	if (fixed_size)
		return fixed_size;
	uint64_t r = dr_mix64(seed * 1000003u + src * 7919u + dst * 104729u + i);
	uint32_t k = (uint32_t)(r % 1000);
	uint32_t v = (uint32_t)(r >> 16);
	if (mix_small) {
		if (k < 800)
			return 16 + v % 241;
		if (k < 950)
			return 257 + v % (1428 - 257 + 1);
		if (k < 999)
			return 1429 + v % (16384 - 1429);
		return 65536 + v % (SLOT_BYTES - 65536);
	}
	if (k < 10)
		return 65536 + v % (SLOT_BYTES - 65536);
	if (k < 110)
		return 1500 + v % 20000;
	return 16 + v % 1400;
}

/* The content generator: a 16-byte header {MAGIC, src, i, len} then
 * xorshift64 words (little-endian), so a message can be produced or checked
 * piecewise. */
struct gen {
	uint64_t x;
};

static void gen_init(struct gen *g, uint16_t src, uint16_t dst, uint32_t i)
{
	g->x = dr_mix64(seed ^ ((uint64_t)src << 48) ^ ((uint64_t)dst << 32) ^ i) | 1;
}

static void gen_fill(struct gen *g, uint8_t *b, size_t n)
{
	size_t o = 0;
	for (; o + 8 <= n; o += 8) {
		dr_xorshift64(&g->x);
		memcpy(b + o, &g->x, 8);
	}
	if (o < n) {
		dr_xorshift64(&g->x);
		memcpy(b + o, &g->x, n - o);
	}
}

static void fill(uint8_t *b, uint16_t src, uint16_t dst, uint32_t i, uint32_t len)
{
	uint32_t hdr[4] = {MAGIC, src, i, len};
	struct gen g;
	gen_init(&g, src, dst, i);
	memcpy(b, hdr, sizeof(hdr));
	gen_fill(&g, b + sizeof(hdr), len - sizeof(hdr));
}

/* Content hash of one message (FNV-1a over 64-bit words, then mixed). The
 * flows add them up: the sender's sum over what it sent and the receiver's
 * over what it received must agree. Fed in pieces: every piece but the last
 * a multiple of 8 bytes. */
static uint64_t hash_add(uint64_t h, const uint8_t *b, size_t len)
{
	size_t o = 0;
	for (; o + 8 <= len; o += 8) {
		uint64_t w;
		memcpy(&w, b + o, 8);
		h = (h ^ w) * 0x100000001b3ull;
	}
	for (; o < len; o++)
		h = (h ^ b[o]) * 0x100000001b3ull;
	return h;
}
static inline uint64_t hash_start(size_t len) { return 0xcbf29ce484222325ull ^ len; }
static uint64_t content_hash(const uint8_t *b, size_t len)
{
	return dr_mix64(hash_add(hash_start(len), b, len));
}

/* 0 when delivered message m is exactly message i from src to dst (header
 * checked by the caller); *hash = its content_hash. Reads it in chunks
 * through tp_msg_read, whatever its layout (arena, or kept frames): no
 * buffer of the message's size. */
static int verify(const struct tp_msg *m, uint16_t src, uint16_t dst,
		  uint32_t i, uint64_t *hash)
{
	static uint8_t got[64 << 10], want[64 << 10];
	uint64_t h = hash_start(m->len);
	struct gen g;
	int rc = 0;
	gen_init(&g, src, dst, i);
	for (size_t o = 0; o < m->len;) {
		size_t n = m->len - o < sizeof(got) ? m->len - o : sizeof(got);
		size_t from = o < 16 ? 16 - o : 0;   /* the header: not generated */
		tp_msg_read(m, o, got, n);
		h = hash_add(h, got, n);
		if (n > from) {
			gen_fill(&g, want, n - from);
			if (memcmp(want, got + from, n - from) != 0)
				rc = -1;
		}
		o += n;
	}
	*hash = dr_mix64(h);
	return rc;
}

static void fail(const char *what, uint16_t node, uint32_t i)
{
	if (fails_printed++ < 10) {
		printf("FAIL %s (node %u message %u)\n", what, node, i);
		fflush(stdout);
	}
}

static void slot_free(struct tp_ref *ref)
{
	((struct slot *)ref)->busy = 0;
}

static int transfer_done(void)
{
	for (int d = 0; d < nouts; d++) {
		const struct out_flow *o = &outs[d];
		if (o->next != count || o->acked + o->failed != o->next)
			return 0;
	}
	if (!survive)
		for (int s = 0; s < nins; s++)
			if (ins[s].received != count)
				return 0;
	return 1;
}

/* the destination to send to next, or NULL when none may send now */
static struct out_flow *pick(uint64_t now)
{
	for (int k = 0; k < nouts; k++) {
		struct out_flow *o = &outs[(rr + k) % nouts];
		if (o->next >= count || now < o->hold_until)
			continue;
		if (rate && (now - t0_ns) / 1000 * rate / 1000000 <= o->next)
			continue;
		rr = (rr + k + 1) % nouts;
		return o;
	}
	return NULL;
}

static unsigned sender(void *arg, uint64_t now_tsc)
{
	(void)arg;
	struct tp *tp = dp_transport(0);
	unsigned work = 0;
	uint64_t now = dp_now_ns(now_tsc);
	if (!t0_ns) {
		t0_ns = now ? now : 1;
		t0_wall = zb_now_ns();
	}
	for (int s = 0; s < nslots; s++) {
		struct slot *sl = &slots[s];
		if (sl->busy)
			continue;
		struct out_flow *o = pick(now);
		if (!o)
			break;
		uint32_t i = o->next;
		uint32_t len = msg_size(self, o->node, i);
		fill(sl->buf, self, o->node, i, len);
		sl->busy = 1;
		tp_ref_init(&sl->ref, slot_free);
		int rc = tp_send(tp, o->node, (uint16_t)(stream_base + i % streams), sl->buf, len,
				 &sl->ref, ((uint64_t)o->node << 32) | i, now);
		if (rc == -EAGAIN || rc == ZB_ERR_PEER_DOWN) {
			sl->busy = 0;   /* nothing accepted: retry later */
			if (rc == ZB_ERR_PEER_DOWN && survive) {
				o->refused++;
				o->hold_until = now + 1000000;
				continue;
			}
			break;
		}
		if (rc != 0) {
			sl->busy = 0;
			fail(zb_strerror(rc), o->node, i);
			o->next = count;
			continue;
		}
		o->csum += content_hash(sl->buf, len);
		tp_ref_put(&sl->ref);  /* the transport and the link hold theirs */
		o->next++;
		work++;
	}
	if (!done_printed && transfer_done()) {
		done_printed = 1;   /* printing once, from the lcore, at the end */
		uint64_t acked = 0, received = 0;
		for (int d = 0; d < nouts; d++)
			acked += outs[d].acked;
		for (int s = 0; s < nins; s++)
			received += ins[s].received;
		printf("DONE node=%u acked=%lu received=%lu elapsed_us=%lu\n", self,
		       (unsigned long)acked, (unsigned long)received,
		       (unsigned long)((zb_now_ns() - t0_wall) / 1000));
		fflush(stdout);
	}
	return work;
}

static void resync(struct in_flow *f, uint32_t epoch)
{
	f->epoch = epoch;
	f->after_reset = 0;
	for (unsigned s = 0; s < MAX_STREAMS; s++)
		f->expect[s] = UNKNOWN;
	f->received_session = 0;
	f->first_session = UNKNOWN;
	f->resyncs++;
}

static int on_deliver(void *arg, unsigned index, struct tp_msg *m)
{
	(void)arg;
	uint32_t hdr[4] = {0};
	if (m->len >= sizeof(hdr))
		tp_msg_read(m, 0, hdr, sizeof(hdr));
	uint32_t i = hdr[2];
	uint16_t stream = (uint16_t)(m->stream - stream_base);   /* ours: 0.. */
	if (m->segs)
		kept++;
	struct in_flow *f = m->peer < CFG_MAX_NODES && in_of[m->peer] >= 0
				    ? &ins[in_of[m->peer]]
				    : NULL;
	uint32_t *exp = f && stream < MAX_STREAMS ? &f->expect[stream] : NULL;
	if (!f || m->stream < stream_base || stream >= streams || hdr[0] != MAGIC || hdr[1] != m->peer ||
	    hdr[3] != m->len || (!survive && i >= count)) {
		bad++;
		fail("malformed message", m->peer, i);
	} else {
		if (survive && !f->epoch0)
			f->epoch0 = m->epoch;
		if (survive && f->epoch && (int32_t)(m->epoch - f->epoch) < 0) {
			/* epochs only grow (RFC 1982 order): an older session's
			 * message after a newer one's is out of order */
			order_err++;
			fail("message of an older session after a newer one's", m->peer, i);
		}
		if (survive && m->epoch != f->epoch) {
			resync(f, m->epoch);   /* a new sender session */
		} else if (survive && f->after_reset && *exp != UNKNOWN &&
			   i % streams == stream && i / streams > *exp) {
			f->gaps += i / streams - *exp;   /* see --survive */
			*exp = i / streams;
		}
		if (*exp == UNKNOWN && i % streams == stream)
			*exp = i / streams;   /* resynchronised: this one sets the base */
		if (i % streams != stream || i / streams != *exp) {
			order_err++;
			fail(i / streams < *exp ? "duplicate" : "out of order", m->peer, i);
		} else if (m->len != msg_size(m->peer, self, i)) {
			bad++;
			fail("wrong length", m->peer, i);
		} else {
			uint64_t h;
			if (verify(m, m->peer, self, i, &h) != 0) {
				bad++;
				fail("content differs", m->peer, i);
			}
			(*exp)++;
			f->received++;
			f->received_session++;
			if (m->epoch == f->epoch0)
				f->received_first++;
			if (i < f->first_session)
				f->first_session = i;
			f->bytes += m->len;
			f->csum += h;
		}
	}
	tp_msg_release(dp_transport(index), m);
	return 0;
}

static void on_send_done(void *arg, unsigned index, uint64_t cookie, int status)
{
	(void)arg;
	(void)index;
	uint16_t node = (uint16_t)(cookie >> 32);
	if (node >= CFG_MAX_NODES || out_of[node] < 0) {
		fail("send_done for an unknown destination", node, (uint32_t)cookie);
		return;
	}
	struct out_flow *o = &outs[out_of[node]];
	if (status == 0) {
		o->acked++;
		o->acked_session++;
		return;
	}
	o->failed++;
	if (status == ZB_ERR_PEER_DOWN)
		o->failed_down++;
	else if (status == ZB_ERR_EPOCH)
		o->failed_epoch++;
	if (!survive || (status != ZB_ERR_PEER_DOWN && status != ZB_ERR_EPOCH))
		fail(zb_strerror(status), node, (uint32_t)cookie);
}

static void on_peer_event(void *arg, unsigned index, uint16_t peer,
			  enum tp_peer_event ev, uint32_t remote_epoch)
{
	(void)arg;
	(void)index;
	static const char *names[] = {"?", "up", "restarted", "down", "reset"};
	struct out_flow *o = peer < CFG_MAX_NODES && out_of[peer] >= 0 ? &outs[out_of[peer]] : NULL;
	struct in_flow *f = peer < CFG_MAX_NODES && in_of[peer] >= 0 ? &ins[in_of[peer]] : NULL;
	printf("EVENT node=%u peer=%u %s epoch=%u acked=%lu failed=%lu received=%lu\n",
	       self, peer, names[ev <= TP_PEER_RESET ? ev : 0], remote_epoch,
	       (unsigned long)(o ? o->acked : 0), (unsigned long)(o ? o->failed : 0),
	       (unsigned long)(f ? f->received : 0));
	fflush(stdout);
	if (ev == TP_PEER_UP)
		return;
	if (!survive)
		fail(ev == TP_PEER_DOWN ? "peer down" : "peer restarted", peer, 0);
	if (o)
		o->acked_session = 0;
	if (f)
		f->after_reset = 1;
}

static bool on_rx_keep(void *arg, unsigned index, uint16_t peer,
		       uint16_t stream, size_t len)
{
	(void)arg;
	(void)index;
	(void)peer;
	(void)stream;
	(void)len;
	return stream_base != 0;
}

static const struct dp_msg_ops msg_ops = {
	.deliver = on_deliver,
	.rx_keep = on_rx_keep,
	.send_done = on_send_done,
	.peer_event = on_peer_event,
};

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
	dp_node_request_stop();
}

static void print_stat(void *arg, const char *name, uint64_t value)
{
	(void)arg;
	printf(" %s=%lu", name, (unsigned long)value);
}

/* Destinations and sources from the config's peers and --to. */
static int setup_flows(void)
{
	uint16_t nodes[CFG_MAX_NODES];
	int n = 0, me = -1;
	for (unsigned i = 0; i < CFG_MAX_NODES; i++) {
		in_of[i] = out_of[i] = -1;
		if (i == self)
			me = n;
		if (cfg.peers[i].present || i == self)
			nodes[n++] = (uint16_t)i;
	}
	if (me < 0 || n < 2)
		return -1;
	for (int k = 0; k < n; k++) {
		uint16_t id = nodes[k];
		if (id == self)
			continue;
		int to = !ring || k == (me + 1) % n;
		int from = !ring || me == (k + 1) % n;
		if (to) {
			out_of[id] = (int16_t)nouts;
			outs[nouts++].node = id;
		}
		if (from) {
			in_of[id] = (int16_t)nins;
			ins[nins].node = id;
			ins[nins].first_session = UNKNOWN;
			if (!survive)
				memset(ins[nins].expect, 0, sizeof(ins[nins].expect));
			else
				for (unsigned s = 0; s < MAX_STREAMS; s++)
					ins[nins].expect[s] = UNKNOWN;
			nins++;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"count", required_argument, NULL, 'n'},
		{"seed", required_argument, NULL, 's'},
		{"streams", required_argument, NULL, 'k'},
		{"size", required_argument, NULL, 'z'},
		{"mix", required_argument, NULL, 'm'},
		{"to", required_argument, NULL, 't'},
		{"rate", required_argument, NULL, 'r'},
		{"survive", no_argument, NULL, 'v'},
		{"keep", no_argument, NULL, 'K'},
		{NULL, 0, NULL, 0},
	};
	const char *path = NULL;
	int c, usage = 0;
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
		else if (c == 'm')
			mix_small = strcmp(optarg, "small") == 0 ? 1
				    : strcmp(optarg, "wide") == 0 ? 0 : (usage = 1);
		else if (c == 't')
			ring = strcmp(optarg, "ring") == 0 ? 1
			       : strcmp(optarg, "all") == 0 ? 0 : (usage = 1);
		else if (c == 'r')
			rate = (uint32_t)strtoul(optarg, NULL, 0);
		else if (c == 'v')
			survive = 1;
		else if (c == 'K')
			stream_base = 8;   /* past the net provider's streams */
		else
			usage = 1;
	}
	struct cfg_error cerr = {0};
	if (fixed_size && (fixed_size < 16 || fixed_size > MAX_SIZE))
		usage = 1;
	if (usage || !path || streams == 0 || streams > MAX_STREAMS ||
	    cfg_load_file(&cfg, path, &cerr) != 0) {
		fprintf(stderr, "usage: helper_xfer -c NODE.ini [--count N] [--seed S] [--streams K<=8] "
				"[--size 16..256MiB] [--mix wide|small] [--to all|ring] [--rate R] [--survive] [--keep] (%s)\n",
			path ? cerr.msg : "no config");
		return 2;
	}
	self = cfg.node.id;
	if (setup_flows() != 0) {
		fprintf(stderr, "helper_xfer: node %u has no peers\n", self);
		return 2;
	}
	if (fixed_size > SLOT_BYTES)
		slot_bytes = fixed_size;
	nslots = fixed_size > SLOT_BYTES ? 1 : SLOTS;
	for (int s = 0; s < nslots; s++) {
		slots[s].buf = aligned_alloc(64, (slot_bytes + 63) & ~63u);
		if (!slots[s].buf) {
			fprintf(stderr, "helper_xfer: out of memory\n");
			return 1;
		}
	}

	sigset_t old;
	nh_signals_block(on_signal, &old);

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
	printf("READY node=%u to=%d from=%d count=%u\n", self, nouts, nins, count);
	fflush(stdout);
	nh_run_until(&stop, &old);

	uint64_t sent = 0, acked = 0, failed = 0, received = 0, bytes = 0, csum = 0;
	int ok = bad == 0 && order_err == 0;
	for (int d = 0; d < nouts; d++) {
		const struct out_flow *o = &outs[d];
		printf("TX node=%u to=%u sent=%u acked=%lu failed=%lu failed_down=%lu failed_epoch=%lu refused=%lu acked_session=%lu csum=%016lx\n",
		       self, o->node, o->next, (unsigned long)o->acked,
		       (unsigned long)o->failed, (unsigned long)o->failed_down,
		       (unsigned long)o->failed_epoch, (unsigned long)o->refused,
		       (unsigned long)o->acked_session, (unsigned long)o->csum);
		sent += o->next;
		acked += o->acked;
		failed += o->failed;
		if (o->next != count || o->acked + o->failed != o->next ||
		    (!survive && o->failed))
			ok = 0;
	}
	for (int s = 0; s < nins; s++) {
		const struct in_flow *f = &ins[s];
		printf("RX node=%u from=%u received=%lu received_session=%lu received_first=%lu first_session=%ld resyncs=%lu gaps=%lu bytes=%lu csum=%016lx\n",
		       self, f->node, (unsigned long)f->received,
		       (unsigned long)f->received_session,
		       (unsigned long)f->received_first,
		       f->first_session == UNKNOWN ? -1L : (long)f->first_session,
		       (unsigned long)f->resyncs, (unsigned long)f->gaps,
		       (unsigned long)f->bytes,
		       (unsigned long)f->csum);
		received += f->received;
		bytes += f->bytes;
		csum += f->csum;
		if (!survive && f->received != count)
			ok = 0;
	}
	const struct tp_stats *ts = tp_stats(dp_transport(0));
	printf("RESULT node=%u sent=%lu acked=%lu failed=%lu received=%lu bad=%lu order=%lu bytes=%lu csum=%016lx retransmits=%lu dup_frames=%lu ooo_frames=%lu bad_frames=%lu kept=%lu\n",
	       self, (unsigned long)sent, (unsigned long)acked,
	       (unsigned long)failed, (unsigned long)received,
	       (unsigned long)bad, (unsigned long)order_err,
	       (unsigned long)bytes, (unsigned long)csum,
	       (unsigned long)ts->retransmits, (unsigned long)ts->dup_frames,
	       (unsigned long)ts->ooo_frames, (unsigned long)ts->bad_frames,
	       (unsigned long)kept);
	printf("TPSTATS node=%u", self);
	tp_stats_foreach(ts, print_stat, NULL);
	printf("\n");
	dp_stats_dump(stdout);
	fflush(stdout);
	dp_node_fini();
	for (int s = 0; s < nslots; s++)
		free(slots[s].buf);
	return ok ? 0 : 1;
}
