/* manifest.c - patch.ini read into a definition: its sections, their keys, each value's form. */
#include "manifest.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <ini.h>

#include "buf.h"
#include "fsio.h"

/* Reads a file the definition names; a missing one is a broken definition
 * (exit 2 either way, but --json reports the right kind and section). */
int oeap_def_read_file(const char *path, const char *section, char **data, size_t *len, oeap_error *err)
{
	oeap_error io;
	oeap_error_clear(&io);
	if (oeap_read_file(path, data, len, &io) == 0)
		return 0;
	return oeap_fail(err, OEAP_ERR_DEFINITION, section, 0, "%s: %s", path, io.message);
}

int oeap_def_is_identifier(const char *s)
{
	if (!*s || !(isalpha((unsigned char)*s) || *s == '_'))
		return 0;
	for (; *s; s++)
		if (!(isalnum((unsigned char)*s) || *s == '_'))
			return 0;
	return 1;
}

void oeap_def_words_free(char **w)
{
	for (size_t i = 0; w && w[i]; i++)
		free(w[i]);
	free(w);
}

typedef struct line_reader {
	const char *p;
	int line;
	int too_long; /* the line inih's buffer could not hold (0: none): the parse stops there */
} line_reader;

typedef struct load_ctx {
	oeap_patchdef *def;
	line_reader *reader; /* inih's handler gets no line number in Debian's build */
	oeap_error *err;
	char manifest[PATH_MAX + 16];
	int failed;
	int source_line; /* the line of the last [binding] source entry: the next line continues it */
	int symbols_line; /* the same for [library] symbols */
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

/* A dotted name: identifier(.identifier)*, the only expressions a call site passes. */
static int is_dotted(const char *s)
{
	char tmp[256];
	if (strlen(s) >= sizeof(tmp))
		return 0;
	strcpy(tmp, s);
	for (char *save = NULL, *t = strtok_r(tmp, ".", &save); t; t = strtok_r(NULL, ".", &save))
		if (!oeap_def_is_identifier(t))
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
		oeap_def_words_free(*list);
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
 * The list may go on over indented lines (inih hands each as another value
 * of the same key, on the next line): they add files.
 */
static int load_binding_source(load_ctx *c, int lineno, const char *section, const char *name, const char *value)
{
	oeap_patchdef *def = c->def;
	char **files = split_words(value);
	oeap_buf all = OEAP_BUF_INIT;
	int continued = c->source_line && c->source_line == lineno - 1 && def->binding_text;
	c->source_line = lineno;
	if (!files)
		return bad(c, lineno, section, name, "expected the module's files, e.g. '../binding-core/oea_core.py adapter.py'");
	int ok = 1;
	if (continued && oeap_buf_puts(&all, def->binding_text))
		ok = bad(c, lineno, section, name, "out of memory");
	free(def->binding_text);
	def->binding_text = NULL;
	for (size_t i = 0; ok && files[i]; i++) {
		char path[PATH_MAX];
		char *text = NULL;
		size_t len = 0;
		if (files[i][0] == '/') {
			ok = bad(c, lineno, section, name, "files are relative to the definition's folder, not absolute paths");
			break;
		}
		snprintf(path, sizeof(path), "%s/%s", def->dir, files[i]);
		if (oeap_def_read_file(path, "[binding] source", &text, &len, c->err)) {
			c->failed = 1;
			ok = 0;
			break;
		}
		if (oeap_buf_put(&all, text, len) || (len && text[len - 1] != '\n' && oeap_buf_put(&all, "\n", 1)))
			ok = bad(c, lineno, section, name, "out of memory");
		free(text);
	}
	oeap_def_words_free(files);
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
		return oeap_def_is_identifier(def->binding_module) || bad(c, lineno, section, name, "must be a Python identifier");
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
		oeap_def_words_free(*slot);
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
		static const char *types[] = {"int", "bool", "string", "path", "choice", "output"};
		for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
			if (strcmp(value, types[i]) == 0) {
				st->type = (oeap_setting_type)i;
				return 1;
			}
		return bad(c, lineno, section, name, "must be int, bool, string, path, choice or output");
	}
	if (strcmp(name, "values") == 0) {
		oeap_def_words_free(st->values);
		return (st->values = split_words(value)) != NULL ||
		       bad(c, lineno, section, name, "expected the values a choice takes, e.g. 'on shadow'");
	}
	if (strcmp(name, "min") == 0 || strcmp(name, "max") == 0) {
		if (!manifest_int(value, &n))
			return bad(c, lineno, section, name, "must be an integer in the 32-bit signed range");
		*(name[1] == 'i' ? &st->min : &st->max) = n;
		return 1;
	}
	if (strcmp(name, "at_least") == 0)
		return set_str(&st->at_least, value) || bad(c, lineno, section, name, "out of memory");
	if (strcmp(name, "forced_by") == 0)
		return set_str(&st->forced_by, value) || bad(c, lineno, section, name, "out of memory");
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
	if (strcmp(name, "bands") == 0)
		return manifest_bool(value, &st->bands) || bad(c, lineno, section, name, "must be yes or no");
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
		/* the list may go on over indented lines, as [binding] source does */
		int continued = c->symbols_line && c->symbols_line == lineno - 1 && def->library_symbols;
		c->symbols_line = lineno;
		oeap_buf all = OEAP_BUF_INIT;
		int oom = 0;
		for (size_t i = 0; continued && def->library_symbols[i]; i++)
			oom |= oeap_buf_printf(&all, "%s ", def->library_symbols[i]);
		oom |= oeap_buf_puts(&all, value);
		oeap_def_words_free(def->library_symbols);
		def->library_symbols = oom ? NULL : split_words(all.data ? all.data : "");
		oeap_buf_free(&all);
		for (size_t i = 0; def->library_symbols && def->library_symbols[i]; i++)
			if (!oeap_def_is_identifier(def->library_symbols[i]))
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
				ok = oeap_def_is_identifier(words[i]) && end != eq + 1 && !*end && !errno &&
				     (a[def->nprobe].name = strdup(words[i])) != NULL;
				if (ok)
					a[def->nprobe++].value = v;
			}
		}
		oeap_def_words_free(words);
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
		if (!oeap_def_is_identifier(name + 4))
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
	if (i == num - 1 && str[i - 1] != '\n' && *r->p == '\n')
		r->p++; /* the line filled the buffer exactly: its newline is not needed */
	else if (i == num - 1 && str[i - 1] != '\n' && *r->p) {
		/* inih would read the rest as a line of its own: stop instead, and say so */
		r->too_long = r->line;
		return NULL;
	}
	return str;
}

static int handler(void *user, const char *section, const char *name, const char *value)
{
	load_ctx *c = user;
	return on_entry(c, section, name, value, c->reader->line);
}


int oeap_manifest_parse(oeap_patchdef *def, const char *path, const char *text, oeap_error *err)
{
	load_ctx c;
	memset(&c, 0, sizeof(c));
	c.def = def;
	c.err = err;
	snprintf(c.manifest, sizeof(c.manifest), "%s", path);
	line_reader r = {text, 0, 0};
	c.reader = &r;
	int rc = ini_parse_stream(reader, &r, handler, &c);
	if (c.failed)
		return -1;
	if (r.too_long)
		return oeap_fail(err, OEAP_ERR_DEFINITION, c.manifest, r.too_long,
		                 "line %d is longer than the %d characters a line may have; continue a long value "
		                 "on indented lines",
		                 r.too_long, INI_MAX_LINE - 1);
	if (rc != 0)
		return oeap_fail(err, OEAP_ERR_DEFINITION, c.manifest, rc, "not a valid manifest (line %d)", rc);
	return 0;
}
