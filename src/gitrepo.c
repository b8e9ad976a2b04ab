#include "gitrepo.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int oeap_git_fail(oeap_error *err, const char *where, const char *what)
{
	const git_error *e = git_error_last();
	return oeap_fail(err, OEAP_ERR_GIT, where, 0, "%s: %s", what,
	                 e && e->message ? e->message : "unknown libgit2 error");
}

/* The owner of the repository that holds `dir` (its .git, or a bare
 * repository's directory), found by walking up as git does: 1 when that is
 * another user than this process's. */
static int foreign_repo_owner(const char *dir, uid_t *owner)
{
	char *p = realpath(dir, NULL);
	char probe[PATH_MAX + 16];
	struct stat st;
	int found = 0;
	while (p && !found) {
		snprintf(probe, sizeof(probe), "%s/.git", p);
		found = lstat(probe, &st) == 0;
		if (!found) {
			/* a bare repository: HEAD in the directory itself */
			snprintf(probe, sizeof(probe), "%s/HEAD", p);
			found = lstat(probe, &st) == 0 && stat(p, &st) == 0;
		}
		char *slash = strrchr(p, '/');
		if (found || !slash || !strcmp(p, "/"))
			break;
		slash[slash == p ? 1 : 0] = '\0'; /* "/a" -> "/", "/a/b" -> "/a" */
	}
	free(p);
	if (found && st.st_uid != geteuid()) {
		*owner = st.st_uid;
		return 1;
	}
	return 0;
}

int oeap_repo_open(const char *dir, git_repository **repo, char **prefix, oeap_error *err)
{
	*repo = NULL;
	if (prefix)
		*prefix = NULL;
	int rc = git_repository_open_ext(repo, dir, 0, NULL);
	/* libgit2 1.5 reports git's ownership check as a missing safe.directory
	 * setting (or GIT_EOWNER); what the user needs to know is whose
	 * repository it is and what overrides the check. */
	const git_error *ge = rc ? git_error_last() : NULL;
	uid_t owner;
	if (rc && (rc == GIT_EOWNER || (ge && ge->message && strstr(ge->message, "safe.directory"))) &&
	    foreign_repo_owner(dir, &owner)) {
		git_error_clear();
		return oeap_fail(err, OEAP_ERR_GIT, dir, 0,
		                 "the repository belongs to uid %u, not to you (uid %u): git's ownership check refuses "
		                 "another user's repository; run as its owner, or trust it with "
		                 "`git config --global --add safe.directory <its top directory>`",
		                 (unsigned)owner, (unsigned)geteuid());
	}
	if (rc)
		return oeap_git_fail(err, dir, "not a git repository (or a parent of one)");
	if (!prefix)
		return 0;
	const char *wd = git_repository_workdir(*repo);
	char *real = realpath(dir, NULL);
	char *wreal = wd ? realpath(wd, NULL) : NULL;
	const char *rest = "";
	if (real && wreal) {
		size_t n = strlen(wreal);
		if (strncmp(real, wreal, n) == 0 && (real[n] == '/' || real[n] == '\0'))
			rest = real[n] == '/' ? real + n + 1 : "";
	}
	size_t rl = strlen(rest);
	*prefix = malloc(rl + 2);
	if (*prefix) {
		memcpy(*prefix, rest, rl);
		if (rl)
			(*prefix)[rl++] = '/';
		(*prefix)[rl] = '\0';
	}
	free(real);
	free(wreal);
	if (!*prefix) {
		git_repository_free(*repo);
		*repo = NULL;
		return oeap_fail(err, OEAP_ERR_INTERNAL, dir, 0, "out of memory");
	}
	return 0;
}

char *oeap_repo_toplevel(git_repository *repo)
{
	const char *wd = git_repository_workdir(repo);
	if (!wd)
		return NULL;
	char *top = strdup(wd);
	size_t n = top ? strlen(top) : 0;
	while (top && n > 1 && top[n - 1] == '/')
		top[--n] = '\0';
	return top;
}

int oeap_tree_blob(const git_tree *tree, const char *path, git_oid *id, oeap_error *err)
{
	git_tree_entry *e = NULL;
	int rc = git_tree_entry_bypath(&e, tree, path);
	if (rc == GIT_ENOTFOUND) {
		git_error_clear();
		return 1;
	}
	if (rc)
		return oeap_git_fail(err, path, "cannot read the tree");
	int is_blob = git_tree_entry_type(e) == GIT_OBJECT_BLOB;
	if (is_blob)
		git_oid_cpy(id, git_tree_entry_id(e));
	git_tree_entry_free(e);
	return is_blob ? 0 : 1;
}

int oeap_blob_read(git_repository *repo, const git_oid *id, char **data, size_t *len, oeap_error *err)
{
	git_blob *blob = NULL;
	if (git_blob_lookup(&blob, repo, id))
		return oeap_git_fail(err, "blob", "cannot read the file's blob");
	git_object_size_t n = git_blob_rawsize(blob);
	char *d = malloc((size_t)n + 1);
	if (!d) {
		git_blob_free(blob);
		return oeap_fail(err, OEAP_ERR_INTERNAL, "blob", 0, "out of memory");
	}
	memcpy(d, git_blob_rawcontent(blob), (size_t)n);
	d[n] = '\0';
	git_blob_free(blob);
	*data = d;
	*len = (size_t)n;
	return 0;
}

int oeap_commit_blob(git_repository *repo, const git_commit *commit, const char *path, git_oid *id,
                     char **data, size_t *len, oeap_error *err)
{
	git_tree *tree = NULL;
	if (git_commit_tree(&tree, commit))
		return oeap_git_fail(err, path, "cannot read the commit's tree");
	int rc = oeap_tree_blob(tree, path, id, err);
	git_tree_free(tree);
	if (rc == 0 && data)
		rc = oeap_blob_read(repo, id, data, len, err);
	return rc;
}

int oeap_resolve_commit(git_repository *repo, const char *rev, git_commit **out, oeap_error *err)
{
	git_object *obj = NULL;
	*out = NULL;
	if (git_revparse_single(&obj, repo, rev)) {
		if ((!strcmp(rev, "HEAD") || !strncmp(rev, "HEAD~", 5) || !strncmp(rev, "HEAD^", 5) ||
		     !strncmp(rev, "@", 1)) &&
		    git_repository_head_unborn(repo) == 1) {
			git_error_clear();
			return oeap_fail(err, OEAP_ERR_GIT, rev, 0,
			                 "HEAD is unborn: the current branch has no commits yet, so there is nothing to "
			                 "read");
		}
		return oeap_git_fail(err, rev, "not a revision of this repository");
	}
	int rc = git_object_peel((git_object **)out, obj, GIT_OBJECT_COMMIT);
	git_object_free(obj);
	if (rc)
		return oeap_git_fail(err, rev, "does not name a commit");
	return 0;
}
