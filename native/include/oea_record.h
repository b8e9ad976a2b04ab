/*
 * oea_record.h - liboea's routing recorder: the decode calls' routing inputs
 * written to a file of safetensors chunks (oeapatch's docs/recording.md is
 * the format; `oeapatch replay` reads it).
 *
 * Why in C: the binding calls oea_rec_call() from the forward through ctypes,
 * which releases Python's lock for the call; the copy, the queue and the
 * writer thread (encoding and writing whole chunks) then never hold that
 * lock, so neither the call nor the writer makes the forward wait on Python.
 *
 * The queue is a bounded ring of bytes (the calls' rows) and of entries (one
 * per call) under one mutex that the writer holds only to take or release
 * entries, never while it encodes or writes. A call that does not fit is
 * dropped and counted; nothing waits. On CUDA a call is two device-to-host
 * copies on the caller's stream into the ring (pinned at the first CUDA call)
 * and an event the writer waits on; a stream being captured into a CUDA graph
 * is not recorded (counted: graph_missed). A write error or the size cap
 * stops the recorder for good, with the reason kept.
 *
 * Forks: a child process inherits a recorder without its writer thread. In
 * the child, oea_rec_call drops every call (OEA_REC_DROPPED, not counted),
 * oea_rec_layer refuses (OEA_ERR_INVALID_ARGUMENT), oea_rec_figures_get
 * gives the figures as they were at the fork, and oea_rec_close frees the
 * child's copy at once (returns 0); nothing waits on the parent's lock or
 * writer, and the parent's file gets nothing from the child. A child that
 * records opens its own recorder (its own file).
 *
 * Ownership: oea_rec_open takes the file descriptor (closed by
 * oea_rec_close, also when open fails); the recorder copies everything it is
 * handed (settings, bias, the calls' rows) before returning.
 */
#ifndef OEA_RECORD_H
#define OEA_RECORD_H

#include <stdint.h>

#include "oea.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct oea_rec oea_rec;

/* What a recorder has done so far (oea_rec_figures). */
typedef struct oea_rec_figures {
	uint64_t calls;        /* oea_rec_call()s with a layer, recorded or not */
	uint64_t recorded;     /* calls written to the file */
	uint64_t dropped;      /* not recorded: queue full, cap reached, writer stopped */
	uint64_t graph_missed; /* made while the stream was captured into a CUDA graph */
	uint64_t written;      /* bytes in the file */
	uint64_t chunks;       /* chunks in the file */
	char stopped[256];     /* why it stopped writing ("" while it has not) */
} oea_rec_figures;

/* oea_rec_call's answers (a negative one is an oea_status of a refused call). */
#define OEA_REC_QUEUED 0
#define OEA_REC_DROPPED 1
#define OEA_REC_CAPTURING 2

/* A recorder appending chunks to fd (opened by the caller: O_APPEND, a new
 * file). framework, prefix: the chunks' metadata (ASCII); ring_bytes: memory
 * for queued calls (at least 1 MiB); chunk_bytes: calls' bytes per chunk
 * (written sooner after a second without calls, or at close); cap_bytes: the
 * file's limit (0: none). NULL when it cannot start (errno says why; fd is
 * closed). */
OEA_API oea_rec *oea_rec_open(int fd, const char *framework, const char *prefix, int32_t rank,
                              uint64_t ring_bytes, uint64_t chunk_bytes, uint64_t cap_bytes);

/* Declares a layer configuration and returns its handle (>= 0) for
 * oea_rec_call, or a negative oea_status. number: the layer's number in the
 * file; settings_json: its entry of the chunk's `layers` (a JSON object,
 * docs/recording.md; copied); bias: `experts` floats or NULL (copied, written
 * once per chunk as l<number>.bias); dtypes: OEA_DTYPE_* of the logits
 * (F32, BF16, F16) and of the ids (I32, I64). */
OEA_API int32_t oea_rec_layer(oea_rec *rec, int32_t number, const char *settings_json,
                              const float *bias, int32_t experts, int32_t columns,
                              int32_t logits_dtype, int32_t ids_dtype);

/* One call, as oea_rec_call reads it. A caller keeps one per layer and
 * writes only what changes per call (ctypes converts each argument of a
 * call at a cost; a prepared block costs one pointer). */
typedef struct oea_rec_args {
	int32_t layer;        /* oea_rec_layer's handle */
	int32_t k0;           /* the k0 the call was routed with (0: not routed) */
	int32_t n;            /* rows, padding included */
	int32_t experts;      /* the logits' width: the layer's */
	int32_t columns;      /* the ids' width: the layer's */
	int32_t valid_dtype;  /* OEA_DTYPE_I32 or _I64: of *valid_ptr */
	int32_t device;       /* < 0: host memory; else the CUDA device of every pointer */
	int32_t reserved;     /* 0 */
	int64_t logits_row_stride, ids_row_stride; /* in elements; columns are contiguous */
	int64_t valid_rows;   /* the valid rows when valid_ptr is NULL; < 0: all n */
	const void *logits, *ids;
	const void *valid_ptr; /* the valid rows' count (on `device`), or NULL */
	void *stream;          /* the cudaStream_t to copy on (NULL: the legacy default stream) */
} oea_rec_args;

/* Queues one call: n rows of logits [n, experts] and ids [n, columns] (the
 * layer's widths and dtypes); rows past the valid ones are not recorded.
 * Host memory is copied before the call returns; CUDA memory by
 * device-to-host copies on `stream` into the (pinned) ring, without
 * waiting. Returns OEA_REC_QUEUED, OEA_REC_DROPPED, OEA_REC_CAPTURING, or a
 * negative oea_status (a layer handle, width, stride or dtype that does not
 * match: nothing read). */
OEA_API int oea_rec_call(oea_rec *rec, const oea_rec_args *a);

/* The figures so far (a consistent snapshot). */
OEA_API void oea_rec_figures_get(oea_rec *rec, oea_rec_figures *out);

/* Writes what is queued, stops the writer, closes the file, puts the final
 * figures in *last (unless NULL) and frees the recorder; returns 0. If the
 * writer has not finished within timeout_ms (a write stuck on a dead disk)
 * returns 1 with the figures so far and leaves the recorder alive and taking
 * no more calls (the process is exiting: it is not freed). */
OEA_API int oea_rec_close(oea_rec *rec, int32_t timeout_ms, oea_rec_figures *last);

#ifdef __cplusplus
}
#endif

#endif /* OEA_RECORD_H */
