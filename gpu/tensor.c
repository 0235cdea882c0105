/* Tensors: dense row-major arrays on one context, with migration between
 * contexts (devices or backends). */
#include "internal.h"

int gpu_tensor_create(struct gpu_ctx *ctx, enum zb_dtype dtype, int ndim,
		      const int64_t *shape, struct gpu_tensor *out)
{
	ZB_ASSERT(ctx && out);
	memset(out, 0, sizeof(*out));
	if ((unsigned)dtype >= ZB_DTYPE_COUNT || ndim < 0 ||
	    ndim > GPU_TENSOR_MAX_DIMS || (ndim > 0 && !shape))
		return -EINVAL;
	size_t count = 1, es = zb_dtype_size(dtype);
	for (int i = 0; i < ndim; i++) {
		if (shape[i] < 0 || (shape[i] > 0 && count > SIZE_MAX / es / (size_t)shape[i]))
			return -EINVAL;
		count *= (size_t)shape[i];
		out->shape[i] = shape[i];
	}
	out->ctx = ctx;
	out->dtype = dtype;
	out->ndim = ndim;
	out->count = count;
	out->bytes = count * es;
	/* an empty tensor owns no memory (data == 0) */
	int rc = out->bytes ? gpu_alloc(ctx, out->bytes, &out->data) : 0;
	if (rc < 0)
		memset(out, 0, sizeof(*out));
	return rc;
}

void gpu_tensor_destroy(struct gpu_tensor *t)
{
	if (!t || !t->ctx)
		return;
	if (t->data) {
		int rc = gpu_free(t->ctx, t->data);
		ZB_ASSERT(rc == 0); /* a tensor always owns its block */
	}
	memset(t, 0, sizeof(*t));
}

int gpu_tensor_upload(struct gpu_tensor *t, const void *host, size_t bytes)
{
	ZB_ASSERT(t && t->ctx);
	if (bytes != t->bytes || (bytes && !host))
		return -EINVAL;
	int rc = gpu_memcpy_h2d(t->ctx, NULL, t->data, host, bytes);
	return rc ? rc : gpu_stream_sync(t->ctx, NULL);
}

int gpu_tensor_download(const struct gpu_tensor *t, void *host, size_t bytes)
{
	ZB_ASSERT(t && t->ctx);
	if (bytes != t->bytes || (bytes && !host))
		return -EINVAL;
	int rc = gpu_memcpy_d2h(t->ctx, NULL, host, t->data, bytes);
	return rc ? rc : gpu_stream_sync(t->ctx, NULL);
}

/* Same context: device-to-device.  Otherwise stage through a host buffer
 * (pinned where the source backend has pinned memory) in 4 MiB pieces, so
 * that migrating a large tensor needs little host memory. */
#define MIGRATE_STAGE_BYTES ((size_t)4 << 20)

int gpu_tensor_migrate(const struct gpu_tensor *t, struct gpu_ctx *dst,
		       struct gpu_tensor *out)
{
	void *stage = NULL;
	int rc;

	ZB_ASSERT(t && t->ctx && dst && out);
	rc = gpu_tensor_create(dst, t->dtype, t->ndim, t->shape, out);
	if (rc < 0)
		return rc;
	if (!t->bytes)
		return 0;
	if (dst == t->ctx) {
		rc = gpu_memcpy_d2d(dst, NULL, out->data, t->data, t->bytes);
		if (!rc)
			rc = gpu_stream_sync(dst, NULL);
		goto done;
	}
	size_t piece = t->bytes < MIGRATE_STAGE_BYTES ? t->bytes : MIGRATE_STAGE_BYTES;
	rc = gpu_host_alloc(t->ctx, piece, &stage);
	for (size_t off = 0; rc == 0 && off < t->bytes; off += piece) {
		size_t n = t->bytes - off < piece ? t->bytes - off : piece;
		rc = gpu_memcpy_d2h(t->ctx, NULL, stage, t->data + off, n);
		if (!rc)
			rc = gpu_stream_sync(t->ctx, NULL);
		if (!rc)
			rc = gpu_memcpy_h2d(dst, NULL, out->data + off, stage, n);
		if (!rc) /* the stage is reused: wait before refilling it */
			rc = gpu_stream_sync(dst, NULL);
	}
	gpu_host_free(t->ctx, stage);
done:
	if (rc < 0)
		gpu_tensor_destroy(out);
	return rc;
}
