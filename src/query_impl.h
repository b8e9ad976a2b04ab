/*
 * query_impl.h - what a compiled query is, shared by the query API
 * (query.c) and its two engines: the subset's own matcher (qsubset.h) and
 * tree-sitter's (tsquery.h). Internal to those three files.
 */
#ifndef OEAP_QUERY_IMPL_H
#define OEAP_QUERY_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include <tree_sitter/api.h>

#include "error.h"
#include "pysource.h"

/* As query.h declares it (C11 allows the repeat): this header stays below query.h. */
typedef struct oeap_query oeap_query;

/* A step of a pattern of the subset (qsubset.c): a node and what it demands. */
typedef struct qstep {
	TSSymbol symbol;
	TSFieldId field;      /* 0: any */
	uint32_t capture;     /* index into names, QNONE: none */
	unsigned immediate:1; /* `.` before it */
	unsigned last:1;      /* `.` after it */
	unsigned captures:1;  /* it or a step below it captures */
	uint32_t child;       /* its first child step, QNONE: none */
	uint32_t next;        /* the next child step of its parent, QNONE: none */
} qstep;

typedef struct qpred {
	unsigned negate:1, is_match:1, right_is_capture:1;
	uint32_t left, right; /* capture indexes (right: when right_is_capture) */
	char *str;            /* the string operand */
} qpred;

typedef struct qpattern {
	uint32_t root;        /* its first step */
	qpred *preds;
	size_t npreds;
} qpattern;

#define QNONE UINT32_MAX

/*
 * One query file. Either a tree-sitter query (q), or, for a file in the
 * subset, its patterns as qsubset.c matches them (q NULL). Several
 * files may share one compiled TSQuery (oeap_query_new_many): then this one
 * is the patterns [first, end) of it, and `refs` counts the oeap_query values
 * sharing `q`.
 */
struct oeap_query {
	TSQuery *q;
	uint32_t first, end;
	unsigned *refs;
	char what[256];
	qstep *steps;
	size_t nsteps;
	qpattern *pats;
	size_t npats;
	char **names;         /* capture names */
	size_t nnames;
	char *source;         /* the text, for oeap_query_check_structure() */
	size_t len;
};

#endif
