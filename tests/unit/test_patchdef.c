/*
 * test_patchdef.c - loading the real definition, and refusing broken copies
 * of it (each copy differs from the real one in one thing).
 */
#include "testutil.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsio.h"
#include "patchdef.h"

static const char *DEF_FILES[] = {
	"patch.ini",
	"adapter.py",
	"anchors/select_experts.scm",
	"anchors/routing_chain.scm",
	"anchors/binds_pair.scm",
	"anchors/imports.scm",
	"templates/callsite.py",
	"templates/import.py",
};

typedef struct fixture {
	char *root; /* holds the copy (sglang-oea/) and the shared core (binding-core/) */
	char *dir;
} fixture;

static int setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	f->root = tu_tmpdir();
	f->dir = malloc(strlen(f->root) + 16);
	if (!f->dir)
		return -1;
	sprintf(f->dir, "%s/sglang-oea", f->root);
	tu_copy_core(f->dir);
	for (size_t i = 0; i < sizeof(DEF_FILES) / sizeof(DEF_FILES[0]); i++) {
		char rel[PATH_MAX], dst[PATH_MAX + 64];
		size_t len;
		snprintf(rel, sizeof(rel), "patches/sglang-oea/%s", DEF_FILES[i]);
		char *data = tu_read(rel, &len);
		snprintf(dst, sizeof(dst), "%s/%s", f->dir, DEF_FILES[i]);
		tu_write(dst, data, len);
		free(data);
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fixture *f = *state;
	tu_rmtree(f->root);
	free(f->root);
	free(f->dir);
	free(f);
	return 0;
}

static char *read_abs(const char *path, size_t *len)
{
	char *data = NULL;
	oeap_error err;
	oeap_error_clear(&err);
	if (oeap_read_file(path, &data, len, &err))
		fail_msg("%s: %s", path, err.message);
	return data;
}

static void put(const fixture *f, const char *rel, const char *text)
{
	char path[PATH_MAX + 64];
	snprintf(path, sizeof(path), "%s/%s", f->dir, rel);
	tu_write(path, text, strlen(text));
}

/* Replaces the first `old` in the copy's patch.ini; returns the 1-based line of the change. */
static long edit_ini(const fixture *f, const char *old, const char *new_text)
{
	char path[PATH_MAX + 64];
	size_t len;
	snprintf(path, sizeof(path), "%s/patch.ini", f->dir);
	char *text = read_abs(path, &len);
	char *at = strstr(text, old);
	if (!at)
		fail_msg("'%s' is not in patch.ini", old);
	long line = 1;
	for (const char *p = text; p < at; p++)
		line += *p == '\n';
	size_t head = (size_t)(at - text), ol = strlen(old), nl = strlen(new_text);
	char *out = malloc(len - ol + nl + 1);
	assert_non_null(out);
	memcpy(out, text, head);
	memcpy(out + head, new_text, nl);
	memcpy(out + head + nl, at + ol, len - head - ol);
	tu_write(path, out, len - ol + nl);
	free(out);
	free(text);
	return line;
}

/* Loads the copy, which must be refused; returns the error. */
static oeap_error load_refused(const fixture *f)
{
	oeap_patchdef *def = (oeap_patchdef *)1;
	oeap_error err;
	oeap_error_clear(&err);
	int rc = oeap_patchdef_load(f->dir, &def, &err);
	if (rc == 0) {
		oeap_patchdef_free(def);
		fail_msg("the broken definition was accepted");
	}
	assert_null(def);
	return err;
}

static void expect_definition_error(const oeap_error *err, const char *in_where, const char *in_message,
                                    long line)
{
	if (err->kind != OEAP_ERR_DEFINITION)
		fail_msg("error kind %d, expected OEAP_ERR_DEFINITION (%d): %s: %s", (int)err->kind,
		         (int)OEAP_ERR_DEFINITION, err->where, err->message);
	if (in_where && !strstr(err->where, in_where))
		fail_msg("where '%s' does not name '%s'", err->where, in_where);
	if (in_message && !strstr(err->message, in_message))
		fail_msg("message '%s' does not say '%s'", err->message, in_message);
	if (line >= 0)
		assert_int_equal(err->line, line);
}

/* The section [name] of a manifest text: from its header to the next one. */
static const char *section_of(const char *text, const char *name, const char **end)
{
	char hdr[128];
	snprintf(hdr, sizeof(hdr), "\n[%s]\n", name);
	const char *s = strstr(text, hdr);
	assert_non_null(s);
	s += strlen(hdr);
	const char *e = strstr(s, "\n[");
	*end = e ? e : s + strlen(s);
	return s;
}

static void test_real_definition(void **state)
{
	(void)state;
	oeap_patchdef *def = tu_def();
	assert_string_equal(def->name, "sglang-oea");
	assert_int_equal(def->version, 2);
	assert_string_equal(def->target, "python/sglang/srt/layers/moe/topk.py");
	assert_int_equal(def->abi, 3);
	assert_string_equal(def->first_revision, "2024-12-24");
	assert_string_equal(def->binding_module, "_oeapatch_sglang_oea");
	assert_string_equal(def->library_env, "SGLANG_OEA_LIBRARY");
	assert_non_null(def->summary);
	assert_string_equal(def->framework, "SGLang");
	/* [binding] source: the shared core, then SGLang's adapter, as they are */
	size_t clen, alen;
	char *core = tu_read_core(&clen);
	char *adapter = tu_read("patches/sglang-oea/adapter.py", &alen);
	assert_int_equal(strlen(def->binding_text), clen + alen);
	assert_memory_equal(def->binding_text, core, clen);
	assert_string_equal(def->binding_text + clen, adapter);
	free(core);
	free(adapter);

	assert_int_equal(def->nanchors, 3);
	static const struct {
		const char *name, *capture, *in, *query;
		int pick_last, has_contains;
	} anchors[] = {
		{"select_experts", "function", OEAP_IN_MODULE, "anchors/select_experts.scm", 0, 0},
		{"routing_chain", "chain", "select_experts", "anchors/routing_chain.scm", 0, 1},
		{"last_import", "import", OEAP_IN_MODULE, "anchors/imports.scm", 1, 0},
	};
	for (size_t i = 0; i < 3; i++) {
		const oeap_anchor_def *a = &def->anchors[i];
		assert_string_equal(a->name, anchors[i].name);
		assert_string_equal(a->capture, anchors[i].capture);
		assert_string_equal(a->in, anchors[i].in);
		assert_string_equal(a->query_path, anchors[i].query);
		assert_int_equal(a->pick_last, anchors[i].pick_last);
		assert_non_null(a->query);
		assert_true(oeap_query_has_capture(a->query, a->capture));
		assert_int_equal(a->contains != NULL, anchors[i].has_contains);
		assert_ptr_equal(oeap_patchdef_anchor(def, a->name), a);
	}
	assert_string_equal(def->anchors[0].describe, "the module-level function select_experts");
	assert_string_equal(def->anchors[1].contains_path, "anchors/binds_pair.scm");
	assert_true(oeap_query_has_capture(def->anchors[1].contains, "match"));
	assert_null(oeap_patchdef_anchor(def, "nope"));

	assert_int_equal(def->nregions, 2);
	const oeap_region_def *imp = &def->regions[0], *cs = &def->regions[1];
	assert_string_equal(imp->name, "import");
	assert_string_equal(imp->after, "last_import");
	assert_null(imp->scope);
	assert_int_equal(imp->nargs, 0);
	size_t tlen;
	char *t = tu_read("patches/sglang-oea/templates/import.py", &tlen);
	assert_string_equal(imp->template_text, t);
	free(t);
	assert_string_equal(cs->name, "callsite");
	assert_string_equal(cs->after, "routing_chain");
	assert_string_equal(cs->scope, "select_experts");
	t = tu_read("patches/sglang-oea/templates/callsite.py", &tlen);
	assert_string_equal(cs->template_text, t);
	free(t);
	assert_ptr_equal(oeap_patchdef_region(def, "callsite"), cs);
	assert_null(oeap_patchdef_region(def, "nope"));

	/* The call site's arguments, in the order the manifest first names them
	 * (the require line, then each arg.X line), with the required flags. */
	size_t mlen;
	char *manifest = tu_read("patches/sglang-oea/patch.ini", &mlen);
	const char *end, *sec = section_of(manifest, "region:callsite", &end);
	char *copy = strndup(sec, (size_t)(end - sec));
	assert_non_null(copy);
	char *kws[64], *values[64];
	size_t nk = 0;
	char required[512] = "";
	for (char *save = NULL, *ln = strtok_r(copy, "\n", &save); ln; ln = strtok_r(NULL, "\n", &save)) {
		if (strncmp(ln, "require = ", 10) == 0) {
			snprintf(required, sizeof(required), " %s ", ln + 10);
			for (char *s2 = NULL, *w = strtok_r(ln + 10, " ", &s2); w; w = strtok_r(NULL, " ", &s2)) {
				kws[nk] = w;
				values[nk++] = NULL;
			}
		} else if (strncmp(ln, "arg.", 4) == 0) {
			char *eq = strstr(ln, " = ");
			assert_non_null(eq);
			*eq = '\0';
			size_t k;
			for (k = 0; k < nk && strcmp(kws[k], ln + 4) != 0; k++)
				;
			if (k == nk)
				kws[nk++] = ln + 4;
			values[k] = eq + 3;
		}
	}
	assert_true(nk >= 10);
	assert_int_equal(cs->nargs, nk);
	for (size_t k = 0; k < nk; k++) {
		char word[80];
		snprintf(word, sizeof(word), " %s ", kws[k]);
		assert_string_equal(cs->args[k].keyword, kws[k]);
		assert_int_equal(cs->args[k].required, strstr(required, word) != NULL);
		assert_non_null(values[k]);
		/* "a | b.c": the alternatives in order, trimmed. */
		size_t ne = 0;
		for (char *s3 = NULL, *e = strtok_r(values[k], "|", &s3); e; e = strtok_r(NULL, "|", &s3), ne++) {
			while (*e == ' ')
				e++;
			size_t el = strlen(e);
			while (el && e[el - 1] == ' ')
				e[--el] = '\0';
			assert_true(ne < cs->args[k].nexprs);
			assert_string_equal(cs->args[k].exprs[ne], e);
		}
		assert_int_equal(cs->args[k].nexprs, ne);
	}
	assert_string_equal(cs->args[0].keyword, "router_logits");
	assert_true(cs->args[0].required);
	free(copy);
	free(manifest);
	oeap_patchdef_free(def);
}

static void test_copy_loads(void **state)
{
	/* The untouched copy loads: every refusal below is about its one change. */
	fixture *f = *state;
	oeap_patchdef *def = NULL;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_patchdef_load(f->dir, &def, &err), 0);
	assert_string_equal(def->dir, f->dir);
	assert_int_equal(def->nregions, 2);
	oeap_patchdef_free(def);
}

static void test_arg_alternatives(void **state)
{
	fixture *f = *state;
	edit_ini(f, "arg.top_k = top_k", "arg.top_k = top_k | topk_config.top_k|cfg.a.b");
	oeap_patchdef *def = NULL;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_patchdef_load(f->dir, &def, &err), 0);
	const oeap_region_def *cs = oeap_patchdef_region(def, "callsite");
	const oeap_arg_def *a = NULL;
	for (size_t i = 0; i < cs->nargs; i++)
		if (strcmp(cs->args[i].keyword, "top_k") == 0)
			a = &cs->args[i];
	assert_non_null(a);
	assert_int_equal(a->nexprs, 3);
	assert_string_equal(a->exprs[0], "top_k");
	assert_string_equal(a->exprs[1], "topk_config.top_k");
	assert_string_equal(a->exprs[2], "cfg.a.b");
	assert_false(a->required);
	oeap_patchdef_free(def);
}

/* [library]: what the binding needs of liboea, declared once. */
static void test_library_section(void **state)
{
	(void)state;
	oeap_patchdef *def = tu_def();
	assert_non_null(def->library_symbols);
	assert_string_equal(def->library_symbols[0], "oea_abi_version");
	size_t n = 0;
	while (def->library_symbols[n])
		n++;
	assert_int_equal(n, 11); /* the list goes on over an indented line */
	assert_int_equal(def->problem_size, 144);
	assert_true(def->nprobe >= 3);
	assert_string_equal(def->problem_probe[0].name, "num_experts");
	assert_int_equal(def->problem_probe[0].value, 1);
	oeap_patchdef_free(def);
}

static void test_library_bad_size(void **state)
{
	fixture *f = *state;
	long line = edit_ini(f, "problem_size = 144", "problem_size = 4");
	oeap_error err = load_refused(f);
	expect_definition_error(&err, "patch.ini", "[library] problem_size: must be the binding's sizeof(oea_problem)",
	                        line);
}

static void test_library_bad_probe(void **state)
{
	fixture *f = *state;
	long line = edit_ini(f, "problem_probe = num_experts=1", "problem_probe = num_experts:1");
	oeap_error err = load_refused(f);
	expect_definition_error(&err, "patch.ini", "[library] problem_probe: expected FIELD=INTEGER pairs", line);
}

static void test_library_bad_symbol(void **state)
{
	fixture *f = *state;
	long line = edit_ini(f, "symbols = oea_abi_version", "symbols = oea_abi_version()");
	oeap_error err = load_refused(f);
	expect_definition_error(&err, "patch.ini", "[library] symbols: expected C function names", line);
}

static void test_library_probe_without_size(void **state)
{
	fixture *f = *state;
	edit_ini(f, "problem_size = 144", "; problem_size = 144");
	oeap_error err = load_refused(f);
	expect_definition_error(&err, "patch.ini", "[library] problem_probe needs problem_size", -1);
}

static void test_unknown_key(void **state)
{
	fixture *f = *state;
	long line = edit_ini(f, "abi = 3\n", "abi = 3\ncolour = blue\n") + 1;
	oeap_error err = load_refused(f);
	char where[64];
	snprintf(where, sizeof(where), "patch.ini:%ld", line);
	expect_definition_error(&err, where, "[patch] colour: unknown key", line);
}

static void test_unknown_key_in_anchor(void **state)
{
	fixture *f = *state;
	long line = edit_ini(f, "pick = last", "pik = last");
	oeap_error err = load_refused(f);
	expect_definition_error(&err, "patch.ini", "[anchor:last_import] pik: unknown key", line);
}

static void test_unknown_section(void **state)
{
	fixture *f = *state;
	edit_ini(f, "[binding]\n", "[bindings]\n");
	/* inih reports the section with its first key. */
	long line = edit_ini(f, "module = _oeapatch", "module = _oeapatch");
	oeap_error err = load_refused(f);
	expect_definition_error(&err, "patch.ini", "[bindings] ", line);
	assert_non_null(strstr(err.message, "unknown section"));
}

static void test_version_zero(void **state)
{
	fixture *f = *state;
	long line = edit_ini(f, "version = 2", "version = 0");
	oeap_error err = load_refused(f);
	expect_definition_error(&err, "patch.ini", "[patch] version: must be an integer >= 1", line);
}

static void test_first_revision(void **state)
{
	fixture *f = *state;
	long line = edit_ini(f, "first_revision = 2024-12-24", "first_revision = last tuesday");
	oeap_error err = load_refused(f);
	expect_definition_error(&err, "patch.ini",
	                        "[patch] first_revision: must be a commit id (7 to 40 hex digits) or a date YYYY-MM-DD",
	                        line);
	edit_ini(f, "first_revision = last tuesday", "first_revision = 2024-13-01");
	load_refused(f);
	edit_ini(f, "first_revision = 2024-13-01", "first_revision = 4a5b6c7d8e9f");
	oeap_patchdef *def = NULL;
	oeap_error_clear(&err);
	if (oeap_patchdef_load(f->dir, &def, &err))
		fail_msg("a commit id was refused: %s", err.message);
	assert_string_equal(def->first_revision, "4a5b6c7d8e9f");
	oeap_patchdef_free(def);
}

static void test_bad_pick(void **state)
{
	fixture *f = *state;
	long line = edit_ini(f, "pick = last", "pick = first");
	oeap_error err = load_refused(f);
	expect_definition_error(&err, NULL, "[anchor:last_import] pick: must be 'unique' or 'last'", line);
}

static void test_missing_template(void **state)
{
	fixture *f = *state;
	edit_ini(f, "template = templates/callsite.py", "template = templates/nope.py");
	oeap_error err = load_refused(f);
	if (!strstr(err.where, "templates/nope.py") && !strstr(err.message, "templates/nope.py"))
		fail_msg("the error does not name the template: %s: %s", err.where, err.message);
	/* A template the definition names but lacks: a broken definition, not an I/O problem. */
	expect_definition_error(&err, NULL, NULL, -1);
}

static void test_missing_query_file(void **state)
{
	fixture *f = *state;
	edit_ini(f, "query = anchors/imports.scm", "query = anchors/nope.scm");
	oeap_error err = load_refused(f);
	if (!strstr(err.where, "anchors/nope.scm") && !strstr(err.message, "anchors/nope.scm"))
		fail_msg("the error does not name the query: %s: %s", err.where, err.message);
	expect_definition_error(&err, NULL, NULL, -1);
}

static void test_query_syntax_error(void **state)
{
	fixture *f = *state;
	put(f, "anchors/imports.scm", "((module (import_statement) @import) @in\n");
	oeap_error err = load_refused(f);
	expect_definition_error(&err, "anchors/imports.scm", "does not compile", -1);
	assert_non_null(strstr(err.message, "syntax error"));
}

/*
 * The definition's query files are compiled as one query (patchdef.c), but
 * each must compile alone: here routing_chain.scm leaves a parenthesis open
 * that binds_pair.scm, compiled after it, closes. Together they form valid
 * patterns; the definition must still be refused, naming routing_chain.scm.
 */
static void test_query_compiles_only_with_the_next(void **state)
{
	fixture *f = *state;
	put(f, "anchors/routing_chain.scm", "((function_definition body: (block (if_statement) @chain)) @in\n");
	put(f, "anchors/binds_pair.scm", ")\n((assignment) @match)\n((augmented_assignment) @match)\n");
	oeap_error err = load_refused(f);
	expect_definition_error(&err, "anchors/routing_chain.scm", "does not compile", -1);
}

static void test_query_lacks_capture(void **state)
{
	fixture *f = *state;
	long line = edit_ini(f, "capture = import", "capture = imports");
	(void)line;
	oeap_error err = load_refused(f);
	expect_definition_error(&err, "anchors/imports.scm", "no capture @imports", -1);
}

static void test_contains_without_match(void **state)
{
	fixture *f = *state;
	put(f, "anchors/binds_pair.scm", "((assignment) @hit)\n");
	oeap_error err = load_refused(f);
	expect_definition_error(&err, "anchors/binds_pair.scm", "@match", -1);
}

static void test_in_undefined_anchor(void **state)
{
	fixture *f = *state;
	edit_ini(f, "in = select_experts", "in = selct_experts");
	oeap_error err = load_refused(f);
	expect_definition_error(&err, "[anchor:routing_chain]", "'in = selct_experts' must name an anchor", -1);
}

static void test_in_later_anchor(void **state)
{
	fixture *f = *state;
	/* last_import is defined after routing_chain: not resolved yet when it runs. */
	edit_ini(f, "in = select_experts", "in = last_import");
	oeap_error err = load_refused(f);
	expect_definition_error(&err, "[anchor:routing_chain]", "defined before it", -1);
}

static void test_after_no_anchor(void **state)
{
	fixture *f = *state;
	edit_ini(f, "after = last_import", "after = first_import");
	oeap_error err = load_refused(f);
	expect_definition_error(&err, "[region:import]", "'after' must name an anchor", -1);
}

static void test_scope_no_anchor(void **state)
{
	fixture *f = *state;
	edit_ini(f, "scope = select_experts", "scope = nowhere");
	oeap_error err = load_refused(f);
	expect_definition_error(&err, "[region:callsite]", "'scope' must name an anchor", -1);
}

static void test_template_with_marker(void **state)
{
	fixture *f = *state;
	put(f, "templates/import.py",
	    "# >>> oeapatch sglang-oea/1 import sha256:0123456789abcdef >>>\nfrom . import {{module}} as _m\n");
	oeap_error err = load_refused(f);
	expect_definition_error(&err, "templates/import.py", "must not contain region markers", -1);
}

static void test_template_with_tab(void **state)
{
	fixture *f = *state;
	put(f, "templates/callsite.py", "if _oeapatch_oea.ENABLED:\n\tpass\n");
	oeap_error err = load_refused(f);
	expect_definition_error(&err, "templates/callsite.py", "4-space indentation", -1);
}

static void test_template_with_crlf(void **state)
{
	fixture *f = *state;
	put(f, "templates/import.py", "from . import {{module}} as _oeapatch_oea\r\n");
	oeap_error err = load_refused(f);
	expect_definition_error(&err, "templates/import.py", "LF line ends", -1);
}

static void test_required_without_arg(void **state)
{
	fixture *f = *state;
	edit_ini(f, "require = router_logits topk_weights topk_ids",
	         "require = router_logits topk_weights topk_ids hidden_states");
	oeap_error err = load_refused(f);
	expect_definition_error(&err, "[region:callsite]",
	                        "required argument 'hidden_states' has no arg.hidden_states line", -1);
}

static void test_bad_arg_expression(void **state)
{
	static const char *bad[] = {"a-b", "a..b", ".a", "a.", "1a", "top_k | a b", "f(x)"};
	fixture *f = *state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *saved = NULL;
		size_t len;
		char ini[PATH_MAX + 16];
		snprintf(ini, sizeof(ini), "%s/patch.ini", f->dir);
		saved = read_abs(ini, &len);
		char repl[64];
		snprintf(repl, sizeof(repl), "arg.top_k = %s\n", bad[i]);
		long line = edit_ini(f, "arg.top_k = top_k\n", repl);
		oeap_error err = load_refused(f);
		if (err.kind != OEAP_ERR_DEFINITION || err.line != line ||
		    !strstr(err.message, "[region:callsite] arg.top_k: expected dotted names"))
			fail_msg("'%s': %d line %ld (want %ld): %s", bad[i], (int)err.kind, err.line, line, err.message);
		tu_write(ini, saved, len);
		free(saved);
	}
}

static void test_bad_arg_keyword(void **state)
{
	fixture *f = *state;
	long line = edit_ini(f, "arg.top_k = top_k", "arg.top-k = top_k");
	oeap_error err = load_refused(f);
	expect_definition_error(&err, NULL, "[region:callsite] arg.top-k: the keyword must be a Python identifier",
	                        line);
}

static void test_args_without_scope(void **state)
{
	fixture *f = *state;
	edit_ini(f, "scope = select_experts\n", "");
	oeap_error err = load_refused(f);
	expect_definition_error(&err, "[region:callsite]", "arguments need a 'scope'", -1);
}

/* [binding] source = several files: one module, in their order; a file
 * that does not end its last line gets a newline before the next. */
static void test_binding_sources(void **state)
{
	fixture *f = *state;
	put(f, "a.py", "A = 1");
	put(f, "b.py", "B = 2\n");
	edit_ini(f, TU_SOURCE_LINE, "source = a.py b.py ../binding-core/oea_core.py");
	oeap_patchdef *def = NULL;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_patchdef_load(f->dir, &def, &err), 0);
	size_t clen;
	char *core = tu_read("patches/binding-core/oea_core.py", &clen);
	assert_int_equal(strncmp(def->binding_text, "A = 1\nB = 2\n", 12), 0);
	assert_string_equal(def->binding_text + 12, core);
	free(core);
	oeap_patchdef_free(def);
}

static void test_binding_source_missing(void **state)
{
	fixture *f = *state;
	long line = edit_ini(f, TU_SOURCE_LINE, "source = ../binding-core/oea_core.py nope.py");
	(void)line;
	oeap_error err = load_refused(f);
	expect_definition_error(&err, "[binding] source", "nope.py", -1);
}

static void test_binding_source_absolute(void **state)
{
	fixture *f = *state;
	edit_ini(f, TU_SOURCE_LINE, "source = /etc/passwd adapter.py");
	oeap_error err = load_refused(f);
	expect_definition_error(&err, "patch.ini", "[binding] source: files are relative to the definition's folder, not absolute paths", -1);
}

static void test_binding_source_empty(void **state)
{
	fixture *f = *state;
	edit_ini(f, TU_SOURCE_LINE, "source = ");
	oeap_error err = load_refused(f);
	expect_definition_error(&err, "patch.ini", "[binding] source: expected the module's files", -1);
}

static void test_target_with_dotdot(void **state)
{
	fixture *f = *state;
	edit_ini(f, "target = python/", "target = python/../../");
	oeap_error err = load_refused(f);
	expect_definition_error(&err, "patch.ini", "must be a relative path inside the checkout", -1);
	assert_non_null(strstr(err.message, "'python/../../sglang/srt/layers/moe/topk.py'"));
}

static void test_target_absolute(void **state)
{
	fixture *f = *state;
	edit_ini(f, "target = python/", "target = /python/");
	oeap_error err = load_refused(f);
	expect_definition_error(&err, "patch.ini", "must be a relative path inside the checkout", -1);
}

static void test_bad_name(void **state)
{
	fixture *f = *state;
	edit_ini(f, "name = sglang-oea", "name = SGLang_OEA");
	oeap_error err = load_refused(f);
	expect_definition_error(&err, "patch.ini", "'SGLang_OEA' may only use a-z, 0-9 and '-'", -1);
}

static void test_missing_target(void **state)
{
	fixture *f = *state;
	edit_ini(f, "target = ", "; target = ");
	oeap_error err = load_refused(f);
	expect_definition_error(&err, "patch.ini", "needs [patch] name, version, target", -1);
}

static void test_bad_binding_module(void **state)
{
	fixture *f = *state;
	long line = edit_ini(f, "module = _oeapatch_sglang_oea", "module = oeapatch-binding");
	oeap_error err = load_refused(f);
	expect_definition_error(&err, NULL, "[binding] module: must be a Python identifier", line);
}

static void test_no_regions(void **state)
{
	fixture *f = *state;
	size_t len;
	char ini[PATH_MAX + 16];
	snprintf(ini, sizeof(ini), "%s/patch.ini", f->dir);
	char *text = read_abs(ini, &len);
	char *r = strstr(text, "\n[region:");
	assert_non_null(r);
	tu_write(ini, text, (size_t)(r - text) + 1);
	free(text);
	oeap_error err = load_refused(f);
	expect_definition_error(&err, NULL, "no [region:...]", -1);
}

/* [binding] trust_escape names the bool setting verify, apply and the
 * binding read; a name that is no such setting was once taken silently, and
 * verify then had no escape where the binding had one. */
static void test_trust_escape_no_setting(void **state)
{
	fixture *f = *state;
	edit_ini(f, "trust_escape = SGLANG_OEA_ALLOW_UNTRUSTED", "trust_escape = SGLANG_OEA_ALLOW_UNTRUSTD");
	oeap_error err = load_refused(f);
	expect_definition_error(&err, "patch.ini",
	                        "[binding] trust_escape = SGLANG_OEA_ALLOW_UNTRUSTD: there is no [setting:] of that name",
	                        -1);
}

static void test_trust_escape_not_bool(void **state)
{
	fixture *f = *state;
	edit_ini(f, "trust_escape = SGLANG_OEA_ALLOW_UNTRUSTED", "trust_escape = SGLANG_OEA_K0");
	oeap_error err = load_refused(f);
	expect_definition_error(&err, "patch.ini", "trust_escape = SGLANG_OEA_K0: that setting is not type = bool", -1);
}

static void test_missing_manifest(void **state)
{
	fixture *f = *state;
	char ini[PATH_MAX + 16];
	snprintf(ini, sizeof(ini), "%s/patch.ini", f->dir);
	assert_int_equal(remove(ini), 0);
	oeap_error err = load_refused(f);
	assert_int_equal(err.kind, OEAP_ERR_IO);
	assert_non_null(strstr(err.where, "patch.ini"));
}

/* [patch] target and installed_target: alternatives in order of preference;
 * the first is the target every single-path use names. */
static void test_target_alternatives(void **state)
{
	fixture *f = *state;
	edit_ini(f, "target = python/sglang/srt/layers/moe/topk.py\n",
	         "target = python/sglang/srt/layers/moe/router.py\tpython/sglang/srt/layers/moe/topk.py\n");
	edit_ini(f, "installed_target = sglang/srt/layers/moe/topk.py\n",
	         "installed_target =  sglang/srt/layers/moe/router.py  sglang/srt/layers/moe/topk.py \n");
	edit_ini(f, "name = sglang-oea\n", "name = sglang-oea\nframework = SGLang\n");
	edit_ini(f, "pick = unique\n", "pick = unique\nunmatched = before 2024-12 the code lived elsewhere\n");
	oeap_patchdef *def = NULL;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_patchdef_load(f->dir, &def, &err), 0);
	assert_string_equal(def->target, "python/sglang/srt/layers/moe/router.py");
	assert_string_equal(def->targets[0], "python/sglang/srt/layers/moe/router.py");
	assert_string_equal(def->targets[1], "python/sglang/srt/layers/moe/topk.py");
	assert_null(def->targets[2]);
	assert_string_equal(def->installed_target, "sglang/srt/layers/moe/router.py");
	assert_string_equal(def->installed_targets[1], "sglang/srt/layers/moe/topk.py");
	assert_null(def->installed_targets[2]);
	assert_string_equal(def->framework, "SGLang");
	assert_string_equal(oeap_patchdef_anchor(def, "select_experts")->unmatched,
	                    "before 2024-12 the code lived elsewhere");
	assert_null(oeap_patchdef_anchor(def, "last_import")->unmatched);
	oeap_patchdef_free(def);
}

/* One path: as before (a list of one), no framework stated. */
static void test_target_single(void **state)
{
	(void)state;
	oeap_patchdef *def = tu_def();
	assert_string_equal(def->target, "python/sglang/srt/layers/moe/topk.py");
	assert_string_equal(def->targets[0], def->target);
	assert_null(def->targets[1]);
	assert_string_equal(def->installed_targets[0], def->installed_target);
	assert_null(def->installed_targets[1]);
	oeap_patchdef_free(def);
}

/* Every alternative is checked like the one path was, and the installed
 * ones must be files of one package (--python asks for one). */
static void test_target_alternative_refused(void **state)
{
	fixture *f = *state;
	char ini[PATH_MAX + 16], *saved;
	size_t len;
	snprintf(ini, sizeof(ini), "%s/patch.ini", f->dir);
	saved = read_abs(ini, &len);
	edit_ini(f, "target = python/sglang/srt/layers/moe/topk.py\n",
	         "target = python/sglang/srt/layers/moe/topk.py ../elsewhere/topk.py\n");
	oeap_error err = load_refused(f);
	expect_definition_error(&err, "patch.ini", "target '../elsewhere/topk.py' must be a relative path", -1);
	tu_write(ini, saved, len);
	edit_ini(f, "installed_target = sglang/srt/layers/moe/topk.py\n",
	         "installed_target = sglang/srt/layers/moe/topk.py vllm/layer.py\n");
	err = load_refused(f);
	expect_definition_error(&err, "patch.ini", "installed_target 'vllm/layer.py' is not in the package 'sglang'", -1);
	tu_write(ini, saved, len);
	/* a package whose name starts with the first one's is another package */
	edit_ini(f, "installed_target = sglang/srt/layers/moe/topk.py\n",
	         "installed_target = sglang/srt/layers/moe/topk.py sglangx/topk.py\n");
	err = load_refused(f);
	expect_definition_error(&err, "patch.ini", "installed_target 'sglangx/topk.py' is not in the package 'sglang'", -1);
	tu_write(ini, saved, len);
	edit_ini(f, "installed_target = sglang/srt/layers/moe/topk.py\n", "installed_target = \n");
	err = load_refused(f);
	expect_definition_error(&err, "patch.ini", "installed_target: expected one or more relative paths", -1);
	free(saved);
}

/* The manifest alone (framework detection): [patch] as in full, nothing
 * compiled; the full load still refuses what the manifest load skips. */
static void test_load_manifest(void **state)
{
	fixture *f = *state;
	put(f, "anchors/imports.scm", "((module (import_statement) @import) @in\n");
	oeap_patchdef *def = NULL;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_patchdef_load_manifest(f->dir, &def, &err), 0);
	assert_string_equal(def->name, "sglang-oea");
	assert_string_equal(def->framework, "SGLang");
	assert_string_equal(def->targets[0], "python/sglang/srt/layers/moe/topk.py");
	assert_string_equal(def->installed_targets[0], "sglang/srt/layers/moe/topk.py");
	assert_int_equal(def->nanchors ? def->anchors[0].query != NULL : 0, 0);
	oeap_patchdef_free(def);
	err = load_refused(f);
	expect_definition_error(&err, "anchors/imports.scm", "does not compile", -1);
	/* [patch] is checked in full by either. */
	edit_ini(f, "target = python/sglang/srt/layers/moe/topk.py\n", "target = /abs/topk.py\n");
	def = (oeap_patchdef *)1;
	oeap_error_clear(&err);
	assert_int_not_equal(oeap_patchdef_load_manifest(f->dir, &def, &err), 0);
	assert_null(def);
	expect_definition_error(&err, "patch.ini", "must be a relative path inside the checkout", -1);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_real_definition),
		cmocka_unit_test(test_target_single),
		T(test_target_alternatives),
		T(test_target_alternative_refused),
		T(test_load_manifest),
		T(test_copy_loads),
		T(test_arg_alternatives),
		cmocka_unit_test(test_library_section),
		T(test_library_bad_size),
		T(test_library_bad_probe),
		T(test_library_bad_symbol),
		T(test_library_probe_without_size),
		T(test_unknown_key),
		T(test_unknown_key_in_anchor),
		T(test_unknown_section),
		T(test_version_zero),
		T(test_first_revision),
		T(test_bad_pick),
		T(test_missing_template),
		T(test_missing_query_file),
		T(test_query_syntax_error),
		T(test_query_compiles_only_with_the_next),
		T(test_query_lacks_capture),
		T(test_contains_without_match),
		T(test_in_undefined_anchor),
		T(test_in_later_anchor),
		T(test_after_no_anchor),
		T(test_scope_no_anchor),
		T(test_template_with_marker),
		T(test_template_with_tab),
		T(test_template_with_crlf),
		T(test_required_without_arg),
		T(test_bad_arg_expression),
		T(test_bad_arg_keyword),
		T(test_args_without_scope),
		T(test_binding_sources),
		T(test_binding_source_missing),
		T(test_binding_source_absolute),
		T(test_binding_source_empty),
		T(test_target_with_dotdot),
		T(test_target_absolute),
		T(test_bad_name),
		T(test_missing_target),
		T(test_bad_binding_module),
		T(test_no_regions),
		T(test_trust_escape_no_setting),
		T(test_trust_escape_not_bool),
		T(test_missing_manifest),
	};
#undef T
	return cmocka_run_group_tests(tests, NULL, NULL);
}
