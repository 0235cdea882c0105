/* GPU memory on the wire: what the rdma provider needs to register device
 * memory for GPUDirect RDMA.  gpu/ never calls libibverbs; the rdma
 * provider calls ibv_reg_dmabuf_mr / ibv_reg_mr on top of this.
 *
 * Order of preference (as NCCL's net_ib): DMA-BUF (kernel >= 5.12, CUDA
 * driver >= 470 with cuMemGetHandleForAddressRange) -> peer memory
 * (nvidia_peermem / nv_peer_mem module, ibv_reg_mr on the device pointer)
 * -> staging through pinned host buffers. */
#include "internal.h"

#include <unistd.h>

const char *gpu_reg_path_name(enum gpu_reg_path p)
{
	switch (p) {
	case GPU_REG_DMABUF: return "dmabuf";
	case GPU_REG_PEERMEM: return "peermem";
	case GPU_REG_STAGING: return "staging";
	case GPU_REG_HOST: return "host";
	}
	return "?";
}

int gpu_dmabuf_export(struct gpu_ctx *ctx, gpu_ptr_t p, size_t len, int *fd,
		      uint64_t *offset)
{
	ZB_ASSERT(ctx && fd && offset);
	*fd = -1;
	*offset = 0;
	if (!len || gpu__pool_resolve(ctx, p, len, NULL, NULL) < 0)
		return -EINVAL;
	if (!ctx->ops->dmabuf_export)
		return ZB_ERR_UNSUPPORTED;
	return ctx->ops->dmabuf_export(ctx, p, len, fd, offset);
}

bool gpu_peermem_available(const char *proc_modules)
{
	FILE *f = fopen(proc_modules ? proc_modules : "/proc/modules", "r");
	char line[512];
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		size_t n = strcspn(line, " \t\n");
		found = (n == 14 && strncmp(line, "nvidia_peermem", n) == 0) ||
			(n == 11 && strncmp(line, "nv_peer_mem", n) == 0);
	}
	fclose(f);
	return found;
}

enum gpu_reg_path gpu_reg_path_for(struct gpu_ctx *ctx, gpu_ptr_t p,
				   size_t len, char *why, size_t why_len)
{
	ZB_ASSERT(ctx);
	enum gpu_backend b = gpu_ctx_backend(ctx);
	if (b == GPU_CPU) {
		gpu__why(why, why_len, 0, "cpu backend: host memory, register it directly");
		return GPU_REG_HOST;
	}
	int fd = -1;
	uint64_t off;
	int rc = gpu_dmabuf_export(ctx, p, len, &fd, &off);
	if (rc == 0) {
		close(fd);
		gpu__why(why, why_len, 0, "%s exports the range as a DMA-BUF",
			 ctx->ops->name);
		return GPU_REG_DMABUF;
	}
	if (b == GPU_CUDA && gpu_peermem_available(NULL)) {
		gpu__why(why, why_len, 0, "DMA-BUF export failed (%s); nvidia_peermem is loaded",
			 zb_strerror(rc));
		return GPU_REG_PEERMEM;
	}
	gpu__why(why, why_len, 0,
		 "DMA-BUF export: %s; %s: staging through pinned host buffers",
		 zb_strerror(rc),
		 b == GPU_CUDA ? "no nvidia_peermem/nv_peer_mem module loaded"
			       : "no peer-memory path for this backend");
	return GPU_REG_STAGING;
}
