/* config/internal.h — the schema table and helpers shared by config/ sources.
 *
 * One row per key (STYLE.md item 10): {section, key, type, min, max, default,
 * offset, doc}. parse.c turns text into values, load.c drives inih and the
 * validation, dump.c prints the effective configuration and docs/config.md —
 * all from cfg__keys[].
 */
#ifndef ZBMD_CONFIG_INTERNAL_H
#define ZBMD_CONFIG_INTERNAL_H

#include "zbmd/config.h"

#include <stdbool.h>
#include <stddef.h>

enum cfg__type {
	CFG__UINT,      /* unsigned integer, field of `size` bytes, [min, max] */
	CFG__DOUBLE,    /* double, [min, max] */
	CFG__BOOL,      /* true/false, yes/no, on/off, 1/0 */
	CFG__STRING,    /* char[size]; may be "" only with CFG__EMPTY_OK */
	CFG__ENUM,      /* one of names[]; stored as int */
	CFG__MAC,       /* uint8_t[6]; aux = offset of a bool "was set" (or none) */
	CFG__IPV4,      /* uint32_t (network order); aux = offset of prefix_len */
	CFG__PCI,       /* char[size], canonical "dddd:bb:dd.f" */
	CFG__LCORES,    /* eal.lcores + eal.lcore_list/lcore_count */
	CFG__HOSTPORT,  /* char[size] "ip:port" (IPv4 host: what listeners take) */
	CFG__SEEDS,     /* cluster.seeds/seed_count: comma-separated ip:port */
	CFG__VDEV,      /* char[size] DPDK vdev "driver[,k=v...]" */
	CFG__TYPE_COUNT
};

/* Longest line, newline excluded: inih reads through our reader into a heap
 * buffer of CFG__LINE_MAX + 2 bytes (line, '\n', NUL). */
#define CFG__LINE_MAX 4094
/* The most a config input may hold (a file, stdin): past it the load stops
 * with an error, whatever the input (/dev/zero). */
#define CFG__INPUT_MAX (64u << 20)

/* Row flags. */
#define CFG__REQUIRED   0x01u  /* must be written in the file */
#define CFG__POW2       0x02u  /* uint: a power of two */
#define CFG__EMPTY_OK   0x04u  /* string/hostport/pci/vdev: "" allowed */
#define CFG__HAS_AUX    0x08u  /* aux is meaningful */
#define CFG__NAME_CHARS 0x10u  /* string: only [A-Za-z0-9_.-] */
#define CFG__AUTO       0x20u  /* uint (4 bytes): `auto` too, stored as CFG_AUTO */
#define CFG__HOST       0x40u  /* ipv4: a host's, not 0.0.0.0 nor 255.255.255.255
				* (checked by the loader: the default may be 0) */

/* Section indices, in the order they are dumped and documented. */
enum {
	S_NODE, S_EAL, S_DATAPLANE, S_PORT, S_PEER, S_ACTORS, S_TRANSPORT,
	S_FAULT, S_COLL, S_RDMA, S_GPU, S_CLUSTER, S_CONTROL, S_METRICS,
	S_COUNT
};

/* A section. Indexed sections ([port.N], [peer.N]) store their keys in
 * element N of an array of structs; their rows' offsets are relative to that
 * struct. */
struct cfg__section {
	const char *name;       /* "eal", "port" */
	bool indexed;           /* written as [name.N] */
	unsigned count;         /* indexed: N < count */
	size_t array_offset;    /* indexed: offset of element 0 in zb_config */
	size_t elem_size;       /* indexed: sizeof one element */
	size_t present_offset;  /* indexed: offset of `bool present` in elem */
	const char *doc;
};

struct cfg__key {
	unsigned section;       /* index into cfg__sections */
	const char *key;
	enum cfg__type type;
	double min, max;        /* UINT, DOUBLE: inclusive bounds */
	const char *def;        /* default, written as in an INI file */
	size_t offset;          /* of the field (in zb_config or the element) */
	size_t size;            /* sizeof the field */
	const char *doc;
	unsigned flags;
	const char *const *names; /* ENUM: NULL-terminated, index = value */
	size_t aux;             /* see enum cfg__type (with CFG__HAS_AUX) */
};

extern const struct cfg__section cfg__sections[];
extern const unsigned cfg__nsections;
extern const struct cfg__key cfg__keys[];
extern const unsigned cfg__nkeys;

/* Section index by name (the part before any ".N"), or -1. */
int cfg__section_find(const char *name, size_t len);
/* Key row index in a section, or -1. */
int cfg__key_find(unsigned section, const char *key);

/* Base address of a row's storage: the config itself, or element idx of an
 * indexed section's array. */
void *cfg__base(struct zb_config *cfg, const struct cfg__key *k, unsigned idx);
const void *cfg__cbase(const struct zb_config *cfg, const struct cfg__key *k,
		       unsigned idx);

/* Parse text for row k and store it at base (see cfg__base). Returns 0, or
 * -EINVAL with why (a phrase: "... (expected ...)") filled in; nothing is
 * stored on error. */
int cfg__store(const struct cfg__key *k, void *base, const char *text,
	       char *why, size_t whylen);

/* Format the value of row k at base as INI text. */
void cfg__format(const struct cfg__key *k, const void *base, char *out,
		 size_t len);

/* "an integer 1..65535", "one of poll, adaptive", ... for messages and docs. */
void cfg__expect(const struct cfg__key *k, char *out, size_t len);

/* A value or name quoted in a diagnostic: s (n bytes) itself when it is
 * short, else its first CFG__ELIDE_KEEP characters and "...", so that the
 * reason and the expectation after it always fit the message. Returns buf
 * (CFG__ELIDE_BUF bytes). */
#define CFG__ELIDE_KEEP 40
#define CFG__ELIDE_MAX  64
#define CFG__ELIDE_BUF  (CFG__ELIDE_MAX + 4)
const char *cfg__elide(const char *s, size_t n, char *buf);

/* Lower-level parsers with a reason on failure. */
int cfg__parse_lcores(const char *s, uint16_t *list, uint16_t max,
		      uint16_t *count, char *why, size_t whylen);
/* Decimal or 0x hex digits only: 0, -EINVAL (not such digits), -ERANGE
 * (past 2^64 - 1). */
int cfg__parse_u64(const char *s, uint64_t *v);

#endif /* ZBMD_CONFIG_INTERNAL_H */
