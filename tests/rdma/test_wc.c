/* Work-completion status -> error mapping. */
#include "../../rdma/internal.h"
#include "tap.h"

int main(void)
{
	struct rdma_wc_class k;
	int bad = 0, named = 0;

	tap_plan(12);
	k = rdma__wc_classify(IBV_WC_SUCCESS);
	ok(k.err == 0 && !k.qp_fatal, "SUCCESS: no error, QP fine");
	k = rdma__wc_classify(IBV_WC_RETRY_EXC_ERR);
	ok(k.err == ZB_ERR_PEER_DOWN && k.qp_fatal && k.peer_side, "RETRY_EXC: peer down");
	k = rdma__wc_classify(IBV_WC_RNR_RETRY_EXC_ERR);
	ok(k.err == ZB_ERR_PEER_DOWN && k.peer_side, "RNR_RETRY_EXC: peer down");
	k = rdma__wc_classify(IBV_WC_REM_ACCESS_ERR);
	ok(k.err == -EACCES && k.peer_side, "REM_ACCESS (bad rkey): EACCES, peer side");
	k = rdma__wc_classify(IBV_WC_LOC_PROT_ERR);
	ok(k.err == -EACCES && !k.peer_side, "LOC_PROT (bad lkey): EACCES, local");
	k = rdma__wc_classify(IBV_WC_LOC_LEN_ERR);
	ok(k.err == -EMSGSIZE, "LOC_LEN: EMSGSIZE");
	k = rdma__wc_classify(IBV_WC_REM_INV_REQ_ERR);
	ok(k.err == -EMSGSIZE && k.peer_side, "REM_INV_REQ: EMSGSIZE");
	k = rdma__wc_classify(IBV_WC_WR_FLUSH_ERR);
	ok(k.err == -ECANCELED && k.qp_fatal, "WR_FLUSH: ECANCELED (collateral)");
	k = rdma__wc_classify(IBV_WC_FATAL_ERR);
	ok(k.err == ZB_ERR_DEVICE, "FATAL: device error");
	k = rdma__wc_classify((enum ibv_wc_status)999);
	ok(k.err == ZB_ERR_DEVICE && k.qp_fatal, "unknown status: device error, QP fatal");
	for (int s = IBV_WC_LOC_LEN_ERR; s <= IBV_WC_TM_RNDV_INCOMPLETE; s++) {
		k = rdma__wc_classify((enum ibv_wc_status)s);
		if (k.err >= 0 || !k.qp_fatal)
			bad++;
		const char *n = ibv_wc_status_str((enum ibv_wc_status)s);
		if (n && *n && strcmp(n, "unknown"))
			named++;
	}
	is_int(bad, 0, "every failure status maps to a negative error and a dead QP");
	is_int(named, IBV_WC_TM_RNDV_INCOMPLETE, "ibv_wc_status_str names every failure status");
	return tap_done();
}
