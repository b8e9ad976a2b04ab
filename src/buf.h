/*
 * buf.h - a growable byte buffer (always NUL-terminated for convenience;
 * the NUL is not counted in len, and data may contain NULs).
 */
#ifndef OEAP_BUF_H
#define OEAP_BUF_H

#include <stdarg.h>
#include <stddef.h>

typedef struct oeap_buf {
	char *data;
	size_t len;
	size_t cap;
} oeap_buf;

#define OEAP_BUF_INIT {NULL, 0, 0}

/* Each returns 0, or -1 when memory ran out (the buffer is left as it was). */
int oeap_buf_grow(oeap_buf *b, size_t extra);
int oeap_buf_put(oeap_buf *b, const void *data, size_t len);
int oeap_buf_puts(oeap_buf *b, const char *s);
int oeap_buf_printf(oeap_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Hands the data to the caller (who frees it) and resets the buffer. */
char *oeap_buf_detach(oeap_buf *b, size_t *len);
void oeap_buf_free(oeap_buf *b);

#endif
