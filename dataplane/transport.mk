# transport: wire format and reliable transport core. Pure C, no DPDK.
MODULES += transport
transport_SRCS := $(wildcard dataplane/wire*.c dataplane/transport*.c)
transport_DEPS := common
transport_SUMMARY := wire format + reliable transport core (no DPDK; link ops injected)

# Figures only, never part of `make test`.
.PHONY: bench-transport-core
bench-transport-core: $(BUILD)/tests/transport/helper_bench_core
	$(BUILD)/tests/transport/helper_bench_core

# libFuzzer on the receive path (needs clang); not part of `make test`.
# `make fuzz` runs every fuzz-* target for FUZZ_SECS each.
FUZZ_SECS ?= 30
FUZZ_CC = clang $(CPPFLAGS) -std=gnu11 -g -O1 -fsanitize=fuzzer,address,undefined
.PHONY: fuzz fuzz-transport
fuzz: fuzz-transport
fuzz-transport:
	@mkdir -p $(BUILD)/fuzz
	$(FUZZ_CC) tests/transport/fuzz_rx.c $(transport_SRCS) common/common.c \
		-o $(BUILD)/fuzz/fuzz_rx
	$(BUILD)/fuzz/fuzz_rx -max_total_time=$(FUZZ_SECS) -max_len=9200 -print_final_stats=1

# ---- bench-transport (figures only, never part of `make test`) ------------
# zbmd over memif and veth/af_packet next to kernel UDP/TCP and dpdk-testpmd
# raw memif, one table (bench/transport/run.sh; needs root). ~1-2 minutes.
$(BUILD)/bin/kbench: bench/transport/kbench.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $< -o $@

.PHONY: bench-transport
bench-transport: $(BUILD)/tests/dataplane/helper_bench_tp $(BUILD)/tests/dataplane/helper_remote $(BUILD)/bin/kbench
	bench/transport/run.sh
