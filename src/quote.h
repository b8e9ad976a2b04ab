/*
 * quote.h - how bytes that may not be text are shown: in JSON documents,
 * in JUnit XML and in messages. One rule, so a reader decodes every place
 * the same way (docs/oeapatch.1, "--json").
 *
 * A string is shown as it is when it is UTF-8 that the format can carry and
 * does not itself start and end with a single quote (it would read as a
 * quoted form). Otherwise it is shown in its quoted form: between single quotes, each byte that is not part of a
 * character as \xNN (two lowercase hex digits), so are control characters
 * (U+0000-U+001F, U+007F) and the noncharacters U+FFFE and U+FFFF, and a
 * backslash or single quote inside as \\ and \'. The quoted form is plain
 * printable UTF-8: JSON, XML 1.0 and a terminal all carry it, and the bytes
 * come back exactly. Nothing is dropped or replaced.
 */
#ifndef OEAP_QUOTE_H
#define OEAP_QUOTE_H

#include <stddef.h>

/* The length (1-4) of the valid UTF-8 sequence at `p` (at most `left`
 * bytes: no overlong forms, no surrogates, at most U+10FFFF), 0 when the
 * byte at `p` starts none. */
size_t oeap_utf8_seq(const char *p, size_t left);

/* What the shown form must be able to carry. */
typedef enum oeap_quote_for {
	OEAP_QUOTE_JSON, /* any character (JSON escapes control characters itself) */
	OEAP_QUOTE_XML,  /* XML 1.0's Char: no control characters but tab, LF, CR; no U+FFFE/U+FFFF */
} oeap_quote_for;

/* 1 when `n` bytes at `s` must be shown in the quoted form for `fmt`. */
int oeap_quote_needed(const char *s, size_t n, oeap_quote_for fmt);

/* The quoted form of `n` bytes at `s` (NUL-terminated, caller frees); NULL
 * when memory ran out. */
char *oeap_quote(const char *s, size_t n);

/* `s` as one POSIX shell word, for the commands messages give to run: as
 * it is when it needs no quoting, else between single quotes (an inner one
 * as '\''). Written to `out` (cap bytes), truncated at a byte boundary when
 * it does not fit. This is for a shell, not the rule above. */
void oeap_shell_word(char *out, size_t cap, const char *s);

#endif
