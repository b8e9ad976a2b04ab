#include "edit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "region.h"

typedef struct indent_probe {
	const oeap_pysource *src;
	char *unit;
	size_t cap;
} indent_probe;

/* A block whose first statement sits on its own line gives the unit: what
 * that line's indentation adds to the indentation of the line that opened
 * the block. */
static int visit_block(TSNode n, void *user)
{
	indent_probe *p = user;
	const oeap_pysource *src = p->src;
	if (strcmp(ts_node_type(n), "block") != 0 || ts_node_named_child_count(n) == 0)
		return OEAP_PYSOURCE_WALK_DESCEND;
	TSNode first = ts_node_named_child(n, 0);
	TSNode owner = ts_node_parent(n);
	size_t fs = oeap_pysource_start(src, first);
	size_t os = ts_node_is_null(owner) ? 0 : oeap_pysource_start(src, owner);
	size_t fl = oeap_pysource_line_start(src, fs), ol = oeap_pysource_line_start(src, os);
	if (fl == ol)
		return OEAP_PYSOURCE_WALK_DESCEND;
	size_t fi = fs - fl, oi = 0;
	while (ol + oi < src->len && (src->buf[ol + oi] == ' ' || src->buf[ol + oi] == '\t'))
		oi++;
	if (fi <= oi || memcmp(src->buf + fl, src->buf + ol, oi) != 0 || fi - oi >= p->cap)
		return OEAP_PYSOURCE_WALK_DESCEND;
	memcpy(p->unit, src->buf + fl + oi, fi - oi);
	p->unit[fi - oi] = '\0';
	return OEAP_PYSOURCE_WALK_STOP;
}

int oeap_indent_unit(const oeap_pysource *src, char *unit, size_t cap)
{
	indent_probe p = {src, unit, cap};
	if (oeap_pysource_walk(oeap_pysource_root(src), visit_block, &p) != OEAP_PYSOURCE_WALK_STOP)
		snprintf(unit, cap, "    ");
	return 0;
}

/* The length of a dotted expression's root name ("topk_config" of "topk_config.top_k"). */
static size_t root_len(const char *expr)
{
	const char *dot = strchr(expr, '.');
	return dot ? (size_t)(dot - expr) : strlen(expr);
}

static int bind_args(const oeap_patchdef *def, const oeap_region_def *rd, const oeap_pysource *src,
                     const oeap_anchors *anchors, const oeap_resolved *after, oeap_insertion *ins,
                     oeap_error *err)
{
	if (!rd->nargs)
		return 0;
	const oeap_resolved *scope = oeap_anchors_get(anchors, rd->scope);
	oeap_names names;
	char where[128];
	snprintf(where, sizeof(where), "region '%s'", rd->name);
	if (oeap_scope_names(src, scope->node, ins->offset, &names))
		return oeap_fail(err, OEAP_ERR_INTERNAL, where, 0, "out of memory");
	if (names.dead) {
		/* Inserting there would be all green and OEA would never run. */
		long dl = names.dead_line;
		oeap_names_free(&names);
		return oeap_fail(err, OEAP_ERR_ANCHOR, where, after->line,
		                 "the place after %s (line %ld) is never reached: every path through the statement "
		                 "at line %ld returns or raises, so the call site would be dead code; refusing",
		                 after->def->describe, after->line, dl);
	}
	ins->args = calloc(rd->nargs, sizeof(*ins->args));
	if (!ins->args) {
		oeap_names_free(&names);
		return oeap_fail(err, OEAP_ERR_INTERNAL, where, 0, "out of memory");
	}
	for (size_t i = 0; i < rd->nargs; i++) {
		const oeap_arg_def *a = &rd->args[i];
		const char *chosen = NULL;
		for (size_t j = 0; j < a->nexprs && !chosen; j++)
			if (oeap_names_has(&names, a->exprs[j], root_len(a->exprs[j])))
				chosen = a->exprs[j];
		if (chosen) {
			ins->args[ins->nargs].keyword = a->keyword;
			ins->args[ins->nargs].expr = chosen;
			ins->nargs++;
		} else if (a->required) {
			char tried[256] = "";
			size_t used = 0;
			for (size_t j = 0; j < a->nexprs && used < sizeof(tried) - 1; j++)
				used += (size_t)snprintf(tried + used, sizeof(tried) - used, "%s%s", j ? ", " : "",
				                         a->exprs[j]);
			oeap_names_free(&names);
			return oeap_fail(err, OEAP_ERR_ANCHOR, where, after->line,
			                 "needs '%s' but none of [%s] is bound on every path through %s to the end of %s "
			                 "(line %ld)",
			                 a->keyword, tried, scope->def->describe, after->def->describe, after->line);
		}
	}
	oeap_names_free(&names);
	(void)def;
	return 0;
}

static int put_indent(oeap_buf *b, const char *indent, const char *unit, size_t levels, size_t extra)
{
	if (oeap_buf_puts(b, indent))
		return -1;
	for (size_t i = 0; i < levels; i++)
		if (oeap_buf_puts(b, unit))
			return -1;
	for (size_t i = 0; i < extra; i++)
		if (oeap_buf_put(b, " ", 1))
			return -1;
	return 0;
}

/* Substitutes {{module}}, {{patch}}, {{version}} in one template line. */
static int put_line(oeap_buf *b, const oeap_patchdef *def, const char *s, size_t n, oeap_error *err,
                    const char *where)
{
	while (n) {
		const char *open = memmem(s, n, "{{", 2);
		if (!open)
			return oeap_buf_put(b, s, n);
		if (oeap_buf_put(b, s, (size_t)(open - s)))
			return -1;
		n -= (size_t)(open - s);
		s = open;
		const char *close = memmem(s, n, "}}", 2);
		if (!close)
			return oeap_fail(err, OEAP_ERR_DEFINITION, where, 0, "unterminated '{{' in template");
		size_t kn = (size_t)(close - s - 2);
		const char *k = s + 2;
		int rc;
		if (kn == 6 && !memcmp(k, "module", 6))
			rc = oeap_buf_puts(b, def->binding_module);
		else if (kn == 5 && !memcmp(k, "patch", 5))
			rc = oeap_buf_puts(b, def->name);
		else if (kn == 7 && !memcmp(k, "version", 7))
			rc = oeap_buf_printf(b, "%d", def->version);
		else
			return oeap_fail(err, OEAP_ERR_DEFINITION, where, 0, "unknown placeholder {{%.*s}}", (int)kn, k);
		if (rc)
			return -1;
		n -= (size_t)(close + 2 - s);
		s = close + 2;
	}
	return 0;
}

static int render_body(const oeap_patchdef *def, const oeap_region_def *rd, const oeap_insertion *ins,
                       const char *unit, const char *eol, oeap_buf *body, oeap_error *err)
{
	const char *t = rd->template_text;
	char where[128];
	snprintf(where, sizeof(where), "%s/%s", def->dir, rd->template_path);
	while (*t) {
		const char *nl = strchr(t, '\n');
		size_t n = nl ? (size_t)(nl - t) : strlen(t);
		size_t sp = 0;
		while (sp < n && t[sp] == ' ')
			sp++;
		const char *content = t + sp;
		size_t cn = n - sp;
		if (cn == 0) {
			if (oeap_buf_puts(body, eol))
				return -1;
		} else if (cn == 8 && memcmp(content, "{{args}}", 8) == 0) {
			for (size_t i = 0; i < ins->nargs; i++)
				if (put_indent(body, ins->indent, unit, sp / 4, sp % 4) ||
				    oeap_buf_printf(body, "%s=%s,%s", ins->args[i].keyword, ins->args[i].expr, eol))
					return -1;
		} else {
			if (put_indent(body, ins->indent, unit, sp / 4, sp % 4) ||
			    put_line(body, def, content, cn, err, where) || oeap_buf_puts(body, eol))
				return -1;
		}
		t += n + (nl ? 1 : 0);
	}
	return 0;
}

static int insertion_cmp(const void *a, const void *b)
{
	const oeap_insertion *x = a, *y = b;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

int oeap_plan_build(const oeap_patchdef *def, const oeap_pysource *src, oeap_plan *plan,
                    oeap_error *err)
{
	char unit[32];
	memset(plan, 0, sizeof(*plan));
	if (oeap_anchors_resolve(def, src, &plan->anchors, err))
		goto fail;
	oeap_indent_unit(src, unit, sizeof(unit));
	plan->items = calloc(def->nregions, sizeof(*plan->items));
	if (!plan->items) {
		oeap_fail(err, OEAP_ERR_INTERNAL, "plan", 0, "out of memory");
		goto fail;
	}
	for (size_t i = 0; i < def->nregions; i++) {
		const oeap_region_def *rd = &def->regions[i];
		const oeap_resolved *after = oeap_anchors_get(&plan->anchors, rd->after);
		oeap_insertion *ins = &plan->items[plan->n++];
		char where[128];
		snprintf(where, sizeof(where), "anchor '%s'", after->def->name);
		ins->region = rd;
		ins->anchor = after;
		/* The region's lines start with the anchor line's indentation, and the
		 * anchor must start its line: otherwise "after it" is not a place. A
		 * form feed may lead a line (Python resets the column there, so the
		 * indentation is what follows the last one): the region takes that. */
		size_t ls = oeap_pysource_line_start(src, after->start);
		if (ls < src->bom)
			ls = src->bom;
		for (size_t k = ls; k < after->start; k++)
			if (src->buf[k] == '\f')
				ls = k + 1;
			else if (src->buf[k] != ' ' && src->buf[k] != '\t') {
				oeap_fail(err, OEAP_ERR_ANCHOR, where, after->line,
				          "%s does not start its own line (line %ld): no safe place to insert after it",
				          after->def->describe, after->line);
				goto fail;
			}
		if (!(ins->indent = strndup(src->buf + ls, after->start - ls))) {
			oeap_fail(err, OEAP_ERR_INTERNAL, "plan", 0, "out of memory");
			goto fail;
		}
		ins->offset = oeap_pysource_next_line(src, after->end > after->start ? after->end - 1 : after->end);
		if (ins->offset == src->len && src->buf[src->len - 1] != '\n') {
			oeap_fail(err, OEAP_ERR_ANCHOR, where, after->line,
			          "%s ends the file without a line end: inserting after it would change its last line",
			          after->def->describe);
			goto fail;
		}
		if (bind_args(def, rd, src, &plan->anchors, after, ins, err))
			goto fail;
		oeap_buf body = OEAP_BUF_INIT, whole = OEAP_BUF_INIT;
		if (render_body(def, rd, ins, unit, src->eol, &body, err) ||
		    oeap_region_render(&whole, def->name, def->version, rd->name, ins->indent, src->eol, body.data,
		                       body.len)) {
			oeap_buf_free(&body);
			oeap_buf_free(&whole);
			oeap_fail(err, OEAP_ERR_INTERNAL, "plan", 0, "out of memory");
			goto fail;
		}
		oeap_buf_free(&body);
		ins->text = oeap_buf_detach(&whole, &ins->len);
	}
	qsort(plan->items, plan->n, sizeof(*plan->items), insertion_cmp);
	for (size_t i = 1; i < plan->n; i++)
		if (plan->items[i].offset == plan->items[i - 1].offset) {
			oeap_fail(err, OEAP_ERR_DEFINITION, "plan", 0, "regions '%s' and '%s' would land at the same place",
			          plan->items[i - 1].region->name, plan->items[i].region->name);
			goto fail;
		}
	return 0;
fail:
	oeap_plan_free(plan);
	return -1;
}

void oeap_plan_free(oeap_plan *plan)
{
	for (size_t i = 0; i < plan->n; i++) {
		free(plan->items[i].text);
		free(plan->items[i].indent);
		free(plan->items[i].args);
	}
	free(plan->items);
	oeap_anchors_free(&plan->anchors);
	memset(plan, 0, sizeof(*plan));
}

int oeap_plan_apply(const char *buf, size_t len, const oeap_plan *plan, oeap_buf *out)
{
	size_t at = 0;
	for (size_t i = 0; i < plan->n; i++) {
		const oeap_insertion *ins = &plan->items[i];
		if (oeap_buf_put(out, buf + at, ins->offset - at) || oeap_buf_put(out, ins->text, ins->len))
			return -1;
		at = ins->offset;
	}
	return oeap_buf_put(out, buf + at, len - at);
}

size_t oeap_plan_output_offset(const oeap_plan *plan, size_t i)
{
	size_t shift = 0;
	for (size_t k = 0; k < i; k++)
		shift += plan->items[k].len;
	return plan->items[i].offset + shift;
}
