/* dataplane/memif_guard.c — survive DPDK 22.11 memif's disconnect race.
 *
 * When a memif peer hangs up (stops, crashes, is killed), the driver's
 * control-channel callback runs in the EAL interrupt thread and unmaps the
 * link's shared memory (memif_disconnect -> memif_free_regions) with no
 * synchronisation against the data path: an lcore in the middle of an RX or
 * TX burst on that port then touches unmapped memory and the whole node
 * dies of SIGSEGV (seen: tests/dataplane/test_memif.sh, the survivor of a
 * peer stopped mid-transfer, about 1 run in 20; stack: rte_eth_rx_burst /
 * rte_eth_tx_buffer_flush -> librte_net_memif). The driver clears its
 * CONNECTED flag before unmapping, so only a burst already in flight can
 * fault, and only on that link's memory.
 *
 * The guard: the address ranges of every memif shared-memory region this
 * process mapped ("memif_region_N" in /proc/self/maps, recorded by
 * port.c's watch when a link comes up) are kept in a fixed table. A SIGSEGV
 * whose address lies in one of them maps anonymous zero pages over the
 * (already unmapped) range and returns: the burst finishes on zeros — an RX
 * burst hands up zero-length or garbage frames that the transport's checks
 * drop, a TX burst writes into the void — and the next burst sees the link
 * down. Any other SIGSEGV goes to the handler installed before (the crash
 * report, a sanitizer's, or the default). The zero pages stay mapped (VA of
 * one region per absorbed disconnect; pages only where the burst wrote).
 *
 * The same race has a second face: the disconnect also frees the driver's
 * region descriptors and sets their pointers to NULL, so a burst in flight
 * can load a NULL descriptor and fault near address 0 (seen once in 14 runs
 * of test_memif.sh, SIGSEGV at 0 in eth_memif_tx). Nothing can be mapped
 * there, so lcores run memif bursts through dp__memif_guard_burst(): it
 * marks the thread as inside a burst and keeps a jump buffer (no signal
 * mask saved: no syscall); a fault below GUARD_LOW_LIMIT while the mark is
 * set leaves the burst by a long jump and the call returns the caller's
 * `on_fault` count (RX: 0 frames; TX: all of them, as sent — the driver may
 * have freed some already, so freeing them again could corrupt the pool).
 * What the cut burst held (mbufs the driver had allocated or not yet freed)
 * leaks: at most one burst per absorbed disconnect, counted in `absorbed`.
 */
#include "internal.h"

#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define GUARD_MAX 64
/* Faults below this address are NULL-pointer loads (Linux refuses to map
 * under vm.mmap_min_addr, 64 KiB by default). */
#define GUARD_LOW_LIMIT 65536u

/* The thread's burst in flight: a jump buffer and the mark the handler
 * checks. GCC's __builtin_setjmp saves 3 words (the compiler spills the
 * callee-saved registers around it): ~1.7 ns per burst here against ~4 for
 * glibc's _setjmp. The sanitizers intercept only libc's longjmp (to
 * unpoison the stack left), so their builds use that. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
typedef jmp_buf guard_jmp_buf;
#define GUARD_SETJMP(b) _setjmp(b)
#define GUARD_LONGJMP(b) longjmp(b, 1)
#else
typedef void *guard_jmp_buf[5];
#define GUARD_SETJMP(b) __builtin_setjmp(b)
#define GUARD_LONGJMP(b) __builtin_longjmp(b, 1)
#endif
static __thread struct {
	guard_jmp_buf env;
	volatile sig_atomic_t active;
} jump_tls;

struct guard_range {
	_Atomic uintptr_t lo, hi;
};

static struct guard_range ranges[GUARD_MAX];
static _Atomic unsigned nranges;        /* slots used (written by one thread) */
static unsigned next_slot;              /* round-robin once full */
static _Atomic uint64_t absorbed;
static struct sigaction prev;
static int installed;

/* Private zero pages at [at, at + len), only where nothing is mapped. */
static bool map_zero(uintptr_t at, size_t len)
{
	void *p = mmap((void *)at, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (p == (void *)at)
		return true;
	if (p != MAP_FAILED)             /* an old kernel ignored the hint */
		munmap(p, len);
	return false;
}

/* Zero pages over the unmapped range [lo, hi); when part of it is mapped
 * again, over the faulting page alone. */
static bool patch(uintptr_t lo, uintptr_t hi, uintptr_t addr)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	return map_zero(lo, hi - lo) || map_zero(addr & ~(uintptr_t)(pg - 1), pg);
}

static void on_segv(int sig, siginfo_t *si, void *uctx)
{
	uintptr_t a = (uintptr_t)si->si_addr;
	unsigned n = atomic_load_explicit(&nranges, memory_order_acquire);

	if (si->si_code > 0 && a < GUARD_LOW_LIMIT && jump_tls.active) {
		/* a NULL descriptor inside a memif burst: leave the burst. The
		 * kernel blocked SIGSEGV for this handler, and longjmp (unlike
		 * a return) does not restore the mask: unblock it first. */
		sigset_t set;
		sigemptyset(&set);
		sigaddset(&set, SIGSEGV);
		pthread_sigmask(SIG_UNBLOCK, &set, NULL);
		jump_tls.active = 0;
		atomic_fetch_add_explicit(&absorbed, 1, memory_order_relaxed);
		GUARD_LONGJMP(jump_tls.env);
	}
	if (si->si_code > 0) {           /* a real fault, not kill(2) */
		for (unsigned i = 0; i < n && i < GUARD_MAX; i++) {
			uintptr_t lo = atomic_load_explicit(&ranges[i].lo, memory_order_relaxed);
			uintptr_t hi = atomic_load_explicit(&ranges[i].hi, memory_order_relaxed);
			if (a >= lo && a < hi && patch(lo, hi, a)) {
				atomic_fetch_add_explicit(&absorbed, 1, memory_order_relaxed);
				return;          /* the access runs again, on zeros */
			}
		}
	}
	/* not ours: hand the signal to whoever had it before */
	(void)uctx;
	sigaction(sig, &prev, NULL);
	if (si->si_code <= 0)
		raise(sig);              /* delivered once we return */
	/* a fault re-executes and goes to the previous handler */
}

void dp__memif_guard_install(void)
{
	struct sigaction sa;

	if (installed)
		return;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_segv;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSEGV, &sa, &prev) == 0)
		installed = 1;
}

uint16_t dp__memif_guard_burst(dp__burst_fn fn, uint16_t port_id, uint16_t queue,
			       struct rte_mbuf **pkts, uint16_t n, uint16_t on_fault)
{
	volatile uint16_t cut = on_fault;        /* survives the jump */

	ZB_DASSERT(!jump_tls.active);
	if (GUARD_SETJMP(jump_tls.env))
		return cut;                      /* the handler cleared `active` */
	jump_tls.active = 1;
	uint16_t done = fn(port_id, queue, pkts, n);
	jump_tls.active = 0;
	return done;
}

void dp__memif_guard_add(uintptr_t lo, uintptr_t hi)
{
	unsigned n = atomic_load_explicit(&nranges, memory_order_relaxed);

	ZB_ASSERT(lo < hi);
	for (unsigned i = 0; i < n; i++)
		if (atomic_load_explicit(&ranges[i].lo, memory_order_relaxed) == lo &&
		    atomic_load_explicit(&ranges[i].hi, memory_order_relaxed) == hi)
			return;
	unsigned i = n < GUARD_MAX ? n : next_slot++ % GUARD_MAX;
	/* an overwritten slot: empty it first, so a reader never sees a mix */
	atomic_store_explicit(&ranges[i].hi, 0, memory_order_release);
	atomic_store_explicit(&ranges[i].lo, lo, memory_order_release);
	atomic_store_explicit(&ranges[i].hi, hi, memory_order_release);
	if (n < GUARD_MAX)
		atomic_store_explicit(&nranges, n + 1, memory_order_release);
}

unsigned dp__memif_guard_ranges(void)
{
	return atomic_load_explicit(&nranges, memory_order_relaxed);
}

uint64_t dp__memif_guard_absorbed(void)
{
	return atomic_load_explicit(&absorbed, memory_order_relaxed);
}
