/* config/cli.c — `zbmd check-config` and `zbmd config-doc`. The only code in
 * config/ that prints. */
#include "zbmd/config.h"

#include "zbmd/common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Exit statuses (cli/cli.h): 0 ok, 2 usage or bad input. */
enum { EXIT_OK = 0, EXIT_USAGE = 2 };

int cfg_cmd_check_config(int argc, char **argv)
{
	struct zb_config *cfg;
	struct cfg_error *err;
	int rc;

	if (argc == 2 && (strcmp(argv[1], "--help") == 0 ||
			  strcmp(argv[1], "-h") == 0)) {
		printf("usage: zbmd check-config FILE.ini\n\n"
		       "Validate a node configuration. A good file prints the "
		       "effective\nconfiguration (defaults included) as INI and "
		       "exits 0; otherwise every\nproblem is printed to stderr "
		       "as FILE:LINE: what is wrong (what was\nexpected), and "
		       "the exit status is 2. Keys: docs/config.md.\n");
		return EXIT_OK;
	}
	if (argc != 2 || argv[1][0] == '-') {
		fprintf(stderr, "usage: zbmd check-config FILE.ini\n");
		return EXIT_USAGE;
	}
	cfg = malloc(sizeof(*cfg));
	err = malloc(sizeof(*err));
	if (cfg == NULL || err == NULL) {
		fprintf(stderr, "zbmd check-config: out of memory\n");
		free(cfg);
		free(err);
		return 1;
	}
	rc = cfg_load_file(cfg, argv[1], err);
	if (rc != 0) {
		fputs(err->list, stderr);
		rc = EXIT_USAGE;
	} else {
		cfg_dump(cfg, stdout);
		rc = EXIT_OK;
	}
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
		fprintf(stderr, "usage: zbmd config-doc\n");
		return EXIT_USAGE;
	}
	cfg_write_doc(stdout);
	return EXIT_OK;
}
