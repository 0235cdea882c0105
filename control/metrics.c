/* The metrics registry: per-slot counter rows summed at scrape, Prometheus
 * text exposition format 0.0.4
 * (https://prometheus.io/docs/instrumenting/exposition_formats/).
 */
#include "zbmd/metrics.h"
#include "zbmd/common.h"

#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

struct zb_series {
	char name[96];
	char help[160];
	char labels[ZB_METRICS_LABELS_MAX];
	enum zb_metric_type type;
	int hist;                       /* histogram index, or -1 */
	unsigned n_bounds;
	double bounds[ZB_METRICS_BUCKETS_MAX];
};

/* A histogram row: bucket counts (the last is +Inf), count, sum bits. */
#define HIST_WORDS (ZB_METRICS_BUCKETS_MAX + 3)

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct zb_series series[ZB_METRICS_MAX];
static int n_series, n_hist;
/* One row per slot, each written by its owner thread only. */
static uint64_t counters[ZB_METRICS_SLOTS][ZB_METRICS_MAX] ZB_ALIGNED_CL;
static uint64_t hists[ZB_METRICS_SLOTS][ZB_METRICS_HIST_MAX][HIST_WORDS] ZB_ALIGNED_CL;
static uint64_t gauges[ZB_METRICS_MAX];   /* double bits */
static struct {
	zb_metrics_collect_fn fn;
	void *arg;
} collectors[ZB_METRICS_COLLECTORS];

struct zb_metrics_out {
	FILE *f;
	int err;
};

static bool name_ok(const char *s)
{
	if (!s || !*s || strlen(s) >= sizeof(series[0].name))
		return false;
	if (!(isalpha((unsigned char)s[0]) || s[0] == '_' || s[0] == ':'))
		return false;
	for (const char *p = s + 1; *p; p++)
		if (!(isalnum((unsigned char)*p) || *p == '_' || *p == ':'))
			return false;
	return true;
}

/* labels: name="value"(,name="value")* with \\ \" \n escapes in values. */
static bool labels_ok(const char *s)
{
	if (!s || !*s)
		return true;
	if (strlen(s) >= ZB_METRICS_LABELS_MAX)
		return false;
	const char *p = s;
	for (;;) {
		if (!(isalpha((unsigned char)*p) || *p == '_'))
			return false;
		while (isalnum((unsigned char)*p) || *p == '_')
			p++;
		if (*p++ != '=' || *p++ != '"')
			return false;
		while (*p && *p != '"') {
			if (*p == '\\') {
				p++;
				if (*p != '\\' && *p != '"' && *p != 'n')
					return false;
			}
			p++;
		}
		if (*p++ != '"')
			return false;
		if (!*p)
			return true;
		if (*p++ != ',')
			return false;
	}
}

static int reg(const char *name, const char *help, const char *labels,
	       enum zb_metric_type type, const double *bounds, unsigned nb)
{
	int id = -ENOSPC;

	if (!name_ok(name) || !labels_ok(labels) || !help)
		return -EINVAL;
	pthread_mutex_lock(&reg_lock);
	for (int i = 0; i < n_series; i++) {
		if (strcmp(series[i].name, name) != 0)
			continue;
		if (series[i].type != type) {
			id = -EINVAL;
			goto out;
		}
		if (strcmp(series[i].labels, labels ? labels : "") == 0) {
			id = -EEXIST;
			goto out;
		}
	}
	if (n_series == ZB_METRICS_MAX ||
	    (type == ZB_METRIC_HISTOGRAM && n_hist == ZB_METRICS_HIST_MAX))
		goto out;
	id = n_series++;
	struct zb_series *s = &series[id];
	memset(s, 0, sizeof(*s));
	snprintf(s->name, sizeof(s->name), "%s", name);
	snprintf(s->help, sizeof(s->help), "%s", help);
	snprintf(s->labels, sizeof(s->labels), "%s", labels ? labels : "");
	s->type = type;
	s->hist = -1;
	if (type == ZB_METRIC_HISTOGRAM) {
		s->hist = n_hist++;
		s->n_bounds = nb;
		memcpy(s->bounds, bounds, nb * sizeof(*bounds));
	}
out:
	pthread_mutex_unlock(&reg_lock);
	ZB_ASSERT(id < ZB_METRICS_MAX);
	return id;
}

int zb_metrics_counter(const char *name, const char *help, const char *labels)
{
	return reg(name, help, labels, ZB_METRIC_COUNTER, NULL, 0);
}

int zb_metrics_gauge(const char *name, const char *help, const char *labels)
{
	return reg(name, help, labels, ZB_METRIC_GAUGE, NULL, 0);
}

int zb_metrics_histogram(const char *name, const char *help, const char *labels,
			 const double *bounds, unsigned n_bounds)
{
	if (!bounds || n_bounds == 0 || n_bounds > ZB_METRICS_BUCKETS_MAX)
		return -EINVAL;
	for (unsigned i = 0; i < n_bounds; i++)
		if (!isfinite(bounds[i]) || (i && bounds[i] <= bounds[i - 1]))
			return -EINVAL;
	return reg(name, help, labels, ZB_METRIC_HISTOGRAM, bounds, n_bounds);
}

/* Relaxed load + relaxed store on the owner's row: a plain add on x86, yet
 * race-free for the scraper that reads it concurrently. */
static inline void row_add(uint64_t *w, uint64_t v)
{
	__atomic_store_n(w, __atomic_load_n(w, __ATOMIC_RELAXED) + v,
			 __ATOMIC_RELAXED);
}

void zb_metrics_add(int id, unsigned slot, uint64_t v)
{
	ZB_DASSERT(id >= 0 && id < ZB_METRICS_MAX && slot < ZB_METRICS_SLOTS);
	row_add(&counters[slot][id], v);
}

void zb_metrics_observe(int id, unsigned slot, double v)
{
	ZB_DASSERT(id >= 0 && id < ZB_METRICS_MAX && slot < ZB_METRICS_SLOTS);
	const struct zb_series *s = &series[id];
	uint64_t *row = hists[slot][s->hist];
	unsigned b = 0;

	while (b < s->n_bounds && v > s->bounds[b])
		b++;
	row_add(&row[b], 1);
	row_add(&row[ZB_METRICS_BUCKETS_MAX + 1], 1);
	double sum;
	uint64_t bits = __atomic_load_n(&row[ZB_METRICS_BUCKETS_MAX + 2], __ATOMIC_RELAXED);
	memcpy(&sum, &bits, sizeof(sum));
	sum += v;
	memcpy(&bits, &sum, sizeof(bits));
	__atomic_store_n(&row[ZB_METRICS_BUCKETS_MAX + 2], bits, __ATOMIC_RELAXED);
}

void zb_metrics_add_shared(int id, uint64_t v)
{
	ZB_DASSERT(id >= 0 && id < ZB_METRICS_MAX);
	__atomic_fetch_add(&counters[ZB_METRICS_SLOT_SHARED][id], v, __ATOMIC_RELAXED);
}

void zb_metrics_observe_shared(int id, double v)
{
	ZB_DASSERT(id >= 0 && id < ZB_METRICS_MAX);
	const struct zb_series *s = &series[id];
	uint64_t *row = hists[ZB_METRICS_SLOT_SHARED][s->hist];
	unsigned b = 0;

	while (b < s->n_bounds && v > s->bounds[b])
		b++;
	__atomic_fetch_add(&row[b], 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&row[ZB_METRICS_BUCKETS_MAX + 1], 1, __ATOMIC_RELAXED);
	uint64_t old = __atomic_load_n(&row[ZB_METRICS_BUCKETS_MAX + 2], __ATOMIC_RELAXED), nw;
	do {   /* the sum is a double: add by compare-and-swap */
		double sum;
		memcpy(&sum, &old, sizeof(sum));
		sum += v;
		memcpy(&nw, &sum, sizeof(nw));
	} while (!__atomic_compare_exchange_n(&row[ZB_METRICS_BUCKETS_MAX + 2], &old, nw,
					      true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
}

void zb_metrics_set(int id, double v)
{
	uint64_t bits;

	ZB_DASSERT(id >= 0 && id < ZB_METRICS_MAX);
	memcpy(&bits, &v, sizeof(bits));
	__atomic_store_n(&gauges[id], bits, __ATOMIC_RELAXED);
}

uint64_t zb_metrics_counter_value(int id)
{
	uint64_t sum = 0;

	ZB_ASSERT(id >= 0 && id < ZB_METRICS_MAX);
	for (unsigned s = 0; s < ZB_METRICS_SLOTS; s++)
		sum += __atomic_load_n(&counters[s][id], __ATOMIC_RELAXED);
	return sum;
}

double zb_metrics_gauge_value(int id)
{
	double v;
	uint64_t bits;

	ZB_ASSERT(id >= 0 && id < ZB_METRICS_MAX);
	bits = __atomic_load_n(&gauges[id], __ATOMIC_RELAXED);
	memcpy(&v, &bits, sizeof(v));
	return v;
}

int zb_metrics_add_collector(zb_metrics_collect_fn fn, void *arg)
{
	int h = -ENOSPC;

	ZB_ASSERT(fn != NULL);
	pthread_mutex_lock(&reg_lock);
	for (int i = 0; i < ZB_METRICS_COLLECTORS; i++)
		if (!collectors[i].fn) {
			collectors[i].fn = fn;
			collectors[i].arg = arg;
			h = i;
			break;
		}
	pthread_mutex_unlock(&reg_lock);
	return h;
}

void zb_metrics_remove_collector(int handle)
{
	ZB_ASSERT(handle >= 0 && handle < ZB_METRICS_COLLECTORS);
	pthread_mutex_lock(&reg_lock);
	collectors[handle].fn = NULL;
	collectors[handle].arg = NULL;
	pthread_mutex_unlock(&reg_lock);
}

static const char *type_name(enum zb_metric_type t)
{
	return t == ZB_METRIC_COUNTER ? "counter"
	       : t == ZB_METRIC_GAUGE ? "gauge" : "histogram";
}

/* Help text escaping: backslash and newline (format 0.0.4). */
static void put_help(FILE *f, const char *name, const char *help,
		     enum zb_metric_type t)
{
	fprintf(f, "# HELP %s ", name);
	for (const char *p = help; *p; p++) {
		if (*p == '\\')
			fputs("\\\\", f);
		else if (*p == '\n')
			fputs("\\n", f);
		else
			fputc(*p, f);
	}
	fprintf(f, "\n# TYPE %s %s\n", name, type_name(t));
}

/* Shortest of %.15g / %.17g that reads back exactly. */
static void fmt_double(char *buf, size_t n, double v)
{
	if (isnan(v)) {
		snprintf(buf, n, "NaN");
	} else if (isinf(v)) {
		snprintf(buf, n, v > 0 ? "+Inf" : "-Inf");
	} else {
		snprintf(buf, n, "%.15g", v);
		if (strtod(buf, NULL) != v)
			snprintf(buf, n, "%.17g", v);
	}
}

static void put_value(FILE *f, double v)
{
	char b[40];
	fmt_double(b, sizeof(b), v);
	fputs(b, f);
}

static void put_sample(FILE *f, const char *name, const char *suffix,
		       const char *labels, const char *extra, double v)
{
	bool l = labels && *labels, e = extra && *extra;

	fprintf(f, "%s%s", name, suffix);
	if (l || e)
		fprintf(f, "{%s%s%s}", l ? labels : "", l && e ? "," : "",
			e ? extra : "");
	fputc(' ', f);
	put_value(f, v);
	fputc('\n', f);
}

static void put_hist(FILE *f, const struct zb_series *s)
{
	uint64_t b[ZB_METRICS_BUCKETS_MAX + 1] = {0}, count = 0;
	double sum = 0;
	char le[48];

	for (unsigned slot = 0; slot < ZB_METRICS_SLOTS; slot++) {
		const uint64_t *row = hists[slot][s->hist];
		for (unsigned i = 0; i <= s->n_bounds; i++)
			b[i] += __atomic_load_n(&row[i], __ATOMIC_RELAXED);
		count += __atomic_load_n(&row[ZB_METRICS_BUCKETS_MAX + 1], __ATOMIC_RELAXED);
		uint64_t bits = __atomic_load_n(&row[ZB_METRICS_BUCKETS_MAX + 2], __ATOMIC_RELAXED);
		double d;
		memcpy(&d, &bits, sizeof(d));
		sum += d;
	}
	/* Rows are read one word at a time, so a concurrent observe may be
	 * half-visible: derive count from the buckets to keep them coherent. */
	uint64_t cum = 0;
	for (unsigned i = 0; i <= s->n_bounds; i++) {
		cum += b[i];
		char b[40];
		fmt_double(b, sizeof(b), i < s->n_bounds ? s->bounds[i] : INFINITY);
		snprintf(le, sizeof(le), "le=\"%s\"", b);
		put_sample(f, s->name, "_bucket", s->labels, le, (double)cum);
	}
	(void)count;
	put_sample(f, s->name, "_sum", s->labels, NULL, sum);
	put_sample(f, s->name, "_count", s->labels, NULL, (double)cum);
}

void zb_metrics_family(struct zb_metrics_out *out, const char *name,
		       enum zb_metric_type type, const char *help)
{
	ZB_ASSERT(out && name_ok(name));
	put_help(out->f, name, help, type);
}

void zb_metrics_sample(struct zb_metrics_out *out, const char *name,
		       const char *labels, double v)
{
	ZB_ASSERT(out && name);
	if (!labels_ok(labels)) {
		out->err = -EINVAL;
		return;
	}
	put_sample(out->f, name, "", labels, NULL, v);
}

int zb_metrics_write(FILE *f)
{
	struct zb_metrics_out out = {.f = f, .err = 0};
	bool done[ZB_METRICS_MAX] = {false};

	ZB_ASSERT(f != NULL);
	pthread_mutex_lock(&reg_lock);
	for (int i = 0; i < n_series; i++) {
		if (done[i])
			continue;
		put_help(f, series[i].name, series[i].help, series[i].type);
		for (int j = i; j < n_series; j++) {
			const struct zb_series *s = &series[j];
			if (done[j] || strcmp(s->name, series[i].name) != 0)
				continue;
			done[j] = true;
			if (s->type == ZB_METRIC_COUNTER)
				put_sample(f, s->name, "", s->labels, NULL,
					   (double)zb_metrics_counter_value(j));
			else if (s->type == ZB_METRIC_GAUGE)
				put_sample(f, s->name, "", s->labels, NULL,
					   zb_metrics_gauge_value(j));
			else
				put_hist(f, s);
		}
	}
	for (int c = 0; c < ZB_METRICS_COLLECTORS; c++)
		if (collectors[c].fn)
			collectors[c].fn(collectors[c].arg, &out);
	pthread_mutex_unlock(&reg_lock);
	if (fflush(f) != 0 || ferror(f))
		return -EIO;
	return out.err;
}

char *zb_metrics_render(size_t *len)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);

	if (!f)
		return NULL;
	int rc = zb_metrics_write(f);
	if (fclose(f) != 0 || rc != 0) {
		free(buf);
		return NULL;
	}
	if (len)
		*len = n;
	return buf;
}

void zb_metrics_reset(void)
{
	pthread_mutex_lock(&reg_lock);
	n_series = 0;
	n_hist = 0;
	memset(counters, 0, sizeof(counters));
	memset(hists, 0, sizeof(hists));
	memset(gauges, 0, sizeof(gauges));
	memset(collectors, 0, sizeof(collectors));
	pthread_mutex_unlock(&reg_lock);
}
