/* helper_promcheck: read a Prometheus text exposition on stdin; exit 0 when
 * it is valid, 1 with the reason otherwise. Prints the number of samples. */
#include "prom_check.h"

int main(void)
{
	size_t cap = 1 << 20, len = 0, r;
	char *buf = malloc(cap + 1), err[256];

	if (!buf)
		return 1;
	while ((r = fread(buf + len, 1, cap - len, stdin)) > 0) {
		len += r;
		if (len == cap) {
			fprintf(stderr, "input too large\n");
			return 1;
		}
	}
	buf[len] = '\0';
	if (prom_check(buf, err, sizeof(err)) != 0) {
		fprintf(stderr, "invalid exposition: %s\n", err);
		free(buf);
		return 1;
	}
	unsigned samples = 0;
	for (char *p = buf; *p; p = strchr(p, '\n') + 1)
		if (*p != '#')
			samples++;
	printf("# %u samples\n", samples);
	free(buf);
	return 0;
}
