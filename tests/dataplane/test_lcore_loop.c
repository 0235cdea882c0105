/* The lcore loop (dataplane/lcore.c), in-process on net_ring with two
 * dataplane lcores in adaptive idle (sleeps of up to 1 s):
 *  - a frame for lane 1 that arrives on lcore 0's queue and goes through
 *    lane 1's inbox wakes lcore 1 from its sleep (it was left there until
 *    the sleep ended);
 *  - a timer hook set before dp_node_init keeps its period (it was replaced
 *    by the 100 us default: the TSC rate is unknown before the EAL runs);
 *  - dp_tx to a port index past the node's ports drops the frame and counts
 *    it (it indexed the lcore's TX tables out of bounds). */
#include "tap.h"
#include "zbmd/common.h"
#include "zbmd/config.h"
#include "zbmd/dataplane.h"

#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_udp.h>

#define TIMER_US 50000

static struct zb_config cfg;
static uint32_t ip_be;
static uint16_t udp_port;
static uint64_t timer_calls[2], polls[2], rx_lane[2], rx_bad_lane;
static int busy0;      /* lcore 0's poller reports work: it never sleeps */
static int send_req;   /* lcore 0: send one UDP frame to lane 1 */
static int bad_req;    /* lcore 0: dp_tx to a port that does not exist */
static int bad_rc = -1, bad_done;

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t ld(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static unsigned timer(void *arg, unsigned index, uint64_t now)
{
	(void)arg;
	(void)now;
	if (index < 2)
		__atomic_add_fetch(&timer_calls[index], 1, __ATOMIC_RELAXED);
	return 0;
}

static void rx(void *arg, unsigned index, uint16_t port, struct rte_mbuf **pkts,
	       uint16_t n, uint64_t now)
{
	(void)arg;
	(void)port;
	(void)now;
	for (uint16_t i = 0; i < n; i++) {
		struct rte_udp_hdr *u = rte_pktmbuf_mtod_offset(pkts[i],
			struct rte_udp_hdr *, RTE_ETHER_HDR_LEN + 20);
		if ((unsigned)(rte_be_to_cpu_16(u->dst_port) - udp_port) != index)
			__atomic_add_fetch(&rx_bad_lane, 1, __ATOMIC_RELAXED);
		else if (index < 2)
			__atomic_add_fetch(&rx_lane[index], 1, __ATOMIC_RELEASE);
	}
	rte_pktmbuf_free_bulk(pkts, n);
}

/* A UDP frame from and to ourselves, for lane `lane`. */
static struct rte_mbuf *udp_frame(unsigned lane)
{
	const size_t l4 = 8 + 32, len = RTE_ETHER_HDR_LEN + 20 + l4;
	struct rte_mbuf *m = rte_pktmbuf_alloc(dp_port_pool(0));
	if (!m)
		return NULL;
	char *p = rte_pktmbuf_append(m, (uint16_t)len);
	memset(p, 0, len);
	struct rte_ether_hdr *e = (struct rte_ether_hdr *)p;
	uint8_t mac[6];
	dp_port_addr(0, mac, NULL);
	memcpy(&e->dst_addr, mac, 6);
	memcpy(&e->src_addr, mac, 6);
	e->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(p + RTE_ETHER_HDR_LEN);
	ip->version_ihl = 0x45;
	ip->total_length = rte_cpu_to_be_16((uint16_t)(20 + l4));
	ip->time_to_live = 64;
	ip->next_proto_id = IPPROTO_UDP;
	ip->src_addr = ip_be;
	ip->dst_addr = ip_be;
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	struct rte_udp_hdr *u = (struct rte_udp_hdr *)(ip + 1);
	u->dst_port = rte_cpu_to_be_16((uint16_t)(udp_port + lane));
	u->src_port = rte_cpu_to_be_16(udp_port);
	u->dgram_len = rte_cpu_to_be_16((uint16_t)l4);
	return m;
}

static unsigned poller(void *arg, uint64_t now)
{
	unsigned index = (unsigned)(uintptr_t)arg;
	unsigned work = 0;
	(void)now;
	__atomic_add_fetch(&polls[index], 1, __ATOMIC_RELEASE);
	if (index != 0)
		return 0;
	if (__atomic_exchange_n(&send_req, 0, __ATOMIC_ACQ_REL)) {
		struct rte_mbuf *m = udp_frame(1);
		if (m)
			dp_tx(0, m);
		work = 1;
	}
	if (__atomic_exchange_n(&bad_req, 0, __ATOMIC_ACQ_REL)) {
		struct rte_mbuf *m = udp_frame(0);
		/* port index CFG_MAX_PORTS: past every table of the lcore */
		int rc = m ? dp_tx(CFG_MAX_PORTS, m) : -2;
		__atomic_store_n(&bad_rc, rc, __ATOMIC_RELAXED);
		__atomic_store_n(&bad_done, 1, __ATOMIC_RELEASE);
		work = 1;
	}
	return work + (unsigned)__atomic_load_n(&busy0, __ATOMIC_RELAXED);
}

int main(void)
{
	char ini[1024];
	struct cfg_error cerr;
	snprintf(ini, sizeof(ini),
		 "[node]\nid = 1\n[cluster]\nid = 5\n"
		 "[eal]\nlcores = 0-2\nmemory_mb = 256\nhugepages = false\n"
		 "file_prefix = zbmd-node-loop%d\nlog_level = 3\n"
		 "[dataplane]\nidle = adaptive\nidle_spin_us = 0\n"
		 "idle_sleep_us_max = 1000000\nmbufs = 4095\n"
		 "[port.0]\nvdev = net_ring0\nip = 10.9.0.1/24\nmac = 02:7a:62:00:09:01\n"
		 "rx_desc = 256\ntx_desc = 256\n",
		 (int)getpid());
	tap_plan(10);
	if (!ok(cfg_load_string(&cfg, ini, "loop.ini", &cerr) == 0, "the node config loads")) {
		tap_diag("config: %s", cerr.msg);
		return tap_done();
	}
	ip_be = cfg.ports[0].ip;
	udp_port = cfg.dp.udp_port;

	/* before init: the EAL (and its TSC rate) is not up yet */
	is_int(dp_set_timer_hook(timer, NULL, TIMER_US), 0, "timer hook set before init");
	struct dp_err err;
	int rc = dp_node_init(&cfg, &err);
	if (rc)
		tap_diag("init: %s", err.msg);
	if (!ok(rc == 0, "node init on net_ring, 2 lcores"))
		return tap_done();
	for (uintptr_t i = 0; i < 2; i++)
		dp_register_poller((unsigned)i, poller, (void *)i);
	dp_set_rx_hook(rx, NULL);
	is_int(dp_node_launch(&err), 0, "launch");

	/* 1. the timer hook's period: lcore 0 kept busy for 500 ms */
	__atomic_store_n(&busy0, 1, __ATOMIC_RELAXED);
	dp_lcore_kick(0);
	usleep(20000);
	uint64_t t0 = ld(&timer_calls[0]), ms0 = now_ms();
	usleep(500000);
	uint64_t calls = ld(&timer_calls[0]) - t0, ms = now_ms() - ms0;
	__atomic_store_n(&busy0, 0, __ATOMIC_RELAXED);
	ok(calls >= 1 && calls <= ms * 1000 / TIMER_US + 5,
	   "a timer hook set before init keeps its %u us period: %lu calls in %lu ms",
	   TIMER_US, (unsigned long)calls, (unsigned long)ms);

	/* 2. lane 1's lcore deep in its back-off (sleeps of 1 s from the 21st
	 * on): wait for a fresh sleep to begin, then lcore 0 receives a frame
	 * for lane 1 and passes it on through the inbox */
	struct dp_lcore_stats s;
	uint64_t end = now_ms() + 8000, seen = 0;
	int started = 0;
	while (now_ms() < end) {
		dp_lcore_stats(1, &s);
		if (s.sleeps >= 22 && seen && s.sleeps != seen) {
			started = 1;
			break;
		}
		if (s.sleeps >= 22 && !seen)
			seen = s.sleeps;
		usleep(500);
	}
	ok(started, "lcore 1 backs off into 1 s sleeps (%lu sleeps)",
	   (unsigned long)s.sleeps);
	uint64_t r0 = ld(&rx_lane[1]), ms1;
	ms0 = now_ms();
	__atomic_store_n(&send_req, 1, __ATOMIC_RELEASE);
	dp_lcore_kick(0);
	while (ld(&rx_lane[1]) == r0 && now_ms() - ms0 < 3000)
		usleep(200);
	ms1 = now_ms();
	ok(ld(&rx_lane[1]) == r0 + 1 && ms1 - ms0 < 300,
	   "a frame for lane 1 forwarded by lcore 0 wakes lcore 1: delivered %lu ms "
	   "after it was sent (sleeps of 1 s)", (unsigned long)(ms1 - ms0));
	struct dp_lcore_stats s0;
	dp_lcore_stats(0, &s0);
	ok(s0.lane_fwd >= 1 && ld(&rx_bad_lane) == 0,
	   "it went through the inbox (lane_fwd %lu)", (unsigned long)s0.lane_fwd);

	/* 3. dp_tx to a port index past the node's ports */
	dp_lcore_stats(0, &s0);
	__atomic_store_n(&bad_req, 1, __ATOMIC_RELEASE);
	dp_lcore_kick(0);
	for (int i = 0; i < 1500 && !__atomic_load_n(&bad_done, __ATOMIC_ACQUIRE); i++)
		usleep(2000);
	struct dp_lcore_stats s1;
	dp_lcore_stats(0, &s1);
	ok(__atomic_load_n(&bad_done, __ATOMIC_ACQUIRE) && bad_rc == 0,
	   "dp_tx to port %d (no such port) returns 0 (dropped)", CFG_MAX_PORTS);
	ok(s1.tx_drops == s0.tx_drops + 1 && s1.tx_packets == s0.tx_packets,
	   "... and counts it in tx_drops (%lu -> %lu)", (unsigned long)s0.tx_drops,
	   (unsigned long)s1.tx_drops);

	dp_node_request_stop();
	dp_node_stop();
	dp_node_fini();
	char dir[512], cmd[600];
	if (dp_runtime_dir(cfg.eal.file_prefix, dir, sizeof(dir)) == 0 &&
	    strstr(dir, "zbmd-node-loop")) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			tap_diag("could not remove %s", dir);
	}
	return tap_done();
}
