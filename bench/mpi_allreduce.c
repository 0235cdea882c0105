/* mpi_allreduce.c — the peer of `zbmd bench allreduce`: MPI_Allreduce with
 * the same flags (-b -e -f -n -w -c -d -o) and the same table columns, so
 * bench/coll/compare.sh can put the two side by side.
 *
 *   mpicc -O2 -o mpi_allreduce bench/mpi_allreduce.c
 *   mpirun -np 4 --mca btl self,vader ./mpi_allreduce -b 1M -e 64M -f 4
 *
 * time(us) is the mean over ranks of the mean over iterations; busbw =
 * algbw * 2(n-1)/n, as in nccl-tests. #wrong counts elements (over all
 * ranks) that differ from the exact expected value after a re-initialised
 * run. Datatypes: float double int32 int64 (MPI has no half/bfloat16).
 */
#include <mpi.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static size_t parse_size(const char *s)
{
	char *end;
	double v = strtod(s, &end);
	switch (*end) {
	case 'k': case 'K': v *= 1024; break;
	case 'm': case 'M': v *= 1024 * 1024; break;
	case 'g': case 'G': v *= 1024.0 * 1024 * 1024; break;
	}
	return (size_t)v;
}

struct dt { const char *name; MPI_Datatype mpi; size_t size; };
static const struct dt dts[] = {
	{"float", MPI_FLOAT, 4}, {"double", MPI_DOUBLE, 8},
	{"int32", MPI_INT32_T, 4}, {"int64", MPI_INT64_T, 8},
};
struct op { const char *name; MPI_Op mpi; };

static double value(const char *op, int r, int n, size_t i)
{
	if (!strcmp(op, "prod"))
		return (i + r) % 5 == 0 ? 2.0 : 1.0;
	if (!strcmp(op, "sum"))
		return (double)(i % 4 + 1) + (double)((i / 4) % 3) * (r == 0 ? n - 1 : -1);
	return (double)((i * 3 + (size_t)r * 5) % 11) - 5.0;
}

static double expected(const char *op, int n, size_t i)
{
	if (!strcmp(op, "sum"))
		return (double)n * (double)(i % 4 + 1);
	double v = value(op, 0, n, i);
	for (int r = 1; r < n; r++) {
		double x = value(op, r, n, i);
		v = !strcmp(op, "prod") ? v * x : !strcmp(op, "min") ? fmin(v, x) : fmax(v, x);
	}
	return v;
}

static void store(void *b, const struct dt *t, size_t i, double v)
{
	if (t->mpi == MPI_FLOAT) ((float *)b)[i] = (float)v;
	else if (t->mpi == MPI_DOUBLE) ((double *)b)[i] = v;
	else if (t->mpi == MPI_INT32_T) ((int32_t *)b)[i] = (int32_t)v;
	else ((int64_t *)b)[i] = (int64_t)v;
}

static double load(const void *b, const struct dt *t, size_t i)
{
	if (t->mpi == MPI_FLOAT) return ((const float *)b)[i];
	if (t->mpi == MPI_DOUBLE) return ((const double *)b)[i];
	if (t->mpi == MPI_INT32_T) return ((const int32_t *)b)[i];
	return (double)((const int64_t *)b)[i];
}

int main(int argc, char **argv)
{
	size_t minb = 32u << 20, maxb = 32u << 20, factor = 2;
	long iters = 20, warmup = 5;
	int check = 1, rank, n, c;
	const char *dname = "float", *oname = "sum";

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	while ((c = getopt(argc, argv, "b:e:f:n:w:c:d:o:")) != -1) {
		switch (c) {
		case 'b': minb = parse_size(optarg); break;
		case 'e': maxb = parse_size(optarg); break;
		case 'f': factor = strtoul(optarg, NULL, 10); break;
		case 'n': iters = atol(optarg); break;
		case 'w': warmup = atol(optarg); break;
		case 'c': check = atoi(optarg); break;
		case 'd': dname = optarg; break;
		case 'o': oname = optarg; break;
		default:
			if (rank == 0)
				fprintf(stderr, "usage: mpi_allreduce [-b N] [-e N] [-f N] [-n N] "
					"[-w N] [-c 0|1] [-d float|double|int32|int64] "
					"[-o sum|prod|min|max]\n");
			MPI_Finalize();
			return 2;
		}
	}
	const struct dt *t = NULL;
	for (size_t i = 0; i < sizeof(dts) / sizeof(dts[0]); i++)
		if (!strcmp(dts[i].name, dname))
			t = &dts[i];
	MPI_Op op = !strcmp(oname, "sum") ? MPI_SUM : !strcmp(oname, "prod") ? MPI_PROD
		    : !strcmp(oname, "min") ? MPI_MIN : !strcmp(oname, "max") ? MPI_MAX
		    : MPI_OP_NULL;
	if (!t || op == MPI_OP_NULL || factor < 2 || iters < 1 || minb == 0 ||
	    minb > maxb) {
		if (rank == 0)
			fprintf(stderr, "mpi_allreduce: bad -d/-o/-f/-n/-b/-e\n");
		MPI_Finalize();
		return 2;
	}
	char *sbuf = malloc(maxb + 64), *rbuf = malloc(maxb + 64);
	if (!sbuf || !rbuf) {
		fprintf(stderr, "mpi_allreduce: cannot allocate 2 x %zu bytes\n", maxb);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	/* touched before any timing, as zbmd's bench does */
	memset(sbuf, 0, maxb + 64);
	memset(rbuf, 0, maxb + 64);
	if (rank == 0) {
		char lib[MPI_MAX_LIBRARY_VERSION_STRING];
		int len;
		MPI_Get_library_version(lib, &len);
		char *nl = strchr(lib, '\n');
		if (nl)
			*nl = 0;
		printf("# mpi_allreduce: nodes %d, %s\n", n, lib);
		printf("# minBytes %zu maxBytes %zu step: %zu(factor) warmup iters: %ld "
		       "iters: %ld validation: %d\n#\n", minb, maxb, factor, warmup, iters, check);
		printf("# %10s  %12s  %8s  %6s  %32s  %32s\n", "", "", "", "", "out-of-place",
		       "in-place");
		printf("# %10s  %12s  %8s  %6s", "size", "count", "type", "redop");
		for (int i = 0; i < 2; i++)
			printf("  %8s  %6s  %6s  %6s", "time", "algbw", "busbw", "#wrong");
		printf("\n");
		fflush(stdout);
	}
	/* nccl-tests' warm-up before the sweep: -w iterations at the largest
	 * size, then at the smallest (zbmd's bench does the same) */
	size_t top = minb;
	while (top <= maxb / factor)
		top *= factor;          /* the sweep's largest size */
	for (int k = 0; k < 2; k++) {
		size_t wc = (k == 0 ? top : minb) / t->size;
		for (long i = 0; i < warmup; i++)
			MPI_Allreduce(sbuf, rbuf, (int)wc, t->mpi, op, MPI_COMM_WORLD);
	}
	double bwsum = 0;
	int rows = 0;
	long long wrong_all = 0;
	for (size_t sz = minb; sz <= maxb; sz *= factor) {
		size_t count = sz / t->size;
		double us[2], bus[2];
		long long wrong[2];
		for (int ip = 0; ip < 2; ip++) {
			void *src = ip ? MPI_IN_PLACE : sbuf;
			char *init = ip ? rbuf : sbuf;
			for (size_t i = 0; i < count; i++)
				store(init, t, i, value(oname, rank, n, i));
			for (long k = 0; k < warmup; k++)
				MPI_Allreduce(src, rbuf, (int)count, t->mpi, op, MPI_COMM_WORLD);
			MPI_Barrier(MPI_COMM_WORLD);
			double t0 = MPI_Wtime();
			for (long k = 0; k < iters; k++)
				MPI_Allreduce(src, rbuf, (int)count, t->mpi, op, MPI_COMM_WORLD);
			double my = (MPI_Wtime() - t0) * 1e6 / (double)iters, sum;
			MPI_Allreduce(&my, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
			us[ip] = sum / n;
			long long w = 0, wsum = 0;
			if (check) {
				for (size_t i = 0; i < count; i++)
					store(init, t, i, value(oname, rank, n, i));
				/* out of place: poison the result, so a call that
				 * wrote nothing cannot pass on the timed loop's */
				if (!ip)
					memset(rbuf, 0xa5, count * t->size);
				MPI_Allreduce(src, rbuf, (int)count, t->mpi, op, MPI_COMM_WORLD);
				for (size_t i = 0; i < count; i++)
					w += load(rbuf, t, i) != expected(oname, n, i);
			}
			MPI_Allreduce(&w, &wsum, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
			wrong[ip] = check ? wsum : -1;
			bus[ip] = us[ip] > 0 ? (double)(count * t->size) / us[ip] / 1e3 : 0;
			bwsum += bus[ip] * 2.0 * (n - 1) / n;
			if (wsum > 0)
				wrong_all += wsum;
		}
		rows++;
		if (rank == 0) {
			printf("%12zu  %12zu  %8s  %6s", count * t->size, count, t->name, oname);
			for (int ip = 0; ip < 2; ip++)
				printf("  %8.1f  %6.2f  %6.2f  %6lld", us[ip], bus[ip],
				       bus[ip] * 2.0 * (n - 1) / n, wrong[ip]);
			printf("\n");
			fflush(stdout);
		}
		if (factor < 2)
			break;
	}
	if (rank == 0) {
		printf("# Out of bounds values : %lld %s\n", wrong_all, wrong_all ? "FAILED" : "OK");
		printf("# Avg bus bandwidth    : %g \n#\n", rows ? bwsum / (2.0 * rows) : 0);
	}
	free(sbuf);
	free(rbuf);
	MPI_Finalize();
	return wrong_all ? 1 : 0;
}
