/*
 * oea_row.h - the per-row arithmetic and decisions shared by the CPU
 * reference (oea_cpu.c) and the CUDA kernel (oea_cuda.cu).
 *
 * Everything that produces a float or decides an order lives here, so that
 * the two paths cannot drift: both compile exactly these functions. The
 * float results are bitwise identical on both because
 *  - only +, -, *, / and exact bit manipulation are used (IEEE-754 single,
 *    round to nearest, no flush to zero): no libm, no CUDA expf/__expf;
 *  - the C side is compiled with -ffp-contract=off and the CUDA side with
 *    -fmad=false, so no multiply-add is fused on one side only;
 *  - every sum and max has one defined order (the "32 lanes + butterfly"
 *    order below), which the GPU gets from one warp per row and the CPU
 *    emulates.
 * Orders between experts (which expert ranks first) are a strict total order
 * on (key, index) pairs, so any correct selection algorithm gives the same
 * set; the two paths use different selection loops on purpose (the kernel
 * encodes the order as one 64-bit integer, see oea_pack in oea_cuda.cu).
 * The kernel uses the conversions, oea_exp, oea_score, oea_max2 and the
 * lane order from here; the selection and output helpers at the end
 * (oea_sel_sort, oea_row_factor, oea_row_fillers, oea_row_finish) are the
 * CPU's, and the kernel computes the same values lane-parallel in the same
 * order. The CPU's hot loops (the softmax sums, the keys of a whole row) run
 * four lanes at a time through oea_simd.h, whose oea_exp4/oea_score4 repeat
 * oea_exp/oea_score per lane and are tested bitwise against them; the
 * scalar lane functions here stay the definition (and the tests' reference).
 */
#ifndef OEA_ROW_H
#define OEA_ROW_H

#include <float.h>
#include <stdint.h>
#include <string.h>

#include "oea.h"

/* Single-precision expressions must be evaluated in single precision (SSE,
 * not x87 extended precision), or the C side rounds differently. */
#if !defined(__CUDACC__) && defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD != 0
#error "oea_row.h needs FLT_EVAL_METHOD == 0 (build with SSE2 math, not x87 / -mfpmath=387)"
#endif

#if defined(__CUDACC__)
#define OEA_HD static __host__ __device__ __forceinline__
#else
#define OEA_HD static inline
#endif

/* The width of the lane structure that defines the reduction orders. */
#define OEA_LANES 32
/* Experts one lane covers at most: e = lane + OEA_LANES * j. */
#define OEA_PER_LANE (OEA_MAX_EXPERTS / OEA_LANES)

/* Row classification (oea_row_classify). */
#define OEA_ROW_VALID 0
#define OEA_ROW_PADDING 1 /* a negative routed id: the framework's padding */
#define OEA_ROW_INVALID 2 /* an id >= E or a duplicate: counted, untouched */

/* ---- exact bit casts ------------------------------------------------- */

OEA_HD float oea_f_from_bits(uint32_t u)
{
#if defined(__CUDA_ARCH__)
	return __uint_as_float(u);
#else
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
#endif
}

OEA_HD uint32_t oea_bits_from_f(float f)
{
#if defined(__CUDA_ARCH__)
	return __float_as_uint(f);
#else
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	return u;
#endif
}

/* Finite test without libm: x - x is 0 for finite x and NaN otherwise. */
OEA_HD int oea_isfinite(float x)
{
	return x - x == 0.0f;
}

OEA_HD int oea_isnan(float x)
{
	return x != x;
}

/* bf16 is the upper half of an fp32: the conversion is exact. */
OEA_HD float oea_bf16_to_f(uint16_t h)
{
	return oea_f_from_bits((uint32_t)h << 16);
}

/* fp16 to fp32, exact for every input (subnormals, inf, NaN payloads). */
OEA_HD float oea_f16_to_f(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t ex = (h >> 10) & 0x1fu;
	uint32_t mant = h & 0x3ffu;
	uint32_t u;

	if (ex == 0) {
		if (mant == 0) {
			u = sign;
		} else {
			/* Subnormal half: renormalise; value = mant * 2^-24. */
			uint32_t shift = 0;
			while (!(mant & 0x400u)) {
				mant <<= 1;
				shift++;
			}
			mant &= 0x3ffu;
			u = sign | ((113u - shift) << 23) | (mant << 13);
		}
	} else if (ex == 31) {
		u = sign | 0x7f800000u | (mant << 13);
	} else {
		u = sign | ((ex + 112u) << 23) | (mant << 13);
	}
	return oea_f_from_bits(u);
}

/* ---- exp -------------------------------------------------------------- */

/* 2^k as a float for -126 <= k <= 127. */
OEA_HD float oea_pow2i(int k)
{
	return oea_f_from_bits((uint32_t)(k + 127) << 23);
}

/*
 * exp(x) in single precision, within about 1 ulp of the true value (the
 * Cephes expf scheme: Cody-Waite reduction by ln 2 split in two parts, a
 * degree-5 polynomial, exact scaling). It is not meant to beat libm; it is
 * meant to give the same bits on every machine that does IEEE single
 * arithmetic without contraction.
 */
OEA_HD float oea_exp(float x)
{
	float t, kf, r, r2, p, y;
	int k;

	if (oea_isnan(x))
		return x;
	if (x > 88.72283935546875f) /* above ln(FLT_MAX): overflow */
		return oea_f_from_bits(0x7f800000u);
	if (x < -103.972084045410156f) /* below ln(smallest subnormal / 2) */
		return 0.0f;

	t = x * 1.44269504088896341f;
	/* Round half away from zero; the cast truncates on both paths. */
	k = (int)(t < 0.0f ? t - 0.5f : t + 0.5f);
	kf = (float)k;
	/* 0.693359375 has 9 significant bits: kf * C1 is exact. */
	r = x - kf * 0.693359375f;
	r = r - kf * -2.12194440e-4f;

	r2 = r * r;
	p = 1.9875691500e-4f;
	p = p * r + 1.3981999507e-3f;
	p = p * r + 8.3334519073e-3f;
	p = p * r + 4.1665795894e-2f;
	p = p * r + 1.6666665459e-1f;
	p = p * r + 5.0000001201e-1f;
	y = p * r2;
	y = y + r;
	y = y + 1.0f;

	/* Scale by 2^k in steps that keep every factor a normal float, so
	 * that only the last multiplication rounds (into the subnormals). */
	if (k > 127)
		return y * oea_pow2i(k - 1) * 2.0f;
	if (k < -126)
		return y * oea_pow2i(k + 64) * oea_pow2i(-64);
	return y * oea_pow2i(k);
}

/* ---- loads and stores ------------------------------------------------ */

OEA_HD float oea_logit(const void *row, int dtype, int e)
{
	switch (dtype) {
	case OEA_DTYPE_BF16:
		return oea_bf16_to_f(((const uint16_t *)row)[e]);
	case OEA_DTYPE_F16:
		return oea_f16_to_f(((const uint16_t *)row)[e]);
	default:
		return ((const float *)row)[e];
	}
}

OEA_HD int64_t oea_id_load(const void *row, int dtype, int col)
{
	if (dtype == OEA_DTYPE_I64)
		return ((const int64_t *)row)[col];
	return ((const int32_t *)row)[col];
}

OEA_HD void oea_id_store(void *row, int dtype, int col, int32_t id)
{
	if (dtype == OEA_DTYPE_I64)
		((int64_t *)row)[col] = id;
	else
		((int32_t *)row)[col] = id;
}

OEA_HD size_t oea_dtype_size(int dtype)
{
	return (dtype == OEA_DTYPE_BF16 || dtype == OEA_DTYPE_F16) ? 2
	       : dtype == OEA_DTYPE_I64                           ? 8
								   : 4;
}

OEA_HD const void *oea_row_ptr(const void *base, int dtype, int64_t stride, int i)
{
	return (const char *)base + (size_t)i * (size_t)stride * oea_dtype_size(dtype);
}

/* ---- row validity ---------------------------------------------------- */

/*
 * A row whose routed ids hold a negative id is padding (checked first, so a
 * padding row is never counted as invalid); otherwise an id >= E or a
 * duplicate makes it invalid. Both are left untouched.
 */
OEA_HD int oea_row_classify(const void *ids_row, int ids_dtype, int R, int E)
{
	int a, b, bad = 0;

	for (a = 0; a < R; a++) {
		int64_t id = oea_id_load(ids_row, ids_dtype, a);
		if (id < 0)
			return OEA_ROW_PADDING;
		if (id >= E)
			bad = 1;
	}
	if (bad)
		return OEA_ROW_INVALID;
	for (a = 0; a < R; a++)
		for (b = a + 1; b < R; b++)
			if (oea_id_load(ids_row, ids_dtype, a) == oea_id_load(ids_row, ids_dtype, b))
				return OEA_ROW_INVALID;
	return OEA_ROW_VALID;
}

/* ---- the defined reduction orders ------------------------------------ */

/* max that ignores NaN: a NaN never replaces the running value. */
OEA_HD float oea_max2(float acc, float v)
{
	return v > acc ? v : acc;
}

/* Lane `lane`'s partial max over e = lane, lane + 32, ... in that order. */
OEA_HD float oea_lane_max(const void *row, int dtype, int E, int lane)
{
	float acc = oea_f_from_bits(0xff800000u); /* -inf */
	int e;

	for (e = lane; e < E; e += OEA_LANES)
		acc = oea_max2(acc, oea_logit(row, dtype, e));
	return acc;
}

/* Lane `lane`'s partial sum of exp(l - m), same order, starting at 0. */
OEA_HD float oea_lane_sum(const void *row, int dtype, int E, int lane, float m)
{
	float acc = 0.0f;
	int e;

	for (e = lane; e < E; e += OEA_LANES)
		acc = acc + oea_exp(oea_logit(row, dtype, e) - m);
	return acc;
}

/*
 * Lane `lane`'s non-finite flag: a logit it covers is NaN or +-inf, or (with
 * a bias) a bias entry it covers is. This is the definition of
 * stats.nonfinite_rows and of OEA_FLAG_REJECT_NONFINITE.
 */
OEA_HD int oea_lane_nonfinite(const void *row, int dtype, int E, int lane, const float *bias)
{
	int e, bad = 0;

	for (e = lane; e < E; e += OEA_LANES) {
		bad |= !oea_isfinite(oea_logit(row, dtype, e));
		if (bias)
			bad |= !oea_isfinite(bias[e]);
	}
	return bad;
}

/*
 * The combine step: v[j] = op(v[j], v[j + off]) for off = 16, 8, 4, 2, 1;
 * the result is v[0]. A warp's xor butterfly (__shfl_xor_sync) computes
 * exactly this value in lane 0. Host side only: the device uses shuffles.
 */
OEA_HD float oea_tree_max32(float v[OEA_LANES])
{
	int off, j;

	for (off = OEA_LANES / 2; off > 0; off /= 2)
		for (j = 0; j < off; j++)
			v[j] = oea_max2(v[j], v[j + off]);
	return v[0];
}

OEA_HD float oea_tree_sum32(float v[OEA_LANES])
{
	int off, j;

	for (off = OEA_LANES / 2; off > 0; off /= 2)
		for (j = 0; j < off; j++)
			v[j] = v[j] + v[j + off];
	return v[0];
}

/* ---- scores, keys, order --------------------------------------------- */

/*
 * Score of one expert from its logit. Softmax: exp(l - m) / s with m the
 * NaN-ignoring row max and s the row sum in the order above. Sigmoid:
 * 1 / (1 + exp(-l)).
 */
OEA_HD float oea_score(float l, int scoring, float m, float s)
{
	if (scoring == OEA_SCORING_SIGMOID)
		return 1.0f / (1.0f + oea_exp(-l));
	return oea_exp(l - m) / s;
}

/*
 * The selection key of expert e (spec version 2, docs/oea-semantics.md):
 * score + bias with a correction bias; otherwise the score for sigmoid and
 * the logit itself for softmax. Softmax is strictly increasing in the logit,
 * so the logit ranks experts exactly as the true softmax does (rounded
 * scores can tie where logits differ), and it needs no row max or sum:
 * that is what lets the GPU find the loaded set from the routed ids alone.
 */
OEA_HD float oea_key(float logit, float score, int scoring, const float *bias, int e)
{
	if (bias)
		return score + bias[e];
	return scoring == OEA_SCORING_SOFTMAX ? logit : score;
}

/*
 * 1 when (ka, ea) ranks before (kb, eb): the higher key first, equal keys to
 * the lower index, NaN keys after every number (among themselves by index).
 * A strict total order on distinct indices.
 */
OEA_HD int oea_better(float ka, int ea, float kb, int eb)
{
	int na = oea_isnan(ka), nb = oea_isnan(kb);

	if (na != nb)
		return nb;
	if (!na) {
		if (ka > kb)
			return 1;
		if (ka < kb)
			return 0;
	}
	return ea < eb;
}

/* ---- the end of a row ------------------------------------------------- */

/* Sorts the c selected experts into key order (insertion sort, c <= 16). */
OEA_HD void oea_sel_sort(int c, int32_t *id, float *key, float *score)
{
	int a, b;

	for (a = 1; a < c; a++) {
		int32_t ti = id[a];
		float tk = key[a], ts = score[a];
		for (b = a; b > 0 && oea_better(tk, ti, key[b - 1], id[b - 1]); b--) {
			id[b] = id[b - 1];
			key[b] = key[b - 1];
			score[b] = score[b - 1];
		}
		id[b] = ti;
		key[b] = tk;
		score[b] = ts;
	}
}

/*
 * The weight factor of a row. With renormalize: (original routed weights
 * summed in column order) / (selected scores summed in output order); without:
 * w_orig(best) / score(best), best being the row's best phase-1 expert. A
 * zero or non-finite denominator gives 1, so a row whose scores underflowed
 * keeps its scores rather than turning into NaN.
 */
OEA_HD float oea_row_factor(int renormalize, const float *w_row, int R, int c,
			    const float *score, int best_col, float best_score)
{
	float num, den;
	int j;

	if (renormalize) {
		num = 0.0f;
		for (j = 0; j < R; j++)
			num = num + w_row[j];
		den = 0.0f;
		for (j = 0; j < c; j++)
			den = den + score[j];
	} else {
		num = w_row[best_col];
		den = best_score;
	}
	if (den == 0.0f || !oea_isfinite(den))
		return 1.0f;
	return num / den;
}

/*
 * The fillers of a row (spec version 3, rule 5): the R - c slots without a
 * candidate take experts not already in the row, so that every row's ids are
 * distinct (a MoE runner may count an expert once per row and gather every
 * slot: SGLang's torch-native MoE does). First the experts of the loaded set
 * U outside the row (already loaded: in the grouped case, U members outside
 * the row's groups), lowest index first; then the lowest-index experts
 * outside U, which only a batch with |U| < R reaches (the same R - |U| for
 * every row). Every selected expert is in U, so the two tiers are disjoint
 * from the selection and there are always enough (a processed row has R
 * distinct ids below E, so E >= R). Integer logic only: the kernel finds the
 * same experts by popcounts over the same bit masks.
 */
OEA_HD void oea_row_fillers(int c, const int32_t *id, int R, const uint32_t *u, int E,
			    int32_t *fill)
{
	uint32_t sel[OEA_MAX_EXPERTS / 32] = {0};
	int j = c, tier, w, b;

	for (b = 0; b < c; b++)
		sel[id[b] >> 5] |= 1u << (id[b] & 31);
	/* A word at a time: a row of a large batch has no filler at all, a
	 * small batch's rows find theirs in the first words. */
	for (tier = 0; tier < 2; tier++)
		for (w = 0; w < (E + 31) / 32 && j < R; w++) {
			uint32_t x = tier == 0 ? u[w] & ~sel[w] : ~u[w];
			if (E - 32 * w < 32)
				x &= (1u << (E - 32 * w)) - 1u; /* no expert at or past E */
			for (b = 0; x && j < R; b++, x >>= 1)
				if (x & 1u)
					fill[j++] = 32 * w + b;
		}
}

/*
 * Sorts the selection, computes the weights and writes the R routed columns:
 * the c selected experts in key order, then the fillers of oea_row_fillers
 * (u is the batch's loaded set, E the expert count) with weight +0. A NaN
 * weight is written as the quiet NaN 0x7fc00000. The factor is computed
 * before any write, as ids/weights are rewritten in place.
 */
OEA_HD void oea_row_finish(int c, int32_t *id, float *key, float *score, int R,
			   int renormalize, int best_col, float best_score, const uint32_t *u,
			   int E, void *ids_row, int ids_dtype, float *w_row)
{
	int32_t fill[OEA_MAX_TOPK];
	float f;
	int j;

	oea_sel_sort(c, id, key, score);
	oea_row_fillers(c, id, R, u, E, fill);
	f = oea_row_factor(renormalize, w_row, R, c, score, best_col, best_score);
	for (j = 0; j < R; j++) {
		if (j < c) {
			float w = score[j] * f;
			/* NaN payloads and signs are not portable (x86 keeps an
			 * operand's, the GPU returns its canonical NaN, compilers
			 * may swap operands): write one NaN everywhere. */
			oea_id_store(ids_row, ids_dtype, j, id[j]);
			w_row[j] = oea_isnan(w) ? oea_f_from_bits(0x7fc00000u) : w;
		} else {
			oea_id_store(ids_row, ids_dtype, j, fill[j]);
			w_row[j] = 0.0f;
		}
	}
}

/* ---- the kept weight (spec version 4, rule 9) -------------------------- */

/*
 * The kept weight of a re-routed row that changed a slot is num / den: num =
 * the selected experts' scores summed in output order (fillers excluded),
 * den = the original routed experts' scores summed in column order. It is
 * defined when den is finite and positive, num finite (this test) and the
 * quotient finite (oea_isfinite after the division, which each path does
 * its own way: the kernel calls its out-of-line IEEE division); else the
 * row counts in totals.kept_undefined. A row without a changed slot has
 * kept = 1 by rule 9 and never comes here.
 */
OEA_HD int oea_kept_divisible(float num, float den)
{
	return den > 0.0f && oea_isfinite(den) && oea_isfinite(num);
}

/*
 * The histogram bucket of a defined kept (rule 10): the number of the edges
 * 0.25 0.5 0.6 0.7 0.75 0.8 0.85 0.9 0.93 0.95 0.97 0.98 0.99 1 (as floats)
 * that are <= kept, plus one when kept > 1. Bucket 14 is exactly 1, bucket
 * 15 above 1. Comparisons only: the same bucket on both paths.
 */
OEA_HD int oea_kept_bucket(float k)
{
	return (k >= 0.25f) + (k >= 0.5f) + (k >= 0.6f) + (k >= 0.7f) + (k >= 0.75f) +
	       (k >= 0.8f) + (k >= 0.85f) + (k >= 0.9f) + (k >= 0.93f) + (k >= 0.95f) +
	       (k >= 0.97f) + (k >= 0.98f) + (k >= 0.99f) + (k >= 1.0f) + (k > 1.0f);
}

/* A defined kept's term of totals.kept_fx: min(kept, 65536) * 2^24 (exact:
 * a power-of-two scale of a float below 2^16), truncated to an integer. */
OEA_HD uint64_t oea_kept_fx(float k)
{
	return (uint64_t)((k < 65536.0f ? k : 65536.0f) * 16777216.0f);
}

#endif /* OEA_ROW_H */
