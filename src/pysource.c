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

int oeap_pysource_check_size(size_t len, const char *what, oeap_error *err)
{
	if (len <= OEAP_PYSOURCE_MAX_BYTES)
		return 0;
	return oeap_fail(err, OEAP_ERR_INPUT, what, 0,
	                 "%zu bytes (%.1f MiB), over oeapatch's limit of %zu bytes (%zu MiB) for a Python source "
	                 "file (its memory grows with the file's size)",
	                 len, (double)len / (1 << 20), OEAP_PYSOURCE_MAX_BYTES, OEAP_PYSOURCE_MAX_BYTES >> 20);
}

int oeap_pysource_check_bytes(const char *buf, size_t len, const char *what, const char **eol,
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

/* The bytes outside strings and comments that oeap_pysource_line_kinds() acts on. */
static const unsigned char LINE_KIND_SPECIAL[256] = {
	['\n'] = 1, ['\r'] = 1, ['#'] = 1, ['\\'] = 1, ['('] = 1, ['['] = 1, ['{'] = 1,
	[')'] = 1, [']'] = 1, ['}'] = 1, ['"'] = 1, ['\''] = 1,
};

int oeap_pysource_line_kinds(const char *buf, size_t len, unsigned char **kinds, size_t *n)
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
			k[++line] = in_str ? OEAP_PYSOURCE_LINE_STRING
			            : depth || backslash ? OEAP_PYSOURCE_LINE_CONTINUED
			                                 : OEAP_PYSOURCE_LINE_CODE;
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

int oeap_pysource_walk(TSNode root, int (*visit)(TSNode node, void *user), void *user)
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
		if (v < 0 || v == OEAP_PYSOURCE_WALK_STOP) {
			rc = v;
			break;
		}
		uint32_t kids = v == OEAP_PYSOURCE_WALK_DESCEND ? ts_node_child_count(node) : 0;
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


void oeap_pysource_free(oeap_pysource *src)
{
	if (!src)
		return;
	if (src->tree)
		ts_tree_delete(src->tree);
	free(src->opens);
	free(src);
}

TSNode oeap_pysource_root(const oeap_pysource *src)
{
	return ts_tree_root_node(src->tree);
}

size_t oeap_pysource_start(const oeap_pysource *src, TSNode node)
{
	return src->bom + ts_node_start_byte(node);
}

size_t oeap_pysource_end(const oeap_pysource *src, TSNode node)
{
	return src->bom + ts_node_end_byte(node);
}

long oeap_pysource_line_of(const oeap_pysource *src, size_t off)
{
	return line_of(src->buf, off);
}

size_t oeap_pysource_line_start(const oeap_pysource *src, size_t off)
{
	while (off > 0 && src->buf[off - 1] != '\n')
		off--;
	return off;
}

size_t oeap_pysource_next_line(const oeap_pysource *src, size_t off)
{
	const char *nl = memchr(src->buf + off, '\n', src->len - off);
	return nl ? (size_t)(nl - src->buf) + 1 : src->len;
}

char *oeap_pysource_text(const oeap_pysource *src, TSNode node)
{
	size_t s = oeap_pysource_start(src, node), e = oeap_pysource_end(src, node);
	char *t = malloc(e - s + 1);
	if (!t)
		return NULL;
	memcpy(t, src->buf + s, e - s);
	t[e - s] = '\0';
	return t;
}

int oeap_pysource_text_eq(const oeap_pysource *src, TSNode node, const char *s)
{
	size_t a = oeap_pysource_start(src, node), e = oeap_pysource_end(src, node);
	size_t n = strlen(s);
	return e - a == n && memcmp(src->buf + a, s, n) == 0;
}
