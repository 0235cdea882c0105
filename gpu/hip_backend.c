#include "internal.h"
static int hip_probe(char *why, size_t len)
{
	return gpu__why(why, len, ZB_ERR_UNAVAILABLE, "not yet");
}
const struct gpu_ops gpu__hip_ops = {
	.version = GPU_OPS_VERSION, .name = "hip", .id = GPU_HIP, .probe = hip_probe,
};
