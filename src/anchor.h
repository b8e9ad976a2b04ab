/*
 * anchor.h - resolving a definition's anchors on one parsed source.
 *
 * Anchors are resolved in definition order; an anchor `in` another one runs
 * its query on that anchor's node and keeps only matches whose @in capture
 * (when the query has one) is that very node, so "the chain of
 * select_experts" never picks a chain of a nested function. Each anchor is
 * unique (or, with pick = last, the last match), or resolution fails naming
 * the anchor, what it is, and why (not found / found N times, with lines).
 */
#ifndef OEAP_ANCHOR_H
#define OEAP_ANCHOR_H

#include "patchdef.h"
#include "pysource.h"

typedef struct oeap_resolved {
	const oeap_anchor_def *def;
	TSNode node;
	size_t start, end; /* absolute byte offsets */
	long line;         /* 1-based line of start */
} oeap_resolved;

typedef struct oeap_anchors {
	oeap_resolved *items; /* parallel to def->anchors */
	size_t n;
} oeap_anchors;

int oeap_anchors_resolve(const oeap_patchdef *def, const oeap_pysource *src, oeap_anchors *out,
                         oeap_error *err);
void oeap_anchors_free(oeap_anchors *a);
const oeap_resolved *oeap_anchors_get(const oeap_anchors *a, const char *name);

/* Names bound in a function on every path by which control reaches
 * `before` (a place between the body's top-level statements): its
 * parameters and the names its statements before `before` bind on every
 * path (a name assigned in one branch of an `if` only is not bound: on the
 * other path it raises UnboundLocalError). `dead` is set when no path gets
 * there at all (every branch returns or raises): code inserted there never
 * runs. */
typedef struct oeap_names {
	char **items;
	size_t n;
	int dead;        /* `before` is unreachable */
	long dead_line;  /* the statement that ends every path (1-based), 0 if unknown */
} oeap_names;

int oeap_scope_names(const oeap_pysource *src, TSNode function, size_t before, oeap_names *out);
int oeap_names_has(const oeap_names *names, const char *name, size_t len);
void oeap_names_free(oeap_names *names);

#endif
