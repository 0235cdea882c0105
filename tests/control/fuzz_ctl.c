/* libFuzzer entry point for what the control thread decodes from its peers:
 * `make fuzz-control` (clang -fsanitize=fuzzer,address,undefined;
 * FUZZ_SECS=30 by default). Input byte 0 picks the target:
 *   0  a Raft snapshot (ctl_state_decode): one that decodes encodes and
 *      decodes again to the same members and epoch;
 *   1  a run of Raft log entries (ctl_state_apply), each prefixed by a 9-bit
 *      length: a refused entry leaves the state as it was, and the member
 *      count stays within CFG_MAX_NODES;
 *   2  a run of authenticated blob messages (ctl__blobs_on_msg: BLOB,
 *      BLOB_ACK and other types from any node id, each prefixed by its type,
 *      sender and a 10-bit length) between retransmission ticks, into one
 *      receiver whose handlers deliver, defer or refuse.
 * The MAC check before them (ctl_auth_open) is libsodium's; these are what
 * a peer holding the key, or a bug in one, could send. */
#include "../../control/internal.h"
#include "zbmd/common.h"
#include "zbmd/control.h"

#include <stdlib.h>
#include <string.h>

static struct ctl__blobs *B;

static bool fz_tx(void *arg, uint16_t peer, const struct sockaddr_in *to,
		  uint8_t type, const void *payload, size_t len)
{
	(void)arg, (void)peer, (void)to, (void)type, (void)payload, (void)len;
	return true;
}

static int fz_blob(void *arg, uint16_t from, uint8_t kind, const void *blob,
		   size_t len)
{
	(void)arg, (void)from, (void)kind;
	if (len == 0 || len > CTL_BLOB_MAX)
		abort(); /* the receiver hands over 1..CTL_BLOB_MAX bytes only */
	volatile uint8_t last = ((const uint8_t *)blob)[len - 1];
	(void)last;
	return len % 3 == 0 ? 0 : len % 3 == 1 ? -EAGAIN : -EBADMSG;
}

static void snapshot(const uint8_t *d, size_t n)
{
	static struct ctl_state st, st2;
	static uint8_t buf[1 << 16];

	if (ctl_state_decode(&st, d, n) != 0)
		return;
	size_t k = ctl_state_encode(&st, buf, sizeof(buf));
	if (k == 0 || ctl_state_decode(&st2, buf, k) != 0 || st.n != st2.n ||
	    st.epoch != st2.epoch || st.n > CFG_MAX_NODES ||
	    memcmp(st.m, st2.m, sizeof(st.m[0]) * st.n) != 0)
		abort();
}

static void log_entries(const uint8_t *d, size_t n)
{
	static struct ctl_state st, before;

	memset(&st, 0, sizeof(st));
	while (n >= 2) {
		size_t l = d[0] | (size_t)(d[1] & 1) << 8;
		d += 2, n -= 2;
		if (l > n)
			l = n;
		before = st;
		if (ctl_state_apply(&st, d, l) < 0 &&
		    memcmp(&before, &st, sizeof(st)) != 0)
			abort();
		if (st.n > CFG_MAX_NODES)
			abort();
		d += l, n -= l;
	}
}

static void blobs(const uint8_t *d, size_t n)
{
	static uint64_t now = 1;

	if (!B) {
		struct ctl_opts o = {0};
		if (ctl__blobs_create(&B, 1, 1000, &o, fz_tx, NULL) != 0)
			abort();
		for (uint8_t k = 1; k < CTL_BLOB_KINDS; k++)
			if (ctl__blobs_handle(B, k, fz_blob, NULL) != 0)
				abort();
	}
	while (n >= 4) {
		uint8_t type = (d[0] & 2) ? d[0]
			       : (d[0] & 1) ? CTL__MSG_BLOB : CTL__MSG_BLOB_ACK;
		uint16_t from = (uint16_t)(d[1] % CFG_MAX_NODES);
		size_t l = d[2] | (size_t)(d[3] & 3) << 8;
		d += 4, n -= 4;
		if (l > n)
			l = n;
		ctl__blobs_on_msg(B, type, from, NULL, d, l);
		now += 10 * 1000000ull;
		ctl__blobs_tick(B, now);
		d += l, n -= l;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	if (n < 1)
		return 0;
	switch (d[0] % 3) {
	case 0: snapshot(d + 1, n - 1); break;
	case 1: log_entries(d + 1, n - 1); break;
	default: blobs(d + 1, n - 1); break;
	}
	return 0;
}
