#include "binding.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsio.h"
#include "pysource.h"

#ifndef OEAPATCH_INSTALL_LIBRARY_REL
#define OEAPATCH_INSTALL_LIBRARY_REL ""
#endif
#ifndef OEAPATCH_BUILD_LIBRARY
#define OEAPATCH_BUILD_LIBRARY ""
#endif

static int put_literal(oeap_buf *b, const char *s)
{
	if (oeap_buf_put(b, "'", 1))
		return -1;
	for (; *s; s++) {
		if ((*s == '\\' || *s == '\'') && oeap_buf_put(b, "\\", 1))
			return -1;
		if (oeap_buf_put(b, s, 1))
			return -1;
	}
	return oeap_buf_put(b, "'", 1);
}

/* Renders template text [t, t+n) with every placeholder but {{library}}. */
static int render_part(const oeap_patchdef *def, const char *t, size_t n, const char *library,
                       oeap_buf *out, oeap_error *err)
{
	while (n) {
		const char *open = memmem(t, n, "{{", 2);
		if (!open)
			return oeap_buf_put(out, t, n) ? oeap_fail(err, OEAP_ERR_INTERNAL, "binding", 0, "out of memory") : 0;
		if (oeap_buf_put(out, t, (size_t)(open - t)))
			return oeap_fail(err, OEAP_ERR_INTERNAL, "binding", 0, "out of memory");
		n -= (size_t)(open - t);
		t = open;
		const char *close = memmem(t, n, "}}", 2);
		if (!close)
			return oeap_fail(err, OEAP_ERR_DEFINITION, "binding template", 0, "unterminated '{{'");
		size_t kn = (size_t)(close - t - 2);
		const char *k = t + 2;
		int rc;
		if (kn == 7 && !memcmp(k, "library", 7))
			rc = put_literal(out, library);
		else if (kn == 3 && !memcmp(k, "abi", 3))
			rc = oeap_buf_printf(out, "%d", def->abi);
		else if (kn == 5 && !memcmp(k, "patch", 5))
			rc = oeap_buf_puts(out, def->name);
		else if (kn == 7 && !memcmp(k, "version", 7))
			rc = oeap_buf_printf(out, "%d", def->version);
		else
			return oeap_fail(err, OEAP_ERR_DEFINITION, "binding template", 0, "unknown placeholder {{%.*s}}",
			                 (int)kn, k);
		if (rc)
			return oeap_fail(err, OEAP_ERR_INTERNAL, "binding", 0, "out of memory");
		n -= (size_t)(close + 2 - t);
		t = close + 2;
	}
	return 0;
}

/*
 * The path goes into Python source as a string literal, and Python source is
 * UTF-8: a path whose bytes are not (a Latin-1 directory name, say) would be
 * written raw and the module would not import, with verify green. Control
 * characters are refused too: they cannot be written back readably.
 */
static int check_library_path(const char *library, oeap_error *err)
{
	oeap_error why;
	oeap_error_clear(&why);
	for (const unsigned char *p = (const unsigned char *)library; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return oeap_fail(err, OEAP_ERR_USAGE, "--library", 0,
			                 "the library path has a control character (byte 0x%02x at offset %zu); the binding "
			                 "module records it in Python source: pass --library with a path without one "
			                 "(apply resolves symbolic links, so copy the library to one)",
			                 *p, (size_t)(p - (const unsigned char *)library));
	if (*library && pysource_check_bytes(library, strlen(library), "--library", NULL, &why))
		return oeap_fail(err, OEAP_ERR_USAGE, "--library", 0,
		                 "the library path is not valid UTF-8 (%s); the binding module records it in Python "
		                 "source, which must be UTF-8 for the module to import: pass --library with a UTF-8 "
		                 "path (apply resolves symbolic links, so copy the library to one)",
		                 why.message);
	return 0;
}

int oeap_binding_render(const oeap_patchdef *def, const char *library, oeap_buf *out, oeap_error *err)
{
	if (check_library_path(library, err))
		return -1;
	return render_part(def, def->binding_text, strlen(def->binding_text), library, out, err);
}

int oeap_binding_edited(const oeap_patchdef *def, const char *text, size_t len)
{
	char head[200];
	int n = snprintf(head, sizeof(head), OEAP_BINDING_HEADER "%s/%d)", def->name, def->version);
	/* Another version's module: this definition cannot render it again, and
	 * replacing it is the upgrade apply is asked for. */
	if (n < 0 || (size_t)n >= sizeof(head) || len < (size_t)n || memcmp(text, head, (size_t)n) != 0)
		return 0;
	char *library = oeap_binding_recorded_library(def, text, len);
	oeap_buf want = OEAP_BUF_INIT;
	oeap_error err;
	oeap_error_clear(&err);
	int edited = !library || oeap_binding_render(def, library, &want, &err) || want.len != len ||
	             memcmp(want.data, text, len) != 0;
	oeap_buf_free(&want);
	free(library);
	return edited;
}

int oeap_binding_is_ours(const char *text, size_t len)
{
	size_t n = strlen(OEAP_BINDING_HEADER);
	return len >= n && memcmp(text, OEAP_BINDING_HEADER, n) == 0;
}

char *oeap_binding_recorded_library(const oeap_patchdef *def, const char *text, size_t len)
{
	oeap_buf prefix = OEAP_BUF_INIT, path = OEAP_BUF_INIT;
	oeap_error err;
	char *result = NULL;
	const char *mark = strstr(def->binding_text, "{{library}}");
	oeap_error_clear(&err);
	if (!mark || render_part(def, def->binding_text, (size_t)(mark - def->binding_text), "", &prefix, &err))
		goto done;
	if (len < prefix.len + 2 || memcmp(text, prefix.data, prefix.len) != 0 || text[prefix.len] != '\'')
		goto done;
	for (size_t i = prefix.len + 1; i < len; i++) {
		char c = text[i];
		if (c == '\n')
			goto done;
		if (c == '\'') {
			result = oeap_buf_detach(&path, NULL);
			goto done;
		}
		if (c == '\\' && i + 1 < len)
			c = text[++i];
		if (oeap_buf_put(&path, &c, 1))
			goto done;
	}
done:
	oeap_buf_free(&prefix);
	oeap_buf_free(&path);
	return result;
}

char *oeap_binding_path(const oeap_patchdef *def, const char *target_path)
{
	oeap_buf b = OEAP_BUF_INIT;
	const char *slash = strrchr(target_path, '/');
	size_t dn = slash ? (size_t)(slash - target_path) + 1 : 0;
	if (oeap_buf_put(&b, target_path, dn) || oeap_buf_printf(&b, "%s.py", def->binding_module)) {
		oeap_buf_free(&b);
		return NULL;
	}
	return oeap_buf_detach(&b, NULL);
}

int oeap_library_probe(const char *path, int abi, char *detail, size_t cap)
{
	if (access(path, R_OK) != 0) {
		snprintf(detail, cap, "%s: %s", path, strerror(errno));
		return -1;
	}
	dlerror();
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		snprintf(detail, cap, "%s does not load: %s", path, e ? e : "unknown dlopen error");
		return -1;
	}
	int rc = -1;
	int (*abi_fn)(void) = (int (*)(void))dlsym(h, "oea_abi_version");
	const char *(*ver_fn)(void) = (const char *(*)(void))dlsym(h, "oea_version");
	int (*cuda_fn)(void) = (int (*)(void))dlsym(h, "oea_has_cuda");
	if (!abi_fn) {
		snprintf(detail, cap, "%s loads but has no oea_abi_version: not liboea", path);
	} else if (abi_fn() != abi) {
		snprintf(detail, cap, "%s reports ABI %d, the binding expects ABI %d", path, abi_fn(), abi);
	} else {
		snprintf(detail, cap, "%s loads, ABI %d, version %s, %s", path, abi, ver_fn ? ver_fn() : "?",
		         cuda_fn && cuda_fn() ? "with CUDA" : "CPU only (built without CUDA)");
		rc = 0;
	}
	dlclose(h);
	return rc;
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

int oeap_binding_check_text(const oeap_patchdef *def, const char *label, const char *text, size_t len,
                            oeap_report *rep, char **library_out)
{
	int error = 0;
	char *library = NULL;
	oeap_buf want = OEAP_BUF_INIT;
	oeap_error err;
	oeap_error_clear(&err);
	if (library_out)
		*library_out = NULL;
	if (!(library = oeap_binding_recorded_library(def, text, len))) {
		error = oeap_report_add(rep, "binding", 0, 0,
		                        "%s is not the module %s/%d generates (header or library line differs)", label,
		                        def->name, def->version);
		goto done;
	}
	if (oeap_binding_render(def, library, &want, &err)) {
		error = oeap_report_add(rep, "binding", 0, 0, "%s", err.message);
		goto done;
	}
	if (want.len != len || memcmp(want.data, text, len) != 0) {
		error = oeap_report_add(rep, "binding", 0, 0,
		                        "%s was changed: it differs from what %s/%d generates for library %s", label,
		                        def->name, def->version, library);
		goto done;
	}
	error = oeap_report_add(rep, "binding", 1, 0, "%s intact", label);
	if (!error && library_out) {
		*library_out = library;
		library = NULL;
	}
done:
	oeap_buf_free(&want);
	free(library);
	return error;
}

int oeap_binding_verify(const oeap_patchdef *def, const char *target_path, oeap_report *rep)
{
	/* The binding's rule for a path: surrounding ASCII blanks dropped, blank is unset (settings.h). */
	const char *v = def->library_env ? getenv(def->library_env) : NULL;
	char *override = NULL;
	if (v) {
		while (*v && strchr(" \t\n\r\v\f", *v))
			v++;
		size_t n = strlen(v);
		while (n && strchr(" \t\n\r\v\f", v[n - 1]))
			n--;
		if (n && !(override = strndup(v, n)))
			return -1;
	}
	int rc = oeap_binding_verify_with(def, target_path, override, rep, NULL);
	free(override);
	return rc;
}

int oeap_binding_verify_with(const oeap_patchdef *def, const char *target_path, const char *override,
                             oeap_report *rep, char **recorded_out)
{
	int error = 0;
	char *path = oeap_binding_path(def, target_path);
	char *text = NULL, *library = NULL;
	size_t len = 0;
	oeap_error err;
	char detail[768];
	oeap_error_clear(&err);
	if (recorded_out)
		*recorded_out = NULL;
	if (!path)
		return -1;
	if (oeap_read_file(path, &text, &len, &err)) {
		error = oeap_report_add(rep, "binding", 0, 0, "%s: %s", path, err.message);
		goto done;
	}
	if ((error = oeap_binding_check_text(def, path, text, len, rep, &library)) || !library)
		goto done;
	const char *lib = override ? override : library;
	if (oeap_library_probe(lib, def->abi, detail, sizeof(detail)))
		error = oeap_report_add(rep, "library", 0, 0, "%s%s%s%s", detail, override ? " (set by " : "",
		                        override && def->library_env ? def->library_env : "", override ? ")" : "");
	else
		error = oeap_report_add(rep, "library", 1, 0, "%s", detail);
	if (recorded_out) {
		*recorded_out = library;
		library = NULL;
	}
done:
	free(text);
	free(library);
	free(path);
	return error;
}
