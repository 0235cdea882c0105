/* The blob layer's receiver window, driven directly (no sockets, simulated
 * time): a blob that was deferred (no handler yet) is never acknowledged as
 * delivered, however many later blobs from the same sender pushed it out of
 * the receiver's 1024-seq window (the sender is told "unknown" and counts
 * it failed); blobs to other peers do not move a receiver's window (seqs are
 * per destination); a refused blob whose acknowledgement was lost is
 * acknowledged again as refused, not as delivered. */
#include "../../control/internal.h"
#include "zbmd/common.h"
#include "tap.h"

#include <string.h>

#define NB 3
static struct ctl__blobs *bl[NB];
static int calls[NB][CTL_BLOB_KINDS];
static bool drop_acks;

/* Node i's transmit: straight into the peer's receive path. */
static bool tx(void *arg, uint16_t peer, const struct sockaddr_in *to, uint8_t type,
	       const void *p, size_t len)
{
	uint16_t self = (uint16_t)(uintptr_t)arg;
	(void)to;
	if (type == CTL__MSG_BLOB_ACK && drop_acks)
		return true;
	ctl__blobs_on_msg(bl[peer], type, self, NULL, p, len);
	return true;
}

static int accept_fn(void *arg, uint16_t from, uint8_t kind, const void *b, size_t len)
{
	(void)from;
	(void)b;
	(void)len;
	calls[(uintptr_t)arg][kind]++;
	return 0;
}

static int refuse_fn(void *arg, uint16_t from, uint8_t kind, const void *b, size_t len)
{
	(void)from;
	(void)b;
	(void)len;
	calls[(uintptr_t)arg][kind]++;
	return -EPERM;
}

static struct ctl_blob_stats st(int i)
{
	struct ctl_blob_stats s;
	ctl__blobs_stats(bl[i], &s);
	return s;
}

static void setup(void)
{
	struct ctl_opts o = {0};
	for (int i = 0; i < NB; i++) {
		ctl__blobs_free(bl[i]);
		ZB_ASSERT(ctl__blobs_create(&bl[i], (uint16_t)i, 1000 + (uint64_t)i, &o, tx,
					    (void *)(uintptr_t)i) == 0);
	}
	memset(calls, 0, sizeof(calls));
	drop_acks = false;
}

static uint64_t now = 1000000000ull;

static void run_ms(int ms)
{
	for (int k = 0; k < ms; k++) {
		now += 1000000;
		for (int i = 0; i < NB; i++)
			ctl__blobs_tick(bl[i], now);
	}
}

int main(void)
{
	uint8_t x = 42;

	tap_plan(8);

	/* 1. kind 1 deferred at node 1, then 1100 kind-2 blobs to it, delivered */
	setup();
	ctl__blobs_handle(bl[1], 2, accept_fn, (void *)1);
	ZB_ASSERT(ctl__blobs_enqueue(bl[0], 1, 1, &x, 1) == 0);
	run_ms(1);
	for (int i = 0; i < 1100; i++) {
		ZB_ASSERT(ctl__blobs_enqueue(bl[0], 1, 2, &x, 1) == 0);
		run_ms(1);
	}
	ctl__blobs_handle(bl[1], 1, accept_fn, (void *)1);
	run_ms(1000);
	struct ctl_blob_stats s0 = st(0), s1 = st(1);
	is_int(calls[1][2], 1100, "1100 kind-2 blobs delivered");
	ok(calls[1][1] == 0 && s0.acked == 1100,
	   "the deferred blob, pushed out of the window, is not acknowledged as "
	   "delivered (handler calls %d, acked %llu)", calls[1][1],
	   (unsigned long long)s0.acked);
	ok(s0.failed == 1, "... the sender counts it failed (%llu)",
	   (unsigned long long)s0.failed);
	ok(s1.delivered == 1100, "receiver: delivered %llu", (unsigned long long)s1.delivered);

	/* 2. kind 1 deferred at node 1; 1100 blobs to node 2; one more to node 1 */
	setup();
	ctl__blobs_handle(bl[1], 2, accept_fn, (void *)1);
	ctl__blobs_handle(bl[2], 2, accept_fn, (void *)2);
	ZB_ASSERT(ctl__blobs_enqueue(bl[0], 1, 1, &x, 1) == 0);
	run_ms(1);
	for (int i = 0; i < 1100; i++) {
		ZB_ASSERT(ctl__blobs_enqueue(bl[0], 2, 2, &x, 1) == 0);
		run_ms(1);
	}
	ZB_ASSERT(ctl__blobs_enqueue(bl[0], 1, 2, &x, 1) == 0);
	run_ms(10);
	ctl__blobs_handle(bl[1], 1, accept_fn, (void *)1);
	run_ms(1000);
	s0 = st(0);
	ok(calls[1][1] == 1 && calls[1][2] == 1 && calls[2][2] == 1100,
	   "blobs to another peer do not push a deferred blob out of the window: "
	   "delivered once its handler is there (%d)", calls[1][1]);
	ok(s0.acked == 1102 && s0.failed == 0, "sender: acked %llu, failed %llu",
	   (unsigned long long)s0.acked, (unsigned long long)s0.failed);

	/* 3. refused, the REFUSED ack lost, then the retransmission */
	setup();
	ctl__blobs_handle(bl[1], 3, refuse_fn, (void *)1);
	drop_acks = true;
	ZB_ASSERT(ctl__blobs_enqueue(bl[0], 1, 3, &x, 1) == 0);
	run_ms(1);
	drop_acks = false;
	run_ms(100);
	s0 = st(0);
	is_int(calls[1][3], 1, "refused blob: the handler ran once");
	ok(s0.refused == 1 && s0.acked == 0,
	   "its retransmission is acknowledged as refused, not delivered "
	   "(refused %llu, acked %llu)", (unsigned long long)s0.refused,
	   (unsigned long long)s0.acked);

	for (int i = 0; i < NB; i++)
		ctl__blobs_free(bl[i]);
	return tap_done();
}
