/* CLI commands of the control module: `zbmd control` (run only the control
 * thread of a node, foreground) and `zbmd status` (ask a running node's admin
 * endpoint). Only these functions print. */
#include "internal.h"
#include "zbmd/control.h"
#include "zbmd/common.h"
#include "zbmd/config.h"
#include "../cli/cli.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static void log_stderr(void *arg, int level, const char *msg)
{
	struct timespec ts;
	(void)arg;
	clock_gettime(CLOCK_REALTIME, &ts);
	fprintf(stderr, "%ld.%03ld %s %s\n", (long)ts.tv_sec, ts.tv_nsec / 1000000,
		level <= CTL_LOG_ERR ? "error" : level <= CTL_LOG_WARN ? "warn" : "info",
		msg);
}

/* Every diagnostic of a bad config, one "FILE:LINE: ..." line each (as
 * zbmd run and check-config print them; only the first was said). */
static int load_cfg(const char *cmd, const char *path, struct zb_config *cfg)
{
	static struct cfg_error e;   /* large: not on the stack */
	memset(&e, 0, sizeof(e));
	int rc = cfg_load_file(cfg, path, &e);
	if (rc != 0) {
		char pre[48];
		snprintf(pre, sizeof(pre), "zbmd %s", cmd);
		if (rc == ZB_ERR_CONFIG || e.msg[0])
			cfg_error_print(stderr, pre, &e);
		else
			fprintf(stderr, "zbmd %s: %s: %s\n", cmd, path, zb_strerror(rc));
		return -1;
	}
	return 0;
}

int ctl_cmd_control(int argc, char **argv)
{
	static const struct option lo[] = {
		{"config", required_argument, NULL, 'c'},
		{"no-leave", no_argument, NULL, 'n'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *path = NULL;
	bool leave = true;
	int o;

	optind = 1;
	while ((o = getopt_long(argc, argv, "c:nh", lo, NULL)) != -1) {
		switch (o) {
		case 'c': path = optarg; break;
		case 'n': leave = false; break;
		default:
			fprintf(o == 'h' ? stdout : stderr, "usage: zbmd control -c FILE [--no-leave]\n"
				"Run only the control thread of a node (heartbeats, Raft,\n"
				"metrics, admin) in the foreground until SIGTERM/SIGINT;\n"
				"then leave the cluster gracefully unless --no-leave.\n");
			return o == 'h' ? ZB_EXIT_OK : ZB_EXIT_USAGE;
		}
	}
	if (!path || optind != argc) {
		if (optind != argc)
			fprintf(stderr, "zbmd control: unexpected argument '%s'\n", argv[optind]);
		else
			fprintf(stderr, "zbmd control: -c FILE is required\n");
		fprintf(stderr, "usage: zbmd control -c FILE [--no-leave]\n");
		return ZB_EXIT_USAGE;
	}
	struct zb_config *cfg = malloc(sizeof(*cfg));
	if (!cfg) {
		fprintf(stderr, "zbmd control: out of memory\n");
		return ZB_EXIT_FAIL;
	}
	if (load_cfg("control", path, cfg) != 0) {
		free(cfg);   /* a config that does not load: exit 2, as zbmd run */
		return ZB_EXIT_USAGE;
	}
	/* Block the signals before the threads start, so they inherit the
	 * mask and only sigwait() below sees them. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	struct ctl_opts opts = {.log = log_stderr};
	char err[512] = "";
	int rc = ctl_start(cfg, &opts, err, sizeof(err));
	free(cfg);
	if (rc != 0) {
		fprintf(stderr, "zbmd control: %s\n", err[0] ? err : zb_strerror(rc));
		return ZB_EXIT_FAIL;
	}
	int sig = 0;
	sigwait(&set, &sig);
	fprintf(stderr, "zbmd control: %s, stopping\n", strsignal(sig));
	if (!leave) {
		ctl_node_stop(ctl_self(), false);
		return ZB_EXIT_OK;
	}
	ctl_stop();
	return ZB_EXIT_OK;
}

/* The dataplane's samples on a /metrics body, in its order: the lines of
 * the port, loop, transport and actor families (by-reason counters at 0
 * left out), each "name{labels} value" pointing into the body, which
 * dp_scan cuts into lines; the lowest zbmd_dp_epoch and how many lcores
 * report one. */
struct dp_facts {
	long long epoch;
	unsigned lcores, n;
	struct dp_sample {
		char *line;
		bool port;
	} *s;
};

static void dp_scan(char *m, struct dp_facts *df)
{
	size_t cap = 1;
	for (const char *p = m; *p; p++)
		cap += *p == '\n';
	*df = (struct dp_facts){.epoch = -1, .s = calloc(cap, sizeof(*df->s))};
	char *save = NULL;
	for (char *line = strtok_r(m, "\n", &save); line && df->s;
	     line = strtok_r(NULL, "\n", &save)) {
		size_t len = strlen(line);
		const char *sp = strrchr(line, ' ');
		if (!sp || line[0] == '#')
			continue;
		if (strncmp(line, "zbmd_dp_epoch{", 14) == 0) {
			long long e = atoll(sp + 1);
			df->epoch = df->epoch < 0 || e < df->epoch ? e : df->epoch;
			df->lcores++;
		}
		bool port = strncmp(line, "zbmd_port", 9) == 0;
		if (port || ((strncmp(line, "zbmd_dp_", 8) == 0 ||
			      strncmp(line, "zbmd_transport_", 15) == 0 ||
			      strncmp(line, "zbmd_actors_", 12) == 0) &&
			     !(strstr(line, "_by_reason_") && len > 2 &&
			       strcmp(line + len - 2, " 0") == 0))) {
			ZB_ASSERT(df->n < cap);
			df->s[df->n++] = (struct dp_sample){.line = line, .port = port};
		}
	}
}

/* The most a status reply may hold, and the time the whole exchange
 * (connect, request, reply) may take. */
#define STATUS_REPLY_MAX (16u << 20)
#define STATUS_WAIT_MS 3000

/* Milliseconds left until deadline (CLOCK_MONOTONIC ns), 0 when passed. */
static int ms_left(uint64_t deadline)
{
	uint64_t now = zb_now_ns();
	return now >= deadline ? 0 : (int)((deadline - now + 999999) / 1000000);
}

/* Waits for ev on fd until deadline: 1 ready, 0 timed out, -1 error. */
static int wait_fd(int fd, short ev, uint64_t deadline)
{
	for (;;) {
		struct pollfd pf = {.fd = fd, .events = ev};
		int ms = ms_left(deadline);
		if (ms == 0)
			return 0;
		int n = poll(&pf, 1, ms);
		if (n > 0)
			return 1;
		if (n == 0)
			return 0;
		if (errno != EINTR)
			return -1;
	}
}

/* GET path from ip:port; the body into a malloc'd string, NULL on error
 * (reason printed). The whole exchange has STATUS_WAIT_MS: a server that
 * trickles its reply is cut off there as one that says nothing. */
static char *http_get(const char *addr, const char *path)
{
	char req[256];
	struct sockaddr_in sa;
	uint64_t deadline = zb_now_ns() + STATUS_WAIT_MS * 1000000ull;

	if (ctl__parse_ip4(addr, &sa) != 0) {
		fprintf(stderr, "zbmd status: '%s' is not ip:port\n", addr);
		return NULL;
	}
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		fprintf(stderr, "zbmd status: socket: %s\n", strerror(errno));
		return NULL;
	}
	int rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa)), err = 0;
	if (rc != 0 && errno == EINPROGRESS) {
		socklen_t el = sizeof(err);
		rc = wait_fd(fd, POLLOUT, deadline);
		if (rc == 0) {
			fprintf(stderr, "zbmd status: cannot reach the admin endpoint %s: "
				"no answer within %d s (connect timed out)\n", addr,
				STATUS_WAIT_MS / 1000);
			close(fd);
			return NULL;
		}
		if (rc > 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0)
			rc = err ? -1 : 0;
		else
			err = errno;
		errno = err;
	}
	if (rc != 0) {
		fprintf(stderr, "zbmd status: cannot reach the admin endpoint %s: %s\n",
			addr, strerror(errno));
		close(fd);
		return NULL;
	}
	int k = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n", path, addr);
	if (wait_fd(fd, POLLOUT, deadline) <= 0 || write(fd, req, (size_t)k) != k) {
		fprintf(stderr, "zbmd status: write to %s failed\n", addr);
		close(fd);
		return NULL;
	}
	size_t cap = 65536, len = 0;
	char *buf = malloc(cap + 1);
	ssize_t r = 0;
	const char *why = NULL;
	while (buf) {
		int w = wait_fd(fd, POLLIN, deadline);
		if (w <= 0) {
			why = w == 0 ? "timed out" : strerror(errno);
			r = -1;
			break;
		}
		r = read(fd, buf + len, cap - len);
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (r <= 0) {
			if (r < 0)
				why = strerror(errno);
			break;
		}
		len += (size_t)r;
		if (len == cap) {
			char *nb = cap < STATUS_REPLY_MAX ? realloc(buf, 2 * cap + 1) : NULL;
			if (!nb) {
				fprintf(stderr, "zbmd status: the reply from %s goes on past "
					"%u MiB (expected a node's status)\n", addr,
					STATUS_REPLY_MAX >> 20);
				free(buf);
				buf = NULL;
				break;
			}
			buf = nb;
			cap *= 2;
		}
	}
	close(fd);
	if (!buf)
		return NULL;
	if (r < 0) {
		fprintf(stderr, "zbmd status: no whole reply from %s within %d s (%zu "
			"bytes came: %s)\n", addr, STATUS_WAIT_MS / 1000, len, why);
		free(buf);
		return NULL;
	}
	buf[len] = '\0';
	char *body = strstr(buf, "\r\n\r\n");
	if (strncmp(buf, "HTTP/1.", 7) != 0 || !body) {
		fprintf(stderr, "zbmd status: bad reply from %s (%zu bytes, not an "
			"HTTP reply: expected a zbmd admin endpoint)\n", addr, len);
		free(buf);
		return NULL;
	}
	int code = atoi(buf + 9);
	if (code != 200) {
		/* the server's own words: the first line of its body */
		const char *b = body + 4;
		int bl = (int)strcspn(b, "\r\n");
		fprintf(stderr, "zbmd status: %s answered %d to GET %s%s%.*s%s\n", addr,
			code, path, bl ? " (\"" : "", bl > 200 ? 200 : bl, b,
			bl ? "\")" : "");
		free(buf);
		return NULL;
	}
	/* a reply cut short (the node went away mid-reply) is not a status */
	size_t blen = len - (size_t)(body + 4 - buf);
	const char *cl = strcasestr(buf, "\r\ncontent-length:");
	unsigned long long want = cl && cl < body ? strtoull(cl + 17, NULL, 10) : blen;
	if (want != blen) {
		fprintf(stderr, "zbmd status: bad reply from %s: %zu bytes of a body "
			"of %llu\n", addr, blen, want);
		free(buf);
		return NULL;
	}
	if (blen == 0) {
		fprintf(stderr, "zbmd status: %s answered GET %s with an empty body "
			"(expected a node's status)\n", addr, path);
		free(buf);
		return NULL;
	}
	memmove(buf, body + 4, blen + 1);
	return buf;
}

int ctl_cmd_status(int argc, char **argv)
{
	static const struct option lo[] = {
		{"config", required_argument, NULL, 'c'},
		{"admin", required_argument, NULL, 'a'},
		{"json", no_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *path = NULL, *admin = NULL;
	bool json = false;
	int o;

	optind = 1;
	while ((o = getopt_long(argc, argv, "c:a:jh", lo, NULL)) != -1) {
		switch (o) {
		case 'c': path = optarg; break;
		case 'a': admin = optarg; break;
		case 'j': json = true; break;
		default:
			fprintf(o == 'h' ? stdout : stderr, "usage: zbmd status [-c FILE | --admin IP:PORT] [--json]\n"
				"Print a running node's members, leader, epoch, phi per peer\n"
				"and port counters, from its admin endpoint.\n");
			return o == 'h' ? ZB_EXIT_OK : ZB_EXIT_USAGE;
		}
	}
	if (optind != argc || (path && admin)) {
		if (optind != argc)
			fprintf(stderr, "zbmd status: unexpected argument '%s'\n", argv[optind]);
		else
			fprintf(stderr, "zbmd status: -c and --admin both name the node: "
				"give one\n");
		fprintf(stderr, "usage: zbmd status [-c FILE | --admin IP:PORT] [--json]\n");
		return ZB_EXIT_USAGE;
	}
	char addr[CFG_STR] = "127.0.0.1:7401";
	if (admin) {
		snprintf(addr, sizeof(addr), "%s", admin);
	} else if (path) {
		struct zb_config *cfg = malloc(sizeof(*cfg));
		if (!cfg) {
			fprintf(stderr, "zbmd status: out of memory\n");
			return ZB_EXIT_FAIL;
		}
		if (load_cfg("status", path, cfg) != 0) {
			free(cfg);
			return ZB_EXIT_USAGE;
		}
		snprintf(addr, sizeof(addr), "%s", cfg->control.admin_listen);
		free(cfg);
		if (!addr[0]) {
			fprintf(stderr, "zbmd status: %s has no admin endpoint ([control] "
				"admin_listen is empty: the admin API is off)\n", path);
			return ZB_EXIT_FAIL;
		}
	}
	char *body = http_get(addr, json ? "/status.json" : "/status");
	if (!body)
		return ZB_EXIT_FAIL;
	/* The dataplane's view and counters, when the node is a `zbmd run`
	 * node (the dataplane registered them on /metrics): the epoch every
	 * lcore applied (the lowest one: "dataplane_epoch"), then the port,
	 * loop, transport and actor counters as "port ..." / "dataplane ...";
	 * in the JSON form an object "dataplane" with the same facts (it had
	 * none of them). */
	char *m = http_get(addr, "/metrics");
	if (!m) {
		/* every node serves it: said why; the status itself is good */
		fputs(body, stdout);
		free(body);
		return ZB_EXIT_FAIL;
	}
	struct dp_facts df;
	dp_scan(m, &df);
	if (!json) {
		fputs(body, stdout);
		if (df.lcores)
			printf("dataplane_epoch %lld\ndataplane_lcores %u\n", df.epoch, df.lcores);
		for (unsigned i = 0; i < df.n; i++)
			printf("%s %s\n", df.s[i].port ? "port" : "dataplane", df.s[i].line);
	} else {
		size_t bl = strlen(body);
		while (bl && (body[bl - 1] == '\n' || body[bl - 1] == '}'))
			if (body[--bl] == '}')
				break;
		if (!df.lcores && !df.n) {
			fputs(body, stdout);
		} else {
			fwrite(body, 1, bl, stdout);   /* the object without its '}' */
			printf(",\"dataplane\":{\"epoch\":%lld,\"lcores\":%u,\"samples\":{",
			       df.epoch, df.lcores);   /* -1: no lcore reported one */
			for (unsigned i = 0; i < df.n; i++) {
				char *sp = strrchr(df.s[i].line, ' ');
				*sp = '\0';
				char *end;
				double v = strtod(sp + 1, &end);
				printf("%s", i ? "," : "");
				ctl__json_str(stdout, df.s[i].line);
				if (*end == '\0' && isfinite(v))
					printf(":%s", sp + 1);
				else
					printf(":\"%s\"", sp + 1);   /* NaN, +Inf: JSON has no number for them */
			}
			printf("}}}\n");
		}
	}
	free(df.s);
	free(m);
	free(body);
	return ZB_EXIT_OK;
}
