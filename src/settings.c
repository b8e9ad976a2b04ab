#include "settings.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "buf.h"
#include "fsio.h"
#include "library.h"
#include "outputcheck.h"
#include "patchdirs.h"
#include "quote.h"

/* ------------------------------------------------------------ environments */

int oeap_env_set(oeap_env *env, const char *name, const char *value, const char *origin, long line)
{
	oeap_env_var *v = NULL;
	for (size_t i = 0; i < env->n; i++)
		if (strcmp(env->vars[i].name, name) == 0)
			v = &env->vars[i];
	if (!v) {
		oeap_env_var *a = realloc(env->vars, (env->n + 1) * sizeof(*a));
		if (!a)
			return -1;
		env->vars = a;
		v = &env->vars[env->n++];
		memset(v, 0, sizeof(*v));
		if (!(v->name = strdup(name))) {
			env->n--;
			return -1;
		}
	}
	char *nv = strdup(value), *no = origin ? strdup(origin) : NULL;
	if (!nv || (origin && !no)) {
		free(nv);
		free(no);
		return -1;
	}
	free(v->value);
	free(v->origin);
	v->value = nv;
	v->origin = no;
	v->line = line;
	return 0;
}

const oeap_env_var *oeap_env_get(const oeap_env *env, const char *name)
{
	for (size_t i = 0; i < env->n; i++)
		if (strcmp(env->vars[i].name, name) == 0)
			return &env->vars[i];
	return NULL;
}

void oeap_env_free(oeap_env *env)
{
	for (size_t i = 0; i < env->n; i++) {
		free(env->vars[i].name);
		free(env->vars[i].value);
		free(env->vars[i].origin);
	}
	free(env->vars);
	env->vars = NULL;
	env->n = 0;
}

int oeap_env_from_environ(oeap_env *env, char **environ_, oeap_error *err)
{
	for (char **e = environ_; e && *e; e++) {
		const char *eq = strchr(*e, '=');
		if (!eq || eq == *e)
			continue; /* not an assignment: nothing a program could read by name */
		char *name = strndup(*e, (size_t)(eq - *e));
		int rc = name ? oeap_env_set(env, name, eq + 1, NULL, 0) : -1;
		free(name);
		if (rc)
			return oeap_fail(err, OEAP_ERR_INTERNAL, "environment", 0, "out of memory");
	}
	return 0;
}

/* ------------------------------------------------------- EnvironmentFile= */

/* systemd's character classes (its WHITESPACE, NEWLINE, COMMENTS and SHELL_NEED_ESCAPE). */
#define SD_WHITESPACE " \t\n\r"
#define SD_NEWLINE "\n\r"
#define SD_COMMENTS "#;"
#define SD_NEED_ESCAPE "\"\\`$"

static int in_set(char c, const char *set)
{
	return c && strchr(set, c) != NULL;
}

/* Valid UTF-8 (no overlong forms, no surrogates, at most U+10FFFF)? */
static int utf8_valid(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s, *end = p + n;
	while (p < end) {
		unsigned c = *p;
		size_t len;
		uint32_t cp;
		if (c < 0x80) {
			p++;
			continue;
		} else if (c >= 0xc2 && c <= 0xdf) {
			len = 2;
			cp = c & 0x1f;
		} else if (c >= 0xe0 && c <= 0xef) {
			len = 3;
			cp = c & 0x0f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			len = 4;
			cp = c & 0x07;
		} else {
			return 0;
		}
		if ((size_t)(end - p) < len)
			return 0;
		for (size_t i = 1; i < len; i++) {
			if ((p[i] & 0xc0) != 0x80)
				return 0;
			cp = (cp << 6) | (p[i] & 0x3f);
		}
		if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
			return 0;
		p += len;
	}
	return 1;
}

/* systemd's env_name_is_valid: ASCII letters, digits and '_', not starting with a digit. */
static int env_name_valid(const char *s)
{
	if (!*s || isdigit((unsigned char)*s))
		return 0;
	for (; *s; s++)
		if (!(isascii((unsigned char)*s) && (isalnum((unsigned char)*s) || *s == '_')))
			return 0;
	return 1;
}

/* The states of systemd's parse_env_file_internal(); the transitions are its own (ef_step). */
typedef enum ef_state {
	PRE_KEY,
	KEY,
	PRE_VALUE,
	VALUE,
	VALUE_ESCAPE,
	SQ_VALUE,
	DQ_VALUE,
	DQ_VALUE_ESCAPE,
	COMMENT,
	COMMENT_ESCAPE
} ef_state;

typedef struct envfile_ctx {
	const char *path;
	oeap_env *env;
	oeap_error *err;
	oeap_buf key, value;
	int has_value;
	long key_line;  /* where the assignment started */
	ef_state state;
	/* where the trailing blanks of the name and of an unquoted value begin (SIZE_MAX: none yet) */
	size_t last_key_ws, last_value_ws;
	long line, quote_line, comment_line; /* the current line; where a quote and a comment opened */
} envfile_ctx;

static int ef_fail(envfile_ctx *c, long line, const char *fmt, const char *arg)
{
	char where[96];
	/* where names the file and line, so "oeapatch: FILE:LINE: why" reads as a compiler's message. */
	const char *base = c->path;
	size_t n = strlen(base);
	if (n > 80)
		base += n - 80;
	snprintf(where, sizeof(where), "%s:%ld", base, line);
	return oeap_fail(c->err, OEAP_ERR_INPUT, where, line, fmt, arg);
}

/* One finished assignment: the checks systemd makes (it drops what fails them, we refuse). */
static int ef_push(envfile_ctx *c, size_t key_ws)
{
	if (key_ws != SIZE_MAX)
		c->key.len = key_ws; /* trailing blanks of the name go */
	if (oeap_buf_put(&c->key, "", 0) || oeap_buf_put(&c->value, "", 0))
		return oeap_fail(c->err, OEAP_ERR_INTERNAL, c->path, 0, "out of memory");
	const char *key = c->key.data, *value = c->value.data ? c->value.data : "";
	if (!utf8_valid(key, strlen(key)) || !utf8_valid(value, c->value.len))
		return ef_fail(c, c->key_line,
		               "invalid UTF-8 in '%s': systemd ignores this assignment (EnvironmentFile= must be UTF-8)",
		               utf8_valid(key, strlen(key)) ? key : "the name");
	if (!strncmp(key, "\xef\xbb\xbf", 3))
		return ef_fail(c, c->key_line, "%s",
		               "a byte order mark: systemd reads it as part of the first name and ignores the assignment");
	if (!env_name_valid(key))
		return ef_fail(c, c->key_line,
		               strncmp(key, "export", 6) == 0 && isspace((unsigned char)key[6])
		                   ? "'%s' is not a variable name: EnvironmentFile= has no 'export' (systemd ignores "
		                     "this line); write NAME=VALUE"
		                   : "'%s' is not a variable name (ASCII letters, digits and '_', not starting with a "
		                     "digit): systemd ignores this assignment",
		               key);
	if (oeap_env_set(c->env, key, value, c->path, c->key_line))
		return oeap_fail(c->err, OEAP_ERR_INTERNAL, c->path, 0, "out of memory");
	c->key.len = 0;
	c->value.len = 0;
	c->has_value = 0;
	return 0;
}

static int ef_putc(envfile_ctx *c, oeap_buf *b, char ch)
{
	if (oeap_buf_put(b, &ch, 1))
		return oeap_fail(c->err, OEAP_ERR_INTERNAL, c->path, 0, "out of memory");
	return 0;
}

/*
 * A comment ending in a backslash, at the line end `i`: systemd 254 and later
 * read the next line as usual, 253 and earlier as part of the comment. Only
 * a next line that would be an assignment makes the two differ: refused.
 */
static int ef_comment_continued(envfile_ctx *c, const char *text, size_t len, size_t i)
{
	size_t j = i + 1;
	while (j < len && (text[j] == ' ' || text[j] == '\t'))
		j++;
	if (j < len && text[j] != '\n' && text[j] != '\r' && !in_set(text[j], SD_COMMENTS))
		return ef_fail(c, c->comment_line, "%s",
		               "a comment ending in a backslash: systemd 253 and older read the next line "
		               "as part of the comment, 254 and newer as an assignment; remove the backslash");
	c->state = PRE_KEY;
	return 0;
}

/* One character `text[i]` through the state machine; non-zero: an error was set. */
static int ef_step(envfile_ctx *c, const char *text, size_t len, size_t i)
{
	char ch = text[i];
	switch (c->state) {
	case PRE_KEY:
		if (in_set(ch, SD_COMMENTS)) {
			c->state = COMMENT;
			c->comment_line = c->line;
		} else if (!in_set(ch, SD_WHITESPACE)) {
			c->state = KEY;
			c->last_key_ws = SIZE_MAX;
			c->key_line = c->line;
			return ef_putc(c, &c->key, ch);
		}
		return 0;
	case KEY:
		if (in_set(ch, SD_NEWLINE))
			/* systemd drops a line without '=' without a word: the setting it meant is lost. */
			return ef_fail(c, c->key_line, "no '=' in '%s': systemd ignores this line", c->key.data);
		if (ch == '=') {
			c->state = PRE_VALUE;
			c->last_value_ws = SIZE_MAX;
			c->value.len = 0;
			return 0;
		}
		if (!in_set(ch, SD_WHITESPACE))
			c->last_key_ws = SIZE_MAX;
		else if (c->last_key_ws == SIZE_MAX)
			c->last_key_ws = c->key.len;
		return ef_putc(c, &c->key, ch);
	case PRE_VALUE:
		if (in_set(ch, SD_NEWLINE)) {
			c->state = PRE_KEY;
			return ef_push(c, c->last_key_ws);
		} else if (ch == '\'') {
			c->state = SQ_VALUE;
			c->quote_line = c->line;
		} else if (ch == '"') {
			c->state = DQ_VALUE;
			c->quote_line = c->line;
		} else if (ch == '\\') {
			c->state = VALUE_ESCAPE;
		} else if (!in_set(ch, SD_WHITESPACE)) {
			c->state = VALUE;
			return ef_putc(c, &c->value, ch);
		}
		return 0;
	case VALUE:
		if (in_set(ch, SD_NEWLINE)) {
			c->state = PRE_KEY;
			if (c->last_value_ws != SIZE_MAX)
				c->value.len = c->last_value_ws; /* trailing blanks of an unquoted value go */
			return ef_push(c, c->last_key_ws);
		}
		if (ch == '\\') {
			c->state = VALUE_ESCAPE;
			c->last_value_ws = SIZE_MAX;
			return 0;
		}
		if (!in_set(ch, SD_WHITESPACE))
			c->last_value_ws = SIZE_MAX;
		else if (c->last_value_ws == SIZE_MAX)
			c->last_value_ws = c->value.len;
		return ef_putc(c, &c->value, ch);
	case VALUE_ESCAPE:
		c->state = VALUE;
		/* an escaped newline is a continuation, eaten */
		return in_set(ch, SD_NEWLINE) ? 0 : ef_putc(c, &c->value, ch);
	case SQ_VALUE:
		if (ch == '\'') {
			c->state = PRE_VALUE;
			return 0;
		}
		return ef_putc(c, &c->value, ch);
	case DQ_VALUE:
		if (ch == '"')
			c->state = PRE_VALUE;
		else if (ch == '\\')
			c->state = DQ_VALUE_ESCAPE;
		else
			return ef_putc(c, &c->value, ch);
		return 0;
	case DQ_VALUE_ESCAPE:
		c->state = DQ_VALUE;
		if (in_set(ch, SD_NEED_ESCAPE))
			return ef_putc(c, &c->value, ch);
		if (ch == '\n')
			return 0;
		/* like a shell: other escapes keep the backslash */
		return ef_putc(c, &c->value, '\\') || ef_putc(c, &c->value, ch);
	case COMMENT:
		if (ch == '\\')
			c->state = COMMENT_ESCAPE;
		else if (in_set(ch, SD_NEWLINE))
			c->state = PRE_KEY;
		return 0;
	case COMMENT_ESCAPE:
		if (in_set(ch, SD_NEWLINE))
			return ef_comment_continued(c, text, len, i);
		c->state = COMMENT;
		return 0;
	}
	return 0;
}

/* The end of the text: what the state left open. */
static int ef_finish(envfile_ctx *c)
{
	switch (c->state) {
	case SQ_VALUE:
	case DQ_VALUE:
	case DQ_VALUE_ESCAPE:
		/* systemd takes the rest of the file as the value: never what was meant. */
		return ef_fail(c, c->quote_line, "%s", "a quote that is never closed (systemd would take the rest of "
		                                       "the file as the value)");
	case KEY:
		return ef_fail(c, c->key_line, "no '=' in '%s': systemd ignores this line", c->key.data);
	case VALUE:
		if (c->last_value_ws != SIZE_MAX)
			c->value.len = c->last_value_ws;
		return ef_push(c, c->last_key_ws);
	case PRE_VALUE:
	case VALUE_ESCAPE:
		return ef_push(c, c->last_key_ws);
	default:
		return 0;
	}
}

int oeap_envfile_parse(const char *text, size_t len, const char *path, oeap_env *env, oeap_error *err)
{
	envfile_ctx c;
	memset(&c, 0, sizeof(c));
	c.path = path;
	c.env = env;
	c.err = err;
	c.state = PRE_KEY;
	c.last_key_ws = c.last_value_ws = SIZE_MAX;
	c.line = 1;
	int rc = 0;
	for (size_t i = 0; i < len && rc == 0; i++) {
		if (text[i] == '\0') {
			rc = ef_fail(&c, c.line, "%s", "a NUL byte: not a text file (systemd stops reading here)");
			break;
		}
		rc = ef_step(&c, text, len, i);
		if (text[i] == '\n')
			c.line++;
	}
	if (rc == 0)
		rc = ef_finish(&c);
	oeap_buf_free(&c.key);
	oeap_buf_free(&c.value);
	return rc ? -1 : 0;
}

int oeap_envfile_load(const char *path, oeap_env *env, oeap_error *err)
{
	char *text = NULL;
	size_t len = 0;
	oeap_error io;
	oeap_error_clear(&io);
	if (oeap_read_file(path, &text, &len, &io))
		return oeap_fail(err, OEAP_ERR_IO, "--env-file", 0, "%s: cannot read it: %s", path, io.message);
	int rc = oeap_envfile_parse(text, len, path, env, err);
	free(text);
	return rc;
}

/* ------------------------------------------------------------ the check */

/* Optimal string alignment distance (Damerau-Levenshtein with adjacent swaps), ASCII case ignored. */
static size_t edit_distance(const char *a, const char *b)
{
	size_t n = strlen(a), m = strlen(b);
	if (n > 64 || m > 64)
		return SIZE_MAX;
	size_t d[65][65];
	for (size_t i = 0; i <= n; i++)
		d[i][0] = i;
	for (size_t j = 0; j <= m; j++)
		d[0][j] = j;
	for (size_t i = 1; i <= n; i++)
		for (size_t j = 1; j <= m; j++) {
			size_t cost = toupper((unsigned char)a[i - 1]) != toupper((unsigned char)b[j - 1]);
			size_t v = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < v)
				v = d[i][j - 1] + 1;
			if (d[i - 1][j - 1] + cost < v)
				v = d[i - 1][j - 1] + cost;
			if (i > 1 && j > 1 && toupper((unsigned char)a[i - 1]) == toupper((unsigned char)b[j - 2]) &&
			    toupper((unsigned char)a[i - 2]) == toupper((unsigned char)b[j - 1]) && d[i - 2][j - 2] + 1 < v)
				v = d[i - 2][j - 2] + 1;
			d[i][j] = v;
		}
	return d[n][m];
}

static int add_problem(oeap_settings_result *res, const char *name, const oeap_env_var *v, int error, int refused,
                       const char *fmt, ...) __attribute__((format(printf, 6, 7)));

static int add_problem(oeap_settings_result *res, const char *name, const oeap_env_var *v, int error, int refused,
                       const char *fmt, ...)
{
	oeap_setting_problem *a = realloc(res->problems, (res->nproblems + 1) * sizeof(*a));
	if (!a)
		return -1;
	res->problems = a;
	oeap_setting_problem *p = &a[res->nproblems];
	memset(p, 0, sizeof(*p));
	p->name = strdup(name);
	p->shown = v ? oeap_quote(v->value, strlen(v->value)) : NULL;
	p->value = v ? strdup(v->value) : NULL;
	p->origin = v && v->origin ? strdup(v->origin) : NULL;
	p->line = v ? v->line : 0;
	p->error = error;
	p->refused = refused;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(p->message, sizeof(p->message), fmt, ap);
	va_end(ap);
	res->nproblems++;
	if (!p->name || (v && (!p->shown || !p->value)) || (v && v->origin && !p->origin))
		return -1;
	return 0;
}

/* The default of setting i as the effective value (validated at load); -1: out of memory. */
static int take_default(const oeap_patchdef *def, size_t i, oeap_settings_result *res)
{
	const oeap_setting_def *s = &def->settings[i];
	if (s->default_value && (s->type == OEAP_SETTING_INT || s->type == OEAP_SETTING_BOOL))
		oeap_setting_parse(def, s, s->default_value, &res->values[i]); /* validated at load */
	else if (s->type == OEAP_SETTING_CHOICE) {
		oeap_setting_parse(def, s, s->default_value, &res->values[i]); /* validated at load */
		if (!(res->strings[i] = strdup(s->values[res->values[i]])))
			return -1;
	} else if (s->default_value && !(res->strings[i] = strdup(s->default_value)))
		return -1;
	return 0;
}

/* Each value on its own: the effective value, or the problem with it. */
static int check_values(const oeap_patchdef *def, const oeap_env *env, oeap_settings_result *res)
{
	char expected[768];
	for (size_t i = 0; i < def->nsettings; i++) {
		const oeap_setting_def *s = &def->settings[i];
		const oeap_env_var *v = oeap_env_get(env, s->name);
		if (s->is_switch)
			res->switch_index = (int)i;
		int rc = v ? oeap_setting_parse(def, s, v->value, &res->values[i]) : 1;
		if (v)
			res->nset++;
		if (rc == 0) {
			res->given[i] = 1;
			if (s->type == OEAP_SETTING_CHOICE && !(res->strings[i] = strdup(s->values[res->values[i]])))
				return -1;
			if (s->type == OEAP_SETTING_STRING || s->type == OEAP_SETTING_PATH || s->type == OEAP_SETTING_OUTPUT ||
			    (s->bands && strchr(v->value, ':'))) {
				const char *a, *e;
				oeap_setting_trim(v->value, &a, &e);
				if (!(res->strings[i] = strndup(a, (size_t)(e - a))))
					return -1;
			}
		} else if (rc == 1) {
			if (take_default(def, i, res))
				return -1;
		} else {
			res->refused[i] = 1;
			oeap_setting_expected_full(def, s, expected, sizeof(expected));
			if (add_problem(res, s->name, v, 1, 1, "expected %s", expected))
				return -1;
		}
	}
	return 0;
}

/* Cross rules (at_least), on the effective values of settings that are themselves valid. */
static int check_cross_rules(const oeap_patchdef *def, const oeap_env *env, oeap_settings_result *res)
{
	for (size_t i = 0; i < def->nsettings; i++) {
		const oeap_setting_def *s = &def->settings[i];
		const oeap_setting_def *t = s->at_least ? oeap_patchdef_setting(def, s->at_least) : NULL;
		if (!t || res->refused[i] || res->refused[t - def->settings])
			continue;
		size_t j = (size_t)(t - def->settings);
		if (res->values[i] < res->values[j]) {
			res->refused[i] = 1;
			const oeap_env_var *v = oeap_env_get(env, s->name);
			if (add_problem(res, s->name, v, 1, 1, "%s%lld is below %s (%lld%s): expected an integer >= %s",
			                v ? "" : "its default ", res->values[i], t->name, res->values[j],
			                res->given[j] ? "" : ", its default", t->name))
				return -1;
		}
	}
	return 0;
}

/* forced_by (bool settings): true whenever the named choice setting's
 * effective value is the one named, as the binding reads it (oea_core.py,
 * parse_settings), so that verify's and status's effective values are what
 * the binding runs with. After the switch: its defaults count too. */
static void apply_forced(const oeap_patchdef *def, oeap_settings_result *res)
{
	for (size_t i = 0; i < def->nsettings; i++) {
		const char *by = def->settings[i].forced_by, *eq = by ? strchr(by, '=') : NULL;
		for (size_t j = 0; eq && j < def->nsettings; j++)
			if (strlen(def->settings[j].name) == (size_t)(eq - by) &&
			    !strncmp(def->settings[j].name, by, (size_t)(eq - by)) && res->strings[j] &&
			    !strcmp(res->strings[j], eq + 1))
				res->values[i] = 1;
	}
}

/*
 * On or off, as the binding decides it: a bad switch counts as on (the
 * import stops). Off (the switch valid and zero), the binding warns about a
 * bad value and runs on defaults: every problem so far becomes a warning,
 * and when there is one, every effective value is the default.
 */
static int apply_switch(const oeap_patchdef *def, oeap_settings_result *res)
{
	int sw = res->switch_index;
	int switch_bad = sw >= 0 && res->refused[sw];
	res->on = sw < 0 || switch_bad || res->values[sw] != 0;
	res->output_ignored = -1;
	if (!res->on)
		for (size_t k = 0; k < res->nproblems; k++) {
			res->problems[k].error = 0;
			res->defaults_only = 1;
		}
	if (res->defaults_only)
		for (size_t i = 0; i < def->nsettings; i++) {
			/* a recording asked for and not made: said (startup.c), never silent */
			if (def->settings[i].type == OEAP_SETTING_OUTPUT && res->given[i] && res->output_ignored < 0)
				res->output_ignored = (int)i;
			res->given[i] = 0;
			free(res->strings[i]);
			res->strings[i] = NULL;
			res->values[i] = 0;
			if (take_default(def, i, res))
				return -1;
		}
	return 0;
}

/* The library the binding loads: its loader refuses a relative path with
 * a slash, which would name a file in the server's working directory (not
 * verify's). Only while on: off, the binding loads nothing. */
static int check_library_relative(const oeap_patchdef *def, const oeap_env *env, oeap_settings_result *res)
{
	for (size_t i = 0; res->on && def->library_env && i < def->nsettings; i++)
		if (res->given[i] && res->strings[i] && !strcmp(def->settings[i].name, def->library_env) &&
		    oeap_library_relative(res->strings[i]) &&
		    add_problem(res, def->settings[i].name, oeap_env_get(env, def->settings[i].name), 1, 1,
		                "a relative path, which the binding refuses to load (the start stops, or, not strict, "
		                "OEA stays off): it would be opened from the server's working directory, not this one; "
		                "give an absolute path, or a bare file name that the loader's search path finds "
		                "(LD_LIBRARY_PATH, the loader cache)"))
			return -1;
	return 0;
}

/* The files the binding writes (type output: the recorder's): whenever a
 * valid value is in effect, on or off (with the switch off the recorder
 * still records), verify wants a folder this user can write; the binding
 * does not refuse one (its recorder stops and the server serves), so this
 * is an error of verify's, not a refusal. */
static int check_outputs(const oeap_patchdef *def, const oeap_env *env, oeap_settings_result *res)
{
	char why[512];
	for (size_t i = 0; !res->defaults_only && i < def->nsettings; i++)
		if (def->settings[i].type == OEAP_SETTING_OUTPUT && res->given[i] && res->strings[i] &&
		    oeap_output_problem(res->strings[i], why, sizeof(why)) &&
		    add_problem(res, def->settings[i].name, oeap_env_get(env, def->settings[i].name), 1, 0, "%s", why))
			return -1;
	return 0;
}

/* Values the binding takes but that may well do nothing (warn_from): said,
 * not refused, since whether they do depends on what verify cannot see
 * (the model). Values ignored while off get no advice. */
static int warn_values(const oeap_patchdef *def, const oeap_env *env, oeap_settings_result *res)
{
	for (size_t i = 0; !res->defaults_only && i < def->nsettings; i++) {
		const oeap_setting_def *s = &def->settings[i];
		if (s->warn && res->given[i] && res->values[i] >= s->warn_from &&
		    add_problem(res, s->name, oeap_env_get(env, s->name), 0, 0, "%lld or more: %s", s->warn_from, s->warn))
			return -1;
	}
	return 0;
}

/* The setting whose name is nearest to `name` (NULL when there is none), and its distance in *best. */
static const char *closest_setting(const oeap_patchdef *def, const char *name, size_t *best)
{
	const char *closest = NULL;
	*best = SIZE_MAX;
	for (size_t i = 0; i < def->nsettings; i++) {
		size_t d = edit_distance(name, def->settings[i].name);
		if (d < *best) {
			*best = d;
			closest = def->settings[i].name;
		}
	}
	return closest;
}

/* Names in the binding's namespace that are no setting: a typo (within two
 * edits of a setting) silently drops that setting, so it is an error. */
static int check_unknown_names(const oeap_patchdef *def, const oeap_env *env, oeap_settings_result *res)
{
	size_t plen = def->env_prefix ? strlen(def->env_prefix) : 0;
	for (size_t k = 0; plen && k < env->n; k++) {
		const oeap_env_var *v = &env->vars[k];
		if (strncasecmp(v->name, def->env_prefix, plen) != 0 || oeap_patchdef_setting(def, v->name))
			continue;
		size_t best;
		const char *closest = closest_setting(def, v->name, &best);
		int typo = closest && best <= 2;
		if (typo ? add_problem(res, v->name, v, 1, 0,
		                       "not a setting of %s/%d: a typo of %s? The binding ignores it, so %s keeps its "
		                       "default; rename or remove it",
		                       def->name, def->version, closest, closest)
		         : add_problem(res, v->name, v, 0, 0, "not a setting of %s/%d, the binding ignores it%s%s%s", def->name,
		                       def->version, closest ? " (closest: " : "", closest ? closest : "",
		                       closest ? ")" : ""))
			return -1;
	}
	return 0;
}

/* The other bundled definitions' prefixes, each with its "name/version (Framework)"; loaded once per check. */
typedef struct other_prefix {
	char prefix[64];
	char who[192];
} other_prefix;

static size_t other_prefixes(const oeap_patchdef *def, other_prefix *out, size_t cap)
{
	char *dir = oeap_patchdef_bundle_dir();
	char **names = dir ? oeap_patchdef_list(dir) : NULL;
	size_t n = 0;
	for (size_t i = 0; names && names[i] && n < cap; i++) {
		if (def->name && strcmp(names[i], def->name) == 0)
			continue;
		char path[4096];
		oeap_patchdef *o = NULL;
		oeap_error ignore;
		oeap_error_clear(&ignore);
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		if (oeap_patchdef_load_manifest(path, &o, &ignore) == 0 && o->env_prefix && o->env_prefix[0] &&
		    strlen(o->env_prefix) < sizeof(out[n].prefix) &&
		    (!def->env_prefix || strcasecmp(o->env_prefix, def->env_prefix) != 0)) {
			snprintf(out[n].prefix, sizeof(out[n].prefix), "%s", o->env_prefix);
			snprintf(out[n].who, sizeof(out[n].who), "%.64s/%d%s%.64s%s", o->name, o->version,
			         o->framework ? " (" : "", o->framework ? o->framework : "", o->framework ? ")" : "");
			n++;
		}
		oeap_patchdef_free(o);
	}
	oeap_patchdef_list_free(names);
	free(dir);
	return n;
}

/* Names outside the binding's namespace that were surely meant for it: another
 * bundled definition's prefix (SGLang's K0 where the target is vLLM's), or within two
 * edits of a setting (VLLM_OAE_K0). The binding ignores both: a warning. */
static int check_foreign_names(const oeap_patchdef *def, const oeap_env *env, oeap_settings_result *res)
{
	size_t plen = def->env_prefix ? strlen(def->env_prefix) : 0;
	other_prefix others[16];
	size_t nothers = 0;
	int loaded = 0;
	for (size_t k = 0; plen && k < env->n; k++) {
		const oeap_env_var *v = &env->vars[k];
		if (strncasecmp(v->name, def->env_prefix, plen) == 0)
			continue;
		/* only names with an "OEA" in them can be another definition's (all bundled ones have it):
		 * the bundled definitions are read only then, once */
		if (!loaded && strcasestr(v->name, "OEA")) {
			nothers = other_prefixes(def, others, sizeof(others) / sizeof(others[0]));
			loaded = 1;
		}
		const other_prefix *other = NULL;
		for (size_t i = 0; i < nothers && !other; i++)
			if (strncasecmp(v->name, others[i].prefix, strlen(others[i].prefix)) == 0)
				other = &others[i];
		size_t best;
		const char *closest = closest_setting(def, v->name, &best);
		int rc = 0;
		if (other)
			rc = add_problem(res, v->name, v, 0, 0,
			                 "a setting of %s, not of %s/%d, which this target runs: its binding ignores it "
			                 "(this one's settings start with %s)",
			                 other->who, def->name, def->version, def->env_prefix);
		else if (closest && best <= 2)
			rc = add_problem(res, v->name, v, 0, 0,
			                 "not a setting of %s/%d: a typo of %s? The binding ignores it, so %s keeps its "
			                 "default",
			                 def->name, def->version, closest, closest);
		if (rc)
			return -1;
	}
	return 0;
}

int oeap_settings_check(const oeap_patchdef *def, const oeap_env *env, oeap_settings_result *res)
{
	size_t n = def->nsettings;
	memset(res, 0, sizeof(*res));
	res->switch_index = -1;
	res->output_ignored = -1;
	res->nsettings = n;
	res->values = calloc(n ? n : 1, sizeof(*res->values));
	res->strings = calloc(n ? n : 1, sizeof(*res->strings));
	res->given = calloc(n ? n : 1, sizeof(*res->given));
	res->refused = calloc(n ? n : 1, sizeof(*res->refused));
	if (!res->values || !res->strings || !res->given || !res->refused)
		return -1;
	/* The order matters: the switch reads the values' verdicts (and makes
	 * the problems found so far warnings when off), the checks after it
	 * whether it is on and which values are effective. */
	if (check_values(def, env, res) || check_cross_rules(def, env, res) || apply_switch(def, res))
		return -1;
	apply_forced(def, res);
	if (check_library_relative(def, env, res) || check_outputs(def, env, res) || warn_values(def, env, res) || check_unknown_names(def, env, res) ||
	    check_foreign_names(def, env, res))
		return -1;
	for (size_t k = 0; k < res->nproblems; k++) {
		if (res->problems[k].error)
			res->errors++;
		else
			res->warnings++;
	}
	return 0;
}

void oeap_settings_result_free(oeap_settings_result *res)
{
	for (size_t k = 0; k < res->nproblems; k++) {
		free(res->problems[k].name);
		free(res->problems[k].shown);
		free(res->problems[k].value);
		free(res->problems[k].origin);
	}
	free(res->problems);
	if (res->strings)
		for (size_t i = 0; i < res->nsettings; i++)
			free(res->strings[i]);
	free(res->strings);
	free(res->values);
	free(res->given);
	free(res->refused);
	memset(res, 0, sizeof(*res));
}

const char *oeap_settings_effective(const oeap_patchdef *def, const oeap_settings_result *res, size_t i,
                                    char *buf, size_t cap)
{
	const oeap_setting_def *s = &def->settings[i];
	if (res->refused[i] && !res->defaults_only)
		return NULL; /* on, the binding stops at import: a value it never runs with must not be shown as one */
	switch (s->type) {
	case OEAP_SETTING_INT:
		if (res->strings[i])
			return res->strings[i]; /* k0 bands, as given */
		snprintf(buf, cap, "%lld", res->values[i]);
		return buf;
	case OEAP_SETTING_BOOL:
		snprintf(buf, cap, "%s", res->values[i] ? "true" : "false");
		return buf;
	default:
		return res->strings[i];
	}
}
