/* Shared helpers: error strings, dtype tables, half-precision conversion. */
#include "zbmd/common.h"
#include "tap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(void)
{
	enum zb_dtype t;
	enum zb_redop op;

	tap_plan(21);
	is_str(zb_strerror(ZB_ERR_MAILBOX_FULL), "mailbox full (backpressure)", "project code named");
	is_str(zb_strerror(-ENOMEM), "Cannot allocate memory", "errno named");
	ok(strncmp(zb_strerror(-(ZB_ERR_BASE + 999)), "unknown", 7) == 0, "unknown code named");
	is_int(zb_dtype_parse("bf16", &t), 0, "parse bf16");
	is_int(t, ZB_BF16, "bf16 parsed to ZB_BF16");
	is_int(zb_dtype_parse("nope", &t), -EINVAL, "bad dtype rejected");
	is_int(zb_redop_parse("max", &op), 0, "parse max");
	is_int(zb_dtype_size(ZB_I64), 8, "i64 size");
	/* Every f16 bit pattern that is finite round-trips exactly. */
	int bad = 0;
	for (uint32_t h = 0; h < 0x10000; h++) {
		if (((h >> 10) & 0x1f) == 0x1f)
			continue;
		if (zb_f32_to_f16(zb_f16_to_f32((uint16_t)h)) != h)
			bad++;
	}
	is_int(bad, 0, "f16 round trip exact for all finite values");
	ok(zb_f32_to_f16(1.0f + 1.0f / 4096) == 0x3c00, "f16 rounds to nearest even");
	ok(zb_bf16_to_f32(zb_f32_to_bf16(3.140625f)) == 3.140625f, "bf16 exact value");
	/* Just below 2^-14 rounds up into the smallest normal, not to zero. */
	is_int(zb_f32_to_f16(6.1035e-05f * 0.99999f), 0x0400, "f16 subnormal carry reaches smallest normal");
	is_int(zb_f32_to_f16(-6.1035e-05f * 0.99999f), 0x8400, "negative carry keeps the sign");
	ok(isnan(zb_f16_to_f32(zb_f32_to_f16(NAN))), "f16 NaN stays NaN");

	/* Streaming copy: every destination offset within a line, every
	 * source misalignment, lengths around line multiples; the bytes
	 * copied are the source's and the guard bytes around dst untouched. */
	enum { CAP = 4096 + 256 };
	uint8_t *src = zb_aligned_alloc(64, CAP), *dst = zb_aligned_alloc(64, CAP);
	size_t lens[] = {0, 1, 15, 63, 64, 65, 127, 128, 129, 1344, 1394, 4096};
	int wrong = 0, guard = 0, cases = 0;
	for (size_t i = 0; i < CAP; i++)
		src[i] = (uint8_t)(i * 131 + 7);
	for (size_t doff = 0; doff < 64; doff++)
		for (size_t soff = 0; soff < 16; soff += 3)
			for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
				size_t n = lens[li];
				memset(dst, 0xee, CAP);
				zb_copy_stream(dst + 64 + doff, src + soff, n);
				zb_copy_stream_fence();
				wrong += memcmp(dst + 64 + doff, src + soff, n) != 0;
				for (size_t k = 0; k < 64 + doff; k++)
					guard += dst[k] != 0xee;
				for (size_t k = 64 + doff + n; k < CAP; k++)
					guard += dst[k] != 0xee;
				cases++;
			}
	is_int(wrong, 0, "streaming copy: content right in every alignment and length (%d cases)", cases);
	is_int(guard, 0, "streaming copy: no byte written outside the destination");
	free(src);
	free(dst);

	/* The `auto` of stream_min_kb: an eighth of the last-level cache */
	is_int((long long)zb_stream_min_for_llc(32u << 20), 4 << 20,
	       "stream_min for a 32 MiB L3: 4 MiB");
	is_int((long long)zb_stream_min_for_llc((size_t)480 << 20), 60 << 20,
	       "stream_min for a 480 MiB L3: 60 MiB");
	is_int((long long)zb_stream_min_for_llc(2u << 20), 1 << 20,
	       "stream_min at least 1 MiB (a 2 MiB cache)");
	is_int((long long)zb_stream_min_for_llc(0), 4 << 20,
	       "stream_min 4 MiB where the cache is unknown");
	size_t llc = zb_llc_bytes();
	long l1 = sysconf(_SC_LEVEL1_DCACHE_SIZE);
	tap_diag("last-level cache %zu KiB (L1d %ld)", llc >> 10, l1);
	ok(llc > 0 && llc % 1024 == 0 && (l1 <= 0 || llc >= (size_t)l1),
	   "zb_llc_bytes: %zu KiB, whole KiB, not below L1d", llc >> 10);
	return tap_done();
}
