/*
 * test_importsys.c - the C rules that stand in for the interpreter with -C:
 * which entry of a folder the import system picks before NAME.py (FileFinder's
 * order: package folder with an __init__, then CPython 3's extension suffixes),
 * and where a pycache prefix puts a source's bytecode (cache_from_source).
 * e2e/test_import.sh checks both against the real import system.
 */
#include "testutil.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "importsys.h"
#include "pycache.h"

/* Each test gets a fresh 0700 directory under /tmp (sticky, root's): tu_dir
 * (tu_dir_setup, tu_dir_teardown), its paths tu_at(REL). */

/* 1 when something in dir wins over NAME.py; *won gets its name relative to dir. */
static int winner(const char *name, const char **won)
{
	static char out[PATH_MAX * 2];
	const char *why = NULL;
	int rc = oeap_import_c_winner(tu_dir, name, out, sizeof(out), &why);
	*won = rc ? out + strlen(tu_dir) + 1 : NULL;
	if (rc)
		assert_non_null(why);
	return rc;
}

static void test_extension_suffixes_win(void **state)
{
	(void)state;
	const char *won;
	tu_write(tu_at("topk.py"), "x = 1\n", 6);
	assert_int_equal(winner("topk", &won), 0);
	static const char *wins[] = {"topk.so", "topk.abi3.so", "topk.cpython-311-x86_64-linux-gnu.so",
	                             "topk.cpython-313t-x86_64-linux-gnu.so"};
	for (size_t i = 0; i < sizeof(wins) / sizeof(wins[0]); i++) {
#if !defined(__x86_64__) || defined(__ILP32__)
		if (strstr(wins[i], "x86_64"))
			continue;
#endif
		tu_write(tu_at(wins[i]), "", 0);
		assert_int_equal(winner("topk", &won), 1);
		assert_string_equal(won, wins[i]);
		assert_int_equal(unlink(tu_at(wins[i])), 0);
	}
	/* not an extension suffix of this machine's CPython 3 */
	static const char *loses[] = {"topk.cpython-311-other-arch.so", "topk.pypy39-pp73-x86_64-linux-gnu.so",
	                              "topk.cpython-27-x86_64-linux-gnu.sox", "topkx.so", "topk.abi4.so"};
	for (size_t i = 0; i < sizeof(loses) / sizeof(loses[0]); i++) {
		tu_write(tu_at(loses[i]), "", 0);
		assert_int_equal(winner("topk", &won), 0);
		assert_int_equal(unlink(tu_at(loses[i])), 0);
	}
	/* a folder of that name is no extension module */
	assert_int_equal(mkdir(tu_at("topk.so"), 0755), 0);
	assert_int_equal(winner("topk", &won), 0);
}

static void test_package_folder_wins_with_an_init(void **state)
{
	(void)state;
	const char *won;
	tu_write(tu_at("topk.py"), "x = 1\n", 6);
	assert_int_equal(mkdir(tu_at("topk"), 0755), 0);
	/* no __init__: a namespace portion, which loses to topk.py */
	assert_int_equal(winner("topk", &won), 0);
	tu_write(tu_at("topk/__init__.pyc"), "", 0);
	assert_int_equal(winner("topk", &won), 1);
	assert_string_equal(won, "topk/__init__.pyc");
	tu_write(tu_at("topk/__init__.py"), "", 0);
	assert_int_equal(winner("topk", &won), 1);
	assert_string_equal(won, "topk/__init__.py");
	/* the package wins over an extension module too */
	tu_write(tu_at("topk.abi3.so"), "", 0);
	assert_int_equal(winner("topk", &won), 1);
	assert_string_equal(won, "topk/__init__.py");
}

static void test_prefix_dir(void **state)
{
	(void)state;
	char out[PATH_MAX * 2], cwd[PATH_MAX];
	/* cache_from_source: the prefix, then the source's absolute folder */
	assert_int_equal(oeap_pyc_prefix_dir("/var/cache/pyc", "/opt/venv/lib/sglang/topk.py", out, sizeof(out)), 0);
	assert_string_equal(out, "/var/cache/pyc/opt/venv/lib/sglang");
	assert_int_equal(oeap_pyc_prefix_dir("/var/cache/pyc//", "/topk.py", out, sizeof(out)), 0);
	assert_string_equal(out, "/var/cache/pyc");
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(oeap_pyc_prefix_dir("/p", "rel/topk.py", out, sizeof(out)), 0);
	char want[PATH_MAX * 2];
	snprintf(want, sizeof(want), "/p%s/rel", strcmp(cwd, "/") ? cwd : "");
	assert_string_equal(out, want);
	assert_int_equal(oeap_pyc_prefix_dir("/p", "/a/topk.py", out, 4), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_extension_suffixes_win, tu_dir_setup, tu_dir_teardown),
		cmocka_unit_test_setup_teardown(test_package_folder_wins_with_an_init, tu_dir_setup, tu_dir_teardown),
		cmocka_unit_test_setup_teardown(test_prefix_dir, tu_dir_setup, tu_dir_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
