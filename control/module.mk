# control/: two modules.
#   metrics  the process-wide metrics registry + Prometheus text (no deps but
#            common, so that every module, dataplane included, can use it)
#   control  the control thread: phi-accrual, Raft (libraft), membership FSM,
#            PSK auth (libsodium), HTTP metrics/admin (libmicrohttpd), CLI
MODULES += metrics
metrics_SRCS := control/metrics.c
metrics_DEPS := common
metrics_SUMMARY := registry (per-lcore counter rows) + Prometheus text
TSAN_MODULES += metrics

MODULES += control
control_SRCS := $(filter-out control/metrics.c,$(wildcard control/*.c))
control_DEPS := metrics config common
control_CFLAGS := $(shell $(PKG_CONFIG) --cflags raft libuv libsodium libmicrohttpd 2>/dev/null)
control_LDLIBS := $(shell $(PKG_CONFIG) --libs raft libuv libsodium libmicrohttpd 2>/dev/null)
control_SUMMARY := phi-accrual + Raft (raft $(shell $(PKG_CONFIG) --modversion raft 2>/dev/null || echo MISSING)) + PSK auth + metrics/admin HTTP
TSAN_MODULES += control

# libFuzzer on what the control thread decodes from its peers: Raft
# snapshots and log entries, blob messages (tests/control/fuzz_ctl.c; needs
# clang); not part of `make test`.
.PHONY: fuzz-control
fuzz: fuzz-control
fuzz-control:
	@mkdir -p $(BUILD)/fuzz/corpus_ctl
	$(FUZZ_CC) $(control_CFLAGS) tests/control/fuzz_ctl.c control/fsm.c \
		control/blob.c control/ring.c common/common.c \
		-o $(BUILD)/fuzz/fuzz_ctl $(control_LDLIBS) -lpthread
	$(BUILD)/fuzz/fuzz_ctl -max_total_time=$(FUZZ_SECS) -max_len=4096 \
		-print_final_stats=1 $(BUILD)/fuzz/corpus_ctl

.PHONY: bench-phi soak-phi soak
bench-phi: $(BUILD)/bin/zbmd
	$(BUILD)/bin/zbmd bench phi

# 10 minutes of real heartbeats over UDP (100 ms, 20 ms jitter): false
# convictions counted, then the sender stops and the conviction delay printed.
soak-phi: $(BUILD)/bin/zbmd
	$(BUILD)/bin/zbmd bench phi -r 600
soak: soak-phi
