/*
 * test_oea_cpu.c - cmocka tests of liboea's CPU reference.
 *
 * Groups (the first argument picks one; no argument runs all):
 *   oracle      oea_route_host against a brute-force, sort-based oracle
 *               written independently below, bit for bit, on thousands of
 *               random cases (tests/oea_testcase.h) and hand-made corners
 *   fastpath    the same comparison over a grid of batch sizes (1..1024) and
 *               expert counts (1..512) around the blocks and words that the
 *               CPU reference's fast paths work in, and batches of ties
 *   properties  the invariants of the spec on random cases
 *   errors      every status code, with its message
 *   numerics    oea_exp and the fp16/bf16 conversions against libm; the
 *               4-wide exp and scores of oea_simd.h against oea_exp bitwise
 *
 * The oracle shares only oea_exp (the numeric primitive, checked against libm
 * in "numerics") with the library: validity, reductions, orders, selection,
 * weights and stats are its own code.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "oea.h"
#include "oea_row.h"
#include "oea_simd.h"
#include "oea_testcase.h"

/* Number of random cases per group; OEA_TEST_CASES overrides. */
static int test_cases(int dflt)
{
	const char *s = getenv("OEA_TEST_CASES");
	return s && atoi(s) > 0 ? atoi(s) : dflt;
}

/* ---- the oracle -------------------------------------------------------- */

typedef struct orc_ent {
	float key, score;
	int id, col;
} orc_ent;

/* Rank order: numbers before NaN, higher key first, then lower id. */
static int orc_cmp(const void *pa, const void *pb)
{
	const orc_ent *a = pa, *b = pb;
	int na = isnan(a->key), nb = isnan(b->key);

	if (na != nb)
		return na ? 1 : -1;
	if (!na && a->key != b->key)
		return a->key > b->key ? -1 : 1;
	return (a->id > b->id) - (a->id < b->id);
}

static float orc_logit(const oea_problem *p, int i, int e)
{
	size_t es = p->logits_dtype == OEA_DTYPE_F32 ? 4 : 2;
	const unsigned char *b = (const unsigned char *)p->logits +
				 ((size_t)i * (size_t)p->logits_row_stride + (size_t)e) * es;
	uint16_t h;
	uint32_t u;
	float f;

	if (es == 4) {
		memcpy(&f, b, 4);
		return f;
	}
	memcpy(&h, b, 2);
	if (p->logits_dtype == OEA_DTYPE_BF16) {
		u = (uint32_t)h << 16;
		memcpy(&f, &u, 4);
		return f;
	}
	/* fp16 through double: an exact, differently written conversion. */
	{
		int ex = (h >> 10) & 31, m = h & 1023;
		double v;
		if (ex == 31)
			v = m ? NAN : INFINITY;
		else if (ex == 0)
			v = ldexp((double)m, -24);
		else
			v = ldexp((double)(m + 1024), ex - 25);
		return (float)((h & 0x8000) ? -v : v);
	}
}

static int64_t orc_id(const oea_problem *p, const void *ids, int i, int c)
{
	if (p->ids_dtype == OEA_DTYPE_I64)
		return ((const int64_t *)ids)[(size_t)i * (size_t)p->ids_row_stride + (size_t)c];
	return ((const int32_t *)ids)[(size_t)i * (size_t)p->ids_row_stride + (size_t)c];
}

static void orc_set_id(const oea_problem *p, void *ids, int i, int c, int v)
{
	if (p->ids_dtype == OEA_DTYPE_I64)
		((int64_t *)ids)[(size_t)i * (size_t)p->ids_row_stride + (size_t)c] = v;
	else
		((int32_t *)ids)[(size_t)i * (size_t)p->ids_row_stride + (size_t)c] = v;
}

/* 0 valid, 1 padding, 2 invalid. */
static int orc_row_kind(const oea_problem *p, const void *ids, int i, int R)
{
	unsigned char seen[OEA_MAX_EXPERTS];
	int c, kind = 0;

	for (c = 0; c < R; c++)
		if (orc_id(p, ids, i, c) < 0)
			return 1;
	memset(seen, 0, sizeof seen);
	for (c = 0; c < R; c++) {
		int64_t id = orc_id(p, ids, i, c);
		if (id >= p->num_experts || seen[id])
			kind = 2;
		else
			seen[id] = 1;
	}
	return kind;
}

/* The 32-lane butterfly, written as 32 lanes exchanging values. */
static float orc_butterfly(float *v, int is_max)
{
	float nv[32];
	int off, j;

	for (off = 16; off >= 1; off >>= 1) {
		for (j = 0; j < 32; j++) {
			float mine = v[j], other = v[j ^ off];
			nv[j] = is_max ? (other > mine ? other : mine) : mine + other;
		}
		memcpy(v, nv, sizeof nv);
	}
	return v[0];
}

static void orc_scores(const oea_problem *p, int i, float *score, float *key)
{
	int E = p->num_experts, e;
	float part[32], m = 0.0f, s = 0.0f;

	if (p->scoring == OEA_SCORING_SOFTMAX) {
		for (e = 0; e < 32; e++)
			part[e] = -INFINITY;
		for (e = 0; e < E; e++) {
			float l = orc_logit(p, i, e);
			if (l > part[e % 32])
				part[e % 32] = l;
		}
		m = orc_butterfly(part, 1);
		memset(part, 0, sizeof part);
		for (e = 0; e < E; e++)
			part[e % 32] += oea_exp(orc_logit(p, i, e) - m);
		s = orc_butterfly(part, 0);
	}
	for (e = 0; e < E; e++) {
		float l = orc_logit(p, i, e);
		score[e] = p->scoring == OEA_SCORING_SOFTMAX ? oea_exp(l - m) / s
							     : 1.0f / (1.0f + oea_exp(-l));
		/* Spec 2: softmax without a bias ranks by the logit. */
		key[e] = p->correction_bias                   ? score[e] + p->correction_bias[e]
			 : p->scoring == OEA_SCORING_SOFTMAX ? l
							     : score[e];
	}
}

/* The row's routed entries sorted in rank order. */
static void orc_routed(const oea_problem *p, const void *ids, int i, int R, const float *score,
		       const float *key, orc_ent *ent)
{
	int c;

	for (c = 0; c < R; c++) {
		int id = (int)orc_id(p, ids, i, c);
		ent[c].id = id;
		ent[c].col = c;
		ent[c].score = score[id];
		ent[c].key = key[id];
	}
	qsort(ent, (size_t)R, sizeof *ent, orc_cmp);
}

/* The kept-weight buckets' lower edges (rule 10), written as a table. */
static const float orc_edges[14] = {0.25f, 0.5f, 0.6f,  0.7f,  0.75f, 0.8f,  0.85f,
				    0.9f,  0.93f, 0.95f, 0.97f, 0.98f, 0.99f, 1.0f};

/* Adds one re-routed row's kept figures (rules 9-10) to t: orig are its R
 * original ids in column order, sel its ns selected entries in output order. */
static void orc_kept(oea_totals *t, const int *orig, int R, const orc_ent *sel, int ns,
		     const float *score)
{
	int changed = R, c, k, b = 0;
	float num = 0.0f, den = 0.0f, kept = 1.0f;

	for (c = 0; c < R; c++)
		for (k = 0; k < ns; k++)
			changed -= sel[k].id == orig[c];
	t->rerouted_rows++;
	t->changed_slots += (uint64_t)changed;
	if (changed) {
		for (k = 0; k < ns; k++)
			num += sel[k].score;
		for (c = 0; c < R; c++)
			den += score[orig[c]];
		kept = num / den;
		if (!(den > 0.0f) || !isfinite(num) || !isfinite(den) || !isfinite(kept)) {
			t->kept_undefined++;
			return;
		}
	}
	t->kept_fx += (uint64_t)ldexp((double)fminf(kept, 65536.0f), 24);
	while (b < 14 && kept >= orc_edges[b])
		b++;
	t->kept_hist[b + (kept > 1.0f)]++;
}

/* Brute force: the whole call on p's buffers (ids and weights rewritten). */
static int orc_route(const oea_problem *p)
{
	int n = p->n, E = p->num_experts, R = p->top_k - p->num_shared;
	int nvr = n, i, c, e, k;
	int *kind = calloc((size_t)(n + 1), sizeof(int));
	unsigned char *inu = calloc((size_t)E, 1), *inb = calloc((size_t)E, 1);
	float *score = malloc(sizeof(float) * (size_t)E), *key = malloc(sizeof(float) * (size_t)E);
	orc_ent *cand = malloc(sizeof(orc_ent) * (size_t)E);
	oea_stats st;
	oea_totals tot; /* this call's re-routed rows */
	int error = 0;

	memset(&st, 0, sizeof st);
	memset(&tot, 0, sizeof tot);
	if (p->num_valid_rows)
		nvr = *p->num_valid_rows < 0 ? 0 : *p->num_valid_rows > n ? n : *p->num_valid_rows;
	for (i = 0; i < n; i++) {
		int bad = 0;
		kind[i] = i < nvr ? orc_row_kind(p, p->ids, i, R) : 1;
		st.invalid_rows += i < nvr && kind[i] == 2;
		if (kind[i])
			continue;
		st.valid_rows++;
		for (e = 0; e < E; e++)
			bad |= !isfinite(orc_logit(p, i, e)) ||
			       (p->correction_bias && !isfinite(p->correction_bias[e]));
		if (bad && (p->flags & OEA_FLAG_REJECT_NONFINITE)) {
			error = OEA_ERR_NONFINITE;
			goto done;
		}
		st.nonfinite_rows += bad;
		for (c = 0; c < R; c++)
			inb[orc_id(p, p->ids, i, c)] = 1;
	}
	for (e = 0; e < E; e++)
		st.t_before += inb[e];
	st.t_after = st.t_before;
	/* The gate of ABI 2, read only when the caller's struct has the field. */
	if (p->struct_size >= OEA_PROBLEM_SIZE_V2 && p->min_valid_rows > 0 &&
	    st.valid_rows < (uint32_t)p->min_valid_rows)
		st.gated = 1;
	if (p->k0 < R && !st.gated) {
		orc_ent ent[OEA_MAX_TOPK];
		/* U from the originals; phase 2 must not see partial outputs. */
		for (i = 0; i < n; i++) {
			if (kind[i])
				continue;
			orc_scores(p, i, score, key);
			orc_routed(p, p->ids, i, R, score, key, ent);
			for (k = 0; k < p->k0; k++)
				inu[ent[k].id] = 1;
		}
		for (i = 0; i < n; i++) {
			orc_ent sel[OEA_MAX_TOPK];
			unsigned char ing[OEA_MAX_EXPERTS];
			int fill[OEA_MAX_TOPK], nfill = 0, orig[OEA_MAX_TOPK];
			int nc = 0, ns, gs = p->num_expert_group ? E / p->num_expert_group : 0;
			float num = 0.0f, den = 0.0f, f;
			float *w = (float *)p->weights + (size_t)i * (size_t)p->weights_row_stride;

			if (kind[i])
				continue;
			orc_scores(p, i, score, key);
			orc_routed(p, p->ids, i, R, score, key, ent);
			memset(ing, 0, sizeof ing);
			if (gs)
				for (c = 0; c < R; c++)
					ing[ent[c].id / gs] = 1;
			for (e = 0; e < E; e++) {
				int inp = 0;
				for (k = 0; k < p->k0; k++)
					inp |= ent[k].id == e;
				if (!inu[e] || inp || (gs && !ing[e / gs]))
					continue;
				cand[nc].id = e;
				cand[nc].col = -1;
				cand[nc].score = score[e];
				cand[nc].key = key[e];
				nc++;
			}
			qsort(cand, (size_t)nc, sizeof *cand, orc_cmp);
			memcpy(sel, ent, sizeof(orc_ent) * (size_t)p->k0);
			ns = p->k0;
			for (k = 0; k < nc && ns < R; k++)
				sel[ns++] = cand[k];
			qsort(sel, (size_t)ns, sizeof *sel, orc_cmp);
			if (p->renormalize) {
				for (c = 0; c < R; c++)
					num += w[c];
				for (k = 0; k < ns; k++)
					den += sel[k].score;
			} else {
				num = w[ent[0].col];
				den = ent[0].score;
			}
			f = (den == 0.0f || !isfinite(den)) ? 1.0f : num / den;
			/* Fillers (spec 3): experts not in the row, those of U
			 * by index, then those outside U by index. */
			for (k = 0; k < 2 * E && ns + nfill < R; k++) {
				int inrow = 0;
				e = k < E ? k : k - E;
				for (c = 0; c < ns; c++)
					inrow |= sel[c].id == e;
				if (!inrow && (k < E ? inu[e] : !inu[e]))
					fill[nfill++] = e;
			}
			for (c = 0; c < R; c++)
				orig[c] = (int)orc_id(p, p->ids, i, c);
			orc_kept(&tot, orig, R, sel, ns, score);
			for (c = 0; c < R; c++) {
				orc_set_id(p, p->ids, i, c, c < ns ? sel[c].id : fill[c - ns]);
				w[c] = c < ns ? sel[c].score * f : 0.0f;
				if (isnan(w[c])) {
					uint32_t qnan = 0x7fc00000u;
					memcpy(&w[c], &qnan, 4);
				}
			}
		}
		/* T after, by its definition: the distinct ids of the rewritten
		 * rows (none processed: 0, which is T before). */
		memset(inb, 0, (size_t)E);
		for (i = 0; i < n; i++)
			for (c = 0; !kind[i] && c < R; c++)
				inb[orc_id(p, p->ids, i, c)] = 1;
		st.t_after = 0;
		for (e = 0; e < E; e++)
			st.t_after += inb[e];
	}
	if (p->stats)
		*p->stats = st;
	/* Totals (ABI 3): added, the stats' sums only for a call not gated. */
	if (p->struct_size >= sizeof(oea_problem) && p->totals) {
		oea_totals *t = p->totals;
		t->calls += 1;
		t->gated += st.gated;
		if (!st.gated) {
			t->t_before += st.t_before;
			t->t_after += st.t_after;
			t->valid_rows += st.valid_rows;
			t->invalid_rows += st.invalid_rows;
			t->nonfinite_rows += st.nonfinite_rows;
		}
		t->rerouted_rows += tot.rerouted_rows;
		t->changed_slots += tot.changed_slots;
		t->kept_fx += tot.kept_fx;
		t->kept_undefined += tot.kept_undefined;
		for (k = 0; k < OEA_KEPT_BUCKETS; k++)
			t->kept_hist[k] += tot.kept_hist[k];
	}
done:
	free(kind);
	free(inu);
	free(inb);
	free(score);
	free(key);
	free(cand);
	return error;
}

/* ---- running a case on both ------------------------------------------- */

typedef struct run_out {
	unsigned char *ids, *w;
	oea_stats st;
	oea_totals tot;
	int rc;
} run_out;

/* Totals as a caller may hand them: earlier sums, which a call adds to. */
static void totals_seed(oea_totals *t)
{
	uint64_t *f = (uint64_t *)t;
	size_t k;

	for (k = 0; k < sizeof *t / sizeof *f; k++)
		f[k] = 1000u * k + 7u;
}

static void run_free(run_out *o)
{
	free(o->ids);
	free(o->w);
	o->ids = o->w = NULL;
}

/* Runs `fn` on fresh copies of the case's ids and weights. */
static void run_case(const tcase *tc, int (*fn)(const oea_problem *), int with_stats, run_out *o)
{
	oea_problem p;

	o->ids = malloc(tc->ids_bytes);
	o->w = malloc(tc->w_bytes);
	assert_non_null(o->ids);
	assert_non_null(o->w);
	memcpy(o->ids, tc->ids0, tc->ids_bytes);
	memcpy(o->w, tc->w0, tc->w_bytes);
	memset(&o->st, 0xab, sizeof o->st);
	totals_seed(&o->tot);
	p = tcase_problem(tc, o->ids, o->w, with_stats ? &o->st : NULL);
	if (with_stats && p.struct_size >= sizeof p)
		p.totals = &o->tot;
	o->rc = fn(&p);
}

static void describe(const tcase *tc, unsigned long seed)
{
	const oea_problem *p = &tc->p;
	print_error("case seed=%lu n=%d E=%d K=%d S=%d k0=%d scoring=%d renorm=%d groups=%d/%d "
		    "ldtype=%d idtype=%d bias=%d nvr=%d flags=%u\n",
		    seed, p->n, p->num_experts, p->top_k, p->num_shared, p->k0, p->scoring,
		    p->renormalize, p->num_expert_group, p->topk_group, p->logits_dtype,
		    p->ids_dtype, p->correction_bias != NULL,
		    p->num_valid_rows ? *p->num_valid_rows : -99, p->flags);
}

/* 1 when library and oracle agree bit for bit on the case. */
static int compare_case(const tcase *tc, unsigned long seed)
{
	run_out a, b;
	int ok;

	run_case(tc, oea_route_host, 1, &a);
	run_case(tc, orc_route, 1, &b);
	/* Totals: the same sums, and untouched (the seed) after an error. */
	ok = a.rc == b.rc && memcmp(a.ids, b.ids, tc->ids_bytes) == 0 &&
	     memcmp(a.w, b.w, tc->w_bytes) == 0 &&
	     (a.rc != OEA_OK || memcmp(&a.st, &b.st, sizeof(uint32_t) * 5) == 0) &&
	     memcmp(&a.tot, &b.tot, sizeof a.tot) == 0;
	if (!ok) {
		describe(tc, seed);
		print_error("rc %d vs oracle %d; ids %s, weights %s; stats lib T %u->%u v%u i%u nf%u "
			    "oracle T %u->%u v%u i%u nf%u\n",
			    a.rc, b.rc, memcmp(a.ids, b.ids, tc->ids_bytes) ? "differ" : "same",
			    memcmp(a.w, b.w, tc->w_bytes) ? "differ" : "same", a.st.t_before,
			    a.st.t_after, a.st.valid_rows, a.st.invalid_rows, a.st.nonfinite_rows,
			    b.st.t_before, b.st.t_after, b.st.valid_rows, b.st.invalid_rows,
			    b.st.nonfinite_rows);
		print_error("totals lib rows %llu changed %llu fx %llu undef %llu, oracle rows %llu "
			    "changed %llu fx %llu undef %llu\n",
			    (unsigned long long)a.tot.rerouted_rows,
			    (unsigned long long)a.tot.changed_slots, (unsigned long long)a.tot.kept_fx,
			    (unsigned long long)a.tot.kept_undefined,
			    (unsigned long long)b.tot.rerouted_rows,
			    (unsigned long long)b.tot.changed_slots, (unsigned long long)b.tot.kept_fx,
			    (unsigned long long)b.tot.kept_undefined);
	}
	run_free(&a);
	run_free(&b);
	return ok;
}

static void test_oracle_random(void **state)
{
	int ncases = test_cases(3000), k, bad = 0;

	(void)state;
	for (k = 0; k < ncases && bad < 5; k++) {
		tc_rng r = {0x5eed0000u + (uint64_t)k};
		tcase tc;
		assert_int_equal(tcase_random(&tc, &r, 60000), 0);
		if (k % 10 == 0)
			tc.p.flags |= OEA_FLAG_REJECT_NONFINITE;
		bad += !compare_case(&tc, 0x5eed0000u + (unsigned long)k);
		tcase_free(&tc);
	}
	assert_int_equal(bad, 0);
}

/* OEA_FLAG_COUNT_ONLY (liboea 3.1.0): the same status, stats and totals as
 * the call that writes, bit for bit, and ids and weights left byte for byte
 * as they were (the row's output is computed on a copy). */
static void test_count_only_random(void **state)
{
	int ncases = test_cases(1500), k, bad = 0;

	(void)state;
	for (k = 0; k < ncases && bad < 5; k++) {
		tc_rng r = {0xc0cc0000u + (uint64_t)k};
		tcase tc;
		run_out a, b;
		uint32_t flags;

		assert_int_equal(tcase_random(&tc, &r, 60000), 0);
		if (k % 10 == 0)
			tc.p.flags |= OEA_FLAG_REJECT_NONFINITE;
		flags = tc.p.flags;
		run_case(&tc, oea_route_host, 1, &a);
		tc.p.flags = flags | OEA_FLAG_COUNT_ONLY;
		run_case(&tc, oea_route_host, 1, &b);
		tc.p.flags = flags;
		if (a.rc != b.rc || memcmp(b.ids, tc.ids0, tc.ids_bytes) != 0 ||
		    memcmp(b.w, tc.w0, tc.w_bytes) != 0 ||
		    (a.rc == OEA_OK && memcmp(&a.st, &b.st, sizeof a.st) != 0) ||
		    memcmp(&a.tot, &b.tot, sizeof a.tot) != 0) {
			describe(&tc, 0xc0cc0000u + (unsigned long)k);
			print_error("count-only: rc %d vs %d, ids %s, weights %s, stats %s, totals %s\n",
				    b.rc, a.rc, memcmp(b.ids, tc.ids0, tc.ids_bytes) ? "written" : "kept",
				    memcmp(b.w, tc.w0, tc.w_bytes) ? "written" : "kept",
				    memcmp(&a.st, &b.st, sizeof a.st) ? "differ" : "same",
				    memcmp(&a.tot, &b.tot, sizeof a.tot) ? "differ" : "same");
			bad++;
		}
		run_free(&a);
		run_free(&b);
		tcase_free(&tc);
	}
	assert_int_equal(bad, 0);
}

/* A random case with E forced to `E` (0: any), checked against the oracle. */
static void corner_case(int E, unsigned long seed)
{
	tc_rng r = {seed};
	tcase tc;

	for (;;) {
		assert_int_equal(tcase_random(&tc, &r, 1 << 20), 0);
		if (tc.p.num_experts == E || E == 0)
			break;
		tcase_free(&tc);
	}
	assert_true(compare_case(&tc, seed));
	tcase_free(&tc);
}

/* 1 when x is +0 exactly (a filler's weight): not -0, not a tiny number. */
static int pos_zero(float x)
{
	uint32_t b;
	memcpy(&b, &x, 4);
	return b == 0;
}

/* A fixed, readable problem: checks the oracle itself against hand results. */
static void test_oracle_by_hand(void **state)
{
	/* Two rows, E = 6, K = 3 (no shared), k0 = 1, softmax, renormalize.
	 * Row 0 prefers 0 > 1 > 2, row 1 prefers 5 > 4 > 0. U = {0, 5}.
	 * Row 0: P = {0}; candidates in U \ P = {5}; output 0, 5, then a
	 * filler: U is all in the row, so the lowest expert outside U, 1.
	 * Row 1: P = {5}; candidates {0}; output 5, 0 (logit 0.5 > 0), filler 1.
	 * T after = 3: |U| = 2 < R = 3 adds one expert for every row. */
	float logits[2][6] = {{3, 2, 1, 0, 0, 0.5f}, {0.5f, 0, 0, 0, 2, 3}};
	int32_t ids[2][3] = {{0, 1, 2}, {5, 4, 0}};
	float w[2][3] = {{0.5f, 0.3f, 0.2f}, {0.6f, 0.3f, 0.1f}};
	oea_stats st;
	oea_problem p;
	float sum;

	(void)state;
	memset(&p, 0, sizeof p);
	p.struct_size = sizeof p;
	p.n = 2;
	p.num_experts = 6;
	p.top_k = 3;
	p.k0 = 1;
	p.renormalize = 1;
	p.logits_dtype = OEA_DTYPE_F32;
	p.logits_row_stride = 6;
	p.logits = logits;
	p.ids_dtype = OEA_DTYPE_I32;
	p.weights_dtype = OEA_DTYPE_F32;
	p.ids_row_stride = 3;
	p.weights_row_stride = 3;
	p.ids = ids;
	p.weights = w;
	p.stats = &st;
	assert_int_equal(oea_route_host(&p), OEA_OK);
	assert_int_equal(ids[0][0], 0);
	assert_int_equal(ids[0][1], 5);
	assert_int_equal(ids[0][2], 1);
	assert_int_equal(ids[1][0], 5);
	assert_int_equal(ids[1][1], 0);
	assert_int_equal(ids[1][2], 1);
	assert_true(pos_zero(w[0][2]) && pos_zero(w[1][2]));
	sum = w[0][0] + w[0][1];
	assert_true(fabsf(sum - 1.0f) < 1e-6f);
	assert_true(w[0][0] > w[0][1]);
	assert_int_equal(st.t_before, 5);
	assert_int_equal(st.t_after, 3);
	assert_int_equal(st.valid_rows, 2);
}

/* A hand problem: n rows of E experts, K = R routed columns, int32 ids,
 * softmax, renormalize, groups of E / groups experts (0: none). */
static void hand_problem(oea_problem *p, oea_stats *st, int n, int E, int K, int k0, int groups,
			 float *logits, int32_t *ids, float *w)
{
	memset(p, 0, sizeof *p);
	p->struct_size = sizeof *p;
	p->n = n;
	p->num_experts = E;
	p->top_k = K;
	p->k0 = k0;
	p->renormalize = 1;
	p->num_expert_group = groups;
	p->topk_group = groups ? 1 : 0;
	p->logits_dtype = OEA_DTYPE_F32;
	p->logits_row_stride = E;
	p->logits = logits;
	p->ids_dtype = OEA_DTYPE_I32;
	p->weights_dtype = OEA_DTYPE_F32;
	p->ids_row_stride = K;
	p->weights_row_stride = K;
	p->ids = ids;
	p->weights = w;
	p->stats = st;
}

/*
 * The fillers of spec version 3 (docs/oea-semantics.md, rule 5) by hand:
 * distinct experts not in the row, those of U first, then those outside U,
 * each by index, weight +0.
 */
static void test_fillers_by_hand(void **state)
{
	oea_problem p;
	oea_stats st;

	(void)state;
	{
		/* One row, E = 8, K = 4, k0 = 2: P = U = {3, 6} (logits 4 > 3),
		 * no candidate; U is all in the row, so the fillers are the
		 * lowest experts outside U, 0 and 1 (not the row's own 1, 4). */
		float logits[8] = {0, 2, 0, 4, 1, 0, 3, 0};
		int32_t ids[4] = {3, 6, 1, 4};
		float w[4] = {0.4f, 0.3f, 0.2f, 0.1f};
		const int32_t want[4] = {3, 6, 0, 1};
		int c;

		hand_problem(&p, &st, 1, 8, 4, 2, 0, logits, ids, w);
		assert_int_equal(oea_route_host(&p), OEA_OK);
		for (c = 0; c < 4; c++)
			assert_int_equal(ids[c], want[c]);
		assert_true(w[0] > w[1] && w[1] > 0.0f);
		assert_true(fabsf(w[0] + w[1] - 1.0f) < 1e-6f); /* the routed mass */
		assert_true(pos_zero(w[2]) && pos_zero(w[3]));
		assert_int_equal(st.t_before, 4);
		assert_int_equal(st.t_after, 4); /* max(|U| = 2, R = 4) */
	}
	{
		/* Two rows, E = 8 in 2 groups of 4, K = 3, k0 = 2. Row 0 routes
		 * to group 0 (P = {0, 1}), row 1 to group 1 (P = {4, 5});
		 * U = {0, 1, 4, 5}. No row has a candidate in its own group, and
		 * |U| = 4 >= R: U's members outside the row's groups fill,
		 * lowest first (4 for row 0, 0 for row 1); nothing new loads. */
		float logits[2][8] = {{3, 2, 1, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 3, 2, 1, 0}};
		int32_t ids[2][3] = {{2, 0, 1}, {6, 5, 4}};
		float w[2][3] = {{0.2f, 0.5f, 0.3f}, {0.2f, 0.3f, 0.5f}};
		const int32_t want[2][3] = {{0, 1, 4}, {4, 5, 0}};
		int i, c;

		hand_problem(&p, &st, 2, 8, 3, 2, 2, &logits[0][0], &ids[0][0], &w[0][0]);
		assert_int_equal(oea_route_host(&p), OEA_OK);
		for (i = 0; i < 2; i++) {
			for (c = 0; c < 3; c++)
				assert_int_equal(ids[i][c], want[i][c]);
			assert_true(w[i][0] > w[i][1] && w[i][1] > 0.0f);
			assert_true(pos_zero(w[i][2]));
		}
		assert_int_equal(st.t_before, 6);
		assert_int_equal(st.t_after, 4); /* |U| */
	}
	{
		/* Two rows, E = 8 in 2 groups of 4, K = 4, k0 = 1: U = {2, 6},
		 * one per group. Row 0 (group 0) takes 2, then U's 6 from the
		 * other group, then 0 and 1 from outside U; row 1 likewise
		 * 6, 2, 0, 1. Both tiers, in order. */
		float logits[2][8] = {{1, 1, 3, 1, 0, 0, 0, 0}, {0, 0, 0, 0, 1, 1, 3, 1}};
		int32_t ids[2][4] = {{3, 2, 1, 0}, {4, 5, 6, 7}};
		float w[2][4] = {{0.1f, 0.4f, 0.2f, 0.3f}, {0.1f, 0.2f, 0.4f, 0.3f}};
		const int32_t want[2][4] = {{2, 6, 0, 1}, {6, 2, 0, 1}};
		int i, c;

		hand_problem(&p, &st, 2, 8, 4, 1, 2, &logits[0][0], &ids[0][0], &w[0][0]);
		assert_int_equal(oea_route_host(&p), OEA_OK);
		for (i = 0; i < 2; i++) {
			for (c = 0; c < 4; c++)
				assert_int_equal(ids[i][c], want[i][c]);
			assert_true(w[i][0] > 0.0f);
			assert_true(pos_zero(w[i][1]) && pos_zero(w[i][2]) && pos_zero(w[i][3]));
		}
		assert_int_equal(st.t_before, 8);
		assert_int_equal(st.t_after, 4); /* max(|U| = 2, R = 4) */
	}
}

static void test_oracle_corners(void **state)
{
	unsigned long s;

	(void)state;
	/* Every E = 1 and E = 512 case, and many n = 1 cases, come from the
	 * generator with these seeds; corner_case insists on the E wanted. */
	for (s = 1; s <= 40; s++) {
		corner_case(1, 1000 + s);
		corner_case(512, 2000 + s);
		corner_case(0, 3000 + s);
	}
}

/* The all-padding batch, n = 1, k0 = R and k0 = 1 on one generated base. */
static void test_oracle_shapes(void **state)
{
	int k, bad = 0;

	(void)state;
	for (k = 0; k < 400; k++) {
		tc_rng r = {0xc0ffee00u + (uint64_t)k};
		tcase tc;
		int R, i;

		assert_int_equal(tcase_random(&tc, &r, 60000), 0);
		R = tc.p.top_k - tc.p.num_shared;
		switch (k % 4) {
		case 0: /* all padding */
			for (i = 0; i < tc.p.n; i++) {
				unsigned char *row = tc.ids0 + (size_t)i * (size_t)tc.p.ids_row_stride *
								 (tc.p.ids_dtype == OEA_DTYPE_I64 ? 8 : 4);
				memset(row, 0xff, tc.p.ids_dtype == OEA_DTYPE_I64 ? 8 : 4); /* -1 */
			}
			break;
		case 1:
			tc.p.n = tc.p.n > 0 ? 1 : 0;
			break;
		case 2:
			tc.p.k0 = R;
			break;
		default:
			tc.p.k0 = 1;
			break;
		}
		bad += !compare_case(&tc, 0xc0ffee00u + (unsigned long)k);
		if (k % 4 == 0 && tc.p.n > 0) {
			run_out a;
			run_case(&tc, oea_route_host, 1, &a);
			assert_int_equal(a.st.valid_rows, 0);
			assert_int_equal(a.st.t_before, 0);
			assert_int_equal(a.st.t_after, 0);
			assert_memory_equal(a.ids, tc.ids0, tc.ids_bytes);
			assert_memory_equal(a.w, tc.w0, tc.w_bytes);
			run_free(&a);
		}
		tcase_free(&tc);
	}
	assert_int_equal(bad, 0);
}

/*
 * The CPU reference's fast paths (oea_cpu.c: 4-wide sums and keys, phase 2
 * seeded with the row's routed experts and narrowed by threshold masks,
 * fillers by words) against the brute-force oracle over a grid of shapes:
 * every batch size around the powers of two up to 1024 rows, every expert
 * count around the 4-wide blocks and 32-bit words up to 512. The rest of each
 * case is random (ties, equal rows, NaN/inf, bias, groups, scorings, dtypes,
 * k0, padding), two cases per shape.
 */
static void test_fastpath_grid(void **state)
{
	static const int ns[] = {1, 2, 3, 16, 17, 64, 127, 128, 129, 255, 256, 257, 300, 1024};
	static const int es[] = {1, 2, 5, 8, 31, 32, 33, 100, 127, 128, 129, 255, 256, 257,
				 384, 511, 512};
	int a, b, k, bad = 0;

	(void)state;
	for (a = 0; a < (int)(sizeof ns / sizeof ns[0]); a++)
		for (b = 0; b < (int)(sizeof es / sizeof es[0]); b++)
			for (k = 0; k < 2 && bad < 5; k++) {
				unsigned long seed = 0xfa570000u + (unsigned long)(a * 1000 + b * 10 + k);
				tc_rng r = {seed};
				tc_force f = {ns[a], es[b], -1, -1, -1};
				tcase tc;
				assert_int_equal(tcase_random_forced(&tc, &r, 0, &f), 0);
				bad += !compare_case(&tc, seed);
				tcase_free(&tc);
			}
	assert_int_equal(bad, 0);
}

/*
 * A batch where every row's key ties with many others (all logits equal,
 * or a few levels), at the shapes of the benchmark: the threshold masks must
 * keep an equal key of a lower index, which ranks before.
 */
static void test_fastpath_ties(void **state)
{
	int k, bad = 0;

	(void)state;
	for (k = 0; k < 200 && bad < 5; k++) {
		unsigned long seed = 0x71e50000u + (unsigned long)k;
		tc_rng r = {seed};
		tc_force f = {k % 2 ? 256 : 16, k % 4 < 2 ? 128 : 256, 8, OEA_DTYPE_F32, -1};
		tcase tc;
		int i, e;

		assert_int_equal(tcase_random_forced(&tc, &r, 0, &f), 0);
		for (i = 0; i < tc.p.n; i++)
			for (e = 0; e < tc.p.num_experts; e++) {
				float *l = (float *)tc.logits + (size_t)i * (size_t)tc.p.logits_row_stride;
				l[e] = k % 3 == 0 ? 0.5f : (float)tc_int(&r, -2, 2);
			}
		bad += !compare_case(&tc, seed);
		tcase_free(&tc);
	}
	assert_int_equal(bad, 0);
}

/* ---- properties ------------------------------------------------------- */

static int64_t case_id(const tcase *tc, const unsigned char *ids, int i, int c)
{
	return orc_id(&tc->p, ids, i, c);
}

/*
 * What one call added to the seeded totals (rules 9-10): the call, the
 * stats' sums unless gated, and kept figures that agree with each other:
 * every re-routed row in one bucket or undefined, at most R - k0 changed
 * slots a row (P_i stays), every unchanged row in bucket 14 (kept exactly
 * 1), and kept_fx within the buckets' edges.
 */
static void check_totals(const run_out *a, int gated, int rerouted, int max_changed)
{
	static const double lo[OEA_KEPT_BUCKETS] = {0,    0.25f, 0.5f,  0.6f,  0.7f,  0.75f,
						    0.8f, 0.85f, 0.9f,  0.93f, 0.95f, 0.97f,
						    0.98f, 0.99f, 1.0f, 1.0f};
	oea_totals seed, d;
	const uint64_t *fs = (const uint64_t *)&seed, *fa = (const uint64_t *)&a->tot;
	uint64_t *fd = (uint64_t *)&d, in_buckets = 0;
	double fx_lo = 0, fx_hi = 0;
	size_t f;
	int b;

	totals_seed(&seed);
	for (f = 0; f < sizeof d / sizeof *fd; f++)
		fd[f] = fa[f] - fs[f];
	assert_int_equal(d.calls, 1);
	assert_int_equal(d.gated, gated);
	assert_int_equal(d.t_before, gated ? 0 : a->st.t_before);
	assert_int_equal(d.t_after, gated ? 0 : a->st.t_after);
	assert_int_equal(d.valid_rows, gated ? 0 : a->st.valid_rows);
	assert_int_equal(d.invalid_rows, gated ? 0 : a->st.invalid_rows);
	assert_int_equal(d.nonfinite_rows, gated ? 0 : a->st.nonfinite_rows);
	assert_int_equal(d.rerouted_rows, rerouted);
	for (b = 0; b < OEA_KEPT_BUCKETS; b++) {
		in_buckets += d.kept_hist[b];
		fx_lo += (double)d.kept_hist[b] * floor(lo[b] * 16777216.0);
		fx_hi += (double)d.kept_hist[b] * (b + 1 < 15 ? lo[b + 1] : b == 14 ? 1.0 : 65536.0) *
			 16777216.0;
	}
	assert_int_equal(in_buckets + d.kept_undefined, d.rerouted_rows);
	assert_true(d.changed_slots <= (uint64_t)rerouted * (uint64_t)max_changed);
	assert_true(d.kept_hist[14] + d.changed_slots >= d.rerouted_rows);
	assert_true((double)d.kept_fx >= fx_lo && (double)d.kept_fx <= fx_hi);
}

static void check_properties(const tcase *tc, unsigned long seed)
{
	const oea_problem *p = &tc->p;
	int n = p->n, E = p->num_experts, K = p->top_k, R = K - p->num_shared;
	size_t isz = p->ids_dtype == OEA_DTYPE_I64 ? 8 : 4;
	run_out a, b;
	unsigned char inu[OEA_MAX_EXPERTS] = {0}, inb[OEA_MAX_EXPERTS] = {0};
	float *score = malloc(sizeof(float) * (size_t)E), *key = malloc(sizeof(float) * (size_t)E);
	int nvr = n, i, c, k, tb = 0, tu = 0, nproc = 0, gated;

	assert_non_null(score);
	assert_non_null(key);
	if (p->num_valid_rows)
		nvr = *p->num_valid_rows < 0 ? 0 : *p->num_valid_rows > n ? n : *p->num_valid_rows;
	run_case(tc, oea_route_host, 1, &a);
	run_case(tc, oea_route_host, 1, &b);
	if (a.rc != OEA_OK)
		describe(tc, seed);
	assert_int_equal(a.rc, OEA_OK);
	/* Run to run: identical. */
	assert_memory_equal(a.ids, b.ids, tc->ids_bytes);
	assert_memory_equal(a.w, b.w, tc->w_bytes);
	assert_memory_equal(&a.st, &b.st, sizeof a.st);

	/* U and T before, from the originals. */
	for (i = 0; i < nvr; i++) {
		orc_ent ent[OEA_MAX_TOPK];
		if (orc_row_kind(p, tc->ids0, i, R))
			continue;
		for (c = 0; c < R; c++)
			inb[case_id(tc, tc->ids0, i, c)] = 1;
		orc_scores(p, i, score, key);
		orc_routed(p, tc->ids0, i, R, score, key, ent);
		for (k = 0; k < p->k0 && k < R; k++)
			inu[ent[k].id] = 1;
	}
	for (k = 0; k < E; k++) {
		tb += inb[k];
		tu += inu[k];
	}
	/* The minimum-batch gate: fewer processed rows than min_valid_rows
	 * means nothing is rewritten and T stays. */
	for (i = 0; i < nvr; i++)
		nproc += orc_row_kind(p, tc->ids0, i, R) == 0;
	gated = p->min_valid_rows > 0 && nproc < p->min_valid_rows;
	assert_int_equal(a.st.valid_rows, nproc);
	assert_int_equal(a.st.gated, gated);
	assert_int_equal(a.st.reserved[0], 0);
	assert_int_equal(a.st.reserved[1], 0);
	assert_int_equal(a.st.t_before, tb);
	assert_true(a.st.t_after <= a.st.t_before);
	/* Spec 3: the rewritten rows hold all of U, plus R - |U| fillers from
	 * outside U when |U| < R; no processed row, nothing. */
	if (p->k0 < R && !gated)
		assert_int_equal(a.st.t_after, nproc == 0 ? 0 : tu < R ? R : tu);
	else
		assert_int_equal(a.st.t_after, tb);
	check_totals(&a, gated, p->k0 < R && !gated ? nproc : 0, R - p->k0);

	for (i = 0; i < n + 1; i++) {
		const unsigned char *irow0 = tc->ids0 + (size_t)i * (size_t)p->ids_row_stride * isz;
		const unsigned char *irow = a.ids + (size_t)i * (size_t)p->ids_row_stride * isz;
		const float *w0 = (const float *)(tc->w0 + (size_t)i * (size_t)p->weights_row_stride * 4);
		const float *w = (const float *)(a.w + (size_t)i * (size_t)p->weights_row_stride * 4);
		size_t itail = (size_t)p->ids_row_stride * isz - (size_t)R * isz;
		size_t wtail = (size_t)p->weights_row_stride * 4 - (size_t)R * 4;
		int processed = i < nvr && orc_row_kind(p, tc->ids0, i, R) == 0 && p->k0 < R && !gated;
		orc_ent ent[OEA_MAX_TOPK];
		float sum0 = 0.0f, sum1 = 0.0f;
		int ncand = 0, nsel, gs = p->num_expert_group ? E / p->num_expert_group : 0;
		int tier, e, next;

		/* Shared columns and stride gaps: untouched, always (the extra
		 * row n is the guard row of the buffers). */
		assert_memory_equal(irow + (size_t)R * isz, irow0 + (size_t)R * isz, itail);
		assert_memory_equal((const unsigned char *)w + (size_t)R * 4,
				    (const unsigned char *)w0 + (size_t)R * 4, wtail);
		if (!processed) {
			/* Padding, invalid, beyond num_valid_rows, k0 >= R, gated. */
			assert_memory_equal(irow, irow0, (size_t)R * isz);
			assert_memory_equal(w, w0, (size_t)R * 4);
			continue;
		}
		orc_scores(p, i, score, key);
		orc_routed(p, tc->ids0, i, R, score, key, ent);
		/* Phase 1 is a subset of the original choice and all of it is kept. */
		for (k = 0; k < p->k0; k++) {
			int found = 0;
			for (c = 0; c < R; c++)
				found |= case_id(tc, a.ids, i, c) == ent[k].id;
			assert_true(found);
		}
		/* The selection: P_i and the best candidates of U \ P_i in the
		 * row's groups, as many as there are, up to R in all. */
		for (e = 0; e < E; e++) {
			int inp = 0, ing = !gs;
			for (k = 0; k < p->k0; k++)
				inp |= ent[k].id == e;
			for (k = 0; gs && k < R; k++)
				ing |= ent[k].id / gs == e / gs;
			ncand += inu[e] && !inp && ing;
		}
		nsel = p->k0 + ncand < R ? p->k0 + ncand : R;
		for (c = 0; c < R; c++) {
			int64_t id = case_id(tc, a.ids, i, c);
			assert_true(id >= 0 && id < E);
			/* Distinct in every row (spec 3: fillers never repeat). */
			for (k = 0; k < c; k++)
				assert_true(case_id(tc, a.ids, i, k) != id);
			if (c < nsel)
				assert_true(inu[id]); /* the selection is in U */
			sum0 += w0[c];
			sum1 += w[c];
		}
		/* Fillers: weight +0, the experts not in the row, those of U by
		 * index, then those outside U by index, in this order. */
		next = nsel;
		for (tier = 0; tier < 2 && next < R; tier++)
			for (e = 0; e < E && next < R; e++) {
				int in_sel = 0;
				uint32_t wb;
				for (c = 0; c < nsel; c++)
					in_sel |= case_id(tc, a.ids, i, c) == e;
				if (in_sel || (tier == 0 ? !inu[e] : inu[e]))
					continue;
				memcpy(&wb, &w[next], 4);
				assert_int_equal(case_id(tc, a.ids, i, next), e);
				assert_int_equal(wb, 0);
				next++;
			}
		assert_int_equal(next, R);
		/* Renormalisation: the routed mass is kept. */
		if (p->renormalize && isfinite(sum0) && isfinite(sum1)) {
			float den = 0.0f;
			for (c = 0; c < R; c++)
				den += w[c] == 0.0f ? 0.0f : score[case_id(tc, a.ids, i, c)];
			if (den > 1e-20f && isfinite(den))
				assert_true(fabsf(sum1 - sum0) <= 1e-5f * (1.0f + fabsf(sum0)));
		}
		/* Without: w = score * w_orig(best) / score(best). */
		if (!p->renormalize && ent[0].score > 0.0f && isfinite(ent[0].score) &&
		    isfinite(w0[ent[0].col])) {
			float f = w0[ent[0].col] / ent[0].score;
			for (c = 0; c < R; c++) {
				int64_t id = case_id(tc, a.ids, i, c);
				float want = score[id] * f;
				if (w[c] != 0.0f && isfinite(want))
					assert_true(fabsf(w[c] - want) <= 1e-6f * (fabsf(want) + 1e-30f));
			}
		}
	}
	run_free(&a);
	run_free(&b);
	free(score);
	free(key);
}

/*
 * Rule 9 by hand: sigmoid with a correction bias, E = 4, R = 2, k0 = 1.
 * Row 0 routes {0, 1}, its top 2 by key (bias 0 0 -1 -1); row 1 routes
 * {2, 3}. U = {0, 2}: row 0 takes 2, whose score is higher than that of the
 * expert 1 it drops but whose key is lower, so it keeps more than all of its
 * weight (kept > 1, bucket 15); row 1 takes 0 for 3 (kept ~0.97, bucket 11).
 */
static void test_kept_by_hand(void **state)
{
	float logits[2][4] = {{2.0f, 0.0f, 3.0f, -3.0f}, {-4.0f, -8.0f, 3.0f, -3.0f}};
	float bias[4] = {0.0f, 0.0f, -1.0f, -1.0f}, w[2][2] = {{0.6f, 0.4f}, {0.7f, 0.3f}};
	int32_t ids[2][2] = {{0, 1}, {2, 3}};
	oea_problem p;
	oea_stats st;
	oea_totals t;
	float sg[2][4], k0v, k1v;
	int i, e;

	(void)state;
	for (i = 0; i < 2; i++)
		for (e = 0; e < 4; e++)
			sg[i][e] = 1.0f / (1.0f + oea_exp(-logits[i][e]));
	/* Output order is key order: row 0 {0, 2}, row 1 {0, 2} (key 0.018 > -0.047). */
	k0v = (sg[0][0] + sg[0][2]) / (sg[0][0] + sg[0][1]);
	k1v = (sg[1][0] + sg[1][2]) / (sg[1][2] + sg[1][3]);
	assert_true(k0v > 1.3f && k0v < 1.35f);
	assert_true(k1v >= 0.97f && k1v < 0.98f);
	memset(&p, 0, sizeof p);
	memset(&t, 0, sizeof t);
	p.struct_size = sizeof p;
	p.n = 2, p.num_experts = 4, p.top_k = 2, p.k0 = 1, p.renormalize = 1;
	p.scoring = OEA_SCORING_SIGMOID;
	p.logits_dtype = OEA_DTYPE_F32, p.logits_row_stride = 4, p.logits = logits;
	p.correction_bias = bias;
	p.ids_dtype = OEA_DTYPE_I32, p.ids_row_stride = 2, p.ids = ids;
	p.weights_dtype = OEA_DTYPE_F32, p.weights_row_stride = 2, p.weights = w;
	p.stats = &st, p.totals = &t;
	assert_int_equal(oea_route_host(&p), OEA_OK);
	assert_int_equal(ids[0][0], 0);
	assert_int_equal(ids[0][1], 2);
	assert_int_equal(ids[1][0], 0);
	assert_int_equal(ids[1][1], 2);
	assert_int_equal(t.calls, 1);
	assert_int_equal(t.t_before, 4);
	assert_int_equal(t.t_after, 2);
	assert_int_equal(t.rerouted_rows, 2);
	assert_int_equal(t.changed_slots, 2);
	assert_int_equal(t.kept_undefined, 0);
	assert_int_equal(t.kept_hist[15], 1);
	assert_int_equal(t.kept_hist[11], 1);
	assert_int_equal(t.kept_fx, (uint64_t)ldexp(k0v, 24) + (uint64_t)ldexp(k1v, 24));

	/* Again into the same totals: everything doubles (added, not written). */
	ids[0][0] = 0, ids[0][1] = 1, ids[1][0] = 2, ids[1][1] = 3;
	assert_int_equal(oea_route_host(&p), OEA_OK);
	assert_int_equal(t.calls, 2);
	assert_int_equal(t.rerouted_rows, 4);
	assert_int_equal(t.kept_hist[15], 2);
	/* k0 >= R: counted as a call with its T, no row re-routed. */
	p.k0 = 2;
	assert_int_equal(oea_route_host(&p), OEA_OK);
	assert_int_equal(t.calls, 3);
	assert_int_equal(t.rerouted_rows, 4);
	assert_int_equal(t.t_before, 4 + 4 + 2);
	/* The gate: counted as gated, nothing else. */
	p.k0 = 1, p.min_valid_rows = 3;
	assert_int_equal(oea_route_host(&p), OEA_OK);
	assert_int_equal(t.calls, 4);
	assert_int_equal(t.gated, 1);
	assert_int_equal(t.t_before, 10);
	assert_int_equal(t.rerouted_rows, 4);
}

/*
 * When the framework routed each row to its top R by key and there is no
 * correction bias, every new expert ranks at or below the one it replaces
 * and the score is non-decreasing in the key, so kept <= 1 (never bucket
 * 15). Random cases with the bias removed and the ids made the top R.
 */
static void test_kept_bounds(void **state)
{
	int ncases = test_cases(400), k, n_changed = 0;

	(void)state;
	for (k = 0; k < ncases; k++) {
		unsigned long seed = 0x6e970000u + (unsigned long)k;
		tc_rng r = {seed};
		tcase tc;
		run_out a;
		oea_problem *p = &tc.p;
		int i, c, R;

		assert_int_equal(tcase_random(&tc, &r, 60000), 0);
		R = p->top_k - p->num_shared;
		p->correction_bias = NULL;
		p->flags = 0;
		for (i = 0; i < p->n; i++) {
			float score[OEA_MAX_EXPERTS], key[OEA_MAX_EXPERTS];
			orc_ent all[OEA_MAX_EXPERTS];
			int e;
			if (orc_row_kind(p, tc.ids0, i, R) == 1)
				continue; /* padding stays padding */
			orc_scores(p, i, score, key);
			for (e = 0; e < p->num_experts; e++)
				all[e] = (orc_ent){key[e], score[e], e, 0};
			qsort(all, (size_t)p->num_experts, sizeof *all, orc_cmp);
			for (c = 0; c < R; c++)
				orc_set_id(p, tc.ids0, i, c, all[c].id);
		}
		run_case(&tc, oea_route_host, 1, &a);
		assert_int_equal(a.rc, OEA_OK);
		if (a.tot.kept_hist[15] != 1000u * 26 + 7u)
			describe(&tc, seed);
		assert_int_equal(a.tot.kept_hist[15], 1000u * 26 + 7u); /* the seed: none added */
		n_changed += a.tot.changed_slots != 1000u * 8 + 7u;
		run_free(&a);
		tcase_free(&tc);
	}
	assert_true(n_changed > ncases / 10); /* the cases did re-route */
}

static void test_properties_random(void **state)
{
	int ncases = test_cases(1500), k;

	(void)state;
	for (k = 0; k < ncases; k++) {
		tc_rng r = {0xbeef0000u + (uint64_t)k};
		tcase tc;
		assert_int_equal(tcase_random(&tc, &r, 60000), 0);
		check_properties(&tc, 0xbeef0000u + (unsigned long)k);
		tcase_free(&tc);
	}
}

/* ---- errors ----------------------------------------------------------- */

typedef struct err_env {
	float logits[4 * 8];
	int32_t ids[4 * 4];
	float w[4 * 4];
	float bias[8];
	int32_t nvr;
	oea_stats st;
	oea_totals tot;
	oea_problem p;
} err_env;

static void err_setup(err_env *env)
{
	int i;

	memset(env, 0, sizeof *env);
	for (i = 0; i < 4 * 8; i++)
		env->logits[i] = (float)(i % 7);
	for (i = 0; i < 4 * 4; i++) {
		env->ids[i] = i % 4;
		env->w[i] = 0.25f;
	}
	env->nvr = 4;
	env->p.struct_size = sizeof env->p;
	env->p.n = 4;
	env->p.num_experts = 8;
	env->p.top_k = 4;
	env->p.k0 = 2;
	env->p.logits_dtype = OEA_DTYPE_F32;
	env->p.logits_row_stride = 8;
	env->p.logits = env->logits;
	env->p.correction_bias = env->bias;
	env->p.ids_dtype = OEA_DTYPE_I32;
	env->p.weights_dtype = OEA_DTYPE_F32;
	env->p.ids_row_stride = 4;
	env->p.weights_row_stride = 4;
	env->p.ids = env->ids;
	env->p.weights = env->w;
	env->p.num_valid_rows = &env->nvr;
	env->p.stats = &env->st;
	env->p.totals = &env->tot;
}

/* The call fails with `code`, the message names `word`, nothing is written. */
static void expect_error(err_env *env, int code, const char *word)
{
	int32_t ids0[4 * 4];
	float w0[4 * 4];
	const char *msg;

	oea_totals zero;

	memset(&zero, 0, sizeof zero);
	memcpy(ids0, env->ids, sizeof ids0);
	memcpy(w0, env->w, sizeof w0);
	assert_int_equal(oea_problem_check(&env->p), code == OEA_ERR_NONFINITE ? OEA_OK : code);
	assert_int_equal(oea_route_host(&env->p), code);
	assert_memory_equal(ids0, env->ids, sizeof ids0);
	assert_memory_equal(w0, env->w, sizeof w0);
	assert_memory_equal(&zero, &env->tot, sizeof zero); /* a failed call adds nothing */
	msg = oea_status_message(code);
	assert_non_null(msg);
	if (!strstr(msg, word)) {
		print_error("message of %d is \"%s\", expected it to mention \"%s\"\n", code, msg, word);
		fail();
	}
}

static void test_errors(void **state)
{
	err_env env;
	int code;

	(void)state;
	err_setup(&env);
	assert_int_equal(oea_route_host(&env.p), OEA_OK);

	assert_int_equal(oea_route_host(NULL), OEA_ERR_NULL_ARGUMENT);
	assert_int_equal(oea_problem_check(NULL), OEA_ERR_NULL_ARGUMENT);
	err_setup(&env), env.p.logits = NULL, expect_error(&env, OEA_ERR_NULL_ARGUMENT, "NULL");
	err_setup(&env), env.p.ids = NULL, expect_error(&env, OEA_ERR_NULL_ARGUMENT, "NULL");
	err_setup(&env), env.p.weights = NULL, expect_error(&env, OEA_ERR_NULL_ARGUMENT, "NULL");
	err_setup(&env), env.p.struct_size = 8, expect_error(&env, OEA_ERR_STRUCT_SIZE, "struct_size");
	err_setup(&env), env.p.struct_size = 0, expect_error(&env, OEA_ERR_STRUCT_SIZE, "sizeof");
	err_setup(&env), env.p.n = -1, expect_error(&env, OEA_ERR_SHAPE, "n <= 1024");
	err_setup(&env), env.p.n = OEA_MAX_ROWS + 1, expect_error(&env, OEA_ERR_SHAPE, "1024");
	err_setup(&env), env.p.num_experts = 0, expect_error(&env, OEA_ERR_SHAPE, "num_experts");
	err_setup(&env), env.p.num_experts = OEA_MAX_EXPERTS + 1,
			 expect_error(&env, OEA_ERR_SHAPE, "512");
	err_setup(&env), env.p.top_k = 0, expect_error(&env, OEA_ERR_SHAPE, "top_k");
	err_setup(&env), env.p.top_k = OEA_MAX_TOPK + 1, expect_error(&env, OEA_ERR_SHAPE, "16");
	err_setup(&env), env.p.num_shared = 4, expect_error(&env, OEA_ERR_SHAPE, "num_shared");
	err_setup(&env), env.p.num_shared = -1, expect_error(&env, OEA_ERR_SHAPE, "num_shared");
	err_setup(&env), env.p.k0 = 0, expect_error(&env, OEA_ERR_K0, "k0");
	err_setup(&env), env.p.k0 = -3, expect_error(&env, OEA_ERR_K0, "k0");
	err_setup(&env), env.p.logits_dtype = OEA_DTYPE_I32, expect_error(&env, OEA_ERR_DTYPE, "logits");
	err_setup(&env), env.p.logits_dtype = 99, expect_error(&env, OEA_ERR_DTYPE, "bf16");
	err_setup(&env), env.p.ids_dtype = OEA_DTYPE_F32, expect_error(&env, OEA_ERR_DTYPE, "ids");
	err_setup(&env), env.p.weights_dtype = OEA_DTYPE_BF16, expect_error(&env, OEA_ERR_DTYPE, "weights");
	err_setup(&env), env.p.logits_row_stride = 7, expect_error(&env, OEA_ERR_STRIDE, "stride");
	err_setup(&env), env.p.logits_row_stride = -8, expect_error(&env, OEA_ERR_STRIDE, "stride");
	err_setup(&env), env.p.ids_row_stride = 3, expect_error(&env, OEA_ERR_STRIDE, "top_k");
	err_setup(&env), env.p.weights_row_stride = 3, expect_error(&env, OEA_ERR_STRIDE, "weights");
	err_setup(&env), env.p.weights_row_stride = (int64_t)1 << 50,
			 expect_error(&env, OEA_ERR_STRIDE, "2^40");
	err_setup(&env), env.p.logits = (const char *)env.logits + 1,
			 expect_error(&env, OEA_ERR_ALIGNMENT, "aligned");
	err_setup(&env), env.p.ids = (char *)env.ids + 2, expect_error(&env, OEA_ERR_ALIGNMENT, "aligned");
	err_setup(&env), env.p.ids_dtype = OEA_DTYPE_I64, env.p.ids = (char *)env.ids + 4,
			 expect_error(&env, OEA_ERR_ALIGNMENT, "element size");
	err_setup(&env), env.p.weights = (char *)env.w + 2, expect_error(&env, OEA_ERR_ALIGNMENT, "aligned");
	err_setup(&env), env.p.correction_bias = (const float *)((const char *)env.bias + 1),
			 expect_error(&env, OEA_ERR_ALIGNMENT, "aligned");
	err_setup(&env), env.p.num_valid_rows = (const int32_t *)((const char *)&env.nvr + 2),
			 expect_error(&env, OEA_ERR_ALIGNMENT, "num_valid_rows");
	err_setup(&env), env.p.stats = (oea_stats *)((char *)&env.st + 1),
			 expect_error(&env, OEA_ERR_ALIGNMENT, "stats");
	err_setup(&env), env.p.totals = (oea_totals *)((char *)&env.tot + 4),
			 expect_error(&env, OEA_ERR_ALIGNMENT, "totals");
	err_setup(&env), env.p.scoring = 2, expect_error(&env, OEA_ERR_SCORING, "SIGMOID");
	err_setup(&env), env.p.scoring = -1, expect_error(&env, OEA_ERR_SCORING, "scoring");
	err_setup(&env), env.p.num_expert_group = 3, env.p.topk_group = 1,
			 expect_error(&env, OEA_ERR_GROUPS, "divide");
	err_setup(&env), env.p.num_expert_group = -1, expect_error(&env, OEA_ERR_GROUPS, "num_expert_group");
	err_setup(&env), env.p.num_expert_group = 4, env.p.topk_group = 0,
			 expect_error(&env, OEA_ERR_GROUPS, "topk_group");
	err_setup(&env), env.p.num_expert_group = 4, env.p.topk_group = 5,
			 expect_error(&env, OEA_ERR_GROUPS, "topk_group");
	err_setup(&env), env.p.flags = 0x80, expect_error(&env, OEA_ERR_INVALID_ARGUMENT, "flag");
	err_setup(&env), env.p.renormalize = 2, expect_error(&env, OEA_ERR_INVALID_ARGUMENT, "renormalize");
	err_setup(&env), env.p.reserved_abi2 = 1, expect_error(&env, OEA_ERR_INVALID_ARGUMENT, "reserved_abi2");
	err_setup(&env), env.p.struct_size = (uint32_t)OEA_PROBLEM_SIZE_V1 - 4,
			 expect_error(&env, OEA_ERR_STRUCT_SIZE, "ABI version 1");

	/* Non-finite data, refused only with the flag, before any write. */
	err_setup(&env), env.logits[9] = NAN, env.p.flags = OEA_FLAG_REJECT_NONFINITE,
			 expect_error(&env, OEA_ERR_NONFINITE, "NaN");
	err_setup(&env), env.logits[31] = -INFINITY, env.p.flags = OEA_FLAG_REJECT_NONFINITE,
			 expect_error(&env, OEA_ERR_NONFINITE, "non-finite");
	err_setup(&env), env.bias[3] = INFINITY, env.p.flags = OEA_FLAG_REJECT_NONFINITE,
			 expect_error(&env, OEA_ERR_NONFINITE, "bias");
	/* ... but a NaN in a row beyond num_valid_rows does not count. */
	err_setup(&env), env.nvr = 1, env.logits[9] = NAN, env.p.flags = OEA_FLAG_REJECT_NONFINITE;
	assert_int_equal(oea_route_host(&env.p), OEA_OK);
	/* Without the flag the call succeeds and counts the row. */
	err_setup(&env), env.logits[9] = NAN, env.logits[17] = -INFINITY;
	assert_int_equal(oea_route_host(&env.p), OEA_OK);
	assert_int_equal(env.st.nonfinite_rows, 2);

	/* n == 0 accepts NULL arrays (an empty torch tensor's data_ptr()). */
	err_setup(&env), env.p.n = 0, env.p.logits = NULL, env.p.ids = NULL, env.p.weights = NULL;
	assert_int_equal(oea_route_host(&env.p), OEA_OK);
	assert_int_equal(env.st.valid_rows, 0);

	/* The CUDA entry point: validated like the host path, then either
	 * "not built with CUDA" or a launch (which fails here: no GPU). */
	err_setup(&env), env.p.k0 = 0;
	assert_int_equal(oea_route_cuda(&env.p, NULL),
			 oea_has_cuda() ? OEA_ERR_K0 : OEA_ERR_NO_CUDA);
	err_setup(&env), env.p.flags = OEA_FLAG_REJECT_NONFINITE;
	assert_int_equal(oea_route_cuda(&env.p, NULL),
			 oea_has_cuda() ? OEA_ERR_INVALID_ARGUMENT : OEA_ERR_NO_CUDA);
	assert_non_null(strstr(oea_status_message(OEA_ERR_INVALID_ARGUMENT), "CUDA path"));
	assert_non_null(strstr(oea_status_message(OEA_ERR_NO_CUDA), "not built with CUDA"));
	assert_non_null(strstr(oea_status_message(OEA_ERR_CUDA), "launch failed"));
	err_setup(&env);
	code = oea_route_cuda(&env.p, NULL);
	if (!oea_has_cuda()) {
		assert_int_equal(code, OEA_ERR_NO_CUDA);
	} else if (fopen("/dev/nvidiactl", "r") == NULL) {
		/* A CUDA build on a machine without a GPU: the launch fails. */
		assert_int_equal(code, OEA_ERR_CUDA);
	} else {
		/* With a device the call would launch on host pointers: the GPU
		 * test program covers that path with device memory. */
		print_message("GPU present: OEA_ERR_CUDA is not provoked here\n");
	}

	/* Every code has its own message; unknown codes get one too. */
	for (code = OEA_OK; code <= OEA_ERR_CUDA; code++) {
		int other;
		for (other = code + 1; other <= OEA_ERR_CUDA; other++)
			assert_string_not_equal(oea_status_message(code), oea_status_message(other));
	}
	assert_non_null(strstr(oea_status_message(-1), "unknown"));
	assert_non_null(strstr(oea_status_message(1000), "unknown"));
}

/*
 * The minimum-batch gate of ABI 2 on a hand-made batch: 4 rows, of which
 * num_valid_rows and a padding row decide how many are processed.
 */
static void test_gate(void **state)
{
	err_env env;
	int32_t ids0[4 * 4];
	float w0[4 * 4];
	int min;

	(void)state;
	for (min = -1; min <= 5; min++) {
		err_setup(&env);
		/* Distinct logits so that phase 2 has something to change. */
		for (int i = 0; i < 4 * 8; i++)
			env.logits[i] = (float)((i * 5) % 8);
		env.ids[3 * 4 + 1] = -1; /* row 3 is padding: 3 rows are processed */
		memcpy(ids0, env.ids, sizeof ids0);
		memcpy(w0, env.w, sizeof w0);
		memset(&env.st, 0xab, sizeof env.st);
		env.p.min_valid_rows = min;
		assert_int_equal(oea_route_host(&env.p), OEA_OK);
		assert_int_equal(env.st.valid_rows, 3);
		assert_int_equal(env.st.reserved[0], 0);
		assert_int_equal(env.st.reserved[1], 0);
		if (min > 3) {
			assert_int_equal(env.st.gated, 1);
			assert_int_equal(env.st.t_after, env.st.t_before);
			assert_memory_equal(ids0, env.ids, sizeof ids0);
			assert_memory_equal(w0, env.w, sizeof w0);
		} else {
			assert_int_equal(env.st.gated, 0);
			/* k0 = 2 of 4 over 3 rows sharing {0,1,2,3}: U is smaller
			 * than R = 4, so every row holds U and the lowest experts
			 * outside it (spec 3): T after = R = T before. */
			assert_int_equal(env.st.t_after, 4);
			assert_int_equal(env.st.t_before, 4);
			assert_memory_not_equal(ids0, env.ids, sizeof ids0);
		}
	}
	/* num_valid_rows counts too: 1 processed row against a gate of 2. */
	err_setup(&env), env.nvr = 1, env.p.min_valid_rows = 2;
	memcpy(ids0, env.ids, sizeof ids0);
	assert_int_equal(oea_route_host(&env.p), OEA_OK);
	assert_int_equal(env.st.gated, 1);
	assert_memory_equal(ids0, env.ids, sizeof ids0);
}

/*
 * An older caller's struct (`size` bytes: ABI 1 or 2) with garbage where the
 * newer fields lie: they must not be read or written. ABI 1's struct ends
 * before min_valid_rows (the call behaves as min_valid_rows = 0); ABI 2's
 * before totals (here a pointer that would fault; its gate still holds).
 * ids, weights and stats are those of a current caller with the same
 * meaning, and no totals are added.
 */
static void check_older_struct(uint64_t seed0, uint32_t size)
{
	int ncases = test_cases(300), k;

	for (k = 0; k < ncases; k++) {
		tc_rng r = {seed0 + (uint64_t)k};
		tcase tc;
		run_out a, b;
		oea_totals seed;

		assert_int_equal(tcase_random(&tc, &r, 60000), 0);
		if (size < OEA_PROBLEM_SIZE_V2)
			tc.p.min_valid_rows = 0;
		run_case(&tc, oea_route_host, 1, &a);
		tc.p.struct_size = size;
		if (size < OEA_PROBLEM_SIZE_V2) {
			tc.p.min_valid_rows = 0x7fffffff;
			tc.p.reserved_abi2 = 12345;
		}
		tc.p.totals = (oea_totals *)(uintptr_t)8; /* never dereferenced */
		assert_int_equal(oea_problem_check(&tc.p), OEA_OK);
		run_case(&tc, oea_route_host, 1, &b);
		assert_int_equal(a.rc, b.rc);
		assert_memory_equal(a.ids, b.ids, tc.ids_bytes);
		assert_memory_equal(a.w, b.w, tc.w_bytes);
		if (a.rc == OEA_OK)
			assert_memory_equal(&a.st, &b.st, sizeof a.st);
		if (size < OEA_PROBLEM_SIZE_V2 && b.rc == OEA_OK)
			assert_int_equal(b.st.gated, 0);
		totals_seed(&seed);
		assert_memory_equal(&b.tot, &seed, sizeof seed);
		run_free(&a);
		run_free(&b);
		tcase_free(&tc);
	}
}

static void test_abi1_struct(void **state)
{
	(void)state;
	check_older_struct(0xab100000u, (uint32_t)OEA_PROBLEM_SIZE_V1);
}

static void test_abi2_struct(void **state)
{
	(void)state;
	check_older_struct(0xab200000u, (uint32_t)OEA_PROBLEM_SIZE_V2);
}

static void test_versions(void **state)
{
	(void)state;
	assert_int_equal(oea_abi_version(), OEA_ABI_VERSION);
	assert_string_equal(oea_version(), "3.1.0");
	assert_true(oea_has_cuda() == 0 || oea_has_cuda() == 1);
}

/* ---- numerics --------------------------------------------------------- */

static int64_t ulp_diff(float a, float b)
{
	int32_t ia, ib;
	memcpy(&ia, &a, 4);
	memcpy(&ib, &b, 4);
	if (ia < 0)
		ia = INT32_MIN - ia;
	if (ib < 0)
		ib = INT32_MIN - ib;
	return ia > ib ? (int64_t)ia - ib : (int64_t)ib - ia;
}

static void test_exp(void **state)
{
	int64_t worst = 0;
	float worst_x = 0.0f, x;
	int k;

	(void)state;
	/* Against double-precision exp, over the whole useful range, including
	 * results in the subnormals. */
	for (k = 0; k <= 2000000; k++) {
		double ref;
		int64_t d;
		x = -104.0f + 193.0f * (float)k / 2000000.0f;
		ref = exp((double)x);
		if (ref > 3.4028234663852886e38)
			continue;
		d = ulp_diff(oea_exp(x), (float)ref);
		if (ref < 1.1754943508222875e-38) /* subnormal: absolute error */
			d = fabs((double)oea_exp(x) - ref) <= 1.5e-45 ? 0 : 99;
		if (d > worst) {
			worst = d;
			worst_x = x;
		}
	}
	if (worst > 2)
		print_error("oea_exp is %lld ulp off at x = %.9g\n", (long long)worst, worst_x);
	assert_true(worst <= 2);
	assert_true(oea_exp(0.0f) == 1.0f);
	assert_true(oea_exp(-0.0f) == 1.0f);
	assert_true(isinf(oea_exp(INFINITY)) && oea_exp(INFINITY) > 0);
	assert_true(oea_exp(-INFINITY) == 0.0f);
	assert_true(isnan(oea_exp(NAN)));
	assert_true(isinf(oea_exp(89.0f)));
	assert_true(oea_exp(-200.0f) == 0.0f);
	assert_true(oea_exp(-103.0f) > 0.0f); /* subnormal, not flushed */
	assert_true(oea_exp(88.7f) < INFINITY);
}

/* 1 when oea_exp4 and oea_exp4_any give oea_exp's bits on every lane of v. */
static int exp4_matches(const float *v)
{
	float fast[4], any[4];
	int j;

	oea_v4f_store(fast, oea_exp4(oea_v4f_load(v)));
	oea_v4f_store(any, oea_exp4_any(oea_v4f_load(v)));
	for (j = 0; j < 4; j++) {
		float want = oea_exp(v[j]);
		if (memcmp(&fast[j], &want, 4) || memcmp(&any[j], &want, 4)) {
			print_error("oea_exp4 at x = %.9g (bits %08x): %.9g / %.9g, oea_exp %.9g\n",
				    v[j], oea_bits_from_f(v[j]), fast[j], any[j], want);
			return 0;
		}
	}
	return 1;
}

/*
 * The 4-wide exp of the CPU fast path (oea_simd.h) is bitwise oea_exp: over
 * a sweep of all float bit patterns, densely around every branch point of
 * oea_exp (plain-path bounds, overflow, underflow, the k = 128 and k = -127
 * scalings), the special values, each through the inlined plain path and
 * the general one; and oea_score4 is oea_score.
 */
static void test_exp4_bitwise(void **state)
{
	static const float edges[] = {-87.0f, 88.0f, 88.72283935546875f, -103.972084045410156f,
				      88.3762626647949f, -87.6865005f, -87.3365479f, 0.0f};
	float v[4];
	uint64_t b;
	int n = 0, k, j, bad = 0;

	(void)state;
	for (b = 0; b <= 0xffffffffu && bad < 5; b += 251) {
		v[n++] = oea_f_from_bits((uint32_t)b);
		if (n == 4) {
			bad += !exp4_matches(v);
			n = 0;
		}
	}
	for (k = 0; k < (int)(sizeof edges / sizeof edges[0]); k++) {
		uint32_t c = oea_bits_from_f(edges[k]);
		int64_t d;
		for (d = -20000; d < 20000 && bad < 5; d += 4) {
			for (j = 0; j < 4; j++)
				v[j] = oea_f_from_bits((uint32_t)((int64_t)c + d + j));
			bad += !exp4_matches(v);
			for (j = 0; j < 4; j++) /* and with the sign flipped */
				v[j] = -v[j];
			bad += !exp4_matches(v);
		}
	}
	{
		/* Specials, alone and mixed with ordinary lanes. */
		const float sp[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, FLT_MAX, -FLT_MAX,
				    1e-45f, -1e-45f, FLT_MIN, -FLT_MIN, 1.0f, -1.0f, 88.5f, -100.0f};
		int x, y;
		for (x = 0; x < 16; x++)
			for (y = 0; y < 16; y++) {
				float w[4] = {sp[x], 0.25f, sp[y], -3.0f};
				bad += !exp4_matches(w);
			}
	}
	assert_int_equal(bad, 0);

	for (k = 0; k < 20000; k++) {
		tc_rng r = {4242u + (uint64_t)k};
		float l[4], m = 4.0f * tc_gauss(&r), s = 1.0f + 30.0f * tc_unit(&r);
		float got[4];
		int scoring = k % 2 ? OEA_SCORING_SIGMOID : OEA_SCORING_SOFTMAX;
		for (j = 0; j < 4; j++)
			l[j] = (k % 7 == 0 ? 60.0f : 4.0f) * tc_gauss(&r);
		oea_v4f_store(got, oea_score4(oea_v4f_load(l), scoring, m, s));
		for (j = 0; j < 4; j++) {
			float want = oea_score(l[j], scoring, m, s);
			assert_memory_equal(&got[j], &want, 4);
		}
	}
}

static void test_half_conversions(void **state)
{
	uint32_t h;

	(void)state;
	for (h = 0; h < 65536; h++) {
		int ex = (h >> 10) & 31, m = h & 1023;
		double v;
		float got = oea_f16_to_f((uint16_t)h), want;
		if (ex == 31 && m) {
			assert_true(isnan(got));
			continue;
		}
		v = ex == 31 ? INFINITY : ex == 0 ? ldexp(m, -24) : ldexp(m + 1024, ex - 25);
		want = (float)((h & 0x8000) ? -v : v);
		assert_memory_equal(&got, &want, 4); /* exact, signed zero included */
	}
	for (h = 0; h < 65536; h += 7) {
		float got = oea_bf16_to_f((uint16_t)h);
		uint32_t u;
		memcpy(&u, &got, 4);
		assert_int_equal(u, h << 16);
	}
}

/* The softmax sum in the lane order stays close to the double sum. */
static void test_softmax_accuracy(void **state)
{
	int k;

	(void)state;
	for (k = 0; k < 200; k++) {
		tc_rng r = {777u + (uint64_t)k};
		float l[OEA_MAX_EXPERTS], v[OEA_LANES], m, s;
		double ds = 0.0;
		int E = tc_int(&r, 1, OEA_MAX_EXPERTS), e, lane;

		for (e = 0; e < E; e++)
			l[e] = 3.0f * tc_gauss(&r);
		for (lane = 0; lane < OEA_LANES; lane++)
			v[lane] = oea_lane_max(l, OEA_DTYPE_F32, E, lane);
		m = oea_tree_max32(v);
		for (lane = 0; lane < OEA_LANES; lane++)
			v[lane] = oea_lane_sum(l, OEA_DTYPE_F32, E, lane, m);
		s = oea_tree_sum32(v);
		for (e = 0; e < E; e++)
			ds += exp((double)l[e] - m);
		assert_true(fabs(s - ds) <= 1e-5 * ds);
	}
}

int main(int argc, char **argv)
{
	const struct CMUnitTest oracle[] = {
		cmocka_unit_test(test_oracle_by_hand),
		cmocka_unit_test(test_fillers_by_hand),
		cmocka_unit_test(test_oracle_random),
		cmocka_unit_test(test_count_only_random),
		cmocka_unit_test(test_oracle_corners),
		cmocka_unit_test(test_oracle_shapes),
	};
	const struct CMUnitTest fastpath[] = {
		cmocka_unit_test(test_fastpath_grid),
		cmocka_unit_test(test_fastpath_ties),
	};
	const struct CMUnitTest properties[] = {
		cmocka_unit_test(test_properties_random),
		cmocka_unit_test(test_kept_by_hand),
		cmocka_unit_test(test_kept_bounds),
	};
	const struct CMUnitTest errors[] = {
		cmocka_unit_test(test_versions),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_gate),
		cmocka_unit_test(test_abi1_struct),
		cmocka_unit_test(test_abi2_struct),
	};
	const struct CMUnitTest numerics[] = {
		cmocka_unit_test(test_exp),
		cmocka_unit_test(test_exp4_bitwise),
		cmocka_unit_test(test_half_conversions),
		cmocka_unit_test(test_softmax_accuracy),
	};
	const char *which = argc > 1 ? argv[1] : "all";
	int all = strcmp(which, "all") == 0, failed = 0, known = all;

	if (all || strcmp(which, "oracle") == 0) {
		failed += cmocka_run_group_tests_name("oracle", oracle, NULL, NULL);
		known = 1;
	}
	if (all || strcmp(which, "fastpath") == 0) {
		failed += cmocka_run_group_tests_name("fastpath", fastpath, NULL, NULL);
		known = 1;
	}
	if (all || strcmp(which, "properties") == 0) {
		failed += cmocka_run_group_tests_name("properties", properties, NULL, NULL);
		known = 1;
	}
	if (all || strcmp(which, "errors") == 0) {
		failed += cmocka_run_group_tests_name("errors", errors, NULL, NULL);
		known = 1;
	}
	if (all || strcmp(which, "numerics") == 0) {
		failed += cmocka_run_group_tests_name("numerics", numerics, NULL, NULL);
		known = 1;
	}
	if (!known) {
		fprintf(stderr, "usage: %s [all|oracle|fastpath|properties|errors|numerics]\n", argv[0]);
		return 2;
	}
	return failed ? 1 : 0;
}
