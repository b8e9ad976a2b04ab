/* tsquery.c - queries outside the subset: tree-sitter's compiler and query cursor (tsquery.h). */
#include "tsquery.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "predicate.h"

static const char *query_error_name(TSQueryError e)
{
	switch (e) {
	case TSQueryErrorSyntax: return "syntax error";
	case TSQueryErrorNodeType: return "unknown node type";
	case TSQueryErrorField: return "unknown field";
	case TSQueryErrorCapture: return "unknown capture";
	case TSQueryErrorStructure: return "impossible pattern structure";
	case TSQueryErrorLanguage: return "language mismatch";
	default: return "error";
	}
}

int oeap_tsquery_new(const char *source, size_t len, const char *what, oeap_query **out, oeap_error *err)
{
	uint32_t off = 0;
	TSQueryError qe = TSQueryErrorNone;
	*out = NULL;
	oeap_query *q = calloc(1, sizeof(*q));
	if (!q)
		return oeap_fail(err, OEAP_ERR_INTERNAL, what, 0, "out of memory");
	q->q = ts_query_new(tree_sitter_python(), source, (uint32_t)len, &off, &qe);
	if (!q->q) {
		free(q);
		return oeap_fail(err, OEAP_ERR_DEFINITION, what, 0, "query does not compile: %s at byte %u",
		                 query_error_name(qe), off);
	}
	snprintf(q->what, sizeof(q->what), "%s", what);
	q->first = 0;
	q->end = ts_query_pattern_count(q->q);
	/* Refuse predicates we would silently ignore. */
	for (uint32_t p = 0; p < ts_query_pattern_count(q->q); p++) {
		uint32_t nsteps = 0;
		const TSQueryPredicateStep *st = ts_query_predicates_for_pattern(q->q, p, &nsteps);
		for (uint32_t i = 0; i < nsteps; i++) {
			if (i > 0 && st[i - 1].type != TSQueryPredicateStepTypeDone)
				continue;
			uint32_t l;
			const char *name = ts_query_string_value_for_id(q->q, st[i].value_id, &l);
			if (strcmp(name, "eq?") && strcmp(name, "not-eq?") && strcmp(name, "match?") &&
			    strcmp(name, "not-match?")) {
				/* `name` lives in the query: format the message before freeing it. */
				int rc = oeap_fail(err, OEAP_ERR_DEFINITION, what, 0, "unsupported predicate #%s in pattern %u",
				                   name, p);
				ts_query_delete(q->q); /* its own: nothing else shares it yet */
				free(q);
				return rc;
			}
		}
	}
	*out = q;
	return 0;
}

/* 1 when every predicate of pattern p is one that predicate_holds() (below) evaluates. */
static int predicates_supported(const TSQuery *tq, uint32_t p)
{
	uint32_t nsteps = 0;
	const TSQueryPredicateStep *st = ts_query_predicates_for_pattern(tq, p, &nsteps);
	for (uint32_t i = 0; i < nsteps; i++) {
		if (i > 0 && st[i - 1].type != TSQueryPredicateStepTypeDone)
			continue;
		uint32_t l;
		const char *name = ts_query_string_value_for_id(tq, st[i].value_id, &l);
		if (strcmp(name, "eq?") && strcmp(name, "not-eq?") && strcmp(name, "match?") && strcmp(name, "not-match?"))
			return 0;
	}
	return 1;
}

/* Written after each source in oeap_query_new_many(): a pattern that must
 * start exactly where it is written, which it does only when the source
 * before it closed every parenthesis, bracket and string it opened. Not a
 * wildcard: tree-sitter 0.24's ts_query_disable_pattern() leaves the count of
 * wildcard-rooted patterns as it was, and the cursor would then take other
 * patterns for wildcards. An ERROR node never matches in a file we accept. */
static const char SEPARATOR[] = "\n(ERROR)\n";

int oeap_tsquery_new_many(const char *const *sources, const size_t *lens, const char *const *whats, size_t n,
                          oeap_query **out)
{
	int error = -1;
	size_t total = 0;
	size_t *sep = NULL;
	char *all = NULL;
	TSQuery *tq = NULL;
	unsigned *refs = NULL;

	for (size_t i = 0; i < n; i++)
		total += lens[i] + sizeof(SEPARATOR) - 1;
	if (!n || total > UINT32_MAX || !(sep = calloc(n, sizeof(*sep))) || !(all = malloc(total)) ||
	    !(refs = malloc(sizeof(*refs))))
		goto done;
	for (size_t i = 0, at = 0; i < n; i++) {
		memcpy(all + at, sources[i], lens[i]);
		at += lens[i];
		memcpy(all + at, SEPARATOR, sizeof(SEPARATOR) - 1);
		sep[i] = at + 1; /* its '(' */
		at += sizeof(SEPARATOR) - 1;
	}
	uint32_t off = 0;
	TSQueryError qe = TSQueryErrorNone;
	if (!(tq = ts_query_new(tree_sitter_python(), all, (uint32_t)total, &off, &qe)))
		goto done;
	/* Source i's patterns are those before separator i, which must start a
	 * pattern of its own exactly where it was written: else source i left
	 * something open that only the text after it closed, and the sources
	 * compile together but not each alone. The separators are disabled:
	 * they never match. */
	uint32_t npat = ts_query_pattern_count(tq), p = 0;
	for (size_t i = 0; i < n; i++) {
		if (!(out[i] = calloc(1, sizeof(**out))))
			goto done;
		out[i]->q = tq;
		out[i]->refs = refs;
		out[i]->first = p;
		snprintf(out[i]->what, sizeof(out[i]->what), "%s", whats[i]);
		for (; p < npat && ts_query_start_byte_for_pattern(tq, p) < sep[i]; p++)
			if (!predicates_supported(tq, p))
				goto done;
		out[i]->end = p;
		if (p == npat || ts_query_start_byte_for_pattern(tq, p) != sep[i])
			goto done;
		ts_query_disable_pattern(tq, p++);
	}
	if (p != npat)
		goto done;
	*refs = (unsigned)n;
	error = 0;
done:
	if (error) {
		for (size_t i = 0; i < n; i++) {
			free(out[i]);
			out[i] = NULL;
		}
		if (tq)
			ts_query_delete(tq);
		free(refs);
	}
	free(all);
	free(sep);
	return error;
}

uint32_t oeap_tsquery_capture(const oeap_query *q, const char *capture)
{
	for (uint32_t i = 0; i < ts_query_capture_count(q->q); i++) {
		uint32_t l;
		if (strcmp(ts_query_capture_name_for_id(q->q, i, &l), capture) != 0)
			continue;
		for (uint32_t p = q->first; p < q->end; p++)
			if (ts_query_capture_quantifier_for_id(q->q, p, i) != TSQuantifierZero)
				return i;
		return UINT32_MAX;
	}
	return UINT32_MAX;
}

/* The text of the first node captured as `id` in the match; *set says whether the match captured it
 * (NULL with *set 1: memory ran out). */
static char *capture_text(const oeap_pysource *src, const TSQueryMatch *m, uint32_t id, int *set)
{
	*set = 0;
	for (uint16_t i = 0; i < m->capture_count; i++)
		if (m->captures[i].index == id) {
			*set = 1;
			return oeap_pysource_text(src, m->captures[i].node);
		}
	return NULL;
}

/* Evaluates one predicate (steps [0..n) excluding the Done step) by the rule both engines share
 * (predicate.h). -1 on error. */
static int predicate_holds(const oeap_query *q, const oeap_pysource *src, const TSQueryMatch *m,
                           const TSQueryPredicateStep *st, uint32_t n, oeap_error *err)
{
	uint32_t l;
	const char *op = ts_query_string_value_for_id(q->q, st[0].value_id, &l);
	if (n != 3 || st[1].type != TSQueryPredicateStepTypeCapture)
		return oeap_fail(err, OEAP_ERR_DEFINITION, q->what, 0,
		                 "#%s takes a capture and a string or capture", op);
	int negate = strncmp(op, "not-", 4) == 0, is_match = strstr(op, "match?") != NULL;
	int left_set = 0, right_set = 1;
	char *left = capture_text(src, m, st[1].value_id, &left_set), *right;
	if (st[2].type == TSQueryPredicateStepTypeCapture)
		right = capture_text(src, m, st[2].value_id, &right_set);
	else
		right = strdup(ts_query_string_value_for_id(q->q, st[2].value_id, &l));
	int holds = oeap_predicate_eval(q->what, is_match, negate, left_set, left, right_set, right, err);
	free(left);
	free(right);
	return holds;
}

static int match_holds(const oeap_query *q, const oeap_pysource *src, const TSQueryMatch *m,
                       oeap_error *err)
{
	uint32_t nsteps = 0;
	const TSQueryPredicateStep *st = ts_query_predicates_for_pattern(q->q, m->pattern_index, &nsteps);
	uint32_t start = 0;
	for (uint32_t i = 0; i < nsteps; i++) {
		if (st[i].type != TSQueryPredicateStepTypeDone)
			continue;
		int r = predicate_holds(q, src, m, st + start, i - start, err);
		if (r <= 0)
			return r;
		start = i + 1;
	}
	return 1;
}

int oeap_tsquery_collect(const oeap_query *q, const oeap_pysource *src, TSNode scope, uint32_t cap_id, TSNode **nodes,
                         size_t *count, oeap_error *err)
{
	int error = 0;
	uint32_t in_id;
	TSNode *arr = NULL;
	size_t n = 0, cap = 0;
	TSQueryCursor *cur = NULL;

	in_id = oeap_tsquery_capture(q, "in");
	if (!(cur = ts_query_cursor_new())) {
		error = oeap_fail(err, OEAP_ERR_INTERNAL, q->what, 0, "out of memory");
		goto done;
	}
	ts_query_cursor_exec(cur, q->q, scope);
	/* With an @in capture, a match counts only when its @in node is `scope`
	 * itself. The cursor sees only `scope` and the nodes below it, and a
	 * pattern's captures are its root or nodes below that root: a match
	 * whose @in is `scope` starts at `scope`, at depth 0. Matches starting
	 * deeper could never count, so the cursor need not look for them; it
	 * still descends as far as the patterns started at `scope` reach. On a
	 * module-scoped anchor that is the module's top-level statements instead
	 * of every node of the file (docs/performance.md). */
	if (in_id != UINT32_MAX)
		ts_query_cursor_set_max_start_depth(cur, 0);
	TSQueryMatch m;
	while (ts_query_cursor_next_match(cur, &m)) {
		/* a pattern of another query compiled with this one */
		if (m.pattern_index < q->first || m.pattern_index >= q->end)
			continue;
		int r = match_holds(q, src, &m, err);
		if (r < 0) {
			error = -1;
			goto done;
		}
		if (!r)
			continue;
		if (in_id != UINT32_MAX) {
			int in_scope = 0;
			for (uint16_t i = 0; i < m.capture_count; i++)
				in_scope |= m.captures[i].index == in_id && ts_node_eq(m.captures[i].node, scope);
			if (!in_scope)
				continue;
		}
		for (uint16_t i = 0; i < m.capture_count; i++) {
			if (m.captures[i].index != cap_id)
				continue;
			TSNode node = m.captures[i].node;
			if (n == cap) {
				cap = cap ? cap * 2 : 4;
				TSNode *p = realloc(arr, cap * sizeof(*arr));
				if (!p) {
					error = oeap_fail(err, OEAP_ERR_INTERNAL, q->what, 0, "out of memory");
					goto done;
				}
				arr = p;
			}
			arr[n++] = node;
		}
	}
	*nodes = arr;
	*count = n;
	arr = NULL;
done:
	free(arr);
	if (cur)
		ts_query_cursor_delete(cur);
	return error;
}
