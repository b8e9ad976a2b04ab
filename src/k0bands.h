/*
 * k0bands.h - k0 by batch size: the K0 value "1-7:0,8-31:4,32-:3" that
 * `oeapatch replay --recommend` prints (recommend.h) and `replay --bands`
 * evaluates on recorded traffic. A call takes the k0 of the band its rows
 * fall in; 0 is off. A single number is one band for every size.
 */
#ifndef OEAP_K0BANDS_H
#define OEAP_K0BANDS_H

#include <stddef.h>

#define OEAP_K0_MAX_BANDS 32

typedef struct oeap_k0_band {
	int lo, hi; /* rows [lo, hi]; hi 0: no upper end */
	int k0;     /* 0: off */
} oeap_k0_band;

typedef struct oeap_k0_bands {
	oeap_k0_band band[OEAP_K0_MAX_BANDS];
	size_t n;
} oeap_k0_bands;

/*
 * Parses `s`: a number, or bands LO-HI:K0 separated by commas, the first
 * from 1, each starting right after the one before, the last open (LO-:K0).
 * Every k0 in 0..max_k0. Returns 0, or -1 with `why` (a sentence naming the
 * offending band) filled.
 */
int oeap_k0_bands_parse(const char *s, int max_k0, oeap_k0_bands *out, char *why, size_t whylen);

/* The k0 for a call of `rows` valid rows (0: off). */
int oeap_k0_bands_pick(const oeap_k0_bands *b, int rows);

#endif
