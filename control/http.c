/* HTTP endpoints (libmicrohttpd, its own polling thread, and a janitor
 * thread per listener): Prometheus text at [metrics] listen /metrics, and
 * the admin API at [control] admin_listen: /status (text), /status.json,
 * /metrics. Handlers read only the status
 * snapshot (under its mutex) and the metrics registry. */
#include "internal.h"
#include "zbmd/common.h"
#include "zbmd/metrics.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct ctl_node *ctl__node_next(struct ctl_node *n);
void ctl__http_stop(void *p);
void ctl__http_free(void *p);
void ctl__node_set_next(struct ctl_node *n, struct ctl_node *next);

#if MHD_VERSION < 0x00097002
typedef int MHD_RESULT;
#else
typedef enum MHD_Result MHD_RESULT;
#endif

/* A reply; hname/hval: one more header (NULL: none). */
static MHD_RESULT reply_h(struct MHD_Connection *c, unsigned code, char *body,
			  const char *type, const char *hname, const char *hval)
{
	struct MHD_Response *r;
	MHD_RESULT ret;

	if (!body) {
		static char oom[] = "out of memory\n";
		r = MHD_create_response_from_buffer(strlen(oom), oom, MHD_RESPMEM_PERSISTENT);
		code = MHD_HTTP_INTERNAL_SERVER_ERROR;
		type = "text/plain";
	} else {
		r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
	}
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", type);
	if (hname)
		MHD_add_response_header(r, hname, hval);
	ret = MHD_queue_response(c, code, r);
	MHD_destroy_response(r);
	return ret;
}

static MHD_RESULT reply(struct MHD_Connection *c, unsigned code, char *body,
			const char *type)
{
	return reply_h(c, code, body, type, NULL, NULL);
}

/* One listener. The admin listener serves /status, /status.json and
 * /metrics; the [metrics] listener /metrics only (it is often on a routable
 * address: the membership and its addresses stay on the admin one).
 *
 * Its connections are bounded so that clients which hold them cannot lock
 * the others out (a client sending a byte a second is never idle, so
 * libmicrohttpd's inactivity timeout alone let 16 of them hold every slot):
 * at most HTTP_CONNS at once, HTTP_PER_HOST from one address other than
 * loopback, HTTP_LOCAL_RESERVE of them kept for loopback clients (the
 * operator's `zbmd status` on the node), and a connection that has not
 * sent a whole request HTTP_REQUEST_MS after it opened or after its last
 * reply is shut down by the janitor thread. */
#define HTTP_CONNS         256
#define HTTP_PER_HOST      8
#define HTTP_LOCAL_RESERVE 16
#define HTTP_REQUEST_MS    4000
#define HTTP_JANITOR_MS    250
#define HTTP_OVER          64   /* libmicrohttpd's limit is HTTP_CONNS + this */

struct http_conn {
	bool used;
	int fd;
	uint32_t ip;            /* network order */
	uint64_t since_ns;      /* opened, or its last reply */
};

struct http_srv {
	struct MHD_Daemon *d;
	struct ctl_node *n;
	bool admin;
	pthread_mutex_t lock;   /* conn[], open, stop, the counters */
	pthread_cond_t cv;
	bool stop, janitor_up;
	pthread_t janitor;
	unsigned open;
	uint64_t refused, cut;
	struct http_conn conn[HTTP_CONNS];
};

/* libmicrohttpd's accept policy: the limits above, per client address. */
static MHD_RESULT http_accept(void *cls, const struct sockaddr *addr, socklen_t len)
{
	struct http_srv *h = cls;
	uint32_t ip = 0;
	unsigned same = 0;

	if (addr && addr->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in))
		ip = ((const struct sockaddr_in *)addr)->sin_addr.s_addr;
	bool local = ctl__loopback(ip);
	pthread_mutex_lock(&h->lock);
	for (unsigned i = 0; i < HTTP_CONNS && !local; i++)
		same += h->conn[i].used && h->conn[i].ip == ip;
	bool ok = h->open < HTTP_CONNS &&
		  (local || (same < HTTP_PER_HOST && h->open < HTTP_CONNS - HTTP_LOCAL_RESERVE));
	if (!ok)
		h->refused++;
	pthread_mutex_unlock(&h->lock);
	return ok ? MHD_YES : MHD_NO;
}

static void http_notify(void *cls, struct MHD_Connection *c, void **socket_context,
			enum MHD_ConnectionNotificationCode code)
{
	struct http_srv *h = cls;

	pthread_mutex_lock(&h->lock);
	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *fd = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
		const union MHD_ConnectionInfo *ca = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
		*socket_context = NULL;
		for (unsigned i = 0; i < HTTP_CONNS && fd; i++) {
			struct http_conn *e = &h->conn[i];
			if (e->used)
				continue;
			e->used = true;
			e->fd = fd->connect_fd;
			e->ip = ca && ca->client_addr && ca->client_addr->sa_family == AF_INET ?
				((const struct sockaddr_in *)ca->client_addr)->sin_addr.s_addr : 0;
			e->since_ns = zb_now_ns();
			h->open++;
			*socket_context = e;
			break;
		}
	} else if (*socket_context) {   /* closed: before its socket is */
		struct http_conn *e = *socket_context;
		ZB_ASSERT(e->used && h->open > 0);
		e->used = false;
		h->open--;
		*socket_context = NULL;
	}
	pthread_mutex_unlock(&h->lock);
}

static void *http_janitor(void *arg)
{
	struct http_srv *h = arg;

	pthread_mutex_lock(&h->lock);
	while (!h->stop) {
		uint64_t now = zb_now_ns();
		for (unsigned i = 0; i < HTTP_CONNS; i++) {
			struct http_conn *e = &h->conn[i];
			if (!e->used || now - e->since_ns < HTTP_REQUEST_MS * 1000000ull)
				continue;
			/* libmicrohttpd sees the end and closes it; the fd is
			 * still this connection's: its close notice takes the
			 * lock held here */
			shutdown(e->fd, SHUT_RDWR);
			e->since_ns = now;
			h->cut++;
		}
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += HTTP_JANITOR_MS * 1000000L;
		ts.tv_sec += ts.tv_nsec / 1000000000L;
		ts.tv_nsec %= 1000000000L;
		pthread_cond_timedwait(&h->cv, &h->lock, &ts);
	}
	pthread_mutex_unlock(&h->lock);
	return NULL;
}

static MHD_RESULT handler(void *cls, struct MHD_Connection *c, const char *url,
			  const char *method, const char *version,
			  const char *upload, size_t *upload_size, void **con_cls)
{
	struct http_srv *h = cls;
	struct ctl_status *s;
	(void)upload;
	(void)con_cls;

	/* a whole request came: the connection's clock starts again */
	const union MHD_ConnectionInfo *sc = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	if (sc && sc->socket_context) {
		pthread_mutex_lock(&h->lock);
		((struct http_conn *)sc->socket_context)->since_ns = zb_now_ns();
		pthread_mutex_unlock(&h->lock);
	}
	/* GET, and HEAD (the same headers, no body: libmicrohttpd leaves it
	 * out); a 405 says what is allowed (RFC 9110 15.5.6) */
	if ((strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) || *upload_size)
		return reply_h(c, MHD_HTTP_METHOD_NOT_ALLOWED, strdup("GET or HEAD only\n"),
			       "text/plain", "Allow", "GET, HEAD");
	/* an HTTP/1.1 request names its Host (RFC 9112 3.2) */
	if (version && strcmp(version, "HTTP/1.1") == 0 &&
	    !MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host"))
		return reply(c, MHD_HTTP_BAD_REQUEST,
			     strdup("bad request: HTTP/1.1 without a Host header\n"), "text/plain");
	/* the absolute-form, "GET http://host:port/status" (RFC 9112 3.2.2:
	 * a server MUST accept it): the path is what follows the authority
	 * (it was 404, the whole URL compared as a path) */
	size_t scheme = strncasecmp(url, "http://", 7) == 0 ? 7
			: strncasecmp(url, "https://", 8) == 0 ? 8 : 0;
	if (scheme) {
		const char *path = strchr(url + scheme, '/');
		url = path ? path : "/";
	}
	if (strcmp(url, "/metrics") == 0)
		return reply(c, MHD_HTTP_OK, zb_metrics_render(NULL),
			     "text/plain; version=0.0.4; charset=utf-8");
	if (h->admin && (strcmp(url, "/status") == 0 || strcmp(url, "/status.json") == 0)) {
		s = malloc(sizeof(*s));
		if (!s)
			return reply(c, MHD_HTTP_OK, NULL, NULL);
		ctl_node_status(h->n, s);
		bool json = strcmp(url, "/status.json") == 0;
		char *body = json ? ctl_status_json(s) : ctl_status_text(s);
		free(s);
		return reply(c, MHD_HTTP_OK, body,
			     json ? "application/json" : "text/plain; charset=utf-8");
	}
	return reply(c, MHD_HTTP_NOT_FOUND,
		     strdup(h->admin ? "not found: try /metrics, /status, /status.json\n"
				     : "not found: try /metrics (the status is on the admin "
				       "endpoint, [control] admin_listen)\n"),
		     "text/plain");
}

/* Percent-decoding of the path and query, as libmicrohttpd's own but for
 * %00: kept as written, so that "/status%00junk" is no path of ours (decoded,
 * the NUL cut it to "/status" for the handler's comparisons). */
static size_t http_unescape(void *cls, struct MHD_Connection *c, char *uri)
{
	(void)cls;
	(void)c;
	char *w = uri;
	for (const char *r = uri; *r;) {
		if (r[0] == '%' && isxdigit((unsigned char)r[1]) && isxdigit((unsigned char)r[2])) {
			char hex[3] = {r[1], r[2], 0};
			unsigned long v = strtoul(hex, NULL, 16);
			if (v != 0) {
				*w++ = (char)v;
				r += 3;
				continue;
			}
		}
		*w++ = *r++;
	}
	*w = '\0';
	return (size_t)(w - uri);
}

int ctl__http_start(struct ctl_node *n, const char *listen, bool admin, void **out,
		    char *err, size_t errlen)
{
	struct sockaddr_in sa;

	ZB_ASSERT(n && listen && out);
	if (ctl__parse_ip4(listen, &sa) != 0) {
		snprintf(err, errlen, "http listen '%s' is not ip:port", listen);
		return ZB_ERR_CONFIG;
	}
	struct http_srv *h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->n = n;
	h->admin = admin;
	pthread_mutex_init(&h->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&h->cv, &ca);
	pthread_condattr_destroy(&ca);
	h->d = MHD_start_daemon(
		MHD_USE_INTERNAL_POLLING_THREAD, ntohs(sa.sin_port), http_accept, h,
		handler, h, MHD_OPTION_SOCK_ADDR, &sa,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)2,
		/* libmicrohttpd's own limit is above ours: it refuses past
		 * its limit before http_accept runs, so those refusals went
		 * uncounted (dropped{why="limit"} stayed 0 under a flood) */
		MHD_OPTION_CONNECTION_LIMIT, (unsigned)(HTTP_CONNS + HTTP_OVER),
		MHD_OPTION_NOTIFY_CONNECTION, http_notify, h,
		MHD_OPTION_UNESCAPE_CALLBACK, http_unescape, NULL, MHD_OPTION_END);
	if (!h->d) {
		/* the reason, from a bind of our own (libmicrohttpd keeps it) */
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1, e = 0;
		if (fd >= 0) {
			setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
			if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
				e = errno;
			close(fd);
		}
		snprintf(err, errlen, "%s: cannot listen on %s (http): %s",
			 admin ? "[control] admin_listen" : "[metrics] listen", listen,
			 e ? strerror(e) : "the HTTP server did not start");
		ctl__http_free(h);
		return -EADDRINUSE;
	}
	if (pthread_create(&h->janitor, NULL, http_janitor, h) != 0) {
		snprintf(err, errlen, "cannot start the http janitor of %s", listen);
		ctl__http_free(h);
		return -EAGAIN;
	}
	h->janitor_up = true;
	*out = h;
	return 0;
}

/* No more requests: the daemon and the janitor stop. The listener's
 * counters stay readable (the node's loop may still report them) until
 * ctl__http_free. */
void ctl__http_stop(void *p)
{
	struct http_srv *h = p;

	if (!h)
		return;
	if (h->janitor_up) {
		pthread_mutex_lock(&h->lock);
		h->stop = true;
		pthread_cond_signal(&h->cv);
		pthread_mutex_unlock(&h->lock);
		pthread_join(h->janitor, NULL);
		h->janitor_up = false;
	}
	if (h->d)
		MHD_stop_daemon(h->d);
	h->d = NULL;
}

void ctl__http_free(void *p)
{
	struct http_srv *h = p;

	if (!h)
		return;
	ctl__http_stop(h);
	pthread_cond_destroy(&h->cv);
	pthread_mutex_destroy(&h->lock);
	free(h);
}

void ctl__http_counts(void *p, uint64_t *refused, uint64_t *cut)
{
	struct http_srv *h = p;

	if (!h)
		return;
	pthread_mutex_lock(&h->lock);
	*refused += h->refused;
	*cut += h->cut;
	pthread_mutex_unlock(&h->lock);
}

/* ---- metrics collector over every running node --------------------------- */

static pthread_mutex_t nodes_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ctl_node *nodes;
static int collector = -1;

static void collect(void *arg, struct zb_metrics_out *out)
{
	static const struct {
		const char *name, *help;
		enum zb_metric_type type;
	} fam[] = {
		{"zbmd_control_epoch", "Membership epoch applied on this node", ZB_METRIC_GAUGE},
		{"zbmd_control_members", "Members in the applied membership", ZB_METRIC_GAUGE},
		{"zbmd_raft_term", "Current Raft term", ZB_METRIC_GAUGE},
		{"zbmd_raft_leader", "Node id of the known Raft leader (-1 none)", ZB_METRIC_GAUGE},
		{"zbmd_raft_is_leader", "1 when this node is the Raft leader", ZB_METRIC_GAUGE},
		{"zbmd_raft_commit_index", "Raft commit index", ZB_METRIC_GAUGE},
		{"zbmd_raft_applied_index", "Last Raft index applied to the state machine", ZB_METRIC_GAUGE},
		{"zbmd_control_phi", "Phi-accrual suspicion level per peer", ZB_METRIC_GAUGE},
		{"zbmd_control_peer_convicted", "1 when the peer's phi is over the threshold", ZB_METRIC_GAUGE},
		{"zbmd_control_auth_accepted_total", "Authenticated control messages accepted", ZB_METRIC_COUNTER},
		{"zbmd_control_auth_failures_total", "Control messages and raft connections rejected by authentication", ZB_METRIC_COUNTER},
		{"zbmd_control_convictions_total", "Members removed by this node as leader after conviction", ZB_METRIC_COUNTER},
		{"zbmd_control_events_dropped_total", "Events not delivered because an lcore ring was full", ZB_METRIC_COUNTER},
		{"zbmd_control_http_dropped_total", "HTTP connections of the admin and metrics endpoints refused over the limits (why=limit) or shut down for not sending a whole request in time (why=slow)", ZB_METRIC_COUNTER},
		{"zbmd_control_blobs_total", "Node-to-node blobs (ctl_blob_send) by event: out = queued, queue_full, sent, retransmits, acked, refused, failed; in = delivered, duplicates, rejected, deferred, malformed", ZB_METRIC_COUNTER},
		{"zbmd_control_fsm_skipped_total", "Committed Raft commands this node did not understand, applied as no-ops", ZB_METRIC_COUNTER},
	};
	struct ctl_status *s = malloc(sizeof(*s) * 1);
	char l[ZB_METRICS_LABELS_MAX];
	(void)arg;

	if (!s)
		return;
	pthread_mutex_lock(&nodes_lock);
	for (unsigned f = 0; f < ZB_ARRAY_LEN(fam); f++) {
		zb_metrics_family(out, fam[f].name, fam[f].type, fam[f].help);
		for (struct ctl_node *n = nodes; n; n = ctl__node_next(n)) {
			ctl_node_status(n, s);
			char node[32];
			snprintf(node, sizeof(node), "node=\"%u\"", s->self);
			switch (f) {
			case 0: zb_metrics_sample(out, fam[f].name, node, (double)s->st.epoch); break;
			case 1: zb_metrics_sample(out, fam[f].name, node, s->st.n); break;
			case 2: zb_metrics_sample(out, fam[f].name, node, (double)s->term); break;
			case 3: zb_metrics_sample(out, fam[f].name, node, s->leader); break;
			case 4: zb_metrics_sample(out, fam[f].name, node, s->leader == s->self); break;
			case 5: zb_metrics_sample(out, fam[f].name, node, (double)s->commit); break;
			case 6: zb_metrics_sample(out, fam[f].name, node, (double)s->applied); break;
			case 7:
			case 8:
				for (uint32_t i = 0; i < s->n_peers; i++) {
					snprintf(l, sizeof(l), "%s,peer=\"%u\"", node, s->peers[i].id);
					zb_metrics_sample(out, fam[f].name, l,
							  f == 7 ? s->peers[i].phi : s->peers[i].convicted);
				}
				break;
			case 9: zb_metrics_sample(out, fam[f].name, node, (double)s->auth_ok); break;
			case 10:
				for (unsigned r = 0; r < CTL_AUTH_NREASONS; r++) {
					snprintf(l, sizeof(l), "%s,reason=\"%s\"", node,
						 ctl_auth_reason_name(r));
					zb_metrics_sample(out, fam[f].name, l, (double)s->auth_rejected[r]);
				}
				snprintf(l, sizeof(l), "%s,reason=\"raft_transport\"", node);
				zb_metrics_sample(out, fam[f].name, l, (double)s->handshake_rejected);
				break;
			case 11: zb_metrics_sample(out, fam[f].name, node, (double)s->convictions); break;
			case 12: zb_metrics_sample(out, fam[f].name, node, (double)s->events_dropped); break;
			case 13:
				snprintf(l, sizeof(l), "%s,why=\"limit\"", node);
				zb_metrics_sample(out, fam[f].name, l, (double)s->http_refused);
				snprintf(l, sizeof(l), "%s,why=\"slow\"", node);
				zb_metrics_sample(out, fam[f].name, l, (double)s->http_cut);
				break;
			case 14: {
				const struct ctl_blob_stats *b = &s->blobs;
				const struct { const char *ev; uint64_t v; } bl[] = {
					{"queued", b->queued}, {"queue_full", b->queue_full},
					{"sent", b->sent}, {"retransmits", b->retransmits},
					{"acked", b->acked}, {"refused", b->refused},
					{"failed", b->failed}, {"delivered", b->delivered},
					{"duplicates", b->duplicates}, {"rejected", b->rejected},
					{"deferred", b->deferred}, {"malformed", b->malformed},
				};
				for (unsigned i = 0; i < ZB_ARRAY_LEN(bl); i++) {
					snprintf(l, sizeof(l), "%s,event=\"%s\"", node, bl[i].ev);
					zb_metrics_sample(out, fam[f].name, l, (double)bl[i].v);
				}
				break;
			}
			case 15: zb_metrics_sample(out, fam[f].name, node, (double)s->st.skipped); break;
			}
		}
	}
	pthread_mutex_unlock(&nodes_lock);
	free(s);
}

void ctl__collector_add(struct ctl_node *n)
{
	pthread_mutex_lock(&nodes_lock);
	ctl__node_set_next(n, nodes);
	nodes = n;
	bool first = collector < 0;
	pthread_mutex_unlock(&nodes_lock);
	if (first) {
		int h = zb_metrics_add_collector(collect, NULL);
		pthread_mutex_lock(&nodes_lock);
		if (collector < 0)
			collector = h;
		pthread_mutex_unlock(&nodes_lock);
	}
}

void ctl__collector_remove(struct ctl_node *n)
{
	pthread_mutex_lock(&nodes_lock);
	struct ctl_node *prev = NULL;
	for (struct ctl_node *c = nodes; c; prev = c, c = ctl__node_next(c)) {
		if (c != n)
			continue;
		if (prev)
			ctl__node_set_next(prev, ctl__node_next(c));
		else
			nodes = ctl__node_next(c);
		break;
	}
	pthread_mutex_unlock(&nodes_lock);
}
