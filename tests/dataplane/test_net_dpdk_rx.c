/* dataplane/net_dpdk.c, receive side, without a node: what a peer's
 * header {tag, size} and payload do to a posted irecv / irecv_reduce, as the
 * transport hands them over (dp__net_deliver, dp__net_rx_place). net_dpdk.c
 * is compiled in (the archive's copy is then never linked: this file
 * defines every symbol of it); its lane context is built by hand (nd_init
 * wants a running node), and it runs as lane 0's lcore.
 *
 * A payload that is not a whole number of elements of a reduce receive's
 * dtype (a broken or hostile peer: 6 bytes for floats) used to be combined
 * as far as it went and reported done with status 0 — and with ZB_DEBUG
 * (make asan) recv_write's assertion aborted the process; rx_place placed
 * such a payload into the receive, whose last fragment then failed the same
 * way. It fails with ZB_ERR_BAD_FRAME now, nothing combined. */
#include "tap.h"
#include "../../dataplane/internal.h"

#include <stdlib.h>

/* the calls come from lane 0's lcore (its ZB_DEBUG assertions check) */
static int fz_lcore_index(void) { return 0; }
#define dp_lcore_index fz_lcore_index
#include "../../dataplane/net_dpdk.c"
#undef dp_lcore_index

#define TAG 0x77u

static struct nd_ctx *C;
static uint32_t msg_id;

static int deliver(const void *data, size_t len)
{
	static uint8_t copy[256] __attribute__((aligned(64)));
	memcpy(copy, data, len);
	struct tp_msg m = {.peer = 1, .stream = 0, .msg_id = msg_id++,
			   .data = len ? copy : NULL, .len = len};
	return dp__net_deliver(0, &m);
}

static int header(uint32_t size)
{
	uint32_t h[2] = {TAG, size};
	return deliver(h, sizeof(h));
}

int main(void)
{
	static struct zb_config cfg;
	cfg.node.id = 0;
	cfg.peers[0].present = cfg.peers[1].present = true;
	dp__node.cfg = &cfg;
	C = calloc(1, sizeof(*C));
	ZB_ASSERT(C != NULL);
	C->pins = 1;
	for (int i = DP_NET_REQS - 1; i >= 0; i--)
		req_put(C, &C->reqs[i]);
	lanes[0] = C;
	const struct net_ops *o = &dp_net_dpdk_ops;
	void *comm = NULL, *req = NULL;
	int done = 0, rc;
	size_t got = 0;

	tap_plan(8);
	ok(o->accept(C, 1, 0, &comm) == 0 && comm, "recv comm from node 1, channel 0");

	/* a well-formed one first: 4 floats summed into 4 floats */
	float dst[4] = {1, 2, 3, 4}, src[4] = {10, 20, 30, 40};
	ok(o->irecv_reduce(comm, dst, dst, sizeof(dst), TAG, ZB_F32, ZB_SUM, NULL,
			   &req) == 0 && header(sizeof(dst)) == 1 &&
	   deliver(src, sizeof(src)) == 1, "irecv_reduce, header, payload");
	rc = o->test(req, &done, &got);
	ok(done && rc == 0 && got == sizeof(dst) && dst[0] == 11 && dst[3] == 44,
	   "16 bytes of floats: done, combined (rc %d, %zu bytes)", rc, got);

	/* 6 bytes for a float receive: one and a half elements */
	float keep[4] = {1, 2, 3, 4};
	ok(o->irecv_reduce(comm, keep, keep, sizeof(keep), TAG, ZB_F32, ZB_SUM, NULL,
			   &req) == 0 && header(6) == 1 && deliver(src, 6) == 1,
	   "irecv_reduce, then a 6-byte payload");
	done = 0;
	rc = o->test(req, &done, &got);
	ok(done && rc == ZB_ERR_BAD_FRAME,
	   "a payload of partial elements fails the receive with BAD_FRAME (rc %d)", rc);
	ok(keep[0] == 1 && keep[1] == 2, "and nothing of it was combined");

	/* placement: 12 bytes announced to a double receive of 16 */
	double d[2] = {1, 2};
	ok(o->irecv_reduce(comm, d, d, sizeof(d), TAG, ZB_F64, ZB_SUM, NULL,
			   &req) == 0 && header(12) == 1 &&
	   dp__net_rx_place(0, 1, 0, msg_id, 12) == NULL,
	   "a 12-byte payload for doubles is not placed into the receive");
	done = 0;
	rc = deliver(src, 12) == 1 ? o->test(req, &done, &got) : 0;
	ok(done && rc == ZB_ERR_BAD_FRAME && d[0] == 1 && d[1] == 2,
	   "delivered through the arena it fails with BAD_FRAME, nothing combined (rc %d)",
	   rc);

	o->close_recv(comm);
	lanes[0] = NULL;
	free(C);
	return tap_done();
}
