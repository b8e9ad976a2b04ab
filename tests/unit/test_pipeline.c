/*
 * The pipeline on bytes: what apply refuses (and that it then returns no
 * bytes to write), what verify reports for each way a patched file can go
 * wrong, and how apply and revert treat damaged, moved and older regions.
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline.h"

static oeap_patchdef *def;

static int setup(void **state)
{
	(void)state;
	def = tu_def();
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	oeap_patchdef_free(def);
	return 0;
}

/* Applies to a fixture and returns the patched bytes (caller frees). */
static char *patched(const char *fixture, size_t *len)
{
	char rel[256];
	size_t n;
	oeap_outcome o;
	oeap_error err;
	oeap_error_clear(&err);
	snprintf(rel, sizeof(rel), "tests/fixtures/%s", fixture);
	char *in = tu_read(rel, &n);
	if (oeap_apply_bytes(def, in, n, fixture, &o, &err))
		fail_msg("apply %s: %s: %s", fixture, err.where, err.message);
	free(in);
	char *out = o.out;
	*len = o.out_len;
	o.out = NULL;
	oeap_outcome_free(&o);
	return out;
}

static void expect_refusal(const char *fixture, oeap_error_kind kind, const char *where_part,
                           const char *msg_part)
{
	char rel[256];
	size_t n;
	oeap_outcome o;
	oeap_error err;
	oeap_error_clear(&err);
	snprintf(rel, sizeof(rel), "tests/fixtures/%s", fixture);
	char *in = tu_read(rel, &n);
	assert_int_equal(oeap_apply_bytes(def, in, n, fixture, &o, &err), -1);
	assert_null(o.out);
	if (err.kind != kind || (where_part && !strstr(err.where, where_part)) || !strstr(err.message, msg_part))
		fail_msg("%s: got kind %d where '%s' message '%s'", fixture, err.kind, err.where, err.message);
	free(in);
}

static void test_refusals(void **state)
{
	(void)state;
	expect_refusal("refuse/syntax_error.py", OEAP_ERR_INPUT, NULL, "syntax error");
	expect_refusal("refuse/empty.py", OEAP_ERR_INPUT, NULL, "empty");
	expect_refusal("refuse/invalid_utf8.py", OEAP_ERR_INPUT, NULL, "UTF-8");
	expect_refusal("refuse/mixed_eol.py", OEAP_ERR_INPUT, NULL, "mixed line endings");
	expect_refusal("refuse/two_select_experts.py", OEAP_ERR_ANCHOR, "select_experts", "ambiguous");
	expect_refusal("refuse/nested_select_experts.py", OEAP_ERR_ANCHOR, "select_experts", "not found");
	expect_refusal("refuse/no_routing_chain.py", OEAP_ERR_ANCHOR, "routing_chain", "not found");
	expect_refusal("refuse/two_chains.py", OEAP_ERR_ANCHOR, "routing_chain", "ambiguous");
}

/* Finds the n-th (0-based) line that contains `needle`; returns its start. */
static char *find_line(char *buf, const char *needle)
{
	char *p = strstr(buf, needle);
	assert_non_null(p);
	while (p > buf && p[-1] != '\n')
		p--;
	return p;
}

static void verify_expect(const char *buf, size_t len, const char *check, const char *detail_part)
{
	oeap_report rep;
	assert_int_equal(oeap_verify_bytes(def, buf, len, "topk.py", &rep), 0);
	assert_false(rep.ok);
	int found = 0;
	for (size_t i = 0; i < rep.n; i++)
		if (!rep.checks[i].ok && strcmp(rep.checks[i].name, check) == 0) {
			found = 1;
			if (detail_part && !strstr(rep.checks[i].detail, detail_part))
				fail_msg("check %s: detail '%s' lacks '%s'", check, rep.checks[i].detail, detail_part);
		}
	if (!found) {
		for (size_t i = 0; i < rep.n; i++)
			print_message("  %s %s: %s\n", rep.checks[i].ok ? "ok" : "FAIL", rep.checks[i].name,
			              rep.checks[i].detail);
		fail_msg("expected check %s to fail", check);
	}
	oeap_report_free(&rep);
}

static void test_verify_not_applied(void **state)
{
	(void)state;
	size_t n;
	char *in = tu_read("tests/fixtures/eras/2025-08_topk_config.py", &n);
	oeap_report rep;
	assert_int_equal(oeap_verify_bytes(def, in, n, "topk.py", &rep), 0);
	assert_false(rep.ok);
	assert_false(rep.applied);
	oeap_report_free(&rep);
	verify_expect(in, n, "applied", "not applied");
	free(in);
}

static void test_edited_region(void **state)
{
	(void)state;
	size_t n;
	oeap_outcome o;
	oeap_error err;
	oeap_error_clear(&err);
	char *buf = patched("eras/2025-08_topk_config.py", &n);
	char *line = find_line(strstr(buf, "# >>> oeapatch sglang-oea/2 callsite"), "            top_k=top_k,");
	memcpy(strstr(line, "top_k=top_k"), "top_k=top_q", 11); /* a hand edit inside our region */
	verify_expect(buf, n, "integrity:callsite", "was edited");

	/* apply refuses to overwrite it, revert too unless forced */
	assert_int_equal(oeap_apply_bytes(def, buf, n, "topk.py", &o, &err), -1);
	assert_int_equal(err.kind, OEAP_ERR_REGION);
	assert_non_null(strstr(err.message, "edited by hand"));
	oeap_error_clear(&err);
	assert_int_equal(oeap_revert_bytes(def, buf, n, "topk.py", 0, &o, &err), -1);
	assert_int_equal(err.kind, OEAP_ERR_REGION);
	oeap_error_clear(&err);
	assert_int_equal(oeap_revert_bytes(def, buf, n, "topk.py", 1, &o, &err), 0);
	size_t in_n;
	char *in = tu_read("tests/fixtures/eras/2025-08_topk_config.py", &in_n);
	assert_int_equal(o.out_len, in_n);
	assert_memory_equal(o.out, in, in_n);
	oeap_outcome_free(&o);
	free(in);
	free(buf);
}

/* Moves the call-site region (its whole lines) to just before the chain. */
static void test_moved_callsite(void **state)
{
	(void)state;
	size_t n;
	char *buf = patched("eras/2025-08_topk_config.py", &n);
	char *begin = find_line(buf, "# >>> oeapatch sglang-oea/2 callsite");
	char *end = find_line(buf, "# <<< oeapatch sglang-oea/2 callsite");
	end = strchr(end, '\n') + 1;
	size_t rlen = (size_t)(end - begin);
	char *region = strndup(begin, rlen);
	char *chain = find_line(buf, "    if use_grouped_topk:");
	assert_true(chain < begin);
	/* buf = [..chain) + region + [chain..begin) + [end..] */
	char *moved = malloc(n + 1);
	size_t at = 0;
	memcpy(moved + at, buf, (size_t)(chain - buf));
	at += (size_t)(chain - buf);
	memcpy(moved + at, region, rlen);
	at += rlen;
	memcpy(moved + at, chain, (size_t)(begin - chain));
	at += (size_t)(begin - chain);
	memcpy(moved + at, end, n - (size_t)(end - buf));
	at += n - (size_t)(end - buf);
	assert_int_equal(at, n);
	verify_expect(moved, n, "placement:callsite", "demands it directly after");

	/* apply refuses to move it silently, naming the check and the way out ... */
	oeap_outcome o;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_apply_bytes(def, moved, n, "topk.py", &o, &err), -1);
	assert_null(o.out);
	assert_int_equal(err.kind, OEAP_ERR_REGION);
	assert_non_null(strstr(err.message, "placement:callsite"));
	assert_non_null(strstr(err.message, "--refresh"));
	/* ... and, the regions being intact, --refresh puts it back where it belongs. */
	oeap_error_clear(&err);
	assert_int_equal(oeap_apply_bytes_flags(def, moved, n, "topk.py", OEAP_APPLY_REFRESH, &o, &err), 0);
	assert_int_equal(o.before, OEAP_STATE_STALE);
	assert_int_equal(o.out_len, n);
	assert_memory_equal(o.out, buf, n);
	oeap_outcome_free(&o);
	free(region);
	free(moved);
	free(buf);
}

static char *insert_at(const char *buf, size_t *n, size_t at, const char *ins);

/* apply refuses a file whose patch no longer holds, naming the failed check;
 * --refresh puts back exactly `want` (what a first apply writes). */
static void apply_refuses_then_refresh(const char *buf, size_t n, const char *check, const char *want,
                                       size_t want_len)
{
	oeap_outcome o;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_apply_bytes(def, buf, n, "topk.py", &o, &err), -1);
	assert_null(o.out);
	if (err.kind != OEAP_ERR_REGION || !strstr(err.message, check) || !strstr(err.message, "--refresh"))
		fail_msg("apply: expected a refusal naming %s and --refresh, got %d: %s", check, err.kind, err.message);
	oeap_error_clear(&err);
	if (oeap_apply_bytes_flags(def, buf, n, "topk.py", OEAP_APPLY_REFRESH, &o, &err))
		fail_msg("apply --refresh: %s", err.message);
	assert_int_equal(o.out_len, want_len);
	assert_memory_equal(o.out, want, want_len);
	oeap_outcome_free(&o);
}

/* The named check of verify holds on `buf` (so that another one failing is
 * that one's doing). */
static void verify_holds(const char *buf, size_t len, const char *check)
{
	oeap_report rep;
	assert_int_equal(oeap_verify_bytes(def, buf, len, "topk.py", &rep), 0);
	int found = 0;
	for (size_t i = 0; i < rep.n; i++)
		if (strcmp(rep.checks[i].name, check) == 0) {
			found = 1;
			if (!rep.checks[i].ok)
				fail_msg("check %s fails: %s", check, rep.checks[i].detail);
		}
	if (!found)
		fail_msg("check %s did not run", check);
	oeap_report_free(&rep);
}

/* Moves the call-site region below its anchor: past the aiter block that
 * appends the shared experts' ids, which the call site would then re-route. */
static void test_callsite_moved_below(void **state)
{
	(void)state;
	size_t n;
	char *buf = patched("eras/2025-08_topk_config.py", &n);
	char *begin = find_line(buf, "# >>> oeapatch sglang-oea/2 callsite");
	char *end = strchr(find_line(buf, "# <<< oeapatch sglang-oea/2 callsite"), '\n') + 1;
	char *to = find_line(buf, "    get_global_expert_distribution_recorder().on_select_experts(");
	assert_true(to > end);
	size_t rlen = (size_t)(end - begin);
	/* moved = [..begin) + [end..to) + region + [to..] */
	char *moved = malloc(n + 1);
	assert_non_null(moved);
	size_t at = (size_t)(begin - buf);
	memcpy(moved, buf, at);
	memcpy(moved + at, end, (size_t)(to - end));
	at += (size_t)(to - end);
	memcpy(moved + at, begin, rlen);
	at += rlen;
	memcpy(moved + at, to, n - (size_t)(to - buf));
	moved[n] = '\0';
	verify_holds(moved, n, "integrity:callsite");
	verify_expect(moved, n, "placement:callsite", "demands it directly after");
	apply_refuses_then_refresh(moved, n, "placement:callsite", buf, n);
	free(moved);
	free(buf);
}

/* Re-records the hash in the begin marker of region `name` for its body as it is now. */
static void rehash(char *buf, const char *name)
{
	char marker[96], endm[96];
	snprintf(marker, sizeof(marker), "# >>> oeapatch sglang-oea/2 %s sha256:", name);
	snprintf(endm, sizeof(endm), "# <<< oeapatch sglang-oea/2 %s", name);
	char *m = strstr(buf, marker);
	assert_non_null(m);
	char *body = strchr(m, '\n') + 1, *body_end = find_line(buf, endm);
	char hex[OEAP_HASH_HEX + 1];
	assert_int_equal(oeap_region_hash(body, (size_t)(body_end - body), hex), 0);
	memcpy(m + strlen(marker), hex, OEAP_HASH_HEX);
}

/* The call site with its two results swapped: the same length, a hash that
 * matches (re-recorded), every name bound, in its place; the server would
 * route with the weights as ids. Only the content check can tell. */
static void test_callsite_swapped_same_length(void **state)
{
	(void)state;
	size_t n;
	char *buf = patched("eras/2025-08_topk_config.py", &n);
	char *swapped = strdup(buf);
	assert_non_null(swapped);
	char *region = strstr(swapped, "# >>> oeapatch sglang-oea/2 callsite");
	char *w = strstr(region, "            topk_weights=topk_weights,\n");
	char *i = strstr(region, "            topk_ids=topk_ids,\n");
	assert_non_null(w);
	assert_true(i == w + strlen("            topk_weights=topk_weights,\n"));
	static const char repl[] = "            topk_weights=topk_ids,\n            topk_ids=topk_weights,\n";
	memcpy(w, repl, strlen(repl));
	rehash(swapped, "callsite");
	assert_int_equal(strlen(swapped), n);
	verify_holds(swapped, n, "integrity:callsite");
	verify_holds(swapped, n, "placement:callsite");
	verify_holds(swapped, n, "names:callsite");
	verify_expect(swapped, n, "content:callsite", "found `            topk_weights=topk_ids,`");
	apply_refuses_then_refresh(swapped, n, "content:callsite", buf, n);
	free(swapped);
	free(buf);
}

/* A region of our patch that the definition does not have, intact (its hash
 * matches): verify refuses it by name, apply does not take it for applied. */
static void test_unknown_region_of_ours(void **state)
{
	(void)state;
	size_t n;
	char *buf = patched("eras/2025-03_recorder.py", &n);
	oeap_buf extra = OEAP_BUF_INIT;
	static const char body[] = "_oeapatch_extra = 1\n";
	assert_int_equal(oeap_region_render(&extra, "sglang-oea", 2, "foo", "", "\n", body, strlen(body)), 0);
	char *after = strchr(find_line(buf, "# <<< oeapatch sglang-oea/2 import"), '\n') + 1;
	size_t k = n;
	char *three = insert_at(buf, &k, (size_t)(after - buf), extra.data);
	verify_holds(three, k, "integrity:foo");
	verify_expect(three, k, "regions", "unknown: foo");
	apply_refuses_then_refresh(three, k, "regions", buf, n);
	free(three);

	/* The import region again, under an older version: a duplicate all the same. */
	char *begin = find_line(buf, "# >>> oeapatch sglang-oea/2 import");
	size_t rlen = (size_t)(after - begin);
	char *old = strndup(begin, rlen);
	assert_non_null(old);
	for (char *p = old; (p = strstr(p, "sglang-oea/2 ")) != NULL; p++)
		p[11] = '1';
	k = n;
	char *dup = insert_at(buf, &k, (size_t)(after - buf), old);
	verify_expect(dup, k, "markers", "appears twice");
	oeap_outcome o;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_apply_bytes(def, dup, k, "topk.py", &o, &err), -1);
	assert_null(o.out);
	free(dup);
	free(old);
	oeap_buf_free(&extra);
	free(buf);
}

static void test_older_version_is_upgraded(void **state)
{
	(void)state;
	size_t n;
	char *buf = patched("eras/2025-12_layer_id_capturer.py", &n);
	/* The file carries sglang-oea/2; this definition is a newer one, 3. */
	def->version = 3;
	verify_expect(buf, n, "version", "run `oeapatch apply` to upgrade");
	oeap_outcome o;
	oeap_error err;
	oeap_error_clear(&err);
	int rc = oeap_apply_bytes(def, buf, n, "topk.py", &o, &err);
	def->version = 2;
	assert_int_equal(rc, 0);
	assert_int_equal(o.before, OEAP_STATE_STALE);
	assert_int_equal(o.from_version, 2);
	assert_non_null(strstr(o.out, "oeapatch sglang-oea/3 callsite"));
	assert_null(strstr(o.out, "oeapatch sglang-oea/2 "));
	oeap_outcome_free(&o);
	free(buf);
}

/* A file patched by a newer version of the definition (7) than this one (2):
 * an apply would silently downgrade it. Refused, naming the option. */
static void test_newer_version_is_not_downgraded(void **state)
{
	(void)state;
	size_t n;
	char *buf = patched("eras/2025-12_layer_id_capturer.py", &n);
	char *newer = strdup(buf);
	/* Same bodies, markers of a made-up later version. */
	for (char *p = newer; (p = strstr(p, "sglang-oea/2 ")) != NULL; p++)
		p[11] = '7';
	verify_expect(newer, n, "version", "NEWER than this definition's sglang-oea/2");
	oeap_outcome o;
	oeap_error err;
	oeap_error_clear(&err);
	if (oeap_apply_bytes(def, newer, n, "topk.py", &o, &err) == 0) {
		oeap_outcome_free(&o);
		fail_msg("a patch of version 7 was replaced by version 2 without a word");
	}
	assert_non_null(strstr(err.message, "--downgrade"));
	oeap_error_clear(&err);
	assert_int_equal(oeap_apply_bytes_flags(def, newer, n, "topk.py", OEAP_APPLY_DOWNGRADE, &o, &err), 0);
	assert_int_equal(o.from_version, 7);
	assert_int_equal(o.out_len, n);
	assert_memory_equal(o.out, buf, n);
	oeap_outcome_free(&o);
	free(newer);
	free(buf);
}

static void test_unbound_name_in_callsite(void **state)
{
	(void)state;
	size_t n;
	char *buf = patched("eras/2025-12_layer_id_capturer.py", &n);
	/* Upstream drops the layer_id parameter under the patch: the call site
	 * now passes a name that is no longer bound (the region itself is intact). */
	char *sig = find_line(strstr(buf, "\ndef select_experts("), "    layer_id: Optional[int] = None,");
	size_t l = (size_t)(strchr(sig, '\n') + 1 - sig);
	memmove(sig, sig + l, n - (size_t)(sig - buf) - l + 1);
	n -= l;
	verify_expect(buf, n, "names:callsite", "layer_id");
	verify_expect(buf, n, "content:callsite", "layer_id");
	free(buf);
}

static void test_duplicated_and_nested_markers(void **state)
{
	(void)state;
	size_t n;
	char *buf = patched("eras/2025-03_recorder.py", &n);
	char *begin = find_line(buf, "# >>> oeapatch sglang-oea/2 import");
	char *end = strchr(find_line(buf, "# <<< oeapatch sglang-oea/2 import"), '\n') + 1;
	size_t rlen = (size_t)(end - begin);
	/* duplicated: the import region twice in a row */
	char *dup = malloc(n + rlen + 1);
	memcpy(dup, buf, (size_t)(end - buf));
	memcpy(dup + (end - buf), begin, rlen);
	memcpy(dup + (end - buf) + rlen, end, n - (size_t)(end - buf) + 1);
	verify_expect(dup, n + rlen, "markers", "appears twice");
	oeap_outcome o;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_apply_bytes(def, dup, n + rlen, "topk.py", &o, &err), -1);
	assert_int_equal(err.kind, OEAP_ERR_REGION);
	oeap_error_clear(&err);
	assert_int_equal(oeap_revert_bytes(def, dup, n + rlen, "topk.py", 1, &o, &err), -1);
	free(dup);

	/* nested: drop the import region's end marker, so the call site opens inside it */
	char *nested = strdup(buf);
	char *em = find_line(nested, "# <<< oeapatch sglang-oea/2 import");
	char *eme = strchr(em, '\n') + 1;
	memmove(em, eme, strlen(eme) + 1);
	verify_expect(nested, strlen(nested), "markers", "nested");
	free(nested);
	free(buf);
}

/* Copies buf with `ins` inserted at offset `at` (caller frees; *n grows). */
static char *insert_at(const char *buf, size_t *n, size_t at, const char *ins)
{
	size_t k = strlen(ins);
	char *s = malloc(*n + k + 1);
	assert_non_null(s);
	memcpy(s, buf, at);
	memcpy(s + at, ins, k);
	memcpy(s + at + k, buf + at, *n - at);
	*n += k;
	s[*n] = '\0';
	return s;
}

static void test_marker_in_string_is_not_ours(void **state)
{
	(void)state;
	size_t n;
	char *buf = patched("eras/2024-12_positional.py", &n);
	/* Turn the import region's markers and body into one string literal:
	 * those lines are the string's text now, so the import region is missing. */
	char *begin = find_line(buf, "# >>> oeapatch sglang-oea/2 import");
	char *end = strchr(find_line(buf, "# <<< oeapatch sglang-oea/2 import"), '\n');
	size_t off_b = (size_t)(begin - buf), off_e = (size_t)(end - buf);
	char *s = malloc(n + 16);
	memcpy(s, buf, off_b);
	memcpy(s + off_b, "X = '''\n", 8);
	memcpy(s + off_b + 8, buf + off_b, off_e - off_b);
	memcpy(s + off_b + 8 + (off_e - off_b), "\n'''", 4);
	memcpy(s + off_b + 12 + (off_e - off_b), buf + off_e, n - off_e + 1);
	verify_expect(s, n + 12, "regions", "missing: import");
	free(s);
	free(buf);
}

/* A never-patched file whose docstring and string hold marker-shaped lines
 * (documentation of oeapatch, say): apply patches it normally, and neither
 * revert nor --refresh ever removes a line from the strings. */
static void test_marker_lines_in_strings_are_text(void **state)
{
	(void)state;
	size_t n;
	char *in0 = tu_read("tests/fixtures/eras/2025-08_topk_config.py", &n);
	static const char doc[] =
	    "\"\"\"Applied by hand:\n"
	    "    # >>> oeapatch sglang-oea/2 callsite sha256:0123456789abcdef >>>\n"
	    "    # <<< oeapatch sglang-oea/2 callsite <<<\n"
	    "\"\"\"\n"
	    "NOTE = '\\\n"
	    "# >>> oeapatch sglang-oea/2 import sha256:0123456789abcdef >>>\\n\\\n"
	    "# <<< oeapatch sglang-oea/2 import <<<'\n";
	char *in = insert_at(in0, &n, (size_t)(find_line(in0, "import torch") - in0), doc);
	free(in0);
	oeap_outcome o, back, refreshed, noop;
	oeap_error err;
	oeap_error_clear(&err);
	if (oeap_apply_bytes(def, in, n, "topk.py", &o, &err))
		fail_msg("apply: %s: %s", err.where, err.message);
	assert_int_equal(o.before, OEAP_STATE_CLEAN);
	assert_true(o.changed);
	assert_non_null(strstr(o.out, doc));
	assert_int_equal(oeap_revert_bytes(def, o.out, o.out_len, "topk.py", 0, &back, &err), 0);
	assert_int_equal(back.out_len, n);
	assert_memory_equal(back.out, in, n);
	assert_int_equal(oeap_apply_bytes_flags(def, o.out, o.out_len, "topk.py", OEAP_APPLY_REFRESH, &refreshed, &err),
	                 0);
	assert_int_equal(refreshed.out_len, o.out_len);
	assert_memory_equal(refreshed.out, o.out, o.out_len);
	/* not applied: revert leaves the strings alone */
	assert_int_equal(oeap_revert_bytes(def, in, n, "topk.py", 0, &noop, &err), 0);
	assert_false(noop.changed);
	assert_int_equal(noop.out_len, n);
	assert_memory_equal(noop.out, in, n);
	oeap_outcome_free(&o);
	oeap_outcome_free(&back);
	oeap_outcome_free(&refreshed);
	oeap_outcome_free(&noop);
	free(in);
}

/* Region hashes are over normalised line ends: a file patched with CRLF and
 * committed with core.autocrlf=true (git stores LF) still verifies, and the
 * other way round. */
static void test_crlf_and_lf_are_the_same_region(void **state)
{
	(void)state;
	size_t n;
	char *crlf = patched("variants/crlf.py", &n);
	char *lf = malloc(n + 1);
	size_t m = 0;
	for (size_t i = 0; i < n; i++)
		if (!(crlf[i] == '\r' && i + 1 < n && crlf[i + 1] == '\n'))
			lf[m++] = crlf[i];
	oeap_report rep;
	assert_int_equal(oeap_verify_bytes(def, lf, m, "topk.py", &rep), 0);
	for (size_t i = 0; i < rep.n; i++)
		if (!rep.checks[i].ok)
			fail_msg("LF copy of a CRLF patch: %s: %s", rep.checks[i].name, rep.checks[i].detail);
	oeap_report_free(&rep);

	size_t ln;
	char *lfp = patched("eras/2025-08_topk_config.py", &ln);
	char *back = malloc(2 * ln + 1);
	size_t k = 0;
	for (size_t i = 0; i < ln; i++) {
		if (lfp[i] == '\n')
			back[k++] = '\r';
		back[k++] = lfp[i];
	}
	assert_int_equal(oeap_verify_bytes(def, back, k, "topk.py", &rep), 0);
	for (size_t i = 0; i < rep.n; i++)
		if (!rep.checks[i].ok)
			fail_msg("CRLF checkout of an LF patch: %s: %s", rep.checks[i].name, rep.checks[i].detail);
	oeap_report_free(&rep);
	free(back);
	free(lfp);
	free(lf);
	free(crlf);
}

/* "Bound" is bound on every path that reaches the call site. */
static void test_name_bound_on_one_path_only(void **state)
{
	(void)state;
	size_t n;
	char *in0 = tu_read("tests/fixtures/eras/2025-08_topk_config.py", &n);
	size_t at = (size_t)(find_line(in0, "    num_routed_topk = top_k - num_fused_shared_experts") - in0);
	size_t n1 = n, n2 = n;
	/* layer_id is a candidate argument this era does not have */
	char *one = insert_at(in0, &n1, at, "    if hidden_states is None: layer_id = 0\n");
	char *all = insert_at(in0, &n2, at, "    layer_id = 0 if hidden_states is None else 1\n");
	oeap_outcome o;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_apply_bytes(def, one, n1, "topk.py", &o, &err), 0);
	assert_null(strstr(o.out, "layer_id=layer_id"));
	oeap_outcome_free(&o);
	assert_int_equal(oeap_apply_bytes(def, all, n2, "topk.py", &o, &err), 0);
	assert_non_null(strstr(o.out, "layer_id=layer_id"));

	/* The same call site over the one-path version: verify names it. */
	char *p = strstr(o.out, "    layer_id = 0 if hidden_states is None else 1\n");
	assert_non_null(p);
	memcpy(p, "    if hidden_states is None: layer_id = 0      \n", 49);
	verify_expect(o.out, o.out_len, "names:callsite", "layer_id");
	oeap_outcome_free(&o);
	free(one);
	free(all);
	free(in0);
}

/* `except E as NAME` deletes NAME when the handler ends, even when the try's
 * body (or anything before it) bound it: passing it raises UnboundLocalError. */
static void test_handler_name_is_unbound_after_it(void **state)
{
	(void)state;
	size_t n;
	char *in0 = tu_read("tests/fixtures/eras/2025-08_topk_config.py", &n);
	size_t at = (size_t)(find_line(in0, "    num_routed_topk = top_k - num_fused_shared_experts") - in0);
	static const char plain[] = "    try:\n"
	                            "        layer_id = hidden_states.layer_id\n"
	                            "    except AttributeError:\n"
	                            "        layer_id = 0\n";
	static const char as_name[] = "    try:\n"
	                              "        layer_id = hidden_states.layer_id\n"
	                              "    except AttributeError as layer_id:\n"
	                              "        layer_id = 0\n";
	size_t n1 = n, n2 = n;
	char *bound = insert_at(in0, &n1, at, plain);
	char *unbound = insert_at(in0, &n2, at, as_name);
	oeap_outcome o;
	oeap_error err;
	oeap_error_clear(&err);
	if (oeap_apply_bytes(def, unbound, n2, "topk.py", &o, &err))
		fail_msg("apply: %s", err.message);
	assert_null(strstr(o.out, "layer_id=layer_id"));
	oeap_outcome_free(&o);
	if (oeap_apply_bytes(def, bound, n1, "topk.py", &o, &err))
		fail_msg("apply: %s", err.message);
	assert_non_null(strstr(o.out, "layer_id=layer_id"));

	/* The same call site once upstream names the exception layer_id: verify names it. */
	char *p = strstr(o.out, plain);
	assert_non_null(p);
	size_t off = (size_t)(p - o.out), vn = o.out_len;
	memmove(p, p + strlen(plain), o.out_len - off - strlen(plain));
	vn -= strlen(plain);
	char *renamed = insert_at(o.out, &vn, off, as_name);
	verify_expect(renamed, vn, "names:callsite", "layer_id");
	free(renamed);
	oeap_outcome_free(&o);
	free(bound);
	free(unbound);
	free(in0);
}

/* A chain all of whose branches return: a call site after it never runs. */
static void test_chain_that_always_returns(void **state)
{
	(void)state;
	static const char text[] = "import torch\n"
	                           "\n"
	                           "def select_experts(hidden_states, router_logits, top_k):\n"
	                           "    if top_k > 1:\n"
	                           "        topk_weights, topk_ids = torch.topk(router_logits, top_k)\n"
	                           "        return topk_weights, topk_ids\n"
	                           "    else:\n"
	                           "        topk_weights, topk_ids = torch.topk(router_logits, 1)\n"
	                           "        return topk_weights, topk_ids\n";
	oeap_outcome o;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_apply_bytes(def, text, sizeof(text) - 1, "topk.py", &o, &err), -1);
	assert_null(o.out);
	if (err.kind != OEAP_ERR_ANCHOR || !strstr(err.message, "dead code"))
		fail_msg("got %d: %s", err.kind, err.message);
	/* one branch falling through is enough for the place to be reached */
	char *live = strdup(text);
	memcpy(strstr(live, "        return topk_weights, topk_ids\n    else"), "        pass                 ", 29);
	oeap_error_clear(&err);
	if (oeap_apply_bytes(def, live, strlen(live), "topk.py", &o, &err))
		fail_msg("apply: %s", err.message);
	oeap_outcome_free(&o);
	free(live);
}

/* Literal values in a call-site line are not names (`x=None` is not "unbound None"). */
static void test_literals_are_not_unbound_names(void **state)
{
	(void)state;
	size_t n;
	char *buf = patched("eras/2025-08_topk_config.py", &n);
	char *l = strstr(strstr(buf, "# >>> oeapatch sglang-oea/2 callsite"), "            top_k=top_k,\n");
	assert_non_null(l);
	memcpy(l, "            top_k=None ,\n", 24);
	oeap_report rep;
	assert_int_equal(oeap_verify_bytes(def, buf, n, "topk.py", &rep), 0);
	int seen = 0;
	for (size_t i = 0; i < rep.n; i++)
		if (strcmp(rep.checks[i].name, "names:callsite") == 0) {
			seen = 1;
			if (!rep.checks[i].ok)
				fail_msg("names:callsite: %s", rep.checks[i].detail);
		}
	assert_true(seen);
	oeap_report_free(&rep);
	free(buf);
}

static void test_revert_not_applied_is_noop(void **state)
{
	(void)state;
	size_t n;
	char *in = tu_read("tests/fixtures/eras/2026-02_post_process.py", &n);
	oeap_outcome o;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_revert_bytes(def, in, n, "topk.py", 0, &o, &err), 0);
	assert_int_equal(o.before, OEAP_STATE_CLEAN);
	assert_false(o.changed);
	assert_memory_equal(o.out, in, n);
	oeap_outcome_free(&o);
	free(in);
}

/* The first failure is the one reported: later ones are usually its
 * consequences, and a message about them sends the user the wrong way. */
static void test_first_error_wins(void **state)
{
	(void)state;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_fail(&err, OEAP_ERR_ANCHOR, "anchor 'routing_chain'", 7, "not found: %s", "chain"), -1);
	assert_int_equal(oeap_fail(&err, OEAP_ERR_INTERNAL, "plan", 0, "out of memory"), -1);
	assert_int_equal(err.kind, OEAP_ERR_ANCHOR);
	assert_string_equal(err.where, "anchor 'routing_chain'");
	assert_int_equal(err.line, 7);
	assert_string_equal(err.message, "not found: chain");
	/* through the pipeline: a file that fails parsing reports the parse, not a later step */
	oeap_outcome o;
	oeap_error_clear(&err);
	static const char py2[] = "import torch\nprint 'x'\n";
	assert_int_equal(oeap_apply_bytes(def, py2, sizeof(py2) - 1, "topk.py", &o, &err), -1);
	assert_int_equal(err.kind, OEAP_ERR_INPUT);
	assert_int_equal(err.line, 2);
}

/* Copies the real definition into `dir`/def (the shared core to `dir`/binding-core), with
 * `callsite` as the call-site template. */
static oeap_patchdef *def_with_callsite(const char *dir, const char *callsite)
{
	static const char *files[] = {"patch.ini", "adapter.py", "anchors/binds_pair.scm", "anchors/imports.scm",
	                              "anchors/routing_chain.scm", "anchors/select_experts.scm",
	                              "templates/import.py", "templates/callsite.py"};
	char rel[256], path[512];
	snprintf(path, sizeof(path), "%s/def", dir);
	tu_copy_core(path);
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		size_t n;
		snprintf(rel, sizeof(rel), "patches/sglang-oea/%s", files[i]);
		char *text = tu_read(rel, &n);
		snprintf(path, sizeof(path), "%s/def/%s", dir, files[i]);
		if (strcmp(files[i], "templates/callsite.py") == 0)
			tu_write(path, callsite, strlen(callsite));
		else
			tu_write(path, text, n);
		free(text);
	}
	oeap_patchdef *d = NULL;
	oeap_error err;
	oeap_error_clear(&err);
	snprintf(path, sizeof(path), "%s/def", dir);
	if (oeap_patchdef_load(path, &d, &err))
		fail_msg("load %s: %s: %s", path, err.where, err.message);
	return d;
}

/* apply reads its own result back before returning it: a definition whose
 * call site does not parse (an unclosed parenthesis) must give an error and
 * no bytes, never a file that fails at import. */
static void test_apply_checks_its_own_result(void **state)
{
	(void)state;
	char *dir = tu_tmpdir();
	oeap_patchdef *broken = def_with_callsite(dir, "if _oeapatch_oea.ENABLED:\n"
	                                               "    topk_weights, topk_ids = _oeapatch_oea.route(\n"
	                                               "        {{args}}\n");
	size_t n;
	char *in = tu_read("tests/fixtures/eras/2025-08_topk_config.py", &n);
	oeap_outcome o;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_apply_bytes(broken, in, n, "topk.py", &o, &err), -1);
	assert_null(o.out);
	assert_false(o.changed);
	if (!strstr(err.message, "does not verify") || !strstr(err.message, "parse"))
		fail_msg("got: %s: %s", err.where, err.message);
	oeap_patchdef_free(broken);
	free(in);
	tu_rmtree(dir);
	free(dir);
}

/* A real era padded with comment lines to OEAP_PYSOURCE_MAX_BYTES + 1 bytes: apply
 * and revert refuse it as bad input before any other work (no bytes out),
 * naming its size; the same era unpadded still applies. */
static void test_size_limit_refused(void **state)
{
	(void)state;
	size_t n;
	char *era = tu_read("tests/fixtures/eras/2025-08_topk_config.py", &n);
	size_t len = OEAP_PYSOURCE_MAX_BYTES + 1;
	char *big = malloc(len);
	assert_non_null(big);
	memcpy(big, era, n);
	for (size_t i = n; i < len; i++)
		big[i] = (i - n) % 2 ? '\n' : '#';
	big[len - 1] = '\n';
	char size[32];
	snprintf(size, sizeof(size), "%zu bytes", len);
	oeap_outcome o;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_apply_bytes(def, big, len, "big.py", &o, &err), -1);
	assert_int_equal(err.kind, OEAP_ERR_INPUT);
	assert_string_equal(err.where, "big.py");
	assert_non_null(strstr(err.message, size));
	assert_non_null(strstr(err.message, "limit"));
	assert_null(o.out);
	oeap_error_clear(&err);
	assert_int_equal(oeap_revert_bytes(def, big, len, "big.py", 0, &o, &err), -1);
	assert_int_equal(err.kind, OEAP_ERR_INPUT);
	assert_non_null(strstr(err.message, size));
	assert_null(o.out);
	oeap_error_clear(&err);
	assert_int_equal(oeap_apply_bytes(def, era, n, "era.py", &o, &err), 0);
	assert_true(o.changed);
	oeap_outcome_free(&o);
	free(big);
	free(era);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_verify_not_applied),
		cmocka_unit_test(test_edited_region),
		cmocka_unit_test(test_moved_callsite),
		cmocka_unit_test(test_callsite_moved_below),
		cmocka_unit_test(test_callsite_swapped_same_length),
		cmocka_unit_test(test_unknown_region_of_ours),
		cmocka_unit_test(test_older_version_is_upgraded),
		cmocka_unit_test(test_newer_version_is_not_downgraded),
		cmocka_unit_test(test_unbound_name_in_callsite),
		cmocka_unit_test(test_duplicated_and_nested_markers),
		cmocka_unit_test(test_marker_in_string_is_not_ours),
		cmocka_unit_test(test_marker_lines_in_strings_are_text),
		cmocka_unit_test(test_crlf_and_lf_are_the_same_region),
		cmocka_unit_test(test_name_bound_on_one_path_only),
		cmocka_unit_test(test_handler_name_is_unbound_after_it),
		cmocka_unit_test(test_chain_that_always_returns),
		cmocka_unit_test(test_literals_are_not_unbound_names),
		cmocka_unit_test(test_revert_not_applied_is_noop),
		cmocka_unit_test(test_first_error_wins),
		cmocka_unit_test(test_apply_checks_its_own_result),
		cmocka_unit_test(test_size_limit_refused),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
