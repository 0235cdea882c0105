/* tests/config/test_fuzz.c — bad input never crashes or hangs the loader:
 * deterministic mutations (seeded xorshift) of a valid config — byte flips,
 * deletions, duplicated lines, random bytes — each either loads or yields
 * ZB_ERR_CONFIG with well-formed "NAME:LINE: ..." messages whose LINE is
 * within the text and whose quoted bytes are escaped (\xNN) when they are
 * control characters or not UTF-8. Run under `make asan` too. */
#include "tap.h"
#include "zbmd/common.h"
#include "zbmd/config.h"
#include "round_trip.h"

#include <stdlib.h>
#include <string.h>

static const char base_text[] =
	"[node]\nid = 3\nname = n3\n"
	"[eal]\nlcores = 0-1,3\nmemory_mb = 512\nhugepages = off\n"
	"[dataplane]\nidle = adaptive\n"
	"[port.0]\nvdev = net_af_packet0,iface=veth0\nip = 10.0.0.3/24\n"
	"mac = 02:00:00:00:00:03\n"
	"[peer.1]\nip = 10.0.0.1\ncontrol = 10.1.0.1:7400\n"
	"[cluster]\nid = 7\nseeds = 10.1.0.1:7400, 10.1.0.2:7400\npsk_file = psk\n"
	"[control]\nphi_threshold = 8.5\nlisten = 10.1.0.3:7400\n";

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void mutate(char *t, size_t *len, size_t cap)
{
	static const char alphabet[] = "[]=;#.,:-/ \t\n\r\"0123456789abcxyz\xff\x01\x1b";
	int n = 1 + (int)(next() % 4);

	for (int i = 0; i < n && *len > 0; i++) {
		size_t at = next() % *len;

		switch (next() % 4) {
		case 0: /* replace a byte */
			t[at] = alphabet[next() % (sizeof(alphabet) - 1)];
			break;
		case 1: /* delete a byte */
			memmove(t + at, t + at + 1, *len - at);
			(*len)--;
			break;
		case 2: /* insert a byte */
			if (*len + 1 < cap) {
				memmove(t + at + 1, t + at, *len - at + 1);
				t[at] = alphabet[next() % (sizeof(alphabet) - 1)];
				(*len)++;
			}
			break;
		default: { /* append a copy of a random slice (duplicates) */
			size_t from = next() % *len, n2 = next() % 40;

			if (from + n2 > *len)
				n2 = *len - from;
			if (*len + n2 + 1 < cap) {
				memmove(t + *len, t + from, n2);
				*len += n2;
				t[*len] = '\0';
			}
		}
		}
	}
	t[*len] = '\0';
}

/* Every listed message is "fuzz.ini:LINE: text" with LINE <= lines. */
static int well_formed(const struct cfg_error *err, unsigned lines)
{
	const char *p = err->list;
	unsigned shown = 0;

	while (*p) {
		unsigned line;
		int used = 0;
		const char *nl = strchr(p, '\n');

		if (nl == NULL)
			return 0;
		if (strncmp(p, "fuzz.ini: ", 10) == 0 &&
		    strstr(p, "more errors left out") != NULL) {
			p = nl + 1;
			continue;
		}
		if (sscanf(p, "fuzz.ini:%u: %n", &line, &used) != 1 ||
		    used == 0 || line > lines || nl - p < used + 3)
			return 0;
		/* the input's control bytes and \xff (not UTF-8) come out
		 * escaped: a message is printable ASCII here */
		for (const char *q = p; q < nl; q++)
			if ((unsigned char)*q < 0x20 || (unsigned char)*q > 0x7e)
				return 0;
		shown++;
		p = nl + 1;
	}
	return shown >= 1 && shown <= err->count &&
	       strncmp(err->msg, err->list, strlen(err->msg)) == 0;
}

int main(void)
{
	static struct zb_config cfg;
	static struct cfg_error err;
	char text[2048];
	int loaded = 0, rejected = 0, bad = 0, lost = 0;
	const int rounds = 3000;

	tap_plan(5);
	ok(cfg_load_string(&cfg, base_text, "fuzz.ini", &err) == 0,
	   "the base text is valid");
	for (int r = 0; r < rounds; r++) {
		size_t len = strlen(base_text);
		unsigned lines = 1;
		int rc;

		memcpy(text, base_text, len + 1);
		mutate(text, &len, sizeof(text));
		text[strlen(text)] = '\0';
		for (const char *p = text; *p; p++)
			lines += *p == '\n';
		rc = cfg_load_string(&cfg, text, "fuzz.ini", &err);
		if (rc == 0) {
			loaded++;
			if (!cfg_round_trips(&cfg, "a mutation that loaded") && lost++ < 3)
				tap_diag("round %d: the text that loaded:\n%s", r, text);
		} else if (rc == ZB_ERR_CONFIG && well_formed(&err, lines)) {
			rejected++;
		} else {
			if (bad++ < 3)
				tap_diag("round %d: rc %d, list:\n%s", r, rc,
					 err.list);
		}
	}
	tap_diag("%d mutations: %d loaded, %d rejected", rounds, loaded,
		 rejected);
	is_int(bad, 0, "every mutation loads or is rejected with FILE:LINE messages");
	ok(rejected > rounds / 4, "most mutations are rejected");
	ok(loaded > 0, "some mutations (comments, spaces) still load");
	is_int(lost, 0, "every one that loads reads back the same from its dump");
	return tap_done();
}
