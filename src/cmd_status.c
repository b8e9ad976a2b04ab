/*
 * oeapatch status: one look at a checkout: applied or not, which version,
 * whether it drifted, which library it binds and whether that loads, and
 * verify's verdict, computed by verify's own function (verify.h) with the
 * settings of this environment: status says "verifies" exactly when verify
 * would exit 0. compute fills a status_result; print_json and print_text
 * only print it.
 */
#include <stdlib.h>
#include <string.h>

#include "binding.h"
#include "cli.h"
#include "cmd.h"
#include "command.h"
#include "fsio.h"
#include "opt.h"
#include "pipeline.h"
#include "plugincheck.h"
#include "settings.h"
#include "verify.h"

static const oeap_option options[] = {
	OEAP_COMMON_OPTIONS,
	OEAP_OPT_CALLBACK("env-file", 0, "FILE", oeap_verify_opt_env_file,
	                  "the server's environment is this systemd EnvironmentFile= (repeatable, later ones win), as verify's: "
	                  "its settings, the interpreter's PYTHONPATH, and SGLANG_PLUGINS / VLLM_PLUGINS"),
	OEAP_OPT_END,
};

typedef struct status_result {
	oeap_verify_result verdict; /* verify's, with no options: this environment's settings */
	oeap_report rep;            /* verdict.rep, moved here once computed */
	char *bind_text;  /* the binding module's text, NULL when absent */
	char *bind_path;
	char *library;    /* the library it records, or NULL */
	oeap_binding_state bind; /* whose module it is, when there is one */
	oeap_plugin_state plugin; /* information only: it never changes the exit code */
	int lib_ok;
	char lib_detail[768];
	int exit_code;
} status_result;

static void status_result_free(void *result)
{
	status_result *r = result;
	oeap_verify_result_free(&r->verdict);
	oeap_report_free(&r->rep);
	free(r->bind_text);
	free(r->bind_path);
	free(r->library);
}

/* Whether every check that failed is about the settings (the patch itself holds). */
static int only_settings_failed(const oeap_report *rep)
{
	for (size_t i = 0; i < rep->n; i++)
		if (!rep->checks[i].ok && strcmp(rep->checks[i].name, "settings") != 0)
			return 0;
	return 1;
}

/* "not-applied", "applied" (and verifies), "drift" (the failed checks say which) or "bad-settings"
 * (the patch holds, but the binding would refuse the settings of this environment). */
static const char *state_name(const status_result *r)
{
	return !r->rep.applied ? "not-applied"
	       : r->rep.ok     ? "applied"
	       : only_settings_failed(&r->rep) ? "bad-settings"
	                                       : "drift";
}

static int compute(const oeap_cli *cli, const void *opts, void *result, oeap_error *err)
{
	status_result *r = result;
	const oeap_verify_opts *here = opts;
	size_t bind_len = 0;
	int error = 0;
	/* verify's verdict, by verify's function: a status that says "verifies"
	 * must mean what verify means, settings and library override included
	 * (`here`: the work tree, this environment's settings or --env-file's). */
	if ((error = oeap_verify_compute(cli, here, &r->verdict, err)))
		goto done;
	/* The plugin's restriction is read where verify read the settings. */
	oeap_plugin_check(cli, &r->verdict.env, &r->plugin);
	r->rep = r->verdict.rep;
	memset(&r->verdict.rep, 0, sizeof(r->verdict.rep));
	if (!(r->bind_path = oeap_binding_path(cli->def, cli->target))) {
		error = oeap_fail(err, OEAP_ERR_INTERNAL, "status", 0, "out of memory");
		goto done;
	}
	oeap_error ignore;
	oeap_error_clear(&ignore);
	if (oeap_read_file(r->bind_path, &r->bind_text, &bind_len, &ignore) == 0) {
		/* the library the server loads: the settings' override (which verify loaded), else the recorded one */
		const char *o = r->verdict.library_override;
		r->library = o ? strdup(o) : oeap_binding_recorded_library(cli->def, r->bind_text, bind_len);
		if (oeap_binding_classify(cli->def, r->bind_text, bind_len, &r->bind)) {
			error = oeap_fail(err, OEAP_ERR_INTERNAL, "status", 0, "out of memory");
			goto done;
		}
	}
	/* verify's library check already loaded it: report what it found. */
	for (size_t i = 0; r->library && i < r->rep.n; i++)
		if (strcmp(r->rep.checks[i].name, "library") == 0) {
			r->lib_ok = r->rep.checks[i].ok;
			snprintf(r->lib_detail, sizeof(r->lib_detail), "%s", r->rep.checks[i].detail);
		}
	r->exit_code = r->rep.applied && r->verdict.exit_code == OEAP_EXIT_OK ? OEAP_EXIT_OK : OEAP_EXIT_DIFFERS;
done:
	return error;
}

static const char *bind_kind_name(oeap_binding_kind k)
{
	switch (k) {
	case OEAP_BINDING_CURRENT:
		return "current";
	case OEAP_BINDING_OTHER:
		return "other-oeapatch";
	case OEAP_BINDING_EDITED:
		return "edited";
	case OEAP_BINDING_UNKNOWN:
		return "unknown";
	default:
		return "not-ours";
	}
}

static void print_json(const oeap_cli *cli, const void *opts, const void *result)
{
	const status_result *r = result;
	(void)opts;
	json_t *j = oeap_cli_json_head(cli, r->exit_code);
	oeap_cli_json_target(cli, j);
	json_object_set_new(j, "state", json_string(state_name(r)));
	json_object_set_new(j, "patch", oeap_json_patch(cli->def));
	json_object_set_new(j, "applied_version", r->rep.applied ? json_integer(r->rep.version) : json_null());
	json_object_set_new(j, "binding", r->bind_text ? oeap_json_str(r->bind_path) : json_null());
	if (r->bind_text)
		json_object_set_new(j, "binding_module", json_pack("{s:s,s:o}", "state", bind_kind_name(r->bind.kind),
		                                                   "written_by", oeap_json_str(r->bind.writer)));
	json_object_set_new(j, "library", r->library ? json_pack("{s:o,s:b,s:o}", "path", oeap_json_str(r->library), "loads",
	                                                         r->lib_ok, "detail", oeap_json_str(r->lib_detail))
	                                             : json_null());
	json_t *drift = json_array();
	for (size_t i = 0; r->rep.applied && i < r->rep.n; i++)
		if (!r->rep.checks[i].ok)
			json_array_append_new(drift, json_pack("{s:o,s:o}", "check", oeap_json_str(r->rep.checks[i].name),
			                                       "detail", oeap_json_str(r->rep.checks[i].detail)));
	json_object_set_new(j, "drift", drift);
	if (!r->rep.applied)
		json_object_set_new(j, "fix", oeap_json_str(oeap_cli_apply_hint(cli)));
	json_object_set_new(j, "plugin", oeap_plugin_json(&r->plugin));
	oeap_json_emit(j);
}

static void print_text(const oeap_cli *cli, const void *opts, const void *result)
{
	const status_result *r = result;
	(void)opts;
	const oeap_report *rep = &r->rep;
	const char *good = oeap_color_good(stdout), *bad = oeap_color_bad(stdout), *reset = oeap_color_reset(stdout);
	size_t failed = 0;
	for (size_t i = 0; i < rep->n; i++)
		failed += !rep->checks[i].ok;
	printf("file:     %s\n", oeap_cli_target_rel(cli));
	if (cli->layout == OEAP_LAYOUT_INSTALLED)
		printf("root:     %s (installed package)\n", cli->root);
	printf("patch:    %s/%d%s%s%s\n", cli->def->name, cli->def->version, cli->def->framework ? " (" : "",
	       cli->def->framework ? cli->def->framework : "", cli->def->framework ? ")" : "");
	if (!rep->applied)
		printf("state:    %snot applied%s (run `%s`)\n", bad, reset, oeap_cli_apply_hint(cli));
	else if (rep->ok)
		printf("state:    %sapplied (version %d), verifies%s\n", good, rep->version, reset);
	else if (only_settings_failed(rep))
		/* The patch holds; the server would not start with these settings (verify exits 1 alike). */
		printf("state:    %sapplied (version %d), does NOT verify%s: the binding refuses the settings of this "
		       "environment (run `oeapatch verify`)\n",
		       bad, rep->version, reset);
	else
		printf("state:    %sapplied (version %d), DRIFT%s: %zu check%s failed (run `oeapatch verify`)\n", bad,
		       rep->version, reset, failed, failed == 1 ? "" : "s");
	for (size_t i = 0; rep->applied && i < rep->n; i++)
		if (!rep->checks[i].ok || rep->checks[i].warning)
			printf("          %s%s: %s\n", rep->checks[i].ok ? "warning: " : "", rep->checks[i].name,
			       rep->checks[i].detail);
	if (r->bind_text && r->bind.kind == OEAP_BINDING_OTHER)
		printf("binding:  %s (written by another oeapatch, definition %s: `%s` replaces it with this one's)\n",
		       r->bind_path, r->bind.writer, oeap_cli_apply_hint(cli));
	else if (r->bind_text && r->bind.kind == OEAP_BINDING_EDITED)
		printf("binding:  %s (edited by hand: its content digest no longer matches)\n", r->bind_path);
	else if (r->bind_text && r->bind.kind == OEAP_BINDING_UNKNOWN)
		printf("binding:  %s (differs from what this oeapatch writes: edited by hand, or written by an older "
		       "oeapatch; `oeapatch apply --diff` compares)\n",
		       r->bind_path);
	else if (r->bind_text && r->bind.kind == OEAP_BINDING_NOT_OURS)
		printf("binding:  %s (not written by oeapatch)\n", r->bind_path);
	else if (r->bind_text)
		printf("binding:  %s\n", r->bind_path);
	else
		printf("binding:  none\n");
	if (r->library && r->lib_detail[0])
		printf("library:  %s\n", r->lib_detail);
	else if (r->library)
		/* verify loads the library only once the module it records holds */
		printf("library:  %s (not loaded: the binding module does not verify)\n", r->library);
	else if (r->bind_text)
		printf("library:  none recorded in the binding module\n");
	if (r->plugin.applicable) {
		char line[2048];
		oeap_plugin_describe(&r->plugin, line, sizeof(line));
		printf("plugin:   %s\n", line);
	}
}

static const oeap_command_steps steps = {compute, print_json, print_text, status_result_free};

int cmd_status(int argc, char **argv)
{
	int first = 0;
	oeap_cli cli;
	status_result r;
	oeap_verify_opts o;
	memset(&r, 0, sizeof(r));
	memset(&o, 0, sizeof(o));

	int p = oeap_cli_parse(&cli, "status", "[-C DIR | --python PATH] [--env-file FILE ...] [--json] [-q]",
	                       "Applied or not, which patch version, drift, the library it binds, and whether the "
	                       "framework loads oeapatch's plugin. Exit 0 when applied and verified, 1 otherwise.",
	                       options, argc, argv, &o, &first);
	if (p)
		return p > 0 ? OEAP_EXIT_OK : OEAP_EXIT_TROUBLE;
	if ((p = oeap_cli_no_operands(&cli, argc, argv, first)))
		return p;
	if (o.too_many_env_files) {
		oeap_error err;
		oeap_error_clear(&err);
		oeap_fail(&err, OEAP_ERR_USAGE, "--env-file", 0, "at most %d files", OEAP_VERIFY_MAX_ENV_FILES);
		return oeap_cli_error(&cli, &err);
	}
	cli.env_files = o.env_files;
	cli.nenv_files = o.nenv_files;
	return oeap_command_run(&cli, 1, &steps, &o, &r, &r.exit_code);
}
