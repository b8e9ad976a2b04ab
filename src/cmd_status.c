/*
 * oeapatch status: one look at a checkout: applied or not, which version,
 * whether it drifted, which library it binds and whether that loads.
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

int cmd_status(int argc, char **argv)
{
	int rc = OEAP_EXIT_OK, first = 0;
	oeap_cli cli;
	oeap_error err;
	char *buf = NULL, *bind_text = NULL, *bind_path = NULL, *library = NULL;
	size_t len = 0, bind_len = 0;
	oeap_report rep;
	char lib_detail[768] = "";
	int lib_ok = 0;
	memset(&rep, 0, sizeof(rep));
	oeap_error_clear(&err);

	int p = oeap_cli_parse(&cli, "status", "[-C DIR] [--json]",
	                       "Applied or not, which patch version, drift, and the library it binds. Exit 0 when "
	                       "applied and verified, 1 otherwise.",
	                       options, argc, argv, NULL, NULL, &first);
	if (p)
		return p > 0 ? OEAP_EXIT_OK : OEAP_EXIT_TROUBLE;
	if ((p = oeap_cli_no_operands(&cli, argc, argv, first)))
		return p;
	if (oeap_cli_open(&cli, 1, &err) || oeap_read_file(cli.target, &buf, &len, &err))
		goto fail;
	/* The same checks as verify, binding module and library included: a
	 * status that says "verifies" must mean what verify means. */
	if (oeap_verify_bytes(cli.def, buf, len, oeap_cli_target_rel(&cli), &rep) ||
	    (rep.applied && oeap_binding_verify(cli.def, cli.target, &rep))) {
		oeap_fail(&err, OEAP_ERR_INTERNAL, "status", 0, "out of memory");
		goto fail;
	}
	if (!(bind_path = oeap_binding_path(cli.def, cli.target))) {
		oeap_fail(&err, OEAP_ERR_INTERNAL, "status", 0, "out of memory");
		goto fail;
	}
	oeap_error ignore;
	oeap_error_clear(&ignore);
	if (oeap_read_file(bind_path, &bind_text, &bind_len, &ignore) == 0)
		library = oeap_binding_recorded_library(cli.def, bind_text, bind_len);
	/* verify's library check already loaded it: report what it found. */
	for (size_t i = 0; library && i < rep.n; i++)
		if (strcmp(rep.checks[i].name, "library") == 0) {
			lib_ok = rep.checks[i].ok;
			snprintf(lib_detail, sizeof(lib_detail), "%s", rep.checks[i].detail);
		}

	/* applied + verified, not applied, or applied with drift (the failed checks say which). */
	const char *state = !rep.applied ? "not-applied" : rep.ok ? "applied" : "drift";
	size_t failed = 0;
	for (size_t i = 0; i < rep.n; i++)
		failed += !rep.checks[i].ok;
	if (cli.json) {
		json_t *j = json_object();
		json_object_set_new(j, "command", json_string("status"));
		json_object_set_new(j, "ok", json_true());
		json_object_set_new(j, "file", json_string(cli.def->target));
		json_object_set_new(j, "state", json_string(state));
		json_object_set_new(j, "patch", json_sprintf("%s/%d", cli.def->name, cli.def->version));
		json_object_set_new(j, "applied_version", rep.applied ? json_integer(rep.version) : json_null());
		json_object_set_new(j, "binding", bind_text ? json_string(bind_path) : json_null());
		json_object_set_new(j, "library", library ? json_pack("{s:s,s:b,s:s}", "path", library, "loads",
		                                                      lib_ok, "detail", lib_detail)
		                                          : json_null());
		json_t *drift = json_array();
		for (size_t i = 0; rep.applied && i < rep.n; i++)
			if (!rep.checks[i].ok)
				json_array_append_new(drift, json_pack("{s:s,s:s}", "check", rep.checks[i].name, "detail",
				                                       rep.checks[i].detail));
		json_object_set_new(j, "drift", drift);
		oeap_json_emit(j);
	} else {
		printf("file:     %s\n", cli.def->target);
		printf("patch:    %s/%d\n", cli.def->name, cli.def->version);
		if (!rep.applied)
			printf("state:    not applied\n");
		else if (rep.ok)
			printf("state:    applied (version %d), verifies\n", rep.version);
		else
			printf("state:    applied (version %d), DRIFT: %zu check%s failed (run `oeapatch verify`)\n",
			       rep.version, failed, failed == 1 ? "" : "s");
		for (size_t i = 0; rep.applied && i < rep.n; i++)
			if (!rep.checks[i].ok)
				printf("          %s: %s\n", rep.checks[i].name, rep.checks[i].detail);
		if (bind_text)
			printf("binding:  %s\n", bind_path);
		else
			printf("binding:  none\n");
		if (library)
			printf("library:  %s\n", lib_detail);
		else if (bind_text)
			printf("library:  none recorded in the binding module\n");
	}
	rc = rep.applied && rep.ok ? OEAP_EXIT_OK : OEAP_EXIT_DIFFERS;
	goto done;
fail:
	rc = oeap_cli_error(&cli, &err);
done:
	oeap_report_free(&rep);
	free(bind_text);
	free(bind_path);
	free(library);
	free(buf);
	oeap_cli_close(&cli);
	return rc;
}
