/* zbmd/coll.h — collectives (ring all-reduce, reduce-scatter, all-gather,
 * broadcast, barrier) written once on the net interface (zbmd/net.h), and
 * the commands that drive them (`zbmd bench allreduce`, `zbmd local`).
 *
 * Model. A communicator (struct coll_comm) is the set of nodes of a config
 * ([peer.N] sections plus this node), ordered by node id: rank = position
 * of the node id in that order. Every channel is an independent ring
 * rank -> rank+1 over its own send/recv comms; a collective's buffer is split
 * between the channels, each channel's part into n blocks, each block into
 * chunks of at most [coll] chunk_kb, and the chunks are pipelined so that
 * sending, receiving and reducing overlap (docs/collectives.md).
 *
 * Collectives are non-blocking: coll_start() queues one and returns a
 * handle; coll_progress() moves every queued one forward and never blocks;
 * coll_test() reports completion. Collectives run one after another in
 * start order, and every rank must start the same sequence of collectives
 * (kind, count, dtype, op, root) — as with MPI/NCCL. A mismatch is detected
 * on the wire: the message tag is a 32-bit hash of the start sequence
 * number, the kind, count and dtype, the op of a reduction and the root of
 * a broadcast (fields a kind does not use may differ), and a rank that
 * receives a message with another tag fails with -ZB_ERR_BAD_FRAME (two
 * different collectives share a tag with probability 2^-32). A rank fails
 * only when it receives from a rank that disagrees: a broadcast whose ranks
 * disagree on the root can complete where the chain brings no message
 * across the disagreement (two ranks that both think they are the root
 * only send); the message left over then fails the next collective with
 * -ZB_ERR_BAD_FRAME (or its ranks time out, -ZB_ERR_TIMEOUT). A collective
 * of count 0 is not a no-op: it exchanges one empty message with each ring
 * neighbour (channel 0), so that its tag is checked like any other.
 * Mismatches are detected, never resolved: the communicator is dead after
 * one.
 *
 * Failures. A peer that goes away (connection reset or closed) fails the
 * running collective with -ZB_ERR_PEER_DOWN; a channel that makes no
 * progress for [coll] timeout_ms fails it with -ZB_ERR_TIMEOUT. A failure
 * closes every connection of the communicator at once, so the neighbours
 * see it immediately and the failure travels around the ring: every
 * surviving rank fails within timeout_ms. Where a control plane runs (the
 * dpdk host with [control] on), a committed membership change that removes
 * one of the communicator's nodes fails it sooner, on every survivor, with
 * -ZB_ERR_EPOCH ("membership epoch changed from E1 to E2: node N removed";
 * coll_abort_async()). After a failure the communicator is unusable (every
 * call returns the error); destroy it.
 *
 * Threads: a communicator belongs to one thread (an lcore, the benchmark's
 * main thread); the callbacks run on it, from coll_progress().
 *
 * Memory: everything (comms, request rings, scratch slots, handles) is
 * allocated in coll_comm_create(); start/progress/test never allocate.
 */
#ifndef ZBMD_COLL_H
#define ZBMD_COLL_H

#include "zbmd/common.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct zb_config;
struct coll_comm;
struct coll_op;

#define COLL_MAX_OPS 16         /* collectives queued per communicator */
#define COLL_CONNECT_TIMEOUT_MS 30000

struct coll_comm_args {
	const struct zb_config *cfg;  /* node id, peers, [transport], [coll] */
	const char *provider;         /* "tcp", "dpdk", "rdma"; NULL = [transport] kind */
	void *provider_arg;           /* passed to the provider's init */
	uint16_t channels;            /* 0 = [coll] channels */
	uint32_t chunk_bytes;         /* 0 = [coll] chunk_kb * 1024 */
	uint32_t timeout_ms;          /* 0 = [coll] timeout_ms */
	uint32_t connect_timeout_ms;  /* 0 = COLL_CONNECT_TIMEOUT_MS */
	bool threaded_channels;       /* see coll_progress_channel() */
	/* threaded_channels: called by the owner after it published a
	 * collective to the channels, to wake the thread(s) that progress them
	 * (the dpdk host: dp_lcore_kick of the lane). NULL: nothing to wake. */
	void (*kick)(void *kick_arg);
	void *kick_arg;
};

/* Create a communicator: start the provider, connect both ring neighbours
 * on every channel (this call blocks, up to connect_timeout_ms, while the
 * other nodes come up), allocate the scratch slots.
 * Returns 0 and *out, or a negative error with a message in err:
 *   -EINVAL        bad arguments, this node not in the config's peers
 *   -ENOENT        no provider of that name (net_find)
 *   -ZB_ERR_TIMEOUT a neighbour did not connect in time
 *   -ENOMEM, or the provider's init error (-EADDRINUSE, ...). */
int coll_comm_create(const struct coll_comm_args *a, struct coll_comm **out,
		     char *err, size_t errlen);
/* Owner thread (threaded channels: once every lane stopped calling). The
 * comms close first; then collectives still queued or running complete with
 * -ECANCELED (or the communicator's earlier failure): their callbacks run
 * from here. A handle started without a callback is gone with the
 * communicator (reap it with coll_test() before). */
void coll_comm_destroy(struct coll_comm *c);

uint32_t coll_rank(const struct coll_comm *c);
uint32_t coll_nranks(const struct coll_comm *c);
uint16_t coll_channels(const struct coll_comm *c);
uint32_t coll_chunk_bytes(const struct coll_comm *c);
const char *coll_provider(const struct coll_comm *c);
/* The net provider the config's [transport] kind names: "dpdk", "tcp",
 * "rdma" (what coll_comm_create takes when args.provider is NULL). */
const char *coll_default_provider(const struct zb_config *cfg);
uint16_t coll_node_of_rank(const struct coll_comm *c, uint32_t rank);

/* Change the no-progress bound ([coll] timeout_ms) between collectives
 * (owner thread): e.g. a long one for a first barrier that waits for the
 * other nodes to start. 0, -EINVAL (0 ms), -EBUSY (a collective is queued
 * or running: nothing changed). */
int coll_set_timeout(struct coll_comm *c, uint32_t timeout_ms);

/* Fail the communicator from outside: the control plane calls it when the
 * membership epoch changes (err = ZB_ERR_EPOCH) or the node shuts down
 * (ZB_ERR_SHUTDOWN). Queued and running collectives complete with err, the
 * connections close (so the other ranks fail at once with
 * -ZB_ERR_PEER_DOWN), and every later call returns err. `why` ends up in
 * coll_error(). Owner thread only. Returns err (or the earlier failure). */
int coll_abort(struct coll_comm *c, int err, const char *why);

/* coll_abort() from any thread (a dataplane lcore's dp_on_epoch callback,
 * the control thread): lock-free, never blocks, allocates nothing. The
 * first request wins (err and why are copied; later ones return -EALREADY).
 * The owner applies it as coll_abort(c, err, why) at its next
 * coll_progress() / coll_start() (so a running collective fails within one
 * owner poll — coll_wait() polls at least every 160 us — and a later one
 * is refused); the lanes then close their comms as for any failure.
 * 0, -EALREADY. */
int coll_abort_async(struct coll_comm *c, int err, const char *why);

/* The communicator's last failure in words ("rank 1 (node 1): recv from
 * node 0 on channel 0: peer down"), "" when none. */
const char *coll_error(const struct coll_comm *c);

enum coll_kind {
	COLL_ALLREDUCE = 0,     /* recvbuf[i] = OP over ranks of sendbuf[i]; count each */
	COLL_REDUCE_SCATTER,    /* sendbuf: nranks*count; recvbuf: count (block rank) */
	COLL_ALLGATHER,         /* sendbuf: count; recvbuf: nranks*count */
	COLL_BROADCAST,         /* root's sendbuf -> everyone's recvbuf; count */
	COLL_BARRIER,           /* no buffers */
	COLL_KIND_COUNT
};

const char *coll_kind_name(enum coll_kind k);

/* Completion callback (actors: post the completion message from here). Runs
 * inside coll_progress(); the op is released right after it returns, so a
 * collective started with a callback needs no coll_test(). */
typedef void (*coll_done_fn)(void *arg, int status);

struct coll_args {
	enum coll_kind kind;
	const void *sendbuf;    /* may equal recvbuf (in place; for reduce-
				 * scatter in place is recvbuf == sendbuf +
				 * rank*count, for all-gather sendbuf ==
				 * recvbuf + rank*count, as in NCCL); any
				 * other overlap of the two is -EINVAL
				 * (coll_start). Broadcast: read on the
				 * root only (in place: sendbuf == recvbuf);
				 * other ranks may pass anything, NULL too */
	void *recvbuf;
	size_t count;           /* elements (per rank for RS / AG) */
	enum zb_dtype dtype;
	enum zb_redop op;       /* all-reduce, reduce-scatter */
	uint32_t root;          /* broadcast: root rank */
	coll_done_fn done;      /* optional */
	void *done_arg;
};

/* Queue a collective. Buffers stay owned by the caller and must stay valid
 * (and sendbuf unmodified) until completion. A failed completion closed the
 * comms first: no provider reads or writes them any more (dpdk: except a
 * port's zero-copy frames until it transmits them, docs/collectives.md). ZB_AVG is a sum scaled by
 * 1/nranks at the end (gpu_host_avg): floats round once; integers are the
 * integer sum divided by nranks exactly, rounded to nearest with ties away
 * from zero (the sum wraps as ZB_SUM's does: an i32 sum that overflows
 * gives the average of the wrapped sum).
 * Returns 0 and *op (NULL allowed when a.done is set), or
 *   -EINVAL    bad kind/dtype/op/root, NULL buffer with count > 0, send
 *              and receive buffers that overlap other than in place (see
 *              sendbuf); refused here, the communicator is unaffected
 *   -EAGAIN    COLL_MAX_OPS handles taken: collectives queued, plus
 *              finished ones started without a callback and not yet
 *              reaped by coll_test()
 *   the communicator's error after a failure. */
int coll_start(struct coll_comm *c, const struct coll_args *a,
	       struct coll_op **op);

/* Move every queued collective forward; never blocks. Returns the number
 * of events (messages completed, collectives finished) — 0 means idle —
 * or the communicator's error once it has failed. */
int coll_progress(struct coll_comm *c);

/* Channels on several lcores (communicator created with threaded_channels):
 * channel ch is progressed only by coll_progress_channel(c, ch), called in
 * a loop by one thread per channel (its lcore's poller); coll_progress() on
 * the owner thread then only starts collectives (publishing them to the
 * channels), collects the channels' results and completes them. A channel
 * that fails closes its own connections at once; the owner then fails the
 * communicator and every other channel closes its connections on its next
 * call. Keep calling it until the owner stops (coll_comm_destroy() only
 * after every lane stopped calling). Never blocks, never allocates.
 * Returns events handled (0 = idle), or a negative error once the channel
 * or the communicator failed. The provider must allow its comms to be used
 * from different threads (one thread per comm), as net.h requires; the
 * provider's ctx-level progress()/wait() are not called in this mode, and
 * coll_stats_get() is exact only between collectives. */
int coll_progress_channel(struct coll_comm *c, uint16_t ch);

/* Poll one collective (started without a callback). *done = 1 when it
 * finished; then its status is returned (0 or the error) and the op is
 * released. Does not progress by itself: call coll_progress(). */
int coll_test(struct coll_op *op, int *done);

/* Block until op finished: progress, and sleep in the provider's wait()
 * when idle (so that nodes can share cores). Returns the op's status. */
int coll_wait(struct coll_comm *c, struct coll_op *op);

/* Blocking wrappers: start + wait. */
int coll_allreduce(struct coll_comm *c, const void *sendbuf, void *recvbuf,
		   size_t count, enum zb_dtype dt, enum zb_redop op);
int coll_reduce_scatter(struct coll_comm *c, const void *sendbuf,
			void *recvbuf, size_t count, enum zb_dtype dt,
			enum zb_redop op);
int coll_allgather(struct coll_comm *c, const void *sendbuf, void *recvbuf,
		   size_t count, enum zb_dtype dt);
int coll_broadcast(struct coll_comm *c, const void *sendbuf, void *recvbuf,
		   size_t count, enum zb_dtype dt, uint32_t root);
int coll_barrier(struct coll_comm *c);

/* Where the time goes (accumulated since creation or the last reset). */
struct coll_stats {
	uint64_t collectives;           /* completed */
	uint64_t messages;              /* sends + receives completed */
	uint64_t bytes_sent, bytes_received;
	uint64_t reduce_ns;             /* gpu_host_reduce + gpu_host_scale */
	uint64_t copy_ns;               /* local copies (own all-gather block,
					 * broadcast root, single rank) */
	uint64_t wait_ns;               /* asleep in the provider's wait() */
	uint64_t post_ns;               /* inside the provider's isend() (dpdk:
					 * tp_send framing the message) */
	uint64_t test_ns;               /* inside the provider's test() (dpdk: a
					 * payload held back by the window is
					 * handed to tp_send from there) */
	uint64_t blocking_ns;           /* inside coll_wait() altogether */
	uint64_t recvs_direct;          /* receives into dst (all-gather steps) */
	uint64_t recvs_cold;            /* ... of which hinted NET_RECV_COLD
					 * ([coll] stream_min_kb) */
};
void coll_stats_get(const struct coll_comm *c, struct coll_stats *out);
void coll_stats_reset(struct coll_comm *c);

/* ---- the ring schedule (pure arithmetic; exposed for tests) ------------- */

/* Balanced split of `total` into `parts`: part i is [coll_split(total,
 * parts, i), coll_split(total, parts, i + 1)); sizes differ by at most 1. */
static inline size_t coll_split(size_t total, size_t parts, size_t i)
{
	return (size_t)(((unsigned __int128)total * i) / parts);
}

/* What one rank does at one position of one channel's sequence. Both ends
 * of a link compute the same sequence, so the k-th send of rank r matches
 * the k-th receive of rank r+1 (net.h's in-order matching). */
enum coll_recv_kind {
	COLL_RECV_NONE = 0,
	COLL_RECV_DIRECT,       /* into dst */
	COLL_RECV_REDUCE,       /* into a slot; then dst = dst OP slot */
	COLL_RECV_REDUCE_FWD,   /* into a slot; slot = slot OP mine; the next
				 * position's send goes out of this slot */
	COLL_RECV_DIRECT_REDUCE, /* into dst; then dst = dst OP mine */
};

struct coll_xfer {
	bool has_send;
	bool send_from_slot;    /* send the slot filled at position pos-1 */
	size_t send_off;        /* byte offset into the send source */
	int send_src;           /* COLL_BUF_SEND or COLL_BUF_RECV */
	size_t send_bytes;
	int64_t send_dep;       /* recv position that must be processed, -1 */

	enum coll_recv_kind recv_kind;
	size_t recv_off;        /* byte offset into recvbuf (dst) */
	size_t recv_bytes;
	int64_t mine_off;       /* REDUCE_FWD, DIRECT_REDUCE: sendbuf offset of own part */
	int64_t recv_guard_send; /* send position that must be complete, -1 */
	int64_t recv_guard_recv; /* recv position that must be processed, -1 */
	bool scale_after;       /* avg: scale dst by 1/n after processing */
};
enum { COLL_BUF_SEND = 0, COLL_BUF_RECV = 1 };

struct coll_plan {
	enum coll_kind kind;
	uint32_t n, rank, root;
	size_t esize;           /* bytes per element */
	size_t count;           /* the collective's count (per rank for RS/AG) */
	size_t base, len;       /* this channel's region, elements */
	size_t nchunks;         /* K */
	uint32_t steps;         /* positions per chunk */
	bool avg;
	bool in_place;
};

/* coll_plan.kind of a collective of count 0 on more than one rank: one
 * position, an empty message to the next rank and one from the previous
 * (one per link, so every rank's tag meets both neighbours': a rank that
 * starts count 0 while the others start more fails with -ZB_ERR_BAD_FRAME,
 * and so do they, instead of its finishing alone and the others waiting). */
#define COLL_PLAN_EMPTY ((enum coll_kind)COLL_KIND_COUNT)

/* Fill plan for channel ch of nch; chunk_elems >= 1. count 0 with n > 1:
 * the empty exchange (COLL_PLAN_EMPTY; the engine plans channel 0 only). */
void coll_plan_init(struct coll_plan *p, enum coll_kind kind, uint32_t n,
		    uint32_t rank, uint32_t root, size_t count, size_t esize,
		    uint16_t ch, uint16_t nch, size_t chunk_elems, bool avg,
		    bool in_place);
/* Positions in the plan (nchunks * steps). */
static inline uint64_t coll_plan_positions(const struct coll_plan *p)
{
	return (uint64_t)p->nchunks * p->steps;
}
/* What happens at position pos (< coll_plan_positions). */
void coll_plan_xfer(const struct coll_plan *p, uint64_t pos, struct coll_xfer *x);

/* ---- hosts: communicators progressed by a provider's own threads ---------
 * Some providers must be driven from particular threads: the dpdk provider's
 * comms belong to the dataplane lcore of their lane. Such a provider comes
 * with a host, registered by its module (the dataplane module does it from a
 * constructor, so that coll never links DPDK): open() starts what the
 * provider needs (the node's dataplane, in-process), creates one
 * communicator per lane (threaded_channels: the lanes' loops call
 * coll_progress_channel()), and run() calls fn on a thread that may own
 * those communicators (coll_start/coll_wait on them). A caller splits each
 * collective between the communicators (lane k takes part k of the buffer,
 * coll_split()). close() stops the lanes, destroys the communicators and
 * stops the node. */
#define COLL_HOST_MAX_LANES 16

/* What the lanes did (monotonic; read between collectives). */
struct coll_host_stats {
	uint32_t lanes;
	uint64_t coll_ns;       /* inside coll_progress_channel() with work done */
	uint64_t idle_ns;       /* loop iterations with nothing to do (sleeps too) */
	uint64_t loop_ns;       /* every iteration (so loop - coll - idle = the
				 * transport: rx/tx, reassembly, provider copies) */
	/* parts of that transport time: inside the drivers' RX and TX bursts
	 * (memif: the PMD's copies out of and into the shared rings), and
	 * the provider writing payloads into posted receives (plain copies;
	 * reductions fused with the receive, irecv_reduce) */
	uint64_t rx_burst_ns, tx_burst_ns, recv_copy_ns, recv_reduce_ns;
	uint64_t rx_packets, tx_packets;
	/* the lanes' transports (since start): recovery and fault injection */
	uint64_t retransmits, fault_drops, fault_dups, fault_reorders;
	/* expiries of a peer's oldest retransmission timer (each resends
	 * the frames then due); frames resent fast (the acks said they were
	 * missing); frames received twice (a retransmit whose original had
	 * arrived); frames dropped for want of room in the reassembly arena */
	uint64_t rto_timeouts, fast_retransmits, dup_frames, no_buffer_drops;
	/* messages the transports delivered (a payload and its 8-byte header
	 * are two), and those written straight into a posted receive (the
	 * rest went through the reassembly arena: one more copy) */
	uint64_t msgs_delivered, msgs_placed;
};

/* What a lane's loop calls as its communicator's owner (coll_host_ops.own):
 * events (0 idle), never blocking. */
struct coll_lane_owner {
	int (*poll)(void *arg);
	void *arg;
};

struct coll_host_ops {
	const char *provider;   /* the net provider this host drives ("dpdk") */
	int (*open)(const struct coll_comm_args *a, void **host, char *err,
		    size_t errlen);
	/* The communicators, lane order; returns how many (<= max). */
	unsigned (*comms)(void *host, struct coll_comm **out, unsigned max);
	/* Run fn(arg) where it may own the communicators; returns fn's value. */
	int (*run)(void *host, int (*fn)(void *arg), void *arg);
	void (*stats)(void *host, struct coll_host_stats *out);
	/* One line naming the node ("lcores 2, lanes 1, ports 3 (net_memif)"). */
	void (*describe)(void *host, char *buf, size_t len);
	void (*close)(void *host);
	/* Optional: hand the ownership of lane `lane`'s communicator to that
	 * lane's loop, which then calls o->poll(o->arg) on every iteration
	 * (its events count as the loop's work) until own(host, lane, NULL)
	 * takes it back: that call returns once the loop no longer calls it,
	 * and the caller owns the communicator again. From run()'s fn only.
	 * 0, -EINVAL (bad lane), -EBUSY (the lane has an owner already). */
	int (*own)(void *host, unsigned lane, const struct coll_lane_owner *o);
	/* Optional: wake lane `lane`'s loop if it sleeps (any thread). */
	void (*wake)(void *host, unsigned lane);
};

/* Register a host (before main, or before the first coll_host_find()).
 * 0, -EINVAL (missing op), -EEXIST (that provider has one), -ENOSPC. */
int coll_host_register(const struct coll_host_ops *ops);
/* The host for provider `name`, or NULL (the provider runs on the caller's
 * thread: tcp, rdma). */
const struct coll_host_ops *coll_host_find(const char *name);

/* The communicators of a run: through the provider's host when it has one
 * (and does not decline with -EOPNOTSUPP), one per lane; else one made on
 * the caller's thread (coll_comm_create). open: 0, or an error with err
 * filled (a->provider NULL: coll_default_provider). run: fn where it may
 * own the communicators. close: what open made. */
struct coll_hosted {
	const struct coll_host_ops *host;   /* NULL: on the caller's thread */
	void *hh;                           /* the host's handle */
	struct coll_comm *comms[COLL_HOST_MAX_LANES];
	unsigned ncomm;                     /* >= 1 once open */
};
int coll_hosted_open(const struct coll_comm_args *a, struct coll_hosted *h,
		     char *err, size_t errlen);
int coll_hosted_run(struct coll_hosted *h, int (*fn)(void *), void *arg);
void coll_hosted_close(struct coll_hosted *h);

/* ---- actors: collectives by message (dataplane/actor_coll.c) -------------
 * A training actor hands its gradient buffer to the communicator and gets a
 * completion message. The service belongs to the communicator's owner
 * thread, which calls coll_svc_poll() in its loop (never blocks, never
 * allocates); any actor, on any worker, calls coll_svc_submit(). On
 * completion the actor `reply_to` gets a message with `tag` whose inline
 * payload is a struct coll_done_msg: status 0, or the error — a failed
 * communicator (peer down, timeout, epoch change) fails every collective
 * submitted to it, each with its own message. Collectives run in
 * submission order; as with coll_start(), every rank must submit the same
 * sequence (one submitting actor per node, or a fixed order between them).
 * Buffers stay the actor's and must stay valid until its message comes.
 * Linked from the dataplane archive (it needs the actor runtime). */
#define COLL_SVC_DEPTH 16       /* submitted and not yet told, at most */

struct act_runtime;
struct coll_svc;

struct coll_done_msg {
	int32_t status;         /* 0 or a negative error (zb_strerror) */
	uint32_t kind;          /* enum coll_kind */
	uint64_t cookie;        /* as submitted */
};

struct coll_svc_stats {
	uint64_t started, completed, failed;    /* collectives */
	uint64_t told;          /* completion messages sent */
	uint64_t deferred;      /* sends retried later (no message/mailbox space) */
	uint64_t orphaned;      /* completions whose actor had gone */
	uint64_t lcore_polls;   /* polls made by a dataplane lcore's loop */
};

/* 0 and *out, -EINVAL, -ENOMEM. The service holds no reference on c. */
int coll_svc_create(struct coll_comm *c, struct act_runtime *rt,
		    struct coll_svc **out);
/* Any thread. a->done must be NULL (the service sets its own). 0; -EAGAIN
 * when COLL_SVC_DEPTH are in flight (wait for a completion message);
 * -EINVAL; the communicator's error once it has failed. Bad arguments
 * (dtype, root...) come back as the completion message's status. */
int coll_svc_submit(struct coll_svc *s, const struct coll_args *a,
		    uint64_t reply_to, uint32_t tag, uint64_t cookie);
/* Owner thread: start what was submitted, progress, send the completion
 * messages (one that finds no message or mailbox space waits for the next
 * poll). Events (0: idle), or the communicator's error once it failed (the
 * failed collectives' messages are sent all the same: keep polling until
 * coll_svc_pending() is 0). */
int coll_svc_poll(struct coll_svc *s);
/* Collectives submitted whose completion message has not gone yet. */
unsigned coll_svc_pending(const struct coll_svc *s);
/* Owner thread: coll_svc_poll() — yielding the CPU when idle — until *done
 * is set (the submitting actors are finished) and every completion message
 * has gone. 0, or -ETIMEDOUT after limit_ns (0: no limit). */
int coll_svc_poll_until(struct coll_svc *s, const _Atomic bool *done,
			uint64_t limit_ns);
void coll_svc_stats_get(const struct coll_svc *s, struct coll_svc_stats *out);
/* Owner thread: refuse new submissions (ZB_ERR_SHUTDOWN); when some are in
 * flight, abort the communicator with `why` and send their (failed)
 * completion messages. 0, or -EBUSY if messages could not go within ~1 s. */
int coll_svc_stop(struct coll_svc *s, const char *why);
void coll_svc_destroy(struct coll_svc *s);

/* A node's collectives for actors in one call (zbmd train, the tests): an
 * actor runtime on `workers` threads of its own (0: 2), the communicator of
 * the config's transport — on the node's dataplane through its host (dpdk:
 * the lanes' lcores progress the channels), or on the calling thread
 * (tcp) — and its service. open: 0, or an error with err filled. run: fn
 * where it may own the communicator. serve (from fn): the service runs until
 * *done is set and every completion message has gone — on lane 0's loop
 * when the host lets a lane own its communicator (dpdk: no thread of its
 * own; the caller sleeps meanwhile), else polled on the calling thread
 * (tcp); 0, or -ETIMEDOUT after limit_ns (0: none). close: stops the
 * service (failing what is in flight), the workers, the communicator; any
 * part that was opened. */
struct coll_actor_node {
	struct act_runtime *rt;
	struct coll_hosted h;           /* the communicator(s); the first serves */
	struct coll_comm *comm;         /* h.comms[0] */
	struct coll_svc *svc;
};
int coll_actor_node_open(const struct zb_config *cfg, unsigned workers,
			 struct coll_actor_node *n, char *err, size_t errlen);
int coll_actor_node_run(struct coll_actor_node *n, int (*fn)(void *), void *arg);
int coll_actor_node_serve(struct coll_actor_node *n, const _Atomic bool *done,
			  uint64_t limit_ns);
void coll_actor_node_close(struct coll_actor_node *n);

/* ---- commands (cli/main.c) ------------------------------------------------ */
int coll_bench_allreduce_main(int argc, char **argv);   /* zbmd bench allreduce */
int coll_local_main(int argc, char **argv);             /* zbmd local */
/* zbmd local's look at `bench allreduce ARGS` before it starts the nodes:
 * refused flags say why on stderr (-EINVAL); 0 where the nodes may run it.
 * LANES: each node's dataplane lanes (0: not known, the nodes check). */
int coll_bench_local_check(int argc, char **argv, unsigned nodes,
			   const char *link, const char *provider, unsigned lanes);

#endif /* ZBMD_COLL_H */
