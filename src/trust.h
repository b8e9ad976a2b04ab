/*
 * trust.h - who can change what the server runs or loads.
 *
 * An inference server usually runs as root, and what oeapatch installs runs
 * inside it: the patched target, the binding module beside it, the native
 * library the binding loads, and the git hooks of a deploy checkout. Anyone
 * who can replace one of those files, or rename a directory above it, can run
 * code in the server. So, as sshd's StrictModes and sudo do before they trust
 * a file, every path oeapatch records or verifies must pass one rule
 * (docs/security.md states it; the binding's _trust_problem() mirrors it, and
 * tests/e2e/test_trust_crosscheck.py holds the two to the same verdicts):
 *
 *   the file, and every directory from it up to the root, is owned by root or
 *   by the owner of the target, and is writable by neither its group nor
 *   others; a directory with the sticky bit (/tmp) may be writable by others,
 *   since then only an entry's owner can replace the entry below it, which
 *   the rule checks in turn.
 *
 * Symbolic links are followed one component at a time, as the kernel does:
 * each directory walked through (the link's own directory and every
 * directory of what it points to) is checked, and each link must be owned by
 * root or the target's owner (in a sticky directory its owner can replace it).
 */
#ifndef OEAP_TRUST_H
#define OEAP_TRUST_H

#include <stddef.h>
#include <sys/types.h>

/* The first path that fails the rule, and why. */
typedef struct oeap_trust_problem {
	char path[4096];   /* the offending path as walked (links resolved up to it) */
	uid_t uid;         /* its owner */
	unsigned mode;     /* its permission bits (07777) */
	char message[1024]; /* "PATH (owner ..., mode ...) is ...: `chmod go-w PATH`" */
} oeap_trust_problem;

/*
 * Checks `path` (absolute, or relative to the current directory) against
 * the rule above with `owner` as the target's owner (root is always
 * allowed). Returns 0 when it passes; 1 when it does not (*p says which path
 * and the fix); -1 when the path cannot be walked (missing, a link loop:
 * p->message says so, p->path names where).
 */
int oeap_trust_check(const char *path, uid_t owner, oeap_trust_problem *p);

/*
 * oeap_trust_check() where `listed` (an absolute path without links, or
 * NULL) and every folder below it are folders the import system lists to
 * find a module: adding an entry there is enough to be imported, so the
 * sticky bit does not exempt them (it still does for the folders above,
 * where only replacing an entry matters).
 */
int oeap_trust_check_listed(const char *path, uid_t owner, const char *listed, oeap_trust_problem *p);

/*
 * The folder the target's package path starts in (caller frees): the target
 * without the definition's installed_target that ends it (site-packages, or
 * a checkout's python/), resolved; the target's own folder when none ends it.
 * NULL when memory ran out.
 */
struct oeap_patchdef;
char *oeap_trust_package_root(const struct oeap_patchdef *def, const char *target);

/*
 * The owner the rule allows besides root for a checkout whose target is
 * `target`: the target file's owner (whoever owns it already decides what
 * the server runs). -1 when it cannot be stat'ed.
 */
int oeap_trust_target_owner(const char *target, uid_t *owner);

/*
 * The escape for development trees: the bool setting the definition names
 * in [binding] trust_escape, read from the server's environment by verify
 * and by the binding at import alike, so the gate and the server agree. Set
 * true, a path that fails the rule is a warning ("WARN trust:..."), never a
 * silent pass. NULL when the definition has none (then there is no escape).
 */
struct oeap_patchdef;
struct oeap_settings_result;

const char *oeap_trust_escape_name(const struct oeap_patchdef *def);

/* 1 when the escape setting is valid and true in `s` (checked settings). */
int oeap_trust_escape_on(const struct oeap_patchdef *def, const struct oeap_settings_result *s);

/*
 * The file the dynamic loader opens for `library` (caller frees): the path
 * itself when it has a '/', else what the server's loader search path
 * (`ld_library_path`, from `origin`; then the loader cache and the system
 * directories) finds for a bare name, worked out without loading anything
 * (libsearch.h). NULL when none is found.
 */
char *oeap_trust_library_file(const char *library, const char *ld_library_path, const char *origin);

/* 1 when the escape setting is true in this process's environment (apply). */
int oeap_trust_escape_environ(const struct oeap_patchdef *def);

#endif
