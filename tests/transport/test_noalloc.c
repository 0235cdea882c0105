/* No allocation after init: once instances and peers exist, sending,
 * receiving, acking, retransmitting, reassembling, delivering and releasing
 * (over a lossy, reordering link) never call malloc/calloc/realloc/free.
 * Counted by interposing the allocator in this program; under ASan/TSan
 * (which own the allocator) the check is skipped. */
#include "tap.h"
#include "sim.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define INTERPOSE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define INTERPOSE 0
#endif
#endif
#ifndef INTERPOSE
#define INTERPOSE 1
#endif

static volatile int counting;
static volatile uint64_t allocs;

#if INTERPOSE
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);
void *malloc(size_t n) { if (counting) allocs++; return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { if (counting) allocs++; return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { if (counting) allocs++; return __libc_realloc(p, n); }
void free(void *p) { if (counting && p) allocs++; __libc_free(p); }
void *aligned_alloc(size_t a, size_t n) { if (counting) allocs++; return __libc_memalign(a, n); }
#endif

static uint8_t payload[200000];
static uint64_t delivered, done_ok;

static int deliver(struct sim_node *n, struct tp_msg *m)
{
	delivered++;
	tp_msg_release(n->tp, m);
	return 0;
}

static void send_done(struct sim_node *n, uint64_t c, int st)
{
	(void)n;
	(void)c;
	done_ok += st == 0;
}

int main(void)
{
	struct sim_link l = {.loss = 0.05, .dup = 0.01, .reorder = 0.25,
			     .delay_ns = 5000, .reorder_ns = 20000};
	struct tp_fault f = {.drop_rate = 0.02, .dup_rate = 0.01,
			     .reorder_rate = 0.1, .seed = 5};
	struct sim s;
	struct tp_params p;
	struct tp_ref ref;
	uint64_t sent = 0, total = 20000;

	if (!INTERPOSE)
		tap_skip_all("allocator interposition is off under sanitizers");
	tap_plan(4);
	/* the counter itself works: 0 below would mean nothing if the
	 * interposed functions were not the ones called */
	counting = 1;
	void *volatile probe = malloc(16);
	free(probe);
	counting = 0;
	is_int(allocs, 2, "the counter sees this binary's malloc and free");
	allocs = 0;
	ZB_ASSERT(sim_init(&s, 3, &l, 31, 1 << 14) == 0);
	s.deliver = deliver;
	s.send_done = send_done;
	for (uint16_t i = 0; i < 3; i++) {
		sim_params(&p, i, 90 + i);
		p.fault = f;
		ZB_ASSERT(sim_node_start(&s, i, &p) == 0);
	}
	tp_ref_init(&ref, NULL);   /* static buffer */
	counting = 1;
	while (done_ok < total && s.now < 20ull * 1000000000ull) {
		while (sent < total) {
			size_t len = (sent % 10 == 0) ? 20000 + sent % 100000 : sent % 300;
			uint16_t from = (uint16_t)(sent % 3), to = (uint16_t)((sent + 1) % 3);
			if (tp_send(s.nodes[from].tp, to, (uint16_t)(sent % 4), payload,
				    len, &ref, sent, s.now))
				break;
			sent++;
		}
		sim_step(&s, 50000);
	}
	counting = 0;
	is_int(done_ok, total, "20000 messages (some 20-120 KB) acknowledged over a lossy link");
	is_int(delivered, total, "... and delivered");
	is_int(allocs, 0, "no allocator call after init");
	sim_fini(&s);
	return tap_done();
}
