/*
 * replay.c - the replay engine (replay.h).
 *
 * Batches are built once and routed for every k0 in turn, so the gathering
 * of rows is paid once per batch, not once per k0. Rows are gathered in their
 * recorded dtype (bf16 stays bf16): liboea reads exactly what the server's
 * call read, so its result is the live one bit for bit. The framework's ids
 * are copied before each route, since liboea rewrites them in place.
 *
 * The recorded batching applies each layer's recorded minimum-batch gate (it
 * is what the server did); a regrouped batch size is asked "what would OEA do
 * at this size", so no gate holds there.
 */
#include "replay.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The edges of rule 10's buckets, as the library compares them (single precision). */
static const float kept_edges[14] = {0.25f, 0.5f, 0.6f, 0.7f, 0.75f, 0.8f, 0.85f,
                                     0.9f,  0.93f, 0.95f, 0.97f, 0.98f, 0.99f, 1.0f};

double oeap_kept_mean(const oea_totals *t)
{
	uint64_t defined = t->rerouted_rows - t->kept_undefined;
	return defined ? (double)t->kept_fx / 16777216.0 / (double)defined : -1;
}

double oeap_kept_quantile(const oea_totals *t, double q)
{
	uint64_t n = 0;
	for (int b = 0; b < OEA_KEPT_BUCKETS; b++)
		n += t->kept_hist[b];
	if (!n)
		return -1;
	double want = q * (double)n, before = 0;
	for (int b = 0; b < OEA_KEPT_BUCKETS; b++) {
		double c = before + (double)t->kept_hist[b];
		if (t->kept_hist[b] && c >= want) {
			if (b >= 14) /* exactly 1, or above 1: the lower edge */
				return 1.0;
			double lo = b ? kept_edges[b - 1] : 0.0, hi = kept_edges[b];
			return lo + (hi - lo) * (want - before) / (double)t->kept_hist[b];
		}
		before = c;
	}
	return 1.0;
}

/* Scratch of one batch: rows gathered contiguously, in the recorded dtypes. */
typedef struct batch {
	const oeap_rec_layer *layer;
	const float *bias;
	int32_t logits_dtype, ids_dtype;
	int32_t n;
	unsigned char *logits;   /* OEA_MAX_ROWS * OEA_MAX_EXPERTS * 4 */
	unsigned char *ids;      /* the framework's: OEA_MAX_ROWS * OEA_MAX_TOPK * 8 */
	unsigned char *work_ids; /* what liboea rewrites */
	float *weights;          /* liboea writes them; nothing reads them */
	uint8_t *processed;      /* per row: rule "processed rows" (for the EP figures) */
} batch;

static int64_t id_at(const unsigned char *ids, int32_t dtype, size_t i)
{
	if (dtype == OEA_DTYPE_I64) {
		int64_t v;
		memcpy(&v, ids + i * 8, 8);
		return v;
	}
	int32_t v;
	memcpy(&v, ids + i * 4, 4);
	return v;
}

/* Which rows liboea processes (all ids in [0, E), distinct): the EP figures count those rows only. */
static void mark_processed(batch *b)
{
	const oeap_rec_layer *l = b->layer;
	int R = l->top_k - l->shared;
	for (int32_t i = 0; i < b->n; i++) {
		uint64_t seen[OEA_MAX_EXPERTS / 64] = {0};
		int ok = 1;
		for (int j = 0; j < R && ok; j++) {
			int64_t e = id_at(b->ids, b->ids_dtype, (size_t)i * (size_t)l->top_k + (size_t)j);
			if (e < 0 || e >= l->experts || (seen[e / 64] >> (e % 64) & 1))
				ok = 0;
			else
				seen[e / 64] |= 1ull << (e % 64);
		}
		b->processed[i] = (uint8_t)ok;
	}
}

/* The largest number of distinct experts any of `ep` contiguous expert-parallel ranks activates. */
static uint32_t busiest(const batch *b, const unsigned char *ids, int ep)
{
	const oeap_rec_layer *l = b->layer;
	int R = l->top_k - l->shared;
	uint64_t seen[OEA_MAX_EXPERTS / 64] = {0};
	for (int32_t i = 0; i < b->n; i++)
		for (int j = 0; b->processed[i] && j < R; j++) {
			int64_t e = id_at(ids, b->ids_dtype, (size_t)i * (size_t)l->top_k + (size_t)j);
			seen[e / 64] |= 1ull << (e % 64);
		}
	uint32_t count[OEA_MAX_EXPERTS] = {0}, most = 0;
	for (int e = 0; e < l->experts; e++)
		if (seen[e / 64] >> (e % 64) & 1) {
			/* rank r holds experts [r*E/ep, (r+1)*E/ep): contiguous, as EP without EPLB places them */
			int r = (int)((int64_t)e * ep / l->experts);
			if (++count[r] > most)
				most = count[r];
		}
	return most;
}

/* Routes the gathered batch once per k0 of k0s[0..nk0), into cells[0..nk0). */
static int route_with(oeap_replay *r, const int *k0s, size_t nk0, oeap_replay_cell *cells, batch *b, int gate,
                      oeap_error *err)
{
	const oeap_rec_layer *l = b->layer;
	size_t id_bytes = (size_t)b->n * (size_t)l->top_k * oeap_rec_dtype_size(b->ids_dtype);
	uint32_t ep_before = 0;
	if (r->ep) {
		mark_processed(b);
		ep_before = busiest(b, b->ids, r->ep);
	}
	for (size_t k = 0; k < nk0; k++) {
		oeap_replay_cell *c = &cells[k];
		memcpy(b->work_ids, b->ids, id_bytes);
		oea_problem p = {
			.struct_size = sizeof(oea_problem),
			.n = b->n,
			.num_experts = l->experts,
			.top_k = l->top_k,
			.num_shared = l->shared,
			.k0 = k0s[k],
			.scoring = l->scoring,
			.renormalize = l->renormalize,
			.num_expert_group = l->groups,
			.topk_group = l->topk_group,
			.logits_dtype = b->logits_dtype,
			.logits_row_stride = l->experts,
			.logits = b->logits,
			.correction_bias = b->bias,
			.ids_dtype = b->ids_dtype,
			.weights_dtype = OEA_DTYPE_F32,
			.ids_row_stride = l->top_k,
			.weights_row_stride = l->top_k,
			.ids = b->work_ids,
			.weights = b->weights,
			.min_valid_rows = gate ? l->min_batch : 0,
			.totals = &c->tot,
		};
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		int rc = oea_route_host(&p);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		r->ref_seconds += (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
		if (rc != OEA_OK)
			return oeap_fail(err, OEAP_ERR_INPUT, "replay", 0, "layer %lld: liboea refused a batch of %d rows at k0=%d: %s",
			                 (long long)l->id, b->n, k0s[k], oea_status_message(rc));
		r->routed_rows += (uint64_t)b->n;
		if (r->ep) {
			c->ep_before += ep_before;
			c->ep_after += busiest(b, b->work_ids, r->ep);
		}
	}
	return 0;
}

/* Routes the gathered batch once per k0 of `r`, into mode `mode`'s cells. */
static int route_batch(oeap_replay *r, size_t mode, batch *b, int gate, oeap_error *err)
{
	return route_with(r, r->k0, r->nk0, oeap_replay_at(r, mode, 0), b, gate, err);
}

/* Appends rows [from, from+count) of call `c` to the batch. */
static void gather(batch *b, const oeap_rec_call *c, int32_t from, int32_t count)
{
	const oeap_rec_layer *l = b->layer;
	size_t ls = oeap_rec_dtype_size(c->logits_dtype) * (size_t)l->experts;
	size_t is = oeap_rec_dtype_size(c->ids_dtype) * (size_t)l->top_k;
	memcpy(b->logits + (size_t)b->n * ls, c->logits + (size_t)from * ls, (size_t)count * ls);
	memcpy(b->ids + (size_t)b->n * is, c->ids + (size_t)from * is, (size_t)count * is);
	b->n += count;
}

static void start(batch *b, const oeap_rec_layer *l, const oeap_rec_call *c)
{
	b->layer = l;
	b->bias = c->bias;
	b->logits_dtype = c->logits_dtype;
	b->ids_dtype = c->ids_dtype;
	b->n = 0;
}

/* Regroups each layer's rows, in recorded order, into batches of `size`. */
static int regroup(oeap_replay *r, size_t mode, const oeap_recording *rec, batch *b, int size, oeap_error *err)
{
	for (size_t li = 0; li < rec->nlayers; li++) {
		b->n = 0;
		for (size_t ci = 0; ci < rec->ncalls; ci++) {
			const oeap_rec_call *c = &rec->calls[ci];
			if (c->layer != li)
				continue;
			if (b->n && (c->logits_dtype != b->logits_dtype || c->ids_dtype != b->ids_dtype))
				return oeap_fail(err, OEAP_ERR_INPUT, rec->files[c->file].path, 0,
				                 "layer %lld was recorded with two dtypes: its rows cannot share a batch",
				                 (long long)rec->layers[li].id);
			for (int32_t at = 0; at < c->rows;) {
				if (!b->n)
					start(b, &rec->layers[li], c);
				int32_t take = c->rows - at < size - b->n ? c->rows - at : size - b->n;
				gather(b, c, at, take);
				at += take;
				if (b->n == size) {
					if (route_batch(r, mode, b, 0, err))
						return -1;
					b->n = 0;
				}
			}
		}
		r->left_over[mode] += (uint64_t)b->n;
	}
	return 0;
}

static int cmp_int(const void *a, const void *b)
{
	return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

int oeap_replay_run(const oeap_recording *rec, const oeap_replay_opts *o, oeap_replay *r, oeap_error *err)
{
	for (size_t i = 0; i < rec->nlayers; i++)
		if (rec->layers[i].top_k - rec->layers[i].shared > r->max_routed)
			r->max_routed = rec->layers[i].top_k - rec->layers[i].shared;
	if (o->nk0) {
		memcpy(r->k0, o->k0, o->nk0 * sizeof(int));
		r->nk0 = o->nk0;
	} else {
		for (int k = 1; k < r->max_routed && r->nk0 < OEAP_REPLAY_MAX_LIST; k++)
			r->k0[r->nk0++] = k;
		if (!r->nk0) /* every layer routes one expert: OEA has nothing to choose; report it off */
			r->k0[r->nk0++] = 1;
	}
	qsort(r->k0, r->nk0, sizeof(int), cmp_int);
	r->mode[r->nmodes++] = 0;
	static const int default_batches[] = {1, 2, 4, 8, 16, 32, 64, 128};
	const int *bs = o->nbatch ? o->batch : default_batches;
	size_t nb = o->nbatch ? o->nbatch : sizeof(default_batches) / sizeof(default_batches[0]);
	for (size_t i = 0; i < nb; i++)
		r->mode[r->nmodes++] = bs[i];
	qsort(r->mode + 1, r->nmodes - 1, sizeof(int), cmp_int);
	r->ep = o->ep;
	r->cells = calloc(r->nmodes * r->nk0, sizeof(*r->cells));
	r->left_over = calloc(r->nmodes, sizeof(*r->left_over));
	batch b = {0};
	b.logits = malloc((size_t)OEA_MAX_ROWS * OEA_MAX_EXPERTS * 4);
	b.ids = malloc((size_t)OEA_MAX_ROWS * OEA_MAX_TOPK * 8);
	b.work_ids = malloc((size_t)OEA_MAX_ROWS * OEA_MAX_TOPK * 8);
	b.weights = malloc((size_t)OEA_MAX_ROWS * OEA_MAX_TOPK * sizeof(float));
	b.processed = malloc(OEA_MAX_ROWS);
	int rc = -1;
	if (!r->cells || !r->left_over || !b.logits || !b.ids || !b.work_ids || !b.weights || !b.processed) {
		oeap_fail(err, OEAP_ERR_INTERNAL, "replay", 0, "out of memory");
		goto done;
	}
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (size_t ci = 0; ci < rec->ncalls; ci++) {
		const oeap_rec_call *c = &rec->calls[ci];
		start(&b, &rec->layers[c->layer], c);
		gather(&b, c, 0, c->rows);
		if (route_batch(r, 0, &b, 1, err))
			goto done;
	}
	if (o->bands) {
		/* as a server with these bands would have routed the recorded calls: k0 by the call's rows, with
		 * the layer's gate; a call whose band is off is routed with k0 = R (counted, unchanged) */
		r->has_bands = 1;
		r->bands = *o->bands;
		for (size_t ci = 0; ci < rec->ncalls; ci++) {
			const oeap_rec_call *c = &rec->calls[ci];
			const oeap_rec_layer *l = &rec->layers[c->layer];
			int k0 = oeap_k0_bands_pick(o->bands, c->rows);
			if (k0 == 0)
				k0 = l->top_k - l->shared;
			start(&b, l, c);
			gather(&b, c, 0, c->rows);
			if (route_with(r, &k0, 1, &r->bands_cell, &b, 1, err))
				goto done;
		}
	}
	for (size_t m = 1; m < r->nmodes; m++)
		if (regroup(r, m, rec, &b, r->mode[m], err))
			goto done;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	r->seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
	rc = 0;
done:
	free(b.logits);
	free(b.ids);
	free(b.work_ids);
	free(b.weights);
	free(b.processed);
	return rc;
}

void oeap_replay_free(oeap_replay *r)
{
	free(r->cells);
	free(r->left_over);
	r->cells = NULL;
	r->left_over = NULL;
}
