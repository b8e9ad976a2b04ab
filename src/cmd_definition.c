/*
 * oeapatch definition: what a patch definition declares, as this oeapatch
 * reads it (patchdef.c, through inih). The one reader of patch.ini: the
 * wheel's plugin takes the definition it checks against from here (--json)
 * instead of parsing patch.ini a second time, so the two cannot drift.
 * Needs no target: --patch names the definition (or it is detected from the
 * folder, as for the other commands).
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cmd.h"
#include "command.h"
#include "opt.h"
#include "report.h"
#include "settingdef.h"

static const oeap_option options[] = {
	OEAP_COMMON_OPTIONS,
	OEAP_OPT_END,
};

static int compute(const oeap_cli *cli, const void *opts, void *result, oeap_error *err)
{
	(void)opts;
	(void)result;
	if (!cli->def)
		return oeap_fail(err, OEAP_ERR_USAGE, "definition", 0,
		                 "no patch definition: name one with --patch NAME|DIR");
	return 0;
}

static json_t *paths(char *const *list)
{
	json_t *a = json_array();
	for (size_t i = 0; list && list[i]; i++)
		json_array_append_new(a, oeap_json_str(list[i]));
	return a;
}

static void print_json(const oeap_cli *cli, const void *opts, const void *result)
{
	(void)opts;
	(void)result;
	const oeap_patchdef *d = cli->def;
	json_t *j = oeap_cli_json_head(cli, OEAP_EXIT_OK);
	oeap_cli_json_definition(cli, j);
	json_object_set_new(j, "targets", paths(d->targets));
	json_object_set_new(j, "installed_targets", paths(d->installed_targets));
	json_t *bind = json_object();
	json_object_set_new(bind, "module", oeap_json_str(d->binding_module));
	json_object_set_new(bind, "env_prefix", d->env_prefix ? oeap_json_str(d->env_prefix) : json_null());
	json_object_set_new(bind, "library_env", d->library_env ? oeap_json_str(d->library_env) : json_null());
	json_object_set_new(j, "binding", bind);
	json_t *settings = json_array(), *sw = json_null();
	for (size_t i = 0; i < d->nsettings; i++) {
		const oeap_setting_def *s = &d->settings[i];
		json_t *values = s->values ? paths(s->values) : json_null();
		/* forced_by: "OTHER=VALUE", the choice that turns this bool on whatever it says */
		json_array_append_new(
		    settings, json_pack("{s:o,s:o,s:s,s:o,s:b,s:o,s:o}", "name", oeap_json_str(s->name), "key",
		                        oeap_json_str(s->key), "type", oeap_setting_type_name(s->type), "default",
		                        s->default_value ? oeap_json_str(s->default_value) : json_null(), "switch",
		                        s->is_switch, "values", values, "forced_by",
		                        s->forced_by ? oeap_json_str(s->forced_by) : json_null()));
		if (s->is_switch) {
			json_decref(sw);
			sw = oeap_json_str(s->name);
		}
	}
	json_object_set_new(j, "settings", settings);
	/* The variable whose zero/false turns the binding off (null: none). */
	json_object_set_new(j, "switch", sw);
	json_t *regions = json_array();
	for (size_t i = 0; i < d->nregions; i++)
		json_array_append_new(regions, json_pack("{s:o,s:o}", "name", oeap_json_str(d->regions[i].name), "template",
		                                         oeap_json_str(d->regions[i].template_text)));
	json_object_set_new(j, "regions", regions);
	oeap_json_emit(j);
}

static void print_text(const oeap_cli *cli, const void *opts, const void *result)
{
	(void)opts;
	(void)result;
	const oeap_patchdef *d = cli->def;
	printf("patch:     %s/%d%s%s%s\n", d->name, d->version, d->framework ? " (" : "", d->framework ? d->framework : "",
	       d->framework ? ")" : "");
	printf("dir:       %s\n", d->dir);
	for (size_t i = 0; d->targets && d->targets[i]; i++)
		printf("%s %s\n", i ? "          " : "target:   ", d->targets[i]);
	for (size_t i = 0; d->installed_targets && d->installed_targets[i]; i++)
		printf("%s %s\n", i ? "          " : "installed:", d->installed_targets[i]);
	printf("binding:   %s.py beside the target\n", d->binding_module);
	for (size_t i = 0; i < d->nsettings; i++) {
		const oeap_setting_def *s = &d->settings[i];
		printf("%s %s=%s", i ? "          " : "settings: ", s->name,
		       s->default_value ? s->default_value : "(recorded at apply)");
		for (size_t v = 0; s->values && s->values[v]; v++)
			printf("%s%s", v ? "|" : " (one of ", s->values[v]);
		printf("%s%s", s->values ? ")" : "", s->is_switch ? " (the switch: zero/false is off)" : "");
		printf("%s%s%s\n", s->forced_by ? " (true whenever " : "", s->forced_by ? s->forced_by : "",
		       s->forced_by ? ")" : "");
	}
}

static void result_free(void *result)
{
	(void)result;
}

static const oeap_command_steps steps = {compute, print_json, print_text, result_free};

int cmd_definition(int argc, char **argv)
{
	int first = 0;
	oeap_cli cli;
	int p = oeap_cli_parse(&cli, "definition", "[--patch NAME|DIR] [--json] [-q]",
	                       "What a patch definition declares, as oeapatch reads it: its targets, binding module, "
	                       "settings (the switch among them) and region templates. The wheel's plugin reads it "
	                       "from here (--json).",
	                       options, argc, argv, NULL, &first);
	if (p)
		return p > 0 ? OEAP_EXIT_OK : OEAP_EXIT_TROUBLE;
	if ((p = oeap_cli_no_operands(&cli, argc, argv, first)))
		return p;
	char unused = 0;
	return oeap_command_run(&cli, 0, &steps, NULL, &unused, NULL);
}
