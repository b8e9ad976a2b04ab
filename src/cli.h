/*
 * cli.h - what every command shares: the checkout and patch definition it
 * acts on (found by target.h, detected by detect.h when --patch is not
 * given), and how results and errors are printed. The options are opt.h's.
 */
#ifndef OEAP_CLI_H
#define OEAP_CLI_H

#include <stdio.h>

#include "cli_types.h"
#include "error.h"
#include "patchdef.h"
#include "pycache.h"
#include "report.h"

/*
 * Loads the definition and finds the root: from -C (or the folder that holds
 * the package --python imports) upward, the first folder where the
 * definition's target exists (a checkout) or its installed_target does (a
 * site-packages folder); an installed match inside a checkout that holds the
 * same file gives way to the checkout. With `need_target` the target must
 * exist (else an error that says where it looked and what -C takes);
 * without, a folder where nothing is found is taken as the root itself
 * (check and hook on bare repositories).
 */
int oeap_cli_open(oeap_cli *cli, int need_target, oeap_error *err);
void oeap_cli_close(oeap_cli *cli);

/* Prints `err` (as JSON when --json) and returns its exit code. */
int oeap_cli_error(const oeap_cli *cli, const oeap_error *err);

/*
 * The head of every JSON document: {"command": ..., "ok": ...}. `ok` is
 * derived from the exit code the command is about to return, so the two
 * cannot disagree. Caller adds its fields and passes it to oeap_json_emit().
 */
json_t *oeap_cli_json_head(const oeap_cli *cli, int exit_code);

/*
 * The command that (re-)applies the patch to the same target this command
 * acted on ("oeapatch apply -C ROOT", or with --python), for messages (such
 * as the one after a `pip install -U` dropped the patch; verify's JSON "fix",
 * which the wheel's plugin says when it stops a process). A definition given
 * as a folder this oeapatch installed is named by its name. Static storage.
 */
const char *oeap_cli_apply_hint(const oeap_cli *cli);

/* "checkout" or "installed". */
const char *oeap_cli_layout_name(const oeap_cli *cli);

/* Adds the "definition" member: {name, version, framework (null when the
 * definition states none), dir, detected (not named by --patch or
 * $OEAPATCH_PATCH_DIR)}. */
void oeap_cli_json_definition(const oeap_cli *cli, json_t *j);

/* Adds the target's "file", "root", "layout" and "definition" members to `j`, the same in
 * every command that works on one target file. */
void oeap_cli_json_target(const oeap_cli *cli, json_t *j);

/* What happens to the binding module, in the words --diff's summary uses. */
typedef enum oeap_module_change {
	OEAP_MODULE_UNCHANGED = 0,
	OEAP_MODULE_NEW,
	OEAP_MODULE_REPLACED,
	OEAP_MODULE_REMOVED
} oeap_module_change;

/* --diff without --full-diff shows the binding module (thousands of generated lines that would bury the
 * target's few) as this summary: its path, and size, lines and sha256 before and after. */
typedef struct oeap_module_summary {
	oeap_module_change change;
	char *path;            /* relative to the checkout; owned, freed by oeap_cli_module_summary_free */
	size_t bytes, lines;   /* after (REMOVED: before) */
	char sha256[65];
	size_t old_bytes;      /* REPLACED: before */
	char old_sha256[65];
	int full;              /* its whole diff is in the diff too (--full-diff) */
} oeap_module_summary;

/*
 * Appends to `out` the unified diff a command would make: the target from
 * `old` to `new_`, then the binding module from `bind_old` to `bind_new`
 * (NULL: absent) when `full`, else only the target's and `sum` filled for
 * the module. Unchanged files add nothing; paths are relative to the
 * checkout so that `git apply` takes the output as it is (with `full`).
 * `sum` is filled either way (caller frees with oeap_cli_module_summary_free).
 */
int oeap_cli_diff(const oeap_cli *cli, const char *old, size_t old_len, const char *new_, size_t new_len,
                  const char *bind_old, size_t bind_old_len, const char *bind_new, size_t bind_new_len, int full,
                  oeap_buf *out, oeap_module_summary *sum, oeap_error *err);

void oeap_cli_module_summary_free(oeap_module_summary *sum);

/* The summary's line after the diff on stdout (nothing when the module does not change, or its diff is
 * in full: the output then stays a patch git apply takes). */
void oeap_cli_print_module_summary(const oeap_module_summary *sum, FILE *f);

/* The summary as JSON ("module_change": null when the module does not change). */
json_t *oeap_cli_module_summary_json(const oeap_module_summary *sum);

/* apply's and revert's --json around their own members: the head (oeap_cli_json_head,
 * "mode": check, diff or write, and the target's members), then the tail (with --diff the diff
 * and the module summary, else the bytecode removed, or to remove with --check). */
json_t *oeap_cli_json_write_head(const oeap_cli *cli, int check, int diff);
void oeap_cli_json_write_tail(json_t *j, int check, int diff, const oeap_buf *diff_text,
                              const oeap_module_summary *module, const oeap_pyc_list *bytecode);

/* The target's path relative to the checkout, for messages and diffs. */
const char *oeap_cli_target_rel(const oeap_cli *cli);

#endif
