/* tests/config/test_load.c — cfg_set_defaults, cfg_load_string/file, the
 * error list, inih's comment/continuation behaviour as configured, and the
 * round trip cfg_dump -> cfg_load_string -> the same struct. */
#include "tap.h"
#include "zbmd/common.h"
#include "zbmd/config.h"
#include "round_trip.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static struct zb_config a, b;
static struct cfg_error err;

#define REQUIRED "[node]\nid = 1\n[cluster]\nid = 2\n"

static int load(const char *text)
{
	return cfg_load_string(&a, text, "t.ini", &err);
}

static void test_defaults(void)
{
	struct zb_config d;

	cfg_set_defaults(&d);
	ok(d.actors.mailbox_capacity == 256 && d.actors.reductions == 2000,
	   "defaults: mailbox_capacity 256, reductions 2000");
	ok(d.coll.timeout_ms == 5000 && d.control.heartbeat_ms == 100 &&
		   d.control.phi_threshold == 8.0,
	   "defaults: coll.timeout_ms 5000, heartbeat 100 ms, phi 8");
	ok(d.dp.idle == CFG_IDLE_POLL && d.transport.kind == CFG_TRANSPORT_DPDK &&
		   d.gpu.backend == CFG_GPU_AUTO && d.dp.mbuf_pool == CFG_MBUF_POOL_STACK,
	   "defaults: idle poll, transport dpdk, gpu auto, stack mbuf pools");
	ok(d.eal.memory_mb == 1024 && d.eal.hugepages &&
		   d.eal.lcore_count == 1 && d.eal.lcore_list[0] == 0 &&
		   strcmp(d.eal.file_prefix, "zbmd") == 0,
	   "defaults: eal 1024 MiB, hugepages, lcore 0, prefix zbmd");
	ok(d.port_count == 0 && d.peer_count == 0 && !d.ports[0].present &&
		   d.ports[7].mtu == 1500 && d.ports[3].rx_desc == 1024 &&
		   d.ports[0].prefix_len == 32,
	   "defaults: no ports or peers; port fields defaulted in every slot");
	ok(d.dp.udp_port == 7403 && d.transport.tcp_port == 7402 &&
		   strcmp(d.control.listen, "0.0.0.0:7400") == 0 &&
		   d.metrics.listen[0] == '\0',
	   "defaults: ports 7400..7403, metrics off");
	ok(cfg_round_trips(&d, "defaults"), "defaults round trip through cfg_dump");
}

static void test_values(void)
{
	int rc = load(REQUIRED
		      "[eal]\nlcores = 2-3,0\n"
		      "[port.0]\nvdev = net_null0\nip = 10.0.0.7/24\n"
		      "mac = 02:00:00:00:00:07\n"
		      "[port.1]\npci = 3b:00.0\n"
		      "[peer.9]\nip = 10.0.0.9\nport = 1\nmac = 02:00:00:00:00:09\n"
		      "[peer.0]\nip = 10.0.0.10\ncontrol = 10.1.0.10:7400\n"
		      "[cluster.x]\n");

	ok(rc == ZB_ERR_CONFIG && err.count == 1 &&
		   strstr(err.msg, "t.ini:20: unknown section [cluster.x]") == err.msg,
	   "one bad section among good ones: only it is reported");
	rc = load(REQUIRED
		  "[eal]\nlcores = 2-3,0\n"
		  "[port.0]\nvdev = net_null0\nip = 10.0.0.7/24\n"
		  "mac = 02:00:00:00:00:07\n"
		  "[port.1]\npci = 3b:00.0\n"
		  "[peer.9]\nip = 10.0.0.9\nport = 1\nmac = 02:00:00:00:00:09\n"
		  "[peer.0]\nip = 10.0.0.10\ncontrol = 10.1.0.10:7400\n");
	is_int(rc, 0, "a full file loads");
	ok(a.node.id == 1 && a.cluster.id == 2 && strcmp(a.path, "t.ini") == 0,
	   "required keys and path stored");
	ok(a.eal.lcore_count == 3 && a.eal.lcore_list[0] == 2 &&
		   a.eal.lcore_list[2] == 0 && strcmp(a.eal.lcores, "2-3,0") == 0,
	   "lcores parsed into lcore_list in written order");
	ok(a.port_count == 2 && a.ports[0].present && a.ports[1].present &&
		   !a.ports[2].present,
	   "port_count counts [port.0] and [port.1]");
	ok(memcmp(&a.ports[0].ip, "\x0a\0\0\x07", 4) == 0 &&
		   a.ports[0].prefix_len == 24 && a.ports[0].mac_set &&
		   a.ports[0].mac[5] == 7 && !a.ports[1].mac_set,
	   "port ip (network order), prefix, mac and mac_set");
	ok(strcmp(a.ports[1].pci, "0000:3b:00.0") == 0 &&
		   a.ports[1].vdev[0] == '\0',
	   "pci stored in canonical form");
	ok(a.peer_count == 2 && a.peers[9].present && a.peers[9].port == 1 &&
		   a.peers[0].present && !a.peers[1].present &&
		   strcmp(a.peers[0].control, "10.1.0.10:7400") == 0,
	   "peers indexed by node id, peer_count 2");
	ok(cfg_round_trips(&a, "full"), "full config round trip through cfg_dump");

	rc = load(REQUIRED "[cluster]\n");
	ok(rc == ZB_ERR_CONFIG && strstr(err.msg, "duplicate section [cluster]"),
	   "duplicate section found in a string too");
	rc = load(REQUIRED "[cluster]\nseeds = 10.0.0.1:1, 10.0.0.2:2\n");
	ok(rc == ZB_ERR_CONFIG, "seeds in a second [cluster] rejected");
	rc = load("[node]\nid = 1\n[cluster]\nid = 2\npsk_file = k\n"
		  "seeds = 10.0.0.1:1, 10.0.0.2:2 ,10.0.0.3:3\n");
	ok(rc == 0 && a.cluster.seed_count == 3 &&
		   strcmp(a.cluster.seeds[1], "10.0.0.2:2") == 0 &&
		   strcmp(a.cluster.seeds[2], "10.0.0.3:3") == 0,
	   "seeds split and trimmed");
	rc = load("[node]\nid = 1\n[cluster]\nid = 2\nseeds = "
		  "10.20.0.1:7400, 10.20.0.2:7400, 10.20.0.3:7400, "
		  "10.20.0.4:7400, 10.20.0.5:7400, 10.20.0.6:7400, "
		  "10.20.0.7:7400, 10.20.0.8:7400, 10.20.0.9:7400, "
		  "10.20.0.10:7400, 10.20.0.11:7400, 10.20.0.12:7400, "
		  "10.20.0.13:7400, 10.20.0.14:7400, 10.20.0.15:7400, "
		  "10.20.0.16:7400, 10.20.0.17:7400\n");
	ok(rc == ZB_ERR_CONFIG && strstr(err.msg, "too many seeds"),
	   "more than CFG_MAX_SEEDS seeds rejected");
	rc = load("[node]\nid = 1\n[cluster]\nid = 2\nseeds = "
		  "10.20.0.1:7400, 10.20.0.2:7400, 10.20.0.3:7400, "
		  "10.20.0.4:7400, 10.20.0.5:7400, 10.20.0.6:7400, "
		  "10.20.0.7:7400, 10.20.0.8:7400, 10.20.0.9:7400, "
		  "10.20.0.10:7400, 10.20.0.11:7400, 10.20.0.12:7400, "
		  "10.20.0.13:7400, 10.20.0.14:7400, 10.20.0.15:7400, "
		  "10.20.0.16:7400\npsk_file = /etc/zbmd/psk\n");
	ok(rc == 0 && a.cluster.seed_count == CFG_MAX_SEEDS &&
		   strcmp(a.cluster.seeds[15], "10.20.0.16:7400") == 0,
	   "16 seeds on one long line");
	ok(cfg_round_trips(&a, "seeds"), "16 seeds round trip");
	rc = load("[node]\nid = 1\n[cluster]\nid = 2\n[fault]\nseed = 0x10\n"
		  "drop_rate = 1\n[control]\nphi_threshold = 0.1\n");
	ok(rc == 0 && a.fault.seed == 16 && a.fault.drop_rate == 1.0 &&
		   a.control.phi_threshold == 0.1,
	   "hex integers and bounds of doubles inclusive");
	ok(cfg_round_trips(&a, "doubles"), "doubles round trip exactly");
	/* a peer behind a port without an ip: fine for this node's own
	 * [peer.N] and where no transport runs ([port.0] without an ip) */
	rc = load(REQUIRED "[port.0]\nvdev = net_null0\nip = 10.0.0.1/24\n"
		  "[port.1]\nvdev = net_null1\n[peer.1]\nip = 10.0.0.1\nport = 1\n");
	is_int(rc, 0, "own [peer.N] behind a port without an ip: loads");
	rc = load(REQUIRED "[port.0]\nvdev = net_null0\n[peer.3]\nip = 10.0.0.3\n");
	is_int(rc, 0, "no transport ([port.0] without an ip): a peer without mac loads");
	rc = load(REQUIRED "[port.0]\nvdev = net_null0\nip = 10.0.0.1/24\n"
		  "[port.1]\nvdev = net_null1\n[peer.3]\nip = 10.0.0.3\nport = 1\n");
	ok(rc == ZB_ERR_CONFIG && strstr(err.msg, "t.ini:12: [peer.3] is reached "
					 "through [port.1], which has no ip"),
	   "a peer behind a port without an ip and without its mac: refused at its port line");
}

static void test_syntax(void)
{
	int rc;

	rc = load(REQUIRED "[eal]\nmemory_mb = 512 ; comment\n"
		  "file_prefix = p1 # hash comment\nextra_args = a;b#c\n");
	ok(rc == 0 && a.eal.memory_mb == 512 &&
		   strcmp(a.eal.file_prefix, "p1") == 0 &&
		   strcmp(a.eal.extra_args, "a;b#c") == 0,
	   "inline ; and # comments need whitespace before them");
	rc = load(REQUIRED "[eal]\nextra_args = --a\n  --b\n");
	ok(rc == ZB_ERR_CONFIG && err.count == 1 &&
		   strcmp(err.msg, "t.ini:7: indented line is not a continuation "
				   "of the previous value (expected the whole "
				   "value on one line)") == 0 &&
		   strcmp(a.eal.extra_args, "--a") == 0,
	   "no multi-line continuation: the indented line is an error");
	rc = load(REQUIRED "[actors] mailbox_capacity = 77\n");
	ok(rc == ZB_ERR_CONFIG && err.count == 1 &&
		   strcmp(err.msg, "t.ini:5: text after section header '[actors]' "
				   "(expected [name] alone on its line, or a comment)") == 0 &&
		   a.actors.mailbox_capacity == 256,
	   "a key after a section header on its line is an error, not dropped");
	rc = load(REQUIRED "[actors]   ; a comment\n[eal] # another\nmemory_mb = 64\n");
	ok(rc == 0 && a.eal.memory_mb == 64, "a comment after a section header is fine");
	rc = load(REQUIRED "[eal]\nmemory_mb = 0x0x40\n");
	ok(rc == ZB_ERR_CONFIG && err.count == 1 && a.eal.memory_mb == 1024,
	   "0x0x40 is not a number (strtoull alone would read 64)");
	rc = load(REQUIRED "[eal]\nmemory_mb = 0x40\n");
	ok(rc == 0 && a.eal.memory_mb == 64, "0x40 is 64");
	rc = load(REQUIRED "[eal]\n    memory_mb = 256\n");
	ok(rc == 0 && a.eal.memory_mb == 256, "an indented key line is a key");
	rc = load("[node]\r\nid = 3\r\n[cluster]\r\nid = 4\r\n[eal]\r\n"
		  "file_prefix = crlf\r\n");
	ok(rc == 0 && a.node.id == 3 && strcmp(a.eal.file_prefix, "crlf") == 0,
	   "CRLF line endings");
	rc = load("\xEF\xBB\xBF[node]\nid = 3\n[cluster]\nid = 4\n");
	ok(rc == 0 && a.node.id == 3, "UTF-8 byte order mark skipped");
	rc = load("[node]\nid = 3\n[cluster]\nid = 4");
	ok(rc == 0 && a.cluster.id == 4, "no newline at the end of the file");
	rc = load(REQUIRED "[eal]\nhugepages = Off\n[rdma]\nenabled = YES\n");
	ok(rc == 0 && !a.eal.hugepages && a.rdma.enabled,
	   "booleans are case-insensitive");
	rc = load(REQUIRED "[eal]\nhugepages = 2\n");
	ok(rc == ZB_ERR_CONFIG && strstr(err.msg, "is not a boolean"),
	   "2 is not a boolean");
	rc = load("");
	ok(rc == ZB_ERR_CONFIG && err.count == 2 &&
		   strncmp(err.msg, "t.ini:0: missing section [node]", 31) == 0,
	   "empty text: both required keys missing, line 0");
	rc = cfg_load_string(&a, REQUIRED, NULL, &err);
	ok(rc == 0 && strcmp(a.path, "<string>") == 0, "NULL name is <string>");
	{
		/* A comment line of exactly CFG__LINE_MAX (4094) characters is
		 * read whole; one more is an error at its line. */
		static char text[5000], line[4200];

		memset(line, 'x', 4093);
		line[0] = ';';
		line[4093] = '\0';
		snprintf(text, sizeof(text), REQUIRED "%s\n[eal]\n"
			 "memory_mb = 256\n", line);
		rc = load(text);
		ok(rc == 0 && a.eal.memory_mb == 256 && strlen(line) == 4093,
		   "a line of 4093 characters is read whole");
		memset(line, 'x', 4094);
		line[0] = ';';
		line[4094] = '\0';
		snprintf(text, sizeof(text), REQUIRED "%s\n[eal]\n"
			 "memory_mb = 256\n", line);
		rc = load(text);
		ok(rc == 0 && a.eal.memory_mb == 256,
		   "a line of 4094 characters is read whole");
		memset(line, 'x', 4095);
		line[0] = ';';
		line[4095] = '\0';
		snprintf(text, sizeof(text), REQUIRED "%s\n[eal]\n"
			 "memory_mb = 256\n", line);
		rc = load(text);
		ok(rc == ZB_ERR_CONFIG && err.count == 1 &&
			   strcmp(err.msg, "t.ini:5: line is too long (expected "
					   "at most 4094 characters)") == 0 &&
			   a.eal.memory_mb == 256,
		   "a line of 4095 characters is an error at its line; the "
		   "next lines still count");
	}
}

static void test_errors(void)
{
	char text[8192];
	size_t o = 0;
	int rc;

	rc = load("[node]\nid = 99\n[eal]\nlcores = x\nbogus = 1\n[cluster]\n"
		  "id = 1\n");
	ok(rc == ZB_ERR_CONFIG && err.count == 3, "three errors counted");
	ok(strncmp(err.msg, "t.ini:2: node.id: 99 is out of range", 36) == 0,
	   "msg is the first error");
	ok(strcmp(err.list,
		  "t.ini:2: node.id: 99 is out of range (expected an integer "
		  "0..63)\n"
		  "t.ini:4: eal.lcores: 'x' is not a valid lcore list: 'x' is "
		  "not a core id (expected core ids and ranges like 0-3,5 (ids "
		  "0..127))\n"
		  "t.ini:5: unknown key 'bogus' in [eal] (expected one of "
		  "lcores, memory_mb, hugepages, file_prefix, extra_args, "
		  "log_level)\n") == 0,
	   "list holds every error, one per line, in file order");

	o += (size_t)snprintf(text, sizeof(text), "%s[actors]\n", REQUIRED);
	for (int i = 0; i < 400 && o < sizeof(text) - 16; i++)
		o += (size_t)snprintf(text + o, sizeof(text) - o, "k%d = 1\n", i);
	rc = load(text);
	ok(rc == ZB_ERR_CONFIG && err.count == 400 &&
		   strlen(err.list) < sizeof(err.list) &&
		   strstr(err.list, "more errors left out\n") != NULL,
	   "400 errors: all counted, the list is bounded and says so");

	rc = cfg_load_file(&a, "/nonexistent/zbmd.ini", &err);
	ok(rc == -ENOENT && err.count == 1 &&
		   strcmp(err.msg, "/nonexistent/zbmd.ini: cannot open: No such "
				   "file or directory (expected a readable INI "
				   "file)") == 0,
	   "missing file: -ENOENT and a message");
	snprintf(text, sizeof(text), "%s[actors]\ncarrier = rdma\n", REQUIRED);
	rc = load(text);
	ok(rc == ZB_ERR_CONFIG && err.count == 1 &&
		   strstr(err.msg, "actors.carrier = rdma but [rdma] is not enabled") != NULL,
	   "actors.carrier = rdma without [rdma] enabled is refused: %s", err.msg);
	snprintf(text, sizeof(text), "%s[actors]\ncarrier = udp\n", REQUIRED);
	rc = load(text);
	ok(rc == ZB_ERR_CONFIG && strstr(err.msg, "auto, dpdk, tcp, rdma") != NULL,
	   "an unknown carrier names the choices: %s", err.msg);
	snprintf(text, sizeof(text), "%s[actors]\ncarrier = tcp\n", REQUIRED);
	rc = load(text);
	ok(rc == 0 && a.actors.carrier == CFG_CARRIER_TCP, "actors.carrier = tcp loads");
	/* `auto`: only where the row allows it; a number still a number */
	cfg_set_defaults(&b);
	ok(b.transport.stream_min_kb == CFG_AUTO && b.coll.stream_min_kb == CFG_AUTO,
	   "stream_min_kb defaults to auto in [transport] and [coll]");
	snprintf(text, sizeof(text), "%s[transport]\nstream_min_kb = 2048\n"
		 "[coll]\nstream_min_kb = auto\n", REQUIRED);
	rc = load(text);
	ok(rc == 0 && a.transport.stream_min_kb == 2048 &&
		   a.coll.stream_min_kb == CFG_AUTO && cfg_round_trips(&a, "auto"),
	   "stream_min_kb = 2048 and = auto load and round-trip through the dump");
	/* text values the dump must quote to read them back as they were:
	 * a leading comment character (found by a coverage-guided fuzzer: the
	 * dump wrote `raft_dir = #/tmp/r`, which reads back as empty), spaces
	 * at either end, quotes of their own */
	snprintf(text, sizeof(text), "%s[control]\nraft_dir =#/tmp/r\n"
		 "[eal]\nextra_args = \";  --no-pci \"\n"
		 "[metrics]\nlisten = \"\"\n", REQUIRED);
	rc = load(text);
	ok(rc == 0 && strcmp(a.control.raft_dir, "#/tmp/r") == 0 &&
		   strcmp(a.eal.extra_args, ";  --no-pci ") == 0 &&
		   cfg_round_trips(&a, "quotes"),
	   "values starting with # or ;, or with spaces at the ends, round-trip "
	   "through the dump (rc %d: %s)", rc, rc ? err.msg : "");
	ok(cfg_value_needs_quotes("") && cfg_value_needs_quotes("#x") &&
		   cfg_value_needs_quotes(";x") && cfg_value_needs_quotes(" x") &&
		   cfg_value_needs_quotes("x\t") && cfg_value_needs_quotes("\"x\"") &&
		   !cfg_value_needs_quotes("a;b#c") && cfg_value_needs_quotes("\"x") &&
		   !cfg_value_needs_quotes("a b") && !cfg_value_needs_quotes("a\"b") &&
		   cfg_value_needs_quotes("a ;b") && cfg_value_needs_quotes("a\t#b") &&
		   !cfg_value_unwritable("a ;b") && !cfg_value_unwritable("a #b") &&
		   cfg_value_unwritable("a\" ;b") && cfg_value_unwritable("\"\t#") &&
		   cfg_value_unwritable("a\nb") && cfg_value_unwritable("\x7f") &&
		   !cfg_value_unwritable("a;b#c") && !cfg_value_unwritable(" #x") &&
		   !cfg_value_unwritable("a\";b") &&
		   !cfg_value_unwritable("#x") && !cfg_value_unwritable("\xc3\xa9"),
	   "which values need quotes, and which no quoting can hold");
	/* a quoted value keeps its " ;" and " #" (it was cut at the first,
	 * `"/etc/my` kept with its stray quote), a comment may follow it, and
	 * a quote never closed is an error at its line */
	rc = load("[node]\nid = 1\n[cluster]\nid = 2\npsk_file = \"/etc/my ;key\"\n"
		  "[control]\nraft_dir = \"/var/a #b\"  ; a comment \"x\"\n"
		  "[eal]\nextra_args = --no-pci ; bare: a comment\n");
	ok(rc == 0 && strcmp(a.cluster.psk_file, "/etc/my ;key") == 0 &&
		   strcmp(a.control.raft_dir, "/var/a #b") == 0 &&
		   strcmp(a.eal.extra_args, "--no-pci") == 0 &&
		   cfg_round_trips(&a, "quoted comment characters"),
	   "a quoted value keeps ' ;' and ' #', a comment after it is one, and "
	   "the dump writes it back (rc %d: %s)", rc, rc ? err.msg : "");
	rc = load("[node]\nid = 1\n[cluster]\nid = 2\npsk_file = \"/etc/my key\n"
		  "[eal]\nfile_prefix = \"a\" b ; c\n");
	ok(rc == ZB_ERR_CONFIG && err.count == 2 &&
		   strstr(err.list, "t.ini:5: the value of 'psk_file' opens with \" and "
				    "has no closing \" (expected") == err.list &&
		   strstr(err.list, "\nt.ini:7: the value of 'file_prefix' opens with"),
	   "an opening quote never closed: an error at its line (%s)", err.list);
	snprintf(text, sizeof(text), "%s[control]\nraft_dir = \"\"q\"\"\n", REQUIRED);
	rc = load(text);
	ok(rc == 0 && strcmp(a.control.raft_dir, "\"q\"") == 0 &&
		   cfg_round_trips(&a, "quoted quotes"),
	   "a value in quotes of its own round-trips through the dump");
	snprintf(text, sizeof(text), "%s[transport]\nstream_min_kb = autom\n", REQUIRED);
	rc = load(text);
	ok(rc == ZB_ERR_CONFIG &&
		   strstr(err.msg, "t.ini:6: transport.stream_min_kb: 'autom' is not an "
				   "unsigned integer (expected an integer 0..4194304 or "
				   "auto)") != NULL,
	   "a misspelt auto: file:line and what was expected: %s", err.msg);
	snprintf(text, sizeof(text), "%s[transport]\nwindow = auto\n", REQUIRED);
	rc = load(text);
	ok(rc == ZB_ERR_CONFIG && strstr(err.msg, "window: 'auto' is not") != NULL,
	   "auto refused for a key that has no automatic value: %s", err.msg);
	rc = load(REQUIRED);
	ok(rc == 0 && err.count == 0 && err.msg[0] == '\0' &&
		   err.list[0] == '\0',
	   "a good load clears the previous errors");
}

static void test_files(void)
{
	static const char *const files[] = {
		"config/examples/single-node.ini",
		"config/examples/baremetal.ini",
		"config/examples/local-4node/node1.ini",
		"config/examples/local-4node/node4.ini",
		"tests/config/data/good/syntax.ini",
	};
	const char *root = getenv("ZBMD_ROOT");
	char path[512];

	for (size_t i = 0; i < ZB_ARRAY_LEN(files); i++) {
		int rc;

		snprintf(path, sizeof(path), "%s/%s", root ? root : ".",
			 files[i]);
		rc = cfg_load_file(&a, path, &err);
		if (rc != 0)
			tap_diag("%s", err.list);
		ok(rc == 0 && cfg_round_trips(&a, files[i]),
		   "%s loads and round-trips", files[i]);
	}
	snprintf(path, sizeof(path), "%s/config/examples/baremetal.ini",
		 root ? root : ".");
	cfg_load_file(&a, path, &err);
	ok(a.transport.kind == CFG_TRANSPORT_RDMA && a.rdma.enabled &&
		   a.gpu.backend == CFG_GPU_CUDA && a.eal.hugepages &&
		   a.port_count == 1 && a.ports[0].pci[0] != '\0' &&
		   a.peer_count == 4,
	   "baremetal example: PCI NIC, hugepages, RDMA, CUDA, 4 peers");
}

int main(void)
{
	tap_plan(68);
	test_defaults();
	test_values();
	test_syntax();
	test_errors();
	test_files();
	return tap_done();
}
