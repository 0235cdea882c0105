/* test_abort_async.c — coll_abort_async() from a thread that does not own
 * the communicator (what the dpdk host's dp_on_epoch callback does on an
 * lcore): two nodes in one process over real tcp, channels on lane
 * threads. Node 1 has an all-reduce running that cannot finish (node 0
 * never starts its part); another thread asks for the abort with
 * ZB_ERR_EPOCH; the running collective completes with it, quickly (the
 * no-progress bound is 5 s), the message says why, later calls are
 * refused, a second request is -EALREADY. Run under TSan too. */
#include "tap.h"
#include "two_node_cfg.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#define NCH 2
#define CNT 100003
#define WHY "membership epoch changed from 3 to 4: node 0 removed"

static int port, sub;
static pthread_barrier_t bar;

struct node {
	int id;
	struct zb_config cfg;
	struct coll_comm *c;
	atomic_int stop;
	pthread_t lanes[NCH];
	uint16_t chs[NCH];
	int rc, op_rc, after_rc, async_rc, again_rc;
	uint64_t abort_ns;
	char err[256];
	float *s, *r;
};

static struct node nd[2] = {{.id = 0}, {.id = 1}};

struct lane_arg {
	struct node *nd;
	uint16_t ch;
};

static void *lane_main(void *arg)
{
	struct lane_arg *l = arg;
	while (!atomic_load(&l->nd->stop))
		if (coll_progress_channel(l->nd->c, l->ch) == 0)
			usleep(10);
	return NULL;
}

/* Not the owner: the "lcore" that applied the new epoch. */
static void *aborter(void *arg)
{
	struct node *n = arg;
	usleep(50000);   /* the collective is running by now */
	n->abort_ns = zb_now_ns();
	n->async_rc = coll_abort_async(n->c, ZB_ERR_EPOCH, WHY);
	n->again_rc = coll_abort_async(n->c, ZB_ERR_SHUTDOWN, "second");
	return NULL;
}

static void *node_main(void *arg)
{
	struct node *n = arg;
	struct lane_arg la[NCH];
	pthread_t ab;

	if ((n->rc = two_node_comm(n->id, 81, sub, port, NCH, &n->cfg, &n->c, n->err,
				   sizeof(n->err))) < 0)
		return NULL;
	for (uint16_t i = 0; i < NCH; i++) {
		la[i] = (struct lane_arg){.nd = n, .ch = i};
		pthread_create(&n->lanes[i], NULL, lane_main, &la[i]);
	}
	n->rc = coll_allreduce(n->c, n->s, n->r, CNT, ZB_F32, ZB_SUM);  /* warm */
	pthread_barrier_wait(&bar);
	if (n->id == 1 && n->rc == 0) {
		pthread_create(&ab, NULL, aborter, n);
		n->op_rc = coll_allreduce(n->c, n->s, n->r, CNT, ZB_F32, ZB_SUM);
		n->abort_ns = zb_now_ns() - n->abort_ns;
		pthread_join(ab, NULL);
		n->after_rc = coll_allreduce(n->c, n->s, n->r, 10, ZB_F32, ZB_SUM);
	}
	pthread_barrier_wait(&bar);
	atomic_store(&n->stop, 1);
	for (uint16_t i = 0; i < NCH; i++)
		pthread_join(n->lanes[i], NULL);
	return NULL;
}

int main(void)
{
	tap_plan(6);
	two_node_place(7919, &port, &sub);
	pthread_barrier_init(&bar, NULL, 2);
	for (int i = 0; i < 2; i++) {
		nd[i].s = calloc(CNT, sizeof(float));
		nd[i].r = calloc(CNT, sizeof(float));
	}
	two_node_run(node_main, &nd[0], &nd[1]);
	for (int i = 0; i < 2; i++)
		if (nd[i].rc)
			tap_diag("node %d: %s (%s)", i, nd[i].err, zb_strerror(nd[i].rc));
	ok(nd[0].rc == 0 && nd[1].rc == 0, "two nodes, %d lanes each: an all-reduce", NCH);
	is_int(nd[1].async_rc, 0, "coll_abort_async from a non-owner thread");
	is_int(nd[1].again_rc, -EALREADY, "a second request: -EALREADY (the first wins)");
	ok(nd[1].op_rc == ZB_ERR_EPOCH && nd[1].abort_ns < 1000000000ull,
	   "the running collective fails with ZB_ERR_EPOCH in %.1f ms (%s; bound 5000 ms)",
	   (double)nd[1].abort_ns / 1e6, zb_strerror(nd[1].op_rc));
	ok(nd[1].c && strstr(coll_error(nd[1].c), WHY) != NULL, "the message says why: %s",
	   nd[1].c ? coll_error(nd[1].c) : "-");
	is_int(nd[1].after_rc, ZB_ERR_EPOCH, "later collectives are refused with it");
	for (int i = 0; i < 2; i++) {
		if (nd[i].c)
			coll_comm_destroy(nd[i].c);
		free(nd[i].s);
		free(nd[i].r);
	}
	return tap_done();
}
