/*
 * bindingsettings.h - the binding's settings table, rendered from the
 * definition's [setting:NAME] sections into the module `apply` writes
 * ({{settings_table}} in patches/binding-core/oea_core.py, the settings' part). The binding's
 * parse_settings() reads its names, types, defaults, ranges, cross rules,
 * switch and messages from that table only, so a setting's meaning is
 * written once, in patch.ini, for verify (settings.c) and the binding alike.
 */
#ifndef OEAP_BINDINGSETTINGS_H
#define OEAP_BINDINGSETTINGS_H

#include "buf.h"
#include "error.h"
#include "patchdef.h"
#include "settingdef.h"

/*
 * Appends the table to `out` as a Python literal: a tuple with one dict per
 * setting, in the definition's order, with the keys name, key, type ("int",
 * "bool", "string", "path"), default (int, bool, str, or None: none, e.g. the
 * recorded library), min, max (ints; None for other types), at_least (a
 * setting's name or None), switch (bool) and expected (verify's words for a
 * valid value, with the range's reason). -1 with `err` set when memory ran
 * out.
 */
int oeap_binding_render_settings(const oeap_patchdef *def, oeap_buf *out, oeap_error *err);

#endif
