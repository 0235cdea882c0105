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

# libFuzzer on what a peer sends the remote actors' net carrier
# (remote_net.c: carrier headers, reassembly, credits, refusals), over a fake
# net provider (tests/dataplane/fuzz_netcar.c; needs clang); not part of
# `make test`.
.PHONY: fuzz-netcar
fuzz: fuzz-netcar
fuzz-netcar:
	@mkdir -p $(BUILD)/fuzz/corpus_netcar
	$(FUZZ_CC) tests/dataplane/fuzz_netcar.c dataplane/remote_net.c \
		$(transport_SRCS) common/common.c -o $(BUILD)/fuzz/fuzz_netcar -lpthread
	$(BUILD)/fuzz/fuzz_netcar -max_total_time=$(FUZZ_SECS) -max_len=4096 \
		-print_final_stats=1 $(BUILD)/fuzz/corpus_netcar

# libFuzzer on dp__rx_classify (arp.c: Ethernet, ARP, IPv4, ICMP echo, the
# UDP lane) with a hand-made rte_mbuf, no EAL (tests/dataplane/
# fuzz_classify.c; needs clang); not part of `make test`.
.PHONY: fuzz-classify
fuzz: fuzz-classify
fuzz-classify:
	@mkdir -p $(BUILD)/fuzz/corpus_classify
	$(FUZZ_CC) $(dataplane_CFLAGS) tests/dataplane/fuzz_classify.c common/common.c \
		-o $(BUILD)/fuzz/fuzz_classify $(DPDK_LIBS) -lpthread
	$(BUILD)/fuzz/fuzz_classify -max_total_time=$(FUZZ_SECS) -max_len=9100 \
		-print_final_stats=1 $(BUILD)/fuzz/corpus_classify \
		tests/dataplane/fuzz_classify_seeds

# libFuzzer on the remote actors' record decoder (remote.c) behind the net
# carrier, into a real actor runtime, no EAL (tests/dataplane/fuzz_remote.c;
# needs clang); not part of `make test`.
.PHONY: fuzz-remote
fuzz: fuzz-remote
fuzz-remote:
	@mkdir -p $(BUILD)/fuzz/corpus_remote
	$(FUZZ_CC) $(dataplane_CFLAGS) tests/dataplane/fuzz_remote.c dataplane/remote_net.c \
		$(transport_SRCS) $(actors_SRCS) common/common.c \
		-o $(BUILD)/fuzz/fuzz_remote $(DPDK_LIBS) -lpthread
	$(BUILD)/fuzz/fuzz_remote -max_total_time=$(FUZZ_SECS) -max_len=4096 \
		-print_final_stats=1 $(BUILD)/fuzz/corpus_remote

# libFuzzer on the receive side of the dpdk net provider (net_dpdk.c: the
# collectives' {tag, size} headers and payloads, placement into posted
# receives), no EAL, with the ZB_DEBUG assertions on
# (tests/dataplane/fuzz_net_dpdk.c; needs clang); not part of `make test`.
.PHONY: fuzz-net-dpdk
fuzz: fuzz-net-dpdk
fuzz-net-dpdk:
	@mkdir -p $(BUILD)/fuzz/corpus_net_dpdk
	$(FUZZ_CC) -DZB_DEBUG $(dataplane_CFLAGS) tests/dataplane/fuzz_net_dpdk.c \
		$(transport_SRCS) common/common.c \
		-o $(BUILD)/fuzz/fuzz_net_dpdk $(DPDK_LIBS) -lpthread -lm
	$(BUILD)/fuzz/fuzz_net_dpdk -max_total_time=$(FUZZ_SECS) -max_len=4096 \
		-print_final_stats=1 $(BUILD)/fuzz/corpus_net_dpdk
