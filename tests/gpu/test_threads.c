/* Thread safety of what is shared: concurrent probes (the cached probe
 * table), concurrent contexts on one backend (one per thread, the supported
 * model), and gpu_host_reduce from several threads.  Meant for make tsan. */
#include "zbmd/gpu.h"
#include "tap.h"

#include <pthread.h>

#define THREADS 4
#define N 4099

struct job {
	enum gpu_backend be;
	int errors;
	bool ran;
};

static void *worker(void *arg)
{
	struct job *j = arg;
	char why[256];
	struct gpu_options o;
	struct gpu_ctx *ctx;
	static __thread float a[N], b[N], out[N];

	for (int b_ = GPU_CPU; b_ < GPU_BACKEND_COUNT; b_++)
		gpu_backend_probe(b_, why, sizeof(why));
	gpu_options_default(&o);
	o.backend = j->be;
	o.pool_bytes = 1u << 20;
	if (gpu_open(&o, &ctx, why, sizeof(why)) < 0)
		return NULL;
	j->ran = true;
	gpu_ptr_t da, db;
	if (gpu_alloc(ctx, sizeof(a), &da) || gpu_alloc(ctx, sizeof(b), &db))
		j->errors++;
	for (int it = 0; it < 20 && !j->errors; it++) {
		for (int i = 0; i < N; i++) {
			a[i] = (float)(i % 17) + it;
			b[i] = (float)(i % 5);
		}
		int rc = gpu_memcpy_h2d(ctx, NULL, da, a, sizeof(a));
		if (!rc) rc = gpu_memcpy_h2d(ctx, NULL, db, b, sizeof(b));
		if (!rc) rc = gpu_reduce(ctx, NULL, da, db, N, ZB_F32, ZB_MAX);
		if (!rc) rc = gpu_memcpy_d2h(ctx, NULL, out, da, sizeof(out));
		if (!rc) rc = gpu_stream_sync(ctx, NULL);
		if (!rc) rc = gpu_host_reduce(a, b, N, ZB_F32, ZB_MAX);
		j->errors += rc != 0 || memcmp(a, out, sizeof(a)) != 0;
	}
	gpu_free(ctx, da);
	gpu_free(ctx, db);
	gpu_close(ctx);
	return NULL;
}

int main(void)
{
	pthread_t t[THREADS];
	struct job jobs[THREADS];
	char why[256];

	tap_plan(3);
	/* First probes from the main thread: libamdhip64 (ROCm 5.2) keeps
	 * per-thread state from hipInit that it never frees when that thread
	 * exits (LeakSanitizer reports it).  The workers then probe again
	 * concurrently (the cached path, under the probe lock). */
	for (int b = GPU_CPU; b < GPU_BACKEND_COUNT; b++)
		gpu_backend_probe(b, why, sizeof(why));
	for (int i = 0; i < THREADS; i++) {
		jobs[i] = (struct job){.be = i % 2 ? GPU_VULKAN : GPU_CPU};
		pthread_create(&t[i], NULL, worker, &jobs[i]);
	}
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	int errors = 0, cpu_ran = 0, vk_ran = 0;
	for (int i = 0; i < THREADS; i++) {
		errors += jobs[i].errors;
		cpu_ran += jobs[i].be == GPU_CPU && jobs[i].ran;
		vk_ran += jobs[i].be == GPU_VULKAN && jobs[i].ran;
	}
	is_int(cpu_ran, THREADS / 2, "cpu contexts opened concurrently");
	if (gpu_backend_probe(GPU_VULKAN, why, sizeof(why)) == 0)
		is_int(vk_ran, THREADS / 2, "vulkan contexts opened concurrently");
	else
		tap_skip(1, why);
	is_int(errors, 0, "concurrent reductions on separate contexts all correct");
	return tap_done();
}
