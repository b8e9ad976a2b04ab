/*
 * oeapatch check: will the patch land on these revisions? Each revision's
 * target blob is read straight from the object database and the patch is
 * dry-run on it in memory (apply, which resolves every anchor and verifies
 * its own result). No checkout, no work tree: bare repositories and mirrors
 * work the same. Revisions that share a blob are checked once.
 * compute fills a check_result; print_json and print_text only print it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "cmd.h"
#include "command.h"
#include "fsio.h"
#include "history.h"
#include "opt.h"
#include "pipeline.h"
#include "quote.h"
#include "revcheck.h"

typedef struct check_opts {
	const char *junit;
	const char *bad_max; /* a -n that is no positive number: reported after the parse, as JSON with --json */
	size_t max;
	int allow_empty;
	int skip_binding;
	int all;
	/* The operands (REV, A..B ...): argv[first] to argv[argc - 1]. */
	int argc, first;
	char **argv;
} check_opts;

/* A range argument that selected nothing: a check that checked nothing is a
 * failure (a green run must mean something was checked), unless asked for
 * with --allow-empty, and then it is reported as skipped, never as passed. */
typedef struct empty_range {
	const char *spec;
	char why[512];
} empty_range;

/* -n N: a positive number, else kept to be reported after the parse (as JSON with --json). */
static int on_max_count(const char *arg, void *user)
{
	check_opts *o = user;
	char *end = NULL;
	errno = 0;
	long n = strtol(arg, &end, 10);
	if (errno || !end || *end || n < 1)
		o->bad_max = arg;
	else
		o->max = (size_t)n;
	return 0;
}

static const oeap_option options[] = {
	OEAP_COMMON_OPTIONS,
	OEAP_OPT_VALUE("junit", 0, "FILE", check_opts, junit, "also write the results as JUnit XML to FILE (for CI)"),
	OEAP_OPT_CALLBACK("max-count", 'n', "N", on_max_count,
	                  "a range walk stops after the N newest revisions that touched the file"),
	OEAP_OPT_SWITCH("allow-empty", 0, check_opts, allow_empty,
	                "a range that selects no revision is reported as skipped instead of failing the run"),
	OEAP_OPT_SWITCH("all", 0, check_opts, all,
	                "without REV arguments: walk the whole history, also before the definition's first supported revision"),
	OEAP_OPT_SWITCH("skip-binding", 0, check_opts, skip_binding,
	                "a revision that carries the patch need not carry the binding module (every deploy runs `oeapatch apply`)"),
	OEAP_OPT_END,
};

static int failed(const oeap_check_result *r)
{
	return r->land != OEAP_LAND_LANDS && r->land != OEAP_LAND_APPLIED;
}

/* At most `max` bytes of `s`, not cutting a UTF-8 sequence. */
static int clip(const char *s, int max)
{
	int n = (int)strlen(s);
	if (n <= max)
		return n;
	n = max;
	while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
		n--;
	return n;
}

/* The detail after the verdict: why it fails, or what is special about it. */
static void describe(const oeap_patchdef *def, const oeap_rev *r, const oeap_check_result *res, char *out,
                     size_t cap)
{
	switch (res->land) {
	case OEAP_LAND_LANDS:
		if (res->before == OEAP_STATE_STALE)
			snprintf(out, cap, "carries an older version or moved regions: apply would refresh them");
		else
			snprintf(out, cap, "every anchor resolves once, the result verifies");
		break;
	case OEAP_LAND_APPLIED:
		snprintf(out, cap, "already carries %s/%d, and it verifies", def->name, def->version);
		break;
	case OEAP_LAND_FAILS:
		/* A path in `where` may be long: half the line at most, the reason after it. */
		{
			int n = res->err.line ? snprintf(out, cap, "%.*s: line %ld: ", (int)(cap / 2), res->err.where,
			                                 res->err.line)
			                      : snprintf(out, cap, "%.*s: ", (int)(cap / 2), res->err.where);
			if (n > 0 && (size_t)n < cap)
				snprintf(out + n, cap - (size_t)n, "%s", res->err.message);
		}
		break;
	case OEAP_LAND_MISSING:
		snprintf(out, cap, "no %s at %s", r->path, r->short_id);
		break;
	case OEAP_LAND_DELETED:
		snprintf(out, cap, "this commit deletes %s", r->path);
		break;
	}
}

/* `s` as XML text or attribute value. What XML 1.0 cannot carry (bytes
 * that are not UTF-8, most control characters) makes the whole string go
 * in its quoted form, the rule --json follows too (quote.h): a commit
 * subject in Latin-1 must neither break the report nor lose its bytes. */
static int xml_escape(oeap_buf *b, const char *s)
{
	int rc = 0;
	char *q = NULL;
	if (oeap_quote_needed(s, strlen(s), OEAP_QUOTE_XML) && !(s = q = oeap_quote(s, strlen(s))))
		return -1;
	for (; *s && !rc; s++) {
		unsigned char c = (unsigned char)*s;
		switch (c) {
		case '&': rc = oeap_buf_puts(b, "&amp;"); break;
		case '<': rc = oeap_buf_puts(b, "&lt;"); break;
		case '>': rc = oeap_buf_puts(b, "&gt;"); break;
		case '"': rc = oeap_buf_puts(b, "&quot;"); break;
		case '\'': rc = oeap_buf_puts(b, "&apos;"); break;
		/* As references: a parser turns literal ones in an attribute into spaces. */
		case '\t': rc = oeap_buf_puts(b, "&#9;"); break;
		case '\n': rc = oeap_buf_puts(b, "&#10;"); break;
		case '\r': rc = oeap_buf_puts(b, "&#13;"); break;
		default: rc = oeap_buf_put(b, s, 1);
		}
	}
	free(q);
	return rc;
}

static int write_junit(const char *file, const oeap_patchdef *def, const oeap_revs *revs,
                       const oeap_check_result *res, size_t nfailed, const empty_range *empty, size_t nempty,
                       int allow_empty, double total, oeap_error *err)
{
	oeap_buf b = OEAP_BUF_INIT;
	char detail[1024], ts[32];
	time_t now = time(NULL);
	struct tm tm;
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", gmtime_r(&now, &tm));
	int rc = oeap_buf_printf(&b,
	                         "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	                         "<testsuite name=\"oeapatch check\" tests=\"%zu\" failures=\"%zu\" errors=\"0\" "
	                         "skipped=\"%zu\" time=\"%.3f\" timestamp=\"%s\">\n"
	                         "  <properties>\n"
	                         "    <property name=\"patch\" value=\"",
	                         revs->n + nempty, nfailed + (allow_empty ? 0 : nempty), allow_empty ? nempty : 0,
	                         total, ts);
	rc |= xml_escape(&b, def->name);
	rc |= oeap_buf_printf(&b, "/%d\"/>\n    <property name=\"file\" value=\"", def->version);
	rc |= xml_escape(&b, def->target);
	rc |= oeap_buf_puts(&b, "\"/>\n  </properties>\n");
	for (size_t i = 0; i < revs->n && !rc; i++) {
		const oeap_rev *r = &revs->items[i];
		char full[GIT_OID_HEXSZ + 1];
		git_oid_tostr(full, sizeof(full), &r->commit);
		rc |= oeap_buf_puts(&b, "  <testcase classname=\"oeapatch.check.");
		rc |= xml_escape(&b, def->name);
		rc |= oeap_buf_printf(&b, "\" name=\"%s %s ", r->short_id, r->date);
		rc |= xml_escape(&b, r->subject);
		rc |= oeap_buf_printf(&b, "\" time=\"%.4f\"", res[i].seconds);
		describe(def, r, &res[i], detail, sizeof(detail));
		if (!failed(&res[i])) {
			rc |= oeap_buf_puts(&b, "/>\n");
			continue;
		}
		rc |= oeap_buf_puts(&b, ">\n    <failure message=\"");
		rc |= xml_escape(&b, detail);
		rc |= oeap_buf_printf(&b, "\" type=\"%s\">commit %s\nfile ", oeap_land_name(res[i].land), full);
		rc |= xml_escape(&b, r->path);
		rc |= oeap_buf_puts(&b, "\n");
		rc |= xml_escape(&b, detail);
		rc |= oeap_buf_puts(&b, "</failure>\n  </testcase>\n");
	}
	/* An empty range is a test case too: with no test case at all a suite
	 * reads tests="0", which CI systems take for a pass. */
	for (size_t i = 0; i < nempty && !rc; i++) {
		rc |= oeap_buf_puts(&b, "  <testcase classname=\"oeapatch.check.");
		rc |= xml_escape(&b, def->name);
		rc |= oeap_buf_puts(&b, "\" name=\"range ");
		rc |= xml_escape(&b, empty[i].spec);
		rc |= oeap_buf_printf(&b, "\" time=\"0\">\n    <%s message=\"", allow_empty ? "skipped" : "failure");
		rc |= xml_escape(&b, empty[i].why);
		if (allow_empty) {
			rc |= oeap_buf_puts(&b, "\"/>\n  </testcase>\n");
			continue;
		}
		rc |= oeap_buf_puts(&b, "\" type=\"empty\">");
		rc |= xml_escape(&b, empty[i].why);
		rc |= oeap_buf_puts(&b, " (--allow-empty reports it as skipped)</failure>\n  </testcase>\n");
	}
	rc |= oeap_buf_puts(&b, "</testsuite>\n");
	if (rc) {
		oeap_buf_free(&b);
		return oeap_fail(err, OEAP_ERR_INTERNAL, "--junit", 0, "out of memory");
	}
	rc = oeap_write_atomic(file, b.data, b.len, 0644, err);
	oeap_buf_free(&b);
	return rc;
}

static double now_seconds(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* What check found: compute fills it, the printers print it. */
typedef struct check_result {
	git_repository *repo;
	char *prefix;
	char *path;                /* the target inside the repository */
	char **alts;               /* the definition's alternatives there (NULL-terminated) */
	oeap_revs revs;
	oeap_check_result *res;    /* one per revision */
	empty_range *empty;        /* range arguments that selected nothing */
	size_t nempty;
	size_t unsupported;        /* revisions before the definition's first_revision */
	size_t counts[OEAP_LAND_DELETED + 1];
	size_t nfailed;            /* revisions that do not land */
	size_t nbad;               /* what makes the exit status 1: failures and (unless allowed) empty ranges */
	double total;
	int exit_code;
} check_result;

static void check_result_free(void *result)
{
	check_result *r = result;
	free(r->empty);
	free(r->res);
	oeap_revs_free(&r->revs);
	free(r->path);
	for (size_t i = 0; r->alts && r->alts[i]; i++)
		free(r->alts[i]);
	free(r->alts);
	free(r->prefix);
	git_repository_free(r->repo);
}

static int compute(const oeap_cli *cli, const check_opts *o, int argc, char **argv, int first, check_result *r,
                   oeap_error *err)
{
	/* libgit2 re-hashes every object it inflates to compare it with its
	 * id; git itself does not on reads (`git log`, `git cat-file`: it checks
	 * objects on fetch and fsck). check only reads the user's own local
	 * object database, which zlib's checksum per object already guards
	 * against damage, and reports, never writes: the re-hashing was 6% of a
	 * walk over topk.py's history (docs/performance.md). */
	git_libgit2_opts(GIT_OPT_ENABLE_STRICT_HASH_VERIFICATION, 0);
	if (oeap_repo_open(cli->root, &r->repo, &r->prefix, err))
		return -1;
	if (!(r->path = malloc(strlen(r->prefix) + strlen(oeap_cli_target_rel(cli)) + 1)))
		return oeap_fail(err, OEAP_ERR_INTERNAL, "check", 0, "out of memory");
	sprintf(r->path, "%s%s", r->prefix, oeap_cli_target_rel(cli));
	/* The definition's alternatives inside the repository (the list of the
	 * layout found: a site-packages folder kept in git has the installed
	 * paths): each revision's target is the first its tree holds. */
	char *const *list = cli->layout == OEAP_LAYOUT_INSTALLED ? cli->def->installed_targets : cli->def->targets;
	size_t nalt = 0;
	while (list[nalt])
		nalt++;
	if (!(r->alts = calloc(nalt + 1, sizeof(*r->alts))))
		return oeap_fail(err, OEAP_ERR_INTERNAL, "check", 0, "out of memory");
	for (size_t i = 0; i < nalt; i++) {
		if (!(r->alts[i] = malloc(strlen(r->prefix) + strlen(list[i]) + 1)))
			return oeap_fail(err, OEAP_ERR_INTERNAL, "check", 0, "out of memory");
		sprintf(r->alts[i], "%s%s", r->prefix, list[i]);
	}

	double t0 = now_seconds();
	if (!(r->empty = calloc((size_t)(argc - first) + 1, sizeof(*r->empty))))
		return oeap_fail(err, OEAP_ERR_INTERNAL, "check", 0, "out of memory");
	if (first == argc) {
		if (oeap_revs_add_alts(r->repo, NULL, r->alts, o->max, &r->revs, NULL, err))
			return -1;
		if (r->revs.n == 0)
			return oeap_fail(err, OEAP_ERR_INPUT, r->path, 0,
			                 "no commit reachable from HEAD has this file: is this a repository of the framework "
			                 "%s patches?",
			                 cli->def->name);
		/* Revisions before the first one the definition supports fail
		 * forever (the code it anchors on did not exist yet): the walk
		 * stops there, and says so, so a green run is possible. */
		if (cli->def->first_revision && !o->all) {
			if (oeap_revs_since(r->repo, &r->revs, 0, cli->def->first_revision, &r->unsupported, err))
				return -1;
			if (r->revs.n == 0) {
				r->empty[r->nempty].spec = "HEAD";
				snprintf(r->empty[r->nempty].why, sizeof(r->empty[r->nempty].why),
				         "no commit since the definition's first supported revision %s touched %s",
				         cli->def->first_revision, r->path);
				r->nempty++;
			}
		}
	}
	for (int i = first; i < argc; i++) {
		size_t selected = 0;
		if (oeap_revs_add_alts(r->repo, argv[i], r->alts, o->max, &r->revs, &selected, err))
			return -1;
		if (!selected) {
			r->empty[r->nempty].spec = argv[i];
			oeap_range_why_empty(r->repo, argv[i], r->path, r->empty[r->nempty].why,
			                     sizeof(r->empty[r->nempty].why));
			r->nempty++;
		}
	}
	if (r->revs.n && !(r->res = calloc(r->revs.n, sizeof(*r->res))))
		return oeap_fail(err, OEAP_ERR_INTERNAL, "check", 0, "out of memory");
	if (oeap_check_revs(r->repo, cli->def, &r->revs, r->res, err) ||
	    (!o->skip_binding && oeap_check_revs_binding(r->repo, cli->def, &r->revs, r->res, err)))
		return -1;
	r->total = now_seconds() - t0;
	for (size_t i = 0; i < r->revs.n; i++) {
		r->counts[r->res[i].land]++;
		r->nfailed += failed(&r->res[i]);
	}
	r->nbad = r->nfailed + (o->allow_empty ? 0 : r->nempty);
	r->exit_code = r->nbad ? OEAP_EXIT_DIFFERS : OEAP_EXIT_OK;
	return 0;
}

static void print_json(const oeap_cli *cli, const void *opts, const void *result)
{
	const check_opts *o = opts;
	const check_result *r = result;
	char detail[1024];
	json_t *j = oeap_cli_json_head(cli, r->exit_code), *arr = json_array();
	for (size_t i = 0; i < r->revs.n; i++) {
		const oeap_rev *rev = &r->revs.items[i];
		const oeap_check_result *res = &r->res[i];
		char full[GIT_OID_HEXSZ + 1], blob[GIT_OID_HEXSZ + 1];
		git_oid_tostr(full, sizeof(full), &rev->commit);
		git_oid_tostr(blob, sizeof(blob), &rev->blob);
		describe(cli->def, rev, res, detail, sizeof(detail));
		json_t *e = json_pack("{s:s,s:s,s:s,s:o,s:o,s:s,s:o,s:b}", "commit", full, "short", rev->short_id, "date",
		                      rev->date, "subject", oeap_json_str(rev->subject), "path", oeap_json_str(rev->path),
		                      "status", oeap_land_name(res->land), "detail", oeap_json_str(detail), "ok",
		                      !failed(res));
		json_object_set_new(e, "named", json_boolean(rev->kind == OEAP_REV_NAMED));
		json_object_set_new(e, "blob", rev->has_blob ? json_string(blob) : json_null());
		json_object_set_new(e, "renamed_from", oeap_json_str(rev->renamed_from));
		if (res->land == OEAP_LAND_LANDS || res->land == OEAP_LAND_APPLIED)
			json_object_set_new(e, "before", json_string(oeap_file_state_name(res->before)));
		if (res->land == OEAP_LAND_FAILS)
			json_object_set_new(e, "error", oeap_json_error(&res->err));
		json_array_append_new(arr, e);
	}
	json_t *ea = json_array();
	for (size_t i = 0; i < r->nempty; i++)
		json_array_append_new(ea, json_pack("{s:o,s:o,s:b}", "range", oeap_json_str(r->empty[i].spec), "detail",
		                                    oeap_json_str(r->empty[i].why), "ok", o->allow_empty));
	json_object_set_new(j, "file", oeap_json_str(r->path));
	json_object_set_new(j, "patch", oeap_json_patch(cli->def));
	oeap_cli_json_definition(cli, j);
	json_object_set_new(j, "revisions", arr);
	json_object_set_new(j, "empty_ranges", ea);
	json_object_set_new(j, "first_revision",
	                    cli->def->first_revision && !o->all ? oeap_json_str(cli->def->first_revision) : json_null());
	json_object_set_new(j, "not_checked_before_first_revision", json_integer((json_int_t)r->unsupported));
	json_object_set_new(j, "summary",
	                    json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:f}", "revisions", (json_int_t)r->revs.n, "lands",
	                              (json_int_t)r->counts[OEAP_LAND_LANDS], "applied",
	                              (json_int_t)r->counts[OEAP_LAND_APPLIED], "fails",
	                              (json_int_t)r->counts[OEAP_LAND_FAILS], "missing",
	                              (json_int_t)r->counts[OEAP_LAND_MISSING], "deleted",
	                              (json_int_t)r->counts[OEAP_LAND_DELETED], "failed", (json_int_t)r->nbad, "seconds",
	                              r->total));
	oeap_json_emit(j);
}

static void print_text(const oeap_cli *cli, const void *opts, const void *result)
{
	const check_opts *o = opts;
	const check_result *r = result;
	char detail[1024];
	const size_t *counts = r->counts;
	const char *bad_on = oeap_color_bad(stdout), *good_on = oeap_color_good(stdout), *off = oeap_color_reset(stdout);
	for (size_t i = 0; i < r->nempty; i++)
		printf("%-19s %s%-7s%s  %s%s\n", "(range)", o->allow_empty ? "" : bad_on, o->allow_empty ? "empty" : "EMPTY",
		       o->allow_empty ? "" : off, r->empty[i].why,
		       o->allow_empty ? " (allowed: --allow-empty)"
		                      : ": nothing was checked (--allow-empty reports it as skipped instead)");
	for (size_t i = 0; i < r->revs.n; i++) {
		const oeap_rev *rev = &r->revs.items[i];
		int bad = failed(&r->res[i]);
		const char *word = oeap_land_name(r->res[i].land);
		char up[16];
		size_t k = 0;
		for (; word[k] && k < sizeof(up) - 1; k++)
			up[k] = bad ? (char)(word[k] - 'a' + 'A') : word[k];
		up[k] = '\0';
		describe(cli->def, rev, &r->res[i], detail, sizeof(detail));
		char note[4200] = "";
		if (rev->renamed_from)
			snprintf(note, sizeof(note), "%s(renamed from %s)", bad ? "  " : "", rev->renamed_from);
		else if (strcmp(rev->path, r->path) && r->res[i].land != OEAP_LAND_MISSING)
			snprintf(note, sizeof(note), "%s(as %s)", bad ? "  " : "", rev->path);
		int more = bad || note[0];
		printf("%s %s  %s%-7s%s  %-*.*s", rev->short_id, rev->date, bad ? bad_on : good_on, up, off, more ? 50 : 0,
		       clip(rev->subject, 50), rev->subject);
		printf("%s%s%s\n", more ? "  " : "", bad ? detail : "", note);
	}
	printf("%zu revision%s of %s checked in %.2f s: %zu land%s, %zu fail%s", r->revs.n, r->revs.n == 1 ? "" : "s",
	       r->path, r->total, counts[OEAP_LAND_LANDS] + counts[OEAP_LAND_APPLIED],
	       counts[OEAP_LAND_LANDS] + counts[OEAP_LAND_APPLIED] == 1 ? "s" : "", counts[OEAP_LAND_FAILS],
	       counts[OEAP_LAND_FAILS] == 1 ? "s" : "");
	if (counts[OEAP_LAND_APPLIED])
		printf(" (%zu already carr%s it)", counts[OEAP_LAND_APPLIED], counts[OEAP_LAND_APPLIED] == 1 ? "ies" : "y");
	if (counts[OEAP_LAND_MISSING])
		printf(", %zu lack%s the file", counts[OEAP_LAND_MISSING], counts[OEAP_LAND_MISSING] == 1 ? "s" : "");
	if (counts[OEAP_LAND_DELETED])
		printf(", %zu delete%s it", counts[OEAP_LAND_DELETED], counts[OEAP_LAND_DELETED] == 1 ? "s" : "");
	if (r->nempty)
		printf(", %zu empty range%s%s", r->nempty, r->nempty == 1 ? "" : "s", o->allow_empty ? " (allowed)" : "");
	printf(" [%s/%d]\n", cli->def->name, cli->def->version);
	if (r->unsupported)
		printf("(%zu older revision%s not checked: the definition supports %s from %s on (first_revision); "
		       "--all checks them)\n",
		       r->unsupported, r->unsupported == 1 ? "" : "s", r->path, cli->def->first_revision);
}

/* The report file before the printing: a failure to write it is then the
 * command's one error, not a second JSON document after the results. */
static int compute_and_report(const oeap_cli *cli, const void *opts, void *result, oeap_error *err)
{
	const check_opts *o = opts;
	check_result *r = result;
	if (compute(cli, o, o->argc, o->argv, o->first, r, err) ||
	    (o->junit && write_junit(o->junit, cli->def, &r->revs, r->res, r->nfailed, r->empty, r->nempty,
	                             o->allow_empty, r->total, err)))
		return -1;
	return 0;
}

static const oeap_command_steps steps = {compute_and_report, print_json, print_text, check_result_free};

int cmd_check(int argc, char **argv)
{
	int first = 0;
	oeap_cli cli;
	check_opts o = {NULL, NULL, 0, 0, 0, 0, 0, 0, NULL};
	oeap_error err;
	check_result r;
	memset(&r, 0, sizeof(r));
	oeap_error_clear(&err);

	int p = oeap_cli_parse(&cli, "check",
	                       "[-C REPO] [--junit FILE] [-n N] [--all] [--allow-empty] [--skip-binding] [--json] [REV | "
	                       "A..B ...]",
	                       "Dry-run the patch on the target file as committed at each revision, read from the "
	                       "object database (no checkout; bare repositories work). REV checks that revision; "
	                       "A..B the commits reachable from B and not from A that touched the file; no argument "
	                       "every commit reachable from HEAD that touched it (renames are followed), from the "
	                       "definition's first supported revision on (--all: all of them). Exit 1 when "
	                       "any revision fails, lacks the file, or deletes it, or when a range selects no revision "
	                       "(unless --allow-empty).",
	                       options, argc, argv, &o, &first);
	if (p)
		return p > 0 ? OEAP_EXIT_OK : OEAP_EXIT_TROUBLE;
	if (o.bad_max) {
		oeap_fail(&err, OEAP_ERR_USAGE, "--max-count", 0, "'%s' is not a positive number", o.bad_max);
		return oeap_cli_error(&cli, &err);
	}
	o.argc = argc;
	o.first = first;
	o.argv = argv;
	return oeap_command_run(&cli, 0, &steps, &o, &r, &r.exit_code);
}
