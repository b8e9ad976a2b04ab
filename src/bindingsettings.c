/*
 * bindingsettings.c - the binding's settings table from the definition
 * (bindingsettings.h).
 */
#include <stdio.h>
#include <string.h>

#include "bindingsettings.h"

/* A Python str literal: single quotes, with backslash, quote and control characters escaped. */
static int put_str(oeap_buf *b, const char *s)
{
	int rc = oeap_buf_put(b, "'", 1);
	for (; !rc && *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '\\' || c == '\'')
			rc = oeap_buf_printf(b, "\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			rc = oeap_buf_printf(b, "\\x%02x", c);
		else
			rc = oeap_buf_put(b, s, 1);
	}
	return rc || oeap_buf_put(b, "'", 1);
}

/* The default as a Python literal, parsed by the one value rule (validated when the definition loaded). */
static int put_default(const oeap_patchdef *def, const oeap_setting_def *s, oeap_buf *b)
{
	long long v = 0;
	if (!s->default_value)
		return oeap_buf_puts(b, "None");
	if (s->type == OEAP_SETTING_INT && oeap_setting_parse(def, s, s->default_value, &v) == 0)
		return oeap_buf_printf(b, "%lld", v);
	if (s->type == OEAP_SETTING_BOOL && oeap_setting_parse(def, s, s->default_value, &v) == 0)
		return oeap_buf_puts(b, v ? "True" : "False");
	if (s->type == OEAP_SETTING_CHOICE && oeap_setting_parse(def, s, s->default_value, &v) == 0)
		return put_str(b, s->values[v]); /* the listed spelling, as a value is read */
	return put_str(b, s->default_value);
}

int oeap_binding_render_settings(const oeap_patchdef *def, oeap_buf *out, oeap_error *err)
{
	char expected[1024];
	int rc = oeap_buf_puts(out, "(");
	for (size_t i = 0; !rc && i < def->nsettings; i++) {
		const oeap_setting_def *s = &def->settings[i];
		int is_int = s->type == OEAP_SETTING_INT;
		/* the words verify's message uses (settings.c, check_values) */
		oeap_setting_expected_full(def, s, expected, sizeof(expected));
		rc = oeap_buf_puts(out, "\n    {\"name\": ") || put_str(out, s->name) ||
		     oeap_buf_puts(out, ", \"key\": ") || put_str(out, s->key) ||
		     oeap_buf_printf(out, ", \"type\": \"%s\", \"default\": ", oeap_setting_type_name(s->type)) ||
		     put_default(def, s, out);
		if (!rc && is_int)
			rc = oeap_buf_printf(out, ", \"min\": %lld, \"max\": %lld", s->min, s->max);
		else if (!rc)
			rc = oeap_buf_puts(out, ", \"min\": None, \"max\": None");
		rc = rc || oeap_buf_printf(out, ", \"bands\": %s", s->bands ? "True" : "False") ||
		     oeap_buf_puts(out, ", \"at_least\": ") ||
		     (s->at_least ? put_str(out, s->at_least) : oeap_buf_puts(out, "None")) ||
		     oeap_buf_puts(out, ", \"forced_by\": ") ||
		     (s->forced_by ? put_str(out, s->forced_by) : oeap_buf_puts(out, "None")) ||
		     oeap_buf_printf(out, ", \"switch\": %s, \"expected\": ", s->is_switch ? "True" : "False") ||
		     put_str(out, expected) || oeap_buf_puts(out, ", \"values\": ");
		if (!rc && s->values) { /* a choice's values, as written */
			rc = oeap_buf_puts(out, "(");
			for (char **w = s->values; !rc && *w; w++)
				rc = put_str(out, *w) || oeap_buf_puts(out, ", ");
			rc = rc || oeap_buf_puts(out, ")");
		} else if (!rc)
			rc = oeap_buf_puts(out, "None");
		rc = rc || oeap_buf_puts(out, "},");
	}
	rc = rc || oeap_buf_puts(out, "\n)");
	return rc ? oeap_fail(err, OEAP_ERR_INTERNAL, "binding", 0, "out of memory") : 0;
}
