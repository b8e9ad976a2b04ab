#include "pycache.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "binding.h"
#include "report.h"
#include "fsio.h"
#include "pipeline.h"

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

static void sip_round(uint64_t v[4])
{
	v[0] += v[1];
	v[1] = ROTL(v[1], 13) ^ v[0];
	v[0] = ROTL(v[0], 32);
	v[2] += v[3];
	v[3] = ROTL(v[3], 16) ^ v[2];
	v[0] += v[3];
	v[3] = ROTL(v[3], 21) ^ v[0];
	v[2] += v[1];
	v[1] = ROTL(v[1], 17) ^ v[2];
	v[2] = ROTL(v[2], 32);
}

static uint64_t le64(const unsigned char *p, size_t n)
{
	uint64_t x = 0;
	for (size_t i = 0; i < n; i++)
		x |= (uint64_t)p[i] << (8 * i);
	return x;
}

uint64_t oeap_pyc_source_hash(uint64_t key, const void *data, size_t len, int rounds)
{
	const unsigned char *in = data;
	int c = rounds == 24 ? 2 : 1, d = rounds == 24 ? 4 : 3;
	uint64_t v[4] = {key ^ 0x736f6d6570736575ULL, 0x646f72616e646f6dULL, key ^ 0x6c7967656e657261ULL,
	                 0x7465646279746573ULL};
	size_t full = len - len % 8;
	for (size_t i = 0; i < full; i += 8) {
		uint64_t m = le64(in + i, 8);
		v[3] ^= m;
		for (int k = 0; k < c; k++)
			sip_round(v);
		v[0] ^= m;
	}
	uint64_t b = ((uint64_t)len << 56) | le64(in + full, len % 8);
	v[3] ^= b;
	for (int k = 0; k < c; k++)
		sip_round(v);
	v[0] ^= b;
	v[2] ^= 0xff;
	for (int k = 0; k < d; k++)
		sip_round(v);
	return v[0] ^ v[1] ^ v[2] ^ v[3];
}

static uint32_t le32(const unsigned char *p)
{
	return (uint32_t)le64(p, 4);
}

static int list_add(oeap_pyc_list *l, const char *path, const char *why)
{
	oeap_pyc *p = realloc(l->items, (l->n + 1) * sizeof(*p));
	if (!p)
		return -1;
	l->items = p;
	if (!(p[l->n].path = strdup(path)))
		return -1;
	p[l->n++].why = why;
	return 0;
}

static int contains(const char *hay, size_t n, const char *needle)
{
	size_t k = strlen(needle);
	return k && memmem(hay, n, needle, k) != NULL;
}

/*
 * Why the cache file `pyc` would run instead of the source (bytes `src`,
 * stat `st`), or NULL when it would not (Python recompiles or it is the
 * source's own compilation). The rules are importlib's _classify_pyc,
 * _validate_timestamp_pyc and _validate_hash_pyc, with Python's defaults.
 */
static const char *shadows(const char *pyc, const char *src, size_t src_len, const struct stat *st,
                           const char *marker, int marker_in_source, const oeap_pyc_verdicts *v)
{
	char *code = NULL;
	size_t n = 0;
	const char *why = NULL;
	oeap_error ignore;
	oeap_error_clear(&ignore);
	if (oeap_read_file(pyc, &code, &n, &ignore))
		return NULL; /* unreadable for us is unreadable for Python: it compiles the source */
	const unsigned char *h = (const unsigned char *)code;
	/* Too short, not a magic number ("..\r\n"), or flags Python rejects:
	 * the loader discards it and compiles the source. */
	if (n < 16 || h[2] != '\r' || h[3] != '\n' || (le32(h + 4) & ~3u))
		goto done;
	uint32_t flags = le32(h + 4);
	if (flags & 1) {
		/* Hash-based: compiled from these very bytes when the hash agrees
		 * (SipHash-1-3 from Python 3.11 on, SipHash-2-4 before: either
		 * matching by chance is a 2^-64 event). */
		uint64_t recorded = le64(h + 8, 8);
		if (recorded == oeap_pyc_source_hash(le32(h), src, src_len, 13) ||
		    recorded == oeap_pyc_source_hash(le32(h), src, src_len, 24))
			goto done;
		if (!(flags & 2))
			why = "unchecked-hash bytecode (PEP 552) of other bytes: Python runs it without looking at the "
			      "source";
		goto done;
	}
	if (le32(h + 8) != (uint32_t)st->st_mtime || le32(h + 12) != (uint32_t)st->st_size)
		goto done; /* Python sees it is stale and recompiles */
	/* mtime and size agree, as after a build that fixes every mtime: only
	 * the content can tell the old bytes from the new. The interpreter that
	 * runs it can tell for sure (it compiled the source and compared). */
	for (size_t i = 0; v && i < v->n; i++)
		if (!strcmp(v->items[i].path, pyc)) {
			if (!v->items[i].same)
				why = "timestamp bytecode whose recorded mtime and size equal the source's, compiled from other "
				      "bytes (the interpreter compiled the source and compared): Python runs it";
			goto done;
		}
	/* Without it, a string the right code must hold: a name in a file
	 * anyone wrote proves nothing, which is why the trust rule covers the
	 * cache (importsys.c). */
	if (marker && contains(code + 16, n - 16, marker) != marker_in_source)
		why = "timestamp bytecode whose recorded mtime and size equal the source's, compiled from other bytes: "
		      "Python runs it";
done:
	free(code);
	return why;
}

int oeap_pyc_verdicts_add(oeap_pyc_verdicts *v, const char *path, int same)
{
	oeap_pyc_verdict *p = realloc(v->items, (v->n + 1) * sizeof(*p));
	if (!p)
		return -1;
	v->items = p;
	if (!(p[v->n].path = strdup(path)))
		return -1;
	p[v->n++].same = same;
	return 0;
}

void oeap_pyc_verdicts_free(oeap_pyc_verdicts *v)
{
	for (size_t i = 0; i < v->n; i++)
		free(v->items[i].path);
	free(v->items);
	v->items = NULL;
	v->n = 0;
}

int oeap_pyc_prefix_dir(const char *prefix, const char *source, char *out, size_t cap)
{
	char cwd[PATH_MAX], head[PATH_MAX * 2];
	const char *slash = strrchr(source, '/');
	int n;
	if (source[0] == '/')
		n = snprintf(head, sizeof(head), "%.*s", slash ? (int)(slash - source) : 0, source);
	else if (getcwd(cwd, sizeof(cwd)))
		n = snprintf(head, sizeof(head), "%s/%.*s", cwd, slash ? (int)(slash - source) : 0, source);
	else
		return -1;
	if (n < 0 || (size_t)n >= sizeof(head))
		return -1;
	/* importlib's _path_join: each part without its trailing slashes, the
	 * folder without its leading ones, empty parts left out. */
	size_t plen = strlen(prefix);
	while (plen > 1 && prefix[plen - 1] == '/')
		plen--;
	const char *h = head;
	while (*h == '/')
		h++;
	size_t hlen = strlen(h);
	while (hlen && h[hlen - 1] == '/')
		hlen--;
	n = hlen ? snprintf(out, cap, "%.*s/%.*s", (int)plen, prefix, (int)hlen, h)
	         : snprintf(out, cap, "%.*s", (int)plen, prefix);
	return n < 0 || (size_t)n >= cap ? -1 : 0;
}

/* The entries of `stem` in the cache folder `cache`, judged as oeap_pyc_find_ex() says. */
static int scan_cache(const char *cache, const char *stem, int all, const char *src, size_t src_len,
                      const struct stat *st, const char *marker, int marker_in_source, const oeap_pyc_verdicts *v,
                      oeap_pyc_list *out, const char *source, oeap_error *err)
{
	char path[PATH_MAX * 2];
	DIR *d = opendir(cache);
	int error = 0;
	if (!d) {
		if (errno != ENOENT && errno != ENOTDIR)
			return oeap_fail(err, OEAP_ERR_IO, cache, 0, "cannot read it: %s", strerror(errno));
		return 0;
	}
	size_t slen = strlen(stem);
	struct dirent *e;
	while ((e = readdir(d))) {
		/* <stem>.<tag>.pyc or <stem>.<tag>.opt-N.pyc, for any interpreter's tag. */
		size_t n = strlen(e->d_name);
		if (n < slen + 6 || strncmp(e->d_name, stem, slen) || e->d_name[slen] != '.' ||
		    strcmp(e->d_name + n - 4, ".pyc"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", cache, e->d_name);
		const char *why = all ? "compiled from the bytes this command replaced"
		                      : shadows(path, src, src_len, st, marker, marker_in_source, v);
		if (why && list_add(out, path, why)) {
			error = oeap_fail(err, OEAP_ERR_INTERNAL, source, 0, "out of memory");
			break;
		}
	}
	closedir(d);
	return error;
}

int oeap_pyc_find_ex(const char *source, int all, const char *marker, int marker_in_source,
                     const char *const *cachedirs, const oeap_pyc_verdicts *v, oeap_pyc_list *out, oeap_error *err)
{
	char dir[PATH_MAX], stem[NAME_MAX + 1], path[PATH_MAX * 2];
	const char *slash = strrchr(source, '/');
	const char *base = slash ? slash + 1 : source;
	size_t blen = strlen(base);
	int error = 0;
	char *src = NULL;
	size_t src_len = 0;
	struct stat st;
	if (blen < 4 || strcmp(base + blen - 3, ".py") || blen - 3 > NAME_MAX)
		return oeap_fail(err, OEAP_ERR_INTERNAL, source, 0, "not a .py file");
	snprintf(stem, sizeof(stem), "%.*s", (int)(blen - 3), base);
	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - source) : 1, slash ? source : ".");
	int have_source = stat(source, &st) == 0;
	if (!all && !have_source)
		return 0;
	if (!all) {
		if (oeap_read_file(source, &src, &src_len, err))
			return -1;
	}
	/* A legacy pyc beside the source runs when the source is gone. */
	snprintf(path, sizeof(path), "%s/%s.pyc", dir, stem);
	if (access(path, F_OK) == 0 && !have_source &&
	    list_add(out, path, "legacy bytecode beside the source: Python runs it when the source is missing")) {
		error = oeap_fail(err, OEAP_ERR_INTERNAL, source, 0, "out of memory");
		goto done;
	}
	snprintf(path, sizeof(path), "%s/__pycache__", dir);
	if ((error = scan_cache(path, stem, all, src, src_len, &st, marker, marker_in_source, v, out, source, err)))
		goto done;
	for (size_t i = 0; cachedirs && cachedirs[i] && !error; i++) {
		int seen = !strcmp(cachedirs[i], path);
		for (size_t k = 0; k < i && !seen; k++)
			seen = !strcmp(cachedirs[k], cachedirs[i]);
		if (!seen)
			error = scan_cache(cachedirs[i], stem, all, src, src_len, &st, marker, marker_in_source, v, out,
			                   source, err);
	}
done:
	free(src);
	return error;
}

int oeap_pyc_find(const char *source, int all, const char *marker, int marker_in_source, oeap_pyc_list *out,
                  oeap_error *err)
{
	/* This process's prefix: apply and revert run in the server's
	 * environment, as verify without --env-file does. */
	const char *prefix = getenv("PYTHONPYCACHEPREFIX");
	char pdir[PATH_MAX * 2];
	const char *dirs[2] = {NULL, NULL};
	if (prefix && *prefix && !oeap_pyc_prefix_dir(prefix, source, pdir, sizeof(pdir)))
		dirs[0] = pdir;
	return oeap_pyc_find_ex(source, all, marker, marker_in_source, dirs, NULL, out, err);
}

int oeap_pyc_remove(const oeap_pyc_list *l, oeap_error *err)
{
	for (size_t i = 0; i < l->n; i++)
		if (unlink(l->items[i].path) && errno != ENOENT)
			/* The path in the message: `where` is too short for a full path. */
			return oeap_fail(err, OEAP_ERR_IO, "bytecode", 0, "%s: %s; cannot remove it: %s", l->items[i].path,
			                 l->items[i].why, strerror(errno));
	return 0;
}

void oeap_pyc_list_free(oeap_pyc_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->items[i].path);
	free(l->items);
	l->items = NULL;
	l->n = 0;
}

int oeap_pyc_find_patch_ex(const oeap_patchdef *def, const char *target, int applied, int target_all,
                           int binding_all, const char *const *cachedirs, const oeap_pyc_verdicts *v,
                           oeap_pyc_list *out, oeap_error *err)
{
	char *binding = oeap_binding_path(def, target), *text = NULL, *library = NULL;
	size_t len = 0;
	oeap_error ignore;
	oeap_error_clear(&ignore);
	if (!binding)
		return oeap_fail(err, OEAP_ERR_INTERNAL, target, 0, "out of memory");
	/* The binding's module name: the import the patched target compiles to
	 * names it, the original never does. */
	const char *slash = strrchr(binding, '/');
	char marker[NAME_MAX + 1];
	snprintf(marker, sizeof(marker), "%s", slash ? slash + 1 : binding);
	if (strlen(marker) > 3 && !strcmp(marker + strlen(marker) - 3, ".py"))
		marker[strlen(marker) - 3] = '\0';
	/* The binding module's code holds the library it records (a string
	 * constant): a pyc of a module rendered for another library (an image
	 * layer with fixed mtimes after `apply --library`) lacks it. */
	if (!binding_all && !oeap_read_file(binding, &text, &len, &ignore))
		library = oeap_binding_recorded_library(def, text, len);
	int rc = oeap_pyc_find_ex(target, target_all, marker, applied, cachedirs, v, out, err) ||
	         oeap_pyc_find_ex(binding, binding_all, library, 1, cachedirs, v, out, err);
	free(library);
	free(text);
	free(binding);
	return rc ? -1 : 0;
}

int oeap_pyc_find_patch(const oeap_patchdef *def, const char *target, int applied, int target_all, int binding_all,
                        oeap_pyc_list *out, oeap_error *err)
{
	const char *prefix = getenv("PYTHONPYCACHEPREFIX");
	char pdir[PATH_MAX * 2];
	const char *dirs[2] = {NULL, NULL};
	if (prefix && *prefix && !oeap_pyc_prefix_dir(prefix, target, pdir, sizeof(pdir)))
		dirs[0] = pdir;
	return oeap_pyc_find_patch_ex(def, target, applied, target_all, binding_all, dirs, NULL, out, err);
}

int oeap_pyc_check_ex(const oeap_patchdef *def, const char *target, const char *fix, const char *const *cachedirs,
                      const oeap_pyc_verdicts *v, oeap_report *rep, oeap_error *err)
{
	oeap_pyc_list l = {NULL, 0};
	int rc = 0;
	if (oeap_pyc_find_patch_ex(def, target, 1, 0, 0, cachedirs, v, &l, err))
		return -1;
	for (size_t i = 0; i < l.n && !rc; i++)
		rc = oeap_report_add(rep, "bytecode", 0, 0,
		                     "%s: %s, so the server would not run the patched source: `%s` removes it",
		                     l.items[i].path, l.items[i].why, fix);
	if (!l.n)
		rc = oeap_report_add(rep, "bytecode", 1, 0,
		                     "no cached bytecode runs in place of the target or the binding module (each is "
		                     "absent, stale, or compiled from these bytes)");
	oeap_pyc_list_free(&l);
	return rc ? oeap_fail(err, OEAP_ERR_INTERNAL, "bytecode", 0, "out of memory") : 0;
}

int oeap_pyc_check(const oeap_patchdef *def, const char *target, const char *fix, oeap_report *rep, oeap_error *err)
{
	const char *prefix = getenv("PYTHONPYCACHEPREFIX");
	char pdir[PATH_MAX * 2];
	const char *dirs[2] = {NULL, NULL};
	if (prefix && *prefix && !oeap_pyc_prefix_dir(prefix, target, pdir, sizeof(pdir)))
		dirs[0] = pdir;
	return oeap_pyc_check_ex(def, target, fix, dirs, NULL, rep, err);
}

json_t *oeap_pyc_list_json(const oeap_pyc_list *l)
{
	json_t *a = json_array();
	for (size_t i = 0; i < l->n; i++) {
		json_t *e = json_object();
		json_object_set_new(e, "path", oeap_json_str(l->items[i].path));
		json_object_set_new(e, "why", oeap_json_str(l->items[i].why));
		json_array_append_new(a, e);
	}
	return a;
}
