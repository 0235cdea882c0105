/* The data protocol (xfer.c) end to end over a simulated RC fabric.
 *
 * No RDMA device exists on most build machines, so this test plugs a small
 * software RC "device" into libibverbs' data-path entry points
 * (ibv_post_send / ibv_post_recv / ibv_poll_cq dispatch through
 * context->ops, exactly where a real provider plugs in) and the
 * rdma__modify_qp seam. It implements the RC semantics the provider relies
 * on: in-order execution and completion, completions only for signalled
 * send WRs (errors always), a completion retiring the WRs before it, SQ
 * depth enforced by what has been retired, R_Key checks on RDMA WRITE,
 * receive WQEs consumed by SEND and WRITE WITH IMM, the QP entering ERR on
 * an error and flushing its queues. The real device test is
 * test_loopback.c; this one proves the protocol logic runs everywhere. */
#include "sim_fabric.h"
#include "tap.h"

/* The staging path's copy out of the "GPU" (host memory in this test). */
static int d2h_calls;
static int fake_d2h(struct gpu_ctx *g, void *dst, const void *src, size_t len)
{
	(void)g;
	memcpy(dst, src, len);
	d2h_calls++;
	return 0;
}

int main(void)
{
	static uint8_t sbuf[1u << 20], rbuf[1u << 20];
	uint8_t small[4096];
	void *rq, *sq;
	size_t n = 0;
	int rc;

	tap_plan(50);
	setup(4);
	ok(nstate[0] == 2 && states[0][0] == IBV_QPS_RTR && states[0][1] == IBV_QPS_RTS,
	   "establish walks INIT -> RTR -> RTS");

	/* 1. tiny eager inline */
	is_int(rdma__irecv(&cr, small, sizeof(small), 0, NULL, &rq), 0, "irecv unregistered 4 KiB");
	is_int(post_send("ping", 5, NULL, &sq), 0, "isend 5 bytes once the CTS arrives");
	ok(wait_req(sq, &n) == 0 && n == 5, "send completes (via a flush: signal_every 4)");
	ok(wait_req(rq, &n) == 0 && n == 5 && !strcmp((char *)small, "ping"), "received 'ping'");
	rdma__irecv(&cr, small, 8, 0, NULL, &rq);
	ok(rdma_dp_poll(rdma_cq_source(&ctx, 0), 0) == 1 && cs.cts_seen == 2,
	   "rdma_dp_poll (the lcore poller) handles the CTS completion");
	post_send("x", 2, NULL, &sq);
	ok(wait_req(sq, &n) == 0 && wait_req(rq, &n) == 0 && n == 2, "and the message goes through");

	/* 2. eager from unregistered memory above inline_max: bounce buffer */
	for (int i = 0; i < 3000; i++)
		sbuf[i] = (uint8_t)(i * 13);
	rdma__irecv(&cr, small, sizeof(small), 0, NULL, &rq);
	rc = post_send(sbuf, 3000, NULL, &sq);
	ok(rc == 0 && wait_req(sq, &n) == 0 && wait_req(rq, &n) == 0 && n == 3000 &&
	   !memcmp(small, sbuf, 3000), "3000-byte eager send through the bounce buffer");
	is_int(rdma__isend(&cs, sbuf, 5000, 0, NULL, &sq), -EAGAIN, "no CTS posted: isend says EAGAIN");

	/* 3. large registered: write with imm straight into the buffer */
	struct rdma_mr *smh = host_mr(sbuf, sizeof(sbuf)), *rmh = host_mr(rbuf, sizeof(rbuf));
	for (size_t i = 0; i < sizeof(sbuf); i++)
		sbuf[i] = (uint8_t)(i * 7 + 3);
	is_int(rdma__irecv(&cr, rbuf, 65536, 0, rmh, &rq), 0, "irecv 64 KiB registered");
	is_int(post_send(sbuf, 65536, smh, &sq), 0, "isend 64 KiB registered");
	ok(wait_req(sq, &n) == 0 && wait_req(rq, &n) == 0 && n == 65536 && !memcmp(rbuf, sbuf, 65536),
	   "64 KiB written with immediate, intact");
	is_int(rdma__irecv(&cr, rbuf, 100, 0, NULL, &rq), 0, "short unregistered irecv");
	rc = post_send(sbuf, 50, smh, &sq);
	ok(rc == 0 && wait_req(sq, &n) == 0 && wait_req(rq, &n) == 0 && n == 50,
	   "registered sender, unregistered receiver: eager");

	/* 4. pipeline: 500 messages of varied sizes through 8 slots */
	{
		void *rr[500], *ss[500];
		int pr = 0, ps = 0, dr = 0, ds = 0, bad = 0, spins = 0;
		size_t sz[500];
		memset(rbuf, 0, sizeof(rbuf));
		for (int i = 0; i < 500; i++)
			sz[i] = (size_t)((i * 2654435761u) % 2000) + (i % 3 == 0 ? 0 : 1);
		while ((dr < 500 || ds < 500) && spins++ < 100000) {
			if (pr < 500 && rdma__irecv(&cr, rbuf + pr * 2000u, 2000, 0, rmh, &rr[pr]) == 0)
				pr++;
			if (ps < 500 && rdma__isend(&cs, sbuf + ps * 2000u, sz[ps], 0,
						    ps % 2 ? smh : NULL, &ss[ps]) == 0)
				ps++;
			int d = 0;
			if (ds < ps && rdma__test(ss[ds], &d, &n) == 0 && d)
				ds++;
			d = 0;
			if (dr < pr && rdma__test(rr[dr], &d, &n) == 0 && d) {
				if (n != sz[dr] || memcmp(rbuf + dr * 2000u, sbuf + dr * 2000u, n))
					bad++;
				dr++;
			}
		}
		ok(ds == 500 && dr == 500, "500 messages through an 8-slot window (%d sent, %d received)", ds, dr);
		is_int(bad, 0, "every message has its size and bytes (0-byte ones too)");
		is_int(sqp[0].overflow + sqp[1].overflow, 0, "the send queues never overflowed");
		ok(cs.sq.posted > 500 && cs.sq.retired == cs.sq.posted, "every send WR retired (%llu posted)",
		   (unsigned long long)cs.sq.posted);
	}

	/* 5. protocol guard: receive data out of sequence */
	{
		rdma__irecv(&cr, small, sizeof(small), 0, NULL, &rq);
		sim_inject_recv(&sqp[1], 12345);
		is_int(wait_req(rq, &n), ZB_ERR_BAD_FRAME, "data with a wrong sequence: bad frame");
		ok(had_event(RDMA_EV_PROTOCOL, -1) && atomic_load(&cr.state) == RDMA_COMM_FAILED,
		   "protocol event; the comm is out of service");
		is_int(rdma__irecv(&cr, small, 10, 0, NULL, &rq), ZB_ERR_BAD_FRAME, "a failed comm refuses new work");
		ok(sqp[1].error && states[1][nstate[1] - 1] == IBV_QPS_ERR, "its QP was moved to ERR");
	}
	teardown();

	/* 6. oversize: sender refuses and aborts, receiver fails the same way */
	setup(1);
	rdma__irecv(&cr, small, 100, 0, NULL, &rq);
	is_int(post_send(sbuf, 200, NULL, &sq), -EMSGSIZE, "200 bytes into a 100-byte receive: EMSGSIZE");
	is_int(wait_req(rq, &n), -EMSGSIZE, "receiver hears the abort: EMSGSIZE, no hang");
	ok(!sqp[0].error, "the aborting sender kept its QP up so the abort could leave");
	teardown();

	/* 6b. a send failed with its WR still queued (the receiver's queue in
	 * RNR): the sender's QP goes to ERR so the NIC never reads a buffer
	 * its caller was told to reuse; before, the abort kept the QP up and
	 * the receiver took the bytes written after the failure as the
	 * message */
	setup(4);
	smh = host_mr(sbuf, sizeof(sbuf));
	rmh = host_mr(rbuf, sizeof(rbuf));
	memset(sbuf, 'A', 32768);
	void *rqa, *rqb, *sqa, *sqb;
	rc = rdma__irecv(&cr, rbuf, 32768, 1, rmh, &rqa);
	rc |= rdma__irecv(&cr, rbuf + 32768, 32768, 2, rmh, &rqb);
	rdma__poll_channel(&cqs[0]);
	unsigned rq_head = sqp[1].rq_head;
	sqp[1].rq_head = sqp[1].rq_tail;   /* no receive WQE free: RNR */
	rc |= rdma__isend(&cs, sbuf, 32768, 1, smh, &sqa);
	int bad_tag = rdma__isend(&cs, sbuf + 32768, 100, 99, smh, &sqb);
	int done = 0;
	int rca = rdma__test(sqa, &done, &n);
	ok(rc == 0 && bad_tag < 0 && done && rca < 0,
	   "a send behind a refused one (wrong tag) is failed (%d, %d)", bad_tag, rca);
	ok(sqp[0].error && states[0][nstate[0] - 1] == IBV_QPS_ERR,
	   "its WR was still queued: the sender's QP went to ERR");
	memset(sbuf, 'Z', 32768);          /* reused, as net.h allows */
	sqp[1].rq_head = rq_head;
	sim_run();
	done = 0;
	rca = rdma__test(rqa, &done, &n);
	ok(!(done && rca == 0) && rbuf[0] != 'Z',
	   "the receiver never completes it with the reused buffer's bytes (done %d rc %d '%c')",
	   done, rca, rbuf[0] ? rbuf[0] : '0');
	teardown();

	/* 7. bad rkey: the receiver's buffer is deregistered before the write */
	setup(4);
	smh = host_mr(sbuf, sizeof(sbuf));
	rmh = host_mr(rbuf, sizeof(rbuf));
	rdma__irecv(&cr, rbuf, 65536, 0, rmh, &rq);
	sim_dereg(rmh->mr->rkey);
	rc = post_send(sbuf, 65536, smh, &sq);
	is_int(rc == 0 ? wait_req(sq, &n) : rc, -EACCES, "write to a dead rkey: EACCES");
	ok(had_event(RDMA_EV_WC_ERROR, IBV_WC_REM_ACCESS_ERR), "event carries REM_ACCESS_ERR");
	{
		const char *msg = "";
		for (int i = 0; i < nev; i++)
			if (evs[i].wc_status == IBV_WC_REM_ACCESS_ERR)
				msg = evs[i].msg;
		ok(strstr(msg, ibv_wc_status_str(IBV_WC_REM_ACCESS_ERR)) != NULL && evs[0].side,
		   "event text from ibv_wc_status_str: %s", msg);
	}
	is_int(wait_req(rq, &n), -ECANCELED, "the receiver's request is flushed: ECANCELED, no hang");
	teardown();

	/* 8. tag mismatch: both sides fail with BAD_FRAME (net.h) */
	setup(4);
	rdma__irecv(&cr, small, 100, 5, NULL, &rq);
	is_int(post_send(sbuf, 10, NULL, &sq), ZB_ERR_BAD_FRAME, "isend tag 0 against irecv tag 5: bad frame");
	is_int(wait_req(rq, &n), ZB_ERR_BAD_FRAME, "the irecv fails with bad frame too");
	teardown();

	/* 9. close: the peer's pending receive fails with PEER_DOWN at once */
	setup(4);
	rdma__irecv(&cr, small, 100, 0, NULL, &rq);
	rdma__comm_close_notify(&cs);
	is_int(wait_req(rq, &n), ZB_ERR_PEER_DOWN, "sender closed: pending irecv fails with PEER_DOWN");
	ok(had_event(RDMA_EV_PEER_CLOSED, -1) && cs.sq.retired == cs.sq.posted,
	   "peer-closed event; the abort left before close returned");
	teardown();

	/* 10. blob delivery on live comms: the same again is a no-op; a new one
	 * (the peer re-created its end) fails the old comm at once */
	setup(4);
	{
		uint8_t blob[RDMA_CONN_BLOB_LEN];
		rdma__irecv(&cr, small, 100, 0, NULL, &rq);
		rdma__conn_encode(&cs.local, blob, sizeof(blob));
		is_int(rdma_conn_deliver(&ctx, blob, sizeof(blob)), 0, "same blob again: accepted, no effect");
		ok(atomic_load(&cr.fail_err) == 0 && nev == 0, "the live comm is untouched");
		struct rdma_conn again = cs.local;
		again.qpn = 0x99;
		rdma__conn_encode(&again, blob, sizeof(blob));
		/* another member sending it in the peer's name (the control
		 * plane vouches for the sender, not for the blob's src_node) */
		is_int(rdma_conn_deliver_from(&ctx, (uint16_t)(again.src_node + 1), blob, sizeof(blob)),
		       -EPERM, "a blob naming another node as its source: refused");
		ok(atomic_load(&cr.fail_err) == 0 && nev == 0 && !ctx.stash[cr.index].valid &&
		   atomic_load(&ctx.blobs_spoofed) == 1, "... counted; the live comm is untouched");
		is_int(rdma_conn_deliver_from(&ctx, again.src_node, blob, sizeof(blob)), 0,
		       "new blob from the peer accepted");
		is_int(wait_req(rq, &n), ZB_ERR_PEER_DOWN, "the old comm's pending irecv fails: PEER_DOWN");
		ok(had_event(RDMA_EV_PEER_CLOSED, -1) && ctx.stash[cr.index].valid &&
		   ctx.stash[cr.index].conn.qpn == 0x99, "peer-closed event; blob kept for the next comm");
		blob[30] ^= 1;
		is_int(rdma_conn_deliver(&ctx, blob, sizeof(blob)), ZB_ERR_BAD_FRAME, "a corrupted blob: bad frame");
	}
	teardown();

	/* 12. GPU memory as the send buffer. Peer memory (the NIC reads it
	 * itself): small sends go eager to an unregistered receiver and by
	 * write to a registered one, never inline (the CPU would copy from a
	 * device pointer); until 2026-11-27 eager from it was refused and a
	 * small write from it was inline. Staging: the message is copied out
	 * of the GPU first and sent from the copy. */
	setup(4);
	{
		static uint8_t dev[4096], stage[4096], dst[4096];
		struct rdma_mr *pm = host_mr(dev, sizeof(dev));
		pm->type = NET_MEM_GPU;
		pm->path = RDMA_REG_PEERMEM;
		sim_dev_lo = (uintptr_t)dev;
		sim_dev_hi = (uintptr_t)dev + sizeof(dev);
		sim_inline_dev = 0;
		for (int i = 0; i < 4096; i++)
			dev[i] = (uint8_t)(i * 3 + 1);
		struct rdma_mr *dm = host_mr(dst, sizeof(dst));
		rdma__irecv(&cr, dst, sizeof(dst), 0, dm, &rq);
		rc = post_send(dev + 100, 40, pm, &sq);
		ok(rc == 0 && wait_req(sq, &n) == 0 && wait_req(rq, &n) == 0 && n == 40 &&
		   !memcmp(dst, dev + 100, 40), "peer-memory sender, registered receiver: 40 bytes (rc %d)",
		   rc);
		is_int(sim_inline_dev, 0, "... not inline: the CPU never copies from GPU memory");
		rdma__irecv(&cr, small, sizeof(small), 0, NULL, &rq);
		rc = post_send(dev, 50, pm, &sq);
		ok(rc == 0 && wait_req(sq, &n) == 0 && wait_req(rq, &n) == 0 && n == 50 &&
		   !memcmp(small, dev, 50) && sim_inline_dev == 0,
		   "peer-memory sender, unregistered receiver: 50 bytes eager, not inline (rc %d)", rc);
		sim_dev_lo = sim_dev_hi = 0;

		struct rdma_mr *sm = host_mr(stage, sizeof(stage));
		sm->type = NET_MEM_GPU;
		sm->path = RDMA_REG_STAGING;
		sm->addr = dev;          /* the "device" range; its copy is stage[] */
		sm->staging = stage;
		ctx.gpu.gctx = (struct gpu_ctx *)(uintptr_t)1;   /* never dereferenced here */
		ctx.gpu.copy_d2h = fake_d2h;
		ctx.gpu.copy_h2d = fake_d2h;   /* a plain copy either way */
		pthread_mutex_init(&ctx.gpu.copy_lock, NULL);
		memset(stage, 0, sizeof(stage));
		rdma__irecv(&cr, small, sizeof(small), 0, NULL, &rq);
		rc = post_send(dev + 7, 60, sm, &sq);
		ok(rc == 0 && wait_req(sq, &n) == 0 && wait_req(rq, &n) == 0 && n == 60 &&
		   !memcmp(small, dev + 7, 60) && d2h_calls == 1,
		   "staged sender, unregistered receiver: copied out once, sent eager (rc %d, %d copies)",
		   rc, d2h_calls);
		memset(&ctx.gpu, 0, sizeof(ctx.gpu));
	}
	teardown();

	/* 11. async failure (what rdma_poll_async stores) reaches the owner */
	setup(4);
	rdma__irecv(&cr, small, 100, 0, NULL, &rq);
	atomic_store(&cr.fail_err, ZB_ERR_PEER_DOWN);
	is_int(wait_req(rq, &n), ZB_ERR_PEER_DOWN, "port-down error fails the pending receive");
	ok(sqp[1].error, "and takes the QP out of service");
	teardown();
	return tap_done();
}
