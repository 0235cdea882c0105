/* cli/cli.h — the zbmd command table. Each module implements its commands
 * (int fn(int argc, char **argv): returns the process exit status) and
 * declares them in its public header; cli/main.c lists them. */
#ifndef ZBMD_CLI_H
#define ZBMD_CLI_H

struct zb_cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *help;
};

/* Exit statuses shared by every command. */
enum { ZB_EXIT_OK = 0, ZB_EXIT_FAIL = 1, ZB_EXIT_USAGE = 2 };

#endif
