/*
 * oeapatch revert: remove exactly the regions apply inserted and the binding
 * module it wrote. The target comes back byte for byte as it was before
 * apply (only whole lines were ever inserted).
 */
#include <stdlib.h>
#include <string.h>

#include "binding.h"
#include "cli.h"
#include "cmd.h"
#include "command.h"
#include "fsio.h"
#include "hook.h"
#include "opt.h"
#include "pipeline.h"
#include "pycache.h"

typedef struct revert_opts {
	int check, diff, full_diff, force, break_links;
} revert_opts;

static const oeap_option options[] = {
	OEAP_COMMON_OPTIONS,
	OEAP_OPT_SWITCH("check", 0, revert_opts, check, "write nothing: say whether revert would succeed"),
	OEAP_OPT_SWITCH("dry-run", 0, revert_opts, check, "the same as --check"),
	OEAP_OPT_SWITCH("diff", 0, revert_opts, diff, "write nothing: print the unified diff revert would make"),
	OEAP_OPT_SWITCH("full-diff", 0, revert_opts, full_diff,
	                "--diff with the generated binding module's whole diff (default: its path, size and sha256)"),
	OEAP_OPT_SWITCH("force", 0, revert_opts, force,
	                "remove regions and the binding module even when they were edited by hand"),
	OEAP_OPT_SWITCH("break-links", 0, revert_opts, break_links,
	                "write a target that has other hard links (they keep the old content)"),
	OEAP_OPT_END,
};

/* What revert did (or would do): compute fills it, the printers print it. */
typedef struct revert_result {
	char *buf;        /* the target as read */
	size_t len;
	oeap_outcome out;
	char *bind_text;  /* the binding module, when one exists */
	size_t bind_len;
	char *bind_path;
	int bind_ours;    /* it is one oeapatch generated: revert removes it */
	oeap_buf diff;    /* --diff */
	oeap_module_summary module; /* --diff: the binding module's change */
	oeap_pyc_list bytecode; /* removed (--check: would be): none may run in place of what is left */
} revert_result;

static void revert_result_free(void *result)
{
	revert_result *r = result;
	oeap_pyc_list_free(&r->bytecode);
	oeap_outcome_free(&r->out);
	oeap_buf_free(&r->diff);
	oeap_cli_module_summary_free(&r->module);
	free(r->bind_text);
	free(r->bind_path);
	free(r->buf);
}

/* Reads the target and the binding module and works out what revert would do. */
static int plan(const oeap_cli *cli, const revert_opts *o, revert_result *r, oeap_error *err)
{
	if (oeap_read_file(cli->target, &r->buf, &r->len, err) ||
	    oeap_revert_bytes(cli->def, r->buf, r->len, oeap_cli_target_rel(cli), o->force, &r->out, err))
		return -1;
	if (!(r->bind_path = oeap_binding_path(cli->def, cli->target)))
		return oeap_fail(err, OEAP_ERR_INTERNAL, "revert", 0, "out of memory");
	oeap_error ignore;
	oeap_error_clear(&ignore);
	/* Only a module we generated is ours to remove. */
	r->bind_ours = oeap_read_file(r->bind_path, &r->bind_text, &r->bind_len, &ignore) == 0 &&
	               oeap_binding_is_ours(r->bind_text, r->bind_len);
	/* Another oeapatch's unedited module is removed like our own; one whose
	 * digest fails, or that has none and cannot be told from an edit, is
	 * only removed with --force. */
	oeap_binding_state st;
	if (r->bind_ours && oeap_binding_classify(cli->def, r->bind_text, r->bind_len, &st))
		return oeap_fail(err, OEAP_ERR_INTERNAL, "revert", 0, "out of memory");
	if (r->bind_ours && !o->force && st.kind == OEAP_BINDING_EDITED)
		return oeap_fail(err, OEAP_ERR_REGION, r->bind_path, 0,
		                 OEAP_BINDING_EDITED_WHY ": refusing to delete the edits; keep them elsewhere, or pass "
		                 "--force to remove it with them");
	if (r->bind_ours && !o->force && st.kind == OEAP_BINDING_UNKNOWN)
		return oeap_fail(err, OEAP_ERR_REGION, r->bind_path, 0, OEAP_BINDING_UNKNOWN_WHY);
	return 0;
}

static void plan_free(revert_result *r)
{
	oeap_outcome_free(&r->out);
	free(r->bind_text);
	free(r->bind_path);
	free(r->buf);
	r->bind_text = r->bind_path = r->buf = NULL;
	r->bind_len = r->len = 0;
	r->bind_ours = 0;
}

static int compute(const oeap_cli *cli, const void *opts, void *result, oeap_error *err)
{
	const revert_opts *o = opts;
	revert_result *r = result;
	int error = 0, lock = -1, writes = !o->check && !o->diff;
	if ((error = plan(cli, o, r, err)))
		goto done;
	if (o->diff) {
		error = oeap_cli_diff(cli, r->buf, r->len, r->out.out, r->out.out_len, r->bind_ours ? r->bind_text : NULL,
		                      r->bind_len, NULL, 0, o->full_diff, &r->diff, &r->module, err);
		goto done;
	}
	/* Bytecode that would run instead of what is left: a pyc of the patched
	 * target with its mtime and size, or the sourceless module of ours. A
	 * target to be rewritten loses every entry (as below, after the write),
	 * so --check lists those: what revert would remove. */
	if ((error = oeap_pyc_find_patch(cli->def, cli->target, 0, r->out.changed, r->bind_ours, &r->bytecode, err)))
		goto done;
	/* "Nothing to revert" needs no write access (a read-only image). */
	if (!writes || (!r->out.changed && !r->bind_ours && !r->bytecode.n))
		goto noted;
	/* Only bytecode to remove: the files stay as they are, so neither the
	 * lock nor a writable target is needed (unlinking a cache entry twice
	 * is harmless), only a writable __pycache__. */
	if (!r->out.changed && !r->bind_ours) {
		error = oeap_pyc_remove(&r->bytecode, err);
		goto noted;
	}
	oeap_pyc_list_free(&r->bytecode);
	if ((lock = oeap_lock_flags(cli->target, 10000, o->break_links ? OEAP_LOCK_BREAK_LINKS : 0, err)) < 0)
		return -1;
	/* Again under the lock when another oeapatch wrote meanwhile (only
	 * then: planning a big file twice doubles the time). */
	if (!oeap_file_holds(cli->target, r->buf, r->len) || !oeap_file_holds(r->bind_path, r->bind_text, r->bind_len)) {
		plan_free(r);
		if ((error = plan(cli, o, r, err)))
			goto done;
	}
	/* The target first: a binding without an importer is harmless, the reverse is not. */
	if (r->out.changed && (error = oeap_write_atomic(cli->target, r->out.out, r->out.out_len, 0644, err)))
		goto done;
	oeap_fault_point("revert:between-files");
	if (r->bind_ours && (error = oeap_remove_file(r->bind_path, err)))
		goto done;
	/* All bytecode of a rewritten target and of our removed module is of
	 * bytes that are gone (a module of the same name that is not ours keeps
	 * its own). */
	if ((error = oeap_pyc_find_patch(cli->def, cli->target, 0, r->out.changed, r->bind_ours, &r->bytecode, err)) ||
	    (error = oeap_pyc_remove(&r->bytecode, err)))
		goto done;
noted:
	if (writes && !error)
		oeap_hook_note_state(cli->root, 0); /* for post-checkout, as apply does */
done:
	if (lock >= 0)
		oeap_unlock(lock, cli->target);
	return error;
}

static void print_json(const oeap_cli *cli, const void *opts, const void *result)
{
	const revert_opts *o = opts;
	const revert_result *r = result;
	json_t *j = oeap_cli_json_write_head(cli, o->check, o->diff);
	json_object_set_new(j, "before", json_string(oeap_file_state_name(r->out.before)));
	json_object_set_new(j, "changed", json_boolean(r->out.changed));
	json_object_set_new(j, "binding_removed", json_boolean(r->bind_ours));
	oeap_cli_json_write_tail(j, o->check, o->diff, &r->diff, &r->module, &r->bytecode);
	oeap_json_emit(j);
}

static void print_text(const oeap_cli *cli, const void *opts, const void *result)
{
	const revert_opts *o = opts;
	const revert_result *r = result;
	int writes = !o->check && !o->diff;
	if (o->diff) {
		oeap_print_diff(r->diff.data ? r->diff.data : "", r->diff.len, stdout);
		oeap_cli_print_module_summary(&r->module, stdout);
		return;
	}
	const char *verb = r->out.changed ? (writes ? "reverted" : "would be reverted")
	                   : r->bind_ours ? (writes ? "not applied; removed a stray binding module"
	                                            : "not applied; a stray binding module would be removed")
	                                  : "not applied: nothing to revert";
	printf("%s: %s/%d %s%s%s\n", oeap_cli_target_rel(cli), cli->def->name, cli->def->version,
	       oeap_color_good(stdout), verb, oeap_color_reset(stdout));
	for (size_t i = 0; i < r->bytecode.n; i++)
		printf("  bytecode  %s %s: %s\n", writes ? "removed" : "would remove", r->bytecode.items[i].path,
		       r->bytecode.items[i].why);
}

static const oeap_command_steps steps = {compute, print_json, print_text, revert_result_free};

int cmd_revert(int argc, char **argv)
{
	int first = 0;
	oeap_cli cli;
	revert_opts o = {0, 0, 0, 0, 0};
	oeap_error err;
	revert_result r;
	memset(&r, 0, sizeof(r));
	oeap_error_clear(&err);

	int p = oeap_cli_parse(&cli, "revert", "[-C DIR | --python PATH] [--check | --diff | --full-diff] [--force] [--json] [-q]",
	                       "Remove exactly what apply inserted, and the binding module it wrote.", options, argc,
	                       argv, &o, &first);
	if (p)
		return p > 0 ? OEAP_EXIT_OK : OEAP_EXIT_TROUBLE;
	if ((p = oeap_cli_no_operands(&cli, argc, argv, first)))
		return p;
	o.diff |= o.full_diff;
	if (o.check && o.diff) {
		oeap_fail(&err, OEAP_ERR_USAGE, "revert", 0, "--check and --diff: choose one");
		return oeap_cli_error(&cli, &err);
	}
	return oeap_command_run(&cli, 1, &steps, &o, &r, NULL);
}
