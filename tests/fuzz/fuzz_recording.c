/*
 * fuzz_recording - the routing-recording reader (src/recording.c) and the
 * replay engine (src/replay.c) on arbitrary bytes.
 *
 * For any input the reader either refuses with an input error that names
 * the file and keeps nothing of it, or returns calls whose tensors lie
 * wholly inside the input, of liboea's dtypes and limits, each naming a
 * layer it read. A recording it accepts replays (recorded, and regrouped
 * into 1 and 3 rows, with two expert-parallel ranks) without liboea
 * refusing a batch, and the sums add up: every batch is a call, the rows of
 * the recorded batching are the recording's rows, and T after never exceeds
 * T before by more than the fillers of rule 5 allow.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "recording.h"
#include "replay.h"

#define CHECK(cond, ...)                                                 \
	do {                                                                 \
		if (!(cond)) {                                                   \
			fprintf(stderr, "fuzz_recording: %s: ", #cond);              \
			fprintf(stderr, __VA_ARGS__);                                \
			fputc('\n', stderr);                                         \
			__builtin_trap();                                            \
		}                                                                \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	oeap_recording rec;
	memset(&rec, 0, sizeof(rec));
	oeap_error err;
	oeap_error_clear(&err);
	if (oeap_recording_add_bytes(&rec, "fuzz.safetensors", data, size, &err)) {
		CHECK(err.kind == OEAP_ERR_INPUT, "kind %d: %s", (int)err.kind, err.message);
		CHECK(strstr(err.where, "fuzz.safetensors") != NULL, "%s", err.where);
		CHECK(rec.nfiles == 0 && rec.ncalls == 0 && rec.nlayers == 0 && rec.nbiases == 0, "a refused file kept %zu calls",
		      rec.ncalls);
		oeap_recording_free(&rec);
		return 0;
	}
	uint64_t rows = 0;
	for (size_t i = 0; i < rec.ncalls; i++) {
		const oeap_rec_call *c = &rec.calls[i];
		CHECK(c->layer < rec.nlayers, "call %zu: layer %u", i, c->layer);
		const oeap_rec_layer *l = &rec.layers[c->layer];
		CHECK(c->rows >= 0 && c->rows <= OEA_MAX_ROWS, "rows %d", c->rows);
		CHECK(l->experts >= 1 && l->experts <= OEA_MAX_EXPERTS && l->top_k >= 1 && l->top_k <= OEA_MAX_TOPK &&
		          l->shared < l->top_k,
		      "layer shape %d %d %d", l->experts, l->top_k, l->shared);
		size_t lb = (size_t)c->rows * (size_t)l->experts * oeap_rec_dtype_size(c->logits_dtype);
		size_t ib = (size_t)c->rows * (size_t)l->top_k * oeap_rec_dtype_size(c->ids_dtype);
		CHECK(c->logits >= data && c->logits + lb <= data + size, "logits of call %zu outside the input", i);
		CHECK(c->ids >= data && c->ids + ib <= data + size, "ids of call %zu outside the input", i);
		CHECK(c->logits_dtype == OEA_DTYPE_F32 || c->logits_dtype == OEA_DTYPE_BF16 || c->logits_dtype == OEA_DTYPE_F16,
		      "logits dtype %d", c->logits_dtype);
		CHECK(c->ids_dtype == OEA_DTYPE_I32 || c->ids_dtype == OEA_DTYPE_I64, "ids dtype %d", c->ids_dtype);
		CHECK((c->bias != NULL) == (l->has_bias != 0), "bias of call %zu", i);
		rows += (uint64_t)c->rows;
	}
	CHECK(rows == rec.rows, "rows %llu != %llu", (unsigned long long)rows, (unsigned long long)rec.rows);
	CHECK(rec.nfiles == 1 && rec.files[0].chunks >= 1 && rec.files[0].cut_bytes < size + 1, "file");
	if (rec.rows > 20000) { /* keep each input fast */
		oeap_recording_free(&rec);
		return 0;
	}
	oeap_replay_opts o = {.k0 = {1, 2}, .nk0 = 2, .batch = {1, 3}, .nbatch = 2, .ep = 2};
	oeap_replay r;
	memset(&r, 0, sizeof(r));
	int rc = oeap_replay_run(&rec, &o, &r, &err);
	CHECK(rc == 0, "a recording the reader took was refused by the replay: %s", err.message);
	for (size_t k = 0; k < r.nk0; k++) {
		const oea_totals *t = &oeap_replay_at(&r, 0, k)->tot;
		CHECK(t->calls == rec.ncalls, "recorded batching: %llu batches for %zu calls", (unsigned long long)t->calls,
		      rec.ncalls);
		CHECK(t->valid_rows + t->invalid_rows <= rec.rows, "rows");
		for (size_t m = 0; m < r.nmodes; m++) {
			const oeap_replay_cell *c = oeap_replay_at(&r, m, k);
			CHECK(c->ep_after <= c->tot.calls * OEA_MAX_EXPERTS && c->ep_before <= c->tot.calls * OEA_MAX_EXPERTS,
			      "EP");
		}
	}
	oeap_replay_free(&r);
	oeap_recording_free(&rec);
	return 0;
}
