/* Receive-side corner cases, each once a bug:
 * - progress: out-of-order messages never take the descriptors a frame at
 *   rcv_next needs (a lost frame under a backlog deadlocked the receiver);
 * - a fragment sent under two sequence numbers is taken once (it completed
 *   a message with a hole);
 * - a frame of a session abandoned by a reset (dst_epoch 0) is refused in
 *   the new one (it was delivered as the new session's message);
 * - tp_poll keeps a deadline armed by a callback it ran (a retransmission
 *   waited for the next unrelated timer);
 * - a send_done run by a peer's restart sends to its new epoch;
 * - a frame refused for its stream or sequence acts on nothing (its ack
 *   completed messages, its new epoch reset the session);
 * - tp_send from tp_destroy's callbacks is refused, not lost;
 * - an orphan the consumer refuses holds back its own peer only, and that
 *   peer's new session waits for all its orphans, on every stream;
 * - two messages longer than the window on two streams, together more
 *   than the receiver's arena, both arrive (the session stalled for good);
 * - a sender that dies mid-message is declared down, and its partial
 *   message freed, though nothing is sent to it (another peer stalled);
 * - a message on a stream the receiver lacks fails (the session stalled).
 * Crafted frames come "from" node 1 to the instance under test (node 0). */
#include "tap.h"
#include "sim.h"

/* ---- a lost frame under a backlog of small messages from three peers ---- */
static struct sim S;
static uint64_t delivered[SIM_MAX_NODES], s_ok, s_err;

static int s_deliver(struct sim_node *n, struct tp_msg *m)
{
	delivered[m->peer]++;
	tp_msg_release(n->tp, m);
	return 0;
}

static void s_done(struct sim_node *n, uint64_t c, int st)
{
	(void)n;
	(void)c;
	if (st)
		s_err++;
	else
		s_ok++;
}

static void test_backlog_gap(void)
{
	struct sim_link l = {.delay_ns = 10000};
	static uint8_t buf[64];
	const int nsend = 3, per = 400;
	uint64_t t0, total = 0;

	ZB_ASSERT(sim_init(&S, 1 + nsend, &l, 1, 1 << 15) == 0);
	S.deliver = s_deliver;
	S.send_done = s_done;
	for (int i = 0; i <= nsend; i++) {
		struct tp_params p;
		sim_params(&p, (uint16_t)i, 100 + i);   /* rx_msgs 512 */
		p.tx_msgs = 1024;
		ZB_ASSERT(sim_node_start(&S, (uint16_t)i, &p) == 0);
	}
	/* each sender's first message is lost once; the rest (3 x 399, more
	 * than the receiver's descriptors) arrive behind the gap */
	for (int i = 1; i <= nsend; i++)
		S.block[i][0] = true;
	for (int i = 1; i <= nsend; i++)
		ZB_ASSERT(tp_send(S.nodes[i].tp, 0, 0, buf, sizeof(buf), NULL, 0, S.now) == 0);
	for (int i = 1; i <= nsend; i++)
		S.block[i][0] = false;
	for (int k = 1; k < per; k++)
		for (int i = 1; i <= nsend; i++)
			ZB_ASSERT(tp_send(S.nodes[i].tp, 0, 0, buf, sizeof(buf), NULL,
					  (uint64_t)k, S.now) == 0);
	t0 = S.now;
	while (S.now - t0 < 5000000000ull && s_ok < (uint64_t)nsend * per)
		sim_step(&S, 100000);
	for (int i = 1; i <= nsend; i++)
		total += delivered[i];
	is_int(total, nsend * per, "backlog behind a lost frame: all %d messages delivered",
	       nsend * per);
	is_int(s_ok, nsend * per, "backlog: every send done");
	is_int(s_err, 0, "backlog: no send failed");
	tap_diag("backlog: no_buffer_drops %" PRIu64,
		 tp_stats(S.nodes[0].tp)->no_buffer_drops);
	sim_fini(&S);
}

/* ---- a deadline armed from a callback tp_poll ran ------------------------ */
static struct tp *T;
static uint64_t NOW;
static int ntx;
static uint8_t pbuf[64];

static int d_tx(void *u, const struct tp_frame *f)
{
	(void)u;
	(void)f;
	ntx++;
	return 0;
}

static int d_deliver(void *u, struct tp_msg *m)
{
	(void)u;
	(void)m;
	return 0;
}

/* peer 2 was declared down: send to peer 1 instead (a lower index than
 * the peer tp_poll's loop is at) */
static void d_done(void *u, uint64_t c, int st)
{
	(void)u;
	(void)st;
	if (c == 2)
		ZB_ASSERT(tp_send(T, 1, 0, pbuf, sizeof(pbuf), NULL, 1, NOW) == 0);
}

static void test_poll_keeps_armed(void)
{
	struct tp_ops ops = {.tx = d_tx, .deliver = d_deliver, .send_done = d_done};
	struct tp_params p;
	struct tp_peer_info pi;
	uint8_t mac[6];
	uint64_t t, sent_at = 0, rtx_at = 0;

	sim_params(&p, 0, 1000);
	p.connect_timeout_ms = 10;
	ZB_ASSERT(tp_create(&p, &ops, NULL, &T) == 0);
	sim_mac(1, mac);
	ZB_ASSERT(tp_peer_add(T, 1, mac, sim_ip(1)) == 0);
	sim_mac(2, mac);
	ZB_ASSERT(tp_peer_add(T, 2, mac, sim_ip(2)) == 0);
	NOW = 1000000;
	ZB_ASSERT(tp_send(T, 2, 0, pbuf, sizeof(pbuf), NULL, 2, NOW) == 0);
	/* poll only when tp_next_deadline() says so, as dataplane/link.c */
	for (t = NOW; t < NOW + 400000000ull; t++) {
		uint64_t d = tp_next_deadline(T);
		int before = ntx;

		if (d > t)
			t = d;
		NOW = t;
		tp_poll(T, t);
		ZB_ASSERT(tp_peer_info(T, 1, &pi) == 0);
		if (pi.in_flight && !sent_at) {
			sent_at = t;
			continue;
		}
		if (sent_at && ntx > before) {
			rtx_at = t;
			break;
		}
	}
	ok(sent_at != 0, "deadline: a send_done from tp_poll sent to another peer");
	ok(rtx_at && rtx_at - sent_at <= 2000000ull,
	   "deadline: its retransmission ran after %.3f ms (rto 1 ms), not at the next unrelated timer",
	   (rtx_at - sent_at) / 1e6);
	tp_destroy(T);
}

/* ---- crafted frames from node 1 to node 0 -------------------------------- */
static struct tp_params P0;
static struct tp_msg *got[64];
static int ngot;
static uint8_t place_buf[8192];
static int n_place, n_unplace, n_write, write_at[8192];

static struct tp *CT;             /* the instance under test */
static struct wire_hdr last_tx;   /* the latest frame it sent */
static int resend_on_done, last_done_status;

static int c_tx(void *u, const struct tp_frame *f)
{
	static uint8_t b[SIM_FRAME_MAX];
	struct tp_params p1;
	struct wire_rx_cfg cfg;
	struct wire_addr a;
	const uint8_t *pl;

	(void)u;
	memcpy(b, f->hdr, f->hdr_len);
	if (f->payload_len)
		memcpy(b + f->hdr_len, f->payload, f->payload_len);
	for (uint16_t to = 1; to < SIM_MAX_NODES; to++) {
		sim_params(&p1, to, 1);
		cfg = sim_rx_cfg(&p1);
		if (wire_decode(b, f->hdr_len + f->payload_len, &cfg, 0,
				&last_tx, &a, &pl) == WIRE_OK)
			return 0;
	}
	ZB_ASSERT(!"a frame no node takes");
	return 0;
}

static int refuse_stream = -1;   /* c_deliver says -EAGAIN for it ... */
static int refuse_peer = 1;      /* ... from this peer */
static uint16_t mk_src = 1;      /* the node mk's frames come from */
static uint32_t mk_ack;          /* ... and the cumulative ack they carry */

static int c_deliver(void *u, struct tp_msg *m)
{
	(void)u;
	if (m->stream == refuse_stream && m->peer == refuse_peer)
		return -EAGAIN;
	ZB_ASSERT(ngot < 64);
	got[ngot++] = m;
	return 0;
}

static void c_done(void *u, uint64_t c, int st)
{
	static uint8_t b[16];

	(void)u;
	(void)c;
	last_done_status = st;
	if (resend_on_done) {
		resend_on_done = 0;
		ZB_ASSERT(tp_send(CT, 1, 0, b, sizeof(b), NULL, 9, 0) == 0);
	}
}

static void *c_place(void *u, uint16_t peer, uint16_t stream, uint32_t id,
		     size_t len)
{
	(void)u;
	(void)peer;
	(void)stream;
	(void)id;
	ZB_ASSERT(len <= sizeof(place_buf));
	n_place++;
	memset(place_buf, 'S', sizeof(place_buf));   /* stale content */
	return place_buf;
}

static void c_unplace(void *u, uint16_t peer, uint16_t stream, uint32_t id)
{
	(void)u;
	(void)peer;
	(void)stream;
	(void)id;
	n_unplace++;
}

static void c_write(void *u, uint16_t peer, uint16_t stream, uint32_t id,
		    uint8_t *buf, size_t off, const uint8_t *data, size_t len)
{
	(void)u;
	(void)peer;
	(void)stream;
	(void)id;
	n_write++;
	write_at[off]++;
	memcpy(buf + off, data, len);
}

static struct tp *craft_tp(bool place, bool write)
{
	struct tp_ops ops = {.tx = c_tx, .deliver = c_deliver, .send_done = c_done};
	struct tp *tp;
	uint8_t mac[6];

	if (place) {
		ops.rx_place = c_place;
		ops.rx_unplace = c_unplace;
	}
	if (write)
		ops.rx_write = c_write;
	sim_params(&P0, 0, 1000);
	ZB_ASSERT(tp_create(&P0, &ops, NULL, &tp) == 0);
	sim_mac(1, mac);
	ZB_ASSERT(tp_peer_add(tp, 1, mac, sim_ip(1)) == 0);
	CT = tp;
	resend_on_done = 0;
	refuse_stream = -1;
	refuse_peer = 1;
	mk_src = 1;
	mk_ack = 0;
	ngot = n_place = n_unplace = n_write = 0;
	memset(write_at, 0, sizeof(write_at));
	return tp;
}

/* One frame from node 1 (src_epoch se, dst_epoch de). */
static size_t mk(uint8_t *buf, uint32_t se, uint32_t de, uint32_t seq,
		 uint16_t stream, uint32_t msg_id, uint32_t msg_len, uint32_t fi,
		 uint32_t fc, uint16_t fs, const void *pl, uint16_t plen)
{
	struct wire_addr a = {0};
	struct wire_hdr h = {0};

	sim_mac(mk_src, a.src_mac);
	sim_mac(0, a.dst_mac);
	a.src_ip = sim_ip(mk_src);
	a.dst_ip = sim_ip(0);
	a.src_port = a.dst_port = P0.udp_port;
	h.type = WIRE_T_DATA;
	h.cluster = P0.cluster;
	h.src_node = mk_src;
	h.dst_node = 0;
	h.stream = stream;
	h.src_epoch = se;
	h.dst_epoch = de;
	h.seq = seq;
	h.ack = mk_ack;
	h.credit = 256;
	h.payload_len = plen;
	h.msg_id = msg_id;
	h.msg_len = msg_len;
	h.frag_index = fi;
	h.frag_count = fc;
	h.frag_size = fs;
	wire_encode(buf, &a, &h, pl, 1, 0);
	if (plen)
		memcpy(buf + WIRE_HDRS_LEN, pl, plen);
	return WIRE_HDRS_LEN + plen;
}

/* Message 1 of frags fragments of fs bytes (fragment i filled with 'a' +
 * i % 26): fragment dup sent a second time under its own sequence number
 * before the last one. Message 0 (all 'S') went first, so the arena holds
 * stale bytes where a hole would be. */
static void dup_frag_case(const char *what, bool place, bool write,
			  uint32_t frags, uint16_t fs, uint32_t dup)
{
	struct tp *tp = craft_tp(place, write);
	static uint8_t f[SIM_FRAME_MAX], pl[SIM_FRAME_MAX];
	uint64_t now = 1000000;
	uint32_t len = frags * fs, seq = 0, bad = 0;
	size_t n;

	memset(pl, 'S', fs);
	for (uint32_t i = 0; i < frags; i++) {
		n = mk(f, 77, 0, seq++, 0, 0, len, i, frags, fs, pl, fs);
		ZB_ASSERT(tp_rx(tp, f, n, 0, now) == 0);
	}
	ZB_ASSERT(ngot == 1);
	tp_msg_release(tp, got[0]);
	ngot = 0;
	n_write = 0;
	memset(write_at, 0, sizeof(write_at));
	for (uint32_t i = 0; i + 1 < frags; i++) {
		memset(pl, 'a' + i % 26, fs);
		n = mk(f, 77, 0, seq++, 0, 1, len, i, frags, fs, pl, fs);
		ZB_ASSERT(tp_rx(tp, f, n, 0, now) == 0);
		if (i == dup) {
			memset(pl, 'X', fs);   /* the copy must not be used */
			n = mk(f, 77, 0, seq++, 0, 1, len, i, frags, fs, pl, fs);
			ZB_ASSERT(tp_rx(tp, f, n, 0, now) == 0);
		}
	}
	is_int(ngot, 0, "%s: a fragment twice does not complete the message", what);
	memset(pl, 'a' + (frags - 1) % 26, fs);
	n = mk(f, 77, 0, seq++, 0, 1, len, frags - 1, frags, fs, pl, fs);
	ZB_ASSERT(tp_rx(tp, f, n, 0, now) == 0);
	is_int(ngot, 1, "%s: the last fragment does", what);
	if (ngot == 1) {
		for (uint32_t i = 0; i < len; i++)
			bad += got[0]->data[i] != 'a' + (i / fs) % 26;
		tp_msg_release(tp, got[0]);
	}
	is_int(bad, 0, "%s: every byte from its own fragment, once", what);
	is_int(tp_stats(tp)->dup_frames, 1, "%s: the copy counted as a duplicate", what);
	if (write) {
		int twice = 0;
		for (uint32_t i = 0; i < len; i++)
			twice += write_at[i] > 1;
		is_int(n_write, frags, "%s: rx_write once per fragment", what);
		is_int(twice, 0, "%s: no offset written (reduced) twice", what);
	}
	tp_destroy(tp);
}

/* Node 1 (epoch 77) has not heard from us: its frames carry dst_epoch 0.
 * We reset the session; it obeys and sends its new session addressed to
 * our new epoch. A frame of its old session, delayed, arrives then. */
static void test_old_dst0_after_reset(void)
{
	struct tp *tp = craft_tp(false, false);
	static uint8_t f[SIM_FRAME_MAX], old2[SIM_FRAME_MAX];
	struct tp_peer_info pi;
	uint64_t now = 1000000;
	size_t n, n_old2;
	uint32_t la;
	int news = 0;

	for (uint32_t s = 0; s < 2; s++) {
		n = mk(f, 77, 0, s, 0, s, 3, 0, 1, 3, "OLD", 3);
		ZB_ASSERT(tp_rx(tp, f, n, 0, now) == 0);
	}
	for (int i = 0; i < ngot; i++)
		tp_msg_release(tp, got[i]);
	ngot = 0;
	n_old2 = mk(old2, 77, 0, 2, 0, 2, 3, 0, 1, 3, "OLD", 3);
	ZB_ASSERT(tp_peer_reset(tp, 1, now) == 0);
	ZB_ASSERT(tp_peer_info(tp, 1, &pi) == 0);
	la = pi.local_epoch;
	ZB_ASSERT(la != P0.epoch);
	for (uint32_t s = 0; s < 2; s++) {
		n = mk(f, 77, la, s, 0, s, 3, 0, 1, 3, "NEW", 3);
		ZB_ASSERT(tp_rx(tp, f, n, 0, now) == 0);
	}
	ok(tp_rx(tp, old2, n_old2, 0, now) != 0,
	   "reset: a delayed old-session frame (dst_epoch 0) is refused in the new session");
	n = mk(f, 77, la, 2, 0, 2, 3, 0, 1, 3, "NEW", 3);
	ZB_ASSERT(tp_rx(tp, f, n, 0, now) == 0);
	is_int(ngot, 3, "reset: the new session's three messages delivered");
	for (int i = 0; i < ngot; i++) {
		news += got[i]->len == 3 && !memcmp(got[i]->data, "NEW", 3) &&
			got[i]->msg_id == (uint32_t)i;
		tp_msg_release(tp, got[i]);
	}
	is_int(news, 3, "reset: each with the new session's content, in order");
	tp_destroy(tp);
}

/* Node 1 restarts (epoch 77 -> 78) while a message to it is in flight:
 * the send_done of the reset sends again, to the new incarnation. */
static void test_restart_resend_epoch(void)
{
	struct tp *tp = craft_tp(false, false);
	static uint8_t f[SIM_FRAME_MAX], b[16];
	uint64_t now = 1000000;
	size_t n;

	n = mk(f, 77, 0, 0, 0, 0, 3, 0, 1, 3, "abc", 3);
	ZB_ASSERT(tp_rx(tp, f, n, 0, now) == 0);
	ZB_ASSERT(ngot == 1);
	tp_msg_release(tp, got[0]);
	ngot = 0;
	ZB_ASSERT(tp_send(tp, 1, 0, b, sizeof(b), NULL, 1, now) == 0);
	ZB_ASSERT(last_tx.type == WIRE_T_DATA && last_tx.dst_epoch == 77);
	resend_on_done = 1;
	n = mk(f, 78, 0, 0, 0, 0, 3, 0, 1, 3, "new", 3);
	ZB_ASSERT(tp_rx(tp, f, n, 0, now) == 0);
	is_int(last_done_status, ZB_ERR_EPOCH, "restart: the message in flight failed");
	ok(resend_on_done == 0 && last_tx.type == WIRE_T_DATA && last_tx.seq == 0,
	   "restart: its send_done sent again (seq 0 of the new session)");
	is_int(last_tx.dst_epoch, 78, "restart: addressed to the new incarnation");
	for (int i = 0; i < ngot; i++)
		tp_msg_release(tp, got[i]);
	ngot = 0;
	tp_destroy(tp);
}

/* A DATA frame refused for its stream or its sequence (beyond the receive
 * window) acts on nothing (docs/wire.md, "Validation"): its cumulative ack
 * completed our message in flight (send_done 0 for a message the peer may
 * not have), and with a newer source epoch it reset the session before it
 * was refused. */
static void test_refused_unused(void)
{
	struct tp *tp = craft_tp(false, false);
	const struct tp_stats *st = tp_stats(tp);
	static uint8_t f[SIM_FRAME_MAX], b[16];
	struct tp_peer_info pi;
	uint64_t now = 1000000;
	size_t n;
	int bad = 0;

	n = mk(f, 77, 0, 0, 0, 0, 3, 0, 1, 3, "abc", 3);
	ZB_ASSERT(tp_rx(tp, f, n, 0, now) == 0 && ngot == 1);
	tp_msg_release(tp, got[0]);
	ngot = 0;
	ZB_ASSERT(tp_send(tp, 1, 0, b, sizeof(b), NULL, 1, now) == 0);
	last_done_status = 1;    /* not completed */
	mk_ack = 1;              /* each frame below acknowledges it */
	n = mk(f, 77, 1000, 1, 500, 0, 3, 0, 1, 3, "abc", 3);
	bad += tp_rx(tp, f, n, 0, now) == ZB_ERR_BAD_FRAME;
	n = mk(f, 77, 1000, 1 + P0.window, 0, 1, 3, 0, 1, 3, "abc", 3);
	bad += tp_rx(tp, f, n, 0, now) == ZB_ERR_BAD_FRAME;
	mk_ack = 0;
	n = mk(f, 78, 1000, 0, 500, 0, 3, 0, 1, 3, "abc", 3);
	bad += tp_rx(tp, f, n, 0, now) == ZB_ERR_BAD_FRAME;
	ok(bad == 3 && st->bad[WIRE_E_STREAM] == 2 && st->bad[WIRE_E_SEQ_WINDOW] == 1,
	   "refused: two frames on stream 500, one beyond the window (%d refused)", bad);
	tp_peer_info(tp, 1, &pi);
	ok(last_done_status == 1 && pi.in_flight == 1 && pi.remote_epoch == 77 &&
	   st->peer_restarts == 0,
	   "refused: their ack and epoch unused (status %d, in flight %u, epoch %u, restarts %"
	   PRIu64 ")", last_done_status, pi.in_flight, pi.remote_epoch, st->peer_restarts);
	mk_ack = 1;
	n = mk(f, 77, 1000, 1, 0, 1, 3, 0, 1, 3, "abc", 3);
	ZB_ASSERT(tp_rx(tp, f, n, 0, now) == 0);
	is_int(last_done_status, 0, "refused: a valid frame's ack completes the message");
	for (int i = 0; i < ngot; i++)
		tp_msg_release(tp, got[i]);
	ngot = 0;
	tp_destroy(tp);
}

/* Node 1 restarts while streams 0 and 1 each have a complete message 1
 * waiting for a partial message 0: both become orphans. The consumer
 * refuses node 1's stream 0 for a while: node 2's message goes on, while
 * node 1's other orphan and both of its new session's messages wait (no
 * old-session message may follow a new one of the same peer). */
static void test_orphan_refused(void)
{
	struct tp *tp = craft_tp(false, false);
	static uint8_t f[SIM_FRAME_MAX];
	uint64_t now = 1000000;
	uint8_t mac[6];
	size_t n;
	char seen[8][8];
	int i;

	sim_mac(2, mac);
	ZB_ASSERT(tp_peer_add(tp, 2, mac, sim_ip(2)) == 0);
	for (uint16_t st = 0; st < 2; st++) {
		n = mk(f, 77, 0, 2u * st, st, 0, 6, 1, 2, 3, "bb", 3);
		ZB_ASSERT(tp_rx(tp, f, n, 0, now) == 0);
		n = mk(f, 77, 0, 2u * st + 1, st, 1, 3, 0, 1, 3, st ? "o1" : "o0", 3);
		ZB_ASSERT(tp_rx(tp, f, n, 0, now) == 0);
	}
	ZB_ASSERT(ngot == 0);
	refuse_stream = 0;
	refuse_peer = 1;
	n = mk(f, 78, 0, 0, 1, 0, 3, 0, 1, 3, "n1", 3);   /* restart */
	ZB_ASSERT(tp_rx(tp, f, n, 0, now) == 0);
	n = mk(f, 78, 0, 1, 0, 0, 3, 0, 1, 3, "n0", 3);
	ZB_ASSERT(tp_rx(tp, f, n, 0, now) == 0);
	mk_src = 2;
	n = mk(f, 90, 0, 0, 0, 0, 3, 0, 1, 3, "p2", 3);
	ZB_ASSERT(tp_rx(tp, f, n, 0, now) == 0);
	mk_src = 1;
	for (i = 0; i < 5; i++)
		tp_poll(tp, now += 1000);
	for (i = 0; i < ngot && i < 8; i++)
		memcpy(seen[i], got[i]->data, 3);
	/* node 1's other orphan may go first (orphans of different streams
	 * keep no order between them); its new session may not */
	bool p2 = false, newer = false;
	for (i = 0; i < ngot && i < 8; i++) {
		p2 |= !strcmp(seen[i], "p2");
		newer |= seen[i][0] == 'n' || !strcmp(seen[i], "o0");
	}
	int before = ngot;
	ok(p2 && !newer && ngot <= 2,
	   "orphan refused: another peer goes on, the refused peer's new session waits "
	   "(%d delivered)", ngot);
	refuse_stream = -1;
	for (i = 0; i < 5; i++)
		tp_poll(tp, now += 1000);
	for (i = 0; i < ngot && i < 8; i++)
		memcpy(seen[i], got[i]->data, 3);
	/* all five, and no new-session message before the last orphan */
	int last_old = -1, first_new = 99;
	for (i = 0; i < ngot && i < 8; i++) {
		if (seen[i][0] == 'o')
			last_old = i;
		if (seen[i][0] == 'n' && first_new == 99)
			first_new = i;
	}
	ok(ngot == 5 && before <= 2 && last_old >= 0 && last_old < first_new,
	   "orphan refused: once taken, both orphans, then the new session's two "
	   "(%d delivered, last orphan %d, first new %d)", ngot, last_old, first_new);
	for (i = 0; i < ngot; i++)
		tp_msg_release(tp, got[i]);
	ngot = 0;
	tp_destroy(tp);
}

/* tp_destroy with messages to peers 1 and 2 in flight: each send_done
 * sends again (to peer 1, emptied already when peer 2's fails). */
static int destroy_sends, destroy_accepted, destroy_dones, destroy_rc_bad;

static int x_deliver(void *u, struct tp_msg *m)
{
	(void)u;
	(void)m;
	return 0;
}

static void x_done(void *u, uint64_t c, int st)
{
	static uint8_t b[16];
	int rc;

	(void)u;
	(void)c;
	(void)st;
	destroy_dones++;
	if (destroy_sends-- > 0) {
		rc = tp_send(CT, 1, 0, b, sizeof(b), NULL, 7, 0);
		if (rc == 0)
			destroy_accepted++;
		else if (rc != ZB_ERR_SHUTDOWN)
			destroy_rc_bad++;
	}
}

static void test_destroy_sends(void)
{
	struct tp_ops ops = {.tx = c_tx, .deliver = x_deliver, .send_done = x_done};
	struct tp_params p;
	static uint8_t b[16];
	uint8_t mac[6];

	sim_params(&p, 0, 1000);
	ZB_ASSERT(tp_create(&p, &ops, NULL, &CT) == 0);
	for (uint16_t i = 1; i <= 2; i++) {
		sim_mac(i, mac);
		ZB_ASSERT(tp_peer_add(CT, i, mac, sim_ip(i)) == 0);
		ZB_ASSERT(tp_send(CT, i, 0, b, sizeof(b), NULL, i, 1000) == 0);
	}
	destroy_accepted = 2;
	destroy_sends = 2;
	tp_destroy(CT);
	CT = NULL;
	is_int(destroy_rc_bad, 0, "destroy: tp_send from its callbacks refuses with ZB_ERR_SHUTDOWN");
	is_int(destroy_dones, destroy_accepted,
	       "destroy: every message accepted got its send_done (%d)", destroy_accepted);
}

/* ---- large messages on two streams, together more than the arena ---- */
/* Each message needs more frames than the window, and the receiver
 * allocates a message's whole run on its first fragment.
 * - One sender, two 6 MiB messages on streams 0 and 1, into a 9.5 MiB
 *   arena: the second's first fragment found no room and stayed at
 *   rcv_next, and the first could not complete behind it (the session
 *   stalled for good). A sender now starts such a message only alone or
 *   where it fits beside its unfinished ones.
 * - Two senders (nodes 1 and 2), two 4 MiB messages each: each pair fits
 *   the arena alone, the four do not. The two first messages took 8 MiB,
 *   both second ones found no room, and neither first could complete
 *   (the receiver stalled for good). A sender now runs messages side by
 *   side only within its share of the arena: arena / declared peers. */
static uint64_t big_ok, big_bad;   /* sends done: s_ok, s_err */
static uint8_t *big_src[2][2];   /* [sender - 1][stream] */
static size_t big_len;

static int big_deliver(struct sim_node *n, struct tp_msg *m)
{
	/* each message's bytes as sent: its sender's and stream's own
	 * pattern (the sim keeps no frames, so the message is one run in
	 * the arena) */
	if (m->len == big_len && m->stream < 2 && m->peer >= 1 && m->peer <= 2 && m->data &&
	    !m->segs && memcmp(m->data, big_src[m->peer - 1][m->stream], big_len) == 0)
		big_ok++;
	else
		big_bad++;
	tp_msg_release(n->tp, m);
	return 0;
}

/* senders nodes 1..senders each send node 0 a len-byte message on streams
 * 0 and 1 at once; 9.5 MiB arenas (max_message 8 MiB + 4 windows), but
 * node 0's is rmax_mib MiB + 4 windows when rmax_mib is not 0 (configs
 * that differ: the senders learn its share from its frames) */
static void big_case(int senders, size_t len, unsigned rmax_mib, const char *what)
{
	struct sim_link l = {.delay_ns = 10000};
	const uint64_t want = 2u * (unsigned)senders;
	uint64_t t0;

	big_ok = big_bad = s_ok = s_err = 0;
	big_len = len;
	for (int p = 0; p < senders; p++)
		for (int s = 0; s < 2; s++) {
			big_src[p][s] = malloc(len);
			ZB_ASSERT(big_src[p][s]);
			for (size_t i = 0; i < len; i++)
				big_src[p][s][i] = (uint8_t)(i * 7 + s * 101 + p * 77 + (i >> 12));
		}
	ZB_ASSERT(sim_init(&S, senders + 1, &l, 3 + (uint64_t)senders, 1 << 14) == 0);
	S.deliver = big_deliver;
	S.send_done = s_done;
	for (int i = 0; i <= senders; i++) {
		struct tp_params p;
		sim_params(&p, (uint16_t)i, 300 + 100 * (uint32_t)senders + (uint32_t)i);
		p.max_message = (i == 0 && rmax_mib ? rmax_mib : 8u) << 20;
		ZB_ASSERT(sim_node_start(&S, (uint16_t)i, &p) == 0);
	}
	for (int p = 0; p < senders; p++)
		for (int s = 0; s < 2; s++)
			ZB_ASSERT(tp_send(S.nodes[p + 1].tp, 0, (uint16_t)s, big_src[p][s], len,
					  NULL, (uint64_t)(p * 2 + s + 1), S.now) == 0);
	t0 = S.now;
	while (S.now - t0 < 10000000000ull && (big_ok + big_bad < want || s_ok + s_err < want))
		sim_step(&S, 100000);
	/* node 0's arena: its max_message + 4 windows of the sim's params (1.5 MiB) */
	is_int(big_ok, want, "%s into a %.1f MiB arena: all delivered intact (%.0f ms)", what,
	       (rmax_mib ? rmax_mib : 8u) + 1.5, (double)(S.now - t0) / 1e6);
	ok(s_ok == want && s_err == 0, "%s: all sends done (%" PRIu64 " ok, %" PRIu64 " failed)",
	   what, s_ok, s_err);
	tap_diag("%s: no_buffer_drops %" PRIu64 ", window_stalls %" PRIu64, what,
		 tp_stats(S.nodes[0].tp)->no_buffer_drops,
		 tp_stats(S.nodes[1].tp)->window_stalls);
	sim_fini(&S);
	for (int p = 0; p < senders; p++)
		for (int s = 0; s < 2; s++)
			free(big_src[p][s]);
}

/* Node 1 dies one window into a 6 MiB message to node 0, which has nothing to
 * send it; then node 2 sends node 0 6 MiB. The arena (9.5 MiB) cannot
 * hold both: node 1's partial message must be freed, by declaring node 1
 * down after peer_timeout (2 s) — until 2026-11-29 only peers with sends
 * pending were, and node 2's message was resent for good, with no error. */
static void test_dead_partial(void)
{
	struct sim_link l = {.delay_ns = 10000};
	const size_t len = 6u << 20;
	uint8_t *b1 = calloc(1, len), *b2 = calloc(1, len);
	struct tp_peer_info pi;
	uint64_t t0;

	ZB_ASSERT(b1 && b2);
	s_ok = s_err = 0;
	memset(delivered, 0, sizeof(delivered));
	ZB_ASSERT(sim_init(&S, 3, &l, 11, 1 << 14) == 0);
	S.deliver = s_deliver;
	S.send_done = s_done;
	for (uint16_t i = 0; i < 3; i++) {
		struct tp_params p;
		sim_params(&p, i, 700 + i);
		p.max_message = 8u << 20;
		ZB_ASSERT(sim_node_start(&S, i, &p) == 0);
	}
	ZB_ASSERT(tp_send(S.nodes[1].tp, 0, 0, b1, len, NULL, 1, S.now) == 0);
	while (tp_stats(S.nodes[0].tp)->payload_bytes_rx == 0)
		sim_step(&S, 1000);   /* its first window arrives */
	S.nodes[1].down = true;
	ZB_ASSERT(tp_send(S.nodes[2].tp, 0, 0, b2, len, NULL, 2, S.now) == 0);
	for (t0 = S.now; S.now - t0 < 5000000000ull && !s_ok;)
		sim_step(&S, 1000000);
	tp_peer_info(S.nodes[0].tp, 1, &pi);
	is_int(pi.state, 2, "dead sender: node 0 declared it down (partial message held)");
	ok(delivered[2] == 1 && s_ok == 1,
	   "dead sender: the other peer's 6 MiB message then arrives (%.0f ms, %" PRIu64
	   " no_buffer_drops)", (double)(S.now - t0) / 1e6,
	   tp_stats(S.nodes[0].tp)->no_buffer_drops);
	sim_fini(&S);
	free(b1);
	free(b2);
}

/* ---- a stream the receiver lacks ---- */
static int st_status[4] = {1, 1, 1, 1};   /* send_done per cookie; 1: none */

static void st_done(struct sim_node *n, uint64_t c, int st)
{
	(void)n;
	if (c < 4)
		st_status[c] = st;
}

/* Node 1 has 16 streams, node 0 8 (configs may differ). A message on
 * stream 10 fails with -EINVAL within a round trip, the next on it is
 * refused at tp_send, and stream 0 goes on; until 2026-11-29 node 0 refused
 * its frames (stream) unanswered, its cumulative ack never passed them,
 * and every message to it stalled once the window filled, with no error
 * while node 0 sent anything back. */
static void test_peer_fewer_streams(void)
{
	struct sim_link l = {.delay_ns = 10000};
	static uint8_t b[100];
	int rc10;

	memset(delivered, 0, sizeof(delivered));
	ZB_ASSERT(sim_init(&S, 2, &l, 12, 1 << 12) == 0);
	S.deliver = s_deliver;
	S.send_done = st_done;
	for (uint16_t i = 0; i < 2; i++) {
		struct tp_params p;
		sim_params(&p, i, 800 + i);
		p.streams = i ? 16 : 8;
		ZB_ASSERT(sim_node_start(&S, i, &p) == 0);
	}
	ZB_ASSERT(tp_send(S.nodes[1].tp, 0, 10, b, sizeof(b), NULL, 1, S.now) == 0);
	for (uint64_t t0 = S.now; S.now - t0 < 10000000;)
		sim_step(&S, 100000);
	ok(st_status[1] == -EINVAL && tp_stats(S.nodes[0].tp)->stream_replies > 0,
	   "a message on a stream the receiver lacks fails with -EINVAL (status %d, %" PRIu64
	   " replies)", st_status[1], tp_stats(S.nodes[0].tp)->stream_replies);
	rc10 = tp_send(S.nodes[1].tp, 0, 10, b, sizeof(b), NULL, 2, S.now);
	ZB_ASSERT(tp_send(S.nodes[1].tp, 0, 0, b, sizeof(b), NULL, 3, S.now) == 0);
	for (uint64_t t0 = S.now; S.now - t0 < 10000000;)
		sim_step(&S, 100000);
	ok(rc10 == -EINVAL && st_status[3] == 0 && delivered[1] == 1,
	   "... the next on it is refused at tp_send (%d), one on stream 0 arrives", rc10);
	sim_fini(&S);
}

/* ---- a message larger than the receiver's max_message ---- */
static uint64_t sz_cookie[8];
static int sz_status[8], sz_done;
static size_t sz_got;
static bool sz_intact;
static const uint8_t *sz_src;

static void sz_send_done(struct sim_node *n, uint64_t c, int st)
{
	(void)n;
	if (c < 8) {
		sz_cookie[c] = c;
		sz_status[c] = st;
	}
	sz_done++;
}

static int sz_deliver(struct sim_node *n, struct tp_msg *m)
{
	sz_got = m->len;
	sz_intact = m->data && memcmp(m->data, sz_src, m->len) == 0;
	tp_msg_release(n->tp, m);
	return 0;
}

/* Node 1 (max_message 8 MiB) sends node 0 (2 MiB) a 4 MiB message: node 0
 * drops its frames (msg_size) and tells node 1 its limit (its ACKs carry
 * it); node 1 fails the message with -EMSGSIZE within a bound instead of
 * retransmitting it for good, refuses the next one at tp_send, and a 1 MiB
 * message then arrives intact. Before 2026-11-27 the message was neither
 * delivered nor failed (10 simulated seconds). */
static void test_peer_smaller_max(void)
{
	struct sim_link l = {.delay_ns = 10000};
	const size_t big = 4u << 20, fits = 1u << 20;
	uint8_t *src = malloc(big);
	uint64_t t0;

	ZB_ASSERT(src != NULL);
	for (size_t i = 0; i < big; i++)
		src[i] = (uint8_t)(i * 13 + (i >> 10));
	sz_src = src;
	sz_done = 0;
	sz_got = 0;
	ZB_ASSERT(sim_init(&S, 2, &l, 11, 1 << 14) == 0);
	S.deliver = sz_deliver;
	S.send_done = sz_send_done;
	for (int i = 0; i < 2; i++) {
		struct tp_params p;
		sim_params(&p, (uint16_t)i, 900 + (uint32_t)i);
		p.max_message = i == 0 ? 2u << 20 : 8u << 20;
		ZB_ASSERT(sim_node_start(&S, (uint16_t)i, &p) == 0);
	}
	struct tp *t1 = S.nodes[1].tp;
	ZB_ASSERT(tp_send(t1, 0, 0, src, big, NULL, 1, S.now) == 0);
	t0 = S.now;
	while (S.now - t0 < 5000000000ull && sz_done < 1)
		sim_step(&S, 100000);
	ok(sz_done == 1 && sz_status[1] == -EMSGSIZE,
	   "a 4 MiB message to a node whose max_message is 2 MiB fails with -EMSGSIZE "
	   "(status %d after %.1f ms)", sz_status[1], (double)(S.now - t0) / 1e6);
	ok(tp_stats(S.nodes[0].tp)->bad[WIRE_E_MSG_SIZE] > 0 &&
	   tp_stats(S.nodes[0].tp)->size_replies > 0 && tp_stats(t1)->size_resets == 1,
	   "... the receiver dropped its frames and told the sender its limit "
	   "(%" PRIu64 " replies), the sender reset the session once",
	   tp_stats(S.nodes[0].tp)->size_replies);
	is_int(tp_send(t1, 0, 0, src, big, NULL, 2, S.now), -EMSGSIZE,
	       "the next such message is refused at tp_send");
	ZB_ASSERT(tp_send(t1, 0, 0, src, fits, NULL, 3, S.now) == 0);
	t0 = S.now;
	while (S.now - t0 < 5000000000ull && (sz_done < 2 || sz_got == 0))
		sim_step(&S, 100000);
	ok(sz_got == fits && sz_intact && sz_status[3] == 0,
	   "a 1 MiB message then arrives intact (%zu bytes, status %d)", sz_got, sz_status[3]);
	sim_fini(&S);
	free(src);
}

int main(void)
{
	tap_plan(5 + 4 * 4 + 2 * 2 + 3 + 3 + 3 + 2 + 2 + 2 + 2 + 2 + 2 + 2 + 4);
	test_backlog_gap();
	test_poll_keeps_armed();
	dup_frag_case("arena, 2 fragments", false, false, 2, 500, 0);
	dup_frag_case("arena, 100 fragments", false, false, 100, 40, 70);
	dup_frag_case("placed + rx_write, 2 fragments", true, true, 2, 504, 0);
	dup_frag_case("placed + rx_write, 100 fragments", true, true, 100, 40, 70);
	test_old_dst0_after_reset();
	test_restart_resend_epoch();
	test_refused_unused();
	test_destroy_sends();
	test_orphan_refused();
	big_case(1, 6u << 20, 0, "one sender, two 6 MiB messages on two streams");
	big_case(2, 4u << 20, 0, "two senders, two 4 MiB messages each on two streams");
	/* the receiver's max_message 4 MiB, the sender's 8: taking the
	 * receiver's arena to be its own, the sender started both (8 MiB
	 * beside each other in 5.5 MiB) and the session stalled for good */
	big_case(1, 4u << 20, 4, "a receiver with a smaller max_message, two 4 MiB messages");
	test_dead_partial();
	test_peer_fewer_streams();
	test_peer_smaller_max();
	return tap_done();
}
