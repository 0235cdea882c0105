/* /status and /status.json rendering with hostile addresses (they come from
 * other nodes' heartbeats and the replicated membership): the JSON stays
 * valid and carries the address exactly (escaped), and the text cannot be
 * given extra lines or control characters. */
#include "zbmd/control.h"
#include "zbmd/common.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>

/* ---- a strict little JSON validator (RFC 8259 values) ------------------- */
static const char *js_value(const char *p);

static const char *js_ws(const char *p)
{
	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
		p++;
	return p;
}

/* A string; its decoded ASCII content (\u00XX kept as that byte) to out. */
static const char *js_string(const char *p, char *out, size_t cap)
{
	size_t n = 0;

	if (*p++ != '"')
		return NULL;
	for (;;) {
		unsigned char c = (unsigned char)*p++;
		if (c == '"')
			break;
		if (c < 0x20)
			return NULL;               /* raw control character */
		if (c == '\\') {
			c = (unsigned char)*p++;
			if (c == 'u') {
				char hex[5] = {0};
				for (int i = 0; i < 4; i++) {
					if (!strchr("0123456789abcdefABCDEF", p[i]) || !p[i])
						return NULL;
					hex[i] = p[i];
				}
				c = (unsigned char)strtoul(hex, NULL, 16);
				p += 4;
			} else if (strchr("\"\\/", c)) {
				/* itself */
			} else if (c == 'n') {
				c = '\n';
			} else if (c == 't') {
				c = '\t';
			} else if (!strchr("bfr", c) || !c) {
				return NULL;
			}
		}
		if (out && n + 1 < cap)
			out[n++] = (char)c;
	}
	if (out)
		out[n] = '\0';
	return p;
}

static const char *js_value(const char *p)
{
	p = js_ws(p);
	if (*p == '"')
		return js_string(p, NULL, 0);
	if (*p == '{' || *p == '[') {
		char close = *p == '{' ? '}' : ']';
		bool obj = *p == '{';
		p = js_ws(p + 1);
		if (*p == close)
			return p + 1;
		for (;;) {
			if (obj) {
				if (!(p = js_string(js_ws(p), NULL, 0)))
					return NULL;
				p = js_ws(p);
				if (*p++ != ':')
					return NULL;
			}
			if (!(p = js_value(p)))
				return NULL;
			p = js_ws(p);
			if (*p == close)
				return p + 1;
			if (*p++ != ',')
				return NULL;
		}
	}
	if (!strncmp(p, "true", 4) || !strncmp(p, "null", 4))
		return p + 4;
	if (!strncmp(p, "false", 5))
		return p + 5;
	char *end;
	strtod(p, &end);
	return end == p ? NULL : end;
}

static bool json_valid(const char *s)
{
	const char *p = js_value(s);
	return p && *js_ws(p) == '\0';
}

/* The decoded value of the first "address" string after `after`. */
static bool json_address_after(const char *s, const char *after, char *out, size_t cap)
{
	const char *p = strstr(s, after);
	if (!p || !(p = strstr(p, "\"address\":")))
		return false;
	return js_string(p + 10, out, cap) != NULL;
}

int main(void)
{
	static struct ctl_status s;
	const char *evil = "1.2.3.4:5\"}],\"x\":\"\\\nleader 99\r\x01\x7f\xff";
	char got[128];

	tap_plan(9);
	s.self = 0;
	snprintf(s.addr, sizeof(s.addr), "10.0.0.1:7400");
	s.raft_state = "follower";
	s.st.n = 2;
	s.st.m[0].id = 0;
	snprintf(s.st.m[0].addr, sizeof(s.st.m[0].addr), "10.0.0.1:7400");
	s.st.m[1].id = 1;
	snprintf(s.st.m[1].addr, sizeof(s.st.m[1].addr), "%s", evil);
	s.n_peers = 1;
	s.peers[0].id = 1;
	snprintf(s.peers[0].addr, sizeof(s.peers[0].addr), "%s", evil);

	char *j = ctl_status_json(&s);
	ZB_ASSERT(j != NULL);
	ok(json_valid(j), "/status.json stays valid JSON with a hostile address");
	ok(json_address_after(j, "\"peers\"", got, sizeof(got)) && !strcmp(got, evil),
	   "... the peer's address comes through exactly, escaped");
	const char *m1 = strstr(j, "\"members\"");
	m1 = m1 ? strstr(m1, "{\"id\":1,") : NULL;
	ok(m1 && json_address_after(m1, "{", got, sizeof(got)) && !strcmp(got, evil),
	   "... and the member's");
	ok(!strstr(j, "\"x\":"), "no key injected");
	free(j);

	char *t = ctl_status_text(&s);
	ZB_ASSERT(t != NULL);
	bool ctl = false;
	for (const char *p = t; *p; p++)
		if (((unsigned char)*p < 0x20 && *p != '\n') || (unsigned char)*p >= 0x7f)
			ctl = true;
	ok(!ctl, "/status text: no control or non-ASCII bytes");
	ok(!strstr(t, "\nleader 99"), "/status text: no forged line");
	int leader_lines = 0, peer_lines = 0;
	for (const char *p = t; p; p = strchr(p, '\n'), p = p ? p + 1 : p) {
		leader_lines += !strncmp(p, "leader ", 7);
		peer_lines += !strncmp(p, "peer ", 5);
	}
	is_int(leader_lines, 1, "one leader line");
	is_int(peer_lines, 1, "one peer line");
	ok(strstr(t, "peer 1 addr 1.2.3.4:5\"}],\"x\":\"\\?leader?99????") != NULL,
	   "the peer's address as one word, '?' for what is not printable");
	free(t);
	return tap_done();
}
