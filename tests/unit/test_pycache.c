/*
 * test_pycache.c - which cached bytecode runs instead of a source: the hash
 * a hash-based pyc records (against values CPython's own _imp.source_hash
 * gave, per version), and each kind of pyc header against the rule.
 * e2e/test_bytecode.sh checks the same with real py_compile output and the
 * real import system.
 */
#include "testutil.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pycache.h"

/* _imp.source_hash(_RAW_MAGIC_NUMBER, data) as each CPython printed it
 * (read as a little-endian uint64), for b"", b"abc" and a 19-byte string. */
static const struct {
	const char *python;
	uint64_t magic;
	int rounds;
	uint64_t want[3];
} vectors[] = {
	{"3.8.18", 0x0a0d0d55, 24, {0xe9e843361b88e481ULL, 0x741469454f19fecdULL, 0x7c36590d1d34a031ULL}},
	{"3.10.13", 0x0a0d0d6f, 24, {0x27fde72525cdc08cULL, 0x15943dbf4b6a5b43ULL, 0x8e9b8118dfea5ddeULL}},
	{"3.11.7", 0x0a0d0da7, 13, {0x737fe8d5d59c8d73ULL, 0xf5a41d7ce782afc7ULL, 0x448e0b994fd62322ULL}},
	{"3.12.1", 0x0a0d0dcb, 13, {0x257a38c9ed8ef1baULL, 0x32fdbaf831570fa0ULL, 0x808cf3e9c512fe3aULL}},
	{"3.13.0", 0x0a0d0df3, 13, {0x14b8932f316dec27ULL, 0xa09047531a55ffc9ULL, 0x5c8d57c98d9574faULL}},
};

static void test_source_hash_matches_cpython(void **state)
{
	(void)state;
	static const char *inputs[] = {"", "abc", "0123456789abcdefXYZ"};
	for (size_t v = 0; v < sizeof(vectors) / sizeof(vectors[0]); v++)
		for (int i = 0; i < 3; i++) {
			uint64_t got = oeap_pyc_source_hash(vectors[v].magic, inputs[i], strlen(inputs[i]), vectors[v].rounds);
			if (got != vectors[v].want[i])
				fail_msg("Python %s, input %d: %016llx, CPython says %016llx", vectors[v].python, i,
				         (unsigned long long)got, (unsigned long long)vectors[v].want[i]);
		}
}

#define MAGIC 0x0a0d0da7u /* 3.11's */
static const char SRC[] = "from . import _oeapatch_sglang_oea as _oeapatch_oea\nx = 1\n";

typedef struct fixture {
	char *dir;
	char src[PATH_MAX], cache[PATH_MAX], pyc[PATH_MAX + 64];
	struct stat st;
} fixture;

static int setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	f->dir = tu_tmpdir();
	snprintf(f->src, sizeof(f->src), "%s/topk.py", f->dir);
	snprintf(f->cache, sizeof(f->cache), "%s/__pycache__", f->dir);
	snprintf(f->pyc, sizeof(f->pyc), "%s/topk.cpython-311.pyc", f->cache);
	tu_write(f->src, SRC, strlen(SRC));
	mkdir(f->cache, 0755);
	stat(f->src, &f->st);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fixture *f = *state;
	tu_rmtree(f->dir);
	free(f->dir);
	free(f);
	return 0;
}

static void put32(unsigned char *p, uint32_t x)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(x >> (8 * i));
}

/* A pyc: header (magic, flags, two words or a hash) and a body. */
static void write_pyc(const char *path, uint32_t flags, uint64_t word, const char *body)
{
	unsigned char buf[256];
	size_t n = strlen(body);
	put32(buf, MAGIC);
	put32(buf + 4, flags);
	put32(buf + 8, (uint32_t)word);
	put32(buf + 12, (uint32_t)(word >> 32));
	memcpy(buf + 16, body, n);
	tu_write(path, (const char *)buf, 16 + n);
}

/* How many entries oeap_pyc_find() reports for the fixture's source. */
static size_t found(fixture *f, int all, int marker_in_source)
{
	oeap_pyc_list l = {NULL, 0};
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_pyc_find(f->src, all, "_oeapatch_sglang_oea", marker_in_source, &l, &err), 0);
	size_t n = l.n;
	oeap_pyc_list_free(&l);
	return n;
}

static uint64_t stamp(const fixture *f)
{
	return (uint32_t)f->st.st_mtime | ((uint64_t)(uint32_t)f->st.st_size << 32);
}

static void test_hash_based(void **state)
{
	fixture *f = *state;
	uint64_t h = oeap_pyc_source_hash(MAGIC, SRC, strlen(SRC), 13);
	write_pyc(f->pyc, 1, h, "code");
	assert_int_equal(found(f, 0, 1), 0); /* unchecked, of these bytes */
	write_pyc(f->pyc, 1, h ^ 1, "code");
	assert_int_equal(found(f, 0, 1), 1); /* unchecked, of other bytes: runs */
	write_pyc(f->pyc, 3, h ^ 1, "code");
	assert_int_equal(found(f, 0, 1), 0); /* checked: Python recompiles */
	write_pyc(f->pyc, 1, oeap_pyc_source_hash(MAGIC, SRC, strlen(SRC), 24), "code");
	assert_int_equal(found(f, 0, 1), 0); /* a 3.10-style hash of these bytes */
}

static void test_timestamp(void **state)
{
	fixture *f = *state;
	write_pyc(f->pyc, 0, stamp(f), "\xe3..._oeapatch_sglang_oea...");
	assert_int_equal(found(f, 0, 1), 0); /* fresh, and its code imports the binding */
	write_pyc(f->pyc, 0, stamp(f), "\xe3...original code...");
	assert_int_equal(found(f, 0, 1), 1); /* fresh by its stamp, code of the original */
	assert_int_equal(found(f, 0, 0), 0); /* the same, when the source is the original */
	write_pyc(f->pyc, 0, stamp(f) + 1, "\xe3...original code...");
	assert_int_equal(found(f, 0, 1), 0); /* another mtime: Python recompiles */
	write_pyc(f->pyc, 0, stamp(f) + ((uint64_t)1 << 32), "\xe3...original code...");
	assert_int_equal(found(f, 0, 1), 0); /* the same mtime, another size: Python recompiles */
}

static void test_what_python_discards(void **state)
{
	fixture *f = *state;
	uint64_t other = oeap_pyc_source_hash(MAGIC, "x", 1, 13);
	write_pyc(f->pyc, 5, other, "code"); /* unknown flag bit */
	assert_int_equal(found(f, 0, 1), 0);
	tu_write(f->pyc, "\xa7\x0d\x0d\x0a\x01\0\0\0", 8); /* too short */
	assert_int_equal(found(f, 0, 1), 0);
	char other_name[PATH_MAX + 64];
	snprintf(other_name, sizeof(other_name), "%s/topkx.cpython-311.pyc", f->cache);
	write_pyc(other_name, 1, other, "code"); /* another module's */
	assert_int_equal(found(f, 0, 1), 0);
	assert_int_equal(found(f, 1, 1), 1); /* all: topk's only */
}

static void test_legacy_beside(void **state)
{
	fixture *f = *state;
	char legacy[PATH_MAX + 8];
	snprintf(legacy, sizeof(legacy), "%s/topk.pyc", f->dir);
	write_pyc(legacy, 0, 0, "code");
	assert_int_equal(found(f, 0, 1), 0); /* the source is there: Python imports it */
	assert_int_equal(found(f, 1, 1), 0);
	unlink(f->src);
	assert_int_equal(found(f, 1, 1), 1); /* the source is gone: Python would import this */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_source_hash_matches_cpython),
		cmocka_unit_test_setup_teardown(test_hash_based, setup, teardown),
		cmocka_unit_test_setup_teardown(test_timestamp, setup, teardown),
		cmocka_unit_test_setup_teardown(test_what_python_discards, setup, teardown),
		cmocka_unit_test_setup_teardown(test_legacy_beside, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
