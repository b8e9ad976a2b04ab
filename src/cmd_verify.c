/*
 * oeapatch verify: read the target back and prove the patch holds: it
 * parses, every region is there once and unaltered, each sits where its
 * anchor demands, the names it passes are bound there, the binding module
 * is intact and the library it loads reports the ABI it expects.
 */
#include <stdlib.h>
#include <string.h>

#include "binding.h"
#include "cli.h"
#include "fsio.h"
#include "pipeline.h"

static const oeap_option options[] = {
	OEAP_COMMON_OPTIONS,
	{NULL, 0, 0, NULL, NULL},
};

int cmd_verify(int argc, char **argv)
{
	int rc = OEAP_EXIT_OK, first = 0;
	oeap_cli cli;
	oeap_error err;
	char *buf = NULL;
	size_t len = 0;
	oeap_report rep;
	memset(&rep, 0, sizeof(rep));
	oeap_error_clear(&err);

	int p = oeap_cli_parse(&cli, "verify", "[-C DIR] [--json]",
	                       "Prove the patch is in place, intact and bound to a loadable library. Exit 0 only "
	                       "when every check holds; otherwise each failed check is named.",
	                       options, argc, argv, NULL, NULL, &first);
	if (p)
		return p > 0 ? OEAP_EXIT_OK : OEAP_EXIT_TROUBLE;
	if (first < argc) {
		oeap_fail(&err, OEAP_ERR_USAGE, "verify", 0, "unexpected argument '%s'", argv[first]);
		return oeap_cli_error(&cli, &err);
	}
	if (oeap_cli_open(&cli, 1, &err) || oeap_read_file(cli.target, &buf, &len, &err))
		goto fail;
	if (oeap_verify_bytes(cli.def, buf, len, oeap_cli_target_rel(&cli), &rep) ||
	    (rep.applied && oeap_binding_verify(cli.def, cli.target, &rep))) {
		oeap_fail(&err, OEAP_ERR_INTERNAL, "verify", 0, "out of memory");
		goto fail;
	}
	size_t failed = 0;
	for (size_t i = 0; i < rep.n; i++)
		failed += !rep.checks[i].ok;
	if (cli.json) {
		json_t *j = json_object();
		json_object_set_new(j, "command", json_string("verify"));
		json_object_set_new(j, "ok", json_boolean(rep.ok));
		json_object_set_new(j, "file", json_string(cli.def->target));
		json_object_set_new(j, "patch", json_sprintf("%s/%d", cli.def->name, cli.def->version));
		json_object_set_new(j, "applied", json_boolean(rep.applied));
		json_object_set_new(j, "checks", oeap_json_checks(&rep));
		oeap_json_emit(j);
	} else {
		oeap_print_checks(&rep);
		if (rep.ok)
			printf("%s: %s/%d verified (%zu checks)\n", cli.def->target, cli.def->name, cli.def->version, rep.n);
		else
			printf("%s: %s/%d does NOT verify: %zu of %zu checks failed\n", cli.def->target, cli.def->name,
			       cli.def->version, failed, rep.n);
	}
	rc = rep.ok ? OEAP_EXIT_OK : OEAP_EXIT_DIFFERS;
	goto done;
fail:
	rc = oeap_cli_error(&cli, &err);
done:
	oeap_report_free(&rep);
	free(buf);
	oeap_cli_close(&cli);
	return rc;
}
