/*
 * fuzz_native - liboea's argument check and CPU path (native/src/oea_common.c,
 * oea_cpu.c) on arbitrary shapes and values.
 *
 * The first byte picks a mode:
 *   even: "raw"   - every scalar field of oea_problem straight from the input
 *                   (any int32/int64), pointers from a table (NULL, aligned,
 *                   misaligned). oea_problem_check() must not crash and may
 *                   say OEA_OK only when every documented limit holds;
 *                   oea_route_host() on a refused problem must return the
 *                   same status without touching the (dummy) arrays.
 *   odd:  "route" - a problem whose shape comes from the input, mostly in
 *                   range, with arrays allocated to exactly the size the
 *                   shape and strides imply (so ASan sees any overrun),
 *                   filled with the input's bytes (NaN, inf, negative and
 *                   out-of-range ids, duplicates ...). Then, docs/native-abi.md:
 *                   the status equals the check's (or NONFINITE with the flag);
 *                   a refused call writes nothing; unprocessed rows, shared
 *                   columns and stride gaps are never written; processed rows
 *                   hold distinct ids: their k0 best, c selected experts of U,
 *                   then exactly the fillers of spec version 3 (U outside the
 *                   row by index, then outside U by index, weight +0); the
 *                   stats add up. U (phase 1) is recomputed here with
 *                   oea_row.h's keys (the arithmetic is not what this checks;
 *                   the selection and the fillers are, independently).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oea.h"
#include "oea_row.h"

#define CHECK(cond, ...)                                                 \
	do {                                                                 \
		if (!(cond)) {                                                   \
			fprintf(stderr, "fuzz_native: %s: ", #cond);                 \
			fprintf(stderr, __VA_ARGS__);                                \
			fputc('\n', stderr);                                         \
			__builtin_trap();                                            \
		}                                                                \
	} while (0)

/* A cursor over the input: reads past the end give zeros. */
typedef struct input {
	const uint8_t *p;
	size_t n, at;
} input;

static uint8_t u8(input *in)
{
	return in->at < in->n ? in->p[in->at++] : 0;
}

static uint32_t u32(input *in)
{
	uint32_t v = 0;
	for (int i = 0; i < 4; i++)
		v |= (uint32_t)u8(in) << (8 * i);
	return v;
}

static uint64_t u64(input *in)
{
	return (uint64_t)u32(in) | (uint64_t)u32(in) << 32;
}

static void fill(input *in, void *dst, size_t len)
{
	/* The rest of the input, repeated; zeros when there is none. */
	uint8_t *d = dst;
	size_t rest = in->n > in->at ? in->n - in->at : 0;
	for (size_t i = 0; i < len; i++)
		d[i] = rest ? in->p[in->at + i % rest] : 0;
}

/* Row strides are limited to 2^40 elements (docs/native-abi.md). */
#define MAX_STRIDE ((int64_t)1 << 40)

static _Alignas(16) uint8_t g_dummy[64];

static const void *pick_ptr(uint8_t sel)
{
	switch (sel % 5) {
	case 0: return NULL;
	case 1: return g_dummy;
	case 2: return g_dummy + 1;
	case 3: return g_dummy + 2;
	default: return g_dummy + 4;
	}
}

/* Every documented limit, independent of the check's own order. */
static int limits_hold(const oea_problem *p)
{
	int lsz = p->logits_dtype == OEA_DTYPE_F32 ? 4 : 2, isz = p->ids_dtype == OEA_DTYPE_I64 ? 8 : 4;
	/* A struct shorter than ABI 2's is read as ABI 1's (no reserved_abi2);
	 * one shorter than ABI 3's as ABI 2's (no totals). */
	return p->struct_size >= OEA_PROBLEM_SIZE_V1 &&
	       (p->struct_size < OEA_PROBLEM_SIZE_V2 || p->reserved_abi2 == 0) &&
	       (p->struct_size < sizeof(oea_problem) || (uintptr_t)p->totals % 8 == 0) &&
	       (p->flags & ~(OEA_FLAG_REJECT_NONFINITE | OEA_FLAG_COUNT_ONLY)) == 0 &&
	       (p->renormalize == 0 || p->renormalize == 1) && p->n >= 0 && p->n <= OEA_MAX_ROWS &&
	       p->num_experts >= 1 && p->num_experts <= OEA_MAX_EXPERTS && p->top_k >= 1 &&
	       p->top_k <= OEA_MAX_TOPK && p->num_shared >= 0 && p->num_shared < p->top_k && p->k0 >= 1 &&
	       (p->logits_dtype == OEA_DTYPE_F32 || p->logits_dtype == OEA_DTYPE_BF16 ||
	        p->logits_dtype == OEA_DTYPE_F16) &&
	       (p->ids_dtype == OEA_DTYPE_I32 || p->ids_dtype == OEA_DTYPE_I64) &&
	       p->weights_dtype == OEA_DTYPE_F32 &&
	       (p->scoring == OEA_SCORING_SOFTMAX || p->scoring == OEA_SCORING_SIGMOID) &&
	       (p->num_expert_group == 0 ||
	        (p->num_expert_group > 0 && p->num_experts % p->num_expert_group == 0 && p->topk_group >= 1 &&
	         p->topk_group <= p->num_expert_group)) &&
	       p->logits_row_stride >= p->num_experts && p->ids_row_stride >= p->top_k &&
	       p->weights_row_stride >= p->top_k && p->logits_row_stride <= MAX_STRIDE &&
	       p->ids_row_stride <= MAX_STRIDE && p->weights_row_stride <= MAX_STRIDE &&
	       (p->n == 0 || (p->logits && p->ids && p->weights)) && (uintptr_t)p->logits % lsz == 0 &&
	       (uintptr_t)p->ids % isz == 0 && (uintptr_t)p->weights % 4 == 0 &&
	       (uintptr_t)p->correction_bias % 4 == 0 && (uintptr_t)p->num_valid_rows % 4 == 0 &&
	       (uintptr_t)p->stats % 4 == 0;
}

static void fuzz_raw(input *in)
{
	oea_problem p;
	uint8_t before[sizeof(g_dummy)];
	memset(&p, 0, sizeof(p));
	p.struct_size = u32(in);
	p.flags = u32(in);
	p.n = (int32_t)u32(in);
	p.num_experts = (int32_t)u32(in);
	p.top_k = (int32_t)u32(in);
	p.num_shared = (int32_t)u32(in);
	p.k0 = (int32_t)u32(in);
	p.scoring = (int32_t)u32(in);
	p.renormalize = (int32_t)u32(in);
	p.num_expert_group = (int32_t)u32(in);
	p.topk_group = (int32_t)u32(in);
	p.logits_dtype = (int32_t)u32(in);
	p.logits_row_stride = (int64_t)u64(in);
	p.ids_dtype = (int32_t)u32(in);
	p.weights_dtype = (int32_t)u32(in);
	p.ids_row_stride = (int64_t)u64(in);
	p.weights_row_stride = (int64_t)u64(in);
	p.logits = pick_ptr(u8(in));
	p.correction_bias = pick_ptr(u8(in));
	p.ids = (void *)pick_ptr(u8(in));
	p.weights = (void *)pick_ptr(u8(in));
	p.num_valid_rows = pick_ptr(u8(in));
	p.stats = (oea_stats *)pick_ptr(u8(in));
	p.min_valid_rows = (int32_t)u32(in);
	p.reserved_abi2 = (u8(in) & 3) == 3 ? (int32_t)u32(in) : 0;
	p.totals = (oea_totals *)pick_ptr(u8(in));
	/* An ABI 1 or 2 caller's size now and then: its struct ends before the new fields. */
	uint8_t older = u8(in);
	if ((older & 7) == 7)
		p.struct_size = (uint32_t)OEA_PROBLEM_SIZE_V1 + (u8(in) & 7);
	else if ((older & 7) == 6)
		p.struct_size = (uint32_t)OEA_PROBLEM_SIZE_V2 + (u8(in) & 7);
	/* A small struct_size often, so the in-range paths are reached too. */
	if (u8(in) & 1)
		p.struct_size = sizeof(oea_problem);

	int st = oea_problem_check(&p);
	CHECK(st >= OEA_OK && st <= OEA_ERR_INVALID_ARGUMENT, "check returned %d", st);
	CHECK((st == OEA_OK) == limits_hold(&p), "check says %d, the documented limits say %s", st,
	      limits_hold(&p) ? "ok" : "not ok");
	CHECK(oea_status_message(st) && oea_status_message(st)[0], "no message for %d", st);
	CHECK(oea_problem_check(NULL) == OEA_ERR_NULL_ARGUMENT, "check(NULL)");
	CHECK(oea_route_host(NULL) == OEA_ERR_NULL_ARGUMENT, "route_host(NULL)");
	if (st != OEA_OK) {
		/* The dummy arrays are 64 bytes: the call must refuse before any access. */
		memcpy(before, g_dummy, sizeof(g_dummy));
		CHECK(oea_route_host(&p) == st, "route_host and check disagree");
		CHECK(memcmp(before, g_dummy, sizeof(g_dummy)) == 0, "a refused call wrote");
	}
#if !defined(OEA_FUZZ_WITH_CUDA)
	CHECK(oea_route_cuda(&p, NULL) == OEA_ERR_NO_CUDA, "route_cuda without CUDA");
#endif
	CHECK(oea_status_message((int)u32(in)) != NULL, "status message NULL");
}

static int64_t id_at(const void *ids, int dtype, int64_t stride, int i, int j)
{
	return dtype == OEA_DTYPE_I64 ? ((const int64_t *)ids)[(int64_t)i * stride + j]
	                              : ((const int32_t *)ids)[(int64_t)i * stride + j];
}

/* 0 valid, 1 padding, 2 invalid: validity from the original ids, as documented. */
static int row_class(const void *ids0, int dtype, int64_t stride, int i, int R, int E)
{
	int cls = 0;
	for (int j = 0; j < R && cls != 1; j++) {
		int64_t id = id_at(ids0, dtype, stride, i, j);
		if (id < 0)
			cls = 1;
		else if (id >= E)
			cls = 2;
	}
	for (int j = 0; j < R && cls == 0; j++)
		for (int k = j + 1; k < R; k++)
			if (id_at(ids0, dtype, stride, i, j) == id_at(ids0, dtype, stride, i, k))
				cls = 2;
	return cls;
}

/* Row i's k0 best routed ids (phase 1) by oea_better, into best[]:
 * counted ranks, not the library's selection loop. */
static void phase1(const oea_problem *p, const void *ids0, int i, int R, int *best)
{
	const void *lrow = (const char *)p->logits + (size_t)i * (size_t)p->logits_row_stride *
						      (p->logits_dtype == OEA_DTYPE_F32 ? 4 : 2);
	float m = 0.0f, s = 0.0f, v[OEA_LANES], key[OEA_MAX_TOPK];
	int id[OEA_MAX_TOPK];

	if (p->scoring == OEA_SCORING_SOFTMAX) {
		for (int l = 0; l < OEA_LANES; l++)
			v[l] = oea_lane_max(lrow, p->logits_dtype, p->num_experts, l);
		m = oea_tree_max32(v);
		for (int l = 0; l < OEA_LANES; l++)
			v[l] = oea_lane_sum(lrow, p->logits_dtype, p->num_experts, l, m);
		s = oea_tree_sum32(v);
	}
	for (int j = 0; j < R; j++) {
		id[j] = (int)id_at(ids0, p->ids_dtype, p->ids_row_stride, i, j);
		float l = oea_logit(lrow, p->logits_dtype, id[j]);
		key[j] = oea_key(l, oea_score(l, p->scoring, m, s), p->scoring, p->correction_bias, id[j]);
	}
	for (int j = 0; j < R; j++) {
		int rank = 0;
		for (int k = 0; k < R; k++)
			rank += oea_better(key[k], id[k], key[j], id[j]);
		if (rank < p->k0)
			best[rank] = id[j];
	}
}

static void fuzz_route(input *in)
{
	uint8_t b[16];
	for (int i = 0; i < 16; i++)
		b[i] = u8(in);
	oea_problem p;
	memset(&p, 0, sizeof(p));
	p.struct_size = sizeof(p);
	/* Mostly valid, sometimes just outside: the check's edges. */
	p.n = (b[0] & 0x80) ? (int32_t)(((b[0] & 0x7f) << 8 | b[1]) % 1100) : b[1] % 40;
	p.num_experts = (b[2] & 0x80) ? (int32_t)(((b[2] & 0x7f) << 8 | b[3]) % 530) : b[3] % 70;
	p.top_k = b[4] % 18;
	p.num_shared = b[5] % 4 == 0 ? b[5] / 4 % 3 : 0;
	p.k0 = (int32_t)(b[6] % 18);
	p.scoring = b[7] % 3 == 2 ? (b[7] % 9 == 8 ? 5 : 1) : b[7] % 2;
	p.renormalize = b[8] % 7 == 6 ? 2 : b[8] & 1;
	p.num_expert_group = b[9] % 3 ? 0 : b[9] / 3 % 9;
	p.topk_group = p.num_expert_group ? 1 + b[10] % (p.num_expert_group + 1) : b[10] % 2;
	p.logits_dtype = b[11] % 7 == 6 ? 4 : b[11] % 3;
	p.ids_dtype = b[12] % 7 == 6 ? 1 : 3 + b[12] % 2;
	p.weights_dtype = b[13] % 11 == 10 ? 1 : OEA_DTYPE_F32;
	/* 4: a flag bit no liboea knows (refused); COUNT_ONLY: checked against the writing call. */
	p.flags = b[14] % 13 == 12 ? 4u
	          : (b[14] % 13 == 11 ? OEA_FLAG_COUNT_ONLY : 0u) | (b[14] & 0x40 ? OEA_FLAG_REJECT_NONFINITE : 0u);
	uint8_t extra = b[15];
	p.logits_row_stride = p.num_experts + (extra & 3) - ((extra & 0xf0) == 0xf0);
	p.ids_row_stride = p.top_k + ((extra >> 2) & 3);
	p.weights_row_stride = p.top_k + ((extra >> 4) & 1);

	uint8_t opt = u8(in);
	int32_t nvr = (int32_t)(int8_t)u8(in) * 9; /* negative, small, beyond n */
	/* The ABI 2 gate: off, or around the number of rows (negative = off). */
	p.min_valid_rows = (opt & 128) ? (int32_t)(int8_t)u8(in) % 12 : 0;
	oea_stats stats;
	oea_totals totals;
	float *bias = NULL;

	int n = p.n > 0 && p.n <= OEA_MAX_ROWS ? p.n : 0;
	int E = p.num_experts >= 1 && p.num_experts <= OEA_MAX_EXPERTS ? p.num_experts : 1;
	int K = p.top_k >= 1 && p.top_k <= OEA_MAX_TOPK ? p.top_k : 1;
	size_t lsz = p.logits_dtype == OEA_DTYPE_F32 ? 4 : 2, isz = p.ids_dtype == OEA_DTYPE_I64 ? 8 : 4;
	int64_t ls = p.logits_row_stride > 0 ? p.logits_row_stride : 1;
	size_t lbytes = n ? ((size_t)(n - 1) * (size_t)ls + (size_t)E) * lsz : 0;
	size_t ibytes = n ? ((size_t)(n - 1) * (size_t)p.ids_row_stride + (size_t)K) * isz : 0;
	size_t wbytes = n ? ((size_t)(n - 1) * (size_t)p.weights_row_stride + (size_t)K) * 4 : 0;
	/* Exact sizes (no rounding up): ASan reports the first byte past them. */
	void *logits = malloc(lbytes ? lbytes : 1);
	void *ids = malloc(ibytes ? ibytes : 1), *ids0 = malloc(ibytes ? ibytes : 1);
	float *w = malloc(wbytes ? wbytes : 4), *w0 = malloc(wbytes ? wbytes : 4);
	if (!logits || !ids || !ids0 || !w || !w0)
		goto done;
	fill(in, logits, lbytes);
	/* ids: small values around [0, E) so that many rows are valid, from the input. */
	for (size_t k = 0; k < ibytes / isz; k++) {
		uint8_t v = u8(in);
		int64_t id = (v & 0xc0) == 0xc0 ? (int64_t)(int8_t)v : (v & 0x80) ? E + (v & 3) : (int64_t)(v % (E + 1));
		if (isz == 8) {
			if ((v & 0xfe) == 0xfe)
				id = (int64_t)1 << 33 | (uint64_t)(v & 1); /* truncates to a small id as int32 */
			((int64_t *)ids)[k] = id;
		} else {
			((int32_t *)ids)[k] = (int32_t)id;
		}
	}
	/* Distinct ids make valid rows: rewrite some rows as a permutation. */
	for (int i = 0; i < n; i++) {
		if (!(opt & 1) && (i % 3))
			continue;
		for (int j = 0; j < K; j++) {
			int64_t id = (int64_t)((j + i + (opt >> 1)) % E);
			if (j >= E)
				id = j; /* cannot be distinct: an invalid row */
			if (isz == 8)
				((int64_t *)ids)[(size_t)i * (size_t)p.ids_row_stride + j] = id;
			else
				((int32_t *)ids)[(size_t)i * (size_t)p.ids_row_stride + j] = (int32_t)id;
		}
	}
	fill(in, w, wbytes);
	memcpy(ids0, ids, ibytes ? ibytes : 1);
	memcpy(w0, w, wbytes ? wbytes : 4);
	if (opt & 2) {
		bias = malloc((size_t)E * sizeof(float));
		if (!bias)
			goto done;
		fill(in, bias, (size_t)E * sizeof(float));
		if (opt & 4)
			for (int e = 0; e < E; e++)
				if (!isfinite(bias[e]))
					bias[e] = 0.0f;
	}
	if (!(opt & 8))
		for (size_t k = 0; k < lbytes / lsz && lsz == 4; k++)
			if (!isfinite(((float *)logits)[k]))
				((float *)logits)[k] = -1.0f; /* most calls: finite logits */

	p.logits = n ? logits : (opt & 16 ? NULL : logits);
	p.ids = n ? ids : (opt & 16 ? NULL : ids);
	p.weights = n ? w : (opt & 16 ? NULL : w);
	p.correction_bias = bias;
	p.num_valid_rows = (opt & 32) ? &nvr : NULL;
	memset(&stats, 0xa5, sizeof(stats));
	p.stats = (opt & 64) ? &stats : NULL;
	memset(&totals, 0, sizeof(totals));
	p.totals = (opt & 8) ? &totals : NULL;

	int st_check = oea_problem_check(&p);
	int st = oea_route_host(&p);
	CHECK(st == st_check || (st_check == OEA_OK && st == OEA_ERR_NONFINITE &&
	                         (p.flags & OEA_FLAG_REJECT_NONFINITE)),
	      "route_host returned %d, check %d", st, st_check);
	if (st != OEA_OK) {
		CHECK(memcmp(ids, ids0, ibytes) == 0 && memcmp(w, w0, wbytes) == 0, "refused call (%d) wrote", st);
		CHECK(!p.stats || stats.t_before == 0xa5a5a5a5u, "refused call (%d) wrote stats", st);
		CHECK(totals.calls == 0 && totals.rerouted_rows == 0, "refused call (%d) added to totals", st);
		goto done;
	}
	if (p.flags & OEA_FLAG_COUNT_ONLY) {
		/* Reads ids and weights only; its stats and totals are the writing call's, bit for bit. */
		CHECK(memcmp(ids, ids0, ibytes) == 0 && memcmp(w, w0, wbytes) == 0, "a count-only call wrote");
		oea_problem q = p;
		oea_stats stats_w;
		oea_totals totals_w;
		memset(&stats_w, 0xa5, sizeof(stats_w));
		memset(&totals_w, 0, sizeof(totals_w));
		q.flags &= ~OEA_FLAG_COUNT_ONLY;
		q.stats = p.stats ? &stats_w : NULL;
		q.totals = p.totals ? &totals_w : NULL;
		CHECK(oea_route_host(&q) == OEA_OK, "the writing call of a count-only call's problem failed");
		CHECK(!p.stats || memcmp(&stats, &stats_w, sizeof(stats)) == 0, "count-only stats differ from the writing call's");
		CHECK(!p.totals || memcmp(&totals, &totals_w, sizeof(totals)) == 0,
		      "count-only totals differ from the writing call's");
		goto done;
	}

	int R = p.top_k - p.num_shared;
	int limit = p.num_valid_rows ? (nvr < 0 ? 0 : nvr < n ? nvr : n) : n;
	uint8_t used_before[OEA_MAX_EXPERTS] = {0}, used_after[OEA_MAX_EXPERTS] = {0};
	uint32_t valid = 0, invalid = 0, nproc = 0;
	for (int i = 0; i < limit; i++)
		nproc += row_class(ids0, p.ids_dtype, p.ids_row_stride, i, R, E) == 0;
	int gated = p.min_valid_rows > 0 && nproc < (uint32_t)p.min_valid_rows;
	/* U: the union of the processed rows' phase 1 (when rows are rewritten). */
	uint8_t in_u[OEA_MAX_EXPERTS] = {0};
	int nu = 0;
	if (p.k0 < R && !gated)
		for (int i = 0; i < limit; i++) {
			int best[OEA_MAX_TOPK];
			if (row_class(ids0, p.ids_dtype, p.ids_row_stride, i, R, E))
				continue;
			phase1(&p, ids0, i, R, best);
			for (int k = 0; k < p.k0; k++) {
				nu += !in_u[best[k]];
				in_u[best[k]] = 1;
			}
		}
	for (int i = 0; i < n; i++) {
		int cls = row_class(ids0, p.ids_dtype, p.ids_row_stride, i, R, E);
		int processed = i < limit && cls == 0;
		if (i < limit && cls == 2)
			invalid++;
		size_t irow = (size_t)i * (size_t)p.ids_row_stride * isz, wrow = (size_t)i * (size_t)p.weights_row_stride * 4;
		size_t ilen = i == n - 1 ? (size_t)K * isz : (size_t)p.ids_row_stride * isz;
		size_t wlen = i == n - 1 ? (size_t)K * 4 : (size_t)p.weights_row_stride * 4;
		if (!processed) {
			CHECK(memcmp((char *)ids + irow, (char *)ids0 + irow, ilen) == 0, "row %d not processed but ids written", i);
			CHECK(memcmp((char *)w + wrow, (char *)w0 + wrow, wlen) == 0, "row %d not processed but weights written", i);
			continue;
		}
		valid++;
		/* Shared columns and stride gaps: never written. */
		CHECK(memcmp((char *)ids + irow + (size_t)R * isz, (char *)ids0 + irow + (size_t)R * isz,
		             ilen - (size_t)R * isz) == 0,
		      "row %d: shared columns or gap of ids written", i);
		CHECK(memcmp((char *)w + wrow + (size_t)R * 4, (char *)w0 + wrow + (size_t)R * 4, wlen - (size_t)R * 4) == 0,
		      "row %d: shared columns or gap of weights written", i);
		for (int j = 0; j < R; j++)
			used_before[id_at(ids0, p.ids_dtype, p.ids_row_stride, i, j)] = 1;
		if (p.k0 >= R || gated) {
			CHECK(memcmp((char *)ids + irow, (char *)ids0 + irow, ilen) == 0 &&
			          memcmp((char *)w + wrow, (char *)w0 + wrow, wlen) == 0,
			      "row %d: k0 >= R or gated but written", i);
			continue;
		}
		/* The selection: P_i, then candidates (U \ P_i in the row's
		 * groups), as many as exist up to R: c of them, in [0, c). */
		int best[OEA_MAX_TOPK], ncand = 0;
		int gs = p.num_expert_group ? E / p.num_expert_group : 0;
		phase1(&p, ids0, i, R, best);
		for (int e = 0; e < E; e++) {
			int inp = 0, ing = !gs;
			for (int k = 0; k < p.k0; k++)
				inp |= best[k] == e;
			for (int j = 0; gs && j < R; j++)
				ing |= id_at(ids0, p.ids_dtype, p.ids_row_stride, i, j) / gs == e / gs;
			ncand += in_u[e] && !inp && ing;
		}
		int c = p.k0 + ncand < R ? p.k0 + ncand : R;
		uint8_t in_row[OEA_MAX_EXPERTS] = {0};
		for (int j = 0; j < R; j++) {
			int64_t id = id_at(ids, p.ids_dtype, p.ids_row_stride, i, j);
			CHECK(id >= 0 && id < E, "row %d col %d: id %lld out of range", i, j, (long long)id);
			CHECK(!in_row[id], "row %d col %d: id %lld repeated (ids must be distinct)", i, j,
			      (long long)id);
			used_after[id] = 1;
			if (j < c) {
				CHECK(in_u[id], "row %d col %d: selected id %lld not in U", i, j, (long long)id);
				in_row[id] = 1;
			}
		}
		for (int k = 0; k < p.k0; k++)
			CHECK(in_row[best[k]], "row %d: phase-1 expert %d not in the selection", i, best[k]);
		/* Fillers: the experts not in the selection, of U by index, then
		 * outside U by index, each with weight +0 (the bits of +0). */
		int next = c;
		for (int tier = 0; tier < 2 && next < R; tier++)
			for (int e = 0; e < E && next < R; e++) {
				if (in_row[e] || (tier == 0 ? !in_u[e] : in_u[e]))
					continue;
				uint32_t wb;
				memcpy(&wb, &w[(size_t)i * (size_t)p.weights_row_stride + next], 4);
				CHECK(id_at(ids, p.ids_dtype, p.ids_row_stride, i, next) == e && wb == 0,
				      "row %d col %d: filler %lld weight bits %08x, spec 3 wants %d with +0", i,
				      next, (long long)id_at(ids, p.ids_dtype, p.ids_row_stride, i, next),
				      (unsigned)wb, e);
				next++;
			}
		CHECK(next == R, "row %d: %d fillers found for %d slots", i, next - c, R - c);
	}
	if (p.stats) {
		uint32_t tb = 0, ta = 0;
		for (int e = 0; e < E; e++) {
			tb += used_before[e];
			ta += used_after[e];
		}
		CHECK(stats.valid_rows == valid && stats.invalid_rows == invalid, "stats rows %u/%u, expected %u/%u",
		      stats.valid_rows, stats.invalid_rows, valid, invalid);
		CHECK(stats.t_before == tb, "stats t_before %u, expected %u", stats.t_before, tb);
		CHECK(stats.t_after <= stats.t_before, "t_after %u > t_before %u", stats.t_after, stats.t_before);
		CHECK(p.k0 >= R || gated ? stats.t_after == stats.t_before : stats.t_after == ta,
		      "stats t_after %u, the rows use %u", stats.t_after, ta);
		/* Spec 3: U, plus the R - |U| fillers from outside U when |U| < R. */
		CHECK(p.k0 >= R || gated || valid == 0 || ta == (uint32_t)(nu < R ? R : nu),
		      "the rows use %u experts, |U| = %d, R = %d", ta, nu, R);
		CHECK(stats.nonfinite_rows <= stats.valid_rows, "nonfinite_rows > valid_rows");
		CHECK(stats.gated == (uint32_t)gated, "stats gated %u, expected %d", stats.gated, gated);
		CHECK(stats.reserved[0] == 0 && stats.reserved[1] == 0, "reserved not zeroed");
	}
	if (p.totals) {
		/* Rule 10: one call; the re-routed rows each in one kept bucket or
		 * undefined, at most R - k0 changed slots a row, unchanged rows at
		 * exactly 1 (bucket 14). */
		uint64_t rerouted = p.k0 < R && !gated ? valid : 0, in_buckets = 0;
		for (int b = 0; b < OEA_KEPT_BUCKETS; b++)
			in_buckets += totals.kept_hist[b];
		CHECK(totals.calls == 1 && totals.gated == (uint64_t)gated, "totals calls/gated %llu/%llu",
		      (unsigned long long)totals.calls, (unsigned long long)totals.gated);
		CHECK(totals.valid_rows == (gated ? 0 : valid), "totals valid_rows %llu",
		      (unsigned long long)totals.valid_rows);
		CHECK(totals.rerouted_rows == rerouted, "totals rerouted_rows %llu, expected %llu",
		      (unsigned long long)totals.rerouted_rows, (unsigned long long)rerouted);
		CHECK(in_buckets + totals.kept_undefined == rerouted, "kept buckets + undefined != rows");
		CHECK(totals.changed_slots <= rerouted * (uint64_t)(R > p.k0 ? R - p.k0 : 0),
		      "changed slots %llu beyond R - k0 a row", (unsigned long long)totals.changed_slots);
		CHECK(totals.kept_hist[14] + totals.changed_slots >= rerouted, "an unchanged row not at kept 1");
	}
done:
	free(logits);
	free(ids);
	free(ids0);
	free(w);
	free(w0);
	free(bias);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	input in = {data, size, 0};
	uint8_t mode = u8(&in);
	if (mode & 1)
		fuzz_route(&in);
	else
		fuzz_raw(&in);
	return 0;
}
