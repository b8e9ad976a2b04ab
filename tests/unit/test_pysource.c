/*
 * test_pysource.c - parsing, the byte checks parsing makes, and the line
 * helpers, on the fixtures and on small inline sources.
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pyparse.h"
#include "pysource.h"

/* 1-based line of byte offset `off` in `text`. */
static long line_at(const char *text, size_t off)
{
	long line = 1;
	for (size_t i = 0; i < off; i++)
		line += text[i] == '\n';
	return line;
}

static void parses(const char *rel, const char *want_eol, size_t want_bom)
{
	size_t len;
	char *buf = tu_read(rel, &len);
	oeap_pysource *src = NULL;
	oeap_error err;
	oeap_error_clear(&err);
	if (oeap_pysource_parse(buf, len, rel, &src, &err))
		fail_msg("%s: %s: line %ld: %s", rel, err.where, err.line, err.message);
	assert_non_null(src);
	assert_int_equal(err.kind, OEAP_ERR_NONE);
	assert_ptr_equal(src->buf, buf);
	assert_int_equal(src->len, len);
	assert_string_equal(src->eol, want_eol);
	assert_int_equal(src->bom, want_bom);
	TSNode root = oeap_pysource_root(src);
	assert_string_equal(ts_node_type(root), "module");
	assert_false(ts_node_has_error(root));
	oeap_pysource_free(src);
	free(buf);
}

/* Parses a fixture that must be refused; returns the error (buffer freed). */
static oeap_error refused_buf(const char *buf, size_t len)
{
	oeap_pysource *src = (oeap_pysource *)1;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_pysource_parse(buf, len, "inline.py", &src, &err), -1);
	assert_null(src);
	assert_int_equal(err.kind, OEAP_ERR_INPUT);
	assert_string_equal(err.where, "inline.py");
	return err;
}

static void test_eras_parse(void **state)
{
	(void)state;
	static const char *eras[] = {
		"tests/fixtures/eras/2024-12_positional.py",
		"tests/fixtures/eras/2025-03_recorder.py",
		"tests/fixtures/eras/2025-05_dispatch_info.py",
		"tests/fixtures/eras/2025-07_kwonly_topkoutput.py",
		"tests/fixtures/eras/2025-08_topk_config.py",
		"tests/fixtures/eras/2025-12_layer_id_capturer.py",
		"tests/fixtures/eras/2026-02_post_process.py",
	};
	for (size_t i = 0; i < sizeof(eras) / sizeof(eras[0]); i++)
		parses(eras[i], "\n", 0);
}

static void test_variants_parse(void **state)
{
	(void)state;
	parses("tests/fixtures/variants/crlf.py", "\r\n", 0);
	parses("tests/fixtures/variants/tabs.py", "\n", 0);
	parses("tests/fixtures/variants/bom.py", "\n", 3);
	parses("tests/fixtures/variants/decorated.py", "\n", 0);
	parses("tests/fixtures/variants/comments.py", "\n", 0);
	parses("tests/fixtures/variants/large.py", "\n", 0);
}

static void test_refuse_syntax_error(void **state)
{
	(void)state;
	size_t len;
	char *buf = tu_read("tests/fixtures/refuse/syntax_error.py", &len);
	/* The unclosed call is the `fused_topk(` line of the chain's first branch. */
	const char *open = strstr(buf, "topk_ids = fused_topk(\n");
	assert_non_null(open);
	long want = line_at(buf, (size_t)(open - buf));
	oeap_pysource *src = NULL;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_pysource_parse(buf, len, "syntax_error.py", &src, &err), -1);
	assert_null(src);
	assert_int_equal(err.kind, OEAP_ERR_INPUT);
	assert_int_equal(err.line, want);
	assert_string_equal(err.where, "syntax_error.py");
	char expect[64];
	snprintf(expect, sizeof(expect), "syntax error at line %ld,", want);
	assert_non_null(strstr(err.message, expect));
	free(buf);
}

static void test_refuse_empty(void **state)
{
	(void)state;
	size_t len;
	char *buf = tu_read("tests/fixtures/refuse/empty.py", &len);
	assert_int_equal(len, 0);
	oeap_error err = refused_buf(buf, len);
	assert_non_null(strstr(err.message, "empty"));
	assert_int_equal(err.line, 0);
	free(buf);
}

static void test_refuse_invalid_utf8(void **state)
{
	(void)state;
	size_t len;
	char *buf = tu_read("tests/fixtures/refuse/invalid_utf8.py", &len);
	size_t off = 0;
	while (off < len && (unsigned char)buf[off] < 0x80)
		off++;
	assert_true(off < len);
	assert_int_equal((unsigned char)buf[off], 0xe9);
	oeap_error err = refused_buf(buf, len);
	char expect[64];
	snprintf(expect, sizeof(expect), "offset %zu", off);
	assert_non_null(strstr(err.message, "UTF-8"));
	assert_non_null(strstr(err.message, expect));
	assert_int_equal(err.line, line_at(buf, off));
	free(buf);
}

static void test_refuse_mixed_eol(void **state)
{
	(void)state;
	size_t len;
	char *buf = tu_read("tests/fixtures/refuse/mixed_eol.py", &len);
	/* The fixture starts with CRLF lines: the first LF-only line is the culprit. */
	const char *first_crlf = strstr(buf, "\r\n");
	assert_non_null(first_crlf);
	size_t lf = 0;
	while (lf < len && !(buf[lf] == '\n' && (lf == 0 || buf[lf - 1] != '\r')))
		lf++;
	assert_true(lf < len);
	assert_true((size_t)(first_crlf - buf) < lf);
	oeap_error err = refused_buf(buf, len);
	assert_non_null(strstr(err.message, "mixed line endings"));
	assert_int_equal(err.line, line_at(buf, lf));
	char expect[64];
	snprintf(expect, sizeof(expect), "first LF on line %ld", line_at(buf, lf));
	assert_non_null(strstr(err.message, expect));
	free(buf);
}

static void test_refuse_bare_cr(void **state)
{
	(void)state;
	static const char buf[] = "x = 1\ny = 2\rz = 3\n";
	oeap_error err = refused_buf(buf, sizeof(buf) - 1);
	assert_non_null(strstr(err.message, "bare carriage return at offset 11"));
	assert_int_equal(err.line, 2);
}

static void test_refuse_nul(void **state)
{
	(void)state;
	static const char buf[] = "x = 1\n\ny = '\0'\n";
	oeap_error err = refused_buf(buf, sizeof(buf) - 1);
	assert_non_null(strstr(err.message, "NUL byte at offset 12"));
	assert_int_equal(err.line, 3);
}

static void test_refuse_overlong_and_surrogate(void **state)
{
	(void)state;
	/* "/" as an overlong 2-byte form, and an encoded surrogate U+D800. */
	static const char overlong[] = "x = '\xc0\xaf'\n";
	static const char surrogate[] = "x = 1\ny = '\xed\xa0\x80'\n";
	static const char truncated[] = "x = '\xe2\x82";
	oeap_error err = refused_buf(overlong, sizeof(overlong) - 1);
	assert_non_null(strstr(err.message, "invalid UTF-8 at offset 5"));
	err = refused_buf(surrogate, sizeof(surrogate) - 1);
	assert_non_null(strstr(err.message, "invalid UTF-8 at offset 11"));
	assert_int_equal(err.line, 2);
	err = refused_buf(truncated, sizeof(truncated) - 1);
	assert_non_null(strstr(err.message, "invalid UTF-8 at offset 5"));
	/* Valid multi-byte text is fine. */
	static const char ok[] = "s = 'caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80'\n";
	oeap_pysource *src = NULL;
	oeap_error_clear(&err);
	assert_int_equal(oeap_pysource_parse(ok, sizeof(ok) - 1, "ok.py", &src, &err), 0);
	oeap_pysource_free(src);
}

static void test_bom_offsets_absolute(void **state)
{
	(void)state;
	static const char buf[] = "\xef\xbb\xbfimport os\nx = 1\n";
	oeap_pysource *src = NULL;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_pysource_parse(buf, sizeof(buf) - 1, "bom.py", &src, &err), 0);
	assert_int_equal(src->bom, 3);
	TSNode root = oeap_pysource_root(src);
	assert_int_equal(ts_node_named_child_count(root), 2);
	TSNode imp = ts_node_named_child(root, 0), assign = ts_node_named_child(root, 1);
	assert_int_equal(oeap_pysource_start(src, imp), 3);
	assert_int_equal(oeap_pysource_end(src, imp), 12);
	assert_int_equal(oeap_pysource_start(src, assign), 13);
	assert_int_equal(oeap_pysource_end(src, assign), 18);
	char *t = oeap_pysource_text(src, imp);
	assert_string_equal(t, "import os");
	free(t);
	assert_true(oeap_pysource_text_eq(src, assign, "x = 1"));
	assert_false(oeap_pysource_text_eq(src, assign, "x = 2"));
	assert_false(oeap_pysource_text_eq(src, assign, "x = 1\n"));
	assert_int_equal(oeap_pysource_line_of(src, oeap_pysource_start(src, assign)), 2);
	assert_int_equal(oeap_pysource_line_start(src, oeap_pysource_start(src, imp)), 0);
	oeap_pysource_free(src);
}

static void test_bom_fixture(void **state)
{
	(void)state;
	size_t len;
	char *buf = tu_read("tests/fixtures/variants/bom.py", &len);
	oeap_pysource *src = NULL;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_pysource_parse(buf, len, "bom.py", &src, &err), 0);
	assert_int_equal(src->bom, 3);
	assert_memory_equal(buf, "\xef\xbb\xbf", 3);
	/* Every module-level statement's text is at its absolute offset. */
	TSNode root = oeap_pysource_root(src);
	uint32_t n = ts_node_named_child_count(root);
	assert_true(n > 10);
	for (uint32_t i = 0; i < n; i++) {
		TSNode c = ts_node_named_child(root, i);
		size_t s = oeap_pysource_start(src, c), e = oeap_pysource_end(src, c);
		assert_int_equal(s, 3 + ts_node_start_byte(c));
		char *t = oeap_pysource_text(src, c);
		assert_int_equal(strlen(t), e - s);
		assert_memory_equal(t, buf + s, e - s);
		/* Lines of the BOM file count like everyone else's. */
		assert_int_equal(oeap_pysource_line_of(src, s), (long)ts_node_start_point(c).row + 1);
		free(t);
	}
	/* The first statement is the variant's comment, right after the BOM. */
	assert_string_equal(ts_node_type(ts_node_child(root, 0)), "comment");
	assert_int_equal(oeap_pysource_start(src, ts_node_child(root, 0)), 3);
	assert_int_equal(buf[3], '#');
	oeap_pysource_free(src);
	free(buf);
}

static void test_crlf_fixture(void **state)
{
	(void)state;
	size_t len;
	char *buf = tu_read("tests/fixtures/variants/crlf.py", &len);
	oeap_pysource *src = NULL;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_pysource_parse(buf, len, "crlf.py", &src, &err), 0);
	assert_string_equal(src->eol, "\r\n");
	/* line_start / next_line step over whole CRLF lines. */
	size_t second = oeap_pysource_next_line(src, 0);
	assert_int_equal(buf[second - 1], '\n');
	assert_int_equal(buf[second - 2], '\r');
	assert_int_equal(oeap_pysource_line_of(src, second), 2);
	assert_int_equal(oeap_pysource_line_start(src, second - 2), 0);
	oeap_pysource_free(src);
	free(buf);
}

static void test_no_eol_counts_as_lf(void **state)
{
	(void)state;
	static const char buf[] = "x = 1";
	oeap_pysource *src = NULL;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_pysource_parse(buf, 5, "one.py", &src, &err), 0);
	assert_string_equal(src->eol, "\n");
	oeap_pysource_free(src);
	static const char crlf[] = "x = 1\r\ny = 2";
	oeap_error_clear(&err);
	assert_int_equal(oeap_pysource_parse(crlf, sizeof(crlf) - 1, "crlf.py", &src, &err), 0);
	assert_string_equal(src->eol, "\r\n");
	oeap_pysource_free(src);
}

static void test_line_helpers(void **state)
{
	(void)state;
	/* offsets:   0..5 "a = 1\n", 6 "\n", 7..16 "def f():\n", 16..  "    return 2" (no newline) */
	static const char buf[] = "a = 1\n\ndef f():\n    return 2";
	const size_t len = sizeof(buf) - 1;
	oeap_pysource *src = NULL;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_pysource_parse(buf, len, "small.py", &src, &err), 0);
	assert_int_equal(oeap_pysource_line_of(src, 0), 1);
	assert_int_equal(oeap_pysource_line_of(src, 5), 1); /* the '\n' belongs to line 1 */
	assert_int_equal(oeap_pysource_line_of(src, 6), 2);
	assert_int_equal(oeap_pysource_line_of(src, 7), 3);
	assert_int_equal(oeap_pysource_line_of(src, 16), 4);
	assert_int_equal(oeap_pysource_line_of(src, len), 4);

	assert_int_equal(oeap_pysource_line_start(src, 0), 0);
	assert_int_equal(oeap_pysource_line_start(src, 5), 0);
	assert_int_equal(oeap_pysource_line_start(src, 6), 6);
	assert_int_equal(oeap_pysource_line_start(src, 10), 7);
	assert_int_equal(oeap_pysource_line_start(src, 20), 16);
	assert_int_equal(oeap_pysource_line_start(src, len), 16);

	assert_int_equal(oeap_pysource_next_line(src, 0), 6);
	assert_int_equal(oeap_pysource_next_line(src, 5), 6);
	assert_int_equal(oeap_pysource_next_line(src, 6), 7);
	assert_int_equal(oeap_pysource_next_line(src, 7), 16);
	assert_int_equal(oeap_pysource_next_line(src, 16), len); /* last line: no newline */
	assert_int_equal(oeap_pysource_next_line(src, len), len);

	/* The return statement's node text and position. */
	TSNode root = oeap_pysource_root(src);
	TSNode f = ts_node_named_child(root, 1);
	assert_string_equal(ts_node_type(f), "function_definition");
	TSNode body = ts_node_child_by_field_name(f, "body", 4);
	TSNode ret = ts_node_named_child(body, 0);
	assert_int_equal(oeap_pysource_start(src, ret), 20);
	assert_int_equal(oeap_pysource_end(src, ret), len);
	assert_true(oeap_pysource_text_eq(src, ret, "return 2"));
	oeap_pysource_free(src);
}

static void test_check_bytes_alone(void **state)
{
	(void)state;
	const char *eol = NULL;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_pysource_check_bytes("a\r\nb\r\n", 6, "x", &eol, &err), 0);
	assert_string_equal(eol, "\r\n");
	assert_int_equal(oeap_pysource_check_bytes("a\nb\n", 4, "x", &eol, &err), 0);
	assert_string_equal(eol, "\n");
	/* A syntax error is not the byte check's business. */
	assert_int_equal(oeap_pysource_check_bytes("def (:\n", 7, "x", &eol, &err), 0);
	assert_int_equal(err.kind, OEAP_ERR_NONE);
	assert_int_equal(oeap_pysource_check_bytes("a\nb\r\n", 5, "x", &eol, &err), -1);
	assert_int_equal(err.kind, OEAP_ERR_INPUT);
	assert_non_null(strstr(err.message, "1 LF, 1 CRLF"));
	assert_int_equal(err.line, 2);
}

/* The size limit at its boundary: the limit itself is read, one byte more is
 * refused with the file, its size and the limit named. */
static void test_size_limit(void **state)
{
	(void)state;
	oeap_error err;
	char want[64];
	oeap_error_clear(&err);
	assert_int_equal(oeap_pysource_check_size(0, "t.py", &err), 0);
	assert_int_equal(oeap_pysource_check_size(OEAP_PYSOURCE_MAX_BYTES, "t.py", &err), 0);
	assert_int_equal(err.kind, OEAP_ERR_NONE);
	assert_int_equal(oeap_pysource_check_size(OEAP_PYSOURCE_MAX_BYTES + 1, "t.py", &err), -1);
	assert_int_equal(err.kind, OEAP_ERR_INPUT);
	assert_string_equal(err.where, "t.py");
	snprintf(want, sizeof(want), "%zu bytes", OEAP_PYSOURCE_MAX_BYTES + 1);
	assert_non_null(strstr(err.message, want));
	snprintf(want, sizeof(want), "limit of %zu bytes", OEAP_PYSOURCE_MAX_BYTES);
	assert_non_null(strstr(err.message, want));
	/* SIZE_MAX must not wrap into "fits". */
	assert_int_equal(oeap_pysource_check_size((size_t)-1, "t.py", NULL), -1);
}

static void test_missing_node_refused(void **state)
{
	(void)state;
	/* tree-sitter recovers from this with a MISSING ')' and no ERROR node. */
	static const char buf[] = "x = 1\ny = f(1\n";
	oeap_error err = refused_buf(buf, sizeof(buf) - 1);
	assert_non_null(strstr(err.message, "syntax error"));
	assert_int_equal(err.line, 2);
}

/* Deep nesting must neither overflow the stack (the error search walks with
 * a cursor) nor hide a syntax error at the bottom. */
static void test_deep_nesting(void **state)
{
	(void)state;
	enum { DEPTH = 100000 };
	size_t cap = 2 * DEPTH + 64;
	char *buf = malloc(cap);
	assert_non_null(buf);
	size_t n = 0;
	n += (size_t)sprintf(buf + n, "x = ");
	memset(buf + n, '(', DEPTH);
	n += DEPTH;
	buf[n++] = '1';
	memset(buf + n, ')', DEPTH);
	n += DEPTH;
	buf[n++] = '\n';
	oeap_pysource *src = NULL;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_pysource_parse(buf, n, "deep.py", &src, &err), 0);
	oeap_pysource_free(src);
	/* One closing parenthesis fewer: an error, found and named. */
	memmove(buf + n - 2, buf + n - 1, 1);
	n--;
	src = NULL;
	assert_int_equal(oeap_pysource_parse(buf, n, "deep.py", &src, &err), -1);
	assert_null(src);
	assert_int_equal(err.kind, OEAP_ERR_INPUT);
	assert_non_null(strstr(err.message, "syntax error"));
	free(buf);
}

/* What CPython 3 refuses to compile, tree-sitter-python parses: each must be
 * refused (the line named), and the Python 3 spelling of each accepted.
 * (Each pair was checked with python3's compile(); tests/golden/check_golden.py
 * runs compile() on every golden file.) */
static const struct {
	const char *bad, *good;
	long line;
	const char *why;
} PY3_CASES[] = {
	{"x = 1\nprint x\n", "x = 1\nprint(x)\n", 2, "print statement"},
	{"print x,\n", "print >>f, x\n", 1, "print statement"}, /* the good one is a tuple in Python 3 */
	{"exec 'x = 1'\n", "exec('x = 1')\n", 1, "exec statement"},
	{"x = 1 <> 2\n", "x = 1 != 2\n", 1, "<>"},
	{"x = 0777\n", "x = 0o777 + 00 + 0_0 + 0j + 0x1f\n", 1, "integer literal"},
	{"x = 10L\n", "x = 10\n", 1, "integer literal"},
	{"s = ur'x'\n", "s = u'x' + rb'x' + Rb'x' + f'{s!r}'\n", 1, "string prefix"},
	{"x = `y`\n", "x = repr(y)\n", 1, "backquotes"},
	{"try:\n    pass\nexcept E, e:\n    pass\n", "try:\n    pass\nexcept E as e:\n    pass\n", 3, "except E, name"},
	{"def f(a, (b, c)):\n    pass\n", "def f(a, bc):\n    b, c = bc\n", 1, "tuple parameter"},
	{"def f():\n        x = 1\n    y = 2\n", "def f():\n        x = 1\n        y = 2\n", 3, "unindent does not match"},
	{"def f():\n    x = 1\n        y = 2\n", "def f():\n    x = 1\n    y = (\n            2)\n", 3, "unexpected indent"},
	{"if x:\n\tx = 1\n        y = 2\n", "if x:\n\tx = 1\n\ty = 2\n", 3, "TabError"},
	{"if x:\n        x = 1\n\ty = 2\n", "if x:\n    # c\n        x = 1\n        y = '''\n  z'''\n", 3, "TabError"},
	{"class K:\n    a = 1\n  b = 2\n", "class K:\n    # first\n    a = 1\n\n\n    b = 2\nc = 3\n", 3, "unindent"},
};

static void test_refuse_what_python3_refuses(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(PY3_CASES) / sizeof(PY3_CASES[0]); i++) {
		oeap_pysource *src = NULL;
		oeap_error err;
		oeap_error_clear(&err);
		if (oeap_pysource_parse(PY3_CASES[i].bad, strlen(PY3_CASES[i].bad), "py2.py", &src, &err) == 0)
			fail_msg("case %zu accepted: %s", i, PY3_CASES[i].bad);
		if (err.kind != OEAP_ERR_INPUT || err.line != PY3_CASES[i].line || !strstr(err.message, PY3_CASES[i].why))
			fail_msg("case %zu: kind %d line %ld: %s", i, err.kind, err.line, err.message);
		oeap_error_clear(&err);
		if (oeap_pysource_parse(PY3_CASES[i].good, strlen(PY3_CASES[i].good), "py3.py", &src, &err))
			fail_msg("case %zu: the Python 3 spelling refused: %s", i, err.message);
		oeap_pysource_free(src);
	}
}

/* Lines inside strings, brackets and after backslashes are told apart. */
static void test_line_kinds(void **state)
{
	(void)state;
	static const char text[] = "a = '''\n"        /* 0 code */
	                           "# in string\n"    /* 1 string */
	                           "'''\n"            /* 2 string */
	                           "b = (1,\n"        /* 3 code */
	                           "# in brackets\n"  /* 4 continued */
	                           "2) + \\\n"        /* 5 continued */
	                           "3\n"              /* 6 continued */
	                           "c = 'x\\\n"       /* 7 code */
	                           "y' # ''' \n"      /* 8 string */
	                           "d = \"\"\"\"\"\"\n" /* 9 code */
	                           "e = r'\\'' \n"    /* 10 code */
	                           "# '''\n"          /* 11 code */
	                           "f = 1\n";         /* 12 code */
	static const unsigned char want[] = {0, 2, 2, 0, 1, 1, 1, 0, 2, 0, 0, 0, 0, 0};
	unsigned char *kinds = NULL;
	size_t n = 0;
	assert_int_equal(oeap_pysource_line_kinds(text, sizeof(text) - 1, &kinds, &n), 0);
	assert_int_equal(n, sizeof(want));
	for (size_t i = 0; i < n; i++)
		if (kinds[i] != want[i])
			fail_msg("line %zu: kind %d, want %d", i, kinds[i], want[i]);
	free(kinds);
}

/*
 * oeap_pysource_parse_inserted() checks again only what the insertions changed
 * (the rest passed in the original): its verdicts must be a parse from
 * scratch's, word for word. Every snippet below inserted at every line start
 * of BASE (inside strings, before a block's first statement, between
 * methods, in a tab-indented block, at the end), alone and with a second
 * insertion at a later line start.
 */
static const char BASE[] =
	"import os\n"
	"def f(a):\n"
	"    # c\n"
	"    if a:\n"
	"        x = 1\n"
	"    elif a > 1:\n"
	"        y = (1,\n"
	"             2)\n"
	"    else:\n"
	"        pass\n"
	"    return a\n"
	"\n"
	"\n"
	"class K:\n"
	"    def m(self):\n"
	"        s = '''\n"
	"  text'''\n"
	"        return s\n"
	"\n"
	"    @property\n"
	"    def n(self):\n"
	"            pass\n"
	"if True:\n"
	"\tz = 1\n";

static const char *const SNIPPETS[] = {
	"x = 1\n", "    x = 1\n", "        x = 1\n", "            x = 1\n", "  x = 1\n", "\tx = 1\n",
	"    print x\n", "    x = 0777\n", "    s = ur'x'\n", "    if a:\n        pass\n", "    if a:\n    pass\n",
	"def g():\n    return 1\n", "    x = (\n", "    # only a comment\n", "\n",
	"    try:\n        pass\n    except E, e:\n        pass\n", "    def h(a, (b, c)):\n        pass\n",
	"    x = 1 <> 2\n", "\tif a:\n\t\tpass\n",
};

static void expect_inserted_like_scratch(const oeap_pysource *old, const char *text, size_t len, const size_t *at,
                                         const size_t *ins_len, size_t n)
{
	oeap_pysource *a = NULL, *b = NULL;
	oeap_error ea, eb;
	oeap_error_clear(&ea);
	oeap_error_clear(&eb);
	int ra = oeap_pysource_parse(text, len, "t.py", &a, &ea);
	int rb = oeap_pysource_parse_inserted(old, text, len, at, ins_len, n, "t.py", &b, &eb);
	if (ra != rb || ea.kind != eb.kind || ea.line != eb.line || strcmp(ea.message, eb.message) != 0)
		fail_msg("%zu insertion(s), the first at %zu: from scratch %d (line %ld: %s), inserted %d (line %ld: %s)\n%.*s",
		         n, at[0], ra, ea.line, ea.message, rb, eb.line, eb.message, (int)len, text);
	oeap_pysource_free(a);
	oeap_pysource_free(b);
}

static void test_inserted_checks_like_scratch(void **state)
{
	(void)state;
	oeap_pysource *old = NULL;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_pysource_parse(BASE, strlen(BASE), "base.py", &old, &err), 0);
	size_t starts[64], nstarts = 0;
	starts[nstarts++] = 0;
	for (size_t i = 0; BASE[i]; i++)
		if (BASE[i] == '\n')
			starts[nstarts++] = i + 1;
	size_t blen = strlen(BASE);
	char *text = malloc(blen + 512);
	assert_non_null(text);
	size_t refused = 0, runs = 0;
	static const char two[] = "    x = 1\n";
	size_t tl = sizeof(two) - 1;
	for (size_t s = 0; s < sizeof(SNIPPETS) / sizeof(SNIPPETS[0]); s++) {
		size_t sl = strlen(SNIPPETS[s]);
		for (size_t i = 0; i < nstarts; i++) {
			/* alone */
			memcpy(text, BASE, starts[i]);
			memcpy(text + starts[i], SNIPPETS[s], sl);
			memcpy(text + starts[i] + sl, BASE + starts[i], blen - starts[i]);
			size_t at[2] = {starts[i], 0}, lens[2] = {sl, 0};
			expect_inserted_like_scratch(old, text, blen + sl, at, lens, 1);
			oeap_pysource *p = NULL;
			refused += oeap_pysource_parse(text, blen + sl, "t.py", &p, &err) != 0;
			oeap_pysource_free(p);
			runs++;
			/* and "    x = 1\n" at a later line start */
			for (size_t j = i + 1; j < nstarts; j += 3) {
				size_t n = starts[i];
				memcpy(text, BASE, n);
				memcpy(text + n, SNIPPETS[s], sl);
				n += sl;
				memcpy(text + n, BASE + starts[i], starts[j] - starts[i]);
				n += starts[j] - starts[i];
				memcpy(text + n, two, tl);
				n += tl;
				memcpy(text + n, BASE + starts[j], blen - starts[j]);
				n += blen - starts[j];
				at[1] = starts[j] + sl;
				lens[1] = tl;
				expect_inserted_like_scratch(old, text, n, at, lens, 2);
			}
		}
	}
	/* both verdicts occur, so the comparison means something */
	assert_true(refused > 0 && refused < runs);
	free(text);
	oeap_pysource_free(old);
}

/* oeap_pysource_line_kinds() as it was before its fast paths (runs of bytes that
 * change no state skipped at once): the fast one must classify every line the
 * same, on every fixture and on texts made of the bytes that matter. */
static int reference_line_kinds(const char *buf, size_t len, unsigned char **kinds, size_t *n)
{
	size_t lines = 1;
	for (const char *p = buf; (p = memchr(p, '\n', len - (size_t)(p - buf))) != NULL; p++)
		lines++;
	unsigned char *k = calloc(lines, 1);
	if (!k)
		return -1;
	size_t line = 0, depth = 0;
	int in_str = 0, triple = 0, escape = 0, comment = 0, backslash = 0;
	char quote = 0;
	for (size_t i = 0; i < len; i++) {
		char c = buf[i];
		if (c == '\n') {
			/* A one-quote string cannot span lines unless the newline is escaped. */
			if (in_str && !triple && !escape)
				in_str = 0;
			k[++line] = in_str ? OEAP_PYSOURCE_LINE_STRING
			            : depth || backslash ? OEAP_PYSOURCE_LINE_CONTINUED
			                                 : OEAP_PYSOURCE_LINE_CODE;
			escape = comment = backslash = 0;
			continue;
		}
		if (c == '\r')
			continue; /* part of a CRLF: changes none of the states */
		if (comment)
			continue;
		if (in_str) {
			if (escape)
				escape = 0;
			else if (c == '\\')
				escape = 1;
			else if (c == quote && !triple)
				in_str = 0;
			else if (c == quote && i + 2 < len && buf[i + 1] == quote && buf[i + 2] == quote) {
				in_str = 0;
				i += 2;
			}
			continue;
		}
		backslash = 0;
		switch (c) {
		case '#':
			comment = 1;
			break;
		case '\\':
			backslash = 1;
			break;
		case '(': case '[': case '{':
			depth++;
			break;
		case ')': case ']': case '}':
			if (depth)
				depth--;
			break;
		case '"': case '\'':
			in_str = 1;
			quote = c;
			triple = i + 2 < len && buf[i + 1] == c && buf[i + 2] == c;
			if (triple)
				i += 2;
			break;
		}
	}
	*kinds = k;
	*n = lines;
	return 0;
}

static void expect_line_kinds_like_reference(const char *text, size_t len, const char *what)
{
	unsigned char *a = NULL, *b = NULL;
	size_t na = 0, nb = 0;
	assert_int_equal(reference_line_kinds(text, len, &a, &na), 0);
	assert_int_equal(oeap_pysource_line_kinds(text, len, &b, &nb), 0);
	assert_int_equal(na, nb);
	for (size_t i = 0; i < na; i++)
		if (a[i] != b[i])
			fail_msg("%s: line %zu: %d, the reference says %d", what, i + 1, b[i], a[i]);
	free(a);
	free(b);
}

static void test_line_kinds_fast_paths(void **state)
{
	(void)state;
	static const char *const files[] = {
		"tests/fixtures/variants/large.py", "tests/fixtures/variants/comments.py", "tests/fixtures/variants/crlf.py",
		"tests/fixtures/variants/tabs.py", "tests/fixtures/variants/bom.py", "tests/fixtures/eras/2024-12_positional.py",
		"tests/fixtures/eras/2026-02_post_process.py", "tests/fixtures/vllm-0.15-router.py",
		"tests/fixtures/refuse/syntax_error.py", "tests/fixtures/refuse/mixed_eol.py"};
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		size_t len = 0;
		char *text = tu_read(files[i], &len);
		expect_line_kinds_like_reference(text, len, files[i]);
		free(text);
	}
	/* every text of up to 6 bytes over an alphabet of what matters */
	static const char alpha[] = "a#\\\n\r(\"'";
	size_t na = sizeof(alpha) - 1;
	char text[8];
	for (size_t n = 1; n <= 6; n++) {
		size_t total = 1;
		for (size_t k = 0; k < n; k++)
			total *= na;
		for (size_t code = 0; code < total; code++) {
			size_t c = code;
			for (size_t k = 0; k < n; k++, c /= na)
				text[k] = alpha[c % na];
			expect_line_kinds_like_reference(text, n, "generated");
		}
	}
}

/* oeap_pysource_walk() visits what a plain cursor walk visits, in the same order
 * (it counts siblings instead of asking the cursor for one past the last),
 * and skips exactly the subtrees its visitor says. */
typedef struct walk_log {
	TSNode *nodes;
	size_t n, cap;
	int skip_calls; /* skip below every call node */
} walk_log;

static int log_visit(TSNode n, void *user)
{
	walk_log *w = user;
	if (w->n == w->cap) {
		w->cap = w->cap ? 2 * w->cap : 1024;
		w->nodes = realloc(w->nodes, w->cap * sizeof(*w->nodes));
		assert_non_null(w->nodes);
	}
	w->nodes[w->n++] = n;
	return w->skip_calls && strcmp(ts_node_type(n), "call") == 0 ? OEAP_PYSOURCE_WALK_SKIP : OEAP_PYSOURCE_WALK_DESCEND;
}

static void test_walk_like_cursor(void **state)
{
	(void)state;
	static const char *const files[] = {"tests/fixtures/variants/large.py", "tests/fixtures/variants/comments.py",
	                                    "tests/fixtures/eras/2025-08_topk_config.py"};
	for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
		size_t len = 0;
		char *text = tu_read(files[f], &len);
		oeap_pysource *src = NULL;
		oeap_error err;
		oeap_error_clear(&err);
		assert_int_equal(oeap_pysource_parse(text, len, files[f], &src, &err), 0);
		for (int skip = 0; skip < 2; skip++) {
			walk_log w = {NULL, 0, 0, skip};
			assert_int_equal(oeap_pysource_walk(oeap_pysource_root(src), log_visit, &w), 0);
			size_t i = 0;
			TSTreeCursor c = ts_tree_cursor_new(oeap_pysource_root(src));
			for (int more = 1; more;) {
				TSNode n = ts_tree_cursor_current_node(&c);
				assert_true(i < w.n);
				assert_true(ts_node_eq(n, w.nodes[i]));
				i++;
				int descend = !(skip && strcmp(ts_node_type(n), "call") == 0);
				if (descend && ts_tree_cursor_goto_first_child(&c))
					continue;
				while (!ts_tree_cursor_goto_next_sibling(&c))
					if (!ts_tree_cursor_goto_parent(&c)) {
						more = 0;
						break;
					}
			}
			ts_tree_cursor_delete(&c);
			assert_int_equal(i, w.n);
			assert_true(w.n > 1000);
			free(w.nodes);
		}
		/* below a node that is not the root: its subtree only */
		TSNode fn = ts_node_named_child(oeap_pysource_root(src), 3);
		walk_log w = {NULL, 0, 0, 0};
		assert_int_equal(oeap_pysource_walk(fn, log_visit, &w), 0);
		assert_true(w.n >= 1);
		for (size_t k = 0; k < w.n; k++)
			assert_true(ts_node_start_byte(w.nodes[k]) >= ts_node_start_byte(fn) &&
			            ts_node_end_byte(w.nodes[k]) <= ts_node_end_byte(fn));
		free(w.nodes);
		oeap_pysource_free(src);
		free(text);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_eras_parse),
		cmocka_unit_test(test_variants_parse),
		cmocka_unit_test(test_refuse_syntax_error),
		cmocka_unit_test(test_refuse_empty),
		cmocka_unit_test(test_refuse_invalid_utf8),
		cmocka_unit_test(test_refuse_mixed_eol),
		cmocka_unit_test(test_refuse_bare_cr),
		cmocka_unit_test(test_refuse_nul),
		cmocka_unit_test(test_refuse_overlong_and_surrogate),
		cmocka_unit_test(test_bom_offsets_absolute),
		cmocka_unit_test(test_bom_fixture),
		cmocka_unit_test(test_crlf_fixture),
		cmocka_unit_test(test_no_eol_counts_as_lf),
		cmocka_unit_test(test_line_helpers),
		cmocka_unit_test(test_check_bytes_alone),
		cmocka_unit_test(test_size_limit),
		cmocka_unit_test(test_missing_node_refused),
		cmocka_unit_test(test_deep_nesting),
		cmocka_unit_test(test_refuse_what_python3_refuses),
		cmocka_unit_test(test_line_kinds),
		cmocka_unit_test(test_walk_like_cursor),
		cmocka_unit_test(test_line_kinds_fast_paths),
		cmocka_unit_test(test_inserted_checks_like_scratch),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
