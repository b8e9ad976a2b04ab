/*
 * fuzz_regions - the marker/region reader (src/region.c) on arbitrary bytes.
 *
 * For any input, oeap_regions_scan() either refuses with an error kind, a
 * message and a line, or returns regions that
 *   - lie inside the buffer, in file order, without overlapping;
 *   - are whole lines (start at a line start, end after a line end or at EOF);
 *   - have begin <= body <= end offsets and lines that match the offsets;
 *   - carry a recorded hash and an actual hash of 16 hex digits, the actual
 *     one being the SHA-256 of the body as it is;
 *   - are unique per (patch, name).
 * Stripping a patch's regions removes exactly their bytes, and scanning the
 * result finds none of that patch. Rendering a region from the input's
 * bytes and scanning it back finds it, intact, with the same body.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pysource.h"
#include "region.h"

#define CHECK(cond, ...)                                                 \
	do {                                                                 \
		if (!(cond)) {                                                   \
			fprintf(stderr, "fuzz_regions: %s: ", #cond);                \
			fprintf(stderr, __VA_ARGS__);                                \
			fputc('\n', stderr);                                         \
			__builtin_trap();                                            \
		}                                                                \
	} while (0)

static long line_of(const char *buf, size_t off)
{
	long line = 1;
	for (size_t i = 0; i < off; i++)
		line += buf[i] == '\n';
	return line;
}

static int is_hex16(const char *h)
{
	if (strlen(h) != OEAP_HASH_HEX)
		return 0;
	for (const char *p = h; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return 0;
	return 1;
}

static void check_regions(const char *buf, size_t len, const oeap_regions *rs)
{
	size_t prev_end = 0;
	for (size_t i = 0; i < rs->n; i++) {
		const oeap_region *r = &rs->items[i];
		CHECK(r->start >= prev_end, "region %zu overlaps the one before", i);
		CHECK(r->start <= r->body_start && r->body_start <= r->body_end && r->body_end <= r->end &&
		          r->end <= len,
		      "region %zu offsets out of order: %zu %zu %zu %zu (len %zu)", i, r->start, r->body_start,
		      r->body_end, r->end, len);
		CHECK(r->start == 0 || buf[r->start - 1] == '\n', "region %zu does not start a line", i);
		CHECK(r->end == len || buf[r->end - 1] == '\n', "region %zu does not end a line", i);
		CHECK(r->body_start > r->start && buf[r->body_start - 1] == '\n', "region %zu: begin marker not a line", i);
		CHECK(r->begin_marker_col >= r->start && r->begin_marker_col < r->body_start &&
		          buf[r->begin_marker_col] == '#',
		      "region %zu: begin marker column", i);
		CHECK(r->end_marker_col >= r->body_end && r->end_marker_col < r->end && buf[r->end_marker_col] == '#',
		      "region %zu: end marker column", i);
		CHECK(r->begin_line == line_of(buf, r->start) && r->end_line == line_of(buf, r->body_end),
		      "region %zu: lines %ld-%ld do not match its offsets", i, r->begin_line, r->end_line);
		CHECK(r->version >= 1 && r->patch[0] && r->name[0], "region %zu: empty identity", i);
		CHECK(memchr(r->patch, '\0', sizeof(r->patch)) && memchr(r->name, '\0', sizeof(r->name)),
		      "region %zu: identity not terminated", i);
		CHECK(is_hex16(r->hash) && is_hex16(r->actual), "region %zu: hashes not 16 hex digits", i);
		char h[OEAP_HASH_HEX + 1];
		CHECK(oeap_region_hash(buf + r->body_start, r->body_end - r->body_start, h) == 0 &&
		          strcmp(h, r->actual) == 0,
		      "region %zu: actual hash is not the body's", i);
		CHECK(is_hex16(r->raw), "region %zu: raw hash not 16 hex digits", i);
		CHECK(memchr(buf + r->body_start, '\r', r->body_end - r->body_start) || strcmp(r->raw, r->actual) == 0,
		      "region %zu: raw and normalised hashes differ on a body without CR", i);
		CHECK(oeap_region_intact(r) == (strcmp(r->hash, r->actual) == 0 || strcmp(r->hash, r->raw) == 0),
		      "region %zu: intact()", i);
		for (size_t k = 0; k < i; k++)
			CHECK(strcmp(rs->items[k].patch, r->patch) || strcmp(rs->items[k].name, r->name),
			      "region %zu duplicates region %zu", i, k);
		CHECK(oeap_regions_find(rs, r->patch, r->name) == r, "find() does not return region %zu", i);
		prev_end = r->end;
	}
}

static void check_strip(const char *buf, size_t len, const oeap_regions *rs)
{
	for (size_t i = 0; i < rs->n; i++) {
		const char *patch = rs->items[i].patch;
		size_t removed = 0;
		for (size_t k = 0; k < rs->n; k++)
			if (strcmp(rs->items[k].patch, patch) == 0)
				removed += rs->items[k].end - rs->items[k].start;
		oeap_buf out = OEAP_BUF_INIT;
		CHECK(oeap_regions_strip(buf, len, rs, patch, &out) == 0, "strip failed");
		CHECK(out.len == len - removed, "strip removed %zu bytes, the regions hold %zu", len - out.len, removed);
		oeap_regions again = {0};
		oeap_error err;
		oeap_error_clear(&err);
		/* Whole lines out: what is left scans, and holds no region of that patch. */
		CHECK(oeap_regions_scan(out.data ? out.data : "", out.len, &again, &err) == 0,
		      "the stripped file no longer scans: line %ld: %s", err.line, err.message);
		CHECK(oeap_regions_count(&again, patch) == 0, "strip left regions of %s", patch);
		CHECK(again.n == rs->n - oeap_regions_count(rs, patch), "strip changed other patches' regions");
		oeap_regions_free(&again);
		oeap_buf_free(&out);
	}
}

/* Render a region whose body is the input's lines (marker-shaped lines
 * dropped: a body may not hold markers) and read it back. */
static void check_render(const char *buf, size_t len)
{
	oeap_buf body = OEAP_BUF_INIT, file = OEAP_BUF_INIT;
	const char *eol = memchr(buf, '\r', len) ? "\r\n" : "\n";
	for (size_t i = 0; i < len;) {
		const char *nl = memchr(buf + i, '\n', len - i);
		size_t n = nl ? (size_t)(nl - (buf + i)) + 1 : len - i;
		if (!memmem(buf + i, n, "oeapatch", 8)) {
			CHECK(oeap_buf_put(&body, buf + i, n) == 0, "oom");
			if (!nl)
				CHECK(oeap_buf_puts(&body, eol) == 0, "oom");
		}
		i += n;
	}
	/* Only comment lines are markers: a body that leaves a string open (an
	 * unclosed triple quote) makes the end marker the string's text, and no
	 * template that parses does that. Such bodies have nothing to read back. */
	unsigned char *kinds = NULL;
	size_t nkinds = 0;
	CHECK(oeap_pysource_line_kinds(body.data ? body.data : "", body.len, &kinds, &nkinds) == 0, "oom");
	int open_string = kinds[nkinds - 1] == OEAP_PYSOURCE_LINE_STRING;
	free(kinds);
	if (open_string) {
		oeap_buf_free(&body);
		return;
	}
	CHECK(oeap_buf_puts(&file, "x = 1\n") == 0, "oom");
	size_t start = file.len;
	CHECK(oeap_region_render(&file, "fuzz-patch", 3, "fuzz_region", "    ", eol, body.data ? body.data : "",
	                         body.len) == 0,
	      "render failed");
	CHECK(oeap_buf_puts(&file, "y = 2\n") == 0, "oom");

	oeap_regions rs = {0};
	oeap_error err;
	oeap_error_clear(&err);
	CHECK(oeap_regions_scan(file.data, file.len, &rs, &err) == 0, "a rendered region does not scan: line %ld: %s",
	      err.line, err.message);
	CHECK(rs.n == 1, "rendered one region, scanned %zu", rs.n);
	const oeap_region *r = &rs.items[0];
	CHECK(r->start == start && strcmp(r->patch, "fuzz-patch") == 0 && r->version == 3 &&
	          strcmp(r->name, "fuzz_region") == 0 && oeap_region_intact(r),
	      "the rendered region reads back differently");
	CHECK(r->body_end - r->body_start == body.len &&
	          (body.len == 0 || memcmp(file.data + r->body_start, body.data, body.len) == 0),
	      "the rendered body reads back differently");
	oeap_regions_free(&rs);
	oeap_buf_free(&body);
	oeap_buf_free(&file);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = malloc(size + 1);
	if (!buf)
		return 0;
	if (size)
		memcpy(buf, data, size);
	buf[size] = '\0';

	oeap_regions rs = {0};
	oeap_error err;
	oeap_error_clear(&err);
	if (oeap_regions_scan(buf, size, &rs, &err)) {
		CHECK(err.kind != OEAP_ERR_NONE && err.message[0], "scan refused without a reason");
		CHECK(err.kind == OEAP_ERR_REGION, "scan refused with kind %d: %s", (int)err.kind, err.message);
		CHECK(err.line >= 1 && err.line <= line_of(buf, size) + 1, "refusal names line %ld", err.line);
		CHECK(rs.n == 0 && rs.items == NULL, "a refused scan left regions behind");
	} else {
		check_regions(buf, size, &rs);
		check_strip(buf, size, &rs);
	}
	oeap_regions_free(&rs);
	check_render(buf, size);
	free(buf);
	return 0;
}
