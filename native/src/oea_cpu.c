/*
 * oea_cpu.c - the CPU reference of OEA routing: the oracle for every other
 * path. Plain C, no allocation (all scratch is on the stack, bounded by the
 * OEA_MAX_* limits: about 30 KB), no global state.
 *
 * It follows the same two phases as the CUDA kernel and takes every float
 * and every order from oea_row.h; only the loops around them differ (the
 * kernel spreads a row over 32 lanes, this file advances four lanes per
 * vector operation with oea_simd.h, whose lanes compute oea_row.h's scalar
 * expressions bit for bit). Where the time goes and why each fast path
 * exists: docs/performance.md ("CPU reference time per call").
 */
#include <stdint.h>
#include <string.h>

#include "oea.h"
#include "oea_internal.h"
#include "oea_row.h"
#include "oea_simd.h"

#define OEA_MASK_WORDS (OEA_MAX_EXPERTS / 32)

/*
 * What phase 1 leaves for phase 2 (the kernel keeps the same in shared
 * memory). Phase 1's order is kept as the routed columns of P_i in key
 * order, 4 bits each (R <= 16, so k0 <= 15 columns fit in 60 bits): phase 2
 * re-reads those k0 keys and scores instead of ranking the row again.
 */
typedef struct oea_cpu_rows {
	uint8_t state[OEA_MAX_ROWS]; /* OEA_ROW_* or 0xff when beyond num_valid_rows */
	float m[OEA_MAX_ROWS];       /* softmax row max */
	float s[OEA_MAX_ROWS];       /* softmax row sum */
	uint64_t p1[OEA_MAX_ROWS];   /* phase 1: column of rank r in bits 4r..4r+3 */
} oea_cpu_rows;

static int oea_bit(const uint32_t *mask, int e)
{
	return (mask[e >> 5] >> (e & 31)) & 1u;
}

static void oea_set_bit(uint32_t *mask, int e)
{
	mask[e >> 5] |= 1u << (e & 31);
}

/* Sets bits [lo, hi). */
static void oea_set_range(uint32_t *mask, int lo, int hi)
{
	for (; lo < hi && (lo & 31); lo++)
		oea_set_bit(mask, lo);
	for (; lo + 32 <= hi; lo += 32)
		mask[lo >> 5] = ~0u;
	for (; lo < hi; lo++)
		oea_set_bit(mask, lo);
}

/* Bits set in the first `words` words (the rest are zero). */
static int oea_popcount(const uint32_t *mask, int words)
{
	int w, c = 0;

	for (w = 0; w < words; w++)
		c += __builtin_popcount(mask[w]);
	return c;
}

/*
 * oea_row_classify with the ids loaded once and duplicates found by a bit
 * mask over E instead of comparing every pair: padding (a negative id) first,
 * then an id >= E, then a duplicate, as there.
 */
static int oea_cpu_classify(const void *irow, int ids_dtype, int R, int E)
{
	int64_t id[OEA_MAX_TOPK];
	uint32_t seen[OEA_MASK_WORDS] = {0};
	int a, bad = 0;

	for (a = 0; a < R; a++) {
		id[a] = oea_id_load(irow, ids_dtype, a);
		if (id[a] < 0)
			return OEA_ROW_PADDING;
		bad |= id[a] >= E;
	}
	if (bad)
		return OEA_ROW_INVALID;
	for (a = 0; a < R; a++) {
		if (oea_bit(seen, (int)id[a]))
			return OEA_ROW_INVALID;
		oea_set_bit(seen, (int)id[a]);
	}
	return OEA_ROW_VALID;
}

/*
 * A row's logits as fp32 in `lf` (the conversions of oea_logit), followed by
 * zeros up to a multiple of 4, so that 4-wide loads never leave the buffer.
 */
static void oea_cpu_load_row(const void *row, int dtype, int E, float *lf)
{
	int e;

	if (dtype == OEA_DTYPE_F32) {
		memcpy(lf, row, sizeof(float) * (size_t)E);
	} else {
		for (e = 0; e < E; e++)
			lf[e] = oea_logit(row, dtype, e);
	}
	for (e = E; e & 3; e++)
		lf[e] = 0.0f;
}

/*
 * oea_tree_max32 (is_max) or oea_tree_sum32 of the 32 lanes held four per
 * vector in acc[0..7]: the same steps v[j] = op(v[j], v[j + off]) for off =
 * 16, 8, 4 (four lanes per operation), then 2 and 1.
 */
static float oea_cpu_tree32(oea_v4f *acc, int is_max)
{
	float v[4];
	int off, q;

	for (off = OEA_LANES / 8; off > 0; off /= 2)
		for (q = 0; q < off; q++)
			acc[q] = is_max ? oea_v4f_sel(acc[q + off] > acc[q], acc[q + off], acc[q])
					: acc[q] + acc[q + off];
	oea_v4f_store(v, acc[0]);
	for (off = 2; off > 0; off /= 2)
		for (q = 0; q < off; q++)
			v[q] = is_max ? oea_max2(v[q], v[q + off]) : v[q] + v[q + off];
	return v[0];
}

/*
 * Softmax max and sum of a row in the lane order of oea_row.h (lane j takes
 * experts j, j + 32, ... in turn, then the butterfly): lane j's running value
 * sits in lane j % 4 of acc[j / 4], so each vector operation advances four
 * lanes by one step, as oea_lane_max and oea_lane_sum do one lane at a time.
 * Lanes past E keep their value (no step), as the scalar loops make none.
 */
static void oea_cpu_softmax_stats(const float *lf, int E, float *m, float *s)
{
	const oea_v4i iota = {0, 1, 2, 3};
	oea_v4f acc[OEA_LANES / 4], lo = oea_v4f_splat(0.0f);
	oea_v4i nan = oea_v4i_splat(0);
	float mm, low[4];
	int e, q, plain, full = E & ~3;

	for (q = 0; q < OEA_LANES / 4; q++)
		acc[q] = oea_v4f_splat(oea_f_from_bits(0xff800000u)); /* -inf */
	for (e = 0; e < full; e += 4) {
		oea_v4f x = oea_v4f_load(lf + e);
		q = (e / 4) % (OEA_LANES / 4);
		acc[q] = oea_v4f_sel(x > acc[q], x, acc[q]); /* oea_max2(acc, x) */
		lo = oea_v4f_sel(x < lo, x, lo);
		nan |= x != x;
	}
	if (full < E) {
		oea_v4f x = oea_v4f_load(lf + full); /* lanes past E hold 0 */
		q = (full / 4) % (OEA_LANES / 4);
		acc[q] = oea_v4f_sel((iota + full < E) & (x > acc[q]), x, acc[q]);
		lo = oea_v4f_sel(x < lo, x, lo);
		nan |= x != x;
	}
	mm = oea_cpu_tree32(acc, 1);
	/* Every l - m lies in [low - m, 0] (rounding is monotonic, m is the
	 * largest number): when low - m >= -87 (so no NaN and m finite either),
	 * all of them take oea_exp's plain path, and no lane needs checking. */
	oea_v4f_store(low, lo);
	for (q = 1; q < 4; q++)
		low[0] = low[q] < low[0] ? low[q] : low[0];
	plain = !oea_v4_any(nan) && low[0] - mm >= -87.0f;
	for (q = 0; q < OEA_LANES / 4; q++)
		acc[q] = oea_v4f_splat(0.0f);
	if (plain) {
		for (e = 0; e < full; e += 4) {
			q = (e / 4) % (OEA_LANES / 4);
			acc[q] = acc[q] + oea_exp4_plain(oea_v4f_load(lf + e) - mm);
		}
	} else {
		for (e = 0; e < full; e += 4) {
			q = (e / 4) % (OEA_LANES / 4);
			acc[q] = acc[q] + oea_exp4(oea_v4f_load(lf + e) - mm);
		}
	}
	if (full < E) {
		q = (full / 4) % (OEA_LANES / 4);
		acc[q] = oea_v4f_sel(iota + full < E, acc[q] + oea_exp4(oea_v4f_load(lf + full) - mm),
				     acc[q]);
	}
	*s = oea_cpu_tree32(acc, 0);
	*m = mm;
}

/* The non-finite flag of oea_lane_nonfinite over all lanes: some logit is
 * NaN or +-inf (the bias's part is the same for every row: bias_bad). */
static int oea_cpu_nonfinite(const float *lf, int E, int bias_bad)
{
	oea_v4i fin = oea_v4i_splat(-1);
	int e;

	/* The zero padding after E is finite. */
	for (e = 0; e < E; e += 4) {
		oea_v4f x = oea_v4f_load(lf + e);
		fin &= x - x == 0.0f; /* oea_isfinite */
	}
	return bias_bad || oea_v4_any(~fin);
}

/*
 * Phase 1 of one row: the k0 routed ids with the highest key. Returns their
 * columns in key order, 4 bits each. The routed entries are put in key order
 * by insertion (the order is total, so any sort gives this order). With
 * softmax and no bias the key is the logit, so no score is computed here.
 */
static uint64_t oea_cpu_phase1(const oea_problem *p, const float *lf, const void *irow, int R,
			       float m, float s)
{
	int32_t rid[OEA_MAX_TOPK];
	float rkey[OEA_MAX_TOPK];
	int col[OEA_MAX_TOPK];
	int need_score = p->correction_bias || p->scoring == OEA_SCORING_SIGMOID;
	uint64_t cols = 0;
	int a, b;

	for (a = 0; a < R; a++) {
		int32_t e = (int32_t)oea_id_load(irow, p->ids_dtype, a);
		float l = lf[e], sc = 0.0f, k;
		if (need_score)
			sc = oea_score(l, p->scoring, m, s);
		k = oea_key(l, sc, p->scoring, p->correction_bias, e);
		for (b = a; b > 0 && oea_better(k, e, rkey[b - 1], rid[b - 1]); b--) {
			rid[b] = rid[b - 1];
			rkey[b] = rkey[b - 1];
			col[b] = col[b - 1];
		}
		rid[b] = e;
		rkey[b] = k;
		col[b] = a;
	}
	for (a = 0; a < p->k0; a++)
		cols |= (uint64_t)col[a] << (4 * a);
	return cols;
}

/*
 * Puts candidate (e, k, sc) into the best `want` held in id/key/score
 * [k0..k0+want), kept in key order; c is k0 + the number held. Returns the
 * new c.
 */
static int oea_cpu_offer(int k0, int want, int c, int32_t *id, float *key, float *score, int e,
			 float k, float sc)
{
	int pos;

	if (c - k0 == want && !oea_better(k, e, key[c - 1], id[c - 1]))
		return c;
	if (c - k0 < want)
		c++;
	for (pos = c - 1; pos > k0 && oea_better(k, e, key[pos - 1], id[pos - 1]); pos--) {
		id[pos] = id[pos - 1];
		key[pos] = key[pos - 1];
		score[pos] = score[pos - 1];
	}
	id[pos] = e;
	key[pos] = k;
	score[pos] = sc;
	return c;
}

/*
 * Of the candidates `bits` of word w (experts 32w..32w+31), those whose key
 * may rank before the threshold `thr`: those not below it (NaN keys compare
 * false and are kept for oea_better). Four keys per comparison.
 */
static uint32_t oea_cpu_hits(const float *kr, int w, uint32_t bits, float thr)
{
	oea_v4f t = oea_v4f_splat(thr);
	uint32_t h = 0;
	int b;

	for (b = 0; b < 32; b += 4)
		h |= (uint32_t)oea_v4_mask(~(oea_v4f_load(kr + 32 * w + b) < t)) << b;
	return h & bits;
}

/*
 * The kept weight of a re-routed row (spec rule 9), its first half, before
 * the row is rewritten: the changed slots (R - |O ∩ S|: P_i is in both, so
 * only the chosen candidates id[k0..c) are looked up in O, the row's
 * original ids as a bit mask) and, when a slot changed, den = the original
 * experts' scores summed in column order. An original's score is sr[e] when
 * phase 2 computed the row's (sr non-NULL), else oea_score4 of its logit
 * (each lane the bits of oea_score, as the kernel's per-lane score). Most
 * rows of a large batch change nothing and stop at the count.
 */
static int oea_cpu_changed(const oea_problem *p, const void *irow, int R, int c,
			   const int32_t *id, const uint32_t *omask, const float *sr,
			   const float *lf, float m, float s, float *den)
{
	_Alignas(16) float osc[OEA_MAX_TOPK];
	int a, changed = R - p->k0;

	for (a = p->k0; a < c; a++)
		changed -= oea_bit(omask, id[a]);
	if (changed == 0)
		return 0;
	for (a = 0; a < R; a++) {
		int e = (int)oea_id_load(irow, p->ids_dtype, a);
		osc[a] = sr ? sr[e] : lf[e];
	}
	for (a = R; a & 3; a++)
		osc[a] = 0.0f;
	if (!sr)
		for (a = 0; a < R; a += 4)
			oea_v4f_store(osc + a, oea_score4(oea_v4f_load(osc + a), p->scoring, m, s));
	*den = 0.0f;
	for (a = 0; a < R; a++)
		*den = *den + osc[a];
	return changed;
}

/*
 * Its second half, after oea_row_finish sorted the selection: num = the
 * selected scores in output order, kept = num / den, and the row's figures
 * added to the caller's totals (rule 10; phase 2 runs only after every check
 * that can fail the call, so a failed call still adds nothing).
 */
static void oea_cpu_kept(oea_totals *t, int changed, int c, const float *score, float den)
{
	float num = 0.0f, kept = 1.0f;
	int a;

	t->rerouted_rows++;
	t->changed_slots += (uint64_t)changed;
	if (changed) {
		for (a = 0; a < c; a++)
			num = num + score[a];
		if (!oea_kept_divisible(num, den) || !oea_isfinite(kept = num / den)) {
			t->kept_undefined++;
			return;
		}
	}
	t->kept_fx += oea_kept_fx(kept);
	t->kept_hist[oea_kept_bucket(kept)]++;
}

/*
 * Phase 2 of one row and its output. The candidates are U \ P_i within the
 * row's groups; the best `want` of them are kept by insertion (the kernel
 * uses a repeated warp argmax: the same set, the order being total). In a
 * large batch U covers nearly every expert, so that scan is the cost; what
 * keeps it cheap without changing what is selected:
 *  - the row's own routed experts outside P_i are offered first: a
 *    framework routed them for their high keys, so once `want` are held the
 *    threshold (the last key held) is high;
 *  - from then on only the candidates whose key is not below the threshold
 *    are offered: they are found four keys per comparison (oea_cpu_hits)
 *    a word of 32 experts at a time, so a typical row offers next to none;
 *  - the keys are computed 4-wide for the whole row (oea_simd.h), and not
 *    at all with softmax and no bias, where the key is the logit.
 */
static void oea_cpu_phase2(const oea_problem *p, int i, const oea_cpu_rows *rows,
			   const uint32_t *u, const float *bias, int R, oea_totals *totals)
{
	const void *lrow = oea_row_ptr(p->logits, p->logits_dtype, p->logits_row_stride, i);
	void *irow = (void *)oea_row_ptr(p->ids, p->ids_dtype, p->ids_row_stride, i);
	float *wrow = (float *)oea_row_ptr(p->weights, OEA_DTYPE_F32, p->weights_row_stride, i);
	_Alignas(16) float lf[OEA_MAX_EXPERTS + 32];
	_Alignas(16) float kbuf[OEA_MAX_EXPERTS + 32], sr[OEA_MAX_EXPERTS + 32];
	const float *kr = lf; /* the keys of the row's experts */
	int32_t id[OEA_MAX_TOPK];
	float key[OEA_MAX_TOPK], score[OEA_MAX_TOPK];
	uint32_t cand[OEA_MASK_WORDS];
	uint32_t pmask[OEA_MASK_WORDS] = {0}, allow[OEA_MASK_WORDS] = {0};
	uint32_t omask[OEA_MASK_WORDS]; /* the row's original ids (totals only) */
	int64_t ids_copy[OEA_MAX_TOPK]; /* OEA_FLAG_COUNT_ONLY's copy of the row */
	float w_copy[OEA_MAX_TOPK];
	float den = 0.0f;
	float m = rows->m[i], s = rows->s[i];
	int E = p->num_experts, words = (E + 31) / 32;
	int gsize = p->num_expert_group > 0 ? E / p->num_expert_group : 0;
	/* Softmax without a bias ranks by the logit: no score until selected. */
	int logit_key = !p->correction_bias && p->scoring == OEA_SCORING_SOFTMAX;
	int k0 = p->k0, want = R - k0, c = k0, col0 = (int)(rows->p1[i] & 15u), a, w, e, changed = 0;

	oea_cpu_load_row(lrow, p->logits_dtype, E, lf);
	for (e = (E + 3) & ~3; e < 32 * words; e++)
		lf[e] = 0.0f; /* whole words for oea_cpu_hits */
	if (!logit_key) {
		for (e = 0; e < 32 * words; e += 4) {
			oea_v4f sc = oea_score4(oea_v4f_load(lf + e), p->scoring, m, s);
			oea_v4f_store(sr + e, sc);
			/* oea_key: score + bias (bias is padded to whole words) */
			oea_v4f_store(kbuf + e, bias ? sc + oea_v4f_load(bias + e) : sc);
		}
		kr = kbuf;
	}

	/* P_i again from phase 1's columns: the same ids and keys. */
	for (a = 0; a < k0; a++) {
		int col = (int)((rows->p1[i] >> (4 * a)) & 15u);
		id[a] = (int32_t)oea_id_load(irow, p->ids_dtype, col);
		key[a] = kr[id[a]];
		score[a] = logit_key ? 0.0f : sr[id[a]];
		oea_set_bit(pmask, id[a]);
	}

	/* The row's candidates: U \ P_i within the groups of its routed ids. */
	if (gsize)
		for (a = 0; a < R; a++) {
			int g = (int)oea_id_load(irow, p->ids_dtype, a) / gsize;
			oea_set_range(allow, g * gsize, (g + 1) * gsize);
		}
	for (w = 0; w < words; w++)
		cand[w] = u[w] & ~pmask[w] & (gsize ? allow[w] : ~0u);

	/* The row's own routed candidates first (each taken out of the scan). */
	if (totals)
		memset(omask, 0, sizeof(uint32_t) * (size_t)words);
	for (a = 0; a < R; a++) {
		e = (int)oea_id_load(irow, p->ids_dtype, a);
		if (totals)
			oea_set_bit(omask, e);
		if (!oea_bit(cand, e))
			continue;
		cand[e >> 5] &= ~(1u << (e & 31));
		c = oea_cpu_offer(k0, want, c, id, key, score, e, kr[e], logit_key ? 0.0f : sr[e]);
	}

	/* Then every other candidate that may still rank: all of them while
	 * fewer than `want` are held; once `want` are, a word's candidates are
	 * first narrowed to those at or above the threshold (the last key held,
	 * which only rises), and again when the word itself fills the set. */
	for (w = 0; w < words; w++) {
		uint32_t hit = cand[w];
		if (hit && c - k0 == want)
			hit = oea_cpu_hits(kr, w, hit, key[c - 1]);
		while (hit) {
			int full = c - k0 == want;
			e = 32 * w + __builtin_ctz(hit);
			hit &= hit - 1;
			c = oea_cpu_offer(k0, want, c, id, key, score, e, kr[e],
					  logit_key ? 0.0f : sr[e]);
			if (!full && c - k0 == want)
				hit = oea_cpu_hits(kr, w, hit, key[c - 1]);
		}
	}
	/* With the logit as key the scores are computed once selected, 4-wide:
	 * key[a] is the logit. score and key have room for whole blocks. */
	if (logit_key) {
		for (a = c; a & 3; a++)
			key[a] = 0.0f;
		for (a = 0; a < c; a += 4)
			oea_v4f_store(score + a, oea_score4(oea_v4f_load(key + a), p->scoring, m, s));
	}
	/* The kept weight's first half reads the original ids: before the row
	 * is rewritten. */
	if (totals)
		changed = oea_cpu_changed(p, irow, R, c, id, omask, logit_key ? NULL : sr, lf, m, s,
					  &den);
	/* id[0] is the best phase-1 expert (phase 1 is in key order); the
	 * fillers need the whole batch's U (spec version 3, rule 5). */
	if (p->flags & OEA_FLAG_COUNT_ONLY) {
		/* Count-only: the same output, computed on a copy of the row's
		 * routed columns that nobody reads (the factor reads the
		 * original weights from it, as it would from the row). */
		memcpy(ids_copy, irow, (size_t)R * oea_dtype_size(p->ids_dtype));
		memcpy(w_copy, wrow, sizeof(float) * (size_t)R);
		irow = ids_copy;
		wrow = w_copy;
	}
	oea_row_finish(c, id, key, score, R, p->renormalize, col0, score[0], u, E, irow,
		       p->ids_dtype, wrow);
	if (totals)
		oea_cpu_kept(totals, changed, c, score, den);
}

/* Adds a successful call's own figures to the caller's totals (rule 10):
 * calls and gated always, the stats' sums when not gated (phase 2 added the
 * re-routed rows'). Plain adds: a host caller owns its totals. */
static void oea_cpu_add_totals(oea_totals *t, const oea_stats *st)
{
	t->calls++;
	t->gated += st->gated;
	if (!st->gated) {
		t->t_before += st->t_before;
		t->t_after += st->t_after;
		t->valid_rows += st->valid_rows;
		t->invalid_rows += st->invalid_rows;
		t->nonfinite_rows += st->nonfinite_rows;
	}
}

static int route_host(const oea_problem *caller)
{
	oea_cpu_rows rows;
	_Alignas(16) float bias[OEA_MAX_EXPERTS + 32];
	oea_problem q;
	const oea_problem *p = &q;
	uint32_t u[OEA_MASK_WORDS] = {0}, tb[OEA_MASK_WORDS] = {0};
	_Alignas(16) float lf[OEA_MAX_EXPERTS + 4];
	oea_stats st;
	int error, R, nvr, i, a, e, gated, bias_bad = 0;

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
	if (p->correction_bias)
		for (e = 0; e < p->num_experts; e++)
			bias_bad |= !oea_isfinite(p->correction_bias[e]);

	/* Phase 1 over all rows: validity, T before, softmax statistics, U. */
	for (i = 0; i < p->n; i++) {
		const void *lrow = oea_row_ptr(p->logits, p->logits_dtype, p->logits_row_stride, i);
		const void *irow = oea_row_ptr(p->ids, p->ids_dtype, p->ids_row_stride, i);
		uint64_t cols;

		rows.state[i] = i < nvr ? (uint8_t)oea_cpu_classify(irow, p->ids_dtype, R,
								   p->num_experts)
					: 0xff;
		rows.m[i] = rows.s[i] = 0.0f;
		if (rows.state[i] == OEA_ROW_INVALID)
			st.invalid_rows++;
		if (rows.state[i] != OEA_ROW_VALID)
			continue;
		oea_cpu_load_row(lrow, p->logits_dtype, p->num_experts, lf);
		if (oea_cpu_nonfinite(lf, p->num_experts, bias_bad)) {
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
			oea_cpu_softmax_stats(lf, p->num_experts, &rows.m[i], &rows.s[i]);
		cols = oea_cpu_phase1(p, lf, irow, R, rows.m[i], rows.s[i]);
		rows.p1[i] = cols;
		for (a = 0; a < p->k0; a++)
			oea_set_bit(u, (int)oea_id_load(irow, p->ids_dtype, (int)((cols >> (4 * a)) & 15u)));
	}

	/* The minimum-batch gate counts the rows phase 1 found processable. */
	gated = p->min_valid_rows > 0 && st.valid_rows < (uint32_t)p->min_valid_rows;
	st.gated = (uint32_t)gated;
	st.t_before = (uint32_t)oea_popcount(tb, (p->num_experts + 31) / 32);
	/* T after counts the rewritten rows' distinct ids: all of U (every
	 * member is some row's phase-1 expert), plus the R - |U| fillers from
	 * outside U that every row takes when |U| < R (spec version 3). */
	if (p->k0 >= R || gated || st.valid_rows == 0) {
		st.t_after = st.t_before;
	} else {
		int tu = oea_popcount(u, (p->num_experts + 31) / 32);
		st.t_after = (uint32_t)(tu < R ? R : tu);
	}

	/* Phase 2: every row sees the complete U. */
	if (p->k0 < R && !gated) {
		/* The bias padded with zeros to whole words of 32, for 4-wide loads. */
		if (p->correction_bias) {
			memcpy(bias, p->correction_bias, sizeof(float) * (size_t)p->num_experts);
			for (e = p->num_experts; e & 31; e++)
				bias[e] = 0.0f;
		}
		for (i = 0; i < p->n; i++)
			if (rows.state[i] == OEA_ROW_VALID)
				oea_cpu_phase2(p, i, &rows, u, p->correction_bias ? bias : NULL, R,
					       p->totals);
	}

	if (p->stats)
		memcpy(p->stats, &st, sizeof st);
	if (p->totals)
		oea_cpu_add_totals(p->totals, &st);
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
