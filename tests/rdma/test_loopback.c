/* Device test: a loopback RC connection (node 0 to itself) through the
 * provider: blob exchange, eager/inline sends, unregistered eager, large
 * RDMA WRITE WITH IMM, a pipeline past the credit window, an oversize
 * message and a bad rkey, each failing cleanly. Skips without a device. */
#include "../../rdma/internal.h"
#include "rdma_test.h"
#include "tap.h"

static const struct net_ops *o = &rdma_net_ops;
static struct rdma_event events[16];
static int nevents;

static void on_event(void *arg, const struct rdma_event *ev)
{
	(void)arg;
	if (nevents < 16)
		events[nevents++] = *ev;
	tap_diag("event %d: %s", ev->kind, ev->msg);
}

static bool have_event(enum rdma_event_kind k, int wc_status)
{
	for (int i = 0; i < nevents; i++)
		if (events[i].kind == k && (wc_status < 0 || events[i].wc_status == wc_status))
			return true;
	return false;
}

/* Exchange blobs with ourselves and open both comms. */
static int pair(void *ctx, void **s, void **r)
{
	uint8_t sb[RDMA_CONN_BLOB_LEN], rb[RDMA_CONN_BLOB_LEN];
	uint64_t end = zb_now_ns() + 2000000000ull;
	int rc;

	if (rdma_conn_local(ctx, 0, 0, RDMA_SIDE_SEND, sb, sizeof(sb)) != RDMA_CONN_BLOB_LEN ||
	    rdma_conn_local(ctx, 0, 0, RDMA_SIDE_RECV, rb, sizeof(rb)) != RDMA_CONN_BLOB_LEN)
		return -1;
	if (rdma_conn_deliver(ctx, sb, sizeof(sb)) || rdma_conn_deliver(ctx, rb, sizeof(rb)))
		return -2;
	do {
		rc = o->connect(ctx, 0, 0, s);
	} while (rc == -EAGAIN && zb_now_ns() < end);
	if (rc)
		return rc;
	do {
		rc = o->accept(ctx, 0, 0, r);
	} while (rc == -EAGAIN && zb_now_ns() < end);
	return rc;
}

/* Post (retrying -EAGAIN while driving progress), bounded. */
static int post(void *ctx, bool send, void *comm, void *buf, size_t n, void *mh, void **req)
{
	uint64_t end = zb_now_ns() + 2000000000ull;
	int rc;

	do {
		rc = send ? o->isend(comm, buf, n, 1, mh, req) : o->irecv(comm, buf, n, 1, mh, req);
		if (rc == -EAGAIN)
			o->progress(ctx);
	} while (rc == -EAGAIN && zb_now_ns() < end);
	return rc;
}

/* Wait for a request, bounded: 0 / size, or its error; -ETIMEDOUT. */
static int wait_req(void *req, size_t *size)
{
	uint64_t end = zb_now_ns() + 2000000000ull;
	int done = 0, rc;

	do {
		rc = o->test(req, &done, size);
	} while (!done && rc == 0 && zb_now_ns() < end);
	return done || rc ? rc : -ETIMEDOUT;
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed * 31 + i * 7);
}

int main(void)
{
	struct zb_config cfg;
	struct rdma_provider_args pa = {.on_event = on_event, .external_exchange = true};
	struct net_init_args args = {.cfg = &cfg, .channels = 1, .provider_arg = &pa};
	struct ibv_device **list;
	void *ctx, *s, *r, *rq, *sq, *smh, *rmh;
	uint8_t small[64], got[4096], *big_s, *big_r;
	uint8_t blob[RDMA_CONN_BLOB_LEN];
	size_t n = 0;
	int ndev = 0, rc;

	errno = 0;
	list = ibv_get_device_list(&ndev);
	if (!list || ndev == 0)
		tap_skip_all("no RDMA device: ibv_get_device_list returned 0 devices%s%s",
			     list ? "" : ": ", list ? "" : strerror(errno ? errno : ENODEV));
	ibv_free_device_list(list);
	rdma_test_config(&cfg);
	rc = o->init(&args, &ctx);
	if (rc == ZB_ERR_UNAVAILABLE)
		tap_skip_all("RDMA device present but unusable: %s", rdma_last_error());

	tap_plan(24);
	is_int(rc, 0, "init on the first device (%s)", rc ? rdma_last_error() : "ok");
	if (rc)
		return tap_done();
	rc = pair(ctx, &s, &r);
	is_int(rc, 0, "loopback pair connected (%s)", rc ? rdma_last_error() : "RTS");

	/* Re-delivery: the same blob is a no-op; one for another node refused. */
	rdma_conn_local(ctx, 0, 0, RDMA_SIDE_SEND, blob, sizeof(blob));
	is_int(rdma_conn_deliver(ctx, blob, sizeof(blob)), 0, "same blob twice: accepted");
	blob[14] = 9;   /* dst node */
	{
		uint32_t crc = rdma__crc32(blob, 68);
		memcpy(blob + 68, &crc, 4);
	}
	is_int(rdma_conn_deliver(ctx, blob, sizeof(blob)), -EINVAL, "blob addressed to node 9 refused");

	/* 1. tiny eager, inline, unregistered buffers */
	memcpy(small, "hello rdma", 11);
	rc = post(ctx, false, r, got, sizeof(got), NULL, &rq);
	is_int(rc, 0, "irecv (unregistered, eager)");
	rc = post(ctx, true, s, small, 11, NULL, &sq);
	is_int(rc, 0, "isend 11 bytes (inline)");
	ok(wait_req(sq, &n) == 0 && n == 11, "send completes (flush-driven: signal_every 4)");
	ok(wait_req(rq, &n) == 0 && n == 11 && memcmp(got, "hello rdma", 11) == 0,
	   "receive: 11 bytes, content intact");

	/* rdma_wait: nothing pending sleeps about the timeout; a completion wakes it */
	{
		for (int i = 0; i < 100 && rdma_wait(ctx, 0) > 0; i++)
			;   /* drain leftovers (batched CTS completions) */
		uint64_t t0 = zb_now_ns();
		int w = rdma_wait(ctx, 50);
		uint64_t ms = (zb_now_ns() - t0) / 1000000;
		ok(w == 0 && ms >= 40 && ms < 1000, "rdma_wait idles for its timeout (%d, %llu ms)", w,
		   (unsigned long long)ms);
	}

	/* 2. eager through the bounce buffer (> inline_max, unregistered) */
	big_s = malloc(8u << 20);
	big_r = malloc(8u << 20);
	fill(big_s, 3000, 1);
	memset(got, 0, sizeof(got));
	post(ctx, false, r, got, sizeof(got), NULL, &rq);
	rc = post(ctx, true, s, big_s, 3000, NULL, &sq);
	ok(rc == 0 && wait_req(sq, &n) == 0 && wait_req(rq, &n) == 0 && n == 3000 &&
	   memcmp(got, big_s, 3000) == 0, "3000-byte eager send from unregistered memory");

	/* 3. large registered: RDMA WRITE WITH IMM */
	is_int(o->reg_mr(s, big_s, 8u << 20, NET_MEM_HOST, &smh), 0, "reg_mr 8 MiB (send)");
	is_int(o->reg_mr(r, big_r, 8u << 20, NET_MEM_HOST, &rmh), 0, "reg_mr 8 MiB (recv)");
	is_str(rdma_mr_path(smh, NULL), "host", "host path reported");
	is_int(o->reg_mr(s, big_s, 4096, NET_MEM_GPU, &sq), ZB_ERR_UNSUPPORTED,
	       "GPU registration without a GPU backend: unsupported");
	fill(big_s, 8u << 20, 2);
	memset(big_r, 0, 8u << 20);
	post(ctx, false, r, big_r, 8u << 20, rmh, &rq);
	rc = post(ctx, true, s, big_s, 8u << 20, smh, &sq);
	ok(rc == 0 && wait_req(sq, &n) == 0 && wait_req(rq, &n) == 0 && n == (8u << 20) &&
	   memcmp(big_r, big_s, 8u << 20) == 0, "8 MiB write-with-imm lands intact");

	/* 4. pipeline: 200 x 32 KiB, more than the 16-slot window */
	{
		void *rr[200], *ss[200];
		int bad = 0, posted_r = 0, posted_s = 0, done_r = 0, done_s = 0;
		uint64_t end = zb_now_ns() + 5000000000ull;
		fill(big_s, 200u * 32768, 3);
		memset(big_r, 0, 200u * 32768);
		while ((done_r < 200 || done_s < 200) && zb_now_ns() < end) {
			if (posted_r < 200 && o->irecv(r, big_r + posted_r * 32768u, 32768, 0, rmh, &rr[posted_r]) == 0)
				posted_r++;
			if (posted_s < 200 && o->isend(s, big_s + posted_s * 32768u, 32768, 0, smh, &ss[posted_s]) == 0)
				posted_s++;
			int d = 0;
			if (done_s < posted_s && o->test(ss[done_s], &d, &n) == 0 && d)
				done_s++;
			d = 0;
			if (done_r < posted_r && o->test(rr[done_r], &d, &n) == 0 && d) {
				if (n != 32768)
					bad++;
				done_r++;
			}
		}
		ok(done_r == 200 && done_s == 200, "200 messages through a 16-slot window (%d/%d)", done_s, done_r);
		ok(bad == 0 && memcmp(big_r, big_s, 200u * 32768) == 0, "pipeline content intact");
	}

	/* 5. oversize: the sender refuses, the receiver hears the abort */
	post(ctx, false, r, big_r, 100, rmh, &rq);
	rc = post(ctx, true, s, big_s, 200, smh, &sq);
	is_int(rc, -EMSGSIZE, "send larger than the posted receive: EMSGSIZE");
	is_int(wait_req(rq, &n), -EMSGSIZE, "the receiver fails with EMSGSIZE (abort), no hang");
	ok(have_event(RDMA_EV_PROTOCOL, -1), "protocol event reported");
	o->close_send(s);
	o->close_recv(r);

	/* 6. bad rkey: the receiver deregisters before the write lands */
	rc = pair(ctx, &s, &r);
	is_int(rc, 0, "new pair after close (%s)", rc ? rdma_last_error() : "RTS");
	{
		void *tmp;
		o->reg_mr(r, big_r, 1u << 20, NET_MEM_HOST, &tmp);
		post(ctx, false, r, big_r, 1u << 20, tmp, &rq);
		o->dereg_mr(r, tmp);
		rc = post(ctx, true, s, big_s, 1u << 20, smh, &sq);
		is_int(rc == 0 ? wait_req(sq, &n) : rc, -EACCES, "write to a deregistered buffer: EACCES");
		ok(have_event(RDMA_EV_WC_ERROR, IBV_WC_REM_ACCESS_ERR), "wc error event with REM_ACCESS_ERR");
		rc = wait_req(rq, &n);
		tap_diag("receiver after the responder error: %d (%s)", rc, zb_strerror(rc));
		ok(rc != 0, "the receiver's request does not succeed");
	}
	/* Memory handles belong to the provider context, not to one comm. */
	o->dereg_mr(s, smh);
	o->dereg_mr(r, rmh);
	o->close_send(s);
	o->close_recv(r);
	o->fini(ctx);
	free(big_s);
	free(big_r);
	return tap_done();
}
