#include "buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int oeap_buf_grow(oeap_buf *b, size_t extra)
{
	if (b->len + extra + 1 <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 64;
	while (cap < b->len + extra + 1) {
		if (cap > ((size_t)-1) / 2)
			return -1;
		cap *= 2;
	}
	char *p = realloc(b->data, cap);
	if (!p)
		return -1;
	b->data = p;
	b->cap = cap;
	return 0;
}

int oeap_buf_put(oeap_buf *b, const void *data, size_t len)
{
	if (oeap_buf_grow(b, len))
		return -1;
	if (len)
		memcpy(b->data + b->len, data, len);
	b->len += len;
	b->data[b->len] = '\0';
	return 0;
}

int oeap_buf_puts(oeap_buf *b, const char *s)
{
	return oeap_buf_put(b, s, strlen(s));
}

int oeap_buf_printf(oeap_buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || oeap_buf_grow(b, (size_t)n))
		return -1;
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

char *oeap_buf_detach(oeap_buf *b, size_t *len)
{
	if (!b->data && oeap_buf_grow(b, 0))
		return NULL;
	char *p = b->data;
	if (len)
		*len = b->len;
	b->data = NULL;
	b->len = b->cap = 0;
	return p;
}

void oeap_buf_free(oeap_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}
