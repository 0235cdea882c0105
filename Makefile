# zbmd — top-level Makefile.
#
#   make deps    install every Debian package the project needs (idempotent)
#   make         build libraries, the zbmd binary and all tests; print a summary
#   make test    build and run every test under prove (TAP)
#   make asan    the same tests built with AddressSanitizer (+UBSan)
#   make tsan    the threaded modules' tests built with ThreadSanitizer
#   make bench   the main job: a local 4-node ring all-reduce benchmark
#
# Each module folder has a module.mk that declares itself (see common/module.mk
# for the smallest example):
#   MODULES        += name
#   name_SRCS      := sources (default: name/*.c)
#   name_DEPS      := modules it links against, in link order (transitive)
#   name_CFLAGS    := extra compile flags;  name_LDLIBS := extra link flags
#   name_TSAN      := 1 when its tests belong in `make tsan`
#   name_SUMMARY   := one line for the build summary (what was built, what not and why)
# Tests: tests/<module>/test_*.c become $(BUILD)/tests/<module>/test_*.t,
# linked with the module and its deps; tests/<module>/test_*.sh run as they are.

SHELL        := /bin/bash
BUILD        ?= build
SAN          ?=
CC           ?= cc
PKG_CONFIG   ?= pkg-config
TEST_TIMEOUT ?= 900

CSTD     := -std=gnu11
WARN     := -Wall -Wextra -Werror -Wno-missing-field-initializers
OPT      ?= -O2 -g
CPPFLAGS += -Iinclude -D_GNU_SOURCE
CFLAGS   += $(CSTD) $(OPT) $(WARN) -pthread -fno-strict-aliasing -MMD -MP
LDFLAGS  += -pthread
LDLIBS_BASE := -lm -ldl

ifeq ($(SAN),asan)
CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer -DZB_DEBUG
LDFLAGS += -fsanitize=address,undefined
else ifeq ($(SAN),tsan)
CFLAGS  += -fsanitize=thread -fno-omit-frame-pointer -DZB_DEBUG
LDFLAGS += -fsanitize=thread
endif

MODULES :=
TSAN_MODULES :=
BINS :=

.PHONY: all deps test asan tsan bench clean summary check-tools
all: summary

include common/module.mk
-include config/module.mk
-include actors/module.mk
-include gpu/module.mk
include dataplane/module.mk
-include rdma/module.mk
-include control/module.mk
-include cli/module.mk
-include bench/module.mk

# ---- generic per-module rules ---------------------------------------------
define MODULE_RULES
$(1)_SRCS ?= $$(wildcard $(1)/*.c)
$(1)_OBJS := $$(patsubst %.c,$(BUILD)/obj/%.o,$$($(1)_SRCS))
$(1)_LIB  := $(BUILD)/lib/libzb_$(1).a
$(1)_LINK := $$($(1)_LIB) $$(foreach d,$$($(1)_DEPS),$(BUILD)/lib/libzb_$$(d).a)
$(1)_ALL_LDLIBS = $$($(1)_LDLIBS) $$(foreach d,$$($(1)_DEPS),$$($$(d)_LDLIBS))
$(1)_ALL_CFLAGS = $$($(1)_CFLAGS) $$(foreach d,$$($(1)_DEPS),$$($$(d)_CFLAGS))
$(1)_TEST_SRCS := $$(wildcard tests/$(1)/test_*.c)
$(1)_TESTS := $$(patsubst tests/%.c,$(BUILD)/tests/%.t,$$($(1)_TEST_SRCS))
$(1)_SCRIPTS := $$(sort $$(wildcard tests/$(1)/test_*.sh))
$(1)_HELPER_SRCS := $$(wildcard tests/$(1)/helper_*.c)
$(1)_HELPERS := $$(patsubst tests/%.c,$(BUILD)/tests/%,$$($(1)_HELPER_SRCS))

$$($(1)_OBJS): $(BUILD)/obj/%.o: %.c
	@mkdir -p $$(@D)
	$$(CC) $$(CPPFLAGS) $$(CFLAGS) $$($(1)_ALL_CFLAGS) -c $$< -o $$@

$$($(1)_LIB): $$($(1)_OBJS)
	@mkdir -p $$(@D)
	@rm -f $$@
	$$(AR) rcs $$@ $$^

$$($(1)_TESTS): $(BUILD)/tests/%.t: tests/%.c $$($(1)_LINK)
	@mkdir -p $$(@D)
	$$(CC) $$(CPPFLAGS) -Itests/common $$(CFLAGS) $$($(1)_ALL_CFLAGS) $$< -o $$@ $$(LDFLAGS) $$($(1)_LINK) $$($(1)_ALL_LDLIBS) $$(LDLIBS_BASE)

$$($(1)_HELPERS): $(BUILD)/tests/%: tests/%.c $$($(1)_LINK)
	@mkdir -p $$(@D)
	$$(CC) $$(CPPFLAGS) -Itests/common $$(CFLAGS) $$($(1)_ALL_CFLAGS) $$< -o $$@ $$(LDFLAGS) $$($(1)_LINK) $$($(1)_ALL_LDLIBS) $$(LDLIBS_BASE)

ALL_LIBS    += $$($(1)_LIB)
ALL_TESTS   += $$($(1)_TESTS) $$($(1)_HELPERS)
RUN_TESTS   += $$($(1)_TESTS) $$($(1)_SCRIPTS)
$(1)_RUN    := $$($(1)_TESTS) $$($(1)_SCRIPTS)
-include $$($(1)_OBJS:.o=.d) $$($(1)_TESTS:.t=.d)
endef
$(foreach m,$(MODULES),$(eval $(call MODULE_RULES,$(m))))

TSAN_RUN := $(foreach m,$(TSAN_MODULES),$($(m)_TESTS) $($(m)_SCRIPTS))

# ---- top-level targets ----------------------------------------------------
build-all: $(ALL_LIBS) $(BINS) $(ALL_TESTS)
.PHONY: build-all

summary: build-all
	@echo "================ zbmd build summary ($(BUILD)$(if $(SAN), $(SAN))) ================"
	@$(foreach m,$(MODULES),$(if $($(m)_SUMMARY),echo "  $(m): $($(m)_SUMMARY)";))
	@echo "  binaries: $(BINS)"
	@echo "  tests:    $(words $(RUN_TESTS)) test files"

deps:
	@scripts/deps.sh

PROVE := prove --exec 'timeout -k 10 $(TEST_TIMEOUT)' --timer
export ZBMD_BUILD := $(abspath $(BUILD))
export ZBMD_ROOT  := $(abspath .)

test: build-all
	@echo "running $(words $(RUN_TESTS)) test files under prove"
	$(PROVE) $(RUN_TESTS)

# test-MODULE: only one module's tests, e.g. `make test-actors`
test-%: build-all
	$(PROVE) $($*_RUN)

# ZBMD_TIME_SCALE: how much slower the sanitizers make a node; the few
# tests that bound a duration (a leader elected within 2 s) multiply by it.
asan:
	ZBMD_TIME_SCALE=2 $(MAKE) BUILD=build-asan SAN=asan test

tsan:
	$(MAKE) BUILD=build-tsan SAN=tsan build-all
	ZBMD_TIME_SCALE=3 ZBMD_BUILD=$(abspath build-tsan) \
		TSAN_OPTIONS="suppressions=$(abspath tests/tsan.supp) $$TSAN_OPTIONS" \
		$(PROVE) $(patsubst $(BUILD)/%,build-tsan/%,$(TSAN_RUN))

clean:
	rm -rf build build-asan build-tsan

# ---- the zbmd binary --------------------------------------------------------
$(BUILD)/bin/zbmd: $(cli_LINK)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ -Wl,--start-group $(cli_LINK) -Wl,--end-group $(cli_ALL_LDLIBS) $(LDLIBS_BASE)

# Tests that drive the binary need it built first.
$(ALL_TESTS): | $(BINS)
