/* Random use of the data path over the simulated RC fabric (sim_fabric.h):
 * random sizes, tags, registered or not, random test order, and now and
 * then a fault (dead rkey, async port-down, the peer closing, a message out
 * of sequence). Invariants: every send the provider accepted and every
 * receive matched by one ends (done or error) — never a hang; what
 * succeeds has the sender's size and bytes; a failed comm leaves nothing
 * pending; no assertion fires. */
#include "sim_fabric.h"
#include "tap.h"

#define ROUNDS 400
#define STEPS 120
#define BUF 4096

static uint64_t rng = 0x0123456789ABCDEFull;
static uint32_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)rng;
}

struct op { void *req; size_t size; uint32_t tag; int rc; bool done; uint8_t *buf; };

int main(void)
{
	static uint8_t sbuf[STEPS][BUF], rbuf[STEPS][BUF];
	static struct op sends[1 << 12], recvs[1 << 12];
	int stalls = 0, hangs = 0, corrupt = 0, leftovers = 0, ok_msgs = 0, failed_rounds = 0, tags = 0;

	int rounds = getenv("FUZZ_ROUNDS") ? atoi(getenv("FUZZ_ROUNDS")) : ROUNDS;
	if (getenv("FUZZ_SEED"))
		rng = strtoull(getenv("FUZZ_SEED"), NULL, 0) | 1;
	tap_plan(6);
	for (int round = 0; round < rounds; round++) {
		int ns = 0, nr = 0, fault_at = (int)(rnd() % (STEPS * 3));
		setup((uint16_t)(1 + rnd() % 64));
		struct rdma_mr *smh = host_mr(sbuf, sizeof(sbuf)), *rmh = host_mr(rbuf, sizeof(rbuf));
		for (int step = 0; step < STEPS; step++) {
			uint32_t what = rnd() % 10;
			if (step == fault_at) {
				switch (rnd() % 4) {
				case 0: sim_dereg(rmh->mr->rkey); break;
				case 1: atomic_store(&cr.fail_err, ZB_ERR_PEER_DOWN); break;
				case 2: rdma__comm_close_notify(&cs); break;
				default:
					sim_inject_recv(&sqp[1], 777777);
				}
			}
			if (what < 3) {             /* irecv */
				struct op *o = &recvs[nr];
				o->size = (rnd() % 16) ? BUF : 1 + rnd() % BUF;
				o->tag = rnd() % 64 ? 1 : 2;
				o->buf = rbuf[nr];
				bool reg = rnd() % 2;
				int rc = rdma__irecv(&cr, o->buf, o->size, o->tag, reg ? rmh : NULL, &o->req);
				if (rc == 0) {
					o->done = false;
					nr++;
				}
			} else if (what < 6) {      /* isend */
				struct op *o = &sends[ns];
				o->size = rnd() % 8 ? (size_t)(rnd() % (BUF + 1)) : 0;
				o->tag = rnd() % 64 ? 1 : 2;
				o->buf = sbuf[ns];
				for (size_t i = 0; i < o->size; i++)
					o->buf[i] = (uint8_t)(ns * 31 + i);
				int rc = rdma__isend(&cs, o->buf, o->size, o->tag, rnd() % 2 ? smh : NULL, &o->req);
				if (rc == 0) {
					o->done = false;
					ns++;
				} else if (rc != -EAGAIN) {
					/* refused (tag, size, dead comm): recorded as ended */
					o->req = NULL;
					o->rc = rc;
					o->done = true;
					ns++;
				}
			} else {                    /* test something */
				struct op *o = rnd() % 2 ? &sends[ns ? rnd() % ns : 0] : &recvs[nr ? rnd() % nr : 0];
				if ((o == &sends[0] && !ns) || (o == &recvs[0] && !nr) || o->done)
					continue;
				int d = 0;
				size_t n = 0;
				o->rc = rdma__test(o->req, &d, &n);
				if (d) {
					o->done = true;
					if (o->rc == 0 && o >= recvs && o < recvs + nr)
						o->size = n;
				}
			}
		}
		/* Drain: every accepted send, and every receive a send matched, ends. */
		for (int pass = 0; pass < 20000; pass++) {
			bool pending = false;
			for (int i = 0; i < ns; i++)
				if (!sends[i].done) {
					int d = 0;
					sends[i].rc = rdma__test(sends[i].req, &d, NULL);
					sends[i].done = d;
					pending |= !d;
				}
			for (int i = 0; i < nr && i < ns; i++)
				if (!recvs[i].done) {
					int d = 0;
					size_t n = 0;
					recvs[i].rc = rdma__test(recvs[i].req, &d, &n);
					if (d && recvs[i].rc == 0)
						recvs[i].size = n;
					recvs[i].done = d;
					pending |= !d;
				}
			if (!pending)
				break;
		}
		for (int i = 0; i < ns; i++)
			hangs += !sends[i].done;
		if (getenv("FUZZ_DEBUG"))
			for (int i = 0; i < ns; i++)
				if (!sends[i].done || (i < nr && !recvs[i].done))
					tap_diag("%s", rdma_last_error()), tap_diag("round %d fault_at %d: %s %d pending (ns %d nr %d; cs %d cr %d; cts_seen %llu next_send %llu next_recv %llu sq %llu/%llu/%llu)",
						 round, fault_at, !sends[i].done ? "send" : "recv", i, ns, nr,
						 atomic_load(&cs.state), atomic_load(&cr.state),
						 (unsigned long long)cs.cts_seen, (unsigned long long)cs.next_send,
						 (unsigned long long)cr.next_recv, (unsigned long long)cs.sq.posted,
						 (unsigned long long)cs.sq.retired, (unsigned long long)cs.sq.last_signaled);
		for (int i = 0; i < nr && i < ns; i++) {
			hangs += !recvs[i].done;
			if (recvs[i].done && recvs[i].rc == 0) {
				/* the send may still report an error: a comm that failed
				 * after its data left cannot tell whether it landed */
				if (recvs[i].size != sends[i].size || recvs[i].tag != sends[i].tag)
					corrupt++;
				for (size_t k = 0; k < recvs[i].size; k++)
					if (recvs[i].buf[k] != (uint8_t)(i * 31 + k)) {
						corrupt++;
						break;
					}
				ok_msgs++;
			}
			tags += recvs[i].done && recvs[i].rc == ZB_ERR_BAD_FRAME && recvs[i].tag != sends[i].tag;
		}
		/* Liveness: with everything drained, a healthy pair takes one more
		 * message (nothing stays stuck on -EAGAIN). */
		if (atomic_load(&cr.state) == RDMA_COMM_READY && atomic_load(&cs.state) == RDMA_COMM_READY &&
		    !cr.fail_err && nr <= ns) {
			void *q1 = NULL, *q2 = NULL;
			int r1 = -EAGAIN, r2 = -EAGAIN;
			for (int t = 0; t < 1000 && r1 == -EAGAIN; t++)
				r1 = rdma__irecv(&cr, rbuf[0], BUF, 1, NULL, &q1);
			for (int t = 0; t < 1000 && r1 == 0 && r2 == -EAGAIN; t++)
				r2 = rdma__isend(&cs, sbuf[0], 1, 1, NULL, &q2);
			if (r1 || r2 || wait_req(q2, NULL) || wait_req(q1, NULL))
				stalls++;
		}
		/* A failed comm must have nothing left pending (receives too). */
		if (atomic_load(&cr.state) == RDMA_COMM_FAILED) {
			failed_rounds++;
			for (int i = 0; i < nr; i++)
				if (!recvs[i].done) {
					int d = 0;
					rdma__test(recvs[i].req, &d, NULL);
					leftovers += !d;
				}
		}
		teardown();
	}
	is_int(hangs, 0, "%d rounds: every accepted send and matched receive ended", rounds);
	is_int(corrupt, 0, "successful messages carry the sender's size, tag and bytes (%d)", ok_msgs);
	is_int(leftovers, 0, "a failed receive comm leaves nothing pending");
	is_int(stalls, 0, "healthy pairs always take another message (no credit/queue stall)");
	ok(failed_rounds > rounds / 4 && failed_rounds < rounds && ok_msgs > rounds * 5, "faults and successes both exercised (%d failed rounds, %d messages)",
	   failed_rounds, ok_msgs);
	ok(tags > 0, "tag mismatches seen and failed as bad frames (%d)", tags);
	return tap_done();
}
