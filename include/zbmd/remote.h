/* zbmd/remote.h — remote actors (zbra_): act_send / act_call / act_reply to
 * an ActorId of another node, carried by the reliable transport
 * (zbmd/transport.h) that the dataplane runs on its ports — or, with
 * [actors] carrier = tcp / rdma (or auto on a node without ports), by an
 * instance of that net provider (docs/remote.md "Carriers": one lane,
 * 4 KiB carrier messages into a posted-receive pool, long payloads
 * fragmented, credits as flow control and acknowledgement).
 *
 * Life cycle, main thread, in `zbmd run` (dataplane/cmd_run.c) or a test
 * program that hosts the actor runtime on the dataplane lcores:
 *
 *   dp_node_init(cfg) -> act_runtime_create -> zbra_attach(rt, cfg)
 *   (or both at once: zbra_host(cfg, &rt))
 *   -> dp_node_launch ... dp_node_stop -> act_runtime_destroy
 *   -> zbra_detach() -> dp_node_fini
 *
 * zbra_attach installs the runtime's remote router (act_set_remote_router),
 * the dataplane's transport consumer (dp_set_msg_ops) and one poller per
 * dataplane lcore. On a node without a transport (no port with an IP) it does
 * nothing and returns 0: remote sends keep failing with ZB_ERR_PEER_DOWN.
 *
 * Routing. A message from actor F to remote actor T travels on lane
 * L = h(F,T) mod lanes and transport stream S = first + h'(F,T) mod streams
 * (first = 8 when the transport has more than 8 streams per peer: 0..7 belong
 * to the dpdk net provider; else 0). The router (any thread: actors on any
 * worker, plain threads) only enqueues the message on lane L's lock-free
 * MPSC ring; lane L's poller, on lane L's lcore, serialises it and calls
 * tp_send. One (lane, stream) per pair plus the FIFO ring and the transport's
 * in-order streams give per-pair FIFO, also when F migrates between workers.
 * Every node must run the same number of dataplane lcores (lane L talks to
 * lane L).
 *
 * Wire (docs/remote.md): a record = a 72-byte little-endian header (magic,
 * payload kind, from, to, tag, flags, ref, ts_ns, descriptor words) followed
 * by the inline bytes. Consecutive messages of the lane's queue for the same
 * (peer, stream) without a buffer payload are coalesced: one transport
 * message carries up to 16 records (1 KiB); a receiver whose mailbox fills
 * in the middle of one holds it and resumes after the records it delivered.
 * An ACT_PL_BUF travels alone: its header and bytes in one message when
 * header + bytes <= 256, else as two
 * consecutive messages on the same stream: the header, then the payload sent
 * by reference (zero-copy: the transport/link attach the caller's buffer;
 * the sender's act_buf reference is dropped only when the transport and the
 * NIC are done). GPU and RDMA payloads travel as their descriptors. On
 * receipt a BUF payload is handed to the actor as an act_buf that refers to
 * the transport's reassembly arena (no copy); releasing the last reference
 * (any thread) gives the arena space back through the lane.
 *
 * Errors: see act_send (zbmd/actors.h). The router returns, synchronously:
 *   -EHOSTUNREACH        the node is not in the configuration (no [peer.N])
 *   ZB_ERR_PEER_DOWN     a lane's transport reported the node down (data
 *                        unacknowledged for peer_timeout_ms) and has heard
 *                        nothing from it since
 *   ZB_ERR_MAILBOX_FULL  the lane's ring is full (backpressure: retry later)
 *   -EMSGSIZE            a BUF payload larger than [transport] max_message
 *   -EINVAL              a record no receiver accepts: ACT_TAG_UNDELIVERED
 *                        that is not a call's error reply (ACT_MF_REPLY,
 *                        ref, negative reason; act_send refuses the other
 *                        reserved tags itself), an unknown payload kind
 * A message accepted by the router and then not delivered (the peer went
 * down / restarted before acknowledging it; a peer never heard from times out
 * after [transport] peer_timeout_ms) is reported asynchronously:
 *   - call request (ref set, not a reply): the caller receives a reply
 *     (ACT_MF_REPLY, same ref) with tag ACT_TAG_UNDELIVERED and
 *     act_msg_reason() = the error: act_call returns that error,
 *     act_call_async's actor gets that message instead of a timeout;
 *   - any other message from a local actor: that actor receives an
 *     ACT_TAG_UNDELIVERED message (from = the destination, ref = 0);
 *   - a reply, or a message sent from a non-actor thread: counted only
 *     (zbra_stats.failed; a caller waiting for the reply times out).
 * A call request that reaches its node after the actor there is gone is
 * answered by that node the same way, with ZB_ERR_STALE_ID (what act_call
 * to a dead local actor returns at once), not left to the call's timeout;
 * other messages to a gone actor are dropped (zbra_stats.stale), as a
 * local act_send to it would have been refused.
 * A remote mailbox that is full is backpressure, not loss: the receiving
 * lane refuses the message (deliver returns -EAGAIN), the transport holds
 * the stream and retries, its credit shrinks, the sender's window stalls,
 * the sending lane's ring fills and the router returns ZB_ERR_MAILBOX_FULL.
 * A message for an actor that is gone on arrival (including a reply whose
 * call timed out: a late reply) is discarded and counted (stale).
 *
 * Links, monitors and exit signals (docs/remote.md "Monitors and links"):
 * act_link / act_unlink / act_monitor / act_demonitor / act_exit_signal on a
 * remote id, and the EXIT / DOWN a dying actor owes to remote peers, travel
 * as signal records (payload kind 8) on the pair's lane and stream, so they
 * keep their order with the pair's messages. Each node records its actors'
 * remote links and monitors in a table per peer node ([actors] remote_links entries,
 * allocated by zbra_attach; each entry holds its node-loss notice, taken
 * from the runtime's message pool when the entry is made). When the node is
 * lost — a lane's transport reports it down (data unacknowledged for
 * peer_timeout_ms: while a node holds entries with a peer, lane 0 sends it a
 * tick every peer_timeout_ms / 8 so that this is noticed without traffic),
 * it restarts (new session epoch), or a committed membership view drops it
 * (dp_on_epoch) — every local actor linked to one of its actors gets an exit
 * signal, every local watcher a DOWN, with reason ZB_ERR_PEER_DOWN
 * (Erlang's noconnection), and local actors it monitored forget those
 * monitors. Errors: a full table refuses a new link / monitor with -ENOSPC
 * (act_link / act_monitor return it; one asked for by the other node breaks
 * at once: EXIT / DOWN with -ENOSPC to its remote actor). The name registry
 * stays node-local.
 */
#ifndef ZBMD_REMOTE_H
#define ZBMD_REMOTE_H

#include <stdint.h>

#include "zbmd/actors.h"
#include "zbmd/config.h"



#define ZBRA_HDR_LEN 72u        /* serialised header bytes */
#define ZBRA_SMALL_MAX 256u     /* header + payload copied as one message */

/* Installs remote routing for `rt` on this node (see above). Main thread,
 * after dp_node_init and before dp_node_launch. 0, -EALREADY, -ENOMEM, or a
 * dataplane error (-EBUSY: already launched). */
int zbra_attach(struct act_runtime *rt, const struct zb_config *cfg);

/* Hosts an actor runtime on this node's dataplane lcores: sized from the
 * config's [actors] section, one worker per dataplane lcore (polled by the
 * loops through dp_set_actor_hook with [actors] reductions as the budget),
 * attached with zbra_attach. Main thread, after dp_node_init and before
 * dp_node_launch. 0 or a negative errno; *rt is set whenever the runtime
 * was made (the caller destroys it, on failure too). One per process. */
int zbra_host(const struct zb_config *cfg, struct act_runtime **rt);

/* After dp_node_stop() and act_runtime_destroy(), before dp_node_fini():
 * gives every received buffer still referenced back to the transport
 * (tp_destroy requires it) and turns the transport callbacks that
 * dp_node_fini still makes into no-ops. Idempotent. */
void zbra_detach(void);

/* Before zbra_attach / zbra_host: what a tcp / rdma carrier passes to its
 * provider's init as net_init_args.provider_arg (for rdma: a struct
 * rdma_provider_args, e.g. one whose blobs the control plane carries; NULL:
 * the provider's defaults, for rdma its own unauthenticated bootstrap). */
void zbra_set_provider_arg(void *provider_arg);

/* The carrier [actors] carrier asks for on this node, `auto` resolved (the
 * dataplane must be initialised: auto looks at its transport). */
enum cfg_carrier zbra_carrier_kind(const struct zb_config *cfg);

/* What carries remote messages on this node: "dpdk" (the reliable
 * transport), "tcp" or "rdma" (a net provider: docs/remote.md "Carriers"),
 * or NULL when remote routing is not attached. */
const char *zbra_carrier(void);

/* Tests: hands raw bytes to lane 0's carrier for `peer` on `stream` (the
 * bytes of one remote message, however malformed), from lane 0's lcore
 * only; data must stay valid until the carrier is done with it (static).
 * The carrier's answer: 0, -EAGAIN, or an error. */
int zbra_raw_send(uint16_t peer, uint16_t stream, const void *data, size_t len,
		  uint64_t now_ns);

/* Counters, summed over lanes (racy snapshot: monotonic, may be torn). */
struct zbra_stats {
	uint64_t routed;        /* accepted by the router */
	uint64_t ring_full;     /* router: lane ring full (backpressure) */
	uint64_t refused;       /* router: unknown node / peer down / too big /
				 * a record no receiver accepts (-EINVAL) */
	uint64_t sent;          /* messages acknowledged by the peer */
	uint64_t batches;       /* transport messages carrying > 1 record */
	uint64_t zc_sent;       /* of which BUF payloads sent by reference */
	uint64_t failed;        /* accepted, then not delivered */
	uint64_t notified;      /* ACT_TAG_UNDELIVERED messages sent */
	uint64_t notify_lost;   /* failures no actor could be told of */
	uint64_t received;      /* delivered into a local mailbox */
	uint64_t zc_received;   /* of which BUF payloads as arena references */
	uint64_t deferred;      /* deliveries refused for now (mailbox full) */
	uint64_t stale;         /* discarded: target gone (late replies too) */
	uint64_t stale_answered;/* of which call requests answered with
				 * ACT_TAG_UNDELIVERED ZB_ERR_STALE_ID */
	uint64_t bad;           /* malformed messages, refused records (counted,
				 * dropped; a refused record alone, docs/remote.md) */
	uint64_t signals;       /* link/monitor signals received and applied */
	uint64_t lost_notices;  /* EXIT/DOWN/DEMONITOR given on node loss */
	uint64_t refused_in;    /* messages the carrier refused on arrival (over
				 * this node's max_message; their senders heard
				 * -EMSGSIZE): their headers dropped */
	uint64_t rtab_full;     /* links/monitors refused: table full */
	uint64_t rtab_live;     /* remote links/monitors recorded now */
	/* a net carrier's own (docs/remote.md "Carriers"; 0 with the transport) */
	uint64_t carrier_bad;   /* malformed carrier messages (counted, dropped) */
	uint64_t carrier_refused; /* messages over max_message skipped, REFUSE sent */
	uint64_t carrier_downs; /* peers lost (failed request, silence, never came) */
	uint64_t carrier_silent;/* of which: silence */
	uint64_t carrier_half_open; /* one comm of a pair held for peer_timeout_ms
				     * without the other: closed, connected again */
};
void zbra_get_stats(struct zbra_stats *out);

/* The lane (its index) that carries messages, links and monitors from
 * `from` to `to` on another node (by a hash of the pair; the peer's lane of
 * the same index receives them); 0 before attach. */
unsigned zbra_lane_of(act_id from, act_id to);

/* Streams per peer the remote layer uses, and the first (0 before attach). */
unsigned zbra_streams(unsigned *first);

#endif /* ZBMD_REMOTE_H */
