/*
 * oea_cuda.cu - the CUDA path of OEA routing.
 *
 * Design (docs/native-abi.md, "The CUDA path", has the long form):
 *  - Many blocks of 8 warps. Every block first derives the loaded set U
 *    itself from all rows' original routed ids and keys, one thread per row
 *    (R <= 16 ids, no exp for softmax: the key is the logit), into a
 *    shared-memory bitmask. There is no workspace: each block repeats this
 *    small n x R step instead of sharing it.
 *  - ids and weights are rewritten in place, so no block may write before
 *    every block has read every row's original ids: with more than one block
 *    the kernel is a cooperative launch and a grid-wide barrier separates the
 *    reads from the writes; a single block uses __syncthreads. Either way it
 *    is one launch, no allocation, no host sync, and capturable.
 *  - Then a warp per row (global warp w takes rows w, w + warps, ...):
 *    lane c holds routed column c for phase 1 (ranks by shuffles), lane l
 *    holds experts l, l + 32, ... of the row in registers (the lane order
 *    that oea_row.h defines for every sum and max), candidates are ranked by
 *    one 64-bit key that encodes the total order of oea_better, the R - k0
 *    best are taken by warp-wide max, and lane j writes output column j.
 *  - Variants are compiled per logits dtype, scoring/bias mode and an
 *    expert-count bucket (experts per lane) and chosen on the host, so no
 *    hot loop carries a dtype or scoring switch.
 * All float arithmetic comes from oea_row.h; the file must be compiled with
 * -fmad=false (see CMakeLists.txt), which makes it bitwise the CPU's.
 */
#include <cooperative_groups.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "oea.h"
#include "oea_internal.h"
#include "oea_row.h"

namespace cg = cooperative_groups;

#define OEA_WARPS 8
#define OEA_THREADS (32 * OEA_WARPS)
#define OEA_FULL 0xffffffffu
#define OEA_MASK_WORDS (OEA_MAX_EXPERTS / 32)

/* Scoring modes, one kernel family each. Softmax without bias ranks by the
 * logit (no row statistics needed to find U); softmax with a bias needs every
 * row's max and sum, so its U step runs a warp per row. */
enum { OEA_MODE_SOFTMAX = 0, OEA_MODE_SOFTMAX_BIAS = 1, OEA_MODE_SIGMOID = 2, OEA_MODE_SIGMOID_BIAS = 3 };

/* What the kernel needs, flattened (the problem's fields after the check). */
struct oea_kargs {
	const void *logits;
	const float *bias;
	void *ids;
	float *weights;
	const int32_t *num_valid_rows;
	oea_stats *stats;
	oea_totals *totals;
	int64_t lstride, istride, wstride; /* in elements */
	int n, E, R, k0, renorm, ids64, min_valid;
	int write; /* 0 under OEA_FLAG_COUNT_ONLY: every figure, no output */
	/* group(e) = (e * gmagic) >> 32 = e / (experts per group), exact for
	 * e < 2^9; gmagic = 0 without grouping puts every expert in group 0,
	 * which every row then allows: no branch on "grouped or not". */
	unsigned long long gmagic;
};

struct oea_warp_smem {
	uint32_t pmask[OEA_MASK_WORDS]; /* the row's phase-1 set */
	uint32_t gmask[OEA_MASK_WORDS]; /* the row's allowed groups */
	unsigned long long sel[OEA_MAX_TOPK];
	float sc[OEA_MAX_TOPK];
};

/* The fields of oea_totals a block sums in shared memory before adding them
 * to the caller's (one global atomic per field and block, not per row):
 * nonfinite_rows (the 7th field) to the end of kept_hist. */
#define OEA_TOT_FIRST 6
#define OEA_TOT_SLOTS (sizeof(oea_totals) / 8 - OEA_TOT_FIRST)
#define OEA_TOT_NONFINITE 0
#define OEA_TOT_REROUTED 1
#define OEA_TOT_CHANGED 2
#define OEA_TOT_FX 3
#define OEA_TOT_UNDEFINED 4
#define OEA_TOT_HIST 5

struct oea_smem {
	uint32_t u[OEA_MASK_WORDS];  /* loaded set U */
	uint32_t tb[OEA_MASK_WORDS]; /* experts of the original routing (stats) */
	unsigned valid, invalid;
	int nvr;
	unsigned long long tot[OEA_TOT_SLOTS]; /* this block's part of the totals */
	oea_warp_smem w[OEA_WARPS];
};

/* ---- the order as one integer ------------------------------------------ */

/*
 * A 64-bit key whose unsigned order is oea_better's: the float key mapped
 * to a monotone integer (NaN below -inf, -0 equal to +0) in the high half,
 * the complement of the index in the low half (lower index wins a tie).
 * Never 0, so 0 means "no candidate".
 */
__device__ __forceinline__ unsigned long long oea_pack(float key, int e)
{
	uint32_t ord;
	if (key != key) {
		ord = 0;
	} else {
		uint32_t u = __float_as_uint(key == 0.0f ? 0.0f : key);
		ord = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
	}
	return ((unsigned long long)ord << 32) | (0xffffffffu - (uint32_t)e);
}

__device__ __forceinline__ int oea_unpack_e(unsigned long long p)
{
	return (int)(0xffffffffu - (uint32_t)p);
}

__device__ __forceinline__ unsigned long long oea_shfl64(unsigned long long v, int src)
{
	uint32_t lo = __shfl_sync(OEA_FULL, (uint32_t)v, src);
	uint32_t hi = __shfl_sync(OEA_FULL, (uint32_t)(v >> 32), src);
	return ((unsigned long long)hi << 32) | lo;
}

__device__ __forceinline__ unsigned long long oea_warp_max64(unsigned long long v)
{
#pragma unroll
	for (int off = 16; off > 0; off >>= 1) {
		uint32_t lo = __shfl_xor_sync(OEA_FULL, (uint32_t)v, off);
		uint32_t hi = __shfl_xor_sync(OEA_FULL, (uint32_t)(v >> 32), off);
		unsigned long long o = ((unsigned long long)hi << 32) | lo;
		v = o > v ? o : v;
	}
	return v;
}

/* Butterfly max/sum; lane 0's value is oea_tree_max32/sum32 of the lanes'
 * partials, broadcast so that every lane uses the same bits. */
__device__ __forceinline__ float oea_warp_max(float v)
{
#pragma unroll
	for (int off = 16; off > 0; off >>= 1)
		v = oea_max2(v, __shfl_xor_sync(OEA_FULL, v, off));
	return __shfl_sync(OEA_FULL, v, 0);
}

__device__ __forceinline__ float oea_warp_sum(float v)
{
#pragma unroll
	for (int off = 16; off > 0; off >>= 1)
		v = v + __shfl_xor_sync(OEA_FULL, v, off);
	return __shfl_sync(OEA_FULL, v, 0);
}

/* ---- out-of-line arithmetic ------------------------------------------------- */

/*
 * exp, the sigmoid and IEEE division are called, not inlined: each inlined
 * copy is dozens of instructions and the unrolled per-lane loops would
 * multiply them past the 64 KiB code budget of a kernel. The bits are those
 * of oea_row.h either way (same operations, -fmad=false).
 */
__device__ __noinline__ float oea_dexp(float x)
{
	return oea_exp(x);
}

__device__ __noinline__ float oea_dsigmoid(float l)
{
	return oea_score(l, OEA_SCORING_SIGMOID, 0.0f, 0.0f);
}

__device__ __noinline__ float oea_ddiv(float x, float y)
{
	return x / y;
}

/* ---- loads --------------------------------------------------------------- */

template <int LT> __device__ __forceinline__ float oea_ld_logit(const void *row, int e)
{
	if (LT == OEA_DTYPE_BF16)
		return oea_bf16_to_f(__ldg((const unsigned short *)row + e));
	/* The hardware conversion is exact for every fp16 value, like
	 * oea_f16_to_f; only a NaN's payload may differ, and no result depends
	 * on a payload (NaN keys rank by index, NaN weights are canonical). */
	if (LT == OEA_DTYPE_F16)
		return __half2float(__ushort_as_half(__ldg((const unsigned short *)row + e)));
	return __ldg((const float *)row + e);
}

template <int LT> __device__ __forceinline__ const void *oea_lrow(const oea_kargs &a, int i)
{
	return (const char *)a.logits + (size_t)i * (size_t)a.lstride * (LT == OEA_DTYPE_F32 ? 4 : 2);
}

/*
 * ids are read through the generic path (not __ldg): they are rewritten by
 * this kernel, so a non-coherent cached read is not allowed for them. int32
 * and int64 share one branch-free path (a select, not two copies of every
 * loop that the compiler would otherwise make).
 */
__device__ __forceinline__ int64_t oea_ld_id(const oea_kargs &a, int i, int c)
{
	const size_t at = ((size_t)i * (size_t)a.istride + (size_t)c) << a.ids64;
	const int32_t *w = (const int32_t *)a.ids + at;
	const int32_t lo = w[0];
	const int32_t hi = a.ids64 ? w[1] : (lo < 0 ? -1 : 0);
	return (int64_t)(((uint64_t)(uint32_t)hi << 32) | (uint32_t)lo);
}

/* Stores a routed id (0 <= e < 512), both widths little-endian. */
__device__ __forceinline__ void oea_st_id(const oea_kargs &a, int i, int c, int e)
{
	const size_t at = ((size_t)i * (size_t)a.istride + (size_t)c) << a.ids64;
	int32_t *w = (int32_t *)a.ids + at;
	w[0] = e;
	if (a.ids64)
		w[1] = 0;
}

__device__ __forceinline__ int oea_group(const oea_kargs &a, int e)
{
	return (int)(((unsigned long long)(uint32_t)e * a.gmagic) >> 32);
}

/* The selection key of expert e of a row from its logit (and, for softmax
 * with bias, the row's max and sum). */
template <int MODE>
__device__ __forceinline__ float oea_dkey(const oea_kargs &a, float l, int e, float m, float s)
{
	if (MODE == OEA_MODE_SOFTMAX)
		return l;
	if (MODE == OEA_MODE_SOFTMAX_BIAS)
		return oea_ddiv(oea_dexp(l - m), s) + __ldg(a.bias + e);
	float sc = oea_dsigmoid(l);
	return MODE == OEA_MODE_SIGMOID_BIAS ? sc + __ldg(a.bias + e) : sc;
}

/* ---- U, a segment of lanes per row (every mode but softmax with bias) ---- */

/* Row slots a segment handles per pass: their loads are issued together, so
 * a pass costs two dependent memory round trips (ids, then the routed
 * logits) instead of two per row. */
#define OEA_UNR 4

/*
 * Rows base + u * stride + first (u < OEA_UNR) on segments of W lanes (W = 8
 * when R <= 8, else 16; 32 / W rows per warp): lane c of a segment holds
 * routed column c. Validity as oea_row_classify (padding first, then range,
 * then duplicates), by ballots and __match_any_sync; the rank of column c is
 * the number of routed experts that rank before it, by shuffles within the
 * segment. Every lane of the warp calls this with the same base.
 */
template <int LT, int MODE>
__device__ __forceinline__ void oea_u_segments(const oea_kargs &a, oea_smem &sm, int base, int stride,
						int first, int nvr, int lane, int W, bool stats)
{
	const int c = lane & (W - 1);
	const uint32_t seg = ((1u << W) - 1u) << (lane & ~(W - 1));
	int row[OEA_UNR], id[OEA_UNR];
	int64_t v[OEA_UNR];
	bool valid[OEA_UNR];
	float l[OEA_UNR];

#pragma unroll
	for (int u = 0; u < OEA_UNR; u++) {
		const int i = base + u * stride + first;
		row[u] = i < nvr ? i : -1;
		v[u] = row[u] >= 0 && c < a.R ? oea_ld_id(a, row[u], c) : 0;
	}
#pragma unroll
	for (int u = 0; u < OEA_UNR; u++) {
		const bool act = row[u] >= 0 && c < a.R;
		const bool neg = __ballot_sync(OEA_FULL, act && v[u] < 0) & seg;
		const bool big = __ballot_sync(OEA_FULL, act && v[u] >= a.E) & seg;
		/* In range: ids < 512, so other lanes' tags (>= 2^31) never match. */
		const uint32_t tag = act && !neg && !big ? (uint32_t)v[u] : 0x80000000u | (uint32_t)lane;
		const uint32_t same = __match_any_sync(OEA_FULL, tag) & seg;
		const bool dup = __ballot_sync(OEA_FULL, __popc(same) > 1) & seg;
		id[u] = (int)v[u];
		valid[u] = row[u] >= 0 && !neg && !big && !dup;
		if (row[u] >= 0 && !neg && (big || dup) && c == 0 && stats)
			atomicAdd(&sm.invalid, 1u);
		if (valid[u] && c == 0)
			atomicAdd(&sm.valid, 1u);
		if (valid[u] && stats && c < a.R)
			atomicOr(&sm.tb[id[u] >> 5], 1u << (id[u] & 31));
	}
	if (a.k0 >= a.R)
		return;
#pragma unroll
	for (int u = 0; u < OEA_UNR; u++)
		l[u] = valid[u] && c < a.R ? oea_ld_logit<LT>(oea_lrow<LT>(a, row[u]), id[u]) : 0.0f;
#pragma unroll
	for (int u = 0; u < OEA_UNR; u++) {
		unsigned long long k = 0;
		if (valid[u] && c < a.R)
			k = oea_pack(oea_dkey<MODE>(a, l[u], id[u], 0.0f, 0.0f), id[u]);
		int r = 0;
#pragma unroll 1
		for (int b = 0; b < a.R; b++) {
			uint32_t lo = __shfl_sync(OEA_FULL, (uint32_t)k, b, W);
			uint32_t hi = __shfl_sync(OEA_FULL, (uint32_t)(k >> 32), b, W);
			r += (((unsigned long long)hi << 32) | lo) > k;
		}
		if (valid[u] && c < a.R && r < a.k0)
			atomicOr(&sm.u[id[u] >> 5], 1u << (id[u] & 31));
	}
}

/* ---- a row on a warp ---------------------------------------------------- */

/* The position of the (t+1)-th set bit of m (t < popcount(m)), by halving:
 * five popcounts, no loop over the bits. */
__device__ __forceinline__ int oea_nth_bit(uint32_t m, int t)
{
	int pos = 0;
#pragma unroll
	for (int width = 16; width > 0; width >>= 1) {
		const int low = __popc(m & ((1u << width) - 1u));
		if (t >= low) {
			t -= low;
			m >>= width;
			pos += width;
		}
	}
	return pos;
}

/*
 * Classifies row i on the warp (lane c < R holds column c): returns
 * OEA_ROW_VALID / PADDING / INVALID, the same on every lane.
 */
__device__ __forceinline__ int oea_warp_classify(const oea_kargs &a, int i, int lane, int32_t *myid)
{
	int64_t v = lane < a.R ? oea_ld_id(a, i, lane) : 0;
	bool act = lane < a.R;
	if (__any_sync(OEA_FULL, act && v < 0))
		return OEA_ROW_PADDING;
	if (__any_sync(OEA_FULL, act && v >= a.E))
		return OEA_ROW_INVALID;
	/* In range: ids < 512, so inactive lanes get distinct values >= 2^31. */
	uint32_t tag = act ? (uint32_t)v : 0x80000000u | (uint32_t)lane;
	uint32_t same = __match_any_sync(OEA_FULL, tag);
	if (__any_sync(OEA_FULL, __popc(same) > 1))
		return OEA_ROW_INVALID;
	*myid = (int32_t)v;
	return OEA_ROW_VALID;
}

/* The row's own max and sum (softmax), in the lane order of oea_row.h, from
 * the logits this lane holds (lv[j] = expert lane + 32 j). */
template <int NPL>
__device__ __forceinline__ void oea_warp_softmax(const float *lv, int lane, int E, float *ex, float *m,
						 float *s)
{
	float acc = oea_f_from_bits(0xff800000u);
#pragma unroll
	for (int j = 0; j < NPL; j++)
		if (lane + 32 * j < E)
			acc = oea_max2(acc, lv[j]);
	float mm = oea_warp_max(acc);
	float sum = 0.0f;
#pragma unroll
	for (int j = 0; j < NPL; j++) {
		ex[j] = 0.0f;
		if (lane + 32 * j < E) {
			ex[j] = oea_dexp(lv[j] - mm);
			sum = sum + ex[j];
		}
	}
	*s = oea_warp_sum(sum);
	*m = mm;
}

template <int LT, int MODE>
__device__ __forceinline__ void oea_u_warp(const oea_kargs &a, oea_smem &sm, int i, int lane, bool stats)
{
	/* Softmax with a bias: the keys need the row's max and sum. */
	int32_t id = 0;
	int st = oea_warp_classify(a, i, lane, &id);
	if (st == OEA_ROW_PADDING)
		return;
	if (st == OEA_ROW_INVALID) {
		if (stats && lane == 0)
			atomicAdd(&sm.invalid, 1u);
		return;
	}
	if (lane == 0)
		atomicAdd(&sm.valid, 1u);
	if (stats && lane < a.R)
		atomicOr(&sm.tb[id >> 5], 1u << (id & 31));
	if (a.k0 >= a.R)
		return;
	const void *lrow = oea_lrow<LT>(a, i);
	float acc = oea_f_from_bits(0xff800000u);
	for (int e = lane; e < a.E; e += 32)
		acc = oea_max2(acc, oea_ld_logit<LT>(lrow, e));
	float m = oea_warp_max(acc), sum = 0.0f;
	for (int e = lane; e < a.E; e += 32)
		sum = sum + oea_dexp(oea_ld_logit<LT>(lrow, e) - m);
	float s = oea_warp_sum(sum);
	unsigned long long k = lane < a.R ? oea_pack(oea_dkey<MODE>(a, oea_ld_logit<LT>(lrow, id), id, m, s), id) : 0;
	int r = 0;
#pragma unroll 1
	for (int b = 0; b < a.R; b++)
		r += oea_shfl64(k, b) > k;
	if (lane < a.R && r < a.k0)
		atomicOr(&sm.u[id >> 5], 1u << (id & 31));
}

/* The logit of expert e (0 <= e < E), from lane e % 32's slot e / 32:
 * every lane takes part; each gets the value for its own e. */
template <int NPL> __device__ __forceinline__ float oea_lane_logit(const float *lv, int e)
{
	float r = 0.0f;
#pragma unroll
	for (int j = 0; j < NPL; j++) {
		float t = __shfl_sync(OEA_FULL, lv[j], e & 31);
		if (j == (e >> 5))
			r = t;
	}
	return r;
}

template <int LT, int MODE, int NPL>
__device__ __forceinline__ void oea_row_out(const oea_kargs &a, oea_smem &sm, int i, int lane,
					     int warp, bool stats, bool rewrite, bool totals)
{
	oea_warp_smem &ws = sm.w[warp];
	/* The row's logits and original weights do not depend on its ids: their
	 * loads are issued first, with the ids', so that the row costs one
	 * memory round trip. (Row i < num_valid_rows <= n: readable memory.) */
	const void *lrow = oea_lrow<LT>(a, i);
	float *wrow = a.weights + (size_t)i * (size_t)a.wstride;
	float lv[NPL];
#pragma unroll
	for (int j = 0; j < NPL; j++)
		lv[j] = lane + 32 * j < a.E ? oea_ld_logit<LT>(lrow, lane + 32 * j) : 0.0f;
	const float wmine = rewrite && lane < a.R ? wrow[lane] : 0.0f;
	int32_t id = 0;
	if (oea_warp_classify(a, i, lane, &id) != OEA_ROW_VALID)
		return;

	if (stats) {
		/* stats.nonfinite_rows: any of the row's E logits or the bias. */
		bool bad = false;
#pragma unroll
		for (int j = 0; j < NPL; j++)
			if (lane + 32 * j < a.E)
				bad |= !oea_isfinite(lv[j]) ||
				       (a.bias && !oea_isfinite(__ldg(a.bias + lane + 32 * j)));
		if (__any_sync(OEA_FULL, bad) && lane == 0) {
			if (a.stats)
				atomicAdd(&a.stats->nonfinite_rows, 1u);
			if (totals)
				atomicAdd(&sm.tot[OEA_TOT_NONFINITE], 1ull);
		}
	}
	if (!rewrite)
		return;

	const bool softmax = MODE == OEA_MODE_SOFTMAX || MODE == OEA_MODE_SOFTMAX_BIAS;
	float m = 0.0f, s = 0.0f, ex[NPL];
	if (softmax)
		oea_warp_softmax<NPL>(lv, lane, a.E, ex, &m, &s);

	/* Phase 1: lane c < R ranks its routed expert among the R. Its logit
	 * comes from the lane that holds it (no second trip to memory). */
	const float lid = oea_lane_logit<NPL>(lv, id);
	unsigned long long k = 0;
	if (lane < a.R)
		k = oea_pack(oea_dkey<MODE>(a, lid, id, m, s), id);
	int r = 0;
#pragma unroll 1
	for (int b = 0; b < a.R; b++)
		r += oea_shfl64(k, b) > k;
	const bool in_p = lane < a.R && r < a.k0;
	const int best_col = __ffs(__ballot_sync(OEA_FULL, lane < a.R && r == 0)) - 1;

	if (lane < OEA_MASK_WORDS) {
		ws.pmask[lane] = 0;
		ws.gmask[lane] = 0;
	}
	__syncwarp();
	if (in_p) {
		atomicOr(&ws.pmask[id >> 5], 1u << (id & 31));
		ws.sel[r] = k;
	}
	if (lane < a.R) {
		int g = oea_group(a, id);
		atomicOr(&ws.gmask[g >> 5], 1u << (g & 31));
	}
	__syncwarp();

	/* Phase 2: this lane's candidates, U minus P_i in allowed groups. */
	unsigned long long cand[NPL];
#pragma unroll
	for (int j = 0; j < NPL; j++) {
		const int e = lane + 32 * j;
		cand[j] = 0;
		if (e < a.E && ((sm.u[e >> 5] & ~ws.pmask[e >> 5]) >> (e & 31) & 1u)) {
			int g = oea_group(a, e);
			if (ws.gmask[g >> 5] >> (g & 31) & 1u) {
				float key;
				if (MODE == OEA_MODE_SOFTMAX)
					key = lv[j];
				else if (MODE == OEA_MODE_SOFTMAX_BIAS)
					key = oea_ddiv(ex[j], s) + __ldg(a.bias + e);
				else
					key = oea_dkey<MODE>(a, lv[j], e, m, s);
				cand[j] = oea_pack(key, e);
			}
		}
	}
	int cnt = a.k0;
	for (int t = a.k0; t < a.R; t++) {
		unsigned long long best = 0;
#pragma unroll
		for (int j = 0; j < NPL; j++)
			best = cand[j] > best ? cand[j] : best;
		best = oea_warp_max64(best);
		if (best == 0)
			break; /* warp-uniform: no candidate left */
#pragma unroll
		for (int j = 0; j < NPL; j++)
			if (cand[j] == best)
				cand[j] = 0;
		if (lane == 0)
			ws.sel[cnt] = best;
		cnt++;
	}
	__syncwarp();

	/* Output: lane j < cnt takes selected j and finds its position in key
	 * order; its score is computed here, lanes in parallel. */
	unsigned long long mine = lane < cnt ? ws.sel[lane] : 0;
	int pos = 0, e = lane < cnt ? oea_unpack_e(mine) : 0;
	float score = 0.0f;
	const float le = oea_lane_logit<NPL>(lv, e);
	if (lane < cnt) {
#pragma unroll 1
		for (int x = 0; x < cnt; x++)
			pos += ws.sel[x] > mine;
		score = softmax ? oea_ddiv(oea_dexp(le - m), s) : oea_dsigmoid(le);
	}
	/* The best phase-1 expert: selected 0 (P sorted by rank), lane 0. */
	const float best_score = __shfl_sync(OEA_FULL, score, 0);
	__syncwarp();
	/* pmask grows from P_i to the row's whole selection S, which the
	 * fillers below must avoid (S is a subset of U). */
	if (lane < cnt) {
		ws.sc[pos] = score;
		atomicOr(&ws.pmask[e >> 5], 1u << (e & 31));
	}
	__syncwarp();

	/* Fillers (spec version 3, rule 5; oea_row_fillers on the CPU): lane
	 * cnt + t takes the t-th expert, in index order, of first U \ S, then
	 * the complement of U, both below E, by popcounts over the 32-bit words
	 * of the masks. Only rows with fewer candidates than slots get here;
	 * integer logic only, so the CPU's experts by construction. A processed
	 * row has R distinct ids below E, so the two tiers hold R - cnt. */
	int fe = 0;
	if (lane >= cnt && lane < a.R) {
		int t = lane - cnt;
		const int words = (a.E + 31) >> 5;
#pragma unroll 1
		for (int x = 0; x < 2 * words; x++) {
			const int w = x < words ? x : x - words;
			const uint32_t below = a.E - 32 * w >= 32 ? OEA_FULL : (1u << (a.E - 32 * w)) - 1u;
			const uint32_t m = (x < words ? sm.u[w] & ~ws.pmask[w] : ~sm.u[w]) & below;
			const int pc = __popc(m);
			if (t < pc) {
				fe = 32 * w + oea_nth_bit(m, t);
				break;
			}
			t -= pc;
		}
	}

	/* The factor, as oea_row_factor: the same sequential sums on every
	 * lane, read before any lane writes (ids/weights are in place). */
	/* Lane c loaded original weight c at the start; the sums are taken in
	 * column / output order on every lane. */
	float num, den;
	if (a.renorm) {
		num = 0.0f;
#pragma unroll 1
		for (int c = 0; c < a.R; c++)
			num = num + __shfl_sync(OEA_FULL, wmine, c);
		den = 0.0f;
#pragma unroll 1
		for (int x = 0; x < cnt; x++)
			den = den + ws.sc[x];
	} else {
		num = __shfl_sync(OEA_FULL, wmine, best_col);
		den = best_score;
	}
	const float f = (den == 0.0f || !oea_isfinite(den)) ? 1.0f : oea_ddiv(num, den);
	__syncwarp();

	if (lane < a.R && a.write) {
		/* Selected experts at their position; then the fillers, weight
		 * +0, in the order found above. (Count-only: computed, not
		 * written; nothing below reads them back.) */
		const float w = score * f;
		const int col = lane < cnt ? pos : lane;
		wrow[col] = lane >= cnt ? 0.0f : oea_isnan(w) ? oea_f_from_bits(0x7fc00000u) : w;
		oea_st_id(a, i, col, lane < cnt ? e : fe);
	}

	/* The kept weight and changed slots (spec rules 9-10; oea_cpu_kept on
	 * the CPU): lane c < R still holds original column c's id and logit, and
	 * pmask is the selection S. The sums are sequential on every lane, in
	 * output order (selected scores, ws.sc) and column order (original
	 * scores, each computed on its lane). */
	if (totals) {
		const bool inS = lane < a.R && (ws.pmask[id >> 5] >> (id & 31) & 1u);
		const int changed = a.R - __popc(__ballot_sync(OEA_FULL, inS));
		float kept = 1.0f;
		bool defined = true;
		if (changed > 0) { /* warp-uniform */
			float osc = 0.0f;
			if (lane < a.R)
				osc = softmax ? oea_ddiv(oea_dexp(lid - m), s) : oea_dsigmoid(lid);
			float num = 0.0f, den = 0.0f;
#pragma unroll 1
			for (int x = 0; x < cnt; x++)
				num = num + ws.sc[x];
#pragma unroll 1
			for (int c = 0; c < a.R; c++)
				den = den + __shfl_sync(OEA_FULL, osc, c);
			defined = oea_kept_divisible(num, den);
			if (defined) {
				kept = oea_ddiv(num, den);
				defined = oea_isfinite(kept);
			}
		}
		if (lane == 0) {
			atomicAdd(&sm.tot[OEA_TOT_REROUTED], 1ull);
			atomicAdd(&sm.tot[OEA_TOT_CHANGED], (unsigned long long)changed);
			if (defined) {
				atomicAdd(&sm.tot[OEA_TOT_FX], (unsigned long long)oea_kept_fx(kept));
				atomicAdd(&sm.tot[OEA_TOT_HIST + oea_kept_bucket(kept)], 1ull);
			} else {
				atomicAdd(&sm.tot[OEA_TOT_UNDEFINED], 1ull);
			}
		}
	}
	__syncwarp(); /* the next row reuses this warp's shared scratch */
}

/* ---- the kernel ----------------------------------------------------------- */

template <int LT, int MODE, int NPL>
__global__ void __launch_bounds__(OEA_THREADS, 1) oea_kernel(oea_kargs a)
{
	__shared__ oea_smem sm;
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	/* Counting (validity, T, non-finite rows) serves stats and totals. */
	const bool stats = a.stats != nullptr || a.totals != nullptr;

	if (tid < OEA_MASK_WORDS) {
		sm.u[tid] = 0;
		sm.tb[tid] = 0;
	}
	if (tid < (int)OEA_TOT_SLOTS)
		sm.tot[tid] = 0;
	if (tid == 0) {
		sm.valid = sm.invalid = 0;
		/* One read per block; the caller must not change the count while
		 * the kernel runs (every block must see the same batch). */
		int v = a.num_valid_rows ? *(const volatile int32_t *)a.num_valid_rows : a.n;
		sm.nvr = v < 0 ? 0 : v < a.n ? v : a.n;
	}
	__syncthreads();
	const int nvr = sm.nvr;

	/* Step 1, in every block: valid-row count and U over all rows. Only
	 * block 0 reports, so only it does the statistics' extra work. */
	const bool bstats = stats && blockIdx.x == 0;
	if (MODE == OEA_MODE_SOFTMAX_BIAS) {
		for (int i = warp; i < nvr; i += OEA_WARPS)
			oea_u_warp<LT, MODE>(a, sm, i, lane, bstats);
	} else {
		/* The loop bound is the same for the whole warp, so that every
		 * lane takes part in the segment's collectives. */
		const int W = a.R <= 8 ? 8 : 16, per = 32 / W;
		const int first = warp * per + (lane / W);
		for (int base = 0; base < nvr; base += OEA_WARPS * per * OEA_UNR)
			oea_u_segments<LT, MODE>(a, sm, base, OEA_WARPS * per, first, nvr, lane, W, bstats);
	}
	if (bstats && tid == 0 && a.stats)
		a.stats->nonfinite_rows = 0; /* summed by every block after the barrier */
	__syncthreads();

	/* Nobody writes ids or weights before every block has read them (and
	 * the zero above is visible before any block adds to it). */
	if (gridDim.x > 1)
		cg::this_grid().sync();

	const unsigned valid = sm.valid;
	const bool gated = a.min_valid > 0 && valid < (unsigned)a.min_valid;
	const bool rewrite = a.k0 < a.R && !gated;
	if (bstats && tid == 0) {
		unsigned tb = 0, ta = 0;
		for (int w = 0; w < OEA_MASK_WORDS; w++) {
			tb += __popc(sm.tb[w]);
			ta += __popc(sm.u[w]);
		}
		/* The rewritten rows' distinct ids: U, plus the R - |U|
		 * fillers outside U that every row takes when |U| < R (spec
		 * version 3); no processed row: nothing was rewritten. */
		ta = rewrite && valid > 0 ? (ta < (unsigned)a.R ? (unsigned)a.R : ta) : tb;
		if (a.stats) {
			a.stats->t_before = tb;
			a.stats->t_after = ta;
			a.stats->valid_rows = valid;
			a.stats->invalid_rows = sm.invalid;
			a.stats->gated = gated;
			a.stats->reserved[0] = 0;
			a.stats->reserved[1] = 0;
		}
		if (a.totals) {
			/* Rule 10: the call and its stats once (block 0); the
			 * per-row figures come from every block below. */
			oea_totals *t = a.totals;
			atomicAdd((unsigned long long *)&t->calls, 1ull);
			if (gated) {
				atomicAdd((unsigned long long *)&t->gated, 1ull);
			} else {
				atomicAdd((unsigned long long *)&t->t_before, (unsigned long long)tb);
				atomicAdd((unsigned long long *)&t->t_after, (unsigned long long)ta);
				atomicAdd((unsigned long long *)&t->valid_rows, (unsigned long long)valid);
				atomicAdd((unsigned long long *)&t->invalid_rows, (unsigned long long)sm.invalid);
			}
		}
	}
	if (!rewrite && !stats)
		return;

	/* Step 2: a warp per row. */
	const bool totals = a.totals != nullptr && !gated;
	const int gw = blockIdx.x * OEA_WARPS + warp, nw = gridDim.x * OEA_WARPS;
	for (int i = gw; i < nvr; i += nw)
		oea_row_out<LT, MODE, NPL>(a, sm, i, lane, warp, stats, rewrite, totals);

	/* This block's part of the totals, one atomic per nonzero field. */
	if (totals) {
		__syncthreads();
		if (tid < (int)OEA_TOT_SLOTS && sm.tot[tid])
			atomicAdd((unsigned long long *)a.totals + OEA_TOT_FIRST + tid, sm.tot[tid]);
	}
}

/* ---- host side ------------------------------------------------------------ */

typedef void (*oea_kfn)(oea_kargs);

#define OEA_NPL_VARIANTS(LT, MODE)                                                           \
	{ oea_kernel<LT, MODE, 2>, oea_kernel<LT, MODE, 4>, oea_kernel<LT, MODE, 8>,           \
	  oea_kernel<LT, MODE, 16> }
#define OEA_MODE_VARIANTS(LT)                                                                \
	{ OEA_NPL_VARIANTS(LT, OEA_MODE_SOFTMAX), OEA_NPL_VARIANTS(LT, OEA_MODE_SOFTMAX_BIAS),   \
	  OEA_NPL_VARIANTS(LT, OEA_MODE_SIGMOID), OEA_NPL_VARIANTS(LT, OEA_MODE_SIGMOID_BIAS) }

/* [logits dtype][mode][bucket: E <= 64, 128, 256, 512] */
static const oea_kfn oea_kernels[3][4][4] = {
	OEA_MODE_VARIANTS(OEA_DTYPE_F32),
	OEA_MODE_VARIANTS(OEA_DTYPE_BF16),
	OEA_MODE_VARIANTS(OEA_DTYPE_F16),
};

/* Resident blocks per SM of one variant on one device, cached: 0 = not asked
 * yet (a variant that fits nowhere is stored as -1 and used as 0). Devices
 * beyond the table are asked every time. Racing writers store the same value. */
#define OEA_OCC_DEVICES 16
static int oea_occupancy[OEA_OCC_DEVICES][3][4][4];

static int oea_resident_blocks(const void *fn, int dtype, int mode, int bucket, int dev)
{
	int *slot = dev >= 0 && dev < OEA_OCC_DEVICES ? &oea_occupancy[dev][dtype][mode][bucket] : NULL;
	int per_sm = slot ? __atomic_load_n(slot, __ATOMIC_RELAXED) : 0;

	if (per_sm == 0) {
		if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, OEA_THREADS, 0) != cudaSuccess) {
			(void)cudaGetLastError();
			return 0; /* not cached: asked again next time */
		}
		if (slot)
			__atomic_store_n(slot, per_sm > 0 ? per_sm : -1, __ATOMIC_RELAXED);
	}
	return per_sm > 0 ? per_sm : 0;
}

extern "C" int oea_has_cuda(void)
{
	return 1;
}

extern "C" int oea_route_cuda(const oea_problem *p, void *stream)
{
	oea_problem q;
	oea_kargs a;
	cudaError_t ce;
	int dev = 0, sms = 1, coop = 0, mode, bucket, blocks;
	/* q is the caller's problem as a current-ABI struct (an ABI 1 caller's
	 * is shorter): the kernel gets values from q, never the caller's bytes. */
	int error = oea_problem_load(p, &q);

	if (error)
		goto done;
	/* The kernel cannot refuse a call after it has started, and the host
	 * must not read device data: the flag is a host-path feature. */
	if (q.flags & OEA_FLAG_REJECT_NONFINITE) {
		error = OEA_ERR_INVALID_ARGUMENT;
		goto done;
	}
	/* Nothing to write: no rows, k0 >= R (every row stays as it is), or a
	 * gate that no call of n rows can pass. */
	if ((q.n == 0 || q.k0 >= q.top_k - q.num_shared || q.min_valid_rows > q.n) && !q.stats &&
	    !q.totals)
		goto done;

	a.logits = q.logits;
	a.bias = q.correction_bias;
	a.ids = q.ids;
	a.weights = (float *)q.weights;
	a.num_valid_rows = q.num_valid_rows;
	a.stats = q.stats;
	a.totals = q.totals;
	a.lstride = q.logits_row_stride;
	a.istride = q.ids_row_stride;
	a.wstride = q.weights_row_stride;
	a.n = q.n;
	a.E = q.num_experts;
	a.R = q.top_k - q.num_shared;
	a.k0 = q.k0;
	a.renorm = q.renormalize;
	a.ids64 = q.ids_dtype == OEA_DTYPE_I64;
	a.min_valid = q.min_valid_rows;
	a.write = !(q.flags & OEA_FLAG_COUNT_ONLY);
	{
		/* ceil(2^32 / group size): exact division for e < 512 (the error
		 * e * (ceil - 2^32/g) / 2^32 < 2^-23 is below 1/g). */
		unsigned long long g = q.num_expert_group > 0 ? (unsigned long long)(q.num_experts / q.num_expert_group) : 0;
		a.gmagic = g ? ((1ull << 32) + g - 1) / g : 0;
	}

	mode = q.scoring == OEA_SCORING_SOFTMAX ? (q.correction_bias ? OEA_MODE_SOFTMAX_BIAS : OEA_MODE_SOFTMAX)
						 : (q.correction_bias ? OEA_MODE_SIGMOID_BIAS : OEA_MODE_SIGMOID);
	bucket = q.num_experts <= 64 ? 0 : q.num_experts <= 128 ? 1 : q.num_experts <= 256 ? 2 : 3;

	/* One warp per row, but never more blocks than SMs: a cooperative
	 * launch needs every block resident, and one 256-thread block always
	 * fits on an SM. Host-only queries; nothing is read from the device. */
	if (cudaGetDevice(&dev) != cudaSuccess ||
	    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || sms < 1) {
		(void)cudaGetLastError();
		error = OEA_ERR_CUDA;
		goto done;
	}
	/* A device without cooperative launches gets the one-block kernel at once:
	 * a refused launch inside a graph capture would invalidate the capture,
	 * which the fallback below could not repair. */
	if (cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev) != cudaSuccess) {
		(void)cudaGetLastError();
		coop = 0;
	}
	blocks = (q.n + OEA_WARPS - 1) / OEA_WARPS;
	blocks = blocks < 1 || !coop ? 1 : blocks > sms ? sms : blocks;
	{
		void *args[] = {&a};
		const void *fn = (const void *)oea_kernels[q.logits_dtype][mode][bucket];
		/* A cooperative grid may not exceed what the device keeps resident
		 * (occupancy x SMs). One 256-thread block per SM fits every variant
		 * shipped (at most 166 registers a thread, kernel-report.sh), but the
		 * check is the runtime's, not ours: asked once per variant and device
		 * (host-only, allowed during capture), so a launch that would be
		 * refused, which inside a capture would invalidate the graph, is
		 * never attempted. */
		if (blocks > 1) {
			int per_sm = oea_resident_blocks(fn, q.logits_dtype, mode, bucket, dev);
			if (blocks > per_sm * sms)
				blocks = per_sm > 0 ? per_sm * sms : 1;
		}
		/* The launch's own status, not a stale error of the caller's. */
		ce = cudaErrorUnknown;
		if (blocks > 1)
			ce = cudaLaunchCooperativeKernel(fn, dim3(blocks), dim3(OEA_THREADS), args, 0,
							 (cudaStream_t)stream);
		/* One block needs no grid barrier; it is also the fallback when a
		 * cooperative launch is refused (an MPS share smaller than the SM
		 * count, say): slower, the same bits. */
		if (ce != cudaSuccess) {
			(void)cudaGetLastError();
			ce = cudaLaunchKernel(fn, dim3(1), dim3(OEA_THREADS), args, 0, (cudaStream_t)stream);
		}
	}
	if (ce != cudaSuccess) {
		(void)cudaGetLastError(); /* clear it: it is reported through our status */
		error = OEA_ERR_CUDA;
	}
done:
	return error;
}
