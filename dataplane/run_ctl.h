/* dataplane/run_ctl.h — the node process's glue between the dataplane and
 * the control plane (control/): used by cmd_run.c only, so that nothing
 * else that links the dataplane library needs the control module.
 *
 *   dp__run_ctl_wanted()  does this config ask for a control thread?
 *   dp__run_ctl_init()    after dp_node_init, before dp_node_launch:
 *                         create the control node (sockets, Raft, HTTP), one
 *                         event ring + poller per lcore (views -> lcores,
 *                         transport counter snapshots), the dataplane's
 *                         metrics collector, and the dataplane's control hook
 *   dp__run_ctl_fini()    after dp_node_stop (control thread ended): remove
 *                         the collector, free the control node
 *   dp__run_control_host() the three above as one step (what callers use)
 *
 * Callers: cmd_run.c, and coll_dpdk.c through weak references (test
 * programs link the dataplane library without control/; there the symbols
 * are NULL and collectives run without a control thread).
 */
#ifndef ZBMD_DATAPLANE_RUN_CTL_H
#define ZBMD_DATAPLANE_RUN_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "zbmd/control.h"

struct zb_config;
struct act_runtime;

/* True when `zbmd run` should start the control thread ([control] enabled:
 * on; auto with a concrete control address). why: one line saying why or
 * why not. */
bool dp__run_ctl_wanted(const struct zb_config *cfg, char *why, size_t len);

/* The dataplane's counters on /metrics (also without a control node: the
 * registry is process-wide). actors may be NULL. 0 or -ENOSPC. */
int dp__run_metrics_init(const struct zb_config *cfg, struct act_runtime *actors);

/* Start the control node for cfg with opts (event consumers are set here)
 * and install it as the dataplane's control hook. 0 or the error of
 * ctl_node_create (err says why). */
int dp__run_ctl_init(const struct zb_config *cfg, const struct ctl_opts *opts,
		     char *err, size_t errlen);
struct ctl_node *dp__run_ctl_node(void);

/* The remote actor carrier over rdma (run_rdma.c, [actors] carrier = rdma)
 * with its connection blobs on the control plane (CTL_BLOB_RDMA_ACT):
 * the provider args to hand to zbra_set_provider_arg before zbra_host
 * (NULL: not this carrier, or no control plane: the provider's bootstrap);
 * the blob handler installed once the control node runs (0 or an error);
 * removed before dp__run_ctl_fini. */
void *dp__rdma_act_provider_arg(const struct zb_config *cfg);
int dp__rdma_act_start(void);
void dp__rdma_act_stop(void);

/* After dp_node_stop(): metrics collector removed, control node freed.
 * Idempotent. */
void dp__run_ctl_fini(void);

/* Whether dp_node_stop() makes the node leave the cluster gracefully (ask
 * the leader to remove it; a bounded wait) before its control thread ends:
 * yes by default (`zbmd run`). A host whose nodes all end together (the
 * benchmark) says no: its peers see it go as a failure instead, and its
 * exit is not delayed. Before dp_node_stop(). */
void dp__run_ctl_leave_on_stop(bool leave);

/* What every node process does between dp_node_init() and dp_node_launch()
 * (`zbmd run`, and the dpdk collective host of `zbmd bench allreduce`):
 * the dataplane's metrics (dp__run_metrics_init) and, when the config asks
 * for one (dp__run_ctl_wanted), the control thread (dp__run_ctl_init) with
 * its log lines written to `log` (one timestamped line each, any thread;
 * NULL: dropped). *started says whether a control thread will run; `what`
 * gets one line for the operator: "on (WHY): cluster 77, listen ..." or
 * "off: WHY". Returns 0, or a negative error with err naming what failed
 * ("dataplane metrics: ...", "control plane (WHY): ..."); ZB_ERR_CONFIG
 * for control settings that cannot work. Undo with dp__run_ctl_fini()
 * after dp_node_stop(). */
int dp__run_control_host(const struct zb_config *cfg, struct act_runtime *actors,
			 FILE *log, bool *started, char *what, size_t whatlen,
			 char *err, size_t errlen);

/* Most verbose control log level written (CTL_LOG_*; default CTL_LOG_INFO).
 * Benchmarks keep their tables clean with CTL_LOG_WARN. Before the host call. */
void dp__run_ctl_log_level(int max_level);

#endif
