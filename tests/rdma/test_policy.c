/* Pure policy: GPU registration path, GID choice, MTU and slot helpers. */
#include "../../rdma/internal.h"
#include "tap.h"

static enum rdma_reg_path decide(enum net_mem_type t, bool be, bool exp, bool verbs,
				 bool pm, bool st, char *why)
{
	struct rdma_reg_inputs in = {.type = t, .gpu_backend = be, .dmabuf_export = exp,
				     .dmabuf_verbs = verbs, .peermem = pm, .staging = st};
	return rdma__reg_decide(&in, why, 200);
}

int main(void)
{
	char why[200];
	struct rdma_gid_entry tab[6];
	int bad = 0;

	tap_plan(30);
	/* Registration path policy. */
	ok(decide(NET_MEM_HOST, false, false, false, false, false, why) == RDMA_REG_HOST,
	   "host memory: ibv_reg_mr (%s)", why);
	ok(decide(NET_MEM_GPU, false, true, true, true, true, why) == RDMA_REG_NONE &&
	   strstr(why, "no GPU backend"), "GPU memory without a backend: refused (%s)", why);
	ok(decide(NET_MEM_GPU, true, true, true, true, true, why) == RDMA_REG_DMABUF,
	   "everything available: DMA-BUF first (%s)", why);
	ok(decide(NET_MEM_GPU, true, true, false, true, true, why) == RDMA_REG_PEERMEM &&
	   strstr(why, "rejects DMA-BUF"), "device rejects DMA-BUF: peer memory (%s)", why);
	ok(decide(NET_MEM_GPU, true, false, true, true, true, why) == RDMA_REG_PEERMEM &&
	   strstr(why, "cannot export"), "GPU cannot export: peer memory (%s)", why);
	ok(decide(NET_MEM_GPU, true, false, false, false, true, why) == RDMA_REG_STAGING &&
	   strstr(why, "no nvidia_peermem"), "nothing direct: staging (%s)", why);
	ok(decide(NET_MEM_GPU, true, true, false, false, true, why) == RDMA_REG_STAGING &&
	   strstr(why, "device rejects"), "staging names the device as the reason (%s)", why);
	ok(decide(NET_MEM_GPU, true, false, false, false, false, why) == RDMA_REG_NONE,
	   "nothing at all: refused (%s)", why);
	{
		struct rdma_reg_inputs in = {.type = NET_MEM_GPU, .gpu_backend = true, .gpu_host = true,
					     .dmabuf_export = true, .dmabuf_verbs = true};
		ok(rdma__reg_decide(&in, why, sizeof(why)) == RDMA_REG_HOST && strstr(why, "cpu"),
		   "cpu backend: its device memory is host memory (%s)", why);
	}
	/* Exhaustive: the decision is monotone in the order DMA-BUF > peermem > staging. */
	for (int m = 0; m < 32; m++) {
		bool be = m & 1, exp = m & 2, verbs = m & 4, pm = m & 8, st = m & 16;
		enum rdma_reg_path want = !be ? RDMA_REG_NONE
			: (exp && verbs) ? RDMA_REG_DMABUF
			: pm ? RDMA_REG_PEERMEM
			: st ? RDMA_REG_STAGING : RDMA_REG_NONE;
		if (decide(NET_MEM_GPU, be, exp, verbs, pm, st, why) != want || !why[0])
			bad++;
	}
	is_int(bad, 0, "all 32 input combinations follow DMA-BUF > peer memory > staging");
	is_str(rdma__reg_path_name(RDMA_REG_DMABUF), "dmabuf", "path names");
	{
		/* Run-time fallbacks: each failure moves to the next path. */
		struct rdma_reg_inputs in = {.type = NET_MEM_GPU, .gpu_backend = true, .dmabuf_export = true,
					     .dmabuf_verbs = true, .peermem = true, .staging = true};
		enum rdma_reg_path seq[4];
		int k = 0;
		for (enum rdma_reg_path p; (p = rdma__reg_decide(&in, why, sizeof(why))) != RDMA_REG_NONE && k < 4;) {
			seq[k++] = p;
			rdma__reg_strike(&in, p, false);
		}
		ok(k == 3 && seq[0] == RDMA_REG_DMABUF && seq[1] == RDMA_REG_PEERMEM && seq[2] == RDMA_REG_STAGING,
		   "failures fall back DMA-BUF -> peer memory -> staging -> refused");
		in = (struct rdma_reg_inputs){.type = NET_MEM_GPU, .gpu_backend = true, .dmabuf_export = true,
					      .dmabuf_verbs = true, .staging = true};
		rdma__reg_strike(&in, RDMA_REG_DMABUF, true);
		ok(rdma__reg_decide(&in, why, sizeof(why)) == RDMA_REG_STAGING && strstr(why, "GPU cannot export"),
		   "a failed GPU export is blamed on the GPU (%s)", why);
		in = (struct rdma_reg_inputs){.type = NET_MEM_GPU, .gpu_backend = true, .dmabuf_export = true,
					      .dmabuf_verbs = true, .staging = true};
		rdma__reg_strike(&in, RDMA_REG_DMABUF, false);
		ok(rdma__reg_decide(&in, why, sizeof(why)) == RDMA_REG_STAGING && strstr(why, "device rejects"),
		   "a failed ibv_reg_dmabuf_mr is blamed on the device (%s)", why);
	}

	/* GID choice. */
	memset(tab, 0, sizeof(tab));
	tab[0] = (struct rdma_gid_entry){.raw = {0xfe, 0x80, [15] = 1}, .type = IBV_GID_TYPE_ROCE_V1, .valid = true};
	tab[1] = (struct rdma_gid_entry){.raw = {0xfe, 0x80, [15] = 1}, .type = IBV_GID_TYPE_ROCE_V2, .valid = true};
	tab[2] = (struct rdma_gid_entry){.raw = {[10] = 0xff, [11] = 0xff, 10, 0, 0, 1}, .type = IBV_GID_TYPE_ROCE_V1, .valid = true};
	tab[3] = (struct rdma_gid_entry){.raw = {[10] = 0xff, [11] = 0xff, 10, 0, 0, 1}, .type = IBV_GID_TYPE_ROCE_V2, .valid = true};
	tab[4].valid = false;
	is_int(rdma__gid_pick(tab, 6, true, RDMA_GID_AUTO, why, sizeof(why)), 3,
	       "auto on RoCE: the RoCE v2 IPv4-mapped GID");
	is_int(rdma__gid_pick(tab, 3, true, RDMA_GID_AUTO, why, sizeof(why)), 1,
	       "auto without IPv4: RoCE v2 link-local");
	is_int(rdma__gid_pick(tab, 1, true, RDMA_GID_AUTO, why, sizeof(why)), 0,
	       "auto with only v1: v1");
	is_int(rdma__gid_pick(tab, 6, true, 2, why, sizeof(why)), 2, "explicit index honoured");
	is_int(rdma__gid_pick(tab, 6, true, 4, why, sizeof(why)), -ENOENT, "explicit empty index refused");
	ok(strstr(why, "empty") != NULL, "  why: %s", why);
	is_int(rdma__gid_pick(tab, 6, true, 9, why, sizeof(why)), -ENOENT, "index beyond the table refused");
	ok(strstr(why, "6 GID entries") != NULL, "  why: %s", why);
	is_int(rdma__gid_pick(tab + 4, 2, true, RDMA_GID_AUTO, why, sizeof(why)), -ENOENT,
	       "no usable GID: refused");
	is_int(rdma__gid_pick(tab, 6, false, RDMA_GID_AUTO, why, sizeof(why)), 0, "IB: first valid GID");
	is_str(rdma__gid_type_name(IBV_GID_TYPE_ROCE_V2), "RoCE v2", "GID type names");

	/* MTU and slots. */
	ok(rdma__mtu_enum(4096) == IBV_MTU_4096 && rdma__mtu_enum(256) == IBV_MTU_256,
	   "MTU bytes -> enum");
	ok(rdma__mtu_enum(1500) == 0 && rdma__mtu_enum(9000) == 0, "non-IB MTUs refused");
	ok(rdma__mtu_bytes(IBV_MTU_1024) == 1024 && rdma__mtu_bytes((enum ibv_mtu)0) == 0,
	   "MTU enum -> bytes");
	ok(rdma__slots_from_pool(256) == 256 && rdma__slots_from_pool(300) == 256 &&
	   rdma__slots_from_pool(1) == 2, "recv_pool rounded down to a power of two, at least 2");
	ok(rdma__slots_from_pool(1u << 20) == RDMA_SLOTS_MAX, "recv_pool capped at %u", RDMA_SLOTS_MAX);
	return tap_done();
}
