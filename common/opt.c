/* common/opt.c — the words for what getopt_long refused, one way for every
 * command that parses with it (zbmd local, bench allreduce, bench phi,
 * train). getopt's own messages name only argv[0]; these name the command
 * and the option as it was typed. */
#include "zbmd/common.h"

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

void zb_opt_error(const char *cmd, int c, int argc, char *const argv[],
		  const struct option *opts)
{
	ZB_ASSERT(cmd != NULL && argv != NULL && opts != NULL);
	const char *w = optind >= 1 && optind - 1 < argc ? argv[optind - 1] : "";
	bool dashes = strncmp(w, "--", 2) == 0;

	if (c == ':') {   /* a known option at the end without its value */
		if (dashes)
			fprintf(stderr, "%s: %s needs a value\n", cmd, w);
		else
			fprintf(stderr, "%s: -%c needs a value\n", cmd, optopt);
		return;
	}
	if (optopt && !dashes) {   /* -x, or the x of "-qx" */
		fprintf(stderr, "%s: unknown option '-%c'\n", cmd, optopt);
		return;
	}
	size_t n = dashes ? strcspn(w + 2, "=") : 0;
	for (const struct option *op = opts; dashes && w[2 + n] == '=' && op->name; op++)
		if (strlen(op->name) == n && strncmp(op->name, w + 2, n) == 0) {
			fprintf(stderr, "%s: --%s takes no value (got '%s')\n", cmd,
				op->name, w);
			return;
		}
	char these[160] = "";
	unsigned hits = 0;
	for (const struct option *op = opts; dashes && n && op->name; op++)
		if (strncmp(op->name, w + 2, n) == 0 && hits++ < 6)
			snprintf(these + strlen(these), sizeof(these) - strlen(these),
				 "%s--%s", these[0] ? ", " : "", op->name);
	if (hits > 1)
		fprintf(stderr, "%s: ambiguous option '%.*s' (could be %s)\n", cmd,
			(int)(n + 2), w, these);
	else
		fprintf(stderr, "%s: unknown option '%s'\n", cmd, w);
}
