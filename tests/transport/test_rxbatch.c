/* params.rx_batch: acks that tp_rx would send at once are held until
 * tp_rx_flush() (one ack per peer per burst), tp_poll flushes them too, and
 * tp_next_deadline() says 0 while any is held. Two instances joined by hand:
 * frames captured from ops->tx and fed to the other side explicitly. */
#include "tap.h"
#include "zbmd/common.h"
#include "zbmd/transport.h"

#include <stdlib.h>
#include <string.h>

#define MAXF 512

struct side {
	struct tp *tp;
	uint8_t *frames[MAXF];
	size_t lens[MAXF];
	int nf;
	int delivered, done_ok, done_err;
};

static int cap_tx(void *user, const struct tp_frame *f)
{
	struct side *s = user;
	if (s->nf == MAXF)
		return 0;   /* "lost" */
	uint8_t *b = malloc(f->hdr_len + f->payload_len);
	ZB_ASSERT(b != NULL);
	memcpy(b, f->hdr, f->hdr_len);
	if (f->payload_len)
		memcpy(b + f->hdr_len, f->payload, f->payload_len);
	s->frames[s->nf] = b;
	s->lens[s->nf++] = f->hdr_len + f->payload_len;
	return 0;
}

static int cap_deliver(void *user, struct tp_msg *m)
{
	struct side *s = user;
	s->delivered++;
	tp_msg_release(s->tp, m);
	return 0;
}

static void cap_done(void *user, uint64_t cookie, int status)
{
	struct side *s = user;
	(void)cookie;
	if (status == 0)
		s->done_ok++;
	else
		s->done_err++;
}

static const struct tp_ops ops = {
	.tx = cap_tx, .deliver = cap_deliver, .send_done = cap_done,
};

static void params(struct tp_params *p, uint16_t id, uint8_t rx_batch)
{
	tp_params_default(p);
	p->node = id;
	p->cluster = 42;
	p->epoch = 100 + id;
	p->max_peers = 4;
	memset(p->mac, 0, 6);
	p->mac[5] = (uint8_t)(id + 1);
	p->ip = 0x0100000a + ((uint32_t)id << 24);   /* 10.0.0.(id+1) */
	p->rx_batch = rx_batch;
}

static void clear(struct side *s)
{
	for (int i = 0; i < s->nf; i++)
		free(s->frames[i]);
	s->nf = 0;
}

/* Feed every frame a sent to b (a's list emptied), one tp_rx each. */
static int feed(struct side *a, struct side *b, uint64_t now)
{
	int bad = 0;
	for (int i = 0; i < a->nf; i++)
		bad += tp_rx(b->tp, a->frames[i], a->lens[i], 0, now) != 0;
	clear(a);
	return bad;
}

static void setup(struct side *a, struct side *b, uint8_t rx_batch)
{
	struct tp_params p;
	memset(a, 0, sizeof(*a));
	memset(b, 0, sizeof(*b));
	params(&p, 0, rx_batch);
	ZB_ASSERT(tp_create(&p, &ops, a, &a->tp) == 0);
	params(&p, 1, rx_batch);
	ZB_ASSERT(tp_create(&p, &ops, b, &b->tp) == 0);
	uint8_t mac[6] = {0, 0, 0, 0, 0, 2};
	ZB_ASSERT(tp_peer_add(a->tp, 1, mac, 0x0200000a) == 0);
	mac[5] = 1;
	ZB_ASSERT(tp_peer_add(b->tp, 0, mac, 0x0100000a) == 0);
}

static void teardown(struct side *a, struct side *b)
{
	clear(a);
	clear(b);
	tp_destroy(a->tp);
	tp_destroy(b->tp);
}

/* n 64-byte messages a -> b in one burst; returns the acks b sent */
static int burst(struct side *a, struct side *b, int n, uint64_t now, int flush)
{
	uint8_t msg[64] = {1};
	for (int i = 0; i < n; i++)
		ZB_ASSERT(tp_send(a->tp, 1, 0, msg, sizeof(msg), NULL, (uint64_t)i, now) == 0);
	ok(a->nf == n, "%d data frames out", n);
	int before = b->nf;
	ok(feed(a, b, now) == 0, "b accepts them");
	if (flush)
		tp_rx_flush(b->tp, now);
	return b->nf - before;
}

int main(void)
{
	struct side a, b;
	uint64_t now = 1000000;
	tap_plan(17);

	/* without rx_batch: an ack per frame that asks for one (each message
	 * empties the send queue, so each carries ACKREQ) */
	setup(&a, &b, 0);
	int acks = burst(&a, &b, 32, now, 0);
	ok(acks >= 16, "rx_batch off: %d acks for a burst of 32 frames", acks);
	teardown(&a, &b);

	/* with rx_batch: nothing until tp_rx_flush, then one ack */
	setup(&a, &b, 1);
	burst(&a, &b, 32, now, 0);
	ok(b.nf == 0, "rx_batch on: no ack inside the burst");
	ok(tp_next_deadline(b.tp) == 0, "held ack: next deadline is now");
	tp_rx_flush(b.tp, now);
	ok(b.nf == 1, "tp_rx_flush: exactly one ack for the burst (%d)", b.nf);
	ok(b.delivered == 32, "all 32 delivered");
	int fed = feed(&b, &a, now + 1000);
	ok(fed == 0 && a.done_ok == 32, "the one ack completes all 32 sends (%d)", a.done_ok);
	ok(tp_next_deadline(b.tp) != 0, "nothing held after the flush");
	tp_rx_flush(b.tp, now);
	ok(b.nf == 0, "a second flush sends nothing");

	/* tp_poll flushes held acks too (a link that forgets tp_rx_flush) */
	acks = burst(&a, &b, 8, now + 2000, 0);
	ok(acks == 0 && b.nf == 0, "second burst: ack held");
	tp_poll(b.tp, now + 2000);
	ok(b.nf == 1, "tp_poll sent the held ack");
	fed = feed(&b, &a, now + 3000);
	ok(fed == 0 && a.done_ok == 40, "40 sends complete (%d)", a.done_ok);
	teardown(&a, &b);
	return tap_done();
}
