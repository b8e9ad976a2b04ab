/* patchdirs.c - where definitions are: one by name, the bundled folder, a folder's list. */
#include "patchdirs.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <sys/stat.h>

#include "manifest.h"

#ifndef OEAPATCH_SOURCE_PATCHES
#define OEAPATCH_SOURCE_PATCHES ""
#endif
#ifndef OEAPATCH_INSTALL_PATCHES_REL
#define OEAPATCH_INSTALL_PATCHES_REL "../share/oeapatch/patches"
#endif

static int is_dir_with_manifest(const char *dir)
{
	char p[PATH_MAX + 1024];
	snprintf(p, sizeof(p), "%s/patch.ini", dir);
	return access(p, R_OK) == 0;
}

char *oeap_patchdef_locate(const char *name)
{
	char path[PATH_MAX + 512];
	const char *env = getenv("OEAPATCH_PATCH_DIR");
	if (env && *env)
		return strdup(env);
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		char *slash = strrchr(exe, '/');
		if (slash) {
			*slash = '\0';
			snprintf(path, sizeof(path), "%s/%s/%s", exe, OEAPATCH_INSTALL_PATCHES_REL, name);
			if (is_dir_with_manifest(path))
				return strdup(path);
		}
	}
	if (OEAPATCH_SOURCE_PATCHES[0]) {
		snprintf(path, sizeof(path), "%s/%s", OEAPATCH_SOURCE_PATCHES, name);
		if (is_dir_with_manifest(path))
			return strdup(path);
	}
	return NULL;
}

char *oeap_patchdef_bundle_dir(void)
{
	char path[PATH_MAX + 512], exe[PATH_MAX];
	char **names = NULL;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	/* The same order as oeap_patchdef_locate(): an installed oeapatch
	 * detects among what it installed, never among a source tree's. */
	if (n > 0) {
		exe[n] = '\0';
		char *slash = strrchr(exe, '/');
		if (slash) {
			*slash = '\0';
			snprintf(path, sizeof(path), "%s/%s", exe, OEAPATCH_INSTALL_PATCHES_REL);
			if ((names = oeap_patchdef_list(path))) {
				oeap_patchdef_list_free(names);
				return strdup(path);
			}
		}
	}
	if (OEAPATCH_SOURCE_PATCHES[0] && (names = oeap_patchdef_list(OEAPATCH_SOURCE_PATCHES))) {
		oeap_patchdef_list_free(names);
		return strdup(OEAPATCH_SOURCE_PATCHES);
	}
	return NULL;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

char **oeap_patchdef_list(const char *folder)
{
	DIR *d = opendir(folder);
	struct dirent *e;
	char **names = NULL, path[PATH_MAX + 512];
	size_t n = 0;
	if (!d)
		return NULL;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		/* Only a folder with a manifest is a definition: a shared folder
		 * beside them (the binding core) is not. */
		snprintf(path, sizeof(path), "%s/%s", folder, e->d_name);
		if (!is_dir_with_manifest(path))
			continue;
		char **grown = realloc(names, (n + 2) * sizeof(*grown));
		if (!grown || !(grown[n] = strdup(e->d_name))) {
			names = grown ? grown : names;
			if (names)
				names[n] = NULL;
			oeap_patchdef_list_free(names);
			closedir(d);
			return NULL;
		}
		names = grown;
		names[++n] = NULL;
	}
	closedir(d);
	if (names)
		qsort(names, n, sizeof(*names), name_cmp);
	return names;
}

void oeap_patchdef_list_free(char **names)
{
	oeap_def_words_free(names);
}
