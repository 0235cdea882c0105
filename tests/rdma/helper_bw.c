/* Benchmark helper (make bench-rdma): one-way bandwidth and ping-pong
 * latency of the provider over a loopback RC pair on the first device.
 * Prints one line per size: "size bytes  GB/s  usec". Exit 0 with a note
 * when there is no device. */
#include "../../rdma/internal.h"
#include "rdma_test.h"

#include <stdio.h>

static const struct net_ops *o = &rdma_net_ops;

static int pair(void *ctx, void **s, void **r)
{
	uint8_t b[RDMA_CONN_BLOB_LEN];
	int rc;

	for (int side = RDMA_SIDE_SEND; side <= RDMA_SIDE_RECV; side++) {
		if (rdma_conn_local(ctx, 0, 0, side, b, sizeof(b)) < 0 || rdma_conn_deliver(ctx, b, sizeof(b)))
			return -1;
	}
	while ((rc = o->connect(ctx, 0, 0, s)) == -EAGAIN)
		;
	while (rc == 0 && (rc = o->accept(ctx, 0, 0, r)) == -EAGAIN)
		;
	return rc;
}

static int wait_req(void *req)
{
	int done = 0, rc;
	do
		rc = o->test(req, &done, NULL);
	while (!done && rc == 0);
	return rc;
}

int main(int argc, char **argv)
{
	struct zb_config cfg;
	struct rdma_provider_args pa = {.external_exchange = true};
	struct net_init_args args = {.cfg = &cfg, .channels = 1, .provider_arg = &pa};
	size_t max = 8u << 20;
	void *ctx, *s, *r, *smh, *rmh, *rq[16], *sq[16];
	uint8_t *sb, *rb;
	int n = 0, rc;
	struct ibv_device **list = ibv_get_device_list(&n);

	(void)argc;
	(void)argv;
	if (!list || n == 0) {
		printf("bench-rdma: skipped: no RDMA device (ibv_get_device_list: %s)\n",
		       list ? "0 devices" : strerror(errno));
		return 0;
	}
	ibv_free_device_list(list);
	rdma_test_config(&cfg);
	cfg.rdma.signal_every = 64;
	cfg.rdma.recv_pool = 64;
	if ((rc = o->init(&args, &ctx)) || (rc = pair(ctx, &s, &r))) {
		printf("bench-rdma: setup failed: %s\n", rdma_last_error());
		return 1;
	}
	sb = malloc(max * 16);
	rb = malloc(max * 16);
	memset(sb, 1, max * 16);
	if (o->reg_mr(s, sb, max * 16, NET_MEM_HOST, &smh) || o->reg_mr(r, rb, max * 16, NET_MEM_HOST, &rmh)) {
		printf("bench-rdma: reg_mr: %s\n", rdma_last_error());
		return 1;
	}
	printf("%10s %10s %10s\n", "bytes", "GB/s", "pp_usec");
	for (size_t sz = 8; sz <= max; sz *= 4) {
		int iters = sz >= (1u << 20) ? 200 : 2000;
		uint64_t t0 = zb_now_ns();
		for (int i = 0; i < iters; i += 16) {
			for (int k = 0; k < 16; k++)
				while (o->irecv(r, rb + k * sz, sz, 0, rmh, &rq[k]) == -EAGAIN)
					o->progress(ctx);
			for (int k = 0; k < 16; k++)
				while (o->isend(s, sb + k * sz, sz, 0, smh, &sq[k]) == -EAGAIN)
					o->progress(ctx);
			for (int k = 0; k < 16; k++)
				if (wait_req(sq[k]) || wait_req(rq[k])) {
					printf("bench-rdma: transfer failed: %s\n", rdma_last_error());
					return 1;
				}
		}
		double bw = (double)sz * ((iters + 15) / 16 * 16) / (double)(zb_now_ns() - t0);
		/* latency: one message at a time, send + receive completion */
		t0 = zb_now_ns();
		for (int i = 0; i < 200; i++) {
			o->irecv(r, rb, sz, 0, rmh, &rq[0]);
			while (o->isend(s, sb, sz, 0, smh, &sq[0]) == -EAGAIN)
				o->progress(ctx);
			wait_req(rq[0]);
			wait_req(sq[0]);
		}
		printf("%10zu %10.2f %10.2f\n", sz, bw, (double)(zb_now_ns() - t0) / 200 / 1000.0);
	}
	o->dereg_mr(s, smh);
	o->dereg_mr(r, rmh);
	o->close_send(s);
	o->close_recv(r);
	o->fini(ctx);
	free(sb);
	free(rb);
	return 0;
}
