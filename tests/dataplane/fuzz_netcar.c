/* libFuzzer entry point for the net carrier of remote actor messages
 * (dataplane/remote_net.c): what it parses of the carrier messages a peer
 * sends ({magic, kind, stream, len} + body: WHOLE, FIRST/MORE reassembly,
 * CREDIT, REFUSE, the skip of a refused message). `make fuzz-netcar`
 * (clang -fsanitize=fuzzer,address,undefined; FUZZ_SECS=30 by default).
 *
 * The carrier runs over a fake net provider (below) whose receives complete
 * with the messages the input queues, and with the remote.c upcalls stubbed
 * here: the lane takes, holds back (-EAGAIN) and releases messages as the
 * input says. The input is a program of one-byte ops (fz_step). Oracles
 * besides the sanitizers: every message the carrier accepted hears
 * zbra__send_done at most once; every delivered message lies inside the
 * buffer it was received into or the reassembly arena, with a length the
 * carrier can have received (len <= max_message). */
#include "zbmd/common.h"
#include "zbmd/config.h"
#include "zbmd/net.h"
#include "../../dataplane/remote_car.h"

#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MSG 4096u       /* remote_net.c NC_MSG */
#define HDR 8u
#define FRAG (MSG - HDR)
#define MAGIC 0xa7u
#define MAXMSG (3u * FRAG + 1000u)   /* the carrier's max_message here */
#define QMAX 64u        /* queued incoming messages */
#define NREQ 256u
#define NCOOKIE 4096u

/* ---- the fake provider --------------------------------------------------- */

struct fz_req {
	int kind;               /* 0 free, 1 send, 2 recv */
	void *buf;
	size_t size;
};

static struct fz {
	struct fz_req req[NREQ];
	struct fz_req *rq[NREQ];        /* posted receives, oldest first */
	unsigned rq_head, rq_tail;
	uint8_t in[QMAX][MSG + 64];     /* incoming messages */
	size_t in_len[QMAX];
	unsigned in_head, in_tail;
	bool link_up, fail_next, comm_s, comm_r;
	int deliver_eagain;
	/* the lane */
	struct zbra_netcar *car;
	struct tp_msg *held[256];
	unsigned nheld;
	uint8_t cookie_done[NCOOKIE];
	uint64_t cookie_next;
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
	ZB_ASSERT(comm == &scomm_token && F.comm_s && size >= HDR && size <= MSG);
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
	ZB_ASSERT(F.rq_tail - F.rq_head < NREQ);
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
		return 0;   /* receives complete in posting order */
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
	if (F.in_len[k] > r->size)
		return -EMSGSIZE;   /* as the tcp provider */
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
	.version = NET_OPS_VERSION, .name = "fuzz", .init = fz_init, .fini = fz_fini,
	.connect = fz_connect, .accept = fz_accept, .isend = fz_isend,
	.irecv = fz_irecv, .test = fz_test, .close_send = fz_close_send,
	.close_recv = fz_close_recv,
};

void net_add_reason(const struct net_ops *ops, char *err, size_t errlen)
{
	(void)ops;
	(void)err;
	(void)errlen;
}

/* ---- the lane (remote.c's upcalls) ---------------------------------------- */

int zbra__deliver(unsigned lane, struct tp_msg *m)
{
	ZB_ASSERT(lane == 0 && m != NULL && m->peer == 1 && m->len <= MAXMSG);
	ZB_ASSERT((m->len == 0) == (m->data == NULL));
	uint8_t x = 0;
	for (size_t i = 0; i < m->len; i++)   /* ASan: every byte is ours */
		x ^= m->data[i];
	volatile uint8_t sink = x;
	(void)sink;
	if (F.deliver_eagain || F.nheld == sizeof(F.held) / sizeof(F.held[0]))
		return -EAGAIN;
	F.held[F.nheld++] = m;
	return 0;
}
void zbra__send_done(unsigned lane, uint64_t cookie, int status)
{
	(void)status;
	ZB_ASSERT(lane == 0 && cookie >= 1 && cookie < F.cookie_next && cookie < NCOOKIE);
	ZB_ASSERT(F.cookie_done[cookie] == 0);   /* exactly once */
	F.cookie_done[cookie] = 1;
}
void zbra__peer_event(unsigned lane, uint16_t peer, enum tp_peer_event ev)
{
	(void)ev;
	ZB_ASSERT(lane == 0 && peer == 1);
}
void zbra__refused(unsigned lane, uint16_t peer, uint16_t stream)
{
	(void)stream;
	ZB_ASSERT(lane == 0 && peer == 1);
}

/* ---- the program ------------------------------------------------------------ */

static struct zb_config cfg;
static uint8_t sendbuf[MAXMSG + FRAG];

static size_t take(const uint8_t **d, size_t *n, void *out, size_t want)
{
	size_t k = want < *n ? want : *n;
	memcpy(out, *d, k);
	memset((uint8_t *)out + k, 0, want - k);
	*d += k;
	*n -= k;
	return k;
}

/* A carrier message: raw bytes, or a header the fuzzer steers (valid
 * magic, a kind, a stream) with a body of a length the carrier cares for. */
static void queue_msg(const uint8_t **d, size_t *n)
{
	uint8_t sel[4];
	if (F.in_tail - F.in_head == QMAX)
		return;
	unsigned k = F.in_tail % QMAX;
	uint8_t *p = F.in[k];
	take(d, n, sel, sizeof(sel));
	static const uint32_t lens[] = {0, 1, 8, 64, FRAG - 1, FRAG, FRAG + 1,
					2 * FRAG, 2 * FRAG + 5, MAXMSG, MAXMSG + 1,
					5 * FRAG, 0xffffffffu};
	static const size_t bodies[] = {0, 1, 8, 100, FRAG - 1, FRAG, FRAG + 1, 5};
	size_t body;
	if (sel[0] & 0x80) {   /* raw */
		size_t len = ((size_t)sel[1] << 8 | sel[2]) % (MSG + 64);
		memset(p, 0, len);
		take(d, n, p, len < 64 ? len : 64);
		F.in_len[k] = len;
	} else {
		uint16_t stream = htole16((uint16_t)(sel[1] & 15));
		uint32_t len = htole32(lens[(sel[2] & 15) % (sizeof(lens) / sizeof(lens[0]))]);
		if (sel[2] & 0x80)
			len = htole32((uint32_t)(sel[3] & 0x7f));   /* credits */
		body = bodies[sel[3] % (sizeof(bodies) / sizeof(bodies[0]))];
		p[0] = MAGIC;
		p[1] = (uint8_t)(sel[0] % 7);
		memcpy(p + 2, &stream, 2);
		memcpy(p + 4, &len, 4);
		memset(p + HDR, 0x5a, body);
		take(d, n, p + HDR, body < 8 ? body : 8);
		F.in_len[k] = HDR + body;
	}
	F.in_tail++;
}

static void release_all(void)
{
	while (F.nheld)
		zbra__net_car_ops.release(F.car, F.held[--F.nheld]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[256];
	memset(&F, 0, sizeof(F));
	F.cookie_next = 1;
	F.now = 1000000000ull;
	if (!cfg.peers[1].present) {
		cfg.node.id = 0;
		cfg.peers[0].present = cfg.peers[1].present = true;
		cfg.transport.tcp_port = 7000;
		cfg.transport.peer_timeout_ms = 1000;
		cfg.transport.connect_timeout_ms = 2000;
	}
	ZB_ASSERT(zbra__netcar_create(&cfg, &fz_ops, NULL, 0, MAXMSG, &F.car, err,
				      sizeof(err)) == 0);
	const struct zbra_car_ops *o = &zbra__net_car_ops;
	F.link_up = true;
	o->poll(F.car, F.now);   /* connects */
	const uint8_t *d = data;
	size_t n = size;
	unsigned steps = 0;
	while (n && steps++ < 2000) {
		uint8_t op = *d++, b = 0;
		n--;
		switch (op & 15) {
		case 0: case 1: case 2: case 3:
			queue_msg(&d, &n);
			break;
		case 4: case 5:
			o->poll(F.car, F.now);
			break;
		case 6: {       /* the lane sends */
			static const size_t lens[] = {0, 10, FRAG, FRAG + 1, 2 * FRAG + 7,
						      MAXMSG, MAXMSG + 1, 64};
			take(&d, &n, &b, 1);
			if (F.cookie_next >= NCOOKIE)
				break;
			uint64_t ck = F.cookie_next++;
			int rc = o->send(F.car, 1, (uint16_t)(8 + (b >> 4)), sendbuf,
					 lens[b % 8], NULL, ck, F.now);
			if (rc)
				F.cookie_done[ck] = 2;   /* refused: no send_done */
			break;
		}
		case 7:         /* the lane releases a message */
			take(&d, &n, &b, 1);
			if (F.nheld) {
				unsigned i = b % F.nheld;
				struct tp_msg *m = F.held[i];
				F.held[i] = F.held[--F.nheld];
				o->release(F.car, m);
			}
			break;
		case 8:
			release_all();
			break;
		case 9:
			take(&d, &n, &b, 1);
			F.now += (uint64_t)b * 10000000ull;   /* up to 2.55 s */
			break;
		case 10:
			F.deliver_eagain = !F.deliver_eagain;
			break;
		case 11:        /* the provider fails the next receive */
			F.fail_next = true;
			break;
		case 12:
			F.link_up = !F.link_up;
			break;
		default:
			for (int i = 0; i < 8; i++)
				o->poll(F.car, F.now);
			break;
		}
	}
	F.deliver_eagain = 0;
	F.link_up = true;
	for (int i = 0; i < 64 && F.in_head != F.in_tail; i++) {
		o->poll(F.car, F.now);
		release_all();
	}
	release_all();
	zbra__netcar_destroy(F.car);
	return 0;
}
