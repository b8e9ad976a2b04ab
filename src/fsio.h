/*
 * fsio.h - file system work that must never lose a byte.
 *
 * Writes are atomic: a temporary file in the same directory, written,
 * fsync'ed, given the old file's mode, renamed over the target, and the
 * directory fsync'ed. A reader (or a crash) sees the old or the new file,
 * never a mix. A lock file beside the target keeps two oeapatch processes
 * from interleaving read-modify-write cycles.
 */
#ifndef OEAP_FSIO_H
#define OEAP_FSIO_H

#include <stddef.h>
#include <sys/types.h>

#include "error.h"

/* Reads a whole regular file into a NUL-terminated buffer (caller frees). */
int oeap_read_file(const char *path, char **data, size_t *len, oeap_error *err);

/*
 * Replaces (or creates) `path` atomically with `data`. `mode` is used when
 * the file does not exist yet; an existing file keeps its mode, owner and
 * group (or is left alone when they cannot be kept). A file root creates
 * gets the owner and group of its directory.
 */
int oeap_write_atomic(const char *path, const char *data, size_t len, mode_t mode,
                      oeap_error *err);

/* Whether `path` holds exactly `data` (`data` NULL: whether it is absent or
 * unreadable): "nobody wrote it since I read it". */
int oeap_file_holds(const char *path, const char *data, size_t len);

/* Removes `path` and fsyncs its directory. A missing file is success. */
int oeap_remove_file(const char *path, oeap_error *err);

/*
 * Takes an exclusive lock for changes to `path` (flock on its directory: no
 * lock file is created, so none is left behind by a kill), waiting at most
 * `timeout_ms`. Refuses first, writing nothing, a target that cannot be
 * replaced (read-only, or an owner this process cannot keep). Returns a
 * descriptor to pass to oeap_unlock(), or -1 with err filled.
 */
int oeap_lock(const char *path, int timeout_ms, oeap_error *err);

/* oeap_lock() flags. */
#define OEAP_LOCK_BREAK_LINKS 0x1u /* accept a target with other hard links (they keep the old bytes) */

/* oeap_lock(), which also refuses a target with more than one hard link
 * unless OEAP_LOCK_BREAK_LINKS. */
int oeap_lock_flags(const char *path, int timeout_ms, unsigned flags, oeap_error *err);
void oeap_unlock(int fd, const char *path);

/*
 * Resolves `rel` inside the directory `root` and checks that the real path
 * (symlinks resolved) stays inside root's real path. *out is a new string
 * (caller frees): the resolved path when it exists, else root/rel.
 */
int oeap_path_inside(const char *root, const char *rel, char **out, oeap_error *err);

/* Fault injection for crash-safety tests: when $OEAPATCH_FAULT_STEP names
 * `step` ("write:half-written"), or "<step>@N" names its N-th occurrence in
 * the process ("write:half-written@2": inside the second file written), the
 * process exits at once with status 99, as a kill would stop it there. Steps:
 * lock:acquired, write:before-temp, write:half-written, write:before-rename,
 * write:after-rename, apply:between-files, revert:between-files (see
 * docs/reliability.md). */
void oeap_fault_point(const char *step);

#endif
