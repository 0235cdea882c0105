/* The replicated membership state machine: members + addresses, epoch, ring
 * order, supervisor placement. Applied by libraft on every node in log order,
 * so every node computes the same epoch, ring and placement (Raft's State
 * Machine Safety, Figure 3.2). Commands and snapshots are a small versioned
 * little-endian encoding; anything malformed is refused with RAFT_MALFORMED.
 */
#include "zbmd/control.h"
#include "zbmd/common.h"

#include <raft.h>
#include <string.h>

#define CMD_VERSION  1
#define SNAP_MAGIC   0x5a42534eu  /* "NSBZ" */
#define SNAP_VERSION 1

struct fsm_ctx {
	struct ctl_state *st;
	ctl_fsm_change_fn on_change;
	void *arg;
};

bool ctl_state_has(const struct ctl_state *st, uint16_t id)
{
	for (uint32_t i = 0; i < st->n; i++)
		if (st->m[i].id == id)
			return true;
	return false;
}

/* Ring order = members by ascending id: every node derives the same ring from
 * the same member set. Supervisor slot i runs on ring[i % n]. */
static void derive(struct ctl_state *st)
{
	for (uint32_t i = 0; i < st->n; i++)
		st->ring[i] = st->m[i].id;
	for (uint32_t i = st->n; i < CFG_MAX_NODES; i++)
		st->ring[i] = 0;
	for (unsigned s = 0; s < CTL_SUPERVISORS; s++)
		st->placement[s] = st->n ? st->ring[s % st->n] : UINT16_MAX;
}

int ctl_fsm_encode(struct raft_buffer *buf, enum ctl_cmd_type type,
		   uint16_t id, const char *addr, uint8_t reason)
{
	size_t alen = addr ? strlen(addr) : 0;

	ZB_ASSERT(buf != NULL);
	ZB_ASSERT(type == CTL_CMD_JOIN || type == CTL_CMD_LEAVE);
	if (id >= CFG_MAX_NODES || alen >= CTL_ADDR_MAX)
		return -EINVAL;
	/* Padded to 8 bytes: libraft 0.15 misplaces the entries that follow an
	 * entry of unaligned length inside a received batch. */
	buf->len = (8 + alen + 7) & ~(size_t)7;
	buf->base = raft_calloc(1, buf->len);
	if (!buf->base)
		return -ENOMEM;
	uint8_t *p = buf->base;
	p[0] = CMD_VERSION;
	p[1] = (uint8_t)type;
	p[2] = id & 0xff;
	p[3] = id >> 8;
	p[4] = reason;
	p[5] = 0;
	p[6] = alen & 0xff;
	p[7] = alen >> 8;
	memcpy(p + 8, addr ? addr : "", alen);
	return 0;
}

/* Returns 1 when the state changed, 0 when the command was a no-op, or
 * -EINVAL when it is malformed (state unaltered). */
int ctl_state_apply(struct ctl_state *st, const void *cmd, size_t len)
{
	const uint8_t *p = cmd;

	ZB_ASSERT(st != NULL);
	if (!p || len < 8 || p[0] != CMD_VERSION)
		return -EINVAL;
	uint16_t id = p[2] | (uint16_t)p[3] << 8;
	size_t alen = p[6] | (size_t)p[7] << 8;
	if (id >= CFG_MAX_NODES || alen >= CTL_ADDR_MAX ||
	    len != ((8 + alen + 7) & ~(size_t)7))
		return -EINVAL;
	uint32_t i = 0;
	while (i < st->n && st->m[i].id < id)
		i++;
	bool present = i < st->n && st->m[i].id == id;
	st->changes++;
	switch (p[1]) {
	case CTL_CMD_JOIN:
		if (present && strlen(st->m[i].addr) == alen &&
		    memcmp(st->m[i].addr, p + 8, alen) == 0)
			return 0;
		if (!present) {
			ZB_ASSERT(st->n < CFG_MAX_NODES);
			memmove(&st->m[i + 1], &st->m[i], (st->n - i) * sizeof(st->m[0]));
			st->n++;
		}
		st->m[i].id = id;
		memcpy(st->m[i].addr, p + 8, alen);
		st->m[i].addr[alen] = '\0';
		break;
	case CTL_CMD_LEAVE:
		if (!present)
			return 0;
		memmove(&st->m[i], &st->m[i + 1], (st->n - i - 1) * sizeof(st->m[0]));
		st->n--;
		memset(&st->m[st->n], 0, sizeof(st->m[0]));
		break;
	default:
		st->changes--;
		return -EINVAL;
	}
	st->epoch++;
	derive(st);
	return 1;
}

size_t ctl_state_encode(const struct ctl_state *st, uint8_t *out, size_t cap)
{
	size_t need = 4 + 4 + 8 + 8 + 4 + (size_t)st->n * (2 + CTL_ADDR_MAX);

	if (!out || cap < need)
		return need;
	uint8_t *p = out;
	memcpy(p, &(uint32_t){SNAP_MAGIC}, 4);
	memcpy(p + 4, &(uint32_t){SNAP_VERSION}, 4);
	memcpy(p + 8, &st->epoch, 8);
	memcpy(p + 16, &st->changes, 8);
	memcpy(p + 24, &st->n, 4);
	p += 28;
	for (uint32_t i = 0; i < st->n; i++) {
		memcpy(p, &st->m[i].id, 2);
		memcpy(p + 2, st->m[i].addr, CTL_ADDR_MAX);
		p += 2 + CTL_ADDR_MAX;
	}
	ZB_ASSERT((size_t)(p - out) == need);
	return need;
}

int ctl_state_decode(struct ctl_state *st, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint32_t magic, version, n;
	struct ctl_state tmp;

	if (!p || len < 28)
		return -EINVAL;
	memcpy(&magic, p, 4);
	memcpy(&version, p + 4, 4);
	memcpy(&n, p + 24, 4);
	if (magic != SNAP_MAGIC || version != SNAP_VERSION || n > CFG_MAX_NODES ||
	    len != 28 + (size_t)n * (2 + CTL_ADDR_MAX))
		return -EINVAL;
	memset(&tmp, 0, sizeof(tmp));
	memcpy(&tmp.epoch, p + 8, 8);
	memcpy(&tmp.changes, p + 16, 8);
	tmp.n = n;
	p += 28;
	for (uint32_t i = 0; i < n; i++, p += 2 + CTL_ADDR_MAX) {
		memcpy(&tmp.m[i].id, p, 2);
		memcpy(tmp.m[i].addr, p + 2, CTL_ADDR_MAX);
		if (tmp.m[i].id >= CFG_MAX_NODES ||
		    memchr(tmp.m[i].addr, '\0', CTL_ADDR_MAX) == NULL ||
		    (i && tmp.m[i].id <= tmp.m[i - 1].id))
			return -EINVAL;
	}
	derive(&tmp);
	tmp.skipped = st->skipped;   /* this process's count, not the snapshot's */
	*st = tmp;
	return 0;
}

static int fsm_apply(struct raft_fsm *fsm, const struct raft_buffer *buf,
		     void **result)
{
	struct fsm_ctx *c = fsm->data;

	ZB_ASSERT(c != NULL && buf != NULL);
	*result = NULL;
	int rc = ctl_state_apply(c->st, buf->base, buf->len);
	/* A committed command this node cannot decode (a newer version's, an
	 * encoder's bug) is a no-op, counted: every replica applies the same
	 * entry, so refusing it (RAFT_MALFORMED) stopped every node's FSM at
	 * that index and left the cluster without a leader for good. */
	if (rc < 0) {
		c->st->skipped++;
		return 0;
	}
	if (rc > 0 && c->on_change)
		c->on_change(c->arg, c->st);
	return 0;
}

static int fsm_snapshot(struct raft_fsm *fsm, struct raft_buffer *bufs[],
			unsigned *n_bufs)
{
	struct fsm_ctx *c = fsm->data;
	size_t need = ctl_state_encode(c->st, NULL, 0);

	ZB_ASSERT(c != NULL && bufs != NULL);
	*bufs = raft_malloc(sizeof(**bufs));
	if (!*bufs)
		return RAFT_NOMEM;
	(*bufs)[0].base = raft_malloc(need);
	if (!(*bufs)[0].base) {
		raft_free(*bufs);
		*bufs = NULL;
		return RAFT_NOMEM;
	}
	(*bufs)[0].len = ctl_state_encode(c->st, (*bufs)[0].base, need);
	*n_bufs = 1;
	return 0;
}

/* On success the FSM owns buf->base (libraft's contract) and frees it. */
static int fsm_restore(struct raft_fsm *fsm, struct raft_buffer *buf)
{
	struct fsm_ctx *c = fsm->data;

	ZB_ASSERT(c != NULL && buf != NULL);
	if (ctl_state_decode(c->st, buf->base, buf->len) != 0)
		return RAFT_MALFORMED;
	raft_free(buf->base);
	if (c->on_change)
		c->on_change(c->arg, c->st);
	return 0;
}

void ctl_fsm_init(struct raft_fsm *fsm, struct ctl_state *st,
		  ctl_fsm_change_fn on_change, void *arg)
{
	struct fsm_ctx *c = calloc(1, sizeof(*c));

	ZB_ASSERT(fsm != NULL && st != NULL);
	ZB_ASSERT(c != NULL);
	memset(st, 0, sizeof(*st));
	derive(st);
	c->st = st;
	c->on_change = on_change;
	c->arg = arg;
	memset(fsm, 0, sizeof(*fsm));
	fsm->version = 1;
	fsm->data = c;
	fsm->apply = fsm_apply;
	fsm->snapshot = fsm_snapshot;
	fsm->restore = fsm_restore;
}

void ctl_fsm_close(struct raft_fsm *fsm)
{
	if (fsm) {
		free(fsm->data);
		fsm->data = NULL;
	}
}
