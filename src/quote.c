#include "quote.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "buf.h"

size_t oeap_utf8_seq(const char *s, size_t left)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t len;
	uint32_t cp;
	if (!left)
		return 0;
	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf) {
		len = 2;
		cp = p[0] & 0x1f;
	} else if (p[0] >= 0xe0 && p[0] <= 0xef) {
		len = 3;
		cp = p[0] & 0x0f;
	} else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
		len = 4;
		cp = p[0] & 0x07;
	} else {
		return 0;
	}
	if (left < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return len;
}

/* U+FFFE or U+FFFF: valid UTF-8, but no character (XML 1.0 refuses them). */
static int noncharacter(const unsigned char *p, size_t len)
{
	return len == 3 && p[0] == 0xef && p[1] == 0xbf && (p[2] == 0xbe || p[2] == 0xbf);
}

int oeap_quote_needed(const char *s, size_t n, oeap_quote_for fmt)
{
	/* A string between single quotes would read as a quoted form: it is
	 * quoted itself, so every shown string decodes one way. */
	if (n && s[0] == '\'' && s[n - 1] == '\'')
		return 1;
	for (size_t i = 0; i < n;) {
		const unsigned char *p = (const unsigned char *)s + i;
		size_t len = oeap_utf8_seq(s + i, n - i);
		if (!len)
			return 1;
		if (fmt == OEAP_QUOTE_XML &&
		    (noncharacter(p, len) || (p[0] < 0x20 && p[0] != '\t' && p[0] != '\n' && p[0] != '\r')))
			return 1;
		i += len;
	}
	return 0;
}

char *oeap_quote(const char *s, size_t n)
{
	oeap_buf b = OEAP_BUF_INIT;
	int rc = oeap_buf_put(&b, "'", 1);
	for (size_t i = 0; i < n && !rc;) {
		const unsigned char *p = (const unsigned char *)s + i;
		size_t len = oeap_utf8_seq(s + i, n - i);
		if (len > 1 && !noncharacter(p, len)) {
			rc = oeap_buf_put(&b, p, len);
			i += len;
			continue;
		}
		if (len > 1) { /* a noncharacter: each of its bytes */
			rc = oeap_buf_printf(&b, "\\x%02x\\x%02x\\x%02x", p[0], p[1], p[2]);
			i += len;
			continue;
		}
		if (p[0] == '\\' || p[0] == '\'')
			rc = oeap_buf_printf(&b, "\\%c", p[0]);
		else if (p[0] < 0x20 || p[0] >= 0x7f)
			rc = oeap_buf_printf(&b, "\\x%02x", p[0]);
		else
			rc = oeap_buf_put(&b, p, 1);
		i++;
	}
	if (rc || oeap_buf_put(&b, "'", 1)) {
		oeap_buf_free(&b);
		return NULL;
	}
	return oeap_buf_detach(&b, NULL);
}

void oeap_shell_word(char *out, size_t cap, const char *s)
{
	if (!cap)
		return;
	/* The binding's _shell_word() has the same plain set: its trust messages
	 * and verify's must be the same text (test_trust_crosscheck.py). */
	if (*s && s[strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/._-+")] == '\0') {
		snprintf(out, cap, "%s", s);
		return;
	}
	size_t n = 0;
	out[0] = '\0';
	if (cap < 3)
		return;
	out[n++] = '\'';
	for (; *s && n + 5 < cap; s++) {
		if (*s == '\'') {
			memcpy(out + n, "'\\''", 4);
			n += 4;
		} else {
			out[n++] = *s;
		}
	}
	out[n++] = '\'';
	out[n] = '\0';
}
