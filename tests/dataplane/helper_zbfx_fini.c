/* helper_zbfx_fini — the "dpdk" net provider's fini() while the transport
 * still holds its sends (a failed communicator): one memif node whose peer
 * never starts. A poller on lcore 0 posts isends of 64 KB payloads
 * (zero-copy: the transport holds the requests' tp_refs) on 2 channels; the
 * peer never answers, so they stay pending. The loops stop, the comms close,
 * fini() runs; then the freed ctx's memory is taken by a new allocation of
 * the same size filled with a pattern, and dp_node_fini() destroys the
 * transport (failing whatever it still holds and releasing its references).
 *
 *   helper_zbfx_fini -c NODE.ini
 *
 * Prints "POSTED n=N", "AFTER_FINI queued=Q" (messages the transport still
 * holds for the peer after fini), "REUSED overlap=0|1" and
 * "PATTERN intact=0|1" (whether anything wrote into the reused memory after
 * fini); exits 0 when queued=0 and the pattern is intact.
 * (With a memif port dp_node_fini() leaves the EAL's memory mapped, so the
 * pattern can be read after it.) */
#include "zbmd/common.h"
#include "zbmd/config.h"
#include "zbmd/dataplane.h"
#include "zbmd/net.h"
#include "zbmd/transport.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rte_cycles.h>
#include <rte_malloc.h>

#define CH 2
#define PER_CH 4
#define SZ (64u << 10)

static struct zb_config cfg;
static const struct net_ops *ops;
static void *ctx, *sc[CH];
static uint16_t peer;
static uint8_t sbuf[CH][PER_CH][SZ];
static void *sreq[CH][PER_CH];
static int posted, failed_early;
static uint64_t t_end;
static volatile int stopped;

static unsigned driver(void *arg, uint64_t now_tsc)
{
	(void)arg;
	if (stopped)
		return 0;
	if (!t_end) {
		for (unsigned ch = 0; ch < CH; ch++)
			for (unsigned k = 0; k < PER_CH; k++) {
				memset(sbuf[ch][k], (int)(ch * 16 + k), SZ);
				if (ops->isend(sc[ch], sbuf[ch][k], SZ, k, NULL,
					       &sreq[ch][k]) == 0)
					posted++;
			}
		t_end = now_tsc + rte_get_tsc_hz() / 3;   /* ~330 ms */
		return 1;
	}
	for (unsigned ch = 0; ch < CH; ch++)     /* progress, as coll does */
		for (unsigned k = 0; k < PER_CH; k++) {
			int done = 0;
			if (sreq[ch][k] && (ops->test(sreq[ch][k], &done, NULL) || done)) {
				sreq[ch][k] = NULL;
				failed_early++;
			}
		}
	if (now_tsc >= t_end) {
		stopped = 1;
		dp_node_request_stop();
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct cfg_error cerr;
	if (argc != 3 || strcmp(argv[1], "-c") != 0 ||
	    cfg_load_file(&cfg, argv[2], &cerr) != 0) {
		fprintf(stderr, "usage: helper_zbfx_fini -c NODE.ini\n");
		return 2;
	}
	for (unsigned i = 0; i < CFG_MAX_NODES; i++)
		if (cfg.peers[i].present && i != cfg.node.id)
			peer = (uint16_t)i;
	struct dp_err err;
	if (dp_node_init(&cfg, &err) != 0) {
		fprintf(stderr, "helper_zbfx_fini: %s\n", err.msg);
		return 1;
	}
	ops = net_find("dpdk");
	struct net_init_args ia = {.cfg = &cfg, .channels = CH};
	int rc = ops ? ops->init(&ia, &ctx) : -ENOENT;
	for (unsigned ch = 0; rc == 0 && ch < CH; ch++)
		rc = ops->connect(ctx, peer, (uint16_t)ch, &sc[ch]);
	size_t ctx_size = 0;
	if (rc == 0 && rte_malloc_validate(ctx, &ctx_size) != 0)
		rc = -EINVAL;
	if (rc == 0)
		rc = dp_register_poller(0, driver, NULL);
	if (rc == 0 && dp_node_launch(&err) != 0)
		rc = -EIO;
	if (rc) {
		fprintf(stderr, "helper_zbfx_fini: setup: %s\n", zb_strerror(rc));
		dp_node_fini();
		return 1;
	}
	if (dp_main_polls()) {
		dp_node_wait();
	} else {
		struct timespec ts = {0, 10000000};
		while (!stopped)
			nanosleep(&ts, NULL);
	}
	dp_node_stop();
	printf("POSTED n=%d failed_early=%d\n", posted, failed_early);
	for (unsigned ch = 0; ch < CH; ch++)
		ops->close_send(sc[ch]);
	ops->fini(ctx);   /* the sends are still in the transport */
	struct tp_peer_info pi;
	memset(&pi, 0, sizeof(pi));
	tp_peer_info(dp_transport(0), peer, &pi);
	printf("AFTER_FINI queued=%u\n", pi.queued_msgs);
	/* take the freed memory: the allocator hands the same block back */
	uint8_t *reuse = rte_malloc(NULL, ctx_size, RTE_CACHE_LINE_SIZE);
	if (!reuse) {
		fprintf(stderr, "helper_zbfx_fini: rte_malloc failed\n");
		dp_node_fini();
		return 1;
	}
	memset(reuse, 0xa5, ctx_size);
	int overlap = (uintptr_t)ctx >= (uintptr_t)reuse &&
		      (uintptr_t)ctx < (uintptr_t)reuse + ctx_size;
	printf("REUSED overlap=%d size=%zu\n", overlap, ctx_size);
	fflush(stdout);
	dp_node_fini();   /* destroys the transport: releases what it held */
	size_t bad = 0;
	for (size_t i = 0; i < ctx_size; i++)
		bad += reuse[i] != 0xa5;
	printf("PATTERN intact=%d changed_bytes=%zu\n", bad == 0, bad);
	fflush(stdout);
	return pi.queued_msgs == 0 && bad == 0 && posted == CH * PER_CH ? 0 : 1;
}
