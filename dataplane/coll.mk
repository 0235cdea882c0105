# coll: net provider registry, tcp provider, collectives. No DPDK.
MODULES += coll
# dataplane/coll_dpdk*.c host collectives on the DPDK lcores: they belong to
# the dataplane module (module.mk's wildcard picks them up from there).
coll_SRCS := $(filter-out dataplane/coll_dpdk%,$(wildcard dataplane/net.c dataplane/net_tcp*.c dataplane/coll*.c))
# Pull coll_dpdk.o (its constructor registers the "dpdk" collective host)
# into every binary that links the dataplane archive; harmless elsewhere (an
# -u symbol that no archive defines stays undefined and unreferenced).
coll_LDLIBS := -Wl,-u,coll_dpdk_anchor
coll_DEPS := config gpu common
# test_lanes runs channels on their own threads: worth ThreadSanitizer.
TSAN_MODULES += coll
coll_SUMMARY := net registry + tcp provider; ring all-reduce, reduce-scatter, all-gather, broadcast, barrier; bench allreduce, local (--link tcp)

# ---- benchmarks (never part of make test) ----------------------------------
MPICC ?= mpicc
BENCH_ALLREDUCE_ARGS ?= -b 64 -e 64M -f 4 -n 10 -w 2
.PHONY: bench bench-allreduce bench-allreduce-compare

$(BUILD)/bin/mpi_allreduce: bench/mpi_allreduce.c
	@mkdir -p $(@D)
	$(MPICC) -O2 -Wall -o $@ $< -lm

# The main job: a local 4-node ring all-reduce with the best provider that
# works here today (tcp; memif/veth come with the dpdk provider).
bench: $(BUILD)/bin/zbmd
	$(BUILD)/bin/zbmd local --nodes 4 --link tcp -- bench allreduce $(BENCH_ALLREDUCE_ARGS) \
		--json $(BUILD)/allreduce.json --plot $(BUILD)/allreduce.png
	@echo "figures: $(BUILD)/allreduce.json, plot: $(BUILD)/allreduce.png"

bench-allreduce: bench

# zbmd next to Open MPI (shared memory and TCP) in the same run, ratio per size.
bench-allreduce-compare: $(BUILD)/bin/zbmd $(BUILD)/bin/mpi_allreduce
	bench/coll/compare.sh $(COMPARE_ARGS)
