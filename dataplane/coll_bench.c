/* coll_bench.c — `zbmd bench allreduce`: nccl-tests' all_reduce_perf, on
 * the zbmd collectives. Same flags, same table, so operators can compare.
 *
 * Every rank runs the same sweep; rank 0 prints. time(us) is the mean over
 * ranks of the mean over iterations; algbw = size / time; busbw = algbw *
 * 2(n-1)/n (the bytes each rank must move, nccl-tests' PERFORMANCE.md).
 * #wrong counts elements (summed over ranks) that differ from the exact
 * expected result, after a separate, re-initialised run (the timed runs
 * reduce their own output again in place, as in nccl-tests).
 */
#include "zbmd/coll.h"
#include "zbmd/config.h"
#include "zbmd/net.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct bench_opts {
	const char *config, *json, *plot, *provider;
	size_t minb, maxb, factor, stepb;
	long iters, warmup;
	int check;
	int blocking;           /* -z: wait for each all-reduce before the next */
	bool dt_all, op_all;
	enum zb_dtype dt;
	enum zb_redop op;
	size_t counts[64];
	int ncounts;
	uint32_t channels, chunk_kb, timeout_ms;
};

struct bench_row {
	size_t bytes, count;
	enum zb_dtype dt;
	enum zb_redop op;
	double us[2], algbw[2], busbw[2];
	long long wrong[2];
	struct coll_stats st;   /* rank 0's timed out-of-place loop */
	struct coll_host_stats hs;  /* ... the lanes' share of it (hosts) */
	double loop_ns;         /* ... wall time of that loop */
};

#define BENCH_MAX_SIZES 256
/* every dtype x every op x every size: a sweep is never cut short */
#define BENCH_MAX_ROWS (ZB_DTYPE_COUNT * ZB_REDOP_COUNT * BENCH_MAX_SIZES)

static void bench_usage(FILE *f)
{
	fprintf(f,
"usage: zbmd bench allreduce -c node.ini [options]\n"
"  -c, --config FILE    node config (a -c value of 0 or 1 is nccl-tests' check)\n"
"  -b, --minbytes N     smallest size (K/M/G suffixes), default 32M\n"
"  -e, --maxbytes N     largest size, default 32M\n"
"  -f, --stepfactor N   multiply the size by N each step, default 2\n"
"  -i, --stepbytes N    add N bytes each step instead (when -f 1), default 1M\n"
"  -n, --iters N        timed iterations per size, default 20\n"
"  -w, --warmup_iters N untimed iterations first, default 5\n"
"  -z, --blocking 0|1   1: wait for each all-reduce before starting the next;\n"
"                       0 (default, as nccl-tests): queue them back to back,\n"
"                       up to 8 in flight, and wait at the end\n"
"      --check 0|1      check every element: of the timed loop's last result\n"
"                       (out of place) and of one more all-reduce on fresh\n"
"                       data, the send buffer kept, nothing written around\n"
"                       the buffers (#wrong counts each); default 1\n"
"  -d, --datatype T     float half bfloat16 double int32 int64, or all (the\n"
"                       last -d wins, as the last -o does)\n"
"  -o, --op OP          sum prod min max avg, or all\n"
"  -N, --counts LIST    element counts (comma list) instead of -b/-e/-f\n"
"      --channels N     override [coll] channels (1..64; dpdk: 8 a lane);\n"
"                       --chunk-kb N, --timeout-ms N\n"
"      --provider NAME  net provider (default: [transport] kind): tcp; dpdk\n"
"                       (starts this node's dataplane in-process from the config:\n"
"                       EAL, ports, one communicator per lcore lane); or rdma\n"
"                       (verbs; needs an RDMA device: [rdma] device/port)\n"
"      --json FILE      write the figures as JSON\n"
"      --plot FILE.png  draw busbw against size (gnuplot)\n");
}

static int parse_size(const char *s, size_t *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || !(v >= 0) || !isfinite(v))
		return -EINVAL;   /* !(v >= 0): NaN too */
	switch (*end) {
	case 'k': case 'K': v *= 1024; end++; break;
	case 'm': case 'M': v *= 1024 * 1024; end++; break;
	case 'g': case 'G': v *= 1024.0 * 1024 * 1024; end++; break;
	}
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end || v > 64.0 * 1024 * 1024 * 1024 || v != floor(v))
		return -EINVAL;   /* a part of a byte: 0.5, 1.3K */
	*out = (size_t)v;
	return 0;
}

static int parse_long(const char *s, long lo, long hi, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -EINVAL;
	*out = v;
	return 0;
}

static int bench_sizes(const struct bench_opts *o, size_t esize, size_t *out,
		       int max);
static int bench_dtypes(const struct bench_opts *o, enum zb_dtype *out);

/* LOCAL: the command zbmd local runs on every node (it gives each node its
 * config: none is needed here, and -c FILE is refused). */
static int bench_parse(int argc, char **argv, struct bench_opts *o, bool local)
{
	enum { O_JSON = 256, O_PLOT, O_CHECK, O_CHANNELS, O_CHUNK, O_TMO, O_PROV };
	static const struct option lo[] = {
		{"config", required_argument, 0, 'c'},
		{"minbytes", required_argument, 0, 'b'},
		{"maxbytes", required_argument, 0, 'e'},
		{"stepfactor", required_argument, 0, 'f'},
		{"stepbytes", required_argument, 0, 'i'},
		{"iters", required_argument, 0, 'n'},
		{"warmup_iters", required_argument, 0, 'w'},
		{"blocking", required_argument, 0, 'z'},
		{"datatype", required_argument, 0, 'd'},
		{"op", required_argument, 0, 'o'},
		{"counts", required_argument, 0, 'N'},
		{"check", required_argument, 0, O_CHECK},
		{"json", required_argument, 0, O_JSON},
		{"plot", required_argument, 0, O_PLOT},
		{"channels", required_argument, 0, O_CHANNELS},
		{"chunk-kb", required_argument, 0, O_CHUNK},
		{"timeout-ms", required_argument, 0, O_TMO},
		{"provider", required_argument, 0, O_PROV},
		{"help", no_argument, 0, 'h'},
		{0, 0, 0, 0}};
	long v;
	int c;

	*o = (struct bench_opts){.minb = 32u << 20, .maxb = 32u << 20,
				 .factor = 2, .stepb = 1u << 20, .iters = 20,
				 .warmup = 5, .check = 1, .dt = ZB_F32, .op = ZB_SUM};
	optind = 1;
	opterr = 0;   /* getopt's own messages name only argv[0] */
	while ((c = getopt_long(argc, argv, ":c:b:e:f:i:n:w:z:d:o:N:h", lo, NULL)) != -1) {
		switch (c) {
		case 'c':
			/* nccl-tests' -c is "check"; ours is also the config. */
			if (strcmp(optarg, "0") == 0 || strcmp(optarg, "1") == 0)
				o->check = optarg[0] - '0';
			else if (!optarg[0])
				goto bad;
			else if (local) {
				fprintf(stderr, "zbmd local: -c/--config %s in the command: "
					"zbmd local writes every node's config itself (-c takes "
					"0 or 1 there, the check; use --set SECTION.KEY=VALUE "
					"for config keys)\n", optarg);
				return -EINVAL;
			} else
				o->config = optarg;
			break;
		case O_CHECK:
			if (parse_long(optarg, 0, 1, &v) < 0)
				goto bad;
			o->check = (int)v;
			break;
		case 'b':
			if (parse_size(optarg, &o->minb) < 0)
				goto bad;
			break;
		case 'e':
			if (parse_size(optarg, &o->maxb) < 0)
				goto bad;
			break;
		case 'f':
			if (parse_long(optarg, 1, 1024, &v) < 0)
				goto bad;
			o->factor = (size_t)v;
			break;
		case 'i':
			if (parse_size(optarg, &o->stepb) < 0 || o->stepb == 0)
				goto bad;
			break;
		case 'n':
			if (parse_long(optarg, 1, 10000000, &o->iters) < 0)
				goto bad;
			break;
		case 'w':
			if (parse_long(optarg, 0, 10000000, &o->warmup) < 0)
				goto bad;
			break;
		case 'z':
			if (parse_long(optarg, 0, 1, &v) < 0)
				goto bad;
			o->blocking = (int)v;
			break;
		case 'd':
			/* the last -d wins, `all` or not */
			if (strcmp(optarg, "all") == 0)
				o->dt_all = true;
			else if (zb_dtype_parse(optarg, &o->dt) < 0)
				goto bad;
			else
				o->dt_all = false;
			break;
		case 'o':
			if (strcmp(optarg, "all") == 0)
				o->op_all = true;
			else if (zb_redop_parse(optarg, &o->op) < 0)
				goto bad;
			else
				o->op_all = false;
			break;
		case 'N': {
			char *s = optarg, *end;
			o->ncounts = 0;
			for (;;) {
				errno = 0;
				unsigned long long n = strtoull(s, &end, 10);
				if (errno || end == s || o->ncounts == 64 ||
				    n > (1ull << 34))
					goto bad;
				o->counts[o->ncounts++] = (size_t)n;
				if (*end == '\0')
					break;
				if (*end != ',')
					goto bad;
				s = end + 1;
			}
			break;
		}
		case O_JSON:
		case O_PLOT:
			if (!optarg[0]) {
				fprintf(stderr, "zbmd bench allreduce: --%s is empty (expected "
					"a file name)\n", c == O_JSON ? "json" : "plot");
				return -EINVAL;
			}
			*(c == O_JSON ? &o->json : &o->plot) = optarg;
			break;
		case O_PROV: o->provider = optarg; break;
		case O_CHANNELS:
			if (parse_long(optarg, 1, 64, &v) < 0)
				goto bad;
			o->channels = (uint32_t)v;
			break;
		case O_CHUNK:
			if (parse_long(optarg, 1, 65536, &v) < 0)
				goto bad;
			o->chunk_kb = (uint32_t)v;
			break;
		case O_TMO:
			if (parse_long(optarg, 1, 3600000, &v) < 0)
				goto bad;
			o->timeout_ms = (uint32_t)v;
			break;
		case 'h':
			/* under zbmd local its nodes print it (zbmd local's own
			 * check printed it too: every usage came twice) */
			if (!local)
				bench_usage(stdout);
			return 1;
		default:   /* ':' or '?' */
			zb_opt_error("zbmd bench allreduce", c, argc, argv, lo);
			bench_usage(stderr);
			return -EINVAL;
		}

	}
	if (optind < argc) {
		fprintf(stderr, "zbmd bench allreduce: unexpected argument '%s'\n",
			argv[optind]);
		return -EINVAL;
	}
	if (!o->config && !local) {
		fprintf(stderr, "zbmd bench allreduce: a node config is required "
			"(-c node.ini)\n");
		return -EINVAL;
	}
	if (o->minb > o->maxb) {
		fprintf(stderr, "zbmd bench allreduce: -b %zu > -e %zu\n", o->minb,
			o->maxb);
		return -EINVAL;
	}
	size_t sizes[BENCH_MAX_SIZES + 1];
	if (!o->ncounts && bench_sizes(o, 1, sizes, BENCH_MAX_SIZES + 1) > BENCH_MAX_SIZES) {
		fprintf(stderr, "zbmd bench allreduce: -b %zu -e %zu with %s %zu is more "
			"than %d sizes: take a larger step\n", o->minb, o->maxb,
			o->factor > 1 ? "-f" : "-i", o->factor > 1 ? o->factor :
			o->stepb, BENCH_MAX_SIZES);
		return -EINVAL;
	}
	return 0;
bad:;
	const char *name = "?", *want;
	for (const struct option *l = lo; l->name; l++)
		if (l->val == c) {
			name = l->name;
			break;
		}
	switch (c) {
	case 'b': case 'e': case 'i':
		want = "a whole number of bytes up to 64G, with K, M or G for "
		       "KiB, MiB, GiB: 1024, 64K, 1.5M";
		if (c == 'i')
			want = "a whole number of bytes from 1 up to 64G, with K, M or "
			       "G for KiB, MiB, GiB: 1024, 64K, 1.5M";
		break;
	case 'f': want = "an integer 1..1024"; break;
	case 'n': want = "an integer 1..10000000"; break;
	case 'w': want = "an integer 0..10000000"; break;
	case 'z': case O_CHECK: want = "0 or 1"; break;
	case 'c': want = "a node config file, or 0 / 1 for nccl-tests' check"; break;
	case 'd': want = "float, half, bfloat16, double, int32, int64 (or f32, f16, "
			 "bf16, f64, i32, i64), or all"; break;
	case 'o': want = "sum, prod, min, max, avg, or all"; break;
	case 'N': want = "up to 64 element counts of at most 2^34, split by commas"; break;
	case O_CHANNELS: want = "an integer 1..64"; break;
	case O_CHUNK: want = "an integer 1..65536 (KiB)"; break;
	default: want = "an integer 1..3600000 (ms)"; break;   /* O_TMO */
	}
	if (c < 256)
		fprintf(stderr, "zbmd bench allreduce: bad value '%s' for -%c/--%s "
			"(expected %s)\n", optarg, c, name, want);
	else
		fprintf(stderr, "zbmd bench allreduce: bad value '%s' for --%s "
			"(expected %s)\n", optarg, name, want);
	return -EINVAL;
}

/* ---- data: exact, per element, per rank ---------------------------------- */

/* A 64-bit mix (a finalizer in the style of MurmurHash3's): element
 * values vary with the element's index at every scale, so a block written
 * at the wrong offset shows however far it moved. */
static inline uint64_t bench_mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

/* min / max: rank r contributes (h + 5r) mod p - p/2 at element i, h a
 * hash of i and p the least prime >= n from 11 to 257: every rank's values
 * differ from every other's (of up to 257 ranks), so each is the only
 * extreme at some elements and a rank left out shows; |v| <= 128 is exact
 * in bf16. */
static uint32_t bench_minmax_mod(uint32_t n)
{
	static _Thread_local uint32_t last_n, last_p;   /* called per element */
	if (n == last_n && last_p)
		return last_p;
	uint32_t p = n < 11 ? 11 : n > 257 ? 257 : n;
	for (;; p++) {
		bool prime = true;
		for (uint32_t d = 2; d * d <= p && prime; d++)
			prime = p % d != 0;
		if (prime)
			break;
	}
	last_n = n;
	last_p = p;
	return p;
}

/* sum / avg: rank r >= 1 deviates from the element's base value b(i) by
 * its own d_r(i) in -2..2; rank 0 by minus their sum. */
static int bench_dev(uint32_t r, size_t i)
{
	return (int)(bench_mix((uint64_t)i ^ ((uint64_t)r << 40) ^ 0x5bd1e995ull) % 5) - 2;
}

static double bench_base(size_t i)
{
	return (double)(bench_mix((uint64_t)i) % 4 + 1);
}

/* The value rank r contributes at element i. Small integers (and their
 * products ±2^k), so that every dtype represents every partial result
 * exactly for up to 32 ranks: a wrong element is a real error. Each rank's
 * values are its own (a rank's data counted twice or left out shows) and
 * vary with i through a hash (a misplaced block shows). */
static double bench_value(enum zb_redop op, uint32_t r, uint32_t n, size_t i)
{
	switch (op) {
	case ZB_SUM:
	case ZB_AVG: {          /* the d_r sum to 0: sum = n*b, avg = b exactly */
		int d = 0;
		if (r)
			d = bench_dev(r, i);
		else
			for (uint32_t q = 1; q < n; q++)
				d -= bench_dev(q, i);
		return bench_base(i) + d;
	}
	case ZB_PROD: {         /* 2 at ~n/5 ranks an element, -1 at ~n/7 */
		uint64_t h = bench_mix((uint64_t)i ^ 0x27d4eb2full);
		if ((h % 5 + r) % 5 == 0)
			return 2.0;
		return ((h >> 16) % 7 + 3 * (uint64_t)r) % 7 == 0 ? -1.0 : 1.0;
	}
	default: {              /* min, max */
		uint32_t p = bench_minmax_mod(n);
		uint64_t h = bench_mix((uint64_t)i ^ 0x165667b1ull);
		return (double)((h % p + (uint64_t)r * 5) % p) - (double)(p / 2);
	}
	}
}

static double bench_expected(enum zb_redop op, uint32_t n, size_t i)
{
	double v;

	switch (op) {
	case ZB_SUM: return (double)n * bench_base(i);
	case ZB_AVG: return bench_base(i);
	default: break;
	}
	v = bench_value(op, 0, n, i);
	for (uint32_t r = 1; r < n; r++) {
		double x = bench_value(op, r, n, i);
		v = op == ZB_PROD ? v * x : op == ZB_MIN ? fmin(v, x) : fmax(v, x);
	}
	return v;
}

static void bench_store(void *buf, enum zb_dtype dt, size_t i, double v)
{
	switch (dt) {
	case ZB_F32: ((float *)buf)[i] = (float)v; break;
	case ZB_F64: ((double *)buf)[i] = v; break;
	case ZB_F16: ((uint16_t *)buf)[i] = zb_f32_to_f16((float)v); break;
	case ZB_BF16: ((uint16_t *)buf)[i] = zb_f32_to_bf16((float)v); break;
	case ZB_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
	case ZB_I64: ((int64_t *)buf)[i] = (int64_t)v; break;
	default: ZB_ASSERT(0);
	}
}

static double bench_load(const void *buf, enum zb_dtype dt, size_t i)
{
	switch (dt) {
	case ZB_F32: return ((const float *)buf)[i];
	case ZB_F64: return ((const double *)buf)[i];
	case ZB_F16: return zb_f16_to_f32(((const uint16_t *)buf)[i]);
	case ZB_BF16: return zb_bf16_to_f32(((const uint16_t *)buf)[i]);
	case ZB_I32: return ((const int32_t *)buf)[i];
	case ZB_I64: return (double)((const int64_t *)buf)[i];
	default: ZB_ASSERT(0); return 0;
	}
}

static void bench_init(void *buf, enum zb_dtype dt, enum zb_redop op,
		       uint32_t r, uint32_t n, size_t count)
{
	for (size_t i = 0; i < count; i++)
		bench_store(buf, dt, i, bench_value(op, r, n, i));
}

/* Elements of buf that are not the expected result. avg on floats allows
 * the one rounding of the final scale (a relative 2^-mantissa). */
static long long bench_check(const void *buf, enum zb_dtype dt, enum zb_redop op,
			     uint32_t n, size_t count)
{
	double tol = 0;
	long long wrong = 0;

	if (op == ZB_AVG)
		tol = dt == ZB_F16 ? 1.0 / 1024 : dt == ZB_BF16 ? 1.0 / 128
		      : dt == ZB_F32 ? 1.0 / (1 << 23) : dt == ZB_F64 ? 1e-15 : 0;
	for (size_t i = 0; i < count; i++) {
		double want = bench_expected(op, n, i), got = bench_load(buf, dt, i);
		if (!(fabs(got - want) <= tol * fabs(want)))
			wrong++;
	}
	return wrong;
}

/* Elements of rank r's send buffer that no longer hold what it sent. */
static long long bench_changed(const void *buf, enum zb_dtype dt, enum zb_redop op,
			       uint32_t r, uint32_t n, size_t count)
{
	long long changed = 0;

	for (size_t i = 0; i < count; i++)
		changed += !(bench_load(buf, dt, i) == bench_value(op, r, n, i));
	return changed;
}

/* Guard bytes on each side of a buffer's `bytes` (the allocation has room
 * for them): a collective writing outside its count shows in #wrong. */
#define BENCH_GUARD 64
#define BENCH_GUARD_BYTE 0x5a

static void bench_guard_set(void *buf, size_t bytes)
{
	memset((char *)buf - BENCH_GUARD, BENCH_GUARD_BYTE, BENCH_GUARD);
	memset((char *)buf + bytes, BENCH_GUARD_BYTE, BENCH_GUARD);
}

static long long bench_guard_hits(const void *buf, size_t bytes)
{
	const unsigned char *lo = (const unsigned char *)buf - BENCH_GUARD;
	const unsigned char *hi = (const unsigned char *)buf + bytes;
	long long hits = 0;

	for (size_t k = 0; k < BENCH_GUARD; k++)
		hits += (lo[k] != BENCH_GUARD_BYTE) + (hi[k] != BENCH_GUARD_BYTE);
	return hits;
}

/* ---- running one size ---------------------------------------------------- */

/* A defect put into the checked all-reduce on purpose, to show that the
 * check finds it (tests only): ZBMD_BENCH_FAULT="NODE:KIND" makes node
 * NODE's rank send rank 1's values (same-data: one rank's data counted
 * twice, another's left out), move its result K elements up (shift=K),
 * write the byte after (overrun) or before (underrun) its result, or change
 * its send buffer after the all-reduce (src). */
enum bench_fault_kind { BF_NONE, BF_SAME_DATA, BF_SHIFT, BF_OVERRUN, BF_UNDERRUN,
			BF_SRC };

struct bench_fault {
	enum bench_fault_kind kind;
	size_t k;
};

static int bench_fault_parse(const char *v, uint32_t node, struct bench_fault *f)
{
	static const struct { const char *name; enum bench_fault_kind kind; } kinds[] = {
		{"same-data", BF_SAME_DATA}, {"overrun", BF_OVERRUN},
		{"underrun", BF_UNDERRUN}, {"src", BF_SRC}};
	char *end;

	*f = (struct bench_fault){BF_NONE, 0};
	if (!v || !*v)
		return 0;
	unsigned long nd = strtoul(v, &end, 10);
	if (end == v || *end != ':')
		return -EINVAL;
	const char *kind = end + 1;
	struct bench_fault g = {BF_NONE, 0};
	for (size_t i = 0; i < ZB_ARRAY_LEN(kinds); i++)
		if (strcmp(kind, kinds[i].name) == 0)
			g.kind = kinds[i].kind;
	if (strncmp(kind, "shift=", 6) == 0) {
		unsigned long k = strtoul(kind + 6, &end, 10);
		if (end == kind + 6 || *end || k == 0)
			return -EINVAL;
		g = (struct bench_fault){BF_SHIFT, k};
	}
	if (g.kind == BF_NONE)
		return -EINVAL;
	if (nd == node)
		*f = g;
	return 0;
}

/* After the checked all-reduce: the defect asked for, if any. */
static void bench_fault_apply(const struct bench_fault *f, void *src, void *dst,
			      size_t count, size_t es, bool ip)
{
	switch (f->kind) {
	case BF_SHIFT:
		if (f->k < count)
			memmove((char *)dst + f->k * es, dst, (count - f->k) * es);
		break;
	case BF_OVERRUN: ((unsigned char *)dst)[count * es] ^= 1; break;
	case BF_UNDERRUN: ((unsigned char *)dst)[-1] ^= 1; break;
	case BF_SRC:
		if (!ip && count)
			((unsigned char *)src)[0] ^= 0x40;
		break;
	default: break;
	}
}

struct bench_ctx {
	struct coll_comm *comm;         /* comms[0]: names, rank, errors */
	struct coll_hosted h;           /* comms, one per dataplane lane (dpdk) */
	const struct bench_opts *o;
	const struct zb_config *cfg;
	void *sbuf, *rbuf;
	uint32_t n, rank;
	struct bench_row *rows;
	int nrows, status;
	struct bench_fault fault;
};

#define BENCH_INFLIGHT 8      /* queued all-reduces per communicator (-z 0) */
static_assert(BENCH_INFLIGHT <= COLL_MAX_OPS, "the communicator queues them");

/* iters all-reduces over every communicator (lane k reduces part k),
 * queued up to `window` deep per communicator: nccl-tests launches its
 * iterations on a stream back to back and synchronizes at the end, and so
 * do the lanes here — each starts the next all-reduce as soon as the one
 * before it finished on this rank, without waiting for this thread.
 * window 1: each waited for before the next starts. */
static int bench_allreduce_n(struct bench_ctx *b, const void *src, void *dst,
			     size_t count, enum zb_dtype dt, enum zb_redop op,
			     long iters, long window)
{
	struct coll_op *ops[COLL_HOST_MAX_LANES][BENCH_INFLIGHT];
	long nstart[COLL_HOST_MAX_LANES] = {0}, nwait[COLL_HOST_MAX_LANES] = {0};
	size_t es = zb_dtype_size(dt);
	int rc = 0;

	ZB_ASSERT(window >= 1 && window <= BENCH_INFLIGHT);
	for (long it = 0; it < iters && rc == 0; it++) {
		for (unsigned k = 0; k < b->h.ncomm && rc == 0; k++) {
			if (nstart[k] - nwait[k] == window &&
			    (rc = coll_wait(b->h.comms[k], ops[k][nwait[k]++ % BENCH_INFLIGHT])) < 0)
				break;
			size_t lo = coll_split(count, b->h.ncomm, k);
			size_t hi = coll_split(count, b->h.ncomm, k + 1);
			struct coll_args a = {.kind = COLL_ALLREDUCE,
					      .sendbuf = (const char *)src + lo * es,
					      .recvbuf = (char *)dst + lo * es,
					      .count = hi - lo, .dtype = dt, .op = op};
			if ((rc = coll_start(b->h.comms[k], &a,
					     &ops[k][nstart[k] % BENCH_INFLIGHT])) < 0)
				break;
			nstart[k]++;
		}
	}
	for (unsigned k = 0; k < b->h.ncomm; k++)
		while (nwait[k] < nstart[k]) {
			int st = coll_wait(b->h.comms[k], ops[k][nwait[k]++ % BENCH_INFLIGHT]);
			if (st < 0 && rc == 0)
				rc = st;
		}
	return rc;
}

static int bench_allreduce(struct bench_ctx *b, const void *src, void *dst,
			   size_t count, enum zb_dtype dt, enum zb_redop op)
{
	return bench_allreduce_n(b, src, dst, count, dt, op, 1, 1);
}

static int bench_barrier(struct bench_ctx *b)
{
	for (unsigned k = 0; k < b->h.ncomm; k++) {
		int rc = coll_barrier(b->h.comms[k]);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static void bench_stats_reset(struct bench_ctx *b)
{
	for (unsigned k = 0; k < b->h.ncomm; k++)
		coll_stats_reset(b->h.comms[k]);
}

/* Sum over the lanes' communicators (they run side by side). */
static void bench_stats_get(struct bench_ctx *b, struct coll_stats *out)
{
	memset(out, 0, sizeof(*out));
	for (unsigned k = 0; k < b->h.ncomm; k++) {
		struct coll_stats s;
		coll_stats_get(b->h.comms[k], &s);
		out->collectives += s.collectives;
		out->messages += s.messages;
		out->bytes_sent += s.bytes_sent;
		out->bytes_received += s.bytes_received;
		out->reduce_ns += s.reduce_ns;
		out->copy_ns += s.copy_ns;
		out->wait_ns += s.wait_ns;
		out->post_ns += s.post_ns;
		out->test_ns += s.test_ns;
		out->recvs_direct += s.recvs_direct;
		out->recvs_cold += s.recvs_cold;
		if (s.blocking_ns > out->blocking_ns)
			out->blocking_ns = s.blocking_ns;
	}
}

static const char *bench_error(const struct bench_ctx *b)
{
	for (unsigned k = 0; k < b->h.ncomm; k++)
		if (coll_error(b->h.comms[k])[0])
			return coll_error(b->h.comms[k]);
	return "failed (no error recorded)";
}

/* One measurement: in-place or out-of-place. Returns 0 or a coll error. */
static int bench_one(struct bench_ctx *b, struct bench_row *row, int ip)
{
	void *dst = b->rbuf, *src = ip ? b->rbuf : b->sbuf;
	size_t count = row->count;
	uint64_t t0;
	double us, sum_us;
	long long wrong = 0;
	int64_t w64;
	int rc;

	struct coll_host_stats hs0 = {0};

	long window = b->o->blocking ? 1 : BENCH_INFLIGHT;
	const size_t es = zb_dtype_size(row->dt), bytes = count * es;
	bench_init(src, row->dt, row->op, b->rank, b->n, count);
	bench_guard_set(src, bytes);
	bench_guard_set(dst, bytes);
	if ((rc = bench_allreduce_n(b, src, dst, count, row->dt, row->op,
				    b->o->warmup, window)) < 0)
		return rc;
	if ((rc = bench_barrier(b)) < 0)
		return rc;
	bench_stats_reset(b);
	if (b->h.host && b->h.host->stats)
		b->h.host->stats(b->h.hh, &hs0);
	t0 = zb_now_ns();
	if ((rc = bench_allreduce_n(b, src, dst, count, row->dt, row->op,
				    b->o->iters, window)) < 0)
		return rc;
	double loop_ns = (double)(zb_now_ns() - t0);
	us = loop_ns / 1e3 / (double)b->o->iters;
	if (!ip) {
		row->loop_ns = loop_ns;
		bench_stats_get(b, &row->st);
		if (b->h.host && b->h.host->stats) {
			struct coll_host_stats hs1;
			b->h.host->stats(b->h.hh, &hs1);
			row->hs = (struct coll_host_stats){
				.lanes = hs1.lanes,
				.coll_ns = hs1.coll_ns - hs0.coll_ns,
				.idle_ns = hs1.idle_ns - hs0.idle_ns,
				.loop_ns = hs1.loop_ns - hs0.loop_ns,
				.rx_burst_ns = hs1.rx_burst_ns - hs0.rx_burst_ns,
				.tx_burst_ns = hs1.tx_burst_ns - hs0.tx_burst_ns,
				.recv_copy_ns = hs1.recv_copy_ns - hs0.recv_copy_ns,
				.recv_reduce_ns = hs1.recv_reduce_ns - hs0.recv_reduce_ns,
				.rx_packets = hs1.rx_packets - hs0.rx_packets,
				.tx_packets = hs1.tx_packets - hs0.tx_packets,
				.msgs_delivered = hs1.msgs_delivered - hs0.msgs_delivered,
				.msgs_placed = hs1.msgs_placed - hs0.msgs_placed};
		}
	}
	if (b->o->check) {
		/* Out of place, the timed loop's last all-reduce (queued behind
		 * the others with -z 0) left the result in dst, and src as it
		 * was sent. Then one blocking all-reduce on fresh data, in place
		 * too; and nothing written outside the buffers by any of them. */
		if (!ip)
			wrong += bench_check(dst, row->dt, row->op, b->n, count) +
				 bench_changed(src, row->dt, row->op, b->rank, b->n, count);
		const uint32_t srank = b->fault.kind == BF_SAME_DATA && b->n > 1 ? 1 : b->rank;
		bench_init(src, row->dt, row->op, srank, b->n, count);
		if (!ip)
			memset(dst, 0xa5, bytes);
		if ((rc = bench_allreduce(b, src, dst, count, row->dt, row->op)) < 0)
			return rc;
		bench_fault_apply(&b->fault, src, dst, count, es, ip);
		wrong += bench_check(dst, row->dt, row->op, b->n, count);
		if (!ip)
			wrong += bench_changed(src, row->dt, row->op, srank, b->n, count) +
				 bench_guard_hits(src, bytes);
		wrong += bench_guard_hits(dst, bytes);
	}
	/* Figures agreed by all ranks: mean time, total wrong (on lane 0). */
	if ((rc = coll_allreduce(b->comm, &us, &sum_us, 1, ZB_F64, ZB_AVG)) < 0)
		return rc;
	w64 = wrong;
	if ((rc = coll_allreduce(b->comm, &w64, &w64, 1, ZB_I64, ZB_SUM)) < 0)
		return rc;
	row->us[ip] = sum_us;
	row->algbw[ip] = sum_us > 0 ? (double)row->bytes / sum_us / 1e3 : 0;
	row->busbw[ip] = row->algbw[ip] * (b->n > 1 ? 2.0 * (b->n - 1) / b->n : 0);
	row->wrong[ip] = b->o->check ? w64 : -1;
	return 0;
}

static void bench_print_row(const struct bench_row *r)
{
	printf("%12zu  %12zu  %8s  %6s", r->bytes, r->count, zb_dtype_name(r->dt),
	       zb_redop_name(r->op));
	for (int ip = 0; ip < 2; ip++) {
		printf("  %8.1f  %6.2f  %6.2f", r->us[ip], r->algbw[ip], r->busbw[ip]);
		if (r->wrong[ip] < 0)
			printf("  %6s", "N/A");
		else
			printf("  %6lld", r->wrong[ip]);
	}
	printf("\n");
	fflush(stdout);
}

static unsigned bench_channels(const struct bench_ctx *b)
{
	unsigned n = 0;
	for (unsigned k = 0; k < b->h.ncomm; k++)
		n += coll_channels(b->h.comms[k]);
	return n;
}

static void bench_header(const struct bench_ctx *b, const struct zb_config *cfg)
{
	const struct bench_opts *o = b->o;
	printf("# zbmd bench allreduce: cluster %u, nodes %u, rank %u (node %u), "
	       "transport %s, lcores %u, channels %u, chunk %u KiB, timeout %u ms\n",
	       cfg->cluster.id, b->n, b->rank, cfg->node.id, coll_provider(b->comm),
	       cfg->eal.lcore_count ? cfg->eal.lcore_count : 1,
	       bench_channels(b), coll_chunk_bytes(b->comm) / 1024,
	       o->timeout_ms ? o->timeout_ms : cfg->coll.timeout_ms);
	if (b->h.host && b->h.host->describe) {
		char d[256];
		b->h.host->describe(b->h.hh, d, sizeof(d));
		printf("# %s\n", d);
	}
	if (o->ncounts)
		printf("# counts: %d given (-N)", o->ncounts);
	else
		printf("# minBytes %zu maxBytes %zu step: %zu(%s)", o->minb, o->maxb,
		       o->factor == 1 ? o->stepb : o->factor,
		       o->factor == 1 ? "bytes" : "factor");
	printf(" warmup iters: %ld iters: %ld validation: %d blocking: %d\n#\n",
	       o->warmup, o->iters, o->check, o->blocking);
	printf("# %10s  %12s  %8s  %6s  %32s  %32s\n", "", "", "", "",
	       "out-of-place", "in-place");
	printf("# %10s  %12s  %8s  %6s", "size", "count", "type", "redop");
	for (int i = 0; i < 2; i++)
		printf("  %8s  %6s  %6s  %6s", "time", "algbw", "busbw", "#wrong");
	printf("\n# %10s  %12s  %8s  %6s", "(B)", "(elements)", "", "");
	for (int i = 0; i < 2; i++)
		printf("  %8s  %6s  %6s  %6s", "(us)", "(GB/s)", "(GB/s)", "");
	printf("\n");
	fflush(stdout);
}

/* Where rank 0's time went in the last row's timed out-of-place loop. */
static void bench_breakdown(const struct bench_row *r, long iters)
{
	const struct coll_stats *s = &r->st;
	double tot = (double)s->blocking_ns / 1e3 / (double)iters;
	double red = (double)s->reduce_ns / 1e3 / (double)iters;
	double cp = (double)s->copy_ns / 1e3 / (double)iters;
	double wt = (double)s->wait_ns / 1e3 / (double)iters;
	double rest = tot - red - cp - wt;

	if (r->hs.lanes && r->hs.loop_ns) {
		/* Hosted (dpdk): the collectives run on the lanes' lcores; the
		 * caller only waits. Split the lanes' time instead: the parts
		 * are disjoint (coll_host_stats), the transport's rest is what
		 * none of them covers. */
		const struct coll_host_stats *h = &r->hs;
		double it = (double)iters, lt = (double)h->loop_ns / 1e3 / it;
		double co = (double)h->coll_ns / 1e3 / it, id = (double)h->idle_ns / 1e3 / it;
		double rxb = (double)h->rx_burst_ns / 1e3 / it;
		double txb = (double)h->tx_burst_ns / 1e3 / it;
		double rcp = (double)h->recv_copy_ns / 1e3 / it;
		double rrd = (double)h->recv_reduce_ns / 1e3 / it;
		double tp = lt - co - id - rxb - txb - rcp - rrd;
		double wall = r->loop_ns / 1e3 / it;
		double ps = (double)s->post_ns / 1e3 / it;
		double ts = (double)s->test_ns / 1e3 / it;
		if (lt <= 0)
			return;
		if (tp < 0)
			tp = 0;
		printf("# Where the time goes at %zu B (rank 0, out-of-place, per all-reduce, "
		       "%.0f us wall; %u lane(s), %.0f us of lcore time):\n"
		       "#   copies by the port drivers: RX bursts %.0f us (%.0f%%), TX bursts "
		       "%.0f us (%.0f%%) (memif: the PMD's copies out of and into the shared rings)\n"
		       "#   into the receive buffers: reductions %.0f us (%.0f%%), copies %.0f us "
		       "(%.0f%%) (fused with the receive, fragment by fragment)\n"
		       "#   the rest of the transport and provider %.0f us (%.0f%%): frame "
		       "checks, reassembly, acks, timers, the loop itself\n"
		       "#   collectives on the lcores (polls that did work) %.0f us (%.0f%%): "
		       "reductions %.0f us outside the receives, local copies %.0f us\n"
		       "#     (over all polls, idle ones too) provider isend %.0f us + test "
		       "%.0f us: tp_send framing the chunks into frames, zero-copy; test() "
		       "hands over payloads the window held back\n"
		       "#   idle (waiting for the peers' data, sleeps included) %.0f us (%.0f%%)\n"
		       "#   %.1f MB sent, %.1f MB received, %.0f messages, %.0f frames out, "
		       "%.0f frames in per all-reduce\n"
		       "#   payloads received in place %.0f of %.0f per all-reduce (the others "
		       "waited in the reassembly arena for their receive: one more copy)\n"
		       "#   all-gather receives written past the caches %.0f of %.0f per "
		       "all-reduce ([coll] stream_min_kb)\n#\n",
		       r->bytes, wall, h->lanes, lt, rxb, 100 * rxb / lt, txb, 100 * txb / lt,
		       rrd, 100 * rrd / lt, rcp, 100 * rcp / lt, tp, 100 * tp / lt,
		       co, 100 * co / lt, red, cp, ps, ts,
		       id, 100 * id / lt,
		       (double)s->bytes_sent / 1e6 / it, (double)s->bytes_received / 1e6 / it,
		       (double)s->messages / it, (double)h->tx_packets / it,
		       (double)h->rx_packets / it, (double)h->msgs_placed / it,
		       (double)h->msgs_delivered / 2 / it,
		       (double)s->recvs_cold / it, (double)s->recvs_direct / it);
		return;
	}
	if (tot <= 0 || !s->messages)
		return;
	printf("# Where the time goes at %zu B (rank 0, out-of-place, per all-reduce, "
	       "%.0f us):\n#   reduce %.0f us (%.0f%%), copies %.0f us (%.0f%%), "
	       "asleep waiting for data %.0f us (%.0f%%), send/recv calls and "
	       "bookkeeping %.0f us (%.0f%%)\n#   %.1f MB sent, %.1f MB received, "
	       "%.0f messages per all-reduce\n#\n", r->bytes, tot, red, 100 * red / tot,
	       cp, 100 * cp / tot, wt, 100 * wt / tot, rest, 100 * rest / tot,
	       (double)s->bytes_sent / 1e6 / (double)iters,
	       (double)s->bytes_received / 1e6 / (double)iters,
	       (double)s->messages / (double)iters);
}

/* ---- outputs ------------------------------------------------------------- */

static int bench_write_json(const char *path, const struct bench_ctx *b,
			    const struct zb_config *cfg, const struct bench_row *rows,
			    int nrows, double avg)
{
	/* written beside it and renamed over it: a reader never sees half a
	 * file, and a failed write leaves the old one */
	char tmp[4096];
	if (snprintf(tmp, sizeof(tmp), "%s.tmp-%d", path, (int)getpid()) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	FILE *f = fopen(tmp, "w");
	if (!f)
		return -errno;
	fprintf(f, "{\n  \"benchmark\": \"allreduce\",\n  \"cluster\": {\"id\": %u, "
		"\"nodes\": %u, \"rank\": %u, \"node\": %u, \"transport\": \"%s\", "
		"\"lcores\": %u, \"channels\": %u, \"chunk_bytes\": %u},\n"
		"  \"iters\": %ld, \"warmup_iters\": %ld, \"check\": %d,\n"
		"  \"results\": [\n", cfg->cluster.id, b->n, b->rank, cfg->node.id,
		coll_provider(b->comm), cfg->eal.lcore_count ? cfg->eal.lcore_count : 1,
		bench_channels(b), coll_chunk_bytes(b->comm), b->o->iters,
		b->o->warmup, b->o->check);
	for (int i = 0; i < nrows; i++) {
		const struct bench_row *r = &rows[i];
		fprintf(f, "    {\"size\": %zu, \"count\": %zu, \"type\": \"%s\", "
			"\"redop\": \"%s\"", r->bytes, r->count, zb_dtype_name(r->dt),
			zb_redop_name(r->op));
		for (int ip = 0; ip < 2; ip++)
			fprintf(f, ", \"%s\": {\"time_us\": %.3f, \"algbw_gbs\": %.6f, "
				"\"busbw_gbs\": %.6f, \"wrong\": %lld}",
				ip ? "in_place" : "out_of_place", r->us[ip],
				r->algbw[ip], r->busbw[ip], r->wrong[ip]);
		fprintf(f, "}%s\n", i + 1 < nrows ? "," : "");
	}
	fprintf(f, "  ],\n  \"avg_busbw_gbs\": %.6f\n}\n", avg);
	int rc = 0;
	errno = 0;
	if (fflush(f) != 0 || ferror(f))
		rc = errno ? -errno : -EIO;   /* a failed write's errno (ENOSPC) */
	else if (fsync(fileno(f)) != 0)
		rc = -errno;
	if (fclose(f) != 0 && !rc)
		rc = -errno;
	if (!rc && rename(tmp, path) != 0)
		rc = -errno;
	if (rc)
		unlink(tmp);
	return rc;
}

static int bench_plot(const char *png, const struct bench_ctx *b,
		      const struct bench_row *rows, int nrows)
{
	int rc = 0;
	FILE *g;

	/* gnuplot's stdout is not ours: on an output it cannot open it draws
	 * there, and the PNG bytes would land in the results table */
	g = popen("gnuplot >/dev/null", "w");
	if (!g)
		return -errno;
	/* in gnuplot's single-quoted strings a quote is written twice */
	fputs("set terminal pngcairo size 900,560 noenhanced\nset output '", g);
	for (const char *c = png; *c; c++)
		fputs(*c == '\'' ? "''" : (char[2]){*c, 0}, g);
	fprintf(g, "'\nset logscale x 2\nset grid\n"
		"set format x '%%.0b %%BB'\nset xlabel 'message size'\n"
		"set ylabel 'bus bandwidth (GB/s)'\nset key top left\n"
		"set title 'zbmd ring all-reduce: %u nodes over %s, %u channels'\n",
		b->n, coll_provider(b->comm), bench_channels(b));
	/* the ranges gnuplot cannot find itself: one size alone (the default
	 * -b 32M -e 32M) or one bandwidth (0 on one node) is an empty range,
	 * which gnuplot widened with "Warning: empty x range" / "empty y
	 * range" on stderr, under the table. 0-byte rows have no place on the
	 * log axis (there is a row of more, bench_precheck) */
	size_t xlo = 0, xhi = 0;
	double ylo = INFINITY, yhi = -INFINITY;
	for (int i = 0; i < nrows; i++) {
		if (!rows[i].bytes)
			continue;
		xlo = !xlo || rows[i].bytes < xlo ? rows[i].bytes : xlo;
		xhi = rows[i].bytes > xhi ? rows[i].bytes : xhi;
		for (int k = 0; k < 2; k++) {
			ylo = fmin(ylo, rows[i].busbw[k]);
			yhi = fmax(yhi, rows[i].busbw[k]);
		}
	}
	if (xlo && xlo == xhi)
		fprintf(g, "set xrange [%.17g:%.17g]\n", xlo / 2.0, xhi * 2.0);
	if (ylo == yhi)
		fprintf(g, "set yrange [0:%.17g]\n", yhi > 0 ? 2 * yhi : 1.0);
	fputs("plot '-' using 1:2 with linespoints title 'out-of-place', "
	      "'-' using 1:2 with linespoints title 'in-place'\n", g);
	/* the data inline, each curve ended by "e": no file to leave behind
	 * when the node is stopped mid-plot */
	for (int k = 0; k < 2; k++) {
		for (int i = 0; i < nrows; i++)
			if (rows[i].bytes)
				fprintf(g, "%zu %.17g\n", rows[i].bytes, rows[i].busbw[k]);
		fputs("e\n", g);
	}
	if (pclose(g) != 0)
		rc = -EIO;
	return rc;
}

/* Before the sweep: an output file the run could not write at its end is an
 * error now (exit 2), not after the whole sweep ran. An existing file must be
 * a regular file that opens for writing (it is not truncated now); a file is
 * created in its directory and removed again (what access() cannot tell: a
 * file system that takes no new files, /proc; a name too long for it;
 * root's W_OK is always true). --json writes NAME.tmp-PID beside the file
 * and renames it over: that name must fit too. */
static int bench_output_ok(const char *flag, const char *path)
{
	struct stat st;
	char dir[PATH_MAX], probe[PATH_MAX + 32];

	if (!path[0]) {
		fprintf(stderr, "zbmd bench allreduce: %s is empty (expected a file "
			"name)\n", flag);
		return -1;
	}
	for (const char *c = path; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f) {
			fprintf(stderr, "zbmd bench allreduce: %s: the path holds a control "
				"character\n", flag);
			return -1;
		}
	/* gnuplot opens an output named '|cmd' as a pipe to cmd (a shell
	 * command): a file name never starts with one here */
	if (path[0] == '|') {
		fprintf(stderr, "zbmd bench allreduce: %s %s: a name starting with '|' "
			"would run a command (write ./%s for such a file)\n", flag, path, path);
		return -1;
	}
	bool json = strcmp(flag, "--json") == 0;
	if (snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir) - 24) {
		fprintf(stderr, "zbmd bench allreduce: %s: the path is longer than %d "
			"characters\n", flag, PATH_MAX - 24);
		return -1;
	}
	char *slash = strrchr(dir, '/');
	const char *base = slash ? path + (slash - dir) + 1 : path;
	if (!*base) {
		fprintf(stderr, "zbmd bench allreduce: %s %s: names a directory (expected "
			"a file name)\n", flag, path);
		return -1;
	}
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == dir)
		dir[1] = 0;
	else
		*slash = 0;
	const char *why = NULL;
	if (stat(dir, &st) != 0)
		why = strerror(errno);
	else if (!S_ISDIR(st.st_mode))
		why = "not a directory";
	if (why) {
		fprintf(stderr, "zbmd bench allreduce: %s %s: cannot create it in %s: %s\n",
			flag, path, dir, why);
		return -1;
	}
	long name_max = pathconf(dir, _PC_NAME_MAX);
	if (name_max <= 0)
		name_max = NAME_MAX;
	/* --json's temporary name: base + ".tmp-" + a pid */
	size_t extra = json ? strlen(".tmp-") + 10 : 0;
	if (strlen(base) + extra > (size_t)name_max) {
		fprintf(stderr, "zbmd bench allreduce: %s %s: the file name is %zu "
			"characters, at most %ld here%s\n", flag, path, strlen(base),
			name_max - (long)extra, json ? " (--json writes NAME.tmp-PID "
			"beside it first)" : "");
		return -1;
	}
	if (stat(path, &st) == 0) {
		if (!S_ISREG(st.st_mode)) {
			fprintf(stderr, "zbmd bench allreduce: %s %s: not a regular file\n",
				flag, path);
			return -1;
		}
		int fd = open(path, O_WRONLY | O_CLOEXEC);   /* no O_TRUNC: kept */
		if (fd < 0) {
			fprintf(stderr, "zbmd bench allreduce: %s %s: cannot write it: %s\n",
				flag, path, strerror(errno));
			return -1;
		}
		close(fd);
	}
	/* a new file in the directory, removed again */
	snprintf(probe, sizeof(probe), "%s/.zbmd-bench-probe-%d", dir, (int)getpid());
	int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		fprintf(stderr, "zbmd bench allreduce: %s %s: cannot create a file in "
			"%s: %s\n", flag, path, dir, strerror(errno));
		return -1;
	}
	close(fd);
	unlink(probe);
	return 0;
}

/* --json and --plot naming one file: the PNG would overwrite the JSON */
static bool bench_same_file(const char *a, const char *b)
{
	struct stat sa, sb;
	char da[PATH_MAX], db[PATH_MAX], ra[PATH_MAX], rb[PATH_MAX];

	if (strcmp(a, b) == 0)
		return true;
	if (stat(a, &sa) == 0 && stat(b, &sb) == 0)
		return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
	/* not both there yet: the same directory and the same name */
	const char *ba = strrchr(a, '/'), *bb = strrchr(b, '/');
	snprintf(da, sizeof(da), "%.*s", ba ? (int)(ba - a) + 1 : 1, ba ? a : ".");
	snprintf(db, sizeof(db), "%.*s", bb ? (int)(bb - b) + 1 : 1, bb ? b : ".");
	ba = ba ? ba + 1 : a;
	bb = bb ? bb + 1 : b;
	return strcmp(ba, bb) == 0 && realpath(da, ra) && realpath(db, rb) &&
	       strcmp(ra, rb) == 0;
}

/* The largest size of the sweep in bytes (a whole number of elements, as
 * bench_plan_rows makes the rows). */
static size_t bench_max_bytes(const struct bench_opts *o)
{
	enum zb_dtype dts[ZB_DTYPE_COUNT];
	size_t counts[BENCH_MAX_SIZES], max = 0;
	int nd = bench_dtypes(o, dts);

	for (int d = 0; d < nd; d++) {
		size_t es = zb_dtype_size(dts[d]);
		int ns = bench_sizes(o, es, counts, BENCH_MAX_SIZES);
		for (int i = 0; i < ns; i++)
			if (counts[i] * es > max)
				max = counts[i] * es;
	}
	return max;
}

/* Memory the sweep's buffers need, per node: the send and the receive
 * buffer at the largest size, with their guards, written at start-up. */
static uint64_t bench_mem_need(const struct bench_opts *o)
{
	return 2 * ((uint64_t)bench_max_bytes(o) + 2 * BENCH_GUARD);
}

static bool bench_read_u64(const char *path, const char *key, uint64_t *out)
{
	FILE *f = fopen(path, "r");
	char line[256];
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned long long v;
		if (!key) {   /* a cgroup file: one number, or "max" */
			found = sscanf(line, "%llu", &v) == 1;
		} else if (strncmp(line, key, strlen(key)) == 0 &&
			   sscanf(line + strlen(key), " %llu kB", &v) == 1) {
			found = true;
			v *= 1024;
		}
		if (found)
			*out = v;
	}
	fclose(f);
	return found;
}

/* What this machine can give: MemAvailable, and what the cgroup's
 * memory.max leaves above memory.current, whichever is less; what it is
 * in *what. UINT64_MAX where neither says. */
static uint64_t bench_mem_avail(const char **what)
{
	uint64_t avail = UINT64_MAX, v, max, cur;
	char path[PATH_MAX], rel[PATH_MAX] = "";

	*what = "";
	if (bench_read_u64("/proc/meminfo", "MemAvailable:", &v)) {
		avail = v;
		*what = "MemAvailable";
	}
	FILE *f = fopen("/proc/self/cgroup", "r");
	if (f) {
		char line[PATH_MAX];
		while (fgets(line, sizeof(line), f))
			if (strncmp(line, "0::", 3) == 0) {
				snprintf(rel, sizeof(rel), "%s", line + 3);
				rel[strcspn(rel, "\n")] = 0;
			}
		fclose(f);
	}
	for (int k = 0; k < 2; k++) {
		const char *dir = k == 0 ? rel : "";
		if (k == 0 && (!rel[0] || strcmp(rel, "/") == 0))
			continue;
		snprintf(path, sizeof(path), "/sys/fs/cgroup%s/memory.max", dir);
		if (!bench_read_u64(path, NULL, &max))
			continue;   /* none, or "max" */
		snprintf(path, sizeof(path), "/sys/fs/cgroup%s/memory.current", dir);
		if (!bench_read_u64(path, NULL, &cur))
			cur = 0;
		v = max > cur ? max - cur : 0;
		if (v < avail) {
			avail = v;
			*what = "the cgroup's memory.max less its memory.current";
		}
		break;
	}
	return avail;
}

/* NODES nodes on this machine each allocate the buffers: refused (exit 2)
 * where they cannot fit, before anything starts (a node's write of them
 * would be met by the OOM killer). */
static int bench_mem_ok(const struct bench_opts *o, unsigned nodes)
{
	const char *what;
	uint64_t need = bench_mem_need(o), avail = bench_mem_avail(&what);
	uint64_t all = need * nodes;

	if (avail == UINT64_MAX || all <= avail)
		return 0;
	char each[96] = "";
	if (nodes > 1)
		snprintf(each, sizeof(each), ", %u nodes on this machine: %.1f MiB",
			 nodes, (double)all / (1 << 20));
	fprintf(stderr, "zbmd bench allreduce: the sizes need %.1f MiB per node (a "
		"send and a receive buffer of %.1f MiB, the largest size)%s, but this "
		"machine has %.1f MiB available (%s): take a smaller -e or -N\n",
		(double)need / (1 << 20), (double)(need / 2) / (1 << 20), each,
		(double)avail / (1 << 20), what);
	return -1;
}

/* gnuplot on PATH, for --plot */
static bool bench_have_gnuplot(void)
{
	const char *path = getenv("PATH");
	char buf[PATH_MAX];

	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	while (*path) {
		size_t n = strcspn(path, ":");
		if (n > 0 && n + sizeof("/gnuplot") < sizeof(buf)) {
			memcpy(buf, path, n);
			memcpy(buf + n, "/gnuplot", sizeof("/gnuplot"));
			if (access(buf, X_OK) == 0)
				return true;
		}
		path += n + (path[n] == ':');
	}
	return false;
}

/* ---- the command --------------------------------------------------------- */

static int bench_sizes(const struct bench_opts *o, size_t esize, size_t *out,
		       int max)
{
	int n = 0;

	if (o->ncounts) {
		for (int i = 0; i < o->ncounts && n < max; i++)
			out[n++] = o->counts[i];
		return n;
	}
	for (size_t s = o->minb; s <= o->maxb && n < max;) {
		out[n++] = s / esize;
		size_t next = o->factor > 1 ? s * o->factor : s + o->stepb;
		if (next <= s)
			next = s + 1;
		s = next;
	}
	return n;
}

static void bench_progress(bool tty, int done, int total, size_t bytes,
			   uint64_t t0, uint64_t *last)
{
	uint64_t now = zb_now_ns();
	if (!tty && now - *last < 2000000000ull)
		return;
	*last = now;
	fprintf(stderr, "%s# progress: %d/%d measurements, at %zu B, %.1f s elapsed%s",
		tty ? "\r" : "", done, total, bytes, (double)(now - t0) / 1e9,
		tty ? "   " : "\n");
	fflush(stderr);
}

/* The dtypes and ops of the sweep, in order. */
static int bench_dtypes(const struct bench_opts *o, enum zb_dtype *out)
{
	if (!o->dt_all) {
		out[0] = o->dt;
		return 1;
	}
	for (int d = 0; d < ZB_DTYPE_COUNT; d++)
		out[d] = (enum zb_dtype)d;
	return ZB_DTYPE_COUNT;
}

static int bench_ops(const struct bench_opts *o, enum zb_redop *out)
{
	if (!o->op_all) {
		out[0] = o->op;
		return 1;
	}
	for (int p = 0; p < ZB_REDOP_COUNT; p++)
		out[p] = (enum zb_redop)p;
	return ZB_REDOP_COUNT;
}

/* Fill rows[] with the sweep (dtype-major, then op, then size). */
static int bench_plan_rows(const struct bench_opts *o, struct bench_row *rows)
{
	enum zb_dtype dts[ZB_DTYPE_COUNT];
	enum zb_redop ops[ZB_REDOP_COUNT];
	size_t counts[BENCH_MAX_SIZES];
	int nd = bench_dtypes(o, dts), no = bench_ops(o, ops), nrows = 0;

	for (int d = 0; d < nd; d++) {
		size_t es = zb_dtype_size(dts[d]);
		int ns = bench_sizes(o, es, counts, BENCH_MAX_SIZES);
		for (int p = 0; p < no; p++)
			for (int i = 0; i < ns && nrows < BENCH_MAX_ROWS; i++) {
				rows[nrows++] = (struct bench_row){
					.count = counts[i], .dt = dts[d], .op = ops[p],
					.bytes = counts[i] * es};
			}
	}
	return nrows;
}

/* Run every row; rank 0 prints each as it completes. Returns 0, or a coll
 * error (already reported). */
static int bench_sweep(struct bench_ctx *b, struct bench_row *rows, int nrows,
		       long long *wrong_total, double *bw_sum)
{
	bool tty = isatty(2), prog = b->rank == 0;
	uint64_t t0 = zb_now_ns(), last = t0;

	for (int i = 0; i < nrows; i++) {
		if (prog)
			bench_progress(tty, i, nrows, rows[i].bytes, t0, &last);
		for (int ip = 0; ip < 2; ip++) {
			int rc = bench_one(b, &rows[i], ip);
			if (rc < 0) {
				if (prog && tty)
					fprintf(stderr, "\n");
				fprintf(stderr, "zbmd bench allreduce: node %u: %s\n",
					b->cfg->node.id, bench_error(b));
				return rc;
			}
			if (rows[i].wrong[ip] > 0)
				*wrong_total += rows[i].wrong[ip];
			*bw_sum += rows[i].busbw[ip];
		}
		if (b->rank == 0)
			bench_print_row(&rows[i]);
	}
	if (prog && tty)
		fprintf(stderr, "\r%70s\r", "");
	return 0;
}

/* Rank 0's closing lines, JSON and plot. */
static int bench_report(const struct bench_ctx *b, const struct zb_config *cfg,
			const struct bench_row *rows, int nrows,
			long long wrong_total, double avg)
{
	int rc, status = 0;

	printf("# Out of bounds values : %lld %s\n", wrong_total,
	       wrong_total ? "FAILED" : "OK");
	printf("# Avg bus bandwidth    : %g \n#\n", avg);
	if (b->h.host && b->h.host->stats) {
		struct coll_host_stats hs;
		b->h.host->stats(b->h.hh, &hs);
		printf("# transport (this node, whole run): %llu retransmits (%llu "
		       "fast, the rest on %llu timer expiries), %llu duplicate "
		       "frames in, %llu frames dropped for want of arena; fault "
		       "injection: %llu dropped, %llu duplicated, %llu reordered\n#\n",
		       (unsigned long long)hs.retransmits,
		       (unsigned long long)hs.fast_retransmits,
		       (unsigned long long)hs.rto_timeouts,
		       (unsigned long long)hs.dup_frames,
		       (unsigned long long)hs.no_buffer_drops,
		       (unsigned long long)hs.fault_drops,
		       (unsigned long long)hs.fault_dups,
		       (unsigned long long)hs.fault_reorders);
	}
	if (nrows)
		bench_breakdown(&rows[nrows - 1], b->o->iters);
	fflush(stdout);
	if (b->o->json && (rc = bench_write_json(b->o->json, b, cfg, rows, nrows, avg)) < 0) {
		fprintf(stderr, "zbmd bench allreduce: writing %s: %s\n", b->o->json,
			zb_strerror(rc));
		status = 1;
	}
	if (b->o->plot && bench_plot(b->o->plot, b, rows, nrows) < 0) {
		fprintf(stderr, "zbmd bench allreduce: plotting %s with gnuplot failed\n",
			b->o->plot);
		status = 1;
	}
	return status;
}

static int bench_load_config(const struct bench_opts *o, struct zb_config *cfg)
{
	struct cfg_error cerr;
	int rc = cfg_load_file(cfg, o->config, &cerr);

	if (rc == ZB_ERR_CONFIG) {
		/* every diagnostic ("FILE:LINE: ..." a line), as zbmd run */
		cfg_error_print(stderr, "zbmd bench allreduce", &cerr);
	} else if (rc == -ENOENT)
		/* nccl-tests' -c N is a check count: ours takes 0 or 1 */
		fprintf(stderr, "zbmd bench allreduce: -c/--config %s: no such config "
			"file (-c takes 0 or 1 for the check, or a node config file)\n",
			o->config);
	else if (rc < 0)
		fprintf(stderr, "zbmd bench allreduce: %s: %s\n", o->config,
			zb_strerror(rc));
	return rc;
}

/* The channels a provider can take: the dpdk provider maps channel c to
 * transport stream c of the lane, streams 0..NET_DPDK_MAX_CHANNELS-1 (its init
 * refused more with a bare "Invalid argument"), and the collective host
 * gives each of LANES lanes channels / lanes of them (coll_dpdk.c). LANES
 * 0: not known here (the node checks with its config). */
static int bench_channels_ok(const struct bench_opts *o, const char *pname,
			     uint32_t cfg_channels, unsigned lanes)
{
	uint32_t ch = o->channels ? o->channels : cfg_channels;
	unsigned max = cfg_dpdk_channels_max(lanes);

	if (strcmp(pname, "dpdk") != 0 || lanes == 0 || ch <= max)
		return 0;
	if (o->channels)
		fprintf(stderr, "zbmd bench allreduce: bad value '%u' for --channels: "
			"the dpdk provider takes 1..%u here (at most %d per dataplane "
			"lane, %u lane%s)\n", ch, max, NET_DPDK_MAX_CHANNELS, lanes,
			lanes == 1 ? "" : "s");
	else
		fprintf(stderr, "zbmd bench allreduce: [coll] channels = %u: the dpdk "
			"provider takes 1..%u here (at most %d per dataplane lane, %u "
			"lane%s)\n", ch, max, NET_DPDK_MAX_CHANNELS, lanes,
			lanes == 1 ? "" : "s");
	return -1;
}

/* The up-front checks of what the flags alone say: outputs the run could
 * not write, gnuplot for --plot, buffers that do not fit in NODES nodes. */
static int bench_precheck(const struct bench_opts *o, unsigned nodes)
{
	if ((o->json && bench_output_ok("--json", o->json) < 0) ||
	    (o->plot && bench_output_ok("--plot", o->plot) < 0))
		return -1;
	if (o->json && o->plot && bench_same_file(o->json, o->plot)) {
		fprintf(stderr, "zbmd bench allreduce: --json %s and --plot %s name one "
			"file (the plot would overwrite the figures)\n", o->json, o->plot);
		return -1;
	}
	/* the plot's size axis is logarithmic: a sweep of 0-byte rows alone
	 * (sizes under one element: -b 0 -e 0, -b 1 -e 3 of float, -N 0) has
	 * no point on it, and gnuplot failed ("x range is invalid") after the
	 * whole sweep, leaving an empty PNG */
	if (o->plot && bench_max_bytes(o) == 0) {
		fprintf(stderr, "zbmd bench allreduce: --plot %s: every size of the "
			"sweep is 0 bytes (under one element): nothing to draw on the "
			"plot's logarithmic size axis (take a larger -e or -N)\n", o->plot);
		return -1;
	}
	if (o->plot && !bench_have_gnuplot()) {
		fprintf(stderr, "zbmd bench allreduce: --plot needs gnuplot, which is not "
			"on PATH (Debian: apt-get install gnuplot-nox; make deps installs it)\n");
		return -1;
	}
	return bench_mem_ok(o, nodes);
}

int coll_bench_local_check(int argc, char **argv, unsigned nodes,
			   const char *link, const char *provider, unsigned lanes)
{
	struct bench_opts o;
	char **a = calloc((size_t)argc + 1, sizeof(*a));
	int rc;

	if (!a)
		return -ENOMEM;
	memcpy(a, argv, (size_t)argc * sizeof(*a));   /* getopt permutes it */
	a[0] = (char *)"zbmd bench allreduce";
	rc = bench_parse(argc, a, &o, true);
	free(a);
	if (rc != 0)
		return rc > 0 ? 0 : rc;   /* --help: the nodes print it */
	/* tcp and dpdk are the links' own: the other one cannot run on them
	 * (rdma needs a device of its own: the nodes find out) */
	if (o.provider && strcmp(o.provider, provider) != 0 &&
	    (!strcmp(o.provider, "tcp") || !strcmp(o.provider, "dpdk"))) {
		fprintf(stderr, "zbmd local: --provider %s: the nodes of --link %s run "
			"the %s provider (--link tcp for tcp; memif or veth for dpdk)\n",
			o.provider, link, provider);
		return -EINVAL;
	}
	if (bench_channels_ok(&o, provider, 0, lanes) < 0 || bench_precheck(&o, nodes) < 0)
		return -EINVAL;
	return 0;
}

static const char *bench_provider(const struct bench_opts *o,
				  const struct zb_config *cfg)
{
	return o->provider ? o->provider : coll_default_provider(cfg);
}

/* nccl-tests' TimeTest: before the sweep, -w untimed all-reduces at the
 * largest size and then at the smallest (out of place). The machine and the
 * ranks' loops settle before the first row is timed: without it the first
 * measurement of a run (the smallest size, out of place) came out 15 – 40 %
 * under the same size measured again later in the run, here and in
 * bench/mpi_allreduce.c alike, which does the same warm-up. Each measurement
 * still begins with its own -w iterations (bench_one). */
static int bench_warmup(struct bench_ctx *b)
{
	int hi = 0, lo = 0, rc;

	if (b->nrows == 0 || b->o->warmup == 0)
		return 0;
	for (int i = 1; i < b->nrows; i++) {
		if (b->rows[i].bytes > b->rows[hi].bytes)
			hi = i;
		if (b->rows[i].bytes < b->rows[lo].bytes)
			lo = i;
	}
	const int which[2] = {hi, lo};
	for (int k = 0; k < 2; k++) {
		const struct bench_row *r = &b->rows[which[k]];
		rc = bench_allreduce_n(b, b->sbuf, b->rbuf, r->count, r->dt, r->op,
				       b->o->warmup,
				       b->o->blocking ? 1 : BENCH_INFLIGHT);
		if (rc < 0) {
			fprintf(stderr, "zbmd bench allreduce: node %u: %s\n",
				b->cfg->node.id, bench_error(b));
			return rc;
		}
	}
	return 0;
}

/* The sweep and rank 0's report, on a thread that owns the communicators. */
static int bench_body(void *arg)
{
	struct bench_ctx *b = arg;
	long long wrong_total = 0;
	double bw_sum = 0;

	if (b->rank == 0)
		bench_header(b, b->cfg);
	if (bench_warmup(b) < 0)
		return 1;
	if (bench_sweep(b, b->rows, b->nrows, &wrong_total, &bw_sum) < 0)
		return 1;
	int out = 0;
	if (b->rank == 0)
		out = bench_report(b, b->cfg, b->rows, b->nrows, wrong_total,
				   b->nrows ? bw_sum / (2.0 * b->nrows) : 0);
	return wrong_total || out ? 1 : 0;
}

int coll_bench_allreduce_main(int argc, char **argv)
{
	struct bench_opts o;
	struct zb_config *cfg = calloc(1, sizeof(*cfg));
	struct bench_row *rows = calloc(BENCH_MAX_ROWS, sizeof(*rows));
	struct bench_ctx b = {.o = &o, .cfg = cfg, .rows = rows};
	size_t maxbytes;
	char err[512], *sbase = NULL, *rbase = NULL;
	int rc, status = 1;

	if (!cfg || !rows)
		goto out;
	if ((rc = bench_parse(argc, argv, &o, false)) != 0) {
		status = rc > 0 ? 0 : 2;
		goto out;
	}
	if (bench_precheck(&o, 1) < 0) {
		status = 2;
		goto out;
	}
	if (bench_load_config(&o, cfg) < 0) {
		status = 2;
		goto out;
	}
	if (bench_fault_parse(getenv("ZBMD_BENCH_FAULT"), cfg->node.id, &b.fault) < 0) {
		fprintf(stderr, "zbmd bench allreduce: bad ZBMD_BENCH_FAULT '%s' (expected "
			"NODE:same-data, NODE:shift=K, NODE:overrun, NODE:underrun or "
			"NODE:src)\n", getenv("ZBMD_BENCH_FAULT"));
		status = 2;
		goto out;
	}
	const char *pname = bench_provider(&o, cfg);
	if (!coll_host_find(pname) && !net_find(pname)) {
		/* the user's flag or config, before any set-up: a usage error */
		fprintf(stderr, "zbmd bench allreduce: node %u: no net provider '%s' in "
			"this build (expected tcp, dpdk or rdma)\n", cfg->node.id, pname);
		status = 2;
		goto out;
	}
	if (bench_channels_ok(&o, pname, cfg->coll.channels, cfg_coll_lanes(cfg)) < 0) {
		status = 2;
		goto out;
	}
	struct coll_comm_args ca = {.cfg = cfg, .provider = pname,
				    .channels = (uint16_t)o.channels,
				    .chunk_bytes = o.chunk_kb * 1024u,
				    .timeout_ms = o.timeout_ms};
	b.nrows = bench_plan_rows(&o, rows);
	maxbytes = bench_max_bytes(&o);
	/* each with a guard on both sides (bench_guard_set) */
	sbase = zb_aligned_alloc(64, maxbytes + 2 * BENCH_GUARD);
	rbase = zb_aligned_alloc(64, maxbytes + 2 * BENCH_GUARD);
	if (!sbase || !rbase) {
		fprintf(stderr, "zbmd bench allreduce: cannot allocate 2 x %zu bytes\n",
			maxbytes);
		goto out;
	}
	/* touch both now: page faults belong to neither warm-up nor timing
	 * (bench/mpi_allreduce.c does the same for Open MPI) */
	memset(sbase, 0, maxbytes + 2 * BENCH_GUARD);
	memset(rbase, 0, maxbytes + 2 * BENCH_GUARD);
	b.sbuf = sbase + BENCH_GUARD;
	b.rbuf = rbase + BENCH_GUARD;
	if (coll_hosted_open(&ca, &b.h, err, sizeof(err)) < 0) {
		fprintf(stderr, "zbmd bench allreduce: node %u: %s\n", cfg->node.id, err);
		goto out;
	}
	b.comm = b.h.comms[0];
	b.n = coll_nranks(b.comm);
	b.rank = coll_rank(b.comm);
	status = coll_hosted_run(&b.h, bench_body, &b);
out:
	coll_hosted_close(&b.h);
	free(sbase);
	free(rbase);
	free(rows);
	free(cfg);
	return status;
}
