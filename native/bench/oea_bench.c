/*
 * oea_bench.c - what OEA buys (T before/after) and what the CPU reference
 * costs, printed as Markdown tables. Not a test: it measures.
 *
 *   oea_bench [--samples N] [--quick] [--no-timing] [--seed S]
 *   oea_bench --calls N B CALLS
 *
 * T table: N experts in {64, 128, 256}, k = 8, batch B in {1 .. 128},
 * k0 in {3, 4, 5, 6}; routing uniform (i.i.d. Gaussian logits, so each
 * token's top-k is a uniform k-subset) or skewed (Zipf-like: expert
 * popularity 1/rank under a random permutation, sampled by Gumbel-top-k).
 * Averages over samples, next to the uniform closed form N(1-(1-k/N)^B).
 *
 * Timing: oea_route_host per call (uniform routing, k0 = 4) at the same
 * N and B from 1 to 256, median and minimum of several timed batches.
 *
 * --calls: nothing but CALLS calls at one shape (the timing's inputs), for a
 * profiler; instruction counts (valgrind --tool=callgrind
 * --toggle-collect=oea_route_host) repeat exactly on a loaded machine, where
 * times do not.
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "oea.h"

#define BENCH_K 8

static const int bench_n[] = {64, 128, 256};
static const int bench_b[] = {1, 4, 8, 16, 32, 64, 128};
static const int bench_k0[] = {3, 4, 5, 6};
/* The timing goes up to B = 256, the largest batch of issue 16's goal grid. */
static const int bench_time_b[] = {1, 4, 8, 16, 32, 64, 128, 256};
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

typedef struct bench_rng {
	uint64_t s;
} bench_rng;

static uint64_t bench_next(bench_rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double bench_unit(bench_rng *r)
{
	return ((double)(bench_next(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

static double bench_gauss(bench_rng *r)
{
	return sqrt(-2.0 * log(bench_unit(r))) * cos(6.283185307179586 * bench_unit(r));
}

/* One batch: logits [B][N], ids/weights [B][K] as a top-k softmax router
 * with renormalisation would produce them. */
typedef struct bench_batch {
	int B, N;
	float *logits, *w;
	int32_t *ids;
} bench_batch;

static int bench_batch_make(bench_batch *bb, int B, int N, int skewed, bench_rng *r)
{
	int *perm = NULL, i, e, c, error = 0;

	bb->B = B;
	bb->N = N;
	bb->logits = malloc(sizeof(float) * (size_t)B * (size_t)N);
	bb->w = malloc(sizeof(float) * (size_t)B * BENCH_K);
	bb->ids = malloc(sizeof(int32_t) * (size_t)B * BENCH_K);
	perm = malloc(sizeof(int) * (size_t)N);
	if (!bb->logits || !bb->w || !bb->ids || !perm) {
		error = -1;
		goto done;
	}
	for (e = 0; e < N; e++)
		perm[e] = e;
	for (e = N - 1; e > 0; e--) {
		int j = (int)(bench_next(r) % (uint64_t)(e + 1)), t = perm[e];
		perm[e] = perm[j];
		perm[j] = t;
	}
	for (i = 0; i < B; i++) {
		float *l = bb->logits + (size_t)i * (size_t)N;
		unsigned char used[512] = {0};
		double sum = 0.0;
		for (e = 0; e < N; e++) {
			if (skewed) /* log popularity + Gumbel noise */
				l[e] = (float)(-log(perm[e] + 1.0) - log(-log(bench_unit(r))));
			else
				l[e] = (float)bench_gauss(r);
		}
		for (c = 0; c < BENCH_K; c++) {
			int best = -1;
			for (e = 0; e < N; e++)
				if (!used[e] && (best < 0 || l[e] > l[best]))
					best = e;
			used[best] = 1;
			bb->ids[i * BENCH_K + c] = best;
			sum += exp((double)l[best] - l[bb->ids[i * BENCH_K]]);
		}
		for (c = 0; c < BENCH_K; c++)
			bb->w[i * BENCH_K + c] =
				(float)(exp((double)l[bb->ids[i * BENCH_K + c]] - l[bb->ids[i * BENCH_K]]) / sum);
	}
done:
	free(perm);
	return error;
}

static void bench_batch_free(bench_batch *bb)
{
	free(bb->logits);
	free(bb->w);
	free(bb->ids);
}

static oea_problem bench_problem(const bench_batch *bb, int k0, int32_t *ids, float *w,
				 oea_stats *st)
{
	oea_problem p;

	memset(&p, 0, sizeof p);
	p.struct_size = sizeof p;
	p.n = bb->B;
	p.num_experts = bb->N;
	p.top_k = BENCH_K;
	p.k0 = k0;
	p.scoring = OEA_SCORING_SOFTMAX;
	p.renormalize = 1;
	p.logits_dtype = OEA_DTYPE_F32;
	p.logits_row_stride = bb->N;
	p.logits = bb->logits;
	p.ids_dtype = OEA_DTYPE_I32;
	p.weights_dtype = OEA_DTYPE_F32;
	p.ids_row_stride = BENCH_K;
	p.weights_row_stride = BENCH_K;
	p.ids = ids;
	p.weights = w;
	p.stats = st;
	return p;
}

static double bench_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static int bench_t_table(int samples, uint64_t seed)
{
	int32_t ids[128 * BENCH_K];
	float w[128 * BENCH_K];
	int skewed, ni, bi, ki, s, error = 0;

	printf("## T: distinct experts per batch (k = %d, %d samples per row)\n\n", BENCH_K, samples);
	printf("| routing | N | B | closed form | T before | k0=3 | k0=4 | k0=5 | k0=6 |\n");
	printf("|---|---|---|---|---|---|---|---|---|\n");
	for (skewed = 0; skewed <= 1; skewed++)
		for (ni = 0; ni < COUNT(bench_n); ni++)
			for (bi = 0; bi < COUNT(bench_b); bi++) {
				int N = bench_n[ni], B = bench_b[bi];
				double before = 0.0, after[COUNT(bench_k0)] = {0};
				bench_rng r = {seed + (uint64_t)(skewed * 1000 + N * 10 + bi)};
				for (s = 0; s < samples; s++) {
					bench_batch bb;
					if (bench_batch_make(&bb, B, N, skewed, &r)) {
						bench_batch_free(&bb);
						return -1;
					}
					for (ki = 0; ki < COUNT(bench_k0); ki++) {
						oea_stats st;
						oea_problem p;
						memcpy(ids, bb.ids, sizeof(int32_t) * (size_t)B * BENCH_K);
						memcpy(w, bb.w, sizeof(float) * (size_t)B * BENCH_K);
						p = bench_problem(&bb, bench_k0[ki], ids, w, &st);
						error = oea_route_host(&p);
						if (error) {
							fprintf(stderr, "oea_bench: oea_route_host: %s\n",
								oea_status_message(error));
							bench_batch_free(&bb);
							return error;
						}
						after[ki] += st.t_after;
						if (ki == 0)
							before += st.t_before;
					}
					bench_batch_free(&bb);
				}
				printf("| %s | %d | %d | %.1f | %.1f |", skewed ? "zipf" : "uniform", N, B,
				       N * (1.0 - pow(1.0 - (double)BENCH_K / N, B)), before / samples);
				for (ki = 0; ki < COUNT(bench_k0); ki++)
					printf(" %.1f |", after[ki] / samples);
				printf("\n");
			}
	printf("\n");
	return error;
}

static int bench_timing(double min_seconds, uint64_t seed)
{
	int32_t ids[256 * BENCH_K];
	float w[256 * BENCH_K];
	int ni, bi, error = 0;

	printf("## CPU reference: oea_route_host time per call (k = %d, k0 = 4, fp32 softmax, "
	       "uniform; median and min of 7 batches)\n\n", BENCH_K);
	printf("| N | B | us per call | ns per row | min us per call |\n|---|---|---|---|---|\n");
	for (ni = 0; ni < COUNT(bench_n); ni++)
		for (bi = 0; bi < COUNT(bench_time_b); bi++) {
			int N = bench_n[ni], B = bench_time_b[bi], rep, it, iters = 1;
			double t[7];
			bench_rng r = {seed + (uint64_t)(N * 10 + bi)};
			bench_batch bb;
			oea_problem p;

			if (bench_batch_make(&bb, B, N, 0, &r)) {
				bench_batch_free(&bb);
				return -1;
			}
			p = bench_problem(&bb, 4, ids, w, NULL);
			/* Calibrate the batch size to about min_seconds / 7. */
			for (;;) {
				double t0 = bench_now();
				for (it = 0; it < iters; it++) {
					memcpy(ids, bb.ids, sizeof(int32_t) * (size_t)B * BENCH_K);
					memcpy(w, bb.w, sizeof(float) * (size_t)B * BENCH_K);
					error |= oea_route_host(&p);
				}
				if (bench_now() - t0 > min_seconds / 7 || iters > (1 << 24))
					break;
				iters *= 2;
			}
			for (rep = 0; rep < 7; rep++) {
				double t0 = bench_now();
				for (it = 0; it < iters; it++) {
					/* Restore: a rerouted row (with fillers) is not an input. */
					memcpy(ids, bb.ids, sizeof(int32_t) * (size_t)B * BENCH_K);
					memcpy(w, bb.w, sizeof(float) * (size_t)B * BENCH_K);
					error |= oea_route_host(&p);
				}
				t[rep] = (bench_now() - t0) / iters;
			}
			qsort(t, 7, sizeof(double), bench_cmp_double);
			printf("| %d | %d | %.2f | %.0f | %.2f |\n", N, B, t[3] * 1e6, t[3] * 1e9 / B,
			       t[0] * 1e6);
			bench_batch_free(&bb);
			if (error) {
				fprintf(stderr, "oea_bench: oea_route_host failed\n");
				return error;
			}
		}
	printf("\n");
	return error;
}

/* --calls: `calls` calls of oea_route_host on an N x B batch, untimed. */
static int bench_calls(int N, int B, int calls, uint64_t seed)
{
	int32_t ids[256 * BENCH_K];
	float w[256 * BENCH_K];
	bench_rng r = {seed + (uint64_t)(N * 10 + B)};
	bench_batch bb;
	oea_problem p;
	int c, error = 0;

	if (N < BENCH_K || N > 512 || B < 1 || B > 256 || calls < 1) {
		fprintf(stderr, "oea_bench: --calls N B CALLS needs %d <= N <= 512, 1 <= B <= 256, "
			"CALLS >= 1\n", BENCH_K);
		return 2;
	}
	if (bench_batch_make(&bb, B, N, 0, &r)) {
		bench_batch_free(&bb);
		return 1;
	}
	p = bench_problem(&bb, 4, ids, w, NULL);
	for (c = 0; c < calls && !error; c++) {
		memcpy(ids, bb.ids, sizeof(int32_t) * (size_t)B * BENCH_K);
		memcpy(w, bb.w, sizeof(float) * (size_t)B * BENCH_K);
		error = oea_route_host(&p);
	}
	bench_batch_free(&bb);
	if (error) {
		fprintf(stderr, "oea_bench: oea_route_host: %s\n", oea_status_message(error));
		return 1;
	}
	printf("oea_bench: %d calls of oea_route_host, N = %d, B = %d, K = %d, k0 = 4\n", calls, N,
	       B, BENCH_K);
	return 0;
}

int main(int argc, char **argv)
{
	int samples = 40, timing = 1, a;
	double min_seconds = 0.05;
	uint64_t seed = 20251104;

	for (a = 1; a < argc; a++) {
		if (strcmp(argv[a], "--samples") == 0 && a + 1 < argc) {
			samples = atoi(argv[++a]);
		} else if (strcmp(argv[a], "--seed") == 0 && a + 1 < argc) {
			seed = strtoull(argv[++a], NULL, 10);
		} else if (strcmp(argv[a], "--quick") == 0) {
			samples = 3;
			min_seconds = 0.002;
		} else if (strcmp(argv[a], "--no-timing") == 0) {
			timing = 0;
		} else if (strcmp(argv[a], "--calls") == 0 && a + 3 < argc) {
			return bench_calls(atoi(argv[a + 1]), atoi(argv[a + 2]), atoi(argv[a + 3]),
					   seed);
		} else {
			fprintf(stderr,
				"usage: %s [--samples N] [--quick] [--no-timing] [--seed S]\n"
				"       %s --calls N B CALLS\n"
				"  --samples N  batches averaged per T-table row (default 40)\n"
				"  --quick      3 samples and short timings (a smoke test)\n"
				"  --calls      CALLS untimed calls at N experts, B rows (for a profiler)\n",
				argv[0], argv[0]);
			return 2;
		}
	}
	if (samples < 1)
		samples = 1;
	printf("# oea_bench: liboea %s (ABI %d, CUDA %s)\n\n", oea_version(), oea_abi_version(),
	       oea_has_cuda() ? "built" : "not built");
	if (bench_t_table(samples, seed))
		return 1;
	if (timing && bench_timing(min_seconds, seed))
		return 1;
	return 0;
}
