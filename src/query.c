#include "query.h"

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"

/*
 * One query file. Several may share one compiled TSQuery (oeap_query_new_many):
 * then this one is the patterns [first, end) of it, and `refs` counts the
 * oeap_query values sharing `q`.
 */
/* A step of a pattern of the subset (below): a node and what it demands. */
typedef struct qstep {
	TSSymbol symbol;
	TSFieldId field;      /* 0: any */
	uint32_t capture;     /* index into names, QNONE: none */
	unsigned immediate:1; /* `.` before it */
	unsigned last:1;      /* `.` after it */
	unsigned captures:1;  /* it or a step below it captures */
	uint32_t child;       /* its first child step, QNONE: none */
	uint32_t next;        /* the next child step of its parent, QNONE: none */
} qstep;

typedef struct qpred {
	unsigned negate:1, is_match:1, right_is_capture:1;
	uint32_t left, right; /* capture indexes (right: when right_is_capture) */
	char *str;            /* the string operand */
} qpred;

typedef struct qpattern {
	uint32_t root;        /* its first step */
	qpred *preds;
	size_t npreds;
} qpattern;

#define QNONE UINT32_MAX

/*
 * One query file. Either a tree-sitter query (q), or, for a file in the
 * subset below, its patterns as this module matches them (q NULL). Several
 * files may share one compiled TSQuery (oeap_query_new_many): then this one
 * is the patterns [first, end) of it, and `refs` counts the oeap_query values
 * sharing `q`.
 */
struct oeap_query {
	TSQuery *q;
	uint32_t first, end;
	unsigned *refs;
	char what[256];
	qstep *steps;
	size_t nsteps;
	qpattern *pats;
	size_t npats;
	char **names;         /* capture names */
	size_t nnames;
	char *source;         /* the text, for oeap_query_check_structure() */
	size_t len;
};

/*
 * The definitions' own matcher. tree-sitter's ts_query_new() analyses the
 * grammar's parse table for every parent node type a pattern names, and that
 * analysis costs a command more than parsing half of topk.py (54 M of verify's
 * 246 M instructions, docs/performance.md) though the anchors are a handful of
 * small patterns. A query file written in the subset below is read here and
 * matched by a small backtracking walk instead, with tree-sitter's matching
 * rules (below); anything outside the subset (and anything that does not
 * compile) goes to tree-sitter's compiler as before, so its messages and its
 * behaviour stay exactly what they were.
 *
 * The subset: patterns `(type child...)` of named node types, each child a
 * pattern with an optional `field:` before it, `.` anchors among the
 * children, at most one capture per node and each capture name once per
 * pattern, and a top-level group `(pattern predicate...)` with #eq?,
 * #not-eq?, #match? and #not-match? taking a capture and a string without
 * escapes or a capture. Not in it: wildcards, anonymous nodes, alternations,
 * quantifiers, negated fields, supertypes, predicates below the top level.
 *
 * Why a backtracking walk gives tree-sitter's matches: tree-sitter's cursor
 * splits its state at a child step that could also match a later sibling
 * only when that step holds a capture (or may fail below it); a step without
 * one takes the first sibling that fits and never tries the next. The subset
 * therefore demands a capture in every child step that has a sibling step
 * after it or steps below it (query_step_ok()): there tree-sitter tries every
 * sibling, and so does the walk. Its de-duplication drops only states whose
 * captures are a subset of another's at the same step; without optional
 * steps those are equal captures, which collect de-duplicates anyway. Anchors
 * as tree-sitter reads them: `.` before a child, the first named child (or
 * the named sibling right after the previous child's node; comments are
 * named nodes and count); `.` after the last child, no named sibling after it.
 * tests/unit/test_query.c holds both engines to the same nodes.
 */

typedef struct qlex {
	const char *s;
	size_t len, at;
} qlex;

/* Skips white space and `;` comments; the next byte, or 0 at the end. */
static int qpeek(qlex *l)
{
	while (l->at < l->len) {
		char c = l->s[l->at];
		if (c == ';') {
			while (l->at < l->len && l->s[l->at] != '\n')
				l->at++;
		} else if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
			l->at++;
		} else {
			return (unsigned char)c;
		}
	}
	return 0;
}

/* A name as tree-sitter scans one (letters, digits, _ - . ? !); 1 when it is
 * all letters, digits and `_` (what the subset takes), 0 otherwise or when
 * there is none. */
static int qname(qlex *l, const char **s, size_t *n)
{
	size_t b = l->at;
	int plain = 1;
	while (l->at < l->len) {
		char c = l->s[l->at];
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')
			l->at++;
		else if (c == '-' || c == '.' || c == '?' || c == '!')
			l->at++, plain = 0;
		else
			break;
	}
	*s = l->s + b;
	*n = l->at - b;
	return *n > 0 && plain;
}

typedef struct qbuild {
	oeap_query *q;
	qlex l;
	uint32_t used[32]; /* the capture names of the pattern being read */
	size_t nused;
} qbuild;

static uint32_t qname_index(qbuild *b, const char *s, size_t n)
{
	for (size_t i = 0; i < b->q->nnames; i++)
		if (strlen(b->q->names[i]) == n && memcmp(b->q->names[i], s, n) == 0)
			return (uint32_t)i;
	char **p = realloc(b->q->names, (b->q->nnames + 1) * sizeof(*p));
	if (!p)
		return QNONE;
	b->q->names = p;
	if (!(p[b->q->nnames] = strndup(s, n)))
		return QNONE;
	return (uint32_t)b->q->nnames++;
}

static int qused(const qbuild *b, uint32_t id)
{
	for (size_t i = 0; i < b->nused; i++)
		if (b->used[i] == id)
			return 1;
	return 0;
}

/* Reads `(type child...) @capture?` at l->at (its '('); the index of its
 * step, QNONE when it is not in the subset. */
static uint32_t qread_node(qbuild *b)
{
	qlex *l = &b->l;
	const char *name;
	size_t n;
	if (qpeek(l) != '(')
		return QNONE;
	l->at++;
	qpeek(l);
	if (!qname(l, &name, &n) || (n == 1 && name[0] == '_') || (n == 5 && memcmp(name, "ERROR", 5) == 0))
		return QNONE;
	const TSLanguage *lang = tree_sitter_python();
	TSSymbol sym = ts_language_symbol_for_name(lang, name, (uint32_t)n, true);
	if (!sym || ts_language_symbol_type(lang, sym) != TSSymbolTypeRegular)
		return QNONE;
	qstep *steps = realloc(b->q->steps, (b->q->nsteps + 1) * sizeof(*steps));
	if (!steps)
		return QNONE;
	b->q->steps = steps;
	uint32_t self = (uint32_t)b->q->nsteps++;
	memset(&steps[self], 0, sizeof(steps[self]));
	steps[self].symbol = sym;
	steps[self].capture = steps[self].child = steps[self].next = QNONE;
	uint32_t prev = QNONE;
	int anchor = 0;
	for (;;) {
		int c = qpeek(l);
		if (c == ')') {
			l->at++;
			break;
		}
		if (c == '.') {
			if (anchor)
				return QNONE;
			anchor = 1;
			l->at++;
			continue;
		}
		TSFieldId field = 0;
		if (c != '(') {
			if (!qname(l, &name, &n) || qpeek(l) != ':')
				return QNONE;
			l->at++;
			if (!(field = ts_language_field_id_for_name(lang, name, (uint32_t)n)))
				return QNONE;
		}
		uint32_t child = qread_node(b);
		if (child == QNONE)
			return QNONE;
		b->q->steps[child].field = field;
		b->q->steps[child].immediate = anchor;
		anchor = 0;
		if (prev == QNONE)
			b->q->steps[self].child = child;
		else
			b->q->steps[prev].next = child;
		prev = child;
	}
	if (anchor) {
		if (prev == QNONE)
			return QNONE;
		b->q->steps[prev].last = 1;
	}
	int c = qpeek(l);
	if (c == '@') {
		l->at++;
		if (!qname(l, &name, &n) || b->nused == sizeof(b->used) / sizeof(b->used[0]))
			return QNONE;
		uint32_t id = qname_index(b, name, n);
		if (id == QNONE || qused(b, id))
			return QNONE;
		b->used[b->nused++] = id;
		b->q->steps[self].capture = id;
		c = qpeek(l);
	}
	/* a second capture, a quantifier */
	if (c == '@' || c == '*' || c == '+' || c == '?')
		return QNONE;
	return self;
}

/* Reads `(#op @capture "string"|@capture)`; -1 when not in the subset. */
static int qread_pred(qbuild *b, qpattern *pat)
{
	qlex *l = &b->l;
	const char *name;
	size_t n;
	qpred p;
	memset(&p, 0, sizeof(p));
	if (qpeek(l) != '(')
		return -1;
	l->at++;
	if (qpeek(l) != '#')
		return -1;
	l->at++;
	qname(l, &name, &n);
	if (n == 3 && !memcmp(name, "eq?", 3))
		;
	else if (n == 7 && !memcmp(name, "not-eq?", 7))
		p.negate = 1;
	else if (n == 6 && !memcmp(name, "match?", 6))
		p.is_match = 1;
	else if (n == 10 && !memcmp(name, "not-match?", 10))
		p.negate = p.is_match = 1;
	else
		return -1;
	for (int arg = 0; arg < 2; arg++) {
		int c = qpeek(l);
		if (c == '@') {
			l->at++;
			if (!qname(l, &name, &n))
				return -1;
			uint32_t id = QNONE;
			for (size_t i = 0; i < b->nused; i++)
				if (strlen(b->q->names[b->used[i]]) == n && !memcmp(b->q->names[b->used[i]], name, n))
					id = b->used[i];
			if (id == QNONE)
				return -1;
			if (arg == 0)
				p.left = id;
			else
				p.right = id, p.right_is_capture = 1;
		} else if (c == '"' && arg == 1) {
			size_t s = ++l->at;
			while (l->at < l->len && l->s[l->at] != '"' && l->s[l->at] != '\\' && l->s[l->at] != '\n')
				l->at++;
			if (l->at == l->len || l->s[l->at] != '"')
				return -1;
			if (!(p.str = strndup(l->s + s, l->at - s)))
				return -1;
			l->at++;
		} else {
			return -1;
		}
	}
	if (qpeek(l) != ')') {
		free(p.str);
		return -1;
	}
	l->at++;
	qpred *preds = realloc(pat->preds, (pat->npreds + 1) * sizeof(*preds));
	if (!preds) {
		free(p.str);
		return -1;
	}
	pat->preds = preds;
	preds[pat->npreds++] = p;
	return 0;
}

/* Marks the steps that capture or hold one that does; 0 when every child
 * step that tree-sitter would try only once where several siblings fit holds
 * a capture (see above), -1 when one does not. */
static int qcheck_steps(oeap_query *q, uint32_t s, int is_root)
{
	qstep *st = &q->steps[s];
	int captures = st->capture != QNONE;
	for (uint32_t c = st->child; c != QNONE; c = q->steps[c].next) {
		if (qcheck_steps(q, c, 0))
			return -1;
		captures |= q->steps[c].captures;
	}
	st = &q->steps[s];
	st->captures = (unsigned)captures;
	if (!is_root && !captures && (st->next != QNONE || st->child != QNONE))
		return -1;
	return 0;
}

static void qfree_own(oeap_query *q)
{
	for (size_t i = 0; i < q->npats; i++) {
		for (size_t j = 0; j < q->pats[i].npreds; j++)
			free(q->pats[i].preds[j].str);
		free(q->pats[i].preds);
	}
	free(q->pats);
	for (size_t i = 0; i < q->nnames; i++)
		free(q->names[i]);
	free(q->names);
	free(q->steps);
	free(q->source);
	q->pats = NULL;
	q->names = NULL;
	q->steps = NULL;
	q->source = NULL;
	q->npats = q->nnames = q->nsteps = 0;
}

/* Reads `source` in the subset into a new query (q NULL); NULL when it is
 * not in it (or memory ran out): the caller compiles it with tree-sitter. */
static oeap_query *qread(const char *source, size_t len, const char *what)
{
	oeap_query *q = calloc(1, sizeof(*q));
	if (!q)
		return NULL;
	snprintf(q->what, sizeof(q->what), "%s", what);
	if (!(q->source = malloc(len ? len : 1))) {
		free(q);
		return NULL;
	}
	memcpy(q->source, source, len);
	q->len = len;
	qbuild b;
	memset(&b, 0, sizeof(b));
	b.q = q;
	b.l.s = source;
	b.l.len = len;
	while (qpeek(&b.l)) {
		qpattern pat;
		memset(&pat, 0, sizeof(pat));
		b.nused = 0;
		size_t at = b.l.at;
		int group = 0;
		if (qpeek(&b.l) != '(')
			goto refuse;
		b.l.at++;
		group = qpeek(&b.l) == '(';
		if (!group)
			b.l.at = at;
		pat.root = qread_node(&b);
		int bad = pat.root == QNONE;
		while (!bad && group) {
			int c = qpeek(&b.l);
			if (c == ')') {
				b.l.at++;
				break;
			}
			bad = qread_pred(&b, &pat) != 0;
		}
		if (!bad && group && (qpeek(&b.l) == '@' || qpeek(&b.l) == '*' || qpeek(&b.l) == '+' || qpeek(&b.l) == '?'))
			bad = 1;
		qpattern *pats = bad ? NULL : realloc(q->pats, (q->npats + 1) * sizeof(*pats));
		if (!pats) {
			for (size_t j = 0; j < pat.npreds; j++)
				free(pat.preds[j].str);
			free(pat.preds);
			goto refuse;
		}
		q->pats = pats;
		pats[q->npats++] = pat;
		if (qcheck_steps(q, pat.root, 1))
			goto refuse;
	}
	return q;
refuse:
	qfree_own(q);
	free(q);
	return NULL;
}

/* A visible child of a node, as tree-sitter's query cursor sees it. */
typedef struct qkid {
	TSNode node;
	TSFieldId field;
	unsigned char named;
} qkid;

typedef struct qmatch {
	const oeap_query *q;
	const pysource *src;
	const qpattern *pat;
	TSNode *caps;        /* per capture name: the node of the match being built */
	unsigned char *set;  /* per capture name: set by this pattern */
	qkid *kids;          /* the children of the nodes on the path, a stack */
	size_t nkids, capkids;
	uint32_t cap_id, in_id;
	TSNode scope;
	TSNode *out;
	size_t n, cap;
	oeap_error *err;
} qmatch;

/* The steps still to match once a node's children are done: its parent's
 * next child step, from the kid after it. */
typedef struct qframe {
	uint32_t next;
	size_t kbase, kn, from;
	const struct qframe *up;
} qframe;

/* Pushes node's visible children (and their fields) on the kids stack. */
static int qload_kids(qmatch *m, TSNode node, size_t *base, size_t *n)
{
	*base = m->nkids;
	TSTreeCursor c = ts_tree_cursor_new(node);
	for (int more = ts_tree_cursor_goto_first_child(&c); more; more = ts_tree_cursor_goto_next_sibling(&c)) {
		if (m->nkids == m->capkids) {
			size_t cap = m->capkids ? 2 * m->capkids : 256;
			qkid *k = realloc(m->kids, cap * sizeof(*k));
			if (!k) {
				ts_tree_cursor_delete(&c);
				return oeap_fail(m->err, OEAP_ERR_INTERNAL, m->q->what, 0, "out of memory");
			}
			m->kids = k;
			m->capkids = cap;
		}
		qkid *k = &m->kids[m->nkids++];
		k->node = ts_tree_cursor_current_node(&c);
		k->field = ts_tree_cursor_current_field_id(&c);
		k->named = ts_node_is_named(k->node);
	}
	ts_tree_cursor_delete(&c);
	*n = m->nkids - *base;
	return 0;
}

static char *qtext(const qmatch *m, uint32_t id)
{
	return m->set[id] ? pysource_text(m->src, m->caps[id]) : NULL;
}

/* predicate_holds() for the subset's predicates. */
static int qpred_holds(const qmatch *m, const qpred *p)
{
	/* a capture not set constrains nothing (never so in a complete match) */
	if (!m->set[p->left] || (p->right_is_capture && !m->set[p->right]))
		return 1;
	char *left = qtext(m, p->left), *right = p->right_is_capture ? qtext(m, p->right) : strdup(p->str);
	int holds = 1;
	if (!left || !right) {
		holds = oeap_fail(m->err, OEAP_ERR_INTERNAL, m->q->what, 0, "out of memory");
		goto done;
	}
	if (p->is_match) {
		regex_t re;
		if (regcomp(&re, right, REG_EXTENDED | REG_NOSUB)) {
			holds = oeap_fail(m->err, OEAP_ERR_DEFINITION, m->q->what, 0, "bad regular expression \"%s\"", right);
			goto done;
		}
		holds = regexec(&re, left, 0, NULL, 0) == 0;
		regfree(&re);
	} else {
		holds = strcmp(left, right) == 0;
	}
	if (p->negate)
		holds = !holds;
done:
	free(left);
	free(right);
	return holds;
}

/* A complete match of m->pat: its predicates, the @in rule, the capture. */
static int qcomplete(qmatch *m)
{
	for (size_t i = 0; i < m->pat->npreds; i++) {
		int r = qpred_holds(m, &m->pat->preds[i]);
		if (r <= 0)
			return r;
	}
	if (m->in_id != QNONE && (!m->set[m->in_id] || !ts_node_eq(m->caps[m->in_id], m->scope)))
		return 0;
	if (m->cap_id == QNONE || !m->set[m->cap_id])
		return 0;
	if (m->n == m->cap) {
		size_t cap = m->cap ? 2 * m->cap : 4;
		TSNode *p = realloc(m->out, cap * sizeof(*p));
		if (!p)
			return oeap_fail(m->err, OEAP_ERR_INTERNAL, m->q->what, 0, "out of memory");
		m->out = p;
		m->cap = cap;
	}
	m->out[m->n++] = m->caps[m->cap_id];
	return 0;
}

static int qseq(qmatch *m, uint32_t s, size_t kbase, size_t kn, size_t from, const qframe *up);

/* Step s has matched `node`: its children, then what follows it. */
static int qdescend(qmatch *m, uint32_t s, TSNode node, size_t kbase, size_t kn, size_t after, const qframe *up)
{
	const qstep *st = &m->q->steps[s];
	if (st->capture != QNONE) {
		m->caps[st->capture] = node;
		m->set[st->capture] = 1;
	}
	if (st->child == QNONE)
		return qseq(m, st->next, kbase, kn, after, up);
	size_t cbase = 0, cn = 0;
	if (qload_kids(m, node, &cbase, &cn))
		return -1;
	qframe f = {st->next, kbase, kn, after, up};
	int rc = qseq(m, st->child, cbase, cn, 0, &f);
	m->nkids = cbase;
	return rc;
}

/* Matches child step s and the sibling steps after it against the kids
 * [kbase + from, kbase + kn), every way they fit. */
static int qseq(qmatch *m, uint32_t s, size_t kbase, size_t kn, size_t from, const qframe *up)
{
	if (s == QNONE)
		return up ? qseq(m, up->next, up->kbase, up->kn, up->from, up->up) : qcomplete(m);
	const qstep *st = &m->q->steps[s];
	for (size_t i = from; i < kn; i++) {
		qkid k = m->kids[kbase + i]; /* a copy: the stack may move */
		int fits = ts_node_symbol(k.node) == st->symbol && (!st->field || k.field == st->field);
		for (size_t j = i + 1; fits && st->last && j < kn; j++)
			if (m->kids[kbase + j].named)
				fits = 0;
		if (fits && qdescend(m, s, k.node, kbase, kn, i + 1, up))
			return -1;
		if (st->immediate && k.named)
			break;
	}
	return 0;
}

/* Pattern p of the query with its root at `node`. */
static int qmatch_at(qmatch *m, const qpattern *p, TSNode node)
{
	if (ts_node_symbol(node) != m->q->steps[p->root].symbol)
		return 0;
	m->pat = p;
	memset(m->set, 0, m->q->nnames ? m->q->nnames : 1);
	return qdescend(m, p->root, node, 0, 0, 0, NULL);
}

static int qvisit(TSNode node, void *user)
{
	qmatch *m = user;
	for (size_t i = 0; i < m->q->npats; i++)
		if (qmatch_at(m, &m->q->pats[i], node))
			return -1;
	return PYSOURCE_WALK_DESCEND;
}

static uint32_t qcapture(const oeap_query *q, const char *capture)
{
	for (size_t i = 0; i < q->nnames; i++)
		if (strcmp(q->names[i], capture) == 0)
			return (uint32_t)i;
	return QNONE;
}

/* oeap_query_collect() for a query of the subset: the same nodes, unsorted. */
static int qcollect(const oeap_query *q, const pysource *src, TSNode scope, uint32_t cap_id, TSNode **nodes,
                    size_t *count, oeap_error *err)
{
	int error = 0;
	qmatch m;
	memset(&m, 0, sizeof(m));
	m.q = q;
	m.src = src;
	m.scope = scope;
	m.err = err;
	m.cap_id = cap_id;
	m.in_id = qcapture(q, "in");
	m.caps = calloc(q->nnames ? q->nnames : 1, sizeof(*m.caps));
	m.set = calloc(q->nnames ? q->nnames : 1, 1);
	if (!m.caps || !m.set) {
		error = oeap_fail(err, OEAP_ERR_INTERNAL, q->what, 0, "out of memory");
		goto done;
	}
	/* With an @in capture a match counts only when its @in is the scope:
	 * one that starts below the scope never does (see oeap_query_collect). */
	if (m.in_id != QNONE) {
		for (size_t i = 0; i < q->npats && !error; i++)
			error = qmatch_at(&m, &q->pats[i], scope);
	} else if (pysource_walk(scope, qvisit, &m) < 0) {
		error = -1;
	}
done:
	free(m.caps);
	free(m.set);
	free(m.kids);
	if (error) {
		free(m.out);
		return -1;
	}
	*nodes = m.out;
	*count = m.n;
	return 0;
}

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

int oeap_query_new(const char *source, size_t len, const char *what, oeap_query **out,
                   oeap_error *err)
{
	*out = NULL;
	if ((*out = qread(source, len, what)) != NULL)
		return 0;
	return oeap_query_new_treesitter(source, len, what, out, err);
}

int oeap_query_new_treesitter(const char *source, size_t len, const char *what, oeap_query **out,
                              oeap_error *err)
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
				oeap_query_free(q);
				return rc;
			}
		}
	}
	*out = q;
	return 0;
}

/* 1 when every predicate of pattern p is one that predicate_holds() evaluates. */
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

int oeap_query_new_many(const char *const *sources, const size_t *lens, const char *const *whats, size_t n,
                        oeap_query **out)
{
	int error = -1;
	size_t total = 0;
	size_t *sep = NULL;
	char *all = NULL;
	TSQuery *tq = NULL;
	unsigned *refs = NULL;

	for (size_t i = 0; i < n; i++)
		out[i] = NULL;
	/* Every one in the subset: no tree-sitter compile at all. */
	size_t own = 0;
	while (own < n && (out[own] = qread(sources[own], lens[own], whats[own])) != NULL)
		own++;
	if (n && own == n)
		return 0;
	for (size_t i = 0; i < own; i++) {
		oeap_query_free(out[i]);
		out[i] = NULL;
	}
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

void oeap_query_free(oeap_query *q)
{
	if (!q)
		return;
	qfree_own(q);
	if (q->q && (!q->refs || --*q->refs == 0)) {
		ts_query_delete(q->q);
		free(q->refs);
	}
	free(q);
}

/* The id of the capture named `capture` that one of q's own patterns uses
 * (UINT32_MAX when none). */
static uint32_t capture_id(const oeap_query *q, const char *capture)
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
		return qcapture(q, capture) != QNONE;
	return capture_id(q, capture) != UINT32_MAX;
}

/* The text of the first node captured as `id` in the match (NULL when none). */
static char *capture_text(const pysource *src, const TSQueryMatch *m, uint32_t id)
{
	for (uint16_t i = 0; i < m->capture_count; i++)
		if (m->captures[i].index == id)
			return pysource_text(src, m->captures[i].node);
	return NULL;
}

/* Evaluates one predicate (steps [0..n) excluding the Done step). -1 on error. */
static int predicate_holds(const oeap_query *q, const pysource *src, const TSQueryMatch *m,
                           const TSQueryPredicateStep *st, uint32_t n, oeap_error *err)
{
	uint32_t l;
	const char *op = ts_query_string_value_for_id(q->q, st[0].value_id, &l);
	int negate = strncmp(op, "not-", 4) == 0;
	int is_match = strstr(op, "match?") != NULL;
	if (n != 3 || st[1].type != TSQueryPredicateStepTypeCapture)
		return oeap_fail(err, OEAP_ERR_DEFINITION, q->what, 0,
		                 "#%s takes a capture and a string or capture", op);
	char *left = capture_text(src, m, st[1].value_id);
	if (!left)
		return 1; /* an optional capture that did not match constrains nothing */
	char *right = NULL;
	if (st[2].type == TSQueryPredicateStepTypeCapture) {
		right = capture_text(src, m, st[2].value_id);
	} else {
		const char *s = ts_query_string_value_for_id(q->q, st[2].value_id, &l);
		right = strdup(s);
	}
	int holds = 0;
	if (!right) {
		free(left);
		return 1;
	}
	if (is_match) {
		regex_t re;
		if (regcomp(&re, right, REG_EXTENDED | REG_NOSUB)) {
			free(left);
			int rc = oeap_fail(err, OEAP_ERR_DEFINITION, q->what, 0, "bad regular expression \"%s\"", right);
			free(right);
			return rc;
		}
		holds = regexec(&re, left, 0, NULL, 0) == 0;
		regfree(&re);
	} else {
		holds = strcmp(left, right) == 0;
	}
	free(left);
	free(right);
	return negate ? !holds : holds;
}

static int match_holds(const oeap_query *q, const pysource *src, const TSQueryMatch *m,
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

int oeap_query_collect(const oeap_query *q, const pysource *src, TSNode scope,
                       const char *capture, TSNode **nodes, size_t *count, oeap_error *err)
{
	int error = 0;
	uint32_t cap_id = UINT32_MAX, in_id = UINT32_MAX;
	TSNode *arr = NULL;
	size_t n = 0, cap = 0;
	TSQueryCursor *cur = NULL;

	*nodes = NULL;
	*count = 0;
	cap_id = q->q ? capture_id(q, capture) : qcapture(q, capture);
	if (cap_id == UINT32_MAX)
		return oeap_fail(err, OEAP_ERR_DEFINITION, q->what, 0, "the query has no capture @%s", capture);
	if (!q->q) {
		if (qcollect(q, src, scope, cap_id, &arr, &n, err)) {
			error = -1;
			goto done;
		}
		goto sort;
	}
	in_id = capture_id(q, "in");
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
	if (cur)
		ts_query_cursor_delete(cur);
	return error;
}
