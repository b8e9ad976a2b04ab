#include "region.h"

/* SHA256_Init/Update/Final: deprecated in OpenSSL 3 in favour of EVP, whose
 * first use in a process fetches the algorithm from the default provider
 * (5 M instructions, more than the rest of hashing a region and the binding
 * module: docs/performance.md). The same digest, computed by the same code. */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pysource.h"

#define BEGIN_TAG "# >>> oeapatch "
#define END_TAG "# <<< oeapatch "

/*
 * The hash is over the body with CRLF line ends read as LF: git with
 * core.autocrlf=true stores LF and checks out CRLF, and a region is the same
 * region in both (otherwise a correctly committed patch reads as "edited by
 * hand" at the revision, or in the work tree). The file's line ends stay a
 * matter of the content check, which renders them for the file at hand.
 */
int oeap_region_hash(const char *body, size_t len, char hex[OEAP_HASH_HEX + 1])
{
	unsigned char md[SHA256_DIGEST_LENGTH];
	SHA256_CTX ctx;
	if (!SHA256_Init(&ctx))
		return -1;
	for (size_t at = 0; at < len;) {
		const char *cr = memchr(body + at, '\r', len - at);
		size_t run = cr ? (size_t)(cr - body) - at : len - at;
		if (cr && (size_t)(cr - body) + 1 < len && cr[1] == '\n') {
			if (!SHA256_Update(&ctx, body + at, run))
				return -1;
			at += run + 1; /* the '\n' starts the next run */
			continue;
		}
		run += cr ? 1 : 0; /* a bare CR is content */
		if (!SHA256_Update(&ctx, body + at, run))
			return -1;
		at += run;
	}
	if (!SHA256_Final(md, &ctx))
		return -1;
	for (int i = 0; i < OEAP_HASH_HEX / 2; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	hex[OEAP_HASH_HEX] = '\0';
	return 0;
}

/* The hash of the bytes exactly as written: what versions before the
 * normalised hash recorded (a CRLF file patched by them is still intact). */
static int raw_hash(const char *body, size_t len, char hex[OEAP_HASH_HEX + 1])
{
	unsigned char md[SHA256_DIGEST_LENGTH];
	SHA256_CTX ctx;
	if (!SHA256_Init(&ctx) || !SHA256_Update(&ctx, body, len) || !SHA256_Final(md, &ctx))
		return -1;
	for (int i = 0; i < OEAP_HASH_HEX / 2; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	hex[OEAP_HASH_HEX] = '\0';
	return 0;
}

int oeap_region_intact(const oeap_region *r)
{
	return strcmp(r->hash, r->actual) == 0 || strcmp(r->hash, r->raw) == 0;
}

/* One line of buf: [s, e) without its line end, next = start of the next line. */
typedef struct line {
	size_t s, e, next;
	long no;
} line;

static int next_line(const char *buf, size_t len, line *l)
{
	if (l->next >= len)
		return 0;
	l->s = l->next;
	const char *nl = memchr(buf + l->s, '\n', len - l->s);
	l->next = nl ? (size_t)(nl - buf) + 1 : len;
	l->e = nl ? (size_t)(nl - buf) : len;
	if (l->e > l->s && buf[l->e - 1] == '\r')
		l->e--;
	l->no++;
	return 1;
}

/* Parses "<patch>/<version> <name>" followed by `tail`; 0 when malformed. */
static int parse_ident(const char *p, size_t n, oeap_region *r, const char **rest)
{
	char tmp[256];
	if (n >= sizeof(tmp))
		return 0;
	memcpy(tmp, p, n);
	tmp[n] = '\0';
	int used = 0;
	if (sscanf(tmp, "%63[a-z0-9-]/%d %63[A-Za-z0-9_]%n", r->patch, &r->version, r->name, &used) != 3 ||
	    r->version < 1)
		return 0;
	*rest = p + used;
	return 1;
}

int oeap_regions_scan(const char *buf, size_t len, oeap_regions *out, oeap_error *err)
{
	line l = {0, 0, 0, 0};
	oeap_region open;
	int is_open = 0;
	unsigned char *kinds = NULL;
	size_t nkinds = 0;
	memset(out, 0, sizeof(*out));
	memset(&open, 0, sizeof(open));
	/* Only comment lines are markers: a marker-shaped line inside a string
	 * or docstring is the string's text, neither read nor ever removed. */
	if (oeap_pysource_line_kinds(buf, len, &kinds, &nkinds))
		goto oom;

	while (next_line(buf, len, &l)) {
		size_t i = l.s;
		if ((size_t)l.no <= nkinds && kinds[l.no - 1] == OEAP_PYSOURCE_LINE_STRING)
			continue;
		while (i < l.e && (buf[i] == ' ' || buf[i] == '\t'))
			i++;
		size_t n = l.e - i;
		int is_begin = n >= strlen(BEGIN_TAG) && memcmp(buf + i, BEGIN_TAG, strlen(BEGIN_TAG)) == 0;
		int is_end = n >= strlen(END_TAG) && memcmp(buf + i, END_TAG, strlen(END_TAG)) == 0;
		if (!is_begin && !is_end)
			continue;
		const char *p = buf + i + strlen(BEGIN_TAG);
		size_t pn = l.e - (i + strlen(BEGIN_TAG));
		oeap_region r;
		const char *rest = NULL;
		memset(&r, 0, sizeof(r));
		if (!parse_ident(p, pn, &r, &rest))
			goto malformed;
		size_t restn = (size_t)(buf + l.e - rest);
		if (is_begin) {
			char hash[OEAP_HASH_HEX + 1];
			int used = 0;
			char tail[64];
			if (restn >= sizeof(tail))
				goto malformed;
			memcpy(tail, rest, restn);
			tail[restn] = '\0';
			if (sscanf(tail, " sha256:%16[0-9a-f] >>>%n", hash, &used) != 1 || (size_t)used != restn ||
			    strlen(hash) != OEAP_HASH_HEX)
				goto malformed;
			if (is_open) {
				oeap_fail(err, OEAP_ERR_REGION, "region markers", l.no,
				          "nested region: line %ld opens '%s' inside region '%s' opened at line %ld "
				          "and never closed before it",
				          l.no, r.name, open.name, open.begin_line);
				goto fail;
			}
			memcpy(r.hash, hash, sizeof(hash));
			r.start = l.s;
			r.body_start = l.next;
			r.begin_marker_col = i;
			r.begin_line = l.no;
			open = r;
			is_open = 1;
		} else {
			if (restn != 4 || memcmp(rest, " <<<", 4) != 0)
				goto malformed;
			if (!is_open) {
				oeap_fail(err, OEAP_ERR_REGION, "region markers", l.no,
				          "line %ld closes region '%s' that was never opened", l.no, r.name);
				goto fail;
			}
			if (strcmp(open.patch, r.patch) || open.version != r.version || strcmp(open.name, r.name)) {
				oeap_fail(err, OEAP_ERR_REGION, "region markers", l.no,
				          "line %ld closes '%s/%d %s' but the open region (line %ld) is '%s/%d %s'", l.no,
				          r.patch, r.version, r.name, open.begin_line, open.patch, open.version, open.name);
				goto fail;
			}
			open.body_end = l.s;
			open.end = l.next;
			open.end_marker_col = i;
			open.end_line = l.no;
			if (oeap_region_hash(buf + open.body_start, open.body_end - open.body_start, open.actual))
				goto oom;
			memcpy(open.raw, open.actual, sizeof(open.raw));
			if (memchr(buf + open.body_start, '\r', open.body_end - open.body_start) &&
			    raw_hash(buf + open.body_start, open.body_end - open.body_start, open.raw))
				goto oom;
			for (size_t k = 0; k < out->n; k++)
				if (strcmp(out->items[k].patch, open.patch) == 0 &&
				    strcmp(out->items[k].name, open.name) == 0) {
					oeap_fail(err, OEAP_ERR_REGION, "region markers", open.begin_line,
					          "region '%s' of %s appears twice (lines %ld and %ld): remove the duplicate "
					          "by hand or restore the file from version control",
					          open.name, open.patch, out->items[k].begin_line, open.begin_line);
					goto fail;
				}
			oeap_region *items = realloc(out->items, (out->n + 1) * sizeof(*items));
			if (!items)
				goto oom;
			out->items = items;
			out->items[out->n++] = open;
			is_open = 0;
		}
		continue;
	malformed:
		oeap_fail(err, OEAP_ERR_REGION, "region markers", l.no,
		          "line %ld looks like an oeapatch marker but is malformed: %.*s", l.no,
		          (int)(l.e - i > 120 ? 120 : l.e - i), buf + i);
		goto fail;
	}
	if (is_open) {
		oeap_fail(err, OEAP_ERR_REGION, "region markers", open.begin_line,
		          "region '%s' opened at line %ld is never closed", open.name, open.begin_line);
		goto fail;
	}
	free(kinds);
	return 0;
oom:
	oeap_fail(err, OEAP_ERR_INTERNAL, "region markers", 0, "out of memory");
fail:
	free(kinds);
	oeap_regions_free(out);
	return -1;
}

void oeap_regions_free(oeap_regions *rs)
{
	free(rs->items);
	rs->items = NULL;
	rs->n = 0;
}

size_t oeap_regions_count(const oeap_regions *rs, const char *patch)
{
	size_t c = 0;
	for (size_t i = 0; i < rs->n; i++)
		c += strcmp(rs->items[i].patch, patch) == 0;
	return c;
}

const oeap_region *oeap_regions_find(const oeap_regions *rs, const char *patch, const char *name)
{
	for (size_t i = 0; i < rs->n; i++)
		if (strcmp(rs->items[i].patch, patch) == 0 && strcmp(rs->items[i].name, name) == 0)
			return &rs->items[i];
	return NULL;
}

int oeap_region_render(oeap_buf *out, const char *patch, int version, const char *name,
                       const char *indent, const char *eol, const char *body, size_t body_len)
{
	char hash[OEAP_HASH_HEX + 1];
	if (oeap_region_hash(body, body_len, hash))
		return -1;
	if (oeap_buf_printf(out, "%s" BEGIN_TAG "%s/%d %s sha256:%s >>>%s", indent, patch, version, name, hash,
	                    eol) ||
	    oeap_buf_put(out, body, body_len) ||
	    oeap_buf_printf(out, "%s" END_TAG "%s/%d %s <<<%s", indent, patch, version, name, eol))
		return -1;
	return 0;
}

int oeap_regions_strip(const char *buf, size_t len, const oeap_regions *rs, const char *patch,
                       oeap_buf *out)
{
	size_t at = 0;
	/* Regions are recorded in file order and never overlap (scan refuses nesting). */
	for (size_t i = 0; i < rs->n; i++) {
		const oeap_region *r = &rs->items[i];
		if (strcmp(r->patch, patch) != 0)
			continue;
		if (oeap_buf_put(out, buf + at, r->start - at))
			return -1;
		at = r->end;
	}
	return oeap_buf_put(out, buf + at, len - at);
}
