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
FUZZ_SECS ?= 30
.PHONY: fuzz-transport
fuzz-transport:
	@mkdir -p $(BUILD)/fuzz
	clang $(CPPFLAGS) -std=gnu11 -g -O1 -fsanitize=fuzzer,address,undefined \
		tests/transport/fuzz_rx.c $(transport_SRCS) common/common.c \
		-o $(BUILD)/fuzz/fuzz_rx
	$(BUILD)/fuzz/fuzz_rx -max_total_time=$(FUZZ_SECS) -max_len=9200 -print_final_stats=1
