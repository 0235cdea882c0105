# actors/: the actor runtime (plain C11 + pthreads; no DPDK, no config).
MODULES += actors
actors_SRCS := $(wildcard actors/*.c)
actors_DEPS := common
actors_LDLIBS :=
TSAN_MODULES += actors
actors_SUMMARY := actor runtime (workers: pthreads or act_worker_poll)
