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

/* The GPU module is wired in here once it is on main (see docs/rdma.md);
 * until then GPU memory is refused with -ZB_ERR_UNSUPPORTED, as net.h asks. */
const struct rdma_gpu_iface *rdma__gpu = NULL;

#define MR_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

static int try_path(struct rdma_ctx *ctx, struct rdma_mr *m, enum rdma_reg_path p)
{
	uint64_t off = 0;
	int rc;

	switch (p) {
	case RDMA_REG_HOST:
	case RDMA_REG_PEERMEM:
		m->mr = ibv_reg_mr(ctx->pd, m->addr, m->len, MR_ACCESS);
		break;
	case RDMA_REG_DMABUF:
		rc = rdma__gpu->dmabuf_export(m->addr, m->len, &m->dmabuf_fd, &off);
		if (rc)
			return rc;
		/* iova = the device pointer, so remote addresses are the same
		 * numbers as on the other paths. */
		m->mr = ibv_reg_dmabuf_mr(ctx->pd, off, m->len, (uintptr_t)m->addr,
					  m->dmabuf_fd, MR_ACCESS);
		break;
	case RDMA_REG_STAGING:
		m->staging = aligned_alloc(4096, (m->len + 4095) & ~(size_t)4095);
		if (!m->staging)
			return -ENOMEM;
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
		free(m->staging);
		m->staging = NULL;
		return rc;
	}
	return 0;
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
	memset(&in, 0, sizeof(in));
	in.type = type;
	in.gpu_backend = rdma__gpu != NULL;
	in.dmabuf_export = rdma__gpu && rdma__gpu->dmabuf_export;
	in.dmabuf_verbs = ctx->dmabuf_verbs;
	in.peermem = rdma__gpu && rdma__peermem_loaded(NULL, 0);
	in.staging = rdma__gpu && rdma__gpu->copy_d2h && rdma__gpu->copy_h2d;
	for (int tries = 0; tries < 4; tries++) {
		p = rdma__reg_decide(&in, m->why, sizeof(m->why));
		if (p == RDMA_REG_NONE)
			break;
		rc = try_path(ctx, m, p);
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
		if (p == RDMA_REG_DMABUF)
			in.dmabuf_verbs = false;
		else if (p == RDMA_REG_PEERMEM)
			in.peermem = false;
		else
			in.staging = false;
	}
	rdma__set_error("reg_mr(%p, %zu bytes, %s): %s%s", data, size,
			type == NET_MEM_GPU ? "GPU" : "host", m->why, fails);
	free(m);
	/* GPU memory no path could take is "unsupported" (net.h). */
	return type == NET_MEM_GPU ? ZB_ERR_UNSUPPORTED : rc;
}

int rdma__dereg_mr(void *comm, void *mhandle)
{
	struct rdma_mr *m = mhandle;
	int rc = 0;

	(void)comm;
	if (!m)
		return -EINVAL;
	ZB_ASSERT(m->mr != NULL);
	if (ibv_dereg_mr(m->mr))
		rc = ZB_ERR_DEVICE;
	if (m->dmabuf_fd >= 0)
		close(m->dmabuf_fd);
	free(m->staging);
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
