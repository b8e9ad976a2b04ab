#include "anchor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"

/* Lists the lines of the nodes, "12, 40 and 77", for ambiguity messages. */
static void lines_list(const oeap_pysource *src, const TSNode *nodes, size_t n, char *out, size_t cap)
{
	size_t used = 0;
	out[0] = '\0';
	for (size_t i = 0; i < n && used + 24 < cap; i++) {
		const char *sep = i == 0 ? "" : (i + 1 == n ? " and " : ", ");
		used += (size_t)snprintf(out + used, cap - used, "%s%ld", sep,
		                         oeap_pysource_line_of(src, oeap_pysource_start(src, nodes[i])));
	}
}

/* With `contains`, keeps the candidates inside which that query matches. */
static int keep_containing(const oeap_anchor_def *a, const oeap_pysource *src, TSNode *nodes, size_t *n,
                           oeap_error *err)
{
	if (!a->contains)
		return 0;
	size_t k = 0;
	for (size_t i = 0; i < *n; i++) {
		TSNode *inner = NULL;
		size_t m = 0;
		if (oeap_query_collect(a->contains, src, nodes[i], "match", &inner, &m, err))
			return -1;
		free(inner);
		if (m)
			nodes[k++] = nodes[i];
	}
	*n = k;
	return 0;
}

/*
 * Another definition's region holding one of an anchor's candidates (its
 * call site binds the same names right after the same chain): the name and
 * version from its opening marker ("# >>> oeapatch NAME/V REGION ...") into
 * `other`, and its line. 0 when no candidate sits in a region of another
 * definition than `def`.
 */
static long foreign_region(const oeap_patchdef *def, const oeap_pysource *src, const TSNode *nodes, size_t n,
                           char *other, size_t cap)
{
	static const char mark[] = "# >>> oeapatch ";
	for (size_t i = 0; i < n; i++) {
		size_t ls = oeap_pysource_line_start(src, oeap_pysource_start(src, nodes[i]));
		if (ls == 0)
			continue;
		size_t prev = oeap_pysource_line_start(src, ls - 1);
		while (prev < ls && (src->buf[prev] == ' ' || src->buf[prev] == '\t' || src->buf[prev] == '\f'))
			prev++;
		if (ls - prev <= sizeof(mark) - 1 || memcmp(src->buf + prev, mark, sizeof(mark) - 1) != 0)
			continue;
		const char *name = src->buf + prev + sizeof(mark) - 1;
		size_t len = 0, rest = ls - (prev + sizeof(mark) - 1); /* the line, its end included */
		while (len < rest && !strchr(" \r\n", name[len]))
			len++;
		const char *sl = memchr(name, '/', len);
		size_t slash = sl ? (size_t)(sl - name) : len;
		if (slash < len && (strlen(def->name) != slash || strncmp(name, def->name, slash) != 0)) {
			snprintf(other, cap, "%.*s", (int)len, name);
			return oeap_pysource_line_of(src, prev);
		}
	}
	return 0;
}

int oeap_anchors_resolve(const oeap_patchdef *def, const oeap_pysource *src, oeap_anchors *out,
                         oeap_error *err)
{
	out->items = calloc(def->nanchors ? def->nanchors : 1, sizeof(*out->items));
	out->n = 0;
	if (!out->items)
		return oeap_fail(err, OEAP_ERR_INTERNAL, "anchors", 0, "out of memory");
	for (size_t i = 0; i < def->nanchors; i++) {
		const oeap_anchor_def *a = &def->anchors[i];
		char where[160];
		TSNode scope = oeap_pysource_root(src);
		const char *scope_what = "the module";
		snprintf(where, sizeof(where), "anchor '%s'", a->name);
		if (strcmp(a->in, OEAP_IN_MODULE) != 0) {
			const oeap_resolved *in = oeap_anchors_get(out, a->in);
			scope = in->node;
			scope_what = in->def->describe;
		}
		TSNode *nodes = NULL;
		size_t n = 0;
		if (oeap_query_collect(a->query, src, scope, a->capture, &nodes, &n, err) ||
		    keep_containing(a, src, nodes, &n, err)) {
			free(nodes);
			return -1;
		}
		if (n == 0) {
			free(nodes);
			/* A pattern no tree can match is the definition's fault: the
			 * error it had at load when tree-sitter compiled every query. */
			if (oeap_query_check_structure(a->query, err) ||
			    (a->contains && oeap_query_check_structure(a->contains, err)))
				return -1;
			/* The definition's word on why (e.g. an era it does not support) ends the message. */
			return oeap_fail(err, OEAP_ERR_ANCHOR, where, 0, "not found: %s is not in %s%s%s", a->describe,
			                 scope_what, a->unmatched ? ": " : "", a->unmatched ? a->unmatched : "");
		}
		if (n > 1 && !a->pick_last) {
			char lines[256], other[128];
			lines_list(src, nodes, n, lines, sizeof(lines));
			long first = oeap_pysource_line_of(src, oeap_pysource_start(src, nodes[0]));
			long at = foreign_region(def, src, nodes, n, other, sizeof(other));
			free(nodes);
			if (at) {
				char name[128];
				snprintf(name, sizeof(name), "%.*s", (int)strcspn(other, "/"), other);
				return oeap_fail(err, OEAP_ERR_ANCHOR, where, at,
				                 "the file carries a region of another patch definition, %s (line %ld), "
				                 "inside which sits a second candidate for %s (lines %s): two definitions "
				                 "cannot both patch one file; `oeapatch --patch %s revert` takes that one out",
				                 other, at, a->describe, lines, name);
			}
			return oeap_fail(err, OEAP_ERR_ANCHOR, where, first,
			                 "ambiguous: %zu candidates for %s (lines %s); refusing to guess", n,
			                 a->describe, lines);
		}
		oeap_resolved *r = &out->items[out->n++];
		r->def = a;
		r->node = nodes[n - 1];
		r->start = oeap_pysource_start(src, r->node);
		r->end = oeap_pysource_end(src, r->node);
		r->line = oeap_pysource_line_of(src, r->start);
		free(nodes);
	}
	return 0;
}

void oeap_anchors_free(oeap_anchors *a)
{
	free(a->items);
	a->items = NULL;
	a->n = 0;
}

const oeap_resolved *oeap_anchors_get(const oeap_anchors *a, const char *name)
{
	for (size_t i = 0; i < a->n; i++)
		if (strcmp(a->items[i].def->name, name) == 0)
			return &a->items[i];
	return NULL;
}

/* Appends a name; oeap_scope_names() sorts and de-duplicates at the end
 * (looking each one up here made a long function body quadratic: hardening fix). */
static int names_push(oeap_names *names, const char *s, size_t n)
{
	char **p = realloc(names->items, (names->n + 1) * sizeof(*p));
	if (!p)
		return -1;
	names->items = p;
	if (!(p[names->n] = strndup(s, n)))
		return -1;
	names->n++;
	return 0;
}

static int names_add(oeap_names *names, const oeap_pysource *src, TSNode id)
{
	size_t s = oeap_pysource_start(src, id), e = oeap_pysource_end(src, id);
	return names_push(names, src->buf + s, e - s);
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted and unique, so that oeap_names_has() can search by halves. */
static void names_normalise(oeap_names *names)
{
	if (names->n < 2)
		return;
	qsort(names->items, names->n, sizeof(*names->items), name_cmp);
	size_t k = 1;
	for (size_t i = 1; i < names->n; i++) {
		if (strcmp(names->items[i], names->items[k - 1]) == 0)
			free(names->items[i]);
		else
			names->items[k++] = names->items[i];
	}
	names->n = k;
}

/* Drops every copy of `name` (a `del`). */
static void names_remove(oeap_names *names, const char *name)
{
	size_t k = 0;
	for (size_t i = 0; i < names->n; i++) {
		if (strcmp(names->items[i], name) == 0)
			free(names->items[i]);
		else
			names->items[k++] = names->items[i];
	}
	names->n = k;
}

/* Moves every name of `from` to the end of `to` (from is left empty). */
static int names_move(oeap_names *to, oeap_names *from)
{
	if (!from->n)
		return 0;
	char **p = realloc(to->items, (to->n + from->n) * sizeof(*p));
	if (!p)
		return -1;
	to->items = p;
	memcpy(p + to->n, from->items, from->n * sizeof(*p));
	to->n += from->n;
	free(from->items);
	from->items = NULL;
	from->n = 0;
	return 0;
}

/* Keeps in `a` only the names also in `b`; both are normalised first. */
static void names_intersect(oeap_names *a, oeap_names *b)
{
	names_normalise(a);
	names_normalise(b);
	size_t k = 0;
	for (size_t i = 0; i < a->n; i++) {
		if (oeap_names_has(b, a->items[i], strlen(a->items[i])))
			a->items[k++] = a->items[i];
		else
			free(a->items[i]);
	}
	a->n = k;
}

/*
 * "Bound" means bound on every path that reaches a place: a name assigned in
 * one branch of an `if` only is unbound on the other path, and passing it to
 * the call site raises UnboundLocalError there once OEA is on. So the names
 * are a definite-assignment analysis over the function's statements, not a
 * collection of every assignment. Where the analysis cannot be sure (loops
 * that may not run, `with` blocks whose manager may swallow an exception,
 * `match`, walrus operators) it counts nothing: an optional argument is then
 * left out (the binding reads its default), a required one refuses the plan,
 * and neither runs code that can fail. Unbinding is the other way round:
 * whatever such a statement may unbind anywhere inside it (`del`, an
 * `except E as NAME` handler) is unbound after it.
 */
typedef struct flow {
	oeap_names bound;   /* bound on every path through the statements so far */
	oeap_names deleted; /* maybe unbound again by `del` (taken out of the outer names) */
	int ends;           /* control never gets past these statements (return, raise ...) */
	TSNode end_at;      /* the statement that ends it */
} flow;

static void flow_free(flow *f)
{
	oeap_names_free(&f->bound);
	oeap_names_free(&f->deleted);
}

/* Python refuses more than 100 nested blocks; past that depth we count nothing. */
#define FLOW_MAX_DEPTH 100

static int flow_block(const oeap_pysource *src, TSNode block, size_t before, int depth, flow *f);

/* Adds the identifiers a binding target binds: a, (a, b), [a, *b]. */
static int visit_target(TSNode t, void *user)
{
	flow *f = ((void **)user)[0];
	const oeap_pysource *src = ((void **)user)[1];
	if (!ts_node_is_named(t))
		return OEAP_PYSOURCE_WALK_SKIP;
	const char *type = ts_node_type(t);
	if (strcmp(type, "identifier") == 0) {
		size_t s = oeap_pysource_start(src, t), e = oeap_pysource_end(src, t);
		char *n = strndup(src->buf + s, e - s);
		if (!n)
			return -1;
		names_remove(&f->deleted, n);
		free(n);
		return names_add(&f->bound, src, t) ? -1 : OEAP_PYSOURCE_WALK_SKIP;
	}
	/* attribute and subscript targets bind no name */
	return strcmp(type, "pattern_list") == 0 || strcmp(type, "tuple_pattern") == 0 ||
	               strcmp(type, "list_pattern") == 0 || strcmp(type, "list_splat_pattern") == 0 ||
	               strcmp(type, "parenthesized_expression") == 0 || strcmp(type, "expression_list") == 0 ||
	               strcmp(type, "tuple") == 0 || strcmp(type, "list") == 0 ||
	               strcmp(type, "list_splat") == 0
	           ? OEAP_PYSOURCE_WALK_DESCEND
	           : OEAP_PYSOURCE_WALK_SKIP;
}

static int bind_targets(flow *f, const oeap_pysource *src, TSNode t)
{
	void *ctx[2] = {f, (void *)src};
	return ts_node_is_null(t) ? 0 : oeap_pysource_walk(t, visit_target, ctx) < 0 ? -1 : 0;
}

/* `a = b = f()`, `x: int = 1`, `x += 1` (`x: int` alone binds nothing). */
static int flow_assignment(flow *f, const oeap_pysource *src, TSNode as)
{
	for (;;) {
		TSNode right = ts_node_child_by_field_name(as, "right", 5);
		if (ts_node_is_null(right) && strcmp(ts_node_type(as), "assignment") == 0)
			return 0;
		if (bind_targets(f, src, ts_node_child_by_field_name(as, "left", 4)))
			return -1;
		if (ts_node_is_null(right) || strcmp(ts_node_type(right), "assignment") != 0)
			return 0;
		as = right;
	}
}

/* Unbinds one name: it leaves `bound` and joins `deleted` (for the joins
 * of enclosing statements, whose names bound before it may include it). */
static int flow_unbind(flow *f, const char *name)
{
	names_remove(&f->bound, name);
	return names_push(&f->deleted, name, strlen(name));
}

static int flow_unbind_node(flow *f, const oeap_pysource *src, TSNode id)
{
	char *n = oeap_pysource_text(src, id);
	if (!n)
		return -1;
	int rc = flow_unbind(f, n);
	free(n);
	return rc;
}

/* Collects the names a `del` target unbinds: a, (a), a, b, (a, b), [a, [b]];
 * an attribute or an item (`del a.x`, `del a[0]`) unbinds no name. */
static int visit_deleted(TSNode t, void *user)
{
	oeap_names *out = ((void **)user)[0];
	const oeap_pysource *src = ((void **)user)[1];
	if (!ts_node_is_named(t))
		return OEAP_PYSOURCE_WALK_SKIP;
	const char *type = ts_node_type(t);
	if (strcmp(type, "identifier") == 0)
		return names_add(out, src, t) ? -1 : OEAP_PYSOURCE_WALK_SKIP;
	return strcmp(type, "delete_statement") == 0 || strcmp(type, "expression_list") == 0 ||
	               strcmp(type, "tuple") == 0 || strcmp(type, "list") == 0 ||
	               strcmp(type, "parenthesized_expression") == 0
	           ? OEAP_PYSOURCE_WALK_DESCEND
	           : OEAP_PYSOURCE_WALK_SKIP;
}

static int deleted_names(const oeap_pysource *src, TSNode del, oeap_names *out)
{
	void *ctx[2] = {out, (void *)src};
	return oeap_pysource_walk(del, visit_deleted, ctx) < 0 ? -1 : 0;
}

static int flow_delete(flow *f, const oeap_pysource *src, TSNode st)
{
	oeap_names gone = {0};
	int rc = deleted_names(src, st, &gone);
	for (size_t i = 0; !rc && i < gone.n; i++)
		rc = flow_unbind(f, gone.items[i]);
	oeap_names_free(&gone);
	return rc;
}

/* The NAME of `except E as NAME:` / `except* E as NAME:` (a null node when
 * the handler names none). Python binds it for the handler and deletes it
 * when the handler ends, even when it was bound before the `try`. */
static TSNode handler_name(TSNode clause)
{
	for (uint32_t i = 0; i < ts_node_named_child_count(clause); i++) {
		TSNode c = ts_node_named_child(clause, i);
		if (strcmp(ts_node_type(c), "as_pattern") != 0)
			continue;
		TSNode t = ts_node_child_by_field_name(c, "alias", 5);
		if (!ts_node_is_null(t) && strcmp(ts_node_type(t), "as_pattern_target") == 0 &&
		    ts_node_named_child_count(t))
			t = ts_node_named_child(t, 0);
		if (!ts_node_is_null(t) && strcmp(ts_node_type(t), "identifier") == 0)
			return t;
		break;
	}
	return (TSNode){0};
}

/* Every name the statements inside a node may unbind, wherever they are:
 * `del` targets and handlers' `as` names. Only statements can unbind, so
 * the walk enters blocks, statements and clauses, not expressions, and not
 * nested functions or classes (what they delete is their own). */
static int visit_may_delete(TSNode n, void *user)
{
	oeap_names *out = ((void **)user)[0];
	const oeap_pysource *src = ((void **)user)[1];
	if (!ts_node_is_named(n))
		return OEAP_PYSOURCE_WALK_SKIP;
	const char *type = ts_node_type(n);
	size_t len = strlen(type);
	if (strcmp(type, "delete_statement") == 0)
		return deleted_names(src, n, out) ? -1 : OEAP_PYSOURCE_WALK_SKIP;
	if (strcmp(type, "except_clause") == 0 || strcmp(type, "except_group_clause") == 0) {
		TSNode as = handler_name(n);
		if (!ts_node_is_null(as) && names_add(out, src, as))
			return -1;
		return OEAP_PYSOURCE_WALK_DESCEND;
	}
	return strcmp(type, "block") == 0 || (len > 10 && strcmp(type + len - 10, "_statement") == 0) ||
	               (len > 7 && strcmp(type + len - 7, "_clause") == 0)
	           ? OEAP_PYSOURCE_WALK_DESCEND
	           : OEAP_PYSOURCE_WALK_SKIP;
}

static int may_delete(const oeap_pysource *src, TSNode node, oeap_names *out)
{
	void *ctx[2] = {out, (void *)src};
	return ts_node_is_null(node) ? 0 : oeap_pysource_walk(node, visit_may_delete, ctx) < 0 ? -1 : 0;
}

/* A statement whose paths are not followed (a loop, `with`, `match`, past
 * the depth we follow): it binds nothing for sure, and every name it may
 * unbind anywhere inside is unbound after it. */
static int flow_unfollowed(flow *f, const oeap_pysource *src, TSNode st)
{
	oeap_names gone = {0};
	int rc = may_delete(src, st, &gone);
	for (size_t i = 0; !rc && i < gone.n; i++)
		rc = flow_unbind(f, gone.items[i]);
	oeap_names_free(&gone);
	return rc;
}

/* `import a.b` binds a; `import a.b as c` and `from m import x as c` bind c. */
static int flow_import(flow *f, const oeap_pysource *src, TSNode st)
{
	int from = strcmp(ts_node_type(st), "import_from_statement") == 0;
	TSNode module = from ? ts_node_child_by_field_name(st, "module_name", 11) : (TSNode){0};
	for (uint32_t i = 0; i < ts_node_named_child_count(st); i++) {
		TSNode c = ts_node_named_child(st, i);
		if (from && ts_node_eq(c, module))
			continue;
		const char *type = ts_node_type(c);
		if (strcmp(type, "aliased_import") == 0) {
			if (bind_targets(f, src, ts_node_child_by_field_name(c, "alias", 5)))
				return -1;
		} else if (strcmp(type, "dotted_name") == 0 && ts_node_named_child_count(c)) {
			if (bind_targets(f, src, ts_node_named_child(c, 0)))
				return -1;
		}
	}
	return 0;
}

/*
 * Joins the paths that leave a branching statement normally: a name is bound
 * after it when every such path binds it; `del` on any such path may unbind.
 * `paths[i].ends` paths do not reach what follows and do not count, neither
 * what they bind nor what they delete (they return or raise; a handler that
 * catches the raise is a path of its own, which starts from everything its
 * `try` body may have deleted: flow_handler()).
 */
static int flow_join(flow *f, flow *paths, size_t n)
{
	oeap_names common = {0};
	int any = 0, rc = 0;
	for (size_t i = 0; i < n; i++) {
		if (paths[i].ends)
			continue;
		if (!any) {
			common = paths[i].bound;
			memset(&paths[i].bound, 0, sizeof(paths[i].bound));
			any = 1;
		} else {
			names_intersect(&common, &paths[i].bound);
		}
	}
	if (!any) {
		/* every path returns or raises: nothing after this statement runs */
		f->ends = 1;
		goto done;
	}
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; !paths[i].ends && k < paths[i].deleted.n; k++) {
			names_remove(&common, paths[i].deleted.items[k]);
			names_remove(&f->bound, paths[i].deleted.items[k]);
			if (names_push(&f->deleted, paths[i].deleted.items[k], strlen(paths[i].deleted.items[k])))
				rc = -1;
		}
	if (!rc)
		rc = names_move(&f->bound, &common);
done:
	oeap_names_free(&common);
	return rc;
}

/* The block of a clause (`else:`, `except E:`, `finally:`): its last named child. */
static TSNode clause_block(TSNode clause)
{
	TSNode b = ts_node_child_by_field_name(clause, "body", 4);
	if (ts_node_is_null(b))
		b = ts_node_child_by_field_name(clause, "consequence", 11);
	uint32_t n = ts_node_named_child_count(clause);
	if (ts_node_is_null(b) && n)
		b = ts_node_named_child(clause, n - 1);
	return b;
}

static int flow_if(flow *f, const oeap_pysource *src, TSNode st, int depth)
{
	flow paths[64];
	size_t n = 0;
	int has_else = 0, rc = 0, unfollowed = 0;
	memset(paths, 0, sizeof(paths));
	rc = flow_block(src, ts_node_child_by_field_name(st, "consequence", 11), SIZE_MAX, depth + 1, &paths[n++]);
	for (uint32_t i = 0; !rc && i < ts_node_named_child_count(st); i++) {
		TSNode c = ts_node_named_child(st, i);
		const char *type = ts_node_type(c);
		int is_else = strcmp(type, "else_clause") == 0;
		if (!is_else && strcmp(type, "elif_clause") != 0)
			continue;
		if (n == sizeof(paths) / sizeof(paths[0])) {
			/* a longer chain than we track: count none of its names */
			for (size_t k = 0; k < n; k++)
				flow_free(&paths[k]);
			memset(paths, 0, sizeof(paths));
			n = 1;
			has_else = 0;
			unfollowed = 1;
			break;
		}
		has_else |= is_else;
		rc = flow_block(src, clause_block(c), SIZE_MAX, depth + 1, &paths[n++]);
	}
	if (!rc && !has_else)
		n++; /* the implicit empty else: binds nothing, falls through */
	if (!rc)
		rc = flow_join(f, paths, n);
	if (!rc && unfollowed)
		rc = flow_unfollowed(f, src, st);
	for (size_t k = 0; k < n; k++)
		flow_free(&paths[k]);
	return rc;
}

/*
 * One handler of a `try`, as a path of its own. It may start after any
 * statement of the body, so it binds only what it binds itself, and every
 * name the body may delete anywhere (`maybe`, even one the body binds again
 * later) may be unbound in it. `except E as NAME` binds NAME for the handler
 * and deletes it when the handler ends (Python does, so that the traceback
 * does not keep the frame alive), even when NAME was bound before the `try`.
 */
static int flow_handler(const oeap_pysource *src, TSNode clause, const oeap_names *maybe, int depth, flow *p)
{
	for (size_t i = 0; i < maybe->n; i++)
		if (names_push(&p->deleted, maybe->items[i], strlen(maybe->items[i])))
			return -1;
	TSNode as = handler_name(clause);
	if (!ts_node_is_null(as) && bind_targets(p, src, as))
		return -1;
	if (flow_block(src, clause_block(clause), SIZE_MAX, depth + 1, p))
		return -1;
	return ts_node_is_null(as) ? 0 : flow_unbind_node(p, src, as);
}

/* try: the body (then `else`) or any handler leaves it; `finally` runs on every way out. */
static int flow_try(flow *f, const oeap_pysource *src, TSNode st, int depth)
{
	flow paths[64], fin;
	size_t n = 0;
	int rc = 0;
	TSNode fin_block = {0}, body = ts_node_child_by_field_name(st, "body", 4);
	oeap_names maybe = {0}; /* what the body may have deleted when a handler starts */
	memset(paths, 0, sizeof(paths));
	memset(&fin, 0, sizeof(fin));
	rc = flow_block(src, body, SIZE_MAX, depth + 1, &paths[n++]);
	if (!rc)
		rc = may_delete(src, body, &maybe);
	for (uint32_t i = 0; !rc && i < ts_node_named_child_count(st); i++) {
		TSNode c = ts_node_named_child(st, i);
		const char *type = ts_node_type(c);
		if (strcmp(type, "else_clause") == 0) {
			if (!paths[0].ends)
				rc = flow_block(src, clause_block(c), SIZE_MAX, depth + 1, &paths[0]);
		} else if (strcmp(type, "finally_clause") == 0) {
			fin_block = clause_block(c);
		} else if (strncmp(type, "except", 6) == 0) {
			if (n == sizeof(paths) / sizeof(paths[0])) {
				rc = 1; /* more handlers than we track: count nothing */
				break;
			}
			rc = flow_handler(src, c, &maybe, depth, &paths[n++]);
		}
	}
	if (rc > 0) {
		rc = flow_unfollowed(f, src, st);
	} else if (!rc) {
		rc = flow_join(f, paths, n);
		if (!rc && !ts_node_is_null(fin_block)) {
			int ended = f->ends;
			rc = flow_block(src, fin_block, SIZE_MAX, depth + 1, f);
			f->ends |= ended;
		}
	}
	for (size_t k = 0; k < n; k++)
		flow_free(&paths[k]);
	flow_free(&fin);
	oeap_names_free(&maybe);
	return rc;
}

static int add_parameter(oeap_names *names, const oeap_pysource *src, TSNode p)
{
	const char *type = ts_node_type(p);
	if (strcmp(type, "identifier") == 0)
		return names_add(names, src, p);
	TSNode name = ts_node_child_by_field_name(p, "name", 4);
	if (!ts_node_is_null(name))
		return add_parameter(names, src, name);
	/* typed_parameter, list_splat_pattern, dictionary_splat_pattern: first identifier */
	for (uint32_t i = 0; i < ts_node_named_child_count(p); i++) {
		TSNode c = ts_node_named_child(p, i);
		if (strcmp(ts_node_type(c), "identifier") == 0)
			return names_add(names, src, c);
	}
	return 0;
}

/* One statement, in order, into `f`. */
static int flow_statement(const oeap_pysource *src, TSNode st, int depth, flow *f)
{
	const char *type = ts_node_type(st);
	if (strcmp(type, "expression_statement") == 0) {
		for (uint32_t i = 0; i < ts_node_named_child_count(st); i++) {
			TSNode c = ts_node_named_child(st, i);
			const char *ct = ts_node_type(c);
			if ((strcmp(ct, "assignment") == 0 || strcmp(ct, "augmented_assignment") == 0) &&
			    flow_assignment(f, src, c))
				return -1;
		}
		return 0;
	}
	if (strcmp(type, "return_statement") == 0 || strcmp(type, "raise_statement") == 0 ||
	    strcmp(type, "break_statement") == 0 || strcmp(type, "continue_statement") == 0) {
		f->ends = 1;
		f->end_at = st;
		return 0;
	}
	if (strcmp(type, "decorated_definition") == 0)
		st = ts_node_child_by_field_name(st, "definition", 10), type = ts_node_type(st);
	if (strcmp(type, "function_definition") == 0 || strcmp(type, "class_definition") == 0)
		return bind_targets(f, src, ts_node_child_by_field_name(st, "name", 4));
	if (strcmp(type, "import_statement") == 0 || strcmp(type, "import_from_statement") == 0)
		return flow_import(f, src, st);
	if (strcmp(type, "delete_statement") == 0)
		return flow_delete(f, src, st);
	if (depth >= FLOW_MAX_DEPTH)
		return flow_unfollowed(f, src, st);
	if (strcmp(type, "if_statement") == 0) {
		if (flow_if(f, src, st, depth))
			return -1;
		if (f->ends && ts_node_is_null(f->end_at))
			f->end_at = st;
		return 0;
	}
	if (strcmp(type, "try_statement") == 0) {
		if (flow_try(f, src, st, depth))
			return -1;
		if (f->ends && ts_node_is_null(f->end_at))
			f->end_at = st;
		return 0;
	}
	/* for, while (may not run), with (its manager may swallow an exception
	 * of the body), match, global/nonlocal: nothing is bound for sure, and
	 * what they may delete is unbound. */
	return flow_unfollowed(f, src, st);
}

/* The statements of `block` that start before `before`, in order, into `f`. */
static int flow_block(const oeap_pysource *src, TSNode block, size_t before, int depth, flow *f)
{
	if (ts_node_is_null(block))
		return 0;
	/* Siblings by cursor: ts_node_named_child(body, i) walks from the
	 * first child each time, quadratic in the length of the body. */
	TSTreeCursor c = ts_tree_cursor_new(block);
	int rc = 0;
	for (int more = ts_tree_cursor_goto_first_child(&c); more && !f->ends;
	     more = ts_tree_cursor_goto_next_sibling(&c)) {
		TSNode st = ts_tree_cursor_current_node(&c);
		if (!ts_node_is_named(st) || strcmp(ts_node_type(st), "comment") == 0)
			continue;
		if (oeap_pysource_start(src, st) >= before)
			break;
		if ((rc = flow_statement(src, st, depth, f)))
			break;
	}
	ts_tree_cursor_delete(&c);
	return rc;
}

int oeap_scope_names(const oeap_pysource *src, TSNode function, size_t before, oeap_names *out)
{
	flow f;
	memset(&f, 0, sizeof(f));
	memset(out, 0, sizeof(*out));
	TSNode params = ts_node_child_by_field_name(function, "parameters", 10);
	for (uint32_t i = 0; !ts_node_is_null(params) && i < ts_node_named_child_count(params); i++)
		if (add_parameter(&f.bound, src, ts_node_named_child(params, i)))
			goto oom;
	if (flow_block(src, ts_node_child_by_field_name(function, "body", 4), before, 0, &f))
		goto oom;
	*out = f.bound;
	memset(&f.bound, 0, sizeof(f.bound));
	if (f.ends) {
		out->dead = 1;
		out->dead_line = ts_node_is_null(f.end_at) ? 0 : oeap_pysource_line_of(src, oeap_pysource_start(src, f.end_at));
	}
	names_normalise(out);
	flow_free(&f);
	return 0;
oom:
	flow_free(&f);
	oeap_names_free(out);
	return -1;
}

int oeap_names_has(const oeap_names *names, const char *name, size_t len)
{
	size_t lo = 0, hi = names->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const char *it = names->items[mid];
		size_t il = strlen(it);
		int c = memcmp(name, it, len < il ? len : il);
		if (c == 0)
			c = len < il ? -1 : len > il ? 1 : 0;
		if (c == 0)
			return 1;
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return 0;
}

void oeap_names_free(oeap_names *names)
{
	for (size_t i = 0; i < names->n; i++)
		free(names->items[i]);
	free(names->items);
	memset(names, 0, sizeof(*names));
}
