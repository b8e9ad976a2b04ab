#include "cli.h"

/* SHA256_*: the module's digest by the code region.c and binding.c hash with (region.c says why not EVP). */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>
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

#include "binding.h"
#include "detect.h"
#include "patchdirs.h"
#include "fsio.h"
#include "gitrepo.h"
#include "quote.h"
#include "target.h"

/*
 * An installed target that is a symbolic link: the package imported is a
 * link tree (setuptools' strict editable mode makes one under the project's
 * build/__editable__.*: real folders, each file a link into the checkout).
 * Refused, naming the layout: the binding module written beside the file
 * the link leads to is not where that import looks, and one added to the
 * link tree is in no checkout (git and `check` do not see it) and is
 * dropped by the next `pip install -e`. The editable modes that import the
 * checkout's own folders (the default, compat) work.
 */
static int link_tree(const oeap_cli *cli, oeap_error *err)
{
	char path[PATH_MAX * 2], real[PATH_MAX];
	struct stat st;
	snprintf(path, sizeof(path), "%s/%s", cli->root, cli->rel);
	if (lstat(path, &st) || !S_ISLNK(st.st_mode))
		return 0;
	if (!realpath(path, real))
		snprintf(real, sizeof(real), "(a broken link)");
	int editable = strstr(cli->root, "/__editable__.") != NULL;
	return oeap_fail(err, OEAP_ERR_USAGE, cli->rel, 0,
	                 "in %s is a symbolic link to %s: %s imports a link tree%s, where the binding module "
	                 "written beside the linked file is not found (and one added there is lost at the next "
	                 "install); refusing, nothing written. Install it so that the server imports the checkout's "
	                 "own files (pip install -e DIR, default or compat mode), then apply",
	                 cli->root, real, cli->python ? cli->python : "the server",
	                 editable ? " (setuptools' strict editable mode)" : "");
}


int oeap_cli_open(oeap_cli *cli, int need_target, oeap_error *err)
{
	struct stat st;
	char *dir = NULL, *start = NULL, *from_python = NULL;
	int error = 0;
	const char *one = getenv("OEAPATCH_PATCH_DIR");
	if (!cli->patch && !(one && *one)) {
		if (oeap_detect(cli, need_target, err))
			return -1;
		goto loaded;
	}
	if (!cli->patch) {
		cli->patch = "sglang-oea"; /* the name oeap_patchdef_locate ignores for $OEAPATCH_PATCH_DIR */
		cli->patch_env = 1;
	}
	if (strchr(cli->patch, '/'))
		dir = strdup(cli->patch);
	else if (!(dir = oeap_patchdef_locate(cli->patch)))
		return oeap_fail(err, OEAP_ERR_USAGE, "--patch", 0,
		                 "no patch definition named '%s' (looked in $OEAPATCH_PATCH_DIR, the installed "
		                 "share/oeapatch/patches and the source tree)", cli->patch);
	int rc = oeap_patchdef_load(dir, &cli->def, err);
	free(dir);
	if (rc)
		return -1;
	if (!cli->patch_given)
		cli->patch = cli->def->name; /* $OEAPATCH_PATCH_DIR: what hints and hooks name */
loaded:
	cli->rel = cli->def->target;
	if (cli->python && oeap_target_python_root(cli, &from_python, err))
		return -1;
	const char *given = from_python ? from_python : cli->dir;
	if (stat(given, &st)) {
		error = oeap_fail(err, OEAP_ERR_USAGE, given, 0, "cannot use it as the checkout: %s", strerror(errno));
		goto done;
	}
	if (!S_ISDIR(st.st_mode)) {
		error = oeap_fail(err, OEAP_ERR_USAGE, given, 0,
		                  "is not a directory: -C takes the checkout's or site-packages' directory");
		goto done;
	}
	if (!(start = realpath(given, NULL))) {
		error = oeap_fail(err, OEAP_ERR_IO, given, 0, "cannot resolve: %s", strerror(errno));
		goto done;
	}
	/* --python names the package that interpreter imports, nothing else:
	 * without the target there, the upward search would find whatever
	 * encloses site-packages (a checkout the venv lives in) and act on that. */
	if (from_python && !oeap_target_first_existing(start, cli->def->installed_targets, &st)) {
		error = oeap_fail(err, OEAP_ERR_IO, cli->def->installed_target, 0,
		                  "not found in %s, where %s imports the package from: that %s has no such file (not "
		                  "the version this patch is for, or a partial install); the folders around it are not "
		                  "searched, since they are not what the interpreter imports",
		                  start, cli->python, cli->python_package);
		goto done;
	}
	if (oeap_target_find_root(cli->def, start, &cli->root, &cli->layout, &cli->rel)) {
		error = oeap_fail(err, OEAP_ERR_INTERNAL, "oeapatch", 0, "out of memory");
		goto done;
	}
	if (cli->layout == OEAP_LAYOUT_NONE) {
		if (need_target) {
			error = oeap_target_not_found(cli, start, err);
			goto done;
		}
		/* check, hook: a bare repository has no work tree to find it in. */
		cli->root = start;
		start = NULL;
		goto done;
	}
	if (!need_target)
		goto done;
	if (cli->layout == OEAP_LAYOUT_INSTALLED && (error = link_tree(cli, err)))
		goto done;
	if ((error = oeap_path_inside(cli->root, cli->rel, &cli->target, err)))
		goto done;
	if (stat(cli->target, &st)) {
		error = oeap_fail(err, OEAP_ERR_IO, cli->rel, 0, "not found in %s: %s", cli->root, strerror(errno));
		goto done;
	}
	if (S_ISDIR(st.st_mode)) {
		error = oeap_fail(err, OEAP_ERR_IO, cli->rel, 0, "is a directory, not a file");
		goto done;
	}
	/* Which Python answered and which file it leads to: the line that shows
	 * a surprise (another venv, another sglang) before anything is done. */
	if (cli->python && !cli->json)
		printf("python:   %s (Python %s) imports %s, target %s; %s\n", cli->python_exe, cli->python_version,
		       cli->python_package, cli->target, cli->python_path);
	/* The default said as such: a user who meant the current folder sees why
	 * another file was chosen, and how to choose. */
	if (cli->python_default && !cli->json)
		printf("          the environment oeapatch is installed in (no -C, no --python: -C DIR or --python PATH "
		       "picks another)\n");
done:
	free(start);
	free(from_python);
	return error;
}

void oeap_cli_close(oeap_cli *cli)
{
	oeap_patchdef_free(cli->def);
	free(cli->root);
	free(cli->target);
	cli->def = NULL;
	cli->root = cli->target = NULL;
	cli->rel = NULL;
}

json_t *oeap_cli_json_head(const oeap_cli *cli, int exit_code)
{
	json_t *j = json_object();
	json_object_set_new(j, "command", oeap_json_str(cli->command));
	json_object_set_new(j, "ok", json_boolean(exit_code == OEAP_EXIT_OK));
	return j;
}

const char *oeap_cli_layout_name(const oeap_cli *cli)
{
	return cli->layout == OEAP_LAYOUT_INSTALLED ? "installed" : "checkout";
}

void oeap_cli_json_definition(const oeap_cli *cli, json_t *j)
{
	if (!cli->def)
		return;
	json_object_set_new(j, "definition",
	                    json_pack("{s:o,s:i,s:o,s:o,s:b}", "name", oeap_json_str(cli->def->name), "version",
	                              cli->def->version, "framework",
	                              cli->def->framework ? oeap_json_str(cli->def->framework) : json_null(), "dir",
	                              oeap_json_str(cli->def->dir),
	                              /* false: --patch or $OEAPATCH_PATCH_DIR named it */
	                              "detected", !cli->patch_given && !cli->patch_env));
}

void oeap_cli_json_target(const oeap_cli *cli, json_t *j)
{
	json_object_set_new(j, "file", oeap_json_str(oeap_cli_target_rel(cli)));
	json_object_set_new(j, "root", oeap_json_str(cli->root));
	json_object_set_new(j, "layout", json_string(oeap_cli_layout_name(cli)));
	oeap_cli_json_definition(cli, j);
	if (cli->python)
		/* paths by the quoting rule: "s" would drop the whole object for one byte that is not UTF-8 */
		json_object_set_new(j, "python",
		                    json_pack("{s:o,s:o,s:o,s:o,s:b,s:o}", "given", oeap_json_str(cli->python), "executable",
		                              oeap_json_str(cli->python_exe), "version", oeap_json_str(cli->python_version),
		                              "package", oeap_json_str(cli->python_package),
		                              /* true: not given, the venv default (the wheel's entry) */
		                              "default", cli->python_default,
		                              /* the server's PYTHONPATH the interpreter was asked with (null: unset) */
		                              "pythonpath",
		                              cli->python_path_set ? oeap_json_str(cli->python_path_value) : json_null()));
}

/* Whether the folder `dir` is the definition `name` this oeapatch installed
 * (its share/oeapatch/patches), which `--patch NAME` finds again. */
static int bundled(const char *dir, const char *name)
{
	char *folder = oeap_patchdef_bundle_dir(), *mine = NULL, *given = realpath(dir, NULL);
	char path[PATH_MAX * 2];
	int same = 0;
	if (folder && given && !(getenv("OEAPATCH_PATCH_DIR") && *getenv("OEAPATCH_PATCH_DIR"))) {
		snprintf(path, sizeof(path), "%s/%s", folder, name);
		same = (mine = realpath(path, NULL)) && !strcmp(mine, given);
	}
	free(folder);
	free(mine);
	free(given);
	return same;
}

const char *oeap_cli_apply_hint(const oeap_cli *cli)
{
	static char hint[PATH_MAX * 4 + 64];
	char word[PATH_MAX * 2], python[PATH_MAX * 2], cwd[PATH_MAX];
	/* A relative interpreter path is made absolute but not resolved: a
	 * venv's bin/python is a symlink whose target knows nothing of the venv. */
	if (cli->python && strchr(cli->python, '/') && cli->python[0] != '/' && getcwd(cwd, sizeof(cwd))) {
		snprintf(python, sizeof(python), "%s/%s", cwd, cli->python);
		oeap_shell_word(word, sizeof(word), python);
	} else {
		oeap_shell_word(word, sizeof(word), cli->python ? cli->python : cli->root ? cli->root : cli->dir);
	}
	const char *patch = cli->patch ? cli->patch : "sglang-oea";
	char named[PATH_MAX * 2];
	if (strchr(patch, '/') && cli->def && bundled(patch, cli->def->name))
		patch = cli->def->name; /* the wheel's plugin passes the folder it carries */
	else if (strchr(patch, '/')) {
		oeap_shell_word(named, sizeof(named), patch);
		patch = named;
	}
	snprintf(hint, sizeof(hint), "oeapatch apply %s %s%s%s", cli->python ? "--python" : "-C", word,
	         strcmp(patch, "sglang-oea") ? " --patch " : "", strcmp(patch, "sglang-oea") ? patch : "");
	return hint;
}

int oeap_cli_error(const oeap_cli *cli, const oeap_error *err)
{
	if (cli->json) {
		json_t *j = oeap_cli_json_head(cli, oeap_error_exit_code(err));
		json_object_set_new(j, "error", oeap_json_error(err));
		oeap_json_emit(j);
	}
	oeap_print_error(err);
	return oeap_error_exit_code(err);
}

const char *oeap_cli_target_rel(const oeap_cli *cli)
{
	return cli->rel ? cli->rel : cli->def ? cli->def->target : "";
}

static int differs(const char *a, size_t alen, const char *b, size_t blen)
{
	if (!a || !b)
		return a != b;
	return alen != blen || memcmp(a, b, alen) != 0;
}

static void sha256_hex(const char *data, size_t len, char hex[65])
{
	unsigned char md[SHA256_DIGEST_LENGTH];
	SHA256(data ? (const unsigned char *)data : (const unsigned char *)"", len, md);
	for (int i = 0; i < SHA256_DIGEST_LENGTH; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

static size_t count_lines(const char *data, size_t len)
{
	size_t n = 0;
	for (size_t i = 0; i < len; i++)
		n += data[i] == '\n';
	return n + (len && data[len - 1] != '\n');
}

int oeap_cli_diff(const oeap_cli *cli, const char *old, size_t old_len, const char *new_, size_t new_len,
                  const char *bind_old, size_t bind_old_len, const char *bind_new, size_t bind_new_len, int full,
                  oeap_buf *out, oeap_module_summary *sum, oeap_error *err)
{
	memset(sum, 0, sizeof(*sum));
	sum->full = full;
	if (!(sum->path = oeap_binding_path(cli->def, oeap_cli_target_rel(cli))))
		return oeap_fail(err, OEAP_ERR_INTERNAL, cli->command, 0, "out of memory");
	int module = differs(bind_old, bind_old_len, bind_new, bind_new_len);
	if (module) {
		const char *now = bind_new ? bind_new : bind_old;
		size_t now_len = bind_new ? bind_new_len : bind_old_len;
		sum->change = !bind_old ? OEAP_MODULE_NEW : !bind_new ? OEAP_MODULE_REMOVED : OEAP_MODULE_REPLACED;
		sum->bytes = now_len;
		sum->lines = count_lines(now, now_len);
		sha256_hex(now, now_len, sum->sha256);
		if (sum->change == OEAP_MODULE_REPLACED) {
			sum->old_bytes = bind_old_len;
			sha256_hex(bind_old, bind_old_len, sum->old_sha256);
		}
	}
	if ((differs(old, old_len, new_, new_len) &&
	     oeap_diff(oeap_cli_target_rel(cli), old, old_len, new_, new_len, out, err)) ||
	    (full && module && oeap_diff(sum->path, bind_old, bind_old_len, bind_new, bind_new_len, out, err)))
		return -1;
	return 0;
}

void oeap_cli_module_summary_free(oeap_module_summary *sum)
{
	free(sum->path);
	sum->path = NULL;
}

static const char *const change_names[] = {"unchanged", "new", "replaced", "removed"};

void oeap_cli_print_module_summary(const oeap_module_summary *sum, FILE *f)
{
	if (sum->change == OEAP_MODULE_UNCHANGED || sum->full) /* full: the diff shows it, and stays a patch */
		return;
	fprintf(f, "binding module %s: %s, ", sum->path, change_names[sum->change]);
	if (sum->change == OEAP_MODULE_REPLACED)
		fprintf(f, "%zu bytes sha256:%s -> ", sum->old_bytes, sum->old_sha256);
	fprintf(f, "%zu bytes, %zu lines, sha256:%s (generated; --full-diff shows its diff)\n", sum->bytes,
	        sum->lines, sum->sha256);
}

json_t *oeap_cli_json_write_head(const oeap_cli *cli, int check, int diff)
{
	json_t *j = oeap_cli_json_head(cli, OEAP_EXIT_OK);
	json_object_set_new(j, "mode", json_string(check ? "check" : diff ? "diff" : "write"));
	oeap_cli_json_target(cli, j);
	return j;
}

void oeap_cli_json_write_tail(json_t *j, int check, int diff, const oeap_buf *diff_text,
                              const oeap_module_summary *module, const oeap_pyc_list *bytecode)
{
	if (diff) {
		json_object_set_new(j, "diff", oeap_json_strn(diff_text->data ? diff_text->data : "", diff_text->len));
		json_object_set_new(j, "module_change", oeap_cli_module_summary_json(module));
	}
	else
		json_object_set_new(j, check ? "bytecode_to_remove" : "bytecode_removed", oeap_pyc_list_json(bytecode));
}

json_t *oeap_cli_module_summary_json(const oeap_module_summary *sum)
{
	if (sum->change == OEAP_MODULE_UNCHANGED)
		return json_null();
	json_t *j = json_pack("{s:o,s:s,s:I,s:I,s:s,s:b}", "path", oeap_json_str(sum->path), "change",
	                      change_names[sum->change], "bytes", (json_int_t)sum->bytes, "lines",
	                      (json_int_t)sum->lines, "sha256", sum->sha256, "in_diff", sum->full);
	if (j && sum->change == OEAP_MODULE_REPLACED) {
		json_object_set_new(j, "old_bytes", json_integer((json_int_t)sum->old_bytes));
		json_object_set_new(j, "old_sha256", json_string(sum->old_sha256));
	}
	return j;
}
