/*
 * cli.h - what every command shares: options common to all, the checkout
 * and patch definition they act on, and how results and errors are printed.
 */
#ifndef OEAP_CLI_H
#define OEAP_CLI_H

#include <getopt.h>
#include <stdio.h>

#include "error.h"
#include "patchdef.h"
#include "report.h"

/* An option with its help text beside it, so --help and the table cannot drift apart. */
typedef struct oeap_option {
	const char *name;  /* long name */
	int has_arg;       /* no_argument / required_argument */
	int val;           /* short letter or a code >= 256 */
	const char *arg;   /* argument name for help, or NULL */
	const char *help;
} oeap_option;

/*
 * Options every command takes, before the command (`oeapatch -C DIR status`,
 * as git) or after it; a command's table starts with these.
 */
enum { OEAP_OPT_JSON = 256, OEAP_OPT_PATCH, OEAP_OPT_PYTHON, OEAP_OPT_COLOR, OEAP_OPT_FIRST_FREE = 300 };
#define OEAP_COMMON_OPTIONS                                                                              \
	{"directory", required_argument, 'C', "DIR",                                                         \
	 "a checkout, a site-packages folder, or any folder inside either (default: .)"},                    \
	{"python", required_argument, OEAP_OPT_PYTHON, "PATH",                                               \
	 "act on the package the interpreter PATH imports (instead of -C)"},                                  \
	{"patch", required_argument, OEAP_OPT_PATCH, "NAME|DIR",                                             \
	 "the patch definition: a name under patches/ or a directory (default: detected from the target)"},                \
	{"json", no_argument, OEAP_OPT_JSON, NULL, "print one JSON document on stdout"},                      \
	{"quiet", no_argument, 'q', NULL, "print nothing on stdout (the exit status says it; errors still do)"}, \
	{"color", optional_argument, OEAP_OPT_COLOR, "[=WHEN]",                                              \
	 "colour diffs and verdicts: never, always or auto (default: auto, on a terminal without NO_COLOR)"}, \
	{"help", no_argument, 'h', NULL, "show this help"}

/* Where the target was found: a source checkout, or an installed package. */
typedef enum oeap_layout { OEAP_LAYOUT_NONE = 0, OEAP_LAYOUT_CHECKOUT, OEAP_LAYOUT_INSTALLED } oeap_layout;

typedef struct oeap_cli {
	const char *command;
	const char *dir;
	const char *python; /* --python: the interpreter whose package is the target */
	int python_default; /* python is the wheel entry's interpreter (no -C, no --python) */
	const char *patch;  /* --patch as given; after oeap_cli_open the definition's name (detected or not) */
	int patch_given;    /* --patch was given (else detected, or $OEAPATCH_PATCH_DIR) */
	int patch_env;      /* $OEAPATCH_PATCH_DIR named the definition */
	int json;
	int quiet;
	oeap_patchdef *def;
	char *root;       /* the checkout or site-packages folder, resolved */
	char *target;     /* the target file, resolved inside it */
	const char *rel;  /* the target relative to root (the definition's target for its layout) */
	oeap_layout layout;
	/* --python: what the interpreter answered (its sys.executable, version,
	 * and the package folder it imports), for messages and JSON. */
	char python_exe[4096];
	char python_version[64];
	char python_package[4096];
	/* The server's environment for --python (verify's --env-file files; none:
	 * this process's): the interpreter is asked with its PYTHONPATH, user
	 * site and PYTHON* settings. Set before oeap_cli_open(). */
	const char *const *env_files;
	size_t nenv_files;
	char python_path[8400]; /* "PYTHONPATH=... (from ...)" or "PYTHONPATH unset (...)", for messages */
	int python_path_set;    /* the query had a PYTHONPATH */
	char python_path_value[4096];
} oeap_cli;

/*
 * main.c: parses the options before the command into the defaults every
 * command starts from. Returns the index of the command in argv (argc when
 * there is none), -1 on a usage error (printed), or -2 when --help or
 * --version was handled (exit 0). With --json each of those printed one
 * document, as every command does.
 */
int oeap_cli_globals(int argc, char **argv, void (*usage)(FILE *f), const char *version);

/*
 * For what main handles without a command of the table (no command, a name
 * that is none, help, version): `cli` gets the global options and `command`
 * (NULL when none was named), and --json also when it comes later on the
 * line, so that oeap_cli_error() and the printers below keep the promise of
 * one document. Nothing to close.
 */
void oeap_cli_top(oeap_cli *cli, const char *command, int argc, char **argv);

/* Prints what `print` writes (a usage text) on stdout, or with --json the
 * command's document with that text as "help". Returns the exit code. */
int oeap_cli_help(const oeap_cli *cli, void (*print)(FILE *f));

/* Prints "oeapatch VERSION", or with --json {"command", "ok", "version"}. */
int oeap_cli_version(const oeap_cli *cli, const char *version);

/* Frees what oeap_cli_globals() kept (a composed -C path). */
void oeap_cli_globals_free(void);

/*
 * Parses argv with `opts` (which must start with OEAP_COMMON_OPTIONS and
 * end with a zeroed entry). Common options fill `cli`; every other option is
 * handed to `on_option(val, optarg, user)`, which returns 0, or -1 for an
 * option it does not take (a bad value is the command's to report after
 * the parse, with oeap_cli_error, so that --json gets its document).
 * Returns -1 on a usage error (already printed), 1 when help was printed
 * (as JSON with --json anywhere on the line), else 0; *first_arg is the
 * index of the first operand.
 */
int oeap_cli_parse(oeap_cli *cli, const char *command, const char *synopsis, const char *summary,
                   const oeap_option *opts, int argc, char **argv,
                   int (*on_option)(int val, const char *arg, void *user), void *user, int *first_arg);

/*
 * For commands that take no operands: 0 when argv has none from `first` on;
 * else the usage error is printed (as JSON with --json) and its exit code
 * returned.
 */
int oeap_cli_no_operands(const oeap_cli *cli, int argc, char **argv, int first);

/*
 * Loads the definition and finds the root: from -C (or the folder that holds
 * the package --python imports) upward, the first folder where the
 * definition's target exists (a checkout) or its installed_target does (a
 * site-packages folder); an installed match inside a checkout that holds the
 * same file gives way to the checkout. With `need_target` the target must
 * exist (else an error that says where it looked and what -C takes);
 * without, a folder where nothing is found is taken as the root itself
 * (check and hook on bare repositories).
 */
int oeap_cli_open(oeap_cli *cli, int need_target, oeap_error *err);
void oeap_cli_close(oeap_cli *cli);

/* Prints `err` (as JSON when --json) and returns its exit code. */
int oeap_cli_error(const oeap_cli *cli, const oeap_error *err);

/*
 * The head of every JSON document: {"command": ..., "ok": ...}. `ok` is
 * derived from the exit code the command is about to return, so the two
 * cannot disagree. Caller adds its fields and passes it to oeap_json_emit().
 */
json_t *oeap_cli_json_head(const oeap_cli *cli, int exit_code);

/* Prints the options table of the global options (for main's usage). */
void oeap_cli_print_global_options(FILE *f);

/*
 * The command that (re-)applies the patch to the same target this command
 * acted on ("oeapatch apply -C ROOT", or with --python), for messages such
 * as the one after a `pip install -U` dropped the patch. Static storage.
 */
const char *oeap_cli_apply_hint(const oeap_cli *cli);

/* "checkout" or "installed". */
const char *oeap_cli_layout_name(const oeap_cli *cli);

/* Adds the "definition" member: {name, version, framework (null when the
 * definition states none), dir, detected (not named by --patch or
 * $OEAPATCH_PATCH_DIR)}. */
void oeap_cli_json_definition(const oeap_cli *cli, json_t *j);

/* Adds the target's "file", "root", "layout" and "definition" members to `j`, the same in
 * every command that works on one target file. */
void oeap_cli_json_target(const oeap_cli *cli, json_t *j);

/*
 * Appends to `out` the unified diff a command would make: the target from
 * `old` to `new_`, and the binding module from `bind_old` to `bind_new`
 * (NULL: absent). Unchanged files add nothing; paths are relative to the
 * checkout so that `git apply` takes the output as it is.
 */
int oeap_cli_diff(const oeap_cli *cli, const char *old, size_t old_len, const char *new_, size_t new_len,
                  const char *bind_old, size_t bind_old_len, const char *bind_new, size_t bind_new_len,
                  oeap_buf *out, oeap_error *err);

/* The target's path relative to the checkout, for messages and diffs. */
const char *oeap_cli_target_rel(const oeap_cli *cli);

/* The commands (one file each). */
int cmd_apply(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_revert(int argc, char **argv);
int cmd_status(int argc, char **argv);
/* git integration: cmd_check.c, cmd_hook.c */
int cmd_check(int argc, char **argv);
int cmd_hook(int argc, char **argv);

#endif
