# rdma/: the libibverbs provider of the net interface (rdma_net_ops).
# It codes against include/zbmd/net.h (header only: the coll registry is not
# on main yet) and reads struct zb_config (config/, for the tests' defaults).
MODULES += rdma
RDMA_CORE_VERSION := $(shell dpkg-query -W -f='$${Version}' rdma-core 2>/dev/null || $(PKG_CONFIG) --modversion libibverbs 2>/dev/null || echo unknown)
RDMA_DEVICES := $(shell ls /sys/class/infiniband 2>/dev/null | tr '\n' ' ')
rdma_DEPS := config common
rdma_CFLAGS := -DZB_RDMA_CORE_VERSION='"$(RDMA_CORE_VERSION)"'
rdma_LDLIBS := -libverbs
rdma_SUMMARY := verbs provider built (rdma-core $(RDMA_CORE_VERSION)); devices: $(if $(strip $(RDMA_DEVICES)),$(strip $(RDMA_DEVICES)),none here (tests skip))
TSAN_MODULES += rdma
