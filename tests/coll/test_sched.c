/* test_sched.c — the ring schedules as pure arithmetic (no network).
 *
 * For every kind, rank count 1..5, awkward counts, 1..3 channels and tiny
 * chunks, the schedule is executed symbolically: every element carries the
 * set of ranks whose contribution it holds (a bitmask). The test checks
 *   - the k-th send of rank r has the size of the k-th receive of r+1;
 *   - a reduction never combines a contribution twice (disjoint masks);
 *   - the final buffers hold exactly the expected contributions;
 *   - the guards cover every hazard: a direct receive into dst waits for
 *     earlier sends that read that range (recv_guard_send) and earlier
 *     reductions into it (recv_guard_recv); a send out of dst waits for the
 *     receive that last wrote the range (send_dep).
 */
#include "tap.h"
#include "zbmd/coll.h"

#define ES 2                            /* element size used by the plans */
#define MAXN 5
#define MAXC 130

struct rank_state {
	uint64_t src[MAXN * MAXC], dst[MAXN * MAXC];
	uint64_t slot[1024][MAXC];      /* per position (FWD) */
};

static struct rank_state R[MAXN];
static int failures;

#define EXPECT(cond, ...)                                                      \
	do {                                                                   \
		if (!(cond)) {                                                 \
			if (failures++ < 5)                                    \
				tap_diag(__VA_ARGS__);                         \
		}                                                              \
	} while (0)

static bool overlap(size_t a, size_t al, size_t b, size_t bl)
{
	return al && bl && a < b + bl && b < a + al;
}

/* Hazard checks on rank r's plan (positions are per rank and channel). */
static void check_guards(const struct coll_plan *p)
{
	uint64_t np = coll_plan_positions(p);
	struct coll_xfer x, y;

	for (uint64_t a = 0; a < np; a++) {
		coll_plan_xfer(p, a, &x);
		for (uint64_t q = 0; q < a; q++) {
			coll_plan_xfer(p, q, &y);
			bool xd = x.recv_kind == COLL_RECV_DIRECT ||
				  x.recv_kind == COLL_RECV_DIRECT_REDUCE;
			bool yw = y.recv_kind == COLL_RECV_REDUCE ||
				  y.recv_kind == COLL_RECV_DIRECT_REDUCE;
			if (xd) {
				if (y.has_send && !y.send_from_slot &&
				    y.send_src == COLL_BUF_RECV &&
				    overlap(y.send_off, y.send_bytes, x.recv_off, x.recv_bytes))
					EXPECT(x.recv_guard_send >= (int64_t)q,
					       "pos %llu recv overwrites send %llu", (unsigned long long)a,
					       (unsigned long long)q);
				if (yw && overlap(y.recv_off, y.recv_bytes, x.recv_off, x.recv_bytes))
					EXPECT(x.recv_guard_recv >= (int64_t)q,
					       "pos %llu recv races reduce %llu", (unsigned long long)a,
					       (unsigned long long)q);
				if (y.recv_kind == COLL_RECV_DIRECT)
					EXPECT(!overlap(y.recv_off, y.recv_bytes, x.recv_off,
							x.recv_bytes), "double receive");
				if (y.recv_kind == COLL_RECV_DIRECT_REDUCE &&
				    overlap(y.recv_off, y.recv_bytes, x.recv_off, x.recv_bytes))
					EXPECT(x.recv_guard_recv >= (int64_t)q,
					       "pos %llu receive overwrites unreduced %llu",
					       (unsigned long long)a, (unsigned long long)q);
			}
			if (x.has_send && !x.send_from_slot && x.send_src == COLL_BUF_RECV &&
			    y.recv_kind != COLL_RECV_NONE && y.recv_kind != COLL_RECV_REDUCE_FWD &&
			    overlap(y.recv_off, y.recv_bytes, x.send_off, x.send_bytes))
				EXPECT(x.send_dep >= (int64_t)q, "send %llu before recv %llu",
				       (unsigned long long)a, (unsigned long long)q);
		}
	}
}

static void payload(struct coll_plan *pl, uint32_t r, uint64_t pos,
		    const struct coll_xfer *x, uint64_t *out)
{
	size_t e = x->send_bytes / ES;
	const uint64_t *s = x->send_from_slot ? R[r].slot[pos - 1]
			    : x->send_src == COLL_BUF_SEND ? R[r].src + x->send_off / ES
							  : R[r].dst + x->send_off / ES;
	(void)pl;
	memcpy(out, s, e * sizeof(uint64_t));
}

static void deliver(uint32_t r, uint64_t pos, const struct coll_xfer *x,
		    const uint64_t *in)
{
	size_t e = x->recv_bytes / ES;
	uint64_t *d = R[r].dst + x->recv_off / ES;

	switch (x->recv_kind) {
	case COLL_RECV_DIRECT:
		memcpy(d, in, e * sizeof(uint64_t));
		break;
	case COLL_RECV_REDUCE:
		for (size_t i = 0; i < e; i++) {
			uint64_t base = d[i];
			EXPECT(!(base & in[i]), "reduce counts a rank twice");
			d[i] = base | in[i];
		}
		break;
	case COLL_RECV_DIRECT_REDUCE:
		for (size_t i = 0; i < e; i++) {
			uint64_t m = R[r].src[x->mine_off / ES + i];
			EXPECT(!(m & in[i]), "direct reduce counts a rank twice");
			d[i] = in[i] | m;
		}
		break;
	case COLL_RECV_REDUCE_FWD:
		for (size_t i = 0; i < e; i++) {
			uint64_t m = R[r].src[x->mine_off / ES + i];
			EXPECT(!(m & in[i]), "forward reduce counts a rank twice");
			R[r].slot[pos][i] = in[i] | m;
		}
		break;
	default:
		EXPECT(0, "deliver to a position without receive");
	}
}

/* Runs one configuration; returns true when every check held. */
static bool run(enum coll_kind kind, uint32_t n, size_t count, uint16_t nch,
		size_t chunk, bool inplace, uint32_t root)
{
	int before = failures;
	size_t tot = n * count;
	uint64_t full = (n == 64) ? ~0ull : ((1ull << n) - 1);

	for (uint32_t r = 0; r < n; r++) {
		memset(R[r].dst, 0, sizeof(R[r].dst));
		for (size_t i = 0; i < tot; i++)
			R[r].src[i] = 1ull << r;
		if (kind == COLL_ALLGATHER || kind == COLL_BARRIER)
			for (size_t i = 0; i < count; i++)
				R[r].dst[r * count + i] = 1ull << r;   /* local copy */
		if (kind == COLL_ALLREDUCE && inplace)
			memcpy(R[r].dst, R[r].src, count * sizeof(uint64_t));
		if (kind == COLL_BROADCAST && r == root)
			memcpy(R[r].dst, R[r].src, count * sizeof(uint64_t));
	}
	for (uint16_t c = 0; c < nch; c++) {
		struct coll_plan pl[MAXN];
		for (uint32_t r = 0; r < n; r++) {
			coll_plan_init(&pl[r], kind, n, r, root, count, ES, c, nch, chunk,
				       false, inplace);
			check_guards(&pl[r]);
		}
		uint64_t np = coll_plan_positions(&pl[0]);
		EXPECT(np < 1024, "too many positions");
		for (uint64_t pos = 0; pos < np && pos < 1024; pos++) {
			static uint64_t buf[MAXN][MAXC];
			struct coll_xfer sx[MAXN], rx[MAXN];
			bool bc = kind == COLL_BROADCAST;
			for (uint32_t k = 0; k < n; k++) {
				/* Broadcast forwards within a position: chain order. */
				uint32_t r = bc ? (root + k) % n : k;
				coll_plan_xfer(&pl[r], pos, &sx[r]);
				if (bc && k > 0) {
					uint32_t pr = (r + n - 1) % n;
					coll_plan_xfer(&pl[r], pos, &rx[r]);
					EXPECT(rx[r].recv_bytes == sx[pr].send_bytes, "size");
					deliver(r, pos, &rx[r], buf[pr]);
				}
				if (sx[r].has_send)
					payload(&pl[r], r, pos, &sx[r], buf[r]);
			}
			if (bc)
				continue;
			for (uint32_t r = 0; r < n; r++) {
				uint32_t pr = (r + n - 1) % n;
				coll_plan_xfer(&pl[r], pos, &rx[r]);
				EXPECT(sx[pr].has_send == (rx[r].recv_kind != COLL_RECV_NONE),
				       "send/recv pairing at pos %llu", (unsigned long long)pos);
				EXPECT(rx[r].recv_bytes == sx[pr].send_bytes,
				       "pos %llu: rank %u sends %zu, rank %u expects %zu",
				       (unsigned long long)pos, pr, sx[pr].send_bytes, r,
				       rx[r].recv_bytes);
				if (rx[r].recv_kind != COLL_RECV_NONE)
					deliver(r, pos, &rx[r], buf[pr]);
			}
		}
	}
	/* Final contents. */
	for (uint32_t r = 0; r < n; r++) {
		if (n == 1)
			break;  /* single rank: the engine copies, no schedule */
		switch (kind) {
		case COLL_ALLREDUCE:
			for (size_t i = 0; i < count; i++)
				EXPECT(R[r].dst[i] == full, "allreduce n=%u count=%zu rank %u "
				       "elem %zu mask %llx", n, count, r, i,
				       (unsigned long long)R[r].dst[i]);
			break;
		case COLL_REDUCE_SCATTER:
			for (size_t i = 0; i < count; i++)
				EXPECT(R[r].dst[i] == full, "reduce-scatter rank %u elem %zu",
				       r, i);
			break;
		case COLL_ALLGATHER:
		case COLL_BARRIER:
			for (size_t i = 0; i < tot; i++)
				EXPECT(R[r].dst[i] == 1ull << (i / count), "allgather rank %u "
				       "elem %zu", r, i);
			break;
		case COLL_BROADCAST:
			for (size_t i = 0; i < count; i++)
				EXPECT(R[r].dst[i] == 1ull << root, "broadcast rank %u", r);
			break;
		default:
			break;
		}
	}
	return failures == before;
}

int main(void)
{
	static const size_t counts[] = {0, 1, 2, 3, 4, 5, 7, 10, 33, 64, 127};
	static const size_t chunks[] = {1, 2, 3, 1000};
	tap_plan(11);

	/* split */
	bool okk = true;
	for (size_t t = 0; t < 50; t++)
		for (size_t p = 1; p < 9; p++) {
			size_t sum = 0;
			for (size_t i = 0; i < p; i++) {
				size_t len = coll_split(t, p, i + 1) - coll_split(t, p, i);
				okk = okk && len + 1 >= (t + p - 1) / p && len <= (t + p - 1) / p;
				sum += len;
			}
			okk = okk && sum == t && coll_split(t, p, 0) == 0;
		}
	ok(okk, "coll_split: balanced parts covering [0, total)");

	struct coll_plan pl;
	coll_plan_init(&pl, COLL_ALLREDUCE, 4, 1, 0, 1000, 4, 0, 1, 64, false, false);
	is_int(pl.steps, 6, "all-reduce: 2(n-1) steps per chunk");
	is_int(pl.nchunks, 4, "all-reduce: ceil(ceil(1000/4)/64) = 4 chunks");
	coll_plan_init(&pl, COLL_ALLREDUCE, 4, 1, 0, 0, 4, 0, 1, 64, false, false);
	struct coll_xfer x0;
	coll_plan_xfer(&pl, 0, &x0);
	ok(coll_plan_positions(&pl) == 1 && x0.has_send && !x0.send_bytes &&
	   x0.recv_kind == COLL_RECV_DIRECT && !x0.recv_bytes,
	   "count 0: one empty message to the next rank, one from the previous");

	static const enum coll_kind kinds[] = {COLL_ALLREDUCE, COLL_REDUCE_SCATTER,
					       COLL_ALLGATHER, COLL_BROADCAST};
	for (size_t ki = 0; ki < 4; ki++)
		for (int inplace = 0; inplace < 2; inplace++) {
			if (kinds[ki] != COLL_ALLREDUCE && inplace)
				continue;
			bool all = true;
			int runs = 0;
			for (uint32_t n = 1; n <= MAXN; n++)
				for (size_t ci = 0; ci < ZB_ARRAY_LEN(counts); ci++)
					for (uint16_t nch = 1; nch <= 3; nch++)
						for (size_t hi = 0; hi < ZB_ARRAY_LEN(chunks); hi++) {
							uint32_t root = (uint32_t)(ci % n);
							all = run(kinds[ki], n, counts[ci], nch,
								  chunks[hi], inplace, root) && all;
							runs++;
						}
			ok(all, "%s%s: %d schedules (n 1..5, odd/even counts, 1..3 "
			   "channels, chunks 1..1000) deliver every contribution once",
			   coll_kind_name(kinds[ki]), inplace ? " in place" : "", runs);
		}
	/* the hazard checker itself must be able to fail: a plan whose
	 * all-gather receive has its guard stripped is caught */
	coll_plan_init(&pl, COLL_ALLREDUCE, 3, 0, 0, 30, ES, 0, 1, 4, false, true);
	struct coll_xfer x;
	coll_plan_xfer(&pl, pl.steps - 1, &x);
	ok(x.recv_kind == COLL_RECV_DIRECT && x.recv_guard_send >= 0,
	   "all-gather receives carry a send guard");
	coll_plan_xfer(&pl, 0, &x);
	ok(x.recv_kind == COLL_RECV_REDUCE && x.mine_off == -1 && x.send_dep == -1,
	   "in place: first reduce-scatter step reduces into dst, sends at once");
	return tap_done();
}
