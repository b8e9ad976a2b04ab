/*
 * oea_bench_cuda.cu - liboea's kernel time next to an empty kernel's (the
 * launch floor), two ways, with PASS/FAIL against 1.5x the floor. Needs a
 * GPU. Prints a Markdown table and one verdict line.
 *
 *   oea_bench_cuda [--launches L] [--reps R] [--quick]
 *
 *  - single launch: CUDA events around one oea_route_cuda call on an idle
 *    stream (what one eager call costs on the GPU timeline), median of R;
 *  - in a graph: a graph of L launches replayed, median over R replays of
 *    (replay time / L): the per-layer cost inside SGLang's decode graphs.
 * The floor is the same two measurements of an empty <<<1, 256>>> kernel.
 * Each launch works on its own copy of ids and weights (a rerouted row is no
 * longer the framework's routing: a second call on it would time another
 * problem); the copies are restored between replays outside the timed region.
 * Shapes: softmax (Qwen3-30B-A3B style) and sigmoid + bias with 8 groups
 * (DeepSeek-V3 style), E in {64, 128, 256, 512}, n in {1 .. 1024}, K = 8,
 * k0 = 4, fp32 logits, int32 ids.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oea.h"

#define CK(call)                                                                              \
	do {                                                                                  \
		cudaError_t ck_e = (call);                                                    \
		if (ck_e != cudaSuccess) {                                                    \
			fprintf(stderr, "oea_bench_cuda: %s:%d: %s: %s\n", __FILE__, __LINE__, \
				#call, cudaGetErrorString(ck_e));                              \
			exit(2);                                                              \
		}                                                                             \
	} while (0)

#define BK 8

__global__ void empty_kernel(void)
{
}

/* Median of one eager launch of fn(ctx) between two events, in ms. */
static float time_eager(cudaStream_t st, int reps, void (*launch)(void *), void *ctx,
			void (*restore)(void *), void *rctx);

static uint64_t rng_s = 12345;
static double rng_unit(void)
{
	uint64_t z = (rng_s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return ((double)(z >> 11) + 0.5) / 9007199254740992.0;
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

/* Median ms per launch of a graph of L launches. */
static float time_graph(cudaGraphExec_t ge, cudaStream_t st, int launches, int reps,
			void (*restore)(void *), void *ctx)
{
	cudaEvent_t a, b;
	float *t = (float *)malloc(sizeof(float) * (size_t)reps), med;
	int r;

	CK(cudaEventCreate(&a));
	CK(cudaEventCreate(&b));
	for (r = -2; r < reps; r++) { /* two warm-up replays */
		if (restore)
			restore(ctx);
		CK(cudaEventRecord(a, st));
		CK(cudaGraphLaunch(ge, st));
		CK(cudaEventRecord(b, st));
		CK(cudaEventSynchronize(b));
		if (r >= 0)
			CK(cudaEventElapsedTime(&t[r], a, b));
	}
	qsort(t, (size_t)reps, sizeof(float), cmp_float);
	med = t[reps / 2] / (float)launches;
	free(t);
	CK(cudaEventDestroy(a));
	CK(cudaEventDestroy(b));
	return med;
}

struct restore_ctx {
	void *dst, *src;
	size_t bytes;
	cudaStream_t st;
};

static void restore_copies(void *p)
{
	struct restore_ctx *c = (struct restore_ctx *)p;
	CK(cudaMemcpyAsync(c->dst, c->src, c->bytes, cudaMemcpyDeviceToDevice, c->st));
}

static void launch_empty(void *ctx)
{
	empty_kernel<<<1, 256, 0, *(cudaStream_t *)ctx>>>();
}

struct oea_launch_ctx {
	oea_problem p;
	cudaStream_t st;
};

static void launch_oea(void *ctx)
{
	struct oea_launch_ctx *c = (struct oea_launch_ctx *)ctx;
	int status = oea_route_cuda(&c->p, c->st);
	if (status) {
		fprintf(stderr, "oea_bench_cuda: %s\n", oea_status_message(status));
		exit(1);
	}
}

static float time_eager(cudaStream_t st, int reps, void (*launch)(void *), void *ctx,
			void (*restore)(void *), void *rctx)
{
	cudaEvent_t a, b;
	float *t = (float *)malloc(sizeof(float) * (size_t)reps), med;
	int r;

	CK(cudaEventCreate(&a));
	CK(cudaEventCreate(&b));
	for (r = -2; r < reps; r++) {
		if (restore)
			restore(rctx);
		CK(cudaStreamSynchronize(st)); /* an idle stream: latency, not throughput */
		CK(cudaEventRecord(a, st));
		launch(ctx);
		CK(cudaEventRecord(b, st));
		CK(cudaEventSynchronize(b));
		if (r >= 0)
			CK(cudaEventElapsedTime(&t[r], a, b));
	}
	qsort(t, (size_t)reps, sizeof(float), cmp_float);
	med = t[reps / 2];
	free(t);
	CK(cudaEventDestroy(a));
	CK(cudaEventDestroy(b));
	return med;
}

int main(int argc, char **argv)
{
	static const int es[] = {64, 128, 256, 512};
	static const int ns[] = {1, 4, 8, 16, 32, 64, 128, 256, 1024};
	int launches = 50, reps = 21, a, ei, ni, scoring, quick = 0, rows = 0, fails = 0;
	cudaStream_t st;
	cudaDeviceProp prop;
	float floor_graph, floor_eager;

	for (a = 1; a < argc; a++) {
		if (!strcmp(argv[a], "--launches") && a + 1 < argc)
			launches = atoi(argv[++a]);
		else if (!strcmp(argv[a], "--reps") && a + 1 < argc)
			reps = atoi(argv[++a]);
		else if (!strcmp(argv[a], "--quick"))
			quick = 1;
		else {
			fprintf(stderr, "usage: %s [--launches L] [--reps R] [--quick]\n", argv[0]);
			return 2;
		}
	}
	if (!oea_has_cuda()) {
		fprintf(stderr, "oea_bench_cuda: liboea was built without CUDA\n");
		return 2;
	}
	CK(cudaGetDeviceProperties(&prop, 0));
	CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));

	{
		cudaGraph_t g;
		cudaGraphExec_t ge;
		int l;
		CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
		for (l = 0; l < launches; l++)
			empty_kernel<<<1, 256, 0, st>>>();
		CK(cudaStreamEndCapture(st, &g));
		CK(cudaGraphInstantiate(&ge, g, 0));
		floor_graph = time_graph(ge, st, launches, reps, NULL, NULL);
		CK(cudaGraphExecDestroy(ge));
		CK(cudaGraphDestroy(g));
		floor_eager = time_eager(st, reps, launch_empty, &st, NULL, NULL);
	}

	printf("# oea_bench_cuda on %s (liboea %s; graphs of %d launches; medians of %d)\n\n",
	       prop.name, oea_version(), launches, reps);
	printf("Empty <<<1,256>>> kernel: %.2f us single launch, %.2f us per launch in a graph. "
	       "Verdict: PASS when both OEA figures are within 1.5x of these.\n\n",
	       floor_eager * 1e3f, floor_graph * 1e3f);
	printf("| scoring | E | n | single us | x floor | graph us/launch | x floor | verdict |\n");
	printf("|---|---|---|---|---|---|---|---|\n");

	for (scoring = 0; scoring < 2; scoring++)
		for (ei = 0; ei < 4; ei++)
			for (ni = 0; ni < 9; ni++) {
				int E = es[ei], n = ns[ni], i, e, c, l;
				size_t per = (size_t)n * BK;
				float *logits, *bias, *w;
				int32_t *ids;
				void *d_logits, *d_bias, *d_io, *d_io0;
				oea_stats *d_stats;
				cudaGraph_t g;
				cudaGraphExec_t ge;
				struct restore_ctx rc;
				struct oea_launch_ctx lc;
				float ms, ms1, r1, r2;

				if (quick && (E != (scoring ? 256 : 128) || (n != 1 && n != 16 && n != 256)))
					continue;
				logits = (float *)malloc(sizeof(float) * (size_t)n * E);
				bias = (float *)malloc(sizeof(float) * (size_t)E);
				ids = (int32_t *)malloc(sizeof(int32_t) * per);
				w = (float *)malloc(sizeof(float) * per);
				for (i = 0; i < n; i++) {
					unsigned char used[512] = {0};
					for (e = 0; e < E; e++)
						logits[(size_t)i * E + e] = (float)(sqrt(-2.0 * log(rng_unit())) *
										  cos(6.2831853 * rng_unit()));
					for (c = 0; c < BK; c++) {
						int best = -1;
						for (e = 0; e < E; e++)
							if (!used[e] && (best < 0 || logits[(size_t)i * E + e] >
										     logits[(size_t)i * E + best]))
								best = e;
						used[best] = 1;
						ids[(size_t)i * BK + c] = best;
						w[(size_t)i * BK + c] = 1.0f / BK;
					}
				}
				for (e = 0; e < E; e++)
					bias[e] = scoring ? (float)(0.01 * rng_unit()) : 0.0f;
				CK(cudaMalloc(&d_logits, sizeof(float) * (size_t)n * E));
				CK(cudaMalloc(&d_bias, sizeof(float) * (size_t)E));
				CK(cudaMalloc((void **)&d_stats, sizeof(oea_stats) * (size_t)launches));
				/* [launches][ids | weights] */
				CK(cudaMalloc(&d_io, 8 * per * (size_t)launches));
				CK(cudaMalloc(&d_io0, 8 * per * (size_t)launches));
				CK(cudaMemcpy(d_logits, logits, sizeof(float) * (size_t)n * E,
					      cudaMemcpyHostToDevice));
				CK(cudaMemcpy(d_bias, bias, sizeof(float) * (size_t)E, cudaMemcpyHostToDevice));
				for (l = 0; l < launches; l++) {
					char *base = (char *)d_io0 + 8 * per * (size_t)l;
					CK(cudaMemcpy(base, ids, 4 * per, cudaMemcpyHostToDevice));
					CK(cudaMemcpy(base + 4 * per, w, 4 * per, cudaMemcpyHostToDevice));
				}
				memset(&lc, 0, sizeof lc);
				lc.st = st;
				lc.p.struct_size = sizeof lc.p;
				lc.p.n = n;
				lc.p.num_experts = E;
				lc.p.top_k = BK;
				lc.p.k0 = 4;
				lc.p.scoring = scoring;
				lc.p.renormalize = 1;
				/* DeepSeek-V3 style: sigmoid, bias, 8 groups of which 4 used. */
				lc.p.num_expert_group = scoring ? 8 : 0;
				lc.p.topk_group = scoring ? 4 : 0;
				lc.p.logits_dtype = OEA_DTYPE_F32;
				lc.p.logits_row_stride = E;
				lc.p.logits = d_logits;
				lc.p.correction_bias = scoring ? (const float *)d_bias : NULL;
				lc.p.ids_dtype = OEA_DTYPE_I32;
				lc.p.weights_dtype = OEA_DTYPE_F32;
				lc.p.ids_row_stride = BK;
				lc.p.weights_row_stride = BK;
				CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
				for (l = 0; l < launches; l++) {
					char *base = (char *)d_io + 8 * per * (size_t)l;
					lc.p.ids = base;
					lc.p.weights = base + 4 * per;
					lc.p.stats = NULL;
					launch_oea(&lc);
				}
				CK(cudaStreamEndCapture(st, &g));
				CK(cudaGraphInstantiate(&ge, g, 0));
				rc.dst = d_io;
				rc.src = d_io0;
				rc.bytes = 8 * per * (size_t)launches;
				rc.st = st;
				ms = time_graph(ge, st, launches, reps, restore_copies, &rc);
				lc.p.ids = d_io;
				lc.p.weights = (char *)d_io + 4 * per;
				ms1 = time_eager(st, reps, launch_oea, &lc, restore_copies, &rc);
				r1 = ms1 / floor_eager;
				r2 = ms / floor_graph;
				rows++;
				fails += r1 > 1.5f || r2 > 1.5f;
				printf("| %s | %d | %d | %.2f | %.2f | %.2f | %.2f | %s |\n",
				       scoring ? "sigmoid+bias, 8/4 groups" : "softmax", E, n, ms1 * 1e3f, r1,
				       ms * 1e3f, r2, r1 > 1.5f || r2 > 1.5f ? "FAIL" : "PASS");
				fflush(stdout);
				CK(cudaGraphExecDestroy(ge));
				CK(cudaGraphDestroy(g));
				CK(cudaFree(d_logits));
				CK(cudaFree(d_bias));
				CK(cudaFree(d_stats));
				CK(cudaFree(d_io));
				CK(cudaFree(d_io0));
				free(logits);
				free(bias);
				free(ids);
				free(w);
			}
	CK(cudaStreamDestroy(st));
	printf("\noea_bench_cuda: latency %s: %d of %d rows within 1.5x of the empty-kernel floor\n",
	       fails ? "FAIL" : "PASS", rows - fails, rows);
	return fails ? 1 : 0;
}
