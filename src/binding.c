#include "binding.h"

#include <dlfcn.h>
/* The low-level SHA-256 calls, not EVP's: see region.c. */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsio.h"
#include "library.h"
#include "libsearch.h"
#include "oea.h"
#include "pysource.h"
#include "trust.h"

static int put_literal(oeap_buf *b, const char *s)
{
	if (oeap_buf_put(b, "'", 1))
		return -1;
	for (; *s; s++) {
		if ((*s == '\\' || *s == '\'') && oeap_buf_put(b, "\\", 1))
			return -1;
		if (oeap_buf_put(b, s, 1))
			return -1;
	}
	return oeap_buf_put(b, "'", 1);
}

/*
 * The scalar fields of oea_problem that [library] problem_probe may set, laid
 * out as native/include/oea.h says (the binding's ctypes mirror is held to
 * the same header by tests/e2e/test_binding.py). struct_size is the
 * definition's problem_size; pointers stay NULL (a call of n = 0 reads none).
 */
typedef struct probe_field_info {
	const char *name;
	size_t offset, size;
	int is_unsigned;
} probe_field_info;

#define PROBE_FIELD(f, u) {#f, offsetof(oea_problem, f), sizeof(((oea_problem *)0)->f), u}
static const probe_field_info PROBE_FIELDS[] = {
	PROBE_FIELD(flags, 1),          PROBE_FIELD(n, 0),                  PROBE_FIELD(num_experts, 0),
	PROBE_FIELD(top_k, 0),          PROBE_FIELD(num_shared, 0),         PROBE_FIELD(k0, 0),
	PROBE_FIELD(scoring, 0),        PROBE_FIELD(renormalize, 0),        PROBE_FIELD(num_expert_group, 0),
	PROBE_FIELD(topk_group, 0),     PROBE_FIELD(logits_dtype, 0),       PROBE_FIELD(logits_row_stride, 0),
	PROBE_FIELD(ids_dtype, 0),      PROBE_FIELD(weights_dtype, 0),      PROBE_FIELD(ids_row_stride, 0),
	PROBE_FIELD(weights_row_stride, 0), PROBE_FIELD(min_valid_rows, 0), PROBE_FIELD(reserved_abi2, 0),
};

/* The field `f` names, checked against the definition's block, or NULL with the reason in `why`. */
static const probe_field_info *probe_field(const oeap_patchdef *def, const oeap_probe_field *f, char *why, size_t cap)
{
	const probe_field_info *info = NULL;
	for (size_t i = 0; i < sizeof(PROBE_FIELDS) / sizeof(PROBE_FIELDS[0]); i++)
		if (strcmp(PROBE_FIELDS[i].name, f->name) == 0)
			info = &PROBE_FIELDS[i];
	long long lo = info && info->is_unsigned ? 0 : info && info->size == 4 ? INT32_MIN : INT64_MIN;
	long long hi = info && info->is_unsigned ? (long long)UINT32_MAX : info && info->size == 4 ? INT32_MAX : INT64_MAX;
	if (!info)
		snprintf(why, cap, "[library] problem_probe: %s is no scalar field of oea_problem (native/include/oea.h)",
		         f->name);
	else if (info->offset + info->size > (size_t)def->problem_size)
		snprintf(why, cap, "[library] problem_probe: %s lies beyond problem_size (%d bytes)", f->name,
		         def->problem_size);
	else if (f->value < lo || f->value > hi)
		snprintf(why, cap, "[library] problem_probe: %s=%lld does not fit the field", f->name, f->value);
	else
		return info;
	return NULL;
}

/* {{library_symbols}}, {{problem_size}}, {{problem_probe}}: the [library] contract as Python literals. */
static int render_contract(const oeap_patchdef *def, const char *k, size_t kn, oeap_buf *out, oeap_error *err)
{
	char why[256];
	int rc = 0;
	if (kn == 15 && !memcmp(k, "library_symbols", 15)) {
		rc = oeap_buf_puts(out, "(");
		for (size_t i = 0; !rc && def->library_symbols && def->library_symbols[i]; i++)
			rc = oeap_buf_printf(out, "%s\"%s\"%s", i ? ", " : "", def->library_symbols[i],
			                     i == 0 && !def->library_symbols[1] ? "," : ""); /* ("one",) is a tuple */
		rc = rc || oeap_buf_puts(out, ")");
	} else if (kn == 12 && !memcmp(k, "problem_size", 12)) {
		if (!def->problem_size)
			return oeap_fail(err, OEAP_ERR_DEFINITION, "binding template", 0,
			                 "{{problem_size}} needs [library] problem_size in patch.ini");
		rc = oeap_buf_printf(out, "%d", def->problem_size);
	} else {
		rc = oeap_buf_puts(out, "{");
		for (size_t i = 0; !rc && i < def->nprobe; i++) {
			if (!probe_field(def, &def->problem_probe[i], why, sizeof(why)))
				return oeap_fail(err, OEAP_ERR_DEFINITION, "binding template", 0, "%s", why);
			rc = oeap_buf_printf(out, "%s\"%s\": %lld", i ? ", " : "", def->problem_probe[i].name,
			                     def->problem_probe[i].value);
		}
		rc = rc || oeap_buf_puts(out, "}");
	}
	return rc ? oeap_fail(err, OEAP_ERR_INTERNAL, "binding", 0, "out of memory") : 0;
}

/*
 * {{env_prefix}}, {{framework}}: the text itself (the module writes them
 * inside its own string literals, docstrings and comments, as {{patch}}), so
 * a character that would end or escape a literal is the definition's error.
 * {{bool_true}}, {{bool_false}}: the spellings as a Python tuple of strings.
 */
static int render_names(const oeap_patchdef *def, const char *k, size_t kn, oeap_buf *out, oeap_error *err)
{
	int is_true = kn == 9 && !memcmp(k, "bool_true", 9);
	if (is_true || (kn == 10 && !memcmp(k, "bool_false", 10))) {
		char **w = is_true ? def->bool_true : def->bool_false;
		if (!w)
			return oeap_fail(err, OEAP_ERR_DEFINITION, "binding template", 0, "{{%s}} needs [binding] %s in patch.ini",
			                 is_true ? "bool_true" : "bool_false", is_true ? "bool_true" : "bool_false");
		int rc = oeap_buf_puts(out, "(");
		for (size_t i = 0; !rc && w[i]; i++)
			rc = (i && oeap_buf_puts(out, ", ")) || put_literal(out, w[i]) ||
			     (i == 0 && !w[1] && oeap_buf_puts(out, ",")); /* ('one',) is a tuple */
		rc = rc || oeap_buf_puts(out, ")");
		return rc ? oeap_fail(err, OEAP_ERR_INTERNAL, "binding", 0, "out of memory") : 0;
	}
	int is_prefix = kn == 10 && !memcmp(k, "env_prefix", 10);
	const char *v = is_prefix ? def->env_prefix : def->framework;
	if (!v)
		return oeap_fail(err, OEAP_ERR_DEFINITION, "binding template", 0, "{{%s}} needs %s in patch.ini",
		                 is_prefix ? "env_prefix" : "framework", is_prefix ? "[binding] env_prefix" : "[patch] framework");
	for (const unsigned char *p = (const unsigned char *)v; *p; p++)
		if (*p < 0x20 || *p == 0x7f || *p == '\\' || *p == '"' || *p == '\'')
			return oeap_fail(err, OEAP_ERR_DEFINITION, "binding template", 0,
			                 "{{%s}}: %s = '%s' has a quote, backslash or control character, which the "
			                 "module's string literals cannot hold as written",
			                 is_prefix ? "env_prefix" : "framework", is_prefix ? "[binding] env_prefix" : "[patch] framework", v);
	return oeap_buf_puts(out, v) ? oeap_fail(err, OEAP_ERR_INTERNAL, "binding", 0, "out of memory") : 0;
}

/* Renders template text [t, t+n) with every placeholder but {{library}}. */
static int render_part(const oeap_patchdef *def, const char *t, size_t n, const char *library,
                       oeap_buf *out, oeap_error *err)
{
	while (n) {
		const char *open = memmem(t, n, "{{", 2);
		if (!open)
			return oeap_buf_put(out, t, n) ? oeap_fail(err, OEAP_ERR_INTERNAL, "binding", 0, "out of memory") : 0;
		if (oeap_buf_put(out, t, (size_t)(open - t)))
			return oeap_fail(err, OEAP_ERR_INTERNAL, "binding", 0, "out of memory");
		n -= (size_t)(open - t);
		t = open;
		const char *close = memmem(t, n, "}}", 2);
		if (!close)
			return oeap_fail(err, OEAP_ERR_DEFINITION, "binding template", 0, "unterminated '{{'");
		size_t kn = (size_t)(close - t - 2);
		const char *k = t + 2;
		int rc;
		if (kn == 7 && !memcmp(k, "library", 7))
			rc = put_literal(out, library);
		else if (kn == 3 && !memcmp(k, "abi", 3))
			rc = oeap_buf_printf(out, "%d", def->abi);
		else if (kn == 5 && !memcmp(k, "patch", 5))
			rc = oeap_buf_puts(out, def->name);
		else if (kn == 7 && !memcmp(k, "version", 7))
			rc = oeap_buf_printf(out, "%d", def->version);
		else if ((kn == 15 && !memcmp(k, "library_symbols", 15)) || (kn == 12 && !memcmp(k, "problem_size", 12)) ||
		         (kn == 13 && !memcmp(k, "problem_probe", 13))) {
			if (render_contract(def, k, kn, out, err))
				return -1;
			rc = 0;
		} else if ((kn == 10 && !memcmp(k, "env_prefix", 10)) || (kn == 9 && !memcmp(k, "framework", 9)) ||
		           (kn == 9 && !memcmp(k, "bool_true", 9)) || (kn == 10 && !memcmp(k, "bool_false", 10))) {
			if (render_names(def, k, kn, out, err))
				return -1;
			rc = 0;
		} else
			return oeap_fail(err, OEAP_ERR_DEFINITION, "binding template", 0, "unknown placeholder {{%.*s}}",
			                 (int)kn, k);
		if (rc)
			return oeap_fail(err, OEAP_ERR_INTERNAL, "binding", 0, "out of memory");
		n -= (size_t)(close + 2 - t);
		t = close + 2;
	}
	return 0;
}

/*
 * The path goes into Python source as a string literal, and Python source is
 * UTF-8: a path whose bytes are not (a Latin-1 directory name, say) would be
 * written raw and the module would not import, with verify green. Control
 * characters are refused too: they cannot be written back readably.
 */
static int check_library_literal(const char *library, oeap_error *err)
{
	oeap_error why;
	oeap_error_clear(&why);
	for (const unsigned char *p = (const unsigned char *)library; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return oeap_fail(err, OEAP_ERR_USAGE, "--library", 0,
			                 "the library path has a control character (byte 0x%02x at offset %zu); the binding "
			                 "module records it in Python source: pass --library with a path without one "
			                 "(apply resolves symbolic links, so copy the library to one)",
			                 *p, (size_t)(p - (const unsigned char *)library));
	if (*library && oeap_pysource_check_bytes(library, strlen(library), "--library", NULL, &why))
		return oeap_fail(err, OEAP_ERR_USAGE, "--library", 0,
		                 "the library path is not valid UTF-8 (%s); the binding module records it in Python "
		                 "source, which must be UTF-8 for the module to import: pass --library with a UTF-8 "
		                 "path (apply resolves symbolic links, so copy the library to one)",
		                 why.message);
	return 0;
}

/* Appends `text` with every CRLF read as LF (a bare CR is content). */
static int put_lf(oeap_buf *b, const char *text, size_t len)
{
	for (size_t at = 0; at < len;) {
		const char *cr = memchr(text + at, '\r', len - at);
		size_t run = cr ? (size_t)(cr - text) - at : len - at;
		if (oeap_buf_put(b, text + at, run))
			return -1;
		at += run;
		if (!cr)
			break;
		if (at + 1 < len && text[at + 1] == '\n') {
			at++; /* drop the CR: the '\n' starts the next run */
			continue;
		}
		if (oeap_buf_put(b, "\r", 1))
			return -1;
		at++;
	}
	return 0;
}

int oeap_binding_digest(const char *text, size_t len, size_t skip, size_t skip_end,
                        char hex[OEAP_BINDING_DIGEST_HEX + 1])
{
	oeap_buf n = OEAP_BUF_INIT;
	unsigned char md[SHA256_DIGEST_LENGTH];
	SHA256_CTX ctx;
	int ok = skip <= skip_end && skip_end <= len && !put_lf(&n, text, skip) &&
	         !put_lf(&n, text + skip_end, len - skip_end) && SHA256_Init(&ctx) &&
	         SHA256_Update(&ctx, n.data ? n.data : "", n.len) && SHA256_Final(md, &ctx) &&
	         SHA256_DIGEST_LENGTH * 2 == OEAP_BINDING_DIGEST_HEX;
	oeap_buf_free(&n);
	if (!ok)
		return -1;
	for (unsigned int i = 0; i < SHA256_DIGEST_LENGTH; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	hex[OEAP_BINDING_DIGEST_HEX] = '\0';
	return 0;
}

/* The digest line: line 2, exactly the prefix, 64 lowercase hex digits and
 * a line end (LF or CRLF). 1 and its extent and digits when it is there. */
static int digest_line(const char *text, size_t len, size_t *start, size_t *end, char hex[OEAP_BINDING_DIGEST_HEX + 1])
{
	const char *nl = memchr(text, '\n', len);
	size_t pn = strlen(OEAP_BINDING_DIGEST_PREFIX);
	if (!nl)
		return 0;
	size_t s = (size_t)(nl - text) + 1, at = s + pn;
	if (len < at + OEAP_BINDING_DIGEST_HEX + 1 || memcmp(text + s, OEAP_BINDING_DIGEST_PREFIX, pn) != 0)
		return 0;
	for (size_t i = 0; i < OEAP_BINDING_DIGEST_HEX; i++) {
		char c = text[at + i];
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return 0;
		hex[i] = c;
	}
	hex[OEAP_BINDING_DIGEST_HEX] = '\0';
	at += OEAP_BINDING_DIGEST_HEX;
	if (text[at] == '\r' && at + 1 < len)
		at++;
	if (text[at] != '\n')
		return 0;
	*start = s;
	*end = at + 1;
	return 1;
}

int oeap_binding_digest_holds(const char *text, size_t len)
{
	size_t s, e;
	char recorded[OEAP_BINDING_DIGEST_HEX + 1], actual[OEAP_BINDING_DIGEST_HEX + 1];
	if (!digest_line(text, len, &s, &e, recorded))
		return -1;
	return oeap_binding_digest(text, len, s, e, actual) == 0 && strcmp(recorded, actual) == 0;
}

int oeap_binding_render(const oeap_patchdef *def, const char *library, oeap_buf *out, oeap_error *err)
{
	oeap_buf body = OEAP_BUF_INIT;
	char hex[OEAP_BINDING_DIGEST_HEX + 1];
	int rc = -1;
	if (check_library_literal(library, err) ||
	    render_part(def, def->binding_text, strlen(def->binding_text), library, &body, err))
		goto done;
	/* The digest goes right after the header line, which revert and every
	 * oeapatch read first: a template of one line has nowhere to put it. */
	const char *nl = body.data ? memchr(body.data, '\n', body.len) : NULL;
	if (!nl) {
		oeap_fail(err, OEAP_ERR_DEFINITION, "binding template", 0,
		          "has only its header line; the module needs a body after it");
		goto done;
	}
	size_t head = (size_t)(nl - body.data) + 1;
	if (oeap_binding_digest(body.data, body.len, head, head, hex)) {
		oeap_fail(err, OEAP_ERR_INTERNAL, "binding", 0, "SHA-256 failed (libcrypto)");
		goto done;
	}
	if (oeap_buf_put(out, body.data, head) || oeap_buf_printf(out, OEAP_BINDING_DIGEST_PREFIX "%s\n", hex) ||
	    oeap_buf_put(out, body.data + head, body.len - head)) {
		oeap_fail(err, OEAP_ERR_INTERNAL, "binding", 0, "out of memory");
		goto done;
	}
	rc = 0;
done:
	oeap_buf_free(&body);
	return rc;
}

/* "NAME/VERSION" of the module's header line, "?" when it is not readable. */
static void header_writer(const char *text, size_t len, char *out, size_t cap)
{
	size_t n = strlen(OEAP_BINDING_HEADER), i = n;
	while (i < len && i - n < cap - 1 && text[i] != ')' && text[i] != '\n' && (unsigned char)text[i] >= 0x20 &&
	       (unsigned char)text[i] < 0x7f)
		i++;
	if (i == n || i >= len || text[i] != ')')
		snprintf(out, cap, "?");
	else
		snprintf(out, cap, "%.*s", (int)(i - n), text + n);
}

/* 1 when `text` with CRLF read as LF is `want` (LF, as rendered); -1 out of memory. */
static int same_lf(const char *text, size_t len, const char *want, size_t want_len)
{
	if (len == want_len)
		return memcmp(text, want, len) == 0;
	oeap_buf n = OEAP_BUF_INIT;
	if (put_lf(&n, text, len)) {
		oeap_buf_free(&n);
		return -1;
	}
	int same = n.len == want_len && memcmp(n.data, want, want_len) == 0;
	oeap_buf_free(&n);
	return same;
}

/*
 * oeap_binding_classify() with the module rendered for the library `text`
 * records already made: `want` (NULL when there is no recorded library or it
 * does not render). check_text renders it anyway; rendering (and digesting)
 * 90 kB twice more was a tenth of verify's time (docs/performance.md).
 */
static int classify_rendered(const oeap_patchdef *def, const char *text, size_t len, const oeap_buf *want,
                             oeap_binding_state *st)
{
	memset(st, 0, sizeof(*st));
	if (!oeap_binding_is_ours(text, len)) {
		st->kind = OEAP_BINDING_NOT_OURS;
		snprintf(st->writer, sizeof(st->writer), "?");
		return 0;
	}
	header_writer(text, len, st->writer, sizeof(st->writer));
	int rc = 0, same = 0, same_undigested = 0, holds = -2;
	if (want && (same = same_lf(text, len, want->data, want->len)) < 0)
		rc = -1;
	/* The text is the render, whose digest holds by construction (both read
	 * CRLF as LF): no need to hash it again. */
	if (same > 0)
		holds = 1;
	else
		holds = oeap_binding_digest_holds(text, len);
	st->has_digest = holds >= 0;
	if (want && !same) {
		size_t s, e;
		char hex[OEAP_BINDING_DIGEST_HEX + 1];
		/* This render without its digest line: what the oeapatch before
		 * digests wrote from the same definition. */
		if (holds < 0 && digest_line(want->data, want->len, &s, &e, hex)) {
			oeap_buf old = OEAP_BUF_INIT;
			if (oeap_buf_put(&old, want->data, s) || oeap_buf_put(&old, want->data + e, want->len - e) ||
			    (same_undigested = same_lf(text, len, old.data, old.len)) < 0)
				rc = -1;
			oeap_buf_free(&old);
		}
	}
	char mine[96];
	snprintf(mine, sizeof(mine), "%s/%d", def->name, def->version);
	if (same > 0)
		st->kind = OEAP_BINDING_CURRENT;
	else if (holds == 1 || same_undigested > 0)
		st->kind = OEAP_BINDING_OTHER;
	else if (holds == 0)
		st->kind = OEAP_BINDING_EDITED;
	else if (strcmp(st->writer, mine) != 0)
		/* Another version's module from before digests: replacing it is the
		 * upgrade (or --downgrade) apply is asked for, as it always was. */
		st->kind = OEAP_BINDING_OTHER;
	else
		st->kind = OEAP_BINDING_UNKNOWN;
	return rc;
}

int oeap_binding_classify(const oeap_patchdef *def, const char *text, size_t len, oeap_binding_state *st)
{
	if (!oeap_binding_is_ours(text, len))
		return classify_rendered(def, text, len, NULL, st);
	char *library = oeap_binding_recorded_library(def, text, len);
	oeap_buf want = OEAP_BUF_INIT;
	oeap_error err;
	oeap_error_clear(&err);
	int rendered = library && oeap_binding_render(def, library, &want, &err) == 0;
	int rc = classify_rendered(def, text, len, rendered ? &want : NULL, st);
	oeap_buf_free(&want);
	free(library);
	return rc;
}

int oeap_binding_is_ours(const char *text, size_t len)
{
	size_t n = strlen(OEAP_BINDING_HEADER);
	return len >= n && memcmp(text, OEAP_BINDING_HEADER, n) == 0;
}

char *oeap_binding_recorded_library(const oeap_patchdef *def, const char *text, size_t len)
{
	oeap_buf prefix = OEAP_BUF_INIT, path = OEAP_BUF_INIT;
	oeap_error err;
	char *result = NULL;
	const char *mark = strstr(def->binding_text, "{{library}}");
	oeap_error_clear(&err);
	if (!mark)
		goto done;
	/* The part of the template's line before {{library}}, e.g.
	 * "RECORDED_LIBRARY = ": the line that starts with it records the
	 * library, in this render and in older ones whose other lines differ. */
	const char *line = mark;
	while (line > def->binding_text && line[-1] != '\n')
		line--;
	if (render_part(def, line, (size_t)(mark - line), "", &prefix, &err) || !prefix.len)
		goto done;
	size_t at = 0;
	for (;;) {
		if (len - at > prefix.len && memcmp(text + at, prefix.data, prefix.len) == 0 &&
		    text[at + prefix.len] == '\'')
			break;
		const char *nl = memchr(text + at, '\n', len - at);
		if (!nl)
			goto done;
		at = (size_t)(nl - text) + 1;
	}
	for (size_t i = at + prefix.len + 1; i < len; i++) {
		char c = text[i];
		if (c == '\n' || c == '\r')
			goto done;
		if (c == '\'') {
			result = oeap_buf_detach(&path, NULL);
			goto done;
		}
		if (c == '\\' && i + 1 < len)
			c = text[++i];
		if (oeap_buf_put(&path, &c, 1))
			goto done;
	}
done:
	oeap_buf_free(&prefix);
	oeap_buf_free(&path);
	return result;
}

char *oeap_binding_path(const oeap_patchdef *def, const char *target_path)
{
	oeap_buf b = OEAP_BUF_INIT;
	const char *slash = strrchr(target_path, '/');
	size_t dn = slash ? (size_t)(slash - target_path) + 1 : 0;
	if (oeap_buf_put(&b, target_path, dn) || oeap_buf_printf(&b, "%s.py", def->binding_module)) {
		oeap_buf_free(&b);
		return NULL;
	}
	return oeap_buf_detach(&b, NULL);
}

/*
 * The binding's contract past the ABI number ([library] of the definition):
 * every entry point it calls is exported, and oea_problem_check accepts the
 * argument block the binding builds. 0, or -1 with the reason in `detail`.
 */
static int check_contract(const oeap_patchdef *def, void *h, const char *shown, char *detail, size_t cap)
{
	char missing[512], why[256];
	size_t n = 0, count = 0;
	missing[0] = '\0';
	for (size_t i = 0; def->library_symbols && def->library_symbols[i]; i++)
		if (!dlsym(h, def->library_symbols[i])) {
			count++;
			if (n < sizeof(missing))
				n += (size_t)snprintf(missing + n, sizeof(missing) - n, "%s%s", n ? ", " : "",
				                      def->library_symbols[i]);
		}
	if (count) {
		snprintf(detail, cap,
		         "%s does not export %s, which the binding calls (%s/%d, [library] symbols)",
		         shown, missing, def->name, def->version);
		return -1;
	}
	if (!def->problem_size)
		return 0;
	int (*check_fn)(const void *) = (int (*)(const void *))dlsym(h, "oea_problem_check");
	const char *(*msg_fn)(int) = (const char *(*)(int))dlsym(h, "oea_status_message");
	if (!check_fn) {
		snprintf(detail, cap,
		         "%s does not export oea_problem_check, with which the binding checks its argument block",
		         shown);
		return -1;
	}
	/* The block as the binding builds it: zeroed, struct_size, the probe's fields. */
	union {
		oea_problem p;
		unsigned char bytes[OEAP_PROBLEM_SIZE_MAX];
	} block;
	memset(&block, 0, sizeof(block));
	block.p.struct_size = (uint32_t)def->problem_size;
	for (size_t i = 0; i < def->nprobe; i++) {
		const probe_field_info *f = probe_field(def, &def->problem_probe[i], why, sizeof(why));
		if (!f) {
			snprintf(detail, cap, "%s: %s", def->dir, why);
			return -1;
		}
		if (f->size == 8) {
			int64_t v = (int64_t)def->problem_probe[i].value;
			memcpy(block.bytes + f->offset, &v, 8);
		} else if (f->is_unsigned) {
			uint32_t v = (uint32_t)def->problem_probe[i].value;
			memcpy(block.bytes + f->offset, &v, 4);
		} else {
			int32_t v = (int32_t)def->problem_probe[i].value;
			memcpy(block.bytes + f->offset, &v, 4);
		}
	}
	int status = check_fn(&block);
	if (status != 0) {
		const char *m = msg_fn ? msg_fn(status) : NULL;
		snprintf(detail, cap,
		         "%s refuses the binding's argument block (oea_problem of %d bytes, ABI %d): oea_problem_check "
		         "returns %d (%s)",
		         shown, def->problem_size, def->abi, status, m ? m : "no message");
		return -1;
	}
	return 0;
}

int oeap_library_probe(const oeap_patchdef *def, const char *path, char *detail, size_t cap)
{
	return oeap_library_probe_env(def, path, getenv("LD_LIBRARY_PATH"), "the environment", detail, cap);
}

int oeap_library_probe_env(const oeap_patchdef *def, const char *path, const char *ld_library_path,
                           const char *origin, char *detail, size_t cap)
{
	int abi = def->abi;
	/* The forms the binding's loader accepts (ctypes.CDLL, dlopen): a path
	 * with a slash is opened as it is, relative to the working directory
	 * of the process that opens it, which is the server's and unknown here. */
	if (!*path) {
		snprintf(detail, cap, "the library path is empty");
		return -1;
	}
	if (oeap_library_relative(path)) {
		snprintf(detail, cap,
		         "%s is a relative path: the server would open it from its own working directory, which "
		         "oeapatch cannot know; give an absolute path, or a bare file name that the loader's search path "
		         "finds (LD_LIBRARY_PATH, the loader cache)",
		         path);
		return -1;
	}
	int bare = !strchr(path, '/');
	/* A bare name is searched the way the server's loader will search it,
	 * with the server's LD_LIBRARY_PATH, without loading anything
	 * (libsearch.h); the file found is the one opened below. */
	char how[1024], *found = NULL;
	if (bare && !(found = oeap_libsearch_find(path, ld_library_path, origin, how, sizeof(how)))) {
		snprintf(detail, cap,
		         "%s does not load: a bare file name is searched as the server's loader will search it "
		         "(LD_LIBRARY_PATH, the loader cache, the system directories): %s",
		         path, how);
		return -1;
	}
	const char *file = bare ? found : path;
	if (access(file, R_OK) != 0) {
		snprintf(detail, cap, "%s: %s", file, strerror(errno));
		free(found);
		return -1;
	}
	dlerror();
	void *h = dlopen(file, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		snprintf(detail, cap, "%s does not load: %s", bare ? found : path, e ? e : "unknown dlopen error");
		free(found);
		return -1;
	}
	/* A bare name: say which file the search found, and where, the one the
	 * server loads given that search path. */
	char shown[PATH_MAX + 1280];
	if (bare)
		snprintf(shown, sizeof(shown), "%s (%s: %s)", path, how, found);
	else
		snprintf(shown, sizeof(shown), "%s", path);
	free(found);
	int rc = -1;
	int (*abi_fn)(void) = (int (*)(void))dlsym(h, "oea_abi_version");
	const char *(*ver_fn)(void) = (const char *(*)(void))dlsym(h, "oea_version");
	int (*cuda_fn)(void) = (int (*)(void))dlsym(h, "oea_has_cuda");
	if (!abi_fn) {
		snprintf(detail, cap, "%s loads but has no oea_abi_version: not liboea", shown);
	} else if (abi_fn() != abi) {
		snprintf(detail, cap, "%s reports ABI %d, the binding expects ABI %d", shown, abi_fn(), abi);
	} else if (check_contract(def, h, shown, detail, cap) == 0) {
		size_t nsym = 0;
		while (def->library_symbols && def->library_symbols[nsym])
			nsym++;
		int n = snprintf(detail, cap, "%s loads, ABI %d, version %s, %s", shown, abi, ver_fn ? ver_fn() : "?",
		                 cuda_fn && cuda_fn() ? "with CUDA" : "CPU only (built without CUDA)");
		if (n > 0 && (size_t)n < cap && (nsym || def->problem_size))
			snprintf(detail + n, cap - (size_t)n, "; the binding's %zu entry points exported%s", nsym,
			         def->problem_size ? ", its argument block accepted" : "");
		rc = 0;
	}
	dlclose(h);
	return rc;
}

int oeap_binding_check_text(const oeap_patchdef *def, const char *label, const char *text, size_t len,
                            oeap_report *rep, char **library_out)
{
	int error = 0;
	char *library = NULL;
	oeap_buf want = OEAP_BUF_INIT;
	oeap_error err;
	oeap_binding_state st;
	oeap_error_clear(&err);
	if (library_out)
		*library_out = NULL;
	if (!(library = oeap_binding_recorded_library(def, text, len))) {
		error = oeap_report_add(rep, "binding", 0, 0,
		                        "%s is not the module %s/%d generates (header or library line differs)", label,
		                        def->name, def->version);
		goto done;
	}
	if (oeap_binding_render(def, library, &want, &err)) {
		error = oeap_report_add(rep, "binding", 0, 0, "%s", err.message);
		goto done;
	}
	if (classify_rendered(def, text, len, &want, &st)) {
		error = -1;
		goto done;
	}
	switch (st.kind) {
	case OEAP_BINDING_CURRENT:
		error = oeap_report_add(rep, "binding", 1, 0, "%s intact", label);
		break;
	case OEAP_BINDING_OTHER:
		/* Unedited, but not the code this oeapatch verifies: the server
		 * would run a module nobody checked against this definition. */
		error = oeap_report_add(rep, "binding", 0, 0,
		                        "%s was written by another oeapatch (definition %s): run `oeapatch apply` (it "
		                        "replaces the module with %s/%d's for library %s)",
		                        label, st.writer, def->name, def->version, library);
		break;
	case OEAP_BINDING_EDITED:
		error = oeap_report_add(rep, "binding", 0, 0,
		                        "%s " OEAP_BINDING_EDITED_WHY "; `oeapatch apply --diff` shows how it differs "
		                        "from what %s/%d generates",
		                        label, def->name, def->version);
		break;
	default:
		error = oeap_report_add(rep, "binding", 0, 0, "%s " OEAP_BINDING_UNKNOWN_WHY, label);
		break;
	}
	if (!error && st.kind == OEAP_BINDING_CURRENT && library_out) {
		*library_out = library;
		library = NULL;
	}
done:
	oeap_buf_free(&want);
	free(library);
	return error;
}

int oeap_binding_verify(const oeap_patchdef *def, const char *target_path, oeap_report *rep)
{
	/* The binding's rule for a path: surrounding ASCII blanks dropped, blank is unset (settings.h). */
	const char *v = def->library_env ? getenv(def->library_env) : NULL;
	char *override = NULL;
	if (v) {
		while (*v && strchr(" \t\n\r\v\f", *v))
			v++;
		size_t n = strlen(v);
		while (n && strchr(" \t\n\r\v\f", v[n - 1]))
			n--;
		if (n && !(override = strndup(v, n)))
			return -1;
	}
	int rc = oeap_binding_verify_with(def, target_path, override, getenv("LD_LIBRARY_PATH"), "the environment",
	                                  oeap_trust_escape_environ(def), rep, NULL);
	free(override);
	return rc;
}

/*
 * The trust rule before any load (docs/security.md): 1 when `lib`, as the
 * server's loader would find it, fails the rule for the checkout of
 * `target_path` and no escape allows it; `detail` then says why it was not
 * opened (trust:library names the path and the fix).
 */
static int refused_before_load(const char *target_path, const char *lib, const char *ld_library_path,
                               const char *origin, int escape, char *detail, size_t cap)
{
	uid_t owner;
	oeap_trust_problem p;
	if (escape || oeap_library_relative(lib) || oeap_trust_target_owner(target_path, &owner))
		return 0;
	char *file = oeap_trust_library_file(lib, ld_library_path, origin);
	int rc = file ? oeap_trust_check(file, owner, &p) : 0;
	if (rc > 0)
		snprintf(detail, cap,
		         "%s was not opened: users other than root and the target's owner can change it, and oeapatch "
		         "runs no code of theirs (trust:library says which path and how to fix it)",
		         file);
	free(file);
	return rc > 0;
}

int oeap_binding_verify_with(const oeap_patchdef *def, const char *target_path, const char *override,
                             const char *ld_library_path, const char *origin, int escape, oeap_report *rep,
                             char **recorded_out)
{
	int error = 0;
	char *path = oeap_binding_path(def, target_path);
	char *text = NULL, *library = NULL;
	size_t len = 0;
	oeap_error err;
	char detail[768];
	oeap_error_clear(&err);
	if (recorded_out)
		*recorded_out = NULL;
	if (!path)
		return -1;
	if (oeap_read_file(path, &text, &len, &err)) {
		error = oeap_report_add(rep, "binding", 0, 0, "%s: %s", path, err.message);
		goto done;
	}
	if ((error = oeap_binding_check_text(def, path, text, len, rep, &library)) || !library)
		goto done;
	const char *lib = override ? override : library;
	if (refused_before_load(target_path, lib, ld_library_path, origin, escape, detail, sizeof(detail)) ||
	    oeap_library_probe_env(def, lib, ld_library_path, origin, detail, sizeof(detail)))
		error = oeap_report_add(rep, "library", 0, 0, "%s%s%s%s", detail, override ? " (set by " : "",
		                        override && def->library_env ? def->library_env : "", override ? ")" : "");
	else
		error = oeap_report_add(rep, "library", 1, 0, "%s", detail);
	if (recorded_out) {
		*recorded_out = library;
		library = NULL;
	}
done:
	free(text);
	free(library);
	free(path);
	return error;
}
