/* 1,000,000 messages of mixed sizes between four nodes over a simulated
 * link with 5 % loss, 1 % duplication and 25 % reordering: every message
 * arrives exactly once, in order per (source, stream), content intact. Then
 * the same on several other seeds with fewer messages. The seed of a failing
 * run is in the test name. */
#include "tap.h"
#include "traffic.h"

static void run(int nodes, uint64_t seed, uint64_t total)
{
	struct sim_link lossy = {.loss = 0.05, .dup = 0.01, .reorder = 0.25,
				 .delay_ns = 5000, .reorder_ns = 20000,
				 .jitter_ns = 1000};
	struct sim s;
	struct traffic t;
	struct tp_params p;
	int done;

	ZB_ASSERT(sim_init(&s, nodes, &lossy, seed, 1 << 15) == 0);
	for (uint16_t i = 0; i < nodes; i++) {
		sim_params(&p, i, 1000 + i);
		ZB_ASSERT(sim_node_start(&s, i, &p) == 0);
	}
	tr_init_total(&t, &s, total);
	done = tr_run(&t, 600ull * 1000000000ull, 256);
	ok(done && t.sent_total == total,
	   "seed %" PRIu64 ": %d nodes, all %" PRIu64 " messages sent and acked",
	   seed, nodes, total);
	is_int(TR_SUM(&t, delivered), total,
	       "seed %" PRIu64 ": every message delivered exactly once", seed);
	is_int(TR_SUM(&t, bad_order), 0, "seed %" PRIu64 ": in order per stream", seed);
	is_int(TR_SUM(&t, bad_content), 0, "seed %" PRIu64 ": content intact", seed);
	is_int(TR_SUM(&t, done_ok), total, "seed %" PRIu64 ": send_done 0 for all", seed);
	{
		uint64_t rtx = 0, bad = 0, dups = 0, fast = 0;
		for (int i = 0; i < nodes; i++) {
			const struct tp_stats *st = tp_stats(s.nodes[i].tp);
			rtx += st->retransmits;
			fast += st->fast_retransmits;
			bad += st->bad_frames;
			dups += st->dup_frames;
		}
		tap_diag("seed %" PRIu64 ": %" PRIu64 " frames on the link, %" PRIu64
			 " lost, %" PRIu64 " duplicated, %" PRIu64 " reordered; "
			 "%" PRIu64 " retransmits (%" PRIu64 " fast), %" PRIu64
			 " duplicate frames dropped, %.1f MB delivered, sim %.3f s",
			 seed, s.tx_calls, s.dropped, s.duplicated, s.reordered, rtx,
			 fast, dups, TR_SUM(&t, bytes) / 1e6, (s.now - 1000000) / 1e9);
		ok(s.dropped > 0 && s.duplicated > 0 && s.reordered > 0 && rtx > 0 &&
		   dups > 0, "seed %" PRIu64 ": faults happened and were repaired", seed);
		is_int(bad, 0, "seed %" PRIu64 ": no valid frame refused", seed);
	}
	sim_fini(&s);
	is_int(tr_live_bufs, 0, "seed %" PRIu64 ": zero-copy buffers all released", seed);
}

int main(int argc, char **argv)
{
	uint64_t seeds[] = {11, 12, 13, 14};

	tap_plan(8 * 5);
	run(4, argc > 1 ? strtoull(argv[1], NULL, 0) : 42, argc > 2 ? strtoull(argv[2], NULL, 0) : 1000000);
	for (size_t i = 0; i < ZB_ARRAY_LEN(seeds); i++)
		run(i % 2 ? 2 : 4, seeds[i], 20000);
	return tap_done();
}
