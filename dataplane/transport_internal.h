/* transport_internal.h — shared by dataplane/transport*.c only.
 *
 * Naming: tp_ public (zbmd/transport.h), tp__ shared between the transport
 * files, everything else static.
 */
#ifndef ZBMD_TRANSPORT_INTERNAL_H
#define ZBMD_TRANSPORT_INTERNAL_H

#include "zbmd/common.h"
#include "zbmd/transport.h"
#include "zbmd/wire.h"

#include <stdbool.h>
#include <string.h>

#define TP_BLK            1024u     /* arena block, bytes (64-aligned) */
#define TP_SHARE_BLK      64u       /* wire_hdr.share unit (64 KiB), blocks */
#define TP_FAULT_SLOTS    8         /* frames held back for reordering */
#define TP_MSG_WINDOW     (1u << 20) /* max msg_id distance ahead of delivery */
#define TP_CREDIT_FLOOR   8         /* credit advertised even when full (see rx) */
#define TP_DUPTHRESH      3         /* SACKed frames above a hole: fast rtx */
#define TP_NS_PER_US      1000ull
#define TP_PREFETCH_FRAGS 16        /* large messages: prefetch this far ahead */
#define TP_PREFETCH_MAX_FRAG 4096u  /* ... when their fragments are shorter */

_Static_assert(TP_BLK % 64 == 0, "arena blocks keep 64-byte alignment");
_Static_assert(TP_BLK % sizeof(struct tp_seg) == 0, "whole segments per block");
_Static_assert(WIRE_SACK_BITS == 64, "sack is one uint64");

enum tp_peer_state { TP_PS_UNKNOWN = 0, TP_PS_UP = 1, TP_PS_DOWN = 2 };
enum tp_msg_state { TP_MS_FREE = 0, TP_MS_PARTIAL, TP_MS_COMPLETE,
		    TP_MS_DELIVERED };

/* serial-number arithmetic over 32 bits (RFC 1982) */
static inline int32_t tp__sdiff(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b);
}
static inline bool tp__slt(uint32_t a, uint32_t b) { return tp__sdiff(a, b) < 0; }

/* A message accepted by tp_send, until send_done. */
struct tp_txmsg {
	struct tp_txmsg *next;     /* stream queue, free list, fail list */
	const uint8_t *data;
	struct tp_ref *ref;        /* our reference, or NULL */
	uint64_t cookie;
	uint32_t len, msg_id;
	uint32_t frag_count, next_frag, frags_acked;
	uint16_t frag_size, stream;
	uint8_t failed;
	uint8_t *inline_buf;       /* inline_max bytes owned by this descriptor */
};

/* One frame in flight: window slot seq & (window - 1). */
struct tp_slot {
	struct tp_txmsg *msg;      /* NULL: acked/sacked or free */
	uint64_t sent_ns;
	uint32_t frag_index;
	uint16_t rtx;              /* times retransmitted */
	uint8_t sacked;
	uint8_t fast;              /* fast-retransmitted since its last RTO */
};

struct tp_stream_tx {
	struct tp_txmsg *head, *tail;   /* head: being fragmented */
	uint32_t next_msg_id;
};

struct tp_stream_rx {
	uint32_t next_deliver;          /* msg_id delivered next */
	uint8_t deferred;               /* consumer said -EAGAIN */
};

struct tp_peer {
	uint8_t present, state;
	uint16_t node;
	struct wire_addr addr;          /* prebuilt addresses for TX */
	uint32_t local_epoch, remote_epoch;
	uint8_t await_epoch_ack;        /* we reset: refuse frames not addressed to local_epoch */
	uint8_t dst0_stale;             /* we reset since remote_epoch began: it
					 * learns our epoch from that reset, so
					 * its dst_epoch 0 frames are older */
	uint32_t reset_done_for;        /* remote epoch whose WIRE_F_RESET we obeyed */
	uint64_t last_rx_ns, busy_since_ns;
	uint8_t heard;                  /* any valid frame ever: "was up" */

	/* send side */
	struct tp_slot *win;            /* [window] */
	struct tp_stream_tx *stx;       /* [streams] */
	uint32_t snd_una, snd_next, snd_limit;
	uint32_t credit;                /* last credit from the peer */
	uint32_t queued_msgs;           /* accepted, not completed */
	uint32_t tx_pending_streams;    /* streams with unassigned fragments */
	/* arena blocks the receiver holds for our messages that are started
	 * but not fully assigned (tp__rx_blocks): a message starts only if
	 * it fits the arena beside them (docs/wire.md, "Progress") */
	uint32_t tx_partial_blk;
	uint32_t rr;                    /* round-robin cursor over streams */
	uint64_t srtt_ns, rttvar_ns, rto_ns;
	uint8_t has_rtt, backoff, stalled;
	uint8_t tx_blocked;             /* blocked_seq was assigned, the link was full */
	uint32_t blocked_seq;
	uint64_t rto_due, probe_due, busy_due;

	/* receive side */
	uint64_t *rcv_bits;             /* [window / 64] ring, bit = seq received */
	struct tp_stream_rx *srx;       /* [streams] */
	uint32_t rcv_next;
	uint32_t rx_partial;            /* messages of several fragments being
					 * reassembled: while any, silence
					 * declares the peer down (check_down) */
	uint32_t ts_recent;             /* tsval of the latest DATA frame, echoed */
	uint32_t ack_pending;           /* in-order frames not yet acked */
	uint64_t ack_due;               /* 0: none armed */
	uint8_t ack_now, has_deferred;
	uint8_t ack_held;               /* in tp->ackq (rx_batch) */
	uint64_t stale_reply_ns;
	uint16_t peer_streams;          /* the peer's stream count (its reply
					 * to a frame on a stream it lacks
					 * said); 0: not known */
	uint32_t peer_max;              /* the largest message the peer takes
					 * (its ACKs say); 0: not known yet */
	uint32_t peer_share;            /* blocks of the peer's arena for our
					 * side-by-side messages (its frames
					 * say); 0: not known yet */
};

/* Reassembly arena over a block bitmap (1 = used): runs of up to
 * TP_ARENA_SMALL blocks by first fit from the bottom, longer ones by last
 * fit from the top (transport_arena.c says why). Allocation is
 * O(bitmap words) at worst, never malloc. */
#define TP_ARENA_SMALL 16u
struct tp_arena {
	uint8_t *base;
	uint64_t *used;
	uint32_t nblk, free_blk;
	uint32_t hint;                  /* every block below it is used */
	uint32_t top;                   /* every block from it up is used */
	size_t bytes;
	bool mapped;                    /* we mmap'ed base */
	size_t pop_left;                /* bytes from base not yet mapped in
					 * by tp__arena_populate_step (a
					 * whole number of pages; only its
					 * caller touches it) */
};

struct tp_fault_slot {
	uint32_t len, countdown;
	unsigned flags;
	uint8_t *buf;
};

struct tp {
	struct tp_params p;
	struct tp_ops ops;
	void *user;
	struct wire_rx_cfg rxcfg;
	uint32_t wmask;                 /* window - 1 */
	uint16_t frag_size;             /* our fragment payload size */
	uint16_t frag_size_stream;      /* ... for messages >= p.stream_min */
	uint16_t ip_id;

	struct tp_peer *peers;          /* [max_peers] */

	/* send descriptors */
	struct tp_txmsg *txpool, *txfree;
	uint8_t *inline_slab;
	uint32_t tx_free_count;

	/* receive descriptors + reassembly */
	struct tp_msg *rxpool, *rxfree;
	uint32_t rx_free_count, rx_outstanding;   /* delivered, unreleased */
	/* Kept for frames at a peer's rcv_next (in order): a message started
	 * by a later frame may not take the last rx_rsv descriptors (streams
	 * per present peer) nor the last arena_rsv blocks (max_message and
	 * its fragment map, or the whole arena when smaller). See place(). */
	uint32_t npeers, rx_rsv, arena_rsv;
	uint16_t rx_share;              /* each peer's share of our arena, in
					 * wire_hdr.share units: our frames say */
	struct tp_msg **htab;           /* (peer, stream, msg_id) -> message */
	uint32_t hmask;
	struct tp_msg *rx_last;         /* in htab under rx_last_key, or NULL */
	uint64_t rx_last_key;
	struct tp_msg *orphans;         /* complete, from a reset session */
	uint32_t orphans_cut;           /* orphans dropped by tp_rx_detach */
	struct tp_arena arena;
	/* kept frames (ops->rx_keep): segment tables, TP_BLK / 16 per block;
	 * base != NULL iff keeping is on (rx_keep, rx_keep_min, rx_keep_frames) */
	struct tp_arena segarena;
	void *rx_ref;                   /* the frame tp__rx_frame works on */
	uint8_t rx_kept;                /* ... was kept */

	/* fault injection */
	uint64_t rng;
	bool fault_on;
	uint32_t fault_held;
	struct tp_fault_slot fslot[TP_FAULT_SLOTS];

	uint64_t deadline;
	uint8_t closing;                /* in tp_destroy: tp_send refuses */
	uint16_t *ackq;                 /* [max_peers]: peers with a held ack */
	uint32_t ackq_len;
	uint32_t deferred_peers;        /* peers with has_deferred */
	uint8_t hdr[WIRE_HDRS_LEN];     /* scratch for TX headers */
	/* DATA headers of tmpl_msg (at those epochs) come from a template
	 * (wire_tmpl): valid while that message lives */
	struct wire_tmpl tmpl;
	const struct tp_txmsg *tmpl_msg;
	uint32_t tmpl_src_epoch, tmpl_dst_epoch;
	struct tp_stats st;
};

static inline void tp__arm(struct tp *tp, uint64_t t)
{
	if (t < tp->deadline)
		tp->deadline = t;
}

/* Where a message's fragment map starts after its len bytes in the arena
 * (8-byte words; a line of its own) */
static inline size_t tp__fmap_off(uint64_t len)
{
	return (size_t)((len + 63) & ~63ull);
}

/* Bytes of a message's fragment map: none up to 64 fragments (the map
 * then lives on the descriptor), else one bit per fragment in words. */
static inline size_t tp__fmap_bytes(uint32_t frag_count)
{
	return frag_count > 64 ? ((size_t)frag_count + 63) / 64 * 8 : 0;
}

/* Arena bytes a receiver allocates for a message of len bytes in
 * frag_count fragments: the data, then (over 64 fragments) its map. The
 * receiver allocates exactly this; the sender budgets with it. */
static inline size_t tp__rx_need(uint64_t len, uint32_t frag_count)
{
	size_t fmap = tp__fmap_bytes(frag_count);
	return fmap ? tp__fmap_off(len) + fmap : (size_t)len;
}

static inline uint32_t tp__rx_blocks(uint64_t len, uint32_t frag_count)
{
	return (uint32_t)((tp__rx_need(len, frag_count) + TP_BLK - 1) / TP_BLK);
}

/* A message of len bytes is "large" (tp_params.stream_min): whole-line
 * fragments, streaming stores into the arena, prefetched when sent. */
static inline bool tp__large(const struct tp *tp, uint64_t len)
{
	return tp->p.stream_min && len >= tp->p.stream_min;
}

static inline void tp__bad(struct tp *tp, enum wire_reason r)
{
	ZB_DASSERT(r > WIRE_OK && r < WIRE_REASON_COUNT);
	tp->st.bad[r]++;
	tp->st.bad_frames++;
}

/* transport_arena.c */
int tp__arena_init(struct tp_arena *a, void *mem, size_t bytes);
void tp__arena_fini(struct tp_arena *a);
long tp__arena_populate_step(struct tp_arena *a, size_t max_bytes);
/* Blocks for `bytes` (0 bytes: 0 blocks, returns 0 with *blk = 0). 0 or -ENOMEM. */
int tp__arena_alloc(struct tp_arena *a, size_t bytes, uint32_t *blk, uint32_t *nblk);
void tp__arena_free(struct tp_arena *a, uint32_t blk, uint32_t nblk);

/* transport_tx.c */
#define TP_BUSY_RETRY_NS 20000ull       /* link full: try the frame again after */
void tp__pump(struct tp *tp, struct tp_peer *pe, uint64_t now);
void tp__send_ack(struct tp *tp, struct tp_peer *pe, uint8_t flags, uint64_t now);
void tp__send_reply(struct tp *tp, struct tp_peer *pe, uint16_t streams, uint64_t now);
enum wire_reason tp__on_ack(struct tp *tp, struct tp_peer *pe,
			    const struct wire_hdr *h, uint64_t now);
void tp__tx_timers(struct tp *tp, struct tp_peer *pe, uint64_t now);
void tp__tx_reset(struct tp *tp, struct tp_peer *pe, struct tp_txmsg **fail);
void tp__txmsg_finish(struct tp *tp, struct tp_txmsg *m, int status);
uint64_t tp__rto(const struct tp *tp, const struct tp_peer *pe);

/* transport_rx.c */
int tp__rx_frame(struct tp *tp, const uint8_t *frame, size_t len,
		 unsigned flags, void *ref, uint64_t now);
void tp__msg_free_mem(struct tp *tp, struct tp_msg *m);
void tp__rx_reset(struct tp *tp, struct tp_peer *pe);
void tp__deliver_pending(struct tp *tp, uint64_t now);
uint32_t tp__credit(const struct tp *tp);
uint64_t tp__sack(const struct tp *tp, const struct tp_peer *pe);

/* transport.c */
void tp__session_reset(struct tp *tp, struct tp_peer *pe, int err,
		       bool bump_local, uint64_t now);
void tp__peer_heard(struct tp *tp, struct tp_peer *pe, uint64_t now);
bool tp__peer_max(struct tp *tp, struct tp_peer *pe, uint32_t max, uint64_t now);
bool tp__peer_streams(struct tp *tp, struct tp_peer *pe, uint16_t n, uint64_t now);

/* transport_fault.c */
uint64_t tp__rand(struct tp *tp);
int tp__fault_rx(struct tp *tp, const uint8_t *frame, size_t len,
		 unsigned flags, void *ref, uint64_t now);
void tp__fault_flush(struct tp *tp, uint64_t now);
int tp__fault_init(struct tp *tp);
void tp__fault_fini(struct tp *tp);

#endif /* ZBMD_TRANSPORT_INTERNAL_H */
