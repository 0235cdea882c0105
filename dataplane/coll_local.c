/* coll_local.c — `zbmd local`: an N-node cluster on this machine.
 *
 *   zbmd local --nodes N [--link tcp|veth|memif] [--netem "loss 2%"] [--ns]
 *              [--qdisc "tbf rate 300mbit burst 16kb limit 16kb"]
 *              [--set SECTION.KEY=VALUE]... [--kill NODE@MS] [--linkdown NODE@MS]
 *              [--keep] -- COMMAND [ARGS...]
 *
 * Writes one config per node from the embedded default (below, plus --set
 * overrides), starts COMMAND on every node with `--config FILE` appended
 * (COMMAND is a zbmd command such as `bench allreduce`, or a program path
 * when it contains a '/'), passes node 0's output through, keeps the
 * others' in log files, and tears everything down — on success, on
 * failure, and on Ctrl-C / SIGTERM (the nodes run in their own process
 * group with PR_SET_PDEATHSIG, so even a SIGKILL of `zbmd local` takes them
 * down; namespaces are removed by the signal path and the normal path).
 *
 * Links:
 *   tcp    kernel TCP. Without --netem/--ns: processes on loopback, node i
 *          at 127.77.X.(i+1) (X from the pid, so parallel runs don't
 *          collide). With --netem or --ns: one network namespace per node
 *          (zbcoll-PID-i) joined by veth pairs to a bridge in a hub
 *          namespace (zbcoll-PID-hub); --qdisc SPEC (any tc qdisc; --netem
 *          SPEC is --qdisc "netem SPEC") goes on every node's
 *          egress.
 *   veth, memif  need the dpdk net provider, which has not landed yet:
 *          refused with a clear message rather than faked.
 */
#include "zbmd/coll.h"

#include <fcntl.h>
#include <stdarg.h>
#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define LOCAL_MAX_NODES 16
#define LOCAL_MAX_SETS 32

static volatile sig_atomic_t local_signal;

static void local_on_signal(int sig) { local_signal = sig; }

/* The embedded default config: one row per key, rendered per node. */
struct local_kv {
	char sec[32], key[32], val[128];
};

static const struct local_kv local_defaults[] = {
	{"cluster", "id", "4242"},
	{"transport", "kind", "tcp"},
	{"transport", "tcp_port", "7402"},
	{"coll", "channels", "2"},
	{"coll", "chunk_kb", "256"},
	{"coll", "timeout_ms", "5000"},
	{"dataplane", "idle", "adaptive"},
};

struct local_opts {
	int nodes;
	const char *link, *netem, *qdisc;
	char qdisc_buf[256];
	bool ns, keep;
	struct local_kv kv[ZB_ARRAY_LEN(local_defaults) + LOCAL_MAX_SETS];
	int nkv;
	int kill_node, linkdown_node;
	long kill_ms, linkdown_ms;
	char **cmd;
	int ncmd;
};

struct local_node {
	pid_t pid;
	int status;
	bool exited;
	uint64_t exit_ns;
	char cfg[256], log[256], ns[64];
};

static void local_usage(FILE *f)
{
	fprintf(f,
"usage: zbmd local --nodes N [--link tcp|veth|memif] [--netem SPEC] [--ns]\n"
"                  [--set SECTION.KEY=VALUE]... [--kill NODE@MS]\n"
"                  [--linkdown NODE@MS] [--keep] -- COMMAND [ARGS...]\n"
"Starts an N-node cluster on this machine (embedded default config), runs\n"
"`zbmd COMMAND ARGS --config nodeI.ini` on every node (a COMMAND with a '/'\n"
"is run as a program), prints node 0's output and tears everything down.\n"
"  --link tcp        kernel TCP (default; loopback, or namespaces with --ns/--netem)\n"
"  --netem SPEC      tc netem on every node's link, e.g. \"loss 2%% reorder 25%%\"\n"
"  --qdisc SPEC      any tc qdisc on every node's link, e.g. \"tbf rate 300mbit\n"
"                    burst 16kb limit 16kb\" (a tiny queue: real drops)\n"
"  --set S.K=V       override a key of the embedded config\n"
"  --kill N@MS       kill -9 node N after MS ms (fault test)\n"
"  --linkdown N@MS   take node N's link down after MS ms (namespaces)\n"
"  --keep            keep the configs and logs directory\n");
}

static int local_set(struct local_opts *o, const char *spec)
{
	const char *dot = strchr(spec, '.'), *eq = strchr(spec, '=');
	struct local_kv kv = {0};

	if (!dot || !eq || dot > eq || dot == spec || eq == dot + 1 ||
	    (size_t)(dot - spec) >= sizeof(kv.sec) ||
	    (size_t)(eq - dot - 1) >= sizeof(kv.key) || strlen(eq + 1) >= sizeof(kv.val))
		return -EINVAL;
	memcpy(kv.sec, spec, (size_t)(dot - spec));
	memcpy(kv.key, dot + 1, (size_t)(eq - dot - 1));
	strcpy(kv.val, eq + 1);
	for (int i = 0; i < o->nkv; i++)
		if (!strcmp(o->kv[i].sec, kv.sec) && !strcmp(o->kv[i].key, kv.key)) {
			o->kv[i] = kv;
			return 0;
		}
	if (o->nkv == (int)ZB_ARRAY_LEN(o->kv))
		return -ENOSPC;
	o->kv[o->nkv++] = kv;
	return 0;
}

static int local_at(const char *s, int *node, long *ms)
{
	char *end;
	long n = strtol(s, &end, 10);
	if (end == s || *end != '@' || n < 0 || n >= LOCAL_MAX_NODES)
		return -EINVAL;
	s = end + 1;
	*ms = strtol(s, &end, 10);
	if (end == s || *end || *ms < 0)
		return -EINVAL;
	*node = (int)n;
	return 0;
}

static int local_parse(int argc, char **argv, struct local_opts *o)
{
	static const struct option lo[] = {
		{"nodes", required_argument, 0, 'n'},
		{"link", required_argument, 0, 'l'},
		{"netem", required_argument, 0, 'e'},
		{"qdisc", required_argument, 0, 'q'},
		{"ns", no_argument, 0, 'N'},
		{"set", required_argument, 0, 's'},
		{"kill", required_argument, 0, 'k'},
		{"linkdown", required_argument, 0, 'd'},
		{"keep", no_argument, 0, 'K'},
		{"help", no_argument, 0, 'h'},
		{0, 0, 0, 0}};
	int c;

	memset(o, 0, sizeof(*o));
	o->nodes = 4;
	o->link = "tcp";
	o->kill_node = o->linkdown_node = -1;
	for (size_t i = 0; i < ZB_ARRAY_LEN(local_defaults); i++)
		o->kv[o->nkv++] = local_defaults[i];
	/* Loopback nodes listen on 127.77.(pid % 250).i; the port comes from
	 * the rest of the pid, so two runs at once never share ip:port. */
	char port[16];
	snprintf(port, sizeof(port), "%d", 10000 + ((int)getpid() / 250) % 50000);
	for (int i = 0; i < o->nkv; i++)
		if (!strcmp(o->kv[i].key, "tcp_port"))
			snprintf(o->kv[i].val, sizeof(o->kv[i].val), "%s", port);
	optind = 1;
	/* '+': stop at the first non-option (the command after --). */
	while ((c = getopt_long(argc, argv, "+n:h", lo, NULL)) != -1) {
		switch (c) {
		case 'n': {
			char *end;
			long v = strtol(optarg, &end, 10);
			if (*end || v < 1 || v > LOCAL_MAX_NODES) {
				fprintf(stderr, "zbmd local: --nodes must be 1..%d\n",
					LOCAL_MAX_NODES);
				return -EINVAL;
			}
			o->nodes = (int)v;
			break;
		}
		case 'l': o->link = optarg; break;
		case 'e': o->netem = optarg; break;
		case 'q': o->qdisc = optarg; break;
		case 'N': o->ns = true; break;
		case 'K': o->keep = true; break;
		case 's':
			if (local_set(o, optarg) < 0) {
				fprintf(stderr, "zbmd local: bad --set '%s' (want "
					"SECTION.KEY=VALUE)\n", optarg);
				return -EINVAL;
			}
			break;
		case 'k':
		case 'd':
			if (local_at(optarg, c == 'k' ? &o->kill_node : &o->linkdown_node,
				     c == 'k' ? &o->kill_ms : &o->linkdown_ms) < 0) {
				fprintf(stderr, "zbmd local: bad --%s '%s' (want NODE@MS)\n",
					c == 'k' ? "kill" : "linkdown", optarg);
				return -EINVAL;
			}
			break;
		case 'h':
			local_usage(stdout);
			return 1;
		default:
			local_usage(stderr);
			return -EINVAL;
		}
	}
	o->cmd = argv + optind;
	o->ncmd = argc - optind;
	if (o->ncmd < 1) {
		fprintf(stderr, "zbmd local: no command (zbmd local --nodes 4 -- bench "
			"allreduce ...)\n");
		return -EINVAL;
	}
	if (strcmp(o->link, "tcp") != 0) {
		if (!strcmp(o->link, "veth") || !strcmp(o->link, "memif"))
			fprintf(stderr, "zbmd local: --link %s is not available yet: it "
				"needs the dpdk net provider, which this build does not "
				"have; use --link tcp\n", o->link);
		else
			fprintf(stderr, "zbmd local: unknown --link '%s' (tcp, veth, "
				"memif)\n", o->link);
		return -EINVAL;
	}
	if (o->netem && o->qdisc) {
		fprintf(stderr, "zbmd local: --netem and --qdisc both set one root "
			"qdisc; give one\n");
		return -EINVAL;
	}
	if (o->netem) {
		snprintf(o->qdisc_buf, sizeof(o->qdisc_buf), "netem %s", o->netem);
		o->qdisc = o->qdisc_buf;
	}
	if (o->qdisc || o->linkdown_node >= 0)
		o->ns = true;
	if ((o->kill_node >= o->nodes) || (o->linkdown_node >= o->nodes)) {
		fprintf(stderr, "zbmd local: --kill/--linkdown node out of range\n");
		return -EINVAL;
	}
	return 0;
}

/* ---- configs and namespaces ---------------------------------------------- */

static int local_write_config(const struct local_opts *o, int i, const char *path,
			      const char *ipfmt, int x)
{
	FILE *f = fopen(path, "w");
	const char *last = "";

	if (!f)
		return -errno;
	fprintf(f, "# generated by zbmd local (embedded default config)\n"
		"[node]\nid = %d\nname = local%d\n", i, i);
	/* Sections in first-appearance order; keys of a section together. */
	for (int a = 0; a < o->nkv; a++) {
		bool seen = false;
		for (int b = 0; b < a; b++)
			seen = seen || !strcmp(o->kv[b].sec, o->kv[a].sec);
		if (seen || !strcmp(o->kv[a].sec, "node"))
			continue;
		last = o->kv[a].sec;
		fprintf(f, "\n[%s]\n", last);
		for (int b = a; b < o->nkv; b++)
			if (!strcmp(o->kv[b].sec, last))
				fprintf(f, "%s = %s\n", o->kv[b].key, o->kv[b].val);
	}
	for (int p = 0; p < o->nodes; p++) {
		fprintf(f, "\n[peer.%d]\nip = ", p);
		fprintf(f, ipfmt, x, p + 1);
		fprintf(f, "\n");
	}
	return fclose(f) == 0 ? 0 : -errno;
}

/* Run a shell command line; 0 when it exited 0. Output goes to stderr. */
static int local_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int local_sh(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	int rc = system(cmd);
	return (rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 0) ? 0 : -1;
}

static void local_ns_teardown(const struct local_opts *o, int pid)
{
	for (int i = 0; i < o->nodes; i++)
		local_sh("ip netns del zbcoll-%d-%d 2>/dev/null", pid, i);
	local_sh("ip netns del zbcoll-%d-hub 2>/dev/null", pid);
}

static int local_ns_setup(const struct local_opts *o, int pid, int x)
{
	if (local_sh("ip netns add zbcoll-%d-hub && "
		     "ip -n zbcoll-%d-hub link add br0 type bridge && "
		     "ip -n zbcoll-%d-hub link set br0 up", pid, pid, pid) < 0)
		return -1;
	for (int i = 0; i < o->nodes; i++) {
		if (local_sh("ip netns add zbcoll-%d-%d && "
			     "ip -n zbcoll-%d-hub link add v%d type veth peer name eth0 "
			     "netns zbcoll-%d-%d && "
			     "ip -n zbcoll-%d-hub link set v%d master br0 up && "
			     "ip -n zbcoll-%d-%d addr add 10.77.%d.%d/24 dev eth0 && "
			     "ip -n zbcoll-%d-%d link set eth0 up && "
			     "ip -n zbcoll-%d-%d link set lo up",
			     pid, i, pid, i, pid, i, pid, i, pid, i, x, i + 1, pid, i,
			     pid, i) < 0)
			return -1;
		if (o->qdisc && local_sh("ip netns exec zbcoll-%d-%d tc qdisc add dev "
					 "eth0 root %s", pid, i, o->qdisc) < 0) {
			fprintf(stderr, "zbmd local: `tc qdisc add dev eth0 root %s` "
				"failed%s\n", o->qdisc, o->netem ? " (is sch_netem "
				"available in this kernel?)" : "");
			return -1;
		}
	}
	return 0;
}

/* ---- processes ---------------------------------------------------------- */

static pid_t local_spawn(const struct local_opts *o, struct local_node *nd,
			 int i, pid_t pgid)
{
	pid_t pid = fork();

	if (pid != 0) {
		if (pid > 0)
			(void)setpgid(pid, pgid ? pgid : pid);
		return pid;
	}
	/* child */
	(void)setpgid(0, pgid);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	if (nd->ns[0]) {
		char path[128];
		snprintf(path, sizeof(path), "/run/netns/%s", nd->ns);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || setns(fd, CLONE_NEWNET) < 0) {
			fprintf(stderr, "zbmd local: node %d: entering %s: %s\n", i,
				nd->ns, strerror(errno));
			_exit(127);
		}
		close(fd);
	}
	if (i != 0) {
		int fd = open(nd->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
	}
	char *args[128];
	int n = 0;
	bool prog = strchr(o->cmd[0], '/') != NULL;
	if (!prog)
		args[n++] = "zbmd";
	for (int k = 0; k < o->ncmd && n < 124; k++)
		args[n++] = o->cmd[k];
	args[n++] = "--config";
	args[n++] = nd->cfg;
	args[n] = NULL;
	execv(prog ? o->cmd[0] : "/proc/self/exe", args);
	fprintf(stderr, "zbmd local: node %d: exec %s: %s\n", i, o->cmd[0],
		strerror(errno));
	_exit(127);
}

static void local_tail(const char *path)
{
	char line[512], last[4][512] = {{0}};
	int n = 0;
	FILE *f = fopen(path, "r");

	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		strcpy(last[n++ % 4], line);
	fclose(f);
	for (int k = n > 4 ? n - 4 : 0; k < n; k++)
		fprintf(stderr, "    | %s", last[k % 4]);
}

static void local_describe(const struct local_node *nd, int i, uint64_t t0,
			   uint64_t kill_ns)
{
	int st = nd->status;
	char when[96];

	snprintf(when, sizeof(when), "after %llu ms",
		 (unsigned long long)((nd->exit_ns - t0) / 1000000));
	if (kill_ns && nd->exit_ns >= kill_ns)
		snprintf(when + strlen(when), sizeof(when) - strlen(when),
			 " (%llu ms after the fault)",
			 (unsigned long long)((nd->exit_ns - kill_ns) / 1000000));
	if (WIFSIGNALED(st))
		fprintf(stderr, "zbmd local: node %d killed by signal %d %s\n", i,
			WTERMSIG(st), when);
	else if (WEXITSTATUS(st))
		fprintf(stderr, "zbmd local: node %d exited with status %d %s\n", i,
			WEXITSTATUS(st), when);
	else
		fprintf(stderr, "zbmd local: node %d exited with status 0 %s\n", i, when);
}

/* One cluster run's state, shared by the steps below. */
struct local_run {
	struct local_opts o;
	struct local_node nd[LOCAL_MAX_NODES];
	char dir[32];
	int pid, x;
	pid_t pgid;
	bool ns_up, failed;
	uint64_t t0, fault_ns;
};

static int local_prepare(struct local_run *L)
{
	if (L->o.ns) {
		if (geteuid() != 0) {
			fprintf(stderr, "zbmd local: namespaces (--ns/--netem/--qdisc/--linkdown) "
				"need root\n");
			return -EPERM;
		}
		L->ns_up = true;
		if (local_ns_setup(&L->o, L->pid, L->x) < 0) {
			fprintf(stderr, "zbmd local: setting up namespaces zbcoll-%d-* "
				"failed\n", L->pid);
			return -EIO;
		}
	}
	for (int i = 0; i < L->o.nodes; i++) {
		struct local_node *nd = &L->nd[i];
		snprintf(nd->cfg, sizeof(nd->cfg), "%s/node%d.ini", L->dir, i);
		snprintf(nd->log, sizeof(nd->log), "%s/node%d.log", L->dir, i);
		if (L->o.ns)
			snprintf(nd->ns, sizeof(nd->ns), "zbcoll-%d-%d", L->pid, i);
		int rc = local_write_config(&L->o, i, nd->cfg,
					    L->o.ns ? "10.77.%d.%d" : "127.77.%d.%d", L->x);
		if (rc < 0) {
			fprintf(stderr, "zbmd local: writing %s: %s\n", nd->cfg,
				strerror(-rc));
			return rc;
		}
	}
	return 0;
}

/* Fault injection due at `now`? (--kill, --linkdown) */
static void local_faults(struct local_run *L, uint64_t now, bool *killed,
			 bool *downed)
{
	const struct local_opts *o = &L->o;

	if (o->kill_node >= 0 && !*killed &&
	    now - L->t0 >= (uint64_t)o->kill_ms * 1000000ull) {
		*killed = true;
		L->fault_ns = now;
		kill(L->nd[o->kill_node].pid, SIGKILL);
		fprintf(stderr, "zbmd local: killed node %d (kill -9) at %ld ms\n",
			o->kill_node, o->kill_ms);
	}
	if (o->linkdown_node >= 0 && !*downed &&
	    now - L->t0 >= (uint64_t)o->linkdown_ms * 1000000ull) {
		*downed = true;
		L->fault_ns = now;
		local_sh("ip -n zbcoll-%d-%d link set eth0 down", L->pid,
			 o->linkdown_node);
		fprintf(stderr, "zbmd local: link of node %d down at %ld ms\n",
			o->linkdown_node, o->linkdown_ms);
	}
}

/* Start every node, then reap them until all exited or a signal came. */
static void local_supervise(struct local_run *L)
{
	bool killed = false, downed = false;
	int left;

	fflush(NULL);
	L->t0 = zb_now_ns();
	for (int i = 0; i < L->o.nodes; i++) {
		L->nd[i].pid = local_spawn(&L->o, &L->nd[i], i, L->pgid);
		if (L->nd[i].pid < 0) {
			fprintf(stderr, "zbmd local: fork: %s\n", strerror(errno));
			L->failed = true;
			return;
		}
		if (!L->pgid)
			L->pgid = L->nd[i].pid;
	}
	for (left = L->o.nodes; left > 0 && !local_signal;) {
		int st;
		local_faults(L, zb_now_ns(), &killed, &downed);
		pid_t p = waitpid(-L->pgid, &st, WNOHANG);
		if (p < 0 && errno == ECHILD)
			break;
		if (p <= 0) {
			usleep(5000);
			continue;
		}
		for (int i = 0; i < L->o.nodes; i++)
			if (L->nd[i].pid == p) {
				L->nd[i].exited = true;
				L->nd[i].status = st;
				L->nd[i].exit_ns = zb_now_ns();
				L->failed |= !WIFEXITED(st) || WEXITSTATUS(st);
				left--;
			}
	}
}

/* SIGTERM, then SIGKILL, whatever of the group still runs; reap it all. */
static void local_stop(struct local_run *L)
{
	bool any = false;

	if (!L->pgid)
		return;
	for (int i = 0; i < L->o.nodes; i++)
		any = any || (L->nd[i].pid > 0 && !L->nd[i].exited);
	if (!any)
		return;
	kill(-L->pgid, SIGTERM);
	for (int t = 0; t < 200; t++) {
		pid_t p = waitpid(-L->pgid, NULL, WNOHANG);
		if (p < 0)
			break;
		if (p == 0)
			usleep(10000);
	}
	kill(-L->pgid, SIGKILL);
	while (waitpid(-L->pgid, NULL, 0) > 0)
		;
}

/* What the qdisc did to the traffic: "sent N pkt (dropped D, ...)" per node. */
static void local_qdisc_stats(const struct local_run *L)
{
	long long sent_all = 0, dropped_all = 0;

	for (int i = 0; i < L->o.nodes; i++) {
		char cmd[160], line[512];
		snprintf(cmd, sizeof(cmd), "ip netns exec zbcoll-%d-%d tc -s qdisc show "
			 "dev eth0 2>/dev/null", L->pid, i);
		FILE *f = popen(cmd, "r");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f)) {
			long long b, p, d;
			if (sscanf(line, " Sent %lld bytes %lld pkt (dropped %lld", &b, &p,
				   &d) == 3) {
				sent_all += p;
				dropped_all += d;
				break;
			}
		}
		pclose(f);
	}
	fprintf(stderr, "zbmd local: qdisc \"%s\": %lld packets sent, %lld dropped "
		"on the nodes' links\n", L->o.qdisc, sent_all, dropped_all);
}

static void local_cleanup(struct local_run *L)
{
	if (L->ns_up && L->o.qdisc && L->t0)
		local_qdisc_stats(L);
	if (L->ns_up)
		local_ns_teardown(&L->o, L->pid);
	if (L->o.keep || (L->failed && !local_signal && !L->fault_ns)) {
		fprintf(stderr, "zbmd local: configs and logs kept in %s\n", L->dir);
		return;
	}
	for (int i = 0; i < L->o.nodes; i++) {
		unlink(L->nd[i].cfg);
		unlink(L->nd[i].log);
	}
	rmdir(L->dir);
}

int coll_local_main(int argc, char **argv)
{
	static struct local_run L;
	struct sigaction sa = {.sa_handler = local_on_signal}, old[3];
	int rc, status = 1;

	memset(&L, 0, sizeof(L));
	local_signal = 0;
	rc = local_parse(argc, argv, &L.o);
	if (rc)
		return rc > 0 ? 0 : 2;
	L.pid = (int)getpid();
	L.x = L.pid % 250;
	snprintf(L.dir, sizeof(L.dir), "/tmp/zbmd-local-XXXXXX");
	if (!mkdtemp(L.dir)) {
		fprintf(stderr, "zbmd local: mkdtemp: %s\n", strerror(errno));
		return 1;
	}
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old[0]);
	sigaction(SIGTERM, &sa, &old[1]);
	sigaction(SIGHUP, &sa, &old[2]);
	if (local_prepare(&L) < 0) {
		L.failed = true;
	} else {
		local_supervise(&L);
		if (local_signal)
			fprintf(stderr, "\nzbmd local: caught signal %d, stopping the "
				"nodes\n", (int)local_signal);
		local_stop(&L);
		if (!local_signal && (L.failed || L.fault_ns))
			for (int i = 0; i < L.o.nodes; i++)
				if (L.nd[i].exited) {
					local_describe(&L.nd[i], i, L.t0, L.fault_ns);
					if (i != 0 && (!WIFEXITED(L.nd[i].status) ||
						       WEXITSTATUS(L.nd[i].status)))
						local_tail(L.nd[i].log);
				}
	}
	status = local_signal ? 130 : L.failed ? 1 : 0;
	local_cleanup(&L);
	sigaction(SIGINT, &old[0], NULL);
	sigaction(SIGTERM, &old[1], NULL);
	sigaction(SIGHUP, &old[2], NULL);
	return status;
}
