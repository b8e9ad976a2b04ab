/*
 * pysource.h - one Python source file, parsed with tree-sitter-python
 * (pyparse.h parses it): its tree, offsets, lines and text.
 *
 * Parsing refuses what cannot be patched safely, so every later step may
 * assume: valid UTF-8 without NUL bytes, one line-ending style (LF or CRLF;
 * a file without any line end counts as LF), and a syntax tree without ERROR
 * or MISSING nodes. A leading UTF-8 byte order mark is kept in the bytes and
 * skipped for the parser: node offsets are relative to `base`, byte offsets
 * into `buf` are `bom + node offset` (oeap_pysource_abs()).
 */
#ifndef OEAP_PYSOURCE_H
#define OEAP_PYSOURCE_H

#include <stddef.h>
#include <stdint.h>
#include <tree_sitter/api.h>

#include "error.h"

typedef struct oeap_pysource {
	const char *buf;  /* the whole file, borrowed: must outlive the oeap_pysource */
	size_t len;
	size_t bom;       /* 3 when the file starts with a UTF-8 BOM, else 0 */
	const char *eol;  /* "\n" or "\r\n": what the file uses */
	TSTree *tree;
	/* Where each block's first statement starts (absolute, ascending), as
	 * the Python 3 check found them: a parse of this text with insertions
	 * (oeap_pysource_parse_inserted) checks only what the insertions changed and
	 * takes the rest from here. */
	size_t *opens;
	size_t nopens;
} oeap_pysource;

/* The tree-sitter-python language (ABI checked by oeap_pysource_parse, pyparse.h). */
const TSLanguage *tree_sitter_python(void);

/* Frees a parse (pyparse.h makes them); NULL is fine. */
void oeap_pysource_free(oeap_pysource *src);

TSNode oeap_pysource_root(const oeap_pysource *src);

/* Absolute byte offset into buf of a node's start / end. */
size_t oeap_pysource_start(const oeap_pysource *src, TSNode node);
size_t oeap_pysource_end(const oeap_pysource *src, TSNode node);

/* 1-based line of an absolute offset. */
long oeap_pysource_line_of(const oeap_pysource *src, size_t off);

/* Offset of the start of the line holding `off`. */
size_t oeap_pysource_line_start(const oeap_pysource *src, size_t off);

/* Offset just past the line end of the line holding `off` (len at EOF). */
size_t oeap_pysource_next_line(const oeap_pysource *src, size_t off);

/* A node's text as a new NUL-terminated string (caller frees). */
char *oeap_pysource_text(const oeap_pysource *src, TSNode node);

/* 1 when the node's text equals `s`. */
int oeap_pysource_text_eq(const oeap_pysource *src, TSNode node, const char *s);

/* What a oeap_pysource_walk() visitor returns for a node. */
enum {
	OEAP_PYSOURCE_WALK_SKIP = 0,    /* do not look below this node */
	OEAP_PYSOURCE_WALK_DESCEND = 1, /* visit its children too */
	OEAP_PYSOURCE_WALK_STOP = 2,    /* done: oeap_pysource_walk returns OEAP_PYSOURCE_WALK_STOP */
};

/*
 * Visits `root` and the nodes below it in source order, with a tree cursor
 * rather than recursion: input may nest a hundred thousand levels deep, and
 * a recursive walk overflows the stack there. `visit` returns one of the
 * values above, or a negative value to stop with that value (an error).
 * Returns 0 when the walk ran to the end.
 */
int oeap_pysource_walk(TSNode root, int (*visit)(TSNode node, void *user), void *user);

/* What a physical line starts inside of, by Python's tokenizer rules. */
enum {
	OEAP_PYSOURCE_LINE_CODE = 0,      /* a fresh logical line: a `#` first on it starts a comment */
	OEAP_PYSOURCE_LINE_CONTINUED = 1, /* inside brackets or after a backslash: still one logical line */
	OEAP_PYSOURCE_LINE_STRING = 2,    /* inside a string literal (a triple-quoted one, or escaped newline) */
};

/*
 * Classifies every line of buf (line i starts after the i-th '\n') without
 * parsing: a small tokenizer that knows strings (prefixes, triple quotes,
 * escapes), comments, brackets and backslash continuations. Shared by region
 * scanning (a marker-shaped line inside a string is text, not a marker) and
 * the indentation check. *kinds (one byte a line, caller frees) and *n.
 * Returns -1 only when memory runs out.
 */
int oeap_pysource_line_kinds(const char *buf, size_t len, unsigned char **kinds, size_t *n);

/*
 * The largest Python source oeapatch reads, in bytes: 8 MiB, about 130 times
 * the largest real topk.py (about 60 kB). Memory grows with the input (about
 * 40 bytes per byte at peak: the tree-sitter trees of the original and the
 * patched text, docs/performance.md), so without a limit a 50 MB file took
 * 1.9 GB; just under the limit apply peaks at about 310 MB. apply also
 * refuses a result above it, so whatever it writes can be read back.
 */
#define OEAP_PYSOURCE_MAX_BYTES ((size_t)8 << 20)

/* Refuses `len` above OEAP_PYSOURCE_MAX_BYTES (OEAP_ERR_INPUT, naming `what`, the
 * size and the limit); 0 when it fits. Every command calls it on the bytes it
 * read before any other work, so nothing is parsed or written above it. */
int oeap_pysource_check_size(size_t len, const char *what, oeap_error *err);

/* Checks buf for what parsing refuses, without parsing (shared with region scanning). */
int oeap_pysource_check_bytes(const char *buf, size_t len, const char *what, const char **eol,
                         oeap_error *err);

#endif
