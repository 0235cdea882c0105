/* config/parse.c — text to typed values and back, for every row type.
 *
 * Parsers are strict: the whole value must be consumed, numbers are decimal
 * (or 0x hex for integers), no sign, no surrounding junk. inih has already
 * stripped surrounding whitespace and inline comments.
 */
#include "internal.h"

#include "zbmd/common.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <inttypes.h>
#include <string.h>
#include <strings.h>

static void why_set(char *why, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void why_set(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (why == NULL || len == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
}

const char *cfg__elide(const char *s, size_t n, char *buf)
{
	size_t keep = CFG__ELIDE_KEEP;

	ZB_ASSERT(s != NULL && buf != NULL);
	if (n <= CFG__ELIDE_MAX) {
		memcpy(buf, s, n);
		buf[n] = '\0';
		return buf;
	}
	/* not inside a UTF-8 sequence */
	while (keep > 0 && ((unsigned char)s[keep] & 0xc0) == 0x80)
		keep--;
	memcpy(buf, s, keep);
	memcpy(buf + keep, "...", 4);
	return buf;
}

/* cfg__elide of a whole string, into a compound literal's buffer */
#define ELIDE(s) cfg__elide((s), strlen(s), (char[CFG__ELIDE_BUF]){0})

int cfg__parse_u64(const char *s, uint64_t *v)
{
	int base = 10;
	char *end;
	unsigned long long x;

	ZB_ASSERT(s != NULL);
	ZB_ASSERT(v != NULL);
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		base = 16;
		s += 2;
	}
	if (!isxdigit((unsigned char)s[0]) ||
	    (base == 10 && !isdigit((unsigned char)s[0])))
		return -EINVAL;
	if (base == 16 && (s[1] == 'x' || s[1] == 'X'))
		return -EINVAL;   /* strtoull would take "0x0x10" as 16 */
	errno = 0;
	x = strtoull(s, &end, base);
	if (*end != '\0' || (errno != 0 && errno != ERANGE))
		return -EINVAL;
	if (errno == ERANGE)
		return -ERANGE; /* digits only, past 2^64 - 1 */
	*v = x;
	return 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (char)tolower((unsigned char)c);
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

int cfg_parse_mac(const char *s, uint8_t mac[6])
{
	uint8_t m[6];
	char sep;

	if (s == NULL || mac == NULL || strlen(s) != 17)
		return -EINVAL;
	sep = s[2];
	if (sep != ':' && sep != '-')
		return -EINVAL;
	for (int i = 0; i < 6; i++) {
		int hi = hexval(s[3 * i]), lo = hexval(s[3 * i + 1]);

		if (hi < 0 || lo < 0)
			return -EINVAL;
		if (i < 5 && s[3 * i + 2] != sep)
			return -EINVAL;
		m[i] = (uint8_t)(hi << 4 | lo);
	}
	memcpy(mac, m, 6);
	return 0;
}

/* Decimal 0..max with 1..digits digits and no leading zero; advances *p. */
static int parse_dec(const char **p, unsigned max, unsigned digits,
		     unsigned *out)
{
	const char *s = *p;
	unsigned v = 0, n = 0;

	while (isdigit((unsigned char)s[n]) && n <= digits) {
		v = v * 10 + (unsigned)(s[n] - '0');
		n++;
	}
	if (n == 0 || n > digits || (n > 1 && s[0] == '0') || v > max)
		return -EINVAL;
	*p = s + n;
	*out = v;
	return 0;
}

int cfg_parse_ipv4(const char *s, uint32_t *ip_be, uint8_t *prefix_len)
{
	unsigned oct[4], plen = 32;
	const char *p = s;

	if (s == NULL || ip_be == NULL)
		return -EINVAL;
	for (int i = 0; i < 4; i++) {
		if (parse_dec(&p, 255, 3, &oct[i]) != 0)
			return -EINVAL;
		if (i < 3 && *p++ != '.')
			return -EINVAL;
	}
	if (*p == '/') {
		if (prefix_len == NULL)
			return -EINVAL;
		p++;
		if (parse_dec(&p, 32, 2, &plen) != 0)
			return -EINVAL;
	}
	if (*p != '\0')
		return -EINVAL;
	/* Network byte order: the first octet is the lowest-addressed byte. */
	{
		uint8_t b[4] = {(uint8_t)oct[0], (uint8_t)oct[1],
				(uint8_t)oct[2], (uint8_t)oct[3]};
		memcpy(ip_be, b, 4);
	}
	if (prefix_len != NULL)
		*prefix_len = (uint8_t)plen;
	return 0;
}

static void format_ipv4(uint32_t ip_be, char *out, size_t len)
{
	uint8_t b[4];

	memcpy(b, &ip_be, 4);
	snprintf(out, len, "%u.%u.%u.%u", b[0], b[1], b[2], b[3]);
}

int cfg__parse_lcores(const char *s, uint16_t *list, uint16_t max,
		      uint16_t *count, char *why, size_t whylen)
{
	uint8_t seen[CFG_MAX_LCORES] = {0};
	uint16_t tmp[CFG_MAX_LCORES];
	uint16_t n = 0;
	const char *p = s;

	ZB_ASSERT(s != NULL && list != NULL && count != NULL);
	if (max > CFG_MAX_LCORES)
		max = CFG_MAX_LCORES;
	for (;;) {
		unsigned lo, hi;

		while (*p == ' ' || *p == '\t')
			p++;
		if (parse_dec(&p, 99999, 5, &lo) != 0) {
			if (*p == '\0')
				why_set(why, whylen, "a core id is missing "
					"at the end");
			else
				why_set(why, whylen, "'%s' is not a core id",
					ELIDE(p));
			return -EINVAL;
		}
		hi = lo;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '-') {
			p++;
			while (*p == ' ' || *p == '\t')
				p++;
			if (parse_dec(&p, 99999, 5, &hi) != 0) {
				if (*p >= '0' && *p <= '9')
					why_set(why, whylen, "'%s' is not a "
						"core id", ELIDE(p));
				else
					why_set(why, whylen, "a range has no "
						"end after %u-", lo);
				return -EINVAL;
			}
			if (hi < lo) {
				why_set(why, whylen,
					"range %u-%u runs backwards", lo, hi);
				return -EINVAL;
			}
		}
		if (hi >= CFG_MAX_LCORES) {
			why_set(why, whylen, "core %u is beyond %u", hi,
				CFG_MAX_LCORES - 1);
			return -EINVAL;
		}
		for (unsigned c = lo; c <= hi; c++) {
			if (seen[c]) {
				why_set(why, whylen, "core %u is listed twice",
					c);
				return -EINVAL;
			}
			if (n >= max) {
				why_set(why, whylen, "more than %u cores",
					(unsigned)max);
				return -EINVAL;
			}
			seen[c] = 1;
			tmp[n++] = (uint16_t)c;
		}
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '\0')
			break;
		if (*p != ',') {
			why_set(why, whylen, "unexpected \"%s\"", ELIDE(p));
			return -EINVAL;
		}
		p++;
	}
	ZB_ASSERT(n >= 1);
	memcpy(list, tmp, n * sizeof(tmp[0]));
	*count = n;
	return 0;
}

int cfg_parse_lcores(const char *s, uint16_t *list, uint16_t max,
		     uint16_t *count)
{
	if (s == NULL || list == NULL || count == NULL || max == 0)
		return -EINVAL;
	return cfg__parse_lcores(s, list, max, count, NULL, 0);
}

/* Exactly n hex digits; advances *p. */
static int parse_hex(const char **p, unsigned n, unsigned *out)
{
	unsigned v = 0;

	for (unsigned i = 0; i < n; i++) {
		int h = hexval((*p)[i]);

		if (h < 0)
			return -EINVAL;
		v = v << 4 | (unsigned)h;
	}
	*p += n;
	*out = v;
	return 0;
}

int cfg_parse_pci(const char *s, char *canon, size_t len)
{
	unsigned dom = 0, bus, dev, fn;
	const char *p = s;

	if (s == NULL || canon == NULL || len < 13)
		return -EINVAL;
	if (strlen(s) == 12) {
		if (parse_hex(&p, 4, &dom) != 0 || *p++ != ':')
			return -EINVAL;
	} else if (strlen(s) != 7) {
		return -EINVAL;
	}
	if (parse_hex(&p, 2, &bus) != 0 || *p++ != ':' ||
	    parse_hex(&p, 2, &dev) != 0 || *p++ != '.' || *p < '0' ||
	    *p > '7' || p[1] != '\0')
		return -EINVAL;
	fn = (unsigned)(*p - '0');
	if (dev > 0x1f)
		return -EINVAL;
	snprintf(canon, len, "%04x:%02x:%02x.%u", dom, bus, dev, fn);
	return 0;
}

static bool is_dns_name(const char *s, size_t n)
{
	if (n == 0 || n > 253)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '-' &&
		    s[i] != '.')
			return false;
	return s[0] != '-' && s[0] != '.';
}

int cfg_parse_hostport(const char *s, char *host, size_t hostlen,
		       uint16_t *port)
{
	const char *colon, *h = s;
	size_t hn;
	unsigned pv;
	char buf[256];
	uint32_t ip;

	if (s == NULL || host == NULL || port == NULL)
		return -EINVAL;
	colon = strrchr(s, ':');
	if (colon == NULL)
		return -EINVAL;
	hn = (size_t)(colon - s);
	if (hn >= sizeof(buf))
		return -EINVAL;
	if (s[0] == '[') { /* "[IPv6]:port": hex digits, ':' and '.' inside */
		if (hn < 3 || s[hn - 1] != ']')
			return -EINVAL;
		h = s + 1;
		hn -= 2;
		for (size_t i = 0; i < hn; i++)
			if (!isxdigit((unsigned char)h[i]) && h[i] != ':' &&
			    h[i] != '.')
				return -EINVAL;
	} else {
		memcpy(buf, s, hn);
		buf[hn] = '\0';
		if (strchr(buf, ':') != NULL)
			return -EINVAL;
		/* All digits and dots: must be a valid IPv4 address. */
		if (strspn(buf, "0123456789.") == hn) {
			if (cfg_parse_ipv4(buf, &ip, NULL) != 0)
				return -EINVAL;
		} else if (!is_dns_name(buf, hn)) {
			return -EINVAL;
		}
	}
	{
		const char *p = colon + 1;

		if (parse_dec(&p, 65535, 5, &pv) != 0 || *p != '\0' || pv == 0)
			return -EINVAL;
	}
	if (hn + 1 > hostlen)
		return -EINVAL;
	memcpy(host, h, hn);
	host[hn] = '\0';
	*port = (uint16_t)pv;
	return 0;
}

/* "a.b.c.d:port": what the control plane and HTTP listeners take
 * (host:port with an IPv4 host; no names, no IPv6). */
static int parse_ip_port(const char *s)
{
	char host[CFG_STR];
	uint16_t port;
	uint32_t ip;

	if (cfg_parse_hostport(s, host, sizeof(host), &port) != 0 ||
	    cfg_parse_ipv4(host, &ip, NULL) != 0)
		return -EINVAL;
	return 0;
}

static bool parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = {"true", "yes", "on", "1"};
	static const char *const no[] = {"false", "no", "off", "0"};

	for (size_t i = 0; i < ZB_ARRAY_LEN(yes); i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*out = true;
			return true;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*out = false;
			return true;
		}
	}
	return false;
}

/* Double without inf/nan and without trailing junk. */
static int parse_double(const char *s, double *out)
{
	char *end;
	double v;

	if (*s == '\0' || isspace((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (*end != '\0' || end == s || isnan(v) ||
	    (!isfinite(v) && errno != ERANGE))
		return -EINVAL;   /* junk, "nan", "inf" */
	if (errno == ERANGE)
		return -ERANGE;   /* 1e400, 1e-400: past a double's range */
	*out = v;
	return 0;
}

static void store_uint(void *p, size_t size, uint64_t v)
{
	switch (size) {
	case 1: *(uint8_t *)p = (uint8_t)v; break;
	case 2: *(uint16_t *)p = (uint16_t)v; break;
	case 4: *(uint32_t *)p = (uint32_t)v; break;
	case 8: *(uint64_t *)p = v; break;
	default: ZB_ASSERT(!"unsupported integer size");
	}
}

static uint64_t load_uint(const void *p, size_t size)
{
	switch (size) {
	case 1: return *(const uint8_t *)p;
	case 2: return *(const uint16_t *)p;
	case 4: return *(const uint32_t *)p;
	case 8: return *(const uint64_t *)p;
	default: ZB_ASSERT(!"unsupported integer size");
	}
	return 0;
}

/* Copy a string field, zero-filling the rest (so loaded configs compare
 * equal byte for byte). */
static int store_str(void *field, size_t size, const char *s)
{
	size_t n = strlen(s);

	if (n >= size)
		return -EINVAL;
	memset(field, 0, size);
	memcpy(field, s, n);
	return 0;
}

static bool name_chars_ok(const char *s)
{
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-' &&
		    *s != '.')
			return false;
	return true;
}

static int store_seeds(void *base, const char *text, char *why, size_t wl)
{
	struct zb_config *cfg = base;
	char seeds[CFG_MAX_SEEDS][CFG_STR];
	uint16_t n = 0;
	const char *p = text;

	if (*p == '\0')
		goto done;
	for (;;) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		char item[CFG_STR];

		while (len > 0 && (*p == ' ' || *p == '\t')) {
			p++;
			len--;
		}
		while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
			len--;
		if (len >= sizeof(item) || n >= CFG_MAX_SEEDS) {
			why_set(why, wl, "%s (expected at most %u seeds, each "
				"ip:port)", len >= sizeof(item) ?
				"a seed is too long" : "too many seeds",
				CFG_MAX_SEEDS);
			return -EINVAL;
		}
		memcpy(item, p, len);
		item[len] = '\0';
		if (len == 0) {
			why_set(why, wl, "empty seed between commas (expected "
				"ip:port, ip:port)");
			return -EINVAL;
		}
		if (parse_ip_port(item) != 0) {
			why_set(why, wl, "seed '%s' is not ip:port "
				"(expected e.g. 10.0.0.1:7400)", ELIDE(item));
			return -EINVAL;
		}
		memset(seeds[n], 0, CFG_STR);
		memcpy(seeds[n++], item, len);
		if (e == NULL)
			break;
		p = e + 1;
	}
done:
	memset(cfg->cluster.seeds, 0, sizeof(cfg->cluster.seeds));
	memcpy(cfg->cluster.seeds, seeds, (size_t)n * CFG_STR);
	cfg->cluster.seed_count = n;
	return 0;
}

void cfg__expect(const struct cfg__key *k, char *out, size_t len)
{
	ZB_ASSERT(k != NULL && out != NULL);
	switch (k->type) {
	case CFG__UINT: {
		char max[32];

		/* a double cannot hold 2^64 - 1: it reads 2^64 */
		if (k->max >= 18446744073709551615.0)
			snprintf(max, sizeof(max), "%" PRIu64, UINT64_MAX);
		else
			snprintf(max, sizeof(max), "%.0f", k->max);
		snprintf(out, len, "%s %.0f..%s%s",
			 k->flags & CFG__POW2 ? "a power of two"
					      : "an integer",
			 k->min, max, k->flags & CFG__AUTO ? " or auto" : "");
		break;
	}
	case CFG__DOUBLE:
		snprintf(out, len, "a number %g..%g", k->min, k->max);
		break;
	case CFG__BOOL:
		snprintf(out, len, "true/false, yes/no, on/off or 1/0");
		break;
	case CFG__STRING:
		snprintf(out, len, "%stext of at most %zu characters%s",
			 k->flags & CFG__EMPTY_OK ? "" : "non-empty ",
			 k->size - 1,
			 k->flags & CFG__NAME_CHARS ? " from A-Z a-z 0-9 _ . -, "
						      "not . or .."
						    : "");
		break;
	case CFG__ENUM: {
		size_t o = (size_t)snprintf(out, len, "one of");

		for (unsigned i = 0; k->names[i] && o < len; i++)
			o += (size_t)snprintf(out + o, len - o, "%s %s",
					      i ? "," : "", k->names[i]);
		break;
	}
	case CFG__MAC:
		snprintf(out, len, "a unicast MAC address like 02:00:00:00:00:01");
		break;
	case CFG__IPV4:
		snprintf(out, len, "an IPv4 %saddress like 10.0.0.1%s",
			 k->flags & CFG__HOST ? "host " : "",
			 k->flags & CFG__HAS_AUX ? " or 10.0.0.1/24" : "");
		break;
	case CFG__PCI:
		snprintf(out, len, "a PCI address like 0000:3b:00.0 or 3b:00.0");
		break;
	case CFG__LCORES:
		snprintf(out, len, "core ids and ranges like 0-3,5 (ids 0..%u)",
			 CFG_MAX_LCORES - 1);
		break;
	case CFG__HOSTPORT:
		snprintf(out, len, "ip:port like 10.0.0.1:7400%s",
			 k->flags & CFG__EMPTY_OK ? ", or \"\"" : "");
		break;
	case CFG__SEEDS:
		snprintf(out, len, "a comma-separated list of ip:port");
		break;
	case CFG__VDEV:
		snprintf(out, len, "a DPDK vdev like net_af_packet0,iface=eth0");
		break;
	default:
		ZB_ASSERT(!"unknown type");
	}
}

/* Remove one pair of surrounding double quotes, so "" means empty. */
static const char *unquote(const char *text, char *buf, size_t len)
{
	size_t n = strlen(text);

	if (n >= 2 && text[0] == '"' && text[n - 1] == '"' && n - 1 < len) {
		memcpy(buf, text + 1, n - 2);
		buf[n - 2] = '\0';
		return buf;
	}
	return text;
}

/* One store function per type: parse v (unquoted, non-empty unless the row
 * allows it) into the row's field at base. 0, or -EINVAL with why set. */
struct store_args {
	const struct cfg__key *k;
	void *base;
	char *field;
	const char *v;
	const char *expect;     /* cfg__expect() of the row */
	char *why;
	size_t wl;
};
typedef int (*store_fn)(const struct store_args *a);

static int bad(const struct store_args *a, const char *what)
{
	why_set(a->why, a->wl, "'%s' %s (expected %s)", ELIDE(a->v), what,
		a->expect);
	return -EINVAL;
}

static int store_text(const struct store_args *a, const char *text)
{
	if (store_str(a->field, a->k->size, text) != 0) {
		why_set(a->why, a->wl, "a value of %zu characters is too long "
			"(expected %s)", strlen(text), a->expect);
		return -EINVAL;
	}
	return 0;
}

static int st_uint(const struct store_args *a)
{
	uint64_t x;
	int rc;

	/* `auto` in any case, as enum values are */
	if ((a->k->flags & CFG__AUTO) && strcasecmp(a->v, "auto") == 0) {
		ZB_ASSERT(a->k->size == sizeof(uint32_t) && a->k->max < CFG_AUTO);
		store_uint(a->field, a->k->size, CFG_AUTO);
		return 0;
	}
	rc = cfg__parse_u64(a->v, &x);
	if (rc == -EINVAL)
		return bad(a, "is not an unsigned integer");
	if (rc == -ERANGE || (double)x < a->k->min || (double)x > a->k->max) {
		why_set(a->why, a->wl, "%s is out of range (expected %s)",
			ELIDE(a->v), a->expect);
		return -EINVAL;
	}
	if ((a->k->flags & CFG__POW2) && (x & (x - 1)) != 0) {
		why_set(a->why, a->wl, "%s is not a power of two (expected %s)",
			ELIDE(a->v), a->expect);
		return -EINVAL;
	}
	store_uint(a->field, a->k->size, x);
	return 0;
}

static int st_double(const struct store_args *a)
{
	double x;

	int rc = parse_double(a->v, &x);

	if (rc == -EINVAL)
		return bad(a, "is not a number");
	if (rc == -ERANGE || x < a->k->min || x > a->k->max) {
		why_set(a->why, a->wl, "%s is out of range (expected %s)",
			ELIDE(a->v), a->expect);
		return -EINVAL;
	}
	*(double *)a->field = x;
	return 0;
}

static int st_bool(const struct store_args *a)
{
	bool b;

	if (!parse_bool(a->v, &b))
		return bad(a, "is not a boolean");
	*(bool *)a->field = b;
	return 0;
}

static int st_string(const struct store_args *a)
{
	if ((a->k->flags & CFG__NAME_CHARS) && !name_chars_ok(a->v))
		return bad(a, "has characters not allowed");
	/* a name becomes a path component ([eal] file_prefix: DPDK's
	 * /var/run/dpdk/<prefix>): "." or ".." would name the directory
	 * itself or its parent */
	if ((a->k->flags & CFG__NAME_CHARS) &&
	    (!strcmp(a->v, ".") || !strcmp(a->v, "..")))
		return bad(a, "names a directory, not a name of its own");
	return store_text(a, a->v);
}

static int st_enum(const struct store_args *a)
{
	ZB_ASSERT(a->k->names != NULL);
	ZB_ASSERT(a->k->size == sizeof(int));
	for (int i = 0; a->k->names[i]; i++) {
		if (strcasecmp(a->v, a->k->names[i]) == 0) {
			*(int *)a->field = i;
			return 0;
		}
	}
	return bad(a, "is not allowed");
}

static int st_mac(const struct store_args *a)
{
	uint8_t mac[6];

	if (cfg_parse_mac(a->v, mac) != 0)
		return bad(a, "is not a MAC address");
	/* the low bit of the first octet: a group address (multicast,
	 * broadcast), which no port can take as its own nor a peer have */
	if (mac[0] & 1)
		return bad(a, "is a multicast or broadcast address");
	memcpy(a->field, mac, 6);
	if (a->k->flags & CFG__HAS_AUX) /* the "was set" flag */
		*(bool *)((char *)a->base + a->k->aux) =
			memcmp(mac, "\0\0\0\0\0\0", 6) != 0;
	return 0;
}

static int st_ipv4(const struct store_args *a)
{
	bool pfx = a->k->flags & CFG__HAS_AUX; /* aux: prefix_len */
	uint32_t ip;
	uint8_t plen = 32;

	if (cfg_parse_ipv4(a->v, &ip, pfx ? &plen : NULL) != 0)
		return bad(a, pfx ? "is not an IPv4 address[/prefix]"
				  : "is not an IPv4 address");
	*(uint32_t *)a->field = ip;
	if (pfx)
		*(uint8_t *)((char *)a->base + a->k->aux) = plen;
	return 0;
}

static int st_pci(const struct store_args *a)
{
	char canon[16];

	if (*a->v == '\0')
		return store_text(a, "");
	if (cfg_parse_pci(a->v, canon, sizeof(canon)) != 0)
		return bad(a, "is not a PCI address");
	return store_text(a, canon);
}

static int st_lcores(const struct store_args *a)
{
	struct zb_config *cfg = a->base;
	uint16_t list[CFG_MAX_LCORES], n;
	char reason[128];

	ZB_ASSERT(a->k->offset == offsetof(struct zb_config, eal.lcores));
	if (cfg__parse_lcores(a->v, list, CFG_MAX_LCORES, &n, reason,
			      sizeof(reason)) != 0) {
		why_set(a->why, a->wl, "'%s' is not a valid lcore list: %s "
			"(expected %s)", ELIDE(a->v), reason, a->expect);
		return -EINVAL;
	}
	if (store_text(a, a->v) != 0)
		return -EINVAL;
	memset(cfg->eal.lcore_list, 0, sizeof(cfg->eal.lcore_list));
	memcpy(cfg->eal.lcore_list, list, n * sizeof(list[0]));
	cfg->eal.lcore_count = n;
	return 0;
}

static int st_hostport(const struct store_args *a)
{
	if (*a->v != '\0' && parse_ip_port(a->v) != 0)
		return bad(a, "is not ip:port");
	return store_text(a, a->v);
}

static int st_seeds(const struct store_args *a)
{
	ZB_ASSERT(a->k->offset == offsetof(struct zb_config, cluster.seeds));
	return store_seeds(a->base, a->v, a->why, a->wl);
}

/* A vdev: a driver name (lower case, digits, '_'), then ",key=value"s. */
static int st_vdev(const struct store_args *a)
{
	size_t dn = strspn(a->v, "abcdefghijklmnopqrstuvwxyz0123456789_");

	if (*a->v != '\0' &&
	    (dn == 0 || (a->v[dn] != '\0' && a->v[dn] != ',') ||
	     strpbrk(a->v, " \t") != NULL))
		return bad(a, "is not a vdev");
	return store_text(a, a->v);
}

static const store_fn store_fns[CFG__TYPE_COUNT] = {
	[CFG__UINT] = st_uint,       [CFG__DOUBLE] = st_double,
	[CFG__BOOL] = st_bool,       [CFG__STRING] = st_string,
	[CFG__ENUM] = st_enum,       [CFG__MAC] = st_mac,
	[CFG__IPV4] = st_ipv4,       [CFG__PCI] = st_pci,
	[CFG__LCORES] = st_lcores,   [CFG__HOSTPORT] = st_hostport,
	[CFG__SEEDS] = st_seeds,     [CFG__VDEV] = st_vdev,
};

int cfg__store(const struct cfg__key *k, void *base, const char *text,
	       char *why, size_t wl)
{
	char expect[160], buf[CFG__LINE_MAX + 2];
	struct store_args a = {k, base, (char *)base + k->offset, NULL, expect,
			       why, wl};

	ZB_ASSERT(k != NULL && base != NULL && text != NULL);
	ZB_ASSERT(k->type < CFG__TYPE_COUNT && store_fns[k->type] != NULL);
	cfg__expect(k, expect, sizeof(expect));
	a.v = unquote(text, buf, sizeof(buf));
	if (*a.v == '\0' && !(k->flags & CFG__EMPTY_OK) &&
	    k->type != CFG__SEEDS) {
		why_set(why, wl, "the value is empty (expected %s)", expect);
		return -EINVAL;
	}
	return store_fns[k->type](&a);
}

static void format_mac(const uint8_t *m, char *out, size_t len)
{
	snprintf(out, len, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2],
		 m[3], m[4], m[5]);
}

void cfg__format(const struct cfg__key *k, const void *base, char *out,
		 size_t len)
{
	const char *field = (const char *)base + k->offset;

	ZB_ASSERT(k != NULL && base != NULL && out != NULL);
	ZB_ASSERT(len >= 32);
	switch (k->type) {
	case CFG__UINT:
		if ((k->flags & CFG__AUTO) && load_uint(field, k->size) == CFG_AUTO)
			snprintf(out, len, "auto");
		else
			snprintf(out, len, "%llu",
				 (unsigned long long)load_uint(field, k->size));
		break;
	case CFG__DOUBLE:
		snprintf(out, len, "%.17g", *(const double *)field);
		/* Shortest text that reads back to the same double. */
		for (int prec = 1; prec <= 17; prec++) {
			char tmp[64];

			snprintf(tmp, sizeof(tmp), "%.*g", prec,
				 *(const double *)field);
			if (strtod(tmp, NULL) == *(const double *)field) {
				snprintf(out, len, "%s", tmp);
				break;
			}
		}
		break;
	case CFG__BOOL:
		snprintf(out, len, "%s", *(const bool *)field ? "true" : "false");
		break;
	case CFG__ENUM: {
		int v = *(const int *)field;
		int n = 0;

		while (k->names[n])
			n++;
		ZB_ASSERT(v >= 0 && v < n);
		snprintf(out, len, "%s", k->names[v]);
		break;
	}
	case CFG__MAC:
		format_mac((const uint8_t *)field, out, len);
		break;
	case CFG__IPV4:
		format_ipv4(*(const uint32_t *)field, out, len);
		if (k->flags & CFG__HAS_AUX) {
			size_t o = strlen(out);

			snprintf(out + o, len - o, "/%u",
				 *((const uint8_t *)base + k->aux));
		}
		break;
	case CFG__SEEDS: {
		const struct zb_config *cfg = base;
		size_t o = 0;

		out[0] = '\0';
		for (unsigned i = 0; i < cfg->cluster.seed_count && o < len; i++)
			o += (size_t)snprintf(out + o, len - o, "%s%s",
					      i ? ", " : "",
					      cfg->cluster.seeds[i]);
		break;
	}
	case CFG__STRING:
	case CFG__PCI:
	case CFG__LCORES:
	case CFG__HOSTPORT:
	case CFG__VDEV:
		snprintf(out, len, "%s", field);
		break;
	default:
		ZB_ASSERT(!"unknown type");
	}
}
