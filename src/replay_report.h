/*
 * replay_report.h - what `oeapatch replay` prints: the table a person reads,
 * the JSON document for tools, CSV for spreadsheets, and the SVG chart (T
 * after/before against batch size, one line per k0). Every figure of every
 * form comes from oeap_replay_figures(), so the forms cannot disagree.
 */
#ifndef OEAP_REPLAY_REPORT_H
#define OEAP_REPLAY_REPORT_H

#include <jansson.h>
#include <stdio.h>

#include "calibration.h"
#include "recommend.h"
#include "recording.h"
#include "replay.h"

/* The figures of one cell (a k0 at a batching); means are per routed batch that the gate let through. */
typedef struct oeap_replay_figures {
	uint64_t batches;     /* batches routed (liboea calls) */
	uint64_t gated;
	double t_before, t_after; /* mean distinct experts per batch */
	double ratio;         /* t_after / t_before (sums), 1 when nothing was routed */
	double cut;           /* 1 - ratio */
	double kept_mean, kept_p5; /* -1: no re-routed row with a defined kept */
	double changed;       /* changed slots per re-routed row (0 when none) */
	double ep_before, ep_after; /* mean busiest EP rank's distinct experts (with --ep) */
	double rows;          /* mean rows per routed batch */
	double us_before, us_after; /* the calibration's MoE-layer time per batch (with one) */
} oeap_replay_figures;

/* `cal` may be NULL (no time estimates). */
void oeap_replay_figures_of(const oeap_replay *r, const oeap_calibration *cal, size_t mode, size_t k,
                            oeap_replay_figures *f);

/* "recorded" or the batch size. */
const char *oeap_replay_mode_name(const oeap_replay *r, size_t mode, char *buf, size_t len);

/* The settings prefix the recording's files name (the first file's), or "" */
const char *oeap_replay_prefix(const oeap_recording *rec);

/* The human table (and the recommendation when `rec_out` is non-NULL, the time estimates when `cal` is)
 * on `f`. */
void oeap_replay_print_text(FILE *f, const oeap_recording *rec, const oeap_replay *r, const oeap_calibration *cal,
                            const oeap_recommendation *rec_out);
/* The fields of the JSON document (added to `j`). */
void oeap_replay_json(json_t *j, const oeap_recording *rec, const oeap_replay *r, const oeap_calibration *cal,
                      const oeap_recommendation *rec_out);
/* One header line and one line per cell. Returns -1 on a write error. */
int oeap_replay_write_csv(FILE *f, const oeap_replay *r, const oeap_calibration *cal);
/* The chart: T after / T before against the regrouped batch size, one line per k0. -1 on a write error. */
int oeap_replay_write_svg(FILE *f, const oeap_replay *r);

#endif
