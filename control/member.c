/* Membership reconciliation: the leader compares the replicated member set
 * (the FSM), the Raft configuration (Chapter 4 of Ongaro's thesis: one server
 * added or removed at a time) and the failure detector's view, and picks the
 * next single step. Removal goes FSM first (new epoch, survivors re-ring at
 * once), then the Raft configuration; joining goes Raft first (add as spare,
 * promote to voter once caught up), then the FSM. Pure: no I/O. */
#include "internal.h"
#include "zbmd/common.h"

#include <string.h>

const char *ctl__action_name(enum ctl_action_type t)
{
	static const char *const names[] = {"none", "join", "leave",
					    "raft-add", "raft-assign", "raft-remove"};
	return (unsigned)t < ZB_ARRAY_LEN(names) ? names[t] : "?";
}

static const struct raft_server *conf_find(const struct raft *r, uint16_t id)
{
	for (unsigned i = 0; i < r->configuration.n; i++)
		if (r->configuration.servers[i].id == (raft_id)id + 1)
			return &r->configuration.servers[i];
	return NULL;
}

static void set(struct ctl_action *a, enum ctl_action_type t, uint16_t id,
		const char *addr, uint8_t reason)
{
	a->type = t;
	a->id = id;
	a->reason = reason;
	snprintf(a->addr, sizeof(a->addr), "%s", addr ? addr : "");
}

void ctl__reconcile(const struct raft *r, const struct ctl_state *st,
		    uint16_t self, const char *self_addr,
		    const struct ctl_liveness *live, struct ctl_action *out)
{
	ZB_ASSERT(r && st && live && out && self_addr);
	ZB_ASSERT(self < CFG_MAX_NODES);
	memset(out, 0, sizeof(*out));
	/* 1. The leader is always a member (covers the bootstrap). */
	if (!ctl_state_has(st, self)) {
		set(out, CTL_ACT_JOIN, self, self_addr, 0);
		return;
	}
	/* 2. Convicted or departing members leave the FSM: new epoch. */
	for (uint32_t i = 0; i < st->n; i++) {
		uint16_t id = st->m[i].id;
		if (id != self && (live->convicted[id] || live->left[id])) {
			set(out, CTL_ACT_LEAVE, id, NULL,
			    live->left[id] ? CTL_LEAVE_GRACEFUL : CTL_LEAVE_CONVICTED);
			return;
		}
	}
	/* 3. Raft servers that are no longer members and not coming back. */
	for (unsigned i = 0; i < r->configuration.n; i++) {
		raft_id rid = r->configuration.servers[i].id;
		if (rid == 0 || rid > CFG_MAX_NODES)
			continue;
		uint16_t id = (uint16_t)(rid - 1);
		if (id != self && !ctl_state_has(st, id) &&
		    (!live->alive[id] || live->left[id])) {
			set(out, CTL_ACT_RAFT_REMOVE, id, NULL, 0);
			return;
		}
	}
	/* 4. Live non-members join: Raft add, promote, then the FSM. */
	for (uint16_t id = 0; id < CFG_MAX_NODES; id++) {
		if (id == self || !live->alive[id] || live->left[id] ||
		    live->convicted[id] || ctl_state_has(st, id) || !live->addr[id][0])
			continue;
		const struct raft_server *s = conf_find(r, id);
		if (!s)
			set(out, CTL_ACT_RAFT_ADD, id, live->addr[id], 0);
		else if (s->role != RAFT_VOTER)
			set(out, CTL_ACT_RAFT_ASSIGN, id, NULL, 0);
		else
			set(out, CTL_ACT_JOIN, id, live->addr[id], 0);
		return;
	}
	/* 5. Members that Raft lost track of (e.g. a half-done removal that
	 * was rolled back): put them back into the configuration. */
	for (uint32_t i = 0; i < st->n; i++) {
		uint16_t id = st->m[i].id;
		const struct raft_server *s = conf_find(r, id);
		if (id == self)
			continue;
		if (!s && live->alive[id]) {
			set(out, CTL_ACT_RAFT_ADD, id, st->m[i].addr, 0);
			return;
		}
		if (s && s->role != RAFT_VOTER && live->alive[id]) {
			set(out, CTL_ACT_RAFT_ASSIGN, id, NULL, 0);
			return;
		}
	}
	ZB_ASSERT(out->type == CTL_ACT_NONE);
}
