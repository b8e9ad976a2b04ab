#include "history.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "oidmap.h"

static char *dup_str(const char *s)
{
	return s ? strdup(s) : NULL;
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
                        oeap_oid_map *paths, const char *what, oeap_error *err)
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
		if ((ph = oeap_tree_blob(ptree, st->path, &pb, err)) < 0) {
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
				if ((ph = oeap_tree_blob(ptree, pp, &pb, err)) < 0) {
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
		if (k < 0 || oeap_oid_map_put_new(paths, git_commit_id(parent), (size_t)k)) {
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
	oeap_oid_map paths = {0};
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
		const size_t *pi = oeap_oid_map_get(&paths, &id);
		walk_step st;
		memset(&st, 0, sizeof(st));
		st.path = pool.items[pi ? *pi : (size_t)start];
		if (git_commit_lookup(&c, repo, &id) || git_commit_tree(&tree, c)) {
			error = oeap_git_fail(err, what, "cannot read a commit of the walk");
			goto done;
		}
		if ((st.has = oeap_tree_blob(tree, st.path, &st.blob, err)) < 0 ||
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
	oeap_oid_map_free(&paths);
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
		int rc = oeap_tree_blob(tree, paths[i], blob, err);
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
			if ((found = oeap_tree_blob(tree, path, &id, &ignore) == 0))
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
