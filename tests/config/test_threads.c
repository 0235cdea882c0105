/* tests/config/test_threads.c — loads from several threads at once give each
 * thread its own correct result (inih's global options are set under a
 * lock). In `make tsan` too. */
#include "tap.h"
#include "zbmd/common.h"
#include "zbmd/config.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define THREADS 4
#define ROUNDS 200

struct job {
	int id;
	int wrong;
};

static void *worker(void *arg)
{
	struct job *j = arg;
	static __thread struct zb_config cfg;
	static __thread struct cfg_error err;
	char text[256];

	for (int r = 0; r < ROUNDS; r++) {
		bool good = (r + j->id) % 2 == 0;
		int rc;

		snprintf(text, sizeof(text),
			 "[node]\nid = %d\n[cluster]\nid = %d\n[eal]\n"
			 "memory_mb = %s ; comment\n",
			 j->id, 1000 + r, good ? "512" : "lots");
		rc = cfg_load_string(&cfg, text, "t.ini", &err);
		if (good ? (rc != 0 || cfg.node.id != j->id ||
			    cfg.cluster.id != (uint32_t)(1000 + r) ||
			    cfg.eal.memory_mb != 512)
			 : (rc != ZB_ERR_CONFIG || err.count != 1 ||
			    strncmp(err.msg, "t.ini:6: eal.memory_mb: 'lots'",
				    30) != 0))
			j->wrong++;
	}
	return NULL;
}

int main(void)
{
	pthread_t t[THREADS];
	struct job jobs[THREADS];
	int started = 0, wrong = 0;

	tap_plan(2);
	for (int i = 0; i < THREADS; i++) {
		jobs[i] = (struct job){i, 0};
		if (pthread_create(&t[i], NULL, worker, &jobs[i]) == 0)
			started++;
	}
	is_int(started, THREADS, "%d threads started", THREADS);
	for (int i = 0; i < started; i++) {
		pthread_join(t[i], NULL);
		wrong += jobs[i].wrong;
	}
	is_int(wrong, 0, "%d concurrent loads each got their own result",
	       THREADS * ROUNDS);
	return tap_done();
}
