/*
 * recommend.c - the recommendation (recommend.h). A replayed batch size b_i
 * stands for the sizes from b_i up to the next one replayed (the smallest
 * for every size from 1, the largest for every size above it); adjacent
 * sizes with the same choice make one band. A size where the chosen k0
 * would not cut T at all is off.
 */
#include "recommend.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static double cut_of(const oea_totals *t)
{
	return t->t_before ? 1.0 - (double)t->t_after / (double)t->t_before : 0.0;
}

void oeap_recommend(const oeap_replay *r, const oeap_recording *rec, double min_kept, oeap_recommendation *out)
{
	memset(out, 0, sizeof(*out));
	out->min_kept = min_kept;
	for (size_t m = 1; m < r->nmodes; m++) {
		int pick = 0;
		size_t kk = 0;
		for (size_t k = 0; k < r->nk0 && !pick; k++) {
			if (r->k0[k] >= r->max_routed)
				continue;
			double p5 = oeap_kept_quantile(&oeap_replay_at(r, m, k)->tot, 0.05);
			if (p5 >= 0 && p5 >= min_kept) {
				pick = r->k0[k];
				kk = k;
			}
		}
		/* the smallest k0 that keeps the floor cuts T the most; when even it cuts nothing (a single
		 * token: every row routes its own R experts), OEA only costs weight there: off */
		if (pick && cut_of(&oeap_replay_at(r, m, kk)->tot) <= 0)
			pick = 0;
		out->choice[m - 1] = pick;
		const oea_totals *t = pick ? &oeap_replay_at(r, m, kk)->tot : NULL;
		double cut = t ? cut_of(t) : 0.0, p5 = t ? oeap_kept_quantile(t, 0.05) : -1;
		oeap_band *b = out->nbands ? &out->bands[out->nbands - 1] : NULL;
		if (b && b->k0 == pick) {
			b->hi = 0;
			if (cut < b->cut_min)
				b->cut_min = cut;
			if (cut > b->cut_max)
				b->cut_max = cut;
			if (p5 < b->p5_min)
				b->p5_min = p5;
			continue;
		}
		if (b)
			b->hi = r->mode[m] - 1;
		b = &out->bands[out->nbands++];
		*b = (oeap_band){.lo = out->nbands == 1 ? 1 : r->mode[m], .hi = 0, .k0 = pick, .cut_min = cut,
		                 .cut_max = cut, .p5_min = p5};
	}
	uint64_t best = 0;
	for (size_t i = 0; i < out->nbands; i++) {
		const oeap_band *b = &out->bands[i];
		uint64_t rows = 0;
		for (size_t c = 0; rec && c < rec->ncalls; c++)
			if (rec->calls[c].rows >= b->lo && (!b->hi || rec->calls[c].rows <= b->hi))
				rows += (uint64_t)rec->calls[c].rows;
		if (b->k0 && rows > best) {
			best = rows;
			out->single_k0 = b->k0;
			out->single_min_batch = b->lo;
		}
	}
	if (out->nbands == 1) {
		snprintf(out->value, sizeof(out->value), "%d", out->bands[0].k0);
		return;
	}
	size_t at = 0;
	for (size_t i = 0; i < out->nbands && at < sizeof(out->value); i++) {
		const oeap_band *b = &out->bands[i];
		char hi[16] = "";
		if (b->hi)
			snprintf(hi, sizeof(hi), "%d", b->hi);
		at += (size_t)snprintf(out->value + at, sizeof(out->value) - at, "%s%d-%s:%d", i ? "," : "", b->lo, hi,
		                       b->k0);
	}
}
