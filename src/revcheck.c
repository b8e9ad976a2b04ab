#include "revcheck.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "binding.h"
#include "oidmap.h"
#include "pyparse.h"

/* ---- the dry run ------------------------------------------------------------ */

const char *oeap_land_name(oeap_land l)
{
	switch (l) {
	case OEAP_LAND_LANDS: return "lands";
	case OEAP_LAND_APPLIED: return "applied";
	case OEAP_LAND_FAILS: return "fails";
	case OEAP_LAND_MISSING: return "missing";
	case OEAP_LAND_DELETED: return "deleted";
	}
	return "unknown";
}

static double now_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* oeap_check_bytes() with the parse of `buf` made already (or NULL). */
static int check_parsed(const oeap_patchdef *def, const char *buf, size_t len, const char *what,
                        const oeap_pysource *parsed, oeap_check_result *res)
{
	oeap_outcome o;
	memset(res, 0, sizeof(*res));
	double t0 = now_seconds();
	/* apply is the whole pipeline: anchors resolved, result read back with
	 * verify's own checks; a failure names the anchor or check and why. */
	if (oeap_apply_bytes_parsed(def, buf, len, what, 0, parsed, &o, &res->err) == 0) {
		res->land = o.before == OEAP_STATE_APPLIED ? OEAP_LAND_APPLIED : OEAP_LAND_LANDS;
		res->before = o.before;
		oeap_outcome_free(&o);
	} else {
		res->land = OEAP_LAND_FAILS;
		if (res->err.kind == OEAP_ERR_INTERNAL && !strcmp(res->err.message, "out of memory"))
			return -1;
	}
	res->seconds = now_seconds() - t0;
	return 0;
}

int oeap_check_bytes(const oeap_patchdef *def, const char *buf, size_t len, const char *what,
                     oeap_check_result *res)
{
	return check_parsed(def, buf, len, what, NULL, res);
}

/* ---- incremental parsing from one revision to the next -------------------- */

/* Where each line starts: line k (0-based) at off[k], off[nlines] == len. */
typedef struct line_index {
	size_t *off;
	size_t n; /* lines */
} line_index;

static int line_index_build(const char *buf, size_t len, line_index *li)
{
	size_t lines = 1, k = 1;
	for (const char *p = buf; (p = memchr(p, '\n', len - (size_t)(p - buf))) != NULL; p++)
		lines++;
	if (!(li->off = malloc((lines + 1) * sizeof(*li->off))))
		return -1;
	li->off[0] = 0;
	for (const char *p = buf; (p = memchr(p, '\n', len - (size_t)(p - buf))) != NULL; p++)
		li->off[k++] = (size_t)(p - buf) + 1;
	/* the last line (after the last '\n') ends at len; with a final '\n' it is empty */
	li->off[k] = len;
	li->n = lines;
	return 0;
}

/* Byte offset of where a hunk's lines start (1-based `start`, `count` lines).
 * A hunk of no lines sits after line `start` (unified diff's convention). */
static size_t hunk_offset(const line_index *li, int start, int count)
{
	size_t line = count ? (size_t)(start > 0 ? start - 1 : 0) : (size_t)start;
	return li->off[line < li->n ? line : li->n];
}

typedef struct edit_list {
	const char *a, *b;
	size_t alen, blen;
	line_index la, lb;
	oeap_pysource_edit *items;
	size_t n, cap;
	int oom;
} edit_list;

static int on_hunk(const git_diff_delta *d, const git_diff_hunk *h, void *payload)
{
	edit_list *l = payload;
	(void)d;
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 16;
		oeap_pysource_edit *p = realloc(l->items, cap * sizeof(*p));
		if (!p) {
			l->oom = 1;
			return -1;
		}
		l->items = p;
		l->cap = cap;
	}
	oeap_pysource_edit *e = &l->items[l->n++];
	e->old_start = hunk_offset(&l->la, h->old_start, h->old_lines);
	e->old_end = h->old_lines ? hunk_offset(&l->la, h->old_start + h->old_lines, 1) : e->old_start;
	e->new_start = hunk_offset(&l->lb, h->new_start, h->new_lines);
	e->new_end = h->new_lines ? hunk_offset(&l->lb, h->new_start + h->new_lines, 1) : e->new_start;
	/* Lines are what the diff compares; the parser wants the bytes that
	 * changed: a one-character fix is then a one-character edit. */
	while (e->old_start < e->old_end && e->new_start < e->new_end && l->a[e->old_start] == l->b[e->new_start])
		e->old_start++, e->new_start++;
	while (e->old_end > e->old_start && e->new_end > e->new_start && l->a[e->old_end - 1] == l->b[e->new_end - 1])
		e->old_end--, e->new_end--;
	return 0;
}

/* 1 when the edits, made to `a`, give exactly `b`: ascending, not
 * overlapping, and equal bytes around and between them. */
static int edits_make(const edit_list *l)
{
	size_t ao = 0, bo = 0;
	for (size_t i = 0; i < l->n; i++) {
		const oeap_pysource_edit *e = &l->items[i];
		if (e->old_start < ao || e->new_start < bo || e->old_end < e->old_start || e->new_end < e->new_start ||
		    e->old_end > l->alen || e->new_end > l->blen || e->old_start - ao != e->new_start - bo ||
		    memcmp(l->a + ao, l->b + bo, e->old_start - ao) != 0)
			return 0;
		ao = e->old_end;
		bo = e->new_end;
	}
	return l->alen - ao == l->blen - bo && memcmp(l->a + ao, l->b + bo, l->alen - ao) == 0;
}

/*
 * The edits that turn `a` into `b`: the hunks of libgit2's line diff
 * (no context lines), each narrowed to the bytes that differ. A revision
 * often changes a few places of a long file; one edit from the first
 * difference to the last would make tree-sitter re-parse everything between
 * them. The diff runs only over the lines between the common prefix and
 * suffix (its cost then follows the change, not the file). The list is
 * checked to make `b` out of `a` before it is used; when it does not (or
 * the diff fails), the one edit over the differing middle is taken.
 */
static int diff_edits(const char *a, size_t alen, const char *b, size_t blen, edit_list *l)
{
	git_diff_options opts;
	size_t pre = 0, suf = 0;
	memset(l, 0, sizeof(*l));
	while (pre < alen && pre < blen && a[pre] == b[pre])
		pre++;
	while (suf < alen - pre && suf < blen - pre && a[alen - 1 - suf] == b[blen - 1 - suf])
		suf++;
	if (!(l->items = malloc(sizeof(*l->items))))
		return -1;
	l->cap = 1;
	if (pre == alen && pre == blen)
		return 0; /* the same bytes: nothing to edit */
	/* The middle, widened to whole lines: from the start of the line of the
	 * first difference to the end of the line of the last. */
	size_t from = pre, a_to = alen - suf;
	while (from > 0 && a[from - 1] != '\n')
		from--;
	const char *nl = a_to < alen ? memchr(a + a_to, '\n', alen - a_to) : NULL;
	if (nl)
		a_to = (size_t)(nl - a) + 1;
	else
		a_to = alen;
	size_t b_to = a_to + blen - alen; /* the same suffix follows in b */
	l->a = a + from;
	l->b = b + from;
	l->alen = a_to - from;
	l->blen = b_to - from;
	git_diff_options_init(&opts, GIT_DIFF_OPTIONS_VERSION);
	opts.context_lines = 0;
	opts.interhunk_lines = 0;
	opts.flags = GIT_DIFF_FORCE_TEXT;
	if (line_index_build(l->a, l->alen, &l->la) || line_index_build(l->b, l->blen, &l->lb))
		return -1;
	int rc = git_diff_buffers(l->a, l->alen, NULL, l->b, l->blen, NULL, &opts, NULL, NULL, on_hunk, NULL, l);
	if (l->oom)
		return -1;
	for (size_t i = 0; i < l->n; i++) {
		l->items[i].old_start += from;
		l->items[i].old_end += from;
		l->items[i].new_start += from;
		l->items[i].new_end += from;
	}
	l->a = a;
	l->b = b;
	l->alen = alen;
	l->blen = blen;
	if (rc || !edits_make(l)) {
		git_error_clear();
		l->items[0] = (oeap_pysource_edit){pre, alen - suf, pre, blen - suf};
		l->n = 1;
	}
	return 0;
}

int oeap_text_edits(const char *a, size_t alen, const char *b, size_t blen, oeap_pysource_edit **edits, size_t *n)
{
	edit_list l;
	int rc = diff_edits(a, alen, b, blen, &l);
	free(l.la.off);
	free(l.lb.off);
	if (rc) {
		free(l.items);
		return -1;
	}
	*edits = l.items;
	*n = l.n;
	return 0;
}

/*
 * The parse check hands to apply for `data`: incremental from the previous
 * revision's parse `prev` when there is one. NULL (*out) when it does not
 * parse, for whatever reason, or is over the size limit: apply then parses on
 * its own and names the error exactly as for any file. -1 only when memory
 * ran out for the diff.
 */
static int parse_from(const oeap_pysource *prev, const char *data, size_t len, oeap_pysource **out)
{
	oeap_error ignore;
	oeap_pysource_edit *edits = NULL;
	size_t n = 0;
	*out = NULL;
	if (oeap_pysource_check_size(len, "", NULL))
		return 0;
	if (!prev) {
		oeap_pysource_parse(data, len, "", out, &ignore);
		return 0;
	}
	int rc = oeap_text_edits(prev->buf, prev->len, data, len, &edits, &n);
	if (!rc)
		oeap_pysource_parse_edits(prev, data, len, edits, n, "", out, &ignore);
	free(edits);
	return rc;
}

int oeap_check_revs(git_repository *repo, const oeap_patchdef *def, const oeap_revs *revs,
                    oeap_check_result *results, oeap_error *err)
{
	int error = 0;
	oeap_oid_map seen = {0}; /* blob id -> index of the first revision with it */
	/* The last parse that succeeded, and the bytes it borrows: the next
	 * revision (its neighbour in the walk) is parsed from its tree. */
	oeap_pysource *prev = NULL;
	char *prev_data = NULL;
	const char *prev_path = NULL;
	for (size_t i = 0; i < revs->n; i++) {
		const oeap_rev *r = &revs->items[i];
		oeap_check_result *res = &results[i];
		memset(res, 0, sizeof(*res));
		if (!r->has_blob) {
			res->land = r->kind == OEAP_REV_DELETED ? OEAP_LAND_DELETED : OEAP_LAND_MISSING;
			continue;
		}
		const size_t *at = oeap_oid_map_get(&seen, &r->blob);
		if (at) {
			*res = results[*at];
			res->seconds = 0;
			continue;
		}
		char *data = NULL;
		size_t len = 0;
		if (oeap_blob_read(repo, &r->blob, &data, &len, err)) {
			error = -1;
			break;
		}
		oeap_pysource *src = NULL;
		double t0 = now_seconds();
		/* Another file (the target moved between alternatives): nothing of
		 * the last tree is worth reusing, a parse from scratch is cheaper
		 * than diffing two unrelated texts. */
		if (prev && prev_path && strcmp(prev_path, r->path) != 0) {
			oeap_pysource_free(prev);
			free(prev_data);
			prev = NULL;
			prev_data = NULL;
		}
		int rc = parse_from(prev, data, len, &src);
		if (!rc)
			rc = check_parsed(def, data, len, r->path, src, res);
		res->seconds = now_seconds() - t0;
		if (src) {
			oeap_pysource_free(prev);
			free(prev_data);
			prev = src;
			prev_data = data;
			prev_path = r->path;
		} else {
			free(data);
		}
		if (rc || oeap_oid_map_put_new(&seen, &r->blob, i)) {
			error = oeap_fail(err, OEAP_ERR_INTERNAL, "check", 0, "out of memory");
			break;
		}
	}
	oeap_pysource_free(prev);
	free(prev_data);
	oeap_oid_map_free(&seen);
	return error;
}

int oeap_commit_binding_check(git_repository *repo, const git_commit *commit, const oeap_patchdef *def,
                              const char *path, oeap_report *rep, oeap_error *err)
{
	int error = 0;
	char *bpath = oeap_binding_path(def, path), *text = NULL;
	char label[4200], hex[GIT_OID_HEXSZ + 1];
	size_t len = 0;
	git_oid id;
	if (!bpath)
		return oeap_fail(err, OEAP_ERR_INTERNAL, "binding", 0, "out of memory");
	git_oid_tostr(hex, sizeof(hex), git_commit_id(commit));
	int has = oeap_commit_blob(repo, commit, bpath, &id, &text, &len, err);
	if (has < 0) {
		error = -1;
		goto done;
	}
	/* The target of that commit imports the module: without it in the same
	 * tree, a clone of the commit fails at import (`git commit -am` after
	 * apply leaves the new module untracked). */
	if (has == 1) {
		if (oeap_report_add(rep, "binding", 0, 0,
		                    "%s is not in commit %.12s, but its %s imports it: a checkout of that commit fails at "
		                    "import; `git add %s` and commit it (or pass --skip-binding when every deploy runs "
		                    "`oeapatch apply`, which writes it)",
		                    bpath, hex, path, bpath))
			error = oeap_fail(err, OEAP_ERR_INTERNAL, "binding", 0, "out of memory");
		goto done;
	}
	snprintf(label, sizeof(label), "%s (commit %.12s)", bpath, hex);
	if (oeap_binding_check_text(def, label, text, len, rep, NULL))
		error = oeap_fail(err, OEAP_ERR_INTERNAL, "binding", 0, "out of memory");
done:
	free(text);
	free(bpath);
	return error;
}

int oeap_check_revs_binding(git_repository *repo, const oeap_patchdef *def, const oeap_revs *revs,
                            oeap_check_result *results, oeap_error *err)
{
	int error = 0;
	for (size_t i = 0; i < revs->n && !error; i++) {
		oeap_check_result *res = &results[i];
		git_commit *c = NULL;
		oeap_report rep;
		memset(&rep, 0, sizeof(rep));
		rep.ok = 1;
		/* Only a revision that carries the patch imports the module; one that
		 * lands gets it from apply. */
		if (res->land != OEAP_LAND_APPLIED)
			continue;
		if (git_commit_lookup(&c, repo, &revs->items[i].commit)) {
			error = oeap_git_fail(err, revs->items[i].short_id, "cannot read the commit");
			break;
		}
		if (oeap_commit_binding_check(repo, c, def, revs->items[i].path, &rep, err))
			error = -1;
		else if (!rep.ok) {
			res->land = OEAP_LAND_FAILS;
			oeap_error_clear(&res->err);
			oeap_fail(&res->err, OEAP_ERR_INPUT, "binding", 0, "%s", rep.checks[rep.n - 1].detail);
		}
		oeap_report_free(&rep);
		git_commit_free(c);
	}
	return error;
}
