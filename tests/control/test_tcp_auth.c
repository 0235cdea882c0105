/* The PSK handshake wrapped around libraft's TCP transport, over real
 * loopback sockets: same key -> both sides get the stream and raft's bytes
 * pass through untouched; wrong key or wrong cluster id -> no stream on
 * either side, both count the rejection. The address raft's accept callback
 * gets is the client's, from the authenticated handshake (a relay that alters
 * raft's preamble changes nothing), and a preamble address without a NUL is
 * never read (under ASan this over-read the heap). Connections that never
 * finish raft's preamble are closed by the handshake deadline, and those over
 * the cap on connections in handshake at once are closed at accept. */
#include "../../control/internal.h"
#include "zbmd/common.h"
#include "tap.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

static uv_loop_t loop;
static int port;
static struct {
	int connect_status;
	bool connected, accepted;
	raft_id accepted_id;
	char accepted_addr[CTL_ADDR_MAX];
	char got[64];
	size_t got_len;
	int closed;
	uv_stream_t *cli_stream, *srv_stream;
	uv_write_t wr;
} r;

static void freed(uv_handle_t *h) { raft_free(h); }

static void on_alloc(uv_handle_t *h, size_t sug, uv_buf_t *b)
{
	(void)h;
	(void)sug;
	b->base = r.got + r.got_len;
	b->len = sizeof(r.got) - 1 - r.got_len;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
	(void)s;
	(void)b;
	if (n > 0)
		r.got_len += (size_t)n;
}

static void on_accept(struct raft_uv_transport *t, raft_id id, const char *addr,
		      uv_stream_t *s)
{
	(void)t;
	snprintf(r.accepted_addr, sizeof(r.accepted_addr), "%s", addr);
	r.accepted = true;
	r.accepted_id = id;
	r.srv_stream = s;
	uv_read_start(s, on_alloc, on_read);
}

static void on_written(uv_write_t *w, int status) { (void)w; (void)status; }

static void on_connect(struct raft_uv_connect *req, uv_stream_t *s, int status)
{
	static char msg[] = "raft-bytes";
	(void)req;
	r.connect_status = status;
	r.connected = true;
	r.cli_stream = s;
	if (s) {
		uv_buf_t b = uv_buf_init(msg, sizeof(msg) - 1);
		uv_write(&r.wr, s, &b, 1, on_written);
	}
}

static void on_closed(struct raft_uv_transport *t) { (void)t; r.closed++; }

static struct ctl_tcp_auth *g_srv;
static uint64_t t_end;

/* Stop once the outcome is settled (or after 2.5 s). */
static void on_timer(uv_timer_t *t)
{
	struct ctl_tcp_auth_stats s;
	ctl__tcp_auth_stats(g_srv, &s);
	bool done = r.connected && ((r.connect_status == 0 && r.accepted && r.got_len == 10) ||
				    s.rejected > 0);
	if (done || zb_now_ns() > t_end)
		uv_stop(t->loop);
}


/* ---- a man in the middle: relays client <-> server, flipping one byte
 * (client -> server direction): of the first frame after the handshake, or
 * of the address in raft's preamble. */
static struct {
	uv_tcp_t listener, c, s;
	uv_connect_t conn;
	size_t c2s, flip_at;
	bool active;
	int closed;
} mitm;

struct mw {
	uv_write_t req;
	char data[];
};

static void mw_done(uv_write_t *w, int st) { (void)st; free(w); }

static void relay_alloc(uv_handle_t *h, size_t sug, uv_buf_t *b)
{
	(void)h;
	b->base = malloc(sug);
	b->len = sug;
}

static void relay_read(uv_stream_t *from, ssize_t n, const uv_buf_t *b)
{
	uv_stream_t *to = from == (uv_stream_t *)&mitm.c ? (uv_stream_t *)&mitm.s
							   : (uv_stream_t *)&mitm.c;
	if (n > 0) {
		struct mw *w = malloc(sizeof(*w) + (size_t)n);
		memcpy(w->data, b->base, (size_t)n);
		if (to == (uv_stream_t *)&mitm.s) {
			if (mitm.flip_at >= mitm.c2s && mitm.flip_at < mitm.c2s + (size_t)n)
				w->data[mitm.flip_at - mitm.c2s] ^= 0x40;
			mitm.c2s += (size_t)n;
		}
		uv_buf_t o = uv_buf_init(w->data, (unsigned)n);
		uv_write(&w->req, to, &o, 1, mw_done);
	}
	free(b->base);
}

static void relay_connected(uv_connect_t *c, int st)
{
	(void)c;
	if (st != 0)
		return;
	uv_read_start((uv_stream_t *)&mitm.c, relay_alloc, relay_read);
	uv_read_start((uv_stream_t *)&mitm.s, relay_alloc, relay_read);
}

static struct sockaddr_in mitm_to;

static void relay_accept(uv_stream_t *l, int st)
{
	if (st != 0 || mitm.active)
		return;
	mitm.active = true;
	uv_tcp_init(&loop, &mitm.c);
	uv_tcp_init(&loop, &mitm.s);
	uv_accept(l, (uv_stream_t *)&mitm.c);
	uv_tcp_connect(&mitm.conn, &mitm.s, (struct sockaddr *)&mitm_to, relay_connected);
}

static void mitm_closed(uv_handle_t *h) { (void)h; mitm.closed++; }

/* One connection attempt; returns after the exchange settles. With
 * via_mitm, the client connects through the tampering relay. */
enum { DIRECT, FLIP_FRAME, FLIP_PREAMBLE_ADDR };

static char cli_addr[32];

static void attempt(uint32_t srv_cluster, const uint8_t *srv_key, uint32_t cli_cluster,
		    const uint8_t *cli_key, struct ctl_tcp_auth_stats *ss,
		    struct ctl_tcp_auth_stats *cs, int via_mitm)
{
	char ra[32];
	struct ctl_tcp_auth *srv, *cli;
	struct raft_uv_connect req;
	char sa[32], ca[32];
	uv_timer_t tm;

	memset(&r, 0, sizeof(r));
	port++;
	snprintf(sa, sizeof(sa), "127.0.0.1:%d", port);
	snprintf(ca, sizeof(ca), "127.0.0.1:%d", port + 1000);
	snprintf(cli_addr, sizeof(cli_addr), "%s", ca);
	ZB_ASSERT(ctl__tcp_auth_create(&srv, &loop, srv_cluster, srv_key, NULL, NULL) == 0);
	ZB_ASSERT(ctl__tcp_auth_create(&cli, &loop, cli_cluster, cli_key, NULL, NULL) == 0);
	struct raft_uv_transport *st = ctl__tcp_auth_iface(srv), *ct = ctl__tcp_auth_iface(cli);
	ZB_ASSERT(st->init(st, 1, sa) == 0 && st->listen(st, on_accept) == 0);
	ZB_ASSERT(ct->init(ct, 2, ca) == 0);
	if (via_mitm) {
		struct sockaddr_in la;
		memset(&mitm, 0, sizeof(mitm));
		snprintf(ra, sizeof(ra), "127.0.0.1:%d", port + 2000);
		uv_ip4_addr("127.0.0.1", port, &mitm_to);
		uv_ip4_addr("127.0.0.1", port + 2000, &la);
		uv_tcp_init(&loop, &mitm.listener);
		ZB_ASSERT(uv_tcp_bind(&mitm.listener, (struct sockaddr *)&la, 0) == 0);
		ZB_ASSERT(uv_listen((uv_stream_t *)&mitm.listener, 4, relay_accept) == 0);
		/* raft preamble (24 + padded address) + H1 (32 + address field)
		 * + H3 (32), then the first frame's header (12): flip a payload
		 * byte; or the first byte of the preamble's address. */
		if (via_mitm == FLIP_FRAME)
			mitm.flip_at = 24 + ((strlen(ca) + 1 + 7) & ~(size_t)7) +
				       32 + CTL_ADDR_MAX + 32 + 12 + 3;
		else
			mitm.flip_at = 24;
	}
	ZB_ASSERT(ct->connect(ct, &req, 1, via_mitm ? ra : sa, on_connect) == 0);
	uv_timer_init(&loop, &tm);
	g_srv = srv;
	t_end = zb_now_ns() + 2500000000ull;      /* > handshake timeout */
	uv_timer_start(&tm, on_timer, 10, 10);
	uv_run(&loop, UV_RUN_DEFAULT);
	uv_close((uv_handle_t *)&tm, NULL);
	if (r.cli_stream)
		uv_close((uv_handle_t *)r.cli_stream, freed);
	if (r.srv_stream)
		uv_close((uv_handle_t *)r.srv_stream, freed);
	ctl__tcp_auth_stats(srv, ss);
	ctl__tcp_auth_stats(cli, cs);
	if (via_mitm) {
		uv_close((uv_handle_t *)&mitm.listener, mitm_closed);
		if (mitm.active) {
			uv_close((uv_handle_t *)&mitm.c, mitm_closed);
			uv_close((uv_handle_t *)&mitm.s, mitm_closed);
		}
	}
	st->close(st, on_closed);
	ct->close(ct, on_closed);
	uv_run(&loop, UV_RUN_DEFAULT);
	ZB_ASSERT(r.closed == 2);
	ctl__tcp_auth_free(srv);
	ctl__tcp_auth_free(cli);
}

/* A client that sends raft's preamble with an address of 24 bytes and no NUL,
 * then nothing: the server must not read the address (it is a raw buffer of
 * exactly that length) and times the connection out. */
static int raw_port;

static void *raw_client(void *a)
{
	(void)a;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)raw_port)};
	uint64_t pre[3] = {1, 2, 24};        /* protocol, raft id, address length */
	char addr[24];

	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	memset(addr, 'A', sizeof(addr));
	for (int i = 0; i < 100 && connect(fd, (void *)&sa, sizeof(sa)) != 0; i++)
		usleep(10000);
	ZB_ASSERT(write(fd, pre, sizeof(pre)) == sizeof(pre));
	ZB_ASSERT(write(fd, addr, sizeof(addr)) == sizeof(addr));
	usleep(300000);
	close(fd);
	return NULL;
}

static void raw_timer(uv_timer_t *t)
{
	struct ctl_tcp_auth_stats s;
	ctl__tcp_auth_stats(g_srv, &s);
	if (s.rejected > 0 || zb_now_ns() > t_end)
		uv_stop(t->loop);
}

static void raw_preamble(struct ctl_tcp_auth_stats *ss, const uint8_t *key)
{
	struct ctl_tcp_auth *srv;
	char sa[32];
	pthread_t th;
	uv_timer_t tm;

	memset(&r, 0, sizeof(r));
	raw_port = ++port;
	snprintf(sa, sizeof(sa), "127.0.0.1:%d", raw_port);
	ZB_ASSERT(ctl__tcp_auth_create(&srv, &loop, 5, key, NULL, NULL) == 0);
	struct raft_uv_transport *st = ctl__tcp_auth_iface(srv);
	ZB_ASSERT(st->init(st, 1, sa) == 0 && st->listen(st, on_accept) == 0);
	ZB_ASSERT(pthread_create(&th, NULL, raw_client, NULL) == 0);
	uv_timer_init(&loop, &tm);
	g_srv = srv;
	t_end = zb_now_ns() + 3000000000ull;
	uv_timer_start(&tm, raw_timer, 10, 10);
	uv_run(&loop, UV_RUN_DEFAULT);
	uv_close((uv_handle_t *)&tm, NULL);
	pthread_join(th, NULL);
	ctl__tcp_auth_stats(srv, ss);
	st->close(st, on_closed);
	uv_run(&loop, UV_RUN_DEFAULT);
	ctl__tcp_auth_free(srv);
}

/* 80 connections that send 8 of the preamble's 24 bytes and then nothing. */
#define SILENT 80

static void silent_timer(uv_timer_t *t)
{
	if (zb_now_ns() > t_end)
		uv_stop(t->loop);
}

/* Connect without blocking the loop (which accepts), giving up after 1 s. */
static bool connect_nb(int fd, const struct sockaddr_in *a)
{
	int err = 0;
	socklen_t el = sizeof(err);

	ZB_ASSERT(fcntl(fd, F_SETFL, O_NONBLOCK) == 0);
	if (connect(fd, (const void *)a, sizeof(*a)) == 0)
		return true;
	if (errno != EINPROGRESS)
		return false;
	for (int k = 0; k < 100; k++) {
		struct pollfd pfd = {.fd = fd, .events = POLLOUT};
		uv_run(&loop, UV_RUN_NOWAIT);
		if (poll(&pfd, 1, 10) == 1)
			break;
	}
	return getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0 &&
	       poll(&(struct pollfd){.fd = fd, .events = POLLOUT}, 1, 0) == 1;
}

static void silent_clients(struct ctl_tcp_auth_stats *ss, const uint8_t *key, int *closed)
{
	struct ctl_tcp_auth *srv;
	char sa[32];
	int fds[SILENT];
	uv_timer_t tm;

	*closed = 0;
	memset(&r, 0, sizeof(r));
	int p = ++port;
	snprintf(sa, sizeof(sa), "127.0.0.1:%d", p);
	ZB_ASSERT(ctl__tcp_auth_create(&srv, &loop, 5, key, NULL, NULL) == 0);
	struct raft_uv_transport *st = ctl__tcp_auth_iface(srv);
	ZB_ASSERT(st->init(st, 1, sa) == 0 && st->listen(st, on_accept) == 0);
	for (int i = 0; i < SILENT; i++) {
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p)};
		uint64_t protocol = 1;
		inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
		fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		ZB_ASSERT(fds[i] >= 0);
		if (!connect_nb(fds[i], &a) || write(fds[i], &protocol, 8) != 8) {
			close(fds[i]);      /* not counted as closed by the server */
			fds[i] = -1;
		}
	}
	uv_timer_init(&loop, &tm);
	t_end = zb_now_ns() + 3000000000ull;     /* the deadline is 2 s */
	uv_timer_start(&tm, silent_timer, 10, 10);
	uv_run(&loop, UV_RUN_DEFAULT);
	uv_close((uv_handle_t *)&tm, NULL);
	for (int i = 0; i < SILENT; i++) {
		char c;
		if (fds[i] < 0)
			continue;
		ssize_t n = recv(fds[i], &c, 1, MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
			(*closed)++;
		close(fds[i]);
	}
	ctl__tcp_auth_stats(srv, ss);
	st->close(st, on_closed);
	uv_run(&loop, UV_RUN_DEFAULT);
	ctl__tcp_auth_free(srv);
}

/* Every handshake place held by a connection that sent a byte and then
 * nothing (an attacker trickling, or a flood), then a real peer connects:
 * it must get through within the 2 s deadline of the ones holding the
 * places (they were the reason the survivors of a leader could not connect
 * to vote). Returns whether the peer's stream reached raft and how long it
 * took. */
#define CROWD 64   /* HS_MAX_ACCEPTING */

static bool crowded(const uint8_t *key, uint64_t *took_ms, int *evicted)
{
	struct ctl_tcp_auth *srv, *cli;
	struct raft_uv_connect req;
	char sa[32], ca[32];
	int fds[CROWD];
	uv_timer_t tm;

	memset(&r, 0, sizeof(r));
	int p = ++port;
	snprintf(sa, sizeof(sa), "127.0.0.1:%d", p);
	snprintf(ca, sizeof(ca), "127.0.0.1:%d", p + 1000);
	ZB_ASSERT(ctl__tcp_auth_create(&srv, &loop, 5, key, NULL, NULL) == 0);
	ZB_ASSERT(ctl__tcp_auth_create(&cli, &loop, 5, key, NULL, NULL) == 0);
	struct raft_uv_transport *st = ctl__tcp_auth_iface(srv), *ct = ctl__tcp_auth_iface(cli);
	ZB_ASSERT(st->init(st, 1, sa) == 0 && st->listen(st, on_accept) == 0);
	ZB_ASSERT(ct->init(ct, 2, ca) == 0);
	for (int i = 0; i < CROWD; i++) {
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p)};
		inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
		fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		ZB_ASSERT(fds[i] >= 0);
		if (!connect_nb(fds[i], &a) || write(fds[i], "\1", 1) != 1) {
			close(fds[i]);
			fds[i] = -1;
		}
	}
	for (int k = 0; k < 10; k++)   /* the server takes them all in */
		uv_run(&loop, UV_RUN_NOWAIT);
	uint64_t t0 = zb_now_ns();
	ZB_ASSERT(ct->connect(ct, &req, 1, sa, on_connect) == 0);
	uv_timer_init(&loop, &tm);
	t_end = t0 + 1500000000ull;              /* before their 2 s deadline */
	uv_timer_start(&tm, silent_timer, 5, 5);
	while (!r.accepted && zb_now_ns() < t_end)
		uv_run(&loop, UV_RUN_ONCE);
	*took_ms = (zb_now_ns() - t0) / 1000000;
	bool got = r.accepted && r.connect_status == 0;
	uv_close((uv_handle_t *)&tm, NULL);
	if (r.cli_stream)
		uv_close((uv_handle_t *)r.cli_stream, freed);
	if (r.srv_stream)
		uv_close((uv_handle_t *)r.srv_stream, freed);
	*evicted = 0;
	for (int i = 0; i < CROWD; i++) {
		char c;
		if (fds[i] < 0)
			continue;
		ssize_t n = recv(fds[i], &c, 1, MSG_DONTWAIT);
		*evicted += n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
		close(fds[i]);
	}
	st->close(st, on_closed);
	ct->close(ct, on_closed);
	uv_run(&loop, UV_RUN_DEFAULT);
	ctl__tcp_auth_free(srv);
	ctl__tcp_auth_free(cli);
	return got;
}

int main(void)
{
	uint8_t k1[CTL_KEY_BYTES], k2[CTL_KEY_BYTES];
	struct ctl_tcp_auth_stats ss, cs;

	tap_plan(18);
	signal(SIGPIPE, SIG_IGN);   /* a peer refused at accept: a write fails */
	memset(k1, 0x11, sizeof(k1));
	memset(k2, 0x22, sizeof(k2));
	/* below the kernel's ephemeral range (32768 up by default): a port
	 * there may still be the local end of a TIME_WAIT connection of an
	 * earlier run's clients, and listen() on it fails (EADDRINUSE) */
	port = 20000 + (int)(getpid() % 2000) * 4;   /* +2000 and a few: < 30100 */
	ZB_ASSERT(uv_loop_init(&loop) == 0);

	attempt(5, k1, 5, k1, &ss, &cs, DIRECT);
	ok(r.connected && r.connect_status == 0 && r.cli_stream, "same key: client gets its stream");
	ok(r.accepted && r.accepted_id == 2, "same key: server hands the stream to raft (peer id 2)");
	is_str(r.accepted_addr, cli_addr, "raft gets the client's address from the handshake");
	r.got[r.got_len] = '\0';
	is_str(r.got, "raft-bytes", "raft's bytes pass through untouched");
	ok(ss.ok == 1 && cs.ok == 1 && ss.rejected == 0, "both count one good handshake");

	attempt(5, k1, 5, k2, &ss, &cs, DIRECT);
	ok(r.connected && r.connect_status != 0 && !r.cli_stream,
	   "wrong key: the client gets no stream (%s)", raft_strerror(r.connect_status));
	ok(!r.accepted, "wrong key: the server never hands a stream to raft");
	ok(ss.rejected == 1 && cs.rejected == 1, "both sides count the rejection");

	attempt(5, k1, 6, k1, &ss, &cs, DIRECT);
	ok(!r.accepted && r.connect_status != 0, "wrong cluster id: refused");
	ok(ss.rejected == 1, "... and counted by the server");

	attempt(5, k1, 5, k1, &ss, &cs, FLIP_FRAME);
	ok(r.accepted && r.connect_status == 0 && ss.ok == 1,
	   "through a tampering relay: the handshake itself passes");
	ok(ss.rejected == 1 && r.got_len == 0,
	   "a flipped byte in a raft frame: rejected, nothing delivered to raft");

	attempt(5, k1, 5, k1, &ss, &cs, FLIP_PREAMBLE_ADDR);
	ok(r.accepted && ss.ok == 1, "preamble address altered in flight: handshake passes");
	is_str(r.accepted_addr, cli_addr,
	       "... and raft gets the authenticated address, not the preamble's");

	raw_preamble(&ss, k1);
	ok(!r.accepted && ss.rejected == 1,
	   "a preamble address without NUL, then silence: never read, rejected");

	int closed;
	silent_clients(&ss, k1, &closed);
	is_int(closed, SILENT, "%d connections stuck in raft's preamble: all closed by the server",
	       SILENT);
	ok(ss.rejected == SILENT && !r.accepted, "... each counted as a rejection (%llu)",
	   (unsigned long long)ss.rejected);
	uint64_t took;
	int evicted;
	bool got = crowded(k1, &took, &evicted);
	ok(got && took < 1000, "every handshake place held by a trickling connection: a "
	   "peer still gets through (%s, %llu ms; the oldest holder closed: %d)",
	   got ? "accepted" : "refused", (unsigned long long)took, evicted);
	uv_loop_close(&loop);
	return tap_done();
}
