/*
 * hook.h - git hooks that keep a deployed checkout patched.
 *
 * libgit2 neither runs nor locates hooks, so this module does what git
 * does: the hooks directory is core.hooksPath when set (a relative path is
 * relative to the work tree's top, as git runs hooks there; "~/" is the home
 * directory), else the common directory's hooks/ (shared by all worktrees).
 *
 * Each hook oeapatch writes is a small POSIX sh script whose second line is
 * OEAP_HOOK_HEADER; that line is how install, status and uninstall tell ours
 * from anyone else's. A hook that was there before is moved aside, byte for
 * byte and with its mode (a rename), to "<hook>.oeapatch-chained"; ours runs
 * it first with the same arguments and stdin, under the name git gave ours
 * (dispatchers choose by "$0"), keeps its non-zero exit status as the hook's,
 * and uninstall moves it back.
 */
#ifndef OEAP_HOOK_H
#define OEAP_HOOK_H

#include <git2.h>

#include "buf.h"
#include "error.h"

#define OEAP_HOOK_HEADER "# oeapatch hook v1"
#define OEAP_HOOK_CHAINED_SUFFIX ".oeapatch-chained"
/* In each worktree's git directory: "verified" or "not-verified", the state
 * of the patch when a hook, apply or revert last looked. */
#define OEAP_HOOK_STATE_FILE "oeapatch-hook.state"

/* The hooks oeapatch installs, NULL-terminated: post-merge (pull, merge),
 * post-checkout, post-rewrite (rebase) and pre-push. */
extern const char *const oeap_hook_names[];

/* 1 when `name` is one of oeap_hook_names. */
int oeap_hook_known(const char *name);

/*
 * The hooks directory of `repo`, absolute (caller frees). `*from_config` is
 * set to 1 when it came from core.hooksPath. It need not exist yet.
 */
int oeap_hooks_dir(git_repository *repo, char **dir, int *from_config, oeap_error *err);

/* What the hook files say about one hook name. */
typedef enum oeap_hook_state {
	OEAP_HOOK_ABSENT = 0,     /* no hook (a stray chained file is reported apart) */
	OEAP_HOOK_OURS,           /* ours, nothing chained */
	OEAP_HOOK_OURS_CHAINED,   /* ours, running the previous hook first */
	OEAP_HOOK_FOREIGN,        /* someone else's: left alone */
} oeap_hook_state;

const char *oeap_hook_state_name(oeap_hook_state s);

typedef struct oeap_hook_info {
	oeap_hook_state state;
	int stray_chained;      /* a chained file exists but no hook of ours runs it */
	char oeapatch[4096];    /* ours: the binary it runs ("" when unknown) */
	int reapply;            /* ours: installed with --reapply */
	int edited;             /* ours, but changed since install (lines added or edited) */
} oeap_hook_info;

/* Looks at `dir`/`name` and its chained file. */
void oeap_hook_inspect(const char *dir, const char *name, oeap_hook_info *info);

/* What install records in a hook. */
typedef struct oeap_hook_config {
	const char *oeapatch; /* absolute path of the binary the hook runs */
	const char *patch;    /* the --patch argument (name or absolute directory) */
	const char *library;  /* --reapply: the liboea apply records (absolute), or NULL */
	const char *subdir;   /* the checkout inside the work tree ("" at the top) */
	const char *target;   /* the target file inside the checkout */
	int reapply;          /* post-* hooks re-apply the patch, then verify */
	int skip_binding;     /* pre-push: commits need not carry the binding module (verify --skip-binding) */
} oeap_hook_config;

/* Renders the script for hook `name` into `out`. Returns -1 on OOM. */
int oeap_hook_render(const char *name, const oeap_hook_config *cfg, oeap_buf *out);

typedef enum oeap_hook_action {
	OEAP_HOOK_DID_NOTHING = 0, /* already as wanted / nothing of ours there */
	OEAP_HOOK_DID_INSTALL,     /* written where there was none */
	OEAP_HOOK_DID_CHAIN,       /* written, the previous hook moved aside and chained */
	OEAP_HOOK_DID_UPDATE,      /* ours rewritten with other settings */
	OEAP_HOOK_DID_REMOVE,      /* ours removed */
	OEAP_HOOK_DID_RESTORE,     /* ours removed and the previous hook moved back */
	OEAP_HOOK_DID_REFUSE,      /* uninstall: not ours, left alone */
	OEAP_HOOK_DID_KEEP_EDITED, /* ours, but edited since install: left alone (OEAP_HOOK_FORCE overrides) */
} oeap_hook_action;

/* oeap_hook_install_flags() / oeap_hook_uninstall_flags() flags. */
#define OEAP_HOOK_FORCE 0x1u /* replace or remove a hook of ours even when it was edited since install */

const char *oeap_hook_action_name(oeap_hook_action a);

/*
 * Installs hook `name` in `dir` (created when missing). Idempotent: ours is
 * rewritten only when it differs. Files are written atomically; a failure
 * after the old hook was moved aside moves it back.
 */
int oeap_hook_install(const char *dir, const char *name, const oeap_hook_config *cfg, oeap_hook_action *did,
                      oeap_error *err);

/* oeap_hook_install() with flags: a hook of ours edited since install is
 * left alone (*did = OEAP_HOOK_DID_KEEP_EDITED) unless OEAP_HOOK_FORCE. */
int oeap_hook_install_flags(const char *dir, const char *name, const oeap_hook_config *cfg, unsigned flags,
                            oeap_hook_action *did, oeap_error *err);

/*
 * Removes our hook `name` from `dir` and moves the chained one back. A hook
 * that is not ours is never removed (*did = OEAP_HOOK_DID_REFUSE), nor one
 * of ours that was edited since install (its last line, a hash of the rest,
 * no longer matches: *did = OEAP_HOOK_DID_KEEP_EDITED).
 */
int oeap_hook_uninstall(const char *dir, const char *name, oeap_hook_action *did, oeap_error *err);

/* oeap_hook_uninstall() with flags: OEAP_HOOK_FORCE removes an edited hook of ours. */
int oeap_hook_uninstall_flags(const char *dir, const char *name, unsigned flags, oeap_hook_action *did,
                              oeap_error *err);

/*
 * The state record of the repository holding `dir` (caller frees), or NULL
 * when `dir` is not in a git repository (or has no work tree).
 */
char *oeap_hook_state_path(const char *dir);

/*
 * Records whether the patch verifies in the work tree of the repository
 * holding `dir`, for post-checkout, but only where hooks of ours keep a
 * record (hook install creates it): apply and revert call this after they
 * wrote, so `git checkout -- topk.py` right after them is reported.
 */
void oeap_hook_note_state(const char *dir, int verified);

#endif
