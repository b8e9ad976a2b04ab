/*
 * foreign.c - another OEA in the target (foreign.h).
 */
#include "foreign.h"

#include <stdio.h>
#include <string.h>

typedef struct scan {
	const oeap_patchdef *def;
	const oeap_pysource *src;
	const oeap_regions *rs;
	oeap_foreign *out;
} scan;

/* Is `line` inside a region of the definition (its markers included)? */
static int in_ours(const scan *s, long line)
{
	for (size_t i = 0; s->rs && i < s->rs->n; i++) {
		const oeap_region *r = &s->rs->items[i];
		if (!strcmp(r->patch, s->def->name) && line >= r->begin_line && line <= r->end_line)
			return 1;
	}
	return 0;
}

static int word_char(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

/* `needle` in text[0, n) at the start of a word (a name that only ends with the prefix is another one). */
static int holds(const char *text, size_t n, const char *needle)
{
	size_t k = needle ? strlen(needle) : 0;
	if (!k)
		return 0;
	for (size_t i = 0; i + k <= n; i++)
		if (!memcmp(text + i, needle, k) && (i == 0 || !word_char(text[i - 1])))
			return 1;
	return 0;
}

static int names_setting(const oeap_patchdef *def, const char *text, size_t n)
{
	if (holds(text, n, def->env_prefix) || holds(text, n, def->library_env) || holds(text, n, def->trust_escape))
		return 1;
	for (size_t i = 0; i < def->nsettings; i++)
		if (holds(text, n, def->settings[i].name))
			return 1;
	return 0;
}

static int visit(TSNode node, void *user)
{
	scan *s = user;
	if (strcmp(ts_node_type(node), "string"))
		return OEAP_PYSOURCE_WALK_DESCEND;
	size_t a = oeap_pysource_start(s->src, node), b = oeap_pysource_end(s->src, node);
	if (!names_setting(s->def, s->src->buf + a, b - a))
		return OEAP_PYSOURCE_WALK_SKIP;
	oeap_foreign *f = s->out;
	long line = oeap_pysource_line_of(s->src, a);
	if (in_ours(s, line))
		return OEAP_PYSOURCE_WALK_SKIP;
	if (!f->total++) {
		size_t cut = b - a < 80 ? b - a : 80;
		while (cut < b - a && cut && ((unsigned char)s->src->buf[a + cut] & 0xC0) == 0x80)
			cut--; /* not inside a UTF-8 sequence */
		snprintf(f->first, sizeof(f->first), "%.*s", (int)cut, s->src->buf + a);
	}
	if (f->n && f->lines[f->n - 1] == line)
		return OEAP_PYSOURCE_WALK_SKIP;
	if (f->n < OEAP_FOREIGN_MAX)
		f->lines[f->n++] = line;
	else
		f->more = 1;
	return OEAP_PYSOURCE_WALK_SKIP;
}

int oeap_foreign_find(const oeap_patchdef *def, const oeap_pysource *src, const oeap_regions *rs, oeap_foreign *out)
{
	scan s = {def, src, rs, out};
	memset(out, 0, sizeof(*out));
	oeap_pysource_walk(oeap_pysource_root(src), visit, &s);
	for (char *p = out->first; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	return out->total > 0;
}

void oeap_foreign_lines(const oeap_foreign *f, char *out, size_t cap)
{
	size_t used = (size_t)snprintf(out, cap, "line%s", f->n > 1 ? "s" : "");
	for (size_t i = 0; i < f->n && used < cap; i++)
		used += (size_t)snprintf(out + used, cap - used, "%s %ld", i ? "," : "", f->lines[i]);
	if (f->more && used < cap)
		snprintf(out + used, cap - used, " (and more)");
}
