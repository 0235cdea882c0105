/* net_tcp.c — the "tcp" net provider: kernel sockets, the fallback where no
 * DPDK port exists and the baseline the others are measured against.
 *
 * Connections. Every node listens on ONE socket, peers[self].ip :
 * [transport] tcp_port (INADDR_ANY when the config has no [peer.self]). A
 * send comm to (peer, channel) is a connection this node opens; it first
 * writes a 16-byte hello {magic, version, src node, channel, dst node,
 * cluster id}. The listener accepts it, reads the hello, checks it (magic,
 * version, cluster id, dst == self, src a configured peer, channel in
 * range), answers with an 8-byte ack {magic, version, its node id} and
 * parks the socket as the recv comm (src, channel) until accept() hands it
 * out. One port for every channel: the hello names the channel, so no port
 * range has to be reserved per node. connect() hands out the send comm only
 * once the ack is in: a TCP handshake alone proves nothing but the peer's
 * kernel, which completes it for a stopped (SIGSTOP) or wedged process too,
 * and a comm handed out on that would carry messages nobody reads (the
 * restart flake traced in docs/remote.md, "Half open").
 *
 * A peer opens a connection for (src, channel) only when it has none (it
 * closed, failed or restarted), so of two connections from the same
 * (src, channel) the one accepted later is the peer's current one and the
 * earlier one is abandoned: a later connection replaces a parked one, and
 * fails one already handed out (its owner sees ZB_ERR_PEER_DOWN, closes
 * it, and accept() then hands out the new one). Refusing the newcomer
 * instead would leave the peer holding a connection nobody reads, while
 * this node waits for one that never comes. accept() also drops a parked
 * connection the peer has closed already.
 *
 * Framing. Each message is a 16-byte header {magic, tag, size (64-bit)},
 * little-endian, then `size` payload bytes. The receiver reads the header,
 * then the payload straight into the posted irecv buffer (no bounce copy);
 * without a posted irecv it reads nothing, so the kernel's socket buffer
 * and TCP flow control are the backpressure.
 *
 * Nothing blocks after socket creation: sockets are O_NONBLOCK, connect()
 * completes through poll(), I/O happens in isend/irecv/test/progress and
 * stops at EAGAIN. wait() is the only call that sleeps (poll()).
 *
 * Memory: comms and their request rings are allocated in init(); isend,
 * irecv, test and progress never allocate.
 */
#include "zbmd/common.h"
#include "zbmd/config.h"
#include "zbmd/net.h"

#include <arpa/inet.h>
#include <endian.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define TCP_MAGIC_HELLO 0x5a42484cu     /* "ZBHL" */
#define TCP_MAGIC_MSG 0x5a424d47u       /* "ZBMG" */
#define TCP_MAGIC_ACK 0x5a42414bu       /* "ZBAK" */
#define TCP_VERSION 2                   /* 2: the listener acks the hello */
#define TCP_REQS 64                     /* request slots per comm */
#define TCP_PENDING_MAX 128             /* accepted sockets awaiting hello */
#define TCP_HELLO_NS (2000ull * 1000 * 1000)   /* a hello's whole 16 bytes */
#define TCP_RETRY_NS (20ull * 1000 * 1000)
#define TCP_SOCKBUF (4 << 20)

static_assert((TCP_REQS & (TCP_REQS - 1)) == 0, "ring index mask");

struct tcp_hello {
	uint32_t magic;
	uint16_t version;
	uint16_t src;
	uint16_t channel;
	uint16_t dst;
	uint32_t cluster;
};
static_assert(sizeof(struct tcp_hello) == 16, "wire size");

struct tcp_ack {                        /* listener -> connector, once */
	uint32_t magic;
	uint16_t version;
	uint16_t node;                  /* the listener's node id */
};
static_assert(sizeof(struct tcp_ack) == 8, "wire size");

struct tcp_hdr {
	uint32_t magic;
	uint32_t tag;
	uint64_t size;
};
static_assert(sizeof(struct tcp_hdr) == 16, "wire size");

enum { REQ_FREE = 0, REQ_PENDING, REQ_DONE, REQ_ERROR };
enum { CS_IDLE = 0, CS_CONNECTING, CS_HELLO, CS_ACK, CS_OPEN, CS_DEAD };

struct tcp_comm;

struct tcp_req {
	struct tcp_comm *comm;
	int state;
	int err;
	char *data;
	size_t size;            /* send: message size; recv: buffer size */
	size_t msg_size;        /* recv: size from the header */
	size_t off;             /* bytes of header + payload moved */
	uint32_t tag;
	struct tcp_hdr hdr;     /* wire header (send: filled at post) */
};

struct tcp_ctx;

struct tcp_comm {
	struct tcp_ctx *ctx;
	int fd;
	int state;
	bool is_send;
	bool handed_out;        /* returned by connect()/accept() */
	uint16_t peer, channel;
	int err;                /* why the comm died */
	uint64_t retry_at_ns;
	uint64_t seq;           /* recv: accept order of its connection */
	size_t hello_off;
	struct tcp_hello hello;
	size_t ack_off;         /* send: bytes of the listener's ack read */
	struct tcp_ack ack;
	uint32_t head, tail;    /* requests [head, tail) are in flight */
	struct tcp_req reqs[TCP_REQS];
};

struct tcp_pending {
	int fd;
	size_t off;
	uint64_t seq;           /* accept order (tcp_ctx.accepted) */
	uint64_t since_ns;      /* accepted at */
	bool acked;             /* our ack is sent */
	struct tcp_hello hello;
};

struct tcp_ctx {
	const struct zb_config *cfg;
	char cc[16];            /* congestion control of every socket ("": the
				 * system's default; tcp_cc_choose) */
	uint16_t self, channels;
	uint32_t cluster;
	int lfd;
	uint64_t accepted;      /* connections accepted so far */
	struct tcp_comm *send;  /* [CFG_MAX_NODES * channels] */
	struct tcp_comm *recv;
	struct tcp_pending pend[TCP_PENDING_MAX];
	struct pollfd *pfd;     /* wait(): sized for every socket */
	size_t pfd_cap;
};

static const int tcp_host_mr_token;

/* ---- helpers --------------------------------------------------------------- */

static int tcp_sock_setup(const struct tcp_ctx *x, int fd)
{
	int one = 1, buf = TCP_SOCKBUF;

	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0)
		return -errno;
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	if (x->cc[0])
		(void)setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, x->cc,
				 (socklen_t)strlen(x->cc));
	return 0;
}

/* [transport] tcp_congestion, tried on the listening socket: the kernel
 * refuses an algorithm it does not have, or one an unprivileged process may
 * not pick (net.ipv4.tcp_allowed_congestion_control); then reno (always
 * allowed), said once; "" keeps the system's default. Why not the default:
 * where it is BBR, its pacing spaces out the bursts a collective sends, and
 * once a connection has carried large messages it paces smaller ones too (4
 * nodes on loopback, 1 MiB all-reduce after 4 MiB ones: busbw 0.88 - 0.97
 * GB/s against 1.38 - 1.51 with reno or cubic; docs/collectives.md). */
static void tcp_cc_choose(struct tcp_ctx *x)
{
	const char *want = x->cfg->transport.tcp_congestion;
	size_t len = strlen(want);
	int e = ENAMETOOLONG;

	x->cc[0] = 0;
	if (!len)
		return;
	if (len < sizeof(x->cc)) {
		if (setsockopt(x->lfd, IPPROTO_TCP, TCP_CONGESTION, want,
			       (socklen_t)len) == 0) {
			snprintf(x->cc, sizeof(x->cc), "%s", want);
			return;
		}
		e = errno;
	}
	if (strcmp(want, "reno") != 0 &&
	    setsockopt(x->lfd, IPPROTO_TCP, TCP_CONGESTION, "reno", 4) == 0) {
		snprintf(x->cc, sizeof(x->cc), "reno");
		fprintf(stderr, "zbmd: tcp provider: congestion control '%s' refused (%s); "
			"using reno ([transport] tcp_congestion)\n", want, strerror(e));
		return;
	}
	fprintf(stderr, "zbmd: tcp provider: congestion control '%s' refused (%s); "
		"using the system's default ([transport] tcp_congestion)\n", want,
		strerror(e));
}

static bool tcp_errno_is_peer_down(int e)
{
	return e == EPIPE || e == ECONNRESET || e == ENOTCONN ||
	       e == ETIMEDOUT || e == ECONNABORTED || e == EHOSTUNREACH;
}

/* Fail every in-flight request of c with err and close its socket, so that
 * the peer sees the failure at once (EOF/RST) instead of after a timeout. */
static void tcp_comm_fail(struct tcp_comm *c, int err)
{
	ZB_ASSERT(err < 0);
	for (uint32_t i = c->head; i != c->tail; i++) {
		struct tcp_req *r = &c->reqs[i & (TCP_REQS - 1)];
		if (r->state == REQ_PENDING) {
			r->state = REQ_ERROR;
			r->err = err;
		}
	}
	c->head = c->tail;
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->state = CS_DEAD;
	c->err = err;
}

static void tcp_comm_reset(struct tcp_comm *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->state = CS_IDLE;
	c->handed_out = false;
	c->err = 0;
	c->hello_off = 0;
	c->ack_off = 0;
	c->head = c->tail = 0;
	memset(c->reqs, 0, sizeof(c->reqs));
	for (unsigned i = 0; i < TCP_REQS; i++)
		c->reqs[i].comm = c;
}

static struct tcp_comm *tcp_comm_at(struct tcp_ctx *x, bool send,
				    uint16_t peer, uint16_t ch)
{
	ZB_DASSERT(peer < CFG_MAX_NODES && ch < x->channels);
	return &(send ? x->send : x->recv)[(size_t)peer * x->channels + ch];
}

/* ---- data movement --------------------------------------------------------- */

/* Write as much of the queued sends as the socket takes. Returns the number
 * of requests completed. */
static int tcp_send_progress(struct tcp_comm *c)
{
	int events = 0;

	while (c->state == CS_OPEN && c->head != c->tail) {
		struct tcp_req *r = &c->reqs[c->head & (TCP_REQS - 1)];
		size_t total = sizeof(r->hdr) + r->size;
		struct iovec iov[2];
		int n = 0;

		ZB_DASSERT(r->state == REQ_PENDING && r->off < total);
		if (r->off < sizeof(r->hdr)) {
			iov[n].iov_base = (char *)&r->hdr + r->off;
			iov[n++].iov_len = sizeof(r->hdr) - r->off;
			iov[n].iov_base = r->data;
			iov[n++].iov_len = r->size;
		} else {
			iov[n].iov_base = r->data + (r->off - sizeof(r->hdr));
			iov[n++].iov_len = total - r->off;
		}
		struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
		ssize_t w = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			if (errno == EINTR)
				continue;
			tcp_comm_fail(c, tcp_errno_is_peer_down(errno)
					   ? ZB_ERR_PEER_DOWN : -errno);
			return events + 1;
		}
		r->off += (size_t)w;
		if (r->off == total) {
			r->state = REQ_DONE;
			c->head++;
			events++;
		}
	}
	return events;
}

/* Read into the posted receives. Returns the number of requests completed
 * (failed ones included). */
static int tcp_recv_progress(struct tcp_comm *c)
{
	int events = 0;

	while (c->state == CS_OPEN && c->head != c->tail) {
		struct tcp_req *r = &c->reqs[c->head & (TCP_REQS - 1)];
		size_t hl = sizeof(r->hdr);
		ssize_t n;

		ZB_DASSERT(r->state == REQ_PENDING);
		ZB_DASSERT(r->off < hl || r->off < hl + r->msg_size);
		if (r->off < hl)
			n = recv(c->fd, (char *)&r->hdr + r->off, hl - r->off,
				 MSG_DONTWAIT);
		else
			n = recv(c->fd, r->data + (r->off - hl),
				 r->msg_size - (r->off - hl), MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			if (errno == EINTR)
				continue;
			tcp_comm_fail(c, tcp_errno_is_peer_down(errno)
					   ? ZB_ERR_PEER_DOWN : -errno);
			return events + 1;
		}
		if (n == 0) {   /* orderly close by the peer */
			tcp_comm_fail(c, ZB_ERR_PEER_DOWN);
			return events + 1;
		}
		r->off += (size_t)n;
		if (r->off == hl) {
			uint64_t sz = le64toh(r->hdr.size);
			if (le32toh(r->hdr.magic) != TCP_MAGIC_MSG) {
				tcp_comm_fail(c, ZB_ERR_BAD_FRAME);
				return events + 1;
			}
			/* The tag first: a message of another collective
			 * is a desync (BAD_FRAME, net.h), whatever its size. */
			if (le32toh(r->hdr.tag) != r->tag) {
				tcp_comm_fail(c, ZB_ERR_BAD_FRAME);
				return events + 1;
			}
			if (sz > r->size) {
				tcp_comm_fail(c, -EMSGSIZE);
				return events + 1;
			}
			r->msg_size = (size_t)sz;
		}
		if (r->off >= hl && r->off == hl + r->msg_size) {
			r->state = REQ_DONE;
			c->head++;
			events++;
		}
	}
	return events;
}

static int tcp_comm_progress(struct tcp_comm *c)
{
	if (c->state != CS_OPEN || c->head == c->tail)
		return 0;
	return c->is_send ? tcp_send_progress(c) : tcp_recv_progress(c);
}

/* ---- connection set-up ----------------------------------------------------- */

/* A slot for a socket just accepted: a free one, else the one that has
 * waited longest for its hello (a connection that sends nothing must not
 * keep the peers out; a connector whose hello was cut off this way sees EOF
 * and tries again). -1 when every slot holds a read hello (waiting for its
 * comm's owner to close the old connection). */
static int tcp_pending_slot(struct tcp_ctx *x)
{
	int old = -1;

	for (unsigned i = 0; i < TCP_PENDING_MAX; i++) {
		struct tcp_pending *p = &x->pend[i];
		if (p->fd < 0)
			return (int)i;
		if (p->off < sizeof(p->hello) &&
		    (old < 0 || p->seq < x->pend[old].seq))
			old = (int)i;
	}
	if (old >= 0) {
		close(x->pend[old].fd);
		x->pend[old].fd = -1;
	}
	return old;
}

/* Accept new sockets and read their hellos; a complete, valid hello parks
 * the socket as recv comm (src, channel), replacing or failing an earlier
 * connection of the same (src, channel) (see the top of the file). A
 * newcomer whose comm is still handed out waits here, hello read, until
 * the owner closes the failed comm. Bad hellos close the socket, and so
 * does a hello not complete within TCP_HELLO_NS. */
static int tcp_accept_progress(struct tcp_ctx *x)
{
	int events = 0;
	uint64_t now = zb_now_ns();

	for (;;) {
		int fd = accept4(x->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			break;
		int i = tcp_pending_slot(x);
		if (i < 0 || tcp_sock_setup(x, fd) < 0) {
			close(fd);
			continue;
		}
		x->pend[i].fd = fd;
		x->pend[i].off = 0;
		x->pend[i].acked = false;
		x->pend[i].seq = ++x->accepted;
		x->pend[i].since_ns = now;
	}
	for (unsigned i = 0; i < TCP_PENDING_MAX; i++) {
		struct tcp_pending *p = &x->pend[i];
		if (p->fd < 0)
			continue;
		if (p->off < sizeof(p->hello) && now - p->since_ns > TCP_HELLO_NS)
			goto drop;
		if (p->off < sizeof(p->hello)) {
			ssize_t n = recv(p->fd, (char *)&p->hello + p->off,
					 sizeof(p->hello) - p->off, MSG_DONTWAIT);
			if (n < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			if (n <= 0)
				goto drop;
			p->off += (size_t)n;
			if (p->off < sizeof(p->hello))
				continue;
		}
		uint16_t src = le16toh(p->hello.src), ch = le16toh(p->hello.channel);
		if (le32toh(p->hello.magic) != TCP_MAGIC_HELLO ||
		    le16toh(p->hello.version) != TCP_VERSION ||
		    le32toh(p->hello.cluster) != x->cluster ||
		    le16toh(p->hello.dst) != x->self || ch >= x->channels)
			goto drop;
		/* only a configured peer other than ourselves may park a recv
		 * comm: anything else would sit there (holding an fd) for an
		 * accept() that never comes */
		if (src >= CFG_MAX_NODES || src == x->self ||
		    !x->cfg->peers[src].present)
			goto drop;
		struct tcp_comm *c = tcp_comm_at(x, false, src, ch);
		if (c->state != CS_IDLE && p->seq < c->seq)
			goto drop;              /* abandoned by the peer already */
		if (!p->acked) {
			/* a fresh socket's send buffer is empty: 8 bytes go
			 * whole or the socket is broken */
			const struct tcp_ack a = {
				.magic = htole32(TCP_MAGIC_ACK),
				.version = htole16(TCP_VERSION),
				.node = htole16(x->self)};
			if (send(p->fd, &a, sizeof(a), MSG_NOSIGNAL |
				 MSG_DONTWAIT) != (ssize_t)sizeof(a))
				goto drop;
			p->acked = true;
		}
		if (c->state != CS_IDLE) {
			if (c->handed_out) {
				/* the owner's connection is the abandoned one */
				if (c->state == CS_OPEN) {
					tcp_comm_fail(c, ZB_ERR_PEER_DOWN);
					events++;
				}
				continue;       /* parked once the owner closes it */
			}
			close(c->fd);           /* parked, never handed out */
		}
		c->fd = p->fd;
		c->seq = p->seq;
		c->state = CS_OPEN;
		p->fd = -1;
		events++;
		continue;
drop:
		close(p->fd);
		p->fd = -1;
	}
	return events;
}

static int tcp_connect_step(struct tcp_ctx *x, struct tcp_comm *c)
{
	const struct cfg_peer *pp = &x->cfg->peers[c->peer];

	if (c->state == CS_IDLE) {
		if (zb_now_ns() < c->retry_at_ns)
			return -EAGAIN;
		struct sockaddr_in sa = {.sin_family = AF_INET,
					 .sin_port = htons(x->cfg->transport.tcp_port),
					 .sin_addr.s_addr = pp->ip};
		c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (c->fd < 0)
			return -errno;
		int rc = tcp_sock_setup(x, c->fd);
		if (rc < 0) {
			tcp_comm_reset(c);
			return rc;
		}
		if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			c->state = CS_HELLO;
		else if (errno == EINPROGRESS)
			c->state = CS_CONNECTING;
		else
			goto retry;
	}
	if (c->state == CS_CONNECTING) {
		struct pollfd p = {.fd = c->fd, .events = POLLOUT};
		int err = 0;
		socklen_t len = sizeof(err);
		if (poll(&p, 1, 0) <= 0)
			return -EAGAIN;
		if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err)
			goto retry;
		c->state = CS_HELLO;
	}
	if (c->state == CS_HELLO) {
		ssize_t n = send(c->fd, (char *)&c->hello + c->hello_off,
				 sizeof(c->hello) - c->hello_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return -EAGAIN;
		if (n < 0)
			goto retry;
		c->hello_off += (size_t)n;
		if (c->hello_off < sizeof(c->hello))
			return -EAGAIN;
		c->state = CS_ACK;
	}
	if (c->state == CS_ACK) {
		/* the listener read the hello and took the connection; until
		 * then it may be stopped, wedged or about to refuse it (EOF) */
		ssize_t n = recv(c->fd, (char *)&c->ack + c->ack_off,
				 sizeof(c->ack) - c->ack_off, MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK ||
			      errno == EINTR))
			return -EAGAIN;
		if (n <= 0)
			goto retry;
		c->ack_off += (size_t)n;
		if (c->ack_off < sizeof(c->ack))
			return -EAGAIN;
		if (le32toh(c->ack.magic) != TCP_MAGIC_ACK ||
		    le16toh(c->ack.version) != TCP_VERSION ||
		    le16toh(c->ack.node) != c->peer)
			goto retry;     /* not the node we meant at that address */
		c->state = CS_OPEN;
	}
	return c->state == CS_OPEN ? 0 : -EAGAIN;
retry:
	/* Refused / unreachable: the peer is not up yet. Try again shortly;
	 * the caller owns the overall deadline. */
	close(c->fd);
	c->fd = -1;
	c->state = CS_IDLE;
	c->hello_off = 0;
	c->ack_off = 0;
	c->retry_at_ns = zb_now_ns() + TCP_RETRY_NS;
	return -EAGAIN;
}

/* ---- net_ops ----------------------------------------------------------------- */

static void tcp_fini(void *ctx);

static int tcp_init(const struct net_init_args *a, void **ctx)
{
	ZB_ASSERT(a != NULL && a->cfg != NULL && ctx != NULL);
	const struct zb_config *cfg = a->cfg;
	uint16_t ch = a->channels ? a->channels : 1;
	struct tcp_ctx *x;
	int rc, one = 1;

	if (cfg->node.id >= CFG_MAX_NODES)
		return -EINVAL;
	x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	x->cfg = cfg;
	x->self = cfg->node.id;
	x->channels = ch;
	x->cluster = cfg->cluster.id;
	x->lfd = -1;
	for (unsigned i = 0; i < TCP_PENDING_MAX; i++)
		x->pend[i].fd = -1;
	x->send = calloc((size_t)CFG_MAX_NODES * ch, sizeof(*x->send));
	x->recv = calloc((size_t)CFG_MAX_NODES * ch, sizeof(*x->recv));
	x->pfd_cap = 1 + TCP_PENDING_MAX + 2 * (size_t)CFG_MAX_NODES * ch;
	x->pfd = calloc(x->pfd_cap, sizeof(*x->pfd));
	rc = -ENOMEM;
	if (!x->send || !x->recv || !x->pfd)
		goto fail;
	for (uint16_t p = 0; p < CFG_MAX_NODES; p++)
		for (uint16_t c = 0; c < ch; c++) {
			struct tcp_comm *s = tcp_comm_at(x, true, p, c);
			struct tcp_comm *r = tcp_comm_at(x, false, p, c);
			s->fd = r->fd = -1;
			tcp_comm_reset(s);
			tcp_comm_reset(r);
			s->ctx = r->ctx = x;
			s->is_send = true;
			s->peer = r->peer = p;
			s->channel = r->channel = c;
			s->hello = (struct tcp_hello){
				.magic = htole32(TCP_MAGIC_HELLO),
				.version = htole16(TCP_VERSION),
				.src = htole16(x->self), .channel = htole16(c),
				.dst = htole16(p), .cluster = htole32(x->cluster)};
		}

	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons(cfg->transport.tcp_port)};
	sa.sin_addr.s_addr = cfg->peers[x->self].present
				     ? cfg->peers[x->self].ip : htonl(INADDR_ANY);
	x->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (x->lfd < 0) {
		rc = -errno;
		goto fail;
	}
	(void)setsockopt(x->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	tcp_cc_choose(x);
	if (bind(x->lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(x->lfd, 256) < 0) {
		rc = -errno;
		goto fail;
	}
	*ctx = x;
	return 0;
fail:
	tcp_fini(x);
	return rc;
}

static void tcp_fini(void *ctx)
{
	struct tcp_ctx *x = ctx;

	if (!x)
		return;
	if (x->send && x->recv)
		for (size_t i = 0; i < (size_t)CFG_MAX_NODES * x->channels; i++) {
			if (x->send[i].fd >= 0)
				close(x->send[i].fd);
			if (x->recv[i].fd >= 0)
				close(x->recv[i].fd);
		}
	for (unsigned i = 0; i < TCP_PENDING_MAX; i++)
		if (x->pend[i].fd >= 0)
			close(x->pend[i].fd);
	if (x->lfd >= 0)
		close(x->lfd);
	free(x->send);
	free(x->recv);
	free(x->pfd);
	free(x);
}

static int tcp_progress(void *ctx)
{
	struct tcp_ctx *x = ctx;
	int events;

	ZB_DASSERT(x != NULL);
	events = tcp_accept_progress(x);
	for (size_t i = 0; i < (size_t)CFG_MAX_NODES * x->channels; i++) {
		events += tcp_comm_progress(&x->send[i]);
		events += tcp_comm_progress(&x->recv[i]);
	}
	return events;
}

/* The comm of (peer, ch) in one direction, if the caller may have it:
 * -EINVAL for no such peer or channel, -EBUSY when already handed out. */
static int tcp_comm_get(struct tcp_ctx *x, bool send, uint16_t peer,
			uint16_t ch, struct tcp_comm **out)
{
	if (peer >= CFG_MAX_NODES || ch >= x->channels || peer == x->self ||
	    !x->cfg->peers[peer].present)
		return -EINVAL;
	*out = tcp_comm_at(x, send, peer, ch);
	return (*out)->handed_out ? -EBUSY : 0;
}

static int tcp_connect(void *ctx, uint16_t peer, uint16_t ch, void **comm)
{
	struct tcp_ctx *x = ctx;
	struct tcp_comm *c;

	ZB_ASSERT(x != NULL && comm != NULL);
	int rc = tcp_comm_get(x, true, peer, ch, &c);
	if (rc)
		return rc;
	rc = tcp_connect_step(x, c);
	if (rc == 0) {
		c->handed_out = true;
		*comm = c;
	}
	return rc;
}

static int tcp_accept(void *ctx, uint16_t peer, uint16_t ch, void **comm)
{
	struct tcp_ctx *x = ctx;
	struct tcp_comm *c;

	ZB_ASSERT(x != NULL && comm != NULL);
	int rc = tcp_comm_get(x, false, peer, ch, &c);
	if (rc)
		return rc;
	tcp_accept_progress(x);
	if (c->state != CS_OPEN)
		return -EAGAIN;
	/* closed by the peer before it was wanted (it gave up on it): a
	 * comm that could only fail; its next connection will come */
	char b;
	ssize_t n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
		tcp_comm_reset(c);
		return -EAGAIN;
	}
	c->handed_out = true;
	*comm = c;
	return 0;
}

static int tcp_reg_mr(void *comm, void *data, size_t size,
		      enum net_mem_type type, void **mhandle)
{
	(void)data;
	(void)size;
	ZB_ASSERT(comm != NULL && mhandle != NULL);
	if (type != NET_MEM_HOST)
		return ZB_ERR_UNSUPPORTED;   /* kernel sockets: host memory only */
	*mhandle = (void *)&tcp_host_mr_token;
	return 0;
}

static int tcp_dereg_mr(void *comm, void *mhandle)
{
	ZB_ASSERT(comm != NULL);
	return mhandle == &tcp_host_mr_token ? 0 : -EINVAL;
}

static int tcp_post(struct tcp_comm *c, bool send, void *data, size_t size,
		    uint32_t tag, void **request)
{
	ZB_DASSERT(c != NULL && request != NULL);
	if (ZB_UNLIKELY(c->is_send != send || !c->handed_out))
		return -EINVAL;
	if (ZB_UNLIKELY(c->state == CS_DEAD))
		return c->err;
	if (ZB_UNLIKELY(size && !data))
		return -EINVAL;
	struct tcp_req *r = &c->reqs[c->tail & (TCP_REQS - 1)];
	if (r->state != REQ_FREE)
		return -EAGAIN;
	r->state = REQ_PENDING;
	r->err = 0;
	r->data = data;
	r->size = size;
	r->msg_size = 0;
	r->off = 0;
	r->tag = tag;
	if (send)
		r->hdr = (struct tcp_hdr){.magic = htole32(TCP_MAGIC_MSG),
					  .tag = htole32(tag),
					  .size = htole64((uint64_t)size)};
	c->tail++;
	*request = r;
	/* Eager: start moving bytes now, the caller may not test for a while. */
	(void)tcp_comm_progress(c);
	return 0;
}

static int tcp_isend(void *comm, const void *data, size_t size, uint32_t tag,
		     void *mhandle, void **request)
{
	(void)mhandle;
	return tcp_post(comm, true, (void *)data, size, tag, request);
}

static int tcp_irecv(void *comm, void *data, size_t size, uint32_t tag,
		     void *mhandle, void **request)
{
	(void)mhandle;
	return tcp_post(comm, false, data, size, tag, request);
}

static int tcp_test(void *request, int *done, size_t *size)
{
	struct tcp_req *r = request;
	int err;

	ZB_DASSERT(r != NULL && done != NULL);
	if (r->state == REQ_PENDING)
		(void)tcp_comm_progress(r->comm);
	switch (r->state) {
	case REQ_DONE:
		*done = 1;
		if (size)
			*size = r->comm->is_send ? r->size : r->msg_size;
		r->state = REQ_FREE;
		return 0;
	case REQ_ERROR:
		*done = 1;
		err = r->err;
		r->state = REQ_FREE;
		return err;
	default:
		ZB_DASSERT(r->state == REQ_PENDING);
		*done = 0;
		return 0;
	}
}

static void tcp_close(struct tcp_comm *c)
{
	ZB_ASSERT(c != NULL && c->ctx != NULL);
	tcp_comm_reset(c);
}

static void tcp_close_send(void *comm) { tcp_close(comm); }
static void tcp_close_recv(void *comm) { tcp_close(comm); }

static void tcp_pfd_add(struct tcp_ctx *x, size_t *n, int fd, short ev)
{
	ZB_DASSERT(*n < x->pfd_cap);
	x->pfd[*n].fd = fd;
	x->pfd[*n].events = ev;
	x->pfd[*n].revents = 0;
	(*n)++;
}

static int tcp_wait(void *ctx, int timeout_ms)
{
	struct tcp_ctx *x = ctx;
	size_t n = 0;

	ZB_ASSERT(x != NULL && timeout_ms >= 0);
	tcp_pfd_add(x, &n, x->lfd, POLLIN);
	for (unsigned i = 0; i < TCP_PENDING_MAX; i++)   /* hellos to read */
		if (x->pend[i].fd >= 0 && x->pend[i].off < sizeof(x->pend[i].hello))
			tcp_pfd_add(x, &n, x->pend[i].fd, POLLIN);
	for (size_t i = 0; i < (size_t)CFG_MAX_NODES * x->channels; i++) {
		struct tcp_comm *s = &x->send[i], *r = &x->recv[i];
		if (s->state == CS_CONNECTING ||
		    (s->state == CS_OPEN && s->head != s->tail))
			tcp_pfd_add(x, &n, s->fd, POLLOUT);
		else if (s->state == CS_ACK)
			tcp_pfd_add(x, &n, s->fd, POLLIN);
		if (r->state == CS_OPEN && r->head != r->tail)
			tcp_pfd_add(x, &n, r->fd, POLLIN);
	}
	int rc = poll(x->pfd, n, timeout_ms);
	return rc < 0 ? (errno == EINTR ? 0 : -errno) : rc;
}

const struct net_ops net_tcp_ops = {
	.version = NET_OPS_VERSION,
	.name = "tcp",
	.init = tcp_init,
	.fini = tcp_fini,
	.progress = tcp_progress,
	.connect = tcp_connect,
	.accept = tcp_accept,
	.reg_mr = tcp_reg_mr,
	.dereg_mr = tcp_dereg_mr,
	.isend = tcp_isend,
	.irecv = tcp_irecv,
	.test = tcp_test,
	.close_send = tcp_close_send,
	.close_recv = tcp_close_recv,
	.wait = tcp_wait,
};
