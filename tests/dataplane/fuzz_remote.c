/* libFuzzer entry point for the remote actors' record decoder
 * (dataplane/remote.c zbra_deliver / rx_record / rx_signal: the records a
 * peer node sends to route actor messages, signals, two-part buffer
 * messages) end to end behind the net carrier (remote_net.c) on a fake net
 * provider, into a real actor runtime. `make fuzz-remote` (clang
 * -fsanitize=fuzzer,address,undefined; FUZZ_SECS=30 by default).
 *
 * No EAL runs: remote.c is compiled into this file with rte_ring_create /
 * rte_ring_free on malloc'd rings (rte_ring_init) and the few dataplane
 * calls zbra_attach makes stubbed; [actors] carrier = tcp, whose provider
 * (net_find) is the fake below. Node 0 has three sink actors (mailboxes of
 * 4) and peer node 1; the input is a program of one-byte ops (the switch in
 * LLVMFuzzerTestOneInput) that queues carrier messages holding records
 * (the harness can fix the magic, version and destination up so that the
 * fuzzer reaches the fields behind them), polls the lane and the actors,
 * and moves time. Every input starts from a fresh runtime and lane. A net
 * carrier's streams are 0 - 7 (zbra_attach: first_stream 0). */
#include <rte_ring.h>

#include <stdlib.h>

static struct rte_ring *fz_ring_create(const char *name, unsigned count,
				       int socket, unsigned flags);
static void fz_ring_free(struct rte_ring *r);
#define rte_ring_create fz_ring_create
#define rte_ring_free fz_ring_free
#include "../../dataplane/remote.c"
#undef rte_ring_create
#undef rte_ring_free

#include "zbmd/actors.h"

#define MSG 4096u       /* remote_net.c NC_MSG */
#define NCH 8u
#define FRAG (MSG - NCH)
#define MAGIC 0xa7u
#define QMAX 64u
#define NREQ 256u

static struct rte_ring *fz_ring_create(const char *name, unsigned count,
				       int socket, unsigned flags)
{
	(void)socket;
	ssize_t sz = rte_ring_get_memsize(count);
	ZB_ASSERT(sz > 0);
	struct rte_ring *r = zb_aligned_alloc(RTE_CACHE_LINE_SIZE, (size_t)sz);
	ZB_ASSERT(r != NULL && rte_ring_init(r, name, count, flags) == 0);
	return r;
}
static void fz_ring_free(struct rte_ring *r) { free(r); }

/* ---- the dataplane, as zbra_attach and the lane see it ----------------- */

unsigned dp_lcore_count(void) { return 1; }
struct tp *dp_transport(unsigned lane) { (void)lane; return NULL; }
int dp_set_msg_ops(const struct dp_msg_ops *ops, void *arg)
{
	(void)ops;
	(void)arg;
	return 0;
}
int dp_on_epoch(dp_epoch_fn fn, void *arg)
{
	(void)fn;
	(void)arg;
	return 0;
}
int dp_register_poller(unsigned index, dp_poll_fn fn, void *arg)
{
	(void)index;
	(void)fn;
	(void)arg;
	return 0;
}
int dp_set_actor_hook(dp_actor_fn fn, void *arg)
{
	(void)fn;
	(void)arg;
	return 0;
}
int dp_lcore_index(void) { return 0; }
uint64_t dp_now_ns(uint64_t tsc) { return tsc; }
void net_add_reason(const struct net_ops *ops, char *err, size_t errlen)
{
	(void)ops;
	(void)err;
	(void)errlen;
}

/* ---- the fake provider: receives complete with the queued messages ----- */

struct fz_req {
	int kind;               /* 0 free, 1 send, 2 recv */
	void *buf;
	size_t size;
};

static struct fz {
	struct fz_req req[NREQ];
	struct fz_req *rq[NREQ];
	unsigned rq_head, rq_tail;
	uint8_t in[QMAX][MSG];
	size_t in_len[QMAX];
	unsigned in_head, in_tail;
	bool link_up, fail_next, comm_s, comm_r;
	uint64_t now;
} F;

static int scomm_token, rcomm_token, ctx_token;

static int fz_init(const struct net_init_args *a, void **ctx)
{
	(void)a;
	*ctx = &ctx_token;
	return 0;
}
static void fz_fini(void *ctx) { (void)ctx; }
static int fz_connect(void *ctx, uint16_t peer, uint16_t ch, void **comm)
{
	(void)ctx;
	(void)ch;
	ZB_ASSERT(peer == 1 && !F.comm_s);
	if (!F.link_up)
		return -EAGAIN;
	F.comm_s = true;
	*comm = &scomm_token;
	return 0;
}
static int fz_accept(void *ctx, uint16_t peer, uint16_t ch, void **comm)
{
	(void)ctx;
	(void)ch;
	ZB_ASSERT(peer == 1 && !F.comm_r);
	if (!F.link_up)
		return -EAGAIN;
	F.comm_r = true;
	*comm = &rcomm_token;
	return 0;
}
static struct fz_req *req_new(int kind, void *buf, size_t size)
{
	for (unsigned i = 0; i < NREQ; i++)
		if (!F.req[i].kind) {
			F.req[i] = (struct fz_req){kind, buf, size};
			return &F.req[i];
		}
	return NULL;
}
static int fz_isend(void *comm, const void *data, size_t size, uint32_t tag,
		    void *mh, void **request)
{
	(void)tag;
	(void)mh;
	ZB_ASSERT(comm == &scomm_token && F.comm_s && size >= NCH && size <= MSG);
	volatile uint8_t sink = ((const uint8_t *)data)[size - 1];
	(void)sink;
	struct fz_req *r = req_new(1, (void *)data, size);
	if (!r)
		return -EAGAIN;
	*request = r;
	return 0;
}
static int fz_irecv(void *comm, void *data, size_t size, uint32_t tag,
		    void *mh, void **request)
{
	(void)tag;
	(void)mh;
	ZB_ASSERT(comm == &rcomm_token && F.comm_r && size == MSG);
	struct fz_req *r = req_new(2, data, size);
	if (!r)
		return -EAGAIN;
	F.rq[F.rq_tail++ % NREQ] = r;
	*request = r;
	return 0;
}
static int fz_test(void *request, int *done, size_t *size)
{
	struct fz_req *r = request;
	ZB_ASSERT(r >= F.req && r < F.req + NREQ && r->kind);
	if (r->kind == 1) {
		*done = 1;
		if (size)
			*size = r->size;
		r->kind = 0;
		return 0;
	}
	*done = 0;
	if (F.rq[F.rq_head % NREQ] != r)
		return 0;
	if (F.fail_next) {
		F.fail_next = false;
		*done = 1;
		r->kind = 0;
		F.rq_head++;
		return ZB_ERR_PEER_DOWN;
	}
	if (F.in_head == F.in_tail)
		return 0;
	unsigned k = F.in_head++ % QMAX;
	*done = 1;
	r->kind = 0;
	F.rq_head++;
	memcpy(r->buf, F.in[k], F.in_len[k]);
	if (size)
		*size = F.in_len[k];
	return 0;
}
static void comm_drop(int kind)
{
	for (unsigned i = 0; i < NREQ; i++)
		if (F.req[i].kind == kind)
			F.req[i].kind = 0;
	if (kind == 2)
		F.rq_head = F.rq_tail = 0;
}
static void fz_close_send(void *comm)
{
	ZB_ASSERT(comm == &scomm_token && F.comm_s);
	F.comm_s = false;
	comm_drop(1);
}
static void fz_close_recv(void *comm)
{
	ZB_ASSERT(comm == &rcomm_token && F.comm_r);
	F.comm_r = false;
	comm_drop(2);
}

static const struct net_ops fz_ops = {
	.version = NET_OPS_VERSION, .name = "tcp", .init = fz_init, .fini = fz_fini,
	.connect = fz_connect, .accept = fz_accept, .isend = fz_isend,
	.irecv = fz_irecv, .test = fz_test, .close_send = fz_close_send,
	.close_recv = fz_close_recv,
};

const struct net_ops *net_find(const char *name)
{
	return strcmp(name, "tcp") == 0 ? &fz_ops : NULL;
}

/* ---- actors -------------------------------------------------------------- */

static int sink_handle(struct act_ctx *ctx, struct act_msg *m)
{
	(void)ctx;
	if (m->kind == ACT_PL_BUF && m->u.buf.len) {   /* ASan: every byte */
		const uint8_t *p = (const uint8_t *)m->u.buf.buf->data + m->u.buf.off;
		volatile uint8_t x = p[0] ^ p[m->u.buf.len - 1];
		(void)x;
	}
	return 0;
}
static const struct act_behaviour sink = {.name = "sink", .handle = sink_handle};

/* ---- the program ------------------------------------------------------------ */

static struct zb_config cfg;
static struct act_runtime *rt;
static act_id actors[3];

static void queue(const uint8_t *p, size_t n)
{
	if (F.in_tail - F.in_head == QMAX || n > MSG)
		return;
	unsigned k = F.in_tail++ % QMAX;
	memcpy(F.in[k], p, n);
	F.in_len[k] = n;
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

static void carrier_hdr(uint8_t *p, uint8_t kind, uint16_t stream, uint32_t len)
{
	uint16_t s = htole16(stream);
	uint32_t l = htole32(len);
	p[0] = MAGIC;
	p[1] = kind;
	memcpy(p + 2, &s, 2);
	memcpy(p + 4, &l, 4);
}

/* One record at p (ZBRA_HDR_LEN + payload bytes): its header from the
 * input, fixed up as `fix` says. Returns its length. */
static size_t record(uint8_t *p, size_t room, const uint8_t **d, size_t *n,
		     uint8_t fix, size_t buf_len)
{
	struct zbra_hdr h;
	if (room < sizeof(h))
		return 0;
	take(d, n, &h, sizeof(h));
	if (fix & 1) {
		h.magic = htole32(ZBRA_MAGIC);
		h.version = ZBRA_VERSION;
	}
	if (fix & 2)
		h.to = htole64(actors[h.tag % 3]);
	if (fix & 4)
		h.from = htole64(act_id_make(1, h.ilen % 8, 1 + (h.kind >> 4)));
	if (fix & 8)
		h.kind = (uint8_t)(h.kind % 9);
	if (fix & 16)
		h.tag = htole32(le32toh(h.tag) % 16);
	if (fix & 32) {   /* a signal's shape; tag, ref, reason steered */
		h.kind = ZBRA_KIND_SIG;
		h.split = 0;
		h.ilen = 0;
		h.flags = 0;
		h.ts_ns = 0;
		h.d1 = h.d2 = 0;
		h.tag = htole32(le32toh(h.tag) % 8 + (fix & 64 ? ZBRA_SIG_TICK - 7 : 0));
		h.ref = htole64(le64toh(h.ref) % 4);
		h.d0 = htole64((uint64_t)(int64_t)(int8_t)le64toh(h.d0));
	}
	size_t extra = 0;
	if (h.kind == ACT_PL_INLINE) {
		h.ilen = (uint8_t)(h.ilen % (ACT_INLINE_MAX + 2));
		extra = h.ilen;
	}
	if (buf_len) {   /* a buffer record: the whole message */
		h.kind = ACT_PL_BUF;
		h.split = 0;
		h.d1 = htole64(buf_len - sizeof(h));
		extra = buf_len - sizeof(h);
	}
	if (sizeof(h) + extra > room)
		extra = room - sizeof(h);
	memcpy(p, &h, sizeof(h));
	memset(p + sizeof(h), 0x42, extra);
	return sizeof(h) + extra;
}

/* A remote message of len bytes (records already in msg) as carrier
 * messages: WHOLE, or FIRST + MORE... */
static void send_msg(uint16_t stream, const uint8_t *msg, size_t len)
{
	uint8_t c[MSG];
	if (len <= FRAG) {
		carrier_hdr(c, 1, stream, (uint32_t)len);
		memcpy(c + NCH, msg, len);
		queue(c, NCH + len);
		return;
	}
	for (size_t off = 0; off < len; off += FRAG) {
		size_t k = len - off < FRAG ? len - off : FRAG;
		carrier_hdr(c, off ? 3 : 2, stream, (uint32_t)len);
		memcpy(c + NCH, msg + off, k);
		queue(c, NCH + k);
	}
}

static void setup_node(void)
{
	if (!cfg.peers[1].present) {
		cfg.node.id = 0;
		cfg.peers[0].present = cfg.peers[1].present = true;
		cfg.transport.tcp_port = 7000;
		cfg.transport.peer_timeout_ms = 1000;
		cfg.transport.connect_timeout_ms = 2000;
		cfg.transport.max_message_mb = 1;
		cfg.actors.carrier = CFG_CARRIER_TCP;
		cfg.actors.remote_links = 8;
	}
	struct act_params ap;
	act_params_default(&ap);
	ap.node = 0;
	ap.max_actors = 16;
	ap.mailbox_capacity = 4;
	ap.workers = 1;
	ap.message_pool = 256;
	ap.timers = 16;
	ap.max_names = 4;
	ap.pin = false;
	ZB_ASSERT(act_runtime_create(&ap, &rt) == 0);
	for (int i = 0; i < 3; i++)
		ZB_ASSERT(act_spawn(rt, &sink, NULL, &actors[i]) == 0);
	ZB_ASSERT(zbra_attach(rt, &cfg) == 0);
}

/* zbra_detach, then what it leaves allocated (the lanes stay for a
 * transport that still calls back; here nothing does). */
static void teardown_node(void)
{
	zbra_detach();
	act_runtime_destroy(rt);
	rt = NULL;
	struct zbra_lane *l = &Z.lanes[0];
	fz_ring_free(l->txq);
	fz_ring_free(l->slotq);
	fz_ring_free(l->relq);
	free(l->slots);
	free(l->wraps);
	free(Z.lanes);
	for (unsigned i = 0; i < CFG_MAX_NODES; i++)
		free(Z.rtab[i].e);
	memset(&Z, 0, sizeof(Z));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t msg[3 * FRAG];
	memset(&F, 0, sizeof(F));
	F.now = 1000000000ull;
	F.link_up = true;
	setup_node();
	struct zbra_lane *l = &Z.lanes[0];
	zbra_poll(l, F.now);   /* connects */
	const uint8_t *d = data;
	size_t n = size;
	unsigned steps = 0;
	while (n && steps++ < 1000) {
		uint8_t op = *d++, b[3];
		n--;
		switch (op & 15) {
		case 0: case 1: case 2: case 3: {   /* records in one message */
			take(&d, &n, b, 3);
			size_t len = 0;
			for (unsigned r = 0; r < 1u + b[1] % 4; r++)
				len += record(msg + len, sizeof(msg) - len, &d, &n, b[0], 0);
			send_msg((uint16_t)((b[2] & 7) + (b[2] & 0x80 ? 8 : 0)), msg, len);
			break;
		}
		case 4: {   /* one buffer record, up to 3 fragments */
			static const size_t lens[] = {ZBRA_HDR_LEN, ZBRA_HDR_LEN + 1, 300,
						      FRAG, FRAG + 1, 2 * FRAG + 9};
			take(&d, &n, b, 2);
			size_t len = record(msg, sizeof(msg), &d, &n, b[0] | 1,
					    lens[b[1] % 6]);
			send_msg((uint16_t)(b[1] >> 5), msg, len);
			break;
		}
		case 5: {   /* a two-part message: the header, then its payload */
			static const size_t lens[] = {0, 100, ZBRA_SMALL_MAX, 1000,
						      FRAG + 10};
			take(&d, &n, b, 3);
			struct zbra_hdr h;
			record((uint8_t *)&h, sizeof(h), &d, &n, b[0] | 1, 0);
			size_t pl = lens[b[1] % 5];
			h.kind = ACT_PL_BUF;
			h.split = 1;
			h.ilen = 0;
			h.d1 = htole64(b[2] & 1 ? pl : pl + (b[2] >> 1));
			uint16_t st = (uint16_t)(b[1] >> 5);
			send_msg(st, (uint8_t *)&h, sizeof(h));
			memset(msg, 0x33, pl);
			if (!(b[2] & 2))
				send_msg(st, msg, pl);
			break;
		}
		case 14: {  /* a message over max_message: refused, skipped */
			uint8_t c[MSG];
			take(&d, &n, b, 2);
			uint32_t len = (uint32_t)Z.max_message + 1 + b[0];
			uint16_t st = (uint16_t)(b[1] & 7);
			memset(c + NCH, 0x44, FRAG);
			for (unsigned f = 0; f < 1u + (b[1] >> 3) % 4; f++) {
				carrier_hdr(c, f ? 3 : 2, st, len);
				queue(c, MSG);
			}
			break;
		}
		case 6: {   /* raw carrier bytes */
			uint8_t c[256];
			take(&d, &n, b, 1);
			size_t k = take(&d, &n, c, b[0]);
			queue(c, k);
			break;
		}
		case 7: case 8:
			zbra_poll(l, F.now);
			break;
		case 9:
			act_worker_poll(rt, 0, 64);
			break;
		case 10:
			take(&d, &n, b, 1);
			F.now += (uint64_t)b[0] * 10000000ull;
			break;
		case 11:
			F.fail_next = true;
			break;
		case 12:
			F.link_up = !F.link_up;
			break;
		default:
			for (int i = 0; i < 4; i++) {
				zbra_poll(l, F.now);
				act_worker_poll(rt, 0, 64);
			}
			break;
		}
	}
	F.link_up = true;
	for (int i = 0; i < 32; i++) {
		zbra_poll(l, F.now);
		act_worker_poll(rt, 0, 256);
	}
	teardown_node();
	return 0;
}
