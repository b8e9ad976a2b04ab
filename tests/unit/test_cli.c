/*
 * test_cli.c - what every command shares (cli.c): finding the root from -C
 * (a checkout or site-packages, searched upward), the definition's
 * installed_target, the not-found message, the JSON head whose "ok" is the
 * exit status, and the re-apply hint.
 */
#include "testutil.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "opt.h"

typedef struct fixture {
	char *dir;
	char *real; /* dir, symlinks resolved (what root is compared with) */
} fixture;

static const char CHECKOUT_TARGET[] = "co/python/sglang/srt/layers/moe/topk.py";
static const char INSTALLED_TARGET[] = "sp/sglang/srt/layers/moe/topk.py";

static void put(const fixture *f, const char *rel, const char *text)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", f->dir, rel);
	tu_write(path, text, strlen(text));
}

static int setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	f->dir = tu_tmpdir();
	f->real = realpath(f->dir, NULL);
	put(f, CHECKOUT_TARGET, "def select_experts():\n    pass\n");
	put(f, INSTALLED_TARGET, "def select_experts():\n    pass\n");
	put(f, "none/README", "nothing here\n");
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fixture *f = *state;
	tu_rmtree(f->dir);
	free(f->dir);
	free(f->real);
	free(f);
	return 0;
}

/* Parses `status -C DIR [extra]` and opens it; returns oeap_cli_open's result. */
static int open_at(const fixture *f, const char *rel, const char *patch, int need_target, oeap_cli *cli,
                   oeap_error *err)
{
	char dir[PATH_MAX];
	int first = 0;
	snprintf(dir, sizeof(dir), "%s/%s", f->dir, rel);
	char *argv[] = {(char *)"status", (char *)"-C", dir, (char *)"--patch", (char *)patch, NULL};
	int argc = patch ? 5 : 3;
	assert_int_equal(oeap_cli_parse(cli, "status", "", "", (const oeap_option[]){OEAP_COMMON_OPTIONS, {0}}, argc,
	                                argv, NULL, &first),
	                 0);
	oeap_error_clear(err);
	return oeap_cli_open(cli, need_target, err);
}

static void expect_root(const fixture *f, const oeap_cli *cli, const char *root_rel)
{
	char want[PATH_MAX];
	snprintf(want, sizeof(want), "%s/%s", f->real, root_rel);
	assert_string_equal(cli->root, want);
}

static void checkout_found_from_a_subdirectory(void **state)
{
	fixture *f = *state;
	oeap_cli cli;
	oeap_error err;
	assert_int_equal(open_at(f, "co/python/sglang/srt", NULL, 1, &cli, &err), 0);
	assert_int_equal(cli.layout, OEAP_LAYOUT_CHECKOUT);
	expect_root(f, &cli, "co");
	assert_string_equal(oeap_cli_target_rel(&cli), "python/sglang/srt/layers/moe/topk.py");
	assert_string_equal(oeap_cli_layout_name(&cli), "checkout");
	oeap_cli_close(&cli);
}

/* A checkout's python/ folder holds sglang/ as site-packages does: it is
 * still the checkout (the same file), not an installed package. */
static void checkout_python_folder_is_the_checkout(void **state)
{
	fixture *f = *state;
	oeap_cli cli;
	oeap_error err;
	assert_int_equal(open_at(f, "co/python", NULL, 1, &cli, &err), 0);
	assert_int_equal(cli.layout, OEAP_LAYOUT_CHECKOUT);
	expect_root(f, &cli, "co");
	oeap_cli_close(&cli);
}

static void installed_found_from_inside_site_packages(void **state)
{
	fixture *f = *state;
	oeap_cli cli;
	oeap_error err;
	assert_int_equal(open_at(f, "sp/sglang/srt/layers", NULL, 1, &cli, &err), 0);
	assert_int_equal(cli.layout, OEAP_LAYOUT_INSTALLED);
	expect_root(f, &cli, "sp");
	assert_string_equal(oeap_cli_target_rel(&cli), "sglang/srt/layers/moe/topk.py");
	assert_string_equal(oeap_cli_layout_name(&cli), "installed");
	char want[PATH_MAX];
	snprintf(want, sizeof(want), "%s/%s", f->real, INSTALLED_TARGET);
	assert_string_equal(cli.target, want);
	oeap_cli_close(&cli);
}

static void not_found_says_what_C_takes(void **state)
{
	fixture *f = *state;
	oeap_cli cli;
	oeap_error err;
	/* The message of one definition named by --patch (detection's own, over
	 * every bundled definition, is tested by tests/e2e/test_detect.sh). */
	assert_int_equal(open_at(f, "none", "sglang-oea", 1, &cli, &err), -1);
	assert_int_equal(oeap_error_exit_code(&err), OEAP_EXIT_TROUBLE);
	assert_non_null(strstr(err.message, "or any folder above it"));
	assert_non_null(strstr(err.message, "nor sglang/srt/layers/moe/topk.py, as installed"));
	assert_non_null(strstr(err.message, "site-packages"));
	assert_non_null(strstr(err.message, "--python PATH"));
	oeap_cli_close(&cli);
}

/* check and hook act on repositories that may have no work tree. */
static void without_need_target_the_folder_itself_is_the_root(void **state)
{
	fixture *f = *state;
	oeap_cli cli;
	oeap_error err;
	assert_int_equal(open_at(f, "none", "sglang-oea", 0, &cli, &err), 0);
	assert_int_equal(cli.layout, OEAP_LAYOUT_NONE);
	expect_root(f, &cli, "none");
	assert_string_equal(oeap_cli_target_rel(&cli), "python/sglang/srt/layers/moe/topk.py");
	oeap_cli_close(&cli);
}

static void json_head_ok_is_exit_zero(void **state)
{
	(void)state;
	oeap_cli cli;
	memset(&cli, 0, sizeof(cli));
	cli.command = "status";
	const int codes[] = {OEAP_EXIT_OK, OEAP_EXIT_DIFFERS, OEAP_EXIT_TROUBLE};
	for (size_t i = 0; i < 3; i++) {
		json_t *j = oeap_cli_json_head(&cli, codes[i]);
		assert_string_equal(json_string_value(json_object_get(j, "command")), "status");
		assert_int_equal(json_is_true(json_object_get(j, "ok")), codes[i] == OEAP_EXIT_OK);
		json_decref(j);
	}
}

static void apply_hint_names_the_root_or_the_interpreter(void **state)
{
	fixture *f = *state;
	oeap_cli cli;
	oeap_error err;
	char want[PATH_MAX + 64];
	assert_int_equal(open_at(f, "sp/sglang", NULL, 1, &cli, &err), 0);
	snprintf(want, sizeof(want), "oeapatch apply -C %s/sp", f->real);
	assert_string_equal(oeap_cli_apply_hint(&cli), want);
	/* The interpreter as the user named it, made absolute but not resolved
	 * (a venv's python is a symlink out of the venv), quoted for a shell. */
	cli.python = "venv dir/bin/python";
	char cwd[PATH_MAX];
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	snprintf(want, sizeof(want), "oeapatch apply --python '%s/venv dir/bin/python'", cwd);
	assert_string_equal(oeap_cli_apply_hint(&cli), want);
	oeap_cli_close(&cli);
}

/* A definition copy whose patch.ini has `installed_target = VALUE` (NULL: the line removed). */
static char *def_copy(const fixture *f, const char *name, const char *value)
{
	char *dir = malloc(PATH_MAX);
	assert_non_null(dir);
	snprintf(dir, PATH_MAX, "%s/defs/%s", f->dir, name);
	tu_copy_definition(dir); /* patch.ini is written again below */
	size_t len;
	char *ini = tu_read("patches/sglang-oea/patch.ini", &len), *out = malloc(len + 512);
	assert_non_null(out);
	char *line = strstr(ini, "\ninstalled_target = ");
	assert_non_null(line);
	char *eol = strchr(line + 1, '\n');
	snprintf(out, len + 512, "%.*s%s%s%s", (int)(line - ini), ini, value ? "\ninstalled_target = " : "",
	         value ? value : "", eol);
	char path[PATH_MAX * 2];
	snprintf(path, sizeof(path), "%s/patch.ini", dir);
	tu_write(path, out, strlen(out));
	free(out);
	free(ini);
	return dir;
}

static void installed_target_must_be_a_package_path(void **state)
{
	fixture *f = *state;
	const char *bad[] = {"/abs/sglang/topk.py", "../sglang/topk.py", "topk.py", ""};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char name[32];
		snprintf(name, sizeof(name), "bad%zu", i);
		char *dir = def_copy(f, name, bad[i]);
		oeap_patchdef *def = NULL;
		oeap_error err;
		oeap_error_clear(&err);
		assert_int_equal(oeap_patchdef_load(dir, &def, &err), -1);
		assert_int_equal(err.kind, OEAP_ERR_DEFINITION);
		free(dir);
	}
}

/* Without installed_target only checkouts are found, and the message does
 * not promise an installed layout. */
static void without_installed_target_only_checkouts(void **state)
{
	fixture *f = *state;
	char *dir = def_copy(f, "checkout-only", NULL);
	oeap_cli cli;
	oeap_error err;
	assert_int_equal(open_at(f, "sp/sglang", dir, 1, &cli, &err), -1);
	assert_null(strstr(err.message, "as installed"));
	oeap_cli_close(&cli);
	assert_int_equal(open_at(f, "co/python/sglang", dir, 1, &cli, &err), 0);
	assert_int_equal(cli.layout, OEAP_LAYOUT_CHECKOUT);
	oeap_cli_close(&cli);
	free(dir);
}

/* A command's options bound to its struct (opt.h): a switch, a value with a short letter, a long-only
 * value, a callback; two names for one field; the last value wins; operands after options (GNU order). */
typedef struct bound_opts {
	int sw, other;
	const char *val, *long_only;
	int calls;
	const char *last_arg;
} bound_opts;

static int on_cb(const char *arg, void *user)
{
	bound_opts *o = user;
	o->calls++;
	o->last_arg = arg;
	return 0;
}

static void options_bind_to_fields(void **state)
{
	(void)state;
	static const oeap_option opts[] = {
		OEAP_COMMON_OPTIONS,
		OEAP_OPT_SWITCH("switch", 0, bound_opts, sw, "a switch"),
		OEAP_OPT_SWITCH("alias", 0, bound_opts, sw, "the same switch"),
		OEAP_OPT_SWITCH("other", 'o', bound_opts, other, "another"),
		OEAP_OPT_VALUE("value", 'v', "X", bound_opts, val, "a value"),
		OEAP_OPT_VALUE("long-only", 0, "Y", bound_opts, long_only, "a long-only value"),
		OEAP_OPT_CALLBACK("cb", 0, "Z", on_cb, "a callback"),
		OEAP_OPT_END,
	};
	char *argv[] = {(char *)"status", (char *)"--alias", (char *)"-v", (char *)"one", (char *)"operand",
	                (char *)"--value=two", (char *)"--long-only", (char *)"y", (char *)"--cb", (char *)"z1",
	                (char *)"--cb=z2", (char *)"-o", NULL};
	bound_opts o;
	memset(&o, 0, sizeof(o));
	oeap_cli cli;
	int first = 0;
	assert_int_equal(oeap_cli_parse(&cli, "status", "", "", opts, 12, argv, &o, &first), 0);
	assert_int_equal(o.sw, 1);
	assert_int_equal(o.other, 1);
	assert_string_equal(o.val, "two");
	assert_string_equal(o.long_only, "y");
	assert_int_equal(o.calls, 2);
	assert_string_equal(o.last_arg, "z2");
	assert_int_equal(first, 11);
	assert_string_equal(argv[first], "operand");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(checkout_found_from_a_subdirectory, setup, teardown),
		cmocka_unit_test_setup_teardown(checkout_python_folder_is_the_checkout, setup, teardown),
		cmocka_unit_test_setup_teardown(installed_found_from_inside_site_packages, setup, teardown),
		cmocka_unit_test_setup_teardown(not_found_says_what_C_takes, setup, teardown),
		cmocka_unit_test_setup_teardown(without_need_target_the_folder_itself_is_the_root, setup, teardown),
		cmocka_unit_test(json_head_ok_is_exit_zero),
		cmocka_unit_test_setup_teardown(apply_hint_names_the_root_or_the_interpreter, setup, teardown),
		cmocka_unit_test_setup_teardown(installed_target_must_be_a_package_path, setup, teardown),
		cmocka_unit_test_setup_teardown(without_installed_target_only_checkouts, setup, teardown),
		cmocka_unit_test(options_bind_to_fields),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
