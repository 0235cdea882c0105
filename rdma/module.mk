# rdma/: the libibverbs provider of the net interface (rdma_net_ops).
# It codes against include/zbmd/net.h, reads struct zb_config (config/) and
# uses gpu/ for GPU memory registration (copies, pinned staging buffers).
MODULES += rdma
RDMA_CORE_VERSION := $(shell dpkg-query -W -f='$${Version}' rdma-core 2>/dev/null || $(PKG_CONFIG) --modversion libibverbs 2>/dev/null || echo unknown)
RDMA_DEVICES := $(shell ls /sys/class/infiniband 2>/dev/null | tr '\n' ' ')
# coll (the net registry, dataplane/net.c) once it is in the tree: provider.c
# then registers rdma_net_ops with net_register() from a constructor.
rdma_DEPS := $(if $(wildcard dataplane/net.c),coll metrics) config gpu common
rdma_CFLAGS := -DZB_RDMA_CORE_VERSION='"$(RDMA_CORE_VERSION)"'
rdma_LDLIBS := -libverbs
rdma_SUMMARY := verbs provider built (rdma-core $(RDMA_CORE_VERSION)); devices: $(if $(strip $(RDMA_DEVICES)),$(strip $(RDMA_DEVICES)),none here (tests skip))
TSAN_MODULES += rdma

# make bench-rdma: the provider's loopback bandwidth/latency next to
# rdma-core's ibv_rc_pingpong (the peer), on the first RDMA device.
.PHONY: bench-rdma
bench-rdma: $(BUILD)/tests/rdma/helper_bw
	@echo "== zbmd rdma provider (loopback RC pair) =="
	@$(BUILD)/tests/rdma/helper_bw
	@if ibv_devices 2>/dev/null | grep -q '^ *[a-z]'; then \
		echo "== peer: ibv_rc_pingpong (rdma-core), 4 MiB x 1000 over loopback =="; \
		ibv_rc_pingpong -s 4194304 -n 1000 >/dev/null 2>&1 & srv=$$!; sleep 1; \
		ibv_rc_pingpong -s 4194304 -n 1000 localhost 2>&1 | grep -i 'bytes in'; \
		wait $$srv; \
	else echo "== peer: ibv_rc_pingpong skipped: no RDMA device =="; fi
