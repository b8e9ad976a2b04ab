/*
 * oeapatch verify: read the target back and prove the patch holds: it
 * parses, every region is there once and unaltered, each sits where its
 * anchor demands, the names it passes are bound there, the binding module
 * is intact, the library it loads reports the ABI it expects, and the
 * binding's settings in the environment the server gets hold the
 * definition's rules (a bad one would stop the server at import).
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "binding.h"
#include "cli.h"
#include "cmd.h"
#include "command.h"
#include "fsio.h"
#include "history.h"
#include "importsys.h"
#include "opt.h"
#include "pipeline.h"
#include "pycache.h"
#include "quote.h"
#include "revcheck.h"
#include "settings.h"
#include "startup.h"
#include "trust.h"
#include "trustcheck.h"
#include "verify.h"

extern char **environ;

static const oeap_option options[] = {
	OEAP_COMMON_OPTIONS,
	OEAP_OPT_VALUE("ref", 0, "REV", oeap_verify_opts, ref,
	               "verify the file as committed at REV (read from git, not the work tree): the binding module must be in "
	               "that commit too; the library, bytecode and trust checks are skipped, and so is the settings check unless "
	               "--env-file names files"),
	OEAP_OPT_SWITCH("skip-binding", 0, oeap_verify_opts, skip_binding,
	                "with --ref: do not require the binding module in the commit (every deploy runs `oeapatch apply`, which "
	                "writes it)"),
	OEAP_OPT_CALLBACK("env-file", 0, "FILE", oeap_verify_opt_env_file,
	                  "check the binding's settings as a systemd EnvironmentFile= gives them (its syntax; repeatable, later "
	                  "files win) instead of verify's own environment, whose settings are then ignored"),
	OEAP_OPT_END,
};

/* A value the binding refuses while on: it stops at import, so no value of that setting is shown. */
static int refused(const oeap_verify_result *r, size_t i)
{
	return r->settings.refused[i] && !r->settings.defaults_only;
}

/* The value the binding will run with for setting `i` (the recorded library when the override is unset). */
static const char *effective(const oeap_cli *cli, const oeap_verify_result *r, size_t i, char *buf, size_t cap)
{
	const char *v = oeap_settings_effective(cli->def, &r->settings, i, buf, cap);
	if (!v && !refused(r, i) && cli->def->library_env && !strcmp(cli->def->settings[i].name, cli->def->library_env))
		v = r->recorded_library;
	return v;
}

json_t *oeap_verify_settings_json(const oeap_cli *cli, const oeap_verify_result *r)
{
	const oeap_patchdef *def = cli->def;
	const oeap_settings_result *s = &r->settings;
	json_t *j = json_object(), *src = json_array(), *eff = json_object(), *probs = json_array();
	char buf[64];
	if (r->nenv_files)
		for (size_t i = 0; i < r->nenv_files; i++)
			json_array_append_new(src, oeap_json_str(r->env_files[i]));
	else
		json_array_append_new(src, json_string("environment"));
	json_object_set_new(j, "source", src);
	json_object_set_new(j, "on", json_boolean(s->on));
	/* what the start does: the one decision the plugin and status report too */
	oeap_start_outcome out;
	oeap_start_outcome_of(def, s, &out);
	json_object_set_new(j, "oea", oeap_json_str(oeap_start_kind_name(out.kind)));
	json_object_set_new(j, "reason", oeap_json_str(out.reason));
	if (s->switch_index >= 0)
		json_object_set_new(j, "switch", oeap_json_str(def->settings[s->switch_index].name));
	for (size_t i = 0; i < def->nsettings; i++) {
		const oeap_setting_def *d = &def->settings[i];
		const char *v = effective(cli, r, i, buf, sizeof(buf));
		json_t *jv;
		if (refused(r, i))
			jv = json_null();
		else if (d->type == OEAP_SETTING_INT && !s->strings[i])
			jv = json_integer(s->values[i]);
		else if (d->type == OEAP_SETTING_BOOL)
			jv = json_boolean(s->values[i]);
		else
			jv = oeap_json_str(v);
		json_object_set_new(eff, d->key, jv);
	}
	json_object_set_new(j, "effective", eff);
	for (size_t k = 0; k < s->nproblems; k++) {
		const oeap_setting_problem *p = &s->problems[k];
		json_t *o = json_object();
		json_object_set_new(o, "variable", oeap_json_str(p->name));
		json_object_set_new(o, "value", oeap_json_str(p->value));
		json_object_set_new(o, "from", p->shown ? oeap_json_str(p->origin ? p->origin : "environment") : json_null());
		if (p->line)
			json_object_set_new(o, "line", json_integer(p->line));
		json_object_set_new(o, "severity", json_string(p->error ? "error" : "warning"));
		json_object_set_new(o, "refused", json_boolean(p->refused));
		json_object_set_new(o, "message", oeap_json_str(p->message));
		json_array_append_new(probs, o);
	}
	json_object_set_new(j, "problems", probs);
	if (r->ignored[0])
		json_object_set_new(j, "ignored", oeap_json_str(r->ignored));
	return j;
}

void oeap_verify_print_settings(const oeap_cli *cli, const oeap_verify_result *r)
{
	const oeap_patchdef *def = cli->def;
	const oeap_settings_result *s = &r->settings;
	char buf[64];
	if (!def->nsettings)
		return;
	printf("settings:");
	for (size_t i = 0; i < def->nsettings; i++) {
		const char *v = effective(cli, r, i, buf, sizeof(buf));
		char *q = v && strpbrk(v, " '\"\\") ? oeap_quote(v, strlen(v)) : NULL;
		printf(" %s=%s", def->settings[i].key, q ? q : v ? v : refused(r, i) ? "(refused)" : "(none recorded)");
		free(q);
		if ((int)i == s->switch_index && !s->on)
			printf(" (off)");
	}
	size_t nrefused = 0;
	for (size_t i = 0; i < def->nsettings; i++)
		nrefused += (size_t)refused(r, i);
	if (nrefused)
		printf(" (the binding stops at import on the value%s FAILed above: it runs with none of these)",
		       nrefused == 1 ? "" : "s");
	else if (s->defaults_only)
		printf(" (defaults: the bad values above are ignored while off)");
	printf("\n");
	oeap_start_outcome out;
	oeap_start_outcome_of(def, s, &out);
	printf("oea:      %s (%s; from %s)\n", oeap_start_kind_name(out.kind), out.reason,
	       r->nenv_files ? "the --env-file files" : "the environment");
	if (r->ignored[0])
		printf("(ignored from verify's own environment, --env-file gives the server's: %s)\n", r->ignored);
}

static void print_json(const oeap_cli *cli, const void *opts, const void *result)
{
	const oeap_verify_opts *o = opts;
	const oeap_verify_result *r = result;
	const char *ref = o->ref;
	json_t *j = oeap_cli_json_head(cli, r->exit_code);
	oeap_cli_json_target(cli, j);
	if (ref) /* the file that commit holds: after a move, not the work tree's */
		json_object_set_new(j, "file", oeap_json_str(r->ref_file));
	json_object_set_new(j, "patch", oeap_json_patch(cli->def));
	json_object_set_new(j, "applied", json_boolean(r->rep.applied));
	json_object_set_new(j, "checks", oeap_json_checks(&r->rep));
	if (r->settings_checked)
		json_object_set_new(j, "settings", oeap_verify_settings_json(cli, r));
	if (ref) {
		json_object_set_new(j, "ref", oeap_json_str(ref));
		json_object_set_new(j, "commit", oeap_json_str(r->commit_hex));
		/* what is about a machine, not a commit: the library it loads, the
		 * bytecode beside the files, who can change them */
		json_t *skipped = o->skip_binding ? json_pack("[s,s,s,s]", "binding", "library", "bytecode", "trust")
		                                  : json_pack("[s,s,s]", "library", "bytecode", "trust");
		if (!r->settings_checked)
			json_array_append_new(skipped, json_string("settings"));
		json_object_set_new(j, "skipped", skipped);
	} else if (!r->rep.applied) {
		json_object_set_new(j, "fix", oeap_json_str(oeap_cli_apply_hint(cli)));
	}
	oeap_json_emit(j);
}

static void print_text(const oeap_cli *cli, const void *opts, const void *result)
{
	const oeap_verify_opts *o = opts;
	const oeap_verify_result *r = result;
	const char *ref = o->ref;
	size_t failed = 0, warnings = 0;
	for (size_t i = 0; i < r->rep.n; i++) {
		failed += !r->rep.checks[i].ok;
		warnings += r->rep.checks[i].warning;
	}
	oeap_print_checks(&r->rep);
	if (r->settings_checked)
		oeap_verify_print_settings(cli, r);
	if (ref)
		printf("(at %s, commit %.12s: the library, bytecode and trust checks are about a machine and were skipped%s%s)\n", ref,
		       r->commit_hex, r->settings_checked ? "" : ", so were the settings (--env-file checks a file's)",
		       o->skip_binding ? "; the binding check was skipped: --skip-binding" : "");
	const char *file = ref ? r->ref_file : oeap_cli_target_rel(cli);
	char warned[64] = "";
	if (warnings)
		snprintf(warned, sizeof(warned), ", %zu warning%s", warnings, warnings == 1 ? "" : "s");
	if (r->rep.ok)
		printf("%s: %s/%d %sverified%s (%zu checks%s)\n", file, cli->def->name,
		       cli->def->version, oeap_color_good(stdout), oeap_color_reset(stdout), r->rep.n, warned);
	else if (!r->rep.applied && !ref)
		/* The usual cause after a working deployment: `pip install -U` or a
		 * checkout replaced the file. Say how to put the patch back. */
		printf("%s: %s/%d %sis NOT applied%s: `%s` applies it\n", oeap_cli_target_rel(cli), cli->def->name,
		       cli->def->version, oeap_color_bad(stdout), oeap_color_reset(stdout), oeap_cli_apply_hint(cli));
	else
		printf("%s: %s/%d %sdoes NOT verify%s: %zu of %zu checks failed\n", file,
		       cli->def->name, cli->def->version, oeap_color_bad(stdout), oeap_color_reset(stdout), failed,
		       r->rep.n);
}

/* oeap_verify_compute() and oeap_verify_result_free() as steps: status calls them typed. */
static int compute(const oeap_cli *cli, const void *opts, void *result, oeap_error *err)
{
	return oeap_verify_compute(cli, opts, result, err);
}

static void result_free(void *result)
{
	oeap_verify_result_free(result);
}

static const oeap_command_steps steps = {compute, print_json, print_text, result_free};

int cmd_verify(int argc, char **argv)
{
	int first = 0;
	oeap_cli cli;
	oeap_error err;
	oeap_verify_opts o;
	memset(&o, 0, sizeof(o));
	oeap_verify_result r;
	memset(&r, 0, sizeof(r));
	oeap_error_clear(&err);

	int p = oeap_cli_parse(&cli, "verify",
	                       "[-C DIR | --python PATH] [--ref REV [--skip-binding]] [--env-file FILE ...] [--json] [-q]",
	                       "Prove the patch is in place, intact and bound to a loadable library, and that the "
	                       "binding's settings (the environment variables of its [setting:] sections) hold their rules. Exit 0 "
	                       "only when every check holds; otherwise each failed check is named. The settings are "
	                       "verify's own environment's, or with --env-file only the files' (as systemd gives a "
	                       "service its EnvironmentFile=; a shell's leftovers are not the server's). A bad value "
	                       "fails while the switch setting is on (the import would stop) and is a warning while "
	                       "it is off (the binding only warns); a name with the prefix that is no setting fails "
	                       "when it is within two edits of one (a typo), else warns. The line 'oea:' says what "
	                       "the start does: on, off, or stops (a value the binding refuses). On a machine with "
	                       "NVIDIA GPUs (/proc/driver/nvidia/gpus, /dev/nvidiaN) the check 'gpu' requires the "
	                       "library's CUDA fat binary to hold code for each GPU's compute capability (NVML): a "
	                       "cubin of its major version, or PTX at most its SM; a CPU-only liboea fails while OEA is "
	                       "on (build it with CUDA, CMAKE_CUDA_ARCHITECTURES naming the GPUs). With --ref, the "
	                       "file as committed at REV is verified instead of the work tree's, and the settings only "
	                       "with --env-file.",
	                       options, argc, argv, &o, &first);
	if (p)
		return p > 0 ? OEAP_EXIT_OK : OEAP_EXIT_TROUBLE;
	if ((p = oeap_cli_no_operands(&cli, argc, argv, first)))
		return p;
	if (o.too_many_env_files) {
		oeap_fail(&err, OEAP_ERR_USAGE, "--env-file", 0, "at most %d files", OEAP_VERIFY_MAX_ENV_FILES);
		return oeap_cli_error(&cli, &err);
	}
	if (o.skip_binding && !o.ref) {
		oeap_fail(&err, OEAP_ERR_USAGE, "verify", 0, "--skip-binding only applies with --ref");
		return oeap_cli_error(&cli, &err);
	}
	/* --python is asked in the server's environment: the files' PYTHONPATH. */
	cli.env_files = o.env_files;
	cli.nenv_files = o.nenv_files;
	return oeap_command_run(&cli, !o.ref, &steps, &o, &r, &r.exit_code);
}
