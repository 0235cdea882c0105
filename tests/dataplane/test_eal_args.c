/* dp_eal_args: the EAL argv built from [eal] and the ports. No EAL starts. */
#include "tap.h"
#include "zbmd/common.h"
#include "zbmd/config.h"
#include "zbmd/dataplane.h"

#include <sched.h>
#include <string.h>

static char buf[4096];
static char *argv_[DP_EAL_ARGS_MAX];
static int argc_;

static int build(const char *ini)
{
	static struct zb_config cfg;
	struct cfg_error err;
	int rc = cfg_load_string(&cfg, ini, "test.ini", &err);
	if (rc) {
		tap_diag("config: %s", err.msg);
		return rc;
	}
	return dp_eal_args(&cfg, "zbmd", buf, sizeof(buf), argv_, DP_EAL_ARGS_MAX,
			   &argc_);
}

static char joined[4096];
static const char *join(void)
{
	size_t used = 0;
	joined[0] = 0;
	for (int i = 0; i < argc_; i++)
		used += (size_t)snprintf(joined + used, sizeof(joined) - used, "%s%s",
					 i ? " " : "", argv_[i]);
	return joined;
}

int main(void)
{
	tap_plan(9);
	const char *head = "[node]\nid = 1\n[cluster]\nid = 2\n";
	char ini[2048];

	snprintf(ini, sizeof(ini),
		 "%s[eal]\nlcores = 0\nmemory_mb = 512\nhugepages = false\n"
		 "file_prefix = zbmd-node-x\nlog_level = 5\n"
		 "extra_args = --no-telemetry  --huge-unlink\n"
		 "[port.0]\nvdev = net_null0,no-rx=1\n[port.1]\nvdev = net_ring0\n",
		 head);
	is_int(build(ini), 0, "vdev-only config builds");
	is_str(join(),
	       "zbmd -l 0 -m 512 --no-huge --file-prefix=zbmd-node-x --log-level=5 "
	       "--vdev net_null0,no-rx=1 --vdev net_ring0 --no-pci --no-telemetry "
	       "--huge-unlink",
	       "lcores, memory, no-huge, prefix, vdevs, no-pci, extra args split");
	ok(argv_[argc_] == NULL, "argv is NULL-terminated");

	snprintf(ini, sizeof(ini),
		 "%s[eal]\nlcores = 0\nmemory_mb = 2048\nhugepages = true\n"
		 "[port.0]\npci = 3b:00.0\n[port.1]\nvdev = net_tap0,iface=zb0\n",
		 head);
	is_int(build(ini), 0, "pci config builds");
	ok(strstr(join(), "-a ") != NULL && strstr(join(), "3b:00.0") != NULL &&
		   strstr(join(), "--no-pci") == NULL &&
		   strstr(join(), "--no-huge") == NULL,
	   "pci port: -a ADDR, no --no-pci, hugepages kept (%s)", join());
	ok(strstr(join(), "--vdev net_tap0,iface=zb0") != NULL,
	   "a vdev beside a pci port");

	/* lcore ids beyond the CPUs we may run on: --lcores maps them */
	snprintf(ini, sizeof(ini), "%s[eal]\nlcores = 0-%d\n", head,
		 CFG_MAX_LCORES - 1);
	is_int(build(ini), 0, "all lcores builds");
	cpu_set_t set;
	sched_getaffinity(0, sizeof(set), &set);
	/* (a machine with as many CPUs as lcore ids has nothing to map: that
	 * is a skip, not a pass) */
	if (CPU_COUNT(&set) >= CFG_MAX_LCORES)
		tap_skip(1, "as many CPUs as lcore ids: no --lcores mapping to check");
	else
		ok(strstr(join(), "--lcores 0@") != NULL && strstr(join(), ",1@") != NULL,
		   "more lcores than CPUs: --lcores id@cpu mapping");

	/* a tiny buffer: -ENOSPC, never an overflow */
	static struct zb_config cfg;
	struct cfg_error err;
	cfg_load_string(&cfg, ini, "t", &err);
	char small[16];
	is_int(dp_eal_args(&cfg, "zbmd", small, sizeof(small), argv_,
			   DP_EAL_ARGS_MAX, &argc_),
	       -ENOSPC, "a small buffer gives -ENOSPC");
	return tap_done();
}
