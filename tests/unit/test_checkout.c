/*
 * test_checkout.c - the git side of `check` and `verify --ref`: revisions
 * that touched the target (renames followed, deletions seen), ranges, named
 * revisions without the file, unborn HEAD, the blob cache, and the dry run's
 * verdicts. Repositories are built here with libgit2 (bare ones: nothing in
 * checkout.c may need a work tree).
 */
#include "testutil.h"

#include <git2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkout.h"
#include "pipeline.h"

#define T "python/sglang/srt/layers/moe/topk.py"
#define OLD "python/sglang/srt/layers/topk.py"

typedef struct file {
	const char *path;
	const char *fixture; /* relative to the source tree; NULL: the text */
	const char *text;
} file;

/* Commits exactly `files` (a whole tree) on HEAD's branch; returns the id. */
static git_oid commit_files(git_repository *repo, const char *msg, const file *files, size_t n)
{
	git_index *index = NULL;
	git_oid tree_id, id;
	git_tree *tree = NULL;
	git_signature *sig = NULL;
	git_commit *parent = NULL;
	git_oid head;
	assert_int_equal(git_index_new(&index), 0);
	for (size_t i = 0; i < n; i++) {
		size_t len = 0;
		char *data = files[i].fixture ? tu_read(files[i].fixture, &len) : strdup(files[i].text);
		if (!files[i].fixture)
			len = strlen(data);
		git_index_entry e;
		memset(&e, 0, sizeof(e));
		e.path = files[i].path;
		e.mode = GIT_FILEMODE_BLOB;
		/* An in-memory index has no repository: write the blob ourselves. */
		assert_int_equal(git_blob_create_from_buffer(&e.id, repo, data, len), 0);
		assert_int_equal(git_index_add(index, &e), 0);
		free(data);
	}
	assert_int_equal(git_index_write_tree_to(&tree_id, index, repo), 0);
	assert_int_equal(git_tree_lookup(&tree, repo, &tree_id), 0);
	static int seq;
	assert_int_equal(git_signature_new(&sig, "Test", "test@example.org", 1700000000 + 86400 * seq++, 0), 0);
	int has_parent = git_reference_name_to_id(&head, repo, "HEAD") == 0;
	if (has_parent)
		assert_int_equal(git_commit_lookup(&parent, repo, &head), 0);
	const git_commit *parents[1] = {parent};
	assert_int_equal(git_commit_create(&id, repo, "HEAD", sig, sig, NULL, msg, tree, has_parent ? 1 : 0, parents), 0);
	git_commit_free(parent);
	git_signature_free(sig);
	git_tree_free(tree);
	git_index_free(index);
	return id;
}

typedef struct fx {
	char *dir;
	git_repository *repo;
	oeap_patchdef *def;
	git_oid c[8]; /* c[1] .. c[7] */
} fx;

static int setup(void **state)
{
	fx *f = calloc(1, sizeof(*f));
	git_libgit2_init();
	f->dir = tu_tmpdir();
	f->def = tu_def();
	if (git_repository_init(&f->repo, f->dir, 1))
		return -1;
	const file readme = {"README", NULL, "readme\n"};
	const file readme2 = {"README", NULL, "readme, changed\n"};
	file c2[] = {readme, {OLD, "tests/fixtures/eras/2024-12_positional.py", NULL}};
	file c3[] = {readme, {T, "tests/fixtures/eras/2024-12_positional.py", NULL}};
	file c4[] = {readme, {T, "tests/fixtures/eras/2025-08_topk_config.py", NULL}};
	file c5[] = {readme, {T, "tests/fixtures/refuse/no_routing_chain.py", NULL}};
	file c6[] = {readme2, {T, "tests/fixtures/refuse/no_routing_chain.py", NULL}};
	file c7[] = {readme2};
	f->c[1] = commit_files(f->repo, "readme only", &readme, 1);
	f->c[2] = commit_files(f->repo, "topk at the old path", c2, 2);
	f->c[3] = commit_files(f->repo, "move topk into moe", c3, 2);
	f->c[4] = commit_files(f->repo, "topk config era", c4, 2);
	f->c[5] = commit_files(f->repo, "routing chain rewritten away", c5, 2);
	f->c[6] = commit_files(f->repo, "docs only", c6, 2);
	f->c[7] = commit_files(f->repo, "drop topk", c7, 1);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fx *f = *state;
	git_repository_free(f->repo);
	oeap_patchdef_free(f->def);
	tu_rmtree(f->dir);
	free(f->dir);
	free(f);
	git_libgit2_shutdown();
	return 0;
}

static void hex(const git_oid *id, char *out)
{
	git_oid_tostr(out, GIT_OID_HEXSZ + 1, id);
}

static void test_walk_from_head(void **state)
{
	fx *f = *state;
	oeap_revs revs = {0};
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_revs_add(f->repo, NULL, T, 0, &revs, &err), 0);
	/* Newest first: the deletion, c5, c4, the rename c3, and c2 under the old name. */
	assert_int_equal(revs.n, 5);
	int want[] = {7, 5, 4, 3, 2};
	for (size_t i = 0; i < 5; i++)
		assert_true(git_oid_equal(&revs.items[i].commit, &f->c[want[i]]));
	assert_int_equal(revs.items[0].kind, OEAP_REV_DELETED);
	assert_false(revs.items[0].has_blob);
	assert_int_equal(revs.items[1].kind, OEAP_REV_CHANGED);
	assert_string_equal(revs.items[3].path, T);
	assert_string_equal(revs.items[3].renamed_from, OLD);
	assert_string_equal(revs.items[4].path, OLD);
	assert_null(revs.items[4].renamed_from);
	assert_string_equal(revs.items[1].subject, "routing chain rewritten away");
	assert_int_equal(strlen(revs.items[1].date), 10);

	oeap_check_result res[5];
	assert_int_equal(oeap_check_revs(f->repo, f->def, &revs, res, &err), 0);
	assert_int_equal(res[0].land, OEAP_LAND_DELETED);
	assert_int_equal(res[1].land, OEAP_LAND_FAILS);
	assert_string_equal(res[1].err.where, "anchor 'routing_chain'");
	assert_non_null(strstr(res[1].err.message, "not found"));
	assert_int_equal(res[2].land, OEAP_LAND_LANDS);
	assert_int_equal(res[3].land, OEAP_LAND_LANDS);
	assert_int_equal(res[4].land, OEAP_LAND_LANDS);
	/* c3 and c2 share a blob: checked once. */
	assert_true(git_oid_equal(&revs.items[3].blob, &revs.items[4].blob));
	assert_true(res[3].seconds == 0 || res[4].seconds == 0);
	oeap_revs_free(&revs);
}

static void test_ranges_named_and_max(void **state)
{
	fx *f = *state;
	oeap_revs revs = {0};
	oeap_error err;
	char a[GIT_OID_HEXSZ + 1], b[GIT_OID_HEXSZ + 1], spec[100];
	oeap_error_clear(&err);
	hex(&f->c[3], a);
	hex(&f->c[6], b);
	snprintf(spec, sizeof(spec), "%s..%s", a, b);
	assert_int_equal(oeap_revs_add(f->repo, spec, T, 0, &revs, &err), 0);
	assert_int_equal(revs.n, 2); /* c5 and c4; c6 did not touch the file */
	assert_true(git_oid_equal(&revs.items[0].commit, &f->c[5]));
	assert_true(git_oid_equal(&revs.items[1].commit, &f->c[4]));
	/* The same commits again are not added twice; a named one is added. */
	assert_int_equal(oeap_revs_add(f->repo, spec, T, 0, &revs, &err), 0);
	assert_int_equal(revs.n, 2);
	hex(&f->c[1], a);
	assert_int_equal(oeap_revs_add(f->repo, a, T, 0, &revs, &err), 0);
	assert_int_equal(revs.n, 3);
	assert_int_equal(revs.items[2].kind, OEAP_REV_NAMED);
	assert_false(revs.items[2].has_blob);
	oeap_check_result res[3];
	assert_int_equal(oeap_check_revs(f->repo, f->def, &revs, res, &err), 0);
	assert_int_equal(res[2].land, OEAP_LAND_MISSING);
	oeap_revs_free(&revs);

	assert_int_equal(oeap_revs_add(f->repo, NULL, T, 2, &revs, &err), 0);
	assert_int_equal(revs.n, 2);
	oeap_revs_free(&revs);
}

static void test_bad_revisions(void **state)
{
	fx *f = *state;
	oeap_revs revs = {0};
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_revs_add(f->repo, "no-such-rev", T, 0, &revs, &err), -1);
	assert_int_equal(err.kind, OEAP_ERR_GIT);
	assert_string_equal(err.where, "no-such-rev");
	assert_non_null(strstr(err.message, "not a revision"));
	oeap_error_clear(&err);
	assert_int_equal(oeap_revs_add(f->repo, "HEAD~1...HEAD", T, 0, &revs, &err), -1);
	assert_int_equal(err.kind, OEAP_ERR_USAGE);
	oeap_error_clear(&err);
	/* A tree is not a commit. */
	assert_int_equal(oeap_revs_add(f->repo, "HEAD^{tree}", T, 0, &revs, &err), -1);
	assert_non_null(strstr(err.message, "commit"));
	assert_int_equal(revs.n, 0);
}

static void test_unborn_head(void **state)
{
	(void)state;
	char *dir = tu_tmpdir();
	git_repository *repo = NULL;
	oeap_revs revs = {0};
	oeap_error err;
	git_commit *c = NULL;
	oeap_error_clear(&err);
	git_libgit2_init();
	assert_int_equal(git_repository_init(&repo, dir, 0), 0);
	assert_int_equal(oeap_revs_add(repo, NULL, T, 0, &revs, &err), -1);
	assert_non_null(strstr(err.message, "HEAD is unborn"));
	oeap_error_clear(&err);
	assert_int_equal(oeap_resolve_commit(repo, "HEAD", &c, &err), -1);
	assert_non_null(strstr(err.message, "HEAD is unborn"));
	assert_null(c);
	git_repository_free(repo);
	git_libgit2_shutdown();
	tu_rmtree(dir);
	free(dir);
}

static void test_commit_blob(void **state)
{
	fx *f = *state;
	git_commit *c = NULL;
	git_oid id;
	char *data = NULL;
	size_t len = 0, want_len = 0;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_resolve_commit(f->repo, "HEAD~3", &c, &err), 0); /* c4 */
	assert_int_equal(oeap_commit_blob(f->repo, c, T, &id, &data, &len, &err), 0);
	char *want = tu_read("tests/fixtures/eras/2025-08_topk_config.py", &want_len);
	assert_int_equal(len, want_len);
	assert_memory_equal(data, want, len);
	free(data);
	data = NULL;
	assert_int_equal(oeap_commit_blob(f->repo, c, OLD, &id, &data, &len, &err), 1);
	assert_int_equal(oeap_commit_blob(f->repo, c, "python", &id, &data, &len, &err), 1); /* a tree */
	assert_null(data);
	assert_int_equal(err.kind, OEAP_ERR_NONE);

	/* The dry run's verdicts: lands; on apply's own output, applied. */
	oeap_check_result res;
	oeap_outcome o;
	assert_int_equal(oeap_check_bytes(f->def, want, want_len, T, &res), 0);
	assert_int_equal(res.land, OEAP_LAND_LANDS);
	assert_int_equal(res.before, OEAP_STATE_CLEAN);
	assert_int_equal(oeap_apply_bytes(f->def, want, want_len, T, &o, &err), 0);
	assert_int_equal(oeap_check_bytes(f->def, o.out, o.out_len, T, &res), 0);
	assert_int_equal(res.land, OEAP_LAND_APPLIED);
	oeap_outcome_free(&o);
	free(want);
	want = tu_read("tests/fixtures/refuse/two_select_experts.py", &want_len);
	assert_int_equal(oeap_check_bytes(f->def, want, want_len, T, &res), 0);
	assert_int_equal(res.land, OEAP_LAND_FAILS);
	assert_string_equal(res.err.where, "anchor 'select_experts'");
	assert_non_null(strstr(res.err.message, "ambiguous"));
	free(want);
	git_commit_free(c);
}

static void test_repo_open_prefix(void **state)
{
	(void)state;
	char *dir = tu_tmpdir(), sub[4096], *prefix = NULL;
	git_repository *repo = NULL;
	oeap_error err;
	oeap_error_clear(&err);
	git_libgit2_init();
	assert_int_equal(git_repository_init(&repo, dir, 0), 0);
	git_repository_free(repo);
	snprintf(sub, sizeof(sub), "%s/vendor/sglang/x", dir);
	tu_write(sub, "x", 1);
	snprintf(sub, sizeof(sub), "%s/vendor/sglang", dir);
	assert_int_equal(oeap_repo_open(sub, &repo, &prefix, &err), 0);
	assert_string_equal(prefix, "vendor/sglang/");
	char *top = oeap_repo_toplevel(repo);
	char *real = realpath(dir, NULL);
	assert_string_equal(top, real);
	free(top);
	free(real);
	free(prefix);
	git_repository_free(repo);
	assert_int_equal(oeap_repo_open(dir, &repo, &prefix, &err), 0);
	assert_string_equal(prefix, "");
	free(prefix);
	git_repository_free(repo);
	assert_int_equal(oeap_repo_open("/", &repo, &prefix, &err), -1);
	assert_int_equal(err.kind, OEAP_ERR_GIT);
	git_libgit2_shutdown();
	tu_rmtree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_walk_from_head, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ranges_named_and_max, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_revisions, setup, teardown),
		cmocka_unit_test(test_unborn_head),
		cmocka_unit_test_setup_teardown(test_commit_blob, setup, teardown),
		cmocka_unit_test(test_repo_open_prefix),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
