/*
 * testutil.h - what the unit tests share: the repository's files, the real
 * patch definition, and temporary directories.
 *
 * cmocka's headers need <stdarg.h>, <stddef.h>, <stdint.h> and <setjmp.h>
 * first; including this header brings them and cmocka.h in that order.
 */
#ifndef OEAP_TESTUTIL_H
#define OEAP_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "patchdef.h"

/* The repository root ($OEAPATCH_SOURCE_DIR, else the compile-time source dir). */
const char *tu_source_dir(void);

/* Reads a file relative to the repository root; fails the test when missing. */
char *tu_read(const char *rel, size_t *len);

/* Loads patches/sglang-oea; fails the test on error. */
oeap_patchdef *tu_def(void);

/* A fresh temporary directory (removed by tu_rmtree). Caller frees the string. */
char *tu_tmpdir(void);

/* A fresh 0700 directory under /tmp for each test (cmocka setup and
 * teardown: tu_dir_setup makes tu_dir, tu_dir_teardown removes it), and
 * tu_at(REL), TU_DIR/REL in one of four rotating buffers. */
extern char *tu_dir;
int tu_dir_setup(void **state);
int tu_dir_teardown(void **state);
const char *tu_at(const char *rel);

/* The shared core's files (patches/binding-core/), in the order the bundled
 * definitions' [binding] source joins them before the adapter, and that
 * source line as patch.ini has it (tests that edit it search for it). */
extern const char *const tu_core_files[];
extern const size_t tu_ncore_files;
#define TU_SOURCE_LINE                                                                    \
	"source = ../binding-core/oea_core.py ../binding-core/library.py ../binding-core/stats.py\n" \
	"  ../binding-core/plans.py ../binding-core/route.py ../binding-core/oea_record.py\n"      \
	"  ../binding-core/record_hook.py adapter.py"

/* The core's files read and joined as the loader joins them. Caller frees. */
char *tu_read_core(size_t *len);

/* Copies the core's files into DIR/../binding-core (beside a definition at DIR). */
void tu_copy_core(const char *dir);

/* Copies every file of patches/sglang-oea (patch.ini, the adapter, anchors,
 * templates) into DIR, and the shared core beside it (tu_copy_core), so that
 * a test can edit one of them. */
void tu_copy_definition(const char *dir);
void tu_rmtree(const char *dir);

/* Writes a file (creating parent directories). */
void tu_write(const char *path, const char *data, size_t len);

#endif
