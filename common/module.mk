# common/: error strings, dtype tables, half-precision helpers. No deps.
MODULES += common
common_DEPS :=
common_LDLIBS :=
TSAN_MODULES += common
