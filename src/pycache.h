/*
 * pycache.h - the bytecode Python would run instead of a source file.
 *
 * Python's import system (importlib's SourceFileLoader) runs
 * `__pycache__/<stem>.<tag>[.opt-N].pyc` instead of compiling `<stem>.py`
 * when that file is valid for the source as the loader checks it:
 *   - timestamp pyc (flags 0): the recorded mtime and size equal the
 *     source's (a build that fixes every mtime, SOURCE_DATE_EPOCH, makes
 *     an old pyc of a same-sized file look valid);
 *   - checked-hash pyc (flags 3): the recorded hash equals the source's
 *     (Python compares it, so a stale one is recompiled, not run);
 *   - unchecked-hash pyc (flags 1, PEP 552; Nix, Bazel): never compared:
 *     Python runs it whatever the source now says.
 * A legacy `<stem>.pyc` beside the source runs only when the source is
 * missing. This module finds the entries that would run in place of the
 * bytes on disk, so apply and revert can remove them and verify can fail
 * on them. With PYTHONPYCACHEPREFIX (or -X pycache_prefix) the loader reads
 * `<prefix>/<absolute source folder>/<stem>.<tag>[.opt-N].pyc` instead of
 * `__pycache__`: such folders are looked at too (oeap_pyc_prefix_dir).
 *
 * A timestamp pyc whose stamp matches cannot be told from the source's own
 * compilation by its header. Where the server's interpreter is known it is
 * asked (importsys.c: it compiles the source and compares the code objects;
 * the verdicts come in an oeap_pyc_verdicts); else the rule reads the pyc
 * for a string the right code must hold (the binding's module name in the
 * patched target, the recorded library in the binding module), which a
 * hostile pyc can hold too: the trust rule on `__pycache__` and the pycs
 * (importsys.c) is what keeps others from planting one.
 */
#ifndef OEAP_PYCACHE_H
#define OEAP_PYCACHE_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "error.h"
#include "patchdef.h"
#include "pipeline.h"

typedef struct oeap_pyc {
	char *path;      /* the cache file */
	const char *why; /* static text: what kind it is and why it counts */
} oeap_pyc;

typedef struct oeap_pyc_list {
	oeap_pyc *items;
	size_t n;
} oeap_pyc_list;

/* The interpreter's own verdict on timestamp pycs whose stamp matches the
 * source: compiled from these bytes (same) or not. */
typedef struct oeap_pyc_verdict {
	char *path;
	int same;
} oeap_pyc_verdict;

typedef struct oeap_pyc_verdicts {
	oeap_pyc_verdict *items;
	size_t n;
} oeap_pyc_verdicts;

int oeap_pyc_verdicts_add(oeap_pyc_verdicts *v, const char *path, int same);
void oeap_pyc_verdicts_free(oeap_pyc_verdicts *v);

/*
 * Where the loader reads the bytecode of `source` under the pycache prefix
 * `prefix` (importlib's cache_from_source: the prefix joined with the
 * source's absolute folder, leading slashes dropped). -1 when it does not fit.
 */
int oeap_pyc_prefix_dir(const char *prefix, const char *source, char *out, size_t cap);

/*
 * Appends to `out` the cache entries of `source` (a .py path):
 *   all != 0: every entry of it, `__pycache__/<stem>.*.pyc` and a legacy
 *     `<stem>.pyc` beside it (apply or revert just rewrote or removed the
 *     source: each was compiled from bytes that are gone);
 *   all == 0: only those Python would run instead of the source as it is
 *     now (see above). `marker`, when not NULL, is a string that the code
 *     compiled from the source holds (marker_in_source 1) or must not hold
 *     (0): a timestamp pyc that passes Python's mtime+size check is then
 *     also told apart by its content.
 * A missing __pycache__ is no entry. Caller frees `out` with
 * oeap_pyc_list_free(). Returns 0, or -1 with err filled.
 */
int oeap_pyc_find(const char *source, int all, const char *marker, int marker_in_source, oeap_pyc_list *out,
                  oeap_error *err);

/*
 * oeap_pyc_find() looking in `cachedirs` too (NULL-terminated, may be NULL:
 * the folders a pycache prefix puts the source's bytecode in), with the
 * interpreter's verdicts `v` (may be NULL) deciding stamp-matching timestamp
 * pycs before the marker rule. oeap_pyc_find() is this with the folder of
 * this process's PYTHONPYCACHEPREFIX, and no verdicts.
 */
int oeap_pyc_find_ex(const char *source, int all, const char *marker, int marker_in_source,
                     const char *const *cachedirs, const oeap_pyc_verdicts *v, oeap_pyc_list *out, oeap_error *err);

/*
 * oeap_pyc_find() for a target of `def` and the binding module beside it:
 * for each file every entry when it was just rewritten or removed
 * (target_all, binding_all), else those that would run instead of it.
 * `applied`: the target now carries the patch (its compiled code names the
 * binding module).
 */
int oeap_pyc_find_patch(const oeap_patchdef *def, const char *target, int applied, int target_all, int binding_all,
                        oeap_pyc_list *out, oeap_error *err);

/* oeap_pyc_find_patch() with the cache folders and verdicts of oeap_pyc_find_ex(). */
int oeap_pyc_find_patch_ex(const oeap_patchdef *def, const char *target, int applied, int target_all,
                           int binding_all, const char *const *cachedirs, const oeap_pyc_verdicts *v,
                           oeap_pyc_list *out, oeap_error *err);

/*
 * The "bytecode" check of verify and status, for an applied target: one
 * that fails per cache entry Python would run instead of the target or its
 * binding module (naming `fix`, the command that removes it), or one that
 * holds. -1 with err filled when the check could not run.
 */
int oeap_pyc_check(const oeap_patchdef *def, const char *target, const char *fix, oeap_report *rep, oeap_error *err);

/* oeap_pyc_check() with the cache folders and verdicts of oeap_pyc_find_ex(). */
int oeap_pyc_check_ex(const oeap_patchdef *def, const char *target, const char *fix, const char *const *cachedirs,
                      const oeap_pyc_verdicts *v, oeap_report *rep, oeap_error *err);

/* Removes every entry of `l` (a missing one is fine); -1 on the first that cannot be. */
int oeap_pyc_remove(const oeap_pyc_list *l, oeap_error *err);

void oeap_pyc_list_free(oeap_pyc_list *l);

/* The list as --json shows it: [{"path", "why"}, ...], paths quoted by
 * report.h's rule (bytes that are not UTF-8 escaped, never dropped). */
json_t *oeap_pyc_list_json(const oeap_pyc_list *l);

/* CPython's _imp.source_hash(key, data), the hash a hash-based pyc records
 * (keyed by its magic number): SipHash with k0 = key, k1 = 0; `rounds` 13
 * (SipHash-1-3, Python 3.11 and later) or 24 (SipHash-2-4, 3.7 to 3.10). */
uint64_t oeap_pyc_source_hash(uint64_t key, const void *data, size_t len, int rounds);

#endif
