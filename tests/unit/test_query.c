/*
 * test_query.c - compiling queries, evaluating their predicates, the @in
 * rule, and the order and uniqueness of what oeap_query_collect returns.
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "predicate.h"
#include "pyparse.h"
#include "query.h"

static oeap_pysource *parse(const char *text)
{
	oeap_pysource *src = NULL;
	oeap_error err;
	oeap_error_clear(&err);
	if (oeap_pysource_parse(text, strlen(text), "inline.py", &src, &err))
		fail_msg("inline source does not parse: %s", err.message);
	return src;
}

static oeap_query *compile(const char *q)
{
	oeap_query *query = NULL;
	oeap_error err;
	oeap_error_clear(&err);
	if (oeap_query_new(q, strlen(q), "inline.scm", &query, &err))
		fail_msg("query does not compile: %s", err.message);
	return query;
}

static oeap_error refused(const char *q)
{
	oeap_query *query = (oeap_query *)1;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_query_new(q, strlen(q), "bad.scm", &query, &err), -1);
	assert_null(query);
	assert_int_equal(err.kind, OEAP_ERR_DEFINITION);
	assert_string_equal(err.where, "bad.scm");
	return err;
}

/*
 * Runs `q` on `text` under the root (or under the node found by `scope_at`,
 * the smallest named node starting at that offset and of that type) and
 * checks the start offsets of what @capture collected against `want`.
 */
static void expect_starts(const char *text, const char *q, const char *capture, const char *scope_type,
                          size_t scope_at, const size_t *want, size_t nwant)
{
	oeap_pysource *src = parse(text);
	oeap_query *query = compile(q);
	TSNode scope = oeap_pysource_root(src);
	if (scope_type) {
		scope = ts_node_named_descendant_for_byte_range(scope, (uint32_t)scope_at, (uint32_t)scope_at);
		while (!ts_node_is_null(scope) && strcmp(ts_node_type(scope), scope_type) != 0)
			scope = ts_node_parent(scope);
		assert_false(ts_node_is_null(scope));
		assert_int_equal(oeap_pysource_start(src, scope), scope_at);
	}
	TSNode *nodes = NULL;
	size_t n = 0;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_query_collect(query, src, scope, capture, &nodes, &n, &err), 0);
	if (n != nwant)
		fail_msg("%zu nodes collected, expected %zu", n, nwant);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(oeap_pysource_start(src, nodes[i]), want[i]);
	if (n == 0)
		assert_null(nodes);
	free(nodes);
	oeap_query_free(query);
	oeap_pysource_free(src);
}

static void test_new_syntax_error(void **state)
{
	(void)state;
	oeap_error err = refused("((identifier) @x");
	assert_non_null(strstr(err.message, "does not compile"));
	assert_non_null(strstr(err.message, "syntax error"));
}

static void test_new_unknown_node_type(void **state)
{
	(void)state;
	oeap_error err = refused("(no_such_node_type) @x");
	assert_non_null(strstr(err.message, "unknown node type"));
	/* The offset of the bad name. */
	assert_non_null(strstr(err.message, "at byte 1"));
}

static void test_new_unknown_field(void **state)
{
	(void)state;
	oeap_error err = refused("(assignment no_such_field: (identifier)) @x");
	assert_non_null(strstr(err.message, "unknown field"));
}

static void test_new_unsupported_predicate(void **state)
{
	(void)state;
	oeap_error err = refused("((identifier) @x (#any-of? @x \"a\" \"b\"))");
	assert_non_null(strstr(err.message, "unsupported predicate #any-of?"));
	/* The second pattern is the one at fault: its index is named. */
	err = refused("((identifier) @x (#eq? @x \"a\"))\n((identifier) @y (#set! foo \"bar\"))");
	assert_non_null(strstr(err.message, "#set!"));
	assert_non_null(strstr(err.message, "pattern 1"));
}

static void test_has_capture(void **state)
{
	(void)state;
	oeap_query *q = compile("((assignment left: (identifier) @left) @stmt)");
	assert_true(oeap_query_has_capture(q, "left"));
	assert_true(oeap_query_has_capture(q, "stmt"));
	assert_false(oeap_query_has_capture(q, "lef"));
	assert_false(oeap_query_has_capture(q, "in"));
	oeap_query_free(q);
}

static void test_collect_unknown_capture(void **state)
{
	(void)state;
	oeap_pysource *src = parse("a = 1\n");
	oeap_query *q = compile("(identifier) @x");
	TSNode *nodes = (TSNode *)1;
	size_t n = 7;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_query_collect(q, src, oeap_pysource_root(src), "y", &nodes, &n, &err), -1);
	assert_int_equal(err.kind, OEAP_ERR_DEFINITION);
	assert_non_null(strstr(err.message, "no capture @y"));
	assert_null(nodes);
	assert_int_equal(n, 0);
	oeap_query_free(q);
	oeap_pysource_free(src);
}

/* "a = 1\n" 0..5, "b = 2\n" 6..11, "c = a\n" 12..17: identifiers at 0, 6, 12, 16. */
static const char ABC[] = "a = 1\nb = 2\nc = a\n";

static void test_eq_string(void **state)
{
	(void)state;
	static const size_t want[] = {0, 16};
	expect_starts(ABC, "((identifier) @x (#eq? @x \"a\"))", "x", NULL, 0, want, 2);
	/* No partial matches: "a" is not "a " nor "" */
	expect_starts(ABC, "((identifier) @x (#eq? @x \"aa\"))", "x", NULL, 0, NULL, 0);
}

static void test_not_eq_string(void **state)
{
	(void)state;
	static const size_t want[] = {6, 12};
	expect_starts(ABC, "((identifier) @x (#not-eq? @x \"a\"))", "x", NULL, 0, want, 2);
}

static void test_match_string(void **state)
{
	(void)state;
	static const size_t want[] = {0, 6, 16};
	expect_starts(ABC, "((identifier) @x (#match? @x \"^[ab]$\"))", "x", NULL, 0, want, 3);
	/* Extended regex syntax: alternation and + without backslashes. */
	expect_starts(ABC, "((identifier) @x (#match? @x \"^(a|b)+$\"))", "x", NULL, 0, want, 3);
}

static void test_not_match_string(void **state)
{
	(void)state;
	static const size_t want[] = {12};
	expect_starts(ABC, "((identifier) @x (#not-match? @x \"^[ab]$\"))", "x", NULL, 0, want, 1);
}

/* "a = a\n" 0..5, "b = c\n" 6..11, "d = d\n" 12..17 */
static const char PAIRS[] = "a = a\nb = c\nd = d\n";

static void test_eq_capture(void **state)
{
	(void)state;
	static const size_t want[] = {0, 12};
	expect_starts(PAIRS, "((assignment left: (identifier) @l right: (identifier) @r) @x (#eq? @l @r))", "x",
	              NULL, 0, want, 2);
}

static void test_not_eq_capture(void **state)
{
	(void)state;
	static const size_t want[] = {6};
	expect_starts(PAIRS, "((assignment left: (identifier) @l right: (identifier) @r) @x (#not-eq? @l @r))",
	              "x", NULL, 0, want, 1);
}

static void test_match_capture(void **state)
{
	(void)state;
	/* The right capture's text is the regular expression. */
	static const char text[] = "ab = a\nb = c\n";
	static const size_t want[] = {0};
	expect_starts(text, "((assignment left: (identifier) @l right: (identifier) @r) @x (#match? @l @r))", "x",
	              NULL, 0, want, 1);
	static const size_t want_not[] = {7};
	expect_starts(text, "((assignment left: (identifier) @l right: (identifier) @r) @x (#not-match? @l @r))",
	              "x", NULL, 0, want_not, 1);
}

static void test_predicates_all_must_hold(void **state)
{
	(void)state;
	static const char text[] = "topk_weights, topk_ids = f()\ntopk_ids, topk_weights = g()\n";
	static const size_t want[] = {0};
	expect_starts(text,
	              "((assignment left: (pattern_list . (identifier) @w . (identifier) @i .)) @m"
	              " (#eq? @w \"topk_weights\") (#eq? @i \"topk_ids\"))",
	              "m", NULL, 0, want, 1);
}

static void test_bad_regex(void **state)
{
	(void)state;
	oeap_pysource *src = parse(ABC);
	oeap_query *q = compile("((identifier) @x (#match? @x \"a(\"))");
	TSNode *nodes = NULL;
	size_t n = 0;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_query_collect(q, src, oeap_pysource_root(src), "x", &nodes, &n, &err), -1);
	assert_int_equal(err.kind, OEAP_ERR_DEFINITION);
	assert_string_equal(err.where, "inline.scm");
	assert_non_null(strstr(err.message, "bad regular expression \"a(\""));
	assert_null(nodes);
	assert_int_equal(n, 0);
	oeap_query_free(q);
	oeap_pysource_free(src);
}

static void test_predicate_arity(void **state)
{
	(void)state;
	oeap_pysource *src = parse(ABC);
	oeap_query *q = compile("((identifier) @x (#eq? @x))");
	TSNode *nodes = NULL;
	size_t n = 0;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_query_collect(q, src, oeap_pysource_root(src), "x", &nodes, &n, &err), -1);
	assert_int_equal(err.kind, OEAP_ERR_DEFINITION);
	assert_non_null(strstr(err.message, "#eq? takes a capture"));
	free(nodes);
	oeap_query_free(q);
	oeap_pysource_free(src);
}

/*
 * 0   "x = 1\n"
 * 6   "def f():\n"
 * 15  "    y = 2\n"
 * 25  "    def g():\n"
 * 38  "        z = 3\n"
 * 52  "    w = 4\n"
 */
static const char NESTED[] = "x = 1\ndef f():\n    y = 2\n    def g():\n        z = 3\n    w = 4\n";

static void test_in_module_level(void **state)
{
	(void)state;
	static const char q[] = "((module (expression_statement (assignment left: (identifier) @name))) @in)\n"
	                         "((block (expression_statement (assignment left: (identifier) @name))) @in)";
	static const size_t at_root[] = {0};
	expect_starts(NESTED, q, "name", NULL, 0, at_root, 1);
	/* Under f's body (a block at 19) only f's own assignments count, not g's. */
	static const size_t at_f_body[] = {19, 56};
	expect_starts(NESTED, q, "name", "block", 19, at_f_body, 2);
	/* Under g's body, g's own. */
	static const size_t at_g_body[] = {46};
	expect_starts(NESTED, q, "name", "block", 46, at_g_body, 1);
}

static void test_in_function(void **state)
{
	(void)state;
	static const char q[] = "((function_definition body: (block (expression_statement) @st)) @in)";
	static const size_t in_f[] = {19, 56};
	expect_starts(NESTED, q, "st", "function_definition", 6, in_f, 2);
	static const size_t in_g[] = {46};
	expect_starts(NESTED, q, "st", "function_definition", 29, in_g, 1);
	/* Without @in the same shape matches at any depth. */
	static const char q_any[] = "(function_definition body: (block (expression_statement) @st))";
	static const size_t any[] = {19, 46, 56};
	expect_starts(NESTED, q_any, "st", "function_definition", 6, any, 3);
	/* From the module, @in is never the scope: nothing. */
	expect_starts(NESTED, q, "st", NULL, 0, NULL, 0);
}

/*
 * A query with @in only looks for matches that start at the scope (query.c
 * stops the cursor's search for pattern roots there), but its patterns still
 * reach as deep as they are written: through a decorator, an if and a with
 * below the scope. Without @in the same pattern starts at any depth.
 */
static void test_in_deep_pattern(void **state)
{
	(void)state;
	/* offsets:  0 "@d\n", 3 "def f():\n", 12 "    if a:\n", 22 "        with b:\n",
	 *           38 "            x = 1\n", 56 "def g():\n", 65 "    if c:\n",
	 *           75 "        with d:\n", 91 "            y = 2\n" */
	static const char text[] = "@d\ndef f():\n    if a:\n        with b:\n            x = 1\n"
	                           "def g():\n    if c:\n        with d:\n            y = 2\n";
	static const char q[] =
	    "((module (decorated_definition definition: (function_definition body: (block (if_statement "
	    "consequence: (block (with_statement body: (block (expression_statement (assignment left: "
	    "(identifier) @name)))))))))) @in)";
	static const size_t f_only[] = {50};
	expect_starts(text, q, "name", NULL, 0, f_only, 1);
	/* Both functions' assignments from the module, and g's from g. */
	static const char q2[] =
	    "((module (function_definition body: (block (if_statement consequence: (block (with_statement "
	    "body: (block (expression_statement (assignment left: (identifier) @name))))))))) @in)\n"
	    "((function_definition body: (block (if_statement consequence: (block (with_statement "
	    "body: (block (expression_statement (assignment left: (identifier) @name)))))))) @in)";
	static const size_t from_module[] = {103};
	expect_starts(text, q2, "name", NULL, 0, from_module, 1);
	static const size_t from_g[] = {103};
	expect_starts(text, q2, "name", "function_definition", 56, from_g, 1);
	static const size_t from_f[] = {50};
	expect_starts(text, q2, "name", "function_definition", 3, from_f, 1);
	/* Without @in: the same shape wherever it starts (here, below the decorator). */
	static const char q_any[] =
	    "(function_definition body: (block (if_statement consequence: (block (with_statement "
	    "body: (block (expression_statement (assignment left: (identifier) @name))))))))";
	static const size_t any[] = {50, 103};
	expect_starts(text, q_any, "name", NULL, 0, any, 2);
}

/*
 * Queries compiled together (oeap_query_new_many) answer each for itself:
 * its own patterns, captures and @in rule, as when compiled alone.
 */
static void test_many_each_its_own(void **state)
{
	(void)state;
	/* offsets: 0 "x = 1\n", 6 "def f():\n", 15 "    y = 2\n" */
	static const char text[] = "x = 1\ndef f():\n    y = 2\n";
	const char *srcs[] = {"((module (expression_statement) @s) @in) ; top-level only",
	                      "(expression_statement) @s\n(identifier) @id", "((function_definition) @fn)"};
	const char *whats[] = {"a.scm", "b.scm", "c.scm"};
	size_t lens[] = {strlen(srcs[0]), strlen(srcs[1]), strlen(srcs[2])};
	oeap_query *qs[3];
	assert_int_equal(oeap_query_new_many(srcs, lens, whats, 3, qs), 0);
	assert_true(oeap_query_has_capture(qs[0], "s"));
	assert_true(oeap_query_has_capture(qs[0], "in"));
	assert_false(oeap_query_has_capture(qs[0], "id"));
	assert_false(oeap_query_has_capture(qs[1], "in"));
	assert_true(oeap_query_has_capture(qs[1], "id"));
	assert_false(oeap_query_has_capture(qs[2], "s"));
	oeap_pysource *src = parse(text);
	TSNode *nodes = NULL;
	size_t n = 0;
	oeap_error err;
	oeap_error_clear(&err);
	/* a.scm: @in is the module, so only x = 1 */
	assert_int_equal(oeap_query_collect(qs[0], src, oeap_pysource_root(src), "s", &nodes, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_int_equal(oeap_pysource_start(src, nodes[0]), 0);
	free(nodes);
	/* b.scm has no @in of its own: every statement, at any depth */
	assert_int_equal(oeap_query_collect(qs[1], src, oeap_pysource_root(src), "s", &nodes, &n, &err), 0);
	assert_int_equal(n, 2);
	assert_int_equal(oeap_pysource_start(src, nodes[0]), 0);
	assert_int_equal(oeap_pysource_start(src, nodes[1]), 19);
	free(nodes);
	/* c.scm cannot collect a.scm's capture */
	nodes = NULL;
	assert_int_equal(oeap_query_collect(qs[2], src, oeap_pysource_root(src), "s", &nodes, &n, &err), -1);
	assert_null(nodes);
	assert_int_equal(oeap_query_collect(qs[2], src, oeap_pysource_root(src), "fn", &nodes, &n, &err), 0);
	assert_int_equal(n, 1);
	free(nodes);
	oeap_pysource_free(src);
	/* freed in any order: the shared query goes with the last */
	oeap_query_free(qs[1]);
	oeap_query_free(qs[0]);
	oeap_query_free(qs[2]);
}

/* Sources that compile only together are refused, as each alone would be. */
static void test_many_refuses_what_compiles_only_together(void **state)
{
	(void)state;
	/* The first leaves a parenthesis open that the second closes. */
	const char *srcs[] = {"((identifier) @x", "(#eq? @x \"a\")) (call) @y"};
	const char *whats[] = {"a.scm", "b.scm"};
	size_t lens[] = {strlen(srcs[0]), strlen(srcs[1])};
	oeap_query *qs[2] = {(oeap_query *)1, (oeap_query *)1};
	assert_int_equal(oeap_query_new_many(srcs, lens, whats, 2, qs), -1);
	assert_null(qs[0]);
	assert_null(qs[1]);
	refused(srcs[0]);
	/* An unsupported predicate, an unknown node type: refused too (the caller names them). */
	const char *bad[] = {"(identifier) @x", "((identifier) @x (#set! @x \"a\"))"};
	size_t blens[] = {strlen(bad[0]), strlen(bad[1])};
	assert_int_equal(oeap_query_new_many(bad, blens, whats, 2, qs), -1);
	const char *broken[] = {"(identifier) @x", "(nonsense_node) @x"};
	size_t brlens[] = {strlen(broken[0]), strlen(broken[1])};
	assert_int_equal(oeap_query_new_many(broken, brlens, whats, 2, qs), -1);
}

static void test_source_order_and_dedup(void **state)
{
	(void)state;
	/* "a = f(b)\n" 0..8, "c = 1\n" 9..14. Patterns in an order that is
	 * not source order, two of them capturing `c`, one capturing the call
	 * that starts where `f` starts. */
	static const char text[] = "a = f(b)\nc = 1\n";
	static const char q[] = "((identifier) @x (#eq? @x \"c\"))\n"
	                        "(call) @x\n"
	                        "(identifier) @x\n"
	                        "((identifier) @x (#match? @x \"^[ac]$\"))";
	oeap_pysource *src = parse(text);
	oeap_query *query = compile(q);
	TSNode *nodes = NULL;
	size_t n = 0;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_query_collect(query, src, oeap_pysource_root(src), "x", &nodes, &n, &err), 0);
	static const size_t starts[] = {0, 4, 4, 6, 9};
	static const char *types[] = {"identifier", "call", "identifier", "identifier", "identifier"};
	static const char *texts[] = {"a", "f(b)", "f", "b", "c"};
	assert_int_equal(n, 5);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(oeap_pysource_start(src, nodes[i]), starts[i]);
		assert_string_equal(ts_node_type(nodes[i]), types[i]);
		assert_true(oeap_pysource_text_eq(src, nodes[i], texts[i]));
	}
	free(nodes);
	oeap_query_free(query);
	oeap_pysource_free(src);
}

static void test_collect_with_bom(void **state)
{
	(void)state;
	/* Offsets stay absolute (BOM included) and predicates read the right text. */
	static const char text[] = "\xef\xbb\xbf" "abc = 1\nd = abc\n";
	static const size_t want[] = {3, 15};
	expect_starts(text, "((identifier) @x (#eq? @x \"abc\"))", "x", NULL, 0, want, 2);
}

/*
 * What oeap_query_collect must return for a query with @in, computed the
 * slow way: a cursor over the whole scope with no byte range, every match
 * kept whose @in is the scope, the @capture nodes sorted and each taken once
 * (queries without predicates). collect keeps the cursor out of subtrees no
 * pattern rooted at the scope reaches into; it must find exactly these.
 */
static size_t reference_collect(const char *qs, const oeap_pysource *src, TSNode scope, const char *capture,
                                TSNode *out, size_t cap)
{
	uint32_t off = 0, cap_id = UINT32_MAX, in_id = UINT32_MAX;
	TSQueryError qe;
	TSQuery *q = ts_query_new(tree_sitter_python(), qs, (uint32_t)strlen(qs), &off, &qe);
	assert_non_null(q);
	for (uint32_t i = 0; i < ts_query_capture_count(q); i++) {
		uint32_t l;
		const char *name = ts_query_capture_name_for_id(q, i, &l);
		if (!strcmp(name, capture))
			cap_id = i;
		if (!strcmp(name, "in"))
			in_id = i;
	}
	assert_int_not_equal(in_id, UINT32_MAX);
	TSQueryCursor *cur = ts_query_cursor_new();
	ts_query_cursor_exec(cur, q, scope);
	TSQueryMatch m;
	size_t n = 0;
	while (ts_query_cursor_next_match(cur, &m)) {
		int in_scope = 0;
		for (uint16_t i = 0; i < m.capture_count; i++)
			in_scope |= m.captures[i].index == in_id && ts_node_eq(m.captures[i].node, scope);
		for (uint16_t i = 0; in_scope && i < m.capture_count; i++) {
			if (m.captures[i].index != cap_id)
				continue;
			size_t k = 0;
			while (k < n && !ts_node_eq(out[k], m.captures[i].node))
				k++;
			if (k == n) {
				assert_true(n < cap);
				out[n++] = m.captures[i].node;
			}
		}
	}
	ts_query_cursor_delete(cur);
	ts_query_delete(q);
	/* source order, outer node first: oeap_query_collect's order */
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0; j--) {
			TSNode a = out[j - 1], b = out[j];
			int later = ts_node_start_byte(a) > ts_node_start_byte(b) ||
			            (ts_node_start_byte(a) == ts_node_start_byte(b) && ts_node_end_byte(a) < ts_node_end_byte(b));
			if (!later)
				break;
			out[j - 1] = b;
			out[j] = a;
		}
	return n;
}

/* collect == reference_collect for `q` under every node of `src` of type
 * `scope_type` (and under the module when it is "module"); returns how many
 * nodes were collected over all scopes, so the caller can see it found any. */
static size_t expect_like_reference(const oeap_pysource *src, const char *qs, const char *capture,
                                    const char *scope_type)
{
	oeap_query *query = compile(qs);
	size_t total = 0, scopes = 0;
	TSTreeCursor c = ts_tree_cursor_new(oeap_pysource_root(src));
	for (int more = 1; more;) {
		TSNode scope = ts_tree_cursor_current_node(&c);
		if (!strcmp(ts_node_type(scope), scope_type)) {
			TSNode want[256], *got = NULL;
			size_t nwant = reference_collect(qs, src, scope, capture, want, 256), n = 0;
			oeap_error err;
			oeap_error_clear(&err);
			assert_int_equal(oeap_query_collect(query, src, scope, capture, &got, &n, &err), 0);
			if (n != nwant)
				fail_msg("%s under the %s at byte %u: %zu nodes collected, the full walk finds %zu", capture,
				         scope_type, ts_node_start_byte(scope), n, nwant);
			for (size_t i = 0; i < n; i++)
				assert_true(ts_node_eq(got[i], want[i]));
			free(got);
			total += n;
			scopes++;
		}
		if (ts_tree_cursor_goto_first_child(&c))
			continue;
		while (!ts_tree_cursor_goto_next_sibling(&c))
			if (!ts_tree_cursor_goto_parent(&c)) {
				more = 0;
				break;
			}
	}
	ts_tree_cursor_delete(&c);
	oeap_query_free(query);
	assert_true(scopes > 0);
	return total;
}

/* Scopes in the middle of a file, captures one to four levels below them,
 * the same shapes nested deeper (which @in must not take), decorated
 * definitions, a capture on the scope's first and last child. */
static const char SHAPES[] =
	"import os\n"
	"from a import b\n"
	"@decorator\n"
	"def select_experts(x):\n"
	"    if x:\n"
	"        topk_weights, topk_ids = f(x)\n"
	"    elif y:\n"
	"        (topk_weights, topk_ids) = g(x)\n"
	"    def inner():\n"
	"        if z:\n"
	"            topk_weights, topk_ids = h()\n"
	"        import sys\n"
	"    return x\n"
	"class C:\n"
	"    import json\n"
	"    def select_experts(self):\n"
	"        if a:\n"
	"            pass\n"
	"def select_experts(y):\n"
	"    topk_weights, topk_ids = y\n"
	"    if y:\n"
	"        pass\n"
	"import re\n"
	"if True:\n"
	"    import io\n"
	"def last():\n"
	"    if q:\n"
	"        pass\n";

static void test_in_scope_walk_finds_what_the_full_walk_finds(void **state)
{
	(void)state;
	static const char select[] = "((module (function_definition name: (identifier) @name) @function) @in)\n"
	                             "((module (decorated_definition definition: (function_definition name: "
	                             "(identifier) @name) @function)) @in)";
	static const char imports[] = "((module (import_statement) @import) @in)\n"
	                              "((module (import_from_statement) @import) @in)\n"
	                              "((module (future_import_statement) @import) @in)";
	static const char chain[] = "((function_definition body: (block (if_statement) @chain)) @in)";
	static const char deep[] = "((function_definition body: (block (if_statement consequence: (block "
	                           "(expression_statement (assignment left: (pattern_list) @pair)))))) @in)";
	static const char block_first[] = "((block . (_) @first) @in)";
	static const char block_last[] = "((block (_) @last .) @in)";
	oeap_pysource *src = parse(SHAPES);
	assert_int_equal(expect_like_reference(src, select, "function", "module"), 3);
	assert_int_equal(expect_like_reference(src, imports, "import", "module"), 3);
	assert_true(expect_like_reference(src, chain, "chain", "function_definition") >= 4);
	assert_int_equal(expect_like_reference(src, deep, "pair", "function_definition"), 2);
	assert_true(expect_like_reference(src, block_first, "first", "block") > 5);
	assert_true(expect_like_reference(src, block_last, "last", "block") > 5);
	oeap_pysource_free(src);
	/* The real files, with the definition's own anchor queries. */
	static const char *const files[] = {"tests/fixtures/variants/large.py", "tests/fixtures/variants/decorated.py",
	                                    "tests/fixtures/eras/2024-12_positional.py",
	                                    "tests/fixtures/eras/2026-02_post_process.py"};
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		size_t len = 0;
		char *text = tu_read(files[i], &len);
		src = NULL;
		oeap_error err;
		oeap_error_clear(&err);
		assert_int_equal(oeap_pysource_parse(text, len, files[i], &src, &err), 0);
		assert_true(expect_like_reference(src, select, "function", "module") >= 1);
		assert_true(expect_like_reference(src, imports, "import", "module") >= 1);
		assert_true(expect_like_reference(src, chain, "chain", "function_definition") >= 1);
		oeap_pysource_free(src);
		free(text);
	}
}

/*
 * query.c matches the queries of its subset itself (no tree-sitter query
 * compile); the matches must be tree-sitter's. Every query below, each the
 * files below, under every node of a few types (and the module): both
 * engines collect the same nodes, for every capture of the query.
 */
static const char *const SUBSET_QUERIES[] = {
	"patches/sglang-oea/anchors/select_experts.scm",
	"patches/sglang-oea/anchors/routing_chain.scm",
	"patches/sglang-oea/anchors/binds_pair.scm",
	"patches/sglang-oea/anchors/imports.scm",
	"patches/vllm-oea/anchors/select_experts.scm",
	"patches/vllm-oea/anchors/routing.scm",
	"patches/vllm-oea/anchors/binds_pair.scm",
	"patches/vllm-oea/anchors/imports.scm",
	"tests/fixtures/defs/method-oea/anchors/method.scm",
	"tests/fixtures/defs/method-oea/anchors/routing.scm",
	"tests/fixtures/defs/method-oea/anchors/binds_pair.scm",
	"tests/fixtures/defs/method-oea/anchors/imports.scm",
};

/* Inline ones: anchors first, between and last (comments are named nodes
 * and break them), fields, several siblings that fit, captures compared. */
static const char *const SUBSET_INLINE[] = {
	"(pattern_list . (identifier) @first)",
	"(pattern_list (identifier) @last .)",
	"(argument_list . (identifier) @a . (identifier) @b)",
	"(argument_list (identifier) @a . (identifier) @b .)",
	"(argument_list (identifier) @a (identifier) @b)",
	"((argument_list (identifier) @a (identifier) @b) (#eq? @a @b))",
	"((argument_list (identifier) @a (identifier) @b) (#not-eq? @a @b))",
	"((call function: (identifier) @f arguments: (argument_list (identifier) @x)) (#match? @f \"^[a-g]\"))",
	"((call function: (attribute object: (identifier) @o attribute: (identifier) @a) @f) (#not-match? @a \"^_\"))",
	"(block (expression_statement (assignment left: (identifier) @l right: (call) @r) @e) @s)",
	"((block (comment) @c . (if_statement) @i) @in)",
	"(argument_list (identifier) @a . (identifier) @b .)",
	"((block (if_statement) @if .) @in)",
	"((module (function_definition name: (identifier) @name body: (block (return_statement) @ret))) @in)",
	"(if_statement condition: (identifier) @cond consequence: (block) @then alternative: (elif_clause) @elif)",
	"(decorated_definition (decorator) @d definition: (function_definition) @f)",
	"(class_definition body: (block (function_definition name: (identifier) @m)))",
};

static const char DIFF_SOURCE[] =
	"import os, sys\n"
	"from x import (a,  # why\n    b)\n"
	"def f(a, b, c):\n"
	"    # leading comment\n"
	"    if a:\n"
	"        topk_weights, topk_ids = g(a, b)\n"
	"    elif b:\n"
	"        (topk_weights, topk_ids) = g(b, b)\n"
	"    elif c:\n"
	"        topk_weights, topk_ids, extra = g(c, a, b)\n"
	"    else:\n"
	"        topk_weights, topk_ids = (  # a comment inside\n"
	"            h())\n"
	"    x = [a, # c\n b]\n"
	"    return call(a, b, c, a)\n"
	"@dec\n"
	"def f(x):\n"
	"    d = {'a': 1, 'b': x, \"c\": [x]}\n"
	"    if x:\n"
	"        return x\n"
	"    # between\n"
	"    if y:\n"
	"        g(x, # c\n y)\n"
	"        pass\n"
	"class K:\n"
	"    def m(self):\n"
	"        return self._p.q(1, 2)\n"
	"    @property\n"
	"    def n(self):\n"
	"        pass\n"
	"weights, ids = topk_weights, topk_ids\n"
	"t = f(a)(b).c(d, e)\n";

static size_t expect_engines_agree(const oeap_pysource *src, const char *qs, const char *what)
{
	size_t total = 0;
	static const char *const scopes[] = {"module", "function_definition", "class_definition", "block",
	                                     "if_statement", "expression_statement"};
	oeap_query *own = NULL, *ts = NULL;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_query_new_treesitter(qs, strlen(qs), what, &ts, &err), 0);
	assert_int_equal(oeap_query_new(qs, strlen(qs), what, &own, &err), 0);
	if (oeap_query_uses_treesitter(own))
		fail_msg("%s: not read as the subset", what);
	assert_false(oeap_query_uses_treesitter(ts) == 0);
	/* its captures: every "@name" in the text */
	char caps[16][64];
	size_t ncaps = 0;
	for (const char *p = qs; *p && ncaps < 16; p++) {
		if (*p == ';')
			p += strcspn(p, "\n"); /* a comment */
		if (*p != '@')
			continue;
		size_t n = strspn(++p, "abcdefghijklmnopqrstuvwxyz_");
		snprintf(caps[ncaps], sizeof(caps[0]), "%.*s", (int)n, p);
		size_t k = 0;
		while (k < ncaps && strcmp(caps[k], caps[ncaps]) != 0)
			k++;
		if (k == ncaps)
			ncaps++;
	}
	TSTreeCursor c = ts_tree_cursor_new(oeap_pysource_root(src));
	for (int more = 1; more;) {
		TSNode scope = ts_tree_cursor_current_node(&c);
		int take = 0;
		for (size_t i = 0; i < sizeof(scopes) / sizeof(scopes[0]); i++)
			take |= strcmp(ts_node_type(scope), scopes[i]) == 0;
		for (size_t k = 0; take && k < ncaps; k++) {
			TSNode *a = NULL, *b = NULL;
			size_t na = 0, nb = 0;
			if (oeap_query_collect(ts, src, scope, caps[k], &a, &na, &err) ||
			    oeap_query_collect(own, src, scope, caps[k], &b, &nb, &err))
				fail_msg("%s @%s: %s", what, caps[k], err.message);
			if (na != nb)
				fail_msg("%s @%s under the %s at byte %u: tree-sitter collects %zu nodes, query.c %zu", what,
				         caps[k], ts_node_type(scope), ts_node_start_byte(scope), na, nb);
			for (size_t i = 0; i < na; i++)
				if (!ts_node_eq(a[i], b[i]))
					fail_msg("%s @%s under the %s at byte %u: node %zu differs", what, caps[k],
					         ts_node_type(scope), ts_node_start_byte(scope), i);
			free(a);
			free(b);
			total += na;
		}
		if (ts_tree_cursor_goto_first_child(&c))
			continue;
		while (!ts_tree_cursor_goto_next_sibling(&c))
			if (!ts_tree_cursor_goto_parent(&c)) {
				more = 0;
				break;
			}
	}
	ts_tree_cursor_delete(&c);
	oeap_query_free(own);
	oeap_query_free(ts);
	return total;
}

static void test_subset_matches_like_treesitter(void **state)
{
	(void)state;
	static const char *const files[] = {
		"tests/fixtures/variants/large.py", "tests/fixtures/variants/decorated.py",
		"tests/fixtures/variants/comments.py", "tests/fixtures/variants/tabs.py",
		"tests/fixtures/eras/2024-12_positional.py", "tests/fixtures/eras/2025-03_recorder.py",
		"tests/fixtures/eras/2025-05_dispatch_info.py", "tests/fixtures/eras/2025-07_kwonly_topkoutput.py",
		"tests/fixtures/eras/2025-08_topk_config.py", "tests/fixtures/eras/2025-12_layer_id_capturer.py",
		"tests/fixtures/eras/2026-02_post_process.py", "tests/fixtures/vllm-0.6-static.py",
		"tests/fixtures/vllm-0.9-eplb.py", "tests/fixtures/vllm-0.12-instance.py",
		"tests/fixtures/vllm-0.5-fused_moe.py", "tests/fixtures/vllm-0.15-router.py",
		"tests/fixtures/refuse/two_chains.py", "tests/fixtures/refuse/two_select_experts.py",
		"tests/fixtures/refuse/nested_select_experts.py", NULL};
	char *texts[sizeof(files) / sizeof(files[0])];
	oeap_pysource *srcs[sizeof(files) / sizeof(files[0])];
	oeap_error err;
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		size_t len = sizeof(DIFF_SOURCE) - 1;
		texts[i] = files[i] ? tu_read(files[i], &len) : NULL;
		oeap_error_clear(&err);
		srcs[i] = NULL;
		assert_int_equal(oeap_pysource_parse(files[i] ? texts[i] : DIFF_SOURCE, len, "diff.py", &srcs[i], &err), 0);
	}
	for (size_t q = 0; q < sizeof(SUBSET_QUERIES) / sizeof(SUBSET_QUERIES[0]); q++) {
		size_t len = 0;
		char *qs = tu_read(SUBSET_QUERIES[q], &len);
		for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
			expect_engines_agree(srcs[i], qs, SUBSET_QUERIES[q]);
		free(qs);
	}
	for (size_t q = 0; q < sizeof(SUBSET_INLINE) / sizeof(SUBSET_INLINE[0]); q++) {
		size_t found = 0;
		for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
			found += expect_engines_agree(srcs[i], SUBSET_INLINE[q], SUBSET_INLINE[q]);
		if (!found)
			fail_msg("%s finds nothing in any file: it tests nothing", SUBSET_INLINE[q]);
	}
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		oeap_pysource_free(srcs[i]);
		free(texts[i]);
	}
}

/* Outside the subset: tree-sitter compiles and matches them, as before. */
static void test_outside_subset_goes_to_treesitter(void **state)
{
	(void)state;
	static const char *const outside[] = {
		"(_) @any",
		"((identifier) @x (#eq? @x \"a\\\"b\"))",
		"(block (expression_statement) (if_statement) @if)",
		"(argument_list (identifier)* @c)",
		"[(identifier) (integer)] @x",
		"(call (identifier) @a @b)",
		"(function_definition !return_type) @f",
		"(argument_list \"(\" @paren)",
		"(expression) @e",
		"((identifier) @a (identifier) @b)",
		"(argument_list (identifier) @x (identifier) @x)",
	};
	for (size_t i = 0; i < sizeof(outside) / sizeof(outside[0]); i++) {
		oeap_query *q = NULL;
		oeap_error err;
		oeap_error_clear(&err);
		if (oeap_query_new(outside[i], strlen(outside[i]), "outside.scm", &q, &err))
			fail_msg("%s: %s", outside[i], err.message);
		if (!oeap_query_uses_treesitter(q))
			fail_msg("read as the subset: %s", outside[i]);
		oeap_query_free(q);
	}
}

/* A pattern of the subset that the grammar can never produce: read, never
 * matching, and refused by tree-sitter's compiler when asked (anchor.c asks
 * when an anchor finds nothing). */
static void test_subset_structure_checked_on_demand(void **state)
{
	(void)state;
	oeap_query *q = compile("((call (identifier) @f (identifier) @x))");
	assert_false(oeap_query_uses_treesitter(q));
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_query_check_structure(q, &err), -1);
	assert_int_equal(err.kind, OEAP_ERR_DEFINITION);
	assert_string_equal(err.where, "inline.scm");
	assert_non_null(strstr(err.message, "impossible pattern structure"));
	oeap_query_free(q);
	q = compile("((call function: (identifier) @f) @c)");
	oeap_error_clear(&err);
	assert_int_equal(oeap_query_check_structure(q, &err), 0);
	oeap_query_free(q);
}

/*
 * The one predicate rule of both engines (predicate.h): an operand its match
 * did not capture constrains nothing, while a captured operand whose text
 * could not be read (NULL: out of memory) is an error, never "holds" (the
 * tree-sitter engine once took it for "holds", the subset's for an error).
 */
static void test_predicate_null_operand(void **state)
{
	(void)state;
	oeap_error err;
	for (int is_match = 0; is_match <= 1; is_match++)
		for (int negate = 0; negate <= 1; negate++) {
			oeap_error_clear(&err);
			assert_int_equal(oeap_predicate_eval("q.scm", is_match, negate, 0, NULL, 1, "x", &err), 1);
			assert_int_equal(oeap_predicate_eval("q.scm", is_match, negate, 1, "x", 0, NULL, &err), 1);
			assert_int_equal(oeap_predicate_eval("q.scm", is_match, negate, 0, NULL, 0, NULL, &err), 1);
			assert_int_equal(err.kind, OEAP_ERR_NONE);
			assert_int_equal(oeap_predicate_eval("q.scm", is_match, negate, 1, NULL, 1, "x", &err), -1);
			assert_int_equal(err.kind, OEAP_ERR_INTERNAL);
			assert_non_null(strstr(err.message, "out of memory"));
			oeap_error_clear(&err);
			assert_int_equal(oeap_predicate_eval("q.scm", is_match, negate, 1, "x", 1, NULL, &err), -1);
			assert_int_equal(err.kind, OEAP_ERR_INTERNAL);
		}
	/* and the verdicts on texts */
	oeap_error_clear(&err);
	assert_int_equal(oeap_predicate_eval("q.scm", 0, 0, 1, "topk", 1, "topk", &err), 1);
	assert_int_equal(oeap_predicate_eval("q.scm", 0, 1, 1, "topk", 1, "topk", &err), 0);
	assert_int_equal(oeap_predicate_eval("q.scm", 1, 0, 1, "select_experts", 1, "^select_", &err), 1);
	assert_int_equal(oeap_predicate_eval("q.scm", 1, 1, 1, "select_experts", 1, "^select_", &err), 0);
	assert_int_equal(oeap_predicate_eval("q.scm", 1, 0, 1, "x", 1, "(", &err), -1);
	assert_int_equal(err.kind, OEAP_ERR_DEFINITION);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_new_syntax_error),
		cmocka_unit_test(test_new_unknown_node_type),
		cmocka_unit_test(test_new_unknown_field),
		cmocka_unit_test(test_new_unsupported_predicate),
		cmocka_unit_test(test_has_capture),
		cmocka_unit_test(test_collect_unknown_capture),
		cmocka_unit_test(test_eq_string),
		cmocka_unit_test(test_not_eq_string),
		cmocka_unit_test(test_match_string),
		cmocka_unit_test(test_not_match_string),
		cmocka_unit_test(test_eq_capture),
		cmocka_unit_test(test_not_eq_capture),
		cmocka_unit_test(test_match_capture),
		cmocka_unit_test(test_predicates_all_must_hold),
		cmocka_unit_test(test_bad_regex),
		cmocka_unit_test(test_predicate_arity),
		cmocka_unit_test(test_in_module_level),
		cmocka_unit_test(test_in_function),
		cmocka_unit_test(test_in_deep_pattern),
		cmocka_unit_test(test_many_each_its_own),
		cmocka_unit_test(test_many_refuses_what_compiles_only_together),
		cmocka_unit_test(test_source_order_and_dedup),
		cmocka_unit_test(test_in_scope_walk_finds_what_the_full_walk_finds),
		cmocka_unit_test(test_collect_with_bom),
		cmocka_unit_test(test_subset_matches_like_treesitter),
		cmocka_unit_test(test_outside_subset_goes_to_treesitter),
		cmocka_unit_test(test_subset_structure_checked_on_demand),
		cmocka_unit_test(test_predicate_null_operand),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
