/*
 * libsearch.h - which file the dynamic loader would open for a library
 * name, worked out without opening it.
 *
 * The binding loads liboea with ctypes.CDLL (dlopen). A path with a slash is
 * that file. A bare name ("liboea.so.3.1.0") is searched the way glibc's
 * dlopen searches for a caller without RPATH/RUNPATH (the binding's caller is
 * CPython's _ctypes): the directories of LD_LIBRARY_PATH in order, then the
 * loader cache (/etc/ld.so.cache), then the system directories. What matters
 * is the LD_LIBRARY_PATH the SERVER will have (a unit's EnvironmentFile=, a
 * container's -e), not the shell's that runs oeapatch: the caller passes it.
 *
 * Nothing is loaded: a library must pass the trust rule (trust.h) before any
 * of its code, its constructors included, runs in oeapatch (often root).
 */
#ifndef OEAP_LIBSEARCH_H
#define OEAP_LIBSEARCH_H

#include <stddef.h>

/*
 * Finds `name` (no slash) as dlopen would, with `ld_library_path` standing
 * for the server's LD_LIBRARY_PATH (NULL or "": unset) and `origin` naming
 * where that value comes from ("the environment", "unit.env:3"). Returns the
 * file (caller frees) and says in `how` where it was found ("LD_LIBRARY_PATH
 * entry /opt/oea/lib (unit.env:3)", "the loader cache", "the system directory
 * /usr/lib"); NULL when no step finds it, `how` then listing what was
 * searched. A file found in a folder that also has a glibc-hwcaps
 * subdirectory holding that name is refused (NULL): the loader would pick by
 * the CPU's features, which this search does not model.
 */
char *oeap_libsearch_find(const char *name, const char *ld_library_path, const char *origin, char *how,
                          size_t cap);

#endif
