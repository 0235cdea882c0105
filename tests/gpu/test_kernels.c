/* The cuda/hip kernel source compiles with NVRTC, here even without a GPU
 * (libnvrtc needs no driver): every reduce/scale entry point is present. */
#include "zbmd/gpu.h"
#include "../../gpu/internal.h"
#include "tap.h"

static bool has(const char *img, size_t len, const char *sym)
{
	return memmem(img, len, sym, strlen(sym)) != NULL;
}

int main(void)
{
	void *img = NULL;
	size_t len = 0;
	char log[4096] = "";
	int rc = gpu__nvrtc_compile("compute_75", &img, &len, log, sizeof(log));

	if (rc == ZB_ERR_UNAVAILABLE)
		tap_skip_all("%s", log);
	tap_plan(4);
	if (!ok(rc == 0, "NVRTC compiles the kernels to PTX (compute_75)"))
		tap_diag("%s", log);
	int found = 0;
	for (int t = 0; rc == 0 && t < ZB_DTYPE_COUNT; t++) {
		char r[32], s[32];
		snprintf(r, sizeof(r), ".entry zb_reduce_%d", t);
		snprintf(s, sizeof(s), ".entry zb_scale_%d", t);
		found += has(img, len, r) + has(img, len, s);
	}
	found += rc == 0 && has(img, len, ".entry zb_sgemm");
	is_int(found, 2 * ZB_DTYPE_COUNT + 1, "PTX has every reduce/scale/sgemm entry point");
	free(img);
	img = NULL;
	rc = gpu__nvrtc_compile("sm_80", &img, &len, log, sizeof(log));
	ok(rc == 0 && len > 1000 && memcmp(img, "\177ELF", 4) == 0,
	   "NVRTC compiles a CUBIN (ELF) for sm_80");
	free(img);
	img = NULL;
	rc = gpu__nvrtc_compile("sm_bogus", &img, &len, log, sizeof(log));
	ok(rc < 0 && !img, "a bad architecture is an error, not a crash (%s)", zb_strerror(rc));
	return tap_done();
}
