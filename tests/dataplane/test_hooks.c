/* The node in-process on net_ring (a loopback: what an lcore sends on queue
 * q comes back on queue q): pollers, actor/timer/control hooks, dp_tx, the
 * frame classifier (ARP and ICMP answered, UDP handed to the rx hook of its
 * lane, across lcores through the inbox), counters, clean stop. */
#include "tap.h"
#include "zbmd/common.h"
#include "zbmd/config.h"
#include "zbmd/dataplane.h"

#include <string.h>
#include <unistd.h>

#include <rte_arp.h>
#include <rte_ether.h>
#include <rte_icmp.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_udp.h>
#include <rte_cycles.h>
#include <rte_lcore.h>
#include <rte_timer.h>

/* Allocation after init: every libc allocation made on a dataplane lcore
 * while its loop runs is counted (this binary interposes malloc & co.;
 * sanitizer builds own malloc themselves, so there the check is skipped). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define NO_MALLOC_CHECK 1
static uint64_t lcore_allocs;
#else
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
static uint64_t lcore_allocs;
static inline void count_alloc(void)
{
	if (dp_lcore_index() >= 0)
		__atomic_add_fetch(&lcore_allocs, 1, __ATOMIC_RELAXED);
}
void *malloc(size_t n)
{
	count_alloc();
	return __libc_malloc(n);
}
void *calloc(size_t a, size_t b)
{
	count_alloc();
	return __libc_calloc(a, b);
}
void *realloc(void *p, size_t n)
{
	count_alloc();
	return __libc_realloc(p, n);
}
int posix_memalign(void **out, size_t align, size_t n)
{
	count_alloc();
	*out = __libc_memalign(align, n);
	return *out ? 0 : ENOMEM;
}
void *aligned_alloc(size_t align, size_t n)
{
	count_alloc();
	return __libc_memalign(align, n);
}
#endif

#define LCORES 2
static struct zb_config cfg;
static uint64_t polls[LCORES], actor_calls[LCORES], timer_calls[LCORES];
static uint64_t rx_frames[LCORES], rx_bad_lane;
static uint64_t ctl_runs, ctl_stop;
static uint32_t ip_be;
static uint16_t udp_port;

static unsigned poller(void *arg, uint64_t now)
{
	(void)now;
	__atomic_add_fetch(&polls[(uintptr_t)arg], 1, __ATOMIC_RELAXED);
	return 0;
}

/* 1: lcore 0's actor hook makes one allocation (the counter's own check),
 * then sets it to 2 */
static int alloc_probe;

static unsigned actor(void *arg, unsigned index, uint64_t now)
{
	(void)arg;
	(void)now;
	__atomic_add_fetch(&actor_calls[index], 1, __ATOMIC_RELAXED);
	if (index == 0 && __atomic_load_n(&alloc_probe, __ATOMIC_ACQUIRE) == 1) {
		void *volatile p = malloc(16);
		free(p);
		__atomic_store_n(&alloc_probe, 2, __ATOMIC_RELEASE);
	}
	return 0;
}

static unsigned timer(void *arg, unsigned index, uint64_t now)
{
	(void)arg;
	(void)now;
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
		__atomic_add_fetch(&rx_frames[index], 1, __ATOMIC_RELAXED);
	}
	rte_pktmbuf_free_bulk(pkts, n);
}

static struct rte_timer tim;
static unsigned tim_lcore = 9999, tim_runs;
static void tim_cb(struct rte_timer *t, void *arg)
{
	(void)t;
	(void)arg;
	tim_lcore = rte_lcore_id();
	__atomic_add_fetch(&tim_runs, 1, __ATOMIC_RELAXED);
}

static int ctl_run(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&ctl_stop, __ATOMIC_ACQUIRE)) {
		__atomic_add_fetch(&ctl_runs, 1, __ATOMIC_RELAXED);
		usleep(1000);
	}
	return 0;
}

static void ctl_stop_fn(void *arg)
{
	(void)arg;
	__atomic_store_n(&ctl_stop, 1, __ATOMIC_RELEASE);
}

static const struct dp_control_ops ctl_ops = {ctl_run, ctl_stop_fn};

/* Build frames addressed to ourselves, sent from lcore 0 once. */
static struct rte_mbuf *frame(uint16_t ether_type, size_t len)
{
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
	e->ether_type = rte_cpu_to_be_16(ether_type);
	return m;
}

static struct rte_mbuf *ipv4(uint8_t proto, size_t l4len)
{
	struct rte_mbuf *m = frame(RTE_ETHER_TYPE_IPV4,
				   RTE_ETHER_HDR_LEN + 20 + l4len);
	if (!m)
		return NULL;
	struct rte_ipv4_hdr *ip = rte_pktmbuf_mtod_offset(m, struct rte_ipv4_hdr *,
							  RTE_ETHER_HDR_LEN);
	ip->version_ihl = 0x45;
	ip->total_length = rte_cpu_to_be_16((uint16_t)(20 + l4len));
	ip->time_to_live = 64;
	ip->next_proto_id = proto;
	ip->src_addr = ip_be;
	ip->dst_addr = ip_be;
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	return m;
}

static int sent_once;
static unsigned sender(void *arg, uint64_t now)
{
	(void)arg;
	(void)now;
	if (sent_once)
		return 0;
	sent_once = 1;
	/* ARP request for our IP: the reply comes back (and is not for us) */
	struct rte_mbuf *m = frame(RTE_ETHER_TYPE_ARP, RTE_ETHER_HDR_LEN +
				   sizeof(struct rte_arp_hdr));
	struct rte_arp_hdr *a = rte_pktmbuf_mtod_offset(m, struct rte_arp_hdr *,
							RTE_ETHER_HDR_LEN);
	memset(rte_pktmbuf_mtod(m, char *), 0xff, 6);
	a->arp_hardware = rte_cpu_to_be_16(RTE_ARP_HRD_ETHER);
	a->arp_protocol = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	a->arp_hlen = 6;
	a->arp_plen = 4;
	a->arp_opcode = rte_cpu_to_be_16(RTE_ARP_OP_REQUEST);
	/* the asker is ourselves (a unicast MAC: a broadcast or zero asker
	 * gets no reply), so the reply comes back to this port */
	dp_port_addr(0, a->arp_data.arp_sha.addr_bytes, NULL);
	a->arp_data.arp_sip = rte_cpu_to_be_32(0x0a090002);
	a->arp_data.arp_tip = ip_be;
	dp_tx(0, m);
	/* ICMP echo to us, from another host's address (an echo from our own
	 * is not answered) */
	m = ipv4(IPPROTO_ICMP, 16);
	struct rte_ipv4_hdr *ih = rte_pktmbuf_mtod_offset(m, struct rte_ipv4_hdr *,
							  RTE_ETHER_HDR_LEN);
	ih->src_addr = rte_cpu_to_be_32(0x0a090002);
	ih->hdr_checksum = 0;
	ih->hdr_checksum = rte_ipv4_cksum(ih);
	struct rte_icmp_hdr *ic = rte_pktmbuf_mtod_offset(m, struct rte_icmp_hdr *,
							  RTE_ETHER_HDR_LEN + 20);
	ic->icmp_type = RTE_IP_ICMP_ECHO_REQUEST;
	ic->icmp_cksum = (uint16_t)~rte_raw_cksum(ic, 16);
	dp_tx(0, m);
	/* UDP to lane 0 and lane 1 (both arrive on lcore 0's queue), 10 each,
	 * and 5 to a lane that does not exist */
	for (int i = 0; i < 25; i++) {
		m = ipv4(IPPROTO_UDP, 8 + 32);
		struct rte_udp_hdr *u = rte_pktmbuf_mtod_offset(m, struct rte_udp_hdr *,
			RTE_ETHER_HDR_LEN + 20);
		u->dst_port = rte_cpu_to_be_16((uint16_t)(udp_port +
							   (i < 20 ? i % 2 : 7)));
		u->dgram_len = rte_cpu_to_be_16(40);
		dp_tx(0, m);
	}
	/* a frame for another MAC: dropped */
	m = ipv4(IPPROTO_UDP, 8);
	rte_pktmbuf_mtod(m, uint8_t *)[0] ^= 0x02;
	dp_tx(0, m);
	return 1;
}

int main(void)
{
	tap_plan(21);
	char ini[1024];
	struct cfg_error cerr;
	snprintf(ini, sizeof(ini),
		 "[node]\nid = 1\n[cluster]\nid = 5\n"
		 "[eal]\nlcores = 0-%d\nmemory_mb = 256\nhugepages = false\n"
		 "file_prefix = zbmd-node-hooks%d\nlog_level = 3\n"
		 "[dataplane]\nidle = adaptive\nidle_spin_us = 20\nmbufs = 4095\n"
		 "[port.0]\nvdev = net_ring0\nip = 10.9.0.1/24\nmac = 02:7a:62:00:09:01\n"
		 "rx_desc = 256\ntx_desc = 256\n",
		 LCORES, (int)getpid());
	/* the test's own config: one that does not load is a failure (it
	 * printed a second plan, "1..0 # SKIP", after this one) */
	if (!ok(cfg_load_string(&cfg, ini, "hooks.ini", &cerr) == 0, "the node config loads")) {
		tap_diag("config: %s", cerr.msg);
		return tap_done();
	}
	ip_be = cfg.ports[0].ip;
	udp_port = cfg.dp.udp_port;

	struct dp_err err;
	int rc = dp_node_init(&cfg, &err);
	if (rc)
		tap_diag("init: %s", err.msg);
	is_int(rc, 0, "node init on net_ring");
	is_int((int)dp_lcore_count(), LCORES, "%d dataplane lcores", LCORES);
	is_int(dp_register_poller(LCORES, poller, NULL), -EINVAL,
	       "poller on a missing lcore: -EINVAL");
	for (uintptr_t i = 0; i < LCORES; i++)
		dp_register_poller((unsigned)i, poller, (void *)i);
	dp_register_poller(0, sender, NULL);
	dp_set_actor_hook(actor, NULL);
	dp_set_timer_hook(timer, NULL, 1000);
	dp_set_rx_hook(rx, NULL);
	is_int(dp_set_control_hook(&ctl_ops, NULL), 0, "control hook set");
	rte_timer_init(&tim);
	/* a periodic rte_timer on lcore index 1: runs in that lcore's loop */
	rte_timer_reset(&tim, rte_get_timer_hz() / 1000, PERIODICAL,
			dp_lcore_id_of(1), tim_cb, NULL);
	is_int(dp_node_launch(&err), 0, "launch");
	is_int(dp_set_rx_hook(rx, NULL), -EBUSY, "hooks are fixed once launched");

	/* wait (bounded) for the loopback traffic to come round */
	for (int i = 0; i < 1500; i++) {   /* up to 30 s on a loaded machine */
		uint64_t got = __atomic_load_n(&rx_frames[0], __ATOMIC_RELAXED) +
			       __atomic_load_n(&rx_frames[1], __ATOMIC_RELAXED);
		if (got >= 20 && __atomic_load_n(&ctl_runs, __ATOMIC_RELAXED) > 5 &&
		    __atomic_load_n(&polls[0], __ATOMIC_RELAXED) > 10 &&
		    __atomic_load_n(&polls[1], __ATOMIC_RELAXED) > 10 &&
		    __atomic_load_n(&timer_calls[0], __ATOMIC_RELAXED) > 0 &&
		    __atomic_load_n(&timer_calls[1], __ATOMIC_RELAXED) > 0 &&
		    __atomic_load_n(&tim_runs, __ATOMIC_RELAXED) > 3)
			break;
		usleep(20000);
	}
	usleep(100000);
	/* what the loops allocated, then one allocation made on purpose on
	 * lcore 0: the counter must see it, or its 0 means nothing */
	uint64_t quiet = __atomic_load_n(&lcore_allocs, __ATOMIC_RELAXED);
	__atomic_store_n(&alloc_probe, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < 250 && __atomic_load_n(&alloc_probe, __ATOMIC_ACQUIRE) != 2; i++)
		usleep(20000);
	uint64_t probed = __atomic_load_n(&lcore_allocs, __ATOMIC_RELAXED) - quiet;
	dp_node_request_stop();
	dp_node_stop();

	struct dp_lcore_stats s0, s1;
	dp_lcore_stats(0, &s0);
	dp_lcore_stats(1, &s1);
	ok(polls[0] > 10 && polls[1] > 10, "pollers ran on both lcores (%lu, %lu)",
	   (unsigned long)polls[0], (unsigned long)polls[1]);
	ok(actor_calls[0] > 10 && actor_calls[1] > 10, "actor hook ran on both lcores");
	ok(timer_calls[0] > 0 && timer_calls[1] > 0 &&
		   timer_calls[0] < actor_calls[0],
	   "timer hook ran, less often than every iteration");
	ok(ctl_runs > 0 && ctl_stop == 1, "control thread ran and was stopped");
	ok(tim_runs > 3 && tim_lcore == dp_lcore_id_of(1),
	   "a periodic rte_timer ran %u times on its lcore (%u)", tim_runs, tim_lcore);
	rte_timer_stop_sync(&tim);
	is_int((int)s0.arp_replies, 1, "ARP request for our IP answered");
	is_int((int)s0.icmp_replies, 1, "ICMP echo answered");
	is_int((int)rx_frames[0], 10, "lane 0 got its 10 UDP frames on lcore 0");
	is_int((int)rx_frames[1], 10, "lane 1 got its 10 UDP frames on lcore 1");
	is_int((int)s0.lane_fwd, 10, "lcore 0 forwarded lane 1's frames");
	ok(rx_bad_lane == 0, "every frame reached the rx hook of its own lane");
	/* drops: 5 for lane 7, 1 other MAC, the ARP reply (to 10.9.0.2: an
	 * ARP frame not answered) and the ICMP echo reply (to 10.9.0.2) */
	is_int((int)(s0.rx_drops + s1.rx_drops), 8,
	       "wrong lane, wrong MAC, the ARP and the echo reply dropped and counted");
#ifdef NO_MALLOC_CHECK
	tap_skip(2, "sanitizer build: malloc belongs to the sanitizer");
	(void)quiet;
	(void)probed;
#else
	is_int((int)quiet, 0, "no libc allocation on a dataplane lcore while the loops ran");
	is_int((int)probed, 1, "... as counted by a counter that saw the one made there on purpose");
#endif
	dp_node_fini();
	dp_node_fini();  /* idempotent */
	char dir[512], cmd[600];
	if (dp_runtime_dir(cfg.eal.file_prefix, dir, sizeof(dir)) == 0 &&
	    strstr(dir, "zbmd-node-hooks")) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			tap_diag("could not remove %s", dir);
	}
	return tap_done();
}
