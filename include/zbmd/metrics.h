/* zbmd/metrics.h — the process-wide metrics registry and its Prometheus text
 * exposition (format 0.0.4).
 *
 * Modules register counters, gauges and histograms at init; the hot path then
 * updates them without locks and without shared atomic read-modify-writes:
 * counters and histograms keep one row per *slot* (an lcore id, or
 * ZB_METRICS_SLOT_OTHER for threads that are not lcores), each row written by
 * one thread only, and a scrape sums the rows (one more row,
 * ZB_METRICS_SLOT_SHARED, takes atomic adds from any thread). A slot must be written by one
 * thread at a time (each lcore owns its slot; ZB_METRICS_SLOT_OTHER belongs to
 * the control thread). Gauges are a single value set by whoever owns them.
 * Collectors are callbacks that emit families computed at scrape time (phi per
 * peer, Raft state, ...).
 *
 * Registration and scraping take a mutex; updates never do. Everything is
 * statically sized: registering past the limits returns -ENOSPC.
 */
#ifndef ZBMD_METRICS_H
#define ZBMD_METRICS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define ZB_METRICS_MAX          256  /* counters + gauges + histograms */
#define ZB_METRICS_HIST_MAX     32   /* histograms */
#define ZB_METRICS_BUCKETS_MAX  16   /* finite bucket bounds per histogram */
#define ZB_METRICS_SLOTS        130  /* CFG_MAX_LCORES lcores + 2 */
#define ZB_METRICS_SLOT_SHARED  (ZB_METRICS_SLOTS - 2)  /* *_shared only */
#define ZB_METRICS_SLOT_OTHER   (ZB_METRICS_SLOTS - 1)
#define ZB_METRICS_COLLECTORS   32
#define ZB_METRICS_LABELS_MAX   128  /* bytes of one series' label text */

enum zb_metric_type { ZB_METRIC_COUNTER = 0, ZB_METRIC_GAUGE, ZB_METRIC_HISTOGRAM };

/* Register one series. name: [a-zA-Z_:][a-zA-Z0-9_:]*; labels: NULL or label
 * text without braces, e.g. `port="0",dir="rx"`. Series with the same name
 * form one family (same type and help required). Returns the series id (>= 0)
 * or -EINVAL (bad name/labels, type mismatch), -EEXIST (same name and labels
 * registered), -ENOSPC (registry full). Thread-safe; init time only. */
int zb_metrics_counter(const char *name, const char *help, const char *labels);
int zb_metrics_gauge(const char *name, const char *help, const char *labels);
/* bounds: n_bounds (1..ZB_METRICS_BUCKETS_MAX) strictly increasing finite
 * upper bounds; +Inf is implied. */
int zb_metrics_histogram(const char *name, const char *help, const char *labels,
			 const double *bounds, unsigned n_bounds);

/* Hot path. id must come from the matching register call (checked only in
 * debug builds); slot < ZB_METRICS_SLOTS owned by the calling thread. */
void zb_metrics_add(int id, unsigned slot, uint64_t v);
void zb_metrics_observe(int id, unsigned slot, double v);
/* Any thread, for series whose writers are not one thread per slot (e.g. a
 * collective communicator's owner, whichever thread that is): atomic
 * read-modify-writes on the row ZB_METRICS_SLOT_SHARED, which nothing else
 * writes. Not for per-packet paths. */
void zb_metrics_add_shared(int id, uint64_t v);
void zb_metrics_observe_shared(int id, double v);
/* Gauge: any thread; last write wins. */
void zb_metrics_set(int id, double v);

/* Scrape-side reads (sum over slots). */
uint64_t zb_metrics_counter_value(int id);
double zb_metrics_gauge_value(int id);

/* Collectors: called under the registry mutex at every scrape; they emit with
 * zb_metrics_family() then zb_metrics_sample() for each series. */
struct zb_metrics_out;
typedef void (*zb_metrics_collect_fn)(void *arg, struct zb_metrics_out *out);
/* Returns a handle (>= 0) or -ENOSPC. */
int zb_metrics_add_collector(zb_metrics_collect_fn fn, void *arg);
/* After it returns, fn is not running and will not run again. */
void zb_metrics_remove_collector(int handle);
void zb_metrics_family(struct zb_metrics_out *out, const char *name,
		       enum zb_metric_type type, const char *help);
void zb_metrics_sample(struct zb_metrics_out *out, const char *name,
		       const char *labels, double v);

/* Write the whole exposition to f. Returns 0 or -EIO. Thread-safe. */
int zb_metrics_write(FILE *f);
/* The same into a malloc'd NUL-terminated buffer (caller frees); NULL on
 * allocation failure. */
char *zb_metrics_render(size_t *len);

/* Tests only: forget every series and collector. */
void zb_metrics_reset(void);

#endif /* ZBMD_METRICS_H */
