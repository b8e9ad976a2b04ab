/*
 * target.h - where the target file of a definition is: from a folder upward
 * (a checkout, or a site-packages folder), or where an interpreter imports
 * its package from (--python, asked without importing it). Used by the
 * opening of a command (cli.c) and by detection (detect.h).
 */
#ifndef OEAP_TARGET_H
#define OEAP_TARGET_H

#include <limits.h>
#include <stddef.h>
#include <sys/stat.h>

#include "cli_types.h"
#include "error.h"
#include "patchdef.h"

/* The first of the alternatives `alts` (NULL-terminated, may be NULL) that
 * exists under `dir`, or NULL: the definition's order of preference. */
const char *oeap_target_first_existing(const char *dir, char *const *alts, struct stat *st);

/* Cuts the last component off an absolute path; 0 when it was "/". */
int oeap_target_parent(char *dir);

/* Does `dir` look like a folder pip installs into: named site-packages or dist-packages, or holding a
 * *.dist-info folder (a --target or --prefix install)? A checkout holds none. */
int oeap_target_is_site(const char *dir);

/*
 * From `start` (absolute) upward, as git searches for .git: the first folder
 * where the definition's target (a checkout) or its installed_target (a
 * site-packages folder) exists; *root (caller frees), *layout and *rel (the
 * alternative found, borrowed from `def`) say which. An installed match
 * gives way to a checkout further up that holds the very same file. -1 when
 * memory ran out.
 */
int oeap_target_find_root(const oeap_patchdef *def, const char *start, char **root, oeap_layout *layout,
                          const char **rel);

/* The top-level package of the installed layout (installed_target's first component) into `out`; -1 when
 * the definition has none or it does not fit. */
int oeap_target_package(const oeap_patchdef *def, char *out, size_t cap);

/*
 * --python: asks the interpreter where it would import each of `pkgs` from,
 * in one start whatever their number. locs[i] gets the package's folder, or
 * "" when the interpreter does not import it; the interpreter's path and
 * version go to cli. Returns 0, or -1 with err filled when it cannot answer.
 */
int oeap_target_python_ask(oeap_cli *cli, char *const *pkgs, size_t n, char (*locs)[PATH_MAX + 2], oeap_error *err);

/* --python for the definition chosen: the folder that holds the package that interpreter imports (*out,
 * caller frees). Detection's answer (cli->python_package) stands when it asked already. */
int oeap_target_python_root(oeap_cli *cli, char **out, oeap_error *err);

/* The alternatives after the first, as " or B or C" (empty for one path), for messages. Static storage. */
const char *oeap_target_alternatives(char *const *alts);

/* The not-found error: where it looked from (`start`) and what -C and --python take. Returns -1. */
int oeap_target_not_found(const oeap_cli *cli, const char *start, oeap_error *err);

#endif
