/* zbmd — the node process and its tools. `zbmd help` lists the commands. */
#include "cli.h"
#include "zbmd/common.h"
#include "zbmd/coll.h"
#include "zbmd/config.h"
#include "zbmd/gpu.h"
#include "zbmd/control.h"
#include "zbmd/rdma.h"
#include "zbmd/dataplane.h"

#include <stdio.h>
#include <errno.h>
#include <string.h>

#define ZBMD_VERSION "0.1.0"

static int cmd_help(int argc, char **argv);

static int cmd_version(int argc, char **argv)
{
	if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		printf("usage: zbmd version\n  prints the version\n");
		return ZB_EXIT_OK;
	}
	if (argc > 1) {
		fprintf(stderr, "zbmd version: unexpected argument '%s'\n", argv[1]);
		return ZB_EXIT_USAGE;
	}
	printf("zbmd %s\n", ZBMD_VERSION);
	return ZB_EXIT_OK;
}

/* `zbmd bench WHAT`: one row per benchmark. */
static const struct zb_cmd bench_commands[] = {
	{"gpu", gpu_cmd_bench, "sgemm and reduce per GPU backend [--backend B]"},
	{"phi", ctl_cmd_bench_phi, "phi-accrual: time to convict and false convictions vs Akka defaults"},
	{"allreduce", coll_bench_allreduce_main, "ring all-reduce, nccl-tests flags and table"},
	{NULL, NULL, NULL},
};

static int cmd_bench(int argc, char **argv)
{
	static char name[64];

	if (argc >= 2)
		for (size_t i = 0; bench_commands[i].name; i++)
			if (strcmp(argv[1], bench_commands[i].name) == 0) {
				/* getopt's messages begin with argv[0] */
				snprintf(name, sizeof(name), "zbmd bench %s", argv[1]);
				argv[1] = name;
				return bench_commands[i].fn(argc - 1, argv + 1);
			}
	bool help = argc >= 2 && (strcmp(argv[1], "--help") == 0 ||
				  strcmp(argv[1], "-h") == 0 ||
				  strcmp(argv[1], "help") == 0);
	if (argc >= 2 && !help)
		fprintf(stderr, "zbmd bench: unknown benchmark '%s'\n", argv[1]);
	fprintf(help ? stdout : stderr,
		"usage: zbmd bench WHAT [ARGS...]\nbenchmarks:\n");
	for (size_t i = 0; bench_commands[i].name; i++)
		fprintf(help ? stdout : stderr, "  %-14s %s\n",
			bench_commands[i].name, bench_commands[i].help);
	return help ? ZB_EXIT_OK : ZB_EXIT_USAGE;
}

static const struct zb_cmd commands[] = {
	{"help", cmd_help, "list the commands"},
	{"bench", cmd_bench, "run a benchmark (zbmd bench WHAT)"},
	{"gpu-info", gpu_cmd_info, "GPU backends compiled in, usable, devices"},
	{"local", coll_local_main, "run a command on an N-node cluster on this machine"},
	{"version", cmd_version, "print the version"},
	{"run", dp_cmd_run, "start a node until SIGINT/SIGTERM (zbmd run -c FILE.ini)"},
	{"train", dp_cmd_train, "data-parallel training across the cluster (run it on every node)"},
	{"status", ctl_cmd_status, "print a running node's members, leader, epoch, phi per peer"},
	{"control", ctl_cmd_control, "run only the control thread of a node (foreground)"},
	{"check-config", cfg_cmd_check_config, "validate a config file, print the effective config"},
	{"config-doc", cfg_cmd_config_doc, "print the configuration reference (docs/config.md)"},
	{"rdma-info", rdma_info_main, "RDMA devices, ports, GIDs, GPUDirect support"},
};

static int cmd_help(int argc, char **argv)
{
	/* `zbmd help COMMAND`: that command's --help */
	if (argc > 2) {
		fprintf(stderr, "zbmd help: one command at a time\n");
		return ZB_EXIT_USAGE;
	}
	if (argc == 2) {
		for (size_t i = 0; i < ZB_ARRAY_LEN(commands); i++)
			if (strcmp(argv[1], commands[i].name) == 0) {
				char *a[] = {argv[1], "--help", NULL};
				return commands[i].fn == cmd_help ? cmd_help(1, argv)
								  : commands[i].fn(2, a);
			}
		fprintf(stderr, "zbmd help: unknown command '%s' (zbmd help lists "
			"them)\n", argv[1]);
		return ZB_EXIT_USAGE;
	}
	printf("usage: zbmd COMMAND [ARGS...]\n\ncommands:\n");
	for (size_t i = 0; i < ZB_ARRAY_LEN(commands); i++)
		printf("  %-14s %s\n", commands[i].name, commands[i].help);
	printf("\n`zbmd COMMAND --help` describes one command.\n");
	return ZB_EXIT_OK;
}

/* Output that did not reach stdout (a full disk, a closed pipe) fails the
 * command: exit 1 and the reason, whatever the command said (config-doc >
 * docs/config.md on a full disk left half a file and exit 0). */
static int out_checked(int rc)
{
	errno = 0;
	int fl = fflush(stdout), e = errno;
	if (fl == 0 && !ferror(stdout))
		return rc;
	/* fflush failed now (errno says why), or a write before it failed
	 * and the command went on (the buffer was dropped then: the reason
	 * is gone) */
	if (fl != 0 && e != EPIPE)   /* a reader that went away chose to */
		fprintf(stderr, "zbmd: writing the output: %s\n", strerror(e ? e : EIO));
	else if (fl == 0)
		fprintf(stderr, "zbmd: writing the output: an earlier write to stdout failed\n");
	return rc == ZB_EXIT_OK ? ZB_EXIT_FAIL : rc;
}

/* check-config's look at the control plane's key file (cfg_check_files):
 * read as zbmd run reads it (present, a regular file of 16.. bytes, not
 * readable by group or others) */
static int check_files(const struct zb_config *cfg, char *err, size_t errlen)
{
	uint8_t k[CTL_KEY_BYTES];
	char why[256] = "";
	if (!cfg->cluster.psk_file[0])
		return 0;
	int rc = ctl_auth_load_key(cfg->cluster.psk_file, k, why, sizeof(why));
	memset(k, 0, sizeof(k));
	if (rc)
		snprintf(err, errlen, "[cluster] %s", why);
	return rc;
}

int main(int argc, char **argv)
{
	zb_crash_report_install("zbmd");
	cfg_check_files = check_files;
	if (argc < 2) {
		cmd_help(0, NULL);
		return ZB_EXIT_USAGE;
	}
	/* what users type first */
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)
		return out_checked(cmd_help(0, NULL));
	if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0)
		return out_checked(cmd_version(1, argv + 1));
	static char name[64];
	for (size_t i = 0; i < ZB_ARRAY_LEN(commands); i++)
		if (strcmp(argv[1], commands[i].name) == 0) {
			/* a command's argv[0] is what getopt's messages begin
			 * with ("status: unrecognized option"): its full name */
			if (commands[i].fn != cmd_bench) {
				snprintf(name, sizeof(name), "zbmd %s", argv[1]);
				argv[1] = name;
			}
			return out_checked(commands[i].fn(argc - 1, argv + 1));
		}
	fprintf(stderr, "zbmd: unknown command '%s' (try `zbmd help`)\n",
		argv[1]);
	return ZB_EXIT_USAGE;
}
