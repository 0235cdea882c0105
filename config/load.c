/* config/load.c — drive inih over a file or string, store every key through
 * the schema table, and validate what spans keys and sections.
 *
 * Line numbers: Debian's inih calls the handler without a line number, so we
 * feed inih through our own reader (ini_parse_stream) and count lines there.
 * inih calls the handler for a line before it asks the reader for the next
 * one, so inside the handler ctx->line is the line being handled. The reader
 * also sees every line once, which lets us report section headers (their
 * line, duplicates, unknown names) and lines inih rejected (a line that is
 * neither blank, comment nor section header and produced no handler call),
 * so that every error is reported, not only the first.
 *
 * inih's options are process globals (Debian builds them as variables); we
 * set them on every load: no multi-line continuation (an indented line is a
 * line of its own, never a continuation of the previous value), no inline
 * comments: the reader cuts those (';' or '#' preceded by whitespace, but
 * not inside a value in double quotes). A mutex serialises
 * loads, so threads may load configs concurrently (tests do).
 */
#include "internal.h"

#include "zbmd/coll.h"
#include "zbmd/common.h"
#include "zbmd/net.h"
#include "zbmd/wire.h"

#include <ini.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_INSTANCES CFG_MAX_NODES /* the largest indexed section */
#define LIST_RESERVE 160            /* room kept for the "left out" line */

/* Guards inih's global options for the length of one parse. */
static pthread_mutex_t ini_lock = PTHREAD_MUTEX_INITIALIZER;

enum line_kind { L_NONE, L_BLANK, L_SECTION, L_OTHER };

struct ctx {
	struct zb_config *cfg;
	struct cfg_error *err;
	const char *name;       /* file name for messages */
	FILE *in;
	char *buf;              /* one line as read: LINE_BUF bytes */
	uint64_t bytes;         /* read so far */
	int read_errno;         /* a read error, or 0 */
	bool too_big;           /* the input passed CFG__INPUT_MAX */

	unsigned line;          /* line last handed to inih */
	enum line_kind kind;    /* its kind */
	enum line_kind prev;    /* kind of the last line before it with content */
	unsigned handled;       /* last line the handler ran for */
	bool reported;          /* ctx->line already has an error */
	bool indented;          /* ctx->line starts with whitespace */

	/* The section the lines being read belong to. */
	int sec;                /* index, or -1 when unknown or bad */
	unsigned idx;           /* instance of an indexed section */
	bool in_section;        /* a header has been seen */

	unsigned sec_line[S_COUNT][MAX_INSTANCES];
	bool dev_bad[CFG_MAX_PORTS]; /* a port's pci or vdev was rejected */
	unsigned (*key_line)[MAX_INSTANCES]; /* [cfg__nkeys] */
	unsigned shown;         /* diagnostics written to err->list */
	size_t list_len;
};

/* Bytes of a UTF-8 sequence starting at p (1 - 4), 0 when it is not one
 * (RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF). */
static unsigned utf8_len(const unsigned char *p)
{
	unsigned n;
	unsigned char lo = 0x80, hi = 0xbf;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		n = 2;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		n = 3;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		n = 4;
	else
		return 0;
	if (p[0] == 0xe0)
		lo = 0xa0;
	else if (p[0] == 0xed)
		hi = 0x9f;
	else if (p[0] == 0xf0)
		lo = 0x90;
	else if (p[0] == 0xf4)
		hi = 0x8f;
	if (p[1] < lo || p[1] > hi)
		return 0;
	for (unsigned i = 2; i < n; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return n;
}

/* A diagnostic quotes the file's own bytes (a key, a section name): control
 * characters and bytes that are not UTF-8 are written as \xNN, so that a
 * binary file given by mistake gives a readable message, not terminal
 * garbage. Truncated to fit `cap`. */
static void printable_copy(char *out, size_t cap, const char *in)
{
	const unsigned char *p = (const unsigned char *)in;
	size_t o = 0;

	ZB_ASSERT(cap > 0);
	while (*p) {
		unsigned n = (*p < 0x20 || *p == 0x7f) ? 0 : utf8_len(p);
		if (n == 0) {
			if (o + 4 >= cap)
				break;
			snprintf(out + o, cap - o, "\\x%02x", *p);
			o += 4;
			p++;
			continue;
		}
		if (o + n >= cap)
			break;
		memcpy(out + o, p, n);
		o += n;
		p += n;
	}
	out[o] = '\0';
}

static void add_error(struct ctx *c, unsigned line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void add_error(struct ctx *c, unsigned line, const char *fmt, ...)
{
	char raw[sizeof(c->err->msg)], text[sizeof(c->err->msg)];
	size_t o;
	va_list ap;

	ZB_ASSERT(c != NULL && fmt != NULL);
	o = (size_t)snprintf(raw, sizeof(raw), "%s:%u: ", c->name, line);
	if (o < sizeof(raw)) {
		va_start(ap, fmt);
		vsnprintf(raw + o, sizeof(raw) - o, fmt, ap);
		va_end(ap);
	}
	printable_copy(text, sizeof(text), raw);
	if (c->err->count++ == 0)
		snprintf(c->err->msg, sizeof(c->err->msg), "%s", text);
	o = strlen(text);
	if (c->list_len + o + 2 + LIST_RESERVE <= sizeof(c->err->list)) {
		memcpy(c->err->list + c->list_len, text, o);
		c->list_len += o;
		c->err->list[c->list_len++] = '\n';
		c->err->list[c->list_len] = '\0';
		c->shown++;
	}
	if (line == c->line)
		c->reported = true;
}

/* Edit distance (Levenshtein) of two short names; longer ones compare as
 * far apart. */
static unsigned distance(const char *a, size_t na, const char *b)
{
	unsigned row[64], nb = (unsigned)strlen(b);

	if (na >= 63 || nb >= 63)
		return 99;
	for (unsigned j = 0; j <= nb; j++)
		row[j] = j;
	for (size_t i = 1; i <= na; i++) {
		unsigned diag = row[0], tmp;

		row[0] = (unsigned)i;
		for (unsigned j = 1; j <= nb; j++) {
			unsigned best = diag + (tolower((unsigned char)a[i - 1]) !=
						tolower((unsigned char)b[j - 1]));

			if (row[j] + 1 < best)
				best = row[j] + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			tmp = row[j];
			row[j] = best;
			diag = tmp;
		}
	}
	return row[nb];
}

/* "did you mean X? " when the closest candidate is at most a third of the
 * name's length away (one edit for short names); else "". fmt puts the
 * candidate in quotes or brackets. */
static void suggest(size_t len, const char *fmt, const char *best,
		    unsigned dist, char *out, size_t outlen)
{
	unsigned limit = len < 6 ? 1 : (unsigned)len / 3;
	char cand[80];

	out[0] = '\0';
	if (best == NULL || dist > limit) /* 0: differs only in case */
		return;
	snprintf(cand, sizeof(cand), fmt, best);
	snprintf(out, outlen, "did you mean %s? ", cand);
}

static const char *sec_name(int sec, unsigned idx, char *buf, size_t len)
{
	ZB_ASSERT(sec >= 0 && (unsigned)sec < cfg__nsections);
	if (cfg__sections[sec].indexed)
		snprintf(buf, len, "%s.%u", cfg__sections[sec].name, idx);
	else
		snprintf(buf, len, "%s", cfg__sections[sec].name);
	return buf;
}

static void section_list(char *out, size_t len)
{
	size_t o = 0;

	out[0] = '\0';
	for (unsigned i = 0; i < cfg__nsections && o < len; i++)
		o += (size_t)snprintf(out + o, len - o, "%s[%s%s]",
				      i ? ", " : "", cfg__sections[i].name,
				      cfg__sections[i].indexed ? ".N" : "");
}

/* "[text]" names no section; base: length of its name before any ".N";
 * suggest: look for a near miss (not for [eal.0]-like names). */
static void unknown_section(struct ctx *c, const char *text, size_t len,
			    size_t base, bool suggest_one)
{
	const char *best = NULL;
	unsigned bd = 99;
	char hint[96], all[512], eb[CFG__ELIDE_BUF];

	ZB_ASSERT(c != NULL && text != NULL);
	ZB_ASSERT(base <= len);
	for (unsigned i = 0; i < cfg__nsections && suggest_one; i++) {
		unsigned d = distance(text, base, cfg__sections[i].name);

		if (d < bd) {
			bd = d;
			best = cfg__sections[i].name;
		}
	}
	suggest(base, "[%s]", best, bd, hint, sizeof(hint));
	section_list(all, sizeof(all));
	add_error(c, c->line, "unknown section [%s] (%sexpected one of %s)",
		  cfg__elide(text, len, eb), hint, all);
}

/* A section header "[text]" (text without the brackets) on ctx->line. */
static void begin_section(struct ctx *c, const char *text, size_t len)
{
	const char *dot = memchr(text, '.', len);
	size_t base = dot ? (size_t)(dot - text) : len;
	int sec = cfg__section_find(text, base);
	char nm[80];
	const struct cfg__section *s;
	unsigned long idx = 0;

	c->in_section = true;
	c->sec = -1;
	c->idx = 0;
	if (sec < 0 || (dot != NULL && !cfg__sections[sec].indexed)) {
		unknown_section(c, text, len, base, sec < 0);
		return;
	}
	s = &cfg__sections[sec];
	if (s->indexed) {
		const char *p = dot ? dot + 1 : "";
		size_t plen = dot ? len - base - 1 : 0;
		bool digits = plen > 0 && plen <= 4 &&
			      (plen == 1 || p[0] != '0');

		for (size_t i = 0; i < plen && digits; i++)
			digits = isdigit((unsigned char)p[i]);
		if (digits)
			idx = strtoul(p, NULL, 10);
		if (!digits || idx >= s->count) {
			char eb[CFG__ELIDE_BUF];

			add_error(c, c->line, "bad section [%s] (expected "
				  "[%s.0] .. [%s.%u])", cfg__elide(text, len, eb),
				  s->name, s->name, s->count - 1);
			return;
		}
	}
	ZB_ASSERT(idx < MAX_INSTANCES);
	if (c->sec_line[sec][idx] != 0)
		add_error(c, c->line, "duplicate section [%s] (first at line "
			  "%u; each section appears once)",
			  sec_name(sec, (unsigned)idx, nm, sizeof(nm)),
			  c->sec_line[sec][idx]);
	else
		c->sec_line[sec][idx] = c->line;
	if (s->indexed)
		*(bool *)((char *)c->cfg + s->array_offset +
			  idx * s->elem_size + s->present_offset) = true;
	c->sec = sec;
	c->idx = (unsigned)idx;
}

/* True at an inline comment: ';' or '#' at the start or after whitespace. */
static bool comment_at(const char *start, const char *p)
{
	return (*p == ';' || *p == '#') &&
	       (p == start || isspace((unsigned char)p[-1]));
}

/* Classify ctx->line (already without its newline) the way inih will. */
static void classify(struct ctx *c, const char *s)
{
	c->indented = isspace((unsigned char)*s);
	while (isspace((unsigned char)*s))
		s++;
	if (*s == '\0' || *s == ';' || *s == '#') {
		c->kind = L_BLANK;
		return;
	}
	if (*s != '[') {
		c->kind = L_OTHER;
		return;
	}
	c->kind = L_SECTION;
	for (const char *p = s + 1; *p; p++) {
		if (comment_at(s + 1, p) && p != s + 1)
			break;
		if (*p == ']') {
			begin_section(c, s + 1, (size_t)(p - s - 1));
			/* inih drops whatever follows the ']': a key written
			 * there would be lost without a word */
			const char *q = p + 1;
			while (isspace((unsigned char)*q))
				q++;
			char eb[CFG__ELIDE_BUF];

			if (*q && !comment_at(p + 1, q))
				add_error(c, c->line, "text after section header '%s' "
					  "(expected [name] alone on its line, or a comment)",
					  cfg__elide(s, (size_t)(p - s + 1), eb));
			return;
		}
	}
	c->in_section = true;
	c->sec = -1;
	add_error(c, c->line, "section header without ']' (expected [name])");
}

#define NOT_CONTINUATION                                                       \
	"indented line is not a continuation of the previous value "       \
	"(expected the whole value on one line)"

/* The previous line produced no handler call although it had content. */
static void finish_line(struct ctx *c)
{
	if (c->kind != L_OTHER || c->handled == c->line || c->reported)
		return;
	if (c->indented)
		add_error(c, c->line, NOT_CONTINUATION);
	else
		add_error(c, c->line, "cannot parse line (expected key = "
			  "value, [section] or a ; comment)");
}

/* What a line may hold as read: a byte order mark, CFG__LINE_MAX
 * characters and one more (to tell a long line), "\r\n", a NUL. */
#define LINE_BUF (3 + CFG__LINE_MAX + 1 + 2 + 1)

/* The next line into c->buf: at most LINE_BUF - 1 bytes are kept, the rest
 * of a longer line is read and dropped, so memory stays bounded whatever
 * the input (a file of one endless line: /dev/zero). Its length kept, or -1
 * at the end, on a read error (c->read_errno) and past CFG__INPUT_MAX
 * bytes (c->too_big). */
static ssize_t next_line(struct ctx *c)
{
	size_t n = 0;
	bool any = false;
	int ch;

	while ((ch = getc_unlocked(c->in)) != EOF) {
		if (++c->bytes > CFG__INPUT_MAX) {
			c->too_big = true;
			return -1;
		}
		any = true;
		if (n < LINE_BUF - 1)
			c->buf[n++] = (char)ch;
		if (ch == '\n')
			break;
	}
	if (ch == EOF && ferror(c->in)) {
		c->read_errno = errno ? errno : EIO;
		return -1;
	}
	if (!any)
		return -1;
	c->buf[n] = '\0';
	return (ssize_t)n;
}

/* In a value that opens with '"': the quote that closes it, one followed by
 * nothing, or by blanks and a comment; NULL when there is none. */
static const char *closing_quote(const char *v)
{
	ZB_ASSERT(v[0] == '"');
	for (const char *q = strchr(v + 1, '"'); q; q = strchr(q + 1, '"')) {
		const char *r = q + 1;

		while (isspace((unsigned char)*r))
			r++;
		if (*r == '\0' || (r > q + 1 && (*r == ';' || *r == '#')))
			return q;
	}
	return NULL;
}

/* Inline comments, cut here rather than by inih, which cut a quoted value
 * at its first " ;" and lost the rest: "/etc/my ;key" read as `"/etc/my`.
 * As inih did, ';' or '#' after a blank starts a comment in the key and in
 * a bare value (not as the value's first character); a value that opens
 * with '"' runs to the quote that closes it, and one that is never closed
 * is an error. s: a key line of len characters; returns the length kept. */
static size_t cut_comment(struct ctx *c, char *s, size_t len)
{
	char *p = s, *v, *key;
	size_t kl;

	while (isspace((unsigned char)*p))
		p++;
	key = p;
	for (char *k = p; *k; k++) {
		if (k > p && comment_at(p, k)) {
			*k = '\0'; /* a key without its '=': inih reports it */
			return (size_t)(k - s);
		}
		if (*k == '=' || *k == ':') {
			p = k + 1;
			break;
		}
	}
	if (p == s || (p[-1] != '=' && p[-1] != ':'))
		return len; /* no delimiter: inih reports the line */
	v = p;
	while (isspace((unsigned char)*v))
		v++;
	if (*v == '"') {
		const char *q = closing_quote(v);

		if (q == NULL) {
			kl = (size_t)(p - 1 - key);
			while (kl > 0 && isspace((unsigned char)key[kl - 1]))
				kl--;
			add_error(c, c->line, "the value of '%.*s' opens with \" "
				  "and has no closing \" (expected \"text\", then "
				  "nothing or a comment)", kl > 60 ? 60 : (int)kl, key);
			return len;
		}
		s[q + 1 - s] = '\0';
		return (size_t)(q + 1 - s);
	}
	for (char *k = v; *k; k++)
		if (k > v && comment_at(v, k)) {
			*k = '\0';
			return (size_t)(k - s);
		}
	return len;
}

/* inih's reader: one line per call, counting lines. */
static char *reader(char *str, int num, void *stream)
{
	struct ctx *c = stream;
	ssize_t n;
	size_t len;
	char *s;

	ZB_ASSERT(c != NULL && str != NULL);
	ZB_ASSERT(num >= 8 && num <= CFG__LINE_MAX + 2);
	finish_line(c);
	if (c->kind == L_SECTION || c->kind == L_OTHER)
		c->prev = c->kind;
	n = next_line(c);
	if (n < 0) {
		c->kind = L_NONE;
		return NULL;
	}
	c->line++;
	c->reported = false;
	s = c->buf;
	len = (size_t)n;
	if (c->line == 1 && len >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0) {
		s += 3; /* UTF-8 byte order mark */
		len -= 3;
	}
	while (len > 0 && (s[len - 1] == '\n' || s[len - 1] == '\r'))
		len--;
	s[len] = '\0';
	if (strlen(s) != len) {
		add_error(c, c->line, "line contains a NUL byte (expected text)");
		len = strlen(s);
	}
	if (len > (size_t)num - 2) {
		add_error(c, c->line, "line is too long (expected at most %d "
			  "characters)", num - 2);
		len = (size_t)num - 2;
		s[len] = '\0';
	}
	classify(c, s);
	if (c->kind == L_OTHER)
		len = cut_comment(c, s, len);
	memcpy(str, s, len);
	str[len] = '\n';
	str[len + 1] = '\0';
	return str;
}

static void key_list(unsigned sec, char *out, size_t len)
{
	size_t o = 0;

	out[0] = '\0';
	for (unsigned i = 0; i < cfg__nkeys && o < len; i++)
		if (cfg__keys[i].section == sec)
			o += (size_t)snprintf(out + o, len - o, "%s%s",
					      o ? ", " : "", cfg__keys[i].key);
}

/* The key of section sec nearest to name, and its distance. */
static const char *nearest_key(unsigned sec, const char *name, unsigned *dist)
{
	const char *best = NULL;

	*dist = 99;
	for (unsigned i = 0; i < cfg__nkeys; i++) {
		unsigned d;

		if (cfg__keys[i].section != sec)
			continue;
		d = distance(name, strlen(name), cfg__keys[i].key);
		if (d < *dist) {
			*dist = d;
			best = cfg__keys[i].key;
		}
	}
	return best;
}

/* name is no key of the current section (nm: its printed name). */
static void unknown_key(struct ctx *c, const char *name, const char *nm)
{
	const char *best;
	unsigned bd;
	char hint[96], all[400], eb[CFG__ELIDE_BUF];

	ZB_ASSERT(c != NULL && c->sec >= 0);
	ZB_ASSERT(name != NULL && nm != NULL);
	best = nearest_key((unsigned)c->sec, name, &bd);
	suggest(strlen(name), "'%s'", best, bd, hint, sizeof(hint));
	key_list((unsigned)c->sec, all, sizeof(all));
	add_error(c, c->line, "unknown key '%s' in [%s] (%sexpected one of %s)",
		  cfg__elide(name, strlen(name), eb), nm, hint, all);
}

/* A CFG__HOST row stored an address no host has (0.0.0.0: none, which
 * the default may be; 255.255.255.255: everyone): why says so. */
static bool not_host(const struct cfg__key *k, const void *base,
		     const char *value, char *why, size_t wl)
{
	uint32_t ip;
	char expect[160];

	if (k->type != CFG__IPV4 || !(k->flags & CFG__HOST))
		return false;
	memcpy(&ip, (const char *)base + k->offset, sizeof(ip));
	if (ip != 0 && ip != UINT32_MAX)
		return false;
	cfg__expect(k, expect, sizeof(expect));
	snprintf(why, wl, "'%s' is no host's address (expected %s)", value,
		 expect);
	return true;
}

static int handler(void *user, const char *section, const char *name,
		   const char *value)
{
	struct ctx *c = user;
	char nm[80], why[400], eb[CFG__ELIDE_BUF];
	int k;

	ZB_ASSERT(c != NULL && section != NULL);
	if (name == NULL) /* a section start, when inih reports them */
		return 1;
	c->handled = c->line;
	if (c->reported)
		return 1;
	if (!c->in_section) {
		add_error(c, c->line, "key '%s' outside any section (expected "
			  "a [section] header above it)",
			  cfg__elide(name, strlen(name), eb));
		return 1;
	}
	if (c->sec < 0)
		return 1; /* the header's error covers its keys */
	sec_name(c->sec, c->idx, nm, sizeof(nm));
	if (value == NULL || name[0] == '\0') {
		add_error(c, c->line, "missing key name (expected key = value)");
		return 1;
	}
	k = cfg__key_find((unsigned)c->sec, name);
	/* an indented line that names no key reads as a continuation of the
	 * value above it, unless there is no value above it (it follows the
	 * section header) or it is a near miss of a key (a typo) */
	if (k < 0 && c->indented && c->prev == L_OTHER) {
		char hint[96];
		unsigned bd;
		const char *best = nearest_key((unsigned)c->sec, name, &bd);

		suggest(strlen(name), "'%s'", best, bd, hint, sizeof(hint));
		if (hint[0] == '\0') {
			add_error(c, c->line, NOT_CONTINUATION);
			return 1;
		}
	}
	if (k < 0) {
		unknown_key(c, name, nm);
		return 1;
	}
	if (c->key_line[k][c->idx] != 0) {
		add_error(c, c->line, "duplicate key '%s' in [%s] (first set "
			  "at line %u; each key appears once)", name, nm,
			  c->key_line[k][c->idx]);
		return 1;
	}
	c->key_line[k][c->idx] = c->line;
	if (cfg__store(&cfg__keys[k], cfg__base(c->cfg, &cfg__keys[k], c->idx),
		       value, why, sizeof(why)) != 0 ||
	    not_host(&cfg__keys[k], cfg__base(c->cfg, &cfg__keys[k], c->idx),
		     value, why, sizeof(why))) {
		add_error(c, c->line, "%s.%s: %s", nm, name, why);
		if (c->sec == S_PORT && (cfg__keys[k].type == CFG__PCI ||
					 cfg__keys[k].type == CFG__VDEV))
			c->dev_bad[c->idx] = true;
	}
	return 1;
}

/* Line to blame for row k of instance idx: the key, else its section,
 * else the end of the file. */
static unsigned blame(const struct ctx *c, int k, unsigned idx)
{
	if (c->key_line[k][idx])
		return c->key_line[k][idx];
	if (c->sec_line[cfg__keys[k].section][idx])
		return c->sec_line[cfg__keys[k].section][idx];
	return c->line;
}

static int key_index(unsigned sec, const char *key)
{
	int k = cfg__key_find(sec, key);

	ZB_ASSERT(k >= 0);
	return k;
}

static void check_required(struct ctx *c)
{
	char nm[80], expect[160];

	for (unsigned k = 0; k < cfg__nkeys; k++) {
		const struct cfg__key *key = &cfg__keys[k];
		const struct cfg__section *s = &cfg__sections[key->section];
		unsigned n = s->indexed ? s->count : 1;

		if (!(key->flags & CFG__REQUIRED))
			continue;
		cfg__expect(key, expect, sizeof(expect));
		for (unsigned i = 0; i < n; i++) {
			unsigned sl = c->sec_line[key->section][i];

			if (c->key_line[k][i] != 0)
				continue;
			sec_name((int)key->section, i, nm, sizeof(nm));
			if (sl != 0)
				add_error(c, sl, "missing required key '%s' in "
					  "[%s] (expected %s = %s)", key->key,
					  nm, key->key, expect);
			else if (!s->indexed)
				add_error(c, c->line, "missing section [%s] "
					  "with required key '%s' (expected "
					  "%s = %s)", nm, key->key, key->key,
					  expect);
		}
	}
}

static void check_ports(struct ctx *c)
{
	struct zb_config *cfg = c->cfg;
	int kp = key_index(S_PORT, "pci"), kv = key_index(S_PORT, "vdev");
	int kport = key_index(S_PEER, "port"), kip = key_index(S_PEER, "ip");
	unsigned n = 0;

	for (unsigned i = 0; i < CFG_MAX_PORTS; i++) {
		const struct cfg_port *p = &cfg->ports[i];
		unsigned sl = c->sec_line[S_PORT][i];

		if (!p->present)
			continue;
		n = i + 1;
		if (i > 0 && !cfg->ports[i - 1].present)
			add_error(c, sl, "[port.%u] without [port.%u] (expected "
				  "ports numbered 0, 1, ... without gaps)", i,
				  i - 1);
		if (c->dev_bad[i])
			continue; /* a rejected pci or vdev was reported */
		if (p->pci[0] != '\0' && p->vdev[0] != '\0')
			add_error(c, c->key_line[kv][i] > c->key_line[kp][i]
					     ? c->key_line[kv][i]
					     : c->key_line[kp][i],
				  "[port.%u] has both pci and vdev (expected "
				  "exactly one of them)", i);
		else if (p->pci[0] == '\0' && p->vdev[0] == '\0')
			add_error(c, sl, "[port.%u] has neither pci nor vdev "
				  "(expected exactly one of them)", i);
		/* one device per port: two ports on one device both drove it
		 * (and closed it twice). One address on several ports is how
		 * a node meets its peers over point-to-point links (memif: a
		 * port per peer, all with the node's ip and mac) */
		for (unsigned j = 0; j < i; j++) {
			const struct cfg_port *q = &cfg->ports[j];
			size_t dl = strcspn(p->vdev, ","), ql = strcspn(q->vdev, ",");
			if (!q->present || c->dev_bad[j])
				continue;
			if ((p->vdev[0] && dl == ql && !strncmp(p->vdev, q->vdev, dl)) ||
			    (p->pci[0] && !strcmp(p->pci, q->pci)))
				add_error(c, c->key_line[p->vdev[0] ? kv : kp][i],
					  "[port.%u] is the device of [port.%u] too "
					  "(expected one port per device)", i, j);
		}
	}
	cfg->port_count = (uint16_t)n;
	/* A node whose first port has an ip runs zbmd's transport over every
	 * port, at the smallest port mtu, and the transport needs
	 * WIRE_MTU_MIN (its headers and a useful fragment): below it the
	 * node passed here and failed at start with "Invalid argument". */
	int km = key_index(S_PORT, "mtu");
	for (unsigned i = 0; n > 0 && cfg->ports[0].ip != 0 && i < n; i++)
		if (cfg->ports[i].present && cfg->ports[i].mtu &&
		    cfg->ports[i].mtu < WIRE_MTU_MIN)
			add_error(c, blame(c, km, i), "port.%u.mtu: %u is below the "
				  "least zbmd's transport takes, which runs over every port "
				  "once [port.0] has an ip (expected %u..%u)", i,
				  cfg->ports[i].mtu, WIRE_MTU_MIN, WIRE_MTU_MAX);

	cfg->peer_count = 0;
	for (unsigned i = 0; i < CFG_MAX_NODES; i++) {
		const struct cfg_peer *p = &cfg->peers[i];

		if (!p->present)
			continue;
		cfg->peer_count++;
		if (n > 0 && p->port >= n)
			add_error(c, blame(c, kport, i), "[peer.%u] port = %u "
				  "but there is no [port.%u] (expected 0..%u)",
				  i, p->port, p->port, n - 1);
		/* the dataplane asks for a peer's MAC (ARP) only from a port
		 * with an ip (arp.c dp__arp_tick), and answers there only
		 * for that ip: without one and without the peer's mac, the
		 * transport that runs once [port.0] has an ip never reaches
		 * the peer */
		else if (n > 0 && cfg->ports[0].ip != 0 && i != cfg->node.id &&
			 !c->dev_bad[p->port] && cfg->ports[p->port].ip == 0 &&
			 memcmp(p->mac, "\0\0\0\0\0\0", 6) == 0)
			add_error(c, blame(c, kport, i), "[peer.%u] is reached "
				  "through [port.%u], which has no ip, so its MAC is "
				  "never resolved (expected [port.%u] ip, or the "
				  "peer's address in [peer.%u] mac)", i, p->port,
				  p->port, i);
		for (unsigned j = 0; j < i; j++)
			if (cfg->peers[j].present && p->ip != 0 &&
			    cfg->peers[j].ip == p->ip)
				add_error(c, blame(c, kip, i), "[peer.%u] has "
					  "the same ip as [peer.%u] (expected "
					  "one address per node)", i, j);
	}
}

/* Streams of a transport lane the dpdk net provider maps channels onto
 * (NET_DPDK_MAX_CHANNELS: dataplane/net_dpdk.c's nd_init refuses more with
 * -EINVAL), and the lanes a collective host spreads them over
 * (COLL_HOST_MAX_LANES, dataplane/coll_dpdk.c): the same constants. */
#define DPDK_CHANNELS_PER_LANE ((unsigned)NET_DPDK_MAX_CHANNELS)
#define COLL_LANES_MAX ((unsigned)COLL_HOST_MAX_LANES)

unsigned cfg_dataplane_lanes(const struct zb_config *cfg)
{
	ZB_ASSERT(cfg != NULL);
	return cfg->eal.lcore_count > 1 ? cfg->eal.lcore_count - 1u : 1u;
}

unsigned cfg_coll_lanes(const struct zb_config *cfg)
{
	unsigned lanes = cfg_dataplane_lanes(cfg);
	return lanes < COLL_LANES_MAX ? lanes : COLL_LANES_MAX;
}

unsigned cfg_dpdk_channels_max(unsigned coll_lanes)
{
	return coll_lanes <= 1 ? DPDK_CHANNELS_PER_LANE
			       : (DPDK_CHANNELS_PER_LANE + 1) * coll_lanes - 1;
}

/* What depends on the number of dataplane lanes (cfg_dataplane_lanes). */
static void check_lanes(struct ctx *c)
{
	const struct zb_config *cfg = c->cfg;
	unsigned lanes = cfg_dataplane_lanes(cfg), cl = cfg_coll_lanes(cfg);
	unsigned ch = cfg->coll.channels, per;

	/* lane L's transport listens on udp_port + L (transport.c
	 * check_params), on a node whose [port.0] has an ip */
	if (cfg->port_count > 0 && cfg->ports[0].ip != 0 &&
	    (uint32_t)cfg->dp.udp_port + lanes - 1 > 65535)
		add_error(c, blame(c, key_index(S_DATAPLANE, "udp_port"), 0),
			  "dataplane.udp_port: %u with %u dataplane lanes ([eal] "
			  "lcores = %s) passes 65535 (expected udp_port at most "
			  "%u: lane L uses udp_port + L)", cfg->dp.udp_port, lanes,
			  cfg->eal.lcores, 65536 - lanes);
	/* a collective host gives each lane channels / lanes of them (at
	 * least 1; all of them with one lane: coll_dpdk.c) */
	per = cl == 1 ? ch : (ch / cl ? ch / cl : 1);
	if (cfg->transport.kind == CFG_TRANSPORT_DPDK && ch > cfg_dpdk_channels_max(cl))
		add_error(c, blame(c, key_index(S_COLL, "channels"), 0),
			  "coll.channels: %u gives %u per dataplane lane with %u "
			  "lane%s ([eal] lcores = %s), more than the %u the dpdk "
			  "provider carries (expected channels at most %u here, or "
			  "[transport] kind = tcp or rdma)", ch, per, cl,
			  cl == 1 ? "" : "s", cfg->eal.lcores,
			  DPDK_CHANNELS_PER_LANE, cfg_dpdk_channels_max(cl));
}

/* tok, a form of flag (exact: flag itself), is in [eal] extra_args. */
static void own_flag(struct ctx *c, unsigned line, const char *tok, bool exact,
		     const char *flag, const char *how, const char *key)
{
	if (exact)
		add_error(c, line, "eal.extra_args: %s is zbmd's to set "
			  "(expected %s instead)", flag, key);
	else
		add_error(c, line, "eal.extra_args: %s is %s%s, zbmd's to set "
			  "(expected %s instead)", tok, flag, how, key);
}

/* EAL flags zbmd sets from other keys: given again in [eal] extra_args
 * they fight them (the node lock follows file_prefix, not a --file-prefix
 * there). DPDK reads its arguments with getopt_long, which takes any
 * unambiguous beginning of a long option ("--file-p=x") and a short
 * option's value attached ("-m512", "-l0-1"), after flags without one
 * ("-v"): all of those forms are refused. A beginning shared by other
 * options is ambiguous and DPDK refuses it anyway. */
static void check_extra_args(struct ctx *c)
{
	static const struct { const char *flag, *key; } own[] = {
		{"--file-prefix", "[eal] file_prefix"}, {"--lcores", "[eal] lcores"},
		{"--socket-mem", "[eal] memory_mb"},
		{"--no-huge", "[eal] hugepages = false"},
		{"-l", "[eal] lcores"}, {"-c", "[eal] lcores"},
		{"-m", "[eal] memory_mb"},
	};
	const struct zb_config *cfg = c->cfg;
	unsigned line = blame(c, key_index(S_EAL, "extra_args"), 0);
	char args[sizeof(cfg->eal.extra_args)], *save = NULL, tok[48];

	snprintf(args, sizeof(args), "%s", cfg->eal.extra_args);
	for (char *t = strtok_r(args, " \t", &save); t; t = strtok_r(NULL, " \t", &save)) {
		size_t tl = strcspn(t, "=");

		snprintf(tok, sizeof(tok), "%.*s%s", (int)(tl < 40 ? tl : 40), t,
			 tl > 40 ? "..." : "");
		if (t[0] != '-' || tl < 2)
			continue;
		if (t[1] == '-') {
			/* "--" alone ends the options: no prefix of anything */
			if (tl > 2 && tl <= strlen("--in-memory") &&
			    !strncmp(t, "--in-memory", tl)) {
				add_error(c, line, "eal.extra_args: %s%s cannot go "
					  "with the --legacy-mem zbmd passes: DPDK refuses "
					  "the two (expected extra_args without it)", tok,
					  tl == strlen("--in-memory") ? "" : " (--in-memory)");
				continue;
			}
			for (unsigned k = 0; k < 4 && tl > 2; k++)
				if (tl <= strlen(own[k].flag) && !strncmp(t, own[k].flag, tl))
					own_flag(c, line, tok, tl == strlen(own[k].flag),
						 own[k].flag, "", own[k].key);
			continue;
		}
		/* short options: skip the flags that take no value (-h, -v),
		 * then the first one decides */
		const char *p = t + 1;
		while (*p == 'h' || *p == 'v')
			p++;
		for (unsigned k = 4; k < ZB_ARRAY_LEN(own); k++)
			if (*p == own[k].flag[1])
				own_flag(c, line, tok, p == t + 1 && p[1] == '\0',
					 own[k].flag, p[1] ? " with its value" : "",
					 own[k].key);
	}
}

/* "a.b.c.d:port" (a hostport row's value, IPv4 only there) split. */
static bool ip_port(const char *s, uint32_t *ip, uint16_t *port)
{
	char host[CFG_STR];

	return s[0] && cfg_parse_hostport(s, host, sizeof(host), port) == 0 &&
	       cfg_parse_ipv4(host, ip, NULL) == 0;
}

/* The control plane's sockets: [control] listen (UDP and TCP), admin_listen
 * and [metrics] listen (TCP): two on one port where the addresses are
 * equal or one is the wildcard fail at start with "Address already in use".
 * And the address it advertises (control/node.c check_config): [control]
 * listen, or [peer.<id>] control when listen is 0.0.0.0, with a concrete
 * ip and listen's port. */
static void check_listen(struct ctx *c)
{
	const struct zb_config *cfg = c->cfg;
	static const struct { int sec; const char *key, *name, *text; } row[] = {
		{S_CONTROL, "listen", "control.listen", "[control] listen"},
		{S_CONTROL, "admin_listen", "control.admin_listen",
		 "[control] admin_listen"},
		{S_METRICS, "listen", "metrics.listen", "[metrics] listen"},
	};
	const char *addr[3] = {cfg->control.listen, cfg->control.admin_listen,
			       cfg->metrics.listen};
	uint32_t ip[3], sip;
	uint16_t port[3], sport;
	bool set[3];

	for (unsigned i = 0; i < 3; i++)
		set[i] = ip_port(addr[i], &ip[i], &port[i]);
	for (unsigned i = 1; i < 3; i++)
		for (unsigned j = 0; j < i; j++) {
			if (!set[i] || !set[j] || port[i] != port[j] ||
			    (ip[i] != ip[j] && ip[i] != 0 && ip[j] != 0))
				continue;
			/* the later row: [metrics] after [control] */
			unsigned line = blame(c, key_index((unsigned)row[i].sec,
							   row[i].key), 0);
			if (i == 2 && j == 1 && !strcmp(addr[1], addr[2]))
				/* as it always read */
				add_error(c, blame(c, key_index(S_CONTROL,
								"admin_listen"), 0),
					  "control.admin_listen: %s is [metrics] listen "
					  "too (expected two addresses)", addr[1]);
			else
				add_error(c, line, "%s: %s takes the port of %s = %s "
					  "(expected another port, or two addresses "
					  "neither of them 0.0.0.0)", row[i].name,
					  addr[i], row[j].text, addr[j]);
		}

	const struct cfg_peer *self = &cfg->peers[cfg->node.id];
	bool peer_ctl = self->present && self->control[0];
	if (!set[0] || ip[0] != 0)
		return;
	/* dataplane/run_ctl.c dp__run_ctl_wanted: `auto` starts the control
	 * plane only with an address of this node's own */
	if (cfg->control.enabled != CFG_CONTROL_ON && !peer_ctl)
		return;
	if (!peer_ctl)
		add_error(c, blame(c, key_index(S_CONTROL, "enabled"), 0),
			  "control.enabled = on but [control] listen %s is the "
			  "wildcard and there is no [peer.%u] control (expected "
			  "[control] listen = this node's ip:%u, or [peer.%u] "
			  "control = this node's ip:%u)", addr[0], cfg->node.id,
			  port[0], cfg->node.id, port[0]);
	else if (!ip_port(self->control, &sip, &sport) || sip == 0 ||
		 sport != port[0])
		add_error(c, blame(c, key_index(S_PEER, "control"), cfg->node.id),
			  "peer.%u.control: %s is what this node advertises, "
			  "[control] listen being the wildcard %s (expected "
			  "this node's own ip with port %u)", cfg->node.id,
			  self->control, addr[0], port[0]);
}

/* Checks between keys of plain sections: the later key gets the blame. */
static void check_pairs(struct ctx *c)
{
	const struct zb_config *cfg = c->cfg;

	if ((uint64_t)cfg->dp.mbuf_cache * 3 > (uint64_t)cfg->dp.mbufs * 2)
		add_error(c, blame(c, key_index(S_DATAPLANE, "mbuf_cache"), 0),
			  "dataplane.mbuf_cache: %u is too large for mbufs = "
			  "%u (expected at most mbufs / 1.5)",
			  cfg->dp.mbuf_cache, cfg->dp.mbufs);
	if (cfg->transport.rto_us_min > cfg->transport.rto_us_max)
		add_error(c, blame(c, key_index(S_TRANSPORT, "rto_us_max"), 0),
			  "transport.rto_us_max: %u is below rto_us_min = %u "
			  "(expected rto_us_max >= rto_us_min)",
			  cfg->transport.rto_us_max,
			  cfg->transport.rto_us_min);
	if (cfg->control.election_timeout_ms <= cfg->control.raft_heartbeat_ms)
		add_error(c, blame(c, key_index(S_CONTROL,
						"election_timeout_ms"), 0),
			  "control.election_timeout_ms: %u is not above "
			  "raft_heartbeat_ms = %u (expected election_timeout_ms"
			  " > raft_heartbeat_ms)",
			  cfg->control.election_timeout_ms,
			  cfg->control.raft_heartbeat_ms);
	if (cfg->transport.kind == CFG_TRANSPORT_RDMA && !cfg->rdma.enabled)
		add_error(c, blame(c, key_index(S_TRANSPORT, "kind"), 0),
			  "transport.kind = rdma but [rdma] is not enabled "
			  "(expected enabled = true in [rdma])");
	if (cfg->actors.carrier == CFG_CARRIER_RDMA && !cfg->rdma.enabled)
		add_error(c, blame(c, key_index(S_ACTORS, "carrier"), 0),
			  "actors.carrier = rdma but [rdma] is not enabled "
			  "(expected enabled = true in [rdma])");
	check_lanes(c);
	check_extra_args(c);
	/* what the control plane refuses at its start (control/node.c),
	 * told here already; never where it does not start */
	if (cfg->control.enabled != CFG_CONTROL_OFF) {
		if (cfg->cluster.seed_count > 0 && !cfg->cluster.psk_file[0])
			add_error(c, blame(c, key_index(S_CLUSTER, "seeds"), 0),
				  "cluster.seeds lists nodes but there is no "
				  "psk_file (expected [cluster] psk_file: control "
				  "messages are authenticated)");
		check_listen(c);
	}
}

static int load(struct zb_config *cfg, FILE *in, const char *name,
		struct cfg_error *err)
{
	struct ctx *c;
	int r, rc;

	ZB_ASSERT(cfg != NULL && in != NULL && name != NULL && err != NULL);
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return -ENOMEM;
	c->key_line = calloc(cfg__nkeys, sizeof(*c->key_line));
	if (c->key_line == NULL) {
		rc = -ENOMEM;
		goto out_ctx;
	}
	c->buf = malloc(LINE_BUF);
	if (c->buf == NULL) {
		rc = -ENOMEM;
		goto out_buf;
	}
	c->cfg = cfg;
	c->err = err;
	c->name = name;
	c->in = in;

	pthread_mutex_lock(&ini_lock);
	ini_allow_multiline = false;
	ini_allow_inline_comments = false; /* the reader cuts them */
	ini_inline_comment_prefixes = (char *)";#";
	ini_start_comment_prefixes = (char *)";#";
	ini_allow_no_value = false;
	ini_stop_on_first_error = false;
	ini_allow_bom = false; /* the reader strips it */
	/* A heap line buffer of a size we choose (the default stack buffer of
	 * Debian's build is 200 bytes); the reader never hands inih a partial
	 * line, so inih never needs to grow it. */
	ini_use_stack = false;
	ini_allow_realloc = false;
	ini_initial_alloc = CFG__LINE_MAX + 2;

	r = ini_parse_stream(reader, c, handler, c);
	pthread_mutex_unlock(&ini_lock);
	if (c->read_errno != 0)
		add_error(c, c->line, "cannot read: %s (expected a readable "
			  "INI file)", strerror(c->read_errno));
	if (c->too_big)
		add_error(c, c->line, "the input goes on past %u MiB (expected "
			  "an INI file)", CFG__INPUT_MAX >> 20);
	if (r == -2) {
		rc = -ENOMEM;
		goto out_buf;
	}
	if (r > 0 && err->count == 0)
		add_error(c, (unsigned)r, "cannot parse line (expected key = "
			  "value, [section] or a ; comment)");
	if (c->read_errno == 0 && !c->too_big) {
		/* what is missing or clashes means something only in a
		 * whole file */
		check_required(c);
		check_ports(c);
		check_pairs(c);
	}
	if (err->count > c->shown) {
		size_t left = sizeof(err->list) - c->list_len;

		snprintf(err->list + c->list_len, left,
			 "%s: %u more errors left out\n", name,
			 err->count - c->shown);
	}
	rc = err->count ? ZB_ERR_CONFIG : 0;
out_buf:
	free(c->buf);
	free(c->key_line);
out_ctx:
	free(c);
	return rc;
}

static void error_reset(struct cfg_error *err)
{
	err->msg[0] = '\0';
	err->list[0] = '\0';
	err->count = 0;
}

void cfg_set_defaults(struct zb_config *cfg)
{
	char why[400];

	ZB_ASSERT(cfg != NULL);
	memset(cfg, 0, sizeof(*cfg));
	for (unsigned k = 0; k < cfg__nkeys; k++) {
		const struct cfg__key *key = &cfg__keys[k];
		const struct cfg__section *s = &cfg__sections[key->section];
		unsigned n = s->indexed ? s->count : 1;

		for (unsigned i = 0; i < n; i++) {
			int rc = cfg__store(key, cfg__base(cfg, key, i),
					    key->def, why, sizeof(why));

			ZB_ASSERT(rc == 0); /* the table's defaults are valid */
		}
	}
}

int cfg_load_string(struct zb_config *cfg, const char *text, const char *name,
		    struct cfg_error *err)
{
	FILE *f;
	int rc;

	ZB_ASSERT(cfg != NULL && text != NULL && err != NULL);
	error_reset(err);
	if (name == NULL)
		name = "<string>";
	cfg_set_defaults(cfg);
	snprintf(cfg->path, sizeof(cfg->path), "%s", name);
	if (text[0] == '\0')
		f = fopen("/dev/null", "r");
	else
		f = fmemopen((void *)text, strlen(text), "r");
	if (f == NULL) {
		rc = -errno;
		snprintf(err->msg, sizeof(err->msg), "%s: %s", name,
			 strerror(errno));
		goto fail;
	}
	rc = load(cfg, f, name, err);
	fclose(f);
	return rc;
fail:
	err->count = 1;
	snprintf(err->list, sizeof(err->list), "%s\n", err->msg);
	return rc;
}

int cfg_load_stream(struct zb_config *cfg, FILE *in, const char *name,
		    struct cfg_error *err)
{
	ZB_ASSERT(cfg != NULL && in != NULL && name != NULL && err != NULL);
	error_reset(err);
	cfg_set_defaults(cfg);
	snprintf(cfg->path, sizeof(cfg->path), "%s", name);
	return load(cfg, in, name, err);
}

/* path opened for reading, or NULL with *rc = -errno, or -EINVAL for a
 * FIFO, socket or block device. O_NONBLOCK: a FIFO's open() waits for a
 * writer (check-config hung on one); what else open() accepts stays
 * accepted (a directory fails at the first read and says so; /dev/null is
 * an empty file). */
static FILE *open_config(const char *path, int *rc)
{
	struct stat st;
	FILE *f;
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);

	ZB_ASSERT(path != NULL && rc != NULL);
	if (fd < 0) {
		*rc = -errno;
		return NULL;
	}
	if (fstat(fd, &st) != 0) {
		*rc = -errno;
		close(fd);
		return NULL;
	}
	if (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode) || S_ISBLK(st.st_mode)) {
		*rc = -EINVAL;
		close(fd);
		return NULL;
	}
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0 ||
	    (f = fdopen(fd, "r")) == NULL) {
		*rc = -errno;
		close(fd);
		return NULL;
	}
	*rc = 0;
	return f;
}

void cfg_error_print(FILE *f, const char *prefix, const struct cfg_error *err)
{
	ZB_ASSERT(f != NULL && prefix != NULL && err != NULL);
	const char *l = err->list[0] ? err->list : err->msg;
	while (*l) {
		size_t n = strcspn(l, "\n");
		fprintf(f, "%s: %.*s\n", prefix, (int)n, l);
		l += n + (l[n] == '\n');
	}
}

int cfg_load_file(struct zb_config *cfg, const char *path,
		  struct cfg_error *err)
{
	size_t plen = strlen(path);
	FILE *f;
	int rc;

	ZB_ASSERT(cfg != NULL && path != NULL && err != NULL);
	error_reset(err);
	cfg_set_defaults(cfg);
	snprintf(cfg->path, sizeof(cfg->path), "%s", path);
	if (!path[0]) {
		snprintf(err->msg, sizeof(err->msg), "the config path is empty "
			 "(expected a readable INI file)");
		err->count = 1;
		snprintf(err->list, sizeof(err->list), "%s\n", err->msg);
		return -ENOENT;
	}
	f = open_config(path, &rc);
	if (f == NULL) {
		/* a path too long for the message keeps its end, so that
		 * the reason still shows */
		snprintf(err->msg, sizeof(err->msg), "%s%s: %s%s "
			 "(expected a readable INI file)",
			 plen > 320 ? "..." : "", path + (plen > 320 ? plen - 320 : 0),
			 rc == -EINVAL ? "" : "cannot open: ",
			 rc == -EINVAL ? "not a regular file" : strerror(-rc));
		err->count = 1;
		snprintf(err->list, sizeof(err->list), "%s\n", err->msg);
		return rc;
	}
	rc = load(cfg, f, path, err);
	fclose(f);
	return rc;
}
