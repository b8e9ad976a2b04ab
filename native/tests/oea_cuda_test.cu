/*
 * oea_cuda_test.cu - the CUDA kernel against the CPU reference, bit for bit.
 * Needs a GPU; not run by ctest. Exit status 0 when everything matched, 1 on
 * any mismatch, 2 on usage or CUDA trouble.
 *
 *   oea_cuda_test [--cases N] [--seed S]
 *
 * For each random case of tests/oea_testcase.h (the same generator as the CPU
 * tests) it compares, byte for byte over whole buffers (stride gaps, shared
 * columns, padding rows included) and stats:
 *   1. a plain launch on a stream,
 *   2. every 4th case: the launch captured in a CUDA graph, replayed three
 *      times (determinism across launches), then replayed again after
 *      changing *num_valid_rows on the device (the graph must read it at
 *      replay time, not capture time).
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oea.h"
#include "oea_testcase.h"

#define CK(call)                                                                            \
	do {                                                                                \
		cudaError_t ck_e = (call);                                                  \
		if (ck_e != cudaSuccess) {                                                  \
			fprintf(stderr, "oea_cuda_test: %s:%d: %s: %s\n", __FILE__, __LINE__, \
				#call, cudaGetErrorString(ck_e));                            \
			exit(2);                                                            \
		}                                                                           \
	} while (0)

struct dev_case {
	void *logits, *ids, *w;
	float *bias;
	int32_t *nvr;
	oea_stats *stats;
};

struct host_out {
	unsigned char *ids, *w;
	oea_stats st;
	int rc;
};

static void host_ref(const tcase *tc, int32_t *nvr_override, host_out *o)
{
	oea_problem p;

	o->ids = (unsigned char *)malloc(tc->ids_bytes);
	o->w = (unsigned char *)malloc(tc->w_bytes);
	memcpy(o->ids, tc->ids0, tc->ids_bytes);
	memcpy(o->w, tc->w0, tc->w_bytes);
	memset(&o->st, 0, sizeof o->st);
	p = tcase_problem(tc, o->ids, o->w, &o->st);
	if (nvr_override)
		p.num_valid_rows = nvr_override;
	o->rc = oea_route_host(&p);
}

static void dev_upload(const tcase *tc, dev_case *d)
{
	CK(cudaMalloc(&d->logits, tc->logits_bytes));
	CK(cudaMalloc(&d->ids, tc->ids_bytes));
	CK(cudaMalloc(&d->w, tc->w_bytes));
	CK(cudaMalloc((void **)&d->nvr, sizeof(int32_t)));
	CK(cudaMalloc((void **)&d->stats, sizeof(oea_stats)));
	d->bias = NULL;
	if (tc->bias) {
		CK(cudaMalloc((void **)&d->bias, sizeof(float) * (size_t)tc->p.num_experts));
		CK(cudaMemcpy(d->bias, tc->bias, sizeof(float) * (size_t)tc->p.num_experts,
			      cudaMemcpyHostToDevice));
	}
	CK(cudaMemcpy(d->logits, tc->logits, tc->logits_bytes, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(d->nvr, &tc->nvr, sizeof(int32_t), cudaMemcpyHostToDevice));
}

static void dev_reset(const tcase *tc, dev_case *d)
{
	CK(cudaMemcpy(d->ids, tc->ids0, tc->ids_bytes, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(d->w, tc->w0, tc->w_bytes, cudaMemcpyHostToDevice));
	CK(cudaMemset(d->stats, 0xab, sizeof(oea_stats)));
}

static void dev_free(dev_case *d)
{
	cudaFree(d->logits);
	cudaFree(d->ids);
	cudaFree(d->w);
	cudaFree(d->nvr);
	cudaFree(d->stats);
	cudaFree(d->bias);
}

static oea_problem dev_problem(const tcase *tc, const dev_case *d)
{
	oea_problem p = tc->p;
	p.logits = d->logits;
	p.ids = d->ids;
	p.weights = d->w;
	p.correction_bias = d->bias;
	p.num_valid_rows = tc->p.num_valid_rows ? d->nvr : NULL;
	p.stats = d->stats;
	return p;
}

/* Compares the device buffers with the host result; prints the first
 * difference. */
static int dev_matches(const tcase *tc, const dev_case *d, const host_out *h, const char *what,
		       unsigned long seed)
{
	unsigned char *ids = (unsigned char *)malloc(tc->ids_bytes);
	unsigned char *w = (unsigned char *)malloc(tc->w_bytes);
	oea_stats st;
	int ok;

	CK(cudaMemcpy(ids, d->ids, tc->ids_bytes, cudaMemcpyDeviceToHost));
	CK(cudaMemcpy(w, d->w, tc->w_bytes, cudaMemcpyDeviceToHost));
	CK(cudaMemcpy(&st, d->stats, sizeof st, cudaMemcpyDeviceToHost));
	ok = memcmp(ids, h->ids, tc->ids_bytes) == 0 && memcmp(w, h->w, tc->w_bytes) == 0 &&
	     memcmp(&st, &h->st, sizeof st) == 0;
	if (!ok) {
		size_t k;
		const oea_problem *p = &tc->p;
		fprintf(stderr,
			"MISMATCH (%s) seed=%lu n=%d E=%d K=%d S=%d k0=%d scoring=%d renorm=%d "
			"groups=%d ldtype=%d idtype=%d bias=%d nvr=%d\n",
			what, seed, p->n, p->num_experts, p->top_k, p->num_shared, p->k0, p->scoring,
			p->renormalize, p->num_expert_group, p->logits_dtype, p->ids_dtype,
			tc->bias != NULL, p->num_valid_rows ? tc->nvr : -99);
		for (k = 0; k < tc->ids_bytes; k++)
			if (ids[k] != h->ids[k]) {
				fprintf(stderr, "  ids differ first at byte %zu (row %zu)\n", k,
					k / ((size_t)p->ids_row_stride * (p->ids_dtype == OEA_DTYPE_I64 ? 8 : 4)));
				break;
			}
		for (k = 0; k < tc->w_bytes / 4; k++)
			if (memcmp(w + 4 * k, h->w + 4 * k, 4)) {
				float a, b;
				memcpy(&a, w + 4 * k, 4);
				memcpy(&b, h->w + 4 * k, 4);
				fprintf(stderr, "  weights differ first at %zu: gpu %.9g cpu %.9g\n", k, a, b);
				break;
			}
		fprintf(stderr, "  stats gpu T %u->%u v%u i%u nf%u g%u, cpu T %u->%u v%u i%u nf%u g%u\n",
			st.t_before, st.t_after, st.valid_rows, st.invalid_rows, st.nonfinite_rows,
			st.gated, h->st.t_before, h->st.t_after, h->st.valid_rows, h->st.invalid_rows,
			h->st.nonfinite_rows, h->st.gated);
	}
	free(ids);
	free(w);
	return ok;
}

/*
 * torch captures graphs in cudaStreamCaptureModeGlobal, and the first call a
 * process makes into liboea may well be inside such a capture (its private
 * static cudart initialises then). Run exactly that before anything else.
 */
static int first_call_inside_global_capture(cudaStream_t stream, unsigned long seed)
{
	tc_rng r = {seed};
	tcase tc;
	dev_case d;
	host_out h;
	oea_problem p;
	cudaGraph_t g;
	cudaGraphExec_t ge;
	int ok, rc;

	if (tcase_random(&tc, &r, 60000))
		return 0;
	host_ref(&tc, NULL, &h);
	dev_upload(&tc, &d);
	dev_reset(&tc, &d);
	p = dev_problem(&tc, &d);
	CK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
	rc = oea_route_cuda(&p, stream);
	CK(cudaStreamEndCapture(stream, &g));
	if (rc != OEA_OK) {
		fprintf(stderr, "oea_cuda_test: first call, captured (global mode): %s\n", oea_status_message(rc));
		return 0;
	}
	CK(cudaGraphInstantiate(&ge, g, 0));
	CK(cudaGraphLaunch(ge, stream));
	CK(cudaStreamSynchronize(stream));
	ok = h.rc == OEA_OK && dev_matches(&tc, &d, &h, "first call in a global-mode capture", seed);
	CK(cudaGraphExecDestroy(ge));
	CK(cudaGraphDestroy(g));
	dev_free(&d);
	free(h.ids);
	free(h.w);
	tcase_free(&tc);
	return ok;
}

int main(int argc, char **argv)
{
	int cases = 3000, k, bad = 0, graphs = 0, ndev = 0;
	unsigned long seed = 0x5eed0000u;
	cudaStream_t stream;

	for (k = 1; k < argc; k++) {
		if (!strcmp(argv[k], "--cases") && k + 1 < argc)
			cases = atoi(argv[++k]);
		else if (!strcmp(argv[k], "--seed") && k + 1 < argc)
			seed = strtoul(argv[++k], NULL, 0);
		else {
			fprintf(stderr, "usage: %s [--cases N] [--seed S]\n", argv[0]);
			return 2;
		}
	}
	if (!oea_has_cuda()) {
		fprintf(stderr, "oea_cuda_test: liboea was built without CUDA\n");
		return 2;
	}
	if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
		fprintf(stderr, "oea_cuda_test: no CUDA device\n");
		return 2;
	}
	CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
	if (!first_call_inside_global_capture(stream, seed ^ 0xabcdefu)) {
		fprintf(stderr, "oea_cuda_test: MISMATCH or failure in the first, captured call\n");
		return 1;
	}

	for (k = 0; k < cases && bad < 10; k++) {
		unsigned long s = seed + (unsigned long)k;
		tc_rng r = {s};
		tcase tc;
		dev_case d;
		host_out h;
		oea_problem p;
		int rc;

		if (tcase_random(&tc, &r, 60000)) {
			fprintf(stderr, "oea_cuda_test: out of memory\n");
			return 2;
		}
		host_ref(&tc, NULL, &h);
		if (h.rc != OEA_OK) {
			fprintf(stderr, "oea_cuda_test: host path failed on seed %lu: %s\n", s,
				oea_status_message(h.rc));
			return 1;
		}
		dev_upload(&tc, &d);
		dev_reset(&tc, &d);
		p = dev_problem(&tc, &d);
		rc = oea_route_cuda(&p, stream);
		CK(cudaStreamSynchronize(stream));
		if (rc != OEA_OK) {
			fprintf(stderr, "oea_cuda_test: oea_route_cuda: %s\n", oea_status_message(rc));
			return 1;
		}
		bad += !dev_matches(&tc, &d, &h, "launch", s);

		if (k % 8 == 5 && bad == 0) {
			/* An ABI 1 caller: short struct, garbage where the ABI 2
			 * fields would be; the result is that of no gate. */
			tcase t1 = tc;
			host_out h1;
			t1.p.min_valid_rows = 0;
			host_ref(&t1, NULL, &h1);
			p.struct_size = (uint32_t)OEA_PROBLEM_SIZE_V1;
			p.min_valid_rows = 0x7fffffff;
			p.reserved_abi2 = 77;
			dev_reset(&tc, &d);
			rc = oea_route_cuda(&p, stream);
			CK(cudaStreamSynchronize(stream));
			bad += rc != OEA_OK || !dev_matches(&tc, &d, &h1, "ABI 1 struct", s);
			p = dev_problem(&tc, &d);
			free(h1.ids);
			free(h1.w);
		}

		if (k % 4 == 0 && bad == 0) {
			cudaGraph_t g;
			cudaGraphExec_t ge;
			int rep;

			/* Both capture modes: torch uses Global, others ThreadLocal. */
			CK(cudaStreamBeginCapture(stream, k % 8 == 0 ? cudaStreamCaptureModeGlobal
			                                             : cudaStreamCaptureModeThreadLocal));
			rc = oea_route_cuda(&p, stream);
			CK(cudaStreamEndCapture(stream, &g));
			if (rc != OEA_OK) {
				fprintf(stderr, "oea_cuda_test: captured oea_route_cuda: %s\n",
					oea_status_message(rc));
				return 1;
			}
			CK(cudaGraphInstantiate(&ge, g, 0));
			for (rep = 0; rep < 3 && !bad; rep++) {
				dev_reset(&tc, &d);
				CK(cudaGraphLaunch(ge, stream));
				CK(cudaStreamSynchronize(stream));
				bad += !dev_matches(&tc, &d, &h, "graph replay", s);
			}
			if (tc.p.num_valid_rows && tc.p.n > 0 && !bad) {
				/* Same graph, another batch size: read at replay. */
				int32_t nvr2 = (tc.nvr + 1) % (tc.p.n + 1);
				host_out h2;
				host_ref(&tc, &nvr2, &h2);
				dev_reset(&tc, &d);
				CK(cudaMemcpy(d.nvr, &nvr2, sizeof nvr2, cudaMemcpyHostToDevice));
				CK(cudaGraphLaunch(ge, stream));
				CK(cudaStreamSynchronize(stream));
				bad += !dev_matches(&tc, &d, &h2, "graph replay, new num_valid_rows", s);
				free(h2.ids);
				free(h2.w);
			}
			CK(cudaGraphExecDestroy(ge));
			CK(cudaGraphDestroy(g));
			graphs++;
		}
		dev_free(&d);
		free(h.ids);
		free(h.w);
		tcase_free(&tc);
	}
	CK(cudaStreamDestroy(stream));
	printf("oea_cuda_test: %d cases (%d also as CUDA graphs, replayed 3x): %s\n", k, graphs,
	       bad ? "MISMATCH" : "all bit-identical to the CPU reference");
	return bad ? 1 : 0;
}
