/* HTTP endpoints (libmicrohttpd, its own polling thread): Prometheus text at
 * [metrics] listen /metrics, and the admin API at [control] admin_listen:
 * /status (text), /status.json, /metrics. Handlers read only the status
 * snapshot (under its mutex) and the metrics registry. */
#include "internal.h"
#include "zbmd/common.h"
#include "zbmd/metrics.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct ctl_node *ctl__node_next(struct ctl_node *n);
void ctl__node_set_next(struct ctl_node *n, struct ctl_node *next);

#if MHD_VERSION < 0x00097002
typedef int MHD_RESULT;
#else
typedef enum MHD_Result MHD_RESULT;
#endif

static MHD_RESULT reply(struct MHD_Connection *c, unsigned code, char *body,
			const char *type)
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
	ret = MHD_queue_response(c, code, r);
	MHD_destroy_response(r);
	return ret;
}

static MHD_RESULT handler(void *cls, struct MHD_Connection *c, const char *url,
			  const char *method, const char *version,
			  const char *upload, size_t *upload_size, void **con_cls)
{
	struct ctl_node *n = cls;
	struct ctl_status *s;
	(void)version;
	(void)upload;
	(void)con_cls;

	if (strcmp(method, "GET") != 0 || *upload_size)
		return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, strdup("GET only\n"), "text/plain");
	if (strcmp(url, "/metrics") == 0)
		return reply(c, MHD_HTTP_OK, zb_metrics_render(NULL),
			     "text/plain; version=0.0.4; charset=utf-8");
	if (strcmp(url, "/status") == 0 || strcmp(url, "/status.json") == 0) {
		s = malloc(sizeof(*s));
		if (!s)
			return reply(c, MHD_HTTP_OK, NULL, NULL);
		ctl_node_status(n, s);
		bool json = strcmp(url, "/status.json") == 0;
		char *body = json ? ctl_status_json(s) : ctl_status_text(s);
		free(s);
		return reply(c, MHD_HTTP_OK, body,
			     json ? "application/json" : "text/plain; charset=utf-8");
	}
	return reply(c, MHD_HTTP_NOT_FOUND, strdup("not found: try /metrics, /status, /status.json\n"),
		     "text/plain");
}

int ctl__http_start(struct ctl_node *n, const char *listen, void **out,
		    char *err, size_t errlen)
{
	char host[64];
	struct sockaddr_in sa;
	const char *colon = strrchr(listen, ':');

	ZB_ASSERT(n && listen && out);
	if (!colon || (size_t)(colon - listen) >= sizeof(host)) {
		snprintf(err, errlen, "http listen '%s' is not ip:port", listen);
		return ZB_ERR_CONFIG;
	}
	memcpy(host, listen, (size_t)(colon - listen));
	host[colon - listen] = '\0';
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	int port = atoi(colon + 1);
	if (port <= 0 || port > 65535 || inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
		snprintf(err, errlen, "http listen '%s' is not ip:port", listen);
		return ZB_ERR_CONFIG;
	}
	sa.sin_port = htons((uint16_t)port);
	struct MHD_Daemon *d = MHD_start_daemon(
		MHD_USE_INTERNAL_POLLING_THREAD, (uint16_t)port, NULL, NULL,
		handler, n, MHD_OPTION_SOCK_ADDR, &sa,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)5,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned)16, MHD_OPTION_END);
	if (!d) {
		snprintf(err, errlen, "cannot listen on %s (http)", listen);
		return -EADDRINUSE;
	}
	*out = d;
	return 0;
}

void ctl__http_stop(void *d)
{
	if (d)
		MHD_stop_daemon(d);
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
		{"zbmd_control_blobs_total", "Node-to-node blobs (ctl_blob_send) by event: out = queued, queue_full, sent, retransmits, acked, refused, failed; in = delivered, duplicates, rejected, deferred, malformed", ZB_METRIC_COUNTER},
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
			case 13: {
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
