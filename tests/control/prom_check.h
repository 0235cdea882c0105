/* tests/control/prom_check.h — a small strict checker for the Prometheus
 * text exposition format 0.0.4: HELP/TYPE syntax and placement, metric and
 * label names, label value escapes, sample values, one contiguous group per
 * family, no duplicate series, counters >= 0, histogram buckets cumulative
 * with increasing le, a +Inf bucket equal to _count. Returns 0, or -1 with
 * "line N: why" in err. */
#ifndef ZBMD_PROM_CHECK_H
#define ZBMD_PROM_CHECK_H

#include <ctype.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PC_MAX_FAM 512
#define PC_MAX_SERIES 4096

struct pc_fam {
	char name[128];
	char type[16];
	bool help, typed, closed;
};

struct pc_state {
	struct pc_fam fam[PC_MAX_FAM];
	int n_fam, cur;
	char (*series)[256];
	int n_series;
	/* histogram tracking of the current series group */
	char hkey[256];
	double last_le, last_cum, inf_cum;
	bool have_inf;
};

static int pc__fail(char *err, size_t n, int line, const char *why)
{
	snprintf(err, n, "line %d: %s", line, why);
	return -1;
}

static bool pc__name(const char **p, char *out, size_t cap, bool metric)
{
	size_t k = 0;
	const char *s = *p;
	if (!(isalpha((unsigned char)*s) || *s == '_' || (metric && *s == ':')))
		return false;
	while (isalnum((unsigned char)*s) || *s == '_' || (metric && *s == ':')) {
		if (k + 1 >= cap)
			return false;
		out[k++] = *s++;
	}
	out[k] = '\0';
	*p = s;
	return true;
}

static struct pc_fam *pc__fam(struct pc_state *st, const char *name, bool create)
{
	for (int i = 0; i < st->n_fam; i++)
		if (strcmp(st->fam[i].name, name) == 0)
			return &st->fam[i];
	if (!create || st->n_fam == PC_MAX_FAM)
		return NULL;
	struct pc_fam *f = &st->fam[st->n_fam++];
	memset(f, 0, sizeof(*f));
	snprintf(f->name, sizeof(f->name), "%s", name);
	return f;
}

static bool pc__value(const char *s, double *v, const char **end)
{
	if (strncmp(s, "NaN", 3) == 0) { *v = NAN; *end = s + 3; return true; }
	if (strncmp(s, "+Inf", 4) == 0) { *v = INFINITY; *end = s + 4; return true; }
	if (strncmp(s, "-Inf", 4) == 0) { *v = -INFINITY; *end = s + 4; return true; }
	char *e;
	if (!(isdigit((unsigned char)*s) || *s == '-' || *s == '+' || *s == '.'))
		return false;
	*v = strtod(s, &e);
	if (e == s)
		return false;
	*end = e;
	return true;
}

/* Make `switch to family f` legal: families are contiguous groups. */
static int pc__enter(struct pc_state *st, int idx, int line, char *err, size_t n)
{
	if (st->cur == idx)
		return 0;
	if (st->fam[idx].closed)
		return pc__fail(err, n, line, "family appears in two separate groups");
	if (st->cur >= 0)
		st->fam[st->cur].closed = true;
	st->cur = idx;
	return 0;
}

static int pc__hist_end(struct pc_state *st, int line, char *err, size_t n)
{
	if (st->hkey[0] && !st->have_inf)
		return pc__fail(err, n, line, "histogram without le=\"+Inf\" bucket");
	st->hkey[0] = '\0';
	return 0;
}

static int prom_check(const char *text, char *err, size_t errlen)
{
	struct pc_state *st = calloc(1, sizeof(*st));
	int line = 0, rc = 0;
	const char *p = text;

	if (!st)
		return pc__fail(err, errlen, 0, "out of memory");
	st->series = calloc(PC_MAX_SERIES, sizeof(*st->series));
	st->cur = -1;
	if (!st->series) {
		free(st);
		return pc__fail(err, errlen, 0, "out of memory");
	}
	if (!*text) {
		rc = pc__fail(err, errlen, 0, "empty exposition");
		goto out;
	}
	while (*p && rc == 0) {
		const char *nl = strchr(p, '\n');
		char buf[1024], name[128];
		line++;
		if (!nl) {
			rc = pc__fail(err, errlen, line, "last line lacks a newline");
			break;
		}
		size_t len = (size_t)(nl - p);
		if (len >= sizeof(buf)) {
			rc = pc__fail(err, errlen, line, "line too long");
			break;
		}
		memcpy(buf, p, len);
		buf[len] = '\0';
		p = nl + 1;
		const char *s = buf;
		if (len == 0) {
			rc = pc__fail(err, errlen, line, "empty line");
			break;
		}
		if (s[0] == '#') {
			bool help = strncmp(s, "# HELP ", 7) == 0, type = strncmp(s, "# TYPE ", 7) == 0;
			if (!help && !type)
				continue;   /* plain comment */
			s += 7;
			if (!pc__name(&s, name, sizeof(name), true) || (*s != ' ' && !(help && !*s))) {
				rc = pc__fail(err, errlen, line, "bad metric name in HELP/TYPE");
				break;
			}
			struct pc_fam *f = pc__fam(st, name, true);
			if (!f) {
				rc = pc__fail(err, errlen, line, "too many families");
				break;
			}
			if ((rc = pc__enter(st, (int)(f - st->fam), line, err, errlen)) != 0)
				break;
			if (help) {
				if (f->help) {
					rc = pc__fail(err, errlen, line, "second HELP for a family");
					break;
				}
				for (const char *q = s; *q; q++)
					if (*q == '\\' && q[1] != '\\' && q[1] != 'n') {
						rc = pc__fail(err, errlen, line, "bad escape in HELP");
						break;
					} else if (*q == '\\') {
						q++;
					}
				f->help = true;
			} else {
				s++;
				if (f->typed) {
					rc = pc__fail(err, errlen, line, "second TYPE for a family");
					break;
				}
				if (strcmp(s, "counter") && strcmp(s, "gauge") && strcmp(s, "histogram") &&
				    strcmp(s, "summary") && strcmp(s, "untyped")) {
					rc = pc__fail(err, errlen, line, "unknown TYPE");
					break;
				}
				snprintf(f->type, sizeof(f->type), "%s", s);
				f->typed = true;
			}
			continue;
		}
		/* sample */
		if (!pc__name(&s, name, sizeof(name), true)) {
			rc = pc__fail(err, errlen, line, "bad metric name");
			break;
		}
		char labels[512] = "", le[64] = "";
		size_t ln = 0;
		if (*s == '{') {
			s++;
			while (*s != '}') {
				char lname[128];
				const char *ls = s;
				if (!pc__name(&s, lname, sizeof(lname), false) || *s++ != '=' || *s++ != '"') {
					rc = pc__fail(err, errlen, line, "bad label");
					break;
				}
				const char *vs = s;
				while (*s && *s != '"') {
					if (*s == '\\') {
						s++;
						if (*s != '\\' && *s != '"' && *s != 'n') {
							rc = pc__fail(err, errlen, line, "bad escape in label value");
							break;
						}
					}
					s++;
				}
				if (rc || *s != '"') {
					if (!rc)
						rc = pc__fail(err, errlen, line, "unterminated label value");
					break;
				}
				if (strcmp(lname, "le") == 0) {
					snprintf(le, sizeof(le), "%.*s", (int)(s - vs), vs);
				} else {
					ln += (size_t)snprintf(labels + ln, sizeof(labels) - ln, "%.*s,",
							       (int)(s + 1 - ls), ls);
					if (ln >= sizeof(labels)) {
						rc = pc__fail(err, errlen, line, "labels too long");
						break;
					}
				}
				s++;
				if (*s == ',')
					s++;
				else if (*s != '}') {
					rc = pc__fail(err, errlen, line, "expected , or } in labels");
					break;
				}
			}
			if (rc)
				break;
			s++;
		}
		double v;
		const char *e;
		if (*s++ != ' ' || !pc__value(s, &v, &e) || (*e && *e != ' ')) {
			rc = pc__fail(err, errlen, line, "bad sample value");
			break;
		}
		if (*e == ' ') {   /* optional timestamp: an integer */
			char *te;
			strtoll(e + 1, &te, 10);
			if (te == e + 1 || *te) {
				rc = pc__fail(err, errlen, line, "bad timestamp");
				break;
			}
		}
		/* family of the sample */
		char fname[128];
		snprintf(fname, sizeof(fname), "%s", name);
		struct pc_fam *f = pc__fam(st, fname, false);
		const char *suffix = "";
		static const char *const sfx[] = {"_bucket", "_sum", "_count"};
		for (unsigned i = 0; !f && i < 3; i++) {
			size_t nl2 = strlen(name), sl = strlen(sfx[i]);
			if (nl2 > sl && strcmp(name + nl2 - sl, sfx[i]) == 0) {
				snprintf(fname, sizeof(fname), "%.*s", (int)(nl2 - sl), name);
				struct pc_fam *g = pc__fam(st, fname, false);
				if (g && (strcmp(g->type, "histogram") == 0 || strcmp(g->type, "summary") == 0)) {
					f = g;
					suffix = sfx[i];
				}
			}
		}
		if (!f || !f->typed) {
			rc = pc__fail(err, errlen, line, "sample before its TYPE line");
			break;
		}
		if ((rc = pc__enter(st, (int)(f - st->fam), line, err, errlen)) != 0)
			break;
		bool hist = strcmp(f->type, "histogram") == 0;
		if (strcmp(f->type, "counter") == 0 && !(v >= 0)) {
			rc = pc__fail(err, errlen, line, "counter is negative or NaN");
			break;
		}
		if (le[0] && !(hist && strcmp(suffix, "_bucket") == 0)) {
			rc = pc__fail(err, errlen, line, "le label outside a histogram bucket");
			break;
		}
		if (hist) {
			char key[256];
			snprintf(key, sizeof(key), "%s|%s", fname, labels);
			if (strcmp(suffix, "_bucket") == 0) {
				double lev;
				const char *le_end;
				if (!le[0] || !pc__value(le, &lev, &le_end) || *le_end) {
					rc = pc__fail(err, errlen, line, "bucket without a numeric le");
					break;
				}
				if (strcmp(key, st->hkey) != 0) {
					if ((rc = pc__hist_end(st, line, err, errlen)) != 0)
						break;
					snprintf(st->hkey, sizeof(st->hkey), "%s", key);
					st->last_le = -INFINITY;
					st->last_cum = 0;
					st->have_inf = false;
				}
				if (!(lev > st->last_le) || v < st->last_cum) {
					rc = pc__fail(err, errlen, line, "buckets not increasing/cumulative");
					break;
				}
				st->last_le = lev;
				st->last_cum = v;
				if (isinf(lev)) {
					st->have_inf = true;
					st->inf_cum = v;
				}
			} else if (strcmp(suffix, "_count") == 0) {
				if (strcmp(key, st->hkey) != 0 || !st->have_inf || st->inf_cum != v) {
					rc = pc__fail(err, errlen, line, "_count differs from the +Inf bucket");
					break;
				}
			} else if (strcmp(suffix, "") == 0) {
				rc = pc__fail(err, errlen, line, "histogram sample without suffix");
				break;
			}
		}
		/* duplicate series */
		char id[256];
		snprintf(id, sizeof(id), "%s{%s}%s", name, labels, le);
		for (int i = 0; i < st->n_series && rc == 0; i++)
			if (strcmp(st->series[i], id) == 0)
				rc = pc__fail(err, errlen, line, "duplicate series");
		if (rc)
			break;
		if (st->n_series < PC_MAX_SERIES)
			snprintf(st->series[st->n_series++], 256, "%s", id);
	}
	if (rc == 0)
		rc = pc__hist_end(st, line, err, errlen);
out:
	free(st->series);
	free(st);
	return rc;
}

#endif
