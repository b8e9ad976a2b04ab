/*
 * oea_cpu.c - the CPU reference of OEA routing: the oracle for every other
 * path. Plain C, no allocation (all scratch is on the stack, bounded by the
 * OEA_MAX_* limits), no global state.
 *
 * It follows the same two phases as the CUDA kernel and takes every float
 * and every order from oea_row.h; only the loops around them differ (the
 * kernel spreads a row over 32 lanes, this file walks the lanes in turn).
 */
#include <stdint.h>
#include <string.h>

#include "oea.h"
#include "oea_internal.h"
#include "oea_row.h"

#define OEA_MASK_WORDS (OEA_MAX_EXPERTS / 32)

/* What phase 1 leaves for phase 2 (the kernel keeps the same in shared memory). */
typedef struct oea_cpu_rows {
	uint8_t state[OEA_MAX_ROWS]; /* OEA_ROW_* or 0xff when beyond num_valid_rows */
	float m[OEA_MAX_ROWS];       /* softmax row max */
	float s[OEA_MAX_ROWS];       /* softmax row sum */
} oea_cpu_rows;

static int oea_bit(const uint32_t *mask, int e)
{
	return (mask[e >> 5] >> (e & 31)) & 1u;
}

static void oea_set_bit(uint32_t *mask, int e)
{
	mask[e >> 5] |= 1u << (e & 31);
}

static int oea_popcount(const uint32_t *mask)
{
	int w, c = 0;

	for (w = 0; w < OEA_MASK_WORDS; w++)
		c += __builtin_popcount(mask[w]);
	return c;
}

/* Softmax max and sum of a row in the lane order of oea_row.h. */
static void oea_cpu_softmax_stats(const void *row, int dtype, int E, float *m, float *s)
{
	float v[OEA_LANES];
	float mm;
	int lane;

	for (lane = 0; lane < OEA_LANES; lane++)
		v[lane] = oea_lane_max(row, dtype, E, lane);
	mm = oea_tree_max32(v);
	for (lane = 0; lane < OEA_LANES; lane++)
		v[lane] = oea_lane_sum(row, dtype, E, lane, mm);
	*s = oea_tree_sum32(v);
	*m = mm;
}

static int oea_cpu_nonfinite(const void *row, int dtype, int E, const float *bias)
{
	int lane, bad = 0;

	for (lane = 0; lane < OEA_LANES; lane++)
		bad |= oea_lane_nonfinite(row, dtype, E, lane, bias);
	return bad;
}

/*
 * Phase 1 of one row: the k0 routed ids with the highest key, in key order
 * (by rank: expert a's rank is the number of routed experts better than it).
 * Fills id/key/score[0..k0) and the original column of each.
 */
static void oea_cpu_phase1(const oea_problem *p, const void *lrow, const void *irow, int R,
			   float m, float s, int32_t *id, float *key, float *score, int *col)
{
	int32_t rid[OEA_MAX_TOPK];
	float rkey[OEA_MAX_TOPK], rscore[OEA_MAX_TOPK];
	int a, b;

	for (a = 0; a < R; a++) {
		float l;
		rid[a] = (int32_t)oea_id_load(irow, p->ids_dtype, a);
		l = oea_logit(lrow, p->logits_dtype, rid[a]);
		rscore[a] = oea_score(l, p->scoring, m, s);
		rkey[a] = oea_key(l, rscore[a], p->scoring, p->correction_bias, rid[a]);
	}
	for (a = 0; a < R; a++) {
		int rank = 0;
		for (b = 0; b < R; b++)
			rank += oea_better(rkey[b], rid[b], rkey[a], rid[a]);
		if (rank < p->k0) {
			id[rank] = rid[a];
			key[rank] = rkey[a];
			score[rank] = rscore[a];
			col[rank] = a;
		}
	}
}

static int oea_cpu_group_allowed(const void *irow, int ids_dtype, int R, int gsize, int e)
{
	int a;

	for (a = 0; a < R; a++)
		if (oea_id_load(irow, ids_dtype, a) / gsize == e / gsize)
			return 1;
	return 0;
}

/* Phase 2 of one row and its output. */
static void oea_cpu_phase2(const oea_problem *p, int i, const oea_cpu_rows *rows,
			   const uint32_t *u, int R)
{
	const void *lrow = oea_row_ptr(p->logits, p->logits_dtype, p->logits_row_stride, i);
	void *irow = (void *)oea_row_ptr(p->ids, p->ids_dtype, p->ids_row_stride, i);
	float *wrow = (float *)oea_row_ptr(p->weights, OEA_DTYPE_F32, p->weights_row_stride, i);
	int32_t id[OEA_MAX_TOPK];
	float key[OEA_MAX_TOPK], score[OEA_MAX_TOPK];
	int col[OEA_MAX_TOPK];
	uint32_t pmask[OEA_MASK_WORDS] = {0};
	int gsize = p->num_expert_group > 0 ? p->num_experts / p->num_expert_group : 0;
	int want = R - p->k0, c = p->k0, e, a;

	oea_cpu_phase1(p, lrow, irow, R, rows->m[i], rows->s[i], id, key, score, col);
	for (a = 0; a < p->k0; a++)
		oea_set_bit(pmask, id[a]);

	/* Keep the best `want` candidates in id/key/score[k0..k0+want), in key
	 * order, by insertion: a different loop from the kernel's repeated
	 * warp argmax, the same set because the order is total. */
	for (e = 0; e < p->num_experts; e++) {
		float l, sc, k;
		int n_in = c - p->k0, pos;

		if (!oea_bit(u, e) || oea_bit(pmask, e))
			continue;
		if (gsize && !oea_cpu_group_allowed(irow, p->ids_dtype, R, gsize, e))
			continue;
		l = oea_logit(lrow, p->logits_dtype, e);
		sc = oea_score(l, p->scoring, rows->m[i], rows->s[i]);
		k = oea_key(l, sc, p->scoring, p->correction_bias, e);
		if (n_in == want && !oea_better(k, e, key[c - 1], id[c - 1]))
			continue;
		if (n_in < want)
			c++;
		for (pos = c - 1; pos > p->k0 && oea_better(k, e, key[pos - 1], id[pos - 1]); pos--) {
			id[pos] = id[pos - 1];
			key[pos] = key[pos - 1];
			score[pos] = score[pos - 1];
		}
		id[pos] = e;
		key[pos] = k;
		score[pos] = sc;
	}
	/* id[0] is the best phase-1 expert (phase 1 is in key order); the
	 * fillers need the whole batch's U (spec version 3, rule 5). */
	oea_row_finish(c, id, key, score, R, p->renormalize, col[0], score[0], u, p->num_experts,
		       irow, p->ids_dtype, wrow);
}

static int route_host(const oea_problem *caller)
{
	oea_cpu_rows rows;
	oea_problem q;
	const oea_problem *p = &q;
	uint32_t u[OEA_MASK_WORDS] = {0}, tb[OEA_MASK_WORDS] = {0};
	oea_stats st;
	int error, R, nvr, i, a, gated;

	error = oea_problem_load(caller, &q);
	if (error)
		goto done;

	memset(&st, 0, sizeof st);
	R = p->top_k - p->num_shared;
	nvr = p->n;
	if (p->num_valid_rows) {
		/* Read once: another thread may update the counter meanwhile. */
		int v = *(const volatile int32_t *)p->num_valid_rows;
		nvr = v < 0 ? 0 : v < p->n ? v : p->n;
	}

	/* Phase 1 over all rows: validity, T before, softmax statistics, U. */
	for (i = 0; i < p->n; i++) {
		const void *lrow = oea_row_ptr(p->logits, p->logits_dtype, p->logits_row_stride, i);
		const void *irow = oea_row_ptr(p->ids, p->ids_dtype, p->ids_row_stride, i);
		int32_t id[OEA_MAX_TOPK];
		float key[OEA_MAX_TOPK], score[OEA_MAX_TOPK];
		int col[OEA_MAX_TOPK];

		rows.state[i] = i < nvr ? (uint8_t)oea_row_classify(irow, p->ids_dtype, R,
								   p->num_experts)
					: 0xff;
		rows.m[i] = rows.s[i] = 0.0f;
		if (rows.state[i] == OEA_ROW_INVALID)
			st.invalid_rows++;
		if (rows.state[i] != OEA_ROW_VALID)
			continue;
		if (oea_cpu_nonfinite(lrow, p->logits_dtype, p->num_experts, p->correction_bias)) {
			/* Refuse before anything is written: phase 2 has not started. */
			if (p->flags & OEA_FLAG_REJECT_NONFINITE) {
				error = OEA_ERR_NONFINITE;
				goto done;
			}
			st.nonfinite_rows++;
		}
		st.valid_rows++;
		for (a = 0; a < R; a++)
			oea_set_bit(tb, (int)oea_id_load(irow, p->ids_dtype, a));
		if (p->k0 >= R)
			continue;
		if (p->scoring == OEA_SCORING_SOFTMAX)
			oea_cpu_softmax_stats(lrow, p->logits_dtype, p->num_experts, &rows.m[i],
					      &rows.s[i]);
		oea_cpu_phase1(p, lrow, irow, R, rows.m[i], rows.s[i], id, key, score, col);
		for (a = 0; a < p->k0; a++)
			oea_set_bit(u, id[a]);
	}

	/* The minimum-batch gate counts the rows phase 1 found processable. */
	gated = p->min_valid_rows > 0 && st.valid_rows < (uint32_t)p->min_valid_rows;
	st.gated = (uint32_t)gated;
	st.t_before = (uint32_t)oea_popcount(tb);
	/* T after counts the rewritten rows' distinct ids: all of U (every
	 * member is some row's phase-1 expert), plus the R - |U| fillers from
	 * outside U that every row takes when |U| < R (spec version 3). */
	if (p->k0 >= R || gated || st.valid_rows == 0) {
		st.t_after = st.t_before;
	} else {
		int tu = oea_popcount(u);
		st.t_after = (uint32_t)(tu < R ? R : tu);
	}

	/* Phase 2: every row sees the complete U. */
	if (p->k0 < R && !gated)
		for (i = 0; i < p->n; i++)
			if (rows.state[i] == OEA_ROW_VALID)
				oea_cpu_phase2(p, i, &rows, u, R);

	if (p->stats)
		memcpy(p->stats, &st, sizeof st);
done:
	return error;
}

/*
 * The reference's bits must not depend on the calling thread's floating-point
 * mode: torch.set_flush_denormal(True) or a library built with -ffast-math
 * sets FTZ/DAZ for the whole process, which would flush the subnormal results
 * of oea_exp that the GPU path (built with --ftz=false) keeps. So the call
 * runs with FTZ and DAZ cleared and restores the caller's mode on return.
 */
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
int oea_route_host(const oea_problem *p)
{
	unsigned csr = _mm_getcsr();
	_mm_setcsr(csr & ~0x8040u); /* bit 15 FTZ, bit 6 DAZ */
	int error = route_host(p);
	_mm_setcsr(csr);
	return error;
}
#elif defined(__aarch64__)
int oea_route_host(const oea_problem *p)
{
	uint64_t fpcr;
	__asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
	__asm__ volatile("msr fpcr, %0" ::"r"(fpcr & ~(UINT64_C(1) << 24))); /* FZ */
	int error = route_host(p);
	__asm__ volatile("msr fpcr, %0" ::"r"(fpcr));
	return error;
}
#else
int oea_route_host(const oea_problem *p)
{
	return route_host(p);
}
#endif
