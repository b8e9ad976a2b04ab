/*
 * plugincheck.h - whether the target's framework will load oeapatch's
 * plugin (the wheel's entry point `oeapatch`), for `oeapatch status`.
 *
 * SGLang from 0.5.11 on (sglang/srt/plugins/__init__.py with load_plugins)
 * loads the entry points of group "sglang.srt.plugins" in every process;
 * SGLANG_PLUGINS (comma-separated names, each stripped of whitespace; unset
 * or empty: all) restricts which. vLLM loads group "vllm.general_plugins";
 * VLLM_PLUGINS (unset: all; set: its value split at commas, nothing
 * stripped, so an empty value loads none) restricts which
 * (vllm/plugins/__init__.py, vllm/envs.py). The answer is information: the
 * binding's own import checks hold without the plugin.
 */
#ifndef OEAP_PLUGINCHECK_H
#define OEAP_PLUGINCHECK_H

#include "cli.h"
#include "settings.h"

typedef struct oeap_plugin_state {
	int applicable;     /* 0: the definition's framework has no plugin of ours (nothing to report) */
	const char *framework; /* "SGLang", "vLLM" */
	const char *group;     /* the entry point group */
	const char *var;       /* the restricting variable */
	int supported;      /* 1: the target's release loads plugins (its plugins/__init__.py has the loader) */
	int installed;      /* 1, 0, or -1: unknown (a checkout with no interpreter named, or it could not say) */
	int enabled;        /* installed and not excluded by `var` */
	char dist[128];     /* the distribution that registers the entry point, "" if none */
	char version[64];   /* its version */
	char excluded_by[1024]; /* "VAR=VALUE" when VAR leaves `oeapatch` out, else "" */
	char origin[512];   /* where VAR was read: "FILE:LINE", or "" for the environment */
	char why_unknown[512]; /* installed == -1: why */
} oeap_plugin_state;

/*
 * Fills `st` for the target `cli` opened (oeap_cli_open). Installed: with an
 * interpreter (--python, the venv default) that interpreter is asked, in the
 * server's environment (cli->env_files, as the import checks), through
 * importlib.metadata; with -C on a site-packages folder its
 * *.dist-info/entry_points.txt are read; a checkout names no environment.
 * `env` is the server's environment (verify's: the --env-file files, else
 * this process's), where the restricting variable is read. Never fails:
 * what cannot be found out is reported as unknown.
 */
void oeap_plugin_check(const oeap_cli *cli, const oeap_env *env, oeap_plugin_state *st);

/* The one human line, without its "plugin:" label and newline, into `out`. */
void oeap_plugin_describe(const oeap_plugin_state *st, char *out, size_t cap);

/* The "plugin" member of status's --json document (a new reference). */
json_t *oeap_plugin_json(const oeap_plugin_state *st);

#endif
