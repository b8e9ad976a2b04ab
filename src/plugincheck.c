/*
 * plugincheck.c - is oeapatch's plugin installed where the target's
 * framework looks for it, and will the framework load it (plugincheck.h).
 */
#include "plugincheck.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include "embedded_scripts.h"
#include "fsio.h"
#include "importsys.h"
#include "target.h"

/* The entry point name the wheel registers in both groups (pyproject.toml). */
#define PLUGIN_NAME "oeapatch"

extern char **environ;

/* The framework's top-level package folder that holds the target: the
 * component of cli->rel named after installed_target's first one. */
static int package_dir(const oeap_cli *cli, char *out, size_t cap)
{
	const char *it = cli->def->installed_target, *rel = cli->rel;
	size_t n = it ? strcspn(it, "/") : 0;
	if (!n || !rel || !cli->root)
		return -1;
	for (const char *p = rel; *p; p = strchr(p, '/') ? strchr(p, '/') + 1 : p + strlen(p))
		if (strncmp(p, it, n) == 0 && p[n] == '/') {
			int w = snprintf(out, cap, "%s/%.*s", cli->root, (int)(p - rel + n), rel);
			return w < 0 || (size_t)w >= cap ? -1 : 0;
		}
	return -1;
}

/* Whether `path` exists and holds `needle` (the loader's definition). */
static int file_has(const char *path, const char *needle)
{
	char *text = NULL;
	size_t len = 0;
	oeap_error ignore;
	oeap_error_clear(&ignore);
	if (oeap_read_file(path, &text, &len, &ignore))
		return 0;
	int has = memmem(text, len, needle, strlen(needle)) != NULL;
	free(text);
	return has;
}

/* A line of an INI file without its surrounding blanks, in place. */
static char *trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	size_t n = strlen(s);
	while (n && isspace((unsigned char)s[n - 1]))
		s[--n] = '\0';
	return s;
}

/* The value of header `key` ("Name", "Version") in a METADATA file's head. */
static void metadata_field(const char *dist_info, const char *key, char *out, size_t cap)
{
	char path[PATH_MAX + 32], line[512];
	size_t klen = strlen(key);
	snprintf(path, sizeof(path), "%s/METADATA", dist_info);
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f) && line[0] != '\n')
		if (strncasecmp(line, key, klen) == 0 && line[klen] == ':') {
			snprintf(out, cap, "%s", trim(line + klen + 1));
			break;
		}
	fclose(f);
}

/* Whether dist_info/entry_points.txt registers PLUGIN_NAME in `group`
 * (an INI file: [group] sections of `name = module:attr` lines). */
static int registers(const char *dist_info, const char *group)
{
	char path[PATH_MAX + 32], line[1024];
	int in_group = 0, found = 0;
	snprintf(path, sizeof(path), "%s/entry_points.txt", dist_info);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f)) {
		char *s = trim(line), *eq;
		if (*s == '[') {
			char *end = strchr(s, ']');
			if (end)
				*end = '\0';
			in_group = strcmp(trim(s + 1), group) == 0;
		} else if (in_group && (eq = strchr(s, '='))) {
			*eq = '\0';
			found = strcmp(trim(s), PLUGIN_NAME) == 0;
		}
	}
	fclose(f);
	return found;
}

/* -C on a site-packages folder: its *.dist-info folders, as importlib.metadata reads them. */
static void scan_site(const char *site, oeap_plugin_state *st)
{
	DIR *d = opendir(site);
	struct dirent *e;
	st->installed = 0;
	if (!d) {
		st->installed = -1;
		snprintf(st->why_unknown, sizeof(st->why_unknown), "%s: %s", site, strerror(errno));
		return;
	}
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);
		char dist_info[PATH_MAX];
		if (n < 10 || strcmp(e->d_name + n - 10, ".dist-info") != 0)
			continue;
		snprintf(dist_info, sizeof(dist_info), "%s/%s", site, e->d_name);
		if (!registers(dist_info, st->group))
			continue;
		st->installed = 1;
		metadata_field(dist_info, "Name", st->dist, sizeof(st->dist));
		metadata_field(dist_info, "Version", st->version, sizeof(st->version));
		break;
	}
	closedir(d);
}

/* --python or the venv default: the interpreter answers, in the server's
 * environment, "NAME\tVERSION" of the distribution that registers the entry
 * point, or an empty line. importlib.metadata walks sys.path as the
 * framework's loader does (entry_points() keeps the first distribution of a
 * name); distributions() serves the Pythons before 3.10 too, whose
 * entry_points() takes no group. */
static void ask_python(const oeap_cli *cli, const oeap_env *files, oeap_plugin_state *st)
{
	const char *script = oeap_script_plugin_probe_py; /* src/scripts/plugin_probe.py */
	char line[512] = "";
	int fd = -1, status = 0, got = 0;
	char **envp = oeap_python_env(files);
	char *args[] = {(char *)st->group, (char *)PLUGIN_NAME, NULL};
	pid_t pid = -1;
	st->installed = -1;
	if (!envp || (fd = oeap_python_spawn(cli->python, script, args, envp, 0, &pid)) < 0) {
		snprintf(st->why_unknown, sizeof(st->why_unknown), "could not ask %s: %s", cli->python,
		         envp ? strerror(errno) : "out of memory");
		oeap_python_env_free(envp);
		return;
	}
	FILE *f = fdopen(fd, "r");
	if (f) {
		got = fgets(line, sizeof(line), f) != NULL;
		while (fgetc(f) != EOF)
			; /* drain, so the child never blocks on a full pipe */
		fclose(f);
	} else
		close(fd);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	oeap_python_env_free(envp);
	if (pid < 0 || !got || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		snprintf(st->why_unknown, sizeof(st->why_unknown), "%s could not list its entry points (%s)", cli->python,
		         pid < 0 ? "fork failed" : WIFEXITED(status) ? "importlib.metadata failed" : "killed");
		return;
	}
	line[strcspn(line, "\n")] = '\0';
	st->installed = line[0] != '\0';
	char *tab = strchr(line, '\t');
	if (tab) {
		*tab = '\0';
		snprintf(st->version, sizeof(st->version), "%s", tab + 1);
	}
	snprintf(st->dist, sizeof(st->dist), "%s", line);
}

/* Whether `value` of the restricting variable lets PLUGIN_NAME load. */
static int allows(int sglang, const char *value)
{
	size_t want = strlen(PLUGIN_NAME);
	for (const char *p = value;; p++) {
		size_t n = strcspn(p, ",");
		const char *s = p, *end = p + n;
		if (sglang) {
			/* str.strip(): Python's whitespace is the C locale's isspace() for ASCII. */
			while (s < end && isspace((unsigned char)*s))
				s++;
			while (end > s && isspace((unsigned char)end[-1]))
				end--;
		}
		if ((size_t)(end - s) == want && memcmp(s, PLUGIN_NAME, want) == 0)
			return 1;
		p += n;
		if (!*p)
			break;
	}
	/* (SGLang: a value of only commas and blanks is truthy, its set empty: nothing loads.) */
	return 0;
}

void oeap_plugin_check(const oeap_cli *cli, const oeap_env *env, oeap_plugin_state *st)
{
	char pkg[PATH_MAX], path[PATH_MAX + 64];
	memset(st, 0, sizeof(*st));
	const char *fw = cli->def ? cli->def->framework : NULL;
	int sglang = fw && strcasecmp(fw, "SGLang") == 0, vllm = fw && strcasecmp(fw, "vLLM") == 0;
	if (!sglang && !vllm)
		return;
	st->applicable = 1;
	st->framework = sglang ? "SGLang" : "vLLM";
	st->group = sglang ? "sglang.srt.plugins" : "vllm.general_plugins";
	st->var = sglang ? "SGLANG_PLUGINS" : "VLLM_PLUGINS";

	/* The loader, where each release that has it defines it. */
	if (package_dir(cli, pkg, sizeof(pkg)) == 0) {
		snprintf(path, sizeof(path), "%s/%s", pkg, sglang ? "srt/plugins/__init__.py" : "plugins/__init__.py");
		st->supported = file_has(path, sglang ? "def load_plugins(" : "def load_general_plugins(");
	}

	if (cli->python)
		ask_python(cli, cli->nenv_files ? env : NULL, st);
	else if (cli->layout == OEAP_LAYOUT_INSTALLED)
		scan_site(cli->root, st);
	else {
		st->installed = -1;
		snprintf(st->why_unknown, sizeof(st->why_unknown),
		         "a checkout names no Python environment: --python PATH says whether it is installed in one");
	}

	const oeap_env_var *v = env ? oeap_env_get(env, st->var) : NULL;
	/* SGLang: unset or empty loads all (a falsy string); vLLM: only unset does. */
	int restricted = v && (vllm || v->value[0]);
	if (restricted && !allows(sglang, v->value)) {
		snprintf(st->excluded_by, sizeof(st->excluded_by), "%s=%s", st->var, v->value);
		if (v->origin)
			snprintf(st->origin, sizeof(st->origin), "%s:%ld", v->origin, v->line);
	}
	/* A release without the loader never runs it, whatever is installed. */
	st->enabled = st->supported && st->installed == 1 && !st->excluded_by[0];
}

void oeap_plugin_describe(const oeap_plugin_state *st, char *out, size_t cap)
{
	char from[600] = "";
	if (st->origin[0])
		snprintf(from, sizeof(from), " (%s)", st->origin);
	if (!st->supported)
		snprintf(out, cap, "this %s release has no plugin system%s%s: the binding's import checks only",
		         st->framework, strcmp(st->framework, "SGLang") == 0 ? " (before 0.5.11)" : "",
		         st->installed == 1 ? ", the installed plugin is never loaded" : "");
	else if (st->installed < 0)
		snprintf(out, cap, "unknown: %s", st->why_unknown);
	else if (!st->installed)
		snprintf(out, cap, "not installed in this environment (pip install oeapatch into it for the per-process "
		                   "check)");
	else if (st->excluded_by[0])
		snprintf(out, cap, "%s %s installed but excluded by %s%s", st->dist, st->version, st->excluded_by, from);
	else
		snprintf(out, cap, "%s %s installed, enabled", st->dist, st->version);
}

json_t *oeap_plugin_json(const oeap_plugin_state *st)
{
	if (!st->applicable)
		return json_null();
	char line[2048];
	oeap_plugin_describe(st, line, sizeof(line));
	json_t *j = json_object();
	json_object_set_new(j, "framework", json_string(st->framework));
	json_object_set_new(j, "group", json_string(st->group));
	json_object_set_new(j, "supported", json_boolean(st->supported));
	json_object_set_new(j, "installed", st->installed < 0 ? json_null() : json_boolean(st->installed));
	json_object_set_new(j, "enabled", st->installed < 0 ? json_null() : json_boolean(st->enabled));
	json_object_set_new(j, "distribution", st->dist[0] ? oeap_json_str(st->dist) : json_null());
	json_object_set_new(j, "version", st->version[0] ? oeap_json_str(st->version) : json_null());
	json_object_set_new(j, "excluded_by", st->excluded_by[0] ? oeap_json_str(st->excluded_by) : json_null());
	json_object_set_new(j, "excluded_by_origin", st->origin[0] ? oeap_json_str(st->origin) : json_null());
	json_object_set_new(j, "summary", oeap_json_str(line));
	return j;
}
