/* helper_gpucli: `zbmd gpu-info` and `zbmd bench gpu` without the rest of
 * zbmd (no DPDK), for `make gpu-only` / `make test-gpu-only` on a GPU
 * machine.  Usage as zbmd's: helper_gpucli gpu-info | bench gpu [ARGS]. */
#include "zbmd/gpu.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "gpu-info") == 0)
		return gpu_cmd_info(argc - 1, argv + 1);
	if (argc >= 3 && strcmp(argv[1], "bench") == 0 && strcmp(argv[2], "gpu") == 0)
		return gpu_cmd_bench(argc - 2, argv + 2);
	fprintf(stderr, "usage: helper_gpucli gpu-info | bench gpu [--backend B] [--quick]\n");
	return 2;
}
