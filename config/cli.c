/* config/cli.c — `zbmd check-config` and `zbmd config-doc`. The only code in
 * config/ that prints. */
#include "zbmd/config.h"

#include "zbmd/common.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Exit statuses (cli/cli.h): 0 ok, 2 usage or bad input. */
enum { EXIT_OK = 0, EXIT_USAGE = 2 };

int (*cfg_check_files)(const struct zb_config *cfg, char *err, size_t errlen);

#define CHECK_USAGE "usage: zbmd check-config [-q] [--files] FILE.ini|-\n"

static int check_help(void)
{
	printf(CHECK_USAGE "\n"
	       "Validate a node configuration (\"-\" reads it from stdin). A "
	       "good file\nprints the effective configuration (defaults "
	       "included) as INI and exits 0;\notherwise every problem is "
	       "printed to stderr as\n  FILE:LINE: what is wrong (what was "
	       "expected)\nand the exit status is 2.\n\n"
	       "  -q, --quiet   print nothing for a good file (exit status "
	       "only)\n"
	       "  --files       also read the files it names as the node will "
	       "([cluster]\n"
	       "                psk_file: there, a regular file of 16+ bytes, "
	       "mode 0600):\n"
	       "                for the host that runs it (the systemd unit's "
	       "ExecStartPre)\n"
	       "\nEvery key: docs/config.md (zbmd config-doc).\n");
	return EXIT_OK;
}

int cfg_cmd_check_config(int argc, char **argv)
{
	struct zb_config *cfg = malloc(sizeof(*cfg));
	struct cfg_error *err = malloc(sizeof(*err));
	const char *path = NULL;
	bool quiet = false, files = false;
	int rc = EXIT_USAGE;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			rc = check_help();
			goto out;
		} else if (strcmp(argv[i], "-q") == 0 ||
			   strcmp(argv[i], "--quiet") == 0) {
			quiet = true;
		} else if (strcmp(argv[i], "--files") == 0) {
			files = true;
		} else if ((argv[i][0] != '-' || strcmp(argv[i], "-") == 0) &&
			   path == NULL) {
			path = argv[i];
		} else {
			if (argv[i][0] == '-')
				fprintf(stderr, "zbmd check-config: unknown option '%s'\n",
					argv[i]);
			else
				fprintf(stderr, "zbmd check-config: one file at a time "
					"('%s' is a second)\n", argv[i]);
			path = NULL;
			break;
		}
	}
	if (path == NULL) {
		fputs(CHECK_USAGE, stderr);
		goto out;
	}
	if (cfg == NULL || err == NULL) {
		fprintf(stderr, "zbmd check-config: out of memory\n");
		rc = 1;
		goto out;
	}
	if (strcmp(path, "-") == 0) {
		rc = cfg_load_stream(cfg, stdin, "<stdin>", err);
	} else {
		rc = cfg_load_file(cfg, path, err);
	}
	if (rc != 0) {
		fputs(err->list, stderr);
		rc = EXIT_USAGE;
		goto out;
	}
	/* --files: the files it names, as the node will read them (the
	 * unit's ExecStartPre passed a config whose key file was missing or
	 * readable by all, and the node then failed at every restart) */
	if (files && cfg_check_files && cfg_check_files(cfg, err->msg, sizeof(err->msg)) != 0) {
		fprintf(stderr, "%s: %s\n", path, err->msg);
		rc = EXIT_USAGE;
		goto out;
	}
	if (!quiet)
		cfg_dump(cfg, stdout);
	rc = EXIT_OK;
out:
	free(cfg);
	free(err);
	return rc;
}

int cfg_cmd_config_doc(int argc, char **argv)
{
	if (argc == 2 && (strcmp(argv[1], "--help") == 0 ||
			  strcmp(argv[1], "-h") == 0)) {
		printf("usage: zbmd config-doc\n\nPrint the configuration "
		       "reference (docs/config.md) generated from the\n"
		       "schema table.\n");
		return EXIT_OK;
	}
	if (argc != 1) {
		fprintf(stderr, "zbmd config-doc: unexpected argument '%s'\n"
			"usage: zbmd config-doc\n", argv[1]);
		return EXIT_USAGE;
	}
	cfg_write_doc(stdout);
	return EXIT_OK;
}
