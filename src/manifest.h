/*
 * manifest.h - reading a definition's patch.ini (inih) into an
 * oeap_patchdef, and the lexical rules the definition's modules share.
 * Internal to the definition's rooms (patchdef.c, manifest.c, settingdef.c,
 * patchdirs.c): everyone else loads a definition with patchdef.h.
 */
#ifndef OEAP_MANIFEST_H
#define OEAP_MANIFEST_H

#include <stddef.h>

#include "error.h"
#include "patchdef_types.h"

/* Parses the manifest `text` (read from `path`, named in messages) into `def`'s fields. 0, or -1 with `err`
 * naming the section and line. What needs the whole manifest (required keys, the files it names) is
 * patchdef.c's. */
int oeap_manifest_parse(oeap_patchdef *def, const char *path, const char *text, oeap_error *err);

/* Reads a file the definition names; a missing one is a broken definition (OEAP_ERR_DEFINITION naming
 * `section`). */
int oeap_def_read_file(const char *path, const char *section, char **data, size_t *len, oeap_error *err);

/* 1 when `s` is an identifier: [A-Za-z_][A-Za-z0-9_]*. */
int oeap_def_is_identifier(const char *s);

/* Frees a NULL-terminated word list (NULL is fine). */
void oeap_def_words_free(char **w);

#endif
