/* Deterministic fault injection on the receive path ([fault] in the config):
 * drop, duplicate, or hold back (reorder) received frames, decided by a
 * PRNG seeded from params.fault.seed. Held frames are copied into slots
 * reserved at init and released after 1-3 later frames or at tp_poll. */
#include "transport_internal.h"

#define FAULT_FRAME_MAX (WIRE_ETH_LEN + WIRE_MTU_MAX)

/* splitmix64: small, fast, and the same sequence on every platform */
uint64_t tp__rand(struct tp *tp)
{
	uint64_t z = (tp->rng += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static double rand01(struct tp *tp)
{
	return (double)(tp__rand(tp) >> 11) * (1.0 / 9007199254740992.0);
}

int tp__fault_init(struct tp *tp)
{
	const struct tp_fault *f = &tp->p.fault;

	tp->rng = f->seed;
	tp->fault_on = f->drop_rate > 0 || f->dup_rate > 0 || f->reorder_rate > 0;
	if (!tp->fault_on)
		return 0;
	for (int i = 0; i < TP_FAULT_SLOTS; i++) {
		tp->fslot[i].buf = malloc(FAULT_FRAME_MAX);
		if (!tp->fslot[i].buf) {
			tp__fault_fini(tp);
			return -ENOMEM;
		}
	}
	ZB_ASSERT(tp->fault_held == 0);
	return 0;
}

void tp__fault_fini(struct tp *tp)
{
	for (int i = 0; i < TP_FAULT_SLOTS; i++) {
		free(tp->fslot[i].buf);
		tp->fslot[i].buf = NULL;
		tp->fslot[i].len = 0;
	}
	tp->fault_held = 0;
}

static void release(struct tp *tp, struct tp_fault_slot *s, uint64_t now)
{
	uint32_t len = s->len;

	s->len = 0;
	tp->fault_held--;
	tp__rx_frame(tp, s->buf, len, s->flags, NULL, now);
}

/* One tick for every held frame; release those whose turn came. */
static void tick(struct tp *tp, const struct tp_fault_slot *skip, uint64_t now)
{
	for (int i = 0; i < TP_FAULT_SLOTS && tp->fault_held; i++) {
		struct tp_fault_slot *s = &tp->fslot[i];
		if (s->len && s != skip && --s->countdown == 0)
			release(tp, s, now);
	}
}

static struct tp_fault_slot *hold(struct tp *tp, const uint8_t *frame,
				  size_t len, unsigned flags)
{
	if (len == 0 || len > FAULT_FRAME_MAX)
		return NULL;
	for (int i = 0; i < TP_FAULT_SLOTS; i++) {
		struct tp_fault_slot *s = &tp->fslot[i];
		if (s->len == 0) {
			memcpy(s->buf, frame, len);
			s->len = (uint32_t)len;
			s->flags = flags;
			s->countdown = 1 + (uint32_t)(tp__rand(tp) % 3);
			tp->fault_held++;
			return s;
		}
	}
	return NULL;
}

int tp__fault_rx(struct tp *tp, const uint8_t *frame, size_t len,
		 unsigned flags, void *ref, uint64_t now)
{
	const struct tp_fault *f = &tp->p.fault;
	double u = rand01(tp);
	struct tp_fault_slot *held = NULL;
	int rc = 0;

	ZB_DASSERT(tp->fault_on);
	if (u < f->drop_rate) {
		tp->st.fault_drops++;
	} else if (u < f->drop_rate + f->dup_rate) {
		tp->st.fault_dups++;
		/* nothing kept: the first copy's consumer may release the
		 * message (and free a kept frame) before the second is seen */
		rc = tp__rx_frame(tp, frame, len, flags, NULL, now);
		tp__rx_frame(tp, frame, len, flags, NULL, now);
	} else if (u < f->drop_rate + f->dup_rate + f->reorder_rate &&
		   (held = hold(tp, frame, len, flags)) != NULL) {
		tp->st.fault_reorders++;
		tp__arm(tp, 0);
	} else {
		rc = tp__rx_frame(tp, frame, len, flags, ref, now);
	}
	if (tp->fault_held)
		tick(tp, held, now);
	return rc;
}

void tp__fault_flush(struct tp *tp, uint64_t now)
{
	for (int i = 0; i < TP_FAULT_SLOTS && tp->fault_held; i++)
		if (tp->fslot[i].len)
			release(tp, &tp->fslot[i], now);
}
