#include "pysource.h"

#include <stdlib.h>
#include <string.h>

#include "quote.h"

static long line_of(const char *buf, size_t off)
{
	long line = 1;
	const char *p = buf, *end = buf + off;
	while ((p = memchr(p, '\n', (size_t)(end - p))) != NULL) {
		line++;
		p++;
	}
	return line;
}

int pysource_check_size(size_t len, const char *what, oeap_error *err)
{
	if (len <= PYSOURCE_MAX_BYTES)
		return 0;
	return oeap_fail(err, OEAP_ERR_INPUT, what, 0,
	                 "%zu bytes (%.1f MiB), over oeapatch's limit of %zu bytes (%zu MiB) for a Python source "
	                 "file (memory grows with the size: docs/reliability.md)",
	                 len, (double)len / (1 << 20), PYSOURCE_MAX_BYTES, PYSOURCE_MAX_BYTES >> 20);
}

int pysource_check_bytes(const char *buf, size_t len, const char *what, const char **eol,
                         oeap_error *err)
{
	size_t lf = 0, crlf = 0;
	long first_lf = 0, first_crlf = 0;
	if (len == 0)
		return oeap_fail(err, OEAP_ERR_INPUT, what, 0, "the file is empty: nothing to patch");
	for (size_t i = 0; i < len;) {
		unsigned char c = (unsigned char)buf[i];
		/* most bytes: printable ASCII, nothing to check */
		if (c >= 0x20 && c < 0x80) {
			i++;
			continue;
		}
		if (c == 0)
			return oeap_fail(err, OEAP_ERR_INPUT, what, line_of(buf, i),
			                 "NUL byte at offset %zu: not a Python source file", i);
		if (c == '\r') {
			if (i + 1 < len && buf[i + 1] == '\n') {
				if (!crlf++)
					first_crlf = line_of(buf, i);
				i += 2;
				continue;
			}
			return oeap_fail(err, OEAP_ERR_INPUT, what, line_of(buf, i),
			                 "bare carriage return at offset %zu: old Mac line endings are not supported", i);
		}
		if (c == '\n') {
			if (!lf++)
				first_lf = line_of(buf, i);
			i++;
			continue;
		}
		size_t n = oeap_utf8_seq(buf + i, len - i);
		if (!n)
			return oeap_fail(err, OEAP_ERR_INPUT, what, line_of(buf, i),
			                 "invalid UTF-8 at offset %zu: Python source must be UTF-8 to be patched safely", i);
		i += n;
	}
	if (lf && crlf)
		return oeap_fail(err, OEAP_ERR_INPUT, what, first_lf > first_crlf ? first_lf : first_crlf,
		                 "mixed line endings (%zu LF, %zu CRLF; first LF on line %ld, first CRLF on line %ld): "
		                 "which one inserted lines should use is ambiguous; normalise the file first",
		                 lf, crlf, first_lf, first_crlf);
	if (eol)
		*eol = crlf ? "\r\n" : "\n";
	return 0;
}

/* The bytes outside strings and comments that pysource_line_kinds() acts on. */
static const unsigned char LINE_KIND_SPECIAL[256] = {
	['\n'] = 1, ['\r'] = 1, ['#'] = 1, ['\\'] = 1, ['('] = 1, ['['] = 1, ['{'] = 1,
	[')'] = 1, [']'] = 1, ['}'] = 1, ['"'] = 1, ['\''] = 1,
};

int pysource_line_kinds(const char *buf, size_t len, unsigned char **kinds, size_t *n)
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
			k[++line] = in_str ? PYSOURCE_LINE_STRING
			            : depth || backslash ? PYSOURCE_LINE_CONTINUED
			                                 : PYSOURCE_LINE_CODE;
			escape = comment = backslash = 0;
			continue;
		}
		if (c == '\r')
			continue; /* part of a CRLF: changes none of the states */
		if (comment) {
			/* nothing but the line end ends it */
			const char *nl = memchr(buf + i, '\n', len - i);
			if (!nl)
				break;
			i = (size_t)(nl - buf) - 1;
			continue;
		}
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
			} else {
				/* the bytes up to the next that can change a state */
				while (i + 1 < len && buf[i + 1] != '\\' && buf[i + 1] != quote && buf[i + 1] != '\n')
					i++;
			}
			continue;
		}
		backslash = 0;
		if (!LINE_KIND_SPECIAL[(unsigned char)c]) {
			/* a run of bytes that change no state (this loop is a good part
			 * of verify's time otherwise: docs/performance.md) */
			while (i + 1 < len && !LINE_KIND_SPECIAL[(unsigned char)buf[i + 1]])
				i++;
			continue;
		}
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

int pysource_walk(TSNode root, int (*visit)(TSNode node, void *user), void *user)
{
	TSTreeCursor c = ts_tree_cursor_new(root);
	/* left[d]: the siblings still to visit after the current node at depth
	 * d (its parent's child count less those seen). The cursor finds that a
	 * node is its parent's last child only by looking for a next one, which
	 * costs about as much as moving to it: a fifth of the walk. */
	uint32_t small[64], *left = small;
	size_t depth = 0, cap = sizeof(small) / sizeof(small[0]);
	int rc = 0;
	left[0] = 0; /* the root has no siblings for the cursor */
	for (;;) {
		TSNode node = ts_tree_cursor_current_node(&c);
		int v = visit(node, user);
		if (v < 0 || v == PYSOURCE_WALK_STOP) {
			rc = v;
			break;
		}
		uint32_t kids = v == PYSOURCE_WALK_DESCEND ? ts_node_child_count(node) : 0;
		if (kids && ts_tree_cursor_goto_first_child(&c)) {
			if (depth + 1 == cap) {
				uint32_t *bigger = malloc(2 * cap * sizeof(*bigger));
				if (!bigger) {
					rc = -1;
					break;
				}
				memcpy(bigger, left, cap * sizeof(*left));
				if (left != small)
					free(left);
				left = bigger;
				cap *= 2;
			}
			left[++depth] = kids - 1;
			continue;
		}
		while (left[depth] == 0 || !ts_tree_cursor_goto_next_sibling(&c)) {
			if (depth == 0 || !ts_tree_cursor_goto_parent(&c))
				goto out;
			depth--;
		}
		left[depth]--;
	}
out:
	if (left != small)
		free(left);
	ts_tree_cursor_delete(&c);
	return rc;
}

/*
 * The first ERROR or MISSING node, in source order. ts_node_has_error() says
 * that a subtree holds one, not which node it is: it only tells which
 * subtrees are worth walking, and the walk finds the node to name.
 */
static int visit_error(TSNode n, void *user)
{
	if (ts_node_is_missing(n) || strcmp(ts_node_type(n), "ERROR") == 0) {
		*(TSNode *)user = n;
		return PYSOURCE_WALK_STOP;
	}
	return ts_node_has_error(n) ? PYSOURCE_WALK_DESCEND : PYSOURCE_WALK_SKIP;
}

static int find_error(TSNode node, TSNode *bad)
{
	return pysource_walk(node, visit_error, bad) == PYSOURCE_WALK_STOP;
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

/*
 * tree-sitter-python also parses Python 2 (`print x`, `exec code`, `<>`,
 * `0777`, `10L`, `ur''`, backquotes, `except E, e`, tuple parameters) and
 * does not enforce indentation the way CPython's tokenizer does. The target
 * runs under Python 3: a file CPython refuses to compile must be refused
 * here too, or apply and verify call a module that cannot import green.
 */
typedef struct py3_probe {
	const pysource *src;
	TSNode bad;
	const char *why;
	size_t *opens; /* where each block's first statement starts (absolute), in source order */
	size_t nopens, capopens;
	int oom;
	/* Only the nodes that meet one of these (closed, parser offsets) are
	 * looked at, when nranges: see check_python3_changed(). */
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
		return PYSOURCE_WALK_SKIP;
	if (sym >= py3_nsymbols || py3_statements[sym])
		return PYSOURCE_WALK_DESCEND;
	const unsigned char *s = (const unsigned char *)p->src->buf + pysource_start(p->src, n),
	                    *e = (const unsigned char *)p->src->buf + pysource_end(p->src, n);
	for (; s < e; s++)
		if (PY3_MAY_HOLD[*s])
			return PYSOURCE_WALK_DESCEND;
	return PYSOURCE_WALK_SKIP;
}

static int visit_py3(TSNode n, void *user)
{
	py3_probe *p = user;
	TSSymbol sym = ts_node_symbol(n);
	if (sym < py3_nsymbols && !py3_examines[sym])
		return py3_descend(p, n, sym);
	/* Every type compared below is one of PY3_TYPES. */
	const char *type = ts_node_type(n);
	const char *s = p->src->buf + pysource_start(p->src, n);
	size_t len = pysource_end(p->src, n) - pysource_start(p->src, n);
	const char *why = NULL;
	if (strcmp(type, "block") == 0) {
		/* An indent is legal only where a block's first statement starts. */
		for (uint32_t i = 0; i < ts_node_named_child_count(n); i++) {
			TSNode c = ts_node_named_child(n, i);
			if (strcmp(ts_node_type(c), "comment") == 0)
				continue;
			if (push_open(p, pysource_start(p->src, c)))
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
		return PYSOURCE_WALK_STOP;
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
static int check_indentation(const pysource *src, py3_probe *p, const char *what, oeap_error *err)
{
	unsigned char *kinds = NULL;
	size_t nlines = 0, depth = 1;
	size_t col[101], alt[101];
	int error = 0;
	if (pysource_line_kinds(src->buf, src->len, &kinds, &nlines))
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
		if (kinds[line] != PYSOURCE_LINE_CODE)
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
static int py3_verdict(pysource *src, py3_probe *p, int rc, const char *what, oeap_error *err)
{
	int error;
	if (p->oom) {
		error = oeap_fail(err, OEAP_ERR_INTERNAL, what, 0, "out of memory");
	} else if (rc == PYSOURCE_WALK_STOP) {
		long line = pysource_line_of(src, pysource_start(src, p->bad));
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
static int check_python3(pysource *src, const char *what, oeap_error *err)
{
	py3_probe p;
	memset(&p, 0, sizeof(p));
	p.src = src;
	py3_table_init();
	int rc = pysource_walk(pysource_root(src), visit_py3, &p);
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
		return PYSOURCE_WALK_SKIP;
	return visit_py3(n, user);
}

/*
 * check_python3() of `src`, the text of `old` (which passed it) with
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
 * indentation check then runs on the whole text as in check_python3().
 */
static int check_python3_changed(pysource *src, const pysource *old, const size_t *ins_at,
                                 const size_t *ins_len, size_t nins, const TSRange *ranges, size_t nranges,
                                 const char *what, oeap_error *err)
{
	py3_probe p;
	memset(&p, 0, sizeof(p));
	p.src = src;
	p.ranges = ranges;
	p.nranges = nranges;
	py3_table_init();
	int rc = pysource_walk(pysource_root(src), visit_py3_changed, &p);
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

/* What pysource_parse_inserted() parses from: the original and where the
 * insertions went (offsets into the new text). */
typedef struct inserted {
	const pysource *old;
	const size_t *at, *len;
	size_t n;
} inserted;

static int parse_with(const char *buf, size_t len, const char *what, TSTree *old_tree, const inserted *ins,
                      pysource **out, oeap_error *err);

int pysource_parse_inserted(const pysource *old, const char *buf, size_t len, const size_t *ins_at,
                            const size_t *ins_len, size_t n, const char *what, pysource **out,
                            oeap_error *err)
{
	size_t bom = len >= 3 && memcmp(buf, "\xef\xbb\xbf", 3) == 0 ? 3 : 0;
	if (bom != old->bom)
		return pysource_parse(buf, len, what, out, err);
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

int pysource_parse_edits(const pysource *old, const char *buf, size_t len, const pysource_edit *edits, size_t n,
                         const char *what, pysource **out, oeap_error *err)
{
	size_t bom = len >= 3 && memcmp(buf, "\xef\xbb\xbf", 3) == 0 ? 3 : 0;
	if (bom != old->bom)
		return pysource_parse(buf, len, what, out, err);
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

int pysource_parse(const char *buf, size_t len, const char *what, pysource **out,
                   oeap_error *err)
{
	return parse_with(buf, len, what, NULL, NULL, out, err);
}

/* check_python3_changed() for src, parsed from ins->old's tree as edited
 * (old_tree): the ranges are tree-sitter's changed ranges and the inserted
 * bytes. */
static int check_python3_inserted(pysource *src, TSTree *old_tree, const inserted *ins, const char *what,
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
	int rc = check_python3_changed(src, ins->old, ins->at, ins->len, ins->n, ranges, n, what, err);
	free(ranges);
	return rc;
}

static int parse_with(const char *buf, size_t len, const char *what, TSTree *old_tree, const inserted *ins,
                      pysource **out, oeap_error *err)
{
	int error = 0;
	TSParser *parser = NULL;
	pysource *src = NULL;
	const char *eol = "\n";

	*out = NULL;
	if ((error = pysource_check_bytes(buf, len, what, &eol, err)))
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
	if ((error = ins ? check_python3_inserted(src, old_tree, ins, what, err) : check_python3(src, what, err)))
		goto done;
	*out = src;
	src = NULL;
done:
	if (parser)
		ts_parser_delete(parser);
	pysource_free(src);
	return error;
}

void pysource_free(pysource *src)
{
	if (!src)
		return;
	if (src->tree)
		ts_tree_delete(src->tree);
	free(src->opens);
	free(src);
}

TSNode pysource_root(const pysource *src)
{
	return ts_tree_root_node(src->tree);
}

size_t pysource_start(const pysource *src, TSNode node)
{
	return src->bom + ts_node_start_byte(node);
}

size_t pysource_end(const pysource *src, TSNode node)
{
	return src->bom + ts_node_end_byte(node);
}

long pysource_line_of(const pysource *src, size_t off)
{
	return line_of(src->buf, off);
}

size_t pysource_line_start(const pysource *src, size_t off)
{
	while (off > 0 && src->buf[off - 1] != '\n')
		off--;
	return off;
}

size_t pysource_next_line(const pysource *src, size_t off)
{
	const char *nl = memchr(src->buf + off, '\n', src->len - off);
	return nl ? (size_t)(nl - src->buf) + 1 : src->len;
}

char *pysource_text(const pysource *src, TSNode node)
{
	size_t s = pysource_start(src, node), e = pysource_end(src, node);
	char *t = malloc(e - s + 1);
	if (!t)
		return NULL;
	memcpy(t, src->buf + s, e - s);
	t[e - s] = '\0';
	return t;
}

int pysource_text_eq(const pysource *src, TSNode node, const char *s)
{
	size_t a = pysource_start(src, node), e = pysource_end(src, node);
	size_t n = strlen(s);
	return e - a == n && memcmp(src->buf + a, s, n) == 0;
}
