/* opt.c - the options every command shares and the parse of a command's table (opt.h). */
#include "opt.h"

#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "report.h"

/* The options every command takes, before the command (they become the
 * command's defaults) or after it. */
typedef struct {
	const char *dir, *python, *patch;
	int json, quiet;
} common_opts;

static common_opts globals;

/* --json anywhere on the line: a parse that stopped early (an error, --help)
 * has not seen what follows, and a script that asked for JSON still gets
 * its one document. */
static int json_on_line(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--json") == 0)
			return 1;
	return 0;
}

/* A relative -C is taken relative to the one before it, as git does. */
static char composed_dir[2][8192];
static int composed_which;

static const char *compose_dir(const char *prev, const char *next)
{
	if (!prev || next[0] == '/')
		return next;
	char *buf = composed_dir[composed_which ^= 1];
	snprintf(buf, sizeof(composed_dir[0]), "%s/%s", prev, next);
	return buf;
}

static const char *entry_python(void);
static int acts_on_target(const char *command);

/* -C's default as this executable has it: the current folder, or, run through the wheel's console entry,
 * the package of the interpreter that entry runs under for the commands that act on a target (the venv
 * default below). `command` NULL: the global help, which names both. */
static void print_dir_default(const char *command, FILE *f)
{
	const char *entry = entry_python();
	if (!entry || (command && !acts_on_target(command)))
		fprintf(f, " (default: .)");
	else if (command)
		fprintf(f, " (default: the package %s imports, as --python %s: the environment this oeapatch is "
		           "installed in)", entry, entry);
	else
		fprintf(f, " (default: apply, verify, revert and status act on the package %s imports, as "
		           "--python %s, the environment this oeapatch is installed in; check and hook on .)", entry,
		        entry);
}

static void print_options(const char *command, const oeap_option *opts, FILE *f)
{
	for (const oeap_option *o = opts; o->name; o++) {
		char left[64];
		const char *sep = o->arg && o->has_arg != optional_argument ? " " : "";
		if (o->val && o->val < 256)
			snprintf(left, sizeof(left), "-%c, --%s%s%s", o->val, o->name, sep, o->arg ? o->arg : "");
		else
			snprintf(left, sizeof(left), "    --%s%s%s", o->name, sep, o->arg ? o->arg : "");
		fprintf(f, "  %-28s %s", left, o->help);
		if (o->val == 'C' && o->bind == OEAP_OPT_BIND_NONE)
			print_dir_default(command, f);
		fputc('\n', f);
	}
}

static void usage(const char *command, const char *synopsis, const char *summary, const oeap_option *opts,
                  FILE *f)
{
	fprintf(f, "usage: oeapatch %s %s\n\n%s\n\noptions:\n", command, synopsis, summary);
	print_options(command, opts, f);
	fprintf(f, "\nexit status: 0 done or holds, 1 a check found a difference, 2 usage error or trouble\n");
}

static const oeap_option global_options[] = {
	OEAP_COMMON_OPTIONS,
	OEAP_OPT_OWN("version", no_argument, 'V', NULL, "print the version"),
	OEAP_OPT_END,
};

void oeap_cli_print_global_options(FILE *f)
{
	print_options(NULL, global_options, f);
}

/* --color's value; NULL (a bare --color) means always, as in git. */
static int set_color(const char *arg, oeap_error *err)
{
	if (!arg || !strcmp(arg, "always"))
		oeap_set_color(OEAP_COLOR_ALWAYS);
	else if (!strcmp(arg, "never"))
		oeap_set_color(OEAP_COLOR_NEVER);
	else if (!strcmp(arg, "auto"))
		oeap_set_color(OEAP_COLOR_AUTO);
	else
		return oeap_fail(err, OEAP_ERR_USAGE, "--color", 0, "'%s' is not never, always or auto", arg);
	return 0;
}

/* The code getopt returns for entry n of a table that has no short letter:
 * above the letters and the common options' codes. */
#define OPT_TABLE_CODE 1000

/* getopt tables from an option table: `lopts` holds 64, `shorts` 64 bytes. */
static void getopt_tables(const oeap_option *opts, struct option *lopts, char *shorts, int stop_at_operand)
{
	size_t n = 0, sn = 0;
	if (stop_at_operand)
		shorts[sn++] = '+';
	for (const oeap_option *o = opts; o->name && n < 63; o++, n++) {
		lopts[n].name = o->name;
		lopts[n].has_arg = o->has_arg;
		lopts[n].flag = NULL;
		lopts[n].val = o->val ? o->val : OPT_TABLE_CODE + (int)n;
		if (o->val && o->val < 256 && sn < 61) {
			shorts[sn++] = (char)o->val;
			if (o->has_arg == required_argument)
				shorts[sn++] = ':';
		}
	}
	memset(&lopts[n], 0, sizeof(lopts[n]));
	shorts[sn] = '\0';
}

static void unknown_option(oeap_error *err, const char *command, int argc, char **argv)
{
	const char *help = command ? command : "";
	if (optopt && optopt < 256)
		oeap_fail(err, OEAP_ERR_USAGE, command ? command : "oeapatch", 0,
		          "unknown option or missing argument: -%c (see oeapatch %s%s--help)", optopt, help,
		          *help ? " " : "");
	else
		oeap_fail(err, OEAP_ERR_USAGE, command ? command : "oeapatch", 0,
		          "unknown option or missing argument: %s (see oeapatch %s%s--help)",
		          argv[optind - 1 < argc ? optind - 1 : argc - 1], help, *help ? " " : "");
}

/* Handles one of the options common to every command: 1 when `c` was one,
 * 0 when it is not, -1 on a bad value (err says which). */
static int common_option(int c, const char *arg, common_opts *o, oeap_error *err)
{
	switch (c) {
	case 'C':
		o->dir = compose_dir(o->dir, arg);
		return 1;
	case OEAP_OPT_PYTHON:
		o->python = arg;
		return 1;
	case OEAP_OPT_PATCH:
		o->patch = arg;
		return 1;
	case OEAP_OPT_JSON:
		o->json = 1;
		return 1;
	case 'q':
		o->quiet = 1;
		return 1;
	case OEAP_OPT_COLOR:
		return set_color(arg, err) ? -1 : 1;
	default:
		return 0;
	}
}

int oeap_cli_globals(int argc, char **argv, void (*main_usage)(FILE *f), const char *version)
{
	struct option lopts[64];
	char shorts[64];
	oeap_error err;
	oeap_cli top;
	oeap_error_clear(&err);
	getopt_tables(global_options, lopts, shorts, 1);
	optind = 0;
	opterr = 0;
	int c;
	/* '+': stop at the command; its own options are its business. */
	while ((c = getopt_long(argc, argv, shorts, lopts, NULL)) != -1) {
		int common = common_option(c, optarg, &globals, &err);
		if (common < 0)
			goto usage_error;
		if (common)
			continue;
		switch (c) {
		case 'h':
			oeap_cli_top(&top, "help", argc, argv);
			return oeap_cli_help(&top, main_usage) ? -1 : -2;
		case 'V':
			oeap_cli_top(&top, "version", argc, argv);
			oeap_cli_version(&top, version);
			return -2;
		default:
			unknown_option(&err, NULL, argc, argv);
			goto usage_error;
		}
	}
	return optind;
usage_error:
	oeap_cli_top(&top, NULL, argc, argv);
	oeap_cli_error(&top, &err);
	return -1;
}

void oeap_cli_globals_free(void)
{
	memset(&globals, 0, sizeof(globals));
}

static void take_common(oeap_cli *cli, const common_opts *o)
{
	cli->dir = o->dir;
	cli->python = o->python;
	cli->patch = o->patch; /* NULL: detected (oeap_cli_open) */
	cli->patch_given = o->patch != NULL;
	cli->json = o->json;
	cli->quiet = o->quiet;
}

void oeap_cli_top(oeap_cli *cli, const char *command, int argc, char **argv)
{
	memset(cli, 0, sizeof(*cli));
	take_common(cli, &globals);
	cli->command = command;
	cli->json |= json_on_line(argc, argv);
}

/* `text` as the "help" of the command's document. */
static int emit_help(const oeap_cli *cli, char *text, size_t len)
{
	json_t *j = oeap_cli_json_head(cli, OEAP_EXIT_OK);
	json_object_set_new(j, "help", oeap_json_strn(text, len));
	free(text);
	return oeap_json_emit(j) ? OEAP_EXIT_TROUBLE : OEAP_EXIT_OK;
}

/* A stream that collects a usage text for --json; NULL (said) when memory ran out. */
static FILE *help_stream(const oeap_cli *cli, char **text, size_t *len)
{
	FILE *f = open_memstream(text, len);
	if (!f) {
		oeap_error err;
		oeap_fail(&err, OEAP_ERR_INTERNAL, "--help", 0, "out of memory");
		oeap_cli_error(cli, &err);
	}
	return f;
}

int oeap_cli_help(const oeap_cli *cli, void (*print)(FILE *f))
{
	char *text = NULL;
	size_t len = 0;
	FILE *f;
	if (!cli->json) {
		print(stdout);
		return OEAP_EXIT_OK;
	}
	if (!(f = help_stream(cli, &text, &len)))
		return OEAP_EXIT_TROUBLE;
	print(f);
	fclose(f);
	return emit_help(cli, text, len);
}

int oeap_cli_version(const oeap_cli *cli, const char *version)
{
	if (!cli->json) {
		printf("oeapatch %s\n", version);
		return OEAP_EXIT_OK;
	}
	json_t *j = oeap_cli_json_head(cli, OEAP_EXIT_OK);
	json_object_set_new(j, "version", oeap_json_str(version));
	return oeap_json_emit(j) ? OEAP_EXIT_TROUBLE : OEAP_EXIT_OK;
}

/*
 * The interpreter the wheel's console entry runs under (contrib/wheel/oeapatch
 * sets OEAPATCH_ENTRY_PYTHON to its sys.executable), or NULL. Read once and
 * removed from the environment: the programs oeapatch runs (a Python, git
 * hooks calling oeapatch from elsewhere) must not inherit the default.
 */
static const char *entry_python(void)
{
	static char *python;
	static int read;
	if (!read) {
		const char *v = getenv("OEAPATCH_ENTRY_PYTHON");
		read = 1;
		if (v && *v)
			python = strdup(v);
		unsetenv("OEAPATCH_ENTRY_PYTHON");
	}
	return python;
}

static int acts_on_target(const char *command)
{
	static const char *const names[] = {"apply", "verify", "revert", "status"};
	for (size_t i = 0; command && i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(command, names[i]))
			return 1;
	return 0;
}

/* The entry of `opts` getopt returned `c` for, when it is bound (oeap_opt_bind), or NULL. */
static const oeap_option *bound_option(const oeap_option *opts, int c)
{
	if (c >= OPT_TABLE_CODE) {
		const oeap_option *o = &opts[c - OPT_TABLE_CODE];
		return o->bind != OEAP_OPT_BIND_NONE ? o : NULL;
	}
	for (const oeap_option *o = opts; o->name; o++)
		if (o->val == c && o->bind != OEAP_OPT_BIND_NONE)
			return o;
	return NULL;
}

/* Gives option `c` (its argument `arg`) to what its entry binds it to: 0, or -1 when no entry takes it. */
static int bind_option(const oeap_option *opts, int c, const char *arg, void *user)
{
	const oeap_option *o = bound_option(opts, c);
	if (!o || !user)
		return -1;
	switch (o->bind) {
	case OEAP_OPT_BIND_SWITCH:
		*(int *)((char *)user + o->offset) = 1;
		return 0;
	case OEAP_OPT_BIND_VALUE:
		*(const char **)((char *)user + o->offset) = arg;
		return 0;
	case OEAP_OPT_BIND_CALLBACK:
		return o->callback ? o->callback(arg, user) : -1;
	case OEAP_OPT_BIND_NONE:
		break;
	}
	return -1;
}

int oeap_cli_parse(oeap_cli *cli, const char *command, const char *synopsis, const char *summary,
                   const oeap_option *opts, int argc, char **argv,
                   void *user, int *first_arg)
{
	struct option lopts[64];
	/* GNU order: options may follow operands (`check HEAD --json`). */
	char shorts[64];
	oeap_error err;
	oeap_error_clear(&err);
	memset(cli, 0, sizeof(*cli));
	cli->command = command;
	getopt_tables(opts, lopts, shorts, 0);
	/* 0, not 1: glibc then re-reads the ordering ('+' in main's scan of
	 * the global options would otherwise stick, and stop at operands). */
	optind = 0;
	opterr = 0;
	int c;
	common_opts o = globals;
	take_common(cli, &o);
	while ((c = getopt_long(argc, argv, shorts, lopts, NULL)) != -1) {
		int common = common_option(c, optarg, &o, &err);
		if (common < 0)
			goto usage_error;
		if (common) {
			/* At once: an error reported from here on honours a --json seen so far. */
			take_common(cli, &o);
			continue;
		}
		switch (c) {
		case 'h': {
			char *text = NULL;
			size_t len = 0;
			FILE *f;
			cli->json |= json_on_line(argc, argv);
			if (!cli->json) {
				usage(command, synopsis, summary, opts, stdout);
				return 1;
			}
			if (!(f = help_stream(cli, &text, &len)))
				return -1;
			usage(command, synopsis, summary, opts, f);
			fclose(f);
			return emit_help(cli, text, len) ? -1 : 1;
		}
		case '?':
		case ':':
			unknown_option(&err, command, argc, argv);
			goto usage_error;
		default:
			if (bind_option(opts, c, optarg, user)) {
				oeap_fail(&err, OEAP_ERR_USAGE, command, 0, "%s is not an option of %s",
				          argv[optind - 1 < argc ? optind - 1 : argc - 1], command);
				goto usage_error;
			}
		}
	}
	if (cli->dir && cli->python) {
		oeap_fail(&err, OEAP_ERR_USAGE, command, 0,
		          "-C and --python both name the target: give one (-C a folder, --python an interpreter)");
		goto usage_error;
	}
	/* The venv default: run through the wheel's console entry, with neither
	 * -C nor --python, the commands that act on the target take the SGLang of
	 * the environment oeapatch is installed in (the interpreter the entry
	 * runs under). check and hook read a git repository: the current folder. */
	const char *entry = entry_python(); /* read (and removed) whatever the command */
	if (entry && !cli->dir && !cli->python && acts_on_target(command)) {
		cli->python = entry;
		cli->python_default = 1;
	}
	if (!cli->dir)
		cli->dir = ".";
	/* --quiet: one place for every command, so none can forget it. With
	 * --json the document is what was asked for. */
	if (cli->quiet && !cli->json && !freopen("/dev/null", "w", stdout)) {
		oeap_fail(&err, OEAP_ERR_IO, "--quiet", 0, "cannot open /dev/null: %s", strerror(errno));
		goto usage_error;
	}
	*first_arg = optind;
	return 0;
usage_error:
	cli->json |= json_on_line(argc, argv);
	oeap_cli_error(cli, &err);
	return -1;
}

int oeap_cli_no_operands(const oeap_cli *cli, int argc, char **argv, int first)
{
	if (first >= argc)
		return 0;
	oeap_error err;
	oeap_error_clear(&err);
	oeap_fail(&err, OEAP_ERR_USAGE, cli->command, 0, "unexpected argument '%s'", argv[first]);
	return oeap_cli_error(cli, &err);
}
