/* The control thread of one node: a libuv loop in a pthread running
 *   - heartbeats over UDP on the control address, fed to a phi-accrual
 *     detector per peer (phi.c), every message authenticated (auth.c);
 *   - Raft (libraft + raft_uv for the durable log/snapshots under raft_dir,
 *     raft_uv_tcp wrapped by the PSK handshake in tcp_auth.c);
 *   - the membership FSM (fsm.c) and, on the leader, reconciliation of the
 *     member set with what the detector sees (member.c);
 *   - events to the lcores and commands from them over ctl_rings.
 * Everything in struct ctl_node except `status` (status_lock) and `epoch`
 * (atomic) belongs to the loop thread once it runs.
 */
#include "internal.h"
#include "zbmd/common.h"
#include "zbmd/metrics.h"

#include <arpa/inet.h>
#include <pthread.h>
#include <signal.h>
#include <sodium.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define TICK_MS          10
#define MSG_HEARTBEAT    1
#define MSG_LEAVE        2
#define MSG_LEAVE_ACK    3    /* leader -> leaving node: removal committed */
#define MSG_GONE         4    /* a node stopping without leaving: its peers' status */
#define LEAVE_WAIT_MS    2000
#define OP_RETRY_MS      200

struct peer {
	char addr[CTL_ADDR_MAX];
	struct sockaddr_in sa;
	bool sa_ok;
	struct ctl_phi phi;
	uint64_t heartbeats;          /* real ones since the detector reset */
	uint64_t incarnation;
	uint64_t restart_log_ns;      /* its last "restarted" line */
	uint32_t restarts_unlogged;   /* restarts since then, not logged */
	uint64_t left_incarnation;    /* LEAVE seen for this incarnation */
	bool left;
	uint64_t gone_incarnation;    /* GONE seen for this incarnation */
	bool gone;
	bool suspected;               /* phi >= threshold at the last tick */
	uint64_t down_hint_ns;        /* lcores reported it down */
};

struct ctl_node {
	struct zb_config cfg;
	struct ctl_opts opts;
	uint16_t self;
	struct sockaddr_in self_sa;   /* advertised control address */
	struct sockaddr_in bind_sa;   /* [control] listen (may be 0.0.0.0) */
	char adv[CTL_ADDR_MAX];       /* advertised "ip:port": raft + heartbeats */
	uint64_t incarnation;
	struct ctl_phi_params phi_params;
	uint64_t hb_ns;

	uv_loop_t loop;
	uv_udp_t udp;
	uv_timer_t tick;
	uv_async_t wake;
	pthread_t thread;
	bool loop_ok, udp_ok, tick_ok, wake_ok, raft_inited, thread_ok;
	bool ran;                     /* the loop ran (own thread or ctl_node_run) */
	bool stop_req, leave_req;     /* under status_lock */
	bool closing;

	struct ctl_auth auth;
	struct ctl_tcp_auth *tcp;
	struct raft_io io;
	bool io_inited;
	/* raft_uv's own start and random, under ours (raft_io_start_fine,
	 * raft_io_random_ranked) */
	int (*uv_start)(struct raft_io *, unsigned, raft_io_tick_cb, raft_io_recv_cb);
	int (*uv_random)(struct raft_io *, int, int);
	int elect_rank;               /* the slot of the last draw */
	unsigned elect_voters;
	struct raft raft;
	struct raft_fsm fsm;
	struct ctl_state st;
	struct peer peers[CFG_MAX_NODES];
	struct sockaddr_in seeds[CFG_MAX_SEEDS];
	unsigned n_seeds;
	uint64_t next_hb_ns;
	int last_leader;

	/* leader's in-flight membership operations: at most one FSM command
	 * (join, leave: raft_apply) and one Raft configuration change (add,
	 * assign, remove), side by side (leader_step) */
	bool fsm_busy, cfg_busy;
	uint64_t op_next_ns;
	struct ctl_action op_fsm, op_cfg;
	struct raft_apply op_apply;
	/* a new leader's barrier (an entry of its term, Raft §8): it acts on
	 * the membership only once every entry before it is applied here */
	struct raft_barrier barrier;
	bool barrier_busy;
	raft_term barrier_term;       /* the term whose barrier is applied */
	uint64_t skipped_logged;      /* st.skipped already said in the log */
	struct raft_change op_change;

	/* graceful leave */
	bool leaving, leave_acked;
	uint64_t leave_deadline_ns;
	bool transferred;
	struct raft_transfer transfer;

	struct ctl__blobs *blobs;     /* ctl_blob_send (blob.c) */
	struct sockaddr_in cfg_sa[CFG_MAX_NODES];  /* [peer.N] control */
	bool cfg_sa_ok[CFG_MAX_NODES];

	struct ctl_ring *commands;
	struct ctl_ring *events[CFG_MAX_LCORES];
	unsigned n_events;
	uint64_t epoch;               /* atomic mirror of st.epoch */
	uint64_t convictions, events_dropped;

	/* rate-limited auth logging */
	uint64_t auth_log_ns[CTL_AUTH_NREASONS + 1];
	uint64_t auth_suppressed[CTL_AUTH_NREASONS + 1];

	pthread_mutex_t status_lock;
	struct ctl_status status;
	struct ctl_node *next_node;   /* nodes list for the metrics collector */
	void *http_metrics, *http_admin;
	uint8_t rxbuf[2048];
};

/* http.c */
int ctl__http_start(struct ctl_node *n, const char *listen, bool admin, void **out,
		    char *err, size_t errlen);
void ctl__http_stop(void *d);
void ctl__http_free(void *d);
void ctl__http_counts(void *d, uint64_t *refused, uint64_t *cut);
void ctl__collector_add(struct ctl_node *n);
void ctl__collector_remove(struct ctl_node *n);

static void logf_(struct ctl_node *n, int level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void logf_(struct ctl_node *n, int level, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	if (!n->opts.log)
		return;
	va_start(ap, fmt);
	int k = snprintf(buf, sizeof(buf), "control[%u]: ", n->self);
	vsnprintf(buf + k, sizeof(buf) - (size_t)k, fmt, ap);
	va_end(ap);
	n->opts.log(n->opts.log_arg, level, buf);
}

/* At most one line per second per reason; the rest are counted and the
 * count is reported with the next line. */
static void auth_log(struct ctl_node *n, unsigned reason, const char *what,
		     const char *from)
{
	uint64_t now = zb_now_ns();
	ZB_ASSERT(reason <= CTL_AUTH_NREASONS);
	if (n->auth_log_ns[reason] && now - n->auth_log_ns[reason] < 1000000000ull) {
		n->auth_suppressed[reason]++;
		return;
	}
	logf_(n, CTL_LOG_WARN, "rejected %s from %s (%llu similar suppressed)", what,
	      from, (unsigned long long)n->auth_suppressed[reason]);
	n->auth_log_ns[reason] = now;
	n->auth_suppressed[reason] = 0;
}

/* why: "ADDR (reason)" */
static void on_tcp_reject(void *arg, const char *why)
{
	auth_log(arg, CTL_AUTH_NREASONS, "raft connection", why);
}

static bool same_sa(const struct sockaddr_in *a, const struct sockaddr_in *b)
{
	return a->sin_addr.s_addr == b->sin_addr.s_addr && a->sin_port == b->sin_port;
}

static void peer_set_addr(struct peer *p, const char *addr)
{
	if (strcmp(p->addr, addr) == 0)
		return;
	snprintf(p->addr, sizeof(p->addr), "%s", addr);
	p->sa_ok = ctl__parse_ip4(addr, &p->sa) == 0;
}

static void peer_reset_detector(struct ctl_node *n, struct peer *p)
{
	int rc = ctl_phi_init(&p->phi, &n->phi_params);
	ZB_ASSERT(rc == 0);
	p->heartbeats = 0;
	p->suspected = false;
}

/* ---- events to the lcores ------------------------------------------------ */

static void publish(struct ctl_node *n, uint32_t type, int leader)
{
	struct ctl_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.type = type;
	ev.leader = leader < 0 ? UINT16_MAX : (uint16_t)leader;
	ev.epoch = n->st.epoch;
	ev.n_members = (uint16_t)n->st.n;
	memcpy(ev.ring, n->st.ring, sizeof(ev.ring));
	for (unsigned i = 0; i < n->n_events; i++)
		if (ctl_ring_enqueue(n->events[i], &ev) != 0)
			n->events_dropped++;
}

static void on_fsm_change(void *arg, const struct ctl_state *st)
{
	struct ctl_node *n = arg;

	__atomic_store_n(&n->epoch, st->epoch, __ATOMIC_RELEASE);
	for (uint32_t i = 0; i < st->n; i++)
		if (st->m[i].id != n->self)
			peer_set_addr(&n->peers[st->m[i].id], st->m[i].addr);
	publish(n, CTL_EV_EPOCH, n->last_leader);
	logf_(n, CTL_LOG_INFO, "epoch %llu: %u member(s)",
	      (unsigned long long)st->epoch, st->n);
}

/* ---- heartbeats ------------------------------------------------------------ */

static void udp_sent(uv_udp_send_t *req, int status)
{
	(void)status;
	free(req);
}

static void send_msg(struct ctl_node *n, const struct sockaddr_in *to,
		     uint8_t type, const uint8_t *payload, size_t len)
{
	struct {
		uv_udp_send_t req;
		uint8_t buf[CTL_MSG_MAX];
	} *s = malloc(sizeof(*s));
	if (!s)
		return;
	int k = ctl_auth_seal(&n->auth, type, payload, len, s->buf, sizeof(s->buf));
	ZB_ASSERT(k > 0);
	uv_buf_t b = uv_buf_init((char *)s->buf, (unsigned)k);
	if (uv_udp_send(&s->req, &n->udp, &b, 1, (const struct sockaddr *)to,
			udp_sent) != 0)
		free(s);
}

/* blob.c's way out: to, else the peer's learnt address, else its
 * [peer.N] control address. */
static bool blob_tx(void *arg, uint16_t peer, const struct sockaddr_in *to,
		    uint8_t type, const void *payload, size_t len)
{
	struct ctl_node *n = arg;

	ZB_ASSERT(n != NULL && peer < CFG_MAX_NODES);
	if (!to)
		to = n->peers[peer].sa_ok ? &n->peers[peer].sa
		     : n->cfg_sa_ok[peer] ? &n->cfg_sa[peer] : NULL;
	if (!to)
		return false;
	send_msg(n, to, type, payload, len);
	return true;
}

static size_t hb_payload(struct ctl_node *n, uint8_t *p, size_t cap)
{
	raft_id lid = 0;
	const char *laddr = NULL;
	size_t alen = strlen(n->adv), llen;

	raft_leader(&n->raft, &lid, &laddr);
	llen = laddr ? strlen(laddr) : 0;
	ZB_ASSERT(cap >= 28 + 2 + alen + llen);
	memcpy(p, &n->incarnation, 8);
	uint64_t term = n->raft.current_term;
	memcpy(p + 8, &term, 8);
	memcpy(p + 16, &n->st.epoch, 8);
	uint16_t leader = lid ? (uint16_t)(lid - 1) : UINT16_MAX;
	memcpy(p + 24, &leader, 2);
	p[26] = (uint8_t)alen;
	memcpy(p + 27, n->adv, alen);
	p[27 + alen] = (uint8_t)llen;
	memcpy(p + 28 + alen, laddr ? laddr : "", llen);
	return 28 + alen + llen;
}

static void send_heartbeats(struct ctl_node *n)
{
	uint8_t p[256];
	size_t len = hb_payload(n, p, sizeof(p));

	for (unsigned id = 0; id < CFG_MAX_NODES; id++)
		if (id != n->self && n->peers[id].sa_ok)
			send_msg(n, &n->peers[id].sa, MSG_HEARTBEAT, p, len);
	for (unsigned s = 0; s < n->n_seeds; s++) {
		bool known = false;
		for (unsigned id = 0; id < CFG_MAX_NODES && !known; id++)
			known = n->peers[id].sa_ok && same_sa(&n->peers[id].sa, &n->seeds[s]);
		if (!known)
			send_msg(n, &n->seeds[s], MSG_HEARTBEAT, p, len);
	}
}

static void on_heartbeat(struct ctl_node *n, uint16_t from, const uint8_t *p,
			 size_t len, uint64_t now)
{
	struct peer *pe = &n->peers[from];
	uint64_t inc;
	uint16_t leader;
	char addr[CTL_ADDR_MAX], laddr[CTL_ADDR_MAX];

	if (len < 28 || 27 + (size_t)p[26] >= len || p[26] >= CTL_ADDR_MAX)
		return;
	size_t alen = p[26], llen = p[27 + alen];
	if (len != 28 + alen + llen || llen >= CTL_ADDR_MAX)
		return;
	memcpy(&inc, p, 8);
	memcpy(&leader, p + 24, 2);
	memcpy(addr, p + 27, alen);
	addr[alen] = '\0';
	memcpy(laddr, p + 28 + alen, llen);
	laddr[llen] = '\0';
	peer_set_addr(pe, addr);
	/* A restarted node, or one we had convicted: start its history afresh
	 * so the silent gap does not inflate its mean and deviation. */
	if (inc != pe->incarnation || pe->suspected ||
	    (pe->phi.last_ns && ctl_phi_convicted(&pe->phi, now))) {
		/* one line a second per node: a peer (holding the key)
		 * that sends ever new incarnations must not flood the log */
		if (pe->incarnation && inc != pe->incarnation) {
			if (!pe->restart_log_ns ||
			    now - pe->restart_log_ns >= 1000000000ull) {
				if (pe->restarts_unlogged)
					logf_(n, CTL_LOG_INFO, "node %u restarted (and %u "
					      "times more in the last second, not logged)",
					      from, pe->restarts_unlogged);
				else
					logf_(n, CTL_LOG_INFO, "node %u restarted", from);
				pe->restart_log_ns = now;
				pe->restarts_unlogged = 0;
			} else {
				pe->restarts_unlogged++;
			}
		}
		pe->incarnation = inc;
		peer_reset_detector(n, pe);
	}
	if (pe->left && pe->left_incarnation != inc)
		pe->left = false;
	if (pe->gone && pe->gone_incarnation != inc)
		pe->gone = false;
	ctl_phi_heartbeat(&pe->phi, now);
	pe->heartbeats++;
	pe->down_hint_ns = 0;
	/* Learn the leader's address so that a joiner reaches it. */
	if (leader < CFG_MAX_NODES && leader != n->self && llen &&
	    !n->peers[leader].sa_ok)
		peer_set_addr(&n->peers[leader], laddr);
}

static void on_alloc(uv_handle_t *h, size_t sug, uv_buf_t *buf)
{
	struct ctl_node *n = h->data;
	(void)sug;
	buf->base = (char *)n->rxbuf;
	buf->len = sizeof(n->rxbuf);
}

static void on_udp(uv_udp_t *h, ssize_t nread, const uv_buf_t *buf,
		   const struct sockaddr *from, unsigned flags)
{
	struct ctl_node *n = h->data;
	uint8_t type;
	uint16_t sender;
	const uint8_t *payload;
	size_t plen;
	enum ctl_auth_reason why;
	char src[64] = "?";
	(void)flags;

	if (nread <= 0 || !from || n->closing)
		return;
	if (from->sa_family == AF_INET)
		uv_ip4_name((const struct sockaddr_in *)from, src, sizeof(src));
	if (ctl_auth_open(&n->auth, (const uint8_t *)buf->base, (size_t)nread,
			  &type, &sender, &payload, &plen, &why) != 0) {
		char what[64];
		snprintf(what, sizeof(what), "control message (%s)",
			 ctl_auth_reason_name(why));
		auth_log(n, why, what, src);
		return;
	}
	uint64_t now = zb_now_ns();
	if (type == MSG_HEARTBEAT) {
		on_heartbeat(n, sender, payload, plen, now);
	} else if (type == MSG_LEAVE && plen == 8) {
		struct peer *pe = &n->peers[sender];
		memcpy(&pe->left_incarnation, payload, 8);
		if (!pe->left)
			logf_(n, CTL_LOG_INFO, "node %u is leaving", sender);
		pe->left = true;
	} else if (type == MSG_GONE && plen == 8) {
		struct peer *pe = &n->peers[sender];
		uint64_t inc;
		memcpy(&inc, payload, 8);
		/* an earlier life's GONE (late, or replayed) says nothing of
		 * the incarnation whose heartbeats we hear now */
		if (pe->incarnation && inc != pe->incarnation)
			return;
		pe->gone_incarnation = inc;
		if (!pe->gone)
			logf_(n, CTL_LOG_INFO, "node %u stopped (without leaving the cluster)",
			      sender);
		pe->gone = true;
	} else if (type == MSG_LEAVE_ACK && plen == 8 && n->leaving &&
		   memcmp(payload, &n->incarnation, 8) == 0) {
		n->leave_acked = true;
	} else if (type == CTL__MSG_BLOB || type == CTL__MSG_BLOB_ACK) {
		ctl__blobs_on_msg(n->blobs, type, sender,
				  from->sa_family == AF_INET ?
				  (const struct sockaddr_in *)from : NULL, payload, plen);
	}
}

/* ---- leader: membership operations --------------------------------------- */

static void op_done(struct ctl_node *n, bool *busy, const struct ctl_action *op,
		    int status)
{
	*busy = false;
	if (status != 0) {
		logf_(n, CTL_LOG_WARN, "%s node %u failed: %s", ctl__action_name(op->type),
		      op->id, raft_strerror(status));
		n->op_next_ns = zb_now_ns() + OP_RETRY_MS * 1000000ull;
	}
}

static void on_apply_done(struct raft_apply *req, int status, void *result)
{
	struct ctl_node *n = req->data;
	struct peer *p = &n->peers[n->op_fsm.id];
	(void)result;
	/* counted once committed and applied, not when proposed (a proposal
	 * lost with the leadership is proposed again) */
	if (status == 0 && n->op_fsm.type == CTL_ACT_LEAVE &&
	    n->op_fsm.reason == CTL_LEAVE_CONVICTED)
		n->convictions++;
	/* Tell a gracefully leaving node that its removal is committed: it
	 * stops replicating once raft drops it, so it could not see it. */
	if (status == 0 && n->op_fsm.type == CTL_ACT_LEAVE &&
	    n->op_fsm.reason == CTL_LEAVE_GRACEFUL && p->sa_ok)
		send_msg(n, &p->sa, MSG_LEAVE_ACK, (const uint8_t *)&p->left_incarnation, 8);
	op_done(n, &n->fsm_busy, &n->op_fsm, status);
}

static void on_barrier_done(struct raft_barrier *req, int status)
{
	struct ctl_node *n = req->data;
	n->barrier_busy = false;
	if (status == 0)
		n->barrier_term = n->raft.current_term;
}

static void on_change_done(struct raft_change *req, int status)
{
	struct ctl_node *n = req->data;
	op_done(n, &n->cfg_busy, &n->op_cfg, status);
}

static void build_liveness(struct ctl_node *n, struct ctl_liveness *lv, uint64_t now)
{
	memset(lv, 0, sizeof(*lv));
	for (unsigned id = 0; id < CFG_MAX_NODES; id++) {
		struct peer *p = &n->peers[id];
		if (id == n->self)
			continue;
		double phi = ctl_phi_value(&p->phi, now);
		lv->convicted[id] = p->suspected;
		lv->alive[id] = p->heartbeats >= 3 && phi < n->phi_params.threshold / 2;
		lv->left[id] = p->left;
		snprintf(lv->addr[id], CTL_ADDR_MAX, "%s", p->addr);
	}
}

/* One membership step (ctl__reconcile's next action). An FSM command and a
 * configuration change may be in flight side by side: libraft refuses a
 * second change while one is pending, not an entry, and a change can pend
 * for seconds — the promotion of a node that stopped answering while it
 * caught up ends only when libraft gives it up (~5 s: "no connection").
 * Until 2026-11-28 the leader ran one operation at a time, and a member
 * convicted meanwhile left the FSM (a new epoch) only after that. A step
 * whose kind is already in flight waits: the action reconcile names first
 * is then usually that one, not yet applied. */
static void leader_step(struct ctl_node *n, uint64_t now)
{
	struct ctl_liveness lv;
	struct ctl_action act;
	struct raft_buffer buf;
	int rc = 0;

	if ((n->fsm_busy && n->cfg_busy) || now < n->op_next_ns || n->leaving)
		return;
	/* libraft 0.15 appends no entry of its own when a leader is elected:
	 * entries of earlier terms it holds may be committed but not yet
	 * applied here, so its FSM may still show a member that has left.
	 * Reconcile only once a barrier of this term is applied. */
	if (n->barrier_term != n->raft.current_term) {
		if (n->barrier_busy)
			return;
		n->barrier.data = n;
		rc = raft_barrier(&n->raft, &n->barrier, on_barrier_done);
		if (rc == 0)
			n->barrier_busy = true;
		else
			n->op_next_ns = now + OP_RETRY_MS * 1000000ull;
		return;
	}
	build_liveness(n, &lv, now);
	ctl__reconcile(&n->raft, &n->st, n->self, n->adv, &lv, &act);
	if (act.type == CTL_ACT_NONE)
		return;
	bool fsm = act.type == CTL_ACT_JOIN || act.type == CTL_ACT_LEAVE;
	bool *busy = fsm ? &n->fsm_busy : &n->cfg_busy;
	if (*busy)
		return;
	struct ctl_action *op = fsm ? &n->op_fsm : &n->op_cfg;
	*op = act;
	raft_id rid = (raft_id)op->id + 1;
	n->op_apply.data = n;
	n->op_change.data = n;
	switch (op->type) {
	case CTL_ACT_JOIN:
	case CTL_ACT_LEAVE:
		rc = ctl_fsm_encode(&buf, op->type == CTL_ACT_JOIN ? CTL_CMD_JOIN
								   : CTL_CMD_LEAVE,
				    op->id, op->addr, op->reason);
		if (rc != 0)
			break;
		rc = raft_apply(&n->raft, &n->op_apply, &buf, 1, on_apply_done);
		if (rc != 0)
			raft_free(buf.base);
		break;
	case CTL_ACT_RAFT_ADD:
		rc = raft_add(&n->raft, &n->op_change, rid, op->addr, on_change_done);
		break;
	case CTL_ACT_RAFT_ASSIGN:
		rc = raft_assign(&n->raft, &n->op_change, rid, RAFT_VOTER, on_change_done);
		break;
	case CTL_ACT_RAFT_REMOVE:
		rc = raft_remove(&n->raft, &n->op_change, rid, on_change_done);
		break;
	default:
		break;
	}
	logf_(n, rc ? CTL_LOG_WARN : CTL_LOG_INFO, "leader: %s node %u%s%s",
	      ctl__action_name(op->type), op->id, rc ? ": " : "",
	      rc ? raft_strerror(rc) : "");
	if (rc == 0)
		*busy = true;
	else
		n->op_next_ns = now + OP_RETRY_MS * 1000000ull;
}

/* ---- the tick -------------------------------------------------------------- */

static const char *state_name(int s)
{
	switch (s) {
	case RAFT_FOLLOWER: return "follower";
	case RAFT_CANDIDATE: return "candidate";
	case RAFT_LEADER: return "leader";
	default: return "unavailable";
	}
}

static void update_status(struct ctl_node *n, uint64_t now)
{
	struct ctl_status *s = &n->status;
	struct ctl_tcp_auth_stats ts;
	raft_id lid = 0;
	const char *laddr;

	raft_leader(&n->raft, &lid, &laddr);
	ctl__tcp_auth_stats(n->tcp, &ts);
	pthread_mutex_lock(&n->status_lock);
	s->self = n->self;
	snprintf(s->addr, sizeof(s->addr), "%s", n->adv);
	s->raft_state = state_name(raft_state(&n->raft));
	s->leader = lid ? (int)lid - 1 : -1;
	s->term = n->raft.current_term;
	s->commit = n->raft.commit_index;
	s->applied = raft_last_applied(&n->raft);
	s->last_index = raft_last_index(&n->raft);
	s->st = n->st;
	s->n_peers = 0;
	for (unsigned id = 0; id < CFG_MAX_NODES; id++) {
		struct peer *p = &n->peers[id];
		if (id == n->self || (!p->addr[0] && !p->heartbeats))
			continue;
		struct ctl_peer_status *ps = &s->peers[s->n_peers++];
		ps->id = (uint16_t)id;
		snprintf(ps->addr, sizeof(ps->addr), "%s", p->addr);
		ps->phi = ctl_phi_value(&p->phi, now);
		ps->member = ctl_state_has(&n->st, (uint16_t)id);
		ps->convicted = p->suspected;
		ps->heard = p->heartbeats > 0;
		ps->gone = p->gone || p->left;
		ps->heartbeats = p->phi.arrivals;
		ps->last_heard_ms = p->phi.last_ns ? (double)(now - p->phi.last_ns) / 1e6 : -1;
	}
	s->auth_ok = n->auth.accepted;
	memcpy(s->auth_rejected, n->auth.rejected, sizeof(s->auth_rejected));
	s->handshake_ok = ts.ok;
	s->handshake_rejected = ts.rejected;
	s->convictions = n->convictions;
	s->events_dropped = n->events_dropped;
	s->http_refused = s->http_cut = 0;
	ctl__http_counts(n->http_admin, &s->http_refused, &s->http_cut);
	ctl__http_counts(n->http_metrics, &s->http_refused, &s->http_cut);
	ctl__blobs_stats(n->blobs, &s->blobs);
	pthread_mutex_unlock(&n->status_lock);
}

static void drain_commands(struct ctl_node *n, uint64_t now)
{
	struct ctl_command c;

	for (unsigned i = 0; i < 64 && ctl_ring_dequeue(n->commands, &c) == 0; i++) {
		if (c.type == CTL_REQ_PEER_DOWN && c.node < CFG_MAX_NODES &&
		    c.node != n->self)
			n->peers[c.node].down_hint_ns = now;
	}
}

static void update_suspicion(struct ctl_node *n, uint64_t now)
{
	for (unsigned id = 0; id < CFG_MAX_NODES; id++) {
		struct peer *p = &n->peers[id];
		if (id == n->self)
			continue;
		/* Arm the detector for members never heard from, so that a
		 * member that is already dead gets convicted too. */
		if (!p->phi.last_ns && ctl_state_has(&n->st, (uint16_t)id))
			ctl_phi_heartbeat(&p->phi, now);
		bool s = p->phi.last_ns && ctl_phi_convicted(&p->phi, now);
		/* The transport said it is gone and nothing came since. */
		if (p->down_hint_ns && now - p->down_hint_ns > 2 * n->hb_ns)
			s = true;
		if (s && !p->suspected)
			logf_(n, CTL_LOG_INFO, "node %u suspected (phi %.1f)", id,
			      ctl_phi_value(&p->phi, now));
		p->suspected = s;
	}
}

static void leave_step(struct ctl_node *n, uint64_t now);

/* libraft draws the election timeout when the node becomes follower or
 * candidate, not at each heartbeat: a draw made before the voters changed
 * (a node joined or was removed) is from a slot of the old configuration
 * and may meet another node's. So the follower draws again, from its new
 * slot, when its rank or the number of voters changes. */
static void election_slot_check(struct ctl_node *n)
{
	unsigned voters;
	int rank = ctl__voter_rank(&n->raft.configuration, n->raft.id, &voters);

	if (rank == n->elect_rank && voters == n->elect_voters)
		return;
	n->elect_rank = rank;
	n->elect_voters = voters;
	if (raft_state(&n->raft) == RAFT_FOLLOWER)
		raft_set_election_timeout(&n->raft, n->cfg.control.election_timeout_ms);
}

static void on_tick(uv_timer_t *t)
{
	struct ctl_node *n = t->data;
	uint64_t now = zb_now_ns();

	if (n->closing)
		return;
	drain_commands(n, now);
	if (now >= n->next_hb_ns) {
		send_heartbeats(n);
		n->next_hb_ns += n->hb_ns;
		if (n->next_hb_ns < now)
			n->next_hb_ns = now + n->hb_ns;
	}
	update_suspicion(n, now);
	if (n->st.skipped != n->skipped_logged) {
		logf_(n, CTL_LOG_WARN, "%llu Raft command(s) not understood, applied "
		      "as no-ops (a newer zbmd in the cluster?); %llu in all",
		      (unsigned long long)(n->st.skipped - n->skipped_logged),
		      (unsigned long long)n->st.skipped);
		n->skipped_logged = n->st.skipped;
	}
	ctl__blobs_tick(n->blobs, now);
	election_slot_check(n);
	raft_id lid = 0;
	const char *laddr;
	raft_leader(&n->raft, &lid, &laddr);
	int leader = lid ? (int)lid - 1 : -1;
	if (leader != n->last_leader) {
		n->last_leader = leader;
		publish(n, CTL_EV_LEADER, leader);
		logf_(n, CTL_LOG_INFO, "leader is %d (term %llu)", leader,
		      (unsigned long long)n->raft.current_term);
	}
	if (n->leaving)
		leave_step(n, now);
	else if (raft_state(&n->raft) == RAFT_LEADER)
		leader_step(n, now);
	update_status(n, now);
}

/* ---- shutdown ------------------------------------------------------------ */

static void handle_closed(uv_handle_t *h)
{
	(void)h;
}

static void close_handles(struct ctl_node *n)
{
	if (n->tick_ok)
		uv_close((uv_handle_t *)&n->tick, handle_closed);
	if (n->udp_ok)
		uv_close((uv_handle_t *)&n->udp, handle_closed);
	if (n->wake_ok)
		uv_close((uv_handle_t *)&n->wake, handle_closed);
	n->tick_ok = n->udp_ok = n->wake_ok = false;
}

static void on_raft_closed(struct raft *r)
{
	struct ctl_node *n = r->data;
	raft_uv_close(&n->io);
	n->io_inited = false;
	close_handles(n);
}

/* Start closing everything; the loop then runs until all handles closed. */
static void begin_close(struct ctl_node *n)
{
	if (n->closing)
		return;
	n->closing = true;
	if (n->raft_inited)
		raft_close(&n->raft, on_raft_closed);
	else
		close_handles(n);
}

static void on_transfer(struct raft_transfer *req)
{
	(void)req;
}

/* LEAVE or GONE: this incarnation, to every peer with an address */
static void send_to_peers(struct ctl_node *n, uint8_t type)
{
	uint8_t p[8];

	ZB_ASSERT(type == MSG_LEAVE || type == MSG_GONE);
	memcpy(p, &n->incarnation, 8);
	for (unsigned id = 0; id < CFG_MAX_NODES; id++)
		if (id != n->self && n->peers[id].sa_ok)
			send_msg(n, &n->peers[id].sa, type, p, sizeof(p));
}

static void leave_step(struct ctl_node *n, uint64_t now)
{
	/* Hand leadership over first so that someone can remove us. */
	if (raft_state(&n->raft) == RAFT_LEADER && !n->transferred && n->st.n > 1) {
		n->transferred = true;
		if (raft_transfer(&n->raft, &n->transfer, 0, on_transfer) != 0)
			n->transferred = false;
	}
	send_to_peers(n, MSG_LEAVE);
	bool gone = n->leave_acked || !ctl_state_has(&n->st, n->self);
	if (gone || now >= n->leave_deadline_ns || n->st.n <= 1) {
		logf_(n, CTL_LOG_INFO, "left the cluster%s",
		      gone || n->st.n <= 1 ? "" : " (not confirmed)");
		begin_close(n);
	}
}

static void on_wake(uv_async_t *a)
{
	struct ctl_node *n = a->data;
	bool stop, leave;

	pthread_mutex_lock(&n->status_lock);
	stop = n->stop_req;
	leave = n->leave_req;
	pthread_mutex_unlock(&n->status_lock);
	if (!stop || n->closing || n->leaving)
		return;
	if (leave && n->raft_inited && ctl_state_has(&n->st, n->self)) {
		n->leaving = true;
		n->leave_deadline_ns = zb_now_ns() + LEAVE_WAIT_MS * 1000000ull;
		return;
	}
	/* Stopping without leaving (a benchmark's node whose run is over or
	 * failed): the membership stays as it is, but the peers' status says
	 * so at once, instead of phi a second or more later (a node still
	 * joining fails its join on it: dataplane/ring_watch.c). One datagram
	 * each, sent now, before the socket closes; a lost one costs only the
	 * phi detector's time. */
	if (n->udp_ok)
		send_to_peers(n, MSG_GONE);
	begin_close(n);
}

static void *loop_main(void *arg)
{
	struct ctl_node *n = arg;
	sigset_t set;

	/* A peer closing a raft connection must give EPIPE, not kill the
	 * process: SIGPIPE is per-thread for a failing write. */
	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	uv_run(&n->loop, UV_RUN_DEFAULT);
	return NULL;
}

/* ---- start / stop ---------------------------------------------------------- */

/* mkdir -p: missing parents are created 0700 too. 0 or -errno. */
static int mkdir_p(const char *path)
{
	char buf[CFG_STR];
	size_t len = strlen(path);

	if (len == 0 || len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0700) != 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, 0700) != 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* libraft ticks every raft_heartbeat_ms (100 by default) and checks its
 * timers only then, so an election timeout fired up to a tick late. It
 * reads the time at each tick and sends heartbeats when they are due, not
 * per tick: ticking every RAFT_TICK_MS costs nothing more on the wire. */
#define RAFT_TICK_MS 10

static struct ctl_node *io_node(struct raft_io *io)
{
	return (struct ctl_node *)(void *)((char *)io - offsetof(struct ctl_node, io));
}

static int raft_io_start_fine(struct raft_io *io, unsigned msecs,
			      raft_io_tick_cb tick, raft_io_recv_cb recv)
{
	return io_node(io)->uv_start(io, msecs < RAFT_TICK_MS ? msecs : RAFT_TICK_MS,
				     tick, recv);
}

/* libraft draws its randomized election timeout here (and nothing else):
 * from this node's slot among the voters (elect.c) */
static int raft_io_random_ranked(struct raft_io *io, int min, int max)
{
	struct ctl_node *n = io_node(io);
	unsigned voters;
	int rank = ctl__voter_rank(&n->raft.configuration, n->raft.id, &voters);

	return ctl__election_timeout(rank, voters, min, max,
				     (unsigned)n->uv_random(io, 0, 1 << 30));
}
static int setup_raft(struct ctl_node *n, char *err, size_t errlen)
{
	const struct zb_config *c = &n->cfg;
	raft_id id = (raft_id)n->self + 1;
	int rc;

	rc = mkdir_p(c->control.raft_dir);
	if (rc != 0) {
		snprintf(err, errlen, "raft_dir %s: %s", c->control.raft_dir, strerror(-rc));
		return rc;
	}
	rc = ctl__tcp_auth_create(&n->tcp, &n->loop, c->cluster.id, n->auth.key,
				  on_tcp_reject, n);
	if (rc != 0) {
		snprintf(err, errlen, "raft transport: %s", zb_strerror(rc));
		return rc;
	}
	if (strcmp(n->adv, c->control.listen) != 0 &&
	    ctl__tcp_auth_set_bind_address(n->tcp, c->control.listen) != 0) {
		snprintf(err, errlen, "raft bind address %s rejected", c->control.listen);
		return ZB_ERR_CONFIG;
	}
	rc = raft_uv_init(&n->io, &n->loop, c->control.raft_dir,
			  ctl__tcp_auth_iface(n->tcp));
	if (rc != 0) {
		snprintf(err, errlen, "raft_uv_init(%s): %s", c->control.raft_dir,
			 n->io.errmsg[0] ? n->io.errmsg : raft_strerror(rc));
		return -EIO;
	}
	n->io_inited = true;
	n->uv_start = n->io.start;
	n->uv_random = n->io.random;
	n->io.start = raft_io_start_fine;
	n->io.random = raft_io_random_ranked;
	raft_uv_set_segment_size(&n->io, 512 * 1024);
	raft_uv_set_connect_retry_delay(&n->io, 200);
	raft_uv_set_snapshot_compression(&n->io, false);
	ctl_fsm_init(&n->fsm, &n->st, on_fsm_change, n);
	rc = raft_init(&n->raft, &n->io, &n->fsm, id, n->adv);
	if (rc != 0) {
		snprintf(err, errlen, "raft_init: %s", raft_errmsg(&n->raft));
		return -EIO;
	}
	n->raft_inited = true;
	n->raft.data = n;
	n->elect_rank = -2;   /* none yet: the first tick draws */
	raft_set_election_timeout(&n->raft, c->control.election_timeout_ms);
	raft_set_heartbeat_timeout(&n->raft, c->control.raft_heartbeat_ms);
	raft_set_snapshot_threshold(&n->raft, c->control.snapshot_threshold);
	raft_set_snapshot_trailing(&n->raft, c->control.snapshot_threshold / 2 + 1);
	raft_set_pre_vote(&n->raft, true);
	/* The first seed bootstraps a one-node cluster; everyone else joins by
	 * heartbeating and is added by the leader. A non-pristine raft_dir
	 * keeps its configuration (RAFT_CANTBOOTSTRAP is expected then). */
	bool first = n->n_seeds == 0 || same_sa(&n->seeds[0], &n->self_sa) ||
		     c->cluster.seed_count == 0;
	if (c->cluster.seed_count > 0 && !first) {
		struct sockaddr_in s0;
		first = ctl__parse_ip4(c->cluster.seeds[0], &s0) == 0 && same_sa(&s0, &n->self_sa);
	}
	if (first) {
		struct raft_configuration conf;
		raft_configuration_init(&conf);
		rc = raft_configuration_add(&conf, id, n->adv, RAFT_VOTER);
		if (rc == 0)
			rc = raft_bootstrap(&n->raft, &conf);
		raft_configuration_close(&conf);
		if (rc != 0 && rc != RAFT_CANTBOOTSTRAP) {
			snprintf(err, errlen, "raft_bootstrap: %s", raft_strerror(rc));
			return -EIO;
		}
	}
	rc = raft_start(&n->raft);
	if (rc != 0) {
		snprintf(err, errlen, "raft_start: %s", raft_errmsg(&n->raft));
		return -EIO;
	}
	return 0;
}

static int setup_net(struct ctl_node *n, char *err, size_t errlen)
{
	int rc;

	if (uv_loop_init(&n->loop) != 0) {
		snprintf(err, errlen, "uv_loop_init failed");
		return -ENOMEM;
	}
	n->loop_ok = true;
	uv_udp_init(&n->loop, &n->udp);
	n->udp_ok = true;
	n->udp.data = n;
	rc = uv_udp_bind(&n->udp, (const struct sockaddr *)&n->bind_sa, 0);
	if (rc == 0)
		rc = uv_udp_recv_start(&n->udp, on_alloc, on_udp);
	if (rc != 0) {
		snprintf(err, errlen, "control listen %s (udp): %s",
			 n->cfg.control.listen, uv_strerror(rc));
		return rc;
	}
	uv_timer_init(&n->loop, &n->tick);
	n->tick_ok = true;
	n->tick.data = n;
	uv_async_init(&n->loop, &n->wake, on_wake);
	n->wake_ok = true;
	n->wake.data = n;
	return 0;
}

static int check_config(const struct zb_config *c, struct ctl_node *n,
			char *err, size_t errlen)
{
	if (c->node.id >= CFG_MAX_NODES) {
		snprintf(err, errlen, "[node] id %u out of range", c->node.id);
		return ZB_ERR_CONFIG;
	}
	/* Advertise [control] listen, or [peer.<self>] control when listen is
	 * the wildcard address. */
	if (ctl__parse_ip4(c->control.listen, &n->bind_sa) != 0) {
		snprintf(err, errlen, "[control] listen '%s' is not ip:port",
			 c->control.listen);
		return ZB_ERR_CONFIG;
	}
	const char *adv = c->control.listen;
	if (n->bind_sa.sin_addr.s_addr == htonl(INADDR_ANY))
		adv = c->peers[c->node.id].present ? c->peers[c->node.id].control : "";
	if (ctl__parse_ip4(adv, &n->self_sa) != 0 || strlen(adv) >= CTL_ADDR_MAX ||
	    n->self_sa.sin_addr.s_addr == htonl(INADDR_ANY) ||
	    n->self_sa.sin_port != n->bind_sa.sin_port) {
		snprintf(err, errlen, "[control] listen '%s' is a wildcard and "
			 "[peer.%u] control gives no concrete ip with the same port",
			 c->control.listen, c->node.id);
		return ZB_ERR_CONFIG;
	}
	snprintf(n->adv, sizeof(n->adv), "%s", adv);
	if (c->control.heartbeat_ms == 0 || !c->control.raft_dir[0]) {
		snprintf(err, errlen, "[control] heartbeat_ms and raft_dir are required");
		return ZB_ERR_CONFIG;
	}
	if (!c->cluster.psk_file[0] && c->cluster.seed_count > 0) {
		snprintf(err, errlen, "[cluster] psk_file is required when [cluster] "
			 "seeds lists other nodes (control messages are authenticated)");
		return ZB_ERR_CONFIG;
	}
	for (unsigned i = 0; i < c->cluster.seed_count && i < CFG_MAX_SEEDS; i++) {
		if (ctl__parse_ip4(c->cluster.seeds[i], &n->seeds[n->n_seeds]) != 0) {
			snprintf(err, errlen, "[cluster] seeds: '%s' is not ip:port",
				 c->cluster.seeds[i]);
			return ZB_ERR_CONFIG;
		}
		if (!same_sa(&n->seeds[n->n_seeds], &n->self_sa))
			n->n_seeds++;
	}
	ctl_phi_params_from_config(c, &n->phi_params);
	struct ctl_phi tmp;
	if (ctl_phi_init(&tmp, &n->phi_params) != 0) {
		snprintf(err, errlen, "[control] phi parameters out of range");
		return ZB_ERR_CONFIG;
	}
	return 0;
}

static void node_free(struct ctl_node *n)
{
	if (n->loop_ok) {
		begin_close(n);
		uv_run(&n->loop, UV_RUN_DEFAULT);
		if (n->io_inited)
			raft_uv_close(&n->io);
		ctl__tcp_auth_free(n->tcp);
		uv_loop_close(&n->loop);
	}
	/* stopped before (no request reaches the node); the loop read their
	 * counters until it ended */
	ctl__http_free(n->http_admin);
	ctl__http_free(n->http_metrics);
	n->http_admin = n->http_metrics = NULL;
	ctl_fsm_close(&n->fsm);
	for (unsigned i = 0; i < n->n_events; i++)
		ctl_ring_free(n->events[i]);
	ctl_ring_free(n->commands);
	ctl__blobs_free(n->blobs);
	pthread_mutex_destroy(&n->status_lock);
	sodium_memzero(&n->auth, sizeof(n->auth));
	free(n);
}

int ctl_node_create(const struct zb_config *cfg, const struct ctl_opts *opts,
		    struct ctl_node **out, char *err, size_t errlen)
{
	static const struct ctl_opts none;
	struct ctl_node *n;
	uint8_t key[CTL_KEY_BYTES];
	struct timespec ts;
	int rc;

	ZB_ASSERT(cfg != NULL && out != NULL);
	opts = opts ? opts : &none;
	if (opts->event_consumers > CFG_MAX_LCORES) {
		snprintf(err, errlen, "too many event consumers");
		return -EINVAL;
	}
	n = calloc(1, sizeof(*n));
	if (!n) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	pthread_mutex_init(&n->status_lock, NULL);
	n->cfg = *cfg;
	n->opts = *opts;
	n->self = cfg->node.id;
	n->last_leader = -1;
	rc = check_config(cfg, n, err, errlen);
	if (rc != 0)
		goto fail;
	/* A node without seeds is a cluster of one: with no psk_file it uses a
	 * random key, so nothing can join it. */
	if (cfg->cluster.psk_file[0]) {
		rc = ctl_auth_load_key(cfg->cluster.psk_file, key, err, errlen);
		if (rc != 0)
			goto fail;
	} else {
		if (sodium_init() < 0) {
			rc = -ENOSYS;
			snprintf(err, errlen, "libsodium failed to initialise");
			goto fail;
		}
		randombytes_buf(key, sizeof(key));
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	n->incarnation = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	ctl_auth_init(&n->auth, cfg->cluster.id, n->self, key, n->incarnation);
	sodium_memzero(key, sizeof(key));
	n->hb_ns = (uint64_t)cfg->control.heartbeat_ms * 1000000ull;
	for (unsigned id = 0; id < CFG_MAX_NODES; id++)
		peer_reset_detector(n, &n->peers[id]);
	rc = ctl_ring_create(&n->commands, opts->command_ring_size ? opts->command_ring_size : 256,
			     sizeof(struct ctl_command));
	for (unsigned i = 0; rc == 0 && i < opts->event_consumers; i++, n->n_events++)
		rc = ctl_ring_create(&n->events[i], opts->event_ring_size ? opts->event_ring_size : 64,
				     sizeof(struct ctl_event));
	if (rc == 0)
		rc = ctl__blobs_create(&n->blobs, n->self, n->incarnation, opts, blob_tx, n);
	if (rc != 0) {
		snprintf(err, errlen, "event/command/blob rings: %s", zb_strerror(rc));
		goto fail;
	}
	for (unsigned id = 0; id < CFG_MAX_NODES; id++)
		n->cfg_sa_ok[id] = id != n->self && cfg->peers[id].present &&
				   cfg->peers[id].control[0] &&
				   ctl__parse_ip4(cfg->peers[id].control, &n->cfg_sa[id]) == 0;
	rc = setup_net(n, err, errlen);
	if (rc == 0)
		rc = setup_raft(n, err, errlen);
	if (rc != 0)
		goto fail;
	update_status(n, zb_now_ns());
	if (cfg->metrics.listen[0] &&
	    (rc = ctl__http_start(n, cfg->metrics.listen, false, &n->http_metrics, err, errlen)) != 0)
		goto fail;
	if (cfg->control.admin_listen[0] &&
	    (rc = ctl__http_start(n, cfg->control.admin_listen, true, &n->http_admin, err, errlen)) != 0)
		goto fail_http;
	ctl__collector_add(n);
	n->next_hb_ns = zb_now_ns();
	uv_timer_start(&n->tick, on_tick, TICK_MS, TICK_MS);
	logf_(n, CTL_LOG_INFO, "started on %s (cluster %u)", n->adv,
	      cfg->cluster.id);
	if (cfg->control.admin_listen[0] && strncmp(cfg->control.admin_listen, "127.", 4))
		logf_(n, CTL_LOG_WARN, "the admin API listens on %s, not on loopback: its "
		      "status (members, their addresses) is open to that network",
		      cfg->control.admin_listen);
	if (!cfg->cluster.psk_file[0])
		logf_(n, CTL_LOG_WARN, "no [cluster] psk_file: single-node cluster "
		      "with a random key, no other node can join");
	*out = n;
	return 0;
fail_http:
	ctl__http_stop(n->http_admin);
	ctl__http_stop(n->http_metrics);
fail:
	node_free(n);
	return rc;
}

int ctl_node_run(struct ctl_node *n)
{
	ZB_ASSERT(n != NULL);
	ZB_ASSERT(!n->ran);
	n->ran = true;
	loop_main(n);
	return 0;
}

void ctl_node_request_stop(struct ctl_node *n, bool leave)
{
	ZB_ASSERT(n != NULL);
	pthread_mutex_lock(&n->status_lock);
	n->stop_req = true;
	n->leave_req = n->leave_req || leave;
	pthread_mutex_unlock(&n->status_lock);
	uv_async_send(&n->wake);
}

void ctl_node_destroy(struct ctl_node *n)
{
	if (!n)
		return;
	/* No request can reach the node once the servers are gone. */
	ctl__http_stop(n->http_admin);
	ctl__http_stop(n->http_metrics);
	ctl__collector_remove(n);
	if (n->thread_ok) {
		ctl_node_request_stop(n, false);
		pthread_join(n->thread, NULL);
		n->thread_ok = false;
	}
	node_free(n);
}

int ctl_node_start(const struct zb_config *cfg, const struct ctl_opts *opts,
		   struct ctl_node **out, char *err, size_t errlen)
{
	struct ctl_node *n;
	int rc = ctl_node_create(cfg, opts, &n, err, errlen);

	if (rc != 0)
		return rc;
	n->ran = true;
	rc = pthread_create(&n->thread, NULL, loop_main, n);
	if (rc != 0) {
		snprintf(err, errlen, "pthread_create: %s", strerror(rc));
		n->ran = false;
		ctl_node_destroy(n);
		return -rc;
	}
	n->thread_ok = true;
	*out = n;
	return 0;
}

void ctl_node_stop(struct ctl_node *n, bool leave)
{
	if (!n)
		return;
	ZB_ASSERT(n->thread_ok);
	ctl__http_stop(n->http_admin);
	ctl__http_stop(n->http_metrics);
	ctl__collector_remove(n);
	ctl_node_request_stop(n, leave);
	pthread_join(n->thread, NULL);
	n->thread_ok = false;
	node_free(n);
}

struct ctl_ring *ctl_node_events(struct ctl_node *n, unsigned consumer)
{
	ZB_ASSERT(n != NULL);
	return consumer < n->n_events ? n->events[consumer] : NULL;
}

struct ctl_ring *ctl_node_commands(struct ctl_node *n)
{
	ZB_ASSERT(n != NULL);
	return n->commands;
}

uint64_t ctl_node_epoch(const struct ctl_node *n)
{
	return __atomic_load_n(&n->epoch, __ATOMIC_ACQUIRE);
}

int ctl_node_status(struct ctl_node *n, struct ctl_status *out)
{
	ZB_ASSERT(n != NULL && out != NULL);
	pthread_mutex_lock(&n->status_lock);
	*out = n->status;
	pthread_mutex_unlock(&n->status_lock);
	return 0;
}

int ctl_blob_send(struct ctl_node *n, uint16_t peer, uint8_t kind,
		  const void *blob, size_t len)
{
	if (!n)
		return -EINVAL;
	ZB_ASSERT(n->blobs != NULL);
	return ctl__blobs_enqueue(n->blobs, peer, kind, blob, len);
}

int ctl_blob_handle(struct ctl_node *n, uint8_t kind, ctl_blob_fn fn, void *arg)
{
	if (!n)
		return -EINVAL;
	ZB_ASSERT(n->blobs != NULL);
	return ctl__blobs_handle(n->blobs, kind, fn, arg);
}

int ctl_blob_on_result(struct ctl_node *n, uint8_t kind, ctl_blob_result_fn fn, void *arg)
{
	if (!n)
		return -EINVAL;
	ZB_ASSERT(n->blobs != NULL);
	return ctl__blobs_on_result(n->blobs, kind, fn, arg);
}

/* ---- the process-wide singleton ----------------------------------------- */

static struct ctl_node *self_node;

int ctl_start(const struct zb_config *cfg, const struct ctl_opts *opts,
	      char *err, size_t errlen)
{
	if (self_node) {
		snprintf(err, errlen, "control plane already started");
		return -EALREADY;
	}
	return ctl_node_start(cfg, opts, &self_node, err, errlen);
}

void ctl_stop(void)
{
	ctl_node_stop(self_node, true);
	self_node = NULL;
}

struct ctl_node *ctl_self(void)
{
	return self_node;
}

/* Accessors for http.c (same module). */
struct ctl_node *ctl__node_next(struct ctl_node *n) { return n->next_node; }
void ctl__node_set_next(struct ctl_node *n, struct ctl_node *next) { n->next_node = next; }
