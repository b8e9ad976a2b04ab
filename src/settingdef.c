/* settingdef.c - the [setting:NAME] sections of a definition: checked at load, and the rule a value must hold. */
#include "settingdef.h"

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

#include "k0bands.h"
#include "manifest.h"

/* Env variable names: what a process can be given and systemd accepts. */
static int is_env_name(const char *s)
{
	return oeap_def_is_identifier(s);
}

int oeap_settingdefs_check(oeap_patchdef *def, oeap_error *err)
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
		if (!oeap_def_is_identifier(s->key))
			return oeap_fail(err, OEAP_ERR_DEFINITION, where, 0, "'key' must be an identifier");
		if (s->type != OEAP_SETTING_INT &&
		    (s->min != INT32_MIN || s->max != INT32_MAX || s->at_least || s->range_reason || s->has_warn_from ||
		     s->bands))
			return oeap_fail(err, OEAP_ERR_DEFINITION, where, 0,
			                 "min, max, at_least, range_reason, warn_from and bands are for type = int");
		if (s->bands && (s->min != 0 || s->max > 1024))
			return oeap_fail(err, OEAP_ERR_DEFINITION, where, 0, "bands take k0 values: min = 0 and max <= 1024");
		if ((s->type == OEAP_SETTING_CHOICE) != (s->values != NULL))
			return oeap_fail(err, OEAP_ERR_DEFINITION, where, 0, "'values' goes with type = choice, and a choice needs it");
		if (s->type == OEAP_SETTING_CHOICE && !s->default_value)
			return oeap_fail(err, OEAP_ERR_DEFINITION, where, 0, "a choice setting needs a 'default'");
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
			/* by hand, not oeap_patchdef_setting(): the loader is above this room */
			const oeap_setting_def *t = NULL;
			for (size_t j = 0; j < def->nsettings && !t; j++)
				if (!strcmp(def->settings[j].name, s->at_least))
					t = &def->settings[j];
			if (!t || t == s || t->type != OEAP_SETTING_INT)
				return oeap_fail(err, OEAP_ERR_DEFINITION, where, 0, "'at_least = %s' must name another int setting",
				                 s->at_least);
		}
		if (s->forced_by) {
			/* OTHER=VALUE: a choice setting other than this one, and one of its values */
			const char *eq = strchr(s->forced_by, '=');
			const oeap_setting_def *t = NULL;
			int listed = 0;
			for (size_t j = 0; eq && j < def->nsettings && !t; j++)
				if (strlen(def->settings[j].name) == (size_t)(eq - s->forced_by) &&
				    !strncmp(def->settings[j].name, s->forced_by, (size_t)(eq - s->forced_by)))
					t = &def->settings[j];
			for (char **w = t && t->values ? t->values : NULL; w && *w; w++)
				listed |= !strcmp(*w, eq + 1);
			if (s->type != OEAP_SETTING_BOOL || !t || t == s || t->type != OEAP_SETTING_CHOICE ||
			    (t->values && !listed)) /* no values: that setting's own check says so */
				return oeap_fail(err, OEAP_ERR_DEFINITION, where, 0,
				                 "'forced_by = %s' must be on a bool setting and name another choice setting "
				                 "and one of its values (OTHER=VALUE)", s->forced_by);
		}
		if (s->is_switch && s->type != OEAP_SETTING_INT && s->type != OEAP_SETTING_BOOL)
			return oeap_fail(err, OEAP_ERR_DEFINITION, where, 0, "a switch is an int or bool setting");
		switches += s->is_switch;
	}
	if (switches > 1)
		return oeap_fail(err, OEAP_ERR_DEFINITION, def->dir, 0, "at most one setting may be 'switch = yes'");
	return 0;
}


const char *oeap_setting_type_name(oeap_setting_type t)
{
	return t == OEAP_SETTING_INT      ? "int"
	       : t == OEAP_SETTING_BOOL   ? "bool"
	       : t == OEAP_SETTING_PATH   ? "path"
	       : t == OEAP_SETTING_CHOICE ? "choice"
	       : t == OEAP_SETTING_OUTPUT ? "output"
	                                  : "string";
}

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
		if (s->bands && memchr(p, ':', (size_t)(e - p))) {
			/* k0 by batch size: the one parser replay and --recommend use; the value is the largest k0 */
			char text[512], why[256];
			oeap_k0_bands b;
			if ((size_t)(e - p) >= sizeof(text))
				return -1;
			memcpy(text, p, (size_t)(e - p));
			text[e - p] = '\0';
			if (oeap_k0_bands_parse(text, (int)s->max, &b, why, sizeof(why)))
				return -1;
			for (size_t i = 0; i < b.n; i++)
				if (b.band[i].k0 > *out)
					*out = b.band[i].k0;
			return 0;
		}
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
	case OEAP_SETTING_CHOICE:
		for (char **w = s->values; w && *w; w++)
			if (strlen(*w) == (size_t)(e - p) && strncasecmp(p, *w, (size_t)(e - p)) == 0) {
				*out = w - s->values;
				return 0;
			}
		return -1;
	default:
		return 0;
	}
}

void oeap_setting_expected_full(const oeap_patchdef *def, const oeap_setting_def *s, char *buf, size_t cap)
{
	char base[256];
	oeap_setting_expected(def, s, base, sizeof(base));
	snprintf(buf, cap, "%s%s%s%s%s", base, s->range_reason ? " (" : "", s->range_reason ? s->range_reason : "",
	         s->range_reason ? ")" : "",
	         s->bands ? ", or k0 by batch size: bands LO-HI:K0 from 1 on, each right after the one before, the "
	                    "last open (1-7:0,8-31:4,32-:3)"
	                  : "");
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
	case OEAP_SETTING_OUTPUT:
		snprintf(buf, cap, "an absolute path in a folder the service user can write");
		break;
	case OEAP_SETTING_CHOICE:
		join_words(s->values, t, sizeof(t));
		snprintf(buf, cap, "one of %s", t);
		break;
	default:
		snprintf(buf, cap, "a string");
		break;
	}
}
