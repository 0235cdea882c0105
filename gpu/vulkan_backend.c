/* vulkan backend: compute pipelines over SPIR-V compiled at build time
 * (gpu/shaders/NAME.comp, embedded as C arrays).  Runs on any Vulkan 1.1
 * device, including Mesa's lavapipe on the CPU.
 *
 * Memory: each pool chunk is one VkBuffer bound to host-visible, coherent
 * memory (device-local too when the device offers it), mapped for its
 * lifetime.  Device addresses are synthetic: (chunk tag << 40) | offset.
 * Shaders bind whole chunks and take element offsets as push constants, so
 * no offset alignment rules apply beyond the element size.
 *
 * Streams: a command buffer that records copies/dispatches with a full
 * barrier between them; sync submits it and waits on a fence.  Host copies
 * (h2d/d2h) first drain the stream, then memcpy through the mapping, so
 * they are ordered with the recorded work. */
#include "internal.h"

#ifdef ZB_GPU_HAVE_VULKAN
#include <vulkan/vulkan.h>

#define VK_TAG_SHIFT 40
#define VK_MAX_DEVICES 8
#define VK_SETS_PER_STREAM 256
/* Workgroups per dispatch (grid-stride loops cover the rest): lavapipe
 * pays per workgroup (64 measured ~2x faster than 4096 there); a real GPU
 * wants enough to fill every compute unit. */
#define VK_MAX_GROUPS_SOFTWARE 64u
#define VK_MAX_GROUPS_HW 65535u
#define VK_SPIN_NS 200000ull    /* a sync polls its fence this long, then sleeps */
#define VK_SPV_NAME 24

static inline void vk_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

enum { PIPE_REDUCE = 0, PIPE_SCALE = ZB_DTYPE_COUNT,
       PIPE_SGEMM = 2 * ZB_DTYPE_COUNT, PIPE_COUNT };

struct vk_be {
	VkInstance inst;
	VkPhysicalDevice pd;
	VkDevice dev;
	VkQueue queue;
	uint32_t qfam, memtype;
	int memtype_host;       /* host-coherent, not device-local; -1 none */
	VkCommandPool cpool;
	VkDescriptorSetLayout dsl;
	VkPipelineLayout layout;
	VkPipeline pipes[PIPE_COUNT]; /* VK_NULL_HANDLE = dtype unsupported */
	uint64_t next_tag;
	uint32_t max_groups;
	bool spin;              /* poll the fence a while before sleeping on it */
};

struct vk_chunk {
	VkBuffer buf;
	VkDeviceMemory mem;
	uint8_t *map;
	size_t bytes;
};

struct vk_stream {
	VkCommandBuffer cb;
	VkFence fence;
	VkDescriptorPool dpool;
	uint32_t sets_used;
	bool recording;
};

/* Probe once: device list cached for device_count / device_info.  The
 * instance is process-wide and never destroyed: destroying it unloads the
 * ICD, and lavapipe leaves once-initialised allocations behind when it is
 * unloaded (LeakSanitizer reports them); it also makes each open cheaper. */
static VkInstance vk_inst;
static struct gpu_device_info vk_devs[VK_MAX_DEVICES];
static int vk_ndev;

static int vk_err(VkResult r)
{
	switch (r) {
	case VK_SUCCESS: return 0;
	case VK_ERROR_OUT_OF_HOST_MEMORY:
	case VK_ERROR_OUT_OF_DEVICE_MEMORY: return -ENOMEM;
	case VK_ERROR_INITIALIZATION_FAILED:
	case VK_ERROR_INCOMPATIBLE_DRIVER: return ZB_ERR_UNAVAILABLE;
	default: return ZB_ERR_DEVICE;
	}
}

static VkResult make_instance(VkInstance *inst)
{
	VkApplicationInfo app = {
		.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
		.pApplicationName = "zbmd",
		.apiVersion = VK_API_VERSION_1_1,
	};
	VkInstanceCreateInfo ci = {
		.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
		.pApplicationInfo = &app,
	};
	return vkCreateInstance(&ci, NULL, inst);
}

struct vk_feats {
	VkPhysicalDeviceFeatures2 f2;
	VkPhysicalDevice16BitStorageFeatures s16;
};

static void query_feats(VkPhysicalDevice pd, struct vk_feats *f)
{
	memset(f, 0, sizeof(*f));
	f->s16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES;
	f->f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
	f->f2.pNext = &f->s16;
	vkGetPhysicalDeviceFeatures2(pd, &f->f2);
}

/* A device the backend runs on: Vulkan 1.1 (vkGetPhysicalDeviceFeatures2,
 * 16-bit storage chained into vkCreateDevice) and work groups of 256
 * invocations, 256 x 16 (reduce.comp, scale.comp: 256 wide; sgemm.comp:
 * 16 x 16); the spec guarantees 128 only. A device short of them is not
 * listed (it made an invalid pipeline before). */
static bool usable(VkPhysicalDevice pd)
{
	VkPhysicalDeviceProperties p;
	vkGetPhysicalDeviceProperties(pd, &p);
	return p.apiVersion >= VK_API_VERSION_1_1 &&
	       p.limits.maxComputeWorkGroupInvocations >= 256 &&
	       p.limits.maxComputeWorkGroupSize[0] >= 256 &&
	       p.limits.maxComputeWorkGroupSize[1] >= 16;
}

static bool compute_queue(VkPhysicalDevice pd, uint32_t *fam)
{
	if (!usable(pd))
		return false;
	VkQueueFamilyProperties qp[16];
	uint32_t n = ZB_ARRAY_LEN(qp);
	vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, qp);
	for (uint32_t i = 0; i < n; i++)
		if (qp[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
			*fam = i;
			return true;
		}
	return false;
}

static void fill_info(VkPhysicalDevice pd, int index, struct gpu_device_info *o)
{
	VkPhysicalDeviceProperties p;
	VkPhysicalDeviceMemoryProperties mp;
	struct vk_feats f;

	vkGetPhysicalDeviceProperties(pd, &p);
	vkGetPhysicalDeviceMemoryProperties(pd, &mp);
	query_feats(pd, &f);
	memset(o, 0, sizeof(*o));
	o->index = index;
	o->numa_node = -1;
	snprintf(o->name, sizeof(o->name), "%.127s", p.deviceName);
	snprintf(o->driver, sizeof(o->driver), "Vulkan %u.%u.%u driver 0x%x",
		 VK_API_VERSION_MAJOR(p.apiVersion),
		 VK_API_VERSION_MINOR(p.apiVersion),
		 VK_API_VERSION_PATCH(p.apiVersion), p.driverVersion);
	for (uint32_t i = 0; i < mp.memoryHeapCount; i++)
		if (mp.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
			o->mem_bytes += mp.memoryHeaps[i].size;
	o->compute_units = p.limits.maxComputeWorkGroupInvocations;
	o->fp64 = f.f2.features.shaderFloat64;
	o->int64 = f.f2.features.shaderInt64;
	o->fp16 = f.s16.storageBuffer16BitAccess;
	o->software = p.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
}

static int vk_probe(char *why, size_t len)
{
	VkPhysicalDevice pds[VK_MAX_DEVICES];
	uint32_t n = VK_MAX_DEVICES;
	VkResult r = vk_inst ? VK_SUCCESS : make_instance(&vk_inst);

	if (r != VK_SUCCESS)
		return gpu__why(why, len, ZB_ERR_UNAVAILABLE,
				"vkCreateInstance failed (%d): no Vulkan 1.1 loader/ICD", r);
	r = vkEnumeratePhysicalDevices(vk_inst, &n, pds);
	vk_ndev = 0;
	for (uint32_t i = 0; (r == VK_SUCCESS || r == VK_INCOMPLETE) && i < n; i++) {
		uint32_t fam;
		if (compute_queue(pds[i], &fam))
			fill_info(pds[i], vk_ndev, &vk_devs[vk_ndev]), vk_ndev++;
	}
	if (vk_ndev == 0)
		return gpu__why(why, len, ZB_ERR_UNAVAILABLE,
				"no Vulkan 1.1 device with a compute queue and 256-invocation work groups");
	return gpu__why(why, len, 0, "usable: %d device(s)%s", vk_ndev,
			vk_devs[0].software ? " (software: lavapipe/llvmpipe)" : "");
}

static int vk_device_count(void) { return vk_ndev; }

static int vk_device_info(int index, struct gpu_device_info *out)
{
	ZB_ASSERT(index >= 0 && index < vk_ndev);
	*out = vk_devs[index];
	return 0;
}

static const uint32_t *spirv(const char *name, size_t *count)
{
	for (const struct gpu_spirv *s = gpu__vk_spirv; s->name; s++)
		if (strcmp(s->name, name) == 0) {
			*count = s->count;
			return s->words;
		}
	return NULL;
}

static int make_pipe(struct vk_be *be, const char *name, VkPipeline *out)
{
	size_t words = 0;
	const uint32_t *code = spirv(name, &words);
	ZB_ASSERT(code && words > 5);
	VkShaderModuleCreateInfo mci = {
		.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
		.codeSize = words * 4,
		.pCode = code,
	};
	VkShaderModule mod;
	VkResult r = vkCreateShaderModule(be->dev, &mci, NULL, &mod);
	if (r != VK_SUCCESS)
		return vk_err(r);
	VkComputePipelineCreateInfo pci = {
		.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
		.stage = {
			.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
			.stage = VK_SHADER_STAGE_COMPUTE_BIT,
			.module = mod,
			.pName = "main",
		},
		.layout = be->layout,
	};
	r = vkCreateComputePipelines(be->dev, VK_NULL_HANDLE, 1, &pci, NULL, out);
	if (r != VK_SUCCESS)
		*out = VK_NULL_HANDLE;   /* a failed create's outputs are undefined */
	vkDestroyShaderModule(be->dev, mod, NULL);
	return vk_err(r);
}

/* Which dtypes the device can run: 16-bit storage, shaderFloat64 (f64, and
 * i32 scale which computes in double), shaderInt64 (i64; its scale is
 * exact integer arithmetic). */
static bool dtype_ok(const struct gpu_device_info *d, enum zb_dtype t, bool scale)
{
	switch (t) {
	case ZB_F16: case ZB_BF16: return d->fp16;
	case ZB_F64: return d->fp64;
	case ZB_I32: return !scale || d->fp64;
	case ZB_I64: return d->int64;
	default: return true;
	}
}

static int make_layouts(struct vk_be *be)
{
	VkDescriptorSetLayoutBinding b[3];
	for (int i = 0; i < 3; i++)
		b[i] = (VkDescriptorSetLayoutBinding){
			.binding = (uint32_t)i,
			.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
			.descriptorCount = 1,
			.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
		};
	VkDescriptorSetLayoutCreateInfo dci = {
		.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
		.bindingCount = 3,
		.pBindings = b,
	};
	VkResult r = vkCreateDescriptorSetLayout(be->dev, &dci, NULL, &be->dsl);
	if (r != VK_SUCCESS) {
		be->dsl = VK_NULL_HANDLE;   /* undefined after a failure (vk_close) */
		return vk_err(r);
	}
	VkPushConstantRange pc = {VK_SHADER_STAGE_COMPUTE_BIT, 0, 64};
	VkPipelineLayoutCreateInfo lci = {
		.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
		.setLayoutCount = 1,
		.pSetLayouts = &be->dsl,
		.pushConstantRangeCount = 1,
		.pPushConstantRanges = &pc,
	};
	r = vkCreatePipelineLayout(be->dev, &lci, NULL, &be->layout);
	if (r != VK_SUCCESS)
		be->layout = VK_NULL_HANDLE;
	return vk_err(r);
}

static int make_pipes(struct gpu_ctx *ctx, struct vk_be *be)
{
	char name[VK_SPV_NAME];
	int rc = make_layouts(be);

	for (int t = 0; rc == 0 && t < ZB_DTYPE_COUNT; t++) {
		if (dtype_ok(&ctx->dev, t, false)) {
			snprintf(name, sizeof(name), "reduce_%d", t);
			rc = make_pipe(be, name, &be->pipes[PIPE_REDUCE + t]);
		}
		if (rc == 0 && dtype_ok(&ctx->dev, t, true)) {
			snprintf(name, sizeof(name), "scale_%d", t);
			rc = make_pipe(be, name, &be->pipes[PIPE_SCALE + t]);
		}
	}
	/* software devices: the barrier-free variant (see sgemm.comp) */
	return rc ? rc : make_pipe(be, ctx->dev.software ? "sgemm_naive" : "sgemm",
				   &be->pipes[PIPE_SGEMM]);
}

static int pick_memtype(struct vk_be *be)
{
	VkPhysicalDeviceMemoryProperties mp;
	const VkMemoryPropertyFlags host = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
					   VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
	int best = -1;

	be->memtype_host = -1;
	vkGetPhysicalDeviceMemoryProperties(be->pd, &mp);
	for (uint32_t i = 0; i < mp.memoryTypeCount; i++) {
		VkMemoryPropertyFlags f = mp.memoryTypes[i].propertyFlags;
		if ((f & host) != host)
			continue;
		if (!(f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) && be->memtype_host < 0)
			be->memtype_host = (int)i;
		if (best < 0 || ((f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) &&
				 !(mp.memoryTypes[best].propertyFlags &
				   VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)))
			best = (int)i;
	}
	if (best < 0)
		return ZB_ERR_UNSUPPORTED;
	be->memtype = (uint32_t)best;
	if (be->memtype_host == best)
		be->memtype_host = -1;
	return 0;
}

static int open_device(struct gpu_ctx *ctx, struct vk_be *be)
{
	struct vk_feats want;
	float prio = 1.0f;

	query_feats(be->pd, &want);
	/* enable exactly the features the shaders may use, if present */
	VkPhysicalDeviceFeatures2 f2 = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
	};
	VkPhysicalDevice16BitStorageFeatures s16 = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES,
		.storageBuffer16BitAccess = want.s16.storageBuffer16BitAccess,
	};
	f2.pNext = &s16;
	f2.features.shaderFloat64 = want.f2.features.shaderFloat64;
	f2.features.shaderInt64 = want.f2.features.shaderInt64;
	f2.features.shaderInt16 = want.f2.features.shaderInt16;
	VkDeviceQueueCreateInfo q = {
		.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
		.queueFamilyIndex = be->qfam,
		.queueCount = 1,
		.pQueuePriorities = &prio,
	};
	VkDeviceCreateInfo dci = {
		.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
		.pNext = &f2,
		.queueCreateInfoCount = 1,
		.pQueueCreateInfos = &q,
	};
	VkResult r = vkCreateDevice(be->pd, &dci, NULL, &be->dev);
	if (r != VK_SUCCESS) {
		be->dev = VK_NULL_HANDLE;   /* undefined after a failure (vk_close) */
		return vk_err(r);
	}
	vkGetDeviceQueue(be->dev, be->qfam, 0, &be->queue);
	VkCommandPoolCreateInfo pci = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
		.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
		.queueFamilyIndex = be->qfam,
	};
	r = vkCreateCommandPool(be->dev, &pci, NULL, &be->cpool);
	if (r != VK_SUCCESS) {
		be->cpool = VK_NULL_HANDLE;
		return vk_err(r);
	}
	(void)ctx;
	return pick_memtype(be);
}

static void vk_close(struct gpu_ctx *ctx)
{
	struct vk_be *be = ctx->be;
	if (!be)
		return;
	if (be->dev) {
		vkDeviceWaitIdle(be->dev);
		for (int i = 0; i < PIPE_COUNT; i++)
			if (be->pipes[i])
				vkDestroyPipeline(be->dev, be->pipes[i], NULL);
		if (be->layout)
			vkDestroyPipelineLayout(be->dev, be->layout, NULL);
		if (be->dsl)
			vkDestroyDescriptorSetLayout(be->dev, be->dsl, NULL);
		if (be->cpool)
			vkDestroyCommandPool(be->dev, be->cpool, NULL);
		vkDestroyDevice(be->dev, NULL);
	}
	free(be);
	ctx->be = NULL;
}

static int vk_open(struct gpu_ctx *ctx, int index)
{
	VkPhysicalDevice pds[VK_MAX_DEVICES];
	uint32_t n = VK_MAX_DEVICES, seen = 0;
	struct vk_be *be = calloc(1, sizeof(*be));
	int rc;

	ZB_ASSERT(index >= 0 && index < vk_ndev);
	if (!be)
		return -ENOMEM;
	ctx->be = be;
	be->inst = vk_inst;
	VkResult r = vkEnumeratePhysicalDevices(be->inst, &n, pds);
	bool listed = r == VK_SUCCESS || r == VK_INCOMPLETE;
	rc = listed ? ZB_ERR_UNAVAILABLE : vk_err(r);
	if (!listed)
		n = 0;   /* failed: pds holds nothing to look at */
	for (uint32_t i = 0; i < n; i++)
		if (compute_queue(pds[i], &be->qfam) && (int)seen++ == index) {
			be->pd = pds[i];
			rc = 0;
			break;
		}
	if (rc < 0)
		goto fail;
	rc = open_device(ctx, be);
	if (rc < 0)
		goto fail;
	rc = make_pipes(ctx, be);
	if (rc < 0)
		goto fail;
	VkPhysicalDeviceProperties p;
	vkGetPhysicalDeviceProperties(be->pd, &p);
	be->max_groups = ctx->dev.software ? VK_MAX_GROUPS_SOFTWARE : VK_MAX_GROUPS_HW;
	/* not on a software device: the spinning thread would take a CPU
	 * from the threads doing the work */
	be->spin = !ctx->dev.software;
	if (be->max_groups > p.limits.maxComputeWorkGroupCount[0])
		be->max_groups = p.limits.maxComputeWorkGroupCount[0];
	ctx->max_chunk = p.limits.maxStorageBufferRange & ~(size_t)(GPU_POOL_ALIGN - 1);
	return 0;
fail:
	vk_close(ctx);
	return rc;
}

static int vk_chunk_alloc(struct gpu_ctx *ctx, size_t bytes, gpu_ptr_t *base,
			  void **handle)
{
	struct vk_be *be = ctx->be;
	struct vk_chunk *c = calloc(1, sizeof(*c));
	VkResult r;

	if (!c)
		return -ENOMEM;
	VkBufferCreateInfo bci = {
		.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
		.size = bytes,
		.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
			 VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
			 VK_BUFFER_USAGE_TRANSFER_DST_BIT,
		.sharingMode = VK_SHARING_MODE_EXCLUSIVE,
	};
	r = vkCreateBuffer(be->dev, &bci, NULL, &c->buf);
	if (r != VK_SUCCESS) {
		c->buf = VK_NULL_HANDLE;
		goto fail;
	}
	VkMemoryRequirements req;
	vkGetBufferMemoryRequirements(be->dev, c->buf, &req);
	if (!(req.memoryTypeBits & (1u << be->memtype))) {
		r = VK_ERROR_FEATURE_NOT_PRESENT;
		goto fail;
	}
	VkMemoryAllocateInfo mai = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
		.allocationSize = req.size,
		.memoryTypeIndex = be->memtype,
	};
	r = vkAllocateMemory(be->dev, &mai, NULL, &c->mem);
	/* device-local + host-visible memory can be a small BAR window: fall
	 * back to host memory the device reads over the bus */
	if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY && be->memtype_host >= 0 &&
	    (req.memoryTypeBits & (1u << be->memtype_host))) {
		mai.memoryTypeIndex = (uint32_t)be->memtype_host;
		r = vkAllocateMemory(be->dev, &mai, NULL, &c->mem);
	}
	if (r != VK_SUCCESS) {
		c->mem = VK_NULL_HANDLE; /* not valid after a failed call */
		goto fail;
	}
	r = vkBindBufferMemory(be->dev, c->buf, c->mem, 0);
	if (r == VK_SUCCESS)
		r = vkMapMemory(be->dev, c->mem, 0, VK_WHOLE_SIZE, 0, (void **)&c->map);
	if (r != VK_SUCCESS)
		goto fail;
	c->bytes = bytes;
	*base = (gpu_ptr_t)(++be->next_tag) << VK_TAG_SHIFT;
	*handle = c;
	return 0;
fail:
	if (c->mem)
		vkFreeMemory(be->dev, c->mem, NULL);
	if (c->buf)
		vkDestroyBuffer(be->dev, c->buf, NULL);
	free(c);
	return r == VK_ERROR_FEATURE_NOT_PRESENT ? ZB_ERR_UNSUPPORTED
	       : vk_err(r) == ZB_ERR_DEVICE ? -ENOMEM : vk_err(r);
}

static void vk_chunk_free(struct gpu_ctx *ctx, gpu_ptr_t base, void *handle)
{
	struct vk_be *be = ctx->be;
	struct vk_chunk *c = handle;
	(void)base;
	ZB_ASSERT(c && c->buf);
	vkDeviceWaitIdle(be->dev);
	vkUnmapMemory(be->dev, c->mem);
	vkDestroyBuffer(be->dev, c->buf, NULL);
	vkFreeMemory(be->dev, c->mem, NULL);
	free(c);
}

/* ---- streams ---- */

static void vk_stream_destroy(struct gpu_ctx *ctx, struct gpu_stream *s)
{
	struct vk_be *be = ctx->be;
	struct vk_stream *vs = s->be;
	if (!vs)
		return;
	if (vs->fence)
		vkDestroyFence(be->dev, vs->fence, NULL);
	if (vs->dpool)
		vkDestroyDescriptorPool(be->dev, vs->dpool, NULL);
	if (vs->cb)
		vkFreeCommandBuffers(be->dev, be->cpool, 1, &vs->cb);
	free(vs);
	s->be = NULL;
}

static int vk_stream_create(struct gpu_ctx *ctx, struct gpu_stream *s)
{
	struct vk_be *be = ctx->be;
	struct vk_stream *vs = calloc(1, sizeof(*vs));
	VkResult r;

	if (!vs)
		return -ENOMEM;
	s->be = vs;
	VkCommandBufferAllocateInfo cai = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
		.commandPool = be->cpool,
		.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
		.commandBufferCount = 1,
	};
	r = vkAllocateCommandBuffers(be->dev, &cai, &vs->cb);
	if (r == VK_SUCCESS) {
		VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
		r = vkCreateFence(be->dev, &fci, NULL, &vs->fence);
		if (r != VK_SUCCESS)
			vs->fence = VK_NULL_HANDLE;   /* undefined after a failure */
	}
	if (r == VK_SUCCESS) {
		VkDescriptorPoolSize ps = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
					   3 * VK_SETS_PER_STREAM};
		VkDescriptorPoolCreateInfo dci = {
			.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
			.maxSets = VK_SETS_PER_STREAM,
			.poolSizeCount = 1,
			.pPoolSizes = &ps,
		};
		r = vkCreateDescriptorPool(be->dev, &dci, NULL, &vs->dpool);
		if (r != VK_SUCCESS)
			vs->dpool = VK_NULL_HANDLE;
	}
	if (r != VK_SUCCESS) {
		vk_stream_destroy(ctx, s);
		return vk_err(r);
	}
	return 0;
}

static int vk_stream_sync(struct gpu_ctx *ctx, struct gpu_stream *s)
{
	struct vk_be *be = ctx->be;
	struct vk_stream *vs = s->be;
	VkResult r;

	if (!vs->recording)
		return 0;
	vs->recording = false;
	/* what the commands wrote is read through the mapping once the fence
	 * signals: make it visible to the host (the fence alone does not) */
	VkMemoryBarrier hb = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
		.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
		.dstAccessMask = VK_ACCESS_HOST_READ_BIT,
	};
	vkCmdPipelineBarrier(vs->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT |
			     VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT,
			     0, 1, &hb, 0, NULL, 0, NULL);
	r = vkEndCommandBuffer(vs->cb);
	if (r == VK_SUCCESS) {
		VkSubmitInfo si = {
			.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
			.commandBufferCount = 1,
			.pCommandBuffers = &vs->cb,
		};
		r = vkQueueSubmit(be->queue, 1, &si, vs->fence);
	}
	if (r == VK_SUCCESS && be->spin) {
		/* a hardware device: most syncs wait tens of microseconds,
		 * which vkWaitForFences turns into a sleep and a wake-up */
		uint64_t t0 = zb_now_ns();
		while ((r = vkGetFenceStatus(be->dev, vs->fence)) == VK_NOT_READY &&
		       zb_now_ns() - t0 < VK_SPIN_NS)
			vk_pause();
		if (r == VK_NOT_READY)
			r = VK_SUCCESS;   /* still running: sleep on it below */
	}
	if (r == VK_SUCCESS)
		r = vkWaitForFences(be->dev, 1, &vs->fence, VK_TRUE, UINT64_MAX);
	/* a wait that failed (out of memory) may leave the submission
	 * running: the fence, the command buffer and the descriptor sets are
	 * reset only once it is not (after a lost device nothing runs) */
	if (r != VK_SUCCESS && r != VK_ERROR_DEVICE_LOST)
		vkDeviceWaitIdle(be->dev);
	vkResetFences(be->dev, 1, &vs->fence);
	vkResetCommandBuffer(vs->cb, 0);
	vkResetDescriptorPool(be->dev, vs->dpool, 0);
	vs->sets_used = 0;
	return vk_err(r);
}

/* Start recording (or add a barrier after the previous command). */
static int rec(struct gpu_ctx *ctx, struct vk_stream *vs)
{
	(void)ctx;
	if (!vs->recording) {
		VkCommandBufferBeginInfo bi = {
			.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
			.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
		};
		VkResult r = vkBeginCommandBuffer(vs->cb, &bi);
		if (r != VK_SUCCESS)
			return vk_err(r);
		vs->recording = true;
		return 0;
	}
	VkMemoryBarrier mb = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
		.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
		.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
				 VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
	};
	VkPipelineStageFlags st = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT |
				  VK_PIPELINE_STAGE_TRANSFER_BIT;
	vkCmdPipelineBarrier(vs->cb, st, st, 0, 1, &mb, 0, NULL, 0, NULL);
	return 0;
}

static struct vk_chunk *chunk(struct gpu_ctx *ctx, gpu_ptr_t p, size_t len,
			      size_t *off)
{
	void *h = NULL;
	int rc = gpu__pool_resolve(ctx, p, len, &h, off);
	ZB_ASSERT(rc == 0 && h); /* the generic layer checked the range */
	return h;
}

static int vk_h2d(struct gpu_ctx *ctx, struct gpu_stream *s, gpu_ptr_t dst,
		  const void *src, size_t bytes)
{
	size_t off;
	struct vk_chunk *c = chunk(ctx, dst, bytes, &off);
	int rc = vk_stream_sync(ctx, s);
	if (rc == 0)
		memcpy(c->map + off, src, bytes);
	return rc;
}

static int vk_d2h(struct gpu_ctx *ctx, struct gpu_stream *s, void *dst,
		  gpu_ptr_t src, size_t bytes)
{
	size_t off;
	struct vk_chunk *c = chunk(ctx, src, bytes, &off);
	int rc = vk_stream_sync(ctx, s);
	if (rc == 0)
		memcpy(dst, c->map + off, bytes);
	return rc;
}

static int vk_d2d(struct gpu_ctx *ctx, struct gpu_stream *s, gpu_ptr_t dst,
		  gpu_ptr_t src, size_t bytes)
{
	size_t doff, soff;
	struct vk_chunk *d = chunk(ctx, dst, bytes, &doff);
	struct vk_chunk *sc = chunk(ctx, src, bytes, &soff);
	struct vk_stream *vs = s->be;
	if (d == sc && doff == soff)
		return 0;   /* onto itself: nothing to do (and the regions of a
			     * vkCmdCopyBuffer must not overlap) */
	int rc = rec(ctx, vs);
	if (rc < 0)
		return rc;
	VkBufferCopy bc = {soff, doff, bytes};
	vkCmdCopyBuffer(vs->cb, sc->buf, d->buf, 1, &bc);
	return 0;
}

static int vk_memset(struct gpu_ctx *ctx, struct gpu_stream *s, gpu_ptr_t dst,
		     int byte, size_t bytes)
{
	size_t off;
	struct vk_chunk *c = chunk(ctx, dst, bytes, &off);
	struct vk_stream *vs = s->be;

	if (off % 4 || bytes % 4) { /* vkCmdFillBuffer needs 4-byte units */
		int rc = vk_stream_sync(ctx, s);
		if (rc == 0)
			memset(c->map + off, byte, bytes);
		return rc;
	}
	int rc = rec(ctx, vs);
	if (rc < 0)
		return rc;
	vkCmdFillBuffer(vs->cb, c->buf, off, bytes, 0x01010101u * (uint32_t)byte);
	return 0;
}

/* Bind pipe with up to three chunk buffers, push constants, dispatch. */
static int dispatch(struct gpu_ctx *ctx, struct gpu_stream *s, VkPipeline pipe,
		    struct vk_chunk *const bufs[3], const void *pc,
		    uint32_t pc_len, uint32_t gx, uint32_t gy)
{
	struct vk_be *be = ctx->be;
	struct vk_stream *vs = s->be;
	int rc;

	if (vs->sets_used == VK_SETS_PER_STREAM && (rc = vk_stream_sync(ctx, s)))
		return rc;
	if ((rc = rec(ctx, vs)))
		return rc;
	VkDescriptorSetAllocateInfo dai = {
		.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
		.descriptorPool = vs->dpool,
		.descriptorSetCount = 1,
		.pSetLayouts = &be->dsl,
	};
	VkDescriptorSet set;
	VkResult r = vkAllocateDescriptorSets(be->dev, &dai, &set);
	if (r != VK_SUCCESS)
		return vk_err(r);
	vs->sets_used++;
	VkDescriptorBufferInfo bi[3];
	VkWriteDescriptorSet w[3];
	for (int i = 0; i < 3; i++) {
		bi[i] = (VkDescriptorBufferInfo){bufs[i]->buf, 0, VK_WHOLE_SIZE};
		w[i] = (VkWriteDescriptorSet){
			.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
			.dstSet = set,
			.dstBinding = (uint32_t)i,
			.descriptorCount = 1,
			.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
			.pBufferInfo = &bi[i],
		};
	}
	vkUpdateDescriptorSets(be->dev, 3, w, 0, NULL);
	vkCmdBindPipeline(vs->cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
	vkCmdBindDescriptorSets(vs->cb, VK_PIPELINE_BIND_POINT_COMPUTE,
				be->layout, 0, 1, &set, 0, NULL);
	vkCmdPushConstants(vs->cb, be->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
			   pc_len, pc);
	vkCmdDispatch(vs->cb, gx, gy, 1);
	return 0;
}

static uint32_t groups(const struct gpu_ctx *ctx, size_t count)
{
	const struct vk_be *be = ctx->be;
	size_t g = (count + 255) / 256;
	return g > be->max_groups ? be->max_groups : (uint32_t)g;
}

static int vk_reduce(struct gpu_ctx *ctx, struct gpu_stream *s, gpu_ptr_t dst,
		     gpu_ptr_t src, size_t count, enum zb_dtype dtype,
		     enum zb_redop op)
{
	struct vk_be *be = ctx->be;
	size_t es = zb_dtype_size(dtype), doff, soff;
	struct vk_chunk *d = chunk(ctx, dst, count * es, &doff);
	struct vk_chunk *sc = chunk(ctx, src, count * es, &soff);

	if (!be->pipes[PIPE_REDUCE + dtype])
		return ZB_ERR_UNSUPPORTED;
	ZB_DASSERT(doff % es == 0 && soff % es == 0);
	uint32_t pc[4] = {(uint32_t)(doff / es), (uint32_t)(soff / es),
			  (uint32_t)count, (uint32_t)op};
	struct vk_chunk *bufs[3] = {d, sc, d};
	return dispatch(ctx, s, be->pipes[PIPE_REDUCE + dtype], bufs, pc,
			sizeof(pc), groups(ctx, count), 1);
}

static int vk_scale(struct gpu_ctx *ctx, struct gpu_stream *s, gpu_ptr_t buf,
		    size_t count, enum zb_dtype dtype, double factor)
{
	struct vk_be *be = ctx->be;
	size_t es = zb_dtype_size(dtype), off;
	struct vk_chunk *c = chunk(ctx, buf, count * es, &off);
	struct {
		uint32_t off, pad0, count, pad1;
		float ff;
		uint32_t flo, fhi;
	} pc = {(uint32_t)(off / es), 0, (uint32_t)count, 0, (float)factor, 0, 0};
	uint64_t bits;

	if (!be->pipes[PIPE_SCALE + dtype])
		return ZB_ERR_UNSUPPORTED;
	memcpy(&bits, &factor, 8);
	pc.flo = (uint32_t)bits;
	pc.fhi = (uint32_t)(bits >> 32);
	struct vk_chunk *bufs[3] = {c, c, c};
	return dispatch(ctx, s, be->pipes[PIPE_SCALE + dtype], bufs, &pc,
			sizeof(pc), groups(ctx, count), 1);
}

static int vk_sgemm(struct gpu_ctx *ctx, struct gpu_stream *s, bool ta,
		    bool tb, int m, int n, int k, float alpha, gpu_ptr_t a,
		    int lda, gpu_ptr_t b, int ldb, float beta, gpu_ptr_t c,
		    int ldc)
{
	struct vk_be *be = ctx->be;
	size_t aoff, boff, coff;
	/* ranges were checked by the generic layer; resolve with length 1 */
	struct vk_chunk *ca = chunk(ctx, a, 1, &aoff);
	struct vk_chunk *cb = chunk(ctx, b, 1, &boff);
	struct vk_chunk *cc = chunk(ctx, c, 1, &coff);
	struct {
		uint32_t c_off, a_off, b_off;
		int32_t m, n, k, lda, ldb, ldc;
		uint32_t ta, tb;
		float alpha, beta;
	} pc = {(uint32_t)(coff / 4), (uint32_t)(aoff / 4), (uint32_t)(boff / 4),
		m, n, k, lda, ldb, ldc, ta, tb, alpha, beta};
	struct vk_chunk *bufs[3] = {cc, ca, cb};
	return dispatch(ctx, s, be->pipes[PIPE_SGEMM], bufs, &pc, sizeof(pc),
			(uint32_t)(m + 15) / 16, (uint32_t)(n + 15) / 16);
}

const struct gpu_ops gpu__vulkan_ops = {
	.version = GPU_OPS_VERSION,
	.name = "vulkan",
	.id = GPU_VULKAN,
	.probe = vk_probe,
	.device_count = vk_device_count,
	.device_info = vk_device_info,
	.open = vk_open,
	.close = vk_close,
	.chunk_alloc = vk_chunk_alloc,
	.chunk_free = vk_chunk_free,
	.stream_create = vk_stream_create,
	.stream_destroy = vk_stream_destroy,
	.stream_sync = vk_stream_sync,
	.h2d = vk_h2d,
	.d2h = vk_d2h,
	.d2d = vk_d2d,
	.memset = vk_memset,
	.reduce = vk_reduce,
	.scale = vk_scale,
	.sgemm = vk_sgemm,
	/* no run-time compiler (SPIR-V is built by glslc); no DMA-BUF export
	 * (VK_EXT_external_memory_dma_buf is not wired up) */
};

#else /* !ZB_GPU_HAVE_VULKAN */

static int vk_probe(char *why, size_t len)
{
	return gpu__why(why, len, ZB_ERR_UNAVAILABLE,
			"not compiled in (" ZB_GPU_VULKAN_WHY ")");
}

const struct gpu_ops gpu__vulkan_ops = {
	.version = GPU_OPS_VERSION,
	.name = "vulkan",
	.id = GPU_VULKAN,
	.probe = vk_probe,
};
const struct gpu_spirv gpu__vk_spirv[] = {{NULL, NULL, 0}};
#endif
