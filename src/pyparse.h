/*
 * pyparse.h - parsing bytes into a oeap_pysource (pysource.h), from scratch or
 * incrementally from an earlier parse of nearly the same bytes; every parse
 * refuses what pysource.h says cannot be patched safely, Python 2 and bad
 * indentation included (py3check.h).
 */
#ifndef OEAP_PYPARSE_H
#define OEAP_PYPARSE_H

#include <stddef.h>

#include "error.h"
#include "pysource.h"

/*
 * Parses `buf` (borrowed). On success *out is a new oeap_pysource the caller frees
 * with oeap_pysource_free(). `what` names the file in messages.
 */
int oeap_pysource_parse(const char *buf, size_t len, const char *what, oeap_pysource **out,
                   oeap_error *err);

/*
 * Parses `buf` (borrowed), which is `old`'s bytes with whole-text insertions
 * made: ins_at[i] (offsets into `buf`, ascending) each ins_len[i] bytes long.
 * tree-sitter re-parses only around the edits (incremental parsing), which
 * gives the same tree as a fresh parse at a fraction of the cost. Refuses
 * what oeap_pysource_parse refuses. `old` passed the Python 3 check, so only the
 * nodes in the ranges the insertions changed (tree-sitter's changed ranges
 * and the inserted bytes) are checked again: outside them the tree is `old`'s.
 */
int oeap_pysource_parse_inserted(const oeap_pysource *old, const char *buf, size_t len, const size_t *ins_at,
                            const size_t *ins_len, size_t n, const char *what, oeap_pysource **out,
                            oeap_error *err);

/* One change between two texts: bytes [old_start, old_end) of the old text
 * became bytes [new_start, new_end) of the new one (absolute offsets, BOM
 * included). */
typedef struct oeap_pysource_edit {
	size_t old_start, old_end;
	size_t new_start, new_end;
} oeap_pysource_edit;

/*
 * Parses `buf` (borrowed), which is `old`'s bytes with the changes `edits`
 * made (n of them, ascending, not overlapping; the bytes between them equal
 * in both texts). tree-sitter reuses `old`'s tree outside the changed ranges
 * (incremental parsing): `check` parses each revision from the previous one.
 * `old`'s bytes (old->buf) must still be alive. The result is what
 * oeap_pysource_parse(buf) gives, and so are the refusals.
 */
int oeap_pysource_parse_edits(const oeap_pysource *old, const char *buf, size_t len, const oeap_pysource_edit *edits, size_t n,
                         const char *what, oeap_pysource **out, oeap_error *err);

#endif
