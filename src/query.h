/*
 * query.h - tree-sitter queries with their predicates evaluated.
 *
 * The tree-sitter C library parses `#eq?` and `#match?` but leaves their
 * evaluation to the caller; this module does it, so an
 * anchor query file means what it says. Supported: #eq?, #not-eq?, #match?,
 * #not-match? (POSIX extended regex), each against a string or a capture.
 */
#ifndef OEAP_QUERY_H
#define OEAP_QUERY_H

#include "pysource.h"

typedef struct oeap_query oeap_query;

/*
 * Compiles `source` (what = a name for messages, such as the file path). A
 * source in the subset query.c reads itself (named node patterns, fields,
 * anchors, captures, the four predicates at the top level: see there) is
 * matched by query.c without tree-sitter's query compiler, whose grammar
 * analysis costs more than the rest of loading a definition; every other
 * source, and every one that does not compile, goes to tree-sitter as before
 * (the same errors). The matches are the same either way.
 */
int oeap_query_new(const char *source, size_t len, const char *what, oeap_query **out,
                   oeap_error *err);
/*
 * oeap_query_new() always with tree-sitter's query compiler and engine, even
 * for a source in the subset that query.c matches itself: for comparing the
 * two (tests/unit/test_query.c).
 */
int oeap_query_new_treesitter(const char *source, size_t len, const char *what, oeap_query **out,
                              oeap_error *err);
/*
 * Compiles n query sources (whats[i] names sources[i]) as one tree-sitter
 * query that the n oeap_query values share: compiling costs about as much
 * per query whatever its size (the runtime analyses the grammar for each),
 * so one compile of a definition's queries costs much less than one each
 * (docs/performance.md). out[i] behaves exactly as oeap_query_new() of
 * sources[i] alone: its own patterns, captures and matches. Returns -1 (every
 * out[i] NULL) when they do not compile that way (a bad query, a pattern
 * spanning two sources, an unsupported predicate, no memory), with no error
 * message: the caller compiles each with oeap_query_new() for the exact one.
 */
int oeap_query_new_many(const char *const *sources, const size_t *lens, const char *const *whats, size_t n,
                        oeap_query **out);
void oeap_query_free(oeap_query *q);

/* 1 when q is compiled and matched by tree-sitter, 0 when query.c matches it. */
int oeap_query_uses_treesitter(const oeap_query *q);

/*
 * What tree-sitter's compiler alone finds in a query of the subset: a pattern
 * the grammar can never produce ("impossible pattern structure", such as
 * `(module (identifier))`), which query.c reads and which then never matches.
 * 0 when the query compiles with tree-sitter (always so for one it compiled),
 * else -1 with the error oeap_query_new() gave for it before the subset. For
 * the path where it matters, an anchor that finds nothing (anchor.c): the
 * definition is named as broken, not the file.
 */
int oeap_query_check_structure(const oeap_query *q, oeap_error *err);

/* 1 when one of the query's patterns has a capture named `capture`. */
int oeap_query_has_capture(const oeap_query *q, const char *capture);

/*
 * Runs `q` under `scope` and collects, in source order and without
 * duplicates, the nodes captured as `capture` by matches whose predicates
 * hold. When the query has a capture named "in", a match counts only when
 * its @in node is `scope` itself: that is how a query says "a direct child
 * of the scope" rather than "anywhere below it". *nodes is a new array the
 * caller frees (NULL when none).
 */
int oeap_query_collect(const oeap_query *q, const oeap_pysource *src, TSNode scope,
                       const char *capture, TSNode **nodes, size_t *count, oeap_error *err);

#endif
