/* config/schema.c — the whole INI schema in one table (STYLE.md item 10).
 *
 * Every key zbmd accepts is one row below: its section, name, type, bounds,
 * default (written as it would be in a file), where it is stored, and one
 * line of documentation. The parser, the validation, `zbmd check-config`,
 * cfg_dump() and docs/config.md all read this table; add a key here and it
 * exists everywhere (tests/config/test_doc.sh fails until docs/config.md is
 * regenerated with `zbmd config-doc > docs/config.md`).
 */
#include "internal.h"

#include "zbmd/common.h"

#include <assert.h>
#include <string.h>

#define ZC struct zb_config
#define PLAIN(n, d) {n, false, 0, 0, 0, 0, d}
#define INDEXED(n, arr, type, cnt, d)                                          \
	{n, true, cnt, offsetof(ZC, arr), sizeof(type),                        \
	 offsetof(type, present), d}

const struct cfg__section cfg__sections[] = {
	[S_NODE] = PLAIN("node", "This node's identity."),
	[S_EAL] = PLAIN("eal", "DPDK Environment Abstraction Layer: cores, "
			       "memory, process prefix."),
	[S_DATAPLANE] = PLAIN("dataplane", "The polling loops, mempools and "
					   "the zbmd UDP wire port."),
	[S_PORT] = INDEXED("port", ports, struct cfg_port, CFG_MAX_PORTS,
			   "A DPDK port, N = 0, 1, ... without gaps (N is the "
			   "DPDK port id). Exactly one of `pci` and `vdev`."),
	[S_PEER] = INDEXED("peer", peers, struct cfg_peer, CFG_MAX_NODES,
			   "A cluster member, N = its node id (0.."
			   "63). A [peer.N] for this node's own id is allowed "
			   "(so every node can carry the same peer list)."),
	[S_ACTORS] = PLAIN("actors", "The actor runtime: table sizes and the "
				     "scheduler's budget."),
	[S_TRANSPORT] = PLAIN("transport", "The reliable transport (dpdk "
					   "provider) and which net provider "
					   "collectives use."),
	[S_FAULT] = PLAIN("fault", "Deterministic fault injection on the "
				   "dataplane (tests only; all 0 in production)."),
	[S_COLL] = PLAIN("coll", "Collectives (ring all-reduce and friends)."),
	[S_RDMA] = PLAIN("rdma", "The libibverbs provider (RC queue pairs)."),
	[S_GPU] = PLAIN("gpu", "The GPU backend and its memory pool."),
	[S_CLUSTER] = PLAIN("cluster", "Cluster identity, bootstrap seeds and "
				       "the pre-shared key."),
	[S_CONTROL] = PLAIN("control", "The control thread: heartbeats, "
				       "phi-accrual failure detection, Raft, "
				       "admin API."),
	[S_METRICS] = PLAIN("metrics", "The Prometheus metrics endpoint."),
};
const unsigned cfg__nsections = S_COUNT;
static_assert(CFG_MAX_NODES == 64, "the [peer.N] doc names 0..63");
static_assert(ZB_ARRAY_LEN(cfg__sections) == S_COUNT, "one row per section");

static const char *const idle_names[] = {"poll", "adaptive", NULL};
static const char *const mbuf_pool_names[] = {"stack", "ring", NULL};
static const char *const transport_names[] = {"dpdk", "tcp", "rdma", NULL};
static const char *const gpu_names[] = {"auto", "cpu", "cuda", "hip",
					"vulkan", NULL};
static const char *const control_mode_names[] = {"auto", "on", "off", NULL};
static const char *const carrier_names[] = {"auto", "dpdk", "tcp", "rdma", NULL};
static_assert(CFG_IDLE_ADAPTIVE == 1 && CFG_TRANSPORT_RDMA == 2 &&
		      CFG_GPU_VULKAN == 4 && CFG_CONTROL_OFF == 2 &&
		      CFG_CARRIER_RDMA == 3,
	      "enum names follow the enum values");

#define FSZ(T, f) sizeof(((T *)0)->f)
/* Rows of plain sections (field in struct zb_config). */
#define KEY(s, k, t, lo, hi, d, f, fl, doc)                                    \
	{s, k, t, lo, hi, d, offsetof(ZC, f), FSZ(ZC, f), doc, fl, NULL, 0}
#define UINT(s, k, lo, hi, d, f, doc) KEY(s, k, CFG__UINT, lo, hi, d, f, 0, doc)
#define ENUM(s, k, names, d, f, doc)                                           \
	{s, k, CFG__ENUM, 0, 0, d, offsetof(ZC, f), FSZ(ZC, f), doc, 0, names, 0}
/* Rows of indexed sections (field in struct cfg_port / cfg_peer). */
#define EKEY(s, T, k, t, lo, hi, d, f, fl, doc)                                \
	{s, k, t, lo, hi, d, offsetof(T, f), FSZ(T, f), doc, fl, NULL, 0}

#define U16 65535.0
#define U32 4294967295.0

const struct cfg__key cfg__keys[] = {
	/* [node] */
	KEY(S_NODE, "id", CFG__UINT, 0, CFG_MAX_NODES - 1, "0", node.id,
	    CFG__REQUIRED, "This node's id, unique in the cluster (required)."),
	KEY(S_NODE, "name", CFG__STRING, 0, 0, "", node.name,
	    CFG__EMPTY_OK | CFG__NAME_CHARS,
	    "A name for logs and metrics; \"\" = node<id>."),

	/* [eal] */
	KEY(S_EAL, "lcores", CFG__LCORES, 0, 0, "0", eal.lcores, 0,
	    "CPU cores for polling lcores: ids and ranges, e.g. \"0-3,6\". "
	    "The first is the main lcore."),
	UINT(S_EAL, "memory_mb", 64, 1048576, "1024", eal.memory_mb,
	     "Memory DPDK reserves at start-up (EAL -m), MiB."),
	KEY(S_EAL, "hugepages", CFG__BOOL, 0, 0, "true", eal.hugepages, 0,
	    "Use hugepages; false passes --no-huge (tests, containers)."),
	KEY(S_EAL, "file_prefix", CFG__STRING, 0, 0, "zbmd", eal.file_prefix,
	    CFG__NAME_CHARS,
	    "EAL --file-prefix; unique per process on one machine."),
	KEY(S_EAL, "extra_args", CFG__STRING, 0, 0, "", eal.extra_args,
	    CFG__EMPTY_OK, "More EAL arguments, split at spaces, appended last. "
	    "Not the ones zbmd sets from other keys (--file-prefix, -l/--lcores/-c, "
	    "-m/--socket-mem, --no-huge, nor their abbreviations or attached values "
	    "such as --file-p=x or -m512) nor --in-memory (zbmd passes --legacy-mem)."),
	UINT(S_EAL, "log_level", 1, 8, "6", eal.log_level,
	     "EAL log level (rte_log: 1 emergency .. 8 debug)."),

	/* [dataplane] */
	ENUM(S_DATAPLANE, "idle", idle_names, "poll", dp.idle,
	     "What a loop does when there is nothing to poll: `poll` spins "
	     "(production); `adaptive` spins, then sleeps with back-off "
	     "(shared cores)."),
	UINT(S_DATAPLANE, "idle_spin_us", 0, 1000000, "100", dp.idle_spin_us,
	     "adaptive: spin this long idle before the first sleep, us."),
	UINT(S_DATAPLANE, "idle_sleep_us_max", 1, 1000000, "1000",
	     dp.idle_sleep_us_max, "adaptive: the back-off ceiling, us."),
	UINT(S_DATAPLANE, "mbufs", 512, 4194304, "8191", dp.mbufs,
	     "Mbufs in each port's mempool (2^n - 1 is most efficient)."),
	UINT(S_DATAPLANE, "mbuf_cache", 0, 512, "256", dp.mbuf_cache,
	     "Per-lcore mempool cache, mbufs (at most mbufs / 1.5)."),
	ENUM(S_DATAPLANE, "mbuf_pool", mbuf_pool_names, "stack", dp.mbuf_pool,
	     "How a port's mempool keeps the mbufs that overflow the lcore "
	     "caches: `stack` hands out the last freed first, so the mbufs "
	     "in use stay few and warm in the CPU caches; `ring` (DPDK's "
	     "default) first in, first out, which cycles through the whole "
	     "pool."),
	UINT(S_DATAPLANE, "burst", 1, 512, "32", dp.burst,
	     "Packets per rx/tx burst."),
	UINT(S_DATAPLANE, "udp_port", 1, U16, "7403", dp.udp_port,
	     "UDP port of the zbmd wire protocol (same on every node)."),

	/* [port.N] */
	EKEY(S_PORT, struct cfg_port, "pci", CFG__PCI, 0, 0, "", pci,
	     CFG__EMPTY_OK, "PCI address of a NIC bound to vfio-pci, "
			    "\"0000:3b:00.0\" or \"3b:00.0\"."),
	EKEY(S_PORT, struct cfg_port, "vdev", CFG__VDEV, 0, 0, "", vdev,
	     CFG__EMPTY_OK, "A DPDK virtual device instead, e.g. "
			    "\"net_af_packet0,iface=veth0\" or \"net_null0\"."),
	EKEY(S_PORT, struct cfg_port, "rx_queues", CFG__UINT, 1, 64, "1",
	     rx_queues, 0, "Not used: the port gets one RX/TX queue pair per "
	     "dataplane lcore ([eal] lcores), as many as the device offers "
	     "(docs/dataplane.md); accepted so that older configs load."),
	EKEY(S_PORT, struct cfg_port, "tx_queues", CFG__UINT, 1, 64, "1",
	     tx_queues, 0, "Not used, as rx_queues."),
	EKEY(S_PORT, struct cfg_port, "rx_desc", CFG__UINT, 64, 32768, "1024",
	     rx_desc, CFG__POW2, "Descriptors per receive queue (power of two)."),
	EKEY(S_PORT, struct cfg_port, "tx_desc", CFG__UINT, 64, 32768, "1024",
	     tx_desc, CFG__POW2, "Descriptors per transmit queue (power of two)."),
	EKEY(S_PORT, struct cfg_port, "mtu", CFG__UINT, 68, 9600, "1500", mtu, 0,
	     "Port MTU, bytes."),
	{S_PORT, "mac", CFG__MAC, 0, 0, "00:00:00:00:00:00",
	 offsetof(struct cfg_port, mac), FSZ(struct cfg_port, mac),
	 "MAC address to set; 00:00:00:00:00:00 = keep the port's own.",
	 CFG__HAS_AUX, NULL, offsetof(struct cfg_port, mac_set)},
	{S_PORT, "ip", CFG__IPV4, 0, 0, "0.0.0.0/32",
	 offsetof(struct cfg_port, ip), FSZ(struct cfg_port, ip),
	 "This node's IPv4 address on the port, with an optional prefix "
	 "length, e.g. \"10.0.0.1/24\"; 0.0.0.0 = none.",
	 CFG__HAS_AUX, NULL, offsetof(struct cfg_port, prefix_len)},

	/* [peer.N] */
	EKEY(S_PEER, struct cfg_peer, "ip", CFG__IPV4, 0, 0, "0.0.0.0", ip,
	     CFG__REQUIRED | CFG__HOST,
	     "The peer's dataplane IPv4 address (required)."),
	EKEY(S_PEER, struct cfg_peer, "mac", CFG__MAC, 0, 0,
	     "00:00:00:00:00:00", mac, 0,
	     "The peer's dataplane MAC; 00:00:00:00:00:00 = resolve by ARP."),
	EKEY(S_PEER, struct cfg_peer, "control", CFG__HOSTPORT, 0, 0, "",
	     control, CFG__EMPTY_OK,
	     "The peer's control-plane address \"ip:port\"; \"\" = none."),
	EKEY(S_PEER, struct cfg_peer, "port", CFG__UINT, 0, CFG_MAX_PORTS - 1,
	     "0", port, 0, "Which local [port.N] reaches this peer."),

	/* [actors] */
	UINT(S_ACTORS, "max_actors", 1, 1048576, "4096", actors.max_actors,
	     "Actor table slots per node."),
	KEY(S_ACTORS, "mailbox_capacity", CFG__UINT, 2, 65536, "256",
	    actors.mailbox_capacity, CFG__POW2,
	    "Messages a mailbox holds before senders see backpressure "
	    "(power of two)."),
	UINT(S_ACTORS, "reductions", 1, 1000000, "2000", actors.reductions,
	     "Messages an actor may handle before it yields its lcore."),
	UINT(S_ACTORS, "message_pool", 64, 16777216, "65536",
	     actors.message_pool, "Messages preallocated per node."),
	UINT(S_ACTORS, "timers", 16, 1048576, "4096", actors.timers,
	     "Timer slots per actor worker (each lcore or thread hosting actors)."),
	UINT(S_ACTORS, "remote_links", 16, 1048576, "1024", actors.remote_links,
	     "Links and monitors between local actors and actors of one peer "
	     "node (a table per peer; full: -ENOSPC)."),
	ENUM(S_ACTORS, "carrier", carrier_names, "auto", actors.carrier,
	     "What carries messages to actors of other nodes: `dpdk` (the "
	     "reliable transport on the ports), `tcp` or `rdma` (that net "
	     "provider, docs/remote.md \"Carriers\"); `auto`: `dpdk` when "
	     "the node has a port with an IP, else the provider of [transport] "
	     "kind when it is `tcp` or `rdma`."),

	/* [transport] */
	ENUM(S_TRANSPORT, "kind", transport_names, "dpdk", transport.kind,
	     "Net provider collectives use: `dpdk` (reliable transport over "
	     "the ports), `tcp` (kernel sockets), `rdma` (verbs; needs [rdma] "
	     "enabled)."),
	UINT(S_TRANSPORT, "tcp_port", 1, U16, "7402", transport.tcp_port,
	     "TCP port of the tcp provider."),
	KEY(S_TRANSPORT, "tcp_congestion", CFG__STRING, 0, 0, "cubic",
	    transport.tcp_congestion, CFG__EMPTY_OK,
	    "TCP congestion control of the tcp provider's sockets (TCP_CONGESTION), e.g. cubic, reno, dctcp; one the kernel refuses (absent, or not in net.ipv4.tcp_allowed_congestion_control for an unprivileged process) falls back to reno, said once on stderr. \"\": the system's default. Not BBR by default: its pacing spaces out a collective's bursts, and once a connection has carried large messages it paces smaller ones too (4 nodes on loopback, 1 MiB all-reduce: busbw 0.88 - 0.97 GB/s under BBR, 1.38 - 1.51 under reno or cubic)."),
	KEY(S_TRANSPORT, "window", CFG__UINT, 64, 16384, "256",
	    transport.window, CFG__POW2,
	    "Frames in flight per peer (credits), a power of two."),
	UINT(S_TRANSPORT, "rto_us_min", 10, 60000000, "1000",
	     transport.rto_us_min, "Retransmission timeout floor, us."),
	UINT(S_TRANSPORT, "rto_us_max", 10, 60000000, "200000",
	     transport.rto_us_max,
	     "Retransmission timeout ceiling, us (>= rto_us_min)."),
	UINT(S_TRANSPORT, "ack_delay_us", 0, 100000, "50",
	     transport.ack_delay_us, "Delay before a standalone ack, us."),
	UINT(S_TRANSPORT, "max_message_mb", 1, 4096, "256",
	     transport.max_message_mb, "Largest message reassembled, MiB."),
	UINT(S_TRANSPORT, "peer_timeout_ms", 10, 3600000, "5000",
	     transport.peer_timeout_ms,
	     "A peer that was up and then acknowledges nothing this long is down, ms (one never heard from waits connect_timeout_ms)."),
	UINT(S_TRANSPORT, "connect_timeout_ms", 10, 3600000, "60000",
	     transport.connect_timeout_ms,
	     "Messages for a peer never heard from (not started yet) wait this long before they fail and it is down, ms."),
	UINT(S_TRANSPORT, "link_down_ms", 0, 3600000, "100",
	     transport.link_down_ms,
	     "A port whose link was up and has then been down this long declares the peers it reaches ([peer.N] port) down at once, as peer_timeout_ms would later: their pending messages fail with peer down and the collectives that need them fail; ms, the links are looked at every 20 ms. A memif link goes down when the process at its other end exits or is killed. 0: the link state is ignored."),
	KEY(S_TRANSPORT, "stream_min_kb", CFG__UINT, 0, 4194304, "auto",
	    transport.stream_min_kb, CFG__AUTO,
	    "Messages of at least this many KiB travel in fragments of whole 64-byte cache lines and are reassembled with streaming (non-temporal) stores, never received as their frames: they neither evict the working set from the caches nor read their destination first; their sender prefetches them a few fragments ahead when fragments are under 4 KB. 0: never. `auto`: an eighth of this machine's last-level cache, at least 1024 (4096 where the machine does not report its caches); smaller messages stay in the cache, where streaming them would send them to memory and back."),
	KEY(S_TRANSPORT, "arena_prefault", CFG__BOOL, 0, 0, "false",
	    transport.arena_prefault, 0,
	    "Map in each lane's reassembly arena (max_message plus four windows of frames) at start-up, before the loops run, so that no lcore loop takes a page fault in it when large messages first arrive; that memory is committed from the start and start-up takes longer (up to ~0.6 s per 257 MiB arena on the 2-CPU VM). false: each page on first use, inside the loop (there up to ~2.4 ms per MiB the first time a large message lands on it)."),

	/* [fault] */
	KEY(S_FAULT, "drop_rate", CFG__DOUBLE, 0, 1, "0", fault.drop_rate, 0,
	    "Probability that a transmitted frame is dropped."),
	KEY(S_FAULT, "dup_rate", CFG__DOUBLE, 0, 1, "0", fault.dup_rate, 0,
	    "Probability that a transmitted frame is sent twice."),
	KEY(S_FAULT, "reorder_rate", CFG__DOUBLE, 0, 1, "0",
	    fault.reorder_rate, 0,
	    "Probability that a transmitted frame is held back and sent late."),
	KEY(S_FAULT, "seed", CFG__UINT, 0, 18446744073709551615.0, "1",
	    fault.seed, 0, "Seed of the injection's random generator."),

	/* [coll] */
	UINT(S_COLL, "channels", 1, 64, "1", coll.channels,
	     "Parallel rings per collective, split among the dataplane lanes "
	     "(one per [eal] lcores core after the first); the dpdk provider "
	     "carries at most 8 per lane."),
	UINT(S_COLL, "chunk_kb", 1, 65536, "256", coll.chunk_kb,
	     "Pipeline chunk size, KiB."),
	UINT(S_COLL, "timeout_ms", 1, 3600000, "5000", coll.timeout_ms,
	     "A collective whose peer is lost fails within this, ms."),
	UINT(S_COLL, "small_max_kb", 0, 1024, "4", coll.small_max_kb,
	     "An all-reduce of at most this many KiB runs as an all-gather of "
	     "the whole vectors and a reduction in rank order (n-1 steps "
	     "instead of 2(n-1): latency-bound sizes); 0: always the ring. "
	     "The same on every node."),
	KEY(S_COLL, "stream_min_kb", CFG__UINT, 0, 4194304, "auto",
	    coll.stream_min_kb, CFG__AUTO,
	    "A collective whose receive buffer is at least this many KiB has "
	    "the blocks it receives into that buffer (all-gather steps, "
	    "broadcast) written past the caches where the provider copies "
	    "them (dpdk: streaming stores, no read for ownership of the "
	    "buffer); 0: never. `auto`: as [transport] stream_min_kb."),

	/* [rdma] */
	KEY(S_RDMA, "enabled", CFG__BOOL, 0, 0, "false", rdma.enabled, 0,
	    "Open an RDMA device at start-up: zbmd run checks that the device, port and GID below open before anything else starts, and exits 1 with the reason when they do not (zbmd rdma-info lists what the machine has)."),
	KEY(S_RDMA, "device", CFG__STRING, 0, 0, "", rdma.device,
	    CFG__EMPTY_OK | CFG__NAME_CHARS,
	    "Verbs device name (ibv_devices), e.g. \"mlx5_0\"; \"\" = the first."),
	UINT(S_RDMA, "port", 1, 255, "1", rdma.port, "Device port number."),
	UINT(S_RDMA, "gid_index", 0, 255, "255", rdma.gid_index,
	     "GID table index; 255 = pick: RoCE v2 IPv4-mapped, then RoCE v2, "
	     "RoCE v1, any non-zero (index 0 is RoCE v1 link-local on most NICs)."),
	KEY(S_RDMA, "mtu", CFG__UINT, 256, 4096, "1024", rdma.mtu, CFG__POW2,
	    "Path MTU: 256, 512, 1024, 2048 or 4096."),
	UINT(S_RDMA, "signal_every", 1, 4096, "64", rdma.signal_every,
	     "Request a completion every this many sends."),
	UINT(S_RDMA, "inline_max", 0, 1024, "64", rdma.inline_max,
	     "Largest send posted inline, bytes."),
	UINT(S_RDMA, "recv_pool", 16, 1048576, "1024", rdma.recv_pool,
	     "Receive buffers posted per queue pair."),

	/* [gpu] */
	ENUM(S_GPU, "backend", gpu_names, "auto", gpu.backend,
	     "GPU backend; `auto` picks the first available of cuda, hip, "
	     "vulkan, cpu."),
	UINT(S_GPU, "device", 0, 255, "0", gpu.device, "Device index."),
	UINT(S_GPU, "pool_mb", 0, 1048576, "256", gpu.pool_mb,
	     "Device memory preallocated for tensors and buffers, MiB."),
	UINT(S_GPU, "cpu_threads", 0, 1024, "0", gpu.cpu_threads,
	     "cpu backend: BLAS threads (OpenBLAS, for the whole process); "
	     "0 = its default, one per CPU."),

	/* [cluster] */
	KEY(S_CLUSTER, "id", CFG__UINT, 0, U32, "0", cluster.id, CFG__REQUIRED,
	    "Cluster id, the same on every node; frames and control messages "
	    "of another cluster are rejected (required)."),
	KEY(S_CLUSTER, "seeds", CFG__SEEDS, 0, 0, "", cluster.seeds,
	    CFG__EMPTY_OK,
	    "Control addresses to join through, \"ip:port, ip:port\" (at most "
	    "16)."),
	KEY(S_CLUSTER, "psk_file", CFG__STRING, 0, 0, "", cluster.psk_file,
	    CFG__EMPTY_OK,
	    "File holding the pre-shared key that authenticates control "
	    "messages; \"\" = unauthenticated (tests only)."),

	/* [control] */
	KEY(S_CONTROL, "listen", CFG__HOSTPORT, 0, 0, "0.0.0.0:7400",
	    control.listen, 0, "Address of the node's heartbeats (UDP) and Raft (TCP): both on this port."),
	UINT(S_CONTROL, "heartbeat_ms", 1, 60000, "100", control.heartbeat_ms,
	     "Heartbeat interval, ms."),
	KEY(S_CONTROL, "phi_threshold", CFG__DOUBLE, 0.1, 100, "8",
	    control.phi_threshold, 0,
	    "Suspect a peer when its phi (accrual failure detector) exceeds "
	    "this."),
	UINT(S_CONTROL, "phi_window", 2, 1024, "200", control.phi_window,
	     "Heartbeat intervals remembered per peer."),
	UINT(S_CONTROL, "phi_min_std_ms", 1, 60000, "50",
	     control.phi_min_std_ms,
	     "Floor of the interval standard deviation, ms."),
	UINT(S_CONTROL, "acceptable_pause_ms", 0, 600000, "500",
	     control.acceptable_pause_ms,
	     "Pause tolerated before phi rises, ms."),
	KEY(S_CONTROL, "raft_dir", CFG__STRING, 0, 0, "/var/lib/zbmd/raft",
	    control.raft_dir, 0, "Directory of the Raft log and snapshots."),
	UINT(S_CONTROL, "election_timeout_ms", 10, 600000, "1000",
	     control.election_timeout_ms,
	     "Raft election timeout, ms (> raft_heartbeat_ms)."),
	UINT(S_CONTROL, "raft_heartbeat_ms", 1, 60000, "100",
	     control.raft_heartbeat_ms, "Raft leader heartbeat, ms."),
	UINT(S_CONTROL, "snapshot_threshold", 16, 100000000, "1024",
	     control.snapshot_threshold,
	     "Raft log entries between snapshots."),
	KEY(S_CONTROL, "admin_listen", CFG__HOSTPORT, 0, 0, "127.0.0.1:7401",
	    control.admin_listen, CFG__EMPTY_OK,
	    "TCP address of the admin API (status, bench); \"\" = off."),
	ENUM(S_CONTROL, "enabled", control_mode_names, "auto", control.enabled,
	     "Whether `zbmd run` starts the control thread: `on` always "
	     "(refuse to start when it cannot), `off` never (the dataplane "
	     "alone: no membership, epoch, /metrics or admin API), `auto` "
	     "when this node has a concrete control address: `listen` is not "
	     "the wildcard 0.0.0.0, or [peer.<node id>] control names one. "
	     "`zbmd control` ignores it."),

	/* [metrics] */
	KEY(S_METRICS, "listen", CFG__HOSTPORT, 0, 0, "", metrics.listen,
	    CFG__EMPTY_OK,
	    "HTTP address serving Prometheus /metrics, e.g. "
	    "\"127.0.0.1:9464\"; \"\" = off."),
};
const unsigned cfg__nkeys = ZB_ARRAY_LEN(cfg__keys);

int cfg__section_find(const char *name, size_t len)
{
	ZB_ASSERT(name != NULL);
	for (unsigned i = 0; i < cfg__nsections; i++)
		if (strlen(cfg__sections[i].name) == len &&
		    memcmp(cfg__sections[i].name, name, len) == 0)
			return (int)i;
	return -1;
}

int cfg__key_find(unsigned section, const char *key)
{
	ZB_ASSERT(section < cfg__nsections);
	ZB_ASSERT(key != NULL);
	for (unsigned i = 0; i < cfg__nkeys; i++)
		if (cfg__keys[i].section == section &&
		    strcmp(cfg__keys[i].key, key) == 0)
			return (int)i;
	return -1;
}

void *cfg__base(struct zb_config *cfg, const struct cfg__key *k, unsigned idx)
{
	const struct cfg__section *s = &cfg__sections[k->section];

	ZB_ASSERT(cfg != NULL);
	if (!s->indexed) {
		ZB_ASSERT(idx == 0);
		return cfg;
	}
	ZB_ASSERT(idx < s->count);
	return (char *)cfg + s->array_offset + (size_t)idx * s->elem_size;
}

const void *cfg__cbase(const struct zb_config *cfg, const struct cfg__key *k,
		       unsigned idx)
{
	return cfg__base((struct zb_config *)cfg, k, idx);
}
