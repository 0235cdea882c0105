# actors/: the actor runtime (plain C11 + pthreads; no DPDK, no config).
MODULES += actors
actors_SRCS := $(wildcard actors/*.c)
actors_DEPS := common
actors_LDLIBS :=
TSAN_MODULES += actors
actors_SUMMARY := actor runtime (workers: pthreads or act_worker_poll)

# Benchmarks: `make bench-actors` builds the C Savina workloads and runs them
# beside their Erlang counterparts (bench/actors/*.erl), printing the ratios.
ACTORS_BENCH_BIN := $(BUILD)/bench/actors/bench_actors
$(ACTORS_BENCH_BIN): bench/actors/bench_actors.c $(BUILD)/lib/libzb_actors.a $(BUILD)/lib/libzb_common.a
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $< -o $@ $(LDFLAGS) $(BUILD)/lib/libzb_actors.a $(BUILD)/lib/libzb_common.a $(LDLIBS_BASE)
-include $(ACTORS_BENCH_BIN).d

.PHONY: bench-actors
bench-actors: $(ACTORS_BENCH_BIN)
	ZBMD_BUILD=$(abspath $(BUILD)) bench/actors/run.sh

# test_port_wake stalls a replier right after its push to an act_call port,
# at the wake-up that follows (link-time wrap of the internal wake calls).
$(BUILD)/tests/actors/test_port_wake.t: private LDFLAGS += -Wl,--wrap=act__make_runnable -Wl,--wrap=act__port_wake

# test_call_spin counts the FUTEX_WAKE calls a worker makes (link-time wrap of syscall).
$(BUILD)/tests/actors/test_call_spin.t: private LDFLAGS += -Wl,--wrap=syscall
