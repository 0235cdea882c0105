/* tests/actors/util.h — helpers shared by the actor tests. */
#ifndef ACT_TEST_UTIL_H
#define ACT_TEST_UTIL_H

#include "tap.h"
#include "zbmd/actors.h"
#include "zbmd/common.h"

#include <pthread.h>
#include <string.h>
#include <unistd.h>

static inline struct act_runtime *mk_rt(uint32_t workers, uint32_t cap)
{
	struct act_params p;
	struct act_runtime *rt = NULL;
	act_params_default(&p);
	p.workers = workers;
	p.max_actors = 4096;
	p.message_pool = 16384;
	p.pin = false;
	if (cap)
		p.mailbox_capacity = cap;
	if (act_runtime_create(&p, &rt)) {
		printf("Bail out! act_runtime_create failed\n");
		exit(1);
	}
	return rt;
}

/* Poll every worker until a whole round does nothing (bounded). */
static inline size_t drain(struct act_runtime *rt, uint32_t workers)
{
	size_t total = 0;
	for (int round = 0; round < 100000; round++) {
		size_t n = 0;
		for (uint32_t w = 0; w < workers; w++)
			n += act_worker_poll(rt, w, 100000);
		total += n;
		if (!n)
			break;
	}
	return total;
}

/* Poll until cond() or time runs out (for timers in poll mode). */
#define DRAIN_UNTIL(rt, workers, cond, ms)                                     \
	do {                                                                   \
		uint64_t d__ = zb_now_ns() + (uint64_t)(ms) * 1000000ull;      \
		while (!(cond) && zb_now_ns() < d__) {                         \
			if (!drain(rt, workers))                               \
				usleep(200);                                   \
		}                                                              \
	} while (0)

/* Wait (threads mode) until cond or timeout. */
#define WAIT_UNTIL(cond, ms)                                                   \
	do {                                                                   \
		uint64_t d__ = zb_now_ns() + (uint64_t)(ms) * 1000000ull;      \
		while (!(cond) && zb_now_ns() < d__)                           \
			usleep(500);                                           \
	} while (0)

/* Runs worker 0's loop from this thread for ms milliseconds (the
 * supervision tests drive one worker by hand). */
static inline void pump_worker0(struct act_runtime *rt, uint64_t ms)
{
	uint64_t end = zb_now_ns() + ms * 1000000ull;
	do {
		if (!act_worker_poll(rt, 0, 1000))
			usleep(100);
	} while (zb_now_ns() < end);
}

#endif
