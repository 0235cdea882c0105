/* Pure policy decisions: how to register GPU memory, which GID to use,
 * MTU and slot arithmetic. Inputs are facts probed elsewhere (dev.c, mr.c),
 * so every decision is unit-testable without a device. */
#include "internal.h"

#include <stdio.h>
#include <string.h>

const char *rdma__reg_path_name(enum rdma_reg_path p)
{
	switch (p) {
	case RDMA_REG_HOST: return "host";
	case RDMA_REG_DMABUF: return "dmabuf";
	case RDMA_REG_PEERMEM: return "peermem";
	case RDMA_REG_STAGING: return "staging";
	default: return "none";
	}
}

/* GPUDirect RDMA preference: DMA-BUF (upstream kernel path, no out-of-tree
 * module) > peer memory (nvidia_peermem lets ibv_reg_mr take a device
 * pointer) > staging through a pinned host buffer (works everywhere a copy
 * engine does, costs a copy per message). */
enum rdma_reg_path rdma__reg_decide(const struct rdma_reg_inputs *in, char *why, size_t cap)
{
	enum rdma_reg_path p;
	const char *reason;

	ZB_ASSERT(in != NULL);
	ZB_ASSERT(why != NULL || cap == 0);
	if (in->type == NET_MEM_HOST) {
		p = RDMA_REG_HOST;
		reason = "host memory: ibv_reg_mr";
	} else if (!in->gpu_backend) {
		p = RDMA_REG_NONE;
		reason = "GPU memory but no GPU backend is available to this provider";
	} else if (in->gpu_host) {
		p = RDMA_REG_HOST;
		reason = "GPU backend 'cpu': its device memory is host memory, ibv_reg_mr";
	} else if (in->dmabuf_export && in->dmabuf_verbs) {
		p = RDMA_REG_DMABUF;
		reason = "GPUDirect via DMA-BUF: the GPU exports the range and the device takes ibv_reg_dmabuf_mr";
	} else if (in->peermem) {
		p = RDMA_REG_PEERMEM;
		reason = in->dmabuf_export
			 ? "GPUDirect via peer memory: the device rejects DMA-BUF, nvidia_peermem is loaded"
			 : "GPUDirect via peer memory: the GPU cannot export DMA-BUF, nvidia_peermem is loaded";
	} else if (in->staging) {
		p = RDMA_REG_STAGING;
		reason = !in->dmabuf_verbs && !in->dmabuf_export
			 ? "staging through pinned host memory: no DMA-BUF support (GPU or device) and no nvidia_peermem"
			 : !in->dmabuf_verbs
			 ? "staging through pinned host memory: the device rejects DMA-BUF and no nvidia_peermem"
			 : "staging through pinned host memory: the GPU cannot export DMA-BUF and no nvidia_peermem";
	} else {
		p = RDMA_REG_NONE;
		reason = "GPU memory cannot be registered: no DMA-BUF, no nvidia_peermem, no staging copies";
	}
	if (cap)
		snprintf(why, cap, "%s", reason);
	return p;
}

void rdma__reg_strike(struct rdma_reg_inputs *in, enum rdma_reg_path failed, bool gpu_side)
{
	ZB_ASSERT(in != NULL);
	ZB_ASSERT(failed != RDMA_REG_NONE && failed != RDMA_REG_HOST);
	if (failed == RDMA_REG_DMABUF && gpu_side)
		in->dmabuf_export = false;
	else if (failed == RDMA_REG_DMABUF)
		in->dmabuf_verbs = false;
	else if (failed == RDMA_REG_PEERMEM)
		in->peermem = false;
	else
		in->staging = false;
}

const char *rdma__gid_type_name(int type)
{
	switch (type) {
	case IBV_GID_TYPE_IB: return "IB";
	case IBV_GID_TYPE_ROCE_V1: return "RoCE v1";
	case IBV_GID_TYPE_ROCE_V2: return "RoCE v2";
	default: return "unknown";
	}
}

static bool gid_v4_mapped(const uint8_t g[16])
{
	static const uint8_t pfx[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	return memcmp(g, pfx, 12) == 0;
}

static int gid_rank(const struct rdma_gid_entry *e, bool ethernet)
{
	if (!e->valid || rdma__gid_is_zero(e->raw))
		return 0;
	if (!ethernet)
		return 1;
	if (e->type == IBV_GID_TYPE_ROCE_V2)
		return gid_v4_mapped(e->raw) ? 4 : 3;
	if (e->type == IBV_GID_TYPE_ROCE_V1)
		return 2;
	return 1;
}

int rdma__gid_pick(const struct rdma_gid_entry *tab, int n, bool ethernet,
		   unsigned want, char *why, size_t cap)
{
	int best = -1, best_rank = 0;

	ZB_ASSERT(tab != NULL || n == 0);
	ZB_ASSERT(n >= 0);
	if (want != RDMA_GID_AUTO) {
		if ((int)want >= n) {
			snprintf(why, cap, "gid_index %u: the port has %d GID entries", want, n);
			return -ENOENT;
		}
		if (gid_rank(&tab[want], ethernet) == 0) {
			snprintf(why, cap, "gid_index %u is empty (zero GID)", want);
			return -ENOENT;
		}
		return (int)want;
	}
	for (int i = 0; i < n; i++) {
		int r = gid_rank(&tab[i], ethernet);
		if (r > best_rank) {
			best_rank = r;
			best = i;
		}
	}
	if (best < 0) {
		snprintf(why, cap, "no usable GID among %d entries", n);
		return -ENOENT;
	}
	return best;
}

enum ibv_mtu rdma__mtu_enum(uint32_t bytes)
{
	switch (bytes) {
	case 256: return IBV_MTU_256;
	case 512: return IBV_MTU_512;
	case 1024: return IBV_MTU_1024;
	case 2048: return IBV_MTU_2048;
	case 4096: return IBV_MTU_4096;
	default: return (enum ibv_mtu)0;
	}
}

uint32_t rdma__mtu_bytes(enum ibv_mtu m)
{
	return (m >= IBV_MTU_256 && m <= IBV_MTU_4096) ? 128u << m : 0;
}

uint32_t rdma__slots_from_pool(uint32_t pool)
{
	uint32_t s = RDMA_SLOTS_MIN;

	while (s * 2 <= pool && s * 2 <= RDMA_SLOTS_MAX)
		s *= 2;
	ZB_ASSERT(s >= RDMA_SLOTS_MIN && s <= RDMA_SLOTS_MAX);
	ZB_ASSERT((s & (s - 1)) == 0);
	return s;
}
