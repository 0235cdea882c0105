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
 * that, the comm is unusable and must be closed.
 */
#ifndef ZBMD_NET_H
#define ZBMD_NET_H

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

	void (*close_send)(void *send_comm);
	void (*close_recv)(void *recv_comm);
};

/* Providers compiled into this build. NULL-terminated list; net_find()
 * returns the provider named `name` or NULL. */
const struct net_ops *net_find(const char *name);

#endif /* ZBMD_NET_H */
