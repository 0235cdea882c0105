/* tests/dataplane/raw_link.h — a raw AF_PACKET socket bound to one
 * interface, as the wire-level helpers (helper_inject, helper_impair) use:
 * it reads every frame the interface receives or sends (ETH_P_ALL) and puts
 * frames written to it on the wire as they are. Plain sockets, no DPDK.
 * Header-only: each helper is a program of its own. */
#ifndef ZBMD_TESTS_RAW_LINK_H
#define ZBMD_TESTS_RAW_LINK_H

#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <sys/socket.h>
#include <unistd.h>

/* The socket, or -1 with errno set (no such interface: ENODEV). */
static inline int rl_open(const char *ifname)
{
	int fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
	if (fd < 0)
		return -1;
	struct sockaddr_ll sll = {.sll_family = AF_PACKET,
				  .sll_protocol = htons(ETH_P_ALL),
				  .sll_ifindex = (int)if_nametoindex(ifname)};
	if (sll.sll_ifindex == 0 || bind(fd, (struct sockaddr *)&sll, sizeof(sll))) {
		close(fd);
		return -1;
	}
	return fd;
}

#endif
