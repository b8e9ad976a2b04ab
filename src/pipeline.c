#include "pipeline.h"

#include "foreign.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pyparse.h"

const char *oeap_file_state_name(oeap_file_state s)
{
	switch (s) {
	case OEAP_STATE_CLEAN: return "not-applied";
	case OEAP_STATE_APPLIED: return "applied";
	case OEAP_STATE_STALE: return "stale";
	case OEAP_STATE_DAMAGED: return "damaged";
	}
	return "unknown";
}

void oeap_outcome_free(oeap_outcome *o)
{
	free(o->out);
	oeap_plan_free(&o->plan);
	memset(o, 0, sizeof(*o));
}

/* Is the marker at absolute offset `col` a comment node of the parsed file? */
static int marker_is_comment(const oeap_pysource *src, size_t col)
{
	if (col < src->bom)
		return 0;
	uint32_t at = (uint32_t)(col - src->bom);
	TSNode n = ts_node_descendant_for_byte_range(oeap_pysource_root(src), at, at + 1);
	return !ts_node_is_null(n) && strcmp(ts_node_type(n), "comment") == 0 && ts_node_start_byte(n) == at;
}

/* The region's start in the original bytes: minus the regions of this patch before it. */
static size_t original_offset(const oeap_regions *rs, const char *patch, const oeap_region *r)
{
	size_t shift = 0;
	for (size_t i = 0; i < rs->n && &rs->items[i] != r; i++)
		if (strcmp(rs->items[i].patch, patch) == 0)
			shift += rs->items[i].end - rs->items[i].start;
	return r->start - shift;
}

/* "line 3 of the region: expected `x`, found `y`" for the first differing line. */
static void first_difference(const char *want, size_t wn, const char *have, size_t hn, size_t skipped,
                             char *out, size_t cap)
{
	size_t i = 0, line = 1 + skipped, ls_w = 0, ls_h = 0;
	while (i < wn && i < hn && want[i] == have[i]) {
		if (want[i] == '\n') {
			line++;
			ls_w = ls_h = i + 1;
		}
		i++;
	}
	const char *w = want + ls_w, *h = have + ls_h;
	size_t wl = strcspn(w, "\r\n"), hl = 0;
	while (ls_h + hl < hn && h[hl] != '\r' && h[hl] != '\n')
		hl++;
	if (ls_w + wl > wn)
		wl = wn - ls_w;
	snprintf(out, cap, "line %zu of the region differs: expected `%.*s`, found `%.*s`", line,
	         (int)(wl > 160 ? 160 : wl), w, (int)(hl > 160 ? 160 : hl), h);
}

/* 1 when [s, s+n) is an identifier that names a variable: not a literal
 * (`1`, `'x'`) and not one of the constants None, True, False. */
static int is_name(const char *s, size_t n)
{
	if (!n || (s[0] >= '0' && s[0] <= '9'))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
		      s[i] == '_' || (unsigned char)s[i] >= 0x80))
			return 0;
	static const char *const constants[] = {"None", "True", "False"};
	for (size_t i = 0; i < sizeof(constants) / sizeof(constants[0]); i++)
		if (strlen(constants[i]) == n && memcmp(s, constants[i], n) == 0)
			return 0;
	return 1;
}

/* Lists the call-site arguments (`kw=expr,` lines) of a region body whose
 * root name is not in `names`. */
static void unbound_args(const char *body, size_t n, const oeap_names *names, char *out, size_t cap)
{
	size_t used = 0;
	out[0] = '\0';
	for (size_t i = 0; i < n;) {
		const char *l = body + i;
		const char *nl = memchr(l, '\n', n - i);
		size_t ln = nl ? (size_t)(nl - l) : n - i;
		i += ln + (nl ? 1 : 0);
		size_t k = 0;
		while (k < ln && (l[k] == ' ' || l[k] == '\t'))
			k++;
		const char *eq = memchr(l + k, '=', ln - k);
		if (!eq || eq == l + k)
			continue;
		const char *e = eq + 1, *end = l + ln;
		while (end > e && (end[-1] == '\r' || end[-1] == ',' || end[-1] == ' '))
			end--;
		size_t root = 0;
		while (e + root < end && e[root] != '.')
			root++;
		int simple = root > 0;
		for (const char *p = l + k; p < eq && simple; p++)
			simple = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_';
		if (!simple || !is_name(e, root) || oeap_names_has(names, e, root))
			continue;
		if (used + root + 4 < cap)
			used += (size_t)snprintf(out + used, cap - used, "%s%.*s", used ? ", " : "", (int)root, e);
	}
}

/*
 * What apply already knows about the original bytes when it verifies its own
 * result: the parse and the plan. Verifying the result strips our regions
 * again; when that gives exactly these bytes, the same parse and plan are
 * the answer (the pipeline is a function of the bytes), so they are reused
 * instead of computed twice.
 */
typedef struct known_original {
	const char *buf;
	size_t len;
	const oeap_pysource *src;
	const oeap_plan *plan;
} known_original;

static int verify_impl(const oeap_patchdef *def, const char *buf, size_t len, const char *what,
                       const known_original *known, oeap_report *rep);

int oeap_verify_bytes(const oeap_patchdef *def, const char *buf, size_t len, const char *what,
                      oeap_report *rep)
{
	return verify_impl(def, buf, len, what, NULL, rep);
}

/* Parses the patched bytes: incrementally from the original's tree when there
 * is one (only the inserted regions are new text), else from scratch. */
static int parse_patched(const oeap_patchdef *def, const char *buf, size_t len, const char *what,
                         const oeap_regions *rs, const oeap_pysource *orig, oeap_pysource **out, oeap_error *err)
{
	size_t at[8], n_at = 0, lens[8];
	if (orig) {
		for (size_t i = 0; i < rs->n; i++) {
			if (strcmp(rs->items[i].patch, def->name) != 0)
				continue;
			if (n_at == 8) {
				orig = NULL; /* more regions than any definition has: no shortcut */
				break;
			}
			at[n_at] = rs->items[i].start;
			lens[n_at++] = rs->items[i].end - rs->items[i].start;
		}
	}
	if (!orig)
		return oeap_pysource_parse(buf, len, what, out, err);
	return oeap_pysource_parse_inserted(orig, buf, len, at, lens, n_at, what, out, err);
}

/*
 * One verify run: what the named checks share. Each check_*() below adds
 * one named check (or one per region) to the report; -1 means memory ran
 * out, and `stop` says that the checks after it have nothing to stand on.
 */
typedef struct verify_run {
	const oeap_patchdef *def;
	const char *buf;
	size_t len;
	const char *what;
	oeap_report *rep;
	oeap_regions rs;
	int scanned;            /* the markers could be read */
	oeap_error scan_err;
	size_t ours;            /* regions of this patch */
	oeap_pysource *src;          /* the bytes as they are */
	const oeap_pysource *orig;   /* without our regions (owned by orig_own or `known`) */
	oeap_pysource *orig_own;
	oeap_error orig_err;
	const oeap_plan *plan;  /* planned on the original (own_plan or `known`) */
	oeap_plan own_plan;
	oeap_error plan_err;
	oeap_buf stripped;
	int stop;
} verify_run;

#define ADD(run, ...) (oeap_report_add((run)->rep, __VA_ARGS__) ? -1 : 0)

/* Strips our regions, parses and plans the original (or takes what apply knows). */
static int prepare_original(verify_run *v, const known_original *known)
{
	if (!v->ours)
		return 0;
	if (oeap_regions_strip(v->buf, v->len, &v->rs, v->def->name, &v->stripped))
		return -1;
	if (known && known->len == v->stripped.len && memcmp(known->buf, v->stripped.data, v->stripped.len) == 0) {
		v->orig = known->src;
		v->plan = known->plan;
	} else if (oeap_pysource_parse(v->stripped.data, v->stripped.len, v->what, &v->orig_own, &v->orig_err) == 0) {
		v->orig = v->orig_own;
		if (oeap_plan_build(v->def, v->orig, &v->own_plan, &v->plan_err) == 0)
			v->plan = &v->own_plan;
	}
	return 0;
}

static int check_parse(verify_run *v)
{
	oeap_error err;
	oeap_error_clear(&err);
	if (parse_patched(v->def, v->buf, v->len, v->what, &v->rs, v->orig, &v->src, &err))
		return ADD(v, "parse", 0, err.line, "%s", err.message);
	return ADD(v, "parse", 1, 0, "parses without ERROR or MISSING nodes");
}

/* Markers well-formed (scan), present (applied), and comment nodes. */
static int check_markers(verify_run *v)
{
	if (!v->scanned) {
		v->stop = 1;
		return ADD(v, "markers", 0, v->scan_err.line, "%s", v->scan_err.message);
	}
	if (!v->ours) {
		v->stop = 1;
		return ADD(v, "applied", 0, 0, "no %s region in %s: the patch is not applied", v->def->name, v->what);
	}
	v->rep->applied = 1;
	for (size_t i = 0; i < v->rs.n; i++)
		if (strcmp(v->rs.items[i].patch, v->def->name) == 0 && !v->rep->version)
			v->rep->version = v->rs.items[i].version;
	/* The scan already skips lines inside strings; the parse is the second
	 * opinion that what it took for markers are comments. */
	for (size_t i = 0; v->src && i < v->rs.n; i++) {
		const oeap_region *r = &v->rs.items[i];
		if (strcmp(r->patch, v->def->name) == 0 &&
		    (!marker_is_comment(v->src, r->begin_marker_col) || !marker_is_comment(v->src, r->end_marker_col)))
			return ADD(v, "markers", 0, r->begin_line, "the markers of region '%s' (lines %ld-%ld) are not comments",
			           r->name, r->begin_line, r->end_line);
	}
	return ADD(v, "markers", 1, 0, "%zu region%s, well-formed, not nested, each once", v->ours,
	           v->ours == 1 ? "" : "s");
}

static int check_version(verify_run *v)
{
	for (size_t i = 0; i < v->rs.n; i++) {
		if (strcmp(v->rs.items[i].patch, v->def->name) != 0 || v->rs.items[i].version == v->def->version)
			continue;
		if (v->rep->version > v->def->version)
			return ADD(v, "version", 0, 0,
			           "applied by %s/%d, NEWER than this definition's %s/%d: verify with the oeapatch that "
			           "applied it (apply refuses to downgrade it)",
			           v->def->name, v->rep->version, v->def->name, v->def->version);
		return ADD(v, "version", 0, 0,
		           "applied by %s/%d; this oeapatch carries %s/%d: run `oeapatch apply` to upgrade",
		           v->def->name, v->rep->version, v->def->name, v->def->version);
	}
	return ADD(v, "version", 1, 0, "%s/%d", v->def->name, v->def->version);
}

/* Every region of the definition present, none unknown. */
static int check_regions(verify_run *v)
{
	char missing[256] = "", extra[256] = "";
	size_t mu = 0, eu = 0;
	for (size_t i = 0; i < v->def->nregions; i++)
		if (!oeap_regions_find(&v->rs, v->def->name, v->def->regions[i].name) && mu < sizeof(missing) - 1)
			mu += (size_t)snprintf(missing + mu, sizeof(missing) - mu, "%s%s", mu ? ", " : "",
			                       v->def->regions[i].name);
	for (size_t i = 0; i < v->rs.n; i++)
		if (strcmp(v->rs.items[i].patch, v->def->name) == 0 && !oeap_patchdef_region(v->def, v->rs.items[i].name) &&
		    eu < sizeof(extra) - 1)
			eu += (size_t)snprintf(extra + eu, sizeof(extra) - eu, "%s%s", eu ? ", " : "", v->rs.items[i].name);
	if (mu || eu)
		return ADD(v, "regions", 0, 0, "%s%s%s%s%s", mu ? "missing: " : "", missing, mu && eu ? "; " : "",
		           eu ? "unknown: " : "", extra);
	return ADD(v, "regions", 1, 0, "every region of the definition is present once");
}

/* Each body still hashes to what its marker records. */
static int check_integrity(verify_run *v)
{
	for (size_t i = 0; i < v->rs.n; i++) {
		const oeap_region *r = &v->rs.items[i];
		char name[96];
		if (strcmp(r->patch, v->def->name) != 0)
			continue;
		snprintf(name, sizeof(name), "integrity:%s", r->name);
		int rc = oeap_region_intact(r)
		             ? ADD(v, name, 1, r->begin_line, "lines %ld-%ld, sha256:%s", r->begin_line, r->end_line, r->hash)
		             : ADD(v, name, 0, r->begin_line,
		                   "region '%s' (lines %ld-%ld) was edited: its marker records sha256:%s, the body hashes "
		                   "to sha256:%s",
		                   r->name, r->begin_line, r->end_line, r->hash, r->actual);
		if (rc)
			return -1;
	}
	return 0;
}

/* The anchors resolve on the original (our regions stripped). */
static int check_anchors(verify_run *v)
{
	if (!v->orig) {
		v->stop = 1;
		return ADD(v, "anchors", 0, v->orig_err.line, "without our regions the file does not parse: %s",
		           v->orig_err.message);
	}
	if (!v->plan) {
		v->stop = 1;
		return ADD(v, "anchors", 0, v->plan_err.line, "%s: %s", v->plan_err.where, v->plan_err.message);
	}
	char lines[256];
	size_t used = 0;
	for (size_t i = 0; i < v->plan->anchors.n && used < sizeof(lines) - 1; i++)
		used += (size_t)snprintf(lines + used, sizeof(lines) - used, "%s%s at line %ld", i ? ", " : "",
		                         v->plan->anchors.items[i].def->name, v->plan->anchors.items[i].line);
	return ADD(v, "anchors", 1, 0, "each resolves once in the original: %s", lines);
}

/* The settings the definition declares, in words: its env_prefix and "*". */
static const char *settings_words(const oeap_patchdef *def, char *out, size_t cap)
{
	if (def->env_prefix)
		snprintf(out, cap, "%s*", def->env_prefix);
	else
		snprintf(out, cap, "the settings of %s", def->name);
	return out;
}

/* Nothing outside our regions reads the definition's settings (foreign.h). */
static int check_foreign(verify_run *v)
{
	oeap_foreign f;
	char words[128], lines[160];
	settings_words(v->def, words, sizeof(words));
	if (!v->src)
		return 0;
	if (!oeap_foreign_find(v->def, v->src, &v->rs, &f))
		return ADD(v, "foreign", 1, 0, "no code outside oeapatch's regions reads %s (another OEA would route twice)",
		           words);
	oeap_foreign_lines(&f, lines, sizeof(lines));
	return ADD(v, "foreign", 0, f.lines[0],
	           "%s outside oeapatch's regions read%s %s (%s): another OEA, a hand patch, that re-routes every "
	           "batch a second time beside ours; remove it (git checkout the file, or delete that code) and apply "
	           "again",
	           lines, f.n > 1 ? "" : "s", words, f.first);
}

/* The region sits where its anchor demands it in the original. */
static int check_placement(verify_run *v, const oeap_insertion *ins, const oeap_region *r)
{
	char name[96];
	snprintf(name, sizeof(name), "placement:%s", r->name);
	size_t at = original_offset(&v->rs, v->def->name, r);
	if (at == ins->offset)
		return ADD(v, name, 1, r->begin_line, "directly after %s (anchor '%s', line %ld of the original)",
		           ins->anchor->def->describe, ins->anchor->def->name, ins->anchor->line);
	return ADD(v, name, 0, r->begin_line,
	           "region '%s' sits at line %ld, but anchor '%s' (%s) demands it directly after line %ld "
	           "of the original file; it sits after original line %ld",
	           r->name, r->begin_line, ins->anchor->def->name, ins->anchor->def->describe,
	           oeap_pysource_line_of(v->orig, ins->offset > 0 ? ins->offset - 1 : 0),
	           oeap_pysource_line_of(v->orig, at > 0 ? at - 1 : 0));
}

/* Every name the region passes is bound on every path to it, and it is reached at all. */
static int check_names(verify_run *v, const oeap_insertion *ins, const oeap_region *r)
{
	oeap_names names;
	char name[96], unbound[256];
	const oeap_resolved *scope = oeap_anchors_get(&v->plan->anchors, ins->region->scope);
	snprintf(name, sizeof(name), "names:%s", r->name);
	if (oeap_scope_names(v->orig, scope->node, ins->offset, &names))
		return -1;
	unbound_args(v->buf + r->body_start, r->body_end - r->body_start, &names, unbound, sizeof(unbound));
	int dead = names.dead;
	long dead_line = names.dead_line;
	oeap_names_free(&names);
	if (dead)
		return ADD(v, name, 0, r->begin_line,
		           "the call site is never reached: every path through the statement at line %ld of the "
		           "original returns or raises before it, so OEA would never run",
		           dead_line);
	if (unbound[0])
		return ADD(v, name, 0, r->begin_line,
		           "the call site uses names not bound on every path through %s to it (by the end of %s): %s",
		           scope->def->describe, ins->anchor->def->describe, unbound);
	return ADD(v, name, 1, r->begin_line, "%zu argument%s, each bound in %s", ins->nargs, ins->nargs == 1 ? "" : "s",
	           scope->def->describe);
}

/* The region's bytes equal what the definition renders for this file now. */
static int check_content(verify_run *v, const oeap_insertion *ins, const oeap_region *r)
{
	char name[96];
	snprintf(name, sizeof(name), "content:%s", r->name);
	const char *buf = v->buf;
	if (r->end - r->start == ins->len && memcmp(buf + r->start, ins->text, ins->len) == 0)
		return ADD(v, name, 1, r->begin_line, "equals what this definition renders here");
	/* Compare below the begin marker first: its hash differs whenever
	 * the body does, and the body line is the one worth showing. */
	char diff[400];
	const char *w = memchr(ins->text, '\n', ins->len), *h = memchr(buf + r->start, '\n', r->end - r->start);
	size_t wrest = ins->len - (size_t)(w + 1 - ins->text), hrest = r->end - (size_t)(h + 1 - buf);
	if (wrest == hrest && memcmp(w + 1, h + 1, wrest) == 0)
		first_difference(ins->text, ins->len, buf + r->start, r->end - r->start, 0, diff, sizeof(diff));
	else
		first_difference(w + 1, wrest, h + 1, hrest, 1, diff, sizeof(diff));
	return ADD(v, name, 0, r->begin_line, "differs from what this definition renders for the file now: %s", diff);
}

static int verify_impl(const oeap_patchdef *def, const char *buf, size_t len, const char *what,
                       const known_original *known, oeap_report *rep)
{
	int error = 0;
	verify_run v;
	memset(&v, 0, sizeof(v));
	memset(rep, 0, sizeof(*rep));
	rep->ok = 1;
	v.def = def;
	v.buf = buf;
	v.len = len;
	v.what = what;
	v.rep = rep;
	v.scanned = oeap_regions_scan(buf, len, &v.rs, &v.scan_err) == 0;
	v.ours = v.scanned ? oeap_regions_count(&v.rs, def->name) : 0;

	if ((error = prepare_original(&v, known)) || (error = check_parse(&v)) || (error = check_markers(&v)) ||
	    v.stop || (error = check_version(&v)) || (error = check_regions(&v)) || (error = check_integrity(&v)) ||
	    (error = check_anchors(&v)) || v.stop || (error = check_foreign(&v)))
		goto done;
	for (size_t i = 0; i < v.plan->n; i++) {
		const oeap_insertion *ins = &v.plan->items[i];
		const oeap_region *r = oeap_regions_find(&v.rs, def->name, ins->region->name);
		if (!r)
			continue;
		if ((error = check_placement(&v, ins, r)) || (ins->region->nargs && (error = check_names(&v, ins, r))) ||
		    (error = check_content(&v, ins, r)))
			goto done;
	}
done:
	oeap_plan_free(&v.own_plan);
	oeap_pysource_free(v.orig_own);
	oeap_pysource_free(v.src);
	oeap_buf_free(&v.stripped);
	oeap_regions_free(&v.rs);
	return error;
}
#undef ADD

/* The first failing check of a report, for error messages. */
static const oeap_check *first_failure(const oeap_report *rep)
{
	for (size_t i = 0; i < rep->n; i++)
		if (!rep->checks[i].ok)
			return &rep->checks[i];
	return NULL;
}

static char *dup_bytes(const char *buf, size_t len)
{
	char *p = malloc(len + 1);
	if (p) {
		memcpy(p, buf, len);
		p[len] = '\0';
	}
	return p;
}

/* oeap_regions_scan, with the file named in the error's "where". */
static int scan_regions(const char *buf, size_t len, const char *what, oeap_regions *rs, oeap_error *err)
{
	if (oeap_regions_scan(buf, len, rs, err) == 0)
		return 0;
	if (err) {
		/* "topk.py: region markers"; a long name is cut, the message says the rest */
		char where[sizeof(err->where) * 2 + 4];
		snprintf(where, sizeof(where), "%s: %s", what, err->where);
		snprintf(err->where, sizeof(err->where), "%.*s", (int)sizeof(err->where) - 1, where);
	}
	return -1;
}

/* Refuses when a region of the patch was edited by hand. */
static int refuse_damaged(const oeap_patchdef *def, const oeap_regions *rs, const char *what,
                          const char *hint, oeap_error *err)
{
	for (size_t i = 0; i < rs->n; i++) {
		const oeap_region *r = &rs->items[i];
		if (strcmp(r->patch, def->name) == 0 && !oeap_region_intact(r)) {
			char where[160];
			snprintf(where, sizeof(where), "%s: region '%s'", what, r->name);
			return oeap_fail(err, OEAP_ERR_REGION, where, r->begin_line,
			                 "edited by hand (lines %ld-%ld; marker records sha256:%s, body hashes to sha256:%s): "
			                 "refusing to touch it; %s",
			                 r->begin_line, r->end_line, r->hash, r->actual, hint);
		}
	}
	return 0;
}

int oeap_apply_bytes(const oeap_patchdef *def, const char *buf, size_t len, const char *what,
                     oeap_outcome *o, oeap_error *err)
{
	return oeap_apply_bytes_flags(def, buf, len, what, 0, o, err);
}

int oeap_apply_bytes_flags(const oeap_patchdef *def, const char *buf, size_t len, const char *what,
                           unsigned flags, oeap_outcome *o, oeap_error *err)
{
	return oeap_apply_bytes_parsed(def, buf, len, what, flags, NULL, o, err);
}

int oeap_apply_bytes_parsed(const oeap_patchdef *def, const char *buf, size_t len, const char *what,
                            unsigned flags, const oeap_pysource *parsed, oeap_outcome *o, oeap_error *err)
{
	int error = 0;
	oeap_regions rs = {0};
	oeap_report rep;
	oeap_buf stripped = OEAP_BUF_INIT, out = OEAP_BUF_INIT;
	oeap_pysource *own = NULL;
	const oeap_pysource *src = NULL;
	const char *base = buf;
	size_t blen = len;

	memset(o, 0, sizeof(*o));
	memset(&rep, 0, sizeof(rep));
	if ((error = oeap_pysource_check_size(len, what, err)) || (error = scan_regions(buf, len, what, &rs, err)))
		goto done;
	if (oeap_regions_count(&rs, def->name)) {
		if ((error = oeap_verify_bytes(def, buf, len, what, &rep))) {
			oeap_fail(err, OEAP_ERR_INTERNAL, what, 0, "out of memory");
			goto done;
		}
		if (rep.ok) {
			o->before = OEAP_STATE_APPLIED;
			if (!(o->out = dup_bytes(buf, len))) {
				error = oeap_fail(err, OEAP_ERR_INTERNAL, what, 0, "out of memory");
				goto done;
			}
			o->out_len = len;
			goto done;
		}
		if ((error = refuse_damaged(def, &rs, what,
		                            "restore it, or drop it with `oeapatch revert --force` and apply again", err)))
			goto done;
		/* Intact regions: taking them out gives the exact original, so
		 * re-planning on that is as safe as a first apply. An older version
		 * is upgraded; drift under the current version (upstream moved the
		 * code around our regions) is the user's call: verify names it, and
		 * --refresh moves the regions. */
		/* An older definition would replace a newer patch with itself: a
		 * downgrade that "run apply to upgrade" hid. The user's call. */
		if (rep.version > def->version && !(flags & OEAP_APPLY_DOWNGRADE)) {
			error = oeap_fail(err, OEAP_ERR_REGION, what, 0,
			                  "carries %s/%d, newer than this definition's %s/%d: refusing to replace it with an "
			                  "older version; use the oeapatch (or --patch) that applied it, or `oeapatch apply "
			                  "--downgrade` to go back to version %d",
			                  def->name, rep.version, def->name, def->version, def->version);
			goto done;
		}
		const oeap_check *fc = first_failure(&rep);
		if (!strcmp(fc->name, "foreign")) {
			error = oeap_fail(err, OEAP_ERR_INPUT, what, fc->line, "%s; refusing, nothing written", fc->detail);
			goto done;
		}
		if (rep.version == def->version && !(flags & OEAP_APPLY_REFRESH)) {
			const oeap_check *c = fc;
			error = oeap_fail(err, OEAP_ERR_REGION, what, c->line,
			                  "applied, but it no longer holds (%s: %s): refusing to move it silently; "
			                  "`oeapatch apply --refresh` re-applies it at its anchors, `oeapatch revert` "
			                  "removes it",
			                  c->name, c->detail);
			goto done;
		}
		o->before = OEAP_STATE_STALE;
		o->from_version = rep.version;
		if (oeap_regions_strip(buf, len, &rs, def->name, &stripped)) {
			error = oeap_fail(err, OEAP_ERR_INTERNAL, what, 0, "out of memory");
			goto done;
		}
		base = stripped.data;
		blen = stripped.len;
	}
	/* The caller's parse is of `buf`: it stands for the parse of `base` only
	 * when no region was stripped (the pipeline is a function of the bytes). */
	if (parsed && base == buf && parsed->buf == buf && parsed->len == len)
		src = parsed;
	else if ((error = oeap_pysource_parse(base, blen, what, &own, err)))
		goto done;
	else
		src = own;
	/* Another OEA in the file (a hand patch): both would route. */
	oeap_foreign f;
	if (oeap_foreign_find(def, src, NULL, &f)) {
		char words[128], lines[160];
		oeap_foreign_lines(&f, lines, sizeof(lines));
		error = oeap_fail(err, OEAP_ERR_INPUT, what, f.lines[0],
		                  "%s%s read%s %s (%s): another OEA, a hand patch, is in this file, and with ours every "
		                  "batch would be routed twice; refusing, nothing written. Remove it (git checkout the "
		                  "file, or delete that code), then apply",
		                  lines, base == buf ? "" : " of the file without our regions", f.n > 1 ? "" : "s",
		                  settings_words(def, words, sizeof(words)), f.first);
		goto done;
	}
	if ((error = oeap_plan_build(def, src, &o->plan, err)))
		goto done;
	if (oeap_plan_apply(base, blen, &o->plan, &out)) {
		error = oeap_fail(err, OEAP_ERR_INTERNAL, what, 0, "out of memory");
		goto done;
	}
	/* What apply writes, every later command must be able to read
	 * (checked before the result is parsed: no work past the limit). */
	if ((error = oeap_pysource_check_size(out.len, what, NULL))) {
		oeap_fail(err, OEAP_ERR_INPUT, what, 0,
		          "the patched result would be %zu bytes (the input is %zu), over oeapatch's limit of %zu "
		          "bytes for a Python source file: refusing to write a file that could not be read back",
		          out.len, blen, OEAP_PYSOURCE_MAX_BYTES);
		goto done;
	}
	/* Read the result back with verify's own checks before anyone writes it
	 * (the parse and plan of the original are the ones just made). */
	oeap_report_free(&rep);
	known_original known = {base, blen, src, &o->plan};
	if (verify_impl(def, out.data, out.len, what, &known, &rep)) {
		error = oeap_fail(err, OEAP_ERR_INTERNAL, what, 0, "out of memory");
		goto done;
	}
	if (!rep.ok) {
		const oeap_check *c = first_failure(&rep);
		error = oeap_fail(err, OEAP_ERR_INTERNAL, what, c->line,
		                  "refusing to write: the patched result does not verify (%s: %s)", c->name, c->detail);
		goto done;
	}
	o->changed = 1;
	o->out = oeap_buf_detach(&out, &o->out_len);
done:
	if (error) {
		oeap_plan_free(&o->plan);
		free(o->out);
		o->out = NULL;
	}
	oeap_pysource_free(own);
	oeap_report_free(&rep);
	oeap_buf_free(&stripped);
	oeap_buf_free(&out);
	oeap_regions_free(&rs);
	return error;
}

int oeap_revert_bytes(const oeap_patchdef *def, const char *buf, size_t len, const char *what,
                      int force, oeap_outcome *o, oeap_error *err)
{
	int error = 0;
	oeap_regions rs = {0};
	oeap_buf out = OEAP_BUF_INIT;
	memset(o, 0, sizeof(*o));
	if ((error = oeap_pysource_check_size(len, what, err)) || (error = scan_regions(buf, len, what, &rs, err)))
		goto done;
	if (!oeap_regions_count(&rs, def->name)) {
		o->before = OEAP_STATE_CLEAN;
		if (!(o->out = dup_bytes(buf, len)))
			error = oeap_fail(err, OEAP_ERR_INTERNAL, what, 0, "out of memory");
		o->out_len = len;
		goto done;
	}
	o->before = OEAP_STATE_APPLIED;
	for (size_t i = 0; i < rs.n; i++)
		if (strcmp(rs.items[i].patch, def->name) == 0 && !oeap_region_intact(&rs.items[i]))
			o->before = OEAP_STATE_DAMAGED;
	if (!force && (error = refuse_damaged(def, &rs, what,
	                                      "restore it, or pass --force to remove the region with the edits in it",
	                                      err)))
		goto done;
	if (oeap_regions_strip(buf, len, &rs, def->name, &out)) {
		error = oeap_fail(err, OEAP_ERR_INTERNAL, what, 0, "out of memory");
		goto done;
	}
	o->changed = 1;
	o->out = oeap_buf_detach(&out, &o->out_len);
done:
	oeap_buf_free(&out);
	oeap_regions_free(&rs);
	return error;
}
