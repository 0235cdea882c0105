# gpu/: backend interface + cpu, cuda, hip, vulkan backends; pools; tensors;
# the host reduction used by the collectives.  No DPDK, no config module.
MODULES += gpu
gpu_DEPS := common
gpu_SRCS := $(wildcard gpu/*.c)
gpu_CFLAGS :=
gpu_LDLIBS :=
TSAN_MODULES += gpu
# The reduction loops are meant to vectorise.
$(BUILD)/obj/gpu/host_reduce.o: CFLAGS += -O3
gpu_SUMMARY := host reductions
