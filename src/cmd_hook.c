/*
 * oeapatch hook: install, remove or list the git hooks that keep a deployed
 * checkout patched: post-merge (pull, merge), post-checkout and post-rewrite
 * (rebase) verify the work tree (or re-apply, with --reapply) and shout when
 * the patch is gone; pre-push refuses to push commits that do not carry it.
 * hook.h says how existing hooks are chained and given back.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "binding.h"
#include "checkout.h"
#include "cli.h"
#include "fsio.h"
#include "hook.h"

enum { OPT_REAPPLY = OEAP_OPT_FIRST_FREE, OPT_LIBRARY, OPT_ONLY, OPT_UNCOMMITTED, OPT_FORCE, OPT_SKIP_BINDING };

typedef struct hook_opts {
	int reapply;
	int uncommitted;
	int force;
	int skip_binding;
	const char *library;
	const char *only;
} hook_opts;

static int on_option(int val, const char *arg, void *user)
{
	hook_opts *o = user;
	switch (val) {
	case OPT_REAPPLY:
		o->reapply = 1;
		return 0;
	case OPT_LIBRARY:
		o->library = arg;
		return 0;
	case OPT_ONLY:
		o->only = arg;
		return 0;
	case OPT_UNCOMMITTED:
		o->uncommitted = 1;
		o->reapply = 1;
		return 0;
	case OPT_FORCE:
		o->force = 1;
		return 0;
	case OPT_SKIP_BINDING:
		o->skip_binding = 1;
		return 0;
	}
	return -1;
}

static const oeap_option options[] = {
	OEAP_COMMON_OPTIONS,
	{"reapply", no_argument, OPT_REAPPLY, NULL,
	 "install: post-merge/-checkout/-rewrite re-apply the patch, then verify (default: verify only)"},
	{"uncommitted", no_argument, OPT_UNCOMMITTED, NULL,
	 "install for a checkout that carries the patch uncommitted: the post-* hooks re-apply (as --reapply), and "
	 "no pre-push (the pushed commits do not carry the patch; ours is removed)"},
	{"library", required_argument, OPT_LIBRARY, "PATH", "install --reapply: the liboea apply records (default: as apply)"},
	{"skip-binding", no_argument, OPT_SKIP_BINDING, NULL,
	 "install: pre-push does not require the binding module in pushed commits (every deploy runs apply)"},
	{"force", no_argument, OPT_FORCE, NULL,
	 "install, uninstall: replace or remove a hook of ours even when lines were added to it since install"},
	{"only", required_argument, OPT_ONLY, "HOOK,...",
	 "act on these hooks only (post-merge, post-checkout, post-rewrite, pre-push)"},
	{NULL, 0, 0, NULL, NULL},
};

static const char synopsis[] =
	"install | uninstall | status [-C REPO] [--reapply | --uncommitted] [--library PATH] [--skip-binding] "
	"[--force] [--only HOOK,...] [--json]";
static const char summary[] =
	"Install (or remove, or list) git hooks that verify the patch after git pull/merge (post-merge), checkout "
	"(post-checkout) and rebase (post-rewrite), or re-apply it with --reapply, and that block git push "
	"(pre-push) when a pushed commit does not carry a verified patch. core.hooksPath and worktrees are "
	"honoured; an existing hook is chained and restored exactly by uninstall. status exits 0 when every hook "
	"is installed and its oeapatch can run, 1 otherwise. For a checkout that carries the patch uncommitted, install "
	"with --uncommitted.";

/* Which hooks to act on: --only, else all (pre-push only for a bare
 * repository; no pre-push with --uncommitted, where it would block every push). */
static int selected(const hook_opts *o, int bare, const char *name)
{
	if (o->uncommitted && !strcmp(name, "pre-push"))
		return 0;
	if (!o->only)
		return !bare || !strcmp(name, "pre-push");
	size_t n = strlen(name);
	for (const char *p = o->only; *p;) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (len == n && !strncmp(p, name, n))
			return 1;
		p += len + (e ? 1 : 0);
	}
	return 0;
}

static int check_only(const char *only, oeap_error *err)
{
	if (only && (!*only || strstr(only, ",,") || only[0] == ',' || only[strlen(only) - 1] == ','))
		return oeap_fail(err, OEAP_ERR_USAGE, "--only", 0,
		                 "an empty hook name in '%s': list hooks separated by commas", only);
	for (const char *p = only; p && *p;) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		char name[64];
		snprintf(name, sizeof(name), "%.*s", (int)len, p);
		if (!oeap_hook_known(name))
			return oeap_fail(err, OEAP_ERR_USAGE, "--only", 0,
			                 "'%s' is not a hook oeapatch installs (post-merge, post-checkout, post-rewrite, "
			                 "pre-push)",
			                 name);
		p += len + (e ? 1 : 0);
	}
	return 0;
}

/* Whether the patch verifies in the work tree now (as status says), for
 * post-checkout's record. */
static int work_tree_verifies(const oeap_cli *cli)
{
	char *target = NULL, *buf = NULL;
	size_t len = 0;
	oeap_report rep;
	oeap_error ignore;
	int ok = 0;
	memset(&rep, 0, sizeof(rep));
	oeap_error_clear(&ignore);
	if (oeap_path_inside(cli->root, cli->def->target, &target, &ignore) == 0 &&
	    oeap_read_file(target, &buf, &len, &ignore) == 0 &&
	    oeap_verify_bytes(cli->def, buf, len, cli->def->target, &rep) == 0 && rep.applied &&
	    oeap_binding_verify(cli->def, target, &rep) == 0)
		ok = rep.ok;
	oeap_report_free(&rep);
	free(buf);
	free(target);
	return ok;
}

/* Whether HEAD's commit carries the patch (its target verifies there). */
static int head_carries_patch(git_repository *repo, const char *prefix, const oeap_patchdef *def)
{
	git_commit *c = NULL;
	char *path = malloc(strlen(prefix) + strlen(def->target) + 2), *buf = NULL;
	size_t len = 0;
	git_oid id;
	oeap_report rep;
	oeap_error ignore;
	int yes = 0;
	memset(&rep, 0, sizeof(rep));
	oeap_error_clear(&ignore);
	if (path) {
		sprintf(path, "%s%s%s", prefix, *prefix ? "/" : "", def->target);
		if (oeap_resolve_commit(repo, "HEAD", &c, &ignore) == 0 &&
		    oeap_commit_blob(repo, c, path, &id, &buf, &len, &ignore) == 0 &&
		    oeap_verify_bytes(def, buf, len, path, &rep) == 0)
			yes = rep.applied;
	}
	git_error_clear();
	oeap_report_free(&rep);
	free(buf);
	free(path);
	git_commit_free(c);
	return yes;
}

int cmd_hook(int argc, char **argv)
{
	int rc = OEAP_EXIT_OK, first = 0;
	oeap_cli cli;
	hook_opts o = {0, 0, 0, 0, NULL, NULL};
	oeap_error err;
	git_repository *repo = NULL;
	char *prefix = NULL, *dir = NULL, *self = NULL, *library = NULL, *patch = NULL, *seen = NULL;
	const char *sub = NULL;
	char command[32];
	int from_config = 0, problems = 0;
	oeap_error_clear(&err);

	/* The action is the first operand, before or after the options
	 * (`hook install -C R`, `hook -C R install`). */
	snprintf(command, sizeof(command), "hook");
	int p = oeap_cli_parse(&cli, command, synopsis, summary, options, argc, argv, on_option, &o, &first);
	if (p)
		return p > 0 ? OEAP_EXIT_OK : OEAP_EXIT_TROUBLE;
	if (first < argc) {
		sub = argv[first++];
		snprintf(command, sizeof(command), "hook %s", sub);
		cli.command = command;
	}
	if (!sub) {
		oeap_fail(&err, OEAP_ERR_USAGE, "hook", 0, "say what to do: oeapatch hook install | uninstall | status");
		return oeap_cli_error(&cli, &err);
	}
	int install = !strcmp(sub, "install"), uninstall = !strcmp(sub, "uninstall"), status = !strcmp(sub, "status");
	if (!install && !uninstall && !status) {
		oeap_fail(&err, OEAP_ERR_USAGE, "hook", 0, "'%s' is not install, uninstall or status", sub);
		return oeap_cli_error(&cli, &err);
	}
	if ((p = oeap_cli_no_operands(&cli, argc, argv, first)))
		return p;
	if (!install && (o.reapply || o.library || o.skip_binding)) {
		oeap_fail(&err, OEAP_ERR_USAGE, command, 0,
		          "--reapply, --uncommitted, --library and --skip-binding are options of hook install");
		return oeap_cli_error(&cli, &err);
	}
	if (o.uncommitted && o.only && selected(&(hook_opts){0, 0, 0, 0, NULL, o.only}, 0, "pre-push")) {
		oeap_fail(&err, OEAP_ERR_USAGE, command, 0,
		          "--uncommitted installs no pre-push: with the patch uncommitted, every pushed commit lacks "
		          "it and a pre-push would block every push");
		return oeap_cli_error(&cli, &err);
	}
	if (o.library && !o.reapply) {
		oeap_fail(&err, OEAP_ERR_USAGE, command, 0, "--library only matters with --reapply");
		return oeap_cli_error(&cli, &err);
	}
	if (check_only(o.only, &err) || oeap_cli_open(&cli, 0, &err) ||
	    oeap_repo_open(cli.root, &repo, &prefix, &err) || oeap_hooks_dir(repo, &dir, &from_config, &err))
		goto fail;
	int bare = git_repository_is_bare(repo);

	oeap_hook_config cfg;
	memset(&cfg, 0, sizeof(cfg));
	if (install) {
		/* The hook must find this very binary, whatever PATH the git user has. */
		if (!(self = realpath("/proc/self/exe", NULL))) {
			oeap_fail(&err, OEAP_ERR_IO, "hook install", 0, "cannot tell where the oeapatch binary is");
			goto fail;
		}
		if (strchr(cli.patch, '/') ? !(patch = realpath(cli.patch, NULL)) : !(patch = strdup(cli.patch))) {
			oeap_fail(&err, OEAP_ERR_IO, "--patch", 0, "cannot resolve %s", cli.patch);
			goto fail;
		}
		if (o.reapply) {
			library = o.library ? realpath(o.library, NULL) : oeap_library_default();
			if (!library) {
				oeap_fail(&err, OEAP_ERR_USAGE, "--library", 0, "%s",
				          o.library ? "the library given does not exist"
				                    : "no liboea found for --reapply to record: pass --library");
				goto fail;
			}
		}
		/* The checkout inside the work tree, without the trailing '/'. */
		size_t pl = strlen(prefix);
		if (pl && prefix[pl - 1] == '/')
			prefix[pl - 1] = '\0';
		cfg.oeapatch = self;
		cfg.patch = patch;
		cfg.library = library;
		cfg.subdir = prefix;
		cfg.target = oeap_cli_target_rel(&cli);
		cfg.reapply = o.reapply;
		cfg.skip_binding = o.skip_binding;
	}

	json_t *j = NULL, *arr = cli.json ? json_array() : NULL;
	if (!cli.json) {
		printf("hooks directory: %s%s\n", dir, from_config ? " (core.hooksPath)" : "");
		if (bare && !o.only)
			printf("(a bare repository has no work tree: only pre-push applies)\n");
	}
	for (const char *const *n = oeap_hook_names; *n; n++) {
		if (!selected(&o, bare, *n))
			continue;
		oeap_hook_action did = OEAP_HOOK_DID_NOTHING;
		oeap_hook_info info;
		unsigned hflags = o.force ? OEAP_HOOK_FORCE : 0;
		if (install && oeap_hook_install_flags(dir, *n, &cfg, hflags, &did, &err))
			goto fail_json;
		if (uninstall && oeap_hook_uninstall_flags(dir, *n, hflags, &did, &err))
			goto fail_json;
		if (did == OEAP_HOOK_DID_KEEP_EDITED)
			problems++;
		oeap_hook_inspect(dir, *n, &info);
		int ours = info.state == OEAP_HOOK_OURS || info.state == OEAP_HOOK_OURS_CHAINED;
		/* pre-push checks the pushed commits, never the work tree: it does
		 * not re-apply, whatever --reapply recorded for the others. */
		int pre_push = !strcmp(*n, "pre-push");
		if (pre_push)
			info.reapply = 0;
		int runs = ours && info.oeapatch[0] && access(info.oeapatch, X_OK) == 0;
		if (status && !runs)
			problems++;
		if (uninstall && (did == OEAP_HOOK_DID_REFUSE ? info.stray_chained : 0))
			problems++;
		if (cli.json) {
			json_t *e = json_pack("{s:s,s:s}", "hook", *n, "state", oeap_hook_state_name(info.state));
			if (!status)
				json_object_set_new(e, "action", json_string(oeap_hook_action_name(did)));
			if (ours) {
				json_object_set_new(e, "oeapatch", json_string(info.oeapatch));
				json_object_set_new(e, "runs", json_boolean(runs));
				json_object_set_new(e, "reapply", json_boolean(info.reapply));
			}
			json_object_set_new(e, "stray_chained", json_boolean(info.stray_chained));
			json_object_set_new(e, "edited", json_boolean(ours && info.edited));
			json_array_append_new(arr, e);
			continue;
		}
		printf("  %-14s %-13s", *n, oeap_hook_state_name(info.state));
		if (!status)
			printf(" %s", oeap_hook_action_name(did));
		else if (ours)
			printf(" %s %s%s", pre_push ? "blocks pushes of commits that do not verify, with"
			                   : info.reapply ? "re-applies and verifies with"
			                                  : "verifies with",
			       info.oeapatch, runs ? "" : " (NOT executable: reinstall)");
		if (status && ours && info.edited)
			printf(" (edited since install: uninstall and install leave it alone unless --force)");
		if (info.stray_chained)
			printf(" (%s%s is left: %s)", *n, OEAP_HOOK_CHAINED_SUFFIX,
			       info.state == OEAP_HOOK_FOREIGN ? "a hook not ours replaced ours; sort out which should run"
			                                       : "no hook of ours runs it");
		printf("\n");
	}
	/* With the patch uncommitted, a pre-push of ours would block every push. */
	if (install && o.uncommitted) {
		oeap_hook_action did = OEAP_HOOK_DID_NOTHING;
		oeap_hook_info info;
		oeap_hook_inspect(dir, "pre-push", &info);
		if ((info.state == OEAP_HOOK_OURS || info.state == OEAP_HOOK_OURS_CHAINED) &&
		    oeap_hook_uninstall_flags(dir, "pre-push", o.force ? OEAP_HOOK_FORCE : 0, &did, &err))
			goto fail_json;
		if (did == OEAP_HOOK_DID_KEEP_EDITED)
			problems++;
		if (did != OEAP_HOOK_DID_NOTHING && !cli.json)
			printf("  %-14s %-13s %s (it would block every push: the pushed commits do not carry the patch)\n",
			       "pre-push", did == OEAP_HOOK_DID_KEEP_EDITED ? "kept" : "removed", oeap_hook_action_name(did));
	}
	/* post-checkout's record of the patch's state, in this worktree's git
	 * dir: install starts it from what holds now; apply and revert keep it. */
	if (!bare && (seen = oeap_hook_state_path(cli.root))) {
		oeap_error ignore;
		oeap_error_clear(&ignore);
		if (install) {
			const char *word = work_tree_verifies(&cli) ? "verified\n" : "not-verified\n";
			oeap_write_atomic(seen, word, strlen(word), 0644, &ignore);
		} else if (uninstall) {
			oeap_remove_file(seen, &ignore);
			/* the checksum record of earlier oeapatch versions */
			char legacy[4096];
			snprintf(legacy, sizeof(legacy), "%.*soeapatch-hook.seen",
			         (int)(strlen(seen) - strlen(OEAP_HOOK_STATE_FILE)), seen);
			oeap_remove_file(legacy, &ignore);
		}
	}
	if (cli.json) {
		j = oeap_cli_json_head(&cli, problems ? OEAP_EXIT_DIFFERS : OEAP_EXIT_OK);
		json_object_set_new(j, "hooks_dir", json_string(dir));
		json_object_set_new(j, "from_core_hooks_path", json_boolean(from_config));
		json_object_set_new(j, "bare", json_boolean(bare));
		json_object_set_new(j, "hooks", arr);
		oeap_json_emit(j);
	} else if (install && o.uncommitted) {
		printf("uncommitted-patch workflow: after pull, merge, checkout and rebase the hooks re-apply %s/%d and "
		       "verify it; no pre-push (the pushed commits do not carry the patch)\n"
		       "git pull stops on the local change to %s before any hook can run; pull with\n"
		       "  %s revert -C '%s' && git pull    (post-merge then re-applies and verifies)\n",
		       cli.def->name, cli.def->version, cli.def->target, self, cli.root);
	} else if (install && o.reapply) {
		printf("after pull, merge, checkout and rebase the hooks re-apply %s/%d and verify it; pre-push blocks "
		       "commits without it\n",
		       cli.def->name, cli.def->version);
	} else if (install) {
		printf("committed-patch workflow: after pull, merge, checkout and rebase the hooks verify %s/%d; "
		       "pre-push blocks commits without it\n",
		       cli.def->name, cli.def->version);
	}
	/* The committed-patch hooks in a checkout whose patch is not committed:
	 * pre-push would block every push. Say what works instead. */
	if (install && !o.uncommitted && !bare && !cli.json && selected(&o, bare, "pre-push") &&
	    !head_carries_patch(repo, prefix, cli.def) && work_tree_verifies(&cli))
		printf("note: the patch is applied here but not committed (HEAD's %s does not carry it): pre-push will "
		       "block every push; for this workflow install with --uncommitted instead\n",
		       cli.def->target);
	rc = problems ? OEAP_EXIT_DIFFERS : OEAP_EXIT_OK;
	goto done;
fail_json:
	json_decref(j);
	json_decref(arr);
fail:
	rc = oeap_cli_error(&cli, &err);
done:
	free(seen);
	free(self);
	free(library);
	free(patch);
	free(dir);
	free(prefix);
	git_repository_free(repo);
	oeap_cli_close(&cli);
	return rc;
}
