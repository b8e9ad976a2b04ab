/*
 * patchdef.h - a patch definition: the data under patches/<name>/.
 *
 * A definition is a manifest (patch.ini), anchor queries (*.scm), region
 * templates and the Python binding module. A new framework or a new upstream
 * era is a new definition, not new C code. docs/patch-definitions.md
 * describes the format.
 */
#ifndef OEAP_PATCHDEF_H
#define OEAP_PATCHDEF_H

#include <stddef.h>

#include "error.h"
#include "patchdef_types.h"

/* Loads and validates the definition in `dir`. Free with oeap_patchdef_free(). */
int oeap_patchdef_load(const char *dir, oeap_patchdef **out, oeap_error *err);
void oeap_patchdef_free(oeap_patchdef *def);

/* oeap_patchdef_load() of patch.ini alone (its keys checked, [patch] fully):
 * no query compiled, no template or setting checked, so no anchor, region or
 * setting is there. What framework detection needs of every bundled
 * definition; the one chosen is then loaded in full. */
int oeap_patchdef_load_manifest(const char *dir, oeap_patchdef **out, oeap_error *err);

const oeap_anchor_def *oeap_patchdef_anchor(const oeap_patchdef *def, const char *name);
const oeap_region_def *oeap_patchdef_region(const oeap_patchdef *def, const char *name);
const oeap_setting_def *oeap_patchdef_setting(const oeap_patchdef *def, const char *name);

#endif
