/* `make bench-transport-core`: messages/s and goodput of the transport core
 * through the in-process simulated link (sim.h), one direction between two
 * instances on one thread, wall clock. It measures the core's per-frame and
 * per-message cost (plus the simulated link's copies), not a network. */
#include "sim.h"

#include <inttypes.h>
#include <stdio.h>

static uint64_t delivered, bytes, completed;

static int deliver(struct sim_node *n, struct tp_msg *m)
{
	delivered++;
	bytes += m->len;
	tp_msg_release(n->tp, m);
	return 0;
}

static void send_done(struct sim_node *n, uint64_t c, int st)
{
	(void)n;
	(void)c;
	if (st == 0)
		completed++;
}

static void run(const char *name, size_t size, uint64_t count, double loss,
		uint16_t mtu)
{
	struct sim_link l = {.loss = loss, .delay_ns = 2000};
	struct sim s;
	struct tp_params p;
	struct tp_ref ref;
	uint8_t *buf = aligned_alloc(64, size < 64 ? 64 : (size + 63) & ~(size_t)63);
	uint64_t sent = 0, t0, t1;
	const struct tp_stats *st;

	memset(buf, 0x5a, size);
	tp_ref_init(&ref, NULL);   /* static buffer: never freed */
	delivered = bytes = completed = 0;
	if (sim_init(&s, 2, &l, 1, 1 << 14))
		exit(1);
	s.deliver = deliver;
	s.send_done = send_done;
	for (uint16_t i = 0; i < 2; i++) {
		sim_params(&p, i, 1 + i);
		p.mtu = mtu;
		p.window = 1024;
		p.tx_msgs = 2048;
		p.rx_msgs = 2048;
		if (sim_node_start(&s, i, &p))
			exit(1);
	}
	t0 = zb_now_ns();
	while (completed < count) {
		while (sent < count &&
		       tp_send(s.nodes[0].tp, 1, (uint16_t)(sent & 3), buf, size,
			       &ref, sent, s.now) == 0)
			sent++;
		sim_step(&s, 20000);
	}
	t1 = zb_now_ns();
	st = tp_stats(s.nodes[0].tp);
	printf("%-28s %8zu B  loss %4.1f%%  %10.0f msg/s  %8.1f MB/s goodput  "
	       "%6.2f frames/msg  %5.1f%% retransmitted\n",
	       name, size, loss * 100, count / ((t1 - t0) / 1e9),
	       bytes / ((t1 - t0) / 1e9) / 1e6,
	       (double)st->data_frames_tx / count,
	       st->data_frames_tx ? 100.0 * st->retransmits / st->data_frames_tx : 0);
	sim_fini(&s);
	free(buf);
}

int main(void)
{
	printf("transport core through the simulated link (one thread, wall clock)\n");
	run("small, mtu 1500", 64, 2000000, 0, 1500);
	run("small, mtu 1500, lossy", 64, 1000000, 0.05, 1500);
	run("one frame, mtu 1500", 1400, 1000000, 0, 1500);
	run("64 KiB, mtu 1500", 65536, 20000, 0, 1500);
	run("64 KiB, mtu 1500, lossy", 65536, 10000, 0.05, 1500);
	run("1 MiB, mtu 9000", 1 << 20, 2000, 0, 9000);
	run("1 MiB, mtu 9000, lossy", 1 << 20, 1000, 0.05, 9000);
	return 0;
}
