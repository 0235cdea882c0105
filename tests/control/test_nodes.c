/* Three real control threads in one process over loopback (UDP heartbeats,
 * raft_uv + the authenticated TCP transport, HTTP): the cluster forms, epoch
 * events reach the lcore rings, /metrics parses as Prometheus text, a
 * stopped follower is convicted and removed with a new epoch, a graceful
 * leave shrinks the cluster at once, and bad PSK files are refused. Runs
 * under ThreadSanitizer in `make tsan`. */
#include "zbmd/control.h"
#include "zbmd/common.h"
#include "zbmd/config.h"
#include "prom_check.h"
#include "tap.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <uv.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define N 3

static char dir[64] = "/tmp/zbctl-nodesXXXXXX";
static int base;
static struct zb_config cfg[N];
static struct ctl_node *node[N];
static struct ctl_status s;

/* libuv's work pool (raft_uv's file I/O) is process-wide and outlives every
 * loop: started here, before the baseline count, so that it counts there. */
static void uv_noop(uv_work_t *w) { (void)w; }
static void warm_uv_pool(void)
{
	uv_loop_t loop;
	uv_work_t w;
	ZB_ASSERT(uv_loop_init(&loop) == 0);
	ZB_ASSERT(uv_queue_work(&loop, &w, uv_noop, NULL) == 0);
	ZB_ASSERT(uv_run(&loop, UV_RUN_DEFAULT) == 0);
	ZB_ASSERT(uv_loop_close(&loop) == 0);
}

/* The threads of this process (entries of /proc/self/task). */
static int thread_count(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return -1;
	for (struct dirent *e; (e = readdir(d));)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

static void make_cfg(int i, const char *psk)
{
	struct zb_config *c = &cfg[i];
	cfg_set_defaults(c);
	c->node.id = (uint16_t)i;
	c->cluster.id = 9;
	c->cluster.seed_count = N;
	for (int j = 0; j < N; j++)
		snprintf(c->cluster.seeds[j], CFG_STR, "127.0.0.1:%d", base + 10 * j);
	snprintf(c->cluster.psk_file, CFG_STR, "%s/%s", dir, psk);
	snprintf(c->control.listen, CFG_STR, "127.0.0.1:%d", base + 10 * i);
	snprintf(c->control.raft_dir, CFG_STR, "%s/raft%d", dir, i);
	snprintf(c->control.admin_listen, CFG_STR, "127.0.0.1:%d", base + 10 * i + 1);
	c->metrics.listen[0] = '\0';
	if (i == 0)
		snprintf(c->metrics.listen, CFG_STR, "127.0.0.1:%d", base + 2);
	c->control.heartbeat_ms = 50;
	c->control.acceptable_pause_ms = 300;
	c->control.phi_min_std_ms = 25;
	c->control.election_timeout_ms = 300;
	c->control.raft_heartbeat_ms = 50;
	c->control.snapshot_threshold = 16;
}

static void write_file(const char *name, const char *text, mode_t mode)
{
	char p[128];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	int fd = open(p, O_CREAT | O_TRUNC | O_WRONLY, 0600);
	ZB_ASSERT(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text));
	close(fd);
	chmod(p, mode);
}

/* Wait up to ms for every listed running node to report `members` members
 * and the same epoch; returns that epoch or 0. */
static uint64_t wait_members(const int *ids, int n, uint32_t members, int ms)
{
	for (int t = 0; t < ms; t += 50) {
		uint64_t epoch = 0;
		bool good = true;
		for (int k = 0; k < n && good; k++) {
			ctl_node_status(node[ids[k]], &s);
			good = s.st.n == members && s.leader >= 0 && (k == 0 || s.st.epoch == epoch);
			epoch = s.st.epoch;
		}
		if (good)
			return epoch;
		usleep(50000);
	}
	return 0;
}

static char *http_get(int port, const char *path)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	char req[128];
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		return NULL;
	int k = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\n\r\n", path);
	ZB_ASSERT(write(fd, req, (size_t)k) == k);
	size_t cap = 1 << 20, len = 0;
	char *buf = malloc(cap);
	ssize_t r;
	while ((r = read(fd, buf + len, cap - 1 - len)) > 0)
		len += (size_t)r;
	close(fd);
	buf[len] = '\0';
	char *body = strstr(buf, "\r\n\r\n");
	if (!body) {
		free(buf);
		return NULL;
	}
	memmove(buf, body + 4, strlen(body + 4) + 1);
	return buf;
}

static int leader_index(void)
{
	for (int i = 0; i < N; i++)
		if (node[i]) {
			ctl_node_status(node[i], &s);
			if (s.leader >= 0)
				return s.leader;
		}
	return -1;
}

/* node i's view of peer id (NULL if it has none) */
static const struct ctl_peer_status *peer_of(int i, int id)
{
	if (!node[i] || ctl_node_status(node[i], &s) != 0)
		return NULL;
	for (uint32_t k = 0; k < s.n_peers; k++)
		if (s.peers[k].id == id)
			return &s.peers[k];
	return NULL;
}

static void log_diag(void *arg, int level, const char *msg)
{
	(void)arg;
	(void)level;
	fprintf(stderr, "%.3f %s\n", (double)zb_now_ns() / 1e9, msg);
}

int main(void)
{
	char err[256];
	struct ctl_opts opts = {.event_consumers = 1};
	if (getenv("ZBCTL_DEBUG"))
		opts.log = log_diag;
	int ids[N] = {0, 1, 2};
	int rc;

	tap_plan(24);
	warm_uv_pool();
	int threads0 = thread_count();
	ZB_ASSERT(mkdtemp(dir));
	base = 21000 + (int)(getpid() % 2000) * 10;
	write_file("psk", "test cluster key, long enough", 0600);
	write_file("psk-open", "test cluster key, long enough", 0644);

	make_cfg(0, "psk-open");
	is_int(ctl_node_start(&cfg[0], &opts, &node[0], err, sizeof(err)), -EPERM,
	       "PSK file readable by others: refused to start");
	ok(strstr(err, "group/others") != NULL, "... saying why: %s", err);
	make_cfg(0, "psk");
	snprintf(cfg[0].control.listen, CFG_STR, "nonsense");
	is_int(ctl_node_start(&cfg[0], &opts, &node[0], err, sizeof(err)), ZB_ERR_CONFIG,
	       "bad listen address refused: %s", err);

	make_cfg(0, "psk");
	cfg[0].cluster.psk_file[0] = '\0';
	is_int(ctl_node_start(&cfg[0], &opts, &node[0], err, sizeof(err)), ZB_ERR_CONFIG,
	       "seeds but no psk_file: refused (%s)", err);
	make_cfg(0, "psk");
	write_file("notadir", "x", 0600);
	snprintf(cfg[0].control.raft_dir, CFG_STR, "%s/notadir", dir);
	rc = ctl_node_start(&cfg[0], &opts, &node[0], err, sizeof(err));
	ok(rc != 0 && node[0] == NULL, "raft_dir not a directory: refused (%s)", err);

	int started = 0;
	for (int i = 0; i < N; i++) {
		make_cfg(i, "psk");
		started += ctl_node_start(&cfg[i], &opts, &node[i], err, sizeof(err)) == 0;
	}
	is_int(started, N, "3 control threads started");
	uint64_t e1 = wait_members(ids, N, 3, 10000);
	ok(e1 >= 3, "cluster formed: 3 members, same epoch %llu on all", (unsigned long long)e1);
	is_int(ctl_node_epoch(node[1]), e1, "epoch readable by lcores (atomic) matches");
	struct ctl_event ev;
	uint64_t last = 0;
	bool incr = true;
	int n_epoch = 0;
	while (ctl_ring_dequeue(ctl_node_events(node[1], 0), &ev) == 0)
		if (ev.type == CTL_EV_EPOCH) {
			incr = incr && ev.epoch > last;
			last = ev.epoch;
			n_epoch++;
		}
	ok(n_epoch >= 1 && incr && last == e1 && ev.n_members <= 3,
	   "epoch events on node 1's lcore ring: %d, increasing, last = %llu", n_epoch,
	   (unsigned long long)last);

	char *m = http_get(base + 2, "/metrics");
	rc = m ? prom_check(m, err, sizeof(err)) : -1;
	ok(rc == 0, "/metrics parses as Prometheus text%s%s", rc ? ": " : "", rc ? err : "");
	ok(m && strstr(m, "zbmd_control_phi{node=\"0\",peer=\"1\"}") &&
	   strstr(m, "zbmd_raft_term{node=\"0\"}") && strstr(m, "zbmd_control_epoch{node=\"2\"}"),
	   "phi per peer, raft term, epoch exported");
	free(m);
	char *st = http_get(base + 1, "/status.json");
	ok(st && strstr(st, "\"members\":[{\"id\":0"), "admin /status.json answers");
	free(st);

	/* Stop a follower without leaving: convicted, removed, new epoch. */
	int l = leader_index(), victim = l == 2 ? 1 : 2;
	ok(l >= 0, "leader is node %d", l);
	const struct ctl_peer_status *ps = peer_of(l, victim);
	ok(ps && ps->heard && !ps->gone && !ps->convicted,
	   "before: the leader hears node %d, not gone", victim);
	ctl_node_stop(node[victim], false);
	node[victim] = NULL;
	/* it said so on its way out (GONE): the leader's status shows it at
	 * once, long before phi convicts it */
	uint64_t tg = zb_now_ns();
	while ((ps = peer_of(l, victim)) && !ps->gone && zb_now_ns() - tg < 2000000000ull)
		usleep(5000);
	ok(ps && ps->gone && !ps->convicted,
	   "stopped without leaving: gone on the leader after %.0f ms, not convicted yet "
	   "(phi %.2f)", (double)(zb_now_ns() - tg) / 1e6, ps ? ps->phi : -1.0);
	int rest[2], k = 0;
	for (int i = 0; i < N; i++)
		if (i != victim)
			rest[k++] = i;
	uint64_t t0 = zb_now_ns();
	uint64_t e2 = wait_members(rest, 2, 2, 8000);
	ok(e2 > e1, "follower %d convicted and removed in %.2f s: epoch %llu on both survivors",
	   victim, (double)(zb_now_ns() - t0) / 1e9, (unsigned long long)e2);
	ctl_node_status(node[l], &s);
	ok(s.convictions >= 1, "leader counted the conviction");

	/* Graceful leave of the other follower: removed without waiting. */
	int other = rest[0] == l ? rest[1] : rest[0];
	t0 = zb_now_ns();
	ctl_node_stop(node[other], true);
	node[other] = NULL;
	int lone[1] = {l};
	uint64_t e3 = wait_members(lone, 1, 1, 5000);
	double dt = (double)(zb_now_ns() - t0) / 1e9;
	ok(e3 > e2, "graceful leave: node %d removed, epoch %llu", other, (unsigned long long)e3);
	ok(dt < 2.5, "... in %.2f s (no conviction wait)", dt);

	/* Restart the stopped follower from its raft_dir: it rejoins. */
	rc = ctl_node_start(&cfg[victim], &opts, &node[victim], err, sizeof(err));
	int two[2] = {l, victim};
	uint64_t e4 = rc == 0 ? wait_members(two, 2, 2, 8000) : 0;
	ok(e4 > e3, "restarted node %d rejoined under a new epoch %llu", victim,
	   (unsigned long long)e4);
	ps = peer_of(l, victim);
	ok(ps && ps->heard && !ps->gone, "... and is no longer gone in the leader's status");
	/* And the one that left: all three again (and the log passes the
	 * snapshot threshold). */
	rc = ctl_node_start(&cfg[other], &opts, &node[other], err, sizeof(err));
	uint64_t e5 = rc == 0 ? wait_members(ids, N, 3, 8000) : 0;
	ok(e5 > e4, "node %d that left rejoined: 3 members, epoch %llu", other,
	   (unsigned long long)e5);
	ctl_node_status(node[l], &s);
	uint64_t applied = s.applied;
	for (int i = 0; i < N; i++)
		ctl_node_stop(node[i], false);
	int threads1 = thread_count();
	ok(threads0 > 0 && threads1 == threads0,
	   "all stopped cleanly: %d thread(s) left, as many as before the first start (%d)",
	   threads1, threads0);
	char cmd0[160];
	snprintf(cmd0, sizeof(cmd0), "ls %s/raft%d | grep -q '^snapshot-'", dir, l);
	ok(system(cmd0) == 0, "raft_uv wrote a snapshot under raft_dir (threshold 16, %llu applied)",
	   (unsigned long long)applied);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		tap_diag("cleanup of %s failed", dir);
	return tap_done();
}
