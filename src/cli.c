#include "cli.h"

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
#include "checkout.h"
#include "fsio.h"
#include "importsys.h"
#include "quote.h"

extern char **environ;

/* The options every command takes, before the command (they become the
 * command's defaults) or after it. */
typedef struct {
	const char *dir, *python, *patch;
	int json, quiet;
} common_opts;

static common_opts globals;

/* --json anywhere on the line: a parse that stopped early (an error, --help)
 * has not seen what follows, and a script that asked for JSON still gets
 * its one document. */
static int json_on_line(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--json") == 0)
			return 1;
	return 0;
}

/* A relative -C is taken relative to the one before it, as git does. */
static char composed_dir[2][8192];
static int composed_which;

static const char *compose_dir(const char *prev, const char *next)
{
	if (!prev || next[0] == '/')
		return next;
	char *buf = composed_dir[composed_which ^= 1];
	snprintf(buf, sizeof(composed_dir[0]), "%s/%s", prev, next);
	return buf;
}

static void print_options(const oeap_option *opts, FILE *f)
{
	for (const oeap_option *o = opts; o->name; o++) {
		char left[64];
		const char *sep = o->arg && o->has_arg != optional_argument ? " " : "";
		if (o->val < 256)
			snprintf(left, sizeof(left), "-%c, --%s%s%s", o->val, o->name, sep, o->arg ? o->arg : "");
		else
			snprintf(left, sizeof(left), "    --%s%s%s", o->name, sep, o->arg ? o->arg : "");
		fprintf(f, "  %-28s %s\n", left, o->help);
	}
}

static void usage(const char *command, const char *synopsis, const char *summary, const oeap_option *opts,
                  FILE *f)
{
	fprintf(f, "usage: oeapatch %s %s\n\n%s\n\noptions:\n", command, synopsis, summary);
	print_options(opts, f);
	fprintf(f, "\nexit status: 0 done or holds, 1 a check found a difference, 2 usage error or trouble\n");
}

static const oeap_option global_options[] = {
	OEAP_COMMON_OPTIONS,
	{"version", no_argument, 'V', NULL, "print the version"},
	{NULL, 0, 0, NULL, NULL},
};

void oeap_cli_print_global_options(FILE *f)
{
	print_options(global_options, f);
}

/* --color's value; NULL (a bare --color) means always, as in git. */
static int set_color(const char *arg, oeap_error *err)
{
	if (!arg || !strcmp(arg, "always"))
		oeap_set_color(OEAP_COLOR_ALWAYS);
	else if (!strcmp(arg, "never"))
		oeap_set_color(OEAP_COLOR_NEVER);
	else if (!strcmp(arg, "auto"))
		oeap_set_color(OEAP_COLOR_AUTO);
	else
		return oeap_fail(err, OEAP_ERR_USAGE, "--color", 0, "'%s' is not never, always or auto", arg);
	return 0;
}

/* getopt tables from an option table: `lopts` holds 64, `shorts` 64 bytes. */
static void getopt_tables(const oeap_option *opts, struct option *lopts, char *shorts, int stop_at_operand)
{
	size_t n = 0, sn = 0;
	if (stop_at_operand)
		shorts[sn++] = '+';
	for (const oeap_option *o = opts; o->name && n < 63; o++, n++) {
		lopts[n].name = o->name;
		lopts[n].has_arg = o->has_arg;
		lopts[n].flag = NULL;
		lopts[n].val = o->val;
		if (o->val < 256 && sn < 61) {
			shorts[sn++] = (char)o->val;
			if (o->has_arg == required_argument)
				shorts[sn++] = ':';
		}
	}
	memset(&lopts[n], 0, sizeof(lopts[n]));
	shorts[sn] = '\0';
}

static void unknown_option(oeap_error *err, const char *command, int argc, char **argv)
{
	const char *help = command ? command : "";
	if (optopt && optopt < 256)
		oeap_fail(err, OEAP_ERR_USAGE, command ? command : "oeapatch", 0,
		          "unknown option or missing argument: -%c (see oeapatch %s%s--help)", optopt, help,
		          *help ? " " : "");
	else
		oeap_fail(err, OEAP_ERR_USAGE, command ? command : "oeapatch", 0,
		          "unknown option or missing argument: %s (see oeapatch %s%s--help)",
		          argv[optind - 1 < argc ? optind - 1 : argc - 1], help, *help ? " " : "");
}

/* Handles one of the options common to every command: 1 when `c` was one,
 * 0 when it is not, -1 on a bad value (err says which). */
static int common_option(int c, const char *arg, common_opts *o, oeap_error *err)
{
	switch (c) {
	case 'C':
		o->dir = compose_dir(o->dir, arg);
		return 1;
	case OEAP_OPT_PYTHON:
		o->python = arg;
		return 1;
	case OEAP_OPT_PATCH:
		o->patch = arg;
		return 1;
	case OEAP_OPT_JSON:
		o->json = 1;
		return 1;
	case 'q':
		o->quiet = 1;
		return 1;
	case OEAP_OPT_COLOR:
		return set_color(arg, err) ? -1 : 1;
	default:
		return 0;
	}
}

int oeap_cli_globals(int argc, char **argv, void (*main_usage)(FILE *f), const char *version)
{
	struct option lopts[64];
	char shorts[64];
	oeap_error err;
	oeap_cli top;
	oeap_error_clear(&err);
	getopt_tables(global_options, lopts, shorts, 1);
	optind = 0;
	opterr = 0;
	int c;
	/* '+': stop at the command; its own options are its business. */
	while ((c = getopt_long(argc, argv, shorts, lopts, NULL)) != -1) {
		int common = common_option(c, optarg, &globals, &err);
		if (common < 0)
			goto usage_error;
		if (common)
			continue;
		switch (c) {
		case 'h':
			oeap_cli_top(&top, "help", argc, argv);
			return oeap_cli_help(&top, main_usage) ? -1 : -2;
		case 'V':
			oeap_cli_top(&top, "version", argc, argv);
			oeap_cli_version(&top, version);
			return -2;
		default:
			unknown_option(&err, NULL, argc, argv);
			goto usage_error;
		}
	}
	return optind;
usage_error:
	oeap_cli_top(&top, NULL, argc, argv);
	oeap_cli_error(&top, &err);
	return -1;
}

void oeap_cli_globals_free(void)
{
	memset(&globals, 0, sizeof(globals));
}

static void take_common(oeap_cli *cli, const common_opts *o)
{
	cli->dir = o->dir;
	cli->python = o->python;
	cli->patch = o->patch; /* NULL: detected (oeap_cli_open) */
	cli->patch_given = o->patch != NULL;
	cli->json = o->json;
	cli->quiet = o->quiet;
}

void oeap_cli_top(oeap_cli *cli, const char *command, int argc, char **argv)
{
	memset(cli, 0, sizeof(*cli));
	take_common(cli, &globals);
	cli->command = command;
	cli->json |= json_on_line(argc, argv);
}

/* `text` as the "help" of the command's document. */
static int emit_help(const oeap_cli *cli, char *text, size_t len)
{
	json_t *j = oeap_cli_json_head(cli, OEAP_EXIT_OK);
	json_object_set_new(j, "help", oeap_json_strn(text, len));
	free(text);
	return oeap_json_emit(j) ? OEAP_EXIT_TROUBLE : OEAP_EXIT_OK;
}

/* A stream that collects a usage text for --json; NULL (said) when memory ran out. */
static FILE *help_stream(const oeap_cli *cli, char **text, size_t *len)
{
	FILE *f = open_memstream(text, len);
	if (!f) {
		oeap_error err;
		oeap_fail(&err, OEAP_ERR_INTERNAL, "--help", 0, "out of memory");
		oeap_cli_error(cli, &err);
	}
	return f;
}

int oeap_cli_help(const oeap_cli *cli, void (*print)(FILE *f))
{
	char *text = NULL;
	size_t len = 0;
	FILE *f;
	if (!cli->json) {
		print(stdout);
		return OEAP_EXIT_OK;
	}
	if (!(f = help_stream(cli, &text, &len)))
		return OEAP_EXIT_TROUBLE;
	print(f);
	fclose(f);
	return emit_help(cli, text, len);
}

int oeap_cli_version(const oeap_cli *cli, const char *version)
{
	if (!cli->json) {
		printf("oeapatch %s\n", version);
		return OEAP_EXIT_OK;
	}
	json_t *j = oeap_cli_json_head(cli, OEAP_EXIT_OK);
	json_object_set_new(j, "version", oeap_json_str(version));
	return oeap_json_emit(j) ? OEAP_EXIT_TROUBLE : OEAP_EXIT_OK;
}

/*
 * The interpreter the wheel's console entry runs under (contrib/wheel/oeapatch
 * sets OEAPATCH_ENTRY_PYTHON to its sys.executable), or NULL. Read once and
 * removed from the environment: the programs oeapatch runs (a Python, git
 * hooks calling oeapatch from elsewhere) must not inherit the default.
 */
static const char *entry_python(void)
{
	static char *python;
	static int read;
	if (!read) {
		const char *v = getenv("OEAPATCH_ENTRY_PYTHON");
		read = 1;
		if (v && *v)
			python = strdup(v);
		unsetenv("OEAPATCH_ENTRY_PYTHON");
	}
	return python;
}

static int acts_on_target(const char *command)
{
	static const char *const names[] = {"apply", "verify", "revert", "status"};
	for (size_t i = 0; command && i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(command, names[i]))
			return 1;
	return 0;
}

int oeap_cli_parse(oeap_cli *cli, const char *command, const char *synopsis, const char *summary,
                   const oeap_option *opts, int argc, char **argv,
                   int (*on_option)(int val, const char *arg, void *user), void *user, int *first_arg)
{
	struct option lopts[64];
	/* GNU order: options may follow operands (`check HEAD --json`). */
	char shorts[64];
	oeap_error err;
	oeap_error_clear(&err);
	memset(cli, 0, sizeof(*cli));
	cli->command = command;
	getopt_tables(opts, lopts, shorts, 0);
	/* 0, not 1: glibc then re-reads the ordering ('+' in main's scan of
	 * the global options would otherwise stick, and stop at operands). */
	optind = 0;
	opterr = 0;
	int c;
	common_opts o = globals;
	take_common(cli, &o);
	while ((c = getopt_long(argc, argv, shorts, lopts, NULL)) != -1) {
		int common = common_option(c, optarg, &o, &err);
		if (common < 0)
			goto usage_error;
		if (common) {
			/* At once: an error reported from here on honours a --json seen so far. */
			take_common(cli, &o);
			continue;
		}
		switch (c) {
		case 'h': {
			char *text = NULL;
			size_t len = 0;
			FILE *f;
			cli->json |= json_on_line(argc, argv);
			if (!cli->json) {
				usage(command, synopsis, summary, opts, stdout);
				return 1;
			}
			if (!(f = help_stream(cli, &text, &len)))
				return -1;
			usage(command, synopsis, summary, opts, f);
			fclose(f);
			return emit_help(cli, text, len) ? -1 : 1;
		}
		case '?':
		case ':':
			unknown_option(&err, command, argc, argv);
			goto usage_error;
		default:
			if (!on_option || on_option(c, optarg, user)) {
				oeap_fail(&err, OEAP_ERR_USAGE, command, 0, "%s is not an option of %s",
				          argv[optind - 1 < argc ? optind - 1 : argc - 1], command);
				goto usage_error;
			}
		}
	}
	if (cli->dir && cli->python) {
		oeap_fail(&err, OEAP_ERR_USAGE, command, 0,
		          "-C and --python both name the target: give one (-C a folder, --python an interpreter)");
		goto usage_error;
	}
	/* The venv default: run through the wheel's console entry, with neither
	 * -C nor --python, the commands that act on the target take the SGLang of
	 * the environment oeapatch is installed in (the interpreter the entry
	 * runs under). check and hook read a git repository: the current folder. */
	const char *entry = entry_python(); /* read (and removed) whatever the command */
	if (entry && !cli->dir && !cli->python && acts_on_target(command)) {
		cli->python = entry;
		cli->python_default = 1;
	}
	if (!cli->dir)
		cli->dir = ".";
	/* --quiet: one place for every command, so none can forget it. With
	 * --json the document is what was asked for. */
	if (cli->quiet && !cli->json && !freopen("/dev/null", "w", stdout)) {
		oeap_fail(&err, OEAP_ERR_IO, "--quiet", 0, "cannot open /dev/null: %s", strerror(errno));
		goto usage_error;
	}
	*first_arg = optind;
	return 0;
usage_error:
	cli->json |= json_on_line(argc, argv);
	oeap_cli_error(cli, &err);
	return -1;
}

int oeap_cli_no_operands(const oeap_cli *cli, int argc, char **argv, int first)
{
	if (first >= argc)
		return 0;
	oeap_error err;
	oeap_error_clear(&err);
	oeap_fail(&err, OEAP_ERR_USAGE, cli->command, 0, "unexpected argument '%s'", argv[first]);
	return oeap_cli_error(cli, &err);
}

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
static const char *first_existing(const char *dir, char *const *alts, struct stat *st)
{
	for (size_t i = 0; alts && alts[i]; i++)
		if (exists_at(dir, alts[i], st))
			return alts[i];
	return NULL;
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

/* Cuts the last component off an absolute path; 0 when it was "/". */
static int to_parent(char *dir)
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

/*
 * From `start` (absolute) upward, as git searches for .git: the first folder
 * where the definition's target (a checkout) or its installed_target (a
 * site-packages folder) exists. An installed match gives way to a checkout
 * further up that holds the very same file (its python/ folder looks like
 * site-packages, and so does an editable install): messages and git paths
 * are then the checkout's.
 */
static int find_root(const oeap_patchdef *def, const char *start, char **root, oeap_layout *layout,
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
		if ((t = first_existing(dir, def->targets, &st))) {
			/* Another file, or the same file imported from another folder (a
			 * link tree of symlinks, as setuptools' strict editable mode
			 * makes): the installed one found first stands. */
			if (*layout == OEAP_LAYOUT_INSTALLED && (st.st_dev != inst.st_dev || st.st_ino != inst.st_ino ||
			                                         !same_folder(*root, irel, dir, t)))
				continue;
			free(*root);
			*root = strdup(dir);
			*layout = OEAP_LAYOUT_CHECKOUT;
			*rel = t;
			break;
		}
		if (*layout == OEAP_LAYOUT_NONE && (t = first_existing(dir, def->installed_targets, &inst))) {
			*root = strdup(dir);
			*layout = OEAP_LAYOUT_INSTALLED;
			*rel = irel = t;
			if (!*root)
				break;
		}
	} while (to_parent(dir));
	free(dir);
	if (*layout != OEAP_LAYOUT_NONE && !*root) {
		*layout = OEAP_LAYOUT_NONE; /* out of memory: no root, so no layout either */
		return -1;
	}
	return 0;
}

/* The top-level package of the installed layout: installed_target's first component. */
static int package_name(const oeap_patchdef *def, char *out, size_t cap)
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
static int python_ask(oeap_cli *cli, char *const *pkgs, size_t n, char (*locs)[PATH_MAX + 2], oeap_error *err)
{
	/* The interpreter's own path and version first, so the user sees which
	 * Python and which file; then one line per package (empty: none). The
	 * folder `-c` puts first on sys.path is ours, not the server's: dropped
	 * (and the query runs from "/"). */
	static const char script[] =
		"import sys\n"
		"if sys.path and sys.path[0] == '' and not getattr(sys.flags, 'safe_path', False):\n"
		"    del sys.path[0]\n"
		"import importlib.util, os, platform\n"
		"print(sys.executable)\n"
		"print(platform.python_version())\n"
		"names, found = sys.argv[1:], {}\n"
		"for name in names:\n"
		"    s = importlib.util.find_spec(name)\n"
		"    locs = list(s.submodule_search_locations or []) if s else []\n"
		"    found[name] = locs[0] if locs else os.path.dirname(s.origin) if s and s.origin else ''\n"
		/* Two frameworks found: one installed only because the other
		 * requires it (no REQUESTED marker in its dist-info, named in the
		 * other's Requires-Dist: SGLang 0.4.x requires vLLM) is not one the
		 * user chose to serve, so not a candidate. */
		"if sum(1 for n in names if found[n]) > 1:\n"
		"    try:\n"
		"        import importlib.metadata as md, re\n"
		"        def dist(n):\n"
		"            try:\n"
		"                return md.distribution(n)\n"
		"            except Exception:\n"
		"                return None\n"
		"        def key(r):\n"
		"            return re.split(r'[^A-Za-z0-9._-]', r.strip(), 1)[0].lower().replace('_', '-')\n"
		"        ds = {n: dist(n) for n in names if found[n]}\n"
		"        needs = {n: {key(r) for r in (d.requires or [])} if d else set() for n, d in ds.items()}\n"
		"        only = [n for n, d in ds.items() if d is not None and d.read_text('REQUESTED') is None\n"
		"                and any(o != n and n.lower().replace('_', '-') in needs[o] for o in ds)]\n"
		"        if len(only) < len(ds):\n"
		"            for n in only:\n"
		"                found[n] = ''\n"
		"    except Exception:\n"
		"        pass\n"
		"for name in names:\n"
		"    print(found[name])\n";
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
static int python_root(oeap_cli *cli, char **out, oeap_error *err)
{
	char pkg[128], loc[1][PATH_MAX + 2];
	char *pkgs[1] = {pkg};
	*out = NULL;
	if (package_name(cli->def, pkg, sizeof(pkg)))
		return oeap_fail(err, OEAP_ERR_USAGE, "--python", 0,
		                 "the patch definition %s states no installed_target: it cannot act on an installed "
		                 "package",
		                 cli->def->name);
	if (cli->python_package[0])
		snprintf(loc[0], sizeof(loc[0]), "%s", cli->python_package);
	else if (python_ask(cli, pkgs, 1, loc, err))
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
	if (!to_parent(loc[0]) || !(*out = strdup(loc[0])))
		return oeap_fail(err, OEAP_ERR_INTERNAL, "--python", 0, "out of memory");
	return 0;
}

/* The alternatives after the first, as " or B or C" (empty for one path), for messages. */
static const char *other_alternatives(char *const *alts)
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
static int not_found(const oeap_cli *cli, const char *start, oeap_error *err)
{
	char targets[PATH_MAX * 2];
	const char *framework = cli->def->framework ? cli->def->framework : "SGLang"; /* the one before the key */
	if (cli->python)
		return oeap_fail(err, OEAP_ERR_IO, cli->def->installed_target, 0,
		                 "not found in %s, where %s imports the package from", start, cli->python);
	snprintf(targets, sizeof(targets), "%s", other_alternatives(cli->def->targets));
	return oeap_fail(err, OEAP_ERR_IO, cli->def->target, 0,
	                 "not found%s%s%s in %s or any folder above it%s%s%s%s: -C takes %s %s source checkout, a "
	                 "site-packages folder that holds the installed package, or a folder inside either; "
	                 "--python PATH (a virtual environment's bin/python) finds the package that interpreter "
	                 "imports",
	                 targets[0] ? " (nor " : "", targets[0] ? targets + 4 : "", targets[0] ? ")" : "", start,
	                 cli->def->installed_target ? " (nor " : "",
	                 cli->def->installed_target ? cli->def->installed_target : "",
	                 other_alternatives(cli->def->installed_targets),
	                 cli->def->installed_target ? ", as installed)" : "",
	                 an_or_a(framework), framework);
}

/* "SGLang (sglang-oea: python/.../topk.py, installed sglang/.../topk.py)": a definition in messages. */
static size_t describe_def(const oeap_patchdef *def, char *out, size_t cap)
{
	char more[PATH_MAX * 2]; /* other_alternatives() answers in one static buffer */
	snprintf(more, sizeof(more), "%s", other_alternatives(def->targets));
	int n = snprintf(out, cap, "%s (%s: %s%s%s%s%s)", def->framework ? def->framework : def->name, def->name,
	                 def->target, more, def->installed_target ? ", installed " : "",
	                 def->installed_target ? def->installed_target : "", other_alternatives(def->installed_targets));
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

/* What detect() gathers on its way to one definition. */
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
		if (package_name(d->defs[i], pkg, sizeof(pkg)))
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
	if (python_ask(cli, d->pkgv, np, d->locs, err))
		return -1;
	size_t imports = 0, imported = 0;
	for (size_t i = 0; i < d->n; i++) {
		char parent[PATH_MAX + 2];
		struct stat st;
		if (at[i] == SIZE_MAX || d->locs[at[i]][0] != '/')
			continue;
		imports++, imported = i;
		snprintf(parent, sizeof(parent), "%s", d->locs[at[i]]);
		if (to_parent(parent) && first_existing(parent, d->defs[i]->installed_targets, &st))
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
		if (find_root(d->defs[i], d->start, &root, &layout, &rel))
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
		for (size_t k = 0; k < DETECT_MAX && d->pkgv[k] && !package_name(cli->def, pkg, sizeof(pkg)); k++)
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
static int detect(oeap_cli *cli, int need_target, oeap_error *err)
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

int oeap_cli_open(oeap_cli *cli, int need_target, oeap_error *err)
{
	struct stat st;
	char *dir = NULL, *start = NULL, *from_python = NULL;
	int error = 0;
	const char *one = getenv("OEAPATCH_PATCH_DIR");
	if (!cli->patch && !(one && *one)) {
		if (detect(cli, need_target, err))
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
	if (cli->python && python_root(cli, &from_python, err))
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
	if (from_python && !first_existing(start, cli->def->installed_targets, &st)) {
		error = oeap_fail(err, OEAP_ERR_IO, cli->def->installed_target, 0,
		                  "not found in %s, where %s imports the package from: that %s has no such file (not "
		                  "the version this patch is for, or a partial install); the folders around it are not "
		                  "searched, since they are not what the interpreter imports",
		                  start, cli->python, cli->python_package);
		goto done;
	}
	if (find_root(cli->def, start, &cli->root, &cli->layout, &cli->rel)) {
		error = oeap_fail(err, OEAP_ERR_INTERNAL, "oeapatch", 0, "out of memory");
		goto done;
	}
	if (cli->layout == OEAP_LAYOUT_NONE) {
		if (need_target) {
			error = not_found(cli, start, err);
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

const char *oeap_cli_apply_hint(const oeap_cli *cli)
{
	static char hint[PATH_MAX * 3 + 64];
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

int oeap_cli_diff(const oeap_cli *cli, const char *old, size_t old_len, const char *new_, size_t new_len,
                  const char *bind_old, size_t bind_old_len, const char *bind_new, size_t bind_new_len,
                  oeap_buf *out, oeap_error *err)
{
	char *bind_rel = oeap_binding_path(cli->def, oeap_cli_target_rel(cli));
	int rc = 0;
	if (!bind_rel)
		rc = oeap_fail(err, OEAP_ERR_INTERNAL, cli->command, 0, "out of memory");
	else if ((differs(old, old_len, new_, new_len) &&
	          oeap_diff(oeap_cli_target_rel(cli), old, old_len, new_, new_len, out, err)) ||
	         (differs(bind_old, bind_old_len, bind_new, bind_new_len) &&
	          oeap_diff(bind_rel, bind_old, bind_old_len, bind_new, bind_new_len, out, err)))
		rc = -1;
	free(bind_rel);
	return rc;
}
