/*
 * gitrepo.h - the git side of a checkout, through libgit2: opening the
 * repository that holds it, its work tree's top, commits named by a
 * revision, and the blobs of their trees.
 *
 * Nothing here writes to the repository or its work tree: `check` and
 * `verify --ref` read the object database only, so they work on bare
 * repositories and mirrors too. The caller pairs git_libgit2_init/shutdown
 * (main.c does it around every command).
 */
#ifndef OEAP_GITREPO_H
#define OEAP_GITREPO_H

#include <git2.h>
#include <stddef.h>

#include "error.h"

/*
 * Fills `err` (kind OEAP_ERR_GIT) with "<what>: <git_error_last()>" and
 * returns -1. `where` names the thing (a revision, a path, "repository").
 */
int oeap_git_fail(oeap_error *err, const char *where, const char *what);

/*
 * Opens the repository that holds `dir` (searching upward, bare ones too).
 * *prefix (caller frees) is `dir`'s path inside the work tree with a
 * trailing '/' ("" at the top, and for bare repositories), so a checkout
 * that is a sub-directory of a larger repository still finds its target.
 */
int oeap_repo_open(const char *dir, git_repository **repo, char **prefix, oeap_error *err);

/* The work tree's top-level directory without a trailing '/', or NULL for
 * a bare repository. Caller frees. */
char *oeap_repo_toplevel(git_repository *repo);

/*
 * The blob at `path` in `commit`'s tree. Returns 0 and fills *id (and
 * *data and *len when `data` is non-NULL: a NUL-terminated copy, caller frees),
 * 1 when the path is not a file in that commit, -1 on a git error.
 */
int oeap_commit_blob(git_repository *repo, const git_commit *commit, const char *path, git_oid *id,
                     char **data, size_t *len, oeap_error *err);

/*
 * Resolves `rev` (anything git_revparse_single takes) to a commit. Returns
 * 0, or -1 with a message that says what `rev` is when it is not a commit
 * (and that HEAD is unborn, when it is).
 */
int oeap_resolve_commit(git_repository *repo, const char *rev, git_commit **out, oeap_error *err);

/* The blob at `path` in `tree`: 0 found (*id set), 1 absent (or not a file), -1 error. */
int oeap_tree_blob(const git_tree *tree, const char *path, git_oid *id, oeap_error *err);

/* The blob `id` as a NUL-terminated copy in *data (caller frees), *len its size. 0, or -1 with err filled. */
int oeap_blob_read(git_repository *repo, const git_oid *id, char **data, size_t *len, oeap_error *err);

#endif
