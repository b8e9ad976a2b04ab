/*
 * py3check.h - what tree-sitter-python parses but Python 3 does not compile
 * (Python 2 forms, CPython's indentation rules): refused before a file is
 * patched, or apply and verify would call a module that cannot import
 * green. Run by the parse (pysource.c) on every file it accepts.
 */
#ifndef OEAP_PY3CHECK_H
#define OEAP_PY3CHECK_H

#include <stddef.h>
#include <tree_sitter/api.h>

#include "error.h"
#include "pysource.h"

/* Refuses (OEAP_ERR_INPUT naming the line) what tree-sitter parsed in `src` but Python 3 does not compile;
 * records the blocks' first statements in src->opens. 0, or -1 with `err`. */
int oeap_py3_check(oeap_pysource *src, const char *what, oeap_error *err);

/*
 * oeap_py3_check() of `src`, the text of `old` (which passed it) with the
 * insertions ins_at/ins_len (nins), looking only at the nodes that meet
 * `ranges` (nranges, parser offsets: tree-sitter's changed ranges and the
 * inserted bytes); py3check.c says why that is the same verdict.
 */
int oeap_py3_check_changed(oeap_pysource *src, const oeap_pysource *old, const size_t *ins_at, const size_t *ins_len,
                           size_t nins, const TSRange *ranges, size_t nranges, const char *what, oeap_error *err);

#endif
