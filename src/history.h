/*
 * history.h - the revisions of a checkout that touched the target, through
 * libgit2: named ones, ranges and walks from HEAD (following renames), the
 * target among its alternatives in each commit, and why a range is empty.
 * The repository and its blobs are gitrepo.h's; the dry run on each
 * revision's blob is revcheck.h's.
 *
 * Nothing here writes to the repository or its work tree (gitrepo.h).
 */
#ifndef OEAP_HISTORY_H
#define OEAP_HISTORY_H

#include <git2.h>
#include <stddef.h>

#include "error.h"
#include "gitrepo.h"

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

/*
 * Drops the revisions from index `from` on that predate `first`, the
 * definition's first supported revision: a commit id keeps that commit and
 * its descendants, a date YYYY-MM-DD keeps those committed on or after it.
 * *dropped counts the others. Returns 0, or -1 with err filled when the
 * commit is not in the repository.
 */
int oeap_revs_since(git_repository *repo, oeap_revs *revs, size_t from, const char *first, size_t *dropped,
                    oeap_error *err);

#endif
