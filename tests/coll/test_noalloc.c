/* test_noalloc.c — no allocation after coll_comm_create(): two nodes (one
 * thread each, real tcp over loopback) run every collective kind many times
 * while this binary's malloc family counts calls made after init. Also the
 * non-blocking API driven by hand. */
#include "tap.h"
#include "zbmd/coll.h"
#include "zbmd/config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define NOALLOC_SANITIZER 1
#else
#define NOALLOC_SANITIZER 0
/* Interpose the malloc family (glibc exports the real ones as __libc_*). */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
#endif

static __thread volatile int counting;  /* volatile: GCC assumes malloc reads no globals */
static atomic_long allocs_after_init;

#if !NOALLOC_SANITIZER
void *malloc(size_t n)
{
	if (counting)
		atomic_fetch_add(&allocs_after_init, 1);
	return __libc_malloc(n);
}
void *calloc(size_t a, size_t b)
{
	if (counting)
		atomic_fetch_add(&allocs_after_init, 1);
	return __libc_calloc(a, b);
}
void *realloc(void *p, size_t n)
{
	if (counting)
		atomic_fetch_add(&allocs_after_init, 1);
	return __libc_realloc(p, n);
}
void *aligned_alloc(size_t al, size_t n)
{
	if (counting)
		atomic_fetch_add(&allocs_after_init, 1);
	return __libc_memalign(al, n);
}
int posix_memalign(void **p, size_t al, size_t n)
{
	if (counting)
		atomic_fetch_add(&allocs_after_init, 1);
	*p = __libc_memalign(al, n);
	return *p ? 0 : ENOMEM;
}
#endif

static int port, sub;
static pthread_barrier_t bar;

struct node {
	int id;
	struct zb_config cfg;
	struct coll_comm *c;
	int rc;
	int runs;
	int abort_rc, after_rc;
	uint64_t after_ms;
	char err[256];
};

#define CNT 20011
static float fbuf[2][2][CNT * 2];

static void *node_main(void *arg)
{
	struct node *nd = arg;
	struct cfg_error ce;
	char text[512];

	snprintf(text, sizeof(text),
		 "[node]\nid = %d\n[cluster]\nid = 7\n[transport]\nkind = tcp\ntcp_port = %d\n"
		 "[coll]\nchannels = 3\nchunk_kb = 8\n"
		 "[peer.0]\nip = 127.79.%d.1\n[peer.1]\nip = 127.79.%d.2\n",
		 nd->id, port, sub, sub);
	if ((nd->rc = cfg_load_string(&nd->cfg, text, "test", &ce)) < 0)
		return NULL;
	struct coll_comm_args a = {.cfg = &nd->cfg, .connect_timeout_ms = 10000};
	if ((nd->rc = coll_comm_create(&a, &nd->c, nd->err, sizeof(nd->err))) < 0)
		return NULL;
	float *s = fbuf[nd->id][0], *r = fbuf[nd->id][1];
	for (int i = 0; i < CNT * 2; i++)
		s[i] = (float)(nd->id + i % 5);
	pthread_barrier_wait(&bar);
	counting = 1;           /* from here on: no allocation allowed */
	for (int k = 0; k < 10 && nd->rc == 0; k++) {
		for (int op = 0; op < ZB_REDOP_COUNT && nd->rc == 0; op++, nd->runs++)
			nd->rc = coll_allreduce(nd->c, s, r, CNT, ZB_F32, (enum zb_redop)op);
		if (!nd->rc)
			nd->rc = coll_reduce_scatter(nd->c, s, r, CNT, ZB_F32, ZB_SUM);
		if (!nd->rc)
			nd->rc = coll_allgather(nd->c, s, r, CNT, ZB_F32);
		if (!nd->rc)
			nd->rc = coll_broadcast(nd->c, s, r, CNT, ZB_F32, (uint32_t)(k % 2));
		if (!nd->rc)
			nd->rc = coll_barrier(nd->c);
		nd->runs += 4;
	}
	counting = 0;
	if (nd->rc)
		snprintf(nd->err, sizeof(nd->err), "%s", coll_error(nd->c));
	/* Epoch change on node 0: both nodes' next collective fails fast. */
	pthread_barrier_wait(&bar);
	if (nd->id == 0)
		nd->abort_rc = coll_abort(nd->c, ZB_ERR_EPOCH, "membership epoch 2");
	uint64_t t0 = zb_now_ns();
	nd->after_rc = coll_allreduce(nd->c, s, r, CNT, ZB_F32, ZB_SUM);
	nd->after_ms = (zb_now_ns() - t0) / 1000000;
	return NULL;
}

int main(void)
{
	struct node nd[2] = {{.id = 0}, {.id = 1}};
	pthread_t th[2];

	if (NOALLOC_SANITIZER)
		tap_skip_all("allocation counting interposes malloc, which the "
			     "sanitizer owns");
	tap_plan(6);
	port = 20000 + (int)(getpid() % 20000);
	sub = (int)(getpid() % 200);
	pthread_barrier_init(&bar, NULL, 2);
	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, node_main, &nd[i]);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < 2; i++)
		if (nd[i].rc)
			tap_diag("node %d: %s (%s)", i, nd[i].err, zb_strerror(nd[i].rc));
	ok(nd[0].rc == 0 && nd[1].rc == 0 && nd[0].runs == 90,
	   "90 collectives of every kind on 2 nodes, 3 channels, 8 KiB chunks");
	is_int(atomic_load(&allocs_after_init), 0,
	       "no malloc/calloc/realloc/aligned_alloc after coll_comm_create");
	/* The counter works: an allocation while counting is seen. */
	counting = 1;
	void *volatile p = malloc(16);
	counting = 0;
	free(p);
	is_int(atomic_load(&allocs_after_init), 1, "the counter sees an allocation");
	is_int(nd[0].abort_rc, ZB_ERR_EPOCH, "coll_abort returns the error");
	ok(nd[0].after_rc == ZB_ERR_EPOCH && strstr(coll_error(nd[0].c), "epoch 2"),
	   "the aborting node: later collectives fail with it (%s)", coll_error(nd[0].c));
	ok(nd[1].after_rc == ZB_ERR_PEER_DOWN && nd[1].after_ms < 2000,
	   "the other node fails at once with peer down (%llu ms: %s)",
	   (unsigned long long)nd[1].after_ms, coll_error(nd[1].c));
	coll_comm_destroy(nd[0].c);
	coll_comm_destroy(nd[1].c);
	return tap_done();
}
