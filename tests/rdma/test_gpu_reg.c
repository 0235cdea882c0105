/* The provider's binding to gpu/ on the backends this machine has (cpu
 * always, Vulkan on lavapipe when present, CUDA where a driver and a GPU
 * are): the facts fed to the registration policy, the decision, the
 * DMA-BUF export, and the staging copies through real device memory. */
#include <pthread.h>
#include <unistd.h>

#include "../../rdma/internal.h"
#include "zbmd/gpu.h"
#include "tap.h"

/* Staging copies from several lanes at once through one binding: each
 * thread round-trips its own device buffer; gpu/ wants one context's
 * calls serialised, which rdma__gpu_copy does (TSan checks it). */
struct stage_thr {
	struct rdma_gpu_iface *gi;
	gpu_ptr_t dev;
	int id, bad;
};

static void *stage_run(void *arg)
{
	struct stage_thr *t = arg;
	static _Thread_local uint8_t s[16384], d[16384];
	for (int it = 0; it < 40; it++) {
		memset(s, (it * 7 + t->id * 31) & 0xff, sizeof(s));
		memset(d, 0, sizeof(d));
		if (rdma__gpu_copy(t->gi, false, (void *)(uintptr_t)t->dev, s, sizeof(s)) ||
		    rdma__gpu_copy(t->gi, true, d, (void *)(uintptr_t)t->dev, sizeof(d)) ||
		    memcmp(s, d, sizeof(s)))
			t->bad++;
	}
	return NULL;
}

static void check_backend(enum gpu_backend b, const char *name)
{
	struct gpu_options o;
	struct gpu_ctx *g = NULL;
	struct rdma_gpu_iface gi;
	struct rdma_reg_inputs in;
	char why[200];
	gpu_ptr_t dev = 0;
	uint8_t src[4096], dst[4096];
	void *pinned = NULL;
	int rc;

	/* a backend this machine lacks is skipped; the cpu backend always
	 * works, and one the probe found must open */
	if (b != GPU_CPU && gpu_backend_probe(b, why, sizeof(why)) < 0) {
		tap_skip(8, why);
		return;
	}
	gpu_options_default(&o);
	o.backend = b;
	rc = gpu_open(&o, &g, why, sizeof(why));
	if (rc) {
		ok(0, "%s: the backend opens (%s)", name, why);
		tap_skip(7, "open failed");
		return;
	}
	rdma__gpu_iface_init(&gi, g);
	is_str(gi.name, name, "%s: bound to the %s backend", name, name);
	ok(gi.host_memory == (b == GPU_CPU) && gi.peermem_ok == (b == GPU_CUDA) &&
	   (gi.dmabuf_export != NULL) == gpu_ctx_device(g)->dmabuf,
	   "%s: host memory %s; peer memory %s; DMA-BUF export %s", name,
	   gi.host_memory ? "yes" : "no", gi.peermem_ok ? "if loaded" : "never",
	   gi.dmabuf_export ? "yes" : "no");
	/* as if the verbs device took DMA-BUF registrations */
	rdma__reg_inputs(&gi, true, NET_MEM_GPU, &in);
	enum rdma_reg_path p = rdma__reg_decide(&in, why, sizeof(why));
	enum rdma_reg_path want = b == GPU_CPU ? RDMA_REG_HOST
				  : gi.dmabuf_export ? RDMA_REG_DMABUF
				  : in.peermem ? RDMA_REG_PEERMEM : RDMA_REG_STAGING;
	ok(p == want, "%s: GPU buffers registered by path '%s' (%s)", name,
	   rdma__reg_path_name(p), why);
	for (int i = 0; i < 4096; i++)
		src[i] = (uint8_t)(i * 5 + 1);
	memset(dst, 0, sizeof(dst));
	rc = gpu_alloc(g, 4096, &dev);
	ok(rc == 0 && gi.copy_h2d(g, (void *)(uintptr_t)dev, src, 4096) == 0 &&
	   gi.copy_d2h(g, dst, (void *)(uintptr_t)dev, 4096) == 0 && memcmp(src, dst, 4096) == 0,
	   "%s: staging copies host -> device -> host intact", name);
	ok(gi.host_alloc(g, 1 << 20, &pinned) == 0 && pinned != NULL, "%s: staging buffer allocated", name);
	if (pinned) {
		memset(pinned, 0xab, 1 << 20);
		gi.host_free(g, pinned);
	}
	ok(gi.copy_d2h(g, dst, (void *)(uintptr_t)(1ull << 62), 4096) != 0,
	   "%s: a copy from outside the pool is refused, not a fault", name);
	if (gi.dmabuf_export) {
		int fd = -1;
		uint64_t off = 0;
		rc = dev ? gi.dmabuf_export(g, (void *)(uintptr_t)(dev + 64), 1000, &fd, &off) : -1;
		ok(rc == 0 && fd >= 0 && off == ((dev + 64) & (uint64_t)(sysconf(_SC_PAGESIZE) - 1)),
		   "%s: the range exports as a DMA-BUF (fd %d, offset %llu)", name, fd,
		   (unsigned long long)off);
		if (fd >= 0)
			close(fd);
	} else {
		int fd = 7;
		uint64_t off = 7;
		rc = gpu_dmabuf_export(g, dev, 1000, &fd, &off);
		ok(rc == ZB_ERR_UNSUPPORTED && fd == -1 && off == 0,
		   "%s: not offered, and the backend refuses a DMA-BUF export (%d)", name, rc);
	}
	struct stage_thr th[3];
	pthread_t tid[3];
	int made = 0, bad = 0;
	for (int i = 0; i < 3; i++) {
		th[i] = (struct stage_thr){.gi = &gi, .id = i};
		if (gpu_alloc(g, 16384, &th[i].dev) == 0 &&
		    pthread_create(&tid[i], NULL, stage_run, &th[i]) == 0)
			made++;
	}
	for (int i = 0; i < made; i++) {
		pthread_join(tid[i], NULL);
		bad += th[i].bad;
	}
	for (int i = 0; i < 3; i++)
		if (th[i].dev)
			gpu_free(g, th[i].dev);
	ok(made == 3 && bad == 0, "%s: staging copies from 3 threads at once, 40 round trips each, "
	   "intact (%d bad)", name, bad);
	gpu_free(g, dev);
	gpu_close(g);
}

int main(void)
{
	struct rdma_gpu_iface gi;
	struct rdma_reg_inputs in;

	tap_plan(26);
	rdma__gpu_iface_init(&gi, NULL);
	rdma__reg_inputs(&gi, true, NET_MEM_GPU, &in);
	ok(gi.gctx == NULL && rdma__reg_decide(&in, NULL, 0) == RDMA_REG_NONE,
	   "no gpu context: GPU registrations refused");
	rdma__reg_inputs(&gi, false, NET_MEM_HOST, &in);
	ok(rdma__reg_decide(&in, NULL, 0) == RDMA_REG_HOST, "host memory needs no gpu context");
	check_backend(GPU_CPU, "cpu");
	check_backend(GPU_VULKAN, "vulkan");
	check_backend(GPU_CUDA, "cuda");
	return tap_done();
}
