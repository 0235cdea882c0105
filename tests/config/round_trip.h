/* tests/config/round_trip.h — what `zbmd check-config` promises of its
 * output, for the config tests: cfg_dump's text of a loaded config loads
 * again into the same struct. cfg_round_trips() needs tap.h included first;
 * fuzz_cfg.c (libFuzzer, no TAP) uses cfg_dump_text() alone. */
#ifndef ZBMD_TESTS_CONFIG_ROUND_TRIP_H
#define ZBMD_TESTS_CONFIG_ROUND_TRIP_H

#include "zbmd/config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cfg_dump's text of cfg (malloc'd; the caller frees it), or NULL. */
static inline char *cfg_dump_text(const struct zb_config *cfg)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	if (!f)
		return NULL;
	cfg_dump(cfg, f);
	if (fclose(f) != 0) {
		free(text);
		return NULL;
	}
	return text;
}

#ifdef ZBMD_TAP_H
/* 1 when cfg's dump loads again into the same struct; else 0, said why. */
static inline int cfg_round_trips(const struct zb_config *cfg, const char *what)
{
	static struct zb_config again;
	static struct cfg_error err;
	char *text = cfg_dump_text(cfg);
	int rc = text ? cfg_load_string(&again, text, cfg->path, &err) : -ENOMEM;
	int same = rc == 0 && memcmp(cfg, &again, sizeof(again)) == 0;

	if (rc != 0)
		tap_diag("%s: the dump does not load: %s", what,
			 text ? err.msg : "no memory for it");
	free(text);
	return same;
}
#endif

#endif
