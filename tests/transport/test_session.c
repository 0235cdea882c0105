/* Basic sessions: two and four nodes over a perfect and a lossy simulated
 * link; exactly-once in-order delivery, zero-copy lifetimes, counters. */
#include "tap.h"
#include "traffic.h"

static void *arena_mem[SIM_MAX_NODES];
static int use_arena;

static void count_name(void *arg, const char *name, uint64_t v)
{
	int *n = arg;
	(void)v;
	n[0]++;
	if (strcmp(name, "bad_stale_epoch") == 0 || strcmp(name, "retransmits") == 0)
		n[1]++;
}

static void run(const char *name, int nodes, const struct sim_link *l,
		uint64_t seed, uint64_t per_pair)
{
	struct sim s;
	struct traffic t;
	struct tp_params p;
	int done;
	uint64_t total;

	ZB_ASSERT(sim_init(&s, nodes, l, seed, 1 << 15) == 0);
	for (uint16_t i = 0; i < nodes; i++) {
		sim_params(&p, i, 100 + i);
		if (use_arena) {   /* caller-provided reassembly memory */
			p.rx_arena_bytes = 8u << 20;
			arena_mem[i] = aligned_alloc(4096, p.rx_arena_bytes);
			p.rx_arena = arena_mem[i];
		}
		ZB_ASSERT(sim_node_start(&s, i, &p) == 0);
	}
	tr_init(&t, &s, per_pair);
	done = tr_run(&t, 60ull * 1000000000ull, 64);
	total = t.target_total;
	ok(done, "%s: all %" PRIu64 " messages complete (seed %" PRIu64 ")",
	   name, total, seed);
	is_int(TR_SUM(&t, delivered), total, "%s: delivered exactly once", name);
	is_int(TR_SUM(&t, bad_order) + TR_SUM(&t, bad_content), 0,
	       "%s: in order, content intact", name);
	is_int(TR_SUM(&t, done_ok), total, "%s: every send_done reports 0", name);
	{
		uint64_t rtx = 0, bad = 0, dups = 0;
		for (int i = 0; i < nodes; i++) {
			const struct tp_stats *st = tp_stats(s.nodes[i].tp);
			rtx += st->retransmits;
			bad += st->bad_frames;
			dups += st->dup_frames;
		}
		tap_diag("%s: sim time %.3f s, frames %" PRIu64 ", dropped %" PRIu64
			 ", retransmits %" PRIu64 ", dup frames %" PRIu64,
			 name, (s.now - 1000000) / 1e9, s.tx_calls, s.dropped,
			 rtx, dups);
		is_int(bad, 0, "%s: no frame refused", name);
		if (l->loss > 0)
			ok(rtx > 0, "%s: losses were repaired by retransmission", name);
		else
			is_int(rtx, 0, "%s: perfect link needs no retransmission", name);
	}
	sim_fini(&s);
	is_int(tr_live_bufs, 0, "%s: every zero-copy buffer released", name);
	for (int i = 0; i < nodes; i++) {
		free(arena_mem[i]);
		arena_mem[i] = NULL;
	}
}

int main(void)
{
	struct sim_link perfect = {.delay_ns = 5000};
	struct sim_link lossy = {.loss = 0.05, .dup = 0.01, .reorder = 0.25,
				 .delay_ns = 5000, .reorder_ns = 20000};

	tap_plan(7 * 4 + 3 + 2);
	run("2 nodes perfect", 2, &perfect, 1, 2000);
	run("2 nodes lossy", 2, &lossy, 2, 2000);
	run("4 nodes lossy", 4, &lossy, 3, 300);
	use_arena = 1;
	run("2 nodes lossy, caller's arena", 2, &lossy, 4, 500);
	use_arena = 0;

	/* API errors */
	{
		struct sim s;
		struct tp_params p;
		ZB_ASSERT(sim_init(&s, 2, &perfect, 1, 64) == 0);
		sim_params(&p, 0, 1);
		ZB_ASSERT(sim_node_start(&s, 0, &p) == 0);
		is_int(tp_send(s.nodes[0].tp, 5, 0, "x", 1, NULL, 0, s.now), -ENOENT,
		       "tp_send to an unknown peer: -ENOENT");
		is_int(tp_send(s.nodes[0].tp, 1, 99, "x", 1, NULL, 0, s.now), -EINVAL,
		       "tp_send on a stream out of range: -EINVAL");
		p.window = 100;
		{
			struct tp *bad = NULL;
			is_int(tp_create(&p, &sim_ops, NULL, &bad), -EINVAL,
			       "window not a power of two: -EINVAL");
		}
		{
			int n[2] = {0, 0};
			tp_stats_foreach(tp_stats(s.nodes[0].tp), count_name, n);
			is_int(n[0], 40 + WIRE_REASON_COUNT - 1, "tp_stats_foreach names every counter");
			is_int(n[1], 2, "... including bad_<reason> names");
		}
		sim_fini(&s);
	}
	return tap_done();
}
