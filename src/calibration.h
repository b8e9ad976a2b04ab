/*
 * calibration.h - `oeapatch replay --calibration FILE`: the MoE layer's
 * decode cost fitted by native/bench/moe_bench.py --calibrate on a GPU,
 * t = b*T + a*B*k (the paper's form: b reads one expert's weights, a is the
 * per-row per-slot compute), turned into the estimated time a k0 saves at a
 * batch size. The model is linear, so the mean time over a replay's batches
 * is the formula at their mean T and mean rows: exact for the model, as good
 * as the fit (whose error the file carries and replay prints).
 */
#ifndef OEAP_CALIBRATION_H
#define OEAP_CALIBRATION_H

#include "error.h"
#include "recording.h"

typedef struct oeap_calibration {
	char path[1024];
	char model[128];
	char device[128];
	int experts, top_k;
	double a_us, b_us;
	double rms_rel_error, max_rel_error;
	int smoke; /* a CPU pre-flight's fit: its figures mean nothing (said with them) */
} oeap_calibration;

/* Reads FILE and picks the entry of the recording's layer shape (every layer must share one: E experts,
 * routed top-k). An error names what does not fit. */
int oeap_calibration_load(const char *path, const oeap_recording *rec, oeap_calibration *out, oeap_error *err);

/* The estimated MoE-layer time of a batch with mean T and mean rows B (microseconds). */
static inline double oeap_calibration_us(const oeap_calibration *c, double t, double rows)
{
	return c->b_us * t + c->a_us * rows * c->top_k;
}

#endif
