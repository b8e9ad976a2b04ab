/*
 * test_quote.c - the one rule for showing bytes that may not be text
 * (quote.h): when a string is quoted for JSON and for XML, what the quoted
 * form is, and that it decodes back to exactly the bytes it was made from.
 * The JSON helpers of report.h are tested here too: they are the rule's
 * door into every document.
 */
#include "testutil.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "quote.h"
#include "report.h"

static void test_utf8_seq(void **state)
{
	(void)state;
	assert_int_equal(oeap_utf8_seq("a", 1), 1);
	assert_int_equal(oeap_utf8_seq("\xc3\xa9", 2), 2);
	assert_int_equal(oeap_utf8_seq("\xe2\x82\xac", 3), 3);
	assert_int_equal(oeap_utf8_seq("\xf0\x9f\x98\x80", 4), 4);
	assert_int_equal(oeap_utf8_seq("\xc3\xa9", 1), 0);          /* cut short */
	assert_int_equal(oeap_utf8_seq("\xe9", 1), 0);              /* Latin-1 e-acute */
	assert_int_equal(oeap_utf8_seq("\xc0\xaf", 2), 0);          /* overlong '/' */
	assert_int_equal(oeap_utf8_seq("\xed\xa0\x80", 3), 0);      /* a surrogate */
	assert_int_equal(oeap_utf8_seq("\xf4\x90\x80\x80", 4), 0);  /* above U+10FFFF */
	assert_int_equal(oeap_utf8_seq("\xff", 1), 0);
}

static void test_needed(void **state)
{
	(void)state;
	static const struct {
		const char *s;
		int json, xml;
	} cases[] = {
		{"plain", 0, 0},
		{"caf\xc3\xa9 \xe2\x82\xac", 0, 0},
		{"tab\tnew\nline\r", 0, 0},
		{"bell\x07", 0, 1},        /* JSON escapes it itself, XML 1.0 has no place for it */
		{"esc\x1b[31m", 0, 1},
		{"x\xef\xbf\xbe", 0, 1},   /* U+FFFE */
		{"caf\xe9", 1, 1},         /* Latin-1 */
		{"cut \xc3", 1, 1},
		{"'looks quoted'", 1, 1},  /* would read as a quoted form */
		{"'", 1, 1},
		{"'frob' is not a command", 0, 0},
		{"it's", 0, 0},
		{"", 0, 0},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t n = strlen(cases[i].s);
		assert_int_equal(oeap_quote_needed(cases[i].s, n, OEAP_QUOTE_JSON), cases[i].json);
		assert_int_equal(oeap_quote_needed(cases[i].s, n, OEAP_QUOTE_XML), cases[i].xml);
	}
	/* A NUL inside counted bytes is a control character like the others. */
	assert_int_equal(oeap_quote_needed("a\0b", 3, OEAP_QUOTE_JSON), 0);
	assert_int_equal(oeap_quote_needed("a\0b", 3, OEAP_QUOTE_XML), 1);
}

/* Decodes a quoted form back to bytes (the reading docs/oeapatch.1 gives). */
static size_t unquote(const char *q, char *out)
{
	size_t n = 0, len = strlen(q);
	assert_true(len >= 2 && q[0] == '\'' && q[len - 1] == '\'');
	for (size_t i = 1; i < len - 1; i++) {
		if (q[i] != '\\') {
			assert_true(q[i] != '\'');
			out[n++] = q[i];
			continue;
		}
		i++;
		if (q[i] == 'x') {
			char hex[3] = {q[i + 1], q[i + 2], 0};
			out[n++] = (char)strtol(hex, NULL, 16);
			i += 2;
		} else {
			assert_true(q[i] == '\\' || q[i] == '\'');
			out[n++] = q[i];
		}
	}
	return n;
}

static void test_quote_form(void **state)
{
	(void)state;
	char *q = oeap_quote("a b\t'\\\xff\xc3\xa9", 9);
	assert_string_equal(q, "'a b\\x09\\'\\\\\\xff\xc3\xa9'");
	free(q);
	q = oeap_quote("x\xef\xbf\xbfy\x7f", 6);
	assert_string_equal(q, "'x\\xef\\xbf\\xbfy\\x7f'");
	free(q);
	q = oeap_quote("a\0b", 3);
	assert_string_equal(q, "'a\\x00b'");
	free(q);

	/* Every byte string comes back exactly, and the form itself needs no quoting. */
	static const char *const samples[] = {"caf\xe9", "'", "\\x41", "\xc3", "\x01\x02\xfe\xff", "\xf0\x9f\x98\x80!",
	                                      "''\\'"};
	for (size_t i = 0; i < sizeof(samples) / sizeof(samples[0]); i++) {
		char back[64];
		q = oeap_quote(samples[i], strlen(samples[i]));
		assert_non_null(q);
		assert_int_equal(oeap_quote_needed(q + 1, strlen(q) - 2, OEAP_QUOTE_XML), 0);
		size_t n = unquote(q, back);
		assert_int_equal(n, strlen(samples[i]));
		assert_memory_equal(back, samples[i], n);
		free(q);
	}
}

static void test_json_str(void **state)
{
	(void)state;
	json_t *j = oeap_json_str("caf\xc3\xa9");
	assert_string_equal(json_string_value(j), "caf\xc3\xa9");
	json_decref(j);
	/* jansson's json_string refuses these bytes (NULL): the helper never does. */
	assert_null(json_string("/tmp/caf\xe9"));
	j = oeap_json_str("/tmp/caf\xe9");
	assert_non_null(j);
	assert_string_equal(json_string_value(j), "'/tmp/caf\\xe9'");
	json_decref(j);
	j = oeap_json_str("'x'");
	assert_string_equal(json_string_value(j), "'\\'x\\''");
	json_decref(j);
	j = oeap_json_str(NULL);
	assert_true(json_is_null(j));
	json_decref(j);
	j = oeap_json_strn("a\0b", 3);
	assert_int_equal(json_string_length(j), 3);
	json_decref(j);

	/* An error whose message carries such a path keeps every member. */
	oeap_error err;
	oeap_error_clear(&err);
	oeap_fail(&err, OEAP_ERR_IO, "/srv/\xff", 0, "not found in /srv/\xff");
	j = oeap_json_error(&err);
	assert_string_equal(json_string_value(json_object_get(j, "where")), "'/srv/\\xff'");
	assert_string_equal(json_string_value(json_object_get(j, "message")), "'not found in /srv/\\xff'");
	json_decref(j);
}

/* The shell word of the fixes messages give: pasted into sh, it must name
 * the same file (an inner quote closed, escaped, reopened). */
static void test_shell_word(void **state)
{
	(void)state;
	char w[64];
	oeap_shell_word(w, sizeof(w), "/opt/oea/lib-2.1+x_y");
	assert_string_equal(w, "/opt/oea/lib-2.1+x_y");
	oeap_shell_word(w, sizeof(w), "/opt/a:b");
	assert_string_equal(w, "'/opt/a:b'");
	oeap_shell_word(w, sizeof(w), "/tmp/a b");
	assert_string_equal(w, "'/tmp/a b'");
	oeap_shell_word(w, sizeof(w), "/tmp/it's");
	assert_string_equal(w, "'/tmp/it'\\''s'");
	oeap_shell_word(w, sizeof(w), "");
	assert_string_equal(w, "''");
	oeap_shell_word(w, 2, "a b");
	assert_string_equal(w, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_utf8_seq),
		cmocka_unit_test(test_needed),
		cmocka_unit_test(test_quote_form),
		cmocka_unit_test(test_json_str),
		cmocka_unit_test(test_shell_word),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
