/*
 * oeapatch apply: insert the patch's regions into the target and write the
 * binding module beside it. The new bytes are verified in memory before
 * anything is written; both files are written atomically under a lock;
 * then both are read back and compared with the bytes that were verified.
 */
#include <stdlib.h>
#include <string.h>

#include "binding.h"
#include "cli.h"
#include "fsio.h"
#include "pipeline.h"

enum { OPT_CHECK = OEAP_OPT_FIRST_FREE, OPT_DIFF, OPT_LIBRARY, OPT_REFRESH };

typedef struct apply_opts {
	int check;
	int diff;
	int refresh;
	const char *library;
} apply_opts;

static int on_option(int val, const char *arg, void *user)
{
	apply_opts *o = user;
	switch (val) {
	case OPT_CHECK:
		o->check = 1;
		return 0;
	case OPT_DIFF:
		o->diff = 1;
		return 0;
	case OPT_LIBRARY:
		o->library = arg;
		return 0;
	case OPT_REFRESH:
		o->refresh = 1;
		return 0;
	}
	return -1;
}

static const oeap_option options[] = {
	OEAP_COMMON_OPTIONS,
	{"check", no_argument, OPT_CHECK, NULL, "write nothing: say whether the patch lands (exit 0) or not"},
	{"dry-run", no_argument, OPT_CHECK, NULL, "the same as --check"},
	{"diff", no_argument, OPT_DIFF, NULL, "write nothing: print the unified diff apply would make"},
	{"refresh", no_argument, OPT_REFRESH, NULL,
	 "move regions that upstream changes left away from their anchors (otherwise refused)"},
	{"library", required_argument, OPT_LIBRARY, "PATH",
	 "the liboea the binding loads (default: $OEAPATCH_LIBRARY, the installed one, or the build tree's)"},
	{NULL, 0, 0, NULL, NULL},
};

/* The binding module as it should be, and whether writing it is needed. */
typedef struct binding_plan {
	char *path;
	char *old;      /* current content, NULL when absent */
	size_t old_len;
	oeap_buf want;
	int needed;
} binding_plan;

static int plan_binding(const oeap_cli *cli, const char *library, binding_plan *bp, oeap_error *err)
{
	memset(bp, 0, sizeof(*bp));
	if (!(bp->path = oeap_binding_path(cli->def, cli->target)))
		return oeap_fail(err, OEAP_ERR_INTERNAL, "binding", 0, "out of memory");
	if (oeap_binding_render(cli->def, library, &bp->want, err))
		return -1;
	oeap_error e2;
	oeap_error_clear(&e2);
	if (oeap_read_file(bp->path, &bp->old, &bp->old_len, &e2) == 0) {
		if (!oeap_binding_is_ours(bp->old, bp->old_len))
			return oeap_fail(err, OEAP_ERR_INPUT, bp->path, 0,
			                 "exists and was not written by oeapatch: refusing to overwrite it");
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

int cmd_apply(int argc, char **argv)
{
	int rc = OEAP_EXIT_OK, first = 0, lock = -1;
	oeap_cli cli;
	apply_opts o = {0, 0, 0, NULL};
	oeap_error err;
	char *buf = NULL, *library = NULL, *disk = NULL;
	size_t len = 0, disk_len = 0;
	oeap_outcome out;
	binding_plan bp;
	oeap_buf diff = OEAP_BUF_INIT;
	char detail[768];
	memset(&out, 0, sizeof(out));
	memset(&bp, 0, sizeof(bp));
	oeap_error_clear(&err);

	int p = oeap_cli_parse(&cli, "apply", "[-C DIR] [--check | --diff] [--refresh] [--library PATH] [--json]",
	                       "Insert the env-gated OEA call site into the checkout's target file and write the "
	                       "binding module beside it.",
	                       options, argc, argv, on_option, &o, &first);
	if (p)
		return p > 0 ? OEAP_EXIT_OK : OEAP_EXIT_TROUBLE;
	if ((p = oeap_cli_no_operands(&cli, argc, argv, first)))
		return p;
	if (o.check && o.diff) {
		oeap_fail(&err, OEAP_ERR_USAGE, "apply", 0, "--check and --diff: choose one");
		return oeap_cli_error(&cli, &err);
	}
	int writes = !o.check && !o.diff;
	if (oeap_cli_open(&cli, 1, &err))
		goto fail;
	/* --library, else the library the checkout's binding already records (a
	 * plain re-apply, as the hooks run after a pull, must not rebind it),
	 * else the default one. */
	library = o.library ? realpath(o.library, NULL) : recorded_library(&cli);
	if (!library && !o.library)
		library = oeap_library_default();
	if (!library) {
		oeap_fail(&err, OEAP_ERR_USAGE, "--library", 0, "%s",
		          o.library ? "the library given does not exist"
		                    : "no liboea found (not installed beside oeapatch, not in the build tree): pass --library");
		goto fail;
	}
	if (oeap_library_probe(library, cli.def->abi, detail, sizeof(detail))) {
		oeap_fail(&err, OEAP_ERR_INPUT, "library", 0, "%s: the binding would load a library that does not work",
		          detail);
		goto fail;
	}
	if (writes && (lock = oeap_lock(cli.target, 10000, &err)) < 0)
		goto fail;
	if (oeap_read_file(cli.target, &buf, &len, &err) ||
	    oeap_apply_bytes_flags(cli.def, buf, len, oeap_cli_target_rel(&cli), o.refresh ? OEAP_APPLY_REFRESH : 0,
	                           &out, &err) ||
	    plan_binding(&cli, library, &bp, &err))
		goto fail;

	if (o.diff) {
		if (oeap_cli_diff(&cli, buf, len, out.out, out.out_len, bp.old, bp.old_len, bp.want.data, bp.want.len,
		                  &diff, &err))
			goto fail;
		if (!cli.json)
			fwrite(diff.data ? diff.data : "", 1, diff.len, stdout);
	} else if (writes && (out.changed || bp.needed)) {
		/* The binding first: a target that imports it must never exist without it. */
		if (bp.needed && oeap_write_atomic(bp.path, bp.want.data, bp.want.len, 0644, &err))
			goto fail;
		oeap_fault_point("apply:between-files");
		if (out.changed && oeap_write_atomic(cli.target, out.out, out.out_len, 0644, &err))
			goto fail;
		/* Read back what is on disk now: that, not our buffer, is what the
		 * server runs. The bytes were verified in memory (and the library
		 * probed) before writing, so the same bytes on disk carry the same
		 * verdict; any other bytes mean someone else wrote meanwhile. */
		if (oeap_read_file(cli.target, &disk, &disk_len, &err))
			goto fail;
		if (disk_len != out.out_len || memcmp(disk, out.out, disk_len) != 0) {
			oeap_fail(&err, OEAP_ERR_IO, cli.def->target, 0,
			          "written, but the file on disk now differs from what was written and verified: "
			          "another process changed it; run `oeapatch verify`");
			goto fail;
		}
		free(disk);
		disk = NULL;
		if (oeap_read_file(bp.path, &disk, &disk_len, &err))
			goto fail;
		if (disk_len != bp.want.len || memcmp(disk, bp.want.data, disk_len) != 0) {
			oeap_fail(&err, OEAP_ERR_IO, bp.path, 0,
			          "written, but it now differs from what was written: another process changed it");
			goto fail;
		}
	}

	const char *state = out.before == OEAP_STATE_APPLIED ? "already applied"
	                    : out.before == OEAP_STATE_STALE ? "refreshed"
	                                                     : "applied";
	if (cli.json) {
		json_t *j = json_object();
		json_object_set_new(j, "command", json_string("apply"));
		json_object_set_new(j, "ok", json_true());
		json_object_set_new(j, "mode", json_string(o.check ? "check" : o.diff ? "diff" : "write"));
		json_object_set_new(j, "file", json_string(cli.def->target));
		json_object_set_new(j, "patch", json_sprintf("%s/%d", cli.def->name, cli.def->version));
		json_object_set_new(j, "before", json_string(oeap_file_state_name(out.before)));
		json_object_set_new(j, "changed", json_boolean(out.changed));
		if (out.from_version)
			json_object_set_new(j, "from_version", json_integer(out.from_version));
		json_object_set_new(j, "insertions",
		                    oeap_json_insertions(&out.plan, cli.def->target, out.out, out.out_len));
		json_object_set_new(j, "binding", json_pack("{s:s,s:s,s:b}", "path", bp.path, "library", library,
		                                            "changed", bp.needed));
		if (o.diff)
			json_object_set_new(j, "diff", json_stringn(diff.data ? diff.data : "", diff.len));
		oeap_json_emit(j);
	} else if (!o.diff) {
		const char *verb = o.check ? (out.changed || bp.needed ? "would be applied" : "already applied")
		                           : state;
		printf("%s: %s/%d %s\n", cli.def->target, cli.def->name, cli.def->version, verb);
		if (out.before == OEAP_STATE_STALE && !o.check)
			printf("  (the regions found were of version %d%s: replaced)\n", out.from_version,
			       out.from_version == cli.def->version ? " and no longer at their anchors" : "");
		for (size_t i = 0; i < out.plan.n; i++) {
			const oeap_insertion *ins = &out.plan.items[i];
			size_t at = oeap_plan_output_offset(&out.plan, i);
			long line = 1;
			for (size_t k = 0; k < at; k++)
				line += out.out[k] == '\n';
			printf("  %-9s line %ld, after %s (line %ld of the original)\n", ins->region->name, line,
			       ins->anchor->def->describe, ins->anchor->line);
		}
		if (bp.needed)
			printf("  binding   %s -> %s\n", bp.path, library);
	}
	goto done;
fail:
	rc = oeap_cli_error(&cli, &err);
done:
	if (lock >= 0)
		oeap_unlock(lock, cli.target);
	binding_plan_free(&bp);
	oeap_buf_free(&diff);
	oeap_outcome_free(&out);
	free(disk);
	free(buf);
	free(library);
	oeap_cli_close(&cli);
	return rc;
}
