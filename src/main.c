/*
 * oeapatch - put the OEA routing patch into an SGLang checkout, prove it is
 * there, and take it out again. One pipeline (pipeline.h), several doors:
 * the commands below.
 */
#include <git2.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

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
	/* git integration (libgit2): checkout.h, hook.h */
	{"check", cmd_check, 1, "dry-run the patch on committed revisions (CI: does upstream still take it?)"},
	{"hook", cmd_hook, 1, "install/uninstall/status of git hooks that verify or re-apply after pull"},
	{NULL, NULL, 0, NULL},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: oeapatch [-C DIR | --python PATH] [--patch NAME|DIR] [--json] [-q] [--color[=WHEN]]\n"
	           "                <command> [options]\n\ncommands:\n");
	for (const command *c = commands; c->name; c++)
		fprintf(f, "  %-8s %s\n", c->name, c->summary);
	fprintf(f, "  %-8s %s\n", "help", "this help, or a command's: oeapatch help COMMAND");
	fprintf(f, "  %-8s %s\n", "version", "print the version");
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

static int not_a_command(const char *name)
{
	fprintf(stderr, "oeapatch: '%s' is not a command\n\n", name);
	usage(stderr);
	return OEAP_EXIT_TROUBLE;
}

int main(int argc, char **argv)
{
	int first = oeap_cli_globals(argc, argv, usage, OEAPATCH_VERSION);
	if (first == -2)
		return OEAP_EXIT_OK;
	if (first < 0)
		return OEAP_EXIT_TROUBLE;
	if (first >= argc) {
		usage(stderr);
		return OEAP_EXIT_TROUBLE;
	}
	const char *name = argv[first];
	if (!strcmp(name, "help")) {
		/* `oeapatch help CMD` is `oeapatch CMD --help`, as in git. */
		if (first + 1 >= argc) {
			usage(stdout);
			return OEAP_EXIT_OK;
		}
		const command *c = find(argv[first + 1]);
		if (!strcmp(argv[first + 1], "help") || !strcmp(argv[first + 1], "version")) {
			usage(stdout);
			return OEAP_EXIT_OK;
		}
		if (!c)
			return not_a_command(argv[first + 1]);
		static char help_opt[] = "--help";
		char *help_argv[] = {argv[first + 1], help_opt, NULL};
		return c->fn(2, help_argv);
	}
	if (!strcmp(name, "version")) {
		printf("oeapatch %s\n", OEAPATCH_VERSION);
		return OEAP_EXIT_OK;
	}
	const command *c = find(name);
	if (!c)
		return not_a_command(name);
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
