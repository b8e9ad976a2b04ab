/*
 * cli_types.h - the state of one command (cli.h opens and prints it): apart,
 * so that finding the target (target.h) and detecting the definition
 * (detect.h), which fill it, sit below cli.c without including it.
 */
#ifndef OEAP_CLI_TYPES_H
#define OEAP_CLI_TYPES_H

#include <stddef.h>

#include "patchdef.h"

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

#endif
