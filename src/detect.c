/* detect.c - which bundled definition a command without --patch acts with (detect.h). */
#include "detect.h"

#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fsio.h"
#include "gitrepo.h"
#include "patchdirs.h"
#include "target.h"

/* "SGLang (sglang-oea: python/.../topk.py, installed sglang/.../topk.py)": a definition in messages. */
static size_t describe_def(const oeap_patchdef *def, char *out, size_t cap)
{
	char more[PATH_MAX * 2]; /* oeap_target_alternatives() answers in one static buffer */
	snprintf(more, sizeof(more), "%s", oeap_target_alternatives(def->targets));
	int n = snprintf(out, cap, "%s (%s: %s%s%s%s%s)", def->framework ? def->framework : def->name, def->name,
	                 def->target, more, def->installed_target ? ", installed " : "",
	                 def->installed_target ? def->installed_target : "", oeap_target_alternatives(def->installed_targets));
	return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}

/*
 * check, hook and verify --ref where no work tree names the framework (a bare
 * repository, a HEAD that deleted or moved the target): the newest commit
 * reachable from HEAD whose tree holds a target of any of `defs` says which;
 * each definition it holds one of is a candidate (two: refused as usual).
 * Usually HEAD itself. A walk that finds none leaves *nc at 0. An unborn
 * HEAD has no commit to ask: -1 with `err` saying so, as check would. A
 * folder that is no repository: 0, no candidate (the caller says why);
 * *walked says whether the history was walked.
 */
static int history_targets(const char *start, oeap_patchdef *const *defs, size_t n, size_t *cand, size_t *nc,
                           int *walked, oeap_error *err)
{
	git_repository *repo = NULL;
	git_revwalk *walk = NULL;
	char *prefix = NULL;
	oeap_error ignore;
	git_oid oid;
	int rc = 0;
	oeap_error_clear(&ignore);
	/* verify --ref detects before it reads the commit (and inits libgit2
	 * there): libgit2 must be initialised before its first call here. */
	git_libgit2_init();
	if (oeap_repo_open(start, &repo, &prefix, &ignore))
		goto done;
	if (git_repository_head_unborn(repo) == 1) {
		rc = oeap_fail(err, OEAP_ERR_GIT, start, 0,
		               "HEAD is unborn: the current branch has no commits yet, so no commit says which framework "
		               "this repository holds; --patch NAME|DIR picks a definition");
		goto done;
	}
	if (git_revwalk_new(&walk, repo) || git_revwalk_sorting(walk, GIT_SORT_TIME) || git_revwalk_push_head(walk))
		goto done;
	*walked = 1;
	while (!*nc && git_revwalk_next(&oid, walk) == 0) {
		git_commit *c = NULL;
		if (git_commit_lookup(&c, repo, &oid))
			continue;
		for (size_t i = 0; i < n; i++) {
			int found = 0;
			for (char *const *t = defs[i]->targets; *t && !found; t++) {
				char *path = malloc(strlen(prefix) + strlen(*t) + 1);
				git_oid id;
				if (path) {
					sprintf(path, "%s%s", prefix, *t);
					found = oeap_commit_blob(repo, c, path, &id, NULL, NULL, &ignore) == 0;
				}
				free(path);
			}
			if (found)
				cand[(*nc)++] = i;
		}
		git_commit_free(c);
	}
done:
	git_error_clear();
	git_revwalk_free(walk);
	free(prefix);
	git_repository_free(repo);
	return rc;
}

enum { DETECT_MAX = 32 };

/* What oeap_detect() gathers on its way to one definition. */
typedef struct detection {
	oeap_patchdef *defs[DETECT_MAX]; /* the bundled definitions, only their manifests read */
	size_t n;
	size_t cand[DETECT_MAX];         /* the candidates: indexes into defs */
	size_t nc;
	char *start;                     /* -C resolved; NULL with --python or a -C that is no folder */
	int walked;                      /* the history was asked (history_targets) */
	/* --python: each package name asked about once (pkgv, NULL after the
	 * last, points into pkgs), and where the interpreter imports it from. */
	char pkgs[DETECT_MAX][128];
	char *pkgv[DETECT_MAX];
	char (*locs)[PATH_MAX + 2];
} detection;

/* The manifests of the bundled definitions: enough to choose one. */
static int load_manifests(const char *folder, char *const *names, detection *d, oeap_error *err)
{
	if (!names)
		return oeap_fail(err, OEAP_ERR_USAGE, "--patch", 0,
		                 "no patch definitions found (in the installed share/oeapatch/patches or the source "
		                 "tree's patches/): --patch DIR names one");
	for (size_t i = 0; names[i] && d->n < DETECT_MAX; i++) {
		char path[PATH_MAX * 2];
		snprintf(path, sizeof(path), "%s/%s", folder, names[i]);
		if (oeap_patchdef_load_manifest(path, &d->defs[d->n], err))
			return -1;
		d->n++;
	}
	return 0;
}

/*
 * --python: each definition whose package the interpreter imports and holds
 * the installed target is a candidate, all asked in one interpreter start.
 */
static int candidates_imported(oeap_cli *cli, detection *d, oeap_error *err)
{
	/* One question per package, however many definitions share it. */
	size_t np = 0, at[DETECT_MAX];
	if (!(d->locs = calloc(DETECT_MAX, sizeof(*d->locs))))
		return oeap_fail(err, OEAP_ERR_INTERNAL, "oeapatch", 0, "out of memory");
	for (size_t i = 0; i < d->n; i++) {
		char pkg[128];
		at[i] = SIZE_MAX;
		if (oeap_target_package(d->defs[i], pkg, sizeof(pkg)))
			continue;
		for (size_t k = 0; k < np && at[i] == SIZE_MAX; k++)
			if (!strcmp(d->pkgs[k], pkg))
				at[i] = k;
		if (at[i] == SIZE_MAX) {
			snprintf(d->pkgs[np], sizeof(d->pkgs[np]), "%s", pkg);
			d->pkgv[np] = d->pkgs[np];
			at[i] = np++;
		}
	}
	if (oeap_target_python_ask(cli, d->pkgv, np, d->locs, err))
		return -1;
	size_t imports = 0, imported = 0;
	for (size_t i = 0; i < d->n; i++) {
		char parent[PATH_MAX + 2];
		struct stat st;
		if (at[i] == SIZE_MAX || d->locs[at[i]][0] != '/')
			continue;
		imports++, imported = i;
		snprintf(parent, sizeof(parent), "%s", d->locs[at[i]]);
		if (oeap_target_parent(parent) && oeap_target_first_existing(parent, d->defs[i]->installed_targets, &st))
			d->cand[d->nc++] = i;
	}
	/* One framework's package imports but holds no target (a release
	 * too old or too new, a broken install): that definition, so that
	 * the message says where the package is and which file it lacks. */
	if (d->nc == 0 && imports == 1)
		d->cand[d->nc++] = imported;
	return 0;
}

/*
 * -C: each definition whose target (a checkout) or installed_target (a
 * site-packages folder) is found from d->start upward is a candidate, and
 * the nearest root wins, as git finds the nearest .git.
 */
static int candidates_found(int need_target, detection *d, oeap_error *err)
{
	size_t best = 0;
	for (size_t i = 0; i < d->n; i++) {
		char *root = NULL;
		oeap_layout layout;
		const char *rel;
		if (oeap_target_find_root(d->defs[i], d->start, &root, &layout, &rel))
			return oeap_fail(err, OEAP_ERR_INTERNAL, "oeapatch", 0, "out of memory");
		if (layout != OEAP_LAYOUT_NONE) {
			size_t depth = strlen(root);
			if (depth > best)
				d->nc = 0, best = depth;
			if (depth == best)
				d->cand[d->nc++] = i;
		}
		free(root);
	}
	/* check, hook, verify --ref: no work tree names it (a bare
	 * repository, a HEAD without the file): the history says. */
	if (!d->nc && !need_target && history_targets(d->start, d->defs, d->n, d->cand, &d->nc, &d->walked, err))
		return -1;
	return 0;
}

/* No candidate: refused, naming every definition looked for, and --patch. */
static int refuse_none(const oeap_cli *cli, const detection *d, oeap_error *err)
{
	char msg[4096];
	size_t m = 0;
	for (size_t i = 0; i < d->n && m < sizeof(msg) - 1; i++) {
		m += (size_t)snprintf(msg + m, sizeof(msg) - m, "%s", i ? ", " : "");
		if (m < sizeof(msg) - 1)
			m += describe_def(d->defs[i], msg + m, sizeof(msg) - m);
	}
	if (cli->python)
		return oeap_fail(err, OEAP_ERR_IO, "--python", 0,
		                 "%s%s imports no framework oeapatch has a definition for (looked for %s): install one "
		                 "there, or pass -C with its checkout or site-packages folder",
		                 cli->python, cli->python_default ? " (the environment oeapatch is installed in: the "
		                                                    "default without -C or --python)" : "",
		                 msg);
	if (d->walked)
		return oeap_fail(err, OEAP_ERR_INPUT, d->start, 0,
		                 "no commit reachable from HEAD has this file (the target of any framework oeapatch "
		                 "has a definition for; looked for %s): is this a repository of one of them? "
		                 "--patch NAME|DIR picks a definition",
		                 msg);
	return oeap_fail(err, OEAP_ERR_IO, d->start ? d->start : cli->dir, 0,
	                 "no framework oeapatch has a definition for was found here or in any folder above "
	                 "(looked for %s): -C takes a source checkout, a site-packages folder that holds the "
	                 "installed package, or a folder inside either; --python PATH finds the package "
	                 "that interpreter imports; --patch NAME|DIR picks a definition",
	                 msg);
}

/* Two or more at the same root: refused, naming them and the --patch that picks each. */
static int refuse_several(const oeap_cli *cli, const detection *d, oeap_error *err)
{
	char msg[4096], how[1024];
	size_t m = 0, h = 0;
	for (size_t i = 0; i < d->nc && m < sizeof(msg) - 1; i++) {
		m += (size_t)snprintf(msg + m, sizeof(msg) - m, "%s", i ? (i + 1 == d->nc ? " and " : ", ") : "");
		if (m < sizeof(msg) - 1)
			m += describe_def(d->defs[d->cand[i]], msg + m, sizeof(msg) - m);
	}
	for (size_t i = 0; i < d->nc && h < sizeof(how) - 1; i++)
		h += (size_t)snprintf(how + h, sizeof(how) - h, "%s--patch %s", i ? " or " : "", d->defs[d->cand[i]]->name);
	return oeap_fail(err, OEAP_ERR_USAGE, cli->python ? "--python" : d->start ? d->start : cli->dir, 0,
	                 "%s holds more than one framework: %s; refusing to guess which to patch: %s picks one",
	                 cli->python ? cli->python : "this folder", msg, how);
}

/* The one candidate: only its manifest was read to choose, so the definition itself now, in full. */
static int load_chosen(oeap_cli *cli, const detection *d, oeap_error *err)
{
	if (oeap_patchdef_load(d->defs[d->cand[0]]->dir, &cli->def, err))
		return -1;
	cli->patch = cli->def->name;
	if (cli->python && d->locs) {
		/* The answer for the chosen package stands: no second interpreter start. */
		char pkg[128];
		for (size_t k = 0; k < DETECT_MAX && d->pkgv[k] && !oeap_target_package(cli->def, pkg, sizeof(pkg)); k++)
			if (!strcmp(d->pkgv[k], pkg)) {
				snprintf(cli->python_package, sizeof(cli->python_package), "%.4095s", d->locs[k]);
				break;
			}
	}
	return 0;
}

/*
 * Without --patch (and without $OEAPATCH_PATCH_DIR, which names one
 * definition): which bundled definition the directory is for. One bundled
 * definition is simply taken (today's behaviour, its not-found message
 * included). Else each whose target (a checkout) or installed_target (a
 * site-packages folder) is found from -C upward is a candidate, and the
 * nearest root wins, as git finds the nearest .git; --python: each whose
 * package the interpreter imports and holds the installed target, all asked
 * in one interpreter start. None, or two at the same root: refused, naming
 * every definition looked for or both found, and --patch.
 */
int oeap_detect(oeap_cli *cli, int need_target, oeap_error *err)
{
	char *folder = oeap_patchdef_bundle_dir(), **names = folder ? oeap_patchdef_list(folder) : NULL;
	detection d;
	int error;
	memset(&d, 0, sizeof(d));
	if ((error = load_manifests(folder, names, &d, err)))
		goto done;
	if (d.n == 1)
		d.cand[d.nc++] = 0;
	else if (cli->python)
		error = candidates_imported(cli, &d, err);
	else if ((d.start = realpath(cli->dir, NULL)))
		error = candidates_found(need_target, &d, err);
	else
		d.cand[d.nc++] = 0; /* a -C that is no folder: the open below says so */
	if (error)
		goto done;
	if (d.nc == 0)
		error = refuse_none(cli, &d, err);
	else if (d.nc > 1)
		error = refuse_several(cli, &d, err);
	else
		error = load_chosen(cli, &d, err);
done:
	for (size_t i = 0; i < d.n; i++)
		oeap_patchdef_free(d.defs[i]);
	oeap_patchdef_list_free(names);
	free(folder);
	free(d.start);
	free(d.locs);
	return error;
}
