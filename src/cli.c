#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "binding.h"
#include "fsio.h"

static void usage(const char *command, const char *synopsis, const char *summary, const oeap_option *opts,
                  FILE *f)
{
	fprintf(f, "usage: oeapatch %s %s\n\n%s\n\noptions:\n", command, synopsis, summary);
	for (const oeap_option *o = opts; o->name; o++) {
		char left[64];
		if (o->val < 256)
			snprintf(left, sizeof(left), "-%c, --%s%s%s", o->val, o->name, o->arg ? " " : "", o->arg ? o->arg : "");
		else
			snprintf(left, sizeof(left), "    --%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
		fprintf(f, "  %-28s %s\n", left, o->help);
	}
	fprintf(f, "\nexit status: 0 done or holds, 1 a check found a difference, 2 usage error or trouble\n");
}

int oeap_cli_parse(oeap_cli *cli, const char *command, const char *synopsis, const char *summary,
                   const oeap_option *opts, int argc, char **argv,
                   int (*on_option)(int val, const char *arg, void *user), void *user, int *first_arg)
{
	struct option lopts[64];
	/* GNU order: options may follow operands (`check HEAD --json`). */
	char shorts[64] = "";
	size_t n = 0, sn = 0;
	memset(cli, 0, sizeof(*cli));
	cli->command = command;
	cli->dir = ".";
	cli->patch = "sglang-oea";
	for (const oeap_option *o = opts; o->name && n < 63; o++, n++) {
		lopts[n].name = o->name;
		lopts[n].has_arg = o->has_arg;
		lopts[n].flag = NULL;
		lopts[n].val = o->val;
		if (o->val < 256 && sn < sizeof(shorts) - 3) {
			shorts[sn++] = (char)o->val;
			if (o->has_arg == required_argument)
				shorts[sn++] = ':';
		}
	}
	memset(&lopts[n], 0, sizeof(lopts[n]));
	shorts[sn] = '\0';
	optind = 1;
	opterr = 0;
	int c;
	while ((c = getopt_long(argc, argv, shorts, lopts, NULL)) != -1) {
		switch (c) {
		case 'C':
			cli->dir = optarg;
			break;
		case OEAP_OPT_PATCH:
			cli->patch = optarg;
			break;
		case OEAP_OPT_JSON:
			cli->json = 1;
			break;
		case 'h':
			usage(command, synopsis, summary, opts, stdout);
			return 1;
		case '?':
		case ':': {
			oeap_error err;
			oeap_error_clear(&err);
			if (optopt && optopt < 256)
				oeap_fail(&err, OEAP_ERR_USAGE, command, 0,
				          "unknown option or missing argument: -%c (see oeapatch %s --help)", optopt, command);
			else
				oeap_fail(&err, OEAP_ERR_USAGE, command, 0,
				          "unknown option or missing argument: %s (see oeapatch %s --help)", argv[optind - 1],
				          command);
			/* A script that asked for JSON gets its one document, even now. */
			for (int i = 1; i < argc; i++)
				if (strcmp(argv[i], "--json") == 0)
					cli->json = 1;
			oeap_cli_error(cli, &err);
			return -1;
		}
		default:
			if (!on_option || on_option(c, optarg, user))
				return -1;
		}
	}
	*first_arg = optind;
	return 0;
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

int oeap_cli_open(oeap_cli *cli, int need_target, oeap_error *err)
{
	struct stat st;
	char *dir = NULL;
	if (strchr(cli->patch, '/'))
		dir = strdup(cli->patch);
	else if (!(dir = oeap_patchdef_locate(cli->patch)))
		return oeap_fail(err, OEAP_ERR_USAGE, "--patch", 0,
		                 "no patch definition named '%s' (looked in $OEAPATCH_PATCH_DIR, the installed "
		                 "share/oeapatch/patches and the source tree)", cli->patch);
	int rc = oeap_patchdef_load(dir, &cli->def, err);
	free(dir);
	if (rc)
		return -1;
	if (stat(cli->dir, &st))
		return oeap_fail(err, OEAP_ERR_USAGE, cli->dir, 0, "cannot use it as the checkout: %s", strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return oeap_fail(err, OEAP_ERR_USAGE, cli->dir, 0, "is not a directory: -C takes the checkout's directory");
	if (!(cli->root = realpath(cli->dir, NULL)))
		return oeap_fail(err, OEAP_ERR_IO, cli->dir, 0, "cannot resolve: %s", strerror(errno));
	if (!need_target)
		return 0;
	if (oeap_path_inside(cli->root, cli->def->target, &cli->target, err))
		return -1;
	if (stat(cli->target, &st)) {
		return oeap_fail(err, OEAP_ERR_IO, cli->def->target, 0,
		                 "not found in %s: is this a checkout of the framework %s patches?", cli->root,
		                 cli->def->name);
	}
	if (S_ISDIR(st.st_mode))
		return oeap_fail(err, OEAP_ERR_IO, cli->def->target, 0, "is a directory, not a file");
	return 0;
}

void oeap_cli_close(oeap_cli *cli)
{
	oeap_patchdef_free(cli->def);
	free(cli->root);
	free(cli->target);
	cli->def = NULL;
	cli->root = cli->target = NULL;
}

int oeap_cli_error(const oeap_cli *cli, const oeap_error *err)
{
	if (cli->json) {
		json_t *j = json_object();
		json_object_set_new(j, "command", json_string(cli->command));
		json_object_set_new(j, "ok", json_false());
		json_object_set_new(j, "error", oeap_json_error(err));
		oeap_json_emit(j);
	}
	oeap_print_error(err);
	return oeap_error_exit_code(err);
}

const char *oeap_cli_target_rel(const oeap_cli *cli)
{
	return cli->def ? cli->def->target : "";
}

static int differs(const char *a, size_t alen, const char *b, size_t blen)
{
	if (!a || !b)
		return a != b;
	return alen != blen || memcmp(a, b, alen) != 0;
}

int oeap_cli_diff(const oeap_cli *cli, const char *old, size_t old_len, const char *new_, size_t new_len,
                  const char *bind_old, size_t bind_old_len, const char *bind_new, size_t bind_new_len,
                  oeap_buf *out, oeap_error *err)
{
	char *bind_rel = oeap_binding_path(cli->def, cli->def->target);
	int rc = 0;
	if (!bind_rel)
		rc = oeap_fail(err, OEAP_ERR_INTERNAL, cli->command, 0, "out of memory");
	else if ((differs(old, old_len, new_, new_len) &&
	          oeap_diff(cli->def->target, old, old_len, new_, new_len, out, err)) ||
	         (differs(bind_old, bind_old_len, bind_new, bind_new_len) &&
	          oeap_diff(bind_rel, bind_old, bind_old_len, bind_new, bind_new_len, out, err)))
		rc = -1;
	free(bind_rel);
	return rc;
}
