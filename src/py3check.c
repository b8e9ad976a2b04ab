#include "py3check.h"

#include <stdlib.h>
#include <string.h>

/*
 * tree-sitter-python also parses Python 2 (`print x`, `exec code`, `<>`,
 * `0777`, `10L`, `ur''`, backquotes, `except E, e`, tuple parameters) and
 * does not enforce indentation the way CPython's tokenizer does. The target
 * runs under Python 3: a file CPython refuses to compile must be refused
 * here too, or apply and verify call a module that cannot import green.
 */
typedef struct py3_probe {
	const oeap_pysource *src;
	TSNode bad;
	const char *why;
	size_t *opens; /* where each block's first statement starts (absolute), in source order */
	size_t nopens, capopens;
	int oom;
	/* Only the nodes that meet one of these (closed, parser offsets) are
	 * looked at, when nranges: see oeap_py3_check_changed(). */
	const TSRange *ranges;
	size_t nranges;
} py3_probe;

static int push_open(py3_probe *p, size_t at)
{
	if (p->nopens == p->capopens) {
		size_t cap = p->capopens ? 2 * p->capopens : 256;
		size_t *o = realloc(p->opens, cap * sizeof(*o));
		if (!o) {
			p->oom = 1;
			return -1;
		}
		p->opens = o;
		p->capopens = cap;
	}
	p->opens[p->nopens++] = at;
	return 0;
}

/* The node types visit_py3() looks at; every other node it only descends. */
static const char *const PY3_TYPES[] = {"block", "print_statement", "exec_statement", "<>", "integer",
                                        "string_start", "except_clause", "parameters", "lambda_parameters"};

/*
 * py3_examines[s]: 1 when the grammar's symbol s is named as one of
 * PY3_TYPES, by name as ts_node_type() reports it (aliases included: a
 * node's symbol maps to a symbol of the same name). visit_py3() runs on
 * every node of the file: a table look-up skips the string comparisons for
 * the nodes it has nothing to say about (docs/performance.md). Built once.
 */
static unsigned char py3_examines[1024];
static uint32_t py3_nsymbols; /* 0: not built, or the grammar has more symbols than the table */
/* 1 for "module" and "block": the nodes whose children are statements. */
static unsigned char py3_statements[1024];

/*
 * The bytes one of the nodes visit_py3() acts on must have in its text, or
 * the statement or clause holding it: a digit (an integer), a quote or
 * backquote (a string's start), '<' (`<>`), and ':' (every block, except
 * clause, parameter list and lambda sits in a compound statement or clause
 * whose header ends in one; print and exec statements sit in a block or the
 * module). Below a node whose text has none of them and that is neither the
 * module nor a block there is nothing to find, and the walk skips it: on
 * topk.py that is most of the expressions (docs/performance.md).
 */
static const unsigned char PY3_MAY_HOLD[256] = {
	['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1, ['8'] = 1, ['9'] = 1,
	['\''] = 1, ['"'] = 1, ['`'] = 1, ['<'] = 1, [':'] = 1,
};

static void py3_table_init(void)
{
	static int done;
	if (done)
		return;
	done = 1;
	const TSLanguage *lang = tree_sitter_python();
	uint32_t count = ts_language_symbol_count(lang);
	if (count > sizeof(py3_examines))
		return;
	for (uint32_t sym = 0; sym < count; sym++) {
		const char *name = ts_language_symbol_name(lang, (TSSymbol)sym);
		for (size_t i = 0; name && i < sizeof(PY3_TYPES) / sizeof(PY3_TYPES[0]); i++)
			if (strcmp(name, PY3_TYPES[i]) == 0)
				py3_examines[sym] = 1;
		if (name && (strcmp(name, "module") == 0 || strcmp(name, "block") == 0))
			py3_statements[sym] = 1;
	}
	py3_nsymbols = count;
}

/* One walk over the tree (a node's parent is a walk from the root in
 * tree-sitter, so nothing here asks for one: a per-line lookup made a 50 MB
 * file quadratic). */
/* Whether visit_py3() may find something below n (PY3_MAY_HOLD). */
static int py3_descend(const py3_probe *p, TSNode n, TSSymbol sym)
{
	if (!ts_node_child_count(n))
		return OEAP_PYSOURCE_WALK_SKIP;
	if (sym >= py3_nsymbols || py3_statements[sym])
		return OEAP_PYSOURCE_WALK_DESCEND;
	const unsigned char *s = (const unsigned char *)p->src->buf + oeap_pysource_start(p->src, n),
	                    *e = (const unsigned char *)p->src->buf + oeap_pysource_end(p->src, n);
	for (; s < e; s++)
		if (PY3_MAY_HOLD[*s])
			return OEAP_PYSOURCE_WALK_DESCEND;
	return OEAP_PYSOURCE_WALK_SKIP;
}

static int visit_py3(TSNode n, void *user)
{
	py3_probe *p = user;
	TSSymbol sym = ts_node_symbol(n);
	if (sym < py3_nsymbols && !py3_examines[sym])
		return py3_descend(p, n, sym);
	/* Every type compared below is one of PY3_TYPES. */
	const char *type = ts_node_type(n);
	const char *s = p->src->buf + oeap_pysource_start(p->src, n);
	size_t len = oeap_pysource_end(p->src, n) - oeap_pysource_start(p->src, n);
	const char *why = NULL;
	if (strcmp(type, "block") == 0) {
		/* An indent is legal only where a block's first statement starts. */
		for (uint32_t i = 0; i < ts_node_named_child_count(n); i++) {
			TSNode c = ts_node_named_child(n, i);
			if (strcmp(ts_node_type(c), "comment") == 0)
				continue;
			if (push_open(p, oeap_pysource_start(p->src, c)))
				return -1;
			break;
		}
	} else if (strcmp(type, "print_statement") == 0) {
		/* `print >>f, x` is also a Python 3 expression (a tuple); `print x` is not */
		TSNode first = ts_node_named_child(n, 0);
		if (ts_node_is_null(first) || strcmp(ts_node_type(first), "chevron") != 0)
			why = "a Python 2 print statement (Python 3 needs print(...))";
	} else if (strcmp(type, "exec_statement") == 0) {
		why = "a Python 2 exec statement";
	} else if (strcmp(type, "<>") == 0) {
		why = "the Python 2 operator <>";
	} else if (strcmp(type, "integer") == 0 && len &&
	           (s[len - 1] == 'l' || s[len - 1] == 'L' ||
	            (len > 1 && s[0] == '0' && s[1] >= '0' && s[1] <= '9' && strspn(s, "0_") < len &&
	             strspn(s, "0123456789_") == len))) {
		why = "a Python 2 integer literal (leading zero or L suffix)";
	} else if (strcmp(type, "string_start") == 0 && len &&
	           (s[0] == '`' || ((memchr(s, 'u', len) || memchr(s, 'U', len)) && strcspn(s, "'\"") > 1))) {
		why = s[0] == '`' ? "Python 2 backquotes" : "a string prefix Python 3 does not accept";
	} else if (strcmp(type, "except_clause") == 0) {
		for (uint32_t i = 0; i < ts_node_child_count(n) && !why; i++)
			if (strcmp(ts_node_type(ts_node_child(n, i)), ",") == 0)
				why = "the Python 2 form `except E, name`";
	} else if (strcmp(type, "parameters") == 0 || strcmp(type, "lambda_parameters") == 0) {
		for (uint32_t i = 0; i < ts_node_named_child_count(n) && !why; i++)
			if (strcmp(ts_node_type(ts_node_named_child(n, i)), "tuple_pattern") == 0) {
				n = ts_node_named_child(n, i);
				why = "a Python 2 tuple parameter";
			}
	}
	if (why) {
		p->bad = n;
		p->why = why;
		return OEAP_PYSOURCE_WALK_STOP;
	}
	return py3_descend(p, n, sym);
}

static int opens_block(const py3_probe *p, size_t at)
{
	size_t lo = 0, hi = p->nopens;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (p->opens[mid] == at)
			return 1;
		if (p->opens[mid] < at)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

static int size_cmp(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	return x < y ? -1 : x > y;
}

/*
 * CPython's indentation rules on the logical lines: an indent only opens a
 * block, a dedent returns to an enclosing level, and tabs and spaces must
 * order the levels the same at tab size 8 and tab size 1 (else TabError).
 */
static int check_indentation(const oeap_pysource *src, py3_probe *p, const char *what, oeap_error *err)
{
	unsigned char *kinds = NULL;
	size_t nlines = 0, depth = 1;
	size_t col[101], alt[101];
	int error = 0;
	if (oeap_pysource_line_kinds(src->buf, src->len, &kinds, &nlines))
		return oeap_fail(err, OEAP_ERR_INTERNAL, what, 0, "out of memory");
	/* sorted for the binary search in opens_block() */
	if (p->nopens)
		qsort(p->opens, p->nopens, sizeof(*p->opens), size_cmp);
	col[0] = alt[0] = 0;
	size_t at = src->bom;
	for (size_t line = 0; line < nlines && at < src->len; line++) {
		const char *nl = memchr(src->buf + at, '\n', src->len - at);
		size_t next = nl ? (size_t)(nl - src->buf) + 1 : src->len;
		size_t i = at, c = 0, a = 0;
		if (kinds[line] != OEAP_PYSOURCE_LINE_CODE)
			goto next_line;
		for (; i < next; i++) {
			if (src->buf[i] == ' ')
				c++, a++;
			else if (src->buf[i] == '\t')
				c = (c / 8 + 1) * 8, a++;
			else if (src->buf[i] == '\f')
				c = a = 0;
			else
				break;
		}
		if (i == next || src->buf[i] == '#' || src->buf[i] == '\r' || src->buf[i] == '\n')
			goto next_line; /* blank and comment-only lines do not count */
		const char *why = NULL;
		if (c > col[depth - 1]) {
			if (a <= alt[depth - 1])
				why = "TabError: inconsistent use of tabs and spaces in indentation";
			else if (!opens_block(p, i))
				why = "IndentationError: unexpected indent";
			else if (depth == sizeof(col) / sizeof(col[0]))
				why = "IndentationError: too many levels of indentation";
			else
				col[depth] = c, alt[depth++] = a;
		} else {
			while (depth > 1 && c < col[depth - 1])
				depth--;
			if (c != col[depth - 1])
				why = "IndentationError: unindent does not match any outer indentation level";
			else if (a != alt[depth - 1])
				why = "TabError: inconsistent use of tabs and spaces in indentation";
		}
		if (why) {
			error = oeap_fail(err, OEAP_ERR_INPUT, what, (long)line + 1,
			                  "line %zu: %s; Python 3 refuses to compile this file, so it is not patched", line + 1,
			                  why);
			break;
		}
	next_line:
		at = next;
	}
	free(kinds);
	return error;
}

/*
 * The end of both Python 3 checks: the verdict of the walk (`rc`) and the
 * indentation check; on success the blocks' first statements (sorted by
 * check_indentation()) are kept in src for a later parse with insertions.
 * Frees p's list either way.
 */
static int py3_verdict(oeap_pysource *src, py3_probe *p, int rc, const char *what, oeap_error *err)
{
	int error;
	if (p->oom) {
		error = oeap_fail(err, OEAP_ERR_INTERNAL, what, 0, "out of memory");
	} else if (rc == OEAP_PYSOURCE_WALK_STOP) {
		long line = oeap_pysource_line_of(src, oeap_pysource_start(src, p->bad));
		error = oeap_fail(err, OEAP_ERR_INPUT, what, line,
		                  "line %ld: %s; the target runs under Python 3, which refuses to compile this file, so it "
		                  "is not patched",
		                  line, p->why);
	} else {
		error = check_indentation(src, p, what, err);
	}
	if (!error) {
		src->opens = p->opens;
		src->nopens = p->nopens;
		p->opens = NULL;
	}
	free(p->opens);
	p->opens = NULL;
	return error;
}

/* Refuses what tree-sitter parses but Python 3 does not compile. */
int oeap_py3_check(oeap_pysource *src, const char *what, oeap_error *err)
{
	py3_probe p;
	memset(&p, 0, sizeof(p));
	p.src = src;
	py3_table_init();
	int rc = oeap_pysource_walk(oeap_pysource_root(src), visit_py3, &p);
	return py3_verdict(src, &p, rc, what, err);
}

/* visit_py3() on the nodes that meet one of p->ranges; the others it skips. */
static int visit_py3_changed(TSNode n, void *user)
{
	py3_probe *p = user;
	uint32_t s = ts_node_start_byte(n), e = ts_node_end_byte(n);
	size_t i = 0;
	while (i < p->nranges && !(s <= p->ranges[i].end_byte && e >= p->ranges[i].start_byte))
		i++;
	if (i == p->nranges)
		return OEAP_PYSOURCE_WALK_SKIP;
	return visit_py3(n, user);
}

/*
 * oeap_py3_check() of `src`, the text of `old` (which passed it) with
 * insertions, looking only at what they changed. `ranges` (n, parser
 * offsets in src) hold tree-sitter's changed ranges between the trees and
 * the inserted bytes. Outside them src's tree is old's, node for node
 * (tree-sitter's promise for changed ranges), so every node there passed
 * already: the walk looks only at the nodes that meet a range (closed: a node
 * that merely touches one is looked at too). The blocks' first statements:
 * the walk finds those of the blocks it visits, and old's others hold, moved
 * by the inserted lengths, except where one lands in a range (then its block
 * meets the range and was visited: a statement that was first and no longer
 * is, as when a region goes in before it, is not taken from old). The
 * indentation check then runs on the whole text as in oeap_py3_check().
 */
int oeap_py3_check_changed(oeap_pysource *src, const oeap_pysource *old, const size_t *ins_at,
                           const size_t *ins_len, size_t nins, const TSRange *ranges, size_t nranges,
                           const char *what, oeap_error *err)
{
	py3_probe p;
	memset(&p, 0, sizeof(p));
	p.src = src;
	p.ranges = ranges;
	p.nranges = nranges;
	py3_table_init();
	int rc = oeap_pysource_walk(oeap_pysource_root(src), visit_py3_changed, &p);
	/* old's first statements, where they are in src */
	for (size_t i = 0, k = 0, shift = 0; rc == 0 && !p.oom && i < old->nopens; i++) {
		size_t x = old->opens[i];
		/* insertion k is at ins_at[k] - (the lengths before it) in old's bytes */
		while (k < nins && ins_at[k] - shift <= x)
			shift += ins_len[k++];
		size_t at = x + shift - src->bom; /* parser offset in src */
		size_t r = 0;
		while (r < nranges && !(at >= ranges[r].start_byte && at <= ranges[r].end_byte))
			r++;
		if (r == nranges && push_open(&p, x + shift))
			break;
	}
	return py3_verdict(src, &p, rc, what, err);
}
