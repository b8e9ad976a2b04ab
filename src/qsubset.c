/* qsubset.c - the definitions' own matcher for the query subset (qsubset.h). */
#include "qsubset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "predicate.h"

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

void oeap_qsubset_free_own(oeap_query *q)
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
oeap_query *oeap_qsubset_read(const char *source, size_t len, const char *what)
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
	oeap_qsubset_free_own(q);
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
	const oeap_pysource *src;
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
	return m->set[id] ? oeap_pysource_text(m->src, m->caps[id]) : NULL;
}

/* One predicate of the pattern, by the rule both engines share (predicate.h). */
static int qpred_holds(const qmatch *m, const qpred *p)
{
	int right_set = !p->right_is_capture || m->set[p->right];
	char *left = qtext(m, p->left), *right = p->right_is_capture ? qtext(m, p->right) : strdup(p->str);
	int holds = oeap_predicate_eval(m->q->what, p->is_match, p->negate, m->set[p->left], left, right_set, right,
	                                m->err);
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
	return OEAP_PYSOURCE_WALK_DESCEND;
}

uint32_t oeap_qsubset_capture(const oeap_query *q, const char *capture)
{
	for (size_t i = 0; i < q->nnames; i++)
		if (strcmp(q->names[i], capture) == 0)
			return (uint32_t)i;
	return QNONE;
}

/* oeap_query_collect() for a query of the subset: the same nodes, unsorted. */
int oeap_qsubset_collect(const oeap_query *q, const oeap_pysource *src, TSNode scope, uint32_t cap_id, TSNode **nodes,
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
	m.in_id = oeap_qsubset_capture(q, "in");
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
	} else if (oeap_pysource_walk(scope, qvisit, &m) < 0) {
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
