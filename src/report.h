/*
 * report.h - what the commands print: messages, unified diffs, JSON, and the
 * report of named checks that verify, status and check fill and print.
 *
 * Results go to stdout, messages to stderr as "oeapatch: <what>: <why>",
 * colour only on a terminal (and never with NO_COLOR set). JSON follows
 * ast-grep's shape per finding: file, byte range, line/column range, what
 * matched (the anchor) and what was written.
 */
#ifndef OEAP_REPORT_H
#define OEAP_REPORT_H

#include <jansson.h>
#include <stdio.h>

#include "buf.h"
#include "edit.h"
#include "error.h"
#include "patchdef.h"

/* One named check of verify, in the order they ran (a report). */
typedef struct oeap_check {
	char name[64];     /* the target's bytes (pipeline.c): "parse", "markers", "applied", "version",
	                      "regions", "integrity:<r>", "anchors", "placement:<r>", "names:<r>",
	                      "content:<r>"; beside them: "binding", "library" (binding.c),
	                      "settings" (cmd_verify.c), "import:target", "import:binding"
	                      (importsys.c), "bytecode" (pycache.c), "trust", "trust:target",
	                      "trust:binding", "trust:library", "trust:bytecode" (trust checks);
	                      docs/oeapatch.1 lists them for users */
	int ok;
	int warning;       /* holds (ok), but with something the user must hear about ("WARN") */
	long line;         /* 1-based line the check is about, 0 when none */
	char detail[768];  /* what held, or what failed and why */
} oeap_check;

typedef struct oeap_report {
	oeap_check *checks;
	size_t n;
	int applied;       /* regions of this patch were found */
	int version;       /* their version (0 when not applied) */
	int ok;            /* every check holds */
} oeap_report;

/* Adds a check to a report (it keeps `ok` up to date). Returns -1 on OOM. */
int oeap_report_add(oeap_report *rep, const char *name, int ok, long line, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
/* Adds a check that holds with a warning (printed "WARN"; it does not fail the report). */
int oeap_report_warn(oeap_report *rep, const char *name, long line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
void oeap_report_free(oeap_report *rep);

/* "oeapatch: <fmt>" on stderr. */
void oeap_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Prints an error as "oeapatch: <where>: <message>" (with the line when known). */
void oeap_print_error(const oeap_error *err);

/* --color: never, always, or auto (a terminal without NO_COLOR; the default). */
typedef enum oeap_color { OEAP_COLOR_AUTO = 0, OEAP_COLOR_NEVER, OEAP_COLOR_ALWAYS } oeap_color;
void oeap_set_color(oeap_color mode);

/* 1 when `f` should get colour: --color=always (it wins over NO_COLOR, as
 * an explicit request should), never with --color=never, else on a
 * terminal unless NO_COLOR is set. */
int oeap_use_color(FILE *f);

/* SGR sequences for verdicts, or "" when `f` gets no colour. */
const char *oeap_color_good(FILE *f);
const char *oeap_color_bad(FILE *f);
const char *oeap_color_reset(FILE *f);

/* Writes a unified diff to `f`, coloured as git colours it when `f` gets colour. */
void oeap_print_diff(const char *diff, size_t len, FILE *f);

/* A unified diff (git's format, from libgit2) between two versions of `path`;
 * `old` NULL: the file is created, `new_` NULL: it is deleted. */
int oeap_diff(const char *path, const char *old, size_t oldlen, const char *new_, size_t newlen,
              oeap_buf *out, oeap_error *err);

/* Every string that is not one of our own names (a path, a commit subject,
 * a message, a value read from outside) goes into a JSON document through
 * one of these: jansson refuses bytes that are not UTF-8 (json_string
 * returns NULL, and the member, or with json_pack the whole entry, would
 * silently go missing). The bytes as they are, or their quoted form where
 * oeap_quote_needed says so (quote.h). `s` NULL gives JSON null. NULL only
 * when memory ran out. */
json_t *oeap_json_str(const char *s);
json_t *oeap_json_strn(const char *s, size_t n);

/* "NAME/VERSION" of a patch definition, as the documents name it. */
json_t *oeap_json_patch(const oeap_patchdef *def);

/* JSON pieces shared by the commands. */
json_t *oeap_json_error(const oeap_error *err);
json_t *oeap_json_checks(const oeap_report *rep);
/* The insertions of a plan, as written into `out` (the new bytes). */
json_t *oeap_json_insertions(const oeap_plan *plan, const char *file, const char *out, size_t out_len);

/* Prints `j` (stolen) on stdout, one document, and a newline. */
int oeap_json_emit(json_t *j);

/* Prints a verify report in human form on stdout. */
void oeap_print_checks(const oeap_report *rep);

#endif
