/* library.c - where liboea is: the forms of its path, the loader's search
 * with this process's environment, the default library apply records. */
#include "library.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libsearch.h"

#ifndef OEAPATCH_INSTALL_LIBRARY_REL
#define OEAPATCH_INSTALL_LIBRARY_REL ""
#endif
#ifndef OEAPATCH_BUILD_LIBRARY
#define OEAPATCH_BUILD_LIBRARY ""
#endif

int oeap_library_relative(const char *library)
{
	return library[0] != '/' && strchr(library, '/') != NULL;
}

char *oeap_library_find_own_env(const char *name)
{
	char how[1024];
	return oeap_libsearch_find(name, getenv("LD_LIBRARY_PATH"), "the environment", how, sizeof(how));
}

char *oeap_library_realpath_own_env(const char *name)
{
	char *found = oeap_library_find_own_env(name);
	char *out = found ? realpath(found, NULL) : NULL;
	free(found);
	return out;
}

char *oeap_library_default(void)
{
	char path[PATH_MAX + 256], real[PATH_MAX];
	const char *env = getenv("OEAPATCH_LIBRARY");
	if (env && *env)
		return realpath(env, real) ? strdup(real) : strdup(env);
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0 && sizeof(OEAPATCH_INSTALL_LIBRARY_REL) > 1) {
		exe[n] = '\0';
		char *slash = strrchr(exe, '/');
		if (slash) {
			*slash = '\0';
			snprintf(path, sizeof(path), "%s/%s", exe, OEAPATCH_INSTALL_LIBRARY_REL);
			if (realpath(path, real))
				return strdup(real);
		}
	}
	if (OEAPATCH_BUILD_LIBRARY[0] && realpath(OEAPATCH_BUILD_LIBRARY, real))
		return strdup(real);
	return NULL;
}
