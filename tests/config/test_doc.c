/* tests/config/test_doc.c — code and documentation do not drift:
 *  - every key of the schema table is accepted by the parser (not "unknown
 *    key") and is a row of its section's table in docs/config.md;
 *  - every key row in docs/config.md names a key the parser accepts;
 *  - every section of the table has a heading in docs/config.md.
 * (tests/config/test_doc.sh also checks that the committed file is exactly
 * what `zbmd config-doc` generates.) */
#include "tap.h"
#include "../../config/internal.h"
#include "zbmd/common.h"

#include <stdlib.h>
#include <string.h>

static char *read_doc(void)
{
	const char *root = getenv("ZBMD_ROOT");
	char path[512];
	FILE *f;
	char *buf;
	long n;

	snprintf(path, sizeof(path), "%s/docs/config.md", root ? root : ".");
	f = fopen(path, "r");
	if (f == NULL)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = calloc(1, (size_t)n + 1);
	if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

/* The part of doc under "## [name]" / "## [name.N]", up to the next "## ". */
static char *section_text(const char *doc, const struct cfg__section *s)
{
	char head[80];
	const char *start, *end;

	snprintf(head, sizeof(head), "\n## [%s%s]\n", s->name,
		 s->indexed ? ".N" : "");
	start = strstr(doc, head);
	if (start == NULL)
		return NULL;
	start += strlen(head);
	end = strstr(start, "\n## ");
	if (end == NULL)
		end = start + strlen(start);
	return strndup(start, (size_t)(end - start));
}

/* Does the parser know [sec] key? Loads a file with only that key. */
static bool parser_accepts(const char *sec, bool indexed, const char *key)
{
	static struct zb_config cfg;
	static struct cfg_error err;
	char text[512];

	snprintf(text, sizeof(text), "[%s%s]\n%s = x\n", sec,
		 indexed ? ".0" : "", key);
	cfg_load_string(&cfg, text, "doc", &err);
	return strstr(err.list, "unknown key") == NULL &&
	       strstr(err.list, "unknown section") == NULL;
}

int main(void)
{
	char *doc = read_doc();
	unsigned missing = 0, undocumented_sections = 0, unknown_rows = 0;

	if (doc == NULL) {
		tap_plan(1);
		ok(0, "docs/config.md readable (set ZBMD_ROOT)");
		return tap_done();
	}
	tap_plan(cfg__nkeys + 3);
	for (unsigned i = 0; i < cfg__nsections; i++) {
		char *t = section_text(doc, &cfg__sections[i]);

		if (t == NULL) {
			tap_diag("no heading for [%s]", cfg__sections[i].name);
			undocumented_sections++;
		}
		free(t);
	}
	ok(undocumented_sections == 0, "every section has a heading");

	for (unsigned k = 0; k < cfg__nkeys; k++) {
		const struct cfg__key *key = &cfg__keys[k];
		const struct cfg__section *s = &cfg__sections[key->section];
		char *t = section_text(doc, s);
		char row[96];
		bool documented;

		snprintf(row, sizeof(row), "| `%s` |", key->key);
		documented = t != NULL && strstr(t, row) != NULL;
		missing += !documented;
		ok(documented && parser_accepts(s->name, s->indexed, key->key),
		   "[%s] %s: accepted by the parser and documented", s->name,
		   key->key);
		free(t);
	}
	ok(missing == 0, "no key of the table is missing from docs/config.md");

	/* The reverse: every documented key row is a key the parser takes. */
	for (unsigned i = 0; i < cfg__nsections; i++) {
		const struct cfg__section *s = &cfg__sections[i];
		char *t = section_text(doc, s);

		for (char *p = t ? strstr(t, "\n| `") : NULL; p;
		     p = strstr(p + 1, "\n| `")) {
			char key[64];

			if (sscanf(p, "\n| `%63[^`]`", key) != 1)
				continue;
			if (!parser_accepts(s->name, s->indexed, key)) {
				tap_diag("documented [%s] %s is not accepted",
					 s->name, key);
				unknown_rows++;
			}
		}
		free(t);
	}
	ok(unknown_rows == 0, "every documented key is accepted by the parser");
	free(doc);
	return tap_done();
}
