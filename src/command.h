/*
 * command.h - the steps every command runs once its options are parsed and
 * checked: open the target, compute the result, print it as JSON or text,
 * free it. Each command keeps its own steps; oeap_command_run() runs them
 * in the one order, with the one error path, that they all share, so a
 * command cannot print a result after an error or forget to close.
 */
#ifndef OEAP_COMMAND_H
#define OEAP_COMMAND_H

#include "cli.h"
#include "error.h"

/*
 * One command's steps. `opts` is the command's parsed options (NULL for a
 * command that has none) and `result` its result struct, zeroed by the
 * caller; each step knows their types.
 */
typedef struct oeap_command_steps {
	/* Fills `result`; -1 (or any non-zero) with `err` set on trouble. */
	int (*compute)(const oeap_cli *cli, const void *opts, void *result, oeap_error *err);
	void (*print_json)(const oeap_cli *cli, const void *opts, const void *result);
	void (*print_text)(const oeap_cli *cli, const void *opts, const void *result);
	/* Frees what compute left in `result`, whether it succeeded or not. */
	void (*result_free)(void *result);
} oeap_command_steps;

/*
 * oeap_cli_open(cli, need_target), then steps->compute. On trouble in
 * either, the error is printed (oeap_cli_error(), as JSON with --json) and
 * its exit code returned; else the result is printed (JSON with --json, else
 * text) and *exit_code returned: a field of `result` that compute set, or
 * NULL for a command whose every success exits OEAP_EXIT_OK. Either way the
 * result is freed and `cli` closed.
 */
int oeap_command_run(oeap_cli *cli, int need_target, const oeap_command_steps *steps, const void *opts,
                     void *result, const int *exit_code);

#endif
