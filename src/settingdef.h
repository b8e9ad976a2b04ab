/*
 * settingdef.h - the settings a definition declares ([setting:NAME] of
 * patch.ini): their checks when the definition loads, and the rule every
 * value of one must hold.
 */
#ifndef OEAP_SETTINGDEF_H
#define OEAP_SETTINGDEF_H

#include <stddef.h>

#include "error.h"
#include "patchdef_types.h"

/* Checks the settings `def`'s manifest declared (names, types, ranges, defaults against the value rule,
 * cross rules, one switch at most) and fills each key left to its default. 0, or -1 with `err` naming the
 * section (OEAP_ERR_DEFINITION). */
int oeap_settingdefs_check(oeap_patchdef *def, oeap_error *err);

/*
 * The value rule of a setting, one for every value, the binding's (its
 * parse_settings follows the same, and tests/e2e/test_settings_crosscheck.py
 * holds both to it): surrounding ASCII blanks (space, tab, CR, LF, VT, FF)
 * are ignored; a value that is then empty is unset (the default). An int is
 * an optional sign and ASCII digits (leading zeros allowed, no '_', no other
 * digits) within the 32-bit signed range and the setting's min..max; a
 * boolean is one of the definition's spellings, ASCII case-insensitive; a
 * string or path is any value. It lives with the definition because loading
 * one checks each default against it (oeap_settingdefs_check).
 *
 * oeap_setting_parse: 0 and *out set (ints; booleans 0/1; strings and
 * paths: 0 with *out 0), 1 when blank (unset: the default applies), -1 when
 * `raw` breaks the rule of `s`.
 */
int oeap_setting_parse(const oeap_patchdef *def, const oeap_setting_def *s, const char *raw, long long *out);

/* The type's name as patch.ini spells it ("int", "choice", ...). */
const char *oeap_setting_type_name(oeap_setting_type t);

/* [*start, *end) of `raw` without its surrounding ASCII blanks: the part of a value the rule reads. */
void oeap_setting_trim(const char *raw, const char **start, const char **end);

/* What `s` takes, in words: "an integer in 1..1024", "a boolean (true/1/yes/y or false/0/no/n)". */
void oeap_setting_expected(const oeap_patchdef *def, const oeap_setting_def *s, char *buf, size_t cap);

/* The whole of what a refused value of `s` is told: oeap_setting_expected, its range_reason in
 * parentheses, and the bands it also takes. verify says it, the binding's table carries it. */
void oeap_setting_expected_full(const oeap_patchdef *def, const oeap_setting_def *s, char *buf, size_t cap);

#endif
