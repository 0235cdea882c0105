# gpu/: backend interface + cpu, cuda, hip, vulkan backends; pools; tensors;
# the host reduction used by the collectives.  No DPDK, no config module:
# `make test-gpu` (or `make -C <tree> gpu-only`, see docs/gpu.md) needs only
# a compiler, OpenBLAS and libnuma.
MODULES += gpu
gpu_DEPS := common
gpu_SRCS := $(wildcard gpu/*.c)
gpu_CFLAGS :=
gpu_LDLIBS := -lopenblas -lnuma
TSAN_MODULES += gpu
GPU_BUILT :=
GPU_NOT :=

# The reduction loops are meant to vectorise.
$(BUILD)/obj/gpu/host_reduce.o: CFLAGS += -O3

# cpu: OpenBLAS + libnuma (required).
GPU_BUILT += cpu

# vulkan: the loader headers + glslc for the SPIR-V, compiled in and linked.
GPU_GLSLC := $(shell command -v glslc 2>/dev/null)
GPU_HAVE_VK := $(shell $(PKG_CONFIG) --exists vulkan 2>/dev/null && echo 1)
ifeq ($(GPU_HAVE_VK)$(if $(GPU_GLSLC),1),11)
GPU_SPV_C := $(BUILD)/gen/gpu/vk_spirv.c
GPU_SPV_DIR := $(BUILD)/gen/gpu/spv
GPU_SPV_NAMES := $(foreach t,0 1 2 3 4 5,reduce_$(t) scale_$(t)) sgemm
gpu_SRCS += $(GPU_SPV_C)
gpu_CFLAGS += -DZB_GPU_HAVE_VULKAN $(shell $(PKG_CONFIG) --cflags vulkan)
gpu_LDLIBS += $(shell $(PKG_CONFIG) --libs vulkan)
GPU_BUILT += vulkan
GPU_SHADER_DEPS := gpu/shaders/common.glsl gpu/shaders/embed.sh
$(GPU_SPV_DIR)/reduce_%.spv: gpu/shaders/reduce.comp $(GPU_SHADER_DEPS)
	@mkdir -p $(@D)
	$(GPU_GLSLC) --target-env=vulkan1.1 -O -DDT=$* $< -o $@
$(GPU_SPV_DIR)/scale_%.spv: gpu/shaders/scale.comp $(GPU_SHADER_DEPS)
	@mkdir -p $(@D)
	$(GPU_GLSLC) --target-env=vulkan1.1 -O -DDT=$* $< -o $@
$(GPU_SPV_DIR)/sgemm.spv: gpu/shaders/sgemm.comp
	@mkdir -p $(@D)
	$(GPU_GLSLC) --target-env=vulkan1.1 -O $< -o $@
$(GPU_SPV_C): $(foreach n,$(GPU_SPV_NAMES),$(GPU_SPV_DIR)/$(n).spv)
	@mkdir -p $(@D)
	gpu/shaders/embed.sh $@ $(foreach n,$(GPU_SPV_NAMES),$(n)=$(GPU_SPV_DIR)/$(n).spv)
else
gpu_CFLAGS += -DZB_GPU_VULKAN_WHY='"$(if $(GPU_GLSLC),,no glslc, )$(if $(GPU_HAVE_VK),,no vulkan.pc, )at build time"'
GPU_NOT += vulkan(no $(if $(GPU_GLSLC),,glslc )$(if $(GPU_HAVE_VK),,vulkan headers))
endif

# The cuda/hip kernel source, embedded as a string for NVRTC / hipRTC.
GPU_RTC_C := $(BUILD)/gen/gpu/rtc_source.c
gpu_SRCS += $(GPU_RTC_C)
$(GPU_RTC_C): gpu/kernels/zb_kernels.cu gpu/shaders/embed_text.sh
	@mkdir -p $(@D)
	gpu/shaders/embed_text.sh $@ gpu__rtc_source $<

# cuda: compiled against the CUDA headers when present, loaded at run time
# with dlopen (libcuda.so.1, libcublas, libnvrtc): the binary runs anywhere.
CUDA_HOME ?= /usr/local/cuda
ifneq ($(wildcard $(CUDA_HOME)/include/cuda.h),)
$(BUILD)/obj/gpu/cuda_backend.o: CFLAGS += -DZB_GPU_HAVE_CUDA -isystem $(CUDA_HOME)/include -DZB_CUDA_LIBDIR='"$(CUDA_HOME)/lib64"'
GPU_BUILT += cuda(dlopen)
else
GPU_NOT += cuda(no $(CUDA_HOME)/include/cuda.h)
endif

# hip: the same through the HIP runtime and hipRTC (dlopen); the kernel
# source is also compile-checked with hipcc by tests/gpu/test_kernels_compile.sh.
GPU_HIP_HDR := $(firstword $(wildcard /usr/include/hip/hip_runtime_api.h /opt/rocm/include/hip/hip_runtime_api.h))
ifneq ($(GPU_HIP_HDR),)
$(BUILD)/obj/gpu/hip_backend.o: CFLAGS += -DZB_GPU_HAVE_HIP -D__HIP_PLATFORM_AMD__ $(if $(filter /opt/%,$(GPU_HIP_HDR)),-isystem /opt/rocm/include)
GPU_BUILT += hip(dlopen)
else
GPU_NOT += hip(no HIP headers)
endif
GPU_HIPCC := $(shell command -v hipcc 2>/dev/null)

gpu_SUMMARY = $(GPU_BUILT)$(if $(GPU_NOT),; not built: $(GPU_NOT))

# ---- targets --------------------------------------------------------------
# bench-gpu: the benchmark through zbmd (never part of make test).
# gpu-only / test-gpu-only / bench-gpu-only: build and run only common + gpu
# + its tests and a stand-alone gpu-info/bench helper, with no DPDK and no
# other module: what a GPU machine needs (see docs/gpu.md).  BINS= drops the
# zbmd binary (which links every module) from the test prerequisites.
GPU_ONLY_GOALS = $(BUILD)/lib/libzb_gpu.a \
	$(patsubst tests/%.c,$(BUILD)/tests/%.t,$(wildcard tests/gpu/test_*.c)) \
	$(patsubst tests/%.c,$(BUILD)/tests/%,$(wildcard tests/gpu/helper_*.c))
GPU_ONLY_RUN = $(patsubst tests/%.c,$(BUILD)/tests/%.t,$(wildcard tests/gpu/test_*.c)) \
	$(wildcard tests/gpu/test_*.sh)
.PHONY: bench-gpu gpu-only test-gpu-only bench-gpu-only
bench-gpu: $(BUILD)/bin/zbmd
	$(BUILD)/bin/zbmd bench gpu $(GPU_BENCH_ARGS)
gpu-only:
	$(MAKE) BINS= $(GPU_ONLY_GOALS)
	@echo "gpu-only: $(gpu_SUMMARY)"
test-gpu-only: gpu-only
	ZBMD_GPU_CLI=$(abspath $(BUILD))/tests/gpu/helper_gpucli $(PROVE) $(GPU_ONLY_RUN)
bench-gpu-only: gpu-only
	$(BUILD)/tests/gpu/helper_gpucli bench gpu $(GPU_BENCH_ARGS)
