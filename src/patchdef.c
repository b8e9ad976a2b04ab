#include "patchdef.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "buf.h"
#include "fsio.h"
#include "manifest.h"
#include "settingdef.h"

/*
 * Compiles every query file of the definition (each anchor's query and its
 * `contains`) as one tree-sitter query (oeap_query_new_many: one compile
 * instead of one per file, the larger part of a command's start-up) and
 * sets each anchor's queries when all of them compile so and have the
 * captures load_anchor_queries() demands. Otherwise sets nothing and returns
 * -1: load_anchor_queries() then compiles each file alone, which finds the
 * same files good and names the first bad one exactly as before.
 */
static int compile_queries_together(oeap_patchdef *def)
{
	size_t n = 0, cap = 2 * def->nanchors;
	char **srcs = calloc(cap ? cap : 1, sizeof(*srcs)), **whats = calloc(cap ? cap : 1, sizeof(*whats));
	size_t *lens = calloc(cap ? cap : 1, sizeof(*lens));
	oeap_query **qs = calloc(cap ? cap : 1, sizeof(*qs));
	int error = -1;
	if (!srcs || !whats || !lens || !qs)
		goto done;
	for (size_t i = 0; i < def->nanchors; i++) {
		const oeap_anchor_def *a = &def->anchors[i];
		const char *files[2] = {a->query_path, a->contains_path};
		if (!a->query_path || !a->capture)
			goto done;
		for (size_t f = 0; f < 2 && files[f]; f++, n++) {
			char path[PATH_MAX];
			snprintf(path, sizeof(path), "%s/%s", def->dir, files[f]);
			if (!(whats[n] = strdup(path)) || oeap_def_read_file(path, "", &srcs[n], &lens[n], NULL)) {
				n++;
				goto done;
			}
		}
	}
	if (oeap_query_new_many((const char *const *)srcs, lens, (const char *const *)whats, n, qs))
		goto done;
	for (size_t i = 0, k = 0; i < def->nanchors; i++) {
		const oeap_anchor_def *a = &def->anchors[i];
		if (!oeap_query_has_capture(qs[k], a->capture) ||
		    (a->contains_path && !oeap_query_has_capture(qs[k + 1], "match")))
			goto done;
		k += a->contains_path ? 2 : 1;
	}
	for (size_t i = 0, k = 0; i < def->nanchors; i++) {
		oeap_anchor_def *a = &def->anchors[i];
		a->query = qs[k];
		qs[k++] = NULL;
		if (a->contains_path) {
			a->contains = qs[k];
			qs[k++] = NULL;
		}
	}
	error = 0;
done:
	for (size_t i = 0; i < n; i++) {
		oeap_query_free(qs[i]);
		free(srcs[i]);
		free(whats[i]);
	}
	free(srcs);
	free(whats);
	free(lens);
	free(qs);
	return error;
}

static int load_anchor_queries(oeap_patchdef *def, oeap_error *err)
{
	/* Compiled together when they can be; else each below, as always. */
	int together = compile_queries_together(def) == 0;
	for (size_t i = 0; i < def->nanchors; i++) {
		oeap_anchor_def *a = &def->anchors[i];
		char where[PATH_MAX + 64];
		snprintf(where, sizeof(where), "%s/patch.ini [anchor:%s]", def->dir, a->name);
		if (!a->query_path || !a->capture)
			return oeap_fail(err, OEAP_ERR_DEFINITION, where, 0, "needs 'query' and 'capture'");
		if (!a->in && !(a->in = strdup(OEAP_IN_MODULE)))
			return oeap_fail(err, OEAP_ERR_INTERNAL, where, 0, "out of memory");
		if (!a->describe && !(a->describe = strdup(a->name)))
			return oeap_fail(err, OEAP_ERR_INTERNAL, where, 0, "out of memory");
		if (strcmp(a->in, OEAP_IN_MODULE) != 0) {
			size_t j;
			for (j = 0; j < i; j++)
				if (strcmp(def->anchors[j].name, a->in) == 0)
					break;
			if (j == i)
				return oeap_fail(err, OEAP_ERR_DEFINITION, where, 0,
				                 "'in = %s' must name an anchor defined before it", a->in);
		}
		if (together)
			continue;
		char path[PATH_MAX];
		char *src = NULL;
		size_t len = 0;
		snprintf(path, sizeof(path), "%s/%s", def->dir, a->query_path);
		if (oeap_def_read_file(path, where, &src, &len, err))
			return -1;
		int rc = oeap_query_new(src, len, path, &a->query, err);
		free(src);
		if (rc)
			return -1;
		if (!oeap_query_has_capture(a->query, a->capture))
			return oeap_fail(err, OEAP_ERR_DEFINITION, path, 0, "the query has no capture @%s", a->capture);
		if (a->contains_path) {
			snprintf(path, sizeof(path), "%s/%s", def->dir, a->contains_path);
			if (oeap_def_read_file(path, where, &src, &len, err))
				return -1;
			rc = oeap_query_new(src, len, path, &a->contains, err);
			free(src);
			if (rc)
				return -1;
			if (!oeap_query_has_capture(a->contains, "match"))
				return oeap_fail(err, OEAP_ERR_DEFINITION, path, 0, "a 'contains' query needs a @match capture");
		}
	}
	return 0;
}

static int load_regions(oeap_patchdef *def, oeap_error *err)
{
	if (!def->nregions)
		return oeap_fail(err, OEAP_ERR_DEFINITION, def->dir, 0, "the definition has no [region:...]");
	for (size_t i = 0; i < def->nregions; i++) {
		oeap_region_def *r = &def->regions[i];
		char where[PATH_MAX + 64];
		snprintf(where, sizeof(where), "%s/patch.ini [region:%s]", def->dir, r->name);
		if (!oeap_def_is_identifier(r->name))
			return oeap_fail(err, OEAP_ERR_DEFINITION, where, 0, "a region name must be an identifier");
		if (!r->after || !oeap_patchdef_anchor(def, r->after))
			return oeap_fail(err, OEAP_ERR_DEFINITION, where, 0, "'after' must name an anchor");
		if (r->scope && !oeap_patchdef_anchor(def, r->scope))
			return oeap_fail(err, OEAP_ERR_DEFINITION, where, 0, "'scope' must name an anchor");
		if (r->nargs && !r->scope)
			return oeap_fail(err, OEAP_ERR_DEFINITION, where, 0, "arguments need a 'scope'");
		for (size_t j = 0; j < r->nargs; j++)
			if (!r->args[j].nexprs)
				return oeap_fail(err, OEAP_ERR_DEFINITION, where, 0,
				                 "required argument '%s' has no arg.%s line", r->args[j].keyword,
				                 r->args[j].keyword);
		if (!r->template_path)
			return oeap_fail(err, OEAP_ERR_DEFINITION, where, 0, "needs a 'template'");
		char path[PATH_MAX];
		size_t len;
		snprintf(path, sizeof(path), "%s/%s", def->dir, r->template_path);
		if (oeap_def_read_file(path, where, &r->template_text, &len, err))
			return -1;
		if (strstr(r->template_text, "oeapatch") && strstr(r->template_text, ">>>"))
			return oeap_fail(err, OEAP_ERR_DEFINITION, path, 0,
			                 "a template must not contain region markers");
		if (strchr(r->template_text, '\r') || strchr(r->template_text, '\t'))
			return oeap_fail(err, OEAP_ERR_DEFINITION, path, 0,
			                 "templates are written with LF line ends and 4-space indentation");
	}
	return 0;
}

/* full = 0: the manifest only (oeap_patchdef_load_manifest). */
static int load_def(const char *dir, int full, oeap_patchdef **out, oeap_error *err)
{
	int error = 0;
	char *text = NULL;
	size_t len = 0;
	char manifest[PATH_MAX + 16];
	*out = NULL;

	oeap_patchdef *def = calloc(1, sizeof(*def));
	if (!def || !(def->dir = strdup(dir))) {
		error = oeap_fail(err, OEAP_ERR_INTERNAL, dir, 0, "out of memory");
		goto done;
	}
	snprintf(manifest, sizeof(manifest), "%s/patch.ini", dir);
	if ((error = oeap_read_file(manifest, &text, &len, err)))
		goto done;
	if ((error = oeap_manifest_parse(def, manifest, text, err)))
		goto done;
	if (!def->name || !def->target || !def->version || !def->abi || !def->binding_module ||
	    !def->binding_text) {
		error = oeap_fail(err, OEAP_ERR_DEFINITION, manifest, 0,
		                  "needs [patch] name, version, target, abi and [binding] module, source");
		goto done;
	}
	if (!def->name[0]) {
		error = oeap_fail(err, OEAP_ERR_DEFINITION, manifest, 0, "[patch] name is empty");
		goto done;
	}
	for (const char *p = def->name; *p; p++)
		if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '-')) {
			error = oeap_fail(err, OEAP_ERR_DEFINITION, manifest, 0,
			                  "patch name '%s' may only use a-z, 0-9 and '-'", def->name);
			goto done;
		}
	for (size_t i = 0; def->targets[i]; i++)
		if (def->targets[i][0] == '/' || strstr(def->targets[i], "..")) {
			error = oeap_fail(err, OEAP_ERR_DEFINITION, manifest, 0,
			                  "target '%s' must be a relative path inside the checkout", def->targets[i]);
			goto done;
		}
	for (size_t i = 0; def->installed_targets && def->installed_targets[i]; i++) {
		const char *t = def->installed_targets[i], *first = def->installed_targets[0];
		size_t pkg = strcspn(first, "/");
		if (!t[0] || t[0] == '/' || strstr(t, "..") || !strchr(t, '/')) {
			error = oeap_fail(err, OEAP_ERR_DEFINITION, manifest, 0,
			                  "installed_target '%s' must be a relative path inside site-packages, starting "
			                  "with the package's folder",
			                  t);
			goto done;
		}
		/* --python asks the interpreter for one package: the alternatives are files of it. */
		if (strncmp(t, first, pkg + 1) != 0) {
			error = oeap_fail(err, OEAP_ERR_DEFINITION, manifest, 0,
			                  "installed_target '%s' is not in the package '%.*s' of '%s': the alternatives "
			                  "must be files of one package",
			                  t, (int)pkg, first, first);
			goto done;
		}
	}
	if (def->nprobe && !def->problem_size) {
		error = oeap_fail(err, OEAP_ERR_DEFINITION, manifest, 0,
		                  "[library] problem_probe needs problem_size (the struct_size it is handed with)");
		goto done;
	}
	if (!full)
		goto loaded; /* detection reads the targets; the queries are compiled for the one chosen */
	if ((error = load_anchor_queries(def, err)) || (error = load_regions(def, err)) ||
	    (error = oeap_settingdefs_check(def, err)))
		goto done;
	/* verify and apply read the escape as this bool setting (trust.h); a name
	 * that is none would silently leave them without the escape the binding
	 * honours, so the definition is refused instead. */
	if (def->trust_escape) {
		const oeap_setting_def *esc = oeap_patchdef_setting(def, def->trust_escape);
		if (!esc || esc->type != OEAP_SETTING_BOOL) {
			error = oeap_fail(err, OEAP_ERR_DEFINITION, manifest, 0, "[binding] trust_escape = %s: %s",
			                  def->trust_escape,
			                  esc ? "that setting is not type = bool" : "there is no [setting:] of that name");
			goto done;
		}
	}
loaded:
	*out = def;
	def = NULL;
done:
	free(text);
	oeap_patchdef_free(def);
	return error;
}

int oeap_patchdef_load(const char *dir, oeap_patchdef **out, oeap_error *err)
{
	return load_def(dir, 1, out, err);
}

int oeap_patchdef_load_manifest(const char *dir, oeap_patchdef **out, oeap_error *err)
{
	return load_def(dir, 0, out, err);
}

void oeap_patchdef_free(oeap_patchdef *def)
{
	if (!def)
		return;
	for (size_t i = 0; i < def->nanchors; i++) {
		oeap_anchor_def *a = &def->anchors[i];
		free(a->name);
		free(a->describe);
		free(a->query_path);
		free(a->capture);
		free(a->in);
		free(a->contains_path);
		free(a->unmatched);
		oeap_query_free(a->query);
		oeap_query_free(a->contains);
	}
	for (size_t i = 0; i < def->nregions; i++) {
		oeap_region_def *r = &def->regions[i];
		free(r->name);
		free(r->after);
		free(r->template_path);
		free(r->template_text);
		free(r->scope);
		for (size_t j = 0; j < r->nargs; j++) {
			free(r->args[j].keyword);
			for (size_t k = 0; k < r->args[j].nexprs; k++)
				free(r->args[j].exprs[k]);
			free(r->args[j].exprs);
		}
		free(r->args);
	}
	free(def->anchors);
	free(def->regions);
	free(def->dir);
	free(def->name);
	free(def->summary);
	free(def->framework);
	free(def->target);
	free(def->installed_target);
	oeap_def_words_free(def->targets);
	oeap_def_words_free(def->installed_targets);
	free(def->first_revision);
	free(def->binding_module);
	free(def->binding_text);
	free(def->library_env);
	free(def->trust_escape);
	free(def->env_prefix);
	oeap_def_words_free(def->bool_true);
	oeap_def_words_free(def->bool_false);
	oeap_def_words_free(def->library_symbols);
	for (size_t i = 0; i < def->nprobe; i++)
		free(def->problem_probe[i].name);
	free(def->problem_probe);
	for (size_t i = 0; i < def->nsettings; i++) {
		oeap_setting_def *st = &def->settings[i];
		free(st->name);
		free(st->key);
		free(st->describe);
		free(st->at_least);
		free(st->forced_by);
		free(st->range_reason);
		free(st->warn);
		free(st->default_value);
		oeap_def_words_free(st->values);
	}
	free(def->settings);
	free(def);
}

const oeap_anchor_def *oeap_patchdef_anchor(const oeap_patchdef *def, const char *name)
{
	for (size_t i = 0; i < def->nanchors; i++)
		if (strcmp(def->anchors[i].name, name) == 0)
			return &def->anchors[i];
	return NULL;
}

const oeap_region_def *oeap_patchdef_region(const oeap_patchdef *def, const char *name)
{
	for (size_t i = 0; i < def->nregions; i++)
		if (strcmp(def->regions[i].name, name) == 0)
			return &def->regions[i];
	return NULL;
}

const oeap_setting_def *oeap_patchdef_setting(const oeap_patchdef *def, const char *name)
{
	for (size_t i = 0; i < def->nsettings; i++)
		if (strcmp(def->settings[i].name, name) == 0)
			return &def->settings[i];
	return NULL;
}
