/*
 * oea_cuda.cu - the CUDA path of OEA routing: one launch of one thread block
 * on the caller's stream, no allocation, no synchronisation, no host read of
 * device data (num_valid_rows is read by the kernel). Graph-capturable.
 *
 * Layout of the work: warp w handles rows w, w + nwarps, ...; a row is spread
 * over the warp's 32 lanes (expert e belongs to lane e % 32), which is the
 * order oea_row.h defines for every sum and max. Phase 1 builds the loaded
 * set U as a shared-memory bitmask with atomicOr (order-independent, so the
 * result is deterministic), a __syncthreads separates it from phase 2, and
 * phase 2 rewrites each valid row. All arithmetic comes from oea_row.h;
 * this file must be compiled with -fmad=false (see CMakeLists.txt).
 */
#include <cuda_runtime.h>

#include "oea.h"
#include "oea_internal.h"
#include "oea_row.h"

#define OEA_WARPS 32
#define OEA_FULL 0xffffffffu
#define OEA_MASK_WORDS (OEA_MAX_EXPERTS / 32)

struct oea_smem {
	uint32_t u[OEA_MASK_WORDS];  /* loaded set U */
	uint32_t tb[OEA_MASK_WORDS]; /* experts of the original routing (T before) */
	uint32_t pmask[OEA_WARPS][OEA_MASK_WORDS]; /* the current row's phase-1 set */
	uint32_t gmask[OEA_WARPS][OEA_MASK_WORDS]; /* the current row's allowed groups */
	int32_t sel_id[OEA_WARPS][OEA_MAX_TOPK];
	float sel_key[OEA_WARPS][OEA_MAX_TOPK];
	float sel_score[OEA_WARPS][OEA_MAX_TOPK];
	int best_col[OEA_WARPS];
	float m[OEA_MAX_ROWS];
	float s[OEA_MAX_ROWS];
	uint8_t state[OEA_MAX_ROWS];
	unsigned valid, invalid, nonfinite;
	int nvr; /* rows below this are candidates (num_valid_rows, clamped) */
};

__device__ __forceinline__ int oea_dbit(const uint32_t *mask, int e)
{
	return (mask[e >> 5] >> (e & 31)) & 1u;
}

/* Butterfly max/sum; lane 0's value is oea_tree_max32/sum32 of the lanes'
 * partials, and it is broadcast so that every lane uses the same bits. */
__device__ __forceinline__ float oea_warp_max(float v)
{
	for (int off = 16; off > 0; off >>= 1)
		v = oea_max2(v, __shfl_xor_sync(OEA_FULL, v, off));
	return __shfl_sync(OEA_FULL, v, 0);
}

__device__ __forceinline__ float oea_warp_sum(float v)
{
	for (int off = 16; off > 0; off >>= 1)
		v = v + __shfl_xor_sync(OEA_FULL, v, off);
	return __shfl_sync(OEA_FULL, v, 0);
}

/*
 * Phase 1 of a row on a warp: lane c < R takes routed column c and computes
 * its id, score, key and rank (the number of routed experts that rank before
 * it). The k0 lanes with rank < k0 form P_i.
 */
__device__ __forceinline__ void oea_warp_phase1(const oea_problem &p, const void *lrow,
						const void *irow, int R, int lane, float m, float s,
						int32_t *id, float *score, float *key, int *rank)
{
	int32_t myid = 0;
	float mys = 0.0f, myk = 0.0f;

	if (lane < R) {
		myid = (int32_t)oea_id_load(irow, p.ids_dtype, lane);
		mys = oea_score(oea_logit(lrow, p.logits_dtype, myid), p.scoring, m, s);
		myk = oea_key(mys, p.correction_bias, myid);
	}
	int r = 0;
	for (int b = 0; b < R; b++) {
		float kb = __shfl_sync(OEA_FULL, myk, b);
		int32_t ib = __shfl_sync(OEA_FULL, myid, b);
		r += oea_better(kb, ib, myk, myid);
	}
	*id = myid;
	*score = mys;
	*key = myk;
	*rank = r;
}

__global__ void __launch_bounds__(1024, 1) oea_kernel(oea_problem p)
{
	__shared__ oea_smem sm;
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	const int nwarps = blockDim.x >> 5;
	const int R = p.top_k - p.num_shared, E = p.num_experts;
	const int gsize = p.num_expert_group > 0 ? E / p.num_expert_group : 0;
	if (threadIdx.x < OEA_MASK_WORDS) {
		sm.u[threadIdx.x] = 0;
		sm.tb[threadIdx.x] = 0;
	}
	if (threadIdx.x == 0) {
		sm.valid = sm.invalid = sm.nonfinite = 0;
		/* One read for the whole block: a counter the caller updates while
		 * the kernel runs must not give two warps two different answers. */
		int v = p.num_valid_rows ? *(const volatile int32_t *)p.num_valid_rows : p.n;
		sm.nvr = v < 0 ? 0 : v < p.n ? v : p.n;
	}
	__syncthreads();
	const int nvr = sm.nvr;

	/* Phase 1: validity, T before, softmax statistics, U. */
	for (int i = warp; i < p.n; i += nwarps) {
		const void *lrow = oea_row_ptr(p.logits, p.logits_dtype, p.logits_row_stride, i);
		const void *irow = oea_row_ptr(p.ids, p.ids_dtype, p.ids_row_stride, i);
		/* Lane 0 classifies the row and the warp takes its answer, so the
		 * `continue` below is warp-uniform even if ids change under us. */
		int st = 0xff;
		if (lane == 0 && i < nvr)
			st = oea_row_classify(irow, p.ids_dtype, R, E);
		st = __shfl_sync(OEA_FULL, st, 0);

		if (lane == 0) {
			sm.state[i] = (uint8_t)st;
			if (st == OEA_ROW_INVALID)
				atomicAdd(&sm.invalid, 1u);
		}
		if (st != OEA_ROW_VALID)
			continue;
		int nf = __any_sync(OEA_FULL, oea_lane_nonfinite(lrow, p.logits_dtype, E, lane,
								  p.correction_bias));
		if (lane == 0) {
			atomicAdd(&sm.valid, 1u);
			if (nf)
				atomicAdd(&sm.nonfinite, 1u);
		}
		if (lane < R) {
			int e = (int)oea_id_load(irow, p.ids_dtype, lane);
			atomicOr(&sm.tb[e >> 5], 1u << (e & 31));
		}
		if (p.k0 >= R)
			continue;
		float m = 0.0f, s = 0.0f;
		if (p.scoring == OEA_SCORING_SOFTMAX) {
			m = oea_warp_max(oea_lane_max(lrow, p.logits_dtype, E, lane));
			s = oea_warp_sum(oea_lane_sum(lrow, p.logits_dtype, E, lane, m));
		}
		if (lane == 0) {
			sm.m[i] = m;
			sm.s[i] = s;
		}
		int32_t id;
		float score, key;
		int rank;
		oea_warp_phase1(p, lrow, irow, R, lane, m, s, &id, &score, &key, &rank);
		if (lane < R && rank < p.k0)
			atomicOr(&sm.u[id >> 5], 1u << (id & 31));
	}
	__syncthreads();

	/* The minimum-batch gate, on the device's own count of processed rows
	 * (sm.valid is final after the barrier and the same for every thread). */
	const int gated = p.min_valid_rows > 0 && sm.valid < (unsigned)p.min_valid_rows;
	if (threadIdx.x == 0 && p.stats) {
		unsigned tb = 0, ta = 0;
		for (int w = 0; w < OEA_MASK_WORDS; w++) {
			tb += __popc(sm.tb[w]);
			ta += __popc(sm.u[w]);
		}
		p.stats->t_before = tb;
		p.stats->t_after = p.k0 >= R || gated ? tb : ta;
		p.stats->valid_rows = sm.valid;
		p.stats->invalid_rows = sm.invalid;
		p.stats->nonfinite_rows = sm.nonfinite;
		p.stats->gated = (unsigned)gated;
		p.stats->reserved[0] = p.stats->reserved[1] = 0;
	}
	if (p.k0 >= R || gated)
		return;

	/* Phase 2: every row sees the complete U. */
	const int want = R - p.k0;
	for (int i = warp; i < p.n; i += nwarps) {
		if (sm.state[i] != OEA_ROW_VALID)
			continue;
		const void *lrow = oea_row_ptr(p.logits, p.logits_dtype, p.logits_row_stride, i);
		void *irow = (void *)oea_row_ptr(p.ids, p.ids_dtype, p.ids_row_stride, i);
		float *wrow = (float *)oea_row_ptr(p.weights, OEA_DTYPE_F32, p.weights_row_stride, i);
		const float m = sm.m[i], s = sm.s[i];
		int32_t id;
		float score, key;
		int rank;

		oea_warp_phase1(p, lrow, irow, R, lane, m, s, &id, &score, &key, &rank);
		if (lane < OEA_MASK_WORDS) {
			sm.pmask[warp][lane] = 0;
			sm.gmask[warp][lane] = 0;
		}
		__syncwarp();
		if (lane < R) {
			if (rank < p.k0) {
				atomicOr(&sm.pmask[warp][id >> 5], 1u << (id & 31));
				sm.sel_id[warp][rank] = id;
				sm.sel_key[warp][rank] = key;
				sm.sel_score[warp][rank] = score;
				if (rank == 0)
					sm.best_col[warp] = lane;
			}
			if (gsize) {
				int g = id / gsize;
				atomicOr(&sm.gmask[warp][g >> 5], 1u << (g & 31));
			}
		}
		__syncwarp();

		/* This lane's candidates: e = lane + 32 j in U, not in P_i, in an
		 * allowed group. Their scores and keys stay in registers (the
		 * unrolled loops index the arrays with constants only). */
		uint32_t cand = 0;
		float ck[OEA_PER_LANE], cs[OEA_PER_LANE];
#pragma unroll
		for (int j = 0; j < OEA_PER_LANE; j++) {
			int e = lane + 32 * j;
			ck[j] = cs[j] = 0.0f;
			if (e < E && oea_dbit(sm.u, e) && !oea_dbit(sm.pmask[warp], e) &&
			    (!gsize || oea_dbit(sm.gmask[warp], e / gsize))) {
				cand |= 1u << j;
				cs[j] = oea_score(oea_logit(lrow, p.logits_dtype, e), p.scoring, m, s);
				ck[j] = oea_key(cs[j], p.correction_bias, e);
			}
		}

		/* Repeated warp argmax under the total order of oea_better: every
		 * lane ends with the same winner, whatever the shuffle order. */
		int c = p.k0;
		for (int t = 0; t < want; t++) {
			float bk = 0.0f, bs = 0.0f;
			int be = -1;
#pragma unroll
			for (int j = 0; j < OEA_PER_LANE; j++) {
				int e = lane + 32 * j;
				if (((cand >> j) & 1u) && (be < 0 || oea_better(ck[j], e, bk, be))) {
					bk = ck[j];
					bs = cs[j];
					be = e;
				}
			}
			for (int off = 16; off > 0; off >>= 1) {
				float ok = __shfl_xor_sync(OEA_FULL, bk, off);
				float os = __shfl_xor_sync(OEA_FULL, bs, off);
				int oe = __shfl_xor_sync(OEA_FULL, be, off);
				if (oe >= 0 && (be < 0 || oea_better(ok, oe, bk, be))) {
					bk = ok;
					bs = os;
					be = oe;
				}
			}
			if (be < 0)
				break;
			if (lane == (be & 31))
				cand &= ~(1u << (be >> 5));
			if (lane == 0) {
				sm.sel_id[warp][c] = be;
				sm.sel_key[warp][c] = bk;
				sm.sel_score[warp][c] = bs;
			}
			c++;
		}
		__syncwarp();
		if (lane == 0) {
			int32_t best_id = sm.sel_id[warp][0];
			float best_score = sm.sel_score[warp][0];
			oea_row_finish(c, sm.sel_id[warp], sm.sel_key[warp], sm.sel_score[warp], R,
				       p.renormalize, best_id, sm.best_col[warp], best_score, irow,
				       p.ids_dtype, wrow);
		}
		__syncwarp();
	}
}

extern "C" int oea_has_cuda(void)
{
	return 1;
}

extern "C" int oea_route_cuda(const oea_problem *p, void *stream)
{
	oea_problem q;
	cudaError_t ce;
	/* q is the caller's problem as a current-ABI struct (an ABI 1 caller's
	 * is shorter): the kernel gets q, never the caller's bytes. */
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
	if ((q.n == 0 || q.k0 >= q.top_k - q.num_shared || q.min_valid_rows > q.n) && !q.stats)
		goto done;

	{
		int warps = q.n < 1 ? 1 : q.n < OEA_WARPS ? q.n : OEA_WARPS;
		void *args[] = {&q};
		/* The launch's own status, not a stale error of the caller's. */
		ce = cudaLaunchKernel((const void *)oea_kernel, dim3(1), dim3(32 * warps), args, 0,
				      (cudaStream_t)stream);
	}
	if (ce != cudaSuccess) {
		(void)cudaGetLastError(); /* clear it: it is reported through our status */
		error = OEA_ERR_CUDA;
	}
done:
	return error;
}
