/*
 * test_command.c - the steps every command runs (command.c): computed and
 * printed once, as JSON or text, on success; nothing computed after a
 * target that cannot be opened and nothing printed after an error; the
 * result freed and the checkout closed either way; and the exit code the
 * one the result, or the error, says.
 */
#include "testutil.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "command.h"
#include "opt.h"

/* What the steps below saw: a global, since the printers get a const result. */
static struct {
	int compute, json, text, freed;
	int def_loaded; /* compute ran on an opened checkout */
} seen;

typedef struct fake_result {
	int fail;      /* compute fails */
	int exit_code; /* set by compute */
} fake_result;

static int fake_compute(const oeap_cli *cli, const void *opts, void *result, oeap_error *err)
{
	fake_result *r = result;
	seen.compute++;
	seen.def_loaded = cli->def != NULL && cli->target != NULL;
	if (r->fail)
		return oeap_fail(err, OEAP_ERR_INPUT, "test", 0, "compute failed");
	r->exit_code = OEAP_EXIT_DIFFERS;
	return 0;
}

static void fake_print_json(const oeap_cli *cli, const void *opts, const void *result)
{
	seen.json++;
}

static void fake_print_text(const oeap_cli *cli, const void *opts, const void *result)
{
	seen.text++;
}

static void fake_free(void *result)
{
	seen.freed++;
}

static const oeap_command_steps steps = {fake_compute, fake_print_json, fake_print_text, fake_free};

static int setup(void **state)
{
	char path[PATH_MAX];
	char *dir = tu_tmpdir();
	const char text[] = "def select_experts():\n    pass\n";
	snprintf(path, sizeof(path), "%s/co/python/sglang/srt/layers/moe/topk.py", dir);
	tu_write(path, text, strlen(text));
	memset(&seen, 0, sizeof(seen));
	*state = dir;
	return 0;
}

static int teardown(void **state)
{
	tu_rmtree(*state);
	free(*state);
	return 0;
}

/*
 * Runs the steps on `status -C DIR/rel [--json]`, as a command does after
 * its parse, with the result's exit code or none; whatever happened, the
 * result was freed once and the checkout closed.
 */
static int run_at(const char *dir, const char *rel, int json, fake_result *r, int with_exit_code)
{
	oeap_cli cli;
	char path[PATH_MAX];
	int first = 0;
	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	char *argv[] = {(char *)"status", (char *)"-C", path, (char *)"--json", NULL};
	assert_int_equal(oeap_cli_parse(&cli, "status", "", "", (const oeap_option[]){OEAP_COMMON_OPTIONS, {0}},
	                                json ? 4 : 3, argv, NULL, &first),
	                 0);
	int rc = oeap_command_run(&cli, 1, &steps, NULL, r, with_exit_code ? &r->exit_code : NULL);
	assert_int_equal(seen.freed, 1);
	assert_null(cli.def);
	assert_null(cli.target);
	return rc;
}

static void success_prints_text_once_and_returns_the_results_exit_code(void **state)
{
	fake_result r = {0, 0};
	assert_int_equal(run_at(*state, "co", 0, &r, 1), OEAP_EXIT_DIFFERS);
	assert_int_equal(seen.compute, 1);
	assert_true(seen.def_loaded);
	assert_int_equal(seen.text, 1);
	assert_int_equal(seen.json, 0);
}

static void json_prints_json_and_no_exit_code_is_ok(void **state)
{
	fake_result r = {0, 0};
	assert_int_equal(run_at(*state, "co", 1, &r, 0), OEAP_EXIT_OK);
	assert_int_equal(seen.json, 1);
	assert_int_equal(seen.text, 0);
}

static void a_target_not_found_is_neither_computed_nor_printed(void **state)
{
	fake_result r = {0, 0};
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/none/README", (char *)*state);
	tu_write(path, "nothing here\n", 13);
	assert_int_equal(run_at(*state, "none", 0, &r, 1), OEAP_EXIT_TROUBLE);
	assert_int_equal(seen.compute, 0);
	assert_int_equal(seen.text + seen.json, 0);
}

static void a_failed_compute_is_not_printed(void **state)
{
	fake_result r = {1, 0};
	assert_int_equal(run_at(*state, "co", 1, &r, 1), OEAP_EXIT_TROUBLE);
	assert_int_equal(seen.compute, 1);
	assert_int_equal(seen.text + seen.json, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(success_prints_text_once_and_returns_the_results_exit_code, setup, teardown),
		cmocka_unit_test_setup_teardown(json_prints_json_and_no_exit_code_is_ok, setup, teardown),
		cmocka_unit_test_setup_teardown(a_target_not_found_is_neither_computed_nor_printed, setup, teardown),
		cmocka_unit_test_setup_teardown(a_failed_compute_is_not_printed, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
