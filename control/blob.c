/* Opaque blobs between nodes over the authenticated control messages
 * (ctl_blob_send, docs/control.md "Blobs").
 *
 * Wire (payloads of ctl_auth_seal'd messages, little endian):
 *   BLOB      to u16 | kind u8 | 0 u8 | len u16 | inc u64 | seq u64 | blob[len]
 *   BLOB_ACK  to u16 | status u8 | 0 u8 | inc u64 | seq u64          (20 bytes)
 * `to` binds the destination into the MAC (the auth header names only the
 * sender); `inc` is the sender's incarnation (its start time in ns) and
 * `seq` numbers its blobs to each destination from 1, so an acknowledgement
 * matches exactly one blob of one life of the sender. status: 0 delivered,
 * 1 refused, 2 unknown (older than the receiver's window: it cannot tell
 * whether it delivered it, so it must not say so; the sender counts the blob
 * as failed).
 *
 * Sender: a bounded MPMC ring (any thread) feeds a table of
 * CTL_BLOB_INFLIGHT slots owned by the control thread; a slot is
 * retransmitted (20 ms, doubling to 320 ms) until acknowledged or
 * blob_timeout_ms passed. Receiver: per sender, the incarnation and a
 * 1024-seq window of the seqs it handled (delivered or refused, and which);
 * a seq handled before is acknowledged again as it was, and not delivered
 * again. A seq that was deferred (-EAGAIN) is not in the window, so once
 * 1024 later blobs from that sender have been handled its retransmissions
 * are answered "unknown", never "delivered". Seqs are per destination so
 * that traffic to other peers does not move a receiver's window. A newer
 * incarnation resets the window; an older one is ignored (that life is over).
 */
#include "internal.h"
#include "zbmd/common.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLOB_HDR       22
#define ACK_LEN        20
#define RETRY_MIN_NS   (20 * 1000000ull)
#define RETRY_SHIFT_MAX 4                 /* 20 ms << 4 = 320 ms */
#define WIN_BITS       1024
#define ACK_DELIVERED  0
#define ACK_REFUSED    1
#define ACK_UNKNOWN    2                  /* older than the receiver's window */

struct blob_req {
	uint16_t peer;
	uint8_t kind;
	uint8_t pad;
	uint16_t len;
	uint8_t data[CTL_BLOB_MAX];
};

struct slot {
	bool used;
	struct blob_req r;
	uint64_t seq, first_ns, next_ns;
	uint32_t tries;                /* transmissions */
};

struct rx_peer {
	uint64_t inc, max;
	uint64_t win[WIN_BITS / 64];   /* bit seq % WIN_BITS: handled */
	uint64_t ref[WIN_BITS / 64];   /* ... and refused */
};

struct hook {
	ctl_blob_fn fn;
	void *arg;
	ctl_blob_result_fn result;     /* what became of our blob of this kind */
	void *result_arg;
};

struct ctl__blobs {
	uint16_t self;
	uint64_t inc;
	uint64_t timeout_ns;
	uint64_t next_seq[CFG_MAX_NODES];   /* per destination */
	void (*log)(void *arg, int level, const char *msg);
	void *log_arg;
	ctl__blob_tx_fn tx;
	void *tx_arg;
	struct ctl_ring *q;
	struct slot slots[CTL_BLOB_INFLIGHT];
	struct rx_peer rx[CFG_MAX_NODES];
	pthread_mutex_t hook_lock;     /* held while a handler runs */
	struct hook hooks[CTL_BLOB_KINDS];
	struct ctl_blob_stats st;      /* control thread; queued/queue_full atomic */
};

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}
static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void blog(struct ctl__blobs *b, int level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void blog(struct ctl__blobs *b, int level, const char *fmt, ...)
{
	char buf[384];
	va_list ap;

	if (!b->log)
		return;
	int k = snprintf(buf, sizeof(buf), "control[%u]: ", b->self);
	va_start(ap, fmt);
	vsnprintf(buf + k, sizeof(buf) - (size_t)k, fmt, ap);
	va_end(ap);
	b->log(b->log_arg, level, buf);
}

int ctl__blobs_create(struct ctl__blobs **out, uint16_t self, uint64_t incarnation,
		      const struct ctl_opts *opts, ctl__blob_tx_fn tx, void *tx_arg)
{
	struct ctl__blobs *b;
	int rc;

	ZB_ASSERT(out != NULL && opts != NULL && tx != NULL);
	ZB_ASSERT(self < CFG_MAX_NODES);
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	rc = ctl_ring_create(&b->q, opts->blob_ring_size ? opts->blob_ring_size : 256,
			     sizeof(struct blob_req));
	if (rc != 0) {
		free(b);
		return rc;
	}
	pthread_mutex_init(&b->hook_lock, NULL);
	b->self = self;
	b->inc = incarnation;
	b->timeout_ns = (uint64_t)(opts->blob_timeout_ms ? opts->blob_timeout_ms : 60000) *
			1000000ull;
	for (unsigned i = 0; i < CFG_MAX_NODES; i++)
		b->next_seq[i] = 1;
	b->log = opts->log;
	b->log_arg = opts->log_arg;
	b->tx = tx;
	b->tx_arg = tx_arg;
	*out = b;
	return 0;
}

void ctl__blobs_free(struct ctl__blobs *b)
{
	if (!b)
		return;
	ctl_ring_free(b->q);
	pthread_mutex_destroy(&b->hook_lock);
	free(b);
}

int ctl__blobs_enqueue(struct ctl__blobs *b, uint16_t peer, uint8_t kind,
		       const void *blob, size_t len)
{
	struct blob_req r;

	ZB_ASSERT(b != NULL);
	if (peer >= CFG_MAX_NODES || peer == b->self || kind == 0 ||
	    kind >= CTL_BLOB_KINDS || !blob)
		return -EINVAL;
	if (len == 0 || len > CTL_BLOB_MAX)
		return -EMSGSIZE;
	memset(&r, 0, sizeof(r));
	r.peer = peer;
	r.kind = kind;
	r.len = (uint16_t)len;
	memcpy(r.data, blob, len);
	if (ctl_ring_enqueue(b->q, &r) != 0) {
		__atomic_fetch_add(&b->st.queue_full, 1, __ATOMIC_RELAXED);
		return -ENOBUFS;
	}
	__atomic_fetch_add(&b->st.queued, 1, __ATOMIC_RELAXED);
	return 0;
}

/* Installs h's handler (ack false) or its acknowledgement hook (ack true)
 * for kind; the other half stays. */
static int hook_set(struct ctl__blobs *b, uint8_t kind, const struct hook *h, bool ack)
{
	ZB_ASSERT(b != NULL);
	if (kind == 0 || kind >= CTL_BLOB_KINDS)
		return -EINVAL;
	pthread_mutex_lock(&b->hook_lock);
	struct hook *t = &b->hooks[kind];
	if (ack) {
		t->result = h->result;
		t->result_arg = h->result ? h->result_arg : NULL;
	} else {
		t->fn = h->fn;
		t->arg = h->fn ? h->arg : NULL;
	}
	pthread_mutex_unlock(&b->hook_lock);
	return 0;
}

int ctl__blobs_handle(struct ctl__blobs *b, uint8_t kind, ctl_blob_fn fn, void *arg)
{
	return hook_set(b, kind, &(struct hook){.fn = fn, .arg = arg}, false);
}

int ctl__blobs_on_result(struct ctl__blobs *b, uint8_t kind, ctl_blob_result_fn fn, void *arg)
{
	return hook_set(b, kind, &(struct hook){.result = fn, .result_arg = arg}, true);
}

/* Slot s is finished with status (ctl_blob_result_fn): free it and tell
 * the result hook of its kind. The slot's copy stays as it is until this
 * thread reuses the slot, so the hook reads it in place. */
static void slot_done(struct ctl__blobs *b, struct slot *s, int status)
{
	ZB_ASSERT(s->used);
	s->used = false;
	pthread_mutex_lock(&b->hook_lock);
	const struct hook *h = &b->hooks[s->r.kind];
	if (h->result)
		h->result(h->result_arg, s->r.peer, s->r.kind, status, s->r.data, s->r.len);
	pthread_mutex_unlock(&b->hook_lock);
}

static void transmit(struct ctl__blobs *b, struct slot *s, uint64_t now)
{
	uint8_t p[BLOB_HDR + CTL_BLOB_MAX];

	ZB_ASSERT(s->used && s->r.len <= CTL_BLOB_MAX);
	put16(p, s->r.peer);
	p[2] = s->r.kind;
	p[3] = 0;
	put16(p + 4, s->r.len);
	put64(p + 6, b->inc);
	put64(p + 14, s->seq);
	memcpy(p + BLOB_HDR, s->r.data, s->r.len);
	if (b->tx(b->tx_arg, s->r.peer, NULL, CTL__MSG_BLOB, p, BLOB_HDR + s->r.len)) {
		if (s->tries++)
			b->st.retransmits++;
		b->st.sent++;
	}
	unsigned shift = s->tries < RETRY_SHIFT_MAX ? s->tries : RETRY_SHIFT_MAX;
	s->next_ns = now + (RETRY_MIN_NS << shift);
}

void ctl__blobs_tick(struct ctl__blobs *b, uint64_t now)
{
	ZB_ASSERT(b != NULL);
	for (unsigned i = 0; i < CTL_BLOB_INFLIGHT; i++) {
		struct slot *s = &b->slots[i];
		if (!s->used) {
			if (ctl_ring_dequeue(b->q, &s->r) != 0)
				continue;
			s->used = true;
			s->seq = b->next_seq[s->r.peer]++;
			s->first_ns = now;
			s->tries = 0;
			s->next_ns = now;
		}
		if (now - s->first_ns >= b->timeout_ns) {
			b->st.failed++;
			blog(b, CTL_LOG_WARN, "blob (kind %u, %u bytes) to node %u not "
			     "acknowledged within %llu ms (%u transmission(s)%s): dropped",
			     s->r.kind, s->r.len, s->r.peer,
			     (unsigned long long)(b->timeout_ns / 1000000ull), s->tries,
			     s->tries ? "; peer down, not ready, or another key/cluster"
				      : "; no address known for it");
			slot_done(b, s, -ETIMEDOUT);
			continue;
		}
		if (now >= s->next_ns)
			transmit(b, s, now);
	}
}

enum { RX_NEW = -1 };

/* What became of seq of this sender: RX_NEW (not handled yet), ACK_DELIVERED,
 * ACK_REFUSED, or ACK_UNKNOWN (older than the window: it may have been
 * deferred and never handled, so it is not claimed to be delivered). */
static int rx_seen(const struct rx_peer *r, uint64_t seq)
{
	if (seq > r->max)
		return RX_NEW;
	if (r->max - seq >= WIN_BITS)
		return ACK_UNKNOWN;
	unsigned w = (seq % WIN_BITS) / 64, bit = seq % 64;
	if (!((r->win[w] >> bit) & 1))
		return RX_NEW;
	return ((r->ref[w] >> bit) & 1) ? ACK_REFUSED : ACK_DELIVERED;
}

static void rx_mark(struct rx_peer *r, uint64_t seq, bool refused)
{
	unsigned w = (seq % WIN_BITS) / 64, bit = seq % 64;

	if (seq > r->max) {
		if (seq - r->max >= WIN_BITS) {
			memset(r->win, 0, sizeof(r->win));
			memset(r->ref, 0, sizeof(r->ref));
		} else {
			for (uint64_t q = r->max + 1; q < seq; q++) {
				r->win[(q % WIN_BITS) / 64] &= ~(1ull << (q % 64));
				r->ref[(q % WIN_BITS) / 64] &= ~(1ull << (q % 64));
			}
		}
		r->max = seq;
	}
	r->win[w] |= 1ull << bit;
	if (refused)
		r->ref[w] |= 1ull << bit;
	else
		r->ref[w] &= ~(1ull << bit);
}

static void send_ack(struct ctl__blobs *b, uint16_t to, const struct sockaddr_in *src,
		     uint64_t inc, uint64_t seq, uint8_t status)
{
	uint8_t p[ACK_LEN];

	put16(p, to);
	p[2] = status;
	p[3] = 0;
	put64(p + 4, inc);
	put64(p + 12, seq);
	(void)b->tx(b->tx_arg, to, src, CTL__MSG_BLOB_ACK, p, sizeof(p));
}

static void on_blob(struct ctl__blobs *b, uint16_t from, const struct sockaddr_in *src,
		    const uint8_t *p, size_t len)
{
	if (len < BLOB_HDR || get16(p) != b->self || p[2] == 0 || p[2] >= CTL_BLOB_KINDS ||
	    get16(p + 4) == 0 || get16(p + 4) > CTL_BLOB_MAX ||
	    len != BLOB_HDR + (size_t)get16(p + 4) || get64(p + 14) == 0) {
		b->st.malformed++;
		return;
	}
	uint8_t kind = p[2];
	uint16_t blen = get16(p + 4);
	uint64_t inc = get64(p + 6), seq = get64(p + 14);
	struct rx_peer *r = &b->rx[from];

	if (inc < r->inc) {
		b->st.malformed++;     /* from an earlier life of the sender */
		return;
	}
	if (inc > r->inc) {
		memset(r, 0, sizeof(*r));
		r->inc = inc;
	}
	int seen = rx_seen(r, seq);
	if (seen != RX_NEW) {
		b->st.duplicates++;
		send_ack(b, from, src, inc, seq, (uint8_t)seen);
		return;
	}
	int rc = -EAGAIN;
	pthread_mutex_lock(&b->hook_lock);
	if (b->hooks[kind].fn)
		rc = b->hooks[kind].fn(b->hooks[kind].arg, from, kind, p + BLOB_HDR, blen);
	pthread_mutex_unlock(&b->hook_lock);
	if (rc == -EAGAIN) {
		b->st.deferred++;
		return;
	}
	rx_mark(r, seq, rc < 0);
	if (rc < 0) {
		b->st.rejected++;
		blog(b, CTL_LOG_WARN, "blob (kind %u, %u bytes) from node %u refused: %s",
		     kind, blen, from, zb_strerror(rc));
	} else {
		b->st.delivered++;
	}
	send_ack(b, from, src, inc, seq, rc < 0 ? ACK_REFUSED : ACK_DELIVERED);
}

static void on_ack(struct ctl__blobs *b, uint16_t from, const uint8_t *p, size_t len)
{
	if (len != ACK_LEN || get16(p) != b->self || p[2] > ACK_UNKNOWN) {
		b->st.malformed++;
		return;
	}
	if (get64(p + 4) != b->inc)
		return;                 /* for an earlier life of ours */
	uint64_t seq = get64(p + 12);
	for (unsigned i = 0; i < CTL_BLOB_INFLIGHT; i++) {
		struct slot *s = &b->slots[i];
		if (!s->used || s->seq != seq || s->r.peer != from)
			continue;
		if (p[2] == ACK_REFUSED) {
			b->st.refused++;
			blog(b, CTL_LOG_WARN, "blob (kind %u, %u bytes) to node %u: "
			     "refused by its handler", s->r.kind, s->r.len, from);
		} else if (p[2] == ACK_UNKNOWN) {
			b->st.failed++;
			blog(b, CTL_LOG_WARN, "blob (kind %u, %u bytes) to node %u: "
			     "still not handled (handler not ready?) when %u later "
			     "blobs to it were, too old for it to track: dropped",
			     s->r.kind, s->r.len, from, WIN_BITS);
		} else {
			b->st.acked++;
		}
		slot_done(b, s, p[2] == ACK_REFUSED ? -EBADMSG :
				p[2] == ACK_UNKNOWN ? -ESTALE : 0);
		return;
	}
	/* an acknowledgement of a retransmission already acknowledged */
}

void ctl__blobs_on_msg(struct ctl__blobs *b, uint8_t type, uint16_t from,
		       const struct sockaddr_in *src, const uint8_t *p, size_t len)
{
	ZB_ASSERT(b != NULL && from < CFG_MAX_NODES);
	ZB_ASSERT(p != NULL || len == 0);
	if (type == CTL__MSG_BLOB)
		on_blob(b, from, src, p, len);
	else if (type == CTL__MSG_BLOB_ACK)
		on_ack(b, from, p, len);
}

void ctl__blobs_stats(const struct ctl__blobs *b, struct ctl_blob_stats *out)
{
	ZB_ASSERT(b != NULL && out != NULL);
	const struct ctl_blob_stats *s = &b->st;
	/* field by field: queued and queue_full are written by any thread */
	*out = (struct ctl_blob_stats){
		.queued = __atomic_load_n(&s->queued, __ATOMIC_RELAXED),
		.queue_full = __atomic_load_n(&s->queue_full, __ATOMIC_RELAXED),
		.sent = s->sent, .retransmits = s->retransmits, .acked = s->acked,
		.refused = s->refused, .failed = s->failed, .delivered = s->delivered,
		.duplicates = s->duplicates, .rejected = s->rejected,
		.deferred = s->deferred, .malformed = s->malformed,
	};
}
