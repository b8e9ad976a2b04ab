/*
 * verify.h - the verdict on a target: does the patch hold, and will the
 * server start with it as verify's environment (or the --env-file files)
 * gives its settings. cmd_verify.c computes it; `verify` prints all of it
 * and `status` shows it beside what else it reports, so the two commands
 * can never disagree on whether a checkout verifies (they once did: status
 * skipped the settings and the library override).
 */
#ifndef OEAP_VERIFY_H
#define OEAP_VERIFY_H

#include <git2.h>

#include "cli.h"
#include "pipeline.h"
#include "settings.h"

/* systemd takes any number of EnvironmentFile= lines; this is plenty for one unit. */
#define OEAP_VERIFY_MAX_ENV_FILES 32

/* What to verify: the work tree (ref NULL) or a commit, and where the settings come from. */
typedef struct oeap_verify_opts {
	const char *ref;
	int skip_binding;
	const char *env_files[OEAP_VERIFY_MAX_ENV_FILES]; /* none: verify's own environment */
	size_t nenv_files;
	int too_many_env_files;
} oeap_verify_opts;

/* --env-file FILE of verify and status (an oeap_option callback, opt.h): one more file, `user` the
 * oeap_verify_opts; beyond OEAP_VERIFY_MAX_ENV_FILES, too_many_env_files is set for the command to report. */
int oeap_verify_opt_env_file(const char *arg, void *user);

/* What verify found. */
typedef struct oeap_verify_result {
	oeap_report rep;            /* every check, the settings' included; rep.ok is the verdict */
	int settings_checked;       /* 0: skipped (--ref without --env-file) */
	oeap_env env;               /* the settings environment */
	oeap_settings_result settings;
	char *recorded_library;     /* what the binding module records, when it verified */
	const char *library_override; /* the library the settings name (library_env), which the library
	                                 check loaded instead of the recorded one; NULL: none (points into env
	                                 or settings) */
	char ignored[512];          /* --env-file: the binding's variables of our own environment, ignored */
	char what[4200];  /* --ref: "REV:path" */
	char ref_file[4096]; /* --ref: the target that commit holds (its first alternative), as "file" names
	                        it: relative to the root, which may be another alternative than the work tree's */
	char commit_hex[GIT_OID_HEXSZ + 1];
	int exit_code;              /* OEAP_EXIT_OK when rep.ok, else OEAP_EXIT_DIFFERS */
	const char *const *env_files;
	size_t nenv_files;
} oeap_verify_result;

/*
 * Fills `r` (zeroed by the caller) for the opened `cli`: -1 with `err` set
 * on trouble (a file or revision that cannot be read, a bad --env-file, out
 * of memory), else 0 with the verdict in r->rep and r->exit_code. The caller
 * frees `r` with oeap_verify_result_free() either way; `o` must outlive it
 * (r->env_files points into it).
 */
int oeap_verify_compute(const oeap_cli *cli, const oeap_verify_opts *o, oeap_verify_result *r, oeap_error *err);
void oeap_verify_result_free(oeap_verify_result *r);

#endif
