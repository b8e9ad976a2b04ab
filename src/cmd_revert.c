/*
 * oeapatch revert: remove exactly the regions apply inserted and the binding
 * module it wrote. The target comes back byte for byte as it was before
 * apply (only whole lines were ever inserted).
 */
#include <stdlib.h>
#include <string.h>

#include "binding.h"
#include "cli.h"
#include "fsio.h"
#include "pipeline.h"

enum { OPT_CHECK = OEAP_OPT_FIRST_FREE, OPT_DIFF, OPT_FORCE };

typedef struct revert_opts {
	int check, diff, force;
} revert_opts;

static int on_option(int val, const char *arg, void *user)
{
	revert_opts *o = user;
	(void)arg;
	if (val == OPT_CHECK)
		o->check = 1;
	else if (val == OPT_DIFF)
		o->diff = 1;
	else if (val == OPT_FORCE)
		o->force = 1;
	else
		return -1;
	return 0;
}

static const oeap_option options[] = {
	OEAP_COMMON_OPTIONS,
	{"check", no_argument, OPT_CHECK, NULL, "write nothing: say whether revert would succeed"},
	{"dry-run", no_argument, OPT_CHECK, NULL, "the same as --check"},
	{"diff", no_argument, OPT_DIFF, NULL, "write nothing: print the unified diff revert would make"},
	{"force", no_argument, OPT_FORCE, NULL, "remove regions even when they were edited by hand"},
	{NULL, 0, 0, NULL, NULL},
};

int cmd_revert(int argc, char **argv)
{
	int rc = OEAP_EXIT_OK, first = 0, lock = -1;
	oeap_cli cli;
	revert_opts o = {0, 0, 0};
	oeap_error err;
	char *buf = NULL, *bind_text = NULL, *bind_path = NULL;
	size_t len = 0, bind_len = 0;
	oeap_outcome out;
	oeap_buf diff = OEAP_BUF_INIT;
	memset(&out, 0, sizeof(out));
	oeap_error_clear(&err);

	int p = oeap_cli_parse(&cli, "revert", "[-C DIR] [--check | --diff] [--force] [--json]",
	                       "Remove exactly what apply inserted, and the binding module it wrote.", options, argc,
	                       argv, on_option, &o, &first);
	if (p)
		return p > 0 ? OEAP_EXIT_OK : OEAP_EXIT_TROUBLE;
	if ((p = oeap_cli_no_operands(&cli, argc, argv, first)))
		return p;
	if (o.check && o.diff) {
		oeap_fail(&err, OEAP_ERR_USAGE, "revert", 0, "--check and --diff: choose one");
		return oeap_cli_error(&cli, &err);
	}
	int writes = !o.check && !o.diff;
	if (oeap_cli_open(&cli, 1, &err))
		goto fail;
	if (writes && (lock = oeap_lock(cli.target, 10000, &err)) < 0)
		goto fail;
	if (oeap_read_file(cli.target, &buf, &len, &err) ||
	    oeap_revert_bytes(cli.def, buf, len, oeap_cli_target_rel(&cli), o.force, &out, &err))
		goto fail;
	if (!(bind_path = oeap_binding_path(cli.def, cli.target))) {
		oeap_fail(&err, OEAP_ERR_INTERNAL, "revert", 0, "out of memory");
		goto fail;
	}
	oeap_error ignore;
	oeap_error_clear(&ignore);
	/* Only a module we generated is ours to remove. */
	int bind_ours = oeap_read_file(bind_path, &bind_text, &bind_len, &ignore) == 0 &&
	                oeap_binding_is_ours(bind_text, bind_len);

	if (o.diff) {
		if (oeap_cli_diff(&cli, buf, len, out.out, out.out_len, bind_ours ? bind_text : NULL, bind_len, NULL, 0,
		                  &diff, &err))
			goto fail;
		if (!cli.json)
			fwrite(diff.data ? diff.data : "", 1, diff.len, stdout);
	} else if (writes) {
		/* The target first: a binding without an importer is harmless, the reverse is not. */
		if (out.changed && oeap_write_atomic(cli.target, out.out, out.out_len, 0644, &err))
			goto fail;
		oeap_fault_point("revert:between-files");
		if (bind_ours && oeap_remove_file(bind_path, &err))
			goto fail;
	}
	const char *verb = out.changed ? (writes ? "reverted" : "would be reverted")
	                               : (bind_ours ? (writes ? "not applied; removed a stray binding module"
	                                                      : "not applied; a stray binding module would be removed")
	                                            : "not applied: nothing to revert");
	if (cli.json) {
		json_t *j = json_object();
		json_object_set_new(j, "command", json_string("revert"));
		json_object_set_new(j, "ok", json_true());
		json_object_set_new(j, "mode", json_string(o.check ? "check" : o.diff ? "diff" : "write"));
		json_object_set_new(j, "file", json_string(cli.def->target));
		json_object_set_new(j, "before", json_string(oeap_file_state_name(out.before)));
		json_object_set_new(j, "changed", json_boolean(out.changed));
		json_object_set_new(j, "binding_removed", json_boolean(bind_ours));
		if (o.diff)
			json_object_set_new(j, "diff", json_stringn(diff.data ? diff.data : "", diff.len));
		oeap_json_emit(j);
	} else if (!o.diff) {
		printf("%s: %s/%d %s\n", cli.def->target, cli.def->name, cli.def->version, verb);
	}
	goto done;
fail:
	rc = oeap_cli_error(&cli, &err);
done:
	if (lock >= 0)
		oeap_unlock(lock, cli.target);
	oeap_outcome_free(&out);
	oeap_buf_free(&diff);
	free(bind_text);
	free(bind_path);
	free(buf);
	oeap_cli_close(&cli);
	return rc;
}
