/* zbmd/transport.h — the reliable transport core (tp_).
 *
 * Per-peer sessions over the zbmd wire format (zbmd/wire.h, docs/wire.md)
 * giving exactly-once, in-order delivery per (peer, stream) across loss,
 * duplication and reordering; fragmentation of messages up to
 * params.max_message bytes (>= 256 MiB supported); session epochs that
 * detect a restarted peer; peer-down detection.
 *
 * The core does no I/O (like canonical/raft): frames go out through
 * ops->tx, received frames come in through tp_rx(), time is the `now_ns`
 * argument of every call (any monotonic nanosecond clock: the TSC converted,
 * or a simulated clock), randomness (fault injection only) is a PRNG seeded
 * from params.fault.seed. tp_poll() drives retransmissions, delayed acks,
 * probes and peer-down detection; tp_next_deadline() says when it next has
 * work, so an idle loop (or a simulation) can sleep until then.
 *
 * Memory: everything is allocated in tp_create() (window slots, descriptor
 * pools, the reassembly arena); tp_send/tp_rx/tp_poll/tp_msg_release never
 * allocate.
 *
 * Threads: one instance belongs to one thread (one lcore). Every call,
 * including every ops callback it makes and tp_msg_release(), happens on that
 * thread. Several lcores use several instances on distinct `lane`s; lane L on
 * one node talks to lane L on its peers (UDP port udp_port + L, so NIC flow
 * rules can steer lanes to queues).
 *
 * Errors: 0 or a negative errno / ZB_ERR_* code (zbmd/common.h).
 */
#ifndef ZBMD_TRANSPORT_H
#define ZBMD_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zbmd/wire.h"

struct tp;

/* ---- payload references (zero-copy TX) ----------------------------------
 * An embeddable reference count owned by whoever owns a payload buffer.
 * tp_send() takes one reference for the message and drops it when the
 * message completes (acked, or failed); the link layer takes one more per
 * frame it attaches without copying (e.g. a DPDK external mbuf) and drops it
 * when the NIC is done with the frame. free_cb runs when the count reaches
 * zero — only then may the buffer be reused. Atomic, so the link may drop
 * references from a TX-completion context on another thread. */
struct tp_ref {
	uint32_t refcnt;
	void (*free_cb)(struct tp_ref *ref);
};

static inline void tp_ref_init(struct tp_ref *r, void (*free_cb)(struct tp_ref *))
{
	r->refcnt = 1;   /* the owner's reference */
	r->free_cb = free_cb;
}
static inline void tp_ref_get(struct tp_ref *r)
{
	__atomic_add_fetch(&r->refcnt, 1, __ATOMIC_RELAXED);
}
static inline void tp_ref_put(struct tp_ref *r)
{
	if (__atomic_sub_fetch(&r->refcnt, 1, __ATOMIC_ACQ_REL) == 0 &&
	    r->free_cb)
		r->free_cb(r);
}

/* ---- frames handed to the link layer ------------------------------------ */
struct tp_frame {
	uint16_t peer;           /* destination node id (picks port/queue) */
	uint16_t hdr_len;        /* WIRE_HDRS_LEN */
	const uint8_t *hdr;      /* Ethernet..zbmd headers: valid during the call only */
	const void *payload;     /* payload_len bytes following the headers */
	uint32_t payload_len;
	/* ref != NULL: the payload may be attached without copying; take
	 * tp_ref_get(ref) per attachment and tp_ref_put(ref) when the frame is
	 * freed. ref == NULL: copy the payload during the call. */
	struct tp_ref *ref;
};

/* ---- received messages ---------------------------------------------------
 * Delivered by ops->deliver in one of three layouts:
 * - a buffer reference into the transport's reassembly arena (every
 *   fragment was copied there exactly once): data, len;
 * - when ops->rx_place gave a buffer for it, that buffer (the fragments were
 *   copied straight into it): data, len;
 * - when ops->rx_keep chose it, the received frames themselves, not copied
 *   at all: data == NULL, segs[0 .. nsegs-1] in order, each seg_size bytes
 *   but the last (tp_seg_len()).
 * The consumer owns it until tp_msg_release(), which returns arena space or
 * hands the kept frames back to the link (ops->rx_free). Unreleased arena
 * messages shrink the credit advertised to the sender (backpressure);
 * unreleased kept frames hold the link's buffers (params.rx_keep_frames
 * bounds them). tp_msg_read() copies bytes out of any layout. */
struct tp_seg {
	const uint8_t *data;     /* seg_size bytes (the last: the rest) */
	void *frame;             /* the link's handle (tp_rx_keep) */
};

struct tp_msg {
	uint16_t peer;
	uint16_t stream;
	uint32_t msg_id;         /* per (session, stream), consecutive from 0 */
	uint32_t epoch;          /* the sender's session epoch */
	uint8_t *data;           /* len bytes, 64-byte aligned; NULL when len == 0
				  * or kept (segs) */
	size_t len;
	struct tp_seg *segs;     /* kept frames, or NULL */
	uint32_t nsegs, seg_size;
	/* private to the transport */
	struct tp_msg *next__;
	uint32_t blk__, nblk__;  /* arena blocks */
	uint32_t sblk__, nsblk__; /* segment-table blocks (kept) */
	uint32_t frags_got__, frag_count__;  /* distinct fragments in, of */
	/* fragments in, one bit each (not kept: segs[i].frame says it):
	 * fmap1__ for up to 64, else arena blocks after the data, or their
	 * own run fblk__ when placed */
	uint64_t *fmap__, fmap1__;
	uint32_t fblk__, nfblk__;
	uint16_t frag_size__;
	uint8_t state__;
	uint8_t placed__;        /* data is the consumer's (ops->rx_place) */
};

/* The most frames one ops->rx_free_bulk call hands back. */
#define TP_RX_FREE_BULK 32

enum tp_peer_event {
	TP_PEER_UP = 1,          /* first valid frame (or first after DOWN) */
	TP_PEER_RESTARTED,       /* new remote epoch: session reset */
	TP_PEER_DOWN,            /* data pending (to it, or partial messages
				  * from it) and nothing heard for
				  * peer_timeout (a peer heard from before)
				  * or connect_timeout (one never heard
				  * from): see params.peer_timeout_ms; or
				  * the link said so (tp_peer_down) */
	TP_PEER_RESET,           /* this side reset the session (a new local
				  * epoch: tp_peer_reset, or the peer's ACKs
				  * said it takes less than a message queued
				  * for it): what it had accepted failed; the
				  * peer sees TP_PEER_RESTARTED */
};

/* Callbacks. All run on the instance's thread, from inside tp_rx / tp_poll /
 * tp_peer_reset / tp_destroy (never from inside tp_send). They may call
 * tp_send and tp_msg_release; they must not call tp_rx, tp_poll,
 * tp_peer_reset or tp_destroy. */
struct tp_ops {
	/* Queue one frame on the link. 0: queued (or dropped by the link: the
	 * transport retransmits). -EAGAIN: link full, the transport backs off
	 * and retransmits later. Required. */
	int (*tx)(void *user, const struct tp_frame *f);
	/* A complete message, in order for its (peer, stream). 0: the consumer
	 * owns m until tp_msg_release(tp, m). -EAGAIN: cannot take it now (a
	 * full mailbox); the transport keeps it and retries from tp_poll,
	 * holding back later messages of that stream. Required. */
	int (*deliver)(void *user, struct tp_msg *m);
	/* A message given to tp_send() is finished: status 0 when the peer
	 * acknowledged every fragment; ZB_ERR_PEER_DOWN (peer timed out),
	 * ZB_ERR_EPOCH (the session was reset: peer restarted, or
	 * tp_peer_reset), ZB_ERR_SHUTDOWN (tp_destroy), -EMSGSIZE (longer
	 * than the peer takes), -EINVAL (a stream the peer lacks). Called exactly once per
	 * accepted message. 0 means delivered exactly once; an error means the
	 * message may or may not have reached the peer's consumer (it was not
	 * fully acknowledged; as with any RPC). Required. */
	void (*send_done)(void *user, uint64_t cookie, int status);
	/* Receive in place. Optional (NULL: every message is reassembled in
	 * the arena). Called when the first fragment of a new message (peer,
	 * stream, msg_id) of len bytes (> 0) arrives: return a buffer of at
	 * least len bytes to reassemble it into, or NULL for the arena. The
	 * buffer is the transport's to write until the message is delivered
	 * (deliver gets m->data == that buffer), until rx_unplace, or until
	 * the consumer takes it back with tp_rx_detach(). */
	void *(*rx_place)(void *user, uint16_t peer, uint16_t stream,
			  uint32_t msg_id, size_t len);
	/* A placed message will not be delivered (its session was reset
	 * while it was partial; or, at once, the transport had no arena room
	 * for its map of fragments received, kept outside the buffer for
	 * messages of more than 64 fragments: rx_place is asked again when
	 * the fragment comes again): the buffer is the consumer's again.
	 * Required when rx_place is given. */
	void (*rx_unplace)(void *user, uint16_t peer, uint16_t stream,
			   uint32_t msg_id);
	/* Write one fragment of a placed message. Optional (NULL: the
	 * transport copies it, memcpy(buf + off, data, len)). Called once per
	 * fragment of a message rx_place gave `buf` for — never for a
	 * duplicate — in arrival order (any order of offsets); off is
	 * fragment index x the message's fragment size, and with rx_write set
	 * the transport offers only messages whose fragment size is a
	 * multiple of 8 to rx_place, so no element of up to 8 bytes is split
	 * between two calls. Lets the consumer fold the copy into work it
	 * would do on the bytes anyway (the collectives reduce here). */
	void (*rx_write)(void *user, uint16_t peer, uint16_t stream,
			 uint32_t msg_id, uint8_t *buf, size_t off,
			 const uint8_t *data, size_t len);
	/* Receive without copying. Optional (NULL: never). Asked once per
	 * message, at its first fragment, when the message is at least
	 * params.rx_keep_min bytes, no rx_place buffer took it and that
	 * fragment came through tp_rx_keep(): true to have the message
	 * delivered as its received frames (tp_msg.segs) instead of copied
	 * into the arena. The frames are kept until the message is released
	 * (or dropped by a session reset), then each goes back through
	 * rx_free. Without room in the segment table (params.rx_keep_frames)
	 * the message goes to the arena as usual. A fragment of a kept
	 * message that arrives through plain tp_rx() (nothing to keep) is
	 * dropped and resent by its sender. */
	bool (*rx_keep)(void *user, uint16_t peer, uint16_t stream, size_t len);
	/* A frame tp_rx_keep() kept is the link's again. Required with
	 * rx_keep. */
	void (*rx_free)(void *user, void *frame);
	/* Optional: n (<= TP_RX_FREE_BULK) such frames at once, in the order
	 * they were kept, instead of rx_free for each. */
	void (*rx_free_bulk)(void *user, void *const *frames, unsigned n);
	/* Session events for the control plane / metrics. Optional (NULL). */
	void (*peer_event)(void *user, uint16_t peer, enum tp_peer_event ev,
			   uint32_t remote_epoch);
};

/* Deterministic fault injection on the receive side of this instance
 * (applied to valid-looking frames before validation, like a lossy wire):
 * each frame is dropped with drop_rate, else duplicated with dup_rate, else
 * held back and delivered after 1-3 later frames (or the next tp_poll)
 * with reorder_rate. Same seed and same input: same faults. */
struct tp_fault {
	double drop_rate, dup_rate, reorder_rate;   /* 0..1 */
	uint64_t seed;
};

struct tp_params {
	uint16_t node;           /* this node's id (< max_peers) */
	uint8_t lane;            /* this instance's lane */
	uint32_t cluster;        /* cluster id; frames of others are refused */
	uint32_t epoch;          /* != 0, larger after every restart (e.g.
				  * realtime in ms, truncated): serial-number
				  * comparison (RFC 1982) over 32 bits; a
				  * peer's epoch that compares older is still
				  * taken once the incarnation we knew has
				  * been silent for peer_timeout_ms (so the
				  * comparison's wrap, 2^31 ms = 24.9 days,
				  * harms nothing: docs/wire.md) */
	uint8_t mac[6];
	uint32_t ip;             /* network order */
	uint16_t udp_port;       /* base port (lane L uses udp_port + L) */
	uint16_t mtu;            /* IP MTU, WIRE_MTU_MIN..WIRE_MTU_MAX */
	uint16_t max_peers;      /* node ids 0..max_peers-1, <= 4096 */
	uint16_t streams;        /* streams per peer, 1..1024 */
	uint32_t window;         /* frames in flight per peer: power of two, 64..16384 */
	uint32_t rto_us_init, rto_us_min, rto_us_max;
	uint32_t ack_delay_us;   /* delayed ack */
	uint32_t ack_every;      /* ack at once after this many in-order frames */
	/* Peer down. A peer is "not yet up" until its first valid frame and
	 * "was up" from then on (for the life of this instance, across session
	 * resets). With messages pending to it, or partial messages from it
	 * in reassembly (a sender that died mid-message would hold their
	 * arena for good), and nothing heard for
	 * - peer_timeout_ms, a peer that was up is declared down
	 *   (TP_PEER_DOWN; its sends fail with ZB_ERR_PEER_DOWN, later ones
	 *   at once, until a probe is answered);
	 * - connect_timeout_ms, a peer not yet up is declared down the same
	 *   way; until then sends to it are accepted and wait (at most
	 *   `window` frames go out, retransmitted with backoff) for it to
	 *   start. 0: never (the consumer's own timeout bounds the wait).
	 * Both are measured from the later of the last frame heard and the
	 * moment the peer's queue became non-empty. */
	uint32_t peer_timeout_ms;
	uint32_t connect_timeout_ms;
	uint32_t max_message;    /* bytes, <= 4 GiB - 1 */
	size_t rx_arena_bytes;   /* reassembly arena; 0 = max_message + 4 * window * mtu */
	void *rx_arena;          /* caller memory for it (e.g. hugepages), or NULL */
	uint32_t rx_msgs;        /* reassembly/delivery descriptors; 0 = 2 * window */
	uint32_t tx_msgs;        /* send descriptors; 0 = 2 * window */
	uint16_t inline_max;     /* tp_send copies messages up to this size */
	/* Messages of at least stream_min bytes (0: none) are sent in
	 * fragments of whole 64-byte lines, and the reassembly arena takes
	 * such fragments with streaming stores (zb_copy_stream): a large
	 * message neither evicts the caches' working set nor pays a
	 * read-for-ownership of its destination. The sender, taking such a
	 * message to be cold, prefetches fragments (under 4 KB) a few ahead
	 * of the one it sends. Each side applies its own setting; a receiver
	 * copies fragments that are not whole lines normally. */
	uint32_t stream_min;
	/* Kept frames (ops->rx_keep): messages of at least rx_keep_min bytes
	 * (0: never) may be received without a copy, at most rx_keep_frames
	 * frames held at once (0: never). */
	uint32_t rx_keep_min;
	uint32_t rx_keep_frames;
	unsigned tx_flags;       /* WIRE_TX_UDP_CSUM */
	/* rx_batch != 0: an ack that tp_rx() would send at once (ACKREQ, a
	 * hole, ack_every reached) is held until tp_rx_flush(), which the
	 * link calls after each burst of tp_rx(): a burst is answered with
	 * one ack per peer, not one per frame. tp_poll() flushes too, and
	 * tp_next_deadline() is 0 while acks are held. 0: ack at once. */
	uint8_t rx_batch;
	struct tp_fault fault;
};

/* Defaults: mtu 1500, 64 peers, 8 streams, window 256, RTO 1 ms initial,
 * 200 us .. 200 ms, ack delay 20 us / every 16 frames, peer timeout 2000 ms,
 * connect timeout 60000 ms,
 * max_message 256 MiB, inline_max 256, udp_port 7471, no faults.
 * node/cluster/epoch/mac/ip must still be set. */
void tp_params_default(struct tp_params *p);

/* Counters of one instance (one lcore): plain uint64s, read by the owning
 * thread (or racily by a metrics reader that accepts torn snapshots). */
struct tp_stats {
	uint64_t frames_tx, frames_rx, data_frames_tx, acks_tx, probes_tx;
	uint64_t payload_bytes_tx, payload_bytes_rx;
	uint64_t retransmits, rto_timeouts, fast_retransmits, tx_busy;
	uint64_t acks_rx, dup_frames, ooo_frames, no_buffer_drops;
	uint64_t window_stalls;
	uint64_t msgs_sent, msgs_failed, msgs_delivered, bytes_delivered;
	uint64_t deliver_deferred;
	uint64_t msgs_placed, placed_detached; /* rx_place used; taken back */
	uint64_t msgs_kept, frames_kept;      /* rx_keep used; frames kept */
	uint64_t keep_no_room;    /* rx_keep said yes, no segment table room */
	uint64_t keep_unkept;     /* kept message's fragment without a frame */
	uint64_t peer_up, peer_restarts, peer_downs, stale_replies;
	uint64_t link_downs;      /* of peer_downs: tp_peer_down (the link) */
	uint64_t size_replies;    /* ACKs to a peer whose message was too large */
	uint64_t size_resets;     /* sessions reset: queued messages the peer
				   * would never take (tp__peer_max) */
	uint64_t stream_replies;  /* ACKs to a peer that sent on a stream we lack */
	uint64_t stream_resets;   /* sessions reset: queued messages on streams
				   * the peer lacks (tp__peer_streams) */
	uint64_t fault_drops, fault_dups, fault_reorders;
	uint64_t bad_frames;                  /* sum of bad[] */
	uint64_t bad[WIRE_REASON_COUNT];      /* per enum wire_reason */
};

/* Create an instance. Returns 0 and *out, -EINVAL (a parameter out of range;
 * nothing allocated), -ENOMEM. */
int tp_create(const struct tp_params *p, const struct tp_ops *ops, void *user,
	      struct tp **out);

/* Fail every pending send with ZB_ERR_SHUTDOWN (send_done), drop partial
 * reassemblies and free everything. Messages delivered and not yet released
 * must be released before (asserted). tp_send from its send_done callbacks
 * returns ZB_ERR_SHUTDOWN (nothing accepted). */
void tp_destroy(struct tp *tp);

/* Map in up to max_bytes more of the reassembly arena's pages, so that the
 * lane's loop takes no page fault when large messages first arrive; from
 * the arena's top down (where long messages go). It changes no byte of the
 * arena, so it may run on another thread while the lane's loop works —
 * never from that loop, and never concurrently with itself or tp_destroy.
 * Returns the bytes still to map in (0: all mapped, or the arena is the
 * caller's memory, rx_arena; max_bytes 0 maps nothing and only tells),
 * or a negative errno where the kernel cannot
 * (MADV_POPULATE_WRITE is Linux 5.14+; pages then come on first use). */
long tp_prefault_step(struct tp *tp, size_t max_bytes);

/* Declare peer `node` and its addresses (mac, ip in network order).
 * Control path. 0, -EINVAL (node out of range or == self), -EEXIST. */
int tp_peer_add(struct tp *tp, uint16_t node, const uint8_t mac[6], uint32_t ip);

/* Reset the session with `node` (e.g. the control plane committed a new
 * membership epoch): fail its pending sends with ZB_ERR_EPOCH, drop partial
 * reassemblies, start a new local session epoch so the peer resets too.
 * 0 or -ENOENT. */
int tp_peer_reset(struct tp *tp, uint16_t node, uint64_t now_ns);

/* Declare `node` down now, as peer_timeout would, without waiting: the link
 * knows it cannot be reached (the port's link went down). Its pending sends
 * fail with ZB_ERR_PEER_DOWN, partial reassemblies are dropped, a new local
 * session epoch starts (the peer resets its side if it comes back), the
 * peer event TP_PEER_DOWN is raised, and tp_send refuses it until a valid
 * frame from it is heard again (probes go on meanwhile). Counted in
 * stats.peer_downs and stats.link_downs. 0, -ENOENT, or -EALREADY (down
 * already). Same thread rules as tp_peer_reset. */
int tp_peer_down(struct tp *tp, uint16_t node, uint64_t now_ns);

/* The largest message tp_send takes for `node` now: this instance's
 * max_message, or less once the peer's ACKs said it takes less (0 for a
 * node that is not a peer). Instance thread. */
size_t tp_peer_max_message(const struct tp *tp, uint16_t node);

/* Send `len` bytes to (peer, stream). len <= inline_max: copied now (the
 * caller's buffer is free on return; ref is ignored). Otherwise zero-copy:
 * the buffer must stay valid and unmodified until send_done AND until ref
 * (if given) drops to zero; with ref == NULL the link copies each frame and
 * the buffer is free at send_done. send_done(cookie, status) is called
 * exactly once later — never from inside this call.
 * Returns 0 (accepted), -EINVAL (bad stream: not below this instance's
 * streams, or not below the peer's, once its reply to a frame on a stream
 * it lacks said how many it has), -ENOENT (unknown peer),
 * -EMSGSIZE (len > max_message), ZB_ERR_PEER_DOWN (peer is down: the
 * message was not accepted), -EAGAIN (no send descriptor free: try after
 * some send_done; nothing was accepted), ZB_ERR_SHUTDOWN (called from a
 * callback of tp_destroy: not accepted). */
int tp_send(struct tp *tp, uint16_t peer, uint16_t stream, const void *data,
	    size_t len, struct tp_ref *ref, uint64_t cookie, uint64_t now_ns);

/* A received frame (the link keeps ownership; it may be freed on return).
 * flags: WIRE_RX_CSUM_OK when the NIC verified the checksums,
 * WIRE_RX_IP_CSUM_OK when the link verified the IPv4 header's. Returns 0
 * (accepted, including harmless duplicates) or ZB_ERR_BAD_FRAME (refused
 * and counted in stats.bad[reason]). Never trusts the frame. */
int tp_rx(struct tp *tp, const void *frame, size_t len, unsigned flags,
	  uint64_t now_ns);

/* As tp_rx, from a link that can leave the frame with the transport:
 * `frame_ref` is the link's handle for it (given back to ops->rx_free).
 * Returns what tp_rx returns, or TP_RX_KEPT: the transport kept the frame
 * (a fragment of a message received without copying, ops->rx_keep), and
 * the link must neither free nor reuse it until ops->rx_free(frame_ref) —
 * which may already have happened when this returns (the consumer
 * released the message from its deliver callback). */
#define TP_RX_KEPT 1
int tp_rx_keep(struct tp *tp, const void *frame, size_t len, unsigned flags,
	       void *frame_ref, uint64_t now_ns);

/* Bytes of kept segment i of m. */
static inline size_t tp_seg_len(const struct tp_msg *m, uint32_t i)
{
	return i + 1 < m->nsegs ? m->seg_size
				: m->len - (size_t)(m->nsegs - 1) * m->seg_size;
}

/* Copy n bytes at offset off of a delivered message (any layout) to dst;
 * off + n <= m->len. */
void tp_msg_read(const struct tp_msg *m, size_t off, void *dst, size_t n);

/* Send the acks held back by params.rx_batch (no-op otherwise / when none).
 * Call after each burst of tp_rx() calls. */
void tp_rx_flush(struct tp *tp, uint64_t now_ns);

/* Timers: retransmissions (RTO with backoff), delayed acks, window probes,
 * held-back fault frames, deferred deliveries, peer-down detection.
 * Returns the next deadline (as tp_next_deadline). */
uint64_t tp_poll(struct tp *tp, uint64_t now_ns);

/* Earliest time at which tp_poll has work (0: at once, e.g. a deferred
 * delivery or a held-back fault frame); UINT64_MAX when none. */
uint64_t tp_next_deadline(const struct tp *tp);

/* Give a delivered message back (its arena space returns to the pool). */
void tp_msg_release(struct tp *tp, struct tp_msg *m);

/* Take back the buffer that ops->rx_place gave for (peer, stream, msg_id)
 * before the message was delivered (the consumer cancels the receive: a
 * closed comm). What arrived so far moves to the arena and the message is
 * delivered from there as usual; the buffer is never written again after
 * this returns. Without arena space the message is dropped and the
 * session with the peer reset (its sender gets an error). 0: taken back
 * (or not placed: nothing to do), 1: dropped with a session reset. */
int tp_rx_detach(struct tp *tp, uint16_t peer, uint16_t stream,
		 uint32_t msg_id, uint64_t now_ns);

/* Streams per peer of this instance (params.streams): valid streams for
 * tp_send are 0..tp_streams(tp)-1. */
uint16_t tp_streams(const struct tp *tp);

/* Where this instance's "large" messages start (params.stream_min, bytes;
 * 0: none). */
uint32_t tp_stream_min(const struct tp *tp);

/* Counters of this instance. */
const struct tp_stats *tp_stats(const struct tp *tp);

/* Call fn(arg, name, value) for every counter (bad frames as "bad_<reason>"). */
void tp_stats_foreach(const struct tp_stats *s,
		      void (*fn)(void *arg, const char *name, uint64_t value),
		      void *arg);

/* Session view of one peer, for the control plane and tests. */
struct tp_peer_info {
	int state;               /* 0 unknown, 1 up, 2 down */
	uint32_t local_epoch, remote_epoch;
	uint32_t srtt_us, rto_us;
	uint32_t in_flight;      /* frames sent, not acked */
	uint32_t credit;         /* frames the peer last allowed beyond its ack */
	uint32_t queued_msgs;    /* accepted, not completed */
};
int tp_peer_info(const struct tp *tp, uint16_t node, struct tp_peer_info *out);

#endif /* ZBMD_TRANSPORT_H */
