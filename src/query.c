/* query.c - the query API (query.h): each query file goes to the subset's own matcher (qsubset.c) when it
 * is written in the subset, else to tree-sitter's engine (tsquery.c); the caller sees the same nodes. */
#include "query.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qsubset.h"
#include "tsquery.h"

int oeap_query_new(const char *source, size_t len, const char *what, oeap_query **out,
                   oeap_error *err)
{
	*out = NULL;
	if ((*out = oeap_qsubset_read(source, len, what)) != NULL)
		return 0;
	return oeap_query_new_treesitter(source, len, what, out, err);
}

int oeap_query_new_treesitter(const char *source, size_t len, const char *what, oeap_query **out,
                              oeap_error *err)
{
	return oeap_tsquery_new(source, len, what, out, err);
}

int oeap_query_new_many(const char *const *sources, const size_t *lens, const char *const *whats, size_t n,
                        oeap_query **out)
{
	for (size_t i = 0; i < n; i++)
		out[i] = NULL;
	/* Every one in the subset: no tree-sitter compile at all. */
	size_t own = 0;
	while (own < n && (out[own] = oeap_qsubset_read(sources[own], lens[own], whats[own])) != NULL)
		own++;
	if (n && own == n)
		return 0;
	for (size_t i = 0; i < own; i++) {
		oeap_query_free(out[i]);
		out[i] = NULL;
	}
	return oeap_tsquery_new_many(sources, lens, whats, n, out);
}

void oeap_query_free(oeap_query *q)
{
	if (!q)
		return;
	oeap_qsubset_free_own(q);
	if (q->q && (!q->refs || --*q->refs == 0)) {
		ts_query_delete(q->q);
		free(q->refs);
	}
	free(q);
}

int oeap_query_uses_treesitter(const oeap_query *q)
{
	return q->q != NULL;
}

int oeap_query_check_structure(const oeap_query *q, oeap_error *err)
{
	if (q->q)
		return 0; /* compiled by tree-sitter, checked then */
	oeap_query *ts = NULL;
	if (oeap_query_new_treesitter(q->source, q->len, q->what, &ts, err))
		return -1;
	oeap_query_free(ts);
	return 0;
}

int oeap_query_has_capture(const oeap_query *q, const char *capture)
{
	if (!q->q)
		return oeap_qsubset_capture(q, capture) != QNONE;
	return oeap_tsquery_capture(q, capture) != UINT32_MAX;
}

static int node_cmp(const void *a, const void *b)
{
	const TSNode *x = a, *y = b;
	uint32_t xs = ts_node_start_byte(*x), ys = ts_node_start_byte(*y);
	if (xs != ys)
		return xs < ys ? -1 : 1;
	uint32_t xe = ts_node_end_byte(*x), ye = ts_node_end_byte(*y);
	if (xe != ye)
		return xe > ye ? -1 : 1; /* outer node first */
	return (int)ts_node_symbol(*x) - (int)ts_node_symbol(*y);
}

int oeap_query_collect(const oeap_query *q, const oeap_pysource *src, TSNode scope,
                       const char *capture, TSNode **nodes, size_t *count, oeap_error *err)
{
	int error = 0;
	uint32_t cap_id = UINT32_MAX;
	TSNode *arr = NULL;
	size_t n = 0;

	*nodes = NULL;
	*count = 0;
	cap_id = q->q ? oeap_tsquery_capture(q, capture) : oeap_qsubset_capture(q, capture);
	if (cap_id == UINT32_MAX)
		return oeap_fail(err, OEAP_ERR_DEFINITION, q->what, 0, "the query has no capture @%s", capture);
	if (!q->q) {
		if (oeap_qsubset_collect(q, src, scope, cap_id, &arr, &n, err)) {
			error = -1;
			goto done;
		}
		goto sort;
	}
	if (oeap_tsquery_collect(q, src, scope, cap_id, &arr, &n, err)) {
		error = -1;
		goto done;
	}
sort:
	/* Matches arrive in pattern order per position, and two patterns may
	 * capture one node: callers want source order, each node once. */
	if (n > 1)
		qsort(arr, n, sizeof(*arr), node_cmp);
	size_t u = 0;
	for (size_t i = 0; i < n; i++)
		if (u == 0 || !ts_node_eq(arr[u - 1], arr[i]))
			arr[u++] = arr[i];
	n = u;
	*nodes = arr;
	*count = n;
	arr = NULL;
done:
	free(arr);
	return error;
}

