/* coll_local.c — `zbmd local`: an N-node cluster on this machine.
 *
 *   zbmd local --nodes N [--link tcp|veth|memif] [--netem "loss 2%"] [--ns]
 *              [--qdisc "tbf rate 300mbit burst 16kb limit 16kb"]
 *              [--set SECTION.KEY=VALUE]... [--kill NODE@[up+|started+]MS]
 *              [--linkdown NODE@[up+|started+]MS] [--cpus-per-node auto|0|W]
 *              [--keep]
 *              -- COMMAND [ARGS...]
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
 *   veth   DPDK nodes in network namespaces (scripts/cluster.sh: a bridge
 *          in a hub namespace, net_af_packet on each node's veth); --netem
 *          SPEC goes on every node's hub-side veth (cluster.sh netem).
 *   memif  DPDK nodes joined pairwise by net_memif (scripts/cluster-memif.sh),
 *          started in node order, each once the memif servers it connects
 *          to listen (their abstract sockets show in /proc/net/unix).
 *          9000-byte frames and 768 MB of DPDK memory per node unless the
 *          environment's ZBN_MTU / ZBN_MEMORY_MB say otherwise (veth:
 *          9000-byte frames too).
 *   Both: the scripts generate the node configs (node ids 1..N: rank 0 is
 *   node 1); the embedded defaults below for the dpdk links, --set and
 *   --fault are merged into them; every node's DPDK file-prefix is
 *   zbloc<pid>-<node> and its runtime directory is removed at teardown.
 *   --fault "drop=0.02,reorder=0.05,dup=0.01,seed=7" sets the transport's
 *   [fault] injection on every node (the kernel here has no sch_netem).
 * A node that fails while others run (any command but `run`): they get
 * [coll] timeout_ms + LOCAL_LOST_GRACE_MS to fail on their own, then are
 * stopped (local_lost_cut); so are nodes of a zbmd command that still run
 * that long after another finished (stuck).
 */
#include "zbmd/coll.h"
#include "zbmd/config.h"
#include "zbmd/net.h"

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define LOCAL_MAX_NODES 16
#define LOCAL_MAX_SETS 32   /* local_set says 32 */
#define LOCAL_MEMIF_MAX 9       /* cluster-memif.sh: 8 ports per node */
#define LOCAL_READY_S 30        /* a memif server must listen by then */
#define LOCAL_DPDK_MTU "9000"   /* memif's and veth's frames unless ZBN_MTU says */
/* a node lost in a run: the others get [coll] timeout_ms plus this to fail
 * on their own before zbmd local stops them (local_lost_cut) */
#define LOCAL_LOST_GRACE_MS 5000
#define LOCAL_MEMIF_MEMORY_MB "768"
#define LOCAL_MAX_CPUS 64       /* --cpus-per-node */
#define LOCAL_MAX_ARGS 120      /* words of the node command */

static volatile sig_atomic_t local_signal;
/* Tearing down: every shell command (local_sh, local_capture) ignores a ^C,
 * which the terminal sends to our whole process group; one killed half-way
 * would leave its namespace or its cluster behind. */
static bool local_noint;
#define LOCAL_NOINT "trap '' INT TERM HUP; "

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

/* Defaults for the dpdk links, merged into the scripts' configs. */
static const struct local_kv local_dpdk_defaults[] = {
	{"transport", "kind", "dpdk"},
	/* several nodes' loops share each CPU: an idle loop yields at once
	 * instead of spinning 10 us first (the peer it waits for may be the
	 * loop it keeps off the CPU); 64 B all-reduce on 4 nodes: ~150 ->
	 * ~75 us, large sizes unchanged (docs/collectives.md) */
	{"dataplane", "idle_spin_us", "0"},
	{"coll", "channels", "2"},
	{"coll", "chunk_kb", "256"},
	/* a lost peer fails the ring within 5 s: 4 s of no progress, then
	 * stopping the dataplane. Nodes start one after the other (seconds on
	 * a loaded machine): the transport lets sends to a node not heard from
	 * yet wait (docs/wire.md "Peer down"), so the [transport]
	 * peer_timeout_ms default applies only to nodes that were up. */
	{"coll", "timeout_ms", "4000"},
};

struct local_opts {
	int nodes;
	bool dpdk;                      /* --link veth|memif */
	const char *fault;
	const char *link, *netem, *qdisc;
	char qdisc_buf[256];
	bool ns, keep;
	struct local_kv kv[ZB_ARRAY_LEN(local_defaults) + LOCAL_MAX_SETS + 1];
	int nkv;
	struct local_kv dkv[ZB_ARRAY_LEN(local_dpdk_defaults) + LOCAL_MAX_SETS + 8];
	int ndkv;
	int kill_node, linkdown_node;
	long kill_ms, linkdown_ms;
	/* what a fault's MS counts from: N@MS the start, N@started+MS the
	 * last node's launch, N@up+MS every node up */
	enum local_base { LOCAL_AT_START, LOCAL_AT_STARTED, LOCAL_AT_UP }
		kill_base, linkdown_base;
	int cpus_per_node;              /* --cpus-per-node: -1 auto, 0 shared */
	int spread;                     /* CPUs per node in use: 0 shared */
	int cpus[LOCAL_MAX_NODES * LOCAL_MAX_CPUS];   /* the ones we may use */
	char **cmd;
	int ncmd;
};

struct local_node {
	pid_t pid;
	int status;
	bool exited;
	uint64_t exit_ns;
	char cfg[256], log[256], ns[64];
	char ready[256];        /* created by the node once its collectives are
				 * open (dpdk: its ports and lcores run) */
};

static void local_usage(FILE *f)
{
	fprintf(f,
"usage: zbmd local --nodes N [--link tcp|veth|memif] [--netem SPEC] [--ns]\n"
"                  [--set SECTION.KEY=VALUE]... [--kill NODE@[up+|started+]MS]\n"
"                  [--linkdown NODE@[up+|started+]MS] [--cpus-per-node auto|0|W]\n"
"                  [--keep]\n"
"                  -- COMMAND [ARGS...]\n"
"Starts an N-node cluster on this machine (embedded default config), runs\n"
"`zbmd COMMAND ARGS --config nodeI.ini` on every node (a COMMAND with a '/'\n"
"is run as a program), prints node 0's output and tears everything down.\n"
"COMMAND: bench allreduce, train, run (--link memif or veth), control or status\n"
"(the zbmd commands that take a config; no -c/--config FILE in ARGS), or a\n"
"program's path.\n"
"  --link tcp        kernel TCP (default; loopback, or namespaces with --ns/--netem)\n"
"  --link memif      DPDK nodes joined by net_memif (scripts/cluster-memif.sh;\n"
"                    MTU 9000 and 768 MB per node: env ZBN_MTU, ZBN_MEMORY_MB)\n"
"  --link veth       DPDK nodes in namespaces on veth + net_af_packet (scripts/cluster.sh;\n"
"                    MTU 9000: env ZBN_MTU)\n"
"  --netem SPEC      tc netem on every node's link, e.g. \"loss 2%% delay 1ms reorder 25%%\"\n"
"                    (tcp, veth; needs sch_netem in the kernel)\n"
"  --fault SPEC      dpdk transport fault injection on every node (memif, veth):\n"
"                    \"drop=0.02,reorder=0.05,dup=0.01,seed=7\"\n"
"  --qdisc SPEC      any tc qdisc on every node's link, e.g. \"tbf rate 300mbit\n"
"                    burst 16kb limit 16kb\" (a tiny queue: real drops)\n"
"  --set S.K=V       override a key of the embedded config\n"
"  --kill N@MS       kill -9 node N MS ms after the start (fault test);\n"
"                    N@up+MS: MS ms after every node is up (its collectives\n"
"                    open: joined over tcp, ports and lcores running over dpdk);\n"
"                    N@started+MS: MS ms after the last node was launched\n"
"                    (memif starts them one by one, each once the one\n"
"                    before it is up: then all others are up, the last not yet).\n"
"                    N counts from 0; memif and veth nodes' ids start at 1, so\n"
"                    node N calls itself node N+1 (zbmd local says both);\n"
"                    one --kill (and one --linkdown) per run\n"
"  --linkdown N@MS   take node N's link down after MS ms (namespaces; up+ and\n"
"                    started+ too)\n"
"  --cpus-per-node W  memif, veth: node I polls on CPUs W*I .. W*I+W-1 of those\n"
"                    this process may use (W >= 2: a main lcore and at least\n"
"                    one dataplane lcore), with [dataplane] idle = poll; 0: all\n"
"                    nodes share CPUs 0-1 (idle adaptive); auto (default): 2\n"
"                    where there are 2 per node, else 0\n"
"  --keep            keep the configs and logs directory\n"
"A run (any command but `run`) that loses a node (killed, crashed, exited\n"
"non-zero) gives the others [coll] timeout_ms + 5 s to fail on their own,\n"
"then stops them.\n");
}

/* The row of arr[0..n) for sec.key — the last, where a later row overrides
 * an earlier one — or -1. */
static int local_kv_find(const struct local_kv *arr, int n, const char *sec,
			 const char *key)
{
	for (int i = n - 1; i >= 0; i--)
		if (!strcmp(arr[i].sec, sec) && !strcmp(arr[i].key, key))
			return i;
	return -1;
}

static int local_kv_put(struct local_kv *arr, int *n, int max,
			const struct local_kv *kv)
{
	int i = local_kv_find(arr, *n, kv->sec, kv->key);
	if (i >= 0) {
		arr[i] = *kv;
		return 0;
	}
	if (*n == max)
		return -ENOSPC;
	arr[(*n)++] = *kv;
	return 0;
}

/* --fault "drop=0.02,reorder=0.05,dup=0.01,seed=7" -> [fault] keys */
static int local_fault(struct local_opts *o, const char *spec)
{
	char buf[256], *save = NULL;

	if (strlen(spec) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, spec);
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(t, '='), *end;
		struct local_kv kv = {.sec = "fault"};
		if (!eq)
			return -EINVAL;
		*eq = '\0';
		const char *v = eq + 1;
		errno = 0;
		if (!strcmp(t, "seed")) {
			if (*v < '0' || *v > '9')   /* strtoull takes "-1" */
				return -EINVAL;
			(void)strtoull(v, &end, 10);
			snprintf(kv.key, sizeof(kv.key), "seed");
		} else {
			double d = strtod(v, &end);
			if (!(d >= 0 && d <= 1))   /* NaN too */
				return -EINVAL;
			if (!strcmp(t, "drop") || !strcmp(t, "dup") || !strcmp(t, "reorder"))
				snprintf(kv.key, sizeof(kv.key), "%s_rate", t);
			else
				return -EINVAL;
		}
		if (errno || end == v || *end || strlen(v) >= sizeof(kv.val))
			return -EINVAL;
		strcpy(kv.val, v);
		if (local_kv_put(o->dkv, &o->ndkv, (int)ZB_ARRAY_LEN(o->dkv), &kv) < 0)
			return -ENOSPC;
	}
	return 0;
}

/* key = value into a node's file, quoted where a bare value would read back
 * otherwise (local_set refused the values no quoting can hold). */
static void local_put(FILE *f, const struct local_kv *kv)
{
	fprintf(f, kv->val[0] && cfg_value_needs_quotes(kv->val) ? "%s = \"%s\"\n"
								 : "%s = %s\n",
		kv->key, kv->val);
}

/* *why: what is wrong with the value, when that is what is wrong */
static int local_set(struct local_opts *o, const char *spec, const char **why)
{
	const char *dot = strchr(spec, '.'), *eq = strchr(spec, '=');
	struct local_kv kv = {0};

	*why = eq ? cfg_value_unwritable(eq + 1) : NULL;
	if (*why)
		return -EINVAL;
	if (!dot || !eq || dot > eq || dot == spec || eq == dot + 1 ||
	    (size_t)(dot - spec) >= sizeof(kv.sec) ||
	    (size_t)(eq - dot - 1) >= sizeof(kv.key))
		return -EINVAL;
	for (const char *p = spec; p < eq; p++)   /* names: no blanks, no syntax */
		if (!isgraph((unsigned char)*p) || strchr("[]=;#\"", *p))
			return -EINVAL;
	if (strlen(eq + 1) >= sizeof(kv.val)) {
		*why = "the value is longer than zbmd local takes (127 characters)";
		return -EINVAL;
	}
	memcpy(kv.sec, spec, (size_t)(dot - spec));
	memcpy(kv.key, dot + 1, (size_t)(eq - dot - 1));
	strcpy(kv.val, eq + 1);
	if (!strcmp(kv.sec, "node")) {
		*why = "zbmd local writes [node] for each node itself (id, name)";
		return -EINVAL;
	}
	if (local_kv_put(o->dkv, &o->ndkv, (int)ZB_ARRAY_LEN(o->dkv), &kv) < 0 ||
	    local_kv_put(o->kv, &o->nkv, (int)ZB_ARRAY_LEN(o->kv), &kv) < 0) {
		*why = "more keys set than zbmd local takes (32)";
		return -ENOSPC;
	}
	return 0;
}

/* NODE@MS (from the start), NODE@started+MS (from the last node's launch)
 * or NODE@up+MS (from every node up) */
static int local_at(const char *s, int *node, long *ms, enum local_base *base)
{
	char *end;
	long n = strtol(s, &end, 10);
	if (end == s || *end != '@' || n < 0 || n >= LOCAL_MAX_NODES)
		return -EINVAL;
	s = end + 1;
	*base = LOCAL_AT_START;
	if (strncmp(s, "up+", 3) == 0) {
		*base = LOCAL_AT_UP;
		s += 3;
	} else if (strncmp(s, "started+", 8) == 0) {
		*base = LOCAL_AT_STARTED;
		s += 8;
	}
	if (*s < '0' || *s > '9')
		return -EINVAL;   /* no sign, no blank: strtol would take them */
	errno = 0;
	*ms = strtol(s, &end, 10);
	if (end == s || *end || errno || *ms < 0 || *ms > 86400000L)
		return -EINVAL;   /* at most a day: ms * 1e6 ns stays in range */
	*node = (int)n;
	return 0;
}

/* --cpus-per-node: where this process may use W CPUs per node (and the
 * EAL can name them: ids below 128), o->spread = W and o->cpus lists them;
 * else 0, the nodes sharing CPUs 0-1 (cluster.sh's default). A placement
 * of the user's own (eal.lcores, ZBN_LCORES) wins over auto. -1 (said why)
 * where an explicit W cannot be had. */
static int local_spread(struct local_opts *o)
{
	cpu_set_t set;
	int n = 0, want = o->cpus_per_node > 0 ? o->cpus_per_node : 2;

	o->spread = 0;
	if (o->cpus_per_node == 0)
		return 0;
	if (!o->dpdk) {
		if (o->cpus_per_node < 0)
			return 0;
		fprintf(stderr, "zbmd local: --cpus-per-node places DPDK lcores: it "
			"needs --link memif or veth\n");
		return -1;
	}
	if (local_kv_find(o->dkv, o->ndkv, "eal", "lcores") >= 0 ||
	    getenv("ZBN_LCORES")) {
		if (o->cpus_per_node < 0)
			return 0;
		fprintf(stderr, "zbmd local: --cpus-per-node and eal.lcores / "
			"ZBN_LCORES both place the nodes: give one\n");
		return -1;
	}
	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		for (int c = 0; c < 128 && n < (int)ZB_ARRAY_LEN(o->cpus); c++)
			if (CPU_ISSET(c, &set))
				o->cpus[n++] = c;
	if (n < want * o->nodes) {
		if (o->cpus_per_node < 0)
			return 0;
		fprintf(stderr, "zbmd local: --cpus-per-node %d: %d nodes need %d "
			"CPUs, this process may use %d (ids below 128)\n", want,
			o->nodes, want * o->nodes, n);
		return -1;
	}
	o->spread = want;
	if (local_kv_find(o->dkv, o->ndkv, "dataplane", "idle") < 0 &&
	    !getenv("ZBN_IDLE")) {
		/* a CPU of its own: the production default, pure polling */
		struct local_kv kv = {"dataplane", "idle", "poll"};
		if (local_kv_put(o->dkv, &o->ndkv, (int)ZB_ARRAY_LEN(o->dkv), &kv) < 0) {
			fprintf(stderr, "zbmd local: too many --set\n");
			return -1;
		}
	}
	return 0;
}

/* The zbmd commands zbmd local runs on every node, each given its node's
 * config (local_spawn puts --config FILE after the command's words); the
 * first three start the node's dataplane. */
static const char *const local_cfg_cmds[] = {"bench allreduce", "train", "run",
					     "control", "status"};

/* The command after --: a program (a path), or a zbmd command that takes
 * --config. Refused here (exit 2, before anything starts) what the nodes
 * would refuse or misread: a command without a config (the error named a
 * --config the user never typed), a second --, -c FILE (every node's
 * generated config replaced), a provider the links do not carry, and for
 * bench allreduce what its flags alone say (coll_bench_local_check). */
static int local_cmd_ok(const struct local_opts *o)
{
	const char *c0 = o->cmd[0];
	char name[64];
	int words = 1;

	if (strchr(c0, '/'))
		return 0;   /* a program of the user's: its flags are its own */
	if (!strcmp(c0, "--")) {
		fprintf(stderr, "zbmd local: a second '--' (the command follows the "
			"first: zbmd local --nodes 2 -- bench allreduce ...)\n");
		return -1;
	}
	if (c0[0] == '-') {
		fprintf(stderr, "zbmd local: '%s' where the command should be (zbmd "
			"local's flags go before --)\n", c0);
		return -1;
	}
	if (!strcmp(c0, "bench") && o->ncmd >= 2 && o->cmd[1][0] != '-')
		words = 2;
	snprintf(name, sizeof(name), "%s%s%s", c0, words == 2 ? " " : "",
		 words == 2 ? o->cmd[1] : "");
	size_t k = 0;
	while (k < ZB_ARRAY_LEN(local_cfg_cmds) && strcmp(name, local_cfg_cmds[k]))
		k++;
	if (k == ZB_ARRAY_LEN(local_cfg_cmds)) {
		static const char *const known[] = {"help", "bench", "gpu-info",
			"local", "version", "check-config", "config-doc", "rdma-info"};
		bool zbmd = false;
		for (size_t i = 0; i < ZB_ARRAY_LEN(known); i++)
			zbmd |= !strcmp(c0, known[i]);
		if (zbmd)
			fprintf(stderr, "zbmd local: zbmd local runs bench allreduce, "
				"train, run, control or status on every node, each "
				"given its node's config; '%s' takes no --config\n", name);
		else
			fprintf(stderr, "zbmd local: '%s' is not a zbmd command (zbmd "
				"local runs bench allreduce, train, run, control or status, "
				"or a program named by its path: ./prog)\n", c0);
		return -1;
	}
	bool bench = k == 0, dataplane = k <= 2;
	const char *prov = o->dpdk ? "dpdk" : "tcp";
	if (k == 2 && !o->dpdk) {
		/* zbmd run is a DPDK node: over tcp its config has no [eal] of
		 * its own, so every node took file-prefix zbmd and hugepages —
		 * they refused one another ("another zbmd node is running with
		 * file-prefix zbmd") or found no hugepages, exit 1 at once */
		fprintf(stderr, "zbmd local: 'run' starts a DPDK dataplane node: it "
			"needs --link memif or veth (--link %s has none)\n", o->link);
		return -1;
	}
	if (dataplane && !strcmp(o->link, "memif") && o->nodes < 2) {
		fprintf(stderr, "zbmd local: --link memif needs at least 2 nodes for "
			"'%s' (a memif link joins two nodes; one node alone: --link veth "
			"or tcp)\n", name);
		return -1;
	}
	/* each node's dataplane lanes: one per lcore after the first; not
	 * known here where the user places the lcores (the nodes check) */
	unsigned lanes = local_kv_find(o->dkv, o->ndkv, "eal", "lcores") >= 0 ||
			 getenv("ZBN_LCORES") ? 0 : o->spread > 2 ? (unsigned)o->spread - 1 : 1;
	if (o->dpdk && lanes) {   /* the dpdk provider's channels: transport streams */
		int i = local_kv_find(o->dkv, o->ndkv, "coll", "channels");
		long ch = i >= 0 ? strtol(o->dkv[i].val, NULL, 10) : 0;
		unsigned max = cfg_dpdk_channels_max(lanes);
		if (ch > (long)max) {
			fprintf(stderr, "zbmd local: --set coll.channels=%s: the dpdk "
				"provider (--link %s) takes 1..%u channels (at most %d "
				"per dataplane lane, %u lane%s)\n", o->dkv[i].val, o->link,
				max, NET_DPDK_MAX_CHANNELS, lanes, lanes == 1 ? "" : "s");
			return -1;
		}
	}
	if (bench)
		return coll_bench_local_check(o->ncmd - 1, o->cmd + 1,
					      (unsigned)o->nodes, o->link, prov,
					      o->dpdk ? lanes : 1) < 0 ? -1 : 0;
	/* the others: -c/--config FILE would replace the node's config */
	for (int i = words; i < o->ncmd && strcmp(o->cmd[i], "--"); i++) {
		const char *a = o->cmd[i];
		if (!strcmp(a, "-c") || !strcmp(a, "--config") ||
		    !strncmp(a, "--config=", 9) || (!strncmp(a, "-c", 2) && a[2])) {
			bool sep = !strcmp(a, "-c") || !strcmp(a, "--config");
			fprintf(stderr, "zbmd local: %s%s%s in the command: zbmd local "
				"writes every node's config itself (use --set "
				"SECTION.KEY=VALUE for config keys)\n", a, sep ? " " : "",
				sep && i + 1 < o->ncmd ? o->cmd[i + 1] : "");
			return -1;
		}
	}
	return 0;
}

/* An empty or all-blank flag value (--netem, --qdisc, --fault). */
static bool local_blank(const char *s)
{
	return strspn(s, " \t") == strlen(s);
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
		{"fault", required_argument, 0, 'F'},
		{"cpus-per-node", required_argument, 0, 'C'},
		{"help", no_argument, 0, 'h'},
		{0, 0, 0, 0}};
	int c;

	memset(o, 0, sizeof(*o));
	o->nodes = 4;
	o->link = "tcp";
	o->kill_node = o->linkdown_node = -1;
	o->cpus_per_node = -1;
	for (size_t i = 0; i < ZB_ARRAY_LEN(local_defaults); i++)
		o->kv[o->nkv++] = local_defaults[i];
	for (size_t i = 0; i < ZB_ARRAY_LEN(local_dpdk_defaults); i++)
		o->dkv[o->ndkv++] = local_dpdk_defaults[i];
	/* Loopback nodes listen on 127.77.(pid % 250).i; the port comes from
	 * the rest of the pid, so two runs at once never share ip:port. */
	char port[16];
	snprintf(port, sizeof(port), "%d", 10000 + ((int)getpid() / 250) % 50000);
	for (int i = 0; i < o->nkv; i++)
		if (!strcmp(o->kv[i].key, "tcp_port"))
			snprintf(o->kv[i].val, sizeof(o->kv[i].val), "%s", port);
	optind = 1;
	opterr = 0;   /* getopt's own messages name only argv[0] */
	/* '+': stop at the first non-option (the command after --). */
	while ((c = getopt_long(argc, argv, "+:n:h", lo, NULL)) != -1) {
		switch (c) {
		case 'n': {
			char *end;
			long v = strtol(optarg, &end, 10);
			if (end == optarg || *end || v < 1 || v > LOCAL_MAX_NODES) {
				fprintf(stderr, "zbmd local: bad --nodes '%s' (expected "
					"1..%d)\n", optarg, LOCAL_MAX_NODES);
				return -EINVAL;
			}
			o->nodes = (int)v;
			break;
		}
		case 'l': o->link = optarg; break;
		case 'e':
			if (local_blank(optarg)) {
				fprintf(stderr, "zbmd local: --netem is empty (want netem's "
					"parameters, e.g. \"loss 2%% delay 1ms reorder 25%%\")\n");
				return -EINVAL;
			}
			o->netem = optarg;
			break;
		case 'q':
			if (local_blank(optarg)) {
				fprintf(stderr, "zbmd local: --qdisc is empty (want a "
					"qdisc and its parameters, e.g. \"tbf rate 1gbit "
					"burst 64k latency 10ms\")\n");
				return -EINVAL;
			}
			o->qdisc = optarg;
			break;
		case 'N': o->ns = true; break;
		case 'F':
			if (local_blank(optarg)) {
				fprintf(stderr, "zbmd local: --fault is empty (want e.g. "
					"\"drop=0.02,reorder=0.05,dup=0.01,seed=7\")\n");
				return -EINVAL;
			}
			o->fault = optarg;
			if (local_fault(o, optarg) < 0) {
				fprintf(stderr, "zbmd local: bad --fault '%s' (want e.g. "
					"\"drop=0.02,reorder=0.05,dup=0.01,seed=7\": rates "
					"0..1)\n", optarg);
				return -EINVAL;
			}
			break;
		case 'K': o->keep = true; break;
		case 'C': {
			char *end;
			long v = strcmp(optarg, "auto") ? strtol(optarg, &end, 10) : -1;
			if (strcmp(optarg, "auto") &&
			    (end == optarg || *end || v == 1 || v < 0 || v > LOCAL_MAX_CPUS)) {
				fprintf(stderr, "zbmd local: bad --cpus-per-node '%s' (want "
					"auto, 0, or 2..%d: a main lcore and dataplane "
					"lcores)\n", optarg, LOCAL_MAX_CPUS);
				return -EINVAL;
			}
			o->cpus_per_node = (int)v;
			break;
		}
		case 's': {
			const char *why;
			if (local_set(o, optarg, &why) < 0) {
				if (why)
					fprintf(stderr, "zbmd local: bad --set '%.60s%s': %s\n",
						optarg, strlen(optarg) > 60 ? "..." : "", why);
				else
					fprintf(stderr, "zbmd local: bad --set '%s' (want "
						"SECTION.KEY=VALUE)\n", optarg);
				return -EINVAL;
			}
			break;
		}
		case 'k':
		case 'd':
			/* one fault of each kind: a second one was kept, the
			 * first dropped without a word */
			if ((c == 'k' ? o->kill_node : o->linkdown_node) >= 0) {
				fprintf(stderr, "zbmd local: one --%s per run ('%s' is a "
					"second)\n", c == 'k' ? "kill" : "linkdown", optarg);
				return -EINVAL;
			}
			if (local_at(optarg, c == 'k' ? &o->kill_node : &o->linkdown_node,
				     c == 'k' ? &o->kill_ms : &o->linkdown_ms,
				     c == 'k' ? &o->kill_base : &o->linkdown_base) < 0) {
				fprintf(stderr, "zbmd local: bad --%s '%s' (want NODE@MS, "
					"NODE@started+MS or NODE@up+MS)\n",
					c == 'k' ? "kill" : "linkdown", optarg);
				return -EINVAL;
			}
			break;
		case 'h':
			local_usage(stdout);
			return 1;
		default:   /* ':' or '?' */
			zb_opt_error("zbmd local", c, argc, argv, lo);
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
	if (o->ncmd > LOCAL_MAX_ARGS) {
		fprintf(stderr, "zbmd local: the command has %d words, at most %d\n",
			o->ncmd, LOCAL_MAX_ARGS);
		return -EINVAL;
	}
	if (!strcmp(o->link, "veth") || !strcmp(o->link, "memif")) {
		o->dpdk = true;
		if (o->qdisc || o->ns || o->linkdown_node >= 0) {
			fprintf(stderr, "zbmd local: --qdisc/--ns/--linkdown are for "
				"--link tcp\n");
			return -EINVAL;
		}
		if (o->netem && !strcmp(o->link, "memif")) {
			fprintf(stderr, "zbmd local: --netem needs kernel links (--link "
				"veth or tcp); memif links bypass the kernel: use --fault\n");
			return -EINVAL;
		}
		if (!strcmp(o->link, "memif") && o->nodes > LOCAL_MEMIF_MAX) {
			fprintf(stderr, "zbmd local: --link memif: at most %d nodes\n",
				LOCAL_MEMIF_MAX);
			return -EINVAL;
		}
	} else if (strcmp(o->link, "tcp") != 0) {
		fprintf(stderr, "zbmd local: unknown --link '%s' (tcp, veth, "
			"memif)\n", o->link);
		return -EINVAL;
	} else if (o->fault) {
		fprintf(stderr, "zbmd local: --fault is the dpdk transport's injection: "
			"it needs --link memif or veth (for tcp use --netem/--qdisc "
			"where the kernel has them)\n");
		return -EINVAL;
	}
	if (o->netem && o->qdisc) {
		fprintf(stderr, "zbmd local: --netem and --qdisc both set one root "
			"qdisc; give one\n");
		return -EINVAL;
	}
	if (o->netem && !o->dpdk) {
		snprintf(o->qdisc_buf, sizeof(o->qdisc_buf), "netem %s", o->netem);
		o->qdisc = o->qdisc_buf;
	}
	if (!o->dpdk && (o->qdisc || o->linkdown_node >= 0))
		o->ns = true;
	if ((o->kill_node >= o->nodes) || (o->linkdown_node >= o->nodes)) {
		fprintf(stderr, "zbmd local: --%s %d: no such node (expected 0 .. %d: the "
			"nodes count from 0)\n", o->kill_node >= o->nodes ? "kill" : "linkdown",
			o->kill_node >= o->nodes ? o->kill_node : o->linkdown_node, o->nodes - 1);
		return -EINVAL;
	}
	if (local_spread(o) < 0)
		return -EINVAL;
	if (local_cmd_ok(o) < 0)   /* after local_spread: the lanes per node */
		return -EINVAL;
	/* The nodes share this machine's CPUs: each node's BLAS (the cpu GPU
	 * backend, zbmd train) gets its share of them instead of one thread
	 * per CPU in every node (4 nodes on 2 CPUs: a gradient took ~2x as
	 * long, docs/collectives.md). --set gpu.cpu_threads=N wins. */
	if (local_kv_find(o->kv, o->nkv, "gpu", "cpu_threads") < 0) {
		long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
		struct local_kv kv = {.sec = "gpu", .key = "cpu_threads"};
		snprintf(kv.val, sizeof(kv.val), "%ld",
			 ncpu > o->nodes ? ncpu / o->nodes : 1);
		if (local_kv_put(o->dkv, &o->ndkv, (int)ZB_ARRAY_LEN(o->dkv), &kv) < 0 ||
		    local_kv_put(o->kv, &o->nkv, (int)ZB_ARRAY_LEN(o->kv), &kv) < 0) {
			fprintf(stderr, "zbmd local: too many --set\n");
			return -EINVAL;
		}
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
				local_put(f, &o->kv[b]);
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
	size_t pre = local_noint ? strlen(LOCAL_NOINT) : 0;
	va_list ap;

	memcpy(cmd, LOCAL_NOINT, pre);
	va_start(ap, fmt);
	vsnprintf(cmd + pre, sizeof(cmd) - pre, fmt, ap);
	va_end(ap);
	/* not system(): it ignores SIGINT in the caller while the command
	 * runs, and an ignored signal is dropped — a SIGINT sent to zbmd
	 * local alone (kill -INT, a supervisor) during the namespaces'
	 * set-up was lost, and the run went on to its end, exit 0 */
	pid_t pid = fork();
	if (pid == 0) {
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	if (pid < 0)
		return -1;
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
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
		if (local_signal)
			return -1;   /* interrupted: the rest is not built */
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
			if (local_signal)
				return -1;   /* tc was interrupted: not its failure */
			fprintf(stderr, "zbmd local: `tc qdisc add dev eth0 root %s` "
				"failed%s\n", o->qdisc, o->netem ? " (is sch_netem "
				"available in this kernel?)" : "");
			return -1;
		}
	}
	return 0;
}

/* ---- dpdk links: the cluster scripts ------------------------------------- */

/* Apply kvs to the INI file at path: a key present in its section is
 * replaced, a missing one is added at the end of its section, a missing
 * section is appended. Returns 0 or -errno. */
static int local_merge_ini(const char *path, const struct local_kv *kv, int nkv)
{
	char *lines[512], line[512], cur[32] = "";
	int n = 0, rc = 0;
	bool done[ZB_ARRAY_LEN(((struct local_opts *)0)->dkv) + 1] = {0};
	FILE *f = fopen(path, "r");

	ZB_ASSERT(nkv <= (int)ZB_ARRAY_LEN(done));
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		size_t len = strlen(line);
		/* a longer file or line would come back cut: refuse it */
		if (n == (int)ZB_ARRAY_LEN(lines) ||
		    (line[len - 1] != '\n' && (!feof(f) || len + 1 == sizeof(line)))) {
			rc = -E2BIG;
			break;
		}
		if (line[len - 1] != '\n')   /* the last line, unterminated */
			strcpy(line + len, "\n");
		if (!(lines[n] = strdup(line))) {
			rc = -ENOMEM;
			break;
		}
		n++;
	}
	fclose(f);
	if (rc)
		goto out;
	if (!(f = fopen(path, "w"))) {
		rc = -errno;
		goto out;
	}
	for (int i = 0; i <= n; i++) {
		char sec[32];
		bool hdr = i < n && sscanf(lines[i], " [%31[^]]]", sec) == 1;
		if (i == n || hdr) {    /* end of section cur: add its missing keys */
			for (int k = 0; k < nkv; k++)
				if (!done[k] && cur[0] && !strcmp(kv[k].sec, cur)) {
					local_put(f, &kv[k]);
					done[k] = true;
				}
			if (i == n)
				break;
			snprintf(cur, sizeof(cur), "%s", sec);
			fputs(lines[i], f);
			continue;
		}
		char key[64];
		int k = -1;
		if (cur[0] && sscanf(lines[i], " %63[^= 	]", key) == 1)
			k = local_kv_find(kv, nkv, cur, key);
		if (k >= 0) {
			local_put(f, &kv[k]);
			done[k] = true;
		} else {
			fputs(lines[i], f);
		}
	}
	for (int k = 0; k < nkv; k++) {   /* sections the file lacks */
		if (done[k])
			continue;
		fprintf(f, "\n[%s]\n", kv[k].sec);
		for (int j = k; j < nkv; j++)
			if (!done[j] && !strcmp(kv[j].sec, kv[k].sec)) {
				local_put(f, &kv[j]);
				done[j] = true;
			}
	}
	if (fclose(f) != 0)
		rc = -errno;
out:
	for (int i = 0; i < n; i++)
		free(lines[i]);
	return rc;
}

/* scripts/ of this build: $ZBMD_ROOT/scripts, else beside the binary
 * (build/bin/zbmd -> ../../scripts). */
static int local_scripts(char *out, size_t len)
{
	const char *root = getenv("ZBMD_ROOT");
	char exe[512];
	ssize_t n;

	if (root && snprintf(out, len, "%s/scripts", root) < (int)len &&
	    access(out, X_OK) == 0)
		return 0;
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		char *sl = strrchr(exe, '/');
		if (sl) {
			*sl = '\0';
			if (snprintf(out, len, "%s/../../scripts", exe) < (int)len &&
			    access(out, X_OK) == 0)
				return 0;
		}
	}
	return -ENOENT;
}

/* ---- processes ---------------------------------------------------------- */

static pid_t local_spawn(const struct local_opts *o, struct local_node *nd,
			 int i, pid_t pgid)
{
	pid_t parent = getpid();
	/* Held across the fork: a SIGTERM (local_stop) or ^C that reached the
	 * child before it reset our handlers only set local_signal in the
	 * child's copy, and that node lived on until local_stop's SIGKILL
	 * 2 s later. Held, it stays pending until the defaults are back. */
	sigset_t hold, was;
	sigemptyset(&hold);
	sigaddset(&hold, SIGINT);
	sigaddset(&hold, SIGTERM);
	sigaddset(&hold, SIGHUP);
	sigprocmask(SIG_BLOCK, &hold, &was);
	pid_t pid = fork();

	if (pid != 0) {
		if (pid > 0)
			(void)setpgid(pid, pgid ? pgid : pid);
		sigprocmask(SIG_SETMASK, &was, NULL);
		return pid;
	}
	/* child */
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	sigprocmask(SIG_SETMASK, &was, NULL);
	(void)setpgid(0, pgid);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(127);   /* the parent died before the line above */
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
	if (nd->ready[0])
		setenv("ZBMD_READY_FILE", nd->ready, 1);
	/* the nodes that share this machine's memory (zbmd train's check) */
	char nn[16];
	snprintf(nn, sizeof(nn), "%d", o->nodes);
	setenv("ZBMD_LOCAL_NODES", nn, 1);
	if (i != 0) {
		int fd = open(nd->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
	}
	char *args[LOCAL_MAX_ARGS + 4];   /* zbmd, --config FILE, NULL */
	int n = 0;
	bool prog = strchr(o->cmd[0], '/') != NULL;
	if (!prog)
		args[n++] = "zbmd";
	/* a zbmd subcommand gets --config right after its words ("bench
	 * allreduce"), so that a flag of the user's left without its value
	 * (`-- bench allreduce --json`) meets the parser's own error instead
	 * of taking "--config" as that value; a program gets it last */
	int words = 0;
	bool cfg_given = false;
	if (!prog)
		while (words < o->ncmd && o->cmd[words][0] != '-')
			words++;
	ZB_ASSERT(o->ncmd <= LOCAL_MAX_ARGS);
	for (int k = 0; k < o->ncmd; k++) {
		if (!prog && k == words) {
			args[n++] = "--config";
			args[n++] = nd->cfg;
			cfg_given = true;
		}
		args[n++] = o->cmd[k];
	}
	if (!cfg_given) {
		args[n++] = "--config";
		args[n++] = nd->cfg;
	}
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

static void local_describe(const struct local_node *nd, const char *who, uint64_t t0,
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
		fprintf(stderr, "zbmd local: %s killed by signal %d %s\n", who,
			WTERMSIG(st), when);
	else if (WEXITSTATUS(st))
		fprintf(stderr, "zbmd local: %s exited with status %d %s\n", who,
			WEXITSTATUS(st), when);
	else
		fprintf(stderr, "zbmd local: %s exited with status 0 %s\n", who, when);
}

/* One cluster run's state, shared by the steps below. */
struct local_run {
	struct local_opts o;
	struct local_node nd[LOCAL_MAX_NODES];
	char dir[32];
	int pid, x;
	int lost;                       /* the first node out with a failure, or -1 */
	int done;                       /* the first node out with status 0, or -1 */
	pid_t pgid;
	bool ns_up, failed, usage_err;
	/* dpdk links: the cluster made by scripts/cluster.sh */
	bool cl_up;
	char tag[32], cldir[64], scripts[400];
	uint64_t t0, fault_ns;
	uint64_t started_ns;            /* when the last node was launched */
	uint64_t up_ns;                 /* when every node's ready file was there */
	sigset_t mask;                  /* the signal mask before the teardown */
};

/* How zbmd local names node I: by its index, the I of --kill I@MS and
 * --linkdown (0 .. nodes-1), and for DPDK nodes, whose ids (what the
 * nodes call themselves: "rank 0 (node 1)") start at 1, with that id too. */
struct local_who {
	char s[40];
};
static struct local_who local_who(const struct local_run *L, int i)
{
	struct local_who w;
	if (L->o.dpdk)
		snprintf(w.s, sizeof(w.s), "node %d (id %d)", i, i + 1);
	else
		snprintf(w.s, sizeof(w.s), "node %d", i);
	return w;
}

/* Run scripts/cluster.sh with the run's tag and dir; output to stderr
 * (or, with out, into that buffer). 0 when it exited 0. */
/* Run CMD (stdout and stderr together, as the command line says) and keep
 * what it printed in OUT (NUL-terminated, as much as fits), or pass it to
 * stderr when OUT is NULL. Its exit status, or -1 when it did not exit. */
static int local_capture(const char *cmd, char *out, size_t outlen)
{
	char line[4096];
	snprintf(line, sizeof(line), "%s%s", local_noint ? LOCAL_NOINT : "", cmd);
	FILE *p = popen(line, "r");
	size_t used = 0;
	char buf[256];

	if (out && outlen)
		out[0] = '\0';
	if (!p)
		return -1;
	while (fgets(buf, sizeof(buf), p)) {
		if (out && used + strlen(buf) < outlen) {
			strcpy(out + used, buf);
			used += strlen(buf);
		} else if (!out) {
			fputs(buf, stderr);
		}
	}
	int rc = pclose(p);
	return rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static int local_cluster(struct local_run *L, char *out, size_t outlen,
			 const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int local_cluster(struct local_run *L, char *out, size_t outlen,
			 const char *fmt, ...)
{
	char args[512], cmd[1200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	snprintf(cmd, sizeof(cmd), "'%s/cluster.sh' --tag %s --dir '%s' %s 2>&1",
		 L->scripts, L->tag, L->cldir, args);
	return local_capture(cmd, out, outlen) == 0 ? 0 : -1;
}

static void local_dpdk_teardown(struct local_run *L)
{
	char out[1024];

	/* the nodes' configs outlive cluster.sh down where the run's
	 * directory is kept (--keep, a failure): copies beside the logs */
	if (L->cl_up)
		local_sh("cp '%s'/node*.ini '%s'/ 2>/dev/null", L->cldir, L->dir);
	if (L->cl_up && local_cluster(L, out, sizeof(out), "down") < 0)
		fprintf(stderr, "zbmd local: cluster.sh down failed:\n%s", out);
	L->cl_up = false;
	for (int i = 0; i < L->o.nodes; i++)
		local_sh("rm -rf /var/run/dpdk/zbloc%d-%d \"${XDG_RUNTIME_DIR:-/tmp}"
			 "/dpdk/zbloc%d-%d\"", L->pid, i + 1, L->pid, i + 1);
}

/* tc refused the user's qdisc (OUT: what tc printed): why, in one line. */
static void local_tc_refused(const struct local_opts *o, const char *out)
{
	const char *flag = o->netem ? "--netem" : "--qdisc";
	const char *spec = o->netem ? o->netem : o->qdisc;
	size_t n = strcspn(out, "\n");

	if (strstr(out, "qdisc kind is unknown")) {
		int kind = o->netem ? 5 : (int)strcspn(spec, " ");
		if (o->netem)
			fprintf(stderr, "zbmd local: %s: `tc qdisc ... netem %s` failed: this "
				"kernel lacks sch_netem (tc: %.*s)\n", flag, spec, (int)n, out);
		else   /* tc says the same for a module not there and a made-up name */
			fprintf(stderr, "zbmd local: %s: `tc qdisc ... %s` failed: this kernel "
				"has no qdisc '%.*s' (no sch_%.*s module, or no qdisc of that "
				"name; tc: %.*s)\n", flag, spec, kind, spec, kind, spec, (int)n, out);
		if (o->netem)
			fprintf(stderr, "zbmd local: use --fault \"drop=0.02,reorder=0.05\" (the "
				"transport's own injection, --link memif or veth) instead\n");
	} else {
		fprintf(stderr, "zbmd local: %s '%s': tc does not take it: %.*s\n", flag,
			spec, (int)n, n ? out : "(no message)");
	}
}

/* The user's qdisc (--netem SPEC, --qdisc SPEC), tried once on the loopback
 * of a throwaway namespace before any cluster is built: a spec tc does not
 * take, or a qdisc this kernel lacks, is said now (exit 2) rather than as
 * tc's usage text in the middle of the set-up. Only tc's words go into the
 * shell command. 0 when tc took it, or when there is no namespace to try
 * it in (the set-up then says what fails: no root, say). */
static int local_qdisc_probe(const struct local_opts *o, int pid)
{
	const char *flag = o->netem ? "--netem" : "--qdisc";
	const char *spec = o->netem ? o->netem : o->qdisc;
	char cmd[700], out[1024];

	if (strlen(spec) > 200) {
		fprintf(stderr, "zbmd local: %s: longer than 200 characters\n", flag);
		return -1;
	}
	for (const char *c = spec; *c; c++)
		if (!isalnum((unsigned char)*c) && !strchr(" .%_:/+-", *c)) {
			fprintf(stderr, "zbmd local: %s '%s': only tc's words go there "
				"(letters, digits, spaces and . %% _ : / + -)\n", flag, spec);
			return -1;
		}
	/* exit 99: no namespace to try it in. The shell ignores ^C (the
	 * terminal sends it to our process group): one killed between its
	 * add and its del left the namespace behind */
	snprintf(cmd, sizeof(cmd), LOCAL_NOINT "ip netns add zbcoll-%d-probe >/dev/null 2>&1 || exit 99; "
		 "ip netns exec zbcoll-%d-probe tc qdisc add dev lo root %s%s 2>&1; "
		 "rc=$?; ip netns del zbcoll-%d-probe 2>/dev/null; exit $rc",
		 pid, pid, o->netem ? "netem " : "", spec, pid);
	int rc = local_capture(cmd, out, sizeof(out));
	if (local_signal)
		return -1;   /* interrupted: said by the caller */
	if (rc == 0 || rc == 99 || rc < 0)
		return 0;
	local_tc_refused(o, out);
	return -1;
}

/* veth / memif: the scripts make the links and configs; merge ours in. */
static int local_dpdk_prepare(struct local_run *L)
{
	const struct local_opts *o = &L->o;
	bool memif = !strcmp(o->link, "memif");
	char out[2048];

	if (geteuid() != 0) {
		fprintf(stderr, "zbmd local: --link %s needs root (DPDK, %s)\n",
			o->link, memif ? "memif sockets" : "network namespaces");
		return -EPERM;
	}
	if (local_scripts(L->scripts, sizeof(L->scripts)) < 0) {
		fprintf(stderr, "zbmd local: cannot find scripts/cluster.sh (set "
			"ZBMD_ROOT to the source tree)\n");
		return -ENOENT;
	}
	snprintf(L->tag, sizeof(L->tag), "zbloc%d", L->pid);
	snprintf(L->cldir, sizeof(L->cldir), "%s/cluster", L->dir);
	L->cl_up = true;   /* down is safe even when up failed half-way */
	/* The embedded default of both DPDK links: 9000-byte frames (6x fewer
	 * per byte than 1500: 4 nodes, 1 - 64 MiB, busbw over memif ~0.95 ->
	 * ~2.3 GB/s, over veth 0.17 - 0.20 -> 0.59 - 0.61; docs/collectives.md).
	 * memif's pools (a port per peer) need ~768 MB of DPDK memory per
	 * node. ZBN_MTU / ZBN_MEMORY_MB set by the caller win. */
	setenv("ZBN_MTU", LOCAL_DPDK_MTU, 0);
	if (memif && atoi(getenv("ZBN_MTU")) > 1500)
		setenv("ZBN_MEMORY_MB", LOCAL_MEMIF_MEMORY_MB, 0);
	if (o->spread > 2) {
		/* cluster.sh sizes af_packet's queue pairs by ZBN_LCORES: one per
		 * dataplane lcore; each node's own CPUs are merged in below */
		char lc[16];
		snprintf(lc, sizeof(lc), "0-%d", o->spread - 1);
		setenv("ZBN_LCORES", lc, 1);
	}
	if (local_cluster(L, out, sizeof(out), "up %d%s", o->nodes,
			  memif ? " --memif" : "") < 0) {
		if (!local_signal)   /* else cluster.sh was interrupted: said below */
			fprintf(stderr, "zbmd local: creating the %s cluster failed:\n%s",
				o->link, out);
		return -EIO;
	}
	if (o->netem && local_cluster(L, out, sizeof(out), "netem '%s'", o->netem) < 0) {
		local_tc_refused(o, out);   /* what the probe would have said */
		L->usage_err = true;
		return -EINVAL;
	}
	bool user_extra = local_kv_find(o->dkv, o->ndkv, "eal", "extra_args") >= 0;
	for (int i = 0; i < o->nodes; i++) {
		struct local_node *nd = &L->nd[i];
		struct local_kv kv[ZB_ARRAY_LEN(o->dkv)];
		int n = 0;
		for (int k = 0; k < o->ndkv && n < (int)ZB_ARRAY_LEN(kv) - 3; k++) {
			kv[n] = o->dkv[k];
			if (!strcmp(kv[n].sec, "fault") && !strcmp(kv[n].key, "seed"))
				snprintf(kv[n].val, sizeof(kv[n].val), "%llu",
					 strtoull(o->dkv[k].val, NULL, 10) + 1000ull * (unsigned)i);
			n++;
		}
		kv[n++] = (struct local_kv){"eal", "file_prefix", ""};
		snprintf(kv[n - 1].val, sizeof(kv[n - 1].val), "zbloc%d-%d", L->pid, i + 1);
		/* two nodes' dataplane lcores never share a CPU when there are
		 * two: odd nodes keep main lcore 0 (dataplane on 1), even nodes
		 * take main lcore 1 (dataplane on 0) */
		const char *lc = getenv("ZBN_LCORES"), *zc = getenv("ZBN_MEMIF_ZC");
		bool sfs = memif && zc && !strcmp(zc, "1");
		if (o->spread) {
			/* CPUs of its own: main lcore the first, dataplane the rest */
			int len = 0;
			kv[n] = (struct local_kv){"eal", "lcores", ""};
			for (int c = 0; c < o->spread; c++)
				len += snprintf(kv[n].val + len, sizeof(kv[n].val) - (size_t)len,
						"%s%d", c ? "," : "", o->cpus[o->spread * i + c]);
			ZB_ASSERT(len < (int)sizeof(kv[n].val));
			n++;
			if (!user_extra) {
				kv[n] = (struct local_kv){"eal", "extra_args", ""};
				if (sfs)
					snprintf(kv[n].val, sizeof(kv[n].val), "--single-file-segments");
				n++;
			}
		} else if (!user_extra && (!lc || !strcmp(lc, "0-1")) && i % 2 == 1) {
			/* keeps what cluster.sh needs for memif zero-copy */
			kv[n++] = (struct local_kv){"eal", "extra_args", ""};
			snprintf(kv[n - 1].val, sizeof(kv[n - 1].val), "--main-lcore 1%s",
				 sfs ? " --single-file-segments" : "");
		}
		snprintf(nd->cfg, sizeof(nd->cfg), "%s/node%d.ini", L->cldir, i + 1);
		snprintf(nd->log, sizeof(nd->log), "%s/node%d.log", L->dir, i);
		if (!memif)
			snprintf(nd->ns, sizeof(nd->ns), "zbn-%s-%d", L->tag, i + 1);
		snprintf(nd->ready, sizeof(nd->ready), "%s/node%d.ready", L->dir, i);
		int rc = local_merge_ini(nd->cfg, kv, n);
		if (rc < 0) {
			fprintf(stderr, "zbmd local: writing %s: %s\n", nd->cfg,
				rc == -E2BIG ? "more than 512 lines, or a line of more "
				"than 510 characters (ZBN_EXTRA_INI?)" : strerror(-rc));
			return rc;
		}
	}
	return 0;
}

/* memif: node i connects (as the client) to every lower node, whose
 * memif servers must be up first: wait until node i-1 (started only once
 * every node before it was ready) created its ready file, or a node exits,
 * or a signal comes. 0 when ready. */
static int local_memif_ready(struct local_run *L, int i)
{
	uint64_t deadline = zb_now_ns() + LOCAL_READY_S * 1000000000ull;

	while (!local_signal) {
		if (access(L->nd[i - 1].ready, F_OK) == 0)
			return 0;
		for (int a = 0; a < i; a++) {
			int st;
			if (waitpid(L->nd[a].pid, &st, WNOHANG) == L->nd[a].pid) {
				L->nd[a].exited = true;
				L->nd[a].status = st;
				L->nd[a].exit_ns = zb_now_ns();
				fprintf(stderr, "zbmd local: %s exited before %s "
					"could connect to it\n", local_who(L, a).s,
					local_who(L, i).s);
				return -ESRCH;
			}
		}
		if (zb_now_ns() > deadline) {
			fprintf(stderr, "zbmd local: %s: its dataplane was not up "
				"after %d s\n", local_who(L, i - 1).s, LOCAL_READY_S);
			return -ETIMEDOUT;
		}
		usleep(20000);
	}
	return -EINTR;
}

static int local_prepare(struct local_run *L)
{
	if ((L->o.netem || L->o.qdisc) && local_qdisc_probe(&L->o, L->pid) < 0) {
		L->usage_err = true;
		return -EINVAL;
	}
	if (L->o.dpdk)
		return local_dpdk_prepare(L);
	if (L->o.ns) {
		if (geteuid() != 0) {
			fprintf(stderr, "zbmd local: namespaces (--ns/--netem/--qdisc/--linkdown) "
				"need root\n");
			return -EPERM;
		}
		L->ns_up = true;
		if (local_ns_setup(&L->o, L->pid, L->x) < 0) {
			if (local_signal)
				return -EINTR;   /* said by the caller */
			fprintf(stderr, "zbmd local: setting up namespaces zbcoll-%d-* "
				"failed\n", L->pid);
			return -EIO;
		}
	}
	for (int i = 0; i < L->o.nodes; i++) {
		struct local_node *nd = &L->nd[i];
		snprintf(nd->cfg, sizeof(nd->cfg), "%s/node%d.ini", L->dir, i);
		snprintf(nd->log, sizeof(nd->log), "%s/node%d.log", L->dir, i);
		snprintf(nd->ready, sizeof(nd->ready), "%s/node%d.ready", L->dir, i);
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

/* Every node's config as written (the embedded default, the links' settings
 * and the user's --set) loads: a bad --set is the user's error (exit 2),
 * said once here instead of by every node it would have started. */
static int local_check_configs(struct local_run *L)
{
	struct zb_config *cfg = calloc(1, sizeof(*cfg));
	struct cfg_error *err = calloc(1, sizeof(*err));
	int rc = 0;

	if (!cfg || !err) {
		free(cfg);
		free(err);
		return -ENOMEM;
	}
	/* what cluster.sh also takes from the environment */
	static const char *const envs[] = {"ZBN_MTU", "ZBN_MEMORY_MB", "ZBN_MEMIF_RSIZE",
					   "ZBN_AF_FRAMES", "ZBN_LCORES", "ZBN_IDLE"};
	char env[400] = "";
	size_t el = 0;
	for (size_t k = 0; k < ZB_ARRAY_LEN(envs) && el < sizeof(env); k++) {
		const char *v = getenv(envs[k]);
		if (v && L->o.dpdk)
			el += (size_t)snprintf(env + el, sizeof(env) - el, "%s %s=%.40s",
					       el ? "," : " and the environment's", envs[k], v);
	}
	for (int i = 0; i < L->o.nodes && rc == 0; i++) {
		if (cfg_load_file(cfg, L->nd[i].cfg, err) == 0)
			continue;
		fprintf(stderr, "zbmd local: node %d's config (the embedded default "
			"with the --set given%s) does not load:\n%s", i, env, err->list);
		L->usage_err = true;
		rc = -EINVAL;
	}
	free(cfg);
	free(err);
	return rc;
}

/* Every node up (its ready file there)? Notes when, once; looked for only
 * when a fault counts from it (N@up+MS). */
static void local_up_check(struct local_run *L, uint64_t now)
{
	const struct local_opts *o = &L->o;

	if (L->up_ns || !((o->kill_node >= 0 && o->kill_base == LOCAL_AT_UP) ||
			  (o->linkdown_node >= 0 && o->linkdown_base == LOCAL_AT_UP)))
		return;
	for (int i = 0; i < o->nodes; i++)
		if (access(L->nd[i].ready, F_OK) != 0)
			return;
	L->up_ns = now;
	fprintf(stderr, "zbmd local: every node up %llu ms after the start\n",
		(unsigned long long)((now - L->t0) / 1000000));
}

/* Is a fault for MS ms after its base (the start, the last node's launch,
 * every node up) due at `now`? Says when in WHEN. */
static bool local_due(const struct local_run *L, uint64_t now, long ms,
		      enum local_base b, char *when, size_t len)
{
	uint64_t base = b == LOCAL_AT_UP ? L->up_ns :
			b == LOCAL_AT_STARTED ? L->started_ns : L->t0;

	if (!base || now - base < (uint64_t)ms * 1000000ull)
		return false;
	int k = snprintf(when, len, "%llu ms after the start",
			 (unsigned long long)((now - L->t0) / 1000000));
	if (b != LOCAL_AT_START && k > 0 && (size_t)k < len)
		snprintf(when + k, len - (size_t)k, ", %llu ms after %s",
			 (unsigned long long)((now - base) / 1000000),
			 b == LOCAL_AT_UP ? "every node was up" :
			 "the last node was launched");
	return true;
}

/* Fault injection due at `now`? (--kill, --linkdown) */
static void local_faults(struct local_run *L, uint64_t now, bool *killed,
			 bool *downed)
{
	const struct local_opts *o = &L->o;
	char when[112];

	local_up_check(L, now);
	if (o->kill_node >= 0 && !*killed &&
	    local_due(L, now, o->kill_ms, o->kill_base, when, sizeof(when))) {
		*killed = true;
		L->fault_ns = now;
		kill(L->nd[o->kill_node].pid, SIGKILL);
		fprintf(stderr, "zbmd local: killed %s with kill -9 %s\n",
			local_who(L, o->kill_node).s, when);
	}
	if (o->linkdown_node >= 0 && !*downed &&
	    local_due(L, now, o->linkdown_ms, o->linkdown_base, when, sizeof(when))) {
		*downed = true;
		L->fault_ns = now;
		local_sh("ip -n zbcoll-%d-%d link set eth0 down", L->pid,
			 o->linkdown_node);
		fprintf(stderr, "zbmd local: link of %s down %s\n",
			local_who(L, o->linkdown_node).s, when);
	}
}

/* The nodes' [coll] timeout_ms (the embedded default or --set's). */
static long local_coll_timeout_ms(const struct local_opts *o)
{
	const struct local_kv *kv = o->dpdk ? o->dkv : o->kv;
	int i = local_kv_find(kv, o->dpdk ? o->ndkv : o->nkv, "coll", "timeout_ms");
	long ms = i >= 0 ? strtol(kv[i].val, NULL, 10) : 0;

	return ms > 0 ? ms : 5000;
}

/* A collective run (bench, train, a test program) cannot finish without
 * every node. One that failed (killed, crashed, exited non-zero) while
 * others run: they fail on their own within [coll] timeout_ms when they had
 * heard from it, but nodes that never did (it was lost while starting) wait
 * for the join's connect timeout (30 s or more), as nodes of a real cluster
 * must for one that may still be starting.
 * Here the launcher knows: past the timeout plus LOCAL_LOST_GRACE_MS it says
 * so and stops them. `run` clusters (a cluster outlives its nodes) are left
 * alone. true when it is time to stop them. */
static bool local_lost_cut(struct local_run *L, uint64_t now, int left)
{
	const struct local_opts *o = &L->o;

	/* every node runs the same zbmd program: one that has not ended well
	 * after another finished is stuck (a program of the user's may take
	 * its own time) */
	bool same = !strchr(o->cmd[0], '/');
	int ref = L->lost >= 0 ? L->lost : same ? L->done : -1;
	if (ref < 0 || left == 0 || !strcmp(o->cmd[0], "run"))
		return false;
	const struct local_node *nd = &L->nd[ref];
	long grace = local_coll_timeout_ms(o) + LOCAL_LOST_GRACE_MS;
	if (now - nd->exit_ns < (uint64_t)grace * 1000000ull)
		return false;
	char how[48], still[96] = "";
	size_t sl = 0;
	if (WIFSIGNALED(nd->status))
		snprintf(how, sizeof(how), "was killed by signal %d", WTERMSIG(nd->status));
	else
		snprintf(how, sizeof(how), "exited with status %d", WEXITSTATUS(nd->status));
	for (int i = 0; i < o->nodes && sl < sizeof(still); i++)
		if (!L->nd[i].exited && L->nd[i].pid > 0)
			sl += (size_t)snprintf(still + sl, sizeof(still) - sl, "%s%d",
					       sl ? ", " : "", i);
	if (L->lost >= 0 && WIFSIGNALED(nd->status))
		fprintf(stderr, "zbmd local: %s %s %ld ms ago and %d node(s) (%s) "
			"still run (the run cannot finish without it; nodes that never "
			"heard from it wait for the join's connect timeout): stopping "
			"them\n", local_who(L, ref).s, how, (long)((now - nd->exit_ns) / 1000000),
			left, still);
	else if (L->lost >= 0)   /* it failed on its own: those left are the stuck ones */
		fprintf(stderr, "zbmd local: %s %s %ld ms ago and %d node(s) (%s) "
			"still run past [coll] timeout_ms + %d ms (stopped, stuck, or "
			"still joining): stopping them\n", local_who(L, ref).s, how,
			(long)((now - nd->exit_ns) / 1000000), left, still,
			LOCAL_LOST_GRACE_MS);
	else
		fprintf(stderr, "zbmd local: %s finished %ld ms ago and %d node(s) "
			"(%s) still run (stuck: they ran the same command): stopping "
			"them\n", local_who(L, ref).s, (long)((now - nd->exit_ns) / 1000000),
			left, still);
	return true;
}

/* Start every node, then reap them until all exited, a signal came, or a
 * node was lost and the others did not end (local_lost_cut). */
static void local_supervise(struct local_run *L)
{
	bool killed = false, downed = false;
	int left;

	fflush(NULL);
	L->t0 = zb_now_ns();
	bool memif = L->o.dpdk && !strcmp(L->o.link, "memif");
	for (int i = 0; i < L->o.nodes; i++) {
		if (local_signal)
			return;   /* no node started after a ^C */
		if (memif && i > 0 && local_memif_ready(L, i) < 0) {
			L->failed = true;
			return;
		}
		L->nd[i].pid = local_spawn(&L->o, &L->nd[i], i, L->pgid);
		if (L->nd[i].pid < 0) {
			fprintf(stderr, "zbmd local: fork: %s\n", strerror(errno));
			L->failed = true;
			return;
		}
		if (!L->pgid)
			L->pgid = L->nd[i].pid;
	}
	L->started_ns = zb_now_ns();
	left = 0;
	for (int i = 0; i < L->o.nodes; i++)
		left += !L->nd[i].exited;
	while (left > 0 && !local_signal) {
		int st;
		uint64_t now = zb_now_ns();
		local_faults(L, now, &killed, &downed);
		if (local_lost_cut(L, now, left)) {
			L->failed = true;
			return;
		}
		pid_t p = waitpid(-L->pgid, &st, WNOHANG);
		if (p < 0 && errno == ECHILD)
			break;
		if (p <= 0) {
			usleep(5000);
			continue;
		}
		for (int i = 0; i < L->o.nodes; i++)
			if (L->nd[i].pid == p && !L->nd[i].exited) {
				L->nd[i].exited = true;
				L->nd[i].status = st;
				L->nd[i].exit_ns = zb_now_ns();
				bool bad = !WIFEXITED(st) || WEXITSTATUS(st);
				L->failed |= bad;
				if (bad && L->lost < 0)
					L->lost = i;
				if (!bad && L->done < 0)
					L->done = i;
				left--;
			}
	}
	/* a fault asked for that never came: say so (a run that checks the
	 * fault's effect must not read a clean run as one) */
	const struct local_opts *o = &L->o;
	if (!local_signal && o->kill_node >= 0 && !killed)
		fprintf(stderr, "zbmd local: --kill: %s was not killed: %s\n",
			local_who(L, o->kill_node).s, o->kill_base == LOCAL_AT_UP && !L->up_ns ?
			"not every node came up" : "the run ended first");
	if (!local_signal && o->linkdown_node >= 0 && !downed)
		fprintf(stderr, "zbmd local: --linkdown: node %d's link was not taken "
			"down: %s\n", o->linkdown_node, o->linkdown_base == LOCAL_AT_UP && !L->up_ns ?
			"not every node came up" : "the run ended first");
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
	/* a second ^C (EINTR) does not end the reaping: the teardown after
	 * this removes what the nodes use */
	while (waitpid(-L->pgid, NULL, 0) > 0 || errno == EINTR)
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
	/* Blocked here and in every command the teardown runs (a child keeps
	 * its parent's mask across exec): the shells' trap (LOCAL_NOINT) is
	 * set only once the shell runs, and a ^C that came before it (held
	 * down, or twice) killed the shell of a `rm -rf /var/run/dpdk/...` —
	 * a node's runtime directory stayed. coll_local_main unblocks them. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, &L->mask);
	local_noint = true;
	if (L->ns_up && L->o.qdisc && L->t0)
		local_qdisc_stats(L);
	if (L->ns_up)
		local_ns_teardown(&L->o, L->pid);
	if (L->o.dpdk)
		local_dpdk_teardown(L);
	/* whether kept (for the user: never taken back) or removed */
	char own[sizeof(L->dir) + 8];
	snprintf(own, sizeof(own), "%s/owner", L->dir);
	unlink(own);
	if (L->o.keep || (L->failed && !local_signal && !L->fault_ns && !L->usage_err &&
			  L->t0)) {
		fprintf(stderr, "zbmd local: configs and logs kept in %s\n", L->dir);
		return;
	}
	for (int i = 0; i < L->o.nodes; i++) {
		if (!L->o.dpdk) {
			unlink(L->nd[i].cfg);
		} else {   /* cluster.sh down removed them; these are the copies */
			char p[sizeof(L->dir) + 24];
			snprintf(p, sizeof(p), "%s/node%d.ini", L->dir, i + 1);
			unlink(p);
		}
		unlink(L->nd[i].log);
		if (L->nd[i].ready[0])
			unlink(L->nd[i].ready);
	}
	/* cluster.sh interrupted between its mkdir and its marker leaves the
	 * directory, empty, to its down */
	if (L->o.dpdk && L->cldir[0])
		rmdir(L->cldir);
	rmdir(L->dir);
}

/* A run of zbmd local (pid) that is gone: not running, or its pid now
 * another program's. */
static bool local_run_gone(long pid)
{
	char path[64], comm[32] = "";

	if (pid <= 0 || pid > INT32_MAX)
		return false;
	if (kill((pid_t)pid, 0) != 0 && errno == ESRCH)
		return true;
	snprintf(path, sizeof(path), "/proc/%ld/comm", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	bool zbmd = fgets(comm, sizeof(comm), f) && !strncmp(comm, "zbmd", 4);
	fclose(f);
	return !zbmd;
}

/* What runs killed outright (SIGKILL: no teardown) left, taken back by the
 * next run: their directories in /tmp (marked by an owner file; a kept
 * one has none), their DPDK runtime directories and, as root, their
 * network namespaces. Only of runs whose pid is gone. */
static void local_reclaim(void)
{
	static const char *const rt[] = {"/var/run/dpdk", "/tmp/dpdk"};
	struct dirent *e;
	DIR *d = opendir("/tmp");
	long pid;
	int n = 0;

	while (d && (e = readdir(d))) {
		char own[300];
		if (strncmp(e->d_name, "zbmd-local-", 11))
			continue;
		snprintf(own, sizeof(own), "/tmp/%s/owner", e->d_name);
		FILE *f = fopen(own, "r");
		if (!f)
			continue;
		bool stale = fscanf(f, "%ld", &pid) == 1 && local_run_gone(pid);
		fclose(f);
		if (stale && local_sh("rm -rf '/tmp/%s'", e->d_name) == 0)
			n++;
	}
	if (d)
		closedir(d);
	for (size_t k = 0; k < ZB_ARRAY_LEN(rt); k++) {
		d = opendir(rt[k]);
		while (d && (e = readdir(d))) {
			int node;
			char tail;
			if (sscanf(e->d_name, "zbloc%ld-%d%c", &pid, &node, &tail) == 2 &&
			    local_run_gone(pid) && local_sh("rm -rf '%s/%s'", rt[k], e->d_name) == 0)
				n++;
		}
		if (d)
			closedir(d);
	}
	if (geteuid() == 0 && (d = opendir("/run/netns"))) {
		while ((e = readdir(d))) {
			char rest[64];
			if ((sscanf(e->d_name, "zbcoll-%ld-%63s", &pid, rest) == 2 ||
			     sscanf(e->d_name, "zbn-zbloc%ld-%63s", &pid, rest) == 2) &&
			    local_run_gone(pid) &&
			    local_sh("ip netns del '%s' 2>/dev/null", e->d_name) == 0)
				n++;
		}
		closedir(d);
	}
	if (n)
		fprintf(stderr, "zbmd local: took back %d director%s and namespace(s) "
			"left by runs that were killed outright\n", n, n == 1 ? "y" : "ies");
}

int coll_local_main(int argc, char **argv)
{
	static struct local_run L;
	struct sigaction sa = {.sa_handler = local_on_signal}, old[3];
	int rc, status = 1;

	memset(&L, 0, sizeof(L));
	L.lost = -1;
	L.done = -1;
	local_signal = 0;
	local_noint = false;
	/* inherited as ignored, SIGCHLD makes the kernel reap the nodes: their
	 * exit statuses would be lost and a run of failed nodes read as 0 */
	signal(SIGCHLD, SIG_DFL);
	rc = local_parse(argc, argv, &L.o);
	if (rc)
		return rc > 0 ? 0 : 2;
	L.pid = (int)getpid();
	L.x = L.pid % 250;
	local_reclaim();
	snprintf(L.dir, sizeof(L.dir), "/tmp/zbmd-local-XXXXXX");
	if (!mkdtemp(L.dir)) {
		fprintf(stderr, "zbmd local: mkdtemp: %s\n", strerror(errno));
		return 1;
	}
	/* whose it is, for a later run should this one be killed outright */
	char own[sizeof(L.dir) + 8];
	snprintf(own, sizeof(own), "%s/owner", L.dir);
	FILE *of = fopen(own, "w");
	if (of) {
		fprintf(of, "%d\n", L.pid);
		fclose(of);
	}
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old[0]);
	sigaction(SIGTERM, &sa, &old[1]);
	sigaction(SIGHUP, &sa, &old[2]);
	if (local_prepare(&L) < 0 || local_check_configs(&L) < 0 || local_signal) {
		L.failed = true;
		if (local_signal)
			fprintf(stderr, "\nzbmd local: caught signal %d while setting up, "
				"tearing down\n", (int)local_signal);
	} else {
		local_supervise(&L);
		if (local_signal)
			fprintf(stderr, "\nzbmd local: caught signal %d, stopping the "
				"nodes\n", (int)local_signal);
		local_stop(&L);
		if (!local_signal && (L.failed || L.fault_ns))
			for (int i = 0; i < L.o.nodes; i++)
				if (L.nd[i].exited) {
					local_describe(&L.nd[i], local_who(&L, i).s, L.t0,
						       L.fault_ns);
					if (i != 0 && (!WIFEXITED(L.nd[i].status) ||
						       WEXITSTATUS(L.nd[i].status)))
						local_tail(L.nd[i].log);
				}
	}
	/* every node that ended by itself refused the command (exit 2: its
	 * flags, its config, an output it could not write; 127: it could not
	 * be run at all), the others stopped here or never started (memif
	 * nodes start one after the other): a usage error, as bench's own */
	int refused = 0, other = 0;
	for (int i = 0; i < L.o.nodes; i++) {
		if (!L.nd[i].exited)
			continue;
		int st = L.nd[i].status;
		if (WIFEXITED(st) && (WEXITSTATUS(st) == 2 || WEXITSTATUS(st) == 127))
			refused++;
		else
			other++;
	}
	L.usage_err |= L.failed && refused > 0 && other == 0 && !L.fault_ns;
	/* nothing ran: no logs worth keeping */
	/* a signal's status as a shell gives it: 128 + the signal */
	status = local_signal ? 128 + (int)local_signal : L.usage_err ? 2 : L.failed ? 1 : 0;
	local_cleanup(&L);
	/* a signal held during the teardown goes to our handler: the run's
	 * status is said already */
	sigprocmask(SIG_SETMASK, &L.mask, NULL);
	sigaction(SIGINT, &old[0], NULL);
	sigaction(SIGTERM, &old[1], NULL);
	sigaction(SIGHUP, &old[2], NULL);
	return status;
}
