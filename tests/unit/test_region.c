/*
 * test_region.c - rendering regions, finding them again, refusing damaged
 * markers, and stripping them back to the original bytes.
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/sha.h>

#include "buf.h"
#include "region.h"

/* Builds: prefix + render(...) + suffix; records where the region starts. */
static char *build(const char *prefix, const char *patch, int version, const char *name, const char *indent,
                   const char *eol, const char *body, const char *suffix, size_t *len, size_t *region_at)
{
	oeap_buf b = OEAP_BUF_INIT;
	assert_int_equal(oeap_buf_puts(&b, prefix), 0);
	*region_at = b.len;
	assert_int_equal(oeap_region_render(&b, patch, version, name, indent, eol, body, strlen(body)), 0);
	assert_int_equal(oeap_buf_puts(&b, suffix), 0);
	return oeap_buf_detach(&b, len);
}

static long line_at(const char *text, size_t off)
{
	long line = 1;
	for (size_t i = 0; i < off; i++)
		line += text[i] == '\n';
	return line;
}

/* Scans text that must be refused and returns the error. */
static oeap_error scan_refused(const char *text)
{
	oeap_regions rs = {(oeap_region *)1, 5};
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_regions_scan(text, strlen(text), &rs, &err), -1);
	assert_int_equal(err.kind, OEAP_ERR_REGION);
	assert_null(rs.items);
	assert_int_equal(rs.n, 0);
	return err;
}

static void check_round_trip(const char *indent, const char *eol)
{
	char prefix[256], body[256], suffix[256];
	snprintf(prefix, sizeof(prefix), "def f():%s%sx = 1%s", eol, indent, eol);
	snprintf(body, sizeof(body), "%sif x:%s%s    y = 2%s", indent, eol, indent, eol);
	snprintf(suffix, sizeof(suffix), "%sreturn x%s", indent, eol);
	size_t len, at;
	char *text = build(prefix, "sglang-oea", 1, "callsite", indent, eol, body, suffix, &len, &at);

	/* The rendered markers, byte for byte. */
	char hash[OEAP_HASH_HEX + 1];
	assert_int_equal(oeap_region_hash(body, strlen(body), hash), 0);
	char begin[256], end[256];
	snprintf(begin, sizeof(begin), "%s# >>> oeapatch sglang-oea/1 callsite sha256:%s >>>%s", indent, hash, eol);
	snprintf(end, sizeof(end), "%s# <<< oeapatch sglang-oea/1 callsite <<<%s", indent, eol);
	assert_int_equal(len, strlen(prefix) + strlen(begin) + strlen(body) + strlen(end) + strlen(suffix));
	assert_memory_equal(text + at, begin, strlen(begin));
	assert_memory_equal(text + at + strlen(begin) + strlen(body), end, strlen(end));

	oeap_regions rs;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_regions_scan(text, len, &rs, &err), 0);
	assert_int_equal(rs.n, 1);
	const oeap_region *r = &rs.items[0];
	assert_string_equal(r->patch, "sglang-oea");
	assert_int_equal(r->version, 1);
	assert_string_equal(r->name, "callsite");
	assert_string_equal(r->hash, hash);
	assert_string_equal(r->actual, hash);
	assert_true(oeap_region_intact(r));
	assert_int_equal(r->start, at);
	assert_int_equal(r->body_start, at + strlen(begin));
	assert_int_equal(r->body_end, at + strlen(begin) + strlen(body));
	assert_int_equal(r->end, at + strlen(begin) + strlen(body) + strlen(end));
	assert_int_equal(r->begin_marker_col, at + strlen(indent));
	assert_int_equal(text[r->begin_marker_col], '#');
	assert_int_equal(r->end_marker_col, r->body_end + strlen(indent));
	assert_int_equal(text[r->end_marker_col], '#');
	assert_int_equal(r->begin_line, 3);
	assert_int_equal(r->end_line, 6);
	assert_int_equal(r->begin_line, line_at(text, r->start));
	assert_int_equal(r->end_line, line_at(text, r->body_end));
	assert_ptr_equal(oeap_regions_find(&rs, "sglang-oea", "callsite"), r);
	assert_null(oeap_regions_find(&rs, "sglang-oea", "import"));
	assert_null(oeap_regions_find(&rs, "other", "callsite"));
	assert_int_equal(oeap_regions_count(&rs, "sglang-oea"), 1);

	/* Strip gives back the exact original bytes. */
	oeap_buf out = OEAP_BUF_INIT;
	assert_int_equal(oeap_regions_strip(text, len, &rs, "sglang-oea", &out), 0);
	assert_int_equal(out.len, strlen(prefix) + strlen(suffix));
	assert_memory_equal(out.data, prefix, strlen(prefix));
	assert_memory_equal(out.data + strlen(prefix), suffix, strlen(suffix));
	oeap_buf_free(&out);
	oeap_regions_free(&rs);
	free(text);
}

static void test_round_trip_lf(void **state)
{
	(void)state;
	check_round_trip("    ", "\n");
}

static void test_round_trip_crlf(void **state)
{
	(void)state;
	check_round_trip("    ", "\r\n");
}

static void test_round_trip_tab_indent(void **state)
{
	(void)state;
	check_round_trip("\t", "\n");
	check_round_trip("\t\t", "\r\n");
}

static void test_hash_known_value(void **state)
{
	(void)state;
	/* sha256("") = e3b0c44298fc1c14..., sha256("abc") = ba7816bf8f01cfea... */
	char hex[OEAP_HASH_HEX + 1];
	assert_int_equal(oeap_region_hash("", 0, hex), 0);
	assert_string_equal(hex, "e3b0c44298fc1c14");
	assert_int_equal(oeap_region_hash("abc", 3, hex), 0);
	assert_string_equal(hex, "ba7816bf8f01cfea");
}

/* CRLF is read as LF by the hash (git's autocrlf must not turn a region into
 * "edited by hand"); a bare CR is content; a marker that recorded the raw
 * CRLF bytes' hash (older versions) is still intact. */
static void test_hash_normalises_crlf(void **state)
{
	(void)state;
	char lf[OEAP_HASH_HEX + 1], crlf[OEAP_HASH_HEX + 1], cr[OEAP_HASH_HEX + 1];
	assert_int_equal(oeap_region_hash("a\nb\n", 4, lf), 0);
	assert_int_equal(oeap_region_hash("a\r\nb\r\n", 6, crlf), 0);
	assert_int_equal(oeap_region_hash("a\rb\n", 4, cr), 0);
	assert_string_equal(lf, crlf);
	assert_string_not_equal(lf, cr);

	unsigned char md[32];
	char legacy[OEAP_HASH_HEX + 1];
	assert_non_null(SHA256((const unsigned char *)"y = 2\r\n", 7, md));
	for (int i = 0; i < OEAP_HASH_HEX / 2; i++)
		snprintf(legacy + 2 * i, 3, "%02x", md[i]);
	char text[256];
	snprintf(text, sizeof(text),
	         "x = 1\r\n# >>> oeapatch sglang-oea/1 callsite sha256:%s >>>\r\ny = 2\r\n"
	         "# <<< oeapatch sglang-oea/1 callsite <<<\r\n",
	         legacy);
	oeap_regions rs;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_regions_scan(text, strlen(text), &rs, &err), 0);
	assert_int_equal(rs.n, 1);
	assert_true(oeap_region_intact(&rs.items[0]));
	assert_string_equal(rs.items[0].raw, legacy);
	oeap_regions_free(&rs);
}

static void test_edited_body_not_intact(void **state)
{
	(void)state;
	size_t len, at;
	char *text = build("x = 1\n", "sglang-oea", 1, "callsite", "", "\n", "y = 2\nz = 3\n", "w = 4\n", &len, &at);
	oeap_regions rs;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_regions_scan(text, len, &rs, &err), 0);
	assert_true(oeap_region_intact(&rs.items[0]));
	oeap_regions_free(&rs);
	/* One byte of the body changed: '2' -> '3'. */
	char *two = strstr(text, "y = 2");
	assert_non_null(two);
	two[4] = '3';
	assert_int_equal(oeap_regions_scan(text, len, &rs, &err), 0);
	assert_int_equal(rs.n, 1);
	assert_false(oeap_region_intact(&rs.items[0]));
	char hex[OEAP_HASH_HEX + 1];
	assert_int_equal(oeap_region_hash("y = 3\nz = 3\n", 12, hex), 0);
	assert_string_equal(rs.items[0].actual, hex);
	assert_string_not_equal(rs.items[0].hash, hex);
	oeap_regions_free(&rs);
	/* Indentation counts too: a space added to the body's first line. */
	two[4] = '2';
	oeap_buf b = OEAP_BUF_INIT;
	size_t body = (size_t)(two - text);
	assert_int_equal(oeap_buf_put(&b, text, body), 0);
	assert_int_equal(oeap_buf_puts(&b, " "), 0);
	assert_int_equal(oeap_buf_put(&b, text + body, len - body), 0);
	assert_int_equal(oeap_regions_scan(b.data, b.len, &rs, &err), 0);
	assert_false(oeap_region_intact(&rs.items[0]));
	oeap_regions_free(&rs);
	oeap_buf_free(&b);
	free(text);
}

static void test_nested_begin(void **state)
{
	(void)state;
	oeap_error err = scan_refused("a = 1\n"
	                              "# >>> oeapatch p/1 outer sha256:0123456789abcdef >>>\n"
	                              "b = 2\n"
	                              "# >>> oeapatch p/1 inner sha256:0123456789abcdef >>>\n"
	                              "# <<< oeapatch p/1 inner <<<\n"
	                              "# <<< oeapatch p/1 outer <<<\n");
	assert_int_equal(err.line, 4);
	assert_non_null(strstr(err.message, "nested"));
	assert_non_null(strstr(err.message, "'inner'"));
	assert_non_null(strstr(err.message, "'outer' opened at line 2"));
}

static void test_end_without_begin(void **state)
{
	(void)state;
	oeap_error err = scan_refused("a = 1\nb = 2\n    # <<< oeapatch p/1 orphan <<<\nc = 3\n");
	assert_int_equal(err.line, 3);
	assert_non_null(strstr(err.message, "never opened"));
	assert_non_null(strstr(err.message, "'orphan'"));
}

static void test_begin_never_closed(void **state)
{
	(void)state;
	oeap_error err = scan_refused("a = 1\n\n# >>> oeapatch p/2 lost sha256:0123456789abcdef >>>\nb = 2\n");
	assert_int_equal(err.line, 3);
	assert_non_null(strstr(err.message, "'lost' opened at line 3 is never closed"));
}

static void test_mismatched_end(void **state)
{
	(void)state;
	oeap_error err = scan_refused("# >>> oeapatch p/1 one sha256:0123456789abcdef >>>\n"
	                              "x = 1\n"
	                              "# <<< oeapatch p/1 two <<<\n");
	assert_int_equal(err.line, 3);
	assert_non_null(strstr(err.message, "'p/1 two'"));
	assert_non_null(strstr(err.message, "(line 1) is 'p/1 one'"));
	/* Same name, other version: also a mismatch. */
	err = scan_refused("# >>> oeapatch p/1 one sha256:0123456789abcdef >>>\n"
	                   "# <<< oeapatch p/2 one <<<\n");
	assert_int_equal(err.line, 2);
	assert_non_null(strstr(err.message, "'p/2 one'"));
}

static void test_duplicate_region(void **state)
{
	(void)state;
	size_t len1, len2, at1, at2;
	char *first = build("a = 1\n", "sglang-oea", 1, "callsite", "", "\n", "x = 1\n", "b = 2\n", &len1, &at1);
	char *both = build(first, "sglang-oea", 1, "callsite", "", "\n", "x = 1\n", "", &len2, &at2);
	oeap_error err = scan_refused(both);
	/* The first begin marker is line 2, the second line 6. */
	assert_int_equal(err.line, 6);
	assert_non_null(strstr(err.message, "appears twice"));
	assert_non_null(strstr(err.message, "lines 2 and 6"));
	assert_non_null(strstr(err.message, "'callsite'"));
	free(first);
	free(both);
}

static void test_malformed_markers(void **state)
{
	(void)state;
	static const struct {
		const char *text;
		long line;
	} cases[] = {
		/* hash of 15 digits */
		{"a = 1\n# >>> oeapatch p/1 r sha256:0123456789abcde >>>\n# <<< oeapatch p/1 r <<<\n", 2},
		/* hash of 17 digits */
		{"a = 1\n# >>> oeapatch p/1 r sha256:0123456789abcdef0 >>>\n# <<< oeapatch p/1 r <<<\n", 2},
		/* upper-case hex */
		{"# >>> oeapatch p/1 r sha256:0123456789ABCDEF >>>\n# <<< oeapatch p/1 r <<<\n", 1},
		/* missing >>> */
		{"a = 1\nb = 2\n# >>> oeapatch p/1 r sha256:0123456789abcdef\n# <<< oeapatch p/1 r <<<\n", 3},
		/* trailing text after >>> */
		{"# >>> oeapatch p/1 r sha256:0123456789abcdef >>> x\n# <<< oeapatch p/1 r <<<\n", 1},
		/* no version */
		{"# >>> oeapatch p r sha256:0123456789abcdef >>>\n# <<< oeapatch p r <<<\n", 1},
		/* version 0 */
		{"# >>> oeapatch p/0 r sha256:0123456789abcdef >>>\n# <<< oeapatch p/0 r <<<\n", 1},
		/* end marker missing <<< */
		{"# >>> oeapatch p/1 r sha256:0123456789abcdef >>>\nx\n# <<< oeapatch p/1 r\n", 3},
		/* end marker with a hash */
		{"# >>> oeapatch p/1 r sha256:0123456789abcdef >>>\n# <<< oeapatch p/1 r sha256:0123456789abcdef <<<\n", 2},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		oeap_error err = scan_refused(cases[i].text);
		if (err.line != cases[i].line)
			fail_msg("case %zu: line %ld, expected %ld (%s)", i, err.line, cases[i].line, err.message);
		assert_non_null(strstr(err.message, "malformed"));
		char expect[32];
		snprintf(expect, sizeof(expect), "line %ld ", cases[i].line);
		assert_non_null(strstr(err.message, expect));
	}
}

static void test_other_patches_listed_but_ignored(void **state)
{
	(void)state;
	size_t l1, l2, l3, a1, a2, a3;
	char *t1 = build("a = 1\n", "other-patch", 3, "callsite", "", "\n", "o = 1\n", "b = 2\n", &l1, &a1);
	char *t2 = build(t1, "sglang-oea", 1, "import", "", "\n", "from . import m as _m\n", "c = 3\n", &l2, &a2);
	char *t3 = build(t2, "sglang-oea", 1, "callsite", "    ", "\n", "    q = 1\n", "d = 4\n", &l3, &a3);
	oeap_regions rs;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_regions_scan(t3, l3, &rs, &err), 0);
	assert_int_equal(rs.n, 3);
	assert_string_equal(rs.items[0].patch, "other-patch");
	assert_int_equal(rs.items[0].version, 3);
	assert_int_equal(rs.items[0].start, a1);
	assert_int_equal(oeap_regions_count(&rs, "sglang-oea"), 2);
	assert_int_equal(oeap_regions_count(&rs, "other-patch"), 1);
	assert_int_equal(oeap_regions_count(&rs, "nobody"), 0);
	/* The same region name in two patches is not a duplicate. */
	const oeap_region *mine = oeap_regions_find(&rs, "sglang-oea", "callsite");
	const oeap_region *theirs = oeap_regions_find(&rs, "other-patch", "callsite");
	assert_non_null(mine);
	assert_non_null(theirs);
	assert_ptr_not_equal(mine, theirs);
	assert_int_equal(mine->start, a3);

	/* Stripping sglang-oea leaves the other patch's region, byte for byte. */
	oeap_buf out = OEAP_BUF_INIT;
	assert_int_equal(oeap_regions_strip(t3, l3, &rs, "sglang-oea", &out), 0);
	oeap_buf want = OEAP_BUF_INIT;
	assert_int_equal(oeap_buf_puts(&want, t1), 0);
	assert_int_equal(oeap_buf_puts(&want, "c = 3\nd = 4\n"), 0);
	assert_int_equal(out.len, want.len);
	assert_memory_equal(out.data, want.data, want.len);
	oeap_buf_free(&out);
	oeap_buf_free(&want);

	/* Stripping the other one leaves ours. */
	assert_int_equal(oeap_regions_strip(t3, l3, &rs, "other-patch", &out), 0);
	assert_int_equal(out.len, l3 - (rs.items[0].end - rs.items[0].start));
	assert_memory_equal(out.data, "a = 1\nb = 2\n", 12);
	assert_null(strstr(out.data, "other-patch"));
	assert_non_null(strstr(out.data, "sglang-oea/1 import"));
	oeap_buf_free(&out);

	/* Stripping a patch with no regions copies everything. */
	assert_int_equal(oeap_regions_strip(t3, l3, &rs, "nobody", &out), 0);
	assert_int_equal(out.len, l3);
	assert_memory_equal(out.data, t3, l3);
	oeap_buf_free(&out);
	oeap_regions_free(&rs);
	free(t1);
	free(t2);
	free(t3);
}

static void test_strip_fixture(void **state)
{
	(void)state;
	/* A real file, CRLF, with a region at its very end (no text after it). */
	size_t olen;
	char *orig = tu_read("tests/fixtures/variants/crlf.py", &olen);
	size_t len, at;
	char *text = build(orig, "sglang-oea", 1, "tail", "", "\r\n", "pass\r\n", "", &len, &at);
	assert_int_equal(at, olen);
	oeap_regions rs;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_regions_scan(text, len, &rs, &err), 0);
	assert_int_equal(rs.n, 1);
	assert_int_equal(rs.items[0].end, len);
	assert_true(oeap_region_intact(&rs.items[0]));
	oeap_buf out = OEAP_BUF_INIT;
	assert_int_equal(oeap_regions_strip(text, len, &rs, "sglang-oea", &out), 0);
	assert_int_equal(out.len, olen);
	assert_memory_equal(out.data, orig, olen);
	oeap_buf_free(&out);
	oeap_regions_free(&rs);
	free(text);
	free(orig);
}

static void test_no_regions(void **state)
{
	(void)state;
	/* Text that merely mentions the markers' words is not a marker. */
	static const char text[] = "# >>> not ours >>>\nx = '# >>> oeapatch p/1 r sha256:0123456789abcdef >>>'\n";
	oeap_regions rs;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_regions_scan(text, sizeof(text) - 1, &rs, &err), 0);
	assert_int_equal(rs.n, 0);
	assert_int_equal(oeap_regions_count(&rs, "p"), 0);
	oeap_regions_free(&rs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip_lf),
		cmocka_unit_test(test_round_trip_crlf),
		cmocka_unit_test(test_round_trip_tab_indent),
		cmocka_unit_test(test_hash_known_value),
		cmocka_unit_test(test_hash_normalises_crlf),
		cmocka_unit_test(test_edited_body_not_intact),
		cmocka_unit_test(test_nested_begin),
		cmocka_unit_test(test_end_without_begin),
		cmocka_unit_test(test_begin_never_closed),
		cmocka_unit_test(test_mismatched_end),
		cmocka_unit_test(test_duplicate_region),
		cmocka_unit_test(test_malformed_markers),
		cmocka_unit_test(test_other_patches_listed_but_ignored),
		cmocka_unit_test(test_strip_fixture),
		cmocka_unit_test(test_no_regions),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
