/* test_mock.c — collectives of n communicators in one thread over an
 * in-memory mock provider (no sockets, no DPDK): the handle pool and
 * integer avg on every path that finishes an avg.
 *
 * The mock matches a link's sends and receives in posting order when
 * anything is tested or progressed; "mockr" is the same provider with
 * irecv_reduce (the provider combines, coll only scales at the end), as
 * the dpdk provider does. Requests are calloc'd: this is the harness, not
 * the fast path. */
#include "tap.h"
#include "zbmd/coll.h"
#include "zbmd/config.h"
#include "zbmd/gpu.h"
#include "zbmd/net.h"

#include <stdlib.h>
#include <string.h>

#define MAXN 3
#define MAXCH 2

struct mreq {
	bool reduce, done;
	int status;
	void *data;
	const void *src;
	size_t size, got;
	uint32_t tag;
	enum zb_dtype dt;
	enum zb_redop op;
	struct mreq *next;
};

struct mlink {
	struct mreq *sh, *st, *rh, *rt;   /* sends, receives: oldest first */
};

static struct mlink links[MAXN][MAXN][MAXCH];
static struct mcomm {
	int src, dst, ch;
} comms[MAXN][MAXN][MAXCH][2];
static int ctx_self[MAXN];

static void push(struct mreq **h, struct mreq **t, struct mreq *r)
{
	r->next = NULL;
	if (*t)
		(*t)->next = r;
	else
		*h = r;
	*t = r;
}

static struct mreq *pop(struct mreq **h, struct mreq **t)
{
	struct mreq *r = *h;
	*h = r->next;
	if (!*h)
		*t = NULL;
	return r;
}

static void match_all(void)
{
	for (int a = 0; a < MAXN; a++)
		for (int b = 0; b < MAXN; b++)
			for (int ch = 0; ch < MAXCH; ch++) {
				struct mlink *l = &links[a][b][ch];
				while (l->sh && l->rh) {
					struct mreq *s = pop(&l->sh, &l->st);
					struct mreq *r = pop(&l->rh, &l->rt);
					size_t es = zb_dtype_size(r->dt);
					if (s->size > r->size)
						r->status = -EMSGSIZE;
					else if (s->tag != r->tag)
						r->status = ZB_ERR_BAD_FRAME;
					else if (r->reduce && r->src == r->data)
						r->status = gpu_host_reduce(r->data, s->data, s->size / es,
									    r->dt, r->op);
					else if (r->reduce)
						r->status = gpu_host_reduce_into(r->data, s->data, r->src,
										 s->size / es, r->dt, r->op);
					else if (s->size)
						memcpy(r->data, s->data, s->size);
					r->got = s->got = s->size;
					s->done = r->done = true;
				}
			}
}

static int m_init(const struct net_init_args *a, void **ctx)
{
	int id = a->cfg->node.id;
	ctx_self[id] = id;
	*ctx = &ctx_self[id];
	return 0;
}

static void m_fini(void *ctx) { (void)ctx; }

static int m_connect(void *ctx, uint16_t peer, uint16_t ch, void **out)
{
	int self = *(int *)ctx;
	struct mcomm *m = &comms[self][peer][ch][1];
	*m = (struct mcomm){self, peer, ch};
	*out = m;
	return 0;
}

static int m_accept(void *ctx, uint16_t peer, uint16_t ch, void **out)
{
	int self = *(int *)ctx;
	struct mcomm *m = &comms[peer][self][ch][0];
	*m = (struct mcomm){peer, self, ch};
	*out = m;
	return 0;
}

static int m_isend(void *comm, const void *data, size_t size, uint32_t tag,
		   void *mh, void **req)
{
	(void)mh;
	struct mcomm *m = comm;
	struct mreq *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->data = (void *)(uintptr_t)data;
	r->size = size;
	r->tag = tag;
	struct mlink *l = &links[m->src][m->dst][m->ch];
	push(&l->sh, &l->st, r);
	*req = r;
	return 0;
}

static int post_recv(void *comm, struct mreq *r, void **req)
{
	struct mcomm *m = comm;
	struct mlink *l = &links[m->src][m->dst][m->ch];
	push(&l->rh, &l->rt, r);
	*req = r;
	return 0;
}

static int m_irecv(void *comm, void *data, size_t size, uint32_t tag,
		   void *mh, void **req)
{
	(void)mh;
	struct mreq *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->data = data;
	r->size = size;
	r->tag = tag;
	r->dt = ZB_I32;   /* unused */
	return post_recv(comm, r, req);
}

static int m_irecv_reduce(void *comm, void *data, const void *src, size_t size,
			  uint32_t tag, enum zb_dtype dt, enum zb_redop op,
			  void *mh, void **req)
{
	(void)mh;
	if (op >= ZB_AVG)
		return -EINVAL;   /* as the dpdk provider: coll scales */
	struct mreq *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->data = data;
	r->src = src;
	r->size = size;
	r->tag = tag;
	r->reduce = true;
	r->dt = dt;
	r->op = op;
	return post_recv(comm, r, req);
}

static int m_test(void *req, int *done, size_t *size)
{
	struct mreq *r = req;
	match_all();
	*done = r->done;
	if (!r->done)
		return 0;
	if (size)
		*size = r->got;
	int st = r->status;
	free(r);
	return st;
}

static void m_close(void *c) { (void)c; }
static int m_progress(void *ctx) { (void)ctx; match_all(); return 0; }

static const struct net_ops mock_ops = {
	.version = NET_OPS_VERSION, .name = "mock", .init = m_init,
	.fini = m_fini, .progress = m_progress, .connect = m_connect,
	.accept = m_accept, .isend = m_isend, .irecv = m_irecv,
	.test = m_test, .close_send = m_close, .close_recv = m_close};
static const struct net_ops mockr_ops = {
	.version = NET_OPS_VERSION, .name = "mockr", .init = m_init,
	.fini = m_fini, .progress = m_progress, .connect = m_connect,
	.accept = m_accept, .isend = m_isend, .irecv = m_irecv,
	.irecv_reduce = m_irecv_reduce,
	.test = m_test, .close_send = m_close, .close_recv = m_close};

static struct zb_config cfgs[MAXN];
static struct coll_comm *cc[MAXN];

/* n communicators, nch channels, 256-byte chunks; small_kb > 0: small
 * all-reduces take the gathered path. */
static int make(int n, int nch, int small_kb, const char *prov)
{
	for (int i = 0; i < n; i++) {
		char text[2048], err[256];
		struct cfg_error ce;
		int o = snprintf(text, sizeof(text),
				 "[node]\nid = %d\n[cluster]\nid = 8\n[transport]\n"
				 "kind = tcp\ntcp_port = 1\n[coll]\nchannels = %d\n"
				 "timeout_ms = 5000\nsmall_max_kb = %d\n"
				 "stream_min_kb = 0\n", i, nch, small_kb);
		for (int j = 0; j < n; j++)
			o += snprintf(text + o, sizeof(text) - (size_t)o,
				      "[peer.%d]\nip = 127.0.0.%d\n", j, j + 1);
		if (cfg_load_string(&cfgs[i], text, "t", &ce) < 0) {
			tap_diag("config: %s", ce.msg);
			return -EINVAL;
		}
		struct coll_comm_args a = {.cfg = &cfgs[i], .provider = prov,
					   .chunk_bytes = 256, .channels = (uint16_t)nch};
		int rc = coll_comm_create(&a, &cc[i], err, sizeof(err));
		if (rc) {
			tap_diag("create %d: %s", i, err);
			return rc;
		}
	}
	return 0;
}

static void destroy(int n)
{
	for (int i = 0; i < n; i++)
		coll_comm_destroy(cc[i]);
	memset(links, 0, sizeof(links));
}

/* Progress every rank until every op in o[] is done; 0 or the first error. */
static int run_all(int n, struct coll_op **o)
{
	int done[MAXN] = {0}, left = n, err = 0;
	for (long it = 0; left && it < 1000000; it++)
		for (int r = 0; r < n; r++) {
			(void)coll_progress(cc[r]);
			if (done[r])
				continue;
			int d = 0, rc = coll_test(o[r], &d);
			if (d) {
				done[r] = 1;
				left--;
				err = err ? err : rc;
			}
		}
	return left ? -ETIMEDOUT : err;
}

/* ---- the handle pool ------------------------------------------------------ */

static void test_pool(void)
{
	static float b[2][COLL_MAX_OPS + 1][64];
	struct coll_op *o[2][COLL_MAX_OPS + 1];
	int rc = 0;

	if (make(2, 1, 0, "mock")) {
		ok(0, "two mock communicators");
		return;
	}
	for (int k = 0; k < COLL_MAX_OPS && !rc; k++)
		for (int r = 0; r < 2 && !rc; r++) {
			struct coll_args a = {.kind = COLL_ALLREDUCE, .dtype = ZB_F32,
					      .op = ZB_SUM, .count = 64,
					      .sendbuf = b[r][k], .recvbuf = b[r][k]};
			rc = coll_start(cc[r], &a, &o[r][k]);
		}
	is_int(rc, 0, "%d collectives started without a callback", COLL_MAX_OPS);
	/* every one finishes; only rank 1 reaps its handles */
	for (int k = 0; k < COLL_MAX_OPS; k++) {
		int d = 0;
		for (long it = 0; !d && it < 100000; it++) {
			coll_progress(cc[0]);
			coll_progress(cc[1]);
			coll_test(o[1][k], &d);
		}
	}
	for (int it = 0; it < 100; it++)
		coll_progress(cc[0]);
	struct coll_args a = {.kind = COLL_ALLREDUCE, .dtype = ZB_F32, .op = ZB_SUM,
			      .count = 64, .sendbuf = b[0][COLL_MAX_OPS],
			      .recvbuf = b[0][COLL_MAX_OPS]};
	is_int(coll_start(cc[0], &a, &o[0][COLL_MAX_OPS]), -EAGAIN,
	       "queue empty but %d finished handles not reaped: -EAGAIN, no abort",
	       COLL_MAX_OPS);
	int d = 0;
	rc = coll_test(o[0][0], &d);
	ok(rc == 0 && d, "reaping one handle (coll_test)");
	rc = coll_start(cc[0], &a, &o[0][COLL_MAX_OPS]);
	a.sendbuf = a.recvbuf = b[1][COLL_MAX_OPS];
	rc = rc ? rc : coll_start(cc[1], &a, &o[1][COLL_MAX_OPS]);
	is_int(rc, 0, "... frees its slot for the next coll_start");
	struct coll_op *last[2] = {o[0][COLL_MAX_OPS], o[1][COLL_MAX_OPS]};
	is_int(run_all(2, last), 0, "... which completes");
	for (int k = 1; k < COLL_MAX_OPS; k++)
		coll_test(o[0][k], &d);
	destroy(2);
}

/* ---- integer avg ------------------------------------------------------------ */

/* sum / n, round to nearest, ties away from zero, in 128 bits */
static __int128 ref_div(__int128 s, int n)
{
	__int128 a = s < 0 ? -s : s, q = (2 * a + n) / (2 * n);
	return s < 0 ? -q : q;
}

/* Rank r's element i: large values whose sums need more than 53 bits
 * (i64), plus ties and negative sums; i32 stays clear of wrapping. */
static int64_t val(int dt, int r, size_t i)
{
	int64_t base = dt == ZB_I64 ? ((int64_t)1 << 59) + (int64_t)(i * 7919) : 1000 * (int64_t)i;
	int64_t v = base + (int64_t)((r * 13 + i) % 5);
	return (i % 3 == 1) ? -v : v;
}

static void put(void *b, int dt, size_t i, int64_t v)
{
	if (dt == ZB_I64)
		((int64_t *)b)[i] = v;
	else
		((int32_t *)b)[i] = (int32_t)v;
}

static int64_t get(const void *b, int dt, size_t i)
{
	return dt == ZB_I64 ? ((const int64_t *)b)[i] : ((const int32_t *)b)[i];
}

/* One avg collective of kind on n ranks; count elements per rank (per
 * block for reduce-scatter). Returns the number of wrong elements, or -1
 * if it did not complete. */
static long avg_case(int n, enum coll_kind kind, int dt, size_t count, bool inplace)
{
	size_t es = zb_dtype_size(dt), total = kind == COLL_REDUCE_SCATTER ? count * n : count;
	char *sb[MAXN], *rb[MAXN];
	struct coll_op *o[MAXN];
	long bad = 0;

	for (int r = 0; r < n; r++) {
		sb[r] = malloc(total * es);
		rb[r] = malloc(total * es);
		for (size_t i = 0; i < total; i++)
			put(sb[r], dt, i, val(dt, r, i));
		memset(rb[r], 0x5a, total * es);
		char *dst = inplace ? sb[r] + (kind == COLL_REDUCE_SCATTER ? (size_t)r * count * es : 0)
				    : rb[r];
		struct coll_args a = {.kind = kind, .dtype = dt, .op = ZB_AVG,
				      .count = count, .sendbuf = sb[r], .recvbuf = dst};
		if (coll_start(cc[r], &a, &o[r]) < 0)
			bad = -1;
	}
	if (bad == 0 && run_all(n, o) != 0)
		bad = -1;
	for (int r = 0; r < n && bad >= 0; r++) {
		size_t first = kind == COLL_REDUCE_SCATTER ? (size_t)r * count : 0;
		const char *dst = inplace ? sb[r] + first * es : rb[r];
		for (size_t i = 0; i < count; i++) {
			__int128 s = 0;
			for (int k = 0; k < n; k++)
				s += val(dt, k, first + i);
			int64_t want = (int64_t)ref_div(s, n), got = get(dst, dt, i);
			if (got != want && bad++ < 3)
				tap_diag("rank %d elem %zu: got %lld want %lld", r, i,
					 (long long)got, (long long)want);
		}
	}
	for (int r = 0; r < n; r++) {
		free(sb[r]);
		free(rb[r]);
	}
	return bad;
}

static void test_avg(void)
{
	static const char *prov[2] = {"mock", "mockr"};
	static const int dts[2] = {ZB_I64, ZB_I32};

	for (int p = 0; p < 2; p++)
		for (int n = 2; n <= 3; n++)
			for (int small = 0; small < 2; small++) {
				if (make(n, 2, small ? 4 : 0, prov[p])) {
					ok(0, "%d %s communicators", n, prov[p]);
					continue;
				}
				for (int d = 0; d < 2; d++) {
					size_t cnt = small ? 37 : 301;
					for (int ip = 0; ip < 2; ip++) {
						is_int(avg_case(n, COLL_ALLREDUCE, dts[d], cnt, ip), 0,
						       "%s n=%d %s all-reduce avg %s, %s",
						       prov[p], n, dts[d] == ZB_I64 ? "i64" : "i32",
						       ip ? "in place" : "out of place",
						       small ? "small (gathered)" : "ring");
						if (small)
							continue;
						is_int(avg_case(n, COLL_REDUCE_SCATTER, dts[d], cnt, ip), 0,
						       "%s n=%d %s reduce-scatter avg %s",
						       prov[p], n, dts[d] == ZB_I64 ? "i64" : "i32",
						       ip ? "in place" : "out of place");
					}
				}
				destroy(n);
			}
}

int main(void)
{
	tap_plan(5 + 2 * 2 * (8 + 4));
	net_register(&mock_ops);
	net_register(&mockr_ops);
	test_pool();
	test_avg();
	return tap_done();
}
