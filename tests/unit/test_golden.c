/*
 * Golden tests: every era and odd-but-valid variant of topk.py, patched by
 * the pipeline, must equal its reviewed expected output byte for byte,
 * verify, be a no-op on a second apply, and revert to the input exactly.
 * The cases are listed in tests/golden/cases.txt.
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>

#include "pipeline.h"

static void check_case(const oeap_patchdef *def, const char *name, const char *fixture)
{
	char rel[512];
	size_t in_len = 0, want_len = 0;
	snprintf(rel, sizeof(rel), "tests/fixtures/%s", fixture);
	char *in = tu_read(rel, &in_len);
	snprintf(rel, sizeof(rel), "tests/golden/%s.expected.py", name);
	char *want = tu_read(rel, &want_len);
	oeap_outcome o, again, back;
	oeap_report rep;
	oeap_error err;
	oeap_error_clear(&err);

	if (oeap_apply_bytes(def, in, in_len, fixture, &o, &err))
		fail_msg("%s: apply failed: %s: %s", name, err.where, err.message);
	assert_int_equal(o.before, OEAP_STATE_CLEAN);
	assert_true(o.changed);
	if (o.out_len != want_len || memcmp(o.out, want, want_len) != 0)
		fail_msg("%s: apply output differs from tests/golden/%s.expected.py (run tests/golden/regen.sh "
		         "and review)", name, name);

	assert_int_equal(oeap_verify_bytes(def, o.out, o.out_len, fixture, &rep), 0);
	for (size_t i = 0; i < rep.n; i++)
		if (!rep.checks[i].ok)
			fail_msg("%s: verify check %s failed: %s", name, rep.checks[i].name, rep.checks[i].detail);
	assert_true(rep.ok);
	assert_true(rep.applied);
	assert_int_equal(rep.version, def->version);
	oeap_report_free(&rep);

	assert_int_equal(oeap_apply_bytes(def, o.out, o.out_len, fixture, &again, &err), 0);
	assert_int_equal(again.before, OEAP_STATE_APPLIED);
	assert_false(again.changed);
	assert_int_equal(again.out_len, o.out_len);
	assert_memory_equal(again.out, o.out, o.out_len);

	assert_int_equal(oeap_revert_bytes(def, o.out, o.out_len, fixture, 0, &back, &err), 0);
	assert_true(back.changed);
	assert_int_equal(back.out_len, in_len);
	assert_memory_equal(back.out, in, in_len);

	oeap_outcome_free(&o);
	oeap_outcome_free(&again);
	oeap_outcome_free(&back);
	free(in);
	free(want);
}

/* A case's definition: the third column of cases.txt names a bundled one
 * (vllm-oea); without it, sglang-oea. */
static oeap_patchdef *case_def(const char *name)
{
	char path[PATH_MAX];
	oeap_patchdef *def = NULL;
	oeap_error err;
	oeap_error_clear(&err);
	snprintf(path, sizeof(path), "%s/patches/%s", tu_source_dir(), name);
	if (oeap_patchdef_load(path, &def, &err))
		fail_msg("cannot load %s: %s: %s", path, err.where, err.message);
	return def;
}

static void test_golden_cases(void **state)
{
	(void)state;
	oeap_patchdef *sglang = tu_def();
	char *cases = tu_read("tests/golden/cases.txt", NULL);
	int n = 0, others = 0;
	for (char *save = NULL, *line = strtok_r(cases, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char name[128], fixture[256], defname[64];
		int fields = line[0] == '#' ? 0 : sscanf(line, "%127s %255s %63s", name, fixture, defname);
		if (fields < 2)
			continue;
		oeap_patchdef *def = fields == 3 ? case_def(defname) : sglang;
		check_case(def, name, fixture);
		print_message("golden %-18s ok (%s)\n", name, def->name);
		if (def != sglang) {
			oeap_patchdef_free(def);
			others++;
		}
		n++;
	}
	assert_true(n >= 13);
	assert_true(others >= 4); /* vLLM's four eras */
	free(cases);
	oeap_patchdef_free(sglang);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_golden_cases),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
