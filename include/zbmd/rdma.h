/* zbmd/rdma.h — the libibverbs provider of the net interface (rdma/).
 *
 * The provider is `rdma_net_ops` (struct net_ops, name "rdma"): RC queue
 * pairs per (peer, channel, direction), RDMA WRITE WITH IMMEDIATE into the
 * receiver's registered buffer for large messages, SEND/RECV into a posted
 * receive pool for small ones (inline when <= [rdma] inline_max), every
 * message gated by a clear-to-send credit the receiver writes into the
 * sender's FIFO. See docs/rdma.md for the protocol.
 *
 * Connection setup: for every comm the provider produces a *connection
 * blob* (QPN, PSN, GID/LID, MTU, FIFO address and rkey; versioned,
 * CRC-checked) with rdma_conn_local(); the control plane ships it to the
 * peer (ctl_blob_send, kind CTL_BLOB_RDMA_CONN: authenticated, retried until
 * acknowledged), which hands it to rdma_conn_deliver() (rdma_provider_args
 * .external_exchange = true; with .send_blob set, connect/accept produce
 * and hand over their blobs themselves; the "rdma" collective host in
 * dataplane/run_rdma.c wires this up). Without a control plane the provider's own
 * TCP bootstrap does the same (see rdma_provider_args). connect()/accept()
 * return -EAGAIN until the peer's blob has arrived, then bring the QP
 * through INIT -> RTR -> RTS and return 0.
 *
 * Completions: one CQ per channel (channel = the lcore that owns it). The
 * lcore loop registers rdma_dp_poll / rdma_poll_cq on rdma_cq_source(ctx,
 * ch) as a completion source, or relies on test(), which polls its comm's
 * CQ itself.
 * Async device events (port down, QP fatal) are read without blocking by
 * rdma_poll_async() (the control thread, or progress()).
 */
#ifndef ZBMD_RDMA_H
#define ZBMD_RDMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zbmd/net.h"

/* The provider table. version NET_OPS_VERSION, name "rdma". */
extern const struct net_ops rdma_net_ops;

/* Which side of a connection a blob describes. A SEND blob made by node A
 * for (peer B, channel c) is delivered to B, where it completes B's RECV
 * comm from A on channel c, and vice versa. */
enum rdma_side { RDMA_SIDE_SEND = 1, RDMA_SIDE_RECV = 2 };

#define RDMA_CONN_BLOB_LEN 72   /* bytes of one encoded connection blob */

/* What went wrong, for the control plane. */
enum rdma_event_kind {
	RDMA_EV_WC_ERROR = 1,   /* a work completion failed (status, vendor_err) */
	RDMA_EV_QP_FATAL,       /* async: QP fatal / request / access error */
	RDMA_EV_PORT_DOWN,      /* async: port error (link down) */
	RDMA_EV_PORT_UP,        /* async: port active again */
	RDMA_EV_DEVICE_FATAL,   /* async: the device is gone */
	RDMA_EV_PROTOCOL,       /* protocol error: oversize, tag mismatch, order */
	RDMA_EV_PEER_CLOSED,    /* the peer closed its end (requests: PEER_DOWN) */
};

struct rdma_event {
	enum rdma_event_kind kind;
	int peer;               /* node id, -1 when not about one comm */
	int channel;            /* -1 when not about one comm */
	enum rdma_side side;    /* 0 when not about one comm */
	int err;                /* the error the affected requests fail with */
	int wc_status;          /* enum ibv_wc_status, or -1 */
	uint32_t vendor_err;
	char msg[200];          /* "node 3 ch 0 send: RDMA WRITE failed: ..." */
};

/* Passed as net_init_args.provider_arg (may be NULL). on_event is called
 * from whichever thread observed the failure (an lcore polling a CQ, or the
 * thread calling rdma_poll_async): it must not block (push to a queue).
 *
 * external_exchange = true: the control plane moves the blobs
 * (rdma_conn_local / rdma_conn_deliver). Otherwise (and when provider_arg
 * is NULL) the provider runs its own bootstrap: a thread listening on TCP
 * [transport] tcp_port + 1 at this node's [peer.N] ip, and connect/accept
 * push this side's blob to the peer's [peer.N] ip at the same port. The
 * bootstrap is unauthenticated: for benchmarks and tests. */
struct gpu_ctx;
struct rdma_provider_args {
	void (*on_event)(void *arg, const struct rdma_event *ev);
	void *arg;
	bool external_exchange;
	/* The gpu/ context NET_MEM_GPU buffers belong to (their pointers are
	 * its gpu_ptr_t values). NULL: reg_mr(NET_MEM_GPU) is unsupported. */
	struct gpu_ctx *gpu;
	/* external_exchange only. send_blob: connect()/accept() call it once
	 * per comm with this side's blob for `peer` (made as rdma_conn_local
	 * makes it), from the thread calling connect/accept: it must not
	 * block (queue it: ctl_blob_send). 0 = on its way; -EAGAIN or
	 * -ENOBUFS = not now (connect/accept return -EAGAIN and call it again
	 * next time); another error fails connect/accept with it. NULL: the
	 * control plane calls rdma_conn_local() itself. A blob for this node
	 * itself is delivered directly, without send_blob. */
	int (*send_blob)(void *exchange_arg, uint16_t peer, const void *blob, size_t len);
	/* external_exchange only. true: the host calls rdma_conn_blob_result()
	 * for every blob of ours: taken (the control plane's "delivered"
	 * acknowledgement), refused or given up; connect/accept hand a comm
	 * out only after it was taken, once the peer's QP takes packets. false: as soon as the
	 * peer's blob is here; our blob may still be on its way, and the
	 * peer's first packets then rely on RC retries (~0.5 s). The
	 * bootstrap always waits for the peer's answer. */
	bool blob_acks;
	void *exchange_arg;
	/* The provider context's life, for whoever hosts the provider
	 * (rdma_conn_deliver, rdma_cq_source): called by init, on its thread,
	 * with the new context just before init returns it, and with NULL
	 * first thing in fini, before anything is freed (the host must stop
	 * using the old context before it returns). May be NULL. */
	void (*on_ctx)(void *exchange_arg, void *ctx);
};

/* Encode this node's connection blob for the comm (peer, channel, side),
 * creating its QP and buffers when it does not exist yet (control path:
 * allocates, calls verbs). blob must hold RDMA_CONN_BLOB_LEN bytes.
 * Returns the blob length, or -EINVAL (bad peer/channel/side/cap),
 * -EAGAIN (another thread is creating it now), -ENOMEM, -ZB_ERR_DEVICE. */
int rdma_conn_local(void *ctx, uint16_t peer, uint16_t channel,
		    enum rdma_side side, void *blob, size_t cap);

/* Hand a peer's blob to the provider. It is validated strictly (magic,
 * version, CRC, every field's range, addressed to this node); the matching
 * local comm is the opposite side. Delivering the same blob again is a
 * no-op. A *different* blob for a comm that already has one means the peer
 * re-created its end: that comm fails with ZB_ERR_PEER_DOWN
 * (RDMA_EV_PEER_CLOSED) and the blob is kept for the comm that replaces it
 * once the owner closes the old one. Thread-safe against the lcore that
 * owns the comm. Returns 0, ZB_ERR_BAD_FRAME / -EPROTONOSUPPORT (bad blob,
 * why in rdma_last_error), -EINVAL (not for this node / cluster). */
int rdma_conn_deliver(void *ctx, const void *blob, size_t len);

/* rdma_conn_deliver for a blob whose sender is known (the control plane
 * authenticated node `from`): it must be that node's own blob (src_node ==
 * from), else -EPERM (counted; why in rdma_last_error), so that one member
 * cannot replace or fail another member's comms. rdma_conn_deliver trusts
 * the blob's src_node: only for the unauthenticated bootstrap and tests. */
int rdma_conn_deliver_from(void *ctx, uint16_t from, const void *blob, size_t len);

/* What became of a blob this node sent (blob: as it was sent), from the
 * host's exchange (rdma_provider_args.blob_acks): status 0, the peer took
 * it (its rdma_conn_deliver returned 0), so the comm it belongs to may be
 * handed out; -EBADMSG, the peer refused it: the comm's next
 * connect/accept fails with -ECONNREFUSED and drops it (the call after
 * creates a new one); any other negative status (the exchange gave up on
 * it, or cannot tell), the next connect/accept sends it again. Any thread;
 * must not be called from inside the provider's calls. Returns 0, -ENOENT
 * (no comm of ours has that blob any more: it was re-created), -EINVAL
 * (status > 0, no ctx), ZB_ERR_BAD_FRAME (not a blob). */
int rdma_conn_blob_result(void *ctx, const void *blob, size_t len, int status);

/* Completion sources: one per channel. rdma_poll_cq() handles at most a
 * burst of completions and returns how many, or a negative error. Call it
 * only from the lcore that owns the channel. */
void *rdma_cq_source(void *ctx, uint16_t channel);
int rdma_poll_cq(void *arg);

/* The same with the dataplane's dp_poll_fn shape, so the lcore loop can
 * take it as is: dp_register_poller(lcore, rdma_dp_poll,
 * rdma_cq_source(ctx, ch)). Errors count as 0 handled; they are reported
 * through on_event and rdma_last_error(). */
unsigned rdma_dp_poll(void *arg, uint64_t now_tsc);

/* Read pending async events without blocking; fail affected comms (the
 * owning lcores see it on their next call) and report them through
 * on_event. Returns the number of events handled or a negative error. */
int rdma_poll_async(void *ctx);

/* Sleep until a completion or async event may need handling, or
 * timeout_ms passed (the net_ops `wait` shape): arms every channel's CQ,
 * handles what arrived before arming, then poll(2)s the completion channel
 * and the async fd. Returns the number of completions/events handled, or a
 * negative error. For a single-threaded user (benchmark); never an lcore. */
int rdma_wait(void *ctx, int timeout_ms);

/* The last error message of this thread's rdma calls ("" when none). */
const char *rdma_last_error(void);

/* How a memory handle was registered ("host", "dmabuf", "peermem",
 * "staging") and why that path was chosen. */
const char *rdma_mr_path(void *mhandle, const char **why);

/* `zbmd rdma-info`: devices, ports, GIDs, GPUDirect availability. */
int rdma_info_main(int argc, char **argv);

/* Opens the device, port and GID that [rdma] names and closes them again
 * (control path: zbmd run's start-up check). 0: usable, `why` names the
 * device and port; else a ZB_ERR_* and `why` the reason ("no RDMA devices:
 * ...", "[rdma] device 'x' not found (devices: ...)", "port 1 is DOWN"). */
struct zb_config;
int rdma_probe(const struct zb_config *cfg, char *why, size_t cap);

#endif /* ZBMD_RDMA_H */
