/* Bounded lock-free ring: Dmitry Vyukov's bounded MPMC queue
 * (1024cores.net, "Bounded MPMC queue"). Each cell carries a sequence number:
 * a producer may fill cell i when seq == pos, a consumer may take it when
 * seq == pos + 1. One CAS per operation, no locks, no allocation after create.
 */
#include "zbmd/control.h"
#include "zbmd/common.h"

#include <stdlib.h>
#include <string.h>

struct ctl_ring {
	uint32_t mask;
	uint32_t elem_size;
	uint32_t stride;                    /* cell size: seq + element, 8-aligned */
	uint64_t head ZB_ALIGNED_CL;        /* next enqueue position */
	uint64_t tail ZB_ALIGNED_CL;        /* next dequeue position */
	unsigned char cells[] ZB_ALIGNED_CL;
};

static inline uint64_t *cell_seq(struct ctl_ring *r, uint64_t pos)
{
	return (uint64_t *)(r->cells + (size_t)(pos & r->mask) * r->stride);
}

int ctl_ring_create(struct ctl_ring **out, uint32_t capacity, uint32_t elem_size)
{
	struct ctl_ring *r;

	ZB_ASSERT(out != NULL);
	if (capacity < 2 || capacity > 65536 || (capacity & (capacity - 1)) ||
	    elem_size == 0 || elem_size > 1024)
		return -EINVAL;
	uint32_t stride = (uint32_t)((sizeof(uint64_t) + elem_size + 7) & ~7u);
	if (posix_memalign((void **)&r, ZB_CACHE_LINE,
			   sizeof(*r) + (size_t)capacity * stride) != 0)
		return -ENOMEM;
	memset(r, 0, sizeof(*r));
	r->mask = capacity - 1;
	r->elem_size = elem_size;
	r->stride = stride;
	for (uint64_t i = 0; i < capacity; i++)
		__atomic_store_n(cell_seq(r, i), i, __ATOMIC_RELAXED);
	*out = r;
	ZB_ASSERT(ctl_ring_capacity(r) == capacity);
	return 0;
}

void ctl_ring_free(struct ctl_ring *r)
{
	free(r);
}

uint32_t ctl_ring_capacity(const struct ctl_ring *r)
{
	return r->mask + 1;
}

int ctl_ring_enqueue(struct ctl_ring *r, const void *elem)
{
	uint64_t pos = __atomic_load_n(&r->head, __ATOMIC_RELAXED);

	ZB_DASSERT(r != NULL && elem != NULL);
	for (;;) {
		uint64_t *seq = cell_seq(r, pos);
		uint64_t s = __atomic_load_n(seq, __ATOMIC_ACQUIRE);
		int64_t dif = (int64_t)(s - pos);
		if (dif == 0) {
			if (__atomic_compare_exchange_n(&r->head, &pos, pos + 1, true,
							__ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
				memcpy(seq + 1, elem, r->elem_size);
				__atomic_store_n(seq, pos + 1, __ATOMIC_RELEASE);
				return 0;
			}
			/* pos was reloaded by the failed CAS */
		} else if (dif < 0) {
			return -ENOBUFS;
		} else {
			pos = __atomic_load_n(&r->head, __ATOMIC_RELAXED);
		}
	}
}

int ctl_ring_dequeue(struct ctl_ring *r, void *elem)
{
	uint64_t pos = __atomic_load_n(&r->tail, __ATOMIC_RELAXED);

	ZB_DASSERT(r != NULL && elem != NULL);
	for (;;) {
		uint64_t *seq = cell_seq(r, pos);
		uint64_t s = __atomic_load_n(seq, __ATOMIC_ACQUIRE);
		int64_t dif = (int64_t)(s - (pos + 1));
		if (dif == 0) {
			if (__atomic_compare_exchange_n(&r->tail, &pos, pos + 1, true,
							__ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
				memcpy(elem, seq + 1, r->elem_size);
				__atomic_store_n(seq, pos + r->mask + 1, __ATOMIC_RELEASE);
				return 0;
			}
		} else if (dif < 0) {
			return -EAGAIN;
		} else {
			pos = __atomic_load_n(&r->tail, __ATOMIC_RELAXED);
		}
	}
}
