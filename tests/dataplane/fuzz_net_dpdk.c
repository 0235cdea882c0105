/* libFuzzer entry point for the receive side of the "dpdk" net provider
 * (dataplane/net_dpdk.c): the {tag, size} headers and payloads a peer sends
 * on the collective streams, as the transport hands them over
 * (dp__net_deliver, and dp__net_rx_place / rx_write / rx_unplace for a
 * payload written straight into a posted receive), matched against irecv /
 * irecv_reduce requests. `make fuzz-net-dpdk` (clang
 * -fsanitize=fuzzer,address,undefined; FUZZ_SECS=30 by default).
 *
 * No EAL runs: net_dpdk.c is compiled into this file, its lane context
 * built by hand (nd_init wants a running node), tp_rx_detach faked. The
 * harness plays the transport: messages of each (peer, stream) in order, a
 * message held back (-EAGAIN) offered again first, placement only in 8-byte
 * multiples (transport_rx.c's rule for rx_write). The input is a program of
 * one-byte ops. Receive buffers are malloc'd at their exact size (ASan sees
 * any write past one); a completed receive reports at most its size; built
 * with ZB_DEBUG, so that the provider's own assertions hold too (a payload
 * of partial elements for an irecv_reduce tripped recv_write's). The
 * reductions are a byte-wise stand-in (gpu/host_reduce.c needs gcc). */
#include "../../dataplane/internal.h"

#include <stdlib.h>

static void fz_tp_rx_detach(struct tp *tp, uint16_t peer, uint16_t stream,
			    uint32_t msg_id, uint64_t now);
#define tp_rx_detach fz_tp_rx_detach
#include "../../dataplane/net_dpdk.c"
#undef tp_rx_detach

struct dp_node dp__node;

/* The reductions (gpu/host_reduce.c, built with gcc's target builtins): a
 * byte-wise stand-in that reads and writes exactly what they would. */
int gpu_host_reduce_into(void *dst, const void *x, const void *src, size_t count,
			 enum zb_dtype dtype, enum zb_redop op)
{
	size_t bytes = count * zb_dtype_size(dtype);
	(void)op;
	for (size_t i = 0; i < bytes; i++)
		((uint8_t *)dst)[i] = (uint8_t)(((const uint8_t *)x)[i] +
						((const uint8_t *)src)[i]);
	return 0;
}
int gpu_host_reduce(void *dst, const void *src, size_t count, enum zb_dtype dtype,
		    enum zb_redop op)
{
	return gpu_host_reduce_into(dst, dst, src, count, dtype, op);
}
int dp_lcore_index(void) { return 0; }
uint64_t dp_now_ns(uint64_t tsc) { return tsc; }
struct tp *dp_transport(unsigned lane) { (void)lane; return NULL; }

#define NPEER 2u        /* peers 1, 2 */
#define NSTR 2u         /* streams 0, 1 */
#define QMAX 16u
#define NRQ 32u

struct fz_msg {
	struct tp_msg m;
	uint8_t *own;       /* its bytes (exact size) */
	bool place_tried, placed;
};

struct fz_rq {
	void *req;
	uint8_t *buf, *src;
	size_t size;
	unsigned peer, stream;
};

static struct {
	struct fz_msg q[NPEER][NSTR][QMAX];
	unsigned qh[NPEER][NSTR], qt[NPEER][NSTR];
	uint32_t next_id[NPEER][NSTR];
	void *comm[NPEER][NSTR];
	struct fz_rq rq[NRQ];
	unsigned nrq;
	uint32_t detached;
} F;

static struct nd_ctx *C;
static struct zb_config cfg;

static void fz_tp_rx_detach(struct tp *tp, uint16_t peer, uint16_t stream,
			    uint32_t msg_id, uint64_t now)
{
	(void)tp;
	(void)peer;
	(void)stream;
	(void)msg_id;
	(void)now;
	F.detached++;
}

static size_t take(const uint8_t **d, size_t *n, void *out, size_t want)
{
	size_t k = want < *n ? want : *n;
	memcpy(out, *d, k);
	memset((uint8_t *)out + k, 0, want - k);
	*d += k;
	*n -= k;
	return k;
}

static const uint32_t tags[] = {0x1234, 0x5678, 0, 0xffffffffu};
static const size_t sizes[] = {0, 8, 12, 64, 100, 256, 1000, 4096};

static void msg_free(struct fz_msg *x)
{
	free(x->own);
	x->own = NULL;
}

/* Offer the head of (p, s) to the provider until it holds one back. */
static void deliver(unsigned p, unsigned s)
{
	while (F.qh[p][s] != F.qt[p][s]) {
		struct fz_msg *x = &F.q[p][s][F.qh[p][s] % QMAX];
		x->m.data = x->placed ? x->m.data : (x->m.len ? x->own : NULL);
		int rc = dp__net_deliver(0, &x->m);
		if (rc == -EAGAIN)
			return;
		ZB_ASSERT(rc == 1);
		msg_free(x);
		F.qh[p][s]++;
	}
}

static void queue_msg(unsigned p, unsigned s, const uint8_t *bytes, size_t len)
{
	if (F.qt[p][s] - F.qh[p][s] == QMAX)
		return;
	struct fz_msg *x = &F.q[p][s][F.qt[p][s]++ % QMAX];
	memset(x, 0, sizeof(*x));
	x->own = malloc(len ? len : 1);
	ZB_ASSERT(x->own != NULL);
	memcpy(x->own, bytes, len);
	x->m.peer = (uint16_t)(p + 1);
	x->m.stream = (uint16_t)s;
	x->m.msg_id = F.next_id[p][s]++;
	x->m.len = len;
}

/* The transport's first fragment of a queued, undelivered message: placed
 * into the head receive if the provider says so, written in fragments. */
static void place(unsigned p, unsigned s, uint8_t fsel)
{
	for (unsigned k = F.qh[p][s]; k != F.qt[p][s]; k++) {
		struct fz_msg *x = &F.q[p][s][k % QMAX];
		if (x->place_tried || !x->m.len)
			continue;
		x->place_tried = true;
		uint8_t *buf = dp__net_rx_place(0, (uint16_t)(p + 1), (uint16_t)s,
						x->m.msg_id, x->m.len);
		if (!buf)
			return;
		size_t fs = 8u * (1u + fsel % 64);
		for (size_t off = 0; off < x->m.len; off += fs) {
			size_t k2 = x->m.len - off < fs ? x->m.len - off : fs;
			dp__net_rx_write(0, (uint16_t)(p + 1), (uint16_t)s, x->m.msg_id,
					 buf, off, x->own + off, k2);
		}
		x->placed = true;
		x->m.data = buf;
		return;
	}
}

static void unplace(unsigned p, unsigned s)
{
	for (unsigned k = F.qh[p][s]; k != F.qt[p][s]; k++) {
		struct fz_msg *x = &F.q[p][s][k % QMAX];
		if (!x->placed)
			continue;
		dp__net_rx_unplace(0, (uint16_t)(p + 1), (uint16_t)s, x->m.msg_id);
		x->placed = false;   /* reassembled in the arena instead */
		x->m.data = x->own;
		return;
	}
}

static void rq_forget(unsigned i)
{
	free(F.rq[i].buf);
	free(F.rq[i].src);
	F.rq[i] = F.rq[--F.nrq];
}

static void test_all(void)
{
	for (unsigned i = 0; i < F.nrq;) {
		int done = 0;
		size_t got = SIZE_MAX;
		int rc = dp_net_dpdk_ops.test(F.rq[i].req, &done, &got);
		if (!done) {
			i++;
			continue;
		}
		ZB_ASSERT(rc == 0 || rc == -EMSGSIZE || rc == ZB_ERR_BAD_FRAME);
		if (rc == 0)
			ZB_ASSERT(got <= F.rq[i].size);
		rq_forget(i);
	}
}

static void close_comm(unsigned p, unsigned s)
{
	if (!F.comm[p][s])
		return;
	dp_net_dpdk_ops.close_recv(F.comm[p][s]);
	F.comm[p][s] = NULL;
	/* its receives' buffers are ours again (never tested: forgotten) */
	for (unsigned i = 0; i < F.nrq;)
		if (F.rq[i].peer == p && F.rq[i].stream == s)
			rq_forget(i);
		else
			i++;
	/* the transport forgets placements into them (rx_unplace ran) */
	for (unsigned k = F.qh[p][s]; k != F.qt[p][s]; k++) {
		struct fz_msg *x = &F.q[p][s][k % QMAX];
		if (x->placed) {
			x->placed = false;
			x->m.data = x->own;
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!cfg.peers[1].present) {
		cfg.node.id = 0;
		cfg.peers[0].present = cfg.peers[1].present = cfg.peers[2].present = true;
		dp__node.cfg = &cfg;
	}
	memset(&F, 0, sizeof(F));
	C = calloc(1, sizeof(*C));
	ZB_ASSERT(C != NULL);
	C->pins = 1;
	C->lane = 0;
	C->self = 0;
	for (int i = DP_NET_REQS - 1; i >= 0; i--)
		req_put(C, &C->reqs[i]);
	lanes[0] = C;
	const uint8_t *d = data;
	size_t n = size;
	unsigned steps = 0;
	while (n && steps++ < 500) {
		uint8_t op = *d++, b[3];
		n--;
		take(&d, &n, b, 1);
		unsigned p = b[0] & 1, s = (b[0] >> 1) & 1;
		switch (op % 10) {
		case 0:     /* accept (or close) the recv comm */
			if (!F.comm[p][s]) {
				void *cm = NULL;
				ZB_ASSERT(dp_net_dpdk_ops.accept(C, (uint16_t)(p + 1),
						(uint16_t)s, &cm) == 0);
				F.comm[p][s] = cm;
			} else if (b[0] & 0x80) {
				close_comm(p, s);
			}
			break;
		case 1: case 2: {   /* post a receive */
			take(&d, &n, b + 1, 2);
			if (!F.comm[p][s] || F.nrq == NRQ)
				break;
			struct fz_rq *r = &F.rq[F.nrq];
			r->size = sizes[b[1] % 8] + (b[1] & 0x80 ? 4 : 0);
			r->buf = malloc(r->size ? r->size : 1);
			r->src = NULL;
			r->peer = p;
			r->stream = s;
			uint32_t tag = tags[b[2] % 4];
			int rc;
			if (op % 10 == 2 && (b[2] & 0x10)) {
				enum zb_dtype dt = (enum zb_dtype)((b[2] >> 5) % ZB_DTYPE_COUNT);
				r->src = malloc(r->size ? r->size : 1);
				memset(r->src, 1, r->size);
				memset(r->buf, 2, r->size);
				rc = dp_net_dpdk_ops.irecv_reduce(F.comm[p][s], r->size ? r->buf : NULL,
						b[2] & 8 ? r->buf : r->src, r->size, tag, dt,
						(enum zb_redop)(b[2] % ZB_AVG), NULL, &r->req);
			} else {
				rc = dp_net_dpdk_ops.irecv(F.comm[p][s], r->buf, r->size, tag,
							   NULL, &r->req);
			}
			if (rc == 0)
				F.nrq++;
			else {
				free(r->buf);
				free(r->src);
			}
			break;
		}
		case 3: {   /* a header {tag, size} from the peer */
			uint32_t h[2];
			take(&d, &n, b + 1, 2);
			h[0] = tags[b[1] % 4];
			h[1] = (uint32_t)(sizes[b[2] % 8] + (b[2] & 0x80 ? 4 : 0));
			queue_msg(p, s, (const uint8_t *)h, sizeof(h));
			break;
		}
		case 4: {   /* a message of any length (payload, or a bad header) */
			uint8_t m[4100];
			take(&d, &n, b + 1, 1);
			size_t len = sizes[b[1] % 8] + (b[1] >> 6);
			memset(m, 0x5a, len);
			take(&d, &n, m, len < 16 ? len : 16);
			queue_msg(p, s, m, len);
			break;
		}
		case 5:
			deliver(p, s);
			break;
		case 6:
			take(&d, &n, b + 1, 1);
			place(p, s, b[1]);
			break;
		case 7:
			unplace(p, s);
			break;
		case 8:
			test_all();
			break;
		default:
			for (unsigned pp = 0; pp < NPEER; pp++)
				for (unsigned ss = 0; ss < NSTR; ss++)
					deliver(pp, ss);
			test_all();
			break;
		}
	}
	for (unsigned p = 0; p < NPEER; p++)
		for (unsigned s = 0; s < NSTR; s++) {
			close_comm(p, s);
			while (F.qh[p][s] != F.qt[p][s])
				msg_free(&F.q[p][s][F.qh[p][s]++ % QMAX]);
		}
	lanes[0] = NULL;
	free(C);
	return 0;
}
