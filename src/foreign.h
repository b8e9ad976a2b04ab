/*
 * foreign.h - another OEA already in the target: code outside our regions
 * that reads the definition's own settings.
 *
 * Operators move to oeapatch from a hand patch: a module-level
 * `_OEA_K0 = int(os.environ.get(PREFIX + 'K0', '0'))` (PREFIX: the
 * definition's env_prefix), a helper, a call
 * after the routing chain. Left in place, it and our call site both re-route
 * every decode batch (double routing), whatever shape it has: the gate in
 * the helper or around the call, one line or several. What every such patch
 * shares is that it reads the settings the definition declares, so that is
 * the rule, taken from the definition's data (its [binding] env_prefix,
 * library_env and trust_escape, and every [setting:] name), never from a
 * framework's names: a string literal (any spelling that reads a variable:
 * os.environ.get / os.getenv / os.environ[...] / a constant holding the
 * name / an f-string built on the prefix) whose text holds one of them at
 * the start of a word. Comments do not count: they read nothing.
 */
#ifndef OEAP_FOREIGN_H
#define OEAP_FOREIGN_H

#include <stddef.h>

#include "patchdef.h"
#include "pysource.h"
#include "region.h"

/* At most this many lines are named. */
#define OEAP_FOREIGN_MAX 16

typedef struct oeap_foreign {
	long lines[OEAP_FOREIGN_MAX]; /* 1-based lines of `src`, ascending, each once */
	size_t n;                     /* lines kept */
	size_t total;                 /* string literals found */
	int more;                     /* lines left out (more than OEAP_FOREIGN_MAX) */
	char first[96];               /* the first one's text (cut), for messages */
} oeap_foreign;

/*
 * Finds the string literals of `src` that name a setting of `def`, outside
 * the regions of `def` in `rs` (NULL: `src` holds none, e.g. the original
 * with ours stripped): only others' code. Returns 1 when any is found (`out`
 * filled), else 0.
 */
int oeap_foreign_find(const oeap_patchdef *def, const oeap_pysource *src, const oeap_regions *rs, oeap_foreign *out);

/* "lines 12, 40 (and 3 more)": the lines of `f` for messages. */
void oeap_foreign_lines(const oeap_foreign *f, char *out, size_t cap);

#endif
