/* zbmd/net.h — the net interface: how collectives stay transport-independent.
 *
 * Shaped like NCCL's net plugin: a provider is a const, versioned table of
 * function pointers (struct net_ops). Providers: "dpdk" (the reliable
 * transport over DPDK ports, dataplane/), "tcp" (kernel sockets, fallback and
 * baseline), "rdma" (libibverbs RC QPs, rdma/).
 *
 * Model. Peers are named by node id (the config's [peer.N]); the provider
 * resolves addresses itself (config, or the control plane for RDMA connection
 * parameters). A *send comm* carries messages to one peer on one channel, a
 * *recv comm* receives them from one peer on one channel; channels let
 * several lcores run independent rings. Messages on one comm are matched in
 * posting order: the k-th isend on a send comm lands in the k-th irecv on the
 * matching recv comm (its size must be >= the message). Nothing blocks:
 * connect/accept/isend/irecv return at once and the caller polls.
 *
 * Threads: a comm is used by one thread at a time (the lcore that owns the
 * channel). ctx-level calls (init/fini/progress) from the owning thread.
 *
 * Errors: 0 or a negative errno / ZB_ERR_* code. -EAGAIN means "not now, try
 * again" (connection in progress, no credit or request slot free). A request
 * that fails (peer down, epoch change) reports the error from test(); after
 * that, the comm is unusable and must be closed. A peer that closes or resets
 * the connection fails every pending request with -ZB_ERR_PEER_DOWN.
 *
 * Messages may be empty (size 0): a zero-length isend matches an irecv and
 * completes it with *size = 0. A tag different from the irecv's fails it
 * with -ZB_ERR_BAD_FRAME (the collectives use tags as a check), whatever
 * the message's size; a message with the irecv's tag but longer than its
 * buffer fails it with -EMSGSIZE.
 *
 * Provider registry. Providers compiled into the coll module ("tcp") are
 * always present. A provider that lives in a module linked *above* coll
 * (rdma/, the dpdk provider in the dataplane module) registers itself at
 * start-up with net_register(&its_ops) — from its module init function,
 * from the process's main before the first net_find(), or from a
 * __attribute__((constructor)) in an object the binary links — so that coll
 * never links against it. net_find() then looks names up in the registry.
 */
#ifndef ZBMD_NET_H
#define ZBMD_NET_H

#include "zbmd/common.h"

#include <stddef.h>
#include <stdint.h>

struct zb_config;

#define NET_OPS_VERSION 1

enum net_mem_type { NET_MEM_HOST = 0, NET_MEM_GPU = 1 };

struct net_init_args {
	const struct zb_config *cfg;   /* node id, peers, ports, transport knobs */
	uint16_t channels;             /* channels per peer pair that will be used */
	void *provider_arg;            /* provider-specific (e.g. the dataplane) */
};

struct net_ops {
	uint32_t version;              /* NET_OPS_VERSION */
	const char *name;              /* "dpdk", "tcp", "rdma" */

	/* Create / destroy a provider instance. *ctx owned by the provider. */
	int (*init)(const struct net_init_args *args, void **ctx);
	void (*fini)(void *ctx);

	/* Drive progress (retransmits, completions). Providers whose progress
	 * runs elsewhere (the dpdk lcore loop) may leave this NULL. Returns the
	 * number of events handled, or a negative error. */
	int (*progress)(void *ctx);

	/* Open a send comm to `peer` on `channel` / a recv comm from it.
	 * Non-blocking: -EAGAIN until established, then 0 and *comm set. */
	int (*connect)(void *ctx, uint16_t peer, uint16_t channel, void **send_comm);
	int (*accept)(void *ctx, uint16_t peer, uint16_t channel, void **recv_comm);

	/* Register memory for use in isend/irecv. type = NET_MEM_HOST or
	 * NET_MEM_GPU (GPUDirect where the provider can, else -ZB_ERR_UNSUPPORTED). */
	int (*reg_mr)(void *comm, void *data, size_t size, enum net_mem_type type,
		      void **mhandle);
	int (*dereg_mr)(void *comm, void *mhandle);

	/* Post a send / receive. *request set on success; -EAGAIN when no
	 * credit or request slot is free (nothing was posted). The buffer
	 * must stay valid and unmodified until test() reports done. */
	int (*isend)(void *send_comm, const void *data, size_t size, uint32_t tag,
		     void *mhandle, void **request);
	int (*irecv)(void *recv_comm, void *data, size_t size, uint32_t tag,
		     void *mhandle, void **request);

	/* Poll a request. *done = 1 when complete (then the request is freed;
	 * *size = bytes sent/received). A negative return is the request's
	 * error (and frees it). */
	int (*test)(void *request, int *done, size_t *size);

	/* Close a comm, requests still in flight included (abandoned: never
	 * tested again). On return the provider no longer reads or writes
	 * their buffers (the collectives hand them back to the caller of a
	 * failed collective); dpdk: except frames a port holds by zero-copy
	 * attachment until it frees them (docs/collectives.md). */
	void (*close_send)(void *send_comm);
	void (*close_recv)(void *recv_comm);

	/* Optional (NULL = not supported; callers then spin or yield): sleep
	 * until some comm of ctx may make progress (data arrived, send room,
	 * a connection) or timeout_ms passed. Returns >= 0, or a negative
	 * error. Lets a blocking caller (the benchmark, tests) share a core
	 * with other processes instead of spinning; the lcore loop never
	 * calls it. Added after version 1 was pinned: appended so that
	 * designated-initializer tables compile unchanged. */
	int (*wait)(void *ctx, int timeout_ms);

	/* Optional (NULL = not supported; the collectives then irecv and
	 * reduce afterwards): an irecv whose message R is combined with src
	 * as it arrives, element by element:
	 *     src == data:  data[i] = data[i] OP R[i]      (in place)
	 *     otherwise:    data[i] = R[i] OP src[i]
	 * (the first operand is the one a NaN is kept from in min/max, as in
	 * gpu_host_reduce). size is a multiple of the dtype's size; src must
	 * stay valid and unmodified, and [data, data+size) untouched by the
	 * caller, until test() reports done. When test() reports done the
	 * whole message has been combined; on an error data is undefined.
	 * op is ZB_SUM, ZB_PROD, ZB_MIN or ZB_MAX (ZB_AVG: sum, then the
	 * caller scales). A provider that places arriving fragments straight
	 * into data folds the copy into the reduction (one pass over the
	 * bytes, while the fragment is in the cache) instead of a copy now
	 * and a reduction later. Appended after version 1, like wait. */
	int (*irecv_reduce)(void *recv_comm, void *data, const void *src,
			    size_t size, uint32_t tag, enum zb_dtype dtype,
			    enum zb_redop op, void *mhandle, void **request);

	/* Optional (NULL = hints ignored): hints about a receive posted by
	 * irecv, given before the caller's next test() or progress() on any
	 * request of its ctx. NET_RECV_COLD: this node will not read the
	 * data again soon (a large collective's all-gather), so a provider
	 * that copies it into data may write it past the caches (streaming
	 * stores: no read for ownership of data, no eviction of what the
	 * caller works on). Only a hint: what test() reports, and when, is
	 * the same. Appended after version 1, like wait. */
	void (*recv_hint)(void *request, unsigned hints);

	/* Optional (NULL = none): the provider's own words about its last
	 * failure on the calling thread ("no RDMA devices: ...", "[rdma]
	 * device 'x' not found (devices: ...)"), "" when it has none; for a
	 * caller's error message after init or connect failed. Appended after
	 * version 1, like wait. */
	const char *(*last_error)(void);
};

#define NET_RECV_COLD 1u

#define NET_MAX_PROVIDERS 8

/* Register a provider (see "Provider registry" above). Control path, before
 * any net_find(); not thread-safe against concurrent net_find().
 * Returns 0; -EINVAL if ops is malformed (NULL name or a mandatory op
 * missing) or its version differs from NET_OPS_VERSION; -EEXIST if a
 * provider of that name is registered already; -ENOSPC when
 * NET_MAX_PROVIDERS are registered. */
int net_register(const struct net_ops *ops);

/* The provider named `name` ("tcp", "dpdk", "rdma"), or NULL when none of
 * that name is compiled in or registered. Thread-safe after registration. */
const struct net_ops *net_find(const char *name);

/* The i-th registered provider (built-ins first), NULL past the end. For
 * listing them in diagnostics. */
const struct net_ops *net_provider(unsigned i);

/* Appends " (WHY)" to the message in err, WHY being ops->last_error()'s
 * words about the failure just seen on this thread (which device, why), when
 * the provider has any. For callers' messages after init or connect failed. */
void net_add_reason(const struct net_ops *ops, char *err, size_t errlen);

/* The channels the "dpdk" provider takes (channel c of a peer is transport
 * stream c of the lane, streams 0..7; dataplane/net_dpdk.c). */
#define NET_DPDK_MAX_CHANNELS 8

/* Built-in providers of the coll module. */
extern const struct net_ops net_tcp_ops;

#endif /* ZBMD_NET_H */
