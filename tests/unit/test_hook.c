/*
 * test_hook.c - where hooks live (core.hooksPath relative, absolute, "~/",
 * the common dir of a worktree) and what install/uninstall do to the files:
 * an existing hook chained byte for byte with its mode, idempotence, exact
 * restore, refusal to touch what is not ours. The scripts are checked with
 * `sh -n`; running them under git is the e2e test's job.
 */
#include "testutil.h"

#include <git2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "fsio.h"
#include "hook.h"

static const oeap_hook_config CFG = {"/opt/it's here/bin/oeapatch", "sglang-oea", NULL, "",
                                      "python/sglang/srt/layers/moe/topk.py", 0, 0};

static int setup(void **state)
{
	git_libgit2_init();
	*state = tu_tmpdir();
	return 0;
}

static int teardown(void **state)
{
	tu_rmtree(*state);
	free(*state);
	git_libgit2_shutdown();
	return 0;
}

static char *path_in(const char *dir, const char *name)
{
	char *p = malloc(strlen(dir) + strlen(name) + 2);
	sprintf(p, "%s/%s", dir, name);
	return p;
}

static char *slurp(const char *path, size_t *len)
{
	char *d = NULL;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_read_file(path, &d, len, &err), 0);
	return d;
}

static mode_t mode_of(const char *path)
{
	struct stat st;
	assert_int_equal(lstat(path, &st), 0);
	return st.st_mode & 07777;
}

static void test_hooks_dir(void **state)
{
	const char *dir = *state;
	git_repository *repo = NULL;
	git_config *cfg = NULL;
	char *hooks = NULL, *want = NULL;
	int from = -1;
	oeap_error err;
	oeap_error_clear(&err);
	/* libgit2 reads $HOME when it initialises: set it first ("~/" below). */
	const char *old_home = getenv("HOME");
	char *saved = old_home ? strdup(old_home) : NULL;
	git_libgit2_shutdown();
	setenv("HOME", "/home/deploy", 1);
	git_libgit2_init();
	assert_int_equal(git_repository_init(&repo, dir, 0), 0);
	char *real = realpath(dir, NULL);

	assert_int_equal(oeap_hooks_dir(repo, &hooks, &from, &err), 0);
	want = path_in(real, ".git/hooks");
	assert_string_equal(hooks, want);
	assert_int_equal(from, 0);
	free(hooks);
	free(want);

	assert_int_equal(git_repository_config(&cfg, repo), 0);
	assert_int_equal(git_config_set_string(cfg, "core.hooksPath", "ci/hooks"), 0);
	assert_int_equal(oeap_hooks_dir(repo, &hooks, &from, &err), 0);
	want = path_in(real, "ci/hooks"); /* relative: against the work tree, as git runs hooks there */
	assert_string_equal(hooks, want);
	assert_int_equal(from, 1);
	free(hooks);
	free(want);

	assert_int_equal(git_config_set_string(cfg, "core.hooksPath", "/srv/hooks/"), 0);
	assert_int_equal(oeap_hooks_dir(repo, &hooks, &from, &err), 0);
	assert_string_equal(hooks, "/srv/hooks");
	free(hooks);

	assert_int_equal(git_config_set_string(cfg, "core.hooksPath", "~/hooks"), 0);
	assert_int_equal(oeap_hooks_dir(repo, &hooks, &from, &err), 0);
	assert_string_equal(hooks, "/home/deploy/hooks");
	free(hooks);
	if (saved)
		setenv("HOME", saved, 1);
	free(saved);

	git_config_free(cfg);
	git_repository_free(repo);
	free(real);
}

static void test_hooks_dir_worktree(void **state)
{
	const char *dir = *state;
	git_repository *repo = NULL, *wtrepo = NULL;
	git_worktree *wt = NULL;
	git_signature *sig = NULL;
	git_index *index = NULL;
	git_tree *tree = NULL;
	git_oid tree_id, id;
	char *hooks = NULL, *main_dir = path_in(dir, "main"), *wt_dir = path_in(dir, "wt");
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(git_repository_init(&repo, main_dir, 0), 0);
	/* A worktree needs a commit to check out. */
	assert_int_equal(git_repository_index(&index, repo), 0);
	assert_int_equal(git_index_write_tree(&tree_id, index), 0);
	assert_int_equal(git_tree_lookup(&tree, repo, &tree_id), 0);
	assert_int_equal(git_signature_now(&sig, "Test", "test@example.org"), 0);
	assert_int_equal(git_commit_create(&id, repo, "HEAD", sig, sig, NULL, "empty", tree, 0, NULL), 0);
	assert_int_equal(git_worktree_add(&wt, repo, "wt", wt_dir, NULL), 0);
	assert_int_equal(git_repository_open(&wtrepo, wt_dir), 0);

	assert_int_equal(oeap_hooks_dir(wtrepo, &hooks, NULL, &err), 0);
	char *real = realpath(main_dir, NULL);
	char *want = path_in(real, ".git/hooks");
	assert_string_equal(hooks, want); /* shared by every worktree */
	free(want);
	free(real);
	free(hooks);

	git_repository_free(wtrepo);
	git_worktree_free(wt);
	git_signature_free(sig);
	git_tree_free(tree);
	git_index_free(index);
	git_repository_free(repo);
	free(main_dir);
	free(wt_dir);
}

static void test_install_fresh(void **state)
{
	const char *dir = *state;
	char *hooks = path_in(dir, "no/such/hooks"); /* created on install */
	oeap_hook_action did;
	oeap_hook_info info;
	oeap_error err;
	oeap_error_clear(&err);
	for (const char *const *n = oeap_hook_names; *n; n++) {
		assert_int_equal(oeap_hook_install(hooks, *n, &CFG, &did, &err), 0);
		assert_int_equal(did, OEAP_HOOK_DID_INSTALL);
		char *p = path_in(hooks, *n);
		size_t len;
		char *text = slurp(p, &len);
		assert_int_equal(strncmp(text, "#!/bin/sh\n" OEAP_HOOK_HEADER "\n", 10 + sizeof(OEAP_HOOK_HEADER)), 0);
		assert_int_equal(mode_of(p), 0755);
		oeap_hook_inspect(hooks, *n, &info);
		assert_int_equal(info.state, OEAP_HOOK_OURS);
		assert_string_equal(info.oeapatch, CFG.oeapatch);
		assert_int_equal(info.reapply, 0);
		/* Valid sh, with the odd path quoted. */
		char cmd[8192];
		snprintf(cmd, sizeof(cmd), "sh -n '%s'", p);
		assert_int_equal(system(cmd), 0);
		assert_non_null(strstr(text, "oeapatch='/opt/it'\\''s here/bin/oeapatch'"));
		if (!strcmp(*n, "pre-push"))
			assert_non_null(strstr(text, "--ref \"$lsha\""));
		free(text);
		free(p);
	}
	/* Idempotent; other settings rewrite ours. */
	assert_int_equal(oeap_hook_install(hooks, "post-merge", &CFG, &did, &err), 0);
	assert_int_equal(did, OEAP_HOOK_DID_NOTHING);
	oeap_hook_config re = CFG;
	re.reapply = 1;
	re.library = "/opt/lib/liboea.so";
	assert_int_equal(oeap_hook_install(hooks, "post-merge", &re, &did, &err), 0);
	assert_int_equal(did, OEAP_HOOK_DID_UPDATE);
	oeap_hook_inspect(hooks, "post-merge", &info);
	assert_int_equal(info.reapply, 1);
	/* Uninstall removes ours, and only ours. */
	for (const char *const *n = oeap_hook_names; *n; n++) {
		assert_int_equal(oeap_hook_uninstall(hooks, *n, &did, &err), 0);
		assert_int_equal(did, OEAP_HOOK_DID_REMOVE);
		oeap_hook_inspect(hooks, *n, &info);
		assert_int_equal(info.state, OEAP_HOOK_ABSENT);
	}
	assert_int_equal(oeap_hook_uninstall(hooks, "post-merge", &did, &err), 0);
	assert_int_equal(did, OEAP_HOOK_DID_NOTHING);
	free(hooks);
}

static void test_chain_and_restore(void **state)
{
	const char *dir = *state;
	static const char user[] = "#!/bin/bash\necho user hook \"$@\"\n";
	char *p = path_in(dir, "post-merge"), *chained = path_in(dir, "post-merge" OEAP_HOOK_CHAINED_SUFFIX);
	oeap_hook_action did;
	oeap_hook_info info;
	oeap_error err;
	oeap_error_clear(&err);
	tu_write(p, user, sizeof(user) - 1);
	assert_int_equal(chmod(p, 0710), 0);
	struct stat before;
	assert_int_equal(lstat(p, &before), 0);

	assert_int_equal(oeap_hook_install(dir, "post-merge", &CFG, &did, &err), 0);
	assert_int_equal(did, OEAP_HOOK_DID_CHAIN);
	size_t len;
	char *text = slurp(chained, &len);
	assert_int_equal(len, sizeof(user) - 1);
	assert_memory_equal(text, user, len);
	free(text);
	assert_int_equal(mode_of(chained), 0710);
	assert_int_equal(mode_of(p), 0755);
	oeap_hook_inspect(dir, "post-merge", &info);
	assert_int_equal(info.state, OEAP_HOOK_OURS_CHAINED);
	assert_string_equal(oeap_hook_state_name(info.state), "ours+chained");

	/* Installing again neither chains ours to itself nor touches the user's. */
	assert_int_equal(oeap_hook_install(dir, "post-merge", &CFG, &did, &err), 0);
	assert_int_equal(did, OEAP_HOOK_DID_NOTHING);
	text = slurp(chained, &len);
	assert_memory_equal(text, user, len);
	free(text);

	assert_int_equal(oeap_hook_uninstall(dir, "post-merge", &did, &err), 0);
	assert_int_equal(did, OEAP_HOOK_DID_RESTORE);
	assert_int_equal(access(chained, F_OK), -1);
	text = slurp(p, &len);
	assert_int_equal(len, sizeof(user) - 1);
	assert_memory_equal(text, user, len);
	free(text);
	struct stat after;
	assert_int_equal(lstat(p, &after), 0);
	assert_int_equal(after.st_mode, before.st_mode);
	assert_int_equal(after.st_ino, before.st_ino); /* the very same file, moved back */
	free(p);
	free(chained);
}

static void test_foreign_is_never_removed(void **state)
{
	const char *dir = *state;
	static const char mine[] = "#!/bin/sh\n# not oeapatch\nexit 0\n";
	char *p = path_in(dir, "pre-push"), *chained = path_in(dir, "pre-push" OEAP_HOOK_CHAINED_SUFFIX);
	oeap_hook_action did;
	oeap_hook_info info;
	oeap_error err;
	oeap_error_clear(&err);
	tu_write(p, mine, sizeof(mine) - 1);
	assert_int_equal(oeap_hook_uninstall(dir, "pre-push", &did, &err), 0);
	assert_int_equal(did, OEAP_HOOK_DID_REFUSE);
	size_t len;
	char *text = slurp(p, &len);
	assert_memory_equal(text, mine, len);
	free(text);

	/* A foreign hook where a chained one already waits: install refuses. */
	tu_write(chained, mine, sizeof(mine) - 1);
	assert_int_equal(oeap_hook_install(dir, "pre-push", &CFG, &did, &err), -1);
	assert_non_null(strstr(err.message, "refusing"));
	oeap_hook_inspect(dir, "pre-push", &info);
	assert_int_equal(info.state, OEAP_HOOK_FOREIGN);
	assert_int_equal(info.stray_chained, 1);
	/* ... and uninstall does not move the chained one over it. */
	assert_int_equal(oeap_hook_uninstall(dir, "pre-push", &did, &err), 0);
	assert_int_equal(did, OEAP_HOOK_DID_REFUSE);
	assert_int_equal(access(chained, F_OK), 0);
	free(p);
	free(chained);
}

/* Ours, with the user's lines added after install: neither uninstall nor a
 * reinstall with other settings may delete them, unless forced. */
static void test_edited_ours_is_kept(void **state)
{
	const char *dir = *state;
	char *p = path_in(dir, "post-merge");
	oeap_hook_action did;
	oeap_hook_info info;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_hook_install(dir, "post-merge", &CFG, &did, &err), 0);
	oeap_hook_inspect(dir, "post-merge", &info);
	assert_int_equal(info.edited, 0);
	size_t len;
	char *text = slurp(p, &len);
	static const char mine[] = "echo 'my own deploy step'\n";
	char *edited = malloc(len + sizeof(mine));
	assert_non_null(edited);
	memcpy(edited, text, len);
	memcpy(edited + len, mine, sizeof(mine));
	tu_write(p, edited, len + sizeof(mine) - 1);
	oeap_hook_inspect(dir, "post-merge", &info);
	assert_int_equal(info.state, OEAP_HOOK_OURS);
	assert_int_equal(info.edited, 1);

	assert_int_equal(oeap_hook_uninstall(dir, "post-merge", &did, &err), 0);
	assert_int_equal(did, OEAP_HOOK_DID_KEEP_EDITED);
	oeap_hook_config other = CFG;
	other.reapply = !CFG.reapply;
	assert_int_equal(oeap_hook_install(dir, "post-merge", &other, &did, &err), 0);
	assert_int_equal(did, OEAP_HOOK_DID_KEEP_EDITED);
	size_t n2;
	char *now = slurp(p, &n2);
	assert_int_equal(n2, len + sizeof(mine) - 1);
	assert_memory_equal(now, edited, n2);
	free(now);
	/* A line edited in the middle counts too. */
	edited[len / 2] = edited[len / 2] == 'x' ? 'y' : 'x';
	tu_write(p, edited, len);
	oeap_hook_inspect(dir, "post-merge", &info);
	assert_int_equal(info.edited, 1);

	assert_int_equal(oeap_hook_uninstall_flags(dir, "post-merge", OEAP_HOOK_FORCE, &did, &err), 0);
	assert_int_equal(did, OEAP_HOOK_DID_REMOVE);
	assert_int_equal(access(p, F_OK), -1);
	free(edited);
	free(text);
	free(p);
}

/* The post-* hooks keep their state where apply and revert write it: the
 * fragment src/scripts/hook_work_tree.sh names OEAP_HOOK_STATE_FILE as a
 * literal, which this holds to the macro. */
static void test_work_tree_hooks_name_the_state_file(void **state)
{
	(void)state;
	oeap_hook_config cfg = {"/usr/bin/oeapatch", "sglang-oea", NULL, "", "python/sglang/x.py", 0, 0};
	const char *names[] = {"post-merge", "post-checkout", "post-rewrite"};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		oeap_buf b = OEAP_BUF_INIT;
		assert_int_equal(oeap_hook_render(names[i], &cfg, &b), 0);
		assert_non_null(strstr(b.data, "record=${gitdir:+$gitdir/" OEAP_HOOK_STATE_FILE "}\n"));
		oeap_buf_free(&b);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_hooks_dir, setup, teardown),
		cmocka_unit_test(test_work_tree_hooks_name_the_state_file),
		cmocka_unit_test_setup_teardown(test_hooks_dir_worktree, setup, teardown),
		cmocka_unit_test_setup_teardown(test_install_fresh, setup, teardown),
		cmocka_unit_test_setup_teardown(test_chain_and_restore, setup, teardown),
		cmocka_unit_test_setup_teardown(test_foreign_is_never_removed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_edited_ours_is_kept, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
