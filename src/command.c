#include "command.h"

#include "report.h"

int oeap_command_run(oeap_cli *cli, int need_target, const oeap_command_steps *steps, const void *opts,
                     void *result, const int *exit_code)
{
	int rc = OEAP_EXIT_OK;
	oeap_error err;
	oeap_error_clear(&err);
	if (oeap_cli_open(cli, need_target, &err) || steps->compute(cli, opts, result, &err)) {
		rc = oeap_cli_error(cli, &err);
		goto done;
	}
	if (cli->json)
		steps->print_json(cli, opts, result);
	else
		steps->print_text(cli, opts, result);
	/* Read only now: compute sets it. */
	if (exit_code)
		rc = *exit_code;
done:
	steps->result_free(result);
	oeap_cli_close(cli);
	return rc;
}
