/*
 * pysource.h - one Python source file, parsed with tree-sitter-python
 * (pyparse.h parses it): its tree, offsets, lines and text.
 *
 * Parsing refuses what cannot be patched safely, so every later step may
 * assume: valid UTF-8 without NUL bytes, one line-ending style (LF or CRLF;
 * a file without any line end counts as LF), and a syntax tree without ERROR
 * or MISSING nodes. A leading UTF-8 byte order mark is kept in the bytes and
 * skipped for the parser: node offsets are relative to `base`, byte offsets
 * into `buf` are `bom + node offset` (pysource_abs()).
 */
#ifndef OEAP_PYSOURCE_H
#define OEAP_PYSOURCE_H

#include <stddef.h>
#include <stdint.h>
#include <tree_sitter/api.h>

#include "error.h"

typedef struct pysource {
	const char *buf;  /* the whole file, borrowed: must outlive the pysource */
	size_t len;
	size_t bom;       /* 3 when the file starts with a UTF-8 BOM, else 0 */
	const char *eol;  /* "\n" or "\r\n": what the file uses */
	TSTree *tree;
	/* Where each block's first statement starts (absolute, ascending), as
	 * the Python 3 check found them: a parse of this text with insertions
	 * (pysource_parse_inserted) checks only what the insertions changed and
	 * takes the rest from here. */
	size_t *opens;
	size_t nopens;
} pysource;

/* The tree-sitter-python language (ABI checked by pysource_parse, pyparse.h). */
const TSLanguage *tree_sitter_python(void);

/* Frees a parse (pyparse.h makes them); NULL is fine. */
void pysource_free(pysource *src);

TSNode pysource_root(const pysource *src);

/* Absolute byte offset into buf of a node's start / end. */
size_t pysource_start(const pysource *src, TSNode node);
size_t pysource_end(const pysource *src, TSNode node);

/* 1-based line of an absolute offset. */
long pysource_line_of(const pysource *src, size_t off);

/* Offset of the start of the line holding `off`. */
size_t pysource_line_start(const pysource *src, size_t off);

/* Offset just past the line end of the line holding `off` (len at EOF). */
size_t pysource_next_line(const pysource *src, size_t off);

/* A node's text as a new NUL-terminated string (caller frees). */
char *pysource_text(const pysource *src, TSNode node);

/* 1 when the node's text equals `s`. */
int pysource_text_eq(const pysource *src, TSNode node, const char *s);

/* What a pysource_walk() visitor returns for a node. */
enum {
	PYSOURCE_WALK_SKIP = 0,    /* do not look below this node */
	PYSOURCE_WALK_DESCEND = 1, /* visit its children too */
	PYSOURCE_WALK_STOP = 2,    /* done: pysource_walk returns PYSOURCE_WALK_STOP */
};

/*
 * Visits `root` and the nodes below it in source order, with a tree cursor
 * rather than recursion: input may nest a hundred thousand levels deep, and
 * a recursive walk overflows the stack there. `visit` returns one of the
 * values above, or a negative value to stop with that value (an error).
 * Returns 0 when the walk ran to the end.
 */
int pysource_walk(TSNode root, int (*visit)(TSNode node, void *user), void *user);

/* What a physical line starts inside of, by Python's tokenizer rules. */
enum {
	PYSOURCE_LINE_CODE = 0,      /* a fresh logical line: a `#` first on it starts a comment */
	PYSOURCE_LINE_CONTINUED = 1, /* inside brackets or after a backslash: still one logical line */
	PYSOURCE_LINE_STRING = 2,    /* inside a string literal (a triple-quoted one, or escaped newline) */
};

/*
 * Classifies every line of buf (line i starts after the i-th '\n') without
 * parsing: a small tokenizer that knows strings (prefixes, triple quotes,
 * escapes), comments, brackets and backslash continuations. Shared by region
 * scanning (a marker-shaped line inside a string is text, not a marker) and
 * the indentation check. *kinds (one byte a line, caller frees) and *n.
 * Returns -1 only when memory runs out.
 */
int pysource_line_kinds(const char *buf, size_t len, unsigned char **kinds, size_t *n);

/*
 * The largest Python source oeapatch reads, in bytes: 8 MiB, about 130 times
 * the largest real topk.py (about 60 kB). Memory grows with the input (about
 * 40 bytes per byte at peak: the tree-sitter trees of the original and the
 * patched text, docs/performance.md), so without a limit a 50 MB file took
 * 1.9 GB; just under the limit apply peaks at about 310 MB. apply also
 * refuses a result above it, so whatever it writes can be read back.
 */
#define PYSOURCE_MAX_BYTES ((size_t)8 << 20)

/* Refuses `len` above PYSOURCE_MAX_BYTES (OEAP_ERR_INPUT, naming `what`, the
 * size and the limit); 0 when it fits. Every command calls it on the bytes it
 * read before any other work, so nothing is parsed or written above it. */
int pysource_check_size(size_t len, const char *what, oeap_error *err);

/* Checks buf for what parsing refuses, without parsing (shared with region scanning). */
int pysource_check_bytes(const char *buf, size_t len, const char *what, const char **eol,
                         oeap_error *err);

#endif
