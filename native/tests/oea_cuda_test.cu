/*
 * oea_cuda_test.cu - the CUDA kernel against the CPU reference, bit for bit.
 * Needs a GPU; not run by ctest. Exit status 0 when everything matched, 1 on
 * any mismatch, 2 on usage or CUDA trouble.
 *
 *   oea_cuda_test [--cases N] [--seed S] [--sweep] [--streams N]
 *
 * Every comparison is byte for byte over whole buffers (stride gaps, shared
 * columns, padding rows included), the stats and the totals (ABI 3: T sums,
 * kept weight, changed slots, histogram; every launch adds to them). It runs:
 *   0. the very first call of the process inside a global-mode capture;
 *   1. N random cases of tests/oea_testcase.h (the CPU tests' generator): a
 *      plain launch; every 8th also as an ABI 1 caller (short struct), and
 *      every 8th (others) with OEA_FLAG_COUNT_ONLY: the same stats and
 *      totals, ids and weights left as uploaded;
 *   2. every 4th case captured in a CUDA graph and replayed three times
 *      (determinism), then replayed with num_valid_rows changed on the
 *      device, then with new logits and reordered ids written into the same
 *      buffers (the graph must read its inputs at replay time);
 *   3. --sweep: forced shapes over n in {1, 2, 8, 33, 256, 1024}, E in
 *      {1, 8, 60, 128, 256, 512}, K in {1, 8, 16}, fp32/bf16/fp16 logits,
 *      int32/int64 ids (648 cases, the rest of each case random);
 *   4. --streams N: N pairs of cases launched at once on two streams, then
 *      the same pairs as two graphs replayed at once.
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
	oea_totals *totals;
};

struct host_out {
	unsigned char *ids, *w;
	oea_stats st;
	oea_totals tot; /* one call's, from zero */
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
	memset(&o->tot, 0, sizeof o->tot);
	p = tcase_problem(tc, o->ids, o->w, &o->st);
	p.totals = &o->tot;
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
	CK(cudaMalloc((void **)&d->totals, sizeof(oea_totals)));
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
	CK(cudaMemset(d->totals, 0, sizeof(oea_totals)));
}

static void dev_free(dev_case *d)
{
	cudaFree(d->logits);
	cudaFree(d->ids);
	cudaFree(d->w);
	cudaFree(d->nvr);
	cudaFree(d->stats);
	cudaFree(d->totals);
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
	p.totals = d->totals;
	return p;
}

/* Compares the device buffers with the host result (the device totals with
 * `times` launches' worth of the host call's); prints the first difference. */
static int dev_matches_n(const tcase *tc, const dev_case *d, const host_out *h, const char *what,
			 unsigned long seed, unsigned times)
{
	unsigned char *ids = (unsigned char *)malloc(tc->ids_bytes);
	unsigned char *w = (unsigned char *)malloc(tc->w_bytes);
	oea_stats st;
	oea_totals tot, want = h->tot;
	uint64_t *fw = (uint64_t *)&want;
	size_t f;
	int ok;

	for (f = 0; f < sizeof want / sizeof *fw; f++)
		fw[f] *= times;
	CK(cudaMemcpy(ids, d->ids, tc->ids_bytes, cudaMemcpyDeviceToHost));
	CK(cudaMemcpy(w, d->w, tc->w_bytes, cudaMemcpyDeviceToHost));
	CK(cudaMemcpy(&st, d->stats, sizeof st, cudaMemcpyDeviceToHost));
	CK(cudaMemcpy(&tot, d->totals, sizeof tot, cudaMemcpyDeviceToHost));
	ok = memcmp(ids, h->ids, tc->ids_bytes) == 0 && memcmp(w, h->w, tc->w_bytes) == 0 &&
	     memcmp(&st, &h->st, sizeof st) == 0 && memcmp(&tot, &want, sizeof tot) == 0;
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
		fprintf(stderr, "  totals gpu calls %llu rerouted %llu changed %llu fx %llu undef %llu, "
			"cpu calls %llu rerouted %llu changed %llu fx %llu undef %llu\n",
			(unsigned long long)tot.calls, (unsigned long long)tot.rerouted_rows,
			(unsigned long long)tot.changed_slots, (unsigned long long)tot.kept_fx,
			(unsigned long long)tot.kept_undefined, (unsigned long long)want.calls,
			(unsigned long long)want.rerouted_rows, (unsigned long long)want.changed_slots,
			(unsigned long long)want.kept_fx, (unsigned long long)want.kept_undefined);
	}
	free(ids);
	free(w);
	return ok;
}

static int dev_matches(const tcase *tc, const dev_case *d, const host_out *h, const char *what,
		       unsigned long seed)
{
	return dev_matches_n(tc, d, h, what, seed, 1);
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

/*
 * New inputs in the same buffers: every logit nudged (low mantissa bits
 * flipped, so values, ties and maybe NaN patterns change) and each row's
 * routed ids rotated by one column (same validity, another order, so phase 1
 * is recomputed). The host copy (tc) changes with it.
 */
static void mutate_inputs(tcase *tc, unsigned long seed)
{
	tc_rng r = {seed ^ 0x77u};
	const oea_problem *p = &tc->p;
	size_t esz = p->logits_dtype == OEA_DTYPE_F32 ? 4 : 2, isz = p->ids_dtype == OEA_DTYPE_I64 ? 8 : 4;
	int R = p->top_k - p->num_shared, i, c;
	size_t k;

	for (k = 0; k + esz <= tc->logits_bytes; k += esz)
		tc->logits[k] ^= (unsigned char)(tc_next(&r) & (esz == 4 ? 0xff : 0x07));
	for (i = 0; i < p->n && R > 1; i++) {
		unsigned char *row = tc->ids0 + (size_t)i * (size_t)p->ids_row_stride * isz;
		unsigned char first[8];
		memcpy(first, row, isz);
		for (c = 0; c + 1 < R; c++)
			memcpy(row + (size_t)c * isz, row + (size_t)(c + 1) * isz, isz);
		memcpy(row + (size_t)(R - 1) * isz, first, isz);
	}
}

/* One case, one launch on `stream`, compared with the host. 1 when equal. */
static int run_plain(const tcase *tc, cudaStream_t stream, const char *what, unsigned long seed)
{
	dev_case d;
	host_out h;
	oea_problem p;
	int rc, ok;

	host_ref(tc, NULL, &h);
	if (h.rc != OEA_OK) {
		fprintf(stderr, "oea_cuda_test: host path failed on seed %lu: %s\n", seed,
			oea_status_message(h.rc));
		exit(1);
	}
	dev_upload(tc, &d);
	dev_reset(tc, &d);
	p = dev_problem(tc, &d);
	rc = oea_route_cuda(&p, stream);
	CK(cudaStreamSynchronize(stream));
	ok = rc == OEA_OK && dev_matches(tc, &d, &h, what, seed);
	if (rc != OEA_OK)
		fprintf(stderr, "oea_cuda_test: %s: oea_route_cuda: %s\n", what, oea_status_message(rc));
	dev_free(&d);
	free(h.ids);
	free(h.w);
	return ok;
}

static const tc_force *sweep_shape(int k, tc_force *f)
{
	static const int ns[] = {1, 2, 8, 33, 256, 1024}, es[] = {1, 8, 60, 128, 256, 512}, ks[] = {1, 8, 16};
	f->n = ns[k % 6];
	f->E = es[(k / 6) % 6];
	f->K = ks[(k / 36) % 3];
	f->logits_dtype = (k / 108) % 3;
	f->ids_dtype = (k / 324) % 2 ? OEA_DTYPE_I64 : OEA_DTYPE_I32;
	return f;
}
#define SWEEP_CASES 648

/*
 * Two cases at once on two streams: plain launches, then one graph per
 * stream replayed at once. 1 when both match their host results both times.
 */
static int run_pair(const tcase *a, const tcase *b, cudaStream_t s1, cudaStream_t s2, unsigned long seed)
{
	const tcase *tc[2] = {a, b};
	cudaStream_t st[2] = {s1, s2};
	dev_case d[2];
	host_out h[2];
	oea_problem p[2];
	cudaGraph_t g[2];
	cudaGraphExec_t ge[2];
	int ok = 1, j, round;

	for (j = 0; j < 2; j++) {
		host_ref(tc[j], NULL, &h[j]);
		dev_upload(tc[j], &d[j]);
		p[j] = dev_problem(tc[j], &d[j]);
		CK(cudaStreamBeginCapture(st[j], cudaStreamCaptureModeThreadLocal));
		if (oea_route_cuda(&p[j], st[j]) != OEA_OK)
			ok = 0;
		CK(cudaStreamEndCapture(st[j], &g[j]));
		CK(cudaGraphInstantiate(&ge[j], g[j], 0));
	}
	for (round = 0; round < 2 && ok; round++) {
		for (j = 0; j < 2; j++)
			dev_reset(tc[j], &d[j]);
		CK(cudaDeviceSynchronize());
		for (j = 0; j < 2; j++) {
			if (round == 0)
				ok &= oea_route_cuda(&p[j], st[j]) == OEA_OK;
			else
				CK(cudaGraphLaunch(ge[j], st[j]));
		}
		for (j = 0; j < 2; j++) {
			CK(cudaStreamSynchronize(st[j]));
			ok &= dev_matches(tc[j], &d[j], &h[j], round ? "two streams, graphs" : "two streams", seed);
		}
	}
	for (j = 0; j < 2; j++) {
		CK(cudaGraphExecDestroy(ge[j]));
		CK(cudaGraphDestroy(g[j]));
		dev_free(&d[j]);
		free(h[j].ids);
		free(h[j].w);
	}
	return ok;
}

int main(int argc, char **argv)
{
	int cases = 3000, k, bad = 0, graphs = 0, ndev = 0, sweep = 0, pairs = 0, swept = 0;
	unsigned long seed = 0x5eed0000u;
	cudaStream_t stream, stream2;

	for (k = 1; k < argc; k++) {
		if (!strcmp(argv[k], "--cases") && k + 1 < argc)
			cases = atoi(argv[++k]);
		else if (!strcmp(argv[k], "--seed") && k + 1 < argc)
			seed = strtoul(argv[++k], NULL, 0);
		else if (!strcmp(argv[k], "--sweep"))
			sweep = 1;
		else if (!strcmp(argv[k], "--streams") && k + 1 < argc)
			pairs = atoi(argv[++k]);
		else {
			fprintf(stderr, "usage: %s [--cases N] [--seed S] [--sweep] [--streams N]\n", argv[0]);
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
	CK(cudaStreamCreateWithFlags(&stream2, cudaStreamNonBlocking));
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
			memset(&h1.tot, 0, sizeof h1.tot); /* no totals field: untouched */
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

		if (k % 8 == 3 && bad == 0) {
			/* OEA_FLAG_COUNT_ONLY (liboea 3.1.0): the host call's stats and
			 * totals, ids and weights as they were uploaded. */
			host_out hc = h;
			hc.ids = (unsigned char *)tc.ids0;
			hc.w = (unsigned char *)tc.w0;
			p.flags |= OEA_FLAG_COUNT_ONLY;
			dev_reset(&tc, &d);
			rc = oea_route_cuda(&p, stream);
			CK(cudaStreamSynchronize(stream));
			bad += rc != OEA_OK || !dev_matches(&tc, &d, &hc, "count-only", s);
			p = dev_problem(&tc, &d);
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
				/* The totals are zeroed once: each replay adds. */
				oea_totals keep;
				CK(cudaMemcpy(&keep, d.totals, sizeof keep, cudaMemcpyDeviceToHost));
				dev_reset(&tc, &d);
				if (rep > 0)
					CK(cudaMemcpy(d.totals, &keep, sizeof keep, cudaMemcpyHostToDevice));
				CK(cudaGraphLaunch(ge, stream));
				CK(cudaStreamSynchronize(stream));
				bad += !dev_matches_n(&tc, &d, &h, "graph replay", s, (unsigned)rep + 1);
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
			if (!bad) {
				/* Same graph, new inputs in the same buffers. */
				host_out h3;
				mutate_inputs(&tc, s);
				host_ref(&tc, NULL, &h3);
				CK(cudaMemcpy(d.logits, tc.logits, tc.logits_bytes, cudaMemcpyHostToDevice));
				CK(cudaMemcpy(d.nvr, &tc.nvr, sizeof tc.nvr, cudaMemcpyHostToDevice));
				dev_reset(&tc, &d);
				CK(cudaGraphLaunch(ge, stream));
				CK(cudaStreamSynchronize(stream));
				bad += h3.rc != OEA_OK || !dev_matches(&tc, &d, &h3, "graph replay, new inputs", s);
				free(h3.ids);
				free(h3.w);
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
	printf("oea_cuda_test: %d random cases (%d also as CUDA graphs: 3 replays, new valid-row count, "
	       "new inputs): %s\n", k, graphs, bad ? "MISMATCH" : "all bit-identical to the CPU reference");
	fflush(stdout);

	for (k = 0; sweep && k < SWEEP_CASES && bad < 10; k++) {
		unsigned long s = seed + 0x100000u + (unsigned long)k;
		tc_rng r = {s};
		tc_force f;
		tcase tc;
		if (tcase_random_forced(&tc, &r, 0, sweep_shape(k, &f))) {
			fprintf(stderr, "oea_cuda_test: out of memory\n");
			return 2;
		}
		bad += !run_plain(&tc, stream, "sweep", s);
		tcase_free(&tc);
		swept++;
	}
	if (sweep)
		printf("oea_cuda_test: sweep of %d shapes (n up to 1024, E up to 512, K up to 16, "
		       "fp32/bf16/fp16, int32/int64): %s\n", swept, bad ? "MISMATCH" : "all bit-identical");

	for (k = 0; k < pairs && bad < 10; k++) {
		unsigned long s = seed + 0x200000u + 2u * (unsigned long)k;
		tc_rng r1 = {s}, r2 = {s + 1};
		tcase a, b;
		if (tcase_random(&a, &r1, 300000) || tcase_random(&b, &r2, 300000)) {
			fprintf(stderr, "oea_cuda_test: out of memory\n");
			return 2;
		}
		bad += !run_pair(&a, &b, stream, stream2, s);
		tcase_free(&a);
		tcase_free(&b);
	}
	if (pairs)
		printf("oea_cuda_test: %d case pairs on two streams at once (launches and graphs): %s\n", k,
		       bad ? "MISMATCH" : "all bit-identical");

	CK(cudaStreamDestroy(stream));
	CK(cudaStreamDestroy(stream2));
	printf("oea_cuda_test: %s\n", bad ? "FAIL" : "PASS");
	return bad ? 1 : 0;
}
