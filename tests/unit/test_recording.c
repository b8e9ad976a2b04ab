/*
 * test_recording.c - the recording reader (recording.h), the replay engine
 * (replay.h) and the recommendation (recommend.h).
 *
 * Recordings are built here byte by byte (jansson for the header), as the
 * format page says they are laid out, so that each test can break one thing:
 * a cut tail, a dtype, a lying size, a hole, another tool's file. The engine
 * is held to liboea itself: the replayed totals of the recorded calls equal
 * the sums of oea_route_host over the same calls made directly.
 */
#include "testutil.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "k0bands.h"
#include "oea.h"
#include "recommend.h"
#include "recording.h"
#include "replay.h"

#define E 16
#define K 4
#define ROWS 5

typedef struct tens {
	char name[32];
	const char *dtype;
	int64_t shape[2];
	int ndim;
	const void *data;
	size_t len;
	int64_t lie; /* added to the end offset in the header */
} tens;

/* Deterministic logits and the ids a framework would route them to (top K by logit). */
static void make_call(int seed, float *logits, int32_t *ids)
{
	uint32_t s = 2463534242u + (uint32_t)seed * 7919u;
	for (int i = 0; i < ROWS * E; i++) {
		s ^= s << 13, s ^= s >> 17, s ^= s << 5;
		logits[i] = (float)(s % 2000) / 100.0f - 10.0f;
	}
	for (int r = 0; r < ROWS; r++) {
		int used[E] = {0};
		for (int k = 0; k < K; k++) {
			int best = -1;
			for (int e = 0; e < E; e++)
				if (!used[e] && (best < 0 || logits[r * E + e] > logits[r * E + best]))
					best = e;
			used[best] = 1;
			ids[r * K + k] = best;
		}
	}
}

/* One chunk into out (returns its size). format: NULL = no format tag. */
static size_t chunk(unsigned char *out, const char *format, const char *layers, const char *calls, const tens *t,
                    size_t n)
{
	json_t *h = json_object();
	json_t *meta = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "version", "1", "framework", "sglang", "prefix",
	                         "SGLANG_OEA_", "rank", "0", "layers", layers, "calls", calls);
	if (format)
		json_object_set_new(meta, "format", json_string(format));
	json_object_set_new(h, "__metadata__", meta);
	uint64_t at = 0;
	for (size_t i = 0; i < n; i++) {
		json_t *shape = t[i].ndim == 2 ? json_pack("[I,I]", (json_int_t)t[i].shape[0], (json_int_t)t[i].shape[1])
		                               : json_pack("[I]", (json_int_t)t[i].shape[0]);
		json_object_set_new(h, t[i].name,
		                    json_pack("{s:s,s:o,s:[I,I]}", "dtype", t[i].dtype, "shape", shape, "data_offsets",
		                              (json_int_t)at, (json_int_t)(at + t[i].len + (uint64_t)t[i].lie)));
		at += t[i].len;
	}
	char *text = json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(h);
	size_t hl = strlen(text);
	for (int b = 0; b < 8; b++)
		out[b] = (unsigned char)((uint64_t)hl >> (8 * b));
	memcpy(out + 8, text, hl);
	free(text);
	size_t o = 8 + hl;
	for (size_t i = 0; i < n; i++) {
		memcpy(out + o, t[i].data, t[i].len);
		o += t[i].len;
	}
	return o;
}

static const char *LAYERS = "{\"3\":{\"experts\":16,\"top_k\":4,\"shared\":0,\"scoring\":\"softmax\","
                            "\"renormalize\":true,\"groups\":0,\"topk_group\":0,\"min_batch\":1,\"bias\":null}}";

static float logits_of[4][ROWS * E];
static int32_t ids_of[4][ROWS * K];

/* A good chunk with calls seq0 and seq0+1 of layer 3 (F32 logits, I32 ids). */
static size_t good_chunk(unsigned char *out, int seq0)
{
	tens t[4];
	memset(t, 0, sizeof(t));
	for (int c = 0; c < 2; c++) {
		make_call(seq0 + c, logits_of[seq0 + c], ids_of[seq0 + c]);
		snprintf(t[2 * c].name, sizeof(t[0].name), "c%d.logits", seq0 + c);
		t[2 * c] = (tens){.dtype = "F32", .shape = {ROWS, E}, .ndim = 2, .data = logits_of[seq0 + c],
		                  .len = sizeof(logits_of[0])};
		snprintf(t[2 * c].name, sizeof(t[0].name), "c%d.logits", seq0 + c);
		t[2 * c + 1] = (tens){.dtype = "I32", .shape = {ROWS, K}, .ndim = 2, .data = ids_of[seq0 + c],
		                      .len = sizeof(ids_of[0])};
		snprintf(t[2 * c + 1].name, sizeof(t[0].name), "c%d.ids", seq0 + c);
	}
	char calls[128];
	snprintf(calls, sizeof(calls), "[{\"seq\":%d,\"layer\":3,\"k0\":2},{\"seq\":%d,\"layer\":3,\"k0\":2}]", seq0,
	         seq0 + 1);
	return chunk(out, "oeapatch-routing", LAYERS, calls, t, 4);
}

static unsigned char file[1 << 16];

/* Adds `size` bytes of `file`; returns the reader's result, the error message in msg. */
static int read_bytes(oeap_recording *rec, size_t size, char *msg, size_t msglen)
{
	oeap_error err;
	oeap_error_clear(&err);
	int rc = oeap_recording_add_bytes(rec, "rec.safetensors", file, size, &err);
	snprintf(msg, msglen, "%s", rc ? err.message : "");
	return rc;
}

/* Two good chunks (calls 0-3 of layer 3), read into rec. */
static void read_two_chunks(oeap_recording *rec)
{
	size_t a = good_chunk(file, 0);
	size_t b = good_chunk(file + a, 2);
	char msg[1024];
	memset(rec, 0, sizeof(*rec));
	assert_int_equal(read_bytes(rec, a + b, msg, sizeof(msg)), 0);
}

static void test_reads_chunks(void **state)
{
	(void)state;
	oeap_recording rec;
	read_two_chunks(&rec);
	assert_int_equal(rec.ncalls, 4);
	assert_int_equal(rec.nlayers, 1);
	assert_int_equal(rec.layers[0].id, 3);
	assert_int_equal(rec.layers[0].experts, E);
	assert_int_equal(rec.rows, 4 * ROWS);
	assert_int_equal(rec.files[0].chunks, 2);
	assert_int_equal(rec.files[0].cut_bytes, 0);
	assert_string_equal(rec.files[0].prefix, "SGLANG_OEA_");
	assert_int_equal(rec.calls[3].seq, 3);
	assert_memory_equal(rec.calls[3].logits, logits_of[3], sizeof(logits_of[3]));
	oeap_recording_free(&rec);
}

/* A crash cuts the last chunk anywhere: every cut keeps the first chunk and says what it ignored; a cut
 * inside the first chunk is an error. */
static void test_cut_tail(void **state)
{
	(void)state;
	size_t a = good_chunk(file, 0);
	size_t b = good_chunk(file + a, 2);
	char msg[1024];
	for (size_t cut = 1; cut < b; cut++) {
		oeap_recording rec = {0};
		assert_int_equal(read_bytes(&rec, a + cut, msg, sizeof(msg)), 0);
		assert_int_equal(rec.ncalls, 2);
		assert_int_equal(rec.files[0].cut_bytes, cut);
		assert_true(rec.files[0].cut_reason[0] != '\0');
		oeap_recording_free(&rec);
	}
	for (size_t cut = 0; cut < a; cut++) {
		oeap_recording rec = {0};
		assert_int_equal(read_bytes(&rec, cut, msg, sizeof(msg)), -1);
		assert_non_null(strstr(msg, cut ? "no complete chunk" : "empty"));
		assert_int_equal(rec.nfiles, 0);
		oeap_recording_free(&rec);
	}
}

/* Each way a header can be wrong: the error names it, and nothing of the file is kept. */
static void test_refuses(void **state)
{
	(void)state;
	static float lg[ROWS * E];
	static int32_t id32[ROWS * K];
	static const struct {
		const char *format, *layers, *calls;
		const char *ldtype;
		int64_t lie;
		int64_t rows_ids;
		const char *expect;
	} cases[] = {
		{NULL, NULL, NULL, "F32", 0, ROWS, "not an oeapatch routing recording"},
		{"safetensors", NULL, NULL, "F32", 0, ROWS, "not an oeapatch routing recording"},
		{"oeapatch-routing", NULL, NULL, "I32", 0, ROWS, "dtype I32, which its role does not take"},
		{"oeapatch-routing", NULL, NULL, "F64", 0, ROWS, "dtype F64"},
		{"oeapatch-routing", NULL, NULL, "F32", 4, ROWS, "lies about its sizes"},
		{"oeapatch-routing", NULL, NULL, "F32", -4, ROWS, "lies about its sizes"},
		{"oeapatch-routing", NULL, NULL, "F32", 0, ROWS - 1, "has shape [4, 4]"},
		{"oeapatch-routing", "{\"3\":{\"experts\":0}}", NULL, "F32", 0, ROWS, "\"experts\" must be an integer"},
		{"oeapatch-routing", "[]", NULL, "F32", 0, ROWS, "\"layers\" is not a JSON object"},
		{"oeapatch-routing", NULL, "[{\"seq\":0,\"layer\":9,\"k0\":2}]", "F32", 0, ROWS, "layer 9"},
		{"oeapatch-routing", NULL, "[{\"seq\":1,\"layer\":3,\"k0\":2}]", "F32", 0, ROWS, "\"c1.logits\" is missing"},
		{"oeapatch-routing", NULL, "[]", "F32", 0, ROWS, "belongs to no call"},
		{"oeapatch-routing", NULL, "[{\"seq\":0,\"layer\":3,\"k0\":2},{\"seq\":0,\"layer\":3,\"k0\":2}]", "F32", 0,
		 ROWS, "belongs to two calls"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		tens t[2] = {{.name = "c0.logits", .dtype = cases[i].ldtype, .shape = {ROWS, E}, .ndim = 2, .data = lg,
		              .len = sizeof(lg), .lie = cases[i].lie},
		             {.name = "c0.ids", .dtype = "I32", .shape = {cases[i].rows_ids, K}, .ndim = 2, .data = id32,
		              .len = (size_t)cases[i].rows_ids * K * 4}};
		/* a good chunk first: an error later in the file still keeps nothing of it */
		size_t g = good_chunk(file, 0);
		size_t n = chunk(file + g, cases[i].format, cases[i].layers ? cases[i].layers : LAYERS,
		                 cases[i].calls ? cases[i].calls : "[{\"seq\":0,\"layer\":3,\"k0\":2}]", t, 2);
		oeap_recording rec = {0};
		char msg[1024];
		assert_int_equal(read_bytes(&rec, g + n, msg, sizeof(msg)), -1);
		if (!strstr(msg, cases[i].expect))
			fail_msg("case %zu: \"%s\" lacks \"%s\"", i, msg, cases[i].expect);
		assert_non_null(strstr(msg, "chunk 1"));
		assert_int_equal(rec.ncalls, 0);
		assert_int_equal(rec.nlayers, 0);
		oeap_recording_free(&rec);
	}
}

static void test_refuses_bytes(void **state)
{
	(void)state;
	char msg[1024];
	oeap_recording rec = {0};
	/* a header length of 2^40 */
	memset(file, 0, 16);
	file[5] = 1;
	assert_int_equal(read_bytes(&rec, 16, msg, sizeof(msg)), -1);
	assert_non_null(strstr(msg, "not a recording"));
	/* JSON that is not an object, and bytes that are not JSON */
	static const char *bad[] = {"[1,2]", "{\"a\":", "\xff\xfe"};
	for (size_t i = 0; i < 3; i++) {
		size_t l = strlen(bad[i]);
		memset(file, 0, 8);
		file[0] = (unsigned char)l;
		memcpy(file + 8, bad[i], l);
		assert_int_equal(read_bytes(&rec, 8 + l, msg, sizeof(msg)), -1);
		assert_non_null(strstr(msg, "not a JSON object"));
	}
	oeap_recording_free(&rec);
}

/* The engine against liboea: the recorded batching at k0=2 adds what oea_route_host adds over the same calls. */
static void test_replay_is_liboea(void **state)
{
	(void)state;
	oeap_recording rec;
	read_two_chunks(&rec);
	oeap_replay_opts o = {.k0 = {2}, .nk0 = 1, .batch = {3, 20}, .nbatch = 2, .ep = 2};
	oeap_replay r = {0};
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_replay_run(&rec, &o, &r, &err), 0);
	oea_totals want = {0};
	for (int c = 0; c < 4; c++) {
		int32_t ids[ROWS * K];
		float w[ROWS * K];
		memcpy(ids, ids_of[c], sizeof(ids));
		oea_problem p = {.struct_size = sizeof(p), .n = ROWS, .num_experts = E, .top_k = K, .k0 = 2,
		                 .scoring = OEA_SCORING_SOFTMAX, .renormalize = 1, .logits_dtype = OEA_DTYPE_F32,
		                 .logits_row_stride = E, .logits = logits_of[c], .ids_dtype = OEA_DTYPE_I32,
		                 .weights_dtype = OEA_DTYPE_F32, .ids_row_stride = K, .weights_row_stride = K, .ids = ids,
		                 .weights = w, .min_valid_rows = 1, .totals = &want};
		assert_int_equal(oea_route_host(&p), OEA_OK);
	}
	assert_memory_equal(&oeap_replay_at(&r, 0, 0)->tot, &want, sizeof(want));
	assert_int_equal(r.nmodes, 3);
	/* 20 rows of layer 3: six batches of 3 (2 left over), one of 20 */
	assert_int_equal(oeap_replay_at(&r, 1, 0)->tot.calls, 6);
	assert_int_equal(r.left_over[1], 2);
	assert_int_equal(oeap_replay_at(&r, 2, 0)->tot.calls, 1);
	assert_int_equal(oeap_replay_at(&r, 2, 0)->tot.valid_rows, 20);
	/* EP: two ranks of 8 experts; the busiest holds at most 8 */
	assert_true(oeap_replay_at(&r, 2, 0)->ep_before <= 8);
	assert_true(oeap_replay_at(&r, 2, 0)->ep_after <= oeap_replay_at(&r, 2, 0)->ep_before);
	oeap_replay_free(&r);
	oeap_recording_free(&rec);
}

/* Rule 10's percentile and the bands: a handmade replay of three batch sizes. */
static void test_recommend(void **state)
{
	(void)state;
	oeap_replay_cell cells[4 * 2];
	memset(cells, 0, sizeof(cells));
	oeap_replay r = {.nk0 = 2, .nmodes = 4, .k0 = {3, 4}, .mode = {0, 1, 8, 32}, .cells = cells, .max_routed = 8};
	/* batch 1: even k0=4 keeps too little; 8: k0=4 does; 32: k0=3 does */
	struct {
		size_t m, k;
		int bucket; /* all rows in one bucket */
	} fill[] = {{1, 0, 3}, {1, 1, 5}, {2, 0, 6}, {2, 1, 9}, {3, 0, 10}, {3, 1, 12}};
	for (size_t i = 0; i < sizeof(fill) / sizeof(fill[0]); i++) {
		oea_totals *t = &oeap_replay_at(&r, fill[i].m, fill[i].k)->tot;
		t->kept_hist[fill[i].bucket] = 100;
		t->rerouted_rows = 100;
		t->t_before = 100;
		t->t_after = 60;
		t->calls = 10;
	}
	/* bucket 9 is [0.93, 0.95): 5% of the way in, 0.931 */
	assert_true(oeap_kept_quantile(&oeap_replay_at(&r, 2, 1)->tot, 0.05) > 0.9309 &&
	            oeap_kept_quantile(&oeap_replay_at(&r, 2, 1)->tot, 0.05) < 0.9311);
	oeap_recommendation rc;
	oeap_recommend(&r, NULL, 0.9, &rc);
	assert_string_equal(rc.value, "1-7:0,8-31:4,32-:3");
	assert_int_equal(rc.nbands, 3);
	oeap_k0_bands back;
	char why[128];
	assert_int_equal(oeap_k0_bands_parse(rc.value, 15, &back, why, sizeof(why)), 0);
	assert_int_equal(back.n, 3);
	for (size_t i = 0; i < back.n; i++) {
		assert_int_equal(back.band[i].lo, rc.bands[i].lo);
		assert_int_equal(back.band[i].hi, rc.bands[i].hi);
		assert_int_equal(back.band[i].k0, rc.bands[i].k0);
	}
	oeap_recommend(&r, NULL, 0.5, &rc);
	assert_string_equal(rc.value, "3");
}

/* K0 bands: what parses, what is refused and why, which k0 a call of n rows gets; and the recommendation's
 * value parses back to its bands. */
static void test_k0_bands(void **state)
{
	(void)state;
	oeap_k0_bands b;
	char why[256];
	assert_int_equal(oeap_k0_bands_parse("1-7:0,8-31:4,32-:3", 15, &b, why, sizeof(why)), 0);
	assert_int_equal(b.n, 3);
	assert_int_equal(oeap_k0_bands_pick(&b, 1), 0);
	assert_int_equal(oeap_k0_bands_pick(&b, 7), 0);
	assert_int_equal(oeap_k0_bands_pick(&b, 8), 4);
	assert_int_equal(oeap_k0_bands_pick(&b, 31), 4);
	assert_int_equal(oeap_k0_bands_pick(&b, 1000), 3);
	assert_int_equal(oeap_k0_bands_parse("3", 15, &b, why, sizeof(why)), 0);
	assert_int_equal(oeap_k0_bands_pick(&b, 5), 3);
	assert_int_equal(oeap_k0_bands_parse("1-1:0,2-:2", 15, &b, why, sizeof(why)), 0);
	static const struct {
		const char *s, *why;
	} bad[] = {
		{"2-:3", "must start at 1"},       {"1-5:3,7-:2", "not at 6"},    {"1-5:3,6-9:2", "must be open"},
		{"1-5:3,6-:16", "from 0 to 15"},   {"1-:3,4-:2", "only the last"}, {"1-5:3;6-:2", "separated by ','"},
		{"", "expected LO-HI:K0"},         {"16", "expected LO-HI:K0"},    {"1-0:2,1-:3", "not below 1"},
		{" 1-:3", "expected LO-HI:K0"},    {"1-:-1", "from 0 to 15"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why[0] = '\0';
		assert_int_equal(oeap_k0_bands_parse(bad[i].s, 15, &b, why, sizeof(why)), -1);
		if (!strstr(why, bad[i].why))
			fail_msg("'%s': \"%s\" lacks \"%s\"", bad[i].s, why, bad[i].why);
	}
}

/* --bands replays the recorded calls with k0 by rows: one band is that k0's recorded cell, exactly. */
static void test_replay_bands(void **state)
{
	(void)state;
	oeap_recording rec;
	read_two_chunks(&rec);
	oeap_k0_bands b;
	char why[64];
	assert_int_equal(oeap_k0_bands_parse("1-:2", 15, &b, why, sizeof(why)), 0);
	oeap_replay_opts o = {.k0 = {2, 3}, .nk0 = 2, .batch = {4}, .nbatch = 1, .bands = &b};
	oeap_replay r = {0};
	oeap_error err;
	oeap_error_clear(&err);
	assert_int_equal(oeap_replay_run(&rec, &o, &r, &err), 0);
	assert_true(r.has_bands);
	assert_memory_equal(&r.bands_cell.tot, &oeap_replay_at(&r, 0, 0)->tot, sizeof(oea_totals));
	oeap_replay_free(&r);
	/* rows 5 fall in the off band: routed unchanged, T after = T before, nothing re-routed */
	assert_int_equal(oeap_k0_bands_parse("1-5:0,6-:2", 15, &b, why, sizeof(why)), 0);
	memset(&r, 0, sizeof(r));
	assert_int_equal(oeap_replay_run(&rec, &o, &r, &err), 0);
	assert_int_equal(r.bands_cell.tot.calls, 4);
	assert_int_equal(r.bands_cell.tot.t_after, r.bands_cell.tot.t_before);
	assert_int_equal(r.bands_cell.tot.rerouted_rows, 0);
	oeap_replay_free(&r);
	oeap_recording_free(&rec);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reads_chunks),  cmocka_unit_test(test_cut_tail),
		cmocka_unit_test(test_refuses),       cmocka_unit_test(test_refuses_bytes),
		cmocka_unit_test(test_replay_is_liboea), cmocka_unit_test(test_recommend),
		cmocka_unit_test(test_k0_bands),      cmocka_unit_test(test_replay_bands),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
