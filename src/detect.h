/*
 * detect.h - which bundled definition a command acts with when --patch (and
 * $OEAPATCH_PATCH_DIR) names none: the framework of the target found.
 */
#ifndef OEAP_DETECT_H
#define OEAP_DETECT_H

#include "cli_types.h"
#include "error.h"

/*
 * Loads into cli->def the bundled definition whose target is found from -C
 * upward (the nearest root wins), or whose package the --python interpreter
 * imports; one bundled definition is simply taken. None, or two at the same
 * root: refused naming each definition and --patch. 0, or -1 with `err`.
 */
int oeap_detect(oeap_cli *cli, int need_target, oeap_error *err);

#endif
