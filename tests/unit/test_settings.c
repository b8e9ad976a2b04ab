/*
 * test_settings.c - the settings rules of a patch definition ([setting:NAME]
 * in patch.ini: loaded, and broken copies refused), the value rule, the
 * check of an environment against the rules (errors, warnings, the switch,
 * cross rules, typos), and systemd's EnvironmentFile= syntax.
 */
#include "testutil.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsio.h"
#include "patchdef.h"
#include "settings.h"
#include "startup.h"

/* ------------------------------------------------------------ the rules as data */

static void test_real_rules(void **state)
{
	(void)state;
	oeap_patchdef *def = tu_def();
	assert_string_equal(def->env_prefix, "SGLANG_OEA_");
	assert_int_equal(def->nsettings, 12);
	static const struct {
		const char *name, *key;
		oeap_setting_type type;
		long long min, max;
		const char *def, *at_least;
		int sw;
	} want[] = {
		{"SGLANG_OEA_K0", "k0", OEAP_SETTING_INT, 0, 15, "0", NULL, 1},
		{"SGLANG_OEA_MIN_BATCH", "min_batch", OEAP_SETTING_INT, 1, INT32_MAX, "2", NULL, 0},
		{"SGLANG_OEA_MAX_TOKENS", "max_tokens", OEAP_SETTING_INT, 1, 1024, "1024", "SGLANG_OEA_MIN_BATCH", 0},
		{"SGLANG_OEA_STRICT", "strict", OEAP_SETTING_BOOL, INT32_MIN, INT32_MAX, "true", NULL, 0},
		{"SGLANG_OEA_SPECULATIVE", "speculative", OEAP_SETTING_BOOL, INT32_MIN, INT32_MAX, "false", NULL, 0},
		{"SGLANG_OEA_STATS", "stats", OEAP_SETTING_BOOL, INT32_MIN, INT32_MAX, "false", NULL, 0},
		{"SGLANG_OEA_STATS_INTERVAL", "stats_interval", OEAP_SETTING_INT, 1, INT32_MAX, "60", NULL, 0},
		{"SGLANG_OEA_LIBRARY", "library", OEAP_SETTING_PATH, INT32_MIN, INT32_MAX, NULL, NULL, 0},
		{"SGLANG_OEA_ALLOW_UNTRUSTED", "allow_untrusted", OEAP_SETTING_BOOL, INT32_MIN, INT32_MAX, "false", NULL, 0},
		{"SGLANG_OEA_MODE", "mode", OEAP_SETTING_CHOICE, INT32_MIN, INT32_MAX, "on", NULL, 0},
		{"SGLANG_OEA_RECORD", "record", OEAP_SETTING_OUTPUT, INT32_MIN, INT32_MAX, NULL, NULL, 0},
		{"SGLANG_OEA_RECORD_CAP", "record_cap", OEAP_SETTING_INT, 1, 1048576, "256", NULL, 0},
	};
	for (size_t i = 0; i < 12; i++) {
		const oeap_setting_def *s = &def->settings[i];
		assert_string_equal(s->name, want[i].name);
		assert_string_equal(s->key, want[i].key);
		assert_int_equal(s->type, want[i].type);
		assert_true(s->min == want[i].min && s->max == want[i].max);
		if (want[i].def)
			assert_string_equal(s->default_value, want[i].def);
		else
			assert_null(s->default_value);
		if (want[i].at_least)
			assert_string_equal(s->at_least, want[i].at_least);
		else
			assert_null(s->at_least);
		assert_int_equal(s->is_switch, want[i].sw);
		assert_non_null(s->describe);
		assert_ptr_equal(oeap_patchdef_setting(def, s->name), s);
	}
	assert_null(oeap_patchdef_setting(def, "SGLANG_OEA_KO"));
	const char *t[] = {"true", "1", "yes", "y", NULL}, *f[] = {"false", "0", "no", "n", NULL};
	for (size_t i = 0; t[i]; i++) {
		assert_string_equal(def->bool_true[i], t[i]);
		assert_string_equal(def->bool_false[i], f[i]);
	}
	assert_null(def->bool_true[4]);
	oeap_patchdef_free(def);
}

/* A copy of the real definition whose patch.ini gets `extra` appended (new sections) or one edit. */
static char *copy_definition(void)
{
	/* <tmp>/def: the shared core goes beside it, to <tmp>/binding-core */
	char *root = tu_tmpdir(), *dir = malloc(strlen(root) + 8);
	assert_non_null(dir);
	sprintf(dir, "%s/def", root);
	free(root);
	tu_copy_definition(dir);
	return dir;
}

/* Loads the real patch.ini with `old` replaced by `new_text` (old NULL: new_text appended). */
static int load_edited(const char *old, const char *new_text, oeap_patchdef **def, oeap_error *err)
{
	char *dir = copy_definition(), path[PATH_MAX + 64];
	size_t len;
	snprintf(path, sizeof(path), "%s/patch.ini", dir);
	oeap_error io;
	oeap_error_clear(&io);
	char *text = NULL;
	assert_int_equal(oeap_read_file(path, &text, &len, &io), 0);
	char *at = old ? strstr(text, old) : text + len;
	if (!at)
		fail_msg("'%s' is not in patch.ini", old);
	size_t head = (size_t)(at - text), ol = old ? strlen(old) : 0, nl = strlen(new_text);
	char *out = malloc(len - ol + nl + 1);
	assert_non_null(out);
	memcpy(out, text, head);
	memcpy(out + head, new_text, nl);
	memcpy(out + head + nl, text + head + ol, len - head - ol);
	tu_write(path, out, len - ol + nl);
	free(out);
	free(text);
	oeap_error_clear(err);
	int rc = oeap_patchdef_load(dir, def, err);
	*strrchr(dir, '/') = '\0'; /* the copy's <tmp> */
	tu_rmtree(dir);
	free(dir);
	return rc;
}

static void expect_refused(const char *old, const char *new_text, const char *in_message)
{
	oeap_patchdef *def = NULL;
	oeap_error err;
	if (load_edited(old, new_text, &def, &err) == 0) {
		oeap_patchdef_free(def);
		fail_msg("accepted: '%s' -> '%s'", old ? old : "(appended)", new_text);
	}
	assert_int_equal(err.kind, OEAP_ERR_DEFINITION);
	if (!strstr(err.message, in_message) && !strstr(err.where, in_message))
		fail_msg("'%s: %s' does not say '%s'", err.where, err.message, in_message);
}

static void test_new_setting_is_data(void **state)
{
	(void)state;
	/* What another engineer adds for a new binding setting: one section, no C. */
	oeap_patchdef *def = NULL;
	oeap_error err;
	assert_int_equal(load_edited(NULL,
	                             "\n[setting:SGLANG_OEA_METRICS_PORT]\ndescribe = Prometheus port\ntype = int\n"
	                             "min = 1\nmax = 65535\ndefault = 9464\n",
	                             &def, &err),
	                 0);
	const oeap_setting_def *s = oeap_patchdef_setting(def, "SGLANG_OEA_METRICS_PORT");
	assert_non_null(s);
	assert_string_equal(s->key, "metrics_port"); /* default key: the name without the prefix */
	oeap_env env = {0};
	oeap_settings_result res;
	assert_int_equal(oeap_env_set(&env, "SGLANG_OEA_K0", "3", NULL, 0), 0);
	assert_int_equal(oeap_env_set(&env, "SGLANG_OEA_METRICS_PORT", "70000", NULL, 0), 0);
	assert_int_equal(oeap_settings_check(def, &env, &res), 0);
	assert_int_equal(res.errors, 1);
	assert_string_equal(res.problems[0].name, "SGLANG_OEA_METRICS_PORT");
	assert_non_null(strstr(res.problems[0].message, "an integer in 1..65535"));
	oeap_settings_result_free(&res);
	oeap_env_free(&env);
	oeap_patchdef_free(def);
}

/* MODE (a choice): the listed spelling whatever the case, anything else refused naming the
 * setting and its values, and the start's decision saying the mode (verify, status, the plugin). */
static void test_choice_setting(void **state)
{
	(void)state;
	oeap_patchdef *def = tu_def();
	static const struct {
		const char *value, *effective;
	} cases[] = {{NULL, "on"}, {"shadow", "shadow"}, {" Shadow ", "shadow"}, {"ON", "on"}};
	char buf[64];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		oeap_env env = {0};
		oeap_settings_result res;
		assert_int_equal(oeap_env_set(&env, "SGLANG_OEA_K0", "3", NULL, 0), 0);
		if (cases[i].value)
			assert_int_equal(oeap_env_set(&env, "SGLANG_OEA_MODE", cases[i].value, NULL, 0), 0);
		assert_int_equal(oeap_settings_check(def, &env, &res), 0);
		assert_int_equal(res.errors, 0);
		size_t at = (size_t)(oeap_patchdef_setting(def, "SGLANG_OEA_MODE") - def->settings);
		assert_string_equal(oeap_settings_effective(def, &res, at, buf, sizeof(buf)), cases[i].effective);
		oeap_start_outcome out;
		oeap_start_outcome_of(def, &res, &out);
		assert_int_equal(out.kind, OEAP_START_ON);
		char want[64];
		snprintf(want, sizeof(want), "OEA is on, SGLANG_OEA_MODE=%s", cases[i].effective);
		if (!strstr(out.reason, want))
			fail_msg("'%s' does not say '%s'", out.reason, want);
		oeap_settings_result_free(&res);
		oeap_env_free(&env);
	}
	oeap_env env = {0};
	oeap_settings_result res;
	assert_int_equal(oeap_env_set(&env, "SGLANG_OEA_K0", "3", NULL, 0), 0);
	assert_int_equal(oeap_env_set(&env, "SGLANG_OEA_MODE", "shadows", NULL, 0), 0);
	assert_int_equal(oeap_settings_check(def, &env, &res), 0);
	assert_int_equal(res.errors, 1);
	assert_string_equal(res.problems[0].name, "SGLANG_OEA_MODE");
	assert_non_null(strstr(res.problems[0].message, "expected one of on/shadow"));
	oeap_start_outcome out;
	oeap_start_outcome_of(def, &res, &out);
	assert_int_equal(out.kind, OEAP_START_STOPS); /* the binding's import refuses it */
	oeap_settings_result_free(&res);
	oeap_env_free(&env);
	oeap_patchdef_free(def);
}

static void test_broken_rules_refused(void **state)
{
	(void)state;
	expect_refused("type = int\nmin = 0\n", "type = float\nmin = 0\n", "must be int, bool, string, path, choice or output");
	expect_refused("min = 1\ndefault = 2\n", "min = 1\ndefault = 0\n", "default '0' is not an integer >= 1");
	expect_refused("max = 1024\n", "max = 1024\nmaximum = 3\n", "unknown key");
	expect_refused("at_least = SGLANG_OEA_MIN_BATCH", "at_least = SGLANG_OEA_MIN_BACH", "must name another int");
	expect_refused("at_least = SGLANG_OEA_MIN_BATCH", "at_least = SGLANG_OEA_STATS", "must name another int");
	expect_refused("max = 1024\n", "max = 0\n", "min (1) is above max (0)");
	expect_refused("max = 1024\n", "max = 99999999999\n", "32-bit");
	expect_refused("type = bool\ndefault = false\n\n[setting:SGLANG_OEA_STATS]",
	               "type = bool\ndefault = false\nswitch = yes\n\n[setting:SGLANG_OEA_STATS]", "at most one");
	expect_refused("switch = yes", "switch = maybe", "must be yes or no");
	expect_refused("bool_true = true 1 yes y\n", "", "bool_true and bool_false");
	expect_refused(NULL, "\n[setting:OTHER_K0]\ntype = int\ndefault = 0\n", "must start with [binding] env_prefix");
	expect_refused(NULL, "\n[setting:SGLANG_OEA_X]\ntype = int\n", "needs a 'default'");
	expect_refused(NULL, "\n[setting:SGLANG_OEA_X]\ntype = path\nmin = 3\n", "are for type = int");
	expect_refused(NULL, "\n[setting:SGLANG_OEA_X-Y]\ntype = path\n", "environment variable");
	/* choice: its values, a default among them, and never a switch */
	expect_refused("values = on shadow\n", "", "a choice needs it");
	/* forced_by: a bool, forced by another choice setting's listed value */
	expect_refused("forced_by = SGLANG_OEA_MODE=shadow", "forced_by = SGLANG_OEA_MODE=off", "forced_by");
	expect_refused("forced_by = SGLANG_OEA_MODE=shadow", "forced_by = SGLANG_OEA_K0=3", "forced_by");
	expect_refused("forced_by = SGLANG_OEA_MODE=shadow", "forced_by = SGLANG_OEA_MODE", "forced_by");
	expect_refused("at_least = SGLANG_OEA_MIN_BATCH", "at_least = SGLANG_OEA_MIN_BATCH\nforced_by = SGLANG_OEA_MODE=shadow",
	               "forced_by");
	expect_refused(NULL, "\n[setting:SGLANG_OEA_X]\ntype = int\ndefault = 0\nvalues = a b\n", "'values' goes with type = choice");
	expect_refused("values = on shadow\ndefault = on\n", "values = on shadow\n", "a choice setting needs a 'default'");
	expect_refused("values = on shadow\ndefault = on\n", "values = on shadow\ndefault = off\n",
	               "default 'off' is not one of on/shadow");
	expect_refused("values = on shadow\ndefault = on\n", "values = on shadow\ndefault = on\nswitch = yes\n",
	               "a switch is an int or bool setting");
	/* warn_from: on an int, with its words, at a value the binding takes (and not at every one) */
	expect_refused("warn_from = 8\n", "", "warn_from and warn go together");
	expect_refused("warn_from = 8\n", "warn_from = 16\n", "warn_from (16) must be above min (0) and at most max (15)");
	expect_refused("warn_from = 8\n", "warn_from = 0\n", "must be above min");
	expect_refused(NULL, "\n[setting:SGLANG_OEA_X]\ntype = bool\ndefault = no\nwarn_from = 1\nwarn = w\n",
	               "are for type = int");
	expect_refused(NULL, "\n[setting:SGLANG_OEA_X]\ntype = path\nrange_reason = r\n", "are for type = int");
}

/* ------------------------------------------------------------ the value rule */

static void test_value_rule(void **state)
{
	(void)state;
	oeap_patchdef *def = tu_def();
	const oeap_setting_def *k0 = oeap_patchdef_setting(def, "SGLANG_OEA_K0");
	const oeap_setting_def *mt = oeap_patchdef_setting(def, "SGLANG_OEA_MAX_TOKENS");
	const oeap_setting_def *st = oeap_patchdef_setting(def, "SGLANG_OEA_STRICT");
	const oeap_setting_def *lib = oeap_patchdef_setting(def, "SGLANG_OEA_LIBRARY");
	static const struct {
		const char *raw;
		int rc;
		long long v;
	} ints[] = {
		{"3", 0, 3},         {" 3 ", 0, 3},        {"\t3\n", 0, 3},    {"+3", 0, 3},        {"03", 0, 3},
		{"-0", 0, 0},        {"", 1, 0},           {"  ", 1, 0},       {"3.0", -1, 0},      {"0x3", -1, 0},
		{"1_0", -1, 0},      {"-3", -1, 0},        {"3 4", -1, 0},     {"+", -1, 0},        {"-", -1, 0},
		{"15", 0, 15},       {"16", -1, 0},        {"2147483647", -1, 0}, {"2147483648", -1, 0},
		{"99999999999999999999999", -1, 0},
		{"\xd9\xa3", -1, 0}, /* ARABIC-INDIC DIGIT THREE */
		{"3\xc2\xa0", -1, 0}, /* NO-BREAK SPACE is not an ASCII blank */
		{"+-3", -1, 0},
		/* k0 bands (issue 33): the value is their largest k0; k0bands.c's rule */
		{"1-7:0,8-31:4,32-:3", 0, 4}, {" 1-:3 ", 0, 3},     {"1-:0", 0, 0},      {"1-7:0,8-:15", 0, 15},
		{"1-7:0,8-:16", -1, 0},       {"2-7:0,8-:3", -1, 0}, {"1-7:0,9-:3", -1, 0}, {"1-7:0,8-31:4", -1, 0},
		{"1-7:0,,8-:3", -1, 0},       {"1-:3,", -1, 0},     {"1-7:0 ,8-:3", -1, 0}, {"1-7:+2,8-:3", -1, 0},
		{"1-7:0,8-:3 4", -1, 0},      {":3", -1, 0},        {"1-0:3,1-:2", -1, 0},
	};
	for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
		long long v = -42;
		int rc = oeap_setting_parse(def, k0, ints[i].raw, &v);
		if (rc != ints[i].rc || (rc == 0 && v != ints[i].v))
			fail_msg("K0 '%s': rc %d value %lld, expected rc %d value %lld", ints[i].raw, rc, v, ints[i].rc,
			         ints[i].v);
	}
	long long v;
	/* bands only where the definition says so */
	assert_int_equal(oeap_setting_parse(def, mt, "1-:3", &v), -1);
	assert_int_equal(oeap_setting_parse(def, mt, "1024", &v), 0);
	assert_int_equal(oeap_setting_parse(def, mt, "1025", &v), -1);
	assert_int_equal(oeap_setting_parse(def, mt, "0", &v), -1);
	/* the 32-bit range itself, on a setting without a max */
	const oeap_setting_def *si = oeap_patchdef_setting(def, "SGLANG_OEA_STATS_INTERVAL");
	assert_int_equal(oeap_setting_parse(def, si, "2147483647", &v), 0);
	assert_true(v == 2147483647LL);
	assert_int_equal(oeap_setting_parse(def, si, "2147483648", &v), -1);
	static const struct {
		const char *raw;
		int rc;
		long long v;
	} bools[] = {{"true", 0, 1}, {"TRUE", 0, 1}, {" Yes ", 0, 1}, {"y", 0, 1},  {"1", 0, 1},  {"N", 0, 0},
	             {"no", 0, 0},   {"False", 0, 0}, {"0", 0, 0},    {"", 1, 0},   {"on", -1, 0}, {"off", -1, 0},
	             {"t", -1, 0},   {"01", -1, 0},  {"yes!", -1, 0}};
	for (size_t i = 0; i < sizeof(bools) / sizeof(bools[0]); i++) {
		int rc = oeap_setting_parse(def, st, bools[i].raw, &v);
		if (rc != bools[i].rc || (rc == 0 && v != bools[i].v))
			fail_msg("STRICT '%s': rc %d value %lld", bools[i].raw, rc, v);
	}
	assert_int_equal(oeap_setting_parse(def, lib, " /x/liboea.so ", &v), 0);
	assert_int_equal(oeap_setting_parse(def, lib, " ", &v), 1);
	char buf[256];
	oeap_setting_expected(def, mt, buf, sizeof(buf));
	assert_string_equal(buf, "an integer in 1..1024");
	oeap_setting_expected(def, k0, buf, sizeof(buf));
	assert_string_equal(buf, "an integer in 0..15");
	oeap_setting_expected(def, si, buf, sizeof(buf));
	assert_string_equal(buf, "an integer >= 1");
	oeap_setting_expected(def, st, buf, sizeof(buf));
	assert_string_equal(buf, "a boolean (true/1/yes/y or false/0/no/n)");
	oeap_patchdef_free(def);
}

/* ------------------------------------------------------------ the check */

static oeap_settings_result check_env(const oeap_patchdef *def, const char *const *assignments)
{
	oeap_env env = {0};
	oeap_settings_result res;
	for (size_t i = 0; assignments[i]; i += 2)
		assert_int_equal(oeap_env_set(&env, assignments[i], assignments[i + 1], NULL, 0), 0);
	assert_int_equal(oeap_settings_check(def, &env, &res), 0);
	oeap_env_free(&env);
	return res;
}

static const oeap_setting_problem *problem(const oeap_settings_result *r, const char *name)
{
	for (size_t i = 0; i < r->nproblems; i++)
		if (!strcmp(r->problems[i].name, name))
			return &r->problems[i];
	return NULL;
}

static void test_check(void **state)
{
	(void)state;
	oeap_patchdef *def = tu_def();
	oeap_settings_result r;

	/* Nothing set: every default, off, nothing wrong. */
	r = check_env(def, (const char *[]){"PATH", "/bin", NULL});
	assert_int_equal(r.nproblems, 0);
	assert_false(r.on);
	assert_int_equal(r.values[1], 2);
	assert_int_equal(r.values[3], 1);
	assert_null(r.strings[7]); /* the library: the recorded one, which the caller knows */
	oeap_settings_result_free(&r);

	/* On: a bad value is an error. */
	r = check_env(def, (const char *[]){"SGLANG_OEA_K0", " 3 ", "SGLANG_OEA_STATS", "maybe", NULL});
	assert_true(r.on);
	assert_int_equal(r.errors, 1);
	assert_string_equal(problem(&r, "SGLANG_OEA_STATS")->shown, "'maybe'");
	assert_true(problem(&r, "SGLANG_OEA_STATS")->error);
	oeap_settings_result_free(&r);

	/* Off ("-0" parses to 0): the same value is a warning, and the binding runs on defaults. */
	r = check_env(def, (const char *[]){"SGLANG_OEA_K0", "-0", "SGLANG_OEA_STATS", "maybe",
	                                    "SGLANG_OEA_MIN_BATCH", "8", NULL});
	assert_false(r.on);
	assert_int_equal(r.errors, 0);
	assert_int_equal(r.warnings, 1);
	assert_true(r.defaults_only);
	assert_int_equal(r.values[1], 2); /* MIN_BATCH=8 is ignored with the rest */
	oeap_settings_result_free(&r);

	/* A bad switch is an error, and so is everything else then. */
	r = check_env(def, (const char *[]){"SGLANG_OEA_K0", "abc", "SGLANG_OEA_STATS", "maybe", NULL});
	assert_int_equal(r.errors, 2);
	oeap_settings_result_free(&r);

	/* The cross rule on effective values: MIN_BATCH above MAX_TOKENS's default. */
	r = check_env(def, (const char *[]){"SGLANG_OEA_K0", "3", "SGLANG_OEA_MIN_BATCH", "2000", NULL});
	assert_int_equal(r.errors, 1);
	const oeap_setting_problem *p = problem(&r, "SGLANG_OEA_MAX_TOKENS");
	assert_non_null(p);
	assert_null(p->shown); /* unset: its default broke the rule */
	assert_non_null(strstr(p->message, "default 1024 is below SGLANG_OEA_MIN_BATCH (2000)"));
	oeap_settings_result_free(&r);
	r = check_env(def, (const char *[]){"SGLANG_OEA_K0", "3", "SGLANG_OEA_MIN_BATCH", "16", "SGLANG_OEA_MAX_TOKENS",
	                                    "16", "SGLANG_OEA_LIBRARY", " /x/liboea.so ", NULL});
	assert_int_equal(r.nproblems, 0);
	assert_string_equal(r.strings[7], "/x/liboea.so");
	assert_true(r.given[7]);
	oeap_settings_result_free(&r);

	/* Names in the namespace that are no setting: a near miss fails (even off), others warn. */
	r = check_env(def, (const char *[]){"SGLANG_OEA_KO", "3", "SGLANG_OEA_MIN_BACTH", "4", "sglang_oea_k0", "3",
	                                    "SGLANG_OEA_PROMETHEUS", "1", "SGLANG_OTHER", "1", NULL});
	assert_false(r.on);
	assert_int_equal(r.errors, 3);
	assert_int_equal(r.warnings, 1);
	assert_non_null(strstr(problem(&r, "SGLANG_OEA_KO")->message, "a typo of SGLANG_OEA_K0?"));
	assert_non_null(strstr(problem(&r, "SGLANG_OEA_MIN_BACTH")->message, "a typo of SGLANG_OEA_MIN_BATCH?"));
	assert_non_null(strstr(problem(&r, "sglang_oea_k0")->message, "a typo of SGLANG_OEA_K0?"));
	assert_false(problem(&r, "SGLANG_OEA_PROMETHEUS")->error);
	assert_null(problem(&r, "SGLANG_OTHER"));
	oeap_settings_result_free(&r);
	oeap_patchdef_free(def);
}

/* The effective value of the setting `name` as oeap_settings_effective gives it (NULL: none). */
static const char *eff(const oeap_patchdef *def, const oeap_settings_result *r, const char *name, char *buf)
{
	const oeap_setting_def *s = oeap_patchdef_setting(def, name);
	assert_non_null(s);
	return oeap_settings_effective(def, r, (size_t)(s - def->settings), buf, 64);
}

static void test_effective(void **state)
{
	(void)state;
	oeap_patchdef *def = tu_def();
	oeap_settings_result r;
	char buf[64];
	/* Issue 15.16: on, a refused value is no value the binding runs with (it stops at import), so
	 * none is shown: not 0 or false (STRICT=on read as strict=false though the default is true). */
	static const char *const refused[][2] = {
		{"SGLANG_OEA_STRICT", "on"},
		{"SGLANG_OEA_MIN_BATCH", "abc"},
		{"SGLANG_OEA_MAX_TOKENS", "5000"},
		{"SGLANG_OEA_STATS_INTERVAL", "0"},
	};
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		r = check_env(def, (const char *[]){"SGLANG_OEA_K0", "1", refused[i][0], refused[i][1], NULL});
		assert_int_equal(r.errors, 1);
		assert_true(problem(&r, refused[i][0])->refused);
		if (eff(def, &r, refused[i][0], buf))
			fail_msg("%s=%s with K0 on: shown as %s, though the binding refuses it", refused[i][0], refused[i][1],
			         buf);
		assert_string_equal(eff(def, &r, "SGLANG_OEA_K0", buf), "1"); /* the others: what it reads */
		oeap_settings_result_free(&r);
	}
	/* A bad switch: no k0 either. */
	r = check_env(def, (const char *[]){"SGLANG_OEA_K0", "-1", NULL});
	assert_true(r.on);
	assert_null(eff(def, &r, "SGLANG_OEA_K0", buf));
	assert_string_equal(eff(def, &r, "SGLANG_OEA_STRICT", buf), "true");
	oeap_settings_result_free(&r);
	/* The cross rule refuses the setting that has it. */
	r = check_env(def, (const char *[]){"SGLANG_OEA_K0", "1", "SGLANG_OEA_MIN_BATCH", "9", "SGLANG_OEA_MAX_TOKENS",
	                                    "8", NULL});
	assert_null(eff(def, &r, "SGLANG_OEA_MAX_TOKENS", buf));
	assert_string_equal(eff(def, &r, "SGLANG_OEA_MIN_BATCH", buf), "9");
	assert_true(problem(&r, "SGLANG_OEA_MAX_TOKENS")->refused);
	oeap_settings_result_free(&r);
	/* Off: the binding warns and runs on every default, which is what is shown (strict=true). */
	r = check_env(def, (const char *[]){"SGLANG_OEA_STRICT", "on", "SGLANG_OEA_STATS", "yes", NULL});
	assert_int_equal(r.errors, 0);
	assert_true(r.defaults_only);
	assert_true(problem(&r, "SGLANG_OEA_STRICT")->refused);
	assert_string_equal(eff(def, &r, "SGLANG_OEA_STRICT", buf), "true");
	assert_string_equal(eff(def, &r, "SGLANG_OEA_STATS", buf), "false"); /* valid, but ignored with the rest */
	oeap_settings_result_free(&r);
	/* A name the binding ignores is not a refused value. */
	r = check_env(def, (const char *[]){"SGLANG_OEA_K0", "2", "SGLANG_OEA_MIN_BACTH", "4", NULL});
	assert_int_equal(r.errors, 1);
	assert_false(problem(&r, "SGLANG_OEA_MIN_BACTH")->refused);
	assert_string_equal(eff(def, &r, "SGLANG_OEA_MIN_BATCH", buf), "2");
	oeap_settings_result_free(&r);
	oeap_patchdef_free(def);
}

static void test_k0_beyond_topk(void **state)
{
	(void)state;
	oeap_patchdef *def = tu_def();
	oeap_settings_result r;
	char buf[64];
	/* Issue 15.18: liboea routes at most 16 experts per token (OEA_MAX_TOPK) and OEA changes a layer only
	 * when k0 is below its top-k: from 16 on it never could. Refused, by the binding and by verify. */
	static const char *const never[] = {"16", "17", "1024", "2147483647"};
	for (size_t i = 0; i < sizeof(never) / sizeof(never[0]); i++) {
		r = check_env(def, (const char *[]){"SGLANG_OEA_K0", never[i], NULL});
		if (r.errors != 1)
			fail_msg("K0=%s: %zu errors, expected 1", never[i], r.errors);
		const oeap_setting_problem *p = problem(&r, "SGLANG_OEA_K0");
		assert_true(p->error && p->refused);
		assert_non_null(strstr(p->message, "expected an integer in 0..15 (liboea routes at most 16 experts"));
		assert_null(eff(def, &r, "SGLANG_OEA_K0", buf));
		oeap_settings_result_free(&r);
	}
	/* 8..15: a no-op for a model routing 8 or fewer (most), right for a larger top-k. verify does not
	 * know the model: a warning, and the value stands. */
	static const char *const maybe[] = {"8", " 08 ", "15"};
	for (size_t i = 0; i < sizeof(maybe) / sizeof(maybe[0]); i++) {
		r = check_env(def, (const char *[]){"SGLANG_OEA_K0", maybe[i], NULL});
		assert_int_equal(r.errors, 0);
		assert_int_equal(r.warnings, 1);
		const oeap_setting_problem *p = problem(&r, "SGLANG_OEA_K0");
		assert_false(p->error || p->refused);
		assert_non_null(strstr(p->message, "8 or more: OEA changes only layers whose routed top-k is above k0"));
		assert_non_null(eff(def, &r, "SGLANG_OEA_K0", buf)); /* the value stands */
		oeap_settings_result_free(&r);
	}
	/* Below: nothing to say. */
	r = check_env(def, (const char *[]){"SGLANG_OEA_K0", "7", NULL});
	assert_int_equal(r.nproblems, 0);
	oeap_settings_result_free(&r);
	oeap_patchdef_free(def);
}

/* ------------------------------------------------------------ EnvironmentFile= */

/* Parses `text`; `want` is NAME, VALUE pairs (NULL-terminated) that must be exactly the result. */
static void expect_env(const char *text, const char *const *want)
{
	oeap_env env = {0};
	oeap_error err;
	oeap_error_clear(&err);
	if (oeap_envfile_parse(text, strlen(text), "t.env", &env, &err))
		fail_msg("refused %s: %s: %s", text, err.where, err.message);
	size_t n = 0;
	for (; want[n]; n += 2) {
		const oeap_env_var *v = oeap_env_get(&env, want[n]);
		if (!v)
			fail_msg("%s: no %s", text, want[n]);
		if (strcmp(v->value, want[n + 1]))
			fail_msg("%s: %s is '%s', expected '%s'", text, want[n], v->value, want[n + 1]);
	}
	if (env.n != n / 2)
		fail_msg("%s: %zu variables, expected %zu", text, env.n, n / 2);
	oeap_env_free(&env);
}

static void expect_env_error(const char *text, long line, const char *in_message)
{
	oeap_env env = {0};
	oeap_error err;
	oeap_error_clear(&err);
	if (oeap_envfile_parse(text, strlen(text), "/etc/x.env", &env, &err) == 0)
		fail_msg("accepted: %s", text);
	oeap_env_free(&env);
	if (err.line != line)
		fail_msg("%s: line %ld, expected %ld (%s)", text, err.line, line, err.message);
	char where[64];
	snprintf(where, sizeof(where), "/etc/x.env:%ld", line);
	assert_string_equal(err.where, where);
	if (!strstr(err.message, in_message))
		fail_msg("'%s' does not say '%s'", err.message, in_message);
}

static void test_envfile_syntax(void **state)
{
	(void)state;
	expect_env("", (const char *[]){NULL});
	expect_env("# comment\n; comment\n\n   \nA=1\n", (const char *[]){"A", "1", NULL});
	expect_env("  A  =  1 2  \n", (const char *[]){"A", "1 2", NULL}); /* blanks around go, inside stay */
	expect_env("A=1\nA=2\n", (const char *[]){"A", "2", NULL});       /* later wins */
	expect_env("A=\n", (const char *[]){"A", "", NULL});
	expect_env("A=1", (const char *[]){"A", "1", NULL}); /* no final newline */
	expect_env("A=1\r\nB=2\r\n", (const char *[]){"A", "1", "B", "2", NULL});
	expect_env("A=\" 3 \"\n", (const char *[]){"A", " 3 ", NULL});
	expect_env("A=' 3 '\n", (const char *[]){"A", " 3 ", NULL});
	expect_env("A='a\\nb $X'\n", (const char *[]){"A", "a\\nb $X", NULL}); /* single quotes: verbatim */
	expect_env("A=\"x\\\"y\\\\z\\$w\\`v\\n\"\n", (const char *[]){"A", "x\"y\\z$w`v\\n", NULL});
	expect_env("A=\"two\nlines\"\n", (const char *[]){"A", "two\nlines", NULL});
	expect_env("A=\"con\\\ntinued\"\n", (const char *[]){"A", "continued", NULL});
	expect_env("A=con\\\ntinued\n", (const char *[]){"A", "continued", NULL});
	expect_env("A=a\\ b\\\\c\n", (const char *[]){"A", "a b\\c", NULL});
	expect_env("A=$HOME/${X}\n", (const char *[]){"A", "$HOME/${X}", NULL}); /* no expansion */
	expect_env("A=x # not a comment\n", (const char *[]){"A", "x # not a comment", NULL});
	expect_env("A=\"q\"tail\n", (const char *[]){"A", "qtail", NULL}); /* systemd joins them */
	expect_env("A=it's\n", (const char *[]){"A", "it's", NULL});       /* a quote after the start is kept */
	expect_env("# a comment \\\n# and another\nA=1\n", (const char *[]){"A", "1", NULL});
	expect_env("A=\xc3\xa9\n", (const char *[]){"A", "\xc3\xa9", NULL});

	expect_env_error("A=1\nSGLANG_OEA_K0 3\n", 2, "no '=' in 'SGLANG_OEA_K0 3'");
	expect_env_error("A=1\nexport SGLANG_OEA_K0=3\n", 2, "has no 'export'");
	expect_env_error("A-B=1\n", 1, "is not a variable name");
	expect_env_error("1A=1\n", 1, "is not a variable name");
	expect_env_error("\xef\xbb\xbf" "A=1\n", 1, "byte order mark");
	expect_env_error("A=\xff\n", 1, "invalid UTF-8");
	expect_env_error("A=1\nB=\"open\nC=2\n", 2, "never closed");
	expect_env_error("A='open\n", 1, "never closed");
	expect_env_error("# note \\\nA=1\n", 1, "comment ending in a backslash");
	expect_env_error("A=1\nB", 2, "no '='");
	oeap_env env = {0};
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_not_equal(oeap_envfile_parse("A=1\nB=x\0y\n", 8, "n.env", &env, &err), 0);
	assert_int_equal(err.line, 2);
	assert_non_null(strstr(err.message, "NUL"));
	oeap_env_free(&env);
}

static void test_envfile_load(void **state)
{
	(void)state;
	char *dir = tu_tmpdir(), path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/a.env", dir);
	tu_write(path, "SGLANG_OEA_K0=3\n", 16);
	oeap_env env = {0};
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_envfile_load(path, &env, &err), 0);
	const oeap_env_var *v = oeap_env_get(&env, "SGLANG_OEA_K0");
	assert_string_equal(v->origin, path);
	assert_int_equal(v->line, 1);
	snprintf(path, sizeof(path), "%s/missing.env", dir);
	assert_int_not_equal(oeap_envfile_load(path, &env, &err), 0);
	assert_int_equal(err.kind, OEAP_ERR_IO);
	assert_non_null(strstr(err.message, path));
	oeap_env_free(&env);
	tu_rmtree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_real_rules),
		cmocka_unit_test(test_new_setting_is_data),
		cmocka_unit_test(test_broken_rules_refused),
		cmocka_unit_test(test_choice_setting),
		cmocka_unit_test(test_value_rule),
		cmocka_unit_test(test_check),
		cmocka_unit_test(test_effective),
		cmocka_unit_test(test_k0_beyond_topk),
		cmocka_unit_test(test_envfile_syntax),
		cmocka_unit_test(test_envfile_load),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
