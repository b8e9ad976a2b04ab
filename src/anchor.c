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
			return oeap_fail(err, OEAP_ERR_ANCHOR, where, 0, "not found: no %s in %s", a->describe,
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

static int names_add(oeap_names *names, const pysource *src, TSNode id)
{
	size_t s = pysource_start(src, id), e = pysource_end(src, id);
	if (oeap_names_has(names, src->buf + s, e - s))
		return 0;
	char **p = realloc(names->items, (names->n + 1) * sizeof(*p));
	if (!p)
		return -1;
	names->items = p;
	if (!(p[names->n] = strndup(src->buf + s, e - s)))
		return -1;
	names->n++;
	return 0;
}

/* Adds the identifiers a binding target binds: a, (a, b), [a, *b], a: int. */
static int add_targets(oeap_names *names, const pysource *src, TSNode t)
{
	const char *type = ts_node_type(t);
	if (strcmp(type, "identifier") == 0)
		return names_add(names, src, t);
	if (strcmp(type, "pattern_list") == 0 || strcmp(type, "tuple_pattern") == 0 ||
	    strcmp(type, "list_pattern") == 0 || strcmp(type, "list_splat_pattern") == 0 ||
	    strcmp(type, "parenthesized_expression") == 0) {
		for (uint32_t i = 0; i < ts_node_named_child_count(t); i++)
			if (add_targets(names, src, ts_node_named_child(t, i)))
				return -1;
	}
	return 0; /* attribute and subscript targets bind no name */
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
static int add_assigned(oeap_names *names, const pysource *src, TSNode st)
{
	const char *type = ts_node_type(st);
	if (strcmp(type, "function_definition") == 0 || strcmp(type, "class_definition") == 0 ||
	    strcmp(type, "lambda") == 0)
		return 0;
	if (strcmp(type, "assignment") == 0 || strcmp(type, "augmented_assignment") == 0) {
		if (add_targets(names, src, ts_node_child_by_field_name(st, "left", 4)))
			return -1;
	}
	for (uint32_t i = 0; i < ts_node_named_child_count(st); i++)
		if (add_assigned(names, src, ts_node_named_child(st, i)))
			return -1;
	return 0;
}

int oeap_scope_names(const pysource *src, TSNode function, size_t before, oeap_names *out)
{
	memset(out, 0, sizeof(*out));
	TSNode params = ts_node_child_by_field_name(function, "parameters", 10);
	for (uint32_t i = 0; !ts_node_is_null(params) && i < ts_node_named_child_count(params); i++)
		if (add_parameter(out, src, ts_node_named_child(params, i)))
			goto oom;
	TSNode body = ts_node_child_by_field_name(function, "body", 4);
	for (uint32_t i = 0; !ts_node_is_null(body) && i < ts_node_named_child_count(body); i++) {
		TSNode st = ts_node_named_child(body, i);
		if (pysource_start(src, st) >= before)
			break;
		if (add_assigned(out, src, st))
			goto oom;
	}
	return 0;
oom:
	oeap_names_free(out);
	return -1;
}

int oeap_names_has(const oeap_names *names, const char *name, size_t len)
{
	for (size_t i = 0; i < names->n; i++)
		if (strlen(names->items[i]) == len && memcmp(names->items[i], name, len) == 0)
			return 1;
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
