/* test_misuse.c — collectives called wrongly: ranks that disagree on a
 * collective's arguments, buffers that overlap, a communicator destroyed or
 * reconfigured with collectives in flight. n communicators in one process
 * over the real tcp provider on loopback, as in test_pool_avg.c: created by
 * n threads at once (coll_comm_create blocks until the ring is connected),
 * then progressed by one thread.
 *
 * Every rank must start the same collectives (coll.h); a disagreement must
 * fail them with -ZB_ERR_BAD_FRAME where a rank receives from one that
 * disagrees (the tag carries the arguments), never complete with wrong data
 * and status 0. */
#include "tap.h"
#include "zbmd/coll.h"
#include "zbmd/common.h"
#include "zbmd/config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define TR_NET 82
#define TR_TIMEOUT_MS 2000
#include "tcp_ranks.h"

#define NOT_DONE 1      /* a status slot of an op that did not finish */

/* Progress every rank until each op o[r] finished (limit_ms at most):
 * st[r] = its status, NOT_DONE if it did not finish. */
static void run_ops(int n, struct coll_op **o, int *st, int limit_ms)
{
	int left = n;
	uint64_t end = zb_now_ns() + (uint64_t)limit_ms * 1000000ull;

	for (int r = 0; r < n; r++)
		st[r] = NOT_DONE;
	while (left && zb_now_ns() < end)
		for (int r = 0; r < n; r++) {
			(void)coll_progress(cc[r]);
			if (st[r] != NOT_DONE)
				continue;
			int d = 0, rc = coll_test(o[r], &d);
			if (d) {
				st[r] = rc;
				left--;
			}
		}
}

/* Start a[r] on every rank r and run them: 0 when all started. */
static int start_run(int n, const struct coll_args *a, int *st)
{
	struct coll_op *o[MAXN];

	for (int r = 0; r < n; r++) {
		int rc = coll_start(cc[r], &a[r], &o[r]);
		if (rc < 0) {
			tap_diag("coll_start on rank %d: %s", r, zb_strerror(rc));
			return rc;
		}
	}
	run_ops(n, o, st, 6000);
	return 0;
}

/* Every rank failed, at least one with -ZB_ERR_BAD_FRAME (the others see
 * the failure go round the ring: peer down). */
static bool all_failed_bad_frame(int n, const int *st)
{
	bool bad_frame = false, all = true;

	for (int r = 0; r < n; r++) {
		if (st[r] == 0 || st[r] == NOT_DONE)
			all = false;
		bad_frame = bad_frame || st[r] == ZB_ERR_BAD_FRAME;
	}
	if (!all || !bad_frame)
		for (int r = 0; r < n; r++)
			tap_diag("rank %d: %s", r, st[r] == NOT_DONE ? "not done"
				 : st[r] ? zb_strerror(st[r]) : "ok");
	return all && bad_frame;
}

/* ---- ranks that disagree on the arguments ---------------------------------- */

static float fa[MAXN][4096], fb[MAXN][4096 * MAXN];

/* Two ranks start a[0] and a[1]; they must both fail, one with BAD_FRAME. */
static void mismatch(const char *what, int small_kb, const struct coll_args *a)
{
	int st[2];

	if (make(2, 1, small_kb)) {
		ok(0, "two tcp communicators (%s)", what);
		return;
	}
	for (int r = 0; r < 2; r++)
		for (int i = 0; i < 4096; i++)
			fa[r][i] = (float)(r + 1);
	ok(start_run(2, a, st) == 0 && all_failed_bad_frame(2, st),
	   "%s: both ranks fail, -ZB_ERR_BAD_FRAME", what);
	destroy(2);
}

static void test_mismatch(void)
{
	struct coll_args a[2];

	for (int r = 0; r < 2; r++)
		a[r] = (struct coll_args){.kind = COLL_ALLREDUCE, .sendbuf = fa[r],
					  .recvbuf = fa[r], .count = 4096,
					  .dtype = ZB_F32, .op = r ? ZB_MAX : ZB_SUM};
	mismatch("all-reduce SUM on rank 0, MAX on rank 1", 0, a);
	a[1].op = ZB_SUM;
	a[1].dtype = ZB_I32;
	mismatch("all-reduce f32 on rank 0, i32 on rank 1", 0, a);
	a[1].dtype = ZB_F32;
	a[1].op = ZB_AVG;
	mismatch("all-reduce SUM on rank 0, AVG on rank 1", 0, a);
	a[1].op = ZB_SUM;
	a[1].count = 4095;
	mismatch("all-reduce of 4096 on rank 0, 4095 on rank 1", 0, a);

	/* a small all-reduce runs as an all-gather into the communicator's
	 * buffer; an all-gather of the same bytes must not pass for it */
	for (int r = 0; r < 2; r++)
		a[r] = (struct coll_args){.kind = r ? COLL_ALLGATHER : COLL_ALLREDUCE,
					  .sendbuf = fa[r], .recvbuf = fb[r],
					  .count = 8, .dtype = ZB_F32, .op = ZB_SUM};
	mismatch("small (gathered) all-reduce on rank 0, all-gather on rank 1", 4, a);

	/* broadcast, each rank its own root: both only send and complete; the
	 * message left over fails the next collective (BAD_FRAME, not the
	 * "Message too long" of a short receive) */
	int st[2];
	if (make(2, 1, 4)) {
		ok(0, "two tcp communicators (broadcast roots)");
		return;
	}
	for (int r = 0; r < 2; r++)
		a[r] = (struct coll_args){.kind = COLL_BROADCAST, .sendbuf = fa[r],
					  .recvbuf = fa[r], .count = 1024,
					  .dtype = ZB_F32, .root = (uint32_t)r};
	ok(start_run(2, a, st) == 0, "broadcast with root 0 on rank 0, 1 on rank 1 runs");
	for (int r = 0; r < 2; r++)
		a[r] = (struct coll_args){.kind = COLL_ALLREDUCE, .sendbuf = fa[r],
					  .recvbuf = fa[r], .count = 8,
					  .dtype = ZB_F32, .op = ZB_SUM};
	ok(start_run(2, a, st) == 0 && all_failed_bad_frame(2, st),
	   "... its left-over message fails the next collective: -ZB_ERR_BAD_FRAME");
	destroy(2);

	/* fields a kind does not use may differ */
	if (make(2, 1, 0)) {
		ok(0, "two tcp communicators (unused fields)");
		return;
	}
	for (int r = 0; r < 2; r++) {
		for (int i = 0; i < 1000; i++)
			fa[r][i] = (float)(r * 1000 + i);
		a[r] = (struct coll_args){.kind = COLL_BROADCAST, .sendbuf = fa[r],
					  .recvbuf = fa[r], .count = 1000,
					  .dtype = ZB_F32, .root = 1,
					  .op = r ? ZB_MAX : ZB_SUM};
	}
	bool good = start_run(2, a, st) == 0 && st[0] == 0 && st[1] == 0 &&
		    fa[0][999] == 1999.0f;
	for (int r = 0; r < 2; r++)
		a[r] = (struct coll_args){.kind = COLL_ALLGATHER, .sendbuf = fa[r],
					  .recvbuf = fb[r], .count = 100,
					  .dtype = ZB_F32, .root = (uint32_t)r,
					  .op = r ? ZB_MIN : ZB_PROD};
	good = good && start_run(2, a, st) == 0 && st[0] == 0 && st[1] == 0 &&
	       fb[0][100] == 1000.0f && fb[1][199] == 1099.0f;
	ok(good, "a broadcast's op, an all-gather's op and root may differ");
	destroy(2);
}

/* ---- count 0 ----------------------------------------------------------------- */

static void test_count0(void)
{
	struct coll_args a[MAXN];
	int st[MAXN];

	/* count 0 used to put nothing on the wire: rank 0 finished alone and
	 * rank 1 timed out; now the empty exchange meets rank 1's message */
	for (int r = 0; r < 2; r++)
		a[r] = (struct coll_args){.kind = COLL_ALLREDUCE, .sendbuf = fa[r],
					  .recvbuf = fa[r], .count = r ? 4096 : 0,
					  .dtype = ZB_F32, .op = ZB_SUM};
	mismatch("all-reduce of 0 on rank 0, 4096 on rank 1", 0, a);
	/* a broadcast's root receives nothing (coll.h): the receiver fails */
	if (make(2, 1, 0)) {
		ok(0, "two tcp communicators (broadcast count 0)");
		return;
	}
	for (int r = 0; r < 2; r++)
		a[r] = (struct coll_args){.kind = COLL_BROADCAST, .sendbuf = fa[r],
					  .recvbuf = fa[r], .count = r ? 0 : 100,
					  .dtype = ZB_F32};
	ok(start_run(2, a, st) == 0 && st[1] == ZB_ERR_BAD_FRAME,
	   "broadcast of 100 from rank 0, rank 1 says 0: rank 1 fails, "
	   "-ZB_ERR_BAD_FRAME");
	destroy(2);

	/* every rank count 0 (NULL buffers): done, and the ring still in step */
	if (make(3, 2, 0)) {
		ok(0, "three tcp communicators (count 0)");
		return;
	}
	bool good = true;
	for (int k = 0; k < COLL_KIND_COUNT - 1 && good; k++) {
		for (int r = 0; r < 3; r++)
			a[r] = (struct coll_args){.kind = (enum coll_kind)k,
						  .dtype = ZB_F32, .op = ZB_SUM};
		good = start_run(3, a, st) == 0 && !st[0] && !st[1] && !st[2];
	}
	for (int r = 0; r < 3; r++) {
		for (int i = 0; i < 4096; i++)
			fa[r][i] = (float)(r + 1);
		a[r] = (struct coll_args){.kind = COLL_ALLREDUCE, .sendbuf = fa[r],
					  .recvbuf = fa[r], .count = 4096,
					  .dtype = ZB_F32, .op = ZB_SUM};
	}
	good = good && start_run(3, a, st) == 0 && !st[0] && !st[1] && !st[2] &&
	       fa[2][4095] == 6.0f;
	ok(good, "count 0 of every kind on every rank completes; the next one too");
	destroy(3);
}

/* ---- overlapping buffers ----------------------------------------------------- */

#define OC 3000         /* elements per rank */

/* coll_start(a) on rank r must say -EINVAL, queueing nothing. */
static bool refused(int r, const struct coll_args *a, const char *what)
{
	struct coll_op *o = NULL;
	int rc = coll_start(cc[r], a, &o);

	if (rc != -EINVAL)
		tap_diag("%s on rank %d: %s", what, r, rc ? zb_strerror(rc) : "accepted");
	return rc == -EINVAL;
}

static void test_overlap(void)
{
	static int64_t buf[MAXN][OC * MAXN + 200];
	struct coll_args a[MAXN];
	int st[MAXN];

	if (make(3, 2, 0)) {
		ok(0, "three tcp communicators (overlap)");
		return;
	}
	int64_t *b = buf[1];
	struct coll_args x = {.kind = COLL_ALLREDUCE, .sendbuf = b, .recvbuf = b + 1,
			      .count = OC, .dtype = ZB_I64, .op = ZB_SUM};
	bool good = refused(1, &x, "all-reduce, recvbuf = sendbuf + 1");
	x.recvbuf = b + 100;
	good = refused(1, &x, "all-reduce, recvbuf = sendbuf + 100") && good;
	x.recvbuf = b;
	x.sendbuf = b + 100;
	good = refused(1, &x, "all-reduce, sendbuf = recvbuf + 100") && good;
	ok(good, "all-reduce with buffers that overlap, not in place: -EINVAL");

	x = (struct coll_args){.kind = COLL_REDUCE_SCATTER, .sendbuf = b, .recvbuf = b,
			       .count = OC, .dtype = ZB_I64, .op = ZB_SUM};
	good = refused(1, &x, "reduce-scatter, recvbuf = sendbuf");
	x.recvbuf = b + OC * 2 + 1;
	good = refused(1, &x, "reduce-scatter, recvbuf in sendbuf's block 2") && good;
	ok(good, "reduce-scatter: recvbuf inside sendbuf other than block rank: -EINVAL");

	x = (struct coll_args){.kind = COLL_ALLGATHER, .sendbuf = b, .recvbuf = b,
			       .count = OC, .dtype = ZB_I64};
	good = refused(1, &x, "all-gather, sendbuf = recvbuf");
	x.sendbuf = b + OC + 7;
	good = refused(1, &x, "all-gather, sendbuf = recvbuf + count + 7") && good;
	ok(good, "all-gather: sendbuf inside recvbuf other than block rank: -EINVAL");

	x = (struct coll_args){.kind = COLL_BROADCAST, .sendbuf = b, .recvbuf = b + 1,
			       .count = OC, .dtype = ZB_I64, .root = 1};
	ok(refused(1, &x, "broadcast root, recvbuf = sendbuf + 1"),
	   "broadcast: the root's buffers overlapping, not in place: -EINVAL");

	/* nothing was queued nor failed: the documented in-place layouts run,
	 * a non-root's broadcast sendbuf is not looked at */
	for (int r = 0; r < 3; r++) {
		for (int i = 0; i < OC * 3; i++)
			buf[r][i] = (int64_t)(r + 1) * 1000000 + i;
		a[r] = (struct coll_args){.kind = COLL_REDUCE_SCATTER, .sendbuf = buf[r],
					  .recvbuf = buf[r] + (size_t)r * OC, .count = OC,
					  .dtype = ZB_I64, .op = ZB_SUM};
	}
	good = start_run(3, a, st) == 0 && !st[0] && !st[1] && !st[2];
	for (int r = 0; r < 3 && good; r++)
		for (int i = 0; i < OC; i++)
			good = good && buf[r][r * OC + i] == 6000000 + 3 * (r * OC + i);
	ok(good, "reduce-scatter in place (recvbuf = sendbuf + rank*count) is right");
	for (int r = 0; r < 3; r++) {
		for (int i = 0; i < OC; i++)
			buf[r][r * OC + i] = r * 10 + i;
		a[r] = (struct coll_args){.kind = COLL_ALLGATHER,
					  .sendbuf = buf[r] + (size_t)r * OC,
					  .recvbuf = buf[r], .count = OC, .dtype = ZB_I64};
	}
	good = start_run(3, a, st) == 0 && !st[0] && !st[1] && !st[2];
	for (int r = 0; r < 3 && good; r++)
		for (int i = 0; i < OC * 3; i++)
			good = good && buf[r][i] == (i / OC) * 10 + i % OC;
	ok(good, "all-gather in place (sendbuf = recvbuf + rank*count) is right");
	for (int i = 0; i < OC; i++)
		buf[0][i] = 77 + i;
	for (int r = 0; r < 3; r++)
		a[r] = (struct coll_args){.kind = COLL_BROADCAST,
					  .sendbuf = r == 2 ? buf[r] + 1 : buf[r],
					  .recvbuf = buf[r], .count = OC,
					  .dtype = ZB_I64, .root = 0};
	good = start_run(3, a, st) == 0 && !st[0] && !st[1] && !st[2];
	for (int i = 0; i < OC * 3 && good; i++)
		good = buf[2][i] == (i < OC ? 77 + i : (i / OC) * 10 + i % OC);
	ok(good, "broadcast: a non-root's sendbuf may overlap its recvbuf");
	destroy(3);
}

/* ---- a communicator changed with collectives in flight ----------------------- */

static int cb_calls, cb_status[2 * 3];

static void on_done(void *arg, int status)
{
	(void)arg;
	if (cb_calls < 2 * 3)
		cb_status[cb_calls] = status;
	cb_calls++;
}

static void test_in_flight(void)
{
	struct coll_args a[MAXN];
	struct coll_op *o[MAXN];
	int st[MAXN];

	if (make(2, 1, 0)) {
		ok(0, "two tcp communicators (in flight)");
		return;
	}
	/* coll_set_timeout with one queued: -EBUSY (was an assertion: the
	 * process aborted), in a child so that the old abort is a failure */
	for (int r = 0; r < 2; r++) {
		a[r] = (struct coll_args){.kind = COLL_ALLREDUCE, .sendbuf = fa[r],
					  .recvbuf = fa[r], .count = 4096,
					  .dtype = ZB_F32, .op = ZB_SUM};
		if (coll_start(cc[r], &a[r], &o[r]) < 0)
			o[r] = NULL;
	}
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0)
		_exit(coll_set_timeout(cc[0], 100) == -EBUSY ? 0 : 1);
	int ws = -1;
	waitpid(pid, &ws, 0);
	ok(o[0] && o[1] && WIFEXITED(ws) && WEXITSTATUS(ws) == 0,
	   "coll_set_timeout with a collective queued: -EBUSY");
	run_ops(2, o, st, 6000);
	ok(!st[0] && !st[1] && coll_set_timeout(cc[0], 3000) == 0,
	   "... which completes; between collectives it applies");

	/* destroyed with collectives in flight: every callback runs, once,
	 * with -ECANCELED (they were dropped, and their handles dangled) */
	bool started = true;
	for (int k = 0; k < 3; k++)
		for (int r = 0; r < 2; r++) {
			struct coll_args x = a[r];
			x.done = on_done;
			started = started && coll_start(cc[r], &x, NULL) == 0;
		}
	(void)coll_progress(cc[0]);
	destroy(2);
	bool all = cb_calls == 2 * 3;
	for (int i = 0; i < 2 * 3 && all; i++)
		all = cb_status[i] == -ECANCELED;
	if (!all)
		tap_diag("%d callbacks, first status %d", cb_calls, cb_status[0]);
	ok(started && all, "coll_comm_destroy completes queued collectives: "
	   "callbacks with -ECANCELED");
}

/* ---- lanes: a failed channel behind a running one -------------------------- */

static void test_lane_failure(void)
{
	struct coll_args a[2];

	tr_threaded0 = true;
	int rc = make(2, 2, 0);
	tr_threaded0 = false;
	if (rc) {
		ok(0, "two tcp communicators, rank 0 with lanes");
		return;
	}
	/* 256 KiB: both channels carry a part; rank 1 disagrees on the op */
	static float big[2][65536];
	for (int r = 0; r < 2; r++) {
		a[r] = (struct coll_args){.kind = COLL_ALLREDUCE, .sendbuf = big[r],
					  .recvbuf = big[r], .count = 65536,
					  .dtype = ZB_F32, .op = r ? ZB_MAX : ZB_SUM,
					  .done = on_done};
		rc = rc ? rc : coll_start(cc[r], &a[r], NULL);
	}
	/* rank 0's lane 0 never runs (a busy lcore): its channel stays
	 * unfinished while lane 1 fails on the other op's message */
	int lane1 = 0, owner = 0;
	cb_calls = 0;
	for (uint64_t end = zb_now_ns() + 3000000000ull;
	     !rc && owner >= 0 && zb_now_ns() < end;) {
		owner = coll_progress(cc[0]);
		if (lane1 >= 0)
			lane1 = coll_progress_channel(cc[0], 1);
		(void)coll_progress(cc[1]);
	}
	if (owner >= 0)
		tap_diag("owner: %d, lane 1: %s", owner, zb_strerror(lane1));
	ok(!rc && lane1 < 0 && owner < 0,
	   "lanes: the owner fails when a channel behind a running one failed");
	for (uint16_t ch = 0; ch < 2; ch++)     /* the lanes let go */
		(void)coll_progress_channel(cc[0], ch);
	destroy(2);
}

int main(void)
{
	tap_plan(22);
	tr_port = 20000 + (int)(getpid() % 20000);
	tr_sub = (int)(getpid() % 250);
	test_mismatch();
	test_count0();
	test_overlap();
	test_in_flight();
	test_lane_failure();
	return tap_done();
}
