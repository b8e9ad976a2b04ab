/*
 * startup.c - the one decision on what a start does about OEA (startup.h).
 */
#include <stdio.h>
#include <string.h>

#include "startup.h"

static int output_in_effect(const oeap_patchdef *def, const oeap_settings_result *res);

const char *oeap_start_kind_name(oeap_start_kind kind)
{
	return kind == OEAP_START_ON ? "on" : kind == OEAP_START_STOPS ? "stops" : "off";
}

/* Whether problem `p` is one the binding's parse_settings raises on (not the loader's refusal of a path). */
static int stops_import(const oeap_patchdef *def, const oeap_setting_problem *p)
{
	return p->refused && p->error && !(def->library_env && strcmp(p->name, def->library_env) == 0);
}

int oeap_start_output(const oeap_patchdef *def, const oeap_settings_result *res)
{
	return output_in_effect(def, res);
}

/* The output setting in effect (the recorder's file), or -1: with one, the binding records even with OEA off. */
static int output_in_effect(const oeap_patchdef *def, const oeap_settings_result *res)
{
	for (size_t i = 0; !res->defaults_only && i < def->nsettings; i++)
		if (def->settings[i].type == OEAP_SETTING_OUTPUT && res->given[i] && res->strings[i])
			return (int)i;
	return -1;
}

static void append_output(const oeap_patchdef *def, const oeap_settings_result *res, int o, oeap_start_outcome *out)
{
	size_t used = strlen(out->reason);
	if (o >= 0)
		snprintf(out->reason + used, sizeof(out->reason) - used,
		         ", %s=%s: the decode calls' routing inputs are recorded", def->settings[o].name, res->strings[o]);
}

void oeap_start_outcome_of(const oeap_patchdef *def, const oeap_settings_result *res, oeap_start_outcome *out)
{
	memset(out, 0, sizeof(*out));
	const oeap_setting_def *sw = res->switch_index >= 0 ? &def->settings[res->switch_index] : NULL;
	if (!res->defaults_only && res->on)
		for (size_t k = 0; k < res->nproblems; k++) {
			const oeap_setting_problem *p = &res->problems[k];
			if (!stops_import(def, p))
				continue;
			out->kind = OEAP_START_STOPS;
			out->variable = p->name;
			snprintf(out->reason, sizeof(out->reason),
			         "the binding refuses %s%s%s: %s; its import raises SettingError and the server stops "
			         "whatever %sSTRICT says",
			         p->name, p->shown ? "=" : " unset", p->shown ? p->shown : "", p->message,
			         def->env_prefix ? def->env_prefix : "");
			return;
		}
	char value[64];
	const char *v = sw ? oeap_settings_effective(def, res, (size_t)res->switch_index, value, sizeof(value)) : NULL;
	out->variable = sw ? sw->name : NULL;
	int o = output_in_effect(def, res);
	if (!res->on && o >= 0) {
		/* recording only: the binding loads torch and liboea (its recorder) and changes nothing */
		out->kind = OEAP_START_OFF;
		snprintf(out->reason, sizeof(out->reason), "%s %s: OEA is off, the routing is left as it is",
		         sw->name, res->given[res->switch_index] ? "is 0" : "is unset");
		append_output(def, res, o, out);
		return;
	}
	if (!res->on) {
		/* off with a bad value: the given flags are cleared (every value is the default), so
		 * whether the switch was set or left unset is no longer known here */
		out->kind = OEAP_START_OFF;
		if (res->defaults_only)
			snprintf(out->reason, sizeof(out->reason),
			         "%s is %s or unset: OEA is off, the binding loads nothing and ignores the bad values "
			         "(it warns and runs on the defaults)%s%s%s",
			         sw->name, v ? v : "0", res->output_ignored >= 0 ? "; " : "",
			         res->output_ignored >= 0 ? def->settings[res->output_ignored].name : "",
			         res->output_ignored >= 0 ? " is ignored with them: nothing is recorded" : "");
		else if (res->given[res->switch_index])
			snprintf(out->reason, sizeof(out->reason), "%s=%s: OEA is off, the binding loads nothing", sw->name,
			         v ? v : "0");
		else
			snprintf(out->reason, sizeof(out->reason), "%s is unset: OEA is off (the default), the binding loads "
			         "nothing", sw->name);
		return;
	}
	out->kind = OEAP_START_ON;
	if (sw)
		snprintf(out->reason, sizeof(out->reason), "%s=%s: OEA is on", sw->name, v ? v : "?");
	else
		snprintf(out->reason, sizeof(out->reason), "OEA is on (the definition has no switch setting)");
	/* how it runs: each choice setting (MODE=shadow: decided and counted, the framework's
	 * routing kept), so that verify, status and the plugin's line say it */
	for (size_t i = 0; i < def->nsettings; i++) {
		if (def->settings[i].type != OEAP_SETTING_CHOICE)
			continue;
		const char *c = oeap_settings_effective(def, res, i, value, sizeof(value));
		size_t used = strlen(out->reason);
		snprintf(out->reason + used, sizeof(out->reason) - used, ", %s=%s", def->settings[i].name, c ? c : "?");
	}
	append_output(def, res, o, out);
}
