/* The provider's view of gpu/: DMA-BUF export (gpu_dmabuf_export), copies
 * to and from device memory for the staging path, pinned host buffers. Pointers handed to reg_mr(NET_MEM_GPU) are gpu_ptr_t values of
 * the bound context. */
#include "internal.h"
#include "zbmd/gpu.h"

#include <string.h>

static int d2h(struct gpu_ctx *g, void *dst, const void *src, size_t len)
{
	int rc = gpu_memcpy_d2h(g, NULL, dst, (gpu_ptr_t)(uintptr_t)src, len);
	return rc ? rc : gpu_stream_sync(g, NULL);
}

static int h2d(struct gpu_ctx *g, void *dst, const void *src, size_t len)
{
	int rc = gpu_memcpy_h2d(g, NULL, (gpu_ptr_t)(uintptr_t)dst, src, len);
	return rc ? rc : gpu_stream_sync(g, NULL);
}

static int dmabuf_export(struct gpu_ctx *g, void *ptr, size_t len, int *fd, uint64_t *off)
{
	return gpu_dmabuf_export(g, (gpu_ptr_t)(uintptr_t)ptr, len, fd, off);
}

static int host_alloc(struct gpu_ctx *g, size_t len, void **out)
{
	return gpu_host_alloc(g, len, out);
}

static void host_free(struct gpu_ctx *g, void *p)
{
	gpu_host_free(g, p);
}

int rdma__gpu_iface_init(struct rdma_gpu_iface *g, struct gpu_ctx *gctx)
{
	const struct gpu_device_info *dev;
	enum gpu_backend b;

	ZB_ASSERT(g != NULL);
	memset(g, 0, sizeof(*g));
	pthread_mutex_init(&g->copy_lock, NULL);
	if (!gctx)
		return 0;
	b = gpu_ctx_backend(gctx);
	g->gctx = gctx;
	g->name = gpu_backend_name(b);
	g->host_memory = b == GPU_CPU;
	/* Only CUDA device pointers are what nvidia_peermem pins; Vulkan's
	 * are synthetic and must never reach ibv_reg_mr. */
	g->peermem_ok = b == GPU_CUDA;
	/* DMA-BUF only where the device says its memory exports as one. */
	dev = gpu_ctx_device(gctx);
	g->dmabuf_export = dev && dev->dmabuf ? dmabuf_export : NULL;
	g->copy_d2h = d2h;
	g->copy_h2d = h2d;
	g->host_alloc = host_alloc;
	g->host_free = host_free;
	ZB_ASSERT(g->name != NULL);
	return 0;
}

int rdma__gpu_copy(struct rdma_gpu_iface *g, bool to_host, void *dst, const void *src,
		   size_t len)
{
	ZB_ASSERT(g != NULL && g->copy_d2h && g->copy_h2d);
	pthread_mutex_lock(&g->copy_lock);
	int rc = to_host ? g->copy_d2h(g->gctx, dst, src, len) : g->copy_h2d(g->gctx, dst, src, len);
	pthread_mutex_unlock(&g->copy_lock);
	return rc;
}
