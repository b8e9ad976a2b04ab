/*
 * test_anchor.c - resolving the real definition's anchors on every fixture,
 * the refusals (not found / ambiguous), the names bound at the call site,
 * and the indentation unit.
 *
 * Expected lines are computed from the fixture text, not copied from a run.
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "anchor.h"
#include "buf.h"
#include "edit.h"
#include "pipeline.h"
#include "pyparse.h"

typedef struct loaded {
	char *buf;
	size_t len;
	oeap_pysource *src;
} loaded;

static loaded load(const char *rel)
{
	loaded l;
	oeap_error err;
	oeap_error_clear(&err);
	l.buf = tu_read(rel, &l.len);
	l.src = NULL;
	if (oeap_pysource_parse(l.buf, l.len, rel, &l.src, &err))
		fail_msg("%s: %s", rel, err.message);
	return l;
}

static void unload(loaded *l)
{
	oeap_pysource_free(l->src);
	free(l->buf);
}

static long line_at(const char *text, size_t off)
{
	long line = 1;
	for (size_t i = 0; i < off; i++)
		line += text[i] == '\n';
	return line;
}

/* Offset of the first line at or after `from` that starts with `prefix` (SIZE_MAX if none). */
static size_t find_line(const char *text, size_t len, size_t from, const char *prefix)
{
	size_t n = strlen(prefix);
	for (size_t i = from; i < len;) {
		if (len - i >= n && memcmp(text + i, prefix, n) == 0 && (i == 0 || text[i - 1] == '\n'))
			return i;
		const char *nl = memchr(text + i, '\n', len - i);
		if (!nl)
			break;
		i = (size_t)(nl - text) + 1;
	}
	return SIZE_MAX;
}

/* Offset of the last module-level (column 0) import line. */
static size_t last_import_line(const char *text, size_t len)
{
	size_t best = SIZE_MAX;
	for (size_t i = 0; i < len;) {
		if (strncmp(text + i, "import ", 7) == 0 || strncmp(text + i, "from ", 5) == 0)
			best = i;
		const char *nl = memchr(text + i, '\n', len - i);
		if (!nl)
			break;
		i = (size_t)(nl - text) + 1;
	}
	return best;
}

typedef struct expected {
	size_t select_experts, routing_chain, last_import; /* offsets of the lines */
} expected;

static expected expect_for(const loaded *l, const char *indent)
{
	expected e;
	char chain[64];
	size_t base = l->src->bom;
	e.select_experts = find_line(l->buf, l->len, base, "def select_experts(");
	assert_true(e.select_experts != SIZE_MAX);
	snprintf(chain, sizeof(chain), "%sif use_grouped_topk:", indent);
	e.routing_chain = find_line(l->buf, l->len, e.select_experts, chain);
	assert_true(e.routing_chain != SIZE_MAX);
	e.last_import = last_import_line(l->buf, l->len);
	assert_true(e.last_import != SIZE_MAX);
	return e;
}

static void resolve_ok(const oeap_patchdef *def, const loaded *l, oeap_anchors *a)
{
	oeap_error err;
	oeap_error_clear(&err);
	if (oeap_anchors_resolve(def, l->src, a, &err))
		fail_msg("%s: line %ld: %s", err.where, err.line, err.message);
	assert_int_equal(a->n, def->nanchors);
}

static void check_fixture(const oeap_patchdef *def, const char *rel, const char *indent)
{
	loaded l = load(rel);
	expected e = expect_for(&l, indent);
	oeap_anchors a;
	resolve_ok(def, &l, &a);

	const oeap_resolved *se = oeap_anchors_get(&a, "select_experts");
	const oeap_resolved *ch = oeap_anchors_get(&a, "routing_chain");
	const oeap_resolved *li = oeap_anchors_get(&a, "last_import");
	assert_non_null(se);
	assert_non_null(ch);
	assert_non_null(li);
	assert_null(oeap_anchors_get(&a, "nope"));
	assert_ptr_equal(se->def, oeap_patchdef_anchor(def, "select_experts"));

	if (se->start != e.select_experts || ch->start != e.routing_chain + strlen(indent) ||
	    oeap_pysource_line_start(l.src, li->start) != e.last_import)
		fail_msg("%s: select_experts line %ld (want %ld), routing_chain line %ld (want %ld), "
		         "last_import line %ld (want %ld)",
		         rel, se->line, line_at(l.buf, e.select_experts), ch->line, line_at(l.buf, e.routing_chain),
		         li->line, line_at(l.buf, e.last_import));
	assert_int_equal(se->line, line_at(l.buf, e.select_experts));
	assert_int_equal(ch->line, line_at(l.buf, e.routing_chain));
	assert_int_equal(li->line, line_at(l.buf, e.last_import));
	assert_int_equal(li->start, e.last_import);

	assert_string_equal(ts_node_type(se->node), "function_definition");
	assert_string_equal(ts_node_type(ch->node), "if_statement");
	const char *it = ts_node_type(li->node);
	assert_true(strcmp(it, "import_statement") == 0 || strcmp(it, "import_from_statement") == 0);
	assert_int_equal(se->start, oeap_pysource_start(l.src, se->node));
	assert_int_equal(se->end, oeap_pysource_end(l.src, se->node));
	assert_int_equal(ch->end, oeap_pysource_end(l.src, ch->node));
	/* The chain is a direct statement of select_experts' body. */
	TSNode body = ts_node_child_by_field_name(se->node, "body", 4);
	assert_true(ts_node_eq(ts_node_parent(ch->node), body));
	assert_true(ch->start > se->start && ch->end <= se->end);
	unload(&l);
	oeap_anchors_free(&a);
}

static void test_eras(void **state)
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
	oeap_patchdef *def = tu_def();
	for (size_t i = 0; i < sizeof(eras) / sizeof(eras[0]); i++)
		check_fixture(def, eras[i], "    ");
	oeap_patchdef_free(def);
}

static void test_variants(void **state)
{
	(void)state;
	oeap_patchdef *def = tu_def();
	check_fixture(def, "tests/fixtures/variants/crlf.py", "    ");
	check_fixture(def, "tests/fixtures/variants/bom.py", "    ");
	check_fixture(def, "tests/fixtures/variants/comments.py", "    ");
	check_fixture(def, "tests/fixtures/variants/large.py", "    ");
	check_fixture(def, "tests/fixtures/variants/tabs.py", "\t");
	check_fixture(def, "tests/fixtures/variants/decorated.py", "    ");
	oeap_patchdef_free(def);
}

static void test_decorated(void **state)
{
	(void)state;
	oeap_patchdef *def = tu_def();
	loaded l = load("tests/fixtures/variants/decorated.py");
	oeap_anchors a;
	resolve_ok(def, &l, &a);
	const oeap_resolved *se = oeap_anchors_get(&a, "select_experts");
	/* The function inside the decorated_definition, starting at `def`, not at the first decorator. */
	assert_string_equal(ts_node_type(se->node), "function_definition");
	TSNode parent = ts_node_parent(se->node);
	assert_string_equal(ts_node_type(parent), "decorated_definition");
	assert_true(oeap_pysource_start(l.src, parent) < se->start);
	assert_memory_equal(l.buf + oeap_pysource_start(l.src, parent), "@torch.no_grad()\n@_trace_routing\n", 33);
	assert_memory_equal(l.buf + se->start, "def select_experts(", 19);
	unload(&l);
	oeap_anchors_free(&a);
	oeap_patchdef_free(def);
}

static oeap_error resolve_refused(const char *rel, loaded *out)
{
	oeap_patchdef *def = tu_def();
	*out = load(rel);
	oeap_anchors a;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_anchors_resolve(def, out->src, &a, &err), -1);
	assert_int_equal(err.kind, OEAP_ERR_ANCHOR);
	oeap_anchors_free(&a);
	oeap_patchdef_free(def);
	return err;
}

static void test_two_select_experts(void **state)
{
	(void)state;
	loaded l;
	oeap_error err = resolve_refused("tests/fixtures/refuse/two_select_experts.py", &l);
	size_t first = find_line(l.buf, l.len, 0, "def select_experts(");
	size_t second = find_line(l.buf, l.len, first + 1, "def select_experts(");
	assert_true(second != SIZE_MAX);
	char lines[64];
	snprintf(lines, sizeof(lines), "lines %ld and %ld", line_at(l.buf, first), line_at(l.buf, second));
	assert_string_equal(err.where, "anchor 'select_experts'");
	assert_non_null(strstr(err.message, "ambiguous"));
	assert_non_null(strstr(err.message, "2 candidates"));
	assert_non_null(strstr(err.message, lines));
	assert_non_null(strstr(err.message, "the module-level function select_experts"));
	assert_int_equal(err.line, line_at(l.buf, first));
	unload(&l);
}

static void test_nested_select_experts(void **state)
{
	(void)state;
	loaded l;
	oeap_error err = resolve_refused("tests/fixtures/refuse/nested_select_experts.py", &l);
	/* The fixture does have a select_experts: a method, which does not count. */
	assert_non_null(strstr(l.buf, "    def select_experts("));
	assert_string_equal(err.where, "anchor 'select_experts'");
	assert_non_null(strstr(err.message, "not found"));
	assert_non_null(strstr(err.message, "in the module"));
	assert_int_equal(err.line, 0);
	unload(&l);
}

static void test_no_routing_chain(void **state)
{
	(void)state;
	loaded l;
	oeap_error err = resolve_refused("tests/fixtures/refuse/no_routing_chain.py", &l);
	assert_string_equal(err.where, "anchor 'routing_chain'");
	assert_non_null(strstr(err.message, "not found"));
	/* Named by what it is and where it was looked for. */
	assert_non_null(strstr(err.message, "binds topk_weights, topk_ids"));
	assert_non_null(strstr(err.message, "in the module-level function select_experts"));
	unload(&l);
}

static void test_two_chains(void **state)
{
	(void)state;
	loaded l;
	oeap_error err = resolve_refused("tests/fixtures/refuse/two_chains.py", &l);
	size_t se = find_line(l.buf, l.len, 0, "def select_experts(");
	size_t c1 = find_line(l.buf, l.len, se, "    if ");
	size_t c2 = find_line(l.buf, l.len, c1 + 1, "    if ");
	assert_true(c2 != SIZE_MAX);
	char lines[64];
	snprintf(lines, sizeof(lines), "lines %ld and %ld", line_at(l.buf, c1), line_at(l.buf, c2));
	assert_string_equal(err.where, "anchor 'routing_chain'");
	assert_non_null(strstr(err.message, "ambiguous"));
	assert_non_null(strstr(err.message, lines));
	assert_int_equal(err.line, line_at(l.buf, c1));
	unload(&l);
}

/* Per era: the names the README's table says are bound at the call site
 * (parameters and locals before the chain), plus the pair the chain binds. */
static const struct {
	const char *file;
	const char *names;
	const char *absent; /* assigned in the function, but after the chain */
} ERA_NAMES[] = {
	{"tests/fixtures/eras/2024-12_positional.py",
	 "hidden_states router_logits top_k use_grouped_topk renormalize topk_group num_expert_group "
	 "custom_routing_function correction_bias torch_native",
	 ""},
	{"tests/fixtures/eras/2025-03_recorder.py",
	 "hidden_states router_logits top_k use_grouped_topk renormalize topk_group num_expert_group "
	 "custom_routing_function correction_bias torch_native routed_scaling_factor num_token_non_padded "
	 "n_share_experts_fusion",
	 ""},
	{"tests/fixtures/eras/2025-05_dispatch_info.py",
	 "hidden_states router_logits top_k use_grouped_topk renormalize topk_group num_expert_group "
	 "num_fused_shared_experts custom_routing_function correction_bias torch_native routed_scaling_factor "
	 "num_token_non_padded expert_location_dispatch_info",
	 ""},
	{"tests/fixtures/eras/2025-07_kwonly_topkoutput.py",
	 "hidden_states router_logits top_k use_grouped_topk renormalize topk_group num_expert_group "
	 "num_fused_shared_experts custom_routing_function correction_bias torch_native routed_scaling_factor "
	 "num_token_non_padded expert_location_dispatch_info",
	 ""},
	{"tests/fixtures/eras/2025-08_topk_config.py",
	 "hidden_states router_logits topk_config num_token_non_padded expert_location_dispatch_info "
	 "top_k use_grouped_topk topk_group num_expert_group renormalize num_fused_shared_experts "
	 "custom_routing_function correction_bias torch_native routed_scaling_factor "
	 "apply_routed_scaling_factor_on_output fused_shared_experts_scaling_factor num_routed_topk",
	 ""},
	{"tests/fixtures/eras/2025-12_layer_id_capturer.py",
	 "hidden_states router_logits topk_config layer_id num_token_non_padded expert_location_dispatch_info "
	 "top_k use_grouped_topk topk_group num_expert_group renormalize num_fused_shared_experts "
	 "custom_routing_function correction_bias torch_native routed_scaling_factor "
	 "apply_routed_scaling_factor_on_output fused_shared_experts_scaling_factor scoring_func num_routed_topk",
	 "cap"},
	{"tests/fixtures/eras/2026-02_post_process.py",
	 "hidden_states router_logits topk_config layer_id num_token_non_padded expert_location_dispatch_info "
	 "top_k use_grouped_topk topk_group num_expert_group renormalize num_fused_shared_experts "
	 "custom_routing_function correction_bias torch_native routed_scaling_factor "
	 "apply_routed_scaling_factor_on_output scoring_func num_routed_topk",
	 "num_tokens num_experts start step fused_shared_experts_scaling_factor"},
};

static int has(const oeap_names *names, const char *n)
{
	return oeap_names_has(names, n, strlen(n));
}

static void test_scope_names_eras(void **state)
{
	(void)state;
	oeap_patchdef *def = tu_def();
	for (size_t i = 0; i < sizeof(ERA_NAMES) / sizeof(ERA_NAMES[0]); i++) {
		loaded l = load(ERA_NAMES[i].file);
		oeap_anchors a;
		resolve_ok(def, &l, &a);
		const oeap_resolved *se = oeap_anchors_get(&a, "select_experts");
		const oeap_resolved *ch = oeap_anchors_get(&a, "routing_chain");
		/* Where the call site goes: the start of the line after the chain. */
		size_t after = oeap_pysource_next_line(l.src, ch->end);
		oeap_names names;
		assert_int_equal(oeap_scope_names(l.src, se->node, after, &names), 0);
		char *want = strdup(ERA_NAMES[i].names);
		assert_non_null(want);
		size_t nwant = 0;
		for (char *save = NULL, *w = strtok_r(want, " ", &save); w; w = strtok_r(NULL, " ", &save), nwant++)
			if (!has(&names, w))
				fail_msg("%s: '%s' is not among the names bound after the chain", ERA_NAMES[i].file, w);
		free(want);
		assert_true(has(&names, "topk_weights"));
		assert_true(has(&names, "topk_ids"));
		if (names.n != nwant + 2) {
			for (size_t k = 0; k < names.n; k++)
				print_message("  %s\n", names.items[k]);
			fail_msg("%s: %zu names, expected %zu", ERA_NAMES[i].file, names.n, nwant + 2);
		}
		char *absent = strdup(ERA_NAMES[i].absent);
		assert_non_null(absent);
		for (char *save = NULL, *w = strtok_r(absent, " ", &save); w; w = strtok_r(NULL, " ", &save))
			if (has(&names, w))
				fail_msg("%s: '%s' is bound only after the chain", ERA_NAMES[i].file, w);
		free(absent);
		/* Module-level names are not the function's. */
		assert_false(has(&names, "torch"));
		assert_false(has(&names, "select_experts"));
		oeap_names_free(&names);

		/* At the start of the chain the pair is not bound yet. */
		assert_int_equal(oeap_scope_names(l.src, se->node, ch->start, &names), 0);
		assert_false(has(&names, "topk_weights"));
		assert_false(has(&names, "topk_ids"));
		assert_int_equal(names.n, nwant);
		oeap_names_free(&names);

		/* Every required call-site argument is bound after the chain. */
		const oeap_region_def *cs = oeap_patchdef_region(def, "callsite");
		assert_int_equal(oeap_scope_names(l.src, se->node, after, &names), 0);
		for (size_t k = 0; k < cs->nargs; k++)
			if (cs->args[k].required)
				assert_true(has(&names, cs->args[k].exprs[0]));
		oeap_names_free(&names);
		oeap_anchors_free(&a);
		unload(&l);
	}
	oeap_patchdef_free(def);
}

static void test_scope_names_nested(void **state)
{
	(void)state;
	static const char text[] = "top = 0\n"
	                           "def select_experts(a, /, b, *args, c: int = 1, d=2, e: str = 'x', **kw):\n"
	                           "    x = 1\n"
	                           "    def helper():\n"
	                           "        inner = 2\n"
	                           "        return inner\n"
	                           "    class K:\n"
	                           "        attr = 3\n"
	                           "    f = lambda q: q\n"
	                           "    y: int = 5\n"
	                           "    z += 1\n"
	                           "    o.attr = 1\n"
	                           "    s[0] = 1\n"
	                           "    if a:\n"
	                           "        topk_weights, topk_ids = g()\n"
	                           "    else:\n"
	                           "        [w1, *rest] = h()\n"
	                           "        (topk_weights, topk_ids) = h()\n"
	                           "    late = 4\n"
	                           "    return late\n";
	oeap_pysource *src = NULL;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_pysource_parse(text, sizeof(text) - 1, "nested.py", &src, &err), 0);
	TSNode fn = ts_node_named_child(oeap_pysource_root(src), 1);
	assert_string_equal(ts_node_type(fn), "function_definition");
	const char *late = strstr(text, "    late = 4");
	oeap_names names;
	assert_int_equal(oeap_scope_names(src, fn, (size_t)(late - text), &names), 0);
	static const char *present[] = {"a", "b", "args", "c", "d", "e", "kw", "x", "f", "y", "z",
	                                "topk_weights", "topk_ids"};
	/* w1 and rest are bound on the else path only */
	static const char *absent[] = {"inner", "attr", "q", "late", "top", "o", "s", "g", "h", "int", "str",
	                               "w1", "rest"};
	for (size_t i = 0; i < sizeof(present) / sizeof(present[0]); i++)
		if (!has(&names, present[i]))
			fail_msg("'%s' missing", present[i]);
	for (size_t i = 0; i < sizeof(absent) / sizeof(absent[0]); i++)
		if (has(&names, absent[i]))
			fail_msg("'%s' must not be bound (nested scope, attribute, or later)", absent[i]);
	/* Each name once: topk_weights is assigned in two branches. */
	size_t count = 0;
	for (size_t i = 0; i < names.n; i++)
		count += strcmp(names.items[i], "topk_weights") == 0;
	assert_int_equal(count, 1);
	/* Exact prefix matches only. */
	assert_false(oeap_names_has(&names, "topk", 4));
	assert_true(oeap_names_has(&names, "topk_ids_extra", 8));
	oeap_names_free(&names);
	assert_null(names.items);
	assert_int_equal(names.n, 0);
	oeap_pysource_free(src);
}

/*
 * The names bound where "    # here" stands in `select_experts(a, b, g, E)`
 * whose body is `body`: each word of `present` must be among them, none of
 * `absent`; `dead` is what oeap_scope_names() must say about reaching it.
 */
static void names_case(const char *what, const char *body, const char *present, const char *absent, int dead)
{
	static const char head[] = "def select_experts(a, b, g, E):\n";
	static const char tail[] = "    # here\n    return a\n";
	size_t len = strlen(head) + strlen(body) + strlen(tail);
	char *text = malloc(len + 1);
	assert_non_null(text);
	snprintf(text, len + 1, "%s%s%s", head, body, tail);
	oeap_pysource *src = NULL;
	oeap_error err;
	oeap_error_clear(&err);
	if (oeap_pysource_parse(text, len, "case.py", &src, &err))
		fail_msg("%s: does not parse: line %ld: %s", what, err.line, err.message);
	TSNode fn = ts_node_named_child(oeap_pysource_root(src), 0);
	assert_string_equal(ts_node_type(fn), "function_definition");
	oeap_names names;
	assert_int_equal(oeap_scope_names(src, fn, (size_t)(strstr(text, "    # here") - text), &names), 0);
	char *words = strdup(present);
	assert_non_null(words);
	for (char *save = NULL, *w = strtok_r(words, " ", &save); w; w = strtok_r(NULL, " ", &save))
		if (!has(&names, w))
			fail_msg("%s: '%s' is bound on every path, but not among the names", what, w);
	free(words);
	words = strdup(absent);
	assert_non_null(words);
	for (char *save = NULL, *w = strtok_r(words, " ", &save); w; w = strtok_r(NULL, " ", &save))
		if (has(&names, w))
			fail_msg("%s: '%s' may be unbound there (UnboundLocalError), but is among the names", what, w);
	free(words);
	if (names.dead != dead)
		fail_msg("%s: dead is %d, expected %d", what, names.dead, dead);
	oeap_names_free(&names);
	oeap_pysource_free(src);
	free(text);
}

/* `del` in the straight line of the body, not inside a branch. */
static void test_scope_names_del(void **state)
{
	(void)state;
	names_case("del", "    x = 1\n    y = 2\n    del x\n", "y a b", "x", 0);
	names_case("del of a parameter", "    del a\n", "b g", "a", 0);
	names_case("del of several", "    x = y = z = 1\n    del x, y\n", "z", "x y", 0);
	names_case("del in brackets", "    x = y = z = 1\n    del (x), [y]\n    del (a, b)\n", "z g", "x y a b", 0);
	names_case("bound again after del", "    x = 1\n    del x\n    x = 2\n", "x", "", 0);
	names_case("del of an attribute or item", "    del a.b, b[0]\n", "a b", "", 0);
	names_case("del in one branch", "    x = 1\n    if a:\n        del x\n", "a", "x", 0);
	names_case("del in a branch that returns", "    x = 1\n    if a:\n        del x\n        return 0\n", "x", "", 0);
}

/* Handlers are paths: the body may stop at any statement before a handler
 * runs, `except E as NAME` deletes NAME when the handler ends, `else` runs
 * only after the body, `finally` on every way out. */
static void test_scope_names_try(void **state)
{
	(void)state;
	names_case("body only", "    try:\n        t = g()\n    except E:\n        pass\n", "a", "t", 0);
	names_case("body and handler",
	           "    try:\n        t = g()\n        u = 1\n    except E:\n        t = 0\n        h = 1\n", "t", "u h", 0);
	names_case("every handler", "    try:\n        t = g()\n    except E:\n        t = 0\n    except:\n        pass\n",
	           "", "t", 0);
	names_case("handler that raises", "    try:\n        t = g()\n    except E:\n        raise\n", "t", "", 0);
	names_case("handler that returns", "    try:\n        t = g()\n    except E:\n        return None\n", "t", "", 0);
	names_case("body that returns", "    try:\n        return g()\n    except E:\n        t = 0\n", "t", "", 0);
	names_case("every path returns or raises", "    try:\n        return g()\n    except E:\n        raise\n", "", "", 1);
	names_case("else", "    try:\n        g()\n    except E:\n        t = 0\n    else:\n        t = 1\n        u = 1\n",
	           "t", "u", 0);
	names_case("del in else", "    x = 1\n    try:\n        g()\n    except E:\n        pass\n    else:\n        del x\n", "",
	           "x", 0);
	names_case("finally", "    try:\n        t = g()\n    finally:\n        f = 1\n", "t f", "", 0);
	names_case("del in finally", "    x = 1\n    try:\n        t = g()\n    except E:\n        t = 0\n    finally:\n        del x\n",
	           "t", "x", 0);
	names_case("del in a handler", "    x = 1\n    try:\n        g()\n    except E:\n        del x\n", "", "x", 0);
	names_case("del in a handler that raises", "    x = 1\n    try:\n        g()\n    except E:\n        del x\n        raise\n",
	           "x", "", 0);

	/* The body may have unbound a name by the time a handler runs, even
	 * when it binds the name again later. */
	names_case("body deletes then binds again",
	           "    x = 1\n    try:\n        del x\n        x = g()\n    except E:\n        pass\n", "", "x", 0);
	names_case("body deletes, handler binds again",
	           "    x = 1\n    try:\n        del x\n        x = g()\n    except E:\n        x = 0\n", "x", "", 0);
	names_case("body deletes in a branch that raises",
	           "    x = 1\n    try:\n        if a:\n            del x\n            raise ValueError\n    except ValueError:\n"
	           "        pass\n",
	           "", "x", 0);

	/* `except E as NAME` unbinds NAME after the handler. */
	names_case("as name bound before",
	           "    x = 1\n    try:\n        t = g()\n    except E as x:\n        t = 0\n", "t", "x", 0);
	names_case("as name bound in the body and the handler",
	           "    try:\n        x = g()\n    except E as x:\n        x = 0\n", "", "x", 0);
	names_case("as name is a parameter", "    try:\n        g()\n    except E as b:\n        pass\n", "a", "b", 0);
	names_case("as name, handler raises", "    x = 1\n    try:\n        g()\n    except E as x:\n        raise\n", "x", "", 0);
	names_case("as name of except*", "    x = 1\n    try:\n        g()\n    except* E as x:\n        pass\n", "", "x", 0);
	names_case("as name of a handler that does not run here",
	           "    x = 1\n    try:\n        g()\n    except E as e:\n        pass\n", "x", "e", 0);

	/* Nested: the outer handler may run after the inner one deleted its name. */
	names_case("nested try",
	           "    x = 1\n    try:\n        try:\n            g()\n        except E as x:\n            pass\n        x = g()\n"
	           "    except ValueError:\n        pass\n",
	           "", "x", 0);
	names_case("nested try, outer handler binds",
	           "    x = 1\n    try:\n        try:\n            g()\n        except E as x:\n            pass\n        x = g()\n"
	           "    except ValueError:\n        x = 3\n",
	           "x", "", 0);
}

/* Statements whose paths are not followed bind nothing for sure, and what
 * they may delete is unbound after them. */
static void test_scope_names_unfollowed(void **state)
{
	(void)state;
	names_case("del in a loop", "    x = 1\n    for i in g():\n        del x\n", "", "x i", 0);
	names_case("del in a while's else", "    x = 1\n    while a:\n        pass\n    else:\n        del x\n", "", "x", 0);
	names_case("del in with", "    x = 1\n    with g() as w:\n        del x\n", "", "x w", 0);
	names_case("handler in a loop",
	           "    x = 1\n    for i in g():\n        try:\n            pass\n        except E as x:\n            pass\n", "", "x",
	           0);
	names_case("del in match", "    x = 1\n    match a:\n        case 1:\n            del x\n        case _:\n            pass\n",
	           "", "x", 0);
	names_case("del in a nested function is its own", "    x = 1\n    def h():\n        x = 2\n        del x\n", "x h", "", 0);
	names_case("loop that deletes nothing", "    x = 1\n    for i in g():\n        y = i\n", "x", "y i", 0);

	/* A chain longer than the analysis follows counts nothing, and unbinds what it deletes. */
	oeap_buf body = OEAP_BUF_INIT;
	assert_int_equal(oeap_buf_printf(&body, "    x = 1\n    if a == 0:\n        del x\n"), 0);
	for (int i = 1; i < 80; i++)
		assert_int_equal(oeap_buf_printf(&body, "    elif a == %d:\n        y = 1\n", i), 0);
	assert_int_equal(oeap_buf_printf(&body, "    else:\n        y = 1\n"), 0);
	names_case("long chain", body.data, "a", "x y", 0);
	oeap_buf_free(&body);
}

static void check_unit(const char *rel, const char *want)
{
	loaded l = load(rel);
	char unit[16];
	memset(unit, 'z', sizeof(unit));
	assert_int_equal(oeap_indent_unit(l.src, unit, sizeof(unit)), 0);
	if (strcmp(unit, want) != 0)
		fail_msg("%s: unit '%s' (%zu chars), expected %zu chars", rel, unit, strlen(unit), strlen(want));
	unload(&l);
}

static void test_indent_unit(void **state)
{
	(void)state;
	check_unit("tests/fixtures/eras/2024-12_positional.py", "    ");
	check_unit("tests/fixtures/eras/2025-03_recorder.py", "    ");
	check_unit("tests/fixtures/eras/2025-05_dispatch_info.py", "    ");
	check_unit("tests/fixtures/eras/2025-07_kwonly_topkoutput.py", "    ");
	check_unit("tests/fixtures/eras/2025-08_topk_config.py", "    ");
	check_unit("tests/fixtures/eras/2025-12_layer_id_capturer.py", "    ");
	check_unit("tests/fixtures/eras/2026-02_post_process.py", "    ");
	check_unit("tests/fixtures/variants/crlf.py", "    ");
	check_unit("tests/fixtures/variants/bom.py", "    ");
	check_unit("tests/fixtures/variants/tabs.py", "\t");
}

static void test_indent_unit_inline(void **state)
{
	(void)state;
	/* A one-line block (`if x: pass`) says nothing; the first real block decides. */
	static const char two[] = "if x: pass\ndef f():\n  return 1\n";
	oeap_pysource *src = NULL;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_pysource_parse(two, sizeof(two) - 1, "two.py", &src, &err), 0);
	char unit[16];
	assert_int_equal(oeap_indent_unit(src, unit, sizeof(unit)), 0);
	assert_string_equal(unit, "  ");
	oeap_pysource_free(src);
	/* Nested blocks: what a block adds to its owner's indentation. */
	static const char nested[] = "class A:\n        def f(self):\n            return 1\n";
	assert_int_equal(oeap_pysource_parse(nested, sizeof(nested) - 1, "nested.py", &src, &err), 0);
	assert_int_equal(oeap_indent_unit(src, unit, sizeof(unit)), 0);
	assert_string_equal(unit, "        ");
	oeap_pysource_free(src);
}

/* ---- methods of a class (tests/fixtures/defs/method-oea) ------------------- */

static oeap_patchdef *method_def(void)
{
	char dir[4096];
	oeap_patchdef *def = NULL;
	oeap_error err;
	oeap_error_clear(&err);
	snprintf(dir, sizeof(dir), "%s/tests/fixtures/defs/method-oea", tu_source_dir());
	if (oeap_patchdef_load(dir, &def, &err))
		fail_msg("%s: %s: %s", dir, err.where, err.message);
	return def;
}

/* Applies the method definition to `text`; returns the result (caller frees) or fails. */
static char *method_apply(const oeap_patchdef *def, const char *text)
{
	oeap_outcome o;
	oeap_error err;
	memset(&o, 0, sizeof(o));
	oeap_error_clear(&err);
	if (oeap_apply_bytes(def, text, strlen(text), "router.py", &o, &err))
		fail_msg("apply: %s: %s\n%s", err.where, err.message, text);
	char *out = strndup(o.out, o.out_len);
	oeap_outcome_free(&o);
	return out;
}

/* The line of `out` after the one that starts with `line` (trimmed of its indentation). */
static const char *line_after(const char *out, const char *line)
{
	const char *p = strstr(out, line);
	assert_non_null(p);
	p = strchr(p, '\n');
	assert_non_null(p);
	p++;
	while (*p == ' ')
		p++;
	return p;
}

/* A @staticmethod of the class, the era whose settings are parameters: the
 * chain is found in it, not in the module-level function or another class's
 * method of the same name, and the parameter is passed. */
static void test_method_static(void **state)
{
	(void)state;
	static const char text[] =
		"import torch\n"
		"\n"
		"\n"
		"def select_experts(router_logits, top_k):\n"
		"    topk_weights, topk_ids = torch.topk(router_logits, top_k)\n"
		"    return topk_weights, topk_ids\n"
		"\n"
		"\n"
		"class Other:\n"
		"    def select_experts(self, router_logits):\n"
		"        topk_weights, topk_ids = torch.topk(router_logits, 2)\n"
		"        return topk_weights, topk_ids\n"
		"\n"
		"\n"
		"class Router:\n"
		"    @staticmethod\n"
		"    def select_experts(hidden_states, router_logits, top_k, use_grouped_topk, renormalize):\n"
		"        scores = router_logits.softmax(-1)\n"
		"        if use_grouped_topk:\n"
		"            topk_weights, topk_ids = grouped(scores, top_k)\n"
		"        else:\n"
		"            topk_weights, topk_ids = torch.topk(scores, top_k)\n"
		"        topk_ids = topk_ids.to(torch.int32)\n"
		"        return topk_weights, topk_ids\n";
	oeap_patchdef *def = method_def();
	char *out = method_apply(def, text);
	assert_non_null(strstr(out, "top_k=top_k"));
	assert_non_null(strstr(out, "renormalize=renormalize"));
	assert_null(strstr(out, "self.top_k"));
	/* After the chain, before the dtype conversion; the other two functions untouched. */
	const char *after = strstr(out, "topk_weights, topk_ids = torch.topk(scores, top_k)\n");
	assert_non_null(after);
	assert_true(strstr(after, "if _oeapatch_oea.ENABLED:") < strstr(after, "topk_ids = topk_ids.to(torch.int32)"));
	assert_int_equal(strncmp(line_after(out, "    topk_weights, topk_ids = torch.topk(router_logits, top_k)\n"),
	                         "return", 6), 0);
	assert_int_equal(strncmp(line_after(out, "topk_weights, topk_ids = torch.topk(router_logits, 2)\n"), "return", 6),
	                 0);
	free(out);
	oeap_patchdef_free(def);
}

/* An instance method, the era whose settings are attributes: `self` is a
 * parameter, so `self.top_k` counts as bound; `top_k` is not, and is not
 * passed; a local bound before the statement is. */
static void test_method_instance(void **state)
{
	(void)state;
	static const char text[] =
		"import torch\n"
		"\n"
		"\n"
		"class Router:\n"
		"    def __init__(self, top_k, renormalize):\n"
		"        self.top_k = top_k\n"
		"        self.renormalize = renormalize\n"
		"\n"
		"    def _select_experts(self, hidden_states, router_logits):\n"
		"        renormalize = self.renormalize and hidden_states.shape[0] > 1\n"
		"        topk_weights, topk_ids = self._compute_routing(hidden_states, router_logits)\n"
		"        self.capture(topk_ids)\n"
		"        topk_ids = self.to_physical(topk_ids)\n"
		"        return topk_weights, topk_ids\n";
	oeap_patchdef *def = method_def();
	char *out = method_apply(def, text);
	assert_non_null(strstr(out, "top_k=self.top_k"));
	assert_null(strstr(out, "top_k=top_k"));
	assert_non_null(strstr(out, "renormalize=renormalize"));
	assert_non_null(strstr(out, "router_logits=router_logits"));
	/* Right after the statement that binds the pair, before the capture and the mapping. */
	static const char marker[] = "# >>> oeapatch method-oea/1 callsite";
	assert_int_equal(strncmp(line_after(out, "topk_weights, topk_ids = self._compute_routing("), marker,
	                         sizeof(marker) - 1),
	                 0);
	assert_true(strstr(out, "top_k=self.top_k") < strstr(out, "self.capture(topk_ids)"));
	free(out);
	oeap_patchdef_free(def);
}

/* Nothing matches: the error names the anchor and ends with the definition's `unmatched` words. */
static void test_unmatched_hint(void **state)
{
	(void)state;
	static const char text[] =
		"import torch\n"
		"\n"
		"\n"
		"def fused(router_logits, top_k):\n"
		"    topk_weights, topk_ids = torch.topk(router_logits, top_k)\n"
		"    return topk_weights, topk_ids\n";
	oeap_patchdef *def = method_def();
	oeap_outcome o;
	oeap_error err;
	memset(&o, 0, sizeof(o));
	oeap_error_clear(&err);
	assert_int_not_equal(oeap_apply_bytes(def, text, strlen(text), "router.py", &o, &err), 0);
	assert_int_equal(err.kind, OEAP_ERR_ANCHOR);
	assert_string_equal(err.where, "anchor 'method'");
	static const char tail[] = ": demo 0.1 routes inside fused(); the first release this definition supports is 0.2";
	size_t n = strlen(err.message);
	if (n < sizeof(tail) - 1 || strcmp(err.message + n - (sizeof(tail) - 1), tail))
		fail_msg("the message does not end with the hint: %s", err.message);
	assert_non_null(strstr(err.message, "not found: the method select_experts (or _select_experts) of class Router"));
	/* An anchor without `unmatched` says what it said before. */
	oeap_error_clear(&err);
	static const char no_chain[] =
		"import torch\n"
		"\n"
		"\n"
		"class Router:\n"
		"    def select_experts(self, router_logits):\n"
		"        return torch.topk(router_logits, 2)\n";
	assert_int_not_equal(oeap_apply_bytes(def, no_chain, strlen(no_chain), "router.py", &o, &err), 0);
	assert_string_equal(err.where, "anchor 'routing'");
	assert_null(strstr(err.message, "demo 0.1"));
	oeap_patchdef_free(def);
}

/*
 * A pattern the grammar can never produce (a block holds statements, never a
 * bare identifier) is in the subset query.c matches itself, so loading no
 * longer compiles it with tree-sitter; when it then finds nothing the
 * definition is refused as tree-sitter's compiler refused it at load, not the
 * file reported as lacking the anchor.
 */
static void test_impossible_pattern_names_the_definition(void **state)
{
	(void)state;
	char *dir = tu_tmpdir();
	tu_copy_definition(dir);
	char path[4096];
	static const char chain[] = "((function_definition body: (block (identifier) @chain)) @in)\n";
	snprintf(path, sizeof(path), "%s/anchors/routing_chain.scm", dir);
	tu_write(path, chain, sizeof(chain) - 1);
	oeap_patchdef *def = NULL;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_patchdef_load(dir, &def, &err), 0);
	loaded l = load("tests/fixtures/eras/2025-08_topk_config.py");
	oeap_anchors a;
	assert_int_equal(oeap_anchors_resolve(def, l.src, &a, &err), -1);
	assert_int_equal(err.kind, OEAP_ERR_DEFINITION);
	assert_non_null(strstr(err.where, "anchors/routing_chain.scm"));
	assert_non_null(strstr(err.message, "does not compile"));
	assert_non_null(strstr(err.message, "impossible pattern structure"));
	oeap_anchors_free(&a);
	unload(&l);
	oeap_patchdef_free(def);
	tu_rmtree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_eras),
		cmocka_unit_test(test_variants),
		cmocka_unit_test(test_decorated),
		cmocka_unit_test(test_two_select_experts),
		cmocka_unit_test(test_nested_select_experts),
		cmocka_unit_test(test_no_routing_chain),
		cmocka_unit_test(test_two_chains),
		cmocka_unit_test(test_impossible_pattern_names_the_definition),
		cmocka_unit_test(test_scope_names_eras),
		cmocka_unit_test(test_scope_names_nested),
		cmocka_unit_test(test_scope_names_del),
		cmocka_unit_test(test_scope_names_try),
		cmocka_unit_test(test_scope_names_unfollowed),
		cmocka_unit_test(test_indent_unit),
		cmocka_unit_test(test_indent_unit_inline),
		cmocka_unit_test(test_method_static),
		cmocka_unit_test(test_method_instance),
		cmocka_unit_test(test_unmatched_hint),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
