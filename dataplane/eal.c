/* dataplane/eal.c — EAL arguments from [eal], the node lock, rte_eal_init.
 *
 * The node lock. DPDK's primary process takes an fcntl write lock on
 * RUNTIME_DIR/config; a second primary with the same --file-prefix fails deep
 * inside rte_eal_init with "Cannot create lock on ...". We detect that up
 * front: a zbmd node holds flock(RUNTIME_DIR/zbmd.lock) for its lifetime
 * (its pid written inside), and we also probe DPDK's own lock with F_GETLK so
 * that any other DPDK primary (testpmd, ...) is named too. F_GETLK takes no
 * lock, so closing the probe fd cannot drop the lock DPDK takes later.
 */
#include "internal.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>

int dp__err(struct dp_err *err, int rc, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
	}
	return rc;
}

int dp_runtime_dir(const char *file_prefix, char *out, size_t outlen)
{
	ZB_ASSERT(file_prefix != NULL);
	ZB_ASSERT(out != NULL);
	/* Same rule as DPDK's eal_create_runtime_dir(). */
	const char *base = "/var/run";
	if (getuid() != 0) {
		const char *xdg = getenv("XDG_RUNTIME_DIR");
		base = xdg && xdg[0] ? xdg : "/tmp";
	}
	int n = snprintf(out, outlen, "%s/dpdk/%s", base, file_prefix);
	return n < 0 || (size_t)n >= outlen ? -ENOSPC : 0;
}

/* ---- argv builder --------------------------------------------------------- */

struct argv_buf {
	char *buf;
	size_t len, used;
	char **argv;
	int max, argc;
	int rc;
};

static void push(struct argv_buf *a, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void push(struct argv_buf *a, const char *fmt, ...)
{
	if (a->rc)
		return;
	if (a->argc + 1 >= a->max) {  /* keep room for the NULL terminator */
		a->rc = -ENOSPC;
		return;
	}
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(a->buf + a->used, a->len - a->used, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n + 1 > a->len - a->used) {
		a->rc = -ENOSPC;
		return;
	}
	a->argv[a->argc++] = a->buf + a->used;
	a->argv[a->argc] = NULL;
	a->used += (size_t)n + 1;
}

/* "-l 0-3" when every lcore has the CPU of its number in our affinity set,
 * else "--lcores 0@c0,1@c1,..." mapping lcore k to the k-th allowed CPU
 * (round robin): local clusters run several 4-lcore nodes on 2 cores. */
static void push_lcores(struct argv_buf *a, const struct zb_config *cfg)
{
	cpu_set_t set;
	int cpus[CPU_SETSIZE], ncpu = 0;
	bool fits = true;

	CPU_ZERO(&set);
	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		for (int c = 0; c < 2; c++)
			CPU_SET(c, &set);
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set))
			cpus[ncpu++] = c;
	ZB_ASSERT(ncpu > 0);
	for (unsigned i = 0; i < cfg->eal.lcore_count; i++)
		if (cfg->eal.lcore_list[i] >= CPU_SETSIZE ||
		    !CPU_ISSET(cfg->eal.lcore_list[i], &set))
			fits = false;
	if (fits) {
		push(a, "-l");
		push(a, "%s", cfg->eal.lcores);
		return;
	}
	char map[CFG_MAX_LCORES * 12];
	size_t used = 0;
	for (unsigned i = 0; i < cfg->eal.lcore_count && used < sizeof(map); i++)
		used += (size_t)snprintf(map + used, sizeof(map) - used, "%s%u@%d",
					 i ? "," : "", cfg->eal.lcore_list[i],
					 cpus[i % (unsigned)ncpu]);
	if (used >= sizeof(map)) {
		a->rc = -ENOSPC;
		return;
	}
	push(a, "--lcores");
	push(a, "%s", map);
}

int dp_eal_args(const struct zb_config *cfg, const char *prog, char *buf,
		size_t buflen, char **argv, int argv_max, int *argc)
{
	ZB_ASSERT(cfg != NULL && buf != NULL && argv != NULL);
	ZB_ASSERT(argc != NULL && argv_max > 1);
	struct argv_buf a = {.buf = buf, .len = buflen, .argv = argv,
			     .max = argv_max};
	bool any_pci = false;

	if (cfg->eal.lcore_count == 0)
		return -EINVAL;
	push(&a, "%s", prog ? prog : "zbmd");
	push_lcores(&a, cfg);
	push(&a, "-m");
	push(&a, "%u", cfg->eal.memory_mb);
	if (!cfg->eal.hugepages)
		push(&a, "--no-huge");
	if (cfg->eal.file_prefix[0])
		push(&a, "--file-prefix=%s", cfg->eal.file_prefix);
	if (cfg->eal.log_level)
		push(&a, "--log-level=%u", cfg->eal.log_level);
	for (unsigned i = 0; i < CFG_MAX_PORTS; i++) {
		const struct cfg_port *p = &cfg->ports[i];
		if (!p->present)
			continue;
		if (p->pci[0]) {
			any_pci = true;
			push(&a, "-a");
			push(&a, "%s", p->pci);
		} else if (p->vdev[0]) {
			push(&a, "--vdev");
			push(&a, "%s", p->vdev);
		}
	}
	if (!any_pci)
		push(&a, "--no-pci");
	/* extra_args: blank-separated words, no quoting. */
	char extra[CFG_STR];
	snprintf(extra, sizeof(extra), "%s", cfg->eal.extra_args);
	char *save = NULL;
	for (char *w = strtok_r(extra, " \t", &save); w;
	     w = strtok_r(NULL, " \t", &save))
		push(&a, "%s", w);
	if (a.rc)
		return a.rc;
	*argc = a.argc;
	return 0;
}

/* ---- node lock ------------------------------------------------------------ */

static int mkdir_p(char *path)
{
	for (char *s = path + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = 0;
		int rc = mkdir(path, 0700);
		*s = '/';
		if (rc && errno != EEXIST)
			return -errno;
	}
	if (mkdir(path, 0700) && errno != EEXIST)
		return -errno;
	return 0;
}

/* pid of a process holding an fcntl write lock on path, 0 if none. */
static pid_t dpdk_lock_holder(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
	pid_t pid = 0;
	if (fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK)
		pid = fl.l_pid > 0 ? fl.l_pid : -1;
	close(fd);  /* we held no lock on it: nothing is released */
	return pid;
}

int dp__lock_prefix(const char *prefix, struct dp_err *err)
{
	ZB_ASSERT(prefix != NULL);
	ZB_ASSERT(dp__node.lock_fd < 0);
	char dir[512], path[600];
	int rc = dp_runtime_dir(prefix[0] ? prefix : "rte", dir, sizeof(dir));
	if (rc)
		return dp__err(err, rc, "runtime dir for file-prefix '%s' too long",
			       prefix);
	rc = mkdir_p(dir);
	if (rc)
		return dp__err(err, rc, "cannot create %s: %s", dir, strerror(-rc));
	snprintf(path, sizeof(path), "%s/zbmd.lock", dir);
	/* The directory may be shared (/tmp/dpdk/PREFIX for a user without
	 * XDG_RUNTIME_DIR): never follow a link planted there, and use only a
	 * plain file of our own, since it is truncated and written below. */
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return dp__err(err, -errno, "cannot open %s: %s%s", path,
			       strerror(errno),
			       errno == ELOOP ? " (a symbolic link: refused)" : "");
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
		close(fd);
		return dp__err(err, -EPERM, "refusing lock file %s: not a regular "
			       "file owned by this user", path);
	}
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		char pid[32] = "";
		ssize_t n = pread(fd, pid, sizeof(pid) - 1, 0);
		pid[n > 0 ? n : 0] = 0;
		pid[strcspn(pid, "\n")] = 0;
		close(fd);
		return dp__err(err, -EBUSY,
			       "another zbmd node is running with file-prefix %s%s%s%s",
			       prefix, pid[0] ? " (pid " : "", pid, pid[0] ? ")" : "");
	}
	snprintf(path, sizeof(path), "%s/config", dir);
	pid_t holder = dpdk_lock_holder(path);
	if (holder) {
		close(fd);
		if (holder > 0)
			return dp__err(err, -EBUSY,
				       "another DPDK primary process (pid %d) is running with file-prefix %s",
				       (int)holder, prefix);
		return dp__err(err, -EBUSY,
			       "another DPDK primary process is running with file-prefix %s",
			       prefix);
	}
	char pid[32];
	int len = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
	if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len) {
		/* the lock holds even without the pid: only the message loses it */
	}
	dp__node.lock_fd = fd;
	snprintf(dp__node.lock_dir, sizeof(dp__node.lock_dir), "%s", dir);
	return 0;
}

/* The runtime dir's files of DPDK's primary (its config, memory layout
 * arrays, hugepage info, multi-process and telemetry sockets) and our lock: DPDK 22.11
 * leaves them after rte_eal_cleanup, so every stopped node left its
 * /var/run/dpdk/PREFIX behind. Removed while the lock is still held (a
 * node starting with the prefix now waits for it or finds it gone); a
 * file of anyone else's keeps the directory. */
static void remove_runtime_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d)) != NULL) {
		const char *f = e->d_name;
		if (!strcmp(f, "config") || !strcmp(f, "hugepage_info") ||
		    !strncmp(f, "fbarray_", 8) || !strncmp(f, "mp_socket", 9) ||
		    !strncmp(f, "dpdk_telemetry", 14) ||
		    !strcmp(f, "zbmd.lock"))
			(void)unlinkat(dirfd(d), f, 0);
	}
	closedir(d);
	(void)rmdir(dir);
}

void dp__unlock_prefix(void)
{
	if (dp__node.lock_fd >= 0) {
		if (ftruncate(dp__node.lock_fd, 0) != 0) {
			/* stale pid is harmless: the flock is what counts */
		}
		remove_runtime_dir(dp__node.lock_dir);
		close(dp__node.lock_fd);  /* releases the flock */
		dp__node.lock_fd = -1;
	}
}

/* HugePages_Total of /proc/meminfo (the default size), -1 unknown. */
static long dp__hugepages_total(void)
{
	char line[128];
	long n = -1;
	FILE *f = fopen("/proc/meminfo", "r");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "HugePages_Total: %ld", &n) == 1)
			break;
	if (f)
		fclose(f);
	return n;
}

int dp__eal_start(const struct zb_config *cfg, struct dp_err *err)
{
	ZB_ASSERT(cfg != NULL);
	ZB_ASSERT(!dp__node.eal_up);
	static char buf[4096];
	static char *argv[DP_EAL_ARGS_MAX];
	int argc = 0;
	int rc = dp_eal_args(cfg, "zbmd", buf, sizeof(buf), argv,
			     DP_EAL_ARGS_MAX, &argc);
	if (rc)
		return dp__err(err, ZB_ERR_CONFIG,
			       "cannot build EAL arguments from [eal]: %s",
			       zb_strerror(rc));
	/* more memory than the machine has: the EAL reserves it all up front
	 * and, past what it can map, failed deep inside (memory_mb = 1048576
	 * on 24 GiB: SIGSEGV in rte_eal_init after 13 s) */
	uint64_t ram = zb_phys_mem_bytes();
	if (ram > 0 && ((uint64_t)cfg->eal.memory_mb << 20) > ram)
		return dp__err(err, ZB_ERR_CONFIG,
			       "[eal] memory_mb = %u is more than this machine's memory "
			       "(%.0f MiB)", cfg->eal.memory_mb, (double)ram / (1 << 20));
	rc = rte_eal_init(argc, argv);
	if (rc < 0) {
		int e = rte_errno;
		if (e == EALREADY)
			return dp__err(err, -EALREADY,
				       "the EAL was initialised before in this process");
		if (cfg->eal.hugepages && dp__hugepages_total() == 0)
			return dp__err(err, ZB_ERR_CONFIG,
				       "rte_eal_init failed: [eal] hugepages = true but this "
				       "machine has no hugepages reserved (HugePages_Total 0): "
				       "reserve some (scripts/hugepages.sh) or set hugepages = "
				       "false");
		if (e == EINVAL && cfg->eal.extra_args[0])
			return dp__err(err, ZB_ERR_CONFIG,
				       "rte_eal_init refused its arguments: [eal] extra_args "
				       "= '%s' holds a flag the EAL does not take (see the "
				       "EAL lines above)", cfg->eal.extra_args);
		return dp__err(err, ZB_ERR_DEVICE,
			       "rte_eal_init failed: %s (see the EAL lines above)",
			       rte_strerror(e));
	}
	dp__node.eal_up = true;
	return 0;
}
