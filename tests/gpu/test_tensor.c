/* Tensors: create/upload/download, migration between contexts (cpu <->
 * vulkan when Vulkan is usable, cpu <-> cpu always), same-context copies,
 * staging in pieces for large tensors, bad shapes. */
#include "zbmd/gpu.h"
#include "tap.h"

static struct gpu_ctx *open_be(enum gpu_backend b, char *why, size_t len)
{
	struct gpu_options o;
	struct gpu_ctx *ctx = NULL;
	gpu_options_default(&o);
	o.backend = b;
	o.pool_bytes = 48u << 20; /* two 20 MiB tensors on one side */
	return gpu_open(&o, &ctx, why, len) == 0 ? ctx : NULL;
}

/* t on a -> b -> a, compared with the original each time. */
static bool roundtrip(struct gpu_ctx *a, struct gpu_ctx *b, int ndim,
		      const int64_t *shape, enum zb_dtype dt)
{
	struct gpu_tensor t, u, v;
	bool good = false;

	if (gpu_tensor_create(a, dt, ndim, shape, &t) < 0)
		return false;
	unsigned char *h = malloc(t.bytes + 1), *g = malloc(t.bytes + 1);
	for (size_t i = 0; i < t.bytes; i++)
		h[i] = (unsigned char)(i * 31 + 7);
	if (gpu_tensor_upload(&t, h, t.bytes) == 0 &&
	    gpu_tensor_migrate(&t, b, &u) == 0) {
		memset(g, 0, t.bytes + 1);
		good = u.ctx == b && u.bytes == t.bytes && u.ndim == ndim &&
		       gpu_tensor_download(&u, g, u.bytes) == 0 &&
		       memcmp(g, h, t.bytes) == 0;
		if (gpu_tensor_migrate(&u, a, &v) == 0) {
			memset(g, 0, t.bytes + 1);
			good = good && gpu_tensor_download(&v, g, v.bytes) == 0 &&
			       memcmp(g, h, t.bytes) == 0;
			gpu_tensor_destroy(&v);
		} else {
			good = false;
		}
		gpu_tensor_destroy(&u);
	}
	gpu_tensor_destroy(&t);
	free(h);
	free(g);
	return good;
}

int main(void)
{
	char why[256] = "";
	tap_plan(9);
	struct gpu_ctx *c1 = open_be(GPU_CPU, why, sizeof(why));
	struct gpu_ctx *c2 = open_be(GPU_CPU, why, sizeof(why));
	ok(c1 && c2, "two cpu contexts");
	if (!c1 || !c2)
		return tap_done();
	static const int64_t s3[] = {3, 5, 7}, big[] = {5, 1 << 20}, empty[] = {4, 0};
	ok(roundtrip(c1, c2, 3, s3, ZB_F32), "3x5x7 f32: cpu -> cpu -> cpu");
	ok(roundtrip(c1, c1, 3, s3, ZB_F64), "3x5x7 f64: migrate within one context (d2d)");
	ok(roundtrip(c1, c2, 2, big, ZB_BF16), "5x1M bf16 (10 MiB, staged in pieces)");
	ok(roundtrip(c1, c2, 2, empty, ZB_I32), "empty 4x0 tensor migrates");

	struct gpu_tensor t;
	static const int64_t neg[] = {2, -1}, huge[] = {INT64_MAX, INT64_MAX};
	ok(gpu_tensor_create(c1, ZB_F32, 2, neg, &t) == -EINVAL &&
	   gpu_tensor_create(c1, ZB_F32, 2, huge, &t) == -EINVAL &&
	   gpu_tensor_create(c1, ZB_F32, GPU_TENSOR_MAX_DIMS + 1, s3, &t) == -EINVAL &&
	   gpu_tensor_create(c1, ZB_DTYPE_COUNT, 1, s3, &t) == -EINVAL,
	   "bad shapes / dtype rejected");
	static const int64_t toobig[] = {64, 1 << 20}; /* 256 MiB */
	ok(gpu_tensor_create(c1, ZB_F32, 2, toobig, &t) == -ENOMEM,
	   "a tensor larger than the pool is -ENOMEM");

	struct gpu_ctx *vk = open_be(GPU_VULKAN, why, sizeof(why));
	if (vk) {
		ok(roundtrip(c1, vk, 3, s3, ZB_F16), "3x5x7 f16: cpu -> vulkan -> cpu");
		ok(roundtrip(vk, c2, 2, big, ZB_F32) && roundtrip(vk, vk, 3, s3, ZB_I64),
		   "20 MiB f32: vulkan -> cpu -> vulkan; vulkan d2d");
		gpu_close(vk);
	} else {
		char msg[300];
		snprintf(msg, sizeof(msg), "vulkan unavailable: %s", why);
		tap_skip(2, msg);
	}
	gpu_close(c1);
	gpu_close(c2);
	return tap_done();
}
