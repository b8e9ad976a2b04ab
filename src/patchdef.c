#include "patchdef.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <ini.h>
#include <stdint.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "buf.h"
#include "fsio.h"

#ifndef OEAPATCH_SOURCE_PATCHES
#define OEAPATCH_SOURCE_PATCHES ""
#endif
#ifndef OEAPATCH_INSTALL_PATCHES_REL
#define OEAPATCH_INSTALL_PATCHES_REL "../share/oeapatch/patches"
#endif

typedef struct line_reader {
	const char *p;
	int line;
} line_reader;

typedef struct load_ctx {
	oeap_patchdef *def;
	line_reader *reader; /* inih's handler gets no line number in Debian's build */
	oeap_error *err;
	char manifest[PATH_MAX + 16];
	int failed;
} load_ctx;

static char *trimdup(const char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	size_t n = strlen(s);
	while (n && isspace((unsigned char)s[n - 1]))
		n--;
	char *d = malloc(n + 1);
	if (d) {
		memcpy(d, s, n);
		d[n] = '\0';
	}
	return d;
}

/* Reads a file the definition names; a missing one is a broken definition
 * (exit 2 either way, but --json reports the right kind and section). */
static int read_def_file(const char *path, const char *section, char **data, size_t *len, oeap_error *err)
{
	oeap_error io;
	oeap_error_clear(&io);
	if (oeap_read_file(path, data, len, &io) == 0)
		return 0;
	return oeap_fail(err, OEAP_ERR_DEFINITION, section, 0, "%s: %s", path, io.message);
}

static int set_str(char **slot, const char *value)
{
	free(*slot);
	*slot = trimdup(value);
	return *slot != NULL;
}

static oeap_anchor_def *anchor_get(oeap_patchdef *def, const char *name)
{
	for (size_t i = 0; i < def->nanchors; i++)
		if (strcmp(def->anchors[i].name, name) == 0)
			return &def->anchors[i];
	oeap_anchor_def *a = realloc(def->anchors, (def->nanchors + 1) * sizeof(*a));
	if (!a)
		return NULL;
	def->anchors = a;
	a = &def->anchors[def->nanchors++];
	memset(a, 0, sizeof(*a));
	a->name = strdup(name);
	return a->name ? a : NULL;
}

static oeap_region_def *region_get(oeap_patchdef *def, const char *name)
{
	for (size_t i = 0; i < def->nregions; i++)
		if (strcmp(def->regions[i].name, name) == 0)
			return &def->regions[i];
	oeap_region_def *r = realloc(def->regions, (def->nregions + 1) * sizeof(*r));
	if (!r)
		return NULL;
	def->regions = r;
	r = &def->regions[def->nregions++];
	memset(r, 0, sizeof(*r));
	r->name = strdup(name);
	return r->name ? r : NULL;
}

static oeap_arg_def *arg_get(oeap_region_def *r, const char *kw)
{
	for (size_t i = 0; i < r->nargs; i++)
		if (strcmp(r->args[i].keyword, kw) == 0)
			return &r->args[i];
	oeap_arg_def *a = realloc(r->args, (r->nargs + 1) * sizeof(*a));
	if (!a)
		return NULL;
	r->args = a;
	a = &r->args[r->nargs++];
	memset(a, 0, sizeof(*a));
	a->keyword = strdup(kw);
	return a->keyword ? a : NULL;
}

static oeap_setting_def *setting_get(oeap_patchdef *def, const char *name)
{
	for (size_t i = 0; i < def->nsettings; i++)
		if (strcmp(def->settings[i].name, name) == 0)
			return &def->settings[i];
	oeap_setting_def *s = realloc(def->settings, (def->nsettings + 1) * sizeof(*s));
	if (!s)
		return NULL;
	def->settings = s;
	s = &def->settings[def->nsettings++];
	memset(s, 0, sizeof(*s));
	s->min = INT32_MIN;
	s->max = INT32_MAX;
	s->name = strdup(name);
	return s->name ? s : NULL;
}

/* A whitespace-separated word list (NULL-terminated); NULL when empty or out of memory. */
static char **split_words(const char *value)
{
	char *v = trimdup(value), **out = NULL;
	size_t n = 0;
	if (!v)
		return NULL;
	for (char *save = NULL, *t = strtok_r(v, " \t,", &save); t; t = strtok_r(NULL, " \t,", &save)) {
		char **p = realloc(out, (n + 2) * sizeof(*p));
		if (!p || !(p[n] = strdup(t))) {
			out = p ? p : out;
			if (out)
				out[n] = NULL;
			goto fail;
		}
		out = p;
		out[++n] = NULL;
	}
	free(v);
	return out;
fail:
	free(v);
	for (size_t i = 0; out && out[i]; i++)
		free(out[i]);
	free(out);
	return NULL;
}

static void free_words(char **w)
{
	for (size_t i = 0; w && w[i]; i++)
		free(w[i]);
	free(w);
}

/* A manifest integer: optional sign and decimal digits, within the 32-bit signed range. */
static int manifest_int(const char *v, long long *out)
{
	char *end = NULL;
	while (isspace((unsigned char)*v))
		v++;
	if (!*v)
		return 0;
	errno = 0;
	long long n = strtoll(v, &end, 10);
	while (end && isspace((unsigned char)*end))
		end++;
	if (errno || !end || *end || n < INT32_MIN || n > INT32_MAX)
		return 0;
	*out = n;
	return 1;
}

static int manifest_bool(const char *v, int *out)
{
	if (!strcmp(v, "yes") || !strcmp(v, "true") || !strcmp(v, "1"))
		*out = 1;
	else if (!strcmp(v, "no") || !strcmp(v, "false") || !strcmp(v, "0"))
		*out = 0;
	else
		return 0;
	return 1;
}

static int is_identifier(const char *s)
{
	if (!*s || !(isalpha((unsigned char)*s) || *s == '_'))
		return 0;
	for (; *s; s++)
		if (!(isalnum((unsigned char)*s) || *s == '_'))
			return 0;
	return 1;
}

/* A dotted name: identifier(.identifier)*, the only expressions a call site passes. */
static int is_dotted(const char *s)
{
	char tmp[256];
	if (strlen(s) >= sizeof(tmp))
		return 0;
	strcpy(tmp, s);
	for (char *save = NULL, *t = strtok_r(tmp, ".", &save); t; t = strtok_r(NULL, ".", &save))
		if (!is_identifier(t))
			return 0;
	return s[0] != '.' && s[strlen(s) - 1] != '.' && !strstr(s, "..");
}

static int parse_args(oeap_arg_def *a, const char *value)
{
	char *v = trimdup(value);
	if (!v)
		return 0;
	for (char *save = NULL, *t = strtok_r(v, "|", &save); t; t = strtok_r(NULL, "|", &save)) {
		char *e = trimdup(t);
		char **p = realloc(a->exprs, (a->nexprs + 1) * sizeof(*p));
		if (!e || !p || !is_dotted(e)) {
			free(e);
			if (p)
				a->exprs = p;
			free(v);
			return 0;
		}
		a->exprs = p;
		a->exprs[a->nexprs++] = e;
	}
	free(v);
	return a->nexprs > 0;
}

/* A whole positive decimal integer ("1x", "", "0" are not), or 0. */
static int positive_int(const char *v)
{
	char *end = NULL;
	while (isspace((unsigned char)*v))
		v++;
	long n = strtol(v, &end, 10);
	while (end && isspace((unsigned char)*end))
		end++;
	return end != v && end && *end == '\0' && n >= 1 && n <= 1000000 ? (int)n : 0;
}

/* A commit id (7-40 hex digits) or a date YYYY-MM-DD: what `check` can
 * compare with without guessing. */
static int valid_first_revision(const char *v)
{
	size_t n = strlen(v), hex = strspn(v, "0123456789abcdef");
	if (hex == n && n >= 7 && n <= 40)
		return 1;
	int y, m, d, used = 0;
	return n == 10 && sscanf(v, "%4d-%2d-%2d%n", &y, &m, &d, &used) == 3 && used == 10 && v[4] == '-' &&
	       v[7] == '-' && m >= 1 && m <= 12 && d >= 1 && d <= 31;
}

static int bad(load_ctx *c, int line, const char *section, const char *name, const char *why)
{
	char where[sizeof(c->manifest) + 16];
	snprintf(where, sizeof(where), "%s:%d", c->manifest, line);
	oeap_fail(c->err, OEAP_ERR_DEFINITION, where, line, "[%s] %s: %s", section, name, why);
	c->failed = 1;
	return 0;
}

/* One key of [patch]. */
static int on_patch(load_ctx *c, const char *section, const char *name, const char *value, int lineno)
{
	oeap_patchdef *def = c->def;
	if (strcmp(name, "name") == 0)
		return set_str(&def->name, value) || bad(c, lineno, section, name, "out of memory");
	if (strcmp(name, "version") == 0) {
		def->version = positive_int(value);
		return def->version >= 1 || bad(c, lineno, section, name, "must be an integer >= 1");
	}
	if (strcmp(name, "summary") == 0)
		return set_str(&def->summary, value);
	if (strcmp(name, "framework") == 0)
		return set_str(&def->framework, value) || bad(c, lineno, section, name, "out of memory");
	if (strcmp(name, "target") == 0 || strcmp(name, "installed_target") == 0) {
		/* Alternatives in order of preference; the first is the one every
		 * single-target use (messages, the default) names. */
		int inst = name[0] == 'i';
		char ***list = inst ? &def->installed_targets : &def->targets;
		char **slot = inst ? &def->installed_target : &def->target;
		free_words(*list);
		free(*slot);
		*slot = NULL;
		if (!(*list = split_words(value)))
			return bad(c, lineno, section, name, "expected one or more relative paths separated by blanks");
		return (*slot = strdup((*list)[0])) != NULL || bad(c, lineno, section, name, "out of memory");
	}
	if (strcmp(name, "abi") == 0) {
		def->abi = positive_int(value);
		return def->abi >= 1 || bad(c, lineno, section, name, "must be an integer >= 1");
	}
	if (strcmp(name, "first_revision") == 0) {
		if (!set_str(&def->first_revision, value))
			return bad(c, lineno, section, name, "out of memory");
		return valid_first_revision(def->first_revision) ||
		       bad(c, lineno, section, name, "must be a commit id (7 to 40 hex digits) or a date YYYY-MM-DD");
	}
	return bad(c, lineno, section, name, "unknown key");
}

/*
 * [binding] source = FILE [FILE...]: the module is the files concatenated in
 * order (the shared core, then the framework's adapter), each relative to the
 * definition's folder; "../binding-core/oea_core.py" reaches the core that
 * every bundled definition shares. A file that does not end its last line is
 * given a newline, so that no statement runs into the next file's first.
 */
static int load_binding_source(load_ctx *c, int lineno, const char *section, const char *name, const char *value)
{
	oeap_patchdef *def = c->def;
	char **files = split_words(value);
	oeap_buf all = OEAP_BUF_INIT;
	if (!files)
		return bad(c, lineno, section, name, "expected the module's files, e.g. '../binding-core/oea_core.py adapter.py'");
	free(def->binding_text);
	def->binding_text = NULL;
	int ok = 1;
	for (size_t i = 0; ok && files[i]; i++) {
		char path[PATH_MAX];
		char *text = NULL;
		size_t len = 0;
		if (files[i][0] == '/') {
			ok = bad(c, lineno, section, name, "files are relative to the definition's folder, not absolute paths");
			break;
		}
		snprintf(path, sizeof(path), "%s/%s", def->dir, files[i]);
		if (read_def_file(path, "[binding] source", &text, &len, c->err)) {
			c->failed = 1;
			ok = 0;
			break;
		}
		if (oeap_buf_put(&all, text, len) || (len && text[len - 1] != '\n' && oeap_buf_put(&all, "\n", 1)))
			ok = bad(c, lineno, section, name, "out of memory");
		free(text);
	}
	free_words(files);
	if (ok && !all.len)
		ok = bad(c, lineno, section, name, "the module's files are empty");
	if (ok)
		def->binding_text = oeap_buf_detach(&all, NULL);
	oeap_buf_free(&all);
	return ok;
}

/* One key of [binding]. */
static int on_binding(load_ctx *c, const char *section, const char *name, const char *value, int lineno)
{
	oeap_patchdef *def = c->def;
	if (strcmp(name, "module") == 0) {
		set_str(&def->binding_module, value);
		return is_identifier(def->binding_module) || bad(c, lineno, section, name, "must be a Python identifier");
	}
	if (strcmp(name, "source") == 0)
		return load_binding_source(c, lineno, section, name, value);
	if (strcmp(name, "library_env") == 0)
		return set_str(&def->library_env, value);
	if (strcmp(name, "trust_escape") == 0)
		return set_str(&def->trust_escape, value);
	if (strcmp(name, "env_prefix") == 0)
		return set_str(&def->env_prefix, value) || bad(c, lineno, section, name, "out of memory");
	if (strcmp(name, "bool_true") == 0 || strcmp(name, "bool_false") == 0) {
		char ***slot = name[5] == 't' ? &def->bool_true : &def->bool_false;
		free_words(*slot);
		*slot = split_words(value);
		return *slot != NULL || bad(c, lineno, section, name, "expected the spellings, e.g. 'true 1 yes y'");
	}
	return bad(c, lineno, section, name, "unknown key");
}

/* One key of [setting:NAME]; what the keys must be together is load_settings' business. */
static int on_setting(load_ctx *c, const char *section, const char *name, const char *value, int lineno)
{
	oeap_setting_def *st = setting_get(c->def, section + 8);
	long long n;
	if (!st)
		return bad(c, lineno, section, name, "out of memory");
	if (strcmp(name, "key") == 0)
		return set_str(&st->key, value) || bad(c, lineno, section, name, "out of memory");
	if (strcmp(name, "describe") == 0)
		return set_str(&st->describe, value) || bad(c, lineno, section, name, "out of memory");
	if (strcmp(name, "type") == 0) {
		static const char *types[] = {"int", "bool", "string", "path"};
		for (size_t i = 0; i < 4; i++)
			if (strcmp(value, types[i]) == 0) {
				st->type = (oeap_setting_type)i;
				return 1;
			}
		return bad(c, lineno, section, name, "must be int, bool, string or path");
	}
	if (strcmp(name, "min") == 0 || strcmp(name, "max") == 0) {
		if (!manifest_int(value, &n))
			return bad(c, lineno, section, name, "must be an integer in the 32-bit signed range");
		*(name[1] == 'i' ? &st->min : &st->max) = n;
		return 1;
	}
	if (strcmp(name, "at_least") == 0)
		return set_str(&st->at_least, value) || bad(c, lineno, section, name, "out of memory");
	if (strcmp(name, "range_reason") == 0)
		return set_str(&st->range_reason, value) || bad(c, lineno, section, name, "out of memory");
	if (strcmp(name, "warn_from") == 0) {
		if (!manifest_int(value, &st->warn_from))
			return bad(c, lineno, section, name, "must be an integer in the 32-bit signed range");
		st->has_warn_from = 1;
		return 1;
	}
	if (strcmp(name, "warn") == 0)
		return set_str(&st->warn, value) || bad(c, lineno, section, name, "out of memory");
	if (strcmp(name, "default") == 0)
		return set_str(&st->default_value, value) || bad(c, lineno, section, name, "out of memory");
	if (strcmp(name, "switch") == 0)
		return manifest_bool(value, &st->is_switch) || bad(c, lineno, section, name, "must be yes or no");
	return bad(c, lineno, section, name, "unknown key");
}

/* One key of [anchor:NAME]. */
static int on_anchor(load_ctx *c, const char *section, const char *name, const char *value, int lineno)
{
	oeap_anchor_def *a = anchor_get(c->def, section + 7);
	if (!a)
		return bad(c, lineno, section, name, "out of memory");
	if (strcmp(name, "describe") == 0)
		return set_str(&a->describe, value);
	if (strcmp(name, "query") == 0)
		return set_str(&a->query_path, value);
	if (strcmp(name, "capture") == 0)
		return set_str(&a->capture, value);
	if (strcmp(name, "contains") == 0)
		return set_str(&a->contains_path, value);
	if (strcmp(name, "unmatched") == 0)
		return set_str(&a->unmatched, value);
	if (strcmp(name, "in") == 0)
		return set_str(&a->in, value);
	if (strcmp(name, "pick") == 0) {
		if (strcmp(value, "unique") == 0)
			a->pick_last = 0;
		else if (strcmp(value, "last") == 0)
			a->pick_last = 1;
		else
			return bad(c, lineno, section, name, "must be 'unique' or 'last'");
		return 1;
	}
	return bad(c, lineno, section, name, "unknown key");
}

/* [library]: what the binding needs of liboea (patchdef.h, docs/patch-definitions.md). */
static int on_library(load_ctx *c, const char *section, const char *name, const char *value, int lineno)
{
	oeap_patchdef *def = c->def;
	long long n;
	if (strcmp(name, "symbols") == 0) {
		free_words(def->library_symbols);
		def->library_symbols = split_words(value);
		for (size_t i = 0; def->library_symbols && def->library_symbols[i]; i++)
			if (!is_identifier(def->library_symbols[i]))
				return bad(c, lineno, section, name, "expected C function names separated by blanks");
		return def->library_symbols != NULL ||
		       bad(c, lineno, section, name, "expected the entry points the binding calls, e.g. 'oea_abi_version'");
	}
	if (strcmp(name, "problem_size") == 0) {
		/* at least struct_size and flags; a block far larger is no struct of this ABI */
		if (!manifest_int(value, &n) || n < 8 || n > OEAP_PROBLEM_SIZE_MAX)
			return bad(c, lineno, section, name, "must be the binding's sizeof(oea_problem), 8..4096");
		def->problem_size = (int)n;
		return 1;
	}
	if (strcmp(name, "problem_probe") == 0) {
		char **words = split_words(value);
		for (size_t i = 0; i < def->nprobe; i++) /* a repeated key replaces, as for symbols */
			free(def->problem_probe[i].name);
		def->nprobe = 0;
		int ok = words != NULL;
		for (size_t i = 0; ok && words[i]; i++) {
			char *eq = strchr(words[i], '=');
			oeap_probe_field *a = realloc(def->problem_probe, (def->nprobe + 1) * sizeof(*a));
			if (a)
				def->problem_probe = a;
			if (!eq || !a)
				ok = 0;
			else {
				*eq = '\0';
				char *end = NULL;
				errno = 0;
				long long v = strtoll(eq + 1, &end, 10);
				ok = is_identifier(words[i]) && end != eq + 1 && !*end && !errno &&
				     (a[def->nprobe].name = strdup(words[i])) != NULL;
				if (ok)
					a[def->nprobe++].value = v;
			}
		}
		free_words(words);
		return ok || bad(c, lineno, section, name, "expected FIELD=INTEGER pairs, e.g. 'num_experts=1 top_k=1'");
	}
	return bad(c, lineno, section, name, "unknown key");
}

/* One key of [region:NAME]. */
static int on_region(load_ctx *c, const char *section, const char *name, const char *value, int lineno)
{
	oeap_region_def *r = region_get(c->def, section + 7);
	if (!r)
		return bad(c, lineno, section, name, "out of memory");
	if (strcmp(name, "after") == 0)
		return set_str(&r->after, value);
	if (strcmp(name, "template") == 0)
		return set_str(&r->template_path, value);
	if (strcmp(name, "scope") == 0)
		return set_str(&r->scope, value);
	if (strcmp(name, "require") == 0) {
		char *v = trimdup(value);
		int ok = v != NULL;
		for (char *save = NULL, *t = v ? strtok_r(v, " \t,", &save) : NULL; t && ok;
		     t = strtok_r(NULL, " \t,", &save)) {
			oeap_arg_def *a = arg_get(r, t);
			ok = a != NULL;
			if (a)
				a->required = 1;
		}
		free(v);
		return ok || bad(c, lineno, section, name, "out of memory");
	}
	if (strncmp(name, "arg.", 4) == 0) {
		if (!is_identifier(name + 4))
			return bad(c, lineno, section, name, "the keyword must be a Python identifier");
		oeap_arg_def *a = arg_get(r, name + 4);
		if (!a || !parse_args(a, value))
			return bad(c, lineno, section, name,
			           "expected dotted names separated by '|', e.g. 'top_k | topk_config.top_k'");
		return 1;
	}
	return bad(c, lineno, section, name, "unknown key");
}

/* The manifest's sections: a fixed name ("patch"), or a prefix and a name of the definition's choosing. */
static const struct {
	const char *section; /* with a trailing ':', a prefix */
	int (*on_key)(load_ctx *c, const char *section, const char *name, const char *value, int lineno);
} section_kinds[] = {
	{"patch", on_patch},
	{"binding", on_binding},
	{"library", on_library},
	{"setting:", on_setting},
	{"anchor:", on_anchor},
	{"region:", on_region},
};

/* inih's callback for one key: handed to the function of its section's kind. */
static int on_entry(void *user, const char *section, const char *name, const char *value, int lineno)
{
	load_ctx *c = user;
	if (c->failed)
		return 0;
	for (size_t i = 0; i < sizeof(section_kinds) / sizeof(section_kinds[0]); i++) {
		const char *kind = section_kinds[i].section;
		size_t n = strlen(kind);
		if (kind[n - 1] == ':' ? strncmp(section, kind, n) == 0 : strcmp(section, kind) == 0)
			return section_kinds[i].on_key(c, section, name, value, lineno);
	}
	return bad(c, lineno, section, name, "unknown section");
}

/* Feeds inih line by line, counting lines so messages can name them. */
static char *reader(char *str, int num, void *stream)
{
	line_reader *r = stream;
	if (!*r->p)
		return NULL;
	int i = 0;
	while (i < num - 1 && *r->p) {
		char ch = *r->p++;
		str[i++] = ch;
		if (ch == '\n')
			break;
	}
	str[i] = '\0';
	r->line++;
	return str;
}

static int handler(void *user, const char *section, const char *name, const char *value)
{
	load_ctx *c = user;
	return on_entry(c, section, name, value, c->reader->line);
}

/*
 * Compiles every query file of the definition (each anchor's query and its
 * `contains`) as one tree-sitter query (oeap_query_new_many: one compile
 * instead of one per file, the larger part of a command's start-up) and
 * sets each anchor's queries when all of them compile so and have the
 * captures load_anchor_queries() demands. Otherwise sets nothing and returns
 * -1: load_anchor_queries() then compiles each file alone, which finds the
 * same files good and names the first bad one exactly as before.
 */
static int compile_queries_together(oeap_patchdef *def)
{
	size_t n = 0, cap = 2 * def->nanchors;
	char **srcs = calloc(cap ? cap : 1, sizeof(*srcs)), **whats = calloc(cap ? cap : 1, sizeof(*whats));
	size_t *lens = calloc(cap ? cap : 1, sizeof(*lens));
	oeap_query **qs = calloc(cap ? cap : 1, sizeof(*qs));
	int error = -1;
	if (!srcs || !whats || !lens || !qs)
		goto done;
	for (size_t i = 0; i < def->nanchors; i++) {
		const oeap_anchor_def *a = &def->anchors[i];
		const char *files[2] = {a->query_path, a->contains_path};
		if (!a->query_path || !a->capture)
			goto done;
		for (size_t f = 0; f < 2 && files[f]; f++, n++) {
			char path[PATH_MAX];
			snprintf(path, sizeof(path), "%s/%s", def->dir, files[f]);
			if (!(whats[n] = strdup(path)) || read_def_file(path, "", &srcs[n], &lens[n], NULL)) {
				n++;
				goto done;
			}
		}
	}
	if (oeap_query_new_many((const char *const *)srcs, lens, (const char *const *)whats, n, qs))
		goto done;
	for (size_t i = 0, k = 0; i < def->nanchors; i++) {
		const oeap_anchor_def *a = &def->anchors[i];
		if (!oeap_query_has_capture(qs[k], a->capture) ||
		    (a->contains_path && !oeap_query_has_capture(qs[k + 1], "match")))
			goto done;
		k += a->contains_path ? 2 : 1;
	}
	for (size_t i = 0, k = 0; i < def->nanchors; i++) {
		oeap_anchor_def *a = &def->anchors[i];
		a->query = qs[k];
		qs[k++] = NULL;
		if (a->contains_path) {
			a->contains = qs[k];
			qs[k++] = NULL;
		}
	}
	error = 0;
done:
	for (size_t i = 0; i < n; i++) {
		oeap_query_free(qs[i]);
		free(srcs[i]);
		free(whats[i]);
	}
	free(srcs);
	free(whats);
	free(lens);
	free(qs);
	return error;
}

static int load_anchor_queries(oeap_patchdef *def, oeap_error *err)
{
	/* Compiled together when they can be; else each below, as always. */
	int together = compile_queries_together(def) == 0;
	for (size_t i = 0; i < def->nanchors; i++) {
		oeap_anchor_def *a = &def->anchors[i];
		char where[PATH_MAX + 64];
		snprintf(where, sizeof(where), "%s/patch.ini [anchor:%s]", def->dir, a->name);
		if (!a->query_path || !a->capture)
			return oeap_fail(err, OEAP_ERR_DEFINITION, where, 0, "needs 'query' and 'capture'");
		if (!a->in && !(a->in = strdup(OEAP_IN_MODULE)))
			return oeap_fail(err, OEAP_ERR_INTERNAL, where, 0, "out of memory");
		if (!a->describe && !(a->describe = strdup(a->name)))
			return oeap_fail(err, OEAP_ERR_INTERNAL, where, 0, "out of memory");
		if (strcmp(a->in, OEAP_IN_MODULE) != 0) {
			size_t j;
			for (j = 0; j < i; j++)
				if (strcmp(def->anchors[j].name, a->in) == 0)
					break;
			if (j == i)
				return oeap_fail(err, OEAP_ERR_DEFINITION, where, 0,
				                 "'in = %s' must name an anchor defined before it", a->in);
		}
		if (together)
			continue;
		char path[PATH_MAX];
		char *src = NULL;
		size_t len = 0;
		snprintf(path, sizeof(path), "%s/%s", def->dir, a->query_path);
		if (read_def_file(path, where, &src, &len, err))
			return -1;
		int rc = oeap_query_new(src, len, path, &a->query, err);
		free(src);
		if (rc)
			return -1;
		if (!oeap_query_has_capture(a->query, a->capture))
			return oeap_fail(err, OEAP_ERR_DEFINITION, path, 0, "the query has no capture @%s", a->capture);
		if (a->contains_path) {
			snprintf(path, sizeof(path), "%s/%s", def->dir, a->contains_path);
			if (read_def_file(path, where, &src, &len, err))
				return -1;
			rc = oeap_query_new(src, len, path, &a->contains, err);
			free(src);
			if (rc)
				return -1;
			if (!oeap_query_has_capture(a->contains, "match"))
				return oeap_fail(err, OEAP_ERR_DEFINITION, path, 0, "a 'contains' query needs a @match capture");
		}
	}
	return 0;
}

static int load_regions(oeap_patchdef *def, oeap_error *err)
{
	if (!def->nregions)
		return oeap_fail(err, OEAP_ERR_DEFINITION, def->dir, 0, "the definition has no [region:...]");
	for (size_t i = 0; i < def->nregions; i++) {
		oeap_region_def *r = &def->regions[i];
		char where[PATH_MAX + 64];
		snprintf(where, sizeof(where), "%s/patch.ini [region:%s]", def->dir, r->name);
		if (!is_identifier(r->name))
			return oeap_fail(err, OEAP_ERR_DEFINITION, where, 0, "a region name must be an identifier");
		if (!r->after || !oeap_patchdef_anchor(def, r->after))
			return oeap_fail(err, OEAP_ERR_DEFINITION, where, 0, "'after' must name an anchor");
		if (r->scope && !oeap_patchdef_anchor(def, r->scope))
			return oeap_fail(err, OEAP_ERR_DEFINITION, where, 0, "'scope' must name an anchor");
		if (r->nargs && !r->scope)
			return oeap_fail(err, OEAP_ERR_DEFINITION, where, 0, "arguments need a 'scope'");
		for (size_t j = 0; j < r->nargs; j++)
			if (!r->args[j].nexprs)
				return oeap_fail(err, OEAP_ERR_DEFINITION, where, 0,
				                 "required argument '%s' has no arg.%s line", r->args[j].keyword,
				                 r->args[j].keyword);
		if (!r->template_path)
			return oeap_fail(err, OEAP_ERR_DEFINITION, where, 0, "needs a 'template'");
		char path[PATH_MAX];
		size_t len;
		snprintf(path, sizeof(path), "%s/%s", def->dir, r->template_path);
		if (read_def_file(path, where, &r->template_text, &len, err))
			return -1;
		if (strstr(r->template_text, "oeapatch") && strstr(r->template_text, ">>>"))
			return oeap_fail(err, OEAP_ERR_DEFINITION, path, 0,
			                 "a template must not contain region markers");
		if (strchr(r->template_text, '\r') || strchr(r->template_text, '\t'))
			return oeap_fail(err, OEAP_ERR_DEFINITION, path, 0,
			                 "templates are written with LF line ends and 4-space indentation");
	}
	return 0;
}

/* Env variable names: what a process can be given and systemd accepts. */
static int is_env_name(const char *s)
{
	return is_identifier(s);
}

static int load_settings(oeap_patchdef *def, oeap_error *err)
{
	int switches = 0;
	for (size_t i = 0; i < def->nsettings; i++) {
		oeap_setting_def *s = &def->settings[i];
		char where[PATH_MAX + 64];
		long long v;
		snprintf(where, sizeof(where), "%s/patch.ini [setting:%s]", def->dir, s->name);
		if (!is_env_name(s->name))
			return oeap_fail(err, OEAP_ERR_DEFINITION, where, 0,
			                 "a setting is named by its environment variable (letters, digits, '_')");
		if (def->env_prefix && strncmp(s->name, def->env_prefix, strlen(def->env_prefix)) != 0)
			return oeap_fail(err, OEAP_ERR_DEFINITION, where, 0, "the name must start with [binding] env_prefix (%s)",
			                 def->env_prefix);
		if (!s->key) {
			/* default: the name without the prefix, in lower case (PREFIX_MIN_BATCH: min_batch) */
			const char *base = def->env_prefix ? s->name + strlen(def->env_prefix) : s->name;
			if (!(s->key = strdup(base)))
				return oeap_fail(err, OEAP_ERR_INTERNAL, where, 0, "out of memory");
			for (char *p = s->key; *p; p++)
				*p = (char)tolower((unsigned char)*p);
		}
		if (!is_identifier(s->key))
			return oeap_fail(err, OEAP_ERR_DEFINITION, where, 0, "'key' must be an identifier");
		if (s->type != OEAP_SETTING_INT &&
		    (s->min != INT32_MIN || s->max != INT32_MAX || s->at_least || s->range_reason || s->has_warn_from))
			return oeap_fail(err, OEAP_ERR_DEFINITION, where, 0,
			                 "min, max, at_least, range_reason and warn_from are for type = int");
		if (!s->has_warn_from != !s->warn)
			return oeap_fail(err, OEAP_ERR_DEFINITION, where, 0, "warn_from and warn go together");
		if (s->has_warn_from && (s->warn_from <= s->min || s->warn_from > s->max))
			return oeap_fail(err, OEAP_ERR_DEFINITION, where, 0,
			                 "warn_from (%lld) must be above min (%lld) and at most max (%lld): a value it warns "
			                 "about must be one the binding takes, and not every one",
			                 s->warn_from, s->min, s->max);
		if (s->min > s->max)
			return oeap_fail(err, OEAP_ERR_DEFINITION, where, 0, "min (%lld) is above max (%lld)", s->min, s->max);
		if (s->type == OEAP_SETTING_BOOL && (!def->bool_true || !def->bool_false))
			return oeap_fail(err, OEAP_ERR_DEFINITION, where, 0,
			                 "a bool setting needs [binding] bool_true and bool_false (its spellings)");
		if ((s->type == OEAP_SETTING_INT || s->type == OEAP_SETTING_BOOL) && !s->default_value)
			return oeap_fail(err, OEAP_ERR_DEFINITION, where, 0, "an int or bool setting needs a 'default'");
		if (s->default_value && oeap_setting_parse(def, s, s->default_value, &v) != 0) {
			char expected[256];
			oeap_setting_expected(def, s, expected, sizeof(expected));
			return oeap_fail(err, OEAP_ERR_DEFINITION, where, 0, "default '%s' is not %s", s->default_value,
			                 expected);
		}
		if (s->at_least) {
			const oeap_setting_def *t = oeap_patchdef_setting(def, s->at_least);
			if (!t || t == s || t->type != OEAP_SETTING_INT)
				return oeap_fail(err, OEAP_ERR_DEFINITION, where, 0, "'at_least = %s' must name another int setting",
				                 s->at_least);
		}
		if (s->is_switch && (s->type == OEAP_SETTING_STRING || s->type == OEAP_SETTING_PATH))
			return oeap_fail(err, OEAP_ERR_DEFINITION, where, 0, "a switch is an int or bool setting");
		switches += s->is_switch;
	}
	if (switches > 1)
		return oeap_fail(err, OEAP_ERR_DEFINITION, def->dir, 0, "at most one setting may be 'switch = yes'");
	return 0;
}

/* full = 0: the manifest only (oeap_patchdef_load_manifest). */
static int load_def(const char *dir, int full, oeap_patchdef **out, oeap_error *err)
{
	int error = 0;
	char *text = NULL;
	size_t len = 0;
	load_ctx c;
	memset(&c, 0, sizeof(c));
	*out = NULL;

	oeap_patchdef *def = calloc(1, sizeof(*def));
	if (!def || !(def->dir = strdup(dir))) {
		error = oeap_fail(err, OEAP_ERR_INTERNAL, dir, 0, "out of memory");
		goto done;
	}
	c.def = def;
	c.err = err;
	snprintf(c.manifest, sizeof(c.manifest), "%s/patch.ini", dir);
	if ((error = oeap_read_file(c.manifest, &text, &len, err)))
		goto done;
	line_reader r = {text, 0};
	c.reader = &r;
	int rc = ini_parse_stream(reader, &r, handler, &c);
	if (c.failed) {
		error = -1;
		goto done;
	}
	if (rc != 0) {
		error = oeap_fail(err, OEAP_ERR_DEFINITION, c.manifest, rc, "not a valid manifest (line %d)", rc);
		goto done;
	}
	if (!def->name || !def->target || !def->version || !def->abi || !def->binding_module ||
	    !def->binding_text) {
		error = oeap_fail(err, OEAP_ERR_DEFINITION, c.manifest, 0,
		                  "needs [patch] name, version, target, abi and [binding] module, source");
		goto done;
	}
	if (!def->name[0]) {
		error = oeap_fail(err, OEAP_ERR_DEFINITION, c.manifest, 0, "[patch] name is empty");
		goto done;
	}
	for (const char *p = def->name; *p; p++)
		if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '-')) {
			error = oeap_fail(err, OEAP_ERR_DEFINITION, c.manifest, 0,
			                  "patch name '%s' may only use a-z, 0-9 and '-'", def->name);
			goto done;
		}
	for (size_t i = 0; def->targets[i]; i++)
		if (def->targets[i][0] == '/' || strstr(def->targets[i], "..")) {
			error = oeap_fail(err, OEAP_ERR_DEFINITION, c.manifest, 0,
			                  "target '%s' must be a relative path inside the checkout", def->targets[i]);
			goto done;
		}
	for (size_t i = 0; def->installed_targets && def->installed_targets[i]; i++) {
		const char *t = def->installed_targets[i], *first = def->installed_targets[0];
		size_t pkg = strcspn(first, "/");
		if (!t[0] || t[0] == '/' || strstr(t, "..") || !strchr(t, '/')) {
			error = oeap_fail(err, OEAP_ERR_DEFINITION, c.manifest, 0,
			                  "installed_target '%s' must be a relative path inside site-packages, starting "
			                  "with the package's folder",
			                  t);
			goto done;
		}
		/* --python asks the interpreter for one package: the alternatives are files of it. */
		if (strncmp(t, first, pkg + 1) != 0) {
			error = oeap_fail(err, OEAP_ERR_DEFINITION, c.manifest, 0,
			                  "installed_target '%s' is not in the package '%.*s' of '%s': the alternatives "
			                  "must be files of one package",
			                  t, (int)pkg, first, first);
			goto done;
		}
	}
	if (def->nprobe && !def->problem_size) {
		error = oeap_fail(err, OEAP_ERR_DEFINITION, c.manifest, 0,
		                  "[library] problem_probe needs problem_size (the struct_size it is handed with)");
		goto done;
	}
	if (!full)
		goto loaded; /* detection reads the targets; the queries are compiled for the one chosen */
	if ((error = load_anchor_queries(def, err)) || (error = load_regions(def, err)) ||
	    (error = load_settings(def, err)))
		goto done;
	/* verify and apply read the escape as this bool setting (trust.h); a name
	 * that is none would silently leave them without the escape the binding
	 * honours, so the definition is refused instead. */
	if (def->trust_escape) {
		const oeap_setting_def *esc = oeap_patchdef_setting(def, def->trust_escape);
		if (!esc || esc->type != OEAP_SETTING_BOOL) {
			error = oeap_fail(err, OEAP_ERR_DEFINITION, c.manifest, 0, "[binding] trust_escape = %s: %s",
			                  def->trust_escape,
			                  esc ? "that setting is not type = bool" : "there is no [setting:] of that name");
			goto done;
		}
	}
loaded:
	*out = def;
	def = NULL;
done:
	free(text);
	oeap_patchdef_free(def);
	return error;
}

int oeap_patchdef_load(const char *dir, oeap_patchdef **out, oeap_error *err)
{
	return load_def(dir, 1, out, err);
}

int oeap_patchdef_load_manifest(const char *dir, oeap_patchdef **out, oeap_error *err)
{
	return load_def(dir, 0, out, err);
}

void oeap_patchdef_free(oeap_patchdef *def)
{
	if (!def)
		return;
	for (size_t i = 0; i < def->nanchors; i++) {
		oeap_anchor_def *a = &def->anchors[i];
		free(a->name);
		free(a->describe);
		free(a->query_path);
		free(a->capture);
		free(a->in);
		free(a->contains_path);
		free(a->unmatched);
		oeap_query_free(a->query);
		oeap_query_free(a->contains);
	}
	for (size_t i = 0; i < def->nregions; i++) {
		oeap_region_def *r = &def->regions[i];
		free(r->name);
		free(r->after);
		free(r->template_path);
		free(r->template_text);
		free(r->scope);
		for (size_t j = 0; j < r->nargs; j++) {
			free(r->args[j].keyword);
			for (size_t k = 0; k < r->args[j].nexprs; k++)
				free(r->args[j].exprs[k]);
			free(r->args[j].exprs);
		}
		free(r->args);
	}
	free(def->anchors);
	free(def->regions);
	free(def->dir);
	free(def->name);
	free(def->summary);
	free(def->framework);
	free(def->target);
	free(def->installed_target);
	free_words(def->targets);
	free_words(def->installed_targets);
	free(def->first_revision);
	free(def->binding_module);
	free(def->binding_text);
	free(def->library_env);
	free(def->trust_escape);
	free(def->env_prefix);
	free_words(def->bool_true);
	free_words(def->bool_false);
	free_words(def->library_symbols);
	for (size_t i = 0; i < def->nprobe; i++)
		free(def->problem_probe[i].name);
	free(def->problem_probe);
	for (size_t i = 0; i < def->nsettings; i++) {
		oeap_setting_def *st = &def->settings[i];
		free(st->name);
		free(st->key);
		free(st->describe);
		free(st->at_least);
		free(st->range_reason);
		free(st->warn);
		free(st->default_value);
	}
	free(def->settings);
	free(def);
}

const oeap_anchor_def *oeap_patchdef_anchor(const oeap_patchdef *def, const char *name)
{
	for (size_t i = 0; i < def->nanchors; i++)
		if (strcmp(def->anchors[i].name, name) == 0)
			return &def->anchors[i];
	return NULL;
}

const oeap_region_def *oeap_patchdef_region(const oeap_patchdef *def, const char *name)
{
	for (size_t i = 0; i < def->nregions; i++)
		if (strcmp(def->regions[i].name, name) == 0)
			return &def->regions[i];
	return NULL;
}

const oeap_setting_def *oeap_patchdef_setting(const oeap_patchdef *def, const char *name)
{
	for (size_t i = 0; i < def->nsettings; i++)
		if (strcmp(def->settings[i].name, name) == 0)
			return &def->settings[i];
	return NULL;
}

/* ------------------------------------------------ the value rule of a setting */

static int blank(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

void oeap_setting_trim(const char *raw, const char **start, const char **end)
{
	const char *s = raw, *e = raw + strlen(raw);
	while (s < e && blank(*s))
		s++;
	while (e > s && blank(e[-1]))
		e--;
	*start = s;
	*end = e;
}

static int word_in(const char *s, size_t n, char **words)
{
	for (char **w = words; w && *w; w++)
		if (strlen(*w) == n && strncasecmp(s, *w, n) == 0)
			return 1;
	return 0;
}

int oeap_setting_parse(const oeap_patchdef *def, const oeap_setting_def *s, const char *raw, long long *out)
{
	const char *p, *e;
	oeap_setting_trim(raw, &p, &e);
	*out = 0;
	if (p == e)
		return 1;
	switch (s->type) {
	case OEAP_SETTING_INT: {
		int neg = 0;
		long long v = 0;
		if (*p == '+' || *p == '-')
			neg = *p++ == '-';
		if (p == e)
			return -1;
		for (; p < e; p++) {
			if (*p < '0' || *p > '9')
				return -1;
			v = v * 10 + (*p - '0');
			if (v > (long long)INT32_MAX + 1)
				return -1; /* beyond any 32-bit value: stop before long long could overflow */
		}
		v = neg ? -v : v;
		if (v < INT32_MIN || v > INT32_MAX || v < s->min || v > s->max)
			return -1;
		*out = v;
		return 0;
	}
	case OEAP_SETTING_BOOL:
		if (word_in(p, (size_t)(e - p), def->bool_true))
			*out = 1;
		else if (!word_in(p, (size_t)(e - p), def->bool_false))
			return -1;
		return 0;
	default:
		return 0;
	}
}

static void join_words(char **words, char *buf, size_t cap)
{
	size_t n = 0;
	buf[0] = '\0';
	for (char **w = words; w && *w && n < cap; w++)
		n += (size_t)snprintf(buf + n, cap - n, "%s%s", w == words ? "" : "/", *w);
}

void oeap_setting_expected(const oeap_patchdef *def, const oeap_setting_def *s, char *buf, size_t cap)
{
	char t[128], f[128];
	switch (s->type) {
	case OEAP_SETTING_INT:
		if (s->min > INT32_MIN && s->max < INT32_MAX)
			snprintf(buf, cap, "an integer in %lld..%lld", s->min, s->max);
		else if (s->min > INT32_MIN)
			snprintf(buf, cap, "an integer >= %lld", s->min);
		else if (s->max < INT32_MAX)
			snprintf(buf, cap, "an integer <= %lld", s->max);
		else
			snprintf(buf, cap, "a 32-bit integer");
		break;
	case OEAP_SETTING_BOOL:
		join_words(def->bool_true, t, sizeof(t));
		join_words(def->bool_false, f, sizeof(f));
		snprintf(buf, cap, "a boolean (%s or %s)", t, f);
		break;
	case OEAP_SETTING_PATH:
		snprintf(buf, cap, "a path");
		break;
	default:
		snprintf(buf, cap, "a string");
		break;
	}
}

static int is_dir_with_manifest(const char *dir)
{
	char p[PATH_MAX + 1024];
	snprintf(p, sizeof(p), "%s/patch.ini", dir);
	return access(p, R_OK) == 0;
}

char *oeap_patchdef_locate(const char *name)
{
	char path[PATH_MAX + 512];
	const char *env = getenv("OEAPATCH_PATCH_DIR");
	if (env && *env)
		return strdup(env);
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		char *slash = strrchr(exe, '/');
		if (slash) {
			*slash = '\0';
			snprintf(path, sizeof(path), "%s/%s/%s", exe, OEAPATCH_INSTALL_PATCHES_REL, name);
			if (is_dir_with_manifest(path))
				return strdup(path);
		}
	}
	if (OEAPATCH_SOURCE_PATCHES[0]) {
		snprintf(path, sizeof(path), "%s/%s", OEAPATCH_SOURCE_PATCHES, name);
		if (is_dir_with_manifest(path))
			return strdup(path);
	}
	return NULL;
}

char *oeap_patchdef_bundle_dir(void)
{
	char path[PATH_MAX + 512], exe[PATH_MAX];
	char **names = NULL;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	/* The same order as oeap_patchdef_locate(): an installed oeapatch
	 * detects among what it installed, never among a source tree's. */
	if (n > 0) {
		exe[n] = '\0';
		char *slash = strrchr(exe, '/');
		if (slash) {
			*slash = '\0';
			snprintf(path, sizeof(path), "%s/%s", exe, OEAPATCH_INSTALL_PATCHES_REL);
			if ((names = oeap_patchdef_list(path))) {
				oeap_patchdef_list_free(names);
				return strdup(path);
			}
		}
	}
	if (OEAPATCH_SOURCE_PATCHES[0] && (names = oeap_patchdef_list(OEAPATCH_SOURCE_PATCHES))) {
		oeap_patchdef_list_free(names);
		return strdup(OEAPATCH_SOURCE_PATCHES);
	}
	return NULL;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

char **oeap_patchdef_list(const char *folder)
{
	DIR *d = opendir(folder);
	struct dirent *e;
	char **names = NULL, path[PATH_MAX + 512];
	size_t n = 0;
	if (!d)
		return NULL;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		/* Only a folder with a manifest is a definition: a shared folder
		 * beside them (the binding core) is not. */
		snprintf(path, sizeof(path), "%s/%s", folder, e->d_name);
		if (!is_dir_with_manifest(path))
			continue;
		char **grown = realloc(names, (n + 2) * sizeof(*grown));
		if (!grown || !(grown[n] = strdup(e->d_name))) {
			names = grown ? grown : names;
			if (names)
				names[n] = NULL;
			oeap_patchdef_list_free(names);
			closedir(d);
			return NULL;
		}
		names = grown;
		names[++n] = NULL;
	}
	closedir(d);
	if (names)
		qsort(names, n, sizeof(*names), name_cmp);
	return names;
}

void oeap_patchdef_list_free(char **names)
{
	free_words(names);
}
