# config/: INI schema (one table), inih-driven parser with FILE:LINE errors,
# cfg_dump, docs/config.md generator, `zbmd check-config` / `config-doc`.
# Builds and tests without DPDK.
MODULES += config
config_DEPS := common
config_LDLIBS := $(shell $(PKG_CONFIG) --libs inih)
config_CFLAGS := $(shell $(PKG_CONFIG) --cflags inih)
config_SUMMARY := INI schema + check-config (inih $(shell $(PKG_CONFIG) --modversion inih 2>/dev/null || echo MISSING))
TSAN_MODULES += config

# libFuzzer on the loader, with the dump's round trip as its oracle
# (tests/config/fuzz_cfg.c; needs clang); not part of `make test`.
.PHONY: fuzz-config
fuzz: fuzz-config
fuzz-config:
	@mkdir -p $(BUILD)/fuzz/corpus_cfg
	$(FUZZ_CC) $(config_CFLAGS) tests/config/fuzz_cfg.c \
		$(filter-out config/cli.c,$(wildcard config/*.c)) common/common.c \
		-o $(BUILD)/fuzz/fuzz_cfg $(config_LDLIBS) -lpthread
	$(BUILD)/fuzz/fuzz_cfg -max_total_time=$(FUZZ_SECS) -max_len=8192 \
		-print_final_stats=1 $(BUILD)/fuzz/corpus_cfg config/examples \
		tests/config/data/good tests/config/data/bad
