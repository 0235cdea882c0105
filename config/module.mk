# config/: INI schema (one table), inih-driven parser with FILE:LINE errors,
# cfg_dump, docs/config.md generator, `zbmd check-config` / `config-doc`.
# Builds and tests without DPDK.
MODULES += config
config_DEPS := common
config_LDLIBS := $(shell $(PKG_CONFIG) --libs inih)
config_CFLAGS := $(shell $(PKG_CONFIG) --cflags inih)
config_SUMMARY := INI schema + check-config (inih $(shell $(PKG_CONFIG) --modversion inih 2>/dev/null || echo MISSING))
TSAN_MODULES += config
