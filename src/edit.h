/*
 * edit.h - plans: what to insert where, rendered for one file; and the bytes
 * a plan produces.
 *
 * A plan is computed on the *original* bytes (our regions stripped), so the
 * same function serves apply (plan, then insert), verify (plan again and
 * compare with what is there) and check (plan on a git blob).
 */
#ifndef OEAP_EDIT_H
#define OEAP_EDIT_H

#include "anchor.h"
#include "buf.h"
#include "patchdef.h"
#include "pysource.h"

typedef struct oeap_bound_arg {
	const char *keyword; /* borrowed from the definition */
	const char *expr;    /* borrowed from the definition */
} oeap_bound_arg;

typedef struct oeap_insertion {
	const oeap_region_def *region;
	const oeap_resolved *anchor; /* the anchor the region follows (in plan->anchors) */
	size_t offset;  /* in the original bytes: start of the line after the anchor */
	char *text;     /* the whole region, markers included, as it will be written */
	size_t len;
	char *indent;   /* the indentation the region's lines start with */
	oeap_bound_arg *args; /* the arguments bound for this file's scope */
	size_t nargs;
} oeap_insertion;

typedef struct oeap_plan {
	oeap_anchors anchors;
	oeap_insertion *items; /* sorted by offset */
	size_t n;
} oeap_plan;

/* Resolves the anchors of `def` on `src` and renders every region. */
int oeap_plan_build(const oeap_patchdef *def, const oeap_pysource *src, oeap_plan *plan,
                    oeap_error *err);
void oeap_plan_free(oeap_plan *plan);

/* The bytes of `buf` with the plan's insertions made. */
int oeap_plan_apply(const char *buf, size_t len, const oeap_plan *plan, oeap_buf *out);

/* Where insertion i starts in the output of oeap_plan_apply(). */
size_t oeap_plan_output_offset(const oeap_plan *plan, size_t i);

/* The file's indentation unit ("    ", "\t", ...), from its first indented block. */
int oeap_indent_unit(const oeap_pysource *src, char *unit, size_t cap);

#endif
