/*
 * oidmap.h - a small open-addressing map from git object ids to an index:
 * the revision walk (history.c) and the dry runs (revcheck.c) each meet the
 * same blobs and commits many times.
 */
#ifndef OEAP_OIDMAP_H
#define OEAP_OIDMAP_H

#include <git2.h>
#include <stddef.h>

/* Zero-initialise ({0}) to start; oeap_oid_map_free() releases it. */
typedef struct oeap_oid_map {
	git_oid *keys;
	size_t *vals;
	unsigned char *used;
	size_t cap, n;
} oeap_oid_map;

/* The value for `id`, or NULL (a pointer into the map: valid until the next put). */
const size_t *oeap_oid_map_get(const oeap_oid_map *m, const git_oid *id);

/* Sets `id` -> `val` unless `id` is there already. Returns -1 on OOM. */
int oeap_oid_map_put_new(oeap_oid_map *m, const git_oid *id, size_t val);

void oeap_oid_map_free(oeap_oid_map *m);

#endif
