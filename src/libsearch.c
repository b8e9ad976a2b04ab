#include "libsearch.h"

#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* glibc's loader cache (new format, glibc 2.32 on; older files carry it after
 * the old table): a header, then entries whose strings are offsets from the
 * header's start (sysdeps/generic/dl-cache.h). */
#define CACHE_FILE "/etc/ld.so.cache"
#define CACHE_MAGIC_NEW "glibc-ld.so.cache"
#define CACHE_VERSION "1.1"
#define CACHE_MAGIC_OLD "ld.so-1.7.0"
#define CACHE_NEW_HEADER 48 /* magic 17, version 3, nlibs 4, len_strings 4, flags 1+3, ext 4, unused 12 */
#define CACHE_NEW_ENTRY 24  /* flags 4, key 4, value 4, osversion 4, hwcap 8 */
#define CACHE_OLD_HEADER 16
#define CACHE_OLD_ENTRY 12
/* The entry flags the loader of this build accepts (_DL_CACHE_DEFAULT_ID). */
#if defined(__x86_64__)
#define CACHE_FLAGS 0x0303
#elif defined(__aarch64__)
#define CACHE_FLAGS 0x0a03
#else
#define CACHE_FLAGS 0x0003
#endif

/* The system directories glibc searches last (Debian's multiarch layout first). */
static const char *const system_dirs[] = {
#if defined(__x86_64__)
	"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
#elif defined(__aarch64__)
	"/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
#endif
	"/lib64", "/usr/lib64", "/lib", "/usr/lib",
};

/* 1 when `path` is an ELF file of this process's class and machine (the
 * loader skips others and searches on), 0 when it is another ELF or cannot be
 * opened (the loader goes on to the next place too), -1 when it opens but
 * cannot be read as ELF at all (the loader would stop on it: found). */
static int elf_matches(const char *path)
{
	unsigned char mine[20], theirs[20];
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, mine, sizeof(mine)) : -1;
	if (fd >= 0)
		close(fd);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return 0;
	ssize_t m = read(fd, theirs, sizeof(theirs));
	close(fd);
	if (m != (ssize_t)sizeof(theirs) || memcmp(theirs, ELFMAG, SELFMAG) != 0)
		return -1;
	if (n != (ssize_t)sizeof(mine))
		return 1; /* cannot compare: take it, as the loader would try it */
	return theirs[EI_CLASS] == mine[EI_CLASS] && theirs[EI_DATA] == mine[EI_DATA] &&
	       memcmp(theirs + 18, mine + 18, 2) == 0; /* e_machine */
}

/* A file the loader would take, or would stop on. What is missing (a
 * dangling link included) it passes by; anything else that is not a regular
 * file (a directory) it opens, fails to read and stops on, as glibc's
 * open_verify does: found, and loading it then fails naming it. */
static int candidate(const char *path)
{
	struct stat st;
	if (stat(path, &st) != 0)
		return 0;
	if (!S_ISREG(st.st_mode))
		return 1;
	return elf_matches(path) != 0;
}

/* 1 when a subfolder the loader searches before `dir` itself (glibc-hwcaps/X,
 * tls, tls/X, the platform's legacy folders) holds `name`. */
static int in_subfolder(const char *dir, const char *name)
{
	char path[PATH_MAX];
	const char *scan[] = {"glibc-hwcaps", "tls"};
	for (size_t i = 0; i < sizeof(scan) / sizeof(scan[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s/%s", dir, scan[i], name);
		if (candidate(path))
			return 1;
		snprintf(path, sizeof(path), "%s/%s", dir, scan[i]);
		DIR *d = opendir(path);
		struct dirent *e;
		while (d && (e = readdir(d))) {
			if (e->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s/%s/%s", dir, scan[i], e->d_name, name);
			if (candidate(path)) {
				closedir(d);
				return 1;
			}
		}
		if (d)
			closedir(d);
	}
	const char *platform = (const char *)getauxval(AT_PLATFORM);
	const char *legacy[] = {platform ? platform : "", "x86_64", "haswell", "xeon_phi", "avx512_1"};
	for (size_t i = 0; i < sizeof(legacy) / sizeof(legacy[0]); i++) {
		if (!*legacy[i])
			continue;
		snprintf(path, sizeof(path), "%s/%s/%s", dir, legacy[i], name);
		if (candidate(path))
			return 1;
	}
	return 0;
}

/* The first hwcap-free entry for `name` in the loader cache (its file, caller
 * frees); *ambiguous set when an entry the CPU's features select exists. */
static char *from_cache(const char *name, int *ambiguous)
{
	char *out = NULL;
	int fd = open(CACHE_FILE, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) != 0 || st.st_size < CACHE_NEW_HEADER) {
		close(fd);
		return NULL;
	}
	size_t size = (size_t)st.st_size;
	const char *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return NULL;
	size_t base = 0;
	if (memcmp(map, CACHE_MAGIC_OLD, strlen(CACHE_MAGIC_OLD)) == 0) {
		uint32_t nold;
		memcpy(&nold, map + 12, 4);
		base = CACHE_OLD_HEADER + (size_t)nold * CACHE_OLD_ENTRY;
		base = (base + 7) & ~(size_t)7;
	}
	if (base + CACHE_NEW_HEADER <= size && memcmp(map + base, CACHE_MAGIC_NEW, 17) == 0 &&
	    memcmp(map + base + 17, CACHE_VERSION, 3) == 0) {
		uint32_t nlibs;
		memcpy(&nlibs, map + base + 20, 4);
		for (uint32_t i = 0; i < nlibs; i++) {
			size_t at = base + CACHE_NEW_HEADER + (size_t)i * CACHE_NEW_ENTRY;
			if (at + CACHE_NEW_ENTRY > size)
				break;
			int32_t flags;
			uint32_t key, value;
			uint64_t hwcap;
			memcpy(&flags, map + at, 4);
			memcpy(&key, map + at + 4, 4);
			memcpy(&value, map + at + 8, 4);
			memcpy(&hwcap, map + at + 16, 8);
			if (base + key >= size || base + value >= size || flags != CACHE_FLAGS)
				continue;
			const char *k = map + base + key, *v = map + base + value;
			if (!memchr(k, '\0', size - base - key) || !memchr(v, '\0', size - base - value) || strcmp(k, name))
				continue;
			if (hwcap) {
				*ambiguous = 1;
				continue;
			}
			if (!out)
				out = strdup(v);
		}
	}
	munmap((void *)map, size);
	return out;
}

/* Appends ", WHAT" (the first without the comma) to `how`. */
static void searched(char *how, size_t cap, size_t *n, const char *what)
{
	if (*n < cap)
		*n += (size_t)snprintf(how + *n, cap - *n, "%s%s", *n ? ", " : "", what);
}

/* `dir`/`name` as a step of the search: 1 found (*out), 0 not there, -1 ambiguous. */
static int try_dir(const char *dir, const char *name, char **out)
{
	char path[PATH_MAX];
	if (in_subfolder(dir, name))
		return -1;
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path) || !candidate(path))
		return 0;
	*out = strdup(path);
	return *out ? 1 : 0;
}

char *oeap_libsearch_find(const char *name, const char *ld_library_path, const char *origin, char *how,
                          size_t cap)
{
	char *out = NULL;
	char tried[1024];
	size_t nt = 0;
	tried[0] = '\0';
	if (!name || !*name || strchr(name, '/')) {
		snprintf(how, cap, "not a bare file name");
		return NULL;
	}
	/* 1. LD_LIBRARY_PATH as the server has it: ':' or ';' separated; an empty
	 * entry (a leading, doubled or trailing separator) is the server's working
	 * directory, like a relative one, which is not ours to know: met before
	 * the file is found, the answer cannot be told. */
	const char *p = ld_library_path && *ld_library_path ? ld_library_path : NULL;
	while (p) {
		size_t len = strcspn(p, ":;");
		char dir[PATH_MAX];
		if (len >= sizeof(dir)) {
			snprintf(how, cap, "LD_LIBRARY_PATH (%s) has an entry longer than PATH_MAX",
			         origin ? origin : "the environment");
			return NULL;
		}
		memcpy(dir, p, len);
		dir[len] = '\0';
		if (!len) {
			snprintf(how, cap,
			         "LD_LIBRARY_PATH (%s) has an empty entry (a leading, doubled or trailing separator), "
			         "which the loader searches as the server's working directory, which oeapatch cannot know",
			         origin ? origin : "the environment");
			return NULL;
		}
		if (dir[0] != '/') {
			snprintf(how, cap,
			         "LD_LIBRARY_PATH (%s) has the relative entry %s, searched from the server's working "
			         "directory, which oeapatch cannot know",
			         origin ? origin : "the environment", dir);
			return NULL;
		}
		int rc = try_dir(dir, name, &out);
		if (rc < 0) {
			snprintf(how, cap,
			         "%s has a glibc-hwcaps, tls or platform subfolder holding %s: the loader picks among "
			         "them by the CPU's features; give the library's absolute path",
			         dir, name);
			return NULL;
		}
		if (rc > 0) {
			snprintf(how, cap, "found in LD_LIBRARY_PATH entry %s (%s)", dir,
			         origin ? origin : "the environment");
			return out;
		}
		p = p[len] ? p + len + 1 : NULL;
	}
	if (ld_library_path && *ld_library_path) {
		char what[PATH_MAX + 64];
		snprintf(what, sizeof(what), "LD_LIBRARY_PATH=%s (%s)", ld_library_path, origin ? origin : "the environment");
		searched(tried, sizeof(tried), &nt, what);
	} else {
		searched(tried, sizeof(tried), &nt, "no LD_LIBRARY_PATH");
	}
	/* 2. The loader cache. */
	int ambiguous = 0;
	out = from_cache(name, &ambiguous);
	if (ambiguous && !out) {
		snprintf(how, cap, "the loader cache lists %s only for CPU feature levels (glibc-hwcaps): give the library's "
		                   "absolute path", name);
		return NULL;
	}
	if (out) {
		snprintf(how, cap, "found by the loader cache (" CACHE_FILE ")");
		return out;
	}
	searched(tried, sizeof(tried), &nt, "the loader cache");
	/* 3. The system directories. */
	for (size_t i = 0; i < sizeof(system_dirs) / sizeof(system_dirs[0]); i++) {
		int rc = try_dir(system_dirs[i], name, &out);
		if (rc < 0) {
			snprintf(how, cap, "%s has a glibc-hwcaps, tls or platform subfolder holding %s: give the library's "
			                   "absolute path", system_dirs[i], name);
			return NULL;
		}
		if (rc > 0) {
			snprintf(how, cap, "found in the system directory %s", system_dirs[i]);
			return out;
		}
	}
	searched(tried, sizeof(tried), &nt, "the system directories");
	snprintf(how, cap, "not found: searched %s", tried);
	return NULL;
}
