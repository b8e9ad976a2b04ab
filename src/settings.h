/*
 * settings.h - the run-time settings of a binding (environment variables),
 * checked against the rules of its patch definition ([setting:NAME]), and
 * the environments they come from: this process's own, or systemd
 * EnvironmentFile= files.
 *
 * The rule a single value must hold is the definition's own
 * (oeap_setting_parse in settingdef.h, which loading a definition needs for
 * its defaults): this module depends on the definition, never the reverse.
 */
#ifndef OEAP_SETTINGS_H
#define OEAP_SETTINGS_H

#include <stddef.h>

#include "error.h"
#include "patchdef.h"
#include "settingdef.h"

/* One assignment: NAME=VALUE, and where it came from. */
typedef struct oeap_env_var {
	char *name;
	char *value;
	char *origin; /* the file it was read from, or NULL: the process environment */
	long line;    /* 1-based line in that file (where the assignment starts), 0 for the environment */
} oeap_env_var;

/* An environment: later assignments of a name replace earlier ones (as systemd merges files). */
typedef struct oeap_env {
	oeap_env_var *vars;
	size_t n;
} oeap_env;

/* Sets `name` (copies everything); -1 when memory ran out. */
int oeap_env_set(oeap_env *env, const char *name, const char *value, const char *origin, long line);
const oeap_env_var *oeap_env_get(const oeap_env *env, const char *name);
void oeap_env_free(oeap_env *env);

/* Adds every NAME=VALUE of `environ_` (a NULL-terminated array, e.g. `environ`). */
int oeap_env_from_environ(oeap_env *env, char **environ_, oeap_error *err);

/*
 * Parses `text` as systemd reads an EnvironmentFile= (systemd.exec(5), the
 * state machine of its env-file parser, v254 on) into `env`, later names
 * replacing earlier ones: KEY=VALUE lines, blanks around key and unquoted
 * value dropped, `#` and `;` comment lines, backslash escapes and line
 * continuation in unquoted and double-quoted values, single quotes verbatim,
 * quoted values spanning lines. No variable expansion, no `export`. What
 * systemd would silently ignore or read differently from what the line says
 * is an error naming `path` and the line (err->line): a line without '=',
 * a name that is not a variable name (`export X=1`), invalid UTF-8, a NUL
 * byte, a quote never closed, and a comment ending in a backslash (systemd
 * before 254 continues the comment onto the next line, later ones do not).
 */
int oeap_envfile_parse(const char *text, size_t len, const char *path, oeap_env *env, oeap_error *err);

/* Reads `path` and parses it (oeap_envfile_parse); a file that cannot be read is an error naming it. */
int oeap_envfile_load(const char *path, oeap_env *env, oeap_error *err);

/* One thing wrong with the settings. */
typedef struct oeap_setting_problem {
	char *name;     /* the variable */
	char *shown;    /* its value, quoted, control characters and invalid UTF-8 escaped; NULL: unset */
	char *value;    /* its value as given; NULL: unset */
	char *origin;   /* file, or NULL: the environment */
	long line;
	int error;      /* 1: the binding would refuse to start (verify fails); 0: a warning */
	int refused;    /* 1: a value the binding refuses (a rule broken); 0: a name it ignores, or advice
	                   on a value it takes (the setting's warn_from) */
	char message[512]; /* "expected an integer >= 1", "not a setting of sglang-oea/2 ..." */
} oeap_setting_problem;

typedef struct oeap_settings_result {
	size_t nsettings;     /* def->nsettings: the length of the arrays below */
	int on;               /* the switch setting is on (no switch: always) */
	int switch_index;     /* index in def->settings, -1 when the definition has none */
	int defaults_only;    /* off with a bad value: the binding ignores every setting */
	int output_ignored;   /* with defaults_only: the output setting (the recorder's file) that
	                         was given and is ignored with the rest (its index), else -1 */
	long long *values;    /* effective int/bool values, per def->settings (meaningless where refused) */
	char **strings;       /* effective string/path values (NULL: the default, e.g. recorded) */
	int *given;           /* 1 when the environment set a valid value */
	int *refused;         /* 1 when the binding refuses the value (its own rule or a cross rule) */
	oeap_setting_problem *problems;
	size_t nproblems;
	size_t errors, warnings, nset; /* nset: variables of the definition that are set */
} oeap_settings_result;

/*
 * Checks the binding's variables of `env` against `def`'s rules as the
 * binding applies them: a bad value is an error while the switch setting is
 * on or itself bad (the binding stops the import), a warning while it is off
 * (the binding warns and runs with defaults); a cross rule (at_least) with
 * the effective values. A value the binding takes at or above its setting's
 * warn_from is a warning (the setting's `warn` says why). A variable with
 * env_prefix that is no setting is an error when its name is within two
 * edits of a setting's, ASCII case ignored (a typo that silently drops that
 * setting), else a warning naming the closest setting. Returns -1 only when
 * memory ran out.
 */
int oeap_settings_check(const oeap_patchdef *def, const oeap_env *env, oeap_settings_result *res);
void oeap_settings_result_free(oeap_settings_result *res);

/*
 * The value the binding runs with for setting `i`, as text ("3", "true", a
 * path), or NULL when it has none: a refused value while the binding is on
 * (it stops at import: there is no value to show), or a string or path left
 * to a default the definition does not know (the recorded library).
 */
const char *oeap_settings_effective(const oeap_patchdef *def, const oeap_settings_result *res, size_t i,
                                    char *buf, size_t cap);

#endif
