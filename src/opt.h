/*
 * opt.h - the options of the command line: the ones every command takes,
 * before the command or after it, and the parse of a command's table.
 */
#ifndef OEAP_OPT_H
#define OEAP_OPT_H

#include <getopt.h>
#include <stddef.h>
#include <stdio.h>

#include "cli.h"

/*
 * How an option of a command's table reaches the command, as libgit2's
 * cli_opt_spec binds each option to its variable: a switch or a value is
 * written into the command's options struct (the `user` of
 * oeap_cli_parse()) at `offset`, so that adding one is one line of the table
 * and a field; a callback is for what a variable cannot say (a repeatable
 * option, a number to check, one option that implies another).
 */
typedef enum oeap_opt_bind {
	OEAP_OPT_BIND_NONE = 0, /* the common options and --help: opt.c's own */
	OEAP_OPT_BIND_SWITCH,   /* an int at `offset`, set to 1 */
	OEAP_OPT_BIND_VALUE,    /* a const char * at `offset`, set to the argument (the last one given wins) */
	OEAP_OPT_BIND_CALLBACK, /* callback(arg, user): 0, or -1 when it does not take the option */
} oeap_opt_bind;

/* An option with its help text beside it, so --help and the table cannot drift apart. */
typedef struct oeap_option {
	const char *name;  /* long name */
	int has_arg;       /* no_argument / required_argument (optional_argument: common options only) */
	int val;           /* short letter, 0 for none; the common options' codes are >= 256 */
	const char *arg;   /* argument name for help, or NULL */
	const char *help;
	oeap_opt_bind bind;
	size_t offset;     /* SWITCH, VALUE: offsetof the field in the command's options struct */
	int (*callback)(const char *arg, void *user); /* CALLBACK (arg NULL for a switch) */
} oeap_option;

/* The entries of a command's table: an option bound to field FIELD of the options struct TYPE, or to a
 * callback. SHORT is the short letter or 0. */
#define OEAP_OPT_SWITCH(NAME, SHORT, TYPE, FIELD, HELP) \
	{NAME, no_argument, SHORT, NULL, HELP, OEAP_OPT_BIND_SWITCH, offsetof(TYPE, FIELD), NULL}
#define OEAP_OPT_VALUE(NAME, SHORT, ARG, TYPE, FIELD, HELP) \
	{NAME, required_argument, SHORT, ARG, HELP, OEAP_OPT_BIND_VALUE, offsetof(TYPE, FIELD), NULL}
#define OEAP_OPT_CALLBACK(NAME, SHORT, ARG, FN, HELP) \
	{NAME, ARG ? required_argument : no_argument, SHORT, ARG, HELP, OEAP_OPT_BIND_CALLBACK, 0, FN}
#define OEAP_OPT_END {NULL, 0, 0, NULL, NULL, OEAP_OPT_BIND_NONE, 0, NULL}

/*
 * Options every command takes, before the command (`oeapatch -C DIR status`,
 * as git) or after it; a command's table starts with these.
 */
enum { OEAP_OPT_JSON = 256, OEAP_OPT_PATCH, OEAP_OPT_PYTHON, OEAP_OPT_COLOR };
/* An entry opt.c handles itself (the common options, --help, --version). */
#define OEAP_OPT_OWN(NAME, HAS_ARG, VAL, ARG, HELP) {NAME, HAS_ARG, VAL, ARG, HELP, OEAP_OPT_BIND_NONE, 0, NULL}
#define OEAP_COMMON_OPTIONS                                                                                   \
	OEAP_OPT_OWN("directory", required_argument, 'C', "DIR",                                                  \
	             "a checkout, a site-packages folder, or any folder inside either"),                          \
	OEAP_OPT_OWN("python", required_argument, OEAP_OPT_PYTHON, "PATH",                                        \
	             "act on the package the interpreter PATH imports (instead of -C)"),                          \
	OEAP_OPT_OWN("patch", required_argument, OEAP_OPT_PATCH, "NAME|DIR",                                      \
	             "the patch definition: a name under patches/ or a directory (default: detected from the "    \
	             "target)"),                                                                                  \
	OEAP_OPT_OWN("json", no_argument, OEAP_OPT_JSON, NULL, "print one JSON document on stdout"),               \
	OEAP_OPT_OWN("quiet", no_argument, 'q', NULL,                                                             \
	             "print nothing on stdout (the exit status says it; errors still do)"),                       \
	OEAP_OPT_OWN("color", optional_argument, OEAP_OPT_COLOR, "[=WHEN]",                                       \
	             "colour diffs and verdicts: never, always or auto (default: auto, on a terminal without "    \
	             "NO_COLOR)"),                                                                                \
	OEAP_OPT_OWN("help", no_argument, 'h', NULL, "show this help")

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
 * end with OEAP_OPT_END). Common options fill `cli`; every other option is
 * bound (oeap_opt_bind) to a field of `user`, the command's options struct,
 * or handed to its callback, which returns 0, or -1 for an option it does
 * not take (a bad value is the command's to report after the parse, with
 * oeap_cli_error, so that --json gets its document). Returns -1 on a usage
 * error (already printed), 1 when help was printed (as JSON with --json
 * anywhere on the line), else 0; *first_arg is the index of the first
 * operand.
 */
int oeap_cli_parse(oeap_cli *cli, const char *command, const char *synopsis, const char *summary,
                   const oeap_option *opts, int argc, char **argv, void *user, int *first_arg);

/*
 * For commands that take no operands: 0 when argv has none from `first` on;
 * else the usage error is printed (as JSON with --json) and its exit code
 * returned.
 */
int oeap_cli_no_operands(const oeap_cli *cli, int argc, char **argv, int first);

/* Prints the options table of the global options (for main's usage). */
void oeap_cli_print_global_options(FILE *f);

#endif
