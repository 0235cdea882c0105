/* Request table bookkeeping and send-queue completion batching, checked
 * directly and against a reference model under random operations. */
#include "../../rdma/internal.h"
#include "tap.h"

static uint64_t rng = 0x243F6A8885A308D3ull;
static uint32_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)rng;
}

static void table_basics(void)
{
	struct rdma_req mem[4];
	struct rdma_reqtab t;
	struct rdma_req *r[6];

	rdma__reqtab_init(&t, mem, 4);
	for (int i = 0; i < 4; i++)
		r[i] = rdma__reqtab_alloc(&t);
	ok(r[0] && r[1] && r[2] && r[3] && r[0]->seq == 0 && r[3]->seq == 3,
	   "four requests handed out in sequence");
	ok(rdma__reqtab_alloc(&t) == NULL, "fifth refused while four are outstanding");
	is_int(rdma__reqtab_outstanding(&t), 4, "outstanding = 4");
	ok(rdma__reqtab_get(&t, 2) == r[2] && rdma__reqtab_get(&t, 4) == NULL,
	   "lookup by seq; future seq not found");
	ok(rdma__reqtab_get31(&t, 0, 3) == r[3], "lookup by 31-bit sequence");
	/* Release out of order: the slot of seq 1 must not be reused while 0
	 * is still outstanding. */
	rdma__reqtab_complete(r[1], 10);
	rdma__reqtab_release(&t, r[1]);
	ok(rdma__reqtab_alloc(&t) == NULL, "out-of-order release frees no slot while older is held");
	ok(rdma__reqtab_get(&t, 1) == NULL, "released request no longer found");
	rdma__reqtab_complete(r[0], 5);
	rdma__reqtab_release(&t, r[0]);
	is_int(rdma__reqtab_outstanding(&t), 2, "releasing the oldest frees both slots");
	r[4] = rdma__reqtab_alloc(&t);
	r[5] = rdma__reqtab_alloc(&t);
	ok(r[4] && r[5] && r[4]->seq == 4 && r[5]->seq == 5 && r[4] == &mem[0],
	   "slots reused with new sequence numbers");
	ok(rdma__reqtab_get(&t, 0) == NULL, "stale seq 0 not confused with seq 4 (same slot)");
	rdma__reqtab_complete(r[2], 1);
	is_int(rdma__reqtab_fail_all(&t, ZB_ERR_PEER_DOWN), 3, "fail_all fails the 3 posted, not the done one");
	ok(r[2]->state == RDMA_REQ_DONE && r[3]->state == RDMA_REQ_ERROR &&
	   r[3]->err == ZB_ERR_PEER_DOWN, "done stays done; posted carries the error");
}

/* Random alloc/complete/release against a model. */
static void table_model(void)
{
	struct rdma_req mem[16];
	struct rdma_reqtab t;
	struct rdma_req *live[64];
	int nlive = 0, errors = 0;
	uint64_t next = 0, held_min;

	rdma__reqtab_init(&t, mem, 16);
	for (int step = 0; step < 100000; step++) {
		uint32_t op = rnd() % 3;
		if (op == 0) {
			struct rdma_req *r = rdma__reqtab_alloc(&t);
			held_min = next;
			for (int i = 0; i < nlive; i++)
				if (live[i]->seq < held_min)
					held_min = live[i]->seq;
			bool should = next - held_min < 16;
			if (!!r != should)
				errors++;
			if (r) {
				if (r->seq != next)
					errors++;
				next++;
				live[nlive++] = r;
			}
		} else if (nlive) {
			int i = (int)(rnd() % (uint32_t)nlive);
			struct rdma_req *r = live[i];
			if (r->state == RDMA_REQ_POSTED)
				rdma__reqtab_complete(r, r->seq);
			if (op == 2) {
				if (rdma__reqtab_get(&t, r->seq) != r)
					errors++;
				rdma__reqtab_release(&t, r);
				live[i] = live[--nlive];
			}
		}
	}
	is_int(errors, 0, "100000 random operations agree with the model");
}

static void sq_basics(void)
{
	struct rdma_sq q;
	uint64_t s;
	bool sig;
	int nsig = 0;

	rdma__sq_init(&q, 8, 4);
	for (int i = 0; i < 4; i++) {
		rdma__sq_post(&q, false, &s, &sig);
		nsig += sig;
	}
	ok(nsig == 1 && sig, "signal every 4: the 4th WR is signalled, the first three not");
	ok(!rdma__sq_needs_flush(&q, 0), "WR 0 will be retired by the signalled WR 3");
	rdma__sq_post(&q, false, &s, &sig);
	ok(!sig && rdma__sq_needs_flush(&q, s), "WR 4 unsignalled and last: needs a flush");
	rdma__sq_post(&q, true, &s, &sig);
	ok(sig && !rdma__sq_needs_flush(&q, 4), "forced signal on WR 5 covers WR 4");
	rdma__sq_post(&q, false, &s, &sig);
	rdma__sq_post(&q, false, &s, &sig);
	ok(sig && s == 7, "WR 7 fills the queue and is signalled though the run is 2");
	is_int(rdma__sq_post(&q, false, &s, &sig), -EAGAIN, "full queue refuses the 9th");
	rdma__sq_retire(&q, 3);
	ok(rdma__sq_done(&q, 0) && rdma__sq_done(&q, 3) && !rdma__sq_done(&q, 4),
	   "completion of WR 3 retires 0..3 only");
	is_int(rdma__sq_inflight(&q), 4, "four in flight after retiring four");
	rdma__sq_retire(&q, 1);
	is_int(rdma__sq_inflight(&q), 4, "an older completion does not move retirement back");
	uint64_t pl = q.last_signaled;
	uint32_t pr = q.run;
	rdma__sq_post(&q, false, &s, &sig);
	rdma__sq_unpost(&q, s, sig, pl, pr);
	ok(q.posted == 8 && q.last_signaled == pl && q.run == pr, "unpost restores the accounting");
	rdma__sq_init(&q, 4, 100);
	is_int(q.signal_every, 2, "signal_every capped at half the depth");
	/* The provider stops posting data at depth - 2 (headroom for a flush or
	 * an abort). Whatever signal_every the config asks for, a queue
	 * blocked there always has a signalled WR in flight to drain it. */
	int stuck = 0;
	for (uint32_t depth = 3; depth < 40; depth++)
		for (uint32_t every = 1; every < 80; every++) {
			rdma__sq_init(&q, depth, every);
			for (int i = 0; i < 200; i++) {
				uint64_t s2;
				bool sig;
				if (rdma__sq_inflight(&q) + 2 > depth) {
					if (q.last_signaled <= q.retired) {
						stuck++;
						break;
					}
					rdma__sq_retire(&q, q.last_signaled - 1);
					continue;
				}
				rdma__sq_post(&q, false, &s2, &sig);
			}
		}
	is_int(stuck, 0, "posting up to depth - 2 never blocks without a signalled WR in flight");
}

/* Invariant under random traffic: a full queue always ends in a signalled
 * WR, and completing the signalled WRs (in order) drains everything. */
static void sq_model(void)
{
	struct rdma_sq q;
	uint64_t sigs[64];
	int nsig = 0, stuck = 0, flushes = 0;

	rdma__sq_init(&q, 16, 5);
	for (int step = 0; step < 100000; step++) {
		uint64_t s;
		bool sig;
		if (rnd() % 3 != 0) {
			if (rdma__sq_post(&q, rnd() % 50 == 0, &s, &sig) == 0) {
				if (sig)
					sigs[nsig++] = s;
			} else if (q.last_signaled != q.posted) {
				stuck++;   /* full but the last WR is not signalled */
			}
		} else if (nsig) {
			rdma__sq_retire(&q, sigs[0]);   /* CQEs arrive in order */
			memmove(sigs, sigs + 1, sizeof(sigs[0]) * (size_t)--nsig);
		}
		if (nsig == 0 && q.posted > q.retired) {
			/* What test() does: a flush when nothing signalled is pending. */
			if (!rdma__sq_needs_flush(&q, q.posted - 1))
				stuck++;
			if (rdma__sq_post(&q, true, &s, &sig) == 0 && sig) {
				sigs[nsig++] = s;
				flushes++;
			}
		}
	}
	while (nsig) {
		rdma__sq_retire(&q, sigs[0]);
		memmove(sigs, sigs + 1, sizeof(sigs[0]) * (size_t)--nsig);
	}
	is_int(stuck, 0, "never full without a signalled tail; flush needed only when nothing covers");
	is_int(rdma__sq_inflight(&q), 0, "everything retires once signalled WRs complete");
	ok(flushes > 0, "the flush path was exercised (%d)", flushes);
}

int main(void)
{
	tap_plan(28);
	table_basics();
	table_model();
	sq_basics();
	sq_model();
	return tap_done();
}
