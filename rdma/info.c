/* `zbmd rdma-info`: what the verbs stack sees on this machine. Exit 0 when
 * it could look (devices or none), 2 on bad usage. */
#include "internal.h"
#include "zbmd/gpu.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#ifndef ZB_RDMA_CORE_VERSION
#define ZB_RDMA_CORE_VERSION "unknown"
#endif

static bool path_exists(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0;
}

static const char *link_name(uint8_t ll)
{
	switch (ll) {
	case IBV_LINK_LAYER_INFINIBAND: return "InfiniBand";
	case IBV_LINK_LAYER_ETHERNET: return "Ethernet";
	default: return "unspecified";
	}
}

static void print_gids(struct ibv_context *dev, uint8_t port, int n)
{
	struct ibv_gid_entry e;
	char txt[INET6_ADDRSTRLEN];
	int shown = 0;

	for (int i = 0; i < n && i < 256; i++) {
		if (ibv_query_gid_ex(dev, port, (uint32_t)i, &e, 0) != 0 ||
		    rdma__gid_is_zero(e.gid.raw))
			continue;
		inet_ntop(AF_INET6, e.gid.raw, txt, sizeof(txt));
		printf("      gid[%d] %-40s %s\n", i, txt, rdma__gid_type_name((int)e.gid_type));
		shown++;
	}
	if (!shown)
		printf("      (no GIDs populated)\n");
}

static void print_device(struct ibv_device *d, char *dmabuf, size_t cap)
{
	struct ibv_context *dev = ibv_open_device(d);
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	struct ibv_pd *pd;
	char why[160];

	printf("device %s (%s)\n", ibv_get_device_name(d),
	       ibv_node_type_str(d->node_type));
	if (!dev) {
		printf("  cannot open: %s\n", strerror(errno));
		return;
	}
	if (ibv_query_device(dev, &da) == 0)
		printf("  fw %s, %u port(s), max_qp %d, max_cqe %d, max_mr_size %llu\n",
		       da.fw_ver, da.phys_port_cnt, da.max_qp, da.max_cqe,
		       (unsigned long long)da.max_mr_size);
	else
		da.phys_port_cnt = 0;
	for (uint8_t p = 1; p <= da.phys_port_cnt; p++) {
		if (ibv_query_port(dev, p, &pa)) {
			printf("  port %u: query failed: %s\n", p, strerror(errno));
			continue;
		}
		printf("  port %u: %s, link layer %s, active MTU %u (max %u), LID 0x%x\n", p,
		       ibv_port_state_str(pa.state), link_name(pa.link_layer),
		       rdma__mtu_bytes(pa.active_mtu), rdma__mtu_bytes(pa.max_mtu), pa.lid);
		print_gids(dev, p, pa.gid_tbl_len);
	}
	pd = ibv_alloc_pd(dev);
	if (pd) {
		int ok = rdma__dmabuf_probe(pd, why, sizeof(why));
		printf("  DMA-BUF registration: %s (%s)\n", ok ? "yes" : "no", why);
		if (ok)
			snprintf(dmabuf, cap, "yes (%s)", ibv_get_device_name(d));
		ibv_dealloc_pd(pd);
	}
	ibv_close_device(dev);
}

int rdma_info_main(int argc, char **argv)
{
	struct ibv_device **list;
	char pm[96], dmabuf[96] = "no device to probe";
	int n = 0, e;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			printf("usage: zbmd rdma-info\n"
			       "  RDMA devices, ports (state, MTU, link layer), GIDs (IB / RoCE v1 / v2)\n"
			       "  and GPUDirect availability (DMA-BUF, nvidia_peermem).\n"
			       "  Exit 0 when the verbs stack could be queried (even with no device).\n");
			return 0;
		}
		fprintf(stderr, "zbmd rdma-info: unknown argument '%s' (try --help)\n", argv[i]);
		return 2;
	}
	printf("verbs: libibverbs from rdma-core %s; provider '%s' (net_ops v%u)\n",
	       ZB_RDMA_CORE_VERSION, rdma_net_ops.name, rdma_net_ops.version);
	errno = 0;
	list = ibv_get_device_list(&n);
	e = errno;
	if (!list || n == 0) {
		bool sys = path_exists("/sys/class/infiniband");
		bool uverbs = path_exists("/sys/module/ib_uverbs");
		printf("no RDMA devices found (%s: ibv_get_device_list: %s; /sys/class/infiniband %s; ib_uverbs %s)\n",
		       !sys && !uverbs ? "kernel has no RDMA drivers loaded" : "no device bound",
		       list ? "0 devices" : strerror(e ? e : ENODEV),
		       sys ? "present" : "absent", uverbs ? "loaded" : "not loaded");
		printf("hint: load the NIC's RDMA driver (mlx5_ib, ...) or Soft-RoCE (rdma link add rxe0 type rxe netdev IF)\n");
	} else {
		printf("%d device(s)\n", n);
		for (int i = 0; i < n; i++)
			print_device(list[i], dmabuf, sizeof(dmabuf));
	}
	if (list)
		ibv_free_device_list(list);
	printf("GPUDirect RDMA:\n");
	printf("  DMA-BUF (ibv_reg_dmabuf_mr): %s\n", dmabuf);
	printf("  peer memory: %s\n", rdma__peermem_loaded(pm, sizeof(pm)) ? pm : "no");
	if (!rdma__peermem_loaded(NULL, 0))
		printf("    (%s)\n", pm);
	for (int b = GPU_CUDA; b <= GPU_HIP; b++) {
		char why[160];
		int rc = gpu_backend_probe((enum gpu_backend)b, why, sizeof(why));
		printf("  %s: ", gpu_backend_name((enum gpu_backend)b));
		if (rc) {
			printf("unavailable (%s)\n", why[0] ? why : zb_strerror(rc));
			continue;
		}
		int nd = gpu_device_count((enum gpu_backend)b);
		printf("%d device(s)\n", nd);
		for (int i = 0; i < nd; i++) {
			struct gpu_device_info di;
			if (gpu_device_info((enum gpu_backend)b, i, &di) == 0)
				printf("    [%d] %s: DMA-BUF export %s\n", i, di.name, di.dmabuf ? "yes" : "no");
		}
	}
	printf("  registration order: DMA-BUF > peer memory (CUDA) > staging (pinned host copies)\n");
	return 0;
}
