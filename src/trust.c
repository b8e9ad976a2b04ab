#include "trust.h"

#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "libsearch.h"
#include "quote.h"
#include "settings.h"

/* The kernel's limit (MAXSYMLINKS): a longer chain is a loop for it too. */
#define MAX_LINKS 40

/* "uid N (name)", or "uid N" for a uid without a passwd entry. */
static void owner_text(uid_t uid, char *out, size_t cap)
{
	struct passwd *pw = getpwuid(uid);
	if (pw && pw->pw_name)
		snprintf(out, cap, "uid %u (%s)", (unsigned)uid, pw->pw_name);
	else
		snprintf(out, cap, "uid %u", (unsigned)uid);
}

static int offend(oeap_trust_problem *p, const char *path, const struct stat *st, const char *why,
                  const char *fix)
{
	char who[320], word[1024];
	owner_text(st->st_uid, who, sizeof(who));
	oeap_shell_word(word, sizeof(word), path);
	snprintf(p->path, sizeof(p->path), "%s", path);
	p->uid = st->st_uid;
	p->mode = (unsigned)(st->st_mode & 07777);
	int n = snprintf(p->message, sizeof(p->message), "%s (owner %s, mode %04o) %s: `%s %s`", path, who, p->mode,
	                 why, fix, word);
	/* A fix cut short would name another path (or none): a long path gets
	 * the reason without it (p->path holds the whole path). */
	if (n < 0 || (size_t)n >= sizeof(p->message) || strlen(word) + 1 >= sizeof(word))
		n = snprintf(p->message, sizeof(p->message), "%s (owner %s, mode %04o) %s", path, who, p->mode, why);
	(void)n;
	return 1;
}

/* Is `path` (a walked path: no links, no "." or "..") `dir` or below it? */
static int at_or_below(const char *path, const char *dir)
{
	size_t n = dir ? strlen(dir) : 0;
	while (n > 1 && dir[n - 1] == '/')
		n--;
	if (!n)
		return 0;
	if (n == 1 && dir[0] == '/')
		return 1;
	return !strncmp(path, dir, n) && (path[n] == '\0' || path[n] == '/');
}

/* One step of the walk: 1 (and *p) when `path` breaks the rule. `listed`:
 * a folder the import system lists to find a module (adding an entry is
 * enough there, so the sticky bit does not help). */
static int check_entry(const char *path, const struct stat *st, uid_t owner, int listed, oeap_trust_problem *p)
{
	if (st->st_uid != 0 && st->st_uid != owner) {
		char want[512], who[320];
		owner_text(owner, who, sizeof(who));
		snprintf(want, sizeof(want),
		         "is owned by neither root nor the target's owner (%s), so its owner can replace what the "
		         "server loads",
		         who);
		return offend(p, path, st, want, "chown root");
	}
	/* A link's own mode means nothing; who may replace it is its
	 * directory's business, checked as a step of its own. */
	if (S_ISLNK(st->st_mode))
		return 0;
	/* Sticky: only an entry's owner may rename or remove it, and the entry
	 * below is checked next. Only for a folder (the bit means nothing of the
	 * kind on a file), and not for one the import system lists: there a new
	 * entry (topk/__init__.py, an extension module, a pyc, a .pth file) is
	 * imported without replacing anything. */
	if (S_ISDIR(st->st_mode) && (st->st_mode & S_ISVTX) && !listed)
		return 0;
	if (S_ISDIR(st->st_mode) && (st->st_mode & S_ISVTX) && (st->st_mode & (S_IWOTH | S_IWGRP)))
		return offend(p, path, st,
		              st->st_mode & S_IWOTH
		                  ? "is writable by others (sticky, but the import system lists this folder: adding an "
		                    "entry is enough to be imported)"
		                  : "is writable by its group (sticky, but the import system lists this folder: adding an "
		                    "entry is enough to be imported)",
		              "chmod go-w");
	if (st->st_mode & S_IWOTH)
		return offend(p, path, st, "is writable by others", "chmod go-w");
	if (st->st_mode & S_IWGRP)
		return offend(p, path, st, "is writable by its group", "chmod go-w");
	return 0;
}

static int cannot(oeap_trust_problem *p, const char *path, const char *why)
{
	snprintf(p->path, sizeof(p->path), "%s", path);
	snprintf(p->message, sizeof(p->message), "%s: %s", path, why);
	return -1;
}

int oeap_trust_check(const char *path, uid_t owner, oeap_trust_problem *p)
{
	return oeap_trust_check_listed(path, owner, NULL, p);
}

int oeap_trust_check_listed(const char *path, uid_t owner, const char *listed, oeap_trust_problem *p)
{
	/* cur: the real path walked so far ("" is "/"); rest: what is left. */
	static const size_t cap = PATH_MAX * 2 + 2;
	char cur[PATH_MAX], next[PATH_MAX], link[PATH_MAX];
	char *rest = malloc(cap), *tmp = malloc(cap);
	struct stat st;
	int links = 0, rc = 0;
	memset(p, 0, sizeof(*p));
	if (!rest || !tmp) {
		rc = cannot(p, path, "out of memory");
		goto done;
	}
	if (path[0] != '/') {
		if (!getcwd(cur, sizeof(cur))) {
			rc = cannot(p, path, "cannot tell the current directory");
			goto done;
		}
		if ((size_t)snprintf(rest, cap, "%s/%s", cur, path) >= cap) {
			rc = cannot(p, path, strerror(ENAMETOOLONG));
			goto done;
		}
	} else if ((size_t)snprintf(rest, cap, "%s", path) >= cap) {
		rc = cannot(p, path, strerror(ENAMETOOLONG));
		goto done;
	}
	if (lstat("/", &st)) {
		rc = cannot(p, "/", strerror(errno));
		goto done;
	}
	if ((rc = check_entry("/", &st, owner, at_or_below("/", listed), p)))
		goto done;
	cur[0] = '\0';
	for (const char *r = rest; *r;) {
		while (*r == '/')
			r++;
		if (!*r)
			break;
		const char *slash = strchr(r, '/');
		size_t n = slash ? (size_t)(slash - r) : strlen(r);
		if (n == 1 && r[0] == '.') {
			r += n;
			continue;
		}
		if (n == 2 && r[0] == '.' && r[1] == '.') {
			/* cur holds no links, so its parent is textual; it was checked on the way down. */
			char *s = strrchr(cur, '/');
			if (s)
				*s = '\0';
			r += n;
			continue;
		}
		if ((size_t)snprintf(next, sizeof(next), "%s/%.*s", cur, (int)n, r) >= sizeof(next)) {
			rc = cannot(p, path, strerror(ENAMETOOLONG));
			goto done;
		}
		r += n;
		if (lstat(next, &st)) {
			rc = cannot(p, next, strerror(errno));
			goto done;
		}
		if ((rc = check_entry(next, &st, owner, at_or_below(next, listed), p)))
			goto done;
		if (S_ISLNK(st.st_mode)) {
			ssize_t k = readlink(next, link, sizeof(link) - 1);
			if (++links > MAX_LINKS) {
				rc = cannot(p, next, strerror(ELOOP));
				goto done;
			}
			if (k < 0) {
				rc = cannot(p, next, strerror(errno));
				goto done;
			}
			link[k] = '\0';
			/* What the link points to, then what was left after it. */
			if ((size_t)snprintf(tmp, cap, "%s%s", link, r) >= cap) {
				rc = cannot(p, path, strerror(ENAMETOOLONG));
				goto done;
			}
			memcpy(rest, tmp, strlen(tmp) + 1);
			r = rest;
			if (link[0] == '/')
				cur[0] = '\0';
			continue;
		}
		if (*r && !S_ISDIR(st.st_mode)) {
			rc = cannot(p, next, strerror(ENOTDIR));
			goto done;
		}
		memcpy(cur, next, strlen(next) + 1);
	}
done:
	free(rest);
	free(tmp);
	return rc;
}

int oeap_trust_target_owner(const char *target, uid_t *owner)
{
	struct stat st;
	if (stat(target, &st))
		return -1;
	*owner = st.st_uid;
	return 0;
}

const char *oeap_trust_escape_name(const oeap_patchdef *def)
{
	const oeap_setting_def *s = def->trust_escape ? oeap_patchdef_setting(def, def->trust_escape) : NULL;
	return s && s->type == OEAP_SETTING_BOOL ? def->trust_escape : NULL;
}

int oeap_trust_escape_on(const oeap_patchdef *def, const oeap_settings_result *s)
{
	const char *name = oeap_trust_escape_name(def);
	for (size_t i = 0; name && s && i < def->nsettings && i < s->nsettings; i++)
		if (!strcmp(def->settings[i].name, name))
			return s->values[i] != 0;
	return 0;
}

char *oeap_trust_library_file(const char *library, const char *ld_library_path, const char *origin)
{
	char how[1024];
	return strchr(library, '/') ? strdup(library)
	                            : oeap_libsearch_find(library, ld_library_path, origin, how, sizeof(how));
}

char *oeap_trust_package_root(const oeap_patchdef *def, const char *target)
{
	size_t tlen = strlen(target);
	for (char *const *alt = def->installed_targets; alt && *alt; alt++) {
		size_t n = strlen(*alt);
		if (n < tlen && target[tlen - n - 1] == '/' && !strcmp(target + tlen - n, *alt)) {
			char *dir = strndup(target, tlen - n - 1);
			char *real = dir ? realpath(dir[0] ? dir : "/", NULL) : NULL;
			if (real) {
				free(dir);
				return real;
			}
			return dir;
		}
	}
	/* No installed layout to strip: the target's own folder. */
	const char *slash = strrchr(target, '/');
	char *dir = slash ? strndup(target, slash > target ? (size_t)(slash - target) : 1) : strdup(".");
	char *real = dir ? realpath(dir, NULL) : NULL;
	if (real) {
		free(dir);
		return real;
	}
	return dir;
}

int oeap_trust_escape_environ(const oeap_patchdef *def)
{
	extern char **environ;
	oeap_env env;
	oeap_settings_result s;
	oeap_error err;
	memset(&env, 0, sizeof(env));
	memset(&s, 0, sizeof(s));
	oeap_error_clear(&err);
	int on = !oeap_env_from_environ(&env, environ, &err) && !oeap_settings_check(def, &env, &s) &&
	         oeap_trust_escape_on(def, &s);
	oeap_settings_result_free(&s);
	oeap_env_free(&env);
	return on;
}
