/*
 * replay_report.c - the table, JSON and CSV of `oeapatch replay`
 * (replay_report.h); the chart is replay_svg.c.
 */
#include "replay_report.h"

#include <inttypes.h>
#include <string.h>

#include "report.h"

static void cell_figures(const oeap_replay *r, const oeap_calibration *cal, const oeap_replay_cell *c,
                         oeap_replay_figures *f)
{
	const oea_totals *t = &c->tot;
	memset(f, 0, sizeof(*f));
	f->batches = t->calls;
	f->gated = t->gated;
	uint64_t routed = t->calls - t->gated;
	f->t_before = routed ? (double)t->t_before / (double)routed : 0;
	f->t_after = routed ? (double)t->t_after / (double)routed : 0;
	f->ratio = t->t_before ? (double)t->t_after / (double)t->t_before : 1.0;
	f->cut = 1.0 - f->ratio;
	f->kept_mean = oeap_kept_mean(t);
	f->kept_p5 = oeap_kept_quantile(t, 0.05);
	f->changed = t->rerouted_rows ? (double)t->changed_slots / (double)t->rerouted_rows : 0;
	f->rows = routed ? (double)(t->valid_rows + t->invalid_rows) / (double)routed : 0;
	if (cal) {
		f->us_before = oeap_calibration_us(cal, f->t_before, f->rows);
		f->us_after = oeap_calibration_us(cal, f->t_after, f->rows);
	}
	if (r->ep && t->calls) {
		f->ep_before = (double)c->ep_before / (double)t->calls;
		f->ep_after = (double)c->ep_after / (double)t->calls;
	}
}

void oeap_replay_figures_of(const oeap_replay *r, const oeap_calibration *cal, size_t mode, size_t k,
                            oeap_replay_figures *f)
{
	cell_figures(r, cal, oeap_replay_at(r, mode, k), f);
}

/* The K0 value of --bands, as given back ("1-7:0,8-:3"). */
static void bands_text(const oeap_k0_bands *b, char *buf, size_t len)
{
	size_t at = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < b->n && at < len; i++) {
		if (b->n == 1 && !b->band[i].hi) {
			snprintf(buf, len, "%d", b->band[i].k0);
			return;
		}
		char hi[16] = "";
		if (b->band[i].hi)
			snprintf(hi, sizeof(hi), "%d", b->band[i].hi);
		at += (size_t)snprintf(buf + at, len - at, "%s%d-%s:%d", i ? "," : "", b->band[i].lo, hi, b->band[i].k0);
	}
}

static void print_row(FILE *f, const oeap_replay *r, const oeap_calibration *cal, const char *name,
                      const char *k0, const oeap_replay_figures *g);

const char *oeap_replay_mode_name(const oeap_replay *r, size_t mode, char *buf, size_t len)
{
	if (r->mode[mode] == 0)
		return "recorded";
	snprintf(buf, len, "%d", r->mode[mode]);
	return buf;
}

const char *oeap_replay_prefix(const oeap_recording *rec)
{
	return rec->nfiles ? rec->files[0].prefix : "";
}

static void print_kept(FILE *f, double v)
{
	if (v < 0)
		fprintf(f, " %9s", "-");
	else
		fprintf(f, " %9.3f", v);
}

void oeap_replay_print_text(FILE *f, const oeap_recording *rec, const oeap_replay *r, const oeap_calibration *cal,
                            const oeap_recommendation *rc)
{
	fprintf(f, "recording: %zu file%s, %zu calls of %zu layer%s, %" PRIu64 " rows\n", rec->nfiles,
	        rec->nfiles == 1 ? "" : "s", rec->ncalls, rec->nlayers, rec->nlayers == 1 ? "" : "s", rec->rows);
	for (size_t i = 0; i < rec->nfiles; i++) {
		const oeap_rec_file *fl = &rec->files[i];
		fprintf(f, "  %s: %s rank %ld, %zu chunk%s, %zu calls", fl->path, *fl->framework ? fl->framework : "?",
		        fl->rank, fl->chunks, fl->chunks == 1 ? "" : "s", fl->calls);
		if (fl->dropped)
			fprintf(f, ", %" PRIu64 " dropped by the recorder (queue full or cap)", fl->dropped);
		if (fl->graph_missed)
			fprintf(f, ", %" PRIu64 " inside CUDA graphs (not recorded)", fl->graph_missed);
		fputc('\n', f);
		if (fl->cut_bytes)
			fprintf(f, "  %s: the last %" PRIu64 " bytes are an incomplete chunk (%s), ignored: the "
			           "recording was cut (a crash, a kill or a full disk)\n",
			        fl->path, fl->cut_bytes, fl->cut_reason);
	}
	if (cal)
		fprintf(f, "MoE-layer time estimated by %s (%s on %s%s): t = %.4g us * T + %.4g us * rows * %d, fit error "
		           "%.1f%% RMS, %.1f%% worst\n\n",
		        cal->path, cal->model, cal->device, cal->smoke ? ", a SMOKE fit: its figures mean nothing" : "",
		        cal->b_us, cal->a_us, cal->top_k, 100 * cal->rms_rel_error, 100 * cal->max_rel_error);
	else
		fprintf(f, "T is the distinct experts per batch (what a memory-bound decode step pays for); no "
		           "--calibration given, so no time estimate.\n\n");
	fprintf(f, "%-9s %3s %9s %9s %7s %9s %9s %9s", "batch", "k0", "T before", "T after", "cut", "kept mean",
	        "kept p5", "changed");
	if (cal)
		fprintf(f, "  MoE us before -> after (saved)");
	if (r->ep)
		fprintf(f, "  EP%d busiest before -> after", r->ep);
	fputc('\n', f);
	for (size_t m = 0; m < r->nmodes; m++) {
		char nb[16];
		const char *name = oeap_replay_mode_name(r, m, nb, sizeof(nb));
		for (size_t k = 0; k < r->nk0; k++) {
			oeap_replay_figures g;
			oeap_replay_figures_of(r, cal, m, k, &g);
			char k0[16];
			snprintf(k0, sizeof(k0), "%d", r->k0[k]);
			print_row(f, r, cal, k ? "" : name, k0, &g);
		}
		if (m == 0 && r->has_bands) {
			oeap_replay_figures g;
			cell_figures(r, cal, &r->bands_cell, &g);
			print_row(f, r, cal, "", "K0*", &g);
		}
	}
	if (r->has_bands) {
		char b[256];
		bands_text(&r->bands, b, sizeof(b));
		fprintf(f,
		        "\nK0*: the recorded calls with k0 by their rows from --bands %s (off: routed unchanged, yet counted\n"
		        "     in this row's calls and T sums, which a server's statistics leave out: compare on bands that are on)\n",
		        b);
	}
	fprintf(f, "\ncut = 1 - T after / T before (sums); kept: the share of a re-routed row's routing weight its new "
	           "experts carry (p5: 5%% of rows keep less); changed: routed slots changed per re-routed row.\n");
	int any_left = 0;
	for (size_t m = 1; m < r->nmodes; m++)
		any_left |= r->left_over[m] != 0;
	if (any_left) {
		fprintf(f, "rows left over (too few to fill a last batch of their layer, not replayed):");
		for (size_t m = 1; m < r->nmodes; m++)
			if (r->left_over[m])
				fprintf(f, " %d: %" PRIu64, r->mode[m], r->left_over[m]);
		fputc('\n', f);
	}
	fprintf(f, "replayed %" PRIu64 " rows in %.2f s (%.0f rows/s; liboea's CPU reference alone: %.2f s, %.0f rows/s)\n",
	        r->routed_rows, r->seconds, r->seconds > 0 ? (double)r->routed_rows / r->seconds : 0.0, r->ref_seconds,
	        r->ref_seconds > 0 ? (double)r->routed_rows / r->ref_seconds : 0.0);
	if (!rc)
		return;
	fprintf(f, "\nrecommendation (smallest k0 whose p5 kept is at least %.3f; 0 = off):\n", rc->min_kept);
	for (size_t i = 0; i < rc->nbands; i++) {
		const oeap_band *b = &rc->bands[i];
		char range[32];
		if (b->hi)
			snprintf(range, sizeof(range), "%d-%d", b->lo, b->hi);
		else
			snprintf(range, sizeof(range), "%d and more", b->lo);
		if (b->k0)
			fprintf(f, "  batch %-12s k0=%d  T cut %.1f%%..%.1f%%, p5 kept >= %.3f\n", range, b->k0, 100 * b->cut_min,
			        100 * b->cut_max, b->p5_min);
		else
			fprintf(f, "  batch %-12s off    no k0 keeps the floor\n", range);
	}
	fprintf(f, "settings: %sK0=%s\n", oeap_replay_prefix(rec), rc->value);
	if (rc->nbands > 1 && rc->single_k0)
		fprintf(f, "one k0 (for a K0 that takes a single number): %sK0=%d %sMIN_BATCH=%d, the band that holds "
		           "the most recorded rows\n",
		        oeap_replay_prefix(rec), rc->single_k0, oeap_replay_prefix(rec), rc->single_min_batch);
}

static void print_row(FILE *f, const oeap_replay *r, const oeap_calibration *cal, const char *name,
                      const char *k0, const oeap_replay_figures *g)
{
	fprintf(f, "%-9s %3s %9.2f %9.2f %6.1f%%", name, k0, g->t_before, g->t_after, 100 * g->cut);
	print_kept(f, g->kept_mean);
	print_kept(f, g->kept_p5);
	fprintf(f, " %9.2f", g->changed);
	if (cal)
		fprintf(f, "  %8.1f -> %8.1f (%5.1f%%)", g->us_before, g->us_after,
		        g->us_before > 0 ? 100 * (g->us_before - g->us_after) / g->us_before : 0.0);
	if (r->ep)
		fprintf(f, "  %8.2f -> %.2f", g->ep_before, g->ep_after);
	fputc('\n', f);
}

static json_t *num_or_null(double v)
{
	return v < 0 ? json_null() : json_real(v);
}

/* One cell's JSON: its figures and liboea's sums. Takes `batch` and `k0`. */
static json_t *cell_json(const oeap_replay *r, const oeap_calibration *cal, const oeap_replay_cell *c, json_t *batch,
                         json_t *k0)
{
	const oea_totals *t = &c->tot;
	oeap_replay_figures g;
	cell_figures(r, cal, c, &g);
	json_t *row = json_object();
	json_object_set_new(row, "batch", batch);
	json_object_set_new(row, "k0", k0);
	json_object_set_new(row, "batches", json_integer((json_int_t)g.batches));
	json_object_set_new(row, "gated", json_integer((json_int_t)g.gated));
	json_object_set_new(row, "t_before_mean", json_real(g.t_before));
	json_object_set_new(row, "t_after_mean", json_real(g.t_after));
	json_object_set_new(row, "t_cut", json_real(g.cut));
	json_object_set_new(row, "kept_mean", num_or_null(g.kept_mean));
	json_object_set_new(row, "kept_p5", num_or_null(g.kept_p5));
	json_object_set_new(row, "changed_per_rerouted_row", json_real(g.changed));
	json_object_set_new(row, "rows_mean", json_real(g.rows));
	if (cal) {
		json_object_set_new(row, "moe_us_before", json_real(g.us_before));
		json_object_set_new(row, "moe_us_after", json_real(g.us_after));
		json_object_set_new(row, "moe_us_saved", json_real(g.us_before - g.us_after));
	}
	if (r->ep) {
		json_object_set_new(row, "ep_busiest_before", json_real(g.ep_before));
		json_object_set_new(row, "ep_busiest_after", json_real(g.ep_after));
	}
	/* liboea's sums, as the live server's totals hold them (the exactness check compares these) */
	json_object_set_new(row, "totals",
	                    json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "calls", (json_int_t)t->calls,
	                              "gated", (json_int_t)t->gated, "t_before", (json_int_t)t->t_before,
	                              "t_after", (json_int_t)t->t_after, "valid_rows", (json_int_t)t->valid_rows,
	                              "rerouted_rows", (json_int_t)t->rerouted_rows, "changed_slots",
	                              (json_int_t)t->changed_slots, "kept_fx", (json_int_t)t->kept_fx,
	                              "kept_undefined", (json_int_t)t->kept_undefined));
	return row;
}

void oeap_replay_json(json_t *j, const oeap_recording *rec, const oeap_replay *r, const oeap_calibration *cal,
                      const oeap_recommendation *rc)
{
	json_t *files = json_array();
	for (size_t i = 0; i < rec->nfiles; i++) {
		const oeap_rec_file *fl = &rec->files[i];
		json_array_append_new(
			files, json_pack("{s:o,s:o,s:I,s:I,s:I,s:I,s:I,s:I,s:o}", "path", oeap_json_str(fl->path), "framework",
		                     oeap_json_str(fl->framework), "rank", (json_int_t)fl->rank, "chunks", (json_int_t)fl->chunks, "calls",
		                     (json_int_t)fl->calls, "dropped", (json_int_t)fl->dropped, "graph_missed",
		                     (json_int_t)fl->graph_missed, "cut_bytes", (json_int_t)fl->cut_bytes, "cut_reason",
		                     fl->cut_bytes ? oeap_json_str(fl->cut_reason) : json_null()));
	}
	json_object_set_new(j, "files", files);
	json_object_set_new(j, "calls", json_integer((json_int_t)rec->ncalls));
	json_object_set_new(j, "layers", json_integer((json_int_t)rec->nlayers));
	json_object_set_new(j, "rows", json_integer((json_int_t)rec->rows));
	json_object_set_new(j, "routed_top_k", json_integer(r->max_routed));
	json_object_set_new(j, "calibration",
	                    cal ? json_pack("{s:o,s:o,s:o,s:i,s:i,s:f,s:f,s:f,s:f,s:b}", "file", oeap_json_str(cal->path),
	                                    "model", oeap_json_str(cal->model), "device", oeap_json_str(cal->device),
	                                    "experts", cal->experts, "top_k", cal->top_k, "a_us", cal->a_us, "b_us",
	                                    cal->b_us, "rms_rel_error", cal->rms_rel_error, "max_rel_error",
	                                    cal->max_rel_error, "smoke", cal->smoke)
	                        : json_null());
	json_t *results = json_array();
	for (size_t m = 0; m < r->nmodes; m++)
		for (size_t k = 0; k < r->nk0; k++)
			json_array_append_new(results, cell_json(r, cal, oeap_replay_at(r, m, k),
			                                         r->mode[m] ? json_integer(r->mode[m]) : json_string("recorded"),
			                                         json_integer(r->k0[k])));
	if (r->has_bands) {
		char b[256];
		bands_text(&r->bands, b, sizeof(b));
		json_object_set_new(j, "bands", cell_json(r, cal, &r->bands_cell, json_string("recorded"), oeap_json_str(b)));
	}
	json_object_set_new(j, "results", results);
	json_t *left = json_object();
	for (size_t m = 1; m < r->nmodes; m++) {
		char nb[16];
		json_object_set_new(left, oeap_replay_mode_name(r, m, nb, sizeof(nb)),
		                    json_integer((json_int_t)r->left_over[m]));
	}
	json_object_set_new(j, "left_over_rows", left);
	json_object_set_new(j, "speed",
	                    json_pack("{s:I,s:f,s:f,s:f,s:f}", "routed_rows", (json_int_t)r->routed_rows, "seconds",
	                              r->seconds, "rows_per_second",
	                              r->seconds > 0 ? (double)r->routed_rows / r->seconds : 0.0, "reference_seconds",
	                              r->ref_seconds, "reference_rows_per_second",
	                              r->ref_seconds > 0 ? (double)r->routed_rows / r->ref_seconds : 0.0));
	if (!rc)
		return;
	json_t *bands = json_array();
	for (size_t i = 0; i < rc->nbands; i++) {
		const oeap_band *b = &rc->bands[i];
		json_array_append_new(bands, json_pack("{s:i,s:o,s:i,s:f,s:f,s:o}", "from", b->lo, "to",
		                                       b->hi ? json_integer(b->hi) : json_null(), "k0", b->k0, "t_cut_min",
		                                       b->cut_min, "t_cut_max", b->cut_max, "kept_p5_min",
		                                       num_or_null(b->p5_min)));
	}
	char line[600];
	snprintf(line, sizeof(line), "%sK0=%s", oeap_replay_prefix(rec), rc->value);
	json_t *one = json_null();
	if (rc->single_k0) {
		char single[600];
		snprintf(single, sizeof(single), "%sK0=%d %sMIN_BATCH=%d", oeap_replay_prefix(rec), rc->single_k0,
		         oeap_replay_prefix(rec), rc->single_min_batch);
		one = oeap_json_str(single);
	}
	json_object_set_new(j, "recommendation", json_pack("{s:f,s:o,s:s,s:o,s:o}", "min_kept", rc->min_kept, "bands",
	                                                   bands, "k0", rc->value, "settings", oeap_json_str(line),
	                                                   "single_k0_settings", one));
}

/* One CSV line; `k0` is quoted when it holds a comma (bands). */
static void csv_row(FILE *f, const oeap_replay *r, const oeap_calibration *cal, const char *batch, const char *k0,
                    const oeap_replay_figures *g)
{
	fprintf(f, strchr(k0, ',') ? "%s,\"%s\",%" PRIu64 ",%" PRIu64 ",%.6f,%.6f,%.6f," : "%s,%s,%" PRIu64 ",%" PRIu64 ",%.6f,%.6f,%.6f,",
	        batch, k0, g->batches, g->gated, g->t_before, g->t_after, g->cut);
	if (g->kept_mean >= 0)
		fprintf(f, "%.6f,%.6f", g->kept_mean, g->kept_p5);
	else
		fputc(',', f);
	fprintf(f, ",%.6f", g->changed);
	if (cal)
		fprintf(f, ",%.3f,%.3f", g->us_before, g->us_after);
	if (r->ep)
		fprintf(f, ",%.6f,%.6f", g->ep_before, g->ep_after);
	fputc('\n', f);
}

int oeap_replay_write_csv(FILE *f, const oeap_replay *r, const oeap_calibration *cal)
{
	fprintf(f, "batch,k0,batches,gated,t_before_mean,t_after_mean,t_cut,kept_mean,kept_p5,changed_per_rerouted_row%s%s\n",
	        cal ? ",moe_us_before,moe_us_after" : "", r->ep ? ",ep_busiest_before,ep_busiest_after" : "");
	for (size_t m = 0; m < r->nmodes; m++) {
		for (size_t k = 0; k < r->nk0; k++) {
			char nb[16], k0[16];
			oeap_replay_figures g;
			oeap_replay_figures_of(r, cal, m, k, &g);
			snprintf(k0, sizeof(k0), "%d", r->k0[k]);
			csv_row(f, r, cal, oeap_replay_mode_name(r, m, nb, sizeof(nb)), k0, &g);
		}
		if (m == 0 && r->has_bands) {
			char b[256];
			oeap_replay_figures g;
			cell_figures(r, cal, &r->bands_cell, &g);
			bands_text(&r->bands, b, sizeof(b));
			csv_row(f, r, cal, "recorded", b, &g); /* the value is quoted: it holds commas */
		}
	}
	return ferror(f) ? -1 : 0;
}
