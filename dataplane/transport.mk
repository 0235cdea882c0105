# transport: wire format and reliable transport core. Pure C, no DPDK.
MODULES += transport
transport_SRCS := $(wildcard dataplane/wire*.c dataplane/transport*.c)
transport_DEPS := common
transport_SUMMARY := wire format + reliable transport core (no DPDK; link ops injected)

# Figures only, never part of `make test`.
.PHONY: bench-transport-core
bench-transport-core: $(BUILD)/tests/transport/helper_bench_core
	$(BUILD)/tests/transport/helper_bench_core
