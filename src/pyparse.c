/* pyparse.c - bytes parsed into a oeap_pysource, from scratch or from an earlier parse (pyparse.h). */
#include "pyparse.h"

#include <stdlib.h>
#include <string.h>

#include "py3check.h"

/*
 * The first ERROR or MISSING node, in source order. ts_node_has_error() says
 * that a subtree holds one, not which node it is: it only tells which
 * subtrees are worth walking, and the walk finds the node to name.
 */
static int visit_error(TSNode n, void *user)
{
	if (ts_node_is_missing(n) || strcmp(ts_node_type(n), "ERROR") == 0) {
		*(TSNode *)user = n;
		return OEAP_PYSOURCE_WALK_STOP;
	}
	return ts_node_has_error(n) ? OEAP_PYSOURCE_WALK_DESCEND : OEAP_PYSOURCE_WALK_SKIP;
}

static int find_error(TSNode node, TSNode *bad)
{
	return oeap_pysource_walk(node, visit_error, bad) == OEAP_PYSOURCE_WALK_STOP;
}

/* Row and byte column of an offset relative to the parsed text (after the BOM). */
static TSPoint point_at(const char *text, size_t off)
{
	TSPoint p = {0, 0};
	size_t ls = 0;
	for (const char *q = text; (q = memchr(q, '\n', off - (size_t)(q - text))) != NULL; q++) {
		p.row++;
		ls = (size_t)(q - text) + 1;
	}
	p.column = (uint32_t)(off - ls);
	return p;
}

/* What oeap_pysource_parse_inserted() parses from: the original and where the
 * insertions went (offsets into the new text). */
typedef struct inserted {
	const oeap_pysource *old;
	const size_t *at, *len;
	size_t n;
} inserted;

static int parse_with(const char *buf, size_t len, const char *what, TSTree *old_tree, const inserted *ins,
                      oeap_pysource **out, oeap_error *err);

int oeap_pysource_parse_inserted(const oeap_pysource *old, const char *buf, size_t len, const size_t *ins_at,
                            const size_t *ins_len, size_t n, const char *what, oeap_pysource **out,
                            oeap_error *err)
{
	size_t bom = len >= 3 && memcmp(buf, "\xef\xbb\xbf", 3) == 0 ? 3 : 0;
	if (bom != old->bom)
		return oeap_pysource_parse(buf, len, what, out, err);
	TSTree *t = ts_tree_copy(old->tree);
	if (!t)
		return oeap_fail(err, OEAP_ERR_INTERNAL, what, 0, "out of memory");
	const char *text = buf + bom;
	for (size_t i = 0; i < n; i++) {
		/* Edits in ascending order, each in the coordinates left by the ones before. */
		size_t at = ins_at[i] - bom;
		TSInputEdit e;
		e.start_byte = e.old_end_byte = (uint32_t)at;
		e.new_end_byte = (uint32_t)(at + ins_len[i]);
		e.start_point = e.old_end_point = point_at(text, at);
		e.new_end_point = point_at(text, at + ins_len[i]);
		ts_tree_edit(t, &e);
	}
	inserted in = {old, ins_at, ins_len, n};
	int rc = parse_with(buf, len, what, t, &in, out, err);
	ts_tree_delete(t);
	return rc;
}

int oeap_pysource_parse_edits(const oeap_pysource *old, const char *buf, size_t len, const oeap_pysource_edit *edits, size_t n,
                         const char *what, oeap_pysource **out, oeap_error *err)
{
	size_t bom = len >= 3 && memcmp(buf, "\xef\xbb\xbf", 3) == 0 ? 3 : 0;
	if (bom != old->bom)
		return oeap_pysource_parse(buf, len, what, out, err);
	TSTree *t = ts_tree_copy(old->tree);
	if (!t)
		return oeap_fail(err, OEAP_ERR_INTERNAL, what, 0, "out of memory");
	const char *text = buf + bom, *otext = old->buf + bom;
	for (size_t i = 0; i < n; i++) {
		/* Ascending edits, each in the coordinates the ones before left:
		 * the text before it is already the new text's, the text after it
		 * still the old one's. The BOM is the same in both: no edit starts
		 * inside it (a line diff may say line 1 changed). */
		size_t os = edits[i].old_start > bom ? edits[i].old_start - bom : 0;
		size_t oe = edits[i].old_end > bom ? edits[i].old_end - bom : 0;
		size_t ns = edits[i].new_start > bom ? edits[i].new_start - bom : 0;
		size_t ne = edits[i].new_end > bom ? edits[i].new_end - bom : 0;
		TSInputEdit e;
		e.start_byte = (uint32_t)ns;
		e.old_end_byte = (uint32_t)(ns + (oe - os));
		e.new_end_byte = (uint32_t)ne;
		e.start_point = point_at(text, ns);
		/* Where the old end was: as many rows further as the removed bytes
		 * hold line ends, the column counted from the last of them. */
		e.old_end_point = e.start_point;
		for (size_t k = os; k < oe; k++) {
			if (otext[k] == '\n') {
				e.old_end_point.row++;
				e.old_end_point.column = 0;
			} else {
				e.old_end_point.column++;
			}
		}
		e.new_end_point = point_at(text, ne);
		ts_tree_edit(t, &e);
	}
	int rc = parse_with(buf, len, what, t, NULL, out, err);
	ts_tree_delete(t);
	return rc;
}

int oeap_pysource_parse(const char *buf, size_t len, const char *what, oeap_pysource **out,
                   oeap_error *err)
{
	return parse_with(buf, len, what, NULL, NULL, out, err);
}

/* oeap_py3_check_changed() for src, parsed from ins->old's tree as edited
 * (old_tree): the ranges are tree-sitter's changed ranges and the inserted
 * bytes. */
static int check_python3_inserted(oeap_pysource *src, TSTree *old_tree, const inserted *ins, const char *what,
                                  oeap_error *err)
{
	uint32_t nchanged = 0;
	TSRange *changed = ts_tree_get_changed_ranges(old_tree, src->tree, &nchanged);
	TSRange *ranges = malloc(((size_t)nchanged + ins->n + 1) * sizeof(*ranges));
	if (!ranges) {
		free(changed);
		return oeap_fail(err, OEAP_ERR_INTERNAL, what, 0, "out of memory");
	}
	size_t n = 0;
	for (uint32_t i = 0; i < nchanged; i++)
		ranges[n++] = changed[i];
	for (size_t i = 0; i < ins->n; i++) {
		memset(&ranges[n], 0, sizeof(ranges[n]));
		ranges[n].start_byte = (uint32_t)(ins->at[i] - src->bom);
		ranges[n++].end_byte = (uint32_t)(ins->at[i] + ins->len[i] - src->bom);
	}
	free(changed);
	int rc = oeap_py3_check_changed(src, ins->old, ins->at, ins->len, ins->n, ranges, n, what, err);
	free(ranges);
	return rc;
}

static int parse_with(const char *buf, size_t len, const char *what, TSTree *old_tree, const inserted *ins,
                      oeap_pysource **out, oeap_error *err)
{
	int error = 0;
	TSParser *parser = NULL;
	oeap_pysource *src = NULL;
	const char *eol = "\n";

	*out = NULL;
	if ((error = oeap_pysource_check_bytes(buf, len, what, &eol, err)))
		goto done;
	if (len > UINT32_MAX - 16) {
		error = oeap_fail(err, OEAP_ERR_INPUT, what, 0, "file of %zu bytes is too large to parse", len);
		goto done;
	}
	src = calloc(1, sizeof(*src));
	parser = ts_parser_new();
	if (!src || !parser) {
		error = oeap_fail(err, OEAP_ERR_INTERNAL, what, 0, "out of memory");
		goto done;
	}
	if (!ts_parser_set_language(parser, tree_sitter_python())) {
		error = oeap_fail(err, OEAP_ERR_INTERNAL, "tree-sitter", 0,
		                  "the tree-sitter-python grammar (ABI %u) does not load into this tree-sitter runtime "
		                  "(ABI %u..%u)", ts_language_version(tree_sitter_python()),
		                  (unsigned)TREE_SITTER_MIN_COMPATIBLE_LANGUAGE_VERSION,
		                  (unsigned)TREE_SITTER_LANGUAGE_VERSION);
		goto done;
	}
	src->buf = buf;
	src->len = len;
	src->eol = eol;
	if (len >= 3 && memcmp(buf, "\xef\xbb\xbf", 3) == 0)
		src->bom = 3;
	src->tree = ts_parser_parse_string(parser, old_tree, buf + src->bom, (uint32_t)(len - src->bom));
	if (!src->tree) {
		error = oeap_fail(err, OEAP_ERR_INTERNAL, what, 0, "tree-sitter returned no tree");
		goto done;
	}
	TSNode bad;
	if (find_error(ts_tree_root_node(src->tree), &bad)) {
		TSPoint p = ts_node_start_point(bad);
		error = oeap_fail(err, OEAP_ERR_INPUT, what, (long)p.row + 1,
		                  "syntax error at line %u, column %u (%s node): refusing to patch a file that does not parse",
		                  p.row + 1, p.column + 1, ts_node_is_missing(bad) ? "missing" : "ERROR");
		goto done;
	}
	if ((error = ins ? check_python3_inserted(src, old_tree, ins, what, err) : oeap_py3_check(src, what, err)))
		goto done;
	*out = src;
	src = NULL;
done:
	if (parser)
		ts_parser_delete(parser);
	oeap_pysource_free(src);
	return error;
}
