/* Hostile input: random frames, truncated frames and bit-flipped copies of
 * real frames are fed to tp_rx while real traffic flows. Nothing crashes,
 * every bad frame is counted under a reason, and the traffic still arrives
 * exactly once, in order, intact (UDP checksums on, so a damaged payload
 * byte is caught, not delivered). Then the same with receivers that keep
 * frames (tp_rx_keep, every message of 1 KiB and more taken as its frames):
 * hostile frames never leave a frame held, every kept one goes back once.
 * Fixed seed; `test_fuzz.t SEED` for others. */
#include "tap.h"
#include "traffic.h"

static uint8_t rec[64][SIM_FRAME_MAX];
static size_t rec_len[64];
static uint64_t rec_n;

static void tap_rec(struct sim *s, uint16_t src, const uint8_t *f, size_t len)
{
	(void)s;
	(void)src;
	memcpy(rec[rec_n % 64], f, len);
	rec_len[rec_n % 64] = len;
	rec_n++;
}

static uint64_t fuzz_one(struct sim *s, uint64_t *accepted)
{
	uint8_t buf[SIM_FRAME_MAX + 64];
	uint64_t r = sim_rand(s);
	uint16_t dst = (uint16_t)(r % (uint64_t)s->n);
	size_t len = 0;
	int kind = (int)((r >> 8) % 4);

	if (kind == 0 || rec_n == 0) {            /* random bytes */
		len = (r >> 16) % sizeof(buf);
		for (size_t i = 0; i < len; i++)
			buf[i] = (uint8_t)sim_rand(s);
	} else {
		size_t k = (size_t)((r >> 16) % (rec_n < 64 ? rec_n : 64));
		len = rec_len[k];
		memcpy(buf, rec[k], len);
		if (kind == 1) {                  /* truncated */
			len = (r >> 32) % (len + 1);
		} else if (kind == 2) {           /* one bit flipped */
			if (len) {
				size_t at = sim_rand(s) % len;
				buf[at] ^= (uint8_t)(1u << (sim_rand(s) % 8));
			}
		} else if (len) {                 /* one byte overwritten */
			size_t at = sim_rand(s) % len;
			buf[at] = (uint8_t)(buf[at] + 1 + sim_rand(s) % 255);
		}
	}
	/* Why single-byte damage only: the 16-bit ones'-complement checksums
	 * (IPv4, UDP, zbmd) detect any error confined to one 16-bit word, but
	 * two errors can cancel (docs/wire.md, "Integrity"); on a real link
	 * the Ethernet FCS (CRC-32) is what catches those. */
	int rc = sim_rx(s, s->nodes[dst].tp, buf, len);
	if (rc >= 0)
		(*accepted)++;
	return 1;
}

static bool keep_all(struct sim_node *n, uint16_t peer, uint16_t stream,
		     size_t len)
{
	(void)n;
	(void)peer;
	(void)stream;
	(void)len;
	return true;
}

static void run(uint64_t seed, bool keep)
{
	struct sim_link lossy = {.loss = 0.02, .dup = 0.01, .reorder = 0.1,
				 .delay_ns = 5000, .reorder_ns = 10000};
	struct sim s;
	struct traffic t;
	struct tp_params p;
	uint64_t fuzzed = 0, accepted = 0, bad = 0, by_reason = 0;
	int done = 0, reasons = 0;

	ZB_ASSERT(sim_init(&s, 3, &lossy, seed, 1 << 14) == 0);
	s.keep = keep;
	s.rx_keep = keep ? keep_all : NULL;
	for (uint16_t i = 0; i < 3; i++) {
		sim_params(&p, i, 50 + i);
		p.tx_flags = WIRE_TX_UDP_CSUM;
		p.rx_keep_min = keep ? 1024 : 0;
		p.rx_keep_frames = keep ? 4096 : 0;
		ZB_ASSERT(sim_node_start(&s, i, &p) == 0);
	}
	s.tap = tap_rec;
	tr_init(&t, &s, 500);
	{
		uint64_t end = s.now + 30ull * 1000000000ull;
		while (s.now < end && !done) {
			tr_pump(&t, 32);
			for (int k = 0; k < 8; k++)
				fuzzed += fuzz_one(&s, &accepted);
			sim_step(&s, 20000);
			done = TR_SUM(&t, delivered) == t.target_total &&
			       TR_SUM(&t, done_ok) == t.target_total;
		}
	}
	for (int i = 0; i < 3; i++) {
		const struct tp_stats *st = tp_stats(s.nodes[i].tp);
		bad += st->bad_frames;
		for (int r = 1; r < WIRE_REASON_COUNT; r++)
			by_reason += st->bad[r];
	}
	for (int r = 1; r < WIRE_REASON_COUNT; r++) {
		uint64_t c = 0;
		for (int i = 0; i < 3; i++)
			c += tp_stats(s.nodes[i].tp)->bad[r];
		if (c) {
			reasons++;
			tap_diag("  %-14s %" PRIu64, wire_reason_name((enum wire_reason)r), c);
		}
	}
	tap_diag("seed %" PRIu64 "%s: %" PRIu64 " hostile frames, %" PRIu64
		 " refused, %" PRIu64 " accepted as harmless (duplicates of real ones)",
		 seed, keep ? " (frames kept)" : "", fuzzed, bad, accepted);
	ok(fuzzed > 10000, "fuzzed with %" PRIu64 " frames", fuzzed);
	ok(bad > fuzzed / 2, "most hostile frames refused and counted");
	is_int(by_reason, bad, "every refusal counted under a reason");
	ok(reasons >= 8, "refusals spread over %d different reasons", reasons);
	ok(done, "seed %" PRIu64 ": traffic completed under fuzzing", seed);
	is_int(TR_SUM(&t, delivered), t.target_total, "every real message delivered exactly once");
	is_int(TR_SUM(&t, bad_order) + TR_SUM(&t, bad_content), 0, "in order, content intact");
	if (keep) {
		uint64_t kept = 0;
		for (int i = 0; i < 3; i++)
			kept += tp_stats(s.nodes[i].tp)->frames_kept;
		ok(TR_SUM(&t, kept) > 100 && kept > TR_SUM(&t, kept),
		   "messages delivered as kept frames (%" PRIu64 ", %" PRIu64 " frames)",
		   TR_SUM(&t, kept), kept);
		ok(s.kept_out == 0 && s.kept_frees == kept,
		   "every kept frame given back exactly once (%" PRIu64 " of %" PRIu64 ")",
		   s.kept_frees, kept);
	}
	sim_fini(&s);
	is_int(tr_live_bufs, 0, "zero-copy buffers released");
}

int main(int argc, char **argv)
{
	uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 0) : 1234;

	tap_plan(18);
	run(seed, false);
	run(seed + 1, true);
	return tap_done();
}
