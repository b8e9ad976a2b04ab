#include "testutil.h"

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsio.h"

const char *tu_source_dir(void)
{
	const char *d = getenv("OEAPATCH_SOURCE_DIR");
	return d && *d ? d : OEAPATCH_SOURCE_PATCHES "/..";
}

char *tu_read(const char *rel, size_t *len)
{
	char path[PATH_MAX];
	char *data = NULL;
	size_t n = 0;
	oeap_error err;
	oeap_error_clear(&err);
	snprintf(path, sizeof(path), "%s/%s", tu_source_dir(), rel);
	if (oeap_read_file(path, &data, &n, &err))
		fail_msg("cannot read %s: %s", path, err.message);
	if (len)
		*len = n;
	return data;
}

oeap_patchdef *tu_def(void)
{
	char path[PATH_MAX];
	oeap_patchdef *def = NULL;
	oeap_error err;
	oeap_error_clear(&err);
	snprintf(path, sizeof(path), "%s/patches/sglang-oea", tu_source_dir());
	if (oeap_patchdef_load(path, &def, &err))
		fail_msg("cannot load %s: %s: %s", path, err.where, err.message);
	return def;
}

char *tu_tmpdir(void)
{
	char tmpl[] = "/tmp/oeapatch-test-XXXXXX";
	char *d = mkdtemp(tmpl);
	if (!d)
		fail_msg("mkdtemp: %s", strerror(errno));
	return strdup(d);
}

char *tu_dir;

int tu_dir_setup(void **state)
{
	(void)state;
	tu_dir = tu_tmpdir();
	return 0;
}

int tu_dir_teardown(void **state)
{
	(void)state;
	tu_rmtree(tu_dir);
	free(tu_dir);
	tu_dir = NULL;
	return 0;
}

const char *tu_at(const char *rel)
{
	static char buf[4][PATH_MAX];
	static int i;
	i = (i + 1) % 4;
	snprintf(buf[i], sizeof(buf[i]), "%s/%s", tu_dir, rel);
	return buf[i];
}

const char *const tu_core_files[] = {"oea_core.py", "library.py", "stats.py", "plans.py", "route.py",
                                     "oea_record.py", "record_hook.py"};
const size_t tu_ncore_files = sizeof(tu_core_files) / sizeof(tu_core_files[0]);

char *tu_read_core(size_t *len)
{
	char *all = NULL;
	size_t total = 0;
	for (size_t i = 0; i < tu_ncore_files; i++) {
		char rel[PATH_MAX];
		size_t n;
		snprintf(rel, sizeof(rel), "patches/binding-core/%s", tu_core_files[i]);
		char *text = tu_read(rel, &n);
		all = realloc(all, total + n + 2);
		assert_non_null(all);
		memcpy(all + total, text, n);
		total += n;
		if (n && text[n - 1] != '\n')
			all[total++] = '\n';
		free(text);
	}
	all[total] = '\0';
	*len = total;
	return all;
}

void tu_copy_core(const char *dir)
{
	/* DIR's parent by name: DIR need not exist yet */
	char parent[PATH_MAX];
	snprintf(parent, sizeof(parent), "%s", dir);
	char *slash = strrchr(parent, '/');
	assert_non_null(slash);
	*slash = '\0';
	for (size_t i = 0; i < tu_ncore_files; i++) {
		char rel[PATH_MAX], dst[PATH_MAX * 2];
		size_t len;
		snprintf(rel, sizeof(rel), "patches/binding-core/%s", tu_core_files[i]);
		char *data = tu_read(rel, &len);
		snprintf(dst, sizeof(dst), "%s/binding-core/%s", parent, tu_core_files[i]);
		tu_write(dst, data, len);
		free(data);
	}
}

void tu_copy_definition(const char *dir)
{
	/* the definition and, beside it, the shared core its [binding] source names */
	tu_copy_core(dir);
	static const char *files[] = {"patch.ini", "adapter.py", "anchors/select_experts.scm",
	                              "anchors/routing_chain.scm", "anchors/binds_pair.scm", "anchors/imports.scm",
	                              "templates/callsite.py", "templates/import.py"};
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		char rel[PATH_MAX], dst[PATH_MAX * 2];
		size_t len;
		snprintf(rel, sizeof(rel), "patches/sglang-oea/%s", files[i]);
		char *data = tu_read(rel, &len);
		snprintf(dst, sizeof(dst), "%s/%s", dir, files[i]);
		tu_write(dst, data, len);
		free(data);
	}
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	chmod(path, 0700); /* tests make read-only files and directories */
	return remove(path);
}

void tu_rmtree(const char *dir)
{
	if (dir)
		nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

void tu_write(const char *path, const char *data, size_t len)
{
	char tmp[PATH_MAX];
	snprintf(tmp, sizeof(tmp), "%s", path);
	for (char *p = tmp + 1; *p; p++)
		if (*p == '/') {
			*p = '\0';
			mkdir(tmp, 0755);
			*p = '/';
		}
	FILE *f = fopen(path, "wb");
	if (!f)
		fail_msg("cannot write %s: %s", path, strerror(errno));
	if (len && fwrite(data, 1, len, f) != len)
		fail_msg("short write to %s", path);
	fclose(f);
}
