/* coll_sched.c — the ring schedules, as pure arithmetic.
 *
 * A channel's sequence is chunk-major: position pos = k * steps + s for chunk
 * k in [0, K) and ring step s in [0, steps). Rank r sends to r+1 and
 * receives from r-1; at every position both ends compute the same block
 * and chunk, so the k-th send of r matches the k-th receive of r+1.
 *
 * Ring all-reduce (Patarasuk & Yuan, "Bandwidth optimal all-reduce
 * algorithms for clusters of workstations", JPDC 2009): the channel region
 * is cut into n blocks;
 *   reduce-scatter, s = 0 .. n-2: send block r-s, receive block r-s-1 and
 *     reduce it into dst; after step n-2 rank r owns block r+1 reduced;
 *   all-gather, s = n-1+j, j = 0 .. n-2: send block r+1-j, receive block
 *     r-j straight into dst.
 * Each block is cut into the same number K of chunks (balanced split), so
 * chunk k of every block exists at every rank even when count % n != 0 or
 * count < n (chunks may then be empty: zero-length messages keep the lock
 * step). Chunk-major order forwards a received chunk at the very next
 * position, so two scratch slots per channel suffice for any size.
 *
 * Hazards the engine must respect (expressed as guards on each position):
 *   - a send of a chunk reduced/received at pos-1 waits for that receive
 *     to be processed (send_dep);
 *   - an all-gather receive overwrites a dst chunk that an earlier
 *     reduce-scatter send reads (recv_guard_send) or an earlier
 *     reduce-scatter receive reduces into (recv_guard_recv).
 */
#include "zbmd/coll.h"

static size_t div_up(size_t a, size_t b) { return (a + b - 1) / b; }

static uint32_t modn(int64_t v, uint32_t n)
{
	int64_t m = v % (int64_t)n;
	return (uint32_t)(m < 0 ? m + n : m);
}

static const char *const coll_kind_names[COLL_KIND_COUNT] = {
	[COLL_ALLREDUCE] = "allreduce",
	[COLL_REDUCE_SCATTER] = "reducescatter",
	[COLL_ALLGATHER] = "allgather",
	[COLL_BROADCAST] = "broadcast",
	[COLL_BARRIER] = "barrier",
};

const char *coll_kind_name(enum coll_kind k)
{
	return (unsigned)k < COLL_KIND_COUNT ? coll_kind_names[k] : "?";
}

void coll_plan_init(struct coll_plan *p, enum coll_kind kind, uint32_t n,
		    uint32_t rank, uint32_t root, size_t count, size_t esize,
		    uint16_t ch, uint16_t nch, size_t chunk_elems, bool avg,
		    bool in_place)
{
	ZB_ASSERT(p != NULL && n >= 1 && rank < n && nch >= 1 && ch < nch);
	ZB_ASSERT(chunk_elems >= 1 && esize >= 1);
	*p = (struct coll_plan){.kind = kind, .n = n, .rank = rank,
				.root = root, .esize = esize, .count = count,
				.avg = avg, .in_place = in_place};
	p->base = coll_split(count, nch, ch);
	p->len = coll_split(count, nch, ch + 1u) - p->base;
	if (n > 1 && count == 0) {
		p->kind = COLL_PLAN_EMPTY;      /* one empty exchange */
		p->nchunks = p->steps = 1;
		return;
	}
	if (n == 1 || p->len == 0)
		return;         /* nothing on the wire */
	switch (kind) {
	case COLL_ALLREDUCE:
		p->nchunks = div_up(div_up(p->len, n), chunk_elems);
		p->steps = 2 * (n - 1);
		break;
	case COLL_REDUCE_SCATTER:
	case COLL_ALLGATHER:
	case COLL_BARRIER:
		p->nchunks = div_up(p->len, chunk_elems);
		p->steps = n - 1;
		break;
	case COLL_BROADCAST:
		p->nchunks = div_up(p->len, chunk_elems);
		p->steps = 1;
		break;
	default:
		ZB_ASSERT(0 && "bad kind");
	}
}

/* Element range of chunk k of all-reduce block b: [*lo, *hi). */
static void ar_chunk(const struct coll_plan *p, uint32_t b, size_t k,
		     size_t *lo, size_t *hi)
{
	size_t bb = coll_split(p->len, p->n, b), be = coll_split(p->len, p->n, b + 1);
	ZB_DASSERT(b < p->n && k < p->nchunks);
	*lo = p->base + bb + coll_split(be - bb, p->nchunks, k);
	*hi = p->base + bb + coll_split(be - bb, p->nchunks, k + 1);
	ZB_DASSERT(*lo <= *hi && *hi <= p->base + p->len);
}

static void xfer_allreduce(const struct coll_plan *p, size_t k, uint32_t s,
			   struct coll_xfer *x)
{
	uint32_t n = p->n, r = p->rank, sb, rb;
	uint64_t k0 = (uint64_t)k * p->steps;
	size_t lo, hi;

	x->has_send = true;
	if (s < n - 1) {                /* reduce-scatter */
		sb = modn((int64_t)r - s, n);
		rb = modn((int64_t)r - s - 1, n);
		x->send_src = s == 0 ? COLL_BUF_SEND : COLL_BUF_RECV;
		x->send_dep = s == 0 ? -1 : (int64_t)(k0 + s - 1);
		/* Out of place the partial lands straight in dst and our own
		 * contribution is added from sendbuf: no copy, no slot. In
		 * place dst still holds our contribution: receive into a slot. */
		ar_chunk(p, rb, k, &lo, &hi);
		x->recv_kind = p->in_place ? COLL_RECV_REDUCE : COLL_RECV_DIRECT_REDUCE;
		x->mine_off = p->in_place ? -1 : (int64_t)(lo * p->esize);
		x->scale_after = p->avg && s == n - 2;
	} else {                        /* all-gather */
		uint32_t j = s - (n - 1);
		sb = modn((int64_t)r + 1 - j, n);
		rb = modn((int64_t)r - j, n);
		x->send_src = COLL_BUF_RECV;
		x->send_dep = (int64_t)(k0 + s - 1);
		x->recv_kind = COLL_RECV_DIRECT;
		/* Block r-j was sent at reduce-scatter step j and, for j >= 1,
		 * reduced into at step j-1. */
		x->recv_guard_send = (int64_t)(k0 + j);
		x->recv_guard_recv = j >= 1 ? (int64_t)(k0 + j - 1) : -1;
		ar_chunk(p, rb, k, &lo, &hi);
	}
	x->recv_off = lo * p->esize;
	x->recv_bytes = (hi - lo) * p->esize;
	ar_chunk(p, sb, k, &lo, &hi);
	x->send_off = lo * p->esize;
	x->send_bytes = (hi - lo) * p->esize;
}

/* Reduce-scatter and all-gather: rank block b is [b*count, (b+1)*count);
 * the channel owns [base, base+len) of every block. */
static void xfer_rs_ag(const struct coll_plan *p, size_t k, uint32_t s,
		       struct coll_xfer *x)
{
	uint32_t n = p->n, r = p->rank, sb, rb;
	uint64_t k0 = (uint64_t)k * p->steps;
	size_t lo = p->base + coll_split(p->len, p->nchunks, k);
	size_t hi = p->base + coll_split(p->len, p->nchunks, k + 1);
	size_t bytes = (hi - lo) * p->esize, cb = p->count * p->esize;

	x->has_send = true;
	x->send_bytes = x->recv_bytes = bytes;
	x->send_dep = s == 0 ? -1 : (int64_t)(k0 + s - 1);
	if (p->kind == COLL_REDUCE_SCATTER) {
		/* Shifted by one so that the last receive is block r. */
		sb = modn((int64_t)r - 1 - s, n);
		rb = modn((int64_t)r - 2 - s, n);
		if (s == 0) {
			x->send_src = COLL_BUF_SEND;
			x->send_off = sb * cb + lo * p->esize;
		} else {
			x->send_from_slot = true;
		}
		if (s < n - 2) {
			x->recv_kind = COLL_RECV_REDUCE_FWD;
			x->mine_off = (int64_t)(rb * cb + lo * p->esize);
		} else {
			ZB_DASSERT(rb == r);
			x->recv_kind = p->in_place ? COLL_RECV_REDUCE
				       : COLL_RECV_DIRECT_REDUCE;
			x->recv_off = lo * p->esize;
			x->mine_off = p->in_place ? -1
				      : (int64_t)(r * cb + lo * p->esize);
			x->scale_after = p->avg;
		}
	} else {                        /* all-gather, barrier */
		sb = modn((int64_t)r - s, n);
		rb = modn((int64_t)r - s - 1, n);
		x->send_src = s == 0 ? COLL_BUF_SEND : COLL_BUF_RECV;
		x->send_off = (s == 0 ? 0 : sb * cb) + lo * p->esize;
		x->recv_kind = COLL_RECV_DIRECT;
		x->recv_off = rb * cb + lo * p->esize;
	}
}

static void xfer_broadcast(const struct coll_plan *p, size_t k,
			   struct coll_xfer *x)
{
	uint32_t d = modn((int64_t)p->rank - p->root, p->n);
	size_t lo = p->base + coll_split(p->len, p->nchunks, k);
	size_t hi = p->base + coll_split(p->len, p->nchunks, k + 1);
	size_t bytes = (hi - lo) * p->esize;

	if (d + 1 < p->n) {             /* everyone but the chain's end sends */
		x->has_send = true;
		x->send_src = d == 0 ? COLL_BUF_SEND : COLL_BUF_RECV;
		x->send_off = lo * p->esize;
		x->send_bytes = bytes;
		x->send_dep = d == 0 ? -1 : (int64_t)k;  /* forward after receipt */
	}
	if (d > 0) {                    /* everyone but the root receives */
		x->recv_kind = COLL_RECV_DIRECT;
		x->recv_off = lo * p->esize;
		x->recv_bytes = bytes;
	}
}

void coll_plan_xfer(const struct coll_plan *p, uint64_t pos, struct coll_xfer *x)
{
	ZB_DASSERT(p != NULL && x != NULL);
	ZB_DASSERT(pos < coll_plan_positions(p));
	*x = (struct coll_xfer){.send_dep = -1, .mine_off = -1,
				.recv_guard_send = -1, .recv_guard_recv = -1};
	size_t k = (size_t)(pos / p->steps);
	uint32_t s = (uint32_t)(pos % p->steps);

	switch (p->kind) {
	case COLL_ALLREDUCE:
		xfer_allreduce(p, k, s, x);
		break;
	case COLL_REDUCE_SCATTER:
	case COLL_ALLGATHER:
	case COLL_BARRIER:
		xfer_rs_ag(p, k, s, x);
		break;
	case COLL_BROADCAST:
		xfer_broadcast(p, k, x);
		break;
	case COLL_PLAN_EMPTY:           /* empty, but on the wire: the tag */
		x->has_send = true;
		x->send_src = COLL_BUF_SEND;
		x->recv_kind = COLL_RECV_DIRECT;
		return;
	default:
		ZB_ASSERT(0 && "bad kind");
	}
	/* Empty chunks (count % n, count < n) move nothing: both ends drop
	 * them, since a send is empty exactly when the matching receive is. */
	if (x->has_send && x->send_bytes == 0)
		x->has_send = false;
	if (x->recv_kind != COLL_RECV_NONE && x->recv_bytes == 0)
		x->recv_kind = COLL_RECV_NONE;
}
