/*
 * region.h - the marked regions oeapatch inserts, found again by their markers.
 *
 * A region is whole lines: a begin marker, the inserted body, an end marker,
 * each line indented like the place it was inserted:
 *
 *     # >>> oeapatch sglang-oea/2 callsite sha256:0123456789abcdef >>>
 *     ...body...
 *     # <<< oeapatch sglang-oea/2 callsite <<<
 *
 * The hash is the first 16 hex digits of the SHA-256 of the body bytes
 * (indentation included, CRLF read as LF so that git's autocrlf does not
 * change it), so any edit by hand shows. Removing a region's lines gives back the original bytes.
 */
#ifndef OEAP_REGION_H
#define OEAP_REGION_H

#include <stddef.h>

#include "buf.h"
#include "error.h"

#define OEAP_HASH_HEX 16

typedef struct oeap_region {
	char patch[64];
	int version;
	char name[64];
	char hash[OEAP_HASH_HEX + 1]; /* as recorded in the begin marker */
	char actual[OEAP_HASH_HEX + 1]; /* of the body as it is now (CRLF read as LF) */
	char raw[OEAP_HASH_HEX + 1];    /* of the body's bytes as they are (what versions before
	                                   the normalised hash recorded; == actual without CRs) */
	size_t start, end;            /* whole region: begin marker line .. past end marker line */
	size_t body_start, body_end;  /* the lines between the markers */
	size_t begin_marker_col;      /* offset of '#' in the begin marker line */
	size_t end_marker_col;        /* offset of '#' in the end marker line */
	long begin_line, end_line;    /* 1-based */
} oeap_region;

typedef struct oeap_regions {
	oeap_region *items;
	size_t n;
} oeap_regions;

/* 1 when the region's body still hashes to what its marker recorded (the
 * normalised hash, or the raw one that older versions recorded). */
int oeap_region_intact(const oeap_region *r);

/*
 * Finds every oeapatch region in buf (any patch, any version). Refuses
 * malformed, unterminated, nested or duplicated markers, naming the lines.
 */
int oeap_regions_scan(const char *buf, size_t len, oeap_regions *out, oeap_error *err);
void oeap_regions_free(oeap_regions *rs);

/* The regions of one patch (by name) in `rs`; returns how many. */
size_t oeap_regions_count(const oeap_regions *rs, const char *patch);
const oeap_region *oeap_regions_find(const oeap_regions *rs, const char *patch, const char *name);

/* Hashes body bytes into hex (OEAP_HASH_HEX digits + NUL). */
int oeap_region_hash(const char *body, size_t len, char hex[OEAP_HASH_HEX + 1]);

/*
 * Appends a whole region to `out`: markers and `body` (already indented and
 * with the file's line ends), each marker prefixed with `indent`.
 */
int oeap_region_render(oeap_buf *out, const char *patch, int version, const char *name,
                       const char *indent, const char *eol, const char *body, size_t body_len);

/* Copies buf without the regions of `patch` (all of them) into *out. */
int oeap_regions_strip(const char *buf, size_t len, const oeap_regions *rs, const char *patch,
                       oeap_buf *out);

#endif
