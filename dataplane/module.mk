# dataplane/ holds three modules, each in its own fragment:
#   transport  wire format + reliable transport core (no DPDK: link ops injected)
#   coll       net provider registry, tcp provider, collectives (no DPDK)
#   dataplane  EAL, ports, lcore loop, ARP, node process, dpdk net provider
include dataplane/transport.mk
include dataplane/coll.mk

MODULES += dataplane
DPDK_CFLAGS := $(shell $(PKG_CONFIG) --cflags libdpdk 2>/dev/null)
DPDK_LIBS   := $(shell $(PKG_CONFIG) --libs libdpdk 2>/dev/null)
dataplane_SRCS := $(filter-out $(transport_SRCS) $(coll_SRCS),$(wildcard dataplane/*.c))
# DPDK headers trip -Wextra in places we do not own; keep them quiet as system headers.
dataplane_CFLAGS := $(subst -I/,-isystem /,$(DPDK_CFLAGS))
dataplane_LDLIBS := $(DPDK_LIBS)
# only the modules present in this tree (actors/gpu land on other branches)
dataplane_DEPS := $(filter $(MODULES),coll transport config actors gpu) metrics common
TSAN_MODULES += transport
dataplane_SUMMARY := DPDK $(shell $(PKG_CONFIG) --modversion libdpdk 2>/dev/null || echo MISSING): node (zbmd run), lcore loop, ARP/ICMP, transport on ports, dpdk net provider
