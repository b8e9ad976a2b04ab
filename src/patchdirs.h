/*
 * patchdirs.h - where patch definitions are found: one by name, the folder
 * of the bundled ones, and the definitions a folder holds.
 */
#ifndef OEAP_PATCHDIRS_H
#define OEAP_PATCHDIRS_H

/*
 * Finds the directory of the definition called `name`: $OEAPATCH_PATCH_DIR
 * when set (a definition directory itself), else <exe>/../share/oeapatch/
 * patches/<name>, else the source tree's patches/<name>. Caller frees.
 */
char *oeap_patchdef_locate(const char *name);

/*
 * The folder of the bundled definitions, among which a command without
 * --patch detects the framework: <exe>/../share/oeapatch/patches when it
 * holds a definition, else the source tree's patches/; NULL when neither
 * does. Caller frees. ($OEAPATCH_PATCH_DIR names one definition, not a
 * folder of them: it is not consulted here.)
 */
char *oeap_patchdef_bundle_dir(void);

/* The names of the definitions in `folder` (its subfolders with a
 * patch.ini), sorted, NULL-terminated; NULL when there is none (or out of
 * memory). Free with oeap_patchdef_list_free(). */
char **oeap_patchdef_list(const char *folder);
void oeap_patchdef_list_free(char **names);

#endif
