#include "internal.h"
static int cu_probe(char *why, size_t len)
{
	return gpu__why(why, len, ZB_ERR_UNAVAILABLE, "not yet");
}
const struct gpu_ops gpu__cuda_ops = {
	.version = GPU_OPS_VERSION, .name = "cuda", .id = GPU_CUDA, .probe = cu_probe,
};
const char gpu__rtc_source[] = "";
