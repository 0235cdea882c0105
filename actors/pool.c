/* actors/pool.c — the message pool: every message is allocated here at
 * create; alloc/free never call malloc.
 *
 * Two tiers, as in DPDK's mempool: a per-worker cache (owner-only array) in
 * front of a global lock-free stack of chains (Treiber, with a 32-bit tag
 * against ABA). A chain is up to CHAIN messages linked through _priv.next; its
 * head's _priv.aux holds (next chain head index + 1) | (length << 32).
 * Threads that are not workers take and return single-message chains. */
#include "internal.h"

#include <stdlib.h>

#define CHAIN 64u
#define CACHE_MAX 128u

static uint64_t head_make(uint32_t idx1, uint32_t tag)
{
	return (uint64_t)tag << 32 | idx1;
}

static void chain_push(struct act_runtime *rt, struct act_msg *first,
		       uint32_t len)
{
	uint64_t old = atomic_load_explicit(&rt->msg_free, ACQ), nw;
	uint32_t idx1 = act__msg_index(rt, first) + 1;
	ZB_DASSERT(len >= 1 && len <= CHAIN);
	do {
		__atomic_store_n(&first->_priv.aux,
				 (uint64_t)len << 32 | (uint32_t)old, __ATOMIC_RELAXED);
		nw = head_make(idx1, (uint32_t)(old >> 32) + 1);
	} while (!atomic_compare_exchange_weak_explicit(&rt->msg_free, &old, nw,
							 REL, ACQ));
	atomic_fetch_add_explicit(&rt->msg_free_n, len, RLX);
}

/* Pops one chain; returns its head and length, or NULL. */
static struct act_msg *chain_pop(struct act_runtime *rt, uint32_t *len)
{
	uint64_t old = atomic_load_explicit(&rt->msg_free, ACQ), nw;
	struct act_msg *h;
	uint64_t aux;
	do {
		uint32_t idx1 = (uint32_t)old;
		if (!idx1)
			return NULL;
		h = &rt->msgs[idx1 - 1];
		aux = __atomic_load_n(&h->_priv.aux, __ATOMIC_RELAXED);
		nw = head_make((uint32_t)aux, (uint32_t)(old >> 32) + 1);
	} while (!atomic_compare_exchange_weak_explicit(&rt->msg_free, &old, nw,
							 ACQ, ACQ));
	*len = (uint32_t)(aux >> 32);
	atomic_fetch_sub_explicit(&rt->msg_free_n, *len, RLX);
	return h;
}

int act__pool_init(struct act_runtime *rt)
{
	uint32_t n = rt->p.message_pool;
	ZB_ASSERT(n > 0);
	ZB_ASSERT(rt->msgs != NULL);
	atomic_store_explicit(&rt->msg_free, 0, RLX);
	/* Push chains from the top so that low indices come out first. */
	uint32_t i = n;
	while (i > 0) {
		uint32_t len = i % CHAIN ? i % CHAIN : CHAIN;
		uint32_t first = i - len;
		for (uint32_t k = 0; k < len; k++) {
			struct act_msg *m = &rt->msgs[first + k];
			m->_priv.state = MS_FREE;
			lset(m, k + 1 < len ? &rt->msgs[first + k + 1] : NULL);
		}
		chain_push(rt, &rt->msgs[first], len);
		i = first;
	}
	return 0;
}

static struct act_msg *take_from_chain(struct act_worker *w, struct act_msg *h,
				       uint32_t len)
{
	/* First message goes to the caller, the rest into the cache. */
	struct act_msg *m = lnext(h);
	uint32_t nc = atomic_load_explicit(&w->ncache, RLX);
	for (uint32_t k = 1; k < len && m; k++) {
		ZB_DASSERT(nc < CACHE_MAX);
		w->cache[nc++] = m;
		m = lnext(m);
	}
	atomic_store_explicit(&w->ncache, nc, RLX);
	return h;
}

struct act_msg *act__msg_get(struct act_runtime *rt)
{
	struct act_worker *w = act__my_worker(rt);
	struct act_msg *m;
	uint32_t len;
	if (ZB_LIKELY(w != NULL)) {
		uint32_t nc = atomic_load_explicit(&w->ncache, RLX);
		if (ZB_LIKELY(nc > 0)) {
			m = w->cache[nc - 1];
			atomic_store_explicit(&w->ncache, nc - 1, RLX);
		} else {
			m = chain_pop(rt, &len);
			if (!m)
				return NULL;
			m = take_from_chain(w, m, len);
		}
	} else {
		m = chain_pop(rt, &len);
		if (!m)
			return NULL;
		if (len > 1)
			chain_push(rt, lnext(m), len - 1);
	}
	ZB_DASSERT(m->_priv.state == MS_FREE);
	return m;
}

void act__msg_put(struct act_runtime *rt, struct act_msg *m)
{
	struct act_worker *w = act__my_worker(rt);
	m->_priv.state = MS_FREE;
	act__msg_moved(m); /* a handler freed its own message */
	if (ZB_LIKELY(w != NULL)) {
		uint32_t nc = atomic_load_explicit(&w->ncache, RLX);
		if (ZB_UNLIKELY(nc == CACHE_MAX)) {
			/* Hand the older half back as one chain. */
			for (uint32_t k = 0; k < CHAIN; k++)
				lset(w->cache[k], k + 1 < CHAIN ? w->cache[k + 1] : NULL);
			chain_push(rt, w->cache[0], CHAIN);
			memmove(w->cache, w->cache + CHAIN,
				(CACHE_MAX - CHAIN) * sizeof(w->cache[0]));
			nc -= CHAIN;
		}
		w->cache[nc] = m;
		atomic_store_explicit(&w->ncache, nc + 1, RLX);
	} else {
		lset(m, NULL);
		chain_push(rt, m, 1);
	}
}

/* Returns a worker's cached messages to the global stack (owner thread, or
 * any thread while the worker is not running). */
void act__cache_flush(struct act_runtime *rt, struct act_worker *w)
{
	uint32_t nc = atomic_load_explicit(&w->ncache, RLX);
	ZB_ASSERT(nc <= CACHE_MAX);
	while (nc > 0) {
		uint32_t len = nc > CHAIN ? CHAIN : nc;
		uint32_t first = nc - len;
		for (uint32_t k = 0; k < len; k++)
			lset(w->cache[first + k],
			     k + 1 < len ? w->cache[first + k + 1] : NULL);
		chain_push(rt, w->cache[first], len);
		nc = first;
	}
	atomic_store_explicit(&w->ncache, 0, RLX);
}

/* ---- public message API ----------------------------------------------------- */

struct act_msg *act_msg_alloc(struct act_runtime *rt)
{
	struct act_msg *m = act__msg_get(rt);
	if (ZB_UNLIKELY(!m))
		return NULL;
	uint32_t gen = m->_priv.gen + 1;
	m->id = (uint64_t)gen << 32 | act__msg_index(rt, m);
	m->from = act__tls.rt == rt && act__tls.cur ? act__tls.cur->id : ACT_ID_NONE;
	m->to = ACT_ID_NONE;
	m->tag = 0;
	m->flags = 0;
	m->ts_ns = 0;
	m->ref = 0;
	m->kind = ACT_PL_NONE;
	m->_sys = SYS_NONE;
	m->len = 0;
	m->_reason = 0;
	m->_priv.gen = gen;
	m->_priv.state = MS_OWNED;
	__atomic_store_n(&m->_priv.aux, 0, __ATOMIC_RELAXED);
	return m;
}

void act_buf_unref(struct act_buf *b)
{
	ZB_DASSERT(b != NULL);
	if (atomic_fetch_sub_explicit(&b->refs, 1, ACR) == 1 && b->release)
		b->release(b, b->ctx);
}

void act_msg_free(struct act_runtime *rt, struct act_msg *m)
{
	ZB_DASSERT(m >= rt->msgs && m < rt->msgs + rt->p.message_pool);
	ZB_DASSERT(m->_priv.state != MS_FREE);
	if (m->kind == ACT_PL_BUF && m->u.buf.buf) {
		act_buf_unref(m->u.buf.buf);
		m->u.buf.buf = NULL;
	}
	act__msg_put(rt, m);
}

int act_msg_set_bytes(struct act_msg *m, const void *data, size_t len)
{
	ZB_DASSERT(m != NULL);
	if (len > ACT_INLINE_MAX || (len && !data))
		return -EINVAL;
	if (len)
		memcpy(m->u.bytes, data, len);
	m->kind = ACT_PL_INLINE;
	m->len = (uint16_t)len;
	return 0;
}

void act_msg_set_buf(struct act_msg *m, struct act_buf *b, size_t off, size_t len)
{
	ZB_ASSERT(m != NULL && b != NULL);
	ZB_ASSERT(off <= b->len && len <= b->len - off);
	m->kind = ACT_PL_BUF;
	m->u.buf.buf = b;
	m->u.buf.off = off;
	m->u.buf.len = len;
}

void act_msg_set_gpu(struct act_msg *m, uint32_t backend, uint32_t device,
		     void *ptr, size_t len)
{
	ZB_ASSERT(m != NULL);
	m->kind = ACT_PL_GPU;
	m->u.gpu.backend = backend;
	m->u.gpu.device = device;
	m->u.gpu.ptr = ptr;
	m->u.gpu.len = len;
}

void act_msg_set_rdma(struct act_msg *m, uint16_t node, uint64_t addr,
		      uint32_t rkey, uint64_t len)
{
	ZB_ASSERT(m != NULL);
	m->kind = ACT_PL_RDMA;
	m->u.rdma.node = node;
	m->u.rdma.addr = addr;
	m->u.rdma.rkey = rkey;
	m->u.rdma.len = len;
}
