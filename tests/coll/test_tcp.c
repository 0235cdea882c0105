/* test_tcp.c — the tcp net provider and the provider registry, two nodes in
 * one process over loopback (real kernel sockets). */
#include "tap.h"
#include "zbmd/common.h"
#include "zbmd/config.h"
#include "zbmd/net.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static const struct net_ops *T;
static void *ctx[2];
static struct zb_config cfg[2];
static int port, sub;

static int load(int id)
{
	char text[1024];
	struct cfg_error err;
	snprintf(text, sizeof(text),
		 "[node]\nid = %d\n[cluster]\nid = 99\n[transport]\nkind = tcp\n"
		 "tcp_port = %d\n[peer.0]\nip = 127.78.%d.1\n[peer.1]\nip = 127.78.%d.2\n",
		 id, port, sub, sub);
	int rc = cfg_load_string(&cfg[id], text, "test", &err);
	if (rc < 0)
		tap_diag("config: %s", err.msg);
	return rc;
}

/* Drive both sides until connect(0->1, ch) and accept(1<-0, ch) succeed. */
static int link_up(uint16_t ch, void **s, void **r)
{
	uint64_t end = zb_now_ns() + 5000000000ull;
	int a = -EAGAIN, b = -EAGAIN;
	*s = *r = NULL;
	while (zb_now_ns() < end) {
		if (!*s)
			a = T->connect(ctx[0], 1, ch, s);
		if (!*r)
			b = T->accept(ctx[1], 0, ch, r);
		if (*s && *r)
			return 0;
		if ((a < 0 && a != -EAGAIN) || (b < 0 && b != -EAGAIN))
			return a < 0 && a != -EAGAIN ? a : b;
		T->wait(ctx[1], 5);
	}
	return -ETIMEDOUT;
}

/* Test both requests until done (or error); returns the first error. */
static int finish(void *sreq, void *rreq, size_t *ssz, size_t *rsz)
{
	int sd = sreq == NULL, rd = rreq == NULL, rc, err = 0;
	uint64_t end = zb_now_ns() + 5000000000ull;
	while ((!sd || !rd) && zb_now_ns() < end) {
		if (!sd && (rc = T->test(sreq, &sd, ssz)) < 0)
			err = err ? err : rc, sd = 1;
		if (!rd && (rc = T->test(rreq, &rd, rsz)) < 0)
			err = err ? err : rc, rd = 1;
	}
	return (!sd || !rd) ? -ETIMEDOUT : err;
}

/* Node 0's send comm on ch, connected: node 1's listener is driven (it
 * must read the hello and ack it) but nothing is accepted there. */
static int connect_only(uint16_t ch, void **s)
{
	uint64_t end = zb_now_ns() + 5000000000ull;
	int rc;
	while ((rc = T->connect(ctx[0], 1, ch, s)) == -EAGAIN && zb_now_ns() < end) {
		T->progress(ctx[1]);
		usleep(1000);
	}
	return rc;
}

/* connect(0 -> 1, ch) tried for ms milliseconds: its last answer. */
static int connect_for(uint16_t ch, void **s, int ms)
{
	uint64_t end = zb_now_ns() + (uint64_t)ms * 1000000ull;
	int rc;
	while ((rc = T->connect(ctx[0], 1, ch, s)) == -EAGAIN && zb_now_ns() < end)
		usleep(2000);
	return rc;
}

/* Node 1's accept on ch, driven for up to ms milliseconds. */
static int accept_for(uint16_t ch, void **r, int ms)
{
	uint64_t end = zb_now_ns() + (uint64_t)ms * 1000000ull;
	int rc;
	while ((rc = T->accept(ctx[1], 0, ch, r)) == -EAGAIN && zb_now_ns() < end)
		T->wait(ctx[1], 2);
	return rc;
}

/* Drive node 1's listener for ms milliseconds. */
static void drive(int ms)
{
	for (int i = 0; i < ms; i++) {
		T->progress(ctx[1]);
		usleep(1000);
	}
}

/* One int over s to r; 0 when it arrives intact. */
static int carries(void *s, void *r, int v, void *mh)
{
	static int sv, rv;
	void *sq, *rq;
	sv = v;
	rv = ~v;
	int rc = T->isend(s, &sv, sizeof(sv), 8, mh, &sq);
	rc = rc ? rc : T->irecv(r, &rv, sizeof(rv), 8, mh, &rq);
	rc = rc ? rc : finish(sq, rq, NULL, NULL);
	return rc ? rc : rv == v ? 0 : -EBADMSG;
}

/* The next connection to the raw listener lfd, accepted, its 16-byte hello
 * read into hin: the socket, or -1. */
static int raw_accept(int lfd, uint32_t hin[4])
{
	struct timeval tv = {.tv_sec = 1};
	int fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		return -1;
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (recv(fd, hin, 16, MSG_WAITALL) != 16) {
		close(fd);
		return -1;
	}
	return fd;
}

static int noop_init(const struct net_init_args *a, void **c) { (void)a; (void)c; return 0; }

int main(void)
{
	void *s, *r, *mh, *sq, *rq;
	int rc;

	tap_plan(45);
	port = 20000 + (int)(getpid() % 20000);
	sub = (int)(getpid() % 200);

	T = net_find("tcp");
	ok(T && T->version == NET_OPS_VERSION && T->wait, "net_find(\"tcp\") is built in");
	ok(net_find("nosuch") == NULL, "unknown provider: NULL");
	is_int(net_register(&net_tcp_ops), -EEXIST, "registering a name twice: -EEXIST");
	struct net_ops bad = {.version = NET_OPS_VERSION, .name = "bad"};
	is_int(net_register(&bad), -EINVAL, "a table without mandatory ops: -EINVAL");
	struct net_ops other = net_tcp_ops;
	other.name = "test-provider";
	other.init = noop_init;
	ok(net_register(&other) == 0 && net_find("test-provider") == &other,
	   "a provider from another module registers and is found");

	ok(load(0) == 0 && load(1) == 0, "two node configs");
	struct net_init_args a0 = {.cfg = &cfg[0], .channels = 5};
	struct net_init_args a1 = {.cfg = &cfg[1], .channels = 5};
	rc = T->init(&a0, &ctx[0]);
	if (rc == 0)
		rc = T->init(&a1, &ctx[1]);
	if (!ok(rc == 0, "both nodes init (listen on 127.78.%d.x:%d)", sub, port)) {
		tap_diag("init: %s", zb_strerror(rc));
		return tap_done();
	}
	is_int(T->accept(ctx[1], 7, 0, &r), -EINVAL, "accept from an unknown node: -EINVAL");
	is_int(link_up(0, &s, &r), 0, "connect/accept by node id, channel 0");

	is_int(T->reg_mr(s, &rc, sizeof(rc), NET_MEM_GPU, &mh), ZB_ERR_UNSUPPORTED,
	       "GPU memory: -ZB_ERR_UNSUPPORTED");
	is_int(T->reg_mr(s, &rc, sizeof(rc), NET_MEM_HOST, &mh), 0, "host memory registers");

	/* In-order matching, sizes 0 / 1 / 3 MiB (far beyond the socket buffer). */
	static const size_t sizes[] = {0, 1, 1000, 3u << 20};
	char *sb = malloc(3u << 20), *rb = malloc(3u << 20);
	bool good = true;
	for (size_t i = 0; i < ZB_ARRAY_LEN(sizes); i++) {
		size_t ss = 0, rs = 7;
		for (size_t k = 0; k < sizes[i]; k++)
			sb[k] = (char)(k * 7 + i);
		memset(rb, 0, 3u << 20);
		rc = T->isend(s, sb, sizes[i], 42, mh, &sq);
		rc = rc ? rc : T->irecv(r, rb, 3u << 20, 42, mh, &rq);
		rc = rc ? rc : finish(sq, rq, &ss, &rs);
		good = good && rc == 0 && ss == sizes[i] && rs == sizes[i] &&
		       memcmp(sb, rb, sizes[i]) == 0;
	}
	ok(good, "messages of 0, 1, 1000 and 3 MiB arrive whole, sizes reported");

	/* Several in flight: posted before any receive. */
	void *sqs[8], *rqs[8];
	int vals[8], got[8];
	good = true;
	for (int i = 0; i < 8; i++) {
		vals[i] = i * 11;
		good = good && T->isend(s, &vals[i], sizeof(int), 1, mh, &sqs[i]) == 0;
	}
	for (int i = 0; i < 8; i++)
		good = good && T->irecv(r, &got[i], sizeof(int), 1, mh, &rqs[i]) == 0;
	for (int i = 0; i < 8; i++)
		good = good && finish(sqs[i], rqs[i], NULL, NULL) == 0 && got[i] == vals[i];
	ok(good, "8 sends in flight match 8 receives in posting order");

	/* wait() sleeps until data arrives, and not much longer. */
	rc = T->irecv(r, rb, 16, 5, mh, &rq);
	uint64_t t0 = zb_now_ns();
	int w = T->wait(ctx[1], 50);
	ok(rc == 0 && w == 0 && zb_now_ns() - t0 >= 40000000ull, "wait() times out when idle");
	rc = T->isend(s, sb, 16, 5, mh, &sq);
	w = T->wait(ctx[1], 1000);
	ok(rc == 0 && w > 0 && finish(sq, rq, NULL, NULL) == 0,
	   "wait() wakes when data arrives");

	/* Message larger than the posted receive. */
	void *s1, *r1;
	is_int(link_up(1, &s1, &r1), 0, "channel 1 connects");
	rc = T->isend(s1, sb, 100, 3, mh, &sq);
	rc = rc ? rc : T->irecv(r1, rb, 10, 3, mh, &rq);
	size_t rs = 0;
	is_int(rc ? rc : finish(NULL, rq, NULL, &rs), -EMSGSIZE,
	       "a message longer than the receive buffer: -EMSGSIZE");
	T->test(sq, &w, NULL);

	/* Tag mismatch: the two ends run different collectives. */
	void *s2, *r2;
	is_int(link_up(2, &s2, &r2), 0, "channel 2 connects");
	rc = T->isend(s2, sb, 10, 3, mh, &sq);
	rc = rc ? rc : T->irecv(r2, rb, 10, 4, mh, &rq);
	is_int(rc ? rc : finish(NULL, rq, NULL, NULL), ZB_ERR_BAD_FRAME,
	       "a tag other than the receive's: -ZB_ERR_BAD_FRAME");
	/* ... even when the message is also longer than the receive: the
	 * tag decides first (the provider used to say -EMSGSIZE). */
	void *sx4, *rx4;
	is_int(link_up(4, &sx4, &rx4), 0, "channel 4 connects");
	rc = T->isend(sx4, sb, 100, 3, mh, &sq);
	rc = rc ? rc : T->irecv(rx4, rb, 10, 4, mh, &rq);
	is_int(rc ? rc : finish(NULL, rq, NULL, NULL), ZB_ERR_BAD_FRAME,
	       "another tag and longer than the receive: -ZB_ERR_BAD_FRAME");

	/* A bad hello (other cluster) is dropped; the channel stays free. */
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port),
				 .sin_addr.s_addr = cfg[0].peers[1].ip};
	uint32_t hello[4] = {htole32(0x5a42484cu), htole32(2u | (0u << 16)),
			     htole32(3u | (1u << 16)), htole32(12345)};
	rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	rc = rc ? rc : (int)write(fd, hello, sizeof(hello)) - (int)sizeof(hello);
	for (int i = 0; i < 50; i++) {
		T->progress(ctx[1]);
		usleep(1000);
	}
	ok(rc == 0 && T->accept(ctx[1], 0, 3, &r) == -EAGAIN,
	   "a hello with another cluster id is refused");
	char c;
	ok(recv(fd, &c, 1, 0) == 0, "... and its socket closed");
	close(fd);

	/* A hello from a node that is not a configured peer (5), or that
	 * claims to be the listener itself (1), is refused and its socket
	 * closed: it must not park a recv comm no accept() will take. */
	uint16_t bad_src[2] = {5, 1};
	for (int k = 0; k < 2; k++) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		uint32_t h2[4] = {htole32(0x5a42484cu),
				  htole32(2u | ((uint32_t)bad_src[k] << 16)),
				  htole32(3u | (1u << 16)), htole32(99)};
		rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
		rc = rc ? rc : (int)write(fd, h2, sizeof(h2)) - (int)sizeof(h2);
		for (int i = 0; i < 50; i++) {
			T->progress(ctx[1]);
			usleep(1000);
		}
		struct timeval tv = {.tv_sec = 1};
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		ok(rc == 0 && recv(fd, &c, 1, 0) == 0,
		   "a hello from node %u (%s) is refused and its socket closed",
		   bad_src[k], k ? "the listener itself" : "not a configured peer");
		close(fd);
	}
	void *s3, *r3;
	is_int(link_up(3, &s3, &r3), 0, "the channel still connects properly afterwards");

	/* Peer closes: pending receive fails with PEER_DOWN. */
	rc = T->irecv(r3, rb, 10, 9, mh, &rq);
	T->close_send(s3);
	is_int(rc ? rc : finish(NULL, rq, NULL, NULL), ZB_ERR_PEER_DOWN,
	       "peer closed the connection: -ZB_ERR_PEER_DOWN");

	/* A peer that reconnects while this node still holds its previous
	 * connection (handed out, its end not noticed yet: the peer was
	 * stopped, or this node was busy). The newer connection must win:
	 * refused as a duplicate, the peer would hold a connection nobody
	 * reads while this node waited for one that never came. */
	T->close_send(s);
	void *sn = NULL, *rn = NULL;
	int g = 0;
	rc = connect_only(0, &sn);
	drive(50);
	is_int(rc ? rc : (T->irecv(r, &g, sizeof(g), 8, mh, &rq) ?: finish(NULL, rq, NULL, NULL)),
	       ZB_ERR_PEER_DOWN, "a reconnect fails the held, abandoned recv comm (PEER_DOWN)");
	T->close_recv(r);
	rc = accept_for(0, &rn, 2000);
	rc = rc ? rc : carries(sn, rn, 0x5eed, mh);
	is_int(rc, 0, "... and accept() then hands out the new connection, which carries data");

	/* A connection parked and not handed out yet, then replaced by the
	 * peer's next one: the next one is handed out. */
	T->close_recv(r3);
	void *s4 = NULL, *s5 = NULL, *r5 = NULL;
	rc = connect_only(3, &s4);
	drive(30);
	T->close_send(s4);
	rc = rc ? rc : connect_only(3, &s5);
	drive(30);
	rc = rc ? rc : accept_for(3, &r5, 2000);
	is_int(rc ? rc : carries(s5, r5, 0x7a11, mh), 0,
	       "a parked connection replaced by the peer's next one: the next one is handed out");

	/* A parked connection the peer closed before anyone wanted it is
	 * dropped at accept(), not handed out to fail. */
	T->close_send(s5);
	T->close_recv(r5);
	void *s6 = NULL, *r6 = NULL, *s7 = NULL, *r7 = NULL;
	rc = connect_only(3, &s6);
	drive(30);
	T->close_send(s6);
	usleep(30000);
	is_int(rc ? rc : accept_for(3, &r6, 50), -EAGAIN,
	       "a parked connection its peer closed is not handed out");
	rc = connect_only(3, &s7);
	rc = rc ? rc : accept_for(3, &r7, 2000);
	is_int(rc ? rc : carries(s7, r7, 0x600d, mh), 0, "... and the peer's next connection is");

	/* An older connection than the one parked loses: node 1 accepts a
	 * raw socket first and a real comm later; the raw one's hello,
	 * read after, is refused and closed. */
	T->close_send(s7);
	T->close_recv(r7);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	drive(20);   /* accepted: it waits for its hello */
	void *s8 = NULL, *r8 = NULL;
	rc = rc ? rc : connect_only(3, &s8);
	drive(20);
	uint32_t h3[4] = {htole32(0x5a42484cu), htole32(2u | (0u << 16)),
			  htole32(3u | (1u << 16)), htole32(99)};
	rc = rc ? rc : (int)write(fd, h3, sizeof(h3)) - (int)sizeof(h3);
	drive(30);
	struct timeval tv1 = {.tv_sec = 1};
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv1, sizeof(tv1));
	ok(rc == 0 && recv(fd, &c, 1, 0) == 0,
	   "a connection accepted before the parked one, its hello late, is refused and closed");
	close(fd);
	rc = accept_for(3, &r8, 2000);
	is_int(rc ? rc : carries(s8, r8, 0xface, mh), 0,
	       "... and the parked one is handed out and works");

	T->close_send(s8);
	T->close_recv(r8);
	T->close_send(sn);
	T->close_recv(rn);

	/* Connections that send no hello (or part of one) must not keep the
	 * peers out: the listener has 128 slots for sockets awaiting their
	 * hello; a newcomer takes the slot of the one waiting longest, and a
	 * hello not whole within 2 s closes its socket. */
	int flood[130], nflood = 0;
	for (int i = 0; i < 130; i++) {
		flood[i] = socket(AF_INET, SOCK_STREAM, 0);
		if (flood[i] < 0 || connect(flood[i], (struct sockaddr *)&sa, sizeof(sa)) != 0)
			break;
		if (i == 129)
			(void)write(flood[i], hello, 3);   /* a hello cut short */
		nflood++;
		if (i % 16 == 15)
			drive(2);
	}
	uint64_t t_fl = zb_now_ns();   /* before flood[129] is accepted */
	drive(20);
	void *s10 = NULL, *r10 = NULL;
	rc = nflood == 130 ? connect_only(0, &s10) : -EIO;
	rc = rc ? rc : accept_for(0, &r10, 2000);
	is_int(rc ? rc : carries(s10, r10, 0xf100d, mh), 0,
	       "130 connections without a hello: a peer's connection still gets through");
	int closed = 0;
	for (int i = 0; i < 3; i++) {   /* the three waiting longest: evicted */
		struct timeval tv0 = {.tv_usec = 100000};
		(void)setsockopt(flood[i], SOL_SOCKET, SO_RCVTIMEO, &tv0, sizeof(tv0));
		closed += recv(flood[i], &c, 1, 0) == 0;
	}
	ok(closed == 3, "... the oldest of them were closed to make room (%d of 3)", closed);
	T->close_send(s10);
	T->close_recv(r10);
	ssize_t got_eof = -2;
	for (int i = 0; i < 400 && got_eof == -2; i++) {
		drive(10);
		char pk;
		ssize_t n = recv(flood[129], &pk, 1, MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
			got_eof = n;
	}
	double waited = (double)(zb_now_ns() - t_fl) / 1e9;
	ok(got_eof == 0 && waited >= 1.9,
	   "a hello cut short is closed at the hello timeout (2 s after its accept; "
	   "%.1f s after its connect)", waited);
	for (int i = 0; i < nflood; i++)
		close(flood[i]);

	/* A listener's kernel completes the handshake whether or not the
	 * process reads (stopped, wedged): a send comm is handed out only
	 * once the listener acks the hello. Node 1's place is taken by a raw
	 * socket that listens and never accepts, then answers by hand. */
	T->fini(ctx[1]);
	ctx[1] = NULL;
	int one = 1, lfd = socket(AF_INET, SOCK_STREAM, 0);
	(void)setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	(void)setsockopt(lfd, SOL_SOCKET, SO_RCVTIMEO, &tv1, sizeof(tv1)); /* accept() */
	rc = bind(lfd, (struct sockaddr *)&sa, sizeof(sa));
	rc = rc ? rc : listen(lfd, 8);
	void *s9 = NULL;
	is_int(rc ? -errno : connect_for(3, &s9, 300), -EAGAIN,
	       "a listener that never reads the hello: connect() keeps waiting (300 ms)");
	uint32_t hin[4] = {0};
	fd = raw_accept(lfd, hin);
	ok(fd >= 0 && le32toh(hin[0]) == 0x5a42484cu && (le32toh(hin[1]) & 0xffff) == 2 &&
	   le32toh(hin[2]) == (3u | (1u << 16)),
	   "... its hello (version 2, channel 3, to node 1) sits in the socket");
	/* an ack from another node at that address: closed, tried again */
	uint32_t ack[2] = {htole32(0x5a42414bu), htole32(2u | (7u << 16))};
	rc = (int)write(fd, ack, sizeof(ack)) - (int)sizeof(ack);
	is_int(rc ? rc : connect_for(3, &s9, 100), -EAGAIN,
	       "an ack naming another node is not taken");
	ok(recv(fd, &c, 1, 0) == 0, "... and that connection is closed");
	close(fd);
	usleep(30000);   /* the provider's retry delay (20 ms) */
	(void)T->connect(ctx[0], 1, 3, &s9);
	fd = raw_accept(lfd, hin);
	rc = fd >= 0 ? 0 : -1;
	uint32_t old_ack[2] = {htole32(0x5a42414bu), htole32(1u | (1u << 16))};
	rc = rc ? rc : (int)write(fd, old_ack, sizeof(old_ack)) - (int)sizeof(old_ack);
	is_int(rc ? rc : connect_for(3, &s9, 100), -EAGAIN,
	       "an ack of another protocol version is not taken");
	close(fd);
	usleep(30000);
	(void)T->connect(ctx[0], 1, 3, &s9);
	fd = raw_accept(lfd, hin);
	rc = fd >= 0 ? 0 : -1;
	ack[1] = htole32(2u | (1u << 16));
	rc = rc ? rc : (int)write(fd, ack, 4) - 4;      /* half an ack ... */
	rc = rc ? rc : connect_for(3, &s9, 50);
	is_int(rc, -EAGAIN, "half an ack: still waiting");
	rc = (int)write(fd, (char *)ack + 4, 4) - 4;    /* ... then the rest */
	is_int(rc ? rc : connect_for(3, &s9, 1000), 0, "the whole ack: the send comm is handed out");
	int v = 0x51, hdr[4];
	rc = T->isend(s9, &v, sizeof(v), 6, mh, &sq);
	rc = rc ? rc : finish(sq, NULL, NULL, NULL);
	ok(rc == 0 && recv(fd, hdr, sizeof(hdr), MSG_WAITALL) == (ssize_t)sizeof(hdr) &&
	   recv(fd, &g, sizeof(g), MSG_WAITALL) == (ssize_t)sizeof(g) && g == v,
	   "... and carries a message on that connection");
	T->close_send(s9);
	close(fd);
	close(lfd);
	T->fini(ctx[0]);
	free(sb);
	free(rb);
	return tap_done();
}
