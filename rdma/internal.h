/* rdma/internal.h — shared-internal declarations of the verbs provider.
 *
 * Pure logic (no device needed; unit tested in tests/rdma/):
 *   conn.c    connection blob encode/decode + validation
 *   qpattr.c  QP attribute builder per RC state transition
 *   reqtab.c  request table and send-queue signalling accounting
 *   wc.c      work-completion status -> error mapping
 *   policy.c  GPU registration path policy, GID choice, MTU helpers
 * Device code:
 *   dev.c     device/port/GID selection, probes (DMA-BUF, peer memory)
 *   comm.c    QP creation, connection, teardown
 *   xfer.c    isend/irecv/test, CQ polling, error handling
 *   mr.c      memory registration (host, DMA-BUF, peer memory, staging)
 *   async.c   async events
 *   provider.c the net_ops table, init/fini/progress
 *   info.c    `zbmd rdma-info`
 */
#ifndef ZBMD_RDMA_INTERNAL_H
#define ZBMD_RDMA_INTERNAL_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zbmd/common.h"
#include "zbmd/config.h"
#include "zbmd/net.h"
#include "zbmd/rdma.h"

/* ---- limits ------------------------------------------------------------ */
#define RDMA_SLOTS_MIN     2u      /* messages in flight per comm (pow2) */
#define RDMA_SLOTS_MAX     1024u
#define RDMA_EAGER_MAX     4096u   /* <= this goes by SEND into the pool */
#define RDMA_EAGER_LIMIT   65536u  /* largest eager_max a blob may carry */
#define RDMA_CHANNELS_MAX  64u
#define RDMA_CQ_BURST      32
#define RDMA_MSG_MAX       (1u << 30) /* one message, bytes */
#define RDMA_BLOB_MAGIC    0x5A425251u /* "ZBRQ" */
#define RDMA_BLOB_VERSION  1u
#define RDMA_GID_AUTO      255u    /* [rdma] gid_index = 255: pick one */

static_assert(RDMA_CONN_BLOB_LEN == 72, "blob layout is 72 bytes");
static_assert((RDMA_SLOTS_MAX & (RDMA_SLOTS_MAX - 1)) == 0, "pow2");
static_assert(RDMA_EAGER_MAX <= RDMA_EAGER_LIMIT, "eager fits a blob");

/* ---- error message of the calling thread ------------------------------- */
void rdma__set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- connection parameters (conn.c) ------------------------------------ */
#define RDMA_CONN_F_GLOBAL 0x01u  /* GRH required (RoCE, or IB routed) */

struct rdma_conn {
	uint8_t version;
	uint8_t side;            /* enum rdma_side of the producer */
	uint8_t flags;           /* RDMA_CONN_F_* */
	uint8_t mtu;             /* enum ibv_mtu, 1..5 */
	uint32_t cluster;        /* [cluster] id */
	uint16_t src_node, dst_node, channel;
	uint16_t lid;
	uint32_t qpn;            /* 24 bits */
	uint32_t psn;            /* 24 bits */
	uint32_t slots;          /* messages in flight (pow2) */
	uint32_t eager_max;      /* receiver: largest eager message */
	uint32_t rkey;           /* send side: its CTS FIFO; recv side: flush target */
	uint64_t addr;
	uint8_t gid[16];
};

/* Encode c into buf (RDMA_CONN_BLOB_LEN bytes, little-endian, CRC32 last).
 * c must be valid (asserted). Returns RDMA_CONN_BLOB_LEN or -EINVAL (cap). */
int rdma__conn_encode(const struct rdma_conn *c, void *buf, size_t cap);

/* Decode and validate. Returns 0, -ZB_ERR_BAD_FRAME (length, magic, CRC,
 * a field out of range) or -EPROTONOSUPPORT (other version); on error c is
 * untouched and why (when non-NULL) names the first problem. */
int rdma__conn_decode(const void *buf, size_t len, struct rdma_conn *c,
		      char *why, size_t why_cap);

/* The field checks decode applies, for encode's assertion. 0 or -BAD_FRAME. */
int rdma__conn_check(const struct rdma_conn *c, char *why, size_t why_cap);

uint32_t rdma__crc32(const void *buf, size_t len);

/* ---- QP attributes (qpattr.c) ------------------------------------------ */
/* Local QP parameters fixed at init from [rdma] and the port. */
struct rdma_qp_local {
	uint8_t port;
	uint16_t pkey_index;
	uint8_t sgid_index;
	bool ethernet;           /* RoCE: GRH always */
	enum ibv_mtu active_mtu; /* min(config, port active) */
	uint8_t sl, traffic_class, hop_limit;
	uint8_t timeout;         /* local ACK timeout, 4.096us * 2^timeout */
	uint8_t retry_cnt;       /* 0..7 */
	uint8_t rnr_retry;       /* 0..7, 7 = infinite */
	uint8_t min_rnr_timer;   /* 1..31 */
	uint8_t max_rd_atomic;   /* outstanding RDMA READ/atomic, we use 1 */
	uint32_t access;         /* IBV_ACCESS_* the remote may do */
	uint32_t psn;            /* our initial send PSN */
};

/* Build the attributes and mask for one RC transition, exactly the
 * attributes the verbs spec (ibv_modify_qp(3), IBA 11.2.4.2 / table 91)
 * requires for it plus the optional ones we rely on:
 *   RESET->INIT  STATE|PKEY_INDEX|PORT|ACCESS_FLAGS
 *   INIT->RTR    STATE|AV|PATH_MTU|DEST_QPN|RQ_PSN|MAX_DEST_RD_ATOMIC|MIN_RNR_TIMER
 *   RTR->RTS     STATE|SQ_PSN|TIMEOUT|RETRY_CNT|RNR_RETRY|MAX_QP_RD_ATOMIC
 *   any->ERR, any->RESET  STATE
 * remote is needed for INIT->RTR only. Returns 0, or -EINVAL (transition
 * not allowed, or a parameter out of range); attr/mask zeroed on error. */
int rdma__qp_attr(enum ibv_qp_state from, enum ibv_qp_state to,
		  const struct rdma_qp_local *loc, const struct rdma_conn *remote,
		  struct ibv_qp_attr *attr, int *mask);

/* ---- request table and SQ accounting (reqtab.c) ------------------------- */
enum rdma_req_state { RDMA_REQ_FREE = 0, RDMA_REQ_POSTED, RDMA_REQ_DONE, RDMA_REQ_ERROR };

struct rdma_comm;
struct rdma_mr;

struct rdma_req {
	struct rdma_comm *comm;
	uint64_t seq;            /* message sequence on the comm */
	uint64_t sq_seq;         /* sender: the SQ sequence of its WR */
	void *data;
	size_t size;             /* posted size */
	size_t done_size;        /* bytes sent / received */
	struct rdma_mr *mh;
	uint32_t tag;
	int32_t err;
	uint8_t state;           /* enum rdma_req_state */
	uint8_t is_send;
};

/* A fixed ring of requests, allocated in sequence order. Completion may be
 * marked in any order; release (test() returning done) in any order; a slot
 * is reused only once released and all older ones are released too. */
struct rdma_reqtab {
	struct rdma_req *slots;
	uint32_t cap, mask;      /* cap pow2 */
	uint64_t head;           /* next seq to hand out */
	uint64_t tail;           /* oldest seq not released */
};

void rdma__reqtab_init(struct rdma_reqtab *t, struct rdma_req *slots, uint32_t cap);
/* NULL when cap requests are outstanding (caller returns -EAGAIN). */
struct rdma_req *rdma__reqtab_alloc(struct rdma_reqtab *t);
/* The outstanding request with this seq (low 31 bits match when seq31),
 * NULL when none / released / stale. */
struct rdma_req *rdma__reqtab_get(struct rdma_reqtab *t, uint64_t seq);
struct rdma_req *rdma__reqtab_get31(struct rdma_reqtab *t, uint64_t from, uint32_t seq31);
void rdma__reqtab_complete(struct rdma_req *r, size_t size);
void rdma__reqtab_fail(struct rdma_req *r, int err);
/* Fail every POSTED request with err; returns how many. */
uint32_t rdma__reqtab_fail_all(struct rdma_reqtab *t, int err);
void rdma__reqtab_release(struct rdma_reqtab *t, struct rdma_req *r);
uint32_t rdma__reqtab_outstanding(const struct rdma_reqtab *t);

/* Send-queue accounting with completion batching: a WR is signalled every
 * signal_every posts (capped at depth / 2), when the caller forces it, or
 * when it fills the SQ
 * (so a full SQ always ends with a signalled WR and can drain). A signalled
 * completion of WR s retires every WR <= s (RC completes in order). */
struct rdma_sq {
	uint32_t depth, signal_every, run;
	uint64_t posted, retired;
	uint64_t last_signaled;  /* seq+1 of the newest signalled WR, 0: none */
};

void rdma__sq_init(struct rdma_sq *q, uint32_t depth, uint32_t signal_every);
/* Reserve the next WR. 0 with *seq and *signal set, or -EAGAIN (full). */
int rdma__sq_post(struct rdma_sq *q, bool force_signal, uint64_t *seq, bool *signal);
/* Give back the last reservation (the post failed). */
void rdma__sq_unpost(struct rdma_sq *q, uint64_t seq, bool signal, uint64_t prev_last, uint32_t prev_run);
void rdma__sq_retire(struct rdma_sq *q, uint64_t seq);
static inline bool rdma__sq_done(const struct rdma_sq *q, uint64_t seq) { return seq < q->retired; }
/* WR seq is not yet retired and no signalled WR at or after it is in
 * flight: nothing will ever complete it unless a signalled WR is posted. */
static inline bool rdma__sq_needs_flush(const struct rdma_sq *q, uint64_t seq)
{
	return seq >= q->retired && q->last_signaled <= seq;
}
static inline uint32_t rdma__sq_inflight(const struct rdma_sq *q)
{
	return (uint32_t)(q->posted - q->retired);
}

/* ---- work completions (wc.c) ------------------------------------------- */
struct rdma_wc_class {
	int err;                 /* what the affected requests fail with */
	bool qp_fatal;           /* the QP is in the error state afterwards */
	bool peer_side;          /* the peer (or the path to it) is at fault */
};
/* Map a status. SUCCESS -> err 0. Unknown statuses -> -ZB_ERR_DEVICE. */
struct rdma_wc_class rdma__wc_classify(enum ibv_wc_status st);

/* ---- policy (policy.c) ------------------------------------------------- */
enum rdma_reg_path {
	RDMA_REG_NONE = 0, RDMA_REG_HOST, RDMA_REG_DMABUF, RDMA_REG_PEERMEM,
	RDMA_REG_STAGING,
};
struct rdma_reg_inputs {
	enum net_mem_type type;
	bool gpu_backend;        /* a GPU backend is compiled in and initialised */
	bool gpu_host;           /* its device memory is host memory (cpu backend) */
	bool dmabuf_export;      /* it can export the allocation as a DMA-BUF fd */
	bool dmabuf_verbs;       /* the device accepts ibv_reg_dmabuf_mr */
	bool peermem;            /* nvidia_peermem (or nv_peer_mem) is loaded */
	bool staging;            /* the backend can copy device<->pinned host */
};
/* Decide how to register. Order: DMA-BUF, peer memory, staging; host memory
 * (and the cpu backend's "device" memory) HOST. why gets a sentence naming the path and the reason. */
enum rdma_reg_path rdma__reg_decide(const struct rdma_reg_inputs *in, char *why, size_t cap);
const char *rdma__reg_path_name(enum rdma_reg_path p);
/* A path failed at run time: take it out of the inputs (DMA-BUF: the GPU's
 * export when gpu_side, else the NIC's registration) so that the next
 * decision falls back to the next path. */
void rdma__reg_strike(struct rdma_reg_inputs *in, enum rdma_reg_path failed, bool gpu_side);

/* A GID table entry as the policy sees it. */
struct rdma_gid_entry {
	uint8_t raw[16];
	int type;                /* IBV_GID_TYPE_IB / ROCE_V1 / ROCE_V2, -1 unknown */
	bool valid;
};
/* Choose the GID index: want < RDMA_GID_AUTO must exist and be usable for
 * the link layer; RDMA_GID_AUTO prefers RoCE v2 IPv4-mapped, then RoCE v2,
 * then RoCE v1, then any non-zero (IB: index 0). Returns the index or
 * -ENOENT (why set). */
int rdma__gid_pick(const struct rdma_gid_entry *tab, int n, bool ethernet,
		   unsigned want, char *why, size_t cap);
const char *rdma__gid_type_name(int type);
bool rdma__gid_is_zero(const uint8_t gid[16]);

/* MTU bytes -> enum ibv_mtu (exact powers 256..4096), 0 when invalid. */
enum ibv_mtu rdma__mtu_enum(uint32_t bytes);
uint32_t rdma__mtu_bytes(enum ibv_mtu m);

/* Round down to a power of two within [RDMA_SLOTS_MIN, RDMA_SLOTS_MAX]. */
uint32_t rdma__slots_from_pool(uint32_t recv_pool);

/* ---- immediate data ---------------------------------------------------- */
/* imm (host order) = message seq low 31 bits; bit 31 = abort, low bits then
 * carry the reason (an errno). */
#define RDMA_IMM_ABORT   0x80000000u
#define RDMA_IMM_SEQMASK 0x7FFFFFFFu

/* ---- wr_id ------------------------------------------------------------- */
/* wr_id = comm index (16) | op (8) | value (40: SQ seq or pool slot). */
enum rdma_op { RDMA_OP_DATA = 1, RDMA_OP_FLUSH, RDMA_OP_CTS, RDMA_OP_RECV, RDMA_OP_ABORT };
static inline uint64_t rdma__wrid(uint32_t comm, enum rdma_op op, uint64_t v)
{
	return ((uint64_t)comm << 48) | ((uint64_t)op << 40) | (v & ((1ull << 40) - 1));
}
static inline uint32_t rdma__wrid_comm(uint64_t w) { return (uint32_t)(w >> 48); }
static inline enum rdma_op rdma__wrid_op(uint64_t w) { return (enum rdma_op)((w >> 40) & 0xff); }
static inline uint64_t rdma__wrid_val(uint64_t w) { return w & ((1ull << 40) - 1); }

/* ---- runtime (device code) -------------------------------------------- */
/* The CTS (clear to send) the receiver writes into the sender's FIFO slot
 * (seq % slots) with RDMA WRITE WITH IMM (imm = seq). */
#define RDMA_CTS_EAGER 0x1u      /* receive buffer is host memory: eager ok */
#define RDMA_CTS_RKEY  0x2u      /* addr/rkey valid: WRITE ok */
struct rdma_cts {
	uint64_t addr;
	uint64_t size;
	uint32_t rkey;
	uint32_t tag;
	uint32_t flags;
	uint32_t seq31;
};
static_assert(sizeof(struct rdma_cts) == 32, "cts layout");

struct rdma_mr {
	struct ibv_mr *mr;       /* covers the user range (or the staging buffer) */
	enum rdma_reg_path path;
	enum net_mem_type type;
	void *addr;              /* user address */
	size_t len;
	void *staging;           /* pinned host copy (STAGING) */
	int dmabuf_fd;           /* -1 */
	char why[160];
};

/* The GPU operations the provider needs, bound to one gpu/ context (gpu.c).
 * gctx NULL: no GPU memory (NET_MEM_GPU -> ZB_ERR_UNSUPPORTED). */
struct gpu_ctx;
struct rdma_gpu_iface {
	struct gpu_ctx *gctx;
	const char *name;        /* backend name */
	bool host_memory;        /* cpu backend: device memory is host memory */
	bool peermem_ok;         /* device pointers are real (CUDA): peer memory may apply */
	int (*dmabuf_export)(struct gpu_ctx *g, void *ptr, size_t len, int *fd, uint64_t *off);
	int (*copy_d2h)(struct gpu_ctx *g, void *dst, const void *dev_src, size_t len);
	int (*copy_h2d)(struct gpu_ctx *g, void *dev_dst, const void *src, size_t len);
	int (*host_alloc)(struct gpu_ctx *g, size_t len, void **out);
	void (*host_free)(struct gpu_ctx *g, void *p);
	/* gpu/ wants the calls on one context serialised, and the comms of
	 * several lanes stage through it: their copies take turns */
	pthread_mutex_t copy_lock;
};
/* Bind to gctx (NULL: no GPU). Returns 0. */
int rdma__gpu_iface_init(struct rdma_gpu_iface *g, struct gpu_ctx *gctx);
/* A staging copy, device -> host (to_host) or host -> device, under
 * copy_lock: any lane's thread. */
int rdma__gpu_copy(struct rdma_gpu_iface *g, bool to_host, void *dst, const void *src,
		   size_t len);

enum rdma_comm_state {
	RDMA_COMM_NONE = 0, RDMA_COMM_CREATING, RDMA_COMM_LOCAL,  /* QP in INIT, blob ready */
	RDMA_COMM_REMOTE,        /* peer blob delivered */
	RDMA_COMM_READY,         /* RTS, handed to the user */
	RDMA_COMM_FAILED,
};

struct rdma_ctx;

struct rdma_comm {
	struct rdma_ctx *ctx;
	uint32_t index;          /* in ctx->comms */
	uint16_t peer, channel;
	enum rdma_side side;
	_Atomic int state;       /* enum rdma_comm_state */
	_Atomic int fail_err;    /* set by async handling, acted on by the owner */
	int err;                 /* the error requests fail with once failed */
	struct ibv_qp *qp;
	struct rdma_conn local, remote;
	uint32_t slots;          /* local: request table and buffers */
	uint32_t eff;            /* min(local, remote) slots: CTS FIFO ring */
	uint32_t peer_eager;     /* receiver's eager_max (send side) */
	struct rdma_reqtab reqs;
	struct rdma_sq sq;
	bool user_open;          /* connect/accept returned it */
	bool qp_error;           /* moved to ERR */
	bool abort_posted;       /* sent the peer an abort: keep the QP up */
	bool blob_sent;          /* bootstrap / send_blob: our blob is on its way */
	bool rtr;                /* the QP is in RTR (or past): it takes the peer's packets */
	_Atomic bool blob_acked; /* the peer took our blob (rdma_conn_blob_result 0) */
	_Atomic int blob_fail;   /* ... or it did not: that status; 0 none */
	/* send side: CTS FIFO written by the peer */
	struct rdma_cts *fifo;
	struct ibv_mr *fifo_mr;
	uint64_t cts_seen;       /* CTS arrived for seq < cts_seen */
	uint64_t next_send;      /* next message seq to send */
	uint8_t *bounce;         /* eager sends from unregistered memory */
	struct ibv_mr *bounce_mr;
	/* recv side: CTS source + eager pool */
	struct rdma_cts *cts_src;
	struct ibv_mr *cts_mr;
	uint8_t *pool;
	struct ibv_mr *pool_mr;
	uint64_t next_recv;      /* next message seq expected to arrive */
	uint32_t inline_max;     /* what the QP accepted */
	uint32_t sq_depth, cq_claim;
	struct rdma_req *req_mem;
};

struct rdma_cq {
	struct rdma_ctx *ctx;
	struct ibv_cq *cq;
	uint16_t channel;
	uint32_t cqe, reserved;  /* capacity, claimed by comms */
	bool armed;              /* ibv_req_notify_cq pending (rdma_wait) */
} ZB_ALIGNED_CL;

/* A peer's blob that arrived for a comm still in use: it takes effect
 * when that comm is closed and a new one opened at the same index. */
struct rdma_stash {
	bool valid;
	struct rdma_conn conn;
};

struct rdma_ctx {
	struct zb_config cfg_copy;
	uint16_t self, channels, peers;
	uint32_t cluster;
	struct rdma_provider_args pargs;
	bool announced;          /* pargs.on_ctx was told of this context */
	struct ibv_context *dev;
	char dev_name[64];
	struct ibv_pd *pd;
	struct ibv_port_attr port_attr;
	struct rdma_qp_local qpl;
	uint8_t gid[16];
	bool dmabuf_verbs;
	uint32_t slots, signal_every, inline_max;
	struct rdma_cq *cqs;     /* [channels] */
	struct ibv_comp_channel *comp_ch; /* CQ events for rdma_wait */
	struct rdma_comm *_Atomic *comms; /* [CFG_MAX_NODES * channels * 2] */
	struct rdma_stash *stash;         /* [same], under lock */
	pthread_mutex_t lock;    /* comm creation/destruction vs async events */
	uint32_t ncomms;
	_Atomic uint32_t psn_seed;
	_Atomic uint64_t blobs_spoofed; /* refused: src_node != the sender */
	struct rdma_gpu_iface gpu;
	struct rdma_boot *boot;  /* NULL when the control plane exchanges */
	uint16_t boot_port;
};

static inline uint32_t rdma__comm_index(const struct rdma_ctx *c, uint16_t peer,
					uint16_t ch, enum rdma_side side)
{
	return ((uint32_t)peer * c->channels + ch) * 2u + (side == RDMA_SIDE_RECV);
}

/* dev.c */
int rdma__dev_open(struct rdma_ctx *ctx, const struct zb_config *cfg);
void rdma__dev_close(struct rdma_ctx *ctx);
bool rdma__peermem_loaded(char *which, size_t cap);
/* 1 supported, 0 not (why), probing with an invalid fd. */
int rdma__dmabuf_probe(struct ibv_pd *pd, char *why, size_t cap);

/* comm.c */
extern int (*rdma__modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
extern int (*rdma__destroy_qp)(struct ibv_qp *qp);   /* seam, as modify_qp */
int rdma__comm_get(struct rdma_ctx *ctx, uint16_t peer, uint16_t ch,
		   enum rdma_side side, struct rdma_comm **out);
int rdma__comm_establish(struct rdma_comm *c);
void rdma__comm_destroy(struct rdma_comm *c);
/* Fail the comm: every outstanding request gets err, the QP goes to ERR,
 * the event is reported. Owner thread only. */
void rdma__comm_fail(struct rdma_comm *c, enum rdma_event_kind kind, int err,
		     int wc_status, uint32_t vendor_err, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));
void rdma__emit(struct rdma_ctx *ctx, const struct rdma_event *ev);

/* xfer.c */
int rdma__isend(void *comm, const void *data, size_t size, uint32_t tag,
		void *mh, void **request);
int rdma__irecv(void *comm, void *data, size_t size, uint32_t tag,
		void *mh, void **request);
int rdma__test(void *request, int *done, size_t *size);
int rdma__post_recv_pool(struct rdma_comm *c, uint32_t slot);
int rdma__poll_channel(struct rdma_cq *q);
void rdma__comm_close_notify(struct rdma_comm *c);

/* async.c: read and ack pending async events, ctx->lock held (destroyers
 * call it before ibv_destroy_* so no event is read-but-unacked then). */
int rdma__async_drain(struct rdma_ctx *ctx);

/* boot.c: TCP exchange of blobs when no control plane is hooked in */
struct rdma_boot;
int rdma__boot_start(struct rdma_boot **out, uint32_t ip_be, uint16_t port,
		     int (*deliver)(void *arg, const void *blob, size_t len),
		     void (*result)(void *arg, const void *blob, size_t len, int status),
		     void *arg);
uint16_t rdma__boot_port(const struct rdma_boot *b);
int rdma__boot_send(struct rdma_boot *b, uint32_t ip_be, uint16_t port,
		    const void *blob, size_t len);
/* delivered / rejected: blobs received here; sent: blobs the peer's
 * provider took, refused: ones it refused as invalid, dropped: ones that
 * never got through in 60 s (no listener, or "later" each time) */
void rdma__boot_stats(const struct rdma_boot *b, uint32_t *delivered, uint32_t *rejected,
		      uint32_t *sent, uint32_t *dropped, uint32_t *refused);
void rdma__boot_stop(struct rdma_boot *b);

/* mr.c */
/* The policy's inputs for a registration on this context. */
void rdma__reg_inputs(const struct rdma_gpu_iface *g, bool dmabuf_verbs,
		      enum net_mem_type type, struct rdma_reg_inputs *in);
int rdma__reg_mr(void *comm, void *data, size_t size, enum net_mem_type type,
		 void **mhandle);
int rdma__dereg_mr(void *comm, void *mhandle);

#endif /* ZBMD_RDMA_INTERNAL_H */
