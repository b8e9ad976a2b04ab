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

enum { OPT_REF = OEAP_OPT_FIRST_FREE };

static int on_option(int val, const char *arg, void *user)
{
	if (val != OPT_REF)
		return -1;
	*(const char **)user = arg;
	return 0;
}

static const oeap_option options[] = {
	OEAP_COMMON_OPTIONS,
	{"ref", required_argument, OPT_REF, "REV",
	 "verify the file as committed at REV (read from git, not the work tree; skips the binding and library checks)"},
	{NULL, 0, 0, NULL, NULL},
};

/*
 * --ref: the target's blob at `rev`, read from the object database. A
 * commit without the file is a failed check ("file"), not trouble: it does
 * not carry the patch. *what names the blob for messages ("REV:path").
 */
static int read_ref(const oeap_cli *cli, const char *rev, char **buf, size_t *len, char *what, size_t cap,
                    char *commit_hex, oeap_report *rep, oeap_error *err)
{
	git_repository *repo = NULL;
	git_commit *c = NULL;
	char *prefix = NULL, *path = NULL;
	git_oid id;
	int rc = -1;
	git_libgit2_init(); /* verify itself needs no git: only --ref does */
	if (oeap_repo_open(cli->root, &repo, &prefix, err) || oeap_resolve_commit(repo, rev, &c, err))
		goto done;
	if (!(path = malloc(strlen(prefix) + strlen(cli->def->target) + 1))) {
		oeap_fail(err, OEAP_ERR_INTERNAL, "verify", 0, "out of memory");
		goto done;
	}
	sprintf(path, "%s%s", prefix, cli->def->target);
	snprintf(what, cap, "%s:%s", rev, path);
	git_oid_tostr(commit_hex, GIT_OID_HEXSZ + 1, git_commit_id(c));
	int has = oeap_commit_blob(repo, c, path, &id, buf, len, err);
	if (has < 0)
		goto done;
	if (has == 1 && oeap_report_add(rep, "file", 0, 0, "no %s at %s (commit %.12s)", path, rev, commit_hex)) {
		oeap_fail(err, OEAP_ERR_INTERNAL, "verify", 0, "out of memory");
		goto done;
	}
	rc = 0;
done:
	free(path);
	free(prefix);
	git_commit_free(c);
	git_repository_free(repo);
	git_libgit2_shutdown();
	return rc;
}

int cmd_verify(int argc, char **argv)
{
	int rc = OEAP_EXIT_OK, first = 0;
	oeap_cli cli;
	oeap_error err;
	char *buf = NULL;
	size_t len = 0;
	const char *ref = NULL;
	char what[4200] = "", commit_hex[GIT_OID_HEXSZ + 1] = "";
	oeap_report rep;
	memset(&rep, 0, sizeof(rep));
	oeap_error_clear(&err);

	int p = oeap_cli_parse(&cli, "verify", "[-C DIR] [--ref REV] [--json]",
	                       "Prove the patch is in place, intact and bound to a loadable library. Exit 0 only "
	                       "when every check holds; otherwise each failed check is named. With --ref, the file "
	                       "as committed at REV is verified instead of the work tree's.",
	                       options, argc, argv, on_option, &ref, &first);
	if (p)
		return p > 0 ? OEAP_EXIT_OK : OEAP_EXIT_TROUBLE;
	if ((p = oeap_cli_no_operands(&cli, argc, argv, first)))
		return p;
	if (ref) {
		/* A commit has no binding module written beside the file, nor a
		 * library: those checks are about a work tree, so they are skipped. */
		if (oeap_cli_open(&cli, 0, &err) ||
		    read_ref(&cli, ref, &buf, &len, what, sizeof(what), commit_hex, &rep, &err))
			goto fail;
	} else if (oeap_cli_open(&cli, 1, &err) || oeap_read_file(cli.target, &buf, &len, &err)) {
		goto fail;
	}
	if ((buf && oeap_verify_bytes(cli.def, buf, len, ref ? what : oeap_cli_target_rel(&cli), &rep)) ||
	    (!ref && rep.applied && oeap_binding_verify(cli.def, cli.target, &rep))) {
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
		if (ref) {
			json_object_set_new(j, "ref", json_string(ref));
			json_object_set_new(j, "commit", json_string(commit_hex));
			json_object_set_new(j, "skipped", json_pack("[s,s]", "binding", "library"));
		}
		oeap_json_emit(j);
	} else {
		oeap_print_checks(&rep);
		if (ref)
			printf("(at %s, commit %.12s: the binding and library checks are about a work tree and were "
			       "skipped)\n",
			       ref, commit_hex);
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
