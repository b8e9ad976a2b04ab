/*
 * replay.h - the replay engine: a recording's calls routed again by liboea's
 * CPU reference (linked into the CLI: the same code the server's library
 * runs, bit for bit the CUDA kernel's result), for several k0 values, as the
 * calls were recorded and regrouped into batches of fixed sizes, with the
 * statistics `oeapatch replay` reports. The figures come from liboea's own
 * totals (docs/oea-semantics.md rules 8-10), so a replay of the live k0 on
 * the recorded batches gives the live server's sums.
 */
#ifndef OEAP_REPLAY_H
#define OEAP_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "k0bands.h"
#include "oea.h"
#include "recording.h"

/* The most values of --k0 and --batch. */
#define OEAP_REPLAY_MAX_LIST 32

typedef struct oeap_replay_opts {
	int k0[OEAP_REPLAY_MAX_LIST]; /* each >= 1; a k0 >= a layer's routed top-k routes it unchanged */
	size_t nk0;                   /* 0: 1 .. (the widest layer's routed top-k) - 1 */
	int batch[OEAP_REPLAY_MAX_LIST]; /* regrouped batch sizes, 1..OEA_MAX_ROWS */
	size_t nbatch;                /* 0: 1, 2, 4, ... 128 */
	int ep;                       /* expert-parallel ranks to report the busiest of; 0: none */
	const oeap_k0_bands *bands;   /* also replay the recorded calls with k0 by their rows; NULL: not */
} oeap_replay_opts;

/* One k0 at one batching. */
typedef struct oeap_replay_cell {
	oea_totals tot;      /* liboea's sums over the batches */
	uint64_t ep_before;  /* sum over batches of the busiest rank's distinct experts, before */
	uint64_t ep_after;   /* ... after */
} oeap_replay_cell;

typedef struct oeap_replay {
	size_t nk0, nmodes;
	int k0[OEAP_REPLAY_MAX_LIST];
	int mode[OEAP_REPLAY_MAX_LIST + 1]; /* 0: the recorded calls as they were; else a batch size */
	oeap_replay_cell *cells;            /* [mode * nk0 + k] */
	uint64_t *left_over;                /* per mode: rows that did not fill a last batch of their layer */
	int max_routed;                     /* the widest layer's routed top-k (R) */
	int ep;
	int has_bands;                      /* bands_cell holds the recorded calls routed by opts.bands */
	oeap_k0_bands bands;
	oeap_replay_cell bands_cell;
	uint64_t routed_rows;               /* rows handed to liboea, all cells together */
	double seconds;                     /* time spent replaying (the engine's loop) */
	double ref_seconds;                 /* of which inside oea_route_host: the CPU reference's own speed */
} oeap_replay;

/* Runs the replay; fills `out` (zeroed by the caller). */
int oeap_replay_run(const oeap_recording *rec, const oeap_replay_opts *o, oeap_replay *out, oeap_error *err);
void oeap_replay_free(oeap_replay *r);

static inline oeap_replay_cell *oeap_replay_at(const oeap_replay *r, size_t mode, size_t k)
{
	return &r->cells[mode * r->nk0 + k];
}

/* Mean kept weight of the re-routed rows (rule 10), or -1 when no row had a defined kept. */
double oeap_kept_mean(const oea_totals *t);
/* The q-quantile of kept (rule 10's estimate from the histogram), or -1 when none. */
double oeap_kept_quantile(const oea_totals *t, double q);

#endif
