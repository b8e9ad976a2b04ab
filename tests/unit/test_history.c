/*
 * test_history.c - the git side of `check` and `verify --ref`: revisions
 * that touched the target (renames followed, deletions seen), ranges, named
 * revisions without the file, unborn HEAD, the blob cache, and the dry run's
 * verdicts. Repositories are built here with libgit2 (bare ones: nothing in
 * history.c may need a work tree).
 */
#include "testutil.h"

#include <git2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "history.h"
#include "pyparse.h"
#include "revcheck.h"
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

/* ---- incremental parsing from revision to revision ------------------------- */

/* 1 when the two trees have the same nodes: type, byte range, rows and
 * columns, named-ness and missing-ness, in the same order. */
static int same_tree(TSNode a, TSNode b, char *why, size_t cap)
{
	TSTreeCursor ca = ts_tree_cursor_new(a), cb = ts_tree_cursor_new(b);
	int same = 1;
	for (;;) {
		TSNode x = ts_tree_cursor_current_node(&ca), y = ts_tree_cursor_current_node(&cb);
		TSPoint px = ts_node_start_point(x), py = ts_node_start_point(y);
		if (strcmp(ts_node_type(x), ts_node_type(y)) || ts_node_start_byte(x) != ts_node_start_byte(y) ||
		    ts_node_end_byte(x) != ts_node_end_byte(y) || px.row != py.row || px.column != py.column ||
		    ts_node_is_named(x) != ts_node_is_named(y) || ts_node_is_missing(x) != ts_node_is_missing(y)) {
			snprintf(why, cap, "incremental %s [%u, %u) at %u:%u, from scratch %s [%u, %u) at %u:%u",
			         ts_node_type(x), ts_node_start_byte(x), ts_node_end_byte(x), px.row, px.column,
			         ts_node_type(y), ts_node_start_byte(y), ts_node_end_byte(y), py.row, py.column);
			same = 0;
			break;
		}
		int da = ts_tree_cursor_goto_first_child(&ca), db = ts_tree_cursor_goto_first_child(&cb);
		if (da != db) {
			snprintf(why, cap, "node %s at byte %u has children in one tree only", ts_node_type(x),
			         ts_node_start_byte(x));
			same = 0;
			break;
		}
		if (da)
			continue;
		int done = 0;
		for (;;) {
			int sa = ts_tree_cursor_goto_next_sibling(&ca), sb = ts_tree_cursor_goto_next_sibling(&cb);
			if (sa != sb) {
				snprintf(why, cap, "after %s at byte %u: a sibling in one tree only", ts_node_type(x),
				         ts_node_start_byte(x));
				same = 0;
				done = 1;
				break;
			}
			if (sa)
				break;
			int ua = ts_tree_cursor_goto_parent(&ca), ub = ts_tree_cursor_goto_parent(&cb);
			if (!ua || !ub) {
				done = 1;
				break;
			}
		}
		if (done)
			break;
	}
	ts_tree_cursor_delete(&ca);
	ts_tree_cursor_delete(&cb);
	return same;
}

/* A sequence of texts: the real eras of topk.py in their order, and edits
 * of one era that trip an incremental parse (both ends, indentation, strings
 * that open and close around code, a byte order mark, CRLF, an error and its
 * fix). Each text is parsed from the previous one that parsed, with the edits
 * oeap_text_edits computes, and must give the tree a parse from scratch gives
 * (or, when it does not parse, the same refusal). */
static char *mutate(const char *base, size_t len, int k, size_t *out_len)
{
	oeap_buf b = OEAP_BUF_INIT;
	const char *def = strstr(base, "def select_experts(");
	const char *chain = strstr(base, "    if use_grouped_topk:\n");
	size_t at_def = def ? (size_t)(def - base) : len / 2, at_chain = chain ? (size_t)(chain - base) : len / 2;
	switch (k) {
	case 0: /* an edit at the start */
		oeap_buf_puts(&b, "# header\n");
		oeap_buf_put(&b, base, len);
		break;
	case 1: /* one at the end, and one in the middle: two hunks */
		oeap_buf_put(&b, base, at_def);
		oeap_buf_puts(&b, "def added_in_the_middle():\n    return [1,\n            2]\n\n\n");
		oeap_buf_put(&b, base + at_def, len - at_def);
		oeap_buf_puts(&b, "\n\ndef tail():\n    return 1\n");
		break;
	case 2: /* a block indented one level deeper */
		oeap_buf_put(&b, base, at_chain);
		oeap_buf_puts(&b, "    if True:\n    ");
		for (size_t i = at_chain; i < len; i++) {
			oeap_buf_put(&b, base + i, 1);
			if (base[i] == '\n' && i + 1 < len && !strncmp(base + i + 1, "    ", 4) && i + 1 < at_def + 4000)
				oeap_buf_puts(&b, "    ");
		}
		break;
	case 3: /* a string opened before select_experts, closed at the end */
		oeap_buf_put(&b, base, at_def);
		oeap_buf_puts(&b, "_doc = \"\"\"\n");
		oeap_buf_put(&b, base + at_def, len - at_def);
		oeap_buf_puts(&b, "\"\"\"\n");
		break;
	case 4: /* a syntax error in the middle */
		oeap_buf_put(&b, base, at_def);
		oeap_buf_puts(&b, "def broken(:\n    pass\n");
		oeap_buf_put(&b, base + at_def, len - at_def);
		break;
	case 5: /* a byte order mark */
		oeap_buf_puts(&b, "\xef\xbb\xbf");
		oeap_buf_put(&b, base, len);
		break;
	case 6: /* CRLF line ends */
		for (size_t i = 0; i < len; i++)
			oeap_buf_puts(&b, base[i] == '\n' ? "\r\n" : (char[]){base[i], 0});
		break;
	case 7: /* a deletion inside a line and a one-byte change far below it */
		oeap_buf_put(&b, base, at_chain + 7);
		oeap_buf_put(&b, base + at_chain + 11, len - at_chain - 11); /* "if use_grouped_topk" -> "if _grouped_topk" */
		for (size_t i = b.len; i-- > 0;)
			if (b.data[i] == '1') {
				b.data[i] = '2';
				break;
			}
		break;
	}
	return oeap_buf_detach(&b, out_len);
}

static void test_incremental_parse_equals_scratch(void **state)
{
	(void)state;
	static const char *const eras[] = {
		"tests/fixtures/eras/2024-12_positional.py",     "tests/fixtures/eras/2025-03_recorder.py",
		"tests/fixtures/eras/2025-05_dispatch_info.py",  "tests/fixtures/eras/2025-07_kwonly_topkoutput.py",
		"tests/fixtures/eras/2025-08_topk_config.py",    "tests/fixtures/eras/2025-12_layer_id_capturer.py",
		"tests/fixtures/eras/2026-02_post_process.py",   "tests/fixtures/variants/large.py",
	};
	enum { NMUT = 8 };
	size_t neras = sizeof(eras) / sizeof(eras[0]);
	char *texts[sizeof(eras) / sizeof(eras[0]) * (NMUT * 2 + 1)];
	size_t lens[sizeof(texts) / sizeof(texts[0])], n = 0;
	for (size_t e = 0; e < neras; e++) {
		texts[n] = tu_read(eras[e], &lens[n]);
		size_t base = n++;
		/* each mutation, then back to the era: a revert */
		for (int k = 0; k < NMUT && e == neras - 3; k++) {
			texts[n] = mutate(texts[base], lens[base], k, &lens[n]);
			n++;
			texts[n] = malloc(lens[base] + 1);
			memcpy(texts[n], texts[base], lens[base] + 1);
			lens[n++] = lens[base];
		}
	}
	oeap_pysource *prev = NULL;
	size_t parsed = 0, refused = 0, multi = 0;
	for (size_t i = 0; i < n; i++) {
		oeap_pysource *inc = NULL, *scratch = NULL;
		oeap_error ei, es;
		oeap_error_clear(&ei);
		oeap_error_clear(&es);
		int rs = oeap_pysource_parse(texts[i], lens[i], "t.py", &scratch, &es), ri;
		if (prev) {
			oeap_pysource_edit *edits = NULL;
			size_t ne = 0;
			assert_int_equal(oeap_text_edits(prev->buf, prev->len, texts[i], lens[i], &edits, &ne), 0);
			multi += ne > 1;
			ri = oeap_pysource_parse_edits(prev, texts[i], lens[i], edits, ne, "t.py", &inc, &ei);
			free(edits);
		} else {
			ri = oeap_pysource_parse(texts[i], lens[i], "t.py", &inc, &ei);
		}
		if (ri != rs)
			fail_msg("text %zu: the incremental parse %s, the parse from scratch %s (%s%s)", i,
			         ri ? "refuses" : "accepts", rs ? "refuses" : "accepts", ei.message, es.message);
		if (rs) {
			assert_string_equal(ei.message, es.message);
			assert_int_equal(ei.line, es.line);
			refused++;
			continue;
		}
		char why[512];
		if (!same_tree(oeap_pysource_root(inc), oeap_pysource_root(scratch), why, sizeof(why)))
			fail_msg("text %zu: %s", i, why);
		parsed++;
		oeap_pysource_free(scratch);
		/* the next text is parsed from this one, as check does */
		oeap_pysource_free(prev);
		prev = inc;
	}
	oeap_pysource_free(prev);
	/* The sequence holds what it was made for. */
	assert_true(parsed >= 15);
	assert_true(refused >= 1);
	assert_true(multi >= 3);
	for (size_t i = 0; i < n; i++)
		free(texts[i]);
}

/* The edits make the new text out of the old one, and stay small: a
 * one-line change is one edit of a few bytes, not the rest of the file. */
static void test_text_edits(void **state)
{
	(void)state;
	static const char a[] = "x = 1\ny = 2\nz = 3\nw = 4\n", b[] = "x = 1\ny = 20\nz = 3\nw = 5\n";
	oeap_pysource_edit *e = NULL;
	size_t n = 0;
	assert_int_equal(oeap_text_edits(a, strlen(a), b, strlen(b), &e, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(e[0].old_start, 11);
	assert_int_equal(e[0].old_end, 11);
	assert_int_equal(e[0].new_start, 11);
	assert_int_equal(e[0].new_end, 12);
	assert_int_equal(e[1].old_start, 22);
	assert_int_equal(e[1].old_end, 23);
	assert_int_equal(e[1].new_start, 23);
	assert_int_equal(e[1].new_end, 24);
	free(e);
	/* the same text: no edit */
	assert_int_equal(oeap_text_edits(a, strlen(a), a, strlen(a), &e, &n), 0);
	assert_int_equal(n, 0);
	free(e);
	/* no final line end, a change in the last line, a text that is a prefix of the other */
	static const char c[] = "x = 1\ny", d[] = "x = 1\nyy";
	assert_int_equal(oeap_text_edits(c, strlen(c), d, strlen(d), &e, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(e[0].old_start, 7);
	assert_int_equal(e[0].new_end, 8);
	free(e);
	assert_int_equal(oeap_text_edits(d, strlen(d), "", 0, &e, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(e[0].old_start, 0);
	assert_int_equal(e[0].old_end, strlen(d));
	assert_int_equal(e[0].new_end, 0);
	free(e);
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
		cmocka_unit_test(test_incremental_parse_equals_scratch),
		cmocka_unit_test(test_text_edits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
