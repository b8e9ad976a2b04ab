/*
 * recommend.h - `oeapatch replay --recommend`: from a replay's regrouped
 * batch sizes, per batch-size band the smallest k0 whose p5 kept weight
 * (docs/oea-semantics.md rule 10) stays at or above a floor, and the K0
 * setting that deploys it (bands "1-7:0,8-31:4,32-:3"; 0 = off).
 */
#ifndef OEAP_RECOMMEND_H
#define OEAP_RECOMMEND_H

#include <stddef.h>

#include "replay.h"

typedef struct oeap_band {
	int lo, hi;      /* batch sizes [lo, hi]; hi 0: no upper end */
	int k0;          /* 0: off (no k0 below the routed top-k keeps the floor, or it cuts nothing) */
	double cut_min, cut_max; /* T cut (1 - after/before) at the replayed batch sizes in the band */
	double p5_min;   /* the lowest p5 kept of them (-1: off) */
} oeap_band;

typedef struct oeap_recommendation {
	double min_kept;
	/* per replayed batch size (the replay's modes 1..): the k0 chosen, 0 = off */
	int choice[OEAP_REPLAY_MAX_LIST];
	oeap_band bands[OEAP_REPLAY_MAX_LIST];
	size_t nbands;
	char value[512]; /* the K0 setting's value: "3", or bands */
	/* One k0 for a binding whose K0 takes a single number: the band (k0 > 0) that holds the most rows of
	 * the recorded calls, gated below its lower end (MIN_BATCH); 0: no such band. */
	int single_k0, single_min_batch;
} oeap_recommendation;

/* Fills `out` from `r` (and the single value from `rec`'s recorded calls): k0 values >= the widest
 * layer's routed top-k count as off. */
void oeap_recommend(const oeap_replay *r, const oeap_recording *rec, double min_kept, oeap_recommendation *out);

#endif
