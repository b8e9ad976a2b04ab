/*
 * tsquery.h - queries outside the subset (qsubset.h): compiled by
 * tree-sitter, alone or several as one
 * query, and run with its query cursor, the predicates evaluated here (the C
 * library leaves them to the caller). Internal to the query module.
 */
#ifndef OEAP_TSQUERY_H
#define OEAP_TSQUERY_H

#include <stddef.h>
#include <stdint.h>

#include "query_impl.h"

/* oeap_query_new_treesitter() (query.h). */
int oeap_tsquery_new(const char *source, size_t len, const char *what, oeap_query **out, oeap_error *err);

/* oeap_query_new_many() by tree-sitter: the n sources as one compiled query (query.h says when it
 * refuses). */
int oeap_tsquery_new_many(const char *const *sources, const size_t *lens, const char *const *whats, size_t n,
                          oeap_query **out);

/* The id of the capture named `capture` that one of q's own patterns uses (UINT32_MAX when none). */
uint32_t oeap_tsquery_capture(const oeap_query *q, const char *capture);

/* oeap_query_collect() for a tree-sitter query: the nodes captured as `cap_id` by matches whose
 * predicates hold (and whose @in is `scope`, when the query has one), unsorted (*nodes: caller frees). */
int oeap_tsquery_collect(const oeap_query *q, const oeap_pysource *src, TSNode scope, uint32_t cap_id, TSNode **nodes,
                         size_t *count, oeap_error *err);

#endif
