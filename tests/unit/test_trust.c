/*
 * test_trust.c - the trust rule for what the server runs or loads: owners,
 * group and other write bits, sticky directories, links followed step by
 * step. Runs as root (as the suite does): "another user" is uid 65534.
 */
#include "testutil.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trust.h"

#define NOBODY 65534

/* Each test gets a fresh 0700 directory under /tmp (sticky, root's): tu_dir
 * (tu_dir_setup, tu_dir_teardown), its paths tu_at(REL). */

static void mkdir_mode(const char *rel, mode_t mode)
{
	assert_int_equal(mkdir(tu_at(rel), 0700), 0);
	assert_int_equal(chmod(tu_at(rel), mode), 0);
}

static void file_mode(const char *rel, mode_t mode)
{
	tu_write(tu_at(rel), "x", 1);
	assert_int_equal(chmod(tu_at(rel), mode), 0);
}

static int check(const char *rel, uid_t owner, oeap_trust_problem *p)
{
	return oeap_trust_check(tu_at(rel), owner, p);
}

static void owner_only_everywhere_passes(void **state)
{
	(void)state;
	oeap_trust_problem p;
	mkdir_mode("lib", 0700);
	file_mode("lib/liboea.so", 0600);
	assert_int_equal(check("lib/liboea.so", 0, &p), 0);
	/* the usual umask 022 */
	mkdir_mode("lib/usual", 0755);
	file_mode("lib/usual/liboea.so", 0644);
	assert_int_equal(check("lib/usual/liboea.so", 0, &p), 0);
}

static void world_writable_file_fails(void **state)
{
	(void)state;
	oeap_trust_problem p;
	file_mode("liboea.so", 0666);
	assert_int_equal(check("liboea.so", 0, &p), 1);
	assert_string_equal(p.path, tu_at("liboea.so"));
	assert_int_equal(p.mode, 0666);
	assert_non_null(strstr(p.message, "writable by others"));
	assert_non_null(strstr(p.message, "mode 0666"));
	assert_non_null(strstr(p.message, "uid 0"));
	char fix[PATH_MAX + 32];
	snprintf(fix, sizeof(fix), "`chmod go-w %s`", tu_at("liboea.so"));
	assert_non_null(strstr(p.message, fix));
}

static void group_writable_file_fails(void **state)
{
	(void)state;
	oeap_trust_problem p;
	file_mode("liboea.so", 0664);
	assert_int_equal(check("liboea.so", 0, &p), 1);
	assert_non_null(strstr(p.message, "writable by its group"));
}

static void world_writable_directory_fails(void **state)
{
	(void)state;
	oeap_trust_problem p;
	mkdir_mode("open", 0777);
	file_mode("open/liboea.so", 0644);
	assert_int_equal(check("open/liboea.so", 0, &p), 1);
	assert_string_equal(p.path, tu_at("open"));
	assert_int_equal(p.mode, 0777);
}

static void sticky_directory_with_a_good_entry_passes(void **state)
{
	(void)state;
	oeap_trust_problem p;
	/* /tmp's shape: 1777, and below it a root-owned 0755 directory. */
	mkdir_mode("tmp", 01777);
	mkdir_mode("tmp/root", 0755);
	file_mode("tmp/root/liboea.so", 0644);
	assert_int_equal(check("tmp/root/liboea.so", 0, &p), 0);
	/* but not an entry another user owns: that user can replace it */
	mkdir_mode("tmp/theirs", 0755);
	assert_int_equal(chown(tu_at("tmp/theirs"), NOBODY, NOBODY), 0);
	file_mode("tmp/theirs/liboea.so", 0644);
	assert_int_equal(check("tmp/theirs/liboea.so", 0, &p), 1);
	assert_string_equal(p.path, tu_at("tmp/theirs"));
	assert_non_null(strstr(p.message, "uid 65534"));
	assert_non_null(strstr(p.message, "chown root"));
	/* nor a world-writable file directly in it */
	file_mode("tmp/liboea.so", 0666);
	assert_int_equal(check("tmp/liboea.so", 0, &p), 1);
	assert_string_equal(p.path, tu_at("tmp/liboea.so"));
}

static void the_targets_owner_is_trusted(void **state)
{
	(void)state;
	oeap_trust_problem p;
	/* A developer's tree: everything theirs, the target too. */
	mkdir_mode("home", 0755);
	assert_int_equal(chown(tu_at("home"), NOBODY, NOBODY), 0);
	file_mode("home/liboea.so", 0644);
	assert_int_equal(chown(tu_at("home/liboea.so"), NOBODY, NOBODY), 0);
	assert_int_equal(check("home/liboea.so", NOBODY, &p), 0);
	/* the same files for a root-owned target: refused, naming the first */
	assert_int_equal(check("home/liboea.so", 0, &p), 1);
	assert_string_equal(p.path, tu_at("home"));
	uid_t owner = 12345;
	assert_int_equal(oeap_trust_target_owner(tu_at("home/liboea.so"), &owner), 0);
	assert_int_equal(owner, NOBODY);
	assert_int_equal(oeap_trust_target_owner(tu_at("missing"), &owner), -1);
}

static void links_are_followed_and_each_step_checked(void **state)
{
	(void)state;
	oeap_trust_problem p;
	mkdir_mode("good", 0755);
	mkdir_mode("open", 0777);
	file_mode("good/liboea.so", 0644);
	file_mode("open/liboea.so", 0644);
	/* a good link to a file in a world-writable directory: the target's chain fails */
	assert_int_equal(symlink("../open/liboea.so", tu_at("good/to-open")), 0);
	assert_int_equal(check("good/to-open", 0, &p), 1);
	assert_string_equal(p.path, tu_at("open"));
	/* a link in a world-writable directory to a good file: the link's directory fails */
	assert_int_equal(symlink(tu_at("good/liboea.so"), tu_at("open/to-good")), 0);
	assert_int_equal(check("open/to-good", 0, &p), 1);
	assert_string_equal(p.path, tu_at("open"));
	/* good link, good target, relative with ".." */
	assert_int_equal(symlink("../good/./liboea.so", tu_at("good/../good/rel")), 0);
	assert_int_equal(check("good/rel", 0, &p), 0);
	/* a link owned by another user in a sticky directory: they can replace it */
	mkdir_mode("sticky", 01777);
	assert_int_equal(symlink(tu_at("good/liboea.so"), tu_at("sticky/link")), 0);
	assert_int_equal(check("sticky/link", 0, &p), 0);
	assert_int_equal(lchown(tu_at("sticky/link"), NOBODY, NOBODY), 0);
	assert_int_equal(check("sticky/link", 0, &p), 1);
	assert_string_equal(p.path, tu_at("sticky/link"));
	/* a directory link: what it points to is walked through */
	assert_int_equal(symlink("open", tu_at("dirlink")), 0);
	assert_int_equal(check("dirlink/liboea.so", 0, &p), 1);
	assert_string_equal(p.path, tu_at("open"));
}

static void what_cannot_be_walked_is_an_error(void **state)
{
	(void)state;
	oeap_trust_problem p;
	assert_int_equal(check("missing/liboea.so", 0, &p), -1);
	assert_string_equal(p.path, tu_at("missing"));
	assert_non_null(strstr(p.message, "No such file"));
	assert_int_equal(symlink("loop", tu_at("loop")), 0);
	assert_int_equal(check("loop", 0, &p), -1);
	file_mode("file", 0644);
	assert_int_equal(check("file/below", 0, &p), -1);
}

static void a_relative_path_is_taken_from_the_current_directory(void **state)
{
	(void)state;
	oeap_trust_problem p;
	char cwd[PATH_MAX];
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	mkdir_mode("open", 0777);
	file_mode("open/liboea.so", 0644);
	assert_int_equal(chdir(tu_dir), 0);
	int rc = oeap_trust_check("open/liboea.so", 0, &p);
	assert_int_equal(chdir(cwd), 0);
	assert_int_equal(rc, 1);
	assert_string_equal(p.path, tu_at("open"));
}

/* The library the suite and scripts/demo use: a fresh clone's build tree. */
static void the_build_trees_library_passes(void **state)
{
	(void)state;
	oeap_trust_problem p;
	const char *lib = getenv("OEA_LIBRARY");
	if (!lib)
		skip();
	assert_int_equal(oeap_trust_check(lib, 0, &p), 0);
}

/* A path too long for the message with its fix: the message gives the
 * reason without the fix, never a command cut inside the path (it would
 * name another file, or leave a quote open). */
static void a_long_path_never_gets_a_cut_fix(void **state)
{
	(void)state;
	oeap_trust_problem p;
	char rel[900];
	size_t n = 0;
	for (int i = 0; i < 3; i++) {
		n += (size_t)snprintf(rel + n, sizeof(rel) - n, "%s%.*s", i ? "/" : "", 250,
		                      "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd"
		                      "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd"
		                      "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd");
		mkdir_mode(rel, 0700);
	}
	assert_int_equal(chmod(tu_at(rel), 0770), 0);
	assert_int_equal(check(rel, 0, &p), 1);
	assert_string_equal(p.path, tu_at(rel));
	assert_non_null(strstr(p.message, "is writable by its group"));
	assert_null(strchr(p.message, '`'));
	/* a short one keeps its fix */
	mkdir_mode("short", 0770);
	assert_int_equal(check("short", 0, &p), 1);
	char want[PATH_MAX + 32];
	snprintf(want, sizeof(want), "`chmod go-w %s`", tu_at("short"));
	assert_non_null(strstr(p.message, want));
}

/* The sticky bit exempts folders only: on a file it means nothing of the
 * kind, and a world-writable sticky file can be rewritten by anyone. */
static void sticky_file_is_not_exempt(void **state)
{
	(void)state;
	oeap_trust_problem p;
	mkdir_mode("lib", 0755);
	file_mode("lib/liboea.so", 01666);
	assert_int_equal(check("lib/liboea.so", 0, &p), 1);
	assert_string_equal(p.path, tu_at("lib/liboea.so"));
	assert_int_equal(p.mode, 01666);
	assert_non_null(strstr(p.message, "writable by others"));
	file_mode("lib/group.so", 01664);
	assert_int_equal(check("lib/group.so", 0, &p), 1);
	assert_non_null(strstr(p.message, "writable by its group"));
}

/* In a folder the import system lists (site-packages, a package folder,
 * __pycache__), adding an entry is enough: the sticky bit does not exempt
 * it, or any folder below it; above it, it still does (only replacing
 * matters there). */
static void sticky_listed_folder_fails(void **state)
{
	(void)state;
	oeap_trust_problem p;
	char listed[PATH_MAX];
	mkdir_mode("tmp", 01777);
	mkdir_mode("tmp/site", 0755);
	mkdir_mode("tmp/site/pkg", 01777);
	file_mode("tmp/site/pkg/topk.py", 0644);
	snprintf(listed, sizeof(listed), "%s", tu_at("tmp/site"));
	/* the plain rule: sticky, so it passes */
	assert_int_equal(oeap_trust_check(tu_at("tmp/site/pkg/topk.py"), 0, &p), 0);
	/* listed from site/: pkg/ is a package folder */
	assert_int_equal(oeap_trust_check_listed(tu_at("tmp/site/pkg/topk.py"), 0, listed, &p), 1);
	assert_string_equal(p.path, tu_at("tmp/site/pkg"));
	assert_non_null(strstr(p.message, "sticky, but the import system lists this folder"));
	assert_non_null(strstr(p.message, "`chmod go-w "));
	/* tmp/ is above what is listed: still exempt */
	assert_int_equal(chmod(tu_at("tmp/site/pkg"), 0755), 0);
	assert_int_equal(oeap_trust_check_listed(tu_at("tmp/site/pkg/topk.py"), 0, listed, &p), 0);
	/* the listed folder itself (site-packages: its .pth files) */
	assert_int_equal(chmod(tu_at("tmp/site"), 01777), 0);
	assert_int_equal(oeap_trust_check_listed(tu_at("tmp/site/pkg/topk.py"), 0, listed, &p), 1);
	assert_string_equal(p.path, tu_at("tmp/site"));
	/* a sticky listed folder nobody else can write is fine */
	assert_int_equal(chmod(tu_at("tmp/site"), 01755), 0);
	assert_int_equal(oeap_trust_check_listed(tu_at("tmp/site/pkg/topk.py"), 0, listed, &p), 0);
	/* a prefix that only shares the name's start is not below it */
	mkdir_mode("tmp/site2", 01777);
	file_mode("tmp/site2/x.py", 0644);
	assert_int_equal(oeap_trust_check_listed(tu_at("tmp/site2/x.py"), 0, listed, &p), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(owner_only_everywhere_passes, tu_dir_setup, tu_dir_teardown),
		cmocka_unit_test_setup_teardown(world_writable_file_fails, tu_dir_setup, tu_dir_teardown),
		cmocka_unit_test_setup_teardown(group_writable_file_fails, tu_dir_setup, tu_dir_teardown),
		cmocka_unit_test_setup_teardown(world_writable_directory_fails, tu_dir_setup, tu_dir_teardown),
		cmocka_unit_test_setup_teardown(sticky_directory_with_a_good_entry_passes, tu_dir_setup, tu_dir_teardown),
		cmocka_unit_test_setup_teardown(sticky_file_is_not_exempt, tu_dir_setup, tu_dir_teardown),
		cmocka_unit_test_setup_teardown(sticky_listed_folder_fails, tu_dir_setup, tu_dir_teardown),
		cmocka_unit_test_setup_teardown(the_targets_owner_is_trusted, tu_dir_setup, tu_dir_teardown),
		cmocka_unit_test_setup_teardown(links_are_followed_and_each_step_checked, tu_dir_setup, tu_dir_teardown),
		cmocka_unit_test_setup_teardown(what_cannot_be_walked_is_an_error, tu_dir_setup, tu_dir_teardown),
		cmocka_unit_test_setup_teardown(a_relative_path_is_taken_from_the_current_directory, tu_dir_setup, tu_dir_teardown),
		cmocka_unit_test_setup_teardown(the_build_trees_library_passes, tu_dir_setup, tu_dir_teardown),
		cmocka_unit_test_setup_teardown(a_long_path_never_gets_a_cut_fix, tu_dir_setup, tu_dir_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
