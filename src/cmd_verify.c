/*
 * oeapatch verify: read the target back and prove the patch holds: it
 * parses, every region is there once and unaltered, each sits where its
 * anchor demands, the names it passes are bound there, the binding module
 * is intact and the library it loads reports the ABI it expects.
 */
#include <stdlib.h>
#include <string.h>

#include "binding.h"
#include "checkout.h"
#include "cli.h"
#include "fsio.h"
#include "pipeline.h"

enum { OPT_REF = OEAP_OPT_FIRST_FREE, OPT_SKIP_BINDING };

typedef struct verify_opts {
	const char *ref;
	int skip_binding;
} verify_opts;

static int on_option(int val, const char *arg, void *user)
{
	verify_opts *o = user;
	if (val == OPT_REF)
		o->ref = arg;
	else if (val == OPT_SKIP_BINDING)
		o->skip_binding = 1;
	else
		return -1;
	return 0;
}

static const oeap_option options[] = {
	OEAP_COMMON_OPTIONS,
	{"ref", required_argument, OPT_REF, "REV",
	 "verify the file as committed at REV (read from git, not the work tree): the binding module must be in "
	 "that commit too; the library check is skipped"},
	{"skip-binding", no_argument, OPT_SKIP_BINDING, NULL,
	 "with --ref: do not require the binding module in the commit (every deploy runs `oeapatch apply`, which "
	 "writes it)"},
	{NULL, 0, 0, NULL, NULL},
};

/*
 * --ref: the target's blob at `rev`, read from the object database. A
 * commit without the file is a failed check ("file"), not trouble: it does
 * not carry the patch. *what names the blob for messages ("REV:path").
 */
static int read_ref(const oeap_cli *cli, const char *rev, char **buf, size_t *len, char *what, size_t cap,
                    char *commit_hex, oeap_report *rep, oeap_report *brep, oeap_error *err)
{
	git_repository *repo = NULL;
	git_commit *c = NULL;
	char *prefix = NULL, *path = NULL;
	git_oid id;
	int rc = -1;
	git_libgit2_init(); /* verify itself needs no git: only --ref does */
	if (oeap_repo_open(cli->root, &repo, &prefix, err) || oeap_resolve_commit(repo, rev, &c, err))
		goto done;
	if (!(path = malloc(strlen(prefix) + strlen(oeap_cli_target_rel(cli)) + 1))) {
		oeap_fail(err, OEAP_ERR_INTERNAL, "verify", 0, "out of memory");
		goto done;
	}
	sprintf(path, "%s%s", prefix, oeap_cli_target_rel(cli));
	snprintf(what, cap, "%s:%s", rev, path);
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

/* What verify found: compute fills it, the printers print it. */
typedef struct verify_result {
	oeap_report rep;
	char what[4200];  /* --ref: "REV:path" */
	char commit_hex[GIT_OID_HEXSZ + 1];
	int exit_code;
} verify_result;

static int compute(const oeap_cli *cli, const verify_opts *o, verify_result *r, oeap_error *err)
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
		error = read_ref(cli, ref, &buf, &len, r->what, sizeof(r->what), r->commit_hex, &r->rep,
		                 o->skip_binding ? NULL : &brep, err);
	} else {
		error = oeap_read_file(cli->target, &buf, &len, err);
	}
	if (error)
		goto done;
	if ((buf && oeap_verify_bytes(cli->def, buf, len, ref ? r->what : oeap_cli_target_rel(cli), &r->rep)) ||
	    (!ref && r->rep.applied && oeap_binding_verify(cli->def, cli->target, &r->rep))) {
		error = oeap_fail(err, OEAP_ERR_INTERNAL, "verify", 0, "out of memory");
		goto done;
	}
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

static void print_json(const oeap_cli *cli, const verify_opts *o, const verify_result *r)
{
	const char *ref = o->ref;
	json_t *j = oeap_cli_json_head(cli, r->exit_code);
	oeap_cli_json_target(cli, j);
	json_object_set_new(j, "patch", json_sprintf("%s/%d", cli->def->name, cli->def->version));
	json_object_set_new(j, "applied", json_boolean(r->rep.applied));
	json_object_set_new(j, "checks", oeap_json_checks(&r->rep));
	if (ref) {
		json_object_set_new(j, "ref", json_string(ref));
		json_object_set_new(j, "commit", json_string(r->commit_hex));
		json_object_set_new(j, "skipped", o->skip_binding ? json_pack("[s,s]", "binding", "library")
		                                                  : json_pack("[s]", "library"));
	} else if (!r->rep.applied) {
		json_object_set_new(j, "fix", json_string(oeap_cli_apply_hint(cli)));
	}
	oeap_json_emit(j);
}

static void print_text(const oeap_cli *cli, const verify_opts *o, const verify_result *r)
{
	const char *ref = o->ref;
	size_t failed = 0;
	for (size_t i = 0; i < r->rep.n; i++)
		failed += !r->rep.checks[i].ok;
	oeap_print_checks(&r->rep);
	if (ref)
		printf("(at %s, commit %.12s: the library check is about a machine and was skipped%s)\n", ref,
		       r->commit_hex, o->skip_binding ? "; the binding check was skipped: --skip-binding" : "");
	if (r->rep.ok)
		printf("%s: %s/%d %sverified%s (%zu checks)\n", oeap_cli_target_rel(cli), cli->def->name,
		       cli->def->version, oeap_color_good(stdout), oeap_color_reset(stdout), r->rep.n);
	else if (!r->rep.applied && !ref)
		/* The usual cause after a working deployment: `pip install -U` or a
		 * checkout replaced the file. Say how to put the patch back. */
		printf("%s: %s/%d %sis NOT applied%s: `%s` applies it\n", oeap_cli_target_rel(cli), cli->def->name,
		       cli->def->version, oeap_color_bad(stdout), oeap_color_reset(stdout), oeap_cli_apply_hint(cli));
	else
		printf("%s: %s/%d %sdoes NOT verify%s: %zu of %zu checks failed\n", oeap_cli_target_rel(cli),
		       cli->def->name, cli->def->version, oeap_color_bad(stdout), oeap_color_reset(stdout), failed,
		       r->rep.n);
}

int cmd_verify(int argc, char **argv)
{
	int rc = OEAP_EXIT_OK, first = 0;
	oeap_cli cli;
	oeap_error err;
	verify_opts o = {NULL, 0};
	verify_result r;
	memset(&r, 0, sizeof(r));
	oeap_error_clear(&err);

	int p = oeap_cli_parse(&cli, "verify", "[-C DIR | --python PATH] [--ref REV [--skip-binding]] [--json] [-q]",
	                       "Prove the patch is in place, intact and bound to a loadable library. Exit 0 only "
	                       "when every check holds; otherwise each failed check is named. With --ref, the file "
	                       "as committed at REV is verified instead of the work tree's.",
	                       options, argc, argv, on_option, &o, &first);
	if (p)
		return p > 0 ? OEAP_EXIT_OK : OEAP_EXIT_TROUBLE;
	if ((p = oeap_cli_no_operands(&cli, argc, argv, first)))
		return p;
	if (o.skip_binding && !o.ref) {
		oeap_fail(&err, OEAP_ERR_USAGE, "verify", 0, "--skip-binding only applies with --ref");
		return oeap_cli_error(&cli, &err);
	}
	if (oeap_cli_open(&cli, !o.ref, &err) || compute(&cli, &o, &r, &err)) {
		rc = oeap_cli_error(&cli, &err);
		goto done;
	}
	if (cli.json)
		print_json(&cli, &o, &r);
	else
		print_text(&cli, &o, &r);
	rc = r.exit_code;
done:
	oeap_report_free(&r.rep);
	oeap_cli_close(&cli);
	return rc;
}
