/* QP attribute builder for RC queue pairs, one function per transition.
 *
 * What each transition needs comes from ibv_modify_qp(3) ("required and
 * optional attributes for QP transitions", RC column) and the IBA spec
 * vol. 1 section 11.2.4.2 (Modify Queue Pair, table of required/optional
 * attributes): we set exactly the required ones, plus no optional ones —
 * the defaults the device applies are what an RC connection wants.
 */
#include "internal.h"

#include <string.h>

static int qp_init(const struct rdma_qp_local *l, struct ibv_qp_attr *a, int *mask)
{
	if (l->port == 0)
		return -EINVAL;     /* ports are numbered from 1 */
	a->qp_state = IBV_QPS_INIT;
	a->pkey_index = l->pkey_index;
	a->port_num = l->port;
	a->qp_access_flags = l->access;
	*mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
	return 0;
}

static int qp_rtr(const struct rdma_qp_local *l, const struct rdma_conn *r,
		  struct ibv_qp_attr *a, int *mask)
{
	bool global;

	ZB_ASSERT(r != NULL);
	global = l->ethernet || (r->flags & RDMA_CONN_F_GLOBAL);
	if (l->port == 0 || r->qpn < 2 || r->qpn > 0xFFFFFFu ||
	    r->psn > 0xFFFFFFu || r->mtu < IBV_MTU_256 || r->mtu > IBV_MTU_4096)
		return -EINVAL;
	if (l->active_mtu < IBV_MTU_256 || l->active_mtu > IBV_MTU_4096)
		return -EINVAL;
	if (global && rdma__gid_is_zero(r->gid))
		return -EINVAL;     /* RoCE: the GRH is the only address */
	if (!global && (r->lid == 0 || r->lid >= 0xC000))
		return -EINVAL;
	if (l->min_rnr_timer < 1 || l->min_rnr_timer > 31 || l->max_rd_atomic == 0)
		return -EINVAL;
	a->qp_state = IBV_QPS_RTR;
	/* Both sides use the smaller of the two MTUs. */
	a->path_mtu = r->mtu < l->active_mtu ? (enum ibv_mtu)r->mtu : l->active_mtu;
	a->dest_qp_num = r->qpn;
	a->rq_psn = r->psn;
	a->max_dest_rd_atomic = l->max_rd_atomic;
	a->min_rnr_timer = l->min_rnr_timer;
	a->ah_attr.port_num = l->port;
	a->ah_attr.sl = l->sl;
	a->ah_attr.src_path_bits = 0;
	a->ah_attr.dlid = global && l->ethernet ? 0 : r->lid;
	a->ah_attr.is_global = global ? 1 : 0;
	if (global) {
		memcpy(a->ah_attr.grh.dgid.raw, r->gid, 16);
		a->ah_attr.grh.sgid_index = l->sgid_index;
		a->ah_attr.grh.hop_limit = l->hop_limit ? l->hop_limit : 64;
		a->ah_attr.grh.traffic_class = l->traffic_class;
		a->ah_attr.grh.flow_label = 0;
	}
	*mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
		IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	return 0;
}

static int qp_rts(const struct rdma_qp_local *l, struct ibv_qp_attr *a, int *mask)
{
	if (l->psn > 0xFFFFFFu || l->retry_cnt > 7 || l->rnr_retry > 7 ||
	    l->timeout > 31 || l->max_rd_atomic == 0)
		return -EINVAL;
	a->qp_state = IBV_QPS_RTS;
	a->sq_psn = l->psn;
	a->timeout = l->timeout;
	a->retry_cnt = l->retry_cnt;
	a->rnr_retry = l->rnr_retry;
	a->max_rd_atomic = l->max_rd_atomic;
	*mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
		IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	return 0;
}

int rdma__qp_attr(enum ibv_qp_state from, enum ibv_qp_state to,
		  const struct rdma_qp_local *loc, const struct rdma_conn *remote,
		  struct ibv_qp_attr *attr, int *mask)
{
	int rc = -EINVAL;

	ZB_ASSERT(loc != NULL && attr != NULL && mask != NULL);
	memset(attr, 0, sizeof(*attr));
	*mask = 0;
	if (to == IBV_QPS_ERR || to == IBV_QPS_RESET) {
		/* Any state may go to ERR or RESET with the state alone. */
		attr->qp_state = to;
		*mask = IBV_QP_STATE;
		rc = 0;
	} else if (from == IBV_QPS_RESET && to == IBV_QPS_INIT) {
		rc = qp_init(loc, attr, mask);
	} else if (from == IBV_QPS_INIT && to == IBV_QPS_RTR) {
		rc = remote ? qp_rtr(loc, remote, attr, mask) : -EINVAL;
	} else if (from == IBV_QPS_RTR && to == IBV_QPS_RTS) {
		rc = qp_rts(loc, attr, mask);
	}
	if (rc) {
		memset(attr, 0, sizeof(*attr));
		*mask = 0;
	}
	ZB_ASSERT(rc != 0 || (*mask & IBV_QP_STATE));
	return rc;
}
