#include "anchor.h"

#include <stdlib.h>
#include <string.h>

#include "buf.h"

/* Lists the lines of the nodes, "12, 40 and 77", for ambiguity messages. */
static void lines_list(const pysource *src, const TSNode *nodes, size_t n, char *out, size_t cap)
{
	size_t used = 0;
	out[0] = '\0';
	for (size_t i = 0; i < n && used + 24 < cap; i++) {
		const char *sep = i == 0 ? "" : (i + 1 == n ? " and " : ", ");
		used += (size_t)snprintf(out + used, cap - used, "%s%ld", sep,
		                         pysource_line_of(src, pysource_start(src, nodes[i])));
	}
}

/* With `contains`, keeps the candidates inside which that query matches. */
static int keep_containing(const oeap_anchor_def *a, const pysource *src, TSNode *nodes, size_t *n,
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

int oeap_anchors_resolve(const oeap_patchdef *def, const pysource *src, oeap_anchors *out,
                         oeap_error *err)
{
	out->items = calloc(def->nanchors ? def->nanchors : 1, sizeof(*out->items));
	out->n = 0;
	if (!out->items)
		return oeap_fail(err, OEAP_ERR_INTERNAL, "anchors", 0, "out of memory");
	for (size_t i = 0; i < def->nanchors; i++) {
		const oeap_anchor_def *a = &def->anchors[i];
		char where[160];
		TSNode scope = pysource_root(src);
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
			return oeap_fail(err, OEAP_ERR_ANCHOR, where, 0, "not found: %s is not in %s", a->describe,
			                 scope_what);
		}
		if (n > 1 && !a->pick_last) {
			char lines[256];
			lines_list(src, nodes, n, lines, sizeof(lines));
			long first = pysource_line_of(src, pysource_start(src, nodes[0]));
			free(nodes);
			return oeap_fail(err, OEAP_ERR_ANCHOR, where, first,
			                 "ambiguous: %zu candidates for %s (lines %s); refusing to guess", n,
			                 a->describe, lines);
		}
		oeap_resolved *r = &out->items[out->n++];
		r->def = a;
		r->node = nodes[n - 1];
		r->start = pysource_start(src, r->node);
		r->end = pysource_end(src, r->node);
		r->line = pysource_line_of(src, r->start);
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
static int names_add(oeap_names *names, const pysource *src, TSNode id)
{
	size_t s = pysource_start(src, id), e = pysource_end(src, id);
	char **p = realloc(names->items, (names->n + 1) * sizeof(*p));
	if (!p)
		return -1;
	names->items = p;
	if (!(p[names->n] = strndup(src->buf + s, e - s)))
		return -1;
	names->n++;
	return 0;
}

typedef struct names_walk {
	const pysource *src;
	oeap_names *names;
} names_walk;

/* Adds the identifiers a binding target binds: a, (a, b), [a, *b], a: int. */
static int visit_target(TSNode t, void *user)
{
	names_walk *w = user;
	if (!ts_node_is_named(t))
		return PYSOURCE_WALK_SKIP;
	const char *type = ts_node_type(t);
	if (strcmp(type, "identifier") == 0)
		return names_add(w->names, w->src, t) ? -1 : PYSOURCE_WALK_SKIP;
	/* attribute and subscript targets bind no name */
	return strcmp(type, "pattern_list") == 0 || strcmp(type, "tuple_pattern") == 0 ||
	               strcmp(type, "list_pattern") == 0 || strcmp(type, "list_splat_pattern") == 0 ||
	               strcmp(type, "parenthesized_expression") == 0
	           ? PYSOURCE_WALK_DESCEND
	           : PYSOURCE_WALK_SKIP;
}

static int add_targets(oeap_names *names, const pysource *src, TSNode t)
{
	names_walk w = {src, names};
	return ts_node_is_null(t) ? 0 : pysource_walk(t, visit_target, &w);
}

static int add_parameter(oeap_names *names, const pysource *src, TSNode p)
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

/* Adds the names assigned anywhere in statement `st` (not in nested
 * function or class bodies, which have scopes of their own). */
static int visit_assigned(TSNode st, void *user)
{
	names_walk *w = user;
	if (!ts_node_is_named(st))
		return PYSOURCE_WALK_SKIP;
	const char *type = ts_node_type(st);
	if (strcmp(type, "function_definition") == 0 || strcmp(type, "class_definition") == 0 ||
	    strcmp(type, "lambda") == 0)
		return PYSOURCE_WALK_SKIP;
	if ((strcmp(type, "assignment") == 0 || strcmp(type, "augmented_assignment") == 0) &&
	    add_targets(w->names, w->src, ts_node_child_by_field_name(st, "left", 4)))
		return -1;
	return PYSOURCE_WALK_DESCEND;
}

static int add_assigned(oeap_names *names, const pysource *src, TSNode st)
{
	names_walk w = {src, names};
	return pysource_walk(st, visit_assigned, &w);
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int oeap_scope_names(const pysource *src, TSNode function, size_t before, oeap_names *out)
{
	memset(out, 0, sizeof(*out));
	TSNode params = ts_node_child_by_field_name(function, "parameters", 10);
	for (uint32_t i = 0; !ts_node_is_null(params) && i < ts_node_named_child_count(params); i++)
		if (add_parameter(out, src, ts_node_named_child(params, i)))
			goto oom;
	TSNode body = ts_node_child_by_field_name(function, "body", 4);
	if (!ts_node_is_null(body)) {
		/* Siblings by cursor: ts_node_named_child(body, i) walks from the
		 * first child each time, quadratic in the length of the body. */
		TSTreeCursor c = ts_tree_cursor_new(body);
		int rc = 0;
		for (int more = ts_tree_cursor_goto_first_child(&c); more; more = ts_tree_cursor_goto_next_sibling(&c)) {
			TSNode st = ts_tree_cursor_current_node(&c);
			if (!ts_node_is_named(st))
				continue;
			if (pysource_start(src, st) >= before)
				break;
			if ((rc = add_assigned(out, src, st)))
				break;
		}
		ts_tree_cursor_delete(&c);
		if (rc)
			goto oom;
	}
	/* Sorted and unique, so that oeap_names_has() can search by halves. */
	if (out->n > 1) {
		qsort(out->items, out->n, sizeof(*out->items), name_cmp);
		size_t k = 1;
		for (size_t i = 1; i < out->n; i++) {
			if (strcmp(out->items[i], out->items[k - 1]) == 0)
				free(out->items[i]);
			else
				out->items[k++] = out->items[i];
		}
		out->n = k;
	}
	return 0;
oom:
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
	names->items = NULL;
	names->n = 0;
}
