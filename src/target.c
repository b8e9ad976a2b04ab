/* target.c - finding the target a command acts on (target.h). */
#include "target.h"

#include <dirent.h>
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

#include "embedded_scripts.h"
#include "fsio.h"
#include "importsys.h"
#include "quote.h"

extern char **environ;

/* Does `dir`/`rel` exist (a file, or anything stat follows to)? */
static int exists_at(const char *dir, const char *rel, struct stat *st)
{
	char path[PATH_MAX * 2];
	if (snprintf(path, sizeof(path), "%s/%s", strcmp(dir, "/") ? dir : "", rel) >= (int)sizeof(path))
		return 0;
	return stat(path, st) == 0;
}

/* The first of the alternatives `alts` (NULL-terminated, may be NULL) that
 * exists under `dir`, or NULL: the definition's order of preference. */
const char *oeap_target_first_existing(const char *dir, char *const *alts, struct stat *st)
{
	for (size_t i = 0; alts && alts[i]; i++)
		if (exists_at(dir, alts[i], st))
			return alts[i];
	return NULL;
}

/* Cuts the last component off an absolute path; 0 when it was "/". */
int oeap_target_parent(char *dir)
{
	char *slash = strrchr(dir, '/');
	if (!slash || (slash == dir && !dir[1]))
		return 0;
	if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	return 1;
}

int oeap_target_is_site(const char *dir)
{
	const char *base = strrchr(dir, '/');
	base = base ? base + 1 : dir;
	if (!strcmp(base, "site-packages") || !strcmp(base, "dist-packages"))
		return 1;
	DIR *d = opendir(dir);
	struct dirent *e;
	int found = 0;
	while (d && !found && (e = readdir(d))) {
		size_t n = strlen(e->d_name);
		found = n > 10 && strcmp(e->d_name + n - 10, ".dist-info") == 0;
	}
	if (d)
		closedir(d);
	return found;
}

/* Is `rel` one of the alternatives `alts` (NULL-terminated, may be NULL)? */
static int listed(char *const *alts, const char *rel)
{
	for (size_t i = 0; alts && alts[i]; i++)
		if (!strcmp(alts[i], rel))
			return 1;
	return 0;
}

/* Do `a`/`ra` and `b`/`rb` sit in the same folder (the folders resolved)? The
 * binding module goes beside the file patched, and the import finds it only
 * beside the file it imports. */
static int same_folder(const char *a, const char *ra, const char *b, const char *rb)
{
	char pa[PATH_MAX * 2], pb[PATH_MAX * 2], x[PATH_MAX], y[PATH_MAX];
	char *sa, *sb;
	snprintf(pa, sizeof(pa), "%s/%s", a, ra);
	snprintf(pb, sizeof(pb), "%s/%s", b, rb);
	if (!(sa = strrchr(pa, '/')) || !(sb = strrchr(pb, '/')))
		return 0;
	*sa = *sb = '\0';
	return realpath(pa, x) && realpath(pb, y) && !strcmp(x, y);
}

/*
 * From `start` (absolute) upward, as git searches for .git: the first folder
 * where the definition's target (a checkout) or its installed_target (a
 * site-packages folder) exists. An installed match gives way to a checkout
 * further up that holds the very same file (its python/ folder looks like
 * site-packages, and so does an editable install): messages and git paths
 * are then the checkout's.
 */
int oeap_target_find_root(const oeap_patchdef *def, const char *start, char **root, oeap_layout *layout,
                     const char **rel)
{
	char *dir = strdup(start);
	struct stat st, inst;
	const char *t, *irel = NULL;
	*root = NULL;
	*layout = OEAP_LAYOUT_NONE;
	*rel = def->target;
	if (!dir)
		return -1;
	do {
		if ((t = oeap_target_first_existing(dir, def->targets, &st))) {
			/* Another file, or the same file imported from another folder (a
			 * link tree of symlinks, as setuptools' strict editable mode
			 * makes): the installed one found first stands. */
			if (*layout == OEAP_LAYOUT_INSTALLED && (st.st_dev != inst.st_dev || st.st_ino != inst.st_ino ||
			                                         !same_folder(*root, irel, dir, t)))
				continue;
			free(*root);
			*root = strdup(dir);
			/* vLLM's package sits at the top of its repository, so the checkout's path is also the
			 * installed one: a folder that is site-packages (by name, or holding what pip installed)
			 * is the installed layout, whichever list matched. */
			*layout = listed(def->installed_targets, t) && oeap_target_is_site(dir) ? OEAP_LAYOUT_INSTALLED
			                                                                       : OEAP_LAYOUT_CHECKOUT;
			*rel = t;
			break;
		}
		if (*layout == OEAP_LAYOUT_NONE && (t = oeap_target_first_existing(dir, def->installed_targets, &inst))) {
			*root = strdup(dir);
			*layout = OEAP_LAYOUT_INSTALLED;
			*rel = irel = t;
			if (!*root)
				break;
		}
	} while (oeap_target_parent(dir));
	free(dir);
	if (*layout != OEAP_LAYOUT_NONE && !*root) {
		*layout = OEAP_LAYOUT_NONE; /* out of memory: no root, so no layout either */
		return -1;
	}
	return 0;
}

/* The top-level package of the installed layout: installed_target's first component. */
int oeap_target_package(const oeap_patchdef *def, char *out, size_t cap)
{
	const char *t = def->installed_target;
	size_t n = t ? strcspn(t, "/") : 0;
	if (!n || n >= cap)
		return -1;
	memcpy(out, t, n);
	out[n] = '\0';
	return 0;
}

/*
 * --python: asks the interpreter where it would import each of `pkgs` from
 * (importlib's find_spec locates a top-level package without importing it,
 * so neither torch nor a GPU is needed), in one start whatever their number
 * (a Python start-up is most of what a command costs: docs/performance.md).
 * locs[i] gets the package's folder, or "" when the interpreter does not
 * import it; the interpreter's path and version go to cli. Returns 0, or -1
 * with err filled when the interpreter cannot answer.
 */
int oeap_target_python_ask(oeap_cli *cli, char *const *pkgs, size_t n, char (*locs)[PATH_MAX + 2], oeap_error *err)
{
	/* The interpreter's own path and version first, so the user sees which
	 * Python and which file; then one line per package (empty: none). The
	 * folder `-c` puts first on sys.path is ours, not the server's: dropped
	 * (and the query runs from "/"). */
	const char *script = oeap_script_python_ask_py; /* src/scripts/python_ask.py */
	char exe[PATH_MAX + 2], version[64], *args[17];
	int fds[2] = {-1, -1}, status = 0, error = 0;
	size_t got = 0;
	pid_t pid = -1;
	FILE *f = NULL;
	char **envp = NULL;
	oeap_env files;
	memset(&files, 0, sizeof(files));
	if (n > sizeof(args) / sizeof(args[0]) - 1)
		return oeap_fail(err, OEAP_ERR_INTERNAL, "--python", 0, "too many packages to ask for");
	/* The server's environment: verify's --env-file files, else ours. */
	for (size_t i = 0; i < cli->nenv_files; i++)
		if (oeap_envfile_load(cli->env_files[i], &files, err)) {
			oeap_env_free(&files);
			return -1;
		}
	const char *pp = NULL;
	oeap_python_path_text(cli->nenv_files ? &files : NULL, cli->python_path, sizeof(cli->python_path), &pp);
	cli->python_path_set = pp && *pp;
	snprintf(cli->python_path_value, sizeof(cli->python_path_value), "%s", pp ? pp : "");
	envp = oeap_python_env(cli->nenv_files ? &files : NULL);
	oeap_env_free(&files);
	if (!envp)
		return oeap_fail(err, OEAP_ERR_INTERNAL, "--python", 0, "out of memory");
	/* Not -I: PYTHONPATH, the user site and the other PYTHON* settings of the
	 * server's environment decide what it imports (a server started with
	 * PYTHONPATH=/mnt/sglang/python imports that sglang). Only the caller's
	 * current folder is kept out: from "/", and the script drops the '' that
	 * -c puts first on sys.path. */
	for (size_t i = 0; i < n; i++)
		args[i] = pkgs[i];
	args[n] = NULL;
	if ((fds[0] = oeap_python_spawn(cli->python, script, args, envp, 0, &pid)) < 0) {
		error = oeap_fail(err, OEAP_ERR_IO, "--python", 0, "cannot start %s: %s", cli->python, strerror(errno));
		goto done;
	}
	exe[0] = version[0] = '\0';
	if ((f = fdopen(fds[0], "r"))) {
		fds[0] = -1;
		if (!fgets(exe, sizeof(exe), f))
			exe[0] = '\0';
		if (!fgets(version, sizeof(version), f))
			version[0] = '\0';
		for (; got < n && fgets(locs[got], sizeof(locs[got]), f); got++)
			locs[got][strcspn(locs[got], "\n")] = '\0';
		while (fgetc(f) != EOF)
			; /* drain, so the child never blocks on a full pipe */
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	exe[strcspn(exe, "\n")] = '\0';
	version[strcspn(version, "\n")] = '\0';
	if (!WIFEXITED(status) || WEXITSTATUS(status) == 127) {
		error = oeap_fail(err, OEAP_ERR_USAGE, "--python", 0, "%s: cannot run it as a Python interpreter",
		                  cli->python);
		goto done;
	}
	if (WEXITSTATUS(status) != 0 || got < n) {
		error = oeap_fail(err, OEAP_ERR_USAGE, "--python", 0, "%s could not say where %s is (exit %d)",
		                  cli->python, n ? pkgs[0] : "anything", WEXITSTATUS(status));
		goto done;
	}
	snprintf(cli->python_exe, sizeof(cli->python_exe), "%s", exe[0] ? exe : cli->python);
	snprintf(cli->python_version, sizeof(cli->python_version), "%s", version);
done:
	if (f)
		fclose(f);
	if (fds[0] >= 0)
		close(fds[0]);
	if (fds[1] >= 0)
		close(fds[1]);
	oeap_python_env_free(envp);
	return error;
}

/*
 * --python for the definition chosen: the folder that holds the package
 * that interpreter imports (the root of the installed layout). Detection
 * asked already (cli->python_package set): its answer stands.
 */
int oeap_target_python_root(oeap_cli *cli, char **out, oeap_error *err)
{
	char pkg[128], loc[1][PATH_MAX + 2];
	char *pkgs[1] = {pkg};
	*out = NULL;
	if (oeap_target_package(cli->def, pkg, sizeof(pkg)))
		return oeap_fail(err, OEAP_ERR_USAGE, "--python", 0,
		                 "the patch definition %s states no installed_target: it cannot act on an installed "
		                 "package",
		                 cli->def->name);
	if (cli->python_package[0])
		snprintf(loc[0], sizeof(loc[0]), "%s", cli->python_package);
	else if (oeap_target_python_ask(cli, pkgs, 1, loc, err))
		return -1;
	if (!loc[0][0])
		return oeap_fail(err, OEAP_ERR_USAGE, "--python", 0,
		                 "%s%s does not import %s: install it there (pip install %s) or pass -C with its "
		                 "checkout or site-packages folder (asked in the server's environment, not from the "
		                 "current folder: %s)",
		                 cli->python, cli->python_default ? " (the environment oeapatch is installed in: the "
		                                                    "default without -C or --python)" : "",
		                 pkg, pkg, cli->python_path);
	if (loc[0][0] != '/')
		return oeap_fail(err, OEAP_ERR_USAGE, "--python", 0, "%s could not say where %s is (exit %d)", cli->python,
		                 pkg, 0);
	snprintf(cli->python_package, sizeof(cli->python_package), "%.4095s", loc[0]);
	/* The folder that holds the package is the root of the installed layout. */
	if (!oeap_target_parent(loc[0]) || !(*out = strdup(loc[0])))
		return oeap_fail(err, OEAP_ERR_INTERNAL, "--python", 0, "out of memory");
	return 0;
}

/* The alternatives after the first, as " or B or C" (empty for one path), for messages. */
const char *oeap_target_alternatives(char *const *alts)
{
	static char out[PATH_MAX * 2];
	size_t n = 0;
	out[0] = '\0';
	for (size_t i = 1; alts && alts[i] && n < sizeof(out); i++)
		n += (size_t)snprintf(out + n, sizeof(out) - n, " or %s", alts[i]);
	return out;
}

/* The article before a framework's name, read as it is said: "an SGLang", "a vLLM"
 * (a capital F H L M N R S X reads as a letter name, which starts with a vowel sound). */
static const char *an_or_a(const char *name)
{
	return strchr("AEIOUaeiouFHLMNRSX", name[0]) && name[0] ? "an" : "a";
}

/* Where it looked and what -C takes: the not-found message. */
int oeap_target_not_found(const oeap_cli *cli, const char *start, oeap_error *err)
{
	char targets[PATH_MAX * 2];
	const char *framework = cli->def->framework ? cli->def->framework : "SGLang"; /* the one before the key */
	if (cli->python)
		return oeap_fail(err, OEAP_ERR_IO, cli->def->installed_target, 0,
		                 "not found in %s, where %s imports the package from", start, cli->python);
	snprintf(targets, sizeof(targets), "%s", oeap_target_alternatives(cli->def->targets));
	return oeap_fail(err, OEAP_ERR_IO, cli->def->target, 0,
	                 "not found%s%s%s in %s or any folder above it%s%s%s%s: -C takes %s %s source checkout, a "
	                 "site-packages folder that holds the installed package, or a folder inside either; "
	                 "--python PATH (a virtual environment's bin/python) finds the package that interpreter "
	                 "imports",
	                 targets[0] ? " (nor " : "", targets[0] ? targets + 4 : "", targets[0] ? ")" : "", start,
	                 cli->def->installed_target ? " (nor " : "",
	                 cli->def->installed_target ? cli->def->installed_target : "",
	                 oeap_target_alternatives(cli->def->installed_targets),
	                 cli->def->installed_target ? ", as installed)" : "",
	                 an_or_a(framework), framework);
}
