#include "hook.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "embedded_scripts.h"
#include "gitrepo.h"
#include "fsio.h"
#include "region.h"

const char *const oeap_hook_names[] = {"post-merge", "post-checkout", "post-rewrite", "pre-push", NULL};

int oeap_hook_known(const char *name)
{
	for (const char *const *n = oeap_hook_names; *n; n++)
		if (!strcmp(*n, name))
			return 1;
	return 0;
}

const char *oeap_hook_state_name(oeap_hook_state s)
{
	switch (s) {
	case OEAP_HOOK_ABSENT: return "absent";
	case OEAP_HOOK_OURS: return "ours";
	case OEAP_HOOK_OURS_CHAINED: return "ours+chained";
	case OEAP_HOOK_FOREIGN: return "foreign";
	}
	return "unknown";
}

const char *oeap_hook_action_name(oeap_hook_action a)
{
	switch (a) {
	case OEAP_HOOK_DID_NOTHING: return "unchanged";
	case OEAP_HOOK_DID_INSTALL: return "installed";
	case OEAP_HOOK_DID_CHAIN: return "installed, chaining the existing hook";
	case OEAP_HOOK_DID_UPDATE: return "updated";
	case OEAP_HOOK_DID_REMOVE: return "removed";
	case OEAP_HOOK_DID_RESTORE: return "removed, previous hook restored";
	case OEAP_HOOK_DID_REFUSE: return "not ours: left alone";
	case OEAP_HOOK_DID_KEEP_EDITED: return "ours, but edited since install: left alone (--force replaces it)";
	}
	return "unknown";
}

static char *join(const char *a, const char *b)
{
	size_t la = strlen(a);
	while (la > 1 && a[la - 1] == '/')
		la--;
	size_t lb = strlen(b);
	char *s = malloc(la + lb + 2);
	if (!s)
		return NULL;
	memcpy(s, a, la);
	s[la] = '/';
	memcpy(s + la + 1, b, lb + 1);
	return s;
}

int oeap_hooks_dir(git_repository *repo, char **dir, int *from_config, oeap_error *err)
{
	git_config *cfg = NULL;
	git_buf b = GIT_BUF_INIT;
	*dir = NULL;
	if (from_config)
		*from_config = 0;
	if (git_repository_config_snapshot(&cfg, repo))
		return oeap_git_fail(err, "core.hooksPath", "cannot read the repository's configuration");
	/* Not git_config_get_path: libgit2 expands "~" only when the home
	 * directory exists; git expands it from $HOME (or the passwd entry). */
	int rc = git_config_get_string_buf(&b, cfg, "core.hooksPath");
	if (rc == 0 && b.size) {
		if (b.ptr[0] == '~') {
			const char *rest = b.ptr + 1, *home = NULL;
			char user[256];
			size_t ul = strcspn(rest, "/");
			if (ul == 0) {
				home = getenv("HOME");
				if (!home || !*home) {
					struct passwd *pw = getpwuid(getuid());
					home = pw ? pw->pw_dir : NULL;
				}
			} else if (ul < sizeof(user)) {
				memcpy(user, rest, ul);
				user[ul] = '\0';
				struct passwd *pw = getpwnam(user);
				home = pw ? pw->pw_dir : NULL;
			}
			if (!home) {
				git_buf_dispose(&b);
				git_config_free(cfg);
				return oeap_fail(err, OEAP_ERR_INPUT, "core.hooksPath", 0,
				                 "cannot expand '~' in it: no such home directory");
			}
			rest += ul;
			*dir = malloc(strlen(home) + strlen(rest) + 1);
			if (*dir)
				sprintf(*dir, "%s%s", home, rest);
		} else if (b.ptr[0] == '/') {
			*dir = strdup(b.ptr);
		} else {
			/* git runs hooks in the work tree's top (GIT_DIR when bare), and
			 * resolves a relative hooksPath there. */
			const char *base = git_repository_workdir(repo);
			*dir = join(base ? base : git_repository_path(repo), b.ptr);
		}
		if (from_config)
			*from_config = 1;
	} else if (rc == 0 || rc == GIT_ENOTFOUND) {
		git_error_clear();
		*dir = join(git_repository_commondir(repo), "hooks");
	} else {
		git_buf_dispose(&b);
		git_config_free(cfg);
		return oeap_git_fail(err, "core.hooksPath", "cannot read it");
	}
	git_buf_dispose(&b);
	git_config_free(cfg);
	if (!*dir)
		return oeap_fail(err, OEAP_ERR_INTERNAL, "hooks", 0, "out of memory");
	size_t n = strlen(*dir);
	while (n > 1 && (*dir)[n - 1] == '/')
		(*dir)[--n] = '\0';
	return 0;
}

/* 'text' with every ' written as '\'' : safe in any sh word. */
static int put_quoted(oeap_buf *out, const char *s)
{
	int rc = oeap_buf_puts(out, "'");
	for (; *s && !rc; s++)
		rc = *s == '\'' ? oeap_buf_puts(out, "'\\''") : oeap_buf_put(out, s, 1);
	return rc ? rc : oeap_buf_puts(out, "'");
}

static int put_var(oeap_buf *out, const char *name, const char *value)
{
	if (oeap_buf_printf(out, "%s=", name) || put_quoted(out, value ? value : ""))
		return -1;
	return oeap_buf_puts(out, "\n");
}

#define SUM_TAG "# oeapatch hook sha256:"

/*
 * 1 when a hook of ours was edited after install: its last line records the
 * hash of everything before it, so a changed line or one appended after it
 * shows. Hooks written before the hash line existed count as unedited.
 */
static int hook_edited(const char *text, size_t len)
{
	const char *tag = NULL;
	for (const char *p = text; (p = strstr(p, "\n" SUM_TAG)) != NULL; p++)
		tag = p + 1;
	if (!tag)
		return 0;
	char want[OEAP_HASH_HEX + 1];
	const char *hex = tag + strlen(SUM_TAG);
	size_t before = (size_t)(tag - text);
	if (oeap_region_hash(text, before, want))
		return 1;
	return !(len == before + strlen(SUM_TAG) + OEAP_HASH_HEX + 1 && !strncmp(hex, want, OEAP_HASH_HEX) &&
	         hex[OEAP_HASH_HEX] == '\n');
}

static int render_body(const char *name, const oeap_hook_config *cfg, oeap_buf *out);

int oeap_hook_render(const char *name, const oeap_hook_config *cfg, oeap_buf *out)
{
	char hex[OEAP_HASH_HEX + 1];
	if (render_body(name, cfg, out) || oeap_region_hash(out->data, out->len, hex))
		return -1;
	/* The last line: how uninstall tells our hook from our hook with the
	 * user's lines in it (which it must not delete). */
	return oeap_buf_printf(out, SUM_TAG "%s\n", hex) ? -1 : 0;
}

/* The hook's settings (its own name, what to run, for which patch) and the
 * functions every hook shares. */
static int put_head(const char *name, const oeap_hook_config *cfg, oeap_buf *out)
{
	int rc = 0;
	rc |= oeap_buf_printf(out,
	                      "#!/bin/sh\n" OEAP_HOOK_HEADER "\n"
	                      "# Written by `oeapatch hook install`: `oeapatch hook uninstall` removes it and\n"
	                      "# puts back the hook that was here before (kept meanwhile, unchanged, as\n"
	                      "# %s" OEAP_HOOK_CHAINED_SUFFIX "). Reinstall rather than edit.\n"
	                      "# installed: reapply=%d oeapatch=%s\n",
	                      name, cfg->reapply, cfg->oeapatch);
	rc |= put_var(out, "hook", name);
	rc |= put_var(out, "oeapatch", cfg->oeapatch);
	rc |= put_var(out, "patch", cfg->patch);
	rc |= put_var(out, "library", cfg->reapply && cfg->library ? cfg->library : "");
	rc |= put_var(out, "sub", cfg->subdir ? cfg->subdir : "");
	rc |= put_var(out, "target", cfg->target);
	rc |= oeap_buf_printf(out, "reapply=%d\n", cfg->reapply);
	rc |= oeap_buf_printf(out, "skip_binding=%d\n", cfg->skip_binding);
	/* the part every hook shares: the shout, the chained hook (src/scripts/hook_common.sh) */
	rc |= oeap_buf_puts(out, oeap_script_hook_common_sh);
	return rc;
}

/* The hook that was here first runs first, as git would have run it. Hooks
 * that read stdin (post-rewrite, pre-push) keep a copy for both. */
static int put_chained_call(const char *name, oeap_buf *out)
{
	int stdin_hook = !strcmp(name, "post-rewrite") || !strcmp(name, "pre-push");
	if (stdin_hook)
		return oeap_buf_puts(out,
		                     "\n"
		                     "# Both the chained hook and this one read stdin: keep a copy.\n"
		                     "input=$(mktemp \"${TMPDIR:-/tmp}/oeapatch-hook.XXXXXX\") || exit 1\n"
		                     "trap 'rm -f \"$input\"' EXIT\n"
		                     "cat > \"$input\"\n"
		                     "if [ -x \"$chained\" ]; then\n"
		                     "\trun_chained \"$@\" < \"$input\" || status=$?\n"
		                     "fi\n");
	return oeap_buf_puts(out,
	                     "\n"
	                     "if [ -x \"$chained\" ]; then\n"
	                     "\trun_chained \"$@\" || status=$?\n"
	                     "fi\n");
}

/* pre-push: block a push whose commits do not carry a verified patch. */
static int put_pre_push_action(oeap_buf *out)
{
	return oeap_buf_puts(
		out,
		"[ \"$status\" -eq 0 ] || exit \"$status\"\n"
		"\n"
		"# Block the push when a commit it sends does not carry a verified patch:\n"
		"# that commit is what the other side deploys. Deletions send nothing.\n"
		"can_run || exit 1\n"
		"while read -r lref lsha rref rsha; do\n"
		"\tcase $lsha in\n"
		"\t'' | *[!0]*) ;;\n"
		"\t*) continue ;;\n"
		"\tesac\n"
		"\t[ -n \"$lsha\" ] || continue\n"
		"\t# --skip-binding (hook install --skip-binding): every deploy runs apply,\n"
		"\t# which writes the binding module, so commits need not carry it.\n"
		"\tif [ \"$skip_binding\" = 1 ]; then\n"
		"\t\tout=$(\"$oeapatch\" verify -C \"$dir\" --patch \"$patch\" --ref \"$lsha\" --skip-binding 2>&1)\n"
		"\telse\n"
		"\t\tout=$(\"$oeapatch\" verify -C \"$dir\" --patch \"$patch\" --ref \"$lsha\" 2>&1)\n"
		"\tfi\n"
		"\tif [ $? -ne 0 ]; then\n"
		"\t\tprintf '%s\\n' \"$out\" >&2\n"
		"\t\tshout \"push BLOCKED: $patch does not verify in $lref ($lsha)\" \\\n"
		"\t\t\t\"that commit would deploy without the patch (or with half of it)\" \\\n"
		"\t\t\t\"fix the commit (oeapatch apply, git add both files, commit again), or override with git push --no-verify\" \\\n"
		"\t\t\t\"(deploys that run oeapatch apply need no committed binding module: oeapatch hook install --skip-binding)\"\n"
		"\t\tstatus=1\n"
		"\telse\n"
		"\t\techo \"oeapatch: $hook: $patch verified in $lref\" >&2\n"
		"\tfi\n"
		"done < \"$input\"\n"
		"exit \"$status\"\n");
}

/* post-merge, post-checkout, post-rewrite: verify (or re-apply) the work
 * tree, with each hook's way back to where the patch held. */
static int put_work_tree_action(const char *name, oeap_buf *out)
{
	int rc = 0;
	/* act on the work tree (src/scripts/hook_work_tree.sh: it names the state file, OEAP_HOOK_STATE_FILE,
	 * as it is; test_hook holds the two together) */
	rc |= oeap_buf_puts(out, oeap_script_hook_work_tree_sh);
	rc |= oeap_buf_puts(out, "\n");
	if (!strcmp(name, "post-checkout"))
		rc |= oeap_buf_puts(
			out,
			"# A rebase checks out commits on its way; post-rewrite acts at its end.\n"
			"if [ -n \"$gitdir\" ] && { [ -d \"$gitdir/rebase-merge\" ] || [ -d \"$gitdir/rebase-apply\" ]; }; then\n"
			"\texit \"$status\"\n"
			"fi\n"
			"# Branch switches ($3 = 1) and file checkouts ($3 = 0) alike: speak only\n"
			"# when the patch's state is not what was last recorded (a branch without\n"
			"# it, or `git checkout -- topk.py` after apply), never on a routine switch.\n"
			"if [ -n \"$record\" ] && [ -f \"$record\" ] && [ \"$(state_now)\" = \"$(cat \"$record\" 2>/dev/null)\" ]; then\n"
			"\texit \"$status\"\n"
			"fi\n"
			"# git passes the null commit as the previous HEAD when there was none (a\n"
			"# new worktree, a clone): nothing to go back to, so the hint is to apply.\n"
			"rollback=\n"
			"case $1 in\n"
			"*[!0]*)\n"
			"\tif [ \"$3\" = 1 ]; then\n"
			"\t\trollback=\"git checkout $1\"\n"
			"\telse\n"
			"\t\trollback=\"git checkout $1 -- '$dir/$target'\"\n"
			"\tfi\n"
			"\t;;\n"
			"esac\n");
	else if (!strcmp(name, "post-rewrite"))
		rc |= oeap_buf_puts(out,
		                    "# $1 is rebase or amend; an amend leaves the work tree as it was.\n"
		                    "[ \"$1\" = rebase ] || exit \"$status\"\n"
		                    "rollback=\"git reset --keep ORIG_HEAD\"\n");
	else if (!strcmp(name, "post-merge"))
		rc |= oeap_buf_puts(out, "rollback=\"git reset --keep ORIG_HEAD\"\n");
	/* A chained hook's failure is the hook's exit status, as without us
	 * (post-checkout's becomes git checkout's); ours counts when it passed. */
	rc |= oeap_buf_puts(out,
	                    "act || [ \"$status\" -ne 0 ] || status=1\n"
	                    "remember\n"
	                    "exit \"$status\"\n");
	return rc;
}

static int render_body(const char *name, const oeap_hook_config *cfg, oeap_buf *out)
{
	int rc = put_head(name, cfg, out);
	rc |= put_chained_call(name, out);
	rc |= !strcmp(name, "pre-push") ? put_pre_push_action(out) : put_work_tree_action(name, out);
	return rc ? -1 : 0;
}

/* Reads a hook (through a symlink); NULL when it cannot be read. */
static char *read_hook(const char *path, size_t *len)
{
	char *data = NULL;
	oeap_error e;
	oeap_error_clear(&e);
	if (oeap_read_file(path, &data, len, &e))
		return NULL;
	return data;
}

static int is_ours(const char *text)
{
	/* The header is the second line, right after the #! line. */
	const char *nl = strchr(text, '\n');
	return nl && !strncmp(nl + 1, OEAP_HOOK_HEADER "\n", sizeof(OEAP_HOOK_HEADER));
}

static int exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

void oeap_hook_inspect(const char *dir, const char *name, oeap_hook_info *info)
{
	memset(info, 0, sizeof(*info));
	char *path = join(dir, name);
	char *chained = path ? malloc(strlen(path) + sizeof(OEAP_HOOK_CHAINED_SUFFIX)) : NULL;
	if (!path || !chained)
		goto done;
	sprintf(chained, "%s%s", path, OEAP_HOOK_CHAINED_SUFFIX);
	int has_chained = exists(chained);
	if (!exists(path)) {
		info->state = OEAP_HOOK_ABSENT;
		info->stray_chained = has_chained;
		goto done;
	}
	size_t len = 0;
	char *text = read_hook(path, &len);
	if (!text || !is_ours(text)) {
		info->state = OEAP_HOOK_FOREIGN;
		info->stray_chained = has_chained;
		free(text);
		goto done;
	}
	info->state = has_chained ? OEAP_HOOK_OURS_CHAINED : OEAP_HOOK_OURS;
	info->edited = hook_edited(text, len);
	const char *rec = strstr(text, "\n# installed: reapply=");
	if (rec) {
		rec += strlen("\n# installed: reapply=");
		info->reapply = *rec == '1';
		const char *p = strstr(rec, " oeapatch=");
		const char *e = p ? strchr(p, '\n') : NULL;
		if (p && e) {
			p += strlen(" oeapatch=");
			snprintf(info->oeapatch, sizeof(info->oeapatch), "%.*s", (int)(e - p), p);
		}
	}
	free(text);
done:
	free(path);
	free(chained);
}

static int fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return -1;
	int rc = fsync(fd);
	close(fd);
	return rc;
}

static int mkdirs(const char *dir, oeap_error *err)
{
	char *p = strdup(dir);
	if (!p)
		return oeap_fail(err, OEAP_ERR_INTERNAL, dir, 0, "out of memory");
	for (char *s = p + 1;; s++) {
		if (*s == '/' || *s == '\0') {
			char c = *s;
			*s = '\0';
			if (mkdir(p, 0755) && errno != EEXIST) {
				int e = errno;
				free(p);
				return oeap_fail(err, OEAP_ERR_IO, dir, 0, "cannot create the hooks directory: %s", strerror(e));
			}
			*s = c;
			if (!c)
				break;
		}
	}
	free(p);
	return 0;
}

int oeap_hook_install(const char *dir, const char *name, const oeap_hook_config *cfg, oeap_hook_action *did,
                      oeap_error *err)
{
	return oeap_hook_install_flags(dir, name, cfg, 0, did, err);
}

int oeap_hook_install_flags(const char *dir, const char *name, const oeap_hook_config *cfg, unsigned flags,
                            oeap_hook_action *did, oeap_error *err)
{
	int error = 0, moved = 0;
	oeap_buf want = OEAP_BUF_INIT;
	char *path = join(dir, name), *chained = NULL, *text = NULL;
	size_t len = 0;
	*did = OEAP_HOOK_DID_NOTHING;
	if (!path || !(chained = malloc(strlen(path) + sizeof(OEAP_HOOK_CHAINED_SUFFIX))) ||
	    oeap_hook_render(name, cfg, &want)) {
		error = oeap_fail(err, OEAP_ERR_INTERNAL, name, 0, "out of memory");
		goto done;
	}
	sprintf(chained, "%s%s", path, OEAP_HOOK_CHAINED_SUFFIX);
	if ((error = mkdirs(dir, err)))
		goto done;

	if (exists(path)) {
		text = read_hook(path, &len);
		if (text && is_ours(text)) {
			if (len == want.len && !memcmp(text, want.data, len))
				goto done; /* installed already, as asked */
			if (hook_edited(text, len) && !(flags & OEAP_HOOK_FORCE)) {
				*did = OEAP_HOOK_DID_KEEP_EDITED; /* the user's lines are not ours to drop */
				goto done;
			}
			*did = OEAP_HOOK_DID_UPDATE;
		} else {
			if (exists(chained)) {
				error = oeap_fail(err, OEAP_ERR_INPUT, path, 0,
				                  "is not ours, and %s already exists: refusing to move one over the other; "
				                  "sort out which hook should run, then install again",
				                  chained);
				goto done;
			}
			/* A rename keeps the bytes, the mode, even a symlink, exactly. */
			if (rename(path, chained)) {
				error = oeap_fail(err, OEAP_ERR_IO, path, 0, "cannot move the existing hook aside: %s",
				                  strerror(errno));
				goto done;
			}
			moved = 1;
			*did = OEAP_HOOK_DID_CHAIN;
		}
	} else {
		*did = OEAP_HOOK_DID_INSTALL;
	}
	if ((error = oeap_write_atomic(path, want.data, want.len, 0755, err)))
		goto done;
	/* oeap_write_atomic keeps an existing file's mode and honours umask: make
	 * sure git can execute it. */
	if (chmod(path, 0755)) {
		error = oeap_fail(err, OEAP_ERR_IO, path, 0, "cannot make the hook executable: %s", strerror(errno));
		goto done;
	}
	fsync_dir(dir);
done:
	if (error && moved) {
		unlink(path);
		if (rename(chained, path) == 0)
			fsync_dir(dir);
		*did = OEAP_HOOK_DID_NOTHING;
	}
	oeap_buf_free(&want);
	free(text);
	free(path);
	free(chained);
	return error;
}

int oeap_hook_uninstall(const char *dir, const char *name, oeap_hook_action *did, oeap_error *err)
{
	return oeap_hook_uninstall_flags(dir, name, 0, did, err);
}

int oeap_hook_uninstall_flags(const char *dir, const char *name, unsigned flags, oeap_hook_action *did,
                              oeap_error *err)
{
	int error = 0;
	char *path = join(dir, name), *chained = NULL, *text = NULL;
	size_t len = 0;
	*did = OEAP_HOOK_DID_NOTHING;
	if (!path || !(chained = malloc(strlen(path) + sizeof(OEAP_HOOK_CHAINED_SUFFIX)))) {
		error = oeap_fail(err, OEAP_ERR_INTERNAL, name, 0, "out of memory");
		goto done;
	}
	sprintf(chained, "%s%s", path, OEAP_HOOK_CHAINED_SUFFIX);
	int has_chained = exists(chained);
	if (exists(path)) {
		text = read_hook(path, &len);
		if (!text || !is_ours(text)) {
			/* Never remove what we did not write. A chained file beside it
			 * stays too: moving it back would destroy this hook. */
			*did = OEAP_HOOK_DID_REFUSE;
			goto done;
		}
		/* Ours with the user's lines added: removing it would delete them. */
		if (hook_edited(text, len) && !(flags & OEAP_HOOK_FORCE)) {
			*did = OEAP_HOOK_DID_KEEP_EDITED;
			goto done;
		}
		if ((error = oeap_remove_file(path, err)))
			goto done;
		*did = OEAP_HOOK_DID_REMOVE;
	}
	if (has_chained) {
		if (rename(chained, path)) {
			error = oeap_fail(err, OEAP_ERR_IO, chained, 0, "cannot move the previous hook back to %s: %s",
			                  path, strerror(errno));
			goto done;
		}
		fsync_dir(dir);
		*did = OEAP_HOOK_DID_RESTORE;
	}
done:
	free(text);
	free(path);
	free(chained);
	return error;
}

char *oeap_hook_state_path(const char *dir)
{
	git_repository *repo = NULL;
	char *path = NULL;
	git_libgit2_init(); /* refcounted: apply and revert call this without main's init */
	if (git_repository_open_ext(&repo, dir, 0, NULL) == 0 && !git_repository_is_bare(repo))
		path = join(git_repository_path(repo), OEAP_HOOK_STATE_FILE);
	git_error_clear();
	git_repository_free(repo);
	git_libgit2_shutdown();
	return path;
}

void oeap_hook_note_state(const char *dir, int verified)
{
	char *path = oeap_hook_state_path(dir);
	oeap_error ignore;
	oeap_error_clear(&ignore);
	/* Only where hook install keeps a record: apply in a checkout without
	 * our hooks writes nothing into its .git. A record that cannot be
	 * written is not worth failing an apply for: post-checkout then speaks
	 * once too often, never too rarely. */
	if (path && access(path, F_OK) == 0) {
		const char *word = verified ? "verified\n" : "not-verified\n";
		oeap_write_atomic(path, word, strlen(word), 0644, &ignore);
	}
	free(path);
}
