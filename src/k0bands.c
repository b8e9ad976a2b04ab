/*
 * k0bands.c - the K0 bands value (k0bands.h). Strict: the bands must cover
 * every batch size from 1 up exactly once, so that no size is left to a
 * default nobody wrote.
 */
#include "k0bands.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* A decimal number without sign or blanks at *p, in [lo, hi]; advances *p. */
static int number(const char **p, long lo, long hi, long *out)
{
	const char *s = *p;
	if (*s < '0' || *s > '9')
		return -1;
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || v < lo || v > hi)
		return -1;
	*p = end;
	*out = v;
	return 0;
}

int oeap_k0_bands_parse(const char *s, int max_k0, oeap_k0_bands *out, char *why, size_t whylen)
{
	out->n = 0;
	const char *p = s;
	long v;
	if (number(&p, 0, max_k0, &v) == 0 && *p == '\0') {
		out->band[out->n++] = (oeap_k0_band){1, 0, (int)v};
		return 0;
	}
	p = s;
	long next = 1;
	for (size_t i = 0;; i++) {
		const char *start = p;
		long lo, hi = 0, k0;
		if (number(&p, 1, 1L << 20, &lo) || *p++ != '-') {
			snprintf(why, whylen, "band %zu ('%.20s'): expected LO-HI:K0 or LO-:K0, or one number from 0 to %d", i + 1,
			         start, max_k0);
			return -1;
		}
		if (*p != ':' && number(&p, lo, 1L << 20, &hi)) {
			snprintf(why, whylen, "band %zu: its upper end must be a number not below %ld", i + 1, lo);
			return -1;
		}
		if (*p++ != ':' || number(&p, 0, max_k0, &k0)) {
			snprintf(why, whylen, "band %zu: ':' and a k0 from 0 to %d must follow the sizes", i + 1, max_k0);
			return -1;
		}
		if (lo != next) {
			if (next == 1)
				snprintf(why, whylen, "band 1 starts at %ld: the first band must start at 1", lo);
			else
				snprintf(why, whylen, "band %zu starts at %ld, not at %ld, right after the band before it", i + 1,
				         lo, next);
			return -1;
		}
		if (out->n == OEAP_K0_MAX_BANDS) {
			snprintf(why, whylen, "at most %d bands", OEAP_K0_MAX_BANDS);
			return -1;
		}
		out->band[out->n++] = (oeap_k0_band){(int)lo, (int)hi, (int)k0};
		if (*p == '\0') {
			if (hi) {
				snprintf(why, whylen, "the last band ends at %ld: it must be open (%ld-:%ld) so that every batch "
				                      "size has a k0",
				         hi, lo, k0);
				return -1;
			}
			return 0;
		}
		if (*p++ != ',' || !hi) {
			snprintf(why, whylen, "band %zu: %s", i + 1,
			         hi ? "bands are separated by ','" : "only the last band may be open");
			return -1;
		}
		next = hi + 1;
	}
}

int oeap_k0_bands_pick(const oeap_k0_bands *b, int rows)
{
	for (size_t i = 0; i < b->n; i++)
		if (rows >= b->band[i].lo && (!b->band[i].hi || rows <= b->band[i].hi))
			return b->band[i].k0;
	return 0; /* 0 rows: below every band */
}
