/* control/internal.h — shared between control/ sources (ctl__ prefix). */
#ifndef ZBMD_CONTROL_INTERNAL_H
#define ZBMD_CONTROL_INTERNAL_H

#include "zbmd/control.h"

#include <raft.h>
#include <raft/uv.h>
#include <uv.h>

/* ---- PSK-authenticated wrapper around raft_uv_tcp (tcp_auth.c) ----------
 * Wraps libraft's TCP transport (and listens itself, so that every accepted
 * connection is under a deadline): after raft's own connection preamble, both
 * ends run a challenge-response handshake (fresh nonces, cluster id, both
 * raft ids, HMAC under the cluster key, mutual). Raft then gets one end of a
 * socketpair; a relay carries its bytes over TCP in MAC'ed, sequenced frames
 * under per-connection session keys (docs/control.md). */
struct ctl_tcp_auth;
struct ctl_tcp_auth_stats {
	uint64_t ok, rejected;
};
/* "a.b.c.d:port" (IPv4, as everywhere in the control plane: listen and
 * seed addresses, the HTTP listeners, zbmd status --admin) into *sa: 0, or
 * -EINVAL for anything else (a port with a sign, blanks or junk after it). */
int ctl__parse_ip4(const char *s, struct sockaddr_in *sa);
/* A loopback address (127/8, network order): a client on this machine. */
static inline bool ctl__loopback(uint32_t ip_be) { return (ntohl(ip_be) >> 24) == 127; }
/* On success *out's iface is ready for raft_uv_init(). */
int ctl__tcp_auth_create(struct ctl_tcp_auth **out, uv_loop_t *loop,
			 uint32_t cluster_id, const uint8_t key[CTL_KEY_BYTES],
			 void (*on_reject)(void *arg, const char *why), void *arg);
struct raft_uv_transport *ctl__tcp_auth_iface(struct ctl_tcp_auth *t);
/* Listen on `address` ("ip:port") rather than on raft's own address; before
 * raft_uv_init. 0 or -EINVAL. */
int ctl__tcp_auth_set_bind_address(struct ctl_tcp_auth *t, const char *address);
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

/* ---- opaque blobs (blob.c) -----------------------------------------------
 * The reliable, authenticated blob exchange of ctl_blob_send(): the queue
 * any thread fills, the sender's retransmission table and the receiver's
 * duplicate filter. Everything but ctl__blobs_enqueue / _handle / queue_full
 * runs on the control thread. Datagrams leave through `tx`, which seals
 * them (ctl_auth_seal) and sends them to `to`, or, when to is NULL, to the
 * peer's control address; it returns false when that is not known yet. */
#include <netinet/in.h>
struct ctl__blobs;
typedef bool (*ctl__blob_tx_fn)(void *arg, uint16_t peer, const struct sockaddr_in *to,
				uint8_t type, const void *payload, size_t len);
#define CTL__MSG_BLOB      4
#define CTL__MSG_BLOB_ACK  5
int ctl__blobs_create(struct ctl__blobs **out, uint16_t self, uint64_t incarnation,
		      const struct ctl_opts *opts, ctl__blob_tx_fn tx, void *tx_arg);
void ctl__blobs_free(struct ctl__blobs *b);
int ctl__blobs_enqueue(struct ctl__blobs *b, uint16_t peer, uint8_t kind,
		       const void *blob, size_t len);
int ctl__blobs_handle(struct ctl__blobs *b, uint8_t kind, ctl_blob_fn fn, void *arg);
int ctl__blobs_on_result(struct ctl__blobs *b, uint8_t kind, ctl_blob_result_fn fn, void *arg);
/* Control thread: take queued blobs, (re)transmit what is due, give up on
 * what timed out. */
void ctl__blobs_tick(struct ctl__blobs *b, uint64_t now_ns);
/* Control thread: an authenticated BLOB or BLOB_ACK from `from` at src. */
void ctl__blobs_on_msg(struct ctl__blobs *b, uint8_t type, uint16_t from,
		       const struct sockaddr_in *src, const uint8_t *p, size_t len);
void ctl__blobs_stats(const struct ctl__blobs *b, struct ctl_blob_stats *out);

void ctl_fsm_close(struct raft_fsm *fsm);

/* ---- election timeouts spread by rank (elect.c) --------------------------
 * ctl__voter_rank: self's rank among the configuration's voters in id
 * order, -1 if not one; *voters: how many. ctl__election_timeout: a timeout
 * in [min, max) from slot `rank` of `voters` equal slots, less a guard of
 * CTL_ELECT_GUARD_MS (at most half a slot) at its top; `draw`: any random
 * number. Not a voter, or fewer than 2: uniform over [min, max). */
#define CTL_ELECT_GUARD_MS 50
int ctl__voter_rank(const struct raft_configuration *c, raft_id self, unsigned *voters);
int ctl__election_timeout(int rank, unsigned voters, int min, int max, unsigned draw);

/* s as a JSON string, quotes included (status.c; zbmd status --json). */
void ctl__json_str(FILE *f, const char *s);

#endif
