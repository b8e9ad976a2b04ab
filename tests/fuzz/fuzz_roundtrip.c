/*
 * fuzz_roundtrip - the whole apply -> verify -> apply -> revert round trip on
 * arbitrary bytes, with the real sglang-oea definition.
 *
 * The contract (issue "Hardening"): any input is either refused cleanly (an
 * error kind and a message) or round-trips byte-identically:
 *   apply(in) = out  =>  verify(out) holds,
 *                        apply(out) is "already applied" and changes nothing,
 *                        revert(out) = in without our regions (= in when it had none).
 * revert and verify on the raw input must not crash either, and a successful
 * revert must leave no region of ours and be idempotent.
 * Any violation is __builtin_trap(), which libFuzzer reports as a crash.
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline.h"

#ifndef OEAPATCH_FUZZ_SOURCE_DIR
#define OEAPATCH_FUZZ_SOURCE_DIR "."
#endif

static oeap_patchdef *g_def;

/* Report what broke on stderr before trapping, so a crash log says why. */
#define CHECK(cond, ...)                                                 \
	do {                                                                 \
		if (!(cond)) {                                                   \
			fprintf(stderr, "fuzz_roundtrip: %s: ", #cond);              \
			fprintf(stderr, __VA_ARGS__);                                \
			fputc('\n', stderr);                                         \
			__builtin_trap();                                            \
		}                                                                \
	} while (0)

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	const char *src = getenv("OEAPATCH_SOURCE_DIR");
	char dir[PATH_MAX];
	oeap_error err;
	oeap_error_clear(&err);
	snprintf(dir, sizeof(dir), "%s/patches/sglang-oea", src && *src ? src : OEAPATCH_FUZZ_SOURCE_DIR);
	if (oeap_patchdef_load(dir, &g_def, &err)) {
		fprintf(stderr, "fuzz_roundtrip: cannot load %s: %s: %s\n", dir, err.where, err.message);
		exit(2);
	}
	return 0;
}

static void check_refusal(const oeap_error *err, const char *step)
{
	CHECK(err->kind != OEAP_ERR_NONE, "%s failed without an error kind", step);
	CHECK(err->message[0] != '\0', "%s failed without a message (where: %s)", step, err->where);
	CHECK(memchr(err->message, '\0', sizeof(err->message)) != NULL, "%s: message not terminated", step);
	CHECK(memchr(err->where, '\0', sizeof(err->where)) != NULL, "%s: where not terminated", step);
}

/* `buf` without the regions of our patch; -1 when its markers do not scan. */
static int strip_ours(const char *buf, size_t len, oeap_buf *out)
{
	oeap_regions rs = {0};
	oeap_error err;
	oeap_error_clear(&err);
	if (oeap_regions_scan(buf, len, &rs, &err))
		return -1;
	int rc = oeap_regions_strip(buf, len, &rs, g_def->name, out);
	oeap_regions_free(&rs);
	return rc;
}

static size_t count_ours(const char *buf, size_t len)
{
	oeap_regions rs = {0};
	oeap_error err;
	oeap_error_clear(&err);
	if (oeap_regions_scan(buf, len, &rs, &err))
		return (size_t)-1;
	size_t n = oeap_regions_count(&rs, g_def->name);
	oeap_regions_free(&rs);
	return n;
}

static void roundtrip(const char *in, size_t len)
{
	oeap_outcome o, again, back, back2;
	oeap_report rep;
	oeap_error err;
	memset(&again, 0, sizeof(again));
	memset(&back, 0, sizeof(back));
	memset(&back2, 0, sizeof(back2));
	oeap_error_clear(&err);

	/* verify on anything: never crashes, and says "not ok" rather than nothing. */
	CHECK(oeap_verify_bytes(g_def, in, len, "fuzz.py", &rep) == 0, "verify(in) ran out of memory");
	CHECK(rep.n > 0, "verify(in) reported no check at all");
	int in_verifies = rep.ok;
	oeap_report_free(&rep);

	/* revert on anything: refused cleanly, or leaves none of our regions. */
	for (int force = 0; force <= 1; force++) {
		oeap_error_clear(&err);
		if (oeap_revert_bytes(g_def, in, len, "fuzz.py", force, &back, &err)) {
			check_refusal(&err, "revert(in)");
		} else {
			CHECK(back.out != NULL, "revert(in) succeeded without output");
			CHECK(count_ours(back.out, back.out_len) == 0, "revert(in) left regions of ours");
			CHECK(back.changed == (back.out_len != len || memcmp(back.out, in, len) != 0),
			      "revert(in): `changed` does not match the bytes");
			oeap_error_clear(&err);
			CHECK(oeap_revert_bytes(g_def, back.out, back.out_len, "fuzz.py", 0, &back2, &err) == 0,
			      "revert(revert(in)) failed: %s: %s", err.where, err.message);
			CHECK(!back2.changed && back2.out_len == back.out_len &&
			          memcmp(back2.out, back.out, back.out_len) == 0,
			      "revert is not idempotent");
			oeap_outcome_free(&back2);
		}
		oeap_outcome_free(&back);
	}

	oeap_error_clear(&err);
	if (oeap_apply_bytes(g_def, in, len, "fuzz.py", &o, &err)) {
		check_refusal(&err, "apply(in)");
		/* A file that verifies must never be refused by apply ("already applied" is success). */
		CHECK(!in_verifies, "apply refused a file that verifies: %s: %s", err.where, err.message);
		return;
	}
	CHECK(o.out != NULL, "apply succeeded without output");
	CHECK(o.changed == (o.out_len != len || memcmp(o.out, in, len) != 0),
	      "apply(in): `changed` does not match the bytes");
	CHECK(!in_verifies || !o.changed, "apply changed a file that already verified");

	/* 1. the result verifies */
	CHECK(oeap_verify_bytes(g_def, o.out, o.out_len, "fuzz.py", &rep) == 0, "verify(out) ran out of memory");
	if (!rep.ok) {
		for (size_t i = 0; i < rep.n; i++)
			if (!rep.checks[i].ok)
				fprintf(stderr, "fuzz_roundtrip: verify(out): %s: %s\n", rep.checks[i].name,
				        rep.checks[i].detail);
	}
	CHECK(rep.ok && rep.applied && rep.version == g_def->version, "apply's output does not verify");
	oeap_report_free(&rep);

	/* 2. applying again is a no-op */
	oeap_error_clear(&err);
	CHECK(oeap_apply_bytes(g_def, o.out, o.out_len, "fuzz.py", &again, &err) == 0,
	      "apply(apply(in)) failed: %s: %s", err.where, err.message);
	CHECK(again.before == OEAP_STATE_APPLIED && !again.changed && again.out_len == o.out_len &&
	          memcmp(again.out, o.out, o.out_len) == 0,
	      "apply(apply(in)) changed the file");

	/* 3. revert gives back the input, without our regions if it had any */
	oeap_buf want = OEAP_BUF_INIT;
	CHECK(strip_ours(in, len, &want) == 0, "apply accepted markers that the region reader refuses");
	oeap_error_clear(&err);
	CHECK(oeap_revert_bytes(g_def, o.out, o.out_len, "fuzz.py", 0, &back, &err) == 0,
	      "revert(apply(in)) failed: %s: %s", err.where, err.message);
	CHECK(back.out_len == want.len && (want.len == 0 || memcmp(back.out, want.data, want.len) == 0),
	      "revert(apply(in)) is not the input (%zu bytes back, %zu expected)", back.out_len, want.len);

	oeap_buf_free(&want);
	oeap_outcome_free(&back);
	oeap_outcome_free(&again);
	oeap_outcome_free(&o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* The pipeline takes NUL-terminated buffers from oeap_read_file; give it
	 * the same (an exact-size copy, so ASan sees every overread). */
	char *in = malloc(size + 1);
	if (!in)
		return 0;
	if (size)
		memcpy(in, data, size);
	in[size] = '\0';
	roundtrip(in, size);
	free(in);
	return 0;
}
