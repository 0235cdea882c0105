/* Work-completion status -> what the affected requests fail with.
 *
 * Per the verbs spec (ibv_poll_cq(3), IBA 10.10.2.1 "completion error
 * reporting"), any status but SUCCESS moves an RC QP to the error state, and
 * the WRs behind it complete with WR_FLUSH_ERR. We map the cause: the peer or
 * the path (retries exhausted, remote access/operation errors) -> peer down
 * or an access error; local programming/protection errors -> device error.
 * The message shown to the user comes from ibv_wc_status_str(). */
#include "internal.h"

struct rdma_wc_class rdma__wc_classify(enum ibv_wc_status st)
{
	struct rdma_wc_class c = {.err = ZB_ERR_DEVICE,
				  .qp_fatal = true, .peer_side = false};

	switch (st) {
	case IBV_WC_SUCCESS:
		c.err = 0;
		c.qp_fatal = false;
		break;
	case IBV_WC_RETRY_EXC_ERR:      /* no ACK: peer or path gone */
	case IBV_WC_RNR_RETRY_EXC_ERR:  /* peer stopped posting receives */
	case IBV_WC_REM_ABORT_ERR:
	case IBV_WC_RESP_TIMEOUT_ERR:
		c.err = ZB_ERR_PEER_DOWN;
		c.peer_side = true;
		break;
	case IBV_WC_REM_ACCESS_ERR:     /* bad rkey / address / permissions */
	case IBV_WC_REM_INV_RD_REQ_ERR:
		c.err = -EACCES;
		c.peer_side = true;
		break;
	case IBV_WC_REM_INV_REQ_ERR:    /* e.g. message longer than the buffer */
		c.err = -EMSGSIZE;
		c.peer_side = true;
		break;
	case IBV_WC_REM_OP_ERR:
		c.err = ZB_ERR_DEVICE;
		c.peer_side = true;
		break;
	case IBV_WC_LOC_LEN_ERR:        /* receive buffer too small */
		c.err = -EMSGSIZE;
		break;
	case IBV_WC_LOC_PROT_ERR:       /* lkey does not cover the buffer */
	case IBV_WC_LOC_ACCESS_ERR:
	case IBV_WC_MW_BIND_ERR:
		c.err = -EACCES;
		break;
	case IBV_WC_WR_FLUSH_ERR:       /* QP already in error: collateral */
		c.err = -ECANCELED;
		break;
	default:                        /* LOC_QP_OP, BAD_RESP, FATAL, GENERAL, ... */
		c.err = ZB_ERR_DEVICE;
		break;
	}
	ZB_ASSERT(c.err <= 0);
	ZB_ASSERT(c.err == 0 || c.qp_fatal);
	return c;
}
