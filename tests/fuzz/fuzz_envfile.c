/*
 * fuzz_envfile - the systemd EnvironmentFile= reader and the settings check
 * (src/settings.c) on arbitrary bytes.
 *
 * For any input, oeap_envfile_parse() either refuses with an input error that
 * names "fuzz.env:LINE" for a line of the input, or returns variables whose
 * names are variable names and whose values are UTF-8, each from a line of
 * the input. Writing every variable back double-quoted (systemd.exec(5)'s
 * escapes) and parsing that gives the same variables: what verify reads is
 * what the file says. The settings check of the real definition runs on the
 * result without fault, and counts its problems consistently.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "patchdef.h"
#include "settings.h"

#define CHECK(cond, ...)                                                 \
	do {                                                                 \
		if (!(cond)) {                                                   \
			fprintf(stderr, "fuzz_envfile: %s: ", #cond);                \
			fprintf(stderr, __VA_ARGS__);                                \
			fputc('\n', stderr);                                         \
			__builtin_trap();                                            \
		}                                                                \
	} while (0)

static oeap_patchdef *definition(void)
{
	static oeap_patchdef *def;
	if (!def) {
		char dir[4096];
		const char *src = getenv("OEAPATCH_SOURCE_DIR");
		snprintf(dir, sizeof(dir), "%s/patches/sglang-oea", src && *src ? src : OEAPATCH_FUZZ_SOURCE_DIR);
		oeap_error err;
		oeap_error_clear(&err);
		CHECK(oeap_patchdef_load(dir, &def, &err) == 0, "%s: %s", err.where, err.message);
	}
	return def;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	long lines = 1;
	for (size_t i = 0; i < size; i++)
		lines += text[i] == '\n';
	oeap_env env = {0};
	oeap_error err;
	oeap_error_clear(&err);
	if (oeap_envfile_parse(text, size, "fuzz.env", &env, &err)) {
		CHECK(err.kind == OEAP_ERR_INPUT || err.kind == OEAP_ERR_INTERNAL, "kind %d", (int)err.kind);
		CHECK(err.kind != OEAP_ERR_INPUT || (err.line >= 1 && err.line <= lines), "line %ld of %ld", err.line,
		      lines);
		CHECK(err.message[0], "an error without a message");
		oeap_env_free(&env);
		return 0;
	}
	oeap_buf back = OEAP_BUF_INIT;
	for (size_t i = 0; i < env.n; i++) {
		const oeap_env_var *v = &env.vars[i];
		CHECK(v->line >= 1 && v->line <= lines, "%s at line %ld of %ld", v->name, v->line, lines);
		CHECK(v->name[0] && !(v->name[0] >= '0' && v->name[0] <= '9'), "name '%s'", v->name);
		for (const char *p = v->name; *p; p++)
			CHECK((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_',
			      "name '%s'", v->name);
		CHECK(oeap_buf_printf(&back, "%s=\"", v->name) == 0, "out of memory");
		for (const char *p = v->value; *p; p++) {
			if (strchr("\"\\`$", *p))
				CHECK(oeap_buf_put(&back, "\\", 1) == 0, "out of memory");
			CHECK(oeap_buf_put(&back, p, 1) == 0, "out of memory");
		}
		CHECK(oeap_buf_put(&back, "\"\n", 2) == 0, "out of memory");
	}
	oeap_env again = {0};
	oeap_error_clear(&err);
	CHECK(oeap_envfile_parse(back.data ? back.data : "", back.len, "back.env", &again, &err) == 0,
	      "written back, refused: %s: %s", err.where, err.message);
	CHECK(again.n == env.n, "%zu variables written back, %zu read", env.n, again.n);
	for (size_t i = 0; i < env.n; i++) {
		const oeap_env_var *w = oeap_env_get(&again, env.vars[i].name);
		CHECK(w && strcmp(w->value, env.vars[i].value) == 0, "%s changed on the way back", env.vars[i].name);
	}
	oeap_settings_result res;
	CHECK(oeap_settings_check(definition(), &env, &res) == 0, "out of memory");
	CHECK(res.errors + res.warnings == res.nproblems, "%zu + %zu != %zu", res.errors, res.warnings, res.nproblems);
	oeap_settings_result_free(&res);
	oeap_env_free(&again);
	oeap_env_free(&env);
	oeap_buf_free(&back);
	return 0;
}
