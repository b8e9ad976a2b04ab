/*
 * startup.h - what a server started with a set of settings will do about
 * OEA: run it, run without it, or stop at the binding's import. One
 * decision, the binding's (its parse_settings and _settings_at_import, whose
 * rules are the definition's [setting:...] sections), which `verify`,
 * `status` and the wheel's plugin (through `verify --json`) all report, so
 * that none of them can say "without OEA" of a process the binding then runs
 * with OEA, or the reverse.
 *
 * Depends on settings.h only (a leaf above it): no command includes are
 * needed to use it.
 */
#ifndef OEAP_STARTUP_H
#define OEAP_STARTUP_H

#include <stddef.h>

#include "patchdef.h"
#include "settings.h"

typedef enum oeap_start_kind {
	OEAP_START_OFF = 0, /* the switch setting is unset or valid and zero: the binding loads nothing */
	OEAP_START_ON,      /* the binding takes every value and routes with OEA (liboea permitting) */
	OEAP_START_STOPS,   /* a value the binding refuses while on: its import raises, the server stops */
} oeap_start_kind;

typedef struct oeap_start_outcome {
	oeap_start_kind kind;
	/* The variable that decides it: the switch (OFF, ON) or the first value
	 * the binding refuses, in the definition's order (STOPS); NULL: none. */
	const char *variable;  /* points into the definition or the settings result */
	char reason[768];      /* one sentence an operator can act on */
} oeap_start_outcome;

/* "off", "on", "stops": the words of the JSON documents. */
const char *oeap_start_kind_name(oeap_start_kind kind);

/*
 * The outcome of `res` (oeap_settings_check's, for `def`). A relative
 * library path, refused by the binding's loader rather than its settings,
 * does not make the import stop: that is the library's verdict (STRICT
 * decides), and `res` keeps reporting it as a settings problem.
 */
void oeap_start_outcome_of(const oeap_patchdef *def, const oeap_settings_result *res, oeap_start_outcome *out);

/* The output setting in effect (the recorder's file: its index), or -1. With one
 * the binding records, OEA on or off, and its recorder is liboea's: the library
 * is loaded even with the switch off. */
int oeap_start_output(const oeap_patchdef *def, const oeap_settings_result *res);

#endif
