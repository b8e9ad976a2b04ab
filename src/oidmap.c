#include "oidmap.h"

#include <stdlib.h>
#include <string.h>

static size_t oid_hash(const git_oid *id)
{
	size_t h;
	memcpy(&h, id->id, sizeof(h)); /* object ids are already uniformly distributed */
	return h;
}

static int oeap_oid_map_grow(oeap_oid_map *m)
{
	oeap_oid_map bigger = {0};
	bigger.cap = m->cap ? m->cap * 2 : 256;
	bigger.keys = calloc(bigger.cap, sizeof(git_oid));
	bigger.vals = calloc(bigger.cap, sizeof(size_t));
	bigger.used = calloc(bigger.cap, 1);
	if (!bigger.keys || !bigger.vals || !bigger.used) {
		free(bigger.keys);
		free(bigger.vals);
		free(bigger.used);
		return -1;
	}
	for (size_t i = 0; i < m->cap; i++) {
		if (!m->used[i])
			continue;
		size_t j = oid_hash(&m->keys[i]) & (bigger.cap - 1);
		while (bigger.used[j])
			j = (j + 1) & (bigger.cap - 1);
		bigger.used[j] = 1;
		bigger.keys[j] = m->keys[i];
		bigger.vals[j] = m->vals[i];
	}
	bigger.n = m->n;
	free(m->keys);
	free(m->vals);
	free(m->used);
	*m = bigger;
	return 0;
}

/* The slot of `id`, or where it would go. */
static size_t oeap_oid_map_slot(const oeap_oid_map *m, const git_oid *id)
{
	size_t j = oid_hash(id) & (m->cap - 1);
	while (m->used[j] && !git_oid_equal(&m->keys[j], id))
		j = (j + 1) & (m->cap - 1);
	return j;
}

const size_t *oeap_oid_map_get(const oeap_oid_map *m, const git_oid *id)
{
	if (!m->cap)
		return NULL;
	size_t j = oeap_oid_map_slot(m, id);
	return m->used[j] ? &m->vals[j] : NULL;
}

int oeap_oid_map_put_new(oeap_oid_map *m, const git_oid *id, size_t val)
{
	if ((m->n + 1) * 2 > m->cap && oeap_oid_map_grow(m))
		return -1;
	size_t j = oeap_oid_map_slot(m, id);
	if (m->used[j])
		return 0;
	m->used[j] = 1;
	m->keys[j] = *id;
	m->vals[j] = val;
	m->n++;
	return 0;
}

void oeap_oid_map_free(oeap_oid_map *m)
{
	free(m->keys);
	free(m->vals);
	free(m->used);
	memset(m, 0, sizeof(*m));
}
