/*
 * error.h - one error value carried through the pipeline.
 *
 * Every step that can fail fills an `oeap_error` and returns non-zero. The
 * error names *what* failed (an anchor name, "parse", "region:callsite",
 * the file path ...) separately from *why*, so the CLI can print
 * "oeapatch: <where>: <why>" and --json can report both fields.
 */
#ifndef OEAP_ERROR_H
#define OEAP_ERROR_H

#include <stddef.h>

/* Exit codes (as GNU patch and git apply use them; documented in docs/oeapatch.1). */
enum {
	OEAP_EXIT_OK = 0,      /* done, or the check holds */
	OEAP_EXIT_DIFFERS = 1, /* a check found a difference: not applied, drift, anchor lost */
	OEAP_EXIT_TROUBLE = 2, /* usage error or trouble (I/O, bad input, bad definition) */
};

typedef enum oeap_error_kind {
	OEAP_ERR_NONE = 0,
	OEAP_ERR_USAGE,     /* bad command line */
	OEAP_ERR_IO,        /* the file system said no */
	OEAP_ERR_INPUT,     /* the target cannot be patched safely (syntax, encoding ...) */
	OEAP_ERR_ANCHOR,    /* an anchor is missing or ambiguous */
	OEAP_ERR_REGION,    /* our regions are damaged (edited, duplicated, nested ...) */
	OEAP_ERR_DEFINITION,/* the patch definition itself is broken */
	OEAP_ERR_GIT,       /* libgit2 said no */
	OEAP_ERR_INTERNAL,
} oeap_error_kind;

typedef struct oeap_error {
	oeap_error_kind kind;
	char where[4160];  /* anchor / region / check / path that failed (a path: up to PATH_MAX) */
	char message[768]; /* why, in words a user can act on */
	long line;         /* 1-based line in the target, 0 when not about a line */
} oeap_error;

/* Fills `err` (when non-NULL) and returns -1, so callers can `return oeap_fail(...)`. */
int oeap_fail(oeap_error *err, oeap_error_kind kind, const char *where, long line,
              const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Clears `err`. */
void oeap_error_clear(oeap_error *err);

/* The exit code that an error of this kind maps to. */
int oeap_error_exit_code(const oeap_error *err);

#endif
