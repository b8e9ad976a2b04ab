/*
 * calibration.c - reads moe_bench.py's calibration file (calibration.h).
 */
#include "calibration.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

int oeap_calibration_load(const char *path, const oeap_recording *rec, oeap_calibration *out, oeap_error *err)
{
	memset(out, 0, sizeof(*out));
	snprintf(out->path, sizeof(out->path), "%s", path);
	if (!rec->nlayers)
		return oeap_fail(err, OEAP_ERR_INPUT, path, 0, "the recording has no layer to estimate");
	int E = rec->layers[0].experts, R = rec->layers[0].top_k - rec->layers[0].shared;
	for (size_t i = 1; i < rec->nlayers; i++)
		if (rec->layers[i].experts != E || rec->layers[i].top_k - rec->layers[i].shared != R)
			return oeap_fail(err, OEAP_ERR_USAGE, "--calibration", 0,
			                 "the recording's layers have different shapes (%d experts, top-%d and %d, top-%d): "
			                 "one calibration cannot estimate them all",
			                 E, R, rec->layers[i].experts, rec->layers[i].top_k - rec->layers[i].shared);
	json_error_t je;
	json_t *doc = json_load_file(path, 0, &je);
	if (!doc)
		return oeap_fail(err, OEAP_ERR_INPUT, path, je.line, "not a JSON file: %s", je.text);
	int rc = -1;
	json_t *fmt = json_object_get(doc, "format"), *entries = json_object_get(doc, "entries");
	if (!json_is_string(fmt) || strcmp(json_string_value(fmt), "oeapatch-calibration") != 0 ||
	    !json_is_array(entries)) {
		oeap_fail(err, OEAP_ERR_INPUT, path, 0,
		          "not a calibration (native/bench/moe_bench.py --calibrate writes one: \"format\": "
		          "\"oeapatch-calibration\" and its \"entries\")");
		goto done;
	}
	json_t *dev = json_object_get(doc, "device");
	snprintf(out->device, sizeof(out->device), "%s", json_is_string(dev) ? json_string_value(dev) : "?");
	size_t i;
	json_t *e;
	char have[512] = "";
	size_t at = 0;
	json_array_foreach(entries, i, e)
	{
		json_t *ex = json_object_get(e, "experts"), *k = json_object_get(e, "top_k"), *a = json_object_get(e, "a_us"),
		       *b = json_object_get(e, "b_us");
		if (!json_is_integer(ex) || !json_is_integer(k) || !json_is_number(a) || !json_is_number(b)) {
			oeap_fail(err, OEAP_ERR_INPUT, path, 0, "entry %zu lacks experts, top_k, a_us or b_us", i);
			goto done;
		}
		if (at < sizeof(have))
			at += (size_t)snprintf(have + at, sizeof(have) - at, "%s%lld experts top-%lld", i ? ", " : "",
			                       (long long)json_integer_value(ex), (long long)json_integer_value(k));
		if (json_integer_value(ex) != E || json_integer_value(k) != R)
			continue;
		out->experts = E;
		out->top_k = R;
		out->a_us = json_number_value(a);
		out->b_us = json_number_value(b);
		if (!isfinite(out->a_us) || !isfinite(out->b_us)) {
			oeap_fail(err, OEAP_ERR_INPUT, path, 0, "entry %zu: a_us and b_us must be finite numbers", i);
			goto done;
		}
		out->rms_rel_error = json_number_value(json_object_get(e, "rms_rel_error"));
		out->max_rel_error = json_number_value(json_object_get(e, "max_rel_error"));
		out->smoke = json_is_true(json_object_get(e, "smoke"));
		json_t *m = json_object_get(e, "model");
		snprintf(out->model, sizeof(out->model), "%s", json_is_string(m) ? json_string_value(m) : "?");
		rc = 0;
		goto done;
	}
	oeap_fail(err, OEAP_ERR_USAGE, "--calibration", 0,
	          "%s has no entry for the recording's layers (%d experts, routed top-%d); it has: %s", path, E, R,
	          *have ? have : "none");
done:
	json_decref(doc);
	return rc;
}
