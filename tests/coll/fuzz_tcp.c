/* libFuzzer entry point for what the tcp net provider (dataplane/net_tcp.c)
 * reads from its sockets: the 16-byte hello of an accepted connection,
 * then message headers {magic, tag, size} and payloads into posted
 * receives; and the listener's 8-byte ack on a connecting side. `make
 * fuzz-tcp` (clang -fsanitize=fuzzer,address,undefined; FUZZ_SECS=30 by
 * default).
 *
 * net_tcp.c is compiled into this file; the bytes come through one end of
 * a socketpair whose other end the provider holds as the accepted socket
 * (or as a connecting send comm). Input: byte 0 the mode (bit 0: the
 * connector's ack instead of the listener's side; bit 1: the harness
 * writes a valid hello first, source node and channel from byte 1; bit 2:
 * the writer's end is shut down after the bytes, EOF), byte 1 the hello's
 * source and channel, byte 2 the number of receives posted (1 - 8), then
 * one byte per receive for its size, then the stream. Oracles besides the
 * sanitizers: a completed receive is never longer than its buffer, and
 * the provider never blocks (every socket is non-blocking: a wait would
 * hang the fuzzer, and libFuzzer's -timeout reports it). */
#include "../../dataplane/net_tcp.c"

#include <stdlib.h>

#define TAG 0x11u
#define SELF 1u
#define CLUSTER 7u

static struct zb_config cfg;
static struct tcp_ctx *X;

static void setup(void)
{
	cfg.node.id = SELF;
	cfg.cluster.id = CLUSTER;
	for (unsigned i = 0; i < 4; i++)
		cfg.peers[i].present = true;
	cfg.transport.tcp_port = 0;   /* an ephemeral port: nobody connects */
	struct net_init_args a = {.cfg = &cfg, .channels = 2};
	void *ctx;
	ZB_ASSERT(tcp_init(&a, &ctx) == 0);
	X = ctx;
}

static void reset_all(void)
{
	for (size_t i = 0; i < (size_t)CFG_MAX_NODES * X->channels; i++) {
		tcp_comm_reset(&X->send[i]);
		tcp_comm_reset(&X->recv[i]);
	}
	for (unsigned i = 0; i < TCP_PENDING_MAX; i++) {
		if (X->pend[i].fd >= 0)
			close(X->pend[i].fd);
		X->pend[i].fd = -1;
	}
}

static void feed(int fd, const uint8_t *d, size_t n)
{
	while (n) {
		ssize_t w = send(fd, d, n, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (w <= 0)
			break;   /* the socket buffer is full: the rest is lost */
		d += w;
		n -= (size_t)w;
	}
}

/* The listener's side: an accepted socket reads its hello, parks as a recv
 * comm, is handed out, and the receives posted on it complete. */
static void listener(int fd, int peer_fd, uint8_t mode, uint8_t who,
		     const uint8_t *d, size_t n)
{
	uint8_t nreq = n ? (uint8_t)(d[0] % 8 + 1) : 1;
	static const size_t sizes[] = {0, 1, 7, 8, 16, 100, 4096, 65536};
	size_t sz[8];
	if (n) {
		d++;
		n--;
	}
	for (unsigned i = 0; i < nreq; i++) {
		sz[i] = n ? sizes[d[0] % 8] + (d[0] >> 3) % 3 : 8;
		if (n) {
			d++;
			n--;
		}
	}
	struct tcp_pending *p = &X->pend[0];
	p->fd = fd;
	p->off = 0;
	p->acked = false;
	p->seq = ++X->accepted;
	p->since_ns = zb_now_ns();
	if (mode & 2) {
		struct tcp_hello h = {
			.magic = htole32(TCP_MAGIC_HELLO), .version = htole16(TCP_VERSION),
			.src = htole16((uint16_t)(who & 3)), .channel = htole16((uint16_t)(who >> 2 & 1)),
			.dst = htole16(SELF), .cluster = htole32(CLUSTER)};
		feed(peer_fd, (const uint8_t *)&h, sizeof(h));
	}
	feed(peer_fd, d, n);
	if (mode & 4)
		shutdown(peer_fd, SHUT_WR);
	(void)tcp_progress(X);
	struct tcp_comm *c = NULL;
	for (size_t i = 0; i < (size_t)CFG_MAX_NODES * X->channels; i++)
		if (X->recv[i].state == CS_OPEN)
			c = &X->recv[i];
	if (!c) {
		/* a complete hello parks the socket or closes it */
		ZB_ASSERT(p->fd < 0 || p->off < sizeof(p->hello));
		return;
	}
	ZB_ASSERT(c->peer != SELF && c->peer < 4 && c->channel < 2);
	void *comm = NULL;
	if (tcp_accept(X, c->peer, c->channel, &comm) != 0)
		return;
	uint8_t *buf[8];
	void *req[8];
	unsigned posted = 0;
	for (unsigned i = 0; i < nreq; i++) {
		buf[i] = malloc(sz[i] ? sz[i] : 1);   /* exact: ASan sees overruns */
		ZB_ASSERT(buf[i] != NULL);
		posted++;
		if (tcp_irecv(comm, sz[i] ? buf[i] : NULL, sz[i], TAG, NULL, &req[i]) != 0) {
			req[i] = NULL;
			break;
		}
	}
	for (unsigned i = 0; i < posted && req[i]; i++) {
		int done = 0, rc = 0;
		size_t got = SIZE_MAX;
		for (int k = 0; k < 4 && !done; k++)
			rc = tcp_test(req[i], &done, &got);
		if (!done)
			break;   /* waits for bytes that never come */
		if (rc == 0)
			ZB_ASSERT(got <= sz[i]);
		else
			ZB_ASSERT(rc < 0);
	}
	tcp_comm_reset(c);   /* its requests point into buf[] */
	for (unsigned i = 0; i < posted; i++)
		free(buf[i]);
}

/* The connector's side: the listener's ack. */
static void connector(int fd, int peer_fd, uint8_t who, const uint8_t *d, size_t n)
{
	uint16_t peer = (uint16_t)(who & 3) == SELF ? 0 : (uint16_t)(who & 3);
	struct tcp_comm *c = tcp_comm_at(X, true, peer, 0);
	c->fd = fd;
	c->state = CS_ACK;
	c->hello_off = sizeof(c->hello);
	feed(peer_fd, d, n);
	shutdown(peer_fd, SHUT_WR);
	int rc = tcp_connect_step(X, c);
	if (rc == 0)
		ZB_ASSERT(c->state == CS_OPEN && le16toh(c->ack.node) == peer &&
			  le32toh(c->ack.magic) == TCP_MAGIC_ACK);
	else
		ZB_ASSERT(rc == -EAGAIN && c->state != CS_OPEN);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!X)
		setup();
	if (size < 2)
		return 0;
	int sv[2];
	ZB_ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0);
	if (data[0] & 1)
		connector(sv[0], sv[1], data[1], data + 2, size - 2);
	else
		listener(sv[0], sv[1], data[0], data[1], data + 2, size - 2);
	reset_all();   /* closes sv[0] wherever the provider keeps it */
	close(sv[1]);
	return 0;
}
