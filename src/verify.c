/*
 * verify.c - the verdict on a target (verify.h): the pipeline's checks on
 * the bytes (the work tree's, or a commit's with --ref), the binding and its
 * library, the settings of the server's environment, the import system and
 * the trust rule. `verify` prints it (cmd_verify.c), `status` shows it.
 */
#include "verify.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "binding.h"
#include "fsio.h"
#include "gpu.h"
#include "history.h"
#include "importsys.h"
#include "pycache.h"
#include "quote.h"
#include "revcheck.h"
#include "startup.h"
#include "trust.h"
#include "trustcheck.h"

extern char **environ;

int oeap_verify_opt_env_file(const char *arg, void *user)
{
	oeap_verify_opts *o = user;
	if (o->nenv_files < OEAP_VERIFY_MAX_ENV_FILES)
		o->env_files[o->nenv_files++] = arg;
	else
		o->too_many_env_files = 1;
	return 0;
}

/*
 * --ref: the target's blob at `rev`, read from the object database. A
 * commit without the file is a failed check ("file"), not trouble: it does
 * not carry the patch. *what names the blob for messages ("REV:path").
 */
static int read_ref(const oeap_cli *cli, const char *rev, char **buf, size_t *len, char *what, size_t cap,
                    char *file, size_t fcap, char *commit_hex, oeap_report *rep, oeap_report *brep,
                    oeap_error *err)
{
	git_repository *repo = NULL;
	git_commit *c = NULL;
	char *prefix = NULL, *path = NULL;
	git_oid id;
	int rc = -1;
	git_libgit2_init(); /* verify itself needs no git: only --ref does */
	if (oeap_repo_open(cli->root, &repo, &prefix, err) || oeap_resolve_commit(repo, rev, &c, err))
		goto done;
	/* That revision's target: the first of the definition's alternatives its tree holds. */
	if (!(path = oeap_commit_target(c, prefix, "",
	                                cli->layout == OEAP_LAYOUT_INSTALLED ? cli->def->installed_targets
	                                                                     : cli->def->targets,
	                                oeap_cli_target_rel(cli)))) {
		oeap_fail(err, OEAP_ERR_INTERNAL, "verify", 0, "out of memory");
		goto done;
	}
	snprintf(what, cap, "%s:%s", rev, path);
	snprintf(file, fcap, "%s", path + strlen(prefix));
	git_oid_tostr(commit_hex, GIT_OID_HEXSZ + 1, git_commit_id(c));
	int has = oeap_commit_blob(repo, c, path, &id, buf, len, err);
	if (has < 0)
		goto done;
	if (has == 1 && oeap_report_add(rep, "file", 0, 0, "no %s at %s (commit %.12s)", path, rev, commit_hex)) {
		oeap_fail(err, OEAP_ERR_INTERNAL, "verify", 0, "out of memory");
		goto done;
	}
	/* What the committed target imports must be in the same tree: kept
	 * apart, it joins the report when the target carries the patch. */
	if (brep && has == 0 && oeap_commit_binding_check(repo, c, cli->def, path, brep, err))
		goto done;
	rc = 0;
done:
	free(path);
	free(prefix);
	git_commit_free(c);
	git_repository_free(repo);
	git_libgit2_shutdown();
	return rc;
}

/*
 * The environment the server will get: the --env-file files in order (later
 * ones win, as systemd merges EnvironmentFile= lines), else our own. Our own
 * is not merged under the files: a shell's leftover setting would then
 * stand in for a value the server will not have (a false green).
 */
static int settings_env(const oeap_cli *cli, const oeap_verify_opts *o, oeap_verify_result *r, oeap_error *err)
{
	if (!o->nenv_files)
		return oeap_env_from_environ(&r->env, environ, err);
	for (size_t i = 0; i < o->nenv_files; i++)
		if (oeap_envfile_load(o->env_files[i], &r->env, err))
			return -1;
	const char *prefix = cli->def->env_prefix;
	size_t n = 0, plen = prefix ? strlen(prefix) : 0;
	for (char **e = environ; plen && e && *e; e++)
		if (strncmp(*e, prefix, plen) == 0 && strchr(*e, '='))
			n += (size_t)snprintf(r->ignored + n, n < sizeof(r->ignored) ? sizeof(r->ignored) - n : 0, "%s%.*s",
			                      n ? ", " : "", (int)(strchr(*e, '=') - *e), *e);
	if (n >= sizeof(r->ignored))
		strcpy(r->ignored + sizeof(r->ignored) - 5, "...");
	return 0;
}

static const char *problem_origin(const oeap_setting_problem *p, char *buf, size_t cap)
{
	if (!p->shown)
		return "unset";
	if (!p->origin)
		return "the environment";
	snprintf(buf, cap, "%s:%ld", p->origin, p->line);
	return buf;
}

/* The "settings" checks: one per problem (FAIL or WARN), or one that holds. */
static int settings_checks(const oeap_cli *cli, oeap_verify_result *r)
{
	const oeap_patchdef *def = cli->def;
	const oeap_settings_result *s = &r->settings;
	const oeap_setting_def *sw = s->switch_index >= 0 ? &def->settings[s->switch_index] : NULL;
	char origin[4200];
	for (size_t k = 0; k < s->nproblems; k++) {
		const oeap_setting_problem *p = &s->problems[k];
		int rc;
		if (p->error)
			rc = oeap_report_add(&r->rep, "settings", 0, p->line, "%s%s%s (%s): %s", p->name, p->shown ? "=" : "",
			                     p->shown ? p->shown : "", problem_origin(p, origin, sizeof(origin)), p->message);
		else
			rc = oeap_report_warn(&r->rep, "settings", p->line, "%s%s%s (%s): %s%s%s%s", p->name,
			                      p->shown ? "=" : "", p->shown ? p->shown : "",
			                      problem_origin(p, origin, sizeof(origin)), p->message,
			                      s->defaults_only && sw ? "; " : "", s->defaults_only && sw ? sw->name : "",
			                      s->defaults_only && sw ? " is off, so the binding only warns and runs on the "
			                                              "defaults: the start with it on will fail"
			                                            : "");
		if (rc)
			return -1;
	}
	if (s->nproblems)
		return 0;
	char src[4200];
	size_t n = 0;
	src[0] = '\0';
	for (size_t i = 0; i < r->nenv_files && n < sizeof(src); i++)
		n += (size_t)snprintf(src + n, sizeof(src) - n, "%s%s", i ? ", " : "", r->env_files[i]);
	return oeap_report_add(&r->rep, "settings", 1, 0, "%zu of %zu settings of %s/%d set in %s, all valid", s->nset,
	                       def->nsettings, def->name, def->version, n ? src : "the environment");
}

/*
 * With the switch setting set to off (its zero) in the server's environment,
 * the binding loads no library: a library that does not load (`pip
 * uninstall oeapatch` removed it) stops nothing, so its check is a warning
 * that says what would happen with OEA on. Unset is not taken as that
 * choice: a shell with nothing set is how most people run verify, and the
 * server they restart next may well turn OEA on.
 */
static void library_off(const oeap_patchdef *def, oeap_verify_result *r)
{
	const oeap_settings_result *s = &r->settings;
	if (!r->settings_checked || s->on || s->switch_index < 0 || s->defaults_only || !s->given[s->switch_index])
		return;
	const char *sw = def->settings[s->switch_index].name;
	int output = oeap_start_output(def, s);
	int ok = 1;
	for (size_t i = 0; i < r->rep.n; i++) {
		oeap_check *c = &r->rep.checks[i];
		if (!c->ok && !strcmp(c->name, "library") && output >= 0) {
			/* recording only: the recorder is liboea's, so the library is loaded after all */
			size_t n = strlen(c->detail);
			snprintf(c->detail + n, sizeof(c->detail) - n,
			         "; %s is off, but %s is set and the recorder is liboea's: the server starts without OEA "
			         "and records nothing",
			         sw, def->settings[output].name);
		} else if (!c->ok && !strcmp(c->name, "library")) {
			size_t n = strlen(c->detail);
			snprintf(c->detail + n, sizeof(c->detail) - n,
			         "; %s is off, so the server starts without OEA and loads no library; with it on, the start "
			         "fails",
			         sw);
			c->ok = 1;
			c->warning = 1;
		}
		ok = ok && c->ok;
	}
	r->rep.ok = ok;
}

int oeap_verify_compute(const oeap_cli *cli, const oeap_verify_opts *o, oeap_verify_result *r, oeap_error *err)
{
	char *buf = NULL;
	size_t len = 0;
	int error = 0;
	const char *ref = o->ref;
	oeap_report brep;
	memset(&brep, 0, sizeof(brep));
	brep.ok = 1;
	if (ref) {
		/* A commit has no library: that check is about a machine, so it is
		 * skipped; the binding module is checked in the commit's tree. */
		error = read_ref(cli, ref, &buf, &len, r->what, sizeof(r->what), r->ref_file, sizeof(r->ref_file),
		                 r->commit_hex, &r->rep, o->skip_binding ? NULL : &brep, err);
	} else {
		error = oeap_read_file(cli->target, &buf, &len, err);
	}
	/* Too large to parse is trouble (exit 2), not a failed check. */
	if (!error && buf)
		error = oeap_pysource_check_size(len, ref ? r->what : oeap_cli_target_rel(cli), err);
	if (error)
		goto done;
	/* Settings: about the server's environment, so not of a commit unless files are named. */
	r->settings_checked = !ref || o->nenv_files;
	r->env_files = o->env_files;
	r->nenv_files = o->nenv_files;
	if (r->settings_checked && settings_env(cli, o, r, err)) {
		error = -1;
		goto done;
	}
	if (r->settings_checked && oeap_settings_check(cli->def, &r->env, &r->settings)) {
		error = oeap_fail(err, OEAP_ERR_INTERNAL, "verify", 0, "out of memory");
		goto done;
	}
	/* The library the binding will load: the settings' override, else the recorded one. */
	const char *library = NULL;
	for (size_t i = 0; r->settings_checked && cli->def->library_env && i < cli->def->nsettings; i++)
		if (!strcmp(cli->def->settings[i].name, cli->def->library_env) && r->settings.given[i])
			library = r->settings.strings[i];
	if (r->settings_checked && cli->def->library_env && !oeap_patchdef_setting(cli->def, cli->def->library_env)) {
		/* a definition without a rule for it: its raw value, as before settings had rules */
		const oeap_env_var *v = oeap_env_get(&r->env, cli->def->library_env);
		library = v && *v->value ? v->value : NULL;
	}
	r->library_override = library;
	/* The loader's search path the server will have: a bare library name is
	 * found with it (the env files' when given: settings_env). */
	const oeap_env_var *ldp = oeap_env_get(&r->env, "LD_LIBRARY_PATH");
	char ld_origin[PATH_MAX + 32];
	if (ldp && ldp->origin)
		snprintf(ld_origin, sizeof(ld_origin), "%s:%ld", ldp->origin, ldp->line);
	else
		snprintf(ld_origin, sizeof(ld_origin), "%s", o->nenv_files ? "the env files" : "the environment");
	const char *ld_path = ldp ? ldp->value : NULL;
	int escape = r->settings_checked && oeap_trust_escape_on(cli->def, &r->settings);
	/* The file's own checks; then, for a work tree, the binding and the
	 * library it loads, and who can change the target, the module and that
	 * library (docs/security.md: a machine's files, so not --ref's); then the
	 * settings. */
	if ((buf && oeap_verify_bytes(cli->def, buf, len, ref ? r->what : oeap_cli_target_rel(cli), &r->rep)) ||
	    (!ref && r->rep.applied &&
	     oeap_binding_verify_with(cli->def, cli->target, library, ld_path, ld_origin, escape, &r->rep,
	                              &r->recorded_library)) ||
	    (!ref && r->rep.applied &&
	     oeap_trust_verify(cli->def, cli->target, library ? library : r->recorded_library, ld_path, ld_origin,
	                       escape, &r->rep)) ||
	    (r->settings_checked && settings_checks(cli, r))) {
		error = oeap_fail(err, OEAP_ERR_INTERNAL, "verify", 0, "out of memory");
		goto done;
	}
	/* What the server's interpreter imports in its place (a package folder,
	 * an extension module, bytecode) and who can put it there. */
	if (!ref && r->rep.applied &&
	    (error = oeap_import_verify(cli->def, cli->target, cli->python, o->nenv_files ? &r->env : NULL,
	                                escape,
	                                oeap_cli_apply_hint(cli), &r->rep, err)))
		goto done;
	/* Whether that library has code for this machine's NVIDIA GPUs (gpu.h). */
	if (!ref && r->rep.applied && r->settings_checked) {
		oeap_start_outcome start;
		oeap_start_outcome_of(cli->def, &r->settings, &start);
		if (oeap_gpu_verify(library ? library : r->recorded_library, start.kind != OEAP_START_OFF, start.variable,
		                    &r->rep)) {
			error = oeap_fail(err, OEAP_ERR_INTERNAL, "verify", 0, "out of memory");
			goto done;
		}
	}
	library_off(cli->def, r);
	for (size_t i = 0; ref && r->rep.applied && i < brep.n; i++)
		if (oeap_report_add(&r->rep, brep.checks[i].name, brep.checks[i].ok, brep.checks[i].line, "%s",
		                    brep.checks[i].detail)) {
			error = oeap_fail(err, OEAP_ERR_INTERNAL, "verify", 0, "out of memory");
			goto done;
		}
	r->exit_code = r->rep.ok ? OEAP_EXIT_OK : OEAP_EXIT_DIFFERS;
done:
	oeap_report_free(&brep);
	free(buf);
	return error;
}

void oeap_verify_result_free(oeap_verify_result *r)
{
	oeap_report_free(&r->rep);
	oeap_env_free(&r->env);
	oeap_settings_result_free(&r->settings);
	free(r->recorded_library);
	r->recorded_library = NULL;
}
