# coll: net provider registry, tcp provider, collectives. No DPDK.
MODULES += coll
# dataplane/coll_dpdk*.c host collectives on the DPDK lcores: they belong to
# the dataplane module (module.mk's wildcard picks them up from there).
coll_SRCS := $(filter-out dataplane/coll_dpdk%,$(wildcard dataplane/net.c dataplane/net_tcp*.c dataplane/coll*.c))
# Pull coll_dpdk.o (its constructor registers the "dpdk" collective host)
# into every binary that links the dataplane archive; harmless elsewhere (an
# -u symbol that no archive defines stays undefined and unreferenced).
coll_LDLIBS := -Wl,-u,coll_dpdk_anchor
coll_DEPS := config gpu metrics common
# test_lanes runs channels on their own threads: worth ThreadSanitizer.
TSAN_MODULES += coll
coll_SUMMARY := net registry + tcp provider; ring all-reduce, reduce-scatter, all-gather, broadcast, barrier; bench allreduce (--provider tcp|dpdk), local (--link memif|veth|tcp)

# ---- benchmarks (never part of make test) ----------------------------------
MPICC ?= mpicc
BENCH_ALLREDUCE_ARGS ?= -b 64 -e 64M -f 4 -n 20 -w 5
.PHONY: bench bench-allreduce bench-allreduce-compare

$(BUILD)/bin/mpi_allreduce: bench/mpi_allreduce.c
	@mkdir -p $(@D)
	$(MPICC) -O2 -Wall -o $@ $< -lm

# The main job: a local 4-node ring all-reduce over the fastest link that
# works here: memif (DPDK nodes joined by net_memif, the dpdk net provider on
# the reliable transport; needs root), else kernel TCP. Measured on this
# 2-core machine (4 ranks, float, busbw GB/s out-of-place, best of 2 - 3
# rounds, same run as Open MPI; docs/collectives.md, 2026-11-24 night): memif
# 3.5 - 3.7 / 3.4 - 3.5 / 3.0 - 3.6 at 1 / 16 / 64 MiB, tcp 1.7 - 1.9 /
# 1.3 - 1.4 / 1.6, veth ~0.1 (earlier). A fresh VM (2026-11-25 afternoon):
# memif 2.5 / 2.0 / 2.2, tcp 1.5 / 1.0 / 1.1.
# Override with BENCH_LINK=tcp|veth|memif.
BENCH_LINK ?= $(if $(filter 0,$(shell id -u)),memif,tcp)
BENCH_NODES ?= 4
# memif carries 9000-byte frames with ~768 MB of DPDK memory per node (3 GB
# for 4 nodes, --no-huge): zbmd local's own memif default. BENCH_MEMIF_MTU=N
# overrides it (passed on as ZBN_MTU).
BENCH_MEMIF_MTU ?=
BENCH_ENV = $(if $(filter memif,$(BENCH_LINK)),$(if $(BENCH_MEMIF_MTU),ZBN_MTU=$(BENCH_MEMIF_MTU)))
bench: $(BUILD)/bin/zbmd
	$(BENCH_ENV) $(BUILD)/bin/zbmd local --nodes $(BENCH_NODES) --link $(BENCH_LINK) -- bench allreduce \
		$(BENCH_ALLREDUCE_ARGS) --json $(BUILD)/allreduce.json --plot $(BUILD)/allreduce.png
	@echo "figures: $(BUILD)/allreduce.json, plot: $(BUILD)/allreduce.png"

bench-allreduce: bench

# The main job over and over (bench/coll/soak.sh): sweeps of every dtype over
# every link, with injected loss, and with a node killed mid-sweep and while
# the nodes join; TAP, non-zero on any failure. SOAK_ALLREDUCE_ARGS, e.g.
# -r 3 (rounds) or -m 30 (minutes; default 10) or -L tcp.
SOAK_ALLREDUCE_ARGS ?= -m 10
.PHONY: soak-allreduce
soak-allreduce: $(BUILD)/bin/zbmd
	bench/coll/soak.sh $(SOAK_ALLREDUCE_ARGS)
soak: soak-allreduce

# zbmd (memif, veth, tcp) next to Open MPI (shared memory and TCP) in the same
# run, ratio per size (COMPARE_ARGS, e.g. -L "memif tcp" -r 3).
bench-allreduce-compare: $(BUILD)/bin/zbmd $(BUILD)/bin/mpi_allreduce $(BUILD)/bin/kbench
	bench/coll/compare.sh $(COMPARE_ARGS)

# libFuzzer on what the tcp provider reads from its sockets (hello, ack,
# message headers and payloads) through a socketpair (tests/coll/fuzz_tcp.c;
# needs clang); not part of `make test`.
.PHONY: fuzz-tcp
fuzz: fuzz-tcp
fuzz-tcp:
	@mkdir -p $(BUILD)/fuzz/corpus_tcp
	$(FUZZ_CC) tests/coll/fuzz_tcp.c common/common.c -o $(BUILD)/fuzz/fuzz_tcp -lpthread
	$(BUILD)/fuzz/fuzz_tcp -max_total_time=$(FUZZ_SECS) -max_len=4096 \
		-print_final_stats=1 $(BUILD)/fuzz/corpus_tcp tests/coll/fuzz_tcp_seeds
