/*
 * history.h - the git side of a checkout, through libgit2: opening the
 * repository, the target's blob at a revision, the revisions that touched
 * it (following renames), and the patch dry-run on such a blob.
 *
 * Nothing here writes to the repository or its work tree: `check` and
 * `verify --ref` read the object database only, so they work on bare
 * repositories and mirrors too. The caller pairs git_libgit2_init/shutdown
 * (main.c does it around every command).
 */
#ifndef OEAP_HISTORY_H
#define OEAP_HISTORY_H

#include <git2.h>
#include <stddef.h>

#include "error.h"
#include "patchdef.h"
#include "pipeline.h"

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

/* What a revision is to the target file. */
typedef enum oeap_rev_kind {
	OEAP_REV_NAMED = 0, /* named by the user: checked whether or not it touched the file */
	OEAP_REV_CHANGED,   /* the file differs from the first parent's (or the parent lacks it) */
	OEAP_REV_DELETED,   /* the file is gone in this commit, its first parent had it */
} oeap_rev_kind;

typedef struct oeap_rev {
	git_oid commit;
	char short_id[GIT_OID_HEXSZ + 1];
	char date[11];       /* YYYY-MM-DD in the committer's time zone */
	char *subject;       /* first line of the message */
	char *path;          /* the target's path in this commit (differs after a rename) */
	char *renamed_from;  /* the path in the first parent when this commit renamed it */
	oeap_rev_kind kind;
	int has_blob;        /* 0: no file at `path` in this commit */
	git_oid blob;
	git_time_t time;     /* committer time: orders revisions gathered by several walks */
} oeap_rev;

typedef struct oeap_revs {
	oeap_rev *items;
	size_t n;
	size_t cap;
} oeap_revs;

/*
 * Adds the revisions a command-line argument names, in newest-first order:
 *   "REV"      that revision (kind NAMED)
 *   "A..B"     commits reachable from B and not from A that touched `path`
 *   NULL       every commit reachable from HEAD that touched `path`
 * "touched" means the blob differs from the first parent's; when the path
 * does not exist in a parent, a rename into it is looked for (a tree diff
 * with git_diff_find_similar) and followed under the old name. A commit
 * already in `revs` is not added twice. `max` > 0 caps how many a walk
 * adds. Returns 0 or -1 with err filled.
 */
int oeap_revs_add(git_repository *repo, const char *spec, const char *path, size_t max, oeap_revs *revs,
                  oeap_error *err);
void oeap_revs_free(oeap_revs *revs);

/*
 * oeap_revs_add(), and *selected = how many revisions the argument selects,
 * counting those an earlier argument added already: 0 means the argument
 * selects nothing at all (an empty or reversed range, or one in which no
 * commit touched the file), which `check` reports as a failure.
 */
int oeap_revs_add_counted(git_repository *repo, const char *spec, const char *path, size_t max, oeap_revs *revs,
                          size_t *selected, oeap_error *err);

/*
 * oeap_revs_add_counted() for a target with alternatives (`paths`,
 * NULL-terminated, in order of preference): each revision's target is the
 * first alternative its tree holds. REV: that alternative (the first path
 * when it holds none). A walk: the commits that touched any alternative,
 * each kept only when no alternative preferred to the one it touched exists
 * in its tree (a change to a file the definition does not take there is no
 * change to the target), newest first by committer time. One path: exactly
 * oeap_revs_add_counted().
 */
int oeap_revs_add_alts(git_repository *repo, const char *spec, char *const *paths, size_t max, oeap_revs *revs,
                       size_t *selected, oeap_error *err);

/*
 * The target's path in `commit`: `prefix` + `sep` + the first of `alts`
 * (NULL-terminated) that its tree holds, else + `fallback` (the work tree's
 * choice, so that "no such file" names what the user expects). NULL when
 * memory ran out. Caller frees.
 */
char *oeap_commit_target(const git_commit *commit, const char *prefix, const char *sep, char *const *alts,
                         const char *fallback);

/* Why the range `spec` selects no commit that touched `path`: the same
 * commit at both ends, reversed, its end lacks the file, or none touched it.
 * Always fills `why`; returns 0. */
int oeap_range_why_empty(git_repository *repo, const char *spec, const char *path, char *why, size_t cap);

/* The verdict on one blob. */
typedef enum oeap_land {
	OEAP_LAND_LANDS = 0, /* apply would succeed (and its result verifies) */
	OEAP_LAND_APPLIED,   /* the blob already carries the patch, and it verifies */
	OEAP_LAND_FAILS,     /* apply refuses: err says which anchor or check, and why */
	OEAP_LAND_MISSING,   /* no such file at that revision */
	OEAP_LAND_DELETED,   /* the revision deletes the file */
} oeap_land;

const char *oeap_land_name(oeap_land l);

typedef struct oeap_check_result {
	oeap_land land;
	oeap_file_state before; /* the state of the blob (LANDS/APPLIED only) */
	oeap_error err;         /* FAILS: what failed and why */
	double seconds;         /* time the dry run took */
} oeap_check_result;

/*
 * Dry-runs `def` on `buf`: the pipeline's apply, which resolves every anchor
 * and verifies its own result in memory, and writes nothing. Returns -1
 * only when memory ran out.
 */
int oeap_check_bytes(const oeap_patchdef *def, const char *buf, size_t len, const char *what,
                     oeap_check_result *res);

/*
 * The changes that turn text `a` into text `b`, for pysource_parse_edits():
 * libgit2's line diff of the part between the common prefix and suffix,
 * each hunk narrowed to the bytes that differ; checked to make `b` out of
 * `a` (else one edit over the differing middle). *edits (caller frees) may
 * be empty when the texts are equal. Returns -1 only when memory ran out.
 */
int oeap_text_edits(const char *a, size_t alen, const char *b, size_t blen, pysource_edit **edits, size_t *n);

/*
 * Checks every revision of `revs`, reading each blob once: revisions that
 * share a blob share the verdict. Each blob is parsed from the tree of the
 * last one that parsed (the revision before it in the walk: a few edits
 * apart), which gives the tree a parse from scratch gives. `results` has
 * revs->n entries (caller allocates). Returns 0, or -1 with err filled on a
 * git error.
 */
int oeap_check_revs(git_repository *repo, const oeap_patchdef *def, const oeap_revs *revs,
                    oeap_check_result *results, oeap_error *err);

/*
 * Drops the revisions from index `from` on that predate `first`, the
 * definition's first supported revision: a commit id keeps that commit and
 * its descendants, a date YYYY-MM-DD keeps those committed on or after it.
 * *dropped counts the others. Returns 0, or -1 with err filled when the
 * commit is not in the repository.
 */
int oeap_revs_since(git_repository *repo, oeap_revs *revs, size_t from, const char *first, size_t *dropped,
                    oeap_error *err);

/*
 * Adds the "binding" check of `commit`'s tree to `rep`: the binding module
 * must sit beside `path` (the target in that commit) and be intact, since
 * the committed target imports it. The library it records is not probed (a
 * commit has no machine). Returns -1 with err filled on a git error or OOM.
 */
int oeap_commit_binding_check(git_repository *repo, const git_commit *commit, const oeap_patchdef *def,
                              const char *path, oeap_report *rep, oeap_error *err);

/*
 * For each revision of `results` that is OEAP_LAND_APPLIED, the binding check
 * of its tree; a failure turns it into OEAP_LAND_FAILS (where "binding").
 * Returns -1 with err filled on a git error.
 */
int oeap_check_revs_binding(git_repository *repo, const oeap_patchdef *def, const oeap_revs *revs,
                            oeap_check_result *results, oeap_error *err);

#endif
