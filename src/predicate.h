/*
 * predicate.h - the four query predicates (#eq?, #not-eq?, #match?,
 * #not-match?), one rule for both engines of query.h, so that a query means
 * the same whichever engine matches it.
 */
#ifndef OEAP_PREDICATE_H
#define OEAP_PREDICATE_H

#include "error.h"

/*
 * Whether `left` equals (or, `is_match`, matches the POSIX extended regular
 * expression) `right`; `negate` for the not- forms. An operand its match did
 * not capture (`left_set` or `right_set` 0) constrains nothing: 1, never so
 * in a complete match. A captured operand without its text (NULL: memory ran
 * out reading it) is an error, never a verdict. 1 holds, 0 does not, -1 with
 * `err` (naming `what`, the query): out of memory, or a bad expression.
 */
int oeap_predicate_eval(const char *what, int is_match, int negate, int left_set, const char *left, int right_set,
                        const char *right, oeap_error *err);

#endif
