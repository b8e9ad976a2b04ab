/*
 * revcheck.h - `check` on revisions: the patch's dry run on the target's
 * blob at each revision (the pipeline's apply, in memory), parsed
 * incrementally from one revision to the next, and the binding module a
 * commit that carries the patch must carry beside it. Writes nothing.
 */
#ifndef OEAP_REVCHECK_H
#define OEAP_REVCHECK_H

#include <git2.h>
#include <stddef.h>

#include "error.h"
#include "history.h"
#include "patchdef.h"
#include "pipeline.h"
#include "pyparse.h"

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
 * The changes that turn text `a` into text `b`, for oeap_pysource_parse_edits():
 * libgit2's line diff of the part between the common prefix and suffix,
 * each hunk narrowed to the bytes that differ; checked to make `b` out of
 * `a` (else one edit over the differing middle). *edits (caller frees) may
 * be empty when the texts are equal. Returns -1 only when memory ran out.
 */
int oeap_text_edits(const char *a, size_t alen, const char *b, size_t blen, oeap_pysource_edit **edits, size_t *n);

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
