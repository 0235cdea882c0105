/* Device memory pool: size-class slabs for small blocks, best-fit with
 * coalescing for large ones, over chunks the backend provides.
 *
 * The pool never touches device memory: it keeps host-side nodes describing
 * address ranges, in fixed arrays inside the context (no malloc after open).
 * Lookups are linear over bounded arrays (GPU_POOL_MAX_RANGES): allocation
 * is a control-path operation; the fast path reuses buffers. */
#include "internal.h"

static size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

static int node_get(struct gpu_pool *pl)
{
	int32_t i = pl->unused_head;
	if (i < 0)
		return -1;
	pl->unused_head = pl->ranges[i].next_unused;
	memset(&pl->ranges[i], 0, sizeof(pl->ranges[i]));
	pl->ranges[i].prev = pl->ranges[i].next = -1;
	pl->ranges[i].slab = -1;
	return i;
}

static void node_put(struct gpu_pool *pl, int32_t i)
{
	pl->ranges[i].state = 0;
	pl->ranges[i].next_unused = pl->unused_head;
	pl->unused_head = i;
}

static int chunk_add(struct gpu_ctx *ctx, size_t bytes)
{
	struct gpu_pool *pl = &ctx->pool;
	int ci = -1;

	for (int i = 0; i < GPU_POOL_MAX_CHUNKS; i++)
		if (!pl->chunks[i].live) {
			ci = i;
			break;
		}
	if (ci < 0)
		return -ENOMEM;
	int n = node_get(pl);
	if (n < 0)
		return -ENOMEM;
	struct gpu_chunk *c = &pl->chunks[ci];
	int rc = ctx->ops->chunk_alloc(ctx, bytes, &c->base, &c->handle);
	if (rc < 0) {
		node_put(pl, n);
		return rc;
	}
	ZB_ASSERT(c->base != 0 && c->base % GPU_POOL_ALIGN == 0);
	c->bytes = bytes;
	c->live = true;
	pl->ranges[n].addr = c->base;
	pl->ranges[n].bytes = bytes;
	pl->ranges[n].chunk = (uint16_t)ci;
	pl->ranges[n].state = 1;
	pl->st.reserved_bytes += bytes;
	pl->st.chunks++;
	pl->st.free_ranges++;
	return 0;
}

int gpu__pool_init(struct gpu_ctx *ctx, size_t reserve, size_t max_bytes)
{
	struct gpu_pool *pl = &ctx->pool;

	ZB_ASSERT(ctx->ops && ctx->ops->chunk_alloc);
	memset(pl, 0, sizeof(*pl));
	for (int i = 0; i < GPU_POOL_MAX_RANGES; i++) {
		pl->ranges[i].next_unused = i + 1 < GPU_POOL_MAX_RANGES ? i + 1 : -1;
	}
	pl->unused_head = 0;
	for (int i = 0; i < GPU_POOL_CLASSES; i++)
		pl->class_head[i] = -1;
	for (int i = 0; i < GPU_POOL_MAX_SLABS; i++)
		pl->slabs[i].range = -1;
	/* the limit of gpu_alloc; also keeps round_up from wrapping to 0 */
	if (reserve > ((size_t)1 << 62))
		return -ENOMEM;
	reserve = round_up(reserve ? reserve : GPU_POOL_SLAB_BYTES, GPU_POOL_ALIGN);
	pl->max_bytes = max_bytes > reserve ? max_bytes : reserve;
	pl->chunk_bytes = reserve;
	if (ctx->max_chunk && pl->chunk_bytes > ctx->max_chunk)
		pl->chunk_bytes = ctx->max_chunk;
	for (size_t got = 0; got < reserve;) {
		size_t b = reserve - got < pl->chunk_bytes ? reserve - got
							   : pl->chunk_bytes;
		int rc = chunk_add(ctx, b);
		if (rc < 0) {
			gpu__pool_fini(ctx);
			return rc;
		}
		got += b;
	}
	ZB_ASSERT(pl->st.reserved_bytes == reserve);
	return 0;
}

void gpu__pool_fini(struct gpu_ctx *ctx)
{
	struct gpu_pool *pl = &ctx->pool;

	for (int i = 0; i < GPU_POOL_MAX_CHUNKS; i++)
		if (pl->chunks[i].live) {
			ctx->ops->chunk_free(ctx, pl->chunks[i].base,
					     pl->chunks[i].handle);
			pl->chunks[i].live = false;
		}
	pl->st.reserved_bytes = 0;
	pl->st.chunks = 0;
}

/* Best fit among free ranges; splits the remainder off as a new free node.
 * Returns the node index or -ENOMEM. */
static int large_take(struct gpu_pool *pl, size_t bytes, uint8_t state)
{
	int best = -1;

	for (int i = 0; i < GPU_POOL_MAX_RANGES; i++) {
		struct gpu_range *r = &pl->ranges[i];
		if (r->state == 1 && r->bytes >= bytes &&
		    (best < 0 || r->bytes < pl->ranges[best].bytes))
			best = i;
	}
	if (best < 0)
		return -ENOMEM;
	struct gpu_range *r = &pl->ranges[best];
	if (r->bytes > bytes) {
		int n = node_get(pl);
		if (n < 0)
			return -ENOMEM;
		r = &pl->ranges[best]; /* (array does not move, but be explicit) */
		struct gpu_range *rest = &pl->ranges[n];
		rest->addr = r->addr + bytes;
		rest->bytes = r->bytes - bytes;
		rest->chunk = r->chunk;
		rest->state = 1;
		rest->prev = best;
		rest->next = r->next;
		if (r->next >= 0)
			pl->ranges[r->next].prev = n;
		r->next = n;
		r->bytes = bytes;
		pl->st.free_ranges++;
	}
	r->state = state;
	pl->st.free_ranges--;
	return best;
}

/* Mark node i free and merge it with free address neighbours. */
static void large_release(struct gpu_pool *pl, int32_t i)
{
	struct gpu_range *r = &pl->ranges[i];

	ZB_ASSERT(r->state == 2 || r->state == 3);
	r->state = 1;
	r->slab = -1;
	pl->st.free_ranges++;
	int32_t nx = r->next;
	if (nx >= 0 && pl->ranges[nx].state == 1) {
		r->bytes += pl->ranges[nx].bytes;
		r->next = pl->ranges[nx].next;
		if (r->next >= 0)
			pl->ranges[r->next].prev = i;
		node_put(pl, nx);
		pl->st.free_ranges--;
	}
	int32_t pv = r->prev;
	if (pv >= 0 && pl->ranges[pv].state == 1) {
		struct gpu_range *p = &pl->ranges[pv];
		ZB_ASSERT(p->addr + p->bytes == r->addr);
		p->bytes += r->bytes;
		p->next = r->next;
		if (p->next >= 0)
			pl->ranges[p->next].prev = pv;
		node_put(pl, i);
		pl->st.free_ranges--;
	}
}

static int grow(struct gpu_ctx *ctx, size_t need)
{
	struct gpu_pool *pl = &ctx->pool;
	size_t b = need > pl->chunk_bytes ? round_up(need, GPU_POOL_SLAB_BYTES)
					  : pl->chunk_bytes;

	if (ctx->max_chunk && b > ctx->max_chunk)
		b = ctx->max_chunk;
	if (b < need || pl->st.reserved_bytes + b > pl->max_bytes)
		return -ENOMEM;
	return chunk_add(ctx, b);
}

static int large_alloc(struct gpu_ctx *ctx, size_t bytes, uint8_t state)
{
	int n = large_take(&ctx->pool, bytes, state);
	if (n == -ENOMEM && grow(ctx, bytes) == 0)
		n = large_take(&ctx->pool, bytes, state);
	return n;
}

static int class_of(size_t bytes)
{
	int c = 0;
	while (((size_t)1 << (c + GPU_POOL_MIN_CLASS_SHIFT)) < bytes)
		c++;
	return c;
}

static int small_alloc(struct gpu_ctx *ctx, size_t bytes, gpu_ptr_t *out)
{
	struct gpu_pool *pl = &ctx->pool;
	int cls = class_of(bytes);
	int32_t si = pl->class_head[cls];

	if (si < 0) { /* a new slab for this class */
		for (int i = 0; i < GPU_POOL_MAX_SLABS; i++)
			if (pl->slabs[i].range < 0) {
				si = i;
				break;
			}
		if (si < 0)
			return -ENOMEM;
		int n = large_alloc(ctx, GPU_POOL_SLAB_BYTES, 3);
		if (n < 0)
			return n;
		struct gpu_slab *sl = &pl->slabs[si];
		memset(sl, 0, sizeof(*sl));
		sl->range = n;
		sl->cls = (uint8_t)cls;
		sl->nblocks = GPU_POOL_SLAB_BYTES >> (cls + GPU_POOL_MIN_CLASS_SHIFT);
		sl->nfree = sl->nblocks;
		sl->next = -1;
		pl->ranges[n].slab = (int16_t)si;
		pl->class_head[cls] = si;
		pl->st.slabs++;
	}
	struct gpu_slab *sl = &pl->slabs[si];
	ZB_ASSERT(sl->nfree > 0 && sl->cls == cls);
	for (uint32_t w = 0; w < (sl->nblocks + 63) / 64; w++) {
		if (sl->bitmap[w] == ~0ull)
			continue;
		uint32_t b = (uint32_t)__builtin_ctzll(~sl->bitmap[w]);
		uint32_t idx = w * 64 + b;
		ZB_ASSERT(idx < sl->nblocks);
		sl->bitmap[w] |= 1ull << b;
		if (--sl->nfree == 0) /* full: leave the class list (it is the head) */
			pl->class_head[cls] = sl->next;
		*out = pl->ranges[sl->range].addr +
		       ((gpu_ptr_t)idx << (cls + GPU_POOL_MIN_CLASS_SHIFT));
		pl->st.used_bytes += (size_t)1 << (cls + GPU_POOL_MIN_CLASS_SHIFT);
		return 0;
	}
	ZB_ASSERT(0 && "slab bitmap disagrees with nfree");
	return -ENOMEM;
}

int gpu__pool_alloc(struct gpu_ctx *ctx, size_t bytes, gpu_ptr_t *out)
{
	struct gpu_pool *pl = &ctx->pool;
	int rc;

	ZB_ASSERT(out);
	if (bytes == 0)
		return -EINVAL;
	if (bytes > ((size_t)1 << 62)) {
		pl->st.failed++;
		return -ENOMEM;
	}
	if (bytes <= ((size_t)1 << GPU_POOL_MAX_CLASS_SHIFT)) {
		rc = small_alloc(ctx, bytes, out);
	} else {
		size_t b = round_up(bytes, GPU_POOL_ALIGN);
		int n = large_alloc(ctx, b, 2);
		rc = n < 0 ? n : 0;
		if (n >= 0) {
			*out = pl->ranges[n].addr;
			pl->st.used_bytes += b;
		}
	}
	if (rc < 0) {
		pl->st.failed++;
		return rc;
	}
	pl->st.allocs++;
	pl->st.live_allocs++;
	return 0;
}

static void slab_unlink(struct gpu_pool *pl, int32_t si)
{
	int32_t *pp = &pl->class_head[pl->slabs[si].cls];
	while (*pp >= 0 && *pp != si)
		pp = &pl->slabs[*pp].next;
	if (*pp == si)
		*pp = pl->slabs[si].next;
}

static int small_free(struct gpu_pool *pl, int32_t n, gpu_ptr_t p)
{
	struct gpu_range *r = &pl->ranges[n];
	int32_t si = r->slab;
	ZB_ASSERT(si >= 0 && si < GPU_POOL_MAX_SLABS);
	struct gpu_slab *sl = &pl->slabs[si];
	unsigned shift = sl->cls + GPU_POOL_MIN_CLASS_SHIFT;
	uint64_t off = p - r->addr;

	if (off & (((uint64_t)1 << shift) - 1))
		return -EINVAL;
	uint32_t idx = (uint32_t)(off >> shift);
	if (idx >= sl->nblocks || !(sl->bitmap[idx / 64] & (1ull << (idx % 64))))
		return -EINVAL; /* not allocated: double free or bad pointer */
	sl->bitmap[idx / 64] &= ~(1ull << (idx % 64));
	pl->st.used_bytes -= (size_t)1 << shift;
	if (sl->nfree++ == 0) {
		sl->next = pl->class_head[sl->cls];
		pl->class_head[sl->cls] = si;
	}
	if (sl->nfree == sl->nblocks) { /* empty: give the slab back */
		slab_unlink(pl, si);
		sl->range = -1;
		large_release(pl, n);
		pl->st.slabs--;
	}
	return 0;
}

int gpu__pool_free(struct gpu_ctx *ctx, gpu_ptr_t p)
{
	struct gpu_pool *pl = &ctx->pool;
	int rc = -EINVAL;

	for (int32_t i = 0; i < GPU_POOL_MAX_RANGES; i++) {
		struct gpu_range *r = &pl->ranges[i];
		if (r->state == 2 && r->addr == p) {
			pl->st.used_bytes -= r->bytes;
			large_release(pl, i);
			rc = 0;
			break;
		}
		if (r->state == 3 && p >= r->addr && p < r->addr + r->bytes) {
			rc = small_free(pl, i, p);
			break;
		}
	}
	if (rc == 0) {
		ZB_ASSERT(pl->st.live_allocs > 0);
		pl->st.frees++;
		pl->st.live_allocs--;
	}
	return rc;
}

int gpu__pool_resolve(const struct gpu_ctx *ctx, gpu_ptr_t p, size_t len,
		      void **handle, size_t *offset)
{
	const struct gpu_pool *pl = &ctx->pool;

	for (int i = 0; i < GPU_POOL_MAX_CHUNKS; i++) {
		const struct gpu_chunk *c = &pl->chunks[i];
		if (c->live && p >= c->base && p - c->base <= c->bytes &&
		    len <= c->bytes - (p - c->base)) {
			if (handle)
				*handle = c->handle;
			if (offset)
				*offset = (size_t)(p - c->base);
			return 0;
		}
	}
	return -EINVAL;
}

void gpu_pool_stats(const struct gpu_ctx *ctx, struct gpu_pool_stats *st)
{
	const struct gpu_pool *pl = &ctx->pool;

	ZB_ASSERT(ctx && st);
	*st = pl->st;
	st->largest_free = 0;
	for (int i = 0; i < GPU_POOL_MAX_RANGES; i++)
		if (pl->ranges[i].state == 1 &&
		    pl->ranges[i].bytes > st->largest_free)
			st->largest_free = pl->ranges[i].bytes;
}
