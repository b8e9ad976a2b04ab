#include "importsys.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "binding.h"
#include "embedded_scripts.h"
#include "pycache.h"
#include "trust.h"
#include "trustcheck.h"

extern char **environ;

/* The Debian/glibc multiarch triple in CPython's extension suffixes
 * (sysconfig's MULTIARCH); NULL: any (a platform this list lacks). */
#if defined(__x86_64__) && defined(__ILP32__)
#define TRIPLE "x86_64-linux-gnux32"
#elif defined(__x86_64__)
#define TRIPLE "x86_64-linux-gnu"
#elif defined(__aarch64__)
#define TRIPLE "aarch64-linux-gnu"
#elif defined(__i386__)
#define TRIPLE "i386-linux-gnu"
#elif defined(__powerpc64__) && defined(__LITTLE_ENDIAN__)
#define TRIPLE "powerpc64le-linux-gnu"
#elif defined(__s390x__)
#define TRIPLE "s390x-linux-gnu"
#elif defined(__riscv) && __riscv_xlen == 64
#define TRIPLE "riscv64-linux-gnu"
#else
#define TRIPLE NULL
#endif

static int python_var(const char *e)
{
	return !strncmp(e, "PYTHON", 6);
}

char **oeap_python_env(const oeap_env *files)
{
	size_t n = 0, k = 0;
	for (char **e = environ; e && *e; e++)
		n++;
	n += files ? files->n : 0;
	char **out = calloc(n + 1, sizeof(*out));
	if (!out)
		return NULL;
	for (char **e = environ; e && *e; e++) {
		if (files && (python_var(*e) || (!strncmp(*e, "HOME=", 5) && oeap_env_get(files, "HOME"))))
			continue;
		if (!(out[k++] = strdup(*e)))
			goto oom;
	}
	for (size_t i = 0; files && i < files->n; i++) {
		const oeap_env_var *v = &files->vars[i];
		if (!python_var(v->name) && strcmp(v->name, "HOME"))
			continue;
		if (!(out[k] = malloc(strlen(v->name) + strlen(v->value) + 2)))
			goto oom;
		sprintf(out[k++], "%s=%s", v->name, v->value);
	}
	return out;
oom:
	oeap_python_env_free(out);
	return NULL;
}

void oeap_python_env_free(char **envp)
{
	for (char **e = envp; e && *e; e++)
		free(*e);
	free(envp);
}

void oeap_python_path_text(const oeap_env *files, char *out, size_t cap, const char **value)
{
	const char *v = NULL, *from = "this environment";
	char where[4200];
	if (files) {
		const oeap_env_var *var = oeap_env_get(files, "PYTHONPATH");
		v = var ? var->value : NULL;
		if (var && var->origin) {
			snprintf(where, sizeof(where), "%s:%ld", var->origin, var->line);
			from = where;
		} else {
			from = "the --env-file files";
		}
	} else {
		v = getenv("PYTHONPATH");
	}
	if (value)
		*value = v;
	if (v && *v)
		snprintf(out, cap, "PYTHONPATH=%s (from %s)", v, from);
	else
		snprintf(out, cap, "PYTHONPATH unset (in %s)", from);
}

/* ------------------------------------------------------------- C rules */

/* Is `file` (a folder entry) `name` + one of CPython 3's extension
 * suffixes on this platform: .cpython-3X[flags]-TRIPLE.so, .abi3.so, .so? */
static int extension_name(const char *file, const char *name)
{
	size_t n = strlen(name), f = strlen(file);
	if (f < n + 3 || strncmp(file, name, n) || file[n] != '.' || strcmp(file + f - 3, ".so"))
		return 0;
	if (f == n + 3)
		return 1; /* NAME.so */
	const char *mid = file + n + 1; /* "cpython-311-x86_64-linux-gnu.so", "abi3.so" */
	size_t m = (size_t)(file + f - 3 - mid);
	if (m == 4 && !strncmp(mid, "abi3", 4))
		return 1;
	if (m < 10 || strncmp(mid, "cpython-3", 9))
		return 0;
	const char *p = mid + 9;
	while (*p >= '0' && *p <= '9')
		p++;
	while (*p >= 'a' && *p <= 'z' && *p != '-')
		p++; /* ABI flags: d, t, m (3.7) */
	if (*p != '-')
		return 0;
	p++;
	size_t rest = (size_t)(file + f - 3 - p);
	if (!TRIPLE)
		return rest > 0;
	return rest == strlen(TRIPLE ? TRIPLE : "") && !strncmp(p, TRIPLE ? TRIPLE : "", rest);
}

static int is_file(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The first entry of folder `dir` that is `name` + an extension suffix
 * (the interpreter tries them in its own order; any one wins over .py). */
static int find_extension(const char *dir, const char *name, char *out, size_t cap)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int found = 0;
	if (!d)
		return 0;
	while (!found && (e = readdir(d))) {
		if (!extension_name(e->d_name, name))
			continue;
		snprintf(out, cap, "%s/%s", dir, e->d_name);
		found = is_file(out);
	}
	closedir(d);
	return found;
}

/* NAME/__init__ with any loader's suffix: extension, .py, .pyc. */
static int find_package(const char *dir, const char *name, char *out, size_t cap)
{
	char pkg[PATH_MAX * 2];
	struct stat st;
	if ((size_t)snprintf(pkg, sizeof(pkg), "%s/%s", dir, name) >= sizeof(pkg) || stat(pkg, &st) ||
	    !S_ISDIR(st.st_mode))
		return 0;
	if (find_extension(pkg, "__init__", out, cap))
		return 1;
	snprintf(out, cap, "%s/__init__.py", pkg);
	if (is_file(out))
		return 1;
	snprintf(out, cap, "%s/__init__.pyc", pkg);
	return is_file(out);
}

int oeap_import_c_winner(const char *dir, const char *name, char *out, size_t cap, const char **why)
{
	if (find_package(dir, name, out, cap)) {
		*why = "a package folder, which the import system tries before the module's .py";
		return 1;
	}
	if (find_extension(dir, name, out, cap)) {
		*why = "an extension module, which the import system tries before the module's .py";
		return 1;
	}
	return 0;
}

/* A package level without __init__ (a namespace portion) loses to a module
 * of the same name beside it: NAME + extension suffix, NAME.py, NAME.pyc. */
static int c_namespace_loser(const char *dir, const char *name, char *out, size_t cap)
{
	char pkg[PATH_MAX * 2];
	if (find_package(dir, name, pkg, sizeof(pkg)))
		return 0;
	if (find_extension(dir, name, out, cap))
		return 1;
	if ((size_t)snprintf(out, cap, "%s/%s.py", dir, name) < cap && is_file(out))
		return 1;
	return (size_t)snprintf(out, cap, "%s/%s.pyc", dir, name) < cap && is_file(out);
}

/* ------------------------------------------------------- the interpreter */

typedef struct probe {
	int ran;           /* the interpreter answered */
	int status;        /* its exit status when it did not */
	char tag[64];      /* sys.implementation.cache_tag */
	char *prefix;      /* sys.pycache_prefix, or NULL */
	char *origin[2];   /* the target's and the binding's module as resolved, or NULL */
	char kind[2][16];  /* package, extension, source, sourceless, namespace, missing, other */
	char *stop[2];     /* the level where resolution stopped (a module with no submodules), or NULL */
	char *error;       /* what the probe raised (type: message), or NULL */
	int spawn_errno;   /* it could not be started: errno */
	char *cachedirs[4];
	size_t ncachedirs;
	oeap_pyc_verdicts verdicts;
} probe;

static void probe_free(probe *p)
{
	free(p->prefix);
	free(p->error);
	for (int i = 0; i < 2; i++) {
		free(p->origin[i]);
		free(p->stop[i]);
	}
	for (size_t i = 0; i < p->ncachedirs; i++)
		free(p->cachedirs[i]);
	oeap_pyc_verdicts_free(&p->verdicts);
}

/* Hex (os.fsencode(...).hex()) back to bytes; "-" is NULL. */
static char *unhex(const char *h)
{
	size_t n = strlen(h);
	if (!strcmp(h, "-") || n % 2)
		return NULL;
	char *out = malloc(n / 2 + 1);
	for (size_t i = 0; out && i < n / 2; i++) {
		unsigned v;
		if (sscanf(h + 2 * i, "%2x", &v) != 1) {
			free(out);
			return NULL;
		}
		out[i] = (char)v;
	}
	if (out)
		out[n / 2] = '\0';
	return out;
}

int oeap_python_spawn(const char *python, const char *script, char *const *args, char **envp, int quiet,
                      pid_t *pid)
{
	char *argv[20], here[PATH_MAX], abs[PATH_MAX * 2];
	size_t k = 0;
	int fds[2];
	/* The child starts in / (below): a relative path with a slash (--python v/bin/python) is the
	 * caller's, so it is made absolute from the caller's folder first; a bare name is PATH's. */
	if (strchr(python, '/') && python[0] != '/' && getcwd(here, sizeof(here)) &&
	    snprintf(abs, sizeof(abs), "%s/%s", here, python) < (int)sizeof(abs))
		python = abs;
	argv[k++] = (char *)python;
	argv[k++] = (char *)"-c";
	argv[k++] = (char *)script;
	for (; args && *args && k < sizeof(argv) / sizeof(argv[0]) - 1; args++)
		argv[k++] = *args;
	argv[k] = NULL;
	if (pipe(fds))
		return -1;
	fflush(NULL);
	if ((*pid = fork()) < 0) {
		int e = errno;
		close(fds[0]);
		close(fds[1]);
		errno = e;
		return -1;
	}
	if (*pid == 0) {
		int null = open("/dev/null", O_RDWR);
		dup2(fds[1], STDOUT_FILENO);
		if (null >= 0) {
			dup2(null, STDIN_FILENO);
			if (quiet)
				dup2(null, STDERR_FILENO);
		}
		close(fds[0]);
		close(fds[1]);
		if (chdir("/"))
			_exit(127);
		environ = envp;
		execvp(python, argv);
		_exit(127);
	}
	close(fds[1]);
	return fds[0];
}

static int run_probe(const char *python, char **envp, const char *names[2], const char *paths[2], probe *pr)
{
	int fd;
	pid_t pid;
	int status = 0;
	FILE *f;
	char line[PATH_MAX * 4 + 64];
	char *args[] = {(char *)names[0], (char *)names[1], (char *)paths[0], (char *)paths[1], NULL};
	if ((fd = oeap_python_spawn(python, oeap_script_import_probe_py, args, envp, 1, &pid)) < 0) {
		pr->spawn_errno = errno;
		return -1;
	}
	if ((f = fdopen(fd, "r"))) {
		while (fgets(line, sizeof(line), f)) {
			char a[8208], b[16], c[8208];
			int i;
			line[strcspn(line, "\n")] = '\0';
			if (line[0] == 'T' && sscanf(line, "T %63s", pr->tag) == 1)
				continue;
			if (line[0] == 'P' && sscanf(line, "P %8200s", a) == 1)
				pr->prefix = unhex(a);
			else if (line[0] == 'E' && sscanf(line, "E %8200s", a) == 1 && !pr->error)
				pr->error = unhex(a);
			else if (line[0] == 'R' && sscanf(line, "R %d %15s %8200s %8200s", &i, b, a, c) == 4 && (i == 0 || i == 1)) {
				snprintf(pr->kind[i], sizeof(pr->kind[i]), "%s", b);
				pr->origin[i] = unhex(a);
				pr->stop[i] = unhex(c);
			} else if (line[0] == 'C' && sscanf(line, "C %8200s", a) == 1 && pr->ncachedirs < 3) {
				if ((pr->cachedirs[pr->ncachedirs] = unhex(a)))
					pr->ncachedirs++;
			} else if (line[0] == 'V' && sscanf(line, "V %8200s %15s", a, b) == 2) {
				char *path = unhex(a);
				if (path)
					oeap_pyc_verdicts_add(&pr->verdicts, path, !strcmp(b, "same"));
				free(path);
			}
		}
		fclose(f);
	} else {
		close(fd);
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	pr->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
	pr->ran = WIFEXITED(status) && WEXITSTATUS(status) == 0 && pr->kind[0][0] && pr->kind[1][0];
	return 0;
}

/* ----------------------------------------------------------- the checks */

/* "sglang.srt.layers.moe.topk" from the installed target the path ends with; -1 when none does. */
static int module_name(const oeap_patchdef *def, const char *target, char *out, size_t cap)
{
	size_t tlen = strlen(target);
	for (char *const *alt = def->installed_targets; alt && *alt; alt++) {
		size_t n = strlen(*alt);
		if (n < 4 || n >= cap || n >= tlen || target[tlen - n - 1] != '/' || strcmp(target + tlen - n, *alt) ||
		    strcmp(*alt + n - 3, ".py"))
			continue;
		memcpy(out, *alt, n - 3);
		out[n - 3] = '\0';
		for (char *p = out; *p; p++)
			if (*p == '/')
				*p = '.';
		return 0;
	}
	return -1;
}

static int same_file(const char *a, const char *b)
{
	struct stat x, y;
	return a && b && stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

static const char *kind_text(const char *kind)
{
	if (!strcmp(kind, "package"))
		return "a package folder, which the import system tries before the module's .py";
	if (!strcmp(kind, "extension"))
		return "an extension module, whose suffixes the import system tries before .py";
	if (!strcmp(kind, "sourceless"))
		return "bytecode without source";
	if (!strcmp(kind, "source"))
		return "another copy, found first on the interpreter's path";
	if (!strcmp(kind, "namespace"))
		return "a namespace package folder";
	return "a module another finder provides";
}

/* One "import:WHAT" check by the interpreter's answer. */
static int interp_check(oeap_report *rep, const char *check, const char *python, const char *pp,
                        const char *name, const char *path, const probe *pr, int i)
{
	if (!strcmp(pr->kind[i], "source") && same_file(pr->origin[i], path))
		return oeap_report_add(rep, check, 1, 0,
		                       "%s resolves to %s (asked %s, one level at a time with the path finder; %s)", name, path,
		                       python, pp);
	if (pr->stop[i])
		return oeap_report_add(rep, check, 0, 0,
		                       "%s: %s (%s) resolves %s to %s, %s, which has no submodules: the server never "
		                       "imports the patched %s; remove it",
		                       name, python, pp, pr->stop[i], pr->origin[i] ? pr->origin[i] : "(no file)",
		                       kind_text(pr->kind[i]), path);
	if (!strcmp(pr->kind[i], "missing"))
		return oeap_report_add(rep, check, 0, 0, "%s: %s (%s) does not find it: the server would fail to import it",
		                       name, python, pp);
	return oeap_report_add(rep, check, 0, 0,
	                       "%s: %s (%s) imports %s (%s), not the patched %s: the patch never runs; remove it%s", name,
	                       python, pp, pr->origin[i] ? pr->origin[i] : "(no file)", kind_text(pr->kind[i]), path,
	                       !strcmp(pr->kind[i], "source") ? " or patch that copy" : "");
}

/* One "import:WHAT" check by the C rules, level by level from `root`. */
static int c_check(oeap_report *rep, const char *check, const char *name, const char *root, const char *path)
{
	char dir[PATH_MAX * 2], won[PATH_MAX * 2], stem[NAME_MAX + 1];
	const char *why = NULL, *slash = strrchr(path, '/');
	size_t rlen = strlen(root);
	if (!slash)
		return 0;
	snprintf(stem, sizeof(stem), "%.*s", (int)strlen(slash + 1) - 3, slash + 1);
	/* Each package level between the root and the module's folder. */
	if (!strncmp(path, root, rlen) && path[rlen] == '/') {
		snprintf(dir, sizeof(dir), "%s", root);
		for (const char *p = path + rlen + 1; p < slash;) {
			const char *end = strchr(p, '/');
			char level[NAME_MAX + 1];
			snprintf(level, sizeof(level), "%.*s", (int)(end - p), p);
			if (c_namespace_loser(dir, level, won, sizeof(won)))
				return oeap_report_add(rep, check, 0, 0,
				                       "%s: %s/%s has no __init__, so the module %s beside it wins: the server "
				                       "never imports the patched %s; remove it",
				                       name, dir, level, won, path);
			size_t n = strlen(dir);
			snprintf(dir + n, sizeof(dir) - n, "/%s", level);
			p = end + 1;
		}
	}
	snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	if (oeap_import_c_winner(dir, stem, won, sizeof(won), &why))
		return oeap_report_add(rep, check, 0, 0, "%s: the import system picks %s (%s), not the patched %s: the "
		                                         "patch never runs; remove it",
		                       name, won, why, path);
	return oeap_report_add(rep, check, 1, 0,
	                       "%s: nothing in %s wins over %s.py (no package folder %s/, no extension module: the import "
	                       "system's order for CPython 3)",
	                       name, dir, stem, stem);
}

/* The nearest folder at or above `path` that exists (cut in place). */
static void nearest_existing(char *path)
{
	struct stat st;
	while (lstat(path, &st)) {
		char *s = strrchr(path, '/');
		if (!s)
			return;
		if (s == path) {
			path[1] = '\0';
			return;
		}
		*s = '\0';
	}
}

/* trust:bytecode for the folder `cache` (listed from `listed`) and the pycs of `stems` in it. */
static int trust_cache(oeap_report *rep, const oeap_patchdef *def, const char *cache, const char *listed,
                       const char *const stems[2], uid_t owner, int escape, int *failed, int *checked, char *last,
                       size_t lastcap)
{
	char path[PATH_MAX * 2];
	struct stat st;
	int rc;
	snprintf(path, sizeof(path), "%s", cache);
	nearest_existing(path);
	if (lstat(path, &st))
		return 0;
	(*checked)++;
	if ((rc = oeap_trust_report(rep, def, "trust:bytecode", path, listed, owner, escape, 1, failed, last, lastcap)))
		return rc;
	if (strcmp(path, cache))
		return 0; /* the folder is still to be made: who can make it is what was checked */
	DIR *d = opendir(cache);
	struct dirent *e;
	if (!d)
		return 0;
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);
		for (int i = 0; i < 2; i++) {
			size_t s = strlen(stems[i]);
			if (n < s + 6 || strncmp(e->d_name, stems[i], s) || e->d_name[s] != '.' ||
			    strcmp(e->d_name + n - 4, ".pyc"))
				continue;
			snprintf(path, sizeof(path), "%s/%s", cache, e->d_name);
			(*checked)++;
			if ((rc = oeap_trust_report(rep, def, "trust:bytecode", path, listed, owner, escape, 1, failed, last, lastcap))) {
				closedir(d);
				return rc;
			}
		}
	}
	closedir(d);
	return 0;
}

/* verify's checks (oeap_import_verify), or with `only_import` the two import checks alone (oeap_import_check). */
static int import_run(const oeap_patchdef *def, const char *target, const char *python, const oeap_env *files,
                      int escape, const char *fix, int only_import, oeap_report *rep, oeap_error *err)
{
	char mod[2][PATH_MAX], pp[PATH_MAX * 2 + 64], pdir[PATH_MAX * 2], note[PATH_MAX * 2 + 128];
	char stems[2][NAME_MAX + 1];
	const char *prefix = NULL, *names[2], *paths[2], *stemv[2] = {stems[0], stems[1]};
	const char *dirs[8] = {NULL};
	size_t nd = 0;
	char **envp = NULL, *bind = NULL, *root = NULL, *listed = NULL;
	probe pr;
	uid_t owner;
	int rc = 0, failed = 0, checked = 0;
	memset(&pr, 0, sizeof(pr));
	if (!(bind = oeap_binding_path(def, target)) || !(root = oeap_trust_package_root(def, target))) {
		rc = oeap_fail(err, OEAP_ERR_INTERNAL, "import", 0, "out of memory");
		goto done;
	}
	paths[0] = target;
	paths[1] = bind;
	for (int i = 0; i < 2; i++) {
		const char *s = strrchr(paths[i], '/');
		s = s ? s + 1 : paths[i];
		snprintf(stems[i], sizeof(stems[i]), "%.*s", (int)strlen(s) - 3, s);
	}
	int named = module_name(def, target, mod[0], sizeof(mod[0])) == 0;
	if (named) {
		char *dot = strrchr(mod[0], '.');
		snprintf(mod[1], sizeof(mod[1]), "%.*s%s%s", dot ? (int)(dot - mod[0]) : 0, mod[0], dot ? "." : "",
		         stems[1]);
	} else {
		snprintf(mod[0], sizeof(mod[0]), "%s", stems[0]);
		snprintf(mod[1], sizeof(mod[1]), "%s", stems[1]);
	}
	names[0] = mod[0];
	names[1] = mod[1];
	oeap_python_path_text(files, pp, sizeof(pp), NULL);
	if (python && named) {
		if (!(envp = oeap_python_env(files))) {
			rc = oeap_fail(err, OEAP_ERR_INTERNAL, "import", 0, "out of memory");
			goto done;
		}
		run_probe(python, envp, names, paths, &pr);
	}
	/* The import: the interpreter's answer; the C rules only where there is
	 * no interpreter to ask (-C). A server's interpreter that was named or
	 * found and cannot answer leaves what the server imports unknown: a
	 * failed check, never the weaker rules in its place. */
	note[0] = '\0';
	if (python && named && !pr.ran) {
		if (pr.spawn_errno)
			snprintf(note, sizeof(note), "cannot start it: %s", strerror(pr.spawn_errno));
		else if (pr.error)
			snprintf(note, sizeof(note), "it raised %s", pr.error);
		else
			snprintf(note, sizeof(note), "it exited %d", pr.status);
	}
	for (int i = 0; i < 2 && !rc; i++) {
		const char *check = i ? "import:binding" : "import:target";
		if (i == 1 && access(bind, F_OK))
			continue; /* the binding check says it is missing */
		if (pr.ran)
			rc = interp_check(rep, check, python, pp, names[i], paths[i], &pr, i);
		else if (python && named)
			rc = oeap_report_add(rep, check, 0, 0,
			                     "%s: the server's interpreter %s (%s) could not be asked what it imports (%s), so "
			                     "whether the server runs %s is not known",
			                     names[i], python, pp, note, paths[i]);
		else
			rc = c_check(rep, check, names[i], root, paths[i]);
	}
	if (rc)
		goto oom;
	if (only_import)
		goto done;
	/* The pycache prefix of the server's environment: the interpreter's
	 * own (it read its environment), else PYTHONPYCACHEPREFIX. */
	if (pr.ran) {
		prefix = pr.prefix;
		for (size_t i = 0; i < pr.ncachedirs && nd < 4; i++)
			dirs[nd++] = pr.cachedirs[i];
	} else {
		const oeap_env_var *v = files ? oeap_env_get(files, "PYTHONPYCACHEPREFIX") : NULL;
		prefix = files ? (v ? v->value : NULL) : getenv("PYTHONPYCACHEPREFIX");
		if (prefix && !*prefix)
			prefix = NULL;
	}
	if (prefix && !pr.ran && !oeap_pyc_prefix_dir(prefix, target, pdir, sizeof(pdir)))
		dirs[nd++] = pdir;
	/* Who can put bytecode where the loader reads it. */
	if (oeap_trust_target_owner(target, &owner) == 0) {
		/* One line per offending path: each pyc's walk passes its folder. */
		char cache[PATH_MAX * 2], last[PATH_MAX * 2] = "";
		const char *slash = strrchr(target, '/');
		snprintf(cache, sizeof(cache), "%.*s/__pycache__", slash ? (int)(slash - target) : 1, slash ? target : ".");
		if ((rc = trust_cache(rep, def, cache, root, stemv, owner, escape, &failed, &checked, last, sizeof(last))))
			goto oom;
		if (prefix) {
			/* Below the prefix every folder is the loader's to list (and
			 * Python makes the missing ones): none may be open to others. */
			char top[PATH_MAX * 2];
			snprintf(top, sizeof(top), "%s", prefix);
			nearest_existing(top);
			if (!(listed = realpath(top, NULL)) && !(listed = strdup(top)))
				goto oom;
			for (size_t i = 0; i < nd && !rc; i++)
				rc = trust_cache(rep, def, dirs[i], listed, stemv, owner, escape, &failed, &checked, last, sizeof(last));
			if (rc)
				goto oom;
		}
		if (checked && !failed &&
		    oeap_report_add(rep, "trust:bytecode", 1, 0,
		                    "%s%s%s: the folders and the pycs the loader reads for the target and the binding "
		                    "module can be changed by root or the target's owner only",
		                    cache, prefix ? ", " : "", prefix ? prefix : ""))
			goto oom;
	}
	rc = oeap_pyc_check_ex(def, target, fix, dirs, pr.ran ? &pr.verdicts : NULL, rep, err);
	goto done;
oom:
	rc = oeap_fail(err, OEAP_ERR_INTERNAL, "import", 0, "out of memory");
done:
	probe_free(&pr);
	oeap_python_env_free(envp);
	free(listed);
	free(root);
	free(bind);
	return rc;
}

int oeap_import_verify(const oeap_patchdef *def, const char *target, const char *python, const oeap_env *files,
                       int escape, const char *fix, oeap_report *rep, oeap_error *err)
{
	return import_run(def, target, python, files, escape, fix, 0, rep, err);
}

int oeap_import_check(const oeap_patchdef *def, const char *target, const char *python, const oeap_env *files,
                      oeap_report *rep, oeap_error *err)
{
	return import_run(def, target, python, files, 0, NULL, 1, rep, err);
}
