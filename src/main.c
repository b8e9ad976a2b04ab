/*
 * oeapatch - put the OEA routing patch into an SGLang checkout, prove it is
 * there, and take it out again. One pipeline (pipeline.h), several doors:
 * the commands below.
 */
#include <git2.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cmd.h"
#include "opt.h"

typedef struct command {
	const char *name;
	int (*fn)(int argc, char **argv);
	int git; /* needs libgit2 for everything it does */
	const char *summary;
} command;

static const command commands[] = {
	{"apply", cmd_apply, 0, "insert the patch (or show what it would do with --check/--diff)"},
	{"verify", cmd_verify, 0, "prove the patch is in place, intact, and bound to a loadable library"},
	{"revert", cmd_revert, 0, "remove exactly what apply inserted"},
	{"status", cmd_status, 0, "applied or not, which version, drift, library"},
	{"definition", cmd_definition, 0, "what a patch definition declares, as oeapatch reads it"},
	{"replay", cmd_replay, 0, "route recorded traffic again for each k0 and batch size; recommend k0 bands"},
	/* git integration (libgit2): gitrepo.h, history.h, revcheck.h, hook.h */
	{"check", cmd_check, 1, "dry-run the patch on committed revisions (CI: does upstream still take it?)"},
	{"hook", cmd_hook, 1, "install/uninstall/status of git hooks that verify or re-apply after pull"},
	{NULL, NULL, 0, NULL},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: oeapatch [-C DIR | --python PATH] [--patch NAME|DIR] [--json] [-q] [--color[=WHEN]]\n"
	           "                <command> [options]\n\ncommands:\n");
	for (const command *c = commands; c->name; c++)
		fprintf(f, "  %-10s %s\n", c->name, c->summary);
	fprintf(f, "  %-10s %s\n", "help", "this help, or a command's: oeapatch help COMMAND");
	fprintf(f, "  %-10s %s\n", "version", "print the version");
	fprintf(f, "\nglobal options (before the command, or after it):\n");
	oeap_cli_print_global_options(f);
	fprintf(f, "\n'oeapatch help <command>' describes a command; man oeapatch has the rest.\n");
}

static const command *find(const char *name)
{
	for (const command *c = commands; c->name; c++)
		if (strcmp(name, c->name) == 0)
			return c;
	return NULL;
}

/* A usage error before any command ran (none named, or one that is not a
 * command): the message and the usage on stderr, and with --json the
 * document a script waits for ("command": null). */
static int top_usage_error(int argc, char **argv, const char *name)
{
	oeap_cli top;
	oeap_error err;
	oeap_error_clear(&err);
	oeap_cli_top(&top, NULL, argc, argv);
	if (name)
		oeap_fail(&err, OEAP_ERR_USAGE, "", 0, "'%s' is not a command", name);
	else
		oeap_fail(&err, OEAP_ERR_USAGE, "", 0, "no command given");
	int rc = oeap_cli_error(&top, &err);
	fputc('\n', stderr);
	usage(stderr);
	return rc;
}

static const oeap_option top_options[] = {
	OEAP_COMMON_OPTIONS,
	OEAP_OPT_END,
};

static int cmd_version(int argc, char **argv)
{
	oeap_cli cli;
	int first = 0;
	int p = oeap_cli_parse(&cli, "version", "[--json]", "Print the version.", top_options, argc, argv, NULL, &first);
	if (p)
		return p > 0 ? OEAP_EXIT_OK : OEAP_EXIT_TROUBLE;
	if ((p = oeap_cli_no_operands(&cli, argc, argv, first)))
		return p;
	return oeap_cli_version(&cli, OEAPATCH_VERSION);
}

/* `oeapatch help [CMD]`: CMD's --help, as in git; without CMD the usage. */
static int cmd_help(int argc, char **argv)
{
	oeap_cli cli;
	int first = 0;
	int p = oeap_cli_parse(&cli, "help", "[COMMAND] [--json]",
	                       "Describe oeapatch, or a command (the same as oeapatch COMMAND --help).", top_options,
	                       argc, argv, NULL, &first);
	if (p)
		return p > 0 ? OEAP_EXIT_OK : OEAP_EXIT_TROUBLE;
	if (first < argc && (p = oeap_cli_no_operands(&cli, argc, argv, first + 1)))
		return p;
	if (first >= argc || !strcmp(argv[first], "help"))
		return oeap_cli_help(&cli, usage);
	const command *c = find(argv[first]);
	int (*fn)(int, char **) = c ? c->fn : !strcmp(argv[first], "version") ? cmd_version : NULL;
	if (!fn)
		return top_usage_error(argc, argv, argv[first]);
	static char help_opt[] = "--help", json_opt[] = "--json";
	char *help_argv[] = {argv[first], help_opt, cli.json ? json_opt : NULL, NULL};
	return fn(cli.json ? 3 : 2, help_argv);
}

int main(int argc, char **argv)
{
	int first = oeap_cli_globals(argc, argv, usage, OEAPATCH_VERSION);
	if (first == -2)
		return OEAP_EXIT_OK;
	if (first < 0)
		return OEAP_EXIT_TROUBLE;
	if (first >= argc)
		return top_usage_error(argc, argv, NULL);
	const char *name = argv[first];
	if (!strcmp(name, "help") || !strcmp(name, "version")) {
		int rc = (!strcmp(name, "help") ? cmd_help : cmd_version)(argc - first, argv + first);
		oeap_cli_globals_free();
		fflush(stdout);
		return rc;
	}
	const command *c = find(name);
	if (!c)
		return top_usage_error(argc, argv, name);
	/* libgit2's global init costs milliseconds (TLS set-up): only the
	 * commands that live on git pay it up front; the others' git paths
	 * (--diff, verify --ref) take their own refcounted init. */
	if (c->git)
		git_libgit2_init();
	int rc = c->fn(argc - first, argv + first);
	if (c->git)
		git_libgit2_shutdown();
	oeap_cli_globals_free();
	fflush(stdout);
	return rc;
}
