/* tp_ops.rx_write: the consumer writes the fragments of a placed message
 * itself (the dpdk provider reduces them into the destination as they land,
 * net_ops.irecv_reduce). Over a link that loses, duplicates and reorders
 * frames, every fragment must reach rx_write exactly once — a duplicate
 * combined twice would corrupt a sum — at an offset that is a multiple of
 * the fragment size, which the transport keeps a multiple of 8 (no element
 * of up to 8 bytes split between two calls), inside the message. Here the
 * consumer *adds* each fragment byte-wise into a zeroed buffer: the result
 * equals the message only if every byte was added exactly once. Messages the
 * consumer declines go through the arena and its memcpy as before. Runs
 * for MTU 1500 and 9000 (fragment sizes 1400 and 8896). */
#include "tap.h"
#include "sim.h"

#include <inttypes.h>

#define NMSG 160
#define MAXLEN (200u << 10)

static struct sim S;
static uint8_t *src[NMSG], *dst[NMSG];
static size_t len_of[NMSG];
static uint8_t *seen[NMSG];            /* per fragment: rx_write calls */
static uint32_t nfrag[NMSG];
static uint32_t fsz;                   /* the sender's fragment size */
static int delivered[NMSG], intact[NMSG], in_place[NMSG], send_status[NMSG];
static int bad_off, bad_align, writes_declined, order_bad;
static uint32_t next_id;

static size_t size_of(uint32_t i)
{
	return i % 11 == 0 ? 1 + i % 7 : 1 + (size_t)(i * 7919u) % MAXLEN;
}

static void *place(struct sim_node *n, uint16_t peer, uint16_t stream,
		   uint32_t id, size_t len)
{
	(void)n;
	if (peer != 0 || stream != 0 || id >= NMSG || len != len_of[id])
		return NULL;
	return id % 3 == 2 ? NULL : dst[id];   /* every third: the arena */
}

static void unplace(struct sim_node *n, uint16_t peer, uint16_t stream,
		    uint32_t id)
{
	(void)n; (void)peer; (void)stream; (void)id;
}

static void rx_write(struct sim_node *n, uint16_t peer, uint16_t stream,
		     uint32_t id, uint8_t *buf, size_t off, const uint8_t *data,
		     size_t len)
{
	(void)n;
	ZB_ASSERT(peer == 0 && stream == 0 && id < NMSG);
	if (buf != dst[id] || id % 3 == 2) {
		writes_declined++;
		return;
	}
	if (off + len > len_of[id] || len == 0) {
		bad_off++;
		return;
	}
	if (off % 8)
		bad_align++;
	uint32_t f = (uint32_t)(off / fsz);
	if (off % fsz || f >= nfrag[id] ||
	    len != (f + 1 < nfrag[id] ? fsz : len_of[id] - off)) {
		bad_off++;
		return;
	}
	for (size_t i = 0; i < len; i++)
		buf[off + i] = (uint8_t)(buf[off + i] + data[i]);
	seen[id][f]++;
}

static int deliver(struct sim_node *n, struct tp_msg *m)
{
	if (m->stream == 0 && m->msg_id < NMSG) {
		uint32_t i = m->msg_id;
		order_bad += i != next_id;
		next_id = i + 1;
		delivered[i]++;
		in_place[i] = m->data == dst[i];
		intact[i] = m->len == len_of[i] && !memcmp(m->data, src[i], m->len);
	}
	tp_msg_release(n->tp, m);
	return 0;
}

static void send_done(struct sim_node *n, uint64_t cookie, int status)
{
	(void)n;
	if (cookie < NMSG)
		send_status[cookie] = status;
}

static bool sends_done(void)
{
	for (uint32_t i = 0; i < NMSG; i++)
		if (send_status[i] == 0x7f7f7f7f)
			return false;
	return true;
}

static void run(uint32_t mtu, uint64_t seed)
{
	struct sim_link l = {.loss = 0.05, .dup = 0.03, .reorder = 0.2,
			     .delay_ns = 5000, .reorder_ns = 30000};
	struct tp_params p;
	fsz = (mtu - 100) & ~7u;   /* what the transport uses */

	memset(delivered, 0, sizeof(delivered));
	memset(intact, 0, sizeof(intact));
	memset(in_place, 0, sizeof(in_place));
	memset(send_status, 0x7f, sizeof(send_status));
	bad_off = bad_align = writes_declined = order_bad = 0;
	next_id = 0;
	ZB_ASSERT(sim_init(&S, 2, &l, seed, 1 << 14) == 0);
	S.deliver = deliver;
	S.send_done = send_done;
	S.rx_place = place;
	S.rx_unplace = unplace;
	S.rx_write = rx_write;
	for (uint16_t i = 0; i < 2; i++) {
		sim_params(&p, i, 20 + i);
		p.mtu = (uint16_t)mtu;
		p.window = 256;
		ZB_ASSERT(sim_node_start(&S, i, &p) == 0);
	}
	for (uint32_t i = 0; i < NMSG; i++) {
		len_of[i] = size_of(i);
		nfrag[i] = (uint32_t)((len_of[i] + fsz - 1) / fsz);
		memset(seen[i], 0, MAXLEN / 1000 + 2);
		sim_fill(src[i], len_of[i], 0, 1, (uint16_t)seed, i);
		memset(dst[i], 0, len_of[i]);
		ZB_ASSERT(tp_send(S.nodes[0].tp, 1, 0, src[i], len_of[i], NULL, i,
				  S.now) == 0);
	}
	uint64_t t0 = S.now;
	while (!sends_done() && S.now - t0 < 120ull * 1000000000ull)
		sim_step(&S, 100000);

	int all = 0, good = 0, placed_ok = 0, once = 0, placed_n = 0;
	for (uint32_t i = 0; i < NMSG; i++) {
		all += delivered[i] == 1;
		good += intact[i];
		if (i % 3 == 2) {
			placed_ok += !in_place[i];
			continue;
		}
		placed_n++;
		placed_ok += in_place[i];
		int ok1 = 1;
		for (uint32_t f = 0; f < nfrag[i]; f++)
			ok1 &= seen[i][f] == 1;
		once += ok1;
	}
	tap_diag("mtu %u: %" PRIu64 " frames lost, %" PRIu64 " duplicated, %" PRIu64
		 " reordered; %" PRIu64 " retransmits", mtu, S.dropped, S.duplicated,
		 S.reordered, tp_stats(S.nodes[0].tp)->retransmits);
	ok(S.dropped > 0 && S.duplicated > 0 && S.reordered > 0,
	   "mtu %u: the link lost, duplicated and reordered frames", mtu);
	is_int(all, NMSG, "mtu %u: every message delivered exactly once, in order (%d out of order)",
	       mtu, order_bad);
	is_int(good, NMSG, "mtu %u: every content intact (placed ones summed "
	       "fragment by fragment into zeroed buffers)", mtu);
	is_int(once, placed_n, "mtu %u: rx_write called exactly once for every "
	       "fragment of every placed message", mtu);
	is_int(placed_ok, NMSG, "mtu %u: placed ones in the buffer, declined ones "
	       "from the arena", mtu);
	ok(bad_off == 0 && bad_align == 0 && writes_declined == 0,
	   "mtu %u: every write is one whole fragment at index x %u bytes (a "
	   "multiple of 8); no write for a declined message (%d %d %d)", mtu, fsz,
	   bad_off, bad_align, writes_declined);
	sim_fini(&S);
}

int main(void)
{
	tap_plan(12);
	for (uint32_t i = 0; i < NMSG; i++) {
		src[i] = malloc(MAXLEN);
		dst[i] = malloc(MAXLEN);
		seen[i] = malloc(MAXLEN / 1000 + 2);
		ZB_ASSERT(src[i] && dst[i] && seen[i]);
	}
	run(1500, 3);
	run(9000, 5);
	for (uint32_t i = 0; i < NMSG; i++) {
		free(src[i]);
		free(dst[i]);
		free(seen[i]);
	}
	return tap_done();
}
