/* kbench — kernel-path peers for `make bench-transport`.
 *
 *   kbench udp-sink PORT                 count 64-byte datagrams (recvmmsg)
 *                                        until 0.5 s pass without any after
 *                                        the first; print the rate
 *   kbench udp-blast IP PORT SECONDS     send 64-byte datagrams (sendmmsg,
 *                                        batches of 64) for SECONDS
 *   kbench tcp-echo PORT                 echo one connection's bytes back
 *   kbench tcp-ping IP PORT N            N ping-pongs of 64 bytes (after 1000
 *                                        warm-up ones); print RTT p50/p99
 *   kbench copy PAYLOAD SECONDS          one core's copy rate as a copying
 *                                        memif sender sees it: 16 MiB
 *                                        messages (two, alternating), cut
 *                                        into PAYLOAD-byte pieces, copied
 *                                        into a 1024-slot ring of 2 KiB (or
 *                                        PAYLOAD rounded up to 1 KiB) slots
 *   kbench ring-copy PAYLOAD SECONDS     a memif hop's two copies between
 *                                        the CPUs: a thread on CPU 0 copies
 *                                        PAYLOAD-byte frames into a 256-slot
 *                                        ring in bursts of 32, one on CPU 1
 *                                        copies them out (as the PMD's TX
 *                                        and RX do); Gbit/s of frames, once
 *                                        with 16-byte moves (SSE, what DPDK
 *                                        22.11's rte_memcpy compiles to in
 *                                        Debian's generic build) and once
 *                                        with 64-byte moves (AVX-512; 32-byte
 *                                        AVX2 where the CPU lacks it)
 *   kbench cpu-rtt                       the machine's state: a cache line
 *                                        bounced between CPU 0 and CPU 1
 *                                        (two pinned threads), median round
 *                                        trip of 9 batches; on the VMs here
 *                                        ~85 ns or ~400 ns depending on
 *                                        where the host placed the vCPUs
 *
 * Output: "RESULT key=value ..." lines. Exit 0 ok, 1 failure, 2 usage. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <immintrin.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define DGRAM 64
#define BATCH 64
#define WARM 1000

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int parse_addr(const char *ip, const char *port, struct sockaddr_in *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((uint16_t)atoi(port));
	if (ip && inet_pton(AF_INET, ip, &sa->sin_addr) != 1)
		return -1;
	if (!ip)
		sa->sin_addr.s_addr = htonl(INADDR_ANY);
	return 0;
}

static int udp_sink(const char *port)
{
	struct sockaddr_in sa;
	int fd = socket(AF_INET, SOCK_DGRAM, 0), big = 8 << 20;
	if (fd < 0 || parse_addr(NULL, port, &sa) || bind(fd, (void *)&sa, sizeof(sa))) {
		perror("udp-sink");
		return 1;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	printf("READY\n");
	fflush(stdout);
	static char bufs[BATCH][DGRAM + 64];
	struct mmsghdr mh[BATCH];
	struct iovec iov[BATCH];
	uint64_t count = 0, first = 0, last = 0;
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int to = count ? 500 : 30000;
		if (poll(&p, 1, to) <= 0)
			break;
		for (int i = 0; i < BATCH; i++) {
			iov[i] = (struct iovec){bufs[i], sizeof(bufs[i])};
			memset(&mh[i], 0, sizeof(mh[i]));
			mh[i].msg_hdr.msg_iov = &iov[i];
			mh[i].msg_hdr.msg_iovlen = 1;
		}
		int n = recvmmsg(fd, mh, BATCH, MSG_DONTWAIT, NULL);
		if (n <= 0)
			continue;
		if (!count)
			first = now_ns();
		last = now_ns();
		count += (uint64_t)n;
	}
	double s = (double)(last - first) / 1e9;
	printf("RESULT udp_received=%lu seconds=%.3f rate_Mmsgs=%.3f\n",
	       (unsigned long)count, s, s > 0 ? (double)count / s / 1e6 : 0.0);
	close(fd);
	return count ? 0 : 1;
}

static int udp_blast(const char *ip, const char *port, double secs)
{
	struct sockaddr_in sa;
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0 || parse_addr(ip, port, &sa) || connect(fd, (void *)&sa, sizeof(sa))) {
		perror("udp-blast");
		return 1;
	}
	static char buf[DGRAM];
	struct mmsghdr mh[BATCH];
	struct iovec iov = {buf, sizeof(buf)};
	for (int i = 0; i < BATCH; i++) {
		memset(&mh[i], 0, sizeof(mh[i]));
		mh[i].msg_hdr.msg_iov = &iov;
		mh[i].msg_hdr.msg_iovlen = 1;
	}
	uint64_t t0 = now_ns(), sent = 0, end = t0 + (uint64_t)(secs * 1e9);
	while (now_ns() < end) {
		int n = sendmmsg(fd, mh, BATCH, 0);
		if (n > 0)
			sent += (uint64_t)n;
		else if (errno != ENOBUFS && errno != EAGAIN && errno != ECONNREFUSED) {
			perror("sendmmsg");
			return 1;
		}
	}
	printf("RESULT udp_sent=%lu\n", (unsigned long)sent);
	close(fd);
	return 0;
}

static int full_io(int fd, char *b, size_t len, int wr)
{
	size_t o = 0;
	while (o < len) {
		ssize_t n = wr ? write(fd, b + o, len - o) : read(fd, b + o, len - o);
		if (n <= 0)
			return -1;
		o += (size_t)n;
	}
	return 0;
}

static int tcp_echo(const char *port)
{
	struct sockaddr_in sa;
	int one = 1, ls = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ls < 0 || parse_addr(NULL, port, &sa) || bind(ls, (void *)&sa, sizeof(sa)) ||
	    listen(ls, 1)) {
		perror("tcp-echo");
		return 1;
	}
	printf("READY\n");
	fflush(stdout);
	int fd = accept(ls, NULL, NULL);
	if (fd < 0)
		return 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	char b[DGRAM];
	while (full_io(fd, b, sizeof(b), 0) == 0 && full_io(fd, b, sizeof(b), 1) == 0)
		;
	close(fd);
	close(ls);
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int tcp_ping(const char *ip, const char *port, long n)
{
	struct sockaddr_in sa;
	int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || parse_addr(ip, port, &sa) || connect(fd, (void *)&sa, sizeof(sa))) {
		perror("tcp-ping");
		return 1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	uint64_t *rtt = calloc((size_t)n, sizeof(*rtt));
	char b[DGRAM] = {0};
	for (long i = 0; i < n + WARM; i++) {
		uint64_t t = now_ns();
		if (full_io(fd, b, sizeof(b), 1) || full_io(fd, b, sizeof(b), 0)) {
			perror("tcp-ping io");
			return 1;
		}
		if (i >= WARM)
			rtt[i - WARM] = now_ns() - t;
	}
	qsort(rtt, (size_t)n, sizeof(*rtt), cmp_u64);
	printf("RESULT tcp_pings=%ld rtt_p50_us=%.2f rtt_p99_us=%.2f\n", n,
	       rtt[n / 2] / 1e3, rtt[n * 99 / 100] / 1e3);
	free(rtt);
	close(fd);
	return 0;
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static int copy_rate(long payload, double secs)
{
	const size_t msg = 16u << 20, slots = 1024;
	size_t slot = payload <= 2048 ? 2048 : ((size_t)payload + 1023) / 1024 * 1024;
	uint8_t *src = aligned_alloc(64, 2 * msg), *ring = aligned_alloc(64, slots * slot);
	if (payload < 64 || payload > 65536 || secs <= 0 || !src || !ring) {
		fprintf(stderr, "kbench copy: bad arguments or out of memory\n");
		free(src);
		free(ring);
		return 2;
	}
	memset(src, 1, 2 * msg);
	memset(ring, 2, slots * slot);
	double t0 = now_s(), t = t0;
	uint64_t bytes = 0, s = 0, sum = 0;
	for (unsigned m = 0; t - t0 < secs; m ^= 1, t = now_s()) {
		const uint8_t *p = src + m * msg;
		for (size_t off = 0; off < msg; off += (size_t)payload, s++) {
			size_t n = msg - off < (size_t)payload ? msg - off : (size_t)payload;
			memcpy(ring + (s % slots) * slot, p + off, n);
			bytes += n;
		}
		sum += ring[(s % slots) * slot];
	}
	printf("RESULT copy_payload=%ld copy_Gbps=%.2f check=%llu\n", payload,
	       (double)bytes * 8 / (t - t0) / 1e9, (unsigned long long)sum);
	free(src);
	free(ring);
	return 0;
}

/* ---- cpu-rtt --------------------------------------------------------------- */

#define RTT_ROUNDS 20000
#define RTT_BATCHES 9

static _Alignas(64) atomic_uint rtt_line;

static int pin_cpu(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

/* 0 when this process may run on CPUs 0 and 1 and the calling thread is now
 * pinned to CPU 0 (the second thread then pins itself to CPU 1): two threads
 * spinning on each other's cache lines must each own a CPU. */
static int pin_cpu0_of_two(void)
{
	cpu_set_t allowed;
	if (sched_getaffinity(0, sizeof(allowed), &allowed) || !CPU_ISSET(0, &allowed) ||
	    !CPU_ISSET(1, &allowed))
		return -1;
	return pin_cpu(0);
}

static void *rtt_echo(void *arg)
{
	/* echo even if CPU 1 is refused (the main thread would wait forever) */
	void *rc = pin_cpu(1) ? arg : NULL;
	for (unsigned i = 0; i < RTT_BATCHES * RTT_ROUNDS; i++) {
		while (atomic_load_explicit(&rtt_line, memory_order_acquire) != 2 * i + 1)
			;
		atomic_store_explicit(&rtt_line, 2 * i + 2, memory_order_release);
	}
	return rc;
}

static int cpu_rtt(void)
{
	pthread_t t;
	uint64_t ns[RTT_BATCHES];   /* per batch of RTT_ROUNDS round trips */
	void *rc = NULL;

	/* a spin-wait ping-pong on one CPU would advance once per scheduler tick */
	if (pin_cpu0_of_two() || pthread_create(&t, NULL, rtt_echo, (void *)1)) {
		fprintf(stderr, "kbench cpu-rtt: needs CPUs 0 and 1\n");
		return 1;
	}
	for (unsigned b = 0, i = 0; b < RTT_BATCHES; b++) {
		uint64_t t0 = now_ns();
		for (unsigned k = 0; k < RTT_ROUNDS; k++, i++) {
			atomic_store_explicit(&rtt_line, 2 * i + 1, memory_order_release);
			while (atomic_load_explicit(&rtt_line, memory_order_acquire) != 2 * i + 2)
				;
		}
		ns[b] = now_ns() - t0;
	}
	pthread_join(t, &rc);
	qsort(ns, RTT_BATCHES, sizeof(*ns), cmp_u64);
	printf("RESULT cpu_rtt_ns=%.0f min=%.0f max=%.0f\n",
	       (double)ns[RTT_BATCHES / 2] / RTT_ROUNDS, (double)ns[0] / RTT_ROUNDS,
	       (double)ns[RTT_BATCHES - 1] / RTT_ROUNDS);
	if (rc)
		fprintf(stderr, "kbench cpu-rtt: the echo thread could not be pinned to CPU 1\n");
	return rc ? 1 : 0;
}

/* ---- ring-copy ------------------------------------------------------------ */

#define RC_SLOTS 256
#define RC_BURST 32   /* frames published and taken at a time, as a PMD's bursts */

typedef void (*copy_fn)(void *dst, const void *src, size_t n);

static void copy16(void *dst, const void *src, size_t n)
{
	uint8_t *d = dst;
	const uint8_t *s = src;
	size_t i = 0;
	for (; i + 64 <= n; i += 64) {
		__m128i a = _mm_loadu_si128((const __m128i *)(s + i));
		__m128i b = _mm_loadu_si128((const __m128i *)(s + i + 16));
		__m128i c = _mm_loadu_si128((const __m128i *)(s + i + 32));
		__m128i e = _mm_loadu_si128((const __m128i *)(s + i + 48));
		_mm_storeu_si128((__m128i *)(d + i), a);
		_mm_storeu_si128((__m128i *)(d + i + 16), b);
		_mm_storeu_si128((__m128i *)(d + i + 32), c);
		_mm_storeu_si128((__m128i *)(d + i + 48), e);
	}
	for (; i < n; i++)
		d[i] = s[i];
}

__attribute__((target("avx2"))) static void copy32(void *dst, const void *src, size_t n)
{
	uint8_t *d = dst;
	const uint8_t *s = src;
	size_t i = 0;
	for (; i + 64 <= n; i += 64) {
		__m256i a = _mm256_loadu_si256((const __m256i *)(s + i));
		__m256i b = _mm256_loadu_si256((const __m256i *)(s + i + 32));
		_mm256_storeu_si256((__m256i *)(d + i), a);
		_mm256_storeu_si256((__m256i *)(d + i + 32), b);
	}
	for (; i < n; i++)
		d[i] = s[i];
}

__attribute__((target("avx512f"))) static void copy64(void *dst, const void *src, size_t n)
{
	uint8_t *d = dst;
	const uint8_t *s = src;
	size_t i = 0;
	for (; i + 64 <= n; i += 64)
		_mm512_storeu_si512(d + i, _mm512_loadu_si512(s + i));
	for (; i < n; i++)
		d[i] = s[i];
}

struct ring_copy {
	uint8_t *ring, *src, *dst;
	size_t payload, slot;
	uint64_t frames;
	copy_fn fn;
	_Alignas(64) _Atomic uint64_t head;   /* frames written (CPU 0) */
	_Alignas(64) _Atomic uint64_t tail;   /* frames read (CPU 1) */
	int pinned;
};

static void *ring_copy_out(void *arg)
{
	struct ring_copy *r = arg;
	r->pinned = pin_cpu(1) == 0;
	for (uint64_t i = 0, h = 0; i < r->frames;) {
		while ((h = atomic_load_explicit(&r->head, memory_order_acquire)) <= i)
			_mm_pause();
		for (; i < h; i++)
			r->fn(r->dst, r->ring + (i % RC_SLOTS) * r->slot, r->payload);
		atomic_store_explicit(&r->tail, i, memory_order_release);
	}
	return NULL;
}

/* Bytes per second through the ring with copy function fn on both sides. */
static double ring_copy_run(struct ring_copy *r, copy_fn fn, double secs)
{
	pthread_t t;
	r->fn = fn;
	/* a first pass of ~50 ms sizes the measured one to SECONDS */
	for (int pass = 0; pass < 2; pass++) {
		r->frames = pass ? (uint64_t)(secs / 0.05 * (double)r->frames) : 4096;
		if (r->frames < RC_SLOTS)
			r->frames = RC_SLOTS;
		atomic_store(&r->head, 0);
		atomic_store(&r->tail, 0);
		if (pthread_create(&t, NULL, ring_copy_out, r))
			return -1;
		double t0 = now_s();
		for (uint64_t i = 0; i < r->frames;) {
			uint64_t end = i + RC_BURST < r->frames ? i + RC_BURST : r->frames;
			while (end - atomic_load_explicit(&r->tail, memory_order_acquire) > RC_SLOTS)
				_mm_pause();
			for (; i < end; i++)
				fn(r->ring + (i % RC_SLOTS) * r->slot, r->src, r->payload);
			atomic_store_explicit(&r->head, i, memory_order_release);
		}
		pthread_join(t, NULL);
		double dt = now_s() - t0;
		if (!r->pinned)
			return -1;
		if (pass)
			return (double)r->frames * (double)r->payload / dt;
		r->frames = (uint64_t)((double)r->frames * 0.05 / (dt > 1e-6 ? dt : 1e-6));
	}
	return -1;
}

static void ring_copy_free(struct ring_copy *r)
{
	free(r->ring);
	free(r->src);
	free(r->dst);
	free(r);
}

static int ring_copy(long payload, double secs)
{
	struct ring_copy *r = aligned_alloc(64, sizeof(*r));
	if (payload < 64 || payload > 65536 || secs <= 0 || !r) {
		fprintf(stderr, "kbench ring-copy: bad arguments or out of memory\n");
		free(r);
		return 2;
	}
	memset(r, 0, sizeof(*r));
	r->payload = (size_t)payload;
	r->slot = ((size_t)payload + 1023) / 1024 * 1024;
	r->ring = aligned_alloc(64, RC_SLOTS * r->slot);
	r->src = aligned_alloc(64, r->slot);
	r->dst = aligned_alloc(64, r->slot);
	if (!r->ring || !r->src || !r->dst || pin_cpu0_of_two()) {
		fprintf(stderr, "kbench ring-copy: needs CPUs 0 and 1 and memory\n");
		ring_copy_free(r);
		return 1;
	}
	memset(r->ring, 1, RC_SLOTS * r->slot);
	memset(r->src, 2, r->slot);
	memset(r->dst, 3, r->slot);
	__builtin_cpu_init();
	int w = __builtin_cpu_supports("avx512f") ? 64 : __builtin_cpu_supports("avx2") ? 32 : 0;
	double narrow = ring_copy_run(r, copy16, secs / 2);
	double wide = w ? ring_copy_run(r, w == 64 ? copy64 : copy32, secs / 2) : 0;
	int bad = narrow < 0 || wide < 0 || r->dst[payload - 1] != 2;
	char wide_s[32] = "n/a";   /* no AVX2 or AVX-512: only the narrow run */
	if (w)
		snprintf(wide_s, sizeof(wide_s), "%.2f", wide * 8 / 1e9);
	if (!bad)
		printf("RESULT ring_copy_payload=%ld narrow_Gbps=%.2f wide_Gbps=%s wide_bytes=%d\n",
		       payload, narrow * 8 / 1e9, wide_s, w);
	else
		fprintf(stderr, "kbench ring-copy: a thread could not be pinned, or the copy failed\n");
	ring_copy_free(r);
	return bad;
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "cpu-rtt"))
		return cpu_rtt();
	if (argc == 4 && !strcmp(argv[1], "ring-copy"))
		return ring_copy(atol(argv[2]), atof(argv[3]));
	if (argc == 4 && !strcmp(argv[1], "copy"))
		return copy_rate(atol(argv[2]), atof(argv[3]));
	if (argc == 3 && !strcmp(argv[1], "udp-sink"))
		return udp_sink(argv[2]);
	if (argc == 5 && !strcmp(argv[1], "udp-blast"))
		return udp_blast(argv[2], argv[3], atof(argv[4]));
	if (argc == 3 && !strcmp(argv[1], "tcp-echo"))
		return tcp_echo(argv[2]);
	if (argc == 5 && !strcmp(argv[1], "tcp-ping") && atol(argv[4]) >= 100)
		return tcp_ping(argv[2], argv[3], atol(argv[4]));
	fprintf(stderr, "usage: kbench udp-sink PORT | udp-blast IP PORT SECS | "
			"tcp-echo PORT | tcp-ping IP PORT N(>=100) | copy PAYLOAD SECS | "
			"ring-copy PAYLOAD SECS | cpu-rtt\n");
	return 2;
}
