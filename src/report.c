#include "report.h"

#include <git2.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "quote.h"

int oeap_report_add(oeap_report *rep, const char *name, int ok, long line, const char *fmt, ...)
{
	oeap_check *c = realloc(rep->checks, (rep->n + 1) * sizeof(*c));
	if (!c)
		return -1;
	rep->checks = c;
	c = &rep->checks[rep->n++];
	memset(c, 0, sizeof(*c));
	snprintf(c->name, sizeof(c->name), "%s", name);
	c->ok = ok;
	c->line = line;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->detail, sizeof(c->detail), fmt, ap);
	va_end(ap);
	if (!ok)
		rep->ok = 0;
	return 0;
}

int oeap_report_warn(oeap_report *rep, const char *name, long line, const char *fmt, ...)
{
	char detail[sizeof(((oeap_check *)0)->detail)];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	if (oeap_report_add(rep, name, 1, line, "%s", detail))
		return -1;
	rep->checks[rep->n - 1].warning = 1;
	return 0;
}

void oeap_report_free(oeap_report *rep)
{
	free(rep->checks);
	memset(rep, 0, sizeof(*rep));
}

void oeap_msg(const char *fmt, ...)
{
	va_list ap;
	fputs("oeapatch: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void oeap_print_error(const oeap_error *err)
{
	if (err->where[0])
		fprintf(stderr, "oeapatch: %s: %s\n", err->where, err->message);
	else
		fprintf(stderr, "oeapatch: %s\n", err->message);
}

static oeap_color color_mode = OEAP_COLOR_AUTO;

void oeap_set_color(oeap_color mode)
{
	color_mode = mode;
}

int oeap_use_color(FILE *f)
{
	if (color_mode != OEAP_COLOR_AUTO)
		return color_mode == OEAP_COLOR_ALWAYS;
	const char *no = getenv("NO_COLOR");
	return isatty(fileno(f)) && !(no && *no);
}

const char *oeap_color_good(FILE *f)
{
	return oeap_use_color(f) ? "\033[32m" : "";
}

const char *oeap_color_bad(FILE *f)
{
	return oeap_use_color(f) ? "\033[31m" : "";
}

const char *oeap_color_reset(FILE *f)
{
	return oeap_use_color(f) ? "\033[0m" : "";
}

void oeap_print_diff(const char *diff, size_t len, FILE *f)
{
	if (!oeap_use_color(f)) {
		fwrite(diff, 1, len, f);
		return;
	}
	/* git's default colours: meta bold, hunk headers cyan, - red, + green. */
	for (size_t i = 0; i < len;) {
		const char *l = diff + i;
		const char *nl = memchr(l, '\n', len - i);
		size_t n = nl ? (size_t)(nl - l) : len - i;
		const char *sgr = "";
		if (n >= 4 && (!strncmp(l, "diff", 4) || !strncmp(l, "inde", 4) || !strncmp(l, "--- ", 4) ||
		               !strncmp(l, "+++ ", 4) || !strncmp(l, "new ", 4) || !strncmp(l, "dele", 4)))
			sgr = "\033[1m";
		else if (n >= 2 && !strncmp(l, "@@", 2))
			sgr = "\033[36m";
		else if (n && l[0] == '-')
			sgr = "\033[31m";
		else if (n && l[0] == '+')
			sgr = "\033[32m";
		if (*sgr)
			fprintf(f, "%s%.*s\033[0m", sgr, (int)n, l);
		else
			fwrite(l, 1, n, f);
		if (nl)
			fputc('\n', f);
		i += n + (nl ? 1 : 0);
	}
}

int oeap_diff(const char *path, const char *old, size_t oldlen, const char *new_, size_t newlen,
              oeap_buf *out, oeap_error *err)
{
	git_patch *patch = NULL;
	git_buf buf = {0};
	int error = 0;
	git_diff_options opts;
	git_libgit2_init(); /* refcounted; paired below */
	git_diff_options_init(&opts, GIT_DIFF_OPTIONS_VERSION);
	opts.context_lines = 3;
	/* libgit2 treats a buffer with NUL bytes as binary; ours never have them. */
	/* A NULL side is an absent file: libgit2 then writes /dev/null and the
	 * "new file" / "deleted file" headers that git apply expects. */
	if (git_patch_from_buffers(&patch, old, old ? oldlen : 0, old ? path : NULL, new_, new_ ? newlen : 0,
	                           new_ ? path : NULL, &opts) < 0 ||
	    git_patch_to_buf(&buf, patch) < 0) {
		const git_error *e = git_error_last();
		error = oeap_fail(err, OEAP_ERR_GIT, "diff", 0, "%s", e ? e->message : "libgit2 failed");
		goto done;
	}
	if (oeap_buf_put(out, buf.ptr, buf.size))
		error = oeap_fail(err, OEAP_ERR_INTERNAL, "diff", 0, "out of memory");
done:
	git_buf_dispose(&buf);
	git_patch_free(patch);
	git_libgit2_shutdown();
	return error;
}

json_t *oeap_json_strn(const char *s, size_t n)
{
	if (!s)
		return json_null();
	if (!oeap_quote_needed(s, n, OEAP_QUOTE_JSON))
		return json_stringn(s, n);
	char *q = oeap_quote(s, n);
	json_t *j = q ? json_string(q) : NULL;
	free(q);
	return j;
}

json_t *oeap_json_str(const char *s)
{
	return oeap_json_strn(s, s ? strlen(s) : 0);
}

json_t *oeap_json_patch(const oeap_patchdef *def)
{
	char name[512];
	snprintf(name, sizeof(name), "%s/%d", def->name, def->version);
	return oeap_json_str(name);
}

json_t *oeap_json_error(const oeap_error *err)
{
	static const char *kinds[] = {"none", "usage", "io", "input", "anchor", "region", "definition", "git",
	                              "internal"};
	json_t *j = json_object();
	json_object_set_new(j, "kind", json_string(kinds[err->kind]));
	json_object_set_new(j, "where", oeap_json_str(err->where));
	json_object_set_new(j, "message", oeap_json_str(err->message));
	if (err->line)
		json_object_set_new(j, "line", json_integer(err->line));
	return j;
}

json_t *oeap_json_checks(const oeap_report *rep)
{
	json_t *a = json_array();
	for (size_t i = 0; i < rep->n; i++) {
		const oeap_check *c = &rep->checks[i];
		json_t *o = json_object();
		json_object_set_new(o, "check", oeap_json_str(c->name));
		json_object_set_new(o, "ok", json_boolean(c->ok));
		if (c->warning)
			json_object_set_new(o, "warning", json_true());
		if (c->line)
			json_object_set_new(o, "line", json_integer(c->line));
		json_object_set_new(o, "detail", oeap_json_str(c->detail));
		json_array_append_new(a, o);
	}
	return a;
}

/* 1-based line and column (in bytes) of an offset. */
static void line_col(const char *buf, size_t off, long *line, long *col)
{
	long l = 1;
	size_t ls = 0;
	for (size_t i = 0; i < off; i++)
		if (buf[i] == '\n') {
			l++;
			ls = i + 1;
		}
	*line = l;
	*col = (long)(off - ls) + 1;
}

static json_t *json_pos(const char *buf, size_t off)
{
	long line, col;
	line_col(buf, off, &line, &col);
	return json_pack("{s:I,s:I,s:I}", "byte", (json_int_t)off, "line", (json_int_t)line, "column",
	                 (json_int_t)col);
}

json_t *oeap_json_insertions(const oeap_plan *plan, const char *file, const char *out, size_t out_len)
{
	json_t *a = json_array();
	for (size_t i = 0; i < plan->n; i++) {
		const oeap_insertion *ins = &plan->items[i];
		size_t at = oeap_plan_output_offset(plan, i);
		if (at + ins->len > out_len)
			continue;
		json_t *args = json_object();
		for (size_t k = 0; k < ins->nargs; k++)
			json_object_set_new(args, ins->args[k].keyword, oeap_json_str(ins->args[k].expr));
		json_t *o = json_object();
		json_object_set_new(o, "file", oeap_json_str(file));
		json_object_set_new(o, "region", oeap_json_str(ins->region->name));
		json_object_set_new(o, "range", json_pack("{s:o,s:o}", "start", json_pos(out, at), "end",
		                                          json_pos(out, at + ins->len)));
		json_object_set_new(o, "anchor", json_pack("{s:o,s:o,s:I}", "name", oeap_json_str(ins->anchor->def->name),
		                                           "describe", oeap_json_str(ins->anchor->def->describe), "line",
		                                           (json_int_t)ins->anchor->line));
		json_object_set_new(o, "arguments", args);
		json_object_set_new(o, "text", oeap_json_strn(ins->text, ins->len));
		json_array_append_new(a, o);
	}
	return a;
}

int oeap_json_emit(json_t *j)
{
	int rc = json_dumpf(j, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	fputc('\n', stdout);
	json_decref(j);
	return rc;
}

void oeap_print_checks(const oeap_report *rep)
{
	for (size_t i = 0; i < rep->n; i++) {
		const oeap_check *c = &rep->checks[i];
		const char *sgr = c->warning ? (oeap_use_color(stdout) ? "\033[33m" : "")
		                  : c->ok   ? oeap_color_good(stdout)
		                            : oeap_color_bad(stdout);
		printf("%s%s%s %-22s %s\n", sgr,
		       c->warning ? "WARN" : c->ok ? "ok  " : "FAIL",
		       oeap_color_reset(stdout), c->name, c->detail);
	}
}
