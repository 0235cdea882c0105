/* The lock-free command/event ring: FIFO, bounds, full/empty, and exact
 * delivery with several producers and one consumer (MPSC). */
#include "zbmd/control.h"
#include "zbmd/common.h"
#include "tap.h"

#include <pthread.h>
#include <sched.h>

#define PRODUCERS 4
#define PER 20000

static struct ctl_ring *r;

static void *producer(void *arg)
{
	struct ctl_command c = {.type = CTL_REQ_PEER_DOWN, .node = (uint16_t)(uintptr_t)arg};
	for (uint64_t i = 0; i < PER; i++) {
		c.arg = i;
		while (ctl_ring_enqueue(r, &c) != 0)
			sched_yield();   /* full: an lcore would retry next loop */
	}
	return NULL;
}

int main(void)
{
	struct ctl_event ev, out;
	pthread_t th[PRODUCERS];

	tap_plan(11);
	is_int(ctl_ring_create(&r, 3, 8), -EINVAL, "non-power-of-two capacity refused");
	is_int(ctl_ring_create(&r, 8, 0), -EINVAL, "zero element size refused");
	is_int(ctl_ring_create(&r, 8, sizeof(ev)), 0, "created");
	is_int(ctl_ring_dequeue(r, &out), -EAGAIN, "empty: -EAGAIN");
	int full = 0;
	for (uint64_t i = 0; i < 8; i++) {
		memset(&ev, 0, sizeof(ev));
		ev.epoch = i;
		full |= ctl_ring_enqueue(r, &ev);
	}
	is_int(full, 0, "8 events fit in capacity 8");
	is_int(ctl_ring_enqueue(r, &ev), -ENOBUFS, "9th: -ENOBUFS");
	bool fifo = true;
	for (uint64_t i = 0; i < 8; i++)
		fifo = fifo && ctl_ring_dequeue(r, &out) == 0 && out.epoch == i;
	ok(fifo, "FIFO order, full element copied");
	is_int(ctl_ring_dequeue(r, &out), -EAGAIN, "drained");
	ctl_ring_free(r);

	is_int(ctl_ring_create(&r, 256, sizeof(struct ctl_command)), 0, "command ring");
	for (uintptr_t i = 0; i < PRODUCERS; i++)
		pthread_create(&th[i], NULL, producer, (void *)i);
	uint64_t next[PRODUCERS] = {0}, got = 0;
	bool order = true;
	struct ctl_command c;
	while (got < (uint64_t)PRODUCERS * PER) {
		if (ctl_ring_dequeue(r, &c) != 0)
			continue;
		order = order && c.node < PRODUCERS && c.arg == next[c.node];
		if (c.node < PRODUCERS)
			next[c.node]++;
		got++;
	}
	for (int i = 0; i < PRODUCERS; i++)
		pthread_join(th[i], NULL);
	ok(order, "MPSC: per-producer order kept");
	ok(next[0] == PER && next[1] == PER && next[2] == PER && next[3] == PER &&
	   ctl_ring_dequeue(r, &c) == -EAGAIN, "MPSC: every command delivered exactly once");
	ctl_ring_free(r);
	return tap_done();
}
