/* dataplane/cmd_run.c — `zbmd run -c FILE.ini`: the node process.
 *
 * Signals: SIGINT/SIGTERM/SIGHUP/SIGUSR1 are blocked before the EAL starts, so every
 * EAL thread (lcores, interrupt thread) and the control thread inherit them
 * blocked and only the main thread takes them. SIGINT/SIGTERM/SIGHUP ask the loops
 * to quit; SIGUSR1 prints the counters (main thread; when the main lcore is
 * itself the only dataplane lcore the counters are printed at exit only).
 */
#include "zbmd/common.h"
#include "zbmd/config.h"
#include "zbmd/dataplane.h"
#include "zbmd/gpu.h"
#include "zbmd/rdma.h"
#include "../cli/cli.h"
#include "run_ctl.h"

#include <pthread.h>

#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <string.h>
#include <sys/un.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <stddef.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop_signal, dump_requested;

/* The actor runtime, hosted on the dataplane lcores (one worker per lcore,
 * driven by the loop's actor hook) when the actors module is in the build. */
#if __has_include("zbmd/actors.h")
#include "zbmd/actors.h"
#include "zbmd/remote.h"
#define DP_HOST_ACTORS 1
static struct act_runtime *actors;

static int actors_host(const struct zb_config *cfg)
{
	/* an rdma carrier's connection blobs go over the control plane */
	zbra_set_provider_arg(dp__rdma_act_provider_arg(cfg));
	int rc = zbra_host(cfg, &actors);   /* remote sends over the transport */
	if (rc == 0)
		printf("actors: %u workers hosted on the dataplane lcores, %u slots, reductions %u, remote messages over %s\n",
		       dp_lcore_count(), cfg->actors.max_actors, cfg->actors.reductions,
		       zbra_carrier() ? zbra_carrier() : "nothing (no transport)");
	return rc;
}

static void actors_unhost(void)
{
	if (actors)
		act_runtime_destroy(actors);
	actors = NULL;
	zbra_detach();   /* received buffers back to the transport */
}
#endif

/* The control plane ([cluster], [control], [metrics]) as the dataplane's
 * control hook, and the dataplane's counters on /metrics. Returns 0, or the
 * exit status when the node must not start. */
static int control_host(const struct zb_config *cfg, void *actors_rt)
{
	char what[1024], err[1024] = "";
	bool started;
	int rc = dp__run_control_host(cfg, actors_rt, stdout, &started, what,
				      sizeof(what), err, sizeof(err));

	if (rc) {
		fprintf(stderr, "zbmd run: %s\n", err);
		return rc == ZB_ERR_CONFIG ? ZB_EXIT_USAGE : ZB_EXIT_FAIL;
	}
	printf("control: %s\n", what);
	return 0;
}

static void on_stop(int sig)
{
	stop_signal = sig;
	dp_node_request_stop();
}

static void on_dump(int sig)
{
	(void)sig;
	dump_requested = 1;
}

/* systemd's readiness protocol, without libsystemd: `state` in one
 * datagram to the unix socket that $NOTIFY_SOCKET names ("@...": abstract).
 * No socket named (not under a Type=notify unit): nothing to do. A failed
 * send is not the node's failure: systemd times the start out and says so. */
static void sd_notify_state(const char *state)
{
	const char *p = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t n = p ? strlen(p) : 0;
	if (n < 2 || n >= sizeof(sa.sun_path) || (p[0] != '/' && p[0] != '@'))
		return;
	memcpy(sa.sun_path, p, n);
	if (sa.sun_path[0] == '@')
		sa.sun_path[0] = '\0';
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
	(void)sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa, len);
	close(fd);
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: zbmd run -c FILE.ini\n"
		"Start a node: DPDK EAL from [eal], every [port.N], one polling loop per\n"
		"dataplane lcore, the control thread. Runs until SIGINT, SIGTERM or SIGHUP\n"
		"(there is no reload: SIGHUP stops the node too), then stops everything and\n"
		"exits 0. SIGUSR1 prints the per-lcore counters. Under a systemd unit of\n"
		"Type=notify it says READY=1 once it is ready and STOPPING=1 as it stops.\n"
		"Exit status: 0 clean stop, 1 runtime failure, 2 bad usage or config.\n");
}

static int parse_args(int argc, char **argv, const char **path)
{
	static const struct option opts[] = {
		{"config", required_argument, NULL, 'c'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			*path = optarg;
			break;
		case 'h':
			usage(stdout);
			return ZB_EXIT_OK;
		default:
			usage(stderr);
			return ZB_EXIT_USAGE;
		}
	}
	if (!*path || optind != argc) {
		if (optind != argc)
			fprintf(stderr, "zbmd run: unexpected argument '%s'\n", argv[optind]);
		else
			fprintf(stderr, "zbmd run: -c FILE.ini is required\n");
		usage(stderr);
		return ZB_EXIT_USAGE;
	}
	return -1;
}

static void install_signals(sigset_t *blocked, sigset_t *old)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = on_stop;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);   /* the terminal gone: stop cleanly too */
	sa.sa_handler = on_dump;
	sigaction(SIGUSR1, &sa, NULL);
	sigemptyset(blocked);
	sigaddset(blocked, SIGINT);
	sigaddset(blocked, SIGTERM);
	sigaddset(blocked, SIGHUP);
	sigaddset(blocked, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, blocked, old);
}

/* Main thread while worker lcores poll: sleep in sigsuspend (signals are
 * unblocked only inside it, so none is missed between check and wait). */
static void wait_for_stop(const sigset_t *old)
{
	sigset_t wait_mask = *old;
	sigdelset(&wait_mask, SIGINT);
	sigdelset(&wait_mask, SIGTERM);
	sigdelset(&wait_mask, SIGHUP);
	sigdelset(&wait_mask, SIGUSR1);
	while (!dp_node_stop_requested()) {
		sigsuspend(&wait_mask);
		if (dump_requested) {
			dump_requested = 0;
			dp_stats_dump(stdout);
		}
	}
}

int dp_cmd_run(int argc, char **argv)
{
	static struct zb_config cfg;   /* outlives the node */
	struct cfg_error cerr = {{0}};
	struct dp_err err = {{0}};
	const char *path = NULL;
	sigset_t blocked, old;

	/* first: a signal before the handlers ended the process by its
	 * default action (a SIGUSR1 a few ms in killed the node, a SIGTERM
	 * left no "stopped" line); blocked until wait_for_stop takes them */
	install_signals(&blocked, &old);
	int st = parse_args(argc, argv, &path);
	if (st >= 0)
		return st;
	int rc = cfg_load_file(&cfg, path, &cerr);
	if (rc == ZB_ERR_CONFIG) {
		/* every diagnostic, one "zbmd run: FILE:LINE: ..." line each */
		cfg_error_print(stderr, "zbmd run", &cerr);
		return ZB_EXIT_USAGE;
	}
	if (rc) {
		fprintf(stderr, "zbmd run: %s\n",
			cerr.msg[0] ? cerr.msg : zb_strerror(rc));
		return ZB_EXIT_USAGE;
	}

	/* [rdma] enabled: the device opens now or the node does not start
	 * (it ran without one, and the first remote actor message or
	 * collective over rdma failed with "backend or device unavailable") */
	if (cfg.rdma.enabled) {
		char why[256] = "";
		rc = rdma_probe(&cfg, why, sizeof(why));
		if (rc) {
			fprintf(stderr, "zbmd run: [rdma] enabled = true, but the RDMA device "
				"does not open: %s; zbmd rdma-info lists what this machine has\n",
				why);
			return ZB_EXIT_FAIL;
		}
	}
	rc = dp_node_init(&cfg, &err);
	if (rc) {
		fprintf(stderr, "zbmd run: %s\n", err.msg);
		return rc == ZB_ERR_CONFIG ? ZB_EXIT_USAGE : ZB_EXIT_FAIL;
	}
	printf("zbmd: node %u (%s) cluster %u, config %s, pid %d\n", cfg.node.id,
	       cfg.node.name[0] ? cfg.node.name : "unnamed", cfg.cluster.id,
	       path, (int)getpid());
	/* a GPU backend named in [gpu] that this machine lacks: the node
	 * runs (its reductions and trainers open the backend when they start),
	 * but say so now rather than at the first collective */
	if (cfg.gpu.backend != CFG_GPU_AUTO && cfg.gpu.backend != CFG_GPU_CPU) {
		char why[256] = "";
		enum gpu_backend b = (enum gpu_backend)cfg.gpu.backend;
		if (gpu_backend_probe(b, why, sizeof(why)) != 0)
			fprintf(stderr, "zbmd run: warning: [gpu] backend = %s is not usable "
				"on this machine (%s): what opens it here will fail\n",
				gpu_backend_name(b), why[0] ? why : "no reason given");
	}
#ifdef DP_HOST_ACTORS
	rc = actors_host(&cfg);
	if (rc) {
		fprintf(stderr, "zbmd run: actor runtime: %s\n", zb_strerror(rc));
		dp_node_fini();
		return ZB_EXIT_FAIL;
	}
#endif
#ifdef DP_HOST_ACTORS
	st = control_host(&cfg, actors);
#else
	st = control_host(&cfg, NULL);
#endif
	if (st == 0 && (rc = dp__rdma_act_start()) < 0) {
		fprintf(stderr, "zbmd run: actor carrier blobs: %s\n", zb_strerror(rc));
		st = ZB_EXIT_FAIL;
	}
	if (st == 0) {
		rc = dp_node_launch(&err);
		if (rc) {
			fprintf(stderr, "zbmd run: %s\n", err.msg);
			st = ZB_EXIT_FAIL;
		}
	}
	if (st) {
		dp_node_stop();
		dp__rdma_act_stop();
		dp__run_ctl_fini();
		dp_node_fini();
#ifdef DP_HOST_ACTORS
		actors_unhost();
#endif
		return st;
	}
	dp_node_describe(stdout);
	printf("zbmd: ready\n");
	fflush(stdout);
	sd_notify_state("READY=1\nSTATUS=ready");
	/* zbmd local (dataplane/coll_local.c) starts memif nodes one after the
	 * other, each once this file of the one before exists, and counts
	 * --kill N@up+MS from every node's: without it, `zbmd local --link
	 * memif -- run` never started node 1 (30 s, then exit 1) */
	const char *ready = getenv("ZBMD_READY_FILE");
	if (ready && *ready) {
		int fd = open(ready, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		if (fd >= 0)
			close(fd);
	}

	if (dp_main_polls()) {
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		dp_node_wait();
	} else {
		wait_for_stop(&old);
	}
	printf("zbmd: stopping (%s)\n", stop_signal == SIGINT ? "SIGINT" :
					 stop_signal == SIGHUP ? "SIGHUP" : "SIGTERM");
	sd_notify_state("STOPPING=1");
	dp_node_stop();   /* the control thread leaves the cluster, then the loops quit */
	dp__rdma_act_stop();
	dp__run_ctl_fini();
	dp_stats_dump(stdout);
#ifdef DP_HOST_ACTORS
	actors_unhost();   /* the loops that drove it have stopped */
#endif
	dp_node_fini();
	printf("zbmd: stopped cleanly\n");
	fflush(stdout);
	return ZB_EXIT_OK;
}
