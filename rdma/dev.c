/* Device, port and GID selection from [rdma]; protection domain; probes for
 * GPUDirect support. Control path only (init). */
#include "internal.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static __thread char rdma_errbuf[256];

void rdma__set_error(const char *fmt, ...)
{
	va_list ap;

	ZB_ASSERT(fmt != NULL);
	va_start(ap, fmt);
	vsnprintf(rdma_errbuf, sizeof(rdma_errbuf), fmt, ap);
	va_end(ap);
}

const char *rdma_last_error(void)
{
	return rdma_errbuf;
}

bool rdma__peermem_loaded(char *which, size_t cap)
{
	static const char *const mods[] = {"nvidia_peermem", "nv_peer_mem"};
	struct stat st;
	char path[96];

	for (size_t i = 0; i < ZB_ARRAY_LEN(mods); i++) {
		snprintf(path, sizeof(path), "/sys/module/%s", mods[i]);
		if (stat(path, &st) == 0) {
			if (cap)
				snprintf(which, cap, "%s", mods[i]);
			return true;
		}
	}
	if (cap)
		snprintf(which, cap, "neither nvidia_peermem nor nv_peer_mem is loaded");
	return false;
}

/* ibv_reg_dmabuf_mr with fd -1: a kernel and provider that implement
 * DMA-BUF registration look the fd up and fail with EBADF (or EINVAL);
 * one that does not fails with EOPNOTSUPP / ENOSYS / EPROTONOSUPPORT. */
int rdma__dmabuf_probe(struct ibv_pd *pd, char *why, size_t cap)
{
	struct ibv_mr *mr;
	int e;

	ZB_ASSERT(pd != NULL);
	ZB_ASSERT(why != NULL || cap == 0);
	errno = 0;
	mr = ibv_reg_dmabuf_mr(pd, 0, 4096, 0, -1, IBV_ACCESS_LOCAL_WRITE);
	if (mr) {               /* cannot happen with fd -1; be safe */
		ibv_dereg_mr(mr);
		snprintf(why, cap, "ibv_reg_dmabuf_mr accepted a probe");
		return 1;
	}
	e = errno;
	if (e == EBADF || e == EINVAL) {
		snprintf(why, cap, "ibv_reg_dmabuf_mr supported (probe: %s)", strerror(e));
		return 1;
	}
	snprintf(why, cap, "ibv_reg_dmabuf_mr not supported by this device/kernel (%s)",
		 e ? strerror(e) : "no errno");
	return 0;
}

static struct ibv_context *open_named(const char *want, char *name, size_t cap)
{
	struct ibv_device **list;
	struct ibv_context *dev = NULL;
	char names[160] = "";
	int n = 0;

	errno = 0;
	list = ibv_get_device_list(&n);
	if (!list) {
		rdma__set_error("no RDMA devices: ibv_get_device_list: %s (kernel has no RDMA drivers loaded?)",
				strerror(errno ? errno : ENODEV));
		return NULL;
	}
	for (int i = 0; i < n && !dev; i++) {
		const char *dn = ibv_get_device_name(list[i]);
		size_t l = strlen(names);
		snprintf(names + l, sizeof(names) - l, "%s%s", l ? ", " : "", dn);
		if (want[0] && strcmp(want, dn) != 0)
			continue;
		dev = ibv_open_device(list[i]);
		if (!dev)
			rdma__set_error("ibv_open_device(%s): %s", dn, strerror(errno));
		else
			snprintf(name, cap, "%s", dn);
	}
	if (!dev && n == 0)
		rdma__set_error("no RDMA devices: ibv_get_device_list returned 0 devices");
	else if (!dev && want[0])
		rdma__set_error("[rdma] device '%s' not found (devices: %s)", want, names);
	ibv_free_device_list(list);
	return dev;
}

static int pick_gid(struct rdma_ctx *ctx, const struct zb_config *cfg)
{
	struct rdma_gid_entry tab[256];
	struct ibv_gid_entry e;
	char why[128];
	int n = ctx->port_attr.gid_tbl_len, idx;
	bool eth = ctx->port_attr.link_layer == IBV_LINK_LAYER_ETHERNET;

	ZB_ASSERT(ctx->dev != NULL);
	if (n > 256)
		n = 256;
	for (int i = 0; i < n; i++) {
		memset(&tab[i], 0, sizeof(tab[i]));
		if (ibv_query_gid_ex(ctx->dev, ctx->qpl.port, i, &e, 0) == 0) {
			memcpy(tab[i].raw, e.gid.raw, 16);
			tab[i].type = (int)e.gid_type;
			tab[i].valid = true;
		} else {
			tab[i].type = -1;
		}
	}
	idx = rdma__gid_pick(tab, n, eth, cfg->rdma.gid_index, why, sizeof(why));
	if (idx < 0) {
		rdma__set_error("%s port %u: %s", ctx->dev_name, ctx->qpl.port, why);
		return ZB_ERR_CONFIG;
	}
	ctx->qpl.sgid_index = (uint8_t)idx;
	memcpy(ctx->gid, tab[idx].raw, 16);
	return 0;
}

int rdma__dev_open(struct rdma_ctx *ctx, const struct zb_config *cfg)
{
	enum ibv_mtu want;
	char why[160];
	int rc, fl;

	ZB_ASSERT(ctx != NULL && cfg != NULL);
	ZB_ASSERT(ctx->dev == NULL);
	ctx->dev = open_named(cfg->rdma.device, ctx->dev_name, sizeof(ctx->dev_name));
	if (!ctx->dev)
		return ZB_ERR_UNAVAILABLE;
	ctx->qpl.port = cfg->rdma.port ? cfg->rdma.port : 1;
	if (ibv_query_port(ctx->dev, ctx->qpl.port, &ctx->port_attr)) {
		rdma__set_error("%s: ibv_query_port(%u): %s", ctx->dev_name,
				ctx->qpl.port, strerror(errno));
		rc = ZB_ERR_CONFIG;
		goto fail_dev;
	}
	if (ctx->port_attr.state != IBV_PORT_ACTIVE) {
		rdma__set_error("%s port %u is %s, not ACTIVE", ctx->dev_name,
				ctx->qpl.port, ibv_port_state_str(ctx->port_attr.state));
		rc = ZB_ERR_UNAVAILABLE;
		goto fail_dev;
	}
	ctx->qpl.ethernet = ctx->port_attr.link_layer == IBV_LINK_LAYER_ETHERNET;
	rc = pick_gid(ctx, cfg);
	if (rc && ctx->qpl.ethernet)
		goto fail_dev;
	rc = 0;  /* IB without a usable GID: LID routing only */
	want = rdma__mtu_enum(cfg->rdma.mtu);
	ctx->qpl.active_mtu = want < ctx->port_attr.active_mtu ? want : ctx->port_attr.active_mtu;
	ctx->qpl.pkey_index = 0;
	ctx->qpl.hop_limit = 64;
	ctx->qpl.timeout = 14;          /* 4.096us * 2^14 = 67 ms per try */
	ctx->qpl.retry_cnt = 7;
	ctx->qpl.rnr_retry = 7;         /* our receives are always posted */
	ctx->qpl.min_rnr_timer = 12;
	ctx->qpl.max_rd_atomic = 1;
	ctx->qpl.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			  IBV_ACCESS_REMOTE_READ;
	ctx->pd = ibv_alloc_pd(ctx->dev);
	if (!ctx->pd) {
		rdma__set_error("%s: ibv_alloc_pd: %s", ctx->dev_name, strerror(errno));
		rc = ZB_ERR_DEVICE;
		goto fail_dev;
	}
	ctx->dmabuf_verbs = rdma__dmabuf_probe(ctx->pd, why, sizeof(why)) == 1;
	/* Async events are read by rdma_poll_async without blocking. */
	fl = fcntl(ctx->dev->async_fd, F_GETFL);
	if (fl < 0 || fcntl(ctx->dev->async_fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		rdma__set_error("%s: async fd non-blocking: %s", ctx->dev_name, strerror(errno));
		rc = ZB_ERR_DEVICE;
		goto fail_pd;
	}
	return 0;

fail_pd:
	ibv_dealloc_pd(ctx->pd);
	ctx->pd = NULL;
fail_dev:
	ibv_close_device(ctx->dev);
	ctx->dev = NULL;
	return rc;
}

void rdma__dev_close(struct rdma_ctx *ctx)
{
	ZB_ASSERT(ctx != NULL);
	if (ctx->pd)
		ibv_dealloc_pd(ctx->pd);
	ctx->pd = NULL;
	if (ctx->dev)
		ibv_close_device(ctx->dev);
	ctx->dev = NULL;
}

int rdma_probe(const struct zb_config *cfg, char *why, size_t cap)
{
	ZB_ASSERT(cfg != NULL);
	ZB_ASSERT(why != NULL && cap > 0);
	struct rdma_ctx *ctx = calloc(1, sizeof(*ctx));
	if (!ctx) {
		snprintf(why, cap, "out of memory");
		return -ENOMEM;
	}
	rdma__set_error("%s", "");
	int rc = rdma__dev_open(ctx, cfg);
	if (rc == 0)
		snprintf(why, cap, "%s port %u", ctx->dev_name, ctx->qpl.port);
	else
		snprintf(why, cap, "%s", rdma_last_error()[0] ? rdma_last_error()
			 : zb_strerror(rc));
	rdma__dev_close(ctx);
	free(ctx);
	return rc;
}
