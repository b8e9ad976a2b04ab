/*
 * recording.h - the reader of routing recordings (docs/recording.md): a
 * sequence of self-contained safetensors chunks that the binding appends,
 * one file per process. The reader maps each file read-only, checks every
 * chunk's header against the format (a file that is not ours, a dtype or a
 * shape that does not fit the role, byte ranges that lie about the sizes:
 * an error naming the file, chunk and byte), and indexes the calls; the
 * tensors' bytes stay in the mapping until oeap_recording_free(). A last
 * chunk cut short (a crash, a full disk) is not an error: the complete
 * chunks before it are kept and the file's `cut_bytes`/`cut_reason` say
 * what was ignored.
 */
#ifndef OEAP_RECORDING_H
#define OEAP_RECORDING_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* The format tag and version this reader knows (docs/recording.md). */
#define OEAP_RECORDING_FORMAT "oeapatch-routing"
#define OEAP_RECORDING_VERSION "1"
/* The largest chunk header accepted: a header beyond this is damage, not a recording. */
#define OEAP_RECORDING_MAX_HEADER (64u << 20)

/* A MoE layer's settings (the same in every chunk and file that names it). */
typedef struct oeap_rec_layer {
	int64_t id;          /* the framework's layer number */
	int32_t experts;     /* E */
	int32_t top_k;       /* K: routed + shared columns */
	int32_t shared;      /* S */
	int32_t scoring;     /* OEA_SCORING_* */
	int32_t renormalize; /* 0 or 1 */
	int32_t groups;      /* num_expert_group, 0 = none */
	int32_t topk_group;
	int32_t min_batch;   /* the live gate */
	int has_bias;
} oeap_rec_layer;

/* One recorded call: its valid rows' logits and ids, pointing into a file's mapping. */
typedef struct oeap_rec_call {
	uint64_t seq;        /* the process's call number */
	uint32_t layer;      /* index into oeap_recording.layers */
	uint32_t file;       /* index into oeap_recording.files */
	int32_t rows;
	int32_t k0;          /* the live k0 (0: off) */
	int32_t logits_dtype;/* OEA_DTYPE_F32 / BF16 / F16 */
	int32_t ids_dtype;   /* OEA_DTYPE_I32 / I64 */
	const unsigned char *logits; /* rows * E elements, little-endian, possibly unaligned */
	const unsigned char *ids;    /* rows * K elements */
	const float *bias;   /* E floats owned by the recording (aligned), or NULL */
} oeap_rec_call;

/* What one file held. */
typedef struct oeap_rec_file {
	char *path;
	char framework[16];  /* "sglang", "vllm" (as the file says) */
	char prefix[32];     /* the binding's settings prefix, the definition's env_prefix (as the file says; "" when absent) */
	long rank;
	size_t chunks;       /* complete chunks read */
	size_t calls;
	uint64_t dropped;    /* the writer's count, from the last complete chunk */
	uint64_t graph_missed;
	uint64_t cut_bytes;  /* bytes of an incomplete last chunk, ignored */
	char cut_reason[200];
	void *map;
	size_t map_size;
} oeap_rec_file;

typedef struct oeap_recording {
	oeap_rec_file *files;
	size_t nfiles;
	oeap_rec_layer *layers;
	size_t nlayers;
	oeap_rec_call *calls;
	size_t ncalls, calls_cap;
	float **biases;      /* owned copies, one per layer per chunk */
	size_t nbiases, biases_cap;
	uint64_t rows;       /* over all calls */
} oeap_recording;

/* Maps `path` and adds its calls to `rec` (zeroed before the first call). On
 * error `rec` keeps what earlier files added and nothing of this one. */
int oeap_recording_add_file(oeap_recording *rec, const char *path, oeap_error *err);

/* The same for bytes in memory (`name` names them in errors; the bytes must
 * outlive `rec`): the fuzz target's door. */
int oeap_recording_add_bytes(oeap_recording *rec, const char *name, const unsigned char *data, size_t size,
                             oeap_error *err);

void oeap_recording_free(oeap_recording *rec);

/* Bytes per element of an OEA_DTYPE_* code (0 for an unknown one). */
size_t oeap_rec_dtype_size(int32_t dtype);

#endif
