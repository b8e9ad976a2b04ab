#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int oeap_fail(oeap_error *err, oeap_error_kind kind, const char *where, long line,
              const char *fmt, ...)
{
	if (!err)
		return -1;
	/* The first failure wins: later ones are usually consequences of it. */
	if (err->kind != OEAP_ERR_NONE)
		return -1;
	err->kind = kind;
	snprintf(err->where, sizeof(err->where), "%s", where ? where : "");
	err->line = line;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	va_end(ap);
	return -1;
}

void oeap_error_clear(oeap_error *err)
{
	if (err)
		memset(err, 0, sizeof(*err));
}

int oeap_error_exit_code(const oeap_error *err)
{
	if (!err)
		return OEAP_EXIT_OK;
	switch (err->kind) {
	case OEAP_ERR_NONE:
		return OEAP_EXIT_OK;
	case OEAP_ERR_ANCHOR:
	case OEAP_ERR_REGION:
		/* The patch does not land / no longer holds: a difference, not trouble. */
		return OEAP_EXIT_DIFFERS;
	default:
		return OEAP_EXIT_TROUBLE;
	}
}
