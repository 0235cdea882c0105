/* PSK-authenticated wrapper around libraft's TCP transport (raft_uv_tcp).
 *
 * Connecting: raft_uv_tcp connects and writes raft's preamble (protocol u64,
 * raft id u64, address length u64, address); we interpose on its callback.
 * Accepting: we listen ourselves rather than let raft_uv_tcp do it, because
 * libraft 0.15 reads the preamble with no deadline (and listens with backlog
 * 1), so a peer that connects and stays silent would hold a socket forever.
 * Each accepted connection runs under one deadline (HS_TIMEOUT_MS) from
 * accept to the end of the handshake, and at most HS_MAX_ACCEPTING accepted
 * connections may be in that phase at once, HS_MAX_PER_HOST from one address
 * other than loopback. When all are taken, the oldest of them is closed for
 * the new one (a flood of silent connections held every place for its 2 s,
 * and the survivors of a leader's death could not connect to vote:
 * elections took 18 - 20 s instead of 2). We
 * read the preamble (its address is skipped, see below) and then run, on the
 * same stream,
 *
 *   client -> server  H1: magic | cluster | client raft id | nonce_c[16] |
 *                         client raft address[CTL_ADDR_MAX] (NUL-padded)
 *   server -> client  H2: magic | cluster | nonce_s[16] | mac_s[32]
 *   client -> server  H3: mac_c[32]
 *
 * mac_x = HMAC-SHA-512-256(key, "zbmd-raft-x" | cluster | client id |
 * server id | nonce_c | nonce_s | client address), x = S or C. Both sides
 * prove the key over fresh nonces, so a recorded handshake cannot be replayed
 * and a node with the wrong key (or cluster id) never gets a stream to raft.
 * Reads are sized to the exact handshake message, so no raft byte is consumed
 * by us. After the handshake every raft byte travels in an authenticated
 * frame (the proxy below).
 *
 * The address raft's accept callback gets is the one in H1, not the one in
 * raft's preamble: libraft hands the preamble's address over as a raw buffer
 * of the length the client claimed, with no NUL guaranteed and its length not
 * passed on, so it cannot be read safely; and it is not authenticated, while
 * H1's is (both MACs cover it) and raft records it as the leader's address.
 */
#include "internal.h"
#include "zbmd/common.h"

#include <arpa/inet.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define HS_MAGIC      0x3248425au   /* "ZBH2": H1 with the address (v1 had none) */
#define HS_TIMEOUT_MS 2000
#define HS_MAX_ACCEPTING 64           /* accepted, handshake not done */
#define HS_MAX_PER_HOST  8            /* of those, from one non-loopback address */
#define HS_BACKLOG    128
#define PRE_LEN       24              /* raft's preamble before the address */
#define PRE_PROTOCOL  1               /* libraft's UV__TCP_HANDSHAKE_PROTOCOL */
#define H1_LEN (32 + CTL_ADDR_MAX)
#define H2_LEN 56
#define H3_LEN 32

struct hs;
struct proxy;

struct ctl_tcp_auth {
	struct raft_uv_transport iface;   /* what raft_uv sees */
	struct raft_uv_transport inner;   /* raft_uv_tcp */
	uv_loop_t *loop;
	uint32_t cluster;
	uint8_t key[CTL_KEY_BYTES];
	raft_id self;
	char self_addr[CTL_ADDR_MAX];     /* sent in H1 */
	raft_uv_accept_cb accept_cb;
	raft_uv_transport_close_cb close_cb;
	bool closing, inner_closed, listening;
	uv_tcp_t listener;
	char bind_addr[CTL_ADDR_MAX];     /* "" = self_addr */
	unsigned accepting;               /* server-side hs not yet freed */
	struct hs *pending;               /* handshakes in flight */
	struct proxy *proxies;            /* authenticated connections */
	void (*on_reject)(void *arg, const char *why);
	void *arg;
	struct ctl_tcp_auth_stats stats;
};

struct hs {
	struct ctl_tcp_auth *t;
	struct hs *prev, *next;
	bool server;
	int refs;                         /* timer + stream (while ours) */
	bool failed, finished, h2_written, h3_read;
	enum { S_PREAMBLE, S_PRE_ADDR, S_H1, S_H3 } stage;   /* server */
	raft_id peer_id;
	char peer_addr[CTL_ADDR_MAX];
	uint32_t ip;                      /* server: the client's, network order */
	char from[48];                    /* "ip:port" of the other end, for logs */
	uv_stream_t *stream;
	uv_timer_t timer;
	uv_write_t wr[2];                 /* client: H1, H3; server: H2 */
	struct raft_uv_connect inner_req;
	struct raft_uv_connect *user_req; /* client side */
	uint8_t nonce_c[16], nonce_s[16];
	uint8_t caddr[CTL_ADDR_MAX];      /* client's address field of H1 */
	uint8_t rbuf[H1_LEN], wbuf[2][H1_LEN];
	size_t rneed, rgot;
};

static void put32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = v >> (8 * i); }
static void put64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = v >> (8 * i); }
static uint32_t get32(const uint8_t *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void hs_mac(const struct hs *h, char who, uint8_t out[32])
{
	uint8_t m[16 + 4 + 8 + 8 + 32 + CTL_ADDR_MAX];
	raft_id client = h->server ? h->peer_id : h->t->self;
	raft_id server = h->server ? h->t->self : h->peer_id;

	memcpy(m, "zbmd-raft-", 10);
	m[10] = (uint8_t)who;
	memset(m + 11, 0, 5);
	put32(m + 16, h->t->cluster);
	put64(m + 20, client);
	put64(m + 28, server);
	memcpy(m + 36, h->nonce_c, 16);
	memcpy(m + 52, h->nonce_s, 16);
	memcpy(m + 68, h->caddr, CTL_ADDR_MAX);
	crypto_auth(out, m, sizeof(m), h->t->key);
}

/* Count and tell one rejection: "ADDR (why)". */
static void reject(struct ctl_tcp_auth *t, const char *from, const char *why)
{
	char what[160];

	t->stats.rejected++;
	if (!t->on_reject)
		return;
	snprintf(what, sizeof(what), "%s (%s)", from && from[0] ? from : "?", why);
	t->on_reject(t->arg, what);
}

/* "ip:port" of a stream's other end, or "?". */
static void peer_name(uv_tcp_t *tcp, char *out, size_t len, uint32_t *ip)
{
	struct sockaddr_storage ss;
	int sl = sizeof(ss);

	snprintf(out, len, "?");
	if (ip)
		*ip = 0;
	if (uv_tcp_getpeername(tcp, (struct sockaddr *)&ss, &sl) != 0 ||
	    ss.ss_family != AF_INET)
		return;
	const struct sockaddr_in *sa = (const struct sockaddr_in *)&ss;
	char a[INET_ADDRSTRLEN];
	if (uv_ip4_name(sa, a, sizeof(a)) == 0)
		snprintf(out, len, "%s:%u", a, ntohs(sa->sin_port));
	if (ip)
		*ip = sa->sin_addr.s_addr;
}

static void check_closed(struct ctl_tcp_auth *t)
{
	if (t->closing && t->inner_closed && !t->listening && !t->pending && !t->proxies &&
	    t->close_cb) {
		raft_uv_transport_close_cb cb = t->close_cb;
		t->close_cb = NULL;
		cb(&t->iface);
	}
}

static void hs_unref(struct hs *h)
{
	ZB_ASSERT(h->refs > 0);
	if (--h->refs > 0)
		return;
	struct ctl_tcp_auth *t = h->t;
	if (h->prev)
		h->prev->next = h->next;
	else
		t->pending = h->next;
	if (h->next)
		h->next->prev = h->prev;
	if (h->server)
		t->accepting--;
	free(h);
	check_closed(t);
}

static void timer_closed(uv_handle_t *hd)
{
	hs_unref(hd->data);
}

static void stream_closed(uv_handle_t *hd)
{
	struct hs *h = hd->data;
	raft_free(hd);
	hs_unref(h);
}

/* Fail: close the stream (it is still ours), tell the client's caller. */
static void hs_fail(struct hs *h, const char *why, bool count)
{
	if (h->failed || h->finished)
		return;
	h->failed = true;
	if (count)
		reject(h->t, h->from, why);
	uv_timer_stop(&h->timer);
	uv_close((uv_handle_t *)&h->timer, timer_closed);
	if (h->stream) {
		uv_read_stop(h->stream);
		h->stream->data = h;
		uv_close((uv_handle_t *)h->stream, stream_closed);
	}
	if (!h->server && h->user_req) {
		struct raft_uv_connect *req = h->user_req;
		h->user_req = NULL;
		req->cb(req, NULL, h->t->closing ? RAFT_CANCELED : RAFT_NOCONNECTION);
	}
}


/* ---- the authenticated frame proxy --------------------------------------
 * After the handshake raft does not get the TCP stream itself but one end of
 * a socketpair; we relay between the other end and TCP, so that every byte on
 * the wire travels in a frame
 *   len u32 | counter u64 | payload[len] | tag[32]
 * tag = HMAC-SHA-512-256 under a per-direction session key derived from the
 * PSK and both handshake nonces; counters run 1, 2, 3... per direction, so a
 * replayed, dropped, reordered or altered frame closes the connection. */
#define FRAME_MAX   65536
#define FRAME_HDR   12
#define QUEUE_HIGH  (4u << 20)
#define QUEUE_LOW   (1u << 20)

struct proxy {
	struct ctl_tcp_auth *t;
	struct proxy *prev, *next;
	char from[48];                    /* "ip:port" of the other end */
	uv_stream_t *tcp;                 /* raft_uv_tcp's handle, now ours */
	uv_pipe_t mine;                   /* our end of the socketpair */
	int handles;
	bool closing, tcp_paused, mine_paused;
	uint8_t ktx[CTL_KEY_BYTES], krx[CTL_KEY_BYTES];
	uint64_t tx_ctr, rx_ctr;
	size_t rlen;
	uint8_t rbuf[FRAME_HDR + FRAME_MAX + CTL_TAG_BYTES];
	uint8_t mbuf[FRAME_MAX];
};

struct pwrite {
	uv_write_t req;
	struct proxy *p;
	uint8_t data[];
};

static void proxy_unref(uv_handle_t *hd)
{
	struct proxy *p = hd->data;
	struct ctl_tcp_auth *t = p->t;

	if (hd == (uv_handle_t *)p->tcp)
		raft_free(hd);
	if (--p->handles > 0)
		return;
	if (p->prev)
		p->prev->next = p->next;
	else
		t->proxies = p->next;
	if (p->next)
		p->next->prev = p->prev;
	sodium_memzero(p->ktx, sizeof(p->ktx));
	sodium_memzero(p->krx, sizeof(p->krx));
	free(p);
	check_closed(t);
}

static void proxy_close(struct proxy *p)
{
	if (p->closing)
		return;
	p->closing = true;
	uv_close((uv_handle_t *)p->tcp, proxy_unref);
	uv_close((uv_handle_t *)&p->mine, proxy_unref);
}

static void proxy_reject(struct proxy *p, const char *why)
{
	reject(p->t, p->from, why);
	proxy_close(p);
}

static void p_alloc_tcp(uv_handle_t *hd, size_t sug, uv_buf_t *b)
{
	struct proxy *p = hd->data;
	(void)sug;
	b->base = (char *)p->rbuf + p->rlen;
	b->len = sizeof(p->rbuf) - p->rlen;
}

static void p_alloc_mine(uv_handle_t *hd, size_t sug, uv_buf_t *b)
{
	struct proxy *p = hd->data;
	(void)sug;
	b->base = (char *)p->mbuf;
	b->len = sizeof(p->mbuf);
}

static void p_read_tcp(uv_stream_t *s, ssize_t n, const uv_buf_t *b);
static void p_read_mine(uv_stream_t *s, ssize_t n, const uv_buf_t *b);

static void p_written(uv_write_t *w, int status)
{
	struct pwrite *pw = (struct pwrite *)w;
	struct proxy *p = pw->p;

	free(pw);
	if (status != 0) {
		proxy_close(p);
		return;
	}
	if (p->closing)
		return;
	/* Backpressure: resume a side paused while the other's queue drained. */
	if (p->mine_paused && p->tcp->write_queue_size < QUEUE_LOW) {
		p->mine_paused = false;
		uv_read_start((uv_stream_t *)&p->mine, p_alloc_mine, p_read_mine);
	}
	if (p->tcp_paused && p->mine.write_queue_size < QUEUE_LOW) {
		p->tcp_paused = false;
		uv_read_start(p->tcp, p_alloc_tcp, p_read_tcp);
	}
}

static int p_write(struct proxy *p, uv_stream_t *to, struct pwrite *pw, size_t len)
{
	uv_buf_t b = uv_buf_init((char *)pw->data, (unsigned)len);
	pw->p = p;
	if (uv_write(&pw->req, to, &b, 1, p_written) != 0) {
		free(pw);
		return -EIO;
	}
	return 0;
}

/* raft -> wire: seal what raft wrote into one frame. */
static void p_read_mine(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
	struct proxy *p = s->data;
	(void)b;

	if (p->closing || n == 0)
		return;
	if (n < 0) {
		proxy_close(p);
		return;
	}
	struct pwrite *pw = malloc(sizeof(*pw) + FRAME_HDR + (size_t)n + CTL_TAG_BYTES);
	if (!pw) {
		proxy_close(p);
		return;
	}
	put32(pw->data, (uint32_t)n);
	put64(pw->data + 4, ++p->tx_ctr);
	memcpy(pw->data + FRAME_HDR, p->mbuf, (size_t)n);
	crypto_auth(pw->data + FRAME_HDR + n, pw->data, FRAME_HDR + (size_t)n, p->ktx);
	if (p_write(p, p->tcp, pw, FRAME_HDR + (size_t)n + CTL_TAG_BYTES) != 0) {
		proxy_close(p);
		return;
	}
	if (p->tcp->write_queue_size > QUEUE_HIGH) {
		p->mine_paused = true;
		uv_read_stop(s);
	}
}

/* wire -> raft: verify each complete frame, pass its payload on. */
static void p_read_tcp(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
	struct proxy *p = s->data;
	size_t off = 0;
	(void)b;

	if (p->closing || n == 0)
		return;
	if (n < 0) {
		proxy_close(p);
		return;
	}
	p->rlen += (size_t)n;
	while (p->rlen - off >= FRAME_HDR) {
		const uint8_t *f = p->rbuf + off;
		uint32_t len = get32(f);
		if (len == 0 || len > FRAME_MAX) {
			proxy_reject(p, "raft frame with a bad length");
			return;
		}
		size_t need = FRAME_HDR + len + CTL_TAG_BYTES;
		if (p->rlen - off < need)
			break;
		if (crypto_auth_verify(f + FRAME_HDR + len, f, FRAME_HDR + len, p->krx) != 0) {
			proxy_reject(p, "raft frame failed authentication");
			return;
		}
		if (get64(f + 4) != p->rx_ctr + 1) {
			proxy_reject(p, "raft frame out of sequence (replay?)");
			return;
		}
		p->rx_ctr++;
		struct pwrite *pw = malloc(sizeof(*pw) + len);
		if (!pw) {
			proxy_close(p);
			return;
		}
		memcpy(pw->data, f + FRAME_HDR, len);
		if (p_write(p, (uv_stream_t *)&p->mine, pw, len) != 0) {
			proxy_close(p);
			return;
		}
		off += need;
	}
	memmove(p->rbuf, p->rbuf + off, p->rlen - off);
	p->rlen -= off;
	if (p->mine.write_queue_size > QUEUE_HIGH) {
		p->tcp_paused = true;
		uv_read_stop(s);
	}
}

static void derive_key(const struct hs *h, const char *dir, uint8_t out[CTL_KEY_BYTES])
{
	uint8_t m[16 + 32];
	memcpy(m, dir, 16);
	memcpy(m + 16, h->nonce_c, 16);
	memcpy(m + 32, h->nonce_s, 16);
	crypto_generichash(out, CTL_KEY_BYTES, m, sizeof(m), h->t->key, CTL_KEY_BYTES);
}

static void free_data(uv_handle_t *hd)
{
	free(hd->data);
}

/* Returns the stream to hand to raft (raft_malloc'd, raft closes and frees
 * it), or NULL; the TCP stream then belongs to the proxy. */
static uv_stream_t *proxy_start(struct hs *h, uv_stream_t *tcp)
{
	struct ctl_tcp_auth *t = h->t;
	int sv[2];
	uv_pipe_t *theirs = raft_malloc(sizeof(*theirs));
	struct proxy *p = calloc(1, sizeof(*p));

	if (!theirs || !p)
		goto fail;
	snprintf(p->from, sizeof(p->from), "%s", h->from);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		goto fail;
	uv_pipe_init(t->loop, theirs, 0);
	uv_pipe_init(t->loop, &p->mine, 0);
	p->mine.data = p;
	int rc0 = uv_pipe_open(theirs, sv[0]), rc1 = uv_pipe_open(&p->mine, sv[1]);
	if (rc0 != 0 || rc1 != 0) {
		if (rc0 != 0)
			close(sv[0]);
		if (rc1 != 0)
			close(sv[1]);
		uv_close((uv_handle_t *)theirs, (uv_close_cb)raft_free);
		uv_close((uv_handle_t *)&p->mine, free_data);
		return NULL;
	}
	p->t = t;
	p->tcp = tcp;
	p->handles = 2;
	derive_key(h, h->server ? "zbmd-raft-s2c-k" : "zbmd-raft-c2s-k", p->ktx);
	derive_key(h, h->server ? "zbmd-raft-c2s-k" : "zbmd-raft-s2c-k", p->krx);
	tcp->data = p;
	p->mine.data = p;
	p->next = t->proxies;
	if (t->proxies)
		t->proxies->prev = p;
	t->proxies = p;
	uv_read_start(tcp, p_alloc_tcp, p_read_tcp);
	uv_read_start((uv_stream_t *)&p->mine, p_alloc_mine, p_read_mine);
	return (uv_stream_t *)theirs;
fail:
	raft_free(theirs);
	free(p);
	return NULL;
}

/* Success: raft gets its end of the proxy; we keep only the timer until it
 * closes. */
static void hs_finish(struct hs *h)
{
	uv_stream_t *s = h->stream;

	ZB_ASSERT(!h->failed && !h->finished);
	uv_read_stop(s);
	uv_stream_t *r = proxy_start(h, s);
	if (!r) {
		hs_fail(h, "cannot set up the frame proxy", false);
		return;
	}
	s = r;
	h->finished = true;
	h->t->stats.ok++;
	h->stream = NULL;
	h->refs--;          /* the stream's reference leaves with the proxy */
	uv_timer_stop(&h->timer);
	uv_close((uv_handle_t *)&h->timer, timer_closed);
	if (h->server) {
		h->t->accept_cb(&h->t->iface, h->peer_id, h->peer_addr, s);
	} else {
		struct raft_uv_connect *req = h->user_req;
		h->user_req = NULL;
		req->cb(req, s, 0);
	}
}

static void on_timeout(uv_timer_t *tm)
{
	hs_fail(tm->data, "handshake timed out", true);
}

static void on_alloc(uv_handle_t *hd, size_t sug, uv_buf_t *buf)
{
	struct hs *h = hd->data;
	(void)sug;
	buf->base = (char *)h->rbuf + h->rgot;
	buf->len = h->rneed - h->rgot;
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

static void expect(struct hs *h, size_t n)
{
	ZB_ASSERT(n <= sizeof(h->rbuf));
	h->rneed = n;
	h->rgot = 0;
	if (uv_read_start(h->stream, on_alloc, on_read) != 0)
		hs_fail(h, "read failed", false);
}

static void on_written(uv_write_t *w, int status)
{
	struct hs *h = w->data;

	if (h->failed || h->finished)
		return;
	if (status != 0) {
		hs_fail(h, "write failed", false);
		return;
	}
	if (h->server) {
		h->h2_written = true;
		if (h->h3_read)
			hs_finish(h);
	} else if (w == &h->wr[1]) {
		hs_finish(h);    /* H3 written */
	}
}

static void send_bytes(struct hs *h, int which, size_t n)
{
	uv_buf_t b = uv_buf_init((char *)h->wbuf[which], (unsigned)n);
	h->wr[which].data = h;
	if (uv_write(&h->wr[which], h->stream, &b, 1, on_written) != 0)
		hs_fail(h, "write failed", false);
}

/* H1's address field: 1..CTL_ADDR_MAX-1 printable, non-blank characters,
 * then NULs only (it is printed in /status and handed to raft as a string). */
static bool addr_field_ok(const uint8_t *a)
{
	size_t n = 0;

	while (n < CTL_ADDR_MAX && a[n] > ' ' && a[n] < 0x7f)
		n++;
	if (n == 0 || n == CTL_ADDR_MAX)
		return false;
	for (size_t i = n; i < CTL_ADDR_MAX; i++)
		if (a[i] != 0)
			return false;
	return true;
}

static void expect_stage(struct hs *h, int stage, size_t n)
{
	h->stage = stage;
	expect(h, n);
}

/* raft's preamble: protocol | raft id | address length (then the address,
 * padded to 8 bytes by libraft: at most CTL_ADDR_MAX for our clients, whose
 * address w_init limits to CTL_ADDR_MAX - 1 bytes). */
static void server_got_preamble(struct hs *h)
{
	uint64_t alen = get64(h->rbuf + 16);

	if (get64(h->rbuf) != PRE_PROTOCOL) {
		hs_fail(h, "bad raft preamble (protocol)", true);
		return;
	}
	if (alen == 0 || alen > CTL_ADDR_MAX) {
		hs_fail(h, "bad raft preamble (address length)", true);
		return;
	}
	h->peer_id = get64(h->rbuf + 8);
	expect_stage(h, S_PRE_ADDR, (size_t)alen);
}

static void server_got_h1(struct hs *h)
{
	if (get32(h->rbuf) != HS_MAGIC) {
		hs_fail(h, "bad handshake magic", true);
		return;
	}
	if (get32(h->rbuf + 4) != h->t->cluster) {
		hs_fail(h, "wrong cluster id", true);
		return;
	}
	if (get64(h->rbuf + 8) != h->peer_id) {
		hs_fail(h, "raft id differs from preamble", true);
		return;
	}
	if (!addr_field_ok(h->rbuf + 32)) {
		hs_fail(h, "bad address in handshake", true);
		return;
	}
	memcpy(h->caddr, h->rbuf + 32, CTL_ADDR_MAX);
	memcpy(h->peer_addr, h->caddr, CTL_ADDR_MAX);   /* NUL-terminated: checked */
	memcpy(h->nonce_c, h->rbuf + 16, 16);
	randombytes_buf(h->nonce_s, 16);
	put32(h->wbuf[0], HS_MAGIC);
	put32(h->wbuf[0] + 4, h->t->cluster);
	memcpy(h->wbuf[0] + 8, h->nonce_s, 16);
	hs_mac(h, 'S', h->wbuf[0] + 24);
	send_bytes(h, 0, H2_LEN);
	if (!h->failed)
		expect_stage(h, S_H3, H3_LEN);
}

static void server_got_h3(struct hs *h)
{
	uint8_t mac[32];

	hs_mac(h, 'C', mac);
	if (sodium_memcmp(mac, h->rbuf, 32) != 0) {
		hs_fail(h, "peer failed to prove the cluster key", true);
		return;
	}
	h->h3_read = true;
	if (h->h2_written)
		hs_finish(h);
}

static void client_got_h2(struct hs *h)
{
	uint8_t mac[32];

	if (get32(h->rbuf) != HS_MAGIC || get32(h->rbuf + 4) != h->t->cluster) {
		hs_fail(h, "bad handshake reply (magic/cluster)", true);
		return;
	}
	memcpy(h->nonce_s, h->rbuf + 8, 16);
	hs_mac(h, 'S', mac);
	if (sodium_memcmp(mac, h->rbuf + 24, 32) != 0) {
		hs_fail(h, "server failed to prove the cluster key", true);
		return;
	}
	hs_mac(h, 'C', h->wbuf[1]);
	send_bytes(h, 1, H3_LEN);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	struct hs *h = s->data;
	(void)buf;

	if (h->failed || h->finished || nread == 0)
		return;
	if (nread < 0) {
		hs_fail(h, "connection closed during handshake", true);
		return;
	}
	h->rgot += (size_t)nread;
	ZB_ASSERT(h->rgot <= h->rneed);
	if (h->rgot < h->rneed)
		return;
	uv_read_stop(s);
	if (!h->server)
		client_got_h2(h);
	else if (h->stage == S_PREAMBLE)
		server_got_preamble(h);
	else if (h->stage == S_PRE_ADDR)
		expect_stage(h, S_H1, H1_LEN);   /* the preamble's address: skipped */
	else if (h->stage == S_H1)
		server_got_h1(h);
	else
		server_got_h3(h);
}

static struct hs *hs_new(struct ctl_tcp_auth *t, bool server)
{
	struct hs *h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	h->t = t;
	h->server = server;
	h->refs = 1;     /* timer */
	uv_timer_init(t->loop, &h->timer);
	h->timer.data = h;
	h->next = t->pending;
	if (t->pending)
		t->pending->prev = h;
	t->pending = h;
	return h;
}

static void hs_start(struct hs *h, uv_stream_t *s)
{
	h->stream = s;
	h->refs++;
	s->data = h;
	uv_timer_start(&h->timer, on_timeout, HS_TIMEOUT_MS, 0);
	if (h->server) {
		expect_stage(h, S_PREAMBLE, PRE_LEN);
		return;
	}
	randombytes_buf(h->nonce_c, 16);
	put32(h->wbuf[0], HS_MAGIC);
	put32(h->wbuf[0] + 4, h->t->cluster);
	put64(h->wbuf[0] + 8, h->t->self);
	memcpy(h->wbuf[0] + 16, h->nonce_c, 16);
	memcpy(h->caddr, h->t->self_addr, CTL_ADDR_MAX);  /* zero-padded */
	memcpy(h->wbuf[0] + 32, h->caddr, CTL_ADDR_MAX);
	send_bytes(h, 0, H1_LEN);
	if (!h->failed)
		expect(h, H2_LEN);
}

/* ---- inner transport callbacks ------------------------------------------ */

static void on_connection(uv_stream_t *l, int status)
{
	struct ctl_tcp_auth *t = l->data;
	uv_tcp_t *tcp;
	struct hs *h;

	if (status != 0)
		return;
	tcp = raft_malloc(sizeof(*tcp));   /* raft frees the streams it gets */
	if (!tcp)
		return;   /* out of memory: libuv keeps the connection and stops
			   * accepting until a uv_accept; nothing better to do */
	uv_tcp_init(t->loop, tcp);
	if (uv_accept(l, (uv_stream_t *)tcp) != 0) {
		uv_close((uv_handle_t *)tcp, (uv_close_cb)raft_free);
		return;
	}
	char from[48];
	uint32_t ip;
	peer_name(tcp, from, sizeof(from), &ip);
	/* one pass over the handshakes in flight (newest first): this
	 * address's, and the oldest server side one still running */
	const char *why = NULL;
	unsigned same = 0;
	struct hs *old = NULL;
	for (struct hs *o = t->pending; o; o = o->next) {
		if (!o->server || o->failed)
			continue;
		same += o->ip == ip;
		if (!o->finished)
			old = o;
	}
	if (!t->closing && !ctl__loopback(ip) && same >= HS_MAX_PER_HOST) {
		why = "too many connections in handshake from this address";
	} else if (!t->closing && t->accepting >= HS_MAX_ACCEPTING) {
		/* the oldest makes room: a peer's handshake takes a few round
		 * trips, a connection that holds its place for long is not
		 * one (nor is one that trickles a byte at a time) */
		if (old)
			hs_fail(old, "closed for a newer connection: the "
				"handshake places were full", true);
		else
			why = "too many connections in handshake";
	}
	/* a failed one's place is free only once its handles closed: the
	 * count may still include the evicted one for a moment */
	if (t->closing || why || !(h = hs_new(t, true))) {
		if (!t->closing)
			reject(t, from, why ? why : "out of memory");
		uv_close((uv_handle_t *)tcp, (uv_close_cb)raft_free);
		return;
	}
	h->ip = ip;
	snprintf(h->from, sizeof(h->from), "%s", from);
	t->accepting++;
	hs_start(h, (uv_stream_t *)tcp);
}

static void listener_closed(uv_handle_t *hd)
{
	struct ctl_tcp_auth *t = hd->data;
	t->listening = false;
	check_closed(t);
}

static void inner_connected(struct raft_uv_connect *ireq,
			    struct uv_stream_s *stream, int status)
{
	struct hs *h = ireq->data;

	if (status != 0 || h->t->closing) {
		if (stream)
			uv_close((uv_handle_t *)stream, (uv_close_cb)raft_free);
		h->failed = true;
		struct raft_uv_connect *req = h->user_req;
		h->user_req = NULL;
		uv_close((uv_handle_t *)&h->timer, timer_closed);
		req->cb(req, NULL, status ? status : RAFT_CANCELED);
		return;
	}
	hs_start(h, stream);
}

static void inner_closed(struct raft_uv_transport *in)
{
	struct ctl_tcp_auth *t = in->data;
	t->inner_closed = true;
	check_closed(t);
}

/* ---- the raft_uv_transport interface ------------------------------------ */

static int w_init(struct raft_uv_transport *tr, raft_id id, const char *address)
{
	struct ctl_tcp_auth *t = tr->impl;
	size_t n = strlen(address);

	if (n == 0 || n >= CTL_ADDR_MAX) {
		snprintf(tr->errmsg, sizeof(tr->errmsg),
			 "raft address must be 1..%d bytes", CTL_ADDR_MAX - 1);
		return RAFT_INVALID;
	}
	t->self = id;
	memset(t->self_addr, 0, sizeof(t->self_addr));
	memcpy(t->self_addr, address, n);
	int rc = t->inner.init(&t->inner, id, address);
	if (rc != 0)
		snprintf(tr->errmsg, sizeof(tr->errmsg), "%s", t->inner.errmsg);
	return rc;
}

int ctl__parse_ip4(const char *s, struct sockaddr_in *sa)
{
	char host[CTL_ADDR_MAX];
	const char *colon = strrchr(s, ':');
	char *end;

	if (!colon || colon == s || (size_t)(colon - s) >= sizeof(host) ||
	    colon[1] < '0' || colon[1] > '9')   /* strtol takes " 5", "+5" */
		return -EINVAL;
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = '\0';
	long port = strtol(colon + 1, &end, 10);
	if (*end || port <= 0 || port > 65535)
		return -EINVAL;
	return uv_ip4_addr(host, (int)port, sa) == 0 ? 0 : -EINVAL;
}

static int w_listen(struct raft_uv_transport *tr, raft_uv_accept_cb cb)
{
	struct ctl_tcp_auth *t = tr->impl;
	const char *addr = t->bind_addr[0] ? t->bind_addr : t->self_addr;
	struct sockaddr_in sa;
	int rc;

	ZB_ASSERT(!t->listening);
	t->accept_cb = cb;
	if (ctl__parse_ip4(addr, &sa) != 0) {
		snprintf(tr->errmsg, sizeof(tr->errmsg), "bad listen address %s (ip:port)", addr);
		return RAFT_INVALID;
	}
	uv_tcp_init(t->loop, &t->listener);
	t->listener.data = t;
	t->listening = true;
	rc = uv_tcp_bind(&t->listener, (const struct sockaddr *)&sa, 0);
	if (rc == 0)
		rc = uv_listen((uv_stream_t *)&t->listener, HS_BACKLOG, on_connection);
	if (rc != 0) {
		snprintf(tr->errmsg, sizeof(tr->errmsg), "listen on %s: %s", addr,
			 uv_strerror(rc));
		uv_close((uv_handle_t *)&t->listener, listener_closed);
		return RAFT_IOERR;
	}
	return 0;
}

static int w_connect(struct raft_uv_transport *tr, struct raft_uv_connect *req,
		     raft_id id, const char *address, raft_uv_connect_cb cb)
{
	struct ctl_tcp_auth *t = tr->impl;
	struct hs *h = hs_new(t, false);

	if (!h)
		return RAFT_NOMEM;
	req->cb = cb;
	h->user_req = req;
	h->peer_id = id;
	snprintf(h->peer_addr, sizeof(h->peer_addr), "%s", address);
	snprintf(h->from, sizeof(h->from), "%s", address);
	h->inner_req.data = h;
	int rc = t->inner.connect(&t->inner, &h->inner_req, id, address,
				  inner_connected);
	if (rc != 0) {
		snprintf(tr->errmsg, sizeof(tr->errmsg), "%s", t->inner.errmsg);
		h->failed = true;
		h->user_req = NULL;
		uv_close((uv_handle_t *)&h->timer, timer_closed);
	}
	return rc;
}

static void w_close(struct raft_uv_transport *tr, raft_uv_transport_close_cb cb)
{
	struct ctl_tcp_auth *t = tr->impl;

	t->closing = true;
	t->close_cb = cb;
	for (struct hs *h = t->pending, *next; h; h = next) {
		next = h->next;
		if (h->stream)   /* connects still with inner get cancelled by it */
			hs_fail(h, "closing", false);
	}
	for (struct proxy *p = t->proxies; p; p = p->next)
		proxy_close(p);
	if (t->listening && !uv_is_closing((uv_handle_t *)&t->listener))
		uv_close((uv_handle_t *)&t->listener, listener_closed);
	t->inner.close(&t->inner, inner_closed);
}

int ctl__tcp_auth_create(struct ctl_tcp_auth **out, uv_loop_t *loop,
			 uint32_t cluster_id, const uint8_t key[CTL_KEY_BYTES],
			 void (*on_reject)(void *arg, const char *why), void *arg)
{
	struct ctl_tcp_auth *t = calloc(1, sizeof(*t));

	ZB_ASSERT(out && loop && key);
	if (!t)
		return -ENOMEM;
	int rc = raft_uv_tcp_init(&t->inner, loop);
	if (rc != 0) {
		free(t);
		return -ENOMEM;
	}
	t->inner.data = t;
	t->loop = loop;
	t->cluster = cluster_id;
	memcpy(t->key, key, CTL_KEY_BYTES);
	t->on_reject = on_reject;
	t->arg = arg;
	t->iface.impl = t;
	t->iface.init = w_init;
	t->iface.listen = w_listen;
	t->iface.connect = w_connect;
	t->iface.close = w_close;
	*out = t;
	ZB_ASSERT(t->iface.impl == t);
	return 0;
}

struct raft_uv_transport *ctl__tcp_auth_iface(struct ctl_tcp_auth *t)
{
	return &t->iface;
}

int ctl__tcp_auth_set_bind_address(struct ctl_tcp_auth *t, const char *address)
{
	struct sockaddr_in sa;

	if (strlen(address) >= sizeof(t->bind_addr) || ctl__parse_ip4(address, &sa) != 0)
		return -EINVAL;
	snprintf(t->bind_addr, sizeof(t->bind_addr), "%s", address);
	return 0;
}

void ctl__tcp_auth_stats(const struct ctl_tcp_auth *t, struct ctl_tcp_auth_stats *s)
{
	*s = t->stats;
}

void ctl__tcp_auth_free(struct ctl_tcp_auth *t)
{
	if (!t)
		return;
	ZB_ASSERT(t->pending == NULL && t->proxies == NULL && !t->listening);
	raft_uv_tcp_close(&t->inner);
	sodium_memzero(t->key, sizeof(t->key));
	free(t);
}
