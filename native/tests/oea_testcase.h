/*
 * oea_testcase.h - random OEA problems for the tests and the GPU checks.
 *
 * One generator so that the CPU tests and the CUDA test program exercise the
 * same cases (same seed, same problem). It covers every option of the ABI:
 * dtypes, strides wider than rows (the gaps are filled with random bytes and
 * must survive), bias, groups, shared columns, padding and invalid rows,
 * num_valid_rows, ties, NaN/+-inf logits, fp16 subnormals.
 * Header-only; plain C, also compiled as CUDA C++.
 */
#ifndef OEA_TESTCASE_H
#define OEA_TESTCASE_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "oea.h"

typedef struct tc_rng {
	uint64_t s;
} tc_rng;

static inline uint64_t tc_next(tc_rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in [lo, hi]. */
static inline int tc_int(tc_rng *r, int lo, int hi)
{
	return lo + (int)(tc_next(r) % (uint64_t)(hi - lo + 1));
}

static inline float tc_unit(tc_rng *r)
{
	return (float)((tc_next(r) >> 40) * (1.0 / 16777216.0));
}

static inline float tc_gauss(tc_rng *r)
{
	float a = tc_unit(r), b = tc_unit(r);
	if (a < 1e-7f)
		a = 1e-7f;
	return sqrtf(-2.0f * logf(a)) * cosf(6.2831853f * b);
}

static inline int tc_chance(tc_rng *r, int percent)
{
	return tc_int(r, 0, 99) < percent;
}

/* fp32 -> fp16 bits, truncating (the exact value does not matter, only that
 * the library and the oracles read the same bits). */
static inline uint16_t tc_f16_bits(float v)
{
	uint32_t u;
	uint16_t sign;
	float a;
	int ex;

	memcpy(&u, &v, sizeof u);
	sign = (uint16_t)((u >> 16) & 0x8000u);
	if (v != v)
		return 0x7e00u;
	a = fabsf(v);
	if (a >= 65520.0f)
		return sign | 0x7c00u;
	if (a < 6.103515625e-05f) /* subnormal half */
		return sign | (uint16_t)(a * 16777216.0f);
	frexpf(a, &ex); /* a = f * 2^ex, f in [0.5, 1) */
	return sign | (uint16_t)((ex - 1 + 15) << 10) |
	       (uint16_t)((uint32_t)(ldexpf(a, 11 - ex)) & 0x3ffu);
}

typedef struct tcase {
	oea_problem p;            /* pointers refer to the original buffers */
	unsigned char *logits;
	float *bias;
	unsigned char *ids0, *w0; /* originals; never handed out for writing */
	size_t logits_bytes, ids_bytes, w_bytes;
	int32_t nvr;
} tcase;

static inline void tcase_free(tcase *tc)
{
	free(tc->logits);
	free(tc->bias);
	free(tc->ids0);
	free(tc->w0);
	memset(tc, 0, sizeof *tc);
}

/* A problem on the case whose ids/weights/stats point to the given copies. */
static inline oea_problem tcase_problem(const tcase *tc, void *ids, void *w, oea_stats *st)
{
	oea_problem p = tc->p;
	p.ids = ids;
	p.weights = w;
	p.stats = st;
	return p;
}

static inline void tc_fill_random(tc_rng *r, unsigned char *b, size_t n)
{
	size_t i;
	for (i = 0; i < n; i++)
		b[i] = (unsigned char)tc_next(r);
}

static inline int tc_pick_divisor(tc_rng *r, int E)
{
	int d[OEA_MAX_EXPERTS], nd = 0, g;
	for (g = 1; g <= E; g++)
		if (E % g == 0)
			d[nd++] = g;
	return d[tc_int(r, 0, nd - 1)];
}

/*
 * Shape and dtypes to force on a random case (the GPU program's sweep over
 * the ranges that matter); -1 leaves a field random. The random draws are
 * made either way, so a case with nothing forced is the plain random case.
 */
typedef struct tc_force {
	int n, E, K, logits_dtype, ids_dtype;
} tc_force;

static inline int tcase_random_forced(tcase *tc, tc_rng *r, long max_cells, const tc_force *f);

/*
 * A random case. max_cells bounds n * E (the cost of one case).
 * Returns 0, or -1 when out of memory.
 */
static inline int tcase_random(tcase *tc, tc_rng *r, long max_cells)
{
	return tcase_random_forced(tc, r, max_cells, NULL);
}

static inline int tcase_random_forced(tcase *tc, tc_rng *r, long max_cells, const tc_force *f)
{
	oea_problem *p = &tc->p;
	int n, E, K, S, R, i, e, c, mode, esize, isize;
	float *vals = NULL;
	int error = 0;

	memset(tc, 0, sizeof *tc);
	memset(p, 0, sizeof *p);
	p->struct_size = sizeof *p;

	switch (tc_int(r, 0, 9)) {
	case 0: case 1: case 2: E = tc_int(r, 1, 40); break;
	case 3: case 4: E = 32 * tc_int(r, 1, 16); break;
	case 5: E = tc_chance(r, 50) ? 256 : 512; break;
	default: E = tc_int(r, 1, OEA_MAX_EXPERTS); break;
	}
	switch (tc_int(r, 0, 9)) {
	case 0: case 1: n = 1; break;
	case 2: case 3: case 4: n = tc_int(r, 2, 16); break;
	case 5: case 6: n = tc_int(r, 17, 128); break;
	case 7: n = tc_chance(r, 50) ? 0 : tc_int(r, 1, 8); break;
	default: n = tc_int(r, 1, OEA_MAX_ROWS); break;
	}
	if (f && f->E > 0)
		E = f->E;
	if (f && f->n >= 0)
		n = f->n;
	else if ((long)n * E > max_cells)
		n = (int)(max_cells / E) > 0 ? (int)(max_cells / E) : 1;
	K = tc_int(r, 1, OEA_MAX_TOPK);
	if (f && f->K > 0)
		K = f->K;
	S = tc_chance(r, 60) ? 0 : tc_int(r, 0, K - 1);
	if (K - S > E)
		K = S + E;
	R = K - S;
	p->n = n;
	p->num_experts = E;
	p->top_k = K;
	p->num_shared = S;
	p->k0 = tc_chance(r, 10) ? R + tc_int(r, 0, 2) : tc_int(r, 1, R);
	if (tc_chance(r, 10))
		p->k0 = 1;
	p->scoring = tc_int(r, 0, 1);
	p->renormalize = tc_int(r, 0, 1);
	if (tc_chance(r, 30)) {
		p->num_expert_group = tc_pick_divisor(r, E);
		p->topk_group = tc_int(r, 1, p->num_expert_group);
	}
	p->logits_dtype = tc_int(r, 0, 2);
	p->ids_dtype = tc_chance(r, 50) ? OEA_DTYPE_I32 : OEA_DTYPE_I64;
	if (f && f->logits_dtype >= 0)
		p->logits_dtype = f->logits_dtype;
	if (f && f->ids_dtype >= 0)
		p->ids_dtype = f->ids_dtype;
	p->weights_dtype = OEA_DTYPE_F32;
	p->logits_row_stride = E + (tc_chance(r, 30) ? tc_int(r, 1, 5) : 0);
	p->ids_row_stride = K + (tc_chance(r, 30) ? tc_int(r, 1, 3) : 0);
	p->weights_row_stride = K + (tc_chance(r, 30) ? tc_int(r, 1, 3) : 0);

	esize = p->logits_dtype == OEA_DTYPE_F32 ? 4 : 2;
	isize = p->ids_dtype == OEA_DTYPE_I64 ? 8 : 4;
	/* +1 row so that an empty problem still has valid (unused) buffers. */
	tc->logits_bytes = (size_t)(n + 1) * (size_t)p->logits_row_stride * (size_t)esize;
	tc->ids_bytes = (size_t)(n + 1) * (size_t)p->ids_row_stride * (size_t)isize;
	tc->w_bytes = (size_t)(n + 1) * (size_t)p->weights_row_stride * sizeof(float);
	tc->logits = (unsigned char *)malloc(tc->logits_bytes);
	tc->ids0 = (unsigned char *)malloc(tc->ids_bytes);
	tc->w0 = (unsigned char *)malloc(tc->w_bytes);
	vals = (float *)malloc(sizeof(float) * (size_t)E);
	if (!tc->logits || !tc->ids0 || !tc->w0 || !vals) {
		error = -1;
		goto done;
	}
	/* Gaps between rows keep random bytes: they must come back unchanged. */
	tc_fill_random(r, tc->logits, tc->logits_bytes);
	tc_fill_random(r, tc->ids0, tc->ids_bytes);
	tc_fill_random(r, tc->w0, tc->w_bytes);

	if (tc_chance(r, 40)) {
		tc->bias = (float *)malloc(sizeof(float) * (size_t)E);
		if (!tc->bias) {
			error = -1;
			goto done;
		}
		for (e = 0; e < E; e++)
			tc->bias[e] = tc_chance(r, 20) ? 0.0f : 0.05f * tc_gauss(r);
		if (tc_chance(r, 3))
			tc->bias[tc_int(r, 0, E - 1)] = tc_chance(r, 50) ? NAN : INFINITY;
	}

	mode = tc_int(r, 0, 5); /* how the logits look */
	for (i = 0; i < n; i++) {
		unsigned char *lrow = tc->logits + (size_t)i * (size_t)p->logits_row_stride * esize;
		unsigned char *irow = tc->ids0 + (size_t)i * (size_t)p->ids_row_stride * isize;
		float *wrow = (float *)(tc->w0 + (size_t)i * (size_t)p->weights_row_stride * 4);
		int32_t rid[OEA_MAX_TOPK];
		int used[OEA_MAX_EXPERTS];
		int rowkind = tc_int(r, 0, 99);

		for (e = 0; e < E; e++) {
			float v;
			switch (mode) {
			case 0: /* ties: a few levels */
				v = (float)tc_int(r, -3, 3) * 0.5f;
				break;
			case 1: /* all equal */
				v = 1.0f;
				break;
			case 2: /* with non-finite values */
				v = 2.0f * tc_gauss(r);
				if (tc_chance(r, 3))
					v = tc_chance(r, 50) ? -INFINITY : (tc_chance(r, 50) ? NAN : INFINITY);
				break;
			case 3: /* wide range: exp under/overflow, subnormal scores */
				v = 40.0f * tc_gauss(r);
				break;
			default:
				v = 2.0f * tc_gauss(r);
				break;
			}
			if (mode == 2 && rowkind < 3)
				v = -INFINITY; /* a whole row of -inf */
			vals[e] = v;
			if (p->logits_dtype == OEA_DTYPE_F32) {
				memcpy(lrow + 4 * e, &v, 4);
			} else if (p->logits_dtype == OEA_DTYPE_BF16) {
				uint32_t u;
				uint16_t h;
				memcpy(&u, &v, 4);
				h = (uint16_t)(u >> 16);
				memcpy(lrow + 2 * e, &h, 2);
			} else {
				uint16_t h = tc_f16_bits(v);
				if (mode == 3 && tc_chance(r, 5))
					h = (uint16_t)tc_int(r, 1, 0x3ff); /* fp16 subnormal */
				memcpy(lrow + 2 * e, &h, 2);
			}
		}
		/* Routed ids: the top-R by value (as a framework would), or any
		 * distinct experts. */
		memset(used, 0, sizeof(int) * (size_t)E);
		for (c = 0; c < R; c++) {
			int best = -1;
			if (tc_chance(r, 70)) {
				for (e = 0; e < E; e++)
					if (!used[e] && (best < 0 || vals[e] > vals[best]))
						best = e;
			}
			if (best < 0)
				do
					best = tc_int(r, 0, E - 1);
				while (used[best]);
			used[best] = 1;
			rid[c] = best;
		}
		if (rowkind >= 90) /* padding */
			rid[tc_int(r, 0, R - 1)] = -tc_int(r, 1, 3);
		else if (rowkind >= 86 && R > 1) /* duplicate */
			rid[tc_int(r, 1, R - 1)] = rid[0];
		else if (rowkind >= 83) /* out of range */
			rid[tc_int(r, 0, R - 1)] = E + tc_int(r, 0, 2);
		for (c = 0; c < K; c++) {
			int32_t v = c < R ? rid[c] : E + c; /* shared columns: never read */
			if (isize == 8) {
				int64_t v64 = v;
				memcpy(irow + 8 * c, &v64, 8);
			} else {
				memcpy(irow + 4 * c, &v, 4);
			}
			wrow[c] = tc_chance(r, 2) ? 0.0f : 0.01f + tc_unit(r);
		}
	}

	if (tc_chance(r, 50)) {
		tc->nvr = tc_chance(r, 20) ? tc_int(r, -1, n + 2) : tc_int(r, 0, n);
		p->num_valid_rows = &tc->nvr;
	}
	/* The minimum-batch gate (ABI 2): drawn last so that the cases above
	 * stay what they were. Around the number of processed rows, so that
	 * both sides of the gate are common; <= 0 means no gate. */
	if (tc_chance(r, 25))
		p->min_valid_rows = tc_chance(r, 20) ? tc_int(r, -2, 0) : tc_int(r, 1, n + 2);
	p->logits = tc->logits;
	p->correction_bias = tc->bias;
	p->ids = tc->ids0;
	p->weights = tc->w0;
done:
	free(vals);
	if (error)
		tcase_free(tc);
	return error;
}

#endif /* OEA_TESTCASE_H */
