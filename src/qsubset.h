/*
 * qsubset.h - the definitions' own matcher: a query file written in the
 * subset qsubset.c describes is read and matched there, without
 * tree-sitter's query compiler (its grammar analysis costs more than the
 * rest of loading a definition). Internal to the query module (query.h).
 */
#ifndef OEAP_QSUBSET_H
#define OEAP_QSUBSET_H

#include <stddef.h>
#include <stdint.h>

#include "query_impl.h"

/* Reads `source` in the subset into a new query (q NULL); NULL when it is
 * not in it (or memory ran out): the caller compiles it with tree-sitter. */
oeap_query *oeap_qsubset_read(const char *source, size_t len, const char *what);

/* Frees what the subset reader allocated in `q` (its steps, patterns, names, source), not `q`. */
void oeap_qsubset_free_own(oeap_query *q);

/* The index of the capture named `capture`, QNONE when none. */
uint32_t oeap_qsubset_capture(const oeap_query *q, const char *capture);

/* oeap_query_collect() for a query of the subset: the same nodes, unsorted and not de-duplicated
 * (*nodes: caller frees). 0, or -1 with `err`. */
int oeap_qsubset_collect(const oeap_query *q, const oeap_pysource *src, TSNode scope, uint32_t cap_id, TSNode **nodes,
                         size_t *count, oeap_error *err);

#endif
