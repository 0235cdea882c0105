/* Metrics registry: registration rules, per-slot counters summed at scrape
 * (exact under concurrent writers), histograms, collectors, and the
 * exposition checked by a strict Prometheus text parser (which must also
 * reject broken input). */
#include "zbmd/metrics.h"
#include "zbmd/common.h"
#include "prom_check.h"
#include "tap.h"

#include <pthread.h>

#define THREADS 4
#define ADDS 200000

static int ctr_id, shared_id, shared_h;

/* every thread on the one shared row: exact only with atomic adds */
static void *shared_adder(void *arg)
{
	(void)arg;
	for (int i = 0; i < ADDS; i++) {
		zb_metrics_add_shared(shared_id, 1);
		if (i % 16 == 0)
			zb_metrics_observe_shared(shared_h, 0.5);
	}
	return NULL;
}

static void *adder(void *arg)
{
	unsigned slot = (unsigned)(uintptr_t)arg;
	for (int i = 0; i < ADDS; i++)
		zb_metrics_add(ctr_id, slot, 1);
	return NULL;
}

static void collect(void *arg, struct zb_metrics_out *out)
{
	int *calls = arg;
	(*calls)++;
	zb_metrics_family(out, "zbmd_test_phi", ZB_METRIC_GAUGE, "phi per peer");
	zb_metrics_sample(out, "zbmd_test_phi", "peer=\"1\"", 0.5);
	zb_metrics_sample(out, "zbmd_test_phi", "peer=\"2\"", 12.25);
}

static int check(const char *text, char *err)
{
	return prom_check(text, err, 256);
}

int main(void)
{
	char err[256];
	double bounds[] = {0.001, 0.01, 0.1, 1};
	pthread_t th[THREADS];
	int calls = 0;

	tap_plan(30);
	zb_metrics_reset();
	ctr_id = zb_metrics_counter("zbmd_test_frames_total", "Frames seen", "port=\"0\"");
	ok(ctr_id >= 0, "counter registered");
	int c2 = zb_metrics_counter("zbmd_test_frames_total", "Frames seen", "port=\"1\"");
	ok(c2 >= 0 && c2 != ctr_id, "second series of the same family");
	is_int(zb_metrics_counter("zbmd_test_frames_total", "Frames seen", "port=\"1\""),
	       -EEXIST, "same name and labels refused");
	is_int(zb_metrics_gauge("zbmd_test_frames_total", "x", NULL), -EINVAL,
	       "type mismatch in a family refused");
	is_int(zb_metrics_counter("9bad", "x", NULL), -EINVAL, "bad metric name refused");
	is_int(zb_metrics_counter("zbmd_ok", "x", "port=0"), -EINVAL, "unquoted label refused");
	is_int(zb_metrics_counter("zbmd_ok", "x", "port=\"a\\q\""), -EINVAL, "bad escape refused");
	double bad[] = {1, 1};
	is_int(zb_metrics_histogram("zbmd_h", "x", NULL, bad, 2), -EINVAL,
	       "non-increasing bounds refused");
	int g = zb_metrics_gauge("zbmd_test_depth", "Mailbox depth", NULL);
	int h = zb_metrics_histogram("zbmd_test_latency_seconds", "Latency", NULL, bounds, 4);
	ok(g >= 0 && h >= 0, "gauge and histogram registered");

	for (unsigned i = 0; i < THREADS; i++)
		pthread_create(&th[i], NULL, adder, (void *)(uintptr_t)i);
	for (unsigned i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	is_int(zb_metrics_counter_value(ctr_id), THREADS * ADDS,
	       "per-slot counters from %d threads sum exactly", THREADS);
	shared_id = zb_metrics_counter("zbmd_test_shared_total", "shared row", NULL);
	shared_h = zb_metrics_histogram("zbmd_test_shared_seconds", "shared row", NULL,
					bounds, 4);
	for (unsigned i = 0; i < THREADS; i++)
		pthread_create(&th[i], NULL, shared_adder, NULL);
	for (unsigned i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	is_int(zb_metrics_counter_value(shared_id), THREADS * ADDS,
	       "the shared row from %d threads sums exactly", THREADS);
	{
		char *txt = NULL;
		size_t tl = 0;
		FILE *f = open_memstream(&txt, &tl);
		zb_metrics_write(f);
		fclose(f);
		char want[128];
		snprintf(want, sizeof(want), "zbmd_test_shared_seconds_count %d\n",
			 THREADS * (ADDS / 16));
		ok(txt && strstr(txt, want), "shared histogram counted every observation (%s)", want);
		free(txt);
	}
	zb_metrics_add(c2, ZB_METRICS_SLOT_OTHER, 7);
	is_int(zb_metrics_counter_value(c2), 7, "other-thread slot counted");
	zb_metrics_set(g, 42.5);
	ok(zb_metrics_gauge_value(g) == 42.5, "gauge set/read");
	zb_metrics_observe(h, 0, 0.0005);
	zb_metrics_observe(h, 1, 0.05);
	zb_metrics_observe(h, 1, 0.05);
	zb_metrics_observe(h, 2, 5);
	int coll = zb_metrics_add_collector(collect, &calls);
	ok(coll >= 0, "collector added");

	size_t len = 0;
	char *text = zb_metrics_render(&len);
	ok(text && len == strlen(text), "rendered");
	int rc = check(text, err);
	ok(rc == 0, "exposition passes the strict parser%s%s", rc ? ": " : "", rc ? err : "");
	is_int(calls, 1, "collector called once per scrape");
	ok(strstr(text, "zbmd_test_frames_total{port=\"0\"} 800000\n") != NULL, "counter sample");
	ok(strstr(text, "zbmd_test_latency_seconds_bucket{le=\"0.01\"} 1\n") &&
	   strstr(text, "zbmd_test_latency_seconds_bucket{le=\"0.1\"} 3\n") &&
	   strstr(text, "zbmd_test_latency_seconds_bucket{le=\"+Inf\"} 4\n") &&
	   strstr(text, "zbmd_test_latency_seconds_count 4\n"), "histogram buckets cumulative");
	ok(strstr(text, "zbmd_test_phi{peer=\"2\"} 12.25\n") != NULL, "collector sample");
	ok(strstr(text, "# TYPE zbmd_test_frames_total counter\n") &&
	   strstr(text, "# HELP zbmd_test_depth Mailbox depth\n"), "HELP and TYPE lines");
	free(text);

	/* The parser must be able to fail. */
	ok(check("x 1", err) != 0, "parser: missing final newline rejected");
	ok(check("# TYPE a counter\na -1\n", err) != 0, "parser: negative counter rejected");
	ok(check("# TYPE a gauge\na{l=\"x} 1\n", err) != 0, "parser: unterminated label rejected");
	ok(check("# TYPE a gauge\n# TYPE b gauge\nb 1\na 2\n", err) != 0 ||
	   check("# TYPE a gauge\na 1\n# TYPE b gauge\nb 1\na 2\n", err) != 0,
	   "parser: split family rejected");
	ok(check("b 1\n", err) != 0, "parser: sample without TYPE rejected");
	ok(check("# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"2\"} 1\n"
		 "h_bucket{le=\"+Inf\"} 2\nh_count 2\n", err) != 0,
	   "parser: non-cumulative buckets rejected");
	ok(check("# TYPE a gauge\na 1\na 2\n", err) != 0, "parser: duplicate series rejected");
	zb_metrics_remove_collector(coll);
	text = zb_metrics_render(NULL);
	ok(text && !strstr(text, "zbmd_test_phi"), "removed collector no longer scraped");
	free(text);
	zb_metrics_reset();
	return tap_done();
}
