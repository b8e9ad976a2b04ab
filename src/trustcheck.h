/*
 * trustcheck.h - the trust checks verify reports ("trust:target",
 * "trust:binding", "trust:library", "trust:bytecode"): the rule of trust.h
 * applied to the files of a checkout, each verdict a check of a report.
 * Above the binding (it asks where the module is); trust.h stays below it.
 */
#ifndef OEAP_TRUSTCHECK_H
#define OEAP_TRUSTCHECK_H

#include <stddef.h>
#include <sys/types.h>

#include "patchdef.h"
#include "report.h"

/*
 * Adds the checks "trust:target", "trust:binding" (when the module exists)
 * and "trust:library" (when `library`, the one the binding will load, is
 * not NULL; a bare name found with the server's `ld_library_path`) for the checkout whose target is `target` to `rep`. With
 * `escape` set, a failing path is a warning naming the setting, and when
 * none fails one warning says the setting is set. Paths that do not exist,
 * and a relative library path (the server's working directory is not ours),
 * add nothing (the binding and library checks say so). -1 only on OOM.
 */
int oeap_trust_verify(const oeap_patchdef *def, const char *target, const char *library,
                      const char *ld_library_path, const char *origin, int escape, oeap_report *rep);

/*
 * One check named `name` on `path` with oeap_trust_check_listed(): a
 * failure (a warning with `escape`) counted in *failed; a pass adds an "ok"
 * line unless `quiet`; a path that cannot be walked adds nothing. `last`
 * (may be NULL): the offending path of the previous failure, which is not
 * said twice (updated). -1 only on OOM.
 */
int oeap_trust_report(oeap_report *rep, const oeap_patchdef *def, const char *name, const char *path,
                      const char *listed, uid_t owner, int escape, int quiet, int *failed, char *last,
                      size_t lastcap);

#endif
