/*
 * oea_internal.h - host-side helpers shared by the entry points (not part of
 * the ABI).
 */
#ifndef OEA_INTERNAL_H
#define OEA_INTERNAL_H

#include "oea.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Copies the caller's problem into *q as a current-ABI struct (fields the
 * caller's struct_size does not cover are zero) and checks it exactly as
 * oea_problem_check does. Both entry points work on *q only, so an older
 * caller's struct is never read past its end. Returns OEA_OK or the first
 * error; *q is always initialised.
 */
int oea_problem_load(const oea_problem *p, oea_problem *q);

#ifdef __cplusplus
}
#endif

#endif /* OEA_INTERNAL_H */
