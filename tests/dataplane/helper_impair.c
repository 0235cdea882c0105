/* helper_impair — a lossy Ethernet hub between interfaces, for kernels
 * without sch_netem. Every frame received on one interface is forwarded to
 * the interface that owns its destination MAC (learnt from source MACs; all
 * others for broadcast and unknown ones) and, per forwarded copy, dropped
 * with probability LOSS %, sent twice with DUP %, or held back and sent after
 * the next 1..3 frames (or 2 ms) with REORDER %. Deterministic for a seed
 * given the same input order.
 *
 *   helper_impair [--loss P] [--dup P] [--reorder P] [--seed S] IFACE...
 *
 * Runs until SIGTERM/SIGINT, then prints "impair: forwarded=... dropped=...
 * duplicated=... reordered=..." and exits 0. Plain AF_PACKET sockets, no
 * DPDK: the impairment happens on the wire, below both nodes. */
#include "det_rand.h"
#include "raw_link.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_IF 16
#define MAX_MAC 256
#define HOLD_MAX 64
#define FRAME_MAX 10000

struct held {
	int out;
	int after;            /* frames still to pass before it goes */
	uint64_t deadline_ns;
	size_t len;
	uint8_t buf[FRAME_MAX];
};

static int fds[MAX_IF], nif;
static uint8_t macs[MAX_MAC][6];
static int mac_if[MAX_MAC], nmac;
static double loss, dup_p, reorder;
static uint64_t rng = 88172645463325252ull;
static struct held hold[HOLD_MAX];
static int nheld;
static uint64_t forwarded, dropped, duplicated, reordered, overflow;
static volatile sig_atomic_t stop;

static double rnd(void)
{
	return (double)(dr_xorshift64(&rng) >> 11) / (double)(1ull << 53);
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int open_if(const char *name)
{
	int fd = rl_open(name);
	if (fd < 0)
		return -1;
	int big = 256 << 10;   /* a switch-sized buffer: deep ones make RTTs explode */
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	return fd;
}

static void out(int i, const uint8_t *b, size_t len)
{
	if (send(fds[i], b, len, 0) < 0)
		overflow++;
}

/* release held frames whose turn came */
static void tick(int passed, uint64_t now)
{
	for (int h = 0; h < nheld;) {
		hold[h].after -= passed;
		if (hold[h].after <= 0 || now >= hold[h].deadline_ns) {
			out(hold[h].out, hold[h].buf, hold[h].len);
			hold[h] = hold[--nheld];
		} else {
			h++;
		}
	}
}

static void forward_copy(int o, const uint8_t *b, size_t len, uint64_t now)
{
	double r = rnd();
	if (r < loss) {
		dropped++;
		return;
	}
	forwarded++;
	if (r < loss + dup_p) {
		duplicated++;
		out(o, b, len);
		out(o, b, len);
		tick(2, now);
		return;
	}
	if (r < loss + dup_p + reorder && nheld < HOLD_MAX && len <= FRAME_MAX) {
		struct held *h = &hold[nheld++];
		h->out = o;
		h->after = 1 + (int)(rnd() * 3);
		h->deadline_ns = now + 2000000;
		h->len = len;
		memcpy(h->buf, b, len);
		reordered++;
		return;
	}
	out(o, b, len);
	tick(1, now);
}

static int owner(const uint8_t *mac)
{
	for (int m = 0; m < nmac; m++)
		if (memcmp(macs[m], mac, 6) == 0)
			return mac_if[m];
	return -1;
}

static void learn(const uint8_t *mac, int i)
{
	if (mac[0] & 1)
		return;
	for (int m = 0; m < nmac; m++)
		if (memcmp(macs[m], mac, 6) == 0) {
			mac_if[m] = i;
			return;
		}
	if (nmac < MAX_MAC) {
		memcpy(macs[nmac], mac, 6);
		mac_if[nmac++] = i;
	}
}

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"loss", required_argument, NULL, 'l'},
		{"dup", required_argument, NULL, 'd'},
		{"reorder", required_argument, NULL, 'r'},
		{"seed", required_argument, NULL, 's'},
		{NULL, 0, NULL, 0},
	};
	int c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'l')
			loss = atof(optarg) / 100;
		else if (c == 'd')
			dup_p = atof(optarg) / 100;
		else if (c == 'r')
			reorder = atof(optarg) / 100;
		else if (c == 's')
			rng ^= strtoull(optarg, NULL, 0) * 0x9e3779b97f4a7c15ull;
		else
			return 2;
	}
	if (argc - optind < 2 || argc - optind > MAX_IF) {
		fprintf(stderr, "usage: helper_impair [--loss P] [--dup P] [--reorder P] [--seed S] IFACE IFACE...\n");
		return 2;
	}
	struct pollfd pfd[MAX_IF];
	for (int i = optind; i < argc; i++) {
		fds[nif] = open_if(argv[i]);
		if (fds[nif] < 0) {
			fprintf(stderr, "helper_impair: %s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		pfd[nif] = (struct pollfd){.fd = fds[nif], .events = POLLIN};
		nif++;
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	printf("impair: ready on %d interfaces\n", nif);
	fflush(stdout);

	static uint8_t buf[65536];
	while (!stop) {
		int n = poll(pfd, (nfds_t)nif, nheld ? 1 : 100);
		uint64_t now = now_ns();
		if (n <= 0) {
			tick(0, now);
			continue;
		}
		for (int i = 0; i < nif; i++) {
			if (!(pfd[i].revents & POLLIN))
				continue;
			struct sockaddr_ll from;
			socklen_t fl = sizeof(from);
			ssize_t len = recvfrom(fds[i], buf, sizeof(buf), MSG_DONTWAIT,
					       (struct sockaddr *)&from, &fl);
			/* our own transmissions come back as OUTGOING: skip */
			if (len < 14 || from.sll_pkttype == PACKET_OUTGOING)
				continue;
			learn(buf + 6, i);
			int o = owner(buf);
			for (int j = 0; j < nif; j++)
				if (j != i && (o < 0 || o == j))
					forward_copy(j, buf, (size_t)len, now);
		}
	}
	for (int h = 0; h < nheld; h++)
		out(hold[h].out, hold[h].buf, hold[h].len);
	printf("impair: forwarded=%lu dropped=%lu duplicated=%lu reordered=%lu send_errors=%lu\n",
	       (unsigned long)forwarded, (unsigned long)dropped,
	       (unsigned long)duplicated, (unsigned long)reordered,
	       (unsigned long)overflow);
	return 0;
}
