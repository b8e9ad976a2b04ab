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
	fprintf(f, "usage: oeapatch <command> [options]\n\ncommands:\n");
	for (const command *c = commands; c->name; c++)
		fprintf(f, "  %-8s %s\n", c->name, c->summary);
	fprintf(f, "\n'oeapatch <command> --help' describes a command; man oeapatch has the rest.\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return OEAP_EXIT_TROUBLE;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return OEAP_EXIT_OK;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
		printf("oeapatch %s\n", OEAPATCH_VERSION);
		return OEAP_EXIT_OK;
	}
	for (const command *c = commands; c->name; c++) {
		if (strcmp(argv[1], c->name) == 0) {
			/* libgit2's global init costs milliseconds (TLS set-up): only the
			 * commands that live on git pay it up front; the others' git
			 * paths (--diff, verify --ref) take their own refcounted init. */
			if (c->git)
				git_libgit2_init();
			int rc = c->fn(argc - 1, argv + 1);
			if (c->git)
				git_libgit2_shutdown();
			fflush(stdout);
			return rc;
		}
	}
	fprintf(stderr, "oeapatch: '%s' is not a command\n\n", argv[1]);
	usage(stderr);
	return OEAP_EXIT_TROUBLE;
}
