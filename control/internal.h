/* control/internal.h — shared between control/ sources (ctl__ prefix). */
#ifndef ZBMD_CONTROL_INTERNAL_H
#define ZBMD_CONTROL_INTERNAL_H

#include "zbmd/control.h"

#include <raft.h>
#include <raft/uv.h>
#include <uv.h>

/* ---- PSK-authenticated wrapper around raft_uv_tcp (tcp_auth.c) ----------
 * Wraps libraft's TCP transport: after raft's own connection preamble, both
 * ends run a challenge-response handshake (fresh nonces, cluster id, both
 * raft ids, HMAC under the cluster key, mutual). Raft then gets one end of a
 * socketpair; a relay carries its bytes over TCP in MAC'ed, sequenced frames
 * under per-connection session keys (docs/control.md). */
struct ctl_tcp_auth;
struct ctl_tcp_auth_stats {
	uint64_t ok, rejected;
};
/* On success *out's iface is ready for raft_uv_init(). */
int ctl__tcp_auth_create(struct ctl_tcp_auth **out, uv_loop_t *loop,
			 uint32_t cluster_id, const uint8_t key[CTL_KEY_BYTES],
			 void (*on_reject)(void *arg, const char *why), void *arg);
struct raft_uv_transport *ctl__tcp_auth_iface(struct ctl_tcp_auth *t);
struct raft_uv_transport *ctl__tcp_auth_inner(struct ctl_tcp_auth *t);
void ctl__tcp_auth_stats(const struct ctl_tcp_auth *t, struct ctl_tcp_auth_stats *s);
/* After the transport was closed (raft_close done). */
void ctl__tcp_auth_free(struct ctl_tcp_auth *t);

/* ---- membership reconciliation (member.c) --------------------------------
 * What the leader should do next to bring the Raft configuration and the
 * replicated member set in line with what the failure detector sees. One
 * action at a time; callers run it when the previous one completed. */
struct ctl_liveness {
	bool alive[CFG_MAX_NODES];       /* heard recently, phi well below threshold */
	bool convicted[CFG_MAX_NODES];   /* phi >= threshold (or told down) */
	bool left[CFG_MAX_NODES];        /* asked to leave */
	char addr[CFG_MAX_NODES][CTL_ADDR_MAX];
};

enum ctl_action_type {
	CTL_ACT_NONE = 0,
	CTL_ACT_JOIN,        /* raft_apply(JOIN id addr) */
	CTL_ACT_LEAVE,       /* raft_apply(LEAVE id reason) */
	CTL_ACT_RAFT_ADD,    /* raft_add(id + 1, addr) */
	CTL_ACT_RAFT_ASSIGN, /* raft_assign(id + 1, RAFT_VOTER) */
	CTL_ACT_RAFT_REMOVE, /* raft_remove(id + 1) */
};

struct ctl_action {
	enum ctl_action_type type;
	uint16_t id;
	uint8_t reason;
	char addr[CTL_ADDR_MAX];
};

void ctl__reconcile(const struct raft *r, const struct ctl_state *st,
		    uint16_t self, const char *self_addr,
		    const struct ctl_liveness *live, struct ctl_action *out);
const char *ctl__action_name(enum ctl_action_type t);

void ctl_fsm_close(struct raft_fsm *fsm);

#endif
