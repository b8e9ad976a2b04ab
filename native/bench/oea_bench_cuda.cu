/*
 * oea_bench_cuda.cu - kernel time per call, measured with CUDA events over
 * CUDA-graph replays, next to the replay time of an empty kernel (the launch
 * floor). Needs a GPU. Prints a Markdown table.
 *
 *   oea_bench_cuda [--launches L] [--reps R]
 *
 * Each graph holds L launches; each launch works on its own copy of ids and
 * weights (a rerouted row carries fillers, i.e. duplicate ids, and would be
 * skipped as invalid by the next call), and the copies are restored between
 * replays outside the timed region. Reported: the median over R replays of
 * (replay time / L).
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

int main(int argc, char **argv)
{
	static const int es[] = {64, 128, 256};
	static const int ns[] = {1, 4, 8, 16, 32, 64, 128, 256};
	int launches = 50, reps = 21, a, ei, ni, scoring;
	cudaStream_t st;
	cudaDeviceProp prop;
	float floor_ms[2];

	for (a = 1; a < argc; a++) {
		if (!strcmp(argv[a], "--launches") && a + 1 < argc)
			launches = atoi(argv[++a]);
		else if (!strcmp(argv[a], "--reps") && a + 1 < argc)
			reps = atoi(argv[++a]);
		else {
			fprintf(stderr, "usage: %s [--launches L] [--reps R]\n", argv[0]);
			return 2;
		}
	}
	if (!oea_has_cuda()) {
		fprintf(stderr, "oea_bench_cuda: liboea was built without CUDA\n");
		return 2;
	}
	CK(cudaGetDeviceProperties(&prop, 0));
	CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));

	/* The floor: graphs of L empty launches, one thread and a full block. */
	for (a = 0; a < 2; a++) {
		cudaGraph_t g;
		cudaGraphExec_t ge;
		int l;
		CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
		for (l = 0; l < launches; l++)
			empty_kernel<<<1, a ? 1024 : 32, 0, st>>>();
		CK(cudaStreamEndCapture(st, &g));
		CK(cudaGraphInstantiate(&ge, g, 0));
		floor_ms[a] = time_graph(ge, st, launches, reps, NULL, NULL);
		CK(cudaGraphExecDestroy(ge));
		CK(cudaGraphDestroy(g));
	}

	printf("# oea_bench_cuda on %s (liboea %s, %d launches per graph, median of %d replays)\n\n",
	       prop.name, oea_version(), launches, reps);
	printf("Empty kernel per launch in a graph: %.2f us (<<<1,32>>>), %.2f us (<<<1,1024>>>)\n\n",
	       floor_ms[0] * 1e3f, floor_ms[1] * 1e3f);
	printf("| scoring | E | n | K | k0 | kernel us/call | empty us/call | ratio |\n");
	printf("|---|---|---|---|---|---|---|---|\n");

	for (scoring = 0; scoring < 2; scoring++)
		for (ei = 0; ei < 3; ei++)
			for (ni = 0; ni < 8; ni++) {
				int E = es[ei], n = ns[ni], i, e, c, l;
				size_t per = (size_t)n * BK;
				float *logits = (float *)malloc(sizeof(float) * (size_t)n * E);
				float *bias = (float *)malloc(sizeof(float) * (size_t)E);
				int32_t *ids = (int32_t *)malloc(sizeof(int32_t) * per);
				float *w = (float *)malloc(sizeof(float) * per);
				void *d_logits, *d_bias, *d_io, *d_io0;
				oea_stats *d_stats;
				cudaGraph_t g;
				cudaGraphExec_t ge;
				struct restore_ctx rc;
				float ms;

				for (i = 0; i < n; i++) {
					unsigned char used[256] = {0};
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
				CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
				for (l = 0; l < launches; l++) {
					oea_problem p;
					char *base = (char *)d_io + 8 * per * (size_t)l;
					int status;
					memset(&p, 0, sizeof p);
					p.struct_size = sizeof p;
					p.n = n;
					p.num_experts = E;
					p.top_k = BK;
					p.k0 = 4;
					p.scoring = scoring;
					p.renormalize = 1;
					p.logits_dtype = OEA_DTYPE_F32;
					p.logits_row_stride = E;
					p.logits = d_logits;
					p.correction_bias = scoring ? (const float *)d_bias : NULL;
					p.ids_dtype = OEA_DTYPE_I32;
					p.weights_dtype = OEA_DTYPE_F32;
					p.ids_row_stride = BK;
					p.weights_row_stride = BK;
					p.ids = base;
					p.weights = base + 4 * per;
					p.stats = d_stats + l;
					status = oea_route_cuda(&p, st);
					if (status) {
						fprintf(stderr, "oea_bench_cuda: %s\n", oea_status_message(status));
						return 1;
					}
				}
				CK(cudaStreamEndCapture(st, &g));
				CK(cudaGraphInstantiate(&ge, g, 0));
				rc.dst = d_io;
				rc.src = d_io0;
				rc.bytes = 8 * per * (size_t)launches;
				rc.st = st;
				ms = time_graph(ge, st, launches, reps, restore_copies, &rc);
				printf("| %s | %d | %d | %d | 4 | %.2f | %.2f | %.2f |\n",
				       scoring ? "sigmoid+bias" : "softmax", E, n, BK, ms * 1e3f,
				       floor_ms[n > 32 ? 1 : 0] * 1e3f, ms / floor_ms[n > 32 ? 1 : 0]);
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
	return 0;
}
