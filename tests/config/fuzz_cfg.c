/* libFuzzer entry point for the config loader: `make fuzz-config`
 * (clang -fsanitize=fuzzer,address,undefined; FUZZ_SECS=30 by default,
 * seeded with config/examples and tests/config/data).
 * The input is an INI text. Every text either loads, or is refused with a
 * message; one that loads must survive the dump: cfg_dump's output loads
 * again, and dumps to the same text (the round trip `zbmd check-config`
 * promises). Anything else aborts, and libFuzzer keeps the input. */
#include "zbmd/common.h"
#include "zbmd/config.h"
#include "round_trip.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *dump(const struct zb_config *c)
{
	char *s = cfg_dump_text(c);

	if (!s)
		abort();
	return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	static struct zb_config c, c2;
	struct cfg_error e, e2;
	char *t = malloc(n + 1);

	if (!t)
		return 0;
	memcpy(t, d, n);
	t[n] = '\0';
	memset(&e, 0, sizeof(e));
	int rc = cfg_load_string(&c, t, "fz.ini", &e);
	if (rc == 0) {
		char *a = dump(&c);
		memset(&e2, 0, sizeof(e2));
		if (cfg_load_string(&c2, a, "fz.ini", &e2) != 0) {
			fprintf(stderr, "the dump does not load: %s\n--- input\n%s\n"
				"--- dump\n%s\n", e2.msg, t, a);
			abort();
		}
		char *b = dump(&c2);
		if (strcmp(a, b) != 0) {
			fprintf(stderr, "the dump reads back differently\n--- input\n"
				"%s\n--- dump\n%s\n--- its dump\n%s\n", t, a, b);
			abort();
		}
		free(a);
		free(b);
	} else if (rc != -ENOMEM && e.msg[0] == '\0') {
		fprintf(stderr, "refused (%d) without a message\n", rc);
		abort();
	}
	free(t);
	return 0;
}
