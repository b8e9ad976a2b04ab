/*
 * pipeline.h - the one pipeline behind every command, on bytes.
 *
 *   bytes -> regions found by their markers -> original bytes (ours stripped)
 *         -> parsed -> anchors resolved -> plan -> new bytes
 *         -> read back: verify the new bytes with the same functions
 *
 * apply, verify, revert, status and check differ only in where the bytes
 * come from (a work-tree file, a git blob) and whether anything is written;
 * that is the commands' business, not this module's: nothing here touches
 * the file system.
 */
#ifndef OEAP_PIPELINE_H
#define OEAP_PIPELINE_H

#include "edit.h"
#include "patchdef.h"
#include "region.h"
#include "report.h"

typedef enum oeap_file_state {
	OEAP_STATE_CLEAN = 0,    /* no region of this patch */
	OEAP_STATE_APPLIED,      /* applied, and verify holds */
	OEAP_STATE_STALE,        /* applied, regions intact, but an older version or moved anchors */
	OEAP_STATE_DAMAGED,      /* applied, but a region was edited or markers are broken */
} oeap_file_state;

const char *oeap_file_state_name(oeap_file_state s);

typedef struct oeap_outcome {
	oeap_file_state before; /* the state of the input */
	int changed;            /* out differs from the input */
	char *out;              /* the resulting bytes (always set on success; caller frees) */
	size_t out_len;
	oeap_plan plan;         /* apply: the insertions, offsets in the original bytes */
	int from_version;       /* apply over an older version: that version */
} oeap_outcome;

void oeap_outcome_free(oeap_outcome *o);

/*
 * Verifies `buf` (the target's bytes) against `def`: fills `rep` with every
 * check. Returns 0 when the checks could run (rep->ok is the verdict), -1
 * only when memory ran out.
 */
int oeap_verify_bytes(const oeap_patchdef *def, const char *buf, size_t len, const char *what,
                      oeap_report *rep);

/* oeap_apply_bytes_flags() flags. */
#define OEAP_APPLY_REFRESH 0x1u   /* move intact regions that drifted from their anchors */
#define OEAP_APPLY_DOWNGRADE 0x2u /* replace intact regions of a newer version of the definition */

/*
 * Applies `def` to `buf`. Already applied and verified: success with
 * o->changed == 0. Intact regions of an older version are upgraded in place
 * (o->before == OEAP_STATE_STALE, o->from_version); those of a newer version
 * are refused unless OEAP_APPLY_DOWNGRADE. Intact regions of this
 * version that no longer sit where their anchors demand, or pass names that
 * are no longer bound (upstream moved the code under them): refused naming
 * the failed check, unless OEAP_APPLY_REFRESH, which strips and re-applies
 * them. Damaged regions (edited by hand, broken markers): refused. The result
 * is verified before it is returned; a result that would not verify is an
 * error, never an output.
 */
int oeap_apply_bytes_flags(const oeap_patchdef *def, const char *buf, size_t len, const char *what,
                           unsigned flags, oeap_outcome *o, oeap_error *err);

/*
 * oeap_apply_bytes_flags() with the parse of `buf` already made: `parsed`
 * (borrowed, parsed from exactly these bytes, or NULL) is used where apply
 * would parse `buf` itself, that is when `buf` carries no intact region of
 * `def` to strip first; otherwise apply parses what it needs. `check` passes
 * the incremental parse it made from the previous revision's tree. The
 * outcome is the same as without it.
 */
int oeap_apply_bytes_parsed(const oeap_patchdef *def, const char *buf, size_t len, const char *what,
                            unsigned flags, const oeap_pysource *parsed, oeap_outcome *o, oeap_error *err);

/* oeap_apply_bytes_flags() without flags. */
int oeap_apply_bytes(const oeap_patchdef *def, const char *buf, size_t len, const char *what,
                     oeap_outcome *o, oeap_error *err);

/*
 * Removes the regions of `def` from `buf`. Not applied: success with
 * o->changed == 0. A region edited by hand is refused unless `force`.
 */
int oeap_revert_bytes(const oeap_patchdef *def, const char *buf, size_t len, const char *what,
                      int force, oeap_outcome *o, oeap_error *err);

#endif
