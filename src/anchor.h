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

int oeap_anchors_resolve(const oeap_patchdef *def, const pysource *src, oeap_anchors *out,
                         oeap_error *err);
void oeap_anchors_free(oeap_anchors *a);
const oeap_resolved *oeap_anchors_get(const oeap_anchors *a, const char *name);

/* Names bound in a function by the time control reaches `before`: its
 * parameters and every name assigned (at any depth, on any path) by the
 * body's top-level statements that start before `before`. The routing chain
 * binds topk_weights, topk_ids in every branch, so "on some path" is the
 * right question for the place right after it. */
typedef struct oeap_names {
	char **items;
	size_t n;
} oeap_names;

int oeap_scope_names(const pysource *src, TSNode function, size_t before, oeap_names *out);
int oeap_names_has(const oeap_names *names, const char *name, size_t len);
void oeap_names_free(oeap_names *names);

#endif
