/* The bootstrap blob exchange over real TCP on 127.0.0.1: delivery,
 * retry until the peer listens, several frames per connection, bad frames
 * and bad blobs rejected and counted, the receiver's verdict at the sender
 * (a refused blob is not "sent"; one refused for now is sent again; each
 * blob taken is reported to the sender's provider), prompt stop. */
#include "../../rdma/internal.h"
#include "tap.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static uint8_t last[RDMA_CONN_BLOB_LEN];
static int got;

/* What the provider does: decode strictly, refuse what is not valid. */
static int deliver(void *arg, const void *blob, size_t len)
{
	struct rdma_conn c;
	/* arg: a count of "not now" answers to give first (-EAGAIN, as a
	 * provider whose comm is being replaced) */
	if (arg) {
		_Atomic int *later = arg;
		if (atomic_fetch_sub(later, 1) > 0)
			return -EAGAIN;
	}
	if (rdma__conn_decode(blob, len, &c, NULL, 0))
		return ZB_ERR_BAD_FRAME;
	pthread_mutex_lock(&mu);
	memcpy(last, blob, len);
	got++;
	pthread_mutex_unlock(&mu);
	return 0;
}

/* What the provider hears of the blobs it sent: taken (status 0), refused
 * (-EBADMSG), anything else. */
static uint8_t last_acked[RDMA_CONN_BLOB_LEN], last_refused[RDMA_CONN_BLOB_LEN];
static int nacked, nrefused, nother;

static void acked(void *arg, const void *blob, size_t len, int status)
{
	(void)arg;
	pthread_mutex_lock(&mu);
	if (status == 0 && len == RDMA_CONN_BLOB_LEN)
		memcpy(last_acked, blob, len);
	if (status == -EBADMSG && len == RDMA_CONN_BLOB_LEN)
		memcpy(last_refused, blob, len);
	*(status == 0 ? &nacked : status == -EBADMSG ? &nrefused : &nother) += 1;
	pthread_mutex_unlock(&mu);
}

static int wait_got(int want, int ms)
{
	for (int i = 0; i < ms; i++) {
		pthread_mutex_lock(&mu);
		int g = got;
		pthread_mutex_unlock(&mu);
		if (g >= want)
			return g;
		usleep(1000);
	}
	return got;
}

static void make_blob(uint8_t *b, uint32_t qpn)
{
	struct rdma_conn c = {.side = RDMA_SIDE_SEND, .flags = RDMA_CONN_F_GLOBAL, .mtu = 3,
			      .cluster = 7, .src_node = 1, .dst_node = 2, .qpn = qpn, .psn = 5,
			      .slots = 16, .eager_max = 4096, .rkey = 9, .addr = 0x1000,
			      .gid = {0xfe, 0x80, [15] = 2}};
	rdma__conn_encode(&c, b, RDMA_CONN_BLOB_LEN);
}

static int raw_send(uint16_t port, const void *p, size_t n)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM, 0), rc = -1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && send(fd, p, n, 0) == (ssize_t)n)
		rc = 0;
	usleep(50000);
	close(fd);
	return rc;
}

int main(void)
{
	struct rdma_boot *a, *b, *c, *e;
	_Atomic int later = 3;
	uint8_t blob[RDMA_CONN_BLOB_LEN], frames[3 * (RDMA_CONN_BLOB_LEN + 2)];
	uint32_t lo = htonl(INADDR_LOOPBACK), d, r, s, x, f;
	uint16_t pb, pc;
	uint64_t t0;

	tap_plan(17);
	ok(rdma__boot_start(&a, lo, 0, deliver, acked, NULL) == 0 &&
	   rdma__boot_start(&b, lo, 0, deliver, NULL, NULL) == 0,
	   "two bootstrap listeners on 127.0.0.1");
	pb = rdma__boot_port(b);
	make_blob(blob, 0x111);
	is_int(rdma__boot_send(a, lo, pb, blob, sizeof(blob)), 0, "blob queued");
	ok(wait_got(1, 2000) == 1 && memcmp(last, blob, sizeof(blob)) == 0, "delivered intact to the peer");

	/* Retry: nobody listens on pc yet; a listener appears 300 ms later. */
	rdma__boot_start(&c, lo, 0, deliver, NULL, NULL);
	pc = rdma__boot_port(c);
	rdma__boot_stop(c);
	make_blob(blob, 0x222);
	rdma__boot_send(a, lo, pc, blob, sizeof(blob));
	usleep(300000);
	ok(rdma__boot_start(&c, lo, pc, deliver, NULL, NULL) == 0, "listener comes up late on the same port");
	ok(wait_got(2, 3000) == 2 && memcmp(last, blob, sizeof(blob)) == 0, "the queued blob arrives after retries");

	/* Three frames in one connection. */
	for (int i = 0; i < 3; i++) {
		uint8_t *f = frames + i * (RDMA_CONN_BLOB_LEN + 2);
		f[0] = RDMA_CONN_BLOB_LEN;
		f[1] = 0;
		make_blob(f + 2, 0x300 + (uint32_t)i);
	}
	raw_send(pb, frames, sizeof(frames));
	ok(wait_got(5, 2000) == 5, "three frames on one connection: three deliveries");

	/* Garbage: oversize length, then a frame whose blob is corrupt. */
	uint8_t junk[2] = {0xff, 0xff};
	raw_send(pb, junk, 2);
	frames[10] ^= 0x55;
	raw_send(pb, frames, RDMA_CONN_BLOB_LEN + 2);
	usleep(100000);
	rdma__boot_stats(b, &d, &r, &s, &x, &f);
	ok(d == 4 && r == 2, "bad length and corrupt blob rejected and counted (delivered %u, rejected %u)", d, r);
	is_int(wait_got(5, 10), 5, "nothing bad reached the provider");
	rdma__boot_stats(a, &d, &r, &s, &x, &f);
	ok(s == 2 && x == 0 && f == 0, "sender: 2 sent, none dropped or refused");

	/* the receiver's verdict: a blob its provider refuses is counted so
	 * at the sender, not as sent (frames[2..] is the corrupt blob) */
	rdma__boot_send(a, lo, pb, frames + 2, RDMA_CONN_BLOB_LEN);
	for (int i = 0; i < 200; i++) {
		rdma__boot_stats(a, &d, &r, &s, &x, &f);
		if (f + s + x > 2)
			break;
		usleep(10000);
	}
	ok(f == 1 && s == 2 && x == 0, "a blob the peer refuses: refused 1, not sent (sent %u, "
	   "refused %u, dropped %u)", s, f, x);
	/* "not now" three times, then taken: the sender tries again */
	ok(rdma__boot_start(&e, lo, 0, deliver, NULL, &later) == 0, "a listener that says \"later\" 3 times");
	make_blob(blob, 0x444);
	rdma__boot_send(a, lo, rdma__boot_port(e), blob, sizeof(blob));
	ok(wait_got(6, 3000) == 6 && memcmp(last, blob, sizeof(blob)) == 0 && later < 0,
	   "sent again until taken: delivered after 3 refusals for now");
	/* the receiver delivered it; the sender counts it when the peer's
	 * answer reaches it, a moment later (up to 2 s) */
	for (int i = 0; i < 200; i++) {
		rdma__boot_stats(a, &d, &r, &s, &x, &f);
		pthread_mutex_lock(&mu);
		int acked = nacked;
		pthread_mutex_unlock(&mu);
		if (s >= 3 && acked >= 3)
			break;
		usleep(10000);
	}
	is_int(s, 3, "sender: counted sent once, when taken");
	pthread_mutex_lock(&mu);
	ok(nacked == 3 && memcmp(last_acked, blob, sizeof(blob)) == 0,
	   "the sender's provider heard of each blob the peer took, once, as taken (%d)", nacked);
	ok(nrefused == 1 && nother == 0 &&
	   memcmp(last_refused, frames + 2, RDMA_CONN_BLOB_LEN) == 0,
	   "... and of the refused one, once, as refused (%d; %d other)", nrefused, nother);
	pthread_mutex_unlock(&mu);
	is_int(rdma__boot_send(a, lo, pb, blob, 300), -EINVAL, "oversize blob refused at queueing");

	t0 = zb_now_ns();
	rdma__boot_stop(a);
	rdma__boot_stop(b);
	rdma__boot_stop(c);
	rdma__boot_stop(e);
	ok(zb_now_ns() - t0 < 500000000ull, "stop joins the threads promptly (%llu ms)",
	   (unsigned long long)((zb_now_ns() - t0) / 1000000));
	return tap_done();
}
