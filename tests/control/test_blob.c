/* ctl_blob_send between real control nodes over loopback UDP: argument
 * checks; a blob sent before its peer runs is retransmitted and arrives
 * once the peer starts; blobs of 1..256 bytes arrive exactly as sent, once,
 * between three nodes; a slow handler sees retransmissions as duplicates
 * (delivered once); a handler that is not ready (-EAGAIN) gets the blob
 * again, one that refuses it is not retried; nodes with the wrong key or
 * cluster id have their blobs rejected and counted (and give up after the
 * timeout); authenticated but malformed / misaddressed BLOB messages are
 * counted, never delivered. Runs under ThreadSanitizer in `make tsan`. */
#include "zbmd/control.h"
#include "zbmd/common.h"
#include "zbmd/config.h"
#include "prom_check.h"
#include "tap.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define N 5          /* 0..2 the cluster, 3 wrong key, 4 wrong cluster */
#define MAXREC 64

static char dir[64] = "/tmp/zbctl-blobXXXXXX";
static int base;
static struct zb_config cfg[N];
static struct ctl_node *node[N];

struct rec {
	uint16_t from;
	uint8_t kind;
	int status;          /* the result hook's */
	size_t len;
	uint8_t data[CTL_BLOB_MAX];
};

/* What each node's handler saw (control threads write, main reads). */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct rec got[N][MAXREC];
static int ngot[N];
static int mode[N];          /* 0 accept, 1 sleep 120 ms first, 2 EAGAIN x2, 3 refuse */
static int calls[N];

static int on_blob(void *arg, uint16_t from, uint8_t kind, const void *blob, size_t len)
{
	int me = (int)(intptr_t)arg, rc = 0;

	pthread_mutex_lock(&lock);
	int m = mode[me], c = calls[me]++;
	if (m == 2 && c < 2)
		rc = -EAGAIN;
	else if (m == 3)
		rc = -EINVAL;
	else if (ngot[me] < MAXREC) {
		struct rec *r = &got[me][ngot[me]++];
		r->from = from;
		r->kind = kind;
		r->len = len;
		memcpy(r->data, blob, len);
	}
	pthread_mutex_unlock(&lock);
	if (m == 1 && c == 0)
		usleep(120000);   /* the sender retransmits meanwhile */
	return rc;
}

/* node 0's result hook: what became of its blobs (arg NULL), and node 3's
 * (arg non-NULL, the same record) */
static struct rec acks[MAXREC], res3;
static int nacks, nres3;

static void on_result(void *arg, uint16_t peer, uint8_t kind, int status,
		     const void *blob, size_t len)
{
	pthread_mutex_lock(&lock);
	if (arg) {
		res3 = (struct rec){.from = peer, .kind = kind, .status = status, .len = len};
		nres3++;
	} else if (nacks < MAXREC && len <= sizeof(acks[0].data)) {
		acks[nacks].from = peer;
		acks[nacks].kind = kind;
		acks[nacks].status = status;
		acks[nacks].len = len;
		memcpy(acks[nacks].data, blob, len);
	}
	nacks++;
	pthread_mutex_unlock(&lock);
}

static void make_cfg(int i, const char *psk, uint32_t cluster)
{
	struct zb_config *c = &cfg[i];
	cfg_set_defaults(c);
	c->node.id = (uint16_t)i;
	c->cluster.id = cluster;
	c->cluster.seed_count = 3;
	for (int j = 0; j < 3; j++)
		snprintf(c->cluster.seeds[j], CFG_STR, "127.0.0.1:%d", base + 10 * j);
	for (int j = 0; j < N; j++) {
		c->peers[j].present = true;
		snprintf(c->peers[j].control, CFG_STR, "127.0.0.1:%d", base + 10 * j);
	}
	snprintf(c->cluster.psk_file, CFG_STR, "%s/%s", dir, psk);
	snprintf(c->control.listen, CFG_STR, "127.0.0.1:%d", base + 10 * i);
	snprintf(c->control.raft_dir, CFG_STR, "%s/raft%d", dir, i);
	c->control.admin_listen[0] = '\0';
	c->metrics.listen[0] = '\0';
	if (i == 0)
		snprintf(c->metrics.listen, CFG_STR, "127.0.0.1:%d", base + 2);
	c->control.heartbeat_ms = 50;
	c->control.acceptable_pause_ms = 300;
	c->control.phi_min_std_ms = 25;
	c->control.election_timeout_ms = 300;
	c->control.raft_heartbeat_ms = 50;
}

static void write_file(const char *name, const char *text)
{
	char p[128];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	int fd = open(p, O_CREAT | O_TRUNC | O_WRONLY, 0600);
	ZB_ASSERT(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text));
	close(fd);
}

static struct ctl_blob_stats stats(int i)
{
	struct ctl_status s;
	ctl_node_status(node[i], &s);
	return s.blobs;
}

static uint64_t auth_rej(int i, enum ctl_auth_reason r)
{
	struct ctl_status s;
	ctl_node_status(node[i], &s);
	return s.auth_rejected[r];
}

static int count_from(int at, int from, uint8_t kind)
{
	int k = 0;
	pthread_mutex_lock(&lock);
	for (int j = 0; j < ngot[at]; j++)
		k += got[at][j].from == from && got[at][j].kind == kind;
	pthread_mutex_unlock(&lock);
	return k;
}

/* The record of blob (from, kind) at node `at` equals data/len. */
static bool arrived_as_sent(int at, int from, uint8_t kind, const uint8_t *data, size_t len)
{
	bool same = false;
	pthread_mutex_lock(&lock);
	for (int j = 0; j < ngot[at]; j++)
		if (got[at][j].from == from && got[at][j].kind == kind)
			same = got[at][j].len == len && memcmp(got[at][j].data, data, len) == 0;
	pthread_mutex_unlock(&lock);
	return same;
}

static bool wait_for(bool (*cond)(void *), void *arg, int ms)
{
	for (int t = 0; t < ms; t += 10) {
		if (cond(arg))
			return true;
		usleep(10000);
	}
	return cond(arg);
}

struct want { int at, from; uint8_t kind; int n; };
static bool have(void *a)
{
	struct want *w = a;
	return count_from(w->at, w->from, w->kind) >= w->n;
}
struct wstat { int node; size_t off; uint64_t min; };
static bool stat_at_least(void *a)
{
	struct wstat *w = a;
	struct ctl_blob_stats s = stats(w->node);
	uint64_t v;
	memcpy(&v, (const char *)&s + w->off, sizeof(v));
	return v >= w->min;
}
#define WAIT_STAT(i, field, m, ms) \
	wait_for(stat_at_least, &(struct wstat){(i), offsetof(struct ctl_blob_stats, field), (m)}, (ms))

/* A BLOB message authenticated with the cluster key by a sender id that
 * runs no node (6), sent to node 0 straight over UDP. */
static void send_raw(const uint8_t *payload, size_t len)
{
	static struct ctl_auth a;
	static bool init;
	uint8_t key[CTL_KEY_BYTES], msg[CTL_MSG_MAX];
	char err[128], p[128];

	if (!init) {
		snprintf(p, sizeof(p), "%s/psk", dir);
		ZB_ASSERT(ctl_auth_load_key(p, key, err, sizeof(err)) == 0);
		ctl_auth_init(&a, 9, 6, key, zb_now_ns());
		init = true;
	}
	int k = ctl_auth_seal(&a, 4 /* BLOB */, payload, len, msg, sizeof(msg));
	ZB_ASSERT(k > 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)base)};
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	ZB_ASSERT(fd >= 0);
	ZB_ASSERT(sendto(fd, msg, (size_t)k, 0, (struct sockaddr *)&sa, sizeof(sa)) == k);
	close(fd);
}

static void put_hdr(uint8_t *p, uint16_t to, uint8_t kind, uint16_t len, uint64_t seq)
{
	memset(p, 0, 22);
	p[0] = (uint8_t)to; p[1] = (uint8_t)(to >> 8);
	p[2] = kind;
	p[4] = (uint8_t)len; p[5] = (uint8_t)(len >> 8);
	uint64_t inc = 1;
	for (int i = 0; i < 8; i++) {
		p[6 + i] = (uint8_t)(inc >> (8 * i));
		p[14 + i] = (uint8_t)(seq >> (8 * i));
	}
}

static char *http_get(int port, const char *path)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	char req[128];
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	int k = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\n\r\n", path);
	ZB_ASSERT(write(fd, req, (size_t)k) == k);
	size_t cap = 1 << 20, len = 0;
	char *buf = malloc(cap);
	ssize_t r;
	ZB_ASSERT(buf != NULL);
	while (len < cap - 1 && (r = read(fd, buf + len, cap - 1 - len)) > 0)
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

static struct ctl_opts opts_for(int i, uint32_t timeout_ms)
{
	(void)i;
	return (struct ctl_opts){.event_consumers = 0, .blob_timeout_ms = timeout_ms};
}

int main(void)
{
	char err[256];
	uint8_t b72[72], b256[CTL_BLOB_MAX], b1[1] = {0xa5}, big[CTL_BLOB_MAX + 1] = {0};
	struct ctl_opts o;

	tap_plan(40);
	ZB_ASSERT(mkdtemp(dir));
	base = 23000 + (int)(getpid() % 1500) * 10 + 5;
	write_file("psk", "blob test cluster key, long enough");
	write_file("psk-wrong", "another key altogether, also long");
	srand((unsigned)getpid());
	for (size_t i = 0; i < sizeof(b72); i++)
		b72[i] = (uint8_t)rand();
	for (size_t i = 0; i < sizeof(b256); i++)
		b256[i] = (uint8_t)rand();

	/* Node 0 alone first. */
	make_cfg(0, "psk", 9);
	o = opts_for(0, 0);
	is_int(ctl_node_start(&cfg[0], &o, &node[0], err, sizeof(err)), 0, "node 0 started");
	if (!node[0]) {
		tap_diag("%s", err);
		return tap_done();
	}
	ctl_blob_handle(node[0], CTL_BLOB_RDMA_CONN, on_blob, (void *)(intptr_t)0);
	ctl_blob_on_result(node[0], CTL_BLOB_RDMA_CONN, on_result, NULL);
	ctl_blob_on_result(node[0], 7, on_result, NULL);

	/* Bad input: clear errors, nothing queued. */
	is_int(ctl_blob_send(NULL, 1, 1, b72, 72), -EINVAL, "no node: -EINVAL");
	is_int(ctl_blob_send(node[0], 0, 1, b72, 72), -EINVAL, "to itself: -EINVAL");
	is_int(ctl_blob_send(node[0], CFG_MAX_NODES, 1, b72, 72), -EINVAL,
	       "peer out of range: -EINVAL");
	is_int(ctl_blob_send(node[0], 1, 0, b72, 72), -EINVAL, "kind 0: -EINVAL");
	is_int(ctl_blob_send(node[0], 1, CTL_BLOB_KINDS, b72, 72), -EINVAL,
	       "kind %d: -EINVAL", CTL_BLOB_KINDS);
	is_int(ctl_blob_send(node[0], 1, 1, NULL, 72), -EINVAL, "NULL blob: -EINVAL");
	is_int(ctl_blob_send(node[0], 1, 1, b72, 0), -EMSGSIZE, "empty blob: -EMSGSIZE");
	is_int(ctl_blob_send(node[0], 1, 1, big, sizeof(big)), -EMSGSIZE,
	       "%zu-byte blob: -EMSGSIZE", sizeof(big));
	is_int(ctl_blob_handle(node[0], 0, on_blob, NULL), -EINVAL, "handler for kind 0: -EINVAL");
	is_int(ctl_blob_on_result(node[0], CTL_BLOB_KINDS, on_result, NULL), -EINVAL,
	       "result hook for kind %d: -EINVAL", CTL_BLOB_KINDS);
	is_int((int)stats(0).queued, 0, "nothing was queued");

	/* Node 1 is not running yet: its first transmissions are lost. */
	is_int(ctl_blob_send(node[0], 1, CTL_BLOB_RDMA_CONN, b72, 72), 0,
	       "72-byte blob queued for node 1 (not started)");
	bool r = WAIT_STAT(0, sent, 3, 2000);
	ok(r, "node 0 transmitted it %llu times meanwhile",
	   (unsigned long long)stats(0).sent);
	is_int((int)stats(0).acked, 0, "... unacknowledged");
	make_cfg(1, "psk", 9);
	o = opts_for(1, 0);
	ok(ctl_node_start(&cfg[1], &o, &node[1], err, sizeof(err)) == 0, "node 1 started");
	ctl_blob_handle(node[1], CTL_BLOB_RDMA_CONN, on_blob, (void *)(intptr_t)1);
	struct want w = {1, 0, CTL_BLOB_RDMA_CONN, 1};
	ok(wait_for(have, &w, 3000) && arrived_as_sent(1, 0, CTL_BLOB_RDMA_CONN, b72, 72),
	   "retransmission reached node 1, exactly as sent");
	r = WAIT_STAT(0, acked, 1, 2000);
	ok(r, "node 0 got the acknowledgement (%llu retransmits)",
	   (unsigned long long)stats(0).retransmits);
	usleep(50000);
	pthread_mutex_lock(&lock);
	ok(nacks == 1 && acks[0].from == 1 && acks[0].kind == CTL_BLOB_RDMA_CONN &&
	   acks[0].status == 0 && acks[0].len == 72 && memcmp(acks[0].data, b72, 72) == 0,
	   "... and its hook heard of it once: node 1 took that blob (%d)", nacks);
	pthread_mutex_unlock(&lock);

	/* Three nodes: every ordered pair, sizes 1, 72, 256 (kinds 2, 3, 4). */
	make_cfg(2, "psk", 9);
	o = opts_for(2, 0);
	ok(ctl_node_start(&cfg[2], &o, &node[2], err, sizeof(err)) == 0, "node 2 started");
	for (int i = 0; i < 3; i++)
		for (uint8_t k = 2; k <= 4; k++)
			ctl_blob_handle(node[i], k, on_blob, (void *)(intptr_t)i);
	int queued = 0;
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < 3; j++)
			if (i != j) {
				queued += ctl_blob_send(node[i], (uint16_t)j, 2, b1, 1) == 0;
				queued += ctl_blob_send(node[i], (uint16_t)j, 3, b72, 72) == 0;
				queued += ctl_blob_send(node[i], (uint16_t)j, 4, b256, 256) == 0;
			}
	is_int(queued, 18, "18 blobs queued between 3 nodes");
	bool all = true, exact = true, once = true;
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < 3; j++)
			if (i != j)
				for (uint8_t k = 2; k <= 4; k++) {
					struct want wk = {j, i, k, 1};
					all = all && wait_for(have, &wk, 3000);
				}
	usleep(200000);   /* late duplicates would show now */
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < 3; j++)
			if (i != j) {
				exact = exact && arrived_as_sent(j, i, 2, b1, 1) &&
					arrived_as_sent(j, i, 3, b72, 72) &&
					arrived_as_sent(j, i, 4, b256, 256);
				for (uint8_t k = 2; k <= 4; k++)
					once = once && count_from(j, i, k) == 1;
			}
	ok(all, "all 18 arrived");
	ok(exact, "each exactly as sent (bytes, length, kind, sender)");
	ok(once, "each delivered once");

	/* A slow handler: retransmissions arrive meanwhile, delivered once. */
	pthread_mutex_lock(&lock);
	mode[2] = 1;
	calls[2] = 0;
	pthread_mutex_unlock(&lock);
	uint64_t dup0 = stats(2).duplicates;
	ctl_blob_send(node[0], 2, 5, b72, 72);
	ctl_blob_handle(node[2], 5, on_blob, (void *)(intptr_t)2);
	w = (struct want){2, 0, 5, 1};
	r = wait_for(have, &w, 2000) && WAIT_STAT(2, duplicates, dup0 + 1, 2000);
	ok(r, "slow handler: %llu retransmission(s) seen as duplicates",
	   (unsigned long long)(stats(2).duplicates - dup0));
	usleep(100000);
	is_int(count_from(2, 0, 5), 1, "... and the blob delivered once");

	/* Not ready twice (-EAGAIN), then accepted: retried until delivered. */
	pthread_mutex_lock(&lock);
	mode[1] = 2;
	calls[1] = 0;
	pthread_mutex_unlock(&lock);
	ctl_blob_handle(node[1], 6, on_blob, (void *)(intptr_t)1);
	ctl_blob_send(node[2], 1, 6, b256, 100);
	w = (struct want){1, 2, 6, 1};
	r = wait_for(have, &w, 2000) && stats(1).deferred >= 2;
	ok(r, "handler not ready twice: retried, then delivered (%llu deferred)",
	   (unsigned long long)stats(1).deferred);

	/* A refusing handler: acknowledged as refused, not retried. */
	pthread_mutex_lock(&lock);
	mode[1] = 3;
	calls[1] = 0;
	pthread_mutex_unlock(&lock);
	ctl_blob_handle(node[1], 7, on_blob, (void *)(intptr_t)1);
	ctl_blob_send(node[0], 1, 7, b72, 72);
	ok(WAIT_STAT(0, refused, 1, 2000), "refused blob: the sender learns it");
	usleep(150000);
	pthread_mutex_lock(&lock);
	int refusals = calls[1];
	pthread_mutex_unlock(&lock);
	is_int(refusals, 1, "... and does not retry it");
	pthread_mutex_lock(&lock);
	int acked_hooks = nacks, st = acks[1].status, k = acks[1].kind;
	pthread_mutex_unlock(&lock);
	ok(acked_hooks == 2 && st == -EBADMSG && k == 7,
	   "... and its result hook heard of it once, as refused (%d calls, status %d)",
	   acked_hooks, st);
	pthread_mutex_lock(&lock);
	mode[1] = 0;
	pthread_mutex_unlock(&lock);

	/* Wrong key (node 3) and wrong cluster id (node 4): rejected, counted. */
	make_cfg(3, "psk-wrong", 9);
	make_cfg(4, "psk", 10);
	uint64_t mac0 = auth_rej(0, CTL_AUTH_MAC), cl0 = auth_rej(0, CTL_AUTH_CLUSTER);
	o = opts_for(3, 600);
	ok(ctl_node_start(&cfg[3], &o, &node[3], err, sizeof(err)) == 0 &&
	   ctl_node_start(&cfg[4], &o, &node[4], err, sizeof(err)) == 0,
	   "nodes 3 (wrong key) and 4 (wrong cluster) started");
	ctl_blob_on_result(node[3], CTL_BLOB_RDMA_CONN, on_result, &res3);
	ctl_blob_send(node[3], 0, CTL_BLOB_RDMA_CONN, b72, 72);
	ctl_blob_send(node[4], 0, CTL_BLOB_RDMA_CONN, b72, 72);
	r = WAIT_STAT(3, failed, 1, 3000) && WAIT_STAT(4, failed, 1, 3000);
	ok(r, "both gave their blob up after 600 ms (%llu and %llu transmissions)",
	   (unsigned long long)stats(3).sent, (unsigned long long)stats(4).sent);
	pthread_mutex_lock(&lock);
	struct rec g3 = res3;
	int n3 = nres3;
	pthread_mutex_unlock(&lock);
	ok(n3 == 1 && g3.status == -ETIMEDOUT && g3.from == 0 && g3.kind == CTL_BLOB_RDMA_CONN &&
	   g3.len == 72, "node 3's result hook heard it given up, once (%d calls, status %d)",
	   n3, g3.status);
	uint64_t mac1 = auth_rej(0, CTL_AUTH_MAC), cl1 = auth_rej(0, CTL_AUTH_CLUSTER);
	ok(mac1 >= mac0 + stats(3).sent,
	   "node 0 rejected node 3's messages: bad MAC (%llu)",
	   (unsigned long long)(mac1 - mac0));
	ok(cl1 >= cl0 + stats(4).sent,
	   "node 0 rejected node 4's messages: wrong cluster (%llu)",
	   (unsigned long long)(cl1 - cl0));
	ok(count_from(0, 3, CTL_BLOB_RDMA_CONN) == 0 && count_from(0, 4, CTL_BLOB_RDMA_CONN) == 0 &&
	   stats(3).acked == 0 && stats(4).acked == 0, "nothing of theirs delivered or acknowledged");

	/* Authenticated but malformed BLOB messages: counted, never delivered. */
	uint8_t p[22 + CTL_BLOB_MAX];
	uint64_t mal0 = stats(0).malformed;
	put_hdr(p, 0, 1, 72, 1);
	send_raw(p, 22 + 71);                  /* length field says 72 */
	put_hdr(p, 1, 1, 72, 2);
	send_raw(p, 22 + 72);                  /* addressed to node 1 */
	put_hdr(p, 0, 0, 72, 3);
	send_raw(p, 22 + 72);                  /* kind 0 */
	put_hdr(p, 0, 1, 300, 4);
	send_raw(p, 22 + 256);                 /* oversized length field */
	send_raw(p, 10);                       /* shorter than the header */
	ok(WAIT_STAT(0, malformed, mal0 + 5, 2000), "5 malformed BLOB messages counted");
	ok(count_from(0, 6, 1) == 0, "... none delivered");
	put_hdr(p, 0, 1, 72, 5);
	memcpy(p + 22, b72, 72);
	send_raw(p, 22 + 72);                  /* a good one, for contrast */
	w = (struct want){0, 6, 1, 1};
	ok(wait_for(have, &w, 2000), "a well-formed one from the same sender is delivered");

	/* The counters on /metrics (strict Prometheus text). */
	char *m = http_get(base + 2, "/metrics");
	char line[128];
	snprintf(line, sizeof(line), "zbmd_control_blobs_total{node=\"0\",event=\"acked\"} %llu",
		 (unsigned long long)stats(0).acked);
	int prc = m ? prom_check(m, err, sizeof(err)) : -1;
	ok(prc == 0 && strstr(m, line) && strstr(m, "event=\"malformed\"") &&
	   strstr(m, "event=\"failed\""), "/metrics parses and has the blob counters (%s)", line);
	free(m);

	for (int i = 0; i < N; i++)
		ctl_node_stop(node[i], false);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		tap_diag("cleanup of %s failed", dir);
	return tap_done();
}
