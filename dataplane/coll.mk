# coll: net provider registry, tcp provider, collectives. No DPDK.
MODULES += coll
coll_SRCS := $(wildcard dataplane/net.c dataplane/net_tcp*.c dataplane/coll*.c)
coll_DEPS := config gpu common
