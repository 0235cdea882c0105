/* zbmd/config.h — the node configuration (INI), parsed by config/.
 *
 * The whole schema is one table in config/schema.c: {section, key, type, min,
 * max, default, offset, doc}. The parser, the validation, `zbmd check-config`
 * output and docs/config.md all come from it. This struct is where the table
 * stores values; every field has a default except where marked "required".
 *
 * Thread-safety: a loaded config is read-only and may be shared by threads.
 */
#ifndef ZBMD_CONFIG_H
#define ZBMD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "zbmd/common.h"

#define CFG_MAX_PORTS   8
#define CFG_MAX_NODES   64     /* peers per cluster, node ids 0..CFG_MAX_NODES-1 */
#define CFG_MAX_LCORES  128
#define CFG_MAX_SEEDS   16
#define CFG_STR         256
/* An integer key written `auto` (the row says which may be): the consumer
 * works the value out on the machine it runs on. */
#define CFG_AUTO        UINT32_MAX

enum cfg_idle_policy { CFG_IDLE_POLL = 0, CFG_IDLE_ADAPTIVE };
/* [dataplane] mbuf_pool: how a port's mempool keeps its free mbufs. */
enum cfg_mbuf_pool { CFG_MBUF_POOL_STACK = 0, CFG_MBUF_POOL_RING };
enum cfg_transport { CFG_TRANSPORT_DPDK = 0, CFG_TRANSPORT_TCP, CFG_TRANSPORT_RDMA };
/* [actors] carrier: what carries remote actor messages. */
enum cfg_carrier { CFG_CARRIER_AUTO = 0, CFG_CARRIER_DPDK, CFG_CARRIER_TCP, CFG_CARRIER_RDMA };
enum cfg_gpu_backend { CFG_GPU_AUTO = 0, CFG_GPU_CPU, CFG_GPU_CUDA, CFG_GPU_HIP, CFG_GPU_VULKAN };
/* [control] enabled: whether `zbmd run` starts the control thread. */
enum cfg_control_mode { CFG_CONTROL_AUTO = 0, CFG_CONTROL_ON, CFG_CONTROL_OFF };

struct cfg_port {                 /* [port.N] */
	bool present;
	char pci[CFG_STR];        /* PCI address "0000:3b:00.0", or "" */
	char vdev[CFG_STR];       /* DPDK vdev string "net_af_packet0,iface=veth0", or "" */
	uint16_t rx_queues, tx_queues;
	uint16_t rx_desc, tx_desc;
	uint16_t mtu;             /* 68..9600 */
	uint8_t mac[6];           /* 00:00:00:00:00:00 = use the port's own */
	bool mac_set;
	uint32_t ip;              /* IPv4, network byte order */
	uint8_t prefix_len;       /* from "10.0.0.1/24"; 32 when no prefix given */
};

struct cfg_peer {                 /* [peer.N], N = node id */
	bool present;
	uint8_t mac[6];
	uint32_t ip;              /* dataplane IPv4, network byte order */
	char control[CFG_STR];    /* control-plane address "ip:port", or "" */
	uint16_t port;            /* which local port reaches it (index into ports) */
};

struct zb_config {
	char path[CFG_STR];       /* file it came from ("<string>" otherwise) */

	struct {                  /* [node] */
		uint16_t id;      /* required */
		char name[64];
	} node;

	struct {                  /* [eal] */
		char lcores[CFG_STR];          /* "0-3" or "0,2,4" (validated) */
		uint16_t lcore_list[CFG_MAX_LCORES];
		uint16_t lcore_count;          /* parsed from lcores */
		uint32_t memory_mb;
		bool hugepages;
		char file_prefix[64];
		char extra_args[CFG_STR];
		uint32_t log_level;            /* 1..8, rte_log levels */
	} eal;

	struct {                  /* [dataplane] */
		enum cfg_idle_policy idle;
		uint32_t idle_spin_us;         /* adaptive: spin this long first */
		uint32_t idle_sleep_us_max;    /* adaptive: back-off ceiling */
		uint32_t mbufs;                /* mempool size per port */
		uint32_t mbuf_cache;
		enum cfg_mbuf_pool mbuf_pool;  /* last freed, first reused, or FIFO */
		uint16_t burst;
		uint16_t udp_port;             /* zbmd wire UDP port */
	} dp;

	struct cfg_port ports[CFG_MAX_PORTS];
	uint16_t port_count;      /* ports[0..port_count-1], all present (no gaps) */

	struct cfg_peer peers[CFG_MAX_NODES];  /* indexed by node id; check present */
	uint16_t peer_count;      /* how many are present; may include this node */

	struct {                  /* [actors] */
		uint32_t max_actors;
		uint32_t mailbox_capacity;     /* power of two */
		uint32_t reductions;
		uint32_t message_pool;         /* messages preallocated per node */
		uint32_t timers;               /* timer slots */
		uint32_t remote_links;         /* remote links + monitors per peer */
		enum cfg_carrier carrier;      /* remote messages: transport or provider */
	} actors;

	struct {                  /* [transport] reliable transport (dpdk) */
		enum cfg_transport kind;       /* what collectives use */
		uint16_t tcp_port;             /* tcp provider port */
		char tcp_congestion[CFG_STR];  /* tcp provider sockets' algorithm, "" = system's */
		uint32_t window;               /* frames in flight per peer (credits) */
		uint32_t rto_us_min, rto_us_max;
		uint32_t ack_delay_us;
		uint32_t max_message_mb;       /* reassembly limit */
		uint32_t peer_timeout_ms;      /* unacked this long: peer down */
		uint32_t connect_timeout_ms;   /* never heard from this long: down */
		uint32_t link_down_ms;         /* port link down this long: its peers down (0 off) */
		uint32_t stream_min_kb;        /* streaming stores from here; 0: never;
					* CFG_AUTO: zb_stream_min_for_llc() */
		bool arena_prefault;           /* map the arenas in from start-up */
	} transport;

	struct {                  /* [fault] deterministic injection (tests) */
		double drop_rate, dup_rate, reorder_rate;
		uint64_t seed;
	} fault;

	struct {                  /* [coll] collectives */
		uint16_t channels;
		uint32_t chunk_kb;
		uint32_t timeout_ms;           /* peer lost: fail within this */
		uint32_t small_max_kb;         /* all-gather + local reduce up to this */
		uint32_t stream_min_kb;        /* receives past the caches from here;
					* 0: never; CFG_AUTO as above */
	} coll;

	struct {                  /* [rdma] */
		bool enabled;
		char device[64];               /* "" = first device */
		uint8_t port;
		uint8_t gid_index;
		uint16_t mtu;                  /* 256..4096 */
		uint16_t signal_every;
		uint16_t inline_max;
		uint32_t recv_pool;
	} rdma;

	struct {                  /* [gpu] */
		enum cfg_gpu_backend backend;
		uint16_t device;
		uint32_t pool_mb;
		uint32_t cpu_threads;
	} gpu;

	struct {                  /* [cluster] */
		uint32_t id;                   /* required */
		char seeds[CFG_MAX_SEEDS][CFG_STR];  /* "ip:port" */
		uint16_t seed_count;
		char psk_file[CFG_STR];
	} cluster;

	struct {                  /* [control] */
		char listen[CFG_STR];          /* "ip:port" UDP heartbeats + raft */
		uint32_t heartbeat_ms;
		double phi_threshold;
		uint32_t phi_window;
		uint32_t phi_min_std_ms;
		uint32_t acceptable_pause_ms;
		char raft_dir[CFG_STR];
		uint32_t election_timeout_ms;
		uint32_t raft_heartbeat_ms;
		uint32_t snapshot_threshold;
		char admin_listen[CFG_STR];    /* "127.0.0.1:port" */
		enum cfg_control_mode enabled; /* zbmd run: auto, on, off */
	} control;

	struct {                  /* [metrics] */
		char listen[CFG_STR];          /* "ip:port", "" = off */
	} metrics;
};

/* Diagnostics of one load. Each is one line "FILE:LINE: what is wrong (what
 * was expected)". msg holds the first; list holds every one found (in file
 * order, then the checks that span sections), each ending in '\n', up to
 * CFG_ERROR_LIST bytes (a last line says how many were left out). */
#define CFG_ERROR_LIST  8192
struct cfg_error {
	char msg[512];
	unsigned count;           /* diagnostics found, including any left out */
	char list[CFG_ERROR_LIST];
};

/* Fill every field with its default. Never fails. */
void cfg_set_defaults(struct zb_config *cfg);

/* Parse and validate an INI file / string into cfg (defaults first).
 * Returns 0; ZB_ERR_CONFIG (a negative code) with err->msg naming the first
 * problem as FILE:LINE and err->list every problem found; -errno when the
 * file cannot be opened (err->msg says so); -ENOMEM. cfg is unspecified on
 * error. Thread-safe (loads are serialised); meant for start-up, it
 * allocates. */
int cfg_load_file(struct zb_config *cfg, const char *path, struct cfg_error *err);
/* Prints err's diagnostics to f, one "PREFIX: FILE:LINE: ..." line each
 * (err->msg alone where the list is empty: a file that did not open). */
void cfg_error_print(FILE *f, const char *prefix, const struct cfg_error *err);

/* The node's dataplane lanes: one per [eal] lcores core after the first (the
 * main lcore), or the main lcore alone (dataplane/node.c node_lcores); the
 * lanes a collective host spreads channels over (at most 16); the most
 * [coll] channels the dpdk net provider takes on COLL_LANES of them (8 a
 * lane, channels / lanes each: 8 with one lane, 9L - 1 with L). */
unsigned cfg_dataplane_lanes(const struct zb_config *cfg);
unsigned cfg_coll_lanes(const struct zb_config *cfg);
unsigned cfg_dpdk_channels_max(unsigned coll_lanes);
int cfg_load_string(struct zb_config *cfg, const char *text, const char *name,
		    struct cfg_error *err);
/* The same from an open stream (stdin), named `name` in messages; at most
 * 64 MiB is read. */
int cfg_load_stream(struct zb_config *cfg, FILE *in, const char *name,
		    struct cfg_error *err);

/* Print the effective configuration (defaults included) as INI. */
void cfg_dump(const struct zb_config *cfg, FILE *out);

/* A stream_min_kb key ([transport], [coll]) in bytes: CFG_AUTO worked out
 * from this machine's last-level cache (zb_stream_min_for_llc). */
static inline uint64_t cfg_stream_min_bytes(uint32_t kb)
{
	return kb == CFG_AUTO ? zb_stream_min_for_llc(zb_llc_bytes())
			      : (uint64_t)kb << 10;
}

/* Parsers shared with the CLI and tests: 0 or -EINVAL; outputs are written
 * only on success.
 *  mac:    "aa:bb:cc:dd:ee:ff" (or '-' separators), hex, case-insensitive.
 *  ipv4:   "a.b.c.d" or, when prefix_len is not NULL, "a.b.c.d/N" (N 0..32;
 *          32 when absent). Decimal octets, no leading zeros.
 *  lcores: "0-3,5": ids and ranges, each id < CFG_MAX_LCORES, no repeats, at
 *          most max ids; list keeps the written order.
 *  pci:    "DDDD:BB:DD.F" or "BB:DD.F"; canon gets "dddd:bb:dd.f" (lower case,
 *          domain 0000 when absent); len >= 13.
 *  hostport: "host:port" with host an IPv4 address, a DNS name or "[IPv6]",
 *          port 1..65535; host gets the host part (brackets removed). */
int cfg_parse_mac(const char *s, uint8_t mac[6]);
int cfg_parse_ipv4(const char *s, uint32_t *ip_be, uint8_t *prefix_len);
int cfg_parse_lcores(const char *s, uint16_t *list, uint16_t max, uint16_t *count);
int cfg_parse_pci(const char *s, char *canon, size_t len);
int cfg_parse_hostport(const char *s, char *host, size_t hostlen, uint16_t *port);

/* Writing a value into an INI file that this loader reads back as it was:
 * cfg_value_unwritable() says why no way of writing v reads back as v (a
 * control character: a line break would start another line; '"' followed
 * by blanks and ';' or '#': in quotes the value would end there), or NULL;
 * cfg_value_needs_quotes() is true when v must be written in double quotes
 * (empty, a leading ';', '#' or '"', blanks at either end, " ;" or " #"
 * inside: outside quotes a comment starts there; the loader removes
 * exactly one pair). */
const char *cfg_value_unwritable(const char *v);
bool cfg_value_needs_quotes(const char *v);

/* Write docs/config.md (Markdown, every section and key) to out. */
void cfg_write_doc(FILE *out);

/* CLI commands (cli/main.c): `zbmd check-config FILE.ini` (exit 0 and the
 * effective configuration on stdout; exit 2 and every error on stderr) and
 * `zbmd config-doc` (docs/config.md on stdout). */
int cfg_cmd_check_config(int argc, char **argv);
int cfg_cmd_config_doc(int argc, char **argv);

/* `check-config --files`: the checks of the files a good config names,
 * which config/ cannot make itself, set by the program that links the
 * module that can (cli/main.c: the control plane's psk_file, read as `zbmd
 * run` will read it). 0, or the reason in err ("[cluster] psk_file
 * /etc/zbmd/psk: No such file or directory"); check-config then exits 2
 * with "FILE: reason". NULL: none to make. */
extern int (*cfg_check_files)(const struct zb_config *cfg, char *err, size_t errlen);

#endif /* ZBMD_CONFIG_H */
