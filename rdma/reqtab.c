/* Request table and send-queue accounting: pure bookkeeping, no verbs calls.
 *
 * Requests live in a fixed ring sized at comm creation (slots, a power of
 * two); nothing here allocates. A request is handed out in message order,
 * completed by the CQ poller (in order on RC, but the table does not rely
 * on it), and released by test() in whatever order the caller tests. */
#include "internal.h"

#include <string.h>

void rdma__reqtab_init(struct rdma_reqtab *t, struct rdma_req *slots, uint32_t cap)
{
	ZB_ASSERT(t != NULL && slots != NULL);
	ZB_ASSERT(cap > 0 && (cap & (cap - 1)) == 0);
	memset(slots, 0, sizeof(*slots) * cap);
	t->slots = slots;
	t->cap = cap;
	t->mask = cap - 1;
	t->head = 0;
	t->tail = 0;
}

uint32_t rdma__reqtab_outstanding(const struct rdma_reqtab *t)
{
	ZB_DASSERT(t->head - t->tail <= t->cap);
	return (uint32_t)(t->head - t->tail);
}

struct rdma_req *rdma__reqtab_alloc(struct rdma_reqtab *t)
{
	struct rdma_req *r;

	ZB_DASSERT(t != NULL && t->slots != NULL);
	if (t->head - t->tail >= t->cap)
		return NULL;
	r = &t->slots[t->head & t->mask];
	ZB_ASSERT(r->state == RDMA_REQ_FREE);
	memset(r, 0, sizeof(*r));
	r->seq = t->head++;
	r->state = RDMA_REQ_POSTED;
	return r;
}

struct rdma_req *rdma__reqtab_get(struct rdma_reqtab *t, uint64_t seq)
{
	struct rdma_req *r;

	ZB_DASSERT(t != NULL);
	if (seq < t->tail || seq >= t->head)
		return NULL;
	r = &t->slots[seq & t->mask];
	if (r->state == RDMA_REQ_FREE || r->seq != seq)
		return NULL;
	return r;
}

/* The outstanding request whose seq's low 31 bits are seq31, searching
 * forward from `from` (the oldest the caller still expects). */
struct rdma_req *rdma__reqtab_get31(struct rdma_reqtab *t, uint64_t from, uint32_t seq31)
{
	uint64_t s;

	ZB_DASSERT(t != NULL);
	if (from < t->tail)
		from = t->tail;
	for (s = from; s < t->head; s++)
		if ((uint32_t)(s & RDMA_IMM_SEQMASK) == seq31)
			return rdma__reqtab_get(t, s);
	return NULL;
}

void rdma__reqtab_complete(struct rdma_req *r, size_t size)
{
	ZB_DASSERT(r != NULL);
	ZB_DASSERT(r->state == RDMA_REQ_POSTED);
	r->done_size = size;
	r->state = RDMA_REQ_DONE;
}

void rdma__reqtab_fail(struct rdma_req *r, int err)
{
	ZB_ASSERT(r != NULL && err < 0);
	if (r->state != RDMA_REQ_POSTED)
		return;
	r->err = err;
	r->state = RDMA_REQ_ERROR;
}

uint32_t rdma__reqtab_fail_all(struct rdma_reqtab *t, int err)
{
	uint32_t n = 0;

	ZB_ASSERT(t != NULL && err < 0);
	for (uint64_t s = t->tail; s < t->head; s++) {
		struct rdma_req *r = &t->slots[s & t->mask];
		if (r->state == RDMA_REQ_POSTED) {
			rdma__reqtab_fail(r, err);
			n++;
		}
	}
	return n;
}

void rdma__reqtab_release(struct rdma_reqtab *t, struct rdma_req *r)
{
	ZB_ASSERT(t != NULL && r != NULL);
	ZB_ASSERT(r >= t->slots && r < t->slots + t->cap && r->state != RDMA_REQ_FREE);
	r->state = RDMA_REQ_FREE;
	while (t->tail < t->head && t->slots[t->tail & t->mask].state == RDMA_REQ_FREE)
		t->tail++;
}

/* ---- send-queue accounting --------------------------------------------- */

void rdma__sq_init(struct rdma_sq *q, uint32_t depth, uint32_t signal_every)
{
	ZB_ASSERT(q != NULL && depth >= 1);
	ZB_ASSERT(signal_every >= 1);
	memset(q, 0, sizeof(*q));
	q->depth = depth;
	/* At most half the depth between signals: callers keep a little
	 * headroom (flush, abort) and stop posting short of full, so the
	 * fill rule alone would not fire; with this cap a signalled WR is
	 * always in flight once half the queue is. */
	q->signal_every = signal_every;
	if (q->signal_every > (depth >= 2 ? depth / 2 : 1))
		q->signal_every = depth >= 2 ? depth / 2 : 1;
}

int rdma__sq_post(struct rdma_sq *q, bool force, uint64_t *seq, bool *signal)
{
	bool sig;

	ZB_DASSERT(q != NULL && seq != NULL && signal != NULL);
	if (q->posted - q->retired >= q->depth)
		return -EAGAIN;
	*seq = q->posted++;
	/* Signal every N-th WR, on request, and always when this WR fills the
	 * queue: a full queue then ends in a signalled WR whose completion
	 * retires everything before it. */
	sig = force || q->run + 1 >= q->signal_every ||
	      q->posted - q->retired == q->depth;
	if (sig) {
		q->run = 0;
		q->last_signaled = *seq + 1;
	} else {
		q->run++;
	}
	*signal = sig;
	ZB_DASSERT(q->posted - q->retired <= q->depth);
	return 0;
}

void rdma__sq_unpost(struct rdma_sq *q, uint64_t seq, bool signal, uint64_t prev_last,
		     uint32_t prev_run)
{
	ZB_ASSERT(q != NULL && seq + 1 == q->posted);
	(void)signal;
	q->posted = seq;
	q->last_signaled = prev_last;
	q->run = prev_run;
}

void rdma__sq_retire(struct rdma_sq *q, uint64_t seq)
{
	ZB_ASSERT(q != NULL);
	ZB_ASSERT(seq < q->posted);
	if (seq + 1 > q->retired)
		q->retired = seq + 1;
}
