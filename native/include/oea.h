/*
 * oea.h - the C ABI of liboea, the Opportunistic Expert Activation router.
 *
 * The specification of what is computed is docs/oea-semantics.md; the ABI
 * details are in docs/native-abi.md. This header is the contract between the
 * library and its two callers: the Python binding that oeapatch inserts into
 * the target framework (it mirrors `oea_problem` with ctypes) and the tests.
 *
 * ABI rules
 *  - OEA_ABI_VERSION is bumped on any incompatible change of this header.
 *    `oea_abi_version()` returns the version the library was built with; a
 *    caller compares it with the version it was written for before any call.
 *  - `oea_problem.struct_size` must be sizeof(oea_problem) as the caller knows
 *    it; fields are only ever appended, so a larger library can serve an older
 *    caller. A size smaller than version 1's struct (OEA_PROBLEM_SIZE_V1) is
 *    refused; a size of at least V1 but below sizeof(oea_problem) is read as
 *    the largest older struct it covers (V1 or V2), the missing fields taking
 *    their zero meaning (an ABI 1 caller gets min_valid_rows = 0: no gate; an
 *    ABI 1 or 2 caller gets totals = NULL: no sums). The library never reads
 *    past struct_size.
 *  - No global mutable state: any number of models, threads and streams may
 *    call concurrently. Nothing is allocated, nothing is cached.
 *
 * Memory
 *  - oea_route_host: every pointer is host memory.
 *  - oea_route_cuda: every pointer (logits, bias, ids, weights, num_valid_rows,
 *    stats, totals) is device memory (or managed/host-mapped memory the device can
 *    read); the call is one kernel launch on `stream` (a cooperative launch
 *    when n > 8: the kernel's blocks meet at one grid barrier before the
 *    in-place writes), performs no allocation, no synchronisation and never
 *    reads device data from the host, so it may be captured in a CUDA graph.
 *    *num_valid_rows and the ids must not change while the kernel runs (each
 *    block reads them). Argument errors are detected on the host from the
 *    scalar fields before the launch.
 *
 * What a call computes is specified in docs/oea-semantics.md; its rule
 * numbers are cited here rather than restated:
 *  - which rows are processed (padding, invalid rows, num_valid_rows):
 *    "Processed rows"; unprocessed rows are never written;
 *  - key, order, NaN and -inf: "Key" and "Order"; non-finite rows counted
 *    in stats->nonfinite_rows, or (host path only) refused with
 *    OEA_ERR_NONFINITE under OEA_FLAG_REJECT_NONFINITE; the CUDA path
 *    answers OEA_ERR_INVALID_ARGUMENT for that flag;
 *  - the minimum-batch gate (ABI 2): rule 3; the output (selection, distinct
 *    fillers with weight +0, order, weights, the canonical NaN): rules 4-7;
 *    k0 >= R writes nothing but stats and totals;
 *  - stats (T before/after, t_after = max(|U|, R) when rows were rewritten):
 *    rule 8;
 *  - the kept weight and changed slots of a re-routed row and the totals a
 *    call adds (ABI 3): rules 9 and 10.
 * The result is bit for bit the same on both paths (docs/native-abi.md,
 * "Semantics decisions").
 */
#ifndef OEA_H
#define OEA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define OEA_API __declspec(dllexport)
#else
#define OEA_API __attribute__((visibility("default")))
#endif

#define OEA_ABI_VERSION 3

/* Limits of one call (bounded so that every scratch array has a fixed size). */
#define OEA_MAX_ROWS 1024
#define OEA_MAX_EXPERTS 512
#define OEA_MAX_TOPK 16

typedef enum oea_status {
	OEA_OK = 0,
	OEA_ERR_NULL_ARGUMENT = 1,    /* p, or (n > 0) logits/ids/weights is NULL */
	OEA_ERR_STRUCT_SIZE = 2,      /* struct_size too small for this ABI */
	OEA_ERR_SHAPE = 3,            /* n, E, K or S out of range */
	OEA_ERR_K0 = 4,               /* k0 < 1 */
	OEA_ERR_DTYPE = 5,            /* unsupported dtype code */
	OEA_ERR_STRIDE = 6,           /* a row stride shorter than its row */
	OEA_ERR_ALIGNMENT = 7,        /* a pointer not aligned to its element */
	OEA_ERR_SCORING = 8,          /* unknown scoring function */
	OEA_ERR_GROUPS = 9,           /* bad num_expert_group / topk_group */
	OEA_ERR_NONFINITE = 10,       /* NaN/inf logits or bias with OEA_FLAG_REJECT_NONFINITE */
	OEA_ERR_INVALID_ARGUMENT = 11,/* any other bad field (unknown flag, reserved_abi2 != 0 ...) */
	OEA_ERR_NO_CUDA = 12,         /* library built without CUDA */
	OEA_ERR_CUDA = 13,            /* the CUDA launch failed */
} oea_status;

typedef enum oea_dtype {
	OEA_DTYPE_F32 = 0,
	OEA_DTYPE_BF16 = 1,
	OEA_DTYPE_F16 = 2,
	OEA_DTYPE_I32 = 3,
	OEA_DTYPE_I64 = 4,
} oea_dtype;

typedef enum oea_scoring {
	OEA_SCORING_SOFTMAX = 0,
	OEA_SCORING_SIGMOID = 1,
} oea_scoring;

/* Flags (oea_problem.flags). */
#define OEA_FLAG_REJECT_NONFINITE 0x1u /* host path only, see above */
/* liboea 3.1.0 on (a 3.0.0 library refuses it: OEA_ERR_INVALID_ARGUMENT):
 * the call computes everything it would (the same stats and totals, bit for
 * bit) but writes neither ids nor weights; both are only read. Both paths.
 * A caller that wants the figures without changing the routing (shadow
 * mode) needs no copy of the tensors. */
#define OEA_FLAG_COUNT_ONLY 0x2u

/*
 * Per-call statistics, written (not accumulated) by the call when
 * oea_problem.stats is non-NULL. On the CUDA path this is device memory the
 * caller reads whenever it likes (no host sync is implied).
 */
typedef struct oea_stats {
	uint32_t t_before;       /* distinct experts in the valid rows' routed ids */
	uint32_t t_after;        /* distinct experts after re-routing (spec rule 8:
				    max(|U|, R); t_before when nothing was rewritten) */
	uint32_t valid_rows;     /* rows processed */
	uint32_t invalid_rows;   /* rows < num_valid_rows skipped for bad ids */
	uint32_t nonfinite_rows; /* processed rows with a NaN/inf logit or bias entry */
	uint32_t gated;          /* ABI 2: 1 when the min_valid_rows gate skipped the call */
	uint32_t reserved[2];    /* written as 0 */
} oea_stats;

/* Buckets of oea_totals.kept_hist (spec rule 10 gives the edges). */
#define OEA_KEPT_BUCKETS 16
/* kept_fx is the sum of kept * 2^OEA_KEPT_FX_BITS (each row's term truncated). */
#define OEA_KEPT_FX_BITS 24

/*
 * Running sums (ABI 3) that a call ADDS to when oea_problem.totals is
 * non-NULL: caller-owned memory (device memory on the CUDA path), zeroed by
 * the caller when it wants to start over; nothing is overwritten. Spec rule
 * 10 defines every field. The CUDA path adds with device atomics (integer:
 * the sums do not depend on the order of the adds), so any number of
 * launches, on any streams, may share one; the host path adds with plain
 * stores, so concurrent host calls must not share one.
 */
typedef struct oea_totals {
	uint64_t calls;          /* calls that returned OEA_OK */
	uint64_t gated;          /* of those, calls the min_valid_rows gate skipped */
	/* The next five: sums of oea_stats' fields over the calls not gated. */
	uint64_t t_before;
	uint64_t t_after;
	uint64_t valid_rows;
	uint64_t invalid_rows;
	uint64_t nonfinite_rows;
	/* Re-routed rows: processed rows of calls that rewrote rows (k0 < R,
	 * not gated). The kept figures are theirs. */
	uint64_t rerouted_rows;
	uint64_t changed_slots;  /* sum of the rows' changed slots */
	uint64_t kept_fx;        /* sum of min(kept, 65536) * 2^24, truncated per row */
	uint64_t kept_undefined; /* re-routed rows whose kept is undefined */
	uint64_t kept_hist[OEA_KEPT_BUCKETS]; /* rows with a defined kept, per bucket */
} oea_totals;

/*
 * One MoE layer, one step. Shapes: logits [n][E] (row stride in elements,
 * columns contiguous), ids and weights [n][K] (row strides in elements),
 * of which the first R = K - num_shared columns are routed experts and the
 * last num_shared columns fused shared experts (never read or written).
 * ids and weights are rewritten in place (read only under OEA_FLAG_COUNT_ONLY).
 */
typedef struct oea_problem {
	uint32_t struct_size;     /* sizeof(oea_problem) */
	uint32_t flags;           /* OEA_FLAG_* */

	int32_t n;                /* rows, 0 <= n <= OEA_MAX_ROWS (0: nothing to do) */
	int32_t num_experts;      /* E, 1..OEA_MAX_EXPERTS */
	int32_t top_k;            /* K, 1..OEA_MAX_TOPK (routed + shared columns) */
	int32_t num_shared;       /* S, 0 <= S < K */
	int32_t k0;               /* >= 1; k0 >= R leaves every row unchanged */
	int32_t scoring;          /* oea_scoring */
	int32_t renormalize;      /* 0 or 1 */
	int32_t num_expert_group; /* 0 = no grouping; else divides E */
	int32_t topk_group;       /* with grouping: 1..num_expert_group (validated only) */

	int32_t logits_dtype;     /* OEA_DTYPE_F32 / BF16 / F16 */
	int64_t logits_row_stride;/* >= E */
	const void *logits;

	const float *correction_bias; /* [E] fp32, or NULL */

	int32_t ids_dtype;        /* OEA_DTYPE_I32 / I64 */
	int32_t weights_dtype;    /* OEA_DTYPE_F32 */
	int64_t ids_row_stride;   /* >= K */
	int64_t weights_row_stride; /* >= K */
	void *ids;
	void *weights;

	const int32_t *num_valid_rows; /* scalar, or NULL = all n rows */
	oea_stats *stats;         /* or NULL */

	/* ---- ABI 2 (absent from an ABI 1 caller's struct: read as 0) ---- */
	int32_t min_valid_rows;   /* <= 0: no gate; else fewer processed rows = no rewrite */
	int32_t reserved_abi2;    /* must be 0 (OEA_ERR_INVALID_ARGUMENT otherwise) */

	/* ---- ABI 3 (absent from an ABI 1 or 2 caller's struct: read as NULL) ---- */
	oea_totals *totals;       /* sums to add to (8-byte aligned), or NULL */
} oea_problem;

/* sizeof(oea_problem) of ABI 1: the smallest struct_size accepted. */
#define OEA_PROBLEM_SIZE_V1 offsetof(oea_problem, min_valid_rows)
/* sizeof(oea_problem) of ABI 2 (136 bytes). */
#define OEA_PROBLEM_SIZE_V2 offsetof(oea_problem, totals)

/* The ABI version this library was built with (OEA_ABI_VERSION). */
OEA_API int oea_abi_version(void);

/* Library version string, for example "1.0.0"; static storage. */
OEA_API const char *oea_version(void);

/* 1 when this build contains the CUDA kernel, else 0. */
OEA_API int oea_has_cuda(void);

/* A human message for a status code; static storage, never NULL. */
OEA_API const char *oea_status_message(int status);

/*
 * Validates the scalar fields and pointers of `p` (not the data they point
 * to) exactly as both entry points do. Returns OEA_OK or the first error, in
 * the order documented in docs/native-abi.md. With n == 0 the three arrays
 * may be NULL.
 */
OEA_API int oea_problem_check(const oea_problem *p);

/* CPU reference: the oracle for every other path. Host memory only. */
OEA_API int oea_route_host(const oea_problem *p);

/*
 * CUDA path: one launch on `stream` (a cudaStream_t; NULL = the legacy
 * default stream, which is not capturable: launching on it while another
 * stream captures a graph invalidates that capture; pass the capturing
 * stream, e.g. torch.cuda.current_stream().cuda_stream read at call time).
 * Returns OEA_ERR_NO_CUDA when the library was built without CUDA,
 * OEA_ERR_CUDA when there is no usable device or the launch itself failed
 * (the launch's own status; the runtime's last error is cleared then).
 * Kernel-side faults surface, as for any kernel, at the caller's next
 * synchronisation. With n == 0 (or k0 >= R, or min_valid_rows > n), stats ==
 * NULL and totals == NULL nothing is launched.
 */
OEA_API int oea_route_cuda(const oea_problem *p, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* OEA_H */
