/* The fast path allocates nothing: isend / irecv / test / the CQ poller
 * run 2000 messages (inline, eager from the bounce buffer, write with
 * immediate) over the simulated fabric while every malloc-family call of
 * the process is counted. (Skipped under sanitizers, which own malloc.) */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#include "tap.h"
int main(void)
{
	tap_skip_all("sanitizer build: malloc belongs to the sanitizer");
}
#else
#include "sim_fabric.h"
#include "tap.h"

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static _Atomic int counting, allocs;

void *malloc(size_t n) { if (counting) allocs++; return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { if (counting) allocs++; return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { if (counting) allocs++; return __libc_realloc(p, n); }
void *aligned_alloc(size_t al, size_t n) { if (counting) allocs++; return __libc_memalign(al, n); }
int posix_memalign(void **p, size_t al, size_t n)
{
	if (counting)
		allocs++;
	*p = __libc_memalign(al, n);
	return *p ? 0 : ENOMEM;
}
void free(void *p) { __libc_free(p); }

int main(void)
{
	static uint8_t sbuf[1 << 16], rbuf[1 << 16];
	void *rq, *sq;
	size_t n;
	int done_ok = 0, probe;

	tap_plan(3);
	counting = 1;
	probe = allocs;
	free(malloc(16));
	counting = 0;
	ok(allocs == probe + 1, "the counter sees this binary's allocations");
	allocs = 0;
	setup(4);
	struct rdma_mr *smh = host_mr(sbuf, sizeof(sbuf)), *rmh = host_mr(rbuf, sizeof(rbuf));
	counting = 1;
	for (int i = 0; i < 2000; i++) {
		size_t sz = i % 3 == 0 ? 16 : i % 3 == 1 ? 3000 : 40000;
		bool reg = i % 3 == 2;
		if (rdma__irecv(&cr, rbuf, reg ? sizeof(rbuf) : 4096, 0, reg ? rmh : NULL, &rq) != 0)
			break;
		if (post_send(sbuf, sz, reg ? smh : NULL, &sq) != 0)
			break;
		if (wait_req(sq, &n) == 0 && wait_req(rq, &n) == 0 && n == sz)
			done_ok++;
		rdma_dp_poll(rdma_cq_source(&ctx, 0), 0);
	}
	counting = 0;
	is_int(done_ok, 2000, "2000 messages of three kinds went through");
	is_int(allocs, 0, "no allocation on the fast path");
	teardown();
	return tap_done();
}
#endif
