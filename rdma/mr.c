/* Memory registration: host memory with ibv_reg_mr; GPU memory by the first
 * path that works of DMA-BUF (ibv_reg_dmabuf_mr on an fd the GPU backend
 * exports), peer memory (ibv_reg_mr on the device pointer, nvidia_peermem)
 * and staging through a pinned host buffer. rdma__reg_decide() picks; a
 * path that fails at run time is struck off and the decision taken again.
 * Control path: allocates. */
#include "internal.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>


#define MR_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

static int try_path(struct rdma_ctx *ctx, struct rdma_mr *m, enum rdma_reg_path p,
		    bool *gpu_side)
{
	uint64_t off = 0;
	int rc;

	switch (p) {
	case RDMA_REG_HOST:
	case RDMA_REG_PEERMEM:
		m->mr = ibv_reg_mr(ctx->pd, m->addr, m->len, MR_ACCESS);
		break;
	case RDMA_REG_DMABUF:
		rc = ctx->gpu.dmabuf_export(ctx->gpu.gctx, m->addr, m->len, &m->dmabuf_fd, &off);
		if (rc) {
			*gpu_side = true;   /* the GPU could not export, not the NIC */
			return rc;
		}
		/* iova = the device pointer, so remote addresses are the same
		 * numbers as on the other paths. */
		m->mr = ibv_reg_dmabuf_mr(ctx->pd, off, m->len, (uintptr_t)m->addr,
					  m->dmabuf_fd, MR_ACCESS);
		break;
	case RDMA_REG_STAGING:
		/* pinned where the backend has it (cuda, hip) */
		rc = ctx->gpu.host_alloc(ctx->gpu.gctx, m->len, &m->staging);
		if (rc)
			return rc;
		m->mr = ibv_reg_mr(ctx->pd, m->staging, m->len, MR_ACCESS);
		break;
	default:
		return ZB_ERR_UNSUPPORTED;
	}
	if (!m->mr) {
		rc = -(errno ? errno : EIO);
		if (m->dmabuf_fd >= 0)
			close(m->dmabuf_fd);
		m->dmabuf_fd = -1;
		if (m->staging)
			ctx->gpu.host_free(ctx->gpu.gctx, m->staging);
		m->staging = NULL;
		return rc;
	}
	return 0;
}

void rdma__reg_inputs(const struct rdma_gpu_iface *g, bool dmabuf_verbs,
		      enum net_mem_type type, struct rdma_reg_inputs *in)
{
	ZB_ASSERT(g != NULL && in != NULL);
	memset(in, 0, sizeof(*in));
	in->type = type;
	in->gpu_backend = g->gctx != NULL;
	in->gpu_host = in->gpu_backend && g->host_memory;
	in->dmabuf_export = in->gpu_backend && g->dmabuf_export;
	in->dmabuf_verbs = dmabuf_verbs;
	in->peermem = in->gpu_backend && g->peermem_ok && rdma__peermem_loaded(NULL, 0);
	in->staging = in->gpu_backend && g->copy_d2h && g->copy_h2d && g->host_alloc;
}

int rdma__reg_mr(void *comm, void *data, size_t size, enum net_mem_type type, void **mhandle)
{
	struct rdma_comm *c = comm;
	struct rdma_ctx *ctx;
	struct rdma_reg_inputs in;
	struct rdma_mr *m;
	char fails[96] = "";
	enum rdma_reg_path p;
	int rc = ZB_ERR_UNSUPPORTED;

	if (!c || !data || !size || !mhandle || (type != NET_MEM_HOST && type != NET_MEM_GPU))
		return -EINVAL;
	ctx = c->ctx;
	ZB_ASSERT(ctx != NULL && ctx->pd != NULL);
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->addr = data;
	m->len = size;
	m->type = type;
	m->dmabuf_fd = -1;
	rdma__reg_inputs(&ctx->gpu, ctx->dmabuf_verbs, type, &in);
	for (int tries = 0; tries < 4; tries++) {
		p = rdma__reg_decide(&in, m->why, sizeof(m->why));
		if (p == RDMA_REG_NONE)
			break;
		bool gpu_side = false;
		rc = try_path(ctx, m, p, &gpu_side);
		if (rc == 0) {
			m->path = p;
			if (fails[0]) {
				size_t l = strlen(m->why);
				snprintf(m->why + l, sizeof(m->why) - l, " (after:%s)", fails);
			}
			*mhandle = m;
			return 0;
		}
		size_t l = strlen(fails);
		snprintf(fails + l, sizeof(fails) - l, " %s failed: %s", rdma__reg_path_name(p),
			 zb_strerror(rc));
		if (p == RDMA_REG_HOST)
			break;
		rdma__reg_strike(&in, p, gpu_side);
	}
	rdma__set_error("reg_mr(%p, %zu bytes, %s): %s%s", data, size,
			type == NET_MEM_GPU ? "GPU" : "host", m->why, fails);
	free(m);
	/* GPU memory no path could take is "unsupported" (net.h). */
	return type == NET_MEM_GPU ? ZB_ERR_UNSUPPORTED : rc;
}

int rdma__dereg_mr(void *comm, void *mhandle)
{
	struct rdma_comm *c = comm;
	struct rdma_mr *m = mhandle;
	int rc = 0;

	if (!m)
		return -EINVAL;
	ZB_ASSERT(m->mr != NULL);
	ZB_ASSERT(!m->staging || (c && c->ctx->gpu.host_free));
	if (ibv_dereg_mr(m->mr))
		rc = ZB_ERR_DEVICE;
	if (m->dmabuf_fd >= 0)
		close(m->dmabuf_fd);
	if (m->staging)
		c->ctx->gpu.host_free(c->ctx->gpu.gctx, m->staging);
	free(m);
	return rc;
}

const char *rdma_mr_path(void *mhandle, const char **why)
{
	const struct rdma_mr *m = mhandle;

	if (!m)
		return "none";
	if (why)
		*why = m->why;
	return rdma__reg_path_name(m->path);
}
