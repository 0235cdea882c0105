/* QP attribute builder: for every RC transition the mask holds every
 * attribute ibv_modify_qp(3) lists as required and nothing outside
 * required + optional; values come from the inputs; bad input is refused. */
#include "../../rdma/internal.h"
#include "tap.h"

struct rule {
	enum ibv_qp_state from, to;
	int required, optional;
	const char *name;
};

/* ibv_modify_qp(3), "RC" rows of the transition table. */
static const struct rule rules[] = {
	{IBV_QPS_RESET, IBV_QPS_INIT,
	 IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, 0, "RESET->INIT"},
	{IBV_QPS_INIT, IBV_QPS_RTR,
	 IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
		 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
	 IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX, "INIT->RTR"},
	{IBV_QPS_RTR, IBV_QPS_RTS,
	 IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
		 IBV_QP_MAX_QP_RD_ATOMIC,
	 IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER | IBV_QP_ALT_PATH |
		 IBV_QP_PATH_MIG_STATE, "RTR->RTS"},
	{IBV_QPS_RTS, IBV_QPS_ERR, IBV_QP_STATE, 0, "RTS->ERR"},
	{IBV_QPS_INIT, IBV_QPS_ERR, IBV_QP_STATE, 0, "INIT->ERR"},
	{IBV_QPS_ERR, IBV_QPS_RESET, IBV_QP_STATE, 0, "ERR->RESET"},
};

static struct rdma_qp_local local_roce(void)
{
	struct rdma_qp_local l = {
		.port = 1, .pkey_index = 0, .sgid_index = 3, .ethernet = true,
		.active_mtu = IBV_MTU_4096, .sl = 0, .traffic_class = 106, .hop_limit = 0,
		.timeout = 14, .retry_cnt = 7, .rnr_retry = 7, .min_rnr_timer = 12,
		.max_rd_atomic = 1, .access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
		.psn = 0x123456,
	};
	return l;
}

static struct rdma_conn remote_roce(void)
{
	struct rdma_conn r = {
		.side = RDMA_SIDE_RECV, .flags = RDMA_CONN_F_GLOBAL, .mtu = IBV_MTU_1024,
		.cluster = 7, .src_node = 1, .dst_node = 0, .channel = 0, .lid = 0,
		.qpn = 0x000ABC, .psn = 0xFEDCBA, .slots = 64, .eager_max = 4096,
		.rkey = 0x1234, .addr = 0x7f0000001000ull,
		.gid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 2},
	};
	return r;
}

int main(void)
{
	struct rdma_qp_local l = local_roce();
	struct rdma_conn r = remote_roce();
	struct ibv_qp_attr a;
	int mask, rc;

	tap_plan(41);
	for (size_t i = 0; i < ZB_ARRAY_LEN(rules); i++) {
		rc = rdma__qp_attr(rules[i].from, rules[i].to, &l, &r, &a, &mask);
		is_int(rc, 0, "%s builds", rules[i].name);
		ok((mask & rules[i].required) == rules[i].required,
		   "%s: every required attribute set (missing 0x%x)", rules[i].name,
		   rules[i].required & ~mask);
		ok((mask & ~(rules[i].required | rules[i].optional)) == 0,
		   "%s: nothing outside required+optional (extra 0x%x)", rules[i].name,
		   mask & ~(rules[i].required | rules[i].optional));
		is_int(a.qp_state, rules[i].to, "%s: qp_state is the target", rules[i].name);
	}

	/* Values: INIT */
	rdma__qp_attr(IBV_QPS_RESET, IBV_QPS_INIT, &l, NULL, &a, &mask);
	ok(a.port_num == 1 && a.pkey_index == 0 && a.qp_access_flags == l.access,
	   "INIT: port, pkey index and access flags from the local parameters");
	/* Values: RTR over RoCE */
	rdma__qp_attr(IBV_QPS_INIT, IBV_QPS_RTR, &l, &r, &a, &mask);
	is_int(a.path_mtu, IBV_MTU_1024, "RTR: path MTU is the smaller of both sides");
	ok(a.dest_qp_num == 0xABC && a.rq_psn == 0xFEDCBA, "RTR: remote QPN and PSN");
	ok(a.ah_attr.is_global == 1 && memcmp(a.ah_attr.grh.dgid.raw, r.gid, 16) == 0 &&
	   a.ah_attr.grh.sgid_index == 3 && a.ah_attr.grh.hop_limit == 64 &&
	   a.ah_attr.grh.traffic_class == 106 && a.ah_attr.port_num == 1,
	   "RTR on RoCE: GRH with remote GID, local sgid index, hop limit 64 by default");
	ok(a.min_rnr_timer == 12 && a.max_dest_rd_atomic == 1, "RTR: RNR timer, responder resources");
	/* Values: RTR over IB */
	l.ethernet = false;
	r.flags = 0;
	r.lid = 0x21;
	r.mtu = IBV_MTU_4096;
	l.active_mtu = IBV_MTU_2048;
	rc = rdma__qp_attr(IBV_QPS_INIT, IBV_QPS_RTR, &l, &r, &a, &mask);
	ok(rc == 0 && a.ah_attr.is_global == 0 && a.ah_attr.dlid == 0x21 &&
	   a.path_mtu == IBV_MTU_2048, "RTR on IB: LID routed, no GRH, local MTU the smaller");
	/* Values: RTS */
	rdma__qp_attr(IBV_QPS_RTR, IBV_QPS_RTS, &l, NULL, &a, &mask);
	ok(a.sq_psn == 0x123456 && a.timeout == 14 && a.retry_cnt == 7 && a.rnr_retry == 7 &&
	   a.max_rd_atomic == 1, "RTS: SQ PSN, timeout, retry counts, initiator depth");

	/* Refusals */
	is_int(rdma__qp_attr(IBV_QPS_RESET, IBV_QPS_RTR, &l, &r, &a, &mask), -EINVAL,
	       "RESET->RTR refused (skips INIT)");
	ok(mask == 0 && a.qp_state == 0, "refusal leaves attr/mask zeroed");
	is_int(rdma__qp_attr(IBV_QPS_INIT, IBV_QPS_RTS, &l, &r, &a, &mask), -EINVAL,
	       "INIT->RTS refused (skips RTR)");
	is_int(rdma__qp_attr(IBV_QPS_INIT, IBV_QPS_RTR, &l, NULL, &a, &mask), -EINVAL,
	       "INIT->RTR without remote parameters refused");
	r.lid = 0;
	is_int(rdma__qp_attr(IBV_QPS_INIT, IBV_QPS_RTR, &l, &r, &a, &mask), -EINVAL,
	       "IB peer with LID 0 refused");
	l = local_roce();
	r = remote_roce();
	memset(r.gid, 0, 16);
	is_int(rdma__qp_attr(IBV_QPS_INIT, IBV_QPS_RTR, &l, &r, &a, &mask), -EINVAL,
	       "RoCE peer with zero GID refused");
	r = remote_roce();
	r.qpn = 1;
	is_int(rdma__qp_attr(IBV_QPS_INIT, IBV_QPS_RTR, &l, &r, &a, &mask), -EINVAL,
	       "QPN 1 (GSI) refused");
	r.qpn = 0x1000000;
	is_int(rdma__qp_attr(IBV_QPS_INIT, IBV_QPS_RTR, &l, &r, &a, &mask), -EINVAL,
	       "25-bit QPN refused");
	l.retry_cnt = 8;
	is_int(rdma__qp_attr(IBV_QPS_RTR, IBV_QPS_RTS, &l, NULL, &a, &mask), -EINVAL,
	       "retry_cnt 8 refused (3 bits)");
	l = local_roce();
	l.port = 0;
	is_int(rdma__qp_attr(IBV_QPS_RESET, IBV_QPS_INIT, &l, NULL, &a, &mask), -EINVAL,
	       "port 0 refused (ports count from 1)");
	return tap_done();
}
