# transport: wire format and reliable transport core. Pure C, no DPDK.
MODULES += transport
transport_SRCS := $(wildcard dataplane/wire*.c dataplane/transport*.c)
transport_DEPS := common
