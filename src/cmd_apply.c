/*
 * oeapatch apply: insert the patch's regions into the target and write the
 * binding module beside it. The new bytes are verified in memory before
 * anything is written; both files are written atomically under a lock;
 * then both are read back and compared with the bytes that were verified.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "binding.h"
#include "cli.h"
#include "cmd.h"
#include "command.h"
#include "fsio.h"
#include "hook.h"
#include "library.h"
#include "opt.h"
#include "importsys.h"
#include "pipeline.h"
#include "pycache.h"
#include "report.h"
#include "trust.h"

typedef struct apply_opts {
	int check;
	int diff;
	int full_diff;
	int refresh;
	int break_links;
	int downgrade;
	const char *library;
} apply_opts;

static const oeap_option options[] = {
	OEAP_COMMON_OPTIONS,
	OEAP_OPT_SWITCH("check", 0, apply_opts, check, "write nothing: say whether the patch lands (exit 0) or not"),
	OEAP_OPT_SWITCH("dry-run", 0, apply_opts, check, "the same as --check"),
	OEAP_OPT_SWITCH("diff", 0, apply_opts, diff, "write nothing: print the unified diff apply would make"),
	OEAP_OPT_SWITCH("full-diff", 0, apply_opts, full_diff,
	                "--diff with the generated binding module's whole diff (default: its path, size and sha256)"),
	OEAP_OPT_SWITCH("refresh", 0, apply_opts, refresh,
	                "move regions that upstream changes left away from their anchors (otherwise refused)"),
	OEAP_OPT_VALUE("library", 0, "PATH", apply_opts, library,
	               "the liboea the binding loads (default: $OEAPATCH_LIBRARY, the installed one, or the build tree's)"),
	OEAP_OPT_SWITCH("downgrade", 0, apply_opts, downgrade,
	                "replace a patch applied by a newer version of the definition with this one (otherwise refused)"),
	OEAP_OPT_SWITCH("break-links", 0, apply_opts, break_links,
	                "write a target that has other hard links (they keep the old content)"),
	OEAP_OPT_END,
};

/* The binding module as it should be, and whether writing it is needed. */
typedef struct binding_plan {
	char *path;
	char *old;      /* current content, NULL when absent */
	size_t old_len;
	oeap_binding_state state; /* of `old`, when there is one */
	oeap_buf want;
	int needed;
	int refused;    /* --diff: apply would refuse to overwrite it (edited, or cannot tell) */
} binding_plan;

/* The version of `writer` ("NAME/VERSION") when NAME is this definition's, else 0. */
static int writer_version(const oeap_patchdef *def, const char *writer)
{
	size_t n = strlen(def->name);
	if (strncmp(writer, def->name, n) != 0 || writer[n] != '/')
		return 0;
	return atoi(writer + n + 1);
}

/*
 * `refuse` 0 (--diff): a module apply would not overwrite is still planned,
 * so that the diff shows how it differs from what this oeapatch writes,
 * which is how the user tells an edit from an older render.
 */
static int plan_binding(const oeap_cli *cli, const char *library, int refuse, int downgrade, binding_plan *bp,
                        oeap_error *err)
{
	memset(bp, 0, sizeof(*bp));
	if (!(bp->path = oeap_binding_path(cli->def, cli->target)))
		return oeap_fail(err, OEAP_ERR_INTERNAL, "binding", 0, "out of memory");
	if (oeap_binding_render(cli->def, library, &bp->want, err))
		return -1;
	oeap_error e2;
	oeap_error_clear(&e2);
	if (oeap_read_file(bp->path, &bp->old, &bp->old_len, &e2) == 0) {
		if (oeap_binding_classify(cli->def, bp->old, bp->old_len, &bp->state))
			return oeap_fail(err, OEAP_ERR_INTERNAL, "binding", 0, "out of memory");
		if (bp->state.kind == OEAP_BINDING_NOT_OURS)
			return oeap_fail(err, OEAP_ERR_INPUT, bp->path, 0,
			                 "exists and was not written by oeapatch: refusing to overwrite it");
		bp->refused = bp->state.kind == OEAP_BINDING_EDITED || bp->state.kind == OEAP_BINDING_UNKNOWN;
		if (refuse && bp->state.kind == OEAP_BINDING_EDITED)
			return oeap_fail(err, OEAP_ERR_REGION, bp->path, 0,
			                 OEAP_BINDING_EDITED_WHY " (`oeapatch verify` shows the binding check, `oeapatch "
			                 "apply --diff` the edits): refusing to overwrite the edits; keep them elsewhere, "
			                 "then `oeapatch revert --force` removes it and `oeapatch apply` writes it anew");
		if (refuse && bp->state.kind == OEAP_BINDING_UNKNOWN)
			return oeap_fail(err, OEAP_ERR_REGION, bp->path, 0, OEAP_BINDING_UNKNOWN_WHY);
		/* The regions' rule, for the module too (a target that pip replaced
		 * has no regions left to refuse the downgrade). */
		if (refuse && !downgrade && bp->state.kind == OEAP_BINDING_OTHER &&
		    writer_version(cli->def, bp->state.writer) > cli->def->version)
			return oeap_fail(err, OEAP_ERR_REGION, bp->path, 0,
			                 "was written for %s, NEWER than this definition's %s/%d: replacing it would be a "
			                 "downgrade; use the newer oeapatch, or pass --downgrade",
			                 bp->state.writer, cli->def->name, cli->def->version);
	} else {
		bp->old = NULL;
	}
	bp->needed = !bp->old || bp->old_len != bp->want.len || memcmp(bp->old, bp->want.data, bp->want.len) != 0;
	return 0;
}

/* The library path an existing binding module of ours records, or NULL. */
static char *recorded_library(const oeap_cli *cli)
{
	char *path = oeap_binding_path(cli->def, cli->target), *text = NULL, *lib = NULL;
	size_t len = 0;
	oeap_error ignore;
	oeap_error_clear(&ignore);
	if (path && oeap_read_file(path, &text, &len, &ignore) == 0 && oeap_binding_is_ours(text, len))
		lib = oeap_binding_recorded_library(cli->def, text, len);
	free(text);
	free(path);
	return lib;
}

static void binding_plan_free(binding_plan *bp)
{
	free(bp->path);
	free(bp->old);
	oeap_buf_free(&bp->want);
}

/*
 * The file --library names, as the absolute path the binding records (the
 * server's working directory is not this one, and a relative path would name
 * another file there): a path with a slash or a file here is that file; a
 * bare name that is no file here is searched as the loader searches, and the
 * file it finds is recorded. NULL when there is none. Caller frees.
 */
static char *library_argument(const char *arg)
{
	if (strchr(arg, '/') || access(arg, F_OK) == 0)
		return realpath(arg, NULL);
	return oeap_library_realpath_own_env(arg);
}

/* What apply did (or would do): compute fills it, the printers print it. */
typedef struct apply_result {
	char *buf;        /* the target as read */
	size_t len;
	char *library;    /* the library the binding records */
	oeap_outcome out;
	binding_plan bp;
	oeap_buf diff;    /* --diff */
	oeap_module_summary module; /* --diff: the binding module's change */
	oeap_pyc_list bytecode; /* removed (--check: would be), so Python runs what was written */
} apply_result;

static void apply_result_free(void *result)
{
	apply_result *r = result;
	oeap_pyc_list_free(&r->bytecode);
	binding_plan_free(&r->bp);
	oeap_buf_free(&r->diff);
	oeap_cli_module_summary_free(&r->module);
	oeap_outcome_free(&r->out);
	free(r->buf);
	free(r->library);
}

/* The file on disk must be the bytes that were verified: anything else means
 * someone else wrote meanwhile. */
static int read_back(const char *path, const char *want, size_t want_len, const char *name, oeap_error *err)
{
	char *disk = NULL;
	size_t disk_len = 0;
	int error = oeap_read_file(path, &disk, &disk_len, err);
	if (!error && (disk_len != want_len || memcmp(disk, want, disk_len) != 0))
		error = oeap_fail(err, OEAP_ERR_IO, name, 0,
		                  "written, but the file on disk now differs from what was written and verified: "
		                  "another process changed it; run `oeapatch verify`");
	free(disk);
	return error;
}

/* Reads the target and works out what apply would write. */
static int plan(const oeap_cli *cli, const apply_opts *o, apply_result *r, oeap_error *err)
{
	if (oeap_read_file(cli->target, &r->buf, &r->len, err) ||
	    oeap_apply_bytes_flags(cli->def, r->buf, r->len, oeap_cli_target_rel(cli),
	                           (o->refresh ? OEAP_APPLY_REFRESH : 0) | (o->downgrade ? OEAP_APPLY_DOWNGRADE : 0),
	                           &r->out, err) ||
	    plan_binding(cli, r->library, !o->diff, o->downgrade, &r->bp, err))
		return -1;
	return 0;
}

static void plan_free(apply_result *r)
{
	binding_plan_free(&r->bp);
	memset(&r->bp, 0, sizeof(r->bp));
	oeap_outcome_free(&r->out);
	memset(&r->out, 0, sizeof(r->out));
	free(r->buf);
	r->buf = NULL;
	r->len = 0;
}

/* The trust rule for the library apply records, with the escape this
 * environment sets (a warning then, on stderr). */
static int check_library_trust(const oeap_cli *cli, const char *library, oeap_error *err)
{
	uid_t owner;
	oeap_trust_problem p;
	if (oeap_trust_target_owner(cli->target, &owner))
		return 0; /* reading the target reports it */
	char *file = oeap_trust_library_file(library, getenv("LD_LIBRARY_PATH"), "the environment");
	int rc = file ? oeap_trust_check(file, owner, &p) : 0;
	free(file);
	if (rc <= 0)
		return 0;
	const char *esc = oeap_trust_escape_name(cli->def);
	if (oeap_trust_escape_environ(cli->def)) {
		oeap_msg("warning: library: %s; recorded anyway: %s=true (a development tree)", p.message, esc);
		return 0;
	}
	return oeap_fail(err, OEAP_ERR_INPUT, "library", 0,
	                 "%s; whoever can change it could run code in the server that loads it: refusing to record "
	                 "it%s%s%s",
	                 p.message, esc ? " (a development tree may set " : "", esc ? esc : "", esc ? "=true)" : "");
}

/* What the server imports, by verify's own rule (oeap_import_check): a
 * package folder or an extension module that wins over the target, or a
 * server's interpreter that cannot say, would leave what apply writes unrun. */
static int check_import(const oeap_cli *cli, oeap_error *err)
{
	oeap_report rep;
	int error = 0;
	memset(&rep, 0, sizeof(rep));
	if (oeap_import_check(cli->def, cli->target, cli->python, NULL, &rep, err))
		return -1;
	for (size_t i = 0; i < rep.n && !error; i++)
		if (!rep.checks[i].ok)
			error = oeap_fail(err, OEAP_ERR_INPUT, rep.checks[i].name, 0, "%s; refusing, nothing written",
			                  rep.checks[i].detail);
	oeap_report_free(&rep);
	return error;
}

static int compute(const oeap_cli *cli, const void *opts, void *result, oeap_error *err)
{
	const apply_opts *o = opts;
	apply_result *r = result;
	int error = 0, lock = -1, writes = !o->check && !o->diff;
	char detail[768];
	/* --library, else the library the checkout's binding already records (a
	 * plain re-apply, as the hooks run after a pull, must not rebind it),
	 * else the default one. */
	r->library = o->library ? library_argument(o->library) : recorded_library(cli);
	/* ...unless that library file is gone: `pip install -U oeapatch` (or
	 * `pip uninstall`) removed the liboea an earlier apply recorded. Keeping
	 * the path would only be refused below; the upgrade is to bind the one
	 * installed now. A bare name is the loader's to find, never "gone". */
	if (!o->library && r->library && r->library[0] == '/' && access(r->library, F_OK) != 0) {
		char *now = oeap_library_default();
		if (now) {
			oeap_msg("note: library: %s, which the binding recorded, is gone; binding %s", r->library, now);
			free(r->library);
			r->library = now;
		}
	}
	if (!r->library && !o->library)
		r->library = oeap_library_default();
	if (!r->library && !o->library)
		return oeap_fail(err, OEAP_ERR_USAGE, "--library", 0,
		                 "no liboea found (not installed beside oeapatch, not in the build tree): pass --library");
	if (!r->library)
		return oeap_fail(err, OEAP_ERR_USAGE, "--library", 0, "%s: %s", o->library,
		                 strchr(o->library, '/')
		                     ? "no such file"
		                     : "no file of that name in the current directory, and the loader's search path "
		                       "(LD_LIBRARY_PATH, the loader cache, the system directories) does not find it");
	/* Refused before anything is written, and before it is opened: a
	 * library others can replace is code they can run in the server, and in
	 * this process (often root) were it loaded to be checked (docs/security.md). */
	if (check_library_trust(cli, r->library, err))
		return -1;
	if (oeap_library_probe(cli->def, r->library, detail, sizeof(detail)))
		return oeap_fail(err, OEAP_ERR_INPUT, "library", 0,
		                 "%s: the binding would load a library that does not work", detail);
	if (check_import(cli, err))
		return -1;
	if ((error = plan(cli, o, r, err)))
		goto done;
	if (o->diff) {
		error = oeap_cli_diff(cli, r->buf, r->len, r->out.out, r->out.out_len, r->bp.old, r->bp.old_len,
		                      r->bp.want.data, r->bp.want.len,
		                      /* a module apply refuses: its diff is how it differs */
		                      o->full_diff || r->bp.refused, &r->diff, &r->module, err);
		goto done;
	}
	/* Bytecode Python would run instead of the files as they are (an
	 * unchecked-hash pyc of the unpatched source): apply removes it. A file
	 * to be written loses every entry (as below, after the write), so --check
	 * lists those: what apply would remove, not what shadows the old bytes. */
	if ((error = oeap_pyc_find_patch(cli->def, cli->target, 1, r->out.changed, r->bp.needed, &r->bytecode, err)))
		goto done;
	/* Nothing to write: "already applied" needs no write access (a
	 * read-only image, a 0444 file), so neither the lock nor the checks
	 * of a writable target. */
	if (!writes || (!r->out.changed && !r->bp.needed && !r->bytecode.n))
		goto noted;
	/* Only bytecode to remove: the files stay as they are, so neither the
	 * lock nor a writable target is needed (unlinking a cache entry twice
	 * is harmless), only a writable __pycache__. */
	if (!r->out.changed && !r->bp.needed) {
		error = oeap_pyc_remove(&r->bytecode, err);
		goto noted;
	}
	oeap_pyc_list_free(&r->bytecode);
	if ((lock = oeap_lock_flags(cli->target, 10000, o->break_links ? OEAP_LOCK_BREAK_LINKS : 0, err)) < 0)
		return -1;
	/* Again under the lock when another oeapatch wrote meanwhile (only
	 * then: planning a big file twice doubles the time). */
	if (!oeap_file_holds(cli->target, r->buf, r->len) || !oeap_file_holds(r->bp.path, r->bp.old, r->bp.old_len)) {
		plan_free(r);
		if ((error = plan(cli, o, r, err)))
			goto done;
	}
	if (r->out.changed || r->bp.needed) {
		/* The binding first: a target that imports it must never exist without it. */
		if (r->bp.needed && (error = oeap_write_atomic(r->bp.path, r->bp.want.data, r->bp.want.len, 0644, err)))
			goto done;
		oeap_fault_point("apply:between-files");
		if (r->out.changed && (error = oeap_write_atomic(cli->target, r->out.out, r->out.out_len, 0644, err)))
			goto done;
		/* Read back what is on disk now: that, not our buffer, is what the
		 * server runs. The bytes were verified in memory (and the library
		 * probed) before writing, so the same bytes on disk carry the same
		 * verdict. */
		if ((error = read_back(cli->target, r->out.out, r->out.out_len, oeap_cli_target_rel(cli), err)) ||
		    (error = read_back(r->bp.path, r->bp.want.data, r->bp.want.len, r->bp.path, err)))
			goto done;
	}
	/* Every cache entry of a file just written was compiled from bytes that
	 * are gone; of the others, those that would still run instead of them. */
	if ((error = oeap_pyc_find_patch(cli->def, cli->target, 1, r->out.changed, r->bp.needed, &r->bytecode, err)) ||
	    (error = oeap_pyc_remove(&r->bytecode, err)))
		goto done;
noted:
	/* post-checkout compares with this: a `git checkout -- topk.py` right
	 * after apply drops the patch, and must be reported. */
	if (writes && !error)
		oeap_hook_note_state(cli->root, 1);
done:
	if (lock >= 0)
		oeap_unlock(lock, cli->target);
	return error;
}

static void print_json(const oeap_cli *cli, const void *opts, const void *result)
{
	const apply_opts *o = opts;
	const apply_result *r = result;
	json_t *j = oeap_cli_json_write_head(cli, o->check, o->diff);
	json_object_set_new(j, "patch", oeap_json_patch(cli->def));
	json_object_set_new(j, "before", json_string(oeap_file_state_name(r->out.before)));
	json_object_set_new(j, "changed", json_boolean(r->out.changed));
	if (r->out.from_version)
		json_object_set_new(j, "from_version", json_integer(r->out.from_version));
	json_object_set_new(j, "insertions",
	                    oeap_json_insertions(&r->out.plan, oeap_cli_target_rel(cli), r->out.out, r->out.out_len));
	json_t *bind = json_pack("{s:o,s:o,s:b}", "path", oeap_json_str(r->bp.path), "library", oeap_json_str(r->library),
	                         "changed", r->bp.needed);
	/* Another oeapatch's module replaced (or, with --check/--diff, to be). */
	if (r->bp.old && r->bp.state.kind == OEAP_BINDING_OTHER)
		json_object_set_new(bind, "updated_from", oeap_json_str(r->bp.state.writer));
	if (r->bp.refused) /* --diff only: otherwise apply failed */
		json_object_set_new(bind, "overwrite_refused", json_true());
	json_object_set_new(j, "binding", bind);
	oeap_cli_json_write_tail(j, o->check, o->diff, &r->diff, &r->module, &r->bytecode);
	oeap_json_emit(j);
}

static void print_text(const oeap_cli *cli, const void *opts, const void *result)
{
	const apply_opts *o = opts;
	const apply_result *r = result;
	if (o->diff) {
		oeap_print_diff(r->diff.data ? r->diff.data : "", r->diff.len, stdout);
		oeap_cli_print_module_summary(&r->module, stdout);
		if (r->bp.refused)
			fprintf(stderr, "oeapatch: %s: %s; `oeapatch apply` refuses to overwrite it (the diff above is how "
			                "it differs from what this oeapatch writes)\n",
			        r->bp.path, r->bp.state.kind == OEAP_BINDING_EDITED ? OEAP_BINDING_EDITED_WHY
			                                                            : "this oeapatch cannot tell a hand edit "
			                                                              "from an older oeapatch's module");
		return;
	}
	const oeap_outcome *out = &r->out;
	const char *state = out->before == OEAP_STATE_APPLIED ? "already applied"
	                    : out->before == OEAP_STATE_STALE ? "refreshed"
	                                                      : "applied";
	const char *verb = o->check ? (out->changed || r->bp.needed || r->bytecode.n ? "would be applied" : "already applied")
	                            : state;
	printf("%s: %s/%d %s%s%s\n", oeap_cli_target_rel(cli), cli->def->name, cli->def->version,
	       oeap_color_good(stdout), verb, oeap_color_reset(stdout));
	if (out->before == OEAP_STATE_STALE && !o->check)
		printf("  (the regions found were of version %d%s: replaced)\n", out->from_version,
		       out->from_version == cli->def->version ? " and no longer at their anchors" : "");
	for (size_t i = 0; i < out->plan.n; i++) {
		const oeap_insertion *ins = &out->plan.items[i];
		size_t at = oeap_plan_output_offset(&out->plan, i);
		long line = 1;
		for (size_t k = 0; k < at; k++)
			line += out->out[k] == '\n';
		printf("  %-9s line %ld, after %s (line %ld of the original)\n", ins->region->name, line,
		       ins->anchor->def->describe, ins->anchor->line);
	}
	if (r->bp.needed)
		printf("  binding   %s -> %s\n", r->bp.path, r->library);
	if (r->bp.needed && r->bp.old && r->bp.state.kind == OEAP_BINDING_OTHER)
		printf("  binding module: %s from %s%s\n", o->check ? "would be updated" : "updated", r->bp.state.writer,
		       r->bp.state.has_digest ? " (written by another oeapatch, unedited)"
		                              : " (written by an oeapatch before content digests)");
	for (size_t i = 0; i < r->bytecode.n; i++)
		printf("  bytecode  %s %s: %s\n", o->check ? "would remove" : "removed", r->bytecode.items[i].path,
		       r->bytecode.items[i].why);
}

static const oeap_command_steps steps = {compute, print_json, print_text, apply_result_free};

int cmd_apply(int argc, char **argv)
{
	int first = 0;
	oeap_cli cli;
	apply_opts o = {0, 0, 0, 0, 0, 0, NULL};
	oeap_error err;
	apply_result r;
	memset(&r, 0, sizeof(r));
	oeap_error_clear(&err);

	int p = oeap_cli_parse(&cli, "apply",
	                       "[-C DIR | --python PATH] [--check | --diff | --full-diff] [--refresh] [--library PATH] [--json] [-q]",
	                       "Insert the env-gated OEA call site into the target file (a checkout's, or an "
	                       "installed package's) and write the binding module beside it.",
	                       options, argc, argv, &o, &first);
	if (p)
		return p > 0 ? OEAP_EXIT_OK : OEAP_EXIT_TROUBLE;
	if ((p = oeap_cli_no_operands(&cli, argc, argv, first)))
		return p;
	o.diff |= o.full_diff;
	if (o.check && o.diff) {
		oeap_fail(&err, OEAP_ERR_USAGE, "apply", 0, "--check and --diff: choose one");
		return oeap_cli_error(&cli, &err);
	}
	return oeap_command_run(&cli, 1, &steps, &o, &r, NULL);
}
