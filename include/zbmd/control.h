/* zbmd/control.h — the control plane: one slow-path thread per node (a libuv
 * loop) that runs heartbeats + phi-accrual failure detection, Raft (libraft)
 * over a PSK-authenticated transport, the membership state machine (members,
 * epoch, ring order, supervisor placement), metrics and the admin API.
 *
 * It talks to the lcores only through bounded lock-free rings (struct
 * ctl_ring): commands in (lcores -> control, MPSC), events out (control ->
 * each lcore, SPSC). Nothing here blocks an lcore and no lcore-side call makes
 * a syscall. The control plane does not depend on DPDK.
 *
 * Building blocks (phi detector, message authentication, state machine) are
 * pure and take injected time so that tests can drive them deterministically.
 */
#ifndef ZBMD_CONTROL_H
#define ZBMD_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zbmd/config.h"

/* ------------------------------------------------------------------------ */
/* Bounded lock-free ring of fixed-size elements (Vyukov's bounded MPMC
 * queue: per-cell sequence numbers, one CAS per operation). Safe for any
 * number of producers and consumers; used as MPSC for commands and SPSC for
 * events. Never blocks, never allocates after ctl_ring_create(). */
struct ctl_ring;

/* capacity: power of two, 2..65536; elem_size: 1..1024 bytes.
 * Returns 0 or -EINVAL, -ENOMEM. */
int ctl_ring_create(struct ctl_ring **out, uint32_t capacity, uint32_t elem_size);
void ctl_ring_free(struct ctl_ring *r);
/* 0, or -ENOBUFS when full (nothing written). Wait-free for one producer. */
int ctl_ring_enqueue(struct ctl_ring *r, const void *elem);
/* 0, or -EAGAIN when empty (elem untouched). */
int ctl_ring_dequeue(struct ctl_ring *r, void *elem);
uint32_t ctl_ring_capacity(const struct ctl_ring *r);

/* ------------------------------------------------------------------------ */
/* Phi-accrual failure detector (Hayashibara, Défago, Yared, Katayama: "The
 * phi accrual failure detector", SRDS 2004), in Akka's variant
 * (akka.remote.PhiAccrualFailureDetector): the inter-arrival times in a
 * sliding window are modelled as a normal distribution whose mean is raised
 * by the acceptable heartbeat pause and whose standard deviation is floored
 * at min_std; P_later(t) uses the logistic approximation of the normal CDF
 * (Bowling et al. 2009) and phi = -log10(P_later(t)). Time is injected (ns). */
#define CTL_PHI_WINDOW_MAX 1024

struct ctl_phi_params {
	uint32_t window;              /* samples kept, 2..CTL_PHI_WINDOW_MAX */
	double min_std_ms;            /* floor of the standard deviation */
	double acceptable_pause_ms;   /* added to the mean */
	double first_interval_ms;     /* estimate seeding the window */
	double threshold;             /* convict when phi >= threshold */
};

struct ctl_phi {
	struct ctl_phi_params p;
	uint32_t n, head;             /* samples in window; next write slot */
	double sum, sumsq;            /* running sums over the window (ms) */
	uint64_t last_ns;             /* last arrival; 0 = none yet */
	uint64_t arrivals;
	double win[CTL_PHI_WINDOW_MAX];
};

/* Returns 0 or -EINVAL (window out of range, negative or NaN parameters). */
int ctl_phi_init(struct ctl_phi *d, const struct ctl_phi_params *p);
/* A heartbeat arrived at now_ns (monotonic, non-decreasing). */
void ctl_phi_heartbeat(struct ctl_phi *d, uint64_t now_ns);
/* phi at now_ns; 0 before the first heartbeat. Never NaN; may be large. */
double ctl_phi_value(const struct ctl_phi *d, uint64_t now_ns);
bool ctl_phi_convicted(const struct ctl_phi *d, uint64_t now_ns);
double ctl_phi_mean_ms(const struct ctl_phi *d);
double ctl_phi_std_ms(const struct ctl_phi *d);
/* The parameters the config's [control] keys give. */
void ctl_phi_params_from_config(const struct zb_config *cfg,
				struct ctl_phi_params *p);

/* ------------------------------------------------------------------------ */
/* Authenticated control messages. Wire format (little endian):
 *   magic u32 "ZBC1" | version u8 | type u8 | sender u16 | cluster u32 |
 *   counter u64 | payload | tag[32]
 * tag = HMAC-SHA-512-256 (libsodium crypto_auth) under the cluster key over
 * everything before it. counter is per sender and strictly increasing (it
 * starts at the sender's wall clock in ns, so it keeps increasing across
 * restarts); a receiver accepts a sender's message only when its counter is
 * above the last one it accepted from that sender. */
#define CTL_KEY_BYTES   32
#define CTL_TAG_BYTES   32
#define CTL_HDR_BYTES   20
#define CTL_MSG_MAX     512

enum ctl_auth_reason {
	CTL_AUTH_MALFORMED = 0,  /* short, bad magic/version/sender */
	CTL_AUTH_CLUSTER,        /* another cluster id */
	CTL_AUTH_MAC,            /* tag does not verify (wrong key, tampered) */
	CTL_AUTH_REPLAY,         /* counter not above the last accepted */
	CTL_AUTH_NREASONS
};
const char *ctl_auth_reason_name(enum ctl_auth_reason r);

struct ctl_auth {
	uint32_t cluster_id;
	uint16_t self;
	uint8_t key[CTL_KEY_BYTES];
	uint64_t tx_counter;
	uint64_t rx_last[CFG_MAX_NODES];
	uint64_t accepted;
	uint64_t rejected[CTL_AUTH_NREASONS];
};

/* Load the pre-shared key: refuses (-EPERM) a file that group or others may
 * access, -EINVAL one shorter than 16 bytes (trailing whitespace ignored),
 * -EFBIG one longer than CTL_PSK_FILE_MAX bytes, -errno when unreadable. The key is BLAKE2b-256 of the file's content, so any
 * secret of 16+ bytes works (e.g. `head -c 32 /dev/urandom | base64`).
 * err gets a one-line reason on failure. */
#define CTL_PSK_FILE_MAX 4096
int ctl_auth_load_key(const char *path, uint8_t key[CTL_KEY_BYTES],
		      char *err, size_t errlen);
/* counter_start: first counter to send (e.g. CLOCK_REALTIME ns). */
void ctl_auth_init(struct ctl_auth *a, uint32_t cluster_id, uint16_t self,
		   const uint8_t key[CTL_KEY_BYTES], uint64_t counter_start);
/* Build one message into out (cap bytes). Returns its length or -EMSGSIZE. */
int ctl_auth_seal(struct ctl_auth *a, uint8_t type, const void *payload,
		  size_t len, uint8_t *out, size_t cap);
/* Check one received message. On success returns 0 and sets *type, *sender,
 * *payload (points into msg) and *plen. Otherwise returns -ZB_ERR_AUTH
 * (reason in *why, counted in a->rejected) and changes nothing else. */
int ctl_auth_open(struct ctl_auth *a, const uint8_t *msg, size_t len,
		  uint8_t *type, uint16_t *sender, const uint8_t **payload,
		  size_t *plen, enum ctl_auth_reason *why);

/* ------------------------------------------------------------------------ */
/* The replicated state machine (a libraft FSM). */
#define CTL_ADDR_MAX      64     /* "ip:port" */
#define CTL_SUPERVISORS   8      /* cluster-level supervisor slots */

struct ctl_member {
	uint16_t id;                 /* node id (raft id = id + 1) */
	char addr[CTL_ADDR_MAX];     /* control address "ip:port" */
};

struct ctl_state {
	uint64_t epoch;              /* bumped by every membership change */
	uint64_t changes;            /* commands applied */
	uint64_t skipped;            /* commands not understood (a newer zbmd's?),
					applied as no-ops; counted by this
					process, not carried by snapshots */
	uint32_t n;                  /* members, sorted by id */
	struct ctl_member m[CFG_MAX_NODES];
	uint16_t ring[CFG_MAX_NODES];           /* ring order for collectives */
	uint16_t placement[CTL_SUPERVISORS];    /* node running supervisor i */
};

enum ctl_cmd_type { CTL_CMD_JOIN = 1, CTL_CMD_LEAVE = 2 };
enum ctl_leave_reason { CTL_LEAVE_GRACEFUL = 0, CTL_LEAVE_CONVICTED = 1 };

struct raft_fsm;
struct raft_buffer;

/* Called on the thread that applies (the control loop) after every change. */
typedef void (*ctl_fsm_change_fn)(void *arg, const struct ctl_state *st);

/* Set up fsm (version 1) over st (zeroed here). on_change may be NULL. */
void ctl_fsm_init(struct raft_fsm *fsm, struct ctl_state *st,
		  ctl_fsm_change_fn on_change, void *arg);
/* Encode a command into a raft_malloc'd buffer for raft_apply().
 * Returns 0, -EINVAL (address too long / id out of range) or -ENOMEM. */
int ctl_fsm_encode(struct raft_buffer *buf, enum ctl_cmd_type type,
		   uint16_t id, const char *addr, uint8_t reason);
/* Pure helpers (tests, status). */
bool ctl_state_has(const struct ctl_state *st, uint16_t id);
int ctl_state_apply(struct ctl_state *st, const void *cmd, size_t len);
size_t ctl_state_encode(const struct ctl_state *st, uint8_t *out, size_t cap);
int ctl_state_decode(struct ctl_state *st, const void *buf, size_t len);

/* ------------------------------------------------------------------------ */
/* Events (control -> lcores) and commands (lcores -> control). */
enum ctl_event_type {
	CTL_EV_EPOCH = 1,   /* membership changed: new epoch and ring order;
			       collectives started under an older epoch must
			       fail with ZB_ERR_EPOCH */
	CTL_EV_LEADER = 2,  /* Raft leader changed (leader in .leader) */
};

struct ctl_event {
	uint32_t type;
	uint16_t leader;               /* node id, or UINT16_MAX for none */
	uint16_t n_members;
	uint64_t epoch;
	uint16_t ring[CFG_MAX_NODES];
};

enum ctl_command_type {
	CTL_REQ_PEER_DOWN = 1,  /* the transport gave up on node `node`: it is
				   convicted unless a heartbeat arrives within
				   two heartbeat intervals */
};

struct ctl_command {
	uint32_t type;
	uint16_t node;
	uint16_t pad;
	uint64_t arg;
};

/* ------------------------------------------------------------------------ */
/* The node's control thread. */
enum { CTL_LOG_ERR = 3, CTL_LOG_WARN = 4, CTL_LOG_INFO = 6 };

struct ctl_opts {
	/* Where the control thread's messages go (any thread may call it;
	 * authentication failures arrive rate-limited). NULL = dropped. */
	void (*log)(void *arg, int level, const char *msg);
	void *log_arg;
	unsigned event_consumers;      /* SPSC event rings, one per lcore */
	uint32_t event_ring_size;      /* 0 = 64 */
	uint32_t command_ring_size;    /* 0 = 256 */
	uint32_t blob_ring_size;       /* ctl_blob_send queue; 0 = 256 */
	uint32_t blob_timeout_ms;      /* give a blob up after; 0 = 60000 */
};

struct ctl_node;

/* Start a control thread for cfg (copied). Refuses to start (-EPERM) when the
 * PSK file is accessible by group/others, -ZB_ERR_CONFIG for bad addresses,
 * -errno for sockets/dirs. err gets a one-line reason. */
int ctl_node_start(const struct zb_config *cfg, const struct ctl_opts *opts,
		   struct ctl_node **out, char *err, size_t errlen);
/* Leave gracefully when `leave` (ask the leader to remove us, bounded wait),
 * then stop the thread and free everything. NULL is a no-op. */
void ctl_node_stop(struct ctl_node *n, bool leave);

/* The same node without a thread of its own, for a host that provides the
 * thread (`zbmd run`: the dataplane's control hook, dp_set_control_hook):
 *   ctl_node_create()        sockets bound, Raft started, HTTP servers up;
 *                            every error is reported here, synchronously
 *   ctl_node_run()           runs the loop on the calling thread until a
 *                            stop request has been carried out (graceful
 *                            leave included); returns 0
 *   ctl_node_request_stop()  any thread, any time (also before run): ask
 *                            the loop to leave (when `leave`) and end
 *   ctl_node_destroy()       after run returned (or when it never ran):
 *                            HTTP servers stopped, everything freed
 * ctl_node_start() is create + a thread running run; ctl_node_stop() is
 * request_stop + join + destroy. Same errors as ctl_node_start(). */
int ctl_node_create(const struct zb_config *cfg, const struct ctl_opts *opts,
		    struct ctl_node **out, char *err, size_t errlen);
int ctl_node_run(struct ctl_node *n);
void ctl_node_request_stop(struct ctl_node *n, bool leave);
void ctl_node_destroy(struct ctl_node *n);
struct ctl_ring *ctl_node_events(struct ctl_node *n, unsigned consumer);
struct ctl_ring *ctl_node_commands(struct ctl_node *n);
/* Current epoch, readable from any thread (one relaxed atomic load). */
uint64_t ctl_node_epoch(const struct ctl_node *n);

/* ------------------------------------------------------------------------ */
/* Opaque blobs, node to node, over the authenticated control messages
 * (docs/control.md, "Blobs"): how providers exchange connection parameters
 * (the rdma provider's 72-byte connection blobs). A blob is sent in a BLOB
 * message (MAC'd, cluster id, replay counter like every control message)
 * and retransmitted (20 ms, doubling up to 320 ms) until the peer
 * acknowledges it or opts.blob_timeout_ms passes (then it is dropped,
 * counted in blobs.failed and logged). The receiver hands each blob to the
 * handler of its kind once (duplicates are acknowledged, not delivered
 * again) and acknowledges it; without a handler for the kind, or when the
 * handler returns -EAGAIN, it does not acknowledge, so the sender retries
 * until the receiver is ready. Blobs to one peer are not ordered. */
#define CTL_BLOB_MAX      256    /* bytes of one blob */
#define CTL_BLOB_KINDS    16     /* kinds 1 .. CTL_BLOB_KINDS - 1 */
#define CTL_BLOB_INFLIGHT 64     /* blobs awaiting acknowledgement */
enum {
	CTL_BLOB_RDMA_CONN = 1,  /* rdma_conn_local() output (zbmd/rdma.h): collectives */
	CTL_BLOB_RDMA_ACT = 2,   /* the same for the actor carrier's own instance */
};

/* Returns 0 (delivered: acknowledged), -EAGAIN (not ready: not
 * acknowledged, the sender retries) or another negative error (refused:
 * acknowledged as refused, counted, logged; never retried). Runs on the
 * control thread; must not block and must not call ctl_blob_handle(). */
typedef int (*ctl_blob_fn)(void *arg, uint16_t from, uint8_t kind,
			   const void *blob, size_t len);

/* Queue blob (len 1..CTL_BLOB_MAX, copied) for node `peer`. Any thread; never
 * blocks, no syscall (the control thread picks it up within one 10 ms tick).
 * Returns 0, -EINVAL (no node, peer out of range or this node, kind 0 or
 * >= CTL_BLOB_KINDS, blob NULL), -EMSGSIZE (len 0 or > CTL_BLOB_MAX),
 * -ENOBUFS (the queue is full: try again later). */
int ctl_blob_send(struct ctl_node *n, uint16_t peer, uint8_t kind,
		  const void *blob, size_t len);
/* Install (fn) or remove (NULL) the handler of `kind`. Any thread except
 * from inside a handler; when it returns, the old handler is not running
 * and will not be called again. 0 or -EINVAL. */
int ctl_blob_handle(struct ctl_node *n, uint8_t kind, ctl_blob_fn fn, void *arg);

/* What became of a blob this node sent, once (peer, kind and the blob as it
 * was queued): status 0 the peer's handler took it (acknowledged
 * delivered); -EBADMSG its handler refused it; -ESTALE the peer answered
 * "unknown" (its handler deferred it until 1024 later blobs from us were
 * handled: it cannot tell); -ETIMEDOUT no acknowledgement within
 * blob_timeout_ms (peer down, not ready, another key or cluster). Runs on
 * the control thread under the same lock as the handlers; must not block
 * and must not call ctl_blob_handle / ctl_blob_on_result. */
typedef void (*ctl_blob_result_fn)(void *arg, uint16_t peer, uint8_t kind, int status,
				   const void *blob, size_t len);
/* Install (fn) or remove (NULL) the result hook of `kind`; as
 * ctl_blob_handle. 0 or -EINVAL. */
int ctl_blob_on_result(struct ctl_node *n, uint8_t kind, ctl_blob_result_fn fn, void *arg);

struct ctl_blob_stats {
	uint64_t queued;        /* accepted by ctl_blob_send */
	uint64_t queue_full;    /* refused by ctl_blob_send: -ENOBUFS */
	uint64_t sent;          /* BLOB datagrams sent (first + retransmits) */
	uint64_t retransmits;
	uint64_t acked;         /* acknowledged by the peer (delivered) */
	uint64_t refused;       /* acknowledged as refused by the peer's handler */
	uint64_t failed;        /* no acknowledgement within blob_timeout_ms, or
				 * acknowledged "unknown" (too old for the peer) */
	uint64_t delivered;     /* received and handed to a handler (accepted) */
	uint64_t duplicates;    /* received again: acknowledged, not delivered */
	uint64_t rejected;      /* received, refused by our handler */
	uint64_t deferred;      /* received, no handler / -EAGAIN: not acked */
	uint64_t malformed;     /* authenticated but bad layout / not for us */
};

/* A point-in-time view for the admin API. */
struct ctl_peer_status {
	uint16_t id;
	char addr[CTL_ADDR_MAX];
	double phi;
	bool member, convicted, heard;
	/* it said it stops, leaving the cluster (LEAVE) or not (GONE), and has
	 * not restarted since */
	bool gone;
	uint64_t heartbeats;
	double last_heard_ms;          /* ago */
};

struct ctl_status {
	uint16_t self;
	char addr[CTL_ADDR_MAX];
	const char *raft_state;        /* "leader", "follower", ... (static) */
	int leader;                    /* node id or -1 */
	uint64_t term, commit, applied, last_index;
	struct ctl_state st;
	uint32_t n_peers;
	struct ctl_peer_status peers[CFG_MAX_NODES];
	uint64_t auth_ok, auth_rejected[CTL_AUTH_NREASONS];
	uint64_t handshake_ok, handshake_rejected;
	uint64_t convictions, events_dropped;
	uint64_t http_refused, http_cut;   /* over the limits; shut down slow */
	struct ctl_blob_stats blobs;
};
int ctl_node_status(struct ctl_node *n, struct ctl_status *out);
/* Text ("key value" lines) or JSON rendering; malloc'd, caller frees. */
char *ctl_status_text(const struct ctl_status *s);
char *ctl_status_json(const struct ctl_status *s);

/* Process-wide singleton for the node process (`zbmd run`). */
int ctl_start(const struct zb_config *cfg, const struct ctl_opts *opts,
	      char *err, size_t errlen);
void ctl_stop(void);
struct ctl_node *ctl_self(void);

/* CLI commands (cli/main.c). */
int ctl_cmd_status(int argc, char **argv);   /* zbmd status */
int ctl_cmd_control(int argc, char **argv);  /* zbmd control -c FILE */
int ctl_cmd_bench_phi(int argc, char **argv); /* zbmd bench phi */

#endif /* ZBMD_CONTROL_H */
