/*
 * importsys.h - what the server's interpreter will import, not only which
 * files are there.
 *
 * The patched file runs only if the import system picks it. Its path finder
 * (FileFinder) tries, in each folder it lists: a package folder NAME/ with
 * an __init__ (any loader's suffix), then an extension module NAME + each of
 * the interpreter's EXTENSION_SUFFIXES, then NAME.py, then a sourceless
 * NAME.pyc; a folder without __init__ (a namespace portion) loses to any of
 * them. So `topk.cpython-311-x86_64-linux-gnu.so` or `topk/__init__.py`
 * beside the patched `topk.py` wins, and the patch never runs. And what
 * decides it must be under the trust rule (docs/security.md): the folders
 * the import system lists, `__pycache__` (or the PYTHONPYCACHEPREFIX tree)
 * and the pycs the loader reads.
 *
 * Where the server's interpreter is known (--python, the venv default) it is
 * asked, in the server's environment (PYTHONPATH, PYTHONPYCACHEPREFIX, the
 * user site: the current environment, or verify's --env-file), one level at
 * a time with importlib.machinery.PathFinder on the parent's folders, so no
 * package's __init__ runs; it also compiles the source to judge timestamp
 * pycs whose stamp matches. Without one (-C), fixed rules for CPython 3 on
 * this machine's platform stand in (oeap_import_c_winner).
 */
#ifndef OEAP_IMPORTSYS_H
#define OEAP_IMPORTSYS_H

#include <stddef.h>

#include "error.h"
#include <sys/types.h>

#include "patchdef.h"
#include "report.h"
#include "settings.h"

/*
 * The environment to run the server's interpreter in (NULL-terminated, the
 * caller frees it with oeap_python_env_free): this process's own when
 * `files` is NULL; else this process's without any PYTHON* variable, with
 * the PYTHON* variables and HOME of `files` (the server's --env-file
 * environment: a shell's leftover PYTHONPATH is not the server's). NULL
 * when memory ran out.
 */
char **oeap_python_env(const oeap_env *files);
void oeap_python_env_free(char **envp);

/*
 * Starts `python -c script args...` as every question to the server's
 * interpreter is asked: in `envp`, from "/" (never the caller's folder),
 * stdin from /dev/null (a PYTHONINSPECT of the environment must not leave a
 * prompt waiting on the caller's terminal), stderr to /dev/null when
 * `quiet`; execvp, so a bare `python3` is looked up on PATH as a shell
 * would. `args` is NULL-terminated (at most 16). Returns the read end of its
 * stdout and sets *pid; -1 (errno set, nothing started) on failure. An exec
 * that fails exits 127.
 */
int oeap_python_spawn(const char *python, const char *script, char *const *args, char **envp, int quiet,
                      pid_t *pid);

/*
 * "PYTHONPATH=VALUE (from WHERE)" or "PYTHONPATH unset (WHERE)" for the
 * environment oeap_python_env(files) gives, for messages; `value`, when not
 * NULL, gets the value (or NULL when unset: points into `files` or environ).
 */
void oeap_python_path_text(const oeap_env *files, char *out, size_t cap, const char **value);

/*
 * The file the import system picks in folder `dir` for module `name` before
 * `name.py` (FileFinder's order, with CPython 3's extension suffixes for
 * this machine: NAME.cpython-3X*-TRIPLE.so, NAME.abi3.so, NAME.so): 1 with
 * its path in `out` and a reason in *why (static text), 0 when none wins
 * over the source.
 */
int oeap_import_c_winner(const char *dir, const char *name, char *out, size_t cap, const char **why);

/*
 * verify's and status's checks of what the server imports, for an applied
 * `target` of `def`:
 *   "import:target", "import:binding": the module the interpreter picks is
 *     the patched file and the binding module (FAIL naming what wins, and
 *     why);
 *   "trust:bytecode": __pycache__ beside them, the PYTHONPYCACHEPREFIX
 *     folder, and the pycs of both in them pass the trust rule (a folder the
 *     loader reads pycs from is listed: no sticky exemption);
 *   "bytecode": oeap_pyc_check_ex() with the prefix folder and, with an
 *     interpreter, its verdict on stamp-matching timestamp pycs.
 * `python`: the interpreter (NULL: the C rules); `files`: the --env-file
 * environment (NULL: this process's); `escape`: the trust escape is on;
 * `fix`: the command that removes a shadowing pyc. -1 with err on trouble.
 */
int oeap_import_verify(const oeap_patchdef *def, const char *target, const char *python, const oeap_env *files,
                       int escape, const char *fix, oeap_report *rep, oeap_error *err);

/*
 * The two import checks of oeap_import_verify() alone ("import:target", and
 * "import:binding" when the module exists): the one rule apply also holds to
 * before it writes (a package folder or an extension module beside the
 * target, or a server's interpreter that cannot answer, is refused there
 * with nothing written), so that apply, verify and status cannot disagree.
 */
int oeap_import_check(const oeap_patchdef *def, const char *target, const char *python, const oeap_env *files,
                      oeap_report *rep, oeap_error *err);

#endif
