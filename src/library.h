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

/*
 * Three searches for a bare library name, told apart by their names:
 * oeap_libsearch_find() (libsearch.h) searches with the LD_LIBRARY_PATH it
 * is given (the server's) and says how it found the file; the two below
 * search with this process's own environment (apply's --library, where the
 * user runs it):
 *
 * oeap_library_find_own_env: the file as the loader found it, symbolic links
 * kept (the trust rule checks each step of the way, docs/security.md), or
 * NULL (not found, or `name` has a slash). Nothing is loaded. Caller frees.
 */
char *oeap_library_find_own_env(const char *name);

/* oeap_library_find_own_env() resolved: an absolute path without symbolic
 * links (what apply records), or NULL. Caller frees. */
char *oeap_library_realpath_own_env(const char *name);

/* The library apply records when --library is not given ($OEAPATCH_LIBRARY,
 * the installed one beside the executable, or the build tree's). Caller frees;
 * NULL when none exists. */
char *oeap_library_default(void);

#endif
