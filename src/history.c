#include "history.h"

#include "binding.h"

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

static char *dup_str(const char *s)
{
	return s ? strdup(s) : NULL;
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

/* The blob at `path` in `tree`: 0 found, 1 absent (or not a file), -1 error. */
static int tree_blob(const git_tree *tree, const char *path, git_oid *id, oeap_error *err)
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

static int read_blob(git_repository *repo, const git_oid *id, char **data, size_t *len, oeap_error *err)
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
	int rc = tree_blob(tree, path, id, err);
	git_tree_free(tree);
	if (rc == 0 && data)
		rc = read_blob(repo, id, data, len, err);
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

void oeap_revs_free(oeap_revs *revs)
{
	for (size_t i = 0; i < revs->n; i++) {
		free(revs->items[i].subject);
		free(revs->items[i].path);
		free(revs->items[i].renamed_from);
	}
	free(revs->items);
	memset(revs, 0, sizeof(*revs));
}

/* ---- a small map from object ids to an index or a string ---------------- */

typedef struct oid_map {
	git_oid *keys;
	size_t *vals;
	unsigned char *used;
	size_t cap, n;
} oid_map;

static size_t oid_hash(const git_oid *id)
{
	size_t h;
	memcpy(&h, id->id, sizeof(h)); /* object ids are already uniformly distributed */
	return h;
}

static int oid_map_grow(oid_map *m)
{
	oid_map bigger = {0};
	bigger.cap = m->cap ? m->cap * 2 : 256;
	bigger.keys = calloc(bigger.cap, sizeof(git_oid));
	bigger.vals = calloc(bigger.cap, sizeof(size_t));
	bigger.used = calloc(bigger.cap, 1);
	if (!bigger.keys || !bigger.vals || !bigger.used) {
		free(bigger.keys);
		free(bigger.vals);
		free(bigger.used);
		return -1;
	}
	for (size_t i = 0; i < m->cap; i++) {
		if (!m->used[i])
			continue;
		size_t j = oid_hash(&m->keys[i]) & (bigger.cap - 1);
		while (bigger.used[j])
			j = (j + 1) & (bigger.cap - 1);
		bigger.used[j] = 1;
		bigger.keys[j] = m->keys[i];
		bigger.vals[j] = m->vals[i];
	}
	bigger.n = m->n;
	free(m->keys);
	free(m->vals);
	free(m->used);
	*m = bigger;
	return 0;
}

/* The slot of `id`, or where it would go. */
static size_t oid_map_slot(const oid_map *m, const git_oid *id)
{
	size_t j = oid_hash(id) & (m->cap - 1);
	while (m->used[j] && !git_oid_equal(&m->keys[j], id))
		j = (j + 1) & (m->cap - 1);
	return j;
}

static const size_t *oid_map_get(const oid_map *m, const git_oid *id)
{
	if (!m->cap)
		return NULL;
	size_t j = oid_map_slot(m, id);
	return m->used[j] ? &m->vals[j] : NULL;
}

/* Sets `id` -> `val` unless `id` is there already. Returns -1 on OOM. */
static int oid_map_put_new(oid_map *m, const git_oid *id, size_t val)
{
	if ((m->n + 1) * 2 > m->cap && oid_map_grow(m))
		return -1;
	size_t j = oid_map_slot(m, id);
	if (m->used[j])
		return 0;
	m->used[j] = 1;
	m->keys[j] = *id;
	m->vals[j] = val;
	m->n++;
	return 0;
}

static void oid_map_free(oid_map *m)
{
	free(m->keys);
	free(m->vals);
	free(m->used);
	memset(m, 0, sizeof(*m));
}

/* Paths met during a walk, each stored once; the map holds their indexes. */
typedef struct path_pool {
	char **items;
	size_t n;
} path_pool;

static long pool_intern(path_pool *p, const char *s)
{
	for (size_t i = 0; i < p->n; i++)
		if (!strcmp(p->items[i], s))
			return (long)i;
	char **grown = realloc(p->items, (p->n + 1) * sizeof(*grown));
	if (!grown)
		return -1;
	p->items = grown;
	if (!(p->items[p->n] = strdup(s)))
		return -1;
	return (long)p->n++;
}

static void pool_free(path_pool *p)
{
	for (size_t i = 0; i < p->n; i++)
		free(p->items[i]);
	free(p->items);
	memset(p, 0, sizeof(*p));
}

/* ---- revisions ------------------------------------------------------------ */

static int revs_has(const oeap_revs *revs, const git_oid *id)
{
	for (size_t i = 0; i < revs->n; i++)
		if (git_oid_equal(&revs->items[i].commit, id))
			return 1;
	return 0;
}

static int revs_push(git_repository *repo, oeap_revs *revs, const git_commit *c, const char *path,
                     const char *renamed_from, oeap_rev_kind kind, int has_blob, const git_oid *blob,
                     oeap_error *err)
{
	if (revs->n == revs->cap) {
		size_t cap = revs->cap ? revs->cap * 2 : 32;
		oeap_rev *grown = realloc(revs->items, cap * sizeof(*grown));
		if (!grown)
			return oeap_fail(err, OEAP_ERR_INTERNAL, "check", 0, "out of memory");
		revs->items = grown;
		revs->cap = cap;
	}
	oeap_rev *r = &revs->items[revs->n];
	memset(r, 0, sizeof(*r));
	git_oid_cpy(&r->commit, git_commit_id(c));
	git_buf sb = GIT_BUF_INIT;
	if (git_object_short_id(&sb, (const git_object *)c) == 0 && sb.size < sizeof(r->short_id))
		memcpy(r->short_id, sb.ptr, sb.size + 1);
	else
		git_oid_tostr(r->short_id, 8, git_commit_id(c));
	git_buf_dispose(&sb);
	git_error_clear();
	time_t t = (time_t)git_commit_time(c) + (time_t)git_commit_time_offset(c) * 60;
	struct tm tm;
	if (gmtime_r(&t, &tm))
		strftime(r->date, sizeof(r->date), "%Y-%m-%d", &tm);
	r->time = git_commit_time(c);
	const char *summary = git_commit_summary((git_commit *)c);
	r->subject = dup_str(summary ? summary : "");
	r->path = dup_str(path);
	r->renamed_from = dup_str(renamed_from);
	r->kind = kind;
	r->has_blob = has_blob;
	if (has_blob)
		git_oid_cpy(&r->blob, blob);
	if (!r->subject || !r->path || (renamed_from && !r->renamed_from)) {
		free(r->subject);
		free(r->path);
		free(r->renamed_from);
		return oeap_fail(err, OEAP_ERR_INTERNAL, "check", 0, "out of memory");
	}
	revs->n++;
	(void)repo;
	return 0;
}

/*
 * `path` exists in `tree` but not in `ptree`: was it renamed (or copied with
 * the original removed) from another path? *old is that path (caller frees)
 * or NULL.
 */
static int find_rename(git_repository *repo, git_tree *ptree, git_tree *tree, const char *path, char **old,
                       oeap_error *err)
{
	git_diff *diff = NULL;
	git_diff_options opts;
	git_diff_find_options fo;
	*old = NULL;
	git_diff_options_init(&opts, GIT_DIFF_OPTIONS_VERSION);
	git_diff_find_options_init(&fo, GIT_DIFF_FIND_OPTIONS_VERSION);
	if (git_diff_tree_to_tree(&diff, repo, ptree, tree, &opts))
		return oeap_git_fail(err, path, "cannot diff trees to follow a rename");
	fo.flags = GIT_DIFF_FIND_RENAMES;
	if (git_diff_find_similar(diff, &fo)) {
		git_diff_free(diff);
		return oeap_git_fail(err, path, "cannot look for renames");
	}
	size_t n = git_diff_num_deltas(diff);
	for (size_t i = 0; i < n; i++) {
		const git_diff_delta *d = git_diff_get_delta(diff, i);
		if (d->status == GIT_DELTA_RENAMED && d->new_file.path && !strcmp(d->new_file.path, path)) {
			*old = dup_str(d->old_file.path);
			break;
		}
	}
	git_diff_free(diff);
	return 0;
}

static int add_named(git_repository *repo, const char *spec, const char *path, oeap_revs *revs,
                     oeap_error *err)
{
	git_commit *c = NULL;
	git_oid blob;
	if (oeap_resolve_commit(repo, spec, &c, err))
		return -1;
	int rc = 0;
	if (!revs_has(revs, git_commit_id(c))) {
		int has = oeap_commit_blob(repo, c, path, &blob, NULL, NULL, err);
		rc = has < 0 ? -1 : revs_push(repo, revs, c, path, NULL, OEAP_REV_NAMED, has == 0, &blob, err);
	}
	git_commit_free(c);
	return rc;
}

int oeap_revs_add(git_repository *repo, const char *spec, const char *path, size_t max, oeap_revs *revs,
                  oeap_error *err)
{
	return oeap_revs_add_counted(repo, spec, path, max, revs, NULL, err);
}

/* What the walk knows about the file at one commit and at its first parent. */
typedef struct walk_step {
	const char *path;  /* the commit's name for the file (in the walk's pool) */
	int has;           /* tree_blob's answer there: 0 when the commit has it */
	git_oid blob;
	const char *ppath; /* the first parent's name for it: `path`, or the name before a rename */
	int phas;          /* 1 when the first parent has it */
	git_oid pblob;
} walk_step;

/*
 * The parents of `c` (whose tree is `tree`): each one's name for the file is
 * recorded in `paths`, for when the walk reaches that parent (the name before
 * a rename when this commit renamed it), and the first parent's side fills
 * st->ppath, st->phas and st->pblob. A root commit has no parent side.
 */
static int walk_parents(git_repository *repo, git_commit *c, git_tree *tree, walk_step *st, path_pool *pool,
                        oid_map *paths, const char *what, oeap_error *err)
{
	git_commit *parent = NULL;
	git_tree *ptree = NULL;
	char *old = NULL;
	int error = 0;
	unsigned np = git_commit_parentcount(c);
	st->phas = 0;
	st->ppath = st->path;
	for (unsigned i = 0; i < np; i++) {
		const char *pp = st->path;
		int ph;
		git_oid pb;
		if (git_commit_parent(&parent, c, i) || git_commit_tree(&ptree, parent)) {
			error = oeap_git_fail(err, what, "cannot read a parent commit");
			goto done;
		}
		if ((ph = tree_blob(ptree, st->path, &pb, err)) < 0) {
			error = -1;
			goto done;
		}
		if (ph == 1 && st->has == 0) {
			if (find_rename(repo, ptree, tree, st->path, &old, err)) {
				error = -1;
				goto done;
			}
			if (old) {
				long k = pool_intern(pool, old);
				if (k < 0) {
					error = oeap_fail(err, OEAP_ERR_INTERNAL, "check", 0, "out of memory");
					goto done;
				}
				pp = pool->items[k];
				if ((ph = tree_blob(ptree, pp, &pb, err)) < 0) {
					error = -1;
					goto done;
				}
				free(old);
				old = NULL;
			}
		}
		if (i == 0) {
			st->phas = ph == 0;
			st->pblob = pb;
			st->ppath = pp;
		}
		long k = pool_intern(pool, pp);
		if (k < 0 || oid_map_put_new(paths, git_commit_id(parent), (size_t)k)) {
			error = oeap_fail(err, OEAP_ERR_INTERNAL, "check", 0, "out of memory");
			goto done;
		}
		git_tree_free(ptree);
		git_commit_free(parent);
		ptree = NULL;
		parent = NULL;
	}
done:
	free(old);
	git_tree_free(ptree);
	git_commit_free(parent);
	return error;
}

/* Did the commit touch the file (against its first parent)? 1 with *kind set, else 0. */
static int walk_touched(const walk_step *st, oeap_rev_kind *kind)
{
	*kind = OEAP_REV_CHANGED;
	if (st->has == 0 && !st->phas)
		return 1; /* added here (or a root commit that has it) */
	if (st->has == 0)
		return !git_oid_equal(&st->blob, &st->pblob) || strcmp(st->path, st->ppath) != 0;
	if (st->phas) {
		*kind = OEAP_REV_DELETED;
		return 1;
	}
	return 0;
}

/* A walk from HEAD (spec NULL) or over the range `spec`; refuses what it cannot walk, naming why. */
static int walk_start(git_repository *repo, const char *spec, const char *path, git_revwalk **walk,
                      oeap_error *err)
{
	const char *what = spec ? spec : "HEAD";
	if (!spec && git_repository_head_unborn(repo) == 1) {
		git_error_clear();
		return oeap_fail(err, OEAP_ERR_GIT, "HEAD", 0,
		                 "HEAD is unborn: the current branch has no commits yet, so no revision touched %s",
		                 path);
	}
	if (spec && strstr(spec, "..."))
		return oeap_fail(err, OEAP_ERR_USAGE, spec, 0,
		                 "symmetric ranges (A...B) are not supported: give A..B and B..A");
	if (git_revwalk_new(walk, repo) || git_revwalk_sorting(*walk, GIT_SORT_TOPOLOGICAL | GIT_SORT_TIME))
		return oeap_git_fail(err, what, "cannot walk the history");
	if (spec ? git_revwalk_push_range(*walk, spec) : git_revwalk_push_head(*walk))
		return oeap_git_fail(err, what, spec ? "not a range of this repository" : "cannot read HEAD");
	return 0;
}

int oeap_revs_add_counted(git_repository *repo, const char *spec, const char *path, size_t max, oeap_revs *revs,
                          size_t *selected, oeap_error *err)
{
	if (selected)
		*selected = 0;
	if (spec && !strstr(spec, "..")) {
		if (selected)
			*selected = 1;
		return add_named(repo, spec, path, revs, err);
	}

	int error = 0;
	git_revwalk *walk = NULL;
	oid_map paths = {0};
	path_pool pool = {0};
	git_commit *c = NULL;
	git_tree *tree = NULL;
	size_t added = 0;
	const char *what = spec ? spec : "HEAD";

	if ((error = walk_start(repo, spec, path, &walk, err)))
		goto done;
	long start = pool_intern(&pool, path);
	if (start < 0) {
		error = oeap_fail(err, OEAP_ERR_INTERNAL, "check", 0, "out of memory");
		goto done;
	}

	git_oid id;
	int rc;
	while ((rc = git_revwalk_next(&id, walk)) == 0) {
		/* Topological order: every child came first and told us this
		 * commit's name for the file; a tip has the name we were given. */
		const size_t *pi = oid_map_get(&paths, &id);
		walk_step st;
		memset(&st, 0, sizeof(st));
		st.path = pool.items[pi ? *pi : (size_t)start];
		if (git_commit_lookup(&c, repo, &id) || git_commit_tree(&tree, c)) {
			error = oeap_git_fail(err, what, "cannot read a commit of the walk");
			goto done;
		}
		if ((st.has = tree_blob(tree, st.path, &st.blob, err)) < 0 ||
		    walk_parents(repo, c, tree, &st, &pool, &paths, what, err)) {
			error = -1;
			goto done;
		}
		oeap_rev_kind kind;
		int touched = walk_touched(&st, &kind);
		if (touched && selected)
			++*selected; /* also when an earlier argument listed it already */
		if (touched && !revs_has(revs, &id)) {
			const char *from = st.has == 0 && st.phas && strcmp(st.path, st.ppath) ? st.ppath : NULL;
			if (revs_push(repo, revs, c, st.path, from, kind, st.has == 0, &st.blob, err)) {
				error = -1;
				goto done;
			}
			if (max && ++added >= max)
				break;
		}
		git_tree_free(tree);
		git_commit_free(c);
		tree = NULL;
		c = NULL;
	}
	if (rc != 0 && rc != GIT_ITEROVER) {
		error = oeap_git_fail(err, what, "the history walk failed");
		goto done;
	}
	git_error_clear();
done:
	git_tree_free(tree);
	git_commit_free(c);
	git_revwalk_free(walk);
	oid_map_free(&paths);
	pool_free(&pool);
	return error;
}

/* The index in `paths` of the first alternative `commit`'s tree holds; -1 when none, -2 on error. */
static int first_alt(git_repository *repo, const git_oid *commit, char *const *paths, git_oid *blob,
                     oeap_error *err)
{
	git_commit *c = NULL;
	git_tree *tree = NULL;
	int found = -1;
	if (git_commit_lookup(&c, repo, commit) || git_commit_tree(&tree, c)) {
		git_commit_free(c);
		oeap_git_fail(err, "check", "cannot read a commit's tree");
		return -2;
	}
	for (int i = 0; paths[i] && found == -1; i++) {
		int rc = tree_blob(tree, paths[i], blob, err);
		if (rc < 0)
			found = -2;
		else if (rc == 0)
			found = i;
	}
	git_tree_free(tree);
	git_commit_free(c);
	return found;
}

char *oeap_commit_target(const git_commit *commit, const char *prefix, const char *sep, char *const *alts,
                         const char *fallback)
{
	git_tree *tree = NULL;
	const char *pick = fallback;
	oeap_error ignore;
	char *path = NULL;
	int found = 0;
	oeap_error_clear(&ignore);
	if (git_commit_tree(&tree, commit) == 0)
		for (size_t i = 0; alts && alts[i] && !found; i++) {
			git_oid id;
			free(path);
			if (!(path = malloc(strlen(prefix) + strlen(sep) + strlen(alts[i]) + 1)))
				break;
			sprintf(path, "%s%s%s", prefix, sep, alts[i]);
			if ((found = tree_blob(tree, path, &id, &ignore) == 0))
				pick = alts[i];
		}
	git_error_clear();
	git_tree_free(tree);
	free(path);
	if (!(path = malloc(strlen(prefix) + strlen(sep) + strlen(pick) + 1)))
		return NULL;
	sprintf(path, "%s%s%s", prefix, sep, pick);
	return path;
}

typedef struct alt_rev {
	oeap_rev rev;
	size_t walk, index; /* which alternative's walk found it, and where: the tie-breaks */
} alt_rev;

static int alt_rev_cmp(const void *a, const void *b)
{
	const alt_rev *x = a, *y = b;
	if (x->rev.time != y->rev.time)
		return x->rev.time > y->rev.time ? -1 : 1; /* newest first, as one walk lists them */
	if (x->walk != y->walk)
		return x->walk < y->walk ? -1 : 1;
	return x->index < y->index ? -1 : x->index > y->index;
}

static void rev_free(oeap_rev *r)
{
	free(r->subject);
	free(r->path);
	free(r->renamed_from);
}

int oeap_revs_add_alts(git_repository *repo, const char *spec, char *const *paths, size_t max, oeap_revs *revs,
                       size_t *selected, oeap_error *err)
{
	if (!paths[1])
		return oeap_revs_add_counted(repo, spec, paths[0], max, revs, selected, err);
	if (selected)
		*selected = 0;
	if (spec && !strstr(spec, "..")) {
		git_commit *c = NULL;
		git_oid blob;
		if (oeap_resolve_commit(repo, spec, &c, err))
			return -1;
		int k = first_alt(repo, git_commit_id(c), paths, &blob, err);
		git_commit_free(c);
		if (k == -2)
			return -1;
		if (selected)
			*selected = 1;
		return add_named(repo, spec, paths[k < 0 ? 0 : k], revs, err);
	}
	int error = 0;
	alt_rev *all = NULL;
	size_t n = 0, cap = 0;
	oeap_revs one = {0};
	/* One walk per alternative (each follows its file through renames as a
	 * single target's walk does), then one list in history order. */
	for (size_t w = 0; paths[w] && !error; w++) {
		memset(&one, 0, sizeof(one));
		if (oeap_revs_add_counted(repo, spec, paths[w], 0, &one, NULL, err)) {
			error = -1;
			break;
		}
		size_t i = 0;
		for (; i < one.n; i++) {
			oeap_rev *r = &one.items[i];
			git_oid blob;
			int k = first_alt(repo, &r->commit, paths, &blob, err), dup = 0;
			if (k == -2) {
				error = -1;
				break;
			}
			for (size_t j = 0; j < n && !dup; j++)
				dup = git_oid_equal(&all[j].rev.commit, &r->commit);
			/* A preferred alternative exists there: that is the target, and
			 * this walk's file is not (its own walk lists the commit if it
			 * touched the target). */
			if (dup || (k >= 0 && (size_t)k < w)) {
				rev_free(r);
				continue;
			}
			if (n == cap) {
				alt_rev *grown = realloc(all, (cap = cap ? cap * 2 : 32) * sizeof(*grown));
				if (!grown) {
					error = oeap_fail(err, OEAP_ERR_INTERNAL, "check", 0, "out of memory");
					break;
				}
				all = grown;
			}
			all[n].rev = *r;
			all[n].walk = w;
			all[n].index = i;
			n++;
		}
		/* Stopped by an error at i: the entries before were moved into `all` or freed. */
		for (; i < one.n; i++)
			rev_free(&one.items[i]);
		free(one.items);
	}
	if (!error && n)
		qsort(all, n, sizeof(*all), alt_rev_cmp);
	size_t i = 0;
	for (; i < n && !error; i++) {
		if (max && i >= max)
			break;
		if (selected)
			++*selected;
		if (revs_has(revs, &all[i].rev.commit)) {
			rev_free(&all[i].rev);
			continue;
		}
		if (revs->n == revs->cap) {
			size_t c2 = revs->cap ? revs->cap * 2 : 32;
			oeap_rev *grown = realloc(revs->items, c2 * sizeof(*grown));
			if (!grown) {
				error = oeap_fail(err, OEAP_ERR_INTERNAL, "check", 0, "out of memory");
				break;
			}
			revs->items = grown;
			revs->cap = c2;
		}
		revs->items[revs->n++] = all[i].rev;
	}
	for (; i < n; i++)
		rev_free(&all[i].rev);
	free(all);
	return error;
}

int oeap_range_why_empty(git_repository *repo, const char *spec, const char *path, char *why, size_t cap)
{
	git_revspec rs;
	git_commit *from = NULL, *to = NULL;
	git_oid blob;
	oeap_error ignore;
	int rc = 0;
	oeap_error_clear(&ignore);
	memset(&rs, 0, sizeof(rs));
	snprintf(why, cap, "no commit in %s touched %s", spec, path);
	if (git_revparse(&rs, repo, spec) || !(rs.flags & GIT_REVSPEC_RANGE)) {
		git_error_clear();
		goto done;
	}
	/* "A.." leaves `to` NULL: it is HEAD. */
	if (git_object_peel((git_object **)&from, rs.from, GIT_OBJECT_COMMIT) ||
	    (rs.to ? git_object_peel((git_object **)&to, rs.to, GIT_OBJECT_COMMIT)
	           : oeap_resolve_commit(repo, "HEAD", &to, &ignore))) {
		git_error_clear();
		goto done;
	}
	const git_oid *a = git_commit_id(from), *b = git_commit_id(to);
	if (git_oid_equal(a, b))
		snprintf(why, cap, "%s is empty: both ends are the same commit %.12s", spec, git_oid_tostr_s(b));
	else if (git_graph_descendant_of(repo, a, b) == 1)
		snprintf(why, cap, "%s is reversed: its end is an ancestor of its start, so it holds no commit "
		         "(the other way round?)", spec);
	else if ((rc = oeap_commit_blob(repo, to, path, &blob, NULL, NULL, &ignore)) == 1)
		snprintf(why, cap, "%s: the range's end has no %s (moved away or deleted before it?), and no commit "
		         "in the range touched it", spec, path);
	else if (git_graph_descendant_of(repo, b, a) == 1)
		snprintf(why, cap, "no commit in %s touched %s", spec, path);
	git_error_clear();
	rc = 0;
done:
	git_commit_free(from);
	git_commit_free(to);
	git_object_free(rs.from);
	git_object_free(rs.to);
	return rc;
}

/* ---- the dry run ------------------------------------------------------------ */

const char *oeap_land_name(oeap_land l)
{
	switch (l) {
	case OEAP_LAND_LANDS: return "lands";
	case OEAP_LAND_APPLIED: return "applied";
	case OEAP_LAND_FAILS: return "fails";
	case OEAP_LAND_MISSING: return "missing";
	case OEAP_LAND_DELETED: return "deleted";
	}
	return "unknown";
}

static double now_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* oeap_check_bytes() with the parse of `buf` made already (or NULL). */
static int check_parsed(const oeap_patchdef *def, const char *buf, size_t len, const char *what,
                        const pysource *parsed, oeap_check_result *res)
{
	oeap_outcome o;
	memset(res, 0, sizeof(*res));
	double t0 = now_seconds();
	/* apply is the whole pipeline: anchors resolved, result read back with
	 * verify's own checks; a failure names the anchor or check and why. */
	if (oeap_apply_bytes_parsed(def, buf, len, what, 0, parsed, &o, &res->err) == 0) {
		res->land = o.before == OEAP_STATE_APPLIED ? OEAP_LAND_APPLIED : OEAP_LAND_LANDS;
		res->before = o.before;
		oeap_outcome_free(&o);
	} else {
		res->land = OEAP_LAND_FAILS;
		if (res->err.kind == OEAP_ERR_INTERNAL && !strcmp(res->err.message, "out of memory"))
			return -1;
	}
	res->seconds = now_seconds() - t0;
	return 0;
}

int oeap_check_bytes(const oeap_patchdef *def, const char *buf, size_t len, const char *what,
                     oeap_check_result *res)
{
	return check_parsed(def, buf, len, what, NULL, res);
}

/* ---- incremental parsing from one revision to the next -------------------- */

/* Where each line starts: line k (0-based) at off[k], off[nlines] == len. */
typedef struct line_index {
	size_t *off;
	size_t n; /* lines */
} line_index;

static int line_index_build(const char *buf, size_t len, line_index *li)
{
	size_t lines = 1, k = 1;
	for (const char *p = buf; (p = memchr(p, '\n', len - (size_t)(p - buf))) != NULL; p++)
		lines++;
	if (!(li->off = malloc((lines + 1) * sizeof(*li->off))))
		return -1;
	li->off[0] = 0;
	for (const char *p = buf; (p = memchr(p, '\n', len - (size_t)(p - buf))) != NULL; p++)
		li->off[k++] = (size_t)(p - buf) + 1;
	/* the last line (after the last '\n') ends at len; with a final '\n' it is empty */
	li->off[k] = len;
	li->n = lines;
	return 0;
}

/* Byte offset of where a hunk's lines start (1-based `start`, `count` lines).
 * A hunk of no lines sits after line `start` (unified diff's convention). */
static size_t hunk_offset(const line_index *li, int start, int count)
{
	size_t line = count ? (size_t)(start > 0 ? start - 1 : 0) : (size_t)start;
	return li->off[line < li->n ? line : li->n];
}

typedef struct edit_list {
	const char *a, *b;
	size_t alen, blen;
	line_index la, lb;
	pysource_edit *items;
	size_t n, cap;
	int oom;
} edit_list;

static int on_hunk(const git_diff_delta *d, const git_diff_hunk *h, void *payload)
{
	edit_list *l = payload;
	(void)d;
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 16;
		pysource_edit *p = realloc(l->items, cap * sizeof(*p));
		if (!p) {
			l->oom = 1;
			return -1;
		}
		l->items = p;
		l->cap = cap;
	}
	pysource_edit *e = &l->items[l->n++];
	e->old_start = hunk_offset(&l->la, h->old_start, h->old_lines);
	e->old_end = h->old_lines ? hunk_offset(&l->la, h->old_start + h->old_lines, 1) : e->old_start;
	e->new_start = hunk_offset(&l->lb, h->new_start, h->new_lines);
	e->new_end = h->new_lines ? hunk_offset(&l->lb, h->new_start + h->new_lines, 1) : e->new_start;
	/* Lines are what the diff compares; the parser wants the bytes that
	 * changed: a one-character fix is then a one-character edit. */
	while (e->old_start < e->old_end && e->new_start < e->new_end && l->a[e->old_start] == l->b[e->new_start])
		e->old_start++, e->new_start++;
	while (e->old_end > e->old_start && e->new_end > e->new_start && l->a[e->old_end - 1] == l->b[e->new_end - 1])
		e->old_end--, e->new_end--;
	return 0;
}

/* 1 when the edits, made to `a`, give exactly `b`: ascending, not
 * overlapping, and equal bytes around and between them. */
static int edits_make(const edit_list *l)
{
	size_t ao = 0, bo = 0;
	for (size_t i = 0; i < l->n; i++) {
		const pysource_edit *e = &l->items[i];
		if (e->old_start < ao || e->new_start < bo || e->old_end < e->old_start || e->new_end < e->new_start ||
		    e->old_end > l->alen || e->new_end > l->blen || e->old_start - ao != e->new_start - bo ||
		    memcmp(l->a + ao, l->b + bo, e->old_start - ao) != 0)
			return 0;
		ao = e->old_end;
		bo = e->new_end;
	}
	return l->alen - ao == l->blen - bo && memcmp(l->a + ao, l->b + bo, l->alen - ao) == 0;
}

/*
 * The edits that turn `a` into `b`: the hunks of libgit2's line diff
 * (no context lines), each narrowed to the bytes that differ. A revision
 * often changes a few places of a long file; one edit from the first
 * difference to the last would make tree-sitter re-parse everything between
 * them. The diff runs only over the lines between the common prefix and
 * suffix (its cost then follows the change, not the file). The list is
 * checked to make `b` out of `a` before it is used; when it does not (or
 * the diff fails), the one edit over the differing middle is taken.
 */
static int diff_edits(const char *a, size_t alen, const char *b, size_t blen, edit_list *l)
{
	git_diff_options opts;
	size_t pre = 0, suf = 0;
	memset(l, 0, sizeof(*l));
	while (pre < alen && pre < blen && a[pre] == b[pre])
		pre++;
	while (suf < alen - pre && suf < blen - pre && a[alen - 1 - suf] == b[blen - 1 - suf])
		suf++;
	if (!(l->items = malloc(sizeof(*l->items))))
		return -1;
	l->cap = 1;
	if (pre == alen && pre == blen)
		return 0; /* the same bytes: nothing to edit */
	/* The middle, widened to whole lines: from the start of the line of the
	 * first difference to the end of the line of the last. */
	size_t from = pre, a_to = alen - suf;
	while (from > 0 && a[from - 1] != '\n')
		from--;
	const char *nl = a_to < alen ? memchr(a + a_to, '\n', alen - a_to) : NULL;
	if (nl)
		a_to = (size_t)(nl - a) + 1;
	else
		a_to = alen;
	size_t b_to = a_to + blen - alen; /* the same suffix follows in b */
	l->a = a + from;
	l->b = b + from;
	l->alen = a_to - from;
	l->blen = b_to - from;
	git_diff_options_init(&opts, GIT_DIFF_OPTIONS_VERSION);
	opts.context_lines = 0;
	opts.interhunk_lines = 0;
	opts.flags = GIT_DIFF_FORCE_TEXT;
	if (line_index_build(l->a, l->alen, &l->la) || line_index_build(l->b, l->blen, &l->lb))
		return -1;
	int rc = git_diff_buffers(l->a, l->alen, NULL, l->b, l->blen, NULL, &opts, NULL, NULL, on_hunk, NULL, l);
	if (l->oom)
		return -1;
	for (size_t i = 0; i < l->n; i++) {
		l->items[i].old_start += from;
		l->items[i].old_end += from;
		l->items[i].new_start += from;
		l->items[i].new_end += from;
	}
	l->a = a;
	l->b = b;
	l->alen = alen;
	l->blen = blen;
	if (rc || !edits_make(l)) {
		git_error_clear();
		l->items[0] = (pysource_edit){pre, alen - suf, pre, blen - suf};
		l->n = 1;
	}
	return 0;
}

int oeap_text_edits(const char *a, size_t alen, const char *b, size_t blen, pysource_edit **edits, size_t *n)
{
	edit_list l;
	int rc = diff_edits(a, alen, b, blen, &l);
	free(l.la.off);
	free(l.lb.off);
	if (rc) {
		free(l.items);
		return -1;
	}
	*edits = l.items;
	*n = l.n;
	return 0;
}

/*
 * The parse check hands to apply for `data`: incremental from the previous
 * revision's parse `prev` when there is one. NULL (*out) when it does not
 * parse, for whatever reason, or is over the size limit: apply then parses on
 * its own and names the error exactly as for any file. -1 only when memory
 * ran out for the diff.
 */
static int parse_from(const pysource *prev, const char *data, size_t len, pysource **out)
{
	oeap_error ignore;
	pysource_edit *edits = NULL;
	size_t n = 0;
	*out = NULL;
	if (pysource_check_size(len, "", NULL))
		return 0;
	if (!prev) {
		pysource_parse(data, len, "", out, &ignore);
		return 0;
	}
	int rc = oeap_text_edits(prev->buf, prev->len, data, len, &edits, &n);
	if (!rc)
		pysource_parse_edits(prev, data, len, edits, n, "", out, &ignore);
	free(edits);
	return rc;
}

int oeap_check_revs(git_repository *repo, const oeap_patchdef *def, const oeap_revs *revs,
                    oeap_check_result *results, oeap_error *err)
{
	int error = 0;
	oid_map seen = {0}; /* blob id -> index of the first revision with it */
	/* The last parse that succeeded, and the bytes it borrows: the next
	 * revision (its neighbour in the walk) is parsed from its tree. */
	pysource *prev = NULL;
	char *prev_data = NULL;
	const char *prev_path = NULL;
	for (size_t i = 0; i < revs->n; i++) {
		const oeap_rev *r = &revs->items[i];
		oeap_check_result *res = &results[i];
		memset(res, 0, sizeof(*res));
		if (!r->has_blob) {
			res->land = r->kind == OEAP_REV_DELETED ? OEAP_LAND_DELETED : OEAP_LAND_MISSING;
			continue;
		}
		const size_t *at = oid_map_get(&seen, &r->blob);
		if (at) {
			*res = results[*at];
			res->seconds = 0;
			continue;
		}
		char *data = NULL;
		size_t len = 0;
		if (read_blob(repo, &r->blob, &data, &len, err)) {
			error = -1;
			break;
		}
		pysource *src = NULL;
		double t0 = now_seconds();
		/* Another file (the target moved between alternatives): nothing of
		 * the last tree is worth reusing, a parse from scratch is cheaper
		 * than diffing two unrelated texts. */
		if (prev && prev_path && strcmp(prev_path, r->path) != 0) {
			pysource_free(prev);
			free(prev_data);
			prev = NULL;
			prev_data = NULL;
		}
		int rc = parse_from(prev, data, len, &src);
		if (!rc)
			rc = check_parsed(def, data, len, r->path, src, res);
		res->seconds = now_seconds() - t0;
		if (src) {
			pysource_free(prev);
			free(prev_data);
			prev = src;
			prev_data = data;
			prev_path = r->path;
		} else {
			free(data);
		}
		if (rc || oid_map_put_new(&seen, &r->blob, i)) {
			error = oeap_fail(err, OEAP_ERR_INTERNAL, "check", 0, "out of memory");
			break;
		}
	}
	pysource_free(prev);
	free(prev_data);
	oid_map_free(&seen);
	return error;
}

int oeap_commit_binding_check(git_repository *repo, const git_commit *commit, const oeap_patchdef *def,
                              const char *path, oeap_report *rep, oeap_error *err)
{
	int error = 0;
	char *bpath = oeap_binding_path(def, path), *text = NULL;
	char label[4200], hex[GIT_OID_HEXSZ + 1];
	size_t len = 0;
	git_oid id;
	if (!bpath)
		return oeap_fail(err, OEAP_ERR_INTERNAL, "binding", 0, "out of memory");
	git_oid_tostr(hex, sizeof(hex), git_commit_id(commit));
	int has = oeap_commit_blob(repo, commit, bpath, &id, &text, &len, err);
	if (has < 0) {
		error = -1;
		goto done;
	}
	/* The target of that commit imports the module: without it in the same
	 * tree, a clone of the commit fails at import (`git commit -am` after
	 * apply leaves the new module untracked). */
	if (has == 1) {
		if (oeap_report_add(rep, "binding", 0, 0,
		                    "%s is not in commit %.12s, but its %s imports it: a checkout of that commit fails at "
		                    "import; `git add %s` and commit it (or pass --skip-binding when every deploy runs "
		                    "`oeapatch apply`, which writes it)",
		                    bpath, hex, path, bpath))
			error = oeap_fail(err, OEAP_ERR_INTERNAL, "binding", 0, "out of memory");
		goto done;
	}
	snprintf(label, sizeof(label), "%s (commit %.12s)", bpath, hex);
	if (oeap_binding_check_text(def, label, text, len, rep, NULL))
		error = oeap_fail(err, OEAP_ERR_INTERNAL, "binding", 0, "out of memory");
done:
	free(text);
	free(bpath);
	return error;
}

int oeap_check_revs_binding(git_repository *repo, const oeap_patchdef *def, const oeap_revs *revs,
                            oeap_check_result *results, oeap_error *err)
{
	int error = 0;
	for (size_t i = 0; i < revs->n && !error; i++) {
		oeap_check_result *res = &results[i];
		git_commit *c = NULL;
		oeap_report rep;
		memset(&rep, 0, sizeof(rep));
		rep.ok = 1;
		/* Only a revision that carries the patch imports the module; one that
		 * lands gets it from apply. */
		if (res->land != OEAP_LAND_APPLIED)
			continue;
		if (git_commit_lookup(&c, repo, &revs->items[i].commit)) {
			error = oeap_git_fail(err, revs->items[i].short_id, "cannot read the commit");
			break;
		}
		if (oeap_commit_binding_check(repo, c, def, revs->items[i].path, &rep, err))
			error = -1;
		else if (!rep.ok) {
			res->land = OEAP_LAND_FAILS;
			oeap_error_clear(&res->err);
			oeap_fail(&res->err, OEAP_ERR_INPUT, "binding", 0, "%s", rep.checks[rep.n - 1].detail);
		}
		oeap_report_free(&rep);
		git_commit_free(c);
	}
	return error;
}

int oeap_revs_since(git_repository *repo, oeap_revs *revs, size_t from, const char *first, size_t *dropped,
                    oeap_error *err)
{
	git_commit *fc = NULL;
	int is_date = strlen(first) == 10 && first[4] == '-';
	*dropped = 0;
	if (!is_date) {
		git_object *obj = NULL;
		if (git_revparse_single(&obj, repo, first) ||
		    git_object_peel((git_object **)&fc, obj, GIT_OBJECT_COMMIT)) {
			git_object_free(obj);
			git_error_clear();
			return oeap_fail(err, OEAP_ERR_GIT, first, 0,
			                 "the definition's first supported revision (first_revision) is not a commit of this "
			                 "repository: fetch upstream's history, or pass --all to check every revision");
		}
		git_object_free(obj);
	}
	size_t keep = from;
	for (size_t i = from; i < revs->n; i++) {
		oeap_rev *r = &revs->items[i];
		int supported;
		if (is_date)
			supported = strcmp(r->date, first) >= 0; /* both YYYY-MM-DD */
		else
			supported = git_oid_equal(&r->commit, git_commit_id(fc)) ||
			            git_graph_descendant_of(repo, &r->commit, git_commit_id(fc)) == 1;
		if (supported) {
			revs->items[keep++] = *r;
			continue;
		}
		free(r->subject);
		free(r->path);
		free(r->renamed_from);
		++*dropped;
	}
	revs->n = keep;
	git_error_clear();
	git_commit_free(fc);
	return 0;
}
