/* tests/config/test_parsers.c — the value parsers shared with the CLI:
 * MAC, IPv4[/prefix], lcore lists, PCI addresses, host:port. Good inputs give
 * exact values; bad inputs give -EINVAL and leave the outputs untouched. */
#include "tap.h"
#include "zbmd/config.h"

#include <errno.h>
#include <string.h>

static void mac_good(const char *s, const uint8_t want[6])
{
	uint8_t m[6] = {0};

	ok(cfg_parse_mac(s, m) == 0 && memcmp(m, want, 6) == 0, "mac '%s'", s);
}

static void mac_bad(const char *s)
{
	uint8_t m[6] = {9, 9, 9, 9, 9, 9};

	ok(cfg_parse_mac(s, m) == -EINVAL &&
		   memcmp(m, "\x09\x09\x09\x09\x09\x09", 6) == 0,
	   "mac '%s' rejected, output untouched", s ? s : "(null)");
}

static void ip_good(const char *s, const char *bytes, int want_plen)
{
	uint32_t ip = 0;
	uint8_t plen = 0;

	ok(cfg_parse_ipv4(s, &ip, &plen) == 0 && memcmp(&ip, bytes, 4) == 0 &&
		   plen == want_plen,
	   "ipv4 '%s' -> network order, prefix %d", s, want_plen);
}

static void ip_bad(const char *s, int with_prefix)
{
	uint32_t ip = 77;
	uint8_t plen = 77;

	ok(cfg_parse_ipv4(s, &ip, with_prefix ? &plen : NULL) == -EINVAL &&
		   ip == 77 && plen == 77,
	   "ipv4 '%s'%s rejected", s, with_prefix ? "" : " (no prefix allowed)");
}

static void lc_good(const char *s, uint16_t max, const uint16_t *want,
		    uint16_t n)
{
	uint16_t list[CFG_MAX_LCORES], count = 0;
	int rc = cfg_parse_lcores(s, list, max, &count);

	ok(rc == 0 && count == n &&
		   memcmp(list, want, n * sizeof(uint16_t)) == 0,
	   "lcores '%s' -> %u cores", s, n);
}

static void lc_bad(const char *s, uint16_t max)
{
	uint16_t list[CFG_MAX_LCORES], count = 999;

	ok(cfg_parse_lcores(s, list, max, &count) == -EINVAL && count == 999,
	   "lcores '%s' (max %u) rejected", s, max);
}

static void pci_good(const char *s, const char *want)
{
	char out[16] = "";

	ok(cfg_parse_pci(s, out, sizeof(out)) == 0 && strcmp(out, want) == 0,
	   "pci '%s' -> %s", s, want);
}

static void pci_bad(const char *s)
{
	char out[16] = "untouched";

	ok(cfg_parse_pci(s, out, sizeof(out)) == -EINVAL &&
		   strcmp(out, "untouched") == 0,
	   "pci '%s' rejected", s);
}

static void hp_good(const char *s, const char *host, unsigned port)
{
	char h[64] = "";
	uint16_t p = 0;

	ok(cfg_parse_hostport(s, h, sizeof(h), &p) == 0 &&
		   strcmp(h, host) == 0 && p == port,
	   "host:port '%s' -> %s %u", s, host, port);
}

static void hp_bad(const char *s)
{
	char h[64] = "untouched";
	uint16_t p = 7;

	ok(cfg_parse_hostport(s, h, sizeof(h), &p) == -EINVAL &&
		   strcmp(h, "untouched") == 0 && p == 7,
	   "host:port '%s' rejected", s);
}

int main(void)
{
	tap_plan(83);

	/* MAC */
	mac_good("02:00:00:00:00:01", (const uint8_t *)"\x02\0\0\0\0\x01");
	mac_good("AA:bb:Cc:dD:ee:FF",
		 (const uint8_t *)"\xaa\xbb\xcc\xdd\xee\xff");
	mac_good("b8-ce-f6-00-00-10", (const uint8_t *)"\xb8\xce\xf6\0\0\x10");
	mac_bad("02:00:00:00:00");
	mac_bad("02:00:00:00:00:01:02");
	mac_bad("02:00-00:00:00:01");
	mac_bad("2:0:0:0:0:1");
	mac_bad("02:00:00:00:00:0g");
	mac_bad("0200.0000.0001");
	mac_bad("");
	mac_bad(NULL);

	/* IPv4 */
	ip_good("10.0.0.1", "\x0a\0\0\x01", 32);
	ip_good("192.168.1.254/24", "\xc0\xa8\x01\xfe", 24);
	ip_good("0.0.0.0/0", "\0\0\0\0", 0);
	ip_good("255.255.255.255/32", "\xff\xff\xff\xff", 32);
	ip_bad("256.0.0.1", 1);
	ip_bad("1.2.3", 1);
	ip_bad("1.2.3.4.5", 1);
	ip_bad("01.2.3.4", 1);
	ip_bad("1..2.3", 1);
	ip_bad("1.2.3.4/", 1);
	ip_bad("1.2.3.4/33", 1);
	ip_bad("1.2.3.4/08", 1);
	ip_bad(" 1.2.3.4", 1);
	ip_bad("1.2.3.4 ", 1);
	ip_bad("-1.2.3.4", 1);
	ip_bad("1.2.3.4/8", 0);
	ip_bad("", 1);
	{
		uint32_t ip = 0;

		ok(cfg_parse_ipv4("10.1.2.3", &ip, NULL) == 0 &&
			   memcmp(&ip, "\x0a\x01\x02\x03", 4) == 0,
		   "ipv4 without prefix output");
	}

	/* lcores */
	lc_good("0", 8, (const uint16_t[]){0}, 1);
	lc_good("0-3,5", 8, (const uint16_t[]){0, 1, 2, 3, 5}, 5);
	lc_good("5,0-1", 8, (const uint16_t[]){5, 0, 1}, 3);
	lc_good(" 2 - 3 , 7 ", 8, (const uint16_t[]){2, 3, 7}, 3);
	lc_good("127", 8, (const uint16_t[]){127}, 1);
	lc_good("4-4", 8, (const uint16_t[]){4}, 1);
	{
		uint16_t want[CFG_MAX_LCORES];

		for (int i = 0; i < CFG_MAX_LCORES; i++)
			want[i] = (uint16_t)i;
		lc_good("0-127", CFG_MAX_LCORES, want, CFG_MAX_LCORES);
	}
	lc_bad("128", 8);
	lc_bad("0-128", CFG_MAX_LCORES);
	lc_bad("3-1", 8);
	lc_bad("1,1", 8);
	lc_bad("0-2,1", 8);
	lc_bad("", 8);
	lc_bad(",", 8);
	lc_bad("0,", 8);
	lc_bad(",0", 8);
	lc_bad("a", 8);
	lc_bad("-1", 8);
	lc_bad("1-", 8);
	lc_bad("0-7", 4);
	lc_bad("0 1", 8);
	lc_bad("00", 8);
	lc_bad("0", 0);

	/* PCI */
	pci_good("0000:3b:00.0", "0000:3b:00.0");
	pci_good("3b:00.1", "0000:3b:00.1");
	pci_good("FFFF:FF:1F.7", "ffff:ff:1f.7");
	pci_good("0001:00:02.3", "0001:00:02.3");
	pci_bad("3b:20.0");
	pci_bad("3b:00.8");
	pci_bad("3b:0.0");
	pci_bad("0000:3b:00");
	pci_bad("00000:3b:00.0");
	pci_bad("3b:00.0 ");
	pci_bad("3b.00.0");
	pci_bad("0000-3b:00.0");
	pci_bad("xx:00.0");
	pci_bad("");
	{
		char small[12];

		ok(cfg_parse_pci("3b:00.0", small, sizeof(small)) == -EINVAL,
		   "pci output buffer too small rejected");
	}

	/* host:port */
	hp_good("10.0.0.1:7400", "10.0.0.1", 7400);
	hp_good("node-1.example.org:1", "node-1.example.org", 1);
	hp_good("[::1]:65535", "::1", 65535);
	hp_good("[fe80::1]:80", "fe80::1", 80);
	hp_bad("10.0.0.1");
	hp_bad(":80");
	hp_bad("10.0.0.1:");
	hp_bad("10.0.0.1:0");
	hp_bad("10.0.0.1:65536");
	hp_bad("10.0.0.1:08");
	hp_bad("a b:1");
	hp_bad("1.2.3.256:1");
	hp_bad("::1:80");
	hp_bad("[zz::1]:80");
	hp_bad("-host:80");
	{
		char h[4];
		uint16_t p;

		ok(cfg_parse_hostport("longname:1", h, sizeof(h), &p) == -EINVAL,
		   "host:port host buffer too small rejected");
	}
	return tap_done();
}
