/*
 * oeapatch replay: route the calls of routing recordings (docs/recording.md)
 * again with liboea's CPU reference, for several k0 values, as recorded and
 * regrouped into batch sizes, and report T before/after, the kept weight and
 * the changed slots (and the busiest expert-parallel rank with --ep); with
 * --recommend, per batch-size band the smallest k0 that keeps the p5 kept
 * weight at a floor, and the settings line. Needs no target and no patch
 * definition: a recording says everything (recording.h, replay.h,
 * recommend.h, replay_report.h).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calibration.h"
#include "cli.h"
#include "cmd.h"
#include "fsio.h"
#include "k0bands.h"
#include "opt.h"
#include "recommend.h"
#include "recording.h"
#include "replay.h"
#include "replay_report.h"
#include "report.h"

typedef struct replay_opts {
	const char *k0, *batch, *ep, *svg, *min_kept, *calibration, *bands;
	int csv, recommend;
} replay_opts;

static const oeap_option options[] = {
	OEAP_COMMON_OPTIONS,
	OEAP_OPT_VALUE("k0", 0, "LIST", replay_opts, k0,
	               "the k0 values to replay: numbers and ranges, \"1-7\" or \"2,3,4\" (default: 1 up to the routed "
	               "top-k minus 1)"),
	OEAP_OPT_VALUE("batch", 0, "LIST", replay_opts, batch,
	               "batch sizes to regroup each layer's rows into, 1..1024 (default: 1,2,4,8,16,32,64,128); the "
	               "recorded calls are always replayed as they were too"),
	OEAP_OPT_VALUE("ep", 0, "N", replay_opts, ep,
	               "also report the busiest of N expert-parallel ranks (experts split contiguously): its distinct "
	               "experts before and after"),
	OEAP_OPT_SWITCH("csv", 0, replay_opts, csv, "print the figures as CSV instead of the table"),
	OEAP_OPT_VALUE("svg", 0, "FILE", replay_opts, svg,
	               "write the chart (T after/before against batch size, a line per k0) to FILE"),
	OEAP_OPT_SWITCH("recommend", 0, replay_opts, recommend,
	                "name, per batch-size band, the smallest k0 whose p5 kept weight is at least --min-kept, and the "
	                "settings line that deploys it"),
	OEAP_OPT_VALUE("min-kept", 0, "X", replay_opts, min_kept,
	               "the floor of the p5 kept weight for --recommend, 0..1 (default: 0.9)"),
	OEAP_OPT_VALUE("bands", 0, "K0", replay_opts, bands,
	               "also replay the recorded calls as a server with this K0 value would route them: a number, or "
	               "bands by batch size such as 1-7:0,8-31:4,32-:3 (what --recommend prints)"),
	OEAP_OPT_VALUE("calibration", 0, "FILE", replay_opts, calibration,
	               "the MoE layer's cost fitted by native/bench/moe_bench.py --calibrate on the serving GPU: also "
	               "estimate the MoE-layer time per batch, before and after"),
	OEAP_OPT_END,
};

/* "1-7,9" into out[]: each in [lo, hi]. */
static int parse_list(const char *opt, const char *s, int lo, int hi, int *out, size_t *n, oeap_error *err)
{
	*n = 0;
	const char *p = s;
	while (1) {
		char *end;
		errno = 0;
		long a = strtol(p, &end, 10), b;
		if (end == p || errno)
			goto bad;
		b = a;
		if (*end == '-') {
			p = end + 1;
			b = strtol(p, &end, 10);
			if (end == p || errno || b < a)
				goto bad;
		}
		if (a < lo || b > hi)
			return oeap_fail(err, OEAP_ERR_USAGE, opt, 0, "'%s': every value must be from %d to %d", s, lo, hi);
		for (long v = a; v <= b; v++) {
			int dup = 0;
			for (size_t i = 0; i < *n; i++)
				dup |= out[i] == (int)v;
			if (dup)
				continue;
			if (*n == OEAP_REPLAY_MAX_LIST)
				return oeap_fail(err, OEAP_ERR_USAGE, opt, 0, "'%s': at most %d values", s, OEAP_REPLAY_MAX_LIST);
			out[(*n)++] = (int)v;
		}
		if (*end == '\0')
			return 0;
		if (*end != ',')
			goto bad;
		p = end + 1;
	}
bad:
	return oeap_fail(err, OEAP_ERR_USAGE, opt, 0, "'%s' is not a list of numbers and ranges such as 1-3,5", s);
}

static int check_options(const replay_opts *o, oeap_replay_opts *ro, oeap_k0_bands *bands, double *min_kept,
                         oeap_error *err)
{
	if (o->bands) {
		char why[256];
		if (oeap_k0_bands_parse(o->bands, OEA_MAX_TOPK - 1, bands, why, sizeof(why)))
			return oeap_fail(err, OEAP_ERR_USAGE, "--bands", 0, "'%s': %s", o->bands, why);
		ro->bands = bands;
	}
	if (o->k0 && parse_list("--k0", o->k0, 1, OEA_MAX_TOPK, ro->k0, &ro->nk0, err))
		return -1;
	if (o->batch && parse_list("--batch", o->batch, 1, OEA_MAX_ROWS, ro->batch, &ro->nbatch, err))
		return -1;
	if (o->ep) {
		int v[OEAP_REPLAY_MAX_LIST];
		size_t n = 0;
		if (parse_list("--ep", o->ep, 1, OEA_MAX_EXPERTS, v, &n, err))
			return -1;
		if (n != 1)
			return oeap_fail(err, OEAP_ERR_USAGE, "--ep", 0, "one number of ranks");
		ro->ep = v[0];
	}
	*min_kept = 0.9;
	if (o->min_kept) {
		if (!o->recommend)
			return oeap_fail(err, OEAP_ERR_USAGE, "--min-kept", 0, "is the floor of --recommend: give both");
		char *end;
		errno = 0;
		*min_kept = strtod(o->min_kept, &end);
		if (end == o->min_kept || *end || errno || !(*min_kept >= 0 && *min_kept <= 1))
			return oeap_fail(err, OEAP_ERR_USAGE, "--min-kept", 0, "'%s' is not a number from 0 to 1", o->min_kept);
	}
	if (o->csv && o->recommend)
		return oeap_fail(err, OEAP_ERR_USAGE, "--csv", 0, "prints the figures only: --recommend goes with the table "
		                                                  "or --json");
	return 0;
}

/* The chart, written atomically (no half-written file on trouble). */
static int write_svg(const char *path, const oeap_replay *r, oeap_error *err)
{
	char *data = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&data, &len);
	if (!m)
		return oeap_fail(err, OEAP_ERR_INTERNAL, "--svg", 0, "out of memory");
	int bad = oeap_replay_write_svg(m, r);
	bad |= fclose(m) != 0;
	int rc = bad ? oeap_fail(err, OEAP_ERR_INTERNAL, "--svg", 0, "out of memory")
	             : oeap_write_atomic(path, data, len, 0644, err);
	free(data);
	return rc;
}

int cmd_replay(int argc, char **argv)
{
	int first = 0;
	oeap_cli cli;
	replay_opts o;
	memset(&o, 0, sizeof(o));
	int p = oeap_cli_parse(&cli, "replay",
	                       "FILE... [--k0 LIST] [--batch LIST] [--ep N] [--json | --csv] [--svg FILE] "
	                       "[--recommend [--min-kept X]] [--bands K0] [--calibration FILE]",
	                       "Route the calls of routing recordings (the binding's recorder: *_OEA_RECORD) "
	                       "again with liboea's CPU reference, for each k0, as recorded and "
	                       "regrouped into batch sizes: T before and after, the kept weight (mean, p5) and the "
	                       "changed slots. Exit 0, or 2 on a bad recording or option.",
	                       options, argc, argv, &o, &first);
	if (p)
		return p > 0 ? OEAP_EXIT_OK : OEAP_EXIT_TROUBLE;
	oeap_error err;
	oeap_error_clear(&err);
	oeap_replay_opts ro;
	memset(&ro, 0, sizeof(ro));
	double min_kept = 0.9;
	if (first >= argc) {
		oeap_fail(&err, OEAP_ERR_USAGE, "replay", 0, "no recording given (FILE...)");
		return oeap_cli_error(&cli, &err);
	}
	oeap_k0_bands bands;
	if (check_options(&o, &ro, &bands, &min_kept, &err))
		return oeap_cli_error(&cli, &err);
	oeap_recording rec;
	oeap_replay r;
	oeap_recommendation rc;
	oeap_calibration cal;
	memset(&rec, 0, sizeof(rec));
	memset(&r, 0, sizeof(r));
	int code = OEAP_EXIT_OK;
	for (int i = first; i < argc; i++)
		if (oeap_recording_add_file(&rec, argv[i], &err))
			goto fail;
	if (o.calibration && oeap_calibration_load(o.calibration, &rec, &cal, &err))
		goto fail;
	if (oeap_replay_run(&rec, &ro, &r, &err))
		goto fail;
	if (o.recommend)
		oeap_recommend(&r, &rec, min_kept, &rc);
	if (o.svg && write_svg(o.svg, &r, &err))
		goto fail;
	if (cli.quiet) {
		/* nothing on stdout */
	} else if (cli.json) {
		json_t *j = oeap_cli_json_head(&cli, OEAP_EXIT_OK);
		oeap_replay_json(j, &rec, &r, o.calibration ? &cal : NULL, o.recommend ? &rc : NULL);
		if (o.svg)
			json_object_set_new(j, "svg", oeap_json_str(o.svg));
		oeap_json_emit(j);
	} else if (o.csv) {
		oeap_replay_write_csv(stdout, &r, o.calibration ? &cal : NULL);
	} else {
		oeap_replay_print_text(stdout, &rec, &r, o.calibration ? &cal : NULL, o.recommend ? &rc : NULL);
	}
	goto done;
fail:
	code = oeap_cli_error(&cli, &err);
done:
	oeap_replay_free(&r);
	oeap_recording_free(&rec);
	return code;
}
