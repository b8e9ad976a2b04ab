/*
 * oeapatch hook: install, remove or list the git hooks that keep a deployed
 * checkout patched: post-merge (pull, merge), post-checkout and post-rewrite
 * (rebase) verify the work tree (or re-apply, with --reapply) and shout when
 * the patch is gone; pre-push refuses to push commits that do not carry it.
 * hook.h says how existing hooks are chained and given back. compute does
 * the action and fills a hook_result; print_json and print_text only print it.
 */
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "binding.h"
#include "cli.h"
#include "cmd.h"
#include "command.h"
#include "fsio.h"
#include "history.h"
#include "hook.h"
#include "library.h"
#include "opt.h"
#include "trust.h"

typedef enum hook_action_kind { HOOK_UNKNOWN, HOOK_INSTALL, HOOK_UNINSTALL, HOOK_STATUS } hook_action_kind;

typedef struct hook_opts {
	int reapply;
	int uncommitted;
	int force;
	int skip_binding;
	const char *library;
	const char *only;
	hook_action_kind action; /* the first operand */
} hook_opts;

/* --uncommitted: the post-* hooks re-apply, as with --reapply. */
static int on_uncommitted(const char *arg, void *user)
{
	hook_opts *o = user;
	(void)arg;
	o->uncommitted = 1;
	o->reapply = 1;
	return 0;
}

static const oeap_option options[] = {
	OEAP_COMMON_OPTIONS,
	OEAP_OPT_SWITCH("reapply", 0, hook_opts, reapply,
	                "install: post-merge/-checkout/-rewrite re-apply the patch, then verify (default: verify only)"),
	OEAP_OPT_CALLBACK("uncommitted", 0, NULL, on_uncommitted,
	                  "install for a checkout that carries the patch uncommitted: the post-* hooks re-apply (as "
	                  "--reapply), and no pre-push (the pushed commits do not carry the patch; ours is removed)"),
	OEAP_OPT_VALUE("library", 0, "PATH", hook_opts, library,
	               "install --reapply: the liboea apply records (default: as apply)"),
	OEAP_OPT_SWITCH("skip-binding", 0, hook_opts, skip_binding,
	                "install: pre-push does not require the binding module in pushed commits (every deploy runs apply)"),
	OEAP_OPT_SWITCH("force", 0, hook_opts, force,
	                "install, uninstall: replace or remove a hook of ours even when lines were added to it since install"),
	OEAP_OPT_VALUE("only", 0, "HOOK,...", hook_opts, only,
	               "act on these hooks only (post-merge, post-checkout, post-rewrite, pre-push)"),
	OEAP_OPT_END,
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
	if (oeap_path_inside(cli->root, oeap_cli_target_rel(cli), &target, &ignore) == 0 &&
	    oeap_read_file(target, &buf, &len, &ignore) == 0 &&
	    oeap_pysource_check_size(len, target, &ignore) == 0 && /* verify would refuse it: not parsed here either */
	    oeap_verify_bytes(cli->def, buf, len, oeap_cli_target_rel(cli), &rep) == 0 && rep.applied &&
	    oeap_binding_verify(cli->def, target, &rep) == 0)
		ok = rep.ok;
	oeap_report_free(&rep);
	free(buf);
	free(target);
	return ok;
}

/* Whether HEAD's commit carries the patch (its target verifies there). */
static int head_carries_patch(git_repository *repo, const char *prefix, const oeap_patchdef *def,
                              char *const *alts, const char *target)
{
	git_commit *c = NULL;
	char *path = NULL, *buf = NULL;
	size_t len = 0;
	git_oid id;
	oeap_report rep;
	oeap_error ignore;
	int yes = 0;
	memset(&rep, 0, sizeof(rep));
	oeap_error_clear(&ignore);
	/* HEAD's target: the first alternative its tree holds. */
	if (oeap_resolve_commit(repo, "HEAD", &c, &ignore) == 0 &&
	    (path = oeap_commit_target(c, prefix, *prefix ? "/" : "", alts, target))) {
		if (oeap_commit_blob(repo, c, path, &id, &buf, &len, &ignore) == 0 &&
		    oeap_pysource_check_size(len, path, &ignore) == 0 &&
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

/* One hook as the action left it. */
typedef struct hook_row {
	const char *name;
	oeap_hook_action did;
	oeap_hook_info info;
	int ours, runs, pre_push;
	char untrusted[1024]; /* ours: why others can change it or the hook it chains ("" when none can) */
} hook_row;

/* What hook install/uninstall/status did and found: compute fills it, the printers print it. */
typedef struct hook_result {
	git_repository *repo;
	char *prefix, *dir, *self, *library, *patch, *seen;
	int from_config, bare, problems;
	hook_row rows[8];
	size_t nrows;
	oeap_hook_action pre_push_removed; /* --uncommitted: what became of an installed pre-push */
	int note_uncommitted;              /* committed-patch hooks where the patch is not committed */
	int exit_code;
} hook_result;

/* Whom the trust rule allows besides root: the target's owner, else (a bare
 * repository) the owner of the folder the hooks act on. */
static uid_t trust_owner(const oeap_cli *cli)
{
	uid_t owner = 0;
	if ((!cli->target || oeap_trust_target_owner(cli->target, &owner)) &&
	    (!cli->root || oeap_trust_target_owner(cli->root, &owner)))
		owner = 0;
	return owner;
}

/* The trust rule for `path` where it exists, else for the nearest folder
 * above it that does (what install will create there inherits it). */
static int trust_nearest(const char *path, uid_t owner, oeap_trust_problem *p)
{
	char *at = strdup(path);
	int rc = -1;
	while (at) {
		if (access(at, F_OK) == 0) {
			rc = oeap_trust_check(at, owner, p);
			break;
		}
		char *slash = strrchr(at, '/');
		if (!slash || slash == at)
			break;
		*slash = '\0';
	}
	free(at);
	return rc;
}

/* A hook of ours runs in git as whoever runs git, and runs the hook it
 * chains: both must pass the trust rule. */
static void row_trust(const char *dir, const char *name, uid_t owner, hook_row *row)
{
	char path[8192];
	oeap_trust_problem p;
	const char *suffix[] = {"", OEAP_HOOK_CHAINED_SUFFIX};
	row->untrusted[0] = '\0';
	for (size_t i = 0; i < 2 && !row->untrusted[0]; i++) {
		snprintf(path, sizeof(path), "%s/%s%s", dir, name, suffix[i]);
		if ((i == 0 || access(path, F_OK) == 0) && oeap_trust_check(path, owner, &p) > 0)
			snprintf(row->untrusted, sizeof(row->untrusted), "%s", p.message);
	}
}

static void hook_result_free(void *result)
{
	hook_result *r = result;
	free(r->seen);
	free(r->self);
	free(r->library);
	free(r->patch);
	free(r->dir);
	free(r->prefix);
	git_repository_free(r->repo);
}

static int compute(const oeap_cli *cli, const void *opts, void *result, oeap_error *err)
{
	const hook_opts *o = opts;
	hook_result *r = result;
	hook_action_kind action = o->action;
	int install = action == HOOK_INSTALL, uninstall = action == HOOK_UNINSTALL, status = action == HOOK_STATUS;
	if (oeap_repo_open(cli->root, &r->repo, &r->prefix, err) ||
	    oeap_hooks_dir(r->repo, &r->dir, &r->from_config, err))
		return -1;
	r->bare = git_repository_is_bare(r->repo);

	oeap_hook_config cfg;
	memset(&cfg, 0, sizeof(cfg));
	if (install) {
		/* The hook must find this very binary, whatever PATH the git user has. */
		if (!(r->self = realpath("/proc/self/exe", NULL)))
			return oeap_fail(err, OEAP_ERR_IO, "hook install", 0, "cannot tell where the oeapatch binary is");
		if (strchr(cli->patch, '/') ? !(r->patch = realpath(cli->patch, NULL)) : !(r->patch = strdup(cli->patch)))
			return oeap_fail(err, OEAP_ERR_IO, "--patch", 0, "cannot resolve %s", cli->patch);
		if (o->reapply) {
			r->library = o->library ? realpath(o->library, NULL) : oeap_library_default();
			if (!r->library)
				return o->library ? oeap_fail(err, OEAP_ERR_USAGE, "--library", 0, "%s: %s", o->library,
				                              strerror(errno))
				                  : oeap_fail(err, OEAP_ERR_USAGE, "--library", 0,
				                              "no liboea found for --reapply to record: pass --library");
		}
		/* The checkout inside the work tree, without the trailing '/'. */
		size_t pl = strlen(r->prefix);
		if (pl && r->prefix[pl - 1] == '/')
			r->prefix[pl - 1] = '\0';
		cfg.oeapatch = r->self;
		cfg.patch = r->patch;
		cfg.library = r->library;
		cfg.subdir = r->prefix;
		cfg.target = oeap_cli_target_rel(cli);
		cfg.reapply = o->reapply;
		cfg.skip_binding = o->skip_binding;
	}

	/* Refused before anything is written: a hook others can replace, or a
	 * library they can, runs their code as whoever runs git (docs/security.md). */
	uid_t owner = trust_owner(cli);
	int escape = oeap_trust_escape_environ(cli->def);
	if (install) {
		oeap_trust_problem p;
		const char *what = "the hooks directory";
		int bad = trust_nearest(r->dir, owner, &p) > 0;
		if (!bad && r->library && (bad = trust_nearest(r->library, owner, &p) > 0))
			what = "the library --reapply records";
		if (bad && escape)
			oeap_msg("warning: %s: %s; installed anyway: %s=true (a development tree)", what, p.message,
			         oeap_trust_escape_name(cli->def));
		else if (bad)
			return oeap_fail(err, OEAP_ERR_INPUT, "hook install", 0,
			                 "%s: %s; whoever can change it could run code as whoever runs git: refusing to "
			                 "install",
			                 what, p.message);
	}
	unsigned hflags = o->force ? OEAP_HOOK_FORCE : 0;
	for (const char *const *n = oeap_hook_names; *n && r->nrows < sizeof(r->rows) / sizeof(r->rows[0]); n++) {
		if (!selected(o, r->bare, *n))
			continue;
		hook_row *row = &r->rows[r->nrows];
		row->name = *n;
		row->did = OEAP_HOOK_DID_NOTHING;
		if (install && oeap_hook_install_flags(r->dir, *n, &cfg, hflags, &row->did, err))
			return -1;
		if (uninstall && oeap_hook_uninstall_flags(r->dir, *n, hflags, &row->did, err))
			return -1;
		r->nrows++;
		if (row->did == OEAP_HOOK_DID_KEEP_EDITED)
			r->problems++;
		oeap_hook_inspect(r->dir, *n, &row->info);
		row->ours = row->info.state == OEAP_HOOK_OURS || row->info.state == OEAP_HOOK_OURS_CHAINED;
		/* pre-push checks the pushed commits, never the work tree: it does
		 * not re-apply, whatever --reapply recorded for the others. */
		row->pre_push = !strcmp(*n, "pre-push");
		if (row->pre_push)
			row->info.reapply = 0;
		row->runs = row->ours && row->info.oeapatch[0] && access(row->info.oeapatch, X_OK) == 0;
		if (status && !row->runs)
			r->problems++;
		if (row->ours)
			row_trust(r->dir, *n, owner, row);
		if (status && row->untrusted[0] && !escape)
			r->problems++;
		if (uninstall && (row->did == OEAP_HOOK_DID_REFUSE ? row->info.stray_chained : 0))
			r->problems++;
	}
	/* With the patch uncommitted, a pre-push of ours would block every push. */
	r->pre_push_removed = OEAP_HOOK_DID_NOTHING;
	if (install && o->uncommitted) {
		oeap_hook_info info;
		oeap_hook_inspect(r->dir, "pre-push", &info);
		if ((info.state == OEAP_HOOK_OURS || info.state == OEAP_HOOK_OURS_CHAINED) &&
		    oeap_hook_uninstall_flags(r->dir, "pre-push", hflags, &r->pre_push_removed, err))
			return -1;
		if (r->pre_push_removed == OEAP_HOOK_DID_KEEP_EDITED)
			r->problems++;
	}
	/* post-checkout's record of the patch's state, in this worktree's git
	 * dir: install starts it from what holds now; apply and revert keep it. */
	if (!r->bare && (r->seen = oeap_hook_state_path(cli->root))) {
		oeap_error ignore;
		oeap_error_clear(&ignore);
		if (install) {
			const char *word = work_tree_verifies(cli) ? "verified\n" : "not-verified\n";
			oeap_write_atomic(r->seen, word, strlen(word), 0644, &ignore);
		} else if (uninstall) {
			oeap_remove_file(r->seen, &ignore);
			/* the checksum record of earlier oeapatch versions */
			char legacy[4096];
			snprintf(legacy, sizeof(legacy), "%.*soeapatch-hook.seen",
			         (int)(strlen(r->seen) - strlen(OEAP_HOOK_STATE_FILE)), r->seen);
			oeap_remove_file(legacy, &ignore);
		}
	}
	/* The committed-patch hooks in a checkout whose patch is not committed:
	 * pre-push would block every push. Say what works instead. */
	r->note_uncommitted = install && !o->uncommitted && !r->bare && selected(o, r->bare, "pre-push") &&
	                      !head_carries_patch(r->repo, r->prefix, cli->def,
	                                         cli->layout == OEAP_LAYOUT_INSTALLED ? cli->def->installed_targets
	                                                                              : cli->def->targets,
	                                         oeap_cli_target_rel(cli)) &&
	                      work_tree_verifies(cli);
	r->exit_code = r->problems ? OEAP_EXIT_DIFFERS : OEAP_EXIT_OK;
	return 0;
}

static void print_json(const oeap_cli *cli, const void *opts, const void *result)
{
	hook_action_kind action = ((const hook_opts *)opts)->action;
	const hook_result *r = result;
	json_t *j = oeap_cli_json_head(cli, r->exit_code), *arr = json_array();
	for (size_t i = 0; i < r->nrows; i++) {
		const hook_row *row = &r->rows[i];
		json_t *e = json_pack("{s:o,s:s}", "hook", oeap_json_str(row->name), "state",
		                      oeap_hook_state_name(row->info.state));
		if (action != HOOK_STATUS)
			json_object_set_new(e, "action", json_string(oeap_hook_action_name(row->did)));
		if (row->ours) {
			json_object_set_new(e, "oeapatch", oeap_json_str(row->info.oeapatch));
			json_object_set_new(e, "runs", json_boolean(row->runs));
			json_object_set_new(e, "reapply", json_boolean(row->info.reapply));
		}
		if (row->ours)
			/* the message names paths: json_string drops it (a missing key reads as trusted) for
			 * one byte that is not UTF-8, the quoting rule keeps it */
			json_object_set_new(e, "untrusted", row->untrusted[0] ? oeap_json_str(row->untrusted) : json_null());
		json_object_set_new(e, "stray_chained", json_boolean(row->info.stray_chained));
		json_object_set_new(e, "edited", json_boolean(row->ours && row->info.edited));
		json_array_append_new(arr, e);
	}
	json_object_set_new(j, "hooks_dir", oeap_json_str(r->dir));
	json_object_set_new(j, "from_core_hooks_path", json_boolean(r->from_config));
	json_object_set_new(j, "bare", json_boolean(r->bare));
	json_object_set_new(j, "hooks", arr);
	oeap_json_emit(j);
}

static void print_text(const oeap_cli *cli, const void *opts, const void *result)
{
	const hook_opts *o = opts;
	hook_action_kind action = o->action;
	const hook_result *r = result;
	int install = action == HOOK_INSTALL, status = action == HOOK_STATUS;
	printf("hooks directory: %s%s\n", r->dir, r->from_config ? " (core.hooksPath)" : "");
	if (r->bare && !o->only)
		printf("(a bare repository has no work tree: only pre-push applies)\n");
	for (size_t i = 0; i < r->nrows; i++) {
		const hook_row *row = &r->rows[i];
		printf("  %-14s %-13s", row->name, oeap_hook_state_name(row->info.state));
		if (!status)
			printf(" %s", oeap_hook_action_name(row->did));
		else if (row->ours)
			printf(" %s %s%s", row->pre_push ? "blocks pushes of commits that do not verify, with"
			                   : row->info.reapply ? "re-applies and verifies with"
			                                       : "verifies with",
			       row->info.oeapatch, row->runs ? "" : " (NOT executable: reinstall)");
		if (status && row->untrusted[0])
			printf(" (UNTRUSTED: %s)", row->untrusted);
		if (status && row->ours && row->info.edited)
			printf(" (edited since install: uninstall and install leave it alone unless --force)");
		if (row->info.stray_chained)
			printf(" (%s%s is left: %s)", row->name, OEAP_HOOK_CHAINED_SUFFIX,
			       row->info.state == OEAP_HOOK_FOREIGN ? "a hook not ours replaced ours; sort out which should run"
			                                            : "no hook of ours runs it");
		printf("\n");
	}
	if (r->pre_push_removed != OEAP_HOOK_DID_NOTHING)
		printf("  %-14s %-13s %s (it would block every push: the pushed commits do not carry the patch)\n",
		       "pre-push", r->pre_push_removed == OEAP_HOOK_DID_KEEP_EDITED ? "kept" : "removed",
		       oeap_hook_action_name(r->pre_push_removed));
	if (install && o->uncommitted)
		printf("uncommitted-patch workflow: after pull, merge, checkout and rebase the hooks re-apply %s/%d and "
		       "verify it; no pre-push (the pushed commits do not carry the patch)\n"
		       "git pull stops on the local change to %s before any hook can run; pull with\n"
		       "  %s revert -C '%s' && git pull    (post-merge then re-applies and verifies)\n",
		       cli->def->name, cli->def->version, oeap_cli_target_rel(cli), r->self, cli->root);
	else if (install && o->reapply)
		printf("after pull, merge, checkout and rebase the hooks re-apply %s/%d and verify it; pre-push blocks "
		       "commits without it\n",
		       cli->def->name, cli->def->version);
	else if (install)
		printf("committed-patch workflow: after pull, merge, checkout and rebase the hooks verify %s/%d; "
		       "pre-push blocks commits without it\n",
		       cli->def->name, cli->def->version);
	if (r->note_uncommitted)
		printf("note: the patch is applied here but not committed (HEAD's %s does not carry it): pre-push will "
		       "block every push; for this workflow install with --uncommitted instead\n",
		       oeap_cli_target_rel(cli));
}

static const oeap_command_steps steps = {compute, print_json, print_text, hook_result_free};

int cmd_hook(int argc, char **argv)
{
	int first = 0;
	oeap_cli cli;
	hook_opts o = {0, 0, 0, 0, NULL, NULL, HOOK_UNKNOWN};
	oeap_error err;
	hook_result r;
	const char *sub = NULL;
	char command[32];
	memset(&r, 0, sizeof(r));
	oeap_error_clear(&err);

	/* The action is the first operand, before or after the options
	 * (`hook install -C R`, `hook -C R install`). */
	snprintf(command, sizeof(command), "hook");
	int p = oeap_cli_parse(&cli, command, synopsis, summary, options, argc, argv, &o, &first);
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
	o.action = !strcmp(sub, "install")     ? HOOK_INSTALL
	           : !strcmp(sub, "uninstall") ? HOOK_UNINSTALL
	           : !strcmp(sub, "status")    ? HOOK_STATUS
	                                       : HOOK_UNKNOWN;
	if (o.action == HOOK_UNKNOWN) {
		oeap_fail(&err, OEAP_ERR_USAGE, "hook", 0, "'%s' is not install, uninstall or status", sub);
		return oeap_cli_error(&cli, &err);
	}
	if ((p = oeap_cli_no_operands(&cli, argc, argv, first)))
		return p;
	if (o.action != HOOK_INSTALL && (o.reapply || o.library || o.skip_binding)) {
		oeap_fail(&err, OEAP_ERR_USAGE, command, 0,
		          "--reapply, --uncommitted, --library and --skip-binding are options of hook install");
		return oeap_cli_error(&cli, &err);
	}
	if (o.uncommitted && o.only && selected(&(hook_opts){0, 0, 0, 0, NULL, o.only, HOOK_UNKNOWN}, 0, "pre-push")) {
		oeap_fail(&err, OEAP_ERR_USAGE, command, 0,
		          "--uncommitted installs no pre-push: with the patch uncommitted, every pushed commit lacks "
		          "it and a pre-push would block every push");
		return oeap_cli_error(&cli, &err);
	}
	if (o.library && !o.reapply) {
		oeap_fail(&err, OEAP_ERR_USAGE, command, 0, "--library only matters with --reapply");
		return oeap_cli_error(&cli, &err);
	}
	if (check_only(o.only, &err))
		return oeap_cli_error(&cli, &err);
	return oeap_command_run(&cli, 0, &steps, &o, &r, &r.exit_code);
}
