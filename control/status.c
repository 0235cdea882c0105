/* Rendering of struct ctl_status: "key value" text (stable, one fact per
 * line, easy to grep) and JSON. Addresses come from other nodes (heartbeat
 * payloads, the replicated membership), so they are escaped in JSON and, in
 * the text, reduced to printable non-blank ASCII: a peer must not be able to
 * break the JSON or forge "key value" lines. */
#include "zbmd/control.h"
#include "zbmd/common.h"

#include <stdio.h>
#include <stdlib.h>

/* One word of the text output: bytes outside '!'..'~' become '?'. */
static void text_word(FILE *f, const char *s)
{
	for (; *s; s++)
		fputc(*s > ' ' && *s < 0x7f ? *s : '?', f);
}

/* A JSON string, quotes included; every byte outside ' '..'~' (control
 * characters, and bytes that might not be UTF-8) as \u00XX. */
void ctl__json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

/* Rejected authentications of every kind: per reason, and Raft handshakes. */
static unsigned long long auth_rejected_total(const struct ctl_status *s)
{
	unsigned long long rej = s->handshake_rejected;
	for (unsigned r = 0; r < CTL_AUTH_NREASONS; r++)
		rej += s->auth_rejected[r];
	return rej;
}

static void ids(FILE *f, const uint16_t *v, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		fprintf(f, "%s%u", i ? " " : "", v[i]);
}

char *ctl_status_text(const struct ctl_status *s)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	uint16_t m[CFG_MAX_NODES];

	ZB_ASSERT(s != NULL);
	if (!f)
		return NULL;
	for (uint32_t i = 0; i < s->st.n; i++)
		m[i] = s->st.m[i].id;
	fprintf(f, "node %u\naddress ", s->self);
	text_word(f, s->addr);
	fprintf(f, "\nstate %s\nleader %d\nterm %llu\n"
		"commit %llu\napplied %llu\nepoch %llu\n",
		s->raft_state ? s->raft_state : "unavailable", s->leader,
		(unsigned long long)s->term, (unsigned long long)s->commit,
		(unsigned long long)s->applied, (unsigned long long)s->st.epoch);
	fprintf(f, "members ");
	ids(f, m, s->st.n);
	fprintf(f, "\nring ");
	ids(f, s->st.ring, s->st.n);
	fprintf(f, "\nplacement ");
	ids(f, s->st.placement, s->st.n ? CTL_SUPERVISORS : 0);
	fprintf(f, "\n");
	for (uint32_t i = 0; i < s->n_peers; i++) {
		const struct ctl_peer_status *p = &s->peers[i];
		fprintf(f, "peer %u addr ", p->id);
		text_word(f, p->addr[0] ? p->addr : "-");
		fprintf(f, " phi %.3f member %s convicted %s heartbeats %llu "
			"last_heard_ms %.0f gone %s\n", p->phi,
			p->member ? "yes" : "no", p->convicted ? "yes" : "no",
			(unsigned long long)p->heartbeats, p->last_heard_ms,
			p->gone ? "yes" : "no");
	}
	fprintf(f, "auth_accepted %llu\nauth_rejected %llu\n",
		(unsigned long long)s->auth_ok, auth_rejected_total(s));
	for (unsigned r = 0; r < CTL_AUTH_NREASONS; r++)
		fprintf(f, "auth_rejected_%s %llu\n", ctl_auth_reason_name(r),
			(unsigned long long)s->auth_rejected[r]);
	fprintf(f, "auth_rejected_raft_transport %llu\nconvictions %llu\nfsm_skipped %llu\n",
		(unsigned long long)s->handshake_rejected,
		(unsigned long long)s->convictions, (unsigned long long)s->st.skipped);
	const struct ctl_blob_stats *b = &s->blobs;
	fprintf(f, "blobs_out queued %llu sent %llu retransmits %llu acked %llu refused %llu "
		"failed %llu queue_full %llu\n", (unsigned long long)b->queued,
		(unsigned long long)b->sent, (unsigned long long)b->retransmits,
		(unsigned long long)b->acked, (unsigned long long)b->refused,
		(unsigned long long)b->failed, (unsigned long long)b->queue_full);
	fprintf(f, "blobs_in delivered %llu duplicates %llu rejected %llu deferred %llu "
		"malformed %llu\n", (unsigned long long)b->delivered,
		(unsigned long long)b->duplicates, (unsigned long long)b->rejected,
		(unsigned long long)b->deferred, (unsigned long long)b->malformed);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

char *ctl_status_json(const struct ctl_status *s)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	ZB_ASSERT(s != NULL);
	if (!f)
		return NULL;
	fprintf(f, "{\"node\":%u,\"address\":", s->self);
	ctl__json_str(f, s->addr);
	fprintf(f, ",\"state\":\"%s\",\"leader\":%d,"
		"\"term\":%llu,\"commit\":%llu,\"applied\":%llu,\"epoch\":%llu,\"members\":[",
		s->raft_state ? s->raft_state : "unavailable", s->leader, (unsigned long long)s->term, (unsigned long long)s->commit,
		(unsigned long long)s->applied, (unsigned long long)s->st.epoch);
	for (uint32_t i = 0; i < s->st.n; i++) {
		fprintf(f, "%s{\"id\":%u,\"address\":", i ? "," : "", s->st.m[i].id);
		ctl__json_str(f, s->st.m[i].addr);
		fprintf(f, "}");
	}
	fprintf(f, "],\"ring\":[");
	for (uint32_t i = 0; i < s->st.n; i++)
		fprintf(f, "%s%u", i ? "," : "", s->st.ring[i]);
	fprintf(f, "],\"placement\":[");
	for (uint32_t i = 0; s->st.n && i < CTL_SUPERVISORS; i++)
		fprintf(f, "%s%u", i ? "," : "", s->st.placement[i]);
	fprintf(f, "],\"peers\":[");
	for (uint32_t i = 0; i < s->n_peers; i++) {
		const struct ctl_peer_status *p = &s->peers[i];
		fprintf(f, "%s{\"id\":%u,\"address\":", i ? "," : "", p->id);
		ctl__json_str(f, p->addr);
		fprintf(f, ",\"phi\":%.3f,\"member\":%s,"
			"\"convicted\":%s,\"heartbeats\":%llu,\"last_heard_ms\":%.0f,"
			"\"gone\":%s}", p->phi, p->member ? "true" : "false",
			p->convicted ? "true" : "false", (unsigned long long)p->heartbeats,
			p->last_heard_ms, p->gone ? "true" : "false");
	}
	/* the same facts as the text form: the rejections' total, the
	 * convictions (the text had them, the JSON did not) */
	fprintf(f, "],\"convictions\":%llu,\"fsm_skipped\":%llu,\"auth\":{\"accepted\":%llu,"
		"\"rejected\":%llu", (unsigned long long)s->convictions,
		(unsigned long long)s->st.skipped, (unsigned long long)s->auth_ok,
		auth_rejected_total(s));
	for (unsigned r = 0; r < CTL_AUTH_NREASONS; r++)
		fprintf(f, ",\"%s\":%llu", ctl_auth_reason_name(r),
			(unsigned long long)s->auth_rejected[r]);
	const struct ctl_blob_stats *b = &s->blobs;
	fprintf(f, ",\"raft_transport\":%llu},\"blobs\":{\"queued\":%llu,\"sent\":%llu,"
		"\"retransmits\":%llu,\"acked\":%llu,\"refused\":%llu,\"failed\":%llu,"
		"\"queue_full\":%llu,\"delivered\":%llu,\"duplicates\":%llu,"
		"\"rejected\":%llu,\"deferred\":%llu,\"malformed\":%llu}}\n",
		(unsigned long long)s->handshake_rejected, (unsigned long long)b->queued,
		(unsigned long long)b->sent, (unsigned long long)b->retransmits,
		(unsigned long long)b->acked, (unsigned long long)b->refused,
		(unsigned long long)b->failed, (unsigned long long)b->queue_full,
		(unsigned long long)b->delivered, (unsigned long long)b->duplicates,
		(unsigned long long)b->rejected, (unsigned long long)b->deferred,
		(unsigned long long)b->malformed);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}
