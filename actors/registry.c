/* actors/registry.c — the name registry: a fixed open-addressing table
 * (linear probing, tombstones) under a mutex. A control-path service: look a
 * name up once and keep the id. */
#include "internal.h"

static uint32_t name_hash(const char *s)
{
	uint32_t h = 2166136261u; /* FNV-1a */
	while (*s)
		h = (h ^ (uint8_t)*s++) * 16777619u;
	return h;
}

/* Slot holding `name`, or -1. Caller holds the lock. */
static int find(struct act_runtime *rt, const char *name)
{
	uint32_t n = rt->p.max_names, h = name_hash(name) % n;
	for (uint32_t i = 0; i < n; i++) {
		struct act_name *e = &rt->names[(h + i) % n];
		if (!e->name[0] && e->id == ACT_ID_NONE)
			return -1; /* never used: end of probe chain */
		if (e->name[0] && strcmp(e->name, name) == 0)
			return (int)((h + i) % n);
	}
	return -1;
}

/* The entry is made under the lock with the actor's `named` flag set first
 * and its liveness checked after, both seq_cst, against act__terminate's
 * seq_cst CLOSED CAS and later `named` load (a Dekker pair): either we see
 * the actor closed and insert nothing, or its exit sees `named` and its
 * act__unregister_id, which takes this lock, removes our entry. Checking
 * liveness before the lock, or setting `named` after the insert, let a name
 * outlive its actor. */
int act_register(struct act_runtime *rt, const char *name, act_id id)
{
	ZB_ASSERT(rt != NULL);
	if (!name || !name[0] || strlen(name) > ACT_NAME_MAX)
		return -EINVAL;
	struct act_actor *a = act__slot(rt, id);
	if (!a || act_id_node(id) != rt->p.node)
		return ZB_ERR_STALE_ID;
	int rc = -ENOSPC;
	pthread_mutex_lock(&rt->names_lock);
	if (find(rt, name) >= 0) {
		rc = -EEXIST;
		goto out;
	}
	uint32_t n = rt->p.max_names, h = name_hash(name) % n;
	/* One name per actor (Erlang's register/2: badarg). A scan: a control
	 * path, as act__unregister_id's. */
	for (uint32_t i = 0; i < n; i++)
		if (rt->names[i].name[0] && rt->names[i].id == id) {
			rc = -EALREADY;
			goto out;
		}
	for (uint32_t i = 0; i < n; i++) {
		struct act_name *e = &rt->names[(h + i) % n];
		if (e->name[0])
			continue;
		/* A stale id leaves `named` set on the slot's next actor: that
		 * costs it one needless scan at exit, nothing else. */
		atomic_store_explicit(&a->named, 1, SEQ);
		uint64_t w = atomic_load_explicit(&a->word, SEQ);
		if (w_gen(w) != act_id_gen(id) || (w & W_CLOSED)) {
			rc = ZB_ERR_STALE_ID;
			break;
		}
		strcpy(e->name, name);
		e->id = id;
		rc = 0;
		break;
	}
out:
	pthread_mutex_unlock(&rt->names_lock);
	return rc;
}

int act_unregister(struct act_runtime *rt, const char *name)
{
	ZB_ASSERT(rt != NULL);
	if (!name)
		return -EINVAL;
	pthread_mutex_lock(&rt->names_lock);
	int i = find(rt, name);
	if (i >= 0) {
		rt->names[i].name[0] = 0; /* tombstone: id stays non-zero */
		rt->names[i].id = 1;
	}
	pthread_mutex_unlock(&rt->names_lock);
	return i >= 0 ? 0 : -ENOENT;
}

act_id act_whereis(struct act_runtime *rt, const char *name)
{
	ZB_ASSERT(rt != NULL);
	act_id id = ACT_ID_NONE;
	if (!name)
		return id;
	pthread_mutex_lock(&rt->names_lock);
	int i = find(rt, name);
	if (i >= 0)
		id = rt->names[i].id;
	pthread_mutex_unlock(&rt->names_lock);
	return id;
}

void act__unregister_id(struct act_runtime *rt, act_id id)
{
	pthread_mutex_lock(&rt->names_lock);
	for (uint32_t i = 0; i < rt->p.max_names; i++)
		if (rt->names[i].name[0] && rt->names[i].id == id) {
			rt->names[i].name[0] = 0;
			rt->names[i].id = 1;
		}
	pthread_mutex_unlock(&rt->names_lock);
}
