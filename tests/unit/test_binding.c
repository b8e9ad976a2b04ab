/*
 * test_binding.c - the binding module's content digest: what this oeapatch
 * renders is its own and unedited; any byte changed is an edit; CRLF line
 * ends (git's autocrlf) are the same module; an older oeapatch's render with
 * a digest that holds is an upgrade, not an edit; a module without a digest
 * (written before digests) that is not a known render cannot be told from
 * an edit, and says so.
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/sha.h>

#include "binding.h"
#include "buf.h"
#include "library.h"
#include "pipeline.h"
/* the layout of oea_problem (the CLI builds the binding's block from it) */
#include "../../native/include/oea.h"

#define LIB "/opt/oea/lib/liboea.so.2.0.0"

static oeap_patchdef *def;

static int setup(void **state)
{
	(void)state;
	def = tu_def();
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	oeap_patchdef_free(def);
	return 0;
}

static char *render(size_t *len)
{
	oeap_buf b = OEAP_BUF_INIT;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_binding_render(def, LIB, &b, &err), 0);
	return oeap_buf_detach(&b, len);
}

static oeap_binding_kind kind_of(const char *text, size_t len)
{
	oeap_binding_state st;
	assert_int_equal(oeap_binding_classify(def, text, len, &st), 0);
	return st.kind;
}

/* The documented digest, computed here without binding.c: SHA-256 of the
 * text without its second line, CRLF read as LF. */
static void documented_digest(const char *text, size_t len, char hex[65])
{
	const char *l2 = memchr(text, '\n', len) + 1;
	const char *l3 = memchr(l2, '\n', len - (size_t)(l2 - text)) + 1;
	char *n = malloc(len);
	size_t k = 0;
	for (size_t i = 0; i < len; i++) {
		if (text + i >= l2 && text + i < l3)
			continue;
		if (text[i] == '\r' && i + 1 < len && text[i + 1] == '\n')
			continue;
		n[k++] = text[i];
	}
	unsigned char md[SHA256_DIGEST_LENGTH];
	SHA256((const unsigned char *)n, k, md);
	for (int i = 0; i < SHA256_DIGEST_LENGTH; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	free(n);
}

/* Replaces line 2 (the digest line) of `text` with one that holds for it. */
static char *redigest(const char *text, size_t len, size_t *out_len)
{
	char hex[65];
	documented_digest(text, len, hex);
	const char *l2 = memchr(text, '\n', len) + 1;
	const char *l3 = memchr(l2, '\n', len - (size_t)(l2 - text)) + 1;
	oeap_buf b = OEAP_BUF_INIT;
	assert_int_equal(oeap_buf_put(&b, text, (size_t)(l2 - text)), 0);
	assert_int_equal(oeap_buf_printf(&b, OEAP_BINDING_DIGEST_PREFIX "%s\n", hex), 0);
	assert_int_equal(oeap_buf_put(&b, l3, len - (size_t)(l3 - text)), 0);
	return oeap_buf_detach(&b, out_len);
}

/* `text` without its second line (a module from before digests). */
static char *drop_line2(const char *text, size_t len, size_t *out_len)
{
	const char *l2 = memchr(text, '\n', len) + 1;
	const char *l3 = memchr(l2, '\n', len - (size_t)(l2 - text)) + 1;
	oeap_buf b = OEAP_BUF_INIT;
	assert_int_equal(oeap_buf_put(&b, text, (size_t)(l2 - text)), 0);
	assert_int_equal(oeap_buf_put(&b, l3, len - (size_t)(l3 - text)), 0);
	return oeap_buf_detach(&b, out_len);
}

static char *replace(const char *text, size_t len, const char *from, const char *to, size_t *out_len)
{
	const char *at = strstr(text, from);
	assert_non_null(at);
	oeap_buf b = OEAP_BUF_INIT;
	assert_int_equal(oeap_buf_put(&b, text, (size_t)(at - text)), 0);
	assert_int_equal(oeap_buf_puts(&b, to), 0);
	size_t skip = (size_t)(at - text) + strlen(from);
	assert_int_equal(oeap_buf_put(&b, text + skip, len - skip), 0);
	return oeap_buf_detach(&b, out_len);
}

static char *check_detail(const char *text, size_t len, int *ok)
{
	oeap_report rep;
	memset(&rep, 0, sizeof(rep));
	rep.ok = 1;
	assert_int_equal(oeap_binding_check_text(def, "mod.py", text, len, &rep, NULL), 0);
	assert_int_equal(rep.n, 1);
	assert_string_equal(rep.checks[0].name, "binding");
	*ok = rep.checks[0].ok;
	char *d = strdup(rep.checks[0].detail);
	oeap_report_free(&rep);
	return d;
}

/* What this oeapatch renders: the header, then the digest line, which holds
 * (computed the documented way, independently), and the module is ours. */
static void test_render_is_current(void **state)
{
	(void)state;
	size_t len;
	char *text = render(&len);
	char head[128];
	snprintf(head, sizeof(head), OEAP_BINDING_HEADER "%s/%d)", def->name, def->version);
	assert_memory_equal(text, head, strlen(head));
	const char *l2 = strchr(text, '\n') + 1;
	assert_memory_equal(l2, OEAP_BINDING_DIGEST_PREFIX, strlen(OEAP_BINDING_DIGEST_PREFIX));
	char hex[65];
	documented_digest(text, len, hex);
	assert_memory_equal(l2 + strlen(OEAP_BINDING_DIGEST_PREFIX), hex, 64);
	assert_int_equal(l2[strlen(OEAP_BINDING_DIGEST_PREFIX) + 64], '\n');
	assert_int_equal(oeap_binding_digest_holds(text, len), 1);
	assert_int_equal(kind_of(text, len), OEAP_BINDING_CURRENT);
	char *lib = oeap_binding_recorded_library(def, text, len);
	assert_string_equal(lib, LIB);
	free(lib);
	int ok;
	char *d = check_detail(text, len, &ok);
	assert_true(ok);
	free(d);
	free(text);
}

/* One byte changed anywhere outside the digest line is an edit: the digest
 * no longer holds, and apply/revert refuse it. */
static void test_one_byte_changed_is_edited(void **state)
{
	(void)state;
	size_t len;
	char *text = render(&len);
	size_t l2 = (size_t)(strchr(text, '\n') + 1 - text), l3 = (size_t)(strchr(text + l2, '\n') + 1 - text);
	size_t tried = 0;
	for (size_t i = 0; i < len; i += (i < 200 ? 1 : 61)) {
		if (i + 1 >= l2 && i < l3)
			continue; /* the digest line and the line end before it: below */
		char saved = text[i];
		text[i] = saved == 'x' ? 'y' : 'x';
		if (oeap_binding_digest_holds(text, len) != 0)
			fail_msg("byte %zu changed: the digest still holds", i);
		if (i >= strlen(OEAP_BINDING_HEADER) && kind_of(text, len) != OEAP_BINDING_EDITED)
			fail_msg("byte %zu changed: not classified as edited", i);
		text[i] = saved;
		tried++;
	}
	assert_true(tried > 100);
	/* The line end before the digest line: no digest line any more, and
	 * still refused (this version's header, not a known render). */
	text[l2 - 1] = ' ';
	assert_int_equal(kind_of(text, len), OEAP_BINDING_UNKNOWN);
	text[l2 - 1] = '\n';
	/* A digit of the digest itself. */
	/* (another hex digit: x ^ 1 is none for 'a' and 'f') */
	char *digit = &text[l2 + strlen(OEAP_BINDING_DIGEST_PREFIX)];
	*digit = *digit == '0' ? '1' : '0';
	assert_int_equal(kind_of(text, len), OEAP_BINDING_EDITED);
	int ok;
	char *d = check_detail(text, len, &ok);
	assert_false(ok);
	assert_non_null(strstr(d, "edited by hand"));
	free(d);
	free(text);
}

/* CRLF line ends (git core.autocrlf=true checks the module out so) are the
 * same module, whole or in part; a bare CR is content, so an edit. */
static void test_crlf_is_the_same_module(void **state)
{
	(void)state;
	size_t len;
	char *text = render(&len);
	oeap_buf crlf = OEAP_BUF_INIT;
	for (size_t i = 0; i < len; i++)
		assert_int_equal(text[i] == '\n' ? oeap_buf_put(&crlf, "\r\n", 2) : oeap_buf_put(&crlf, text + i, 1), 0);
	assert_int_equal(oeap_binding_digest_holds(crlf.data, crlf.len), 1);
	assert_int_equal(kind_of(crlf.data, crlf.len), OEAP_BINDING_CURRENT);
	char *lib = oeap_binding_recorded_library(def, crlf.data, crlf.len);
	assert_string_equal(lib, LIB);
	free(lib);
	int ok;
	char *d = check_detail(crlf.data, crlf.len, &ok);
	assert_true(ok);
	free(d);

	/* Only some lines converted: still the same module. */
	size_t n;
	char *mixed = replace(text, len, "\nABI_VERSION = ", "\r\nABI_VERSION = ", &n);
	assert_int_equal(oeap_binding_digest_holds(mixed, n), 1);
	assert_int_equal(kind_of(mixed, n), OEAP_BINDING_CURRENT);
	free(mixed);

	/* A bare CR is not a line end. */
	char *bare = replace(text, len, "\nABI_VERSION = ", "\rABI_VERSION = ", &n);
	assert_int_equal(oeap_binding_digest_holds(bare, n), 0);
	assert_int_equal(kind_of(bare, n), OEAP_BINDING_EDITED);
	free(bare);
	oeap_buf_free(&crlf);
	free(text);
}

/* Another oeapatch's render (another comment, another definition version)
 * whose digest holds: not an edit, an upgrade. */
static void test_older_render_is_other(void **state)
{
	(void)state;
	size_t len, n1, n2, n3;
	char *text = render(&len);
	char head[128], older_head[128];
	snprintf(head, sizeof(head), "(%s/%d)", def->name, def->version);
	snprintf(older_head, sizeof(older_head), "(%s/%d)", def->name, def->version - 1);
	char *body = replace(text, len, "\nABI_VERSION = ", "\n# an older oeapatch's comment\nABI_VERSION = ", &n1);
	char *older = redigest(body, n1, &n2);
	assert_int_equal(oeap_binding_digest_holds(older, n2), 1);
	oeap_binding_state st;
	assert_int_equal(oeap_binding_classify(def, older, n2, &st), 0);
	assert_int_equal(st.kind, OEAP_BINDING_OTHER);
	assert_true(st.has_digest);
	snprintf(head, sizeof(head), "%s/%d", def->name, def->version);
	assert_string_equal(st.writer, head);
	int ok;
	char *d = check_detail(older, n2, &ok);
	assert_false(ok);
	char want[160];
	snprintf(want, sizeof(want), "written by another oeapatch (definition %s/%d): run `oeapatch apply`", def->name,
	         def->version);
	assert_non_null(strstr(d, want));
	free(d);

	/* Another definition version, with the library line elsewhere. */
	snprintf(head, sizeof(head), "(%s/%d)", def->name, def->version);
	char *v = replace(body, n1, head, older_head, &n3);
	char *v2 = redigest(v, n3, &n3);
	assert_int_equal(oeap_binding_classify(def, v2, n3, &st), 0);
	assert_int_equal(st.kind, OEAP_BINDING_OTHER);
	snprintf(want, sizeof(want), "%s/%d", def->name, def->version - 1);
	assert_string_equal(st.writer, want);
	char *lib = oeap_binding_recorded_library(def, v2, n3);
	assert_string_equal(lib, LIB); /* carried over by the upgrade */
	free(lib);
	free(v);
	free(v2);
	free(body);
	free(older);
	free(text);
}

/* No digest line (written before digests): this definition's render without
 * it is the older oeapatch's (an upgrade); anything else of this version
 * cannot be told from an edit, and the message says both. */
static void test_no_digest_line(void **state)
{
	(void)state;
	size_t len, n, m;
	char *text = render(&len);
	char *old = drop_line2(text, len, &n);
	assert_int_equal(oeap_binding_digest_holds(old, n), -1);
	assert_int_equal(kind_of(old, n), OEAP_BINDING_OTHER);

	char *edited = replace(old, n, "\nABI_VERSION = ", "\n# mine\nABI_VERSION = ", &m);
	oeap_binding_state st;
	assert_int_equal(oeap_binding_classify(def, edited, m, &st), 0);
	assert_int_equal(st.kind, OEAP_BINDING_UNKNOWN);
	assert_false(st.has_digest);
	int ok;
	char *d = check_detail(edited, m, &ok);
	assert_false(ok);
	assert_non_null(strstr(d, "edited by hand, or written by an oeapatch before this one"));
	assert_non_null(strstr(d, "oeapatch apply --diff"));
	free(d);

	/* A digest-shaped line that is not one (a digit short) is no digest. */
	char *shortd = replace(text, len, OEAP_BINDING_DIGEST_PREFIX, OEAP_BINDING_DIGEST_PREFIX "z", &m);
	assert_int_equal(oeap_binding_digest_holds(shortd, m), -1);
	free(shortd);

	/* Another version's module from before digests: replaced, as it always was. */
	char head[64], other[64];
	snprintf(head, sizeof(head), "(%s/%d)", def->name, def->version);
	snprintf(other, sizeof(other), "(%s/%d)", def->name, def->version + 7);
	char *v = replace(edited, m, head, other, &m);
	assert_int_equal(kind_of(v, m), OEAP_BINDING_OTHER);
	free(v);
	free(edited);
	free(old);
	free(text);
}

static void test_not_ours(void **state)
{
	(void)state;
	const char *t = "print('somebody else')\n";
	assert_int_equal(kind_of(t, strlen(t)), OEAP_BINDING_NOT_OURS);
	assert_int_equal(oeap_binding_digest_holds(t, strlen(t)), -1);
}

/* The [library] contract is rendered into the module from the definition. */
static void test_render_contract(void **state)
{
	(void)state;
	size_t len;
	char *t = render(&len);
	const char *line = strstr(t, "\nLIBRARY_SYMBOLS = (");
	assert_non_null(line);
	const char *eol = strchr(line + 1, '\n');
	assert_non_null(def->library_symbols);
	size_t n = 0;
	for (; def->library_symbols[n]; n++) {
		char quoted[128];
		snprintf(quoted, sizeof(quoted), "\"%s\"", def->library_symbols[n]);
		const char *at = strstr(line, quoted);
		assert_true(at && at < eol);
	}
	assert_int_equal(n, 11);
	/* The binding's block is ABI 3's oea_problem, as the header lays it out. */
	assert_int_equal(def->problem_size, (int)sizeof(oea_problem));
	char want[64];
	snprintf(want, sizeof(want), "\nPROBLEM_SIZE = %d\n", def->problem_size);
	assert_non_null(strstr(t, want));
	assert_non_null(strstr(t, "\nPROBLEM_PROBE = {\"num_experts\": 1, \"top_k\": 1, \"k0\": 1, "));
	free(t);
}

/* [binding] source's files are one module, and the names patch.ini gives
 * are rendered into it: the settings' prefix and the framework as text, the
 * boolean spellings as Python tuples. No placeholder is left. */
static void test_render_names(void **state)
{
	(void)state;
	size_t len;
	char *t = render(&len);
	assert_null(strstr(t, "{{"));
	assert_non_null(strstr(t, "\n_TRUE = ('true', '1', 'yes', 'y')\n"));
	assert_non_null(strstr(t, "\n_FALSE = ('false', '0', 'no', 'n')\n"));
	/* the settings table, rendered from patch.ini's [setting:...] (bindingsettings.h) */
	assert_non_null(strstr(t, "\nSETTINGS_TABLE = (\n    {\"name\": 'SGLANG_OEA_K0', \"key\": 'k0', \"type\": \"int\", "
	                          "\"default\": 0, \"min\": 0, \"max\": 15, \"bands\": True, \"at_least\": None, "
	                          "\"forced_by\": None, \"switch\": True, "));
	assert_non_null(strstr(t, "{\"name\": 'SGLANG_OEA_STATS', \"key\": 'stats', \"type\": \"bool\", "
	                          "\"default\": False, \"min\": None, \"max\": None, \"bands\": False, "
	                          "\"at_least\": None, \"forced_by\": 'SGLANG_OEA_MODE=shadow', "));
	assert_non_null(strstr(t, "{\"name\": 'SGLANG_OEA_MAX_TOKENS', \"key\": 'max_tokens', \"type\": \"int\", "
	                          "\"default\": 1024, \"min\": 1, \"max\": 1024, \"bands\": False, "
	                          "\"at_least\": 'SGLANG_OEA_MIN_BATCH'"));
	assert_non_null(strstr(t, "{\"name\": 'SGLANG_OEA_LIBRARY', \"key\": 'library', \"type\": \"path\", "
	                          "\"default\": None, \"min\": None"));
	assert_non_null(strstr(t, "for SGLang's MoE routing"));
	/* the adapter follows the core, whose last definition it calls */
	const char *start = strstr(t, "\ndef _start():"), *call = strstr(t, "\n_start()\n");
	assert_true(start && call && start < call);
	free(t);
	/* One spelling is still a tuple; a quote in a spelling is escaped. */
	char **saved = def->bool_true;
	char *one[] = {"it's", NULL};
	def->bool_true = one;
	t = render(&len);
	assert_non_null(strstr(t, "\n_TRUE = ('it\\'s',)\n"));
	free(t);
	def->bool_true = saved;
}

/* A placeholder whose value patch.ini lacks, or holds in a form the module's
 * string literals cannot carry, is the definition's error, named. */
static void test_render_names_refused(void **state)
{
	(void)state;
	oeap_buf b = OEAP_BUF_INIT;
	oeap_error err;
	char *saved = def->framework;
	def->framework = NULL;
	oeap_error_clear(&err);
	assert_int_equal(oeap_binding_render(def, LIB, &b, &err), -1);
	assert_int_equal(err.kind, OEAP_ERR_DEFINITION);
	assert_non_null(strstr(err.message, "{{framework}} needs [patch] framework"));
	oeap_buf_free(&b);
	def->framework = saved;
	saved = def->env_prefix;
	def->env_prefix = "SGLANG\"_OEA_";
	oeap_error_clear(&err);
	assert_int_equal(oeap_binding_render(def, LIB, &b, &err), -1);
	assert_int_equal(err.kind, OEAP_ERR_DEFINITION);
	assert_non_null(strstr(err.message, "{{env_prefix}}"));
	assert_non_null(strstr(err.message, "quote"));
	oeap_buf_free(&b);
	def->env_prefix = saved;
	char **words = def->bool_false;
	def->bool_false = NULL;
	oeap_error_clear(&err);
	assert_int_equal(oeap_binding_render(def, LIB, &b, &err), -1);
	assert_non_null(strstr(err.message, "{{bool_false}} needs [binding] bool_false"));
	oeap_buf_free(&b);
	def->bool_false = words;
}

/* A probe field that oea_problem does not have is the definition's error,
 * at render and at the library check alike (nothing guesses an offset). */
static void test_probe_unknown_field(void **state)
{
	(void)state;
	assert_true(def->nprobe > 0);
	char *saved = def->problem_probe[0].name;
	def->problem_probe[0].name = "num_expertz";
	oeap_buf b = OEAP_BUF_INIT;
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_not_equal(oeap_binding_render(def, LIB, &b, &err), 0);
	assert_int_equal(err.kind, OEAP_ERR_DEFINITION);
	assert_non_null(strstr(err.message, "num_expertz is no scalar field of oea_problem"));
	oeap_buf_free(&b);
	char detail[1024];
	const char *lib = getenv("OEA_LIBRARY");
	assert_non_null(lib);
	assert_int_not_equal(oeap_library_probe(def, lib, detail, sizeof(detail)), 0);
	assert_non_null(strstr(detail, "num_expertz is no scalar field of oea_problem"));
	def->problem_probe[0].name = saved;
}

/* The real liboea holds the contract; a block size it refuses is named with
 * the library's own message. */
static void test_probe_real_library(void **state)
{
	(void)state;
	char detail[1024];
	const char *lib = getenv("OEA_LIBRARY");
	assert_non_null(lib);
	if (oeap_library_probe(def, lib, detail, sizeof(detail)) != 0)
		fail_msg("%s", detail);
	assert_non_null(strstr(detail, "the binding's 11 entry points exported, its argument block accepted"));
	int saved = def->problem_size;
	def->problem_size = (int)OEA_PROBLEM_SIZE_V1 - 8; /* below any ABI's struct */
	assert_int_not_equal(oeap_library_probe(def, lib, detail, sizeof(detail)), 0);
	def->problem_size = saved;
	assert_non_null(strstr(detail, "refuses the binding's argument block"));
	assert_non_null(strstr(detail, "oea_problem_check returns 2 ("));
	/* an entry point the library lacks */
	char **syms = def->library_symbols;
	char *extra[] = {"oea_abi_version", "oea_route_everything", NULL};
	def->library_symbols = extra;
	assert_int_not_equal(oeap_library_probe(def, lib, detail, sizeof(detail)), 0);
	def->library_symbols = syms;
	assert_non_null(strstr(detail, "does not export oea_route_everything, which the binding calls"));
}

/* The forms of a library path: absolute or a bare name; a relative path with
 * a slash is refused before anything is opened. */
static void test_library_path_forms(void **state)
{
	(void)state;
	assert_int_equal(oeap_library_relative("lib/liboea.so.2"), 1);
	assert_int_equal(oeap_library_relative("./liboea.so"), 1);
	assert_int_equal(oeap_library_relative("../liboea.so"), 1);
	assert_int_equal(oeap_library_relative("liboea.so.2"), 0);
	assert_int_equal(oeap_library_relative("/opt/liboea.so"), 0);
	char detail[1024];
	assert_int_not_equal(oeap_library_probe(def, "native/liboea.so", detail, sizeof(detail)), 0);
	assert_non_null(strstr(detail, "native/liboea.so is a relative path"));
	assert_null(oeap_library_realpath_own_env("/opt/liboea.so"));
	assert_null(oeap_library_realpath_own_env("liboea-not-installed-anywhere.so.9"));
	/* the C library is on every loader's search path */
	char *libc = oeap_library_realpath_own_env("libc.so.6");
	assert_non_null(libc);
	assert_int_equal(libc[0], '/');
	free(libc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_render_contract),
		cmocka_unit_test(test_render_names),
		cmocka_unit_test(test_render_names_refused),
		cmocka_unit_test(test_probe_unknown_field),
		cmocka_unit_test(test_probe_real_library),
		cmocka_unit_test(test_library_path_forms),
		cmocka_unit_test(test_render_is_current),
		cmocka_unit_test(test_one_byte_changed_is_edited),
		cmocka_unit_test(test_crlf_is_the_same_module),
		cmocka_unit_test(test_older_render_is_other),
		cmocka_unit_test(test_no_digest_line),
		cmocka_unit_test(test_not_ours),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
