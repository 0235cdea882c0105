/* The cluster view each lcore applies (dataplane/cluster.c): ordering rules,
 * epoch callbacks, and torn-free lock-free reads while the lcore writes
 * (one writer thread playing lcore 0, two reader threads checking that every
 * view they see is internally consistent and that epochs never go back). */
#include "tap.h"
#include "zbmd/common.h"
#include "zbmd/dataplane.h"

#include <pthread.h>
#include <string.h>

#define WRITES 200000

static void make_view(struct dp_cluster_view *v, uint64_t epoch, uint16_t leader)
{
	memset(v, 0, sizeof(*v));
	v->epoch = epoch;
	v->leader = leader;
	v->n_members = (uint16_t)(epoch % DP_CLUSTER_MAX + 1);
	for (unsigned k = 0; k < v->n_members; k++)
		v->ring[k] = (uint16_t)((epoch * 7 + k) & 0xffff);
}

static bool consistent(const struct dp_cluster_view *v)
{
	if (v->epoch == 0)
		return v->n_members == 0;
	if (v->n_members != v->epoch % DP_CLUSTER_MAX + 1)
		return false;
	for (unsigned k = 0; k < v->n_members; k++)
		if (v->ring[k] != (uint16_t)((v->epoch * 7 + k) & 0xffff))
			return false;
	return true;
}

static uint64_t calls, last_old, last_new;
static void on_epoch(void *arg, unsigned index, uint64_t old_epoch,
		     const struct dp_cluster_view *v)
{
	(void)arg;
	(void)index;
	calls++;
	last_old = old_epoch;
	last_new = v->epoch;
}

static volatile int stop_readers;
struct reader { unsigned index; uint64_t reads, torn, backwards; };

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	uint64_t prev = 0;
	struct dp_cluster_view v;
	while (!__atomic_load_n(&stop_readers, __ATOMIC_RELAXED)) {
		dp_cluster_view(r->index, &v);
		r->reads++;
		if (!consistent(&v))
			r->torn++;
		if (v.epoch < prev)
			r->backwards++;
		prev = v.epoch;
	}
	return NULL;
}

int main(void)
{
	struct dp_cluster_view v;
	tap_plan(15);

	is_int(dp_cluster_epoch(0), 0, "no view applied: epoch 0");
	is_int(dp_cluster_view(0, &v), 0, "view readable before any");
	ok(v.epoch == 0 && v.n_members == 0, "... and empty");
	is_int(dp_cluster_view(100000, &v), -EINVAL, "index out of range: -EINVAL");
	is_int(dp_on_epoch(NULL, NULL), -EINVAL, "dp_on_epoch(NULL): -EINVAL");
	is_int(dp_on_epoch(on_epoch, NULL), 0, "epoch callback registered");

	make_view(&v, 5, 1);
	is_int(dp_cluster_apply(1, &v, 0), 1, "epoch 5 applied on lcore 1");
	ok(calls == 1 && last_old == 0 && last_new == 5, "callback: 0 -> 5");
	make_view(&v, 5, 2);
	dp_cluster_apply(1, &v, 0);
	ok(calls == 1 && dp_cluster_changes(1) == 2,
	   "leader change, same epoch: applied, no callback");
	make_view(&v, 4, 2);
	is_int(dp_cluster_apply(1, &v, 0), 0, "an older epoch is ignored");
	ok(dp_cluster_epoch(1) == 5 && dp_cluster_epoch(0) == 0,
	   "lcores have their own views (lcore 1: 5, lcore 0: 0)");

	/* concurrent readers while lcore 0 applies WRITES views */
	struct reader rd[2] = {{0, 0, 0, 0}, {0, 0, 0, 0}};
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, reader_main, &rd[i]);
	for (uint64_t e = 1; e <= WRITES; e++) {
		make_view(&v, e, (uint16_t)(e % 3));
		dp_cluster_apply(0, &v, 0);
	}
	__atomic_store_n(&stop_readers, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	uint64_t reads = rd[0].reads + rd[1].reads;
	tap_diag("%llu reads during %d writes", (unsigned long long)reads, WRITES);
	ok(reads > 0 && rd[0].torn + rd[1].torn == 0, "no torn view seen by readers");
	ok(rd[0].backwards + rd[1].backwards == 0, "epochs never go back for a reader");
	ok(dp_cluster_epoch(0) == WRITES && calls == 1 + WRITES && last_old == WRITES - 1,
	   "every epoch change ran the callback once, with the previous epoch");
	for (int i = 1; i < DP_EPOCH_HOOKS; i++)
		dp_on_epoch(on_epoch, NULL);
	is_int(dp_on_epoch(on_epoch, NULL), -ENOSPC, "DP_EPOCH_HOOKS callbacks at most");
	return tap_done();
}
