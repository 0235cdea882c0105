/* zbmd/actors.h — the actor runtime: Erlang/OTP semantics in plain C11.
 *
 * A runtime owns fixed pools sized at act_runtime_create(): actor slots,
 * messages, timers, registry names, per-worker run queues. Nothing on the
 * message path (alloc, send, receive, call, timers, links, monitors) calls
 * malloc after that; spawning an actor whose state is larger than
 * ACT_STATE_INLINE and starting a supervisor allocate (control path).
 *
 * Workers: one run queue per worker. Either the runtime runs them on its own
 * pinned pthreads (act_start_threads) or an external loop (a DPDK lcore) drives
 * worker i with act_worker_poll(). Never both for the same worker.
 *
 * Threads: every function here may be called from any thread unless it takes
 * a `struct act_ctx *`: those are valid only inside a behaviour callback of
 * that actor (init, handle, terminate), on the thread running it.
 *
 * Errors: 0 or a negative errno / ZB_ERR_* code (see zbmd/common.h):
 *   ZB_ERR_STALE_ID     the id names no live actor (dead, slot reused, bad slot,
 *                       generation 0: ACT_ID_NONE and node-only ids)
 *   ZB_ERR_MAILBOX_FULL the destination holds mailbox_capacity messages
 *   ZB_ERR_PEER_DOWN    destination on another node and no router is set
 *   ZB_ERR_TIMEOUT      act_call() got no reply in time
 *   -ENOBUFS            message / timer / slot pool exhausted
 *   -EINVAL             bad argument;  -EPERM  needs an actor context
 */
#ifndef ZBMD_ACTORS_H
#define ZBMD_ACTORS_H

#include "zbmd/common.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- identities ----------------------------------------------------------
 * ActorId: node (16, bits 48..63) | slot (30, bits 18..47) | generation (18,
 * bits 0..17). The node field is what remote routing reads (act_id_node);
 * slot and generation mean something only to the node that made the id.
 * max_actors <= 2^30 fits the slot field. Generation 0 is never used, so
 * ACT_ID_NONE (0) never names an actor (and act_id_make(node, 0, 0) names a
 * node, not an actor): every function taking an id refuses generation 0
 * (ZB_ERR_STALE_ID; act_alive false), whether or not its slot was used. A slot's generation advances on every reuse and slots
 * are reused in FIFO order after every slot has been used once, so a stale
 * id could name a newer actor only after 2^18 - 1 reuses of its one slot,
 * i.e. at least (2^18 - 1) x (free slots) spawns later (docs/actors.md).
 * A slot's first generation is not 1 but drawn from a seed of the runtime
 * (act_runtime_create): the id has no incarnation field, so a restarted
 * node would otherwise give its actors its previous incarnation's ids; an
 * old id names a new incarnation's actor only by a 1 in 2^18 - 1 chance
 * per use of its slot. Ids differ from run to run. */
typedef uint64_t act_id;
#define ACT_ID_NONE ((act_id)0)
#define ACT_ID_SLOT_BITS 30
#define ACT_ID_GEN_BITS 18
#define ACT_ID_SLOT_MASK ((1u << ACT_ID_SLOT_BITS) - 1)
#define ACT_ID_GEN_MASK ((1u << ACT_ID_GEN_BITS) - 1)

static inline act_id act_id_make(uint16_t node, uint32_t slot, uint32_t gen)
{
	return ((uint64_t)node << 48) |
	       ((uint64_t)(slot & ACT_ID_SLOT_MASK) << ACT_ID_GEN_BITS) |
	       (gen & ACT_ID_GEN_MASK);
}
static inline uint16_t act_id_node(act_id id) { return (uint16_t)(id >> 48); }
static inline uint32_t act_id_slot(act_id id)
{
	return (uint32_t)(id >> ACT_ID_GEN_BITS) & ACT_ID_SLOT_MASK;
}
static inline uint32_t act_id_gen(act_id id) { return (uint32_t)id & ACT_ID_GEN_MASK; }

/* ---- parameters (the CLI fills them from the config's [actors]) ---------- */
struct act_params {
	uint16_t node;             /* this node's id (ActorId.node) */
	uint32_t max_actors;       /* actor slots (incl. act_call ports) */
	uint32_t mailbox_capacity; /* messages queued per actor (default 256) */
	uint32_t reductions;       /* messages per run before preemption (2000) */
	uint32_t workers;          /* run queues / worker threads */
	uint32_t message_pool;     /* messages preallocated */
	uint32_t timers;           /* timer slots per worker */
	uint32_t max_names;        /* registry capacity */
	bool pin;                  /* pin worker threads to CPUs (i % ncpu) */
	const cpu_set_t *cpus;     /* not pinned: the workers' CPUs (NULL:
				    * the creating thread's); read by
				    * act_start_threads() only */
	bool timestamps;           /* fill act_msg.ts_ns on every send */
	uint32_t call_spin_ns;     /* act_call polls this long for its reply
				    * before it sleeps on a futex: a reply
				    * found while polling costs its sender
				    * (a worker, an lcore) no syscall */
};

/* Defaults: 65536 actors, 256, 2000, 2 workers, 65536 messages, 4096 timers,
 * 1024 names, pinned, no timestamps, call_spin_ns 20000. */
void act_params_default(struct act_params *p);

struct act_runtime;

/* Creates a runtime; every pool is allocated here. 0, -EINVAL (a parameter is
 * 0 or out of range; mailbox_capacity needs no power of two), -ENOMEM. */
int act_runtime_create(const struct act_params *p, struct act_runtime **out);
/* Stops the threads if started, terminates live actors without running
 * callbacks, releases buffer references held by queued messages, frees all
 * (live supervisors' own memory included). */
void act_runtime_destroy(struct act_runtime *rt);

/* Built-in mode: one pthread per worker, pinned when params.pin. Idle workers
 * spin briefly and then park on a futex; a sender wakes them. 0 or -errno. */
int act_start_threads(struct act_runtime *rt);
/* Stops and joins the worker threads (actors stay). 0. */
int act_stop_threads(struct act_runtime *rt);

/* Hosted mode: runs ready actors of worker `worker` (its LIFO slot, run queue,
 * injected actors, due timers; steals from other workers when empty) until
 * `budget` reductions are spent or nothing is ready. Never blocks. Returns the
 * number of messages processed (0: idle). Call from one thread per worker. */
size_t act_worker_poll(struct act_runtime *rt, unsigned worker, uint32_t budget);

/* Worker index the calling thread is driving, or -1. */
int act_current_worker(const struct act_runtime *rt);

/* ---- messages ------------------------------------------------------------ */
/* Inline payload bytes: Erlang's heap-binary bound (larger data goes by
 * reference, ACT_PL_BUF); a 64-byte message travels inline, locally and
 * between nodes. */
#define ACT_INLINE_MAX 64

enum act_payload {
	ACT_PL_NONE = 0,
	ACT_PL_INLINE,   /* u.bytes[0..len) copied into the message */
	ACT_PL_BUF,      /* u.buf: one reference on a refcounted buffer */
	ACT_PL_GPU,      /* u.gpu: device memory descriptor (not owned) */
	ACT_PL_RDMA,     /* u.rdma: remote region descriptor (not owned) */
};

/* Refcounted zero-copy buffer (an mbuf, a pool buffer, any memory). Owned by
 * whoever created it; `release` runs once when the last reference goes. */
struct act_buf {
	_Atomic uint32_t refs;
	void *data;
	size_t len;
	void (*release)(struct act_buf *b, void *ctx);
	void *ctx;
};
static inline void act_buf_ref(struct act_buf *b)
{
	atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
}
/* Drops one reference; runs release at the last. */
void act_buf_unref(struct act_buf *b);

/* Message flags (act_msg.flags). */
#define ACT_MF_REPLY 0x1u  /* a reply to act_call / act_call_async (ref set) */
#define ACT_MF_STAMP 0x2u  /* fill ts_ns at send even without params.timestamps */
#define ACT_MF_SIGNAL 0x4u /* ACT_TAG_EXIT from act_exit_signal, not a link */
#define ACT_MF_USER  0x100u /* first bit free for applications */

/* Reserved tags of notifications the runtime delivers to handlers. */
#define ACT_TAG_EXIT    0xFFFF0001u /* trapped exit: from = who, act_msg_reason */
#define ACT_TAG_DOWN    0xFFFF0002u /* monitor fired: ref, from, act_msg_reason */
#define ACT_TAG_TIMEOUT 0xFFFF0003u /* act_call_async timed out: ref */
/* A message to another node was accepted and then not delivered (peer down,
 * peer restarted): from = its destination, act_msg_reason = the error. For a
 * call request it is the reply (ACT_MF_REPLY, ref = the call's ref);
 * act_call then returns the error. Sent by the remote router (zbmd/remote.h). */
#define ACT_TAG_UNDELIVERED 0xFFFF0004u
/* act_sup_start_child's answer to the actor that asked: from = the
 * supervisor, act_msg_reason = 0 or the error, u.bytes[0..8) = the child's
 * act_id (ACT_ID_NONE on error). */
#define ACT_TAG_SUP_STARTED 0xFFFF0005u
#define ACT_TAG_USER_MAX 0xFFFEFFFFu

/* A message: 192 bytes (three cache lines), from the runtime's pool. Every
 * field but `_priv` is public; the payload comes last, so a message with at
 * most 40 inline bytes (or a buffer, GPU or RDMA descriptor) lives in the
 * first two lines. Ownership: act_msg_alloc() gives it to the caller; a successful
 * send moves it to the runtime (the caller must not touch it again); a failed
 * send leaves it with the caller (retry or act_msg_free). The message handed
 * to a handler is freed by the runtime when the handler returns, unless the
 * handler forwards it with a successful send or keeps it (act_msg_take).
 * Freeing a message drops its buffer reference (ACT_PL_BUF); GPU and RDMA
 * descriptors are only descriptions: their owners free that memory. */
struct act_msg {
	uint64_t id;      /* unique while the message lives (pool index | gen) */
	act_id from;      /* sender (set by act_msg_alloc inside an actor) */
	act_id to;        /* set by send */
	uint32_t tag;     /* application tag (<= ACT_TAG_USER_MAX) */
	uint32_t flags;   /* ACT_MF_* */
	uint64_t ts_ns;   /* send time (zb_now_ns) when stamped, else 0 */
	uint64_t ref;     /* call correlation / monitor ref, 0 = none */
	uint8_t kind;     /* enum act_payload */
	uint8_t _sys;     /* runtime signal type (0: application message) */
	uint16_t len;     /* inline length (ACT_PL_INLINE) */
	int32_t _reason;  /* exit reason of EXIT/DOWN notifications */
	struct {          /* runtime-private */
		_Atomic(void *) next;
		uint64_t aux;
		_Atomic uint64_t tword;
		uint32_t gen;
		uint8_t state;
		uint8_t pad[3];
	} _priv;
	union {
		uint8_t bytes[ACT_INLINE_MAX];
		struct { struct act_buf *buf; size_t off, len; } buf;
		struct { uint32_t backend, device; void *ptr; size_t len; } gpu;
		struct { uint16_t node; uint32_t rkey; uint64_t addr, len; } rdma;
	} u;
	uint8_t _pad[40];
};

/* A fresh message (kind NONE, tag 0, from = the calling actor or NONE), or
 * NULL when the pool is empty. */
struct act_msg *act_msg_alloc(struct act_runtime *rt);
/* Returns a message the caller owns to the pool (drops its buffer ref). */
void act_msg_free(struct act_runtime *rt, struct act_msg *m);
/* Payload setters; inline copies (-EINVAL if len > ACT_INLINE_MAX). */
int act_msg_set_bytes(struct act_msg *m, const void *data, size_t len);
void act_msg_set_buf(struct act_msg *m, struct act_buf *b, size_t off, size_t len);
void act_msg_set_gpu(struct act_msg *m, uint32_t backend, uint32_t device,
		     void *ptr, size_t len);
void act_msg_set_rdma(struct act_msg *m, uint16_t node, uint64_t addr,
		      uint32_t rkey, uint64_t len);
/* Exit reason carried by an ACT_TAG_EXIT / ACT_TAG_DOWN notification. */
static inline int act_msg_reason(const struct act_msg *m) { return m->_reason; }

/* ---- exit reasons ----------------------------------------------------------
 * int: >= 0 are the named reasons below, < 0 an error code (-errno/ZB_ERR_*). */
#define ACT_NORMAL   0 /* finished; links ignore it unless trapping */
#define ACT_SHUTDOWN 1 /* asked to stop (supervisor) */
#define ACT_KILLED   2 /* died from ACT_KILL */
#define ACT_NOPROC   3 /* the monitored/linked actor did not exist */
#define ACT_KILL     4 /* signal only: untrappable, the target dies `killed` */
const char *act_reason_name(int reason); /* "normal", "shutdown", ..., or zb_strerror */

/* ---- behaviours and spawning ---------------------------------------------- */
struct act_ctx; /* the running actor, valid inside its callbacks */

#define ACT_STATE_INLINE 32

struct act_behaviour {
	const char *name;
	size_t state_size;  /* zeroed at spawn; <= ACT_STATE_INLINE is free */
	/* Runs synchronously inside act_spawn (on the caller's thread) with the
	 * actor not yet visible to other workers. Nonzero: spawn fails with it. */
	int (*init)(struct act_ctx *ctx, void *arg);
	/* One message. Return 0, or a negative code: the actor exits with it. */
	int (*handle)(struct act_ctx *ctx, struct act_msg *m);
	/* Optional: runs once when the actor exits, with the reason. */
	void (*terminate)(struct act_ctx *ctx, int reason);
};

struct act_spawn_opts {
	bool link;       /* link to the calling actor (needs an actor context) */
	bool trap_exit;  /* start trapping exits */
	uint32_t home;   /* preferred worker + 1; 0: the caller's or round-robin */
};

/* Spawns an actor running `beh`, calling beh->init(ctx, arg). 0 and *out,
 * or -ENOBUFS (no slot), -ENOMEM (large state), -EINVAL, or init's error.
 * When init fails the link (opts.link) is undone on both sides: the caller
 * gets the error and no EXIT (OTP's start_link returning {error, R}). */
int act_spawn(struct act_runtime *rt, const struct act_behaviour *beh,
	      void *arg, act_id *out);
int act_spawn_opt(struct act_runtime *rt, const struct act_behaviour *beh,
		  void *arg, const struct act_spawn_opts *o, act_id *out);

act_id act_self(const struct act_ctx *ctx);
void *act_state(struct act_ctx *ctx);
struct act_runtime *act_ctx_runtime(const struct act_ctx *ctx);
/* Ends the actor with `reason` when the current callback returns. */
void act_exit(struct act_ctx *ctx, int reason);
/* Trap exits: exit signals become ACT_TAG_EXIT messages (except ACT_KILL). */
void act_trap_exit(struct act_ctx *ctx, bool on);
/* Keeps the message being handled: the handler now owns it. */
void act_msg_take(struct act_ctx *ctx, struct act_msg *m);
/* Counts extra reductions for expensive work done in a handler. */
void act_consume(struct act_ctx *ctx, uint32_t reductions);
/* Ends this run after the current message: if the mailbox still holds
 * messages the actor goes to the back of the run queue. The way to wait out
 * backpressure: send yourself a "retry" message, then yield. */
void act_yield(struct act_ctx *ctx);

/* True while `id` names a live local actor. */
bool act_alive(struct act_runtime *rt, act_id id);

/* ---- sending ----------------------------------------------------------------
 * Per sender-receiver pair, messages arrive in send order. Remote ids go to
 * the router. On error the message stays with the caller. -EINVAL: the tag
 * is reserved (> ACT_TAG_USER_MAX) and not ACT_TAG_UNDELIVERED (which the
 * remote router sends): EXIT, DOWN and TIMEOUT come from the runtime only,
 * so that no sender can forge them (a forged EXIT stopped a supervisor).
 * To a remote id the router (zbmd/remote.h) also refuses, -EINVAL, an
 * ACT_TAG_UNDELIVERED that is not a call's error reply. */
int act_send(struct act_runtime *rt, act_id to, struct act_msg *m);
/* Alloc + inline copy + send; frees on failure. */
int act_tell(struct act_runtime *rt, act_id to, uint32_t tag,
	     const void *data, size_t len);

/* Remote routing, installed by the dataplane: called for every send whose
 * to.node != params.node; returns 0 when it took the message (it frees it
 * with act_msg_free once serialised) or a negative code (caller keeps it). */
typedef int (*act_router_fn)(void *ctx, struct act_msg *m);
void act_set_remote_router(struct act_runtime *rt, act_router_fn fn, void *ctx);
/* Delivers a message received from another node (allocated with
 * act_msg_alloc, from/to/tag/payload filled) into a local mailbox. Same
 * errors as act_send; ZB_ERR_STALE_ID also when to.node is not this node. */
int act_deliver_remote(struct act_runtime *rt, struct act_msg *m);

/* Remote links and monitors (hooks for the router; docs/remote.md).
 * act_link / act_unlink / act_monitor / act_demonitor on a remote id, and
 * the exit notices a dying actor owes to remote peers and watchers, reach
 * the router as messages whose act_msg_signal() is not ACT_SIG_NONE:
 * from = the local actor, to = the remote one, ref = the monitor's ref,
 * act_msg_reason() = the exit reason. The router takes them like messages
 * (0: it frees them once serialised) or refuses with an error; a refused
 * LINK makes act_link return that error (no link), a refused MONITOR gives
 * an immediate DOWN with the error as reason when it is ZB_ERR_PEER_DOWN or
 * -EHOSTUNREACH (Erlang's noconnection) and else makes act_monitor return
 * it (no monitor); other refused signals are dropped. The receiving node
 * hands them to act_deliver_remote_signal. Values equal the runtime's
 * internal signal types (static_assert in actors/internal.h). */
enum act_signal {
	ACT_SIG_NONE = 0,
	ACT_SIG_EXIT_LINK = 1, /* the linked `from` exited with reason */
	ACT_SIG_EXIT = 2,      /* act_exit_signal(to, reason) */
	ACT_SIG_LINK = 3,      /* `from` links to `to` */
	ACT_SIG_UNLINK = 4,
	ACT_SIG_MONITOR = 5,   /* `from` monitors `to` with ref */
	ACT_SIG_DEMONITOR = 6, /* `from` cancels its monitor ref of `to` */
	ACT_SIG_DOWN = 7,      /* monitored `from` exited: DOWN ref to `to` */
};
static inline int act_msg_signal(const struct act_msg *m) { return m->_sys; }
/* Makes a message the router owns a signal (a router's own answers:
 * e.g. a DOWN with -ENOSPC when it cannot record a monitor). */
static inline void act_msg_set_signal(struct act_msg *m, int sig, int reason)
{
	m->_sys = (uint8_t)sig;
	m->_reason = reason;
}
/* Delivers signal `sig` (one of the above) with `reason` from the remote
 * actor m->from to the local actor m->to (m->ref for monitors), ignoring
 * mailbox capacity; the target's link/monitor state decides what it does,
 * exactly as for a local signal (an EXIT_LINK or DOWN nobody expects is
 * dropped). m is always consumed. 0; ZB_ERR_STALE_ID: the target is gone,
 * and a LINK or MONITOR is then answered through the router with
 * EXIT_LINK / DOWN reason ACT_NOPROC; -EINVAL: bad sig or to not local. */
int act_deliver_remote_signal(struct act_runtime *rt, struct act_msg *m, int sig,
			      int reason);

/* Exit signal to `to` with `reason` (ACT_KILL cannot be trapped; ACT_NORMAL
 * is ignored by a non-trapping target). Not subject to mailbox capacity.
 * A remote `to` goes through the router (the router's error, or 0: sent;
 * from = the calling actor, or node-only act_id_make(node, 0, 0) from a
 * thread that is not an actor). */
int act_exit_signal(struct act_runtime *rt, act_id to, int reason);

/* ---- request / reply --------------------------------------------------------
 * act_call: for threads that are not actors (control thread, CLI, tests):
 * sends `req` (ownership moves, also on error) from a temporary port and
 * waits up to timeout_ns for the reply, returned in *reply (caller frees);
 * UINT64_MAX (or any timeout past the clock's range) waits without limit.
 * A reply after the timeout finds the port gone and is discarded.
 * 0, ZB_ERR_TIMEOUT, -EDEADLK (called on a worker: inside an actor it would
 * stall the worker), the send error, or the error of an ACT_TAG_UNDELIVERED
 * reply (a remote request that could not be delivered). */
int act_call(struct act_runtime *rt, act_id to, struct act_msg *req,
	     uint64_t timeout_ns, struct act_msg **reply);
/* act_call_async: inside an actor. Sends `req` with a fresh ref (*ref). The
 * reply arrives later as a message with ACT_MF_REPLY and that ref, or, if
 * none came within timeout_ns, an ACT_TAG_TIMEOUT message with that ref; a
 * reply after the timeout is discarded, never delivered as a stray. */
int act_call_async(struct act_ctx *ctx, act_id to, struct act_msg *req,
		   uint64_t timeout_ns, uint64_t *ref);
/* Replies to `req` (to = req->from, ref = req->ref). Ownership of reply moves. */
int act_reply(struct act_runtime *rt, const struct act_msg *req,
	      struct act_msg *reply);

/* ---- timers ------------------------------------------------------------------
 * Delivers `m` to `to` after delay_ns (ownership moves now). *tref may be
 * NULL. A full mailbox at expiry retries every millisecond; a dead target
 * drops it (counted). 0, -ENOBUFS (timer slots of this worker used up) or
 * -EINVAL (a reserved tag, as act_send). */
int act_send_after(struct act_runtime *rt, act_id to, uint64_t delay_ns,
		   struct act_msg *m, uint64_t *tref);
/* 0 if cancelled before it fired (the message is freed: at once when called
 * on the worker that armed it, else on that worker's next timer pass, never
 * left until the old deadline), else -ENOENT. */
int act_cancel_timer(struct act_runtime *rt, uint64_t tref);

/* ---- links and monitors (inside an actor) ------------------------------------ */
/* Bidirectional link. ZB_ERR_STALE_ID if `other` is dead (no link made).
 * A remote `other` (zbmd/remote.h): the router's error (no link made:
 * ZB_ERR_PEER_DOWN, -EHOSTUNREACH, -ENOSPC link table full,
 * ZB_ERR_MAILBOX_FULL, ZB_ERR_STALE_ID generation 0); a remote actor that turns out dead sends back an
 * exit signal with ACT_NOPROC instead, as Erlang's link does. */
int act_link(struct act_ctx *ctx, act_id other);
int act_unlink(struct act_ctx *ctx, act_id other);
/* Monitor: one ACT_TAG_DOWN message with *ref when `target` exits
 * (immediately with ACT_NOPROC if it is already dead). A remote target:
 * DOWN with its exit reason, ACT_NOPROC when it does not exist there, or
 * ZB_ERR_PEER_DOWN when its node is (or becomes) unreachable; act_monitor
 * returns -ENOSPC / ZB_ERR_MAILBOX_FULL (no monitor, *ref = 0) when the
 * router cannot take it. */
int act_monitor(struct act_ctx *ctx, act_id target, uint64_t *ref);
/* Cancels a monitor; no DOWN for it arrives afterwards. 0 or -ENOENT. */
int act_demonitor(struct act_ctx *ctx, uint64_t ref);

/* ---- name registry (control path: takes a lock; cache the id) --------------- */
#define ACT_NAME_MAX 31
/* 0, -EEXIST (name taken), -EALREADY (the actor has a name already: one
 * name per actor, as Erlang's register/2; act_unregister it first), -ENOSPC,
 * -EINVAL, ZB_ERR_STALE_ID. The name goes away when the actor exits. */
int act_register(struct act_runtime *rt, const char *name, act_id id);
int act_unregister(struct act_runtime *rt, const char *name); /* 0 / -ENOENT */
act_id act_whereis(struct act_runtime *rt, const char *name); /* or NONE */

/* ---- supervisors ------------------------------------------------------------- */
enum act_strategy { ACT_ONE_FOR_ONE, ACT_ONE_FOR_ALL, ACT_REST_FOR_ONE,
		    ACT_SIMPLE_ONE_FOR_ONE };
enum act_restart { ACT_PERMANENT, ACT_TRANSIENT, ACT_TEMPORARY };
enum act_backoff { ACT_BACKOFF_NONE, ACT_BACKOFF_LINEAR, ACT_BACKOFF_EXP };

struct act_child_spec {
	const char *name;
	const struct act_behaviour *beh;
	void *arg;
	enum act_restart restart;
	uint64_t shutdown_ns; /* grace after `shutdown` before `kill` (0: 1 s) */
};

/* The spec (and the child specs it points to) must outlive the supervisor. */
struct act_sup_spec {
	enum act_strategy strategy;
	uint32_t max_restarts;      /* restarts allowed within window_ns ... */
	uint64_t window_ns;         /* ... more: stop children, exit `shutdown` */
	enum act_backoff backoff;
	uint64_t backoff_base_ns;   /* k-th restart in the window waits base*k
				     * (linear) or base*2^(k-1) (exp) ... */
	uint64_t backoff_max_ns;    /* ... at most this (0: no cap); the
				     * products saturate, never wrap */
	const struct act_child_spec *children; /* started in order */
	uint32_t n_children;        /* simple_one_for_one: exactly 1 template */
	uint32_t max_children;      /* simple_one_for_one capacity (0: 64) */
};

/* Starts a supervisor (linked to the caller when called inside an actor,
 * which is then its parent) and its children in order. 0 or an error (a
 * child's init failed: that error; the children already started are
 * killed, in reverse start order, trapping or not, without the shutdown_ns
 * grace: nothing remains). */
int act_sup_start(struct act_runtime *rt, const struct act_sup_spec *spec,
		  act_id *out);
/* The supervisor behaviour itself, for a supervisor that is the child of
 * another: {"name", &act_sup_behaviour, (void *)&its_sup_spec, ...}. */
extern const struct act_behaviour act_sup_behaviour;
/* simple_one_for_one: starts a child of the template with `arg`. Returns
 * at once: 0 (the request is queued at the supervisor), ZB_ERR_STALE_ID (no
 * such live local actor), -EINVAL (not a supervisor, or not
 * simple_one_for_one), -ENOBUFS, ZB_ERR_MAILBOX_FULL. The outcome arrives
 * later, to the calling actor, as an ACT_TAG_SUP_STARTED message: reason 0
 * and the child's id, or -ENOSPC (max_children running), -ESHUTDOWN (the
 * supervisor is stopping) or the child init's error. Called from a thread
 * that is not an actor, nobody is told (act_sup_child shows the children). */
int act_sup_start_child(struct act_runtime *rt, act_id sup, void *arg);
/* Current child id at index i (start order), NONE if not running. Test/debug
 * aid: reads supervisor state racily; use when the runtime is quiescent. */
act_id act_sup_child(struct act_runtime *rt, act_id sup, uint32_t i);

/* ---- statistics ---------------------------------------------------------------- */
struct act_stats {
	uint64_t messages;     /* handled */
	uint64_t sends, send_full, send_stale;
	uint64_t preemptions;  /* runs ended by the reductions budget */
	uint64_t steals;       /* actors moved by stealing */
	uint64_t parks;        /* times a worker thread slept */
	uint64_t late_replies; /* replies discarded after a timeout */
	uint64_t timers_fired, timers_dropped;
	uint64_t restarts;     /* children restarted by supervisors */
	uint32_t actors_live;
	uint32_t msgs_free;    /* messages in the global free list (approx) */
	uint32_t msgs_in_use;  /* message_pool - msgs_free: queued in mailboxes,
				* in flight or held by actors (approx) */
};
void act_get_stats(struct act_runtime *rt, struct act_stats *out);
/* Bytes the runtime allocated at create (pools, queues). */
size_t act_runtime_footprint(const struct act_runtime *rt);

#endif /* ZBMD_ACTORS_H */
