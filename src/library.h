/*
 * library.h - the library-path helpers below the binding, the trust rule and
 * the settings (all three ask them): the forms of a path to liboea the
 * binding accepts, the loader's search with this process's environment, and
 * the library apply records when none is given. Nothing here loads a library
 * (oeap_library_probe in binding.h does, after the trust rule).
 */
#ifndef OEAP_LIBRARY_H
#define OEAP_LIBRARY_H

/* 1 when `library` is a relative path with a slash (lib/liboea.so.2): a form
 * the binding refuses, since it would name another file in another working
 * directory. An absolute path and a bare file name are 0. */
int oeap_library_relative(const char *library);

/* The file the loader's search path (this process's LD_LIBRARY_PATH, the
 * loader cache, the system directories) finds for the bare file name `name`,
 * as an absolute path without symbolic links, or NULL (not found, or `name`
 * has a slash). Nothing is loaded (libsearch.h). Caller frees. */
char *oeap_library_resolve(const char *name);

/* The same search, but the path as the loader found it (symbolic links kept:
 * the trust rule checks each step of the way, docs/security.md). */
char *oeap_library_found(const char *name);

/* The library apply records when --library is not given ($OEAPATCH_LIBRARY,
 * the installed one beside the executable, or the build tree's). Caller frees;
 * NULL when none exists. */
char *oeap_library_default(void);

#endif
